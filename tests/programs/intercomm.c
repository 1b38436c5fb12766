/* Inter-communicators: MPI_COMM_WORLD split into even and odd world ranks
 * (group A and group B; with an odd number of ranks A is the larger),
 * joined by MPI_Intercomm_create, then used as a user would:
 * - the queries (MPI_Comm_test_inter, _size, _remote_size, _remote_group,
 *   _compare) and point-to-point messages named by remote rank, received
 *   from MPI_ANY_SOURCE with the sender's remote rank in the status;
 * - every collective an inter-communicator takes, in both directions
 *   (MPI_ROOT / MPI_PROC_NULL / the remote root), each result checked
 *   against a local computation: Barrier, Bcast, Reduce (a commutative op
 *   and a non-commutative user op, whose result depends on the order),
 *   Allreduce, Gather(v), Scatter(v), Allgather(v), Alltoall(v/w),
 *   Reduce_scatter(_block); Ibarrier, Ibcast, Iallreduce, Ialltoall
 *   pending at once;
 * - MPI_Intercomm_merge with each group first, MPI_Comm_dup (messages on
 *   the duplicate and the original never cross), MPI_Comm_idup (with a
 *   collective on the original while it is pending), MPI_Comm_split (with
 *   MPI_UNDEFINED and colors one group lacks) and MPI_Comm_create, a second
 *   inter-communicator with other leaders over another peer communicator;
 * - the calls that refuse an inter-communicator (MPI_Scan) or, under
 *   chanmem, an intra-communicator (MPI_Comm_remote_size, _remote_group,
 *   MPI_Intercomm_merge).
 * Plain MPI (builds with any mpicc).
 *
 *   intercomm [ROUNDS [COUNT]]  default 2 rounds, COUNT ints in the
 *                         broadcast, reduction and gather buffers (default
 *                         1000); output: rank 0's summary and a digest of
 *                         every result, the same for every run on the same
 *                         number of ranks
 *   IC_KILL_AT=K          the last rank raises SIGKILL in round K, in its
 *                         first incarnation only (CHANMEM_INCARNATION)
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* This process's view: group A (even world ranks) or B (odd). */
static int color, lrank, lsize, rsize;

/* World rank of rank j of group g (0: A, 1: B). */
static int world_of(int g, int j)
{
	return 2 * j + g;
}

static int remote_world(int j)
{
	return world_of(1 - color, j);
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	TU_CHECK(p, "out of memory");
	return p;
}

/* ---- a non-commutative op: composition of affine maps x -> a x + b
 * modulo a prime, (f op g)(x) = f(g(x)) with f from the lower rank ---- */

#define PRIME 2147483647LL

static void compose(void *in, void *inout, int *len, MPI_Datatype *type)
{
	(void)type;
	long long *f = in, *g = inout;
	for (int i = 0; i < *len; i++, f += 2, g += 2) {
		long long a = f[0] * g[0] % PRIME, b = (f[0] * g[1] + f[1]) % PRIME;
		g[0] = a;
		g[1] = b;
	}
}

static void affine_of(int world, int round, long long out[2])
{
	out[0] = 3 + world * 7 + round;
	out[1] = 11 + world * 5;
}

/* ---- checks, each folding what it saw into the digest ---- */

static void check_queries(MPI_Comm ic, MPI_Comm half)
{
	int flag, n;
	TU_MPI(MPI_Comm_test_inter(ic, &flag));
	TU_CHECK(flag == 1, "MPI_Comm_test_inter: %d on an inter-communicator", flag);
	TU_MPI(MPI_Comm_test_inter(half, &flag));
	TU_CHECK(flag == 0, "MPI_Comm_test_inter: %d on an intra-communicator", flag);
	TU_MPI(MPI_Comm_size(ic, &n));
	TU_CHECK(n == lsize, "MPI_Comm_size %d, local group has %d", n, lsize);
	TU_MPI(MPI_Comm_rank(ic, &n));
	TU_CHECK(n == lrank, "MPI_Comm_rank %d, expected %d", n, lrank);
	TU_MPI(MPI_Comm_remote_size(ic, &n));
	TU_CHECK(n == rsize, "MPI_Comm_remote_size %d, expected %d", n, rsize);
	MPI_Group remote, world;
	TU_MPI(MPI_Comm_remote_group(ic, &remote));
	TU_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world));
	int *ranks = xmalloc((size_t)rsize * sizeof *ranks),
	    *in_world = xmalloc((size_t)rsize * sizeof *in_world);
	for (int j = 0; j < rsize; j++)
		ranks[j] = j;
	TU_MPI(MPI_Group_translate_ranks(remote, rsize, ranks, world, in_world));
	for (int j = 0; j < rsize; j++)
		TU_CHECK(in_world[j] == remote_world(j),
		         "remote rank %d is world rank %d, expected %d", j, in_world[j],
		         remote_world(j));
	int cmp;
	TU_MPI(MPI_Comm_compare(ic, ic, &cmp));
	TU_CHECK(cmp == MPI_IDENT, "MPI_Comm_compare(ic, ic) = %d", cmp);
	TU_MPI(MPI_Comm_compare(ic, half, &cmp));
	TU_CHECK(cmp == MPI_UNEQUAL, "MPI_Comm_compare(inter, intra) = %d", cmp);
	free(ranks);
	free(in_world);
	TU_MPI(MPI_Group_free(&remote));
	TU_MPI(MPI_Group_free(&world));
}

/* One message to every remote process, R received from MPI_ANY_SOURCE. */
static void check_pt2pt(MPI_Comm ic, int round, uint64_t *digest)
{
	int w = tu_rank;
	int *out = xmalloc((size_t)rsize * sizeof *out),
	    *seen = calloc((size_t)rsize, sizeof *seen),
	    *got = xmalloc((size_t)rsize * sizeof *got);
	MPI_Request *reqs = xmalloc((size_t)rsize * sizeof *reqs);
	TU_CHECK(seen, "out of memory");
	for (int j = 0; j < rsize; j++) {
		out[j] = w * 1000 + j + round;
		TU_MPI(MPI_Isend(&out[j], 1, MPI_INT, j, 5, ic, &reqs[j]));
	}
	for (int k = 0; k < rsize; k++) {
		int v;
		MPI_Status st;
		TU_MPI(MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 5, ic, &st));
		int s = st.MPI_SOURCE;
		TU_CHECK(s >= 0 && s < rsize && !seen[s], "message from remote rank %d (again?)",
		         s);
		seen[s] = 1;
		got[s] = v;
		TU_CHECK(v == remote_world(s) * 1000 + lrank + round,
		         "remote rank %d sent %d, expected %d", s, v,
		         remote_world(s) * 1000 + lrank + round);
	}
	/* In sender order: the arrival order is the transport's. */
	*digest = tu_hash(*digest, got, (size_t)rsize * sizeof *got);
	TU_MPI(MPI_Waitall(rsize, reqs, MPI_STATUSES_IGNORE));
	free(got);
	free(out);
	free(seen);
	free(reqs);
}

/* Root of a collective in group g's process j: its own argument. */
static int root_arg(int g, int j)
{
	if (g == color)
		return lrank == j ? MPI_ROOT : MPI_PROC_NULL;
	return j;
}

static void check_bcast(MPI_Comm ic, int count, int round, uint64_t *digest)
{
	int *buf = xmalloc((size_t)count * sizeof *buf);
	/* From A's rank 0, then from B's last rank. */
	for (int g = 0; g < 2; g++) {
		int j = g == 0 ? 0 : (g == color ? lsize : rsize) - 1;
		uint64_t seed = 100 + (uint64_t)round * 2 + (uint64_t)g;
		memset(buf, 0, (size_t)count * sizeof *buf);
		if (g == color && lrank == j)
			tu_fill(buf, (size_t)count * sizeof *buf, seed);
		TU_MPI(MPI_Bcast(buf, count, MPI_INT, root_arg(g, j), ic));
		if (g != color) {
			long bad = tu_verify(buf, (size_t)count * sizeof *buf, seed);
			TU_CHECK(bad < 0, "Bcast from group %d: byte %ld differs", g, bad);
			*digest = tu_hash(*digest, buf, (size_t)count * sizeof *buf);
		}
	}
	free(buf);
}

static void check_reduce(MPI_Comm ic, int count, int round, MPI_Op compose_op, MPI_Datatype affine,
                         uint64_t *digest)
{
	/* Sum of (w + 1) * (i + 1) + round over B, at A's rank 0. */
	long *in = xmalloc((size_t)count * sizeof *in), *out = xmalloc((size_t)count * sizeof *out);
	for (int i = 0; i < count; i++)
		in[i] = (long)(tu_rank + 1) * (i + 1) + round;
	TU_MPI(MPI_Reduce(in, out, count, MPI_LONG, MPI_SUM, root_arg(0, 0), ic));
	if (color == 0 && lrank == 0) {
		for (int i = 0; i < count; i++) {
			long want = 0;
			for (int j = 0; j < rsize; j++)
				want += (long)(remote_world(j) + 1) * (i + 1) + round;
			TU_CHECK(out[i] == want, "Reduce sum[%d] = %ld, expected %ld", i, out[i],
			         want);
		}
		*digest = tu_hash(*digest, out, (size_t)count * sizeof *out);
	}
	/* The composition of A's maps in rank order, at B's rank 0. */
	long long f[2], g[2];
	affine_of(tu_rank, round, f);
	TU_MPI(MPI_Reduce(f, g, 1, affine, compose_op, root_arg(1, 0), ic));
	if (color == 1 && lrank == 0) {
		long long want[2] = {1, 0}, fj[2];
		for (int j = rsize - 1; j >= 0; j--) {
			affine_of(remote_world(j), round, fj);
			int len = 1;
			compose(fj, want, &len, NULL);
		}
		TU_CHECK(g[0] == want[0] && g[1] == want[1],
		         "Reduce of a non-commutative op: (%lld, %lld), expected (%lld, %lld)",
		         g[0], g[1], want[0], want[1]);
		*digest = tu_hash(*digest, g, sizeof g);
	}
	/* Allreduce: each group gets the other's sum. */
	TU_MPI(MPI_Allreduce(in, out, count, MPI_LONG, MPI_SUM, ic));
	for (int i = 0; i < count; i++) {
		long want = 0;
		for (int j = 0; j < rsize; j++)
			want += (long)(remote_world(j) + 1) * (i + 1) + round;
		TU_CHECK(out[i] == want, "Allreduce[%d] = %ld, expected %ld", i, out[i], want);
	}
	*digest = tu_hash(*digest, out, (size_t)count * sizeof *out);
	/* Reduce_scatter: a vector of T items per group, scattered unevenly. */
	int T = 12 > 2 * lsize ? 12 : 2 * lsize;
	long *vin = xmalloc((size_t)T * sizeof *vin), *vout = xmalloc((size_t)T * sizeof *vout);
	int *counts = xmalloc((size_t)lsize * sizeof *counts), first = 0;
	for (int i = 0; i < lsize; i++) {
		counts[i] = T / lsize + (i < T % lsize);
		if (i < lrank)
			first += counts[i];
	}
	for (int k = 0; k < T; k++)
		vin[k] = (long)(tu_rank + 1) * (k + 1);
	TU_MPI(MPI_Reduce_scatter(vin, vout, counts, MPI_LONG, MPI_SUM, ic));
	for (int k = 0; k < counts[lrank]; k++) {
		long want = 0;
		for (int j = 0; j < rsize; j++)
			want += (long)(remote_world(j) + 1) * (first + k + 1);
		TU_CHECK(vout[k] == want, "Reduce_scatter[%d] = %ld, expected %ld", k, vout[k],
		         want);
	}
	*digest = tu_hash(*digest, vout, (size_t)counts[lrank] * sizeof *vout);
	if (lsize == rsize) { /* equal totals needed */
		TU_MPI(MPI_Reduce_scatter_block(vin, vout, 2, MPI_LONG, MPI_SUM, ic));
		for (int k = 0; k < 2; k++) {
			long want = 0;
			for (int j = 0; j < rsize; j++)
				want += (long)(remote_world(j) + 1) * (2 * lrank + k + 1);
			TU_CHECK(vout[k] == want, "Reduce_scatter_block[%d] = %ld, expected %ld", k,
			         vout[k], want);
		}
		*digest = tu_hash(*digest, vout, 2 * sizeof *vout);
	}
	free(counts);
	free(vin);
	free(vout);
	free(in);
	free(out);
}

/* Gather(v) at A's rank 0 from B, Scatter(v) from B's rank 0 to A. */
static void check_gather_scatter(MPI_Comm ic, int count, int round, uint64_t *digest)
{
	/* Room for COUNT items per process, and for the v-calls' blocks of up
	 * to one more item than there are processes. */
	int items = count > tu_size + 2 ? count : tu_size + 2;
	int *mine = xmalloc((size_t)items * sizeof *mine);
	for (int i = 0; i < items; i++)
		mine[i] = tu_rank * 100000 + i + round;
	int is_a_root = color == 0 && lrank == 0, is_b_root = color == 1 && lrank == 0;
	int *all = xmalloc((size_t)items * (size_t)tu_size * sizeof *all);
	TU_MPI(MPI_Gather(mine, count, MPI_INT, all, count, MPI_INT, root_arg(0, 0), ic));
	if (is_a_root) {
		for (int j = 0; j < rsize; j++)
			for (int i = 0; i < count; i++)
				TU_CHECK(all[j * count + i] == remote_world(j) * 100000 + i + round,
				         "Gather: block %d item %d", j, i);
		*digest = tu_hash(*digest, all, (size_t)rsize * (size_t)count * sizeof *all);
	}
	/* Gatherv: remote rank j sends j + 1 items, placed in reverse order. */
	int n = rsize, *counts = xmalloc((size_t)n * sizeof *counts),
	    *displs = xmalloc((size_t)n * sizeof *displs);
	for (int j = n - 1, at = 0; j >= 0; j--) {
		counts[j] = j + 1;
		displs[j] = at;
		at += j + 1;
	}
	TU_MPI(MPI_Gatherv(mine, lrank + 1, MPI_INT, all, counts, displs, MPI_INT, root_arg(0, 0),
	                   ic));
	if (is_a_root) {
		for (int j = 0; j < n; j++)
			for (int i = 0; i <= j; i++)
				TU_CHECK(all[displs[j] + i] == remote_world(j) * 100000 + i + round,
				         "Gatherv: block %d item %d", j, i);
		*digest = tu_hash(*digest, all, (size_t)n * (size_t)(n + 1) / 2 * sizeof *all);
	}
	/* Scatter: B's rank 0 sends block j = world rank of A's j, repeated. */
	if (is_b_root)
		for (int j = 0; j < rsize; j++)
			for (int i = 0; i < count; i++)
				all[j * count + i] = remote_world(j) * 7 + i + round;
	TU_MPI(MPI_Scatter(all, count, MPI_INT, mine, count, MPI_INT, root_arg(1, 0), ic));
	if (color == 0) {
		for (int i = 0; i < count; i++)
			TU_CHECK(mine[i] == tu_rank * 7 + i + round, "Scatter item %d = %d", i,
			         mine[i]);
		*digest = tu_hash(*digest, mine, (size_t)count * sizeof *mine);
	}
	/* Scatterv: A's j gets j + 2 items from B's rank 0. */
	if (is_b_root) {
		free(counts);
		free(displs);
		counts = xmalloc((size_t)rsize * sizeof *counts);
		displs = xmalloc((size_t)rsize * sizeof *displs);
		for (int j = 0, at = 0; j < rsize; j++) {
			counts[j] = j + 2;
			displs[j] = at;
			for (int i = 0; i < j + 2; i++)
				all[at + i] = remote_world(j) * 3 + i;
			at += j + 2;
		}
	}
	TU_MPI(MPI_Scatterv(all, counts, displs, MPI_INT, mine, color == 0 ? lrank + 2 : 0, MPI_INT,
	                    root_arg(1, 0), ic));
	if (color == 0) {
		for (int i = 0; i < lrank + 2; i++)
			TU_CHECK(mine[i] == tu_rank * 3 + i, "Scatterv item %d = %d", i, mine[i]);
		*digest = tu_hash(*digest, mine, (size_t)(lrank + 2) * sizeof *mine);
	}
	free(counts);
	free(displs);
	free(mine);
	free(all);
}

static void check_allgather_alltoall(MPI_Comm ic, int round, uint64_t *digest)
{
	int three[3] = {tu_rank, tu_rank * 2, round};
	int *all = xmalloc(3 * (size_t)rsize * sizeof *all);
	TU_MPI(MPI_Allgather(three, 3, MPI_INT, all, 3, MPI_INT, ic));
	for (int j = 0; j < rsize; j++)
		TU_CHECK(all[3 * j] == remote_world(j) && all[3 * j + 1] == 2 * remote_world(j) &&
		             all[3 * j + 2] == round,
		         "Allgather block %d", j);
	*digest = tu_hash(*digest, all, 3 * (size_t)rsize * sizeof *all);
	/* Allgatherv: remote j sends j % 3 + 1 of its three, back to back. */
	int *counts = xmalloc((size_t)rsize * sizeof *counts),
	    *displs = xmalloc((size_t)rsize * sizeof *displs);
	for (int j = 0, at = 0; j < rsize; j++) {
		counts[j] = j % 3 + 1;
		displs[j] = at;
		at += counts[j];
	}
	TU_MPI(MPI_Allgatherv(three, lrank % 3 + 1, MPI_INT, all, counts, displs, MPI_INT, ic));
	for (int j = 0; j < rsize; j++)
		for (int i = 0; i < counts[j]; i++) {
			int want = i == 0 ? remote_world(j) : i == 1 ? 2 * remote_world(j) : round;
			TU_CHECK(all[displs[j] + i] == want, "Allgatherv block %d item %d", j, i);
		}
	*digest =
	    tu_hash(*digest, all, (size_t)(displs[rsize - 1] + counts[rsize - 1]) * sizeof *all);
	/* Alltoall: the block for remote j is [w * 100 + j]. */
	int *out = xmalloc((size_t)rsize * 4 * sizeof *out),
	    *in = xmalloc((size_t)rsize * 4 * sizeof *in);
	for (int j = 0; j < rsize; j++)
		out[j] = tu_rank * 100 + j + round;
	TU_MPI(MPI_Alltoall(out, 1, MPI_INT, in, 1, MPI_INT, ic));
	for (int j = 0; j < rsize; j++)
		TU_CHECK(in[j] == remote_world(j) * 100 + lrank + round, "Alltoall block %d = %d",
		         j, in[j]);
	*digest = tu_hash(*digest, in, (size_t)rsize * sizeof *in);
	/* Alltoallv: to remote j, (lrank + j) % 3 + 1 items; from remote j,
	 * (j + lrank) % 3 + 1 items, blocks in reverse order. */
	int *scounts = xmalloc((size_t)rsize * sizeof *scounts),
	    *sdispls = xmalloc((size_t)rsize * sizeof *sdispls);
	for (int j = 0, at = 0; j < rsize; j++) {
		scounts[j] = (lrank + j) % 3 + 1;
		sdispls[j] = at;
		for (int i = 0; i < scounts[j]; i++)
			out[at + i] = tu_rank * 1000 + j * 10 + i;
		at += scounts[j];
	}
	for (int j = rsize - 1, at = 0; j >= 0; j--) {
		counts[j] = (j + lrank) % 3 + 1;
		displs[j] = at;
		at += counts[j];
	}
	TU_MPI(MPI_Alltoallv(out, scounts, sdispls, MPI_INT, in, counts, displs, MPI_INT, ic));
	for (int j = 0; j < rsize; j++)
		for (int i = 0; i < counts[j]; i++)
			TU_CHECK(in[displs[j] + i] == remote_world(j) * 1000 + lrank * 10 + i,
			         "Alltoallv block %d item %d", j, i);
	*digest = tu_hash(*digest, in, (size_t)(displs[0] + counts[0]) * sizeof *in);
	/* Alltoallw: one int to each remote process, as MPI_INT from an
	 * array of doubles' worth of bytes. */
	MPI_Datatype *types = xmalloc((size_t)rsize * sizeof *types);
	int *ones = xmalloc((size_t)rsize * sizeof *ones),
	    *bytes = xmalloc((size_t)rsize * sizeof *bytes);
	for (int j = 0; j < rsize; j++) {
		types[j] = MPI_INT;
		ones[j] = 1;
		bytes[j] = j * (int)sizeof(int);
		out[j] = -(tu_rank * 100 + j);
	}
	TU_MPI(MPI_Alltoallw(out, ones, bytes, types, in, ones, bytes, types, ic));
	for (int j = 0; j < rsize; j++)
		TU_CHECK(in[j] == -(remote_world(j) * 100 + lrank), "Alltoallw block %d", j);
	*digest = tu_hash(*digest, in, (size_t)rsize * sizeof *in);
	free(types);
	free(ones);
	free(bytes);
	free(scounts);
	free(sdispls);
	free(out);
	free(in);
	free(counts);
	free(displs);
	free(all);
}

/* Four non-blocking collectives pending at once. */
static void check_nonblocking(MPI_Comm ic, int round, uint64_t *digest)
{
	MPI_Request reqs[4];
	int b = color == 1 ? 0 : -1, mine = tu_rank + round, sum = -1;
	if (color == 1 && lrank == 0)
		b = 4242 + round;
	int *out = xmalloc((size_t)rsize * sizeof *out), *in = xmalloc((size_t)rsize * sizeof *in);
	for (int j = 0; j < rsize; j++)
		out[j] = tu_rank * 10 + j;
	TU_MPI(MPI_Ibarrier(ic, &reqs[0]));
	TU_MPI(MPI_Ibcast(&b, 1, MPI_INT, root_arg(1, 0), ic, &reqs[1]));
	TU_MPI(MPI_Iallreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, ic, &reqs[2]));
	TU_MPI(MPI_Ialltoall(out, 1, MPI_INT, in, 1, MPI_INT, ic, &reqs[3]));
	TU_MPI(MPI_Waitall(4, reqs, MPI_STATUSES_IGNORE));
	if (color == 0)
		TU_CHECK(b == 4242 + round, "Ibcast gave %d", b);
	int want = 0;
	for (int j = 0; j < rsize; j++) {
		want += remote_world(j) + round;
		TU_CHECK(in[j] == remote_world(j) * 10 + lrank, "Ialltoall block %d", j);
	}
	TU_CHECK(sum == want, "Iallreduce gave %d, expected %d", sum, want);
	*digest = tu_hash_u64(tu_hash_u64(*digest, (uint64_t)b), (uint64_t)sum);
	*digest = tu_hash(*digest, in, (size_t)rsize * sizeof *in);
	free(out);
	free(in);
}

/* high: this group's argument; a_first: whether group A comes first. */
static void check_merge(MPI_Comm ic, int high, int a_first, uint64_t *digest)
{
	MPI_Comm m;
	int rank, size, flag;
	TU_MPI(MPI_Intercomm_merge(ic, high, &m));
	TU_MPI(MPI_Comm_test_inter(m, &flag));
	TU_CHECK(!flag, "a merged communicator is an intra-communicator");
	TU_MPI(MPI_Comm_rank(m, &rank));
	TU_MPI(MPI_Comm_size(m, &size));
	TU_CHECK(size == tu_size, "merged size %d", size);
	int my_first = a_first == (color == 0);
	int want = my_first ? lrank : rsize + lrank;
	TU_CHECK(rank == want, "merged rank %d, expected %d (high %d)", rank, want, high);
	/* Every rank's world rank, in merged order. */
	int *w = xmalloc((size_t)size * sizeof *w);
	TU_MPI(MPI_Allgather(&tu_rank, 1, MPI_INT, w, 1, MPI_INT, m));
	int sizes[2] = {(tu_size + 1) / 2, tu_size / 2};
	for (int k = 0; k < size; k++) {
		int g = k < sizes[a_first ? 0 : 1] ? (a_first ? 0 : 1) : (a_first ? 1 : 0);
		int j = k < sizes[a_first ? 0 : 1] ? k : k - sizes[a_first ? 0 : 1];
		TU_CHECK(w[k] == world_of(g, j), "merged rank %d is world rank %d, expected %d", k,
		         w[k], world_of(g, j));
	}
	*digest = tu_hash(*digest, w, (size_t)size * sizeof *w);
	free(w);
	TU_MPI(MPI_Comm_free(&m));
}

/* A duplicate: congruent, and its messages never match the original's. */
static void check_dup(MPI_Comm ic, int round, uint64_t *digest)
{
	MPI_Comm d;
	int cmp, n;
	TU_MPI(MPI_Comm_dup(ic, &d));
	TU_MPI(MPI_Comm_compare(ic, d, &cmp));
	TU_CHECK(cmp == MPI_CONGRUENT, "MPI_Comm_compare(ic, dup) = %d", cmp);
	TU_MPI(MPI_Comm_remote_size(d, &n));
	TU_CHECK(n == rsize, "the duplicate's remote size %d", n);
	if (lrank == 0) {
		/* Same peer, same tag: the original's first, received second. */
		int one = 1 + round, two = 2 + round, a = 0, b = 0;
		MPI_Request r[2];
		TU_MPI(MPI_Isend(&one, 1, MPI_INT, 0, 9, ic, &r[0]));
		TU_MPI(MPI_Isend(&two, 1, MPI_INT, 0, 9, d, &r[1]));
		TU_MPI(MPI_Recv(&b, 1, MPI_INT, 0, 9, d, MPI_STATUS_IGNORE));
		TU_MPI(MPI_Recv(&a, 1, MPI_INT, 0, 9, ic, MPI_STATUS_IGNORE));
		TU_MPI(MPI_Waitall(2, r, MPI_STATUSES_IGNORE));
		TU_CHECK(a == 1 + round && b == 2 + round, "dup and original crossed: %d %d", a, b);
	}
	int mine = tu_rank, sum;
	TU_MPI(MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, d));
	int want = 0;
	for (int j = 0; j < rsize; j++)
		want += remote_world(j);
	TU_CHECK(sum == want, "Allreduce on the duplicate: %d, expected %d", sum, want);
	*digest = tu_hash_u64(*digest, (uint64_t)sum);
	TU_MPI(MPI_Comm_free(&d));
}

/* Color of group g's rank j among n in the split below. */
static int split_color(int j, int n)
{
	return j == n - 1 && n > 2 ? MPI_UNDEFINED : j % 2;
}

/* The new inter-communicator's remote group must be the world ranks
 * want[0..n-1], in order; an Allreduce on it sums them. */
static void check_remote(MPI_Comm nc, const int *want, int n, const char *what, uint64_t *digest)
{
	int rn, sum, mine = tu_rank, total = 0;
	TU_MPI(MPI_Comm_remote_size(nc, &rn));
	TU_CHECK(rn == n, "%s: remote size %d, expected %d", what, rn, n);
	MPI_Group remote, world;
	TU_MPI(MPI_Comm_remote_group(nc, &remote));
	TU_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world));
	for (int j = 0; j < n; j++) {
		int w;
		TU_MPI(MPI_Group_translate_ranks(remote, 1, &j, world, &w));
		TU_CHECK(w == want[j], "%s: remote rank %d is world rank %d, expected %d", what, j,
		         w, want[j]);
		total += want[j];
	}
	TU_MPI(MPI_Group_free(&remote));
	TU_MPI(MPI_Group_free(&world));
	TU_MPI(MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, nc));
	TU_CHECK(sum == total, "%s: Allreduce %d, expected %d", what, sum, total);
	*digest = tu_hash_u64(*digest, (uint64_t)sum);
}

/* MPI_Comm_split and MPI_Comm_create of the inter-communicator. */
static void check_split_create(MPI_Comm ic, uint64_t *digest)
{
	/* Split: by parity of the local rank, in reverse rank order; a
	 * group's last rank (of three or more) passes MPI_UNDEFINED. */
	MPI_Comm nc;
	int c = split_color(lrank, lsize);
	TU_MPI(MPI_Comm_split(ic, c, -lrank, &nc));
	int *want = xmalloc(((size_t)rsize + 1) * sizeof *want), n = 0, rank, size;
	for (int j = rsize - 1; j >= 0 && c != MPI_UNDEFINED; j--)
		if (split_color(j, rsize) == c)
			want[n++] = remote_world(j);
	if (n == 0) {
		TU_CHECK(nc == MPI_COMM_NULL, "split: a communicator without a remote group");
	} else {
		int lower = 0, same = 0;
		for (int i = 0; i < lsize; i++)
			if (split_color(i, lsize) == c) {
				same++;
				lower += i > lrank;
			}
		TU_CHECK(nc != MPI_COMM_NULL, "split: MPI_COMM_NULL for color %d", c);
		TU_MPI(MPI_Comm_rank(nc, &rank));
		TU_MPI(MPI_Comm_size(nc, &size));
		TU_CHECK(rank == lower && size == same, "split: rank %d of %d, expected %d of %d",
		         rank, size, lower, same);
		check_remote(nc, want, n, "split", digest);
		TU_MPI(MPI_Comm_free(&nc));
	}
	/* Create: each group's first half (rounded up). */
	MPI_Group g, half;
	int range[1][3] = {{0, (lsize + 1) / 2 - 1, 1}};
	TU_MPI(MPI_Comm_group(ic, &g));
	TU_MPI(MPI_Group_range_incl(g, 1, range, &half));
	TU_MPI(MPI_Comm_create(ic, half, &nc));
	if (lrank >= (lsize + 1) / 2) {
		TU_CHECK(nc == MPI_COMM_NULL, "create: a communicator outside the group");
	} else {
		n = (rsize + 1) / 2;
		for (int j = 0; j < n; j++)
			want[j] = remote_world(j);
		TU_CHECK(nc != MPI_COMM_NULL, "create: MPI_COMM_NULL inside the group");
		TU_MPI(MPI_Comm_rank(nc, &rank));
		TU_CHECK(rank == lrank, "create: rank %d, expected %d", rank, lrank);
		check_remote(nc, want, n, "create", digest);
		TU_MPI(MPI_Comm_free(&nc));
	}
	TU_MPI(MPI_Group_free(&half));
	TU_MPI(MPI_Group_free(&g));
	free(want);
}

/* MPI_Comm_idup, with an Allreduce on the original while it is pending;
 * the duplicate's messages never match the original's. */
static void check_idup(MPI_Comm ic, int round, uint64_t *digest)
{
	MPI_Comm d;
	MPI_Request req;
	int mine = tu_rank + round, sum, want = 0, cmp;
	for (int j = 0; j < rsize; j++)
		want += remote_world(j) + round;
	TU_MPI(MPI_Comm_idup(ic, &d, &req));
	TU_MPI(MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, ic));
	TU_CHECK(sum == want, "Allreduce during an idup: %d, expected %d", sum, want);
	TU_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
	TU_MPI(MPI_Comm_compare(ic, d, &cmp));
	TU_CHECK(cmp == MPI_CONGRUENT, "MPI_Comm_compare(ic, idup) = %d", cmp);
	if (lrank == 0) {
		/* Posted first on the original, the first message sent goes
		 * on the duplicate: each must reach its own receive. */
		int a = -1, b = -1, one = 100 + round, two = 200 + round;
		MPI_Request r[2];
		TU_MPI(MPI_Irecv(&a, 1, MPI_INT, 0, 11, ic, &r[0]));
		TU_MPI(MPI_Irecv(&b, 1, MPI_INT, 0, 11, d, &r[1]));
		TU_MPI(MPI_Send(&two, 1, MPI_INT, 0, 11, d));
		TU_MPI(MPI_Send(&one, 1, MPI_INT, 0, 11, ic));
		TU_MPI(MPI_Waitall(2, r, MPI_STATUSES_IGNORE));
		TU_CHECK(a == 100 + round && b == 200 + round, "idup and original crossed: %d %d",
		         a, b);
	}
	TU_MPI(MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, d));
	TU_CHECK(sum == want, "Allreduce on the idup: %d, expected %d", sum, want);
	*digest = tu_hash_u64(*digest, (uint64_t)sum);
	TU_MPI(MPI_Comm_free(&d));
}

/* Leaders other than rank 0, over a duplicate of MPI_COMM_WORLD. */
static void check_other_leaders(MPI_Comm half, int round, uint64_t *digest)
{
	MPI_Comm peer, ic2;
	TU_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &peer));
	TU_MPI(MPI_Intercomm_create(half, lsize - 1, peer, remote_world(rsize - 1), 33, &ic2));
	int n;
	TU_MPI(MPI_Comm_remote_size(ic2, &n));
	TU_CHECK(n == rsize, "second inter-communicator: remote size %d", n);
	int v = color == 0 && lrank == 0 ? 777 + round : 0;
	TU_MPI(MPI_Bcast(&v, 1, MPI_INT, root_arg(0, 0), ic2));
	if (color == 1)
		TU_CHECK(v == 777 + round, "Bcast on the second inter-communicator: %d", v);
	TU_MPI(MPI_Barrier(ic2));
	*digest = tu_hash_u64(*digest, (uint64_t)v);
	TU_MPI(MPI_Comm_free(&ic2));
	TU_MPI(MPI_Comm_free(&peer));
}

static void check_refusals(MPI_Comm ic)
{
	int x = 1, y, n, err, cls;
	MPI_Comm m;
	MPI_Group g;
	TU_MPI(MPI_Comm_set_errhandler(ic, MPI_ERRORS_RETURN));
	err = MPI_Scan(&x, &y, 1, MPI_INT, MPI_SUM, ic);
	MPI_Error_class(err, &cls);
	TU_CHECK(cls == MPI_ERR_COMM, "MPI_Scan on an inter-communicator: %s", tu_err_name(err));
#ifdef CHANMEM_MPI
	/* Erroneous, with the outcome left to the implementation (Open MPI
	 * answers the local group's size); chanmem refuses. */
	TU_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
	err = MPI_Comm_remote_size(MPI_COMM_WORLD, &n);
	MPI_Error_class(err, &cls);
	TU_CHECK(cls == MPI_ERR_COMM, "MPI_Comm_remote_size(MPI_COMM_WORLD): %s", tu_err_name(err));
	err = MPI_Comm_remote_group(MPI_COMM_WORLD, &g);
	MPI_Error_class(err, &cls);
	TU_CHECK(cls == MPI_ERR_COMM, "MPI_Comm_remote_group(MPI_COMM_WORLD): %s",
	         tu_err_name(err));
	err = MPI_Intercomm_merge(MPI_COMM_WORLD, 0, &m);
	MPI_Error_class(err, &cls);
	TU_CHECK(cls == MPI_ERR_COMM, "MPI_Intercomm_merge(MPI_COMM_WORLD): %s", tu_err_name(err));
	TU_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
#else
	(void)n;
	(void)m;
	(void)g;
#endif
}

static void round_of(int round, int count, int kill, MPI_Op compose_op, MPI_Datatype affine,
                     uint64_t *digest)
{
	MPI_Comm half, ic;
	color = tu_rank % 2;
	TU_MPI(MPI_Comm_split(MPI_COMM_WORLD, color, tu_rank, &half));
	TU_MPI(MPI_Comm_rank(half, &lrank));
	TU_MPI(MPI_Comm_size(half, &lsize));
	rsize = color == 0 ? tu_size / 2 : (tu_size + 1) / 2;
	TU_MPI(MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, 1 - color, 17 + round, &ic));
	check_queries(ic, half);
	check_pt2pt(ic, round, digest);
	TU_MPI(MPI_Barrier(ic));
	check_bcast(ic, count, round, digest);
	if (kill)
		raise(SIGKILL);
	check_reduce(ic, count, round, compose_op, affine, digest);
	check_gather_scatter(ic, count, round, digest);
	check_allgather_alltoall(ic, round, digest);
	check_nonblocking(ic, round, digest);
	check_merge(ic, color, 1, digest);     /* A passes 0: A first */
	check_merge(ic, 1 - color, 0, digest); /* B passes 0: B first */
	check_dup(ic, round, digest);
	check_split_create(ic, digest);
	check_idup(ic, round, digest);
	check_other_leaders(half, round, digest);
	check_refusals(ic);
	TU_MPI(MPI_Comm_free(&ic));
	TU_MPI(MPI_Comm_free(&half));
}

int main(int argc, char **argv)
{
	tu_init(&argc, &argv, "intercomm");
	tu_require_size(2, 64);
	const char *usage = "[ROUNDS [COUNT]]";
	int rounds = argc > 1 ? (int)tu_arg_long(argv[1], 1, 1000, "ROUNDS", usage) : 2;
	int count = argc > 2 ? (int)tu_arg_long(argv[2], 1, 1 << 20, "COUNT", usage) : 1000;
	const char *kill_at = getenv("IC_KILL_AT");
	const char *inc = getenv("CHANMEM_INCARNATION");
	int first_life = !inc || atoi(inc) == 0;
	MPI_Op compose_op;
	MPI_Datatype affine;
	TU_MPI(MPI_Op_create(compose, 0, &compose_op));
	TU_MPI(MPI_Type_contiguous(2, MPI_LONG_LONG, &affine));
	TU_MPI(MPI_Type_commit(&affine));
	for (int round = 0; round < rounds; round++) {
		uint64_t digest = TU_HASH_INIT, all = TU_HASH_INIT;
		int kill =
		    kill_at && first_life && atoi(kill_at) == round && tu_rank == tu_size - 1;
		round_of(round, count, kill, compose_op, affine, &digest);
		uint64_t *each = xmalloc((size_t)tu_size * sizeof *each);
		TU_MPI(
		    MPI_Gather(&digest, 1, MPI_UINT64_T, each, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD));
		if (tu_rank == 0) {
			for (int r = 0; r < tu_size; r++)
				all = tu_hash_u64(all, each[r]);
			printf("round %d: inter-communicator calls: ok, digest %016llx\n", round,
			       (unsigned long long)all);
		}
		free(each);
	}
	TU_MPI(MPI_Op_free(&compose_op));
	TU_MPI(MPI_Type_free(&affine));
	if (tu_rank == 0)
		printf("intercomm: all checks passed\n");
	return tu_finalize();
}
