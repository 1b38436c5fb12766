/* MPI matching for the direct transport, in the receiving rank.
 *
 * A message is matched when its header arrives: it goes to the earliest
 * posted receive that accepts it (its payload is then read straight into
 * that receive's buffer), else it joins the unexpected queue in arrival
 * order and a new receive takes the earliest unexpected message it
 * accepts. Per sender, headers arrive in send order (one TCP stream per
 * pair), which gives MPI's non-overtaking rule. The queues themselves are
 * transport_match.c's. */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "transport_direct.h"

static struct umsg *as_umsg(struct cm_msg *m)
{
	return (struct umsg *)m;
}

/* SYNC_ACK goes back on the connection the message came on, which is the
 * one its sender waits on. The sender may be gone already: then nobody
 * waits for it. */
static void sync_ack(struct direct *s, struct cm_conn *c, int src, int tag, uint32_t ctx,
                     uint64_t clock)
{
	if (c && cm_conn_alive(c))
		cm_conn_send_ctl(c,
		                 &(struct cm_header){.type = CM_T_SYNC_ACK,
		                                     .src = s->rank,
		                                     .dst = src,
		                                     .tag = tag,
		                                     .ctx = ctx,
		                                     .clock = clock},
		                 NULL, 0);
}

int direct_msg_header(struct direct *s, struct cm_conn *c, const struct cm_header *h,
                      struct cm_sink *sink)
{
	struct cm_req *r = cm_match_take_posted(&s->match, h->src, h->tag, h->ctx);
	if (r) {
		cm_match_set_status(r, h->src, h->tag, h->len);
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
	u->m = (struct cm_msg){.src = h->src, .tag = h->tag, .ctx = h->ctx, .len = h->len};
	u->sync = (h->flags & CM_F_SYNC) != 0;
	u->clock = h->clock;
	u->conn = c;
	u->from = c;
	cm_match_add_unexpected(&s->match, &u->m);
	*sink = (struct cm_sink){.buf = u->data, .cap = h->len, .kind = SINK_UMSG, .cookie = u};
	return 0;
}

void direct_msg_complete(struct direct *s, const struct cm_sink *sink)
{
	(void)s;
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
	if (u->sync && !u->self_sync)
		sync_ack(s, u->from, u->m.src, u->m.tag, u->m.ctx, u->clock);
	if (!u->complete) {
		/* The rest of the payload goes straight to the user's buffer. */
		cm_match_set_status(r, u->m.src, u->m.tag, u->m.len);
		struct cm_sink sink = {
		    .buf = r->rbuf, .cap = r->rcap, .kind = SINK_REQ, .cookie = r};
		cm_conn_redirect(u->conn, &sink);
		free(u->data);
		free(u);
		return;
	}
	cm_match_deliver_copy(r, u->m.src, u->m.tag, u->data, u->m.len);
	if (u->self_sync)
		cm_send_settle(u->self_sync, CM_SEND_WAIT_ACK);
	else
		free(u->data);
	free(u);
}

int direct_self_send(struct direct *s, struct cm_req *req)
{
	struct cm_req *r = cm_match_take_posted(&s->match, s->rank, req->tag, req->ctx);
	if (r) {
		cm_match_deliver_copy(r, s->rank, req->tag, req->sbuf, req->slen);
		req->done = 1;
		return 0;
	}
	struct umsg *u = calloc(1, sizeof *u);
	if (u == NULL)
		goto oom;
	u->m = (struct cm_msg){.src = s->rank, .tag = req->tag, .ctx = req->ctx, .len = req->slen};
	u->complete = 1;
	if (req->sync) {
		/* Synchronous: the sender waits for the match, so its buffer
		 * stays valid until then and needs no copy. */
		u->sync = 1;
		u->self_sync = req;
		u->data = (void *)req->sbuf;
		req->t_wait = CM_SEND_WAIT_ACK;
	} else if (req->slen > 0) {
		/* Eager: a standard send to self completes before its receive. */
		u->data = malloc(req->slen);
		if (u->data == NULL) {
			free(u);
			goto oom;
		}
		memcpy(u->data, req->sbuf, req->slen);
	}
	cm_match_add_unexpected(&s->match, &u->m);
	if (!req->sync)
		req->done = 1;
	return 0;
oom:
	cm_err("rank %d: out of memory for a %zu-byte message to self", s->rank, req->slen);
	return -1;
}

int direct_post_recv(struct direct *s, struct cm_req *req)
{
	struct cm_msg *m = cm_match_take_unexpected(&s->match, req);
	if (m)
		deliver_unexpected(s, as_umsg(m), req);
	else
		cm_match_post(&s->match, req);
	return 0;
}

/* Connection c is being freed: drop unexpected messages still arriving on
 * it (their stream broke, they can never complete) and forget it as the
 * way back to the senders of the others. */
void direct_conn_gone(struct direct *s, struct cm_conn *c)
{
	struct cm_msg *prev = NULL, *m = s->match.unexp_head;
	while (m) {
		struct cm_msg *next = m->next;
		struct umsg *u = as_umsg(m);
		if (u->conn == c && !u->complete) {
			cm_match_unlink(&s->match, m, prev);
			free(u->data);
			free(u);
		} else {
			if (u->from == c)
				u->from = NULL;
			prev = m;
		}
		m = next;
	}
}

void direct_free_queues(struct direct *s)
{
	while (s->match.unexp_head) {
		struct umsg *u = as_umsg(s->match.unexp_head);
		s->match.unexp_head = u->m.next;
		if (!u->self_sync)
			free(u->data);
		free(u);
	}
	s->match = (struct cm_matchq){0};
}
