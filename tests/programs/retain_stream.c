/* retain_stream: rank 0 streams messages at rank 1 in long one-way bursts,
 * the load that fills a rank's retention (conn.h: every MSG is kept until
 * its channel memory says it is logged) when that CM dies and the sender
 * goes on sending.
 *
 *   retain_stream [ROUNDS [SMALL_MIB [TINY]]]
 *
 * Each round (default 6) rank 0 sends, in this order:
 *   1. TINY (default 65536) messages of 64 bytes (MPI_Send: queued and
 *      copied at once; what they cost the sender is mostly bookkeeping),
 *   2. SMALL_MIB (default 256) MiB of 16 KiB messages (MPI_Send: eager,
 *      the send completes on a copy, so the sender runs ahead of its CM),
 *   3. 96 MiB of 48 KiB messages, 64 MPI_Isend at a time (MPI_Waitall),
 *   4. 128 messages of 1 MiB and 32 of 4 MiB (MPI_Send: large, the CM's
 *      LOGGED completes them, the user's buffer is what is kept).
 * Rank 1 receives them in order with MPI_Recv and checks every byte: a
 * message's content comes from (round, phase), and its first 8 bytes hold
 * its index in the phase, so a lost, repeated or reordered message is
 * caught. With the defaults the stream carries about 3.6 GiB.
 *
 * Rank 0 prints a deterministic summary on stdout. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TAG_FIRST = 100, WINDOW = 64, PHASES = 5 };

struct phase {
	size_t size;
	long count; /* 0: from the command line */
	int window; /* MPI_Isend this many at a time; 0: MPI_Send */
};

static const struct phase phases[PHASES] = {
    {64, 0, 0}, {16384, 0, 0}, {49152, 2048, WINDOW}, {1 << 20, 128, 0}, {4 << 20, 32, 0},
};
#define MAX_SIZE ((size_t)4 << 20)

static uint64_t seed_of(long round, int phase)
{
	return ((uint64_t)round << 8) | (uint64_t)phase | 0x5eed000000000000ull;
}

#define USAGE "[ROUNDS [SMALL_MIB [TINY]]]"

static void stamp(unsigned char *buf, uint64_t index)
{
	memcpy(buf, &index, sizeof index);
}

int main(int argc, char **argv)
{
	tu_init(&argc, &argv, "retain_stream");
	tu_require_size(2, 2);
	if (argc > 4)
		tu_arg_long(argv[4], 1, 0, "one argument too many", USAGE);
	long rounds =
	    argc > 1 ? tu_arg_long(argv[1], 1, 100000, "ROUNDS wants 1 to 100000", USAGE) : 6;
	long small_mib =
	    argc > 2 ? tu_arg_long(argv[2], 1, 65536, "SMALL_MIB wants 1 to 65536", USAGE) : 256;
	long tiny =
	    argc > 3 ? tu_arg_long(argv[3], 1, 1L << 30, "TINY wants 1 to 2^30", USAGE) : 65536;

	unsigned char *buf = malloc(MAX_SIZE), *expect = malloc(MAX_SIZE);
	/* The window of phase 3: one buffer per send in flight, each stamped. */
	unsigned char *wbuf = malloc((size_t)WINDOW * phases[2].size);
	MPI_Request req[WINDOW];
	TU_CHECK(buf && expect && wbuf, "out of memory");

	long messages = 0;
	uint64_t bytes = 0;
	for (long r = 0; r < rounds; r++) {
		for (int p = 0; p < PHASES; p++) {
			const struct phase *ph = &phases[p];
			long count = ph->count ? ph->count
			             : p == 0  ? tiny
			                       : (long)(small_mib << 20) / (long)ph->size;
			int tag = TAG_FIRST + p;
			uint64_t seed = seed_of(r, p);
			if (tu_rank == 1) {
				tu_fill(expect, ph->size, seed);
				for (long i = 0; i < count; i++) {
					MPI_Status st;
					int got = -1;
					TU_MPI(MPI_Recv(buf, (int)ph->size, MPI_BYTE, 0, tag,
					                MPI_COMM_WORLD, &st));
					TU_MPI(MPI_Get_count(&st, MPI_BYTE, &got));
					uint64_t index;
					memcpy(&index, buf, sizeof index);
					TU_CHECK(got >= 0 && (size_t)got == ph->size &&
					             index == (uint64_t)i &&
					             memcmp(buf + sizeof index,
					                    expect + sizeof index,
					                    ph->size - sizeof index) == 0,
					         "round %ld phase %d message %ld: %d bytes, index "
					         "%llu, content %s",
					         r, p, i, got, (unsigned long long)index,
					         memcmp(buf + sizeof index, expect + sizeof index,
					                ph->size - sizeof index) == 0
					             ? "right"
					             : "wrong");
				}
			} else if (ph->window == 0) {
				tu_fill(buf, ph->size, seed);
				for (long i = 0; i < count; i++) {
					stamp(buf, (uint64_t)i);
					TU_MPI(MPI_Send(buf, (int)ph->size, MPI_BYTE, 1, tag,
					                MPI_COMM_WORLD));
				}
			} else {
				for (int j = 0; j < ph->window; j++)
					tu_fill(wbuf + (size_t)j * ph->size, ph->size, seed);
				for (long i = 0; i < count; i += ph->window) {
					int n =
					    count - i < ph->window ? (int)(count - i) : ph->window;
					for (int j = 0; j < n; j++) {
						unsigned char *b = wbuf + (size_t)j * ph->size;
						stamp(b, (uint64_t)(i + j));
						TU_MPI(MPI_Isend(b, (int)ph->size, MPI_BYTE, 1, tag,
						                 MPI_COMM_WORLD, &req[j]));
					}
					TU_MPI(MPI_Waitall(n, req, MPI_STATUSES_IGNORE));
				}
			}
			messages += count;
			bytes += (uint64_t)count * ph->size;
		}
	}

	if (tu_rank == 0)
		printf("retain_stream: %ld rounds, %d phases, 64 B .. 4 MiB\n", rounds, PHASES);
	char line[160];
	snprintf(line, sizeof line, "rank %d: %ld messages, %llu bytes %s", tu_rank, messages,
	         (unsigned long long)bytes, tu_rank == 0 ? "sent" : "received, every byte checked");
	tu_print_ranked(line);
	free(buf);
	free(expect);
	free(wbuf);
	return tu_finalize();
}
