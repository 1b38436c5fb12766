/* How a replica of the replication transport waits (transport_repl.c has
 * the overview): the transport's progress hook. A non-master reads lazily,
 * a master whose input can only come from one process sleeps in recvmsg()
 * on that connection, and a master's batch (transport_repl_send.c) bounds
 * every wait. What a wait finds about the peers is handled here too: new
 * connections accepted, ended ones reaped (their far end is dead), and,
 * when the master was among them, this replica's promotion. */
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

/* ---- peers that went: their connections reaped, a new master ---- */

static void accept_all(void *owner)
{
	struct repl *s = owner;
	cm_connset_accept(&s->net, s->listen_fd, s->rank, s->ops, s, &s->lim, 1);
}

/* Process p's connection ended: read everything p wrote on its other
 * connections first. Its commits travel on the connection it opened to
 * us; acting on its death before them would re-send committed messages. */
static void drain_peer(struct repl *s, int p)
{
	accept_all(s);
	for (size_t i = 0; i < s->net.nconns; i++) {
		struct cm_conn *c = s->net.conns[i];
		if (cm_conn_alive(c) && (c->peer == p || c->peer < 0))
			cm_conn_read(c);
	}
}

void repl_conn_free(struct cm_conn *c)
{
	if (c->in_body && c->in_sink.kind == 1)
		repl_msg_free(c->in_sink.cookie);
	cm_conn_free(c);
}

/* Frees connections that ended; their far end is dead (or finished). */
static void reap(struct repl *s)
{
	for (size_t i = 0; i < s->net.nconns; i++) {
		struct cm_conn *c = s->net.conns[i];
		if (!cm_conn_alive(c) && c->peer >= 0 && !s->dead[c->peer])
			drain_peer(s, c->peer);
	}
	size_t keep = 0;
	for (size_t i = 0; i < s->net.nconns; i++) {
		struct cm_conn *c = s->net.conns[i];
		if (cm_conn_alive(c)) {
			s->net.conns[keep++] = c;
			continue;
		}
		int p = c->peer;
		if (p >= 0) {
			if (!s->dead[p] && !s->draining)
				s->changed = 1;
			s->dead[p] = 1;
			if (s->out[p] == c)
				s->out[p] = NULL;
		}
		repl_settle_conn(s, c);
		repl_conn_free(c);
	}
	s->net.nconns = keep;
	if (s->changed)
		repl_flush(s); /* a promoted replica wants what we hold for it */
	if (!s->draining)
		repl_check_master(s);
}

/* A replica that has just become master (repl_elect) re-sends what the
 * old master may not have (repl_promote); then its receives still waiting
 * for a choice are its own to match. */
void repl_check_master(struct repl *s)
{
	if (!repl_elect(s))
		return;
	/* A lower replica that said BYE had written everything (events,
	 * commits, its last messages) to each of us first: we run behind it,
	 * nothing is left to re-send. */
	for (int k = 0; k < s->replica; k++) {
		if (s->finished[s->rank * s->nrep + k]) {
			repl_decide_own(s);
			return;
		}
	}
	int rc = repl_promote(s);
	repl_decide_own(s);
	if (rc < 0)
		s->fatal = 1;
}

/* ---- waiting ---- */

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
		reap(s);
		return s->fatal ? -1 : 0;
	}
	int wait = lazy_wait_ms(s, timeout_ms);
	if (due > 0 && (wait < 0 || wait > due))
		wait = (int)due;
	unsigned long before = s->frames_in;
	if (cm_connset_poll(&s->net, s->rank, wait, accept_all, s) < 0)
		return -1;
	s->last_poll_ms = cm_now_ms();
	lazy_after_wait(s, before);
	reap(s);
	return s->fatal ? -1 : 0;
}
