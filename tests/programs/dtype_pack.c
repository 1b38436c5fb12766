/* dtype_pack: MPI_Pack, MPI_Unpack, MPI_Pack_size.
 *
 * - Pack_size of basic and derived types;
 * - a message built from several MPI_Pack calls (an int count, a vector of
 *   doubles, an array of structs, a 3-D subarray), sent as MPI_PACKED,
 *   unpacked piece by piece by the receiver into other layouts;
 * - local round trips: pack from one layout, unpack into another, every
 *   byte checked, gaps untouched;
 * - a long strided vector sent, received contiguously and strided;
 * - packing into too small a buffer and unpacking past the end fail.
 * Needs 2 ranks (others idle). */
#include "testutil.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct particle {
	double pos[3];
	int id;
	char tag;
};

static MPI_Datatype particle_type(void)
{
	MPI_Datatype t;
	TU_MPI(MPI_Type_create_struct(3, (const int[]){3, 1, 1},
	                              (const MPI_Aint[]){offsetof(struct particle, pos),
	                                                 offsetof(struct particle, id),
	                                                 offsetof(struct particle, tag)},
	                              (const MPI_Datatype[]){MPI_DOUBLE, MPI_INT, MPI_CHAR}, &t));
	TU_MPI(MPI_Type_commit(&t));
	return t;
}

enum { NX = 6, NY = 5, NZ = 4 };

/* The 2 x 3 x 2 block at (1, 1, 2) of an NX x NY x NZ int array. */
static MPI_Datatype block_type(void)
{
	MPI_Datatype t;
	TU_MPI(MPI_Type_create_subarray(3, (const int[]){NX, NY, NZ}, (const int[]){2, 3, 2},
	                                (const int[]){1, 1, 2}, MPI_ORDER_C, MPI_INT, &t));
	TU_MPI(MPI_Type_commit(&t));
	return t;
}

static int in_block(int x, int y, int z)
{
	return x >= 1 && x < 3 && y >= 1 && y < 4 && z >= 2 && z < 4;
}

int main(int argc, char **argv)
{
	tu_init(&argc, &argv, "dtype_pack");
	tu_require_size(2, 64);
	MPI_Datatype particle = particle_type(), block = block_type(), every_other;
	TU_MPI(MPI_Type_vector(5, 1, 2, MPI_DOUBLE, &every_other));
	TU_MPI(MPI_Type_commit(&every_other));

	int s_int, s_vec, s_part, s_block;
	TU_MPI(MPI_Pack_size(1, MPI_INT, MPI_COMM_WORLD, &s_int));
	TU_MPI(MPI_Pack_size(2, every_other, MPI_COMM_WORLD, &s_vec));
	TU_MPI(MPI_Pack_size(4, particle, MPI_COMM_WORLD, &s_part));
	TU_MPI(MPI_Pack_size(1, block, MPI_COMM_WORLD, &s_block));
	TU_CHECK(s_int >= 4 && s_vec >= 80 && s_part >= 4 * 29 && s_block >= 48,
	         "Pack_size too small: %d %d %d %d", s_int, s_vec, s_part, s_block);
	int cap = s_int + s_vec + s_part + s_block;
	char packed[1024];
	TU_CHECK(cap <= (int)sizeof packed, "Pack_size total %d", cap);

	double vec[20];
	struct particle parts[4];
	int cube[NX][NY][NZ];
	if (tu_rank == 0) {
		int n = 4, pos = 0;
		for (int i = 0; i < 20; i++)
			vec[i] = i + 0.25;
		memset(parts, 0, sizeof parts);
		for (int i = 0; i < 4; i++)
			parts[i] = (struct particle){{i, i + 0.5, -i}, 100 + i, (char)('a' + i)};
		for (int x = 0; x < NX; x++)
			for (int y = 0; y < NY; y++)
				for (int z = 0; z < NZ; z++)
					cube[x][y][z] = x * 100 + y * 10 + z;
		TU_MPI(MPI_Pack(&n, 1, MPI_INT, packed, cap, &pos, MPI_COMM_WORLD));
		TU_MPI(MPI_Pack(vec, 2, every_other, packed, cap, &pos, MPI_COMM_WORLD));
		TU_MPI(MPI_Pack(parts, 4, particle, packed, cap, &pos, MPI_COMM_WORLD));
		TU_MPI(MPI_Pack(cube, 1, block, packed, cap, &pos, MPI_COMM_WORLD));
		TU_MPI(MPI_Send(packed, pos, MPI_PACKED, 1, 1, MPI_COMM_WORLD));
		printf("packed an int, 2 vectors, 4 structs and a 3-D block into one message\n");
	} else if (tu_rank == 1) {
		MPI_Status st;
		int len, n = -1, pos = 0;
		TU_MPI(MPI_Recv(packed, (int)sizeof packed, MPI_PACKED, 0, 1, MPI_COMM_WORLD, &st));
		TU_MPI(MPI_Get_count(&st, MPI_PACKED, &len));
		/* The vectors land contiguously, the block at the origin of a
		 * smaller array: other layouts than the sender's. */
		double flat[10];
		int small[2][3][2];
		TU_MPI(MPI_Unpack(packed, len, &pos, &n, 1, MPI_INT, MPI_COMM_WORLD));
		TU_CHECK(n == 4, "unpacked count %d", n);
		TU_MPI(MPI_Unpack(packed, len, &pos, flat, 10, MPI_DOUBLE, MPI_COMM_WORLD));
		for (int k = 0; k < 2; k++)
			for (int i = 0; i < 5; i++)
				TU_CHECK(flat[k * 5 + i] == (k * 9 + 2 * i) + 0.25, "flat[%d] = %g",
				         k * 5 + i, flat[k * 5 + i]);
		memset(parts, 0x5a, sizeof parts);
		TU_MPI(MPI_Unpack(packed, len, &pos, parts, n, particle, MPI_COMM_WORLD));
		for (int i = 0; i < 4; i++)
			TU_CHECK(parts[i].pos[1] == i + 0.5 && parts[i].id == 100 + i &&
			             parts[i].tag == 'a' + i,
			         "particle %d", i);
		TU_MPI(MPI_Unpack(packed, len, &pos, small, 12, MPI_INT, MPI_COMM_WORLD));
		for (int x = 0; x < 2; x++)
			for (int y = 0; y < 3; y++)
				for (int z = 0; z < 2; z++)
					TU_CHECK(small[x][y][z] ==
					             (x + 1) * 100 + (y + 1) * 10 + z + 2,
					         "block (%d,%d,%d) = %d", x, y, z, small[x][y][z]);
		TU_CHECK(pos == len, "unpacked %d of %d bytes", pos, len);
	}
	if (tu_rank == 0)
		printf("unpacked piece by piece into other layouts: every value in place\n");

	/* Local round trip: block of one cube -> packed -> same block of a
	 * fresh cube; nothing outside the block written. */
	for (int x = 0; x < NX; x++)
		for (int y = 0; y < NY; y++)
			for (int z = 0; z < NZ; z++)
				cube[x][y][z] = 7000 + x * 100 + y * 10 + z;
	int pos = 0, out[NX][NY][NZ];
	TU_MPI(MPI_Pack(cube, 1, block, packed, s_block, &pos, MPI_COMM_WORLD));
	TU_CHECK(pos == 48, "packed block: %d bytes", pos);
	memset(out, 0xff, sizeof out);
	pos = 0;
	TU_MPI(MPI_Unpack(packed, s_block, &pos, out, 1, block, MPI_COMM_WORLD));
	for (int x = 0; x < NX; x++)
		for (int y = 0; y < NY; y++)
			for (int z = 0; z < NZ; z++)
				TU_CHECK(out[x][y][z] == (in_block(x, y, z) ? cube[x][y][z] : -1),
				         "round trip (%d,%d,%d) = %d", x, y, z, out[x][y][z]);
	if (tu_rank == 0)
		printf("local round trip of a 3-D block: block copied, the rest untouched\n");

	/* A long vector (one run, however long): every other double of 2 x
	 * 150000, received once contiguously and once into the same vector. */
	enum { LONG = 150000 };
	MPI_Datatype strided;
	TU_MPI(MPI_Type_vector(LONG, 1, 2, MPI_DOUBLE, &strided));
	TU_MPI(MPI_Type_commit(&strided));
	double *wide = malloc(2 * LONG * sizeof *wide), *dense = malloc(LONG * sizeof *dense);
	TU_CHECK(wide && dense, "out of memory");
	if (tu_rank == 0) {
		for (int i = 0; i < 2 * LONG; i++)
			wide[i] = i;
		TU_MPI(MPI_Send(wide, 1, strided, 1, 2, MPI_COMM_WORLD));
		TU_MPI(MPI_Send(wide, 1, strided, 1, 3, MPI_COMM_WORLD));
		printf("a vector of %d doubles at stride 2: received contiguous and strided\n",
		       LONG);
	} else if (tu_rank == 1) {
		TU_MPI(MPI_Recv(dense, LONG, MPI_DOUBLE, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
		for (int i = 0; i < LONG; i++)
			TU_CHECK(dense[i] == 2.0 * i, "dense[%d] = %g", i, dense[i]);
		for (int i = 0; i < 2 * LONG; i++)
			wide[i] = -1;
		TU_MPI(MPI_Recv(wide, 1, strided, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
		for (int i = 0; i < 2 * LONG; i++)
			TU_CHECK(wide[i] == (i % 2 ? -1 : i), "wide[%d] = %g", i, wide[i]);
	}
	free(wide);
	free(dense);
	TU_MPI(MPI_Type_free(&strided));

	/* Errors: no room to pack, nothing left to unpack. */
	TU_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
	pos = 0;
	int rc_pack = MPI_Pack(cube, 1, block, packed, s_block - 1, &pos, MPI_COMM_WORLD);
	pos = 0;
	int rc_unpack = MPI_Unpack(packed, 40, &pos, out, 1, block, MPI_COMM_WORLD);
	TU_CHECK(rc_pack != MPI_SUCCESS && rc_unpack != MPI_SUCCESS,
	         "packing into too small a buffer: %s, unpacking past the end: %s",
	         tu_err_name(rc_pack), tu_err_name(rc_unpack));
	TU_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
	if (tu_rank == 0)
		printf("packing into too small a buffer and unpacking past the end fail\n");

	TU_MPI(MPI_Type_free(&particle));
	TU_MPI(MPI_Type_free(&block));
	TU_MPI(MPI_Type_free(&every_other));
	if (tu_rank == 0)
		printf("dtype_pack: all checks passed\n");
	return tu_finalize();
}
