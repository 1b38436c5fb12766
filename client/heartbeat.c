/* Heartbeat thread and the control connection of remote ranks
 * (heartbeat.h). */
#include "config.h"

#include "heartbeat.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "jobenv.h"
#include "net.h"
#include "protocol.h"
#include "units.h"

/* How long a remote rank tries to reach cmrun, and how long its control
 * connection may go without an acknowledgement (cmrun's host gone, or a
 * partition) before the kernel gives up on it and the rank exits. */
#define CONTROL_CONNECT_MS 10000
#define CONTROL_USER_TIMEOUT_MS 30000
/* How long a restored remote rank waits for cmrun to take note of its
 * filler before writing it anyway. */
#define CONTROL_ACK_MS 10000

static struct {
	pthread_t thread;
	bool running;
	int stop_pipe[2];
	int fd;
	bool tcp;         /* CHANMEM_CONTROL: watch the connection, exit when it ends */
	long interval_ms; /* 0: no heartbeats (only watching) */
	int rank;
	unsigned incarnation;
	int replica;
	bool farewell_said;
	char beat[80];     /* "heartbeat R I K\n" */
	char farewell[80]; /* "finalized R I K\n" */
} hb = {.fd = -1, .stop_pipe = {-1, -1}};

/* This incarnation resumed from a checkpoint image (cm_control_restored). */
static bool restored;

/* MPI requests made so far (cm_mpi_req_alloc): how far the rank got, the
 * same at the same point of every re-execution from the same start. Only
 * the MPI thread writes it; the crash handler reads it. */
_Atomic unsigned long cm_progress;

/* One line, never blocking: the pipe is shared by every rank and by the
 * MPI_Abort report, so its descriptor stays blocking; poll says whether a
 * small write fits now. A full pipe (cmrun not reading for a while) skips
 * this beat rather than stalling the thread. */
static void send_line(const char *line)
{
	struct pollfd p = {.fd = hb.fd, .events = POLLOUT};
	if (poll(&p, 1, 0) != 1 || !(p.revents & POLLOUT))
		return;
	ssize_t unused = send(hb.fd, line, strlen(line), MSG_NOSIGNAL);
	if (unused < 0 && errno == ENOTSOCK)
		unused = write(hb.fd, line, strlen(line));
	(void)unused;
}

/* A line that must arrive (init, finalized, restored, crashed): waits up
 * to a few seconds for room in a full pipe instead of skipping it. */
static void send_line_wait(const char *line)
{
	struct pollfd p = {.fd = hb.fd, .events = POLLOUT};
	if (poll(&p, 1, 5000) != 1 || !(p.revents & POLLOUT))
		return;
	ssize_t unused = send(hb.fd, line, strlen(line), MSG_NOSIGNAL);
	if (unused < 0 && errno == ENOTSOCK)
		unused = write(hb.fd, line, strlen(line));
	(void)unused;
}

/* Reads one line cmrun sends in answer, waiting up to ms for it. */
static void await_line(int fd, int ms)
{
	long long deadline = cm_now_ms() + ms;
	for (;;) {
		long long left = deadline - cm_now_ms();
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (left <= 0 || poll(&p, 1, (int)left) == 0)
			return;
		char c;
		ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR) || (n == 1 && c == '\n'))
			return;
	}
}

/* ---- crash reports ----
 * A signal that means the program itself failed (a bad access, an
 * arithmetic fault, abort) is reported to cmrun with the rank's progress
 * before the process dies of it as it would have: cmrun tells a
 * re-execution that dies at the same point again (a bug in the program:
 * restarting it again cannot help) from a fault. Only signals whose action
 * is still the default are caught, so a program's own handlers win. */
static const int crash_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};

/* Async-signal-safe decimal. */
static char *put_num(char *p, unsigned long long v)
{
	char digits[24];
	int n = 0;
	do {
		digits[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n)
		*p++ = digits[--n];
	return p;
}

static void on_crash(int sig)
{
	char line[128], *p = line;
	memcpy(p, "crashed ", 8);
	p += 8;
	p = put_num(p, (unsigned long long)hb.rank);
	*p++ = ' ';
	p = put_num(p, hb.incarnation);
	*p++ = ' ';
	p = put_num(p, (unsigned long long)hb.replica);
	*p++ = ' ';
	p = put_num(p, (unsigned long long)sig);
	*p++ = ' ';
	p = put_num(p, atomic_load_explicit(&cm_progress, memory_order_relaxed));
	*p++ = '\n';
	ssize_t unused = send(hb.fd, line, (size_t)(p - line), MSG_NOSIGNAL | MSG_DONTWAIT);
	if (unused < 0 && errno == ENOTSOCK)
		unused = write(hb.fd, line, (size_t)(p - line));
	(void)unused;
	/* SA_RESETHAND restored the default action: die of it, as the program
	 * would have (a fault re-raises when the instruction runs again; a
	 * raise() or kill() from the program needs this). */
	raise(sig);
}

static void install_crash_handlers(void)
{
	for (size_t i = 0; i < sizeof crash_signals / sizeof crash_signals[0]; i++) {
		struct sigaction old, sa;
		if (sigaction(crash_signals[i], NULL, &old) < 0 || old.sa_handler != SIG_DFL ||
		    (old.sa_flags & SA_SIGINFO))
			continue;
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = on_crash;
		sigemptyset(&sa.sa_mask);
		sa.sa_flags = SA_RESETHAND | SA_NODEFER;
		sigaction(crash_signals[i], &sa, NULL);
	}
}

/* cmrun closed the connection (it gave this incarnation up, or the job
 * ended) or it broke: nobody supervises this process any more, and a
 * replacement may already run elsewhere. */
static void __attribute__((noreturn)) control_lost(const char *why)
{
	char line[160];
	int n = snprintf(line, sizeof line,
	                 "chanmem: rank %d: the connection to cmrun ended (%s); exiting\n", hb.rank,
	                 why);
	ssize_t unused = write(STDERR_FILENO, line, (size_t)n);
	(void)unused;
	_exit(1);
}

static long long now_ms(void)
{
	return cm_now_ms();
}

static void *heartbeat_main(void *arg)
{
	(void)arg;
	long long next = now_ms();
	for (;;) {
		if (hb.interval_ms > 0 && now_ms() >= next) {
			send_line(hb.beat);
			next += hb.interval_ms;
			if (next < now_ms())
				next = now_ms() + hb.interval_ms; /* descheduled: no burst */
		}
		long long left = hb.interval_ms > 0 ? next - now_ms() : -1;
		struct pollfd p[2] = {{.fd = hb.stop_pipe[0], .events = POLLIN},
		                      {.fd = hb.fd, .events = POLLIN}};
		int r = poll(p, hb.tcp ? 2 : 1,
		             left < 0         ? -1
		             : left > INT_MAX ? INT_MAX
		                              : (int)left);
		if (r < 0 && errno != EINTR)
			break;
		if (r > 0 && p[0].revents)
			break; /* cm_heartbeat_stop */
		if (r > 0 && hb.tcp && p[1].revents) {
			char buf[64];
			ssize_t n = recv(hb.fd, buf, sizeof buf, MSG_DONTWAIT);
			if (n == 0)
				control_lost("closed by cmrun");
			if (n < 0 && errno != EAGAIN && errno != EINTR)
				control_lost(strerror(errno));
			/* cmrun sends nothing else: ignored */
		}
	}
	return NULL;
}

/* Connects to cmrun at text ("IP:PORT"), says who this is. Exits the
 * process when cmrun cannot be reached: nothing would supervise it. */
static int control_connect(const char *text, int rank, unsigned incarnation, int replica)
{
	struct sockaddr_in addr;
	const char *secret = getenv(CM_ENV_SECRET);
	if (cm_parse_hostport(text, -1, &addr) < 0 || addr.sin_port == 0) {
		fprintf(stderr, "chanmem: rank %d: %s='%s' is not an IPv4 HOST:PORT address\n",
		        rank, CM_ENV_CONTROL, text);
		_exit(1);
	}
	int fd = cm_tcp_connect(&addr, CONTROL_CONNECT_MS);
	if (fd < 0) {
		fprintf(
		    stderr,
		    "chanmem: rank %d: cannot reach cmrun at %s (%s): %s; a firewall between the "
		    "hosts? (docs/deployment.md)\n",
		    rank, CM_ENV_CONTROL, text, strerror(errno));
		_exit(1);
	}
	cm_set_cloexec(fd, 1);
	(void)cm_set_keepalive(fd, 10, 5, 3, CONTROL_USER_TIMEOUT_MS);
	char hello[CM_SECRET_LEN + 96];
	int n = snprintf(hello, sizeof hello, "%s\nhello %d %u %d\n", secret ? secret : "", rank,
	                 incarnation, replica);
	if (cm_write_full(fd, hello, (size_t)n) < 0) {
		fprintf(stderr, "chanmem: rank %d: control connection to %s: %s\n", rank, text,
		        strerror(errno));
		_exit(1);
	}
	/* The MPI_Abort report (mpi_init.c) finds its way through the same
	 * connection. */
	char fd_text[16];
	snprintf(fd_text, sizeof fd_text, "%d", fd);
	setenv(CM_ENV_CONTROL_FD, fd_text, 1);
	return fd;
}

void cm_heartbeat_start(int rank, unsigned incarnation, int replica)
{
	const char *control = getenv(CM_ENV_CONTROL);
	const char *fd_text = getenv(CM_ENV_CONTROL_FD);
	const char *ms_text = getenv(CM_ENV_HEARTBEAT_MS);
	long fd = -1, ms = 0;
	if (hb.running)
		return;
	hb.rank = rank;
	hb.tcp = control != NULL;
	if (hb.tcp && fd_text != NULL && cm_parse_long(fd_text, 0, INT_MAX, &fd) == 0) {
		/* Opened already, by a restore from an image (cm_control_restored). */
	} else if (hb.tcp) {
		fd = control_connect(control, rank, incarnation, replica);
	} else if (fd_text == NULL) {
		return;
	} else if (cm_parse_long(fd_text, 0, INT_MAX, &fd) < 0) {
		fprintf(stderr,
		        "chanmem: rank %d: ignoring %s='%s' (want a descriptor): no heartbeats\n",
		        rank, CM_ENV_CONTROL_FD, fd_text);
		return;
	}
	if (ms_text && cm_parse_long(ms_text, 1, CM_HEARTBEAT_MAX_MS, &ms) < 0) {
		fprintf(stderr,
		        "chanmem: rank %d: ignoring %s='%s' (want 1..%d ms): no heartbeats\n", rank,
		        CM_ENV_HEARTBEAT_MS, ms_text, CM_HEARTBEAT_MAX_MS);
		if (!hb.tcp)
			return;
		ms = 0;
	}
	hb.fd = (int)fd;
	hb.interval_ms = ms;
	hb.incarnation = incarnation;
	hb.replica = replica;
	snprintf(hb.beat, sizeof hb.beat, "heartbeat %d %u %d\n", rank, incarnation, replica);
	snprintf(hb.farewell, sizeof hb.farewell, "finalized %d %u %d\n", rank, incarnation,
	         replica);
	/* Said whether heartbeats are on or not: cmrun tells a rank that
	 * leaves without MPI_Finalize (the others would wait for it forever)
	 * from one that never used MPI, and reports where a restart began. */
	char init[96];
	snprintf(init, sizeof init, "init %d %u %d %s\n", rank, incarnation, replica,
	         restored ? "image" : "start");
	send_line_wait(init);
	install_crash_handlers();
	/* The first beat from MPI_Init itself: cmrun watches a rank from its
	 * first beat on, and a program that stops right after MPI_Init (before
	 * the thread ever ran) must be watched too. */
	if (ms > 0)
		send_line(hb.beat);
	if (ms == 0 && !hb.tcp)
		return; /* nothing to beat, no connection to watch */
	if (pipe2(hb.stop_pipe, O_CLOEXEC) < 0)
		return;
	/* The program's signals (SIGALRM, SIGUSR1, ...) go to its own threads,
	 * never to this one. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	hb.running = pthread_create(&hb.thread, NULL, heartbeat_main, NULL) == 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!hb.running) {
		close(hb.stop_pipe[0]);
		close(hb.stop_pipe[1]);
		hb.stop_pipe[0] = hb.stop_pipe[1] = -1;
	}
}

void cm_heartbeat_stop(void)
{
	if (hb.running) {
		ssize_t unused = write(hb.stop_pipe[1], "x", 1);
		(void)unused;
		pthread_join(hb.thread, NULL);
		close(hb.stop_pipe[0]);
		close(hb.stop_pipe[1]);
		hb.stop_pipe[0] = hb.stop_pipe[1] = -1;
		hb.running = false;
	}
	if (hb.fd >= 0 && !hb.farewell_said) {
		/* Waited for, not skipped: without it cmrun would take the exit
		 * that follows for a rank leaving without MPI_Finalize. */
		send_line_wait(hb.farewell);
		hb.farewell_said = true;
	}
}

void cm_control_restored(int rank, unsigned incarnation, int replica, unsigned long long image,
                         unsigned long long out, unsigned long long err)
{
	/* A remote rank restores before MPI_Init starts its heartbeats: its
	 * control connection is opened now (cm_heartbeat_start keeps it), so
	 * that cmrun hears of the filler before it arrives on the output. */
	const char *control = getenv(CM_ENV_CONTROL);
	if (hb.fd < 0 && control != NULL && getenv(CM_ENV_CONTROL_FD) == NULL)
		control_connect(control, rank, incarnation, replica);
	const char *fd_text = getenv(CM_ENV_CONTROL_FD);
	long fd;
	if (hb.fd < 0 && (fd_text == NULL || cm_parse_long(fd_text, 0, INT_MAX, &fd) < 0))
		return;
	char line[128];
	snprintf(line, sizeof line, "restored %d %u %d %llu %llu %llu\n", rank, incarnation,
	         replica, image, out, err);
	int saved = hb.fd;
	if (hb.fd < 0)
		hb.fd = (int)fd;
	send_line_wait(line);
	/* Over TCP the report and the filler travel apart (the filler through
	 * the launcher's output pipe): cmrun answers once it knows the filler,
	 * so the filler cannot reach it first. Bounded: a cmrun that is gone
	 * or silent only costs this wait. */
	if (control != NULL)
		await_line(hb.fd, CONTROL_ACK_MS);
	hb.fd = saved;
	restored = true;
}
