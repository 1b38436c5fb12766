/* Helpers and checks shared by the live tests of the real cmserver binary
 * ($CMSERVER) on 127.0.0.1: test_server_live (default mode, plus the command
 * line) and test_engines_live (the mode named by CHANMEM_TEST_MODE). Every
 * wait is bounded; the server dies with the test process in any case. */
#include "config.h"

#include "live_frame.h"
#include "live_server.h"

#include "net.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

pid_t server_pid = -1;
struct sockaddr_in server_addr;
const char *live_server_mode;
static int server_stdout = -1;

const char *cmserver_path(void)
{
	const char *p = getenv("CMSERVER");
	return p && *p ? p : "../cmserver/cmserver";
}

long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Starts cmserver with extra arguments (NULL-terminated list), env secret
 * if secret != NULL. Returns the child pid; *ready_out gets what it wrote
 * on --ready-fd (or "" if it exited first). */
pid_t spawn_server(const char *secret, char *const extra[], char *ready_out, size_t cap,
                   int *stdout_fd)
{
	int ready[2], out[2];
	ck_assert_int_eq(pipe(ready), 0);
	ck_assert_int_eq(pipe(out), 0);
	pid_t parent = getpid();
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		/* Dies with the test process, whatever happens to it. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		close(ready[0]);
		close(out[0]);
		dup2(out[1], 1);
		close(out[1]);
		if (ready[1] != 3) {
			dup2(ready[1], 3);
			close(ready[1]);
		}
		if (secret)
			setenv("CHANMEM_SECRET", secret, 1);
		else
			unsetenv("CHANMEM_SECRET");
		char *argv[32];
		int n = 0;
		argv[n++] = (char *)cmserver_path();
		argv[n++] = "--ready-fd";
		argv[n++] = "3";
		for (int i = 0; extra && extra[i] && n < 30; i++)
			argv[n++] = extra[i];
		argv[n] = NULL;
		execv(argv[0], argv);
		fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(ready[1]);
	close(out[1]);
	size_t got = 0;
	long long deadline = now_ms() + IO_MS;
	ready_out[0] = '\0';
	while (got + 1 < cap && now_ms() < deadline) {
		struct pollfd p = {.fd = ready[0], .events = POLLIN};
		if (poll(&p, 1, 100) <= 0)
			continue;
		ssize_t r = read(ready[0], ready_out + got, cap - 1 - got);
		if (r <= 0)
			break;
		got += (size_t)r;
		ready_out[got] = '\0';
	}
	close(ready[0]);
	if (stdout_fd)
		*stdout_fd = out[0];
	else
		close(out[0]);
	return pid;
}

/* Waits up to ms for pid; returns its wait status, or -1 on timeout. */
int wait_exit(pid_t pid, int ms)
{
	long long deadline = now_ms() + ms;
	for (;;) {
		int st;
		pid_t r = waitpid(pid, &st, WNOHANG);
		if (r == pid)
			return st;
		if (now_ms() >= deadline)
			return -1;
		poll(NULL, 0, 20);
	}
}

void start_server(void)
{
	char ready[128];
	char *extra[] = {"--listen", "127.0.0.1:0", "--max-message", "1MiB", NULL, NULL, NULL};
	if (live_server_mode) {
		extra[4] = "--mode";
		extra[5] = (char *)live_server_mode;
	}
	server_pid = spawn_server(SECRET, extra, ready, sizeof ready, &server_stdout);
	ck_assert_msg(strchr(ready, '\n') != NULL, "no ready line from cmserver");
	*strchr(ready, '\n') = '\0';
	/* stdout says the same: TCP address, then the abstract unix socket. */
	char want[160];
	snprintf(want, sizeof want, "cmserver: listening on %s\n", ready);
	ck_assert_msg(strstr(ready, " unix:@") != NULL, "no unix address in '%s'", ready);
	ready[strcspn(ready, " ")] = '\0';
	ck_assert_int_eq(cm_parse_hostport(ready, 0, &server_addr), 0);
	ck_assert(strncmp(ready, "127.0.0.1:", 10) == 0);

	char line[160] = "";
	size_t got = 0;
	long long deadline = now_ms() + IO_MS;
	while (!memchr(line, '\n', got) && got + 1 < sizeof line && now_ms() < deadline) {
		struct pollfd p = {.fd = server_stdout, .events = POLLIN};
		if (poll(&p, 1, 100) <= 0)
			continue;
		ssize_t r = read(server_stdout, line + got, sizeof line - 1 - got);
		if (r <= 0)
			break;
		got += (size_t)r;
		line[got] = '\0';
	}
	ck_assert_str_eq(line, want);
}

/* SIGTERM, then a bounded wait: exit status 0 expected. */
void stop_server_expect_clean(void)
{
	ck_assert_int_eq(kill(server_pid, 0), 0); /* still alive */
	ck_assert_int_eq(kill(server_pid, SIGTERM), 0);
	int st = wait_exit(server_pid, IO_MS);
	if (st == -1) {
		kill(server_pid, SIGKILL);
		waitpid(server_pid, NULL, 0);
	}
	server_pid = -1;
	ck_assert_msg(st != -1, "cmserver did not exit after SIGTERM");
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "cmserver exit status 0x%x", st);
}

void teardown(void)
{
	if (server_pid > 0) {
		kill(server_pid, SIGKILL);
		waitpid(server_pid, NULL, 0);
		server_pid = -1;
	}
	if (server_stdout >= 0)
		close(server_stdout);
	server_stdout = -1;
}

/* ---------------- client side ---------------- */

int dial(void)
{
	int fd = cm_tcp_connect(&server_addr, IO_MS);
	ck_assert_msg(fd >= 0, "connect: %s", strerror(errno));
	return fd;
}

void send_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	long long deadline = now_ms() + IO_MS;
	while (len > 0) {
		struct pollfd pf = {.fd = fd, .events = POLLOUT};
		ck_assert_msg(now_ms() < deadline, "send timed out");
		if (poll(&pf, 1, 100) <= 0)
			continue;
		ssize_t w = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		ck_assert_msg(w > 0, "send: %s", strerror(errno));
		p += w;
		len -= (size_t)w;
	}
}

/* Reads exactly len bytes within the deadline: 0, or -1 on EOF/error/timeout. */
int recv_exact(int fd, void *buf, size_t len, long long deadline)
{
	uint8_t *p = buf;
	while (len > 0) {
		if (now_ms() >= deadline)
			return -1;
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		if (poll(&pf, 1, 100) <= 0)
			continue;
		ssize_t r = recv(fd, p, len, MSG_DONTWAIT);
		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (r <= 0)
			return -1;
		p += r;
		len -= (size_t)r;
	}
	return 0;
}

void send_frame(int fd, uint8_t type, uint16_t flags, int32_t src, int32_t dst, int32_t tag,
                uint32_t ctx, uint64_t clock, const void *payload, uint32_t len)
{
	uint8_t hdr[CM_HEADER_SIZE];
	frame_header_encode(hdr, type, flags, src, dst, tag, ctx, clock, len);
	send_all(fd, hdr, sizeof hdr);
	if (len)
		send_all(fd, payload, len);
}

void send_hello_flags(int fd, uint16_t flags, int rank, int world, unsigned inc, const char *secret)
{
	struct cm_hello hello = {.incarnation = inc, .world_size = (uint32_t)world};
	memcpy(hello.secret, secret, CM_SECRET_LEN);
	uint8_t pl[CM_HELLO_PAYLOAD];
	cm_hello_encode(&hello, pl);
	send_frame(fd, CM_T_HELLO, flags, rank, rank, 0, 0, 0, pl, sizeof pl);
}

void send_hello(int fd, int rank, int world, unsigned inc, const char *secret)
{
	send_hello_flags(fd, 0, rank, world, inc, secret);
}

void expect_quiet(int fd, int ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	ck_assert_int_eq(poll(&p, 1, ms), 0);
}

/* One frame; the payload (malloc'd, caller frees) in *payload. */
void recv_frame(int fd, struct cm_header *h, uint8_t **payload)
{
	long long deadline = now_ms() + IO_MS;
	uint8_t hdr[CM_HEADER_SIZE];
	ck_assert_msg(recv_exact(fd, hdr, sizeof hdr, deadline) == 0, "no frame from cmserver");
	struct cm_limits lim = {.world_size = 0, .max_payload = UINT32_MAX};
	ck_assert_int_eq(cm_header_decode(hdr, sizeof hdr, &lim, h), CM_OK);
	*payload = malloc(h->len + 1);
	ck_assert_ptr_nonnull(*payload);
	ck_assert_msg(recv_exact(fd, *payload, h->len, deadline) == 0, "short payload");
	(*payload)[h->len] = 0;
}

void expect_header_only(int fd, uint8_t type, uint64_t clock)
{
	struct cm_header h;
	uint8_t *p;
	recv_frame(fd, &h, &p);
	free(p);
	ck_assert_msg(h.type == type, "expected %s, got %s", cm_type_str(type),
	              cm_type_str(h.type));
	ck_assert_uint_eq(h.clock, clock);
}

/* The peer must get ERROR(code) and then see the connection closed. */
void expect_refused(int fd, enum cm_err code)
{
	struct cm_header h;
	uint8_t *text;
	recv_frame(fd, &h, &text);
	ck_assert_msg(h.type == CM_T_ERROR, "expected ERROR, got %s", cm_type_str(h.type));
	ck_assert_msg(h.tag == (int32_t)code, "expected %s, got %s: %s", cm_err_str(code),
	              cm_err_str((enum cm_err)h.tag), (char *)text);
	ck_assert_uint_gt(h.len, 0);
	free(text);
	/* Then EOF (or a reset), within the bound. */
	long long deadline = now_ms() + IO_MS;
	for (;;) {
		ck_assert_msg(now_ms() < deadline, "connection not closed after ERROR");
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		if (poll(&pf, 1, 100) <= 0)
			continue;
		char junk[256];
		ssize_t r = recv(fd, junk, sizeof junk, MSG_DONTWAIT);
		if (r == 0 || (r < 0 && errno == ECONNRESET))
			break;
		ck_assert_msg(r < 0, "data after ERROR");
	}
	close(fd);
}

/* The good client: rank `rank` sends a message to itself and receives it,
 * content checked byte for byte. *clock and *req are its counters. */
void good_roundtrip(int fd, int rank, uint64_t *clock, uint64_t *req, uint32_t len)
{
	uint8_t *data = malloc(len + 1);
	for (uint32_t i = 0; i < len; i++)
		data[i] = (uint8_t)(i * 131 + *clock);
	send_frame(fd, CM_T_RECV_REQ, 0, rank, rank, 4, 0, *req, NULL, 0);
	send_frame(fd, CM_T_MSG, 0, rank, rank, 4, 0, (*clock)++, data, len);
	struct cm_header h;
	uint8_t *got;
	recv_frame(fd, &h, &got);
	ck_assert_int_eq(h.type, CM_T_DELIVER);
	ck_assert_uint_eq(h.clock, *req);
	ck_assert_int_eq(h.src, rank);
	ck_assert_int_eq(h.tag, 4);
	ck_assert_uint_eq(h.len, len);
	ck_assert(memcmp(got, data, len) == 0);
	(*req)++;
	free(got);
	free(data);
}

/* A rank reconnects right after BYE + close. Its old connection stays
 * registered until the server has seen the close, and with threads that is
 * processed concurrently with the new HELLO: ERROR(CM_E_STATE) until then,
 * so retry (bounded). */
static int hello_after_bye(int rank, int world, uint64_t want_clock)
{
	for (int tries = 0; tries < 100; tries++) {
		int fd = dial();
		send_hello(fd, rank, world, 0, SECRET);
		struct cm_header h;
		uint8_t *p;
		recv_frame(fd, &h, &p);
		free(p);
		if (h.type == CM_T_HELLO_ACK) {
			ck_assert_uint_eq(h.clock, want_clock);
			return fd;
		}
		ck_assert_msg(h.type == CM_T_ERROR && h.tag == CM_E_STATE, "HELLO answered %s",
		              cm_type_str(h.type));
		close(fd);
		poll(NULL, 0, 20);
	}
	ck_abort_msg("rank %d never got back in after BYE", rank);
	return -1;
}

/* ---------------- checks every mode passes ---------------- */

START_TEST(test_bad_clients_good_client)
{
	start_server();
	uint64_t clock = 0, req = 0;
	int a = dial();
	send_hello(a, 0, 2, 0, SECRET);
	expect_header_only(a, CM_T_HELLO_ACK, 0);
	good_roundtrip(a, 0, &clock, &req, 10);

	/* Garbage bytes: not even a version byte. */
	int b = dial();
	const char garbage[] =
	    "GET / HTTP/1.1\r\nHost: localhost\r\nUser-Agent: not-chanmem\r\n\r\n";
	send_all(b, garbage, sizeof garbage - 1);
	expect_refused(b, CM_E_VERSION);
	good_roundtrip(a, 0, &clock, &req, 100);

	/* A well-formed header with the wrong version. */
	b = dial();
	uint8_t hdr[CM_HEADER_SIZE];
	struct cm_header h = {.type = CM_T_HELLO, .len = CM_HELLO_PAYLOAD};
	cm_header_encode(&h, hdr);
	hdr[0] = 7;
	send_all(b, hdr, sizeof hdr);
	expect_refused(b, CM_E_VERSION);
	good_roundtrip(a, 0, &clock, &req, 0);

	/* MSG without HELLO. */
	b = dial();
	send_frame(b, CM_T_MSG, 0, 1, 0, 4, 0, 0, "sneaky", 6);
	expect_refused(b, CM_E_AUTH);
	good_roundtrip(a, 0, &clock, &req, 1);

	/* Wrong secret. */
	b = dial();
	send_hello(b, 1, 2, 0, "00000000000000000000000000000000");
	expect_refused(b, CM_E_AUTH);
	good_roundtrip(a, 0, &clock, &req, 1000);

	/* Length over --max-message (announced, never sent). */
	b = dial();
	send_hello(b, 1, 2, 0, SECRET);
	expect_header_only(b, CM_T_HELLO_ACK, 0);
	h = (struct cm_header){.type = CM_T_MSG, .src = 1, .dst = 0, .len = MAX_MESSAGE + 1};
	cm_header_encode(&h, hdr);
	send_all(b, hdr, sizeof hdr);
	expect_refused(b, CM_E_LENGTH);
	good_roundtrip(a, 0, &clock, &req, MAX_MESSAGE); /* the largest allowed still passes */

	/* A truncated header, then the client goes away. */
	b = dial();
	send_all(b, hdr, 10);
	close(b);
	/* And one that connects and leaves without a byte. */
	close(dial());
	good_roundtrip(a, 0, &clock, &req, 3);

	/* Wrong world size and a frame for someone else's rank. */
	b = dial();
	send_hello(b, 1, 3, 0, SECRET);
	expect_refused(b, CM_E_SIZE);
	b = dial();
	send_hello(b, 1, 2, 1, SECRET);
	expect_header_only(b, CM_T_HELLO_ACK, 0);
	send_frame(b, CM_T_MSG, 0, 0, 0, 4, 0, 0, "spoof", 5);
	expect_refused(b, CM_E_RANK);

	/* A still works, says BYE, and a later connection of rank 0 learns its clock. */
	good_roundtrip(a, 0, &clock, &req, 65536 + 7);
	send_frame(a, CM_T_BYE, 0, 0, 0, 0, 0, 0, NULL, 0);
	expect_header_only(a, CM_T_BYE_ACK, 0);
	close(a);
	if (live_server_mode) {
		a = hello_after_bye(0, 2, clock);
	} else {
		a = dial();
		send_hello(a, 0, 2, 0, SECRET);
		expect_header_only(a, CM_T_HELLO_ACK, clock);
	}
	good_roundtrip(a, 0, &clock, &req, 5);
	close(a);

	stop_server_expect_clean();
}
END_TEST

START_TEST(test_slow_reader_does_not_stall_others)
{
	enum { N = 40, LEN = 256 * 1024 };
	start_server();
	int a = dial(), b = dial();
	send_hello(a, 0, 2, 0, SECRET);
	expect_header_only(a, CM_T_HELLO_ACK, 0);
	send_hello(b, 1, 2, 0, SECRET);
	expect_header_only(b, CM_T_HELLO_ACK, 0);

	/* B posts receives, then stops reading; A floods it with 10 MiB. */
	for (int i = 0; i < N; i++)
		send_frame(b, CM_T_RECV_REQ, 0, 0, 1, 1, 0, (uint64_t)i, NULL, 0);
	uint8_t *data = malloc(LEN);
	uint64_t clock = 0, req = 0;
	for (int i = 0; i < N; i++) {
		for (uint32_t k = 0; k < LEN; k++)
			data[k] = (uint8_t)(k + (uint32_t)i * 7);
		send_frame(a, CM_T_MSG, 0, 0, 1, 1, 0, clock++, data, LEN);
	}
	/* A keeps being served while B's output is stuck. */
	for (int i = 0; i < 50; i++)
		good_roundtrip(a, 0, &clock, &req, 1 + (uint32_t)i * 100);

	/* B reads everything at last, in order, intact. */
	for (int i = 0; i < N; i++) {
		struct cm_header h;
		uint8_t *got;
		recv_frame(b, &h, &got);
		ck_assert_int_eq(h.type, CM_T_DELIVER);
		ck_assert_uint_eq(h.clock, (uint64_t)i);
		ck_assert_uint_eq(h.len, LEN);
		for (uint32_t k = 0; k < LEN; k++)
			data[k] = (uint8_t)(k + (uint32_t)i * 7);
		ck_assert(memcmp(got, data, LEN) == 0);
		free(got);
	}
	free(data);

	/* A synchronous send is acknowledged once B's receive matches it. */
	send_frame(a, CM_T_MSG, CM_F_SYNC, 0, 1, 2, 0, clock, "sync", 4);
	send_frame(b, CM_T_RECV_REQ, 0, CM_ANY_SOURCE, 1, CM_ANY_TAG, 0, 99, NULL, 0);
	expect_header_only(b, CM_T_DELIVER, 99);
	expect_header_only(a, CM_T_SYNC_ACK, clock);
	close(a);
	close(b);
	stop_server_expect_clean();
}
END_TEST

START_TEST(test_sigterm_with_clients_connected)
{
	start_server();
	int a = dial();
	send_hello(a, 0, 1, 0, SECRET);
	expect_header_only(a, CM_T_HELLO_ACK, 0);
	int idle = dial();
	stop_server_expect_clean();
	close(a);
	close(idle);
}
END_TEST

void live_add_common_tests(TCase *t)
{
	tcase_add_checked_fixture(t, NULL, teardown);
	tcase_add_test(t, test_bad_clients_good_client);
	tcase_add_test(t, test_slow_reader_does_not_stall_others);
	tcase_add_test(t, test_sigterm_with_clients_connected);
}
