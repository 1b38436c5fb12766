/* --mode specialized --threads N: one accepting thread, N receiving threads
 * (event loops that read and run the core), and one sending thread that owns
 * every outgoing write: it drains each connection's queued frames with
 * batched sendmsg calls, woken by ev_async, so receiving and sending overlap
 * on full-duplex links. */
#include "config.h"

#include "engine_common.h"

int cm_engine_specialized(const struct cm_server_opts *opts, const struct cm_listeners *ls)
{
	struct eng_topology topo = {
	    .readers = opts->threads, .sender_thread = true, .readers_write_produced = false};
	return cm_engine_threaded(opts, ls, &topo);
}
