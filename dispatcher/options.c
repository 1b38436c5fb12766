#include <config.h>

#include "options.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <arpa/inet.h>
#include <sys/stat.h>
#include <unistd.h>

#include "launch.h"
#include "units.h"

static const char *const known_modes[] = {"mono", "thread-per-client", "multiplexer",
                                          "specialized"};

/* The CM options: a row each, so that a new cmserver option reaches the CMs
 * with one line here and one in the help. */
enum cm_opt_kind { CM_OPT_SIZE, CM_OPT_COUNT, CM_OPT_DIR, CM_OPT_FLAG };
static const struct cm_opt_spec {
	const char *flag; /* the same on cmrun's command line and cmserver's */
	enum cm_opt_kind kind;
	uint64_t min, max;
	const char *wants; /* "--FLAG takes WANTS, not '...'" */
} cm_opt_specs[CMRUN_CM_OPTS] = {
    [CMRUN_CM_LOG_MEM] = {"--log-mem", CM_OPT_SIZE, 0, UINT64_MAX, "a size such as 512MiB"},
    [CMRUN_CM_SPILL_DIR] = {"--spill-dir", CM_OPT_DIR, 0, 0, "a directory"},
    [CMRUN_CM_NO_SPILL] = {"--no-spill", CM_OPT_FLAG, 0, 0, NULL},
    [CMRUN_CM_CUT_THROUGH_MIN] = {"--cut-through-min", CM_OPT_SIZE, 0, UINT32_MAX,
                                  "a size from 0 (off) to 4GiB-1 such as 256KiB"},
    [CMRUN_CM_THREADS] = {"--threads", CM_OPT_COUNT, 1, CMRUN_MAX_CM_THREADS,
                          "a number of threads from 1 to 64"},
};

static void usage(FILE *out)
{
	fprintf(
	    out,
	    "Usage: cmrun -n N [OPTIONS] [--] PROGRAM [ARGS...]\n"
	    "Starts N ranks of PROGRAM (looked up in PATH, then in the current directory)\n"
	    "on this machine, with K channel memories (cmserver) or a direct TCP mesh\n"
	    "between them, and forwards their output.\n"
	    "\n"
	    "  -n, -np, --np N        number of ranks (1..%d)\n"
	    "      --cms K            channel memories to start (1..%d, default 1; transport cm)\n"
	    "      --mode M           cmserver mode: mono, thread-per-client, multiplexer,\n"
	    "                         specialized (default mono; transport cm)\n"
	    "      --transport T      cm (default: every message through a channel memory)\n"
	    "                         or direct (TCP between ranks, no fault tolerance)\n"
	    "      --tag-output       prefix every output line with \"[RANK] \"\n"
	    "      --timeout T        stop the job after T (e.g. 30s, 500ms, 2m; 0: never);\n"
	    "                         exit status 124\n"
	    "      --max-message B    largest message payload the CMs accept (e.g. 64MiB)\n"
	    "      --cm-socket S      how ranks reach their CMs: auto (default: an abstract\n"
	    "                         unix socket when rank and CM are on the same host,\n"
	    "                         cheaper than TCP loopback; TCP otherwise) or tcp\n"
	    "                         (TCP everywhere)\n"
	    "\n"
	    "Channel memory options (transport cm), given to every cmserver cmrun starts\n"
	    "(cmserver --help has the details; the defaults are cmserver's):\n"
	    "      --log-mem B        bound on each CM's message memory (e.g. 512MiB;\n"
	    "                         default 1GiB, or a quarter of the host's memory if\n"
	    "                         less): past half of it the log spills to disk, at it\n"
	    "                         the CM holds the senders back\n"
	    "      --spill-dir DIR    where the CMs spill (DIR must exist on each CM's\n"
	    "                         host; every CM's files have unique names and are\n"
	    "                         unlinked once open: nothing stays). Default: a new\n"
	    "                         directory under the CM's $TMPDIR, removed at once\n"
	    "      --no-spill         drop the log past --log-mem instead of spilling it: a\n"
	    "                         rank restarted after that cannot be replayed\n"
	    "      --cut-through-min B  forward messages of at least B bytes as they arrive\n"
	    "                         (default 256KiB; 0: off)\n"
	    "      --threads N        cmserver threads of --mode multiplexer or specialized\n"
	    "                         (1..%d; default $CHANMEM_CM_THREADS, else 2)\n"
	    "\n"
	    "Fault tolerance (transport cm): a rank killed by a signal is restarted and\n"
	    "replayed from the channel memory's log; a rank that exits non-zero or calls\n"
	    "MPI_Abort stops the job.\n"
	    "      --max-restarts N   restarts allowed per rank (default %d; 0: none)\n"
	    "      --kill-every T     fault injection: kill a rank every T (e.g. 500ms)\n"
	    "      --kill-rank R      the rank --kill-every kills (default: random)\n"
	    "      --kill-count K     injected kills at most (default %d; with\n"
	    "                         --kill-rank R, at most --max-restarts); also bounds\n"
	    "                         --kill-cm-every's kills\n"
	    "      --kill-signal SIG  signal of injected kills (KILL, TERM, ... or a\n"
	    "                         number; default KILL)\n"
	    "      --seed S           seed of the random choice of --kill-rank random and\n"
	    "                         of --kill-cm-every\n"
	    "      --kill-at R:T      kill rank R once, T after the ranks started\n"
	    "      --kill-host NAME@T kill every rank of host NAME together, T after the\n"
	    "                         ranks started (needs --hosts or --host)\n"
	    "      --cm-restart       a channel memory that dies is restarted on the same\n"
	    "                         address and recovers from its journal (a private\n"
	    "                         directory under --spill-dir or $TMPDIR, removed at\n"
	    "                         the end); the ranks reconnect to it\n"
	    "      --max-cm-restarts N  restarts allowed per CM (default %d; --cm-restart)\n"
	    "      --kill-cm-at K:T   kill CM K (SIGKILL) once, T after the ranks started\n"
	    "                         (repeatable; needs --cm-restart)\n"
	    "      --kill-cm-every T  kill a random CM every T (needs --cm-restart)\n"
	    "      --heartbeat-timeout T  a rank whose heartbeats stop for T (hung, stopped\n"
	    "                         or cut off) is killed and restarted (default 10s;\n"
	    "                         0: off)\n"
	    "      --status           status line on stderr, updated in place: ranks\n"
	    "                         running, restarts, log bytes per CM, messages\n"
	    "                         replayed (default when stderr is a terminal)\n"
	    "      --no-status        no status line, even on a terminal\n"
	    "      --ckpt-dir DIR     start a checkpoint server (ckptserver) keeping the\n"
	    "                         ranks' application checkpoints in DIR; a killed rank\n"
	    "                         restarts from its latest one (docs/checkpointing.md)\n"
	    "      --ckpt-every T     a rank checkpoints at its first chanmem_checkpoint\n"
	    "                         call after T since its last one (default: every call)\n"
	    "      --ckpt-keep        keep the job's images in the --ckpt-dir after it\n"
	    "                         succeeds (default: removed; a failed job keeps them)\n"
	    "\n"
	    "Placement and launching (docs/deployment.md): without addresses a host is\n"
	    "a label on this machine; with addr= its processes are started there.\n"
	    "      --hosts FILE       one host per line: NAME [slots=N] [addr=IPv4]\n"
	    "                         [roles=rank,cm,ckpt] ('#' comments; default 1 slot,\n"
	    "                         role rank)\n"
	    "      --host LIST        the same inline: a,b:2,c (NAME[:SLOTS], role rank)\n"
	    "      --map-by P         slot (fill each host's slots in turn, default) or\n"
	    "                         host (round robin over the rank hosts)\n"
	    "      --print-map        print where every CM, the checkpoint server and\n"
	    "                         every rank go (and how they are launched), then exit\n"
	    "      --launch L         local, ssh, srun, netns, or a template with {host},\n"
	    "                         {addr} and {cmd} (run by /bin/sh; {cmd} is quoted).\n"
	    "                         Default: local without addresses, else ssh (srun\n"
	    "                         inside a Slurm job); 127.x hosts run locally\n"
	    "      --control-addr IP  address remote processes report back to (default:\n"
	    "                         the one this machine uses towards the first host)\n"
	    "      --port-base P      direct transport: a remote rank listens on P+index\n"
	    "                         (default %d)\n"
	    "      --export NAME[=V]  hand NAME (cmrun's value, or V) to remote ranks, whose\n"
	    "                         launcher (ssh) does not forward the environment\n"
	    "\n"
	    "Replication (docs/replication.md): every rank runs as r processes over a direct\n"
	    "TCP mesh; a killed replica is not restarted, the others carry on.\n"
	    "      --replicate r      replicas per rank (1..4; no channel memory)\n"
	    "      --kill-replica K   the replica --kill-at kills (default: the last)\n"
	    "  -v, --verbose          report what cmrun does (twice: debug)\n"
	    "  -h, --help             this text\n"
	    "      --version          print cmrun's version and exit\n"
	    "\n"
	    "Exit status: 0 when every rank exits 0, else the first non-zero rank status\n"
	    "(128+signal for a rank killed by a signal), 124 on timeout, 130/143 when\n"
	    "interrupted, 2 for a usage error, 127/126 when PROGRAM is not found or not\n"
	    "executable, 1 when cmrun or a cmserver fails.\n"
	    "\n"
	    "Ranks get their rank, the job size, the CM addresses (or peer addresses) and\n"
	    "the job secret in CHANMEM_* variables; rank 0 reads cmrun's stdin, the others\n"
	    "/dev/null. cmserver is taken from $CHANMEM_CMSERVER, else next to cmrun\n"
	    "(or ../cmserver/cmserver in a build tree), else from PATH.\n",
	    CMRUN_MAX_RANKS, CMRUN_MAX_CMS, CMRUN_MAX_CM_THREADS, CMRUN_DEFAULT_MAX_RESTARTS,
	    CMRUN_DEFAULT_KILL_COUNT, CMRUN_DEFAULT_MAX_RESTARTS, CMRUN_DEFAULT_PORT_BASE);
}

/* "KILL", "SIGKILL", "9": a catchable-or-not signal number, or -1. */
static int parse_signal(const char *text)
{
	static const struct {
		const char *name;
		int sig;
	} names[] = {{"KILL", SIGKILL}, {"TERM", SIGTERM}, {"INT", SIGINT},   {"HUP", SIGHUP},
	             {"QUIT", SIGQUIT}, {"ABRT", SIGABRT}, {"SEGV", SIGSEGV}, {"USR1", SIGUSR1},
	             {"USR2", SIGUSR2}, {"BUS", SIGBUS},   {"ALRM", SIGALRM}};
	const char *name = strncasecmp(text, "SIG", 3) == 0 ? text + 3 : text;
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (strcasecmp(name, names[i].name) == 0)
			return names[i].sig;
	long v;
	if (cm_parse_long(text, 1, 64, &v) == 0)
		return (int)v;
	return -1;
}

static void __attribute__((noreturn, format(printf, 1, 2))) bad_usage(const char *fmt, ...)
{
	va_list ap;
	char msg[512];
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	fprintf(stderr, "cmrun: error: %s\nTry 'cmrun --help' for more information.\n", msg);
	exit(CMRUN_EXIT_USAGE);
}

const char *cmrun_transport_name(enum cmrun_transport t)
{
	return t == CMRUN_TRANSPORT_DIRECT ? "direct" : t == CMRUN_TRANSPORT_REPL ? "repl" : "cm";
}

static bool mode_is_known(const char *mode)
{
	for (size_t i = 0; i < sizeof known_modes / sizeof known_modes[0]; i++)
		if (strcmp(mode, known_modes[i]) == 0)
			return true;
	return false;
}

enum {
	OPT_CMS = 256,
	OPT_MODE,
	OPT_TRANSPORT,
	OPT_TAG_OUTPUT,
	OPT_TIMEOUT,
	OPT_MAX_MESSAGE,
	OPT_CM_SOCKET,
	OPT_MAX_RESTARTS,
	OPT_KILL_EVERY,
	OPT_KILL_RANK,
	OPT_KILL_COUNT,
	OPT_KILL_SIGNAL,
	OPT_SEED,
	OPT_KILL_AT,
	OPT_STATUS,
	OPT_REPLICATE,
	OPT_KILL_REPLICA,
	OPT_HEARTBEAT_TIMEOUT,
	OPT_HOSTS,
	OPT_HOST,
	OPT_PRINT_MAP,
	OPT_KILL_HOST,
	OPT_NO_STATUS,
	OPT_CKPT_DIR,
	OPT_CKPT_EVERY,
	OPT_CKPT_KEEP,
	OPT_MAP_BY,
	OPT_LAUNCH,
	OPT_CONTROL_ADDR,
	OPT_PORT_BASE,
	OPT_EXPORT,
	OPT_VERSION,
	OPT_CM_RESTART,
	OPT_MAX_CM_RESTARTS,
	OPT_KILL_CM_AT,
	OPT_KILL_CM_EVERY,
	OPT_CM_FIRST, /* then one per cm_opt_specs row */
};

/* One CM option's value, checked, in the form cmserver takes. */
static void parse_cm_opt(struct cmrun_options *opts, int which, const char *text)
{
	const struct cm_opt_spec *spec = &cm_opt_specs[which];
	char *value = opts->cm_opt_value[which];
	uint64_t size;
	long count;
	switch (spec->kind) {
	case CM_OPT_SIZE:
		if (cm_parse_size(text, &size) < 0 || size < spec->min || size > spec->max)
			bad_usage("%s takes %s, not '%s'", spec->flag, spec->wants, text);
		snprintf(value, PATH_MAX, "%llu", (unsigned long long)size);
		break;
	case CM_OPT_COUNT:
		if (cm_parse_long(text, (long)spec->min, (long)spec->max, &count) < 0)
			bad_usage("%s takes %s, not '%s'", spec->flag, spec->wants, text);
		snprintf(value, PATH_MAX, "%ld", count);
		break;
	case CM_OPT_DIR:
		/* Room for the "/cm-K" each CM adds. */
		if (text[0] == '\0' || strlen(text) + 16 >= PATH_MAX)
			bad_usage("%s takes %s, not '%s'", spec->flag, spec->wants, text);
		snprintf(value, PATH_MAX, "%s", text);
		break;
	case CM_OPT_FLAG:
		value[0] = '\0';
		break;
	}
	opts->cm_opt_given[which] = true;
}

/* The checks of the CM options that need the whole command line: the
 * transport, the mode, where the CMs run. */
static void check_cm_opts(struct cmrun_options *opts)
{
	const bool *given = opts->cm_opt_given;
	for (int i = 0; i < CMRUN_CM_OPTS; i++)
		if (given[i] && opts->transport != CMRUN_TRANSPORT_CM)
			bad_usage(
			    "%s is a channel memory option: it applies to --transport cm only",
			    cm_opt_specs[i].flag);
	if (given[CMRUN_CM_THREADS] && strcmp(opts->mode, "multiplexer") != 0 &&
	    strcmp(opts->mode, "specialized") != 0)
		bad_usage("--threads applies to --mode multiplexer and specialized, not %s",
		          opts->mode);
	if (given[CMRUN_CM_NO_SPILL] && given[CMRUN_CM_SPILL_DIR])
		bad_usage("--no-spill and --spill-dir contradict each other: drop one");
	if (!given[CMRUN_CM_SPILL_DIR])
		return;
	char *dir = opts->cm_opt_value[CMRUN_CM_SPILL_DIR];
	bool any_local = false, any_remote = false;
	for (int i = 0; i < opts->ncms; i++) {
		bool remote = launch_is_remote(opts, hosts_of_cm(&opts->hosts, i));
		any_remote = any_remote || remote;
		any_local = any_local || !remote;
	}
	/* A relative name would mean the launcher's directory on a remote
	 * host (ssh: the home directory), not the one cmrun runs in. */
	if (any_remote && dir[0] != '/')
		bad_usage("--spill-dir %s: CMs on other hosts need an absolute directory", dir);
	if (!any_local)
		return;
	struct stat st;
	char real[PATH_MAX];
	if (stat(dir, &st) < 0)
		bad_usage("--spill-dir %s: %s", dir, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		bad_usage("--spill-dir %s: not a directory", dir);
	if (access(dir, W_OK | X_OK) < 0)
		bad_usage("--spill-dir %s: the CMs cannot write there: %s", dir, strerror(errno));
	if (realpath(dir, real) == NULL || strlen(real) + 16 >= PATH_MAX)
		bad_usage("--spill-dir %s: %s", dir, strerror(errno ? errno : ENAMETOOLONG));
	memcpy(dir, real, strlen(real) + 1);
}

void cmrun_cm_argv(const struct cmrun_options *o, char **argv, int *argc)
{
	/* Every CM gets the same --spill-dir: a store's files have names of
	 * their own (cmserver/spill.c), so CMs sharing a host never collide. */
	for (int i = 0; i < CMRUN_CM_OPTS; i++) {
		if (!o->cm_opt_given[i])
			continue;
		argv[(*argc)++] = (char *)cm_opt_specs[i].flag;
		if (cm_opt_specs[i].kind != CM_OPT_FLAG)
			argv[(*argc)++] = (char *)o->cm_opt_value[i];
	}
}

/* --kill-cm-at CM:DELAY, one more entry. */
static void parse_kill_cm_at(struct cmrun_options *opts, const char *text)
{
	char cm_text[16];
	long cm;
	struct cmrun_kill_cm_at *k = &opts->kill_cm_at[opts->nkill_cm_at];
	const char *colon = strchr(text, ':');
	size_t len = colon ? (size_t)(colon - text) : 0;
	if (opts->nkill_cm_at == CMRUN_MAX_KILL_CM_AT)
		bad_usage("--kill-cm-at is given more than %d times", CMRUN_MAX_KILL_CM_AT);
	if (colon == NULL || len == 0 || len >= sizeof cm_text)
		bad_usage("--kill-cm-at takes CM:DELAY such as 0:200ms, not '%s'", text);
	memcpy(cm_text, text, len);
	cm_text[len] = '\0';
	if (cm_parse_long(cm_text, 0, CMRUN_MAX_CMS - 1, &cm) < 0 ||
	    cm_parse_duration(colon + 1, &k->ns) < 0)
		bad_usage("--kill-cm-at takes CM:DELAY such as 0:200ms, not '%s'", text);
	k->cm = (int)cm;
	opts->nkill_cm_at++;
}

static int kill_cm_at_order(const void *a, const void *b)
{
	const struct cmrun_kill_cm_at *x = a, *y = b;
	return x->ns < y->ns ? -1 : x->ns > y->ns;
}

/* --cm-restart and the options that only make sense with it. */
static void check_cm_restart(struct cmrun_options *opts, bool have_max_cm_restarts)
{
	if (!opts->cm_restart && (opts->nkill_cm_at || opts->kill_cm_every_ns))
		bad_usage("--kill-cm-at and --kill-cm-every kill channel memories: they need "
		          "--cm-restart (without it a CM's death stops the job)");
	if (!opts->cm_restart && have_max_cm_restarts)
		bad_usage("--max-cm-restarts goes with --cm-restart");
	if (opts->cm_restart && opts->transport != CMRUN_TRANSPORT_CM)
		bad_usage("--cm-restart needs --transport cm: there is no channel memory to "
		          "restart");
	for (int i = 0; i < opts->nkill_cm_at; i++)
		if (opts->kill_cm_at[i].cm >= opts->ncms)
			bad_usage("--kill-cm-at: cmserver %d is not in the job (CMs 0 to %d)",
			          opts->kill_cm_at[i].cm, opts->ncms - 1);
	/* The timer takes them in time order. */
	qsort(opts->kill_cm_at, (size_t)opts->nkill_cm_at, sizeof opts->kill_cm_at[0],
	      kill_cm_at_order);
}

/* --hosts / --host, the slot count, --kill-host's host. */
static void parse_placement(struct cmrun_options *opts, const char *hosts_file,
                            const char *host_list, const char *kill_host_text,
                            enum map_policy map_by)
{
	char err[512];
	if (hosts_file && host_list)
		bad_usage("--hosts and --host both give the hosts: use one");
	if (hosts_file) {
		if (hosts_parse_file(hosts_file, &opts->hosts, err, sizeof err) < 0)
			bad_usage("%s", err);
		opts->hosts_source = hosts_file;
	} else if (host_list) {
		if (hosts_parse_list(host_list, &opts->hosts, err, sizeof err) < 0)
			bad_usage("%s", err);
		opts->hosts_source = "--host";
	} else {
		/* One machine, one label, a slot per rank. */
		if (hosts_parse_list("localhost", &opts->hosts, err, sizeof err) < 0)
			bad_usage("%s", err);
		opts->hosts.list[0].slots = opts->hosts.total_slots = opts->nranks;
	}
	if (opts->hosts.total_slots < opts->nranks)
		bad_usage("-n %d needs %d slots, and the hosts of %s have %d (give hosts more "
		          "with slots=N or NAME:N)",
		          opts->nranks, opts->nranks, opts->hosts_source, opts->hosts.total_slots);
	if (kill_host_text) {
		char name[CMRUN_HOST_NAME_MAX + 1];
		size_t len = (size_t)(strrchr(kill_host_text, '@') - kill_host_text);
		snprintf(name, sizeof name, "%.*s", (int)len, kill_host_text);
		if (hosts_file == NULL && host_list == NULL)
			bad_usage("--kill-host goes with --hosts or --host (hosts to kill)");
		opts->kill_host = hosts_find(&opts->hosts, name);
		if (opts->kill_host < 0)
			bad_usage("--kill-host %s: no host '%s' in %s", kill_host_text, name,
			          opts->hosts_source);
	}
	opts->hosts.map_by = map_by;
	if (hosts_place(&opts->hosts, opts->nranks) < 0)
		bad_usage("out of memory");
}

void cmrun_parse_options(int argc, char **argv, struct cmrun_options *opts)
{
	static const struct option base_opts[] = {
	    {"np", required_argument, NULL, 'n'},
	    {"cms", required_argument, NULL, OPT_CMS},
	    {"mode", required_argument, NULL, OPT_MODE},
	    {"transport", required_argument, NULL, OPT_TRANSPORT},
	    {"tag-output", no_argument, NULL, OPT_TAG_OUTPUT},
	    {"timeout", required_argument, NULL, OPT_TIMEOUT},
	    {"max-message", required_argument, NULL, OPT_MAX_MESSAGE},
	    {"cm-socket", required_argument, NULL, OPT_CM_SOCKET},
	    {"max-restarts", required_argument, NULL, OPT_MAX_RESTARTS},
	    {"kill-every", required_argument, NULL, OPT_KILL_EVERY},
	    {"kill-rank", required_argument, NULL, OPT_KILL_RANK},
	    {"kill-count", required_argument, NULL, OPT_KILL_COUNT},
	    {"kill-signal", required_argument, NULL, OPT_KILL_SIGNAL},
	    {"seed", required_argument, NULL, OPT_SEED},
	    {"kill-at", required_argument, NULL, OPT_KILL_AT},
	    {"status", no_argument, NULL, OPT_STATUS},
	    {"replicate", required_argument, NULL, OPT_REPLICATE},
	    {"kill-replica", required_argument, NULL, OPT_KILL_REPLICA},
	    {"heartbeat-timeout", required_argument, NULL, OPT_HEARTBEAT_TIMEOUT},
	    {"hosts", required_argument, NULL, OPT_HOSTS},
	    {"host", required_argument, NULL, OPT_HOST},
	    {"print-map", no_argument, NULL, OPT_PRINT_MAP},
	    {"kill-host", required_argument, NULL, OPT_KILL_HOST},
	    {"no-status", no_argument, NULL, OPT_NO_STATUS},
	    {"ckpt-dir", required_argument, NULL, OPT_CKPT_DIR},
	    {"ckpt-every", required_argument, NULL, OPT_CKPT_EVERY},
	    {"ckpt-keep", no_argument, NULL, OPT_CKPT_KEEP},
	    {"map-by", required_argument, NULL, OPT_MAP_BY},
	    {"launch", required_argument, NULL, OPT_LAUNCH},
	    {"control-addr", required_argument, NULL, OPT_CONTROL_ADDR},
	    {"port-base", required_argument, NULL, OPT_PORT_BASE},
	    {"export", required_argument, NULL, OPT_EXPORT},
	    {"verbose", no_argument, NULL, 'v'},
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, OPT_VERSION},
	    {"cm-restart", no_argument, NULL, OPT_CM_RESTART},
	    {"max-cm-restarts", required_argument, NULL, OPT_MAX_CM_RESTARTS},
	    {"kill-cm-at", required_argument, NULL, OPT_KILL_CM_AT},
	    {"kill-cm-every", required_argument, NULL, OPT_KILL_CM_EVERY},
	};
	enum { NBASE = sizeof base_opts / sizeof base_opts[0] };
	struct option long_opts[NBASE + CMRUN_CM_OPTS + 1];
	memcpy(long_opts, base_opts, sizeof base_opts);
	for (int i = 0; i < CMRUN_CM_OPTS; i++)
		long_opts[NBASE + i] = (struct option){
		    cm_opt_specs[i].flag + 2,
		    cm_opt_specs[i].kind == CM_OPT_FLAG ? no_argument : required_argument, NULL,
		    OPT_CM_FIRST + i};
	long_opts[NBASE + CMRUN_CM_OPTS] = (struct option){NULL, 0, NULL, 0};
	bool have_n = false, have_cms = false, have_mode = false, have_max_message = false,
	     have_cm_socket = false;
	long value;
	uint64_t value_ns;
	char err[512];

	memset(opts, 0, sizeof *opts);
	opts->ncms = 1;
	opts->mode = "mono";
	opts->transport = CMRUN_TRANSPORT_CM;
	opts->max_restarts = CMRUN_DEFAULT_MAX_RESTARTS;
	opts->max_cm_restarts = CMRUN_DEFAULT_MAX_RESTARTS;
	opts->kill_rank = -1;
	opts->kill_count = CMRUN_DEFAULT_KILL_COUNT;
	opts->kill_signal = SIGKILL;
	opts->kill_at_rank = -1;
	opts->replicas = 1;
	opts->kill_replica = -1;
	opts->kill_host = -1;
	opts->heartbeat_timeout_ns = CMRUN_DEFAULT_HEARTBEAT_TIMEOUT_NS;
	opts->heartbeat_timeout_text = "10s";
	const char *hosts_file = NULL, *host_list = NULL, *kill_host_text = NULL;
	bool have_kill_opts = false, have_transport = false, have_replicate = false;
	const char *kill_rank_text = NULL, *launch_text = NULL;
	bool have_kill_count = false, have_rank_kill_opts = false, have_max_cm_restarts = false;
	enum map_policy map_by = MAP_BY_SLOT;
	opts->port_base = CMRUN_DEFAULT_PORT_BASE;

	opterr = 0; /* our own messages, in one format */
	optind = 1;
	for (;;) {
		int prev_optind = optind;
		/* '+': stop at PROGRAM, so its own options are left alone. */
		int c = getopt_long(argc, argv, "+:n:vh", long_opts, NULL);
		if (c == -1)
			break;
		switch (c) {
		case 'n':
			/* mpirun's "-np N": getopt reads it as -n with the value "p". */
			if (strcmp(argv[prev_optind], "-np") == 0) {
				if (optind >= argc)
					bad_usage("option '-np' needs a value");
				optarg = argv[optind++];
			}
			if (cm_parse_long(optarg, 1, CMRUN_MAX_RANKS, &value) < 0)
				bad_usage("-n takes a number of ranks from 1 to %d, not '%s'",
				          CMRUN_MAX_RANKS, optarg);
			opts->nranks = (int)value;
			have_n = true;
			break;
		case OPT_CMS:
			if (cm_parse_long(optarg, 1, CMRUN_MAX_CMS, &value) < 0)
				bad_usage("--cms takes a number of channel memories from 1 to %d, "
				          "not '%s'",
				          CMRUN_MAX_CMS, optarg);
			opts->ncms = (int)value;
			have_cms = true;
			break;
		case OPT_MODE:
			if (!mode_is_known(optarg))
				bad_usage("--mode takes mono, thread-per-client, multiplexer or "
				          "specialized, not '%s'",
				          optarg);
			opts->mode = optarg;
			have_mode = true;
			break;
		case OPT_REPLICATE:
			if (cm_parse_long(optarg, 1, CMRUN_MAX_REPLICAS, &value) < 0)
				bad_usage("--replicate takes a replica count in 1..%d, not '%s'",
				          CMRUN_MAX_REPLICAS, optarg);
			opts->replicas = (int)value;
			have_replicate = true;
			break;
		case OPT_KILL_REPLICA:
			if (cm_parse_long(optarg, 0, CMRUN_MAX_REPLICAS - 1, &value) < 0)
				bad_usage("--kill-replica takes a replica index in 0..%d, not '%s'",
				          CMRUN_MAX_REPLICAS - 1, optarg);
			opts->kill_replica = (int)value;
			break;
		case OPT_TRANSPORT:
			have_transport = true;
			if (strcmp(optarg, "cm") == 0)
				opts->transport = CMRUN_TRANSPORT_CM;
			else if (strcmp(optarg, "direct") == 0)
				opts->transport = CMRUN_TRANSPORT_DIRECT;
			else
				bad_usage("--transport takes cm or direct, not '%s'", optarg);
			break;
		case OPT_CM_SOCKET:
			if (strcmp(optarg, "auto") != 0 && strcmp(optarg, "tcp") != 0)
				bad_usage("--cm-socket takes auto or tcp, not '%s'", optarg);
			opts->cm_socket_tcp = strcmp(optarg, "tcp") == 0;
			have_cm_socket = true;
			break;
		case OPT_TAG_OUTPUT:
			opts->tag_output = true;
			break;
		case OPT_TIMEOUT:
			if (cm_parse_duration(optarg, &opts->timeout_ns) < 0)
				bad_usage("--timeout takes a duration such as 30s, 500ms or 2m, "
				          "not '%s'",
				          optarg);
			opts->timeout_text = optarg;
			break;
		case OPT_MAX_MESSAGE:
			if (cm_parse_size(optarg, &opts->max_message) < 0 ||
			    opts->max_message == 0 || opts->max_message > UINT32_MAX)
				bad_usage(
				    "--max-message takes a size from 1 byte to 4GiB-1 such as "
				    "64MiB, not '%s'",
				    optarg);
			have_max_message = true;
			break;
		case OPT_MAX_RESTARTS:
			if (cm_parse_long(optarg, 0, 1000000, &value) < 0)
				bad_usage(
				    "--max-restarts takes a number from 0 to 1000000, not '%s'",
				    optarg);
			opts->max_restarts = (int)value;
			break;
		case OPT_KILL_EVERY:
			if (cm_parse_duration(optarg, &opts->kill_every_ns) < 0 ||
			    opts->kill_every_ns < 1000000)
				bad_usage("--kill-every takes a duration of at least 1ms such as "
				          "500ms or 2s, not '%s'",
				          optarg);
			break;
		case OPT_KILL_RANK:
			if (strcmp(optarg, "random") == 0)
				opts->kill_rank = -1;
			else if (cm_parse_long(optarg, 0, CMRUN_MAX_RANKS - 1, &value) < 0)
				bad_usage("--kill-rank takes a rank or 'random', not '%s'", optarg);
			else
				opts->kill_rank = (int)value;
			kill_rank_text = optarg;
			have_kill_opts = have_rank_kill_opts = true;
			break;
		case OPT_KILL_COUNT:
			if (cm_parse_long(optarg, 1, CMRUN_MAX_KILL_COUNT, &value) < 0)
				bad_usage("--kill-count takes a number from 1 to %d, not '%s'",
				          CMRUN_MAX_KILL_COUNT, optarg);
			opts->kill_count = (int)value;
			have_kill_opts = true;
			have_kill_count = true;
			break;
		case OPT_KILL_SIGNAL:
			opts->kill_signal = parse_signal(optarg);
			if (opts->kill_signal < 0)
				bad_usage("--kill-signal takes a signal name (KILL, TERM, ...) or "
				          "number, not '%s'",
				          optarg);
			have_kill_opts = have_rank_kill_opts = true;
			break;
		case OPT_SEED: {
			char *end;
			errno = 0;
			unsigned long long v = strtoull(optarg, &end, 0);
			if (errno || end == optarg || *end || optarg[0] == '-')
				bad_usage("--seed takes a non-negative integer, not '%s'", optarg);
			opts->seed = v;
			opts->have_seed = true;
			have_kill_opts = true;
			break;
		}
		case OPT_KILL_AT: {
			char rank_text[16];
			const char *colon = strchr(optarg, ':');
			size_t rl = colon ? (size_t)(colon - optarg) : 0;
			if (colon == NULL || rl == 0 || rl >= sizeof rank_text)
				bad_usage("--kill-at takes RANK:DELAY such as 1:200ms, not '%s'",
				          optarg);
			memcpy(rank_text, optarg, rl);
			rank_text[rl] = '\0';
			if (cm_parse_long(rank_text, 0, CMRUN_MAX_RANKS - 1, &value) < 0 ||
			    cm_parse_duration(colon + 1, &opts->kill_at_ns) < 0)
				bad_usage("--kill-at takes RANK:DELAY such as 1:200ms, not '%s'",
				          optarg);
			opts->kill_at_rank = (int)value;
			break;
		}
		case OPT_STATUS:
			opts->status = true;
			break;
		case OPT_NO_STATUS:
			opts->no_status = true;
			break;
		case OPT_HEARTBEAT_TIMEOUT:
			if (cm_parse_duration(optarg, &opts->heartbeat_timeout_ns) < 0 ||
			    (opts->heartbeat_timeout_ns > 0 &&
			     opts->heartbeat_timeout_ns < CMRUN_MIN_HEARTBEAT_TIMEOUT_NS) ||
			    opts->heartbeat_timeout_ns >
			        (uint64_t)CMRUN_MAX_HEARTBEAT_TIMEOUT_S * 1000000000ull)
				bad_usage(
				    "--heartbeat-timeout takes 0 (off) or a duration from 10ms "
				    "to %ds such as 500ms or 10s, not '%s'",
				    CMRUN_MAX_HEARTBEAT_TIMEOUT_S, optarg);
			opts->heartbeat_timeout_text = optarg;
			break;
		case OPT_HOSTS:
			hosts_file = optarg;
			break;
		case OPT_HOST:
			host_list = optarg;
			break;
		case OPT_PRINT_MAP:
			opts->print_map = true;
			break;
		case OPT_KILL_HOST: {
			const char *at = strrchr(optarg, '@');
			if (at == NULL || at == optarg ||
			    cm_parse_duration(at + 1, &opts->kill_host_ns) < 0)
				bad_usage("--kill-host takes NAME@DELAY such as b@200ms, not '%s'",
				          optarg);
			kill_host_text = optarg;
			break;
		}
		case OPT_CKPT_DIR:
			if (optarg[0] == '\0')
				bad_usage("--ckpt-dir takes a directory, not an empty name");
			opts->ckpt_dir = optarg;
			break;
		case OPT_CKPT_EVERY:
			if (cm_parse_duration(optarg, &value_ns) < 0 || value_ns == 0)
				bad_usage(
				    "--ckpt-every takes a duration such as 500ms or 10s, not '%s'",
				    optarg);
			opts->ckpt_every = optarg;
			break;
		case OPT_CKPT_KEEP:
			opts->ckpt_keep = true;
			break;
		case OPT_MAP_BY:
			if (strcmp(optarg, "slot") == 0)
				map_by = MAP_BY_SLOT;
			else if (strcmp(optarg, "host") == 0)
				map_by = MAP_BY_HOST;
			else
				bad_usage("--map-by takes slot or host, not '%s'", optarg);
			break;
		case OPT_LAUNCH:
			launch_text = optarg;
			break;
		case OPT_CONTROL_ADDR: {
			struct in_addr in;
			if (inet_pton(AF_INET, optarg, &in) != 1 || in.s_addr == 0)
				bad_usage(
				    "--control-addr takes an IPv4 address of this machine such "
				    "as 10.0.0.1, not '%s'",
				    optarg);
			opts->control_addr = optarg;
			break;
		}
		case OPT_PORT_BASE:
			if (cm_parse_long(optarg, 1024, 65535, &value) < 0)
				bad_usage("--port-base takes a port from 1024 to 65535, not '%s'",
				          optarg);
			opts->port_base = (int)value;
			break;
		case OPT_EXPORT:
			if (launch_add_export(opts, optarg, err, sizeof err) < 0)
				bad_usage("%s", err);
			break;
		case OPT_CM_RESTART:
			opts->cm_restart = true;
			break;
		case OPT_MAX_CM_RESTARTS:
			if (cm_parse_long(optarg, 0, 1000000, &value) < 0)
				bad_usage("--max-cm-restarts takes a number from 0 to 1000000, "
				          "not '%s'",
				          optarg);
			opts->max_cm_restarts = (int)value;
			have_max_cm_restarts = true;
			break;
		case OPT_KILL_CM_AT:
			parse_kill_cm_at(opts, optarg);
			break;
		case OPT_KILL_CM_EVERY:
			if (cm_parse_duration(optarg, &opts->kill_cm_every_ns) < 0 ||
			    opts->kill_cm_every_ns < 1000000)
				bad_usage(
				    "--kill-cm-every takes a duration of at least 1ms such as "
				    "500ms or 2s, not '%s'",
				    optarg);
			break;
		case 'v':
			opts->verbosity++;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case OPT_VERSION:
			printf("cmrun (chanmem) %s\n", PACKAGE_VERSION);
			exit(0);

		case ':':
			bad_usage("option '%s' needs a value", argv[prev_optind]);
		default:
			if (c >= OPT_CM_FIRST && c < OPT_CM_FIRST + CMRUN_CM_OPTS) {
				parse_cm_opt(opts, c - OPT_CM_FIRST, optarg);
				break;
			}
			if (optopt && optopt < 256)
				bad_usage("unknown option '-%c'", optopt);
			bad_usage("unknown option '%s'", argv[prev_optind]);
		}
	}

	if (!have_n)
		bad_usage("missing -n N (the number of ranks)");
	if (optind >= argc)
		bad_usage("no program to run");
	if (argv[optind][0] == '\0')
		bad_usage("the program name is empty");
	if (have_replicate) {
		if (have_transport)
			bad_usage("--replicate runs its own transport (a direct mesh of replicas): "
			          "drop --transport");
		opts->transport = CMRUN_TRANSPORT_REPL;
		if ((long)opts->nranks * opts->replicas > CMRUN_MAX_RANKS)
			bad_usage("-n %d with --replicate %d is more than %d processes",
			          opts->nranks, opts->replicas, CMRUN_MAX_RANKS);
		if (opts->kill_every_ns || have_kill_opts)
			bad_usage("--kill-every does not apply to --replicate (use --kill-at with "
			          "--kill-replica)");
		if (kill_host_text)
			bad_usage("--kill-host does not apply to --replicate (use --kill-at with "
			          "--kill-replica)");
	}
	if (opts->kill_replica >= 0 &&
	    (!have_replicate || opts->kill_at_rank < 0 || opts->kill_replica >= opts->replicas))
		bad_usage("--kill-replica K goes with --replicate r (K < r) and --kill-at");
	if (opts->transport != CMRUN_TRANSPORT_CM &&
	    (have_cms || have_mode || have_max_message || have_cm_socket))
		bad_usage("--cms, --mode, --max-message and --cm-socket apply to --transport cm "
		          "only");
	if (have_kill_opts && opts->kill_every_ns == 0 &&
	    (opts->kill_cm_every_ns == 0 || have_rank_kill_opts))
		bad_usage("--kill-rank, --kill-count, --kill-signal and --seed go with "
		          "--kill-every (--kill-count and --seed also with --kill-cm-every)");
	check_cm_restart(opts, have_max_cm_restarts);
	/* Kills aimed at one rank all count against its restarts: by default
	 * no more than it may survive, so the documented example succeeds. */
	if (!have_kill_count && opts->kill_rank >= 0 && opts->kill_count > opts->max_restarts)
		opts->kill_count = opts->max_restarts > 0 ? opts->max_restarts : 1;
	if (opts->kill_rank >= opts->nranks)
		bad_usage("--kill-rank %s: the job has ranks 0 to %d", kill_rank_text,
		          opts->nranks - 1);
	if (opts->kill_at_rank >= opts->nranks)
		bad_usage("--kill-at: rank %d is not in the job (ranks 0 to %d)",
		          opts->kill_at_rank, opts->nranks - 1);
	if (opts->transport == CMRUN_TRANSPORT_DIRECT &&
	    (opts->kill_every_ns || opts->kill_at_rank >= 0 || kill_host_text))
		bad_usage("fault injection (--kill-every, --kill-at, --kill-host) needs "
		          "--transport cm: the direct transport cannot restart a rank");
	if (opts->ckpt_every && opts->ckpt_dir == NULL)
		bad_usage("--ckpt-every goes with --ckpt-dir (where the checkpoints go)");
	if (opts->ckpt_keep && opts->ckpt_dir == NULL)
		bad_usage("--ckpt-keep goes with --ckpt-dir (where the checkpoints go)");
	if (opts->ckpt_dir && opts->transport != CMRUN_TRANSPORT_CM)
		bad_usage("--ckpt-dir needs --transport cm: only a rank restarted from a channel "
		          "memory's log can resume from a checkpoint");
	parse_placement(opts, hosts_file, host_list, kill_host_text, map_by);
	if (launch_configure(opts, launch_text, err, sizeof err) < 0)
		bad_usage("%s", err);
	check_cm_opts(opts);
	if (opts->port_base + (long)opts->nranks * opts->replicas > 65536)
		bad_usage("--port-base %d: %d processes would need ports past 65535",
		          opts->port_base, opts->nranks * opts->replicas);
	opts->program_argv = &argv[optind];
}
