/* --mode thread-per-client: the accepting thread starts one thread per
 * connection. That thread reads its socket (blocking in the kernel on that
 * one socket), runs the core for its own frames under the domain locks, and
 * writes its own socket, and the sockets of other connections it produced
 * output for (under OUTQ, after its read burst); what it cannot write
 * there wakes their own thread. See engine_conn.c and docs/engines.md. */
#include "config.h"

#include "engine_common.h"

int cm_engine_thread_per_client(const struct cm_server_opts *opts, const struct cm_listeners *ls)
{
	struct eng_topology topo = {
	    .readers = 0, .sender_thread = false, .readers_write_produced = true};
	return cm_engine_threaded(opts, ls, &topo);
}
