/* Heartbeat thread (heartbeat.h). */
#include "config.h"

#include "heartbeat.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "jobenv.h"
#include "units.h"

static struct {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	pthread_t thread;
	bool running;
	bool stop;
	int fd;
	long interval_ms;
	char beat[80];     /* "heartbeat R I K\n" */
	char farewell[80]; /* "finalized R I K\n" */
} hb = {.mu = PTHREAD_MUTEX_INITIALIZER, .fd = -1};

/* One line, never blocking: the pipe is shared by every rank and by the
 * MPI_Abort report, so its descriptor stays blocking; poll says whether a
 * small write fits now. A full pipe (cmrun not reading for a while) skips
 * this beat rather than stalling the thread. */
static void send_line(const char *line)
{
	struct pollfd p = {.fd = hb.fd, .events = POLLOUT};
	if (poll(&p, 1, 0) != 1 || !(p.revents & POLLOUT))
		return;
	ssize_t unused = write(hb.fd, line, strlen(line));
	(void)unused;
}

static void add_ms(struct timespec *t, long ms)
{
	t->tv_sec += ms / 1000;
	t->tv_nsec += (ms % 1000) * 1000000L;
	if (t->tv_nsec >= 1000000000L) {
		t->tv_nsec -= 1000000000L;
		t->tv_sec++;
	}
}

static void *heartbeat_main(void *arg)
{
	(void)arg;
	struct timespec next;
	clock_gettime(CLOCK_MONOTONIC, &next);
	pthread_mutex_lock(&hb.mu);
	while (!hb.stop) {
		send_line(hb.beat);
		add_ms(&next, hb.interval_ms);
		while (!hb.stop && pthread_cond_timedwait(&hb.cond, &hb.mu, &next) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&hb.mu);
	return NULL;
}

void cm_heartbeat_start(int rank, unsigned incarnation, int replica)
{
	const char *fd_text = getenv(CM_ENV_CONTROL_FD);
	const char *ms_text = getenv(CM_ENV_HEARTBEAT_MS);
	long fd, ms;
	if (hb.running || fd_text == NULL || ms_text == NULL)
		return;
	if (cm_parse_long(fd_text, 0, INT_MAX, &fd) < 0 ||
	    cm_parse_long(ms_text, 1, CM_HEARTBEAT_MAX_MS, &ms) < 0) {
		fprintf(stderr,
		        "chanmem: rank %d: ignoring %s='%s' / %s='%s' (want a descriptor and "
		        "1..%d ms): no heartbeats\n",
		        rank, CM_ENV_CONTROL_FD, fd_text, CM_ENV_HEARTBEAT_MS, ms_text,
		        CM_HEARTBEAT_MAX_MS);
		return;
	}
	hb.fd = (int)fd;
	hb.interval_ms = ms;
	hb.stop = false;
	snprintf(hb.beat, sizeof hb.beat, "heartbeat %d %u %d\n", rank, incarnation, replica);
	snprintf(hb.farewell, sizeof hb.farewell, "finalized %d %u %d\n", rank, incarnation,
	         replica);
	/* The first beat from MPI_Init itself: cmrun watches a rank from its
	 * first beat on, and a program that stops right after MPI_Init (before
	 * the thread ever ran) must be watched too. */
	send_line(hb.beat);
	pthread_condattr_t attr;
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&hb.cond, &attr);
	pthread_condattr_destroy(&attr);
	/* The program's signals (SIGALRM, SIGUSR1, ...) go to its own threads,
	 * never to this one. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	hb.running = pthread_create(&hb.thread, NULL, heartbeat_main, NULL) == 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!hb.running)
		pthread_cond_destroy(&hb.cond);
}

void cm_heartbeat_stop(void)
{
	if (!hb.running)
		return;
	pthread_mutex_lock(&hb.mu);
	hb.stop = true;
	pthread_cond_signal(&hb.cond);
	pthread_mutex_unlock(&hb.mu);
	pthread_join(hb.thread, NULL);
	pthread_cond_destroy(&hb.cond);
	hb.running = false;
	send_line(hb.farewell);
}
