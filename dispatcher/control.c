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

/* A heartbeat (or, finished, the last word of a finalized rank): what
 * detect.c's heartbeat check reads. */
static void heartbeat(struct job *job, int rank, unsigned incarnation, int replica, bool finished)
{
	const struct cmrun_options *o = job->opts;
	if (rank < 0 || rank >= o->nranks || replica < 0 || replica >= o->replicas)
		return;
	struct rank_proc *r = &job->ranks[rank * o->replicas + replica];
	if (r->state != PROC_RUNNING || r->incarnation != incarnation)
		return; /* a dead incarnation's last beat */
	r->hb_watched = true;
	r->hb_finished = r->hb_finished || finished;
	r->hb_last = ev_now(job->loop);
}

/* ---- what a rank reports about itself ----
 * Its incarnation is in MPI_Init (from the start or from a checkpoint
 * image: the fault report's restart counts and times down); it is about to
 * write filler for what it printed before its image; it dies of sig at
 * progress (MPI requests made: ft.c compares it with the previous
 * incarnation's). */

static void rank_init(struct job *job, struct rank_proc *r, bool from_image)
{
	r->mpi_started = true;
	r->from_image = r->from_image || from_image;
	if (r->incarnation == 0 || r->died_at == 0)
		return;
	if (r->from_image)
		r->restarts_from_image++;
	else
		r->restarts_from_start++;
	double down = ev_now(job->loop) - r->died_at;
	r->died_at = 0;
	r->down_total += down;
	r->down_count++;
	if (down > r->down_max)
		r->down_max = down;
	char start[64];
	describe_start(r->from_image, r->image, start, sizeof start);
	output_verbose("rank %d incarnation %u %s: in MPI_Init %.3f s after its failure", r->rank,
	               r->incarnation, start, down);
}

static void rank_restored(struct job *job, struct rank_proc *r, unsigned long long image,
                          unsigned long long out, unsigned long long err)
{
	r->from_image = true;
	r->image = image;
	output_source_filler(r->out, out);
	output_source_filler(r->err, err);
}

static void rank_crashed(struct job *job, struct rank_proc *r, int sig, unsigned long progress)
{
	r->crashed = true;
	r->crash_sig = sig;
	r->crash_progress = progress;
}

bool control_handle_line(struct job *job, const char *line)
{
	struct ctrl_line l;
	struct rank_proc *r;
	switch (ctrl_line_parse(line, job->opts->nranks, job->opts->replicas, &l)) {
	case CTRL_ABORT:
		output_verbose("rank %d called MPI_Abort(%d)", l.rank, l.code);
		job->events.stop(job, l.code);
		return false;
	case CTRL_HEARTBEAT:
	case CTRL_FINALIZED:
		/* heartbeat() checks the incarnation. */
		heartbeat(job, l.rank, l.incarnation, l.replica, l.kind == CTRL_FINALIZED);
		return false;
	case CTRL_INIT: /* client/heartbeat.h */
		if ((r = reporter(job, &l)) != NULL)
			rank_init(job, r, l.from_image);
		return false;
	case CTRL_RESTORED:
		if ((r = reporter(job, &l)) != NULL)
			rank_restored(job, r, l.image, l.out, l.err);
		return true;
	case CTRL_CRASHED:
		if ((r = reporter(job, &l)) != NULL)
			rank_crashed(job, r, l.sig, (unsigned long)l.progress);
		return false;
	case CTRL_HELLO: /* only the first line of a control connection */
	case CTRL_BAD:
		break;
	}
	output_verbose("ignoring control report '%.64s'", line);
	return false;
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
