/* pingpong_sizes: ranks 0 and 1 exchange every message size from 0 B to
 * 8 MiB + 3 and check every byte.
 *
 * Sizes: 0..64 one by one, then every power of two from 128 to 8 MiB with
 * -3, -1, +0, +1, +3 around it. For each size, three variants:
 *   blocking  - Send / Recv ping, then Send / Recv pong;
 *   nonblock  - Irecv posted before Isend, completed with Wait;
 *   sendrecv  - both ranks Sendrecv at once (both directions in flight).
 * The content depends on (size, direction, variant), so stale, shifted or
 * swapped data is caught. The receive buffer is larger than the message and
 * poisoned: Get_count must be exact and the bytes past the message untouched.
 * Other ranks (if any) only join the final Barrier. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TAG_PING = 11, TAG_PONG = 12, GUARD = 64, POISON = 0xa5 };
enum variant { V_BLOCKING, V_NONBLOCKING, V_SENDRECV, NVARIANTS };
static const char *const variant_names[NVARIANTS] = {"blocking", "nonblock", "sendrecv"};

#define MAX_SIZE ((size_t)8 * 1024 * 1024 + 3)

static size_t sizes[256];
static int nsizes;

static void build_sizes(void)
{
	for (size_t s = 0; s <= 64; s++)
		sizes[nsizes++] = s;
	static const int around[] = {-3, -1, 0, 1, 3};
	for (size_t p = 128; p <= (size_t)8 * 1024 * 1024; p *= 2)
		for (size_t i = 0; i < sizeof(around) / sizeof(around[0]); i++)
			sizes[nsizes++] = (size_t)((long)p + around[i]);
}

/* direction 0: rank 0 -> 1, direction 1: rank 1 -> 0 */
static uint64_t seed_of(size_t size, int direction, enum variant v)
{
	return ((uint64_t)size << 8) | ((uint64_t)v << 1) | (uint64_t)direction;
}

static unsigned char *sbuf, *rbuf;
static long messages_checked;

static void prepare_receive(size_t size)
{
	memset(rbuf, POISON, size + GUARD);
}

static void check_received(size_t size, int direction, enum variant v, const MPI_Status *st,
                           int tag)
{
	int peer = 1 - tu_rank;
	int count = -1;
	TU_MPI(MPI_Get_count(st, MPI_BYTE, &count));
	TU_CHECK(count >= 0 && (size_t)count == size, "%s size %zu: MPI_Get_count says %d",
	         variant_names[v], size, count);
	TU_CHECK(st->MPI_SOURCE == peer && st->MPI_TAG == tag,
	         "%s size %zu: status source %d tag %d, expected %d %d", variant_names[v], size,
	         st->MPI_SOURCE, st->MPI_TAG, peer, tag);
	long bad = tu_verify(rbuf, size, seed_of(size, direction, v));
	TU_CHECK(bad < 0, "%s size %zu direction %d: byte %ld differs", variant_names[v], size,
	         direction, bad);
	for (size_t i = size; i < size + GUARD; i++)
		TU_CHECK(rbuf[i] == POISON, "%s size %zu: byte %zu past the message was written",
		         variant_names[v], size, i - size);
	messages_checked++;
}

static void blocking_round(size_t size)
{
	int peer = 1 - tu_rank;
	int my_dir = tu_rank; /* direction of what I send */
	MPI_Status st;
	tu_fill(sbuf, size, seed_of(size, my_dir, V_BLOCKING));
	prepare_receive(size);
	if (tu_rank == 0) {
		TU_MPI(MPI_Send(sbuf, (int)size, MPI_BYTE, peer, TAG_PING, MPI_COMM_WORLD));
		TU_MPI(MPI_Recv(rbuf, (int)(size + GUARD), MPI_BYTE, peer, TAG_PONG, MPI_COMM_WORLD,
		                &st));
		check_received(size, 1, V_BLOCKING, &st, TAG_PONG);
	} else {
		TU_MPI(MPI_Recv(rbuf, (int)(size + GUARD), MPI_BYTE, peer, TAG_PING, MPI_COMM_WORLD,
		                &st));
		check_received(size, 0, V_BLOCKING, &st, TAG_PING);
		TU_MPI(MPI_Send(sbuf, (int)size, MPI_BYTE, peer, TAG_PONG, MPI_COMM_WORLD));
	}
}

static void nonblocking_round(size_t size)
{
	int peer = 1 - tu_rank;
	MPI_Request rreq, sreq;
	MPI_Status st;
	tu_fill(sbuf, size, seed_of(size, tu_rank, V_NONBLOCKING));
	prepare_receive(size);
	if (tu_rank == 0) {
		/* The pong receive is posted before the ping leaves. */
		TU_MPI(MPI_Irecv(rbuf, (int)(size + GUARD), MPI_BYTE, peer, TAG_PONG,
		                 MPI_COMM_WORLD, &rreq));
		TU_MPI(MPI_Isend(sbuf, (int)size, MPI_BYTE, peer, TAG_PING, MPI_COMM_WORLD, &sreq));
		TU_MPI(MPI_Wait(&sreq, MPI_STATUS_IGNORE));
		TU_CHECK(sreq == MPI_REQUEST_NULL, "MPI_Wait left the send request set");
		TU_MPI(MPI_Wait(&rreq, &st));
		TU_CHECK(rreq == MPI_REQUEST_NULL, "MPI_Wait left the receive request set");
		check_received(size, 1, V_NONBLOCKING, &st, TAG_PONG);
	} else {
		TU_MPI(MPI_Irecv(rbuf, (int)(size + GUARD), MPI_BYTE, peer, TAG_PING,
		                 MPI_COMM_WORLD, &rreq));
		TU_MPI(MPI_Wait(&rreq, &st));
		check_received(size, 0, V_NONBLOCKING, &st, TAG_PING);
		TU_MPI(MPI_Isend(sbuf, (int)size, MPI_BYTE, peer, TAG_PONG, MPI_COMM_WORLD, &sreq));
		TU_MPI(MPI_Wait(&sreq, MPI_STATUS_IGNORE));
	}
}

static void sendrecv_round(size_t size)
{
	int peer = 1 - tu_rank;
	MPI_Status st;
	tu_fill(sbuf, size, seed_of(size, tu_rank, V_SENDRECV));
	prepare_receive(size);
	/* Both directions at once: deadlocks if Sendrecv is a Send then a Recv. */
	TU_MPI(MPI_Sendrecv(sbuf, (int)size, MPI_BYTE, peer, TAG_PING, rbuf, (int)(size + GUARD),
	                    MPI_BYTE, peer, TAG_PING, MPI_COMM_WORLD, &st));
	check_received(size, peer, V_SENDRECV, &st, TAG_PING);
}

int main(int argc, char **argv)
{
	tu_init(&argc, &argv, "pingpong_sizes");
	tu_require_size(2, 1024);
	build_sizes();
	if (tu_rank <= 1) {
		sbuf = malloc(MAX_SIZE);
		rbuf = malloc(MAX_SIZE + GUARD);
		TU_CHECK(sbuf && rbuf, "out of memory");
		for (int i = 0; i < nsizes; i++) {
			blocking_round(sizes[i]);
			nonblocking_round(sizes[i]);
			sendrecv_round(sizes[i]);
		}
		TU_CHECK(messages_checked == (long)nsizes * 3, "checked %ld messages, expected %ld",
		         messages_checked, (long)nsizes * 3);
		if (tu_rank == 0) {
			printf("pingpong_sizes: %d sizes from %zu to %zu bytes\n", nsizes, sizes[0],
			       sizes[nsizes - 1]);
			printf(
			    "pingpong_sizes: variants blocking, nonblock, sendrecv: %ld messages "
			    "checked byte for byte\n",
			    messages_checked * 2);
		}
		free(sbuf);
		free(rbuf);
	}
	TU_MPI(MPI_Barrier(MPI_COMM_WORLD));
	if (tu_rank == 0)
		printf("pingpong_sizes: all checks passed\n");
	return tu_finalize();
}
