/* MPI_Pack_external, MPI_Unpack_external, MPI_Pack_external_size: the
 * portable "external32" representation (MPI-3.1, 13.5.2), the one every
 * MPI reads alike: each basic element big-endian at its standard size
 * (MPI-3.1 table 13.2: LONG and UNSIGNED_LONG 4 bytes, WCHAR 4, AINT,
 * OFFSET and COUNT 8), IEEE floats, long double as IEEE binary128, complex
 * numbers as their two parts, no gaps. A long that does not fit in 4 bytes
 * has no external32 form: packing it is MPI_ERR_ARG, not a silent cut.
 *
 * The packed runs (struct cm_mpi_block) know an element's size but not its
 * kind (a 16-byte element may be a double complex or a long double), so the
 * type map is walked through the constructor records (struct
 * cm_mpi_contents). Data goes through the native packed form in bounded
 * batches, converted element by element. */
#include <float.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_internal.h"

/* ---- one predefined element and its external form ---- */

/* PART_SIGNED, PART_UNSIGNED: an integer whose external size is smaller
 * than its native one (a long of 8 bytes, 4 in external32). PART_BOOL: a
 * C _Bool, any nonzero byte true (only 0 and 1 are _Bool values). */
enum part_kind { PART_PLAIN, PART_LONG_DOUBLE, PART_SIGNED, PART_UNSIGNED, PART_BOOL };

/* A predefined element is one or two parts (complex numbers, value-int
 * pairs), each converted on its own. */
struct ext_layout {
	int nparts;
	struct {
		enum part_kind kind;
		size_t native, external;
	} part[2];
};

static const struct {
	MPI_Datatype type;
	size_t external;
} standard_size[] = {
    {MPI_LONG, 4}, {MPI_UNSIGNED_LONG, 4}, {MPI_WCHAR, 4}, {MPI_C_BOOL, 1},
    {MPI_AINT, 8}, {MPI_OFFSET, 8},        {MPI_COUNT, 8},
};

/* Whether this host's long double converts to binary128: the x87 80-bit
 * format (the same exponent, an explicit integer bit) or binary128 itself. */
static int long_double_supported(void)
{
	return (LDBL_MANT_DIG == 64 && LDBL_MAX_EXP == 16384) ||
	       (LDBL_MANT_DIG == 113 && sizeof(long double) == 16);
}

static struct ext_layout part_of(enum part_kind kind, size_t native)
{
	return (struct ext_layout){
	    .nparts = 1, .part = {{kind, native, kind == PART_LONG_DOUBLE ? 16 : native}}};
}

/* A long (alone or in MPI_LONG_INT): 4 external bytes, narrowed from a
 * wider native one. */
static struct ext_layout long_part(enum part_kind kind, size_t native)
{
	struct ext_layout l = part_of(native > 4 ? kind : PART_PLAIN, native);
	l.part[0].external = 4;
	if (native < 4 || native > 8) /* narrow_out and widen_in take up to 8 */
		l.nparts = 0;
	return l;
}

/* The external layout of a predefined type; nparts 0: no external32 form
 * on this host (a size the standard fixes that this host's C type lacks). */
static struct ext_layout layout_of(const struct cm_mpi_datatype *b)
{
	MPI_Datatype h = b->handle;
	int ld = h == MPI_LONG_DOUBLE || h == MPI_C_LONG_DOUBLE_COMPLEX || h == MPI_LONG_DOUBLE_INT;
	if (ld && !long_double_supported())
		return (struct ext_layout){.nparts = 0};
	enum part_kind value_kind = ld ? PART_LONG_DOUBLE : PART_PLAIN;
	if (h == MPI_C_FLOAT_COMPLEX || h == MPI_C_DOUBLE_COMPLEX ||
	    h == MPI_C_LONG_DOUBLE_COMPLEX) {
		struct ext_layout l = part_of(value_kind, b->size / 2);
		l.part[1] = l.part[0];
		l.nparts = 2;
		return l;
	}
	if (b->nblocks == 2) { /* a pair: the value, then an int */
		size_t value = b->blocks[0].elem_size;
		struct ext_layout l =
		    h == MPI_LONG_INT ? long_part(PART_SIGNED, value) : part_of(value_kind, value);
		if (l.nparts == 0)
			return l;
		l.part[1] = part_of(PART_PLAIN, b->blocks[1].elem_size).part[0];
		l.nparts = 2;
		return l;
	}
	if (h == MPI_C_BOOL && b->size == 1)
		return part_of(PART_BOOL, 1);
	if (h == MPI_LONG || h == MPI_UNSIGNED_LONG)
		return long_part(h == MPI_LONG ? PART_SIGNED : PART_UNSIGNED, b->size);
	struct ext_layout l = part_of(value_kind, b->size);
	for (size_t i = 0; i < sizeof standard_size / sizeof standard_size[0]; i++)
		if (standard_size[i].type == h && standard_size[i].external != b->size)
			l.nparts = 0;
	return l;
}

static size_t layout_external(const struct ext_layout *l)
{
	size_t n = 0;
	for (int i = 0; i < l->nparts; i++)
		n += l->part[i].external;
	return n;
}

static int host_is_little_endian(void)
{
	const uint16_t one = 1;
	return *(const unsigned char *)&one == 1;
}

/* n bytes between host and big-endian order (its own inverse). */
static void swap_copy(unsigned char *dst, const unsigned char *src, size_t n)
{
	if (!host_is_little_endian()) {
		memcpy(dst, src, n);
		return;
	}
	for (size_t i = 0; i < n; i++)
		dst[i] = src[n - 1 - i];
}

static uint64_t load_le64(const unsigned char *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static void store_be64(unsigned char *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (unsigned char)v;
}

static uint64_t load_be64(const unsigned char *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

/* A native long double -> 16 big-endian bytes of binary128. The x87 form
 * has the same sign and biased exponent; its 63 fraction bits (after the
 * explicit integer bit) are the top of binary128's 112. */
static void long_double_out(unsigned char *dst, const unsigned char *src)
{
	if (LDBL_MANT_DIG == 113) {
		swap_copy(dst, src, 16);
		return;
	}
	uint64_t mant = load_le64(src);
	uint64_t sign_exp = (uint64_t)src[8] | (uint64_t)src[9] << 8;
	uint64_t frac = mant & 0x7fffffffffffffffULL;
	store_be64(dst, sign_exp << 48 | frac >> 15);
	store_be64(dst + 8, (frac & 0x7fff) << 49);
}

/* 16 big-endian bytes of binary128 -> a native long double: the fraction
 * cut to the x87's 63 bits, the integer bit set unless the exponent is 0. */
static void long_double_in(unsigned char *dst, const unsigned char *src)
{
	if (LDBL_MANT_DIG == 113) {
		swap_copy(dst, src, 16);
		return;
	}
	uint64_t hi = load_be64(src), lo = load_be64(src + 8);
	uint64_t sign_exp = hi >> 48;
	uint64_t frac = (hi & 0xffffffffffffULL) << 15 | lo >> 49;
	/* A NaN whose payload lies only in the bits cut off stays a NaN (a
	 * quiet one), not infinity. */
	if ((sign_exp & 0x7fff) == 0x7fff && frac == 0 && (lo & ((1ULL << 49) - 1)) != 0)
		frac = 1ULL << 62;
	uint64_t mant = frac | ((sign_exp & 0x7fff) != 0 ? 1ULL << 63 : 0);
	memset(dst, 0, sizeof(long double));
	for (int i = 0; i < 8; i++, mant >>= 8)
		dst[i] = (unsigned char)mant;
	dst[8] = (unsigned char)sign_exp;
	dst[9] = (unsigned char)(sign_exp >> 8);
}

/* A native integer (n bytes, host order) -> 4 big-endian bytes; 0 if its
 * value does not fit in them. */
static int narrow_out(unsigned char *dst, const unsigned char *src, size_t n, int is_signed)
{
	unsigned char v[8];
	swap_copy(v, src, n); /* big-endian: the low 4 bytes last */
	unsigned char fill = is_signed && (v[n - 4] & 0x80) ? 0xff : 0;
	for (size_t i = 0; i < n - 4; i++)
		if (v[i] != fill)
			return 0;
	memcpy(dst, v + n - 4, 4);
	return 1;
}

/* 4 big-endian bytes -> a native integer of n bytes, sign- or
 * zero-extended. */
static void widen_in(unsigned char *dst, const unsigned char *src, size_t n, int is_signed)
{
	unsigned char v[8];
	memset(v, is_signed && (src[0] & 0x80) ? 0xff : 0, n - 4);
	memcpy(v + n - 4, src, 4);
	swap_copy(dst, v, n);
}

/* ---- the type map, walked through the constructor records ---- */

/* A type of one predefined type is that type repeated; any other
 * constructor than struct repeats its old type's map; a struct is walked
 * item by item. The walk keeps no list of the map, so a contiguous type of
 * a million mixed structs costs no memory, only its elements' time. */

/* One item's external bytes, or MPI_ERR_TYPE if an element of t has no
 * external32 form on this host. */
static int item_external(const struct cm_mpi_datatype *t, size_t *bytes)
{
	*bytes = 0;
	if (t->size == 0)
		return MPI_SUCCESS;
	if (!t->derived) {
		struct ext_layout l = layout_of(t);
		*bytes = layout_external(&l);
		return l.nparts == 0 ? MPI_ERR_TYPE : MPI_SUCCESS;
	}
	if (t->basic != MPI_DATATYPE_NULL) {
		const struct cm_mpi_datatype *b = cm_mpi_type_get(t->basic);
		size_t one;
		int rc = b ? item_external(b, &one) : MPI_ERR_TYPE;
		*bytes = rc ? 0 : t->size / b->size * one;
		return rc;
	}
	const struct cm_mpi_contents *c = t->contents;
	if (!c || c->ntypes == 0)
		return MPI_ERR_TYPE;
	if (c->combiner != MPI_COMBINER_STRUCT) {
		size_t one;
		int rc = item_external(c->types[0], &one);
		*bytes = rc ? 0 : t->size / c->types[0]->size * one;
		return rc;
	}
	for (int i = 0; i < c->ntypes; i++) {
		if (c->ints[1 + i] == 0)
			continue; /* no element of it: whatever its kind */
		size_t one;
		int rc = item_external(c->types[i], &one);
		if (rc)
			return rc;
		*bytes += (size_t)c->ints[1 + i] * one;
	}
	return MPI_SUCCESS;
}

/* Where a conversion stands: the native packed bytes and the external
 * ones, advanced together. */
struct ext_walk {
	unsigned char *native, *ext;
	int to_external;
	int out_of_range; /* a value with no external form (a long past 4 bytes) */
};

/* n elements of one predefined layout. */
static void convert_elements(const struct ext_layout *l, size_t n, struct ext_walk *w)
{
	for (size_t k = 0; k < n; k++) {
		for (int p = 0; p < l->nparts; p++) {
			enum part_kind kind = l->part[p].kind;
			int narrow = kind == PART_SIGNED || kind == PART_UNSIGNED;
			if (narrow && w->to_external) {
				if (!narrow_out(w->ext, w->native, l->part[p].native,
				                kind == PART_SIGNED))
					w->out_of_range = 1;
			} else if (narrow)
				widen_in(w->native, w->ext, l->part[p].native, kind == PART_SIGNED);
			else if (kind == PART_BOOL)
				*(w->to_external ? w->ext : w->native) =
				    *(w->to_external ? w->native : w->ext) != 0;
			else if (kind == PART_LONG_DOUBLE && w->to_external)
				long_double_out(w->ext, w->native);
			else if (kind == PART_LONG_DOUBLE)
				long_double_in(w->native, w->ext);
			else if (w->to_external)
				swap_copy(w->ext, w->native, l->part[p].native);
			else
				swap_copy(w->native, w->ext, l->part[p].native);
			w->native += l->part[p].native;
			w->ext += l->part[p].external;
		}
	}
}

/* reps items of t, in type-map order (item_external has accepted t). */
static void convert(const struct cm_mpi_datatype *t, size_t reps, struct ext_walk *w)
{
	if (t->size == 0 || reps == 0)
		return;
	if (!t->derived) {
		struct ext_layout l = layout_of(t);
		convert_elements(&l, reps, w);
		return;
	}
	if (t->basic != MPI_DATATYPE_NULL) {
		const struct cm_mpi_datatype *b = cm_mpi_type_get(t->basic);
		struct ext_layout l = layout_of(b);
		convert_elements(&l, reps * (t->size / b->size), w);
		return;
	}
	const struct cm_mpi_contents *c = t->contents;
	if (c->combiner != MPI_COMBINER_STRUCT) {
		convert(c->types[0], reps * (t->size / c->types[0]->size), w);
		return;
	}
	for (size_t r = 0; r < reps; r++)
		for (int i = 0; i < c->ntypes; i++)
			convert(c->types[i], (size_t)c->ints[1 + i], w);
}

/* ---- the calls ---- */

/* Native packed bytes converted per batch: bounded memory for any count. */
#define BATCH_BYTES (256 * 1024)

static int check_datarep(const char *datarep)
{
	return datarep && strcmp(datarep, "external32") == 0 ? MPI_SUCCESS : MPI_ERR_ARG;
}

/* The committed type; *item its external bytes per item. */
static int prepare(const char *datarep, int count, MPI_Datatype datatype,
                   const struct cm_mpi_datatype **t, size_t *item)
{
	int rc = check_datarep(datarep);
	if (!rc && count < 0)
		rc = MPI_ERR_COUNT;
	*t = cm_mpi_type_get(datatype);
	if (!rc && (!*t || !(*t)->committed))
		rc = MPI_ERR_TYPE;
	*item = 0;
	if (!rc)
		rc = item_external(*t, item);
	return rc;
}

int MPI_Pack_external_size(const char datarep[], int incount, MPI_Datatype datatype, MPI_Aint *size)
{
	CM_MPI_REQUIRE_INIT("MPI_Pack_external_size");
	const struct cm_mpi_datatype *t;
	size_t item;
	int rc = prepare(datarep, incount, datatype, &t, &item);
	if (!rc && !size)
		rc = MPI_ERR_ARG;
	if (!rc && item > 0 && (size_t)incount > (size_t)PTRDIFF_MAX / item)
		rc = MPI_ERR_COUNT;
	if (!rc)
		*size = (MPI_Aint)((size_t)incount * item);
	return rc ? cm_mpi_raise(NULL, rc, "MPI_Pack_external_size") : MPI_SUCCESS;
}

/* count items of t between user memory and their external bytes, item
 * bytes each; to_external selects the direction. */
static int transfer(const struct cm_mpi_datatype *t, void *items, size_t count, unsigned char *ext,
                    int to_external)
{
	size_t per_batch = t->size >= BATCH_BYTES ? 1 : BATCH_BYTES / t->size;
	unsigned char *native = malloc(per_batch * t->size);
	if (!native)
		return MPI_ERR_NO_MEM;
	struct ext_walk w = {.ext = ext, .to_external = to_external};
	for (size_t first = 0; first < count; first += per_batch) {
		size_t n = count - first < per_batch ? count - first : per_batch;
		void *at = cm_mpi_addr(items, (MPI_Aint)first * t->extent);
		if (to_external)
			cm_mpi_pack(t, at, n, native);
		w.native = native;
		convert(t, n, &w);
		if (w.out_of_range)
			break;
		if (!to_external)
			cm_mpi_unpack(t, native, n * t->size, at);
	}
	free(native);
	return w.out_of_range ? MPI_ERR_ARG : MPI_SUCCESS;
}

int MPI_Pack_external(const char datarep[], const void *inbuf, int incount, MPI_Datatype datatype,
                      void *outbuf, MPI_Aint outsize, MPI_Aint *position)
{
	CM_MPI_REQUIRE_INIT("MPI_Pack_external");
	const struct cm_mpi_datatype *t;
	size_t item;
	int rc = prepare(datarep, incount, datatype, &t, &item);
	if (!rc && (!position || *position < 0 || outsize < 0 || (outsize > 0 && !outbuf)))
		rc = MPI_ERR_ARG;
	if (!rc && incount > 0 && !inbuf && !t->derived)
		rc = MPI_ERR_BUFFER;
	if (!rc && (*position > outsize ||
	            (item > 0 && (size_t)incount > (size_t)(outsize - *position) / item)))
		rc = MPI_ERR_TRUNCATE;
	if (!rc && incount > 0 && item > 0) {
		rc = transfer(t, (void *)inbuf, (size_t)incount,
		              (unsigned char *)outbuf + *position, 1);
		if (!rc)
			*position += (MPI_Aint)((size_t)incount * item);
	}
	return rc ? cm_mpi_raise(NULL, rc, "MPI_Pack_external") : MPI_SUCCESS;
}

int MPI_Unpack_external(const char datarep[], const void *inbuf, MPI_Aint insize,
                        MPI_Aint *position, void *outbuf, int outcount, MPI_Datatype datatype)
{
	CM_MPI_REQUIRE_INIT("MPI_Unpack_external");
	const struct cm_mpi_datatype *t;
	size_t item;
	int rc = prepare(datarep, outcount, datatype, &t, &item);
	if (!rc && (!position || *position < 0 || insize < 0 || *position > insize ||
	            (insize > 0 && !inbuf)))
		rc = MPI_ERR_ARG;
	if (!rc && outcount > 0 && !outbuf && !t->derived)
		rc = MPI_ERR_BUFFER;
	if (!rc && item > 0 && (size_t)outcount > (size_t)(insize - *position) / item)
		rc = MPI_ERR_TRUNCATE;
	if (!rc && outcount > 0 && item > 0) {
		rc = transfer(t, outbuf, (size_t)outcount, (unsigned char *)inbuf + *position, 0);
		if (!rc)
			*position += (MPI_Aint)((size_t)outcount * item);
	}
	return rc ? cm_mpi_raise(NULL, rc, "MPI_Unpack_external") : MPI_SUCCESS;
}
