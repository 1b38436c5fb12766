/* collbench: the time of one collective call, the program of netpipe/coll-bench.
 *
 *   collbench [-x] [-i] [-r ROUNDS] [-t SECONDS] [-l LOWER] [-u UPPER] [COLLECTIVE...]
 *
 * COLLECTIVE: bcast, reduce, allreduce, allgather, alltoall (default: all five). For each
 * size from LOWER to UPPER bytes (default 1 .. 65536, doubling), it calls the collective in
 * ROUNDS rounds (default 5) of about SECONDS each (default 0.02; at least 3 calls), and
 * rank 0 prints the best round's time per call (the slowest rank's) in microseconds:
 *
 *   collbench COLLECTIVE BYTES USEC
 *
 * BYTES is the message of the call as the OSU benchmarks count it: the vector of bcast,
 * reduce and allreduce (MPI_UNSIGNED_CHAR, MPI_BXOR, root 0), the block of each rank for
 * allgather, the block of each pair for alltoall. (Not MPI_SUM: Open MPI 4.1's AVX op
 * component saturates unsigned char sums instead of wrapping them.) After the timed rounds of each
 * size, one more call is checked against its expected result on every rank (-x: not checked).
 * -i: on an inter-communicator between the even and the odd ranks (at least 2) instead of
 * MPI_COMM_WORLD: bcast and reduce between world rank 0 and the odd ranks, allreduce, allgather
 * and alltoall across the two groups (BYTES per block, from and to each remote process). Plain
 * MPI: it builds with cmcc and with any other mpicc. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum coll { BCAST, REDUCE, ALLREDUCE, ALLGATHER, ALLTOALL, NCOLL };
static const char *const names[NCOLL] = {"bcast", "reduce", "allreduce", "allgather", "alltoall"};

static int rank, size;
static unsigned char *sbuf, *rbuf;
/* The communicator timed; with -i an inter-communicator, where this rank is rank `me`
 * of the even (color 0) or odd ranks and `peers` processes form the other group. */
static MPI_Comm comm = MPI_COMM_WORLD;
static int inter, color, me, peers;

/* World rank of process k of the group the collectives address. */
static int peer_world(int k)
{
	return inter ? 2 * k + 1 - color : k;
}

/* The root argument of this rank: world rank 0 is the root. */
static int root_arg(void)
{
	if (!inter)
		return 0;
	return color == 1 ? 0 : rank == 0 ? MPI_ROOT : MPI_PROC_NULL;
}

static void call(enum coll c, int n)
{
	switch (c) {
	case BCAST:
		MPI_Bcast(sbuf, n, MPI_UNSIGNED_CHAR, root_arg(), comm);
		break;
	case REDUCE:
		MPI_Reduce(sbuf, rbuf, n, MPI_UNSIGNED_CHAR, MPI_BXOR, root_arg(), comm);
		break;
	case ALLREDUCE:
		MPI_Allreduce(sbuf, rbuf, n, MPI_UNSIGNED_CHAR, MPI_BXOR, comm);
		break;
	case ALLGATHER:
		MPI_Allgather(sbuf, n, MPI_UNSIGNED_CHAR, rbuf, n, MPI_UNSIGNED_CHAR, comm);
		break;
	case ALLTOALL:
		MPI_Alltoall(sbuf, n, MPI_UNSIGNED_CHAR, rbuf, n, MPI_UNSIGNED_CHAR, comm);
		break;
	default:
		break;
	}
}

/* Input byte j of rank r (for alltoall: of its block for rank j / n). */
static unsigned char input(int r, size_t j)
{
	return (unsigned char)(j * 31 + (size_t)r * 7 + 1);
}

static void fill(enum coll c, int n)
{
	size_t len = c == ALLTOALL ? (size_t)n * (size_t)size : (size_t)n;
	for (size_t j = 0; j < len; j++)
		sbuf[j] = c == BCAST && rank != 0 ? 0 : input(rank, j);
}

/* 0 if this rank's result of the last call is right. */
static int check(enum coll c, int n)
{
	size_t un = (size_t)n;
	for (size_t j = 0; j < un * (size_t)peers; j++) {
		unsigned char want = 0, got;
		switch (c) {
		case BCAST: /* on an inter-communicator, the root's group receives nothing */
			if (j >= un || (inter && color == 0))
				return 0;
			want = input(0, j), got = sbuf[j];
			break;
		case REDUCE:
		case ALLREDUCE:
			if (j >= un || (c == REDUCE && rank != 0))
				return 0;
			for (int k = 0; k < peers; k++)
				want ^= input(peer_world(k), j);
			got = rbuf[j];
			break;
		case ALLGATHER:
			want = input(peer_world((int)(j / un)), j % un), got = rbuf[j];
			break;
		default: /* block j / n came from that process, which sent its block for us */
			want = input(peer_world((int)(j / un)), (size_t)me * un + j % un),
			got = rbuf[j];
			break;
		}
		if (got != want) {
			fprintf(stderr, "collbench: rank %d: %s of %d B: byte %zu is %u, not %u\n",
			        rank, names[c], n, j, got, want);
			return 1;
		}
	}
	return 0;
}

/* Seconds per call of a round of iters calls: the slowest rank's. */
static double round_time(enum coll c, int n, long iters)
{
	MPI_Barrier(MPI_COMM_WORLD);
	double t0 = MPI_Wtime();
	for (long i = 0; i < iters; i++)
		call(c, n);
	double t = (MPI_Wtime() - t0) / (double)iters, slowest;
	MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	return slowest;
}

static void usage_exit(void)
{
	if (rank == 0)
		fprintf(stderr, "usage: collbench [-x] [-i (2 ranks or more)] [-r ROUNDS (1..100)] "
		                "[-t SECONDS (0.001..10)] "
		                "[-l LOWER] [-u UPPER (1..2^24)] "
		                "[bcast|reduce|allreduce|allgather|alltoall]...\n");
	MPI_Abort(MPI_COMM_WORLD, 2);
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	int verify = 1, rounds = 5, chosen[NCOLL] = {0}, any = 0;
	double trial = 0.02;
	long lower = 1, upper = 65536;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "-x") == 0) {
			verify = 0;
		} else if (strcmp(a, "-i") == 0) {
			inter = 1;
		} else if ((!strcmp(a, "-r") || !strcmp(a, "-t") || !strcmp(a, "-l") ||
		            !strcmp(a, "-u")) &&
		           i + 1 < argc) {
			char *end;
			double v = strtod(argv[++i], &end);
			if (*end)
				usage_exit();
			if (a[1] == 'r')
				rounds = (int)v;
			else if (a[1] == 't')
				trial = v;
			else if (a[1] == 'l')
				lower = (long)v;
			else
				upper = (long)v;
		} else {
			int k = 0;
			while (k < NCOLL && strcmp(a, names[k]) != 0)
				k++;
			if (k == NCOLL)
				usage_exit();
			chosen[k] = any = 1;
		}
	}
	if (rounds < 1 || rounds > 100 || !(trial >= 0.001 && trial <= 10) || lower < 1 ||
	    upper < lower || upper > (1L << 24) || (inter && size < 2))
		usage_exit();
	me = rank, peers = size;
	if (inter) {
		MPI_Comm half;
		color = rank % 2;
		MPI_Comm_split(MPI_COMM_WORLD, color, rank, &half);
		MPI_Comm_rank(half, &me);
		MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, 1 - color, 1, &comm);
		MPI_Comm_remote_size(comm, &peers);
		MPI_Comm_free(&half);
	}
	size_t cap = (size_t)upper * (size_t)size;
	sbuf = malloc(cap);
	rbuf = malloc(cap);
	if (!sbuf || !rbuf) {
		fprintf(stderr, "collbench: rank %d: out of memory for 2 x %zu bytes\n", rank, cap);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	for (int c = 0; c < NCOLL; c++) {
		if (any && !chosen[c])
			continue;
		for (long n = lower; n <= upper; n *= 2) {
			fill(c, (int)n);
			/* calls per round: from a short calibration, the same on every rank */
			double once = round_time(c, (int)n, 3);
			long iters = once > 0 ? (long)(trial / once) : 1000;
			iters = iters < 3 ? 3 : iters > 100000 ? 100000 : iters;
			double best = 0;
			for (int r = 0; r < rounds; r++) {
				double t = round_time(c, (int)n, iters);
				if (r == 0 || t < best)
					best = t;
			}
			if (verify) {
				fill(c, (int)n);
				memset(rbuf, 0, cap);
				call(c, (int)n);
				int bad = check(c, (int)n), anybad;
				MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
				if (anybad)
					MPI_Abort(MPI_COMM_WORLD, 3);
			}
			if (rank == 0) {
				printf("collbench %s %ld %.3f\n", names[c], n, best * 1e6);
				fflush(stdout);
			}
		}
	}
	free(sbuf);
	free(rbuf);
	if (inter)
		MPI_Comm_free(&comm);
	MPI_Finalize();
	return 0;
}
