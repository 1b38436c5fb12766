/* The protocol core's top layer: the core object and the dispatch of
 * complete frames (MSG, RECV_REQ, PROBE, CANCEL, EVENT, TRIM, PUSH_START,
 * PUSH_ACK, BYE). It calls down into the layers below and nothing calls
 * back up into it:
 *   session.c  sessions' HELLO and close        input.c  frame assembly
 *   msgrec.c   replay, cancel, collection       cut.c    cut-through
 *   msglog.c   logs and matching
 *   push.c     pushed messages
 *   record.c   the delivery record, spilled payloads
 *   emit.c     buffers, output queues, sessions' lifetime, emission
 *   logmem.c   the log's memory */
#include "config.h"

#include "core_impl.h"

#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cm_core *cm_core_new(const struct cm_core_config *cfg)
{
	struct cm_core *core = calloc(1, sizeof *core);
	if (core == NULL)
		return NULL;
	core->cfg = *cfg;
	return core;
}

void cm_core_free(struct cm_core *core)
{
	if (core == NULL)
		return;
	for (uint32_t r = 0; core->dests && r < core->world_size; r++)
		cm_dest_free(&core->dests[r]);
	free(core->dests);
	for (uint32_t r = 0; core->senders && r < core->world_size; r++)
		cm_buf_unref(core->senders[r].cut_buf);
	free(core->senders);
	free(core->rank_sess);
	free(core);
}

void cm_core_stats(const struct cm_core *core, struct cm_core_stats *out)
{
	const uint64_t *from = (const uint64_t *)&core->stats;
	uint64_t *to = (uint64_t *)out;
	for (size_t i = 0; i < sizeof *out / sizeof(uint64_t); i++)
		to[i] = __atomic_load_n(&from[i], __ATOMIC_RELAXED);
}

void cm_core_log_summary(const struct cm_core *core)
{
	struct cm_core_stats st;
	cm_core_stats(core, &st);
	cm_info("%llu messages logged (%llu bytes, %llu cut-through, %llu resumed), %llu "
	        "delivered (%llu pushed, %llu pushed again), %llu re-sends dropped, %llu frames "
	        "refused, %llu replayed, %llu bytes spilled, %llu collected after checkpoints",
	        (unsigned long long)st.msgs_logged, (unsigned long long)st.bytes_logged,
	        (unsigned long long)st.msgs_cut_through, (unsigned long long)st.cut_resumed,
	        (unsigned long long)st.msgs_delivered, (unsigned long long)st.msgs_pushed,
	        (unsigned long long)st.pushes_resent, (unsigned long long)st.msgs_duplicate,
	        (unsigned long long)st.frames_refused, (unsigned long long)st.msgs_replayed,
	        (unsigned long long)st.log_bytes_spilled,
	        (unsigned long long)st.log_entries_collected);
}

/* ---- log entries ---- */

/* ---- sessions ---- */

/* ---- dispatch ---- */

int cm_frame_domain(const struct cm_frame *f)
{
	switch (f->h.type) {
	case CM_T_MSG:
	case CM_T_RECV_REQ:
	case CM_T_PROBE:
	case CM_T_EVENT:
	case CM_T_EVENT_ACK:
	case CM_T_CANCEL:
	case CM_T_TRIM:
	case CM_T_PUSH_START:
	case CM_T_PUSH_ACK:
		return f->h.dst; /* except for MSG, the connection's rank */
	case CM_T_HELLO:
		return f->h.src;
	default:
		return -1;
	}
}

/* An accepted MSG, before anything can depend on it: with its payload, or
 * (cut-through) the bytes here so far, the rest as it fills. A large one
 * gets an extent; a cut-through one then shows writers only what is in it. */
static void journal_msg(struct cm_session *s, const struct cm_frame *f, struct cm_entry *e)
{
	const struct cm_journal_ops *j = s->core->cfg.journal;
	if (j == NULL)
		return;
	struct cm_buf *b = e->payload;
	uint32_t have = f->cut ? b->filled : e->len;
	uint8_t flags = f->cut ? CM_J_CUT : 0;
	if (b && b->aligned && j->reserve) {
		b->extent = j->reserve(j->ctx, e->len);
		uint32_t durable = cm_buf_durable(b, have);
		if (f->cut)
			b->filled = durable; /* not shared yet */
		cm_core_journal_extent(s, CM_J_MSG, flags, &f->h, b, 0, durable);
		return;
	}
	cm_core_journal(s, CM_J_MSG, flags, &f->h, have ? b->data : NULL, have);
}

/* The frames whose dispatch changes state a recovered CM must rebuild (MSG
 * is journaled by handle_msg, once it is known to be new). */
static void journal_frame(struct cm_session *s, const struct cm_frame *f)
{
	if (s->core->cfg.journal == NULL)
		return; /* every frame passes here: nothing to prepare without one */
	uint8_t hello[CM_HELLO_PAYLOAD];
	switch (f->h.type) {
	case CM_T_HELLO:
		cm_hello_encode(&f->hello, hello);
		cm_core_journal(s, CM_J_FRAME, 0, &f->h, hello, sizeof hello);
		break;
	case CM_T_RECV_REQ:
	case CM_T_PROBE:
	case CM_T_CANCEL:
		cm_core_journal(s, CM_J_FRAME, 0, &f->h, NULL, 0);
		break;
	case CM_T_EVENT:
	case CM_T_TRIM:
		cm_core_journal(s, CM_J_FRAME, 0, &f->h, f->event, f->h.len);
		break;
	default:
		break;
	}
}

static void handle_msg(struct cm_session *s, struct cm_frame *f)
{
	struct cm_core *core = s->core;
	struct cm_entry *e = f->entry;
	f->entry = NULL;
	struct cm_sender *snd = &core->senders[f->h.src];

	if (e == NULL && f->resume && cm_cut_resume(s, &f->h)) {
		/* Its payload now fills the partial entry; a synchronous one is
		 * answered like any re-send. */
		if (s->fill) {
			cm_core_journal(s, CM_J_MSG, CM_J_RESUME, &f->h, NULL, 0);
			s->fill_ack = f->h.flags & CM_F_ACK;
		}
		if (f->h.flags & CM_F_SYNC && !cm_session_closing(s))
			cm_dest_sync_duplicate(core, &core->dests[f->h.dst], s, &f->h);
		return;
	}
	if (e == NULL && f->resume) {
		/* Not the partial one after all: an ordinary re-send. */
		s->in_skip = f->h.len;
		CM_STAT_ADD(core, msgs_duplicate, 1);
	}
	if (e == NULL || (snd->has && e->clock <= snd->highest)) {
		/* A re-send from a re-executing rank (input.c already counted
		 * one it skipped). A synchronous one still needs its SYNC_ACK,
		 * or the re-executed MPI_Ssend never returns. */
		if (e != NULL)
			CM_STAT_ADD(core, msgs_duplicate, 1);
		if (f->h.flags & CM_F_SYNC)
			cm_dest_sync_duplicate(core, &core->dests[f->h.dst], s, &f->h);
		if (f->h.flags & CM_F_ACK && !cm_session_closing(s))
			cm_core_logged(s);
		cm_entry_free(e);
		return;
	}
	journal_msg(s, f, e);
	if (e->flags & CM_F_SYNC) {
		cm_session_ref(s);
		e->sync_sess = s;
	}
	struct cm_dest *d = &core->dests[e->dst];
	if (!cm_dest_add_msg(core, d, e)) {
		cm_session_fail(s, CM_E_LENGTH, "out of memory logging a message");
		return;
	}
	/* Accepted only once logged: a message lost to a failure is re-sent. */
	/* Stored for input.c's unlocked peek: highest before has (release),
	 * so a peek that sees has also sees a real clock. */
	__atomic_store_n(&snd->highest, e->clock, __ATOMIC_RELAXED);
	__atomic_store_n(&snd->has, true, __ATOMIC_RELEASE);
	if (f->cut) {
		/* Remembered so that a re-send can resume it (cut.c). */
		cm_buf_ref(e->payload);
		cm_buf_unref(snd->cut_buf);
		__atomic_store_n(&snd->cut_clock, e->clock, __ATOMIC_RELAXED);
		__atomic_store_n(&snd->cut_buf, e->payload, __ATOMIC_RELAXED);
		snd->cut_h = f->h;
		snd->cut_orphan = false;
		CM_STAT_ADD(core, msgs_cut_through, 1);
		s->fill_ack = f->h.flags & CM_F_ACK; /* answered once it is all here */
	} else if (f->h.flags & CM_F_ACK) {
		cm_core_logged(s);
	}
	cm_dest_trim(core, d);
}

/* A RECV_REQ or PROBE whose id an earlier incarnation of the rank already
 * used gets the recorded answer again (true: handled, or refused). */
static bool replay(struct cm_session *s, struct cm_dest *d, const struct cm_frame *f)
{
	switch (cm_dest_replay(s->core, d, s, &f->h)) {
	case CM_REPLAY_NONE:
		return false;
	case CM_REPLAY_DONE:
		return true;
	case CM_REPLAY_LOST:
		cm_session_fail(s, CM_E_STATE,
		                "cannot replay request %llu of rank %d: its message was dropped "
		                "from the log (raise --log-mem, or restart from the checkpoint "
		                "that covers it)",
		                (unsigned long long)f->h.clock, (int)s->rank);
		return true;
	case CM_REPLAY_DIVERGED:
	default:
		cm_session_fail(s, CM_E_STATE,
		                "re-execution of rank %d diverged: request %llu (%s src %d tag %d) "
		                "does not fit what was answered before",
		                (int)s->rank, (unsigned long long)f->h.clock,
		                cm_type_str(f->h.type), (int)f->h.src, (int)f->h.tag);
		return true;
	}
}

/* EVENT: event f->h.clock of the rank, appended in order. An event already
 * logged (a frame of a replaced incarnation, or a re-send) is dropped; one
 * past the end would leave a hole the replay cannot fill: refused. */
static void handle_event(struct cm_session *s, const struct cm_frame *f)
{
	struct cm_core *core = s->core;
	struct cm_dest *d = &core->dests[s->rank];
	uint64_t nevents = dest_nevents(d);
	if (f->h.clock < nevents) {
		CM_STAT_ADD(core, events_duplicate, 1);
		return;
	}
	if (f->h.clock > nevents) {
		cm_session_fail(s, CM_E_STATE, "EVENT %llu of rank %d: the log holds %llu events",
		                (unsigned long long)f->h.clock, (int)s->rank,
		                (unsigned long long)nevents);
		return;
	}
	struct cm_event *ev = cm_vec_push(&d->events);
	if (ev == NULL) {
		cm_session_fail(s, CM_E_LENGTH, "out of memory logging an event");
		return;
	}
	ev->kind = (uint32_t)f->h.tag;
	ev->len = (uint8_t)f->h.len;
	memcpy(ev->value, f->event, f->h.len);
	CM_STAT_ADD(core, events_logged, 1);
}

/* EVENT_ACK request: the logged events first when asked (CM_F_REPLAY), then
 * the count. Everything before this frame on s was processed, so the count
 * covers every EVENT the rank sent before it. */
static void handle_event_ack(struct cm_session *s, const struct cm_frame *f)
{
	struct cm_core *core = s->core;
	struct cm_dest *d = &core->dests[s->rank];
	uint64_t nevents = dest_nevents(d);
	if (f->h.flags & CM_F_REPLAY) {
		/* clock: the first event the rank wants (a checkpoint image
		 * consumed those before it). */
		uint64_t from = f->h.clock;
		if (from < d->events_base || from > nevents) {
			cm_session_fail(
			    s, CM_E_STATE, "events from %llu asked; the log holds %llu to %llu",
			    (unsigned long long)from, (unsigned long long)d->events_base,
			    (unsigned long long)nevents);
			return;
		}
		if (nevents > from)
			cm_info("rank %d: replaying %llu events to incarnation %u", (int)s->rank,
			        (unsigned long long)(nevents - from), (unsigned)s->incarnation);
		for (uint64_t i = from; i < nevents; i++) {
			const struct cm_event *ev = cm_vec_at(&d->events, i - d->events_base);
			struct cm_header h = {.type = CM_T_EVENT,
			                      .src = s->rank,
			                      .dst = s->rank,
			                      .tag = (int32_t)ev->kind,
			                      .len = ev->len,
			                      .clock = i};
			struct cm_out_item it;
			cm_header_encode(&h, it.head);
			memcpy(it.head + CM_HEADER_SIZE, ev->value, ev->len);
			it.head_len = CM_HEADER_SIZE + ev->len;
			it.body_len = 0;
			it.body = NULL;
			it.ref = NULL;
			cm_core_emit(s, &it);
		}
		CM_STAT_ADD(core, events_replayed, nevents - from);
	}
	struct cm_header ack = {
	    .type = CM_T_EVENT_ACK, .src = s->rank, .dst = s->rank, .clock = nevents};
	cm_core_emit_header(s, &ack);
}

void cm_core_dispatch(struct cm_session *s, struct cm_frame *f)
{
	struct cm_core *core = s->core;
	enum cm_sess_state st = sess_state(s);
	if (st == CM_S_CLOSING || st == CM_S_GONE) {
		/* A frame parsed before the session was closed by someone else. */
		cm_entry_free(f->entry);
		f->entry = NULL;
		return;
	}
	journal_frame(s, f);
	switch (f->h.type) {
	case CM_T_HELLO:
		cm_core_hello(s, f);
		break;
	case CM_T_MSG:
		handle_msg(s, f);
		break;
	case CM_T_RECV_REQ: {
		struct cm_dest *d = &core->dests[s->rank];
		if (replay(s, d, f))
			break;
		if (!cm_dest_post_recv(core, d, s, &f->h))
			cm_session_fail(s, CM_E_LENGTH, "out of memory queueing a receive request");
		else
			cm_dest_trim(core, d);
		break;
	}
	case CM_T_PROBE:
		if (replay(s, &core->dests[s->rank], f))
			break;
		if (!cm_dest_probe(core, &core->dests[s->rank], s, &f->h))
			cm_session_fail(s, CM_E_LENGTH, "out of memory queueing a probe");
		break;
	case CM_T_CANCEL:
		switch (cm_dest_cancel(core, &core->dests[s->rank], s, &f->h)) {
		case CM_CANCEL_DONE:
		case CM_CANCEL_TOO_LATE:
			break;
		case CM_CANCEL_NOMEM:
			cm_session_fail(s, CM_E_LENGTH, "out of memory recording a cancel");
			break;
		case CM_CANCEL_UNKNOWN:
		default:
			cm_session_fail(
			    s, CM_E_STATE,
			    "CANCEL of request %llu: rank %d has no such receive request",
			    (unsigned long long)f->h.clock, (int)s->rank);
			break;
		}
		break;
	case CM_T_EVENT:
		handle_event(s, f);
		break;
	case CM_T_TRIM:
		cm_dest_gc(core, &core->dests[s->rank], f->h.clock, cm_get_u64(f->event),
		           f->h.len == CM_TRIM_PAYLOAD_MAX ? cm_get_u64(f->event + 8) : 0);
		break;
	case CM_T_PUSH_START:
		cm_push_start(core, &core->dests[s->rank], s, f->h.clock);
		break;
	case CM_T_PUSH_ACK:
		cm_push_credit(core, &core->dests[s->rank], s, f->h.clock);
		break;
	case CM_T_EVENT_ACK:
		handle_event_ack(s, f);
		break;
	case CM_T_BYE: {
		struct cm_header ack = {.type = CM_T_BYE_ACK, .src = s->rank, .dst = s->rank};
		if (!sess_move(s, CM_S_READY, CM_S_BYE))
			break;
		s->said_bye = true;
		cm_core_emit_header(s, &ack);
		cm_info("rank %d said BYE", (int)s->rank);
		break;
	}
	default:
		break; /* next_frame hands out no other type */
	}
}

void cm_core_relieve(struct cm_core *core, int rank)
{
	if (rank >= 0 && (uint32_t)rank < cm_core_world_size(core))
		cm_dest_relieve(core, &core->dests[rank]);
}

void cm_session_input(struct cm_session *s, size_t n)
{
	struct cm_frame f;
	cm_session_received(s, n);
	for (;;) {
		if (cm_session_next_frame(s, &f)) {
			cm_core_dispatch(s, &f);
			continue;
		}
		if (cm_session_fill_domain(s) < 0)
			break;
		cm_session_fill_notify(s);
	}
}
