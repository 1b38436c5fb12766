#include <config.h>

#include "control.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "output.h"

/* The current incarnation of (rank, replica), or NULL for a stale or
 * malformed report. */
static struct rank_proc *reporter(struct job *job, int rank, unsigned incarnation, int replica)
{
	const struct cmrun_options *o = job->opts;
	if (rank < 0 || rank >= o->nranks || replica < 0 || replica >= o->replicas)
		return NULL;
	struct rank_proc *r = &job->ranks[rank * o->replicas + replica];
	return r->state == PROC_RUNNING && r->incarnation == incarnation ? r : NULL;
}

/* client/heartbeat.h: "init", "restored", "crashed" (ft.c). */
static bool failure_line(struct job *job, const char *line)
{
	int rank, replica, sig;
	unsigned incarnation;
	unsigned long progress;
	unsigned long long image, out, err;
	char from[8], extra;
	struct rank_proc *r;
	if (strchr(line, '-') != NULL)
		return false;
	if (sscanf(line, "init %d %u %d %7s %c", &rank, &incarnation, &replica, from, &extra) ==
	        4 &&
	    (strcmp(from, "start") == 0 || strcmp(from, "image") == 0)) {
		if ((r = reporter(job, rank, incarnation, replica)) != NULL)
			ft_rank_init(job, r, strcmp(from, "image") == 0);
		return true;
	}
	if (sscanf(line, "restored %d %u %d %llu %llu %llu %c", &rank, &incarnation, &replica,
	           &image, &out, &err, &extra) == 6) {
		if ((r = reporter(job, rank, incarnation, replica)) != NULL)
			ft_rank_restored(job, r, image, out, err);
		return true;
	}
	if (sscanf(line, "crashed %d %u %d %d %lu %c", &rank, &incarnation, &replica, &sig,
	           &progress, &extra) == 5) {
		if ((r = reporter(job, rank, incarnation, replica)) != NULL)
			ft_rank_crashed(job, r, sig, progress);
		return true;
	}
	return false;
}

void control_handle_line(struct job *job, const char *line)
{
	int rank, code, replica;
	unsigned incarnation;
	char extra;
	if (sscanf(line, "abort %d %d %c", &rank, &code, &extra) == 2 && rank >= 0 &&
	    rank < job->opts->nranks) {
		job_rank_aborted(job, rank, code);
		return;
	}
	/* client/heartbeat.c; detect.c checks the numbers. */
	bool beat = strncmp(line, "heartbeat ", 10) == 0;
	if ((beat || strncmp(line, "finalized ", 10) == 0) && strchr(line, '-') == NULL &&
	    sscanf(line + 10, "%d %u %d %c", &rank, &incarnation, &replica, &extra) == 3) {
		detect_heartbeat(job, rank, incarnation, replica, !beat);
		return;
	}
	if (failure_line(job, line))
		return;
	output_verbose("ignoring control report '%s'", line);
}

void control_drain(struct job *job)
{
	if (job->control_rd < 0)
		return;
	for (;;) {
		size_t room = sizeof job->control_buf - 1 - job->control_len;
		ssize_t n = read(job->control_rd, job->control_buf + job->control_len, room);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return; /* EAGAIN: nothing queued; EOF cannot happen, cmrun holds a writer
			         */
		job->control_len += (size_t)n;
		job->control_buf[job->control_len] = '\0';
		char *start = job->control_buf, *nl;
		while ((nl = strchr(start, '\n')) != NULL) {
			*nl = '\0';
			control_handle_line(job, start);
			start = nl + 1;
		}
		job->control_len -= (size_t)(start - job->control_buf);
		memmove(job->control_buf, start, job->control_len);
		if (job->control_len == sizeof job->control_buf - 1)
			job->control_len = 0; /* a line longer than any report: drop it */
	}
}

static void on_control(struct ev_loop *loop, ev_io *w, int revents)
{
	control_drain(w->data);
}

int control_open(struct job *job)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0) {
		output_message("error: control pipe: %s", strerror(errno));
		return -1;
	}
	fcntl(p[0], F_SETFL, O_NONBLOCK);
	job->control_rd = p[0];
	job->control_wr = p[1];
	job->control_len = 0;
	ev_io_init(&job->control_io, on_control, p[0], EV_READ);
	job->control_io.data = job;
	ev_io_start(job->loop, &job->control_io);
	return 0;
}

int control_rank_fd(const struct job *job)
{
	return job->control_wr;
}

void control_close(struct job *job)
{
	if (job->control_rd >= 0) {
		ev_io_stop(job->loop, &job->control_io);
		close(job->control_rd);
		job->control_rd = -1;
	}
	if (job->control_wr >= 0) {
		close(job->control_wr);
		job->control_wr = -1;
	}
}
