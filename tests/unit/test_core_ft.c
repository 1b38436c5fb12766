/* Fault tolerance in the protocol core (no sockets): the delivery record, the
 * replay of a new incarnation's receive requests and probes, and SYNC_ACKs
 * for synchronous re-sends. */
#include "test_core_harness.h"

#include <stdbool.h>

#define EV_KIND_TEST 1 /* any kind: the core does not interpret it */

static void close_sess(struct cm_session *s)
{
	cm_session_closed(s);
}

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

/* ---- nondeterministic events (MPI_Wtime values, ...) ---- */

/* Event `idx` of rank with an 8-byte value, fed in pieces of `chunk`. */
static void event(struct cm_session *s, int rank, uint32_t kind, uint64_t idx, uint64_t value,
                  size_t chunk)
{
	uint8_t v[8];
	cm_put_u64(v, value);
	struct bytes b = {0};
	frame_add(&b, CM_T_EVENT, 0, rank, rank, (int32_t)kind, 0, idx, v, sizeof v);
	feed_bytes(s, &b, chunk);
	bytes_free(&b);
}

static void event_ack_req(struct cm_session *s, int rank, int replay_log)
{
	struct bytes b = {0};
	frame_add(&b, CM_T_EVENT_ACK, replay_log ? CM_F_REPLAY : 0, rank, rank, 0, 0, 0, NULL, 0);
	feed_bytes(s, &b, SIZE_MAX);
	bytes_free(&b);
}

/* The CM's answer to an EVENT_ACK request: n EVENTs with values[i], then
 * EVENT_ACK(count). */
static void expect_events(struct cm_session *s, int rank, const uint64_t *values, size_t n,
                          uint64_t count)
{
	struct rframe fr[64];
	size_t got = take(s, fr, 64);
	ck_assert_uint_eq(got, n + 1);
	for (size_t i = 0; i < n; i++) {
		ck_assert_int_eq(fr[i].h.type, CM_T_EVENT);
		ck_assert_int_eq(fr[i].h.src, rank);
		ck_assert_int_eq(fr[i].h.dst, rank);
		ck_assert_int_eq(fr[i].h.tag, EV_KIND_TEST);
		ck_assert_uint_eq(fr[i].h.clock, i);
		ck_assert_uint_eq(fr[i].h.len, 8);
		ck_assert(cm_get_u64(fr[i].payload) == values[i]);
	}
	ck_assert_int_eq(fr[n].h.type, CM_T_EVENT_ACK);
	ck_assert_int_eq(fr[n].h.dst, rank);
	ck_assert_uint_eq(fr[n].h.clock, count);
}

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

int main(void)
{
	Suite *s = suite_create("core_ft");
	TCase *t = tcase_create("core_ft");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 60);
	tcase_add_test(t, test_replay_in_order);
	tcase_add_test(t, test_replace_live_session);
	tcase_add_test(t, test_trim_after_checkpoint);
	tcase_add_test(t, test_trim_clamped);
	tcase_add_test(t, test_spilled_replay);
	tcase_add_test(t, test_spill_collected);
	tcase_add_test(t, test_new_incarnation_waits_for_old);
	tcase_add_test(t, test_waiting_incarnation_closes);
	tcase_add_test(t, test_pending_not_replayed);
	tcase_add_test(t, test_resend_dropped);
	tcase_add_test(t, test_sync_resend_acked);
	tcase_add_test(t, test_probe_replay);
	tcase_add_test(t, test_diverged_replay);
	tcase_add_test(t, test_trimmed_replay);
	tcase_add_test(t, test_two_failures);
	tcase_add_test(t, test_huge_request_id);
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
