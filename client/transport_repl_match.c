/* Acceptance and MPI matching for the replication transport.
 *
 * A message is matched only once all of it has arrived (a master can die
 * mid-message; its replacement re-sends it whole), and only in the order of
 * its sender's sequence for this pair: earlier sequences are duplicates
 * (dropped), later ones wait for the gap to close. The queues themselves
 * are transport_match.c's. MPI_Cancel of a receive is decided by every
 * replica's vote (repl_cancel, below). */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "transport_repl.h"

/* One allocation for the message and its payload. */
struct rmsg *repl_msg_new(size_t len)
{
	struct rmsg *u = malloc(sizeof *u + len);
	if (u == NULL)
		return NULL;
	memset(u, 0, sizeof *u);
	u->data = len ? u + 1 : NULL;
	return u;
}

void repl_msg_free(struct rmsg *u)
{
	free(u);
}

static void free_msg(struct rmsg *u)
{
	repl_msg_free(u);
}

static int accepts(const struct cm_req *r, int src, int tag, uint32_t ctx)
{
	return r->ctx == ctx && (r->peer == CM_ANY_SOURCE || r->peer == src) &&
	       (r->tag == CM_ANY_TAG || r->tag == tag);
}

/* Can a and b take a common message? */
static int overlap(const struct cm_req *a, const struct cm_req *b)
{
	return a->ctx == b->ctx &&
	       (a->peer == CM_ANY_SOURCE || b->peer == CM_ANY_SOURCE || a->peer == b->peer) &&
	       (a->tag == CM_ANY_TAG || b->tag == CM_ANY_TAG || a->tag == b->tag);
}

static void hold(struct repl *s, struct rmsg *u)
{
	u->m.next = NULL;
	if (s->held_tail)
		s->held_tail->m.next = &u->m;
	else
		s->held = u;
	s->held_tail = u;
}

static int add_choice(struct repl *s, uint64_t reqid, int src, int applied)
{
	if (s->nchoices == s->choices_cap) {
		size_t cap = s->choices_cap ? s->choices_cap * 2 : 64;
		struct repl_choice *v = realloc(s->choices, cap * sizeof *v);
		if (v == NULL) {
			cm_err("rank %d: out of memory for receive choices", s->rank);
			s->fatal = 1;
			return -1;
		}
		s->choices = v;
		s->choices_cap = cap;
	}
	s->choices[s->nchoices++] =
	    (struct repl_choice){.reqid = reqid, .src = src, .applied = applied};
	return 0;
}

/* A SYNC_ACK for a matched message goes to the process it came from, on
 * the connection we opened to it: every connection carries frames one way
 * only (see on_hello in transport_repl.c). */
static void sync_ack(struct repl *s, const struct rmsg *u)
{
	repl_flush_replicas(s); /* the choice that matched it goes first */
	struct cm_conn *c = repl_link_to(s, u->from);
	if (c && cm_conn_alive(c))
		cm_conn_send_ctl(c,
		                 &(struct cm_header){.type = CM_T_SYNC_ACK,
		                                     .src = s->rank,
		                                     .dst = u->m.src,
		                                     .tag = u->m.tag,
		                                     .ctx = u->m.ctx,
		                                     .clock = u->seq},
		                 NULL, 0);
}

static void deliver(struct repl *s, struct rmsg *u, struct cm_req *r)
{
	/* The master chooses for an MPI_ANY_SOURCE receive; a non-master's has
	 * taken the chosen source (repl_post_recv, repl_record_choice). */
	if (r->peer == CM_ANY_SOURCE && s->nrep > 1 && add_choice(s, r->id, u->m.src, 1) == 0)
		repl_send_choice(s, s->nchoices - 1);
	cm_match_deliver_copy(r, u->m.src, u->m.tag, u->data, u->m.len);
	if (u->sync && u->from >= 0)
		sync_ack(s, u);
	free_msg(u);
}

/* A message goes to the earliest posted receive that accepts it, unless
 * that one is deferred (what it takes is not known yet) or an earlier
 * message from the same source is held (messages from one source are
 * matched in order): then it is held, in arrival order. */
static void match(struct repl *s, struct rmsg *u)
{
	if (s->hold_matching) {
		hold(s, u);
		return;
	}
	for (struct rmsg *h = s->held; h; h = (struct rmsg *)h->m.next)
		if (h->m.src == u->m.src) {
			hold(s, u);
			return;
		}
	for (struct cm_req *r = s->match.posted_head; r; r = r->t_next) {
		if (!accepts(r, u->m.src, u->m.tag, u->m.ctx))
			continue;
		if (r->t_deferred) {
			hold(s, u);
			return;
		}
		cm_match_unpost(&s->match, r);
		deliver(s, u, r);
		return;
	}
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
	struct rmsg *u = repl_msg_new(req->slen);
	if (u == NULL) {
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

/* The choice our master made for receive reqid, if it has come: its
 * source (the choice is used up), or -1. */
static int take_choice(struct repl *s, uint64_t reqid)
{
	for (size_t i = s->unused_from; i < s->nchoices; i++) {
		struct repl_choice *c = &s->choices[i];
		if (c->applied || c->reqid != reqid)
			continue;
		c->applied = 1;
		while (s->unused_from < s->nchoices && s->choices[s->unused_from].applied)
			s->unused_from++;
		return c->src;
	}
	return -1;
}

/* Must r wait? It is an undecided MPI_ANY_SOURCE receive, or an earlier
 * deferred receive could take a message it could. */
static int must_defer(const struct repl *s, const struct cm_req *r, const struct cm_req *upto)
{
	if (r->peer == CM_ANY_SOURCE && s->nrep > 1 && !repl_is_master(s))
		return 1;
	for (const struct cm_req *d = s->match.posted_head; d && d != upto; d = d->t_next)
		if (d->t_deferred && overlap(d, r))
			return 1;
	return 0;
}

/* A choice came (or we became master): deferred receives that need not wait
 * any more take from the unexpected messages, in posting order, then the
 * held messages are matched again in arrival order. For one source, MPI's
 * matching does not depend on how posts and arrivals interleave: this
 * gives what the master got. */
static void resume(struct repl *s)
{
	for (struct cm_req *r = s->match.posted_head, *next; r; r = next) {
		next = r->t_next;
		if (!r->t_deferred)
			continue;
		r->t_deferred = 0;
		if (must_defer(s, r, r)) {
			r->t_deferred = 1;
			continue;
		}
		struct cm_msg *m = cm_match_take_unexpected(&s->match, r);
		if (m) {
			cm_match_unpost(&s->match, r);
			deliver(s, (struct rmsg *)m, r);
		}
	}
	if (s->hold_matching)
		return;
	struct rmsg *u = s->held;
	s->held = s->held_tail = NULL;
	while (u) {
		struct rmsg *next = (struct rmsg *)u->m.next;
		match(s, u);
		u = next;
	}
}

void repl_record_choice(struct repl *s, uint64_t reqid, int src)
{
	if (src < 0 || src >= s->size) {
		cm_err("rank %d replica %d: the master chose source %d for receive %llu", s->rank,
		       s->replica, src, (unsigned long long)reqid);
		s->fatal = 1;
		return;
	}
	for (struct cm_req *r = s->match.posted_head; r; r = r->t_next)
		if (r->id == reqid && r->peer == CM_ANY_SOURCE && r->t_deferred) {
			r->peer = src;
			add_choice(s, reqid, src, 1);
			resume(s);
			return;
		}
	if (reqid < s->reqid)
		return; /* ours was decided already (a new master re-sends them all) */
	for (size_t i = s->unused_from; i < s->nchoices; i++)
		if (s->choices[i].reqid == reqid)
			return;
	add_choice(s, reqid, src, 0);
}

int repl_find_arrived(const struct repl *s, int src, int tag, uint32_t ctx,
                      struct cm_probe_result *out)
{
	if (cm_match_find(&s->match, src, tag, ctx, out))
		return 1;
	for (const struct rmsg *h = s->held; h; h = (const struct rmsg *)h->m.next)
		if (h->m.src == src && h->m.tag == tag && h->m.ctx == ctx) {
			*out = (struct cm_probe_result){
			    .found = 1, .source = src, .tag = tag, .bytes = h->m.len};
			return 1;
		}
	return 0;
}

void repl_decide_own(struct repl *s)
{
	resume(s);
}

int repl_post_recv(struct repl *s, struct cm_req *req)
{
	req->t_deferred = 0;
	/* A choice the (old) master made for it stands, master or not. */
	if (req->peer == CM_ANY_SOURCE && s->nrep > 1) {
		int src = take_choice(s, req->id);
		if (src >= 0)
			req->peer = src;
	}
	if (must_defer(s, req, NULL)) {
		req->t_deferred = 1;
		cm_match_post(&s->match, req);
		return 0;
	}
	struct cm_msg *m = cm_match_take_unexpected(&s->match, req);
	if (m)
		deliver(s, (struct rmsg *)m, req);
	else
		cm_match_post(&s->match, req);
	return 0;
}

/* While a replica waits for its master's cancel decision, a message it
 * accepts must not match the receive being cancelled before the decision is
 * known; it is held, and matched in arrival order afterwards, exactly as it
 * would have been (the program posts nothing while it waits). */
void repl_hold_matching(struct repl *s, int on)
{
	s->hold_matching = on;
	if (!on)
		resume(s);
}

/* ---- MPI_Cancel ---- */

static int still_posted(const struct cm_matchq *q, const struct cm_req *req)
{
	for (const struct cm_req *r = q->posted_head; r; r = r->t_next)
		if (r == req)
			return 1;
	return 0;
}

/* A replica's vote for cancel number seq (EVENT from a higher replica). */
void repl_record_vote(struct repl *s, int from, const struct cm_header *h)
{
	int k = from % s->nrep;
	if (s->vote_have == NULL || k <= s->replica)
		return;
	s->vote_seq[k] = h->clock;
	s->vote_val[k] = s->event_in[0];
	s->vote_have[k] = 1;
}

/* Master: every live replica's vote for cancel seq is in; *all_posted says
 * whether each still had the receive posted. */
static int votes_in(const struct repl *s, uint64_t seq, int *all_posted)
{
	*all_posted = 1;
	for (int k = s->replica + 1; k < s->nrep; k++) {
		int p = s->rank * s->nrep + k;
		if (s->dead[p] || s->finished[p])
			continue;
		if (!s->vote_have[k] || s->vote_seq[k] != seq)
			return 0;
		*all_posted &= s->vote_val[k] != 0;
	}
	return 1;
}

/* Every replica matches in its own process, and a replica that runs behind
 * its master may already have matched a receive its master finds still
 * posted (the message, sent once the master was past the cancel, overtook
 * the replica), and has written its buffer. So the receive is cancelled
 * only if every live replica still has it posted: each replica, at its
 * MPI_Cancel, holds its matching (repl_hold_matching: what arrives waits)
 * and votes to the master; the master decides "cancelled" only if its own
 * and every vote say posted, logs the decision as an event (sent to the
 * replicas like an MPI_Wtime value), and everyone applies it. "Too late"
 * is safe everywhere: the message that matched the receive anywhere reaches
 * every replica and completes it there. A replica that becomes master while
 * it waits collects the votes itself (the others re-send theirs to it); a
 * decision the old master sent is in its log (it is the lowest survivor). */
int repl_cancel(struct cm_transport *t, struct cm_req *req, int *cancelled)
{
	struct repl *s = t->state;
	*cancelled = 0;
	if (s->vote_have == NULL) {
		s->vote_seq = calloc((size_t)s->nrep, sizeof *s->vote_seq);
		s->vote_val = calloc((size_t)s->nrep, 1);
		s->vote_have = calloc((size_t)s->nrep, 1);
		if (!s->vote_seq || !s->vote_val || !s->vote_have) {
			cm_err("rank %d: out of memory", s->rank);
			return -1;
		}
	}
	repl_hold_matching(s, 1);
	uint8_t posted = !req->done && still_posted(&s->match, req);
	uint64_t seq = s->ncancels++;
	int voted_to = -1, rc = 0, decision = -1;
	while (decision < 0 && rc == 0) {
		if (s->events_used < s->events.n) {
			const struct repl_event *e = &s->events.items[s->events_used++];
			if (e->kind != REPL_EV_CANCEL || e->len != 1) {
				cm_err(
				    "rank %d replica %d: event %zu is of kind %u where the program "
				    "cancels a receive: the replicas diverged",
				    s->rank, s->replica, s->events_used - 1, e->kind);
				rc = -1;
			}
			decision = e->value[0];
		} else if (repl_is_master(s)) {
			int all_posted;
			if (votes_in(s, seq, &all_posted)) {
				uint8_t d = posted && all_posted;
				if (repl_add_event(s, REPL_EV_CANCEL, &d, 1) < 0) {
					cm_err("rank %d: out of memory for events", s->rank);
					rc = -1;
					break;
				}
				s->events_used++;
				repl_send_event(s, s->events.n - 1);
				decision = d;
			}
		} else if (voted_to != repl_master_of(s, s->rank)) {
			voted_to = repl_master_of(s, s->rank);
			struct cm_conn *c = repl_link_to(s, s->rank * s->nrep + voted_to);
			if (c)
				cm_conn_send_ctl(c,
				                 &(struct cm_header){.type = CM_T_EVENT,
				                                     .src = s->rank,
				                                     .dst = s->rank,
				                                     .tag = REPL_VOTE_CANCEL,
				                                     .clock = seq},
				                 &posted, 1);
		}
		if (decision < 0 && rc == 0 && t->progress(t, -1) < 0)
			rc = -1;
	}
	if (rc == 0 && decision) {
		if (cm_match_unpost(&s->match, req)) {
			*cancelled = 1; /* deferred receives behind it may go on (resume) */
		} else {
			cm_err(
			    "rank %d replica %d: receive request %llu cancelled by every replica "
			    "but matched here: the replicas diverged",
			    s->rank, s->replica, (unsigned long long)req->id);
			rc = -1;
		}
	}
	repl_hold_matching(s, 0);
	return rc;
}

/* What a probe finds depends on what has arrived: the master's answer goes
 * to the replicas as an event (CM_EV_PROBE) and a non-master returns it,
 * "nothing" even if it has a match by now, or else the message the master
 * found (the first from that source with that tag: the same one everywhere,
 * since each pair's messages arrive in order), waiting for it if needed. */
int repl_probe(struct cm_transport *t, int src, int tag, uint32_t ctx, int blocking,
               struct cm_probe_result *out)
{
	struct repl *s = t->state;
	/* A non-master's own look does not block: what it needs may be held
	 * behind a receive waiting for its master's choice. */
	int master = repl_is_master(s);
	if (cm_match_probe(t, &s->match, s->rank, s->size, src, tag, ctx, blocking && master, out) <
	    0)
		return -1;
	uint8_t answer[8];
	int replayed;
	cm_put_u32(answer, (uint32_t)(out->found ? out->source : -1));
	cm_put_u32(answer + 4, (uint32_t)(out->found ? out->tag : -1));
	if (repl_event(t, CM_EV_PROBE, answer, sizeof answer, &replayed) < 0)
		return -1;
	if (!replayed) /* we lead (maybe promoted since our look): our answer stands
	                */
		return blocking && !out->found
		           ? cm_match_probe(t, &s->match, s->rank, s->size, src, tag, ctx, 1, out)
		           : 0;
	int32_t msrc = (int32_t)cm_get_u32(answer), mtag = (int32_t)cm_get_u32(answer + 4);
	if (msrc < 0 && !blocking) {
		memset(out, 0, sizeof *out);
		out->source = out->tag = -1;
		return 0;
	}
	if (msrc < 0 || msrc >= s->size || mtag < 0 || (src != CM_ANY_SOURCE && msrc != src) ||
	    (tag != CM_ANY_TAG && mtag != tag)) {
		cm_err("rank %d replica %d: the master's probe answer (source %d, tag %d) "
		       "does not "
		       "fit this probe (source %d, tag %d): the replicas diverged",
		       s->rank, s->replica, (int)msrc, (int)mtag, src, tag);
		return -1;
	}
	while (!repl_find_arrived(s, msrc, mtag, ctx, out))
		if (t->progress(t, -1) < 0)
			return -1;
	return 0;
}

void repl_free_queues(struct repl *s)
{
	s->hold_matching = 0;
	while (s->held) {
		struct rmsg *u = s->held;
		s->held = (struct rmsg *)u->m.next;
		free_msg(u);
	}
	s->held_tail = NULL;
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
