#include <config.h>

#include "options.h"

#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "units.h"

static const char *const known_modes[] = {"mono", "thread-per-client", "multiplexer",
                                          "specialized"};

static void usage(FILE *out)
{
	fprintf(
	    out,
	    "Usage: cmrun -n N [OPTIONS] [--] PROGRAM [ARGS...]\n"
	    "Starts N ranks of PROGRAM on this machine, with K channel memories (cmserver)\n"
	    "or a direct TCP mesh between them, and forwards their output.\n"
	    "\n"
	    "  -n, --np N             number of ranks (1..%d)\n"
	    "      --cms K            channel memories to start (1..%d, default 1; transport cm)\n"
	    "      --mode M           cmserver mode: mono, thread-per-client, multiplexer,\n"
	    "                         specialized (default mono; transport cm)\n"
	    "      --transport T      cm (default: every message through a channel memory)\n"
	    "                         or direct (TCP between ranks, no fault tolerance)\n"
	    "      --tag-output       prefix every output line with \"[RANK] \"\n"
	    "      --timeout T        stop the job after T (e.g. 30s, 500ms, 2m; 0: never);\n"
	    "                         exit status 124\n"
	    "      --max-message B    largest message payload the CMs accept (e.g. 64MiB)\n"
	    "  -v, --verbose          report what cmrun does (twice: debug)\n"
	    "  -h, --help             this text\n"
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
	    CMRUN_MAX_RANKS, CMRUN_MAX_CMS);
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
	return t == CMRUN_TRANSPORT_DIRECT ? "direct" : "cm";
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
};

void cmrun_parse_options(int argc, char **argv, struct cmrun_options *opts)
{
	static const struct option long_opts[] = {
	    {"np", required_argument, NULL, 'n'},
	    {"cms", required_argument, NULL, OPT_CMS},
	    {"mode", required_argument, NULL, OPT_MODE},
	    {"transport", required_argument, NULL, OPT_TRANSPORT},
	    {"tag-output", no_argument, NULL, OPT_TAG_OUTPUT},
	    {"timeout", required_argument, NULL, OPT_TIMEOUT},
	    {"max-message", required_argument, NULL, OPT_MAX_MESSAGE},
	    {"verbose", no_argument, NULL, 'v'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	bool have_n = false, have_cms = false, have_mode = false, have_max_message = false;
	long value;

	memset(opts, 0, sizeof *opts);
	opts->ncms = 1;
	opts->mode = "mono";
	opts->transport = CMRUN_TRANSPORT_CM;

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
		case OPT_TRANSPORT:
			if (strcmp(optarg, "cm") == 0)
				opts->transport = CMRUN_TRANSPORT_CM;
			else if (strcmp(optarg, "direct") == 0)
				opts->transport = CMRUN_TRANSPORT_DIRECT;
			else
				bad_usage("--transport takes cm or direct, not '%s'", optarg);
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
		case 'v':
			opts->verbosity++;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case ':':
			bad_usage("option '%s' needs a value", argv[prev_optind]);
		default:
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
	if (opts->transport == CMRUN_TRANSPORT_DIRECT &&
	    (have_cms || have_mode || have_max_message))
		bad_usage("--cms, --mode and --max-message apply to --transport cm only");
	opts->program_argv = &argv[optind];
}
