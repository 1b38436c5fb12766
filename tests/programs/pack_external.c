/* The portable representation: MPI_Pack_external, MPI_Unpack_external,
 * MPI_Pack_external_size with "external32".
 *
 * usage: pack_external
 *
 * Rank 0 packs one value of several predefined types and prints the bytes
 * (the standard's big-endian forms, compared with
 * integration/pack_external.expected: an int, a long (4 bytes in
 * external32, MPI-3.1 table 13.2), IEEE floats, long double as binary128,
 * complex parts, value-int pairs, a bool, a wide char), round-trips special
 * long doubles, packs a vector of a struct of every kind of element
 * (printing its first struct's bytes) and unpacks it, packs three items of
 * a struct of mixed types with a gap after each, checks the size against
 * MPI_Pack_external_size, unpacks them into a zeroed buffer and compares
 * every field, and checks the errors (another datarep, too little room, an
 * uncommitted type, a long that does not fit in 4 bytes). Then it sends the
 * packed struct items to rank 1 as bytes; rank 1 unpacks them and checks
 * every field. Only rank 0 prints.
 *
 *   PE_KILL=1   rank 1 raises SIGKILL after its receive (first incarnation
 *               only); its restart must get the same bytes from the log. */
#include <mpi.h>

#include <complex.h>
#include <float.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include "testutil.h"

static void print_packed(const char *label, const void *value, MPI_Datatype type)
{
	unsigned char out[64];
	MPI_Aint pos = 0, size;
	TU_MPI(MPI_Pack_external("external32", value, 1, type, out, sizeof out, &pos));
	TU_MPI(MPI_Pack_external_size("external32", 1, type, &size));
	TU_CHECK(size == pos, "%s: size %ld, packed %ld", label, (long)size, (long)pos);
	printf("%s:", label);
	for (MPI_Aint i = 0; i < pos; i++)
		printf("%s%02x", i % 4 ? "" : " ", out[i]);
	printf("\n");
}

/* A long double through external32 and back: the same value, bit for bit
 * in its significant bytes. */
static void round_trip(const char *label, long double v)
{
	unsigned char ext[16];
	long double back = 0;
	MPI_Aint pos = 0, rpos = 0;
	TU_MPI(MPI_Pack_external("external32", &v, 1, MPI_LONG_DOUBLE, ext, sizeof ext, &pos));
	TU_MPI(MPI_Unpack_external("external32", ext, pos, &rpos, &back, 1, MPI_LONG_DOUBLE));
	int same = isnan(v) ? isnan(back) : (v == back && signbit(v) == signbit(back));
	printf("long double %s: %s\n", label, same ? "round trip equal" : "round trip differs");
}

struct rec {
	char c;
	int i;
	double d[2];
	long double ld;
	short s;
};

static MPI_Datatype rec_type(void)
{
	MPI_Datatype t, sized;
	int len[] = {1, 1, 2, 1, 1};
	MPI_Aint disp[] = {offsetof(struct rec, c), offsetof(struct rec, i),
	                   offsetof(struct rec, d), offsetof(struct rec, ld),
	                   offsetof(struct rec, s)};
	MPI_Datatype types[] = {MPI_CHAR, MPI_INT, MPI_DOUBLE, MPI_LONG_DOUBLE, MPI_SHORT};
	TU_MPI(MPI_Type_create_struct(5, len, disp, types, &t));
	/* A gap after each item: the extent of two records. */
	TU_MPI(MPI_Type_create_resized(t, 0, 2 * (MPI_Aint)sizeof(struct rec), &sized));
	TU_MPI(MPI_Type_free(&t));
	TU_MPI(MPI_Type_commit(&sized));
	return sized;
}

/* Every kind of element the external form treats apart, in one struct:
 * sizes the standard fixes (bool, wide char, MPI_AINT, MPI_OFFSET,
 * MPI_COUNT), complex parts, value-int pairs, with gaps between them. */
struct mix {
	_Bool b;
	wchar_t w;
	MPI_Aint a;
	MPI_Offset o;
	MPI_Count n;
	float _Complex fz;
	struct {
		float v;
		int i;
	} fi;
	struct {
		short v;
		int i;
	} si;
	struct {
		long double v;
		int i;
	} ldi;
};

/* Two mixes, every other one of a vector, resized to span four (a
 * struct inside a vector inside a resized type). */
static MPI_Datatype mix_type(void)
{
	int len[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
	MPI_Aint disp[] = {
	    offsetof(struct mix, b),  offsetof(struct mix, w),  offsetof(struct mix, a),
	    offsetof(struct mix, o),  offsetof(struct mix, n),  offsetof(struct mix, fz),
	    offsetof(struct mix, fi), offsetof(struct mix, si), offsetof(struct mix, ldi)};
	MPI_Datatype types[] = {MPI_C_BOOL,    MPI_WCHAR,     MPI_AINT,
	                        MPI_OFFSET,    MPI_COUNT,     MPI_C_FLOAT_COMPLEX,
	                        MPI_FLOAT_INT, MPI_SHORT_INT, MPI_LONG_DOUBLE_INT};
	MPI_Datatype s, sized, vec, t;
	TU_MPI(MPI_Type_create_struct(9, len, disp, types, &s));
	TU_MPI(MPI_Type_create_resized(s, 0, sizeof(struct mix), &sized));
	TU_MPI(MPI_Type_vector(2, 1, 2, sized, &vec));
	TU_MPI(MPI_Type_create_resized(vec, 0, 4 * sizeof(struct mix), &t));
	TU_MPI(MPI_Type_free(&s));
	TU_MPI(MPI_Type_free(&sized));
	TU_MPI(MPI_Type_free(&vec));
	TU_MPI(MPI_Type_commit(&t));
	return t;
}

static void fill_mix(struct mix *m, int k)
{
	memset(m, 0, sizeof *m);
	m->b = 1;
	m->w = L'a' + k;
	m->a = -2 - k;
	m->o = 0x0102030405060708ll + k;
	m->n = 3 + k;
	m->fz = 1.0f + k - 2.0f * I;
	m->fi.v = -1.0f;
	m->fi.i = 4 + k;
	m->si.v = (short)(-5 - k);
	m->si.i = 6;
	m->ldi.v = 1.0L + k;
	m->ldi.i = -7;
}

/* The vector of mixes: printed (its first mix), unpacked and compared. */
static void mixes(void)
{
	MPI_Datatype t = mix_type();
	struct mix in[4], back[4];
	for (int k = 0; k < 4; k++)
		fill_mix(&in[k], k);
	memset(back, 0, sizeof back);
	unsigned char out[256];
	MPI_Aint pos = 0, rpos = 0, size;
	/* The data: in[0] and in[2]. */
	TU_MPI(MPI_Pack_external("external32", in, 1, t, out, sizeof out, &pos));
	TU_MPI(MPI_Pack_external_size("external32", 1, t, &size));
	TU_CHECK(size == pos, "mix: size %ld, packed %ld", (long)size, (long)pos);
	printf("mix vector: %ld bytes; the first mix:\n", (long)pos);
	for (MPI_Aint i = 0; i < pos / 2; i++)
		printf("%s%02x%s", i % 4 ? "" : " ", out[i], i % 16 == 15 ? "\n" : "");
	printf("\n");
	TU_MPI(MPI_Unpack_external("external32", out, pos, &rpos, back, 1, t));
	int same = rpos == pos && back[1].b == 0 && back[3].b == 0; /* the gaps untouched */
	for (int k = 0; k < 4; k += 2)
		same = same && back[k].b == in[k].b && back[k].w == in[k].w &&
		       back[k].a == in[k].a && back[k].o == in[k].o && back[k].n == in[k].n &&
		       back[k].fz == in[k].fz && back[k].fi.v == in[k].fi.v &&
		       back[k].fi.i == in[k].fi.i && back[k].si.v == in[k].si.v &&
		       back[k].si.i == in[k].si.i && back[k].ldi.v == in[k].ldi.v &&
		       back[k].ldi.i == in[k].ldi.i;
	printf("mix vector unpacked %s\n", same ? "equal" : "different");
	TU_MPI(MPI_Type_free(&t));
}

enum { ITEMS = 3 };

static void fill(struct rec *r)
{
	memset(r, 0, 2 * ITEMS * sizeof *r);
	for (int k = 0; k < ITEMS; k++) {
		struct rec *x = &r[2 * k];
		x->c = (char)('a' + k);
		x->i = -1000 * (k + 1) - 7;
		x->d[0] = 1.0 / (k + 3);
		x->d[1] = -1e300 * (k + 1);
		x->ld = 1.0L / 3.0L + k;
		x->s = (short)(-300 - k);
	}
}

static int same_records(const struct rec *a, const struct rec *b)
{
	for (int k = 0; k < ITEMS; k++) {
		const struct rec *x = &a[2 * k], *y = &b[2 * k];
		if (x->c != y->c || x->i != y->i || x->d[0] != y->d[0] || x->d[1] != y->d[1] ||
		    x->ld != y->ld || x->s != y->s)
			return 0;
	}
	return 1;
}

static int error_class(int rc)
{
	int cls;
	TU_MPI(MPI_Error_class(rc, &cls));
	return cls;
}

int main(int argc, char **argv)
{
	tu_init(&argc, &argv, "pack_external");
	tu_require_size(2, 2);
	MPI_Datatype rt = rec_type();
	MPI_Aint item_size;
	TU_MPI(MPI_Pack_external_size("external32", ITEMS, rt, &item_size));
	unsigned char *packed = malloc((size_t)item_size);
	struct rec *want = malloc(2 * ITEMS * sizeof *want), *got = calloc(2 * ITEMS, sizeof *got);
	TU_CHECK(packed && want && got, "out of memory");
	fill(want);

	if (tu_rank == 0) {
		int i = 0x01020304;
		long l = -2;
		short s = 0x0a0b;
		float f = 1.5f;
		double d = 1.0;
		long double ld = -2.5L;
		double _Complex z = 1.0 + 2.0 * I;
		struct {
			double v;
			int i;
		} di = {1.0, 7};
		_Bool b = 1;
		wchar_t w = L'A';
		print_packed("int 0x01020304", &i, MPI_INT);
		print_packed("long -2", &l, MPI_LONG);
		unsigned long ul = 0xfffffffful;
		print_packed("unsigned long 0xffffffff", &ul, MPI_UNSIGNED_LONG);
		struct {
			long v;
			int i;
		} li = {-3, 9};
		print_packed("long_int {-3, 9}", &li, MPI_LONG_INT);
		int two[2] = {1, 2};
		print_packed("2int {1, 2}", two, MPI_2INT);
		print_packed("short 0x0a0b", &s, MPI_SHORT);
		print_packed("float 1.5", &f, MPI_FLOAT);
		print_packed("double 1.0", &d, MPI_DOUBLE);
		print_packed("long double -2.5", &ld, MPI_LONG_DOUBLE);
		print_packed("double complex 1+2i", &z, MPI_C_DOUBLE_COMPLEX);
		print_packed("double_int {1.0, 7}", &di, MPI_DOUBLE_INT);
		print_packed("bool true", &b, MPI_C_BOOL);
		print_packed("wchar 'A'", &w, MPI_WCHAR);
		round_trip("1/3", 1.0L / 3.0L);
		round_trip("-0", -0.0L);
		round_trip("max", LDBL_MAX);
		round_trip("smallest normal", LDBL_MIN);
		round_trip("smallest subnormal", LDBL_TRUE_MIN);
		round_trip("-infinity", -INFINITY);
		round_trip("nan", NAN);
		/* Another MPI's binary128 NaN with its payload in the low bits only
		 * (below an 80-bit long double's fraction). */
		const unsigned char low_nan[16] = {0x7f, 0xff, [15] = 1};
		long double ln = 0;
		MPI_Aint lpos = 0;
		TU_MPI(
		    MPI_Unpack_external("external32", low_nan, 16, &lpos, &ln, 1, MPI_LONG_DOUBLE));
		printf("binary128 nan of low payload bits: %s\n", isnan(ln) ? "nan" : "not nan");
		/* external32's true is any nonzero byte; a _Bool holds 1. */
		const unsigned char ext_two = 2;
		_Bool tb = 0;
		unsigned char tb_byte;
		lpos = 0;
		TU_MPI(MPI_Unpack_external("external32", &ext_two, 1, &lpos, &tb, 1, MPI_C_BOOL));
		memcpy(&tb_byte, &tb, 1);
		printf("bool from external 02: byte %02x\n", tb_byte);
		mixes();

		MPI_Aint pos = 0, rpos = 0;
		TU_MPI(MPI_Pack_external("external32", want, ITEMS, rt, packed, item_size, &pos));
		TU_MPI(MPI_Unpack_external("external32", packed, pos, &rpos, got, ITEMS, rt));
		printf("struct x %d: %ld bytes (1+4+16+16+2 each), unpacked %s\n", ITEMS, (long)pos,
		       same_records(want, got) ? "equal" : "different");

		TU_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
		MPI_Aint p = 0;
		int cls =
		    error_class(MPI_Pack_external("native", want, 1, rt, packed, item_size, &p));
		printf("datarep \"native\": %s\n", tu_err_name(cls));
		p = 0;
		cls = error_class(
		    MPI_Pack_external("external32", want, ITEMS, rt, packed, item_size - 1, &p));
		printf("one byte short: %s, position %ld\n", tu_err_name(cls), (long)p);
		MPI_Datatype loose;
		TU_MPI(MPI_Type_contiguous(2, MPI_INT, &loose));
		cls = error_class(
		    MPI_Pack_external("external32", &i, 1, loose, packed, item_size, &p));
		printf("uncommitted type: %s\n", tu_err_name(cls));
		if (sizeof(long) > 4) {
			long big = 0x100000000l;
			p = 0;
			cls = error_class(MPI_Pack_external("external32", &big, 1, MPI_LONG, packed,
			                                    item_size, &p));
		} else {
			cls = MPI_ERR_ARG; /* every long fits */
		}
		printf("long 2^32: %s\n", tu_err_name(cls));
		TU_MPI(MPI_Type_free(&loose));
		TU_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));

		TU_MPI(MPI_Send(packed, (int)pos, MPI_BYTE, 1, 1, MPI_COMM_WORLD));
		int ok = 0;
		TU_MPI(MPI_Recv(&ok, 1, MPI_INT, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
		printf("struct sent as external32 bytes: %s\n",
		       ok ? "fields equal" : "fields differ");
	} else {
		MPI_Status st;
		int n;
		TU_MPI(MPI_Recv(packed, (int)item_size, MPI_BYTE, 0, 1, MPI_COMM_WORLD, &st));
		TU_MPI(MPI_Get_count(&st, MPI_BYTE, &n));
		const char *kill = getenv("PE_KILL"), *inc = getenv("CHANMEM_INCARNATION");
		if (kill && strcmp(kill, "1") == 0 && (!inc || strcmp(inc, "0") == 0))
			raise(SIGKILL);
		MPI_Aint rpos = 0;
		TU_MPI(MPI_Unpack_external("external32", packed, n, &rpos, got, ITEMS, rt));
		int ok = rpos == item_size && same_records(want, got);
		TU_MPI(MPI_Send(&ok, 1, MPI_INT, 0, 2, MPI_COMM_WORLD));
	}
	free(packed);
	free(want);
	free(got);
	TU_MPI(MPI_Type_free(&rt));
	return tu_finalize();
}
