/* The live checks of test_server_live (refusals of bad clients while a good
 * one is served, a client that stops reading does not stall the others,
 * SIGTERM with clients connected exits 0) run against the mode named by
 * CHANMEM_TEST_MODE (default mono), with CHANMEM_CM_THREADS threads where the
 * mode takes them; integration/modes_live.sh loops over every mode. Plus a
 * replaced incarnation and two stalled readers at once, where threads race.
 * Every wait is bounded; the server dies with the test process. */
#include "config.h"

#include "live_server.h"

#include <check.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A newer incarnation of a rank waits until the old connection ends (its
 * last frames processed), or replaces it at once with TAKEOVER: the old one
 * gets ERROR(CM_E_STATE) and is closed; the new one is served; an older or
 * equal incarnation is refused. Messages logged meanwhile stay. */
START_TEST(test_incarnation_replaces)
{
	start_server();
	int a = dial(), b = dial();
	send_hello(a, 0, 2, 0, SECRET);
	expect_header_only(a, CM_T_HELLO_ACK, 0);
	send_hello(b, 1, 2, 0, SECRET);
	expect_header_only(b, CM_T_HELLO_ACK, 0);
	send_frame(b, CM_T_MSG, 0, 1, 0, 3, 0, 0, "kept", 4);
	int a1 = dial();
	send_hello(a1, 0, 2, 1, SECRET);
	expect_quiet(a1, 200);
	send_frame(a, CM_T_MSG, 0, 0, 1, 4, 0, 0, "last", 4); /* still processed */
	close(a);
	expect_header_only(a1, CM_T_HELLO_ACK, 1);
	int a2 = dial();
	send_hello_flags(a2, CM_F_TAKEOVER, 0, 2, 2, SECRET);
	expect_header_only(a2, CM_T_HELLO_ACK, 1);
	expect_refused(a1, CM_E_STATE);
	a1 = dial();
	send_hello(a1, 0, 2, 1, SECRET);
	expect_refused(a1, CM_E_STATE);
	send_frame(b, CM_T_RECV_REQ, 0, 0, 1, 4, 0, 0, NULL, 0);
	struct cm_header hb;
	uint8_t *last;
	recv_frame(b, &hb, &last);
	ck_assert_int_eq(hb.type, CM_T_DELIVER);
	ck_assert_uint_eq(hb.len, 4);
	ck_assert(memcmp(last, "last", 4) == 0);
	free(last);
	send_frame(a2, CM_T_RECV_REQ, 0, 1, 0, 3, 0, 0, NULL, 0);
	struct cm_header h;
	uint8_t *got;
	recv_frame(a2, &h, &got);
	ck_assert_int_eq(h.type, CM_T_DELIVER);
	ck_assert_uint_eq(h.len, 4);
	ck_assert(memcmp(got, "kept", 4) == 0);
	free(got);
	close(a2);
	close(b);
	stop_server_expect_clean();
}
END_TEST

/* Four ranks: 1 and 2 stop reading while 0 floods both and 3 (another
 * connection, likely another thread) keeps exchanging with 0. */
START_TEST(test_two_stalled_readers)
{
	enum { N = 12, LEN = 512 * 1024 };
	start_server();
	int fd[4];
	for (int r = 0; r < 4; r++) {
		fd[r] = dial();
		send_hello(fd[r], r, 4, 0, SECRET);
		expect_header_only(fd[r], CM_T_HELLO_ACK, 0);
	}
	uint8_t *data = malloc(LEN);
	for (uint32_t k = 0; k < LEN; k++)
		data[k] = (uint8_t)(k * 13 + 1);
	uint64_t clock = 0, req = 0, clock3 = 0;
	for (int i = 0; i < N; i++)
		for (int r = 1; r <= 2; r++) {
			send_frame(fd[r], CM_T_RECV_REQ, 0, 0, r, 1, 0, (uint64_t)i, NULL, 0);
			send_frame(fd[0], CM_T_MSG, 0, 0, r, 1, 0, clock++, data, LEN);
		}
	for (int i = 0; i < 30; i++) {
		good_roundtrip(fd[0], 0, &clock, &req, 1 + (uint32_t)i * 1000);
		send_frame(fd[3], CM_T_RECV_REQ, 0, 3, 3, 4, 0, (uint64_t)i, NULL, 0);
		send_frame(fd[3], CM_T_MSG, 0, 3, 3, 4, 0, clock3++, "x", 1);
		expect_header_only(fd[3], CM_T_DELIVER, (uint64_t)i);
	}
	for (int r = 1; r <= 2; r++)
		for (int i = 0; i < N; i++) {
			struct cm_header h;
			uint8_t *got;
			recv_frame(fd[r], &h, &got);
			ck_assert_int_eq(h.type, CM_T_DELIVER);
			ck_assert_uint_eq(h.clock, (uint64_t)i);
			ck_assert_uint_eq(h.len, LEN);
			ck_assert(memcmp(got, data, LEN) == 0);
			free(got);
		}
	free(data);
	for (int r = 0; r < 4; r++)
		close(fd[r]);
	stop_server_expect_clean();
}
END_TEST

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	Suite *s = suite_create("engines_live");
	const char *mode = getenv("CHANMEM_TEST_MODE");
	live_server_mode = mode && *mode ? mode : "mono";
	TCase *t = tcase_create("live");
	tcase_set_timeout(t, 120);
	live_add_common_tests(t);
	tcase_add_test(t, test_incarnation_replaces);
	tcase_add_test(t, test_two_stalled_readers);
	suite_add_tcase(s, t);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
