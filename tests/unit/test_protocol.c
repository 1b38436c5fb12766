/* Unit tests of the wire protocol: every frame type round-trips, every
 * malformed case gets its precise error, nothing reads past the buffer. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "protocol.h"
#include "units.h"

static const struct cm_limits lim = {.world_size = 8, .max_payload = 1u << 20};

static struct cm_header make(uint8_t type)
{
	struct cm_header h = {.version = CM_PROTO_VERSION, .type = type, .src = 1, .dst = 2};
	switch (type) {
	case CM_T_HELLO:
		h.len = CM_HELLO_PAYLOAD;
		break;
	case CM_T_PROBE_REPLY:
		h.len = CM_PROBE_REPLY_PAYLOAD;
		break;
	case CM_T_EVENT:
		h.tag = 1;
		h.clock = 7;
		h.len = CM_EVENT_PAYLOAD_MAX;
		break;
	case CM_T_TRIM:
		h.clock = 42;
		h.len = CM_TRIM_PAYLOAD;
		break;
	case CM_T_MIRROR:
		h.src = h.dst = 0; /* between two CMs: no rank */
		h.clock = 1u << 20;
		h.len = 4096;
		break;
	case CM_T_MIRROR_ACK:
		h.src = h.dst = 0;
		h.clock = 99;
		break;
	case CM_T_STANDBY:
		h.len = 15; /* "127.0.0.1:7000" */
		break;
	case CM_T_MSG:
	case CM_T_DELIVER:
		h.tag = 5;
		h.ctx = 3;
		h.clock = 0x1122334455667788ull;
		h.len = 100;
		break;
	default:
		break;
	}
	return h;
}

static enum cm_err roundtrip(const struct cm_header *h, struct cm_header *out)
{
	uint8_t buf[CM_HEADER_SIZE];
	cm_header_encode(h, buf);
	return cm_header_decode(buf, sizeof buf, &lim, out);
}

/* TRIM carries exactly the 8-byte event cut and nothing in tag/ctx. */
START_TEST(trim_validated)
{
	struct cm_header h = make(CM_T_TRIM), out;
	ck_assert_int_eq(roundtrip(&h, &out), CM_OK);
	h.len = 0;
	ck_assert_int_eq(roundtrip(&h, &out), CM_E_LENGTH);
	h = make(CM_T_TRIM);
	h.tag = 3;
	ck_assert_int_eq(roundtrip(&h, &out), CM_E_FIELD);
	h = make(CM_T_TRIM);
	h.flags = CM_F_REPLAY;
	ck_assert_int_eq(roundtrip(&h, &out), CM_E_FLAGS);
	h = make(CM_T_TRIM);
	h.dst = 99;
	ck_assert_int_eq(roundtrip(&h, &out), CM_E_RANK);
}
END_TEST

/* LOGGED is header only with nothing in tag/ctx; ACK is a MSG flag only. */
START_TEST(logged_and_ack_validated)
{
	struct cm_header h = make(CM_T_LOGGED), out;
	h.clock = 17;
	ck_assert_int_eq(roundtrip(&h, &out), CM_OK);
	ck_assert_uint_eq(out.clock, 17);
	ck_assert_str_eq(cm_type_str(CM_T_LOGGED), "LOGGED");
	h.len = 1;
	ck_assert_int_eq(roundtrip(&h, &out), CM_E_LENGTH);
	h = make(CM_T_LOGGED);
	h.tag = 3;
	ck_assert_int_eq(roundtrip(&h, &out), CM_E_FIELD);
	h = make(CM_T_LOGGED);
	h.ctx = 1;
	ck_assert_int_eq(roundtrip(&h, &out), CM_E_FIELD);
	h = make(CM_T_LOGGED);
	h.flags = CM_F_ACK;
	ck_assert_int_eq(roundtrip(&h, &out), CM_E_FLAGS);
	h = make(CM_T_LOGGED);
	h.src = 8;
	ck_assert_int_eq(roundtrip(&h, &out), CM_E_RANK);

	h = make(CM_T_MSG);
	h.flags = CM_F_ACK | CM_F_SYNC;
	ck_assert_int_eq(roundtrip(&h, &out), CM_OK);
	ck_assert_uint_eq(out.flags, CM_F_ACK | CM_F_SYNC);
	h = make(CM_T_DELIVER);
	h.flags = CM_F_ACK;
	ck_assert_int_eq(roundtrip(&h, &out), CM_E_FLAGS);
	h = make(CM_T_RECV_REQ);
	h.flags = CM_F_ACK;
	ck_assert_int_eq(roundtrip(&h, &out), CM_E_FLAGS);
}
END_TEST

START_TEST(every_type_roundtrips)
{
	for (uint8_t t = 1; t <= CM_T_TYPE_MAX; t++) {
		struct cm_header h = make(t), out;
		ck_assert_msg(roundtrip(&h, &out) == CM_OK, "type %s", cm_type_str(t));
		ck_assert_int_eq(out.type, t);
		ck_assert_int_eq(out.src, h.src);
		ck_assert_int_eq(out.dst, h.dst);
		ck_assert_int_eq(out.tag, h.tag);
		ck_assert_uint_eq(out.ctx, h.ctx);
		ck_assert_uint_eq(out.len, h.len);
		ck_assert(out.clock == h.clock);
	}
}
END_TEST

/* MIRROR and MIRROR_ACK name no rank and no context; MIRROR's flags say
 * which file or the CM's clean end, MIRROR_ACK has no payload. */
START_TEST(mirror_frames_validated)
{
	struct cm_header h = make(CM_T_MIRROR), out;
	h.flags = CM_F_DATA;
	ck_assert_int_eq(roundtrip(&h, &out), CM_OK);
	ck_assert_uint_eq(out.flags, CM_F_DATA);
	h.flags = CM_F_ACK;
	ck_assert_int_eq(roundtrip(&h, &out), CM_E_FLAGS);
	h = make(CM_T_MIRROR);
	h.src = 1;
	ck_assert_int_eq(roundtrip(&h, &out), CM_E_FIELD);
	h = make(CM_T_MIRROR);
	h.ctx = 1;
	ck_assert_int_eq(roundtrip(&h, &out), CM_E_FIELD);
	h = make(CM_T_MIRROR_ACK);
	h.len = 1;
	ck_assert_int_eq(roundtrip(&h, &out), CM_E_LENGTH);
	h = make(CM_T_MIRROR_ACK);
	h.dst = 3;
	ck_assert_int_eq(roundtrip(&h, &out), CM_E_FIELD);
}
END_TEST

/* EVENT carries 1..CM_EVENT_PAYLOAD_MAX value bytes, a kind >= 0 and no
 * ctx; EVENT_ACK is header only and may ask for a replay. */
START_TEST(event_frames_validated)
{
	struct cm_header h = make(CM_T_EVENT), out;
	h.len = 0;
	ck_assert_int_eq(roundtrip(&h, &out), CM_E_LENGTH);
	h.len = CM_EVENT_PAYLOAD_MAX + 1;
	ck_assert_int_eq(roundtrip(&h, &out), CM_E_LENGTH);
	h = make(CM_T_EVENT);
	h.tag = -1;
	ck_assert_int_eq(roundtrip(&h, &out), CM_E_TAG);
	h = make(CM_T_EVENT);
	h.ctx = 1;
	ck_assert_int_eq(roundtrip(&h, &out), CM_E_FIELD);
	h = make(CM_T_EVENT);
	h.flags = CM_F_REPLAY;
	ck_assert_int_eq(roundtrip(&h, &out), CM_E_FLAGS);

	h = make(CM_T_EVENT_ACK);
	h.flags = CM_F_REPLAY;
	h.clock = 12;
	ck_assert_int_eq(roundtrip(&h, &out), CM_OK);
	ck_assert_uint_eq(out.flags, CM_F_REPLAY);
	h.len = 8;
	ck_assert_int_eq(roundtrip(&h, &out), CM_E_LENGTH);
	h = make(CM_T_EVENT_ACK);
	h.tag = 3;
	ck_assert_int_eq(roundtrip(&h, &out), CM_E_FIELD);
	ck_assert_str_eq(cm_type_str(CM_T_EVENT), "EVENT");
	ck_assert_str_eq(cm_type_str(CM_T_EVENT_ACK), "EVENT_ACK");
	ck_assert_str_eq(cm_type_str(CM_T_TYPE_MAX + 1), "?");
}
END_TEST

/* CANCEL names a request by its id alone: header only, tag and ctx zero, no
 * flag; CANCEL_ACK may say CM_F_CANCELLED and nothing else. */
START_TEST(cancel_frames_validated)
{
	struct cm_header h = make(CM_T_CANCEL), out;
	h.src = h.dst = 3;
	h.clock = 41;
	ck_assert_int_eq(roundtrip(&h, &out), CM_OK);
	ck_assert(out.clock == 41);
	h.len = 1;
	ck_assert_int_eq(roundtrip(&h, &out), CM_E_LENGTH);
	h = make(CM_T_CANCEL);
	h.tag = 2;
	ck_assert_int_eq(roundtrip(&h, &out), CM_E_FIELD);
	h = make(CM_T_CANCEL);
	h.ctx = 1;
	ck_assert_int_eq(roundtrip(&h, &out), CM_E_FIELD);
	h = make(CM_T_CANCEL);
	h.src = CM_ANY_SOURCE;
	ck_assert_int_eq(roundtrip(&h, &out), CM_E_RANK);
	h = make(CM_T_CANCEL);
	h.dst = (int32_t)lim.world_size;
	ck_assert_int_eq(roundtrip(&h, &out), CM_E_RANK);
	h = make(CM_T_CANCEL);
	h.flags = CM_F_CANCELLED;
	ck_assert_int_eq(roundtrip(&h, &out), CM_E_FLAGS);

	h = make(CM_T_CANCEL_ACK);
	h.flags = CM_F_CANCELLED;
	ck_assert_int_eq(roundtrip(&h, &out), CM_OK);
	ck_assert_uint_eq(out.flags, CM_F_CANCELLED);
	h.flags = 0;
	ck_assert_int_eq(roundtrip(&h, &out), CM_OK);
	h.flags = CM_F_FOUND;
	ck_assert_int_eq(roundtrip(&h, &out), CM_E_FLAGS);
	h = make(CM_T_CANCEL_ACK);
	h.len = CM_PROBE_REPLY_PAYLOAD;
	ck_assert_int_eq(roundtrip(&h, &out), CM_E_LENGTH);
	h = make(CM_T_CANCEL_ACK);
	h.tag = -1;
	ck_assert_int_eq(roundtrip(&h, &out), CM_E_FIELD);
	ck_assert_str_eq(cm_type_str(CM_T_CANCEL), "CANCEL");
	ck_assert_str_eq(cm_type_str(CM_T_CANCEL_ACK), "CANCEL_ACK");
}
END_TEST

START_TEST(wire_is_little_endian)
{
	struct cm_header h = make(CM_T_MSG);
	uint8_t buf[CM_HEADER_SIZE];
	h.flags = CM_F_SYNC;
	h.src = 0x01020304 & 7;
	h.tag = 0x0a0b0c0d;
	cm_header_encode(&h, buf);
	ck_assert_int_eq(buf[0], CM_PROTO_VERSION);
	ck_assert_int_eq(buf[1], CM_T_MSG);
	ck_assert_int_eq(buf[2], CM_F_SYNC);
	ck_assert_int_eq(buf[3], 0);
	ck_assert_int_eq(buf[12], 0x0d);
	ck_assert_int_eq(buf[15], 0x0a);
	ck_assert_int_eq(buf[20], 100);  /* len */
	ck_assert_int_eq(buf[24], 0x88); /* clock, least significant byte first */
	ck_assert_int_eq(buf[31], 0x11);
}
END_TEST

START_TEST(truncated_header_never_overreads)
{
	struct cm_header h = make(CM_T_MSG), out;
	uint8_t buf[CM_HEADER_SIZE];
	cm_header_encode(&h, buf);
	for (size_t n = 0; n < CM_HEADER_SIZE; n++) {
		/* A heap copy of exactly n bytes: ASan flags any read past it. */
		uint8_t *part = malloc(n ? n : 1);
		memcpy(part, buf, n);
		ck_assert_int_eq(cm_header_decode(part, n, &lim, &out), CM_E_TRUNCATED);
		free(part);
	}
	ck_assert_int_eq(cm_header_decode(NULL, 0, &lim, &out), CM_E_TRUNCATED);
}
END_TEST

static enum cm_err decode_mutated(struct cm_header h)
{
	struct cm_header out;
	uint8_t buf[CM_HEADER_SIZE];
	cm_header_encode(&h, buf);
	buf[0] = h.version; /* encode forces the version; restore the mutation */
	return cm_header_decode(buf, sizeof buf, &lim, &out);
}

START_TEST(bad_version)
{
	struct cm_header h = make(CM_T_MSG);
	h.version = 2;
	ck_assert_int_eq(decode_mutated(h), CM_E_VERSION);
	h.version = 0;
	ck_assert_int_eq(decode_mutated(h), CM_E_VERSION);
}
END_TEST

START_TEST(unknown_type)
{
	struct cm_header h = make(CM_T_MSG);
	h.type = 0;
	ck_assert_int_eq(decode_mutated(h), CM_E_TYPE);
	h.type = CM_T_TYPE_MAX + 1;
	ck_assert_int_eq(decode_mutated(h), CM_E_TYPE);
	h.type = 255;
	ck_assert_int_eq(decode_mutated(h), CM_E_TYPE);
}
END_TEST

START_TEST(length_over_maximum)
{
	struct cm_header h = make(CM_T_MSG);
	h.len = lim.max_payload;
	ck_assert_int_eq(decode_mutated(h), CM_OK);
	h.len = lim.max_payload + 1;
	ck_assert_int_eq(decode_mutated(h), CM_E_LENGTH);
	h.len = UINT32_MAX;
	ck_assert_int_eq(decode_mutated(h), CM_E_LENGTH);
}
END_TEST

START_TEST(fixed_lengths_enforced)
{
	struct cm_header h = make(CM_T_HELLO);
	h.len = CM_HELLO_PAYLOAD - 1;
	ck_assert_int_eq(decode_mutated(h), CM_E_LENGTH);
	h = make(CM_T_RECV_REQ);
	h.len = 1;
	ck_assert_int_eq(decode_mutated(h), CM_E_LENGTH);
	h = make(CM_T_PROBE_REPLY);
	h.len = 4;
	ck_assert_int_eq(decode_mutated(h), CM_E_LENGTH);
	h = make(CM_T_BYE);
	h.len = 8;
	ck_assert_int_eq(decode_mutated(h), CM_E_LENGTH);
	h = make(CM_T_ERROR);
	h.len = CM_ERROR_TEXT_MAX + 1;
	ck_assert_int_eq(decode_mutated(h), CM_E_LENGTH);
}
END_TEST

START_TEST(rank_out_of_range)
{
	struct cm_header h = make(CM_T_MSG);
	h.dst = 8;
	ck_assert_int_eq(decode_mutated(h), CM_E_RANK);
	h.dst = -1;
	ck_assert_int_eq(decode_mutated(h), CM_E_RANK);
	h = make(CM_T_MSG);
	h.src = CM_ANY_SOURCE; /* wildcards are for receives only */
	ck_assert_int_eq(decode_mutated(h), CM_E_RANK);
	h = make(CM_T_RECV_REQ);
	h.src = CM_ANY_SOURCE;
	ck_assert_int_eq(decode_mutated(h), CM_OK);
	h.src = -2;
	ck_assert_int_eq(decode_mutated(h), CM_E_RANK);
	h.src = 1000;
	ck_assert_int_eq(decode_mutated(h), CM_E_RANK);

	/* Before the world size is known only the sign is checked. */
	struct cm_limits open = {.world_size = 0, .max_payload = 1024};
	struct cm_header out;
	uint8_t buf[CM_HEADER_SIZE];
	h = make(CM_T_HELLO);
	h.src = h.dst = 100000;
	cm_header_encode(&h, buf);
	ck_assert_int_eq(cm_header_decode(buf, sizeof buf, &open, &out), CM_OK);
	h.src = -5;
	cm_header_encode(&h, buf);
	ck_assert_int_eq(cm_header_decode(buf, sizeof buf, &open, &out), CM_E_RANK);
}
END_TEST

START_TEST(tags_and_wildcards)
{
	struct cm_header h = make(CM_T_MSG);
	h.tag = -1;
	ck_assert_int_eq(decode_mutated(h), CM_E_TAG);
	h = make(CM_T_PROBE);
	h.tag = CM_ANY_TAG;
	ck_assert_int_eq(decode_mutated(h), CM_OK);
	h.tag = -7;
	ck_assert_int_eq(decode_mutated(h), CM_E_TAG);
	h = make(CM_T_PROBE_REPLY); /* not found: src/tag may be -1 */
	h.src = -1;
	h.tag = -1;
	ck_assert_int_eq(decode_mutated(h), CM_OK);
	h.flags = CM_F_FOUND;
	ck_assert_int_eq(decode_mutated(h), CM_E_RANK);
}
END_TEST

START_TEST(undefined_flags_and_fields)
{
	struct cm_header h = make(CM_T_MSG);
	h.flags = CM_F_BLOCKING;
	ck_assert_int_eq(decode_mutated(h), CM_E_FLAGS);
	h.flags = 0x8000;
	ck_assert_int_eq(decode_mutated(h), CM_E_FLAGS);
	h = make(CM_T_RECV_REQ);
	h.flags = CM_F_SYNC;
	ck_assert_int_eq(decode_mutated(h), CM_E_FLAGS);
	h = make(CM_T_HELLO);
	h.tag = 3;
	ck_assert_int_eq(decode_mutated(h), CM_E_FIELD);
	h = make(CM_T_HELLO);
	h.clock = 1;
	ck_assert_int_eq(decode_mutated(h), CM_E_FIELD);
	h = make(CM_T_BYE);
	h.ctx = 1;
	ck_assert_int_eq(decode_mutated(h), CM_E_FIELD);
	h = make(CM_T_ERROR);
	h.tag = CM_E_MAX + 1;
	ck_assert_int_eq(decode_mutated(h), CM_E_FIELD);
}
END_TEST

START_TEST(hello_payload)
{
	struct cm_hello in = {.incarnation = 3, .world_size = 64, .kind = CM_PEER_DIRECT}, out;
	uint8_t buf[CM_HELLO_PAYLOAD];
	memcpy(in.secret, "0123456789abcdef0123456789abcdef", CM_SECRET_LEN);
	cm_hello_encode(&in, buf);
	ck_assert_int_eq(cm_hello_decode(buf, sizeof buf, &out), CM_OK);
	ck_assert_uint_eq(out.incarnation, 3);
	ck_assert_uint_eq(out.world_size, 64);
	ck_assert_uint_eq(out.kind, CM_PEER_DIRECT);
	ck_assert(cm_secret_equal(out.secret, in.secret));
	ck_assert_int_eq(cm_hello_decode(buf, CM_HELLO_PAYLOAD - 1, &out), CM_E_TRUNCATED);
	buf[8] = 9; /* unknown peer kind */
	ck_assert_int_eq(cm_hello_decode(buf, sizeof buf, &out), CM_E_FIELD);
	cm_hello_encode(&in, buf);
	buf[12] = 1; /* reserved */
	ck_assert_int_eq(cm_hello_decode(buf, sizeof buf, &out), CM_E_FIELD);
	in.world_size = 0;
	cm_hello_encode(&in, buf);
	ck_assert_int_eq(cm_hello_decode(buf, sizeof buf, &out), CM_E_SIZE);
}
END_TEST

START_TEST(secret_compare)
{
	const char *a = "0123456789abcdef0123456789abcdef";
	char b[CM_SECRET_LEN + 1];
	memcpy(b, a, sizeof b);
	ck_assert(cm_secret_equal(a, b));
	b[CM_SECRET_LEN - 1] = 'x';
	ck_assert(!cm_secret_equal(a, b));
	b[CM_SECRET_LEN - 1] = 'f';
	b[0] = '1';
	ck_assert(!cm_secret_equal(a, b));
}
END_TEST

START_TEST(error_strings_exist)
{
	for (int e = 0; e <= CM_E_MAX; e++)
		ck_assert_str_ne(cm_err_str((enum cm_err)e), "unknown error");
	ck_assert_str_eq(cm_type_str(CM_T_DELIVER), "DELIVER");
	ck_assert_str_eq(cm_type_str(200), "?");
}
END_TEST

START_TEST(sizes_and_durations)
{
	uint64_t v;
	ck_assert_int_eq(cm_parse_size("4096", &v), 0);
	ck_assert(v == 4096);
	ck_assert_int_eq(cm_parse_size("4MiB", &v), 0);
	ck_assert(v == 4u << 20);
	ck_assert_int_eq(cm_parse_size("64k", &v), 0);
	ck_assert(v == 64u << 10);
	ck_assert_int_eq(cm_parse_size("1G", &v), 0);
	ck_assert(v == 1u << 30);
	ck_assert_int_eq(cm_parse_size("", &v), -1);
	ck_assert_int_eq(cm_parse_size("-1", &v), -1);
	ck_assert_int_eq(cm_parse_size("12X", &v), -1);
	ck_assert_int_eq(cm_parse_size("99999999999999999999", &v), -1);
	ck_assert_int_eq(cm_parse_size("17179869184G", &v), -1);
	ck_assert_int_eq(cm_parse_duration("500ms", &v), 0);
	ck_assert(v == 500000000ull);
	ck_assert_int_eq(cm_parse_duration("2s", &v), 0);
	ck_assert(v == 2000000000ull);
	ck_assert_int_eq(cm_parse_duration("1.5", &v), 0);
	ck_assert(v == 1500000000ull);
	ck_assert_int_eq(cm_parse_duration("3m", &v), 0);
	ck_assert(v == 180000000000ull);
	ck_assert_int_eq(cm_parse_duration("fast", &v), -1);
	ck_assert_int_eq(cm_parse_duration("2 s", &v), -1);
	ck_assert_int_eq(cm_parse_duration("-1s", &v), -1);
	long l;
	ck_assert_int_eq(cm_parse_long("42", 1, 100, &l), 0);
	ck_assert_int_eq(l, 42);
	ck_assert_int_eq(cm_parse_long("0", 1, 100, &l), -1);
	ck_assert_int_eq(cm_parse_long("4x", 1, 100, &l), -1);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("protocol");
	TCase *tc = tcase_create("frames");
	tcase_add_test(tc, every_type_roundtrips);
	tcase_add_test(tc, mirror_frames_validated);
	tcase_add_test(tc, trim_validated);
	tcase_add_test(tc, logged_and_ack_validated);
	tcase_add_test(tc, event_frames_validated);
	tcase_add_test(tc, cancel_frames_validated);
	tcase_add_test(tc, wire_is_little_endian);
	tcase_add_test(tc, truncated_header_never_overreads);
	tcase_add_test(tc, bad_version);
	tcase_add_test(tc, unknown_type);
	tcase_add_test(tc, length_over_maximum);
	tcase_add_test(tc, fixed_lengths_enforced);
	tcase_add_test(tc, rank_out_of_range);
	tcase_add_test(tc, tags_and_wildcards);
	tcase_add_test(tc, undefined_flags_and_fields);
	tcase_add_test(tc, hello_payload);
	tcase_add_test(tc, secret_compare);
	tcase_add_test(tc, error_strings_exist);
	tcase_add_test(tc, sizes_and_durations);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
