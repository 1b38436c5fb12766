/* Pushed messages (DEST domain, see core.h): a MSG flagged CM_F_PUSH --
 * the collective layer's messages, whose receives always name their
 * source, tag and context -- is logged like any other, then sent to its
 * receiver's connection as it arrives, without waiting for a RECV_REQ; the
 * receiving rank matches it itself. That saves the request frame and the
 * wake-up it costs per message, which is most of what a short collective
 * costs through a CM.
 *
 * The push order of a destination is the order its pushed messages were
 * logged, numbered from 0; the journal rebuilds the same order (a
 * destination's messages are journaled in the order they are logged). A
 * rank asks for its pushes with PUSH_START naming the first number it has
 * not received (0 for a fresh run; its image's count when restored from a
 * checkpoint; what it has when it reconnects), and gets them from there in
 * order. Since a rank matches every pushed message by its sender, tag and
 * context, in each sender's order, a re-execution matches the same
 * messages however the senders' messages interleave.
 *
 * Window. At most CM_PUSH_WINDOW bytes (payload and header) go out beyond
 * what the rank acknowledged with PUSH_ACK, so a rank running behind, or
 * re-executing with a long log, does not get its whole log at once; the
 * rest waits in the log (and its spill store). A rank acknowledges what
 * it consumed, and, when it waits for a pushed message with a window's
 * worth held, what it holds: it may need a message behind them.
 *
 * Memory. A pushed message counts as delivered once it has gone out: past
 * --log-mem it is spilled like a delivered one, and a re-push reads it
 * back. Only a committed checkpoint (TRIM) lets it go. Below msglog.c
 * (matching), above record.c (spilled payloads) and emit.c. */
#include "config.h"

#include "core_impl.h"

#include <stdlib.h>

bool cm_push_add(struct cm_dest *d, struct cm_entry *e)
{
	struct cm_entry **slot = cm_vec_push(&d->pushes);
	if (slot == NULL)
		return false;
	*slot = e;
	e->push_seq = d->push_base + d->pushes.n - 1;
	return true;
}

/* Stops pushing to the connection (it is refused, or went away). */
static void push_stop(struct cm_dest *d)
{
	d->push_sess = NULL;
}

void cm_push_pump(struct cm_core *core, struct cm_dest *d)
{
	struct cm_session *s = d->push_sess;
	if (s == NULL)
		return;
	uint64_t end = d->push_base + d->pushes.n;
	while (d->push_next < end && d->push_out < CM_PUSH_WINDOW) {
		if (cm_session_closing(s)) {
			push_stop(d);
			return;
		}
		uint64_t n = d->push_next;
		struct cm_entry *e = d->pushes.items[n - d->push_base];
		if (e == NULL) {
			push_stop(d);
			cm_session_fail(s, CM_E_STATE,
			                "cannot push message %llu to rank %d again: it was dropped "
			                "from the log (raise --log-mem, or restart from the "
			                "checkpoint that covers it)",
			                (unsigned long long)n, (int)s->rank);
			return;
		}
		bool again = e->delivered;
		if (!cm_emit_entry(core, e, s, n, CM_F_PUSH)) {
			push_stop(d);
			cm_session_fail(
			    s, CM_E_STATE,
			    "pushed message %llu for rank %d cannot be read back from the "
			    "spill store",
			    (unsigned long long)n, (int)s->rank);
			return;
		}
		if (again)
			CM_STAT_ADD(core, pushes_resent, 1);
		else
			cm_entry_delivered(core, e);
		CM_STAT_ADD(core, msgs_pushed, 1);
		d->push_out += CM_HEADER_SIZE + (uint64_t)e->len;
		d->push_next = n + 1;
	}
}

bool cm_push_start(struct cm_core *core, struct cm_dest *d, struct cm_session *s, uint64_t first)
{
	uint64_t end = d->push_base + d->pushes.n;
	if (first < d->push_base || first > end) {
		cm_session_fail(s, CM_E_STATE,
		                "rank %d asks for its pushed messages from %llu; this channel "
		                "memory holds %llu to %llu",
		                (int)s->rank, (unsigned long long)first,
		                (unsigned long long)d->push_base, (unsigned long long)end);
		return false;
	}
	d->push_sess = s;
	d->push_next = first;
	d->push_out = 0;
	cm_push_pump(core, d);
	return true;
}

void cm_push_credit(struct cm_core *core, struct cm_dest *d, struct cm_session *s, uint64_t bytes)
{
	if (d->push_sess != s)
		return; /* a connection pushed to before: its credit is void */
	d->push_out = bytes >= d->push_out ? 0 : d->push_out - bytes;
	cm_push_pump(core, d);
}

void cm_push_drop_session(struct cm_dest *d, struct cm_session *s)
{
	if (d->push_sess == s)
		push_stop(d);
}

void cm_push_lost(struct cm_dest *d, struct cm_entry *e)
{
	if (e->push_seq >= d->push_base && e->push_seq - d->push_base < d->pushes.n)
		d->pushes.items[e->push_seq - d->push_base] = NULL;
}

void cm_push_gc(struct cm_core *core, struct cm_dest *d, uint64_t cut)
{
	uint64_t drop = cut - d->push_base, freed = 0;
	for (uint64_t i = 0; i < drop; i++) {
		struct cm_entry *e = d->pushes.items[i];
		if (e == NULL || e->in_log)
			continue; /* dropped already, or the log walk frees it */
		cm_spill_forget(core, e);
		cm_entry_free(e);
		freed++;
	}
	CM_STAT_ADD(core, log_entries_collected, freed);
	cm_vec_drop_front(&d->pushes, (size_t)drop);
	d->push_base = cut;
	if (d->push_next < cut)
		d->push_next = cut;
}

void cm_push_free(struct cm_dest *d)
{
	for (size_t i = 0; i < d->pushes.n; i++) {
		struct cm_entry *e = d->pushes.items[i];
		if (e && !e->in_log)
			cm_entry_free(e); /* spilled, in no log list any more */
	}
	cm_vec_free(&d->pushes);
	d->push_sess = NULL;
}
