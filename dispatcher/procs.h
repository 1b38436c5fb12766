/* What a rank process and a channel-memory process are: the entries of
 * the job's rank and CM tables (struct job, job.h), and the helpers over
 * those tables (procs.c: wait statuses and other wording for messages,
 * signalling, address lists). */
#ifndef CMRUN_PROCS_H
#define CMRUN_PROCS_H

#include <ev.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "net.h"
#include "protocol.h"

struct job;
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
	/* --cm-standby (cm_restart.c). An entry of job->standbys is CM
	 * index's standby; an entry of job->cms whose standby took over runs
	 * on the standby's journal and host from then on. */
	bool is_standby;
	bool took_over;        /* standby: it said "takeover" */
	bool used;             /* standby: it took over, or died: not there any more */
	bool awaiting_standby; /* CM: died, its standby is expected to take over */
	/* Which journal file: a CM's own (0), or the copy of its g-th standby
	 * (g >= 1), which a CM whose standby took over serves from. */
	unsigned journal_gen;
	unsigned standby_replaced; /* CM: standbys started in place of one that died */
	bool mirrored;             /* CM: its process copies its journal to the standby */
	bool reprotected;          /* CM: killed by cmrun to be started with its new standby */
	/* CM: starts its new standby once the old one's takeover is handled
	 * (not from inside the handler of the report that said it). */
	ev_timer new_standby_timer;
};

/* ---- procs.c ---- */

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
/* sig to CM cm's standby (--cm-standby), if it runs. */
void signal_standby(struct job *job, int cm, int sig);
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
