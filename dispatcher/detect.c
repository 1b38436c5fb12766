/* Failure detection in cmrun (docs/fault-tolerance.md, "Detection"), on top
 * of waitpid (job.c):
 *
 *  - a channel memory reports "lost RANK INCARNATION" on its --report-fd
 *    pipe when a rank's connection ends without BYE. For the rank's current
 *    incarnation, if the process is still alive CMRUN_LOST_CONFIRM later
 *    (a rank exiting on its own is reaped by then), it is declared failed:
 *    cut off from its CM, it could never finish. Stale reports (an older
 *    incarnation, the connection of a killed one closing) are ignored.
 *  - every rank's library sends heartbeats over the control pipe
 *    (client/heartbeat.c) between MPI_Init and MPI_Finalize; a rank whose
 *    heartbeats stop for --heartbeat-timeout (stopped, hung in the kernel,
 *    starved) is declared failed. Watching starts at its first heartbeat,
 *    so a program that is slow to call MPI_Init is not killed for it.
 *
 * A declared failure is a SIGKILL by pid; its exit is then handled like any
 * rank killed by a signal (ft.c: one restart, --max-restarts counted),
 * whatever status it ends with and however many detectors noticed. The
 * same report pipe carries "stats LOG_BYTES REPLAYED EVENTS" for the status
 * line and the fault report. */
#include <config.h>

#include "job.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "control.h"
#include "detect.h"
#include "output.h"
#include "remote.h"

/* ---- declaring a rank failed ---- */

void detect_declare_failed(struct job *job, struct rank_proc *r, const char *why)
{
	if (r->state != PROC_RUNNING || r->declared_failed || job->phase != PHASE_RUN)
		return;
	r->declared_failed = true;
	snprintf(r->failed_why, sizeof r->failed_why, "%s", why);
	if (job->opts->replicas > 1)
		output_verbose("rank %d replica %d (pid %d) declared failed: %s; killing it",
		               r->rank, r->replica, (int)r->pid, why);
	else
		output_verbose("rank %d (pid %d, incarnation %u) declared failed: %s; killing it",
		               r->rank, (int)r->pid, r->incarnation, why);
	/* By pid, a child cmrun has not reaped: it cannot be someone else's.
	 * SIGKILL also ends a stopped process. A remote rank's pid is its
	 * launcher's (or the rank itself, through ip netns exec), its group
	 * holds what the launcher started here: closing its
	 * control connection makes a rank that is cut off exit once it hears
	 * of it, so it cannot come back as a stale incarnation. */
	kill(r->remote ? -r->pid : r->pid, SIGKILL);
	remote_detach(job, r);
}

/* ---- lost connections ---- */

/* Alive: not a zombie, and not on its way out (PF_EXITING, set before the
 * kernel closes its sockets). /proc/PID/stat: "pid (comm) S ppid pgrp
 * session tty tpgid flags ...". Unknown (no /proc): alive. */
bool detect_process_alive(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno != ENOENT;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return true;
	buf[n] = '\0';
	char *p = strrchr(buf, ')');
	char state;
	unsigned long flags;
	if (p == NULL || sscanf(p + 1, " %c %*d %*d %*d %*d %*d %lu", &state, &flags) != 2)
		return true;
	return state != 'Z' && state != 'X' && !(flags & 0x4 /* PF_EXITING */);
}

static void on_lost_confirm(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct rank_proc *r = w->data;
	struct job *job = ev_userdata(loop);
	if (r->state != PROC_RUNNING || r->incarnation != r->lost_incarnation)
		return;
	control_drain(job); /* an MPI_Abort report decides first */
	if (r->state != PROC_RUNNING || !detect_process_alive(r->pid))
		return; /* exiting: its exit status tells what happened */
	char why[96];
	if (r->lost_cm < 0)
		snprintf(why, sizeof why, "its control connection ended without MPI_Finalize");
	else
		snprintf(why, sizeof why,
		         "its connection to cmserver %d ended without MPI_Finalize", r->lost_cm);
	detect_declare_failed(job, r, why);
}

void detect_confirm_lost(struct job *job, struct rank_proc *r)
{
	ev_timer_init(&r->lost_timer, on_lost_confirm, CMRUN_LOST_CONFIRM, 0.);
	r->lost_timer.data = r;
	ev_timer_start(job->loop, &r->lost_timer);
}

static void lost_report(struct job *job, struct cm_proc *cm, int rank, unsigned incarnation)
{
	/* CMs serve transport cm only: one process per rank. */
	struct rank_proc *r = &job->ranks[rank];
	if (incarnation != r->incarnation || r->state != PROC_RUNNING) {
		output_verbose("cmserver %d: rank %d incarnation %u lost (stale: current is %u%s)",
		               cm->index, rank, incarnation, r->incarnation,
		               r->state == PROC_RUNNING ? "" : ", not running");
		return;
	}
	if (r->declared_failed || ev_is_active(&r->lost_timer) || job->phase != PHASE_RUN)
		return;
	if (job->opts->cm_restart) {
		/* It reconnects on its own (CHANMEM_CM_RECONNECT), and exits
		 * with an error if it cannot: not a failure to act on. */
		output_verbose("cmserver %d: rank %d incarnation %u lost its connection (it "
		               "reconnects: --cm-restart)",
		               cm->index, rank, incarnation);
		return;
	}
	output_verbose("cmserver %d: rank %d incarnation %u lost its connection", cm->index, rank,
	               incarnation);
	r->lost_incarnation = incarnation;
	r->lost_cm = cm->index;
	detect_confirm_lost(job, r);
}

static void report_line(struct job *job, struct cm_proc *cm, const char *line)
{
	int rank;
	unsigned incarnation;
	unsigned long long bytes, replayed;
	char extra;
	if (sscanf(line, "lost %d %u %c", &rank, &incarnation, &extra) == 2 && rank >= 0 &&
	    rank < job->opts->nranks && strchr(line, '-') == NULL) {
		lost_report(job, cm, rank, incarnation);
		return;
	}
	/* A remote CM's first line on its stdout (spawn.c). */
	static const char listening[] = "cmserver: listening on ";
	if (cm->remote && strncmp(line, listening, sizeof listening - 1) == 0) {
		job->events.cm_ready(job, cm, line + sizeof listening - 1);
		return;
	}
	if (strcmp(line, "takeover") == 0 && cm->is_standby) {
		job->events.cm_took_over(job, cm);
		return;
	}
	if (strcmp(line, "stopping") == 0) {
		cm->stopping = true;
		return;
	}
	/* A third number (events replayed) came later: both forms are read. */
	unsigned long long events = 0;
	int n = sscanf(line, "stats %llu %llu %llu %c", &bytes, &replayed, &events, &extra);
	if ((n == 2 || n == 3) && strchr(line, '-') == NULL) {
		cm->log_bytes = bytes;
		cm->replayed = replayed;
		cm->events_replayed = events;
		return;
	}
	output_verbose("cmserver %d: ignoring report '%s'", cm->index, line);
}

/* Reads what the pipe holds; closes it at EOF. */
static void read_reports(struct job *job, struct cm_proc *cm)
{
	while (cm->report_fd >= 0) {
		size_t room = sizeof cm->report_buf - 1 - cm->report_len;
		ssize_t n = read(cm->report_fd, cm->report_buf + cm->report_len, room);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0) {
			ev_io_stop(job->loop, &cm->report_io);
			close(cm->report_fd);
			cm->report_fd = -1;
			/* Only its exit closes it: a CM dying during the run. */
			if (cm->state == PROC_RUNNING && job->phase == PHASE_RUN)
				job->events.cm_gone(job, cm);
			return;
		}
		cm->report_len += (size_t)n;
		cm->report_buf[cm->report_len] = '\0';
		char *start = cm->report_buf, *nl;
		while ((nl = strchr(start, '\n')) != NULL) {
			*nl = '\0';
			report_line(job, cm, start);
			start = nl + 1;
		}
		cm->report_len -= (size_t)(start - cm->report_buf);
		memmove(cm->report_buf, start, cm->report_len);
		if (cm->report_len == sizeof cm->report_buf - 1)
			cm->report_len = 0; /* longer than any report: drop it */
	}
}

static void on_report(struct ev_loop *loop, ev_io *w, int revents)
{
	read_reports(ev_userdata(loop), w->data);
}

/* A local CM's --ready-fd pipe: its address, one line. */
static void on_cm_ready(struct ev_loop *loop, ev_io *w, int revents)
{
	struct cm_proc *cm = w->data;
	struct job *job = ev_userdata(loop);
	ssize_t n = read(cm->ready_fd, cm->ready_buf + cm->ready_len,
	                 sizeof cm->ready_buf - 1 - cm->ready_len);
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		/* Closed without an address: its exit (reported on its own) or
		 * the start-up bound decides what happens next. */
		ev_io_stop(loop, w);
		close(cm->ready_fd);
		cm->ready_fd = -1;
		return;
	}
	cm->ready_len += (size_t)n;
	cm->ready_buf[cm->ready_len] = '\0';
	char *nl = strchr(cm->ready_buf, '\n');
	if (nl == NULL) {
		if (cm->ready_len == sizeof cm->ready_buf - 1) {
			output_message(
			    "error: cmserver %d wrote a malformed address on its ready pipe",
			    cm->index);
			ev_io_stop(loop, w);
			job->events.stop(job, CMRUN_EXIT_FAILURE);
		}
		return;
	}
	*nl = '\0';
	ev_io_stop(loop, w);
	close(cm->ready_fd);
	cm->ready_fd = -1;
	job->events.cm_ready(job, cm, cm->ready_buf);
}

void detect_cm_spawned(struct job *job, struct cm_proc *cm)
{
	if (cm->report_fd >= 0) {
		ev_io_init(&cm->report_io, on_report, cm->report_fd, EV_READ);
		cm->report_io.data = cm;
		/* Before the ranks' output in the same loop iteration: a CM's
		 * death is named before the errors of the ranks it cut off. */
		ev_set_priority(&cm->report_io, EV_MAXPRI);
		ev_io_start(job->loop, &cm->report_io);
	}
	if (cm->ready_fd < 0)
		return; /* remote: the address comes with its reports */
	ev_io_init(&cm->ready_io, on_cm_ready, cm->ready_fd, EV_READ);
	cm->ready_io.data = cm;
	ev_io_start(job->loop, &cm->ready_io);
}

void detect_cm_exited(struct job *job, struct cm_proc *cm)
{
	/* Its last stats line is in the pipe; nobody else holds the write end,
	 * so this ends at EOF. */
	read_reports(job, cm);
	if (cm->report_fd >= 0) {
		ev_io_stop(job->loop, &cm->report_io);
		close(cm->report_fd);
		cm->report_fd = -1;
	}
}

unsigned long long detect_events_replayed(const struct job *job)
{
	unsigned long long sum = 0;
	for (int i = 0; i < job->ncms; i++)
		sum += job->cms[i].events_replayed + job->cms[i].events_replayed_before;
	return sum;
}

unsigned long long detect_replayed(const struct job *job)
{
	unsigned long long sum = 0;
	for (int i = 0; i < job->ncms; i++)
		sum += job->cms[i].replayed + job->cms[i].replayed_before;
	return sum;
}

/* ---- heartbeats ---- */

static void on_heartbeat_check(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct job *job = w->data;
	if (job->phase != PHASE_RUN)
		return;
	/* Beats already written count: an event loop that was busy must not
	 * make ranks look silent. */
	control_drain(job);
	ev_now_update(loop);
	ev_tstamp now = ev_now(loop);
	double timeout = (double)job->opts->heartbeat_timeout_ns / 1e9;
	for (int i = 0; i < job->nprocs && job->phase == PHASE_RUN; i++) {
		struct rank_proc *r = &job->ranks[i];
		if (r->state != PROC_RUNNING || !r->hb_watched || r->hb_finished ||
		    r->declared_failed || now - r->hb_last <= timeout)
			continue;
		char why[96];
		snprintf(why, sizeof why, "no heartbeat for %s", job->opts->heartbeat_timeout_text);
		detect_declare_failed(job, r, why);
	}
}

void detect_start(struct job *job)
{
	uint64_t t = job->opts->heartbeat_timeout_ns;
	if (t == 0)
		return;
	/* A quarter of the timeout: a silent rank is noticed at most 1.25 T
	 * after its last beat; at most once a second. */
	double period = (double)t / 4e9;
	if (period > 1.0)
		period = 1.0;
	ev_timer_init(&job->heartbeat_timer, on_heartbeat_check, period, period);
	job->heartbeat_timer.data = job;
	ev_timer_start(job->loop, &job->heartbeat_timer);
}

void detect_stop(struct job *job)
{
	if (job->opts->heartbeat_timeout_ns)
		ev_timer_stop(job->loop, &job->heartbeat_timer);
	for (int i = 0; i < job->nprocs; i++)
		if (ev_is_active(&job->ranks[i].lost_timer))
			ev_timer_stop(job->loop, &job->ranks[i].lost_timer);
}
