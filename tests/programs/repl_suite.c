/* repl_suite: ft_suite (tests/programs/ft_suite.c) for replicated runs.
 * Under cmrun --replicate every replica of a rank runs the same program, so
 * "kill rank R at iteration I" must also say which replicas die:
 *
 *   REPL_KILL_REPLICAS=K[,K...]   replicas of FT_KILL_RANK that raise SIGKILL
 *                                 at FT_KILL_AT (default: 0, the master)
 *
 * ft_suite decides with CHANMEM_INCARNATION < FT_KILL_TIMES; here that
 * variable reads 0 for the listed replicas and a large number for the
 * others, so the rest of ft_suite is reused unchanged. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *repl_getenv(const char *name)
{
	if (strcmp(name, "CHANMEM_INCARNATION") != 0)
		return getenv(name);
	const char *me = getenv("CHANMEM_REPLICA");
	const char *list = getenv("REPL_KILL_REPLICAS");
	int replica = me ? atoi(me) : 0;
	static char zero[] = "0", never[] = "1000000";
	if (list == NULL || *list == '\0')
		return replica == 0 ? zero : never;
	for (const char *p = list; *p;) {
		char *end;
		long k = strtol(p, &end, 10);
		if (end == p)
			break;
		if (k == replica)
			return zero;
		p = *end == ',' ? end + 1 : end;
	}
	return never;
}

#define getenv repl_getenv
#include "ft_suite.c"
