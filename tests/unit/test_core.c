/* Unit tests of the cmserver protocol core, driven with encoded frames and
 * no sockets (see test_core_harness.h): authentication, incarnations, the
 * refusal of every malformed header with the right ERROR code, BYE. */
#include "config.h"

#include "test_core_harness.h"

#include <stdio.h>

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

	/* A newer incarnation waits while the old connection lives; with
	 * TAKEOVER it replaces it at once. */
	post(old, 1, 0, 5, 0, 1); /* dropped with the old connection */
	struct cm_session *s0 = join(0, 2);
	struct cm_session *waiting = hello_flags(0, 1, 2, 1);
	expect_nothing(waiting);
	ck_assert(!cm_session_closing(old));
	struct cm_session *fresh = join_takeover(1, 2, 2);
	expect_error(waiting, CM_E_STATE); /* replaced by the newer one */
	expect_error(old, CM_E_STATE);
	ck_assert(!cm_session_closing(fresh));

	/* An older incarnation is refused. */
	struct cm_session *older = sess_new();
	hello_add(&b, 1, 2, 1, H_SECRET);
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

/* A TAKEOVER HELLO that crossed the HELLO_ACK on the wire is ignored; any
 * other second HELLO is refused. */
START_TEST(test_late_takeover_ignored)
{
	struct cm_session *old = join(0, 2);
	struct cm_session *s = hello_flags(0, 0, 2, 1);
	expect_nothing(s);
	cm_session_closed(old);
	expect_hello_ack(s, 0, NULL);
	struct bytes b = {0};
	hello_add_flags(&b, CM_F_TAKEOVER, 0, 2, 1, H_SECRET);
	feed_bytes(s, &b, SIZE_MAX);
	expect_nothing(s);
	ck_assert(!cm_session_closing(s));
	hello_add_flags(&b, 0, 0, 2, 1, H_SECRET);
	feed_bytes(s, &b, SIZE_MAX);
	bytes_free(&b);
	expect_error(s, CM_E_STATE);
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
	    {"type past the last", 1, {.type = CM_T_TYPE_MAX + 1}, 0, CM_E_TYPE},
	    {"type 200", 0, {.type = 200}, 0, CM_E_TYPE},
	    {"oversize unauthenticated",
	     0,
	     {.type = CM_T_MSG, .len = H_MAX_PAYLOAD + 1},
	     0,
	     CM_E_LENGTH},
	    {"oversize", 1, {.type = CM_T_MSG, .src = 1, .len = UINT32_MAX}, 0, CM_E_LENGTH},
	    {"RECV_REQ with payload",
	     1,
	     {.type = CM_T_RECV_REQ, .dst = 1, .len = 5},
	     0,
	     CM_E_LENGTH},
	    {"short HELLO", 0, {.type = CM_T_HELLO, .len = 47}, 0, CM_E_LENGTH},
	    {"MSG dst out of range", 1, {.type = CM_T_MSG, .src = 1, .dst = 4}, 0, CM_E_RANK},
	    {"MSG src -1", 1, {.type = CM_T_MSG, .src = -1}, 0, CM_E_RANK},
	    {"RECV_REQ src -2", 1, {.type = CM_T_RECV_REQ, .src = -2, .dst = 1}, 0, CM_E_RANK},
	    {"MSG tag -1", 1, {.type = CM_T_MSG, .src = 1, .tag = -1}, 0, CM_E_TAG},
	    {"RECV_REQ tag -2", 1, {.type = CM_T_RECV_REQ, .dst = 1, .tag = -2}, 0, CM_E_TAG},
	    {"MSG flag BLOCKING",
	     1,
	     {.type = CM_T_MSG, .src = 1, .flags = CM_F_BLOCKING},
	     0,
	     CM_E_FLAGS},
	    {"RECV_REQ flag SYNC",
	     1,
	     {.type = CM_T_RECV_REQ, .dst = 1, .flags = CM_F_SYNC},
	     0,
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
	    {"HELLO_ACK from a rank",
	     1,
	     {.type = CM_T_HELLO_ACK, .src = 1, .dst = 1},
	     0,
	     CM_E_TYPE},
	    {"SYNC_ACK from a rank", 1, {.type = CM_T_SYNC_ACK, .src = 1, .dst = 0}, 0, CM_E_TYPE},
	    {"ERROR from a rank", 1, {.type = CM_T_ERROR, .tag = 3}, 0, CM_E_TYPE},
	};
	struct cm_session *good = join(0, 4);
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const struct bad_case *c = &cases[i];
		struct cm_session *s =
		    c->authenticated ? join_inc(1, 4, (unsigned)i, NULL) : sess_new();
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
		ck_assert_msg(n == 1 && fr[0].h.type == CM_T_ERROR &&
		                  fr[0].h.tag == (int32_t)c->code,
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

int main(void)
{
	Suite *s = suite_create("core_auth");
	TCase *t = tcase_create("core_auth");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 60);
	tcase_add_test(t, test_hello_ack);
	tcase_add_test(t, test_no_hello);
	tcase_add_test(t, test_bad_secret);
	tcase_add_test(t, test_world_size_mismatch);
	tcase_add_test(t, test_hello_payload);
	tcase_add_test(t, test_second_hello);
	tcase_add_test(t, test_incarnations);
	tcase_add_test(t, test_rank_reconnects_after_close);
	tcase_add_test(t, test_late_takeover_ignored);
	tcase_add_test(t, test_malformed_headers);
	tcase_add_test(t, test_frames_after_bye);
	tcase_add_test(t, test_bye_after_traffic);
	suite_add_tcase(s, t);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
