/* Internal to the threaded engines (engine_common.c, engine_mailbox.c,
 * engine_conn.c, engine_workers.c): connections, workers and the engine
 * object. The overview of how they work together is at the top of
 * engine_common.c. */
#ifndef CHANMEM_ENGINE_THREADED_H
#define CHANMEM_ENGINE_THREADED_H

#include "engine_common.h"
#include "engine_io.h"
#include "engine_locks.h"
#include "list.h"
#include "vec.h"

#include <ev.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Connections one read burst writes itself, at most (readers_write_produced). */
#define ENG_PRODUCED_MAX 64

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
	ev_timer hold; /* reader's loop: retries a sender held back (cm_session_held) */
	ev_io ww;      /* writer's loop */
	/* Writer thread only; apart from rd_done so that no access of one
	 * thread covers the other's byte. */
	bool wr_done, wr_failed, shut_wr;
	/* Under OUTQ(s): the writer found the socket full (it waits for
	 * EV_WRITE) / closed wfd. A producing thread that writes for this
	 * connection itself (readers_write_produced, engine_conn.c) checks
	 * them. */
	bool out_blocked, wfd_closed;
	/* Mailbox links and flags: guarded by the mutex of the worker. */
	struct conn *new_next, *rq_next, *wq_next;
	unsigned rq_flags, wq_flags;
	struct cm_list reg_link; /* in e->reg, under e->reg_mu */
	/* Accepting thread only: when, for ENG_AUTH_DEADLINE; whether it was
	 * shut down for lacking the secret (its reader then closes it). */
	double accepted;
	bool dropped;
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
	CM_VEC(struct post) batch; /* drain scratch (its thread only) */
	/* Its thread only: inside a read burst of a topology with
	 * readers_write_produced, and the connections of other writers the
	 * burst produced output for, each with a reference (eng_on_wake). */
	bool in_burst;
	unsigned nproduced;
	struct conn *produced[ENG_PRODUCED_MAX];
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
	struct eng_acceptor acceptor;
	pthread_mutex_t reg_mu;
	/* Connections whose socket is open, newest first: both descriptors
	 * stay open while a connection is listed. */
	struct cm_list reg;
	struct worker *workers; /* every worker not yet joined */
};

/* engine_mailbox.c: the worker whose thread this is (NULL in the accepting
 * thread), and posting to a worker's mailboxes. */
extern __thread struct worker *eng_current_worker;
void eng_worker_post(struct worker *w, struct conn *c, unsigned rflags, unsigned wflags);
/* The acceptor hands a new connection to its reading worker. */
void eng_worker_adopt(struct worker *w, struct conn *c);

/* engine_conn.c: the reader and writer roles of a connection. */
void eng_conn_unref(struct conn *c);
void eng_on_wake(void *ctx, struct cm_session *s);
void eng_hook_out_lock(void *ctx, struct cm_session *s);
void eng_hook_out_unlock(void *ctx, struct cm_session *s);
void eng_reader_stop(struct conn *c, const char *why);
void eng_on_readable(struct ev_loop *loop, ev_io *w, int revents);
void eng_on_linger(struct ev_loop *loop, ev_timer *w, int revents);
void eng_on_hold(struct ev_loop *loop, ev_timer *w, int revents);
void eng_writer_flush(struct conn *c);
void eng_on_writable(struct ev_loop *loop, ev_io *w, int revents);
void eng_writer_close(struct conn *c);

/* engine_workers.c: event-loop threads, draining their mailboxes. */
struct worker *eng_worker_start(struct eng *e, bool one_shot);
void eng_reap_workers(struct eng *e);
void eng_stop_workers(struct eng *e);

#endif
