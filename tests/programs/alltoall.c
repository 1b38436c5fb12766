/* alltoall: every rank sends a distinct payload to every other rank, with
 * point-to-point calls only (Isend/Irecv/Waitall, no collectives).
 *
 * Round 1 posts one Irecv per source; round 2 posts the same number of
 * MPI_ANY_SOURCE Irecvs and sorts out who sent what from the statuses.
 * Every payload depends on (sender, receiver, round) and is checked byte for
 * byte; each rank hashes what it received in source order and sends the
 * digest to rank 0, which recomputes every rank's expected digest and prints
 * the job's digest (deterministic: a function of the rank count only). */
#include "testutil.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ROUNDS = 2, MAX_PAYLOAD = 3000 + 16384 };

static int payload_size(int from, int to, int round)
{
	uint32_t h = (uint32_t)(from * 64 + to) * 2654435761u + (uint32_t)round * 40503u;
	int size = (int)((h >> 8) % 3000);
	if ((from * 7 + to * 3 + round) % 17 == 0)
		size += 16384; /* a few larger ones, past typical eager limits */
	return size;
}

static uint64_t seed_of(int from, int to, int round)
{
	return ((uint64_t)round << 40) | ((uint64_t)from << 20) | (uint64_t)to;
}

/* Hash of everything rank `to` receives in a round, in source order. */
static uint64_t expected_digest(int to, unsigned char *scratch)
{
	uint64_t h = TU_HASH_INIT;
	for (int round = 0; round < ROUNDS; round++)
		for (int from = 0; from < tu_size; from++) {
			if (from == to)
				continue;
			int size = payload_size(from, to, round);
			tu_fill(scratch, (size_t)size, seed_of(from, to, round));
			h = tu_hash_u64(h, (uint64_t)size);
			h = tu_hash(h, scratch, (size_t)size);
		}
	return h;
}

/* One round: returns this rank's hash of the round, in source order. */
static uint64_t exchange(int round, uint64_t h)
{
	int n = tu_size;
	int tag = 100 + round;
	unsigned char **sbufs = calloc((size_t)n, sizeof(*sbufs));
	unsigned char **rbufs = calloc((size_t)n, sizeof(*rbufs));
	MPI_Request *reqs = calloc(2 * (size_t)n, sizeof(*reqs));
	MPI_Status *sts = calloc(2 * (size_t)n, sizeof(*sts));
	int *slot_of_source = calloc((size_t)n, sizeof(int));
	TU_CHECK(sbufs && rbufs && reqs && sts && slot_of_source, "out of memory");

	/* Receives first (slot k <-> peer k for round 0), then sends. */
	int nreq = 0;
	for (int k = 0; k < n; k++) {
		if (k == tu_rank)
			continue;
		rbufs[k] = malloc(MAX_PAYLOAD);
		TU_CHECK(rbufs[k], "out of memory");
		int source = round == 0 ? k : MPI_ANY_SOURCE;
		TU_MPI(MPI_Irecv(rbufs[k], MAX_PAYLOAD, MPI_BYTE, source, tag, MPI_COMM_WORLD,
		                 &reqs[nreq++]));
	}
	for (int k = 1; k < n; k++) {
		int to = (tu_rank + k) % n; /* staggered, so no rank is hit by all at once */
		int size = payload_size(tu_rank, to, round);
		sbufs[to] = malloc(size ? (size_t)size : 1);
		TU_CHECK(sbufs[to], "out of memory");
		tu_fill(sbufs[to], (size_t)size, seed_of(tu_rank, to, round));
		TU_MPI(
		    MPI_Isend(sbufs[to], size, MPI_BYTE, to, tag, MPI_COMM_WORLD, &reqs[nreq++]));
	}
	TU_MPI(MPI_Waitall(nreq, reqs, sts));

	/* Receive slots in posting order are the peers in rank order. */
	for (int k = 0; k < n; k++)
		slot_of_source[k] = -1;
	int slot = 0;
	for (int k = 0; k < n; k++) {
		if (k == tu_rank)
			continue;
		int src = sts[slot].MPI_SOURCE;
		TU_CHECK(src >= 0 && src < n && src != tu_rank, "round %d: status source %d", round,
		         src);
		TU_CHECK(round != 0 || src == k, "round 0: receive for rank %d got rank %d", k,
		         src);
		TU_CHECK(slot_of_source[src] < 0, "round %d: two messages from rank %d", round,
		         src);
		TU_CHECK(sts[slot].MPI_TAG == tag, "round %d: tag %d", round, sts[slot].MPI_TAG);
		slot_of_source[src] = k;
		slot++;
	}
	for (int src = 0; src < n; src++) {
		if (src == tu_rank)
			continue;
		int k = slot_of_source[src];
		TU_CHECK(k >= 0, "round %d: nothing from rank %d", round, src);
		int status_index = k < tu_rank ? k : k - 1;
		int count = -1, size = payload_size(src, tu_rank, round);
		TU_MPI(MPI_Get_count(&sts[status_index], MPI_BYTE, &count));
		TU_CHECK(count == size, "round %d: %d bytes from rank %d, expected %d", round,
		         count, src, size);
		long bad = tu_verify(rbufs[k], (size_t)size, seed_of(src, tu_rank, round));
		TU_CHECK(bad < 0, "round %d: byte %ld from rank %d differs", round, bad, src);
		h = tu_hash_u64(h, (uint64_t)size);
		h = tu_hash(h, rbufs[k], (size_t)size);
	}
	for (int k = 0; k < n; k++) {
		free(sbufs[k]);
		free(rbufs[k]);
	}
	free(sbufs);
	free(rbufs);
	free(reqs);
	free(sts);
	free(slot_of_source);
	return h;
}

int main(int argc, char **argv)
{
	tu_init(&argc, &argv, "alltoall");
	tu_require_size(2, 1024);
	uint64_t h = TU_HASH_INIT;
	for (int round = 0; round < ROUNDS; round++)
		h = exchange(round, h);

	if (tu_rank != 0) {
		TU_MPI(MPI_Send(&h, 1, MPI_UINT64_T, 0, TU_TAG_REPORT, MPI_COMM_WORLD));
	} else {
		unsigned char *scratch = malloc(MAX_PAYLOAD);
		TU_CHECK(scratch, "out of memory");
		uint64_t job = TU_HASH_INIT;
		long long bytes = 0;
		for (int r = 0; r < tu_size; r++) {
			uint64_t got = h;
			if (r != 0)
				TU_MPI(MPI_Recv(&got, 1, MPI_UINT64_T, r, TU_TAG_REPORT,
				                MPI_COMM_WORLD, MPI_STATUS_IGNORE));
			uint64_t want = expected_digest(r, scratch);
			TU_CHECK(got == want, "rank %d digest %016" PRIx64 ", expected %016" PRIx64,
			         r, got, want);
			job = tu_hash_u64(job, got);
			for (int round = 0; round < ROUNDS; round++)
				for (int from = 0; from < tu_size; from++)
					if (from != r)
						bytes += payload_size(from, r, round);
		}
		free(scratch);
		printf("alltoall: %d ranks, %d rounds (specific sources, MPI_ANY_SOURCE), %d "
		       "messages, %lld bytes, all verified\n",
		       tu_size, ROUNDS, ROUNDS * tu_size * (tu_size - 1), bytes);
		printf("alltoall: digest %016" PRIx64 "\n", job);
	}
	TU_MPI(MPI_Barrier(MPI_COMM_WORLD));
	if (tu_rank == 0)
		printf("alltoall: all checks passed\n");
	return tu_finalize();
}
