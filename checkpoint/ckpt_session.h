/* One client connection of ckptserver, served by its own thread. */
#ifndef CHANMEM_CKPT_SESSION_H
#define CHANMEM_CKPT_SESSION_H

#include "ckpt_proto.h"
#include "ckpt_store.h"

#include <stdatomic.h>

/* Idle limit per read or write: a client that stalls longer is dropped (its
 * upload discarded) so it cannot hold a thread forever. */
#define CKPT_IO_TIMEOUT_MS 120000
/* Connections served at once; more are refused with ERROR(BUSY). */
#define CKPT_MAX_SESSIONS 256

struct ckpt_server {
	struct ckpt_store *store;
	char secret[CKPT_SECRET_LEN + 1];
	atomic_int sessions;
};

/* Serves fd until the client leaves or is refused, then closes it. */
void ckpt_session_serve(struct ckpt_server *srv, int fd);
/* Refuses a connection past CKPT_MAX_SESSIONS (no thread). */
void ckpt_session_refuse(int fd, int code, const char *text);

#endif
