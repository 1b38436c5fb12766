/* Reports to the dispatcher (monitor.h). */
#include "config.h"

#include "monitor.h"

#include "core.h"
#include "log.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct cm_monitor {
	int fd;
	pthread_mutex_t mu; /* one writer at a time: lines never interleave */
	bool broken;        /* the dispatcher went away */
	struct cm_core *core;
	/* The stats thread: sleeps on cond until the next period or until
	 * detach sets stop. */
	pthread_cond_t cond;
	pthread_t stats_thread;
	bool stats_running;
	bool stop;
};

struct cm_monitor *cm_monitor_new(int fd)
{
	struct cm_monitor *m = calloc(1, sizeof *m);
	if (m == NULL)
		return NULL;
	m->fd = fd;
	pthread_mutex_init(&m->mu, NULL);
	pthread_condattr_t attr;
	pthread_condattr_init(&attr);
	/* Periods measured on the monotonic clock: a wall-clock step must not
	 * stall or flood the reports. */
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&m->cond, &attr);
	pthread_condattr_destroy(&attr);
	return m;
}

void cm_monitor_free(struct cm_monitor *m)
{
	if (m == NULL)
		return;
	pthread_cond_destroy(&m->cond);
	pthread_mutex_destroy(&m->mu);
	free(m);
}

/* Writes one whole line; mu held. */
static void write_line_locked(struct cm_monitor *m, const char *line, size_t len)
{
	size_t off = 0;
	while (!m->broken && off < len) {
		ssize_t w = write(m->fd, line + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			cm_info("report descriptor: %s; no more reports to the dispatcher",
			        w < 0 ? strerror(errno) : "closed");
			m->broken = true;
			break;
		}
		off += (size_t)w;
	}
}

/* "stats LOG_BYTES REPLAYED EVENTS". LOG_BYTES: payload bytes the logs hold
 * now (what --log-mem trimming and checkpoint garbage collection dropped is
 * gone). REPLAYED: DELIVERs re-sent to new incarnations. EVENTS: logged
 * events sent back to new incarnations (cmrun's fault report). */
static void report_stats_locked(struct cm_monitor *m)
{
	struct cm_core_stats st;
	cm_core_stats(m->core, &st);
	char line[128];
	int n = snprintf(
	    line, sizeof line, "stats %llu %llu %llu\n", (unsigned long long)st.log_bytes_held,
	    (unsigned long long)st.msgs_replayed, (unsigned long long)st.events_replayed);
	write_line_locked(m, line, (size_t)n);
}

static void *stats_main(void *arg)
{
	struct cm_monitor *m = arg;
	struct timespec next;
	clock_gettime(CLOCK_MONOTONIC, &next);
	pthread_mutex_lock(&m->mu);
	while (!m->stop && !m->broken) {
		next.tv_nsec += CM_MONITOR_STATS_PERIOD_MS * 1000000L;
		while (next.tv_nsec >= 1000000000L) {
			next.tv_nsec -= 1000000000L;
			next.tv_sec++;
		}
		while (!m->stop && pthread_cond_timedwait(&m->cond, &m->mu, &next) != ETIMEDOUT)
			;
		if (m->stop)
			break;
		report_stats_locked(m);
	}
	pthread_mutex_unlock(&m->mu);
	return NULL;
}

void cm_monitor_attach(struct cm_monitor *m, struct cm_core *core)
{
	pthread_mutex_lock(&m->mu);
	m->core = core;
	m->stop = false;
	pthread_mutex_unlock(&m->mu);
	/* No signal for this thread: SIGTERM/SIGINT belong to the engine's
	 * loop. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = pthread_create(&m->stats_thread, NULL, stats_main, m);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0)
		cm_info("no stats reports to the dispatcher: %s", strerror(rc));
	m->stats_running = rc == 0;
}

void cm_monitor_detach(struct cm_monitor *m)
{
	pthread_mutex_lock(&m->mu);
	m->stop = true;
	pthread_cond_signal(&m->cond);
	pthread_mutex_unlock(&m->mu);
	if (m->stats_running) {
		pthread_join(m->stats_thread, NULL);
		m->stats_running = false;
	}
	pthread_mutex_lock(&m->mu);
	/* The last numbers, so the dispatcher's final status line is exact. */
	if (m->core)
		report_stats_locked(m);
	m->core = NULL;
	pthread_mutex_unlock(&m->mu);
}

static void report_line(struct cm_monitor *m, const char *line, size_t len)
{
	pthread_mutex_lock(&m->mu);
	write_line_locked(m, line, len);
	pthread_mutex_unlock(&m->mu);
}

void cm_monitor_stopping(struct cm_monitor *m)
{
	static const char line[] = "stopping\n";
	if (m)
		report_line(m, line, sizeof line - 1);
}

void cm_monitor_taking_over(struct cm_monitor *m)
{
	static const char line[] = "takeover\n";
	if (m)
		report_line(m, line, sizeof line - 1);
}

void cm_monitor_rank_lost(void *ctx, int rank, uint32_t incarnation)
{
	struct cm_monitor *m = ctx;
	pthread_mutex_lock(&m->mu);
	bool attached = m->core != NULL;
	pthread_mutex_unlock(&m->mu);
	if (!attached)
		return; /* shutting down: connections end because we end them */
	char line[64];
	int n = snprintf(line, sizeof line, "lost %d %u\n", rank, (unsigned)incarnation);
	report_line(m, line, (size_t)n);
}
