/* The event loop of a job, the top of cmrun's layers: starting the CMs and
 * the ranks, CM start-up, rank exits, signals, the timeout, and the
 * teardown that leaves no process behind. Every phase that waits on
 * something outside cmrun is bounded by phase_timer. The files below it
 * (detection, recovery, control lines, spawning) never call it: what they
 * report comes up through job->events, which job_run fills. */
#include <config.h>

#include "ckpt.h"
#include "cm_restart.h"
#include "job.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "control.h"
#include "detect.h"
#include "ft.h"
#include "input.h"
#include "jobenv.h"
#include "launch.h"
#include "net.h"
#include "output.h"
#include "remote.h"
#include "repl.h"
#include "spawn.h"

/* ---- phases ---- */

static void arm_phase_timer(struct job *job, double seconds)
{
	ev_timer_stop(job->loop, &job->phase_timer);
	if (seconds > 0) {
		ev_timer_set(&job->phase_timer, seconds, 0.);
		ev_timer_start(job->loop, &job->phase_timer);
	}
}

static void job_enter_phase(struct job *job, enum job_phase phase, double bound)
{
	if (job->phase == PHASE_RUN && phase != PHASE_RUN)
		ft_stop(job); /* no kills while stopping; final status line */
	job->phase = phase;
	job->escalated = false;
	arm_phase_timer(job, bound);
}

/* Stops the job: the first reason recorded decides the exit status. */
static void job_fail(struct job *job, int status)
{
	if (!job->failed) {
		job->failed = true;
		job->exit_status = status;
	}
	if (job->phase != PHASE_START_CMS && job->phase != PHASE_RUN)
		return;
	job_enter_phase(job, PHASE_STOP, CMRUN_KILL_GRACE);
	signal_ranks(job, SIGTERM);
	signal_cms(job, SIGTERM);
}

static void job_stop(struct job *job, int status)
{
	job_fail(job, status);
}

/* ---- starting: the CMs (and the wait for their addresses), the listening
 * sockets of direct-transport ranks, the ranks' environment and the ranks
 * themselves, each at its phase ---- */

static int build_rank_env(struct job *job)
{
	const struct cmrun_options *o = job->opts;
	/* Transport cm: CHANMEM_CMS depends on where the rank runs, so each
	 * spawn adds its own (cms_env_for). */
	const char *list_name =
	    o->transport == CMRUN_TRANSPORT_REPL ? CM_ENV_REPL_PEERS : CM_ENV_PEERS;
	int n = 0;
	job->rank_env = calloc(16, sizeof *job->rank_env);
	if (job->rank_env == NULL ||
	    asprintf(&job->rank_env[n++], "%s=%d", CM_ENV_SIZE, o->nranks) < 0 ||
	    asprintf(&job->rank_env[n++], "%s=%s", CM_ENV_SECRET, job->secret) < 0 ||
	    asprintf(&job->rank_env[n++], "%s=%s", CM_ENV_TRANSPORT,
	             cmrun_transport_name(o->transport)) < 0 ||
	    asprintf(&job->rank_env[n++], "%s=%d", CM_ENV_CONTROL_FD, control_rank_fd(job)) < 0)
		return -1;
	if (o->transport != CMRUN_TRANSPORT_CM &&
	    asprintf(&job->rank_env[n++], "%s=%s", list_name, job->peers) < 0)
		return -1;
	if (o->transport == CMRUN_TRANSPORT_REPL &&
	    asprintf(&job->rank_env[n++], "%s=%d", CM_ENV_REPLICAS, o->replicas) < 0)
		return -1;
	/* A beat every quarter of the timeout: three can be late or skipped
	 * (full pipe, a loaded machine) before a rank looks silent. */
	uint64_t beat_ms = o->heartbeat_timeout_ns / 4000000u;
	if (o->heartbeat_timeout_ns &&
	    asprintf(&job->rank_env[n++], "%s=%llu", CMRUN_ENV_HEARTBEAT_MS,
	             (unsigned long long)(beat_ms ? beat_ms : 1)) < 0)
		return -1;
	if (o->cm_restart && asprintf(&job->rank_env[n++], "%s=%d", CMRUN_ENV_CM_RECONNECT,
	                              CMRUN_CM_RECONNECT_S) < 0)
		return -1;
	job->standbys_env_slot = -1;
	if (job->standbys) {
		job->standbys_env_slot = n;
		if ((job->rank_env[n++] = cmft_standbys_env(job)) == NULL)
			return -1;
	}
	if (job->ckpt_pid > 0 &&
	    (asprintf(&job->rank_env[n++], "%s=%s", CM_ENV_CKPT, job->ckpt_addr) < 0 ||
	     asprintf(&job->rank_env[n++], "%s=%s", CM_ENV_JOB_ID, job->ckpt_job_id) < 0 ||
	     (o->ckpt_every &&
	      asprintf(&job->rank_env[n++], "%s=%s", CM_ENV_CKPT_EVERY, o->ckpt_every) < 0)))
		return -1;
	return 0;
}

static void job_start_ranks(struct job *job)
{
	if (build_rank_env(job) < 0) {
		output_message("error: out of memory");
		job_stop(job, CMRUN_EXIT_FAILURE);
		return;
	}
	job_enter_phase(job, PHASE_RUN, 0);
	for (int i = 0; i < job->nprocs && job->phase == PHASE_RUN; i++) {
		if (spawn_rank(job, &job->ranks[i]) < 0) {
			job_stop(job, CMRUN_EXIT_NOT_EXECUTABLE);
			break;
		}
		if (job->ranks[i].rank == 0 && job->rank0_stdin >= 0) {
			/* Rank 0 holds it now; a later incarnation reads /dev/null. */
			close(job->rank0_stdin);
			job->rank0_stdin = -1;
		}
	}
	if (job->phase == PHASE_RUN)
		ft_start(job);
}

/* text: "HOST:PORT", then " unix:@NAME" unless the CM runs --no-unix. */
static void job_cm_ready(struct job *job, struct cm_proc *cm, const char *text)
{
	if (cm->ready)
		return;
	char tcp[32] = "", unix_text[CM_ADDR_TEXT_MAX] = "", why[128] = "";
	size_t tcp_len = strcspn(text, " ");
	const char *rest = text + tcp_len + (text[tcp_len] == ' ');
	struct cm_addr tcp_addr, unix_addr;
	if (tcp_len < sizeof tcp)
		memcpy(tcp, text, tcp_len);
	if (tcp_len >= sizeof tcp || cm_parse_addr(tcp, &tcp_addr, why, sizeof why) < 0 ||
	    tcp_addr.u.sa.sa_family != AF_INET) {
		output_message("error: cmserver %d reported '%.64s', not a HOST:PORT address",
		               cm->index, text);
		job_stop(job, CMRUN_EXIT_FAILURE);
		return;
	}
	if (*rest && (strlen(rest) >= sizeof unix_text ||
	              cm_parse_addr(rest, &unix_addr, why, sizeof why) < 0 ||
	              unix_addr.u.sa.sa_family != AF_UNIX)) {
		output_message("error: cmserver %d reported '%.64s' after its TCP address, not "
		               "unix:@NAME",
		               cm->index, rest);
		job_stop(job, CMRUN_EXIT_FAILURE);
		return;
	}
	if (*rest)
		cm_format_any(&unix_addr, unix_text, sizeof unix_text);
	cm_format_any(&tcp_addr, tcp, sizeof tcp);
	if (cm->addr[0] && (strcmp(tcp, cm->addr) != 0 || strcmp(unix_text, cm->unix_addr) != 0)) {
		/* Restarted (--cm-restart): its ranks only know the old one. */
		output_message("error: cmserver %d came back on %s%s%s, not on %s%s%s", cm->index,
		               tcp, *unix_text ? " " : "", unix_text, cm->addr,
		               cm->unix_addr[0] ? " " : "", cm->unix_addr);
		job_stop(job, CMRUN_EXIT_FAILURE);
		return;
	}
	bool again = cm->addr[0] != '\0';
	snprintf(cm->addr, sizeof cm->addr, "%s", tcp);
	snprintf(cm->unix_addr, sizeof cm->unix_addr, "%s", unix_text);
	cm->ready = true;
	output_verbose("%s %d (pid %d) listening %son %s%s%s",
	               cm->is_standby ? "standby of cmserver" : "cmserver", cm->index, (int)cm->pid,
	               again ? "again " : "", cm->addr, *unix_text ? " " : "", unix_text);
	if (cm->is_standby && job->phase == PHASE_RUN)
		cmft_standby_ready(job, cm);
	else if (again)
		cmft_cm_listening(job, cm);
}

/* The CMs, or with --cm-standby their standbys first: a CM is started
 * with its standby's address (step() starts the CMs once all listen). */
static void job_spawn_cms(struct job *job, struct cm_proc *cms)
{
	for (int i = 0; i < job->ncms; i++) {
		if (spawn_cm(job, &cms[i]) < 0) {
			job_stop(job, CMRUN_EXIT_FAILURE);
			return;
		}
		detect_cm_spawned(job, &cms[i]);
	}
}

static void job_start_cms(struct job *job)
{
	job_enter_phase(job, PHASE_START_CMS, CMRUN_CM_START_TIMEOUT);
	job->cms_started = job->standbys == NULL;
	job_spawn_cms(job, job->standbys ? job->standbys : job->cms);
}

static int job_open_direct_listeners(struct job *job)
{
	const struct cmrun_options *o = job->opts;
	struct sockaddr_in any;
	char text[32];
	/* Reached from other hosts when some are remote. */
	snprintf(text, sizeof text, "%s:0", job->any_remote ? job->local_ip : "127.0.0.1");
	cm_parse_hostport(text, 0, &any);
	for (int i = 0; i < job->nprocs; i++) {
		struct rank_proc *r = &job->ranks[i];
		if (r->remote) {
			/* It listens itself, on its host's address, at a port
			 * known in advance (--port-base). */
			snprintf(text, sizeof text, "%s:%d", o->hosts.list[r->host_index].addr,
			         o->port_base + i);
			cm_parse_hostport(text, 0, &r->listen_addr);
			continue;
		}
		r->listen_fd = cm_tcp_listen(&any, &r->listen_addr);
		if (r->listen_fd < 0) {
			output_message("error: rank %d: cannot listen on %s: %s", i, text,
			               strerror(errno));
			return -1;
		}
	}
	job->peers = join_rank_addresses(job);
	return job->peers ? 0 : -1;
}

/* ---- bounds and steps of the phases ---- */

/* Everything still running is a CM that said it is stopping. */
static bool only_stopping_cms_left(struct job *job)
{
	int stopping = 0;
	for (int i = 0; i < job->ncms; i++)
		if (job->cms[i].state == PROC_RUNNING) {
			if (!job->cms[i].stopping)
				return false;
			stopping++;
		}
	return stopping > 0 && stopping == count_running(job);
}

/* A bounded phase ran out of time. */
static void on_phase_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct job *job = w->data;
	switch (job->phase) {
	case PHASE_START_CMS:
		for (int i = 0; i < job->ncms; i++)
			if (!job->cms[i].ready)
				output_message(
				    "error: cmserver %d (pid %d) did not report its address "
				    "within %.0f s",
				    i, (int)job->cms[i].pid, CMRUN_CM_START_TIMEOUT);
		job_fail(job, CMRUN_EXIT_FAILURE);
		break;
	case PHASE_STOP:
	case PHASE_STOP_CMS:
		if (!job->escalated && only_stopping_cms_left(job) &&
		    job->exit_waits++ < CMRUN_CM_EXIT_WAITS) {
			/* A CM freeing a long log's disk space is exiting, not
			 * hung (SIGKILL would not make it go any faster). */
			arm_phase_timer(job, CMRUN_KILL_GRACE);
			break;
		}
		if (!job->escalated) {
			output_verbose(
			    "processes still running %.0f s after SIGTERM: sending SIGKILL",
			    CMRUN_KILL_GRACE);
			signal_ranks(job, SIGKILL);
			signal_cms(job, SIGKILL);
			signal_leftovers(job, SIGKILL);
			job->escalated = true;
			arm_phase_timer(job, CMRUN_KILL_GRACE);
		} else {
			/* SIGKILL is not refused; a process stuck in the kernel
			 * is reaped by init once it goes. Do not hang on it. */
			output_message(
			    "error: %d processes did not die after SIGKILL; giving up on them",
			    count_running(job));
			for (int i = 0; i < job->nprocs; i++)
				if (job->ranks[i].state == PROC_RUNNING) {
					job->ranks[i].state = PROC_EXITED;
					job->ranks_running--;
				}
			for (int i = 0; i < job_cm_procs(job); i++) {
				struct cm_proc *cm = job_cm_proc(job, i);
				if (cm->state == PROC_RUNNING) {
					cm->state = PROC_EXITED;
					job->cms_running--;
				}
			}
			if (!job->failed)
				job_fail(job, CMRUN_EXIT_FAILURE);
		}
		break;
	case PHASE_DRAIN:
		/* What the ranks started and left behind is still running (and
		 * may hold their pipes open). */
		job->drain_ticks++;
		job->escalated = true;
		signal_leftovers(job, SIGKILL);
		if (job->drain_ticks >= 2) {
			/* A pipe still open now belongs to a process that is not
			 * cmrun's descendant any more: stop waiting for it. A
			 * source only waiting for cmrun's own output to drain is
			 * left alone (closing it loses lines), unless the job
			 * failed anyway. */
			for (int i = 0; i < job->nprocs; i++) {
				struct rank_proc *r = &job->ranks[i];
				if (r->out && (job->failed || !output_source_paused(r->out)))
					output_source_close(r->out);
				if (r->err && (job->failed || !output_source_paused(r->err)))
					output_source_close(r->err);
			}
		}
		if (job->drain_ticks == CMRUN_DRAIN_TICKS_MAX)
			output_message("error: %d processes started by ranks did not die after "
			               "SIGKILL; giving up on them",
			               signal_leftovers(job, 0));
		arm_phase_timer(job, CMRUN_DRAIN_GRACE);
		break;
	case PHASE_FLUSH: {
		/* A failed job does not wait forever on a reader that stopped
		 * reading; a successful one does (its output is the result). */
		unsigned long long written = output_bytes_written();
		if (written == job->flush_progress) {
			job->abandon_output = true;
			job->phase = PHASE_DONE;
			ev_break(loop, EVBREAK_ALL);
		} else {
			job->flush_progress = written;
			arm_phase_timer(job, CMRUN_DRAIN_GRACE);
		}
		break;
	}
	default:
		break;
	}
	/* step() runs before the loop blocks again. */
}

static bool rank_output_done(struct job *job)
{
	for (int i = 0; i < job->nprocs; i++) {
		struct rank_proc *r = &job->ranks[i];
		if ((r->out && !output_source_done(r->out)) ||
		    (r->err && !output_source_done(r->err)))
			return false;
	}
	return true;
}

static void close_cm_output(struct job *job)
{
	for (int i = 0; i < job_cm_procs(job); i++) {
		struct cm_proc *cm = job_cm_proc(job, i);
		if (cm->err) {
			output_source_drain(cm->err);
			output_source_close(cm->err);
			cm->err = NULL;
		}
	}
}

/* Moves the job along once per loop iteration, as far as it can go. */
static void step(struct job *job)
{
	for (;;) {
		enum job_phase before = job->phase;
		switch (job->phase) {
		case PHASE_START_CMS: {
			bool all_ready = true;
			struct cm_proc *starting = job->cms_started ? job->cms : job->standbys;
			for (int i = 0; i < job->ncms; i++)
				all_ready = all_ready && starting[i].ready;
			if (all_ready && !job->cms_started) {
				job->cms_started = true;
				job_spawn_cms(job, job->cms);
			} else if (all_ready) {
				job_start_ranks(job);
			}
			break;
		}
		case PHASE_RUN:
			if (job->ranks_running == 0 && job->restarts_pending == 0) {
				/* Every rank exited 0. What they left running goes. */
				job_enter_phase(job, PHASE_DRAIN, CMRUN_DRAIN_GRACE);
				job->drain_ticks = 0;
				signal_leftovers(job, SIGTERM);
			}
			break;
		case PHASE_STOP:
			if (job->ranks_running == 0 && job->cms_running == 0) {
				job_enter_phase(job, PHASE_DRAIN, CMRUN_DRAIN_GRACE);
				/* Stopping anyway: no second grace for their leftovers. */
				job->drain_ticks = 0;
				job->escalated = true;
				signal_leftovers(job, SIGKILL);
			}
			break;
		case PHASE_DRAIN:
			/* Once SIGKILL was sent, it also goes at once to what
			 * is newly re-parented to cmrun (children of a leftover
			 * that just died). */
			if (rank_output_done(job) &&
			    (signal_leftovers(job, job->escalated ? SIGKILL : 0) == 0 ||
			     job->drain_ticks >= CMRUN_DRAIN_TICKS_MAX)) {
				input_stop();
				job_enter_phase(job, PHASE_STOP_CMS, CMRUN_KILL_GRACE);
				signal_cms(job, SIGTERM);
			}
			break;
		case PHASE_STOP_CMS:
			if (job->cms_running == 0) {
				close_cm_output(job);
				job_enter_phase(job, PHASE_FLUSH,
				                job->failed ? CMRUN_DRAIN_GRACE : 0);
				job->flush_progress = output_bytes_written();
			}
			break;
		case PHASE_FLUSH:
			if (output_flushed()) {
				job->phase = PHASE_DONE;
				ev_break(job->loop, EVBREAK_ALL);
			}
			break;
		case PHASE_DONE:
			break;
		}
		if (job->phase == before)
			return;
	}
}

static void on_step(struct ev_loop *loop, ev_prepare *w, int revents)
{
	step(w->data);
}

/* ---- events ---- */

static void reap_dying_cms(struct job *job);
static void cm_exited(struct job *job, struct cm_proc *cm, int wait_status);

static void rank_exited(struct job *job, struct rank_proc *r, int wait_status)
{
	char how[96];
	/* An abort reported before this exit decides the job's status. */
	control_drain(job);
	remote_drain(job, r);
	remote_detach(job, r);
	ev_timer_stop(job->loop, &r->lost_timer); /* its exit is what counts now */
	/* A launcher says a remote rank was killed by a signal with status
	 * 128+N (a shell), or 255 (ssh: also when the host or the connection
	 * is gone): the process is lost, not failed on its own. */
	int code = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 0;
	if (r->remote && code > 128 && !r->hb_finished && !r->declared_failed) {
		r->declared_failed = true;
		if (code == 255)
			snprintf(
			    r->failed_why, sizeof r->failed_why,
			    "its launcher exited with status 255 (ssh: host or connection lost)");
		else
			snprintf(r->failed_why, sizeof r->failed_why,
			         "its launcher exited with status %d (killed by signal %d?)", code,
			         code - 128);
	}
	/* A rank cut off by a CM's death fails because of it: the CM is named
	 * first, and the rank's exit is then part of stopping the job. */
	if (job->phase == PHASE_RUN && wait_status != 0)
		reap_dying_cms(job);
	r->state = PROC_EXITED;
	r->wait_status = wait_status;
	job->ranks_running--;
	/* Its last words come before cmrun's message about it. */
	if (r->out)
		output_source_drain(r->out);
	if (r->err)
		output_source_drain(r->err);
	if (r->rank == 0 && r->replica == 0)
		input_stop();
	describe_wait_status(wait_status, how, sizeof how);
	if (job->phase == PHASE_RUN && wait_status != 0) {
		ft_note_failure(job, r, wait_status);
		if (job->opts->transport == CMRUN_TRANSPORT_REPL &&
		    (WIFSIGNALED(wait_status) || r->declared_failed)) {
			/* No restart: the rank lives on in its other replicas. */
			if (!repl_replica_failed(job, r, wait_status))
				job_fail(job, exit_status_of(wait_status));
			return;
		}
		if (ft_rank_failed(job, r, wait_status))
			return; /* restarted: the job goes on */
		if (r->declared_failed && !r->stop_reported)
			output_message("rank %d %s (declared failed: %s)", r->rank, how,
			               r->failed_why);
		else if (!r->stop_reported) /* else ft.c said why */
			output_message("rank %d %s", r->rank, how);
		job_fail(job, exit_status_of(wait_status));
	} else if (job->phase == PHASE_RUN && r->mpi_started && !r->hb_finished) {
		/* It was in MPI and left without MPI_Finalize: the others would
		 * wait for it forever (mpirun stops such a job too). */
		output_message("rank %d (pid %d) %s without calling MPI_Finalize; stopping the job",
		               r->rank, (int)r->pid, how);
		job_fail(job, CMRUN_EXIT_FAILURE);
	} else {
		output_verbose("rank %d (pid %d) %s", r->rank, (int)r->pid, how);
	}
}

/* How a CM told to stop (SIGTERM) ends: by SIGTERM; behind ssh, ssh's own
 * exit when it is the one killed (255); behind a shell, 128 + SIGTERM. */
static bool cm_stopped_as_asked(const struct cm_proc *cm, int wait_status)
{
	if (WIFSIGNALED(wait_status) && WTERMSIG(wait_status) == SIGTERM)
		return true;
	return cm->remote && WIFEXITED(wait_status) &&
	       (WEXITSTATUS(wait_status) == 255 || WEXITSTATUS(wait_status) == 128 + SIGTERM);
}

static void cm_exited(struct job *job, struct cm_proc *cm, int wait_status)
{
	char how[96];
	cm->state = PROC_EXITED;
	cm->wait_status = wait_status;
	job->cms_running--;
	if (cm->stdin_wr >= 0) {
		close(cm->stdin_wr);
		cm->stdin_wr = -1;
	}
	if (cm->err)
		output_source_drain(cm->err);
	detect_cm_exited(job, cm);
	if (cm->ready_fd >= 0) {
		ev_io_stop(job->loop, &cm->ready_io);
		close(cm->ready_fd);
		cm->ready_fd = -1;
	}
	describe_wait_status(wait_status, how, sizeof how);
	if (cm->is_standby) {
		cmft_standby_exited(job, cm, wait_status);
		return;
	}
	if (job->phase == PHASE_RUN && cmft_cm_died(job, cm, wait_status))
		return; /* restarted: the job goes on */
	/* Stopping: its standby has nothing more to copy (signal_cms). */
	if (job->phase == PHASE_STOP_CMS)
		signal_standby(job, cm->index, SIGTERM);
	if (job->phase == PHASE_START_CMS || job->phase == PHASE_RUN) {
		if (!cm->died)
			output_message("cmserver %d (pid %d) %s%s; stopping the job", cm->index,
			               (int)cm->pid, how,
			               cm->ready ? " during the run" : " while starting");
		cm->died = job->had_faults = true;
		job_fail(job, CMRUN_EXIT_FAILURE);
	} else if (job->phase == PHASE_STOP_CMS && !job->escalated && wait_status != 0 &&
	           !cm_stopped_as_asked(cm, wait_status)) {
		output_message("warning: cmserver %d %s when asked to stop", cm->index, how);
	} else {
		output_verbose("cmserver %d (pid %d) %s", cm->index, (int)cm->pid, how);
	}
}

/* How long cmrun waits for a CM whose report pipe ended to be reapable
 * (its exit is under way: unmapping a large log takes a while). */
#define CM_GONE_WAIT_MS 1000

/* A CM's report pipe ended during the run: it is dying. Reaps it (a short
 * bounded wait) and stops the job naming it, before the errors of the
 * ranks it leaves behind are judged. */
static void job_cm_gone(struct job *job, struct cm_proc *cm)
{
	int status;
	for (int waited = 0; cm->state == PROC_RUNNING; waited += 10) {
		pid_t got = waitpid(cm->pid, &status, WNOHANG);
		if (got == cm->pid) {
			cm_exited(job, cm, status);
			return;
		}
		if (got < 0 || waited >= CM_GONE_WAIT_MS)
			break;
		usleep(10000);
	}
	if (cm->state != PROC_RUNNING || job->phase != PHASE_RUN)
		return;
	if (job->opts->cm_restart) {
		/* Cut off from cmrun, it cannot go on: its exit restarts it
		 * once it is gone and its address is free. */
		kill(cm->remote ? -cm->pid : cm->pid, SIGKILL);
		return;
	}
	/* Still exiting (or reaped by the loop already): named now, its
	 * status follows with -v. */
	output_message("cmserver %d (pid %d) died during the run (its report pipe closed); "
	               "stopping the job",
	               cm->index, (int)cm->pid);
	cm->died = job->had_faults = true;
	job_fail(job, CMRUN_EXIT_FAILURE);
}

/* Before a rank's failure is judged: a local CM that is dying (its ranks
 * see their connections end before cmrun sees it exit) is reaped and
 * named first. */
static void reap_dying_cms(struct job *job)
{
	for (int i = 0; i < job->ncms && job->phase == PHASE_RUN; i++) {
		struct cm_proc *cm = &job->cms[i];
		if (cm->state == PROC_RUNNING && !cm->remote && cm->pid > 0 &&
		    !detect_process_alive(cm->pid))
			job_cm_gone(job, cm);
	}
}

static void on_child(struct ev_loop *loop, ev_child *w, int revents)
{
	struct job *job = w->data;
	if (!WIFEXITED(w->rstatus) && !WIFSIGNALED(w->rstatus))
		return;
	for (int i = 0; i < job->nprocs; i++) {
		struct rank_proc *r = &job->ranks[i];
		if (r->state == PROC_RUNNING && r->pid == w->rpid) {
			rank_exited(job, r, w->rstatus);
			return;
		}
	}
	for (int i = 0; i < job_cm_procs(job); i++) {
		struct cm_proc *cm = job_cm_proc(job, i);
		if (cm->state == PROC_RUNNING && cm->pid == w->rpid) {
			cm_exited(job, cm, w->rstatus);
			return;
		}
	}
	if (job->ckpt_pid > 0 && w->rpid == job->ckpt_pid)
		ckpt_server_exited(job, w->rstatus);
}

static void on_signal(struct ev_loop *loop, ev_signal *w, int revents)
{
	struct job *job = w->data;
	char name[32];
	signal_name(w->signum, name, sizeof name);
	switch (job->phase) {
	case PHASE_START_CMS:
	case PHASE_RUN:
		output_message("caught %s, stopping the job", name);
		job_fail(job, 128 + w->signum);
		break;
	case PHASE_FLUSH:
	case PHASE_DONE:
		/* Only output is left, and its reader is not taking it. */
		if (!job->failed)
			job_fail(job, 128 + w->signum);
		job->abandon_output = true;
		job->phase = PHASE_DONE;
		ev_break(loop, EVBREAK_ALL);
		break;
	default:
		/* Asked again while stopping: no more grace. */
		if (!job->failed)
			job_fail(job, 128 + w->signum);
		signal_ranks(job, SIGKILL);
		signal_cms(job, SIGKILL);
		signal_leftovers(job, SIGKILL);
		job->escalated = true;
		break;
	}
}

static void on_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct job *job = w->data;
	switch (job->phase) {
	case PHASE_START_CMS:
	case PHASE_RUN:
		output_message("timeout after %s", job->opts->timeout_text);
		job_fail(job, CMRUN_EXIT_TIMEOUT);
		break;
	case PHASE_FLUSH:
		if (!job->failed)
			job_fail(job, CMRUN_EXIT_TIMEOUT);
		job->abandon_output = true;
		job->phase = PHASE_DONE;
		ev_break(loop, EVBREAK_ALL);
		break;
	default:
		break; /* the stop phases are bounded on their own */
	}
}

/* ---- setup ---- */

/* output.c wants what ranks reported so far (a restored rank's filler).
 * Each report precedes the filler it announces: a local rank wrote it into
 * the control pipe first, a remote rank waited for cmrun's answer. */
static void read_reports_now(void *job)
{
	control_drain(job);
	remote_await_reports(job, 0);
}

/* The rank and CM tables, placed on their hosts. 0, or -1 printed. */
static int make_tables(struct job *job)
{
	const struct cmrun_options *o = job->opts;
	job->nprocs = o->nranks * o->replicas;
	job->ranks = calloc((size_t)job->nprocs, sizeof *job->ranks);
	job->ncms = o->transport == CMRUN_TRANSPORT_CM ? o->ncms : 0;
	job->cms = calloc((size_t)(job->ncms ? job->ncms : 1), sizeof *job->cms);
	if (job->ranks == NULL || job->cms == NULL) {
		output_message("error: out of memory");
		return -1;
	}
	for (int i = 0; i < job->nprocs; i++) {
		job->ranks[i].rank = i / o->replicas;
		job->ranks[i].replica = i % o->replicas;
		job->ranks[i].held_out = job->ranks[i].held_err = -1;
		job->ranks[i].host_index =
		    hosts_of_replica(&o->hosts, job->ranks[i].rank, job->ranks[i].replica);
		job->ranks[i].host = o->hosts.list[job->ranks[i].host_index].name;
		job->ranks[i].listen_fd = -1;
		job->ranks[i].remote = launch_is_remote(o, job->ranks[i].host_index);
		job->any_remote = job->any_remote || job->ranks[i].remote;
	}
	if (o->cm_standby && job->ncms &&
	    (job->standbys = calloc((size_t)job->ncms, sizeof *job->standbys)) == NULL) {
		output_message("error: out of memory");
		return -1;
	}
	for (int i = 0; i < job_cm_procs(job); i++) {
		bool standby = i >= job->ncms;
		struct cm_proc *cm = job_cm_proc(job, i);
		cm->index = standby ? i - job->ncms : i;
		cm->is_standby = standby;
		cm->journal_gen = standby ? 1 : 0;
		cm->ready_fd = -1;
		cm->report_fd = -1;
		cm->stdin_wr = -1;
		cm->host_index = standby ? hosts_of_standby(&o->hosts, cm->index)
		                         : hosts_of_cm(&o->hosts, cm->index);
		cm->remote = launch_is_remote(o, cm->host_index);
		job->any_remote = job->any_remote || cm->remote;
	}
	hosts_report_placement(&o->hosts, o->nranks);
	return 0;
}

/* Child exits, signals, the phase bound, the step and --timeout. */
static void watch_loop_events(struct job *job)
{
	const struct cmrun_options *o = job->opts;
	struct ev_loop *loop = job->loop;
	ev_child_init(&job->child_watcher, on_child, 0, 0);
	job->child_watcher.data = job;
	/* A CM's exit before the output of the ranks it cut off (detect.c). */
	ev_set_priority(&job->child_watcher, EV_MAXPRI);
	ev_child_start(loop, &job->child_watcher);
	ev_signal_init(&job->sigint_watcher, on_signal, SIGINT);
	ev_signal_init(&job->sigterm_watcher, on_signal, SIGTERM);
	ev_signal_init(&job->sighup_watcher, on_signal, SIGHUP);
	job->sigint_watcher.data = job->sigterm_watcher.data = job->sighup_watcher.data = job;
	ev_signal_start(loop, &job->sigint_watcher);
	ev_signal_start(loop, &job->sigterm_watcher);
	ev_signal_start(loop, &job->sighup_watcher);
	ev_init(&job->phase_timer, on_phase_timer);
	job->phase_timer.data = job;
	ev_prepare_init(&job->step_watcher, on_step);
	job->step_watcher.data = job;
	ev_prepare_start(loop, &job->step_watcher);
	if (o->timeout_ns) {
		ev_timer_init(&job->timeout_timer, on_timeout, (double)o->timeout_ns / 1e9, 0.);
		job->timeout_timer.data = job;
		ev_timer_start(loop, &job->timeout_timer);
	}
}

int job_run(struct job *job)
{
	const struct cmrun_options *o = job->opts;
	struct ev_loop *loop = job->loop;

	ev_set_userdata(loop, job);
	job->events.stop = job_stop;
	job->events.cm_ready = job_cm_ready;
	job->events.cm_gone = job_cm_gone;
	job->events.cm_took_over = cmft_standby_took_over;
	job->events.connection_lost = detect_confirm_lost;
	job->control_rd = job->control_wr = -1;
	if (make_tables(job) < 0)
		return CMRUN_EXIT_FAILURE;

	watch_loop_events(job);

	job->rank0_stdin = input_start(loop, job->ranks[0].remote);
	if (control_open(job) < 0 || remote_open(job) < 0)
		return CMRUN_EXIT_FAILURE;
	output_set_sync_hook(read_reports_now, job);
	if (job->any_remote &&
	    asprintf(&job->control_env, "%s=%s", CM_ENV_CONTROL, job->control_addr) < 0) {
		job->control_env = NULL;
		output_message("error: out of memory");
		return CMRUN_EXIT_FAILURE;
	}
	if (o->transport != CMRUN_TRANSPORT_CM) {
		if (job_open_direct_listeners(job) < 0)
			return CMRUN_EXIT_FAILURE;
		job_enter_phase(job, PHASE_START_CMS, 0); /* no CM: step() starts the ranks */
	} else if (ckpt_server_start(job) < 0) {
		return CMRUN_EXIT_FAILURE;
	} else if (cmft_open(job) < 0) {
		ckpt_server_stop(job);
		return CMRUN_EXIT_FAILURE;
	} else {
		job_start_cms(job);
	}
	ev_run(loop, 0);
	cmft_close(job);

	ft_final_status(job);
	ft_report(job);
	ckpt_server_finish(job);
	input_stop();
	control_close(job);
	remote_close(job);
	return job->failed ? job->exit_status : 0;
}

void job_free(struct job *job)
{
	repl_close_held(job);
	for (int i = 0; job->ranks && i < job->nprocs; i++) {
		if (job->ranks[i].listen_fd >= 0)
			close(job->ranks[i].listen_fd);
		free(job->ranks[i].cms_env);
	}
	for (int i = 0; job->rank_env && job->rank_env[i]; i++)
		free(job->rank_env[i]);
	free(job->rank_env);
	free(job->ranks);
	free(job->cms);
	free(job->standbys);
	free(job->peers);
	free(job->control_env);
	free(job->base_env);
	free(job->program_path);
	free(job->cmserver_path);
	if (job->devnull_fd >= 0)
		close(job->devnull_fd);
	memset(job, 0, sizeof *job);
}
