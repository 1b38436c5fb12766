/* Frame assembly (SESSION domain, see core.h): turns the byte stream of one
 * connection into complete, validated frames, whatever the read sizes.
 *
 * Bytes land in a 64 KiB staging buffer (128 bytes before authentication), so one read takes many
 * small frames at once (4 KiB pieces after a large MSG: see CM_BULK_MSG). When a MSG header is
 * parsed its log entry is allocated right away; the payload bytes already staged are copied into
 * it, and the rest is read straight into the entry (first iovec), with the staging buffer as the
 * second iovec for the frames that follow. A large message is thus copied
 * once from the socket into the log. After every parse the staging buffer
 * holds at most one partial header (or HELLO), moved to its start.
 *
 * Cut-through (cfg.cut_through_min, cut.c): a large MSG is handed out for
 * dispatch as soon as its header is parsed, and its payload then read into
 * the logged buffer (s->fill) past its watermark; a re-send that may resume
 * a partial payload is handed to dispatch too (f->resume), which decides. */
#include "config.h"

#include "core_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HELLO_FRAME (CM_HEADER_SIZE + CM_HELLO_PAYLOAD)

static void compact(struct cm_session *s)
{
	if (s->in_pos == s->in_end) {
		s->in_pos = s->in_end = 0;
	} else if (s->in_pos > 0) {
		memmove(s->in, s->in + s->in_pos, s->in_end - s->in_pos);
		s->in_end -= s->in_pos;
		s->in_pos = 0;
	}
}

static bool discarding(const struct cm_session *s)
{
	enum cm_sess_state st = sess_state(s);
	return st == CM_S_CLOSING || st == CM_S_GONE;
}

static void drop_input(struct cm_session *s)
{
	cm_entry_free(s->in_entry);
	s->in_entry = NULL;
	s->in_skip = 0;
	s->in_pos = s->in_end = 0;
}

int cm_session_read_iov(struct cm_session *s, struct iovec iov[2])
{
	int n = 0;
	if (discarding(s))
		drop_input(s);
	if (s->in_pos > 0)
		compact(s);
	if (s->in_cap < CM_STAGING_SIZE && sess_state(s) != CM_S_NEW) {
		uint8_t *bigger = realloc(s->in, CM_STAGING_SIZE);
		if (bigger) { /* else keep reading in small pieces */
			s->in = bigger;
			s->in_cap = CM_STAGING_SIZE;
		}
	}
	s->last_iov_payload = false;
	s->last_iov_fill = false;
	if (s->fill && s->fill_got < s->fill->len && !discarding(s)) {
		/* Cut-through: straight into the logged payload past its
		 * watermark, or, resuming, the re-sent prefix into scratch. */
		if (s->fill_got < s->fill_verify) {
			uint32_t v = s->fill_verify - s->fill_got;
			iov[0].iov_base = s->scratch;
			iov[0].iov_len = v < CM_STAGING_SIZE ? v : CM_STAGING_SIZE;
		} else {
			iov[0].iov_base = s->fill->data + s->fill_got;
			iov[0].iov_len = s->fill->len - s->fill_got;
		}
		s->last_iov_fill = true;
		n = 1;
	} else if (s->in_entry && s->in_got < s->in_entry->len) {
		iov[0].iov_base = s->in_entry->payload->data + s->in_got;
		iov[0].iov_len = s->in_entry->len - s->in_got;
		s->last_iov_payload = true;
		n = 1;
	}
	size_t limit = s->in_cap;
	if (s->bulk && s->in_end < CM_BULK_READ && CM_BULK_READ < limit)
		limit = CM_BULK_READ;
	if (s->in_end < limit) {
		iov[n].iov_base = s->in + s->in_end;
		iov[n].iov_len = limit - s->in_end;
		n++;
	}
	return n;
}

void cm_session_received(struct cm_session *s, size_t n)
{
	if (s->last_iov_fill && s->fill) {
		size_t room;
		if (s->fill_got < s->fill_verify) {
			room = s->fill_verify - s->fill_got;
			if (room > CM_STAGING_SIZE)
				room = CM_STAGING_SIZE;
			size_t k = n < room ? n : room;
			cm_cut_take(s, s->scratch, k); /* compares, stores nothing */
			n -= k;
		} else {
			room = s->fill->len - s->fill_got;
			size_t k = n < room ? n : room;
			if (k)
				cm_cut_advance(s, (uint32_t)k);
			n -= k;
		}
		s->last_iov_fill = false;
	}
	if (s->last_iov_payload && s->in_entry) {
		size_t room = s->in_entry->len - s->in_got;
		size_t k = n < room ? n : room;
		s->in_got += (uint32_t)k;
		n -= k;
	}
	s->last_iov_payload = false;
	s->in_end += n;
	if (s->in_end > s->in_cap)
		s->in_end = s->in_cap; /* engine reported more than it was given */
}

/* Header-level refusals that depend on the session's state. */
static bool acceptable(struct cm_session *s, const struct cm_header *h)
{
	const char *name = cm_type_str(h->type);
	enum cm_sess_state st = sess_state(s);
	if (st == CM_S_NEW) {
		if (h->type == CM_T_HELLO)
			return true;
		cm_session_fail(s, CM_E_AUTH, "%s before HELLO: not authenticated", name);
		return false;
	}
	if (st == CM_S_BYE) {
		cm_session_fail(s, CM_E_STATE, "%s after BYE", name);
		return false;
	}
	switch (h->type) {
	case CM_T_HELLO:
		/* A TAKEOVER the rank sent while its HELLO_ACK was on the way: the
		 * connection already has the slot (cm_core_hello ignores it). */
		if ((h->flags & CM_F_TAKEOVER) && h->src == s->rank)
			return true;
		cm_session_fail(s, CM_E_STATE, "second HELLO on this connection");
		return false;
	case CM_T_MSG:
		if (h->src != s->rank) {
			cm_session_fail(s, CM_E_RANK, "MSG src %d is not this connection's rank %d",
			                (int)h->src, (int)s->rank);
			return false;
		}
		if ((h->flags & CM_F_PUSH) && (h->flags & CM_F_SYNC)) {
			/* Nothing would answer its SYNC_ACK: a push is matched by
			 * the receiving rank. */
			cm_session_fail(s, CM_E_FLAGS, "a pushed MSG cannot be synchronous");
			return false;
		}
		return true;
	case CM_T_EVENT:
	case CM_T_EVENT_ACK:
	case CM_T_CANCEL:
	case CM_T_TRIM:
	case CM_T_PUSH_START:
	case CM_T_PUSH_ACK:
		if (h->src != s->rank || h->dst != s->rank) {
			cm_session_fail(s, CM_E_RANK,
			                "%s src %d / dst %d must be this connection's rank %d",
			                name, (int)h->src, (int)h->dst, (int)s->rank);
			return false;
		}
		return true;
	case CM_T_RECV_REQ:
	case CM_T_PROBE:
		if (h->dst != s->rank) {
			cm_session_fail(s, CM_E_RANK, "%s dst %d is not this connection's rank %d",
			                name, (int)h->dst, (int)s->rank);
			return false;
		}
		return true;
	case CM_T_BYE:
		if (h->src != s->rank || h->dst != s->rank) {
			cm_session_fail(s, CM_E_RANK,
			                "BYE src %d / dst %d must be this connection's rank %d",
			                (int)h->src, (int)h->dst, (int)s->rank);
			return false;
		}
		return true;
	default:
		cm_session_fail(s, CM_E_TYPE, "%s frames are not accepted by a channel memory",
		                name);
		return false;
	}
}

/* ERROR text for a header cm_header_decode refused. */
static void refuse_header(struct cm_session *s, enum cm_err err, const struct cm_header *h,
                          const struct cm_limits *lim)
{
	const char *name = cm_type_str(h->type);
	switch (err) {
	case CM_E_VERSION:
		cm_session_fail(s, err, "protocol version %u, this server speaks %d",
		                (unsigned)h->version, CM_PROTO_VERSION);
		break;
	case CM_E_TYPE:
		cm_session_fail(s, err, "unknown frame type %u", (unsigned)h->type);
		break;
	case CM_E_LENGTH:
		cm_session_fail(s, err, "%s payload length %u refused (maximum %u)", name,
		                (unsigned)h->len, (unsigned)lim->max_payload);
		break;
	case CM_E_RANK:
		cm_session_fail(s, err, "%s src %d / dst %d out of range (world size %u)", name,
		                (int)h->src, (int)h->dst, (unsigned)lim->world_size);
		break;
	case CM_E_TAG:
		cm_session_fail(s, err, "%s tag %d", name, (int)h->tag);
		break;
	case CM_E_FLAGS:
		cm_session_fail(s, err, "%s flags 0x%x not defined for the type", name,
		                (unsigned)h->flags);
		break;
	default:
		cm_session_fail(s, err, "%s: %s", name, cm_err_str(err));
		break;
	}
}

/* A resumed payload whose re-sent prefix is not the logged one. */
static int refuse_diverged(struct cm_session *s)
{
	cm_session_fail(s, CM_E_STATE,
	                "re-execution of rank %d diverged: the re-sent payload of message %llu "
	                "differs from the one logged",
	                (int)s->rank, (unsigned long long)s->fill_clock);
	return 0;
}

int cm_session_held(const struct cm_session *s)
{
	return s->held && !discarding(s);
}

int cm_session_held_output(const struct cm_session *s)
{
	return s->held_output && !discarding(s);
}

int cm_session_next_frame(struct cm_session *s, struct cm_frame *f)
{
	f->cut = f->resume = false;
	s->held = s->held_output = false;
	for (;;) {
		if (discarding(s)) {
			drop_input(s);
			return 0;
		}
		if (s->fill_notify)
			return 0; /* the engine calls cm_session_fill_notify first */
		if (s->fill_diverged)
			return refuse_diverged(s);
		if (__atomic_load_n(&s->out.ctrl_bytes, __ATOMIC_RELAXED) > CM_OUTQ_CTRL_MAX &&
		    s->fill == NULL && s->in_entry == NULL) {
			/* Backpressure: the peer is not reading what it asked for;
			 * its next requests wait in its socket until it does. */
			s->held = true;
			s->held_output = true;
			compact(s);
			return 0;
		}
		if (s->fill && s->fill_got < s->fill->len) {
			size_t avail = s->in_end - s->in_pos;
			if (avail)
				s->in_pos += cm_cut_take(s, s->in + s->in_pos, avail);
			if (s->fill_diverged)
				return refuse_diverged(s);
			if (s->fill_got < s->fill->len) {
				compact(s);
				return 0;
			}
			continue; /* complete: fill_notify is set */
		}
		if (s->in_entry) {
			if (s->in_got < s->in_entry->len) {
				compact(s);
				return 0;
			}
			f->h.version = CM_PROTO_VERSION;
			f->h.type = CM_T_MSG;
			f->h.flags = s->in_entry->flags;
			f->h.src = s->in_entry->src;
			f->h.dst = s->in_entry->dst;
			f->h.tag = s->in_entry->tag;
			f->h.ctx = s->in_entry->ctx;
			f->h.len = s->in_entry->len;
			f->h.clock = s->in_entry->clock;
			f->entry = s->in_entry;
			s->in_entry = NULL;
			return 1;
		}
		if (s->in_skip) {
			size_t avail = s->in_end - s->in_pos;
			size_t k = s->in_skip < avail ? (size_t)s->in_skip : avail;
			s->in_pos += k;
			s->in_skip -= k;
			if (s->in_skip) {
				compact(s);
				return 0;
			}
		}

		size_t avail = s->in_end - s->in_pos;
		if (avail < CM_HEADER_SIZE) {
			compact(s);
			return 0;
		}
		const uint8_t *p = s->in + s->in_pos;
		struct cm_limits lim = {.world_size = cm_core_world_size(s->core),
		                        .max_payload = s->core->cfg.max_payload};
		struct cm_header h;
		enum cm_err err = cm_header_decode(p, avail, &lim, &h);
		if (err != CM_OK) {
			refuse_header(s, err, &h, &lim);
			return 0;
		}
		if (!acceptable(s, &h))
			return 0;

		switch (h.type) {
		case CM_T_HELLO:
			if (avail < HELLO_FRAME) {
				compact(s);
				return 0;
			}
			err = cm_hello_decode(p + CM_HEADER_SIZE, CM_HELLO_PAYLOAD, &f->hello);
			if (err != CM_OK) {
				cm_session_fail(s, err, "bad HELLO payload: %s", cm_err_str(err));
				return 0;
			}
			s->in_pos += HELLO_FRAME;
			f->h = h;
			f->entry = NULL;
			return 1;

		case CM_T_MSG: {
			s->in_pos += CM_HEADER_SIZE;
			/* Unlocked peek at SENDER(src): a re-send is skipped without
			 * allocating; dispatch checks again for real. */
			const struct cm_sender *snd = &s->core->senders[h.src];
			if (__atomic_load_n(&snd->has, __ATOMIC_ACQUIRE) &&
			    h.clock <= __atomic_load_n(&snd->highest, __ATOMIC_RELAXED)) {
				if (__atomic_load_n(&snd->cut_buf, __ATOMIC_RELAXED) &&
				    __atomic_load_n(&snd->cut_clock, __ATOMIC_RELAXED) == h.clock) {
					/* Maybe the partial payload a dead connection left:
					 * dispatch decides (cm_cut_resume) and sets how its
					 * payload is read. */
					f->h = h;
					f->entry = NULL;
					f->resume = true;
					return 1;
				}
				CM_STAT_ADD(s->core, msgs_duplicate, 1);
				s->in_skip = h.len;
				if (!(h.flags & (CM_F_SYNC | CM_F_ACK)))
					continue;
				/* A synchronous re-send still owes a SYNC_ACK,
				 * one asking for LOGGED its answer: dispatch
				 * answers (entry NULL, payload skipped). */
				f->h = h;
				f->entry = NULL;
				return 1;
			}
			bool held;
			struct cm_entry *e =
			    cm_entry_new(s->core, &h, s->core->cfg.spill != NULL, &held);
			if (held) {
				/* Backpressure: the header stays staged for the next
				 * try, and the engine stops reading this sender. */
				s->in_pos -= CM_HEADER_SIZE;
				s->held = true;
				compact(s);
				return 0;
			}
			s->bulk = h.len >= CM_BULK_MSG;
			if (e == NULL) {
				cm_session_fail(s, CM_E_LENGTH, "no memory for a %u-byte message",
				                (unsigned)h.len);
				return 0;
			}
			size_t staged = s->in_end - s->in_pos;
			size_t k = staged < h.len ? staged : h.len;
			if (k)
				memcpy(e->payload->data, s->in + s->in_pos, k);
			s->in_pos += k;
			uint32_t cut = s->core->cfg.cut_through_min;
			if (cut && h.len >= cut && k < h.len && s->fill == NULL) {
				/* Cut-through: dispatched now, filled as it arrives. */
				e->payload->filled = (uint32_t)k; /* not shared yet */
				cm_buf_ref(e->payload);
				s->fill = e->payload;
				s->fill_got = (uint32_t)k;
				s->fill_verify = 0;
				s->fill_dst = h.dst;
				s->fill_clock = h.clock;
				f->h = h;
				f->entry = e;
				f->cut = true;
				return 1;
			}
			s->in_got = (uint32_t)k;
			s->in_entry = e;
			continue; /* complete now, or waits for the rest */
		}

		case CM_T_EVENT: /* a small payload, staged whole */
		case CM_T_TRIM:
			if (avail < CM_HEADER_SIZE + h.len) {
				compact(s);
				return 0;
			}
			memcpy(f->event, p + CM_HEADER_SIZE, h.len);
			s->in_pos += CM_HEADER_SIZE + h.len;
			f->h = h;
			f->entry = NULL;
			return 1;

		default: /* RECV_REQ, PROBE, BYE, EVENT_ACK: header only */
			if (h.type == CM_T_RECV_REQ && s->core->cfg.spill &&
			    !cm_logmem_admit_read_back(s->core->cfg.mem)) {
				/* Backpressure: what it matches may be on disk (spilled,
				 * or in the journal), read back into a new buffer; past
				 * half the bound it waits until the read-backs already
				 * queued are written (logmem.h), which spilling the
				 * logs would not hasten. */
				s->held = true;
				s->held_output = true;
				compact(s);
				return 0;
			}
			if (h.type == CM_T_RECV_REQ || h.type == CM_T_PROBE)
				/* What bounds the delivery record (cm_rec_slot). */
				__atomic_add_fetch(&s->core->dests[s->rank].posted, 1,
				                   __ATOMIC_RELAXED);
			s->in_pos += CM_HEADER_SIZE;
			f->h = h;
			f->entry = NULL;
			return 1;
		}
	}
}
