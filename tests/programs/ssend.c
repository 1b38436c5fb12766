/* ssend: a synchronous send completes only once its receive has started.
 *
 * 1. Rank 0 reads the clock, tells rank 1 to start, then Ssends. Rank 1,
 *    on "start", sleeps 200 ms, checks with Iprobe that rank 0 has not yet
 *    reported the Ssend done (a report that exists would be a certain
 *    violation), and only then posts the receive. Rank 0 then reports "done".
 *    Because rank 1's sleep starts causally after rank 0 read the clock, the
 *    Ssend cannot legally take less than the sleep: a lower bound, which no
 *    machine load can break. Done for 0 B, 1 KiB and 1 MiB messages.
 * 2. Ssend to self completes when an Irecv was posted before it.
 * 3. Ssend to a receive that is already posted (MPI_ANY_SOURCE) completes. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TAG_START = 1, TAG_DATA = 2, TAG_DONE = 3, TAG_SELF = 4, TAG_READY = 5, TAG_POSTED = 6 };
enum { SLEEP_MS = 200 };

static const int sizes[] = {0, 1024, 1024 * 1024};
#define NSIZES ((int)(sizeof(sizes) / sizeof(sizes[0])))

static void ssend_waits_for_receive(int size)
{
	unsigned char *buf = malloc((size_t)size + 1);
	TU_CHECK(buf, "out of memory");
	if (tu_rank == 0) {
		tu_fill(buf, (size_t)size, (uint64_t)size);
		double t0 = MPI_Wtime();
		TU_MPI(MPI_Send(NULL, 0, MPI_BYTE, 1, TAG_START, MPI_COMM_WORLD));
		TU_MPI(MPI_Ssend(buf, size, MPI_BYTE, 1, TAG_DATA, MPI_COMM_WORLD));
		double took = MPI_Wtime() - t0;
		TU_MPI(MPI_Send(NULL, 0, MPI_BYTE, 1, TAG_DONE, MPI_COMM_WORLD));
		/* 10 ms of slack for clock granularity only. */
		TU_CHECK(took >= SLEEP_MS / 1000.0 - 0.010,
		         "MPI_Ssend of %d bytes returned after %.3f s, before the receiver, "
		         "sleeping %d ms first, posted its receive",
		         size, took, SLEEP_MS);
	} else if (tu_rank == 1) {
		MPI_Status st;
		TU_MPI(
		    MPI_Recv(NULL, 0, MPI_BYTE, 0, TAG_START, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
		tu_sleep_ms(SLEEP_MS);
		int done_already = 1;
		TU_MPI(MPI_Iprobe(0, TAG_DONE, MPI_COMM_WORLD, &done_already, MPI_STATUS_IGNORE));
		TU_CHECK(!done_already,
		         "rank 0 reported its MPI_Ssend of %d bytes done before the receive was "
		         "posted",
		         size);
		TU_MPI(MPI_Recv(buf, size, MPI_BYTE, 0, TAG_DATA, MPI_COMM_WORLD, &st));
		int count = -1;
		TU_MPI(MPI_Get_count(&st, MPI_BYTE, &count));
		TU_CHECK(count == size && st.MPI_SOURCE == 0 && st.MPI_TAG == TAG_DATA,
		         "Ssend receive: count %d source %d tag %d", count, st.MPI_SOURCE,
		         st.MPI_TAG);
		long bad = tu_verify(buf, (size_t)size, (uint64_t)size);
		TU_CHECK(bad < 0, "Ssend of %d bytes: byte %ld differs", size, bad);
		TU_MPI(MPI_Recv(NULL, 0, MPI_BYTE, 0, TAG_DONE, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
	}
	free(buf);
}

static void ssend_to_self(void)
{
	int v = 1000 + tu_rank, w = -1;
	MPI_Request req;
	MPI_Status st;
	TU_MPI(MPI_Irecv(&w, 1, MPI_INT, tu_rank, TAG_SELF, MPI_COMM_WORLD, &req));
	TU_MPI(MPI_Ssend(&v, 1, MPI_INT, tu_rank, TAG_SELF, MPI_COMM_WORLD));
	TU_MPI(MPI_Wait(&req, &st));
	TU_CHECK(w == v && st.MPI_SOURCE == tu_rank && st.MPI_TAG == TAG_SELF,
	         "Ssend to self: value %d source %d tag %d", w, st.MPI_SOURCE, st.MPI_TAG);
}

/* Rank 1 posts an Irecv(ANY_SOURCE) first and says so; rank 0 then Ssends. */
static void ssend_to_posted_receive(void)
{
	enum { N = 4096 };
	int *buf = malloc(N * sizeof(int));
	TU_CHECK(buf, "out of memory");
	if (tu_rank == 0) {
		for (int i = 0; i < N; i++)
			buf[i] = i ^ 0x5a5a;
		TU_MPI(
		    MPI_Recv(NULL, 0, MPI_BYTE, 1, TAG_POSTED, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
		TU_MPI(MPI_Ssend(buf, N, MPI_INT, 1, TAG_READY, MPI_COMM_WORLD));
	} else if (tu_rank == 1) {
		MPI_Request req;
		MPI_Status st;
		TU_MPI(MPI_Irecv(buf, N, MPI_INT, MPI_ANY_SOURCE, TAG_READY, MPI_COMM_WORLD, &req));
		TU_MPI(MPI_Send(NULL, 0, MPI_BYTE, 0, TAG_POSTED, MPI_COMM_WORLD));
		TU_MPI(MPI_Wait(&req, &st));
		TU_CHECK(st.MPI_SOURCE == 0, "Ssend to a posted receive: source %d", st.MPI_SOURCE);
		for (int i = 0; i < N; i++)
			TU_CHECK(buf[i] == (i ^ 0x5a5a), "Ssend to a posted receive: word %d is %d",
			         i, buf[i]);
	}
	free(buf);
}

int main(int argc, char **argv)
{
	tu_init(&argc, &argv, "ssend");
	tu_require_size(2, 64);
	for (int i = 0; i < NSIZES; i++) {
		ssend_waits_for_receive(sizes[i]);
		if (tu_rank == 0)
			printf("ssend: %d bytes: completed only after the receive was posted\n",
			       sizes[i]);
	}
	ssend_to_self();
	TU_MPI(MPI_Barrier(MPI_COMM_WORLD));
	if (tu_rank == 0)
		printf("ssend: to self with a pre-posted MPI_Irecv: completed on every rank\n");
	ssend_to_posted_receive();
	TU_MPI(MPI_Barrier(MPI_COMM_WORLD));
	if (tu_rank == 0) {
		printf("ssend: to an already posted MPI_ANY_SOURCE receive: completed\n");
		printf("ssend: all checks passed\n");
	}
	return tu_finalize();
}
