/* Fault tolerance in the protocol core (no sockets): the delivery record,
 * the replay of a new incarnation's receive requests and probes, SYNC_ACKs
 * for synchronous re-sends, and a new incarnation's admission. What the log
 * keeps and drops (events, checkpoint TRIMs, the spill store, --log-mem) is
 * test_core_ft_log.c's. */
#include "test_core_ft.h"

/* Messages delivered to incarnation 0 come again, same ids, same order,
 * then normal matching resumes with what is new. */
START_TEST(test_replay_in_order)
{
	struct cm_session *a = join(0, 2), *b = join(1, 2);
	send_str(a, 0, 1, 5, 0, "one");
	send_str(a, 0, 1, 5, 1, "two");
	send_str(a, 0, 1, 6, 2, "three");
	post(b, 1, CM_ANY_SOURCE, CM_ANY_TAG, 0, 0);
	expect_deliver(b, 0, 5, 0, "one");
	post(b, 1, 0, 6, 0, 1); /* takes "three" before "two" */
	expect_deliver(b, 0, 6, 1, "three");
	close_sess(b); /* rank 1 dies */

	struct cm_session *b1 = join_inc(1, 2, 1, NULL);
	post(b1, 1, CM_ANY_SOURCE, CM_ANY_TAG, 0, 0);
	expect_deliver(b1, 0, 5, 0, "one");
	post(b1, 1, 0, 6, 0, 1);
	expect_deliver(b1, 0, 6, 1, "three");
	post(b1, 1, CM_ANY_SOURCE, CM_ANY_TAG, 0, 2); /* past the record */
	expect_deliver(b1, 0, 5, 2, "two");
	post(b1, 1, CM_ANY_SOURCE, CM_ANY_TAG, 0, 3);
	expect_nothing(b1);
	send_str(a, 0, 1, 7, 3, "four");
	expect_deliver(b1, 0, 7, 3, "four");

	struct cm_core_stats st;
	cm_core_stats(H.core, &st);
	ck_assert_uint_eq(st.msgs_replayed, 2);
	ck_assert_uint_eq(st.sessions_replaced, 0); /* the old one was closed first */
}
END_TEST

/* A newer incarnation replaces a live session: what was queued for the old
 * one (never read) is replayed to the new one. */
START_TEST(test_replace_live_session)
{
	struct cm_session *a = join(0, 2), *b = join(1, 2);
	post(b, 1, 0, 1, 0, 0);
	send_str(a, 0, 1, 1, 0, "lost in the pipe");
	/* b never drains its output: the rank died before reading it, and its
	 * connection does not end (a host cut off): the new one takes over. */
	struct cm_session *b1 = join_takeover(1, 2, 1);
	ck_assert(cm_session_closing(b));
	post(b1, 1, 0, 1, 0, 0);
	expect_deliver(b1, 0, 1, 0, "lost in the pipe");
	struct cm_core_stats st;
	cm_core_stats(H.core, &st);
	ck_assert_uint_eq(st.sessions_replaced, 1);
}
END_TEST

/* A request pending at the failure is not in the record: the new
 * incarnation's request with that id matches normally. */
START_TEST(test_pending_not_replayed)
{
	struct cm_session *a = join(0, 2), *b = join(1, 2);
	post(b, 1, 0, 1, 0, 0);
	close_sess(b);
	send_str(a, 0, 1, 1, 0, "later");
	struct cm_session *b1 = join_inc(1, 2, 1, NULL);
	post(b1, 1, 0, 1, 0, 0);
	expect_deliver(b1, 0, 1, 0, "later");
}
END_TEST

/* Re-sends of a re-executing sender are dropped by clock; the receiver gets
 * each message once. */
START_TEST(test_resend_dropped)
{
	struct cm_session *a = join(0, 2), *b = join(1, 2);
	send_str(a, 0, 1, 1, 0, "x");
	send_str(a, 0, 1, 1, 1, "y");
	close_sess(a);
	uint64_t ack;
	struct cm_session *a1 = join_inc(0, 2, 1, &ack);
	ck_assert_uint_eq(ack, 2);
	send_str(a1, 0, 1, 1, 0, "x");
	send_str(a1, 0, 1, 1, 1, "y");
	send_str(a1, 0, 1, 1, 2, "z");
	post(b, 1, 0, 1, 0, 0);
	expect_deliver(b, 0, 1, 0, "x");
	post(b, 1, 0, 1, 0, 1);
	expect_deliver(b, 0, 1, 1, "y");
	post(b, 1, 0, 1, 0, 2);
	expect_deliver(b, 0, 1, 2, "z");
	expect_nothing(a1);
}
END_TEST

/* A synchronous re-send gets its SYNC_ACK: at once if the original was
 * delivered, when it is delivered otherwise. */
START_TEST(test_sync_resend_acked)
{
	struct cm_session *a = join(0, 2), *b = join(1, 2);
	send_msg(a, 0, 1, 1, 0, 0, CM_F_SYNC, "s0", 2);
	send_msg(a, 0, 1, 2, 0, 1, CM_F_SYNC, "s1", 2);
	post(b, 1, 0, 1, 0, 0);
	expect_deliver(b, 0, 1, 0, "s0");
	close_sess(a); /* its SYNC_ACK for clock 0 is lost with it */

	struct cm_session *a1 = join_inc(0, 2, 1, NULL);
	send_msg(a1, 0, 1, 1, 0, 0, CM_F_SYNC, "s0", 2);
	struct rframe fr[4];
	ck_assert_uint_eq(take(a1, fr, 4), 1);
	ck_assert_int_eq(fr[0].h.type, CM_T_SYNC_ACK);
	ck_assert_uint_eq(fr[0].h.clock, 0);
	ck_assert_int_eq(fr[0].h.src, 1);
	ck_assert_int_eq(fr[0].h.dst, 0);

	send_msg(a1, 0, 1, 2, 0, 1, CM_F_SYNC, "s1", 2); /* not matched yet */
	expect_nothing(a1);
	post(b, 1, 0, 2, 0, 1);
	expect_deliver(b, 0, 2, 1, "s1");
	ck_assert_uint_eq(take(a1, fr, 4), 1);
	ck_assert_int_eq(fr[0].h.type, CM_T_SYNC_ACK);
	ck_assert_uint_eq(fr[0].h.clock, 1);
}
END_TEST

/* Probes are answered from the record during replay, even when what they
 * saw has been received since. */
START_TEST(test_probe_replay)
{
	struct cm_session *a = join(0, 2), *b = join(1, 2);
	probe(b, 1, 0, 1, 0, 0, 0); /* nothing yet */
	send_str(a, 0, 1, 1, 0, "m");
	probe(b, 1, 0, 1, 0, 1, 0); /* found */
	post(b, 1, 0, 1, 0, 2);
	struct rframe fr[4];
	ck_assert_uint_eq(take(b, fr, 4), 3);
	close_sess(b);

	struct cm_session *b1 = join_inc(1, 2, 1, NULL);
	probe(b1, 1, 0, 1, 0, 0, 0);
	ck_assert_uint_eq(take(b1, fr, 4), 1);
	ck_assert_int_eq(fr[0].h.type, CM_T_PROBE_REPLY);
	ck_assert_int_eq(fr[0].h.flags & CM_F_FOUND, 0);
	probe(b1, 1, 0, 1, 0, 1, 0);
	ck_assert_uint_eq(take(b1, fr, 4), 1);
	ck_assert_int_eq(fr[0].h.flags & CM_F_FOUND, CM_F_FOUND);
	ck_assert_int_eq(fr[0].h.src, 0);
	ck_assert_uint_eq(cm_get_u64(fr[0].payload), 1);
	post(b1, 1, 0, 1, 0, 2);
	expect_deliver(b1, 0, 1, 2, "m");
}
END_TEST

/* A re-execution that asks something else than what was answered is
 * refused with a clear error rather than given a wrong message. */
START_TEST(test_diverged_replay)
{
	struct cm_session *a = join(0, 2), *b = join(1, 2);
	send_str(a, 0, 1, 1, 0, "m");
	post(b, 1, 0, 1, 0, 0);
	expect_deliver(b, 0, 1, 0, "m");
	close_sess(b);
	struct cm_session *b1 = join_inc(1, 2, 1, NULL);
	post(b1, 1, 0, 9, 0, 0); /* tag 9: not what request 0 was */
	expect_error(b1, CM_E_STATE);
}
END_TEST

/* Two failures in a row: the second re-execution replays the whole record,
 * including what only the first re-execution received. */
START_TEST(test_two_failures)
{
	struct cm_session *a = join(0, 2), *b = join(1, 2);
	send_str(a, 0, 1, 1, 0, "p");
	post(b, 1, 0, 1, 0, 0);
	expect_deliver(b, 0, 1, 0, "p");
	close_sess(b);
	struct cm_session *b1 = join_inc(1, 2, 1, NULL);
	post(b1, 1, 0, 1, 0, 0);
	expect_deliver(b1, 0, 1, 0, "p");
	send_str(a, 0, 1, 1, 1, "q");
	post(b1, 1, 0, 1, 0, 1);
	expect_deliver(b1, 0, 1, 1, "q");
	close_sess(b1);
	struct cm_session *b2 = join_inc(1, 2, 2, NULL);
	post(b2, 1, 0, 1, 0, 0);
	expect_deliver(b2, 0, 1, 0, "p");
	post(b2, 1, 0, 1, 0, 1);
	expect_deliver(b2, 0, 1, 1, "q");
}
END_TEST

/* A request id far beyond the record is matched normally but not recorded
 * (no unbounded allocation for a hostile id). */
START_TEST(test_huge_request_id)
{
	struct cm_session *a = join(0, 2), *b = join(1, 2);
	send_str(a, 0, 1, 1, 0, "h");
	post(b, 1, 0, 1, 0, UINT64_C(1) << 60);
	expect_deliver(b, 0, 1, UINT64_C(1) << 60, "h");
}
END_TEST

/* A newer incarnation's HELLO waits for the dead one's connection to end:
 * the frames still unread on it (a message, an event, a receive request) are
 * processed first, so the new one replays them instead of re-deciding. */
START_TEST(test_new_incarnation_waits_for_old)
{
	struct cm_session *a = join(0, 2), *b = join(1, 2);
	send_str(a, 0, 1, 1, 0, "first");
	struct cm_session *a1 = hello_flags(0, 0, 2, 1);
	expect_nothing(a1);
	ck_assert_int_eq(cm_session_rank(a1), -1);
	/* Still in the old connection's socket when the HELLO came. */
	send_str(a, 0, 1, 1, 1, "second");
	event(a, 0, EV_KIND_TEST, 0, 42, SIZE_MAX);
	post(a, 0, 1, 9, 0, 0);
	post(b, 1, 0, 1, 0, 0);
	expect_deliver(b, 0, 1, 0, "first");
	post(b, 1, 0, 1, 0, 1);
	expect_deliver(b, 0, 1, 1, "second");
	send_str(b, 1, 0, 9, 0, "reply");
	expect_deliver(a, 1, 9, 0, "reply");
	expect_nothing(a1);

	/* The dead incarnation's end of stream admits the new one. */
	uint64_t next_clock = 0;
	close_sess(a);
	expect_hello_ack(a1, 0, &next_clock);
	ck_assert_uint_eq(next_clock, 2);
	event_ack_req(a1, 0, 1);
	uint64_t v = 42;
	expect_events(a1, 0, &v, 1, 1);
	post(a1, 0, 1, 9, 0, 0); /* replayed from the record */
	expect_deliver(a1, 1, 9, 0, "reply");
	struct cm_core_stats st;
	cm_core_stats(H.core, &st);
	ck_assert_uint_eq(st.sessions_replaced, 0);
}
END_TEST

/* A waiting incarnation that goes away leaves no trace; a second HELLO
 * without TAKEOVER on it is refused. */
START_TEST(test_waiting_incarnation_closes)
{
	struct cm_session *a = join(0, 2);
	struct cm_session *a1 = hello_flags(0, 0, 2, 1);
	expect_nothing(a1);
	close_sess(a1);
	struct cm_session *a2 = hello_flags(0, 0, 2, 2);
	expect_nothing(a2);
	struct bytes b = {0};
	hello_add(&b, 0, 2, 2, H_SECRET);
	feed_bytes(a2, &b, SIZE_MAX);
	bytes_free(&b);
	expect_error(a2, CM_E_STATE);
	struct cm_session *a3 = hello_flags(0, 0, 2, 3);
	close_sess(a);
	expect_hello_ack(a3, 0, NULL);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("core_ft");
	TCase *t = tcase_create("core_ft");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 60);
	tcase_add_test(t, test_replay_in_order);
	tcase_add_test(t, test_replace_live_session);
	tcase_add_test(t, test_new_incarnation_waits_for_old);
	tcase_add_test(t, test_waiting_incarnation_closes);
	tcase_add_test(t, test_pending_not_replayed);
	tcase_add_test(t, test_resend_dropped);
	tcase_add_test(t, test_sync_resend_acked);
	tcase_add_test(t, test_probe_replay);
	tcase_add_test(t, test_diverged_replay);
	tcase_add_test(t, test_two_failures);
	tcase_add_test(t, test_huge_request_id);
	suite_add_tcase(s, t);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
