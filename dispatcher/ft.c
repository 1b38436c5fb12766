/* Fault tolerance in cmrun: restarting ranks killed by a signal, fault
 * injection (--kill-every, --kill-at) and the --status line.
 *
 * Remote ranks whose host may be dead are restarted once that is known
 * (node failure, below).
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

#include "cm_restart.h"
#include "detect.h"
#include "ft.h"
#include "launch.h"
#include "output.h"
#include "spawn.h"

#define STATUS_PERIOD 0.5

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
	char line[352], logs[160];
	format_logs(job, logs, sizeof logs);
	snprintf(line, sizeof line,
	         "cmrun: ranks running %d/%d, restarts %d, %s, replayed %llu, injected kills %d",
	         job->ranks_running, job->nprocs, job->restarts_total, logs, detect_replayed(job),
	         job->kills_done);
	if (job->opts->cm_restart) {
		size_t l = strlen(line);
		snprintf(line + l, sizeof line - l, ", CM restarts %d", job->cm_restarts_total);
	}
	output_status(line, final);
	job->status_shown = !final;
}

static void on_status(struct ev_loop *loop, ev_timer *w, int revents)
{
	show_status(w->data, false);
}

/* Spawns r's next incarnation (counted already) and skips the output its
 * predecessors printed; stops the job if that fails. */
static void respawn(struct job *job, struct rank_proc *r)
{
	struct out_source *old_out = r->out, *old_err = r->err;
	if (spawn_rank(job, r) < 0) {
		output_message("rank %d: restarting it failed", r->rank);
		r->stop_reported = true;
		job->events.stop(job, CMRUN_EXIT_FAILURE);
		return;
	}
	output_source_follow(r->out, old_out, r->out_seen);
	output_source_follow(r->err, old_err, r->err_seen);
}

/* ---- node failure (remote hosts, docs/deployment.md) ----
 * A lost remote rank is restarted CMRUN_HOST_CONFIRM later, once cmrun
 * knows whether its host is dead (every rank there lost or silent, or
 * --kill-host): then on the surviving rank host with the fewest ranks,
 * else on its own host. remote.c allocates host_dead. */

/* The host is dead from now on: its ranks restart elsewhere. */
static void host_killed(struct job *job, int host)
{
	if (job->host_dead && !job->host_dead[host]) {
		job->host_dead[host] = true;
		output_verbose("host %s is dead: its ranks restart elsewhere",
		               job->opts->hosts.list[host].name);
	}
}

/* The surviving rank host with the fewest ranks, or -1. */
static int surviving_host(struct job *job)
{
	const struct cmrun_options *o = job->opts;
	int best = -1, best_load = 0;
	for (int h = 0; h < o->hosts.count; h++) {
		if (job->host_dead[h] || !(o->hosts.list[h].roles & HOST_ROLE_RANK))
			continue;
		int load = 0;
		for (int i = 0; i < job->nprocs; i++)
			load += job->ranks[i].host_index == h;
		if (best < 0 || load < best_load) {
			best = h;
			best_load = load;
		}
	}
	return best;
}

static void respawn_on_host(struct job *job, struct rank_proc *r)
{
	const struct cmrun_options *o = job->opts;
	r->relocate_pending = false;
	job->restarts_pending--;
	if (job->phase != PHASE_RUN)
		return;
	if (job->host_dead[r->host_index]) {
		int to = surviving_host(job);
		if (to < 0) {
			output_message(
			    "warning: rank %d: every rank host is dead; restarting it on "
			    "%s again",
			    r->rank, r->host);
		} else {
			output_verbose("rank %d moves from host %s to host %s", r->rank, r->host,
			               o->hosts.list[to].name);
			r->host_index = to;
			r->host = o->hosts.list[to].name;
			r->remote = launch_is_remote(o, to);
		}
	}
	respawn(job, r);
}

/* Every rank of a host with a restart pending: is the host dead? */
static void on_host_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct job *job = w->data;
	const struct cmrun_options *o = job->opts;
	double silent_after = (double)o->heartbeat_timeout_ns / 2e9;
	ev_now_update(loop);
	for (int h = 0; h < o->hosts.count; h++) {
		int pending = 0, alive = 0;
		for (int i = 0; i < job->nprocs; i++) {
			struct rank_proc *r = &job->ranks[i];
			if (r->host_index != h)
				continue;
			if (r->relocate_pending)
				pending++;
			else if (r->state == PROC_RUNNING && !r->declared_failed &&
			         !(o->heartbeat_timeout_ns && r->hb_watched && !r->hb_finished &&
			           ev_now(loop) - r->hb_last > silent_after))
				alive++;
		}
		if (pending == 0)
			continue;
		if (alive == 0 && job->phase == PHASE_RUN)
			host_killed(job, h);
		/* Silent ones on a dead host go too (their exit restarts them). */
		for (int i = 0; i < job->nprocs && job->host_dead[h]; i++) {
			struct rank_proc *r = &job->ranks[i];
			if (r->host_index == h && r->state == PROC_RUNNING && !r->relocate_pending)
				detect_declare_failed(job, r, "its host is dead");
		}
		for (int i = 0; i < job->nprocs; i++)
			if (job->ranks[i].host_index == h && job->ranks[i].relocate_pending)
				respawn_on_host(job, &job->ranks[i]);
	}
}

/* A remote rank r (incarnation already counted) is to be restarted: on a
 * surviving host when its own is dead (all its ranks lost or silent
 * within CMRUN_HOST_CONFIRM, or --kill-host), else on its own host.
 * Counted in restarts_pending until then. Returns true. */
static bool restart_later(struct job *job, struct rank_proc *r)
{
	r->relocate_pending = true;
	job->restarts_pending++;
	if (job->host_dead[r->host_index]) {
		respawn_on_host(job, r);
		return true;
	}
	if (!ev_is_active(&job->host_timer)) {
		ev_timer_init(&job->host_timer, on_host_timer, CMRUN_HOST_CONFIRM, 0.);
		job->host_timer.data = job;
		ev_timer_start(job->loop, &job->host_timer);
	}
	return true;
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
	r->kill_injected = true;
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
	host_killed(job, o->kill_host);
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
			int pick = (int)(job_random(job) % (uint64_t)candidates);
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
		job_random(job);
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
	cmft_start(job);
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
	cmft_stop(job);
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

void ft_note_failure(struct job *job, struct rank_proc *r, int wait_status)
{
	if (!WIFSIGNALED(wait_status) && !r->declared_failed)
		return;
	job->had_faults = true;
	r->died_at = ev_now(job->loop);
	if (r->kill_injected) {
		r->injected_kills++;
		return;
	}
	if (r->other_failures++ == 0) {
		if (r->declared_failed)
			snprintf(r->first_failure, sizeof r->first_failure, "declared failed: %s",
			         r->failed_why);
		else
			describe_wait_status(wait_status, r->first_failure,
			                     sizeof r->first_failure);
	}
}

/* The re-execution r died at the point where its previous incarnation
 * died, of the same signal, neither sent by cmrun: a fault of the program
 * itself, which another restart would only repeat. "The point" is the
 * number of MPI requests the incarnation had made since it began, and it
 * must have begun where its predecessor did (the start, or the same
 * image): then a deterministic re-execution that gets there has replayed
 * exactly what the dead one did. Both must have said so ("crashed"): a
 * program whose own handler hides the fault is restarted as before. */
static bool same_crash_again(const struct rank_proc *r, int wait_status)
{
	return WIFSIGNALED(wait_status) && !r->kill_injected && !r->declared_failed && r->crashed &&
	       r->prev_crashed && r->crash_sig == WTERMSIG(wait_status) &&
	       r->prev_crash_sig == r->crash_sig && r->prev_crash_progress == r->crash_progress &&
	       r->prev_from_image == r->from_image && (!r->from_image || r->prev_image == r->image);
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
	if (same_crash_again(r, wait_status)) {
		char start[64];
		describe_start(r->from_image, r->image, start, sizeof start);
		output_message("rank %d %s again at the same point, after %lu MPI requests "
		               "(incarnation %u, %s, died there too): a bug in the program, not "
		               "a fault; not restarted",
		               r->rank, how, r->crash_progress, r->incarnation - 1, start);
		r->stop_reported = true;
		return false;
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
	/* What the next incarnation is compared with, should it die too. */
	r->prev_crashed = r->crashed && !r->kill_injected && !r->declared_failed;
	r->prev_crash_sig = r->crash_sig;
	r->prev_crash_progress = r->crash_progress;
	r->prev_from_image = r->from_image;
	r->prev_image = r->image;
	r->restarts++;
	r->incarnation++;
	job->restarts_total++;
	output_verbose("rank %d (pid %d) %s: restarting it as incarnation %u (restart %d of %d)",
	               r->rank, (int)r->pid, how, r->incarnation, r->restarts, o->max_restarts);
	if (r->remote)
		return restart_later(job, r); /* where depends on its host's fate */
	struct out_source *old_out = r->out, *old_err = r->err;
	if (spawn_rank(job, r) < 0) {
		output_message("rank %d %s, and restarting it failed", r->rank, how);
		return false;
	}
	output_source_follow(r->out, old_out, r->out_seen);
	output_source_follow(r->err, old_err, r->err_seen);
	return true;
}

void ft_report(struct job *job)
{
	enum { RANKS_LISTED = 16 };
	if (!job->had_faults)
		return;
	const struct cmrun_options *o = job->opts;
	int listed = 0, more = 0, failed_ranks = 0, injected = 0, other = 0;
	for (int i = 0; i < job->nprocs; i++) {
		const struct rank_proc *r = &job->ranks[i];
		injected += r->injected_kills;
		other += r->other_failures;
		failed_ranks += r->injected_kills + r->other_failures > 0;
	}
	int cm_failures = 0;
	for (int i = 0; i < job->ncms; i++) {
		const struct cm_proc *cm = &job->cms[i];
		int deaths = cm->injected_kills + cm->other_deaths;
		cm_failures += deaths ? deaths : cm->died;
	}
	output_message("fault report: %d injected kill%s, %d other rank failure%s, %d restart%s "
	               "over %d rank%s, %d cmserver failure%s",
	               injected, injected == 1 ? "" : "s", other, other == 1 ? "" : "s",
	               job->restarts_total, job->restarts_total == 1 ? "" : "s", failed_ranks,
	               failed_ranks == 1 ? "" : "s", cm_failures, cm_failures == 1 ? "" : "s");
	for (int i = 0; i < job->ncms; i++) {
		const struct cm_proc *cm = &job->cms[i];
		char how[96];
		if (!cm->died)
			continue;
		describe_wait_status(cm->wait_status, how, sizeof how);
		output_message("  cmserver %d %s during the run", cm->index, how);
	}
	cmft_report(job);
	for (int i = 0; i < job->nprocs; i++) {
		const struct rank_proc *r = &job->ranks[i];
		if (r->injected_kills + r->other_failures == 0)
			continue;
		if (listed == RANKS_LISTED) {
			more++;
			continue;
		}
		listed++;
		char who[48], failures[256], restarts[96] = "", down[128];
		if (o->replicas > 1)
			snprintf(who, sizeof who, "rank %d replica %d", r->rank, r->replica);
		else
			snprintf(who, sizeof who, "rank %d", r->rank);
		describe_failures(r->injected_kills, r->other_failures, "failure", r->first_failure,
		                  failures, sizeof failures);
		if (o->replicas > 1)
			snprintf(restarts, sizeof restarts, "; not restarted (replication)");
		else if (r->restarts)
			snprintf(restarts, sizeof restarts,
			         "; %d restart%s (%d from an image, %d from "
			         "the start)",
			         r->restarts, r->restarts == 1 ? "" : "s", r->restarts_from_image,
			         r->restarts_from_start);
		else
			snprintf(restarts, sizeof restarts, "; not restarted");
		describe_down("back in MPI_Init", "failure", r->down_count, r->down_total,
		              r->down_max, down, sizeof down);
		output_message("  %s: %s%s%s", who, failures, restarts, down);
	}
	if (more)
		output_message("  ... and %d more rank%s", more, more == 1 ? "" : "s");
	if (job->ncms > 0)
		output_message("  replayed by the channel memories: %llu message%s, %llu event%s",
		               detect_replayed(job), detect_replayed(job) == 1 ? "" : "s",
		               detect_events_replayed(job),
		               detect_events_replayed(job) == 1 ? "" : "s");
}
