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
 * Waiting: epoll over the listening socket and every connection; once no
 * rank can open a new connection to us and there is only one connection,
 * progress(-1) sleeps in recvmsg() on it instead (one system call per
 * message, as a plain blocking TCP program). */
#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "net.h"
#include "transport_direct.h"

#define CONNECT_TIMEOUT_MS 20000
#define FLUSH_TIMEOUT_MS 60000
#define DRAIN_TIMEOUT_MS 10000
#define MAX_EVENTS 64

static const struct cm_conn_ops direct_ops;
static void direct_free(struct direct *s);

/* Registers (or updates) what epoll reports for c. */
static int watch(struct direct *s, struct cm_conn *c, unsigned events)
{
	if (c->watching == events)
		return 0;
	struct epoll_event ev = {.events = events, .data.ptr = c};
	if (epoll_ctl(s->epfd, c->watching ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, c->fd, &ev) < 0)
		return cm_conn_fail(c, "epoll_ctl: %s", strerror(errno));
	c->watching = events;
	return 0;
}

static int add_conn(struct direct *s, struct cm_conn *c)
{
	if (s->nconns == s->conns_cap) {
		size_t cap = s->conns_cap ? s->conns_cap * 2 : 16;
		struct cm_conn **v = realloc(s->conns, cap * sizeof *v);
		if (v == NULL) {
			cm_err("rank %d: out of memory", s->rank);
			return -1;
		}
		s->conns = v;
		s->conns_cap = cap;
	}
	if (watch(s, c, EPOLLIN) < 0)
		return -1;
	s->conns[s->nconns++] = c;
	return 0;
}

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
	if (s->link[h->src] == NULL)
		s->link[h->src] = c; /* our messages to it take this one too */
	c->peer = h->src;
	settle(s, h->src);
	snprintf(c->name, sizeof c->name, "connection from rank %d", h->src);
	if (cm_conn_send_ctl(c, CM_T_HELLO_ACK, 0, s->rank, h->src, 0, 0, own, NULL, 0) < 0)
		return CM_E_STATE;
	return CM_OK;
}

static int on_ready(struct cm_conn *c)
{
	struct direct *s = c->owner;
	if (c->ack_clock == 0)
		settle(s, c->peer);
	return 0;
}

/* ---- frames ---- */

static int on_header(struct cm_conn *c, const struct cm_header *h, struct cm_sink *sink)
{
	struct direct *s = c->owner;
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

static void on_sent(struct cm_conn *c, struct cm_req *req)
{
	cm_send_settle(req, CM_SEND_WAIT_WRITE);
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
	if (add_conn(s, c) < 0) {
		cm_conn_free(c);
		return NULL;
	}
	s->link[dst] = c;
	/* HELLO goes out with the first messages, no round trip. */
	if (cm_conn_send_hello(c, s->rank, dst, s->incarnation, (unsigned)s->size, CM_PEER_DIRECT,
	                       s->secret) < 0)
		return NULL;
	return c;
}

static void accept_all(struct direct *s)
{
	for (;;) {
		int fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != ECONNABORTED)
				cm_err("rank %d: accept: %s", s->rank, strerror(errno));
			return;
		}
		struct cm_conn *c = cm_conn_new(fd, CM_CONN_AWAIT_HELLO, s->rank,
		                                "incoming connection", &direct_ops, s, &s->lim);
		if (c == NULL) {
			close(fd);
			continue;
		}
		if (add_conn(s, c) < 0) {
			cm_conn_free(c);
			continue;
		}
		cm_conn_read(c); /* its HELLO and first messages are often there already */
	}
}

/* Frees connections that ended. A broken stream from a rank is fatal
 * (messages were lost), except while finalize drains. */
static void reap(struct direct *s)
{
	size_t keep = 0;
	for (size_t i = 0; i < s->nconns; i++) {
		struct cm_conn *c = s->conns[i];
		if (cm_conn_alive(c)) {
			s->conns[keep++] = c;
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
		cm_conn_free(c); /* closing the fd also takes it out of epoll */
	}
	s->nconns = keep;
}

static int direct_progress(struct cm_transport *t, int timeout_ms)
{
	struct direct *s = t->state;
	if (s->dead)
		return -1;
	if (timeout_ms < 0 && s->unsettled == 0 && s->nconns == 1) {
		struct cm_conn *c = s->conns[0];
		if (cm_conn_alive(c) && !cm_conn_pending_output(c)) {
			/* Nothing else can happen: sleep in the read itself. */
			cm_conn_read_wait(c);
			reap(s);
			return s->dead ? -1 : 0;
		}
	}
	for (size_t i = 0; i < s->nconns; i++) {
		struct cm_conn *c = s->conns[i];
		unsigned want = EPOLLIN | (cm_conn_pending_output(c) ? EPOLLOUT : 0);
		if (cm_conn_alive(c))
			watch(s, c, want);
	}
	struct epoll_event ev[MAX_EVENTS];
	int n = epoll_wait(s->epfd, ev, MAX_EVENTS, timeout_ms);
	if (n < 0) {
		if (errno == EINTR)
			return 0;
		cm_err("rank %d: epoll_wait: %s", s->rank, strerror(errno));
		return -1;
	}
	for (int i = 0; i < n; i++) {
		struct cm_conn *c = ev[i].data.ptr;
		unsigned e = ev[i].events;
		if (c == NULL) {
			accept_all(s);
			continue;
		}
		if ((e & (EPOLLOUT | EPOLLERR | EPOLLHUP)) && cm_conn_pending_output(c) &&
		    cm_conn_alive(c)) {
			c->wblocked = 0;
			cm_conn_flush(c);
		}
		if ((e & (EPOLLIN | EPOLLERR | EPOLLHUP)) && cm_conn_alive(c))
			cm_conn_read(c);
	}
	reap(s);
	return s->dead ? -1 : 0;
}

/* ---- requests ---- */

static int direct_isend(struct cm_transport *t, struct cm_req *req)
{
	struct direct *s = t->state;
	req->done = 0;
	req->error = 0;
	if (req->peer < 0 || req->peer >= s->size) {
		cm_err("rank %d: send to rank %d: not a rank of this %d-rank job", s->rank,
		       req->peer, s->size);
		return -1;
	}
	if (req->tag < 0 || req->slen > CM_DEFAULT_MAX_PAYLOAD || (req->slen && !req->sbuf)) {
		cm_err("rank %d: send to rank %d: bad tag %d or length %zu", s->rank, req->peer,
		       req->tag, req->slen);
		return -1;
	}
	if (s->dead)
		return -1;
	req->id = s->clock++;
	if (req->peer == s->rank)
		return direct_self_send(s, req);
	struct cm_conn *c = link_to(s, req->peer);
	if (c == NULL)
		return -1;
	struct cm_header h = {.type = CM_T_MSG,
	                      .flags = req->sync ? CM_F_SYNC : 0,
	                      .src = s->rank,
	                      .dst = req->peer,
	                      .tag = req->tag,
	                      .ctx = req->ctx,
	                      .clock = req->id};
	req->t_off = CM_SEND_WAIT_WRITE;
	if (req->sync) {
		req->t_off |= CM_SEND_WAIT_ACK;
		if (cm_reqmap_put(&s->syncs, req) < 0) {
			cm_err("rank %d: out of memory", s->rank);
			return -1;
		}
	}
	if (cm_conn_send(c, &h, req->sbuf, req->slen, req, 1) < 0) {
		s->dead = 1;
		return -1;
	}
	return 0;
}

static int direct_irecv(struct cm_transport *t, struct cm_req *req)
{
	struct direct *s = t->state;
	req->done = 0;
	req->error = 0;
	if ((req->peer < 0 && req->peer != CM_ANY_SOURCE) || req->peer >= s->size ||
	    (req->tag < 0 && req->tag != CM_ANY_TAG) || (req->rcap && !req->rbuf)) {
		cm_err("rank %d: receive from %d tag %d: bad source, tag or buffer", s->rank,
		       req->peer, req->tag);
		return -1;
	}
	req->id = s->reqid++;
	return direct_post_recv(s, req);
}

static int direct_probe(struct cm_transport *t, int src, int tag, uint32_t ctx, int blocking,
                        struct cm_probe_result *out)
{
	struct direct *s = t->state;
	if ((src < 0 && src != CM_ANY_SOURCE) || src >= s->size || (tag < 0 && tag != CM_ANY_TAG)) {
		cm_err("rank %d: probe for source %d tag %d: bad source or tag", s->rank, src, tag);
		return -1;
	}
	memset(out, 0, sizeof *out);
	out->source = out->tag = -1;
	if (direct_find_unexpected(s, src, tag, ctx, out))
		return 0;
	if (!blocking) {
		/* MPI_Iprobe makes progress: look at what the sockets hold now. */
		if (direct_progress(t, 0) < 0)
			return -1;
		direct_find_unexpected(s, src, tag, ctx, out);
		return 0;
	}
	while (!direct_find_unexpected(s, src, tag, ctx, out))
		if (direct_progress(t, -1) < 0)
			return -1;
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
	s->epfd = -1;
	s->lim = (struct cm_limits){.world_size = (uint32_t)job->size,
	                            .max_payload = CM_DEFAULT_MAX_PAYLOAD};
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	s->link = calloc((size_t)job->size, sizeof *s->link);
	s->from = calloc((size_t)job->size, sizeof *s->from);
	s->gone = calloc((size_t)job->size, 1);
	s->settled = calloc((size_t)job->size, 1);
	s->unsettled = job->size - 1;
	s->addrs = calloc((size_t)job->size, sizeof *s->addrs);
	if (s->epfd < 0 || !s->link || !s->from || !s->gone || !s->settled || !s->addrs) {
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
	if (cm_set_nonblock(job->listen_fd, 1) < 0 || cm_set_cloexec(job->listen_fd, 1) < 0) {
		cm_err("rank %d: listening socket %d: %s", job->rank, job->listen_fd,
		       strerror(errno));
		return -1;
	}
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
	if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, job->listen_fd, &ev) < 0) {
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

static int any_output(struct direct *s)
{
	for (size_t i = 0; i < s->nconns; i++)
		if (cm_conn_pending_output(s->conns[i]) && cm_conn_alive(s->conns[i]))
			return 1;
	return 0;
}

static void direct_free(struct direct *s)
{
	for (size_t i = 0; i < s->nconns; i++)
		cm_conn_free(s->conns[i]);
	if (s->listen_fd >= 0)
		close(s->listen_fd);
	direct_free_queues(s);
	cm_reqmap_free(&s->syncs);
	free(s->conns);
	if (s->epfd >= 0)
		close(s->epfd);
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
	int rc = 0;
	long long deadline = cm_now_ms() + FLUSH_TIMEOUT_MS;
	while (!s->dead && any_output(s)) {
		long long left = deadline - cm_now_ms();
		if (left <= 0) {
			cm_err("rank %d: finalize: messages still unsent after %d s", s->rank,
			       FLUSH_TIMEOUT_MS / 1000);
			rc = -1;
			break;
		}
		direct_progress(t, (int)(left < 1000 ? left : 1000));
	}
	if (s->dead)
		rc = -1;
	s->draining = 1;
	s->dead = 0;
	deadline = cm_now_ms() + DRAIN_TIMEOUT_MS;
	for (;;) {
		for (size_t i = 0; i < s->nconns; i++)
			cm_conn_shutdown(s->conns[i]);
		long long left = deadline - cm_now_ms();
		if (s->nconns == 0 || left <= 0)
			break;
		direct_progress(t, (int)(left < 200 ? left : 200));
		s->dead = 0;
	}
	direct_free(s);
	t->state = NULL;
	return rc;
}

void cm_transport_direct(struct cm_transport *t)
{
	memset(t, 0, sizeof *t);
	t->name = "direct";
	t->init = direct_init;
	t->isend = direct_isend;
	t->irecv = direct_irecv;
	t->probe = direct_probe;
	t->progress = direct_progress;
	t->finalize = direct_finalize;
}
