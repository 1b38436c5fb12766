/* What a job is: its options, its rank and channel-memory tables (the
 * entries are in procs.h), the phase it is in, and the events the files
 * below the loop report up through. job.c runs it. */
#ifndef CMRUN_JOB_H
#define CMRUN_JOB_H

#include <ev.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <sys/types.h>

#include "net.h"
#include "options.h"
#include "procs.h"
#include "protocol.h"

enum job_phase {
	PHASE_START_CMS, /* waiting for every CM's address */
	PHASE_RUN,       /* ranks running */
	PHASE_STOP,      /* failure, signal or timeout: ranks and CMs told to stop */
	PHASE_DRAIN,     /* every rank reaped: reading the rest of their output (bounded) */
	PHASE_STOP_CMS,  /* CMs told to stop, waiting (bounded) */
	PHASE_FLUSH,     /* every child reaped: writing out what is queued */
	PHASE_DONE,
};

struct job;

/* What the files below the event loop report to it: they never call it.
 * job_run fills this in before anything starts. */
struct job_events {
	/* Stop the job with that status (the first reason decides). */
	void (*stop)(struct job *job, int status);
	/* CM cm reported where it listens, "HOST:PORT" then " unix:@NAME"
	 * unless it runs --no-unix (detect.c). */
	void (*cm_ready)(struct job *job, struct cm_proc *cm, const char *text);
	/* CM cm's report pipe ended during the run: it is dying (detect.c). */
	void (*cm_gone)(struct job *job, struct cm_proc *cm);
	/* Standby sb reported it took over (detect.c). */
	void (*cm_took_over)(struct job *job, struct cm_proc *sb);
	/* r's control connection ended while it ran, without "finalized"
	 * (remote.c); r->lost_incarnation and r->lost_cm say which. */
	void (*connection_lost)(struct job *job, struct rank_proc *r);
};

struct job {
	const struct cmrun_options *opts;
	struct job_events events;
	struct ev_loop *loop;
	char secret[CM_SECRET_LEN + 1];
	char *program_path;  /* PROGRAM resolved like execvp */
	char *cmserver_path; /* transport cm */
	int devnull_fd;

	struct rank_proc *ranks; /* nprocs entries: rank * replicas + replica */
	int nprocs;              /* opts->nranks * opts->replicas */
	int ranks_running;
	struct cm_proc *cms; /* ncms entries (0 for transport direct) */
	/* --cm-standby: ncms entries, standbys[i] is CM i's; else NULL. Their
	 * processes count in cms_running. */
	struct cm_proc *standbys;
	bool cms_started; /* --cm-standby: the CMs, once their standbys listen */
	int ncms;
	int cms_running;
	char *peers;     /* CHANMEM_PEERS value (transport direct) */
	char **base_env; /* the user's environment minus the job variables */
	size_t base_env_len;
	char **rank_env;       /* CHANMEM_* entries common to every rank, NULL-terminated */
	int standbys_env_slot; /* rank_env's CHANMEM_CM_STANDBYS entry, or -1 */
	int rank0_stdin;       /* read end of the pipe cmrun feeds rank 0's stdin from, or -1 */
	int control_rd, control_wr; /* control.c: ranks' reports (MPI_Abort) */
	ev_io control_io;
	char control_buf[256];
	size_t control_len;

	enum job_phase phase;
	bool failed;
	int exit_status;
	bool escalated;                    /* SIGKILL already sent in this phase */
	int exit_waits;                    /* grace periods given to stopping CMs */
	int drain_ticks;                   /* phase_timer expiries while draining */
	bool abandon_output;               /* exit without waiting for the writers */
	unsigned long long flush_progress; /* output_bytes_written() at the last check */

	ev_child child_watcher;
	ev_signal sigint_watcher, sigterm_watcher, sighup_watcher;
	ev_timer timeout_timer;  /* --timeout */
	ev_timer phase_timer;    /* bound of the current phase (CM start, drain, grace) */
	ev_prepare step_watcher; /* re-evaluates the phase once per loop iteration */

	/* Fault tolerance (ft.c). */
	int restarts_total;
	int restarts_pending; /* remote ranks lost, restart decided later (remote.c) */
	int kills_done;
	bool had_faults;        /* a rank or CM failed during the run: ft_report says so */
	uint64_t rng;           /* --seed */
	ev_timer kill_timer;    /* --kill-every */
	ev_timer kill_at_timer; /* --kill-at */
	ev_timer status_timer;  /* --status */
	bool status_on;         /* --status, or stderr is a terminal */
	bool status_shown;
	ev_timer kill_host_timer; /* --kill-host */
	ev_timer heartbeat_timer; /* detect.c: checks heartbeat ages */
	/* --cm-restart (cm_restart.c): the CMs' journal directory (NULL when
	 * none), restarts and kills of CMs. */
	char *journal_dir;
	int cm_restarts_total;
	int cm_kills_done, cm_every_kills;
	int kill_cm_at_next;       /* next --kill-cm-at entry */
	ev_tstamp ft_started;      /* when the ranks started: --kill-cm-at's origin */
	ev_timer kill_cm_timer;    /* --kill-cm-every */
	ev_timer kill_cm_at_timer; /* --kill-cm-at */

	/* Remote processes (remote.c): the TCP control listener they report
	 * to, its "IP:PORT" (CHANMEM_CONTROL), and the address servers on
	 * this machine listen on so remote ranks reach them. */
	bool any_remote;
	int ctrl_listen_fd;
	ev_io ctrl_accept_io;
	struct ctrl_conn *conns; /* every open control connection */
	int nconns;
	bool ctrl_evicting;  /* said once that unidentified ones are dropped */
	ev_timer ctrl_pause; /* accepting paused: out of descriptors */
	char control_addr[32];
	char *control_env; /* "CHANMEM_CONTROL=IP:PORT" */
	char local_ip[16];
	bool *host_dead;     /* per host: lost (node failure), ranks moved away */
	ev_timer host_timer; /* deciding whether a lost rank's host is dead */

	/* --ckpt-dir (ckpt.c): the checkpoint server, 0 when none. */
	pid_t ckpt_pid;
	int ckpt_stdin; /* remote: write end of its stdin, or -1 */
	char ckpt_addr[32];
	char ckpt_job_id[24];
};

/* Heartbeat interval variable handed to ranks (the name client/heartbeat.h
 * reads; it belongs in common/jobenv.h). */
#define CMRUN_ENV_HEARTBEAT_MS "CHANMEM_HEARTBEAT_MS"
/* --cm-restart: seconds a rank keeps reconnecting to a CM it lost (the
 * client reads it; without it a lost CM connection is fatal). */
#define CMRUN_ENV_CM_RECONNECT "CHANMEM_CM_RECONNECT"
#define CMRUN_CM_RECONNECT_S 30
/* The largest journal a CM copies to a new standby after a takeover while
 * its ranks wait (about 2 s at the 2.3 GB/s measured on one machine). */
#define CMRUN_REPROTECT_MAX_BYTES (4ull << 30)
/* Standbys of one CM started in place of one that died (not taken over). */
#define CMRUN_STANDBY_REPLACE_MAX 3
/* A CM's "lost" report is acted on after this long if the process is still
 * alive and not exiting: a rank that exits on its own (its sockets close
 * first) is reaped by then and judged by its exit status instead. */
#define CMRUN_LOST_CONFIRM 0.25

/* A lost rank on a remote host: how long cmrun waits for the other ranks
 * of the host before it decides whether the host is dead (a node crash
 * takes every process of the host within this). */
#define CMRUN_HOST_CONFIRM 0.5

/* Bounds of the phases (seconds). */
#define CMRUN_CM_START_TIMEOUT 10.0
/* --cm-restart: a restarted CM that died before it listened is started
 * again after this long (what took its address may be gone by then). */
#define CMRUN_CM_RETRY_DELAY 0.5
#define CMRUN_KILL_GRACE 2.0
/* Grace periods a CM that said "stopping" gets before SIGKILL (it frees its
 * spill store's disk space, a second or so per 4 GB on this machine). */
#define CMRUN_CM_EXIT_WAITS 30
#define CMRUN_DRAIN_GRACE 2.0
#define CMRUN_DRAIN_TICKS_MAX 4 /* DRAIN_GRACE periods before giving up on leftovers */

/* Exit statuses of cmrun itself. */
#define CMRUN_EXIT_FAILURE 1 /* cmrun or a cmserver failed */
#define CMRUN_EXIT_TIMEOUT 124
#define CMRUN_EXIT_NOT_EXECUTABLE 126
#define CMRUN_EXIT_NOT_FOUND 127

/* job.c: runs the job to its end and returns cmrun's exit status. */
/* Every cmserver process entry, for what applies to each alike: the CMs,
 * then with --cm-standby their standbys. */
static inline int job_cm_procs(const struct job *job)
{
	return job->ncms * (job->standbys ? 2 : 1);
}

static inline struct cm_proc *job_cm_proc(struct job *job, int i)
{
	return i < job->ncms ? &job->cms[i] : &job->standbys[i - job->ncms];
}

int job_run(struct job *job);
/* Releases what the job holds (after job_run and output_shutdown). */
void job_free(struct job *job);

#endif
