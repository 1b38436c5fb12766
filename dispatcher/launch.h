/* Launching a process on its host (cmrun --launch, docs/deployment.md).
 *
 * A local process is a child of cmrun as it always was. A remote one is
 * started through a launcher that is itself a child of cmrun: ssh, srun,
 * ip netns exec, or the user's template run by /bin/sh -c. Its command is
 * "CMRUN --remote-exec VAR=VALUE... PROGRAM ARGS..." (remote_exec.h)
 * because no launcher forwards cmrun's environment; the job secret is not
 * among those words: the helper reads it from its stdin first (a line
 * cmrun writes into the launcher's stdin pipe), so it never shows in a
 * process list. */
#ifndef CMRUN_LAUNCH_H
#define CMRUN_LAUNCH_H

#include <stdbool.h>
#include <stddef.h>

#include "options.h"

/* --launch TEXT (NULL: the default: local when no host has an address,
 * else ssh, srun inside a Slurm job); resolves the names of hosts without
 * addr= for a remote launch. Returns 0 or -1 with why in err. */
int launch_configure(struct cmrun_options *o, const char *text, char *err, size_t errlen);
/* --export NAME[=VALUE]: appends "NAME=VALUE" to o->exports. Returns 0 or
 * -1 with why in err. */
int launch_add_export(struct cmrun_options *o, const char *text, char *err, size_t errlen);
/* Checks a --launch template: {host} or {addr}, and {cmd}, each known
 * placeholder spelled right. Returns 0 or -1 with why in err. */
int launch_check_template(const char *text, char *err, size_t errlen);
/* IPv4 address of a host name (getaddrinfo). Returns 0 or -1. */
int launch_resolve(const char *name, char *addr, size_t len);
/* Whether processes of host i are started through a launcher: never with
 * --launch local; always with netns and a template; with ssh and srun,
 * unless the host's address is a loopback one (127.x). */
bool launch_is_remote(const struct cmrun_options *o, int host);
/* "ssh", "srun", "netns", "template" or "local". */
const char *launch_name(const struct cmrun_options *o);

/* The launcher's argv (malloc'd, NULL-terminated, every string malloc'd;
 * free with launch_free_argv) running `cmrun --remote-exec ENV... PROGRAM
 * ARGS...` on host i (it reads CHANMEM_SECRET from its stdin's first
 * line). watched: a server without a control connection; with ssh or a
 * template it is stopped when its stdin ends. NULL when out of memory. */
char **launch_argv(const struct cmrun_options *o, int host, char *const *env, char *const *argv,
                   bool watched);
void launch_free_argv(char **argv);
/* --print-map: how host i's processes start, with "{cmd}" for the
 * command. */
void launch_host_line(const struct cmrun_options *o, int host, char *buf, size_t len);
/* The launcher's argv joined as a shell line (for -v -v). */
char *launch_describe(char *const *argv);

#endif
