/* cmrun --remote-exec: what a launcher runs on a remote host (launch.h).
 *
 *   cmrun --remote-exec [--watch] [VAR=VALUE...] PROGRAM [ARGS...]
 *
 * Reads the job secret, one line, from stdin (so it never shows in a
 * process list or on a command line), puts it and the VAR=VALUE words in
 * the environment, and becomes PROGRAM. Its words need no quoting, so the
 * command line survives being parsed by a local shell and again by ssh's
 * remote one (a template like 'ssh -p 2222 {addr} {cmd}').
 *
 * --watch (a server without a control connection, behind ssh or a
 * template): PROGRAM runs as a child, and is stopped (SIGTERM, SIGKILL
 * CMRUN_KILL_GRACE later) when stdin ends: cmrun closed it, or the ssh
 * session or cmrun itself is gone. The exit status is PROGRAM's (128+N
 * for signal N). */
#include <config.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "job.h"
#include "jobenv.h"
#include "remote_exec.h"

static void __attribute__((noreturn, format(printf, 1, 2))) die(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "cmrun --remote-exec: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(CMRUN_EXIT_NOT_FOUND);
}

/* One line, byte by byte: what follows (rank 0's input) stays unread. */
static void read_secret(char *secret)
{
	size_t n = 0;
	for (;;) {
		char c;
		ssize_t r = read(STDIN_FILENO, &c, 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			die("no job secret on stdin (started by hand? this is cmrun's own launch "
			    "helper)");
		if (c == '\n')
			break;
		if (n == CM_SECRET_LEN || !isgraph((unsigned char)c))
			die("stdin's first line is not a job secret");
		secret[n++] = c;
	}
	if (n != CM_SECRET_LEN)
		die("stdin's first line is not a job secret");
	secret[n] = '\0';
}

static bool is_assignment(const char *w)
{
	if (!(isupper((unsigned char)*w) || *w == '_'))
		return false;
	for (w++; *w && *w != '='; w++)
		if (!(isupper((unsigned char)*w) || isdigit((unsigned char)*w) || *w == '_'))
			return false;
	return *w == '=';
}

static int status_of(int wait_status)
{
	if (WIFEXITED(wait_status))
		return WEXITSTATUS(wait_status);
	return WIFSIGNALED(wait_status) ? 128 + WTERMSIG(wait_status) : CMRUN_EXIT_FAILURE;
}

/* --watch: runs argv as a child until it exits or stdin ends. */
static void __attribute__((noreturn)) watch(char **argv)
{
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(CMRUN_EXIT_NOT_FOUND);
		int nul = open("/dev/null", O_RDONLY);
		if (nul >= 0)
			dup2(nul, STDIN_FILENO);
		execvp(argv[0], argv);
		fprintf(stderr, "cmrun --remote-exec: cannot run %s: %s\n", argv[0],
		        strerror(errno));
		_exit(CMRUN_EXIT_NOT_FOUND);
	}
	/* The child's exit wakes poll through a pidfd. */
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	bool stopping = false;
	int grace_ms = (int)(CMRUN_KILL_GRACE * 1000);
	for (;;) {
		int status;
		pid_t r = waitpid(pid, &status, WNOHANG);
		if (r == pid)
			exit(status_of(status));
		struct pollfd p[2] = {{.fd = pidfd, .events = POLLIN},
		                      {.fd = stopping ? -1 : STDIN_FILENO, .events = POLLIN}};
		/* Without pidfds (old kernels): look again every 100 ms. */
		int timeout = stopping && grace_ms >= 0 ? grace_ms : pidfd < 0 ? 100 : -1;
		int n = poll(p, 2, timeout);
		if (n < 0 && errno != EINTR)
			die("poll: %s", strerror(errno));
		if (n == 0 && stopping) {
			kill(pid, SIGKILL); /* past the grace */
			grace_ms = -1;
		}
		if (n > 0 && p[1].revents) {
			char buf[256];
			ssize_t got = read(STDIN_FILENO, buf, sizeof buf);
			if (got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN)) {
				kill(pid, SIGTERM);
				stopping = true;
			}
		}
	}
}

int remote_exec_main(int argc, char **argv)
{
	int i = 0;
	bool watched = i < argc && strcmp(argv[i], "--watch") == 0;
	if (watched)
		i++;
	char secret[CM_SECRET_LEN + 1];
	read_secret(secret);
	if (setenv(CM_ENV_SECRET, secret, 1) < 0)
		die("out of memory");
	for (; i < argc && is_assignment(argv[i]); i++)
		if (putenv(argv[i]) != 0)
			die("out of memory");
	if (i >= argc)
		die("no program to run");
	if (watched)
		watch(&argv[i]);
	execvp(argv[i], &argv[i]);
	die("cannot run %s: %s", argv[i], strerror(errno));
}
