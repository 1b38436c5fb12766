/* The threaded engines: one accepting thread (the main thread, which also
 * handles SIGTERM/SIGINT) and workers, each a libev loop in its own thread.
 *
 * A connection has a reading worker and a writing worker (the same one
 * unless the topology has a sender thread). The reader reads into the core
 * and dispatches frames under the domain locks (engine_locks.c). Any thread
 * that queues output for a connection (the core's wake hook) posts it to its
 * writer's mailbox and, if that writer is another thread, wakes it with
 * ev_async. The writer drains the queue with non-blocking sendmsg batches
 * under OUTQ(s) and arms an EV_WRITE watcher when the kernel is full, so a
 * client that stops reading only grows its own queue: no thread ever blocks
 * on a socket while holding a lock.
 *
 * Closing: only the writer closes the socket. The reader stops first and
 * posts CLOSE to the writer; a writer that fails posts WRITE_FAILED to the
 * reader. Mailbox entries and both roles hold references on the connection,
 * so it is freed by whoever drops the last one. */
#include "config.h"

#include "engine_common.h"
#include "engine_locks.h"

#include "log.h"
#include "net.h"

#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define READS_PER_EVENT 16 /* full-buffer reads before yielding to other sockets */
#define CLOSE_LINGER 2.0   /* seconds a refused peer gets to read its ERROR */
#define ACCEPT_PAUSE 0.1   /* seconds without accepting after EMFILE and the like */

/* Mailbox flags. */
enum { R_WRITE_FAILED = 1, R_LINGER = 2, R_FINAL = 4, W_FLUSH = 1, W_CLOSE = 2 };

struct eng;
struct worker;

struct conn {
	struct eng *e;
	struct worker *rd, *wr;
	struct cm_session *s;
	/* The reader's and the writer's descriptors of the socket: a dup when
	 * they are different threads, so each closes its own right after
	 * stopping its watcher in its own loop (libev may still touch an fd it
	 * has stopped watching, until its next iteration). */
	int fd, wfd;
	uint32_t refs; /* atomic */
	ev_io rw;      /* reader's loop */
	bool rd_done;  /* reader thread only */
	/* Held by the reader while the core processes its input: see
	 * error_settled. */
	pthread_mutex_t in_mu;
	ev_timer linger;
	ev_io ww; /* writer's loop */
	/* Writer thread only; apart from rd_done so that no access of one
	 * thread covers the other's byte. */
	bool wr_done, wr_failed, shut_wr;
	/* Mailbox links and flags: guarded by the mutex of the worker. */
	struct conn *new_next, *rq_next, *wq_next;
	unsigned rq_flags, wq_flags;
	struct conn *reg_prev, *reg_next; /* e->reg, under e->reg_mu */
};

struct post {
	struct conn *c;
	unsigned flags;
};

struct worker {
	struct eng *e;
	struct ev_loop *loop;
	pthread_t thread;
	ev_async async;
	bool one_shot;      /* thread-per-client: ends with its connection */
	unsigned live;      /* connections it reads (its thread only) */
	unsigned load;      /* atomic: connections handed to it */
	bool stop;          /* atomic */
	pthread_mutex_t mu; /* the three mailboxes */
	struct conn *new_head, *rq_head, *wq_head;
	struct post *batch; /* drain scratch (its thread only) */
	size_t batch_cap;
	struct worker *next; /* e->workers, under e->reg_mu */
	bool finished;       /* one_shot: the thread returned (under e->reg_mu) */
};

struct eng {
	struct eng_locks locks;
	struct cm_core *core;
	struct eng_topology topo;
	struct worker **readers; /* topo.readers of them */
	struct worker *sender;
	struct ev_loop *loop; /* the accepting thread's */
	int listen_fd;
	ev_io accept_w;
	ev_timer accept_pause;
	ev_signal sigterm, sigint;
	pthread_mutex_t reg_mu;
	struct conn *reg;       /* connections whose socket is open */
	struct worker *workers; /* every worker not yet joined */
};

static void worker_post(struct worker *w, struct conn *c, unsigned rflags, unsigned wflags);
/* The worker whose thread this is (NULL in the accepting thread). */
static __thread struct worker *current_worker;

/* ---- connections ---- */

static void conn_unref(struct conn *c)
{
	if (__atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL) != 0)
		return;
	cm_session_release(c->s);
	pthread_mutex_destroy(&c->in_mu);
	free(c);
}

static void on_wake(void *ctx, struct cm_session *s)
{
	struct conn *c = cm_session_engine_data(s);
	worker_post(c->wr, c, 0, W_FLUSH);
}

static void hook_out_lock(void *ctx, struct cm_session *s)
{
	eng_out_lock(&((struct eng *)ctx)->locks, s);
}

static void hook_out_unlock(void *ctx, struct cm_session *s)
{
	eng_out_unlock(&((struct eng *)ctx)->locks, s);
}

/* Reader role: stop reading and hand the close to the writer. With a
 * separate writer (its own dup of the socket) the reader closes its
 * descriptor last, on R_FINAL: that close ends the socket, so the kernel
 * drops it from every epoll set at once and no loop gets events for a
 * descriptor number another thread may already have reused. */
static void reader_stop(struct conn *c, const char *why)
{
	if (c->rd_done)
		return;
	c->rd_done = true;
	cm_debug("connection fd %d: stop reading (%s)", c->fd, why);
	ev_io_stop(c->rd->loop, &c->rw);
	ev_timer_stop(c->rd->loop, &c->linger);
	c->rd->live--;
	worker_post(c->wr, c, 0, W_CLOSE);
	if (c->wfd == c->fd)
		conn_unref(c); /* the reader's reference; else dropped on R_FINAL */
}

static void on_readable(struct ev_loop *loop, ev_io *w, int revents)
{
	struct conn *c = w->data;
	struct worker *wk = c->rd;
	for (int i = 0; i < READS_PER_EVENT && !c->rd_done; i++) {
		struct iovec iov[2];
		int n = cm_session_read_iov(c->s, iov);
		size_t want = iov[0].iov_len + (n > 1 ? iov[1].iov_len : 0);
		ssize_t r = readv(c->fd, iov, n);
		if (r > 0) {
			pthread_mutex_lock(&c->in_mu);
			eng_input(&c->e->locks, c->s, (size_t)r);
			pthread_mutex_unlock(&c->in_mu);
			if ((size_t)r < want)
				break;
			continue;
		}
		if (r == 0) {
			reader_stop(c, "peer closed");
			break;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			reader_stop(c, strerror(errno));
		break;
	}
	ev_invoke(wk->loop, &wk->async, EV_ASYNC); /* drain what this produced */
}

static void on_linger(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct conn *c = w->data;
	reader_stop(c, "closed after refusal");
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
static void writer_flush(struct conn *c)
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
	eng_out_unlock(&e->locks, c->s);

	if (failed) {
		cm_debug("connection fd %d: write: %s", c->wfd, strerror(err));
		c->wr_failed = true;
		ev_io_stop(c->wr->loop, &c->ww);
		worker_post(c->rd, c, R_WRITE_FAILED, 0);
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
		worker_post(c->rd, c, R_LINGER, 0);
	}
}

static void on_writable(struct ev_loop *loop, ev_io *w, int revents)
{
	struct conn *c = w->data;
	writer_flush(c);
	ev_invoke(c->wr->loop, &c->wr->async, EV_ASYNC);
}

/* Writer role, after the reader stopped: the socket and session end here. */
static void writer_close(struct conn *c)
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
	close(c->wfd);
	if (c->wfd != c->fd)
		worker_post(c->rd, c, R_FINAL, 0);
	pthread_mutex_lock(&e->reg_mu);
	if (c->reg_prev)
		c->reg_prev->reg_next = c->reg_next;
	else
		e->reg = c->reg_next;
	if (c->reg_next)
		c->reg_next->reg_prev = c->reg_prev;
	pthread_mutex_unlock(&e->reg_mu);
	__atomic_sub_fetch(&c->rd->load, 1, __ATOMIC_RELAXED);
	conn_unref(c); /* the writer's reference */
}

/* ---- workers ---- */

static void worker_post(struct worker *w, struct conn *c, unsigned rflags, unsigned wflags)
{
	pthread_mutex_lock(&w->mu);
	if (rflags) {
		if (c->rq_flags == 0) {
			__atomic_add_fetch(&c->refs, 1, __ATOMIC_RELAXED);
			c->rq_next = w->rq_head;
			w->rq_head = c;
		}
		c->rq_flags |= rflags;
	}
	if (wflags) {
		if (c->wq_flags == 0) {
			__atomic_add_fetch(&c->refs, 1, __ATOMIC_RELAXED);
			c->wq_next = w->wq_head;
			w->wq_head = c;
		}
		c->wq_flags |= wflags;
	}
	pthread_mutex_unlock(&w->mu);
	/* The worker drains its own mailbox at the end of every callback. */
	if (current_worker != w)
		ev_async_send(w->loop, &w->async);
}

static void batch_push(struct worker *w, size_t *n, struct conn *c, unsigned flags)
{
	if (*n == w->batch_cap) {
		size_t cap = w->batch_cap ? 2 * w->batch_cap : 64;
		struct post *b = realloc(w->batch, cap * sizeof *b);
		if (b == NULL)
			cm_die(1, "out of memory in a worker mailbox");
		w->batch = b;
		w->batch_cap = cap;
	}
	w->batch[(*n)++] = (struct post){c, flags};
}

/* The mailboxes in one go; new posts made while processing are taken by the
 * next round. */
static bool worker_drain_once(struct worker *w)
{
	size_t n = 0;
	struct conn *fresh;
	pthread_mutex_lock(&w->mu);
	fresh = w->new_head;
	w->new_head = NULL;
	for (struct conn *c = w->rq_head; c; c = c->rq_next) {
		batch_push(w, &n, c, c->rq_flags);
		c->rq_flags = 0;
	}
	w->rq_head = NULL;
	size_t nr = n; /* reader posts first, then writer posts */
	for (struct conn *c = w->wq_head; c; c = c->wq_next) {
		batch_push(w, &n, c, c->wq_flags);
		c->wq_flags = 0;
	}
	w->wq_head = NULL;
	pthread_mutex_unlock(&w->mu);
	bool any = fresh != NULL || n > 0;
	while (fresh) {
		struct conn *c = fresh;
		fresh = c->new_next;
		w->live++;
		ev_io_start(w->loop, &c->rw);
	}
	for (size_t i = 0; i < n; i++) {
		struct conn *c = w->batch[i].c;
		unsigned f = w->batch[i].flags;
		if (i < nr) {
			if (f & R_FINAL) {
				close(c->fd);
				conn_unref(c); /* the reader's reference */
			}
			if ((f & R_WRITE_FAILED) && !c->rd_done)
				reader_stop(c, "write failed");
			else if ((f & R_LINGER) && !c->rd_done)
				ev_timer_start(w->loop, &c->linger);
		} else {
			if (f & W_FLUSH)
				writer_flush(c);
			if (f & W_CLOSE)
				writer_close(c);
		}
		conn_unref(c); /* the mailbox's reference */
	}
	return any;
}

static void on_async(struct ev_loop *loop, ev_async *a, int revents)
{
	struct worker *w = a->data;
	while (worker_drain_once(w))
		;
	if (__atomic_load_n(&w->stop, __ATOMIC_ACQUIRE) || (w->one_shot && w->live == 0))
		ev_break(loop, EVBREAK_ALL);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	current_worker = w;
	ev_run(w->loop, 0);
	if (w->one_shot) {
		pthread_mutex_lock(&w->e->reg_mu);
		w->finished = true;
		pthread_mutex_unlock(&w->e->reg_mu);
	}
	return NULL;
}

static struct worker *worker_start(struct eng *e, bool one_shot)
{
	struct worker *w = calloc(1, sizeof *w);
	if (w == NULL)
		return NULL;
	w->e = e;
	w->one_shot = one_shot;
	w->loop = ev_loop_new(EVFLAG_AUTO | EVFLAG_NOSIGMASK);
	if (w->loop == NULL) {
		free(w);
		return NULL;
	}
	pthread_mutex_init(&w->mu, NULL);
	ev_async_init(&w->async, on_async);
	w->async.data = w;
	ev_async_start(w->loop, &w->async);
	/* Workers never take signals: the accepting thread does. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	int rc = pthread_create(&w->thread, NULL, worker_main, w);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		cm_err("cannot start a thread: %s", strerror(rc));
		ev_loop_destroy(w->loop);
		pthread_mutex_destroy(&w->mu);
		free(w);
		return NULL;
	}
	pthread_mutex_lock(&e->reg_mu);
	w->next = e->workers;
	e->workers = w;
	pthread_mutex_unlock(&e->reg_mu);
	return w;
}

/* After join: unreferences what is left in the mailboxes. */
static void worker_free(struct worker *w)
{
	for (struct conn *c = w->rq_head, *n; c; c = n) {
		n = c->rq_next;
		if (c->rq_flags & R_FINAL) {
			close(c->fd);
			conn_unref(c); /* the reader's reference */
		}
		c->rq_flags = 0;
		conn_unref(c);
	}
	for (struct conn *c = w->wq_head, *n; c; c = n) {
		n = c->wq_next;
		c->wq_flags = 0;
		conn_unref(c);
	}
	ev_async_stop(w->loop, &w->async);
	ev_loop_destroy(w->loop);
	pthread_mutex_destroy(&w->mu);
	free(w->batch);
	free(w);
}

/* Joins the one-shot workers whose thread has returned. */
static void reap_workers(struct eng *e)
{
	for (;;) {
		struct worker *found = NULL;
		pthread_mutex_lock(&e->reg_mu);
		for (struct worker **p = &e->workers; *p; p = &(*p)->next)
			if ((*p)->finished) {
				found = *p;
				*p = found->next;
				break;
			}
		pthread_mutex_unlock(&e->reg_mu);
		if (found == NULL)
			return;
		pthread_join(found->thread, NULL);
		worker_free(found);
	}
}

/* Stops and joins every worker, then frees them: a running worker may still
 * post to (and wake) one that has stopped, so no loop is destroyed before
 * every thread is gone. */
static void stop_workers(struct eng *e)
{
	pthread_mutex_lock(&e->reg_mu);
	struct worker *all = e->workers;
	e->workers = NULL;
	pthread_mutex_unlock(&e->reg_mu);
	for (struct worker *w = all; w; w = w->next) {
		__atomic_store_n(&w->stop, true, __ATOMIC_RELEASE);
		ev_async_send(w->loop, &w->async);
	}
	for (struct worker *w = all; w; w = w->next)
		pthread_join(w->thread, NULL);
	while (all) {
		struct worker *w = all;
		all = w->next;
		worker_free(w);
	}
}

/* ---- accepting thread ---- */

static struct worker *pick_reader(struct eng *e)
{
	if (e->topo.readers == 0)
		return worker_start(e, true);
	struct worker *best = e->readers[0];
	for (unsigned i = 1; i < e->topo.readers; i++)
		if (__atomic_load_n(&e->readers[i]->load, __ATOMIC_RELAXED) <
		    __atomic_load_n(&best->load, __ATOMIC_RELAXED))
			best = e->readers[i];
	return best;
}

static void on_accept(struct ev_loop *loop, ev_io *aw, int revents)
{
	struct eng *e = aw->data;
	if (e->topo.readers == 0)
		reap_workers(e);
	for (int i = 0; i < 64; i++) {
		int fd = accept4(e->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			cm_err("accept: %s; pausing", strerror(errno));
			ev_io_stop(loop, &e->accept_w);
			ev_timer_start(loop, &e->accept_pause);
			return;
		}
		cm_set_nodelay(fd);
		struct conn *c = calloc(1, sizeof *c);
		int wfd = e->topo.sender_thread ? fcntl(fd, F_DUPFD_CLOEXEC, 0) : fd;
		struct worker *rd = c && wfd >= 0 ? pick_reader(e) : NULL;
		struct cm_session *s = rd ? eng_session_new(&e->locks, e->core, c) : NULL;
		if (s == NULL) {
			if (wfd >= 0 && wfd != fd)
				close(wfd);
			cm_err("out of memory or threads for a new connection; refusing it");
			if (rd && rd->one_shot) { /* nothing was handed to it: let it end */
				__atomic_store_n(&rd->stop, true, __ATOMIC_RELEASE);
				ev_async_send(rd->loop, &rd->async);
			}
			free(c);
			close(fd);
			continue;
		}
		c->e = e;
		c->s = s;
		pthread_mutex_init(&c->in_mu, NULL);
		c->fd = fd;
		c->wfd = wfd;
		c->rd = rd;
		c->wr = e->topo.sender_thread ? e->sender : rd;
		c->refs = 2; /* reader + writer roles */
		ev_io_init(&c->rw, on_readable, fd, EV_READ);
		ev_io_init(&c->ww, on_writable, wfd, EV_WRITE);
		ev_timer_init(&c->linger, on_linger, CLOSE_LINGER, 0.);
		c->rw.data = c->ww.data = c->linger.data = c;
		__atomic_add_fetch(&rd->load, 1, __ATOMIC_RELAXED);
		pthread_mutex_lock(&e->reg_mu);
		c->reg_next = e->reg;
		if (e->reg)
			e->reg->reg_prev = c;
		e->reg = c;
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
	ev_io_start(loop, &e->accept_w);
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
	stop_workers(e);
	while (e->reg) {
		struct conn *c = e->reg;
		e->reg = c->reg_next;
		if (c->fd != c->wfd)
			close(c->fd);
		close(c->wfd);
		cm_session_closed(c->s);
		cm_session_release(c->s);
		pthread_mutex_destroy(&c->in_mu);
		free(c);
	}
}

int cm_engine_threaded(const struct cm_server_opts *opts, int listen_fd,
                       const struct eng_topology *topo)
{
	struct eng *e = calloc(1, sizeof *e);
	if (e == NULL) {
		cm_err("out of memory");
		return 1;
	}
	e->topo = *topo;
	e->listen_fd = listen_fd;
	eng_locks_init(&e->locks);
	pthread_mutex_init(&e->reg_mu, NULL);
	struct cm_core_config cfg = {.max_payload = opts->max_message,
	                             .log_mem = opts->log_mem,
	                             .hooks = {.ctx = e,
	                                       .wake = on_wake,
	                                       .out_lock = hook_out_lock,
	                                       .out_unlock = hook_out_unlock}};
	memcpy(cfg.secret, opts->secret, CM_SECRET_LEN);
	if (opts->monitor) {
		cfg.rank_lost = cm_monitor_rank_lost;
		cfg.rank_lost_ctx = opts->monitor;
	}
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
	if (cm_set_nonblock(listen_fd, 1) < 0) {
		cm_err("listening socket: %s", strerror(errno));
		goto out;
	}
	for (unsigned i = 0; i < topo->readers; i++)
		if ((e->readers[i] = worker_start(e, false)) == NULL)
			goto out;
	if (topo->sender_thread && (e->sender = worker_start(e, false)) == NULL)
		goto out;

	ev_io_init(&e->accept_w, on_accept, listen_fd, EV_READ);
	ev_timer_init(&e->accept_pause, on_accept_pause, ACCEPT_PAUSE, 0.);
	ev_signal_init(&e->sigterm, on_signal, SIGTERM);
	ev_signal_init(&e->sigint, on_signal, SIGINT);
	e->accept_w.data = e->accept_pause.data = e;
	ev_io_start(e->loop, &e->accept_w);
	ev_signal_start(e->loop, &e->sigterm);
	ev_signal_start(e->loop, &e->sigint);
	sigset_t stop;
	sigemptyset(&stop);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGINT);
	pthread_sigmask(SIG_UNBLOCK, &stop, NULL);
	ev_run(e->loop, 0);
	pthread_sigmask(SIG_BLOCK, &stop, NULL);
	ev_io_stop(e->loop, &e->accept_w);
	ev_timer_stop(e->loop, &e->accept_pause);
	ev_signal_stop(e->loop, &e->sigterm);
	ev_signal_stop(e->loop, &e->sigint);
	status = 0;
out:
	if (opts->monitor) /* connections closed from here on are not failures */
		cm_monitor_detach(opts->monitor);
	shutdown_all(e);
	if (e->core) {
		struct cm_core_stats st;
		cm_core_stats(e->core, &st);
		if (status == 0)
			cm_info("%llu messages logged (%llu bytes), %llu delivered, %llu re-sends "
			        "dropped, %llu frames refused",
			        (unsigned long long)st.msgs_logged,
			        (unsigned long long)st.bytes_logged,
			        (unsigned long long)st.msgs_delivered,
			        (unsigned long long)st.msgs_duplicate,
			        (unsigned long long)st.frames_refused);
		cm_core_free(e->core);
	}
	close(listen_fd);
	free(e->readers);
	pthread_mutex_destroy(&e->reg_mu);
	eng_locks_destroy(&e->locks);
	free(e);
	return status;
}
