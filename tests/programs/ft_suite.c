/* ft_suite: deterministic MPI patterns for the fault-tolerance tests. A rank
 * can kill itself at a chosen point, on its first incarnations only, so a
 * test knows exactly where the failure happens:
 *
 *   ft_suite PATTERN [ITERATIONS]     PATTERN: ring, pingpong, alltoall, ssend,
 *                                     master (master/worker, MPI_ANY_SOURCE),
 *                                     big (8 MiB messages around a ring)
 *   FT_KILL_RANK=R[,R2...] FT_KILL_AT=I  these ranks raise SIGKILL at iteration I
 *                                     (together: "two ranks at once") ...
 *   FT_KILL_TIMES=K                   ... while CHANMEM_INCARNATION < K (default 1)
 *   FT_REKILL_AT=J                    incarnation 1 dies again at iteration J < I,
 *                                     while it is still being replayed
 *   FT_SLEEP_MS=M                     sleep M ms per iteration (random-kill runs)
 *   FT_KILL_HOLD_MS=H                 a dying rank leaves a child holding its CM
 *                                     connections open for H ms: its new
 *                                     incarnation's HELLO waits at the CM
 *
 * In big, the kill comes after the iteration's 8 MiB MPI_Isend was started
 * and before it is waited for: the rank dies in the middle of the transfer.
 *
 * Every rank prints one line per iteration (a running checksum of what it
 * received, content checked byte for byte) and rank 0 prints a summary
 * gathered with point-to-point messages. Run with --tag-output and a stable
 * sort on the tag, the output is the same on every run, with or without
 * failures. */
#include <mpi.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int rank, size;
static int kill_at = -1, kill_times = 1, rekill_at = -1, sleep_ms;
static int is_victim; /* this rank is in FT_KILL_RANK */

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
	int incarnation = env_int("CHANMEM_INCARNATION", 0);
	bool die = is_victim && ((iter == kill_at && incarnation < kill_times) ||
	                         (iter == rekill_at && incarnation == 1));
	if (die) {
		fflush(stdout);
		int hold_ms = env_int("FT_KILL_HOLD_MS", 0);
		if (hold_ms > 0 && fork() == 0) {
			/* Only the sockets stay open: the job's output pipes end. */
			close(0);
			close(1);
			close(2);
			struct timespec ts = {hold_ms / 1000, (long)(hold_ms % 1000) * 1000000L};
			nanosleep(&ts, NULL);
			_exit(0);
		}
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

/* Master/worker: each round rank 0 hands out TASKS tasks, one at a time, to
 * whichever worker asks first (MPI_ANY_SOURCE), and combines the results
 * commutatively, so what it prints does not depend on who did what. Workers
 * print only that they finished the round. */
#define TASKS 12
/* Per-round tags: a worker done with round i asks for round i+1's work while
 * the master still collects round i. */
#define TAG_ASK(round) (100 + 2 * (round))
#define TAG_TASK(round) (101 + 2 * (round))
#define STOP_TASK -1

static uint64_t task_result(int task, int round)
{
	unsigned char b[64];
	fill(b, sizeof b, task, round, round);
	return mix(14695981039346656037ull, b, sizeof b);
}

static uint64_t master_worker(int iters)
{
	uint64_t sum = 0;
	for (int it = 0; it < iters; it++) {
		maybe_die(it);
		if (rank == 0) {
			uint64_t round = 0;
			int handed = 0, stopped = 0;
			while (stopped < size - 1) {
				uint64_t
				    ask[2]; /* {result of the previous task or 0, task id + 1} */
				MPI_Status st;
				MPI_Recv(ask, 2, MPI_UINT64_T, MPI_ANY_SOURCE, TAG_ASK(it),
				         MPI_COMM_WORLD, &st);
				if (ask[1] != 0) {
					if (ask[0] != task_result((int)ask[1] - 1, it))
						fail("master: wrong result", it);
					round += ask[0];
				}
				int task = handed < TASKS ? handed++ : STOP_TASK;
				stopped += task == STOP_TASK;
				MPI_Send(&task, 1, MPI_INT, st.MPI_SOURCE, TAG_TASK(it),
				         MPI_COMM_WORLD);
			}
			sum += round;
			printf("master it %d sum %016llx\n", it, (unsigned long long)sum);
		} else {
			uint64_t ask[2] = {0, 0};
			for (;;) {
				MPI_Send(ask, 2, MPI_UINT64_T, 0, TAG_ASK(it), MPI_COMM_WORLD);
				int task;
				MPI_Recv(&task, 1, MPI_INT, 0, TAG_TASK(it), MPI_COMM_WORLD,
				         MPI_STATUS_IGNORE);
				if (task == STOP_TASK)
					break;
				ask[0] = task_result(task, it);
				ask[1] = (uint64_t)task + 1;
			}
			printf("worker it %d done\n", it);
		}
	}
	return rank == 0 ? sum : 0;
}

/* 8 MiB around a ring, Isend/Recv/Wait, every byte checked. */
#define BIG (8 << 20)

static uint64_t big_ring(int iters)
{
	uint64_t sum = 14695981039346656037ull;
	int next = (rank + 1) % size, prev = (rank + size - 1) % size;
	unsigned char *buf = malloc(BIG), *out = malloc(BIG);
	if (buf == NULL || out == NULL)
		fail("out of memory", 0);
	for (int it = 0; it < iters; it++) {
		int n = BIG - it; /* a different length each time */
		fill(out, n, rank, next, it);
		MPI_Request req;
		MPI_Isend(out, n, MPI_BYTE, next, it, MPI_COMM_WORLD, &req);
		maybe_die(it);
		MPI_Status st;
		MPI_Recv(buf, BIG, MPI_BYTE, prev, it, MPI_COMM_WORLD, &st);
		MPI_Wait(&req, MPI_STATUS_IGNORE);
		int count;
		MPI_Get_count(&st, MPI_BYTE, &count);
		if (count != n)
			fail("big count", it);
		check(buf, n, prev, rank, it);
		sum = mix(sum, buf, 4096);
		printf("big it %d sum %016llx\n", it, (unsigned long long)sum);
	}
	free(buf);
	free(out);
	return sum;
}

static bool listed(const char *list, int r)
{
	for (const char *p = list; p && *p;) {
		char *end;
		long v = strtol(p, &end, 10);
		if (end == p)
			return false;
		if (v == r)
			return true;
		p = *end == ',' ? end + 1 : end;
	}
	return false;
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	const char *pattern = argc > 1 ? argv[1] : "ring";
	int iters = argc > 2 ? atoi(argv[2]) : 50;
	is_victim = listed(getenv("FT_KILL_RANK"), rank);
	kill_at = env_int("FT_KILL_AT", -1);
	kill_times = env_int("FT_KILL_TIMES", 1);
	rekill_at = env_int("FT_REKILL_AT", -1);
	sleep_ms = env_int("FT_SLEEP_MS", 0);
	if (iters < 1 || iters > 100000 || (strcmp(pattern, "pingpong") == 0 && size < 2)) {
		if (rank == 0)
			fprintf(stderr, "usage: ft_suite ring|pingpong|alltoall|ssend|master|big"
			                " [1..100000]"
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
	else if (strcmp(pattern, "master") == 0)
		sum = master_worker(iters);
	else if (strcmp(pattern, "big") == 0)
		sum = big_ring(iters);
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
