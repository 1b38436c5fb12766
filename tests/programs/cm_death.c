/* cm_death: programs that must come through a channel memory's death
 * (cmrun --cm-restart --kill-cm-at ...) with exactly their failure-free
 * output.
 *
 *   cm_death master TASKS   master/worker: rank 0 hands out tasks and
 *                           collects results with MPI_Iprobe on
 *                           MPI_ANY_SOURCE, polling between probes for a
 *                           time MPI_Wtime measures; workers answer each
 *                           task with a result.
 *   cm_death stencil ITERS  a 1-D heat stencil: halo exchange with both
 *                           neighbours, an MPI_Allreduce of the residual
 *                           every 10 iterations.
 *
 * CM_DEATH_SLEEP_MS=M sleeps M ms per task or iteration, so that a kill at
 * a time lands in the middle. The output depends only on the inputs. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int rank, size, sleep_ms;

static void nap(void)
{
	if (sleep_ms > 0)
		nanosleep(&(struct timespec){.tv_sec = sleep_ms / 1000,
		                             .tv_nsec = (long)(sleep_ms % 1000) * 1000000L},
		          NULL);
}

static uint64_t work(uint64_t task)
{
	uint64_t x = task * 0x9e3779b97f4a7c15ull + 1;
	for (int i = 0; i < 1000; i++)
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
	return x;
}

enum { TAG_TASK = 1, TAG_RESULT = 2, TAG_STOP = 3 };

static void master(int tasks)
{
	uint64_t *results = calloc((size_t)tasks, sizeof *results);
	int next = 0, done = 0;
	long polls = 0;
	for (int w = 1; w < size && next < tasks; w++, next++)
		MPI_Send(&next, 1, MPI_INT, w, TAG_TASK, MPI_COMM_WORLD);
	int busy = next;
	while (done < tasks) {
		int flag = 0;
		MPI_Status st;
		MPI_Iprobe(MPI_ANY_SOURCE, TAG_RESULT, MPI_COMM_WORLD, &flag, &st);
		if (!flag) {
			/* Wait a little between probes, timed by MPI_Wtime (a
			 * recorded event: a replay must wait the same). */
			double t0 = MPI_Wtime();
			while (MPI_Wtime() - t0 < 1e-4)
				polls++;
			continue;
		}
		uint64_t r[2];
		MPI_Recv(r, 2, MPI_UINT64_T, st.MPI_SOURCE, TAG_RESULT, MPI_COMM_WORLD,
		         MPI_STATUS_IGNORE);
		results[r[0]] = r[1];
		done++;
		busy--;
		if (next < tasks) {
			MPI_Send(&next, 1, MPI_INT, st.MPI_SOURCE, TAG_TASK, MPI_COMM_WORLD);
			next++;
			busy++;
		}
	}
	for (int w = 1; w < size; w++)
		MPI_Send(&next, 1, MPI_INT, w, TAG_STOP, MPI_COMM_WORLD);
	uint64_t sum = 0;
	for (int t = 0; t < tasks; t++) {
		if (results[t] != work((uint64_t)t)) {
			printf("task %d: wrong result\n", t);
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
		sum = sum * 31 + results[t];
		if (t % 50 == 49)
			printf("tasks %d..%d: checksum %016llx\n", t - 49, t,
			       (unsigned long long)sum);
	}
	printf("master: %d tasks, all results right, checksum %016llx\n", tasks,
	       (unsigned long long)sum);
	(void)polls;
	free(results);
}

static void worker(void)
{
	int handled = 0;
	for (;;) {
		int task;
		MPI_Status st;
		MPI_Recv(&task, 1, MPI_INT, 0, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
		if (st.MPI_TAG == TAG_STOP)
			break;
		nap();
		uint64_t r[2] = {(uint64_t)task, work((uint64_t)task)};
		MPI_Send(r, 2, MPI_UINT64_T, 0, TAG_RESULT, MPI_COMM_WORLD);
		handled++;
	}
	(void)handled; /* how tasks spread over workers varies from run to run */
}

#define CELLS 4096

static void stencil(int iters)
{
	double *u = calloc(CELLS + 2, sizeof *u), *v = calloc(CELLS + 2, sizeof *v);
	for (int i = 1; i <= CELLS; i++)
		u[i] = (double)((rank * CELLS + i) % 97);
	int left = (rank + size - 1) % size, right = (rank + 1) % size;
	for (int it = 1; it <= iters; it++) {
		MPI_Sendrecv(&u[CELLS], 1, MPI_DOUBLE, right, 7, &u[0], 1, MPI_DOUBLE, left, 7,
		             MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		MPI_Sendrecv(&u[1], 1, MPI_DOUBLE, left, 8, &u[CELLS + 1], 1, MPI_DOUBLE, right, 8,
		             MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		double local = 0;
		for (int i = 1; i <= CELLS; i++) {
			v[i] = u[i] + 0.25 * (u[i - 1] - 2 * u[i] + u[i + 1]);
			local += (v[i] - u[i]) * (v[i] - u[i]);
		}
		double *t = u;
		u = v;
		v = t;
		nap();
		if (it % 10 == 0) {
			double global;
			MPI_Allreduce(&local, &global, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
			if (rank == 0)
				printf("iteration %d: residual %.12e\n", it, global);
		}
	}
	double sum = 0;
	for (int i = 1; i <= CELLS; i++)
		sum += u[i] * (double)i;
	printf("rank %d: final %.12e\n", rank, sum);
	free(u);
	free(v);
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	const char *s = getenv("CM_DEATH_SLEEP_MS");
	sleep_ms = s ? atoi(s) : 0;
	const char *what = argc > 1 ? argv[1] : "";
	int n = argc > 2 ? atoi(argv[2]) : 100;
	if (strcmp(what, "master") == 0 && size >= 2) {
		if (rank == 0)
			master(n);
		else
			worker();
	} else if (strcmp(what, "stencil") == 0) {
		stencil(n);
	} else {
		if (rank == 0)
			fprintf(stderr,
			        "usage: cm_death master TASKS | stencil ITERATIONS (master: "
			        "2 ranks or more)\n");
		MPI_Finalize();
		return 2;
	}
	MPI_Finalize();
	return 0;
}
