/* Checkpoint protocol codecs: round trips of every frame and payload, and
 * every malformed case the decoders must refuse with the right code. */
#include "config.h"

#include "ckpt_proto.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

static void encode(uint8_t type, uint32_t len, uint64_t arg, uint8_t out[CKPT_HEADER_SIZE])
{
	struct ckpt_header h = {.type = type, .len = len, .arg = arg};
	ckpt_header_encode(&h, out);
}

START_TEST(header_round_trip)
{
	uint8_t b[CKPT_HEADER_SIZE];
	struct ckpt_header h;
	encode(CKPT_T_PUT_DATA, 12345, 0, b);
	ck_assert_int_eq(b[0], 'C');
	ck_assert_int_eq(b[1], 'K');
	ck_assert_int_eq(b[2], CKPT_PROTO_VERSION);
	ck_assert_int_eq(b[3], CKPT_T_PUT_DATA);
	ck_assert_int_eq(b[4], 12345 & 0xff); /* little-endian */
	ck_assert_int_eq(ckpt_header_decode(b, sizeof b, &h), CKPT_OK);
	ck_assert_int_eq(h.type, CKPT_T_PUT_DATA);
	ck_assert_uint_eq(h.len, 12345);
	encode(CKPT_T_PUT_OK, 0, 0x0102030405060708ull, b);
	ck_assert_int_eq(ckpt_header_decode(b, sizeof b, &h), CKPT_OK);
	ck_assert_uint_eq(h.arg, 0x0102030405060708ull);
	ck_assert_int_eq(b[8], 0x08);
	encode(CKPT_T_ERROR, 5, CKPT_E_TOO_BIG, b);
	ck_assert_int_eq(ckpt_header_decode(b, sizeof b, &h), CKPT_OK);
	ck_assert_uint_eq(h.arg, CKPT_E_TOO_BIG);
}
END_TEST

START_TEST(header_truncated)
{
	uint8_t b[CKPT_HEADER_SIZE];
	struct ckpt_header h;
	encode(CKPT_T_HELLO_ACK, 0, 0, b);
	for (size_t n = 0; n < CKPT_HEADER_SIZE; n++)
		ck_assert_int_eq(ckpt_header_decode(b, n, &h), CKPT_E_TRUNCATED);
}
END_TEST

START_TEST(header_bad_magic_version_type)
{
	uint8_t b[CKPT_HEADER_SIZE];
	struct ckpt_header h;
	encode(CKPT_T_HELLO_ACK, 0, 0, b);
	b[0] = 'X';
	ck_assert_int_eq(ckpt_header_decode(b, sizeof b, &h), CKPT_E_MAGIC);
	encode(CKPT_T_HELLO_ACK, 0, 0, b);
	b[1] = 'k';
	ck_assert_int_eq(ckpt_header_decode(b, sizeof b, &h), CKPT_E_MAGIC);
	encode(CKPT_T_HELLO_ACK, 0, 0, b);
	b[2] = 2;
	ck_assert_int_eq(ckpt_header_decode(b, sizeof b, &h), CKPT_E_VERSION);
	b[2] = 0;
	ck_assert_int_eq(ckpt_header_decode(b, sizeof b, &h), CKPT_E_VERSION);
	encode(0, 0, 0, b);
	ck_assert_int_eq(ckpt_header_decode(b, sizeof b, &h), CKPT_E_TYPE);
	encode(CKPT_T_TYPE_MAX + 1, 0, 0, b);
	ck_assert_int_eq(ckpt_header_decode(b, sizeof b, &h), CKPT_E_TYPE);
	encode(255, 0, 0, b);
	ck_assert_int_eq(ckpt_header_decode(b, sizeof b, &h), CKPT_E_TYPE);
	/* A chanmem CM frame (version 1, type HELLO) is not a checkpoint frame. */
	uint8_t cm[CKPT_HEADER_SIZE] = {1, 1, 0, 0};
	ck_assert_int_eq(ckpt_header_decode(cm, sizeof cm, &h), CKPT_E_MAGIC);
}
END_TEST

START_TEST(header_lengths)
{
	static const struct {
		uint8_t type;
		uint32_t min, max;
	} rule[] = {
	    {CKPT_T_HELLO, 32, 32},
	    {CKPT_T_HELLO_ACK, 0, 0},
	    {CKPT_T_PUT_BEGIN, 17, 16 + CKPT_JOB_MAX},
	    {CKPT_T_PUT_DATA, 1, CKPT_CHUNK_MAX},
	    {CKPT_T_PUT_END, 16, 16},
	    {CKPT_T_PUT_OK, 0, 0},
	    {CKPT_T_GET_LATEST, 9, 8 + CKPT_JOB_MAX},
	    {CKPT_T_GET_BEGIN, 24, 24},
	    {CKPT_T_GET_DATA, 1, CKPT_CHUNK_MAX},
	    {CKPT_T_GET_END, 0, 0},
	    {CKPT_T_ERROR, 0, CKPT_ERROR_TEXT_MAX},
	    {CKPT_T_DROP_JOB, 1, CKPT_JOB_MAX},
	    {CKPT_T_DROP_OK, 0, 0},
	};
	uint8_t b[CKPT_HEADER_SIZE];
	struct ckpt_header h;
	for (size_t i = 0; i < sizeof rule / sizeof rule[0]; i++) {
		uint64_t arg = rule[i].type == CKPT_T_ERROR ? CKPT_E_STATE : 0;
		encode(rule[i].type, rule[i].min, arg, b);
		ck_assert_int_eq(ckpt_header_decode(b, sizeof b, &h), CKPT_OK);
		encode(rule[i].type, rule[i].max, arg, b);
		ck_assert_int_eq(ckpt_header_decode(b, sizeof b, &h), CKPT_OK);
		encode(rule[i].type, rule[i].max + 1, arg, b);
		ck_assert_int_eq(ckpt_header_decode(b, sizeof b, &h), CKPT_E_LENGTH);
		encode(rule[i].type, UINT32_MAX, arg, b);
		ck_assert_int_eq(ckpt_header_decode(b, sizeof b, &h), CKPT_E_LENGTH);
		if (rule[i].min > 0) {
			encode(rule[i].type, rule[i].min - 1, arg, b);
			ck_assert_int_eq(ckpt_header_decode(b, sizeof b, &h), CKPT_E_LENGTH);
		}
	}
}
END_TEST

START_TEST(header_arg_rules)
{
	uint8_t b[CKPT_HEADER_SIZE];
	struct ckpt_header h;
	encode(CKPT_T_PUT_DATA, 10, 1, b);
	ck_assert_int_eq(ckpt_header_decode(b, sizeof b, &h), CKPT_E_FIELD);
	encode(CKPT_T_HELLO, 32, 1ull << 63, b);
	ck_assert_int_eq(ckpt_header_decode(b, sizeof b, &h), CKPT_E_FIELD);
	encode(CKPT_T_ERROR, 0, 0, b);
	ck_assert_int_eq(ckpt_header_decode(b, sizeof b, &h), CKPT_E_FIELD);
	encode(CKPT_T_ERROR, 0, CKPT_E_MAX + 1, b);
	ck_assert_int_eq(ckpt_header_decode(b, sizeof b, &h), CKPT_E_FIELD);
	encode(CKPT_T_ERROR, 0, CKPT_E_IO, b); /* client-only codes never travel */
	ck_assert_int_eq(ckpt_header_decode(b, sizeof b, &h), CKPT_E_FIELD);
	encode(CKPT_T_PUT_OK, 0, UINT64_MAX, b);
	ck_assert_int_eq(ckpt_header_decode(b, sizeof b, &h), CKPT_OK);
	encode(CKPT_T_DROP_OK, 0, UINT64_MAX, b); /* images removed */
	ck_assert_int_eq(ckpt_header_decode(b, sizeof b, &h), CKPT_OK);
	encode(CKPT_T_DROP_JOB, 5, 1, b);
	ck_assert_int_eq(ckpt_header_decode(b, sizeof b, &h), CKPT_E_FIELD);
}
END_TEST

START_TEST(job_ids)
{
	ck_assert(ckpt_job_valid("a", 1));
	ck_assert(ckpt_job_valid("Job-1.run_2", 11));
	char longest[CKPT_JOB_MAX + 2];
	memset(longest, 'x', sizeof longest);
	ck_assert(ckpt_job_valid(longest, CKPT_JOB_MAX));
	ck_assert(!ckpt_job_valid(longest, CKPT_JOB_MAX + 1));
	ck_assert(!ckpt_job_valid("", 0));
	ck_assert(!ckpt_job_valid("a/b", 3));
	ck_assert(!ckpt_job_valid("a b", 3));
	ck_assert(!ckpt_job_valid("a\0b", 3));
	ck_assert(!ckpt_job_valid("\xc3\xa9", 2));
}
END_TEST

START_TEST(ref_round_trip)
{
	uint8_t p[CKPT_PUT_BEGIN_FIXED + CKPT_JOB_MAX];
	struct ckpt_ref in = {.job = "job42", .rank = 7, .number = 0x1122334455667788ull}, out;
	size_t n = ckpt_put_begin_encode(&in, p);
	ck_assert_uint_eq(n, 16 + 5);
	ck_assert_int_eq(ckpt_put_begin_decode(p, n, &out), CKPT_OK);
	ck_assert_str_eq(out.job, "job42");
	ck_assert_uint_eq(out.rank, 7);
	ck_assert_uint_eq(out.number, in.number);
	n = ckpt_get_latest_encode(&in, p);
	ck_assert_uint_eq(n, 8 + 5);
	ck_assert_int_eq(ckpt_get_latest_decode(p, n, &out), CKPT_OK);
	ck_assert_str_eq(out.job, "job42");
	ck_assert_uint_eq(out.rank, 7);
	ck_assert_uint_eq(out.number, 0);
	in.rank = CKPT_RANK_MAX;
	n = ckpt_put_begin_encode(&in, p);
	ck_assert_int_eq(ckpt_put_begin_decode(p, n, &out), CKPT_OK);
	ck_assert_uint_eq(out.rank, CKPT_RANK_MAX);
}
END_TEST

START_TEST(ref_encode_refuses)
{
	uint8_t p[CKPT_PUT_BEGIN_FIXED + CKPT_JOB_MAX];
	struct ckpt_ref r = {.job = "", .rank = 0};
	ck_assert_uint_eq(ckpt_put_begin_encode(&r, p), 0);
	strcpy(r.job, "bad job");
	ck_assert_uint_eq(ckpt_get_latest_encode(&r, p), 0);
	strcpy(r.job, "ok");
	r.rank = (uint32_t)CKPT_RANK_MAX + 1;
	ck_assert_uint_eq(ckpt_put_begin_encode(&r, p), 0);
	memset(r.job, 'j', sizeof r.job); /* no terminator within the limit */
	r.rank = 0;
	ck_assert_uint_eq(ckpt_put_begin_encode(&r, p), 0);
}
END_TEST

START_TEST(ref_decode_malformed)
{
	uint8_t p[CKPT_PUT_BEGIN_FIXED + CKPT_JOB_MAX + 1];
	struct ckpt_ref in = {.job = "abc", .rank = 3, .number = 9}, out;
	size_t n = ckpt_put_begin_encode(&in, p);
	ck_assert_int_eq(ckpt_put_begin_decode(p, 16, &out), CKPT_E_TRUNCATED); /* no job */
	ck_assert_int_eq(ckpt_put_begin_decode(p, 3, &out), CKPT_E_TRUNCATED);
	ck_assert_int_eq(ckpt_put_begin_decode(p, sizeof p, &out), CKPT_E_LENGTH);
	p[4] = 1; /* reserved */
	ck_assert_int_eq(ckpt_put_begin_decode(p, n, &out), CKPT_E_FIELD);
	p[4] = 0;
	p[3] = 0x80; /* rank 2^31 + 3 */
	ck_assert_int_eq(ckpt_put_begin_decode(p, n, &out), CKPT_E_FIELD);
	p[0] = 0xfe;
	p[1] = p[2] = 0xff;
	p[3] = 0x7f; /* INT32_MAX - 1 is the last valid rank */
	ck_assert_int_eq(ckpt_put_begin_decode(p, n, &out), CKPT_OK);
	p[0] = 0xff; /* INT32_MAX */
	ck_assert_int_eq(ckpt_put_begin_decode(p, n, &out), CKPT_E_FIELD);
	n = ckpt_put_begin_encode(&in, p);
	p[17] = '/';
	ck_assert_int_eq(ckpt_put_begin_decode(p, n, &out), CKPT_E_FIELD);
	p[17] = '\0';
	ck_assert_int_eq(ckpt_put_begin_decode(p, n, &out), CKPT_E_FIELD);
	n = ckpt_get_latest_encode(&in, p);
	ck_assert_int_eq(ckpt_get_latest_decode(p, 8, &out), CKPT_E_TRUNCATED);
	ck_assert_int_eq(ckpt_get_latest_decode(p, 8 + CKPT_JOB_MAX + 1, &out), CKPT_E_LENGTH);
	p[9] = ' ';
	ck_assert_int_eq(ckpt_get_latest_decode(p, n, &out), CKPT_E_FIELD);
}
END_TEST

START_TEST(summaries)
{
	uint8_t p[CKPT_GET_BEGIN_PAYLOAD + 1];
	struct ckpt_summary in = {.number = 5,
	                          .size = 1ull << 40,
	                          .checksum = 0xdeadbeefcafef00dull},
	                    out;
	ckpt_put_end_encode(&in, p);
	ck_assert_int_eq(ckpt_put_end_decode(p, CKPT_PUT_END_PAYLOAD, &out), CKPT_OK);
	ck_assert_uint_eq(out.size, in.size);
	ck_assert_uint_eq(out.checksum, in.checksum);
	ck_assert_int_eq(ckpt_put_end_decode(p, CKPT_PUT_END_PAYLOAD - 1, &out), CKPT_E_TRUNCATED);
	ck_assert_int_eq(ckpt_put_end_decode(p, CKPT_PUT_END_PAYLOAD + 1, &out), CKPT_E_LENGTH);
	ckpt_get_begin_encode(&in, p);
	ck_assert_int_eq(ckpt_get_begin_decode(p, CKPT_GET_BEGIN_PAYLOAD, &out), CKPT_OK);
	ck_assert_uint_eq(out.number, 5);
	ck_assert_uint_eq(out.size, in.size);
	ck_assert_uint_eq(out.checksum, in.checksum);
	ck_assert_int_eq(ckpt_get_begin_decode(p, 0, &out), CKPT_E_TRUNCATED);
	ck_assert_int_eq(ckpt_get_begin_decode(p, CKPT_GET_BEGIN_PAYLOAD + 1, &out), CKPT_E_LENGTH);
}
END_TEST

START_TEST(checksum_fnv1a)
{
	/* Published FNV-1a 64 vectors. */
	ck_assert_uint_eq(ckpt_checksum(CKPT_CHECKSUM_INIT, "", 0), 0xcbf29ce484222325ull);
	ck_assert_uint_eq(ckpt_checksum(CKPT_CHECKSUM_INIT, "a", 1), 0xaf63dc4c8601ec8cull);
	ck_assert_uint_eq(ckpt_checksum(CKPT_CHECKSUM_INIT, "foobar", 6), 0x85944171f73967e8ull);
	/* Piecewise equals whole. */
	uint64_t h = ckpt_checksum(CKPT_CHECKSUM_INIT, "foo", 3);
	ck_assert_uint_eq(ckpt_checksum(h, "bar", 3), 0x85944171f73967e8ull);
}
END_TEST

START_TEST(names)
{
	ck_assert_str_eq(ckpt_type_str(CKPT_T_PUT_DATA), "PUT_DATA");
	ck_assert_str_eq(ckpt_type_str(99), "?");
	for (int e = 0; e <= CKPT_E_MAX; e++)
		ck_assert_str_ne(ckpt_err_str(e), "unknown error");
	ck_assert_str_eq(ckpt_err_str(-5), "unknown error");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ckpt_proto");
	TCase *tc = tcase_create("codecs");
	tcase_add_test(tc, header_round_trip);
	tcase_add_test(tc, header_truncated);
	tcase_add_test(tc, header_bad_magic_version_type);
	tcase_add_test(tc, header_lengths);
	tcase_add_test(tc, header_arg_rules);
	tcase_add_test(tc, job_ids);
	tcase_add_test(tc, ref_round_trip);
	tcase_add_test(tc, ref_encode_refuses);
	tcase_add_test(tc, ref_decode_malformed);
	tcase_add_test(tc, summaries);
	tcase_add_test(tc, checksum_fnv1a);
	tcase_add_test(tc, names);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
