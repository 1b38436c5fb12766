#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static const char *log_prog = "chanmem";
static int log_level = 0;

void cm_log_init(const char *progname, int verbosity)
{
	log_prog = progname;
	log_level = verbosity;
}

int cm_log_verbosity(void)
{
	return log_level;
}

static void vlog(const char *kind, const char *fmt, va_list ap)
{
	/* One fprintf per line keeps lines whole when threads log at once. */
	char line[1024];
	vsnprintf(line, sizeof line, fmt, ap);
	fprintf(stderr, "%s: %s%s\n", log_prog, kind, line);
}

void cm_err(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog("error: ", fmt, ap);
	va_end(ap);
}

void cm_notice(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog("", fmt, ap);
	va_end(ap);
}

void cm_info(const char *fmt, ...)
{
	if (log_level < 1)
		return;
	va_list ap;
	va_start(ap, fmt);
	vlog("", fmt, ap);
	va_end(ap);
}

void cm_debug(const char *fmt, ...)
{
	if (log_level < 2)
		return;
	va_list ap;
	va_start(ap, fmt);
	vlog("debug: ", fmt, ap);
	va_end(ap);
}

void cm_die(int status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog("error: ", fmt, ap);
	va_end(ap);
	exit(status);
}
