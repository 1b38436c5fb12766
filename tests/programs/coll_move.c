/* coll_move: the data-movement collectives (Bcast, Gather, Gatherv,
 * Scatter, Scatterv, Allgather, Allgatherv, Alltoall, Alltoallv,
 * Alltoallw), in and out of place, from every root, on MPI_COMM_WORLD and
 * MPI_COMM_SELF.
 *
 * Sizes go from nothing to a few hundred KB so that every algorithm the
 * library may pick (trees and pipelines, Bruck and rings) runs for some
 * rank count. Every element received is checked against a function of
 * (sender, receiver, call), and the parts of receive buffers a call must
 * not touch (gaps between v-blocks, guards past the end) are checked to
 * still hold their poison. A non-contiguous pair type (MPI_DOUBLE_INT) and
 * an odd byte count cover the packing paths. Rank 0 prints one line per
 * collective, the same whatever the rank count. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define POISON (-777777)
#define NELEMS(a) (sizeof(a) / sizeof((a)[0]))

static int P, me;

/* The value of element i of the block `who` sends in call `salt`. */
static int ival(int who, int salt, long i)
{
	uint32_t h =
	    (uint32_t)who * 2654435761u ^ (uint32_t)salt * 40503u ^ (uint32_t)i * 2246822519u;
	h ^= h >> 13;
	h *= 0x5bd1e995u;
	h ^= h >> 15;
	return (int)(h & 0x7fffffff);
}

static int *ints(long n)
{
	int *p = malloc((size_t)(n > 0 ? n : 1) * sizeof(int));
	TU_CHECK(p, "out of memory (%ld ints)", n);
	return p;
}

static void fill(int *p, long n, int who, int salt)
{
	for (long i = 0; i < n; i++)
		p[i] = ival(who, salt, i);
}

static void poison(int *p, long n)
{
	for (long i = 0; i < n; i++)
		p[i] = POISON;
}

static void expect_block(const int *p, long n, int who, int salt, const char *what)
{
	for (long i = 0; i < n; i++)
		TU_CHECK(p[i] == ival(who, salt, i),
		         "%s: block of rank %d, element %ld: %d, expected %d", what, who, i, p[i],
		         ival(who, salt, i));
}

static void expect_poison(const int *p, long n, const char *what)
{
	for (long i = 0; i < n; i++)
		TU_CHECK(p[i] == POISON, "%s: element %ld past/between blocks was overwritten",
		         what, i);
}

/* Rank i's share in the v-calls: uneven, some empty. */
static int vcount(int i, int n)
{
	return n == 0 ? 0 : (i % 3 == 1 ? 0 : n / (i + 1) + i);
}

/* v-layout: blocks in reverse rank order, GAP elements between them. */
enum { GAP = 3 };
static long vlayout(int n, int *counts, int *displs)
{
	long at = 0;
	for (int i = P - 1; i >= 0; i--) {
		counts[i] = vcount(i, n);
		displs[i] = (int)at;
		at += counts[i] + GAP;
	}
	return at;
}

/* Checks every block of a v-layout buffer and the gaps. skip: a rank
 * whose block is not checked (-1: none). */
static void expect_vbuf(const int *buf, const int *counts, const int *displs, int salt_base,
                        int skip, const char *what)
{
	for (int i = 0; i < P; i++) {
		if (i != skip)
			expect_block(buf + displs[i], counts[i], i, salt_base, what);
		expect_poison(buf + displs[i] + counts[i], GAP, what);
	}
}

/* ---- Bcast ---- */

struct pair {
	double v;
	int i;
};

static void test_bcast(void)
{
	static const int sizes[] = {0, 1, 1000, 10000, 30000, 75000}; /* up to 300 KB */
	for (size_t s = 0; s < NELEMS(sizes); s++) {
		int n = sizes[s];
		int *buf = ints(n + 1);
		for (int root = 0; root < P; root++) {
			poison(buf, n + 1);
			if (me == root)
				fill(buf, n, root, n);
			TU_MPI(MPI_Bcast(buf, n, MPI_INT, root, MPI_COMM_WORLD));
			expect_block(buf, n, root, n, "MPI_Bcast");
			expect_poison(buf + n, 1, "MPI_Bcast");
		}
		free(buf);
	}
	/* An odd byte count (the pipeline's last segment is short). */
	size_t len = 300001;
	unsigned char *bytes = malloc(len);
	TU_CHECK(bytes, "out of memory");
	for (int root = 0; root<P; root += P> 1 ? P - 1 : 1) {
		if (me == root)
			tu_fill(bytes, len, 77 + (uint64_t)root);
		else
			memset(bytes, 0, len);
		TU_MPI(MPI_Bcast(bytes, (int)len, MPI_BYTE, root, MPI_COMM_WORLD));
		TU_CHECK(tu_verify(bytes, len, 77 + (uint64_t)root) < 0, "MPI_Bcast of %zu bytes",
		         len);
	}
	free(bytes);
	/* A type with a hole (packed on the wire), small and large. */
	static const int pair_sizes[] = {3, 25000};
	for (size_t s = 0; s < NELEMS(pair_sizes); s++) {
		int n = pair_sizes[s], root = (int)s % P;
		struct pair *pairs = malloc((size_t)n * sizeof *pairs);
		TU_CHECK(pairs, "out of memory");
		for (int i = 0; i < n; i++) {
			pairs[i].v = me == root ? ival(root, 1, i) / 8.0 : -1.0;
			pairs[i].i = me == root ? ival(root, 2, i) : -1;
		}
		TU_MPI(MPI_Bcast(pairs, n, MPI_DOUBLE_INT, root, MPI_COMM_WORLD));
		for (int i = 0; i < n; i++)
			TU_CHECK(pairs[i].v == ival(root, 1, i) / 8.0 &&
			             pairs[i].i == ival(root, 2, i),
			         "MPI_Bcast of MPI_DOUBLE_INT: item %d", i);
		free(pairs);
	}
	if (me == 0)
		printf("coll_move: MPI_Bcast: 0 to 300000 bytes from every root, 300001 bytes, "
		       "MPI_DOUBLE_INT: ok\n");
}

/* ---- Gather, Gatherv ---- */

static const int block_sizes[] = {0, 1, 100, 15000};

static void test_gather(void)
{
	for (size_t s = 0; s < NELEMS(block_sizes); s++) {
		int n = block_sizes[s];
		int *mine = ints(n), *all = ints((long)P * n + 1);
		for (int root = 0; root < P; root++) {
			for (int in_place = 0; in_place < 2; in_place++) {
				int salt = n * 16 + root * 2 + in_place;
				fill(mine, n, me, salt);
				poison(all, (long)P * n + 1);
				const void *sbuf = mine;
				if (in_place && me == root) {
					fill(all + (long)root * n, n, me, salt);
					sbuf = MPI_IN_PLACE;
				}
				TU_MPI(MPI_Gather(sbuf, n, MPI_INT, all, n, MPI_INT, root,
				                  MPI_COMM_WORLD));
				if (me != root)
					continue;
				for (int i = 0; i < P; i++)
					expect_block(all + (long)i * n, n, i, salt, "MPI_Gather");
				expect_poison(all + (long)P * n, 1, "MPI_Gather");
			}
		}
		free(mine);
		free(all);
	}
	if (me == 0)
		printf(
		    "coll_move: MPI_Gather: 0 to 15000 ints per rank, every root, in place: ok\n");

	int *counts = malloc((size_t)P * sizeof(int)), *displs = malloc((size_t)P * sizeof(int));
	TU_CHECK(counts && displs, "out of memory");
	for (size_t s = 0; s < NELEMS(block_sizes); s++) {
		int n = block_sizes[s];
		long total = vlayout(n, counts, displs);
		int *mine = ints(counts[me]), *all = ints(total);
		for (int root = 0; root < P; root++) {
			for (int in_place = 0; in_place < 2; in_place++) {
				int salt = 1000 + n * 16 + root * 2 + in_place;
				fill(mine, counts[me], me, salt);
				poison(all, total);
				const void *sbuf = mine;
				if (in_place && me == root) {
					fill(all + displs[root], counts[root], me, salt);
					sbuf = MPI_IN_PLACE;
				}
				TU_MPI(MPI_Gatherv(sbuf, counts[me], MPI_INT, all, counts, displs,
				                   MPI_INT, root, MPI_COMM_WORLD));
				if (me == root)
					expect_vbuf(all, counts, displs, salt, -1, "MPI_Gatherv");
			}
		}
		free(mine);
		free(all);
	}
	free(counts);
	free(displs);
	if (me == 0)
		printf(
		    "coll_move: MPI_Gatherv: uneven blocks with gaps, every root, in place: ok\n");
}

/* ---- Scatter, Scatterv ---- */

static void test_scatter(void)
{
	for (size_t s = 0; s < NELEMS(block_sizes); s++) {
		int n = block_sizes[s];
		int *mine = ints(n + 1), *all = ints((long)P * n);
		for (int root = 0; root < P; root++) {
			for (int in_place = 0; in_place < 2; in_place++) {
				int salt = 2000 + n * 16 + root * 2 + in_place;
				if (me == root)
					for (int i = 0; i < P; i++)
						fill(all + (long)i * n, n, i, salt);
				poison(mine, n + 1);
				void *rbuf = in_place && me == root ? MPI_IN_PLACE : (void *)mine;
				TU_MPI(MPI_Scatter(all, n, MPI_INT, rbuf, n, MPI_INT, root,
				                   MPI_COMM_WORLD));
				if (rbuf == MPI_IN_PLACE) {
					expect_poison(mine, n + 1, "MPI_Scatter in place");
					for (int i = 0; i < P; i++)
						expect_block(all + (long)i * n, n, i, salt,
						             "MPI_Scatter in place: send buffer");
				} else {
					expect_block(mine, n, me, salt, "MPI_Scatter");
					expect_poison(mine + n, 1, "MPI_Scatter");
				}
			}
		}
		free(mine);
		free(all);
	}
	if (me == 0)
		printf(
		    "coll_move: MPI_Scatter: 0 to 15000 ints per rank, every root, in place: ok\n");

	int *counts = malloc((size_t)P * sizeof(int)), *displs = malloc((size_t)P * sizeof(int));
	TU_CHECK(counts && displs, "out of memory");
	for (size_t s = 0; s < NELEMS(block_sizes); s++) {
		int n = block_sizes[s];
		long total = vlayout(n, counts, displs);
		int *mine = ints(counts[me] + 1), *all = ints(total);
		for (int root = 0; root < P; root++) {
			int salt = 3000 + n * 16 + root;
			if (me == root) {
				poison(all, total);
				for (int i = 0; i < P; i++)
					fill(all + displs[i], counts[i], i, salt);
			}
			poison(mine, counts[me] + 1);
			TU_MPI(MPI_Scatterv(all, counts, displs, MPI_INT, mine, counts[me], MPI_INT,
			                    root, MPI_COMM_WORLD));
			expect_block(mine, counts[me], me, salt, "MPI_Scatterv");
			expect_poison(mine + counts[me], 1, "MPI_Scatterv");
		}
		free(mine);
		free(all);
	}
	free(counts);
	free(displs);
	if (me == 0)
		printf("coll_move: MPI_Scatterv: uneven blocks with gaps, every root: ok\n");
}

/* ---- Allgather, Allgatherv ---- */

static void test_allgather(void)
{
	static const int sizes[] = {0, 1, 100, 5000, 15000};
	for (size_t s = 0; s < NELEMS(sizes); s++) {
		int n = sizes[s];
		int *mine = ints(n), *all = ints((long)P * n + 1);
		for (int in_place = 0; in_place < 2; in_place++) {
			int salt = 4000 + n * 2 + in_place;
			fill(mine, n, me, salt);
			poison(all, (long)P * n + 1);
			const void *sbuf = mine;
			if (in_place) {
				fill(all + (long)me * n, n, me, salt);
				sbuf = MPI_IN_PLACE;
			}
			TU_MPI(MPI_Allgather(sbuf, n, MPI_INT, all, n, MPI_INT, MPI_COMM_WORLD));
			for (int i = 0; i < P; i++)
				expect_block(all + (long)i * n, n, i, salt, "MPI_Allgather");
			expect_poison(all + (long)P * n, 1, "MPI_Allgather");
		}
		free(mine);
		free(all);
	}
	/* Pair type: packed on the wire, holes in memory. */
	int n = 2000;
	struct pair *mine = malloc((size_t)n * sizeof *mine),
	            *all = malloc((size_t)n * P * sizeof *all);
	TU_CHECK(mine && all, "out of memory");
	for (int i = 0; i < n; i++) {
		mine[i].v = ival(me, 5, i) / 4.0;
		mine[i].i = ival(me, 6, i);
	}
	TU_MPI(MPI_Allgather(mine, n, MPI_DOUBLE_INT, all, n, MPI_DOUBLE_INT, MPI_COMM_WORLD));
	for (int r = 0; r < P; r++)
		for (int i = 0; i < n; i++)
			TU_CHECK(all[r * n + i].v == ival(r, 5, i) / 4.0 &&
			             all[r * n + i].i == ival(r, 6, i),
			         "MPI_Allgather of MPI_DOUBLE_INT: rank %d item %d", r, i);
	free(mine);
	free(all);
	if (me == 0)
		printf("coll_move: MPI_Allgather: 0 to 15000 ints per rank, in place, "
		       "MPI_DOUBLE_INT: ok\n");

	int *counts = malloc((size_t)P * sizeof(int)), *displs = malloc((size_t)P * sizeof(int));
	TU_CHECK(counts && displs, "out of memory");
	for (size_t s = 0; s < NELEMS(sizes); s++) {
		int m = sizes[s];
		long total = vlayout(m, counts, displs);
		int *own = ints(counts[me]), *buf = ints(total);
		for (int in_place = 0; in_place < 2; in_place++) {
			int salt = 5000 + m * 2 + in_place;
			fill(own, counts[me], me, salt);
			poison(buf, total);
			const void *sbuf = own;
			if (in_place) {
				fill(buf + displs[me], counts[me], me, salt);
				sbuf = MPI_IN_PLACE;
			}
			TU_MPI(MPI_Allgatherv(sbuf, counts[me], MPI_INT, buf, counts, displs,
			                      MPI_INT, MPI_COMM_WORLD));
			expect_vbuf(buf, counts, displs, salt, -1, "MPI_Allgatherv");
		}
		free(own);
		free(buf);
	}
	free(counts);
	free(displs);
	if (me == 0)
		printf("coll_move: MPI_Allgatherv: uneven blocks with gaps, in place: ok\n");
}

/* ---- Alltoall, Alltoallv, Alltoallw ---- */

/* Salt of the block from -> to in call c. */
static int a2a_salt(int from, int to, int c)
{
	return c * 4096 + from * 64 + to;
}

/* Elements from -> to in the v-calls; symmetric (what the in-place form
 * needs). */
static int a2a_count(int from, int to, int n)
{
	return n == 0 ? 0 : ((from + to) % 4 == 3 ? 0 : n / 2 + (from * to) % 7);
}

static void test_alltoall(void)
{
	static const int sizes[] = {0, 1, 100, 5000};
	for (size_t s = 0; s < NELEMS(sizes); s++) {
		int n = sizes[s];
		int *sbuf = ints((long)P * n), *rbuf = ints((long)P * n + 1);
		for (int in_place = 0; in_place < 2; in_place++) {
			int c = (int)s * 2 + in_place;
			int *src = in_place ? rbuf : sbuf;
			poison(rbuf, (long)P * n + 1);
			for (int to = 0; to < P; to++)
				fill(src + (long)to * n, n, 0, a2a_salt(me, to, c));
			TU_MPI(MPI_Alltoall(in_place ? MPI_IN_PLACE : sbuf, n, MPI_INT, rbuf, n,
			                    MPI_INT, MPI_COMM_WORLD));
			for (int from = 0; from < P; from++)
				expect_block(rbuf + (long)from * n, n, 0, a2a_salt(from, me, c),
				             "MPI_Alltoall");
			expect_poison(rbuf + (long)P * n, 1, "MPI_Alltoall");
		}
		free(sbuf);
		free(rbuf);
	}
	if (me == 0)
		printf("coll_move: MPI_Alltoall: 0 to 5000 ints per pair, in place: ok\n");

	int *scounts = malloc(4 * (size_t)P * sizeof(int));
	TU_CHECK(scounts, "out of memory");
	int *sdispls = scounts + P, *rcounts = scounts + 2 * P, *rdispls = scounts + 3 * P;
	for (size_t s = 0; s < NELEMS(sizes); s++) {
		int n = sizes[s];
		long stotal = 0, rtotal = 0;
		for (int i = P - 1; i >= 0; i--) { /* reverse order, with gaps */
			scounts[i] = a2a_count(me, i, n);
			sdispls[i] = (int)stotal;
			stotal += scounts[i] + GAP;
			rcounts[i] = a2a_count(i, me, n);
			rdispls[i] = (int)rtotal;
			rtotal += rcounts[i] + GAP;
		}
		int *sbuf = ints(stotal), *rbuf = ints(rtotal);
		for (int in_place = 0; in_place < 2; in_place++) {
			int c = 100 + (int)s * 2 + in_place;
			poison(rbuf, rtotal);
			int *src = in_place ? rbuf : sbuf;
			const int *cnt = in_place ? rcounts : scounts,
			          *dsp = in_place ? rdispls : sdispls;
			for (int to = 0; to < P; to++)
				fill(src + dsp[to], cnt[to], 0, a2a_salt(me, to, c));
			TU_MPI(MPI_Alltoallv(in_place ? MPI_IN_PLACE : sbuf, scounts, sdispls,
			                     MPI_INT, rbuf, rcounts, rdispls, MPI_INT,
			                     MPI_COMM_WORLD));
			for (int from = 0; from < P; from++) {
				expect_block(rbuf + rdispls[from], rcounts[from], 0,
				             a2a_salt(from, me, c), "MPI_Alltoallv");
				expect_poison(rbuf + rdispls[from] + rcounts[from], GAP,
				              "MPI_Alltoallv");
			}
		}
		free(sbuf);
		free(rbuf);
	}
	if (me == 0)
		printf("coll_move: MPI_Alltoallv: uneven blocks with gaps, in place: ok\n");

	/* Alltoallw: MPI_INT or MPI_DOUBLE per pair, byte displacements. */
	MPI_Datatype *types = malloc((size_t)P * sizeof *types);
	TU_CHECK(types, "out of memory");
	int n = 300;
	long bytes = 0;
	for (int i = 0; i < P; i++) {
		types[i] = (me + i) % 2 ? MPI_INT : MPI_DOUBLE;
		scounts[i] = rcounts[i] = a2a_count(me, i, n);
		sdispls[i] = rdispls[i] = (int)bytes;
		bytes += (long)scounts[i] * 8 + 16;
	}
	char *sb = malloc((size_t)bytes), *rb = malloc((size_t)bytes);
	TU_CHECK(sb && rb, "out of memory");
	memset(rb, 0x5a, (size_t)bytes);
	for (int to = 0; to < P; to++)
		for (int k = 0; k < scounts[to]; k++) {
			int v = ival(me * 64 + to, 7, k);
			if (types[to] == MPI_INT)
				((int *)(sb + sdispls[to]))[k] = v;
			else
				((double *)(sb + sdispls[to]))[k] = v + 0.5;
		}
	TU_MPI(MPI_Alltoallw(sb, scounts, sdispls, types, rb, rcounts, rdispls, types,
	                     MPI_COMM_WORLD));
	for (int from = 0; from < P; from++)
		for (int k = 0; k < rcounts[from]; k++) {
			int v = ival(from * 64 + me, 7, k);
			if (types[from] == MPI_INT)
				TU_CHECK(((int *)(rb + rdispls[from]))[k] == v,
				         "MPI_Alltoallw: int %d from rank %d", k, from);
			else
				TU_CHECK(((double *)(rb + rdispls[from]))[k] == v + 0.5,
				         "MPI_Alltoallw: double %d from rank %d", k, from);
		}
	free(sb);
	free(rb);
	free(types);
	free(scounts);
	if (me == 0)
		printf("coll_move: MPI_Alltoallw: a type per pair, byte displacements: ok\n");
}

/* ---- MPI_COMM_SELF ---- */

static void test_self(void)
{
	int a[4] = {1, 2, 3, 4}, b[4] = {0};
	TU_MPI(MPI_Bcast(a, 4, MPI_INT, 0, MPI_COMM_SELF));
	TU_MPI(MPI_Gather(a, 4, MPI_INT, b, 4, MPI_INT, 0, MPI_COMM_SELF));
	TU_CHECK(memcmp(a, b, sizeof a) == 0, "MPI_Gather on MPI_COMM_SELF");
	memset(b, 0, sizeof b);
	TU_MPI(MPI_Alltoall(a, 4, MPI_INT, b, 4, MPI_INT, MPI_COMM_SELF));
	TU_CHECK(memcmp(a, b, sizeof a) == 0, "MPI_Alltoall on MPI_COMM_SELF");
	memset(b, 0, sizeof b);
	TU_MPI(MPI_Allgather(a, 4, MPI_INT, b, 4, MPI_INT, MPI_COMM_SELF));
	TU_CHECK(memcmp(a, b, sizeof a) == 0, "MPI_Allgather on MPI_COMM_SELF");
	memset(b, 0, sizeof b);
	TU_MPI(MPI_Scatter(a, 4, MPI_INT, b, 4, MPI_INT, 0, MPI_COMM_SELF));
	TU_CHECK(memcmp(a, b, sizeof a) == 0, "MPI_Scatter on MPI_COMM_SELF");
	TU_MPI(MPI_Barrier(MPI_COMM_SELF));
	if (me == 0)
		printf(
		    "coll_move: MPI_COMM_SELF: Bcast, Gather, Scatter, Allgather, Alltoall: ok\n");
}

int main(int argc, char **argv)
{
	tu_init(&argc, &argv, "coll_move");
	P = tu_size;
	me = tu_rank;
	test_bcast();
	test_gather();
	test_scatter();
	test_allgather();
	test_alltoall();
	test_self();
	TU_MPI(MPI_Barrier(MPI_COMM_WORLD));
	if (me == 0)
		printf("coll_move: all checks passed\n");
	return tu_finalize();
}
