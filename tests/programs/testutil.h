/* Helpers shared by the MPI integration test programs. Plain MPI only: the
 * programs build with cmcc (libchanmem) and with any other MPI's mpicc, so a
 * run under Open MPI proves the programs right before they judge chanmem.
 *
 * Conventions: only rank 0 prints to stdout (a deterministic summary, no
 * timings, no pids); a failed check prints "PROG: rank R: FAIL: what" to
 * stderr and aborts the whole job with TU_FAIL_CODE. */
#ifndef CHANMEM_TESTS_TESTUTIL_H
#define CHANMEM_TESTS_TESTUTIL_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

/* Exit status of a failed check (distinct from 1, the fatal-error status,
 * and 7, the status the abort modes ask for). */
#define TU_FAIL_CODE 3

/* Tag reserved for the helpers' own traffic (result lines, digests). The MPI
 * standard guarantees tags up to 32767. */
#define TU_TAG_REPORT 32000

extern int tu_rank;
extern int tu_size;
extern const char *tu_prog;

/* MPI_Init, then rank/size into tu_rank/tu_size. */
void tu_init(int *argc, char ***argv, const char *prog);

/* Fail the job: message to stderr naming the program, rank and check. */
__attribute__((noreturn, format(printf, 1, 2))) void tu_fail(const char *fmt, ...);

#define TU_CHECK(cond, ...)                                                                        \
	do {                                                                                       \
		if (!(cond))                                                                       \
			tu_fail(__VA_ARGS__);                                                      \
	} while (0)

/* An MPI call that must succeed (useful under MPI_ERRORS_RETURN). */
#define TU_MPI(call)                                                                               \
	do {                                                                                       \
		int tu_rc_ = (call);                                                               \
		if (tu_rc_ != MPI_SUCCESS)                                                         \
			tu_fail("%s returned %s (line %d)", #call, tu_err_name(tu_rc_), __LINE__); \
	} while (0)

/* "MPI_ERR_TRUNCATE" etc. for an error code's class: deterministic text,
 * unlike MPI_Error_string, whose wording differs between implementations. */
const char *tu_err_name(int code);

/* A decimal command-line argument in [min, max]; otherwise rank 0 prints
 * "usage: PROG ARGS_USAGE" and "PROG: what: 'text'", and the job is
 * aborted with status 2. */
long tu_arg_long(const char *text, long min, long max, const char *what, const char *args_usage);

/* Size a rank must have, or fail with a clear message. */
void tu_require_size(int min, int max);

/* Deterministic content: buf[0..len) from a seed, byte-exact reproducible,
 * and different for any shift, so misplaced or stale data is caught. */
void tu_fill(void *buf, size_t len, uint64_t seed);
/* Index of the first byte differing from tu_fill(seed), or -1. */
long tu_verify(const void *buf, size_t len, uint64_t seed);

/* FNV-1a 64-bit hash, chainable: start with TU_HASH_INIT. */
#define TU_HASH_INIT 0xcbf29ce484222325ULL
uint64_t tu_hash(uint64_t h, const void *buf, size_t len);
uint64_t tu_hash_u64(uint64_t h, uint64_t v);

/* splitmix64 step: a small deterministic PRNG. */
uint64_t tu_rand(uint64_t *state);

/* Seconds of sleep without spinning. */
void tu_sleep_ms(int ms);

/* Every rank contributes one line; rank 0 prints them in rank order.
 * Collective over MPI_COMM_WORLD (point-to-point only, tag TU_TAG_REPORT). */
void tu_print_ranked(const char *line);

/* MPI_Finalize, then a check that MPI_Finalized says so; returns 0. */
int tu_finalize(void);

#endif
