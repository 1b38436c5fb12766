/* NPcm: NetPIPE's measurement method as a plain MPI program.
 *
 * Only a small, portable MPI subset is used (Init, Comm_rank, Comm_size, Barrier, Send, Ssend,
 * Recv, Irecv, Wait, Wtime, Finalize, Abort, Get_processor_name), so the same sources build with
 * chanmem's cmcc and with any other MPI's mpicc and the curves can be compared side by side.
 *
 * Rank 0 (the transmitter) walks NetPIPE's size sequence, calibrates the repeat count of each
 * size from the previous size's time, runs several trials and keeps the best, and writes np.out.
 * Rank 1 (the receiver) is driven entirely by control messages from rank 0, so every decision
 * that depends on MPI_Wtime is taken in one place (a replayed rank re-takes it from its log).
 *
 * Many pairs: with 2P ranks, rank 2i transmits to rank 2i+1 and the P pairs run every size at
 * the same time, through the same transport. Rank 0 stays the only one that decides: it sends
 * every other rank the size, the repeat count and the number of trials, and calibrates from its
 * own time alone; the other transmitters time their pair and send the leader their one-way time,
 * which only reaches np.out (the aggregate bandwidth, sum over the pairs, and the mean one-way
 * time). With 2 ranks the run is exactly NetPIPE's.
 *
 * Verification: message number c in one direction carries the window REF[c % WINDOWS ..] of a
 * reference byte string every rank generates identically. REF is built so that two windows whose
 * numbers differ by 1 or 2 (mod WINDOWS) differ at every byte, and received messages alternate
 * between two buffers that are cleared (to a value REF never holds) at each new size: a stale or
 * missing byte always shows, a byte shifted by 1 or 2 places always, by more almost surely
 * (254/255 per byte). Sending needs no per-message fill (a window is a pointer); checking is one
 * memcmp.
 *
 * Files: see npcm.h. */
#include "npcm.h"

#include <stdio.h>
#include <stdlib.h>

static long long repeats_for(const struct options *opt, double seconds_per_rep)
{
	if (seconds_per_rep < 1e-8)
		seconds_per_rep = 1e-8;
	double n = opt->target / seconds_per_rep;
	if (n < MIN_REPS)
		return MIN_REPS;
	return n > MAX_REPS ? MAX_REPS : (long long)n;
}

/* The leader's walk over the sizes. Every repeat count comes from its own clock. */
static void lead(struct bench *b)
{
	const struct options *o = &b->opt;
	int count = size_walk(o, NULL);
	long long *sizes = allocate((long long)count * (long long)sizeof *sizes);
	size_walk(o, sizes);
	FILE *out = open_output(b);
	print_banner(b, count);

	/* Warm-up at the first size (connections opened, caches warm), then a first estimate. */
	struct result r;
	long long first = count > 0 ? sizes[0] : 0;
	measure(b, first, MIN_REPS, 1, &r);
	measure(b, first, MIN_REPS, 1, &r);
	double last_time = r.leader_best;
	long long last_size = first;

	for (int n = 0; n < count && last_time < STOP_SECONDS; n++) {
		long long size = sizes[n];
		double scale = size > last_size && last_size > 0 ? (double)size / last_size : 1.0;
		double per_rep = last_time * scale * (o->streaming ? 1.0 : 2.0);
		long long nrepeat = repeats_for(o, per_rep);
		measure(b, size, nrepeat, o->trials, &r);
		write_row(b, out, n, size, nrepeat, &r);
		last_time = r.leader_best;
		last_size = size;
	}
	announce_done(b);
	close_output(b, out);
	free(sizes);
}

/* 0 to run, else the exit status (reported by rank 0 only). */
static int check_setup(struct bench *b, int status)
{
	const char *debug = getenv("NPCM_DEBUG_CORRUPT");
	if (status == 0 && debug != NULL && *debug != '\0' &&
	    parse_corruption(debug, b->nranks, &b->corrupt)) {
		if (b->rank == 0)
			fprintf(stderr,
			        "NPcm: NPCM_DEBUG_CORRUPT wants RANK:SIZE:OFFSET (rank 0 .. %d, "
			        "offset < size), got '%s'\n",
			        b->nranks - 1, debug);
		status = EXIT_USAGE;
	}
	if (status == 0 && (b->nranks < 2 || b->nranks % 2 != 0 || b->nranks / 2 > MAX_PAIRS)) {
		if (b->rank == 0)
			fprintf(
			    stderr,
			    "NPcm: needs an even number of ranks (2 for one pair, 2P for P pairs, "
			    "P <= %d), got %d (e.g. cmrun -n 2 NPcm, or mpirun -np 2 NPcm)\n",
			    MAX_PAIRS, b->nranks);
		status = 1;
	}
	return status;
}

int main(int argc, char **argv)
{
	struct bench b = {0};
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &b.rank);
	MPI_Comm_size(MPI_COMM_WORLD, &b.nranks);

	int status = check_setup(&b, parse_options(argc, argv, b.rank, &b.opt));
	if (status != 0) {
		MPI_Finalize();
		return status < 0 ? 0 : status;
	}

	b.pairs = b.nranks / 2;
	b.peer = b.rank ^ 1;
	b.src = b.opt.any_source ? MPI_ANY_SOURCE : b.peer;
	b.ctl_src = b.opt.any_source ? MPI_ANY_SOURCE : LEADER;
	b.max_len = b.opt.upper + b.opt.perturbation;
	b.ref = allocate(b.max_len + WINDOWS);
	build_reference(b.ref, b.max_len + WINDOWS);
	b.rbuf[0] = allocate(b.max_len);
	b.rbuf[1] = allocate(b.max_len);
	if (b.corrupt.active)
		b.scratch = allocate(b.corrupt.size);
	MPI_Barrier(MPI_COMM_WORLD);

	if (b.rank == LEADER) {
		lead(&b);
	} else {
		send_processor_name(&b);
		follow(&b);
	}
	free(b.ref);
	free(b.rbuf[0]);
	free(b.rbuf[1]);
	free(b.scratch);
	MPI_Finalize();
	return 0;
}
