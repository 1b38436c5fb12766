/* Cut-through forwarding (cfg.cut_through_min, see core.h).
 *
 * A MSG whose payload is at least cut_through_min bytes is dispatched as
 * soon as its header is parsed: logged, matched, its DELIVER queued with a
 * reference to the entry's payload buffer. The connection keeps filling
 * that same buffer (s->fill) straight from the socket and advances the
 * buffer's watermark (cm_buf.filled) after each read; writers never expose
 * a body byte past it and never write a later frame before it (emit.c).
 * The payload is written once, into the log, and forwarded from there.
 *
 * Waking. A writer whose next byte is not there yet sets buf->parked and
 * stops. The reader, after moving the watermark, takes the flag; if it was
 * set (or the payload is complete) the engine calls cm_session_fill_notify
 * in DEST(dst), which wakes every session with a DELIVER of the buffer
 * queued (buf->waiters, registered by cm_emit_deliver under DEST(dst)).
 * Flag and watermark are sequentially consistent on both sides (store one,
 * then load the other), so a wake is never lost; a busy writer (socket
 * full) costs the reader nothing but the exchange.
 *
 * Resume. A connection that ends mid-payload leaves the entry in the log,
 * partial (never spilled, trimmed nor collected while so), its DELIVER
 * maybe half written to the receiver, who just waits. The sender's slot
 * keeps the buffer (cut_buf) and marks it orphaned. The re-executed sender
 * re-sends the same clock: instead of dropping it as a duplicate, the CM
 * reads the prefix it already has into scratch and compares it (different
 * bytes or header: the re-execution diverged, refused), then fills the
 * buffer on from the watermark. */
#include "config.h"

#include "core_impl.h"

#include "log.h"

#include <stdlib.h>
#include <string.h>

void cm_cut_advance(struct cm_session *s, uint32_t n)
{
	struct cm_buf *b = s->fill;
	uint32_t shown = s->fill_got + n;
	/* Journaled before the watermark lets a writer forward them: in the
	 * payload's extent a page at a time, or copied into the record. */
	if (b->extent != CM_NO_EXTENT) {
		uint32_t was = cm_buf_filled(b);
		shown = cm_buf_durable(b, shown);
		if (shown > was)
			cm_core_journal_extent(s, CM_J_FILL, 0, NULL, b, was, shown);
	} else {
		cm_core_journal(s, CM_J_FILL, 0, NULL, b->data + s->fill_got, n);
	}
	s->fill_got += n;
	if (shown == cm_buf_filled(b))
		return; /* less than a page more: nothing new to show */
	/* Bytes first, then the watermark, then the flag (see above). */
	__atomic_store_n(&b->filled, shown, __ATOMIC_SEQ_CST);
	if (shown == b->len || __atomic_exchange_n(&b->parked, 0, __ATOMIC_SEQ_CST))
		s->fill_notify = true;
}

size_t cm_cut_take(struct cm_session *s, const uint8_t *p, size_t n)
{
	struct cm_buf *b = s->fill;
	if (s->fill_diverged)
		return 0; /* nothing of a diverged re-send is stored */
	size_t k = b->len - s->fill_got;
	if (k > n)
		k = n;
	size_t v = 0;
	if (s->fill_got < s->fill_verify) {
		v = s->fill_verify - s->fill_got;
		if (v > k)
			v = k;
		if (memcmp(p, b->data + s->fill_got, v) != 0)
			s->fill_diverged = true;
		s->fill_got += (uint32_t)v;
	}
	if (k > v) {
		memcpy(b->data + s->fill_got, p + v, k - v);
		cm_cut_advance(s, (uint32_t)(k - v));
	}
	return k;
}

int cm_session_filling(const struct cm_session *s)
{
	return s->fill != NULL;
}

int cm_session_fill_domain(const struct cm_session *s)
{
	return s->fill_notify ? s->fill_dst : -1;
}

void cm_session_fill_notify(struct cm_session *s)
{
	if (!s->fill_notify)
		return;
	s->fill_notify = false;
	struct cm_buf *b = s->fill;
	struct cm_core_hooks *hk = &s->core->cfg.hooks;
	struct cm_cut_waiters *w = b->waiters;
	for (uint32_t i = 0; w && i < w->n; i++) {
		struct cm_session *to = w->sess[i];
		if (hk->out_lock)
			hk->out_lock(hk->ctx, to);
		if (sess_state(to) != CM_S_GONE && to->out.count > 0 && hk->wake)
			hk->wake(hk->ctx, to);
		if (hk->out_unlock)
			hk->out_unlock(hk->ctx, to);
	}
	if (s->fill_got == b->len) {
		/* Complete: from now on a buffer like any other, and no re-send
		 * can resume it, so the sender's reference goes too (a complete
		 * payload pinned per sender would hold log memory forever). */
		struct cm_sender *snd = &s->core->senders[s->rank];
		if (snd->cut_buf == b) {
			__atomic_store_n(&snd->cut_buf, NULL, __ATOMIC_RELAXED);
			cm_buf_unref(b);
		}
		cm_cut_waiters_free(b);
		cm_buf_unref(b);
		s->fill = NULL;
		if (s->fill_ack && !cm_session_closing(s))
			cm_core_logged(s);
		s->fill_ack = false;
	}
}

void cm_cut_orphan(struct cm_session *s)
{
	struct cm_buf *b = s->fill;
	if (b == NULL)
		return;
	s->fill = NULL;
	if (s->fill_notify) /* a parked writer's wake was taken: the next advance gives it */
		__atomic_store_n(&b->parked, 1, __ATOMIC_SEQ_CST);
	s->fill_notify = false;
	if (s->rank >= 0) {
		struct cm_sender *snd = &s->core->senders[s->rank];
		if (snd->cut_buf == b && cm_buf_partial(b)) {
			snd->cut_orphan = true;
			cm_info("rank %d: connection ended %u bytes into the %u-byte payload of "
			        "message %llu; a re-send resumes it",
			        (int)s->rank, (unsigned)cm_buf_filled(b), (unsigned)b->len,
			        (unsigned long long)snd->cut_clock);
		}
	}
	cm_buf_unref(b);
}

static bool same_message(const struct cm_header *a, const struct cm_header *b)
{
	/* CM_F_ACK is the sender's request for an answer, not the message. */
	return a->dst == b->dst && a->tag == b->tag && a->ctx == b->ctx && a->len == b->len &&
	       (a->flags & ~CM_F_ACK) == (b->flags & ~CM_F_ACK);
}

bool cm_cut_resume(struct cm_session *s, const struct cm_header *h)
{
	struct cm_core *core = s->core;
	struct cm_sender *snd = &core->senders[h->src];
	struct cm_buf *b = snd->cut_buf;
	if (b == NULL || snd->cut_clock != h->clock || !cm_buf_partial(b) || s->fill)
		return false; /* an ordinary re-send: dropped */
	if (!snd->cut_orphan) {
		/* A TAKEOVER replaced a connection that is still filling it:
		 * two readers must not fill one buffer. The old connection ends
		 * within the linger time; the rank is restarted and resumes. */
		cm_session_fail(s, CM_E_STATE,
		                "message %llu of rank %d is still arriving on the replaced "
		                "connection",
		                (unsigned long long)h->clock, (int)h->src);
		return true;
	}
	if (!same_message(h, &snd->cut_h)) {
		cm_session_fail(s, CM_E_STATE,
		                "re-execution of rank %d diverged: message %llu (dst %d tag %d, "
		                "%u bytes) is not the one logged",
		                (int)h->src, (unsigned long long)h->clock, (int)h->dst, (int)h->tag,
		                (unsigned)h->len);
		return true;
	}
	if (s->scratch == NULL && (s->scratch = malloc(CM_STAGING_SIZE)) == NULL) {
		cm_session_fail(s, CM_E_LENGTH, "no memory to resume a message");
		return true;
	}
	cm_buf_ref(b);
	snd->cut_orphan = false;
	s->fill = b;
	s->fill_got = 0;
	s->fill_verify = cm_buf_filled(b);
	s->fill_dst = h->dst;
	s->fill_clock = h->clock;
	s->fill_diverged = false;
	CM_STAT_ADD(core, cut_resumed, 1);
	cm_info("rank %d: resuming message %llu at byte %u of %u", (int)h->src,
	        (unsigned long long)h->clock, (unsigned)s->fill_verify, (unsigned)b->len);
	return true;
}
