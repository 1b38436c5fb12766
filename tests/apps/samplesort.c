/* samplesort: a parallel sample sort of 32-bit integer keys.
 *
 *   samplesort [-n KEYS] [-r ROUNDS]   KEYS keys in all (default 200000),
 *                                      sorted ROUNDS times (default 4), each
 *                                      round with other keys
 *
 * The keys are a function of their global index and the round, block-
 * distributed, so the problem is the same on any number of ranks. Even
 * rounds draw from the full 32-bit range, odd ones from 1000 values (many
 * duplicates, several equal splitters). A round:
 *   1. each rank sorts its keys and picks up to P regular samples;
 *   2. MPI_Allgather of the sample counts, MPI_Allgatherv of the samples;
 *      every rank sorts them and takes the same P-1 splitters;
 *   3. each rank cuts its sorted keys at the splitters: MPI_Alltoall of
 *      the counts, MPI_Alltoallv of the keys; each rank sorts what it got.
 *
 * Self-check, every round: each rank's keys are sorted and the ranks'
 * ranges follow one another (MPI_Allgather of first/last); the key count
 * and two checksums (a sum and an xor of hashed keys, MPI_Allreduce with
 * MPI_SUM and MPI_BXOR) are the same before and after; an order-dependent
 * digest of the result (each key hashed with its global position, the
 * positions from MPI_Exscan) equals the digest of a serial sort on rank 0.
 *
 * Output (deterministic): every rank prints how many keys it got in each
 * round; rank 0 a line per round and a result line that do not depend on
 * the number of ranks. A "step" for the fault points (app_common.h) is a
 * round; the fault point is between the count exchange and the data
 * exchange. */
#include "app_common.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DUP_RANGE 1000u

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

static unsigned key_of(uint64_t global, long round)
{
	uint64_t h = mix64(global * 0x9e3779b97f4a7c15ULL + (uint64_t)round + 1);
	return round % 2 ? (unsigned)(h % DUP_RANGE) : (unsigned)(h >> 32);
}

static int cmp_unsigned(const void *a, const void *b)
{
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
	return (x > y) - (x < y);
}

/* Number of keys in sorted k[0..n) that are < v. */
static long lower_bound(const unsigned *k, long n, unsigned v)
{
	long lo = 0, hi = n;
	while (lo < hi) {
		long mid = lo + (hi - lo) / 2;
		if (k[mid] < v)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Order-dependent digest of sorted keys starting at global position `at`. */
static uint64_t digest(const unsigned *k, long n, uint64_t at)
{
	uint64_t d = 0;
	for (long i = 0; i < n; i++)
		d += mix64(((uint64_t)k[i] << 32) ^ (at + (uint64_t)i));
	return d;
}

/* Count, sum and xor of hashed keys: what must survive the exchange. */
struct multiset {
	uint64_t count, sum, xor;
};

static struct multiset summarize(const unsigned *k, long n)
{
	uint64_t local[2] = {(uint64_t)n, 0}, all[2], xor = 0, all_xor;
	for (long i = 0; i < n; i++) {
		local[1] += mix64(k[i]);
		xor ^= mix64((uint64_t)k[i] + 0x5555);
	}
	MPI_Allreduce(local, all, 2, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
	MPI_Allreduce(&xor, &all_xor, 1, MPI_UINT64_T, MPI_BXOR, MPI_COMM_WORLD);
	return (struct multiset){all[0], all[1], all_xor};
}

/* One round: returns the digest of the sorted result (on every rank). */
static uint64_t sort_round(long total, long round)
{
	int P = app_size;
	long first = app_rank * (total / P) + (app_rank < total % P ? app_rank : total % P);
	long n = total / P + (app_rank < total % P ? 1 : 0);
	unsigned *keys = app_alloc((size_t)n * sizeof *keys);
	for (long i = 0; i < n; i++)
		keys[i] = key_of((uint64_t)(first + i), round);
	struct multiset before = summarize(keys, n);
	qsort(keys, (size_t)n, sizeof *keys, cmp_unsigned);

	/* Samples and splitters. */
	int nsamples = n < P ? (int)n : P;
	unsigned *mine = app_alloc((size_t)P * sizeof *mine);
	for (int i = 0; i < nsamples; i++)
		mine[i] = keys[(long)i * n / nsamples];
	int *scounts = app_alloc((size_t)P * sizeof *scounts);
	int *sdispls = app_alloc((size_t)P * sizeof *sdispls);
	MPI_Allgather(&nsamples, 1, MPI_INT, scounts, 1, MPI_INT, MPI_COMM_WORLD);
	int S = 0;
	for (int r = 0; r < P; r++) {
		sdispls[r] = S;
		S += scounts[r];
	}
	unsigned *samples = app_alloc((size_t)S * sizeof *samples);
	MPI_Allgatherv(mine, nsamples, MPI_UNSIGNED, samples, scounts, sdispls, MPI_UNSIGNED,
	               MPI_COMM_WORLD);
	qsort(samples, (size_t)S, sizeof *samples, cmp_unsigned);

	/* Bucket d gets the keys in [splitter d, splitter d+1). */
	int *sendcounts = app_alloc((size_t)P * sizeof(int));
	int *senddispls = app_alloc((size_t)P * sizeof(int));
	int *recvcounts = app_alloc((size_t)P * sizeof(int));
	int *recvdispls = app_alloc((size_t)P * sizeof(int));
	long cut = 0;
	for (int d = 0; d < P; d++) {
		long next = d == P - 1 ? n : lower_bound(keys, n, samples[(long)(d + 1) * S / P]);
		senddispls[d] = (int)cut;
		sendcounts[d] = (int)(next - cut);
		cut = next;
	}
	MPI_Alltoall(sendcounts, 1, MPI_INT, recvcounts, 1, MPI_INT, MPI_COMM_WORLD);
	app_step(round);
	long got = 0;
	for (int r = 0; r < P; r++) {
		recvdispls[r] = (int)got;
		got += recvcounts[r];
	}
	unsigned *sorted = app_alloc((size_t)got * sizeof *sorted);
	MPI_Alltoallv(keys, sendcounts, senddispls, MPI_UNSIGNED, sorted, recvcounts, recvdispls,
	              MPI_UNSIGNED, MPI_COMM_WORLD);
	qsort(sorted, (size_t)got, sizeof *sorted, cmp_unsigned);
	printf("samplesort: rank %d: round %ld: %ld keys", app_rank, round, got);
	if (got > 0)
		printf(" from %u to %u", sorted[0], sorted[got - 1]);
	printf("\n");

	/* Checks. */
	struct multiset after = summarize(sorted, got);
	APP_CHECK(after.count == before.count && after.count == (uint64_t)total,
	          "round %ld: %llu keys before, %llu after, %ld expected", round,
	          (unsigned long long)before.count, (unsigned long long)after.count, total);
	APP_CHECK(after.sum == before.sum && after.xor == before.xor,
	          "round %ld: the keys changed in the exchange (checksums differ)", round);
	uint64_t edge[3] = {(uint64_t)got, got ? sorted[0] : 0, got ? sorted[got - 1] : 0};
	uint64_t *edges = app_alloc((size_t)P * sizeof edge);
	MPI_Allgather(edge, 3, MPI_UINT64_T, edges, 3, MPI_UINT64_T, MPI_COMM_WORLD);
	uint64_t last = 0;
	for (int r = 0; r < P; r++) {
		if (edges[3 * r] == 0)
			continue;
		APP_CHECK(edges[3 * r + 1] >= last, "round %ld: rank %d starts at %llu, below %llu",
		          round, r, (unsigned long long)edges[3 * r + 1], (unsigned long long)last);
		last = edges[3 * r + 2];
	}
	for (long i = 1; i < got; i++)
		APP_CHECK(sorted[i - 1] <= sorted[i], "round %ld: key %ld out of order", round, i);
	uint64_t count = (uint64_t)got, position = 0, d, sum;
	MPI_Exscan(&count, &position, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
	if (app_rank == 0)
		position = 0; /* MPI_Exscan leaves rank 0's result undefined */
	d = digest(sorted, got, position);
	MPI_Allreduce(&d, &sum, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);

	if (app_rank == 0) {
		unsigned *all = app_alloc((size_t)total * sizeof *all);
		for (long i = 0; i < total; i++)
			all[i] = key_of((uint64_t)i, round);
		qsort(all, (size_t)total, sizeof *all, cmp_unsigned);
		uint64_t want = digest(all, total, 0);
		APP_CHECK(sum == want, "round %ld: digest %016llx, a serial sort gives %016llx",
		          round, (unsigned long long)sum, (unsigned long long)want);
		printf("samplesort: round %ld: %ld keys from %u to %u, sorted, count and checksums "
		       "kept, digest %016llx as a serial sort: ok\n",
		       round, total, all[0], all[total - 1], (unsigned long long)sum);
		free(all);
	}
	free(keys);
	free(mine);
	free(scounts);
	free(sdispls);
	free(samples);
	free(sendcounts);
	free(recvcounts);
	free(senddispls);
	free(recvdispls);
	free(sorted);
	free(edges);
	return sum;
}

int main(int argc, char **argv)
{
	long total = 200000, rounds = 4;
	const struct app_option options[] = {
	    {"-n", "KEYS", &total, 1, 20000000},
	    {"-r", "ROUNDS", &rounds, 1, 1000},
	};
	app_init(&argc, &argv, "samplesort", options, 2);
	uint64_t combined = 0;
	for (long round = 1; round <= rounds; round++)
		combined = mix64(combined ^ sort_round(total, round));
	if (app_rank == 0)
		printf("samplesort: result: %ld rounds of %ld keys, combined digest %016llx: ok\n",
		       rounds, total, (unsigned long long)combined);
	MPI_Finalize();
	return 0;
}
