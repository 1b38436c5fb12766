/* ft_stdin: rank 0 reads numbers from stdin, one per line, and sends each to
 * rank 1, which adds them up; both print the sum and the count at the end.
 *
 *   ft_stdin [SLEEP_MS] [CKPT]
 *
 * SLEEP_MS: pause per line (so a kill lands mid-input). CKPT=1: rank 0 keeps
 * its position (sum, count) in a registered region and calls
 * chanmem_checkpoint after each line (with cmrun --ckpt-dir a restarted
 * rank 0 resumes from its image: the input must resume where the image
 * was taken). Reading mixes fgets and getchar, so stdio's buffer is rarely
 * empty when a checkpoint is taken. */
#include <chanmem.h>
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct pos {
	long long sum;
	long count;
};

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank, size;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	long sleep_ms = argc > 1 ? atol(argv[1]) : 0;
	int ckpt = argc > 2 && atoi(argv[2]) == 1;
	if (size < 2) {
		fprintf(stderr, "ft_stdin: needs 2 ranks\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	struct pos p = {0, 0};
	if (rank == 0) {
		if (ckpt) {
			chanmem_ckpt_register(&p, sizeof p);
			if (chanmem_ckpt_recovering())
				chanmem_ckpt_restore();
		}
		char line[64];
		for (;;) {
			/* Odd lines through getchar, even ones through fgets. */
			int n = 0, c = 0;
			if (p.count % 2) {
				while (n < (int)sizeof line - 1 && (c = getchar()) != EOF &&
				       c != '\n')
					line[n++] = (char)c;
				line[n] = 0;
				if (c == EOF && n == 0)
					break;
			} else if (fgets(line, sizeof line, stdin) == NULL) {
				break;
			}
			long long v = atoll(line);
			MPI_Send(&v, 1, MPI_LONG_LONG, 1, 1, MPI_COMM_WORLD);
			p.sum += v;
			p.count++;
			if (sleep_ms > 0) {
				struct timespec ts = {sleep_ms / 1000,
				                      (sleep_ms % 1000) * 1000000L};
				nanosleep(&ts, NULL);
			}
			if (ckpt && chanmem_checkpoint(NULL) != MPI_SUCCESS)
				MPI_Abort(MPI_COMM_WORLD, 4);
		}
		long long end = -1;
		MPI_Send(&end, 1, MPI_LONG_LONG, 1, 2, MPI_COMM_WORLD);
		printf("rank 0 read %ld numbers, sum %lld\n", p.count, p.sum);
	} else if (rank == 1) {
		for (;;) {
			long long v;
			MPI_Status st;
			MPI_Recv(&v, 1, MPI_LONG_LONG, 0, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
			if (st.MPI_TAG == 2)
				break;
			p.sum += v;
			p.count++;
		}
		printf("rank 1 received %ld numbers, sum %lld\n", p.count, p.sum);
	}
	MPI_Finalize();
	return 0;
}
