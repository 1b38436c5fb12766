/* Attacks on the real cmserver binary ($CMSERVER) on 127.0.0.1, each one
 * that used to take the server down or make it allocate without bound:
 *
 *  - at the descriptor limit (RLIMIT_NOFILE 64) with idle connections that
 *    never authenticate, in every mode: the server keeps running (no libev
 *    abort in thread-per-client), does not flood its log, drops idle
 *    unauthenticated connections, and a real rank still connects;
 *  - PROBE request ids stepped by 2^20: the delivery record stays small;
 *  - a first HELLO with a huge world size: refused, real ranks connect;
 *  - a rank that asks for its events again and again (EVENT_ACK with
 *    REPLAY) and never reads: its output queue stays bounded.
 *
 * Memory is checked through the growth of the server's VmRSS, far below
 * what the attack cost before; every wait is bounded; the server is killed by pid in
 * teardown and dies with the test process in any case. */
#include "config.h"

#include "live_server.h"

#include "net.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#define IDLE_CONNS 80
#define FD_LIMIT 64
/* What an attack may add to the server's resident set: far below what
 * each cost before (gigabytes), with room for a sanitizer's quarantine. */
#define RSS_GROWTH_MAX_KIB (256 * 1024)

static int err_fd = -1;

/* cmserver with extra args (NULL-terminated), its stderr into err_path,
 * under RLIMIT_NOFILE limit (0: unchanged). Sets server_pid/server_addr. */
static void start(char *const extra[], rlim_t limit)
{
	char err_path[] = "/tmp/cm-harden-err.XXXXXX";
	err_fd = mkstemp(err_path);
	ck_assert_int_ge(err_fd, 0);
	unlink(err_path);
	int saved_err = dup(2);
	dup2(err_fd, 2);
	struct rlimit old, lim;
	getrlimit(RLIMIT_NOFILE, &old);
	if (limit) {
		lim = old;
		lim.rlim_cur = limit;
		setrlimit(RLIMIT_NOFILE, &lim);
	}
	char ready[128];
	server_pid = spawn_server(SECRET, extra, ready, sizeof ready, NULL);
	setrlimit(RLIMIT_NOFILE, &old);
	dup2(saved_err, 2);
	close(saved_err);
	ck_assert_msg(strchr(ready, '\n') != NULL, "no ready line from cmserver");
	ready[strcspn(ready, " \n")] = '\0';
	ck_assert_int_eq(cm_parse_hostport(ready, 0, &server_addr), 0);
}

static size_t stderr_lines(void)
{
	char buf[4096];
	size_t lines = 0;
	ssize_t n;
	off_t at = 0;
	while ((n = pread(err_fd, buf, sizeof buf, at)) > 0) {
		for (ssize_t i = 0; i < n; i++)
			lines += buf[i] == '\n';
		at += n;
	}
	return lines;
}

static long server_rss_kib(void)
{
	char path[64], line[256];
	snprintf(path, sizeof path, "/proc/%d/status", (int)server_pid);
	FILE *f = fopen(path, "r");
	ck_assert_msg(f != NULL, "cmserver is gone");
	long kib = -1;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

/* The server closes fd (EOF or reset) within ms. */
static bool closed_within(int fd, int ms)
{
	long long deadline = now_ms() + ms;
	char buf[512];
	while (now_ms() < deadline) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, 100) <= 0)
			continue;
		ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			return true;
	}
	return false;
}

static void limit_case(const char *mode)
{
	char *extra[] = {"--listen", "127.0.0.1:0", "--mode", (char *)mode, NULL, NULL, NULL};
	if (strcmp(mode, "multiplexer") == 0 || strcmp(mode, "specialized") == 0) {
		extra[4] = "--threads";
		extra[5] = "2";
	}
	start(extra, FD_LIMIT);
	int idle[IDLE_CONNS];
	for (int i = 0; i < IDLE_CONNS; i++)
		idle[i] = dial(); /* past the limit they wait in the backlog */
	/* Half go away, as in a scan: the server must not abort on the way. */
	for (int i = 0; i < IDLE_CONNS / 2; i++)
		close(idle[i]);
	sleep(1);

	/* A real rank still gets in, and is served. */
	int fd = -1;
	long long deadline = now_ms() + 3 * IO_MS;
	for (;;) {
		fd = dial();
		send_hello(fd, 0, 1, 0, SECRET);
		struct cm_header h;
		struct cm_limits lim = {.world_size = 1, .max_payload = MAX_MESSAGE};
		uint8_t hb[CM_HEADER_SIZE];
		if (recv_exact(fd, hb, sizeof hb, now_ms() + IO_MS) == 0 &&
		    cm_header_decode(hb, sizeof hb, &lim, &h) == CM_OK && h.type == CM_T_HELLO_ACK)
			break;
		close(fd);
		ck_assert_msg(now_ms() < deadline, "%s: a real rank cannot connect", mode);
	}
	uint64_t clock = 0, req = 0;
	good_roundtrip(fd, 0, &clock, &req, 100);
	/* The idle ones without the secret are dropped. */
	for (int i = IDLE_CONNS / 2; i < IDLE_CONNS; i++)
		ck_assert_msg(closed_within(idle[i], 2 * IO_MS),
		              "%s: idle unauthenticated connection %d never dropped", mode, i);
	for (int i = IDLE_CONNS / 2; i < IDLE_CONNS; i++)
		close(idle[i]);
	good_roundtrip(fd, 0, &clock, &req, 100);
	size_t lines = stderr_lines();
	ck_assert_msg(lines < 20, "%s: %zu lines of log at the descriptor limit", mode, lines);
	close(fd);
	stop_server_expect_clean();
	close(err_fd);
}

START_TEST(test_limit_mono)
{
	limit_case("mono");
}
END_TEST

START_TEST(test_limit_thread_per_client)
{
	limit_case("thread-per-client");
}
END_TEST

START_TEST(test_limit_multiplexer)
{
	limit_case("multiplexer");
}
END_TEST

START_TEST(test_limit_specialized)
{
	limit_case("specialized");
}
END_TEST

/* mono, or the mode CHANMEM_TEST_MODE names (the core's bounds hold in
 * every engine; modes_live.sh-style loops can run them all). */
static void start_plain(const char *world)
{
	char *extra[] = {"--listen", "127.0.0.1:0", NULL, NULL, NULL, NULL, NULL};
	int n = 2;
	if (world) {
		extra[n++] = "--world-size";
		extra[n++] = (char *)world;
	}
	const char *mode = getenv("CHANMEM_TEST_MODE");
	if (mode && *mode) {
		extra[n++] = "--mode";
		extra[n++] = (char *)mode;
	}
	start(extra, 0);
}

/* Non-blocking PROBEs whose ids step by 2^20: each got a record slot
 * before, ~1.5 GiB for 60 of them. */
START_TEST(test_probe_id_steps)
{
	start_plain(NULL);
	int fd = dial();
	send_hello(fd, 0, 1, 0, SECRET);
	expect_header_only(fd, CM_T_HELLO_ACK, 0);
	long base = server_rss_kib();
	for (uint64_t i = 0; i < 200; i++) {
		send_frame(fd, CM_T_PROBE, 0, CM_ANY_SOURCE, 0, CM_ANY_TAG, 0, i << 20, NULL, 0);
		struct cm_header h;
		uint8_t *p;
		recv_frame(fd, &h, &p);
		free(p);
		ck_assert_int_eq(h.type, CM_T_PROBE_REPLY);
	}
	long grew = server_rss_kib() - base;
	ck_assert_msg(grew < RSS_GROWTH_MAX_KIB, "cmserver grew by %ld KiB for 200 probes", grew);
	close(fd);
	stop_server_expect_clean();
	close(err_fd);
}
END_TEST

/* The first HELLO used to size the job: 2,000,000 cost 1.3 GB and locked
 * every real rank out. */
START_TEST(test_world_size)
{
	start_plain(NULL);
	int fd = dial();
	send_hello(fd, 0, 2000000, 0, SECRET);
	expect_refused(fd, CM_E_SIZE);
	close(fd);
	fd = dial();
	send_hello(fd, 0, 2, 0, SECRET);
	expect_header_only(fd, CM_T_HELLO_ACK, 0);
	close(fd);
	stop_server_expect_clean();
	close(err_fd);

	start_plain("2");
	fd = dial();
	send_hello(fd, 0, 3, 0, SECRET);
	expect_refused(fd, CM_E_SIZE);
	close(fd);
	fd = dial();
	send_hello(fd, 1, 2, 0, SECRET);
	expect_header_only(fd, CM_T_HELLO_ACK, 0);
	close(fd);
	stop_server_expect_clean();
	close(err_fd);
}
END_TEST

/* EVENT_ACK with REPLAY sends every logged event back; a rank that never
 * reads held 638 MiB of queue with 32 KB of input. */
START_TEST(test_replay_never_read)
{
	enum { EVENTS = 4000, ASKS = 4000 };
	start_plain(NULL);
	int fd = dial();
	int small = 4096;
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
	send_hello(fd, 0, 1, 0, SECRET);
	expect_header_only(fd, CM_T_HELLO_ACK, 0);
	long base = server_rss_kib();
	uint8_t value[8] = {0};
	for (uint64_t i = 0; i < EVENTS; i++)
		send_frame(fd, CM_T_EVENT, 0, 0, 0, 1, 0, i, value, sizeof value);
	uint8_t ask[CM_HEADER_SIZE];
	struct cm_header h = {.version = CM_PROTO_VERSION,
	                      .type = CM_T_EVENT_ACK,
	                      .flags = CM_F_REPLAY,
	                      .src = 0,
	                      .dst = 0};
	cm_header_encode(&h, ask);
	/* As many as the server takes in; it stops reading us at its bound. */
	int sent = 0;
	long long deadline = now_ms() + IO_MS;
	while (sent < ASKS && now_ms() < deadline) {
		struct pollfd p = {.fd = fd, .events = POLLOUT};
		if (poll(&p, 1, 500) <= 0)
			break; /* the server holds our input */
		size_t off = 0;
		while (off < sizeof ask) {
			ssize_t w =
			    send(fd, ask + off, sizeof ask - off, MSG_NOSIGNAL | MSG_DONTWAIT);
			if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
				poll(&p, 1, 100);
				continue;
			}
			ck_assert_msg(w > 0, "send: %s", strerror(errno));
			off += (size_t)w;
		}
		sent++;
	}
	sleep(1);
	long grew = server_rss_kib() - base;
	ck_assert_msg(grew < RSS_GROWTH_MAX_KIB, "cmserver grew by %ld KiB for %d replays unread",
	              grew, sent);
	close(fd);
	/* Still serving. */
	fd = dial();
	send_hello(fd, 0, 1, 1, SECRET);
	expect_header_only(fd, CM_T_HELLO_ACK, 0);
	close(fd);
	stop_server_expect_clean();
	close(err_fd);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("harden_live");
	TCase *t = tcase_create("limits");
	tcase_set_timeout(t, 120);
	tcase_add_checked_fixture(t, NULL, teardown);
	tcase_add_test(t, test_limit_mono);
	tcase_add_test(t, test_limit_thread_per_client);
	tcase_add_test(t, test_limit_multiplexer);
	tcase_add_test(t, test_limit_specialized);
	suite_add_tcase(s, t);
	t = tcase_create("bounds");
	tcase_set_timeout(t, 120);
	tcase_add_checked_fixture(t, NULL, teardown);
	tcase_add_test(t, test_probe_id_steps);
	tcase_add_test(t, test_world_size);
	tcase_add_test(t, test_replay_never_read);
	suite_add_tcase(s, t);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
