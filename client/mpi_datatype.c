/* Datatypes: the predefined ones as objects with size, extent and a block
 * list. A basic type is one contiguous block; a pair type (MPI_DOUBLE_INT,
 * ...) is two blocks laid out as the C struct, possibly with a gap, which
 * is packed away on the wire. Derived types will add table entries built
 * from the same blocks. */
#include <limits.h>
#include <stddef.h>
#include <string.h>
#include <wchar.h>

#include "mpi_internal.h"

#define INDEX_OF(h) CM_HANDLE_INDEX(h)

/* A basic type: one element, its own size, no gaps. File-scope compound
 * literals have static storage, so the block lists live as long as the
 * table. */
#define BASIC(h, ctype)                                                                            \
	[INDEX_OF(h)] = {                                                                          \
	    .handle = (h),                                                                         \
	    .name = #h,                                                                            \
	    .size = sizeof(ctype),                                                                 \
	    .lb = 0,                                                                               \
	    .extent = sizeof(ctype),                                                               \
	    .elements = 1,                                                                         \
	    .contiguous = 1,                                                                       \
	    .nblocks = 1,                                                                          \
	    .blocks = (const struct cm_mpi_block[]){{0, sizeof(ctype), 1}},                        \
	}

/* A value-int pair, as the C struct { vtype v; int i; }. */
#define PAIR(h, stype, vtype)                                                                      \
	[INDEX_OF(h)] = {                                                                          \
	    .handle = (h),                                                                         \
	    .name = #h,                                                                            \
	    .size = sizeof(vtype) + sizeof(int),                                                   \
	    .lb = 0,                                                                               \
	    .extent = sizeof(stype),                                                               \
	    .elements = 2,                                                                         \
	    .contiguous = offsetof(stype, i) == sizeof(vtype) &&                                   \
	                  sizeof(stype) == sizeof(vtype) + sizeof(int),                            \
	    .nblocks = 2,                                                                          \
	    .blocks = (const struct cm_mpi_block[]){{offsetof(stype, v), sizeof(vtype), 1},        \
	                                            {offsetof(stype, i), sizeof(int), 1}},         \
	}

struct pair_float_int {
	float v;
	int i;
};
struct pair_double_int {
	double v;
	int i;
};
struct pair_long_int {
	long v;
	int i;
};
struct pair_2int {
	int v;
	int i;
};
struct pair_short_int {
	short v;
	int i;
};
struct pair_long_double_int {
	long double v;
	int i;
};

#define NUM_PREDEFINED (INDEX_OF(MPI_LONG_DOUBLE_INT) + 1)

static const struct cm_mpi_datatype predefined[NUM_PREDEFINED] = {
    BASIC(MPI_CHAR, char),
    BASIC(MPI_SIGNED_CHAR, signed char),
    BASIC(MPI_UNSIGNED_CHAR, unsigned char),
    BASIC(MPI_BYTE, unsigned char),
    BASIC(MPI_WCHAR, wchar_t),
    BASIC(MPI_SHORT, short),
    BASIC(MPI_UNSIGNED_SHORT, unsigned short),
    BASIC(MPI_INT, int),
    BASIC(MPI_UNSIGNED, unsigned),
    BASIC(MPI_LONG, long),
    BASIC(MPI_UNSIGNED_LONG, unsigned long),
    BASIC(MPI_LONG_LONG_INT, long long),
    BASIC(MPI_UNSIGNED_LONG_LONG, unsigned long long),
    BASIC(MPI_FLOAT, float),
    BASIC(MPI_DOUBLE, double),
    BASIC(MPI_LONG_DOUBLE, long double),
    BASIC(MPI_INT8_T, int8_t),
    BASIC(MPI_INT16_T, int16_t),
    BASIC(MPI_INT32_T, int32_t),
    BASIC(MPI_INT64_T, int64_t),
    BASIC(MPI_UINT8_T, uint8_t),
    BASIC(MPI_UINT16_T, uint16_t),
    BASIC(MPI_UINT32_T, uint32_t),
    BASIC(MPI_UINT64_T, uint64_t),
    BASIC(MPI_C_BOOL, _Bool),
    BASIC(MPI_AINT, MPI_Aint),
    BASIC(MPI_OFFSET, MPI_Offset),
    BASIC(MPI_COUNT, MPI_Count),
    BASIC(MPI_PACKED, unsigned char),
    BASIC(MPI_C_FLOAT_COMPLEX, float _Complex),
    BASIC(MPI_C_DOUBLE_COMPLEX, double _Complex),
    BASIC(MPI_C_LONG_DOUBLE_COMPLEX, long double _Complex),
    PAIR(MPI_FLOAT_INT, struct pair_float_int, float),
    PAIR(MPI_DOUBLE_INT, struct pair_double_int, double),
    PAIR(MPI_LONG_INT, struct pair_long_int, long),
    PAIR(MPI_2INT, struct pair_2int, int),
    PAIR(MPI_SHORT_INT, struct pair_short_int, short),
    PAIR(MPI_LONG_DOUBLE_INT, struct pair_long_double_int, long double),
};

const struct cm_mpi_datatype *cm_mpi_type_get(MPI_Datatype type)
{
	if (CM_HANDLE_KIND(type) != CM_KIND_DATATYPE)
		return NULL;
	unsigned index = CM_HANDLE_INDEX(type);
	if (index >= NUM_PREDEFINED || predefined[index].size == 0)
		return NULL;
	return &predefined[index];
}

void cm_mpi_pack(const struct cm_mpi_datatype *type, const void *src, size_t count, void *dst)
{
	const char *item = (const char *)src + type->lb;
	char *out = dst;
	if (type->contiguous) {
		memcpy(out, item, count * type->size);
		return;
	}
	for (size_t n = 0; n < count; n++, item += type->extent) {
		for (int b = 0; b < type->nblocks; b++) {
			size_t len = type->blocks[b].elem_size * type->blocks[b].nelems;
			memcpy(out, item + type->blocks[b].offset, len);
			out += len;
		}
	}
}

void cm_mpi_unpack(const struct cm_mpi_datatype *type, const void *src, size_t nbytes, void *dst)
{
	const char *in = src;
	char *item = (char *)dst + type->lb;
	if (type->contiguous) {
		memcpy(item, in, nbytes);
		return;
	}
	while (nbytes > 0) {
		for (int b = 0; b < type->nblocks && nbytes > 0; b++) {
			size_t len = type->blocks[b].elem_size * type->blocks[b].nelems;
			if (len > nbytes)
				len = nbytes;
			memcpy(item + type->blocks[b].offset, in, len);
			in += len;
			nbytes -= len;
		}
		item += type->extent;
	}
}

void cm_mpi_status_empty(MPI_Status *st)
{
	if (!st)
		return;
	st->MPI_SOURCE = MPI_ANY_SOURCE;
	st->MPI_TAG = MPI_ANY_TAG;
	st->MPI_ERROR = MPI_SUCCESS;
	st->cm_cancelled = 0;
	st->cm_bytes = 0;
}

void cm_mpi_status_proc_null(MPI_Status *st)
{
	if (!st)
		return;
	st->MPI_SOURCE = MPI_PROC_NULL;
	st->MPI_TAG = MPI_ANY_TAG;
	st->cm_cancelled = 0;
	st->cm_bytes = 0;
}

/* Whole items in the status's byte count, or MPI_UNDEFINED if the bytes
 * are not a whole number of items. */
static MPI_Count count_items(MPI_Count bytes, const struct cm_mpi_datatype *t)
{
	if (bytes % (MPI_Count)t->size != 0)
		return MPI_UNDEFINED;
	return bytes / (MPI_Count)t->size;
}

/* Basic elements in the byte count: whole items, then the whole elements
 * of a partial last item; MPI_UNDEFINED if a basic element is cut. */
static MPI_Count count_elements(MPI_Count bytes, const struct cm_mpi_datatype *t)
{
	MPI_Count n = bytes / (MPI_Count)t->size * (MPI_Count)t->elements;
	size_t rest = (size_t)(bytes % (MPI_Count)t->size);
	for (int b = 0; b < t->nblocks; b++) {
		for (size_t e = 0; e < t->blocks[b].nelems; e++) {
			if (rest == 0)
				return n;
			if (rest < t->blocks[b].elem_size)
				return MPI_UNDEFINED; /* the data ends inside this element */
			rest -= t->blocks[b].elem_size;
			n++;
		}
	}
	return n;
}

static int check_status_args(const MPI_Status *status, MPI_Datatype datatype, const void *count,
                             const struct cm_mpi_datatype **t, const char *func)
{
	*t = cm_mpi_type_get(datatype);
	if (!*t)
		return cm_mpi_raise(NULL, MPI_ERR_TYPE, func);
	if (!status || !count || status->cm_bytes < 0)
		return cm_mpi_raise(NULL, MPI_ERR_ARG, func);
	return MPI_SUCCESS;
}

static int to_int_count(MPI_Count n)
{
	return n > INT_MAX ? MPI_UNDEFINED : (int)n;
}

int MPI_Get_count(const MPI_Status *status, MPI_Datatype datatype, int *count)
{
	const struct cm_mpi_datatype *t;
	CM_MPI_REQUIRE_INIT("MPI_Get_count");
	int rc = check_status_args(status, datatype, count, &t, "MPI_Get_count");
	if (rc)
		return rc;
	*count = to_int_count(count_items(status->cm_bytes, t));
	return MPI_SUCCESS;
}

int MPI_Get_elements(const MPI_Status *status, MPI_Datatype datatype, int *count)
{
	const struct cm_mpi_datatype *t;
	CM_MPI_REQUIRE_INIT("MPI_Get_elements");
	int rc = check_status_args(status, datatype, count, &t, "MPI_Get_elements");
	if (rc)
		return rc;
	*count = to_int_count(count_elements(status->cm_bytes, t));
	return MPI_SUCCESS;
}

int MPI_Get_elements_x(const MPI_Status *status, MPI_Datatype datatype, MPI_Count *count)
{
	const struct cm_mpi_datatype *t;
	CM_MPI_REQUIRE_INIT("MPI_Get_elements_x");
	int rc = check_status_args(status, datatype, count, &t, "MPI_Get_elements_x");
	if (rc)
		return rc;
	*count = count_elements(status->cm_bytes, t);
	return MPI_SUCCESS;
}

int MPI_Type_size(MPI_Datatype datatype, int *size)
{
	CM_MPI_REQUIRE_INIT("MPI_Type_size");
	const struct cm_mpi_datatype *t = cm_mpi_type_get(datatype);
	if (!t)
		return cm_mpi_raise(NULL, MPI_ERR_TYPE, "MPI_Type_size");
	if (!size)
		return cm_mpi_raise(NULL, MPI_ERR_ARG, "MPI_Type_size");
	*size = t->size > INT_MAX ? MPI_UNDEFINED : (int)t->size;
	return MPI_SUCCESS;
}

int MPI_Type_size_x(MPI_Datatype datatype, MPI_Count *size)
{
	CM_MPI_REQUIRE_INIT("MPI_Type_size_x");
	const struct cm_mpi_datatype *t = cm_mpi_type_get(datatype);
	if (!t)
		return cm_mpi_raise(NULL, MPI_ERR_TYPE, "MPI_Type_size_x");
	if (!size)
		return cm_mpi_raise(NULL, MPI_ERR_ARG, "MPI_Type_size_x");
	*size = (MPI_Count)t->size;
	return MPI_SUCCESS;
}

int MPI_Type_get_extent(MPI_Datatype datatype, MPI_Aint *lb, MPI_Aint *extent)
{
	CM_MPI_REQUIRE_INIT("MPI_Type_get_extent");
	const struct cm_mpi_datatype *t = cm_mpi_type_get(datatype);
	if (!t)
		return cm_mpi_raise(NULL, MPI_ERR_TYPE, "MPI_Type_get_extent");
	if (!lb || !extent)
		return cm_mpi_raise(NULL, MPI_ERR_ARG, "MPI_Type_get_extent");
	*lb = t->lb;
	*extent = t->extent;
	return MPI_SUCCESS;
}
