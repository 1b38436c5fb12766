/* Pushed messages in the protocol core (no sockets): a MSG flagged
 * CM_F_PUSH goes to its receiver's connection once that connection asked
 * with PUSH_START, numbered in the order it was logged, within a window
 * the receiver opens with PUSH_ACK; a new connection gets them again from
 * the number it names; a checkpoint's TRIM collects those below its cut. */
#include "test_core_ft.h"

#define CTX_COLL 1u

static void push_start(struct cm_session *s, int rank, uint64_t first)
{
	struct bytes b = {0};
	frame_add(&b, CM_T_PUSH_START, 0, rank, rank, 0, 0, first, NULL, 0);
	feed_bytes(s, &b, SIZE_MAX);
	bytes_free(&b);
}

static void push_ack(struct cm_session *s, int rank, uint64_t bytes)
{
	struct bytes b = {0};
	frame_add(&b, CM_T_PUSH_ACK, 0, rank, rank, 0, 0, bytes, NULL, 0);
	feed_bytes(s, &b, SIZE_MAX);
	bytes_free(&b);
}

static void send_push(struct cm_session *s, int src, int dst, int tag, uint64_t clock,
                      const char *text)
{
	send_msg(s, src, dst, tag, CTX_COLL, clock, CM_F_PUSH, text, (uint32_t)strlen(text));
}

/* Exactly the pushes first.. of texts[] (from src, tag = index), in order. */
static void expect_pushes(struct cm_session *s, int src, uint64_t first, const char *const *texts,
                          size_t n)
{
	struct rframe fr[16];
	ck_assert_uint_eq(take(s, fr, 16), n);
	for (size_t i = 0; i < n; i++) {
		ck_assert_int_eq(fr[i].h.type, CM_T_DELIVER);
		ck_assert_uint_eq(fr[i].h.flags, CM_F_PUSH);
		ck_assert_uint_eq(fr[i].h.clock, first + i);
		ck_assert_int_eq(fr[i].h.src, src);
		ck_assert_uint_eq(fr[i].h.ctx, CTX_COLL);
		ck_assert_uint_eq(fr[i].h.len, strlen(texts[i]));
		ck_assert(memcmp(fr[i].payload, texts[i], strlen(texts[i])) == 0);
	}
}

/* Nothing is pushed before PUSH_START; then everything logged, and each
 * later one as it comes. A message without the flag still waits for its
 * RECV_REQ. */
START_TEST(test_push_after_start)
{
	struct cm_session *a = join(0, 2), *b = join(1, 2);
	send_push(a, 0, 1, 5, 0, "one");
	send_push(a, 0, 1, 5, 1, "two");
	send_str(a, 0, 1, 5, 2, "plain");
	expect_nothing(b);
	push_start(b, 1, 0);
	const char *const first[] = {"one", "two"};
	expect_pushes(b, 0, 0, first, 2);
	send_push(a, 0, 1, 6, 3, "three");
	const char *const next[] = {"three"};
	expect_pushes(b, 0, 2, next, 1);
	post(b, 1, 0, 5, 0, 0);
	expect_deliver(b, 0, 5, 0, "plain");
	struct cm_core_stats st;
	cm_core_stats(H.core, &st);
	ck_assert_uint_eq(st.msgs_pushed, 3);
	ck_assert_uint_eq(st.msgs_delivered, 4);
}
END_TEST

/* A new incarnation (or connection) names where it wants to start; one
 * outside what the log holds is refused. */
START_TEST(test_push_again_from)
{
	struct cm_session *a = join(0, 2), *b = join(1, 2);
	push_start(b, 1, 0);
	const char *const texts[] = {"p0", "p1", "p2"};
	for (int i = 0; i < 3; i++)
		send_push(a, 0, 1, 1, (uint64_t)i, texts[i]);
	expect_pushes(b, 0, 0, texts, 3);
	close_sess(b);
	send_push(a, 0, 1, 1, 3, "p3");

	struct cm_session *b1 = join_inc(1, 2, 1, NULL);
	push_start(b1, 1, 2);
	const char *const rest[] = {"p2", "p3"};
	expect_pushes(b1, 0, 2, rest, 2);
	struct cm_core_stats st;
	cm_core_stats(H.core, &st);
	ck_assert_uint_eq(st.pushes_resent, 1);
	close_sess(b1);

	struct cm_session *b2 = join_inc(1, 2, 2, NULL);
	push_start(b2, 1, 5); /* past the 4 logged */
	expect_error(b2, CM_E_STATE);
}
END_TEST

/* At most a window goes out beyond the acknowledged bytes; PUSH_ACK
 * opens it again. A credit on a connection not pushed to is void. */
START_TEST(test_push_window)
{
	struct cm_session *a = join(0, 2), *b = join(1, 2);
	enum { N = 30, LEN = 100 * 1024 };
	static uint8_t data[LEN];
	for (int i = 0; i < N; i++)
		send_msg(a, 0, 1, i, CTX_COLL, (uint64_t)i, CM_F_PUSH, data, LEN);
	push_ack(b, 1, 1u << 30); /* before PUSH_START: no effect */
	push_start(b, 1, 0);
	struct rframe fr[N];
	size_t first = take(b, fr, N);
	uint64_t frame = CM_HEADER_SIZE + LEN;
	/* Pushed while less than a window was out: the last one passes it. */
	ck_assert_uint_eq(first, (CM_PUSH_WINDOW + frame - 1) / frame);
	for (size_t i = 0; i < first; i++)
		ck_assert_uint_eq(fr[i].h.clock, i);
	push_ack(b, 1, 3 * frame);
	ck_assert_uint_eq(take(b, fr, N), 3);
	ck_assert_uint_eq(fr[0].h.clock, first);
	/* A credit past what is out counts only what is out. */
	push_ack(b, 1, (uint64_t)N * frame);
	ck_assert_uint_eq(take(b, fr, N), first);
	push_ack(b, 1, (uint64_t)N * frame);
	ck_assert_uint_eq(take(b, fr, N), N - 2 * first - 3);
	expect_nothing(b);
}
END_TEST

/* TRIM's second word collects the pushes below it: a new connection
 * cannot ask for them any more, and may for the rest. */
START_TEST(test_push_trim)
{
	struct cm_session *a = join(0, 2), *b = join(1, 2);
	push_start(b, 1, 0);
	const char *const texts[] = {"t0", "t1", "t2"};
	for (int i = 0; i < 3; i++)
		send_push(a, 0, 1, 1, (uint64_t)i, texts[i]);
	expect_pushes(b, 0, 0, texts, 3);
	uint8_t pl[CM_TRIM_PAYLOAD_MAX];
	cm_put_u64(pl, 0);
	cm_put_u64(pl + 8, 2);
	struct bytes t = {0};
	frame_add(&t, CM_T_TRIM, 0, 1, 1, 0, 0, 0, pl, sizeof pl);
	feed_bytes(b, &t, SIZE_MAX);
	bytes_free(&t);
	struct cm_core_stats st;
	cm_core_stats(H.core, &st);
	ck_assert_uint_eq(st.log_entries_collected, 2);
	ck_assert_uint_eq(st.log_entries_kept, 1);
	close_sess(b);

	struct cm_session *b1 = join_inc(1, 2, 1, NULL);
	push_start(b1, 1, 2);
	expect_pushes(b1, 0, 2, texts + 2, 1);
	close_sess(b1);
	struct cm_session *b2 = join_inc(1, 2, 2, NULL);
	push_start(b2, 1, 1); /* collected */
	expect_error(b2, CM_E_STATE);
}
END_TEST

/* Nothing would answer a pushed synchronous send: refused. */
START_TEST(test_push_not_sync)
{
	struct cm_session *a = join(0, 2);
	send_msg(a, 0, 1, 1, CTX_COLL, 0, CM_F_PUSH | CM_F_SYNC, "s", 1);
	expect_error(a, CM_E_FLAGS);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("core_push");
	TCase *t = tcase_create("core_push");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 60);
	tcase_add_test(t, test_push_after_start);
	tcase_add_test(t, test_push_again_from);
	tcase_add_test(t, test_push_window);
	tcase_add_test(t, test_push_trim);
	tcase_add_test(t, test_push_not_sync);
	suite_add_tcase(s, t);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
