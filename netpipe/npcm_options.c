/* NPcm's command line, its debug corruption hook and NetPIPE's size sequence. */
#ifdef CHANMEM
#include <config.h>
#define NPCM_VERSION "NPcm (chanmem) " PACKAGE_VERSION
#else
#define NPCM_VERSION "NPcm (built with another MPI's mpicc)"
#endif
#include "npcm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The command line as parsed, before it goes into struct options. */
struct npcm_parse {
	uint64_t lower, upper, perturbation, trials, target_ns;
	const char *output;
	bool streaming, reset, synchronous, async_recv, any_source, no_verify, quiet;
};

static int set_output(void *ctx, const struct cmdline_opt *o, const char *arg, char *err,
                      size_t errlen)
{
	((struct npcm_parse *)ctx)->output = arg;
	return *arg == '\0' ? -1 : 0;
}

#define AT(M, T) CMDLINE_AT(struct npcm_parse, M, T)
#define FLAG(c, m, text)                                                                           \
	{                                                                                          \
		.short_name = c, .kind = CMDLINE_FLAG, .field = AT(m, bool), .help = text          \
	}
static const struct cmdline_opt npcm_opts[] = {
    {.kind = CMDLINE_TEXT,
     .help = "usage: NPcm [options]   (run with 2 MPI ranks, or 2P ranks for P pairs)\n"
             "NetPIPE's method over MPI: ping-pong (default) or streaming, sizes growing about\n"
             "sqrt(2) per step, each base size L also measured at L-p and L+p.\n"
             "With 2P ranks, rank 2i transmits to rank 2i+1: the P pairs run every size at the\n"
             "same time and np.out gets, per size: bytes, aggregate Mbps (sum over the pairs),\n"
             "mean one-way seconds, then the slowest and the fastest pair's Mbps.\n"},
    {.short_name = 'l',
     .kind = CMDLINE_SIZE,
     .meta = "BYTES",
     .field = AT(lower, uint64_t),
     .uhi = MAX_UPPER,
     .bad = "-l wants a size in bytes (0 .. 1 GiB)",
     .help = "lower bound of the message size (default 1)"},
    {.short_name = 'u',
     .kind = CMDLINE_SIZE,
     .meta = "BYTES",
     .field = AT(upper, uint64_t),
     .uhi = MAX_UPPER,
     .bad = "-u wants a size in bytes (0 .. 1 GiB)",
     .help = "upper bound of the base size (default 8388608; suffixes K, M, G, KiB...)"},
    {.short_name = 'p',
     .kind = CMDLINE_SIZE,
     .meta = "BYTES",
     .field = AT(perturbation, uint64_t),
     .uhi = 1 << 20,
     .bad = "-p wants a number of bytes (0 .. 1 MiB)",
     .help = "perturbation (default 3; 0 = none)"},
    {.short_name = 'o',
     .kind = CMDLINE_CALL,
     .meta = "FILE",
     .set = set_output,
     .bad = "-o wants a file name",
     .help = "output file, NetPIPE np.out columns: bytes Mbps seconds (default np.out)"},
    FLAG('s', streaming, "streaming: send one way, one reply per trial (default ping-pong)"),
    FLAG('r', reset, "barrier between trials (MPI's stand-in for NetPIPE's connection reset)"),
    FLAG('S', synchronous, "synchronous sends (MPI_Ssend) for data messages"),
    FLAG('a', async_recv, "asynchronous receives: pre-post MPI_Irecv before the data arrives"),
    FLAG('z', any_source, "receive with MPI_ANY_SOURCE"),
    {.short_name = 't',
     .kind = CMDLINE_DURATION,
     .meta = "SECONDS",
     .field = AT(target_ns, uint64_t),
     .ulo = 1,
     .uhi = 3600000000000ull,
     .bad = "-t wants seconds (> 0, <= 3600), e.g. 0.1",
     .help = "target duration of one trial (default 0.1)"},
    {.short_name = 'T',
     .kind = CMDLINE_SIZE,
     .meta = "N",
     .field = AT(trials, uint64_t),
     .ulo = 1,
     .uhi = MAX_TRIALS,
     .bad = "-T wants a number of trials (1 .. 100)",
     .help = "trials per size, the best one is kept (default 3)"},
    FLAG('x', no_verify, "skip the verification of received data (peak runs)"),
    FLAG('q', quiet, "quiet: no progress lines (np.out is still written)"),
    {"help", 'h', .kind = CMDLINE_HELP, .help = "this help"},
    {"version", .kind = CMDLINE_VERSION, .help = "print NPcm's version"},
    {"help-man", .kind = CMDLINE_HELP_MAN},
    {.kind = CMDLINE_TEXT,
     .help =
         "Ping-pong reports the one-way time (round trip / 2); Mbps = bits / (seconds * 2^20).\n"
         "Ping-pong with verification stops rank 0's clock while it checks a reply.\n"},
};
#undef FLAG
#undef AT

const struct cmdline_prog npcm_cmdline = {
    .name = "NPcm",
    .version = NPCM_VERSION,
    .opts = npcm_opts,
    .nopts = sizeof npcm_opts / sizeof npcm_opts[0],
    .help_col = 13,
    /* --help and --version anywhere (before --), as the GNU programs of
     * the suite, without giving up NetPIPE's short flags. */
    .flags = CMDLINE_NO_OPERANDS | CMDLINE_HELP_FIRST,
    .msg_unknown = "unknown option: {}",
    .msg_needs_value = "option needs a value: {}",
    .msg_unexpected = "unexpected argument: {}",
};

int parse_options_quietly(int argc, char **argv, struct options *opt, char *err, size_t errlen)
{
	struct npcm_parse p = {.lower = 1,
	                       .upper = 8388608,
	                       .perturbation = 3,
	                       .output = "np.out",
	                       .trials = 3,
	                       .target_ns = 100000000};
	struct cmdline_state st = {0};
	int r = cmdline_parse(&npcm_cmdline, argc, argv, &p, &st);
	*opt = (struct options){.lower = (long long)p.lower,
	                        .upper = (long long)p.upper,
	                        .perturbation = (long long)p.perturbation,
	                        .output = p.output,
	                        .streaming = p.streaming,
	                        .reset = p.reset,
	                        .synchronous = p.synchronous,
	                        .async_recv = p.async_recv,
	                        .any_source = p.any_source,
	                        .verify = !p.no_verify,
	                        .quiet = p.quiet,
	                        .target = (double)p.target_ns / 1e9,
	                        .trials = (int)p.trials};
	if (r == CMDLINE_OK && opt->lower > opt->upper) {
		snprintf(st.err, sizeof st.err, "-l is larger than -u");
		r = CMDLINE_ERROR;
	}
	snprintf(err, errlen, "%s", st.err);
	return r;
}

/* Returns 0 to run, or the exit status (0 for -h). Only rank 0 talks. */
int parse_options(int argc, char **argv, int rank, struct options *opt)
{
	char err[1024];
	int r = parse_options_quietly(argc, argv, opt, err, sizeof err);
	if (r == CMDLINE_OK)
		return 0;
	if (rank == 0 && r == CMDLINE_ERROR) {
		fprintf(stderr, "NPcm: %s\n", err);
		cmdline_help(&npcm_cmdline, stderr);
	} else if (rank == 0 && r == CMDLINE_SHOW_VERSION) {
		printf("%s\n", NPCM_VERSION);
	} else if (rank == 0) {
		(r == CMDLINE_SHOW_MAN ? cmdline_man : cmdline_help)(&npcm_cmdline, stdout);
	}
	return r == CMDLINE_ERROR ? EXIT_USAGE : -1;
}

int parse_corruption(const char *text, int nranks, struct corruption *out)
{
	long long rank, size, offset;
	char tail;
	if (sscanf(text, "%lld:%lld:%lld%c", &rank, &size, &offset, &tail) != 3 || rank < 0 ||
	    rank >= nranks || size < 1 || offset < 0 || offset >= size)
		return -1;
	*out = (struct corruption){.active = 1, .rank = (int)rank, .size = size, .offset = offset};
	return 0;
}

/* NetPIPE 3.x's size walk: the increment doubles every other step (so sizes grow about sqrt(2)
 * per step) and each base size is also measured at +-perturbation once the increment is wider
 * than the perturbation. Returns the number of sizes; fills sizes[] when it is not NULL. */
int size_walk(const struct options *opt, long long *sizes)
{
	long long p = opt->perturbation;
	long long inc = opt->lower > 1 ? opt->lower / 2 : 1;
	int nq = opt->lower > 1 ? 1 : 0;
	int count = 0;
	for (long long len = opt->lower; len <= opt->upper; len += inc, nq++) {
		if (nq > 2)
			inc = (nq % 2) ? inc + inc : inc;
		int perturb = p > 0 && inc > p + 1;
		for (long long pert = perturb ? -p : 0; pert <= p; pert += perturb ? p : p + 1) {
			if (sizes != NULL)
				sizes[count] = len + pert;
			count++;
		}
	}
	return count;
}
