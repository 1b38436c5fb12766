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
 * and whatever the posting order. Below replay (msgrec.c); above the
 * delivery record (record.c) and emission (emit.c). */
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
	cm_list_init(&d->waits);
	d->table_size = 64;
	d->table = calloc(d->table_size, sizeof *d->table);
	return d->table != NULL;
}

void cm_dest_free(struct cm_dest *d)
{
	for (uint64_t i = 0; d->recs && i < d->nrecs - d->recs_base; i++)
		if (d->recs[i].kind == CM_REC_DELIVER && !d->recs[i].e->in_log)
			cm_entry_free(d->recs[i].e); /* spilled, in no log list any more */
	cm_push_free(d);
	struct cm_entry *e = d->log_head;
	while (e) {
		struct cm_entry *next = e->log_next;
		cm_entry_free(e);
		e = next;
	}
	struct cm_wait *w;
	if (d->waits.next) /* initialised */
		cm_list_for_each(w, &d->waits, struct cm_wait, all)
		{
			free(w);
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
	cm_vec_free(&d->events);
	memset(d, 0, sizeof *d);
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
	cm_list_init(&b->msgs);
	cm_list_init(&b->reqs);
	cm_list_init(&b->probes);
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
	if (!cm_list_empty(&b->msgs) || !cm_list_empty(&b->reqs) || !cm_list_empty(&b->probes) ||
	    d->buckets <= KEEP_EMPTY_BUCKETS)
		return;
	struct cm_bucket **pp = &d->table[hash_key(b->src, b->tag, b->ctx) & (d->table_size - 1)];
	while (*pp != b)
		pp = &(*pp)->hnext;
	*pp = b->hnext;
	d->buckets--;
	free(b);
}

/* ---- message index ---- */

/* The earliest undelivered message filed under b, or NULL. Entries are
 * linked into b through idx[b->slot], so the member's offset depends on b. */
static struct cm_entry *bucket_first_msg(const struct cm_bucket *b)
{
	if (cm_list_empty(&b->msgs))
		return NULL;
	return cm_container_of(b->msgs.next - b->slot, struct cm_entry, idx);
}

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
		cm_list_push_back(&b->msgs, &e->idx[k]);
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
		cm_list_remove(&e->idx[k]);
		e->idx_bucket[k] = NULL;
		bucket_release(d, b);
	}
	d->undelivered--;
}

/* ---- waits (pending requests and blocking probes) ---- */

/* The earliest wait on list l (a bucket's reqs or probes), or NULL. */
static struct cm_wait *first_wait(const struct cm_list *l)
{
	return cm_list_entry(cm_list_first(l), struct cm_wait, link);
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

	cm_list_push_back(kind == CM_WAIT_RECV ? &b->reqs : &b->probes, &w->link);
	cm_list_push_back(&d->waits, &w->all);

	if (kind == CM_WAIT_RECV)
		d->nreqs++;
	else
		d->nprobes++;
	return true;
}

void cm_dest_remove_wait(struct cm_dest *d, struct cm_wait *w)
{
	struct cm_bucket *b = w->bucket;
	cm_list_remove(&w->link);
	cm_list_remove(&w->all);

	if (w->kind == CM_WAIT_RECV)
		d->nreqs--;
	else
		d->nprobes--;
	free(w);
	bucket_release(d, b);
}

void cm_dest_drop_session(struct cm_dest *d, struct cm_session *s)
{
	struct cm_wait *w;
	cm_list_for_each(w, &d->waits, struct cm_wait, all)
	{
		if (w->sess == s)
			cm_dest_remove_wait(d, w);
	}
	cm_push_drop_session(d, s);
}

/* ---- replies ---- */

static void deliver(struct cm_core *core, struct cm_entry *e, struct cm_session *to,
                    uint64_t req_id)
{
	e->req_id = req_id;
	struct cm_rec *rec = cm_rec_slot(&core->dests[e->dst], req_id);
	if (rec) {
		rec->kind = CM_REC_DELIVER;
		rec->e = e;
	}
	if (!cm_emit_entry(core, e, to, req_id, 0))
		cm_session_fail(to, CM_E_STATE,
		                "message %llu for rank %d cannot be read back from the spill store",
		                (unsigned long long)e->seq, (int)e->dst);

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
	cm_entry_delivered(core, e);
}

/* Answers probe_id with e (or nothing found) and records the answer, so a
 * new incarnation asking the same probe id gets the same answer. */
static void probe_reply(struct cm_dest *d, struct cm_session *to, uint64_t probe_id, uint32_t ctx,
                        const struct cm_entry *e)
{
	int32_t src = e ? e->src : -1, tag = e ? e->tag : -1;
	uint32_t len = e ? e->len : 0;
	struct cm_rec *rec = cm_rec_slot(d, probe_id);
	if (rec) {
		rec->kind = CM_REC_PROBE;
		rec->e = NULL;
		rec->src = src;
		rec->tag = tag;
		rec->len = len;
	}
	cm_emit_probe_reply(to, probe_id, e ? e->ctx : ctx, src, tag, len);
}

/* ---- the three operations ---- */

/* Past three quarters of the bound (or always, force: a sender is held), a
 * complete message nobody asked for yet goes to disk: its receiver may be
 * held back itself, its requests queued behind a MSG, and only freeing
 * memory lets it on. */
static void spill_unasked(struct cm_core *core, struct cm_entry *e, bool force)
{
	if (!e->delivered && e->payload && !cm_buf_partial(e->payload) &&
	    (force || cm_logmem_over(core->cfg.mem, 192)))
		cm_spill_entry(core, e);
}

static void log_append(struct cm_core *core, struct cm_dest *d, struct cm_entry *e)
{
	e->seq = d->next_seq++;
	e->log_next = NULL;
	if (d->log_tail)
		d->log_tail->log_next = e;
	else
		d->log_head = e;
	d->log_tail = e;
	e->in_log = true;
	CM_STAT_ADD(core, msgs_logged, 1);
	CM_STAT_ADD(core, bytes_logged, e->len);
	CM_STAT_ADD(core, log_bytes_held, e->len);
	CM_STAT_ADD(core, log_entries_kept, 1);
}

bool cm_dest_add_msg(struct cm_core *core, struct cm_dest *d, struct cm_entry *e)
{
	if (cm_entry_pushed(e)) {
		/* The rank matches it: never indexed here, never requested. */
		if (!cm_push_add(d, e)) {
			cm_entry_free(e);
			return false;
		}
		log_append(core, d, e);
		cm_push_pump(core, d);
		return true;
	}
	while (d->nreqs > 0) {
		/* The earliest pending request among the four keys e matches. */
		struct cm_wait *best = NULL;
		for (int k = 0; k < CM_NIDX; k++) {
			struct cm_bucket *b = bucket_find(d, (k & 1) ? CM_ANY_SOURCE : e->src,
			                                  (k & 2) ? CM_ANY_TAG : e->tag, e->ctx);
			struct cm_wait *w = b ? first_wait(&b->reqs) : NULL;
			if (w && (best == NULL || w->seq < best->seq))
				best = w;
		}
		if (best == NULL)
			break;
		if (cm_session_closing(best->sess)) {
			/* Its connection is going away: the message waits for the
			 * rank's next connection instead. */
			cm_dest_remove_wait(d, best);
			continue;
		}
		log_append(core, d, e);
		deliver(core, e, best->sess, best->id);
		cm_dest_remove_wait(d, best);
		return true;
	}
	if (!index_msg(d, e)) {
		cm_entry_free(e);
		return false;
	}
	log_append(core, d, e);
	spill_unasked(core, e, false);

	if (d->nprobes > 0) {
		/* Still undelivered: answer every blocking probe it satisfies. */
		for (int k = 0; k < CM_NIDX; k++) {
			struct cm_bucket *b = e->idx_bucket[k];
			struct cm_wait *w;
			while ((w = first_wait(&b->probes)) != NULL) {
				if (!cm_session_closing(w->sess))
					probe_reply(d, w->sess, w->id, w->ctx, e);
				cm_dest_remove_wait(d, w);
			}
		}
	}
	return true;
}

bool cm_dest_post_recv(struct cm_core *core, struct cm_dest *d, struct cm_session *s,
                       const struct cm_header *h)
{
	struct cm_bucket *b = d->undelivered ? bucket_find(d, h->src, h->tag, h->ctx) : NULL;
	struct cm_entry *e = b ? bucket_first_msg(b) : NULL;
	if (e) {
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
	struct cm_entry *e = b ? bucket_first_msg(b) : NULL;
	if (e) {
		probe_reply(d, s, h->clock, h->ctx, e);
		return true;
	}
	if (h->flags & CM_F_BLOCKING)
		return add_wait(d, s, h, CM_WAIT_PROBE);
	probe_reply(d, s, h->clock, h->ctx, NULL);
	return true;
}

/* Past the delivered-bytes budget (cfg.log_mem) or half the memory bound
 * (cfg.mem), delivered entries leave memory, oldest first. */
static bool over_budget(struct cm_core *core, uint64_t kept)
{
	return kept > core->cfg.log_mem || cm_logmem_over(core->cfg.mem, 128);
}

/* Undelivered entries the trim walks past to reach delivered ones behind
 * them, per call: a message nobody receives must not pin the rest of the
 * log in memory, nor make every trim walk the whole log. */
#define TRIM_SKIP_MAX 64

static void trim(struct cm_core *core, struct cm_dest *d, bool force)
{
	uint64_t kept = __atomic_load_n(&core->delivered_kept, __ATOMIC_RELAXED);
	struct cm_entry **link = &d->log_head, *prev = NULL;
	unsigned skipped = 0;
	while (*link && (force || over_budget(core, kept))) {
		struct cm_entry *e = *link;
		/* A payload still arriving (cut-through) is not fully logged:
		 * it stays, as does an undelivered message (spilled, near the
		 * bound, once complete). */
		if (!e->delivered || cm_buf_partial(e->payload)) {
			spill_unasked(core, e, force);
			if (++skipped > TRIM_SKIP_MAX && !force)
				break;
			prev = e;
			link = &e->log_next;
			continue;
		}
		*link = e->log_next;
		if (d->log_tail == e)
			d->log_tail = prev;
		e->log_next = NULL;
		e->in_log = false;
		kept =
		    __atomic_sub_fetch(&core->delivered_kept, cm_entry_cost(e), __ATOMIC_RELAXED);
		CM_STAT_SUB(core, log_entries_kept, 1);
		if (!e->spilled)
			CM_STAT_SUB(core, log_bytes_held, e->len);
		if (cm_entry_pushed(e)) {
			if (e->spilled || cm_spill_entry(core, e))
				continue; /* the push order keeps it, payload on disk */
			cm_push_lost(d, e);
			cm_entry_free(e);
			continue;
		}
		struct cm_rec *r = (struct cm_rec *)cm_rec_find(d, e->req_id);
		bool recorded = r && r->e == e;
		if (recorded && (e->spilled || cm_spill_entry(core, e)))
			continue; /* the record alone keeps it, payload on disk */
		if (recorded) {
			r->kind = CM_REC_TRIMMED;
			r->e = NULL;
		}
		cm_spill_forget(core, e);
		cm_entry_free(e);
	}
	CM_STAT_SET(core, log_bytes_delivered_kept, kept);
}

void cm_dest_trim(struct cm_core *core, struct cm_dest *d)
{
	trim(core, d, false);
}

void cm_dest_relieve(struct cm_core *core, struct cm_dest *d)
{
	if (core->cfg.spill)
		trim(core, d, true);
}
