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
	/* true: a reader writes the output its read burst produced for
	 * connections of other writers itself, at the end of the burst,
	 * under OUTQ only, instead of waking their writers; what it cannot
	 * write (socket full, connection closing) still goes to the writer.
	 * With a thread per connection a hand-over costs the receiving
	 * thread's wake-up and an eventfd round, ~2.8 us a message pinned to
	 * one core (NPcm 1 B: 10.50 us one way against mono's 7.65). */
	bool readers_write_produced;
};

int cm_engine_threaded(const struct cm_server_opts *opts, const struct cm_listeners *ls,
                       const struct eng_topology *topo);

#endif
