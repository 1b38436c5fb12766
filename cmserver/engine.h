/* The I/O engines of cmserver. An engine owns sockets, the event loop(s)
 * and threads; the protocol itself lives in the core (core.h). Every engine
 * takes the same options and an already listening socket, serves until
 * SIGTERM or SIGINT, and returns the process exit status. */
#ifndef CHANMEM_ENGINE_H
#define CHANMEM_ENGINE_H

#include "protocol.h"

#include <stdint.h>

struct cm_server_opts {
	const char *mode;
	uint32_t max_message; /* largest accepted payload */
	uint64_t log_mem;     /* bytes of delivered log entries kept in memory */
	char secret[CM_SECRET_LEN];
};

typedef int (*cm_engine_fn)(const struct cm_server_opts *opts, int listen_fd);

struct cm_engine {
	const char *name;
	cm_engine_fn run; /* NULL: the mode is planned but not built yet */
	const char *summary;
};

/* Every mode --mode knows, built or not; ends with a NULL name. */
extern const struct cm_engine cm_engines[];

/* One libev loop, no threads, no locks. */
int cm_engine_mono(const struct cm_server_opts *opts, int listen_fd);

#endif
