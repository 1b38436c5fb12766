/* cmrun command line: parsing and validation. Every bad option is reported
 * with a clear message and exit status 2 before anything is started. */
#ifndef CMRUN_OPTIONS_H
#define CMRUN_OPTIONS_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "cmdline.h"
#include "hosts.h"

#define CMRUN_MAX_RANKS 4096
#define CMRUN_MAX_CMS 256
#define CMRUN_EXIT_USAGE 2
#define CMRUN_DEFAULT_MAX_RESTARTS 3
#define CMRUN_DEFAULT_KILL_COUNT 5
#define CMRUN_MAX_KILL_COUNT 100000
#define CMRUN_MAX_REPLICAS 4
#define CMRUN_MAX_KILL_CM_AT 64 /* --kill-cm-at given this many times at most */
/* --heartbeat-timeout default: long enough that a rank descheduled on a
 * loaded machine, or one writing a large checkpoint, is not taken for a hung
 * one (false kills cost a re-execution); short enough that a hung job is
 * noticed in seconds rather than at --timeout. */
#define CMRUN_DEFAULT_HEARTBEAT_TIMEOUT_NS 10000000000ull
#define CMRUN_MIN_HEARTBEAT_TIMEOUT_NS 10000000ull /* 10ms: beats every 2.5ms */
#define CMRUN_MAX_HEARTBEAT_TIMEOUT_S 3600

/* --launch: how a process gets to its host (dispatcher/launch.c). */
enum launch_kind {
	LAUNCH_LOCAL,    /* a child of cmrun on this machine (hosts are labels) */
	LAUNCH_SSH,      /* ssh -o BatchMode=yes ... {addr} {cmd} */
	LAUNCH_SRUN,     /* srun --nodelist {host} -N1 -n1 ... {cmd} */
	LAUNCH_NETNS,    /* ip netns exec {host} {cmd} */
	LAUNCH_TEMPLATE, /* the user's own, run by /bin/sh -c */
};
/* --port-base default: direct-transport ranks on remote hosts listen on
 * PORT_BASE + their index (replica processes counted). Below Linux's
 * ephemeral range (32768-60999): a port in it can already be the local end
 * of an outgoing connection on that host, and the rank's bind then fails. */
#define CMRUN_DEFAULT_PORT_BASE 27000

/* cmserver options cmrun hands to every CM it starts, under the same names
 * (options.c keeps their table: how each is checked, how it is passed). */
enum cmrun_cm_opt {
	CMRUN_CM_LOG_MEM,         /* --log-mem BYTES */
	CMRUN_CM_SPILL_DIR,       /* --spill-dir DIR: CM k gets DIR/cm-k */
	CMRUN_CM_NO_SPILL,        /* --no-spill */
	CMRUN_CM_CUT_THROUGH_MIN, /* --cut-through-min BYTES */
	CMRUN_CM_THREADS,         /* --threads N (multiplexer, specialized) */
	CMRUN_CM_OPTS,
};
/* cmserver's own --threads range: a wider one would start a CM only for it
 * to refuse the count after the ranks' placement was done. */
#define CMRUN_MAX_CM_THREADS 64
/* Command-line words cmrun_cm_argv appends at most. */
#define CMRUN_CM_ARGV_MAX (2 * CMRUN_CM_OPTS)

enum cmrun_transport {
	CMRUN_TRANSPORT_CM,
	CMRUN_TRANSPORT_DIRECT,
	CMRUN_TRANSPORT_REPL, /* --replicate: direct mesh of replicas (docs/replication.md) */
};

struct cmrun_options {
	int nranks;                     /* -n */
	int ncms;                       /* --cms (transport cm only) */
	const char *mode;               /* --mode, passed to cmserver */
	enum cmrun_transport transport; /* --transport */
	bool tag_output;                /* --tag-output */
	uint64_t timeout_ns;            /* --timeout, 0 = none */
	const char *timeout_text;       /* as the user wrote it, for the timeout message */
	uint64_t max_message;           /* --max-message, 0 = cmserver's default */
	bool cm_socket_tcp; /* --cm-socket tcp: no unix socket even for a CM on the rank's host */
	int verbosity;      /* --verbose, repeatable */
	/* Fault tolerance (transport cm only; see docs/fault-tolerance.md). */
	int max_restarts;       /* --max-restarts, per rank */
	uint64_t kill_every_ns; /* --kill-every, 0 = no periodic kills */
	int kill_rank;          /* --kill-rank, -1 = random */
	int kill_count;         /* --kill-count: injected kills at most */
	int kill_signal;        /* --kill-signal */
	uint64_t seed;          /* --seed */
	bool have_seed;
	int kill_at_rank; /* --kill-at RANK:DELAY, -1 = none */
	uint64_t kill_at_ns;
	/* Channel memory restarts (cm_restart.c). */
	bool cm_restart;           /* --cm-restart (--cm-standby implies it) */
	bool cm_standby;           /* --cm-standby */
	int max_cm_restarts;       /* --max-cm-restarts, per CM */
	uint64_t kill_cm_every_ns; /* --kill-cm-every, 0 = none */
	int nkill_cm_at;           /* --kill-cm-at CM:DELAY entries, sorted by delay */
	struct cmrun_kill_cm_at {
		int cm;
		uint64_t ns;
	} kill_cm_at[CMRUN_MAX_KILL_CM_AT];
	bool status;    /* --status */
	bool no_status; /* --no-status (the default is on when stderr is a terminal) */
	/* Detection (docs/fault-tolerance.md): 0 = heartbeats off. */
	uint64_t heartbeat_timeout_ns; /* --heartbeat-timeout */
	/* Application checkpoints (ckpt.c): NULL = none. */
	const char *ckpt_dir;   /* --ckpt-dir */
	const char *ckpt_every; /* --ckpt-every, as given (the ranks parse it) */
	bool ckpt_keep;         /* --ckpt-keep: images stay after a successful job */
	const char *heartbeat_timeout_text;
	/* Placement (--hosts FILE / --host LIST; one host "localhost" with a
	 * slot per rank without them). */
	struct cmrun_hosts hosts;
	const char *hosts_source; /* "FILE" or "--host", for messages */
	bool print_map;           /* --print-map */
	int kill_host;            /* --kill-host NAME@T: index in hosts, -1 = none */
	uint64_t kill_host_ns;
	/* Launching (launch.c). */
	enum launch_kind launch;     /* --launch, or the default for the hosts */
	const char *launch_template; /* LAUNCH_TEMPLATE: with {host} {addr} {cmd} */
	const char *control_addr;    /* --control-addr IPv4, NULL: found from the hosts */
	int port_base;               /* --port-base */
	/* --export NAME[=VALUE], repeatable: "NAME=VALUE" entries remote ranks
	 * get in their command (ssh forwards no environment). */
	char **exports;
	int nexports;
	int replicas;     /* --replicate r (transport repl), else 1 */
	int kill_replica; /* --kill-replica: the replica --kill-at kills (repl; -1: the last) */
	char *const *program_argv; /* PROGRAM ARGS..., NULL-terminated (points into argv) */
	/* The CM options as cmserver takes them: a plain byte or thread
	 * count, the spill directory made absolute, "" for a flag; an empty
	 * first byte with cm_opt_given false: not given. */
	bool cm_opt_given[CMRUN_CM_OPTS];
	char cm_opt_value[CMRUN_CM_OPTS][PATH_MAX];
};

/* cmrun's options: the table --help, --help-man and the parser share. */
extern const struct cmdline_prog cmrun_cmdline;

/* Parses and checks argv into opts. Returns CMDLINE_OK, CMDLINE_ERROR with
 * the message in st->err (a usage error: exit status 2), or what to show
 * instead of running (--help, --version). Never exits; whatever the result,
 * cmrun_options_free releases what opts holds. */
int cmrun_parse_options(int argc, char **argv, struct cmrun_options *opts,
                        struct cmdline_state *st);
void cmrun_options_free(struct cmrun_options *o);

const char *cmrun_transport_name(enum cmrun_transport t);

/* Appends the CM options given to cmrun to argv at *argc, as every CM
 * takes them. At most CMRUN_CM_ARGV_MAX words. */
void cmrun_cm_argv(const struct cmrun_options *o, char **argv, int *argc);

#endif
