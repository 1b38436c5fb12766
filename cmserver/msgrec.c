/* What builds on the delivery record (record.c; DEST domain, see core.h):
 * the replay of a re-executed rank's requests from it, MPI_Cancel of a
 * receive, re-sent synchronous messages, and the garbage collection a
 * committed checkpoint allows. Above matching (msglog.c). */
#include "config.h"

#include "core_impl.h"

#include <stdlib.h>
#include <string.h>

/* ---- replay (fault tolerance) ---- */

static bool accepts(int32_t want_src, int32_t want_tag, uint32_t want_ctx, int32_t src, int32_t tag,
                    uint32_t ctx)
{
	return (want_src == CM_ANY_SOURCE || want_src == src) &&
	       (want_tag == CM_ANY_TAG || want_tag == tag) && want_ctx == ctx;
}

enum cm_replay cm_dest_replay(struct cm_core *core, struct cm_dest *d, struct cm_session *s,
                              const struct cm_header *h)
{
	if (h->clock < d->recs_base)
		return CM_REPLAY_LOST; /* a committed checkpoint covers it: collected */
	const struct cm_rec *rec = cm_rec_find(d, h->clock);
	if (rec == NULL)
		return CM_REPLAY_NONE;
	bool is_recv = h->type == CM_T_RECV_REQ;
	switch (rec->kind) {
	case CM_REC_DELIVER:
		if (!is_recv)
			return CM_REPLAY_DIVERGED;
		if (!accepts(h->src, h->tag, h->ctx, rec->e->src, rec->e->tag, rec->e->ctx))
			return CM_REPLAY_DIVERGED;
		if (!cm_emit_entry(core, rec->e, s, h->clock, 0)) {
			CM_STAT_ADD(core, replay_lost, 1);
			return CM_REPLAY_LOST;
		}
		CM_STAT_ADD(core, msgs_replayed, 1);
		return CM_REPLAY_DONE;
	case CM_REC_TRIMMED:
		CM_STAT_ADD(core, replay_lost, 1);
		return CM_REPLAY_LOST;
	case CM_REC_CANCELLED:
		/* Withdrawn before anything matched it: it takes nothing now
		 * either, and its CANCEL is answered from the record. The same
		 * request must come back (wildcards included). */
		if (!is_recv || h->src != rec->src || h->tag != rec->tag || h->ctx != rec->len)
			return CM_REPLAY_DIVERGED;
		return CM_REPLAY_DONE;
	case CM_REC_PROBE:
		if (is_recv)
			return CM_REPLAY_DIVERGED;
		if (rec->src >= 0 && !accepts(h->src, h->tag, h->ctx, rec->src, rec->tag, h->ctx))
			return CM_REPLAY_DIVERGED;
		cm_emit_probe_reply(s, h->clock, h->ctx, rec->src, rec->tag, rec->len);
		CM_STAT_ADD(core, probes_replayed, 1);
		return CM_REPLAY_DONE;
	default:
		return CM_REPLAY_NONE;
	}
}

static void send_sync_ack(struct cm_session *to, const struct cm_header *h)
{
	struct cm_header ack = {.type = CM_T_SYNC_ACK,
	                        .src = h->dst,
	                        .dst = h->src,
	                        .tag = h->tag,
	                        .ctx = h->ctx,
	                        .clock = h->clock};
	cm_core_emit_header(to, &ack);
}

void cm_dest_sync_duplicate(struct cm_core *core, struct cm_dest *d, struct cm_session *s,
                            const struct cm_header *h)
{
	/* A linear search, only for synchronous re-sends during a
	 * re-execution: the log is in arrival order, clocks of one sender
	 * increase along it. */
	struct cm_entry *e = d->log_head;
	while (e && !(e->src == h->src && e->clock == h->clock))
		e = e->log_next;
	CM_STAT_ADD(core, sync_acks_resent, 1);
	if (e == NULL || e->delivered) {
		/* Delivered (trimmed since, if not found): the receiver had it. */
		send_sync_ack(s, h);
		return;
	}
	/* Not matched yet: the ack goes to this connection when it is. */
	cm_session_ref(s);
	if (e->sync_sess)
		cm_session_release(e->sync_sess);
	e->sync_sess = s;
}

/* ---- cancel (MPI_Cancel of a receive) ---- */

static void emit_cancel_ack(struct cm_session *to, uint64_t req_id, bool cancelled)
{
	int32_t rank = cm_session_rank(to);
	struct cm_header ack = {.type = CM_T_CANCEL_ACK,
	                        .flags = cancelled ? CM_F_CANCELLED : 0,
	                        .src = rank,
	                        .dst = rank,
	                        .clock = req_id};
	cm_core_emit_header(to, &ack);
}

/* A pending receive request of s with this id. A linear walk of the
 * destination's pending waits: cancels are rare and waits few. Waits of
 * another session (an older incarnation being replaced) are not s's. */
static struct cm_wait *find_pending_recv(const struct cm_dest *d, const struct cm_session *s,
                                         uint64_t id)
{
	struct cm_wait *w;
	cm_list_for_each(w, &d->waits, struct cm_wait, all)
	{
		if (w->kind == CM_WAIT_RECV && w->id == id && w->sess == s)
			return w;
	}
	return NULL;
}

enum cm_cancel cm_dest_cancel(struct cm_core *core, struct cm_dest *d, struct cm_session *s,
                              const struct cm_header *h)
{
	(void)core;
	const struct cm_rec *rec = cm_rec_find(d, h->clock);
	if (rec != NULL) {
		switch (rec->kind) {
		case CM_REC_DELIVER:
		case CM_REC_TRIMMED:
			/* Matched: its DELIVER went out before this answer, on
			 * the same connection (or at its re-sent RECV_REQ). */
			emit_cancel_ack(s, h->clock, false);
			return CM_CANCEL_TOO_LATE;
		case CM_REC_CANCELLED:
			emit_cancel_ack(s, h->clock, true); /* a re-executed CANCEL */
			return CM_CANCEL_DONE;
		default:
			return CM_CANCEL_UNKNOWN; /* a probe id */
		}
	}
	struct cm_wait *w = find_pending_recv(d, s, h->clock);
	if (w == NULL)
		return CM_CANCEL_UNKNOWN;
	/* Recorded before the answer leaves (the pessimistic condition): a
	 * cancel that could not be recorded is refused rather than answered,
	 * or a re-execution could match the request instead. */
	struct cm_rec *slot = cm_rec_slot(d, h->clock);
	if (slot == NULL)
		return CM_CANCEL_NOMEM;
	slot->kind = CM_REC_CANCELLED;
	slot->e = NULL;
	slot->src = w->src;
	slot->tag = w->tag;
	slot->len = w->ctx;
	cm_dest_remove_wait(d, w);
	emit_cancel_ack(s, h->clock, true);
	return CM_CANCEL_DONE;
}

/* ---- garbage collection (a committed checkpoint) ---- */

/* Whether the log walk of a collection drops e. */
static bool collected(const struct cm_entry *e, uint64_t req_cut, uint64_t push_cut)
{
	if (cm_entry_pushed(e))
		return e->push_seq < push_cut;
	return e->delivered && e->req_id < req_cut;
}

void cm_dest_gc(struct cm_core *core, struct cm_dest *d, uint64_t req_cut, uint64_t ev_cut,
                uint64_t push_cut)
{
	if (req_cut > d->nrecs)
		req_cut = d->nrecs;
	uint64_t pushes_end = d->push_base + d->pushes.n;
	if (push_cut > pushes_end)
		push_cut = pushes_end;
	/* A message still arriving (cut-through) cannot be in a checkpoint
	 * image: neither it nor its record goes, nor anything after it. */
	for (const struct cm_entry *e = d->log_head; e; e = e->log_next) {
		if (!cm_buf_partial(e->payload))
			continue;
		if (cm_entry_pushed(e) && e->push_seq < push_cut)
			push_cut = e->push_seq;
		else if (!cm_entry_pushed(e) && e->delivered && e->req_id < req_cut)
			req_cut = e->req_id;
	}
	bool reqs = req_cut > d->recs_base, pushes = push_cut > d->push_base;
	if (reqs) {
		/* Spilled entries out of the log list: the record held them.
		 * First, while every record still points at a live entry. */
		uint64_t spilled = 0;
		for (uint64_t i = 0; i < req_cut - d->recs_base; i++) {
			struct cm_rec *r = &d->recs[i];
			if (r->kind != CM_REC_DELIVER || r->e->in_log)
				continue;
			cm_spill_forget(core, r->e);
			spilled++;
			cm_entry_free(r->e);
			r->e = NULL;
		}
		CM_STAT_ADD(core, log_entries_collected, spilled);
	}
	if (pushes)
		cm_push_gc(core, d, push_cut); /* those out of the log list */
	if (reqs || pushes) {
		/* Delivered to a request the image covers, or pushed before
		 * it: no incarnation asks for it again. Undelivered messages
		 * stay whatever their age. */
		struct cm_entry **link = &d->log_head, *prev = NULL;
		uint64_t kept = __atomic_load_n(&core->delivered_kept, __ATOMIC_RELAXED),
		         dropped = 0;
		while (*link) {
			struct cm_entry *e = *link;
			if (!collected(e, req_cut, push_cut)) {
				prev = e;
				link = &e->log_next;
				continue;
			}
			*link = e->log_next;
			if (d->log_tail == e)
				d->log_tail = prev;
			if (e->delivered)
				kept = __atomic_sub_fetch(&core->delivered_kept, cm_entry_cost(e),
				                          __ATOMIC_RELAXED);
			dropped++;
			if (e->spilled) {
				cm_spill_forget(core, e);
			} else {
				CM_STAT_SUB(core, log_bytes_held, e->len);
			}
			cm_entry_free(e);
		}
		if (dropped) {
			CM_STAT_SUB(core, log_entries_kept, dropped);
			CM_STAT_ADD(core, log_entries_collected, dropped);
			CM_STAT_SET(core, log_bytes_delivered_kept, kept);
		}
	}
	if (reqs) {
		uint64_t drop = req_cut - d->recs_base, used = d->nrecs - d->recs_base;
		memmove(d->recs, d->recs + drop, (size_t)(used - drop) * sizeof *d->recs);
		memset(d->recs + (used - drop), 0, (size_t)drop * sizeof *d->recs);
		d->recs_base = req_cut;
	}
	if (ev_cut > dest_nevents(d))
		ev_cut = dest_nevents(d);
	if (ev_cut > d->events_base) {
		uint64_t drop = ev_cut - d->events_base;
		cm_vec_drop_front(&d->events, (size_t)drop);
		d->events_base = ev_cut;
		CM_STAT_ADD(core, events_collected, drop);
	}
}
