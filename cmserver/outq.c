/* Reference-counted payload buffers and the per-session output queue: a
 * ring of (header bytes, reference to payload bytes) items, drained with
 * writev and surviving partial writes. Pure data structures, no I/O. A
 * payload still arriving (cut-through, cut.c) is exposed up to its
 * watermark only, and nothing queued after it before it is complete. */
#include "config.h"

#include "core_impl.h"

#include <stdlib.h>
#include <string.h>

struct cm_buf *cm_buf_new(struct cm_logmem *mem, uint32_t len)
{
	bool aligned = len >= CM_BUF_ALIGN_MIN;
	size_t head = aligned ? CM_BUF_ALIGN : sizeof(struct cm_buf);
	size_t body =
	    aligned ? ((size_t)len + CM_BUF_ALIGN - 1) & ~(size_t)(CM_BUF_ALIGN - 1) : len;
	size_t got;
	struct cm_buf *b = cm_logmem_alloc(mem, head + body, &got);
	if (b == NULL)
		return NULL;
	/* Blocks of the log memory are page-aligned; malloc'd ones (no log
	 * memory) are aligned here by hand. */
	b->data = (uint8_t *)b + head;
	if (aligned && ((uintptr_t)b->data & (CM_BUF_ALIGN - 1)) != 0)
		aligned = false;
	b->aligned = aligned;
	b->mem = mem;
	b->alloc = got;
	b->refs = 1;
	b->len = len;
	b->filled = len;
	b->parked = 0;
	b->waiters = NULL;
	return b;
}

void cm_buf_ref(struct cm_buf *b)
{
	__atomic_add_fetch(&b->refs, 1, __ATOMIC_RELAXED);
}

void cm_buf_unref(struct cm_buf *b)
{
	if (b && __atomic_sub_fetch(&b->refs, 1, __ATOMIC_ACQ_REL) == 0) {
		cm_cut_waiters_free(b); /* a partial payload nobody completed */
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
