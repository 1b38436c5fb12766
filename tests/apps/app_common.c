/* Start-up, options, failure reporting and fault points of the
 * applications (app_common.h). */
#include "app_common.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int app_rank, app_size;
static const char *app_name = "app";
static bool kill_me;        /* this rank is listed in FT_KILL_RANK */
static long kill_at = -1;   /* FT_KILL_AT */
static long kill_times = 1; /* FT_KILL_TIMES */
static long sleep_ms;       /* FT_SLEEP_MS */
static long incarnation;    /* CHANMEM_INCARNATION */
static char bad_env[160];   /* first invalid variable, reported once MPI is up */

void app_fail(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "%s: rank %d: FAIL: ", app_name, app_rank);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fflush(stdout);
	fflush(stderr);
	MPI_Abort(MPI_COMM_WORLD, APP_FAIL_CODE);
	exit(APP_FAIL_CODE); /* MPI_Abort does not return; keep the compiler sure */
}

void *app_alloc(size_t n)
{
	void *p = malloc(n > 0 ? n : 1);
	if (!p)
		app_fail("out of memory (%zu bytes)", n);
	return p;
}

/* A whole decimal number in [min, max], or false. */
static bool parse_long(const char *s, long min, long max, long *out)
{
	if (!s || !*s)
		return false;
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < min || v > max)
		return false;
	*out = v;
	return true;
}

/* An environment variable holding a number in [min, max]; unset or empty:
 * the default. An invalid value is remembered and fails the job. */
static long env_long(const char *name, long dflt, long min, long max)
{
	const char *s = getenv(name);
	long v = dflt;
	if (s && *s && !parse_long(s, min, max, &v) && !bad_env[0])
		snprintf(bad_env, sizeof bad_env, "%s='%s' is not a number in [%ld, %ld]", name, s,
		         min, max);
	return v;
}

/* Is `rank` in the comma-separated list `list` (FT_KILL_RANK)? */
static bool listed(const char *list, int rank)
{
	if (!list || !*list)
		return false;
	char copy[256];
	if (strlen(list) >= sizeof copy) {
		if (!bad_env[0])
			snprintf(bad_env, sizeof bad_env, "FT_KILL_RANK is too long");
		return false;
	}
	strcpy(copy, list);
	bool found = false;
	for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		long r;
		if (!parse_long(tok, 0, 1L << 30, &r)) {
			if (!bad_env[0])
				snprintf(bad_env, sizeof bad_env,
				         "FT_KILL_RANK='%s' is not a list of ranks", list);
			return false;
		}
		found = found || r == rank;
	}
	return found;
}

static void usage_exit(const struct app_option *options, int noptions, const char *why)
{
	if (app_rank == 0) {
		fprintf(stderr, "%s: %s\nusage: %s", app_name, why, app_name);
		for (int i = 0; i < noptions; i++)
			fprintf(stderr, " [%s %s]", options[i].flag, options[i].what);
		fprintf(stderr, "\n");
		for (int i = 0; i < noptions; i++)
			fprintf(stderr, "  %s %s: %ld to %ld (default %ld)\n", options[i].flag,
			        options[i].what, options[i].min, options[i].max, *options[i].value);
	}
	MPI_Finalize();
	exit(APP_USAGE_CODE);
}

void app_init(int *argc, char ***argv, const char *name, const struct app_option *options,
              int noptions)
{
	app_name = name;
	MPI_Init(argc, argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &app_rank);
	MPI_Comm_size(MPI_COMM_WORLD, &app_size);

	kill_me = listed(getenv("FT_KILL_RANK"), app_rank);
	kill_at = env_long("FT_KILL_AT", -1, -1, 1L << 40);
	kill_times = env_long("FT_KILL_TIMES", 1, 0, 1000);
	sleep_ms = env_long("FT_SLEEP_MS", 0, 0, 10000);
	incarnation = env_long("CHANMEM_INCARNATION", 0, 0, 1L << 30);
	if (bad_env[0])
		app_fail("%s", bad_env);

	char why[200];
	for (int a = 1; a < *argc; a += 2) {
		const struct app_option *opt = NULL;
		for (int i = 0; i < noptions; i++)
			if (strcmp((*argv)[a], options[i].flag) == 0)
				opt = &options[i];
		if (!opt) {
			snprintf(why, sizeof why, "unknown argument '%s'", (*argv)[a]);
			usage_exit(options, noptions, why);
		}
		if (a + 1 >= *argc || !parse_long((*argv)[a + 1], opt->min, opt->max, opt->value)) {
			snprintf(why, sizeof why, "%s needs a number from %ld to %ld", opt->flag,
			         opt->min, opt->max);
			usage_exit(options, noptions, why);
		}
	}
}

void app_step(long step)
{
	if (kill_me && step == kill_at && incarnation < kill_times) {
		fflush(
		    stdout); /* what was printed stays printed, as in a real crash after a write */
		raise(SIGKILL);
	}
	if (sleep_ms > 0) {
		struct timespec ts = {sleep_ms / 1000, (sleep_ms % 1000) * 1000000L};
		nanosleep(&ts, NULL);
	}
}
