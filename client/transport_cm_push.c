/* The channel-memory transport's pushed messages (protocol.md, "Pushed
 * messages"): a collective's transfers (cm_req.coll) are not requested
 * with RECV_REQ. The sender flags its MSG CM_F_PUSH; our home CM logs it
 * and sends it on as a DELIVER with CM_F_PUSH and its push number, and we
 * match it here against the collective receives posted, in MPI order (a
 * collective's receive names its source and tag, so each sender's
 * messages are matched in that sender's order and a re-execution matches
 * the same ones however the senders interleave).
 *
 * We ask for pushes with PUSH_START naming the first push number we do
 * not have: 0 in a fresh run, the image's count when restored from a
 * checkpoint (the image keeps the pushed messages not consumed yet), our
 * count on a new connection after a CM's loss. The CM sends at most
 * CM_PUSH_WINDOW bytes beyond what we acknowledged with PUSH_ACK: we
 * acknowledge what we consumed, a quarter window at a time, and, while a
 * collective receive waits with half a window held unconsumed, what we
 * hold too (the message it waits for may be behind those).
 *
 * Called by transport_cm.c (frames, receives), transport_cm_events.c
 * (snapshots), transport_cm_progress.c and transport_cm_reconnect.c
 * (connection loss); calls only conn.c and transport_match.c. */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "transport_cm.h"

/* A pushed message no receive was posted for yet. */
struct cmt_pushed {
	struct cm_msg m; /* first: the matching queue links these */
	int credited;    /* its bytes were acknowledged while held */
	uint8_t data[];
};

static uint64_t cost(size_t len)
{
	return CM_HEADER_SIZE + (uint64_t)len;
}

/* Acknowledges bytes to home. On a connection that is down or being made
 * again the acknowledgement is moot: the next PUSH_START opens a new
 * window. A write that fails is found by the progress engine, which
 * watches every connection. */
static void send_ack(struct cmt *s, uint64_t bytes)
{
	struct cm_conn *c = s->cms[s->myhome];
	if (!cm_conn_alive(c) || c->state != CM_CONN_READY ||
	    (s->links && s->links[s->myhome].down))
		return;
	(void)cm_conn_send_ctl(
	    c,
	    &(struct cm_header){
	        .type = CM_T_PUSH_ACK, .src = s->rank, .dst = s->rank, .clock = bytes},
	    NULL, 0);
}

/* A pushed message of len bytes was consumed by a receive. */
static void consumed(struct cmt *s, size_t len, int credited)
{
	struct cmt_push *p = &s->push;
	if (!credited)
		p->unacked += cost(len);
	if (p->unacked < CM_PUSH_WINDOW / 4)
		return;
	uint64_t n = p->unacked;
	p->unacked = 0;
	send_ack(s, n);
}

/* Receive r takes pushed message u (held, or just arrived), which is freed. */
static void take(struct cmt *s, struct cm_req *r, struct cmt_pushed *u)
{
	size_t len = u->m.len;
	int credited = u->credited;
	cm_match_deliver_copy(r, u->m.src, u->m.tag, u->data, len);
	free(u);
	consumed(s, len, credited);
}

int cmt_push_irecv(struct cmt *s, struct cm_req *req)
{
	struct cmt_push *p = &s->push;
	if (req->peer == CM_ANY_SOURCE || req->tag == CM_ANY_TAG) {
		cm_err("rank %d: a collective's receive with a wildcard", s->rank);
		return -1;
	}
	struct cm_msg *m = cm_match_take_unexpected(&p->q, req);
	if (m == NULL) {
		cm_match_post(&p->q, req);
		return 0;
	}
	p->held -= cost(m->len);
	take(s, req, (struct cmt_pushed *)m);
	return 0;
}

int cmt_push_header(struct cmt *s, struct cm_conn *c, const struct cm_header *h,
                    struct cm_sink *sink)
{
	struct cmt_push *p = &s->push;
	if (c->peer != s->myhome)
		return cm_conn_fail(c, "pushed message from a channel memory that is not our home");
	if (h->clock != p->next)
		return cm_conn_fail(c, "pushed message %llu, expected %llu",
		                    (unsigned long long)h->clock, (unsigned long long)p->next);
	struct cm_req *r = cm_match_take_posted(&p->q, h->src, h->tag, h->ctx);
	if (r) {
		cm_match_set_status(r, h->src, h->tag, h->len);
		*sink = (struct cm_sink){
		    .buf = r->rbuf, .cap = r->rcap, .kind = SINK_PUSH_POSTED, .cookie = r};
		return 0;
	}
	struct cmt_pushed *u = malloc(sizeof *u + h->len);
	if (u == NULL)
		return cm_conn_fail(c, "out of memory for a %u-byte pushed message",
		                    (unsigned)h->len);
	u->m = (struct cm_msg){.src = h->src, .tag = h->tag, .ctx = h->ctx, .len = h->len};
	u->credited = 0;
	*sink =
	    (struct cm_sink){.buf = u->data, .cap = h->len, .kind = SINK_PUSH_HELD, .cookie = u};
	return 0;
}

int cmt_push_frame(struct cmt *s, const struct cm_header *h, const struct cm_sink *sink)
{
	struct cmt_push *p = &s->push;
	p->next++;
	if (sink->kind == SINK_PUSH_POSTED) {
		((struct cm_req *)sink->cookie)->done = 1;
		consumed(s, h->len, 0);
		return 0;
	}
	struct cmt_pushed *u = sink->cookie;
	/* A receive posted while its payload arrived takes it now. */
	struct cm_req *r = cm_match_take_posted(&p->q, h->src, h->tag, h->ctx);
	if (r) {
		take(s, r, u);
		return 0;
	}
	cm_match_add_unexpected(&p->q, &u->m);
	p->held += cost(h->len);
	return 0;
}

void cmt_push_broken(struct cmt *s, struct cm_conn *c)
{
	if (c->peer != s->myhome)
		return;
	struct cmt_push *p = &s->push;
	p->started = 0; /* the next connection asks again */
	if (!c->in_body)
		return;
	if (c->in_sink.kind == SINK_PUSH_POSTED)
		cm_match_post_first(&p->q, c->in_sink.cookie);
	else if (c->in_sink.kind == SINK_PUSH_HELD)
		free(c->in_sink.cookie);
}

int cmt_push_start(struct cmt *s, struct cm_conn *c, int queue)
{
	if (s->push.started)
		return 0;
	s->push.started = 1;
	struct cm_header h = {
	    .type = CM_T_PUSH_START, .src = s->rank, .dst = s->rank, .clock = s->push.next};
	s->push.unacked = 0; /* the new connection's window starts empty */
	for (struct cm_msg *m = s->push.q.unexp_head; m; m = m->next)
		((struct cmt_pushed *)m)->credited = 1;
	return queue ? cm_conn_queue_ctl(c, &h, NULL, 0) : cm_conn_send_ctl(c, &h, NULL, 0);
}

void cmt_push_waiting(struct cmt *s)
{
	struct cmt_push *p = &s->push;
	if (p->q.posted_head == NULL || p->held + p->unacked < CM_PUSH_WINDOW / 2)
		return;
	/* A receive waits and half a window is held: what it waits for may
	 * be behind what we hold. */
	uint64_t n = p->unacked;
	for (struct cm_msg *m = p->q.unexp_head; m; m = m->next) {
		struct cmt_pushed *u = (struct cmt_pushed *)m;
		if (!u->credited)
			n += cost(m->len);
		u->credited = 1;
	}
	p->unacked = 0;
	if (n)
		send_ack(s, n);
}

/* ---- checkpoint images ---- */

/* Each held message: u32 source, u32 tag, u32 context, u32 length, then
 * its bytes. */
#define HELD_HEAD 16

int cmt_push_snapshot(struct cmt *s, struct cm_resume *out)
{
	struct cmt_push *p = &s->push;
	size_t len = 0;
	for (struct cm_msg *m = p->q.unexp_head; m; m = m->next)
		len += HELD_HEAD + m->len;
	uint8_t *blob = len ? malloc(len) : NULL;
	if (len && blob == NULL) {
		cm_err("rank %d: out of memory for a checkpoint", s->rank);
		return -1;
	}
	uint8_t *w = blob;
	for (struct cm_msg *m = p->q.unexp_head; m; m = m->next) {
		cm_put_u32(w, (uint32_t)m->src);
		cm_put_u32(w + 4, (uint32_t)m->tag);
		cm_put_u32(w + 8, m->ctx);
		cm_put_u32(w + 12, (uint32_t)m->len);
		memcpy(w + HELD_HEAD, ((struct cmt_pushed *)m)->data, m->len);
		w += HELD_HEAD + m->len;
	}
	free(p->snap);
	p->snap = blob;
	out->pushes = p->next;
	out->held = blob;
	out->held_len = len;
	return 0;
}

int cmt_push_restore(struct cmt *s, const struct cm_resume *r)
{
	struct cmt_push *p = &s->push;
	p->next = r->pushes;
	const uint8_t *at = r->held, *end = at ? at + r->held_len : NULL;
	while (at && at < end) {
		uint32_t len = (size_t)(end - at) >= HELD_HEAD ? cm_get_u32(at + 12) : 0;
		if ((size_t)(end - at) < HELD_HEAD || (size_t)(end - at) - HELD_HEAD < len) {
			cm_err("rank %d: checkpoint image: a held pushed message runs past its end",
			       s->rank);
			return -1;
		}
		struct cmt_pushed *u = malloc(sizeof *u + len);
		if (u == NULL) {
			cm_err("rank %d: out of memory", s->rank);
			return -1;
		}
		u->m = (struct cm_msg){.src = (int)cm_get_u32(at),
		                       .tag = (int)cm_get_u32(at + 4),
		                       .ctx = cm_get_u32(at + 8),
		                       .len = len};
		u->credited = 1;
		memcpy(u->data, at + HELD_HEAD, len);
		cm_match_add_unexpected(&p->q, &u->m);
		p->held += cost(len);
		at += HELD_HEAD + len;
	}
	return 0;
}

void cmt_push_free(struct cmt *s)
{
	struct cm_msg *m = s->push.q.unexp_head;
	while (m) {
		struct cm_msg *next = m->next;
		free(m);
		m = next;
	}
	free(s->push.snap);
	memset(&s->push, 0, sizeof s->push);
}
