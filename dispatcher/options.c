#include <config.h>

#include "options.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <arpa/inet.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmdline.h"
#include "launch.h"
#include "units.h"

static const char *const known_modes[] = {"mono", "thread-per-client", "multiplexer", "specialized",
                                          NULL};

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

const char *cmrun_transport_name(enum cmrun_transport t)
{
	return t == CMRUN_TRANSPORT_DIRECT ? "direct" : t == CMRUN_TRANSPORT_REPL ? "repl" : "cm";
}

/* One CM option's value, checked, in the form cmserver takes. */
static int set_cm_opt(void *ctx, const struct cmdline_opt *o, const char *text, char *err,
                      size_t errlen)
{
	struct cmrun_options *opts = ctx;
	int which = 0;
	while (which < CMRUN_CM_OPTS - 1 && strcmp(cm_opt_specs[which].flag + 2, o->name) != 0)
		which++;
	const struct cm_opt_spec *spec = &cm_opt_specs[which];
	char *value = opts->cm_opt_value[which];
	uint64_t size;
	long count;
	bool ok = true;
	switch (spec->kind) {
	case CM_OPT_SIZE:
		ok = cm_parse_size(text, &size) == 0 && size >= spec->min && size <= spec->max;
		if (ok)
			snprintf(value, PATH_MAX, "%llu", (unsigned long long)size);
		break;
	case CM_OPT_COUNT:
		ok = cm_parse_long(text, (long)spec->min, (long)spec->max, &count) == 0;
		if (ok)
			snprintf(value, PATH_MAX, "%ld", count);
		break;
	case CM_OPT_DIR:
		/* Room for the "/cm-K" each CM adds. */
		ok = text[0] != '\0' && strlen(text) + 16 < PATH_MAX;
		snprintf(value, PATH_MAX, "%s", ok ? text : "");
		break;
	case CM_OPT_FLAG:
		value[0] = '\0';
		break;
	}
	if (!ok)
		snprintf(err, errlen, "%s takes %s, not '%s'", spec->flag, spec->wants, text);
	opts->cm_opt_given[which] = ok;
	return ok ? 0 : -1;
}

/* The checks of the CM options that need the whole command line: the
 * transport, the mode, where the CMs run. */
static int check_cm_opts(struct cmrun_options *opts, struct cmdline_state *st)
{
	const bool *given = opts->cm_opt_given;
	for (int i = 0; i < CMRUN_CM_OPTS; i++)
		if (given[i] && opts->transport != CMRUN_TRANSPORT_CM)
			return cmdline_fail(
			    st, "%s is a channel memory option: it applies to --transport cm only",
			    cm_opt_specs[i].flag);
	if (given[CMRUN_CM_THREADS] && strcmp(opts->mode, "multiplexer") != 0 &&
	    strcmp(opts->mode, "specialized") != 0)
		return cmdline_fail(
		    st, "--threads applies to --mode multiplexer and specialized, not %s",
		    opts->mode);
	if (given[CMRUN_CM_NO_SPILL] && given[CMRUN_CM_SPILL_DIR])
		return cmdline_fail(st,
		                    "--no-spill and --spill-dir contradict each other: drop one");
	if (!given[CMRUN_CM_SPILL_DIR])
		return CMDLINE_OK;
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
		return cmdline_fail(
		    st, "--spill-dir %s: CMs on other hosts need an absolute directory", dir);
	if (!any_local)
		return CMDLINE_OK;
	struct stat sb;
	char real[PATH_MAX];
	if (stat(dir, &sb) < 0)
		return cmdline_fail(st, "--spill-dir %s: %s", dir, strerror(errno));
	if (!S_ISDIR(sb.st_mode))
		return cmdline_fail(st, "--spill-dir %s: not a directory", dir);
	if (access(dir, W_OK | X_OK) < 0)
		return cmdline_fail(st, "--spill-dir %s: the CMs cannot write there: %s", dir,
		                    strerror(errno));
	if (realpath(dir, real) == NULL || strlen(real) + 16 >= PATH_MAX)
		return cmdline_fail(st, "--spill-dir %s: %s", dir,
		                    strerror(errno ? errno : ENAMETOOLONG));
	memcpy(dir, real, strlen(real) + 1);
	return CMDLINE_OK;
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

static int kill_cm_at_order(const void *a, const void *b)
{
	const struct cmrun_kill_cm_at *x = a, *y = b;
	return x->ns < y->ns ? -1 : x->ns > y->ns;
}

/* --cm-restart and the options that only make sense with it. */
static int check_cm_restart(struct cmrun_options *opts, bool have_max_cm_restarts,
                            struct cmdline_state *st)
{
	if (opts->cm_standby)
		opts->cm_restart = true;
	if (!opts->cm_restart && (opts->nkill_cm_at || opts->kill_cm_every_ns))
		return cmdline_fail(st, "--kill-cm-at and --kill-cm-every kill channel memories: "
		                        "they need --cm-restart (without it a CM's death stops the "
		                        "job)");
	if (!opts->cm_restart && have_max_cm_restarts)
		return cmdline_fail(st, "--max-cm-restarts goes with --cm-restart");
	if (opts->cm_restart && opts->transport != CMRUN_TRANSPORT_CM)
		return cmdline_fail(st, "--cm-restart needs --transport cm: there is no channel "
		                        "memory to restart");
	for (int i = 0; i < opts->nkill_cm_at; i++)
		if (opts->kill_cm_at[i].cm >= opts->ncms)
			return cmdline_fail(
			    st, "--kill-cm-at: cmserver %d is not in the job (CMs 0 to %d)",
			    opts->kill_cm_at[i].cm, opts->ncms - 1);
	/* The timer takes them in time order. */
	qsort(opts->kill_cm_at, (size_t)opts->nkill_cm_at, sizeof opts->kill_cm_at[0],
	      kill_cm_at_order);
	return CMDLINE_OK;
}

/* --hosts / --host, the slot count, --kill-host's host. */
static int parse_placement(struct cmrun_options *opts, const char *hosts_file,
                           const char *host_list, const char *kill_host_text,
                           enum map_policy map_by, struct cmdline_state *st)
{
	char err[512];
	if (hosts_file && host_list)
		return cmdline_fail(st, "--hosts and --host both give the hosts: use one");
	if (hosts_file) {
		if (hosts_parse_file(hosts_file, &opts->hosts, err, sizeof err) < 0)
			return cmdline_fail(st, "%s", err);
		opts->hosts_source = hosts_file;
	} else if (host_list) {
		if (hosts_parse_list(host_list, &opts->hosts, err, sizeof err) < 0)
			return cmdline_fail(st, "%s", err);
		opts->hosts_source = "--host";
	} else {
		/* One machine, one label, a slot per rank. */
		if (hosts_parse_list("localhost", &opts->hosts, err, sizeof err) < 0)
			return cmdline_fail(st, "%s", err);
		opts->hosts.list[0].slots = opts->hosts.total_slots = opts->nranks;
	}
	if (opts->hosts.total_slots < opts->nranks)
		return cmdline_fail(
		    st,
		    "-n %d needs %d slots, and the hosts of %s have %d (give hosts more "
		    "with slots=N or NAME:N)",
		    opts->nranks, opts->nranks, opts->hosts_source, opts->hosts.total_slots);
	if (kill_host_text) {
		char name[CMRUN_HOST_NAME_MAX + 1];
		size_t len = (size_t)(strrchr(kill_host_text, '@') - kill_host_text);
		snprintf(name, sizeof name, "%.*s", (int)len, kill_host_text);
		if (hosts_file == NULL && host_list == NULL)
			return cmdline_fail(
			    st, "--kill-host goes with --hosts or --host (hosts to kill)");
		opts->kill_host = hosts_find(&opts->hosts, name);
		if (opts->kill_host < 0)
			return cmdline_fail(st, "--kill-host %s: no host '%s' in %s",
			                    kill_host_text, name, opts->hosts_source);
	}
	opts->hosts.map_by = map_by;
	if (hosts_place(&opts->hosts, opts->nranks) < 0)
		return cmdline_fail(st, "out of memory");
	return CMDLINE_OK;
}

/* The command line as parsed, before the checks that need all of it: the
 * options themselves (first: the setters take this as a cmrun_options),
 * and what is kept as text or in a wider type until then. */
struct cmrun_parse {
	struct cmrun_options o;
	long nranks, ncms, replicas, kill_replica, max_restarts, kill_count, port_base;
	long max_cm_restarts;
	int mode, transport, cm_socket, map_by; /* indexes in their rows' choices */
	uint64_t ckpt_every_ns;
	const char *hosts_file, *host_list, *kill_host_text, *kill_rank_text, *launch_text;
};

#define SET_FN(fn)                                                                                 \
	static int fn(void *ctx, const struct cmdline_opt *o, const char *arg, char *err,          \
	              size_t errlen)
#define P ((struct cmrun_parse *)ctx)

SET_FN(set_text)
{
	/* The options whose text is kept as given, for messages and for
	 * the ranks. */
	if (strcmp(o->name, "timeout") == 0)
		P->o.timeout_text = arg;
	else if (strcmp(o->name, "ckpt-every") == 0)
		P->o.ckpt_every = arg;
	else if (strcmp(o->name, "heartbeat-timeout") == 0)
		P->o.heartbeat_timeout_text = arg;
	return 0;
}

SET_FN(set_heartbeat)
{
	uint64_t ns = P->o.heartbeat_timeout_ns;
	if (ns > 0 && ns < CMRUN_MIN_HEARTBEAT_TIMEOUT_NS)
		return -1;
	return set_text(ctx, o, arg, err, errlen);
}

SET_FN(set_kill_rank)
{
	long v;
	if (strcmp(arg, "random") == 0)
		P->o.kill_rank = -1;
	else if (cm_parse_long(arg, 0, CMRUN_MAX_RANKS - 1, &v) < 0)
		return -1;
	else
		P->o.kill_rank = (int)v;
	P->kill_rank_text = arg;
	return 0;
}

SET_FN(set_kill_signal)
{
	P->o.kill_signal = parse_signal(arg);
	return P->o.kill_signal < 0 ? -1 : 0;
}

SET_FN(set_seed)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(arg, &end, 0);
	if (errno || end == arg || *end || arg[0] == '-')
		return -1;
	P->o.seed = v;
	P->o.have_seed = true;
	return 0;
}

SET_FN(set_kill_at)
{
	char rank_text[16];
	const char *colon = strchr(arg, ':');
	size_t rl = colon ? (size_t)(colon - arg) : 0;
	long v;
	if (colon == NULL || rl == 0 || rl >= sizeof rank_text)
		return -1;
	memcpy(rank_text, arg, rl);
	rank_text[rl] = '\0';
	if (cm_parse_long(rank_text, 0, CMRUN_MAX_RANKS - 1, &v) < 0 ||
	    cm_parse_duration(colon + 1, &P->o.kill_at_ns) < 0)
		return -1;
	P->o.kill_at_rank = (int)v;
	return 0;
}

SET_FN(set_kill_cm_at)
{
	char cm_text[16];
	long cm;
	struct cmrun_kill_cm_at *k = &P->o.kill_cm_at[P->o.nkill_cm_at];
	const char *colon = strchr(arg, ':');
	size_t len = colon ? (size_t)(colon - arg) : 0;
	if (P->o.nkill_cm_at == CMRUN_MAX_KILL_CM_AT) {
		snprintf(err, errlen, "--kill-cm-at is given more than %d times",
		         CMRUN_MAX_KILL_CM_AT);
		return -1;
	}
	if (colon == NULL || len == 0 || len >= sizeof cm_text)
		return -1;
	memcpy(cm_text, arg, len);
	cm_text[len] = '\0';
	if (cm_parse_long(cm_text, 0, CMRUN_MAX_CMS - 1, &cm) < 0 ||
	    cm_parse_duration(colon + 1, &k->ns) < 0)
		return -1;
	k->cm = (int)cm;
	P->o.nkill_cm_at++;
	return 0;
}

SET_FN(set_kill_host)
{
	const char *at = strrchr(arg, '@');
	if (at == NULL || at == arg || cm_parse_duration(at + 1, &P->o.kill_host_ns) < 0)
		return -1;
	P->kill_host_text = arg;
	return 0;
}

SET_FN(set_ckpt_dir)
{
	if (arg[0] == '\0')
		return -1;
	P->o.ckpt_dir = arg;
	return 0;
}

SET_FN(set_control_addr)
{
	struct in_addr in;
	if (inet_pton(AF_INET, arg, &in) != 1 || in.s_addr == 0)
		return -1;
	P->o.control_addr = arg;
	return 0;
}

SET_FN(set_export)
{
	return launch_add_export(&P->o, arg, err, errlen);
}

#undef P

#define AT(M, T) CMDLINE_AT(struct cmrun_parse, M, T)
#define S CMDLINE_STR
static const struct cmdline_opt cmrun_opts[] = {
    {.kind = CMDLINE_TEXT,
     .help = "Usage: cmrun -n N [OPTIONS] [--] PROGRAM [ARGS...]\n"
             "Starts N ranks of PROGRAM (looked up in PATH, then in the current directory)\n"
             "on this machine, with K channel memories (cmserver) or a direct TCP mesh\n"
             "between them, and forwards their output.\n"
             "\n",
     .man = ".SS Job"},
    {"np", 'n', "-np", CMDLINE_LONG, "N", AT(nranks, long), 1, CMRUN_MAX_RANKS,
     .bad = "-n takes a number of ranks from 1 to {hi}, not '{}'",
     .help = "number of ranks (1..{hi})"},
    {"cms", 0, NULL, CMDLINE_LONG, "K", AT(ncms, long), 1, CMRUN_MAX_CMS,
     .bad = "--cms takes a number of channel memories from 1 to {hi}, not '{}'",
     .help = "channel memories to start (1..{hi}, default 1; transport cm)",
     .man = "Rank\n.I r\nhas CM\n.I r\nmod\n.I K\nas its home."},
    {"mode", .kind = CMDLINE_CHOICE, .meta = "M", .field = AT(mode, int), .choices = known_modes,
     .bad = "--mode takes mono, thread-per-client, multiplexer or specialized, not '{}'",
     .help = "cmserver mode: mono, thread-per-client, multiplexer,\n"
             "specialized (default mono; transport cm)"},
    {"transport", .kind = CMDLINE_CHOICE, .meta = "T", .field = AT(transport, int),
     .choices = (const char *const[]){"cm", "direct", NULL},
     .bad = "--transport takes cm or direct, not '{}'",
     .help = "cm (default: every message through a channel memory)\n"
             "or direct (TCP between ranks, no fault tolerance)"},
    {"tag-output", .kind = CMDLINE_FLAG, .field = AT(o.tag_output, bool),
     .help = "prefix every output line with \"[RANK] \""},
    {"timeout", .kind = CMDLINE_DURATION, .meta = "T", .field = AT(o.timeout_ns, uint64_t),
     .uhi = UINT64_MAX, .set = set_text,
     .bad = "--timeout takes a duration such as 30s, 500ms or 2m, not '{}'",
     .help = "stop the job after T (e.g. 30s, 500ms, 2m; 0: never);\n"
             "exit status 124"},
    {"max-message", .kind = CMDLINE_SIZE, .meta = "B", .field = AT(o.max_message, uint64_t),
     .ulo = 1, .uhi = UINT32_MAX,
     .bad = "--max-message takes a size from 1 byte to 4GiB-1 such as 64MiB, not '{}'",
     .help = "largest message payload the CMs accept (e.g. 64MiB)"},
    {"cm-socket", .kind = CMDLINE_CHOICE, .meta = "S", .field = AT(cm_socket, int),
     .choices = (const char *const[]){"auto", "tcp", NULL},
     .bad = "--cm-socket takes auto or tcp, not '{}'",
     .help = "how ranks reach their CMs: auto (default: an abstract\n"
             "unix socket when rank and CM are on the same host,\n"
             "cheaper than TCP loopback; TCP otherwise) or tcp\n"
             "(TCP everywhere)"},
    {.kind = CMDLINE_TEXT,
     .help = "\n"
             "Channel memory options (transport cm), given to every cmserver cmrun starts\n"
             "(cmserver --help has the details; the defaults are cmserver's):\n",
     .man = ".SS Channel memory options\nGiven to every\n.B cmserver\nthat\n.B cmrun\nstarts "
            "(transport\n.BR cm );\nsee\n.BR cmserver (1)."},
    {"log-mem", .kind = CMDLINE_CALL, .meta = "B", .set = set_cm_opt,
     .help = "bound on each CM's message memory (e.g. 512MiB;\n"
             "default 1GiB, or a quarter of the host's memory if\n"
             "less): past an eighth of it delivered payloads spill\n"
             "to disk, past three quarters undelivered ones too;\n"
             "at it the CM holds the senders back"},
    {"spill-dir", .kind = CMDLINE_CALL, .meta = "DIR", .set = set_cm_opt,
     .help = "where the CMs spill (DIR must exist on each CM's\n"
             "host; every CM's files have unique names and are\n"
             "unlinked once open: nothing stays). Default: a new\n"
             "directory under the CM's $TMPDIR, removed at once"},
    {"no-spill", .kind = CMDLINE_CALL_FLAG, .set = set_cm_opt,
     .help = "drop the log past --log-mem instead of spilling it: a\n"
             "rank restarted after that cannot be replayed"},
    {"cut-through-min", .kind = CMDLINE_CALL, .meta = "B", .set = set_cm_opt,
     .help = "forward messages of at least B bytes as they arrive\n"
             "(default 256KiB; 0: off)"},
    {"threads", .kind = CMDLINE_CALL, .meta = "N", .set = set_cm_opt,
     .help = "cmserver threads of --mode multiplexer or specialized\n"
             "(1.." S(CMRUN_MAX_CM_THREADS) "; default $CHANMEM_CM_THREADS, else 2)"},
    {.kind = CMDLINE_TEXT,
     .help = "\n"
             "Fault tolerance (transport cm): a rank killed by a signal is restarted and\n"
             "replayed from the channel memory's log; a rank that exits non-zero or calls\n"
             "MPI_Abort stops the job.\n",
     .man = ".SS Fault tolerance\nA rank killed by a signal is restarted and replayed from the "
            "channel memory's log; a rank that exits non-zero or calls\n.B MPI_Abort\nstops "
            "the job."},
    {"max-restarts", .kind = CMDLINE_LONG, .meta = "N", .field = AT(max_restarts, long), .lo = 0,
     .hi = 1000000, .bad = "--max-restarts takes a number from 0 to 1000000, not '{}'",
     .help = "restarts allowed per rank (default " S(CMRUN_DEFAULT_MAX_RESTARTS) "; 0: none)"},
    {"kill-every", .kind = CMDLINE_DURATION, .meta = "T", .field = AT(o.kill_every_ns, uint64_t),
     .ulo = 1000000, .uhi = UINT64_MAX,
     .bad = "--kill-every takes a duration of at least 1ms such as 500ms or 2s, not '{}'",
     .help = "fault injection: kill a rank every T (e.g. 500ms)"},
    {"kill-rank", .kind = CMDLINE_CALL, .meta = "R", .set = set_kill_rank,
     .bad = "--kill-rank takes a rank or 'random', not '{}'",
     .help = "the rank --kill-every kills (default: random)"},
    {"kill-count", .kind = CMDLINE_LONG, .meta = "K", .field = AT(kill_count, long), .lo = 1,
     .hi = CMRUN_MAX_KILL_COUNT, .bad = "--kill-count takes a number from 1 to {hi}, not '{}'",
     .help = "injected kills at most (default " S(
         CMRUN_DEFAULT_KILL_COUNT) "; with\n"
                                   "--kill-rank R, at most --max-restarts); also bounds\n"
                                   "--kill-cm-every's kills"},
    {"kill-signal", .kind = CMDLINE_CALL, .meta = "SIG", .set = set_kill_signal,
     .bad = "--kill-signal takes a signal name (KILL, TERM, ...) or number, not '{}'",
     .help = "signal of injected kills (KILL, TERM, ... or a\n"
             "number; default KILL)"},
    {"seed", .kind = CMDLINE_CALL, .meta = "S", .set = set_seed,
     .bad = "--seed takes a non-negative integer, not '{}'",
     .help = "seed of the random choice of --kill-rank random and\n"
             "of --kill-cm-every"},
    {"kill-at", .kind = CMDLINE_CALL, .meta = "R:T", .set = set_kill_at,
     .bad = "--kill-at takes RANK:DELAY such as 1:200ms, not '{}'",
     .help = "kill rank R once, T after the ranks started"},
    {"kill-host", .kind = CMDLINE_CALL, .meta = "NAME@T", .set = set_kill_host,
     .bad = "--kill-host takes NAME@DELAY such as b@200ms, not '{}'",
     .help = "kill every rank of host NAME together, T after the\n"
             "ranks started (needs --hosts or --host)"},
    {"cm-restart", .kind = CMDLINE_FLAG, .field = AT(o.cm_restart, bool),
     .help = "a channel memory that dies is restarted on the same\n"
             "address and recovers from its journal (a private\n"
             "directory under --spill-dir or $TMPDIR, removed at\n"
             "the end); the ranks reconnect to it",
     .man = "A CM counts as dead when it is killed, exits or its report pipe ends; it is "
            "started again with the same command line, on the same TCP port and abstract "
            "unix name (its journal is\n.BR \"cmserver \\-\\-journal\" ),\nand the ranks get\n"
            ".B CHANMEM_CM_RECONNECT=30\nto reconnect. The journals are on this machine's "
            "file system: a CM on another host needs that directory there too (a shared "
            "file system)."},
    {"cm-standby", .kind = CMDLINE_FLAG, .field = AT(o.cm_standby, bool),
     .help = "--cm-restart, and each CM's journal copied to a standby\n"
             "CM on another host, which takes over when the CM or its\n"
             "host dies (with one host: on this one)",
     .man = "Each standby runs\n.B \"cmserver \\-\\-standby\"\non the next CM host (the next "
            "rank host without CM hosts) and is started first; each CM runs with\n"
            ".BR \"cmserver \\-\\-mirror\" ,\nanswering nothing its standby does not hold. A CM "
            "that dies is replaced by its standby, which the ranks find at the address they "
            "were given in\n.BR CHANMEM_CM_STANDBYS ;\nthe CM then gets a new standby where "
            "its dead process served, and is restarted once with it, copying its journal "
            "there first, so the two take turns on those two addresses. A CM that dies "
            "before its new standby listens, or whose standby died, is restarted where it "
            "runs, as with\n.BR \\-\\-cm\\-restart ."},
    {"max-cm-restarts", .kind = CMDLINE_LONG, .meta = "N", .field = AT(max_cm_restarts, long),
     .lo = 0, .hi = 1000000, .bad = "--max-cm-restarts takes a number from 0 to 1000000, not '{}'",
     .help = "restarts allowed per CM (default " S(CMRUN_DEFAULT_MAX_RESTARTS) "; --cm-restart)",
     .man = "Past it the CM's death stops the job."},
    {"kill-cm-at", .kind = CMDLINE_CALL, .meta = "K:T", .set = set_kill_cm_at,
     .bad = "--kill-cm-at takes CM:DELAY such as 0:200ms, not '{}'",
     .help = "kill CM K (SIGKILL) once, T after the ranks started\n"
             "(repeatable; needs --cm-restart)"},
    {"kill-cm-every", .kind = CMDLINE_DURATION, .meta = "T",
     .field = AT(o.kill_cm_every_ns, uint64_t), .ulo = 1000000, .uhi = UINT64_MAX,
     .bad = "--kill-cm-every takes a duration of at least 1ms such as 500ms or 2s, not '{}'",
     .help = "kill a random CM every T (needs --cm-restart)",
     .man = "Only a CM that listens and has a restart left is chosen, at most\n"
            ".B \\-\\-kill\\-count\ntimes, with\n.BR \\-\\-seed ."},
    {"heartbeat-timeout", .kind = CMDLINE_DURATION, .meta = "T",
     .field = AT(o.heartbeat_timeout_ns, uint64_t),
     .uhi = (uint64_t)CMRUN_MAX_HEARTBEAT_TIMEOUT_S * 1000000000ull, .set = set_heartbeat,
     .bad = "--heartbeat-timeout takes 0 (off) or a duration from 10ms to " S(
         CMRUN_MAX_HEARTBEAT_TIMEOUT_S) "s such as 500ms or 10s, not '{}'",
     .help = "a rank whose heartbeats stop for T (hung, stopped\n"
             "or cut off) is killed and restarted (default 10s;\n"
             "0: off)"},
    {"status", .kind = CMDLINE_FLAG, .field = AT(o.status, bool),
     .help = "status line on stderr, updated in place: ranks\n"
             "running, restarts, log bytes per CM, messages\n"
             "replayed (default when stderr is a terminal)"},
    {"no-status", .kind = CMDLINE_FLAG, .field = AT(o.no_status, bool),
     .help = "no status line, even on a terminal"},
    {"ckpt-dir", .kind = CMDLINE_CALL, .meta = "DIR", .set = set_ckpt_dir,
     .bad = "--ckpt-dir takes a directory, not an empty name",
     .help = "start a checkpoint server (ckptserver) keeping the\n"
             "ranks' application checkpoints in DIR; a killed rank\n"
             "restarts from its latest one (docs/checkpointing.md)"},
    {"ckpt-every", .kind = CMDLINE_DURATION, .meta = "T", .field = AT(ckpt_every_ns, uint64_t),
     .ulo = 1, .uhi = UINT64_MAX, .set = set_text,
     .bad = "--ckpt-every takes a duration such as 500ms or 10s, not '{}'",
     .help = "a rank checkpoints at its first chanmem_checkpoint\n"
             "call after T since its last one (default: every call)"},
    {"ckpt-keep", .kind = CMDLINE_FLAG, .field = AT(o.ckpt_keep, bool),
     .help = "keep the job's images in the --ckpt-dir after it\n"
             "succeeds (default: removed; a failed job keeps them)"},
    {.kind = CMDLINE_TEXT,
     .help = "\n"
             "Placement and launching (docs/deployment.md): without addresses a host is\n"
             "a label on this machine; with addr= its processes are started there.\n",
     .man = ".SS Placement and launching\nWithout addresses a host is a label on this machine; "
            "with\n.B addr=\nits processes are started there."},
    {"hosts", .kind = CMDLINE_STRING, .meta = "FILE", .field = AT(hosts_file, const char *),
     .help = "one host per line: NAME [slots=N] [addr=IPv4]\n"
             "[roles=rank,cm,ckpt] ('#' comments; default 1 slot,\n"
             "role rank)"},
    {"host", .kind = CMDLINE_STRING, .meta = "LIST", .field = AT(host_list, const char *),
     .help = "the same inline: a,b:2,c (NAME[:SLOTS], role rank)"},
    {"map-by", .kind = CMDLINE_CHOICE, .meta = "P", .field = AT(map_by, int),
     .choices = (const char *const[]){"slot", "host", NULL},
     .bad = "--map-by takes slot or host, not '{}'",
     .help = "slot (fill each host's slots in turn, default) or\n"
             "host (round robin over the rank hosts)"},
    {"print-map", .kind = CMDLINE_FLAG, .field = AT(o.print_map, bool),
     .help = "print where every CM, the checkpoint server and\n"
             "every rank go (and how they are launched), then exit"},
    {"launch", .kind = CMDLINE_STRING, .meta = "L", .field = AT(launch_text, const char *),
     .help = "local, ssh, srun, netns, or a template with {host},\n"
             "{addr} and {cmd} (run by /bin/sh; {cmd} is quoted).\n"
             "Default: local without addresses, else ssh (srun\n"
             "inside a Slurm job); 127.x hosts run locally"},
    {"control-addr", .kind = CMDLINE_CALL, .meta = "IP", .set = set_control_addr,
     .bad = "--control-addr takes an IPv4 address of this machine such as 10.0.0.1, not '{}'",
     .help = "address remote processes report back to (default:\n"
             "the one this machine uses towards the first host)"},
    {"port-base", .kind = CMDLINE_LONG, .meta = "P", .field = AT(port_base, long), .lo = 1024,
     .hi = 65535, .bad = "--port-base takes a port from 1024 to 65535, not '{}'",
     .help = "direct transport: a remote rank listens on P+index\n"
             "(default " S(CMRUN_DEFAULT_PORT_BASE) ")"},
    {"export", .kind = CMDLINE_CALL, .meta = "NAME[=V]", .set = set_export,
     .help = "hand NAME (cmrun's value, or V) to remote ranks, whose\n"
             "launcher (ssh) does not forward the environment"},
    {.kind = CMDLINE_TEXT,
     .help = "\n"
             "Replication (docs/replication.md): every rank runs as r processes over a direct\n"
             "TCP mesh; a killed replica is not restarted, the others carry on.\n",
     .man = ".SS Replication\nEvery rank runs as\n.I r\nprocesses over a direct TCP mesh; a "
            "killed replica is not restarted, the others carry on."},
    {"replicate", .kind = CMDLINE_LONG, .meta = "r", .field = AT(replicas, long), .lo = 1,
     .hi = CMRUN_MAX_REPLICAS, .bad = "--replicate takes a replica count in 1..{hi}, not '{}'",
     .help = "replicas per rank (1..{hi}; no channel memory)"},
    {"kill-replica", .kind = CMDLINE_LONG, .meta = "K", .field = AT(kill_replica, long), .lo = 0,
     .hi = CMRUN_MAX_REPLICAS - 1,
     .bad = "--kill-replica takes a replica index in 0..{hi}, not '{}'",
     .help = "the replica --kill-at kills (default: the last)"},
    {.kind = CMDLINE_TEXT, .help = "", .man = ".SS Other"},
    {"verbose", 'v', .kind = CMDLINE_COUNT, .field = AT(o.verbosity, int),
     .help = "report what cmrun does (twice: debug)"},
    {"help", 'h', .kind = CMDLINE_HELP, .help = "this text"},
    {"version", .kind = CMDLINE_VERSION, .help = "print cmrun's version and exit"},
    {"help-man", .kind = CMDLINE_HELP_MAN},
    {.kind = CMDLINE_TEXT,
     .help = "\n"
             "Exit status: 0 when every rank exits 0, else the first non-zero rank status\n"
             "(128+signal for a rank killed by a signal), 124 on timeout, 130/143 when\n"
             "interrupted, 2 for a usage error, 127/126 when PROGRAM is not found or not\n"
             "executable, 1 when cmrun or a cmserver fails.\n"
             "\n"
             "Ranks get their rank, the job size, the CM addresses (or peer addresses) and\n"
             "the job secret in CHANMEM_* variables; rank 0 reads cmrun's stdin, the others\n"
             "/dev/null. cmserver is taken from $CHANMEM_CMSERVER, else next to cmrun\n"
             "(or ../cmserver/cmserver in a build tree), else from PATH.\n"},
};
#undef S
#undef AT

const struct cmdline_prog cmrun_cmdline = {
    .name = "cmrun",
    .version = "cmrun (chanmem) " PACKAGE_VERSION,
    .opts = cmrun_opts,
    .nopts = sizeof cmrun_opts / sizeof cmrun_opts[0],
    .help_col = 25,
    .flags = CMDLINE_STOP_AT_OPERAND | CMDLINE_ALIGN_LONG,
};

/* The checks that need the whole command line. */
static int check_all(struct cmrun_parse *P, int argc, char **argv, struct cmdline_state *st)
{
	struct cmrun_options *opts = &P->o;
#define GIVEN(name) cmdline_given(&cmrun_cmdline, st, name)
	bool have_replicate = GIVEN("replicate");
	bool have_rank_kill_opts = GIVEN("kill-rank") || GIVEN("kill-signal");
	bool have_kill_opts = have_rank_kill_opts || GIVEN("kill-count") || GIVEN("seed");
	const char *kill_host_text = P->kill_host_text;
	if (!GIVEN("np"))
		return cmdline_fail(st, "missing -n N (the number of ranks)");
	if (st->optind >= argc)
		return cmdline_fail(st, "no program to run");
	if (argv[st->optind][0] == '\0')
		return cmdline_fail(st, "the program name is empty");
	opts->nranks = (int)P->nranks;
	opts->ncms = (int)P->ncms;
	opts->replicas = (int)P->replicas;
	opts->kill_replica = (int)P->kill_replica;
	opts->max_restarts = (int)P->max_restarts;
	opts->max_cm_restarts = (int)P->max_cm_restarts;
	opts->kill_count = (int)P->kill_count;
	opts->port_base = (int)P->port_base;
	opts->mode = known_modes[P->mode];
	opts->transport = P->transport ? CMRUN_TRANSPORT_DIRECT : CMRUN_TRANSPORT_CM;
	opts->cm_socket_tcp = P->cm_socket == 1;
	enum map_policy map_by = P->map_by ? MAP_BY_HOST : MAP_BY_SLOT;
	if (have_replicate) {
		if (GIVEN("transport"))
			return cmdline_fail(st,
			                    "--replicate runs its own transport (a direct mesh of "
			                    "replicas): drop --transport");
		opts->transport = CMRUN_TRANSPORT_REPL;
		if ((long)opts->nranks * opts->replicas > CMRUN_MAX_RANKS)
			return cmdline_fail(st,
			                    "-n %d with --replicate %d is more than %d processes",
			                    opts->nranks, opts->replicas, CMRUN_MAX_RANKS);
		if (opts->kill_every_ns || have_kill_opts)
			return cmdline_fail(st, "--kill-every does not apply to --replicate (use "
			                        "--kill-at with --kill-replica)");
		if (kill_host_text)
			return cmdline_fail(st, "--kill-host does not apply to --replicate (use "
			                        "--kill-at with --kill-replica)");
	}
	if (opts->kill_replica >= 0 &&
	    (!have_replicate || opts->kill_at_rank < 0 || opts->kill_replica >= opts->replicas))
		return cmdline_fail(
		    st, "--kill-replica K goes with --replicate r (K < r) and --kill-at");
	if (opts->transport != CMRUN_TRANSPORT_CM &&
	    (GIVEN("cms") || GIVEN("mode") || GIVEN("max-message") || GIVEN("cm-socket")))
		return cmdline_fail(st, "--cms, --mode, --max-message and --cm-socket apply to "
		                        "--transport cm only");
	if (have_kill_opts && opts->kill_every_ns == 0 &&
	    (opts->kill_cm_every_ns == 0 || have_rank_kill_opts))
		return cmdline_fail(st, "--kill-rank, --kill-count, --kill-signal and --seed go "
		                        "with --kill-every (--kill-count and --seed also with "
		                        "--kill-cm-every)");
	if (check_cm_restart(opts, GIVEN("max-cm-restarts"), st) < 0)
		return CMDLINE_ERROR;
	/* Kills aimed at one rank all count against its restarts: by default
	 * no more than it may survive, so the documented example succeeds. */
	if (!GIVEN("kill-count") && opts->kill_rank >= 0 && opts->kill_count > opts->max_restarts)
		opts->kill_count = opts->max_restarts > 0 ? opts->max_restarts : 1;
#undef GIVEN
	if (opts->kill_rank >= opts->nranks)
		return cmdline_fail(st, "--kill-rank %s: the job has ranks 0 to %d",
		                    P->kill_rank_text, opts->nranks - 1);
	if (opts->kill_at_rank >= opts->nranks)
		return cmdline_fail(st, "--kill-at: rank %d is not in the job (ranks 0 to %d)",
		                    opts->kill_at_rank, opts->nranks - 1);
	if (opts->transport == CMRUN_TRANSPORT_DIRECT &&
	    (opts->kill_every_ns || opts->kill_at_rank >= 0 || kill_host_text))
		return cmdline_fail(st, "fault injection (--kill-every, --kill-at, --kill-host) "
		                        "needs --transport cm: the direct transport cannot restart "
		                        "a rank");
	if (opts->ckpt_every && opts->ckpt_dir == NULL)
		return cmdline_fail(st,
		                    "--ckpt-every goes with --ckpt-dir (where the checkpoints go)");
	if (opts->ckpt_keep && opts->ckpt_dir == NULL)
		return cmdline_fail(st,
		                    "--ckpt-keep goes with --ckpt-dir (where the checkpoints go)");
	if (opts->ckpt_dir && opts->transport != CMRUN_TRANSPORT_CM)
		return cmdline_fail(st, "--ckpt-dir needs --transport cm: only a rank restarted "
		                        "from a channel memory's log can resume from a checkpoint");
	if (parse_placement(opts, P->hosts_file, P->host_list, kill_host_text, map_by, st) < 0)
		return CMDLINE_ERROR;
	if (launch_configure(opts, P->launch_text, st->err, sizeof st->err) < 0)
		return CMDLINE_ERROR;
	if (check_cm_opts(opts, st) < 0)
		return CMDLINE_ERROR;
	if (opts->port_base + (long)opts->nranks * opts->replicas > 65536)
		return cmdline_fail(st, "--port-base %d: %d processes would need ports past 65535",
		                    opts->port_base, opts->nranks * opts->replicas);
	opts->program_argv = &argv[st->optind];
	return CMDLINE_OK;
}

int cmrun_parse_options(int argc, char **argv, struct cmrun_options *opts, struct cmdline_state *st)
{
	struct cmrun_parse P;
	bool given[sizeof cmrun_opts / sizeof cmrun_opts[0]];
	memset(&P, 0, sizeof P);
	P.o.ncms = 1;
	P.o.mode = known_modes[0];
	P.o.kill_rank = -1;
	P.o.kill_signal = SIGKILL;
	P.o.kill_at_rank = -1;
	P.o.kill_host = -1;
	P.o.heartbeat_timeout_ns = CMRUN_DEFAULT_HEARTBEAT_TIMEOUT_NS;
	P.o.heartbeat_timeout_text = "10s";
	P.ncms = 1;
	P.max_restarts = CMRUN_DEFAULT_MAX_RESTARTS;
	P.max_cm_restarts = CMRUN_DEFAULT_MAX_RESTARTS;
	P.kill_count = CMRUN_DEFAULT_KILL_COUNT;
	P.replicas = 1;
	P.kill_replica = -1;
	P.port_base = CMRUN_DEFAULT_PORT_BASE;
	st->given = given;
	int r = cmdline_parse(&cmrun_cmdline, argc, argv, &P, st);
	if (r == CMDLINE_OK)
		r = check_all(&P, argc, argv, st);
	st->given = NULL;
	*opts = P.o;
	return r;
}

void cmrun_options_free(struct cmrun_options *o)
{
	hosts_free(&o->hosts);
	for (int i = 0; i < o->nexports; i++)
		free(o->exports[i]);
	free(o->exports);
	o->exports = NULL;
	o->nexports = 0;
}
