/* The job cmrun runs: its rank table, its channel-memory table, and the
 * phase it is in. Shared by spawning (spawn.c), the event loop (job.c) and
 * main (cmrun.c). */
#ifndef CMRUN_JOB_H
#define CMRUN_JOB_H

#include <ev.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <sys/types.h>

#include "net.h"
#include "options.h"
#include "protocol.h"

struct out_source;
struct ctrl_conn;

enum proc_state {
	PROC_NOT_STARTED,
	PROC_RUNNING,
	PROC_EXITED, /* reaped; wait_status holds how */
};

/* One MPI rank. A restart spawns the same entry again with
 * incarnation + 1; rank number, arguments and environment stay the same. */
struct rank_proc {
	int rank;
	pid_t pid; /* current incarnation; also its process group id */
	unsigned incarnation;
	const char *host; /* placement: name of its host (opts->hosts) */
	int host_index;
	bool remote;            /* started through a launcher (launch.h) */
	struct ctrl_conn *ctrl; /* remote: its control connection (remote.c), or NULL */
	bool relocate_pending;  /* lost: waiting to see whether its host is dead */
	enum proc_state state;
	int wait_status;
	/* Transport cm: "CHANMEM_CMS=..." of its current incarnation (unix
	 * addresses of the CMs on its host, TCP for the others), or NULL. */
	char *cms_env;
	int listen_fd; /* direct transport: the rank's listening socket, kept
	                  open here so a restarted incarnation gets the same one */
	struct sockaddr_in listen_addr;
	struct out_source *out, *err;
	int restarts; /* fault tolerance: restarts of this rank so far */
	/* Bytes its incarnations wrote to stdout / stderr (the furthest any
	 * got): a new incarnation's first that many bytes are not forwarded. */
	unsigned long long out_seen, err_seen;
	/* Replication (repl.c): this process's replica index; whether its
	 * output is the one forwarded (the rank's first live replica); the
	 * read ends of its pipes while it is not (-1 otherwise). */
	int replica;
	bool forwarded;
	int held_out, held_err;
	/* Detection (detect.c), reset at every spawn. declared_failed: cmrun
	 * killed this incarnation (lost connection, no heartbeat), so however
	 * it ends it is a failure to restart, once. */
	bool declared_failed;
	char failed_why[96];
	bool stop_reported;  /* ft.c said why its death stops the job */
	ev_timer lost_timer; /* a CM reported the connection lost: confirm */
	unsigned lost_incarnation;
	int lost_cm; /* -1: the control connection ended (remote.c) */
	/* Failure handling (ft.c), for the current incarnation unless said:
	 * reset at every spawn. */
	bool mpi_started;         /* it said "init": it is in MPI (finalized: hb_finished) */
	bool from_image;          /* it resumed from a checkpoint image */
	unsigned long long image; /* which one (its number), if from_image */
	bool kill_injected;       /* cmrun sent it a fault-injection signal */
	bool crashed;             /* it said "crashed": crash_sig at crash_progress */
	int crash_sig;
	unsigned long crash_progress;
	/* The previous incarnation's crash, if it crashed on its own: a
	 * re-execution dying the same way at the same point is a bug. */
	bool prev_crashed;
	int prev_crash_sig;
	unsigned long prev_crash_progress;
	bool prev_from_image;
	unsigned long long prev_image;
	/* The fault report (ft.c), over the whole run. */
	int injected_kills, other_failures;
	int restarts_from_image, restarts_from_start;
	ev_tstamp died_at;           /* when the last failure was seen, until "init" */
	double down_total, down_max; /* failure seen -> next incarnation in MPI_Init */
	int down_count;
	char first_failure[160]; /* "killed by signal SIGSEGV", first one not injected */
	bool hb_watched;         /* a heartbeat of this incarnation came */
	bool hb_finished;        /* it said "finalized": no more heartbeats expected */
	ev_tstamp hb_last;       /* when the last one came */
};

/* One channel memory (cmserver process). */
struct cm_proc {
	int index;
	pid_t pid;
	enum proc_state state;
	int wait_status;
	int host_index;
	bool remote; /* through a launcher: address and reports come on its stdout */
	bool ready;
	char addr[32]; /* "HOST:PORT" it listens on, once ready */
	/* "unix:@NAME": its abstract unix socket, for ranks on its host; ""
	 * when it has none (cmserver --no-unix). */
	char unix_addr[CM_ADDR_TEXT_MAX];
	int stdin_wr; /* remote: write end of its stdin (closing it stops it), or -1 */
	int ready_fd; /* read end of the --ready-fd pipe until the address came */
	ev_io ready_io;
	char ready_buf[48 + CM_ADDR_TEXT_MAX];
	size_t ready_len;
	struct out_source *err;
	/* --report-fd pipe (detect.c): "lost R I" and "stats BYTES REPLAYED". */
	int report_fd; /* read end, -1 once closed */
	ev_io report_io;
	char report_buf[256];
	size_t report_len;
	unsigned long long log_bytes, replayed, events_replayed;
	bool died;     /* exited during the run on its own (the job's first error) */
	bool stopping; /* said "stopping": freeing its spill store, not hung */
	/* --cm-restart (cm_restart.c), over the whole run unless said. */
	int restarts;
	int injected_kills, other_deaths;
	bool kill_injected;          /* cmrun sent the current process SIGKILL */
	char first_death[96];        /* "killed by signal SIGSEGV", the first not injected */
	ev_tstamp died_at;           /* its last death, until it listens again */
	double down_total, down_max; /* death -> listening again */
	int down_count;
	ev_timer start_timer; /* a restarted CM's bound to report its address,
	                         or the pause before restarting it again */
	/* The replay counters of its earlier processes (each reports its own). */
	unsigned long long replayed_before, events_replayed_before;
};

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
	int ncms;
	int cms_running;
	char *peers;     /* CHANMEM_PEERS value (transport direct) */
	char **base_env; /* the user's environment minus the job variables */
	size_t base_env_len;
	char **rank_env; /* CHANMEM_* entries common to every rank, NULL-terminated */
	int rank0_stdin; /* read end of the pipe cmrun feeds rank 0's stdin from, or -1 */
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
int job_run(struct job *job);
/* Releases what the job holds (after job_run and output_shutdown). */
void job_free(struct job *job);
/* cm_restart.c: --cm-restart, --kill-cm-at, --kill-cm-every. */
/* Makes the journal directory (--cm-restart). 0, or -1 printed. */
int cmft_open(struct job *job);
/* Removes it and what it holds (the job is over, however it ended). */
void cmft_close(struct job *job);
/* CM cm (marked exited, pipes read) ended during the run. Restarts it when
 * --cm-restart allows; true if it did (the job goes on), false when the
 * job must stop (a message saying why was printed if a limit did it). */
bool cmft_cm_died(struct job *job, struct cm_proc *cm, int wait_status);
/* A restarted CM reported its address again. */
void cmft_cm_listening(struct job *job, struct cm_proc *cm);
/* Arms and stops --kill-cm-at and --kill-cm-every (ft_start, ft_stop). */
void cmft_start(struct job *job);
void cmft_stop(struct job *job);
/* The fault report's lines about CM deaths and restarts. */
void cmft_report(struct job *job);

/* ft.c: fault tolerance. */
/* Called once the ranks are started: arms fault injection and the status
 * line. */
void ft_start(struct job *job);
/* The job is stopping or done: no more kills; the final status line. */
void ft_stop(struct job *job);
/* The job is over (every CM reaped, its last counters read): the final
 * status line, if the status line is on. */
void ft_final_status(struct job *job);
/* Rank r (already marked exited, output drained) died with wait_status in
 * the run phase. Restarts it when that is what fault tolerance does;
 * returns true if it did (the job goes on), false when the job must stop
 * (a message saying why was printed if it is a restart limit). */
bool ft_rank_failed(struct job *job, struct rank_proc *r, int wait_status);
/* Counts r's death during the run (by a signal, or declared failed) for
 * the fault report, before it is judged. */
void ft_note_failure(struct job *job, struct rank_proc *r, int wait_status);
/* The end of a run that had faults: what failed, what was restarted from
 * where, what was replayed, how long ranks were down (stderr). */
void ft_report(struct job *job);

/* detect.c: failure detection. */
/* Starts reading a just-spawned CM's report pipe and ready pipe. */
void detect_cm_spawned(struct job *job, struct cm_proc *cm);
/* The CM exited: reads what is left in its report pipe, closes it. */
void detect_cm_exited(struct job *job, struct cm_proc *cm);
/* Arms the heartbeat check (run phase), and stops it. */
void detect_start(struct job *job);
void detect_stop(struct job *job);
/* r's connection (to CM r->lost_cm, or -1: its control connection) ended:
 * declared failed CMRUN_LOST_CONFIRM later if still alive then. */
void detect_confirm_lost(struct job *job, struct rank_proc *r);
/* Kills r (SIGKILL, by pid) and marks it failed for why: its exit then
 * restarts it like a rank killed by a signal. */
void detect_declare_failed(struct job *job, struct rank_proc *r, const char *why);
/* Sum of the CMs' replay counters, for the status line. */
unsigned long long detect_replayed(const struct job *job);
unsigned long long detect_events_replayed(const struct job *job);
/* Alive: not a zombie and not exiting (/proc); unknown counts as alive. */
bool detect_process_alive(pid_t pid);

/* remote.c: control connections of remote processes. */
/* Listens for them (when some process is remote). Returns 0 or -1
 * (printed). */
int remote_open(struct job *job);
/* Reads what r's connection holds (before its exit is judged). */
void remote_drain(struct job *job, struct rank_proc *r);
/* Waits up to wait_ms for what remote processes report and handles it: a
 * restored rank announces its output filler on its control connection
 * before writing it on its output, which travels another way. */
void remote_await_reports(struct job *job, int wait_ms);
/* Closes r's connection: a remote process whose connection ends exits. */
void remote_detach(struct job *job, struct rank_proc *r);
/* Closes every connection and the listener (teardown). */
void remote_close(struct job *job);
/* control.c: one report line ("abort R C", "heartbeat R I K", ...). */
void control_handle_line(struct job *job, const char *line);

/* repl.c: replication (--replicate). */
/* Keeps or forwards the output pipes of a just-spawned replica. */
void repl_spawned(struct job *job, struct rank_proc *r, int out_fd, int err_fd, const char *prefix);
/* Replica r died by a signal in the run phase: true if the rank goes on
 * (another replica is alive or finished), false when every replica of it
 * is dead (a message says so). */
bool repl_replica_failed(struct job *job, struct rank_proc *r, int wait_status);
/* Closes held pipes (job end). */
void repl_close_held(struct job *job);

/* procs.c */

/* How a wait status reads to a user ("exited with status 3", "killed by
 * signal SIGSEGV"), and as an exit status (128+signal for a signal). */
void describe_wait_status(int wait_status, char *buf, size_t len);
int exit_status_of(int wait_status);
/* "SIGTERM", or the number. */
void signal_name(int sig, char *buf, size_t len);

/* Where an incarnation began, for messages: "resumed from checkpoint
 * image N" or "re-executed from the start". */
void describe_start(bool from_image, unsigned long long image, char *buf, size_t len);
/* The next number of the --seed sequence (seeded by ft_start). */
uint64_t job_random(struct job *job);
/* For the fault report: "1 injected kill, 2 NOUNs (first: FIRST)", and
 * "; BACK 0.012 s after its NOUN" (count 1) or the mean and the most. */
void describe_failures(int injected, int other, const char *noun, const char *first, char *buf,
                       size_t len);
void describe_down(const char *back, const char *noun, int count, double total, double max,
                   char *buf, size_t len);

/* sig to every running rank's process group, and to every running CM's. */
void signal_ranks(struct job *job, int sig);
void signal_cms(struct job *job, int sig);
/* sig (0: none) to what exited ranks left running, now cmrun's children;
 * returns how many there are. */
int signal_leftovers(struct job *job, int sig);
/* Ranks and CMs not reaped yet. */
int count_running(struct job *job);

/* "h:p,h:p,..." of the ranks' listening sockets (direct transports);
 * malloc'd, NULL when out of memory. */
char *join_rank_addresses(struct job *job);
/* "CHANMEM_CMS=..." for rank process r where it is placed now: each CM on
 * its host by its unix address (unless --cm-socket tcp or the CM has none),
 * the others by TCP. malloc'd, NULL when out of memory. */
char *cms_env_for(struct job *job, const struct rank_proc *r);

#endif
