/* Live tests of the real ckptserver binary ($CKPTSERVER) on 127.0.0.1:
 * what it refuses, through libckptclient and raw frames (what a
 * well-behaved client never sends). Corrupt, oversize and unauthenticated
 * uploads, bad command lines; the server keeps serving good clients. The
 * fixture is test_ckpt_server_fixture.c's. */
#include "config.h"

#include "test_ckpt_server_fixture.h"

#include "ckpt_proto.h"
#include "net.h"

#include <check.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

/* Raw protocol helpers for frames a good client never sends. */
static int raw_connect(void)
{
	struct sockaddr_in sa;
	ck_assert_int_eq(cm_parse_hostport(server_addr, 0, &sa), 0);
	int fd = cm_tcp_connect(&sa, IO_MS);
	ck_assert_int_ge(fd, 0);
	struct timeval tv = {.tv_sec = IO_MS / 1000};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	return fd;
}

static void raw_send(int fd, uint8_t type, const void *payload, uint32_t len)
{
	uint8_t hdr[CKPT_HEADER_SIZE];
	struct ckpt_header h = {.type = type, .len = len};
	ckpt_header_encode(&h, hdr);
	ck_assert_int_eq(cm_write_full(fd, hdr, sizeof hdr), 0);
	if (len)
		ck_assert_int_eq(cm_write_full(fd, payload, len), 0);
}

/* Reads one frame; returns its type, *arg its arg. Payload discarded. */
static int raw_recv(int fd, uint64_t *arg)
{
	uint8_t hdr[CKPT_HEADER_SIZE], payload[CKPT_ERROR_TEXT_MAX];
	struct ckpt_header h;
	ck_assert_int_eq(cm_read_full(fd, hdr, sizeof hdr), 0);
	ck_assert_int_eq(ckpt_header_decode(hdr, sizeof hdr, &h), CKPT_OK);
	ck_assert_uint_le(h.len, sizeof payload);
	if (h.len)
		ck_assert_int_eq(cm_read_full(fd, payload, h.len), 0);
	*arg = h.arg;
	return h.type;
}

static void expect_error_then_close(int fd, int code)
{
	uint64_t arg;
	ck_assert_int_eq(raw_recv(fd, &arg), CKPT_T_ERROR);
	ck_assert_uint_eq(arg, (uint64_t)code);
	char b;
	ck_assert_int_eq(read(fd, &b, 1), 0); /* closed */
	close(fd);
}

static int raw_hello(void)
{
	int fd = raw_connect();
	uint64_t arg;
	raw_send(fd, CKPT_T_HELLO, SECRET, CKPT_SECRET_LEN);
	ck_assert_int_eq(raw_recv(fd, &arg), CKPT_T_HELLO_ACK);
	return fd;
}

static void raw_put(int fd, uint32_t rank, uint64_t number, const void *data, uint32_t len,
                    uint64_t size, uint64_t checksum)
{
	struct ckpt_ref ref = {.job = JOB, .rank = rank, .number = number};
	uint8_t p[CKPT_PUT_BEGIN_FIXED + CKPT_JOB_MAX];
	raw_send(fd, CKPT_T_PUT_BEGIN, p, (uint32_t)ckpt_put_begin_encode(&ref, p));
	if (len)
		raw_send(fd, CKPT_T_PUT_DATA, data, len);
	struct ckpt_summary s = {.size = size, .checksum = checksum};
	uint8_t e[CKPT_PUT_END_PAYLOAD];
	ckpt_put_end_encode(&s, e);
	raw_send(fd, CKPT_T_PUT_END, e, sizeof e);
}

START_TEST(corrupt_upload_refused)
{
	struct ckpt_client *c = connect_ok();
	uint8_t *a = make_image(5000, 3);
	upload_ok(c, 0, 1, a, 5000);
	uint64_t sum = ckpt_checksum(CKPT_CHECKSUM_INIT, a, 5000), arg;
	/* Raw path works with the right checksum... */
	int fd = raw_hello();
	raw_put(fd, 1, 1, a, 5000, 5000, sum);
	ck_assert_int_eq(raw_recv(fd, &arg), CKPT_T_PUT_OK);
	ck_assert_uint_eq(arg, 1);
	/* ...and is refused with a wrong one or a wrong size. */
	raw_put(fd, 0, 2, a, 5000, 5000, sum ^ 1);
	expect_error_then_close(fd, CKPT_E_CHECKSUM);
	fd = raw_hello();
	raw_put(fd, 0, 3, a, 5000, 4999, sum);
	expect_error_then_close(fd, CKPT_E_CHECKSUM);
	/* Bad job id, and a frame out of place. */
	fd = raw_hello();
	uint8_t p[CKPT_PUT_BEGIN_FIXED + 3] = {0};
	memcpy(p + CKPT_PUT_BEGIN_FIXED, "a/b", 3);
	raw_send(fd, CKPT_T_PUT_BEGIN, p, sizeof p);
	expect_error_then_close(fd, CKPT_E_FIELD);
	fd = raw_hello();
	raw_send(fd, CKPT_T_PUT_DATA, a, 10);
	expect_error_then_close(fd, CKPT_E_STATE);
	fd = raw_hello();
	raw_send(fd, CKPT_T_HELLO, SECRET, CKPT_SECRET_LEN);
	expect_error_then_close(fd, CKPT_E_STATE);
	ck_assert_int_eq(wait_for_files("tmp-", 0, IO_MS), 0);
	expect_latest(c, 0, 1, a, 5000);
	expect_latest(c, 1, 1, a, 5000);
	ckpt_client_free(c);
	free(a);
}
END_TEST

START_TEST(oversize_refused)
{
	stop_server();
	const char *args[] = {"--max-image", "1MiB", NULL};
	start_server(args);
	struct ckpt_client *c = connect_ok();
	uint8_t *a = make_image(3u << 20, 4);
	upload_ok(c, 0, 1, a, 1u << 20); /* exactly the limit */
	struct ckpt_client *big = connect_ok();
	int rc = ckpt_upload(big, JOB, 0, 2, a, 3u << 20);
	ck_assert_msg(rc == CKPT_E_TOO_BIG, "got %d: %s", rc, ckpt_client_error(big));
	ck_assert_int_eq(ckpt_upload_begin(big, JOB, 0, 3), CKPT_E_IO); /* closed */
	ckpt_client_free(big);
	ck_assert_int_eq(wait_for_files("tmp-", 0, IO_MS), 0);
	expect_latest(c, 0, 1, a, 1u << 20);
	ckpt_client_free(c);
	free(a);
}
END_TEST

START_TEST(unauthenticated_refused)
{
	struct ckpt_client *c = ckpt_client_new(IO_MS);
	ck_assert_int_eq(ckpt_client_connect(c, server_addr, "ffffffffffffffffffffffffffffffff"),
	                 CKPT_E_AUTH);
	ck_assert_ptr_nonnull(strstr(ckpt_client_error(c), "secret"));
	ckpt_client_free(c);
	/* A request before HELLO. */
	int fd = raw_connect();
	struct ckpt_ref ref = {.job = JOB, .rank = 0};
	uint8_t p[CKPT_GET_LATEST_FIXED + CKPT_JOB_MAX];
	raw_send(fd, CKPT_T_GET_LATEST, p, (uint32_t)ckpt_get_latest_encode(&ref, p));
	expect_error_then_close(fd, CKPT_E_AUTH);
	/* Not our protocol at all. */
	fd = raw_connect();
	ck_assert_int_eq(cm_write_full(fd, "GET / HTTP/1.0\r\n\r\n", 18), 0);
	expect_error_then_close(fd, CKPT_E_MAGIC);
	/* The server still serves a good client. */
	c = connect_ok();
	uint8_t x[3] = {1, 2, 3};
	upload_ok(c, 0, 1, x, 3);
	expect_latest(c, 0, 1, x, 3);
	ckpt_client_free(c);
}
END_TEST

static int run_status(const char *secret, const char *const args[])
{
	int st = 0;
	pid_t pid = spawn(secret, args, NULL, &st);
	if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return -1;
	}
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* DROP_JOB: not before HELLO, not with a bad job id, not mid-upload; the
 * images stay in every case. */
START_TEST(drop_job_refused)
{
	struct ckpt_client *c = connect_ok();
	uint8_t *a = make_image(3000, 5);
	upload_ok(c, 0, 1, a, 3000);
	int fd = raw_connect();
	raw_send(fd, CKPT_T_DROP_JOB, JOB, (uint32_t)strlen(JOB));
	expect_error_then_close(fd, CKPT_E_AUTH);
	fd = raw_hello();
	raw_send(fd, CKPT_T_DROP_JOB, "bad/job", 7);
	expect_error_then_close(fd, CKPT_E_FIELD);
	fd = raw_hello();
	struct ckpt_ref ref = {.job = JOB, .rank = 0, .number = 2};
	uint8_t p[CKPT_PUT_BEGIN_FIXED + CKPT_JOB_MAX];
	raw_send(fd, CKPT_T_PUT_BEGIN, p, (uint32_t)ckpt_put_begin_encode(&ref, p));
	raw_send(fd, CKPT_T_DROP_JOB, JOB, (uint32_t)strlen(JOB));
	expect_error_then_close(fd, CKPT_E_STATE);
	expect_latest(c, 0, 1, a, 3000);
	ck_assert_int_eq(count_files("img-"), 1);
	ckpt_client_free(c);
	free(a);
}
END_TEST

START_TEST(bad_command_lines)
{
	const char *no_dir[] = {NULL};
	const char *keep0[] = {"--dir", server_dir, "--keep", "0", NULL};
	const char *level[] = {"--dir", server_dir, "--level", "999", NULL};
	const char *size[] = {"--dir", server_dir, "--max-image", "12parsecs", NULL};
	const char *size0[] = {"--dir", server_dir, "--max-image", "0", NULL};
	const char *unknown[] = {"--dir", server_dir, "--frobnicate", NULL};
	const char *listen[] = {"--dir", server_dir, "--listen", "nowhere:99999", NULL};
	const char *ok[] = {"--dir", server_dir, NULL};
	ck_assert_int_eq(run_status(SECRET, no_dir), 2);
	ck_assert_int_eq(run_status(SECRET, keep0), 2);
	ck_assert_int_eq(run_status(SECRET, level), 2);
	ck_assert_int_eq(run_status(SECRET, size), 2);
	ck_assert_int_eq(run_status(SECRET, size0), 2);
	ck_assert_int_eq(run_status(SECRET, unknown), 2);
	ck_assert_int_eq(run_status(SECRET, listen), 2);
	ck_assert_int_eq(run_status(NULL, ok), 2);    /* no secret */
	ck_assert_int_eq(run_status("short", ok), 2); /* bad secret */
	ck_assert_int_eq(run_status(SECRET, ok), 1);  /* dir in use by the fixture's server */
}
END_TEST

static void add_tests(TCase *tc)
{
	tcase_add_test(tc, corrupt_upload_refused);
	tcase_add_test(tc, oversize_refused);
	tcase_add_test(tc, unauthenticated_refused);
	tcase_add_test(tc, drop_job_refused);
	tcase_add_test(tc, bad_command_lines);
}

int main(void)
{
	return run_live_tests("ckpt_server_refusals", add_tests);
}
