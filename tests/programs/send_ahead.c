/* send_ahead: a sender far ahead of its receiver, with small sends that
 * complete on a copy: what a rank may queue must stay bounded (conn.h:
 * CM_QUEUE_MAX), and a send held back must not deadlock ranks that send
 * to each other.
 *
 *   send_ahead COUNT PAUSE_MS [both|mixed]
 *
 * Rank 0 sends COUNT messages of 64 bytes to rank 1, alternately MPI_Send
 * and MPI_Isend + MPI_Wait. Rank 1 first sleeps PAUSE_MS outside MPI
 * (nothing reads for it meanwhile), then receives them in order with
 * MPI_Recv. With "both", rank 1 then sends COUNT messages the same way
 * (after its sleep) before it receives, and rank 0 receives them after
 * sending its own: both ranks send without receiving, and each one's
 * sends may have to wait for the other to take in what it queued.
 * With "mixed", small and large messages in one stream (rank 0 to rank
 * 1): of every 64, one is 1 MiB, 15 are 16 KiB and 48 are 64 bytes, so
 * both the bookkeeping of many messages and the copies of large ones are
 * what the sender may pile up (the replication transport copies every
 * message it sends, whatever its size).
 * Every message holds its index in its first 8 bytes and a pattern of
 * its sender after them; the receiver checks both, so a lost, repeated,
 * reordered or damaged message is caught.
 *
 * Rank 0 prints a deterministic summary on stdout. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TAG = 7, SIZE = 64, MEDIUM = 16 << 10, LARGE = 1 << 20 };

#define USAGE "COUNT PAUSE_MS [both|mixed]"

static int mixed;

static size_t size_of(long i)
{
	if (!mixed)
		return SIZE;
	if (i % 64 == 63)
		return LARGE;
	return i % 4 == 3 ? MEDIUM : SIZE;
}

static uint64_t seed_of(int sender)
{
	return 0xa4eadull << 8 | (uint64_t)sender;
}

static unsigned char *alloc_buf(size_t len)
{
	unsigned char *buf = malloc(len);
	TU_CHECK(buf != NULL, "out of memory for %zu bytes", len);
	return buf;
}

static void send_all(long count, int to)
{
	size_t max = mixed ? LARGE : SIZE;
	unsigned char *buf = alloc_buf(max);
	tu_fill(buf, max, seed_of(tu_rank));
	for (long i = 0; i < count; i++) {
		uint64_t index = (uint64_t)i;
		int len = (int)size_of(i);
		memcpy(buf, &index, sizeof index);
		if (i % 2 == 0) {
			TU_MPI(MPI_Send(buf, len, MPI_BYTE, to, TAG, MPI_COMM_WORLD));
		} else {
			MPI_Request req;
			TU_MPI(MPI_Isend(buf, len, MPI_BYTE, to, TAG, MPI_COMM_WORLD, &req));
			TU_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
		}
	}
	free(buf);
}

static void receive_all(long count, int from)
{
	size_t max = mixed ? LARGE : SIZE;
	unsigned char *buf = alloc_buf(max), *expect = alloc_buf(max);
	tu_fill(expect, max, seed_of(from));
	for (long i = 0; i < count; i++) {
		MPI_Status st;
		int got = -1;
		size_t want = size_of(i);
		TU_MPI(MPI_Recv(buf, (int)max, MPI_BYTE, from, TAG, MPI_COMM_WORLD, &st));
		TU_MPI(MPI_Get_count(&st, MPI_BYTE, &got));
		uint64_t index;
		memcpy(&index, buf, sizeof index);
		int right = got == (int)want && memcmp(buf + sizeof index, expect + sizeof index,
		                                       want - sizeof index) == 0;
		TU_CHECK(right && index == (uint64_t)i,
		         "message %ld from rank %d: %d bytes (want %zu), index %llu, content %s", i,
		         from, got, want, (unsigned long long)index, right ? "right" : "wrong");
	}
	free(buf);
	free(expect);
}

int main(int argc, char **argv)
{
	tu_init(&argc, &argv, "send_ahead");
	tu_require_size(2, 2);
	if (argc < 3 || argc > 4 ||
	    (argc == 4 && strcmp(argv[3], "both") != 0 && strcmp(argv[3], "mixed") != 0))
		tu_arg_long(argc == 4 ? argv[3] : "", 1, 0, "want COUNT PAUSE_MS [both|mixed]",
		            USAGE);
	long count = tu_arg_long(argv[1], 1, 1L << 30, "COUNT wants 1 to 2^30", USAGE);
	int pause_ms = (int)tu_arg_long(argv[2], 0, 600000, "PAUSE_MS wants 0 to 600000", USAGE);
	int both = argc == 4 && strcmp(argv[3], "both") == 0;
	mixed = argc == 4 && !both;

	long sent = 0, received = 0;
	if (tu_rank == 0) {
		send_all(count, 1);
		sent = count;
		if (both) {
			receive_all(count, 1);
			received = count;
		}
	} else {
		tu_sleep_ms(pause_ms);
		if (both) {
			send_all(count, 0);
			sent = count;
		}
		receive_all(count, 0);
		received = count;
	}

	if (tu_rank == 0 && mixed)
		printf("send_ahead: %ld messages of %d bytes to %d MiB from rank 0 to rank 1\n",
		       count, SIZE, LARGE >> 20);
	else if (tu_rank == 0)
		printf("send_ahead: %ld messages of %d bytes %s\n", count, SIZE,
		       both ? "each way" : "from rank 0 to rank 1");
	char line[160];
	snprintf(line, sizeof line, "rank %d: %ld sent, %ld received, every byte checked", tu_rank,
	         sent, received);
	tu_print_ranked(line);
	return tu_finalize();
}
