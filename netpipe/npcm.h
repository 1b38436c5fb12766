/* NPcm's pieces, shared by its files (see NPcm.c for the method and the replay property).
 *
 *   NPcm.c          main, and the leader's walk over the sizes (the only clock that decides)
 *   npcm_options.c  command line, the debug corruption hook, NetPIPE's size sequence
 *   npcm_data.c     the reference bytes, sending and receiving data messages, verification
 *   npcm_pairs.c    one size on every pair: control messages, trials, the gather of the times
 *   npcm_output.c   the banner, np.out and the progress lines
 *
 * Only the MPI subset named in NPcm.c is used, so these files build with any mpicc. */
#ifndef NPCM_H
#define NPCM_H

#include <mpi.h>
#include <stdio.h>

#include "cmdline.h"

#define TAG_DATA 1
#define TAG_CTRL 2
#define TAG_ACK 3
#define TAG_NAME 4
#define TAG_TIME 5 /* a transmitter's one-way time of a trial, to the leader */

#define LEADER 0              /* the rank that decides every repeat count and writes np.out */
#define WINDOWS 4096          /* distinct windows of REF: message c uses REF + c % WINDOWS */
#define MIN_REPS 3            /* NetPIPE's floor on the repeat count */
#define MAX_REPS 10000000     /* keeps a near-zero time estimate from asking for forever */
#define MAX_TRIALS 100        /* -T's bound, also checked on control messages */
#define STOP_SECONDS 1.0      /* NetPIPE's STOPTM: stop once one message takes this long */
#define MAX_UPPER (1LL << 30) /* keeps every count in an int and the buffers in reason */
#define MAX_PAIRS 2048        /* cmrun starts at most 4096 ranks */
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
	int rank, nranks, pairs;
	int peer, src;      /* src: peer, or MPI_ANY_SOURCE with -z */
	int ctl_src;        /* where control messages come from: LEADER, or MPI_ANY_SOURCE */
	long long max_len;  /* largest message: upper + perturbation */
	unsigned char *ref; /* max_len + WINDOWS bytes, identical on every rank */
	unsigned char *rbuf[2];
	unsigned char *scratch;   /* only with the debug corruption */
	long long sent, received; /* data messages so far, per direction: picks the window */
	struct corruption corrupt;
	int trial, rep; /* for error messages */
};

/* What the leader tells every other rank before a size. */
struct control {
	long long size, nrepeat, trials; /* nrepeat 0: done */
};

/* One size measured on every pair: the best trial (lowest mean one-way time). */
struct result {
	double mean;        /* mean over pairs of the one-way seconds per message */
	double aggregate;   /* sum over pairs of size / one-way seconds, bytes per second */
	double slowest;     /* the slowest and fastest pair of that trial, bytes per second */
	double fastest;     /* (both equal to aggregate with one pair) */
	double leader_best; /* the leader's own best one-way seconds over the trials */
};

/* npcm_options.c */
int parse_options(int argc, char **argv, int rank, struct options *opt);
/* The same without a word on any stream: a cmdline_result, the message of
 * CMDLINE_ERROR in err. */
extern const struct cmdline_prog npcm_cmdline;
int parse_options_quietly(int argc, char **argv, struct options *opt, char *err, size_t errlen);
int parse_corruption(const char *text, int nranks, struct corruption *out);
int size_walk(const struct options *opt, long long *sizes);

/* npcm_data.c */
void *allocate(long long bytes);
void build_reference(unsigned char *ref, long long len);
void clear_buffers(struct bench *b, long long size);
void send_data(struct bench *b, long long size);
void post_recv(struct bench *b, long long count, long long size, MPI_Request *req);
void recv_data(struct bench *b, long long count, long long size);
void verify(struct bench *b, long long count, long long size);

/* npcm_pairs.c */
void measure(struct bench *b, long long size, long long nrepeat, int trials, struct result *out);
void follow(struct bench *b);
void announce_done(struct bench *b);

/* npcm_output.c */
void send_processor_name(const struct bench *b);
void print_banner(const struct bench *b, int sizes);
FILE *open_output(const struct bench *b);
void write_row(const struct bench *b, FILE *out, int n, long long size, long long nrepeat,
               const struct result *r);
void close_output(const struct bench *b, FILE *out);

#endif
