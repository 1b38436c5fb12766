/* misc_env: the environment calls a benchmark touches.
 *
 * MPI_Get_version against MPI_VERSION/MPI_SUBVERSION, the library version
 * string, MPI_Wtime never going backwards and MPI_Wtick, MPI_Alloc_mem /
 * MPI_Free_mem, MPI_Comm_rank/size on MPI_COMM_SELF and a split
 * communicator. Any number of ranks; the expected output is for 3. */
#include "testutil.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
	tu_init(&argc, &argv, "misc_env");
	int version = -1, subversion = -1, len = -1;
	TU_MPI(MPI_Get_version(&version, &subversion));
	TU_CHECK(version == MPI_VERSION && subversion == MPI_SUBVERSION, "version %d.%d", version,
	         subversion);
	char lib[MPI_MAX_LIBRARY_VERSION_STRING];
	TU_MPI(MPI_Get_library_version(lib, &len));
	/* (Open MPI counts the terminating NUL in len, chanmem does not.) */
	TU_CHECK(len > 0 && len <= MPI_MAX_LIBRARY_VERSION_STRING && strlen(lib) > 0 &&
	             (int)strlen(lib) <= len,
	         "library version length %d", len);
	if (tu_rank == 0)
		printf(
		    "MPI_Get_version matches MPI_VERSION.MPI_SUBVERSION; library version named\n");

	double tick = MPI_Wtick(), last = MPI_Wtime(), first = last;
	TU_CHECK(tick > 0 && tick < 1, "MPI_Wtick %g", tick);
	for (int i = 0; i < 100000; i++) {
		double now = MPI_Wtime();
		TU_CHECK(now >= last, "MPI_Wtime went back from %.9f to %.9f", last, now);
		last = now;
	}
	tu_sleep_ms(20);
	TU_CHECK(MPI_Wtime() - first >= 0.015, "20 ms of sleep took %.6f s of MPI_Wtime",
	         MPI_Wtime() - first);
	if (tu_rank == 0)
		printf("MPI_Wtime: 100000 calls never went back, a 20 ms sleep shows\n");

	char *mem = NULL;
	TU_MPI(MPI_Alloc_mem(1 << 20, MPI_INFO_NULL, &mem));
	TU_CHECK(mem != NULL, "MPI_Alloc_mem gave NULL");
	memset(mem, 0x5a, 1 << 20);
	TU_MPI(MPI_Free_mem(mem));
	if (tu_rank == 0)
		printf("MPI_Alloc_mem: 1 MiB written and freed\n");

	int r = -1, n = -1;
	TU_MPI(MPI_Comm_rank(MPI_COMM_SELF, &r));
	TU_MPI(MPI_Comm_size(MPI_COMM_SELF, &n));
	TU_CHECK(r == 0 && n == 1, "MPI_COMM_SELF: rank %d of %d", r, n);
	MPI_Comm reversed;
	TU_MPI(MPI_Comm_split(MPI_COMM_WORLD, 0, tu_size - tu_rank, &reversed));
	TU_MPI(MPI_Comm_rank(reversed, &r));
	TU_MPI(MPI_Comm_size(reversed, &n));
	TU_CHECK(r == tu_size - 1 - tu_rank && n == tu_size, "reversed: rank %d of %d", r, n);
	TU_MPI(MPI_Comm_free(&reversed));
	if (tu_rank == 0)
		printf("MPI_Comm_rank/size on MPI_COMM_SELF and a split communicator\n");
	if (tu_rank == 0)
		printf("misc_env: all checks passed\n");
	return tu_finalize();
}
