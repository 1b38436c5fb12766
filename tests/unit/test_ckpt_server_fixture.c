/* The fixture of the live ckptserver tests (test_ckpt_server_fixture.h). */
#include "config.h"

#include "test_ckpt_server_fixture.h"

#include <check.h>
#include <dirent.h>
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

/* Every test's directory lives under root, which run_live_tests removes
 * after all tests: a failed test (its forked child ends without teardown)
 * leaves nothing behind either. */
static char root[64];
char server_dir[96];
char server_addr[64];
static pid_t server_pid = -1;

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
int wait_bounded(pid_t pid, int ms)
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

/* Reads fd until EOF, cap - 1 bytes or IO_MS, into buf (NUL-terminated);
 * closes fd. */
static void read_to_end(int fd, char *buf, size_t cap)
{
	size_t got = 0;
	long long deadline = now_ms() + IO_MS;
	while (got < cap - 1 && now_ms() < deadline) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, 200) <= 0)
			continue;
		ssize_t r = read(fd, buf + got, cap - 1 - got);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	buf[got] = '\0';
}

/* Runs ckptserver with args (NULL-terminated). Returns its pid once it
 * wrote its address on --ready-fd, or -1 with *status set if it exited. */
pid_t spawn(const char *secret, const char *const extra[], char *addr, int *status)
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
	char buf[64];
	read_to_end(ready[0], buf, sizeof buf);
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

int run_ckptserver(const char *const args[], char *out, size_t cap)
{
	int pipefd[2];
	ck_assert_int_eq(pipe(pipefd), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(pipefd[1], 1);
		dup2(pipefd[1], 2);
		close(pipefd[0]);
		close(pipefd[1]);
		const char *argv[32];
		int n = 0;
		argv[n++] = server_path();
		for (int i = 0; args[i] && n < 31; i++)
			argv[n++] = args[i];
		argv[n] = NULL;
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(pipefd[1]);
	read_to_end(pipefd[0], out, cap);
	int st = wait_bounded(pid, IO_MS);
	if (st == -1) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return -1;
	}
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

void start_server(const char *const extra[])
{
	const char *args[24] = {"--dir", server_dir};
	int n = 2;
	for (int i = 0; extra && extra[i]; i++)
		args[n++] = extra[i];
	args[n] = NULL;
	int st;
	server_pid = spawn(SECRET, args, server_addr, &st);
	ck_assert_msg(server_pid > 0, "ckptserver did not start (status %d)", st);
}

/* SIGTERM and expect a clean exit 0. */
void stop_server(void)
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

void kill_server(void)
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
	snprintf(server_dir, sizeof server_dir, "%s/t-XXXXXX", root);
	ck_assert_ptr_nonnull(mkdtemp(server_dir));
	start_server(NULL);
}

static void teardown(void)
{
	if (server_pid > 0)
		kill_server();
	nftw(server_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Deterministic contents that differ per (seed, offset). */
uint8_t *make_image(size_t size, uint32_t seed)
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

struct ckpt_client *connect_ok(void)
{
	struct ckpt_client *c = ckpt_client_new(IO_MS);
	ck_assert_ptr_nonnull(c);
	int rc = ckpt_client_connect(c, server_addr, SECRET);
	ck_assert_msg(rc == CKPT_OK, "connect: %s", ckpt_client_error(c));
	return c;
}

void upload_ok(struct ckpt_client *c, uint32_t rank, uint64_t number, const void *data, size_t size)
{
	int rc = ckpt_upload(c, JOB, rank, number, data, size);
	ck_assert_msg(rc == CKPT_OK, "upload rank %u number %llu: %s", rank,
	              (unsigned long long)number, ckpt_client_error(c));
}

void expect_latest(struct ckpt_client *c, uint32_t rank, uint64_t number, const void *data,
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

int count_files(const char *prefix)
{
	DIR *d = opendir(server_dir);
	ck_assert_ptr_nonnull(d);
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL)
		if (strncmp(de->d_name, prefix, strlen(prefix)) == 0)
			n++;
	closedir(d);
	return n;
}

int wait_for_files(const char *prefix, int want, int ms)
{
	long long deadline = now_ms() + ms;
	int n;
	while ((n = count_files(prefix)) != want && now_ms() < deadline)
		poll(NULL, 0, 20);
	return n;
}

int run_live_tests(const char *suite_name, void (*add_tests)(TCase *tc))
{
	strcpy(root, "/tmp/ckpt-test-XXXXXX");
	if (mkdtemp(root) == NULL) {
		perror("mkdtemp");
		return EXIT_FAILURE;
	}
	Suite *s = suite_create(suite_name);
	TCase *tc = tcase_create("live");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	add_tests(tc);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	nftw(root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
