/* Shared machinery of the threaded engines (thread-per-client, multiplexer,
 * specialized): the locks of the core's state domains, socket setup, the
 * accepting thread, read-into-core, drain-output. A mode is only a topology:
 * how many event-loop workers read, and whether one separate sender thread
 * owns every write. */
#ifndef CHANMEM_ENGINE_COMMON_H
#define CHANMEM_ENGINE_COMMON_H

#include "engine.h"

#include <stdbool.h>

struct eng_topology {
	/* Receiving workers: each an event loop over its share of the
	 * connections. 0: a new worker (thread) per connection. */
	unsigned readers;
	/* true: one sender thread owns every outgoing write; false: a
	 * connection's reader also writes it. */
	bool sender_thread;
};

int cm_engine_threaded(const struct cm_server_opts *opts, const struct cm_listeners *ls,
                       const struct eng_topology *topo);

#endif
