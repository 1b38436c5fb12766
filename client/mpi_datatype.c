/* Datatypes: the predefined ones, the table of derived ones (built by
 * mpi_type_create.c), packing, and the calls that read a type or a status
 * through one.
 *
 * A type is a list of runs (struct cm_mpi_block) in type-map order. A basic
 * type is one run of one element; a pair type (MPI_DOUBLE_INT, ...) is two
 * runs laid out as the C struct, possibly with a gap, which is packed away
 * on the wire. A strided run stands for a whole vector, so a vector of a
 * million doubles costs one run, not a million. */
#include <limits.h>
#include <stdalign.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include "mpi_internal.h"
#include "vec.h"

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
	    .true_lb = 0,                                                                          \
	    .true_extent = sizeof(ctype),                                                          \
	    .elements = 1,                                                                         \
	    .align = alignof(ctype),                                                               \
	    .basic = (h),                                                                          \
	    .contiguous = 1,                                                                       \
	    .committed = 1,                                                                        \
	    .nblocks = 1,                                                                          \
	    .blocks = (const struct cm_mpi_block[]){{0, sizeof(ctype), 1, 1, 0}},                  \
	}

/* A value-int pair, as the C struct { vtype v; int i; }. */
#define PAIR(h, stype, vtype)                                                                      \
	[INDEX_OF(h)] = {                                                                          \
	    .handle = (h),                                                                         \
	    .name = #h,                                                                            \
	    .size = sizeof(vtype) + sizeof(int),                                                   \
	    .lb = 0,                                                                               \
	    .extent = sizeof(stype),                                                               \
	    .true_lb = 0,                                                                          \
	    .true_extent = offsetof(stype, i) + sizeof(int),                                       \
	    .elements = 2,                                                                         \
	    .align = alignof(stype),                                                               \
	    .basic = (h),                                                                          \
	    .contiguous = offsetof(stype, i) == sizeof(vtype) &&                                   \
	                  sizeof(stype) == sizeof(vtype) + sizeof(int),                            \
	    .committed = 1,                                                                        \
	    .nblocks = 2,                                                                          \
	    .blocks = (const struct cm_mpi_block[]){{offsetof(stype, v), sizeof(vtype), 1, 1, 0},  \
	                                            {offsetof(stype, i), sizeof(int), 1, 1, 0}},   \
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

/* Derived types: handle index CM_DERIVED_BASE + slot. A freed slot is
 * reused (its old handle then names the new type, as in other MPIs). */
#define CM_DERIVED_BASE 0x100u

static CM_VEC(struct cm_mpi_datatype *) derived;

const struct cm_mpi_datatype *cm_mpi_type_get(MPI_Datatype type)
{
	if (CM_HANDLE_KIND(type) != CM_KIND_DATATYPE)
		return NULL;
	unsigned index = CM_HANDLE_INDEX(type);
	if (index < NUM_PREDEFINED)
		return predefined[index].size == 0 ? NULL : &predefined[index];
	if (index < CM_DERIVED_BASE || index - CM_DERIVED_BASE >= derived.n)
		return NULL;
	return derived.items[index - CM_DERIVED_BASE];
}

int cm_mpi_type_register(struct cm_mpi_datatype *type)
{
	size_t slot = cm_vec_claim_slot(&derived, 0, CM_HANDLE_INDEX_MAX - CM_DERIVED_BASE);
	if (slot == SIZE_MAX) {
		free((void *)type->blocks);
		cm_mpi_contents_free(type->contents);
		free(type);
		return MPI_ERR_NO_MEM;
	}
	type->handle = (MPI_Datatype)(CM_KIND_DATATYPE | (CM_DERIVED_BASE + slot));
	type->derived = 1;
	type->refs = 1;
	derived.items[slot] = type;
	return MPI_SUCCESS;
}

/* The record of a constructor call (struct cm_mpi_contents). */
struct cm_mpi_contents *cm_mpi_contents_new(int combiner, int nints, int naddrs, int ntypes)
{
	size_t bytes = sizeof(struct cm_mpi_contents) + (size_t)naddrs * sizeof(MPI_Aint) +
	               (size_t)ntypes * sizeof(struct cm_mpi_datatype *) +
	               (size_t)nints * sizeof(int);
	struct cm_mpi_contents *c = calloc(1, bytes);
	if (!c)
		return NULL;
	/* Widest first: every array stays aligned. */
	c->addrs = (MPI_Aint *)(c + 1);
	c->types = (const struct cm_mpi_datatype **)(c->addrs + naddrs);
	c->ints = (int *)(c->types + ntypes);
	c->combiner = combiner;
	c->nints = nints;
	c->naddrs = naddrs;
	c->ntypes = ntypes;
	return c;
}

void cm_mpi_contents_hold(struct cm_mpi_contents *c)
{
	for (int i = 0; i < c->ntypes; i++)
		cm_mpi_type_ref(c->types[i]);
}

void cm_mpi_contents_free(struct cm_mpi_contents *c)
{
	if (!c)
		return;
	for (int i = 0; i < c->ntypes; i++)
		cm_mpi_type_unref(c->types[i]);
	free(c);
}

void cm_mpi_type_ref(const struct cm_mpi_datatype *type)
{
	if (type->derived)
		((struct cm_mpi_datatype *)type)->refs++;
}

void cm_mpi_type_unref(const struct cm_mpi_datatype *type)
{
	if (!type->derived)
		return;
	struct cm_mpi_datatype *t = (struct cm_mpi_datatype *)type;
	if (--t->refs > 0)
		return;
	free((void *)t->blocks);
	cm_mpi_contents_free(t->contents);
	free(t);
}

/* Copies between count items in user memory and a packed stream, in
 * type-map order, stopping after limit packed bytes. to_packed selects
 * the direction. */
static void copy_items(const struct cm_mpi_datatype *t, char *items, char *packed, size_t count,
                       size_t limit, int to_packed)
{
	for (size_t n = 0; n < count && limit > 0; n++) {
		char *origin = cm_mpi_addr(items, (MPI_Aint)n * t->extent);
		for (int b = 0; b < t->nblocks && limit > 0; b++) {
			const struct cm_mpi_block *blk = &t->blocks[b];
			size_t len = blk->elem_size * blk->nelems;
			char *mem = cm_mpi_addr(origin, blk->offset);
			for (size_t r = 0; r < blk->count && limit > 0; r++) {
				size_t n_bytes = len < limit ? len : limit;
				if (to_packed)
					memcpy(packed, mem, n_bytes);
				else
					memcpy(mem, packed, n_bytes);
				packed += n_bytes;
				limit -= n_bytes;
				mem = cm_mpi_addr(mem, blk->stride);
			}
		}
	}
}

void cm_mpi_pack(const struct cm_mpi_datatype *type, const void *src, size_t count, void *dst)
{
	if (type->contiguous) {
		memcpy(dst, cm_mpi_addr(src, type->lb), count * type->size);
		return;
	}
	copy_items(type, (char *)src, dst, count, count * type->size, 1);
}

void cm_mpi_unpack(const struct cm_mpi_datatype *type, const void *src, size_t nbytes, void *dst)
{
	if (nbytes == 0)
		return;
	if (type->contiguous) {
		memcpy(cm_mpi_addr(dst, type->lb), src, nbytes);
		return;
	}
	size_t count = type->size ? (nbytes + type->size - 1) / type->size : 0;
	copy_items(type, dst, (char *)src, count, nbytes, 0);
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
 * are not a whole number of items. A type without data: 0 items. */
static MPI_Count count_items(MPI_Count bytes, const struct cm_mpi_datatype *t)
{
	if (t->size == 0)
		return 0;
	if (bytes % (MPI_Count)t->size != 0)
		return MPI_UNDEFINED;
	return bytes / (MPI_Count)t->size;
}

/* Basic elements in the byte count: whole items, then the whole elements
 * of a partial last item; MPI_UNDEFINED if a basic element is cut. */
static MPI_Count count_elements(MPI_Count bytes, const struct cm_mpi_datatype *t)
{
	if (t->size == 0)
		return 0;
	MPI_Count n = bytes / (MPI_Count)t->size * (MPI_Count)t->elements;
	size_t rest = (size_t)(bytes % (MPI_Count)t->size);
	for (int b = 0; b < t->nblocks && rest > 0; b++) {
		const struct cm_mpi_block *blk = &t->blocks[b];
		size_t len = blk->elem_size * blk->nelems;
		size_t whole = rest / len < blk->count ? rest / len : blk->count;
		n += (MPI_Count)(whole * blk->nelems);
		rest -= whole * len;
		if (whole == blk->count)
			continue;
		/* The data ends inside this repetition. */
		if (rest % blk->elem_size != 0)
			return MPI_UNDEFINED; /* ... inside one of its elements */
		return n + (MPI_Count)(rest / blk->elem_size);
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

int MPI_Type_get_extent_x(MPI_Datatype datatype, MPI_Count *lb, MPI_Count *extent)
{
	CM_MPI_REQUIRE_INIT("MPI_Type_get_extent_x");
	const struct cm_mpi_datatype *t = cm_mpi_type_get(datatype);
	if (!t)
		return cm_mpi_raise(NULL, MPI_ERR_TYPE, "MPI_Type_get_extent_x");
	if (!lb || !extent)
		return cm_mpi_raise(NULL, MPI_ERR_ARG, "MPI_Type_get_extent_x");
	*lb = t->lb;
	*extent = t->extent;
	return MPI_SUCCESS;
}

int MPI_Type_get_true_extent(MPI_Datatype datatype, MPI_Aint *true_lb, MPI_Aint *true_extent)
{
	CM_MPI_REQUIRE_INIT("MPI_Type_get_true_extent");
	const struct cm_mpi_datatype *t = cm_mpi_type_get(datatype);
	if (!t)
		return cm_mpi_raise(NULL, MPI_ERR_TYPE, "MPI_Type_get_true_extent");
	if (!true_lb || !true_extent)
		return cm_mpi_raise(NULL, MPI_ERR_ARG, "MPI_Type_get_true_extent");
	*true_lb = t->true_lb;
	*true_extent = t->true_extent;
	return MPI_SUCCESS;
}

int MPI_Type_get_true_extent_x(MPI_Datatype datatype, MPI_Count *true_lb, MPI_Count *true_extent)
{
	CM_MPI_REQUIRE_INIT("MPI_Type_get_true_extent_x");
	const struct cm_mpi_datatype *t = cm_mpi_type_get(datatype);
	if (!t)
		return cm_mpi_raise(NULL, MPI_ERR_TYPE, "MPI_Type_get_true_extent_x");
	if (!true_lb || !true_extent)
		return cm_mpi_raise(NULL, MPI_ERR_ARG, "MPI_Type_get_true_extent_x");
	*true_lb = t->true_lb;
	*true_extent = t->true_extent;
	return MPI_SUCCESS;
}

/* Committing is bookkeeping only: the run list built by the constructor is
 * already the form packing uses. */
int MPI_Type_commit(MPI_Datatype *datatype)
{
	CM_MPI_REQUIRE_INIT("MPI_Type_commit");
	const struct cm_mpi_datatype *t = datatype ? cm_mpi_type_get(*datatype) : NULL;
	if (!t)
		return cm_mpi_raise(NULL, MPI_ERR_TYPE, "MPI_Type_commit");
	if (t->derived)
		((struct cm_mpi_datatype *)t)->committed = 1;
	return MPI_SUCCESS;
}

void cm_mpi_type_drop_handle(const struct cm_mpi_datatype *t)
{
	derived.items[CM_HANDLE_INDEX(t->handle) - CM_DERIVED_BASE] = NULL;
	cm_mpi_type_unref(t);
}

/* Names a predefined type was given, "" for its own (#h above), and the
 * attributes cached on it: the predefined structs are read-only. */
static char predefined_names[NUM_PREDEFINED][MPI_MAX_OBJECT_NAME];
static struct cm_mpi_attr *predefined_attrs[NUM_PREDEFINED];

struct cm_mpi_attr **cm_mpi_type_attrs(MPI_Datatype datatype)
{
	struct cm_mpi_datatype *t = (struct cm_mpi_datatype *)cm_mpi_type_get(datatype);
	if (!t)
		return NULL;
	return t->derived ? &t->attrs : &predefined_attrs[CM_HANDLE_INDEX(datatype)];
}

int MPI_Type_set_name(MPI_Datatype datatype, const char *type_name)
{
	CM_MPI_REQUIRE_INIT("MPI_Type_set_name");
	struct cm_mpi_datatype *t = (struct cm_mpi_datatype *)cm_mpi_type_get(datatype);
	if (!t)
		return cm_mpi_raise(NULL, MPI_ERR_TYPE, "MPI_Type_set_name");
	if (!type_name)
		return cm_mpi_raise(NULL, MPI_ERR_ARG, "MPI_Type_set_name");
	char *to = t->derived ? t->user_name : predefined_names[CM_HANDLE_INDEX(datatype)];
	/* Longer names are truncated, as the standard allows. */
	snprintf(to, MPI_MAX_OBJECT_NAME, "%s", type_name);
	return MPI_SUCCESS;
}

/* A derived type is unnamed ("") until named; a predefined one is called
 * by its handle's name until renamed. */
int MPI_Type_get_name(MPI_Datatype datatype, char *type_name, int *resultlen)
{
	CM_MPI_REQUIRE_INIT("MPI_Type_get_name");
	const struct cm_mpi_datatype *t = cm_mpi_type_get(datatype);
	if (!t)
		return cm_mpi_raise(NULL, MPI_ERR_TYPE, "MPI_Type_get_name");
	if (!type_name || !resultlen)
		return cm_mpi_raise(NULL, MPI_ERR_ARG, "MPI_Type_get_name");
	const char *name = t->user_name;
	if (!t->derived) {
		name = predefined_names[CM_HANDLE_INDEX(datatype)];
		if (!name[0])
			name = t->name;
	}
	*resultlen = snprintf(type_name, MPI_MAX_OBJECT_NAME, "%s", name);
	return MPI_SUCCESS;
}
