/* NPcm: NetPIPE's measurement method as a plain MPI program.
 *
 * Only a small, portable MPI subset is used (Init, Comm_rank, Comm_size, Barrier, Send, Ssend,
 * Recv, Irecv, Wait, Wtime, Finalize, Abort, Get_processor_name), so the same source builds with
 * chanmem's cmcc and with any other MPI's mpicc and the curves can be compared side by side.
 *
 * Rank 0 (the transmitter) walks NetPIPE's size sequence, calibrates the repeat count of each
 * size from the previous size's time, runs several trials and keeps the best, and writes np.out.
 * Rank 1 (the receiver) is driven entirely by control messages from rank 0, so every decision
 * that depends on MPI_Wtime is taken in one place (a replayed rank re-takes it from its log).
 *
 * Verification: message number c in one direction carries the window REF[c % WINDOWS ..] of a
 * reference byte string both ranks generate identically. REF is built so that two windows whose
 * numbers differ by 1 or 2 (mod WINDOWS) differ at every byte, and received messages alternate
 * between two buffers that are cleared (to a value REF never holds) at each new size: a stale or
 * missing byte always shows, a byte shifted by 1 or 2 places always, by more almost surely
 * (254/255 per byte). Sending needs no per-message fill (a window is a pointer); checking is one
 * memcmp. */
#include <mpi.h>
#ifdef CHANMEM /* defined by netpipe/Makefile.am: the banner names chanmem's transport */
#include <chanmem.h>
#endif

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TAG_DATA 1
#define TAG_CTRL 2
#define TAG_ACK 3
#define TAG_NAME 4

#define WINDOWS 4096          /* distinct windows of REF: message c uses REF + c % WINDOWS */
#define MIN_REPS 3            /* NetPIPE's floor on the repeat count */
#define MAX_REPS 10000000     /* keeps a near-zero time estimate from asking for forever */
#define STOP_SECONDS 1.0      /* NetPIPE's STOPTM: stop once one message takes this long */
#define MAX_UPPER (1LL << 30) /* keeps every count in an int and the buffers in reason */
#define EXIT_USAGE 2          /* bad option */
#define EXIT_VERIFY 3         /* MPI_Abort code when a received byte is wrong */

struct options {
	long long lower, upper, perturbation;
	const char *output;
	int streaming, reset, synchronous, async_recv, any_source, verify, quiet;
	double target; /* seconds one trial should last */
	int trials;
};

/* Debug hook (NPCM_DEBUG_CORRUPT=RANK:SIZE:OFFSET): the first data message RANK sends with SIZE
 * bytes carries, at OFFSET, the byte the previous message had there — a stale byte, as a
 * transport bug would leave it. Lets a test see the verification fire. */
struct corruption {
	int active, rank;
	long long size, offset;
};

struct bench {
	struct options opt;
	int rank, peer, src; /* src: peer, or MPI_ANY_SOURCE with -z */
	long long max_len;   /* largest message: upper + perturbation */
	unsigned char *ref;  /* max_len + WINDOWS bytes, identical on both ranks */
	unsigned char *rbuf[2];
	unsigned char *scratch;   /* only with the debug corruption */
	long long sent, received; /* data messages so far, per direction: picks the window */
	struct corruption corrupt;
	int trial, rep; /* for error messages */
};

struct control {
	long long size, nrepeat, trials; /* nrepeat 0: done */
};

static void usage(FILE *out)
{
	fprintf(
	    out,
	    "usage: NPcm [options]   (run with exactly 2 MPI ranks)\n"
	    "NetPIPE's method over MPI: ping-pong (default) or streaming, sizes growing about\n"
	    "sqrt(2) per step, each base size L also measured at L-p and L+p.\n"
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
	    "  -h         this help\n"
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
static int parse_options(int argc, char **argv, int rank, struct options *opt)
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
			if (parse_bytes(optarg, 100, &n) != 0 || n < 1)
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

static int parse_corruption(const char *text, struct corruption *out)
{
	long long rank, size, offset;
	char tail;
	if (sscanf(text, "%lld:%lld:%lld%c", &rank, &size, &offset, &tail) != 3 || rank < 0 ||
	    rank > 1 || size < 1 || offset < 0 || offset >= size)
		return -1;
	*out = (struct corruption){.active = 1, .rank = (int)rank, .size = size, .offset = offset};
	return 0;
}

/* NetPIPE 3.x's size walk: the increment doubles every other step (so sizes grow about sqrt(2)
 * per step) and each base size is also measured at +-perturbation once the increment is wider
 * than the perturbation. Returns the number of sizes; fills sizes[] when it is not NULL. */
static int size_walk(const struct options *opt, long long *sizes)
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

/* Deterministic (both ranks build the same bytes), never 0 (cleared buffers never match), and
 * ref[j] differs from ref[j-1], ref[j-2], ref[j-(WINDOWS-1)] and ref[j-(WINDOWS-2)]: message
 * windows that are 1 or 2 apart, wrap-around included, differ at every byte. */
static void build_reference(unsigned char *ref, long long len)
{
	static const long long shifts[] = {1, 2, WINDOWS - 1, WINDOWS - 2};
	uint64_t state = 0x9e3779b97f4a7c15ULL;
	for (long long j = 0; j < len; j++) {
		unsigned char byte;
		int clash;
		do {
			state ^= state << 13;
			state ^= state >> 7;
			state ^= state << 17;
			byte = (unsigned char)(state >> 24);
			clash = byte == 0;
			for (size_t k = 0; k < sizeof shifts / sizeof shifts[0] && !clash; k++)
				clash = j >= shifts[k] && ref[j - shifts[k]] == byte;
		} while (clash);
		ref[j] = byte;
	}
}

static const unsigned char *window(const struct bench *b, long long count)
{
	return b->ref + count % WINDOWS;
}

static void *allocate(long long bytes)
{
	void *p = calloc(1, (size_t)(bytes > 0 ? bytes : 1));
	if (p == NULL) {
		fprintf(stderr, "NPcm: out of memory (%lld bytes)\n", bytes);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	return p;
}

static void send_data(struct bench *b, long long size)
{
	const unsigned char *data = window(b, b->sent);
	struct corruption *c = &b->corrupt;
	if (c->active && c->rank == b->rank && c->size == size) {
		memcpy(b->scratch, data, (size_t)size);
		b->scratch[c->offset] = window(b, b->sent + WINDOWS - 1)[c->offset];
		data = b->scratch;
		c->active = 0;
	}
	if (b->opt.synchronous)
		MPI_Ssend((void *)data, (int)size, MPI_BYTE, b->peer, TAG_DATA, MPI_COMM_WORLD);
	else
		MPI_Send((void *)data, (int)size, MPI_BYTE, b->peer, TAG_DATA, MPI_COMM_WORLD);
	b->sent++;
}

/* The buffer data message number `count` lands in. */
static unsigned char *rbuf_for(struct bench *b, long long count)
{
	return b->rbuf[count % 2];
}

static void post_recv(struct bench *b, long long count, long long size, MPI_Request *req)
{
	MPI_Irecv(rbuf_for(b, count), (int)size, MPI_BYTE, b->src, TAG_DATA, MPI_COMM_WORLD, req);
}

static void recv_data(struct bench *b, long long count, long long size)
{
	MPI_Recv(rbuf_for(b, count), (int)size, MPI_BYTE, b->src, TAG_DATA, MPI_COMM_WORLD,
	         MPI_STATUS_IGNORE);
}

static void verify(struct bench *b, long long count, long long size)
{
	if (!b->opt.verify || size == 0)
		return;
	const unsigned char *got = rbuf_for(b, count), *want = window(b, count);
	if (memcmp(got, want, (size_t)size) == 0)
		return;
	long long at = 0;
	while (got[at] == want[at])
		at++;
	fprintf(stderr,
	        "NPcm: rank %d: verification failed for a %lld-byte message (trial %d, repetition "
	        "%d): first bad byte at offset %lld (got 0x%02x, expected 0x%02x)\n",
	        b->rank, size, b->trial + 1, b->rep + 1, at, got[at], want[at]);
	fflush(stderr);
	MPI_Abort(MPI_COMM_WORLD, EXIT_VERIFY);
}

/* One ping-pong trial on rank 0: returns the seconds spent communicating. With verification,
 * the clock stops while a reply is checked, so the check does not count as transport time;
 * rank 1 checks its copy after replying, in the shadow of rank 0's check. */
static double pingpong_transmit(struct bench *b, long long size, long long nrepeat)
{
	MPI_Request req;
	double total = 0.0, start = 0.0;
	if (b->opt.async_recv)
		post_recv(b, b->received, size, &req);
	if (!b->opt.verify)
		start = MPI_Wtime();
	for (b->rep = 0; b->rep < nrepeat; b->rep++) {
		if (b->opt.verify)
			start = MPI_Wtime();
		send_data(b, size);
		long long count = b->received++;
		if (b->opt.async_recv) {
			MPI_Wait(&req, MPI_STATUS_IGNORE);
			if (b->rep + 1 < nrepeat)
				post_recv(b, b->received, size, &req);
		} else {
			recv_data(b, count, size);
		}
		if (b->opt.verify) {
			total += MPI_Wtime() - start;
			verify(b, count, size);
		}
	}
	if (!b->opt.verify)
		total = MPI_Wtime() - start;
	return total;
}

static void pingpong_receive(struct bench *b, long long size, long long nrepeat)
{
	MPI_Request req;
	if (b->opt.async_recv)
		post_recv(b, b->received, size, &req);
	for (b->rep = 0; b->rep < nrepeat; b->rep++) {
		long long count = b->received++;
		if (b->opt.async_recv) {
			MPI_Wait(&req, MPI_STATUS_IGNORE);
			if (b->rep + 1 < nrepeat)
				post_recv(b, b->received, size, &req); /* the other buffer */
		} else {
			recv_data(b, count, size);
		}
		send_data(b, size);
		verify(b, count, size);
	}
}

/* Streaming: rank 0 sends nrepeat messages back to back, rank 1 replies once when it has them
 * all. The receiver's check is part of the measured time here (-x for peak figures). */
static double stream_transmit(struct bench *b, long long size, long long nrepeat)
{
	int ack = 0;
	double start = MPI_Wtime();
	for (b->rep = 0; b->rep < nrepeat; b->rep++)
		send_data(b, size);
	MPI_Recv(&ack, (int)sizeof ack, MPI_BYTE, b->src, TAG_ACK, MPI_COMM_WORLD,
	         MPI_STATUS_IGNORE);
	double total = MPI_Wtime() - start;
	if (ack != (int)nrepeat) {
		fprintf(stderr, "NPcm: rank 0: receiver acknowledged %d messages, sent %lld\n", ack,
		        nrepeat);
		MPI_Abort(MPI_COMM_WORLD, EXIT_VERIFY);
	}
	return total;
}

static void stream_receive(struct bench *b, long long size, long long nrepeat)
{
	MPI_Request req[2];
	long long first = b->received;
	if (b->opt.async_recv) /* two receives in flight: one lands while the other is checked */
		for (long long k = 0; k < 2 && k < nrepeat; k++)
			post_recv(b, first + k, size, &req[(first + k) % 2]);
	for (b->rep = 0; b->rep < nrepeat; b->rep++) {
		long long count = b->received++;
		if (b->opt.async_recv)
			MPI_Wait(&req[count % 2], MPI_STATUS_IGNORE);
		else
			recv_data(b, count, size);
		verify(b, count, size);
		if (b->opt.async_recv && b->rep + 2 < nrepeat)
			post_recv(b, count + 2, size, &req[count % 2]);
	}
	int ack = (int)nrepeat;
	MPI_Send(&ack, (int)sizeof ack, MPI_BYTE, b->peer, TAG_ACK, MPI_COMM_WORLD);
}

/* Rank 0: announces (size, nrepeat, trials) to rank 1, runs the trials, returns the best
 * one-way time in seconds. */
static double measure(struct bench *b, long long size, long long nrepeat, int trials)
{
	struct control ctl = {size, nrepeat, trials};
	MPI_Send(&ctl, (int)sizeof ctl, MPI_BYTE, b->peer, TAG_CTRL, MPI_COMM_WORLD);
	memset(b->rbuf[0], 0, (size_t)size);
	memset(b->rbuf[1], 0, (size_t)size);
	double best = -1.0;
	for (b->trial = 0; b->trial < trials; b->trial++) {
		if (b->opt.reset)
			MPI_Barrier(MPI_COMM_WORLD);
		double t = b->opt.streaming ? stream_transmit(b, size, nrepeat) / (double)nrepeat
		                            : pingpong_transmit(b, size, nrepeat) / (2.0 * nrepeat);
		if (best < 0.0 || t < best)
			best = t;
	}
	return best;
}

/* Rank 1: follows rank 0's control messages until told to stop. Validates them like any input. */
static void serve(struct bench *b)
{
	for (;;) {
		struct control ctl;
		MPI_Recv(&ctl, (int)sizeof ctl, MPI_BYTE, b->src, TAG_CTRL, MPI_COMM_WORLD,
		         MPI_STATUS_IGNORE);
		if (ctl.nrepeat == 0)
			return;
		if (ctl.size < 0 || ctl.size > b->max_len || ctl.nrepeat < 0 ||
		    ctl.nrepeat > MAX_REPS || ctl.trials < 1 || ctl.trials > 100) {
			fprintf(
			    stderr,
			    "NPcm: rank 1: bad control message (size %lld, repeats %lld, trials "
			    "%lld): are both ranks running the same NPcm with the same options?\n",
			    ctl.size, ctl.nrepeat, ctl.trials);
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
		memset(b->rbuf[0], 0, (size_t)ctl.size);
		memset(b->rbuf[1], 0, (size_t)ctl.size);
		for (b->trial = 0; b->trial < ctl.trials; b->trial++) {
			if (b->opt.reset)
				MPI_Barrier(MPI_COMM_WORLD);
			if (b->opt.streaming)
				stream_receive(b, ctl.size, ctl.nrepeat);
			else
				pingpong_receive(b, ctl.size, ctl.nrepeat);
		}
	}
}

static long long repeats_for(const struct options *opt, double seconds_per_rep)
{
	if (seconds_per_rep < 1e-8)
		seconds_per_rep = 1e-8;
	double n = opt->target / seconds_per_rep;
	if (n < MIN_REPS)
		return MIN_REPS;
	return n > MAX_REPS ? MAX_REPS : (long long)n;
}

static void print_banner(const struct bench *b, int sizes)
{
	char mine[MPI_MAX_PROCESSOR_NAME + 1] = "", theirs[MPI_MAX_PROCESSOR_NAME + 1] = "";
	int len = 0;
	MPI_Get_processor_name(mine, &len);
	MPI_Recv(theirs, MPI_MAX_PROCESSOR_NAME, MPI_BYTE, b->src, TAG_NAME, MPI_COMM_WORLD,
	         MPI_STATUS_IGNORE);
	theirs[MPI_MAX_PROCESSOR_NAME] = '\0';
	if (b->opt.quiet)
		return;
	const struct options *o = &b->opt;
	printf("NPcm: %s, %d sizes from %lld to %lld bytes (perturbation %lld), %d trial%s of "
	       "%g s per size\n",
	       o->streaming ? "streaming" : "ping-pong", sizes, o->lower, o->upper, o->perturbation,
	       o->trials, o->trials > 1 ? "s" : "", o->target);
	printf("NPcm: %s sends, %s receives%s%s, verification %s, output to %s\n",
	       o->synchronous ? "synchronous" : "standard",
	       o->async_recv ? "pre-posted" : "blocking", o->any_source ? " from any source" : "",
	       o->reset ? ", barrier between trials" : "", o->verify ? "on" : "off", o->output);
	printf("NPcm: rank 0 on %s, rank 1 on %s\n", mine, theirs);
#ifdef CHANMEM
	const char *transport = "?";
	chanmem_transport_name(&transport);
	printf("NPcm: chanmem %s, transport %s\n", chanmem_version(), transport);
#endif
	printf("Now starting the main loop\n");
	fflush(stdout);
}

static void transmit(struct bench *b)
{
	const struct options *o = &b->opt;
	int count = size_walk(o, NULL);
	long long *sizes = allocate((long long)count * (long long)sizeof *sizes);
	size_walk(o, sizes);
	FILE *out = fopen(o->output, "w");
	if (out == NULL) {
		fprintf(stderr, "NPcm: cannot write %s: %s\n", o->output, strerror(errno));
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	print_banner(b, count);

	/* Warm-up at the first size (connections opened, caches warm), then a first estimate. */
	long long first = count > 0 ? sizes[0] : 0;
	measure(b, first, MIN_REPS, 1);
	double last_time = measure(b, first, MIN_REPS, 1);
	long long last_size = first;

	for (int n = 0; n < count && last_time < STOP_SECONDS; n++) {
		long long size = sizes[n];
		double scale = size > last_size && last_size > 0 ? (double)size / last_size : 1.0;
		double per_rep = last_time * scale * (o->streaming ? 1.0 : 2.0);
		long long nrepeat = repeats_for(o, per_rep);
		double t = measure(b, size, nrepeat, o->trials);
		double mbps = t > 0.0 ? (double)size * 8.0 / (t * 1048576.0) : 0.0;
		fprintf(out, "%8lld %lf %12.8lf\n", size, mbps, t);
		fflush(out);
		if (!o->quiet) {
			printf("%3d: %7lld bytes %6lld times --> %9.2f Mbps in %10.2f usec\n", n,
			       size, nrepeat, mbps, t * 1e6);
			fflush(stdout);
		}
		last_time = t;
		last_size = size;
	}
	struct control done = {0, 0, 0};
	MPI_Send(&done, (int)sizeof done, MPI_BYTE, b->peer, TAG_CTRL, MPI_COMM_WORLD);
	if (fclose(out) != 0) {
		fprintf(stderr, "NPcm: writing %s failed: %s\n", o->output, strerror(errno));
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	free(sizes);
}

int main(int argc, char **argv)
{
	struct bench b = {0};
	int size = 0;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &b.rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);

	int status = parse_options(argc, argv, b.rank, &b.opt);
	const char *debug = getenv("NPCM_DEBUG_CORRUPT");
	if (status == 0 && debug != NULL && *debug != '\0' && parse_corruption(debug, &b.corrupt)) {
		if (b.rank == 0)
			fprintf(stderr,
			        "NPcm: NPCM_DEBUG_CORRUPT wants RANK:SIZE:OFFSET (rank 0 or "
			        "1, offset < size), got '%s'\n",
			        debug);
		status = EXIT_USAGE;
	}
	if (status == 0 && size != 2) {
		if (b.rank == 0)
			fprintf(
			    stderr,
			    "NPcm: needs exactly 2 ranks, got %d (e.g. cmrun -n 2 NPcm, or mpirun "
			    "-np 2 NPcm)\n",
			    size);
		status = 1;
	}
	if (status != 0) {
		MPI_Finalize();
		return status < 0 ? 0 : status;
	}

	b.peer = 1 - b.rank;
	b.src = b.opt.any_source ? MPI_ANY_SOURCE : b.peer;
	b.max_len = b.opt.upper + b.opt.perturbation;
	b.ref = allocate(b.max_len + WINDOWS);
	build_reference(b.ref, b.max_len + WINDOWS);
	b.rbuf[0] = allocate(b.max_len);
	b.rbuf[1] = allocate(b.max_len);
	if (b.corrupt.active)
		b.scratch = allocate(b.corrupt.size);
	MPI_Barrier(MPI_COMM_WORLD);

	if (b.rank == 0) {
		transmit(&b);
	} else {
		char name[MPI_MAX_PROCESSOR_NAME + 1] = "";
		int len = 0;
		MPI_Get_processor_name(name, &len);
		MPI_Send(name, MPI_MAX_PROCESSOR_NAME, MPI_BYTE, b.peer, TAG_NAME, MPI_COMM_WORLD);
		serve(&b);
	}
	free(b.ref);
	free(b.rbuf[0]);
	free(b.rbuf[1]);
	free(b.scratch);
	MPI_Finalize();
	return 0;
}
