/* Acceptance and MPI matching for the replication transport.
 *
 * A message is matched only once all of it has arrived (a master can die
 * mid-message; its replacement re-sends it whole), and only in the order of
 * its sender's sequence for this pair: earlier sequences are duplicates
 * (dropped), later ones wait for the gap to close. The queues themselves
 * are transport_match.c's. */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "transport_repl.h"

static void free_msg(struct rmsg *u)
{
	free(u->data);
	free(u);
}

static void deliver(struct repl *s, struct rmsg *u, struct cm_req *r)
{
	cm_match_deliver_copy(r, u->m.src, u->m.tag, u->data, u->m.len);
	if (u->sync && u->from >= 0)
		repl_sync_ack(s, u);
	free_msg(u);
}

static void match(struct repl *s, struct rmsg *u)
{
	struct cm_req *r = cm_match_take_posted(&s->match, u->m.src, u->m.tag, u->m.ctx);
	if (r)
		deliver(s, u, r);
	else
		cm_match_add_unexpected(&s->match, &u->m);
}

void repl_accept(struct repl *s, struct rmsg *u)
{
	int src = u->m.src;
	if (u->seq < s->nextseq[src]) {
		free_msg(u); /* a re-send of what we have */
		return;
	}
	if (u->seq > s->nextseq[src]) {
		for (struct rmsg *e = s->early; e; e = e->early)
			if (e->m.src == src && e->seq == u->seq) {
				free_msg(u);
				return;
			}
		u->early = s->early;
		s->early = u;
		return;
	}
	s->nextseq[src]++;
	match(s, u);
	/* The gap behind held messages may have closed. */
	for (int again = 1; again;) {
		again = 0;
		struct rmsg **pp = &s->early;
		while (*pp) {
			struct rmsg *e = *pp;
			if (e->seq < s->nextseq[e->m.src]) {
				*pp = e->early;
				free_msg(e);
				continue;
			}
			if (e->seq == s->nextseq[e->m.src]) {
				*pp = e->early;
				s->nextseq[e->m.src]++;
				match(s, e);
				again = 1;
				break;
			}
			pp = &e->early;
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
	u->m = (struct cm_msg){.src = s->rank, .tag = req->tag, .ctx = req->ctx, .len = req->slen};
	u->from = -1;
	if (req->slen)
		memcpy(u->data, req->sbuf, req->slen);
	match(s, u);
	req->done = 1;
	return 0;
}

int repl_post_recv(struct repl *s, struct cm_req *req)
{
	struct cm_msg *m = cm_match_take_unexpected(&s->match, req);
	if (m)
		deliver(s, (struct rmsg *)m, req);
	else
		cm_match_post(&s->match, req);
	return 0;
}

void repl_free_queues(struct repl *s)
{
	while (s->match.unexp_head) {
		struct rmsg *u = (struct rmsg *)s->match.unexp_head;
		s->match.unexp_head = u->m.next;
		free_msg(u);
	}
	while (s->early) {
		struct rmsg *u = s->early;
		s->early = u->early;
		free_msg(u);
	}
	s->match = (struct cm_matchq){0};
}
