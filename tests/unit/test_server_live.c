/* Live tests of the real cmserver binary ($CMSERVER) on 127.0.0.1: a good
 * client keeps sending and receiving while bad clients (garbage, wrong
 * version, unauthenticated MSG, wrong secret, oversize length, truncated
 * header) are each refused with the right ERROR and disconnected; a client
 * that stops reading does not stall the others; SIGTERM exits 0; bad
 * command lines exit 2. Every wait is bounded; the server is killed by pid
 * if a test fails (and dies with the test process in any case). */
#include "config.h"

#include "live_server.h"

#include "net.h"

#include <check.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

/* Runs cmserver with args; returns its exit status, stderr in err. */
static int run_cli(const char *secret, char *const args[], char *err, size_t cap)
{
	int ep[2];
	ck_assert_int_eq(pipe(ep), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(ep[0]);
		dup2(ep[1], 2);
		int devnull = open("/dev/null", O_WRONLY);
		dup2(devnull, 1);
		if (secret)
			setenv("CHANMEM_SECRET", secret, 1);
		else
			unsetenv("CHANMEM_SECRET");
		char *argv[16];
		int n = 0;
		argv[n++] = (char *)cmserver_path();
		for (int i = 0; args[i] && n < 15; i++)
			argv[n++] = args[i];
		argv[n] = NULL;
		execv(argv[0], argv);
		_exit(127);
	}
	close(ep[1]);
	size_t got = 0;
	long long deadline = now_ms() + IO_MS;
	while (got + 1 < cap && now_ms() < deadline) {
		struct pollfd p = {.fd = ep[0], .events = POLLIN};
		if (poll(&p, 1, 100) <= 0)
			continue;
		ssize_t r = read(ep[0], err + got, cap - 1 - got);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	err[got] = '\0';
	close(ep[0]);
	int st = wait_exit(pid, IO_MS);
	if (st == -1) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		ck_abort_msg("cmserver did not exit");
	}
	ck_assert(WIFEXITED(st));
	return WEXITSTATUS(st);
}

START_TEST(test_command_line)
{
	char err[2048];
	struct {
		char *args[6];
		const char *secret;
		int status;
		const char *says;
	} cases[] = {
	    {{"--mode", "mono", "--threads", "2", NULL}, SECRET, 2, "applies to modes"},
	    {{"--mode", "multiplexer", "--threads", "0", NULL}, SECRET, 2, "--threads"},
	    {{"--mode", "specialized", "--threads", "65", NULL}, SECRET, 2, "--threads"},
	    {{"--mode", "thread-per-client", "--threads", "x", NULL}, SECRET, 2, "--threads"},
	    {{"--log-mem", "lots", NULL}, SECRET, 2, "--log-mem"},
	    {{"--mode", "turbo", NULL}, SECRET, 2, "unknown mode"},
	    {{"--listen", "nowhere", NULL}, SECRET, 2, "--listen"},
	    {{"--listen", "127.0.0.1:70000", NULL}, SECRET, 2, "--listen"},
	    {{"--listen", "127.0.0.1", NULL}, SECRET, 2, "--listen"},
	    {{"--listen", "127.0.0.1: 5", NULL}, SECRET, 2, "--listen"},
	    {{"--unix", "name", NULL}, SECRET, 2, "--unix 'name': expected unix:@NAME"},
	    {{"--unix", "127.0.0.1:5", NULL}, SECRET, 2, "expected unix:@NAME"},
	    {{"--unix", "unix:@a", "--no-unix", NULL}, SECRET, 2, "contradict"},
	    {{"--mode", "multiplexer", "--threads", "", NULL}, SECRET, 2, "--threads"},
	    {{"--world-size", "0", NULL}, SECRET, 2, "--world-size"},
	    {{"--world-size", " 2", NULL}, SECRET, 2, "--world-size"},
	    {{"--max-message", "lots", NULL}, SECRET, 2, "--max-message"},
	    {{"--max-message", "8", NULL}, SECRET, 2, "--max-message"},
	    {{"--max-message", "5GiB", NULL}, SECRET, 2, "--max-message"},
	    {{"--ready-fd", "-1", NULL}, SECRET, 2, "--ready-fd"},
	    {{"--ready-fd", "999", NULL}, SECRET, 2, "not an open file descriptor"},
	    {{"--bogus", NULL}, SECRET, 2, "unknown option"},
	    {{"extra", NULL}, SECRET, 2, "unexpected argument"},
	    {{"--mode", NULL}, SECRET, 2, "needs a value"},
	    {{NULL}, NULL, 2, "no job secret"},
	    {{NULL}, "short", 2, "CHANMEM_SECRET"},
	    {{"--secret-file", "/nonexistent/secret", NULL}, NULL, 2, "/nonexistent/secret"},
	    {{"--help", NULL}, NULL, 0, ""},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		int st = run_cli(cases[i].secret, cases[i].args, err, sizeof err);
		ck_assert_msg(st == cases[i].status,
		              "case %zu (%s): exit %d, expected %d; stderr: %s", i,
		              cases[i].args[0] ? cases[i].args[0] : "-", st, cases[i].status, err);
		ck_assert_msg(strstr(err, cases[i].says) != NULL, "case %zu: stderr lacks '%s': %s",
		              i, cases[i].says, err);
	}
}
END_TEST

START_TEST(test_secret_file)
{
	char path[] = "/tmp/cmserver-secret-XXXXXX";
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	const char line[] = SECRET "\n";
	ck_assert_int_eq(write(fd, line, sizeof line - 1), (ssize_t)(sizeof line - 1));
	close(fd);
	char ready[128];
	char *extra[] = {"--secret-file", path, NULL};
	server_pid = spawn_server(NULL, extra, ready, sizeof ready, NULL);
	unlink(path);
	ck_assert_msg(strchr(ready, '\n') != NULL, "no ready line");
	*strchr(ready, '\n') = '\0';
	ready[strcspn(ready, " ")] = '\0'; /* TCP first, then " unix:@NAME" */
	ck_assert_int_eq(cm_parse_hostport(ready, 0, &server_addr), 0);
	int a = dial();
	send_hello(a, 0, 1, 0, SECRET);
	expect_header_only(a, CM_T_HELLO_ACK, 0);
	close(a);
	stop_server_expect_clean();

	/* A file whose first line is not a secret. */
	strcpy(path, "/tmp/cmserver-secret-XXXXXX");
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "tooshort\n", 9), 9);
	close(fd);
	char *args[] = {"--secret-file", path, NULL};
	int st = run_cli(NULL, args, ready, sizeof ready);
	unlink(path);
	ck_assert_int_eq(st, 2);
}
END_TEST

/* --unix: the server listens on the given abstract name, a second server
 * cannot take it while the first runs, and a new one can once it is gone
 * (how cmrun --cm-restart brings a CM back on its address). */
START_TEST(test_unix_name)
{
	char name[64], ready[256], want[80], why[128];
	snprintf(name, sizeof name, "unix:@chanmem-test-%d", (int)getpid());
	snprintf(want, sizeof want, " %s\n", name);
	char *extra[] = {"--unix", name, NULL};
	for (int round = 0; round < 2; round++) {
		server_pid = spawn_server(SECRET, extra, ready, sizeof ready, NULL);
		char *sp = strchr(ready, ' ');
		ck_assert_msg(sp && strcmp(sp, want) == 0, "round %d: ready line '%s'", round,
		              ready);
		struct cm_addr addr;
		ck_assert_int_eq(cm_parse_addr(name, &addr, why, sizeof why), 0);
		int a = cm_connect(&addr, IO_MS);
		ck_assert_int_ge(a, 0);
		send_hello(a, 0, 1, 0, SECRET);
		expect_header_only(a, CM_T_HELLO_ACK, 0);
		if (round == 0) {
			char err[2048];
			int st = run_cli(SECRET, extra, err, sizeof err);
			ck_assert_msg(st == 1 &&
			                  strstr(err, "cannot listen on an abstract unix") != NULL,
			              "second server on a taken name: exit %d: %s", st, err);
		}
		close(a);
		stop_server_expect_clean();
	}
}
END_TEST

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	Suite *s = suite_create("server_live");
	TCase *t = tcase_create("live");
	tcase_set_timeout(t, 60);
	live_add_common_tests(t); /* in cmserver's default mode: no --mode */
	tcase_add_test(t, test_command_line);
	tcase_add_test(t, test_secret_file);
	tcase_add_test(t, test_unix_name);
	suite_add_tcase(s, t);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
