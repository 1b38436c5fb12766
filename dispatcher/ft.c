/* Fault tolerance in cmrun: restarting ranks killed by a signal, fault
 * injection (--kill-every, --kill-at) and the --status line.
 *
 * Only transport cm restarts ranks: the channel memories hold every message
 * a rank received, so a new incarnation re-executes from the start and gets
 * the same messages again (docs/fault-tolerance.md). A rank that exits on
 * its own with a non-zero status, or calls MPI_Abort, meant to stop the job:
 * it is not restarted. */
#include <config.h>

#include "job.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "output.h"
#include "spawn.h"

#define STATUS_PERIOD 0.5

/* xorshift64*: reproducible for one --seed on every platform. */
static uint64_t next_random(struct job *job)
{
	uint64_t x = job->rng;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	job->rng = x;
	return x * 0x2545F4914F6CDD1Dull;
}

/* "1.5MiB": the status line's byte counts. */
static void format_bytes(unsigned long long n, char *buf, size_t len)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	double v = (double)n;
	size_t u = 0;
	while (v >= 1024 && u + 1 < sizeof units / sizeof units[0]) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%lluB", n);
	else
		snprintf(buf, len, "%.1f%s", v, units[u]);
}

/* Log bytes held per CM: every CM up to a few, else the total. */
static void format_logs(const struct job *job, char *buf, size_t len)
{
	enum { SHOWN_MAX = 4 };
	size_t off = 0;
	char one[32];
	if (job->ncms == 0) {
		snprintf(buf, len, "no CM");
		return;
	}
	if (job->ncms > SHOWN_MAX) {
		unsigned long long total = 0;
		for (int i = 0; i < job->ncms; i++)
			total += job->cms[i].log_bytes;
		format_bytes(total, one, sizeof one);
		snprintf(buf, len, "log %s over %d CMs", one, job->ncms);
		return;
	}
	off += (size_t)snprintf(buf, len, "log");
	for (int i = 0; i < job->ncms && off < len; i++) {
		format_bytes(job->cms[i].log_bytes, one, sizeof one);
		off += (size_t)snprintf(buf + off, len - off, "%s%s", i ? " | " : " ", one);
	}
}

static void show_status(struct job *job, bool final)
{
	char line[320], logs[160];
	format_logs(job, logs, sizeof logs);
	snprintf(line, sizeof line,
	         "cmrun: ranks running %d/%d, restarts %d, %s, replayed %llu, injected kills %d",
	         job->ranks_running, job->nprocs, job->restarts_total, logs, detect_replayed(job),
	         job->kills_done);
	output_status(line, final);
	job->status_shown = !final;
}

static void on_status(struct ev_loop *loop, ev_timer *w, int revents)
{
	show_status(w->data, false);
}

static bool kill_rank(struct job *job, struct rank_proc *r, int sig, const char *why)
{
	char name[32];
	signal_name(sig, name, sizeof name);
	if (r->state != PROC_RUNNING || r->pid <= 0)
		return false;
	/* By pid, a process cmrun started and has not reaped: it cannot be
	 * someone else's. A remote rank's launcher: its whole group (the
	 * launcher may have forked; the group id is its unreaped pid). */
	if (kill(r->remote ? -r->pid : r->pid, sig) < 0)
		return false;
	job->kills_done++;
	output_verbose("%s: %s to rank %d (pid %d, incarnation %u)", why, name, r->rank,
	               (int)r->pid, r->incarnation);
	return true;
}

static void on_kill_host(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct job *job = w->data;
	const struct cmrun_options *o = job->opts;
	if (job->phase != PHASE_RUN)
		return;
	/* Every rank of the host in one go, as when a machine goes down: the
	 * restarts overlap, and each replays from its home CM. (A remote
	 * rank's launcher: killing it ends the control connection, which makes
	 * the rank exit if the launcher does not take it along.) */
	int killed = 0;
	for (int i = 0; i < job->nprocs; i++)
		if (job->ranks[i].host_index == o->kill_host &&
		    kill_rank(job, &job->ranks[i], SIGKILL, "--kill-host"))
			killed++;
	output_verbose("--kill-host: host %s, %d rank%s killed", o->hosts.list[o->kill_host].name,
	               killed, killed == 1 ? "" : "s");
	/* A remote job moves the host's ranks away, as after a node crash. */
	remote_host_killed(job, o->kill_host);
}

static void on_kill_every(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct job *job = w->data;
	const struct cmrun_options *o = job->opts;
	if (job->phase != PHASE_RUN || job->kills_done >= o->kill_count) {
		ev_timer_stop(loop, w);
		return;
	}
	struct rank_proc *target = NULL;
	if (o->kill_rank >= 0) {
		target = &job->ranks[o->kill_rank];
	} else {
		/* A random running rank that still has a restart left, so that
		 * random kills test recovery rather than the restart limit. */
		int candidates = 0;
		for (int i = 0; i < job->nprocs; i++)
			if (job->ranks[i].state == PROC_RUNNING &&
			    job->ranks[i].restarts < o->max_restarts)
				candidates++;
		if (candidates > 0) {
			int pick = (int)(next_random(job) % (uint64_t)candidates);
			for (int i = 0; i < job->nprocs && target == NULL; i++)
				if (job->ranks[i].state == PROC_RUNNING &&
				    job->ranks[i].restarts < o->max_restarts && pick-- == 0)
					target = &job->ranks[i];
		}
	}
	if (target)
		kill_rank(job, target, o->kill_signal, "--kill-every");
	if (job->kills_done >= o->kill_count)
		ev_timer_stop(loop, w);
}

static void on_kill_at(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct job *job = w->data;
	if (job->phase == PHASE_RUN) {
		const struct cmrun_options *o = job->opts;
		/* Replicated: one replica of the rank (default the last). */
		int k = o->kill_replica >= 0 ? o->kill_replica : o->replicas - 1;
		kill_rank(job, &job->ranks[o->kill_at_rank * o->replicas + k], SIGKILL,
		          "--kill-at");
	}
}

void ft_start(struct job *job)
{
	const struct cmrun_options *o = job->opts;
	uint64_t seed = o->have_seed ? o->seed : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
	job->rng = seed ? seed : 0x9E3779B97F4A7C15ull;
	/* Mix so that small seeds (1, 2, 3) give unrelated sequences. */
	for (int i = 0; i < 4; i++)
		next_random(job);
	if (o->kill_every_ns) {
		double t = (double)o->kill_every_ns / 1e9;
		output_verbose("fault injection: every %.3f s, %d kills at most, seed %llu", t,
		               o->kill_count, (unsigned long long)seed);
		ev_timer_init(&job->kill_timer, on_kill_every, t, t);
		job->kill_timer.data = job;
		ev_timer_start(job->loop, &job->kill_timer);
	}
	if (o->kill_at_rank >= 0) {
		ev_timer_init(&job->kill_at_timer, on_kill_at, (double)o->kill_at_ns / 1e9, 0.);
		job->kill_at_timer.data = job;
		ev_timer_start(job->loop, &job->kill_at_timer);
	}
	if (o->kill_host >= 0) {
		ev_timer_init(&job->kill_host_timer, on_kill_host, (double)o->kill_host_ns / 1e9,
		              0.);
		job->kill_host_timer.data = job;
		ev_timer_start(job->loop, &job->kill_host_timer);
	}
	detect_start(job);
	/* On a terminal by default; never when asked not to. */
	job->status_on = !o->no_status && (o->status || isatty(STDERR_FILENO));
	if (job->status_on) {
		ev_timer_init(&job->status_timer, on_status, STATUS_PERIOD, STATUS_PERIOD);
		job->status_timer.data = job;
		ev_timer_start(job->loop, &job->status_timer);
	}
}

void ft_stop(struct job *job)
{
	const struct cmrun_options *o = job->opts;
	if (o->kill_every_ns)
		ev_timer_stop(job->loop, &job->kill_timer);
	if (o->kill_at_rank >= 0)
		ev_timer_stop(job->loop, &job->kill_at_timer);
	if (o->kill_host >= 0)
		ev_timer_stop(job->loop, &job->kill_host_timer);
	detect_stop(job);
	if (job->status_on)
		ev_timer_stop(job->loop, &job->status_timer);
}

void ft_final_status(struct job *job)
{
	/* After the CMs' last counters came (they report once more as they
	 * stop), and after the ranks' output. */
	if (job->status_on)
		show_status(job, true);
}

bool ft_rank_failed(struct job *job, struct rank_proc *r, int wait_status)
{
	const struct cmrun_options *o = job->opts;
	/* Killed by a signal, or declared failed by detection (detect.c) and
	 * killed, whatever status it managed to exit with first. */
	if (o->transport != CMRUN_TRANSPORT_CM ||
	    (!WIFSIGNALED(wait_status) && !r->declared_failed))
		return false;
	char how[160];
	describe_wait_status(wait_status, how, sizeof how);
	if (r->declared_failed) {
		size_t l = strlen(how);
		snprintf(how + l, sizeof how - l, " (declared failed: %s)", r->failed_why);
	}
	if (r->restarts >= o->max_restarts) {
		output_message("rank %d %s; not restarted: it reached --max-restarts %d", r->rank,
		               how, o->max_restarts);
		r->stop_reported = true;
		return false;
	}
	/* What the dead incarnation printed is out (or lost with it): the new
	 * one's first bytes up to the furthest any incarnation got are
	 * repeats. */
	unsigned long long out_pos = output_source_position(r->out);
	unsigned long long err_pos = output_source_position(r->err);
	if (out_pos > r->out_seen)
		r->out_seen = out_pos;
	if (err_pos > r->err_seen)
		r->err_seen = err_pos;
	r->restarts++;
	r->incarnation++;
	job->restarts_total++;
	output_verbose("rank %d (pid %d) %s: restarting it as incarnation %u (restart %d of %d)",
	               r->rank, (int)r->pid, how, r->incarnation, r->restarts, o->max_restarts);
	if (r->remote)
		return remote_restart_later(job, r); /* where depends on its host's fate */
	if (spawn_rank(job, r) < 0) {
		output_message("rank %d %s, and restarting it failed", r->rank, how);
		return false;
	}
	output_source_skip(r->out, r->out_seen);
	output_source_skip(r->err, r->err_seen);
	return true;
}

void ft_respawn(struct job *job, struct rank_proc *r)
{
	if (spawn_rank(job, r) < 0) {
		output_message("rank %d: restarting it failed", r->rank);
		r->stop_reported = true;
		job_stop(job, CMRUN_EXIT_FAILURE);
		return;
	}
	output_source_skip(r->out, r->out_seen);
	output_source_skip(r->err, r->err_seen);
}
