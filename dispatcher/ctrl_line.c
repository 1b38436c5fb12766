#include <config.h>

#include "ctrl_line.h"

#include <limits.h>
#include <string.h>

#include "units.h"

/* Report lines are short; a field longer than this is no number we send. */
#define FIELD_MAX 24
#define FIELDS_MAX 7

/* Splits line at single spaces into at most FIELDS_MAX fields, copied into
 * buf. Returns the count, or -1 (empty field, too many, too long). */
static int split(const char *line, char buf[FIELDS_MAX][FIELD_MAX])
{
	int n = 0;
	const char *p = line;
	for (;;) {
		const char *sp = strchr(p, ' ');
		size_t len = sp ? (size_t)(sp - p) : strlen(p);
		if (len == 0 || len >= FIELD_MAX || n == FIELDS_MAX)
			return -1;
		memcpy(buf[n], p, len);
		buf[n][len] = '\0';
		n++;
		if (sp == NULL)
			return n;
		p = sp + 1;
	}
}

static bool num(const char *text, long min, long max, long *v)
{
	return cm_parse_long(text, min, max, v) == 0;
}

/* RANK INCARNATION REPLICA from f[1..3]. */
static bool who(char f[FIELDS_MAX][FIELD_MAX], int nranks, int replicas, struct ctrl_line *out)
{
	long rank, inc, rep;
	if (!num(f[1], 0, (long)nranks - 1, &rank) || !num(f[2], 0, (long)UINT_MAX, &inc) ||
	    !num(f[3], 0, (long)replicas - 1, &rep))
		return false;
	out->rank = (int)rank;
	out->incarnation = (unsigned)inc;
	out->replica = (int)rep;
	return true;
}

enum ctrl_kind ctrl_line_parse(const char *line, int nranks, int replicas, struct ctrl_line *out)
{
	char f[FIELDS_MAX][FIELD_MAX];
	memset(out, 0, sizeof *out);
	out->kind = CTRL_BAD;
	int n = split(line, f);
	if (n < 0 || nranks < 1 || replicas < 1)
		return CTRL_BAD;
	long v, a, b;
	enum ctrl_kind kind = CTRL_BAD;
	if (strcmp(f[0], "abort") == 0 && n == 3) {
		if (!num(f[1], 0, (long)nranks - 1, &a) || !num(f[2], INT_MIN, INT_MAX, &b))
			return CTRL_BAD;
		out->rank = (int)a;
		out->code = (int)b;
		kind = CTRL_ABORT;
	} else if ((strcmp(f[0], "heartbeat") == 0 || strcmp(f[0], "finalized") == 0 ||
	            strcmp(f[0], "hello") == 0) &&
	           n == 4) {
		if (!who(f, nranks, replicas, out))
			return CTRL_BAD;
		kind = strcmp(f[0], "hello") == 0       ? CTRL_HELLO
		       : strcmp(f[0], "heartbeat") == 0 ? CTRL_HEARTBEAT
		                                        : CTRL_FINALIZED;
	} else if (strcmp(f[0], "init") == 0 && n == 5) {
		if (!who(f, nranks, replicas, out))
			return CTRL_BAD;
		if (strcmp(f[4], "image") == 0)
			out->from_image = true;
		else if (strcmp(f[4], "start") != 0)
			return CTRL_BAD;
		kind = CTRL_INIT;
	} else if (strcmp(f[0], "restored") == 0 && n == 7) {
		long image, o, e;
		if (!who(f, nranks, replicas, out) || !num(f[4], 0, LONG_MAX, &image) ||
		    !num(f[5], 0, LONG_MAX, &o) || !num(f[6], 0, LONG_MAX, &e))
			return CTRL_BAD;
		out->image = (uint64_t)image;
		out->out = (uint64_t)o;
		out->err = (uint64_t)e;
		kind = CTRL_RESTORED;
	} else if (strcmp(f[0], "crashed") == 0 && n == 6) {
		if (!who(f, nranks, replicas, out) || !num(f[4], 1, 64, &a) ||
		    !num(f[5], 0, LONG_MAX, &v))
			return CTRL_BAD;
		out->sig = (int)a;
		out->progress = (uint64_t)v;
		kind = CTRL_CRASHED;
	}
	out->kind = kind;
	return kind;
}
