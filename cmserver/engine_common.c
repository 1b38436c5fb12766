/* The threaded engines: one accepting thread (the main thread, which also
 * handles SIGTERM/SIGINT) and workers, each a libev loop in its own thread.
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

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- accepting thread ---- */

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

/* Shuts down the sockets of up to max connections without the job secret,
 * oldest first, that were accepted before `before` (0: any); their readers
 * then close them. Returns how many. Accepting thread. */
static unsigned drop_unauthenticated(struct eng *e, double before, unsigned max)
{
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

/* Out of descriptors (or threads): make room from the peers without the
 * secret, and stop accepting for a moment either way -- the dropped ones
 * are closed by their readers, not here, so accepting at once would fail
 * again. */
static void pause_accepting(struct eng *e, const char *why)
{
	unsigned dropped = drop_unauthenticated(e, 0, 16);
	unsigned long repeats;
	if (eng_log_due(&e->accept_log, ev_now(e->loop), &repeats))
		cm_err("cannot take a new connection: %s; dropped %u without the job secret, "
		       "pausing (%lu more times since the last report)",
		       why, dropped, repeats);
	for (unsigned k = 0; k < e->listeners.n; k++)
		ev_io_stop(e->loop, &e->accept_w[k]);
	/* A one-shot timer that has fired keeps its expired time: started
	 * again as it is, it would fire at once and the pause never pause. */
	ev_timer_set(&e->accept_pause, ENG_ACCEPT_PAUSE, 0.);
	ev_timer_start(e->loop, &e->accept_pause);
}

static void on_accept(struct ev_loop *loop, ev_io *aw, int revents)
{
	struct eng *e = aw->data;
	if (e->topo.readers == 0)
		eng_reap_workers(e);
	for (int i = 0; i < 64; i++) {
		int fd = accept4(aw->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			pause_accepting(e, strerror(errno));
			return;
		}
		cm_tune_socket(fd);
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
			close(fd);
			/* Most likely out of descriptors for the worker's loop or
			 * of threads: the same remedy as a failed accept. */
			pause_accepting(e, "out of memory, descriptors or threads");
			return;
		}
		c->e = e;
		c->s = s;
		c->accepted = ev_now(loop);
		pthread_mutex_init(&c->in_mu, NULL);
		c->fd = fd;
		c->wfd = wfd;
		c->rd = rd;
		c->wr = e->topo.sender_thread ? e->sender : rd;
		c->refs = 2; /* reader + writer roles */
		ev_io_init(&c->rw, eng_on_readable, fd, EV_READ);
		ev_io_init(&c->ww, eng_on_writable, wfd, EV_WRITE);
		ev_timer_init(&c->linger, eng_on_linger, CLOSE_LINGER, 0.);
		ev_timer_init(&c->hold, eng_on_hold, CM_HOLD_RETRY, CM_HOLD_RETRY);
		c->rw.data = c->ww.data = c->linger.data = c->hold.data = c;
		__atomic_add_fetch(&rd->load, 1, __ATOMIC_RELAXED);
		pthread_mutex_lock(&e->reg_mu);
		cm_list_push_front(&e->reg, &c->reg_link);
		pthread_mutex_unlock(&e->reg_mu);
		pthread_mutex_lock(&rd->mu);
		c->new_next = rd->new_head;
		rd->new_head = c;
		pthread_mutex_unlock(&rd->mu);
		ev_async_send(rd->loop, &rd->async);
		cm_debug("connection fd %d accepted", fd);
	}
}

static void on_accept_pause(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct eng *e = w->data;
	for (unsigned k = 0; k < e->listeners.n; k++)
		ev_io_start(loop, &e->accept_w[k]);
}

static void on_auth_sweep(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct eng *e = w->data;
	unsigned n = drop_unauthenticated(e, ev_now(loop) - ENG_AUTH_DEADLINE, UINT_MAX);
	if (n)
		cm_debug("%u connections without the job secret in time dropped", n);
}

static void on_signal(struct ev_loop *loop, ev_signal *w, int revents)
{
	cm_info("signal %d: shutting down", w->signum);
	ev_break(loop, EVBREAK_ALL);
}

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
	e->listeners = *ls;
	eng_locks_init(&e->locks);
	pthread_mutex_init(&e->reg_mu, NULL);
	cm_list_init(&e->reg);
	struct cm_core_config cfg = {.max_payload = opts->max_message,
	                             .world_size = opts->world_size,
	                             .log_mem = opts->log_mem / 8,
	                             .mem = opts->mem,
	                             .cut_through_min = opts->cut_through_min,
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
	cfg.journal = opts->journal ? cm_journal_ops(opts->journal) : NULL;
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
	for (unsigned k = 0; k < ls->n; k++)
		if (cm_set_nonblock(ls->fds[k], 1) < 0) {
			cm_err("listening socket: %s", strerror(errno));
			goto out;
		}
	for (unsigned i = 0; i < topo->readers; i++)
		if ((e->readers[i] = eng_worker_start(e, false)) == NULL)
			goto out;
	if (topo->sender_thread && (e->sender = eng_worker_start(e, false)) == NULL)
		goto out;

	for (unsigned k = 0; k < ls->n; k++) {
		ev_io_init(&e->accept_w[k], on_accept, ls->fds[k], EV_READ);
		e->accept_w[k].data = e;
		ev_io_start(e->loop, &e->accept_w[k]);
	}
	ev_timer_init(&e->accept_pause, on_accept_pause, ENG_ACCEPT_PAUSE, 0.);
	ev_timer_init(&e->auth_sweep, on_auth_sweep, ENG_AUTH_SWEEP, ENG_AUTH_SWEEP);
	e->auth_sweep.data = e;
	ev_timer_start(e->loop, &e->auth_sweep);
	ev_signal_init(&e->sigterm, on_signal, SIGTERM);
	ev_signal_init(&e->sigint, on_signal, SIGINT);
	e->accept_pause.data = e;
	ev_signal_start(e->loop, &e->sigterm);
	ev_signal_start(e->loop, &e->sigint);
	sigset_t stop;
	sigemptyset(&stop);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGINT);
	pthread_sigmask(SIG_UNBLOCK, &stop, NULL);
	ev_run(e->loop, 0);
	pthread_sigmask(SIG_BLOCK, &stop, NULL);
	for (unsigned k = 0; k < ls->n; k++)
		ev_io_stop(e->loop, &e->accept_w[k]);
	ev_timer_stop(e->loop, &e->accept_pause);
	ev_timer_stop(e->loop, &e->auth_sweep);
	ev_signal_stop(e->loop, &e->sigterm);
	ev_signal_stop(e->loop, &e->sigint);
	status = 0;
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
