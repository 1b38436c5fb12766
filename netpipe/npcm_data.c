/* NPcm's data: the reference bytes every data message is a window of, sending and receiving
 * data messages, and their verification (the method is described at the top of NPcm.c). */
#include "npcm.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Deterministic (every rank builds the same bytes), never 0 (cleared buffers never match), and
 * ref[j] differs from ref[j-1], ref[j-2], ref[j-(WINDOWS-1)] and ref[j-(WINDOWS-2)]: message
 * windows that are 1 or 2 apart, wrap-around included, differ at every byte. */
void build_reference(unsigned char *ref, long long len)
{
	static const long long shifts[] = {1, 2, WINDOWS - 1, WINDOWS - 2};
	uint64_t state = 0x9e3779b97f4a7c15ULL;
	for (long long j = 0; j < len; j++) {
		unsigned char byte;
		int clash;
		do {
			state ^= state << 13;
			state ^= state >> 7;
			state ^= state << 17;
			byte = (unsigned char)(state >> 24);
			clash = byte == 0;
			for (size_t k = 0; k < sizeof shifts / sizeof shifts[0] && !clash; k++)
				clash = j >= shifts[k] && ref[j - shifts[k]] == byte;
		} while (clash);
		ref[j] = byte;
	}
}

static const unsigned char *window(const struct bench *b, long long count)
{
	return b->ref + count % WINDOWS;
}

void *allocate(long long bytes)
{
	void *p = calloc(1, (size_t)(bytes > 0 ? bytes : 1));
	if (p == NULL) {
		fprintf(stderr, "NPcm: out of memory (%lld bytes)\n", bytes);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	return p;
}

void send_data(struct bench *b, long long size)
{
	const unsigned char *data = window(b, b->sent);
	struct corruption *c = &b->corrupt;
	if (c->active && c->rank == b->rank && c->size == size) {
		memcpy(b->scratch, data, (size_t)size);
		b->scratch[c->offset] = window(b, b->sent + WINDOWS - 1)[c->offset];
		data = b->scratch;
		c->active = 0;
	}
	if (b->opt.synchronous)
		MPI_Ssend((void *)data, (int)size, MPI_BYTE, b->peer, TAG_DATA, MPI_COMM_WORLD);
	else
		MPI_Send((void *)data, (int)size, MPI_BYTE, b->peer, TAG_DATA, MPI_COMM_WORLD);
	b->sent++;
}

/* The buffer data message number `count` lands in. */
static unsigned char *rbuf_for(struct bench *b, long long count)
{
	return b->rbuf[count % 2];
}

void post_recv(struct bench *b, long long count, long long size, MPI_Request *req)
{
	MPI_Irecv(rbuf_for(b, count), (int)size, MPI_BYTE, b->src, TAG_DATA, MPI_COMM_WORLD, req);
}

void recv_data(struct bench *b, long long count, long long size)
{
	MPI_Recv(rbuf_for(b, count), (int)size, MPI_BYTE, b->src, TAG_DATA, MPI_COMM_WORLD,
	         MPI_STATUS_IGNORE);
}

void verify(struct bench *b, long long count, long long size)
{
	if (!b->opt.verify || size == 0)
		return;
	const unsigned char *got = rbuf_for(b, count), *want = window(b, count);
	if (memcmp(got, want, (size_t)size) == 0)
		return;
	long long at = 0;
	while (got[at] == want[at])
		at++;
	fprintf(stderr,
	        "NPcm: rank %d: verification failed for a %lld-byte message (trial %d, repetition "
	        "%d): first bad byte at offset %lld (got 0x%02x, expected 0x%02x)\n",
	        b->rank, size, b->trial + 1, b->rep + 1, at, got[at], want[at]);
	fflush(stderr);
	MPI_Abort(MPI_COMM_WORLD, EXIT_VERIFY);
}

/* At each new size the receive buffers are cleared to a value REF never holds, so a byte the
 * transport did not write always shows. */
void clear_buffers(struct bench *b, long long size)
{
	memset(b->rbuf[0], 0, (size_t)size);
	memset(b->rbuf[1], 0, (size_t)size);
}
