/* coalesce: small sends that the cm transport queues to leave with the next
 * frame (client/transport_cm_coalesce.c) still arrive, and arrive in order,
 * whatever the program does next.
 *
 * Phase 1, ping-pong: rank 0 sends a numbered message and waits for the
 * echo, ROUNDS times (each send rides with the receive request after it).
 * Phase 2, stream: rank 0 sends BURST messages back to back, then one
 * receive collects rank 1's sum (batches of queued messages).
 * Phase 3, silence: rank 0 sends one message and then stops calling MPI: it
 * polls for a file rank 1 creates once the message has arrived, for at most
 * STALL_LIMIT seconds. Only the flusher thread can write that message; if it
 * did not, rank 0 reports the message stuck (and the test fails). Then
 * phase 1 once more (sends right after a late flush go out at once).
 * Rank 0 prints one line per phase. */
#include "testutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { ROUNDS = 300, BURST = 100, STALL_LIMIT = 20, TAG_PING = 1, TAG_STREAM = 2, TAG_LATE = 3 };

static long pingpong(int rounds, int base)
{
	long sum = 0;
	for (int i = 0; i < rounds; i++) {
		int v = base + i;
		if (tu_rank == 0) {
			TU_MPI(MPI_Send(&v, 1, MPI_INT, 1, TAG_PING, MPI_COMM_WORLD));
			int echo = -1;
			TU_MPI(MPI_Recv(&echo, 1, MPI_INT, 1, TAG_PING, MPI_COMM_WORLD,
			                MPI_STATUS_IGNORE));
			TU_CHECK(echo == 2 * v, "round %d: echo %d, expected %d", i, echo, 2 * v);
			sum += echo;
		} else {
			int got = -1;
			TU_MPI(MPI_Recv(&got, 1, MPI_INT, 0, TAG_PING, MPI_COMM_WORLD,
			                MPI_STATUS_IGNORE));
			TU_CHECK(got == v, "round %d: got %d, expected %d", i, got, v);
			got *= 2;
			TU_MPI(MPI_Send(&got, 1, MPI_INT, 0, TAG_PING, MPI_COMM_WORLD));
		}
	}
	return sum;
}

static long stream(void)
{
	long sum = 0;
	if (tu_rank == 0) {
		for (int i = 0; i < BURST; i++)
			TU_MPI(MPI_Send(&i, 1, MPI_INT, 1, TAG_STREAM, MPI_COMM_WORLD));
		TU_MPI(
		    MPI_Recv(&sum, 1, MPI_LONG, 1, TAG_STREAM, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
	} else {
		for (int i = 0; i < BURST; i++) {
			int got = -1;
			TU_MPI(MPI_Recv(&got, 1, MPI_INT, 0, TAG_STREAM, MPI_COMM_WORLD,
			                MPI_STATUS_IGNORE));
			TU_CHECK(got == i, "stream message %d arrived as %d", i, got);
			sum += got;
		}
		TU_MPI(MPI_Send(&sum, 1, MPI_LONG, 0, TAG_STREAM, MPI_COMM_WORLD));
	}
	return sum;
}

/* Rank 0 computes (no MPI call) until rank 1 has the message. */
static int silence(const char *flag)
{
	char text[32] = "sent before a silence";
	if (tu_rank == 0) {
		TU_MPI(MPI_Send(text, (int)sizeof text, MPI_CHAR, 1, TAG_LATE, MPI_COMM_WORLD));
		struct timespec pause = {.tv_sec = 0, .tv_nsec = 1000000};
		for (int i = 0; i < STALL_LIMIT * 1000; i++) {
			if (access(flag, F_OK) == 0)
				return 1;
			nanosleep(&pause, NULL);
		}
		return 0;
	}
	char got[32] = "";
	TU_MPI(MPI_Recv(got, (int)sizeof got, MPI_CHAR, 0, TAG_LATE, MPI_COMM_WORLD,
	                MPI_STATUS_IGNORE));
	TU_CHECK(strcmp(got, text) == 0, "late message '%.31s'", got);
	FILE *f = fopen(flag, "w");
	TU_CHECK(f != NULL, "cannot create %s: %s", flag, strerror(errno));
	fclose(f);
	return 1;
}

int main(int argc, char **argv)
{
	tu_init(&argc, &argv, "coalesce");
	TU_CHECK(tu_size == 2, "needs 2 ranks, not %d", tu_size);
	TU_CHECK(argc == 2, "usage: coalesce FLAG_FILE");
	long first = pingpong(ROUNDS, 0);
	long streamed = stream();
	int arrived = silence(argv[1]);
	long second = pingpong(ROUNDS, ROUNDS);
	if (tu_rank == 0) {
		printf("ping-pong: %d rounds, sum %ld\n", ROUNDS, first);
		printf("stream: %d messages, sum %ld\n", BURST, streamed);
		printf("silence: %s\n", arrived ? "the message arrived while rank 0 computed"
		                                : "the message was stuck while rank 0 computed");
		printf("ping-pong again: %d rounds, sum %ld\n", ROUNDS, second);
	}
	MPI_Finalize();
	return arrived ? 0 : 1;
}
