/* Reduction operations: the predefined ops on the types the standard lists
 * for them (MPI-3.1 section 5.9.2), user ops (MPI_Op_create), and
 * MPI_Reduce_local.
 *
 * A predefined op on a predefined type is a loop over a C array of that
 * type, generated below for every (op, type) pair the standard allows; any
 * other pair has no function in the table and is MPI_ERR_OP. Signed integer
 * SUM and PROD compute in the unsigned twin of the type, so overflow wraps
 * (as every MPI implementation in practice does) instead of being undefined
 * behaviour. A predefined op also takes a derived datatype whose elements
 * are all of one type it allows (the datatype's basic type), through the
 * packed images of the operands. */
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>

#include "mpi_coll_internal.h"
#include "vec.h"

enum op_index {
	OP_NONE = 0,
	OP_MAX = 1,
	OP_MIN,
	OP_SUM,
	OP_PROD,
	OP_LAND,
	OP_BAND,
	OP_LOR,
	OP_BOR,
	OP_LXOR,
	OP_BXOR,
	OP_MINLOC,
	OP_MAXLOC,
	NUM_PREDEFINED_OPS
};

_Static_assert(CM_HANDLE_INDEX(MPI_MAX) == OP_MAX && CM_HANDLE_INDEX(MPI_MIN) == OP_MIN &&
                   CM_HANDLE_INDEX(MPI_SUM) == OP_SUM && CM_HANDLE_INDEX(MPI_PROD) == OP_PROD &&
                   CM_HANDLE_INDEX(MPI_LAND) == OP_LAND && CM_HANDLE_INDEX(MPI_BAND) == OP_BAND &&
                   CM_HANDLE_INDEX(MPI_LOR) == OP_LOR && CM_HANDLE_INDEX(MPI_BOR) == OP_BOR &&
                   CM_HANDLE_INDEX(MPI_LXOR) == OP_LXOR && CM_HANDLE_INDEX(MPI_BXOR) == OP_BXOR &&
                   CM_HANDLE_INDEX(MPI_MINLOC) == OP_MINLOC &&
                   CM_HANDLE_INDEX(MPI_MAXLOC) == OP_MAXLOC,
               "op handles and table indexes agree");

struct cm_mpi_op {
	MPI_Op handle;
	int live;
	int commutative;
	enum op_index predefined; /* OP_NONE for a user op */
	MPI_User_function *user_fn;
};

typedef void (*reduce_fn)(const void *in, void *inout, size_t n);

/* ---- the loops ---- */

#define LOOP(name, T, expr)                                                                        \
	static void name(const void *in_, void *inout_, size_t n)                                  \
	{                                                                                          \
		const T *a = in_;                                                                  \
		T *b = inout_;                                                                     \
		for (size_t i = 0; i < n; i++)                                                     \
			b[i] = (expr);                                                             \
	}

#define ORDERED_OPS(tn, T, UT)                                                                     \
	LOOP(tn##_max, T, a[i] > b[i] ? a[i] : b[i])                                               \
	LOOP(tn##_min, T, a[i] < b[i] ? a[i] : b[i])                                               \
	LOOP(tn##_sum, T, (T)((UT)a[i] + (UT)b[i]))                                                \
	LOOP(tn##_prod, T, (T)((UT)a[i] * (UT)b[i]))
#define LOGICAL_OPS(tn, T)                                                                         \
	LOOP(tn##_land, T, (T)(a[i] && b[i]))                                                      \
	LOOP(tn##_lor, T, (T)(a[i] || b[i]))                                                       \
	LOOP(tn##_lxor, T, (T)(!a[i] != !b[i]))
#define BITWISE_OPS(tn, T)                                                                         \
	LOOP(tn##_band, T, (T)(a[i] & b[i]))                                                       \
	LOOP(tn##_bor, T, (T)(a[i] | b[i]))                                                        \
	LOOP(tn##_bxor, T, (T)(a[i] ^ b[i]))
#define FLOAT_OPS(tn, T)                                                                           \
	LOOP(tn##_max, T, a[i] > b[i] ? a[i] : b[i])                                               \
	LOOP(tn##_min, T, a[i] < b[i] ? a[i] : b[i])                                               \
	LOOP(tn##_sum, T, a[i] + b[i])                                                             \
	LOOP(tn##_prod, T, a[i] * b[i])
#define COMPLEX_OPS(tn, T)                                                                         \
	LOOP(tn##_sum, T, a[i] + b[i])                                                             \
	LOOP(tn##_prod, T, a[i] * b[i])

/* MAXLOC / MINLOC on {value, index} pairs: the better value wins; on a
 * tie, the smaller index (so the result does not depend on the order). */
#define PAIR_OPS(tn, VT)                                                                           \
	struct tn##_pair {                                                                         \
		VT v;                                                                              \
		int i;                                                                             \
	};                                                                                         \
	static void tn##_maxloc(const void *in_, void *inout_, size_t n)                           \
	{                                                                                          \
		const struct tn##_pair *a = in_;                                                   \
		struct tn##_pair *b = inout_;                                                      \
		for (size_t i = 0; i < n; i++) {                                                   \
			if (a[i].v > b[i].v)                                                       \
				b[i] = a[i];                                                       \
			else if (a[i].v == b[i].v && a[i].i < b[i].i)                              \
				b[i].i = a[i].i;                                                   \
		}                                                                                  \
	}                                                                                          \
	static void tn##_minloc(const void *in_, void *inout_, size_t n)                           \
	{                                                                                          \
		const struct tn##_pair *a = in_;                                                   \
		struct tn##_pair *b = inout_;                                                      \
		for (size_t i = 0; i < n; i++) {                                                   \
			if (a[i].v < b[i].v)                                                       \
				b[i] = a[i];                                                       \
			else if (a[i].v == b[i].v && a[i].i < b[i].i)                              \
				b[i].i = a[i].i;                                                   \
		}                                                                                  \
	}

/* Type lists: X(short name, handle, C type, unsigned type for wrapping
 * arithmetic). Unsigned types narrower than int compute in unsigned int:
 * their promotion to int could overflow a multiplication. */
#define C_INTEGER_TYPES(X)                                                                         \
	X(schar, MPI_SIGNED_CHAR, signed char, unsigned)                                           \
	X(uchar, MPI_UNSIGNED_CHAR, unsigned char, unsigned)                                       \
	X(short, MPI_SHORT, short, unsigned)                                                       \
	X(ushort, MPI_UNSIGNED_SHORT, unsigned short, unsigned)                                    \
	X(int, MPI_INT, int, unsigned)                                                             \
	X(uint, MPI_UNSIGNED, unsigned, unsigned)                                                  \
	X(long, MPI_LONG, long, unsigned long)                                                     \
	X(ulong, MPI_UNSIGNED_LONG, unsigned long, unsigned long)                                  \
	X(llong, MPI_LONG_LONG_INT, long long, unsigned long long)                                 \
	X(ullong, MPI_UNSIGNED_LONG_LONG, unsigned long long, unsigned long long)                  \
	X(i8, MPI_INT8_T, int8_t, unsigned)                                                        \
	X(i16, MPI_INT16_T, int16_t, unsigned)                                                     \
	X(i32, MPI_INT32_T, int32_t, uint32_t)                                                     \
	X(i64, MPI_INT64_T, int64_t, uint64_t)                                                     \
	X(u8, MPI_UINT8_T, uint8_t, unsigned)                                                      \
	X(u16, MPI_UINT16_T, uint16_t, unsigned)                                                   \
	X(u32, MPI_UINT32_T, uint32_t, uint32_t)                                                   \
	X(u64, MPI_UINT64_T, uint64_t, uint64_t)
/* The "multi-language" types: arithmetic and bitwise, not logical. */
#define MULTI_LANGUAGE_TYPES(X)                                                                    \
	X(aint, MPI_AINT, MPI_Aint, uintptr_t)                                                     \
	X(offset, MPI_OFFSET, MPI_Offset, unsigned long long)                                      \
	X(count, MPI_COUNT, MPI_Count, unsigned long long)
#define FLOAT_TYPES(X)                                                                             \
	X(float, MPI_FLOAT, float, float)                                                          \
	X(double, MPI_DOUBLE, double, double)                                                      \
	X(ldouble, MPI_LONG_DOUBLE, long double, long double)
#define COMPLEX_TYPES(X)                                                                           \
	X(fcomplex, MPI_C_FLOAT_COMPLEX, float _Complex, float _Complex)                           \
	X(dcomplex, MPI_C_DOUBLE_COMPLEX, double _Complex, double _Complex)                        \
	X(ldcomplex, MPI_C_LONG_DOUBLE_COMPLEX, long double _Complex, long double _Complex)
#define PAIR_TYPES(X)                                                                              \
	X(float_int, MPI_FLOAT_INT, float, float)                                                  \
	X(double_int, MPI_DOUBLE_INT, double, double)                                              \
	X(long_int, MPI_LONG_INT, long, long)                                                      \
	X(twoint, MPI_2INT, int, int)                                                              \
	X(short_int, MPI_SHORT_INT, short, short)                                                  \
	X(ldouble_int, MPI_LONG_DOUBLE_INT, long double, long double)

#define DEFINE_C_INTEGER(tn, h, T, UT) ORDERED_OPS(tn, T, UT) LOGICAL_OPS(tn, T) BITWISE_OPS(tn, T)
#define DEFINE_MULTI_LANGUAGE(tn, h, T, UT) ORDERED_OPS(tn, T, UT) BITWISE_OPS(tn, T)
#define DEFINE_FLOAT(tn, h, T, UT) FLOAT_OPS(tn, T)
#define DEFINE_COMPLEX(tn, h, T, UT) COMPLEX_OPS(tn, T)
#define DEFINE_PAIR(tn, h, T, UT) PAIR_OPS(tn, T)

C_INTEGER_TYPES(DEFINE_C_INTEGER)
MULTI_LANGUAGE_TYPES(DEFINE_MULTI_LANGUAGE)
FLOAT_TYPES(DEFINE_FLOAT)
COMPLEX_TYPES(DEFINE_COMPLEX)
PAIR_TYPES(DEFINE_PAIR)
LOGICAL_OPS(bool, bool)
BITWISE_OPS(byte, unsigned char)

/* ---- the (type, op) table ---- */

/* Large enough for every predefined datatype index (checked below). */
#define TYPE_SLOTS 64
_Static_assert(CM_HANDLE_INDEX(MPI_LONG_DOUBLE_INT) < TYPE_SLOTS &&
                   CM_HANDLE_INDEX(MPI_C_BOOL) < TYPE_SLOTS &&
                   CM_HANDLE_INDEX(MPI_BYTE) < TYPE_SLOTS,
               "predefined datatypes fit the op table");

#define ROW(h) [CM_HANDLE_INDEX(h)]
#define ENTRY_C_INTEGER(tn, h, T, UT)                                                              \
	ROW(h) = {[OP_MAX] = tn##_max,   [OP_MIN] = tn##_min,   [OP_SUM] = tn##_sum,               \
	          [OP_PROD] = tn##_prod, [OP_LAND] = tn##_land, [OP_LOR] = tn##_lor,               \
	          [OP_LXOR] = tn##_lxor, [OP_BAND] = tn##_band, [OP_BOR] = tn##_bor,               \
	          [OP_BXOR] = tn##_bxor},
#define ENTRY_MULTI_LANGUAGE(tn, h, T, UT)                                                         \
	ROW(h) = {[OP_MAX] = tn##_max,   [OP_MIN] = tn##_min,   [OP_SUM] = tn##_sum,               \
	          [OP_PROD] = tn##_prod, [OP_BAND] = tn##_band, [OP_BOR] = tn##_bor,               \
	          [OP_BXOR] = tn##_bxor},
#define ENTRY_FLOAT(tn, h, T, UT)                                                                  \
	ROW(h) = {                                                                                 \
	    [OP_MAX] = tn##_max, [OP_MIN] = tn##_min, [OP_SUM] = tn##_sum, [OP_PROD] = tn##_prod},
#define ENTRY_COMPLEX(tn, h, T, UT) ROW(h) = {[OP_SUM] = tn##_sum, [OP_PROD] = tn##_prod},
#define ENTRY_PAIR(tn, h, T, UT) ROW(h) = {[OP_MINLOC] = tn##_minloc, [OP_MAXLOC] = tn##_maxloc},

static const reduce_fn op_table[TYPE_SLOTS][NUM_PREDEFINED_OPS] = {
    C_INTEGER_TYPES(ENTRY_C_INTEGER) MULTI_LANGUAGE_TYPES(ENTRY_MULTI_LANGUAGE)
        FLOAT_TYPES(ENTRY_FLOAT) COMPLEX_TYPES(ENTRY_COMPLEX) PAIR_TYPES(ENTRY_PAIR)
            ROW(MPI_C_BOOL) = {[OP_LAND] = bool_land, [OP_LOR] = bool_lor, [OP_LXOR] = bool_lxor},
    ROW(MPI_BYTE) = {[OP_BAND] = byte_band, [OP_BOR] = byte_bor, [OP_BXOR] = byte_bxor},
};

/* The loop for a predefined op on items of the predefined type b, or
 * NULL if the pair is not allowed. */
static reduce_fn predefined_fn(enum op_index op, const struct cm_mpi_datatype *b)
{
	unsigned index = CM_HANDLE_INDEX(b->handle);
	if (b->derived || index >= TYPE_SLOTS || cm_mpi_type_get(b->handle) != b)
		return NULL;
	return op_table[index][op];
}

/* The predefined type a predefined op works on for items of t: t itself,
 * or for a derived type the one predefined type all its elements are of
 * (NULL if they are of several). */
static const struct cm_mpi_datatype *basic_of(const struct cm_mpi_datatype *t)
{
	if (!t->derived)
		return t;
	return t->basic == MPI_DATATYPE_NULL ? NULL : cm_mpi_type_get(t->basic);
}

/* A predefined op on a derived type: both operands are packed (the
 * packed image is a sequence of items of the basic type b, without the
 * padding of a pair type), combined as arrays of b, and the result is
 * unpacked into inout. */
static int apply_through_basic(reduce_fn fn, const struct cm_mpi_datatype *t,
                               const struct cm_mpi_datatype *b, const void *in, void *inout,
                               size_t count)
{
	size_t bytes = count * t->size, n = b->size ? bytes / b->size : 0;
	int rc = MPI_ERR_NO_MEM;
	char *pin = malloc(bytes ? bytes : 1), *pio = malloc(bytes ? bytes : 1);
	char *ain = NULL, *aio = NULL;
	if (!pin || !pio)
		goto out;
	cm_mpi_pack(t, in, count, pin);
	cm_mpi_pack(t, inout, count, pio);
	if (b->contiguous) {
		fn(pin, pio, n);
	} else {
		ain = malloc(n * (size_t)b->extent + 1);
		aio = malloc(n * (size_t)b->extent + 1);
		if (!ain || !aio)
			goto out;
		cm_mpi_unpack(b, pin, bytes, ain);
		cm_mpi_unpack(b, pio, bytes, aio);
		fn(ain, aio, n);
		cm_mpi_pack(b, aio, n, pio);
	}
	cm_mpi_unpack(t, pio, bytes, inout);
	rc = MPI_SUCCESS;
out:
	free(pin);
	free(pio);
	free(ain);
	free(aio);
	return rc;
}

/* ---- op objects ---- */

#define PREDEFINED(idx)                                                                            \
	[idx] = {                                                                                  \
	    .handle = (MPI_Op)(CM_KIND_OP | idx), .live = 1, .commutative = 1, .predefined = idx}

static const struct cm_mpi_op predefined_ops[NUM_PREDEFINED_OPS] = {
    PREDEFINED(OP_MAX),  PREDEFINED(OP_MIN),  PREDEFINED(OP_SUM),    PREDEFINED(OP_PROD),
    PREDEFINED(OP_LAND), PREDEFINED(OP_BAND), PREDEFINED(OP_LOR),    PREDEFINED(OP_BOR),
    PREDEFINED(OP_LXOR), PREDEFINED(OP_BXOR), PREDEFINED(OP_MINLOC), PREDEFINED(OP_MAXLOC),
};

/* User ops: handle index FIRST_USER_OP + slot. Objects are allocated one by
 * one so a pointer stays valid when the table grows. */
#define FIRST_USER_OP 64u
static CM_VEC(struct cm_mpi_op *) user_ops;

const struct cm_mpi_op *cm_mpi_op_get(MPI_Op op)
{
	if (CM_HANDLE_KIND(op) != CM_KIND_OP)
		return NULL;
	unsigned index = CM_HANDLE_INDEX(op);
	if (index > OP_NONE && index < NUM_PREDEFINED_OPS)
		return &predefined_ops[index];
	if (index < FIRST_USER_OP || index - FIRST_USER_OP >= user_ops.n)
		return NULL;
	struct cm_mpi_op *o = user_ops.items[index - FIRST_USER_OP];
	return o && o->live ? o : NULL;
}

int cm_mpi_op_commutative(const struct cm_mpi_op *op)
{
	return op->commutative;
}

int cm_mpi_op_check(const struct cm_mpi_op *op, const struct cm_mpi_datatype *t)
{
	if (op->predefined == OP_NONE)
		return MPI_SUCCESS; /* a user op takes whatever it is given */
	const struct cm_mpi_datatype *b = basic_of(t);
	return b && predefined_fn(op->predefined, b) ? MPI_SUCCESS : MPI_ERR_OP;
}

int cm_mpi_op_apply(const struct cm_mpi_op *op, const struct cm_mpi_datatype *t, const void *in,
                    void *inout, size_t count)
{
	if (op->predefined != OP_NONE) {
		const struct cm_mpi_datatype *b = basic_of(t);
		reduce_fn fn = predefined_fn(op->predefined, b);
		if (b == t) {
			fn(in, inout, count);
			return MPI_SUCCESS;
		}
		return apply_through_basic(fn, t, b, in, inout, count);
	}
	/* The user function counts in int: hand it at most INT_MAX items a
	 * call. */
	MPI_Datatype handle = t->handle;
	while (count > 0) {
		int len = count > INT_MAX ? INT_MAX : (int)count;
		op->user_fn((void *)in, inout, &len, &handle);
		in = cm_mpi_addr(in, (MPI_Aint)len * t->extent);
		inout = cm_mpi_addr(inout, (MPI_Aint)len * t->extent);
		count -= (size_t)len;
	}
	return MPI_SUCCESS;
}

/* ---- the MPI calls ---- */

int MPI_Op_create(MPI_User_function *user_fn, int commute, MPI_Op *op)
{
	CM_MPI_REQUIRE_INIT("MPI_Op_create");
	if (!user_fn || !op)
		return cm_mpi_raise(NULL, MPI_ERR_ARG, "MPI_Op_create");
	/* A freed op's object is kept (live = 0) and reused. */
	size_t slot = 0;
	while (slot < user_ops.n && user_ops.items[slot]->live)
		slot++;
	if (slot == user_ops.n) {
		struct cm_mpi_op **p;
		if (FIRST_USER_OP + slot > CM_HANDLE_INDEX_MAX || !(p = cm_vec_push(&user_ops)))
			return cm_mpi_raise(NULL, MPI_ERR_NO_MEM, "MPI_Op_create");
		if (!(*p = calloc(1, sizeof **p))) {
			user_ops.n--;
			return cm_mpi_raise(NULL, MPI_ERR_NO_MEM, "MPI_Op_create");
		}
	}
	struct cm_mpi_op *o = user_ops.items[slot];
	o->handle = (MPI_Op)(CM_KIND_OP | (FIRST_USER_OP + slot));
	o->live = 1;
	o->commutative = commute != 0;
	o->predefined = OP_NONE;
	o->user_fn = user_fn;
	*op = o->handle;
	return MPI_SUCCESS;
}

int MPI_Op_free(MPI_Op *op)
{
	CM_MPI_REQUIRE_INIT("MPI_Op_free");
	if (!op)
		return cm_mpi_raise(NULL, MPI_ERR_ARG, "MPI_Op_free");
	const struct cm_mpi_op *o = cm_mpi_op_get(*op);
	if (!o || o->predefined != OP_NONE)
		return cm_mpi_raise(NULL, MPI_ERR_OP, "MPI_Op_free");
	/* Collectives are blocking: no operation can still be using it. */
	user_ops.items[CM_HANDLE_INDEX(*op) - FIRST_USER_OP]->live = 0;
	*op = MPI_OP_NULL;
	return MPI_SUCCESS;
}

int MPI_Op_commutative(MPI_Op op, int *commute)
{
	CM_MPI_REQUIRE_INIT("MPI_Op_commutative");
	const struct cm_mpi_op *o = cm_mpi_op_get(op);
	if (!o)
		return cm_mpi_raise(NULL, MPI_ERR_OP, "MPI_Op_commutative");
	if (!commute)
		return cm_mpi_raise(NULL, MPI_ERR_ARG, "MPI_Op_commutative");
	*commute = o->commutative;
	return MPI_SUCCESS;
}

/* The reductions' argument checks: the buffer checks of mpi_coll_util.c
 * and the op's fit to the datatype. */
int cm_coll_check_reduction(const void *sendbuf, const void *recvbuf, int count,
                            MPI_Datatype datatype, MPI_Op op, int recv_used,
                            const struct cm_mpi_datatype **t, const struct cm_mpi_op **o)
{
	int rc = cm_coll_check_buf(recv_used ? recvbuf : sendbuf, count, datatype, t);
	if (rc)
		return rc;
	*o = cm_mpi_op_get(op);
	if (!*o)
		return MPI_ERR_OP;
	rc = cm_mpi_op_check(*o, *t);
	if (rc)
		return rc;
	if (!cm_coll_buf_ok(sendbuf, (size_t)count, *t) ||
	    (recv_used && (!cm_coll_buf_ok(recvbuf, (size_t)count, *t) || recvbuf == MPI_IN_PLACE)))
		return MPI_ERR_BUFFER;
	if (count > 0 && recv_used && sendbuf == recvbuf)
		return MPI_ERR_BUFFER; /* aliased buffers: MPI_IN_PLACE is the way */
	return MPI_SUCCESS;
}

int MPI_Reduce_local(const void *inbuf, void *inoutbuf, int count, MPI_Datatype datatype, MPI_Op op)
{
	const struct cm_mpi_datatype *t;
	CM_MPI_REQUIRE_INIT("MPI_Reduce_local");
	const struct cm_mpi_op *o = cm_mpi_op_get(op);
	int rc = cm_coll_check_buf(inoutbuf, count, datatype, &t);
	if (!rc && (!cm_coll_buf_ok(inbuf, (size_t)count, t) || inbuf == MPI_IN_PLACE ||
	            inoutbuf == MPI_IN_PLACE))
		rc = MPI_ERR_BUFFER;
	if (!rc && !o)
		rc = MPI_ERR_OP;
	if (!rc)
		rc = cm_mpi_op_check(o, t);
	if (rc)
		return cm_mpi_raise(NULL, rc, "MPI_Reduce_local");
	rc = cm_mpi_op_apply(o, t, inbuf, inoutbuf, (size_t)count);
	return rc ? cm_mpi_raise(NULL, rc, "MPI_Reduce_local") : MPI_SUCCESS;
}
