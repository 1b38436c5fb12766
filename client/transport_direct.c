/* The direct transport: a TCP mesh between ranks, no channel memory (the
 * baseline the fault-tolerant transport is measured against).
 *
 * Connections are opened lazily, at a rank's first send to another: HELLO
 * (kind CM_PEER_DIRECT, job secret) goes out pipelined with the first
 * messages; the other side checks it (secret, world size, ranks) and
 * answers HELLO_ACK, or ERROR and closes. A pair of ranks shares that one
 * connection both ways: j sends to i on the connection i opened unless j
 * had opened its own first (both sides sending at once). Either way all
 * of a rank's messages to another take one TCP stream, which gives MPI's
 * per-pair order, and a SYNC_ACK goes back on the stream its message came
 * on. Matching happens in the receiver (transport_direct_match.c) when a
 * header arrives, so the payload of a posted receive is read straight into
 * its buffer. Every message is sent eagerly, whatever its size.
 *
 * Waiting: progress(-1) first polls without sleeping for a short while
 * (spin_wait), then sleeps in epoll over the listening socket and every
 * connection; once no rank can open a new connection to us and only one
 * connection can bring what we wait for, it sleeps in recvmsg() on it
 * instead (one system call per message, as a plain blocking TCP
 * program): see single_source. */
#include <config.h>

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "net.h"
#include "transport_direct.h"
#include "units.h"

#define CONNECT_TIMEOUT_MS 20000
/* A sleep in recvmsg() on a single source lasts at most this long, and
 * an epoll round runs at least this often while it keeps delivering. */
#define SLEEP_MS 10
/* How long progress(-1) polls before it sleeps (spin_wait), unless
 * CHANMEM_DIRECT_SPIN_US says otherwise (0: never). */
#define SPIN_US 50
#define SPIN_US_MAX 100000

static const struct cm_conn_ops direct_ops;
static void direct_free(struct direct *s);

/* ---- handshake ---- */

static void settle(struct direct *s, int rank)
{
	if (!s->settled[rank]) {
		s->settled[rank] = 1;
		s->unsettled--;
	}
}

static enum cm_err on_hello(struct cm_conn *c, const struct cm_header *h,
                            const struct cm_hello *hello, char *text, size_t textlen)
{
	struct direct *s = c->owner;
	if (!cm_secret_equal(hello->secret, s->secret)) {
		snprintf(text, textlen, "wrong job secret");
		return CM_E_AUTH;
	}
	if (hello->kind != CM_PEER_DIRECT) {
		snprintf(text, textlen, "peer kind %u on a direct-transport rank", hello->kind);
		return CM_E_FIELD;
	}
	if (hello->world_size != (uint32_t)s->size) {
		snprintf(text, textlen, "world size %u, this job has %d ranks", hello->world_size,
		         s->size);
		return CM_E_SIZE;
	}
	if (h->dst != s->rank || h->src == s->rank) {
		snprintf(text, textlen, "HELLO from rank %d to rank %d reached rank %d", h->src,
		         h->dst, s->rank);
		return CM_E_RANK;
	}
	if (s->from[h->src] != NULL || s->gone[h->src]) {
		snprintf(text, textlen, "rank %d is already connected", h->src);
		return CM_E_STATE;
	}
	/* HELLO_ACK's clock tells the other side whether we opened a
	 * connection of our own to it (1: expect it) or adopt this one (0). */
	uint64_t own = s->link[h->src] != NULL;
	s->from[h->src] = c;
	cm_conn_count_into(c, &s->queued);
	if (s->link[h->src] == NULL)
		s->link[h->src] = c; /* our messages to it take this one too */
	c->peer = h->src;
	cm_conn_limit_wait(c, SLEEP_MS);
	settle(s, h->src);
	snprintf(c->name, sizeof c->name, "connection from rank %d", h->src);
	if (cm_conn_send_ctl(
	        c,
	        &(struct cm_header){
	            .type = CM_T_HELLO_ACK, .src = s->rank, .dst = h->src, .clock = own},
	        NULL, 0) < 0)
		return CM_E_STATE;
	return CM_OK;
}

static int on_ready(struct cm_conn *c)
{
	struct direct *s = c->owner;
	s->happenings++;
	if (c->ack_clock == 0)
		settle(s, c->peer);
	return 0;
}

/* ---- frames ---- */

static int on_header(struct cm_conn *c, const struct cm_header *h, struct cm_sink *sink)
{
	struct direct *s = c->owner;
	s->happenings++;
	if (h->type != CM_T_MSG && h->type != CM_T_SYNC_ACK)
		return cm_conn_refuse(c, CM_E_STATE, "%s on a direct connection",
		                      cm_type_str(h->type));
	if (h->src != c->peer || h->dst != s->rank)
		return cm_conn_refuse(c, CM_E_RANK, "%s %d->%d on the connection %d<->%d",
		                      cm_type_str(h->type), h->src, h->dst, c->peer, s->rank);
	if (h->type == CM_T_MSG)
		return direct_msg_header(s, c, h, sink);
	return 0;
}

static int on_frame(struct cm_conn *c, const struct cm_header *h, const struct cm_sink *sink)
{
	struct direct *s = c->owner;
	s->happenings++;
	if (h->type == CM_T_SYNC_ACK) {
		struct cm_req *req = cm_reqmap_take(&s->syncs, h->clock);
		if (req == NULL)
			return cm_conn_fail(c, "SYNC_ACK for unknown message %llu",
			                    (unsigned long long)h->clock);
		cm_send_settle(req, CM_SEND_WAIT_ACK);
		return 0;
	}
	direct_msg_complete(s, sink);
	return 0;
}

/* Every token this transport queues is the send request. */
static void on_sent(struct cm_conn *c, void *token)
{
	struct direct *s = c->owner;
	s->happenings++;
	cm_send_settle(token, CM_SEND_WAIT_WRITE);
}

static const struct cm_conn_ops direct_ops = {
    .on_hello = on_hello,
    .on_header = on_header,
    .on_frame = on_frame,
    .on_ready = on_ready,
    .on_sent = on_sent,
};

/* ---- connections ---- */

static struct cm_conn *link_to(struct direct *s, int dst)
{
	if (s->link[dst])
		return s->link[dst];
	if (s->gone[dst]) {
		cm_err("rank %d: cannot send to rank %d: it has closed its connection (finalized?)",
		       s->rank, dst);
		return NULL;
	}
	int fd = cm_tcp_connect(&s->addrs[dst], CONNECT_TIMEOUT_MS);
	if (fd < 0) {
		char addr[32];
		cm_format_addr(&s->addrs[dst], addr, sizeof addr);
		cm_err("rank %d: cannot connect to rank %d at %s: %s", s->rank, dst, addr,
		       strerror(errno));
		return NULL;
	}
	char name[64];
	snprintf(name, sizeof name, "connection to rank %d", dst);
	struct cm_conn *c =
	    cm_conn_new(fd, CM_CONN_AWAIT_ACK, s->rank, name, &direct_ops, s, &s->lim);
	if (c == NULL) {
		close(fd);
		cm_err("rank %d: out of memory", s->rank);
		return NULL;
	}
	c->peer = dst;
	cm_conn_count_into(c, &s->queued);
	cm_conn_limit_wait(c, SLEEP_MS);
	if (cm_connset_add(&s->net, c, s->rank) < 0) {
		cm_conn_free(c);
		return NULL;
	}
	s->link[dst] = c;
	/* HELLO goes out with the first messages, no round trip. */
	if (cm_conn_send_hello(c, 0, s->rank, dst, s->incarnation, (unsigned)s->size,
	                       CM_PEER_DIRECT, s->secret) < 0)
		return NULL;
	return c;
}

static void accept_all(void *owner)
{
	struct direct *s = owner;
	s->happenings++;
	cm_connset_accept(&s->net, s->listen_fd, s->rank, &direct_ops, s, &s->lim, 0);
}

/* Frees connections that ended. A broken stream from a rank is fatal
 * (messages were lost), except while finalize drains. */
static void reap(struct direct *s)
{
	size_t keep = 0;
	for (size_t i = 0; i < s->net.nconns; i++) {
		struct cm_conn *c = s->net.conns[i];
		if (cm_conn_alive(c)) {
			s->net.conns[keep++] = c;
			continue;
		}
		int peer = c->peer;
		if (peer >= 0) {
			if (s->link[peer] == c) {
				s->link[peer] = NULL;
				s->gone[peer] = 1;
				if (c->state == CM_CONN_CLOSED && cm_conn_pending_output(c) &&
				    !s->draining) {
					cm_err(
					    "rank %d: rank %d closed its connection with messages "
					    "unsent",
					    s->rank, peer);
					s->dead = 1;
				}
			}
			if (s->from[peer] == c)
				s->from[peer] = NULL;
			direct_conn_gone(s, c);
			if (c->state == CM_CONN_FAILED && !s->draining)
				s->dead = 1;
		}
		s->happenings++;
		cm_conn_free(c); /* closing the fd also takes it out of epoll */
	}
	s->net.nconns = keep;
}

/* Our connection to a rank that opened its own to us as well (both sent
 * first at once): it sends its messages on its own, so ours brings only
 * the SYNC_ACKs of our synchronous sends, an ERROR or the end of the
 * stream. */
static int silent_link(const struct direct *s, const struct cm_conn *c)
{
	return !c->accepted && s->from[c->peer] != NULL && s->from[c->peer] != c &&
	       s->syncs.count == 0;
}

/* The one connection a message can come from, when progress(-1) may
 * sleep in recvmsg() on it instead of epoll_wait() then recvmsg(). Only
 * once every rank is settled (the listening socket can bring no rank),
 * with nothing to write (no EPOLLOUT to wait for), every connection
 * introduced, and every other connection a silent link: what can still
 * come on one (an ERROR, its end) also comes with the end of the source,
 * whose sender is the same rank, or is not urgent. Two ranks that both
 * sent first hold two connections, one of them silent. Stray connections
 * and silent links are still looked at: the sleep is bounded (SLEEP_MS,
 * cm_conn_limit_wait) and an epoll round runs at least every SLEEP_MS. */
static struct cm_conn *single_source(struct direct *s, int timeout_ms)
{
	if (timeout_ms >= 0 || s->unsettled > 0 || s->draining ||
	    cm_now_ms() - s->last_poll_ms >= SLEEP_MS)
		return NULL;
	struct cm_conn *source = NULL;
	for (size_t i = 0; i < s->net.nconns; i++) {
		struct cm_conn *c = s->net.conns[i];
		if (c->state != CM_CONN_READY || cm_conn_pending_output(c))
			return NULL;
		if (silent_link(s, c))
			continue;
		if (source)
			return NULL;
		source = c;
	}
	return source;
}

static long long now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Before progress(-1) sleeps: polls every connection without waiting,
 * yielding the core between polls, until something happens (returns 1)
 * or spin_us pass (0). A short message usually comes within a few tens
 * of microseconds of the last one in a collective, and going to sleep
 * then being woken costs about as much again (the kernel's wake-up and
 * a context switch on each side). The yield lets a rank that shares the
 * core (more ranks than cores) run before the next poll, and the bound
 * keeps a long wait from burning more than spin_us per sleep. A rank whose
 * output waits for a reader spins too: sleeping there instead made
 * back-to-back Bcast (the root ahead of its children) about 15% slower
 * and Reduce no faster (4 ranks on 2 cores). */
static int spin_wait(struct direct *s)
{
	if (s->spin_us <= 0 || s->draining)
		return 0;
	long long until = now_us() + s->spin_us;
	uint64_t before = s->happenings;
	/* Writing a frame whose send had completed on a copy reports nothing
	 * (its on_sent came at the copy), yet it is what wait_queue_room waits
	 * for. If the spin wrote all that was queued and said nothing happened,
	 * progress would sleep in epoll with no output to wait for, and the
	 * readers, who wait for our next send, would not wake it: a hang. */
	size_t queued = s->queued;
	do {
		if (cm_connset_poll(&s->net, s->rank, 0, accept_all, s) < 0)
			return -1;
		s->last_poll_ms = cm_now_ms();
		reap(s);
		if (s->dead)
			return -1;
		if (s->happenings != before || s->queued != queued)
			return 1;
		sched_yield();
	} while (now_us() < until);
	return 0;
}

static int direct_progress(struct cm_transport *t, int timeout_ms)
{
	struct direct *s = t->state;
	if (s->dead)
		return -1;
	if (timeout_ms < 0) {
		int spun = spin_wait(s);
		if (spun != 0)
			return spun < 0 ? -1 : 0;
	}
	struct cm_conn *source = single_source(s, timeout_ms);
	if (source) {
		cm_conn_read_wait(source);
		reap(s);
		return s->dead ? -1 : 0;
	}
	if (cm_connset_poll(&s->net, s->rank, timeout_ms, accept_all, s) < 0)
		return -1;
	s->last_poll_ms = cm_now_ms();
	reap(s);
	return s->dead ? -1 : 0;
}

/* ---- requests ---- */

/* Before a send: while the frames queued to other ranks hold more than
 * CM_QUEUE_MAX, waits in progress, which writes what the sockets take and
 * reads every connection into the posted or unexpected receives. A rank
 * waiting here still takes in everything sent to it, so ranks that send
 * to each other (or round a cycle) without receiving do not deadlock:
 * each one's queue drains into the others' unexpected queues. */
static int wait_queue_room(struct cm_transport *t)
{
	struct direct *s = t->state;
	while (s->queued > CM_QUEUE_MAX)
		if (direct_progress(t, -1) < 0)
			return -1;
	return 0;
}

static int direct_isend(struct cm_transport *t, struct cm_req *req)
{
	struct direct *s = t->state;
	if (cm_check_send(req, s->rank, s->size) < 0 || s->dead)
		return -1;
	req->id = s->clock++;
	if (req->peer == s->rank)
		return direct_self_send(s, req);
	if (wait_queue_room(t) < 0)
		return -1;
	struct cm_conn *c = link_to(s, req->peer);
	if (c == NULL)
		return -1;
	struct cm_header h;
	if (cm_start_send(req, s->rank, &s->syncs, &h) < 0)
		return -1;
	if (cm_conn_send(c, &h, req->sbuf, req->slen, req, 1) < 0) {
		s->dead = 1;
		return -1;
	}
	return 0;
}

static int direct_irecv(struct cm_transport *t, struct cm_req *req)
{
	struct direct *s = t->state;
	if (cm_check_recv(req, s->rank, s->size) < 0)
		return -1;
	req->id = s->reqid++;
	return direct_post_recv(s, req);
}

static int direct_probe(struct cm_transport *t, int src, int tag, uint32_t ctx, int blocking,
                        struct cm_probe_result *out)
{
	struct direct *s = t->state;
	return cm_match_probe(t, &s->match, s->rank, s->size, src, tag, ctx, blocking, out);
}

/* The receive waits in this process's posted queue until a message header
 * matches it; once one has, it is being delivered and completes normally. */
static int direct_cancel(struct cm_transport *t, struct cm_req *req, int *cancelled)
{
	struct direct *s = t->state;
	*cancelled = !req->done && cm_match_unpost(&s->match, req);
	return 0;
}

/* ---- life cycle ---- */

static int direct_setup(struct direct *s, const struct cm_job *job)
{
	s->rank = job->rank;
	s->size = job->size;
	s->incarnation = job->incarnation;
	memcpy(s->secret, job->secret, sizeof s->secret);
	s->listen_fd = -1;
	s->spin_us = SPIN_US;
	const char *spin = getenv("CHANMEM_DIRECT_SPIN_US");
	long v;
	if (spin && *spin) {
		if (cm_parse_long(spin, 0, SPIN_US_MAX, &v) < 0) {
			cm_err("rank %d: CHANMEM_DIRECT_SPIN_US=%s: want 0 .. %d microseconds",
			       job->rank, spin, SPIN_US_MAX);
			return -1;
		}
		s->spin_us = (int)v;
	}
	s->lim =
	    (struct cm_limits){.world_size = (uint32_t)job->size, .max_payload = CM_MAX_PAYLOAD};
	s->net.epfd = epoll_create1(EPOLL_CLOEXEC);
	s->link = calloc((size_t)job->size, sizeof *s->link);
	s->from = calloc((size_t)job->size, sizeof *s->from);
	s->gone = calloc((size_t)job->size, 1);
	s->settled = calloc((size_t)job->size, 1);
	s->unsettled = job->size - 1;
	s->addrs = calloc((size_t)job->size, sizeof *s->addrs);
	if (s->net.epfd < 0 || !s->link || !s->from || !s->gone || !s->settled || !s->addrs) {
		cm_err("rank %d: cannot set up the direct transport: %s", job->rank,
		       strerror(errno));
		return -1;
	}
	if (job->size == 1)
		return 0; /* a singleton talks only to itself */
	if (job->peers == NULL || job->listen_fd < 0) {
		cm_err("rank %d: the direct transport needs every rank's address and a "
		       "listening socket",
		       job->rank);
		return -1;
	}
	for (int i = 0; i < job->size; i++) {
		if (cm_parse_hostport(job->peers[i], -1, &s->addrs[i]) < 0) {
			cm_err("rank %d: bad address '%s' for rank %d", job->rank, job->peers[i],
			       i);
			return -1;
		}
	}
	if (cm_connset_listen(&s->net, job->listen_fd) < 0) {
		cm_err("rank %d: listening socket %d: %s", job->rank, job->listen_fd,
		       strerror(errno));
		return -1;
	}
	s->listen_fd = job->listen_fd;
	return 0;
}

static int direct_init(struct cm_transport *t, const struct cm_job *job)
{
	struct direct *s = calloc(1, sizeof *s);
	if (s == NULL) {
		cm_err("rank %d: out of memory", job->rank);
		return -1;
	}
	if (direct_setup(s, job) < 0) {
		s->listen_fd = -1; /* the job's: not ours to close on failure */
		direct_free(s);
		return -1;
	}
	t->state = s;
	return 0;
}

static int flushed(void *state)
{
	struct direct *s = state;
	return s->dead || !cm_connset_output_pending(&s->net);
}

static void direct_free(struct direct *s)
{
	cm_connset_free(&s->net);
	if (s->listen_fd >= 0)
		close(s->listen_fd);
	direct_free_queues(s);
	cm_reqmap_free(&s->syncs);
	free(s->link);
	free(s->from);
	free(s->gone);
	free(s->settled);
	free(s->addrs);
	free(s);
}

/* Everything queued reaches the kernel; then each side shuts its write
 * half and reads until the other side's end of stream, so no close()
 * discards bytes the peer has not read yet (that would reset the link). */
static int direct_finalize(struct cm_transport *t)
{
	struct direct *s = t->state;
	if (s == NULL)
		return 0;
	int rc = cm_connset_finish(t, &s->net, s->rank, flushed, &s->dead, &s->draining);
	direct_free(s);
	t->state = NULL;
	return rc;
}

void cm_transport_direct(struct cm_transport *t)
{
	*t = (struct cm_transport){.name = "direct",
	                           .init = direct_init,
	                           .isend = direct_isend,
	                           .irecv = direct_irecv,
	                           .probe = direct_probe,
	                           .progress = direct_progress,
	                           .finalize = direct_finalize,
	                           .cancel = direct_cancel};
}
