/* ckptserver against clients that never finish authenticating: its idle
 * limit was per read, so 256 connections sending a byte now and then held
 * every session and real clients got BUSY. Now HELLO must be in within
 * CKPT_AUTH_TIMEOUT_MS of connecting and past CKPT_MAX_UNAUTH such
 * connections the oldest is dropped. The fixture is
 * test_ckpt_server_fixture.c's; every wait is bounded. */
#include "config.h"

#include "test_ckpt_server_fixture.h"

#include "ckpt_session.h"
#include "net.h"

#include <check.h>
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define LORIS 300 /* more than CKPT_MAX_SESSIONS */

static int loris(void)
{
	struct sockaddr_in sa;
	ck_assert_int_eq(cm_parse_hostport(server_addr, 0, &sa), 0);
	int fd = cm_tcp_connect(&sa, IO_MS);
	ck_assert_int_ge(fd, 0);
	/* The first byte of a header, then nothing: a read never times out. */
	ck_assert_int_eq(cm_write_full(fd, "C", 1), 0);
	return fd;
}

/* The server closes fd (EOF or reset) within ms. */
static bool closed_within(int fd, int ms)
{
	long long deadline = cm_now_ms() + ms;
	char buf[256];
	while (cm_now_ms() < deadline) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, 100) <= 0)
			continue;
		ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			return true;
	}
	return false;
}

START_TEST(slow_clients_hold_nothing)
{
	static int fds[LORIS];
	for (int i = 0; i < LORIS; i++)
		fds[i] = loris();
	/* A real client authenticates and is served at once. */
	struct ckpt_client *c = connect_ok();
	uint8_t x[3] = {7, 8, 9};
	upload_ok(c, 0, 1, x, 3);
	expect_latest(c, 0, 1, x, 3);
	ckpt_client_free(c);
	/* Even the newest slow one is gone after the deadline. */
	ck_assert_msg(closed_within(fds[LORIS - 1], CKPT_AUTH_TIMEOUT_MS + IO_MS),
	              "a connection without HELLO was kept past the deadline");
	for (int i = 0; i < LORIS; i++)
		close(fds[i]);
	c = connect_ok();
	expect_latest(c, 0, 1, x, 3);
	ckpt_client_free(c);
}
END_TEST

static void add_tests(TCase *tc)
{
	tcase_add_test(tc, slow_clients_hold_nothing);
}

int main(void)
{
	return run_live_tests("ckpt_slowloris", add_tests);
}
