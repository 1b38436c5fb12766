/* Unit tests of the cmserver protocol core: zero-length and large
 * payloads, identical results whatever the split of the byte stream and of
 * the writes, 10 000 queued messages, 64 ranks all-to-all, the log memory
 * budget. */
#include "config.h"

#include "test_core_harness.h"

#include <stdio.h>

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
			frame_add(&in[r], CM_T_MSG, 0, r, 0, 5, 0, (uint64_t)(round * 10 + 1), big,
			          3); /* re-send */
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

/* ---------------- robustness ---------------- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)rng_state;
}

/* A field value that is often valid, sometimes at an edge, sometimes junk. */
static int32_t pick(int32_t valid_max)
{
	switch (rnd() % 6) {
	case 0:
		return -1;
	case 1:
		return (int32_t)rnd();
	case 2:
		return valid_max;
	default:
		return (int32_t)(rnd() % (uint32_t)valid_max);
	}
}

START_TEST(test_random_frames_never_crash)
{
	/* Thousands of sessions, each fed a HELLO (usually good) and random
	 * frames in random chunks: the core must refuse or serve, never crash,
	 * and a well-behaved rank must keep working throughout. */
	struct cm_session *good = join(0, 4);
	uint8_t payload[512];
	for (size_t i = 0; i < sizeof payload; i++)
		payload[i] = (uint8_t)rnd();
	for (int round = 0; round < 3000; round++) {
		struct cm_session *s = cm_session_new(H.core, NULL);
		struct bytes b = {0};
		int rank = 1 + (int)(rnd() % 3);
		if (rnd() % 4)
			hello_add(&b, rank, 4, (uint32_t)round, H_SECRET);
		int nframes = 1 + (int)(rnd() % 8);
		for (int k = 0; k < nframes; k++) {
			uint32_t len = rnd() % 3 ? rnd() % 64 : rnd() % sizeof payload;
			uint8_t type = (uint8_t)(rnd() % 8 ? 3 + rnd() % 4 : rnd() % 14);
			uint16_t flags = (uint16_t)(rnd() % 4 ? 0 : rnd() % 8);
			if (type == CM_T_RECV_REQ || type == CM_T_PROBE)
				len = rnd() % 8 ? 0 : len;
			frame_add(&b, type, flags, rnd() % 3 ? rank : pick(4), pick(4),
			          rnd() % 3 ? (int32_t)(rnd() % 4) : pick(100), rnd() % 3,
			          rnd() % 100, payload, len);
			if (rnd() % 10 == 0) /* flip a random byte */
				b.p[rnd() % b.len] ^= (uint8_t)(1 + rnd() % 255);
		}
		if (rnd() % 5 == 0)
			b.len -= rnd() % (b.len + 1); /* truncated */
		feed(s, b.p, b.len, 1 + rnd() % 100);
		bytes_free(&b);
		struct bytes out = {0};
		drain(s, &out, SIZE_MAX);
		bytes_free(&out);
		cm_session_closed(s);
		cm_session_release(s);
		if (round % 100 == 0) {
			/* Drain the good rank's mailbox of whatever it was sent. */
			uint64_t id = 1000000 + (uint64_t)round;
			send_msg(good, 0, 0, 77, 9, id, 0, "ok", 2);
			post(good, 0, 0, 77, 9, id);
			struct rframe fr[4];
			ck_assert_uint_eq(take(good, fr, 4), 1);
			ck_assert_int_eq(fr[0].h.type, CM_T_DELIVER);
			ck_assert_uint_eq(fr[0].h.clock, id);
		}
	}
	ck_assert(!cm_session_closing(good));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("core_stream");
	TCase *t = tcase_create("core_stream");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 60);
	tcase_add_test(t, test_zero_and_large_payloads);
	tcase_add_test(t, test_max_payload_exactly);
	tcase_add_test(t, test_chunking_invariance);
	tcase_add_test(t, test_ten_thousand_queued);
	tcase_add_test(t, test_all_to_all_64);
	tcase_add_test(t, test_log_trim);
	tcase_add_test(t, test_output_survives_partial_writes);
	tcase_add_test(t, test_random_frames_never_crash);
	suite_add_tcase(s, t);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
