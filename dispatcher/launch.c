/* Launchers and launch templates (launch.h). */
#include <config.h>

#include "launch.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <limits.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "remote_exec.h"

/* This cmrun's own path: the remote hosts have it at the same place
 * (like the program and the servers), as the launch helper. */
static const char *self_path(void)
{
	static char path[PATH_MAX];
	if (path[0] == '\0') {
		ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
		if (n <= 0)
			snprintf(path, sizeof path, "cmrun"); /* from PATH, then */
		else
			path[n] = '\0';
	}
	return path;
}

static const char *const placeholders[] = {"{host}", "{addr}", "{cmd}"};

int launch_check_template(const char *text, char *err, size_t errlen)
{
	bool has_cmd = false, has_where = false;
	for (const char *p = strchr(text, '{'); p; p = strchr(p + 1, '{')) {
		size_t i, n = sizeof placeholders / sizeof placeholders[0];
		for (i = 0; i < n; i++)
			if (strncmp(p, placeholders[i], strlen(placeholders[i])) == 0)
				break;
		if (i == n) {
			snprintf(err, errlen,
			         "unknown placeholder at '%.16s' (known: {host}, {addr}, {cmd})",
			         p);
			return -1;
		}
		has_cmd = has_cmd || i == 2;
		has_where = has_where || i < 2;
	}
	if (!has_cmd) {
		snprintf(err, errlen,
		         "not local, ssh, srun or netns, and as a template it lacks {cmd} (the "
		         "command to run)");
		return -1;
	}
	(void)has_where; /* a template may ignore the host (one machine, a wrapper) */
	return 0;
}

int launch_resolve(const char *name, char *addr, size_t len)
{
	struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res = NULL;
	if (getaddrinfo(name, NULL, &hints, &res) != 0 || res == NULL)
		return -1;
	const struct sockaddr_in *sin = (const struct sockaddr_in *)res->ai_addr;
	const char *ok = inet_ntop(AF_INET, &sin->sin_addr, addr, (socklen_t)len);
	freeaddrinfo(res);
	return ok ? 0 : -1;
}

bool launch_is_remote(const struct cmrun_options *o, int host)
{
	switch (o->launch) {
	case LAUNCH_LOCAL:
		return false;
	case LAUNCH_NETNS:
	case LAUNCH_TEMPLATE:
		return true;
	default:
		return strncmp(o->hosts.list[host].addr, "127.", 4) != 0;
	}
}

const char *launch_name(const struct cmrun_options *o)
{
	static const char *const names[] = {"local", "ssh", "srun", "netns", "template"};
	return names[o->launch];
}

/* Safe unquoted in any POSIX shell; anything else goes in '...'. */
static bool shell_safe(const char *w)
{
	if (*w == '\0')
		return false;
	for (; *w; w++)
		if (!strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
		            "_@%+=:,./-",
		            *w))
			return false;
	return true;
}

/* Appends w shell-quoted (and a space before it unless first). */
static void append_quoted(char *out, size_t *len, const char *w, bool first)
{
	if (!first)
		out[(*len)++] = ' ';
	if (shell_safe(w)) {
		size_t n = strlen(w);
		memcpy(out + *len, w, n);
		*len += n;
		return;
	}
	out[(*len)++] = '\'';
	for (; *w; w++) {
		if (*w == '\'') {
			memcpy(out + *len, "'\\''", 4);
			*len += 4;
		} else {
			out[(*len)++] = *w;
		}
	}
	out[(*len)++] = '\'';
}

/* Every word quoted, joined by spaces: at most 4 bytes per byte + 3 per word. */
static char *join_quoted(char *const *words)
{
	size_t cap = 1;
	for (int i = 0; words[i]; i++)
		cap += 4 * strlen(words[i]) + 3;
	char *out = malloc(cap);
	if (out == NULL)
		return NULL;
	size_t len = 0;
	for (int i = 0; words[i]; i++)
		append_quoted(out, &len, words[i], i == 0);
	out[len] = '\0';
	return out;
}

char *launch_describe(char *const *argv)
{
	return join_quoted(argv);
}

/* {host}, {addr}, {cmd} replaced. */
static char *substitute(const char *tmpl, const char *host, const char *addr, const char *cmd)
{
	const char *values[] = {host, addr, cmd};
	size_t cap = strlen(tmpl) + 1;
	for (const char *p = strchr(tmpl, '{'); p; p = strchr(p + 1, '{'))
		cap += strlen(cmd) + strlen(host) + strlen(addr);
	char *out = malloc(cap);
	if (out == NULL)
		return NULL;
	size_t len = 0;
	for (const char *p = tmpl; *p;) {
		size_t i, n = sizeof placeholders / sizeof placeholders[0];
		for (i = 0; i < n && *p == '{'; i++)
			if (strncmp(p, placeholders[i], strlen(placeholders[i])) == 0)
				break;
		if (*p == '{' && i < n) {
			size_t vl = strlen(values[i]);
			memcpy(out + len, values[i], vl);
			len += vl;
			p += strlen(placeholders[i]);
		} else {
			out[len++] = *p++;
		}
	}
	out[len] = '\0';
	return out;
}

void launch_free_argv(char **argv)
{
	for (int i = 0; argv && argv[i]; i++)
		free(argv[i]);
	free(argv);
}

char **launch_argv(const struct cmrun_options *o, int host, char *const *env, char *const *argv,
                   bool watched)
{
	const struct cmrun_host *h = &o->hosts.list[host];
	size_t nenv = 0, nargv = 0;
	while (env[nenv])
		nenv++;
	while (argv[nargv])
		nargv++;
	/* The command: cmrun --remote-exec [--watch] ENV... PROGRAM ARGS... */
	char **cmd = calloc(nenv + nargv + 6, sizeof *cmd);
	char **out = calloc(nenv + nargv + 16, sizeof *out);
	if (cmd == NULL || out == NULL) {
		free(cmd);
		free(out);
		return NULL;
	}
	size_t c = 0;
	/* ip netns exec and srun take the server down with them. */
	watched = watched && (o->launch == LAUNCH_SSH || o->launch == LAUNCH_TEMPLATE);
	cmd[c++] = (char *)self_path();
	cmd[c++] = CMRUN_REMOTE_EXEC_OPTION;
	if (watched)
		cmd[c++] = "--watch";
	for (size_t i = 0; i < nenv; i++)
		cmd[c++] = env[i];
	for (size_t i = 0; i < nargv; i++)
		cmd[c++] = argv[i];
	cmd[c] = NULL;

	size_t n = 0;
	bool ok = true;
#define ADD(s)                                                                                     \
	do {                                                                                       \
		if ((out[n++] = strdup(s)) == NULL)                                                \
			ok = false;                                                                \
	} while (0)
	char *joined = NULL;
	switch (o->launch) {
	case LAUNCH_SSH:
		joined = join_quoted(cmd);
		ADD("ssh");
		ADD("-o");
		ADD("BatchMode=yes");
		ADD("-o");
		ADD("StrictHostKeyChecking=accept-new");
		ADD(h->addr[0] ? h->addr : h->name);
		if (joined)
			ADD(joined);
		else
			ok = false;
		break;
	case LAUNCH_SRUN:
		ADD("srun");
		ADD("--nodelist");
		ADD(h->name);
		ADD("-N1");
		ADD("-n1");
		ADD("--kill-on-bad-exit=0");
		for (size_t i = 0; i < c; i++)
			ADD(cmd[i]);
		break;
	case LAUNCH_NETNS:
		ADD("ip");
		ADD("netns");
		ADD("exec");
		ADD(h->name);
		for (size_t i = 0; i < c; i++)
			ADD(cmd[i]);
		break;
	case LAUNCH_TEMPLATE:
		joined = join_quoted(cmd);
		ADD("/bin/sh");
		ADD("-c");
		if (joined) {
			out[n] = substitute(o->launch_template, h->name,
			                    h->addr[0] ? h->addr : h->name, joined);
			ok = ok && out[n++] != NULL;
		} else {
			ok = false;
		}
		break;
	default: /* local: the command itself */
		for (size_t i = 0; i < c; i++)
			ADD(cmd[i]);
		break;
	}
#undef ADD
	out[n] = NULL;
	free(joined);
	free(cmd);
	if (!ok) {
		launch_free_argv(out);
		return NULL;
	}
	return out;
}

void launch_host_line(const struct cmrun_options *o, int host, char *buf, size_t len)
{
	const struct cmrun_host *h = &o->hosts.list[host];
	const char *where = h->addr[0] ? h->addr : h->name;
	char *t;
	if (!launch_is_remote(o, host)) {
		snprintf(buf, len, "{cmd} (a child of cmrun)");
		return;
	}
	switch (o->launch) {
	case LAUNCH_SSH:
		snprintf(buf, len,
		         "ssh -o BatchMode=yes -o StrictHostKeyChecking=accept-new %s {cmd}",
		         where);
		break;
	case LAUNCH_SRUN:
		snprintf(buf, len, "srun --nodelist %s -N1 -n1 --kill-on-bad-exit=0 {cmd}",
		         h->name);
		break;
	case LAUNCH_NETNS:
		snprintf(buf, len, "ip netns exec %s {cmd}", h->name);
		break;
	default:
		t = substitute(o->launch_template, h->name, where, "{cmd}");
		snprintf(buf, len, "/bin/sh -c %s", t ? t : "(out of memory)");
		free(t);
		break;
	}
}

int launch_configure(struct cmrun_options *o, const char *text, char *err, size_t errlen)
{
	bool any_addr = false;
	for (int i = 0; i < o->hosts.count; i++)
		any_addr = any_addr || o->hosts.list[i].addr[0];
	const char *slurm = getenv("SLURM_JOB_ID");
	if (text == NULL)
		o->launch = !any_addr ? LAUNCH_LOCAL : slurm && slurm[0] ? LAUNCH_SRUN : LAUNCH_SSH;
	else if (strcmp(text, "local") == 0)
		o->launch = LAUNCH_LOCAL;
	else if (strcmp(text, "ssh") == 0)
		o->launch = LAUNCH_SSH;
	else if (strcmp(text, "srun") == 0)
		o->launch = LAUNCH_SRUN;
	else if (strcmp(text, "netns") == 0)
		o->launch = LAUNCH_NETNS;
	else {
		char why[200];
		if (launch_check_template(text, why, sizeof why) < 0) {
			snprintf(err, errlen, "--launch '%.200s': %s", text, why);
			return -1;
		}
		o->launch = LAUNCH_TEMPLATE;
		o->launch_template = text;
	}
	if (o->launch == LAUNCH_LOCAL)
		return 0;
	/* A process on another host needs an address to be reached at. */
	for (int i = 0; i < o->hosts.count; i++) {
		struct cmrun_host *h = &o->hosts.list[i];
		if (h->addr[0] == '\0' && launch_resolve(h->name, h->addr, sizeof h->addr) < 0) {
			snprintf(
			    err, errlen,
			    "--launch %s: host '%s' has no addr= and its name does not resolve to "
			    "an IPv4 address",
			    launch_name(o), h->name);
			return -1;
		}
	}
	return 0;
}

#define CMRUN_MAX_EXPORTS 256

int launch_add_export(struct cmrun_options *o, const char *text, char *err, size_t errlen)
{
	size_t len = strcspn(text, "=");
	bool ok = len > 0 && (isalpha((unsigned char)text[0]) || text[0] == '_');
	for (size_t i = 0; ok && i < len; i++)
		ok = isalnum((unsigned char)text[i]) || text[i] == '_';
	if (!ok) {
		snprintf(err, errlen,
		         "--export takes NAME or NAME=VALUE (NAME letters, digits and '_'), not "
		         "'%.100s'",
		         text);
		return -1;
	}
	if (strncmp(text, "CHANMEM_", 8) == 0) {
		snprintf(err, errlen, "--export %.*s: the CHANMEM_ variables are cmrun's to set",
		         (int)(len > 100 ? 100 : len), text);
		return -1;
	}
	if (o->nexports == CMRUN_MAX_EXPORTS) {
		snprintf(err, errlen, "more than %d --export options", CMRUN_MAX_EXPORTS);
		return -1;
	}
	char *entry;
	if (text[len] == '=') {
		entry = strdup(text);
	} else {
		const char *value = getenv(text);
		if (value == NULL) {
			snprintf(err, errlen,
			         "--export %.100s: not set in cmrun's environment (or give "
			         "%.100s=VALUE)",
			         text, text);
			return -1;
		}
		if (asprintf(&entry, "%s=%s", text, value) < 0)
			entry = NULL;
	}
	char **grown =
	    entry ? realloc(o->exports, (size_t)(o->nexports + 2) * sizeof *grown) : NULL;
	if (grown == NULL) {
		free(entry);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	o->exports = grown;
	o->exports[o->nexports++] = entry;
	o->exports[o->nexports] = NULL;
	return 0;
}
