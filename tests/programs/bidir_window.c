/* bidir_window: two ranks stream at each other with a window of messages in
 * flight both ways, the way a bandwidth benchmark does, and check every byte.
 *
 *   bidir_window [-b] [-x] [ITERATIONS [MAX_BYTES [WINDOW]]]
 *
 * For every size from 1 byte to MAX_BYTES (default 4 MiB), doubling, each
 * rank ITERATIONS times (default 4): posts WINDOW (default 64) MPI_Irecv of
 * that size from its peer, then WINDOW MPI_Isend of that size to it, then
 * MPI_Waitall on all of them. Both ranks do it at once, so a channel memory
 * sees 2 x WINDOW messages of the size arriving before any is received:
 * the load that makes its log grow fastest.
 *
 * A message's content comes from (sender, size, iteration), so stale data
 * from an earlier iteration or size, or the peer's own message echoed back,
 * is caught; every received byte is compared, with its count, source and
 * tag. The WINDOW sends of one iteration share one buffer (MPI-3 lets
 * concurrent sends read the same memory): the receive buffers, WINDOW x
 * MAX_BYTES, are what the ranks need.
 *
 * Rank 0 prints a deterministic summary on stdout. -b also prints each
 * size's bidirectional bandwidth on stderr (bytes both ways over the time,
 * the checking included unless -x); -x leaves the check out. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TAG_FIRST = 100, MAX_WINDOW = 1024 };
#define MAX_MAX_BYTES ((size_t)1 << 30)

/* Distinct for every sender, size (its power of two) and iteration. */
static uint64_t seed_of(int sender, int size_log2, long iteration)
{
	return ((uint64_t)sender << 56) | ((uint64_t)size_log2 << 48) | (uint64_t)iteration;
}

static void __attribute__((noreturn)) bad_args(const char *why, const char *text)
{
	if (tu_rank == 0)
		fprintf(stderr,
		        "usage: bidir_window [-b] [-x] [ITERATIONS [MAX_BYTES [WINDOW]]]\n"
		        "bidir_window: %s: '%s'\n",
		        why, text);
	MPI_Abort(MPI_COMM_WORLD, 2);
	exit(2);
}

static long parse_arg(const char *text, long min, long max, const char *what)
{
	char *end;
	long v = strtol(text, &end, 10);
	if (end == text || *end != '\0' || v < min || v > max)
		bad_args(what, text);
	return v;
}

int main(int argc, char **argv)
{
	tu_init(&argc, &argv, "bidir_window");
	tu_require_size(2, 2);
	int print_bandwidth = 0, check = 1, argi = 1;
	for (; argi < argc && argv[argi][0] == '-'; argi++) {
		if (strcmp(argv[argi], "-b") == 0)
			print_bandwidth = 1;
		else if (strcmp(argv[argi], "-x") == 0)
			check = 0;
		else
			bad_args("unknown option", argv[argi]);
	}
	long iterations =
	    argi < argc ? parse_arg(argv[argi++], 1, 1000000, "ITERATIONS wants 1 to 1000000") : 4;
	size_t max_bytes = argi < argc ? (size_t)parse_arg(argv[argi++], 1, (long)MAX_MAX_BYTES,
	                                                   "MAX_BYTES wants 1 to 2^30")
	                               : (size_t)4 << 20;
	int window = argi < argc
	                 ? (int)parse_arg(argv[argi++], 1, MAX_WINDOW, "WINDOW wants 1 to 1024")
	                 : 64;
	if (argi < argc)
		bad_args("one argument too many", argv[argi]);

	int peer = 1 - tu_rank;
	unsigned char *sbuf = malloc(max_bytes), *expect = malloc(max_bytes);
	unsigned char **rbuf = calloc((size_t)window, sizeof *rbuf);
	MPI_Request *req = calloc(2 * (size_t)window, sizeof *req);
	MPI_Status *st = calloc(2 * (size_t)window, sizeof *st);
	TU_CHECK(sbuf && expect && rbuf && req && st, "out of memory");
	for (int j = 0; j < window; j++) {
		rbuf[j] = malloc(max_bytes);
		TU_CHECK(rbuf[j] != NULL, "out of memory for %d receive buffers of %zu bytes",
		         window, max_bytes);
	}

	long received = 0, sizes = 0;
	uint64_t bytes = 0;
	int size_log2 = 0;
	for (size_t size = 1; size <= max_bytes; size *= 2, size_log2++) {
		TU_MPI(MPI_Barrier(MPI_COMM_WORLD));
		double start = MPI_Wtime();
		for (long it = 0; it < iterations; it++) {
			if (check || it == 0)
				tu_fill(sbuf, size, seed_of(tu_rank, size_log2, it));
			/* Receives first: each send of the window finds its receive
			 * posted, as in a bandwidth benchmark. */
			for (int j = 0; j < window; j++)
				TU_MPI(MPI_Irecv(rbuf[j], (int)size, MPI_BYTE, peer, TAG_FIRST + j,
				                 MPI_COMM_WORLD, &req[j]));
			for (int j = 0; j < window; j++)
				TU_MPI(MPI_Isend(sbuf, (int)size, MPI_BYTE, peer, TAG_FIRST + j,
				                 MPI_COMM_WORLD, &req[window + j]));
			TU_MPI(MPI_Waitall(2 * window, req, st));
			received += window;
			bytes += (uint64_t)window * size;
			if (!check)
				continue;
			uint64_t seed = seed_of(peer, size_log2, it);
			tu_fill(expect, size, seed);
			for (int j = 0; j < window; j++) {
				int count = -1;
				TU_MPI(MPI_Get_count(&st[j], MPI_BYTE, &count));
				TU_CHECK(
				    count >= 0 && (size_t)count == size &&
				        st[j].MPI_SOURCE == peer && st[j].MPI_TAG == TAG_FIRST + j,
				    "size %zu iteration %ld message %d: count %d source %d tag %d",
				    size, it, j, count, st[j].MPI_SOURCE, st[j].MPI_TAG);
				if (memcmp(rbuf[j], expect, size) != 0)
					tu_fail(
					    "size %zu iteration %ld message %d: byte %ld differs "
					    "from what rank %d sent",
					    size, it, j, tu_verify(rbuf[j], size, seed), peer);
			}
		}
		double seconds = MPI_Wtime() - start;
		sizes++;
		if (print_bandwidth && tu_rank == 0)
			fprintf(stderr, "bidir_window: %9zu B x %d x %ld: %10.1f MB/s both ways\n",
			        size, window, iterations,
			        seconds > 0 ? 2.0 * (double)window * (double)size *
			                          (double)iterations / seconds / 1e6
			                    : 0.0);
	}

	if (tu_rank == 0)
		printf("bidir_window: window %d, %ld sizes 1..%zu bytes, %ld iterations each\n",
		       window, sizes, max_bytes, iterations);
	char line[160];
	snprintf(line, sizeof line, "rank %d: %ld messages, %llu bytes received%s", tu_rank,
	         received, (unsigned long long)bytes, check ? ", every byte checked" : "");
	tu_print_ranked(line);
	for (int j = 0; j < window; j++)
		free(rbuf[j]);
	free(rbuf);
	free(req);
	free(st);
	free(sbuf);
	free(expect);
	return tu_finalize();
}
