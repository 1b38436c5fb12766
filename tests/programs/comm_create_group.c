/* MPI_Comm_create_group: collective over the group only.
 *
 * usage: comm_create_group ROUNDS   (4 ranks or more)
 *
 * 1. The even ranks create a communicator of their own while the odd ranks
 *    wait for a message rank 0 sends only once the even communicator
 *    exists and has been used: if creating it needed an odd rank, the run
 *    would hang. The odd ranks then create theirs (with another tag).
 * 2. ROUNDS times, overlapping groups of three consecutive ranks (in a
 *    consistent order) are created from a communicator whose ranks are
 *    shuffled against the world's (a split with reversed keys), used and
 *    freed. In each, members send their rank to member 0, which takes them
 *    with MPI_ANY_SOURCE receives (timing decides the order) and
 *    broadcasts a digest that depends on that order; the same tag is used
 *    on the parent at the same time, and must not cross over.
 * 3. A non-member gets MPI_COMM_NULL without communicating; a bad tag is
 *    MPI_ERR_TAG.
 * First, MPI_Comm_dup_with_info / _set_info / _get_info: hints accepted,
 * none in use.
 * Every rank prints a line with the sums it saw (rank 0 prints them in
 * rank order). The digests of the wildcard order differ between runs, so
 * they are not printed: at the end all ranks check that the members of
 * every triple hold the same digest, which a re-executed member 0 that
 * matched in another order would break.
 *
 *   CG_KILL=R   rank R raises SIGKILL after round ROUNDS/2 (first
 *               incarnation only): it re-executes its creations and
 *               wildcard receives from the log. */
#include <mpi.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

enum { TAG_GO = 11, TAG_DATA = 12, TAG_EVEN = 5, TAG_ODD = 6 };

static MPI_Comm group_comm(MPI_Comm parent, const int *members, int n, int tag)
{
	MPI_Group pg, g;
	MPI_Comm out;
	TU_MPI(MPI_Comm_group(parent, &pg));
	TU_MPI(MPI_Group_incl(pg, n, members, &g));
	TU_MPI(MPI_Comm_create_group(parent, g, tag, &out));
	TU_MPI(MPI_Group_free(&g));
	TU_MPI(MPI_Group_free(&pg));
	return out;
}

int main(int argc, char **argv)
{
	tu_init(&argc, &argv, "comm_create_group");
	tu_require_size(4, 64);
	int rounds = argc > 1 ? atoi(argv[1]) : 0;
	TU_CHECK(rounds > 0 && rounds < 10000, "usage: comm_create_group ROUNDS");
	const char *kill = getenv("CG_KILL"), *inc = getenv("CHANMEM_INCARNATION");
	int kill_me = kill && atoi(kill) == tu_rank && (!inc || strcmp(inc, "0") == 0);
	int P = tu_size, me = tu_rank;
	char line[512];
	int len = snprintf(line, sizeof line, "rank %d:", me);

	/* Hints are accepted and ignored: a duplicate, an empty info in use. */
	MPI_Info hints, used;
	MPI_Comm dup;
	int nkeys = -1, cmp;
	TU_MPI(MPI_Info_create(&hints));
	TU_MPI(MPI_Info_set(hints, "no_any_tag", "true"));
	TU_MPI(MPI_Comm_dup_with_info(MPI_COMM_WORLD, hints, &dup));
	TU_MPI(MPI_Comm_set_info(dup, hints));
	TU_MPI(MPI_Comm_get_info(dup, &used));
	TU_MPI(MPI_Info_get_nkeys(used, &nkeys));
	TU_MPI(MPI_Comm_compare(dup, MPI_COMM_WORLD, &cmp));
	TU_CHECK(nkeys == 0 && cmp == MPI_CONGRUENT, "dup_with_info: %d hints in use, compare %d",
	         nkeys, cmp);
	TU_MPI(MPI_Info_free(&used));
	TU_MPI(MPI_Info_free(&hints));
	TU_MPI(MPI_Comm_free(&dup));

	/* 1. Parity groups, the odd ranks held back meanwhile. */
	int parity[64], n = 0;
	for (int r = me % 2; r < P; r += 2)
		parity[n++] = r;
	if (me % 2 == 0) {
		MPI_Comm even = group_comm(MPI_COMM_WORLD, parity, n, TAG_EVEN);
		int sum = 0, size;
		TU_MPI(MPI_Allreduce(&me, &sum, 1, MPI_INT, MPI_SUM, even));
		TU_MPI(MPI_Comm_size(even, &size));
		TU_CHECK(size == n, "even communicator of %d ranks, expected %d", size, n);
		if (me == 0)
			for (int r = 1; r < P; r += 2)
				TU_MPI(MPI_Send(&sum, 1, MPI_INT, r, TAG_GO, MPI_COMM_WORLD));
		len += snprintf(line + len, sizeof line - (size_t)len, " even-sum %d", sum);
		TU_MPI(MPI_Comm_free(&even));
	} else {
		int even_sum = -1, sum = 0;
		TU_MPI(
		    MPI_Recv(&even_sum, 1, MPI_INT, 0, TAG_GO, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
		MPI_Comm odd = group_comm(MPI_COMM_WORLD, parity, n, TAG_ODD);
		TU_MPI(MPI_Allreduce(&me, &sum, 1, MPI_INT, MPI_SUM, odd));
		len += snprintf(line + len, sizeof line - (size_t)len, " saw-even %d odd-sum %d",
		                even_sum, sum);
		TU_MPI(MPI_Comm_free(&odd));
	}

	/* 2. Overlapping triples of a shuffled parent. */
	MPI_Comm shuffled;
	TU_MPI(MPI_Comm_split(MPI_COMM_WORLD, 0, P - me, &shuffled));
	int srank;
	TU_MPI(MPI_Comm_rank(shuffled, &srank));
	long total = 0;
	uint64_t *lo = malloc((size_t)rounds * sizeof *lo),
	         *hi = malloc((size_t)rounds * sizeof *hi);
	TU_CHECK(lo && hi, "out of memory");
	for (int round = 0; round < rounds; round++) {
		lo[round] = UINT64_MAX; /* not a member: neutral for MIN and MAX */
		hi[round] = 0;
		int first = round % P;
		int members[3] = {first, (first + 1) % P, (first + 2) % P};
		int mine = -1;
		for (int i = 0; i < 3; i++)
			if (members[i] == srank)
				mine = i;
		/* The parent carries a message with the same tag meanwhile:
		 * shuffled rank s to s + 1, taken after the group's work. */
		MPI_Request pr[2];
		int pout = round * 1000 + srank, pin = -1;
		TU_MPI(
		    MPI_Irecv(&pin, 1, MPI_INT, (srank + P - 1) % P, TAG_DATA, shuffled, &pr[0]));
		TU_MPI(MPI_Isend(&pout, 1, MPI_INT, (srank + 1) % P, TAG_DATA, shuffled, &pr[1]));
		MPI_Comm g = MPI_COMM_NULL;
		if (mine >= 0) {
			g = group_comm(shuffled, members, 3, round);
			int grank;
			TU_MPI(MPI_Comm_rank(g, &grank));
			TU_CHECK(grank == mine, "rank %d in the triple, expected %d", grank, mine);
			int val = 100 * round + srank;
			uint64_t digest[2] = {TU_HASH_INIT, 0};
			if (grank == 0) {
				int got;
				MPI_Status st;
				digest[1] = (uint64_t)val;
				for (int k = 0; k < 2; k++) {
					TU_MPI(MPI_Recv(&got, 1, MPI_INT, MPI_ANY_SOURCE, TAG_DATA,
					                g, &st));
					TU_CHECK(got == 100 * round + members[st.MPI_SOURCE],
					         "round %d: got %d from %d", round, got,
					         st.MPI_SOURCE);
					digest[0] = tu_hash_u64(digest[0], (uint64_t)st.MPI_SOURCE);
					digest[1] += (uint64_t)got;
				}
			} else {
				TU_MPI(MPI_Send(&val, 1, MPI_INT, 0, TAG_DATA, g));
			}
			uint64_t root_digest[2];
			memcpy(root_digest, digest, sizeof digest);
			TU_MPI(MPI_Bcast(root_digest, 2, MPI_UINT64_T, 0, g));
			if (grank == 0)
				TU_CHECK(memcmp(root_digest, digest, sizeof digest) == 0,
				         "round %d: broadcast changed the digest", round);
			total += (long)root_digest[1];
			lo[round] = hi[round] = root_digest[0];
			TU_MPI(MPI_Comm_free(&g));
		}
		TU_MPI(MPI_Waitall(2, pr, MPI_STATUSES_IGNORE));
		TU_CHECK(pin == round * 1000 + (srank + P - 1) % P, "round %d: parent got %d",
		         round, pin);
		if (kill_me && round == rounds / 2)
			raise(SIGKILL);
	}
	len += snprintf(line + len, sizeof line - (size_t)len, " triples-total %ld", total);
	TU_MPI(MPI_Allreduce(MPI_IN_PLACE, lo, rounds, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD));
	TU_MPI(MPI_Allreduce(MPI_IN_PLACE, hi, rounds, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD));
	for (int round = 0; round < rounds; round++)
		TU_CHECK(lo[round] == hi[round],
		         "round %d: the triple's members hold different digests", round);
	free(lo);
	free(hi);

	/* 3. A non-member, and a bad tag. */
	int solo[1] = {(me + 1) % P};
	MPI_Comm none = group_comm(MPI_COMM_WORLD, solo, 1, 3);
	TU_CHECK(none == MPI_COMM_NULL, "a non-member got a communicator");
	MPI_Group wg;
	MPI_Comm bad;
	TU_MPI(MPI_Comm_group(MPI_COMM_WORLD, &wg));
	TU_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
	int rc = MPI_Comm_create_group(MPI_COMM_WORLD, wg, -1, &bad), cls;
	TU_MPI(MPI_Error_class(rc, &cls));
	TU_CHECK(cls == MPI_ERR_TAG, "tag -1 gave %s", tu_err_name(cls));
	TU_MPI(MPI_Group_free(&wg));
	TU_MPI(MPI_Comm_free(&shuffled));
	tu_print_ranked(line);
	return tu_finalize();
}
