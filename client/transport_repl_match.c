/* Acceptance and MPI matching for the replication transport.
 *
 * A message is matched only once all of it has arrived (a master can die
 * mid-message; its replacement re-sends it whole), and only in the order of
 * its sender's sequence for this pair: earlier sequences are duplicates
 * (dropped), later ones wait for the gap to close. */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "transport_repl.h"

static int accepts(const struct cm_req *r, int src, int tag, uint32_t ctx)
{
	return r->ctx == ctx && (r->peer == CM_ANY_SOURCE || r->peer == src) &&
	       (r->tag == CM_ANY_TAG || r->tag == tag);
}

static void free_msg(struct rmsg *u)
{
	free(u->data);
	free(u);
}

static void deliver(struct repl *s, struct rmsg *u, struct cm_req *r)
{
	r->st_source = u->src;
	r->st_tag = u->tag;
	r->st_bytes = u->len;
	r->error = u->len > r->rcap ? CM_REQ_ERR_TRUNCATE : 0;
	size_t n = u->len < r->rcap ? u->len : r->rcap;
	if (n > 0)
		memcpy(r->rbuf, u->data, n);
	if (u->sync && u->from >= 0)
		repl_sync_ack(s, u);
	free_msg(u);
	r->done = 1;
}

static void match(struct repl *s, struct rmsg *u)
{
	struct cm_req *prev = NULL;
	for (struct cm_req *r = s->posted_head; r; prev = r, r = r->t_next) {
		if (!accepts(r, u->src, u->tag, u->ctx))
			continue;
		if (prev)
			prev->t_next = r->t_next;
		else
			s->posted_head = r->t_next;
		if (s->posted_tail == r)
			s->posted_tail = prev;
		r->t_next = NULL;
		deliver(s, u, r);
		return;
	}
	u->next = NULL;
	if (s->unexp_tail)
		s->unexp_tail->next = u;
	else
		s->unexp_head = u;
	s->unexp_tail = u;
}

void repl_accept(struct repl *s, struct rmsg *u)
{
	if (u->seq < s->nextseq[u->src]) {
		free_msg(u); /* a re-send of what we have */
		return;
	}
	if (u->seq > s->nextseq[u->src]) {
		for (struct rmsg *e = s->early; e; e = e->next)
			if (e->src == u->src && e->seq == u->seq) {
				free_msg(u);
				return;
			}
		u->next = s->early;
		s->early = u;
		return;
	}
	s->nextseq[u->src]++;
	match(s, u);
	/* The gap behind held messages may have closed. */
	for (int again = 1; again;) {
		again = 0;
		struct rmsg **pp = &s->early;
		while (*pp) {
			struct rmsg *e = *pp;
			if (e->seq < s->nextseq[e->src]) {
				*pp = e->next;
				free_msg(e);
				continue;
			}
			if (e->seq == s->nextseq[e->src]) {
				*pp = e->next;
				s->nextseq[e->src]++;
				match(s, e);
				again = 1;
				break;
			}
			pp = &e->next;
		}
	}
}

/* Every replica does its sends to itself locally: nothing on the wire. A
 * synchronous send to self completes at once (eager copy): a replica must
 * not wait on its own receive being posted later. */
int repl_self_send(struct repl *s, struct cm_req *req)
{
	struct rmsg *u = calloc(1, sizeof *u);
	if (u == NULL || (req->slen && (u->data = malloc(req->slen)) == NULL)) {
		free(u);
		cm_err("rank %d: out of memory for a %zu-byte message to self", s->rank, req->slen);
		return -1;
	}
	u->src = s->rank;
	u->tag = req->tag;
	u->ctx = req->ctx;
	u->len = req->slen;
	u->from = -1;
	if (req->slen)
		memcpy(u->data, req->sbuf, req->slen);
	match(s, u);
	req->done = 1;
	return 0;
}

int repl_post_recv(struct repl *s, struct cm_req *req)
{
	struct rmsg *prev = NULL;
	for (struct rmsg *u = s->unexp_head; u; prev = u, u = u->next) {
		if (!accepts(req, u->src, u->tag, u->ctx))
			continue;
		if (prev)
			prev->next = u->next;
		else
			s->unexp_head = u->next;
		if (s->unexp_tail == u)
			s->unexp_tail = prev;
		deliver(s, u, req);
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

int repl_find_unexpected(struct repl *s, int src, int tag, uint32_t ctx,
                         struct cm_probe_result *out)
{
	struct cm_req probe = {.peer = src, .tag = tag, .ctx = ctx};
	for (struct rmsg *u = s->unexp_head; u; u = u->next) {
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

void repl_free_queues(struct repl *s)
{
	while (s->unexp_head) {
		struct rmsg *u = s->unexp_head;
		s->unexp_head = u->next;
		free_msg(u);
	}
	while (s->early) {
		struct rmsg *u = s->early;
		s->early = u->next;
		free_msg(u);
	}
	s->unexp_tail = NULL;
	s->posted_head = s->posted_tail = NULL;
}
