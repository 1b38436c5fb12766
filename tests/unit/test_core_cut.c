/* Unit tests of cut-through forwarding in the cmserver protocol core: a
 * large payload reaches the receiver's queue in pieces as it arrives, with
 * exact bytes; frames behind it wait; a writer with nothing to write parks
 * and is woken; a sender that dies mid-payload is resumed by its re-send
 * (and refused when the re-send differs); a restarted receiver is replayed
 * the partial entry; the spill store and TRIM leave partial entries alone. */
#include "config.h"

#include "test_core_harness.h"

#define CUT (64u * 1024)
#define BIG (300u * 1024 + 7)

static uint8_t *pattern(uint32_t len, unsigned seed)
{
	uint8_t *p = malloc(len);
	ck_assert_ptr_nonnull(p);
	for (uint32_t i = 0; i < len; i++)
		p[i] = (uint8_t)(i * 131 + seed + (i >> 11));
	return p;
}

static void init_cut(uint64_t log_mem, const struct cm_spill_ops *spill)
{
	struct cm_core_config cfg = {.max_payload = H_MAX_PAYLOAD,
	                             .log_mem = log_mem,
	                             .hooks = {.ctx = &H, .wake = h_wake},
	                             .spill = spill,
	                             .cut_through_min = CUT};
	memcpy(cfg.secret, H_SECRET, CM_SECRET_LEN);
	H.wakes = 0;
	H.core = cm_core_new(&cfg);
	ck_assert_ptr_nonnull(H.core);
	nsessions = 0;
}

static void setup_cut(void)
{
	init_cut(UINT64_MAX, NULL);
}

/* The MSG frame (header + payload) for data; the caller feeds slices. */
static struct bytes msg_frame(int src, int dst, int tag, uint64_t clock, uint16_t flags,
                              const uint8_t *data, uint32_t len)
{
	struct bytes b = {0};
	frame_add(&b, CM_T_MSG, flags, src, dst, tag, 0, clock, data, len);
	return b;
}

/* Everything s can write now, raw. */
static size_t take_raw(struct cm_session *s, struct bytes *out)
{
	size_t before = out->len;
	drain(s, out, SIZE_MAX);
	return out->len - before;
}

static void expect_deliver_head(const struct bytes *out, uint32_t len, uint64_t id)
{
	struct cm_header h;
	struct cm_limits lim = {.world_size = 0, .max_payload = UINT32_MAX};
	ck_assert_uint_ge(out->len, CM_HEADER_SIZE);
	ck_assert_int_eq(cm_header_decode(out->p, out->len, &lim, &h), CM_OK);
	ck_assert_int_eq(h.type, CM_T_DELIVER);
	ck_assert_uint_eq(h.len, len);
	ck_assert_uint_eq(h.clock, id);
}

static struct cm_core_stats stats(void)
{
	struct cm_core_stats st;
	cm_core_stats(H.core, &st);
	return st;
}

/* The receiver's queue gets the DELIVER header at once, then exactly the
 * bytes that arrived; in between its writer has nothing to write (it
 * parks, no spinning) and the next piece wakes it. */
START_TEST(test_cut_pieces)
{
	struct cm_session *r0 = join(0, 2), *r1 = join(1, 2);
	uint8_t *data = pattern(BIG, 1);
	struct bytes in = msg_frame(1, 0, 5, 0, 0, data, BIG), out = {0};
	post(r0, 0, 1, 5, 0, 7);
	feed(r1, in.p, CM_HEADER_SIZE + 1000, SIZE_MAX);
	ck_assert_uint_eq(take_raw(r0, &out), CM_HEADER_SIZE + 1000);
	expect_deliver_head(&out, BIG, 7);
	ck_assert(memcmp(out.p + CM_HEADER_SIZE, data, 1000) == 0);
	/* Parked: pending bytes, nothing to write. */
	struct iovec iov[4];
	ck_assert_int_eq(cm_session_out_iov(r0, iov, 4), 0);
	ck_assert_uint_eq(cm_session_out_pending(r0), BIG - 1000);
	unsigned wakes = H.wakes;
	size_t off = CM_HEADER_SIZE + 1000;
	feed(r1, in.p + off, 70000, 30000); /* three reads */
	off += 70000;
	ck_assert_uint_gt(H.wakes, wakes);
	ck_assert_uint_eq(take_raw(r0, &out), 70000);
	ck_assert(memcmp(out.p + CM_HEADER_SIZE, data, 71000) == 0);
	/* A piece that arrives while the writer is not parked wakes nobody. */
	feed(r1, in.p + off, 5000, SIZE_MAX);
	off += 5000;
	wakes = H.wakes;
	feed(r1, in.p + off, 5000, SIZE_MAX);
	off += 5000;
	ck_assert_uint_eq(H.wakes, wakes);
	feed(r1, in.p + off, in.len - off, 65536);
	take_raw(r0, &out);
	ck_assert_uint_eq(out.len, CM_HEADER_SIZE + BIG);
	ck_assert(memcmp(out.p + CM_HEADER_SIZE, data, BIG) == 0);
	ck_assert_uint_eq(cm_session_out_pending(r0), 0);
	struct cm_core_stats st = stats();
	ck_assert_uint_eq(st.msgs_cut_through, 1);
	ck_assert_uint_eq(st.msgs_logged, 1);
	/* Below the threshold: store-and-forward, nothing before the end. */
	uint8_t *small = pattern(CUT - 1, 2);
	struct bytes in2 = msg_frame(1, 0, 5, 1, 0, small, CUT - 1);
	post(r0, 0, 1, 5, 0, 8);
	feed(r1, in2.p, in2.len - 1, SIZE_MAX);
	expect_nothing(r0);
	feed(r1, in2.p + in2.len - 1, 1, SIZE_MAX);
	out.len = 0;
	ck_assert_uint_eq(take_raw(r0, &out), CM_HEADER_SIZE + CUT - 1);
	ck_assert_uint_eq(stats().msgs_cut_through, 1);
	bytes_free(&in);
	bytes_free(&in2);
	bytes_free(&out);
	free(data);
	free(small);
}
END_TEST

/* A message logged before the request is matched later and forwarded from
 * what has arrived; a frame queued behind a partial DELIVER (another
 * sender's message, a SYNC_ACK) is not written before it completes. */
START_TEST(test_cut_order_behind_partial)
{
	struct cm_session *r0 = join(0, 3), *r1 = join(1, 3), *r2 = join(2, 3);
	uint8_t *data = pattern(BIG, 3);
	struct bytes in = msg_frame(1, 0, 5, 0, 0, data, BIG), out = {0};
	feed(r1, in.p, CM_HEADER_SIZE + 2000, 700);
	expect_nothing(r0);
	post(r0, 0, CM_ANY_SOURCE, CM_ANY_TAG, 0, 0);
	post(r0, 0, CM_ANY_SOURCE, CM_ANY_TAG, 0, 1);
	send_msg(r2, 2, 0, 9, 0, 0, CM_F_SYNC, "behind", 6);
	/* The SYNC_ACK to r2 is not held up by r0's queue. */
	struct rframe fr[2];
	ck_assert_uint_eq(take(r2, fr, 2), 1);
	ck_assert_int_eq(fr[0].h.type, CM_T_SYNC_ACK);
	ck_assert_uint_eq(take_raw(r0, &out), CM_HEADER_SIZE + 2000);
	expect_deliver_head(&out, BIG, 0);
	size_t off = CM_HEADER_SIZE + 2000;
	feed(r1, in.p + off, in.len - off - 1, 100000);
	take_raw(r0, &out);
	ck_assert_uint_eq(out.len, CM_HEADER_SIZE + BIG - 1); /* not one byte of "behind" */
	feed(r1, in.p + in.len - 1, 1, SIZE_MAX);
	take_raw(r0, &out);
	ck_assert_uint_eq(out.len, 2 * CM_HEADER_SIZE + BIG + 6);
	ck_assert(memcmp(out.p + CM_HEADER_SIZE, data, BIG) == 0);
	ck_assert(memcmp(out.p + 2 * CM_HEADER_SIZE + BIG, "behind", 6) == 0);
	bytes_free(&in);
	bytes_free(&out);
	free(data);
}
END_TEST

/* The sender's connection ends mid-payload: the entry stays, partial, the
 * receiver keeps what it got. The re-executed sender re-sends everything:
 * earlier messages are dropped as usual, the partial one is resumed (its
 * re-sent prefix read and compared, the rest filled in), and the receiver
 * gets exactly the message, once. */
START_TEST(test_cut_resume_after_sender_death)
{
	struct cm_session *r0 = join(0, 2), *r1 = join(1, 2);
	uint8_t *data = pattern(BIG, 4);
	struct bytes in = msg_frame(1, 0, 5, 3, CM_F_SYNC, data, BIG), out = {0};
	send_str(r1, 1, 0, 4, 1, "before");
	post(r0, 0, 1, 4, 0, 0);
	expect_deliver(r0, 1, 4, 0, "before");
	post(r0, 0, 1, 5, 0, 1);
	const size_t first = CM_HEADER_SIZE + 100000;
	feed(r1, in.p, first, 16384);
	take(r1, (struct rframe[2]){0}, 2); /* its SYNC_ACK went to the dead connection */
	ck_assert_uint_eq(take_raw(r0, &out), first);
	cm_session_closed(r1); /* rank 1 dies */

	uint64_t ack;
	struct cm_session *r1b = join_inc(1, 2, 1, &ack);
	ck_assert_uint_eq(ack, 3);           /* message 3 is not all here */
	send_str(r1b, 1, 0, 4, 1, "before"); /* an ordinary re-send: dropped */
	feed(r1b, in.p, CM_HEADER_SIZE + 50000, 4096);
	/* the re-sent prefix is compared, not forwarded */
	ck_assert_uint_eq(take_raw(r0, &out), 0);
	feed(r1b, in.p + CM_HEADER_SIZE + 50000, in.len - CM_HEADER_SIZE - 50000, 40000);
	/* The re-executed MPI_Ssend is answered too. */
	struct rframe fr[2];
	ck_assert_uint_eq(take(r1b, fr, 2), 1);
	ck_assert_int_eq(fr[0].h.type, CM_T_SYNC_ACK);
	ck_assert_uint_eq(fr[0].h.clock, 3);
	take_raw(r0, &out);
	ck_assert_uint_eq(out.len, CM_HEADER_SIZE + BIG);
	ck_assert(memcmp(out.p + CM_HEADER_SIZE, data, BIG) == 0);
	struct cm_core_stats st = stats();
	ck_assert_uint_eq(st.cut_resumed, 1);
	ck_assert_uint_eq(st.msgs_logged, 2);
	ck_assert_uint_eq(st.msgs_delivered, 2);
	/* The next message goes on normally. */
	send_str(r1b, 1, 0, 4, 4, "after");
	post(r0, 0, 1, 4, 0, 2);
	expect_deliver(r0, 1, 4, 2, "after");
	bytes_free(&in);
	bytes_free(&out);
	free(data);
}
END_TEST

/* The re-sent prefix differs from what was logged (and forwarded): the
 * re-execution diverged; refused, nothing of it reaches the receiver. */
START_TEST(test_cut_resume_diverged)
{
	struct cm_session *r0 = join(0, 2), *r1 = join(1, 2);
	uint8_t *data = pattern(BIG, 5);
	struct bytes in = msg_frame(1, 0, 5, 0, 0, data, BIG), out = {0};
	post(r0, 0, 1, 5, 0, 0);
	feed(r1, in.p, CM_HEADER_SIZE + 90000, SIZE_MAX);
	take_raw(r0, &out);
	cm_session_closed(r1);
	struct cm_session *r1b = join_inc(1, 2, 1, NULL);
	in.p[CM_HEADER_SIZE + 80000] ^= 1;
	feed(r1b, in.p, in.len, 65536);
	expect_error(r1b, CM_E_STATE);
	ck_assert_uint_eq(take_raw(r0, &out), 0);
	cm_session_closed(r1b);
	/* A re-send of another length is refused at its header. */
	struct cm_session *r1c = join_inc(1, 2, 2, NULL);
	struct bytes other = msg_frame(1, 0, 5, 0, 0, data, BIG - 1);
	feed(r1c, other.p, other.len, SIZE_MAX);
	expect_error(r1c, CM_E_STATE);
	cm_session_closed(r1c);
	/* The right one still completes it. */
	struct cm_session *r1d = join_inc(1, 2, 3, NULL);
	in.p[CM_HEADER_SIZE + 80000] ^= 1;
	feed(r1d, in.p, in.len, 100000);
	take_raw(r0, &out);
	ck_assert_uint_eq(out.len, CM_HEADER_SIZE + BIG);
	ck_assert(memcmp(out.p + CM_HEADER_SIZE, data, BIG) == 0);
	bytes_free(&in);
	bytes_free(&other);
	bytes_free(&out);
	free(data);
}
END_TEST

/* A restarted receiver is replayed a delivered entry still arriving: its
 * DELIVER waits on the watermark the same way. */
START_TEST(test_cut_replay_partial)
{
	struct cm_session *r0 = join(0, 2), *r1 = join(1, 2);
	uint8_t *data = pattern(BIG, 6);
	struct bytes in = msg_frame(1, 0, 5, 0, 0, data, BIG), out = {0};
	post(r0, 0, 1, 5, 0, 0);
	feed(r1, in.p, CM_HEADER_SIZE + 120000, 50000);
	take_raw(r0, &out);
	cm_session_closed(r0); /* the receiver dies mid-message */
	struct cm_session *r0b = join_inc(0, 2, 1, NULL);
	post(r0b, 0, 1, 5, 0, 0);
	out.len = 0;
	ck_assert_uint_eq(take_raw(r0b, &out), CM_HEADER_SIZE + 120000);
	expect_deliver_head(&out, BIG, 0);
	unsigned wakes = H.wakes;
	feed(r1, in.p + CM_HEADER_SIZE + 120000, in.len - CM_HEADER_SIZE - 120000, 60000);
	ck_assert_uint_gt(H.wakes, wakes);
	take_raw(r0b, &out);
	ck_assert_uint_eq(out.len, CM_HEADER_SIZE + BIG);
	ck_assert(memcmp(out.p + CM_HEADER_SIZE, data, BIG) == 0);
	ck_assert_uint_eq(stats().msgs_replayed, 1);
	bytes_free(&in);
	bytes_free(&out);
	free(data);
}
END_TEST

/* A spill store that only counts. */
static int spill_puts, spill_dels;
static int count_put(void *ctx, int32_t dst, uint64_t seq, const void *data, uint32_t len)
{
	spill_puts++;
	return 0;
}
static int count_get(void *ctx, int32_t dst, uint64_t seq, void *out, uint32_t len)
{
	return -1;
}
static void count_del(void *ctx, int32_t dst, uint64_t seq)
{
	spill_dels++;
}
static const struct cm_spill_ops count_spill = {
    .put = count_put, .get = count_get, .del = count_del};

static void trim(struct cm_session *s, int rank, uint64_t req_cut)
{
	uint8_t pl[CM_TRIM_PAYLOAD];
	cm_put_u64(pl, 0);
	struct bytes b = {0};
	frame_add(&b, CM_T_TRIM, 0, rank, rank, 0, 0, req_cut, pl, sizeof pl);
	feed_bytes(s, &b, SIZE_MAX);
	bytes_free(&b);
}

/* With no memory for delivered entries, a delivered partial entry is
 * neither spilled nor trimmed (nor anything logged after it), and a TRIM
 * covering its request does not collect it; once complete it goes. */
START_TEST(test_cut_never_spilled_or_trimmed_partial)
{
	cm_core_free(H.core);
	init_cut(0, &count_spill);
	spill_puts = spill_dels = 0;
	struct cm_session *r0 = join(0, 2), *r1 = join(1, 2);
	uint8_t *data = pattern(BIG, 7);
	struct bytes in = msg_frame(1, 0, 5, 0, 0, data, BIG), out = {0};
	post(r0, 0, 1, 5, 0, 0);
	feed(r1, in.p, CM_HEADER_SIZE + 10000, SIZE_MAX);
	post(r0, 0, 1, 6, 0, 1); /* posting runs the trim */
	trim(r0, 0, 2);
	ck_assert_int_eq(spill_puts, 0);
	struct cm_core_stats st = stats();
	ck_assert_uint_eq(st.log_entries_kept, 1);
	ck_assert_uint_eq(st.log_entries_collected, 0);
	ck_assert_uint_eq(st.log_bytes_spilled, 0);
	feed(r1, in.p + CM_HEADER_SIZE + 10000, in.len - CM_HEADER_SIZE - 10000, SIZE_MAX);
	take_raw(r0, &out);
	ck_assert(memcmp(out.p + CM_HEADER_SIZE, data, BIG) == 0);
	/* Complete: the next trim spills it, the next TRIM collects it. */
	send_str(r1, 1, 0, 6, 1, "x");
	ck_assert_int_eq(spill_puts, 2);
	trim(r0, 0, 2);
	st = stats();
	ck_assert_uint_eq(st.log_entries_collected, 2);
	ck_assert_int_eq(spill_dels, 2);
	bytes_free(&in);
	bytes_free(&out);
	free(data);
}
END_TEST

int main(void)
{
	Suite *su = suite_create("core_cut");
	TCase *t = tcase_create("cut_through");
	tcase_add_checked_fixture(t, setup_cut, teardown);
	tcase_set_timeout(t, 60);
	tcase_add_test(t, test_cut_pieces);
	tcase_add_test(t, test_cut_order_behind_partial);
	tcase_add_test(t, test_cut_resume_after_sender_death);
	tcase_add_test(t, test_cut_resume_diverged);
	tcase_add_test(t, test_cut_replay_partial);
	tcase_add_test(t, test_cut_never_spilled_or_trimmed_partial);
	suite_add_tcase(su, t);
	SRunner *sr = srunner_create(su);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
