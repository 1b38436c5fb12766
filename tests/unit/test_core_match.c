/* Unit tests of the cmserver protocol core: MPI matching order (earliest
 * message, earliest request), wildcards, contexts, non-overtaking, dedup by
 * clock, SYNC_ACK, probes, and what happens to waits of closed sessions. */
#include "config.h"

#include "test_core_harness.h"

#include <stdio.h>

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
	cm_session_closed(r1);
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

START_TEST(test_no_delivery_to_closing_session)
{
	struct cm_session *r0 = join(0, 2), *r1 = join(1, 2);
	post(r0, 0, 1, 5, 0, 1);
	probe(r0, 0, 1, 5, 0, 2, 1);
	send_msg(r1, 1, 0, 5, 0, 0, CM_F_SYNC, "kept", 4);
	post(r0, 0, 1, 5, 0, 3); /* waits, then takes "late" */
	send_msg(r1, 1, 0, 5, 0, 1, CM_F_SYNC, "late", 4);
	struct rframe fr[4];
	ck_assert_uint_eq(take(r0, fr, 4), 2);
	ck_assert_uint_eq(take(r1, fr, 4), 2); /* both SYNC_ACKs */

	post(r0, 0, 1, 6, 0, 4);
	probe(r0, 0, 1, 6, 0, 5, 1);
	uint8_t junk[CM_HEADER_SIZE] = {42};
	feed(r0, junk, sizeof junk, SIZE_MAX); /* r0 is refused: closing, not yet closed */
	expect_error(r0, CM_E_VERSION);
	send_msg(r1, 1, 0, 6, 0, 2, CM_F_SYNC, "wait", 4);
	expect_nothing(r0); /* neither DELIVER nor PROBE_REPLY after the ERROR */
	expect_nothing(r1); /* and no SYNC_ACK: nobody received it */
	cm_session_closed(r0);
	struct cm_session *again = join_inc(0, 2, 1, NULL);
	post(again, 0, 1, 6, 0, 0);
	expect_deliver(again, 1, 6, 0, "wait");
	ck_assert_uint_eq(take(r1, fr, 4), 1);
	ck_assert_int_eq(fr[0].h.type, CM_T_SYNC_ACK);
	ck_assert_uint_eq(fr[0].h.clock, 2);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("core_match");
	TCase *t = tcase_create("core_match");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 60);
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
	tcase_add_test(t, test_no_delivery_to_closing_session);
	suite_add_tcase(s, t);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
