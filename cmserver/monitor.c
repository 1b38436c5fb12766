/* Reports to the dispatcher (monitor.h). */
#include "config.h"

#include "monitor.h"

#include "log.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct cm_monitor {
	int fd;
	pthread_mutex_t mu; /* one writer at a time: lines never interleave */
	bool broken;        /* the dispatcher went away */
	struct cm_core *core;
};

struct cm_monitor *cm_monitor_new(int fd)
{
	struct cm_monitor *m = calloc(1, sizeof *m);
	if (m == NULL)
		return NULL;
	m->fd = fd;
	pthread_mutex_init(&m->mu, NULL);
	return m;
}

void cm_monitor_free(struct cm_monitor *m)
{
	if (m == NULL)
		return;
	pthread_mutex_destroy(&m->mu);
	free(m);
}

void cm_monitor_attach(struct cm_monitor *m, struct cm_core *core)
{
	pthread_mutex_lock(&m->mu);
	m->core = core;
	pthread_mutex_unlock(&m->mu);
}

void cm_monitor_detach(struct cm_monitor *m)
{
	pthread_mutex_lock(&m->mu);
	m->core = NULL;
	pthread_mutex_unlock(&m->mu);
}

static void report_line(struct cm_monitor *m, const char *line, size_t len)
{
	pthread_mutex_lock(&m->mu);
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
	pthread_mutex_unlock(&m->mu);
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
