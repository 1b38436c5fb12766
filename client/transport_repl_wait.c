/* How a replica of the replication transport waits (transport_repl.c has
 * the overview): the transport's progress hook. A non-master reads lazily,
 * a master whose input can only come from one process sleeps in recvmsg()
 * on that connection, and a master's batch (transport_repl_send.c) bounds
 * every wait. */
#include <config.h>

#include <sys/socket.h>

#include "transport_repl.h"

/* A non-master is off the critical path: nothing its master does waits for
 * it (its sends are backups; a synchronous send completes on the first
 * replica's ack, the destination master's). Woken for every message, it
 * would only take CPU from the masters when replicas share cores. So while
 * messages keep coming it reads lazily: the kernel wakes it once
 * REPL_LAZY_BYTES are queued on a connection (SO_RCVLOWAT) and it sweeps
 * every connection at least every REPL_LAZY_MS, handling what piled up in
 * one go. A sweep that finds nothing turns this off (an idle replica
 * sleeps until the first byte); the next frame turns it on again. The end
 * of a connection wakes it at once either way: a master's death is seen
 * as promptly as before, and a promoted replica reads eagerly. */
#define REPL_LAZY_BYTES (32 * 1024)
#define REPL_LAZY_MS 3
/* A master's sleep on a single source lasts at most this long. */
#define REPL_SLEEP_MS 2

static void set_lowat(struct cm_conn *c, int bytes)
{
	/* Best effort: without it the replica is only woken more often. */
	(void)setsockopt(c->fd, SOL_SOCKET, SO_RCVLOWAT, &bytes, sizeof bytes);
}

static void set_lazy(struct repl *s, int on)
{
	if (s->lazy == on)
		return;
	s->lazy = on;
	s->last_sweep_ms = cm_now_ms();
	for (size_t i = 0; i < s->net.nconns; i++) {
		struct cm_conn *c = s->net.conns[i];
		if (c->accepted && cm_conn_alive(c))
			set_lowat(c, on ? REPL_LAZY_BYTES : 1);
	}
}

/* How long this wait may sleep. */
static int lazy_wait_ms(struct repl *s, int timeout_ms)
{
	if (repl_is_master(s) || s->draining) {
		set_lazy(s, 0);
		return timeout_ms;
	}
	if (s->lazy && (timeout_ms < 0 || timeout_ms > REPL_LAZY_MS))
		return REPL_LAZY_MS;
	return timeout_ms;
}

/* After a wait that started with frames_in == before. */
static void lazy_after_wait(struct repl *s, unsigned long before)
{
	if (repl_is_master(s) || s->draining)
		return;
	if (!s->lazy) {
		if (s->frames_in != before)
			set_lazy(s, 1); /* busy again */
		return;
	}
	long long now = cm_now_ms();
	if (now - s->last_sweep_ms < REPL_LAZY_MS)
		return;
	s->last_sweep_ms = now;
	for (size_t i = 0; i < s->net.nconns; i++) {
		struct cm_conn *c = s->net.conns[i];
		if (c->accepted && cm_conn_alive(c))
			cm_conn_read(c); /* returns what is queued, below the mark too */
	}
	if (s->frames_in == before)
		set_lazy(s, 0); /* idle: sleep until the first byte */
}

void repl_prepare_reads(struct repl *s, struct cm_conn *c)
{
	if (s->lazy)
		set_lowat(c, REPL_LAZY_BYTES);
	/* Bounds a master's sleep in recvmsg() on it (single_source); other
	 * reads never block. */
	cm_conn_limit_wait(c, REPL_SLEEP_MS);
}

/* A master's wait, as the direct transport's: when what it waits for can
 * only come from one process (the one master of another rank connected to
 * us), it sleeps in recvmsg() on that connection instead of epoll_wait()
 * then recvmsg(): one system call per message on the critical path of a
 * ping-pong instead of two. What else can happen meanwhile is not urgent
 * for a master: a non-master's frames (acks, BYE) and death (our writes to
 * it fail); the death of the source's master ends the sleep (its
 * connection closes). Not done while a write waits for room (EPOLLOUT),
 * while collecting cancel votes from our replicas, or with a connection
 * not introduced yet. A new process connecting to us (a rank's first
 * message) waits at most REPL_SLEEP_MS: the sleep is bounded
 * (SO_RCVTIMEO) and an epoll round runs at least every REPL_SLEEP_MS. */
static struct cm_conn *single_source(struct repl *s, int timeout_ms)
{
	if (timeout_ms >= 0 || s->draining || s->hold_matching || s->changed ||
	    !repl_is_master(s) || cm_now_ms() - s->last_poll_ms >= REPL_SLEEP_MS)
		return NULL;
	struct cm_conn *source = NULL;
	for (size_t i = 0; i < s->net.nconns; i++) {
		struct cm_conn *c = s->net.conns[i];
		if (!cm_conn_alive(c) || cm_conn_pending_output(c))
			return NULL;
		if (!c->accepted)
			continue;
		if (c->peer < 0)
			return NULL;
		int rank = c->peer / s->nrep;
		if (rank == s->rank || c->peer % s->nrep != repl_master_of(s, rank))
			continue;
		if (source)
			return NULL;
		source = c;
	}
	return source;
}

/* Master: milliseconds until the batch is due (REPL_BATCH_MS after its
 * oldest message), 0: now, -1: no batch. */
static long long batch_due_ms(const struct repl *s)
{
	if (s->uncommitted == 0)
		return -1;
	long long due = s->uncommitted_since_ms + REPL_BATCH_MS - cm_now_ms();
	return due > 0 ? due : 0;
}

/* May return before timeout_ms with nothing done (callers loop). */
int repl_progress(struct cm_transport *t, int timeout_ms)
{
	struct repl *s = t->state;
	if (s->fatal)
		return -1;
	repl_flush_replicas(s);
	long long due = batch_due_ms(s);
	if (due == 0) {
		repl_flush(s);
		due = -1;
	}
	struct cm_conn *source = single_source(s, timeout_ms);
	if (source && !cm_connset_output_pending(&s->net)) {
		cm_conn_read_wait(source);
		repl_reap(s);
		return s->fatal ? -1 : 0;
	}
	int wait = lazy_wait_ms(s, timeout_ms);
	if (due > 0 && (wait < 0 || wait > due))
		wait = (int)due;
	unsigned long before = s->frames_in;
	if (cm_connset_poll(&s->net, s->rank, wait, repl_accept_all, s) < 0)
		return -1;
	s->last_poll_ms = cm_now_ms();
	lazy_after_wait(s, before);
	repl_reap(s);
	return s->fatal ? -1 : 0;
}
