/* What the applications in tests/apps share: start-up, option parsing,
 * failure reporting and the fault points the fault-tolerance tests use.
 * Plain MPI only: the applications build with cmcc (libchanmem) and with
 * any other MPI's mpicc, so their answers can be cross-checked.
 *
 * Fault points (read from the environment, like tests/programs/ft_suite):
 *   FT_KILL_RANK=R[,R2...] FT_KILL_AT=I  these ranks raise SIGKILL when the
 *                                        application reaches step I ...
 *   FT_KILL_TIMES=K                      ... while CHANMEM_INCARNATION < K
 *                                        (default 1: the first run only)
 *   FT_SLEEP_MS=M                        sleep M ms at every step (so that
 *                                        cmrun --kill-every finds it running)
 * What a "step" is belongs to each application (an iteration, a round). */
#ifndef CHANMEM_TESTS_APP_COMMON_H
#define CHANMEM_TESTS_APP_COMMON_H

#include <mpi.h>
#include <stddef.h>

/* Exit status of a failed self-check (MPI_Abort code); 2: bad usage. */
#define APP_FAIL_CODE 3
#define APP_USAGE_CODE 2

extern int app_rank, app_size;

/* A numeric command-line option "-f VALUE" with its accepted range. */
struct app_option {
	const char *flag; /* "-n" */
	const char *what; /* for the usage text */
	long *value;      /* holds the default, receives the value */
	long min, max;
};

/* MPI_Init, rank and size, the fault points from the environment, then
 * the options: on a bad one rank 0 explains it and the usage, every rank
 * finalizes and the process exits with APP_USAGE_CODE. */
void app_init(int *argc, char ***argv, const char *name, const struct app_option *options,
              int noptions);

/* A failed check: "NAME: rank R: FAIL: what" on stderr, then the whole job
 * is aborted with APP_FAIL_CODE. */
__attribute__((noreturn, format(printf, 1, 2))) void app_fail(const char *fmt, ...);

#define APP_CHECK(cond, ...)                                                                       \
	do {                                                                                       \
		if (!(cond))                                                                       \
			app_fail(__VA_ARGS__);                                                     \
	} while (0)

/* malloc that fails the job instead of returning NULL (n may be 0). */
void *app_alloc(size_t n);

/* The fault point of step `step`: dies here if the environment says so,
 * sleeps FT_SLEEP_MS otherwise. */
void app_step(long step);

#endif
