/* Unit tests of the cmserver protocol core, driven with encoded frames and
 * no sockets: authentication, refusal of every malformed header, MPI
 * matching order, wildcards, contexts, dedup, SYNC_ACK, probes, BYE, and
 * independence from how the byte stream is split. */
#include "config.h"

#include "test_core_harness.h"

#include <stdio.h>

static struct harness H;
#define MAX_SESS 512
static struct cm_session *sessions[MAX_SESS];
static int nsessions;

static void setup(void)
{
	h_init(&H, UINT64_MAX);
	nsessions = 0;
}

static void teardown(void)
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
static size_t take(struct cm_session *s, struct rframe *fr, size_t max)
{
	static struct bytes ring[4];
	static int next;
	struct bytes *b = &ring[next++ % 4];
	b->len = 0;
	memset(fr, 0, sizeof *fr);
	drain(s, b, SIZE_MAX);
	return parse_frames(b, fr, max);
}

static void expect_nothing(struct cm_session *s)
{
	ck_assert_uint_eq(cm_session_out_pending(s), 0);
}

static struct cm_session *join_inc(int rank, int world, unsigned inc, uint64_t *ack_clock)
{
	struct cm_session *s = sess_new();
	struct bytes b = {0};
	hello_add(&b, rank, (uint32_t)world, inc, H_SECRET);
	feed_bytes(s, &b, SIZE_MAX);
	bytes_free(&b);
	struct rframe fr[2];
	ck_assert_uint_eq(take(s, fr, 2), 1);
	ck_assert_int_eq(fr[0].h.type, CM_T_HELLO_ACK);
	ck_assert_int_eq(fr[0].h.src, rank);
	ck_assert_int_eq(fr[0].h.dst, rank);
	ck_assert_int_eq(cm_session_rank(s), rank);
	if (ack_clock)
		*ack_clock = fr[0].h.clock;
	return s;
}

static struct cm_session *join(int rank, int world)
{
	return join_inc(rank, world, 0, NULL);
}

static void send_msg(struct cm_session *s, int src, int dst, int tag, uint32_t ctx,
                     uint64_t clock, uint16_t flags, const void *data, uint32_t len)
{
	struct bytes b = {0};
	frame_add(&b, CM_T_MSG, flags, src, dst, tag, ctx, clock, data, len);
	feed_bytes(s, &b, SIZE_MAX);
	bytes_free(&b);
}

static void send_str(struct cm_session *s, int src, int dst, int tag, uint64_t clock,
                     const char *text)
{
	send_msg(s, src, dst, tag, 0, clock, 0, text, (uint32_t)strlen(text));
}

static void post(struct cm_session *s, int rank, int src, int tag, uint32_t ctx, uint64_t id)
{
	struct bytes b = {0};
	frame_add(&b, CM_T_RECV_REQ, 0, src, rank, tag, ctx, id, NULL, 0);
	feed_bytes(s, &b, SIZE_MAX);
	bytes_free(&b);
}

static void probe(struct cm_session *s, int rank, int src, int tag, uint32_t ctx, uint64_t id,
                  int blocking)
{
	struct bytes b = {0};
	frame_add(&b, CM_T_PROBE, blocking ? CM_F_BLOCKING : 0, src, rank, tag, ctx, id, NULL, 0);
	feed_bytes(s, &b, SIZE_MAX);
	bytes_free(&b);
}

/* Exactly one DELIVER of text from src/tag for request id. */
static void expect_deliver(struct cm_session *s, int src, int tag, uint64_t id, const char *text)
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

static void expect_error(struct cm_session *s, enum cm_err code)
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

/* ---------------- authentication ---------------- */

START_TEST(test_hello_ack)
{
	uint64_t clock = 99;
	struct cm_session *s = join_inc(1, 3, 0, &clock);
	ck_assert_uint_eq(clock, 0);
	ck_assert_uint_eq(cm_core_world_size(H.core), 3);
	ck_assert(!cm_session_closing(s));
}
END_TEST

START_TEST(test_no_hello)
{
	struct cm_session *a = sess_new(), *b = sess_new(), *c = sess_new();
	post(a, 0, 0, 0, 0, 0);
	expect_error(a, CM_E_AUTH);
	send_str(b, 0, 0, 1, 0, "x");
	expect_error(b, CM_E_AUTH);
	struct bytes by = {0};
	frame_add(&by, CM_T_BYE, 0, 0, 0, 0, 0, 0, NULL, 0);
	feed_bytes(c, &by, SIZE_MAX);
	bytes_free(&by);
	expect_error(c, CM_E_AUTH);
	ck_assert_uint_eq(cm_core_world_size(H.core), 0);
}
END_TEST

START_TEST(test_bad_secret)
{
	struct cm_session *s = sess_new();
	struct bytes b = {0};
	hello_add(&b, 0, 2, 0, "0123456789abcdef0123456789abcdeX");
	/* Frames after the refused one are discarded, not processed. */
	frame_add(&b, CM_T_RECV_REQ, 0, 0, 0, 0, 0, 0, NULL, 0);
	feed_bytes(s, &b, SIZE_MAX);
	bytes_free(&b);
	expect_error(s, CM_E_AUTH);
	expect_nothing(s);
	ck_assert_uint_eq(cm_core_world_size(H.core), 0);
	ck_assert_int_eq(cm_session_rank(s), -1);
	/* The rank can still connect properly afterwards. */
	join(0, 2);
}
END_TEST

START_TEST(test_world_size_mismatch)
{
	join(0, 4);
	struct cm_session *s = sess_new();
	struct bytes b = {0};
	hello_add(&b, 1, 5, 0, H_SECRET);
	feed_bytes(s, &b, SIZE_MAX);
	bytes_free(&b);
	expect_error(s, CM_E_SIZE);
	ck_assert_uint_eq(cm_core_world_size(H.core), 4);
}
END_TEST

static void hello_payload_refused(int src, int dst, uint32_t world, uint32_t kind,
                                  uint32_t reserved, enum cm_err code)
{
	struct cm_session *s = sess_new();
	uint8_t pl[CM_HELLO_PAYLOAD];
	struct cm_hello hello = {.world_size = world, .kind = kind};
	memcpy(hello.secret, H_SECRET, CM_SECRET_LEN);
	cm_hello_encode(&hello, pl);
	cm_put_u32(pl + 12, reserved);
	struct bytes b = {0};
	frame_add(&b, CM_T_HELLO, 0, src, dst, 0, 0, 0, pl, sizeof pl);
	feed_bytes(s, &b, SIZE_MAX);
	bytes_free(&b);
	expect_error(s, code);
}

START_TEST(test_hello_payload)
{
	hello_payload_refused(0, 0, 0, CM_PEER_RANK, 0, CM_E_SIZE);    /* world size 0 */
	hello_payload_refused(0, 0, 2, CM_PEER_RANK, 7, CM_E_FIELD);   /* reserved word */
	hello_payload_refused(0, 0, 2, 9, 0, CM_E_FIELD);              /* unknown kind */
	hello_payload_refused(0, 0, 2, CM_PEER_DIRECT, 0, CM_E_FIELD); /* not a rank -> CM */
	hello_payload_refused(0, 1, 2, CM_PEER_RANK, 0, CM_E_RANK);    /* src != dst */
	hello_payload_refused(2, 2, 2, CM_PEER_RANK, 0, CM_E_RANK);    /* rank >= world */
	ck_assert_uint_eq(cm_core_world_size(H.core), 0);
}
END_TEST

START_TEST(test_second_hello)
{
	struct cm_session *s = join(0, 2);
	struct bytes b = {0};
	hello_add(&b, 0, 2, 0, H_SECRET);
	feed_bytes(s, &b, SIZE_MAX);
	bytes_free(&b);
	expect_error(s, CM_E_STATE);
}
END_TEST

START_TEST(test_incarnations)
{
	struct cm_session *old = join(1, 2);
	/* Same incarnation while the first is live: refused, first unaffected. */
	struct cm_session *dup = sess_new();
	struct bytes b = {0};
	hello_add(&b, 1, 2, 0, H_SECRET);
	feed_bytes(dup, &b, SIZE_MAX);
	expect_error(dup, CM_E_STATE);
	ck_assert(!cm_session_closing(old));

	/* A newer incarnation replaces the old connection. */
	post(old, 1, 0, 5, 0, 1); /* dropped with the old connection */
	struct cm_session *s0 = join(0, 2);
	struct cm_session *fresh = join_inc(1, 2, 1, NULL);
	expect_error(old, CM_E_STATE);
	ck_assert(!cm_session_closing(fresh));

	/* An older incarnation is refused. */
	struct cm_session *older = sess_new();
	hello_add(&b, 1, 2, 0, H_SECRET);
	feed_bytes(older, &b, SIZE_MAX);
	bytes_free(&b);
	expect_error(older, CM_E_STATE);

	/* The old request is gone: the message waits for the new one. */
	send_str(s0, 0, 1, 5, 0, "hi");
	expect_nothing(fresh);
	expect_nothing(old);
	post(fresh, 1, 0, 5, 0, 0);
	expect_deliver(fresh, 0, 5, 0, "hi");
}
END_TEST

START_TEST(test_rank_reconnects_after_close)
{
	struct cm_session *s = join(0, 1);
	cm_session_closed(s);
	join(0, 1); /* same incarnation is fine once the old connection is gone */
}
END_TEST

/* ---------------- malformed headers ---------------- */

struct bad_case {
	const char *what;
	int authenticated; /* send after a HELLO of rank 1 */
	struct cm_header h;
	int version; /* 0: keep 1 */
	enum cm_err code;
};

START_TEST(test_malformed_headers)
{
	static const struct bad_case cases[] = {
		{"version 2", 0, {.type = CM_T_HELLO, .len = 48}, 2, CM_E_VERSION},
		{"version 0 authed", 1, {.type = CM_T_MSG, .src = 1}, 255, CM_E_VERSION},
		{"type 0", 0, {.type = 0}, 0, CM_E_TYPE},
		{"type 12", 1, {.type = 12}, 0, CM_E_TYPE},
		{"type 200", 0, {.type = 200}, 0, CM_E_TYPE},
		{"oversize unauthenticated", 0, {.type = CM_T_MSG, .len = H_MAX_PAYLOAD + 1}, 0,
		 CM_E_LENGTH},
		{"oversize", 1, {.type = CM_T_MSG, .src = 1, .len = UINT32_MAX}, 0, CM_E_LENGTH},
		{"RECV_REQ with payload", 1, {.type = CM_T_RECV_REQ, .dst = 1, .len = 5}, 0,
		 CM_E_LENGTH},
		{"short HELLO", 0, {.type = CM_T_HELLO, .len = 47}, 0, CM_E_LENGTH},
		{"MSG dst out of range", 1, {.type = CM_T_MSG, .src = 1, .dst = 4}, 0, CM_E_RANK},
		{"MSG src -1", 1, {.type = CM_T_MSG, .src = -1}, 0, CM_E_RANK},
		{"RECV_REQ src -2", 1, {.type = CM_T_RECV_REQ, .src = -2, .dst = 1}, 0, CM_E_RANK},
		{"MSG tag -1", 1, {.type = CM_T_MSG, .src = 1, .tag = -1}, 0, CM_E_TAG},
		{"RECV_REQ tag -2", 1, {.type = CM_T_RECV_REQ, .dst = 1, .tag = -2}, 0, CM_E_TAG},
		{"MSG flag BLOCKING", 1, {.type = CM_T_MSG, .src = 1, .flags = CM_F_BLOCKING}, 0,
		 CM_E_FLAGS},
		{"RECV_REQ flag SYNC", 1, {.type = CM_T_RECV_REQ, .dst = 1, .flags = CM_F_SYNC}, 0,
		 CM_E_FLAGS},
		{"MSG flag 0x8000", 1, {.type = CM_T_MSG, .src = 1, .flags = 0x8000}, 0, CM_E_FLAGS},
		{"HELLO tag 1", 0, {.type = CM_T_HELLO, .tag = 1, .len = 48}, 0, CM_E_FIELD},
		{"BYE ctx 3", 1, {.type = CM_T_BYE, .src = 1, .dst = 1, .ctx = 3}, 0, CM_E_FIELD},
		{"MSG before HELLO", 0, {.type = CM_T_MSG}, 0, CM_E_AUTH},
		{"PROBE before HELLO", 0, {.type = CM_T_PROBE}, 0, CM_E_AUTH},
		{"DELIVER before HELLO", 0, {.type = CM_T_DELIVER}, 0, CM_E_AUTH},
		{"MSG src not own rank", 1, {.type = CM_T_MSG, .src = 2, .dst = 1}, 0, CM_E_RANK},
		{"RECV_REQ for another rank", 1, {.type = CM_T_RECV_REQ, .dst = 0}, 0, CM_E_RANK},
		{"PROBE for another rank", 1, {.type = CM_T_PROBE, .dst = 3}, 0, CM_E_RANK},
		{"BYE of another rank", 1, {.type = CM_T_BYE, .src = 0, .dst = 0}, 0, CM_E_RANK},
		{"DELIVER from a rank", 1, {.type = CM_T_DELIVER, .src = 1, .dst = 1}, 0, CM_E_TYPE},
		{"HELLO_ACK from a rank", 1, {.type = CM_T_HELLO_ACK, .src = 1, .dst = 1}, 0,
		 CM_E_TYPE},
		{"SYNC_ACK from a rank", 1, {.type = CM_T_SYNC_ACK, .src = 1, .dst = 0}, 0,
		 CM_E_TYPE},
		{"ERROR from a rank", 1, {.type = CM_T_ERROR, .tag = 3}, 0, CM_E_TYPE},
	};
	struct cm_session *good = join(0, 4);
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const struct bad_case *c = &cases[i];
		struct cm_session *s = c->authenticated ? join_inc(1, 4, (unsigned)i, NULL) : sess_new();
		uint8_t raw[CM_HEADER_SIZE];
		cm_header_encode(&c->h, raw);
		if (c->version)
			raw[0] = (uint8_t)c->version;
		/* A well-formed frame after the bad one must not be processed. */
		struct bytes b = {0};
		bytes_add(&b, raw, sizeof raw);
		frame_add(&b, CM_T_PROBE, 0, 0, 1, 0, 0, 77, NULL, 0);
		feed_bytes(s, &b, SIZE_MAX);
		bytes_free(&b);
		struct rframe fr[4];
		size_t n = take(s, fr, 4);
		ck_assert_msg(n == 1 && fr[0].h.type == CM_T_ERROR && fr[0].h.tag == (int32_t)c->code,
		              "%s: expected ERROR %s, got %zu frames, first %s code %d", c->what,
		              cm_err_str(c->code), n, cm_type_str(fr[0].h.type), (int)fr[0].h.tag);
		ck_assert_msg(cm_session_closing(s), "%s: not closing", c->what);
		cm_session_closed(s);
	}
	/* The good client was never affected. */
	ck_assert(!cm_session_closing(good));
	send_str(good, 0, 0, 9, 0, "still fine");
	post(good, 0, 0, 9, 0, 4);
	expect_deliver(good, 0, 9, 4, "still fine");
}
END_TEST

START_TEST(test_frames_after_bye)
{
	struct cm_session *s = join(0, 1);
	struct bytes b = {0};
	frame_add(&b, CM_T_BYE, 0, 0, 0, 0, 0, 0, NULL, 0);
	feed_bytes(s, &b, SIZE_MAX);
	struct rframe fr[2];
	ck_assert_uint_eq(take(s, fr, 2), 1);
	ck_assert_int_eq(fr[0].h.type, CM_T_BYE_ACK);
	ck_assert_int_eq(fr[0].h.src, 0);
	ck_assert_int_eq(fr[0].h.dst, 0);
	ck_assert(cm_session_said_bye(s));
	frame_add(&b, CM_T_RECV_REQ, 0, 0, 0, 0, 0, 0, NULL, 0);
	feed_bytes(s, &b, SIZE_MAX);
	bytes_free(&b);
	expect_error(s, CM_E_STATE);
}
END_TEST

START_TEST(test_bye_after_traffic)
{
	/* BYE_ACK comes after every reply to frames sent before BYE. */
	struct cm_session *s = join(0, 1);
	struct bytes b = {0};
	frame_add(&b, CM_T_MSG, 0, 0, 0, 3, 0, 0, "ab", 2);
	frame_add(&b, CM_T_RECV_REQ, 0, 0, 0, 3, 0, 0, NULL, 0);
	frame_add(&b, CM_T_PROBE, 0, 0, 0, 3, 0, 1, NULL, 0);
	frame_add(&b, CM_T_BYE, 0, 0, 0, 0, 0, 0, NULL, 0);
	feed_bytes(s, &b, SIZE_MAX);
	bytes_free(&b);
	struct rframe fr[4];
	ck_assert_uint_eq(take(s, fr, 4), 3);
	ck_assert_int_eq(fr[0].h.type, CM_T_DELIVER);
	ck_assert_int_eq(fr[1].h.type, CM_T_PROBE_REPLY);
	ck_assert_int_eq(fr[2].h.type, CM_T_BYE_ACK);
}
END_TEST

/* ---------------- matching ---------------- */

START_TEST(test_earliest_message)
{
	struct cm_session *r0 = join(0, 2), *r1 = join(1, 2);
	send_str(r1, 1, 0, 5, 0, "first");
	send_str(r1, 1, 0, 5, 1, "second");
	send_str(r1, 1, 0, 5, 2, "third");
	expect_nothing(r1);
	post(r0, 0, 1, 5, 0, 10);
	expect_deliver(r0, 1, 5, 10, "first");
	post(r0, 0, CM_ANY_SOURCE, CM_ANY_TAG, 0, 11);
	expect_deliver(r0, 1, 5, 11, "second");
	post(r0, 0, 1, CM_ANY_TAG, 0, 12);
	expect_deliver(r0, 1, 5, 12, "third");
	post(r0, 0, 1, 5, 0, 13);
	expect_nothing(r0);
}
END_TEST

START_TEST(test_earliest_request)
{
	struct cm_session *r0 = join(0, 2), *r1 = join(1, 2);
	post(r0, 0, CM_ANY_SOURCE, CM_ANY_TAG, 0, 10);
	post(r0, 0, 1, 5, 0, 11);
	send_str(r1, 1, 0, 5, 0, "a"); /* both accept it: the earlier takes it */
	expect_deliver(r0, 1, 5, 10, "a");
	send_str(r1, 1, 0, 5, 1, "b");
	expect_deliver(r0, 1, 5, 11, "b");

	post(r0, 0, 1, 5, 0, 20);
	post(r0, 0, CM_ANY_SOURCE, CM_ANY_TAG, 0, 21);
	send_str(r1, 1, 0, 7, 2, "c"); /* only the wildcard accepts tag 7 */
	expect_deliver(r0, 1, 7, 21, "c");
	send_str(r1, 1, 0, 5, 3, "d");
	expect_deliver(r0, 1, 5, 20, "d");
}
END_TEST

START_TEST(test_earliest_request_four_keys)
{
	/* Requests under each of the four key shapes, posted in scrambled
	 * order: a message always goes to the earliest one that accepts it. */
	struct cm_session *r0 = join(0, 3), *r1 = join(1, 3), *r2 = join(2, 3);
	post(r0, 0, 1, CM_ANY_TAG, 0, 1);
	post(r0, 0, CM_ANY_SOURCE, 4, 0, 2);
	post(r0, 0, 1, 4, 0, 3);
	post(r0, 0, CM_ANY_SOURCE, CM_ANY_TAG, 0, 4);
	send_str(r2, 2, 0, 4, 0, "m1"); /* accepted by 2, 4 */
	expect_deliver(r0, 2, 4, 2, "m1");
	send_str(r1, 1, 0, 4, 0, "m2"); /* 1, 3, 4 */
	expect_deliver(r0, 1, 4, 1, "m2");
	send_str(r2, 2, 0, 9, 1, "m3"); /* 4 */
	expect_deliver(r0, 2, 9, 4, "m3");
	send_str(r1, 1, 0, 4, 1, "m4"); /* 3 */
	expect_deliver(r0, 1, 4, 3, "m4");
}
END_TEST

START_TEST(test_wildcards)
{
	struct cm_session *r0 = join(0, 3), *r1 = join(1, 3), *r2 = join(2, 3);
	send_str(r1, 1, 0, 3, 0, "1/3");
	send_str(r2, 2, 0, 4, 0, "2/4");
	send_str(r1, 1, 0, 4, 1, "1/4");
	post(r0, 0, CM_ANY_SOURCE, 4, 0, 1);
	expect_deliver(r0, 2, 4, 1, "2/4");
	post(r0, 0, 1, CM_ANY_TAG, 0, 2);
	expect_deliver(r0, 1, 3, 2, "1/3");
	post(r0, 0, CM_ANY_SOURCE, CM_ANY_TAG, 0, 3);
	expect_deliver(r0, 1, 4, 3, "1/4");
}
END_TEST

START_TEST(test_ctx_separation)
{
	struct cm_session *r0 = join(0, 2), *r1 = join(1, 2);
	send_msg(r1, 1, 0, 1, 0, 0, 0, "ctx0", 4);
	send_msg(r1, 1, 0, 1, 1, 1, 0, "ctx1", 4);
	post(r0, 0, CM_ANY_SOURCE, CM_ANY_TAG, 1, 1);
	struct rframe fr[2];
	ck_assert_uint_eq(take(r0, fr, 2), 1);
	ck_assert_uint_eq(fr[0].h.ctx, 1);
	ck_assert(memcmp(fr[0].payload, "ctx1", 4) == 0);
	post(r0, 0, 1, 1, 2, 2); /* nothing in ctx 2 */
	expect_nothing(r0);
	send_msg(r1, 1, 0, 1, 3, 2, 0, "ctx3", 4); /* not for the ctx 2 request */
	expect_nothing(r0);
	post(r0, 0, 1, 1, 0, 3);
	ck_assert_uint_eq(take(r0, fr, 2), 1);
	ck_assert_uint_eq(fr[0].h.ctx, 0);
	ck_assert_uint_eq(fr[0].h.clock, 3);
}
END_TEST

START_TEST(test_non_overtaking)
{
	/* 1000 messages on one (src,tag,ctx) interleaved with others: received
	 * in send order, whichever wildcard form the receive takes. */
	struct cm_session *r0 = join(0, 2), *r1 = join(1, 2);
	uint64_t clock = 0;
	for (uint32_t i = 0; i < 1000; i++) {
		send_msg(r1, 1, 0, 8, 0, clock++, 0, &i, sizeof i);
		uint32_t noise = 100000 + i;
		send_msg(r1, 1, 0, 9, 0, clock++, 0, &noise, sizeof noise);
	}
	for (uint32_t i = 0; i < 1000; i++) {
		int src = (i % 2) ? 1 : CM_ANY_SOURCE;
		post(r0, 0, src, 8, 0, i);
		struct rframe fr[2];
		ck_assert_uint_eq(take(r0, fr, 2), 1);
		uint32_t got;
		memcpy(&got, fr[0].payload, sizeof got);
		ck_assert_uint_eq(got, i);
	}
	for (uint32_t i = 0; i < 1000; i++) {
		post(r0, 0, 1, CM_ANY_TAG, 0, 5000 + i);
		struct rframe fr[2];
		ck_assert_uint_eq(take(r0, fr, 2), 1);
		uint32_t got;
		memcpy(&got, fr[0].payload, sizeof got);
		ck_assert_uint_eq(got, 100000 + i);
	}
}
END_TEST

/* ---------------- dedup ---------------- */

START_TEST(test_dedup_by_clock)
{
	struct cm_session *r0 = join(0, 3), *r1 = join(1, 3);
	send_str(r1, 1, 0, 1, 0, "c0");
	send_str(r1, 1, 0, 1, 1, "c1");
	send_str(r1, 1, 2, 1, 2, "c2 to rank 2"); /* one counter over all destinations */
	send_str(r1, 1, 0, 1, 1, "c1 again");     /* re-send: dropped */
	send_str(r1, 1, 0, 1, 2, "c2 again");     /* at the highest: dropped */
	send_str(r1, 1, 0, 1, 7, "c7");           /* a gap is fine */
	send_str(r1, 1, 0, 1, 5, "c5 late");      /* below the highest: dropped */
	send_msg(r1, 1, 0, 1, 0, 6, 0, "payload of a dropped re-send is skipped", 39);
	send_str(r1, 1, 0, 1, 8, "c8");
	expect_nothing(r1);
	const char *want[] = {"c0", "c1", "c7", "c8"};
	for (int i = 0; i < 4; i++) {
		post(r0, 0, 1, 1, 0, (uint64_t)i);
		expect_deliver(r0, 1, 1, (uint64_t)i, want[i]);
	}
	post(r0, 0, 1, 1, 0, 4);
	expect_nothing(r0);
	struct cm_core_stats st;
	cm_core_stats(H.core, &st);
	ck_assert_uint_eq(st.msgs_duplicate, 4);
	ck_assert_uint_eq(st.msgs_logged, 5);

	/* A restarted rank 1 learns the next clock the CM expects. */
	uint64_t next;
	join_inc(1, 3, 1, &next);
	ck_assert_uint_eq(next, 9);
}
END_TEST

/* ---------------- synchronous sends ---------------- */

START_TEST(test_sync_ack_when_matched)
{
	struct cm_session *r0 = join(0, 2), *r1 = join(1, 2);
	send_msg(r1, 1, 0, 6, 2, 4, CM_F_SYNC, "s", 1);
	expect_nothing(r1); /* not matched yet */
	post(r0, 0, 1, 6, 2, 30);
	expect_deliver(r0, 1, 6, 30, "s");
	struct rframe fr[2];
	ck_assert_uint_eq(take(r1, fr, 2), 1);
	ck_assert_int_eq(fr[0].h.type, CM_T_SYNC_ACK);
	ck_assert_int_eq(fr[0].h.src, 0);
	ck_assert_int_eq(fr[0].h.dst, 1);
	ck_assert_int_eq(fr[0].h.tag, 6);
	ck_assert_uint_eq(fr[0].h.ctx, 2);
	ck_assert_uint_eq(fr[0].h.clock, 4);
	ck_assert_uint_eq(fr[0].h.len, 0);

	/* Posted first: the SYNC_ACK comes right away. */
	post(r0, 0, 1, 6, 2, 31);
	send_msg(r1, 1, 0, 6, 2, 5, CM_F_SYNC, "t", 1);
	expect_deliver(r0, 1, 6, 31, "t");
	ck_assert_uint_eq(take(r1, fr, 2), 1);
	ck_assert_int_eq(fr[0].h.type, CM_T_SYNC_ACK);
	ck_assert_uint_eq(fr[0].h.clock, 5);

	/* A plain send never gets one. */
	send_msg(r1, 1, 0, 6, 2, 6, 0, "u", 1);
	post(r0, 0, 1, 6, 2, 32);
	expect_deliver(r0, 1, 6, 32, "u");
	expect_nothing(r1);
}
END_TEST

START_TEST(test_sync_sender_gone)
{
	struct cm_session *r0 = join(0, 2), *r1 = join(1, 2);
	send_msg(r1, 1, 0, 6, 0, 0, CM_F_SYNC, "s", 1);
	cm_session_closed(r1);
	post(r0, 0, 1, 6, 0, 1);
	expect_deliver(r0, 1, 6, 1, "s"); /* the log still has it; the ack goes nowhere */
	expect_nothing(r1);
}
END_TEST

/* ---------------- probes ---------------- */

static void expect_probe_reply(struct cm_session *s, uint64_t id, int found, int src, int tag,
                               uint64_t len)
{
	struct rframe fr[2];
	ck_assert_uint_eq(take(s, fr, 2), 1);
	ck_assert_int_eq(fr[0].h.type, CM_T_PROBE_REPLY);
	ck_assert_uint_eq(fr[0].h.clock, id);
	ck_assert_int_eq(!!(fr[0].h.flags & CM_F_FOUND), found);
	ck_assert_int_eq(fr[0].h.src, src);
	ck_assert_int_eq(fr[0].h.tag, tag);
	ck_assert_int_eq(fr[0].h.dst, cm_session_rank(s));
	ck_assert_uint_eq(fr[0].h.len, CM_PROBE_REPLY_PAYLOAD);
	ck_assert_uint_eq(cm_get_u64(fr[0].payload), len);
}

START_TEST(test_probe)
{
	struct cm_session *r0 = join(0, 2), *r1 = join(1, 2);
	probe(r0, 0, CM_ANY_SOURCE, CM_ANY_TAG, 0, 1, 0);
	expect_probe_reply(r0, 1, 0, -1, -1, 0);

	send_str(r1, 1, 0, 3, 0, "hello");
	probe(r0, 0, CM_ANY_SOURCE, 3, 0, 2, 0);
	expect_probe_reply(r0, 2, 1, 1, 3, 5);
	probe(r0, 0, 1, 4, 0, 3, 0);
	expect_probe_reply(r0, 3, 0, -1, -1, 0);
	/* A probe does not take the message. */
	post(r0, 0, 1, 3, 0, 4);
	expect_deliver(r0, 1, 3, 4, "hello");
	probe(r0, 0, 1, 3, 0, 5, 0);
	expect_probe_reply(r0, 5, 0, -1, -1, 0);
}
END_TEST

START_TEST(test_blocking_probe)
{
	struct cm_session *r0 = join(0, 2), *r1 = join(1, 2);
	probe(r0, 0, 1, 7, 0, 1, 1);
	expect_nothing(r0);
	send_str(r1, 1, 0, 8, 0, "other tag");
	expect_nothing(r0);
	send_str(r1, 1, 0, 7, 1, "seven");
	expect_probe_reply(r0, 1, 1, 1, 7, 5);

	/* Found at once when the message is already there. */
	probe(r0, 0, CM_ANY_SOURCE, 8, 0, 2, 1);
	expect_probe_reply(r0, 2, 1, 1, 8, 9);

	/* A message a pending receive takes does not answer the probe. */
	probe(r0, 0, 1, 9, 0, 3, 1);
	post(r0, 0, 1, 9, 0, 4);
	expect_nothing(r0);
	send_str(r1, 1, 0, 9, 2, "taken");
	expect_deliver(r0, 1, 9, 4, "taken");
	send_str(r1, 1, 0, 9, 3, "probed");
	expect_probe_reply(r0, 3, 1, 1, 9, 6);
	post(r0, 0, 1, 9, 0, 5);
	expect_deliver(r0, 1, 9, 5, "probed");
}
END_TEST

START_TEST(test_close_drops_waits)
{
	struct cm_session *r0 = join(0, 2), *r1 = join(1, 2);
	post(r0, 0, 1, 1, 0, 1);
	probe(r0, 0, 1, 1, 0, 2, 1);
	cm_session_closed(r0);
	send_str(r1, 1, 0, 1, 0, "kept");
	struct cm_session *again = join_inc(0, 2, 1, NULL);
	expect_nothing(again);
	post(again, 0, 1, 1, 0, 0);
	expect_deliver(again, 1, 1, 0, "kept");
}
END_TEST

/* ---------------- payloads ---------------- */

START_TEST(test_zero_and_large_payloads)
{
	struct cm_session *r0 = join(0, 2), *r1 = join(1, 2);
	send_msg(r1, 1, 0, 1, 0, 0, 0, NULL, 0);
	post(r0, 0, 1, 1, 0, 1);
	struct rframe fr[2];
	ck_assert_uint_eq(take(r0, fr, 2), 1);
	ck_assert_int_eq(fr[0].h.type, CM_T_DELIVER);
	ck_assert_uint_eq(fr[0].h.len, 0);

	uint32_t big = 3 * 1024 * 1024 + 3;
	uint8_t *data = malloc(big);
	for (uint32_t i = 0; i < big; i++)
		data[i] = (uint8_t)(i * 7 + (i >> 13));
	struct bytes b = {0};
	frame_add(&b, CM_T_MSG, 0, 1, 0, 2, 0, 1, data, big);
	feed_bytes(r1, &b, 100000); /* payload straight into the entry, in pieces */
	frame_add(&b, CM_T_MSG, 0, 1, 0, 2, 0, 2, data, big);
	feed_bytes(r1, &b, SIZE_MAX); /* partly through the staging buffer */
	bytes_free(&b);
	post(r0, 0, 1, 2, 0, 2);
	post(r0, 0, 1, 2, 0, 3);
	ck_assert_uint_eq(take(r0, fr, 2), 2);
	for (int k = 0; k < 2; k++) {
		ck_assert_uint_eq(fr[k].h.len, big);
		ck_assert(memcmp(fr[k].payload, data, big) == 0);
	}
	free(data);
}
END_TEST

START_TEST(test_max_payload_exactly)
{
	struct cm_session *r0 = join(0, 1);
	uint8_t *data = calloc(1, H_MAX_PAYLOAD);
	data[H_MAX_PAYLOAD - 1] = 0xAB;
	send_msg(r0, 0, 0, 0, 0, 0, 0, data, H_MAX_PAYLOAD);
	post(r0, 0, 0, 0, 0, 0);
	struct rframe fr[2];
	ck_assert_uint_eq(take(r0, fr, 2), 1);
	ck_assert_uint_eq(fr[0].h.len, H_MAX_PAYLOAD);
	ck_assert_uint_eq(fr[0].payload[H_MAX_PAYLOAD - 1], 0xAB);
	free(data);
}
END_TEST

/* ---------------- stream splitting ---------------- */

/* A conversation between three ranks fed in `chunk`-byte reads and drained
 * in `wchunk`-byte writes; returns every session's output concatenated
 * with separators. */
static void run_script(size_t chunk, size_t wchunk, struct bytes *all)
{
	struct harness h;
	h_init(&h, UINT64_MAX);
	struct cm_session *s[4];
	struct bytes in[4] = {{0}};
	for (int i = 0; i < 4; i++)
		s[i] = cm_session_new(h.core, NULL);
	uint8_t big[70000];
	for (size_t i = 0; i < sizeof big; i++)
		big[i] = (uint8_t)(i ^ (i >> 8));

	for (int r = 0; r < 3; r++)
		hello_add(&in[r], r, 3, 0, H_SECRET);
	frame_add(&in[0], CM_T_RECV_REQ, 0, CM_ANY_SOURCE, 0, CM_ANY_TAG, 0, 0, NULL, 0);
	frame_add(&in[0], CM_T_PROBE, CM_F_BLOCKING, 2, 0, 5, 0, 1, NULL, 0);
	for (int round = 0; round < 3; round++) {
		for (int r = 1; r < 3; r++) {
			for (int k = 0; k < 4; k++) {
				uint64_t clock = (uint64_t)(round * 10 + k);
				uint32_t len = (uint32_t)((k * 37 + r * round * 1000) % 3000);
				if (k == 3)
					len = r == 1 ? 0 : (uint32_t)sizeof big;
				frame_add(&in[r], CM_T_MSG, (k == 1) ? CM_F_SYNC : 0, r, 0, 5 + k,
				          0, clock, k == 3 ? big : big + k, len);
			}
			frame_add(&in[r], CM_T_MSG, 0, r, 0, 5, 0, (uint64_t)(round * 10 + 1),
			          big, 3); /* re-send */
		}
		for (int k = 0; k < 6; k++)
			frame_add(&in[0], CM_T_RECV_REQ, 0, k % 2 ? 2 : CM_ANY_SOURCE, 0,
			          k % 3 ? 5 + k % 4 : CM_ANY_TAG, 0, (uint64_t)(2 + round * 6 + k),
			          NULL, 0);
		frame_add(&in[0], CM_T_PROBE, 0, 1, 0, CM_ANY_TAG, 0, 100, NULL, 0);
	}
	for (int r = 0; r < 3; r++)
		frame_add(&in[r], CM_T_BYE, 0, r, r, 0, 0, 0, NULL, 0);
	/* A bad version byte: refused, must not disturb anything. */
	hello_add(&in[3], 0, 3, 0, H_SECRET);
	in[3].p[0] = 9;

	/* Interleave: each session gets its bytes in slices, round robin. */
	size_t off[4] = {0};
	size_t slice = 997;
	for (int busy = 1; busy;) {
		busy = 0;
		for (int i = 0; i < 4; i++) {
			size_t n = in[i].len - off[i] < slice ? in[i].len - off[i] : slice;
			if (n == 0)
				continue;
			busy = 1;
			feed(s[i], in[i].p + off[i], n, chunk);
			off[i] += n;
		}
	}
	for (int i = 0; i < 4; i++) {
		drain(s[i], all, wchunk);
		bytes_add(all, "|", 1);
		cm_session_closed(s[i]);
		cm_session_release(s[i]);
		bytes_free(&in[i]);
	}
	cm_core_free(h.core);
}

START_TEST(test_chunking_invariance)
{
	struct bytes ref = {0};
	run_script(SIZE_MAX, SIZE_MAX, &ref);
	/* Sanity: the reference contains deliveries, acks, probes, BYE_ACKs. */
	ck_assert_uint_gt(ref.len, 75000);
	static const size_t chunks[] = {1, 2, 3, 7, 31, 32, 33, 79, 80, 81, 4096, 65537};
	for (size_t i = 0; i < sizeof chunks / sizeof chunks[0]; i++) {
		struct bytes got = {0};
		run_script(chunks[i], chunks[(i + 5) % 12], &got);
		ck_assert_msg(got.len == ref.len && memcmp(got.p, ref.p, ref.len) == 0,
		              "chunk %zu: output differs (%zu vs %zu bytes)", chunks[i], got.len,
		              ref.len);
		bytes_free(&got);
	}
	bytes_free(&ref);
}
END_TEST

/* ---------------- scale ---------------- */

START_TEST(test_ten_thousand_queued)
{
	struct cm_session *r0 = join(0, 2), *r1 = join(1, 2);
	struct bytes b = {0};
	for (uint32_t i = 0; i < 10000; i++)
		frame_add(&b, CM_T_MSG, 0, 1, 0, (int32_t)(i % 7), 0, i, &i, sizeof i);
	feed_bytes(r1, &b, SIZE_MAX);
	/* Receives posted in send order, then a tail with wildcards. */
	for (uint32_t i = 0; i < 10000; i++) {
		int tag = (i >= 9000) ? CM_ANY_TAG : (int)(i % 7);
		frame_add(&b, CM_T_RECV_REQ, 0, i >= 9500 ? CM_ANY_SOURCE : 1, 0, tag, 0, i, NULL,
		          0);
	}
	feed_bytes(r0, &b, SIZE_MAX);
	bytes_free(&b);
	static struct rframe fr[10001];
	ck_assert_uint_eq(take(r0, fr, 10001), 10000);
	for (uint32_t i = 0; i < 10000; i++) {
		uint32_t got;
		memcpy(&got, fr[i].payload, sizeof got);
		ck_assert_uint_eq(got, i);
		ck_assert_uint_eq(fr[i].h.clock, i);
	}
}
END_TEST

START_TEST(test_all_to_all_64)
{
	enum { N = 64 };
	struct cm_session *r[N];
	for (int i = 0; i < N; i++)
		r[i] = join(i, N);
	struct bytes b = {0};
	/* Half the ranks post first, half receive after the sends. */
	for (int i = 0; i < N; i += 2) {
		for (int j = 0; j < N; j++)
			frame_add(&b, CM_T_RECV_REQ, 0, j, i, 0, 0, (uint64_t)j, NULL, 0);
		feed_bytes(r[i], &b, SIZE_MAX);
	}
	for (int i = 0; i < N; i++) {
		for (int j = 0; j < N; j++) {
			uint32_t v = (uint32_t)(i * 1000 + j);
			frame_add(&b, CM_T_MSG, 0, i, j, 0, 0, (uint64_t)j, &v, sizeof v);
		}
		feed_bytes(r[i], &b, SIZE_MAX);
	}
	for (int i = 1; i < N; i += 2) {
		for (int j = N - 1; j >= 0; j--) /* reverse source order */
			frame_add(&b, CM_T_RECV_REQ, 0, j, i, 0, 0, (uint64_t)j, NULL, 0);
		feed_bytes(r[i], &b, SIZE_MAX);
	}
	bytes_free(&b);
	for (int i = 0; i < N; i++) {
		struct rframe fr[N + 1];
		ck_assert_uint_eq(take(r[i], fr, N + 1), N);
		int seen[N] = {0};
		for (int k = 0; k < N; k++) {
			uint32_t v;
			memcpy(&v, fr[k].payload, sizeof v);
			ck_assert_int_eq(fr[k].h.src, (int)fr[k].h.clock);
			ck_assert_uint_eq(v, (uint32_t)(fr[k].h.src * 1000 + i));
			seen[fr[k].h.src]++;
		}
		for (int k = 0; k < N; k++)
			ck_assert_int_eq(seen[k], 1);
	}
}
END_TEST

START_TEST(test_log_trim)
{
	cm_core_free(H.core);
	h_init(&H, 20000); /* ~20 KB of delivered entries kept */
	struct cm_session *r0 = join(0, 2), *r1 = join(1, 2);
	uint8_t kb[1000] = {0};
	for (uint32_t i = 0; i < 100; i++) {
		send_msg(r1, 1, 0, 0, 0, i, 0, kb, sizeof kb);
		post(r0, 0, 1, 0, 0, i);
	}
	send_msg(r1, 1, 0, 0, 0, 100, 0, kb, sizeof kb); /* undelivered: kept */
	struct cm_core_stats st;
	cm_core_stats(H.core, &st);
	ck_assert_uint_eq(st.msgs_delivered, 100);
	ck_assert_uint_le(st.log_bytes_delivered_kept, 20000);
	ck_assert_uint_lt(st.log_entries_kept, 30);
	ck_assert_uint_gt(st.log_entries_kept, 1);
	struct rframe fr[101];
	ck_assert_uint_eq(take(r0, fr, 101), 100);
	post(r0, 0, 1, 0, 0, 100);
	ck_assert_uint_eq(take(r0, fr, 2), 1);
}
END_TEST

START_TEST(test_output_survives_partial_writes)
{
	struct cm_session *r0 = join(0, 1);
	for (uint32_t i = 0; i < 50; i++) {
		char text[32];
		snprintf(text, sizeof text, "message %u", i);
		send_str(r0, 0, 0, 1, i, text);
		post(r0, 0, 0, 1, 0, i);
	}
	struct bytes out = {0};
	drain(r0, &out, 5); /* five bytes per "write" */
	struct rframe fr[51];
	ck_assert_uint_eq(parse_frames(&out, fr, 51), 50);
	for (uint32_t i = 0; i < 50; i++) {
		char text[32];
		snprintf(text, sizeof text, "message %u", i);
		ck_assert_uint_eq(fr[i].h.len, strlen(text));
		ck_assert(memcmp(fr[i].payload, text, strlen(text)) == 0);
	}
	bytes_free(&out);
	ck_assert_uint_gt(H.wakes, 0);
}
END_TEST

static Suite *core_suite(void)
{
	Suite *s = suite_create("core");
	TCase *t = tcase_create("auth");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, test_hello_ack);
	tcase_add_test(t, test_no_hello);
	tcase_add_test(t, test_bad_secret);
	tcase_add_test(t, test_world_size_mismatch);
	tcase_add_test(t, test_hello_payload);
	tcase_add_test(t, test_second_hello);
	tcase_add_test(t, test_incarnations);
	tcase_add_test(t, test_rank_reconnects_after_close);
	tcase_add_test(t, test_malformed_headers);
	tcase_add_test(t, test_frames_after_bye);
	tcase_add_test(t, test_bye_after_traffic);
	suite_add_tcase(s, t);

	t = tcase_create("matching");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, test_earliest_message);
	tcase_add_test(t, test_earliest_request);
	tcase_add_test(t, test_earliest_request_four_keys);
	tcase_add_test(t, test_wildcards);
	tcase_add_test(t, test_ctx_separation);
	tcase_add_test(t, test_non_overtaking);
	tcase_add_test(t, test_dedup_by_clock);
	tcase_add_test(t, test_sync_ack_when_matched);
	tcase_add_test(t, test_sync_sender_gone);
	tcase_add_test(t, test_probe);
	tcase_add_test(t, test_blocking_probe);
	tcase_add_test(t, test_close_drops_waits);
	suite_add_tcase(s, t);

	t = tcase_create("stream");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 60);
	tcase_add_test(t, test_zero_and_large_payloads);
	tcase_add_test(t, test_max_payload_exactly);
	tcase_add_test(t, test_chunking_invariance);
	tcase_add_test(t, test_output_survives_partial_writes);
	tcase_add_test(t, test_ten_thousand_queued);
	tcase_add_test(t, test_all_to_all_64);
	tcase_add_test(t, test_log_trim);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(core_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
