/* A program whose control flow depends on MPI_Wtime, for the replay of
 * nondeterministic events.
 *
 * usage: ft_wtime ROUNDS [wtime|gettimeofday|time]
 *
 * The clock read is MPI_Wtime by default; gettimeofday and time (with rand
 * seeded from it) are the libc clocks an unmodified program uses, which
 * libchanmem logs the same way (client/libc_clocks.c).
 *
 * Each round, rank 0 reads the clock three times (a batch of events with no
 * send between), derives from the microsecond digits how many messages to
 * send (1 to 8) and sends that count, then the messages, to every other
 * rank. The other ranks receive what they are told. At the end rank 0 prints
 * every decision it made and every other rank what it received; a correct
 * replay makes them equal even when rank 0 was re-executed: the receivers
 * got the dead incarnation's decisions, the summary is the re-execution's.
 * Rank 0 also checks that MPI_Wtime never goes backwards.
 *
 *   FT_KILL_AT=I [FT_KILL_TIMES=K]  rank 0 raises SIGKILL after round I's
 *                                   sends (and one more MPI_Wtime, never
 *                                   sent anywhere) while CHANMEM_INCARNATION < K
 *                                   (default 1). */
#include <mpi.h>

#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#define MAX_ROUNDS 1000

static long env_long(const char *name, long def)
{
	const char *v = getenv(name);
	if (v == NULL || *v == '\0')
		return def;
	char *end;
	long x = strtol(v, &end, 10);
	return *end == '\0' ? x : def;
}

enum clock_source { SRC_WTIME, SRC_GETTIMEOFDAY, SRC_TIME };
static enum clock_source source = SRC_WTIME;

static double read_clock(void)
{
	struct timeval tv;
	switch (source) {
	case SRC_GETTIMEOFDAY:
		gettimeofday(&tv, NULL);
		return (double)tv.tv_sec + (double)tv.tv_usec * 1e-6;
	case SRC_TIME:
		/* Seconds only: the decision mixes in rand(), seeded from time()
		 * once (below), as programs do. */
		return (double)time(NULL);
	default:
		return MPI_Wtime();
	}
}

static double checked_wtime(double *last)
{
	double t = read_clock();
	if (t < *last) {
		fprintf(stderr, "ft_wtime: the clock went backwards: %.9f after %.9f\n", t, *last);
		MPI_Abort(MPI_COMM_WORLD, 3);
	}
	*last = t;
	return t;
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank, size;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	long rounds = argc > 1 ? strtol(argv[1], NULL, 10) : 10;
	const char *src = argc > 2 ? argv[2] : "wtime";
	source = strcmp(src, "gettimeofday") == 0 ? SRC_GETTIMEOFDAY
	         : strcmp(src, "time") == 0       ? SRC_TIME
	                                          : SRC_WTIME;
	if (rounds < 1 || rounds > MAX_ROUNDS || size < 2 ||
	    (source == SRC_WTIME && strcmp(src, "wtime") != 0)) {
		if (rank == 0)
			fprintf(stderr,
			        "usage: ft_wtime ROUNDS (1..%d) [wtime|gettimeofday|time], at "
			        "least 2 ranks\n",
			        MAX_ROUNDS);
		MPI_Finalize();
		return 2;
	}
	long kill_at = env_long("FT_KILL_AT", -1);
	long kill_times = env_long("FT_KILL_TIMES", 1);
	long incarnation = env_long("CHANMEM_INCARNATION", 0);

	int counts[MAX_ROUNDS];
	uint64_t checksum = 0;
	if (rank == 0) {
		double last = 0;
		if (source == SRC_TIME)
			srand((unsigned)time(NULL));
		for (long r = 0; r < rounds; r++) {
			double a = checked_wtime(&last);
			double b = checked_wtime(&last);
			double c = checked_wtime(&last);
			long us = (long)fmod((a + b + c) * 1e6, 1e6);
			if (source == SRC_TIME)
				us = (long)fmod(a + b + c, 1e6) + rand();
			int n = 1 + (int)(us % 8);
			counts[r] = n;
			printf("round %ld: %d messages\n", r, n);
			fflush(stdout);
			for (int dst = 1; dst < size; dst++) {
				MPI_Send(&n, 1, MPI_INT, dst, 1, MPI_COMM_WORLD);
				for (int i = 0; i < n; i++) {
					long v = r * 100 + i;
					MPI_Send(&v, 1, MPI_LONG, dst, 2, MPI_COMM_WORLD);
				}
			}
			if (r == kill_at && incarnation < kill_times) {
				checked_wtime(&last); /* logged or not, never used */
				raise(SIGKILL);
			}
		}
	} else {
		for (long r = 0; r < rounds; r++) {
			int n;
			MPI_Recv(&n, 1, MPI_INT, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			counts[r] = n;
			for (int i = 0; i < n; i++) {
				long v;
				MPI_Recv(&v, 1, MPI_LONG, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				if (v != r * 100 + i) {
					fprintf(stderr,
					        "ft_wtime: rank %d round %ld: got %ld, want %ld\n",
					        rank, r, v, r * 100 + i);
					MPI_Abort(MPI_COMM_WORLD, 4);
				}
				checksum = checksum * 31 + (uint64_t)v;
			}
		}
	}
	/* Every rank prints its own summary (the test compares them). */
	MPI_Barrier(MPI_COMM_WORLD);
	printf("rank %d counts:", rank);
	for (long r = 0; r < rounds; r++)
		printf(" %d", counts[r]);
	printf("\n");
	if (rank != 0)
		printf("rank %d checksum: %llu\n", rank, (unsigned long long)checksum);
	fflush(stdout);
	MPI_Finalize();
	return 0;
}
