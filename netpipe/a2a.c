/* a2a: MPI_Alltoall throughput, the all-to-all benchmark of netpipe/a2a-bench.
 *
 *   a2a [-x] [ITERATIONS [BYTES]]      (defaults: 300 iterations, 1 MiB per pair)
 *
 * Every rank sends BYTES to every rank (itself included) with MPI_Alltoall,
 * ITERATIONS times after one untimed warm-up, and checks every byte it
 * received (-x: no check). A block's content comes from its sender and
 * receiver, with words from the iteration stamped at its start, middle and
 * end, so a block from an earlier iteration is caught. Rank 0 prints
 *
 *   a2a: N ranks, BYTES B per pair, ITERATIONS iterations, SECONDS s, MBPS Mbps per rank
 *
 * MBPS is the bytes a rank received from the others (its own block left
 * out) over the time, in NetPIPE's Mbps (bits / (s * 2^20)). Plain MPI: it
 * builds with cmcc and with any other mpicc. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t word_of(int sender, int receiver, long iteration, size_t offset)
{
	uint64_t x = ((uint64_t)sender << 48) ^ ((uint64_t)receiver << 32) ^
	             ((uint64_t)iteration << 8) ^ (uint64_t)offset * 0x9e3779b97f4a7c15ull;
	x ^= x >> 31;
	return x * 0xbf58476d1ce4e5b9ull;
}

/* The checked words of a block: its first, middle and last 8 bytes. */
static void stamp(unsigned char *block, size_t bytes, int sender, int receiver, long iteration)
{
	size_t at[3] = {0, bytes / 2 / 8 * 8, bytes - 8};
	for (int k = 0; k < 3; k++) {
		uint64_t w = word_of(sender, receiver, iteration, at[k]);
		memcpy(block + at[k], &w, 8);
	}
}

/* Byte j of the block rank `from` sends to rank `to`, before the stamps. */
static unsigned char base_byte(int from, int to, size_t bytes, size_t j)
{
	return (unsigned char)(((size_t)to * bytes + j) * 7 + (size_t)from);
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank, size, check = 1, argi = 1;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (argi < argc && strcmp(argv[argi], "-x") == 0) {
		check = 0;
		argi++;
	}
	long iterations = argi < argc ? strtol(argv[argi++], NULL, 10) : 300;
	long bytes_arg = argi < argc ? strtol(argv[argi++], NULL, 10) : 1 << 20;
	if (iterations < 1 || iterations > 1000000 || bytes_arg < 8 || bytes_arg > (1L << 28) ||
	    argi < argc) {
		if (rank == 0)
			fprintf(stderr,
			        "usage: a2a [-x] [ITERATIONS (1..1000000) [BYTES (8..2^28)]]\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	size_t bytes = (size_t)bytes_arg;
	size_t all = bytes * (size_t)size;
	unsigned char *sbuf = malloc(all), *rbuf = malloc(all), *expect = malloc(all);
	if (sbuf == NULL || rbuf == NULL || expect == NULL) {
		fprintf(stderr, "a2a: rank %d: out of memory for 3 x %d x %zu bytes\n", rank, size,
		        bytes);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	for (int peer = 0; peer < size; peer++)
		for (size_t j = 0; j < bytes; j++) {
			sbuf[(size_t)peer * bytes + j] = base_byte(rank, peer, bytes, j);
			expect[(size_t)peer * bytes + j] = base_byte(peer, rank, bytes, j);
		}

	double start = 0;
	for (long it = -1; it < iterations; it++) { /* -1: the warm-up */
		if (it == 0) {
			MPI_Barrier(MPI_COMM_WORLD);
			start = MPI_Wtime();
		}
		if (check)
			for (int to = 0; to < size; to++)
				stamp(sbuf + (size_t)to * bytes, bytes, rank, to, it);
		MPI_Alltoall(sbuf, (int)bytes, MPI_BYTE, rbuf, (int)bytes, MPI_BYTE,
		             MPI_COMM_WORLD);
		if (!check)
			continue;
		for (int from = 0; from < size; from++) {
			unsigned char *want = expect + (size_t)from * bytes;
			stamp(want, bytes, from, rank, it);
			if (memcmp(rbuf + (size_t)from * bytes, want, bytes) != 0) {
				fprintf(stderr,
				        "a2a: rank %d: iteration %ld: the block from rank %d is "
				        "wrong\n",
				        rank, it, from);
				MPI_Abort(MPI_COMM_WORLD, 3);
			}
		}
	}
	MPI_Barrier(MPI_COMM_WORLD);
	double seconds = MPI_Wtime() - start;
	if (rank == 0) {
		double received = (double)bytes * (size - 1) * (double)iterations;
		printf(
		    "a2a: %d ranks, %zu B per pair, %ld iterations, %.3f s, %.1f Mbps per rank%s\n",
		    size, bytes, iterations, seconds,
		    seconds > 0 ? received * 8 / seconds / (1024.0 * 1024.0) : 0.0,
		    check ? "" : " (unchecked)");
	}
	free(sbuf);
	free(rbuf);
	free(expect);
	MPI_Finalize();
	return 0;
}
