/* One client connection of ckptserver, served by its own thread. */
#ifndef CHANMEM_CKPT_SESSION_H
#define CHANMEM_CKPT_SESSION_H

#include "ckpt_proto.h"
#include "ckpt_store.h"

#include <pthread.h>
#include <stdatomic.h>

/* Idle limit per read or write: a client that stalls longer is dropped (its
 * upload discarded) so it cannot hold a thread forever. */
#define CKPT_IO_TIMEOUT_MS 120000
/* Connections served at once; more are refused with ERROR(BUSY). */
#define CKPT_MAX_SESSIONS 256
/* A client has this long from connecting to its HELLO being in (one frame
 * a real client sends at once), whatever pace its bytes come at: the per
 * read idle limit alone lets one byte a minute hold a session. */
#define CKPT_AUTH_TIMEOUT_MS 5000
/* Connections without HELLO at once: past this the oldest is dropped to
 * make room, so clients that never authenticate cannot take the sessions
 * authenticated ones need, nor keep a new client from authenticating. */
#define CKPT_MAX_UNAUTH 32

struct ckpt_server {
	struct ckpt_store *store;
	char secret[CKPT_SECRET_LEN + 1];
	atomic_int sessions;
	/* Descriptors of the connections still authenticating, oldest first
	 * (guarded by unauth_mu; a session leaves the list before it closes
	 * its descriptor, so a dropped one is always still its own). */
	pthread_mutex_t unauth_mu;
	int unauth[CKPT_MAX_UNAUTH];
	int nunauth;
};

/* Serves fd until the client leaves or is refused, then closes it. */
void ckpt_session_serve(struct ckpt_server *srv, int fd);
/* Refuses a connection past CKPT_MAX_SESSIONS (no thread). */
void ckpt_session_refuse(int fd, int code, const char *text);

#endif
