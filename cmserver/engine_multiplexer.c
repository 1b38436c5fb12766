/* --mode multiplexer --threads N: N event loops, each reading, processing
 * and writing the connections handed to it (a new one goes to the least
 * loaded loop). Output for a connection of another loop is posted to that
 * loop's mailbox and the loop woken with ev_async; no lock is held across
 * I/O. With N = 1 it is mono plus an accepting thread. */
#include "config.h"

#include "engine_common.h"

int cm_engine_multiplexer(const struct cm_server_opts *opts, const struct cm_listeners *ls)
{
	struct eng_topology topo = {
	    .readers = opts->threads, .sender_thread = false, .readers_write_produced = false};
	return cm_engine_threaded(opts, ls, &topo);
}
