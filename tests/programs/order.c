/* order: MPI's non-overtaking rule under 10 000 interleaved messages.
 *
 * Ranks 1..N-1 send to rank 0 a deterministic schedule (seeded by the
 * sender's rank): tags 0..4, sizes from 0 B to ~300 KB, grouped in bursts
 * (a single blocking Send, or 2..16 Isends completed by Waitall, a Waitany
 * loop or Waits in reverse order). Rank 0 replays every sender's schedule,
 * so for each receive it knows which message MPI allows: the earliest
 * not-yet-received message of the delivering source that the receive's tag
 * (or MPI_ANY_TAG) matches. It mixes receives of every kind (ANY/ANY,
 * source/ANY_TAG, ANY_SOURCE/tag, source/tag; Recv, Irecv+Wait, Probe+Recv)
 * and checks tag, size and every byte of what each one got.
 *
 * A receive is only posted when a message it matches is certainly being sent
 * (it is in its sender's current burst), so the program is correct MPI even
 * where large sends wait for their receive (rendezvous). */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
	TOTAL_MESSAGES = 10000,
	NTAGS = 5,
	MAX_BURST = 16,
	MAX_SIZE = 300000,
};

struct message {
	int tag;
	int size;
	int burst; /* index of the burst it belongs to, per sender */
	int received;
};

struct schedule {
	int count;
	int nbursts;
	struct message *msgs;
	long long bytes;
};

static int messages_of(int sender)
{
	int nsenders = tu_size - 1;
	return TOTAL_MESSAGES / nsenders + (sender - 1 < TOTAL_MESSAGES % nsenders ? 1 : 0);
}

static int random_size(uint64_t *rng)
{
	uint64_t r = tu_rand(rng);
	unsigned pick = (unsigned)(r % 100);
	uint64_t v = r >> 8;
	if (pick < 40)
		return (int)(v % 65); /* 0..64 */
	if (pick < 70)
		return 65 + (int)(v % 960); /* ..1024 */
	if (pick < 90)
		return 1025 + (int)(v % 7168); /* ..8192 */
	if (pick < 99)
		return 8193 + (int)(v % 57344); /* ..65536 */
	return 65537 + (int)(v % (MAX_SIZE - 65536));
}

static void build_schedule(int sender, struct schedule *s)
{
	uint64_t rng = 0x5eed0000ULL + (uint64_t)sender;
	s->count = messages_of(sender);
	s->msgs = calloc((size_t)s->count, sizeof(*s->msgs));
	TU_CHECK(s->msgs, "out of memory");
	s->bytes = 0;
	int i = 0, burst = 0;
	while (i < s->count) {
		int len = tu_rand(&rng) % 3 == 0 ? 1 : 2 + (int)(tu_rand(&rng) % (MAX_BURST - 1));
		for (int k = 0; k < len && i < s->count; k++, i++) {
			s->msgs[i].tag = (int)(tu_rand(&rng) % NTAGS);
			s->msgs[i].size = random_size(&rng);
			s->msgs[i].burst = burst;
			s->bytes += s->msgs[i].size;
		}
		burst++;
	}
	s->nbursts = burst;
}

static uint64_t seed_of(int sender, int index)
{
	return ((uint64_t)sender << 32) | (uint64_t)index;
}

/* ---- sender ---- */

static void run_sender(void)
{
	struct schedule s;
	build_schedule(tu_rank, &s);
	unsigned char *pool = malloc((size_t)MAX_BURST * MAX_SIZE);
	TU_CHECK(pool, "out of memory");
	uint64_t rng = 0xc0de0000ULL + (uint64_t)tu_rank; /* how to complete bursts */
	int i = 0;
	while (i < s.count) {
		int first = i, burst = s.msgs[i].burst;
		while (i < s.count && s.msgs[i].burst == burst)
			i++;
		int len = i - first;
		if (len == 1) {
			tu_fill(pool, (size_t)s.msgs[first].size, seed_of(tu_rank, first));
			TU_MPI(MPI_Send(pool, s.msgs[first].size, MPI_BYTE, 0, s.msgs[first].tag,
			                MPI_COMM_WORLD));
			continue;
		}
		MPI_Request reqs[MAX_BURST];
		for (int k = 0; k < len; k++) {
			unsigned char *buf = pool + (size_t)k * MAX_SIZE;
			const struct message *m = &s.msgs[first + k];
			tu_fill(buf, (size_t)m->size, seed_of(tu_rank, first + k));
			TU_MPI(
			    MPI_Isend(buf, m->size, MPI_BYTE, 0, m->tag, MPI_COMM_WORLD, &reqs[k]));
		}
		switch (tu_rand(&rng) % 3) {
		case 0:
			TU_MPI(MPI_Waitall(len, reqs, MPI_STATUSES_IGNORE));
			break;
		case 1:
			for (int k = 0; k < len; k++) {
				int index = -1;
				TU_MPI(MPI_Waitany(len, reqs, &index, MPI_STATUS_IGNORE));
				TU_CHECK(index >= 0 && index < len, "MPI_Waitany index %d", index);
			}
			break;
		default:
			for (int k = len - 1; k >= 0; k--)
				TU_MPI(MPI_Wait(&reqs[k], MPI_STATUS_IGNORE));
		}
		for (int k = 0; k < len; k++)
			TU_CHECK(reqs[k] == MPI_REQUEST_NULL, "completed send request %d not null",
			         k);
	}
	free(pool);
	free(s.msgs);
}

/* ---- receiver ---- */

static struct schedule *sched; /* per sender, index 0 unused */
static int *first_unreceived;  /* per sender */
static int remaining;

static int sender_has_remaining(int src)
{
	return first_unreceived[src] < sched[src].count;
}

/* Is a message with this tag (or any, if tag < 0) certainly being sent by
 * src: unreceived and in src's current burst? */
static int available(int src, int tag)
{
	if (!sender_has_remaining(src))
		return 0;
	const struct schedule *s = &sched[src];
	int burst = s->msgs[first_unreceived[src]].burst;
	for (int i = first_unreceived[src]; i < s->count && s->msgs[i].burst == burst; i++)
		if (!s->msgs[i].received && (tag < 0 || s->msgs[i].tag == tag))
			return 1;
	return 0;
}

/* The only message MPI allows src to deliver to a receive for tag (or any). */
static int expected_index(int src, int tag)
{
	const struct schedule *s = &sched[src];
	for (int i = first_unreceived[src]; i < s->count; i++)
		if (!s->msgs[i].received && (tag == MPI_ANY_TAG || s->msgs[i].tag == tag))
			return i;
	return -1;
}

enum kind { K_ANY_ANY, K_SRC_ANY, K_ANY_TAG, K_SRC_TAG, NKINDS };
static const char *const kind_names[NKINDS] = {"ANY_SOURCE/ANY_TAG", "source/ANY_TAG",
                                               "ANY_SOURCE/tag", "source/tag"};
static long kind_used[NKINDS];

/* Picks a receive that some message certainly being sent will satisfy. */
static void choose_receive(uint64_t *rng, int *source, int *tag, enum kind *kind)
{
	for (;;) {
		*kind = (enum kind)(tu_rand(rng) % NKINDS);
		int src = 1 + (int)(tu_rand(rng) % (uint64_t)(tu_size - 1));
		int t = (int)(tu_rand(rng) % NTAGS);
		switch (*kind) {
		case K_ANY_ANY:
			*source = MPI_ANY_SOURCE;
			*tag = MPI_ANY_TAG;
			return;
		case K_SRC_ANY:
			if (!available(src, -1))
				break;
			*source = src;
			*tag = MPI_ANY_TAG;
			return;
		case K_ANY_TAG:
			for (int s = 1; s < tu_size; s++) {
				if (available(s, t)) {
					*source = MPI_ANY_SOURCE;
					*tag = t;
					return;
				}
			}
			break;
		default:
			if (!available(src, t))
				break;
			*source = src;
			*tag = t;
			return;
		}
	}
}

static void check_delivery(const MPI_Status *st, int tag_asked, const unsigned char *buf,
                           const char *how)
{
	int src = st->MPI_SOURCE;
	TU_CHECK(src >= 1 && src < tu_size, "%s: status source %d", how, src);
	int idx = expected_index(src, tag_asked);
	TU_CHECK(idx >= 0, "%s: rank %d delivered a message beyond its schedule (tag %d)", how, src,
	         st->MPI_TAG);
	struct message *m = &sched[src].msgs[idx];
	int count = -1;
	TU_MPI(MPI_Get_count(st, MPI_BYTE, &count));
	TU_CHECK(st->MPI_TAG == m->tag && count == m->size,
	         "%s (tag asked %d): from rank %d got tag %d size %d, but MPI order requires its "
	         "message #%d: tag %d size %d",
	         how, tag_asked, src, st->MPI_TAG, count, idx, m->tag, m->size);
	long bad = tu_verify(buf, (size_t)count, seed_of(src, idx));
	TU_CHECK(bad < 0,
	         "%s: rank %d message #%d (tag %d, %d bytes): byte %ld differs "
	         "(overtaken or corrupted)",
	         how, src, idx, m->tag, m->size, bad);
	m->received = 1;
	while (first_unreceived[src] < sched[src].count &&
	       sched[src].msgs[first_unreceived[src]].received)
		first_unreceived[src]++;
	remaining--;
}

static void run_receiver(void)
{
	sched = calloc((size_t)tu_size, sizeof(*sched));
	first_unreceived = calloc((size_t)tu_size, sizeof(int));
	unsigned char *buf = malloc(MAX_SIZE);
	TU_CHECK(sched && first_unreceived && buf, "out of memory");
	long long bytes = 0;
	for (int s = 1; s < tu_size; s++) {
		build_schedule(s, &sched[s]);
		remaining += sched[s].count;
		bytes += sched[s].bytes;
	}
	uint64_t rng = 0xfeed0000ULL;
	while (remaining > 0) {
		int source, tag;
		enum kind kind;
		choose_receive(&rng, &source, &tag, &kind);
		kind_used[kind]++;
		MPI_Status st;
		unsigned how = (unsigned)(tu_rand(&rng) % 10);
		if (how < 7) {
			TU_MPI(MPI_Recv(buf, MAX_SIZE, MPI_BYTE, source, tag, MPI_COMM_WORLD, &st));
			check_delivery(&st, tag, buf, "MPI_Recv");
		} else if (how < 9) {
			MPI_Request req;
			TU_MPI(
			    MPI_Irecv(buf, MAX_SIZE, MPI_BYTE, source, tag, MPI_COMM_WORLD, &req));
			TU_MPI(MPI_Wait(&req, &st));
			check_delivery(&st, tag, buf, "MPI_Irecv+MPI_Wait");
		} else {
			/* The receive names what the probe found: it must get that message. */
			MPI_Status probed;
			int probed_count = -1, count = -1;
			TU_MPI(MPI_Probe(source, tag, MPI_COMM_WORLD, &probed));
			TU_MPI(MPI_Get_count(&probed, MPI_BYTE, &probed_count));
			TU_MPI(MPI_Recv(buf, MAX_SIZE, MPI_BYTE, probed.MPI_SOURCE, probed.MPI_TAG,
			                MPI_COMM_WORLD, &st));
			TU_MPI(MPI_Get_count(&st, MPI_BYTE, &count));
			TU_CHECK(st.MPI_SOURCE == probed.MPI_SOURCE && count == probed_count,
			         "MPI_Recv after MPI_Probe got source %d size %d, probe said %d %d",
			         st.MPI_SOURCE, count, probed.MPI_SOURCE, probed_count);
			check_delivery(&st, tag, buf, "MPI_Probe+MPI_Recv");
		}
	}
	int flag = 1;
	TU_MPI(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
	TU_CHECK(!flag, "a message is left over after the whole schedule was received");
	for (int k = 0; k < NKINDS; k++)
		TU_CHECK(kind_used[k] >= 10, "receive kind %s used only %ld times", kind_names[k],
		         kind_used[k]);
	printf("order: %d messages from %d senders over %d tags, %lld bytes\n", TOTAL_MESSAGES,
	       tu_size - 1, NTAGS, bytes);
	printf("order: receives ANY_SOURCE/ANY_TAG, source/ANY_TAG, ANY_SOURCE/tag, source/tag "
	       "via Recv, Irecv+Wait, Probe+Recv: every one got the message MPI order requires\n");
	for (int s = 1; s < tu_size; s++)
		free(sched[s].msgs);
	free(sched);
	free(first_unreceived);
	free(buf);
}

int main(int argc, char **argv)
{
	tu_init(&argc, &argv, "order");
	tu_require_size(2, 64);
	if (tu_rank == 0)
		run_receiver();
	else
		run_sender();
	TU_MPI(MPI_Barrier(MPI_COMM_WORLD));
	if (tu_rank == 0)
		printf("order: all checks passed\n");
	return tu_finalize();
}
