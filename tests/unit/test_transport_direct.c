/* The direct transport through its API: forked rank processes on
 * 127.0.0.1, listening sockets created up front as cmrun does. */
#include <config.h>

#include <check.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn.h"
#include "jobenv.h"
#include "net.h"
#include "protocol.h"
#include "test_transport_harness.h"

#define JOB_TIMEOUT_S 90

static int run(int n, rank_fn fn)
{
	struct tjob job = {.n = n, .transport = "direct"};
	return tjob_run(&job, fn, JOB_TIMEOUT_S);
}

START_TEST(sizes_0_to_8mib)
{
	ck_assert_int_eq(run(2, scenario_sizes), 0);
}
END_TEST

START_TEST(unexpected_messages)
{
	ck_assert_int_eq(run(2, scenario_unexpected), 0);
}
END_TEST

START_TEST(wildcards)
{
	ck_assert_int_eq(run(4, scenario_wildcards), 0);
}
END_TEST

START_TEST(order_10000)
{
	ck_assert_int_eq(run(3, scenario_order), 0);
}
END_TEST

START_TEST(sync_sends)
{
	ck_assert_int_eq(run(2, scenario_sync), 0);
}
END_TEST

START_TEST(probe)
{
	ck_assert_int_eq(run(2, scenario_probe), 0);
}
END_TEST

START_TEST(truncation)
{
	ck_assert_int_eq(run(2, scenario_truncate), 0);
}
END_TEST

START_TEST(self_messages)
{
	ck_assert_int_eq(run(2, scenario_self), 0);
}
END_TEST

START_TEST(alltoall_8)
{
	ck_assert_int_eq(run(8, scenario_alltoall), 0);
}
END_TEST

/* No CHANMEM_RANK: a singleton talks to itself, no sockets. */
START_TEST(singleton)
{
	unsetenv(CM_ENV_RANK);
	struct cm_job job;
	char name[16];
	struct cm_transport t;
	ck_assert_int_eq(cm_job_from_env(&job, name, sizeof name), 0);
	ck_assert_str_eq(name, "direct");
	cm_transport_direct(&t);
	ck_assert_int_eq(t.init(&t, &job), 0);
	ck_assert_int_eq(scenario_self(&t, 0, 1), 0);
	struct cm_probe_result pr;
	ck_assert_int_eq(t.probe(&t, CM_ANY_SOURCE, CM_ANY_TAG, 0, 0, &pr), 0);
	ck_assert_int_eq(pr.found, 0);
	struct cm_req bad = {.kind = CM_REQ_SEND, .peer = 1, .tag = 0};
	ck_assert_int_eq(t.isend(&t, &bad), -1);
	ck_assert_int_eq(t.finalize(&t), 0);
	cm_job_free(&job);
}
END_TEST

/* Sends one raw frame (header + payload) to addr and returns the type and
 * code of the answer: the ERROR code, or 0 for HELLO_ACK; -1 if none. */
static int raw_answer(const struct sockaddr_in *addr, const struct cm_header *h,
                      const void *payload, int *type)
{
	int fd = cm_tcp_connect(addr, 5000);
	if (fd < 0)
		return -1;
	uint8_t hdr[CM_HEADER_SIZE];
	cm_header_encode(h, hdr);
	if (cm_write_full(fd, hdr, sizeof hdr) < 0 ||
	    (h->len && cm_write_full(fd, payload, h->len) < 0)) {
		close(fd);
		return -1;
	}
	struct pollfd p = {.fd = fd, .events = POLLIN};
	int code = -1;
	struct cm_limits lim = {.world_size = 0, .max_payload = 4096};
	struct cm_header ans;
	if (poll(&p, 1, 10000) == 1 && cm_read_full(fd, hdr, sizeof hdr) == 0 &&
	    cm_header_decode(hdr, sizeof hdr, &lim, &ans) == CM_OK) {
		*type = ans.type;
		code = ans.type == CM_T_ERROR ? ans.tag : 0;
	}
	close(fd);
	return code;
}

static int hello_with(const struct sockaddr_in *addr, const char *secret, unsigned world,
                      unsigned kind, int src, int dst)
{
	struct cm_hello hello = {.world_size = world, .kind = kind};
	memcpy(hello.secret, secret, CM_SECRET_LEN);
	uint8_t payload[CM_HELLO_PAYLOAD];
	cm_hello_encode(&hello, payload);
	struct cm_header h = {.type = CM_T_HELLO, .src = src, .dst = dst, .len = CM_HELLO_PAYLOAD};
	int type = 0;
	return raw_answer(addr, &h, payload, &type);
}

/* Rank 1 plays intruder against rank 0's listening socket before talking
 * to it normally: every bad HELLO is refused with the right code, and
 * rank 0 keeps working. */
static int scenario_intruder(struct cm_transport *t, int rank, int size)
{
	char buf[16];
	struct cm_req st;
	if (rank == 0) {
		if (t_recv(t, 1, 5, 0, buf, sizeof buf, &st) < 0 || st.st_bytes != 2)
			FAILF("message after the intruders");
		return 0;
	}
	char peers[256];
	snprintf(peers, sizeof peers, "%s", getenv(CM_ENV_PEERS));
	*strchr(peers, ',') = '\0';
	struct sockaddr_in addr;
	if (cm_parse_hostport(peers, -1, &addr) < 0)
		FAILF("address of rank 0");
	const char *wrong = "ffffffffffffffffffffffffffffffff";
	int code;
	if ((code = hello_with(&addr, wrong, 2, CM_PEER_DIRECT, 1, 0)) != CM_E_AUTH)
		FAILF("wrong secret answered %d", code);
	if ((code = hello_with(&addr, TEST_SECRET, 3, CM_PEER_DIRECT, 1, 0)) != CM_E_SIZE)
		FAILF("wrong world size answered %d", code);
	if ((code = hello_with(&addr, TEST_SECRET, 2, CM_PEER_RANK, 1, 0)) != CM_E_FIELD)
		FAILF("wrong kind answered %d", code);
	if ((code = hello_with(&addr, TEST_SECRET, 2, CM_PEER_DIRECT, 0, 0)) != CM_E_RANK)
		FAILF("HELLO from itself answered %d", code);
	struct cm_header msg = {.type = CM_T_MSG, .src = 1, .dst = 0, .tag = 5, .len = 2};
	int type = 0;
	if ((code = raw_answer(&addr, &msg, "hi", &type)) != CM_E_AUTH)
		FAILF("MSG before HELLO answered %d", code);
	struct cm_header junk = {.type = 77};
	if ((code = raw_answer(&addr, &junk, NULL, &type)) != CM_E_TYPE)
		FAILF("unknown frame type answered %d", code);
	if (t_send(t, 0, 5, 0, "ok", 2, 0) < 0)
		FAILF("send after the intruders");
	return 0;
}

START_TEST(intruders_refused)
{
	ck_assert_int_eq(run(2, scenario_intruder), 0);
}
END_TEST

/* Writes len bytes in small pieces with pauses, so the receiver sees
 * headers and payloads split across many reads. */
static int trickle(int fd, const void *buf, size_t len, size_t piece)
{
	const uint8_t *p = buf;
	for (size_t off = 0; off < len; off += piece) {
		size_t n = len - off < piece ? len - off : piece;
		if (cm_write_full(fd, p + off, n) < 0)
			return -1;
		if ((off / piece) % 8 == 0)
			poll(NULL, 0, 1);
	}
	return 0;
}

static int send_frame(int fd, struct cm_header *h, const void *payload, size_t piece)
{
	uint8_t hdr[CM_HEADER_SIZE];
	cm_header_encode(h, hdr);
	if (trickle(fd, hdr, sizeof hdr, piece) < 0)
		return -1;
	return h->len ? trickle(fd, payload, h->len, piece) : 0;
}

static int read_frame(int fd, struct cm_header *h, void *payload, size_t cap)
{
	uint8_t hdr[CM_HEADER_SIZE];
	struct cm_limits lim = {.world_size = 2, .max_payload = 1u << 20};
	struct pollfd p = {.fd = fd, .events = POLLIN};
	if (poll(&p, 1, 20000) != 1 || cm_read_full(fd, hdr, sizeof hdr) < 0 ||
	    cm_header_decode(hdr, sizeof hdr, &lim, h) != CM_OK || h->len > cap)
		return -1;
	return h->len ? cm_read_full(fd, payload, h->len) : 0;
}

/* Rank 1 speaks the direct protocol by hand, a few bytes per write:
 * rank 0 must reassemble every frame, adopt the connection for its own
 * messages back (HELLO_ACK clock 0) and send its SYNC_ACK on it. */
static int scenario_trickle(struct cm_transport *t, int rank, int size)
{
	static uint8_t buf[100000];
	struct cm_req st;
	if (rank == 0) {
		static const size_t lens[] = {0, 10, 100000, 5};
		for (int i = 0; i < 4; i++) {
			if (t_recv(t, 1, i, 0, buf, sizeof buf, &st) < 0 ||
			    st.st_bytes != lens[i] ||
			    check_pattern(buf, lens[i], (uint32_t)i) != (size_t)-1)
				FAILF("trickled message %d", i);
		}
		fill_pattern(buf, 3000, 99);
		if (t_send(t, 1, 42, 0, buf, 3000, 1) < 0)
			FAILF("synchronous send back on the adopted connection");
		return 0;
	}
	char peers[256];
	snprintf(peers, sizeof peers, "%s", getenv(CM_ENV_PEERS));
	*strchr(peers, ',') = '\0';
	struct sockaddr_in addr;
	int fd;
	if (cm_parse_hostport(peers, -1, &addr) < 0 || (fd = cm_tcp_connect(&addr, 5000)) < 0)
		FAILF("connect to rank 0");
	struct cm_hello hello = {.world_size = 2, .kind = CM_PEER_DIRECT};
	memcpy(hello.secret, TEST_SECRET, CM_SECRET_LEN);
	uint8_t payload[CM_HELLO_PAYLOAD];
	cm_hello_encode(&hello, payload);
	struct cm_header h = {.type = CM_T_HELLO, .src = 1, .dst = 0, .len = CM_HELLO_PAYLOAD};
	struct cm_header ans;
	if (send_frame(fd, &h, payload, 3) < 0 || read_frame(fd, &ans, buf, sizeof buf) < 0 ||
	    ans.type != CM_T_HELLO_ACK || ans.dst != 1 || ans.clock != 0)
		FAILF("handshake: answer type %d clock %llu", ans.type,
		      (unsigned long long)ans.clock);
	static const size_t lens[] = {0, 10, 100000, 5};
	static const size_t pieces[] = {1, 3, 4093, 1};
	for (int i = 0; i < 4; i++) {
		fill_pattern(buf, lens[i], (uint32_t)i);
		struct cm_header m = {.type = CM_T_MSG,
		                      .src = 1,
		                      .dst = 0,
		                      .tag = i,
		                      .clock = (uint64_t)i,
		                      .len = (uint32_t)lens[i]};
		if (send_frame(fd, &m, buf, pieces[i]) < 0)
			FAILF("trickle message %d", i);
	}
	if (read_frame(fd, &ans, buf, sizeof buf) < 0 || ans.type != CM_T_MSG ||
	    !(ans.flags & CM_F_SYNC) || ans.src != 0 || ans.tag != 42 || ans.len != 3000 ||
	    check_pattern(buf, 3000, 99) != (size_t)-1)
		FAILF("synchronous message from rank 0");
	struct cm_header ack = {.type = CM_T_SYNC_ACK,
	                        .src = 1,
	                        .dst = 0,
	                        .tag = ans.tag,
	                        .ctx = ans.ctx,
	                        .clock = ans.clock};
	if (send_frame(fd, &ack, NULL, 5) < 0)
		FAILF("SYNC_ACK");
	/* Rank 0's finalize ends its side; we see the end of the stream. */
	if (read_frame(fd, &ans, buf, sizeof buf) == 0)
		FAILF("unexpected frame type %d after the exchange", ans.type);
	close(fd);
	return 0;
}

START_TEST(partial_frames_and_adopted_connection)
{
	ck_assert_int_eq(run(2, scenario_trickle), 0);
}
END_TEST

/* Rank 0 sends small messages (copied when the socket is full) to rank 1
 * until its queue passes CM_QUEUE_MAX, so its sends wait in the transport
 * for room, polling before they sleep; rank 1 takes them in as fast as it
 * can, with pauses that let the queue fill again, and sends nothing until
 * it has them all. A long spin (CHANMEM_DIRECT_SPIN_US, set by the test)
 * makes it likely that the whole queue reaches the kernel while rank 0
 * polls: its send must then go on, not sleep waiting for rank 1, which
 * waits for that send. Rank 2 only gives rank 0 a second connection to
 * wait on (with one, rank 0 would sleep in a bounded read on it instead
 * of an unbounded epoll_wait, and go on anyway) and keeps it open to the
 * end. A rank 0 asleep there stays so until rank 2's wait gives up
 * (t_wait's bound): the job fails. */
#define QUEUE_MSG_LEN 4096
#define QUEUE_MSGS (4 * (int)(CM_QUEUE_MAX / QUEUE_MSG_LEN))
#define QUEUE_PAUSE_EVERY (QUEUE_MSGS / 8)
#define QUEUE_PAUSE_MS 30

static int scenario_queue_drained_while_spinning(struct cm_transport *t, int rank, int size)
{
	(void)size;
	static uint8_t buf[QUEUE_MSG_LEN];
	struct cm_req st;
	if (rank == 2) {
		if (t_send(t, 0, 3, 0, "a", 1, 0) < 0 || t_recv(t, 0, 4, 0, buf, 1, &st) < 0)
			FAILF("exchange with rank 0");
		return 0;
	}
	if (rank == 0) {
		if (t_recv(t, 2, 3, 0, buf, 1, &st) < 0)
			FAILF("rank 2's message");
		for (int i = 0; i < QUEUE_MSGS; i++) {
			fill_pattern(buf, sizeof buf, (uint32_t)i);
			if (t_send(t, 1, 1, 0, buf, sizeof buf, 0) < 0)
				FAILF("send %d", i);
		}
		if (t_recv(t, 1, 2, 0, buf, 1, &st) < 0 || t_send(t, 2, 4, 0, "c", 1, 0) < 0)
			FAILF("the end");
		return 0;
	}
	for (int i = 0; i < QUEUE_MSGS; i++) {
		if (i % QUEUE_PAUSE_EVERY == 0)
			poll(NULL, 0, QUEUE_PAUSE_MS);
		if (t_recv(t, 0, 1, 0, buf, sizeof buf, &st) < 0 || st.st_bytes != sizeof buf ||
		    check_pattern(buf, sizeof buf, (uint32_t)i) != (size_t)-1)
			FAILF("message %d of %d", i, QUEUE_MSGS);
	}
	if (t_send(t, 0, 2, 0, "b", 1, 0) < 0)
		FAILF("answer");
	return 0;
}

START_TEST(queue_drained_while_spinning)
{
	setenv("CHANMEM_DIRECT_SPIN_US", "100000", 1);
	int rc = run(3, scenario_queue_drained_while_spinning);
	unsetenv("CHANMEM_DIRECT_SPIN_US");
	ck_assert_int_eq(rc, 0);
}
END_TEST

static Suite *direct_suite(void)
{
	Suite *s = suite_create("transport_direct");
	TCase *tc = tcase_create("direct");
	tcase_set_timeout(tc, JOB_TIMEOUT_S + 30);
	tcase_add_test(tc, sizes_0_to_8mib);
	tcase_add_test(tc, unexpected_messages);
	tcase_add_test(tc, wildcards);
	tcase_add_test(tc, order_10000);
	tcase_add_test(tc, sync_sends);
	tcase_add_test(tc, probe);
	tcase_add_test(tc, truncation);
	tcase_add_test(tc, self_messages);
	tcase_add_test(tc, alltoall_8);
	tcase_add_test(tc, singleton);
	tcase_add_test(tc, intruders_refused);
	tcase_add_test(tc, partial_frames_and_adopted_connection);
	tcase_add_test(tc, queue_drained_while_spinning);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(direct_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
