/* The workers' mailboxes, the posting side: the acceptor hands a new
 * connection to its reading worker, and any thread posts a connection to
 * a worker with reader (R_*) or writer (W_*) flags. The worker drains
 * them in its own loop (engine_workers.c), calling the connection's roles
 * (engine_conn.c), which post here in turn: this file sits below both. */
#include "config.h"

#include "engine_threaded.h"

__thread struct worker *eng_current_worker;

void eng_worker_post(struct worker *w, struct conn *c, unsigned rflags, unsigned wflags)
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
	if (eng_current_worker != w)
		ev_async_send(w->loop, &w->async);
}

void eng_worker_adopt(struct worker *w, struct conn *c)
{
	__atomic_add_fetch(&w->load, 1, __ATOMIC_RELAXED);
	pthread_mutex_lock(&w->mu);
	c->new_next = w->new_head;
	w->new_head = c;
	pthread_mutex_unlock(&w->mu);
	ev_async_send(w->loop, &w->async);
}
