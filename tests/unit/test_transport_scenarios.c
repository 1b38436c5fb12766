/* Message exchanges run through the transport API by every rank of a test
 * job; the same scenarios run over the direct and the cm transport. Every
 * received byte is checked; orders are checked message by message. */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_transport_harness.h"

#define MIB (1024u * 1024u)

static uint32_t seed_of(int src, int dst, size_t n)
{
	return (uint32_t)(src * 7919 + dst * 104729) ^ (uint32_t)n;
}

/* 0..3, then 2^k-3 .. 2^k+3 up to 8 MiB+3 (every offset below 64 KiB,
 * -3/0/+3 above). */
static size_t size_list(size_t *out, size_t max)
{
	size_t n = 0;
	for (size_t s = 0; s < 4; s++)
		out[n++] = s;
	for (int k = 3; k <= 23; k++) {
		size_t base = (size_t)1 << k;
		for (int d = -3; d <= 3; d++) {
			if (k >= 16 && d != -3 && d != 0 && d != 3)
				continue;
			size_t s = base + (size_t)(long)d;
			if (s <= max)
				out[n++] = s;
		}
	}
	return n;
}

int scenario_sizes(struct cm_transport *t, int rank, int size)
{
	size_t sizes[200];
	size_t count = size_list(sizes, 8 * MIB + 3);
	size_t max = 8 * MIB + 3;
	uint8_t *sbuf = malloc(max), *rbuf = malloc(max);
	if (!sbuf || !rbuf)
		FAILF("out of memory");
	for (size_t i = 0; i < count; i++) {
		size_t n = sizes[i];
		struct cm_req st;
		if (rank == 0) {
			/* Receive posted before the send: the reply lands in place. */
			struct cm_req r = {
			    .kind = CM_REQ_RECV, .peer = 1, .tag = 2, .rbuf = rbuf, .rcap = n};
			if (t->irecv(t, &r) < 0)
				FAILF("irecv");
			fill_pattern(sbuf, n, seed_of(0, 1, n));
			if (t_send(t, 1, 1, 0, sbuf, n, 0) < 0 || t_wait(t, &r) < 0)
				FAILF("exchange of %zu bytes", n);
			if (r.error || r.st_bytes != n || r.st_source != 1 || r.st_tag != 2)
				FAILF("reply of %zu bytes: error %d bytes %zu src %d tag %d", n,
				      r.error, r.st_bytes, r.st_source, r.st_tag);
			size_t bad = check_pattern(rbuf, n, seed_of(1, 0, n));
			if (bad != (size_t)-1)
				FAILF("reply of %zu bytes differs at byte %zu", n, bad);
		} else if (rank == 1) {
			if (t_recv(t, 0, 1, 0, rbuf, max, &st) < 0)
				FAILF("recv of %zu bytes", n);
			if (st.error || st.st_bytes != n || st.st_source != 0 || st.st_tag != 1)
				FAILF("%zu bytes: error %d, got %zu bytes", n, st.error,
				      st.st_bytes);
			size_t bad = check_pattern(rbuf, n, seed_of(0, 1, n));
			if (bad != (size_t)-1)
				FAILF("message of %zu bytes differs at byte %zu", n, bad);
			fill_pattern(sbuf, n, seed_of(1, 0, n));
			if (t_send(t, 0, 2, 0, sbuf, n, 0) < 0)
				FAILF("reply of %zu bytes", n);
		}
	}
	free(sbuf);
	free(rbuf);
	return 0;
}

/* Everything arrives before the receives are posted. */
int scenario_unexpected(struct cm_transport *t, int rank, int size)
{
	size_t sizes[200];
	size_t count = size_list(sizes, MIB + 3);
	if (rank == 0) {
		struct cm_req *reqs = calloc(count, sizeof *reqs);
		uint8_t **bufs = calloc(count, sizeof *bufs);
		for (size_t i = 0; i < count; i++) {
			bufs[i] = malloc(sizes[i] + 1);
			fill_pattern(bufs[i], sizes[i], seed_of(0, 1, sizes[i]));
			reqs[i] = (struct cm_req){.kind = CM_REQ_SEND,
			                          .peer = 1,
			                          .tag = 5,
			                          .sbuf = bufs[i],
			                          .slen = sizes[i]};
			if (t->isend(t, &reqs[i]) < 0)
				FAILF("isend %zu", i);
		}
		if (t_send(t, 1, 6, 0, "token", 5, 0) < 0)
			FAILF("token");
		for (size_t i = 0; i < count; i++) {
			if (t_wait(t, &reqs[i]) < 0)
				FAILF("send %zu", i);
			free(bufs[i]);
		}
		free(reqs);
		free(bufs);
	} else if (rank == 1) {
		char token[8];
		struct cm_req st;
		if (t_recv(t, 0, 6, 0, token, sizeof token, &st) < 0 || st.st_bytes != 5)
			FAILF("token");
		uint8_t *buf = malloc(MIB + 3);
		for (size_t i = 0; i < count; i++) {
			if (t_recv(t, 0, 5, 0, buf, sizes[i], &st) < 0)
				FAILF("recv %zu", i);
			if (st.error || st.st_bytes != sizes[i])
				FAILF("message %zu: %zu bytes, expected %zu", i, st.st_bytes,
				      sizes[i]);
			size_t bad = check_pattern(buf, sizes[i], seed_of(0, 1, sizes[i]));
			if (bad != (size_t)-1)
				FAILF("message of %zu bytes differs at byte %zu", sizes[i], bad);
		}
		free(buf);
	}
	return 0;
}

struct wmsg {
	int32_t src;
	int32_t k;
};

/* Ranks 1..size-1 send 60 messages each to rank 0 (tag k % 3); rank 0
 * mixes ANY_SOURCE, ANY_TAG and exact receives. */
int scenario_wildcards(struct cm_transport *t, int rank, int size)
{
	enum { PER_SRC = 60 };
	uint8_t buf[600];
	if (rank != 0) {
		for (int k = 0; k < PER_SRC; k++) {
			size_t n = sizeof(struct wmsg) + (size_t)(k * 37 % 500);
			struct wmsg m = {rank, k};
			fill_pattern(buf, n, seed_of(rank, k, n));
			memcpy(buf, &m, sizeof m);
			if (t_send(t, 0, k % 3, 0, buf, n, 0) < 0)
				FAILF("send %d", k);
		}
		return 0;
	}
	int last[64][4]; /* last k seen per (src, tag), and per src at [3] */
	int seen = 0;
	memset(last, 0xff, sizeof last);
	for (int phase = 0; phase < 3; phase++) {
		int want_src = phase == 1 ? 2 : CM_ANY_SOURCE;
		int want_tag = phase == 0 ? 0 : CM_ANY_TAG;
		int count = phase == 0   ? (size - 1) * PER_SRC / 3
		            : phase == 1 ? PER_SRC * 2 / 3
		                         : (size - 2) * PER_SRC * 2 / 3;
		for (int i = 0; i < count; i++) {
			struct cm_req st;
			if (t_recv(t, want_src, want_tag, 0, buf, sizeof buf, &st) < 0)
				FAILF("phase %d recv %d", phase, i);
			struct wmsg m;
			memcpy(&m, buf, sizeof m);
			size_t n = sizeof m + (size_t)(m.k * 37 % 500);
			if (st.error || st.st_source != m.src || st.st_tag != m.k % 3 ||
			    st.st_bytes != n || m.src < 1 || m.src >= size)
				FAILF(
				    "phase %d: status src %d tag %d bytes %zu for message (%d, %d)",
				    phase, st.st_source, st.st_tag, st.st_bytes, m.src, m.k);
			if ((want_src >= 0 && m.src != want_src) ||
			    (want_tag >= 0 && st.st_tag != want_tag))
				FAILF("phase %d: message (%d, %d) does not match the receive",
				      phase, m.src, m.k);
			uint8_t copy[600];
			fill_pattern(copy, n, seed_of(m.src, m.k, n));
			if (memcmp(copy + sizeof m, buf + sizeof m, n - sizeof m) != 0)
				FAILF("message (%d, %d) content", m.src, m.k);
			if (m.k <= last[m.src][m.k % 3])
				FAILF("message (%d, %d) overtook (%d, %d)", m.src, m.k, m.src,
				      last[m.src][m.k % 3]);
			if (want_tag == CM_ANY_TAG && m.k <= last[m.src][3])
				FAILF("ANY_TAG receive got (%d, %d) after (%d, %d)", m.src, m.k,
				      m.src, last[m.src][3]);
			last[m.src][m.k % 3] = m.k;
			if (want_tag == CM_ANY_TAG)
				last[m.src][3] = m.k;
			seen++;
		}
	}
	if (seen != (size - 1) * PER_SRC)
		FAILF("received %d messages, expected %d", seen, (size - 1) * PER_SRC);
	struct cm_probe_result pr;
	if (t->probe(t, CM_ANY_SOURCE, CM_ANY_TAG, 0, 0, &pr) < 0 || pr.found)
		FAILF("a message is left over");
	return 0;
}

static size_t order_len(int i)
{
	return i % 97 == 0 ? 20000 + (size_t)i : (size_t)(i % 64);
}

/* Senders 0 and 2 each stream messages to rank 1 through windows of
 * outstanding isends. */
static int order_send(struct cm_transport *t, int rank, int first, int count, int tagmod)
{
	enum { WINDOW = 32 };
	struct cm_req reqs[WINDOW];
	uint8_t *bufs[WINDOW];
	for (int w = 0; w < WINDOW; w++)
		bufs[w] = malloc(20000 + (size_t)first + (size_t)count + 64);
	for (int i = first; i < first + count; i++) {
		int w = i % WINDOW;
		if (i - first >= WINDOW && t_wait(t, &reqs[w]) < 0)
			FAILF("send %d", i - WINDOW);
		size_t n = order_len(i);
		fill_pattern(bufs[w], n, seed_of(rank, i, n));
		reqs[w] = (struct cm_req){
		    .kind = CM_REQ_SEND, .peer = 1, .tag = i % tagmod, .sbuf = bufs[w], .slen = n};
		if (t->isend(t, &reqs[w]) < 0)
			FAILF("isend %d", i);
	}
	for (int i = first + count - WINDOW; i < first + count; i++)
		if (i >= first && t_wait(t, &reqs[i % WINDOW]) < 0)
			FAILF("send %d", i);
	for (int w = 0; w < WINDOW; w++)
		free(bufs[w]);
	return 0;
}

static int order_check(int rank, const struct cm_req *st, const uint8_t *buf, int i)
{
	size_t n = order_len(i);
	if (st->error || st->st_bytes != n || st->st_tag != i % 4)
		FAILF("message %d from %d: %zu bytes tag %d, expected %zu tag %d", i, st->st_source,
		      st->st_bytes, st->st_tag, n, i % 4);
	size_t bad = check_pattern(buf, n, seed_of(st->st_source, i, n));
	if (bad != (size_t)-1)
		FAILF("message %d from %d differs at byte %zu", i, st->st_source, bad);
	return 0;
}

int scenario_order(struct cm_transport *t, int rank, int size)
{
	enum { PHASE1 = 5000, PHASE2 = 1000, WINDOW = 64 };
	if (rank == 0 || rank == 2) {
		char go[4];
		if (order_send(t, rank, 0, PHASE1, 4))
			return 1;
		/* Phase 2 waits, or the ANY_TAG receives of phase 1 would take it. */
		if (t_recv(t, 1, 0, 1, go, sizeof go, NULL) < 0)
			FAILF("phase 2 go");
		return order_send(t, rank, PHASE1, PHASE2, 4);
	}
	if (rank != 1)
		return 0;
	/* Phase 1: windows of ANY_SOURCE/ANY_TAG receives; each source's
	 * messages must come in send order. */
	struct cm_req reqs[WINDOW];
	uint8_t *bufs[WINDOW];
	for (int w = 0; w < WINDOW; w++)
		bufs[w] = malloc(30000);
	int next[3] = {0, 0, 0};
	for (int i = 0; i < 2 * PHASE1; i++) {
		int w = i % WINDOW;
		if (i >= WINDOW) {
			if (t_wait(t, &reqs[w]) < 0)
				FAILF("recv %d", i - WINDOW);
			int src = reqs[w].st_source;
			if (src != 0 && src != 2)
				FAILF("message from rank %d", src);
			if (order_check(rank, &reqs[w], bufs[w], next[src]++))
				return 1;
		}
		if (i < 2 * PHASE1) {
			reqs[w] = (struct cm_req){.kind = CM_REQ_RECV,
			                          .peer = CM_ANY_SOURCE,
			                          .tag = CM_ANY_TAG,
			                          .rbuf = bufs[w],
			                          .rcap = 30000};
			if (t->irecv(t, &reqs[w]) < 0)
				FAILF("irecv %d", i);
		}
	}
	for (int i = 2 * PHASE1; i < 2 * PHASE1 + WINDOW; i++) {
		int w = i % WINDOW;
		if (t_wait(t, &reqs[w]) < 0)
			FAILF("recv %d", i - WINDOW);
		int src = reqs[w].st_source;
		if (src != 0 && src != 2)
			FAILF("message from rank %d", src);
		if (order_check(rank, &reqs[w], bufs[w], next[src]++))
			return 1;
	}
	if (next[0] != PHASE1 || next[2] != PHASE1)
		FAILF("got %d and %d messages", next[0], next[2]);
	if (t_send(t, 0, 0, 1, "go", 2, 0) < 0 || t_send(t, 2, 0, 1, "go", 2, 0) < 0)
		FAILF("phase 2 go");
	/* Phase 2: from rank 0 tag by tag (3, 0, 1, 2), each in order; from
	 * rank 2 with ANY_TAG. */
	static const int tag_order[4] = {3, 0, 1, 2};
	for (int k = 0; k < 4; k++) {
		int tag = tag_order[k];
		for (int i = PHASE1; i < PHASE1 + PHASE2; i++) {
			if (i % 4 != tag)
				continue;
			struct cm_req st;
			if (t_recv(t, 0, tag, 0, bufs[0], 30000, &st) < 0)
				FAILF("phase 2 recv %d", i);
			if (order_check(rank, &st, bufs[0], i))
				return 1;
		}
	}
	for (int i = PHASE1; i < PHASE1 + PHASE2; i++) {
		struct cm_req st;
		if (t_recv(t, 2, CM_ANY_TAG, 0, bufs[0], 30000, &st) < 0)
			FAILF("phase 2 recv %d from 2", i);
		if (order_check(rank, &st, bufs[0], i))
			return 1;
	}
	for (int w = 0; w < WINDOW; w++)
		free(bufs[w]);
	return 0;
}

int scenario_sync(struct cm_transport *t, int rank, int size)
{
	static uint8_t big[MIB];
	uint8_t small[100];
	struct cm_req st;
	if (rank == 0) {
		fill_pattern(small, sizeof small, 11);
		struct cm_req r = {.kind = CM_REQ_SEND,
		                   .peer = 1,
		                   .tag = 1,
		                   .sbuf = small,
		                   .slen = sizeof small,
		                   .sync = 1};
		if (t->isend(t, &r) < 0)
			FAILF("issend");
		/* Rank 1 posts its receive only after our "go": not matched yet. */
		for (int i = 0; i < 20; i++)
			if (t->progress(t, 10) < 0)
				FAILF("progress");
		if (r.done)
			FAILF("synchronous send completed before its receive was posted");
		if (t_send(t, 1, 2, 0, "go", 2, 0) < 0 || t_wait(t, &r) < 0)
			FAILF("go / ssend");
		/* A large one, the receive already posted ("ready"). */
		if (t_recv(t, 1, 3, 0, small, sizeof small, &st) < 0)
			FAILF("ready");
		fill_pattern(big, sizeof big, 12);
		if (t_send(t, 1, 4, 0, big, sizeof big, 1) < 0)
			FAILF("large ssend");
	} else if (rank == 1) {
		if (t_recv(t, 0, 2, 0, small, sizeof small, &st) < 0)
			FAILF("go");
		if (t_recv(t, 0, 1, 0, small, sizeof small, &st) < 0)
			FAILF("recv ssend");
		if (check_pattern(small, sizeof small, 11) != (size_t)-1)
			FAILF("ssend content");
		struct cm_req r = {
		    .kind = CM_REQ_RECV, .peer = 0, .tag = 4, .rbuf = big, .rcap = sizeof big};
		if (t->irecv(t, &r) < 0 || t_send(t, 0, 3, 0, "ready", 5, 0) < 0 ||
		    t_wait(t, &r) < 0)
			FAILF("large ssend recv");
		if (r.st_bytes != sizeof big || check_pattern(big, sizeof big, 12) != (size_t)-1)
			FAILF("large ssend content");
	}
	return 0;
}

static int probe_until(struct cm_transport *t, int rank, int src, int tag,
                       struct cm_probe_result *pr)
{
	for (int i = 0; i < 2000; i++) {
		if (t->probe(t, src, tag, 0, 0, pr) < 0)
			FAILF("iprobe");
		if (pr->found)
			return 0;
		if (t->progress(t, 10) < 0)
			FAILF("progress");
	}
	FAILF("iprobe never found (src %d, tag %d)", src, tag);
}

int scenario_probe(struct cm_transport *t, int rank, int size)
{
	size_t big_len = 8 * MIB + 3;
	uint8_t buf[2000];
	struct cm_req st;
	struct cm_probe_result pr;
	if (rank == 0) {
		uint8_t *big = malloc(big_len);
		fill_pattern(buf, 1234, 7);
		if (t_send(t, 1, 7, 0, buf, 1234, 0) < 0)
			FAILF("send 7");
		fill_pattern(buf, 10, 8);
		if (t_send(t, 1, 8, 0, buf, 10, 0) < 0)
			FAILF("send 8");
		if (t_recv(t, 1, 1, 0, buf, sizeof buf, &st) < 0)
			FAILF("go");
		fill_pattern(big, big_len, 9);
		if (t_send(t, 1, 9, 0, big, big_len, 0) < 0 || t_send(t, 1, 10, 0, "x", 1, 0) < 0)
			FAILF("send 9/10");
		free(big);
		return 0;
	}
	if (rank != 1)
		return 0;
	if (t->probe(t, 0, 8, 0, 1, &pr) < 0 || !pr.found || pr.source != 0 || pr.tag != 8 ||
	    pr.bytes != 10)
		FAILF("probe(0, 8): found %d src %d tag %d bytes %zu", pr.found, pr.source, pr.tag,
		      pr.bytes);
	if (t->probe(t, CM_ANY_SOURCE, 99, 0, 0, &pr) < 0 || pr.found)
		FAILF("iprobe(any, 99) found a message");
	if (t->probe(t, 0, 7, 1, 0, &pr) < 0 || pr.found)
		FAILF("iprobe in another context found a message");
	if (t->probe(t, CM_ANY_SOURCE, CM_ANY_TAG, 0, 1, &pr) < 0 || !pr.found || pr.tag != 7 ||
	    pr.bytes != 1234)
		FAILF("probe(any, any): tag %d bytes %zu", pr.tag, pr.bytes);
	if (t_recv(t, 0, 8, 0, buf, sizeof buf, &st) < 0 || st.st_bytes != 10 ||
	    check_pattern(buf, 10, 8) != (size_t)-1)
		FAILF("recv 8");
	if (t_recv(t, CM_ANY_SOURCE, CM_ANY_TAG, 0, buf, sizeof buf, &st) < 0 || st.st_tag != 7 ||
	    st.st_bytes != 1234 || check_pattern(buf, 1234, 7) != (size_t)-1)
		FAILF("recv 7");
	if (t_send(t, 0, 1, 0, "go", 2, 0) < 0)
		FAILF("go");
	/* Found as soon as its header is in: the receive then takes over a
	 * payload that is still arriving. */
	if (t->probe(t, 0, 9, 0, 1, &pr) < 0 || !pr.found || pr.bytes != big_len)
		FAILF("probe(0, 9): bytes %zu", pr.bytes);
	uint8_t *big = malloc(big_len);
	if (t_recv(t, 0, 9, 0, big, big_len, &st) < 0 || st.st_bytes != big_len)
		FAILF("recv 9");
	size_t bad = check_pattern(big, big_len, 9);
	if (bad != (size_t)-1)
		FAILF("probed 8 MiB message differs at byte %zu", bad);
	free(big);
	if (probe_until(t, rank, 0, 10, &pr) || pr.bytes != 1)
		FAILF("iprobe(0, 10)");
	if (t_recv(t, 0, 10, 0, buf, sizeof buf, &st) < 0 || buf[0] != 'x')
		FAILF("recv 10");
	return 0;
}

int scenario_truncate(struct cm_transport *t, int rank, int size)
{
	static uint8_t buf[MIB];
	struct cm_req st;
	if (rank == 0) {
		if (t_recv(t, 1, 1, 0, buf, sizeof buf, &st) < 0)
			FAILF("go");
		fill_pattern(buf, sizeof buf, 21);
		if (t_send(t, 1, 1, 0, buf, 1000, 0) < 0 || t_send(t, 1, 2, 0, buf, MIB, 0) < 0 ||
		    t_send(t, 1, 3, 0, buf, 100, 0) < 0 || t_send(t, 1, 4, 0, buf, 10, 0) < 0)
			FAILF("sends");
		return 0;
	}
	if (rank != 1)
		return 0;
	uint8_t small[200];
	uint8_t *mid = malloc(1000 + 64);
	memset(mid, 0xee, 1000 + 64);
	struct cm_req posted = {
	    .kind = CM_REQ_RECV, .peer = 0, .tag = 2, .rbuf = mid, .rcap = 1000};
	if (t->irecv(t, &posted) < 0 || t_send(t, 0, 1, 0, "go", 2, 0) < 0)
		FAILF("irecv / go");
	memset(small, 0xee, sizeof small);
	if (t_recv(t, 0, 1, 0, small, 100, &st) < 0)
		FAILF("recv 1");
	if (st.error != CM_REQ_ERR_TRUNCATE || st.st_bytes != 1000 ||
	    check_pattern(small, 100, 21) != (size_t)-1)
		FAILF("1000 bytes into 100: error %d bytes %zu", st.error, st.st_bytes);
	for (size_t i = 100; i < sizeof small; i++)
		if (small[i] != 0xee)
			FAILF("byte %zu written past the receive buffer", i);
	if (t_wait(t, &posted) < 0 || posted.error != CM_REQ_ERR_TRUNCATE ||
	    posted.st_bytes != MIB || check_pattern(mid, 1000, 21) != (size_t)-1)
		FAILF("1 MiB into 1000: error %d bytes %zu", posted.error, posted.st_bytes);
	for (size_t i = 1000; i < 1000 + 64; i++)
		if (mid[i] != 0xee)
			FAILF("byte %zu written past the receive buffer", i);
	free(mid);
	if (t_recv(t, 0, 3, 0, buf, sizeof buf, &st) < 0 || st.error || st.st_bytes != 100 ||
	    check_pattern(buf, 100, 21) != (size_t)-1)
		FAILF("message after the truncated ones");
	if (t_recv(t, 0, 4, 0, NULL, 0, &st) < 0 || st.error != CM_REQ_ERR_TRUNCATE ||
	    st.st_bytes != 10)
		FAILF("10 bytes into 0: error %d bytes %zu", st.error, st.st_bytes);
	return 0;
}

int scenario_self(struct cm_transport *t, int rank, int size)
{
	uint8_t a[300], b[300];
	struct cm_req st;
	uint32_t ctx = 2; /* like MPI_COMM_SELF */
	fill_pattern(a, 100, 31);
	if (t_send(t, rank, 1, ctx, a, 100, 0) < 0)
		FAILF("send to self");
	if (t_recv(t, rank, 1, ctx, b, sizeof b, &st) < 0 || st.st_bytes != 100 ||
	    st.st_source != rank || memcmp(a, b, 100) != 0)
		FAILF("recv from self");
	/* Receive posted first. */
	struct cm_req r = {
	    .kind = CM_REQ_RECV, .peer = rank, .tag = 2, .ctx = ctx, .rbuf = b, .rcap = 300};
	if (t->irecv(t, &r) < 0 || t_send(t, rank, 2, ctx, a, 50, 0) < 0 || t_wait(t, &r) < 0 ||
	    r.st_bytes != 50 || memcmp(a, b, 50) != 0)
		FAILF("posted self receive");
	/* Synchronous send to self completes with its receive. */
	struct cm_req s = {.kind = CM_REQ_SEND,
	                   .peer = rank,
	                   .tag = 3,
	                   .ctx = ctx,
	                   .sbuf = a,
	                   .slen = 77,
	                   .sync = 1};
	if (t->isend(t, &s) < 0)
		FAILF("issend to self");
	if (t->progress(t, 0) < 0 || s.done)
		FAILF("synchronous self send completed before its receive");
	if (t_recv(t, CM_ANY_SOURCE, 3, ctx, b, sizeof b, &st) < 0 || st.st_bytes != 77 ||
	    st.st_source != rank || memcmp(a, b, 77) != 0 || t_wait(t, &s) < 0)
		FAILF("synchronous self send");
	/* Probe a message to self. */
	struct cm_probe_result pr;
	if (t_send(t, rank, 4, ctx, a, 33, 0) < 0 || t->probe(t, rank, 4, ctx, 1, &pr) < 0 ||
	    !pr.found || pr.bytes != 33 || pr.source != rank)
		FAILF("probe self");
	if (t_recv(t, rank, CM_ANY_TAG, ctx, b, sizeof b, &st) < 0 || st.st_tag != 4)
		FAILF("recv probed self message");
	/* A large standard send to self completes before its receive (eager). */
	size_t n = MIB + 3;
	uint8_t *big = malloc(n), *back = malloc(n);
	fill_pattern(big, n, 32);
	if (t_send(t, rank, 5, ctx, big, n, 0) < 0)
		FAILF("large send to self");
	memset(big, 0, n);
	if (t_recv(t, rank, 5, ctx, back, n, &st) < 0 || st.st_bytes != n ||
	    check_pattern(back, n, 32) != (size_t)-1)
		FAILF("large self message");
	free(big);
	free(back);
	return 0;
}

/* Every rank sends one message to every rank (itself included). */
int scenario_alltoall(struct cm_transport *t, int rank, int size)
{
	struct cm_req *sr = calloc((size_t)size, sizeof *sr),
	              *rr = calloc((size_t)size, sizeof *rr);
	uint8_t **sb = calloc((size_t)size, sizeof *sb), **rb = calloc((size_t)size, sizeof *rb);
	for (int p = 0; p < size; p++) {
		size_t n = (size_t)(rank * 31 + p * 7) % 3000 + (p % 3 == 0 ? 40000 : 0);
		size_t m = (size_t)(p * 31 + rank * 7) % 3000 + (rank % 3 == 0 ? 40000 : 0);
		sb[p] = malloc(n + 1);
		rb[p] = malloc(m + 1);
		fill_pattern(sb[p], n, seed_of(rank, p, n));
		rr[p] = (struct cm_req){
		    .kind = CM_REQ_RECV, .peer = p, .tag = 9, .rbuf = rb[p], .rcap = m};
		if (t->irecv(t, &rr[p]) < 0)
			FAILF("irecv %d", p);
	}
	for (int k = 0; k < size; k++) {
		int p = (rank + k) % size;
		sr[p] = (struct cm_req){.kind = CM_REQ_SEND,
		                        .peer = p,
		                        .tag = 9,
		                        .sbuf = sb[p],
		                        .slen = (size_t)(rank * 31 + p * 7) % 3000 +
		                                (p % 3 == 0 ? 40000 : 0)};
		if (t->isend(t, &sr[p]) < 0)
			FAILF("isend %d", p);
	}
	for (int p = 0; p < size; p++) {
		size_t m = rr[p].rcap;
		if (t_wait(t, &rr[p]) < 0 || t_wait(t, &sr[p]) < 0)
			FAILF("exchange with %d", p);
		if (rr[p].error || rr[p].st_bytes != m || rr[p].st_source != p)
			FAILF("from %d: %zu bytes", p, rr[p].st_bytes);
		if (check_pattern(rb[p], m, seed_of(p, rank, m)) != (size_t)-1)
			FAILF("content from %d", p);
		free(sb[p]);
		free(rb[p]);
	}
	free(sr);
	free(rr);
	free(sb);
	free(rb);
	return 0;
}
