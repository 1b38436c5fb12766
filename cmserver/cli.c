#include "config.h"

#include "cli.h"

#include "core.h"
#include "engine.h"

#include "jobenv.h"
#include "net.h"
#include "units.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The log's memory bound by default: 1 GiB, or a quarter of the machine's
 * memory when that is less. The bound is hard (logmem.h: the senders are
 * held back at it) and everything past it goes to the spill store, so the
 * default only trades memory for disk writes: with it the CM's resident
 * set stays under about 1.1 GiB whatever the traffic, and a steady run
 * reuses the same blocks instead of faulting in new pages (see the user
 * guide for the measured effect of the bound on bandwidth). */
static uint64_t default_log_mem(void)
{
	uint64_t bound = 1ull << 30;
	long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
	if (pages > 0 && page > 0 && (uint64_t)pages * (uint64_t)page / 4 < bound)
		bound = (uint64_t)pages * (uint64_t)page / 4;
	return bound;
}
/* Payloads from this size on are forwarded as they arrive (cut-through).
 * Below it store-and-forward costs less: the frame is dispatched before its
 * payload and its writer woken per read. Measured on loopback (2 cores):
 * cut-through loses 5-30 % at 128 KiB, wins 5-35 % at 256 KiB and above. */
#define DEFAULT_CUT_THROUGH_MIN (256 * 1024)
/* --world-size ceiling: ranks are 32-bit on the wire, and the CM allocates
 * its per-rank state for every rank up front. */
#define MAX_WORLD_SIZE (1 << 24)
/* A HELLO carries 48 bytes: a smaller ceiling would lock every rank out. */
#define MIN_MAX_MESSAGE CM_HELLO_PAYLOAD

static const char *const modes[] = {"mono", "thread-per-client", "multiplexer", "specialized",
                                    NULL};

static int set_journal(void *ctx, const struct cmdline_opt *o, const char *arg, char *err,
                       size_t errlen)
{
	((struct cmserver_args *)ctx)->journal_path = arg;
	return *arg == '\0' ? -1 : 0;
}

#define AT(M, T) CMDLINE_AT(struct cmserver_args, M, T)
#define S CMDLINE_STR
#define NOT_A_SIZE "'{}': not a size (examples: 65536, 64K, 4MiB, 1G)"
#define OUT_OF_RANGE "'{}': must be between {lo} and {hi} bytes"
static const struct cmdline_opt cmserver_opts[] = {
    {.kind = CMDLINE_TEXT,
     .help = "Usage: cmserver [OPTION]...\n"
             "A chanmem channel memory: logs every message sent to the ranks it is home\n"
             "for, matches their receive requests, and delivers.\n"
             "\n"
             "Options:\n"},
    {"mode", .kind = CMDLINE_CHOICE, .meta = "MODE", .field = AT(mode_index, int), .choices = modes,
     .bad = "unknown mode '{}' (modes: mono, thread-per-client, multiplexer, specialized)",
     .help = "I/O engine (default mono), one of:\n"
             "  mono               one libev event loop serves every connection (no threads)\n"
             "  thread-per-client  an accepting thread + one thread per connection\n"
             "  multiplexer        --threads N event loops, each connection on the least loaded\n"
             "  specialized        acceptor, --threads N receiving loops, one sending thread",
     .man = "All modes deliver the same messages in the same order."},
    {"threads", .kind = CMDLINE_STRING, .meta = "N", .field = AT(threads_text, const char *),
     .help = "multiplexer and specialized: event-loop threads (" S(CM_THREADS_MIN) "-" S(
         CM_THREADS_MAX) ",\ndefault " CM_ENV_CM_THREADS ", else " S(CM_THREADS_DEFAULT) ")"},
    {"listen", .kind = CMDLINE_STRING, .meta = "ADDR:PORT", .field = AT(listen_text, const char *),
     .help = "address to listen on (default 127.0.0.1:0; port 0 picks\n"
             "a free port). Prints 'cmserver: listening on HOST:PORT\n"
             "unix:@NAME': besides TCP it listens on an abstract unix\n"
             "socket (name picked by the kernel, no file) that ranks\n"
             "on this host reach faster; clients must still give the\n"
             "job secret"},
    {"no-unix", .kind = CMDLINE_FLAG, .field = AT(no_unix, bool),
     .help = "listen on TCP only (the line then ends after HOST:PORT)"},
    {"unix", .kind = CMDLINE_STRING, .meta = "unix:@NAME", .field = AT(unix_text, const char *),
     .help = "listen on that abstract unix name instead of one the\n"
             "kernel picks (cmrun restarts a CM on the address it had)"},
    {"ready-fd", .kind = CMDLINE_LONG, .meta = "N", .field = AT(ready_fd, long), .lo = 0,
     .hi = INT_MAX, .bad = "--ready-fd '{}': not a file descriptor number",
     .help = "once listening, write the same \"HOST:PORT[ unix:@NAME]\\n\"\n"
             "to fd N and close it"},
    {"report-fd", .kind = CMDLINE_LONG, .meta = "N", .field = AT(report_fd, long), .lo = 0,
     .hi = INT_MAX, .bad = "--report-fd '{}': not a file descriptor number",
     .help = "report to the dispatcher on fd N (cmrun passes it): one\n"
             "line \"lost RANK INCARNATION\" per rank connection that\n"
             "ends without BYE, and every 500 ms \"stats LOG_BYTES\n"
             "REPLAYED EVENTS\" (payload bytes held, messages and\n"
             "events replayed)"},
    {"max-message", .kind = CMDLINE_SIZE, .meta = "BYTES", .field = AT(max_message, uint64_t),
     .ulo = MIN_MAX_MESSAGE, .uhi = UINT32_MAX, .bad = "--max-message " NOT_A_SIZE,
     .bad_range = "--max-message " OUT_OF_RANGE,
     .help = "largest message payload accepted (default and most\n"
             "4GiB-1, what a frame carries; units K, M, G, KiB,\n"
             "MiB, GiB; at least {lo})"},
    {"log-mem", .kind = CMDLINE_SIZE, .meta = "BYTES", .field = AT(log_mem, uint64_t),
     .uhi = UINT64_MAX, .bad = "--log-mem " NOT_A_SIZE, .bad_range = "--log-mem " OUT_OF_RANGE,
     .help = "bound on the memory of message payloads: the log,\n"
             "output queues, replay reads (default 1GiB, or a\n"
             "quarter of physical memory if less). Past an eighth of\n"
             "it delivered payloads go to the spill store (and come\n"
             "back when a restarted rank is replayed), past three\n"
             "quarters undelivered ones too; at the bound the CM\n"
             "stops reading from senders until memory is free"},
    {"spill-dir", .kind = CMDLINE_STRING, .meta = "DIR", .field = AT(spill_dir, const char *),
     .help = "where the spill store's segment files go (default: a\n"
             "new directory under $TMPDIR); its files are unlinked\n"
             "as soon as they are open: nothing outlives the CM"},
    {"no-spill", .kind = CMDLINE_FLAG, .field = AT(no_spill, bool),
     .help = "drop delivered messages past --log-mem instead (a\n"
             "restarted rank that needs one cannot be replayed)"},
    {"cut-through-min", .kind = CMDLINE_SIZE, .meta = "BYTES",
     .field = AT(cut_through_min, uint64_t), .uhi = UINT32_MAX,
     .bad = "--cut-through-min " NOT_A_SIZE, .bad_range = "--cut-through-min " OUT_OF_RANGE,
     .help = "forward a message of at least BYTES payload bytes as it\n"
             "arrives (cut-through): matched at its header, its DELIVER\n"
             "sent in pieces from the log buffer (default 256KiB;\n"
             "0 = off: store the whole payload, then forward)"},
    {"journal", .kind = CMDLINE_CALL, .meta = "FILE", .set = set_journal,
     .bad = "--journal takes a file name, not an empty one",
     .help = "append every input that changes the CM's state to FILE\n"
             "before answering, and first recover the state FILE\n"
             "holds: a CM restarted on the same FILE goes on where\n"
             "the dead one stopped (cmrun --cm-restart passes it)"},
    {"journal-scratch", .kind = CMDLINE_FLAG, .field = AT(journal_scratch, bool),
     .help = "with --journal: make FILE's directory (and its parents)\n"
             "if it is missing, and remove FILE (and its directory once\n"
             "empty) when the CM ends cleanly: a journal that only this\n"
             "job needs, on a host whose files cmrun cannot reach\n"
             "(cmrun passes it to the CMs and standbys it starts on\n"
             "other hosts)"},
    {"mirror", .kind = CMDLINE_STRING, .meta = "HOST:PORT", .field = AT(mirror_text, const char *),
     .help = "with --journal: copy every journal write to the standby\n"
             "at HOST:PORT (a cmserver --standby on another host) and\n"
             "answer nothing before the standby holds it, so that the\n"
             "standby can take over when this CM's host dies (a\n"
             "journal that holds records is copied whole first); a CM\n"
             "that loses its standby stops (cmrun --cm-standby)"},
    {"standby", .kind = CMDLINE_FLAG, .field = AT(standby, bool),
     .help = "with --journal FILE (new or empty): keep the copy of one\n"
             "CM's journal that the CM sends with --mirror, and serve\n"
             "no rank until its stream ends without the CM's clean\n"
             "end; then, if the CM said its copy was whole, recover\n"
             "from FILE and serve as that CM"},
    {"world-size", .kind = CMDLINE_LONG, .meta = "N", .field = AT(world_size, long), .lo = 1,
     .hi = MAX_WORLD_SIZE, .bad = "--world-size '{}': must be a number of ranks from 1 to {hi}",
     .help = "the job's ranks (cmrun passes it): a HELLO with another\n"
             "world size is refused. Without it the first accepted\n"
             "HELLO sets it, up to " S(CM_WORLD_MAX)},
    {"secret-file", .kind = CMDLINE_STRING, .meta = "FILE", .field = AT(secret_file, const char *),
     .help = "read the 32-character job secret from the first line of\n"
             "FILE; the environment variable " CM_ENV_SECRET " takes precedence"},
    {"verbose", 'v', .kind = CMDLINE_COUNT, .field = AT(verbosity, int),
     .help = "report connections and errors; twice for debug output"},
    {"help", 'h', .kind = CMDLINE_HELP, .help = "show this help and exit"},
    {"version", .kind = CMDLINE_VERSION, .help = "print cmserver's version and exit"},
    {"help-man", .kind = CMDLINE_HELP_MAN},
    {.kind = CMDLINE_TEXT,
     .help = "\n"
             "The job secret comes from " CM_ENV_SECRET ", else from --secret-file; without\n"
             "either cmserver refuses to start. SIGTERM or SIGINT stop it cleanly (exit 0).\n"
             "Exit status: 0 after a clean stop, 1 on a runtime failure, 2 on a usage error.\n"},
};
#undef OUT_OF_RANGE
#undef NOT_A_SIZE
#undef S
#undef AT

const struct cmdline_prog cmserver_cmdline = {
    .name = "cmserver",
    .version = "cmserver (chanmem) " PACKAGE_VERSION,
    .opts = cmserver_opts,
    .nopts = sizeof cmserver_opts / sizeof cmserver_opts[0],
    .help_col = 23,
    .flags = CMDLINE_NO_OPERANDS | CMDLINE_LONG_OWN_LINE,
};

int cmserver_parse_args(int argc, char **argv, struct cmserver_args *a, struct cmdline_state *st)
{
	*a = (struct cmserver_args){.listen_text = "127.0.0.1:0",
	                            .ready_fd = -1,
	                            .report_fd = -1,
	                            .max_message = CM_DEFAULT_MAX_PAYLOAD,
	                            .log_mem = default_log_mem(),
	                            .cut_through_min = DEFAULT_CUT_THROUGH_MIN};
	int r = cmdline_parse(&cmserver_cmdline, argc, argv, a, st);
	if (r != CMDLINE_OK)
		return r;
	a->mode = modes[a->mode_index];
	a->takes_threads =
	    strcmp(a->mode, "multiplexer") == 0 || strcmp(a->mode, "specialized") == 0;
	const char *threads_from = "--threads";
	if (a->threads_text && !a->takes_threads)
		return cmdline_fail(
		    st, "--threads applies to modes multiplexer and specialized, not %s", a->mode);
	if (a->threads_text == NULL && a->takes_threads) {
		a->threads_text = getenv(CM_ENV_CM_THREADS);
		threads_from = CM_ENV_CM_THREADS;
	}
	a->threads = a->takes_threads ? CM_THREADS_DEFAULT : 1;
	/* An empty --threads is a mistake; an empty variable means unset. */
	if (a->threads_text && (*a->threads_text || threads_from[0] == '-')) {
		long n;
		if (cm_parse_long(a->threads_text, CM_THREADS_MIN, CM_THREADS_MAX, &n) < 0)
			return cmdline_fail(
			    st, "%s '%s': must be a number of threads from %d to %d", threads_from,
			    a->threads_text, CM_THREADS_MIN, CM_THREADS_MAX);
		a->threads = (unsigned)n;
	}
	if (strchr(a->listen_text, ':') == NULL ||
	    cm_parse_hostport(a->listen_text, 0, &a->addr) < 0)
		return cmdline_fail(st,
		                    "--listen '%s': expected ADDR:PORT (IPv4 address or localhost, "
		                    "port 0-65535)",
		                    a->listen_text);
	char why[128];
	if (a->journal_scratch && a->journal_path == NULL)
		return cmdline_fail(st, "--journal-scratch needs --journal FILE");
	if ((a->mirror_text || a->standby) && a->journal_path == NULL)
		return cmdline_fail(st, "%s needs --journal FILE",
		                    a->standby ? "--standby" : "--mirror");
	if (a->mirror_text && a->standby)
		return cmdline_fail(st, "--mirror and --standby contradict each other: a standby "
		                        "has no standby of its own");
	struct cm_addr mirror_addr;
	if (a->mirror_text && cm_parse_addr(a->mirror_text, &mirror_addr, why, sizeof why) < 0)
		return cmdline_fail(st, "--mirror '%s': %s", a->mirror_text, why);
	/* Ranks are told the address as it is written (a STANDBY frame). */
	if (a->mirror_text && strlen(a->mirror_text) > CM_STANDBY_ADDR_MAX)
		return cmdline_fail(st, "--mirror: an address of at most %d characters",
		                    CM_STANDBY_ADDR_MAX);
	if (a->unix_text && a->no_unix)
		return cmdline_fail(st, "--unix and --no-unix contradict each other: drop one");
	if (a->unix_text && (cm_parse_addr(a->unix_text, &a->unix_want, why, sizeof why) < 0 ||
	                     a->unix_want.u.sa.sa_family != AF_UNIX))
		return cmdline_fail(st, "--unix '%s': expected unix:@NAME", a->unix_text);
	return CMDLINE_OK;
}
