/* ft_faults: failures cmrun must handle and report rather than tolerate
 * silently (docs/fault-tolerance.md, "Failure handling").
 *
 *   ft_faults STEPS
 *
 * Each step every rank passes a value around a ring (MPI_Sendrecv) and
 * prints "rank R step S value V". At the end every rank enters MPI_Barrier,
 * then MPI_Finalize.
 *
 *   FAULTS_LEAVE=R      rank R leaves after step 1 without MPI_Finalize
 *   FAULTS_LEAVE_HOW=H  return (from main, default) or exit (exit(0))
 *   FAULTS_SEGV=R:S     rank R dereferences a null pointer in step S, on
 *                       every incarnation (a bug) or, with FAULTS_ONCE=1,
 *                       on its first one only (a transient fault)
 *   FAULTS_KILL=R:S     rank R raises SIGKILL in step S, first incarnation
 *   FAULTS_CKPT=K       checkpoint after every K-th step (1: every step); a
 *                       rank restored from an image prints "rank R resuming
 *                       from step S" first (a line its predecessor never
 *                       printed)
 *   FAULTS_SLEEP_MS=M   sleep M ms per step
 *   FAULTS_VARY=A:B     the lines of steps A to B end with " (incarnation I)":
 *                       a re-execution prints them with other contents, as a
 *                       program printing a time it did not take from MPI */
#include <chanmem.h>
#include <mpi.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int env_int(const char *name, int dflt)
{
	const char *v = getenv(name);
	return v && *v ? atoi(v) : dflt;
}

/* "R:S" -> rank and step, or -1s. */
static void env_pair(const char *name, int *rank, int *step)
{
	const char *v = getenv(name);
	*rank = *step = -1;
	if (v == NULL || sscanf(v, "%d:%d", rank, step) != 2)
		*rank = *step = -1;
}

/* A real fault, the store executed: UBSan's null check (sanitizer builds)
 * would end the rank with status 1 before it, and a pointer the compiler
 * knows to be null lets it drop the call as undefined behaviour. */
__attribute__((noinline, no_sanitize("null"))) static void segfault(void)
{
	volatile int *volatile nowhere = NULL;
	*nowhere = 1;
}

struct state {
	int step;
	long value;
};

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank, size;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	int steps = argc > 1 ? atoi(argv[1]) : 10;
	int incarnation = env_int("CHANMEM_INCARNATION", 0);
	int segv_rank, segv_step, kill_rank, kill_step, vary_from, vary_to;
	env_pair("FAULTS_SEGV", &segv_rank, &segv_step);
	env_pair("FAULTS_VARY", &vary_from, &vary_to);
	env_pair("FAULTS_KILL", &kill_rank, &kill_step);
	int leave = env_int("FAULTS_LEAVE", -1), sleep_ms = env_int("FAULTS_SLEEP_MS", 0);
	int ckpt = env_int("FAULTS_CKPT", 0), once = env_int("FAULTS_ONCE", 0);

	struct state st = {0, rank + 1};
	if (ckpt) {
		chanmem_ckpt_register(&st, sizeof st);
		if (chanmem_ckpt_recovering()) {
			if (chanmem_ckpt_restore() != MPI_SUCCESS)
				MPI_Abort(MPI_COMM_WORLD, 3);
			printf("rank %d resuming from step %d\n", rank, st.step);
		}
	}
	int next = (rank + 1) % size, prev = (rank + size - 1) % size;
	for (; st.step < steps; st.step++) {
		long in;
		MPI_Sendrecv(&st.value, 1, MPI_LONG, next, st.step, &in, 1, MPI_LONG, prev, st.step,
		             MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		st.value = (st.value * 31 + in) % 1000003;
		if (st.step >= vary_from && st.step <= vary_to)
			printf("rank %d step %d value %ld (incarnation %d)\n", rank, st.step,
			       st.value, incarnation);
		else
			printf("rank %d step %d value %ld\n", rank, st.step, st.value);
		fflush(stdout);
		if (rank == segv_rank && st.step == segv_step && (!once || incarnation == 0))
			segfault();
		if (rank == kill_rank && st.step == kill_step && incarnation == 0)
			raise(SIGKILL);
		if (rank == leave && st.step == 1) {
			if (getenv("FAULTS_LEAVE_HOW") &&
			    strcmp(getenv("FAULTS_LEAVE_HOW"), "exit") == 0)
				exit(0);
			return 0;
		}
		if (sleep_ms > 0) {
			struct timespec ts = {sleep_ms / 1000, (long)(sleep_ms % 1000) * 1000000L};
			nanosleep(&ts, NULL);
		}
		if (ckpt > 0 && (st.step + 1) % ckpt == 0) {
			st.step++; /* the image says "this step is done" */
			int rc = chanmem_checkpoint(NULL);
			st.step--;
			if (rc != MPI_SUCCESS)
				MPI_Abort(MPI_COMM_WORLD, 4);
		}
	}
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Finalize();
	return 0;
}
