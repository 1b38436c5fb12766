/* --mode mono: one libev loop multiplexes every connection and runs the
 * whole protocol; no other thread touches a connection or the core's state
 * (past --log-mem, the spill store's log-writer thread only stores payloads
 * it was handed), no locks. The acceptor, the read loop and the output
 * drain are every engine's (engine_io.c); here the acceptor hands a new
 * socket to the same loop, the read loop feeds the core directly, and the
 * output of a callback is drained at its end, with an EV_WRITE watcher
 * armed only while a connection has output the kernel would not take. A
 * client that stops reading only grows its own queue. */
#include "config.h"

#include "core.h"
#include "engine_io.h"
#include "journal.h"
#include "list.h"

#include "log.h"
#include "net.h"

#include <ev.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

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
	struct eng_acceptor acceptor;
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

/* The read loop's input: no locks, and a cut-through read yields only when
 * this callback queued output somewhere. */
static bool feed_core(void *conn, struct cm_session *s, size_t n)
{
	struct conn *c = conn;
	cm_session_input(s, n);
	return c->m->dirty != NULL;
}

static void on_readable(struct ev_loop *loop, ev_io *w, int revents)
{
	struct conn *c = w->data;
	struct mono *m = c->m;
	int err;
	if (eng_read_burst(loop, &c->rw, &c->hold, c->s, feed_core, c, &err) == ENG_READ_CLOSED)
		conn_close(c, err ? strerror(err) : "peer closed");
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

/* Acceptor: a new socket is read by this same loop. */
static bool adopt(void *ctx, int fd, double now)
{
	struct mono *m = ctx;
	struct conn *c = calloc(1, sizeof *c);
	struct cm_session *s = c ? cm_session_new(m->core, c) : NULL;
	if (s == NULL) {
		free(c);
		return false;
	}
	c->m = m;
	c->s = s;
	c->fd = fd;
	c->accepted = now;
	ev_io_init(&c->rw, on_readable, fd, EV_READ);
	ev_io_init(&c->ww, on_writable, fd, EV_WRITE);
	ev_timer_init(&c->linger, on_linger, ENG_CLOSE_LINGER, 0.);
	ev_timer_init(&c->hold, on_hold, CM_HOLD_RETRY, CM_HOLD_RETRY);
	c->rw.data = c->ww.data = c->linger.data = c->hold.data = c;
	cm_list_push_front(&m->conns, &c->link);
	m->nconns++;
	ev_io_start(m->loop, &c->rw);
	return true;
}

/* Acceptor: closes them at once, oldest first (the list is newest
 * first). */
static unsigned drop_unauthenticated(void *ctx, double before, unsigned max, const char *why)
{
	struct mono *m = ctx;
	unsigned n = 0;
	struct conn *c;
	cm_list_for_each_reverse(c, &m->conns, struct conn, link)
	{
		if (n == max)
			break;
		if (cm_session_authenticated(c->s) || (before != 0 && c->accepted > before))
			continue;
		conn_close(c, why);
		n++;
	}
	flush_dirty(m);
	return n;
}

static const struct eng_acceptor_ops mono_acceptor_ops = {
    .adopt = adopt, .drop_unauthenticated = drop_unauthenticated};

int cm_engine_mono(const struct cm_server_opts *opts, const struct cm_listeners *ls)
{
	struct mono m = {0};
	cm_list_init(&m.conns);
	struct cm_core_config cfg = {.max_payload = opts->max_message,
	                             .world_size = opts->world_size,
	                             .log_mem = opts->log_mem / 8,
	                             .mem = opts->mem,
	                             .cut_through_min = opts->cut_through_min,
	                             .standby_addr = opts->standby_addr,
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
	m.acceptor = (struct eng_acceptor){.loop = m.loop,
	                                   .ops = &mono_acceptor_ops,
	                                   .ctx = &m,
	                                   .drops_close_at_once = true,
	                                   .listeners = *ls};
	if (eng_acceptor_run(&m.acceptor) != 0) {
		if (opts->monitor)
			cm_monitor_detach(opts->monitor);
		cm_core_free(m.core);
		return cm_listeners_close(ls, 1);
	}

	cm_core_log_summary(m.core);
	if (opts->monitor) /* connections closed from here on are not failures */
		cm_monitor_detach(opts->monitor);
	while (!cm_list_empty(&m.conns))
		conn_close(cm_list_entry(cm_list_first(&m.conns), struct conn, link),
		           "server shutting down");
	flush_dirty(&m);
	cm_core_free(m.core);
	return cm_listeners_close(ls, 0);
}
