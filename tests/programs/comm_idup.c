/* MPI_Comm_idup: several duplicates started at once (in a different order
 * on even and odd ranks: they are on different communicators), of
 * MPI_COMM_WORLD, of a duplicate carrying attributes and MPI_ERRORS_RETURN,
 * of MPI_COMM_SELF, of a half of a split (each half has its own rank 0),
 * of a communicator freed before the idup completes, and of a result of an
 * earlier idup. While they are pending the program computes, splits
 * MPI_COMM_WORLD and duplicates a parent with the blocking calls, and uses
 * what those made; the idups are then completed by polling with
 * MPI_Testany while computing, or by MPI_Waitall. Each new communicator
 * must be congruent to its parent, carry the attributes copied at the
 * idup call (not those set after it), inherit the error handler, and work
 * for collectives and for point-to-point messages that must not match a
 * message of any other communicator (same source and tag on each). Plain
 * MPI (builds with any mpicc).
 *
 *   comm_idup [ROUNDS]   default 2 rounds; output: rank 0's summary, a
 *                        digest of every result, the same for every run
 *                        on the same number of ranks
 *   CID_KILL_AT=K        rank size-1 raises SIGKILL in round K while its
 *                        idups are pending, in its first incarnation only
 *                        (CHANMEM_INCARNATION)
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "testutil.h"

static int copies, deletes; /* callbacks of k_plus */

static int copy_plus_one(MPI_Comm comm, int keyval, void *extra, void *in, void *out, int *flag)
{
	(void)comm;
	(void)keyval;
	(void)extra;
	copies++;
	*(void **)out = (void *)((char *)in + 1);
	*flag = 1;
	return MPI_SUCCESS;
}

static int count_delete(MPI_Comm comm, int keyval, void *value, void *extra)
{
	(void)comm;
	(void)keyval;
	(void)value;
	(void)extra;
	deletes++;
	return MPI_SUCCESS;
}

static long get_attr(MPI_Comm c, int keyval, int *flag)
{
	void *v = NULL;
	TU_MPI(MPI_Comm_get_attr(c, keyval, &v, flag));
	return *flag ? (long)((char *)v - (char *)0) : -1;
}

static volatile double sink;
static int use_round; /* varies the values use() checks */

static void work(void)
{
	double x = sink;
	for (int i = 0; i < 20000; i++)
		x = x * 1.0000001 + 1e-9;
	sink = x;
}

/* Computes, polling with MPI_Testany, until every request has completed. */
static void compute_until_done(int n, MPI_Request *reqs)
{
	for (long polls = 0;; polls++) {
		int index, flag;
		work();
		TU_MPI(MPI_Testany(n, reqs, &index, &flag, MPI_STATUS_IGNORE));
		if (flag && index == MPI_UNDEFINED)
			return;
		TU_CHECK(polls < 100000000L, "idups still pending after %ld polls", polls);
	}
}

/* c must be a working duplicate of like (or like itself): congruent, and
 * collectives and a
 * ring of messages on it give the values they should. Folds the results
 * into *digest. */
static void use(MPI_Comm c, MPI_Comm like, int salt, const char *what, uint64_t *digest)
{
	salt += 11 * use_round;
	int cmp, P, r, lP, lr;
	TU_MPI(MPI_Comm_compare(c, like, &cmp));
	TU_CHECK(cmp == (c == like ? MPI_IDENT : MPI_CONGRUENT), "%s: compares as %d", what, cmp);
	TU_MPI(MPI_Comm_size(c, &P));
	TU_MPI(MPI_Comm_rank(c, &r));
	TU_MPI(MPI_Comm_size(like, &lP));
	TU_MPI(MPI_Comm_rank(like, &lr));
	TU_CHECK(P == lP && r == lr, "%s: rank %d of %d, parent %d of %d", what, r, P, lr, lP);

	long mine = (long)r * salt + 1, sum = 0;
	TU_MPI(MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, c));
	long want = (long)P * (P - 1) / 2 * salt + P;
	TU_CHECK(sum == want, "%s: MPI_Allreduce gave %ld, expected %ld", what, sum, want);
	int root = salt % P, value = r == root ? salt * 1000 + root : -1;
	TU_MPI(MPI_Bcast(&value, 1, MPI_INT, root, c));
	TU_CHECK(value == salt * 1000 + root, "%s: MPI_Bcast gave %d", what, value);

	int out[2] = {salt, r}, in[2] = {-1, -1};
	int right = (r + 1) % P, left = (r + P - 1) % P;
	TU_MPI(
	    MPI_Sendrecv(out, 2, MPI_INT, right, 7, in, 2, MPI_INT, left, 7, c, MPI_STATUS_IGNORE));
	TU_CHECK(in[0] == salt && in[1] == left, "%s: ring message (%d, %d), expected (%d, %d)",
	         what, in[0], in[1], salt, left);
	*digest = tu_hash_u64(tu_hash_u64(tu_hash_u64(*digest, (uint64_t)sum), (uint64_t)value),
	                      (uint64_t)in[0] * 1000 + (uint64_t)in[1]);
}

/* The same source and tag on each communicator, received in the reverse
 * order: a communicator sharing another's context would take its
 * message. */
static void isolated(MPI_Comm *comms, int n, uint64_t *digest)
{
	enum { MAX = 8 };
	MPI_Request reqs[MAX];
	int out[MAX], in[MAX];
	int P, r;
	TU_MPI(MPI_Comm_size(MPI_COMM_WORLD, &P));
	TU_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &r));
	for (int i = 0; i < n; i++) {
		out[i] = 100 * i + r;
		TU_MPI(MPI_Isend(&out[i], 1, MPI_INT, (r + 1) % P, 9, comms[i], &reqs[i]));
	}
	for (int i = n - 1; i >= 0; i--) {
		TU_MPI(
		    MPI_Recv(&in[i], 1, MPI_INT, (r + P - 1) % P, 9, comms[i], MPI_STATUS_IGNORE));
		TU_CHECK(in[i] == 100 * i + (r + P - 1) % P,
		         "communicator %d received %d: another communicator's message", i, in[i]);
		*digest = tu_hash_u64(*digest, (uint64_t)in[i]);
	}
	TU_MPI(MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE));
}

static void round_of(int round, int kill, int k_plus, int k_null, int k_late, uint64_t *digest)
{
	int even = tu_rank % 2 == 0;
	use_round = round;
	MPI_Comm base, gone, half;
	TU_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &base));
	TU_MPI(MPI_Comm_set_errhandler(base, MPI_ERRORS_RETURN));
	TU_MPI(MPI_Comm_set_attr(base, k_plus, (char *)0 + 30 + round));
	TU_MPI(MPI_Comm_set_attr(base, k_null, (char *)0 + 20));
	TU_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &gone));

	/* Started at once, in another order on odd ranks. */
	MPI_Comm w, b, s, g;
	MPI_Request req[5];
	int copies_before = copies;
	if (even) {
		TU_MPI(MPI_Comm_idup(MPI_COMM_WORLD, &w, &req[0]));
		TU_MPI(MPI_Comm_idup(base, &b, &req[1]));
	} else {
		TU_MPI(MPI_Comm_idup(base, &b, &req[1]));
		TU_MPI(MPI_Comm_idup(MPI_COMM_WORLD, &w, &req[0]));
	}
	TU_MPI(MPI_Comm_idup(MPI_COMM_SELF, &s, &req[2]));
	TU_MPI(MPI_Comm_idup(gone, &g, &req[3]));
	TU_MPI(MPI_Comm_free(&gone)); /* the idup still completes */
	TU_CHECK(copies == copies_before + 1, "%d copy callbacks at the idup calls",
	         copies - copies_before);
	/* After the call: not copied. */
	TU_MPI(MPI_Comm_set_attr(base, k_late, (char *)0 + 40));
	work();

	/* Blocking creations while the idups are pending, and their use. */
	MPI_Comm base2;
	TU_MPI(MPI_Comm_split(MPI_COMM_WORLD, tu_rank % 2, -tu_rank, &half));
	TU_MPI(MPI_Comm_dup(base, &base2));
	if (kill)
		raise(SIGKILL);
	use(half, half, 3, "a split made while idups were pending", digest);
	use(base2, base, 4, "a duplicate made while idups were pending", digest);
	MPI_Comm h;
	TU_MPI(MPI_Comm_idup(half, &h, &req[4]));
	work();

	if (round % 2 == 0) {
		compute_until_done(5, req);
	} else {
		work();
		TU_MPI(MPI_Waitall(5, req, MPI_STATUSES_IGNORE));
	}

	use(w, MPI_COMM_WORLD, 5, "idup of MPI_COMM_WORLD", digest);
	use(b, base, 6, "idup of a duplicate", digest);
	use(s, MPI_COMM_SELF, 7, "idup of MPI_COMM_SELF", digest);
	MPI_Comm world2;
	TU_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &world2));
	use(g, world2, 8, "idup of a communicator freed before it completed", digest);
	use(h, half, 9, "idup of a split half", digest);

	/* Attributes as at the idup call, the error handler inherited. */
	int flag;
	long v = get_attr(b, k_plus, &flag);
	TU_CHECK(flag && v == 31 + round, "copied attribute: %ld (flag %d)", v, flag);
	get_attr(b, k_null, &flag);
	TU_CHECK(!flag, "an attribute with a null copy function was copied");
	get_attr(b, k_late, &flag);
	TU_CHECK(!flag, "an attribute set after the idup call was copied");
	get_attr(w, k_plus, &flag);
	TU_CHECK(!flag, "an attribute of another communicator was copied");
	MPI_Errhandler eb, ew;
	TU_MPI(MPI_Comm_get_errhandler(b, &eb));
	TU_MPI(MPI_Comm_get_errhandler(w, &ew));
	TU_CHECK(eb == MPI_ERRORS_RETURN && ew == MPI_ERRORS_ARE_FATAL,
	         "error handlers not inherited");

	/* An idup of an idup's result, pending over a collective on its
	 * parent and a message on every other communicator. */
	MPI_Comm ww;
	MPI_Request rw;
	TU_MPI(MPI_Comm_idup(w, &ww, &rw));
	TU_MPI(MPI_Barrier(w));
	MPI_Comm comms[] = {MPI_COMM_WORLD, w, b, base, base2, g, world2};
	isolated(comms, 7, digest);
	TU_MPI(MPI_Wait(&rw, MPI_STATUS_IGNORE));
	use(ww, w, 10, "idup of an idup's result", digest);
	MPI_Comm all[] = {MPI_COMM_WORLD, w, b, base, base2, g, world2, ww};
	isolated(all, 8, digest);

	int deletes_before = deletes;
	MPI_Comm *frees[] = {&w, &b, &s, &g, &h, &ww, &half, &base2, &world2, &base};
	for (size_t i = 0; i < sizeof frees / sizeof *frees; i++)
		TU_MPI(MPI_Comm_free(frees[i]));
	/* k_plus on b, base2 (copied by MPI_Comm_dup) and base. */
	TU_CHECK(deletes == deletes_before + 3, "%d delete callbacks", deletes - deletes_before);
}

int main(int argc, char **argv)
{
	tu_init(&argc, &argv, "comm_idup");
	int rounds = argc > 1 ? (int)tu_arg_long(argv[1], 1, 1000, "ROUNDS", "[ROUNDS]") : 2;
	const char *kill_at = getenv("CID_KILL_AT");
	const char *inc = getenv("CHANMEM_INCARNATION");
	int first_life = !inc || atoi(inc) == 0;
	int k_plus, k_null, k_late;
	TU_MPI(MPI_Comm_create_keyval(copy_plus_one, count_delete, &k_plus, NULL));
	TU_MPI(
	    MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &k_null, NULL));
	TU_MPI(MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, &k_late, NULL));
	for (int round = 0; round < rounds; round++) {
		uint64_t digest = TU_HASH_INIT, all = 0;
		int kill =
		    kill_at && first_life && atoi(kill_at) == round && tu_rank == tu_size - 1;
		round_of(round, kill, k_plus, k_null, k_late, &digest);
		/* Every rank's digest, folded in rank order. */
		uint64_t *each = malloc((size_t)tu_size * sizeof *each);
		TU_CHECK(each, "out of memory");
		TU_MPI(
		    MPI_Gather(&digest, 1, MPI_UINT64_T, each, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD));
		if (tu_rank == 0) {
			all = TU_HASH_INIT;
			for (int r = 0; r < tu_size; r++)
				all = tu_hash_u64(all, each[r]);
			printf("round %d: 6 idups and their use: ok, digest %016llx\n", round,
			       (unsigned long long)all);
		}
		free(each);
	}
	TU_MPI(MPI_Comm_free_keyval(&k_plus));
	TU_MPI(MPI_Comm_free_keyval(&k_null));
	TU_MPI(MPI_Comm_free_keyval(&k_late));
	if (tu_rank == 0)
		printf("comm_idup: all checks passed\n");
	return tu_finalize();
}
