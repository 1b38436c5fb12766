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

static void usage(FILE *out)
{
	fprintf(
	    out,
	    "usage: NPcm [options]   (run with 2 MPI ranks, or 2P ranks for P pairs)\n"
	    "NetPIPE's method over MPI: ping-pong (default) or streaming, sizes growing about\n"
	    "sqrt(2) per step, each base size L also measured at L-p and L+p.\n"
	    "With 2P ranks, rank 2i transmits to rank 2i+1: the P pairs run every size at the\n"
	    "same time and np.out gets, per size: bytes, aggregate Mbps (sum over the pairs),\n"
	    "mean one-way seconds, then the slowest and the fastest pair's Mbps.\n"
	    "  -l BYTES   lower bound of the message size (default 1)\n"
	    "  -u BYTES   upper bound of the base size (default 8388608; suffixes K, M, G, "
	    "KiB...)\n"
	    "  -p BYTES   perturbation (default 3; 0 = none)\n"
	    "  -o FILE    output file, NetPIPE np.out columns: bytes Mbps seconds (default "
	    "np.out)\n"
	    "  -s         streaming: send one way, one reply per trial (default ping-pong)\n"
	    "  -r         barrier between trials (MPI's stand-in for NetPIPE's connection reset)\n"
	    "  -S         synchronous sends (MPI_Ssend) for data messages\n"
	    "  -a         asynchronous receives: pre-post MPI_Irecv before the data arrives\n"
	    "  -z         receive with MPI_ANY_SOURCE\n"
	    "  -t SECONDS target duration of one trial (default 0.1)\n"
	    "  -T N       trials per size, the best one is kept (default 3)\n"
	    "  -x         skip the verification of received data (peak runs)\n"
	    "  -q         quiet: no progress lines (np.out is still written)\n"
	    "  -h, --help this help\n"
	    "  --version  print NPcm's version\n"
	    "Ping-pong reports the one-way time (round trip / 2); Mbps = bits / (seconds * 2^20).\n"
	    "Ping-pong with verification stops rank 0's clock while it checks a reply.\n");
}

/* "4096", "64K", "4M", "4MiB", "1G": 1024-based suffixes. */
static int parse_bytes(const char *text, long long max, long long *out)
{
	char *end;
	errno = 0;
	long long value = strtoll(text, &end, 10);
	if (errno != 0 || end == text || value < 0)
		return -1;
	long long scale = 1;
	switch (*end) {
	case 'k':
	case 'K':
		scale = 1LL << 10;
		end++;
		break;
	case 'M':
		scale = 1LL << 20;
		end++;
		break;
	case 'G':
		scale = 1LL << 30;
		end++;
		break;
	default:
		break;
	}
	if (scale > 1 && strcmp(end, "iB") == 0)
		end += 2;
	else if (scale > 1 && strcmp(end, "B") == 0)
		end += 1;
	if (*end != '\0' || value > max / scale)
		return -1;
	*out = value * scale;
	return 0;
}

static int parse_seconds(const char *text, double *out)
{
	char *end;
	errno = 0;
	double value = strtod(text, &end);
	if (errno != 0 || end == text || *end != '\0' || !(value > 0.0) || value > 3600.0)
		return -1;
	*out = value;
	return 0;
}

/* Returns 0 to run, or the exit status (0 for -h). Only rank 0 talks. */
int parse_options(int argc, char **argv, int rank, struct options *opt)
{
	*opt = (struct options){.lower = 1,
	                        .upper = 8388608,
	                        .perturbation = 3,
	                        .output = "np.out",
	                        .verify = 1,
	                        .target = 0.1,
	                        .trials = 3};
	const char *bad = NULL;
	int c = 0;
	/* The GNU long forms every other program of the suite takes; getopt alone
	 * would read "--help" as an unknown option '-'. */
	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
		if (strcmp(argv[i], "--help") == 0) {
			if (rank == 0)
				usage(stdout);
			return -1;
		}
		if (strcmp(argv[i], "--version") == 0) {
			if (rank == 0)
				printf("%s\n", NPCM_VERSION);
			return -1;
		}
	}
	opterr = 0;
	while (bad == NULL && (c = getopt(argc, argv, "l:u:p:o:srSazt:T:xqh")) != -1) {
		long long n;
		switch (c) {
		case 'l':
			if (parse_bytes(optarg, MAX_UPPER, &opt->lower) != 0)
				bad = "-l wants a size in bytes (0 .. 1 GiB)";
			break;
		case 'u':
			if (parse_bytes(optarg, MAX_UPPER, &opt->upper) != 0)
				bad = "-u wants a size in bytes (0 .. 1 GiB)";
			break;
		case 'p':
			if (parse_bytes(optarg, 1LL << 20, &opt->perturbation) != 0)
				bad = "-p wants a number of bytes (0 .. 1 MiB)";
			break;
		case 'o':
			opt->output = optarg;
			if (*optarg == '\0')
				bad = "-o wants a file name";
			break;
		case 's':
			opt->streaming = 1;
			break;
		case 'r':
			opt->reset = 1;
			break;
		case 'S':
			opt->synchronous = 1;
			break;
		case 'a':
			opt->async_recv = 1;
			break;
		case 'z':
			opt->any_source = 1;
			break;
		case 't':
			if (parse_seconds(optarg, &opt->target) != 0)
				bad = "-t wants seconds (> 0, <= 3600), e.g. 0.1";
			break;
		case 'T':
			if (parse_bytes(optarg, MAX_TRIALS, &n) != 0 || n < 1)
				bad = "-T wants a number of trials (1 .. 100)";
			else
				opt->trials = (int)n;
			break;
		case 'x':
			opt->verify = 0;
			break;
		case 'q':
			opt->quiet = 1;
			break;
		case 'h':
			if (rank == 0)
				usage(stdout);
			return -1;
		default:
			bad = strchr("lupotT", optopt) != NULL ? "option needs a value"
			                                       : "unknown option";
			break;
		}
	}
	if (bad == NULL && optind < argc)
		bad = "unexpected argument";
	if (bad == NULL && opt->lower > opt->upper)
		bad = "-l is larger than -u";
	if (bad != NULL) {
		if (rank == 0) {
			if (c == '?')
				fprintf(stderr, "NPcm: %s: -%c\n", bad, optopt);
			else if (c == -1 && optind < argc)
				fprintf(stderr, "NPcm: %s: %s\n", bad, argv[optind]);
			else
				fprintf(stderr, "NPcm: %s\n", bad);
			usage(stderr);
		}
		return EXIT_USAGE;
	}
	return 0;
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
