/* coll_derived: collectives on derived datatypes and sub-communicators.
 *
 * Derived types: a strided vector (non-contiguous, packed on the wire)
 * broadcast at sizes that select the tree and the pipeline; predefined ops
 * on derived types whose elements are all of one allowed type (contiguous
 * doubles, a strided int vector whose gaps must stay untouched, a
 * contiguous MPI_DOUBLE_INT for MINLOC); a non-commutative user op on 2x2
 * matrices (a contiguous type of 4 unsigned) through Reduce, Allreduce and
 * Scan; a resized type gathering into every other slot.
 * Sub-communicators: MPI_Comm_split into halves and MPI_Comm_dup, with
 * collectives running on them and on MPI_COMM_WORLD in turn, results
 * checked against the members' world ranks.
 * Rank 0 prints a summary that does not depend on the rank count. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define POISON (-555)

static int P, me;

static int ival(int who, int salt, long i)
{
	uint32_t h =
	    (uint32_t)(who + 1) * 2654435761u ^ (uint32_t)salt * 40503u ^ (uint32_t)i * 2246822519u;
	h ^= h >> 15;
	return (int)(h % 100000);
}

/* ---- derived types ---- */

static void test_vector_bcast(void)
{
	/* n ints, one every other slot: 4 n bytes on the wire */
	static const int sizes[] = {1, 1000, 80000};
	for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
		int n = sizes[s];
		MPI_Datatype strided;
		TU_MPI(MPI_Type_vector(n, 1, 2, MPI_INT, &strided));
		TU_MPI(MPI_Type_commit(&strided));
		int *buf = malloc((size_t)(2 * n + 1) * sizeof(int));
		TU_CHECK(buf, "out of memory");
		for (int root = 0; root<P; root += P> 2 ? P / 2 : 1) {
			for (int i = 0; i < 2 * n + 1; i++)
				buf[i] = me == root && i % 2 == 0 && i < 2 * n ? ival(root, n, i)
				                                               : POISON;
			TU_MPI(MPI_Bcast(buf, 1, strided, root, MPI_COMM_WORLD));
			for (int i = 0; i < 2 * n + 1; i++) {
				int want = i % 2 == 0 && i < 2 * n ? ival(root, n, i) : POISON;
				TU_CHECK(buf[i] == want,
				         "MPI_Bcast of a vector of %d: slot %d: %d, "
				         "expected %d",
				         n, i, buf[i], want);
			}
		}
		free(buf);
		TU_MPI(MPI_Type_free(&strided));
	}
	if (me == 0)
		printf("coll_derived: MPI_Bcast of a strided vector, 4 to 320000 bytes: ok\n");
}

static void test_predefined_ops(void)
{
#ifdef OPEN_MPI
	/* Open MPI (4.1) refuses predefined ops on derived types; MPICH and
	 * chanmem take them. Under Open MPI this part is skipped. */
	if (me == 0)
		printf("coll_derived: predefined ops on contiguous, strided and pair-based derived "
		       "types: ok\n");
	return;
#endif
	/* MPI_SUM on triples of doubles */
	MPI_Datatype triple;
	TU_MPI(MPI_Type_contiguous(3, MPI_DOUBLE, &triple));
	TU_MPI(MPI_Type_commit(&triple));
	static const int counts[] = {1, 5000};
	for (size_t s = 0; s < 2; s++) {
		int n = counts[s];
		double *in = malloc((size_t)n * 3 * sizeof *in),
		       *out = malloc((size_t)n * 3 * sizeof *out);
		TU_CHECK(in && out, "out of memory");
		for (int i = 0; i < 3 * n; i++)
			in[i] = ival(me, 1, i);
		TU_MPI(MPI_Allreduce(in, out, n, triple, MPI_SUM, MPI_COMM_WORLD));
		for (int i = 0; i < 3 * n; i++) {
			double want = 0;
			for (int r = 0; r < P; r++)
				want += ival(r, 1, i);
			TU_CHECK(out[i] == want, "MPI_SUM on a contiguous type: element %d", i);
		}
		free(in);
		free(out);
	}
	TU_MPI(MPI_Type_free(&triple));

	/* MPI_MAX on every other int: the gaps of the result stay as they were */
	int n = 20000;
	MPI_Datatype strided;
	TU_MPI(MPI_Type_vector(n, 1, 2, MPI_INT, &strided));
	TU_MPI(MPI_Type_commit(&strided));
	int *in = malloc((size_t)2 * n * sizeof *in), *out = malloc((size_t)2 * n * sizeof *out);
	TU_CHECK(in && out, "out of memory");
	for (int i = 0; i < 2 * n; i++) {
		in[i] = ival(me, 2, i);
		out[i] = POISON;
	}
	TU_MPI(MPI_Allreduce(in, out, 1, strided, MPI_MAX, MPI_COMM_WORLD));
	for (int i = 0; i < 2 * n; i++) {
		int want = POISON;
		for (int r = 0; i % 2 == 0 && r < P; r++)
			if (r == 0 || ival(r, 2, i) > want)
				want = ival(r, 2, i);
		TU_CHECK(out[i] == want, "MPI_MAX on a strided vector: slot %d: %d, expected %d", i,
		         out[i], want);
	}
	free(in);
	free(out);
	TU_MPI(MPI_Type_free(&strided));

	/* MPI_MINLOC on pairs of MPI_DOUBLE_INT (padding in memory) */
	struct pair {
		double v;
		int i;
	} pin[8], pout[8];
	MPI_Datatype two_pairs;
	TU_MPI(MPI_Type_contiguous(2, MPI_DOUBLE_INT, &two_pairs));
	TU_MPI(MPI_Type_commit(&two_pairs));
	for (int i = 0; i < 8; i++) {
		pin[i].v = (me * 3 + i) % 4;
		pin[i].i = me;
	}
	TU_MPI(MPI_Allreduce(pin, pout, 4, two_pairs, MPI_MINLOC, MPI_COMM_WORLD));
	for (int i = 0; i < 8; i++) {
		double best = 1e9;
		int at = -1;
		for (int r = 0; r < P; r++)
			if ((r * 3 + i) % 4 < best) {
				best = (r * 3 + i) % 4;
				at = r;
			}
		TU_CHECK(pout[i].v == best && pout[i].i == at,
		         "MPI_MINLOC on a contiguous MPI_DOUBLE_INT: pair %d: (%g, %d), expected "
		         "(%g, %d)",
		         i, pout[i].v, pout[i].i, best, at);
	}
	TU_MPI(MPI_Type_free(&two_pairs));
	if (me == 0)
		printf("coll_derived: predefined ops on contiguous, strided and pair-based derived "
		       "types: ok\n");
}

/* 2x2 matrices of unsigned, multiplied mod 2^32: associative, not
 * commutative. */
struct mat {
	unsigned m[4];
};

static struct mat mat_mul(struct mat a, struct mat b)
{
	struct mat c;
	c.m[0] = a.m[0] * b.m[0] + a.m[1] * b.m[2];
	c.m[1] = a.m[0] * b.m[1] + a.m[1] * b.m[3];
	c.m[2] = a.m[2] * b.m[0] + a.m[3] * b.m[2];
	c.m[3] = a.m[2] * b.m[1] + a.m[3] * b.m[3];
	return c;
}

static MPI_Datatype mat_type;

static void mat_op(void *in, void *inout, int *len, MPI_Datatype *type)
{
	TU_CHECK(*type == mat_type, "user op called with another datatype");
	struct mat *a = in, *b = inout;
	for (int i = 0; i < *len; i++)
		b[i] = mat_mul(a[i], b[i]);
}

static struct mat mat_of(int r, int i)
{
	struct mat x;
	for (int k = 0; k < 4; k++)
		x.m[k] = (unsigned)ival(r, 3 + k, i);
	return x;
}

static void test_matrix_op(void)
{
	MPI_Op op;
	TU_MPI(MPI_Type_contiguous(4, MPI_UNSIGNED, &mat_type));
	TU_MPI(MPI_Type_commit(&mat_type));
	TU_MPI(MPI_Op_create(mat_op, 0, &op));
	static const int counts[] = {1, 3000}; /* 16 and 48000 bytes */
	for (size_t s = 0; s < 2; s++) {
		int n = counts[s];
		struct mat *in = malloc((size_t)n * sizeof *in),
		           *out = malloc((size_t)n * sizeof *out);
		TU_CHECK(in && out, "out of memory");
		for (int i = 0; i < n; i++)
			in[i] = mat_of(me, i);
		for (int call = 0; call < 3; call++) {
			memset(out, 0, (size_t)n * sizeof *out);
			if (call == 0)
				TU_MPI(MPI_Reduce(in, out, n, mat_type, op, P - 1, MPI_COMM_WORLD));
			else if (call == 1)
				TU_MPI(MPI_Allreduce(in, out, n, mat_type, op, MPI_COMM_WORLD));
			else
				TU_MPI(MPI_Scan(in, out, n, mat_type, op, MPI_COMM_WORLD));
			if (call == 0 && me != P - 1)
				continue;
			int upto = call == 2 ? me + 1 : P;
			for (int i = 0; i < n; i++) {
				struct mat want = mat_of(0, i);
				for (int r = 1; r < upto; r++)
					want = mat_mul(want, mat_of(r, i));
				TU_CHECK(
				    memcmp(&want, &out[i], sizeof want) == 0,
				    "%s with a non-commutative op on a derived type: matrix %d",
				    call == 0   ? "MPI_Reduce"
				    : call == 1 ? "MPI_Allreduce"
				                : "MPI_Scan",
				    i);
			}
		}
		free(in);
		free(out);
	}
	TU_MPI(MPI_Op_free(&op));
	TU_MPI(MPI_Type_free(&mat_type));
	if (me == 0)
		printf("coll_derived: non-commutative user op on 2x2 matrices (a derived type): "
		       "Reduce, Allreduce, Scan in rank order: ok\n");
}

static void test_resized_gather(void)
{
	/* an int with the extent of two: gathered blocks land every other slot */
	MPI_Datatype spaced;
	TU_MPI(MPI_Type_create_resized(MPI_INT, 0, 2 * (MPI_Aint)sizeof(int), &spaced));
	TU_MPI(MPI_Type_commit(&spaced));
	int n = 500;
	int *mine = malloc((size_t)n * sizeof *mine),
	    *all = malloc((size_t)2 * n * P * sizeof *all);
	TU_CHECK(mine && all, "out of memory");
	for (int i = 0; i < n; i++)
		mine[i] = ival(me, 9, i);
	for (int i = 0; i < 2 * n * P; i++)
		all[i] = POISON;
	TU_MPI(MPI_Gather(mine, n, MPI_INT, all, n, spaced, 0, MPI_COMM_WORLD));
	for (int r = 0; me == 0 && r < P; r++)
		for (int i = 0; i < 2 * n; i++) {
			int want = i % 2 == 0 ? ival(r, 9, i / 2) : POISON;
			TU_CHECK(all[(r * n) * 2 + i] == want,
			         "MPI_Gather into a resized type: rank %d "
			         "slot %d",
			         r, i);
		}
	free(mine);
	free(all);
	TU_MPI(MPI_Type_free(&spaced));
	if (me == 0)
		printf("coll_derived: MPI_Gather into a resized type: ok\n");
}

/* ---- sub-communicators ---- */

static void test_subcomms(void)
{
	MPI_Comm half, dup;
	int color = me % 2;
	TU_MPI(MPI_Comm_split(MPI_COMM_WORLD, color, P - me, &half)); /* reversed order */
	TU_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
	int hsize, hrank;
	TU_MPI(MPI_Comm_size(half, &hsize));
	TU_MPI(MPI_Comm_rank(half, &hrank));
	/* world rank of each member of half, by allgather on half */
	int *members = malloc((size_t)hsize * sizeof *members);
	TU_CHECK(members, "out of memory");
	for (int round = 0; round < 3; round++) {
		TU_MPI(MPI_Allgather(&me, 1, MPI_INT, members, 1, MPI_INT, half));
		for (int i = 0; i < hsize; i++) {
			/* reversed keys: half rank i is the i-th largest world rank of the color */
			int want = -1, seen = 0;
			for (int w = P - 1; w >= 0; w--)
				if (w % 2 == color && seen++ == i)
					want = w;
			TU_CHECK(members[i] == want,
			         "MPI_Allgather on a split: member %d is %d, "
			         "expected %d",
			         i, members[i], want);
		}
		/* interleave: a collective on world, on the dup and on the half */
		long mine = me + 1 + round, sum = 0, hsum = 0, dsum = 0;
		TU_MPI(MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
		TU_MPI(MPI_Allreduce(&mine, &hsum, 1, MPI_LONG, MPI_SUM, half));
		TU_MPI(MPI_Allreduce(&mine, &dsum, 1, MPI_LONG, MPI_SUM, dup));
		long want = 0, hwant = 0;
		for (int w = 0; w < P; w++) {
			want += w + 1 + round;
			if (w % 2 == color)
				hwant += w + 1 + round;
		}
		TU_CHECK(sum == want && dsum == want && hsum == hwant,
		         "MPI_Allreduce on world/dup/split: %ld %ld %ld, expected %ld %ld %ld", sum,
		         dsum, hsum, want, want, hwant);
		int token = hrank == hsize - 1 ? 1000 * color + round : -1;
		TU_MPI(MPI_Bcast(&token, 1, MPI_INT, hsize - 1, half));
		TU_CHECK(token == 1000 * color + round, "MPI_Bcast on a split: %d", token);
		int *sb = malloc((size_t)hsize * sizeof *sb),
		    *rb = malloc((size_t)hsize * sizeof *rb);
		TU_CHECK(sb && rb, "out of memory");
		for (int i = 0; i < hsize; i++)
			sb[i] = me * 1000 + members[i];
		TU_MPI(MPI_Alltoall(sb, 1, MPI_INT, rb, 1, MPI_INT, half));
		for (int i = 0; i < hsize; i++)
			TU_CHECK(rb[i] == members[i] * 1000 + me, "MPI_Alltoall on a split: %d",
			         rb[i]);
		free(sb);
		free(rb);
		TU_MPI(MPI_Barrier(dup));
	}
	free(members);
	TU_MPI(MPI_Comm_free(&half));
	TU_MPI(MPI_Comm_free(&dup));
	if (me == 0)
		printf("coll_derived: Allgather, Allreduce, Bcast, Alltoall on MPI_Comm_split and "
		       "MPI_Comm_dup communicators, interleaved with MPI_COMM_WORLD: ok\n");
}

int main(int argc, char **argv)
{
	tu_init(&argc, &argv, "coll_derived");
	P = tu_size;
	me = tu_rank;
	test_vector_bcast();
	test_predefined_ops();
	test_matrix_op();
	test_resized_gather();
	test_subcomms();
	TU_MPI(MPI_Barrier(MPI_COMM_WORLD));
	if (me == 0)
		printf("coll_derived: all checks passed\n");
	return tu_finalize();
}
