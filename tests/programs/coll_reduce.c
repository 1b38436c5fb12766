/* coll_reduce: reduction operations and the reducing collectives.
 *
 * 1. Every predefined op on every type the standard allows it on (C and
 *    fixed-size integers, multi-language types, floating point, complex,
 *    C bool, byte, the pair types for MINLOC/MAXLOC): MPI_Allreduce,
 *    MPI_Reduce and MPI_Reduce_local against a sequential computation in
 *    rank order. Inputs are small so no result overflows and floating-point
 *    results are exact.
 * 2. Reduce (every root), Allreduce, Reduce_scatter, Reduce_scatter_block,
 *    Scan and Exscan, in and out of place, for vectors of 8 bytes to 300 KB
 *    (so every algorithm the library may choose runs), with MPI_SUM on
 *    doubles, a commutative user op and a non-commutative one (composition
 *    of affine maps, on MPI_2INT), checked against rank-order sequential
 *    results.
 * 3. Allreduce of random doubles (rounding depends on the combination
 *    order): every rank must get the same bits, and a repeated call the
 *    same bits again.
 * Rank 0 prints a summary that does not depend on the rank count. */
#include "testutil.h"

#include <complex.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NELEMS(a) (sizeof(a) / sizeof((a)[0]))

static int P, me;

/* ---- 1. every op on its types ---- */

enum { N = 6 }; /* elements per call */

enum op_kind { K_MAX, K_MIN, K_SUM, K_PROD, K_LAND, K_LOR, K_LXOR, K_BAND, K_BOR, K_BXOR, NK };
static const MPI_Op kind_op[NK] = {MPI_MAX, MPI_MIN,  MPI_SUM,  MPI_PROD, MPI_LAND,
                                   MPI_LOR, MPI_LXOR, MPI_BAND, MPI_BOR,  MPI_BXOR};
static const char *const kind_name[NK] = {"MPI_MAX",  "MPI_MIN", "MPI_SUM",  "MPI_PROD",
                                          "MPI_LAND", "MPI_LOR", "MPI_LXOR", "MPI_BAND",
                                          "MPI_BOR",  "MPI_BXOR"};
static int types_checked[NK];

/* Input of rank r, element i, chosen per op so that results stay small
 * (no overflow in 8-bit types on 8 ranks, exact in floating point). */
static long input(enum op_kind k, int r, int i)
{
	switch (k) {
	case K_MAX:
	case K_MIN:
		return (r * 7 + i * 3) % 23 - 11;
	case K_SUM:
		return (r * 5 + i * 3) % 16;
	case K_PROD:
		return (r + i) % 4 == 0 ? 2 : ((r + 2 * i) % 3 == 0 ? -1 : 1);
	case K_LAND:
	case K_LOR:
	case K_LXOR:
		return (r * 3 + i) % 4 == 0 ? 0 : (r + i) % 3 + 1;
	default: /* bitwise */
		return ((r + 1) * (i + 3) * 37) & 0x7f;
	}
}

#define INPUT(k, r, i, U) (input(k, r, i) + ((U) && (k) <= K_MIN ? 11 : 0))

/* Sequential reduction in rank order with the op's C meaning. */
#define FOLD_ARITH(T, k, acc, v)                                                                   \
	switch (k) {                                                                               \
	case K_MAX:                                                                                \
		acc = acc > v ? acc : v;                                                           \
		break;                                                                             \
	case K_MIN:                                                                                \
		acc = acc < v ? acc : v;                                                           \
		break;                                                                             \
	case K_SUM:                                                                                \
		acc = (T)(acc + v);                                                                \
		break;                                                                             \
	case K_PROD:                                                                               \
		acc = (T)(acc * v);                                                                \
		break;                                                                             \
	default:                                                                                   \
		break;                                                                             \
	}
#define FOLD_LOGIC(T, k, acc, v)                                                                   \
	switch (k) {                                                                               \
	case K_LAND:                                                                               \
		acc = (T)(acc && v);                                                               \
		break;                                                                             \
	case K_LOR:                                                                                \
		acc = (T)(acc || v);                                                               \
		break;                                                                             \
	case K_LXOR:                                                                               \
		acc = (T)(!acc != !v);                                                             \
		break;                                                                             \
	default:                                                                                   \
		break;                                                                             \
	}
#define FOLD_BITS(T, k, acc, v)                                                                    \
	switch (k) {                                                                               \
	case K_BAND:                                                                               \
		acc = (T)(acc & v);                                                                \
		break;                                                                             \
	case K_BOR:                                                                                \
		acc = (T)(acc | v);                                                                \
		break;                                                                             \
	case K_BXOR:                                                                               \
		acc = (T)(acc ^ v);                                                                \
		break;                                                                             \
	default:                                                                                   \
		break;                                                                             \
	}

/* One (type, op) pair: Allreduce, Reduce to the last rank, Reduce_local.
 * U: MAX/MIN inputs are shifted to be non-negative, for unsigned and
 * multi-language types (Open MPI 4.1.4 compares MPI_UNSIGNED_LONG as signed
 * and MPI_OFFSET as unsigned, and these programs must pass there too). */
#define DEFINE_CHECK(name, T, FOLDS, U)                                                            \
	static void check_##name(MPI_Datatype type, enum op_kind k, const char *tname)             \
	{                                                                                          \
		T in[N], out[N], ref[N], local[N];                                                 \
		for (int i = 0; i < N; i++) {                                                      \
			in[i] = (T)INPUT(k, me, i, U);                                             \
			ref[i] = (T)INPUT(k, 0, i, U);                                             \
			for (int r = 1; r < P; r++) {                                              \
				T v = (T)INPUT(k, r, i, U);                                        \
				FOLDS(T, k, ref[i], v)                                             \
			}                                                                          \
		}                                                                                  \
		TU_MPI(MPI_Allreduce(in, out, N, type, kind_op[k], MPI_COMM_WORLD));               \
		for (int i = 0; i < N; i++)                                                        \
			TU_CHECK(out[i] == ref[i], "MPI_Allreduce %s on %s: element %d wrong",     \
			         kind_name[k], tname, i);                                          \
		for (int i = 0; i < N; i++)                                                        \
			out[i] = (T)0;                                                             \
		TU_MPI(MPI_Reduce(in, out, N, type, kind_op[k], P - 1, MPI_COMM_WORLD));           \
		for (int i = 0; me == P - 1 && i < N; i++)                                         \
			TU_CHECK(out[i] == ref[i], "MPI_Reduce %s on %s: element %d wrong",        \
			         kind_name[k], tname, i);                                          \
		for (int i = 0; i < N; i++) {                                                      \
			local[i] = (T)INPUT(k, me + 1, i, U);                                      \
			out[i] = local[i];                                                         \
			FOLDS(T, k, out[i], in[i])                                                 \
		}                                                                                  \
		TU_MPI(MPI_Reduce_local(in, local, N, type, kind_op[k]));                          \
		for (int i = 0; i < N; i++)                                                        \
			TU_CHECK(local[i] == out[i], "MPI_Reduce_local %s on %s: element %d",      \
			         kind_name[k], tname, i);                                          \
		types_checked[k]++;                                                                \
	}

#define FOLD_INTEGER(T, k, acc, v)                                                                 \
	FOLD_ARITH(T, k, acc, v) FOLD_LOGIC(T, k, acc, v) FOLD_BITS(T, k, acc, v)
#define FOLD_MULTI(T, k, acc, v) FOLD_ARITH(T, k, acc, v) FOLD_BITS(T, k, acc, v)
#define FOLD_COMPLEX(T, k, acc, v)                                                                 \
	if (k == K_SUM)                                                                            \
		acc = acc + v;                                                                     \
	else                                                                                       \
		acc = acc * v;

DEFINE_CHECK(schar, signed char, FOLD_INTEGER, 0)
DEFINE_CHECK(uchar, unsigned char, FOLD_INTEGER, 1)
DEFINE_CHECK(short, short, FOLD_INTEGER, 0)
DEFINE_CHECK(ushort, unsigned short, FOLD_INTEGER, 1)
DEFINE_CHECK(int, int, FOLD_INTEGER, 0)
DEFINE_CHECK(uint, unsigned, FOLD_INTEGER, 1)
DEFINE_CHECK(long, long, FOLD_INTEGER, 0)
DEFINE_CHECK(ulong, unsigned long, FOLD_INTEGER, 1)
DEFINE_CHECK(llong, long long, FOLD_INTEGER, 0)
DEFINE_CHECK(ullong, unsigned long long, FOLD_INTEGER, 1)
DEFINE_CHECK(i8, int8_t, FOLD_INTEGER, 0)
DEFINE_CHECK(i16, int16_t, FOLD_INTEGER, 0)
DEFINE_CHECK(i32, int32_t, FOLD_INTEGER, 0)
DEFINE_CHECK(i64, int64_t, FOLD_INTEGER, 0)
DEFINE_CHECK(u8, uint8_t, FOLD_INTEGER, 1)
DEFINE_CHECK(u16, uint16_t, FOLD_INTEGER, 1)
DEFINE_CHECK(u32, uint32_t, FOLD_INTEGER, 1)
DEFINE_CHECK(u64, uint64_t, FOLD_INTEGER, 1)
DEFINE_CHECK(aint, MPI_Aint, FOLD_MULTI, 1)
DEFINE_CHECK(offset, MPI_Offset, FOLD_MULTI, 1)
DEFINE_CHECK(count, MPI_Count, FOLD_MULTI, 1)
DEFINE_CHECK(float, float, FOLD_ARITH, 0)
DEFINE_CHECK(double, double, FOLD_ARITH, 0)
DEFINE_CHECK(ldouble, long double, FOLD_ARITH, 0)
DEFINE_CHECK(fcomplex, float _Complex, FOLD_COMPLEX, 0)
DEFINE_CHECK(dcomplex, double _Complex, FOLD_COMPLEX, 0)
DEFINE_CHECK(ldcomplex, long double _Complex, FOLD_COMPLEX, 0)
DEFINE_CHECK(bool, bool, FOLD_LOGIC, 0)
DEFINE_CHECK(byte, unsigned char, FOLD_BITS, 1)

#define ALL_KINDS(name, type)                                                                      \
	for (int k = 0; k < NK; k++)                                                               \
		check_##name(type, (enum op_kind)k, #type);
#define KINDS_IN(name, type, from, to)                                                             \
	for (int k = from; k <= to; k++)                                                           \
		check_##name(type, (enum op_kind)k, #type);

/* MAXLOC / MINLOC on one pair type: values with ties, index = rank, so
 * the winner on a tie is the lowest rank. */
#define DEFINE_LOC_CHECK(name, VT)                                                                 \
	static void check_loc_##name(MPI_Datatype type, const char *tname)                         \
	{                                                                                          \
		struct {                                                                           \
			VT v;                                                                      \
			int i;                                                                     \
		} in[N], out[N], ref[N];                                                           \
		for (int maxloc = 0; maxloc < 2; maxloc++) {                                       \
			for (int e = 0; e < N; e++) {                                              \
				in[e].v = (VT)((me * 7 + e * 3) % 5);                              \
				in[e].i = me;                                                      \
				ref[e].v = (VT)((e * 3) % 5);                                      \
				ref[e].i = 0;                                                      \
				for (int r = 1; r < P; r++) {                                      \
					VT v = (VT)((r * 7 + e * 3) % 5);                          \
					if (maxloc ? v > ref[e].v : v < ref[e].v) {                \
						ref[e].v = v;                                      \
						ref[e].i = r;                                      \
					}                                                          \
				}                                                                  \
			}                                                                          \
			MPI_Op op = maxloc ? MPI_MAXLOC : MPI_MINLOC;                              \
			TU_MPI(MPI_Allreduce(in, out, N, type, op, MPI_COMM_WORLD));               \
			for (int e = 0; e < N; e++)                                                \
				TU_CHECK(out[e].v == ref[e].v && out[e].i == ref[e].i,             \
				         "%s on %s: element %d: (%g, %d), expected (%g, %d)",      \
				         maxloc ? "MPI_MAXLOC" : "MPI_MINLOC", tname, e,           \
				         (double)out[e].v, out[e].i, (double)ref[e].v, ref[e].i);  \
		}                                                                                  \
	}

DEFINE_LOC_CHECK(float_int, float)
DEFINE_LOC_CHECK(double_int, double)
DEFINE_LOC_CHECK(long_int, long)
DEFINE_LOC_CHECK(2int, int)
DEFINE_LOC_CHECK(short_int, short)
DEFINE_LOC_CHECK(long_double_int, long double)

static void test_ops(void)
{
	ALL_KINDS(schar, MPI_SIGNED_CHAR)
	ALL_KINDS(uchar, MPI_UNSIGNED_CHAR)
	ALL_KINDS(short, MPI_SHORT)
	ALL_KINDS(ushort, MPI_UNSIGNED_SHORT)
	ALL_KINDS(int, MPI_INT)
	ALL_KINDS(uint, MPI_UNSIGNED)
	ALL_KINDS(long, MPI_LONG)
	ALL_KINDS(ulong, MPI_UNSIGNED_LONG)
	ALL_KINDS(llong, MPI_LONG_LONG)
	ALL_KINDS(ullong, MPI_UNSIGNED_LONG_LONG)
	ALL_KINDS(i8, MPI_INT8_T)
	ALL_KINDS(i16, MPI_INT16_T)
	ALL_KINDS(i32, MPI_INT32_T)
	ALL_KINDS(i64, MPI_INT64_T)
	ALL_KINDS(u8, MPI_UINT8_T)
	ALL_KINDS(u16, MPI_UINT16_T)
	ALL_KINDS(u32, MPI_UINT32_T)
	ALL_KINDS(u64, MPI_UINT64_T)
	for (int k = 0; k < NK; k++) {
		if (k >= K_LAND && k <= K_LXOR)
			continue; /* multi-language types: no logical ops */
		check_aint(MPI_AINT, (enum op_kind)k, "MPI_AINT");
		check_offset(MPI_OFFSET, (enum op_kind)k, "MPI_OFFSET");
		check_count(MPI_COUNT, (enum op_kind)k, "MPI_COUNT");
	}
	KINDS_IN(float, MPI_FLOAT, K_MAX, K_PROD)
	KINDS_IN(double, MPI_DOUBLE, K_MAX, K_PROD)
	KINDS_IN(ldouble, MPI_LONG_DOUBLE, K_MAX, K_PROD)
	KINDS_IN(fcomplex, MPI_C_FLOAT_COMPLEX, K_SUM, K_PROD)
	KINDS_IN(dcomplex, MPI_C_DOUBLE_COMPLEX, K_SUM, K_PROD)
	KINDS_IN(ldcomplex, MPI_C_LONG_DOUBLE_COMPLEX, K_SUM, K_PROD)
	KINDS_IN(bool, MPI_C_BOOL, K_LAND, K_LXOR)
	KINDS_IN(byte, MPI_BYTE, K_BAND, K_BXOR)
	if (me == 0)
		for (int k = 0; k < NK; k++)
			printf(
			    "coll_reduce: %s on %d types (Allreduce, Reduce, Reduce_local): ok\n",
			    kind_name[k], types_checked[k]);

	check_loc_float_int(MPI_FLOAT_INT, "MPI_FLOAT_INT");
	check_loc_double_int(MPI_DOUBLE_INT, "MPI_DOUBLE_INT");
	check_loc_long_int(MPI_LONG_INT, "MPI_LONG_INT");
	check_loc_2int(MPI_2INT, "MPI_2INT");
	check_loc_short_int(MPI_SHORT_INT, "MPI_SHORT_INT");
	check_loc_long_double_int(MPI_LONG_DOUBLE_INT, "MPI_LONG_DOUBLE_INT");
	if (me == 0)
		printf("coll_reduce: MPI_MAXLOC and MPI_MINLOC on the 6 pair types, ties to the "
		       "lowest index: ok\n");
}

/* ---- 2. the reducing collectives ---- */

/* The three ops of part 2, each on its own element type. */
enum vop { V_SUM_DOUBLE, V_USER_SUM_INT, V_AFFINE, NVOPS };
static const char *const vop_name[NVOPS] = {"MPI_SUM on MPI_DOUBLE",
                                            "commutative user op on MPI_INT",
                                            "non-commutative user op on MPI_2INT"};
static MPI_Op user_sum, affine;

struct affine_map { /* x -> a x + b (mod 2^32), as MPI_2INT */
	int a;
	int b;
};

union elem {
	double d;
	int n;
	struct affine_map f;
};

static void user_sum_fn(void *in, void *inout, int *len, MPI_Datatype *type)
{
	(void)type;
	const int *a = in;
	int *b = inout;
	for (int i = 0; i < *len; i++)
		b[i] = (int)((unsigned)a[i] + (unsigned)b[i]);
}

/* in first, then inout: (in ; inout), as MPI defines in op inout. */
static struct affine_map compose(struct affine_map f, struct affine_map g)
{
	struct affine_map h;
	h.a = (int)((unsigned)f.a * (unsigned)g.a);
	h.b = (int)((unsigned)f.b * (unsigned)g.a + (unsigned)g.b);
	return h;
}

static void affine_fn(void *in, void *inout, int *len, MPI_Datatype *type)
{
	TU_CHECK(*type == MPI_2INT, "user op called with another datatype");
	const struct affine_map *f = in;
	struct affine_map *g = inout;
	for (int i = 0; i < *len; i++)
		g[i] = compose(f[i], g[i]);
}

static size_t elem_size(enum vop v)
{
	return v == V_SUM_DOUBLE     ? sizeof(double)
	       : v == V_USER_SUM_INT ? sizeof(int)
	                             : sizeof(struct affine_map);
}

static MPI_Datatype elem_type(enum vop v)
{
	return v == V_SUM_DOUBLE ? MPI_DOUBLE : v == V_USER_SUM_INT ? MPI_INT : MPI_2INT;
}

static MPI_Op op_of(enum vop v)
{
	return v == V_SUM_DOUBLE ? MPI_SUM : v == V_USER_SUM_INT ? user_sum : affine;
}

/* Rank r's element i. */
static void element(enum vop v, int r, long i, void *out)
{
	uint32_t h = (uint32_t)(r + 1) * 2654435761u ^ (uint32_t)i * 40503u;
	h ^= h >> 15;
	switch (v) {
	case V_SUM_DOUBLE:
		*(double *)out = (double)(h % 100000) - 50000.0; /* integers: exact sums */
		break;
	case V_USER_SUM_INT:
		*(int *)out = (int)(h % 2000000) - 1000000;
		break;
	default:
		((struct affine_map *)out)->a = (int)(h | 1);
		((struct affine_map *)out)->b = (int)(h >> 3);
		break;
	}
}

/* acc = acc op (rank r's element i): the sequential rank-order fold. */
static void fold(enum vop v, void *acc, int r, long i)
{
	union elem e;
	element(v, r, i, &e);
	if (v == V_SUM_DOUBLE)
		*(double *)acc += e.d;
	else if (v == V_USER_SUM_INT)
		*(int *)acc = (int)((unsigned)*(int *)acc + (unsigned)e.n);
	else
		*(struct affine_map *)acc = compose(*(struct affine_map *)acc, e.f);
}

/* Expected value of element i reduced over ranks [0, upto). */
static void expected(enum vop v, long i, int upto, void *out)
{
	element(v, 0, i, out);
	for (int r = 1; r < upto; r++)
		fold(v, out, r, i);
}

static void *alloc_elems(enum vop v, long n)
{
	void *p = malloc((size_t)(n > 0 ? n : 1) * elem_size(v));
	TU_CHECK(p, "out of memory");
	return p;
}

static void fill_mine(enum vop v, void *buf, long n)
{
	for (long i = 0; i < n; i++)
		element(v, me, i, (char *)buf + i * elem_size(v));
}

/* buf[i] for i in [0, n) must be element first + i reduced over [0, upto). */
static void expect_reduced(enum vop v, const void *buf, long first, long n, int upto,
                           const char *what, int size_index)
{
	union elem want;
	for (long i = 0; i < n; i++) {
		expected(v, first + i, upto, &want);
		TU_CHECK(memcmp((const char *)buf + i * elem_size(v), &want, elem_size(v)) == 0,
		         "%s, %s, size #%d: element %ld wrong", what, vop_name[v], size_index,
		         first + i);
	}
}

static const long counts[] = {1, 7, 5000, 15000, 37500}; /* 8 bytes to 300 KB of doubles */

static void test_reduce(enum vop v, long n, int si)
{
	size_t es = elem_size(v);
	void *in = alloc_elems(v, n), *out = alloc_elems(v, n);
	for (int root = 0; root < P; root++) {
		if (n > 5000 && root != 0 && root != P - 1)
			continue; /* large vectors: the first and last roots do */
		for (int in_place = 0; in_place < 2; in_place++) {
			fill_mine(v, in, n);
			memset(out, 0, (size_t)n * es);
			const void *sbuf = in;
			if (in_place && me == root) {
				fill_mine(v, out, n);
				sbuf = MPI_IN_PLACE;
			}
			TU_MPI(MPI_Reduce(sbuf, out, (int)n, elem_type(v), op_of(v), root,
			                  MPI_COMM_WORLD));
			if (me == root)
				expect_reduced(v, out, 0, n, P, "MPI_Reduce", si);
		}
	}
	free(in);
	free(out);
}

static void test_allreduce(enum vop v, long n, int si)
{
	void *in = alloc_elems(v, n), *out = alloc_elems(v, n);
	for (int in_place = 0; in_place < 2; in_place++) {
		fill_mine(v, in_place ? out : in, n);
		TU_MPI(MPI_Allreduce(in_place ? MPI_IN_PLACE : in, out, (int)n, elem_type(v),
		                     op_of(v), MPI_COMM_WORLD));
		expect_reduced(v, out, 0, n, P, "MPI_Allreduce", si);
	}
	free(in);
	free(out);
}

static void test_reduce_scatter(enum vop v, long n, int si)
{
	int *rc = malloc((size_t)P * sizeof(int));
	TU_CHECK(rc, "out of memory");
	/* Uneven blocks summing to n: rank 2's share goes to rank 0. */
	long first = 0;
	for (int i = 0; i < P; i++)
		rc[i] = (int)(n / P + (i < n % P));
	if (P > 2) {
		rc[0] += rc[2];
		rc[2] = 0;
	}
	for (int i = 0; i < me; i++)
		first += rc[i];
	void *in = alloc_elems(v, n), *out = alloc_elems(v, n);
	for (int in_place = 0; in_place < 2; in_place++) {
		fill_mine(v, in_place ? out : in, n);
		TU_MPI(MPI_Reduce_scatter(in_place ? MPI_IN_PLACE : in, out, rc, elem_type(v),
		                          op_of(v), MPI_COMM_WORLD));
		expect_reduced(v, out, first, rc[me], P, "MPI_Reduce_scatter", si);
	}
	long block = n / P;
	for (int in_place = 0; in_place < 2; in_place++) {
		fill_mine(v, in_place ? out : in, block * P);
		TU_MPI(MPI_Reduce_scatter_block(in_place ? MPI_IN_PLACE : in, out, (int)block,
		                                elem_type(v), op_of(v), MPI_COMM_WORLD));
		expect_reduced(v, out, block * me, block, P, "MPI_Reduce_scatter_block", si);
	}
	free(rc);
	free(in);
	free(out);
}

static void test_scan(enum vop v, long n, int si)
{
	size_t es = elem_size(v);
	void *in = alloc_elems(v, n), *out = alloc_elems(v, n);
	for (int exclusive = 0; exclusive < 2; exclusive++) {
		for (int in_place = 0; in_place < 2; in_place++) {
			fill_mine(v, in_place ? out : in, n);
			if (!in_place)
				memset(out, 0x33, (size_t)n * es);
			const void *sbuf = in_place ? MPI_IN_PLACE : in;
			if (exclusive)
				TU_MPI(MPI_Exscan(sbuf, out, (int)n, elem_type(v), op_of(v),
				                  MPI_COMM_WORLD));
			else
				TU_MPI(MPI_Scan(sbuf, out, (int)n, elem_type(v), op_of(v),
				                MPI_COMM_WORLD));
			/* Exscan leaves rank 0's buffer undefined: not checked. */
			if (!exclusive || me > 0)
				expect_reduced(v, out, 0, n, exclusive ? me : me + 1,
				               exclusive ? "MPI_Exscan" : "MPI_Scan", si);
		}
	}
	free(in);
	free(out);
}

static void test_collectives(void)
{
	TU_MPI(MPI_Op_create(user_sum_fn, 1, &user_sum));
	TU_MPI(MPI_Op_create(affine_fn, 0, &affine));
	int commute = -1;
	TU_MPI(MPI_Op_commutative(affine, &commute));
	TU_CHECK(commute == 0, "MPI_Op_commutative of a non-commutative op: %d", commute);
	TU_MPI(MPI_Op_commutative(user_sum, &commute));
	TU_CHECK(commute == 1, "MPI_Op_commutative of a commutative op: %d", commute);
	TU_MPI(MPI_Op_commutative(MPI_SUM, &commute));
	TU_CHECK(commute == 1, "MPI_Op_commutative(MPI_SUM): %d", commute);

	for (int v = 0; v < NVOPS; v++)
		for (size_t s = 0; s < NELEMS(counts); s++) {
			/* the same byte sizes for every op */
			long n = counts[s] * (long)sizeof(double) / (long)elem_size((enum vop)v);
			test_reduce((enum vop)v, n, (int)s);
			test_allreduce((enum vop)v, n, (int)s);
			test_reduce_scatter((enum vop)v, n, (int)s);
			test_scan((enum vop)v, n, (int)s);
		}
	if (me == 0)
		for (int v = 0; v < NVOPS; v++)
			printf(
			    "coll_reduce: %s: Reduce (every root), Allreduce, Reduce_scatter, "
			    "Reduce_scatter_block, Scan, Exscan, 8 to 300000 bytes, in place: ok\n",
			    vop_name[v]);

	TU_MPI(MPI_Op_free(&user_sum));
	TU_MPI(MPI_Op_free(&affine));
	TU_CHECK(user_sum == MPI_OP_NULL && affine == MPI_OP_NULL,
	         "MPI_Op_free did not set MPI_OP_NULL");
}

/* ---- 3. the same bits everywhere ---- */

static void test_identical(void)
{
	static const int sizes[] = {3, 5000, 40000};
	for (size_t s = 0; s < NELEMS(sizes); s++) {
		int n = sizes[s];
		double *in = malloc((size_t)n * sizeof *in), *out = malloc((size_t)n * sizeof *out);
		double *again = malloc((size_t)n * sizeof *again);
		double *all = me == 0 ? malloc((size_t)n * P * sizeof *all) : NULL;
		TU_CHECK(in && out && again && (me != 0 || all), "out of memory");
		uint64_t state = 1000 + (uint64_t)me;
		for (int i = 0; i < n; i++) /* magnitudes from 1e-3 to 1e3: sums round */
			in[i] = (double)(tu_rand(&state) >> 11) / 9007199254740992.0 *
			        (i % 3 == 0   ? 1e3
			         : i % 3 == 1 ? 1.0
			                      : 1e-3);
		TU_MPI(MPI_Allreduce(in, out, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
		TU_MPI(MPI_Allreduce(in, again, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
		TU_CHECK(memcmp(out, again, (size_t)n * sizeof *out) == 0,
		         "MPI_Allreduce of %d doubles: a second call gave other bits", n);
		TU_MPI(MPI_Gather(out, n, MPI_DOUBLE, all, n, MPI_DOUBLE, 0, MPI_COMM_WORLD));
		for (int r = 1; me == 0 && r < P; r++)
			TU_CHECK(memcmp(all, all + (size_t)r * n, (size_t)n * sizeof *all) == 0,
			         "MPI_Allreduce of %d doubles: rank %d got other bits than rank 0",
			         n, r);
		free(in);
		free(out);
		free(again);
		free(all);
	}
	if (me == 0)
		printf("coll_reduce: MPI_Allreduce of rounded doubles: the same bits on every rank "
		       "and every call: ok\n");
}

int main(int argc, char **argv)
{
	tu_init(&argc, &argv, "coll_reduce");
	P = tu_size;
	me = tu_rank;
	test_ops();
	test_collectives();
	test_identical();
	TU_MPI(MPI_Barrier(MPI_COMM_WORLD));
	if (me == 0)
		printf("coll_reduce: all checks passed\n");
	return tu_finalize();
}
