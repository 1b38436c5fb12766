/* Live tests of the real ckptserver binary ($CKPTSERVER) on 127.0.0.1,
 * driven through libckptclient (and raw frames for what a well-behaved
 * client never sends): byte-exact round trips, --keep pruning, restart,
 * uploads killed midway, corrupt/oversize/unauthenticated refusals, many
 * clients at once, bad command lines. Every wait is bounded; servers are
 * killed by pid; temp directories under /tmp are removed. */
#include "config.h"

#include "ckpt_client.h"
#include "ckpt_proto.h"
#include "net.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SECRET "0123456789abcdef0123456789abcdef"
#define IO_MS 20000 /* generous: the machine is shared */
#define JOB "testjob"

/* Every test's directory lives under root, which main removes after all
 * tests: a failed test (its forked child ends without teardown) leaves
 * nothing behind either. */
static char root[64], dir[96];
static pid_t server_pid = -1;
static char server_addr[64];

static const char *server_path(void)
{
	const char *p = getenv("CKPTSERVER");
	return p && *p ? p : "../checkpoint/ckptserver";
}

static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits up to ms for pid; returns its status or -1. */
static int wait_bounded(pid_t pid, int ms)
{
	long long deadline = now_ms() + ms;
	int st;
	for (;;) {
		pid_t r = waitpid(pid, &st, WNOHANG);
		if (r == pid)
			return st;
		if (r < 0 || now_ms() > deadline)
			return -1;
		poll(NULL, 0, 10);
	}
}

/* Runs ckptserver with args (NULL-terminated). Returns its pid once it
 * wrote its address on --ready-fd, or -1 with *status set if it exited. */
static pid_t spawn(const char *secret, const char *const extra[], char *addr, int *status)
{
	int ready[2];
	ck_assert_int_eq(pipe(ready), 0);
	pid_t parent = getpid();
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		close(ready[0]);
		if (ready[1] != 3) {
			dup2(ready[1], 3);
			close(ready[1]);
		}
		int devnull = open("/dev/null", O_WRONLY);
		dup2(devnull, 1);
		if (secret)
			setenv("CHANMEM_SECRET", secret, 1);
		else
			unsetenv("CHANMEM_SECRET");
		const char *argv[32];
		int n = 0;
		argv[n++] = server_path();
		argv[n++] = "--ready-fd";
		argv[n++] = "3";
		for (int i = 0; extra && extra[i] && n < 31; i++)
			argv[n++] = extra[i];
		argv[n] = NULL;
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(ready[1]);
	char buf[64] = "";
	size_t got = 0;
	long long deadline = now_ms() + IO_MS;
	while (got < sizeof buf - 1 && now_ms() < deadline) {
		struct pollfd p = {.fd = ready[0], .events = POLLIN};
		if (poll(&p, 1, 200) <= 0)
			continue;
		ssize_t r = read(ready[0], buf + got, sizeof buf - 1 - got);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(ready[0]);
	buf[got] = '\0';
	char *nl = strchr(buf, '\n');
	if (nl == NULL) {
		int st = wait_bounded(pid, IO_MS);
		if (st == -1) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
		}
		if (status)
			*status = st;
		return -1;
	}
	*nl = '\0';
	if (addr)
		strcpy(addr, buf);
	return pid;
}

static void start_server(const char *const extra[])
{
	const char *args[24] = {"--dir", dir};
	int n = 2;
	for (int i = 0; extra && extra[i]; i++)
		args[n++] = extra[i];
	args[n] = NULL;
	int st;
	server_pid = spawn(SECRET, args, server_addr, &st);
	ck_assert_msg(server_pid > 0, "ckptserver did not start (status %d)", st);
}

/* SIGTERM and expect a clean exit 0. */
static void stop_server(void)
{
	ck_assert_int_gt(server_pid, 0);
	kill(server_pid, SIGTERM);
	int st = wait_bounded(server_pid, IO_MS);
	if (st == -1) {
		kill(server_pid, SIGKILL);
		waitpid(server_pid, NULL, 0);
	}
	server_pid = -1;
	ck_assert_msg(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	              "ckptserver did not exit 0 on SIGTERM (status %d)", st);
}

static void kill_server(void)
{
	kill(server_pid, SIGKILL);
	waitpid(server_pid, NULL, 0);
	server_pid = -1;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	return remove(path);
}

static void setup(void)
{
	snprintf(dir, sizeof dir, "%s/t-XXXXXX", root);
	ck_assert_ptr_nonnull(mkdtemp(dir));
	start_server(NULL);
}

static void teardown(void)
{
	if (server_pid > 0)
		kill_server();
	nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Deterministic contents that differ per (seed, offset). */
static uint8_t *make_image(size_t size, uint32_t seed)
{
	uint8_t *p = malloc(size ? size : 1);
	uint64_t x = 0x9e3779b97f4a7c15ull * (seed + 1);
	for (size_t i = 0; i < size; i++) {
		if ((i & 7) == 0) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
		}
		/* Compressible half and incompressible half, alternating 4 KiB. */
		p[i] = (i >> 12) & 1 ? (uint8_t)(x >> ((i & 7) * 8)) : (uint8_t)(i / 64 + seed);
	}
	return p;
}

static struct ckpt_client *connect_ok(void)
{
	struct ckpt_client *c = ckpt_client_new(IO_MS);
	ck_assert_ptr_nonnull(c);
	int rc = ckpt_client_connect(c, server_addr, SECRET);
	ck_assert_msg(rc == CKPT_OK, "connect: %s", ckpt_client_error(c));
	return c;
}

static void upload_ok(struct ckpt_client *c, uint32_t rank, uint64_t number, const void *data,
                      size_t size)
{
	int rc = ckpt_upload(c, JOB, rank, number, data, size);
	ck_assert_msg(rc == CKPT_OK, "upload rank %u number %llu: %s", rank,
	              (unsigned long long)number, ckpt_client_error(c));
}

static void expect_latest(struct ckpt_client *c, uint32_t rank, uint64_t number, const void *data,
                          size_t size)
{
	void *got;
	size_t got_size;
	uint64_t got_number;
	int rc = ckpt_fetch_latest_alloc(c, JOB, rank, &got_number, &got, &got_size);
	ck_assert_msg(rc == CKPT_OK, "fetch rank %u: %s", rank, ckpt_client_error(c));
	ck_assert_uint_eq(got_number, number);
	ck_assert_uint_eq(got_size, size);
	ck_assert(memcmp(got, data, size) == 0);
	free(got);
}

static int count_files(const char *prefix)
{
	DIR *d = opendir(dir);
	ck_assert_ptr_nonnull(d);
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL)
		if (strncmp(de->d_name, prefix, strlen(prefix)) == 0)
			n++;
	closedir(d);
	return n;
}

START_TEST(round_trip_sizes)
{
	static const size_t sizes[] = {0, 1, 4097, 1000003, CKPT_CHUNK_MAX, 20u << 20};
	struct ckpt_client *c = connect_ok();
	for (uint32_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		uint8_t *img = make_image(sizes[i], i);
		upload_ok(c, i, 100 + i, img, sizes[i]);
		expect_latest(c, i, 100 + i, img, sizes[i]);
		free(img);
	}
	/* Nothing for an unknown rank or job: NOTFOUND, connection stays. */
	void *got;
	size_t n;
	uint64_t num;
	ck_assert_int_eq(ckpt_fetch_latest_alloc(c, JOB, 99, &num, &got, &n), CKPT_E_NOTFOUND);
	ck_assert_int_eq(ckpt_fetch_latest_alloc(c, "otherjob", 0, &num, &got, &n),
	                 CKPT_E_NOTFOUND);
	uint8_t one = 42;
	upload_ok(c, 99, 1, &one, 1);
	expect_latest(c, 99, 1, &one, 1);
	/* Streaming in odd pieces equals one buffer. */
	uint8_t *img = make_image(3u << 20, 7);
	ck_assert_int_eq(ckpt_upload_begin(c, JOB, 98, 5), CKPT_OK);
	for (size_t off = 0; off < (3u << 20);) {
		size_t piece = 1 + (off * 7919) % 300000;
		if (piece > (3u << 20) - off)
			piece = (3u << 20) - off;
		ck_assert_int_eq(ckpt_upload_write(c, img + off, piece), CKPT_OK);
		off += piece;
	}
	ck_assert_int_eq(ckpt_upload_end(c), CKPT_OK);
	expect_latest(c, 98, 5, img, 3u << 20);
	free(img);
	ckpt_client_free(c);
	ck_assert_int_eq(count_files("tmp-"), 0);
}
END_TEST

START_TEST(keep_prunes_oldest)
{
	stop_server();
	const char *args[] = {"--keep", "2", NULL};
	start_server(args);
	struct ckpt_client *c = connect_ok();
	uint8_t *img[4];
	for (int i = 1; i <= 3; i++) {
		img[i] = make_image(10000 + (size_t)i, (uint32_t)i);
		upload_ok(c, 0, (uint64_t)i, img[i], 10000 + (size_t)i);
	}
	upload_ok(c, 1, 1, img[1], 10001); /* another rank is counted apart */
	expect_latest(c, 0, 3, img[3], 10003);
	ck_assert_int_eq(count_files("img-" JOB "-0-"), 2);
	ck_assert_int_eq(count_files("img-" JOB "-0-1-"), 0);
	ck_assert_int_eq(count_files("img-" JOB "-1-"), 1);
	/* An image older than the kept ones is accepted and dropped at once. */
	upload_ok(c, 0, 0, img[1], 10001);
	expect_latest(c, 0, 3, img[3], 10003);
	ck_assert_int_eq(count_files("img-" JOB "-0-"), 2);
	/* Re-uploading the latest number replaces it. */
	upload_ok(c, 0, 3, img[2], 10002);
	expect_latest(c, 0, 3, img[2], 10002);
	ck_assert_int_eq(count_files("img-" JOB "-0-"), 2);
	ckpt_client_free(c);
	for (int i = 1; i <= 3; i++)
		free(img[i]);
}
END_TEST

START_TEST(restart_keeps_images)
{
	struct ckpt_client *c = connect_ok();
	uint8_t *a = make_image(500000, 1), *b = make_image(77, 2);
	upload_ok(c, 0, 1, b, 77);
	upload_ok(c, 0, 2, a, 500000);
	upload_ok(c, 3, 9, b, 77);
	ckpt_client_free(c);
	stop_server();
	start_server(NULL);
	c = connect_ok();
	expect_latest(c, 0, 2, a, 500000);
	expect_latest(c, 3, 9, b, 77);
	ckpt_client_free(c);
	/* And after a SIGKILL too: commits were durable before PUT_OK. */
	kill_server();
	start_server(NULL);
	c = connect_ok();
	expect_latest(c, 0, 2, a, 500000);
	ckpt_client_free(c);
	free(a);
	free(b);
}
END_TEST

/* A child that uploads half an image (then _exit or pause). */
static pid_t half_upload(uint32_t rank, uint64_t number, size_t size, int die)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct ckpt_client *c = ckpt_client_new(IO_MS);
		uint8_t *img = make_image(size, 99);
		if (ckpt_client_connect(c, server_addr, SECRET) != CKPT_OK ||
		    ckpt_upload_begin(c, JOB, rank, number) != CKPT_OK ||
		    ckpt_upload_write(c, img, size / 2) != CKPT_OK)
			_exit(1);
		if (!die)
			pause(); /* killed by the parent, with the SIGKILLed server */
		_exit(0);
	}
	return pid;
}

static int wait_for_files(const char *prefix, int want, int ms)
{
	long long deadline = now_ms() + ms;
	int n;
	while ((n = count_files(prefix)) != want && now_ms() < deadline)
		poll(NULL, 0, 20);
	return n;
}

START_TEST(killed_client_leaves_nothing)
{
	struct ckpt_client *c = connect_ok();
	uint8_t *a = make_image(300000, 5);
	upload_ok(c, 2, 1, a, 300000);
	pid_t child = half_upload(2, 2, 6u << 20, 1);
	int st = wait_bounded(child, IO_MS);
	ck_assert_msg(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "uploader failed");
	/* The server discards the temp file once it sees the connection end. */
	ck_assert_int_eq(wait_for_files("tmp-", 0, IO_MS), 0);
	expect_latest(c, 2, 1, a, 300000);
	ckpt_client_free(c);

	/* Server killed mid-upload: the next start sweeps the temp file. */
	child = half_upload(2, 3, 6u << 20, 0);
	ck_assert_int_eq(wait_for_files("tmp-", 1, IO_MS), 1);
	kill_server();
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	ck_assert_int_eq(count_files("tmp-"), 1);
	start_server(NULL);
	ck_assert_int_eq(count_files("tmp-"), 0);
	c = connect_ok();
	expect_latest(c, 2, 1, a, 300000);
	ckpt_client_free(c);
	free(a);
}
END_TEST

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

START_TEST(parallel_clients)
{
	enum { CLIENTS = 8 };
	pid_t kids[CLIENTS];
	for (int i = 0; i < CLIENTS; i++) {
		kids[i] = fork();
		ck_assert_int_ge(kids[i], 0);
		if (kids[i] == 0) {
			struct ckpt_client *c = ckpt_client_new(IO_MS);
			if (ckpt_client_connect(c, server_addr, SECRET) != CKPT_OK)
				_exit(2);
			for (uint64_t n = 1; n <= 3; n++) {
				size_t size = 200000 + (size_t)i * 1000 + n;
				uint8_t *img = make_image(size, (uint32_t)(i * 10 + n));
				void *got;
				size_t got_size;
				uint64_t num;
				if (ckpt_upload(c, JOB, (uint32_t)i, n, img, size) != CKPT_OK ||
				    ckpt_fetch_latest_alloc(c, JOB, (uint32_t)i, &num, &got,
				                            &got_size) != CKPT_OK ||
				    num != n || got_size != size || memcmp(got, img, size) != 0)
					_exit(3);
				free(got);
				free(img);
			}
			ckpt_client_free(c);
			_exit(0);
		}
	}
	int failed = 0;
	for (int i = 0; i < CLIENTS; i++) {
		int st = wait_bounded(kids[i], 60000);
		if (st == -1) {
			kill(kids[i], SIGKILL);
			waitpid(kids[i], NULL, 0);
		}
		if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			failed++;
	}
	ck_assert_int_eq(failed, 0);
	ck_assert_int_eq(count_files("img-"), CLIENTS * 2); /* --keep 2 default */
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

START_TEST(bad_command_lines)
{
	const char *no_dir[] = {NULL};
	const char *keep0[] = {"--dir", dir, "--keep", "0", NULL};
	const char *level[] = {"--dir", dir, "--level", "999", NULL};
	const char *size[] = {"--dir", dir, "--max-image", "12parsecs", NULL};
	const char *unknown[] = {"--dir", dir, "--frobnicate", NULL};
	const char *listen[] = {"--dir", dir, "--listen", "nowhere:99999", NULL};
	const char *ok[] = {"--dir", dir, NULL};
	ck_assert_int_eq(run_status(SECRET, no_dir), 2);
	ck_assert_int_eq(run_status(SECRET, keep0), 2);
	ck_assert_int_eq(run_status(SECRET, level), 2);
	ck_assert_int_eq(run_status(SECRET, size), 2);
	ck_assert_int_eq(run_status(SECRET, unknown), 2);
	ck_assert_int_eq(run_status(SECRET, listen), 2);
	ck_assert_int_eq(run_status(NULL, ok), 2);    /* no secret */
	ck_assert_int_eq(run_status("short", ok), 2); /* bad secret */
	ck_assert_int_eq(run_status(SECRET, ok), 1);  /* dir in use by the fixture's server */
}
END_TEST

int main(void)
{
	strcpy(root, "/tmp/ckpt-test-XXXXXX");
	if (mkdtemp(root) == NULL) {
		perror("mkdtemp");
		return EXIT_FAILURE;
	}
	Suite *s = suite_create("ckpt_server");
	TCase *tc = tcase_create("live");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, round_trip_sizes);
	tcase_add_test(tc, keep_prunes_oldest);
	tcase_add_test(tc, restart_keeps_images);
	tcase_add_test(tc, killed_client_leaves_nothing);
	tcase_add_test(tc, corrupt_upload_refused);
	tcase_add_test(tc, oversize_refused);
	tcase_add_test(tc, unauthenticated_refused);
	tcase_add_test(tc, parallel_clients);
	tcase_add_test(tc, bad_command_lines);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	nftw(root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
