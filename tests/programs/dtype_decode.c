/* Decoding derived datatypes: MPI_Type_get_envelope / MPI_Type_get_contents.
 *
 * usage: dtype_decode
 *
 * Rank 0 builds one type with every constructor (and a type nested in a
 * struct whose handle is freed before the struct is decoded), prints each
 * type's envelope and contents, then rebuilds each type from its contents
 * alone, recursively, and checks that the rebuilt type has the same size,
 * bounds and packed bytes as the original; the darray is also checked
 * against its type map written out by hand. Then it sends data described
 * with the rebuilt struct to rank 1, which receives it with the original
 * and checks every byte. Only rank 0 prints (compared with
 * integration/dtype_decode.expected).
 *
 *   DD_KILL=1   rank 1 raises SIGKILL after its receive (first incarnation
 *               only); its restart must get the same bytes from the log. */
#include <mpi.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define MAXA 32
#define BUFSZ 4096

static const struct {
	int combiner;
	const char *name;
} combiners[] = {
    {MPI_COMBINER_NAMED, "NAMED"},
    {MPI_COMBINER_DUP, "DUP"},
    {MPI_COMBINER_CONTIGUOUS, "CONTIGUOUS"},
    {MPI_COMBINER_VECTOR, "VECTOR"},
    {MPI_COMBINER_HVECTOR, "HVECTOR"},
    {MPI_COMBINER_INDEXED, "INDEXED"},
    {MPI_COMBINER_HINDEXED, "HINDEXED"},
    {MPI_COMBINER_INDEXED_BLOCK, "INDEXED_BLOCK"},
    {MPI_COMBINER_HINDEXED_BLOCK, "HINDEXED_BLOCK"},
    {MPI_COMBINER_STRUCT, "STRUCT"},
    {MPI_COMBINER_SUBARRAY, "SUBARRAY"},
    {MPI_COMBINER_DARRAY, "DARRAY"},
    {MPI_COMBINER_RESIZED, "RESIZED"},
};

static const struct {
	MPI_Datatype type;
	const char *name;
} named[] = {{MPI_INT, "MPI_INT"}, {MPI_DOUBLE, "MPI_DOUBLE"}, {MPI_SHORT, "MPI_SHORT"}};

static const char *combiner_name(int c)
{
	for (size_t i = 0; i < sizeof combiners / sizeof combiners[0]; i++)
		if (combiners[i].combiner == c)
			return combiners[i].name;
	return "?";
}

static const char *named_name(MPI_Datatype t)
{
	for (size_t i = 0; i < sizeof named / sizeof named[0]; i++)
		if (named[i].type == t)
			return named[i].name;
	return NULL;
}

struct decoded {
	int ni, na, nt, combiner;
	int ints[MAXA];
	MPI_Aint addrs[MAXA];
	MPI_Datatype types[MAXA];
};

static void decode(MPI_Datatype t, struct decoded *d)
{
	TU_MPI(MPI_Type_get_envelope(t, &d->ni, &d->na, &d->nt, &d->combiner));
	TU_CHECK(d->ni <= MAXA && d->na <= MAXA && d->nt <= MAXA, "envelope too large");
	if (d->combiner != MPI_COMBINER_NAMED)
		TU_MPI(MPI_Type_get_contents(t, d->ni, d->na, d->nt, d->ints, d->addrs, d->types));
}

/* The inner types get_contents returned: derived ones are new handles. */
static void free_inner(struct decoded *d)
{
	for (int i = 0; i < d->nt; i++) {
		int ni, na, nt, c;
		TU_MPI(MPI_Type_get_envelope(d->types[i], &ni, &na, &nt, &c));
		if (c != MPI_COMBINER_NAMED)
			TU_MPI(MPI_Type_free(&d->types[i]));
	}
}

static void print_type(const char *label, MPI_Datatype t, int depth)
{
	struct decoded d;
	decode(t, &d);
	char line[1024];
	int n = snprintf(line, sizeof line, "%*s%s: %s", depth * 2, "", label,
	                 combiner_name(d.combiner));
	if (d.combiner == MPI_COMBINER_NAMED)
		n += snprintf(line + n, sizeof line - (size_t)n, " %s",
		              named_name(t) ? named_name(t) : "?");
	if (d.ni) {
		n += snprintf(line + n, sizeof line - (size_t)n, " ints");
		for (int i = 0; i < d.ni; i++)
			n += snprintf(line + n, sizeof line - (size_t)n, " %d", d.ints[i]);
	}
	if (d.na) {
		n += snprintf(line + n, sizeof line - (size_t)n, " addrs");
		for (int i = 0; i < d.na; i++)
			n += snprintf(line + n, sizeof line - (size_t)n, " %ld", (long)d.addrs[i]);
	}
	printf("%s\n", line);
	for (int i = 0; i < d.nt; i++) {
		char sub[32];
		snprintf(sub, sizeof sub, "type %d", i);
		print_type(sub, d.types[i], depth + 1);
	}
	free_inner(&d);
}

/* A new type built from t's contents only (NAMED: t itself). */
static MPI_Datatype rebuild(MPI_Datatype t)
{
	struct decoded d;
	decode(t, &d);
	if (d.combiner == MPI_COMBINER_NAMED)
		return t;
	MPI_Datatype in[MAXA], out = MPI_DATATYPE_NULL;
	for (int i = 0; i < d.nt; i++)
		in[i] = rebuild(d.types[i]);
	int *v = d.ints;
	switch (d.combiner) {
	case MPI_COMBINER_DUP:
		TU_MPI(MPI_Type_dup(in[0], &out));
		break;
	case MPI_COMBINER_CONTIGUOUS:
		TU_MPI(MPI_Type_contiguous(v[0], in[0], &out));
		break;
	case MPI_COMBINER_VECTOR:
		TU_MPI(MPI_Type_vector(v[0], v[1], v[2], in[0], &out));
		break;
	case MPI_COMBINER_HVECTOR:
		TU_MPI(MPI_Type_create_hvector(v[0], v[1], d.addrs[0], in[0], &out));
		break;
	case MPI_COMBINER_INDEXED:
		TU_MPI(MPI_Type_indexed(v[0], v + 1, v + 1 + v[0], in[0], &out));
		break;
	case MPI_COMBINER_HINDEXED:
		TU_MPI(MPI_Type_create_hindexed(v[0], v + 1, d.addrs, in[0], &out));
		break;
	case MPI_COMBINER_INDEXED_BLOCK:
		TU_MPI(MPI_Type_create_indexed_block(v[0], v[1], v + 2, in[0], &out));
		break;
	case MPI_COMBINER_HINDEXED_BLOCK:
		TU_MPI(MPI_Type_create_hindexed_block(v[0], v[1], d.addrs, in[0], &out));
		break;
	case MPI_COMBINER_STRUCT:
		TU_MPI(MPI_Type_create_struct(v[0], v + 1, d.addrs, in, &out));
		break;
	case MPI_COMBINER_SUBARRAY:
		TU_MPI(MPI_Type_create_subarray(v[0], v + 1, v + 1 + v[0], v + 1 + 2 * v[0],
		                                v[1 + 3 * v[0]], in[0], &out));
		break;
	case MPI_COMBINER_DARRAY: {
		int nd = v[2];
		TU_MPI(MPI_Type_create_darray(v[0], v[1], nd, v + 3, v + 3 + nd, v + 3 + 2 * nd,
		                              v + 3 + 3 * nd, v[3 + 4 * nd], in[0], &out));
		break;
	}
	case MPI_COMBINER_RESIZED:
		TU_MPI(MPI_Type_create_resized(in[0], d.addrs[0], d.addrs[1], &out));
		break;
	default:
		tu_fail("unexpected combiner %d", d.combiner);
	}
	for (int i = 0; i < d.nt; i++)
		if (in[i] != d.types[i])
			TU_MPI(MPI_Type_free(&in[i]));
	free_inner(&d);
	TU_MPI(MPI_Type_commit(&out));
	return out;
}

static unsigned char src[BUFSZ];

/* Same size, bounds and packed bytes (two items) as the original. */
static void compare(const char *label, MPI_Datatype a, MPI_Datatype b, const char *other)
{
	MPI_Aint lb[2], ext[2], tlb[2], text[2];
	int size[2], psize;
	MPI_Datatype t[2] = {a, b};
	static unsigned char packed[2][BUFSZ];
	for (int i = 0; i < 2; i++) {
		TU_MPI(MPI_Type_size(t[i], &size[i]));
		TU_MPI(MPI_Type_get_extent(t[i], &lb[i], &ext[i]));
		TU_MPI(MPI_Type_get_true_extent(t[i], &tlb[i], &text[i]));
		int pos = 0;
		TU_MPI(MPI_Pack_size(2, t[i], MPI_COMM_SELF, &psize));
		TU_CHECK(psize <= BUFSZ, "%s: pack size %d", label, psize);
		TU_MPI(MPI_Pack(src + 256, 2, t[i], packed[i], BUFSZ, &pos, MPI_COMM_SELF));
	}
	TU_CHECK(size[0] == size[1] && lb[0] == lb[1] && ext[0] == ext[1] && tlb[0] == tlb[1] &&
	             text[0] == text[1],
	         "%s: %s type differs (size %d/%d lb %ld/%ld extent %ld/%ld)", label, other,
	         size[0], size[1], (long)lb[0], (long)lb[1], (long)ext[0], (long)ext[1]);
	TU_CHECK(memcmp(packed[0], packed[1], 2 * (size_t)size[0]) == 0,
	         "%s: %s type packs other bytes", label, other);
	printf("%s: size %d lb %ld extent %ld true_lb %ld true_extent %ld, %s equal\n", label,
	       size[0], (long)lb[0], (long)ext[0], (long)tlb[0], (long)text[0], other);
}

enum { NTYPES = 14 };

int main(int argc, char **argv)
{
	tu_init(&argc, &argv, "dtype_decode");
	tu_require_size(2, 2);
	for (int i = 0; i < BUFSZ; i++)
		src[i] = (unsigned char)(i * 7 + 1);
	MPI_Datatype t[NTYPES], vec;
	const char *label[NTYPES] = {"named",          "dup",     "contiguous", "vector",
	                             "hvector",        "indexed", "hindexed",   "indexed_block",
	                             "hindexed_block", "struct",  "subarray",   "resized",
	                             "dup_of_struct",  "darray"};
	t[0] = MPI_INT;
	TU_MPI(MPI_Type_dup(MPI_DOUBLE, &t[1]));
	TU_MPI(MPI_Type_contiguous(3, MPI_INT, &t[2]));
	TU_MPI(MPI_Type_vector(3, 2, 4, MPI_INT, &t[3]));
	TU_MPI(MPI_Type_create_hvector(2, 3, 40, MPI_SHORT, &t[4]));
	TU_MPI(MPI_Type_indexed(3, (int[]){1, 2, 3}, (int[]){0, 3, 8}, MPI_INT, &t[5]));
	TU_MPI(MPI_Type_create_hindexed(2, (int[]){2, 1}, (MPI_Aint[]){0, 24}, MPI_DOUBLE, &t[6]));
	TU_MPI(MPI_Type_create_indexed_block(3, 2, (int[]){0, 4, 9}, MPI_INT, &t[7]));
	TU_MPI(MPI_Type_create_hindexed_block(2, 3, (MPI_Aint[]){4, 32}, MPI_SHORT, &t[8]));
	TU_MPI(MPI_Type_vector(2, 1, 3, MPI_SHORT, &vec));
	TU_MPI(MPI_Type_create_struct(3, (int[]){1, 2, 1}, (MPI_Aint[]){0, 8, 40},
	                              (MPI_Datatype[]){MPI_INT, vec, MPI_DOUBLE}, &t[9]));
	TU_MPI(MPI_Type_free(&vec)); /* the struct keeps what it was built from */
	TU_MPI(MPI_Type_create_subarray(2, (int[]){6, 5}, (int[]){2, 3}, (int[]){1, 2}, MPI_ORDER_C,
	                                MPI_INT, &t[10]));
	TU_MPI(MPI_Type_create_resized(t[2], -4, 40, &t[11]));
	TU_MPI(MPI_Type_dup(t[9], &t[12]));
	/* Rank 1 of a 2 x 2 grid over a 6 x 7 array: rows block-distributed
	 * (rows 0-2), columns cyclic by 2 (columns 2, 3 and 6). */
	TU_MPI(MPI_Type_create_darray(
	    4, 1, 2, (int[]){6, 7}, (int[]){MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_CYCLIC},
	    (int[]){MPI_DISTRIBUTE_DFLT_DARG, 2}, (int[]){2, 2}, MPI_ORDER_C, MPI_INT, &t[13]));
	for (int i = 1; i < NTYPES; i++)
		TU_MPI(MPI_Type_commit(&t[i]));
	/* The darray's map, written out: the same packed bytes. */
	MPI_Datatype by_hand, by_hand_sized;
	TU_MPI(MPI_Type_indexed(6, (int[]){2, 1, 2, 1, 2, 1}, (int[]){2, 6, 9, 13, 16, 20}, MPI_INT,
	                        &by_hand));
	TU_MPI(MPI_Type_create_resized(by_hand, 0, 6 * 7 * (MPI_Aint)sizeof(int), &by_hand_sized));
	TU_MPI(MPI_Type_commit(&by_hand_sized));
	if (tu_rank == 0)
		compare("darray", t[13], by_hand_sized, "map by hand");
	TU_MPI(MPI_Type_free(&by_hand));
	TU_MPI(MPI_Type_free(&by_hand_sized));
	/* Blocks in Fortran order: rank 1 is grid row 0, column 1 (the grid is
	 * row-major whatever the array order), so rows 0-2, columns 4-6. */
	MPI_Datatype blocks, sub;
	TU_MPI(MPI_Type_create_darray(4, 1, 2, (int[]){6, 7},
	                              (int[]){MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_BLOCK},
	                              (int[]){MPI_DISTRIBUTE_DFLT_DARG, MPI_DISTRIBUTE_DFLT_DARG},
	                              (int[]){2, 2}, MPI_ORDER_FORTRAN, MPI_INT, &blocks));
	TU_MPI(MPI_Type_create_subarray(2, (int[]){6, 7}, (int[]){3, 3}, (int[]){0, 4},
	                                MPI_ORDER_FORTRAN, MPI_INT, &sub));
	TU_MPI(MPI_Type_commit(&blocks));
	TU_MPI(MPI_Type_commit(&sub));
	if (tu_rank == 0)
		compare("darray_fortran", blocks, sub, "subarray");
	TU_MPI(MPI_Type_free(&blocks));
	TU_MPI(MPI_Type_free(&sub));

	/* A named type has no contents: MPI_ERR_ARG, as the standard says. */
	TU_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
	int ibuf[1], cls;
	MPI_Aint abuf[1];
	MPI_Datatype tbuf[1];
	TU_MPI(MPI_Error_class(MPI_Type_get_contents(MPI_INT, 1, 1, 1, ibuf, abuf, tbuf), &cls));
	TU_CHECK(cls == MPI_ERR_ARG, "get_contents of MPI_INT: %s", tu_err_name(cls));
	/* A darray whose grid does not hold `size` processes, or that spreads an
	 * undistributed dimension: MPI_ERR_ARG. */
	MPI_Datatype nothing;
	TU_MPI(MPI_Error_class(MPI_Type_create_darray(4, 0, 1, (int[]){8},
	                                              (int[]){MPI_DISTRIBUTE_BLOCK},
	                                              (int[]){MPI_DISTRIBUTE_DFLT_DARG}, (int[]){3},
	                                              MPI_ORDER_C, MPI_INT, &nothing),
	                       &cls));
	TU_CHECK(cls == MPI_ERR_ARG, "darray over a grid of 3 for 4: %s", tu_err_name(cls));
	TU_MPI(MPI_Error_class(MPI_Type_create_darray(2, 0, 1, (int[]){8},
	                                              (int[]){MPI_DISTRIBUTE_NONE},
	                                              (int[]){MPI_DISTRIBUTE_DFLT_DARG}, (int[]){2},
	                                              MPI_ORDER_C, MPI_INT, &nothing),
	                       &cls));
	TU_CHECK(cls == MPI_ERR_ARG, "undistributed dimension over 2: %s", tu_err_name(cls));
	/* Arrays too small for the contents: MPI_ERR_ARG too. */
	TU_MPI(MPI_Error_class(MPI_Type_get_contents(t[5], 2, 0, 1, ibuf, abuf, tbuf), &cls));
	TU_CHECK(cls == MPI_ERR_ARG, "get_contents into 2 ints: %s", tu_err_name(cls));
	TU_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));

	/* Names: a predefined type's own, a derived one's empty until set. */
	char name[MPI_MAX_OBJECT_NAME], vname[MPI_MAX_OBJECT_NAME];
	int nlen, vlen;
	TU_MPI(MPI_Type_get_name(MPI_DOUBLE, name, &nlen));
	TU_MPI(MPI_Type_get_name(t[3], vname, &vlen));
	TU_CHECK(vlen == 0 && vname[0] == '\0', "unnamed vector called \"%s\"", vname);
	TU_MPI(MPI_Type_set_name(t[3], "column block"));
	TU_MPI(MPI_Type_get_name(t[3], vname, &vlen));

	MPI_Datatype again = MPI_DATATYPE_NULL;
	if (tu_rank == 0) {
		printf("names: %s (%d), vector named \"%s\" (%d)\n", name, nlen, vname, vlen);
		printf("get_contents of a named type: MPI_ERR_ARG\n");
		for (int i = 0; i < NTYPES; i++)
			print_type(label[i], t[i], 0);
		for (int i = 0; i < NTYPES; i++) {
			MPI_Datatype r = rebuild(t[i]);
			compare(label[i], t[i], r, "rebuilt");
			if (r != t[i])
				TU_MPI(MPI_Type_free(&r));
		}
	}
	/* The data exchange: rebuilt struct on the sending side, original on
	 * the receiving side. */
	enum { ITEMS = 5 };
	MPI_Aint lb, ext;
	TU_MPI(MPI_Type_get_extent(t[9], &lb, &ext));
	size_t span = (size_t)(ITEMS * ext);
	unsigned char *buf = calloc(1, span);
	TU_CHECK(buf != NULL, "out of memory");
	if (tu_rank == 0) {
		again = rebuild(t[9]);
		tu_fill(buf, span, 42);
		TU_MPI(MPI_Send(buf, ITEMS, again, 1, 1, MPI_COMM_WORLD));
		TU_MPI(MPI_Type_free(&again));
		int ok = 0;
		TU_MPI(MPI_Recv(&ok, 1, MPI_INT, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
		printf("struct exchange: %s\n", ok ? "bytes equal" : "bytes differ");
	} else {
		unsigned char *want = malloc(span);
		TU_CHECK(want != NULL, "out of memory");
		tu_fill(want, span, 42);
		TU_MPI(MPI_Recv(buf, ITEMS, t[9], 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
		const char *kill = getenv("DD_KILL"), *inc = getenv("CHANMEM_INCARNATION");
		if (kill && strcmp(kill, "1") == 0 && (!inc || strcmp(inc, "0") == 0))
			raise(SIGKILL);
		/* Only the bytes the type map covers travel: compare those. */
		unsigned char *a = malloc(span), *b = malloc(span);
		int pa = 0, pb = 0;
		TU_CHECK(a && b, "out of memory");
		TU_MPI(MPI_Pack(buf, ITEMS, t[9], a, (int)span, &pa, MPI_COMM_SELF));
		TU_MPI(MPI_Pack(want, ITEMS, t[9], b, (int)span, &pb, MPI_COMM_SELF));
		int ok = pa == pb && memcmp(a, b, (size_t)pa) == 0;
		TU_MPI(MPI_Send(&ok, 1, MPI_INT, 0, 2, MPI_COMM_WORLD));
		free(a);
		free(b);
		free(want);
	}
	free(buf);
	for (int i = 1; i < NTYPES; i++)
		TU_MPI(MPI_Type_free(&t[i]));
	return tu_finalize();
}
