/* The fault-tolerance side of the channel-memory transport: a rank's
 * nondeterministic events (logged at its home CM, replayed to a
 * re-execution, settled before a frame to another CM), and the counters a
 * checkpoint image holds (transport.h's snapshot and ckpt_committed). */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "transport_cm.h"

int cmt_add_replayed(struct cm_conn *c, struct cmt *s, const struct cm_header *h)
{
	if (s->nreplay == s->replay_cap) {
		uint64_t cap = s->replay_cap ? s->replay_cap * 2 : 64;
		struct cm_replayed_event *r = realloc(s->replay, cap * sizeof *r);
		if (r == NULL)
			return cm_conn_fail(c, "out of memory replaying events");
		s->replay = r;
		s->replay_cap = cap;
	}
	struct cm_replayed_event *ev = &s->replay[s->nreplay++];
	ev->kind = (uint32_t)h->tag;
	ev->len = (uint8_t)h->len;
	memcpy(ev->value, s->ev_buf, h->len);
	return 0;
}

int cmt_on_event_ack(struct cm_conn *c, struct cmt *s, const struct cm_header *h)
{
	s->acks_out[c->peer]--; /* on_header checked that one was asked */
	if (c->peer != s->myhome)
		return 0; /* a snapshot's round trip: another CM's count is not ours */
	if (s->ev_fetching) {
		if (h->clock != s->replay_base + s->nreplay)
			return cm_conn_fail(c, "event log of %llu events, %llu replayed",
			                    (unsigned long long)h->clock,
			                    (unsigned long long)(s->replay_base + s->nreplay));
		s->ev_fetching = 0;
	}
	if (h->clock > s->ev_acked)
		s->ev_acked = h->clock;
	cmt_events_acked(s);
	return 0;
}

/* The pessimistic condition before a frame to another CM than home: every
 * event so far is logged at home. One round trip, only when some event is
 * not yet acknowledged. */
int cmt_events_settle(struct cm_transport *t)
{
	struct cmt *s = t->state;
	if (s->ev_acked >= s->ev_next)
		return 0;
	struct cm_conn *home = cmt_conn(s, s->myhome);
	s->ev_unwritten = 0;
	s->acks_out[s->myhome]++;
	if (cmt_sent(s, cm_conn_send_ctl(home,
	                                 &(struct cm_header){.type = CM_T_EVENT_ACK,
	                                                     .src = s->rank,
	                                                     .dst = s->rank,
	                                                     .clock = s->ev_next},
	                                 NULL, 0)) < 0)
		return -1;
	while (s->ev_acked < s->ev_next)
		if (cmt_progress(t, -1) < 0)
			return -1;
	return 0;
}

int cmt_event_peek(struct cm_transport *t, uint32_t *kind)
{
	struct cmt *s = t->state;
	if (s == NULL)
		return 0;
	uint64_t idx = s->ev_next;
	if (idx >= s->replay_base && idx - s->replay_base < s->nreplay) {
		*kind = s->replay[idx - s->replay_base].kind;
		return 1;
	}
	return 0;
}

int cmt_event(struct cm_transport *t, uint32_t kind, void *value, size_t len, int *replayed)
{
	struct cmt *s = t->state;
	*replayed = 0;
	if (s == NULL)
		return 0; /* not initialised, or finalized: nothing to log */
	if (len < 1 || len > CM_EVENT_PAYLOAD_MAX || kind > INT32_MAX) {
		cm_err("rank %d: event kind %u of %zu bytes cannot be logged", s->rank,
		       (unsigned)kind, len);
		return -1;
	}
	if (s->dead)
		return -1;
	uint64_t idx = s->ev_next;
	if (idx >= s->replay_base && idx - s->replay_base < s->nreplay) {
		const struct cm_replayed_event *ev = &s->replay[idx - s->replay_base];
		if (ev->kind != kind || ev->len != len) {
			cm_err("rank %d: re-execution diverged: event %llu was of kind %u (%u "
			       "bytes), now of kind %u (%zu bytes)",
			       s->rank, (unsigned long long)idx, (unsigned)ev->kind,
			       (unsigned)ev->len, (unsigned)kind, len);
			return -1;
		}
		memcpy(value, ev->value, len);
		s->ev_next++;
		*replayed = 1;
		return 0;
	}
	struct cm_conn *home = cmt_conn(s, s->myhome);
	if (cmt_event_keep(s, idx, kind, value, len) < 0 ||
	    cmt_sent(s, cm_conn_queue_ctl(home,
	                                  &(struct cm_header){.type = CM_T_EVENT,
	                                                      .src = s->rank,
	                                                      .dst = s->rank,
	                                                      .tag = (int)kind,
	                                                      .clock = idx},
	                                  value, len)) < 0)
		return -1;
	s->ev_next++;
	/* Messages queued before the event leave now, with it: a later send
	 * must find no event behind queued messages (transport_cm_coalesce.c). */
	if (s->co.on[s->myhome] && cmt_sent(s, cmt_coalesce_flush(s)) < 0)
		return -1;
	/* Kept events are bounded too: home is asked how many it holds. */
	if (s->reconnect_ms > 0 && s->ev_next - s->ev_acked >= EV_KEEP_ASK &&
	    s->acks_out[s->myhome] == 0) {
		s->acks_out[s->myhome]++;
		if (cmt_sent(s, cm_conn_queue_ctl(home,
		                                  &(struct cm_header){.type = CM_T_EVENT_ACK,
		                                                      .src = s->rank,
		                                                      .dst = s->rank,
		                                                      .clock = s->ev_next},
		                                  NULL, 0)) < 0)
			return -1;
	}
	if (++s->ev_unwritten >= EV_FLUSH_BATCH) {
		/* Bounded memory for a program that asks the time in a loop. */
		s->ev_unwritten = 0;
		if (!home->wblocked && cmt_sent(s, cm_conn_flush(home)) < 0)
			return -1;
	}
	return 0;
}

/* A re-executing rank takes its event log from home before running on:
 * every event the dead incarnations logged, then the count. */
int cmt_fetch_events(struct cm_transport *t, long long deadline)
{
	struct cmt *s = t->state;
	s->ev_fetching = 1;
	s->acks_out[s->myhome]++;
	/* clock: the first event wanted (past what a checkpoint image consumed). */
	if (cmt_sent(s, cm_conn_send_ctl(cmt_conn(s, s->myhome),
	                                 &(struct cm_header){.type = CM_T_EVENT_ACK,
	                                                     .flags = CM_F_REPLAY,
	                                                     .src = s->rank,
	                                                     .dst = s->rank,
	                                                     .clock = s->replay_base},
	                                 NULL, 0)) < 0)
		return -1;
	while (s->ev_fetching) {
		long long left = deadline - cm_now_ms();
		if (left <= 0) {
			cm_err("rank %d: no event log from %s within %d s", s->rank,
			       s->cms[s->myhome]->name, HELLO_TIMEOUT_MS / 1000);
			return -1;
		}
		if (cmt_progress(t, (int)(left < 1000 ? left : 1000)) < 0)
			return -1;
	}
	s->ev_acked = s->replay_base + s->nreplay;
	return 0;
}

/* A checkpoint's counters. Before the image may say "sent up to clock C",
 * every CM must have processed what we sent: one EVENT_ACK round trip on
 * every connection (a CM answers after the frames before it). Events are
 * then logged at home up to ev_next too. */
static int acks_outstanding(const struct cmt *s)
{
	for (int i = 0; i < s->ncms; i++)
		if (s->acks_out[i] > 0)
			return 1;
	return 0;
}

int cmt_snapshot(struct cm_transport *t, struct cm_resume *out)
{
	struct cmt *s = t->state;
	if (s == NULL || s->dead)
		return -1;
	if (s->recvs.count || s->syncs.count || s->probe_waiting || s->cancel_waiting ||
	    s->push.q.posted_head)
		return 1;
	s->ev_unwritten = 0;
	for (int i = 0; i < s->ncms; i++) {
		s->acks_out[i]++;
		if (cmt_sent(s, cm_conn_send_ctl(cmt_conn(s, i),
		                                 &(struct cm_header){.type = CM_T_EVENT_ACK,
		                                                     .src = s->rank,
		                                                     .dst = s->rank},
		                                 NULL, 0)) < 0)
			return -1;
	}
	/* Answers come in order: once none is outstanding, every CM answered
	 * after the frames sent before this round. */
	while (acks_outstanding(s))
		if (cmt_progress(t, -1) < 0)
			return -1;
	if (s->ev_acked < s->ev_next) {
		cm_err("rank %d: home logged %llu events of %llu", s->rank,
		       (unsigned long long)s->ev_acked, (unsigned long long)s->ev_next);
		return -1;
	}
	*out = (struct cm_resume){.clock = s->clock, .reqid = s->reqid, .events = s->ev_next};
	return cmt_push_snapshot(s, out);
}

/* Garbage collection: what the committed image covers may go (TRIM). A
 * TRIM that does not arrive costs only memory: the CM keeps more. */
void cmt_ckpt_committed(struct cm_transport *t, const struct cm_resume *state)
{
	struct cmt *s = t->state;
	if (s == NULL || s->dead)
		return;
	s->trim_sent = 1;
	s->trim_reqid = state->reqid;
	s->trim_events = state->events;
	s->trim_pushes = state->pushes;
	cmt_sent(s, cmt_trim_send(s, cmt_conn(s, s->myhome), 0));
}
