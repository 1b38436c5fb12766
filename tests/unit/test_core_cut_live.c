/* Cut-through forwarding in the real cmserver binary, in the mode named by
 * CHANMEM_TEST_MODE (integration/modes_cut.sh runs every mode): the
 * receiver gets the DELIVER header and the first bytes of a large message
 * while the sender still holds back the rest (a store-and-forward server
 * would send nothing); with --cut-through-min 0 it gets nothing until the
 * end; a sender whose connection ends mid-payload is resumed by its next
 * incarnation's re-send, and the receiver gets exactly the message, once.
 * Every wait is bounded; the server dies with the test process. */
#include "config.h"

#include "live_frame.h"
#include "live_server.h"

#include "net.h"

#include <check.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define BIG (768u * 1024 + 5) /* under the --max-message 1MiB of start_server */

static uint8_t *pattern(uint32_t len, unsigned seed)
{
	uint8_t *p = malloc(len);
	ck_assert_ptr_nonnull(p);
	for (uint32_t i = 0; i < len; i++)
		p[i] = (uint8_t)(i * 151 + seed + (i >> 9));
	return p;
}

/* Exactly len bytes within IO_MS (fails the test otherwise). */
static void get_all(int fd, void *buf, size_t len)
{
	ck_assert_msg(recv_exact(fd, buf, len, now_ms() + IO_MS) == 0,
	              "%zu bytes expected from cmserver: connection ended or timed out", len);
}

static void join(int fd, int rank, unsigned inc, uint64_t ack_clock)
{
	send_hello(fd, rank, 2, inc, SECRET);
	expect_header_only(fd, CM_T_HELLO_ACK, ack_clock);
}

static void expect_deliver_head(int fd, uint32_t len, uint64_t id)
{
	uint8_t hdr[CM_HEADER_SIZE];
	get_all(fd, hdr, sizeof hdr);
	struct cm_header h;
	struct cm_limits lim = {.world_size = 0, .max_payload = UINT32_MAX};
	ck_assert_int_eq(cm_header_decode(hdr, sizeof hdr, &lim, &h), CM_OK);
	ck_assert_int_eq(h.type, CM_T_DELIVER);
	ck_assert_uint_eq(h.len, len);
	ck_assert_uint_eq(h.clock, id);
}

static void start_with(const char *cut)
{
	char ready[128];
	char *extra[] = {
	    "--listen",  "127.0.0.1:0", "--max-message",          "1MiB", "--cut-through-min",
	    (char *)cut, "--mode",      (char *)live_server_mode, NULL};
	server_pid = spawn_server(SECRET, extra, ready, sizeof ready, NULL);
	ck_assert_msg(strchr(ready, '\n') != NULL, "no ready line from cmserver");
	*strchr(ready, '\n') = '\0';
	ready[strcspn(ready, " ")] = '\0'; /* TCP first, then " unix:@NAME" */
	ck_assert_int_eq(cm_parse_hostport(ready, 0, &server_addr), 0);
}

/* Rank 1 sends the header and a first part, then waits: rank 0 already
 * has them (cut-through), or nothing (--cut-through-min 0). */
static void first_part_then_rest(bool cut)
{
	int r0 = dial(), r1 = dial();
	join(r0, 0, 0, 0);
	join(r1, 1, 0, 0);
	uint8_t *data = pattern(BIG, 1), *got = malloc(BIG);
	ck_assert_ptr_nonnull(got);
	send_frame(r0, CM_T_RECV_REQ, 0, 1, 0, 9, 0, 0, NULL, 0);
	uint8_t hdr[CM_HEADER_SIZE];
	frame_header_encode(hdr, CM_T_MSG, 0, 1, 0, 9, 0, 0, BIG);
	send_all(r1, hdr, sizeof hdr);
	const uint32_t first = 200 * 1024;
	send_all(r1, data, first);
	if (cut) {
		expect_deliver_head(r0, BIG, 0);
		get_all(r0, got, first);
	} else {
		expect_quiet(r0, 300);
	}
	send_all(r1, data + first, BIG - first);
	if (cut) {
		get_all(r0, got + first, BIG - first);
	} else {
		expect_deliver_head(r0, BIG, 0);
		get_all(r0, got, BIG);
	}
	ck_assert(memcmp(got, data, BIG) == 0);
	/* And a small one behind it goes through as usual. */
	send_frame(r1, CM_T_MSG, 0, 1, 0, 9, 0, 1, "tail", 4);
	send_frame(r0, CM_T_RECV_REQ, 0, 1, 0, 9, 0, 1, NULL, 0);
	struct cm_header h;
	uint8_t *p;
	recv_frame(r0, &h, &p);
	ck_assert_int_eq(h.type, CM_T_DELIVER);
	ck_assert(h.len == 4 && memcmp(p, "tail", 4) == 0);
	free(p);
	free(data);
	free(got);
	close(r0);
	close(r1);
}

START_TEST(test_cut_through_forwards_as_it_arrives)
{
	start_with("64KiB");
	first_part_then_rest(true);
	stop_server_expect_clean();
}
END_TEST

START_TEST(test_cut_through_off_stores_first)
{
	start_with("0");
	first_part_then_rest(false);
	stop_server_expect_clean();
}
END_TEST

/* Rank 1's connection ends 300 KiB into the payload; rank 0 has the header
 * and those bytes and waits. Rank 1's next incarnation is told the message
 * is not all there (HELLO_ACK clock), re-sends it whole, and rank 0 gets
 * exactly the rest. */
START_TEST(test_cut_through_resumed_after_sender_death)
{
	start_with("64KiB");
	int r0 = dial(), r1 = dial();
	join(r0, 0, 0, 0);
	join(r1, 1, 0, 0);
	uint8_t *data = pattern(BIG, 2), *got = malloc(BIG);
	ck_assert_ptr_nonnull(got);
	send_frame(r1, CM_T_MSG, 0, 1, 0, 3, 0, 0, "first", 5);
	send_frame(r0, CM_T_RECV_REQ, 0, 1, 0, 3, 0, 0, NULL, 0);
	send_frame(r0, CM_T_RECV_REQ, 0, 1, 0, 4, 0, 1, NULL, 0);
	struct cm_header h;
	uint8_t *p;
	recv_frame(r0, &h, &p);
	ck_assert(h.type == CM_T_DELIVER && h.len == 5);
	free(p);
	uint8_t hdr[CM_HEADER_SIZE];
	frame_header_encode(hdr, CM_T_MSG, 0, 1, 0, 4, 0, 1, BIG);
	send_all(r1, hdr, sizeof hdr);
	const uint32_t part = 300 * 1024;
	send_all(r1, data, part);
	expect_deliver_head(r0, BIG, 1);
	get_all(r0, got, part);
	close(r1); /* rank 1 dies mid-payload */

	int r1b = dial();
	join(r1b, 1, 1, 1);                                      /* message 1 is not all there */
	send_frame(r1b, CM_T_MSG, 0, 1, 0, 3, 0, 0, "first", 5); /* dropped */
	send_frame(r1b, CM_T_MSG, 0, 1, 0, 4, 0, 1, data, BIG);
	get_all(r0, got + part, BIG - part);
	ck_assert(memcmp(got, data, BIG) == 0);
	send_frame(r1b, CM_T_MSG, 0, 1, 0, 5, 0, 2, "next", 4);
	send_frame(r0, CM_T_RECV_REQ, 0, 1, 0, 5, 0, 2, NULL, 0);
	recv_frame(r0, &h, &p);
	ck_assert(h.type == CM_T_DELIVER && h.len == 4 && memcmp(p, "next", 4) == 0);
	free(p);
	free(data);
	free(got);
	close(r0);
	close(r1b);
	stop_server_expect_clean();
}
END_TEST

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	Suite *s = suite_create("cut_live");
	const char *mode = getenv("CHANMEM_TEST_MODE");
	live_server_mode = mode && *mode ? mode : "mono";
	TCase *t = tcase_create("live");
	tcase_set_timeout(t, 120);
	tcase_add_checked_fixture(t, NULL, teardown);
	tcase_add_test(t, test_cut_through_forwards_as_it_arrives);
	tcase_add_test(t, test_cut_through_off_stores_first);
	tcase_add_test(t, test_cut_through_resumed_after_sender_death);
	suite_add_tcase(s, t);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
