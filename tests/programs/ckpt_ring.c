/* ckpt_ring: an iterative program with application checkpoints.
 *
 *   ckpt_ring STEPS [STATE_KIB]
 *
 * Each step every rank sends a message derived from its state to the next
 * rank and folds what it receives from the previous one into its state (a
 * running checksum plus STATE_KIB KiB of data rewritten each step), then
 * calls chanmem_checkpoint. Every rank prints a line per step, and at the
 * end rank 0 gathers every rank's checksum (point to point) and prints
 * them: the same lines whatever failed.
 *
 *   FT_KILL_RANK=R FT_KILL_AT=S   rank R raises SIGKILL in step S, after its
 *                                 exchange and before that step's checkpoint,
 *                                 on its first incarnation only
 *   FT_SLEEP_MS=M                 sleep M ms per step (for --ckpt-every runs)
 *   CKPT_REPORT_DIR=D             a restarted rank writes D/rank.R: the step it
 *                                 resumed at and its incarnation (the test
 *                                 checks it really resumed from an image) */
#include <chanmem.h>
#include <mpi.h>

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct state {
	int step;
	uint64_t sum;
};

static int env_int(const char *name, int dflt)
{
	const char *v = getenv(name);
	return v && *v ? atoi(v) : dflt;
}

static uint64_t mix(uint64_t h, uint64_t v)
{
	return (h ^ v) * 0x100000001B3ull;
}

static void report(int rank, int step)
{
	const char *dir = getenv("CKPT_REPORT_DIR");
	if (dir == NULL)
		return;
	char path[4096];
	snprintf(path, sizeof path, "%s/rank.%d", dir, rank);
	FILE *f = fopen(path, "a");
	if (f) {
		fprintf(f, "resumed at step %d incarnation %d\n", step,
		        env_int("CHANMEM_INCARNATION", 0));
		fclose(f);
	}
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank, size;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	int steps = argc > 1 ? atoi(argv[1]) : 20;
	long kib = argc > 2 ? atol(argv[2]) : 4;
	if (steps < 1 || steps > 100000 || kib < 1 || kib > 1024 * 1024) {
		if (rank == 0)
			fprintf(stderr,
			        "usage: ckpt_ring STEPS(1..100000) [STATE_KIB(1..1048576)]\n");
		MPI_Finalize();
		return 2;
	}
	size_t bytes = (size_t)kib * 1024;
	uint64_t *data = malloc(bytes);
	if (data == NULL)
		MPI_Abort(MPI_COMM_WORLD, 2);
	struct state st = {0, 14695981039346656037ull};
	size_t words = bytes / sizeof *data;
	for (size_t i = 0; i < words; i++)
		data[i] = i * 2654435761u + (uint64_t)rank;

	chanmem_ckpt_register(&st, sizeof st);
	chanmem_ckpt_register(data, bytes);
	if (chanmem_ckpt_recovering()) {
		if (chanmem_ckpt_restore() != MPI_SUCCESS) {
			fprintf(stderr, "ckpt_ring: rank %d: restore failed\n", rank);
			MPI_Abort(MPI_COMM_WORLD, 3);
		}
		report(rank, st.step);
	}

	int kill_rank = env_int("FT_KILL_RANK", -1), kill_at = env_int("FT_KILL_AT", -1);
	int sleep_ms = env_int("FT_SLEEP_MS", 0);
	int next = (rank + 1) % size, prev = (rank + size - 1) % size;
	for (; st.step < steps; st.step++) {
		uint64_t out[2] = {st.sum, data[(size_t)st.step % words]}, in[2];
		MPI_Sendrecv(out, 2, MPI_UINT64_T, next, st.step, in, 2, MPI_UINT64_T, prev,
		             st.step, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		st.sum = mix(mix(st.sum, in[0]), in[1]);
		for (size_t i = 0; i < words; i += 512)
			data[i] = mix(data[i], st.sum);
		/* A line per step: a rank restored from an image must not lose
		 * nor repeat any (cmrun drops what was printed before). */
		printf("step %d sum %016llx\n", st.step, (unsigned long long)st.sum);
		if (rank == kill_rank && st.step == kill_at &&
		    env_int("CHANMEM_INCARNATION", 0) == 0)
			raise(SIGKILL);
		if (sleep_ms > 0) {
			struct timespec ts = {sleep_ms / 1000, (long)(sleep_ms % 1000) * 1000000L};
			nanosleep(&ts, NULL);
		}
		st.step++; /* the image says "this step is done" */
		int rc = chanmem_checkpoint(NULL);
		st.step--;
		if (rc != MPI_SUCCESS) {
			fprintf(stderr, "ckpt_ring: rank %d: checkpoint failed (%d)\n", rank, rc);
			MPI_Abort(MPI_COMM_WORLD, 4);
		}
	}

	if (rank == 0) {
		printf("ckpt_ring %d ranks %d steps %ld KiB\n", size, steps, kib);
		printf("rank 0 sum %016llx\n", (unsigned long long)st.sum);
		for (int p = 1; p < size; p++) {
			unsigned long long v;
			MPI_Recv(&v, 1, MPI_UNSIGNED_LONG_LONG, p, 999999, MPI_COMM_WORLD,
			         MPI_STATUS_IGNORE);
			printf("rank %d sum %016llx\n", p, v);
		}
	} else {
		unsigned long long v = st.sum;
		MPI_Send(&v, 1, MPI_UNSIGNED_LONG_LONG, 0, 999999, MPI_COMM_WORLD);
	}
	free(data);
	MPI_Finalize();
	return 0;
}
