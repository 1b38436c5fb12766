/* The delivery record, and what a log entry's payload becomes past the
 * memory budget (DEST domain, see core.h): the answer a rank was told for
 * each request id -- what a new incarnation is replayed from -- the move of
 * a payload to the spill store, and a DELIVER that reads it back. Below
 * matching (msglog.c) and replay, cancel and collection (msgrec.c); above
 * the output side (emit.c). */
#include "config.h"

#include "core_impl.h"

#include <stdlib.h>
#include <string.h>

/* Slot for request id, growing the record; NULL when the id is too far past
 * the record or memory is short (the answer then goes unrecorded and a
 * replay of it fails cleanly rather than inventing an answer). */
struct cm_rec *cm_rec_slot(struct cm_dest *d, uint64_t id)
{
	if (id < d->recs_base)
		return NULL; /* below a checkpoint's cut: nobody asks for it again */
	uint64_t slot = id - d->recs_base;
	if (slot >= d->recs_cap) {
		uint64_t posted = __atomic_load_n(&d->posted, __ATOMIC_RELAXED);
		if (id >= d->nrecs &&
		    (id - d->nrecs > CM_REC_MAX_GAP || id > 2 * posted + CM_REC_SLACK))
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

const struct cm_rec *cm_rec_find(const struct cm_dest *d, uint64_t id)
{
	if (id < d->recs_base || id >= d->nrecs || d->recs[id - d->recs_base].kind == CM_REC_NONE)
		return NULL;
	return &d->recs[id - d->recs_base];
}

void cm_entry_delivered(struct cm_core *core, struct cm_entry *e)
{
	e->delivered = true;
	uint64_t kept =
	    __atomic_add_fetch(&core->delivered_kept, cm_entry_cost(e), __ATOMIC_RELAXED);
	CM_STAT_ADD(core, msgs_delivered, 1);
	CM_STAT_SET(core, log_bytes_delivered_kept, kept);
}

bool cm_spill_entry(struct cm_core *core, struct cm_entry *e)
{
	const struct cm_spill_ops *sp = core->cfg.spill;
	const struct cm_journal_ops *j = core->cfg.journal;
	struct cm_buf *b = e->payload;
	if (j && j->read_extent && b && b->extent != CM_NO_EXTENT && !cm_buf_partial(b)) {
		/* Already written whole to the journal: no second copy. */
		e->extent = b->extent;
	} else if (sp == NULL) {
		return false;
	} else if (e->len > 0 && (sp->put_buf ? sp->put_buf(core->cfg.spill_ctx, e->dst, e->seq, b)
	                                      : sp->put(core->cfg.spill_ctx, e->dst, e->seq,
	                                                b->data, e->len)) < 0) {
		return false;
	}
	cm_buf_unref(e->payload);
	e->payload = NULL;
	e->spilled = true;
	CM_STAT_ADD(core, log_bytes_spilled, e->len);
	if (e->in_log)
		CM_STAT_SUB(core, log_bytes_held, e->len);
	return true;
}

void cm_spill_forget(struct cm_core *core, struct cm_entry *e)
{
	if (e->spilled && e->len > 0 && e->extent == CM_NO_EXTENT)
		core->cfg.spill->del(core->cfg.spill_ctx, e->dst, e->seq);
}

bool cm_emit_entry(struct cm_core *core, struct cm_entry *e, struct cm_session *to, uint64_t req_id,
                   uint16_t flags)
{
	if (!e->spilled || e->len == 0) {
		cm_emit_deliver(e, to, req_id, flags);
		return true;
	}
	/* Its payload back from the store into a buffer the output queue
	 * holds until written; the entry stays without. */
	struct cm_buf *b = cm_buf_new(core->cfg.mem, e->len);
	const struct cm_journal_ops *j = core->cfg.journal;
	if (b == NULL ||
	    (e->extent != CM_NO_EXTENT ? j->read_extent(j->ctx, e->extent, b->data, e->len)
	                               : core->cfg.spill->get(core->cfg.spill_ctx, e->dst, e->seq,
	                                                      b->data, e->len)) < 0) {
		cm_buf_unref(b);
		return false;
	}
	/* What a receive waits for past half the bound (input.c). */
	b->read_back = true;
	cm_logmem_read_back_start(core->cfg.mem, b->alloc);
	e->payload = b;
	cm_emit_deliver(e, to, req_id, flags);
	e->payload = NULL;
	cm_buf_unref(b);
	return true;
}
