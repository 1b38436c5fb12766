/* The output side of the protocol core, its lowest layer: reference-counted
 * payload buffers (and the sessions waiting on a cut-through one), the
 * per-session output queue -- a ring of (header bytes, reference to
 * payload bytes) items, drained with writev and surviving partial writes
 * (a payload still arriving is exposed up to its watermark only, and
 * nothing queued after it before it is complete) -- sessions' lifetime,
 * the emission of frames (DELIVER, PROBE_REPLY, ERROR, LOGGED, headers),
 * log entries, and the records handed to the journal (cfg.journal). Buffers and sessions refer to
 * each other (a session's queue holds buffers, a partial buffer holds the sessions to wake), so
 * they are one piece. No I/O; it calls nothing above it (logmem.c below). */
#include "config.h"

#include "core_impl.h"

#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct cm_buf *buf_new(struct cm_logmem *mem, uint32_t len, bool admit, bool *held)
{
	bool aligned = len >= CM_BUF_ALIGN_MIN;
	size_t head = aligned ? CM_BUF_ALIGN : sizeof(struct cm_buf);
	size_t body =
	    aligned ? ((size_t)len + CM_BUF_ALIGN - 1) & ~(size_t)(CM_BUF_ALIGN - 1) : len;
	size_t got;
	*held = false;
	struct cm_buf *b = admit ? cm_logmem_alloc_admitted(mem, head + body, &got, held)
	                         : cm_logmem_alloc(mem, head + body, &got);
	if (b == NULL)
		return NULL;
	/* Blocks of the log memory are page-aligned; malloc'd ones (no log
	 * memory) are aligned here by hand. */
	b->data = (uint8_t *)b + head;
	if (aligned && ((uintptr_t)b->data & (CM_BUF_ALIGN - 1)) != 0)
		aligned = false;
	b->aligned = aligned;
	b->read_back = false;
	b->mem = mem;
	b->alloc = got;
	b->refs = 1;
	b->len = len;
	b->filled = len;
	b->parked = 0;
	b->waiters = NULL;
	b->extent = CM_NO_EXTENT;
	return b;
}

struct cm_buf *cm_buf_new(struct cm_logmem *mem, uint32_t len)
{
	bool held;
	return buf_new(mem, len, false, &held);
}

void cm_buf_ref(struct cm_buf *b)
{
	__atomic_add_fetch(&b->refs, 1, __ATOMIC_RELAXED);
}

void cm_buf_unref(struct cm_buf *b)
{
	if (b && __atomic_sub_fetch(&b->refs, 1, __ATOMIC_ACQ_REL) == 0) {
		cm_cut_waiters_free(b); /* a partial payload nobody completed */
		if (b->read_back)
			cm_logmem_read_back_done(b->mem, b->alloc);
		cm_logmem_release(b->mem, b, b->alloc);
	}
}

/* What an item counts in ctrl_bytes: its slot, when it carries no log
 * payload (a payload reference is bounded by --log-mem instead). */
static size_t ctrl_cost(const struct cm_out_item *it)
{
	return it->ref ? 0 : sizeof *it;
}

static void ctrl_add(struct cm_outq *q, size_t n, bool add)
{
	if (n)
		__atomic_store_n(&q->ctrl_bytes, add ? q->ctrl_bytes + n : q->ctrl_bytes - n,
		                 __ATOMIC_RELAXED);
}

void cm_outq_init(struct cm_outq *q)
{
	memset(q, 0, sizeof *q);
}

void cm_outq_free(struct cm_outq *q)
{
	for (size_t i = 0; i < q->count; i++)
		cm_buf_unref(q->items[(q->first + i) & (q->cap - 1)].ref);
	free(q->items);
	q->items = NULL;
	q->cap = q->first = q->count = q->first_off = q->pending = 0;
	/* Atomic: the session's reader may be looking (cm_session_next_frame). */
	__atomic_store_n(&q->ctrl_bytes, 0, __ATOMIC_RELAXED);
}

static bool grow(struct cm_outq *q)
{
	size_t ncap = q->cap ? q->cap * 2 : 16;
	struct cm_out_item *n = malloc(ncap * sizeof *n);
	if (n == NULL)
		return false;
	/* Unwrap the ring into the new array so first = 0. */
	for (size_t i = 0; i < q->count; i++)
		n[i] = q->items[(q->first + i) & (q->cap - 1)];
	free(q->items);
	q->items = n;
	q->cap = ncap;
	q->first = 0;
	return true;
}

bool cm_outq_push(struct cm_outq *q, const struct cm_out_item *item)
{
	if (q->count == q->cap && !grow(q)) {
		cm_buf_unref(item->ref);
		return false;
	}
	q->items[(q->first + q->count) & (q->cap - 1)] = *item;
	q->count++;
	ctrl_add(q, ctrl_cost(item), true);
	q->pending += (size_t)item->head_len + item->body_len;
	return true;
}

/* Body bytes of it that may be written: all of them, except for a payload
 * still arriving (cut-through), whose watermark bounds them. */
static size_t body_ready(const struct cm_out_item *it)
{
	if (it->ref == NULL)
		return it->body_len;
	size_t at = (size_t)(it->body - it->ref->data);
	size_t filled = cm_buf_filled(it->ref);
	if (filled >= at + it->body_len)
		return it->body_len;
	return filled > at ? filled - at : 0;
}

int cm_outq_iov(const struct cm_outq *q, struct iovec *iov, int max)
{
	int n = 0;
	size_t off = q->first_off;
	for (size_t i = 0; i < q->count && n < max; i++) {
		const struct cm_out_item *it = &q->items[(q->first + i) & (q->cap - 1)];
		size_t ready = body_ready(it);
		if (off < it->head_len) {
			iov[n].iov_base = (void *)(it->head + off);
			iov[n].iov_len = it->head_len - off;
			n++;
			off = 0;
		} else {
			off -= it->head_len;
		}
		if (ready > off && n < max) {
			iov[n].iov_base = (void *)(it->body + off);
			iov[n].iov_len = ready - off;
			n++;
		}
		off = 0;
		if (ready < it->body_len)
			break; /* later frames wait: order on the wire */
	}
	return n;
}

struct cm_buf *cm_outq_blocked(const struct cm_outq *q)
{
	if (q->count == 0)
		return NULL;
	const struct cm_out_item *it = &q->items[q->first];
	if (q->first_off < it->head_len || body_ready(it) + it->head_len > q->first_off)
		return NULL;
	return it->ref;
}

void cm_outq_consumed(struct cm_outq *q, size_t n)
{
	if (n > q->pending)
		n = q->pending; /* a caller bug; never run past the queue */
	q->pending -= n;
	while (n > 0) { /* every item has a header, so none is empty */
		struct cm_out_item *it = &q->items[q->first];
		size_t left = (size_t)it->head_len + it->body_len - q->first_off;
		if (n < left) {
			q->first_off += n;
			return;
		}
		n -= left;
		ctrl_add(q, ctrl_cost(it), false);
		cm_buf_unref(it->ref);
		q->first = (q->first + 1) & (q->cap - 1);
		q->count--;
		q->first_off = 0;
		if (q->count == 0)
			q->first = 0;
	}
}

/* ---- sessions' lifetime ---- */

void *cm_session_engine_data(const struct cm_session *s)
{
	return s->engine_data;
}

void cm_session_ref(struct cm_session *s)
{
	__atomic_add_fetch(&s->refs, 1, __ATOMIC_RELAXED);
}

void cm_session_release(struct cm_session *s)
{
	if (s == NULL || __atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) != 0)
		return;
	cm_entry_free(s->in_entry);
	cm_buf_unref(s->fill);
	cm_outq_free(&s->out);
	free(s->scratch);
	free(s->in);
	free(s);
}

int cm_session_closing(const struct cm_session *s)
{
	return sess_state(s) == CM_S_CLOSING;
}

int cm_session_rank(const struct cm_session *s)
{
	return s->rank;
}

int cm_session_said_bye(const struct cm_session *s)
{
	return s->said_bye;
}

/* ---- cut-through waiters of a partial payload ---- */

bool cm_cut_watch(struct cm_buf *b, struct cm_session *s)
{
	struct cm_cut_waiters *w = b->waiters;
	for (uint32_t i = 0; w && i < w->n; i++)
		if (w->sess[i] == s)
			return true;
	if (w == NULL || w->n == w->cap) {
		uint32_t cap = w ? 2 * w->cap : 2;
		struct cm_cut_waiters *g = realloc(w, sizeof *g + cap * sizeof g->sess[0]);
		if (g == NULL)
			return false;
		if (w == NULL)
			g->n = 0;
		g->cap = cap;
		b->waiters = w = g;
	}
	cm_session_ref(s);
	w->sess[w->n++] = s;
	return true;
}

void cm_cut_waiters_free(struct cm_buf *b)
{
	struct cm_cut_waiters *w = b->waiters;
	if (w == NULL)
		return;
	b->waiters = NULL;
	for (uint32_t i = 0; i < w->n; i++)
		cm_session_release(w->sess[i]);
	free(w);
}

/* ---- emission ---- */

void cm_core_emit(struct cm_session *to, const struct cm_out_item *item)
{
	struct cm_core_hooks *hk = &to->core->cfg.hooks;
	if (hk->out_lock)
		hk->out_lock(hk->ctx, to);
	if (sess_state(to) == CM_S_GONE) {
		/* The connection is gone: the frame has nowhere to go. */
		cm_buf_unref(item->ref);
	} else {
		bool was_empty = to->out.count == 0;
		if (!cm_outq_push(&to->out, item)) {
			cm_err("out of memory queueing a %s frame; closing the connection",
			       cm_type_str(item->head[1]));
			sess_begin_closing(to);
			was_empty = true;
		}
		if (was_empty && hk->wake)
			hk->wake(hk->ctx, to);
	}
	if (hk->out_unlock)
		hk->out_unlock(hk->ctx, to);
}

void cm_core_emit_header(struct cm_session *to, const struct cm_header *h)
{
	struct cm_out_item it;
	cm_header_encode(h, it.head);
	it.head_len = CM_HEADER_SIZE;
	it.body_len = 0;
	it.body = NULL;
	it.ref = NULL;
	cm_core_emit(to, &it);
}

int cm_session_out_iov(struct cm_session *s, struct iovec *iov, int max)
{
	int n = cm_outq_iov(&s->out, iov, max);
	struct cm_buf *b;
	if (n == 0 && (b = cm_outq_blocked(&s->out)) != NULL) {
		/* Cut-through: the next byte has not arrived. Park (the filling
		 * reader wakes us), then look again: it may have moved the
		 * watermark before it could see the flag. */
		__atomic_store_n(&b->parked, 1, __ATOMIC_SEQ_CST);
		n = cm_outq_iov(&s->out, iov, max);
	}
	return n;
}

void cm_session_out_consumed(struct cm_session *s, size_t n)
{
	cm_outq_consumed(&s->out, n);
}

size_t cm_session_out_pending(const struct cm_session *s)
{
	return s->out.pending;
}

void cm_session_fail(struct cm_session *s, enum cm_err code, const char *fmt, ...)
{
	if (!sess_begin_closing(s))
		return;
	char text[CM_ERROR_TEXT_MAX + 1];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if (n > CM_ERROR_TEXT_MAX)
		n = CM_ERROR_TEXT_MAX;

	int32_t rank = __atomic_load_n(&s->rank, __ATOMIC_RELAXED);
	if (rank >= 0)
		cm_info("rank %d: refused: %s (%s)", (int)rank, text, cm_err_str(code));
	else
		cm_info("connection refused: %s (%s)", text, cm_err_str(code));
	CM_STAT_ADD(s->core, frames_refused, 1);

	struct cm_out_item it;
	it.ref = cm_buf_new(s->core->cfg.mem, (uint32_t)n);
	if (it.ref)
		memcpy(it.ref->data, text, (size_t)n);
	else
		n = 0; /* out of memory: the code alone still says why */
	struct cm_header h = {.type = CM_T_ERROR, .tag = (int32_t)code, .len = (uint32_t)n};
	cm_header_encode(&h, it.head);
	it.head_len = CM_HEADER_SIZE;
	it.body_len = (uint32_t)n;
	it.body = it.ref ? it.ref->data : NULL;
	/* The session stops reading; what it already queued goes out first.
	 * The engine learns it must close from the wake of this push, or
	 * from cm_session_closing once the earlier output is written. */
	cm_core_emit(s, &it);
}

struct cm_entry *cm_entry_new(struct cm_core *core, const struct cm_header *h, bool admit,
                              bool *held)
{
	*held = false;
	struct cm_entry *e = calloc(1, sizeof *e);
	if (e == NULL)
		return NULL;
	if (h->len > 0) {
		e->payload = buf_new(core->cfg.mem, h->len, admit, held);
		if (e->payload == NULL) {
			free(e);
			return NULL;
		}
	}
	e->clock = h->clock;
	e->src = h->src;
	e->dst = h->dst;
	e->tag = h->tag;
	e->ctx = h->ctx;
	e->len = h->len;
	e->flags = h->flags;
	e->extent = CM_NO_EXTENT;
	return e;
}

void cm_entry_free(struct cm_entry *e)
{
	if (e == NULL)
		return;
	cm_buf_unref(e->payload);
	if (e->sync_sess)
		cm_session_release(e->sync_sess);
	free(e);
}

void cm_emit_deliver(const struct cm_entry *e, struct cm_session *to, uint64_t req_id,
                     uint16_t flags)
{
	struct cm_out_item it;
	struct cm_header h = {.type = CM_T_DELIVER,
	                      .flags = flags,
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
	if (cm_buf_partial(e->payload) && !cm_cut_watch(e->payload, to)) {
		/* Its writer could never be woken: better refused than stuck. */
		cm_buf_unref(it.ref);
		cm_session_fail(to, CM_E_LENGTH, "out of memory forwarding a message");
		return;
	}
	cm_core_emit(to, &it);
}

void cm_emit_probe_reply(struct cm_session *to, uint64_t probe_id, uint32_t ctx, int32_t src,
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

/* ---- the journal (core.h: what a recovered CM rebuilds from) ---- */

void cm_core_journal(struct cm_session *s, uint8_t kind, uint8_t flags, const struct cm_header *h,
                     const void *data, size_t len)
{
	const struct cm_journal_ops *j = s->core->cfg.journal;
	if (j == NULL)
		return;
	struct cm_jrec rec = {.kind = kind, .flags = flags, .session = s->id};
	if (h)
		rec.h = *h;
	j->record(j->ctx, &rec, data, len);
	s->journaled = true;
}

void cm_core_journal_extent(struct cm_session *s, uint8_t kind, uint8_t flags,
                            const struct cm_header *h, struct cm_buf *b, uint32_t from, uint32_t to)
{
	const struct cm_journal_ops *j = s->core->cfg.journal;
	if (j == NULL)
		return;
	if (to > from)
		j->write_extent(j->ctx, b->extent, b->data, from, to);
	struct cm_jrec rec = {.kind = kind,
	                      .flags = flags | CM_J_EXTENT,
	                      .session = s->id,
	                      .extent = b->extent,
	                      .valid = to};
	if (h)
		rec.h = *h;
	j->record(j->ctx, &rec, NULL, 0);
	s->journaled = true;
}

void cm_core_logged(struct cm_session *s)
{
	const struct cm_sender *snd = &s->core->senders[s->rank];
	uint64_t next = snd->has ? snd->highest + 1 : 0;
	if (cm_buf_partial(snd->cut_buf)) /* (its clock is at most highest) */
		next = snd->cut_clock;    /* accepted, but its payload is not all here */
	struct cm_header h = {.type = CM_T_LOGGED, .src = s->rank, .dst = s->rank, .clock = next};
	cm_core_emit_header(s, &h);
}
