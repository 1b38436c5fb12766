/* dtype_layouts: every derived datatype constructor, checked byte for byte.
 *
 * For each type the program knows the type map independently (a list of
 * byte ranges in type-map order, written out by hand below) and checks:
 * - size, lb, extent and true extent;
 * - rank 0 sends count items from a patterned buffer; rank 1 receives them
 *   with the same type into a buffer filled with 0xEE: every byte of the
 *   map must equal the sender's, every other byte must still be 0xEE;
 * - the same send received as MPI_PACKED: the bytes of the map in order;
 * - packed bytes sent as MPI_PACKED and received with the type: scattered
 *   back to the map;
 * - MPI_Get_count and MPI_Get_elements.
 * Then partial receives (MPI_Get_elements on a cut item) and a type freed
 * while a receive using it is pending. Needs 2 ranks (others idle). */
#include "testutil.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_RANGES = 512, ARENA = 8192, ORIGIN = 1024 };

struct range {
	long off; /* from the buffer argument */
	int len;
};

struct layout {
	const char *name;
	MPI_Datatype type;
	int count;
	int elements; /* basic elements per item */
	int nranges;
	struct range r[MAX_RANGES];
};

static void add(struct layout *l, long off, int len)
{
	TU_CHECK(l->nranges < MAX_RANGES, "too many ranges");
	l->r[l->nranges++] = (struct range){off, len};
}

/* The map of one item at 0 repeated count times at extent intervals. */
static void repeat_items(struct layout *l, MPI_Aint extent)
{
	int per_item = l->nranges;
	for (int k = 1; k < l->count; k++)
		for (int i = 0; i < per_item; i++)
			add(l, l->r[i].off + k * (long)extent, l->r[i].len);
}

static int total_bytes(const struct layout *l)
{
	int n = 0;
	for (int i = 0; i < l->nranges; i++)
		n += l->r[i].len;
	return n;
}

/* 0xEE everywhere but the map, where the sender's pattern is. */
static void expected_image(const struct layout *l, const unsigned char *pattern, unsigned char *img)
{
	memset(img, 0xEE, ARENA);
	for (int i = 0; i < l->nranges; i++)
		memcpy(img + ORIGIN + l->r[i].off, pattern + ORIGIN + l->r[i].off,
		       (size_t)l->r[i].len);
}

static void check_image(const struct layout *l, const unsigned char *got, const unsigned char *want,
                        const char *how)
{
	for (int i = 0; i < ARENA; i++)
		TU_CHECK(got[i] == want[i],
		         "%s (%s): byte %ld from the buffer argument is 0x%02x, want 0x%02x",
		         l->name, how, (long)i - ORIGIN, got[i], want[i]);
}

static void run_layout(struct layout *l, int tag)
{
	TU_MPI(MPI_Type_commit(&l->type));
	int size;
	MPI_Aint lb, extent, tlb, textent;
	TU_MPI(MPI_Type_size(l->type, &size));
	TU_MPI(MPI_Type_get_extent(l->type, &lb, &extent));
	TU_MPI(MPI_Type_get_true_extent(l->type, &tlb, &textent));
	repeat_items(l, extent);
	int bytes = total_bytes(l);
	TU_CHECK(bytes == size * l->count, "%s: map has %d bytes, MPI_Type_size says %d x %d",
	         l->name, bytes, size, l->count);

	static unsigned char pattern[ARENA], buf[ARENA], want[ARENA], packed[ARENA];
	tu_fill(pattern, ARENA, (uint64_t)tag);
	expected_image(l, pattern, want);
	int packed_len = 0;
	for (int i = 0; i < l->nranges; i++) {
		memcpy(packed + packed_len, pattern + ORIGIN + l->r[i].off, (size_t)l->r[i].len);
		packed_len += l->r[i].len;
	}
	if (tu_rank == 0) {
		TU_MPI(MPI_Send(pattern + ORIGIN, l->count, l->type, 1, tag, MPI_COMM_WORLD));
		TU_MPI(MPI_Send(pattern + ORIGIN, l->count, l->type, 1, tag + 1, MPI_COMM_WORLD));
		TU_MPI(MPI_Send(packed, packed_len, MPI_PACKED, 1, tag + 2, MPI_COMM_WORLD));
		printf("%s: size %d lb %ld extent %ld true lb %ld true extent %ld, %d items: ok\n",
		       l->name, size, (long)lb, (long)extent, (long)tlb, (long)textent, l->count);
	} else if (tu_rank == 1) {
		MPI_Status st;
		int count = -1, elements = -1;
		memset(buf, 0xEE, ARENA);
		TU_MPI(MPI_Recv(buf + ORIGIN, l->count, l->type, 0, tag, MPI_COMM_WORLD, &st));
		check_image(l, buf, want, "typed receive");
		TU_MPI(MPI_Get_count(&st, l->type, &count));
		TU_MPI(MPI_Get_elements(&st, l->type, &elements));
		TU_CHECK(count == l->count && elements == l->count * l->elements,
		         "%s: count %d elements %d, want %d and %d", l->name, count, elements,
		         l->count, l->count * l->elements);

		memset(buf, 0xEE, ARENA);
		TU_MPI(MPI_Recv(buf, ARENA, MPI_PACKED, 0, tag + 1, MPI_COMM_WORLD, &st));
		TU_MPI(MPI_Get_count(&st, MPI_PACKED, &count));
		TU_CHECK(count == packed_len && memcmp(buf, packed, (size_t)packed_len) == 0,
		         "%s: received as MPI_PACKED, %d bytes not the map's %d in order", l->name,
		         count, packed_len);

		memset(buf, 0xEE, ARENA);
		TU_MPI(MPI_Recv(buf + ORIGIN, l->count, l->type, 0, tag + 2, MPI_COMM_WORLD, &st));
		check_image(l, buf, want, "MPI_PACKED sent, typed receive");
	}
	TU_MPI(MPI_Type_free(&l->type));
	TU_CHECK(l->type == MPI_DATATYPE_NULL, "MPI_Type_free left the handle");
}

struct rec {
	char c;
	double d;
	int i[3];
	short s;
};

static MPI_Datatype rec_type(void)
{
	int lens[4] = {1, 1, 3, 1};
	MPI_Aint displs[4] = {offsetof(struct rec, c), offsetof(struct rec, d),
	                      offsetof(struct rec, i), offsetof(struct rec, s)};
	MPI_Datatype types[4] = {MPI_CHAR, MPI_DOUBLE, MPI_INT, MPI_SHORT};
	MPI_Datatype t;
	TU_MPI(MPI_Type_create_struct(4, lens, displs, types, &t));
	return t;
}

static void rec_ranges(struct layout *l, long base)
{
	add(l, base + (long)offsetof(struct rec, c), 1);
	add(l, base + (long)offsetof(struct rec, d), 8);
	add(l, base + (long)offsetof(struct rec, i), 12);
	add(l, base + (long)offsetof(struct rec, s), 2);
}

static void constructors(void)
{
	static struct layout l;
	int tag = 100;
#define BEGIN(nm, cnt, elems)                                                                      \
	(memset(&l, 0, sizeof l), l.name = (nm), l.count = (cnt), l.elements = (elems))

	BEGIN("contiguous(5, int)", 2, 5);
	TU_MPI(MPI_Type_contiguous(5, MPI_INT, &l.type));
	add(&l, 0, 20);
	run_layout(&l, tag += 10);

	BEGIN("vector(4, 3, 5, double)", 2, 12);
	TU_MPI(MPI_Type_vector(4, 3, 5, MPI_DOUBLE, &l.type));
	for (int i = 0; i < 4; i++)
		add(&l, i * 5 * 8, 24);
	run_layout(&l, tag += 10);

	BEGIN("vector(3, 1, -2, int)", 2, 3);
	TU_MPI(MPI_Type_vector(3, 1, -2, MPI_INT, &l.type));
	for (int i = 0; i < 3; i++)
		add(&l, -8L * i, 4);
	run_layout(&l, tag += 10);

	BEGIN("hvector(3, 2, 100 bytes, short)", 2, 6);
	TU_MPI(MPI_Type_create_hvector(3, 2, 100, MPI_SHORT, &l.type));
	for (int i = 0; i < 3; i++)
		add(&l, 100L * i, 4);
	run_layout(&l, tag += 10);

	BEGIN("indexed({3,1,2}, {4,0,10}, int)", 2, 6);
	TU_MPI(
	    MPI_Type_indexed(3, (const int[]){3, 1, 2}, (const int[]){4, 0, 10}, MPI_INT, &l.type));
	add(&l, 16, 12);
	add(&l, 0, 4);
	add(&l, 40, 8);
	run_layout(&l, tag += 10);

	BEGIN("hindexed({2,1}, {24,3} bytes, float)", 3, 3);
	TU_MPI(MPI_Type_create_hindexed(2, (const int[]){2, 1}, (const MPI_Aint[]){24, 3},
	                                MPI_FLOAT, &l.type));
	add(&l, 24, 8);
	add(&l, 3, 4);
	run_layout(&l, tag += 10);

	BEGIN("indexed_block(2, {5,1,8}, int)", 2, 6);
	TU_MPI(MPI_Type_create_indexed_block(3, 2, (const int[]){5, 1, 8}, MPI_INT, &l.type));
	add(&l, 20, 8);
	add(&l, 4, 8);
	add(&l, 32, 8);
	run_layout(&l, tag += 10);

	BEGIN("struct {char; double; int[3]; short} (gaps)", 3, 6);
	l.type = rec_type();
	rec_ranges(&l, 0);
	run_layout(&l, tag += 10);

	BEGIN("vector(3, 2, 3, struct)", 2, 36);
	MPI_Datatype rec = rec_type();
	TU_MPI(MPI_Type_vector(3, 2, 3, rec, &l.type));
	TU_MPI(MPI_Type_free(&rec)); /* the vector keeps what it needs */
	for (int i = 0; i < 3; i++)
		for (int k = 0; k < 2; k++)
			rec_ranges(&l, (long)(i * 3 + k) * (long)sizeof(struct rec));
	run_layout(&l, tag += 10);

	BEGIN("subarray C {4,5,6} sub {2,3,2} at {1,1,3}, int", 2, 12);
	TU_MPI(MPI_Type_create_subarray(3, (const int[]){4, 5, 6}, (const int[]){2, 3, 2},
	                                (const int[]){1, 1, 3}, MPI_ORDER_C, MPI_INT, &l.type));
	for (int i = 1; i < 3; i++)
		for (int j = 1; j < 4; j++)
			add(&l, ((i * 5 + j) * 6 + 3) * 4L, 8);
	run_layout(&l, tag += 10);

	BEGIN("subarray Fortran {5,4} sub {2,3} at {2,1}, double", 2, 6);
	TU_MPI(MPI_Type_create_subarray(2, (const int[]){5, 4}, (const int[]){2, 3},
	                                (const int[]){2, 1}, MPI_ORDER_FORTRAN, MPI_DOUBLE,
	                                &l.type));
	for (int j = 1; j < 4; j++)
		add(&l, (j * 5 + 2) * 8L, 16);
	run_layout(&l, tag += 10);

	BEGIN("resized column of a 4x6 int matrix, extent 4", 3, 4);
	MPI_Datatype column;
	TU_MPI(MPI_Type_vector(4, 1, 6, MPI_INT, &column));
	TU_MPI(MPI_Type_create_resized(column, 0, 4, &l.type));
	TU_MPI(MPI_Type_free(&column));
	for (int i = 0; i < 4; i++)
		add(&l, i * 24L, 4);
	run_layout(&l, tag += 10);

	BEGIN("contiguous(3, resized(int, lb -4, extent 12))", 2, 3);
	MPI_Datatype padded;
	TU_MPI(MPI_Type_create_resized(MPI_INT, -4, 12, &padded));
	TU_MPI(MPI_Type_contiguous(3, padded, &l.type));
	TU_MPI(MPI_Type_free(&padded));
	for (int i = 0; i < 3; i++)
		add(&l, 12L * i, 4);
	run_layout(&l, tag += 10);

	BEGIN("dup(vector(2, 2, 3, short))", 2, 4);
	MPI_Datatype v;
	TU_MPI(MPI_Type_vector(2, 2, 3, MPI_SHORT, &v));
	TU_MPI(MPI_Type_dup(v, &l.type));
	TU_MPI(MPI_Type_free(&v));
	add(&l, 0, 4);
	add(&l, 6, 4);
	run_layout(&l, tag += 10);

	BEGIN("struct of a subarray and a vector", 1, 13);
	MPI_Datatype sub, vec, parts[2];
	TU_MPI(MPI_Type_create_subarray(2, (const int[]){3, 4}, (const int[]){2, 2},
	                                (const int[]){1, 2}, MPI_ORDER_C, MPI_INT, &sub));
	TU_MPI(MPI_Type_vector(5, 1, 2, MPI_CHAR, &vec));
	parts[0] = vec;
	parts[1] = sub;
	TU_MPI(MPI_Type_create_struct(2, (const int[]){1, 2}, (const MPI_Aint[]){-20, 100}, parts,
	                              &l.type));
	TU_MPI(MPI_Type_free(&sub));
	TU_MPI(MPI_Type_free(&vec));
	for (int i = 0; i < 5; i++)
		add(&l, -20 + 2 * i, 1);
	for (int k = 0; k < 2; k++)
		for (int i = 1; i < 3; i++)
			add(&l, 100 + 48L * k + (i * 4 + 2) * 4L, 8);
	run_layout(&l, tag += 10);
#undef BEGIN
}

/* MPI_Get_count / MPI_Get_elements when the message ends inside an item. */
static void partial_items(void)
{
	struct pair {
		int i;
		double d;
	};
	struct triple {
		int a;
		double b;
		int c;
	};
	MPI_Datatype pair_t, triple_t;
	TU_MPI(MPI_Type_create_struct(
	    2, (const int[]){1, 1},
	    (const MPI_Aint[]){offsetof(struct pair, i), offsetof(struct pair, d)},
	    (const MPI_Datatype[]){MPI_INT, MPI_DOUBLE}, &pair_t));
	TU_MPI(MPI_Type_create_struct(
	    3, (const int[]){1, 1, 1},
	    (const MPI_Aint[]){offsetof(struct triple, a), offsetof(struct triple, b),
	                       offsetof(struct triple, c)},
	    (const MPI_Datatype[]){MPI_INT, MPI_DOUBLE, MPI_INT}, &triple_t));
	TU_MPI(MPI_Type_commit(&pair_t));
	TU_MPI(MPI_Type_commit(&triple_t));
	if (tu_rank == 0) {
		struct pair two[2] = {{1, 1.5}, {2, 2.5}};
		struct triple one = {7, 7.5, 8};
		TU_MPI(MPI_Send(two, 2, pair_t, 1, 900, MPI_COMM_WORLD));
		TU_MPI(MPI_Send(&one, 1, triple_t, 1, 901, MPI_COMM_WORLD));
	} else if (tu_rank == 1) {
		struct pair got[3];
		MPI_Status st;
		int count, elements;
		memset(got, 0, sizeof got);
		TU_MPI(MPI_Recv(got, 3, pair_t, 0, 900, MPI_COMM_WORLD, &st));
		TU_MPI(MPI_Get_count(&st, pair_t, &count));
		TU_MPI(MPI_Get_elements(&st, pair_t, &elements));
		TU_CHECK(count == 2 && elements == 4 && got[1].i == 2 && got[1].d == 2.5,
		         "2 of 3 pairs: count %d elements %d", count, elements);
		memset(got, 0, sizeof got);
		TU_MPI(MPI_Recv(got, 3, pair_t, 0, 901, MPI_COMM_WORLD, &st));
		TU_MPI(MPI_Get_count(&st, pair_t, &count));
		TU_MPI(MPI_Get_elements(&st, pair_t, &elements));
		TU_CHECK(count == MPI_UNDEFINED && elements == 3,
		         "int,double,int as pairs: count %d elements %d", count, elements);
		TU_CHECK(got[0].i == 7 && got[0].d == 7.5 && got[1].i == 8 && got[1].d == 0,
		         "int,double,int as pairs: stored %d %g %d %g", got[0].i, got[0].d,
		         got[1].i, got[1].d);
	}
	if (tu_rank == 0)
		printf("partial items: Get_count MPI_UNDEFINED, Get_elements counts the whole "
		       "elements\n");
	TU_MPI(MPI_Type_free(&pair_t));
	TU_MPI(MPI_Type_free(&triple_t));
}

/* A type freed while a receive using it is pending still unpacks. */
static void free_while_pending(void)
{
	int data[12];
	for (int i = 0; i < 12; i++)
		data[i] = tu_rank == 0 ? 100 + i : -1;
	MPI_Datatype every_third;
	TU_MPI(MPI_Type_vector(4, 1, 3, MPI_INT, &every_third));
	TU_MPI(MPI_Type_commit(&every_third));
	if (tu_rank == 1) {
		MPI_Request req;
		TU_MPI(MPI_Irecv(data, 1, every_third, 0, 950, MPI_COMM_WORLD, &req));
		TU_MPI(MPI_Type_free(&every_third));
		TU_MPI(MPI_Send(NULL, 0, MPI_INT, 0, 951, MPI_COMM_WORLD));
		TU_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
		for (int i = 0; i < 12; i++)
			TU_CHECK(data[i] == (i % 3 == 0 ? 100 + i : -1), "data[%d] = %d", i,
			         data[i]);
	} else {
		if (tu_rank == 0) {
			TU_MPI(
			    MPI_Recv(NULL, 0, MPI_INT, 1, 951, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
			TU_MPI(MPI_Send(data, 1, every_third, 1, 950, MPI_COMM_WORLD));
			printf("a type freed while a receive using it is pending: data unpacked\n");
		}
		TU_MPI(MPI_Type_free(&every_third));
	}
}

int main(int argc, char **argv)
{
	tu_init(&argc, &argv, "dtype_layouts");
	tu_require_size(2, 64);
	constructors();
	partial_items();
	free_while_pending();
	if (tu_rank == 0)
		printf("dtype_layouts: all checks passed\n");
	return tu_finalize();
}
