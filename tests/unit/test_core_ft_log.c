/* Fault tolerance in the protocol core (no sockets): what the log keeps
 * and drops. Nondeterministic events logged and replayed, a committed
 * checkpoint's TRIM, delivered payloads past --log-mem dropped or handed
 * to the spill store. The replay itself is test_core_ft.c's. */
#include "test_core_ft.h"

#include "logmem.h"

#include <stdbool.h>

/* A replay of a message --log-mem dropped fails cleanly. */
START_TEST(test_trimmed_replay)
{
	cm_core_free(H.core);
	h_init(&H, 0); /* keep no delivered message */
	struct cm_session *a = join(0, 2), *b = join(1, 2);
	send_str(a, 0, 1, 1, 0, "m");
	post(b, 1, 0, 1, 0, 0);
	expect_deliver(b, 0, 1, 0, "m");
	close_sess(b);
	struct cm_session *b1 = join_inc(1, 2, 1, NULL);
	post(b1, 1, 0, 1, 0, 0);
	expect_error(b1, CM_E_STATE);
	struct cm_core_stats st;
	cm_core_stats(H.core, &st);
	ck_assert_uint_eq(st.replay_lost, 1);
}
END_TEST

static void trim(struct cm_session *s, int rank, uint64_t req_cut, uint64_t ev_cut)
{
	uint8_t pl[CM_TRIM_PAYLOAD];
	cm_put_u64(pl, ev_cut);
	struct bytes b = {0};
	frame_add(&b, CM_T_TRIM, 0, rank, rank, 0, 0, req_cut, pl, sizeof pl);
	feed_bytes(s, &b, SIZE_MAX);
	bytes_free(&b);
}

/* A spill store in memory: what the core hands over and asks back. */
#define FAKE_SPILL_MAX 8
static struct {
	int32_t dst[FAKE_SPILL_MAX];
	uint64_t seq[FAKE_SPILL_MAX];
	char data[FAKE_SPILL_MAX][32];
	uint32_t len[FAKE_SPILL_MAX];
	bool used[FAKE_SPILL_MAX];
	int puts, gets, dels;
} fake;

static int fake_put(void *ctx, int32_t dst, uint64_t seq, const void *data, uint32_t len)
{
	for (int i = 0; i < FAKE_SPILL_MAX; i++)
		if (!fake.used[i] && len <= sizeof fake.data[i]) {
			fake.used[i] = true;
			fake.dst[i] = dst;
			fake.seq[i] = seq;
			fake.len[i] = len;
			memcpy(fake.data[i], data, len);
			fake.puts++;
			return 0;
		}
	return -1;
}

static int find_fake(int32_t dst, uint64_t seq)
{
	for (int i = 0; i < FAKE_SPILL_MAX; i++)
		if (fake.used[i] && fake.dst[i] == dst && fake.seq[i] == seq)
			return i;
	return -1;
}

static int fake_get(void *ctx, int32_t dst, uint64_t seq, void *out, uint32_t len)
{
	int i = find_fake(dst, seq);
	if (i < 0 || fake.len[i] != len)
		return -1;
	memcpy(out, fake.data[i], len);
	fake.gets++;
	return 0;
}

static void fake_del(void *ctx, int32_t dst, uint64_t seq)
{
	int i = find_fake(dst, seq);
	if (i >= 0) {
		fake.used[i] = false;
		fake.dels++;
	}
}

static const struct cm_spill_ops fake_spill = {.put = fake_put, .get = fake_get, .del = fake_del};

/* A pushed message counts as delivered once it went out: past --log-mem
 * it is spilled, a new connection's PUSH_START reads it back, and a
 * checkpoint's TRIM deletes it from the store. */
START_TEST(test_pushed_spilled)
{
	memset(&fake, 0, sizeof fake);
	cm_core_free(H.core);
	h_init_spill(&H, 0, &fake_spill, NULL);
	struct cm_session *a = join(0, 2), *b = join(1, 2);
	struct bytes f = {0};
	frame_add(&f, CM_T_PUSH_START, 0, 1, 1, 0, 0, 0, NULL, 0);
	feed_bytes(b, &f, SIZE_MAX);
	send_msg(a, 0, 1, 3, 1, 0, CM_F_PUSH, "pushed", 6);
	struct rframe fr[4];
	ck_assert_uint_eq(take(b, fr, 4), 1);
	ck_assert_uint_eq(fr[0].h.flags, CM_F_PUSH);
	ck_assert_int_eq(fake.puts, 1);
	close_sess(b);

	struct cm_session *b1 = join_inc(1, 2, 1, NULL);
	frame_add(&f, CM_T_PUSH_START, 0, 1, 1, 0, 0, 0, NULL, 0);
	feed_bytes(b1, &f, SIZE_MAX);
	ck_assert_uint_eq(take(b1, fr, 4), 1);
	ck_assert_uint_eq(fr[0].h.clock, 0);
	ck_assert(memcmp(fr[0].payload, "pushed", 6) == 0);
	ck_assert_int_eq(fake.gets, 1);
	uint8_t pl[CM_TRIM_PAYLOAD_MAX];
	cm_put_u64(pl, 0);
	cm_put_u64(pl + 8, 1);
	frame_add(&f, CM_T_TRIM, 0, 1, 1, 0, 0, 0, pl, sizeof pl);
	feed_bytes(b1, &f, SIZE_MAX);
	bytes_free(&f);
	ck_assert_int_eq(fake.dels, 1);
}
END_TEST

/* Past --log-mem a delivered payload goes to the spill store; a replay
 * fetches it back (same bytes, same order), and a committed checkpoint's
 * TRIM deletes it. */
START_TEST(test_spilled_replay)
{
	memset(&fake, 0, sizeof fake);
	cm_core_free(H.core);
	h_init_spill(&H, 0, &fake_spill, NULL); /* keep no delivered payload in memory */
	struct cm_session *a = join(0, 2), *b = join(1, 2);
	send_str(a, 0, 1, 1, 0, "first");
	send_str(a, 0, 1, 1, 1, "second");
	post(b, 1, 0, 1, 0, 0);
	expect_deliver(b, 0, 1, 0, "first");
	post(b, 1, 0, 1, 0, 1);
	expect_deliver(b, 0, 1, 1, "second");
	ck_assert_int_eq(fake.puts, 2);
	struct cm_core_stats st;
	cm_core_stats(H.core, &st);
	ck_assert_uint_eq(st.log_bytes_held, 0);
	ck_assert_uint_eq(st.log_bytes_spilled, strlen("first") + strlen("second"));
	close_sess(b);

	struct cm_session *b1 = join_inc(1, 2, 1, NULL);
	post(b1, 1, 0, 1, 0, 0);
	expect_deliver(b1, 0, 1, 0, "first");
	post(b1, 1, 0, 1, 0, 1);
	expect_deliver(b1, 0, 1, 1, "second");
	ck_assert_int_eq(fake.gets, 2);

	/* A store that lost it: the replay fails cleanly. */
	close_sess(b1);
	memset(fake.used, 0, sizeof fake.used);
	struct cm_session *b2 = join_inc(1, 2, 2, NULL);
	post(b2, 1, 0, 1, 0, 0);
	expect_error(b2, CM_E_STATE);
}
END_TEST

START_TEST(test_spill_collected)
{
	memset(&fake, 0, sizeof fake);
	cm_core_free(H.core);
	h_init_spill(&H, 0, &fake_spill, NULL);
	struct cm_session *a = join(0, 2), *b = join(1, 2);
	send_str(a, 0, 1, 1, 0, "gone");
	post(b, 1, 0, 1, 0, 0);
	expect_deliver(b, 0, 1, 0, "gone");
	trim(b, 1, 1, 0);
	ck_assert_int_eq(fake.dels, 1);
	struct cm_core_stats st;
	cm_core_stats(H.core, &st);
	ck_assert_uint_eq(st.log_entries_collected, 1);
}
END_TEST

/* A committed checkpoint's TRIM drops the delivered messages and events it
 * covers; a restarted incarnation resuming from that image replays what
 * came after, a request below the cut is refused, undelivered messages
 * stay. */
START_TEST(test_trim_after_checkpoint)
{
	struct cm_session *a = join(0, 2), *b = join(1, 2);
	send_str(a, 0, 1, 1, 0, "m0");
	send_str(a, 0, 1, 1, 1, "m1");
	send_str(a, 0, 1, 1, 2, "m2");
	send_str(a, 0, 1, 1, 3, "m3");
	post(b, 1, 0, 1, 0, 0);
	expect_deliver(b, 0, 1, 0, "m0");
	post(b, 1, 0, 1, 0, 1);
	expect_deliver(b, 0, 1, 1, "m1");
	post(b, 1, 0, 1, 0, 2);
	expect_deliver(b, 0, 1, 2, "m2");
	event(b, 1, EV_KIND_TEST, 0, 10, SIZE_MAX);
	event(b, 1, EV_KIND_TEST, 1, 11, SIZE_MAX);
	/* The image covers requests 0, 1 and event 0. */
	trim(b, 1, 2, 1);
	expect_nothing(b);
	struct cm_core_stats st;
	cm_core_stats(H.core, &st);
	ck_assert_uint_eq(st.log_entries_collected, 2);
	ck_assert_uint_eq(st.events_collected, 1);

	close_sess(b); /* rank 1 dies; restarts from the image */
	struct cm_session *b1 = join_inc(1, 2, 1, NULL);
	struct bytes q = {0};
	frame_add(&q, CM_T_EVENT_ACK, CM_F_REPLAY, 1, 1, 0, 0, 1, NULL, 0);
	feed_bytes(b1, &q, SIZE_MAX);
	bytes_free(&q);
	uint64_t v = 11;
	struct rframe fr[4];
	ck_assert_uint_eq(take(b1, fr, 4), 2);
	ck_assert_int_eq(fr[0].h.type, CM_T_EVENT);
	ck_assert_uint_eq(fr[0].h.clock, 1);
	ck_assert_uint_eq(cm_get_u64(fr[0].payload), v);
	ck_assert_int_eq(fr[1].h.type, CM_T_EVENT_ACK);
	ck_assert_uint_eq(fr[1].h.clock, 2);
	post(b1, 1, 0, 1, 0, 2); /* after the image: replayed */
	expect_deliver(b1, 0, 1, 2, "m2");
	post(b1, 1, 0, 1, 0, 3); /* new: matches the undelivered one */
	expect_deliver(b1, 0, 1, 3, "m3");
	post(b1, 1, 0, 1, 0, 1); /* below the cut: refused, not invented */
	expect_error(b1, CM_E_STATE);
	/* Events before the cut cannot be asked for any more. */
	struct cm_session *b2 = join_takeover(1, 2, 2);
	frame_add(&q, CM_T_EVENT_ACK, CM_F_REPLAY, 1, 1, 0, 0, 0, NULL, 0);
	feed_bytes(b2, &q, SIZE_MAX);
	bytes_free(&q);
	expect_error(b2, CM_E_STATE);
}
END_TEST

/* A TRIM past what the CM holds (a lost frame, a broken client) is clamped:
 * nothing undelivered is dropped. */
START_TEST(test_trim_clamped)
{
	struct cm_session *a = join(0, 2), *b = join(1, 2);
	send_str(a, 0, 1, 1, 0, "kept");
	trim(b, 1, 1000, 1000);
	post(b, 1, 0, 1, 0, 0);
	expect_deliver(b, 0, 1, 0, "kept");
	struct cm_core_stats st;
	cm_core_stats(H.core, &st);
	ck_assert_uint_eq(st.log_entries_collected, 0);
}
END_TEST

/* Events are logged silently (no reply: they ride the stream before the
 * rank's next frames), acknowledged by count on request, and replayed to
 * every later incarnation in order, the log growing across incarnations. */
START_TEST(test_events_two_restarts)
{
	uint64_t v[6] = {1000, 1001, 0x4010000000000000ull, 7, 8, 9};
	struct cm_session *a = join(0, 2);
	event(a, 0, EV_KIND_TEST, 0, v[0], SIZE_MAX);
	event(a, 0, EV_KIND_TEST, 1, v[1], 5); /* split across reads */
	expect_nothing(a);
	event(a, 0, EV_KIND_TEST, 2, v[2], 1);
	event_ack_req(a, 0, 0);
	expect_events(a, 0, NULL, 0, 3);
	close_sess(a); /* rank 0 dies */

	struct cm_session *a1 = join_inc(0, 2, 1, NULL);
	event_ack_req(a1, 0, 1);
	expect_events(a1, 0, v, 3, 3);
	event(a1, 0, EV_KIND_TEST, 1, v[1], SIZE_MAX); /* already logged: dropped */
	event(a1, 0, EV_KIND_TEST, 3, v[3], SIZE_MAX);
	event(a1, 0, EV_KIND_TEST, 4, v[4], SIZE_MAX);
	expect_nothing(a1);

	/* Replaced while live: the log holds what incarnation 1 added. */
	struct cm_session *a2 = join_takeover(0, 2, 2);
	ck_assert(cm_session_closing(a1));
	event_ack_req(a2, 0, 1);
	expect_events(a2, 0, v, 5, 5);
	event(a2, 0, EV_KIND_TEST, 5, v[5], SIZE_MAX);
	event_ack_req(a2, 0, 0);
	expect_events(a2, 0, NULL, 0, 6);

	/* Another rank's log is its own. */
	struct cm_session *b = join(1, 2);
	event_ack_req(b, 1, 1);
	expect_events(b, 1, NULL, 0, 0);

	struct cm_core_stats st;
	cm_core_stats(H.core, &st);
	ck_assert_uint_eq(st.events_logged, 6);
	ck_assert_uint_eq(st.events_duplicate, 1);
	ck_assert_uint_eq(st.events_replayed, 8);
}
END_TEST

/* Events and messages share the stream: an event before a MSG is logged
 * before the MSG is (the pessimistic condition with one CM). */
START_TEST(test_event_before_msg)
{
	struct cm_session *a = join(0, 2), *b = join(1, 2);
	event(a, 0, EV_KIND_TEST, 0, 42, SIZE_MAX);
	send_str(a, 0, 1, 1, 0, "decided");
	post(b, 1, 0, 1, 0, 0);
	expect_deliver(b, 0, 1, 0, "decided");
	close_sess(a);
	struct cm_session *a1 = join_inc(0, 2, 1, NULL);
	event_ack_req(a1, 0, 1);
	uint64_t v = 42;
	expect_events(a1, 0, &v, 1, 1);
}
END_TEST

/* An event past the end of the log (a hole), or sent for another rank, is
 * refused; so are malformed event frames. */
START_TEST(test_event_refused)
{
	struct cm_session *a = join(0, 2);
	event(a, 0, EV_KIND_TEST, 1, 5, SIZE_MAX);
	expect_error(a, CM_E_STATE);

	struct cm_session *b = join(1, 2);
	event(b, 0, EV_KIND_TEST, 0, 5, SIZE_MAX);
	expect_error(b, CM_E_RANK);

	struct cm_session *a1 = join_inc(0, 2, 1, NULL);
	struct bytes raw = {0};
	frame_add(&raw, CM_T_EVENT, 0, 0, 0, 1, 0, 0, NULL, 0); /* no value */
	feed_bytes(a1, &raw, SIZE_MAX);
	bytes_free(&raw);
	expect_error(a1, CM_E_LENGTH);

	struct cm_session *c = sess_new();
	event(c, 0, EV_KIND_TEST, 0, 5, SIZE_MAX); /* before HELLO */
	expect_error(c, CM_E_AUTH);
}
END_TEST

/* A receive past half the log memory's bound waits while a payload read
 * back from the spill store is still queued for writing, and only then:
 * memory nothing but a rank's progress frees (here a message the store
 * refuses, kept) does not hold it. The bound is tiny: one small payload's
 * buffer passes half of it. */
START_TEST(test_receive_waits_for_read_back)
{
	memset(&fake, 0, sizeof fake);
	cm_core_free(H.core);
	struct cm_logmem *mem = cm_logmem_new(100);
	ck_assert_ptr_nonnull(mem);
	struct cm_core_config cfg = {.max_payload = H_MAX_PAYLOAD,
	                             .log_mem = 0, /* delivered payloads go to the store */
	                             .mem = mem,
	                             .hooks = {.ctx = &H, .wake = h_wake},
	                             .spill = &fake_spill};
	memcpy(cfg.secret, H_SECRET, CM_SECRET_LEN);
	H.core = cm_core_new(&cfg);
	ck_assert_ptr_nonnull(H.core);
	struct cm_session *a = join(0, 2), *b = join(1, 2);
	post(b, 1, 0, 1, 0, 0);
	send_str(a, 0, 1, 1, 0, "first");
	expect_deliver(b, 0, 1, 0, "first");
	post(b, 1, 0, 1, 0, 1);
	send_str(a, 0, 1, 1, 1, "second");
	expect_deliver(b, 0, 1, 1, "second");
	ck_assert_int_eq(fake.puts, 2);
	close_sess(b);
	/* Longer than the store takes: stays in memory, past half the bound. */
	send_str(a, 0, 0, 9, 2, "a message nobody receives in this test");
	struct cm_logmem_stats st;
	cm_logmem_stats(mem, &st);
	ck_assert_uint_gt(st.live, st.limit / 2);

	struct cm_session *b1 = join_inc(1, 2, 1, NULL);
	post(b1, 1, 0, 1, 0, 0); /* no read-back outstanding: answered */
	post(b1, 1, 0, 1, 0, 1); /* the first one's is: held */
	ck_assert(cm_session_held(b1));
	ck_assert(cm_session_held_output(b1)); /* relieving the logs would not help */
	expect_deliver(b1, 0, 1, 0, "first");  /* written: its buffer freed */
	cm_session_input(b1, 0);
	ck_assert(!cm_session_held(b1));
	expect_deliver(b1, 0, 1, 1, "second");
	ck_assert_int_eq(fake.gets, 2);
	teardown();
	cm_logmem_free(mem);
	h_init(&H, UINT64_MAX); /* for the fixture's teardown */
	nsessions = 0;
}
END_TEST

int main(void)
{
	Suite *s = suite_create("core_ft_log");
	TCase *t = tcase_create("core_ft_log");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 60);
	tcase_add_test(t, test_trim_after_checkpoint);
	tcase_add_test(t, test_trim_clamped);
	tcase_add_test(t, test_spilled_replay);
	tcase_add_test(t, test_pushed_spilled);
	tcase_add_test(t, test_spill_collected);
	tcase_add_test(t, test_receive_waits_for_read_back);
	tcase_add_test(t, test_trimmed_replay);
	tcase_add_test(t, test_events_two_restarts);
	tcase_add_test(t, test_event_before_msg);
	tcase_add_test(t, test_event_refused);
	suite_add_tcase(s, t);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
