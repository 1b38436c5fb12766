/* Socket I/O every engine does the same way (engine_io.c): one acceptor in
 * the main thread that hands each new socket to the engine, one read loop
 * and one write drain per connection, run by whichever loop owns the
 * connection. An engine only says what adopting, dropping and feeding the
 * core mean for its connections (mono: its own loop, no locks; the
 * threaded engines: a worker's loop, the domain locks). */
#ifndef CHANMEM_ENGINE_IO_H
#define CHANMEM_ENGINE_IO_H

#include "engine.h"

#include <ev.h>
#include <stdbool.h>
#include <stddef.h>

struct cm_session;

#define ENG_READS_PER_EVENT 16 /* full-buffer reads before yielding to other sockets */
#define ENG_CLOSE_LINGER 2.0   /* seconds a refused peer gets to read its ERROR */

/* Peers without the job secret. An accepted connection has ENG_AUTH_DEADLINE
 * seconds to authenticate (a real rank sends HELLO as soon as it connects),
 * checked every ENG_AUTH_SWEEP seconds; at the descriptor limit the oldest
 * unauthenticated connections are dropped to make room, and only when none
 * is left does the engine pause accepting (ENG_ACCEPT_PAUSE). Idle
 * connections from someone without the secret thus cannot keep ranks out. */
#define ENG_AUTH_DEADLINE 5.0
#define ENG_AUTH_SWEEP 1.0
#define ENG_ACCEPT_PAUSE 0.1
/* A condition that repeats (out of descriptors) is logged at most once per
 * this many seconds, with the count of repeats since. */
#define ENG_LOG_EVERY 10.0

struct eng_log_limit {
	double last;         /* when it was last logged, 0 = never */
	unsigned long quiet; /* repeats not logged since */
};

/* ---- the acceptor ---- */

struct eng_acceptor_ops {
	/* Takes a new connection's socket (non-blocking, tuned), accepted at
	 * `now`, and hands it to the loop that will read it. false: no
	 * memory, descriptor or thread for it; the acceptor closes the socket
	 * and pauses. */
	bool (*adopt)(void *ctx, int fd, double now);
	/* Ends up to max connections without the job secret accepted before
	 * `before` (0: any), oldest first, for the reason `why`; returns how
	 * many. */
	unsigned (*drop_unauthenticated)(void *ctx, double before, unsigned max, const char *why);
};

struct eng_acceptor {
	struct ev_loop *loop; /* the main thread's */
	const struct eng_acceptor_ops *ops;
	void *ctx;
	/* true: a dropped connection's socket is closed at once (mono), so
	 * a failed accept is retried right after dropping one; false: its
	 * reader closes it later (another thread), so the acceptor drops a
	 * few and pauses. */
	bool drops_close_at_once;
	struct cm_listeners listeners;
	ev_io accept_w[CM_MAX_LISTENERS]; /* one per listener */
	ev_timer accept_pause;
	ev_timer auth_sweep; /* drops connections past ENG_AUTH_DEADLINE */
	struct eng_log_limit accept_log;
	ev_signal sigterm, sigint;
};

/* Accepts on every listener of a (the caller sets loop, ops, ctx,
 * drops_close_at_once and listeners) and sweeps the unauthenticated
 * connections, in a->loop, until SIGTERM or SIGINT. Returns 0, or 1 if the
 * listeners cannot be made non-blocking. The listeners stay open. */
int eng_acceptor_run(struct eng_acceptor *a);

/* ---- reading and writing a connection ---- */

/* Feeds n bytes that arrived for s into the core (cm_session_input, under
 * whatever locks the engine needs). Returns true if output the read
 * produced waits for another writer: the read loop then yields between the
 * reads of a cut-through payload so that it is forwarded as it arrives. */
typedef bool (*eng_input_fn)(void *conn, struct cm_session *s, size_t n);

enum eng_read_result {
	ENG_READ_WAIT,   /* the socket is drained, or the loop yields: wait for EV_READ */
	ENG_READ_HELD,   /* the core holds this sender back: rw stopped, hold started */
	ENG_READ_CLOSED, /* end of stream (*err 0) or a read error (errno in *err) */
};

/* One read burst of the connection whose socket rw watches (rw->fd): up
 * to ENG_READS_PER_EVENT readv calls where the core says
 * (cm_session_read_iov), each fed to input(conn, s, n). A sender the core
 * holds back for log memory (cm_session_held) stops being read: rw is
 * stopped and the hold timer started (backpressure: its socket fills). */
enum eng_read_result eng_read_burst(struct ev_loop *loop, ev_io *rw, ev_timer *hold,
                                    struct cm_session *s, eng_input_fn input, void *conn, int *err);

enum eng_send_result { ENG_SEND_DRAINED, ENG_SEND_BLOCKED, ENG_SEND_FAILED };
/* Writes the output queue of s to fd without blocking, in sendmsg batches,
 * until the queue is empty (DRAINED), the socket is full (BLOCKED), or a
 * write fails (FAILED, errno in *err). The caller holds OUTQ(s). */
enum eng_send_result eng_send_output(struct cm_session *s, int fd, int *err);

#endif
