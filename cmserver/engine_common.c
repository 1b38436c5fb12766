/* The threaded engines: the acceptor every engine has (engine_io.c), in the
 * main thread, which also handles SIGTERM/SIGINT, hands each new socket to
 * a reading worker's mailbox; workers are libev loops, each in its own
 * thread, that own the connections handed to them.
 *
 * A connection has a reading worker and a writing worker (the same one
 * unless the topology has a sender thread). The reader reads into the core
 * and dispatches frames under the domain locks (engine_locks.c). Any thread
 * that queues output for a connection (the core's wake hook) posts it to its
 * writer's mailbox and, if that writer is another thread, wakes it with
 * ev_async (with readers_write_produced in the topology, as in
 * thread-per-client, the reader first writes it itself: see eng_on_wake in
 * engine_conn.c). The writer drains the queue with non-blocking sendmsg
 * batches under OUTQ(s) and arms an EV_WRITE watcher when the kernel is
 * full, so a client that stops reading only grows its own queue: no thread
 * ever blocks on a socket while holding a lock.
 *
 * Closing: only the writer closes the socket. The reader stops first and
 * posts CLOSE to the writer; a writer that fails posts WRITE_FAILED to the
 * reader. Mailbox entries and both roles hold references on the connection,
 * so it is freed by whoever drops the last one. */
#include "config.h"

#include "engine_threaded.h"

#include "journal.h"
#include "log.h"
#include "net.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- the acceptor's side (engine_io.c): the main thread ---- */

static struct worker *pick_reader(struct eng *e)
{
	if (e->topo.readers == 0)
		return eng_worker_start(e, true);
	struct worker *best = e->readers[0];
	for (unsigned i = 1; i < e->topo.readers; i++)
		if (__atomic_load_n(&e->readers[i]->load, __ATOMIC_RELAXED) <
		    __atomic_load_n(&best->load, __ATOMIC_RELAXED))
			best = e->readers[i];
	return best;
}

/* A new socket becomes a connection handed to its reading worker. */
static bool adopt(void *ctx, int fd, double now)
{
	struct eng *e = ctx;
	if (e->topo.readers == 0)
		eng_reap_workers(e);
	struct conn *c = calloc(1, sizeof *c);
	int wfd = e->topo.sender_thread ? fcntl(fd, F_DUPFD_CLOEXEC, 0) : fd;
	struct worker *rd = c && wfd >= 0 ? pick_reader(e) : NULL;
	struct cm_session *s = rd ? eng_session_new(&e->locks, e->core, c) : NULL;
	if (s == NULL) {
		if (wfd >= 0 && wfd != fd)
			close(wfd);
		if (rd && rd->one_shot) { /* nothing was handed to it: let it end */
			__atomic_store_n(&rd->stop, true, __ATOMIC_RELEASE);
			ev_async_send(rd->loop, &rd->async);
		}
		free(c);
		return false;
	}
	c->e = e;
	c->s = s;
	c->accepted = now;
	pthread_mutex_init(&c->in_mu, NULL);
	c->fd = fd;
	c->wfd = wfd;
	c->rd = rd;
	c->wr = e->topo.sender_thread ? e->sender : rd;
	c->refs = 2; /* reader + writer roles */
	ev_io_init(&c->rw, eng_on_readable, fd, EV_READ);
	ev_io_init(&c->ww, eng_on_writable, wfd, EV_WRITE);
	ev_timer_init(&c->linger, eng_on_linger, ENG_CLOSE_LINGER, 0.);
	ev_timer_init(&c->hold, eng_on_hold, CM_HOLD_RETRY, CM_HOLD_RETRY);
	c->rw.data = c->ww.data = c->linger.data = c->hold.data = c;
	pthread_mutex_lock(&e->reg_mu);
	cm_list_push_front(&e->reg, &c->reg_link);
	pthread_mutex_unlock(&e->reg_mu);
	eng_worker_adopt(rd, c);
	return true;
}

/* Shuts down the sockets of up to max connections without the job secret,
 * oldest first, that were accepted before `before` (0: any); their readers
 * then close them. */
static unsigned drop_unauthenticated(void *ctx, double before, unsigned max, const char *why)
{
	struct eng *e = ctx;
	unsigned n = 0;
	pthread_mutex_lock(&e->reg_mu);
	struct conn *c;
	cm_list_for_each_reverse(c, &e->reg, struct conn, reg_link)
	{
		if (n == max)
			break;
		if (c->dropped || cm_session_authenticated(c->s) ||
		    (before != 0 && c->accepted > before))
			continue;
		shutdown(c->fd, SHUT_RDWR);
		c->dropped = true;
		n++;
	}
	pthread_mutex_unlock(&e->reg_mu);
	return n;
}

static const struct eng_acceptor_ops threaded_acceptor_ops = {
    .adopt = adopt, .drop_unauthenticated = drop_unauthenticated};

static void shutdown_all(struct eng *e)
{
	/* Every worker stops and is joined; then, single-threaded, every
	 * connection still open is closed. */
	eng_stop_workers(e);
	while (!cm_list_empty(&e->reg)) {
		struct conn *c = cm_list_entry(cm_list_first(&e->reg), struct conn, reg_link);
		cm_list_remove(&c->reg_link);
		if (c->fd != c->wfd)
			close(c->fd);
		close(c->wfd);
		cm_session_closed(c->s);
		cm_session_release(c->s);
		pthread_mutex_destroy(&c->in_mu);
		free(c);
	}
}

int cm_engine_threaded(const struct cm_server_opts *opts, const struct cm_listeners *ls,
                       const struct eng_topology *topo)
{
	struct eng *e = calloc(1, sizeof *e);
	if (e == NULL) {
		cm_err("out of memory");
		return 1;
	}
	e->topo = *topo;
	eng_locks_init(&e->locks);
	pthread_mutex_init(&e->reg_mu, NULL);
	cm_list_init(&e->reg);
	struct cm_core_config cfg = {.max_payload = opts->max_message,
	                             .world_size = opts->world_size,
	                             .log_mem = opts->log_mem / 8,
	                             .mem = opts->mem,
	                             .cut_through_min = opts->cut_through_min,
	                             .standby_addr = opts->standby_addr,
	                             .hooks = {.ctx = e,
	                                       .wake = eng_on_wake,
	                                       .out_lock = eng_hook_out_lock,
	                                       .out_unlock = eng_hook_out_unlock}};
	memcpy(cfg.secret, opts->secret, CM_SECRET_LEN);
	if (opts->monitor) {
		cfg.rank_lost = cm_monitor_rank_lost;
		cfg.rank_lost_ctx = opts->monitor;
	}
	cfg.spill = opts->spill;
	cfg.journal = opts->journal ? cm_journal_ops(opts->journal) : NULL;
	cfg.spill_ctx = opts->spill_ctx;
	int status = 1;
	e->core = cm_core_new(&cfg);
	e->loop = ev_default_loop(EVFLAG_AUTO);
	e->readers = calloc(topo->readers ? topo->readers : 1, sizeof *e->readers);
	if (e->core && opts->monitor)
		cm_monitor_attach(opts->monitor, e->core);
	if (e->core == NULL || e->loop == NULL || e->readers == NULL) {
		cm_err("cannot start: out of memory or no event loop");
		goto out;
	}
	if (opts->journal && cm_journal_recover(opts->journal, e->core) < 0)
		goto out;
	for (unsigned i = 0; i < topo->readers; i++)
		if ((e->readers[i] = eng_worker_start(e, false)) == NULL)
			goto out;
	if (topo->sender_thread && (e->sender = eng_worker_start(e, false)) == NULL)
		goto out;
	e->acceptor = (struct eng_acceptor){.loop = e->loop,
	                                    .ops = &threaded_acceptor_ops,
	                                    .ctx = e,
	                                    .drops_close_at_once = false,
	                                    .listeners = *ls};
	status = eng_acceptor_run(&e->acceptor);
out:
	if (opts->monitor) /* connections closed from here on are not failures */
		cm_monitor_detach(opts->monitor);
	shutdown_all(e);
	if (e->core) {
		if (status == 0)
			cm_core_log_summary(e->core);
		cm_core_free(e->core);
	}
	cm_listeners_close(ls, 0);
	free(e->readers);
	pthread_mutex_destroy(&e->reg_mu);
	eng_locks_destroy(&e->locks);
	free(e);
	return status;
}
