/* Test harness for the cmserver protocol core: builds frames, feeds them to
 * sessions in chosen chunk sizes (no sockets), and decodes what the core
 * queued for output. Shared by the test_core*.c programs. */
#ifndef CHANMEM_TEST_CORE_HARNESS_H
#define CHANMEM_TEST_CORE_HARNESS_H

#include "core.h"
#include "live_frame.h"
#include "protocol.h"

#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define H_SECRET "0123456789abcdef0123456789abcdef"
#define H_MAX_PAYLOAD (8u * 1024 * 1024)

struct bytes {
	uint8_t *p;
	size_t len, cap;
};

static inline void bytes_add(struct bytes *b, const void *data, size_t n)
{
	if (b->len + n > b->cap) {
		size_t ncap = b->cap ? b->cap : 256;
		while (ncap < b->len + n)
			ncap *= 2;
		b->p = realloc(b->p, ncap);
		ck_assert_ptr_nonnull(b->p);
		b->cap = ncap;
	}
	if (n)
		memcpy(b->p + b->len, data, n);
	b->len += n;
}

static inline void bytes_free(struct bytes *b)
{
	free(b->p);
	memset(b, 0, sizeof *b);
}

/* Appends one frame; the header is encoded as given (version forced to 1:
 * patch byte 0 afterwards for version tests). */
static inline void frame_add(struct bytes *b, uint8_t type, uint16_t flags, int32_t src,
                             int32_t dst, int32_t tag, uint32_t ctx, uint64_t clock,
                             const void *payload, uint32_t len)
{
	uint8_t hdr[CM_HEADER_SIZE];
	frame_header_encode(hdr, type, flags, src, dst, tag, ctx, clock, len);
	bytes_add(b, hdr, sizeof hdr);
	bytes_add(b, payload, len);
}

static inline void hello_add_flags(struct bytes *b, uint16_t flags, int32_t rank, uint32_t world,
                                   uint32_t incarnation, const char *secret)
{
	struct cm_hello hello = {
	    .incarnation = incarnation, .world_size = world, .kind = CM_PEER_RANK};
	memcpy(hello.secret, secret, CM_SECRET_LEN);
	uint8_t pl[CM_HELLO_PAYLOAD];
	cm_hello_encode(&hello, pl);
	frame_add(b, CM_T_HELLO, flags, rank, rank, 0, 0, 0, pl, sizeof pl);
}

static inline void hello_add(struct bytes *b, int32_t rank, uint32_t world, uint32_t incarnation,
                             const char *secret)
{
	hello_add_flags(b, 0, rank, world, incarnation, secret);
}

/* ---- the core under test ---- */

struct harness {
	struct cm_core *core;
	unsigned wakes;
};

static inline void h_wake(void *ctx, struct cm_session *s)
{
	struct harness *hs = ctx;
	hs->wakes++;
}

static inline void h_init_spill(struct harness *hs, uint64_t log_mem,
                                const struct cm_spill_ops *spill, void *spill_ctx)
{
	struct cm_core_config cfg = {.max_payload = H_MAX_PAYLOAD,
	                             .log_mem = log_mem,
	                             .hooks = {.ctx = hs, .wake = h_wake},
	                             .spill = spill,
	                             .spill_ctx = spill_ctx};
	memcpy(cfg.secret, H_SECRET, CM_SECRET_LEN);
	hs->wakes = 0;
	hs->core = cm_core_new(&cfg);
	ck_assert_ptr_nonnull(hs->core);
}

static inline void h_init(struct harness *hs, uint64_t log_mem)
{
	h_init_spill(hs, log_mem, NULL, NULL);
}

/* Feeds bytes the way readv would, at most chunk bytes per "read". */
static inline void feed(struct cm_session *s, const void *data, size_t len, size_t chunk)
{
	const uint8_t *p = data;
	size_t off = 0;
	while (off < len) {
		if (cm_session_closing(s))
			chunk = len; /* the engine keeps reading and the core discards */
		struct iovec iov[2];
		int n = cm_session_read_iov(s, iov);
		ck_assert_int_ge(n, 1);
		size_t put = 0;
		for (int i = 0; i < n && off < len && put < chunk; i++) {
			size_t k = iov[i].iov_len;
			if (k > len - off)
				k = len - off;
			if (k > chunk - put)
				k = chunk - put;
			memcpy(iov[i].iov_base, p + off, k);
			off += k;
			put += k;
			if (k < iov[i].iov_len)
				break; /* readv fills an iovec before the next */
		}
		cm_session_input(s, put);
	}
}

static inline void feed_bytes(struct cm_session *s, struct bytes *b, size_t chunk)
{
	feed(s, b->p, b->len, chunk);
	b->len = 0;
}

/* Takes everything queued for s, as a writer would, `chunk` bytes per write. */
static inline void drain(struct cm_session *s, struct bytes *out, size_t chunk)
{
	for (;;) {
		struct iovec iov[7];
		int n = cm_session_out_iov(s, iov, 7);
		if (n == 0)
			return;
		size_t took = 0;
		for (int i = 0; i < n && took < chunk; i++) {
			size_t k = iov[i].iov_len < chunk - took ? iov[i].iov_len : chunk - took;
			bytes_add(out, iov[i].iov_base, k);
			took += k;
		}
		cm_session_out_consumed(s, took);
	}
}

struct rframe {
	struct cm_header h;
	const uint8_t *payload;
};

/* Splits a drained output stream into frames; returns the count. Every
 * frame must decode with the loose limits of a rank. */
static inline size_t parse_frames(const struct bytes *b, struct rframe *fr, size_t max)
{
	size_t n = 0, off = 0;
	struct cm_limits lim = {.world_size = 0, .max_payload = UINT32_MAX};
	while (off < b->len) {
		ck_assert_uint_lt(n, max);
		ck_assert_uint_ge(b->len - off, CM_HEADER_SIZE);
		enum cm_err e = cm_header_decode(b->p + off, b->len - off, &lim, &fr[n].h);
		ck_assert_msg(e == CM_OK, "server sent a bad %s: %s", cm_type_str(fr[n].h.type),
		              cm_err_str(e));
		off += CM_HEADER_SIZE;
		ck_assert_uint_ge(b->len - off, fr[n].h.len);
		fr[n].payload = b->p + off;
		off += fr[n].h.len;
		n++;
	}
	return n;
}

/* ---- per-test fixture and conversation helpers ---- */

static struct harness H;
#define MAX_SESS 512
static struct cm_session *sessions[MAX_SESS];
static int nsessions;

static inline void setup(void)
{
	h_init(&H, UINT64_MAX);
	nsessions = 0;
}

static inline void teardown(void)
{
	for (int i = 0; i < nsessions; i++) {
		cm_session_closed(sessions[i]);
		cm_session_release(sessions[i]);
	}
	cm_core_free(H.core);
}

static struct cm_session *sess_new(void)
{
	ck_assert_int_lt(nsessions, MAX_SESS);
	struct cm_session *s = cm_session_new(H.core, NULL);
	ck_assert_ptr_nonnull(s);
	sessions[nsessions++] = s;
	return s;
}

/* Output of s decoded into fr; payload pointers stay valid for the next
 * three calls. */
static inline size_t take(struct cm_session *s, struct rframe *fr, size_t max)
{
	static struct bytes ring[4];
	static int next;
	struct bytes *b = &ring[next++ % 4];
	b->len = 0;
	memset(fr, 0, sizeof *fr);
	drain(s, b, SIZE_MAX);
	return parse_frames(b, fr, max);
}

static inline void expect_nothing(struct cm_session *s)
{
	ck_assert_uint_eq(cm_session_out_pending(s), 0);
}

static inline void expect_hello_ack(struct cm_session *s, int rank, uint64_t *ack_clock);

/* A HELLO on a new session; the caller checks the answer (or its absence). */
static struct cm_session *hello_flags(uint16_t flags, int rank, int world, unsigned inc)
{
	struct cm_session *s = sess_new();
	struct bytes b = {0};
	hello_add_flags(&b, flags, rank, (uint32_t)world, inc, H_SECRET);
	feed_bytes(s, &b, SIZE_MAX);
	bytes_free(&b);
	return s;
}

/* Takes over from a live older incarnation at once (CM_F_TAKEOVER). */
static inline struct cm_session *join_takeover(int rank, int world, unsigned inc)
{
	struct cm_session *s = hello_flags(CM_F_TAKEOVER, rank, world, inc);
	expect_hello_ack(s, rank, NULL);
	return s;
}

static struct cm_session *join_inc(int rank, int world, unsigned inc, uint64_t *ack_clock)
{
	struct cm_session *s = hello_flags(0, rank, world, inc);
	expect_hello_ack(s, rank, ack_clock);
	return s;
}

static inline void expect_hello_ack(struct cm_session *s, int rank, uint64_t *ack_clock)
{
	struct rframe fr[2];
	ck_assert_uint_eq(take(s, fr, 2), 1);
	ck_assert_int_eq(fr[0].h.type, CM_T_HELLO_ACK);
	ck_assert_int_eq(fr[0].h.src, rank);
	ck_assert_int_eq(fr[0].h.dst, rank);
	ck_assert_int_eq(cm_session_rank(s), rank);
	if (ack_clock)
		*ack_clock = fr[0].h.clock;
}

static struct cm_session *join(int rank, int world)
{
	return join_inc(rank, world, 0, NULL);
}

static inline void send_msg(struct cm_session *s, int src, int dst, int tag, uint32_t ctx,
                            uint64_t clock, uint16_t flags, const void *data, uint32_t len)
{
	struct bytes b = {0};
	frame_add(&b, CM_T_MSG, flags, src, dst, tag, ctx, clock, data, len);
	feed_bytes(s, &b, SIZE_MAX);
	bytes_free(&b);
}

static inline void send_str(struct cm_session *s, int src, int dst, int tag, uint64_t clock,
                            const char *text)
{
	send_msg(s, src, dst, tag, 0, clock, 0, text, (uint32_t)strlen(text));
}

static inline void post(struct cm_session *s, int rank, int src, int tag, uint32_t ctx, uint64_t id)
{
	struct bytes b = {0};
	frame_add(&b, CM_T_RECV_REQ, 0, src, rank, tag, ctx, id, NULL, 0);
	feed_bytes(s, &b, SIZE_MAX);
	bytes_free(&b);
}

static inline void probe(struct cm_session *s, int rank, int src, int tag, uint32_t ctx,
                         uint64_t id, int blocking)
{
	struct bytes b = {0};
	frame_add(&b, CM_T_PROBE, blocking ? CM_F_BLOCKING : 0, src, rank, tag, ctx, id, NULL, 0);
	feed_bytes(s, &b, SIZE_MAX);
	bytes_free(&b);
}

/* Exactly one DELIVER of text from src/tag for request id. */
static inline void expect_deliver(struct cm_session *s, int src, int tag, uint64_t id,
                                  const char *text)
{
	struct rframe fr[4];
	size_t n = take(s, fr, 4);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(fr[0].h.type, CM_T_DELIVER);
	ck_assert_int_eq(fr[0].h.src, src);
	ck_assert_int_eq(fr[0].h.tag, tag);
	ck_assert_uint_eq(fr[0].h.clock, id);
	ck_assert_uint_eq(fr[0].h.len, strlen(text));
	ck_assert(memcmp(fr[0].payload, text, strlen(text)) == 0);
}

static inline void expect_error(struct cm_session *s, enum cm_err code)
{
	struct rframe fr[8];
	size_t n = take(s, fr, 8);
	ck_assert_uint_ge(n, 1);
	const struct rframe *e = &fr[n - 1];
	ck_assert_msg(e->h.type == CM_T_ERROR, "expected ERROR %s, got %s", cm_err_str(code),
	              cm_type_str(e->h.type));
	ck_assert_msg(e->h.tag == (int32_t)code, "expected %s, got %s (%.*s)", cm_err_str(code),
	              cm_err_str((enum cm_err)e->h.tag), (int)e->h.len, (const char *)e->payload);
	ck_assert_int_eq(e->h.src, 0);
	ck_assert_int_eq(e->h.dst, 0);
	ck_assert_uint_gt(e->h.len, 0);
	ck_assert_uint_le(e->h.len, CM_ERROR_TEXT_MAX);
	ck_assert(cm_session_closing(s));
}

#endif
