/* Non-blocking collectives against their blocking twins: every MPI_I...
 * collective runs on the same inputs as the blocking call, overlapped with
 * computation that polls (MPI_Test, MPI_Iprobe), and must leave the same
 * bytes in the receive buffer; then several run at once on two
 * communicators and are completed with MPI_Waitany, MPI_Testsome and
 * MPI_Testall. Plain MPI (builds with any mpicc).
 *
 *   coll_nb [ROUNDS]     default 2 rounds; output: rank 0's summary, the
 *                        same for every rank count
 *   CNB_KILL_AT=K        rank size-1 raises SIGKILL after round K, in its
 *                        first incarnation only (CHANMEM_INCARNATION)
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define POLL_LIMIT 100000000L

struct bufs {
	MPI_Comm comm;
	int P, r, n;
	int *sbuf, *rbuf;
	int *counts, *displs; /* uneven v-layout, blocks apart */
	int *a2a_sc, *a2a_sd, *a2a_rc, *a2a_rd, *a2a_wsd, *a2a_wrd;
	MPI_Datatype *types;
	size_t len; /* ints in sbuf and rbuf */
};

typedef int coll_fn(struct bufs *b, MPI_Request *req); /* req NULL: blocking */

static int c_barrier(struct bufs *b, MPI_Request *q)
{
	return q ? MPI_Ibarrier(b->comm, q) : MPI_Barrier(b->comm);
}
static int c_bcast(struct bufs *b, MPI_Request *q)
{
	int root = b->P / 2;
	if (b->r == root)
		memcpy(b->rbuf, b->sbuf, (size_t)b->n * b->P * sizeof(int));
	return q ? MPI_Ibcast(b->rbuf, b->n * b->P, MPI_INT, root, b->comm, q)
	         : MPI_Bcast(b->rbuf, b->n * b->P, MPI_INT, root, b->comm);
}
static int c_reduce(struct bufs *b, MPI_Request *q)
{
	return q ? MPI_Ireduce(b->sbuf, b->rbuf, b->n * b->P, MPI_INT, MPI_SUM, 0, b->comm, q)
	         : MPI_Reduce(b->sbuf, b->rbuf, b->n * b->P, MPI_INT, MPI_SUM, 0, b->comm);
}
static int c_allreduce(struct bufs *b, MPI_Request *q)
{
	return q ? MPI_Iallreduce(b->sbuf, b->rbuf, b->n * b->P, MPI_INT, MPI_MAX, b->comm, q)
	         : MPI_Allreduce(b->sbuf, b->rbuf, b->n * b->P, MPI_INT, MPI_MAX, b->comm);
}
static int c_reduce_scatter(struct bufs *b, MPI_Request *q)
{
	return q ? MPI_Ireduce_scatter(b->sbuf, b->rbuf, b->counts, MPI_INT, MPI_SUM, b->comm, q)
	         : MPI_Reduce_scatter(b->sbuf, b->rbuf, b->counts, MPI_INT, MPI_SUM, b->comm);
}
static int c_reduce_scatter_block(struct bufs *b, MPI_Request *q)
{
	return q ? MPI_Ireduce_scatter_block(b->sbuf, b->rbuf, b->n, MPI_INT, MPI_SUM, b->comm, q)
	         : MPI_Reduce_scatter_block(b->sbuf, b->rbuf, b->n, MPI_INT, MPI_SUM, b->comm);
}
static int c_scan(struct bufs *b, MPI_Request *q)
{
	return q ? MPI_Iscan(b->sbuf, b->rbuf, b->n, MPI_INT, MPI_SUM, b->comm, q)
	         : MPI_Scan(b->sbuf, b->rbuf, b->n, MPI_INT, MPI_SUM, b->comm);
}
static int c_exscan(struct bufs *b, MPI_Request *q)
{
	return q ? MPI_Iexscan(b->sbuf, b->rbuf, b->n, MPI_INT, MPI_BXOR, b->comm, q)
	         : MPI_Exscan(b->sbuf, b->rbuf, b->n, MPI_INT, MPI_BXOR, b->comm);
}
static int c_gather(struct bufs *b, MPI_Request *q)
{
	int root = b->P - 1;
	return q ? MPI_Igather(b->sbuf, b->n, MPI_INT, b->rbuf, b->n, MPI_INT, root, b->comm, q)
	         : MPI_Gather(b->sbuf, b->n, MPI_INT, b->rbuf, b->n, MPI_INT, root, b->comm);
}
static int c_gatherv(struct bufs *b, MPI_Request *q)
{
	int c = b->counts[b->r];
	return q ? MPI_Igatherv(b->sbuf, c, MPI_INT, b->rbuf, b->counts, b->displs, MPI_INT, 0,
	                        b->comm, q)
	         : MPI_Gatherv(b->sbuf, c, MPI_INT, b->rbuf, b->counts, b->displs, MPI_INT, 0,
	                       b->comm);
}
static int c_scatter(struct bufs *b, MPI_Request *q)
{
	return q ? MPI_Iscatter(b->sbuf, b->n, MPI_INT, b->rbuf, b->n, MPI_INT, 0, b->comm, q)
	         : MPI_Scatter(b->sbuf, b->n, MPI_INT, b->rbuf, b->n, MPI_INT, 0, b->comm);
}
static int c_scatterv(struct bufs *b, MPI_Request *q)
{
	int c = b->counts[b->r], root = b->P / 2;
	return q ? MPI_Iscatterv(b->sbuf, b->counts, b->displs, MPI_INT, b->rbuf, c, MPI_INT, root,
	                         b->comm, q)
	         : MPI_Scatterv(b->sbuf, b->counts, b->displs, MPI_INT, b->rbuf, c, MPI_INT, root,
	                        b->comm);
}
static int c_allgather(struct bufs *b, MPI_Request *q)
{
	return q ? MPI_Iallgather(b->sbuf, b->n, MPI_INT, b->rbuf, b->n, MPI_INT, b->comm, q)
	         : MPI_Allgather(b->sbuf, b->n, MPI_INT, b->rbuf, b->n, MPI_INT, b->comm);
}
static int c_allgatherv(struct bufs *b, MPI_Request *q)
{
	int c = b->counts[b->r];
	return q ? MPI_Iallgatherv(b->sbuf, c, MPI_INT, b->rbuf, b->counts, b->displs, MPI_INT,
	                           b->comm, q)
	         : MPI_Allgatherv(b->sbuf, c, MPI_INT, b->rbuf, b->counts, b->displs, MPI_INT,
	                          b->comm);
}
static int c_alltoall(struct bufs *b, MPI_Request *q)
{
	return q ? MPI_Ialltoall(b->sbuf, b->n, MPI_INT, b->rbuf, b->n, MPI_INT, b->comm, q)
	         : MPI_Alltoall(b->sbuf, b->n, MPI_INT, b->rbuf, b->n, MPI_INT, b->comm);
}
static int c_alltoallv(struct bufs *b, MPI_Request *q)
{
	return q ? MPI_Ialltoallv(b->sbuf, b->a2a_sc, b->a2a_sd, MPI_INT, b->rbuf, b->a2a_rc,
	                          b->a2a_rd, MPI_INT, b->comm, q)
	         : MPI_Alltoallv(b->sbuf, b->a2a_sc, b->a2a_sd, MPI_INT, b->rbuf, b->a2a_rc,
	                         b->a2a_rd, MPI_INT, b->comm);
}
static int c_alltoallw(struct bufs *b, MPI_Request *q)
{
	return q ? MPI_Ialltoallw(b->sbuf, b->a2a_sc, b->a2a_wsd, b->types, b->rbuf, b->a2a_rc,
	                          b->a2a_wrd, b->types, b->comm, q)
	         : MPI_Alltoallw(b->sbuf, b->a2a_sc, b->a2a_wsd, b->types, b->rbuf, b->a2a_rc,
	                         b->a2a_wrd, b->types, b->comm);
}

static const struct {
	const char *name;
	coll_fn *fn;
} cases[] = {
    {"ibarrier", c_barrier},
    {"ibcast", c_bcast},
    {"ireduce", c_reduce},
    {"iallreduce", c_allreduce},
    {"ireduce_scatter", c_reduce_scatter},
    {"ireduce_scatter_block", c_reduce_scatter_block},
    {"iscan", c_scan},
    {"iexscan", c_exscan},
    {"igather", c_gather},
    {"igatherv", c_gatherv},
    {"iscatter", c_scatter},
    {"iscatterv", c_scatterv},
    {"iallgather", c_allgather},
    {"iallgatherv", c_allgatherv},
    {"ialltoall", c_alltoall},
    {"ialltoallv", c_alltoallv},
    {"ialltoallw", c_alltoallw},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

static void setup(struct bufs *b, MPI_Comm comm, int n)
{
	b->comm = comm;
	MPI_Comm_size(comm, &b->P);
	MPI_Comm_rank(comm, &b->r);
	b->n = n;
	int P = b->P;
	b->counts = malloc(P * sizeof(int));
	b->displs = malloc(P * sizeof(int));
	b->a2a_sc = malloc(P * sizeof(int));
	b->a2a_sd = malloc(P * sizeof(int));
	b->a2a_rc = malloc(P * sizeof(int));
	b->a2a_rd = malloc(P * sizeof(int));
	b->a2a_wsd = malloc(P * sizeof(int));
	b->a2a_wrd = malloc(P * sizeof(int));
	b->types = malloc(P * sizeof(MPI_Datatype));
	int off = 0;
	for (int i = 0; i < P; i++) {
		b->counts[i] = n - (i % 3 == 1 ? n / 2 : 0);
		b->displs[i] = off;
		off += n + 1; /* a gap the receive must not touch */
		/* alltoallv: rank r sends n - (r + i) % 2 items to rank i, blocks n + 1 apart. */
		b->a2a_sc[i] = n - (b->r + i) % 2;
		b->a2a_rc[i] = n - (i + b->r) % 2;
		b->a2a_sd[i] = b->a2a_rd[i] = i * (n + 1);
		b->a2a_wsd[i] = b->a2a_wrd[i] = i * (n + 1) * (int)sizeof(int);
		b->types[i] = MPI_INT;
	}
	b->len = (size_t)P * (n + 1);
	b->sbuf = malloc(b->len * sizeof(int));
	b->rbuf = malloc(b->len * sizeof(int));
}

static void release(struct bufs *b)
{
	free(b->counts);
	free(b->displs);
	free(b->a2a_sc);
	free(b->a2a_sd);
	free(b->a2a_rc);
	free(b->a2a_rd);
	free(b->a2a_wsd);
	free(b->a2a_wrd);
	free(b->types);
	free(b->sbuf);
	free(b->rbuf);
}

static void fill(struct bufs *b, uint64_t seed)
{
	tu_fill(b->sbuf, b->len * sizeof(int), seed * 131 + (uint64_t)b->r);
	memset(b->rbuf, 0xab, b->len * sizeof(int));
}

/* Computation between polls: the collective must progress in the polls. */
static double work(double x)
{
	for (int i = 0; i < 200; i++)
		x = x * 0.999 + 1.0;
	return x;
}

static double sink;

/* Polls req to completion, probing for a message that never comes (every
 * probe is a frame of its own, interleaved with the collective's). */
static void overlap(MPI_Request *req, MPI_Comm comm)
{
	int flag = 0, found;
	for (long polls = 0; !flag; polls++) {
		TU_CHECK(polls < POLL_LIMIT, "collective not complete after %ld polls", polls);
		sink = work(sink);
		if (polls % 4 == 3)
			TU_MPI(MPI_Iprobe(MPI_ANY_SOURCE, 77, comm, &found, MPI_STATUS_IGNORE));
		TU_MPI(MPI_Test(req, &flag, MPI_STATUS_IGNORE));
	}
}

/* One case: blocking result, then the non-blocking one on the same input. */
static int check_case(int c, struct bufs *b, uint64_t seed)
{
	fill(b, seed);
	TU_MPI(cases[c].fn(b, NULL));
	int *ref = malloc(b->len * sizeof(int));
	memcpy(ref, b->rbuf, b->len * sizeof(int));
	fill(b, seed);
	MPI_Request req;
	TU_MPI(cases[c].fn(b, &req));
	overlap(&req, b->comm);
	TU_CHECK(req == MPI_REQUEST_NULL, "%s: request not freed by MPI_Test", cases[c].name);
	int bad = memcmp(ref, b->rbuf, b->len * sizeof(int)) != 0;
	free(ref);
	return bad;
}

/* Several at once on two communicators, completed in whatever order they
 * finish. */
static int check_concurrent(struct bufs *w, struct bufs *d, uint64_t seed)
{
	enum { K = 4 };
	struct bufs *on[K] = {w, d, w, d};
	int which[K] = {1, 3, 14, 12}; /* ibcast, iallreduce, ialltoall, iallgather */
	int *ref[K];
	/* Blocking references, one buffer set each (the same order). */
	struct bufs own[K];
	for (int k = 0; k < K; k++) {
		setup(&own[k], on[k]->comm, on[k]->n);
		fill(&own[k], seed + (uint64_t)k);
		TU_MPI(cases[which[k]].fn(&own[k], NULL));
		ref[k] = malloc(own[k].len * sizeof(int));
		memcpy(ref[k], own[k].rbuf, own[k].len * sizeof(int));
		fill(&own[k], seed + (uint64_t)k);
	}
	MPI_Request reqs[K];
	for (int k = 0; k < K; k++)
		TU_MPI(cases[which[k]].fn(&own[k], &reqs[k]));
	int index, left = K;
	/* One with Waitany, the rest with Testsome, the last ones with Testall. */
	TU_MPI(MPI_Waitany(K, reqs, &index, MPI_STATUS_IGNORE));
	left--;
	for (long polls = 0; left > 2; polls++) {
		TU_CHECK(polls < POLL_LIMIT, "Testsome: collectives not complete");
		int outcount, idx[K];
		sink = work(sink);
		TU_MPI(MPI_Testsome(K, reqs, &outcount, idx, MPI_STATUSES_IGNORE));
		if (outcount != MPI_UNDEFINED)
			left -= outcount;
	}
	for (long polls = 0, flag = 0; !flag; polls++) {
		TU_CHECK(polls < POLL_LIMIT, "Testall: collectives not complete");
		int f;
		sink = work(sink);
		TU_MPI(MPI_Testall(K, reqs, &f, MPI_STATUSES_IGNORE));
		flag = f;
	}
	int bad = 0;
	for (int k = 0; k < K; k++) {
		bad |= memcmp(ref[k], own[k].rbuf, own[k].len * sizeof(int)) != 0;
		free(ref[k]);
		release(&own[k]);
	}
	return bad;
}

int main(int argc, char **argv)
{
	tu_init(&argc, &argv, "coll_nb");
	int rounds = argc > 1 ? atoi(argv[1]) : 2;
	const char *kill_at = getenv("CNB_KILL_AT");
	const char *inc = getenv("CHANMEM_INCARNATION");
	int first_life = !inc || atoi(inc) == 0;
	MPI_Comm dup;
	TU_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
	static const int sizes[] = {3, 5000};
	int bad[NCASES + 1] = {0};
	for (int round = 0; round < rounds; round++) {
		for (int s = 0; s < 2; s++) {
			struct bufs w, d;
			setup(&w, MPI_COMM_WORLD, sizes[s]);
			setup(&d, dup, sizes[s]);
			for (int c = 0; c < NCASES; c++)
				bad[c] |= check_case(c, (c % 2) ? &d : &w,
				                     (uint64_t)(round * 100 + s * 50 + c));
			bad[NCASES] |= check_concurrent(&w, &d, (uint64_t)(round * 7 + s));
			release(&w);
			release(&d);
		}
		if (kill_at && first_life && atoi(kill_at) == round && tu_rank == tu_size - 1)
			raise(SIGKILL);
	}
	int all[NCASES + 1];
	TU_MPI(MPI_Reduce(bad, all, NCASES + 1, MPI_INT, MPI_BOR, 0, MPI_COMM_WORLD));
	if (tu_rank == 0) {
		for (int c = 0; c < NCASES; c++)
			printf("%s: %s\n", cases[c].name,
			       all[c] ? "DIFFERS from the blocking call" : "ok");
		printf("concurrent: %s\n", all[NCASES] ? "DIFFERS from the blocking calls" : "ok");
	}
	TU_MPI(MPI_Comm_free(&dup));
	return tu_finalize();
}
