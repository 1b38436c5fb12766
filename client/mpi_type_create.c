/* Derived datatype constructors.
 *
 * Every constructor places copies of existing types at displacements; a
 * type map under construction (struct tmap) accumulates the copies as runs
 * (see struct cm_mpi_block) and the bounds MPI defines:
 *   lb = min over copies of (displacement + old lb),
 *   ub = max over copies of (displacement + old ub),
 * except that bounds set explicitly (MPI_Type_create_resized, subarrays)
 * are sticky: if any copy has one, only those count, as MPI's lb and ub
 * markers do. Without an explicit ub, the extent is rounded up to the
 * strictest alignment of the basic types (MPI's epsilon, what a C compiler
 * does to a struct). The true bounds are taken over the bytes really
 * touched. A copy repeated
 * at a constant stride (a vector, a row of a subarray) becomes one strided
 * run when the old type is a single run, and consecutive runs are merged as
 * they are appended, so common layouts stay a handful of runs whatever
 * their size. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_internal.h"

/* A type map under construction. */
struct tmap {
	struct cm_mpi_block *runs;
	int nruns, cap;
	size_t size, elements, align;
	MPI_Datatype basic; /* CM_BASIC_UNSET until the first element */
	int has_lb, has_ub; /* bounds of the parts without explicit ones */
	MPI_Aint lb, ub;
	int has_xlb, has_xub; /* explicit (sticky) bounds */
	MPI_Aint xlb, xub;
	int has_data;
	MPI_Aint true_lb, true_ub;
	int error; /* first error class met (overflow, out of memory) */
};

/* What is placed: a finished type, or a map built for an inner level. */
struct tview {
	const struct cm_mpi_block *runs;
	int nruns;
	size_t size, elements, align;
	MPI_Datatype basic;
	int has_bounds, sticky_lb, sticky_ub, has_data;
	MPI_Aint lb, ub, true_lb, true_ub;
};

#define CM_BASIC_UNSET ((MPI_Datatype)-1)

static void tmap_init(struct tmap *m)
{
	memset(m, 0, sizeof *m);
	m->align = 1;
	m->basic = CM_BASIC_UNSET;
}

static struct tview view_of_type(const struct cm_mpi_datatype *t)
{
	return (struct tview){
	    .runs = t->blocks,
	    .nruns = t->nblocks,
	    .size = t->size,
	    .elements = t->elements,
	    .align = t->align,
	    .basic = t->basic,
	    .has_bounds = 1,
	    .sticky_lb = t->sticky_lb,
	    .sticky_ub = t->sticky_ub,
	    .has_data = t->size > 0,
	    .lb = t->lb,
	    .ub = t->lb + t->extent,
	    .true_lb = t->true_lb,
	    .true_ub = t->true_lb + t->true_extent,
	};
}

/* An inner level (a block of a vector, a row of a subarray): its bounds
 * unpadded, explicit ones staying explicit. */
static struct tview view_of_map(const struct tmap *m)
{
	return (struct tview){
	    .runs = m->runs,
	    .nruns = m->nruns,
	    .size = m->size,
	    .elements = m->elements,
	    .align = m->align,
	    .basic = m->basic,
	    .has_bounds = (m->has_lb || m->has_xlb) && (m->has_ub || m->has_xub),
	    .sticky_lb = m->has_xlb,
	    .sticky_ub = m->has_xub,
	    .has_data = m->has_data,
	    .lb = m->has_xlb ? m->xlb : m->lb,
	    .ub = m->has_xub ? m->xub : m->ub,
	    .true_lb = m->true_lb,
	    .true_ub = m->true_ub,
	};
}

/* Appends a run, merging it into the last one when the two describe
 * consecutive memory, or a regular stride, of the same element size. */
static void push_run(struct tmap *m, struct cm_mpi_block run)
{
	size_t len = run.elem_size * run.nelems;
	if (run.count > 1 && run.stride == (ptrdiff_t)len) {
		run.nelems *= run.count;
		run.count = 1;
	}
	if (run.count == 1)
		run.stride = 0;
	if (m->nruns > 0) {
		struct cm_mpi_block *last = &m->runs[m->nruns - 1];
		size_t last_len = last->elem_size * last->nelems;
		if (last->elem_size == run.elem_size) {
			if (last->count == 1 && run.count == 1 &&
			    last->offset + (ptrdiff_t)last_len == run.offset) {
				last->nelems += run.nelems;
				return;
			}
			if (last->nelems == run.nelems && last->count == 1 && run.count == 1) {
				last->stride = run.offset - last->offset;
				last->count = 2;
				return;
			}
			if (last->nelems == run.nelems && last->count > 1 &&
			    (run.count == 1 || run.stride == last->stride) &&
			    last->offset + (ptrdiff_t)last->count * last->stride == run.offset) {
				last->count += run.count;
				return;
			}
		}
	}
	if (m->nruns == m->cap) {
		int cap = m->cap ? m->cap * 2 : 8;
		struct cm_mpi_block *grown;
		if (cap > INT_MAX / 2 || !(grown = realloc(m->runs, (size_t)cap * sizeof *grown))) {
			m->error = MPI_ERR_NO_MEM;
			return;
		}
		m->runs = grown;
		m->cap = cap;
	}
	m->runs[m->nruns++] = run;
}

static void lower(int *has, MPI_Aint *bound, MPI_Aint candidate)
{
	if (!*has || candidate < *bound)
		*bound = candidate;
	*has = 1;
}

static void raise_to(int *has, MPI_Aint *bound, MPI_Aint candidate)
{
	if (!*has || candidate > *bound)
		*bound = candidate;
	*has = 1;
}

/* Places count copies of v, the i-th at disp + i * stride bytes. */
static void add_repeated(struct tmap *m, const struct tview *v, MPI_Aint disp, size_t count,
                         MPI_Aint stride)
{
	if (count == 0 || m->error)
		return;
	MPI_Aint span, last;
	size_t bytes, elements;
	if (__builtin_mul_overflow((MPI_Aint)(count - 1), stride, &span) ||
	    __builtin_add_overflow(disp, span, &last) ||
	    __builtin_mul_overflow(count, v->size, &bytes) ||
	    __builtin_add_overflow(m->size, bytes, &m->size) ||
	    __builtin_mul_overflow(count, v->elements, &elements) ||
	    __builtin_add_overflow(m->elements, elements, &m->elements)) {
		m->error = MPI_ERR_ARG;
		return;
	}
	MPI_Aint lo = disp < last ? disp : last, hi = disp < last ? last : disp;
	if (v->has_bounds) {
		if (v->sticky_lb)
			lower(&m->has_xlb, &m->xlb, lo + v->lb);
		else
			lower(&m->has_lb, &m->lb, lo + v->lb);
		if (v->sticky_ub)
			raise_to(&m->has_xub, &m->xub, hi + v->ub);
		else
			raise_to(&m->has_ub, &m->ub, hi + v->ub);
	}
	if (v->has_data) {
		int had = m->has_data;
		lower(&had, &m->true_lb, lo + v->true_lb);
		raise_to(&m->has_data, &m->true_ub, hi + v->true_ub);
		if (m->basic == CM_BASIC_UNSET)
			m->basic = v->basic;
		else if (m->basic != v->basic)
			m->basic = MPI_DATATYPE_NULL;
	}
	if (v->align > m->align)
		m->align = v->align;

	if (v->nruns == 1) {
		struct cm_mpi_block r = v->runs[0];
		if (r.count == 1 || r.stride * (MPI_Aint)r.count == stride) {
			push_run(m, (struct cm_mpi_block){r.offset + disp, r.elem_size, r.nelems,
			                                  r.count * count,
			                                  r.count == 1 ? stride : r.stride});
			return;
		}
	}
	for (size_t i = 0; i < count && !m->error; i++)
		for (int k = 0; k < v->nruns && !m->error; k++) {
			struct cm_mpi_block r = v->runs[k];
			r.offset += disp + (MPI_Aint)i * stride;
			push_run(m, r);
		}
}

/* Turns the map into a registered type that keeps rec, the record of the
 * constructor call (NULL: it could not be allocated); *out gets its
 * handle. */
static int finish(struct tmap *m, struct cm_mpi_contents *rec, MPI_Datatype *out)
{
	struct cm_mpi_datatype *t = NULL;
	if (!m->error && (!rec || !(t = calloc(1, sizeof *t))))
		m->error = MPI_ERR_NO_MEM;
	if (m->error) {
		free(m->runs);
		free(rec); /* its types are not referenced yet */
		return m->error;
	}
	cm_mpi_contents_hold(rec);
	t->contents = rec;
	t->name = "derived datatype";
	t->size = m->size;
	MPI_Aint lb = m->has_xlb ? m->xlb : m->has_lb ? m->lb : 0;
	MPI_Aint ub = m->has_xub ? m->xub : m->has_ub ? m->ub : lb;
	if (!m->has_xub && m->has_ub && m->align > 1 && ub > lb) {
		MPI_Aint rem = (ub - lb) % (MPI_Aint)m->align;
		if (rem)
			ub += (MPI_Aint)m->align - rem;
	}
	t->lb = lb;
	t->extent = ub - lb;
	t->sticky_lb = m->has_xlb;
	t->sticky_ub = m->has_xub;
	t->true_lb = m->has_data ? m->true_lb : 0;
	t->true_extent = m->has_data ? m->true_ub - m->true_lb : 0;
	t->elements = m->elements;
	t->align = m->align;
	t->basic = m->basic == CM_BASIC_UNSET ? MPI_DATATYPE_NULL : m->basic;
	t->nblocks = m->nruns;
	t->blocks = m->runs;
	t->contiguous = (m->nruns == 0 && m->size == 0) ||
	                (m->nruns == 1 && m->runs[0].count == 1 && m->runs[0].offset == t->lb &&
	                 (MPI_Aint)m->size == t->extent);
	int rc = cm_mpi_type_register(t);
	if (rc == MPI_SUCCESS)
		*out = t->handle;
	return rc;
}

/* ---- argument checks (they return an error class) ---- */

static int check_old(MPI_Datatype old, const struct cm_mpi_datatype **t)
{
	*t = cm_mpi_type_get(old);
	return *t ? MPI_SUCCESS : MPI_ERR_TYPE;
}

static int check_count(int count, const void *array1, const void *array2, MPI_Datatype *newtype)
{
	if (count < 0)
		return MPI_ERR_COUNT;
	if (!newtype || (count > 0 && (!array1 || !array2)))
		return MPI_ERR_ARG;
	return MPI_SUCCESS;
}

static int raise_or(int rc, const char *func)
{
	return rc ? cm_mpi_raise(NULL, rc, func) : MPI_SUCCESS;
}

/* ---- the constructors ---- */

int MPI_Type_contiguous(int count, MPI_Datatype oldtype, MPI_Datatype *newtype)
{
	const struct cm_mpi_datatype *old;
	CM_MPI_REQUIRE_INIT("MPI_Type_contiguous");
	int rc = check_count(count, "", "", newtype);
	if (!rc)
		rc = check_old(oldtype, &old);
	if (rc)
		return raise_or(rc, "MPI_Type_contiguous");
	struct tmap m;
	tmap_init(&m);
	struct tview v = view_of_type(old);
	add_repeated(&m, &v, 0, (size_t)count, old->extent);
	struct cm_mpi_contents *rec = cm_mpi_contents_new(MPI_COMBINER_CONTIGUOUS, 1, 0, 1);
	if (rec) {
		rec->ints[0] = count;
		rec->types[0] = old;
	}
	return raise_or(finish(&m, rec, newtype), "MPI_Type_contiguous");
}

/* count blocks of blocklength items, block i at i * stride bytes;
 * int_stride: the stride in items as MPI_Type_vector got it, NULL for
 * the hvector forms. */
static int make_vector(int count, int blocklength, MPI_Aint stride_bytes, const int *int_stride,
                       MPI_Datatype oldtype, MPI_Datatype *newtype)
{
	const struct cm_mpi_datatype *old;
	int rc = check_count(count, "", "", newtype);
	if (!rc && blocklength < 0)
		rc = MPI_ERR_ARG;
	if (!rc)
		rc = check_old(oldtype, &old);
	if (rc)
		return rc;
	struct tmap block, m;
	tmap_init(&block);
	tmap_init(&m);
	struct tview v = view_of_type(old);
	add_repeated(&block, &v, 0, (size_t)blocklength, old->extent);
	struct tview bv = view_of_map(&block);
	add_repeated(&m, &bv, 0, (size_t)count, stride_bytes);
	if (block.error && !m.error)
		m.error = block.error;
	free(block.runs);
	struct cm_mpi_contents *rec = int_stride
	                                  ? cm_mpi_contents_new(MPI_COMBINER_VECTOR, 3, 0, 1)
	                                  : cm_mpi_contents_new(MPI_COMBINER_HVECTOR, 2, 1, 1);
	if (rec) {
		rec->ints[0] = count;
		rec->ints[1] = blocklength;
		if (int_stride)
			rec->ints[2] = *int_stride;
		else
			rec->addrs[0] = stride_bytes;
		rec->types[0] = old;
	}
	return finish(&m, rec, newtype);
}

int MPI_Type_vector(int count, int blocklength, int stride, MPI_Datatype oldtype,
                    MPI_Datatype *newtype)
{
	CM_MPI_REQUIRE_INIT("MPI_Type_vector");
	const struct cm_mpi_datatype *old = cm_mpi_type_get(oldtype);
	MPI_Aint stride_bytes = old ? (MPI_Aint)stride * old->extent : 0;
	return raise_or(make_vector(count, blocklength, stride_bytes, &stride, oldtype, newtype),
	                "MPI_Type_vector");
}

int MPI_Type_create_hvector(int count, int blocklength, MPI_Aint stride, MPI_Datatype oldtype,
                            MPI_Datatype *newtype)
{
	CM_MPI_REQUIRE_INIT("MPI_Type_create_hvector");
	return raise_or(make_vector(count, blocklength, stride, NULL, oldtype, newtype),
	                "MPI_Type_create_hvector");
}

int MPI_Type_hvector(int count, int blocklength, MPI_Aint stride, MPI_Datatype oldtype,
                     MPI_Datatype *newtype)
{
	CM_MPI_REQUIRE_INIT("MPI_Type_hvector");
	return raise_or(make_vector(count, blocklength, stride, NULL, oldtype, newtype),
	                "MPI_Type_hvector");
}

/* The record of an indexed-family call: its combiner follows from which
 * of lengths (NULL: one common length) and int or byte displacements it
 * got. */
static struct cm_mpi_contents *record_indexed(int count, int common_length, const int lengths[],
                                              const int int_displs[], const MPI_Aint aint_displs[],
                                              const struct cm_mpi_datatype *old)
{
	static const int combiners[2][2] = {
	    /* [lengths given][int displacements] */
	    {MPI_COMBINER_HINDEXED_BLOCK, MPI_COMBINER_INDEXED_BLOCK},
	    {MPI_COMBINER_HINDEXED, MPI_COMBINER_INDEXED},
	};
	int nlengths = lengths ? count : 1;
	struct cm_mpi_contents *rec =
	    cm_mpi_contents_new(combiners[lengths != NULL][int_displs != NULL],
	                        1 + nlengths + (int_displs ? count : 0), int_displs ? 0 : count, 1);
	if (!rec)
		return NULL;
	rec->ints[0] = count;
	if (lengths && count > 0)
		memcpy(rec->ints + 1, lengths, (size_t)count * sizeof *lengths);
	else if (!lengths)
		rec->ints[1] = common_length;
	if (int_displs && count > 0)
		memcpy(rec->ints + 1 + nlengths, int_displs, (size_t)count * sizeof *int_displs);
	else if (count > 0)
		memcpy(rec->addrs, aint_displs, (size_t)count * sizeof *aint_displs);
	rec->types[0] = old;
	return rec;
}

/* Block i: lengths[i] (or the common length if lengths is NULL) items of
 * old at displacement int_displs[i] * extent or aint_displs[i] bytes. */
static int make_indexed(int count, int common_length, const int lengths[], const int int_displs[],
                        const MPI_Aint aint_displs[], MPI_Datatype oldtype, MPI_Datatype *newtype)
{
	const struct cm_mpi_datatype *old;
	const void *displs = int_displs ? (const void *)int_displs : (const void *)aint_displs;
	int rc = check_count(count, lengths ? (const void *)lengths : "", displs, newtype);
	if (!rc && !lengths && common_length < 0)
		rc = MPI_ERR_ARG;
	if (!rc && count > (INT_MAX - 2) / 2)
		rc = MPI_ERR_COUNT; /* its record's integers would not fit an int count */
	for (int i = 0; !rc && lengths && i < count; i++)
		if (lengths[i] < 0)
			rc = MPI_ERR_ARG;
	if (!rc)
		rc = check_old(oldtype, &old);
	if (rc)
		return rc;
	struct tmap m;
	tmap_init(&m);
	struct tview v = view_of_type(old);
	for (int i = 0; i < count; i++) {
		MPI_Aint disp = int_displs ? (MPI_Aint)int_displs[i] * old->extent : aint_displs[i];
		add_repeated(&m, &v, disp, (size_t)(lengths ? lengths[i] : common_length),
		             old->extent);
	}
	return finish(&m,
	              record_indexed(count, common_length, lengths, int_displs, aint_displs, old),
	              newtype);
}

int MPI_Type_indexed(int count, const int array_of_blocklengths[],
                     const int array_of_displacements[], MPI_Datatype oldtype,
                     MPI_Datatype *newtype)
{
	CM_MPI_REQUIRE_INIT("MPI_Type_indexed");
	return raise_or(make_indexed(count, 0, array_of_blocklengths, array_of_displacements, NULL,
	                             oldtype, newtype),
	                "MPI_Type_indexed");
}

int MPI_Type_create_hindexed(int count, const int array_of_blocklengths[],
                             const MPI_Aint array_of_displacements[], MPI_Datatype oldtype,
                             MPI_Datatype *newtype)
{
	CM_MPI_REQUIRE_INIT("MPI_Type_create_hindexed");
	return raise_or(make_indexed(count, 0, array_of_blocklengths, NULL, array_of_displacements,
	                             oldtype, newtype),
	                "MPI_Type_create_hindexed");
}

int MPI_Type_hindexed(int count, const int array_of_blocklengths[],
                      const MPI_Aint array_of_displacements[], MPI_Datatype oldtype,
                      MPI_Datatype *newtype)
{
	CM_MPI_REQUIRE_INIT("MPI_Type_hindexed");
	return raise_or(make_indexed(count, 0, array_of_blocklengths, NULL, array_of_displacements,
	                             oldtype, newtype),
	                "MPI_Type_hindexed");
}

int MPI_Type_create_indexed_block(int count, int blocklength, const int array_of_displacements[],
                                  MPI_Datatype oldtype, MPI_Datatype *newtype)
{
	CM_MPI_REQUIRE_INIT("MPI_Type_create_indexed_block");
	return raise_or(
	    make_indexed(count, blocklength, NULL, array_of_displacements, NULL, oldtype, newtype),
	    "MPI_Type_create_indexed_block");
}

int MPI_Type_create_hindexed_block(int count, int blocklength,
                                   const MPI_Aint array_of_displacements[], MPI_Datatype oldtype,
                                   MPI_Datatype *newtype)
{
	CM_MPI_REQUIRE_INIT("MPI_Type_create_hindexed_block");
	return raise_or(
	    make_indexed(count, blocklength, NULL, NULL, array_of_displacements, oldtype, newtype),
	    "MPI_Type_create_hindexed_block");
}

static int make_struct(int count, const int lengths[], const MPI_Aint displs[],
                       const MPI_Datatype types[], MPI_Datatype *newtype)
{
	int rc = check_count(count, lengths, displs, newtype);
	if (!rc && count > 0 && !types)
		rc = MPI_ERR_ARG;
	if (!rc && count > INT_MAX - 1)
		rc = MPI_ERR_COUNT; /* its record's integers would not fit an int count */
	for (int i = 0; !rc && i < count; i++) {
		const struct cm_mpi_datatype *t;
		if (lengths[i] < 0)
			rc = MPI_ERR_ARG;
		else
			rc = check_old(types[i], &t);
	}
	if (rc)
		return rc;
	struct tmap m;
	tmap_init(&m);
	for (int i = 0; i < count; i++) {
		const struct cm_mpi_datatype *t = cm_mpi_type_get(types[i]);
		struct tview v = view_of_type(t);
		add_repeated(&m, &v, displs[i], (size_t)lengths[i], t->extent);
	}
	struct cm_mpi_contents *rec =
	    cm_mpi_contents_new(MPI_COMBINER_STRUCT, 1 + count, count, count);
	if (rec) {
		rec->ints[0] = count;
		for (int i = 0; i < count; i++) {
			rec->ints[1 + i] = lengths[i];
			rec->addrs[i] = displs[i];
			rec->types[i] = cm_mpi_type_get(types[i]);
		}
	}
	return finish(&m, rec, newtype);
}

int MPI_Type_create_struct(int count, const int array_of_blocklengths[],
                           const MPI_Aint array_of_displacements[],
                           const MPI_Datatype array_of_types[], MPI_Datatype *newtype)
{
	CM_MPI_REQUIRE_INIT("MPI_Type_create_struct");
	return raise_or(make_struct(count, array_of_blocklengths, array_of_displacements,
	                            array_of_types, newtype),
	                "MPI_Type_create_struct");
}

int MPI_Type_struct(int count, const int array_of_blocklengths[],
                    const MPI_Aint array_of_displacements[], const MPI_Datatype array_of_types[],
                    MPI_Datatype *newtype)
{
	CM_MPI_REQUIRE_INIT("MPI_Type_struct");
	return raise_or(make_struct(count, array_of_blocklengths, array_of_displacements,
	                            array_of_types, newtype),
	                "MPI_Type_struct");
}

/* A copy of old's map with new bounds (resized) or the same ones (dup). */
static int copy_type(const struct cm_mpi_datatype *old, int set_bounds, MPI_Aint lb,
                     MPI_Aint extent, MPI_Datatype *newtype)
{
	struct tmap m;
	tmap_init(&m);
	struct tview v = view_of_type(old);
	add_repeated(&m, &v, 0, 1, 0);
	if (set_bounds) {
		m.has_xlb = m.has_xub = 1;
		m.xlb = lb;
		m.xub = lb + extent;
	}
	struct cm_mpi_contents *rec = set_bounds
	                                  ? cm_mpi_contents_new(MPI_COMBINER_RESIZED, 0, 2, 1)
	                                  : cm_mpi_contents_new(MPI_COMBINER_DUP, 0, 0, 1);
	if (rec) {
		if (set_bounds) {
			rec->addrs[0] = lb;
			rec->addrs[1] = extent;
		}
		rec->types[0] = old;
	}
	return finish(&m, rec, newtype);
}

int MPI_Type_create_resized(MPI_Datatype oldtype, MPI_Aint lb, MPI_Aint extent,
                            MPI_Datatype *newtype)
{
	const struct cm_mpi_datatype *old;
	CM_MPI_REQUIRE_INIT("MPI_Type_create_resized");
	int rc = check_old(oldtype, &old);
	if (!rc && !newtype)
		rc = MPI_ERR_ARG;
	if (!rc)
		rc = copy_type(old, 1, lb, extent, newtype);
	return raise_or(rc, "MPI_Type_create_resized");
}

/* A duplicate: the same layout, committed if the old one is, with the old
 * type's attributes copied through their copy callbacks. */
int MPI_Type_dup(MPI_Datatype oldtype, MPI_Datatype *newtype)
{
	const struct cm_mpi_datatype *old;
	CM_MPI_REQUIRE_INIT("MPI_Type_dup");
	int rc = check_old(oldtype, &old);
	if (!rc && !newtype)
		rc = MPI_ERR_ARG;
	if (!rc)
		rc = copy_type(old, 0, 0, 0, newtype);
	if (rc)
		return raise_or(rc, "MPI_Type_dup");
	struct cm_mpi_datatype *t = (struct cm_mpi_datatype *)cm_mpi_type_get(*newtype);
	t->committed = old->committed;
	rc = cm_mpi_attr_copy_all(*cm_mpi_type_attrs(oldtype), oldtype, &t->attrs);
	if (rc) {
		/* What a refusing delete callback leaves goes without it. */
		cm_mpi_attr_delete_all(&t->attrs, t->handle);
		cm_mpi_attr_discard_all(&t->attrs);
		cm_mpi_type_drop_handle(t);
		*newtype = MPI_DATATYPE_NULL;
	}
	return raise_or(rc, "MPI_Type_dup");
}

/* The handle dies now, after the delete callbacks of its attributes; the
 * type itself once no operation in flight uses it (MPI allows freeing a
 * type a pending receive still unpacks into). */
int MPI_Type_free(MPI_Datatype *datatype)
{
	CM_MPI_REQUIRE_INIT("MPI_Type_free");
	struct cm_mpi_datatype *t =
	    (struct cm_mpi_datatype *)(datatype ? cm_mpi_type_get(*datatype) : NULL);
	if (!t || !t->derived)
		return cm_mpi_raise(NULL, MPI_ERR_TYPE, "MPI_Type_free");
	int rc = cm_mpi_attr_delete_all(&t->attrs, t->handle);
	if (rc)
		return cm_mpi_raise(NULL, rc, "MPI_Type_free");
	cm_mpi_type_drop_handle(t);
	*datatype = MPI_DATATYPE_NULL;
	return MPI_SUCCESS;
}

/* The indexes of one dimension an array type takes: runs of len indexes
 * starting at first, then every period indexes (0: one run), each cut at
 * the dimension's size. */
struct dim_part {
	int first, len, period;
};

/* An ndims-dimensional array of sizes[] items of old, of which the parts
 * are taken: built from the fastest-varying dimension outwards, each level
 * the runs of the one inside; the result spans the whole array (lb 0,
 * extent = product of sizes * old extent). */
static int make_array(int ndims, const int sizes[], const struct dim_part parts[], int order,
                      const struct cm_mpi_datatype *old, struct cm_mpi_contents *rec,
                      MPI_Datatype *newtype)
{
	struct tmap inner, outer;
	tmap_init(&inner);
	struct tview v = view_of_type(old);
	MPI_Aint stride = old->extent; /* bytes between consecutive indexes of dimension d */
	for (int k = 0; k < ndims; k++) {
		int d = order == MPI_ORDER_C ? ndims - 1 - k : k;
		const struct dim_part *p = &parts[d];
		tmap_init(&outer);
		for (long long first = p->first; first < sizes[d] && p->len > 0;
		     first += p->period ? p->period : sizes[d]) {
			long long len = sizes[d] - first < p->len ? sizes[d] - first : p->len;
			add_repeated(&outer, &v, (MPI_Aint)first * stride, (size_t)len, stride);
		}
		if (inner.error && !outer.error)
			outer.error = inner.error;
		free(inner.runs);
		inner = outer;
		v = view_of_map(&inner);
		if (__builtin_mul_overflow(stride, (MPI_Aint)sizes[d], &stride) && !inner.error)
			inner.error = MPI_ERR_ARG;
	}
	inner.has_xlb = inner.has_xub = 1;
	inner.xlb = 0;
	inner.xub = stride;
	return finish(&inner, rec, newtype);
}

int MPI_Type_create_subarray(int ndims, const int array_of_sizes[], const int array_of_subsizes[],
                             const int array_of_starts[], int order, MPI_Datatype oldtype,
                             MPI_Datatype *newtype)
{
	const struct cm_mpi_datatype *old;
	CM_MPI_REQUIRE_INIT("MPI_Type_create_subarray");
	int rc = check_old(oldtype, &old);
	if (!rc &&
	    (ndims <= 0 || ndims > (INT_MAX - 2) / 3 || !array_of_sizes || !array_of_subsizes ||
	     !array_of_starts || !newtype || (order != MPI_ORDER_C && order != MPI_ORDER_FORTRAN)))
		rc = MPI_ERR_ARG;
	for (int d = 0; !rc && d < ndims; d++)
		if (array_of_sizes[d] <= 0 || array_of_subsizes[d] <= 0 ||
		    array_of_subsizes[d] > array_of_sizes[d] || array_of_starts[d] < 0 ||
		    array_of_starts[d] > array_of_sizes[d] - array_of_subsizes[d])
			rc = MPI_ERR_ARG;
	struct dim_part *parts = rc ? NULL : malloc((size_t)ndims * sizeof *parts);
	if (!rc && !parts)
		rc = MPI_ERR_NO_MEM;
	if (rc)
		return raise_or(rc, "MPI_Type_create_subarray");
	for (int d = 0; d < ndims; d++)
		parts[d] = (struct dim_part){array_of_starts[d], array_of_subsizes[d], 0};
	struct cm_mpi_contents *rec =
	    cm_mpi_contents_new(MPI_COMBINER_SUBARRAY, 3 * ndims + 2, 0, 1);
	if (rec) {
		size_t n = (size_t)ndims * sizeof(int);
		rec->ints[0] = ndims;
		memcpy(rec->ints + 1, array_of_sizes, n);
		memcpy(rec->ints + 1 + ndims, array_of_subsizes, n);
		memcpy(rec->ints + 1 + 2 * ndims, array_of_starts, n);
		rec->ints[1 + 3 * ndims] = order;
		rec->types[0] = old;
	}
	rc = make_array(ndims, array_of_sizes, parts, order, old, rec, newtype);
	free(parts);
	return raise_or(rc, "MPI_Type_create_subarray");
}

/* The part of dimension d process coordinate `coord` of psize holds: a
 * block of darg (default: the size split evenly, rounded up) indexes, or
 * blocks of darg (default 1) dealt round-robin, or all of it. */
static int darray_part(int gsize, int distrib, int darg, int psize, int coord,
                       struct dim_part *part)
{
	switch (distrib) {
	case MPI_DISTRIBUTE_BLOCK: {
		int b = darg == MPI_DISTRIBUTE_DFLT_DARG ? (gsize + psize - 1) / psize : darg;
		if (b <= 0 || (long long)b * psize < gsize)
			return MPI_ERR_ARG; /* the blocks must cover the dimension */
		*part = (struct dim_part){(int)((long long)coord * b < gsize ? coord * b : gsize),
		                          b, 0};
		return MPI_SUCCESS;
	}
	case MPI_DISTRIBUTE_CYCLIC: {
		int k = darg == MPI_DISTRIBUTE_DFLT_DARG ? 1 : darg;
		if (k <= 0 || (long long)k * psize > INT_MAX)
			return MPI_ERR_ARG;
		long long first = (long long)coord * k;
		*part = (struct dim_part){(int)(first < gsize ? first : gsize), k, k * psize};
		return MPI_SUCCESS;
	}
	case MPI_DISTRIBUTE_NONE:
		if (psize != 1)
			return MPI_ERR_ARG; /* an undistributed dimension has one process */
		*part = (struct dim_part){0, gsize, 0};
		return MPI_SUCCESS;
	default:
		return MPI_ERR_ARG;
	}
}

/* The process grid is in row-major order whatever the array order, as
 * the standard says: rank -> coordinates, the last dimension fastest. */
int MPI_Type_create_darray(int size, int rank, int ndims, const int array_of_gsizes[],
                           const int array_of_distribs[], const int array_of_dargs[],
                           const int array_of_psizes[], int order, MPI_Datatype oldtype,
                           MPI_Datatype *newtype)
{
	const struct cm_mpi_datatype *old;
	CM_MPI_REQUIRE_INIT("MPI_Type_create_darray");
	int rc = check_old(oldtype, &old);
	if (!rc &&
	    (size <= 0 || rank < 0 || rank >= size || ndims <= 0 || ndims > (INT_MAX - 4) / 4 ||
	     !array_of_gsizes || !array_of_distribs || !array_of_dargs || !array_of_psizes ||
	     !newtype || (order != MPI_ORDER_C && order != MPI_ORDER_FORTRAN)))
		rc = MPI_ERR_ARG;
	long long procs = 1;
	for (int d = 0; !rc && d < ndims; d++) {
		if (array_of_gsizes[d] <= 0 || array_of_psizes[d] <= 0)
			rc = MPI_ERR_ARG;
		else if ((procs *= array_of_psizes[d]) > size)
			rc = MPI_ERR_ARG;
	}
	if (!rc && procs != size)
		rc = MPI_ERR_ARG; /* the grid must hold exactly size processes */
	struct dim_part *parts = rc ? NULL : malloc((size_t)ndims * sizeof *parts);
	if (!rc && !parts)
		rc = MPI_ERR_NO_MEM;
	for (int d = ndims - 1, rest = rank; !rc && d >= 0; d--) {
		rc = darray_part(array_of_gsizes[d], array_of_distribs[d], array_of_dargs[d],
		                 array_of_psizes[d], rest % array_of_psizes[d], &parts[d]);
		rest /= array_of_psizes[d];
	}
	if (rc) {
		free(parts);
		return raise_or(rc, "MPI_Type_create_darray");
	}
	struct cm_mpi_contents *rec = cm_mpi_contents_new(MPI_COMBINER_DARRAY, 4 * ndims + 4, 0, 1);
	if (rec) {
		size_t n = (size_t)ndims * sizeof(int);
		rec->ints[0] = size;
		rec->ints[1] = rank;
		rec->ints[2] = ndims;
		memcpy(rec->ints + 3, array_of_gsizes, n);
		memcpy(rec->ints + 3 + ndims, array_of_distribs, n);
		memcpy(rec->ints + 3 + 2 * ndims, array_of_dargs, n);
		memcpy(rec->ints + 3 + 3 * ndims, array_of_psizes, n);
		rec->ints[3 + 4 * ndims] = order;
		rec->types[0] = old;
	}
	rc = make_array(ndims, array_of_gsizes, parts, order, old, rec, newtype);
	free(parts);
	return raise_or(rc, "MPI_Type_create_darray");
}

int MPI_Get_address(const void *location, MPI_Aint *address)
{
	CM_MPI_REQUIRE_INIT("MPI_Get_address");
	if (!address)
		return cm_mpi_raise(NULL, MPI_ERR_ARG, "MPI_Get_address");
	*address = (MPI_Aint)(uintptr_t)location;
	return MPI_SUCCESS;
}

MPI_Aint MPI_Aint_add(MPI_Aint base, MPI_Aint disp)
{
	return (MPI_Aint)((uintptr_t)base + (uintptr_t)disp);
}

MPI_Aint MPI_Aint_diff(MPI_Aint addr1, MPI_Aint addr2)
{
	return (MPI_Aint)((uintptr_t)addr1 - (uintptr_t)addr2);
}
