/* Surviving a channel memory's death (cmrun --cm-restart,
 * docs/fault-tolerance.md, "Channel memory death").
 *
 * Every CM journals what changes its state to DIR/cm-K.journal, DIR being a
 * private directory cmrun makes for the job and removes at its end. A CM
 * that dies during the run is started again with the same command line on
 * the same TCP port and abstract unix name (spawn.c takes them from what it
 * reported the first time), so the ranks, which keep reconnecting for
 * CMRUN_CM_RECONNECT_S seconds, find it where they knew it; it recovers its
 * state from the journal. Fault injection: --kill-cm-at and
 * --kill-cm-every.
 *
 * With --cm-standby each CM first has a standby (cmserver --standby, on
 * another host when there is one, journal DIR/cm-K.standby) that the CM
 * mirrors its journal to. When the CM dies and its standby says
 * "takeover" (either may come first), the standby's process becomes CM
 * K: its address, host and journal from then on, and restarts of CM K
 * happen there. Then CM K gets a new standby where the dead process
 * served (its host and address); once that listens, cmrun restarts CM K
 * on its journal with --mirror (the CM copies the whole journal to it
 * before it serves). So the two take turns on two addresses every rank
 * knows, and a CM survives its death again and again, one at a time. A
 * standby that does not take over in time, or dies, leaves the CM to be
 * restarted on its own journal as without one. */
#include <config.h>

#include "job.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cm_restart.h"
#include "detect.h"
#include "jobenv.h"
#include "launch.h"
#include "output.h"
#include "spawn.h"

int cmft_open(struct job *job)
{
	const struct cmrun_options *o = job->opts;
	if (!o->cm_restart)
		return 0;
	/* With --spill-dir the journals go where the user put the CMs' disk
	 * data; cmrun's own $TMPDIR otherwise. */
	const char *base = o->cm_opt_given[CMRUN_CM_SPILL_DIR] ? o->cm_opt_value[CMRUN_CM_SPILL_DIR]
	                                                       : getenv("TMPDIR");
	if (base == NULL || base[0] == '\0')
		base = "/tmp";
	if (asprintf(&job->journal_dir, "%s/cmrun-journal-XXXXXX", base) < 0) {
		job->journal_dir = NULL;
		output_message("error: out of memory");
		return -1;
	}
	/* mkdtemp: mode 0700, a name nobody else has. */
	if (mkdtemp(job->journal_dir) == NULL) {
		output_message("error: --cm-restart: cannot make a journal directory in %s: %s",
		               base, strerror(errno));
		free(job->journal_dir);
		job->journal_dir = NULL;
		return -1;
	}
	output_verbose("--cm-restart: CM journals in %s", job->journal_dir);
	return 0;
}

void cmft_close(struct job *job)
{
	if (job->journal_dir == NULL)
		return;
	/* Whatever the CMs left there: journals and anything they keep next
	 * to them. A CM started through a launcher removes its own journal,
	 * and the directory once empty, at its clean end (--journal-scratch):
	 * on a host that shares this file system it may be gone already. */
	DIR *d = opendir(job->journal_dir);
	struct dirent *e;
	while (d && (e = readdir(d)) != NULL)
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 &&
		    unlinkat(dirfd(d), e->d_name, 0) < 0)
			output_message("warning: cannot remove %s/%s: %s", job->journal_dir,
			               e->d_name, strerror(errno));
	if (d)
		closedir(d);
	if (rmdir(job->journal_dir) < 0 && errno != ENOENT)
		output_message("warning: cannot remove the CM journal directory %s: %s",
		               job->journal_dir, strerror(errno));
	free(job->journal_dir);
	job->journal_dir = NULL;
}

static void on_start_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct cm_proc *cm = w->data;
	struct job *job = ev_userdata(loop);
	if (cm->ready || cm->state != PROC_RUNNING || job->phase != PHASE_RUN)
		return;
	output_message("error: restarted cmserver %d (pid %d) did not report its address within "
	               "%.0f s; stopping the job",
	               cm->index, (int)cm->pid, CMRUN_CM_START_TIMEOUT);
	cm->died = true;
	job->events.stop(job, CMRUN_EXIT_FAILURE);
}

/* Starts it again, bounded by CMRUN_CM_START_TIMEOUT. 0, or -1 printed. */
static int respawn(struct job *job, struct cm_proc *cm)
{
	if (spawn_cm(job, cm) < 0)
		return -1;
	detect_cm_spawned(job, cm);
	ev_timer_init(&cm->start_timer, on_start_timeout, CMRUN_CM_START_TIMEOUT, 0.);
	cm->start_timer.data = cm;
	ev_timer_start(job->loop, &cm->start_timer);
	return 0;
}

static void on_respawn(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct cm_proc *cm = w->data;
	struct job *job = ev_userdata(loop);
	if (job->phase != PHASE_RUN || respawn(job, cm) == 0)
		return;
	output_message("cmserver %d: restarting it failed; stopping the job", cm->index);
	cm->died = true;
	job->events.stop(job, CMRUN_EXIT_FAILURE);
}

/* "CHANMEM_CM_STANDBYS=..." (--cm-standby): every CM's standby by TCP, as
 * it is when a rank starts: with CHANMEM_CMS, the two addresses a CM and
 * its standby take turns on. */
char *cmft_standbys_env(struct job *job)
{
	size_t cap = strlen(CM_ENV_CM_STANDBYS) + 2 + (size_t)job->ncms * 33;
	char *env = malloc(cap);
	if (env == NULL)
		return NULL;
	size_t len = (size_t)snprintf(env, cap, "%s=", CM_ENV_CM_STANDBYS);
	for (int i = 0; i < job->ncms; i++)
		len += (size_t)snprintf(env + len, cap - len, "%s%s", i ? "," : "",
		                        job->standbys[i].addr[0] ? job->standbys[i].addr : "-");
	return env;
}

static void standbys_changed(struct job *job)
{
	if (job->standbys == NULL || job->rank_env == NULL || job->standbys_env_slot < 0)
		return;
	char *env = cmft_standbys_env(job);
	if (env == NULL)
		return; /* out of memory: ranks started from now on get the older list */
	free(job->rank_env[job->standbys_env_slot]);
	job->rank_env[job->standbys_env_slot] = env;
}

/* CM cm's standby entry, reused for a new standby process (the last one
 * took over), with a journal copy of its own, where the CM's dead process
 * served: its host and address. So a CM and its standby take turns on two
 * addresses that every rank knows (the CM's and the standby's of the job's
 * start, CHANMEM_CMS and CHANMEM_CM_STANDBYS), and a rank finds the one
 * serving whenever it reconnects, whatever it missed. On a host that is
 * gone it cannot start: the CM then runs on without a standby. It listens
 * first; cmft_standby_ready then restarts the CM with it. */
static void on_new_standby(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct cm_proc *cm = w->data;
	struct job *job = ev_userdata(loop);
	const struct cmrun_options *o = job->opts;
	struct cm_proc *sb = &job->standbys[cm->index];
	if (job->phase != PHASE_RUN || sb->state == PROC_RUNNING)
		return;
	/* A fresh entry in the old one's place, with the next journal copy. */
	struct cm_proc next = {.index = cm->index,
	                       .is_standby = true,
	                       .journal_gen = sb->journal_gen + 1,
	                       .host_index = sb->host_index,
	                       .remote = launch_is_remote(o, sb->host_index),
	                       .ready_fd = -1,
	                       .report_fd = -1,
	                       .stdin_wr = -1};
	snprintf(next.addr, sizeof next.addr, "%s", sb->addr);
	snprintf(next.unix_addr, sizeof next.unix_addr, "%s", sb->unix_addr);
	*sb = next;
	standbys_changed(job);
	if (spawn_cm(job, sb) < 0) {
		sb->used = true;
		output_message("cmserver %d: no new standby could be started: it no longer "
		               "survives its host's death",
		               cm->index);
		return;
	}
	detect_cm_spawned(job, sb);
	output_verbose("cmserver %d: a new standby (pid %d) on host %s, on %s", cm->index,
	               (int)sb->pid, o->hosts.list[sb->host_index].name, sb->addr);
}

static void start_new_standby(struct job *job, struct cm_proc *cm)
{
	if (ev_is_active(&cm->new_standby_timer))
		return; /* one is on its way */
	/* A CM through a launcher cannot be stopped for a restart without
	 * its far side taking the stop for the job's end (and removing its
	 * journal): it keeps running without a standby. */
	if (cm->remote) {
		output_verbose("cmserver %d runs on %s through a launcher: no new standby",
		               cm->index, job->opts->hosts.list[cm->host_index].name);
		return;
	}
	ev_timer_init(&cm->new_standby_timer, on_new_standby, 0., 0.);
	cm->new_standby_timer.data = cm;
	ev_timer_start(job->loop, &cm->new_standby_timer);
}

/* The bytes of cm's journal (both files), as this machine sees them. */
static unsigned long long journal_bytes(const struct job *job, const struct cm_proc *cm)
{
	char path[PATH_MAX], data[PATH_MAX + 8];
	struct stat st;
	unsigned long long bytes = 0;
	spawn_journal_path(job, cm, path, sizeof path);
	snprintf(data, sizeof data, "%s.data", path);
	if (path[0] && stat(path, &st) == 0)
		bytes += (unsigned long long)st.st_size;
	if (path[0] && stat(data, &st) == 0)
		bytes += (unsigned long long)st.st_blocks * 512u; /* its holes cost nothing */
	return bytes;
}

/* CM cm runs without copying its journal to its standby, which listens:
 * it is stopped, and started again with the standby (it copies its
 * journal whole first). Not a failure: not counted as a restart. */
static void reprotect(struct job *job, struct cm_proc *cm)
{
	const struct cm_proc *sb = job->standbys ? &job->standbys[cm->index] : NULL;
	if (sb == NULL || sb->state != PROC_RUNNING || !sb->ready || sb->used ||
	    cm->state != PROC_RUNNING || !cm->ready || cm->mirrored || cm->pid <= 0 ||
	    job->phase != PHASE_RUN)
		return;
	/* The ranks wait while the copy runs, and give up after
	 * CMRUN_CM_RECONNECT_S: a journal that would take too long stays
	 * where it is, unprotected. */
	unsigned long long bytes = journal_bytes(job, cm);
	if (bytes > CMRUN_REPROTECT_MAX_BYTES) {
		output_message("cmserver %d: its journal (%llu MB) is too large to copy to a new "
		               "standby while the CM waits: it no longer survives its host's death",
		               cm->index, bytes / 1000000u);
		job->standbys[cm->index].used = true;
		signal_standby(job, cm->index, SIGTERM);
		return;
	}
	if (kill(cm->remote ? -cm->pid : cm->pid, SIGKILL) < 0)
		return;
	cm->reprotected = true;
	output_verbose("cmserver %d (pid %d): restarting it with its new standby on %s", cm->index,
	               (int)cm->pid, sb->addr);
}

void cmft_standby_ready(struct job *job, struct cm_proc *sb)
{
	reprotect(job, &job->cms[sb->index]);
}

/* The standby process sb becomes CM cm's: cm's entry takes over its pid,
 * pipes, address and host; sb's entry is used up, and keeps the place the
 * dead CM served from (address, unix name, host) for the next standby. */
static void adopt_standby(struct job *job, struct cm_proc *cm, struct cm_proc *sb)
{
	ev_timer_stop(job->loop, &cm->start_timer);
	if (sb->report_fd >= 0)
		ev_io_stop(job->loop, &sb->report_io);
	char dead_addr[sizeof cm->addr], dead_unix[sizeof cm->unix_addr];
	int dead_host = cm->host_index;
	snprintf(dead_addr, sizeof dead_addr, "%s", cm->addr);
	snprintf(dead_unix, sizeof dead_unix, "%s", cm->unix_addr);
	cm->pid = sb->pid;
	cm->state = sb->state; /* still counted in cms_running, once */
	cm->host_index = sb->host_index;
	cm->remote = sb->remote;
	cm->stdin_wr = sb->stdin_wr;
	cm->report_fd = sb->report_fd;
	cm->report_len = 0; /* what followed "takeover" in sb's buffer is read there */
	cm->ready_fd = -1;
	if (cm->err)
		output_source_close(cm->err);
	cm->err = sb->err;
	snprintf(cm->addr, sizeof cm->addr, "%s", sb->addr);
	snprintf(cm->unix_addr, sizeof cm->unix_addr, "%s", sb->unix_addr);
	cm->ready = true;
	cm->awaiting_standby = false;
	cm->journal_gen = sb->journal_gen;
	cm->mirrored = false;
	cm->log_bytes = cm->replayed = cm->events_replayed = 0;
	sb->state = PROC_NOT_STARTED;
	sb->pid = 0;
	sb->report_fd = sb->stdin_wr = -1;
	sb->err = NULL;
	sb->used = true;
	sb->host_index = dead_host;
	snprintf(sb->addr, sizeof sb->addr, "%s", dead_addr);
	snprintf(sb->unix_addr, sizeof sb->unix_addr, "%s", dead_unix);
	detect_cm_spawned(job, cm);
	output_verbose("cmserver %d: its standby (pid %d, host %s) took over on %s", cm->index,
	               (int)cm->pid, job->opts->hosts.list[cm->host_index].name, cm->addr);
	cmft_cm_listening(job, cm);
	start_new_standby(job, cm);
}

static void on_standby_late(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct cm_proc *cm = w->data;
	struct job *job = ev_userdata(loop);
	if (!cm->awaiting_standby || job->phase != PHASE_RUN)
		return;
	cm->awaiting_standby = false;
	job->standbys[cm->index].used = true;
	output_message("cmserver %d: its standby did not take over within %.0f s; restarting "
	               "the CM on its own journal",
	               cm->index, CMRUN_CM_START_TIMEOUT);
	if (respawn(job, cm) == 0)
		return;
	cm->died = true;
	job->events.stop(job, CMRUN_EXIT_FAILURE);
}

void cmft_standby_took_over(struct job *job, struct cm_proc *sb)
{
	struct cm_proc *cm = &job->cms[sb->index];
	sb->took_over = true;
	if (job->phase != PHASE_RUN)
		return;
	if (cm->awaiting_standby) {
		adopt_standby(job, cm, sb);
		return;
	}
	/* Its CM lost it but has not been seen to end: it stops on its own
	 * (a CM without its standby answers nothing more); its exit hands
	 * over. */
	if (cm->state == PROC_RUNNING && cm->pid > 0)
		kill(cm->remote ? -cm->pid : cm->pid, SIGKILL);
}

/* A standby that died is started again in its place (its host and
 * address, a new journal copy), a bounded number of times: the CM gets it
 * as after a takeover (cmft_standby_ready). */
static bool replace_standby(struct job *job, struct cm_proc *cm, struct cm_proc *sb)
{
	if (cm->remote || sb->remote || !sb->addr[0] ||
	    cm->standby_replaced >= CMRUN_STANDBY_REPLACE_MAX)
		return false;
	cm->standby_replaced++;
	start_new_standby(job, cm);
	return true;
}

void cmft_standby_exited(struct job *job, struct cm_proc *sb, int wait_status)
{
	struct cm_proc *cm = &job->cms[sb->index];
	sb->used = true;
	/* The CM's copy died with it: a standby started in its place holds
	 * nothing of the CM's journal until the CM is restarted with it. */
	cm->mirrored = false;
	if (job->phase != PHASE_RUN)
		return;
	char how[96];
	describe_wait_status(wait_status, how, sizeof how);
	if (cm->awaiting_standby) {
		cm->awaiting_standby = false;
		ev_timer_stop(job->loop, &cm->start_timer);
		output_verbose("standby of cmserver %d %s; restarting the CM on its own journal",
		               cm->index, how);
		if (respawn(job, cm) < 0) {
			cm->died = true;
			job->events.stop(job, CMRUN_EXIT_FAILURE);
			return;
		}
		replace_standby(job, cm, sb);
		return;
	}
	/* The CM stops when its mirror breaks and is restarted where it runs. */
	if (replace_standby(job, cm, sb))
		output_verbose("standby of cmserver %d (pid %d) %s: starting another in its place",
		               cm->index, (int)sb->pid, how);
	else
		output_verbose("standby of cmserver %d (pid %d) %s: the CM no longer survives its "
		               "host's death",
		               cm->index, (int)sb->pid, how);
}

bool cmft_cm_died(struct job *job, struct cm_proc *cm, int wait_status)
{
	const struct cmrun_options *o = job->opts;
	if (!o->cm_restart || job->phase != PHASE_RUN)
		return false;
	char how[96];
	describe_wait_status(wait_status, how, sizeof how);
	ev_timer_stop(job->loop, &cm->start_timer);
	if (cm->reprotected) {
		/* Stopped by cmrun to be started with its new standby. */
		cm->reprotected = false;
		if (cm->err)
			output_source_close(cm->err);
		cm->err = NULL;
		cm->replayed_before += cm->replayed;
		cm->events_replayed_before += cm->events_replayed;
		cm->replayed = cm->events_replayed = 0;
		cm->stopping = false;
		if (respawn(job, cm) == 0)
			return true;
		output_message("cmserver %d: restarting it with its new standby failed; stopping "
		               "the job",
		               cm->index);
		cm->died = true;
		return false;
	}
	job->had_faults = true;
	if (cm->kill_injected)
		cm->injected_kills++;
	else if (cm->other_deaths++ == 0)
		snprintf(cm->first_death, sizeof cm->first_death, "%s", how);
	/* A death before it listened again counts from the first one. */
	if (cm->ready)
		cm->died_at = ev_now(job->loop);
	if (cm->restarts >= o->max_cm_restarts) {
		output_message("cmserver %d (pid %d) %s; not restarted: it reached "
		               "--max-cm-restarts %d; stopping the job",
		               cm->index, (int)cm->pid, how, o->max_cm_restarts);
		cm->died = true;
		return false;
	}
	cm->restarts++;
	job->cm_restarts_total++;
	cm->replayed_before += cm->replayed;
	cm->events_replayed_before += cm->events_replayed;
	cm->replayed = cm->events_replayed = 0;
	cm->kill_injected = cm->stopping = false;
	/* Its stderr was read to the end when it was reaped. */
	if (cm->err)
		output_source_close(cm->err);
	cm->err = NULL;
	struct cm_proc *sb = job->standbys ? &job->standbys[cm->index] : NULL;
	if (sb && !sb->used && sb->state == PROC_RUNNING && cm->mirrored) {
		if (sb->took_over) {
			adopt_standby(job, cm, sb);
			return true;
		}
		/* Its stream ended with it: the standby says "takeover" next. */
		cm->awaiting_standby = true;
		output_verbose("cmserver %d (pid %d) %s: its standby takes over", cm->index,
		               (int)cm->pid, how);
		ev_timer_init(&cm->start_timer, on_standby_late, CMRUN_CM_START_TIMEOUT, 0.);
		cm->start_timer.data = cm;
		ev_timer_start(job->loop, &cm->start_timer);
		return true;
	}
	/* One that died before it listened again may have found its address
	 * still taken (a connection on its port): not at once again. */
	double delay = cm->ready ? 0. : CMRUN_CM_RETRY_DELAY;
	output_verbose("cmserver %d (pid %d) %s: restarting it on %s%s (restart %d of %d)",
	               cm->index, (int)cm->pid, how, cm->addr, delay > 0 ? " shortly" : "",
	               cm->restarts, o->max_cm_restarts);
	if (delay > 0) {
		ev_timer_init(&cm->start_timer, on_respawn, delay, 0.);
		cm->start_timer.data = cm;
		ev_timer_start(job->loop, &cm->start_timer);
		return true;
	}
	if (respawn(job, cm) < 0) {
		output_message("cmserver %d %s, and restarting it failed; stopping the job",
		               cm->index, how);
		cm->died = true;
		return false;
	}
	return true;
}

void cmft_cm_listening(struct job *job, struct cm_proc *cm)
{
	ev_timer_stop(job->loop, &cm->start_timer);
	/* Started while its new standby was not listening yet. */
	reprotect(job, cm);
	if (cm->died_at == 0)
		return;
	double down = ev_now(job->loop) - cm->died_at;
	cm->died_at = 0;
	cm->down_total += down;
	cm->down_count++;
	if (down > cm->down_max)
		cm->down_max = down;
}

/* ---- fault injection ---- */

static bool kill_cm(struct job *job, struct cm_proc *cm, const char *why)
{
	if (cm->state != PROC_RUNNING || cm->pid <= 0)
		return false;
	/* By pid, a child cmrun has not reaped. A remote CM's launcher: its
	 * whole group, which holds what it started on this machine. */
	if (kill(cm->remote ? -cm->pid : cm->pid, SIGKILL) < 0)
		return false;
	cm->kill_injected = true;
	job->cm_kills_done++;
	output_verbose("%s: SIGKILL to cmserver %d (pid %d)", why, cm->index, (int)cm->pid);
	return true;
}

/* Arms the timer for the next --kill-cm-at entry, if any. */
static void arm_kill_cm_at(struct job *job)
{
	const struct cmrun_options *o = job->opts;
	if (job->kill_cm_at_next >= o->nkill_cm_at)
		return;
	double at = job->ft_started + (double)o->kill_cm_at[job->kill_cm_at_next].ns / 1e9;
	double in = at - ev_now(job->loop);
	ev_timer_set(&job->kill_cm_at_timer, in > 0 ? in : 0., 0.);
	ev_timer_start(job->loop, &job->kill_cm_at_timer);
}

static void on_kill_cm_at(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct job *job = w->data;
	const struct cmrun_options *o = job->opts;
	if (job->phase != PHASE_RUN)
		return;
	/* Every entry that is due: several may share a time. */
	double elapsed = ev_now(loop) - job->ft_started;
	while (job->kill_cm_at_next < o->nkill_cm_at &&
	       (double)o->kill_cm_at[job->kill_cm_at_next].ns / 1e9 <= elapsed + 1e-6)
		kill_cm(job, &job->cms[o->kill_cm_at[job->kill_cm_at_next++].cm], "--kill-cm-at");
	arm_kill_cm_at(job);
}

static void on_kill_cm_every(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct job *job = w->data;
	const struct cmrun_options *o = job->opts;
	if (job->phase != PHASE_RUN || job->cm_every_kills >= o->kill_count) {
		ev_timer_stop(loop, w);
		return;
	}
	/* A random CM that listens (not one still coming back) and has a
	 * restart left: random kills test recovery, not the limit. */
	int candidates = 0, pick;
	for (int i = 0; i < job->ncms; i++)
		candidates += job->cms[i].state == PROC_RUNNING && job->cms[i].ready &&
		              job->cms[i].restarts < o->max_cm_restarts;
	if (candidates == 0)
		return;
	pick = (int)(job_random(job) % (uint64_t)candidates);
	for (int i = 0; i < job->ncms; i++) {
		struct cm_proc *cm = &job->cms[i];
		if (cm->state == PROC_RUNNING && cm->ready && cm->restarts < o->max_cm_restarts &&
		    pick-- == 0) {
			job->cm_every_kills += kill_cm(job, cm, "--kill-cm-every");
			break;
		}
	}
	if (job->cm_every_kills >= o->kill_count)
		ev_timer_stop(loop, w);
}

void cmft_start(struct job *job)
{
	const struct cmrun_options *o = job->opts;
	job->ft_started = ev_now(job->loop);
	if (o->nkill_cm_at) {
		ev_init(&job->kill_cm_at_timer, on_kill_cm_at);
		job->kill_cm_at_timer.data = job;
		arm_kill_cm_at(job);
	}
	if (o->kill_cm_every_ns) {
		double t = (double)o->kill_cm_every_ns / 1e9;
		output_verbose("fault injection: a CM every %.3f s, %d kills at most", t,
		               o->kill_count);
		ev_timer_init(&job->kill_cm_timer, on_kill_cm_every, t, t);
		job->kill_cm_timer.data = job;
		ev_timer_start(job->loop, &job->kill_cm_timer);
	}
}

void cmft_stop(struct job *job)
{
	const struct cmrun_options *o = job->opts;
	if (o->nkill_cm_at)
		ev_timer_stop(job->loop, &job->kill_cm_at_timer);
	if (o->kill_cm_every_ns)
		ev_timer_stop(job->loop, &job->kill_cm_timer);
	for (int i = 0; i < job->ncms; i++) {
		ev_timer_stop(job->loop, &job->cms[i].start_timer);
		ev_timer_stop(job->loop, &job->cms[i].new_standby_timer);
	}
}

/* ---- the fault report ---- */

void cmft_report(struct job *job)
{
	int died = 0;
	for (int i = 0; i < job->ncms; i++)
		died += job->cms[i].injected_kills + job->cms[i].other_deaths;
	if (died == 0)
		return;
	output_message("  channel memories: %d restart%s", job->cm_restarts_total,
	               job->cm_restarts_total == 1 ? "" : "s");
	for (int i = 0; i < job->ncms; i++) {
		const struct cm_proc *cm = &job->cms[i];
		char deaths[192], down[128];
		if (cm->injected_kills + cm->other_deaths == 0)
			continue;
		describe_failures(cm->injected_kills, cm->other_deaths, "death", cm->first_death,
		                  deaths, sizeof deaths);
		describe_down("listening again", "death", cm->down_count, cm->down_total,
		              cm->down_max, down, sizeof down);
		output_message("  cmserver %d: %s; %d restart%s%s", cm->index, deaths, cm->restarts,
		               cm->restarts == 1 ? "" : "s", down);
	}
}
