/* Sending side of the replication transport (transport_repl.c has the
 * overview): a master's messages go on the wire to every live replica of
 * their destination and are committed to its own replicas once written; a
 * non-master keeps them as backups until that commit, and re-sends them if
 * it becomes master. Also the MPI_Wtime events a master hands its
 * replicas. */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "transport_repl.h"

void repl_record_free(struct rrec *r)
{
	free(r->data);
	free(r);
}

/* Every write of an in-flight record is done (or its connection died):
 * commit it to our live replicas. */
static void maybe_commit(struct repl *s, struct rrec *r)
{
	if (r->pending > 0)
		return;
	for (int k = 0; k < s->nrep; k++) {
		int p = s->rank * s->nrep + k;
		if (k == s->replica || s->dead[p])
			continue;
		struct cm_conn *c = repl_link_to(s, p);
		if (c)
			cm_conn_send_ctl(c, CM_T_SYNC_ACK, 0, s->rank, s->rank, 0, 0,
			                 repl_key(r->dst, r->seq), NULL, 0);
	}
	/* unlink from the in-flight list */
	struct rrec **pp = &s->inflight;
	while (*pp && *pp != r)
		pp = &(*pp)->next;
	if (*pp)
		*pp = r->next;
	repl_record_free(r);
}

static int any_finished(const struct repl *s, int rank)
{
	for (int k = 0; k < s->nrep; k++)
		if (s->finished[rank * s->nrep + k])
			return 1;
	return 0;
}

/* Master: puts record r on the wire to every live replica of its
 * destination, ascending. */
int repl_wire_send(struct repl *s, struct rrec *r)
{
	r->next = s->inflight;
	s->inflight = r;
	r->pending = 1; /* held until every write is queued */
	int sent = 0;
	for (int k = 0; k < s->nrep; k++) {
		int p = r->dst * s->nrep + k;
		if (s->finished[p])
			continue;
		struct cm_conn *c = repl_link_to(s, p);
		if (c == NULL || !cm_conn_alive(c))
			continue;
		struct cm_header h = {.type = CM_T_MSG,
		                      .flags = r->sync ? CM_F_SYNC : 0,
		                      .src = s->rank,
		                      .dst = r->dst,
		                      .tag = r->tag,
		                      .ctx = r->ctx,
		                      .clock = r->seq};
		r->tok[k] = (struct cm_req){.t_priv = r, .t_off = CM_SEND_WAIT_WRITE};
		r->tok_conn[k] = c;
		r->pending++;
		if (cm_conn_send(c, &h, r->data, r->len, &r->tok[k], 0) < 0) {
			/* failed: the reaper settles its token */
			continue;
		}
		sent++;
	}
	if (repl_master_of(s, r->dst) < 0 && !any_finished(s, r->dst)) {
		cm_err("rank %d: cannot send to rank %d: every replica of it is dead", s->rank,
		       r->dst);
		s->fatal = 1;
	}
	r->pending--;
	maybe_commit(s, r);
	return s->fatal ? -1 : 0;
}

void repl_on_sent(struct cm_conn *c, struct cm_req *tok)
{
	struct repl *s = c->owner;
	struct rrec *r = tok->t_priv;
	int k = (int)(tok - r->tok);
	if (r->tok_conn[k] == NULL)
		return;
	r->tok_conn[k] = NULL;
	r->pending--;
	maybe_commit(s, r);
}

/* Connection c is going: its unwritten tokens will never be written. */
void repl_settle_conn(struct repl *s, struct cm_conn *c)
{
	struct rrec *r = s->inflight;
	while (r) {
		struct rrec *next = r->next;
		for (int k = 0; k < s->nrep; k++) {
			if (r->tok_conn[k] == c) {
				r->tok_conn[k] = NULL;
				r->pending--;
			}
		}
		maybe_commit(s, r); /* may free r */
		r = next;
	}
}

int repl_add_event(struct repl *s, uint32_t kind, const void *value, size_t len)
{
	if (s->nevents == s->events_cap) {
		size_t cap = s->events_cap ? s->events_cap * 2 : 64;
		struct repl_event *v = realloc(s->events, cap * sizeof *v);
		if (v == NULL)
			return -1;
		s->events = v;
		s->events_cap = cap;
	}
	struct repl_event *e = &s->events[s->nevents++];
	memset(e, 0, sizeof *e);
	e->kind = kind;
	e->len = (uint32_t)(len < CM_EVENT_PAYLOAD_MAX ? len : CM_EVENT_PAYLOAD_MAX);
	memcpy(e->value, value, e->len);
	return 0;
}

/* Master: event i to every live replica of ours, ascending (so the next
 * master, the lowest survivor, has every event any other one has). */
void repl_send_event(struct repl *s, size_t i)
{
	const struct repl_event *e = &s->events[i];
	for (int k = 0; k < s->nrep; k++) {
		int p = s->rank * s->nrep + k;
		if (k == s->replica || s->dead[p] || s->finished[p])
			continue;
		struct cm_conn *c = repl_link_to(s, p);
		if (c)
			cm_conn_send_ctl(c, CM_T_EVENT, 0, s->rank, s->rank, (int)e->kind, 0, i,
			                 e->value, e->len);
	}
}

void repl_send_choice(struct repl *s, size_t i)
{
	uint8_t src[4];
	cm_put_u32(src, (uint32_t)s->choices[i].src);
	for (int k = 0; k < s->nrep; k++) {
		int p = s->rank * s->nrep + k;
		if (k == s->replica || s->dead[p] || s->finished[p])
			continue;
		struct cm_conn *c = repl_link_to(s, p);
		if (c)
			cm_conn_send_ctl(c, CM_T_EVENT, 0, s->rank, s->rank, REPL_CHOICE, 0,
			                 s->choices[i].reqid, src, sizeof src);
	}
}

/* We have just become master: re-send our events, our choices for
 * MPI_ANY_SOURCE receives (the old master's included), our backups,
 * oldest first; then our receives still waiting for a choice are ours. */
static int promote(struct repl *s)
{
	for (size_t i = 0; i < s->nevents; i++)
		repl_send_event(s, i);
	for (size_t i = 0; i < s->nchoices; i++)
		repl_send_choice(s, i);
	struct rrec *r = s->backups;
	s->backups = s->backups_tail = NULL;
	int rc = 0;
	while (r) {
		struct rrec *next = r->next;
		if (rc == 0 && repl_wire_send(s, r) < 0)
			rc = -1;
		else if (rc < 0)
			repl_record_free(r);
		r = next;
	}
	repl_decide_own(s);
	return rc;
}

void repl_check_master(struct repl *s)
{
	if (!s->changed)
		return;
	s->changed = 0;
	if (!s->was_master && repl_is_master(s)) {
		s->was_master = 1;
		if (promote(s) < 0)
			s->fatal = 1;
	}
}

void repl_on_commit(struct repl *s, uint64_t key)
{
	int dst = (int)(key >> REPL_SEQ_BITS);
	uint64_t seq = key & REPL_SEQ_MASK;
	if (dst < 0 || dst >= s->size)
		return;
	if (seq + 1 > s->committed[dst])
		s->committed[dst] = seq + 1;
	struct rrec **pp = &s->backups, *prev = NULL;
	while (*pp) {
		struct rrec *r = *pp;
		if (r->dst == dst && r->seq <= seq) {
			*pp = r->next;
			repl_record_free(r);
			continue;
		}
		prev = r;
		pp = &r->next;
	}
	s->backups_tail = prev;
}
