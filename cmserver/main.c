/* cmserver: a channel memory. Parses and validates the command line, reads
 * the job secret, opens the listening sockets (TCP, and an abstract unix
 * socket for ranks on this host), tells whoever started it where it listens, and hands over to the
 * I/O engine --mode selects. */
#include "config.h"

#include "core.h"
#include "engine.h"
#include "journal.h"
#include "logmem.h"
#include "spill.h"

#include "jobenv.h"
#include "log.h"
#include "net.h"
#include "secret.h"
#include "units.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXIT_USAGE 2
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

const struct cm_engine cm_engines[] = {
    {"mono", cm_engine_mono, "one libev event loop serves every connection (no threads)"},
    {"thread-per-client", cm_engine_thread_per_client,
     "an accepting thread + one thread per connection"},
    {"multiplexer", cm_engine_multiplexer,
     "--threads N event loops, each connection on the least loaded"},
    {"specialized", cm_engine_specialized,
     "acceptor, --threads N receiving loops, one sending thread"},
    {NULL, NULL, NULL},
};

static void usage(FILE *out)
{
	fprintf(out, "Usage: cmserver [OPTION]...\n"
	             "A chanmem channel memory: logs every message sent to the ranks it is home\n"
	             "for, matches their receive requests, and delivers.\n"
	             "\n"
	             "Options:\n"
	             "  --mode MODE          I/O engine (default mono), one of:\n");
	for (const struct cm_engine *e = cm_engines; e->name; e++)
		fprintf(out, "                         %-18s %s\n", e->name, e->summary);
	fprintf(
	    out,
	    "  --threads N          multiplexer and specialized: event-loop threads (%d-%d,\n"
	    "                       default %s, else %d)\n"
	    "  --listen ADDR:PORT   address to listen on (default 127.0.0.1:0; port 0 picks\n"
	    "                       a free port). Prints 'cmserver: listening on HOST:PORT\n"
	    "                       unix:@NAME': besides TCP it listens on an abstract unix\n"
	    "                       socket (name picked by the kernel, no file) that ranks\n"
	    "                       on this host reach faster; clients must still give the\n"
	    "                       job secret\n"
	    "  --no-unix            listen on TCP only (the line then ends after HOST:PORT)\n"
	    "  --unix unix:@NAME    listen on that abstract unix name instead of one the\n"
	    "                       kernel picks (cmrun restarts a CM on the address it had)\n"
	    "  --ready-fd N         once listening, write the same \"HOST:PORT[ unix:@NAME]\\n\"\n"
	    "                       to fd N and close it\n"
	    "  --report-fd N        report to the dispatcher on fd N (cmrun passes it): one\n"
	    "                       line \"lost RANK INCARNATION\" per rank connection that\n"
	    "                       ends without BYE, and every 500 ms \"stats LOG_BYTES\n"
	    "                       REPLAYED EVENTS\" (payload bytes held, messages and\n"
	    "                       events replayed)\n"
	    "  --max-message BYTES  largest message payload accepted (default and most\n"
	    "                       4GiB-1, what a frame carries; units K, M, G, KiB,\n"
	    "                       MiB, GiB; at least %d)\n"
	    "  --log-mem BYTES      bound on the memory of message payloads: the log,\n"
	    "                       output queues, replay reads (default 1GiB, or a\n"
	    "                       quarter of physical memory if less). Past an eighth of\n"
	    "                       it delivered payloads go to the spill store (and come\n"
	    "                       back when a restarted rank is replayed), past three\n"
	    "                       quarters undelivered ones too; at the bound the CM\n"
	    "                       stops reading from senders until memory is free\n"
	    "  --spill-dir DIR      where the spill store's segment files go (default: a\n"
	    "                       new directory under $TMPDIR); its files are unlinked\n"
	    "                       as soon as they are open: nothing outlives the CM\n"
	    "  --no-spill           drop delivered messages past --log-mem instead (a\n"
	    "                       restarted rank that needs one cannot be replayed)\n"
	    "  --cut-through-min BYTES\n"
	    "                       forward a message of at least BYTES payload bytes as it\n"
	    "                       arrives (cut-through): matched at its header, its DELIVER\n"
	    "                       sent in pieces from the log buffer (default 256KiB;\n"
	    "                       0 = off: store the whole payload, then forward)\n"
	    "  --journal FILE       append every input that changes the CM's state to FILE\n"
	    "                       before answering, and first recover the state FILE\n"
	    "                       holds: a CM restarted on the same FILE goes on where\n"
	    "                       the dead one stopped (cmrun --cm-restart passes it)\n"
	    "  --world-size N       the job's ranks (cmrun passes it): a HELLO with another\n"
	    "                       world size is refused. Without it the first accepted\n"
	    "                       HELLO sets it, up to %d\n"
	    "  --secret-file FILE   read the 32-character job secret from the first line of\n"
	    "                       FILE; the environment variable %s takes precedence\n"
	    "  -v, --verbose        report connections and errors; twice for debug output\n"
	    "  -h, --help           show this help and exit\n"
	    "      --version        print cmserver's version and exit\n"
	    "\n"
	    "The job secret comes from %s, else from --secret-file; without\n"
	    "either cmserver refuses to start. SIGTERM or SIGINT stop it cleanly (exit 0).\n"
	    "Exit status: 0 after a clean stop, 1 on a runtime failure, 2 on a usage error.\n",
	    CM_THREADS_MIN, CM_THREADS_MAX, CM_ENV_CM_THREADS, CM_THREADS_DEFAULT, MIN_MAX_MESSAGE,
	    CM_WORLD_MAX, CM_ENV_SECRET, CM_ENV_SECRET);
}

static void __attribute__((noreturn)) bad_usage(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

static void bad_usage(const char *fmt, ...)
{
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	cm_err("%s", line);
	fprintf(stderr, "Try 'cmserver --help' for more information.\n");
	exit(EXIT_USAGE);
}

static void read_secret(const char *file, char out[CM_SECRET_LEN])
{
	char secret[CM_SECRET_LEN + 1], why[512];
	if (cm_secret_load(file, secret, why, sizeof why) < 0)
		bad_usage("%s", why);
	memcpy(out, secret, CM_SECRET_LEN);
}

static uint64_t parse_size_opt(const char *opt, const char *text, uint64_t min, uint64_t max)
{
	uint64_t v;
	if (cm_parse_size(text, &v) < 0)
		bad_usage("%s '%s': not a size (examples: 65536, 64K, 4MiB, 1G)", opt, text);
	if (v < min || v > max)
		bad_usage("%s '%s': must be between %llu and %llu bytes", opt, text,
		          (unsigned long long)min, (unsigned long long)max);
	return v;
}

/* The TCP listener at addr and, unless no_unix, the abstract unix one;
 * where gets "HOST:PORT[ unix:@NAME]", TCP first so that readers that only
 * know TCP take the first word. */
static int open_listeners(const struct sockaddr_in *addr, const char *listen_text, bool no_unix,
                          const struct cm_addr *unix_want, struct cm_listeners *ls, char *where,
                          size_t wherelen)
{
	struct sockaddr_in bound;
	int fd = cm_tcp_listen(addr, &bound);
	if (fd < 0) {
		cm_err("cannot listen on %s: %s", listen_text, strerror(errno));
		return -1;
	}
	ls->fds[ls->n++] = fd;
	cm_format_addr(&bound, where, wherelen);
	if (no_unix)
		return 0;
	struct cm_addr unix_bound;
	if ((fd = cm_unix_listen(unix_want, &unix_bound)) < 0) {
		cm_err("cannot listen on an abstract unix socket: %s (--no-unix: TCP only)",
		       strerror(errno));
		cm_listeners_close(ls, 0);
		return -1;
	}
	ls->fds[ls->n++] = fd;
	size_t len = strlen(where);
	where[len++] = ' ';
	cm_format_any(&unix_bound, where + len, wherelen - len);
	return 0;
}

int main(int argc, char **argv)
{
	enum {
		OPT_MODE = 256,
		OPT_THREADS,
		OPT_LISTEN,
		OPT_NO_UNIX,
		OPT_UNIX,
		OPT_READY_FD,
		OPT_REPORT_FD,
		OPT_MAX_MESSAGE,
		OPT_LOG_MEM,
		OPT_SPILL_DIR,
		OPT_NO_SPILL,
		OPT_CUT_THROUGH,
		OPT_WORLD_SIZE,
		OPT_SECRET,
		OPT_VERSION,
		OPT_JOURNAL
	};
	static const struct option longopts[] = {
	    {"mode", required_argument, NULL, OPT_MODE},
	    {"threads", required_argument, NULL, OPT_THREADS},
	    {"listen", required_argument, NULL, OPT_LISTEN},
	    {"no-unix", no_argument, NULL, OPT_NO_UNIX},
	    {"unix", required_argument, NULL, OPT_UNIX},
	    {"ready-fd", required_argument, NULL, OPT_READY_FD},
	    {"report-fd", required_argument, NULL, OPT_REPORT_FD},
	    {"max-message", required_argument, NULL, OPT_MAX_MESSAGE},
	    {"log-mem", required_argument, NULL, OPT_LOG_MEM},
	    {"spill-dir", required_argument, NULL, OPT_SPILL_DIR},
	    {"journal", required_argument, NULL, OPT_JOURNAL},
	    {"no-spill", no_argument, NULL, OPT_NO_SPILL},
	    {"cut-through-min", required_argument, NULL, OPT_CUT_THROUGH},
	    {"world-size", required_argument, NULL, OPT_WORLD_SIZE},
	    {"secret-file", required_argument, NULL, OPT_SECRET},
	    {"verbose", no_argument, NULL, 'v'},
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, OPT_VERSION},
	    {NULL, 0, NULL, 0},
	};
	const char *threads_text = NULL, *threads_from = "--threads";
	const char *mode = "mono", *listen_text = "127.0.0.1:0", *secret_file = NULL;
	const char *unix_text = NULL;
	long ready_fd = -1, report_fd = -1;
	const char *spill_dir = NULL, *journal_path = NULL;
	bool no_spill = false, no_unix = false;
	int verbosity = 0;
	struct cm_server_opts opts = {.max_message = CM_DEFAULT_MAX_PAYLOAD,
	                              .log_mem = default_log_mem(),
	                              .cut_through_min = DEFAULT_CUT_THROUGH_MIN};

	cm_log_init("cmserver", 0);
	opterr = 0;
	int c;
	while ((c = getopt_long(argc, argv, ":hv", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_MODE:
			mode = optarg;
			break;
		case OPT_THREADS:
			threads_text = optarg;
			break;
		case OPT_LISTEN:
			listen_text = optarg;
			break;
		case OPT_NO_UNIX:
			no_unix = true;
			break;
		case OPT_UNIX:
			unix_text = optarg;
			break;
		case OPT_READY_FD:
			if (cm_parse_long(optarg, 0, INT_MAX, &ready_fd) < 0)
				bad_usage("--ready-fd '%s': not a file descriptor number", optarg);
			break;
		case OPT_REPORT_FD:
			if (cm_parse_long(optarg, 0, INT_MAX, &report_fd) < 0)
				bad_usage("--report-fd '%s': not a file descriptor number", optarg);
			break;
		case OPT_MAX_MESSAGE:
			opts.max_message = (uint32_t)parse_size_opt("--max-message", optarg,
			                                            MIN_MAX_MESSAGE, UINT32_MAX);
			break;
		case OPT_SPILL_DIR:
			spill_dir = optarg;
			break;
		case OPT_JOURNAL:
			if (*optarg == '\0')
				bad_usage("--journal takes a file name, not an empty one");
			journal_path = optarg;
			break;
		case OPT_NO_SPILL:
			no_spill = true;
			break;
		case OPT_CUT_THROUGH:
			opts.cut_through_min =
			    (uint32_t)parse_size_opt("--cut-through-min", optarg, 0, UINT32_MAX);
			break;
		case OPT_WORLD_SIZE: {
			long n;
			if (cm_parse_long(optarg, 1, MAX_WORLD_SIZE, &n) < 0)
				bad_usage(
				    "--world-size '%s': must be a number of ranks from 1 to %d",
				    optarg, MAX_WORLD_SIZE);
			opts.world_size = (uint32_t)n;
			break;
		}
		case OPT_LOG_MEM:
			opts.log_mem = parse_size_opt("--log-mem", optarg, 0, UINT64_MAX);
			break;
		case OPT_SECRET:
			secret_file = optarg;
			break;
		case 'v':
			verbosity++;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case OPT_VERSION:
			printf("cmserver (chanmem) %s\n", PACKAGE_VERSION);
			return 0;
		case ':':
			bad_usage("option '%s' needs a value", argv[optind - 1]);
		default:
			bad_usage("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		bad_usage("unexpected argument '%s'", argv[optind]);
	cm_log_init("cmserver", verbosity);

	const struct cm_engine *engine = NULL;
	for (const struct cm_engine *e = cm_engines; e->name; e++)
		if (strcmp(e->name, mode) == 0)
			engine = e;
	if (engine == NULL)
		bad_usage("unknown mode '%s' (modes: mono, thread-per-client, multiplexer, "
		          "specialized)",
		          mode);
	if (engine->run == NULL)
		bad_usage("mode %s is not built yet", mode);
	opts.mode = engine->name;
	bool takes_threads =
	    engine->run == cm_engine_multiplexer || engine->run == cm_engine_specialized;
	if (threads_text && !takes_threads)
		bad_usage("--threads applies to modes multiplexer and specialized, not %s", mode);
	if (threads_text == NULL && takes_threads) {
		threads_text = getenv(CM_ENV_CM_THREADS);
		threads_from = CM_ENV_CM_THREADS;
	}
	opts.threads = takes_threads ? CM_THREADS_DEFAULT : 1;
	/* An empty --threads is a mistake; an empty variable means unset. */
	if (threads_text && (*threads_text || threads_from[0] == '-')) {
		long n;
		if (cm_parse_long(threads_text, CM_THREADS_MIN, CM_THREADS_MAX, &n) < 0)
			bad_usage("%s '%s': must be a number of threads from %d to %d",
			          threads_from, threads_text, CM_THREADS_MIN, CM_THREADS_MAX);
		opts.threads = (unsigned)n;
	}

	struct sockaddr_in addr;
	if (strchr(listen_text, ':') == NULL || cm_parse_hostport(listen_text, 0, &addr) < 0)
		bad_usage("--listen '%s': expected ADDR:PORT (IPv4 address or localhost, port "
		          "0-65535)",
		          listen_text);
	struct cm_addr unix_want;
	char why[128];
	if (unix_text && no_unix)
		bad_usage("--unix and --no-unix contradict each other: drop one");
	if (unix_text && (cm_parse_addr(unix_text, &unix_want, why, sizeof why) < 0 ||
	                  unix_want.u.sa.sa_family != AF_UNIX))
		bad_usage("--unix '%s': expected unix:@NAME", unix_text);
	if (ready_fd >= 0 && fcntl((int)ready_fd, F_GETFD) < 0)
		bad_usage("--ready-fd %ld: not an open file descriptor", ready_fd);
	if (report_fd >= 0 && fcntl((int)report_fd, F_GETFD) < 0)
		bad_usage("--report-fd %ld: not an open file descriptor", report_fd);
	read_secret(secret_file, opts.secret);

	/* Held back until the engine's ev_signal watchers take over, so a
	 * SIGTERM right after the ready line still means a clean exit. */
	sigset_t stop;
	sigemptyset(&stop);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGINT);
	sigprocmask(SIG_BLOCK, &stop, NULL);
	signal(SIGPIPE, SIG_IGN);
	/* Payloads of 64 KiB and more live in the log memory's own blocks
	 * (logmem.c); the heap holds small ones and bookkeeping, whose freed
	 * memory glibc may keep up to this much before giving it back: a fixed
	 * threshold, so that it stays inside the documented overhead. */
	mallopt(M_TRIM_THRESHOLD, 64 * 1024 * 1024);

	/* The spill directory first: one that cannot be made is refused
	 * before anything listens. */
	struct cm_spill_store *spill = NULL;
	if (!no_spill) {
		spill = cm_spill_store_open(spill_dir);
		if (spill == NULL && spill_dir)
			return 1;
		if (spill == NULL)
			cm_err("running without a spill store: past --log-mem delivered messages "
			       "are dropped");
		opts.spill = spill ? cm_spill_store_ops(spill) : NULL;
		opts.spill_ctx = spill;
	}
	struct cm_logmem *mem = cm_logmem_new(opts.log_mem);
	if (mem == NULL) {
		cm_err("out of memory");
		cm_spill_store_close(spill);
		return 1;
	}
	opts.mem = mem;
	if (journal_path) {
		char jwhy[256 + PATH_MAX];
		opts.journal =
		    cm_journal_open(journal_path, opts.cut_through_min, jwhy, sizeof jwhy);
		if (opts.journal == NULL) {
			cm_err("%s", jwhy);
			cm_spill_store_close(spill);
			cm_logmem_free(mem);
			return 1;
		}
	}

	struct cm_listeners ls = {.n = 0};
	char where[32 + CM_ADDR_TEXT_MAX];
	if (open_listeners(&addr, listen_text, no_unix, unix_text ? &unix_want : NULL, &ls, where,
	                   sizeof where) < 0)
		return 1;
	printf("cmserver: listening on %s\n", where);
	fflush(stdout);
	cm_info("mode %s (%u threads), max message %u bytes, log memory %llu bytes, "
	        "cut-through from %u bytes",
	        opts.mode, opts.threads, (unsigned)opts.max_message,
	        (unsigned long long)opts.log_mem, (unsigned)opts.cut_through_min);
	if (ready_fd >= 0) {
		char line[sizeof where + 1];
		int n = snprintf(line, sizeof line, "%s\n", where);
		if (cm_write_full((int)ready_fd, line, (size_t)n) < 0) {
			cm_err("--ready-fd %ld: %s", ready_fd, strerror(errno));
			cm_listeners_close(&ls, 0);
			return 1;
		}
		close((int)ready_fd);
	}
	if (report_fd >= 0 && (opts.monitor = cm_monitor_new((int)report_fd)) == NULL) {
		cm_err("out of memory");
		cm_listeners_close(&ls, 0);
		return 1;
	}
	int status = engine->run(&opts, &ls);
	/* The store drops its queue (the job is over) and releases those
	 * buffers into the log memory, which goes last. Closing its files
	 * frees their disk space, seconds for a long log: said first. */
	if (spill)
		cm_monitor_stopping(opts.monitor);
	cm_journal_close(opts.journal);
	cm_spill_store_close(spill);
	cm_logmem_log_summary(mem);
	cm_logmem_free(mem);
	cm_monitor_free(opts.monitor);
	return status;
}
