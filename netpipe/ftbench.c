/* ftbench: what fault tolerance costs (not a test; netpipe/ftbench runs it).
 *
 *   ftbench restart DIR      rank 1 exchanges a few messages with rank 0, writes the
 *                            time (CLOCK_REALTIME, ns) to DIR/kill.ns and raises SIGKILL
 *                            on its first incarnation; the re-execution writes the time
 *                            MPI_Init returned to DIR/up.ns: kill -> restarted rank
 *                            connected (and its event log fetched).
 *   ftbench replay MIB       rank 0 sends MIB 1 MiB messages to rank 1, which receives them
 *                            all, writes its receive rate (KB/s) to $FTBENCH_DIR/rate.0,
 *                            and dies at the end of its first incarnation; the
 *                            re-execution receives them again from the log and writes
 *                            the replay rate to rate.1.
 *   ftbench events N         rank 0 runs N iterations of MPI_Wtime + MPI_Iprobe (nothing to
 *                            find) and every 64th iteration a 1-byte ping-pong with rank 1;
 *                            prints ns per iteration. Run with event recording on and off
 *                            (CHANMEM_EVENTS=off) and over the direct transport.
 *   ftbench ckptio MIB DIR   every rank computes MIB MiB of state (a smooth field of
 *                            doubles with noise in the low bits: a solver's state, not
 *                            zeros), registers it and checkpoints once (rank 0 times it:
 *                            DIR/save.ns), then rank 0 dies (DIR/kill.ns). Its restart
 *                            restores the image (DIR/load.ns: MPI_Init with the fetch,
 *                            and the copy back) or, without --ckpt-dir, computes the
 *                            state again; DIR/resumed.ns says when it was back.
 *   ftbench ring STEPS KIB   every rank sends KIB KiB around a ring each step and calls
 *                            chanmem_checkpoint (2 or more ranks): the CM's memory over
 *                            time with checkpoints (log collected) and without.
 *
 * Only standard MPI calls apart from chanmem_checkpoint (chanmem.h, built
 * with -DCHANMEM), so the rest builds with any mpicc. */
#include <mpi.h>
#ifdef CHANMEM
#include <chanmem.h>
#endif

#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int rank, size;

static long long now_ns(clockid_t clock)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int incarnation(void)
{
	const char *v = getenv("CHANMEM_INCARNATION");
	return v ? atoi(v) : 0;
}

static void write_ns(const char *dir, const char *name, long long ns)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	if (f == NULL || fprintf(f, "%lld\n", ns) < 0 || fclose(f) != 0) {
		perror(path);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
}

static void restart(const char *dir, long long init_done)
{
	if (rank == 1 && incarnation() > 0)
		write_ns(dir, "up.ns", init_done);
	int token = 0;
	for (int i = 0; i < 10; i++) {
		if (rank == 0) {
			MPI_Send(&token, 1, MPI_INT, 1, 1, MPI_COMM_WORLD);
			MPI_Recv(&token, 1, MPI_INT, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		} else if (rank == 1) {
			MPI_Recv(&token, 1, MPI_INT, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			token++;
			MPI_Send(&token, 1, MPI_INT, 0, 2, MPI_COMM_WORLD);
		}
	}
	if (rank == 1 && incarnation() == 0) {
		write_ns(dir, "kill.ns", now_ns(CLOCK_REALTIME));
		raise(SIGKILL);
	}
	if (rank == 0)
		printf("restart: token %d\n", token);
}

#define MIB (1 << 20)

/* Message i of the replay run: every byte depends on i and its place. */
static void message_fill(char *buf, int i)
{
	for (size_t k = 0; k < MIB; k += 8) {
		uint64_t v = ((uint64_t)i << 32) ^ (k * 0x9E3779B97F4A7C15ull);
		memcpy(buf + k, &v, 8);
	}
}

static bool message_ok(const char *buf, int i)
{
	for (size_t k = 0; k < MIB; k += 8) {
		uint64_t v = ((uint64_t)i << 32) ^ (k * 0x9E3779B97F4A7C15ull);
		if (memcmp(buf + k, &v, 8) != 0)
			return false;
	}
	return true;
}

static void replay(const char *dir, int mib)
{
	char *buf = malloc(MIB);
	if (buf == NULL)
		MPI_Abort(MPI_COMM_WORLD, 2);
	if (rank == 0) {
		for (int i = 0; i < mib; i++) {
			message_fill(buf, i);
			MPI_Send(buf, MIB, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
		}
	} else if (rank == 1) {
		long long t0 = now_ns(CLOCK_MONOTONIC), checking = 0;
		for (int i = 0; i < mib; i++) {
			MPI_Recv(buf, MIB, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			/* Every byte, replayed or not; the check is not timed. */
			long long c0 = now_ns(CLOCK_MONOTONIC);
			if (!message_ok(buf, i)) {
				fprintf(stderr,
				        "ftbench replay: message %d differs (incarnation %d)\n", i,
				        incarnation());
				MPI_Abort(MPI_COMM_WORLD, 4);
			}
			checking += now_ns(CLOCK_MONOTONIC) - c0;
		}
		double s = (double)(now_ns(CLOCK_MONOTONIC) - t0 - checking) / 1e9;
		/* To a file: cmrun drops as many bytes of a re-execution's output as
		 * the dead incarnation printed (they would be repeats). */
		char name[32];
		snprintf(name, sizeof name, "rate.%d", incarnation());
		write_ns(dir, name, (long long)((double)mib * MIB / 1e3 / s)); /* KB/s */
		if (incarnation() == 0)
			raise(SIGKILL);
	}
	free(buf);
}

static void events(long n)
{
	int flag, token = 0;
	double sink = 0;
	MPI_Barrier(MPI_COMM_WORLD);
	long long t0 = now_ns(CLOCK_MONOTONIC);
	if (rank == 0) {
		for (long i = 0; i < n; i++) {
			sink += MPI_Wtime();
			MPI_Iprobe(1, 99, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
			if (flag)
				MPI_Abort(MPI_COMM_WORLD, 3); /* nobody sends tag 99 */
			if (i % 64 == 63) {
				MPI_Send(&token, 1, MPI_INT, 1, 1, MPI_COMM_WORLD);
				MPI_Recv(&token, 1, MPI_INT, 1, 2, MPI_COMM_WORLD,
				         MPI_STATUS_IGNORE);
			}
		}
		double ns = (double)(now_ns(CLOCK_MONOTONIC) - t0) / (double)n;
		printf("events: %ld iterations, %.0f ns per iteration (token %d, %s)\n", n, ns,
		       token, sink > 0 ? "clock ok" : "clock 0");
	} else if (rank == 1) {
		for (long i = 0; i < n / 64; i++) {
			MPI_Recv(&token, 1, MPI_INT, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			token++;
			MPI_Send(&token, 1, MPI_INT, 0, 2, MPI_COMM_WORLD);
		}
	}
}

#ifdef CHANMEM
static void ckptio(int mib, const char *dir, long long init_ns)
{
	size_t n = (size_t)mib * MIB / sizeof(double);
	double *field = malloc(n * sizeof *field);
	if (field == NULL)
		MPI_Abort(MPI_COMM_WORLD, 2);
	int done = 0;
	chanmem_ckpt_register(&done, sizeof done);
	chanmem_ckpt_register(field, n * sizeof *field);
	if (chanmem_ckpt_recovering()) {
		long long t0 = now_ns(CLOCK_MONOTONIC);
		chanmem_ckpt_restore();
		if (rank == 0) {
			write_ns(dir, "load.ns", init_ns + now_ns(CLOCK_MONOTONIC) - t0);
			write_ns(dir, "resumed.ns", now_ns(CLOCK_REALTIME));
		}
	} else {
		/* The work an image saves: a smooth field with noise in the low
		 * bits (a solver's state, not zeros), then smoothing passes. */
		uint64_t x = 88172645463325252ull;
		for (size_t i = 0; i < n; i++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			field[i] = 1000.0 * sin((double)i * 1e-4) + (double)(x % 1000) * 1e-9;
		}
		for (int pass = 0; pass < 10; pass++)
			for (size_t i = 1; i + 1 < n; i++)
				field[i] =
				    0.25 * field[i - 1] + 0.5 * field[i] + 0.25 * field[i + 1];
		if (rank == 0 && incarnation() > 0) /* re-executed without an image */
			write_ns(dir, "resumed.ns", now_ns(CLOCK_REALTIME));
	}
	if (!done && incarnation() == 0) {
		done = 1;
		long long t0 = now_ns(CLOCK_MONOTONIC);
		int taken = 0;
		if (chanmem_checkpoint(&taken) != MPI_SUCCESS)
			MPI_Abort(MPI_COMM_WORLD, 3);
		if (rank == 0) {
			if (taken)
				write_ns(dir, "save.ns", now_ns(CLOCK_MONOTONIC) - t0);
			write_ns(dir, "kill.ns", now_ns(CLOCK_REALTIME));
			raise(SIGKILL);
		}
	}
	MPI_Barrier(MPI_COMM_WORLD);
	free(field);
}
#endif

static void ring(int steps, int kib)
{
	size_t n = (size_t)kib * 1024;
	char *out = malloc(n), *in = malloc(n);
	if (out == NULL || in == NULL)
		MPI_Abort(MPI_COMM_WORLD, 2);
	memset(out, rank, n);
	struct {
		int step;
		long long sum;
	} st = {0, 0};
#ifdef CHANMEM
	chanmem_ckpt_register(&st, sizeof st);
	if (chanmem_ckpt_recovering())
		chanmem_ckpt_restore();
#endif
	int next = (rank + 1) % size, prev = (rank + size - 1) % size;
	for (; st.step < steps; st.step++) {
		MPI_Sendrecv(out, (int)n, MPI_BYTE, next, 1, in, (int)n, MPI_BYTE, prev, 1,
		             MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		st.sum += in[(size_t)st.step % n];
#ifdef CHANMEM
		st.step++;
		chanmem_checkpoint(NULL);
		st.step--;
#endif
	}
	if (rank == 0)
		printf("ring: %d steps of %d KiB, sum %lld\n", steps, kib, st.sum);
	free(out);
	free(in);
}

int main(int argc, char **argv)
{
	long long init_start = now_ns(CLOCK_MONOTONIC);
	MPI_Init(&argc, &argv);
	long long init_done = now_ns(CLOCK_REALTIME);
	long long init_ns = now_ns(CLOCK_MONOTONIC) - init_start;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
#ifdef CHANMEM
	if (argc == 4 && strcmp(argv[1], "ckptio") == 0) {
		int mib = atoi(argv[2]);
		if (mib < 1 || mib > 4096) {
			if (rank == 0)
				fprintf(stderr, "ftbench ckptio: MIB 1 .. 4096\n");
			MPI_Abort(MPI_COMM_WORLD, 2);
		}
		ckptio(mib, argv[3], init_ns);
		MPI_Finalize();
		return 0;
	}
#else
	(void)init_ns;
#endif
	if (argc == 4 && strcmp(argv[1], "ring") == 0 && size >= 2) {
		int steps = atoi(argv[2]), kib = atoi(argv[3]);
		if (steps < 1 || kib < 1 || kib > 65536) {
			if (rank == 0)
				fprintf(stderr, "ftbench ring: STEPS >= 1, KIB 1 .. 65536\n");
			MPI_Abort(MPI_COMM_WORLD, 2);
		}
		ring(steps, kib);
		MPI_Finalize();
		return 0;
	}
	if (size != 2 || argc != 3) {
		if (rank == 0)
			fprintf(stderr,
			        "usage: ftbench restart DIR | replay MIB | events N (2 ranks) "
			        "| ring STEPS KIB\n");
		MPI_Finalize();
		return 2;
	}
	if (strcmp(argv[1], "restart") == 0) {
		restart(argv[2], init_done);
	} else if (strcmp(argv[1], "replay") == 0) {
		int mib = atoi(argv[2]);
		if (mib < 1 || mib > 4096) {
			if (rank == 0)
				fprintf(stderr, "ftbench replay: MIB 1 .. 4096\n");
			MPI_Abort(MPI_COMM_WORLD, 2);
		}
		replay(getenv("FTBENCH_DIR") ? getenv("FTBENCH_DIR") : ".", mib);
	} else if (strcmp(argv[1], "events") == 0) {
		long n = atol(argv[2]);
		if (n < 64 || n > 100000000) {
			if (rank == 0)
				fprintf(stderr, "ftbench events: N 64 .. 100000000\n");
			MPI_Abort(MPI_COMM_WORLD, 2);
		}
		events(n);
	} else {
		if (rank == 0)
			fprintf(stderr, "ftbench: unknown test '%s'\n", argv[1]);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	MPI_Finalize();
	return 0;
}
