#include <config.h>

#include "control.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ctrl_line.h"
#include "output.h"

/* The current incarnation of (rank, replica), or NULL for a stale report
 * (ctrl_line_parse already bounded both). */
static struct rank_proc *reporter(struct job *job, const struct ctrl_line *l)
{
	struct rank_proc *r = &job->ranks[l->rank * job->opts->replicas + l->replica];
	return r->state == PROC_RUNNING && r->incarnation == l->incarnation ? r : NULL;
}

void control_handle_line(struct job *job, const char *line)
{
	struct ctrl_line l;
	struct rank_proc *r;
	switch (ctrl_line_parse(line, job->opts->nranks, job->opts->replicas, &l)) {
	case CTRL_ABORT:
		job_rank_aborted(job, l.rank, l.code);
		return;
	case CTRL_HEARTBEAT:
	case CTRL_FINALIZED:
		/* detect.c checks the incarnation. */
		detect_heartbeat(job, l.rank, l.incarnation, l.replica, l.kind == CTRL_FINALIZED);
		return;
	case CTRL_INIT: /* client/heartbeat.h; ft.c */
		if ((r = reporter(job, &l)) != NULL)
			ft_rank_init(job, r, l.from_image);
		return;
	case CTRL_RESTORED:
		if ((r = reporter(job, &l)) != NULL)
			ft_rank_restored(job, r, l.image, l.out, l.err);
		return;
	case CTRL_CRASHED:
		if ((r = reporter(job, &l)) != NULL)
			ft_rank_crashed(job, r, l.sig, (unsigned long)l.progress);
		return;
	case CTRL_HELLO: /* only the first line of a control connection */
	case CTRL_BAD:
		break;
	}
	output_verbose("ignoring control report '%.64s'", line);
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
