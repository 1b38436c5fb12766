/* coll_switch: the collectives across the sizes where the cost model
 * switches algorithms, against a simple reference computation.
 *
 *   coll_switch [-d]
 *
 * Sizes from 1 B to 300 KB, each about 1.15 times the last (so every
 * threshold of docs/collectives.md has sizes on both sides, for any rank
 * count), plus item counts below the rank count. For each size: Bcast,
 * Reduce and Allreduce with MPI_SUM, a commutative and a non-commutative
 * user op (2x2 matrix products, whose result depends on the order),
 * Allgather, Alltoall and Reduce_scatter_block, roots and MPI_IN_PLACE
 * varying with the size. Every rank computes the expected result itself
 * from every rank's input (a fold in rank order) and compares it with
 * what it got. Rank 0 prints one line per collective, the same for every
 * rank count; with -d every rank prints a digest of all its results too,
 * so that a run under kills can be compared with the failure-free one.
 * Plain MPI: it builds with any mpicc. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define MAX_BYTES 300000

enum {
	BCAST,
	REDUCE,
	ALLREDUCE,
	ALLREDUCE_UCOMM,
	ALLREDUCE_MAT,
	REDUCE_MAT,
	ALLGATHER,
	ALLTOALL,
	REDUCE_SCATTER,
	NCHECK
};
static const char *const check_names[NCHECK] = {"bcast",
                                                "reduce sum",
                                                "allreduce sum",
                                                "allreduce commutative user op",
                                                "allreduce non-commutative user op",
                                                "reduce non-commutative user op",
                                                "allgather",
                                                "alltoall",
                                                "reduce_scatter_block sum"};

static uint64_t digest = TU_HASH_INIT;

static uint32_t input(int rank, size_t j, int salt)
{
	uint64_t x = ((uint64_t)rank << 40) ^ ((uint64_t)salt << 32) ^ (uint64_t)j;
	x *= 0x9e3779b97f4a7c15ull;
	x ^= x >> 29;
	return (uint32_t)x;
}

/* 2x2 matrices of uint32, mod 2^32: a[0] a[1] / a[2] a[3]. */
static void mat_mul(const uint32_t *a, const uint32_t *b, uint32_t *out)
{
	uint32_t r[4] = {a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3],
	                 a[2] * b[0] + a[3] * b[2], a[2] * b[1] + a[3] * b[3]};
	memcpy(out, r, sizeof r);
}

/* inout = in op inout, in on the left. */
static void mat_op(void *in, void *inout, int *len, MPI_Datatype *type)
{
	(void)type;
	for (int i = 0; i < *len; i++)
		mat_mul((uint32_t *)in + 4 * i, (uint32_t *)inout + 4 * i,
		        (uint32_t *)inout + 4 * i);
}

static void usum_op(void *in, void *inout, int *len, MPI_Datatype *type)
{
	(void)type;
	for (int i = 0; i < *len; i++)
		((uint32_t *)inout)[i] += ((uint32_t *)in)[i];
}

static void compare(int which, size_t bytes, const void *got, const void *want, size_t len)
{
	if (memcmp(got, want, len) != 0) {
		size_t j = 0;
		while (((const unsigned char *)got)[j] == ((const unsigned char *)want)[j])
			j++;
		tu_fail("%s of %zu B: byte %zu of %zu differs", check_names[which], bytes, j, len);
	}
	digest = tu_hash(digest, got, len);
}

int main(int argc, char **argv)
{
	tu_init(&argc, &argv, "coll_switch");
	int digests = argc > 1 && strcmp(argv[1], "-d") == 0;
	int P = tu_size, me = tu_rank;
	MPI_Op mat, usum;
	MPI_Datatype mat_type;
	TU_MPI(MPI_Op_create(mat_op, 0, &mat));
	TU_MPI(MPI_Op_create(usum_op, 1, &usum));
	TU_MPI(MPI_Type_contiguous(4, MPI_UINT32_T, &mat_type));
	TU_MPI(MPI_Type_commit(&mat_type));
	/* buffers for the largest size times P (allgather, alltoall) */
	size_t cap = (size_t)MAX_BYTES * (size_t)P + 64;
	uint32_t *in = malloc(cap), *out = malloc(cap), *want = malloc(cap);
	TU_CHECK(in && out && want, "out of memory");
	int checked[NCHECK] = {0};

	size_t sizes[200];
	int nsizes = 0;
	for (size_t b = 1; b <= 64; b++) /* item counts around the rank count */
		if (b % 4 == 0 || b < 4)
			sizes[nsizes++] = b;
	for (size_t b = 80; b <= MAX_BYTES; b = b * 115 / 100)
		sizes[nsizes++] = b;

	for (int si = 0; si < nsizes; si++) {
		size_t bytes = sizes[si];
		int root = si % P, in_place = si % 2;

		/* Bcast of bytes */
		unsigned char *cin = (unsigned char *)in, *cwant = (unsigned char *)want;
		for (size_t j = 0; j < bytes; j++)
			cwant[j] = (unsigned char)input(root, j, 1);
		if (me == root)
			memcpy(cin, cwant, bytes);
		else
			memset(cin, 0, bytes);
		TU_MPI(MPI_Bcast(cin, (int)bytes, MPI_BYTE, root, MPI_COMM_WORLD));
		compare(BCAST, bytes, cin, cwant, bytes);
		checked[BCAST]++;

		/* Reductions of uint32 with MPI_SUM and the commutative user op */
		int n = bytes / 4 ? (int)(bytes / 4) : 1;
		for (int j = 0; j < n; j++) {
			uint32_t s = 0;
			for (int r = 0; r < P; r++)
				s += input(r, (size_t)j, 2);
			want[j] = s;
			in[j] = input(me, (size_t)j, 2);
		}
		memset(out, 0, (size_t)n * 4);
		if (in_place && me == root) {
			memcpy(out, in, (size_t)n * 4);
			TU_MPI(MPI_Reduce(MPI_IN_PLACE, out, n, MPI_UINT32_T, MPI_SUM, root,
			                  MPI_COMM_WORLD));
		} else {
			TU_MPI(MPI_Reduce(in, out, n, MPI_UINT32_T, MPI_SUM, root, MPI_COMM_WORLD));
		}
		if (me == root)
			compare(REDUCE, bytes, out, want, (size_t)n * 4);
		checked[REDUCE]++;
		if (in_place) {
			memcpy(out, in, (size_t)n * 4);
			TU_MPI(MPI_Allreduce(MPI_IN_PLACE, out, n, MPI_UINT32_T, MPI_SUM,
			                     MPI_COMM_WORLD));
		} else {
			TU_MPI(MPI_Allreduce(in, out, n, MPI_UINT32_T, MPI_SUM, MPI_COMM_WORLD));
		}
		compare(ALLREDUCE, bytes, out, want, (size_t)n * 4);
		checked[ALLREDUCE]++;
		TU_MPI(MPI_Allreduce(in, out, n, MPI_UINT32_T, usum, MPI_COMM_WORLD));
		compare(ALLREDUCE_UCOMM, bytes, out, want, (size_t)n * 4);
		checked[ALLREDUCE_UCOMM]++;

		/* Reduce_scatter_block: n / P items each (at least one) */
		int nb = n / P ? n / P : 1;
		for (int j = 0; j < nb * P; j++)
			in[j] = input(me, (size_t)j, 3);
		for (int j = 0; j < nb; j++) {
			uint32_t s = 0;
			for (int r = 0; r < P; r++)
				s += input(r, (size_t)(me * nb + j), 3);
			want[j] = s;
		}
		TU_MPI(
		    MPI_Reduce_scatter_block(in, out, nb, MPI_UINT32_T, MPI_SUM, MPI_COMM_WORLD));
		compare(REDUCE_SCATTER, bytes, out, want, (size_t)nb * 4);
		checked[REDUCE_SCATTER]++;

		/* The non-commutative op on 2x2 matrices: x0 x1 ... x(P-1) */
		int nm = bytes / 16 ? (int)(bytes / 16) : 1;
		for (int i = 0; i < nm; i++) {
			uint32_t acc[4];
			for (int e = 0; e < 4; e++)
				acc[e] = input(0, (size_t)(4 * i + e), 4);
			for (int r = 1; r < P; r++) {
				uint32_t x[4];
				for (int e = 0; e < 4; e++)
					x[e] = input(r, (size_t)(4 * i + e), 4);
				mat_mul(acc, x, acc);
			}
			memcpy(want + 4 * i, acc, sizeof acc);
			for (int e = 0; e < 4; e++)
				in[4 * i + e] = input(me, (size_t)(4 * i + e), 4);
		}
		TU_MPI(MPI_Allreduce(in, out, nm, mat_type, mat, MPI_COMM_WORLD));
		compare(ALLREDUCE_MAT, bytes, out, want, (size_t)nm * 16);
		checked[ALLREDUCE_MAT]++;
		int mroot = (si * 3 + 1) % P;
		memset(out, 0, (size_t)nm * 16);
		TU_MPI(MPI_Reduce(in, out, nm, mat_type, mat, mroot, MPI_COMM_WORLD));
		if (me == mroot)
			compare(REDUCE_MAT, bytes, out, want, (size_t)nm * 16);
		checked[REDUCE_MAT]++;

		/* Allgather of bytes per rank; Alltoall of bytes / P per pair */
		for (size_t j = 0; j < bytes; j++)
			cin[j] = (unsigned char)input(me, j, 5);
		for (int r = 0; r < P; r++)
			for (size_t j = 0; j < bytes; j++)
				cwant[(size_t)r * bytes + j] = (unsigned char)input(r, j, 5);
		TU_MPI(MPI_Allgather(cin, (int)bytes, MPI_BYTE, out, (int)bytes, MPI_BYTE,
		                     MPI_COMM_WORLD));
		compare(ALLGATHER, bytes, out, cwant, bytes * (size_t)P);
		checked[ALLGATHER]++;
		size_t pb = bytes / (size_t)P ? bytes / (size_t)P : 1;
		for (int r = 0; r < P; r++)
			for (size_t j = 0; j < pb; j++) {
				cin[(size_t)r * pb + j] =
				    (unsigned char)input(me, (size_t)r * pb + j, 6);
				cwant[(size_t)r * pb + j] =
				    (unsigned char)input(r, (size_t)me * pb + j, 6);
			}
		TU_MPI(
		    MPI_Alltoall(cin, (int)pb, MPI_BYTE, out, (int)pb, MPI_BYTE, MPI_COMM_WORLD));
		compare(ALLTOALL, bytes, out, cwant, pb * (size_t)P);
		checked[ALLTOALL]++;
	}

	if (me == 0)
		for (int k = 0; k < NCHECK; k++)
			printf("coll_switch: %s: %d sizes from 1 to %d B OK\n", check_names[k],
			       checked[k], MAX_BYTES);
	if (digests) {
		char line[96];
		snprintf(line, sizeof line, "coll_switch: rank %d: digest %016llx", me,
		         (unsigned long long)digest);
		tu_print_ranked(line);
	}
	MPI_Op_free(&mat);
	MPI_Op_free(&usum);
	MPI_Type_free(&mat_type);
	free(in);
	free(out);
	free(want);
	return tu_finalize();
}
