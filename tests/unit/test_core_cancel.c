/* CANCEL in the protocol core (no sockets): a pending receive request is
 * withdrawn and recorded, a matched one is "too late", and a re-executed
 * incarnation that re-posts the request and re-sends CANCEL gets the same
 * answers (the cancelled request matches nothing). */
#include "test_core_harness.h"

static void cancel(struct cm_session *s, int rank, uint64_t id)
{
	struct bytes b = {0};
	frame_add(&b, CM_T_CANCEL, 0, rank, rank, 0, 0, id, NULL, 0);
	feed_bytes(s, &b, SIZE_MAX);
	bytes_free(&b);
}

static void check_cancel_ack(const struct rframe *f, int rank, uint64_t id, int cancelled)
{
	ck_assert_int_eq(f->h.type, CM_T_CANCEL_ACK);
	ck_assert_int_eq(f->h.src, rank);
	ck_assert_int_eq(f->h.dst, rank);
	ck_assert_uint_eq(f->h.clock, id);
	ck_assert_uint_eq(f->h.len, 0);
	ck_assert_uint_eq(f->h.flags, cancelled ? CM_F_CANCELLED : 0);
}

/* Exactly one CANCEL_ACK for id. */
static void expect_cancel_ack(struct cm_session *s, int rank, uint64_t id, int cancelled)
{
	struct rframe fr[4];
	ck_assert_uint_eq(take(s, fr, 4), 1);
	check_cancel_ack(&fr[0], rank, id, cancelled);
}

/* A request nothing matched is withdrawn: a later message goes to the next
 * request instead. */
START_TEST(test_cancel_pending)
{
	struct cm_session *a = join(0, 2), *b = join(1, 2);
	post(b, 1, 0, 7, 0, 0);
	expect_nothing(b);
	cancel(b, 1, 0);
	expect_cancel_ack(b, 1, 0, 1);
	send_str(a, 0, 1, 7, 0, "after");
	expect_nothing(b);
	post(b, 1, 0, 7, 0, 1);
	expect_deliver(b, 0, 7, 1, "after");
}
END_TEST

/* A matched request is too late, whether its DELIVER was read or is still
 * queued: the DELIVER comes first on the connection. */
START_TEST(test_cancel_too_late)
{
	struct cm_session *a = join(0, 2), *b = join(1, 2);
	send_str(a, 0, 1, 3, 0, "early");
	post(b, 1, CM_ANY_SOURCE, CM_ANY_TAG, 0, 0);
	expect_deliver(b, 0, 3, 0, "early");
	cancel(b, 1, 0);
	expect_cancel_ack(b, 1, 0, 0);

	post(b, 1, 0, 4, 0, 1);
	send_str(a, 0, 1, 4, 1, "queued");
	cancel(b, 1, 1);
	struct rframe fr[4];
	ck_assert_uint_eq(take(b, fr, 4), 2);
	ck_assert_int_eq(fr[0].h.type, CM_T_DELIVER);
	ck_assert_uint_eq(fr[0].h.clock, 1);
	check_cancel_ack(&fr[1], 1, 1, 0);
}
END_TEST

/* The outcome is recorded: a new incarnation re-posting the requests and
 * re-sending the CANCELs gets the same answers, and the cancelled request
 * takes nothing, even with a matching message waiting in the log. */
START_TEST(test_cancel_replayed)
{
	struct cm_session *a = join(0, 2), *b = join(1, 2);
	post(b, 1, CM_ANY_SOURCE, 9, 0, 0);
	cancel(b, 1, 0);
	expect_cancel_ack(b, 1, 0, 1);
	send_str(a, 0, 1, 9, 0, "x");
	post(b, 1, 0, 9, 0, 1);
	expect_deliver(b, 0, 9, 1, "x");
	cancel(b, 1, 1);
	expect_cancel_ack(b, 1, 1, 0);
	send_str(a, 0, 1, 9, 1, "y"); /* undelivered when rank 1 dies */
	cm_session_closed(b);

	for (unsigned inc = 1; inc <= 2; inc++) {
		struct cm_session *b1 = join_inc(1, 2, inc, NULL);
		post(b1, 1, CM_ANY_SOURCE, 9, 0, 0);
		expect_nothing(b1); /* "y" would fit: it is not taken */
		cancel(b1, 1, 0);
		expect_cancel_ack(b1, 1, 0, 1);
		post(b1, 1, 0, 9, 0, 1);
		expect_deliver(b1, 0, 9, 1, "x");
		cancel(b1, 1, 1);
		expect_cancel_ack(b1, 1, 1, 0);
		if (inc == 2) {
			post(b1, 1, 0, 9, 0, 2);
			expect_deliver(b1, 0, 9, 2, "y");
		}
		cm_session_closed(b1);
	}
}
END_TEST

/* A re-executed request that is not the one cancelled, or a probe with its
 * id, means the program is not deterministic. */
START_TEST(test_cancel_diverged)
{
	struct cm_session *b = join(1, 2);
	post(b, 1, 0, 1, 0, 0);
	cancel(b, 1, 0);
	expect_cancel_ack(b, 1, 0, 1);
	cm_session_closed(b);
	struct cm_session *b1 = join_inc(1, 2, 1, NULL);
	post(b1, 1, 0, 2, 0, 0);
	expect_error(b1, CM_E_STATE);
	cm_session_closed(b1);
	struct cm_session *b2 = join_inc(1, 2, 2, NULL);
	probe(b2, 1, 0, 1, 0, 0, 0);
	expect_error(b2, CM_E_STATE);
	cm_session_closed(b2);
	struct cm_session *b3 = join_inc(1, 2, 3, NULL);
	post(b3, 1, 0, 1, 5, 0); /* another communicator */
	expect_error(b3, CM_E_STATE);
}
END_TEST

/* CANCEL of an id that is no receive request of the rank, or a malformed
 * CANCEL, is refused and closes that connection only. */
START_TEST(test_cancel_refused)
{
	struct cm_session *a = join(0, 2), *b = join(1, 2);
	cancel(b, 1, 4); /* never posted */
	expect_error(b, CM_E_STATE);

	struct cm_session *b1 = join_inc(1, 2, 1, NULL);
	probe(b1, 1, 0, 1, 0, 0, 0);
	struct rframe fr[2];
	ck_assert_uint_eq(take(b1, fr, 2), 1);
	cancel(b1, 1, 0); /* a probe id */
	expect_error(b1, CM_E_STATE);

	struct cm_session *b2 = join_inc(1, 2, 2, NULL);
	struct bytes raw = {0};
	frame_add(&raw, CM_T_CANCEL, 0, 0, 1, 0, 0, 0, NULL, 0); /* src is not the rank */
	feed_bytes(b2, &raw, SIZE_MAX);
	expect_error(b2, CM_E_RANK);

	struct cm_session *b3 = join_inc(1, 2, 3, NULL);
	frame_add(&raw, CM_T_CANCEL, 0, 1, 1, 3, 0, 0, NULL, 0); /* tag must be 0 */
	feed_bytes(b3, &raw, SIZE_MAX);
	expect_error(b3, CM_E_FIELD);

	struct cm_session *b4 = join_inc(1, 2, 4, NULL);
	frame_add(&raw, CM_T_CANCEL_ACK, CM_F_CANCELLED, 1, 1, 0, 0, 0, NULL, 0);
	feed_bytes(b4, &raw, SIZE_MAX); /* an answer type from a rank */
	expect_error(b4, CM_E_TYPE);

	struct cm_session *c = sess_new();
	cancel(c, 1, 0); /* before HELLO */
	expect_error(c, CM_E_AUTH);
	bytes_free(&raw);

	/* The other rank's connection is unaffected. */
	post(a, 0, 1, 1, 0, 0);
	cancel(a, 0, 0);
	expect_cancel_ack(a, 0, 0, 1);
}
END_TEST

/* A new incarnation taking over a live connection cancels its own request,
 * not the old incarnation's request with the same id. */
START_TEST(test_cancel_after_takeover)
{
	struct cm_session *a = join(0, 2), *b = join(1, 2);
	post(b, 1, 0, 1, 0, 0);
	struct cm_session *b1 = join_takeover(1, 2, 1);
	post(b1, 1, 0, 1, 0, 0);
	cancel(b1, 1, 0);
	expect_cancel_ack(b1, 1, 0, 1);
	send_str(a, 0, 1, 1, 0, "kept");
	expect_nothing(b1);
	post(b1, 1, 0, 1, 0, 1);
	expect_deliver(b1, 0, 1, 1, "kept");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("core_cancel");
	TCase *t = tcase_create("core_cancel");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 60);
	tcase_add_test(t, test_cancel_pending);
	tcase_add_test(t, test_cancel_too_late);
	tcase_add_test(t, test_cancel_replayed);
	tcase_add_test(t, test_cancel_diverged);
	tcase_add_test(t, test_cancel_refused);
	tcase_add_test(t, test_cancel_after_takeover);
	suite_add_tcase(s, t);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
