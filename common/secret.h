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

#endif
