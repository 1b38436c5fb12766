/* The job secret a server (cmserver, ckptserver) authenticates peers with. */
#ifndef CHANMEM_SECRET_H
#define CHANMEM_SECRET_H

#include <stddef.h>

#include "protocol.h"

/* $CHANMEM_SECRET, else the first line of file (NULL: no file given).
 * A secret is exactly CM_SECRET_LEN printable, non-blank characters.
 * Returns 0 with the secret NUL-terminated in out, or -1 with a user-facing
 * reason in why. */
int cm_secret_load(const char *file, char out[CM_SECRET_LEN + 1], char *why, size_t whylen);

/* The same for a server's command line: a secret that cannot be loaded is
 * a usage error of prog (cmdline_bad_usage: exit status 2). */
void cm_secret_load_or_exit(const char *prog, const char *file, char out[CM_SECRET_LEN + 1]);

#endif
