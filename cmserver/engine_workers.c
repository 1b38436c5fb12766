/* Workers of the threaded engines: an event loop in its own thread with
 * mailboxes other threads post connections to (see engine_common.c). */
#include "config.h"

#include "engine_threaded.h"

#include "log.h"
#include "net.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

static void batch_push(struct worker *w, struct conn *c, unsigned flags)
{
	struct post *p = cm_vec_push(&w->batch);
	if (p == NULL)
		cm_die(1, "out of memory in a worker mailbox");
	*p = (struct post){c, flags};
}

/* The mailboxes in one go; new posts made while processing are taken by the
 * next round. */
static bool worker_drain_once(struct worker *w)
{
	struct conn *fresh;
	w->batch.n = 0;
	pthread_mutex_lock(&w->mu);
	fresh = w->new_head;
	w->new_head = NULL;
	for (struct conn *c = w->rq_head; c; c = c->rq_next) {
		batch_push(w, c, c->rq_flags);
		c->rq_flags = 0;
	}
	w->rq_head = NULL;
	size_t nr = w->batch.n; /* reader posts first, then writer posts */
	for (struct conn *c = w->wq_head; c; c = c->wq_next) {
		batch_push(w, c, c->wq_flags);
		c->wq_flags = 0;
	}
	w->wq_head = NULL;
	pthread_mutex_unlock(&w->mu);
	size_t n = w->batch.n;
	bool any = fresh != NULL || n > 0;
	while (fresh) {
		struct conn *c = fresh;
		fresh = c->new_next;
		w->live++;
		ev_io_start(w->loop, &c->rw);
	}
	for (size_t i = 0; i < n; i++) {
		struct conn *c = w->batch.items[i].c;
		unsigned f = w->batch.items[i].flags;
		if (i < nr) {
			if (f & R_FINAL) {
				close(c->fd);
				eng_conn_unref(c); /* the reader's reference */
			}
			if ((f & R_WRITE_FAILED) && !c->rd_done)
				eng_reader_stop(c, "write failed");
			else if ((f & R_LINGER) && !c->rd_done)
				ev_timer_start(w->loop, &c->linger);
		} else {
			if (f & W_FLUSH)
				eng_writer_flush(c);
			if (f & W_CLOSE)
				eng_writer_close(c);
		}
		eng_conn_unref(c); /* the mailbox's reference */
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
	eng_current_worker = w;
	ev_run(w->loop, 0);
	if (w->one_shot) {
		pthread_mutex_lock(&w->e->reg_mu);
		w->finished = true;
		pthread_mutex_unlock(&w->e->reg_mu);
	}
	return NULL;
}

struct worker *eng_worker_start(struct eng *e, bool one_shot)
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
	/* ev_async_start cannot fail: libev aborts the process when it finds
	 * no descriptor for its wake-up pipe. At the descriptor limit a new
	 * worker must be refused instead, so make sure one is free first (the
	 * accepting thread is the only one that opens descriptors here). */
	int probe = eventfd(0, EFD_CLOEXEC);
	if (probe < 0) {
		ev_loop_destroy(w->loop);
		free(w);
		return NULL;
	}
	close(probe);
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
			eng_conn_unref(c); /* the reader's reference */
		}
		c->rq_flags = 0;
		eng_conn_unref(c);
	}
	for (struct conn *c = w->wq_head, *n; c; c = n) {
		n = c->wq_next;
		c->wq_flags = 0;
		eng_conn_unref(c);
	}
	ev_async_stop(w->loop, &w->async);
	ev_loop_destroy(w->loop);
	pthread_mutex_destroy(&w->mu);
	cm_vec_free(&w->batch);
	free(w);
}

/* Joins the one-shot workers whose thread has returned. */
void eng_reap_workers(struct eng *e)
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
void eng_stop_workers(struct eng *e)
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
