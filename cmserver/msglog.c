/* Per-destination message logs and MPI matching (DEST domain, see core.h).
 *
 * The log of a destination holds every accepted message in arrival order,
 * delivered or not (the fault-tolerance work replays it). Undelivered
 * messages are also indexed in a hash table under four keys -- (src,tag,ctx),
 * (ANY,tag,ctx), (src,ANY,ctx), (ANY,ANY,ctx) -- each key with a FIFO list
 * in arrival order. Pending requests and blocking probes are filed under
 * their own key (wildcards included) in post order. So:
 *  - a new request finds the earliest message it accepts at the head of one
 *    list (one lookup, whatever its wildcards);
 *  - a new message finds the earliest request that accepts it among the heads
 *    of four lists (the four keys it matches).
 * Everything is O(1) per operation: no scan of the log, whatever its length
 * and whatever the posting order. */
#include "config.h"

#include "core_impl.h"

#include <stdlib.h>
#include <string.h>

#define KEEP_EMPTY_BUCKETS 1024 /* below this many keys, empty buckets are kept for reuse */

static int slot_of(int32_t src, int32_t tag)
{
	return (src == CM_ANY_SOURCE ? 1 : 0) | (tag == CM_ANY_TAG ? 2 : 0);
}

static size_t hash_key(int32_t src, int32_t tag, uint32_t ctx)
{
	uint64_t x = (uint64_t)(uint32_t)src * 0x9E3779B97F4A7C15ull;
	x ^= (uint64_t)(uint32_t)tag * 0xC2B2AE3D27D4EB4Full;
	x ^= (uint64_t)ctx * 0x165667B19E3779F9ull;
	x ^= x >> 29;
	x *= 0xBF58476D1CE4E5B9ull;
	x ^= x >> 32;
	return (size_t)x;
}

bool cm_dest_init(struct cm_dest *d)
{
	memset(d, 0, sizeof *d);
	d->table_size = 64;
	d->table = calloc(d->table_size, sizeof *d->table);
	return d->table != NULL;
}

void cm_dest_free(struct cm_dest *d)
{
	struct cm_entry *e = d->log_head;
	while (e) {
		struct cm_entry *next = e->log_next;
		cm_entry_free(e);
		e = next;
	}
	struct cm_wait *w = d->waits_head;
	while (w) {
		struct cm_wait *next = w->all_next;
		free(w);
		w = next;
	}
	for (size_t i = 0; i < d->table_size; i++) {
		struct cm_bucket *b = d->table ? d->table[i] : NULL;
		while (b) {
			struct cm_bucket *next = b->hnext;
			free(b);
			b = next;
		}
	}
	free(d->table);
	free(d->recs);
	free(d->events);
	memset(d, 0, sizeof *d);
}

/* ---- the delivery record (fault tolerance) ---- */

/* Slot for request id, growing the record; NULL when the id is too far past
 * the record or memory is short (the answer then goes unrecorded and a
 * replay of it fails cleanly rather than inventing an answer). */
static struct cm_rec *rec_slot(struct cm_dest *d, uint64_t id)
{
	if (id < d->recs_base)
		return NULL; /* below a checkpoint's cut: nobody asks for it again */
	uint64_t slot = id - d->recs_base;
	if (slot >= d->recs_cap) {
		if (id >= d->nrecs && id - d->nrecs > CM_REC_MAX_GAP)
			return NULL;
		uint64_t cap = d->recs_cap ? d->recs_cap : 64;
		while (cap <= slot)
			cap *= 2;
		struct cm_rec *r = realloc(d->recs, (size_t)cap * sizeof *r);
		if (r == NULL)
			return NULL;
		memset(r + d->recs_cap, 0, (size_t)(cap - d->recs_cap) * sizeof *r);
		d->recs = r;
		d->recs_cap = cap;
	}
	if (id >= d->nrecs)
		d->nrecs = id + 1;
	return &d->recs[slot];
}

static const struct cm_rec *rec_find(const struct cm_dest *d, uint64_t id)
{
	if (id < d->recs_base || id >= d->nrecs || d->recs[id - d->recs_base].kind == CM_REC_NONE)
		return NULL;
	return &d->recs[id - d->recs_base];
}

static struct cm_bucket *bucket_find(const struct cm_dest *d, int32_t src, int32_t tag,
                                     uint32_t ctx)
{
	struct cm_bucket *b = d->table[hash_key(src, tag, ctx) & (d->table_size - 1)];
	while (b && (b->src != src || b->tag != tag || b->ctx != ctx))
		b = b->hnext;
	return b;
}

static void table_grow(struct cm_dest *d)
{
	size_t nsize = d->table_size * 2;
	struct cm_bucket **nt = calloc(nsize, sizeof *nt);
	if (nt == NULL)
		return; /* keep the longer chains; still correct */
	for (size_t i = 0; i < d->table_size; i++) {
		struct cm_bucket *b = d->table[i];
		while (b) {
			struct cm_bucket *next = b->hnext;
			size_t h = hash_key(b->src, b->tag, b->ctx) & (nsize - 1);
			b->hnext = nt[h];
			nt[h] = b;
			b = next;
		}
	}
	free(d->table);
	d->table = nt;
	d->table_size = nsize;
}

static struct cm_bucket *bucket_get(struct cm_dest *d, int32_t src, int32_t tag, uint32_t ctx)
{
	struct cm_bucket *b = bucket_find(d, src, tag, ctx);
	if (b)
		return b;
	b = calloc(1, sizeof *b);
	if (b == NULL)
		return NULL;
	b->src = src;
	b->tag = tag;
	b->ctx = ctx;
	b->slot = slot_of(src, tag);
	size_t h = hash_key(src, tag, ctx) & (d->table_size - 1);
	b->hnext = d->table[h];
	d->table[h] = b;
	if (++d->buckets > d->table_size)
		table_grow(d);
	return b;
}

/* Frees b once nothing is filed under it, unless there are few keys (then
 * it is kept: a ping-pong would otherwise allocate and free four buckets per
 * message). */
static void bucket_release(struct cm_dest *d, struct cm_bucket *b)
{
	if (b->msg_head || b->req_head || b->probe_head || d->buckets <= KEEP_EMPTY_BUCKETS)
		return;
	struct cm_bucket **pp = &d->table[hash_key(b->src, b->tag, b->ctx) & (d->table_size - 1)];
	while (*pp != b)
		pp = &(*pp)->hnext;
	*pp = b->hnext;
	d->buckets--;
	free(b);
}

/* ---- message index ---- */

static bool index_msg(struct cm_dest *d, struct cm_entry *e)
{
	struct cm_bucket *bk[CM_NIDX];
	for (int k = 0; k < CM_NIDX; k++) {
		bk[k] = bucket_get(d, (k & 1) ? CM_ANY_SOURCE : e->src,
		                   (k & 2) ? CM_ANY_TAG : e->tag, e->ctx);
		if (bk[k] == NULL) {
			for (int j = 0; j < k; j++)
				bucket_release(d, bk[j]);
			return false;
		}
	}
	for (int k = 0; k < CM_NIDX; k++) {
		struct cm_bucket *b = bk[k];
		e->idx_bucket[k] = b;
		e->idx_next[k] = NULL;
		e->idx_prev[k] = b->msg_tail;
		if (b->msg_tail)
			b->msg_tail->idx_next[k] = e;
		else
			b->msg_head = e;
		b->msg_tail = e;
	}
	d->undelivered++;
	return true;
}

static void unindex_msg(struct cm_dest *d, struct cm_entry *e)
{
	for (int k = 0; k < CM_NIDX; k++) {
		struct cm_bucket *b = e->idx_bucket[k];
		if (b == NULL)
			continue;
		if (e->idx_prev[k])
			e->idx_prev[k]->idx_next[k] = e->idx_next[k];
		else
			b->msg_head = e->idx_next[k];
		if (e->idx_next[k])
			e->idx_next[k]->idx_prev[k] = e->idx_prev[k];
		else
			b->msg_tail = e->idx_prev[k];
		e->idx_bucket[k] = NULL;
		bucket_release(d, b);
	}
	d->undelivered--;
}

/* ---- waits (pending requests and blocking probes) ---- */

static struct cm_wait **wait_head(struct cm_bucket *b, enum cm_wait_kind kind)
{
	return kind == CM_WAIT_RECV ? &b->req_head : &b->probe_head;
}

static struct cm_wait **wait_tail(struct cm_bucket *b, enum cm_wait_kind kind)
{
	return kind == CM_WAIT_RECV ? &b->req_tail : &b->probe_tail;
}

static bool add_wait(struct cm_dest *d, struct cm_session *s, const struct cm_header *h,
                     enum cm_wait_kind kind)
{
	struct cm_bucket *b = bucket_get(d, h->src, h->tag, h->ctx);
	if (b == NULL)
		return false;
	struct cm_wait *w = malloc(sizeof *w);
	if (w == NULL) {
		bucket_release(d, b);
		return false;
	}
	w->bucket = b;
	w->sess = s;
	w->seq = d->next_wait_seq++;
	w->id = h->clock;
	w->src = h->src;
	w->tag = h->tag;
	w->ctx = h->ctx;
	w->kind = kind;

	struct cm_wait **head = wait_head(b, kind), **tail = wait_tail(b, kind);
	w->next = NULL;
	w->prev = *tail;
	if (*tail)
		(*tail)->next = w;
	else
		*head = w;
	*tail = w;

	w->all_next = NULL;
	w->all_prev = d->waits_tail;
	if (d->waits_tail)
		d->waits_tail->all_next = w;
	else
		d->waits_head = w;
	d->waits_tail = w;

	if (kind == CM_WAIT_RECV)
		d->nreqs++;
	else
		d->nprobes++;
	return true;
}

static void remove_wait(struct cm_dest *d, struct cm_wait *w)
{
	struct cm_bucket *b = w->bucket;
	struct cm_wait **head = wait_head(b, w->kind), **tail = wait_tail(b, w->kind);
	if (w->prev)
		w->prev->next = w->next;
	else
		*head = w->next;
	if (w->next)
		w->next->prev = w->prev;
	else
		*tail = w->prev;

	if (w->all_prev)
		w->all_prev->all_next = w->all_next;
	else
		d->waits_head = w->all_next;
	if (w->all_next)
		w->all_next->all_prev = w->all_prev;
	else
		d->waits_tail = w->all_prev;

	if (w->kind == CM_WAIT_RECV)
		d->nreqs--;
	else
		d->nprobes--;
	free(w);
	bucket_release(d, b);
}

void cm_dest_drop_session(struct cm_dest *d, struct cm_session *s)
{
	struct cm_wait *w = d->waits_head;
	while (w) {
		struct cm_wait *next = w->all_next;
		if (w->sess == s)
			remove_wait(d, w);
		w = next;
	}
}

/* ---- replies ---- */

static uint64_t entry_cost(const struct cm_entry *e)
{
	return sizeof *e + e->len;
}

static void emit_deliver(const struct cm_entry *e, struct cm_session *to, uint64_t req_id)
{
	struct cm_out_item it;
	struct cm_header h = {.type = CM_T_DELIVER,
	                      .src = e->src,
	                      .dst = e->dst,
	                      .tag = e->tag,
	                      .ctx = e->ctx,
	                      .len = e->len,
	                      .clock = req_id};
	cm_header_encode(&h, it.head);
	it.head_len = CM_HEADER_SIZE;
	it.body_len = e->len;
	it.body = e->payload ? e->payload->data : NULL;
	it.ref = e->payload;
	if (it.ref)
		cm_buf_ref(it.ref);
	cm_core_emit(to, &it);
}

static void deliver(struct cm_core *core, struct cm_entry *e, struct cm_session *to,
                    uint64_t req_id)
{
	e->delivered = true;
	e->req_id = req_id;
	struct cm_rec *rec = rec_slot(&core->dests[e->dst], req_id);
	if (rec) {
		rec->kind = CM_REC_DELIVER;
		rec->e = e;
	}
	emit_deliver(e, to, req_id);

	if (e->sync_sess) {
		struct cm_header ack = {.type = CM_T_SYNC_ACK,
		                        .src = e->dst,
		                        .dst = e->src,
		                        .tag = e->tag,
		                        .ctx = e->ctx,
		                        .clock = e->clock};
		if (!cm_session_closing(e->sync_sess)) /* and dropped if it is gone */
			cm_core_emit_header(e->sync_sess, &ack);
		cm_session_release(e->sync_sess);
		e->sync_sess = NULL;
	}
	uint64_t kept = __atomic_add_fetch(&core->delivered_kept, entry_cost(e), __ATOMIC_RELAXED);
	CM_STAT_ADD(core, msgs_delivered, 1);
	CM_STAT_SET(core, log_bytes_delivered_kept, kept);
}

static void emit_probe_reply(struct cm_session *to, uint64_t probe_id, uint32_t ctx, int32_t src,
                             int32_t tag, uint32_t len)
{
	struct cm_out_item it;
	struct cm_header h = {.type = CM_T_PROBE_REPLY,
	                      .flags = src >= 0 ? CM_F_FOUND : 0,
	                      .src = src,
	                      .dst = cm_session_rank(to),
	                      .tag = tag,
	                      .ctx = ctx,
	                      .len = CM_PROBE_REPLY_PAYLOAD,
	                      .clock = probe_id};
	cm_header_encode(&h, it.head);
	cm_put_u64(it.head + CM_HEADER_SIZE, len);
	it.head_len = CM_HEADER_SIZE + CM_PROBE_REPLY_PAYLOAD;
	it.body_len = 0;
	it.body = NULL;
	it.ref = NULL;
	cm_core_emit(to, &it);
}

/* Answers probe_id with e (or nothing found) and records the answer, so a
 * new incarnation asking the same probe id gets the same answer. */
static void probe_reply(struct cm_dest *d, struct cm_session *to, uint64_t probe_id, uint32_t ctx,
                        const struct cm_entry *e)
{
	int32_t src = e ? e->src : -1, tag = e ? e->tag : -1;
	uint32_t len = e ? e->len : 0;
	struct cm_rec *rec = rec_slot(d, probe_id);
	if (rec) {
		rec->kind = CM_REC_PROBE;
		rec->e = NULL;
		rec->src = src;
		rec->tag = tag;
		rec->len = len;
	}
	emit_probe_reply(to, probe_id, e ? e->ctx : ctx, src, tag, len);
}

/* ---- the three operations ---- */

static void log_append(struct cm_core *core, struct cm_dest *d, struct cm_entry *e)
{
	e->seq = d->next_seq++;
	e->log_next = NULL;
	if (d->log_tail)
		d->log_tail->log_next = e;
	else
		d->log_head = e;
	d->log_tail = e;
	CM_STAT_ADD(core, msgs_logged, 1);
	CM_STAT_ADD(core, bytes_logged, e->len);
	CM_STAT_ADD(core, log_entries_kept, 1);
}

bool cm_dest_add_msg(struct cm_core *core, struct cm_dest *d, struct cm_entry *e)
{
	while (d->nreqs > 0) {
		/* The earliest pending request among the four keys e matches. */
		struct cm_wait *best = NULL;
		for (int k = 0; k < CM_NIDX; k++) {
			struct cm_bucket *b = bucket_find(d, (k & 1) ? CM_ANY_SOURCE : e->src,
			                                  (k & 2) ? CM_ANY_TAG : e->tag, e->ctx);
			if (b && b->req_head && (best == NULL || b->req_head->seq < best->seq))
				best = b->req_head;
		}
		if (best == NULL)
			break;
		if (cm_session_closing(best->sess)) {
			/* Its connection is going away: the message waits for the
			 * rank's next connection instead. */
			remove_wait(d, best);
			continue;
		}
		log_append(core, d, e);
		deliver(core, e, best->sess, best->id);
		remove_wait(d, best);
		return true;
	}
	if (!index_msg(d, e)) {
		cm_entry_free(e);
		return false;
	}
	log_append(core, d, e);

	if (d->nprobes > 0) {
		/* Still undelivered: answer every blocking probe it satisfies. */
		for (int k = 0; k < CM_NIDX; k++) {
			struct cm_bucket *b = e->idx_bucket[k];
			while (b->probe_head) {
				struct cm_wait *w = b->probe_head;
				if (!cm_session_closing(w->sess))
					probe_reply(d, w->sess, w->id, w->ctx, e);
				remove_wait(d, w);
			}
		}
	}
	return true;
}

bool cm_dest_post_recv(struct cm_core *core, struct cm_dest *d, struct cm_session *s,
                       const struct cm_header *h)
{
	struct cm_bucket *b = d->undelivered ? bucket_find(d, h->src, h->tag, h->ctx) : NULL;
	if (b && b->msg_head) {
		struct cm_entry *e = b->msg_head;
		unindex_msg(d, e);
		deliver(core, e, s, h->clock);
		return true;
	}
	return add_wait(d, s, h, CM_WAIT_RECV);
}

bool cm_dest_probe(struct cm_core *core, struct cm_dest *d, struct cm_session *s,
                   const struct cm_header *h)
{
	struct cm_bucket *b = d->undelivered ? bucket_find(d, h->src, h->tag, h->ctx) : NULL;
	if (b && b->msg_head) {
		probe_reply(d, s, h->clock, h->ctx, b->msg_head);
		return true;
	}
	if (h->flags & CM_F_BLOCKING)
		return add_wait(d, s, h, CM_WAIT_PROBE);
	probe_reply(d, s, h->clock, h->ctx, NULL);
	return true;
}

void cm_dest_trim(struct cm_core *core, struct cm_dest *d)
{
	uint64_t kept = __atomic_load_n(&core->delivered_kept, __ATOMIC_RELAXED);
	while (kept > core->cfg.log_mem && d->log_head && d->log_head->delivered) {
		struct cm_entry *e = d->log_head;
		d->log_head = e->log_next;
		if (d->log_head == NULL)
			d->log_tail = NULL;
		kept = __atomic_sub_fetch(&core->delivered_kept, entry_cost(e), __ATOMIC_RELAXED);
		CM_STAT_SUB(core, log_entries_kept, 1);
		struct cm_rec *r = (struct cm_rec *)rec_find(d, e->req_id);
		if (r && r->e == e) {
			r->kind = CM_REC_TRIMMED;
			r->e = NULL;
		}
		cm_entry_free(e);
	}
	CM_STAT_SET(core, log_bytes_delivered_kept, kept);
}

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
	const struct cm_rec *rec = rec_find(d, h->clock);
	if (rec == NULL)
		return CM_REPLAY_NONE;
	bool is_recv = h->type == CM_T_RECV_REQ;
	switch (rec->kind) {
	case CM_REC_DELIVER:
		if (!is_recv)
			return CM_REPLAY_DIVERGED;
		if (!accepts(h->src, h->tag, h->ctx, rec->e->src, rec->e->tag, rec->e->ctx))
			return CM_REPLAY_DIVERGED;
		emit_deliver(rec->e, s, h->clock);
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
		emit_probe_reply(s, h->clock, h->ctx, rec->src, rec->tag, rec->len);
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
	for (struct cm_wait *w = d->waits_head; w; w = w->all_next)
		if (w->kind == CM_WAIT_RECV && w->id == id && w->sess == s)
			return w;
	return NULL;
}

enum cm_cancel cm_dest_cancel(struct cm_core *core, struct cm_dest *d, struct cm_session *s,
                              const struct cm_header *h)
{
	(void)core;
	const struct cm_rec *rec = rec_find(d, h->clock);
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
	struct cm_rec *slot = rec_slot(d, h->clock);
	if (slot == NULL)
		return CM_CANCEL_NOMEM;
	slot->kind = CM_REC_CANCELLED;
	slot->e = NULL;
	slot->src = w->src;
	slot->tag = w->tag;
	slot->len = w->ctx;
	remove_wait(d, w);
	emit_cancel_ack(s, h->clock, true);
	return CM_CANCEL_DONE;
}

/* ---- garbage collection (a committed checkpoint) ---- */

void cm_dest_gc(struct cm_core *core, struct cm_dest *d, uint64_t req_cut, uint64_t ev_cut)
{
	if (req_cut > d->nrecs)
		req_cut = d->nrecs;
	if (req_cut > d->recs_base) {
		/* Delivered to a request the image covers: no incarnation asks for
		 * it again. Undelivered messages stay whatever their age. */
		struct cm_entry **link = &d->log_head, *prev = NULL;
		uint64_t kept = 0, dropped = 0;
		while (*link) {
			struct cm_entry *e = *link;
			if (!e->delivered || e->req_id >= req_cut) {
				prev = e;
				link = &e->log_next;
				continue;
			}
			*link = e->log_next;
			if (d->log_tail == e)
				d->log_tail = prev;
			kept = __atomic_sub_fetch(&core->delivered_kept, entry_cost(e),
			                          __ATOMIC_RELAXED);
			dropped++;
			cm_entry_free(e);
		}
		if (dropped) {
			CM_STAT_SUB(core, log_entries_kept, dropped);
			CM_STAT_ADD(core, log_entries_collected, dropped);
			CM_STAT_SET(core, log_bytes_delivered_kept, kept);
		}
		uint64_t drop = req_cut - d->recs_base, used = d->nrecs - d->recs_base;
		memmove(d->recs, d->recs + drop, (size_t)(used - drop) * sizeof *d->recs);
		memset(d->recs + (used - drop), 0, (size_t)drop * sizeof *d->recs);
		d->recs_base = req_cut;
	}
	if (ev_cut > d->nevents)
		ev_cut = d->nevents;
	if (ev_cut > d->events_base) {
		uint64_t drop = ev_cut - d->events_base, used = d->nevents - d->events_base;
		memmove(d->events, d->events + drop, (size_t)(used - drop) * sizeof *d->events);
		d->events_base = ev_cut;
		CM_STAT_ADD(core, events_collected, drop);
	}
}
