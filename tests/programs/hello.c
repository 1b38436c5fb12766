/* hello: the basic environment calls and a token passed around a ring.
 *
 * Checks Init/Initialized/Finalized, Comm_rank/size, Get_processor_name,
 * Get_version against mpi.h, Wtime monotonic and advancing across a sleep,
 * Wtick > 0, then passes a token 0 -> 1 -> ... -> 0, each rank adding its
 * rank + 1 and checking what it received. Rank 0 prints "hello from R of N"
 * for every rank, in rank order, and the ring's result. */
#include "testutil.h"

#include <stdio.h>
#include <string.h>

enum { TAG_RING = 1 };

static void check_processor_name(void)
{
	char name[MPI_MAX_PROCESSOR_NAME + 1];
	int len = -1;
	memset(name, 0x7f, sizeof(name));
	TU_MPI(MPI_Get_processor_name(name, &len));
	TU_CHECK(len > 0 && len < MPI_MAX_PROCESSOR_NAME, "processor name length %d", len);
	TU_CHECK(name[len] == '\0' && (int)strlen(name) == len,
	         "processor name not terminated at its length %d", len);
}

static void check_version(void)
{
	int version = -1, subversion = -1;
	TU_MPI(MPI_Get_version(&version, &subversion));
	TU_CHECK(version == MPI_VERSION && subversion == MPI_SUBVERSION,
	         "MPI_Get_version %d.%d, mpi.h says %d.%d", version, subversion, MPI_VERSION,
	         MPI_SUBVERSION);
}

static void check_clock(void)
{
	double tick = MPI_Wtick();
	TU_CHECK(tick > 0.0 && tick < 1.0, "MPI_Wtick %g", tick);
	double prev = MPI_Wtime();
	for (int i = 0; i < 10000; i++) {
		double now = MPI_Wtime();
		TU_CHECK(now >= prev, "MPI_Wtime went back: %.9f after %.9f", now, prev);
		prev = now;
	}
	/* A lower bound only: a sleep lasts at least what was asked, however
	 * loaded the machine is. One tick plus 1 ms of slack for rounding. */
	double before = MPI_Wtime();
	tu_sleep_ms(20);
	double elapsed = MPI_Wtime() - before;
	TU_CHECK(elapsed >= 0.020 - tick - 0.001, "MPI_Wtime advanced %.6f s across a 20 ms sleep",
	         elapsed);
}

/* Returns the token rank 0 gets back (only meaningful on rank 0). */
static long pass_ring_token(void)
{
	int next = (tu_rank + 1) % tu_size;
	int prev = (tu_rank + tu_size - 1) % tu_size;
	long token = 0;
	MPI_Status st;
	if (tu_rank == 0) {
		/* Isend so that a 1-rank ring (a message to self) cannot block. */
		MPI_Request req;
		long start = 1;
		TU_MPI(MPI_Isend(&start, 1, MPI_LONG, next, TAG_RING, MPI_COMM_WORLD, &req));
		TU_MPI(MPI_Recv(&token, 1, MPI_LONG, prev, TAG_RING, MPI_COMM_WORLD, &st));
		TU_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
	} else {
		TU_MPI(MPI_Recv(&token, 1, MPI_LONG, prev, TAG_RING, MPI_COMM_WORLD, &st));
		long expected = (long)tu_rank * (tu_rank + 1) / 2;
		TU_CHECK(token == expected, "ring token %ld from rank %d, expected %ld", token,
		         prev, expected);
		token += tu_rank + 1;
		TU_MPI(MPI_Send(&token, 1, MPI_LONG, next, TAG_RING, MPI_COMM_WORLD));
	}
	TU_CHECK(st.MPI_SOURCE == prev && st.MPI_TAG == TAG_RING, "ring status source %d tag %d",
	         st.MPI_SOURCE, st.MPI_TAG);
	return token;
}

int main(int argc, char **argv)
{
	tu_init(&argc, &argv, "hello");
	int flag = -1;
	TU_MPI(MPI_Initialized(&flag));
	TU_CHECK(flag == 1, "MPI_Initialized after MPI_Init gave %d", flag);
	TU_CHECK(tu_size >= 1 && tu_rank >= 0 && tu_rank < tu_size, "rank %d of size %d", tu_rank,
	         tu_size);
	int self_rank = -1, self_size = -1;
	TU_MPI(MPI_Comm_rank(MPI_COMM_SELF, &self_rank));
	TU_MPI(MPI_Comm_size(MPI_COMM_SELF, &self_size));
	TU_CHECK(self_rank == 0 && self_size == 1, "MPI_COMM_SELF: rank %d size %d", self_rank,
	         self_size);

	check_processor_name();
	check_version();
	check_clock();

	char line[64];
	snprintf(line, sizeof(line), "hello from %d of %d", tu_rank, tu_size);
	tu_print_ranked(line);

	long token = pass_ring_token();
	if (tu_rank == 0) {
		long expected = (long)tu_size * (tu_size + 1) / 2;
		TU_CHECK(token == expected, "ring token came back as %ld, expected %ld", token,
		         expected);
		printf("ring: token passed through %d ranks, came back as %ld\n", tu_size, token);
	}
	TU_MPI(MPI_Barrier(MPI_COMM_WORLD));
	if (tu_rank == 0)
		printf("hello: all checks passed\n");
	return tu_finalize();
}
