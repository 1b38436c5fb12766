/* --mode mono: one libev loop multiplexes every connection and runs the
 * whole protocol; no other thread touches a connection or the core's state
 * (past --log-mem, the spill store's log-writer thread only stores payloads
 * it was handed), no locks. Reads go where the core says (cm_session_read_iov), output queues
 * are drained with one sendmsg per batch, and an EV_WRITE watcher is armed
 * only while a connection has output the kernel would not take. A client
 * that stops reading only grows its own queue. */
#include "config.h"

#include "core.h"
#include "engine.h"
#include "journal.h"
#include "list.h"

#include "log.h"
#include "net.h"

#include <errno.h>
#include <ev.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define READS_PER_EVENT 16 /* full-buffer reads before yielding to other sockets */
#define CLOSE_LINGER 2.0   /* seconds a refused peer gets to read its ERROR */

struct mono;

struct conn {
	struct mono *m;
	struct cm_session *s;
	int fd;
	ev_io rw, ww;
	ev_timer linger;
	ev_timer hold;           /* retries a sender held back (cm_session_held) */
	struct cm_list link;     /* in m->conns */
	struct conn *dirty_next; /* connections with new output to flush */
	ev_tstamp accepted;      /* for ENG_AUTH_DEADLINE */
	bool dirty, closed, shut_wr;
};

struct mono {
	struct ev_loop *loop;
	struct cm_core *core;
	unsigned nlisteners;
	ev_io accept_w[CM_MAX_LISTENERS]; /* one per listening socket */
	ev_timer accept_pause;
	ev_timer auth_sweep; /* drops connections past ENG_AUTH_DEADLINE */
	struct eng_log_limit accept_log;
	ev_signal sigterm, sigint;
	struct cm_list conns; /* every open connection, newest first */
	struct conn *dirty;
	unsigned nconns;
};

static void conn_free(struct conn *c)
{
	cm_session_release(c->s);
	free(c);
}

static void conn_close(struct conn *c, const char *why)
{
	struct mono *m = c->m;
	if (c->closed)
		return;
	int rank = cm_session_rank(c->s);
	if (rank >= 0 && !cm_session_said_bye(c->s) && !cm_session_closing(c->s))
		cm_info("rank %d: connection lost without BYE (%s)", rank, why);
	else
		cm_debug("connection fd %d closed (%s)", c->fd, why);
	c->closed = true;
	ev_io_stop(m->loop, &c->rw);
	ev_io_stop(m->loop, &c->ww);
	ev_timer_stop(m->loop, &c->linger);
	ev_timer_stop(m->loop, &c->hold);
	close(c->fd);
	cm_session_closed(c->s);
	cm_list_remove(&c->link);
	m->nconns--;
	if (!c->dirty) /* else flush_dirty frees it */
		conn_free(c);
}

/* A refused or replaced connection: its remaining output (ending in ERROR)
 * goes out, then we stop sending, and close once the peer closes or the
 * linger time is over. Closing right away with unread input would make the
 * kernel send RST, and the peer could lose the ERROR frame. */
static void closing_progress(struct conn *c)
{
	struct mono *m = c->m;
	if (!ev_is_active(&c->linger))
		ev_timer_start(m->loop, &c->linger);
	if (!c->shut_wr && cm_session_out_pending(c->s) == 0) {
		shutdown(c->fd, SHUT_WR);
		c->shut_wr = true;
	}
}

static void conn_flush(struct conn *c)
{
	struct mono *m = c->m;
	int err = 0;
	switch (eng_send_output(c->s, c->fd, &err)) {
	case ENG_SEND_BLOCKED:
		ev_io_start(m->loop, &c->ww);
		return;
	case ENG_SEND_FAILED:
		conn_close(c, strerror(err));
		return;
	case ENG_SEND_DRAINED:
		break;
	}
	ev_io_stop(m->loop, &c->ww);
	if (cm_session_closing(c->s))
		closing_progress(c);
}

static void flush_dirty(struct mono *m)
{
	while (m->dirty) {
		struct conn *c = m->dirty;
		m->dirty = c->dirty_next;
		c->dirty = false;
		if (c->closed)
			conn_free(c);
		else
			conn_flush(c);
	}
}

/* Core hook: s has new output or must close. */
static void on_wake(void *ctx, struct cm_session *s)
{
	struct mono *m = ctx;
	struct conn *c = cm_session_engine_data(s);
	if (c->dirty || c->closed)
		return;
	c->dirty = true;
	c->dirty_next = m->dirty;
	m->dirty = c;
}

static void on_readable(struct ev_loop *loop, ev_io *w, int revents)
{
	struct conn *c = w->data;
	struct mono *m = c->m;
	for (int i = 0; i < READS_PER_EVENT; i++) {
		struct iovec iov[2];
		int n = cm_session_read_iov(c->s, iov);
		size_t want = iov[0].iov_len + (n > 1 ? iov[1].iov_len : 0);
		ssize_t r = readv(c->fd, iov, n);
		if (r > 0) {
			cm_session_input(c->s, (size_t)r);
			if (cm_session_held(c->s)) {
				/* Backpressure: this sender waits, its socket fills. */
				ev_io_stop(loop, &c->rw);
				ev_timer_again(loop, &c->hold);
				break;
			}
			if ((size_t)r < want)
				break; /* drained the socket for now */
			if (m->dirty && cm_session_filling(c->s))
				break; /* cut-through: forward what arrived, then read on */
			continue;
		}
		if (r == 0) {
			conn_close(c, "peer closed");
			break;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			conn_close(c, strerror(errno));
		break;
	}
	flush_dirty(m);
}

/* A sender held back for log memory: try its staged MSG again, and read on
 * once the log took it. */
static void on_hold(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct conn *c = w->data;
	struct mono *m = c->m;
	/* Spilling the logs does nothing for a peer that does not read. */
	for (uint32_t r = 0; !cm_session_held_output(c->s) && r < cm_core_world_size(m->core); r++)
		cm_core_relieve(m->core, (int)r);
	cm_session_input(c->s, 0);
	if (!cm_session_held(c->s)) {
		ev_timer_stop(loop, &c->hold);
		ev_io_start(loop, &c->rw);
	}
	flush_dirty(m);
}

static void on_writable(struct ev_loop *loop, ev_io *w, int revents)
{
	struct conn *c = w->data;
	struct mono *m = c->m;
	conn_flush(c); /* may free c */
	flush_dirty(m);
}

static void on_linger(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct conn *c = w->data;
	struct mono *m = c->m;
	conn_close(c, "closed after refusal"); /* may free c */
	flush_dirty(m);
}

/* The connection without the job secret that came first (the list is
 * newest first), or NULL. */
static struct conn *oldest_unauthenticated(struct mono *m)
{
	struct conn *found = NULL, *c;
	cm_list_for_each(c, &m->conns, struct conn, link)
	{
		if (!cm_session_authenticated(c->s))
			found = c;
	}
	return found;
}

static void pause_accepting(struct mono *m, int err)
{
	unsigned long repeats;
	if (eng_log_due(&m->accept_log, ev_now(m->loop), &repeats))
		cm_err("accept: %s (%u connections open, all authenticated); pausing (%lu more "
		       "times since the last report)",
		       strerror(err), m->nconns, repeats);
	for (unsigned k = 0; k < m->nlisteners; k++)
		ev_io_stop(m->loop, &m->accept_w[k]);
	/* A one-shot timer that has fired keeps its expired time: started
	 * again as it is, it would fire at once and the pause never pause. */
	ev_timer_set(&m->accept_pause, ENG_ACCEPT_PAUSE, 0.);
	ev_timer_start(m->loop, &m->accept_pause);
}

static void on_accept(struct ev_loop *loop, ev_io *w, int revents)
{
	struct mono *m = w->data;
	for (int i = 0; i < 64; i++) {
		int fd = accept4(w->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			/* EMFILE, ENFILE, ENOBUFS, ENOMEM: the backlog keeps them.
			 * A peer without the secret gives way to whoever waits
			 * there; with none, retry a little later rather than
			 * spinning. */
			struct conn *victim = oldest_unauthenticated(m);
			if (victim) {
				conn_close(victim,
				           "dropped for a new connection (descriptor limit)");
				flush_dirty(m);
				continue;
			}
			pause_accepting(m, errno);
			return;
		}
		cm_tune_socket(fd);
		struct conn *c = calloc(1, sizeof *c);
		struct cm_session *s = c ? cm_session_new(m->core, c) : NULL;
		if (s == NULL) {
			cm_err("out of memory for a new connection; refusing it");
			free(c);
			close(fd);
			continue;
		}
		c->m = m;
		c->s = s;
		c->fd = fd;
		c->accepted = ev_now(loop);
		ev_io_init(&c->rw, on_readable, fd, EV_READ);
		ev_io_init(&c->ww, on_writable, fd, EV_WRITE);
		ev_timer_init(&c->linger, on_linger, CLOSE_LINGER, 0.);
		ev_timer_init(&c->hold, on_hold, CM_HOLD_RETRY, CM_HOLD_RETRY);
		c->rw.data = c->ww.data = c->linger.data = c->hold.data = c;
		cm_list_push_front(&m->conns, &c->link);
		m->nconns++;
		ev_io_start(loop, &c->rw);
		cm_debug("connection fd %d accepted (%u open)", fd, m->nconns);
	}
}

static void on_accept_pause(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct mono *m = w->data;
	for (unsigned k = 0; k < m->nlisteners; k++)
		ev_io_start(loop, &m->accept_w[k]);
}

static void on_auth_sweep(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct mono *m = w->data;
	ev_tstamp now = ev_now(loop);
	struct conn *c;
	cm_list_for_each(c, &m->conns, struct conn, link)
	{
		if (!cm_session_authenticated(c->s) && now - c->accepted >= ENG_AUTH_DEADLINE)
			conn_close(c, "no HELLO with the job secret in time");
	}
	flush_dirty(m);
}

static void on_signal(struct ev_loop *loop, ev_signal *w, int revents)
{
	cm_info("signal %d: shutting down", w->signum);
	ev_break(loop, EVBREAK_ALL);
}

int cm_engine_mono(const struct cm_server_opts *opts, const struct cm_listeners *ls)
{
	struct mono m = {.nlisteners = ls->n};
	cm_list_init(&m.conns);
	struct cm_core_config cfg = {.max_payload = opts->max_message,
	                             .world_size = opts->world_size,
	                             .log_mem = opts->log_mem / 8,
	                             .mem = opts->mem,
	                             .cut_through_min = opts->cut_through_min,
	                             .hooks = {.ctx = &m, .wake = on_wake}};
	memcpy(cfg.secret, opts->secret, CM_SECRET_LEN);
	if (opts->monitor) {
		cfg.rank_lost = cm_monitor_rank_lost;
		cfg.rank_lost_ctx = opts->monitor;
	}
	cfg.spill = opts->spill;
	cfg.journal = opts->journal ? cm_journal_ops(opts->journal) : NULL;
	cfg.spill_ctx = opts->spill_ctx;

	m.loop = ev_default_loop(EVFLAG_AUTO);
	if (m.loop == NULL) {
		cm_err("cannot start the event loop (libev)");
		return cm_listeners_close(ls, 1);
	}
	m.core = cm_core_new(&cfg);
	if (m.core == NULL) {
		cm_err("out of memory");
		return cm_listeners_close(ls, 1);
	}
	if (opts->journal && cm_journal_recover(opts->journal, m.core) < 0) {
		cm_core_free(m.core);
		return cm_listeners_close(ls, 1);
	}
	if (opts->monitor)
		cm_monitor_attach(opts->monitor, m.core);
	for (unsigned k = 0; k < ls->n; k++)
		if (cm_set_nonblock(ls->fds[k], 1) < 0) {
			cm_err("listening socket: %s", strerror(errno));
			if (opts->monitor)
				cm_monitor_detach(opts->monitor);
			cm_core_free(m.core);
			return cm_listeners_close(ls, 1);
		}
	for (unsigned k = 0; k < ls->n; k++) {
		ev_io_init(&m.accept_w[k], on_accept, ls->fds[k], EV_READ);
		m.accept_w[k].data = &m;
		ev_io_start(m.loop, &m.accept_w[k]);
	}
	ev_timer_init(&m.accept_pause, on_accept_pause, ENG_ACCEPT_PAUSE, 0.);
	ev_timer_init(&m.auth_sweep, on_auth_sweep, ENG_AUTH_SWEEP, ENG_AUTH_SWEEP);
	m.auth_sweep.data = &m;
	ev_timer_start(m.loop, &m.auth_sweep);
	ev_signal_init(&m.sigterm, on_signal, SIGTERM);
	ev_signal_init(&m.sigint, on_signal, SIGINT);
	m.accept_pause.data = &m;
	ev_signal_start(m.loop, &m.sigterm);
	ev_signal_start(m.loop, &m.sigint);
	/* main blocked them until now: a pending one is delivered here. */
	sigset_t stop;
	sigemptyset(&stop);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGINT);
	sigprocmask(SIG_UNBLOCK, &stop, NULL);

	ev_run(m.loop, 0);
	/* Shutting down: a second SIGTERM (a launcher signalling the process
	 * group and the process) must not kill us half-way once the watchers
	 * below restore the default action. */
	sigprocmask(SIG_BLOCK, &stop, NULL);

	cm_core_log_summary(m.core);
	if (opts->monitor) /* connections closed from here on are not failures */
		cm_monitor_detach(opts->monitor);
	while (!cm_list_empty(&m.conns))
		conn_close(cm_list_entry(cm_list_first(&m.conns), struct conn, link),
		           "server shutting down");
	flush_dirty(&m);
	for (unsigned k = 0; k < ls->n; k++)
		ev_io_stop(m.loop, &m.accept_w[k]);
	ev_timer_stop(m.loop, &m.accept_pause);
	ev_timer_stop(m.loop, &m.auth_sweep);
	ev_signal_stop(m.loop, &m.sigterm);
	ev_signal_stop(m.loop, &m.sigint);
	cm_core_free(m.core);
	return cm_listeners_close(ls, 0);
}
