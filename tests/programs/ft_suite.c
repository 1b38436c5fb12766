/* ft_suite: deterministic MPI patterns for the fault-tolerance tests. A rank
 * can kill itself at a chosen point, on its first incarnations only, so a
 * test knows exactly where the failure happens:
 *
 *   ft_suite PATTERN [ITERATIONS]     PATTERN: ring, pingpong, alltoall, ssend
 *   FT_KILL_RANK=R FT_KILL_AT=I       rank R raises SIGKILL at iteration I ...
 *   FT_KILL_TIMES=K                   ... while CHANMEM_INCARNATION < K (default 1)
 *   FT_SLEEP_MS=M                     sleep M ms per iteration (random-kill runs)
 *
 * Every rank prints one line per iteration (a running checksum of what it
 * received, content checked byte for byte) and rank 0 prints a summary
 * gathered with point-to-point messages. Run with --tag-output and a stable
 * sort on the tag, the output is the same on every run, with or without
 * failures. */
#include <mpi.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int rank, size;
static int kill_rank = -1, kill_at = -1, kill_times = 1, sleep_ms;

static int env_int(const char *name, int dflt)
{
	const char *v = getenv(name);
	return v && *v ? atoi(v) : dflt;
}

static void fail(const char *what, int iter)
{
	fprintf(stderr, "ft_suite: rank %d: FAIL: %s at iteration %d\n", rank, what, iter);
	MPI_Abort(MPI_COMM_WORLD, 3);
}

static void maybe_die(int iter)
{
	if (rank == kill_rank && iter == kill_at &&
	    env_int("CHANMEM_INCARNATION", 0) < kill_times) {
		fflush(stdout);
		raise(SIGKILL);
	}
	if (sleep_ms > 0) {
		struct timespec ts = {sleep_ms / 1000, (long)(sleep_ms % 1000) * 1000000L};
		nanosleep(&ts, NULL);
	}
}

/* Payload of (from, to, iter): every byte is checked. */
static void fill(unsigned char *b, int n, int from, int to, int iter)
{
	uint32_t x = (uint32_t)(from * 7919 + to * 104729 + iter * 31 + 1);
	for (int i = 0; i < n; i++) {
		x = x * 1103515245u + 12345u;
		b[i] = (unsigned char)(x >> 16);
	}
}

static void check(const unsigned char *b, int n, int from, int to, int iter)
{
	unsigned char *want = malloc((size_t)n + 1);
	fill(want, n, from, to, iter);
	if (memcmp(b, want, (size_t)n) != 0)
		fail("payload differs", iter);
	free(want);
}

static uint64_t mix(uint64_t sum, const unsigned char *b, int n)
{
	for (int i = 0; i < n; i++)
		sum = (sum ^ b[i]) * 0x100000001B3ull;
	return sum;
}

static int msg_size(int iter)
{
	return 1 + (iter * 997) % 20000;
}

static uint64_t ring(int iters)
{
	uint64_t sum = 14695981039346656037ull;
	int next = (rank + 1) % size, prev = (rank + size - 1) % size;
	unsigned char *buf = malloc(20001), *out = malloc(20001);
	for (int it = 0; it < iters; it++) {
		maybe_die(it);
		int n = msg_size(it);
		fill(out, n, rank, next, it);
		MPI_Status st;
		MPI_Sendrecv(out, n, MPI_BYTE, next, it, buf, 20001, MPI_BYTE, prev, it,
		             MPI_COMM_WORLD, &st);
		int count;
		MPI_Get_count(&st, MPI_BYTE, &count);
		if (count != n)
			fail("ring count", it);
		check(buf, n, prev, rank, it);
		sum = mix(sum, buf, n);
		printf("ring it %d sum %016llx\n", it, (unsigned long long)sum);
	}
	free(buf);
	free(out);
	return sum;
}

static uint64_t pingpong(int iters)
{
	uint64_t sum = 14695981039346656037ull;
	unsigned char *buf = malloc(20001);
	for (int it = 0; it < iters; it++) {
		maybe_die(it);
		int n = msg_size(it);
		if (rank == 0) {
			fill(buf, n, 0, 1, it);
			MPI_Send(buf, n, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
			MPI_Recv(buf, n, MPI_BYTE, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			check(buf, n, 1, 0, it);
		} else if (rank == 1) {
			MPI_Recv(buf, n, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			check(buf, n, 0, 1, it);
			fill(buf, n, 1, 0, it);
			MPI_Send(buf, n, MPI_BYTE, 0, 2, MPI_COMM_WORLD);
		}
		sum = mix(sum, buf, rank <= 1 ? n : 0);
		printf("pingpong it %d sum %016llx\n", it, (unsigned long long)sum);
	}
	free(buf);
	return sum;
}

/* Receives from MPI_ANY_SOURCE: which message each receive matched is
 * decided once and replayed; the checksum is order-independent. */
static uint64_t alltoall(int iters)
{
	uint64_t sum = 0;
	unsigned char *buf = malloc(4097), *out = malloc((size_t)size * 4097);
	MPI_Request *req = malloc((size_t)size * sizeof *req);
	for (int it = 0; it < iters; it++) {
		maybe_die(it);
		for (int p = 0; p < size; p++) {
			int n = 1 + (it * 131 + p * 17 + rank) % 4096;
			fill(out + (size_t)p * 4097, n, rank, p, it);
			MPI_Isend(out + (size_t)p * 4097, n, MPI_BYTE, p, it, MPI_COMM_WORLD,
			          &req[p]);
		}
		uint64_t round = 0;
		for (int k = 0; k < size; k++) {
			MPI_Status st;
			MPI_Recv(buf, 4097, MPI_BYTE, MPI_ANY_SOURCE, it, MPI_COMM_WORLD, &st);
			int count;
			MPI_Get_count(&st, MPI_BYTE, &count);
			if (count != 1 + (it * 131 + rank * 17 + st.MPI_SOURCE) % 4096)
				fail("alltoall count", it);
			check(buf, count, st.MPI_SOURCE, rank, it);
			round += mix(14695981039346656037ull, buf, count);
		}
		MPI_Waitall(size, req, MPI_STATUSES_IGNORE);
		sum += round;
		printf("alltoall it %d sum %016llx\n", it, (unsigned long long)sum);
	}
	free(buf);
	free(out);
	free(req);
	return sum;
}

/* A chain of synchronous sends: rank r Ssends to r+1 after receiving from
 * r-1, so every Ssend completion depends on a SYNC_ACK. */
static uint64_t ssend_chain(int iters)
{
	uint64_t sum = 14695981039346656037ull;
	unsigned char *buf = malloc(20001);
	for (int it = 0; it < iters; it++) {
		maybe_die(it);
		int n = msg_size(it);
		if (rank > 0) {
			MPI_Recv(buf, n, MPI_BYTE, rank - 1, it, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			check(buf, n, rank - 1, rank, it);
			sum = mix(sum, buf, n);
		}
		if (rank < size - 1) {
			fill(buf, n, rank, rank + 1, it);
			MPI_Ssend(buf, n, MPI_BYTE, rank + 1, it, MPI_COMM_WORLD);
		}
		printf("ssend it %d sum %016llx\n", it, (unsigned long long)sum);
	}
	free(buf);
	return sum;
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	const char *pattern = argc > 1 ? argv[1] : "ring";
	int iters = argc > 2 ? atoi(argv[2]) : 50;
	kill_rank = env_int("FT_KILL_RANK", -1);
	kill_at = env_int("FT_KILL_AT", -1);
	kill_times = env_int("FT_KILL_TIMES", 1);
	sleep_ms = env_int("FT_SLEEP_MS", 0);
	if (iters < 1 || iters > 100000 || (strcmp(pattern, "pingpong") == 0 && size < 2)) {
		if (rank == 0)
			fprintf(stderr, "usage: ft_suite ring|pingpong|alltoall|ssend [1..100000]"
			                " (pingpong needs 2 ranks)\n");
		MPI_Finalize();
		return 2;
	}

	uint64_t sum;
	if (strcmp(pattern, "ring") == 0)
		sum = ring(iters);
	else if (strcmp(pattern, "pingpong") == 0)
		sum = pingpong(iters);
	else if (strcmp(pattern, "alltoall") == 0)
		sum = alltoall(iters);
	else if (strcmp(pattern, "ssend") == 0)
		sum = ssend_chain(iters);
	else
		fail("unknown pattern", 0), sum = 0;

	/* Summary at rank 0, point to point only. */
	if (rank == 0) {
		printf("summary %s %d ranks %d iterations\n", pattern, size, iters);
		printf("rank 0 final %016llx\n", (unsigned long long)sum);
		for (int p = 1; p < size; p++) {
			unsigned long long v;
			MPI_Recv(&v, 1, MPI_UNSIGNED_LONG_LONG, p, 30000, MPI_COMM_WORLD,
			         MPI_STATUS_IGNORE);
			printf("rank %d final %016llx\n", p, v);
		}
	} else {
		unsigned long long v = sum;
		MPI_Send(&v, 1, MPI_UNSIGNED_LONG_LONG, 0, 30000, MPI_COMM_WORLD);
	}
	MPI_Finalize();
	return 0;
}
