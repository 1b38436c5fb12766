/* The reader and writer roles of a connection of the threaded engines
 * (see engine_common.c for the overview). */
#include "config.h"

#include "engine_threaded.h"

#include "log.h"
#include "net.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

void eng_conn_unref(struct conn *c)
{
	if (__atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL) != 0)
		return;
	cm_session_release(c->s);
	pthread_mutex_destroy(&c->in_mu);
	free(c);
}

/* A reader whose topology says readers_write_produced (thread-per-client)
 * collects, during one read burst (eng_on_readable, eng_on_hold), the
 * connections of other writers it produced output for, each with a
 * reference (worker->produced), and writes them itself at the end of the
 * burst, under OUTQ only, instead of waking their writers. */
void eng_on_wake(void *ctx, struct cm_session *s)
{
	struct conn *c = cm_session_engine_data(s);
	struct worker *me = eng_current_worker;
	if (me && me->in_burst && c->wr != me && me->nproduced < ENG_PRODUCED_MAX) {
		__atomic_add_fetch(&c->refs, 1, __ATOMIC_RELAXED);
		me->produced[me->nproduced++] = c;
		return;
	}
	eng_worker_post(c->wr, c, 0, W_FLUSH);
}

/* Writes c's queue from the producing thread, or leaves it to c's own
 * thread. That thread closes wfd, and may then end and be freed, only after
 * it set wfd_closed under OUTQ: so the post, too, is made under OUTQ. */
static void write_produced(struct conn *c)
{
	struct eng *e = c->e;
	int err = 0;
	eng_out_lock(&e->locks, c->s);
	if (!c->wfd_closed) {
		bool done = !c->out_blocked && !cm_session_closing(c->s) &&
		            eng_send_output(c->s, c->wfd, &err) == ENG_SEND_DRAINED;
		if (!done)
			eng_worker_post(c->wr, c, 0, W_FLUSH);
	}
	eng_out_unlock(&e->locks, c->s);
}

static void burst_begin(struct worker *wk)
{
	wk->in_burst = wk->e->topo.readers_write_produced;
}

static void burst_end(struct worker *wk)
{
	wk->in_burst = false;
	for (unsigned i = 0; i < wk->nproduced; i++) {
		write_produced(wk->produced[i]);
		eng_conn_unref(wk->produced[i]);
	}
	wk->nproduced = 0;
}

void eng_hook_out_lock(void *ctx, struct cm_session *s)
{
	eng_out_lock(&((struct eng *)ctx)->locks, s);
}

void eng_hook_out_unlock(void *ctx, struct cm_session *s)
{
	eng_out_unlock(&((struct eng *)ctx)->locks, s);
}

/* Reader role: stop reading and hand the close to the writer. With a
 * separate writer (its own dup of the socket) the reader closes its
 * descriptor last, on R_FINAL: that close ends the socket, so the kernel
 * drops it from every epoll set at once and no loop gets events for a
 * descriptor number another thread may already have reused. */
void eng_reader_stop(struct conn *c, const char *why)
{
	if (c->rd_done)
		return;
	c->rd_done = true;
	cm_debug("connection fd %d: stop reading (%s)", c->fd, why);
	ev_io_stop(c->rd->loop, &c->rw);
	ev_timer_stop(c->rd->loop, &c->linger);
	ev_timer_stop(c->rd->loop, &c->hold);
	c->rd->live--;
	eng_worker_post(c->wr, c, 0, W_CLOSE);
	if (c->wfd == c->fd)
		eng_conn_unref(c); /* the reader's reference; else dropped on R_FINAL */
}

/* The read loop's input: the frames dispatched under their domain locks,
 * with in_mu held (error_settled). Whatever a read produced may wait for
 * another thread, so a cut-through payload's reads always yield. */
static bool feed_core(void *conn, struct cm_session *s, size_t n)
{
	struct conn *c = conn;
	pthread_mutex_lock(&c->in_mu);
	eng_input(&c->e->locks, s, n);
	pthread_mutex_unlock(&c->in_mu);
	return true;
}

void eng_on_readable(struct ev_loop *loop, ev_io *w, int revents)
{
	struct conn *c = w->data;
	struct worker *wk = c->rd;
	int err;
	burst_begin(wk);
	if (!c->rd_done &&
	    eng_read_burst(loop, &c->rw, &c->hold, c->s, feed_core, c, &err) == ENG_READ_CLOSED)
		eng_reader_stop(c, err ? strerror(err) : "peer closed");
	burst_end(wk);
	ev_invoke(wk->loop, &wk->async, EV_ASYNC); /* drain what this produced */
}

/* A sender held back for log memory: try its staged MSG again, and read on
 * once the log took it. */
void eng_on_hold(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct conn *c = w->data;
	struct worker *wk = c->rd;
	if (c->rd_done)
		return;
	burst_begin(wk);
	/* Spilling the logs does nothing for a peer that does not read. */
	if (!cm_session_held_output(c->s))
		eng_relieve(&c->e->locks, c->e->core);
	pthread_mutex_lock(&c->in_mu);
	eng_input(&c->e->locks, c->s, 0);
	pthread_mutex_unlock(&c->in_mu);
	if (!cm_session_held(c->s)) {
		ev_timer_stop(loop, &c->hold);
		ev_io_start(loop, &c->rw);
	}
	burst_end(wk);
	ev_invoke(wk->loop, &wk->async, EV_ASYNC);
}

void eng_on_linger(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct conn *c = w->data;
	eng_reader_stop(c, "closed after refusal");
	ev_invoke(c->rd->loop, &c->rd->async, EV_ASYNC);
}

/* The core marks a session closing just before it queues the ERROR that
 * says why, so "closing and nothing left to write" may be seen in between.
 * Whoever refuses a session is its reader (inside eng_input, under in_mu)
 * or a newer incarnation's HELLO (under GLOBAL): once both are free the
 * ERROR is queued. Returns true if the queue is still empty then. */
static bool error_settled(struct conn *c)
{
	struct eng *e = c->e;
	pthread_mutex_lock(&e->locks.global);
	pthread_mutex_unlock(&e->locks.global);
	pthread_mutex_lock(&c->in_mu);
	pthread_mutex_unlock(&c->in_mu);
	eng_out_lock(&e->locks, c->s);
	bool empty = cm_session_out_pending(c->s) == 0;
	eng_out_unlock(&e->locks, c->s);
	return empty; /* else the ERROR's wake has posted a flush */
}

/* Writer role: drain the output queue without ever blocking. */
void eng_writer_flush(struct conn *c)
{
	struct eng *e = c->e;
	int err = 0;
	if (c->wr_done || c->wr_failed)
		return;
	/* OUTQ(s) is held across the non-blocking sendmsg only: the iovecs
	 * point into the queue, which producers may grow meanwhile. */
	eng_out_lock(&e->locks, c->s);
	enum eng_send_result sent = eng_send_output(c->s, c->wfd, &err);
	bool blocked = sent == ENG_SEND_BLOCKED, failed = sent == ENG_SEND_FAILED;
	bool drained = cm_session_out_pending(c->s) == 0;
	c->out_blocked = blocked;
	eng_out_unlock(&e->locks, c->s);

	if (failed) {
		cm_debug("connection fd %d: write: %s", c->wfd, strerror(err));
		c->wr_failed = true;
		ev_io_stop(c->wr->loop, &c->ww);
		eng_worker_post(c->rd, c, R_WRITE_FAILED, 0);
		return;
	}
	if (blocked)
		ev_io_start(c->wr->loop, &c->ww);
	else
		ev_io_stop(c->wr->loop, &c->ww);
	if (drained && !c->shut_wr && cm_session_closing(c->s) && error_settled(c)) {
		/* Refused or replaced: the ERROR is out; the reader closes once
		 * the peer does, or after the linger time. */
		shutdown(c->wfd, SHUT_WR);
		c->shut_wr = true;
		eng_worker_post(c->rd, c, R_LINGER, 0);
	}
}

void eng_on_writable(struct ev_loop *loop, ev_io *w, int revents)
{
	struct conn *c = w->data;
	eng_writer_flush(c);
	ev_invoke(c->wr->loop, &c->wr->async, EV_ASYNC);
}

/* Writer role, after the reader stopped: the socket and session end here. */
void eng_writer_close(struct conn *c)
{
	struct eng *e = c->e;
	if (c->wr_done)
		return;
	c->wr_done = true;
	ev_io_stop(c->wr->loop, &c->ww);
	bool orderly;
	int rank = eng_session_closed(&e->locks, c->s, &orderly);
	if (rank >= 0 && !orderly)
		cm_info("rank %d: connection lost without BYE", rank);
	else
		cm_debug("connection fd %d closed", c->wfd);
	/* No producing thread writes to the number once it is closed (and
	 * perhaps reused). */
	/* Unlisted before the close: the accepting thread may shut down a
	 * listed connection's socket, which must still be this one. */
	pthread_mutex_lock(&e->reg_mu);
	cm_list_remove(&c->reg_link);
	pthread_mutex_unlock(&e->reg_mu);
	eng_out_lock(&e->locks, c->s);
	c->wfd_closed = true;
	eng_out_unlock(&e->locks, c->s);
	close(c->wfd);
	if (c->wfd != c->fd)
		eng_worker_post(c->rd, c, R_FINAL, 0);
	__atomic_sub_fetch(&c->rd->load, 1, __ATOMIC_RELAXED);
	eng_conn_unref(c); /* the writer's reference */
}
