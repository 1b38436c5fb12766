/* MPI matching for the direct transport, in the receiving rank.
 *
 * A message is matched when its header arrives: it goes to the earliest
 * posted receive that accepts it (its payload is then read straight into
 * that receive's buffer), else it joins the unexpected queue in arrival
 * order and a new receive takes the earliest unexpected message it
 * accepts. Per sender, headers arrive in send order (one TCP stream per
 * pair), which gives MPI's non-overtaking rule. */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "transport_direct.h"

static int accepts(const struct cm_req *r, int src, int tag, uint32_t ctx)
{
	return r->ctx == ctx && (r->peer == CM_ANY_SOURCE || r->peer == src) &&
	       (r->tag == CM_ANY_TAG || r->tag == tag);
}

static void set_status(struct cm_req *r, int src, int tag, size_t len)
{
	r->st_source = src;
	r->st_tag = tag;
	r->st_bytes = len;
	r->error = len > r->rcap ? CM_REQ_ERR_TRUNCATE : 0;
}

static struct cm_req *take_posted(struct direct *s, int src, int tag, uint32_t ctx)
{
	struct cm_req *prev = NULL;
	for (struct cm_req *r = s->posted_head; r; prev = r, r = r->t_next) {
		if (!accepts(r, src, tag, ctx))
			continue;
		if (prev)
			prev->t_next = r->t_next;
		else
			s->posted_head = r->t_next;
		if (s->posted_tail == r)
			s->posted_tail = prev;
		r->t_next = NULL;
		return r;
	}
	return NULL;
}

static void append_unexpected(struct direct *s, struct umsg *u)
{
	u->next = NULL;
	if (s->unexp_tail)
		s->unexp_tail->next = u;
	else
		s->unexp_head = u;
	s->unexp_tail = u;
}

/* SYNC_ACK goes back on the connection the message came on, which is the
 * one its sender waits on. The sender may be gone already: then nobody
 * waits for it. */
static void sync_ack(struct direct *s, struct cm_conn *c, int src, int tag, uint32_t ctx,
                     uint64_t clock)
{
	if (c && cm_conn_alive(c))
		cm_conn_send_ctl(c, CM_T_SYNC_ACK, 0, s->rank, src, tag, ctx, clock, NULL, 0);
}

int direct_msg_header(struct direct *s, struct cm_conn *c, const struct cm_header *h,
                      struct cm_sink *sink)
{
	struct cm_req *r = take_posted(s, h->src, h->tag, h->ctx);
	if (r) {
		set_status(r, h->src, h->tag, h->len);
		*sink =
		    (struct cm_sink){.buf = r->rbuf, .cap = r->rcap, .kind = SINK_REQ, .cookie = r};
		if (h->flags & CM_F_SYNC)
			sync_ack(s, c, h->src, h->tag, h->ctx, h->clock);
		return 0;
	}
	struct umsg *u = calloc(1, sizeof *u);
	if (u == NULL || (h->len > 0 && (u->data = malloc(h->len)) == NULL)) {
		free(u);
		s->dead = 1;
		return cm_conn_fail(c, "out of memory for a %u-byte message", h->len);
	}
	u->src = h->src;
	u->tag = h->tag;
	u->ctx = h->ctx;
	u->sync = (h->flags & CM_F_SYNC) != 0;
	u->clock = h->clock;
	u->len = h->len;
	u->conn = c;
	u->from = c;
	append_unexpected(s, u);
	*sink = (struct cm_sink){.buf = u->data, .cap = h->len, .kind = SINK_UMSG, .cookie = u};
	return 0;
}

void direct_msg_complete(struct direct *s, const struct cm_sink *sink)
{
	if (sink->kind == SINK_REQ) {
		struct cm_req *r = sink->cookie;
		r->done = 1;
	} else if (sink->kind == SINK_UMSG) {
		struct umsg *u = sink->cookie;
		u->complete = 1;
		u->conn = NULL;
	}
}

/* A new receive took unexpected message u (already unlinked). */
static void deliver_unexpected(struct direct *s, struct umsg *u, struct cm_req *r)
{
	set_status(r, u->src, u->tag, u->len);
	if (u->sync && !u->self_sync)
		sync_ack(s, u->from, u->src, u->tag, u->ctx, u->clock);
	if (!u->complete) {
		/* The rest of the payload goes straight to the user's buffer. */
		struct cm_sink sink = {
		    .buf = r->rbuf, .cap = r->rcap, .kind = SINK_REQ, .cookie = r};
		cm_conn_redirect(u->conn, &sink);
		free(u->data);
		free(u);
		return;
	}
	size_t n = u->len < r->rcap ? u->len : r->rcap;
	if (n > 0)
		memcpy(r->rbuf, u->data, n);
	if (u->self_sync)
		cm_send_settle(u->self_sync, CM_SEND_WAIT_ACK);
	else
		free(u->data);
	free(u);
	r->done = 1;
}

int direct_self_send(struct direct *s, struct cm_req *req)
{
	struct cm_req *r = take_posted(s, s->rank, req->tag, req->ctx);
	if (r) {
		set_status(r, s->rank, req->tag, req->slen);
		size_t n = req->slen < r->rcap ? req->slen : r->rcap;
		if (n > 0)
			memcpy(r->rbuf, req->sbuf, n);
		r->done = 1;
		req->done = 1;
		return 0;
	}
	struct umsg *u = calloc(1, sizeof *u);
	if (u == NULL)
		goto oom;
	u->src = s->rank;
	u->tag = req->tag;
	u->ctx = req->ctx;
	u->len = req->slen;
	u->complete = 1;
	if (req->sync) {
		/* Synchronous: the sender waits for the match, so its buffer
		 * stays valid until then and needs no copy. */
		u->sync = 1;
		u->self_sync = req;
		u->data = (void *)req->sbuf;
		req->t_off = CM_SEND_WAIT_ACK;
	} else if (req->slen > 0) {
		/* Eager: a standard send to self completes before its receive. */
		u->data = malloc(req->slen);
		if (u->data == NULL) {
			free(u);
			goto oom;
		}
		memcpy(u->data, req->sbuf, req->slen);
	}
	append_unexpected(s, u);
	if (!req->sync)
		req->done = 1;
	return 0;
oom:
	cm_err("rank %d: out of memory for a %zu-byte message to self", s->rank, req->slen);
	return -1;
}

int direct_post_recv(struct direct *s, struct cm_req *req)
{
	struct umsg *prev = NULL;
	for (struct umsg *u = s->unexp_head; u; prev = u, u = u->next) {
		if (!accepts(req, u->src, u->tag, u->ctx))
			continue;
		if (prev)
			prev->next = u->next;
		else
			s->unexp_head = u->next;
		if (s->unexp_tail == u)
			s->unexp_tail = prev;
		deliver_unexpected(s, u, req);
		return 0;
	}
	req->t_next = NULL;
	if (s->posted_tail)
		s->posted_tail->t_next = req;
	else
		s->posted_head = req;
	s->posted_tail = req;
	return 0;
}

int direct_find_unexpected(struct direct *s, int src, int tag, uint32_t ctx,
                           struct cm_probe_result *out)
{
	struct cm_req probe = {.peer = src, .tag = tag, .ctx = ctx};
	for (struct umsg *u = s->unexp_head; u; u = u->next) {
		if (accepts(&probe, u->src, u->tag, u->ctx)) {
			out->found = 1;
			out->source = u->src;
			out->tag = u->tag;
			out->bytes = u->len;
			return 1;
		}
	}
	return 0;
}

/* Connection c is being freed: drop unexpected messages still arriving on
 * it (their stream broke, they can never complete) and forget it as the
 * way back to the senders of the others. */
void direct_conn_gone(struct direct *s, struct cm_conn *c)
{
	struct umsg *prev = NULL, *u = s->unexp_head;
	while (u) {
		struct umsg *next = u->next;
		if (u->conn == c && !u->complete) {
			if (prev)
				prev->next = next;
			else
				s->unexp_head = next;
			if (s->unexp_tail == u)
				s->unexp_tail = prev;
			free(u->data);
			free(u);
		} else {
			if (u->from == c)
				u->from = NULL;
			prev = u;
		}
		u = next;
	}
}

void direct_free_queues(struct direct *s)
{
	while (s->unexp_head) {
		struct umsg *u = s->unexp_head;
		s->unexp_head = u->next;
		if (!u->self_sync)
			free(u->data);
		free(u);
	}
	s->unexp_tail = NULL;
	s->posted_head = s->posted_tail = NULL;
}
