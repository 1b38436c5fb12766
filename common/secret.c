#include "secret.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmdline.h"
#include "jobenv.h"

static const char *secret_problem(const char *text, size_t len)
{
	if (len != CM_SECRET_LEN)
		return "must be exactly 32 characters";
	for (size_t i = 0; i < len; i++)
		if (text[i] <= ' ' || text[i] > '~')
			return "must be printable characters without blanks";
	return NULL;
}

int cm_secret_load(const char *file, char out[CM_SECRET_LEN + 1], char *why, size_t whylen)
{
	const char *env = getenv(CM_ENV_SECRET);
	const char *problem;
	if (env && *env) {
		if ((problem = secret_problem(env, strlen(env))) != NULL) {
			snprintf(why, whylen, "%s %s (it has %zu)", CM_ENV_SECRET, problem,
			         strlen(env));
			return -1;
		}
		memcpy(out, env, CM_SECRET_LEN);
		out[CM_SECRET_LEN] = '\0';
		return 0;
	}
	if (file == NULL) {
		snprintf(why, whylen, "no job secret: set %s or give --secret-file", CM_ENV_SECRET);
		return -1;
	}
	FILE *f = fopen(file, "r");
	if (f == NULL) {
		snprintf(why, whylen, "--secret-file %s: %s", file, strerror(errno));
		return -1;
	}
	char line[256];
	if (fgets(line, sizeof line, f) == NULL) {
		fclose(f);
		snprintf(why, whylen, "--secret-file %s: empty or unreadable", file);
		return -1;
	}
	fclose(f);
	size_t len = strcspn(line, "\r\n");
	line[len] = '\0';
	if ((problem = secret_problem(line, len)) != NULL) {
		snprintf(why, whylen, "--secret-file %s: the first line %s (it has %zu)", file,
		         problem, len);
		return -1;
	}
	memcpy(out, line, CM_SECRET_LEN);
	out[CM_SECRET_LEN] = '\0';
	return 0;
}

void cm_secret_load_or_exit(const char *prog, const char *file, char out[CM_SECRET_LEN + 1])
{
	char why[512];
	if (cm_secret_load(file, out, why, sizeof why) < 0)
		cmdline_bad_usage(prog, "%s", why);
}
