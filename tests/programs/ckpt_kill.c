/* ckpt_kill: a ring with application checkpoints, meant to be killed at
 * random (cmrun --ckpt-dir D --ckpt-every T --kill-every T).
 *
 *   ckpt_kill STEPS BYTES [SLEEP_MS] [test]
 *
 * Each step every rank sends BYTES bytes derived from its state to the next
 * rank with MPI_Sendrecv, folds the buffer it receives from the previous
 * rank into a 72-byte registered state, and calls chanmem_checkpoint(NULL).
 * At the end every rank prints its state: the same line whatever was
 * killed, restored or replayed. Each received buffer is also checked
 * against what its sender must have sent (a wrong or torn replay is caught
 * at the step it happens, not only in the final sum).
 *
 * With `test` the exchange is MPI_Irecv + MPI_Isend, the receive completed
 * by an MPI_Test loop that also reads MPI_Wtime: failed polls and clock
 * values are events, so images must cut the event log at the right place
 * too (a re-execution that cannot follow the logged polls stops the job
 * with an error). The output stays that of a failure-free run. */
#include <chanmem.h>
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct state {
	int64_t step;
	uint64_t sum[8];
};

static uint64_t mix(uint64_t h, uint64_t v)
{
	return (h ^ v) * 0x100000001B3ull;
}

/* The buffer rank `from` sends in step `step` when its state's first word
 * is `seed`: word i is a function of the three. */
static void fill(uint64_t *buf, size_t words, int from, int64_t step, uint64_t seed)
{
	for (size_t i = 0; i < words; i++)
		buf[i] = mix(seed ^ (uint64_t)i, (uint64_t)step * 131 + (uint64_t)from);
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank, size;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	long steps = argc > 1 ? atol(argv[1]) : 100;
	long bytes = argc > 2 ? atol(argv[2]) : 65536;
	long sleep_ms = argc > 3 ? atol(argv[3]) : 0;
	int polling = argc > 4 && strcmp(argv[4], "test") == 0;
	if (steps < 1 || bytes < 16 || bytes > (64l << 20) || sleep_ms < 0) {
		if (rank == 0)
			fprintf(stderr, "usage: ckpt_kill STEPS BYTES(16..64Mi) [SLEEP_MS]\n");
		MPI_Finalize();
		return 2;
	}
	size_t words = (size_t)bytes / 8;
	uint64_t *out = malloc(words * 8), *in = malloc(words * 8), *want = malloc(words * 8);
	if (!out || !in || !want)
		MPI_Abort(MPI_COMM_WORLD, 2);

	struct state st = {0, {0}};
	for (int i = 0; i < 8; i++)
		st.sum[i] = 14695981039346656037ull + (uint64_t)(rank * 8 + i);
	/* What each rank's state is at each step is only known by the ranks
	 * themselves; the check below needs the sender's seed, so it travels
	 * in the first word. */
	chanmem_ckpt_register(&st, sizeof st);
	if (chanmem_ckpt_recovering() && chanmem_ckpt_restore() != MPI_SUCCESS) {
		fprintf(stderr, "ckpt_kill: rank %d: restore failed\n", rank);
		MPI_Abort(MPI_COMM_WORLD, 3);
	}

	int next = (rank + 1) % size, prev = (rank + size - 1) % size;
	while (st.step < steps) {
		fill(out, words, rank, st.step, st.sum[0]);
		out[0] = st.sum[0];
		MPI_Status status;
		if (polling) {
			MPI_Request rq[2];
			MPI_Irecv(in, (int)words, MPI_UINT64_T, prev, 7, MPI_COMM_WORLD, &rq[0]);
			MPI_Isend(out, (int)words, MPI_UINT64_T, next, 7, MPI_COMM_WORLD, &rq[1]);
			/* A failed poll of the send, completed by MPI_Wait (which
			 * logs nothing): its count is still pending at the
			 * checkpoint below. */
			int done = 0;
			MPI_Test(&rq[1], &done, MPI_STATUS_IGNORE);
			if (!done)
				MPI_Wait(&rq[1], MPI_STATUS_IGNORE);
			done = 0;
			(void)MPI_Wtime();
			for (;;) {
				MPI_Test(&rq[0], &done, &status);
				if (done)
					break;
				/* Polling, not spinning: 2 cores, 4 ranks and a CM. */
				struct timespec ts = {0, 20000};
				nanosleep(&ts, NULL);
			}
		} else {
			MPI_Sendrecv(out, (int)words, MPI_UINT64_T, next, 7, in, (int)words,
			             MPI_UINT64_T, prev, 7, MPI_COMM_WORLD, &status);
		}
		int count;
		MPI_Get_count(&status, MPI_UINT64_T, &count);
		fill(want, words, prev, st.step, in[0]);
		want[0] = in[0];
		for (size_t i = 0; i < words; i++)
			if (in[i] != want[i] || count != (int)words) {
				fprintf(stderr,
				        "ckpt_kill: rank %d step %lld: word %zu of %d is %016llx, "
				        "expected %016llx\n",
				        rank, (long long)st.step, i, count,
				        (unsigned long long)in[i], (unsigned long long)want[i]);
				MPI_Abort(MPI_COMM_WORLD, 5);
			}
		for (size_t i = 0; i < words; i++)
			st.sum[i % 8] = mix(st.sum[i % 8], in[i]);
		st.step++;
		if (sleep_ms > 0) {
			struct timespec ts = {sleep_ms / 1000, (sleep_ms % 1000) * 1000000L};
			nanosleep(&ts, NULL);
		}
		int rc = chanmem_checkpoint(NULL);
		if (rc != MPI_SUCCESS) {
			fprintf(stderr, "ckpt_kill: rank %d: checkpoint failed (%d)\n", rank, rc);
			MPI_Abort(MPI_COMM_WORLD, 4);
		}
	}
	uint64_t h = 0;
	for (int i = 0; i < 8; i++)
		h = mix(h, st.sum[i]);
	printf("rank %d: %lld steps of %ld bytes, state %016llx\n", rank, (long long)st.step, bytes,
	       (unsigned long long)h);
	free(out);
	free(in);
	free(want);
	MPI_Finalize();
	return 0;
}
