/* Stress: every rank sends messages of random sizes (0 B to 1 MiB, mostly
 * small) with random tags to random ranks, in rounds; receivers post exact,
 * source-wildcard, tag-wildcard and full-wildcard receives (ordered so that
 * MPI matching can never strand one) and verify every byte and a checksum
 * against what the sender generated. The plan comes from one seed every rank
 * shares, so each receiver knows what it must get. Prints one line from
 * rank 0 when every rank verified everything.
 *
 * stress_random [ROUNDS [SENDS_PER_ROUND [SEED]]] */
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LEN (1 << 20)
#define NTAGS 8

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

struct msg {
	int src, dst, tag, len;
};

/* Message k of rank src in round r: same answer on every rank. */
static struct msg plan(uint64_t seed, int size, int round, int src, int k)
{
	uint64_t h = mix(seed ^ mix(((uint64_t)round << 40) ^ ((uint64_t)src << 20) ^ (uint64_t)k));
	struct msg m = {
	    .src = src, .dst = (int)(h % (uint64_t)size), .tag = (int)((h >> 16) % NTAGS)};
	uint64_t pick = (h >> 24) % 100, r = mix(h);
	if (pick < 10)
		m.len = 0;
	else if (pick < 70)
		m.len = (int)(r % 1024);
	else if (pick < 95)
		m.len = (int)(r % 65536);
	else
		m.len = (int)(r % (MAX_LEN + 1));
	return m;
}

/* The payload depends only on what the receiver's status reports. */
static void fill(uint8_t *buf, const struct msg *m, int round)
{
	uint64_t x = mix(((uint64_t)round << 48) ^ ((uint64_t)m->src << 32) ^
	                 ((uint64_t)m->tag << 24) ^ (uint64_t)m->len);
	for (int i = 0; i < m->len; i++) {
		if ((i & 7) == 0)
			x = mix(x);
		buf[i] = (uint8_t)(x >> ((i & 7) * 8));
	}
}

static uint64_t checksum(const uint8_t *p, int len)
{
	uint64_t h = 1469598103934665603ull;
	for (int i = 0; i < len; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

static void die(int rank, const char *what)
{
	fprintf(stderr, "stress_random: rank %d: %s\n", rank, what);
	MPI_Abort(MPI_COMM_WORLD, 3);
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank, size;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	int rounds = argc > 1 ? atoi(argv[1]) : 6;
	int sends = argc > 2 ? atoi(argv[2]) : 4;
	uint64_t seed = argc > 3 ? strtoull(argv[3], NULL, 0) : 12345;
	if (rounds < 1 || sends < 1 || rounds > 1000 || sends > 64)
		die(rank, "usage: stress_random [ROUNDS 1-1000 [SENDS 1-64 [SEED]]]");

	int max_in = size * sends;
	struct msg *in = malloc((size_t)max_in * sizeof *in);
	struct msg *out = malloc((size_t)sends * sizeof *out);
	uint8_t **sbuf = calloc((size_t)sends, sizeof *sbuf);
	uint8_t **rbuf = calloc((size_t)max_in, sizeof *rbuf);
	MPI_Request *req = malloc((size_t)(max_in + sends) * sizeof *req);
	MPI_Status *st = malloc((size_t)(max_in + sends) * sizeof *st);
	int *kind = malloc((size_t)max_in * sizeof *kind);
	uint8_t *expect = malloc(MAX_LEN);
	if (!in || !out || !sbuf || !rbuf || !req || !st || !kind || !expect)
		die(rank, "out of memory");
	long long verified = 0, bytes = 0;

	for (int r = 0; r < rounds; r++) {
		/* What this rank gets this round. */
		int nin = 0;
		for (int s = 0; s < size; s++)
			for (int k = 0; k < sends; k++) {
				struct msg m = plan(seed, size, r, s, k);
				if (m.dst == rank)
					in[nin++] = m;
			}
		/* Receive kinds: exact; ANY_SOURCE when the tag is unique among
		 * this round's messages; ANY_TAG when the source is; ANY/ANY.
		 * Posted in that order, no receive can take another's message. */
		for (int i = 0; i < nin; i++) {
			int tag_unique = 1, src_unique = 1;
			for (int j = 0; j < nin; j++) {
				if (j == i)
					continue;
				if (in[j].tag == in[i].tag)
					tag_unique = 0;
				if (in[j].src == in[i].src)
					src_unique = 0;
			}
			int want = (int)(mix(seed + (uint64_t)(r * 7919 + rank * 31 + i)) % 4);
			if ((want == 1 && !tag_unique) || (want == 2 && !src_unique))
				want = 0;
			kind[i] = want;
		}
		int nreq = 0;
		for (int pass = 0; pass < 4; pass++)
			for (int i = 0; i < nin; i++) {
				if (kind[i] != pass)
					continue;
				rbuf[i] = malloc(MAX_LEN);
				if (rbuf[i] == NULL)
					die(rank, "out of memory");
				int src = pass == 0 || pass == 2 ? in[i].src : MPI_ANY_SOURCE;
				int tag = pass == 0 || pass == 1 ? in[i].tag : MPI_ANY_TAG;
				MPI_Irecv(rbuf[i], MAX_LEN, MPI_BYTE, src, tag, MPI_COMM_WORLD,
				          &req[nreq]);
				kind[i] = 10 + nreq; /* remembers its request slot */
				nreq++;
			}
		for (int k = 0; k < sends; k++) {
			out[k] = plan(seed, size, r, rank, k);
			sbuf[k] = malloc(out[k].len ? (size_t)out[k].len : 1);
			if (sbuf[k] == NULL)
				die(rank, "out of memory");
			fill(sbuf[k], &out[k], r);
			MPI_Isend(sbuf[k], out[k].len, MPI_BYTE, out[k].dst, out[k].tag,
			          MPI_COMM_WORLD, &req[nreq + k]);
		}
		MPI_Waitall(nreq + sends, req, st);

		/* Every expected (src, tag, len) must be reported exactly once,
		 * with the generated bytes. */
		char *used = calloc((size_t)nin + 1, 1);
		for (int i = 0; i < nin; i++) {
			int slot = kind[i] - 10, count;
			MPI_Get_count(&st[slot], MPI_BYTE, &count);
			int found = -1;
			for (int j = 0; j < nin && found < 0; j++)
				if (!used[j] && in[j].src == st[slot].MPI_SOURCE &&
				    in[j].tag == st[slot].MPI_TAG && in[j].len == count)
					found = j;
			if (found < 0) {
				char why[160];
				snprintf(why, sizeof why,
				         "round %d: unexpected message src %d tag %d len %d", r,
				         st[slot].MPI_SOURCE, st[slot].MPI_TAG, count);
				die(rank, why);
			}
			used[found] = 1;
			fill(expect, &in[found], r);
			if (checksum(rbuf[i], count) != checksum(expect, count) ||
			    memcmp(rbuf[i], expect, (size_t)count) != 0) {
				char why[160];
				snprintf(why, sizeof why,
				         "round %d: corrupt %d bytes from rank %d tag %d", r, count,
				         in[found].src, in[found].tag);
				die(rank, why);
			}
			verified++;
			bytes += count;
			free(rbuf[i]);
		}
		free(used);
		for (int k = 0; k < sends; k++)
			free(sbuf[k]);
		/* Nobody starts round r+1 (whose messages a wildcard could take)
		 * before everyone has all of round r. */
		MPI_Barrier(MPI_COMM_WORLD);
	}

	long long totals[2] = {verified, bytes}, sums[2];
	MPI_Reduce(totals, sums, 2, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
	if (rank == 0)
		printf("stress_random: %d ranks, %d rounds: %lld messages verified\n", size, rounds,
		       sums[0]);
	free(in);
	free(out);
	free(sbuf);
	free(rbuf);
	free(req);
	free(st);
	free(kind);
	free(expect);
	MPI_Finalize();
	return 0;
}
