/* Sending side of the replication transport (transport_repl.c has the
 * overview): a master's messages go on the wire to every live replica of
 * their destination and are committed to its own replicas once written, in
 * batches; a non-master keeps them as backups until that commit, and
 * re-sends them if it becomes master (repl_promote). Also the events
 * (MPI_Wtime values and other outcomes) a master hands its replicas, the
 * transport's event hooks, and its isend hook's sends to other ranks. */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "transport_repl.h"

/* Records of small messages are kept for reuse (up to REPL_SPARE_RECORDS):
 * a master holds a batch of them at a time, more than malloc's per-thread
 * cache keeps at hand. */
#define REPL_SMALL_RECORD 256
#define REPL_SPARE_RECORDS 256

/* Where a record's payload starts: one allocation holds the record, its
 * per-replica arrays and the payload. */
static size_t record_data_at(const struct repl *s)
{
	size_t nrep = (size_t)s->nrep;
	size_t head = sizeof(struct rrec) + nrep * sizeof(struct repl_copy);
	return (head + nrep + 15) & ~(size_t)15;
}

/* What a record costs the replica, with the allocator's overhead: a flood
 * of tiny messages is bounded as well as a few large ones. */
static size_t record_cost(const struct repl *s, const struct rrec *r)
{
	return record_data_at(s) + r->cap + 16;
}

struct rrec *repl_record_new(struct repl *s, size_t len)
{
	size_t nrep = (size_t)s->nrep;
	size_t data_at = record_data_at(s);
	size_t cap = len <= REPL_SMALL_RECORD ? REPL_SMALL_RECORD : len;
	struct rrec *r = NULL;
	if (cap == REPL_SMALL_RECORD && s->spare) {
		r = s->spare;
		s->spare = r->next;
		s->nspare--;
	} else if ((r = malloc(data_at + cap)) == NULL) {
		return NULL;
	}
	memset(r, 0, data_at);
	cm_list_init(&r->link);
	r->cap = cap;
	r->copies = (struct repl_copy *)(r + 1);
	r->defer = (char *)(r->copies + nrep);
	r->data = len ? (char *)r + data_at : NULL;
	s->queued += record_cost(s, r);
	return r;
}

void repl_record_free(struct repl *s, struct rrec *r)
{
	s->queued -= record_cost(s, r);
	if (r->cap == REPL_SMALL_RECORD && s->nspare < REPL_SPARE_RECORDS) {
		r->next = s->spare;
		s->spare = r;
		s->nspare++;
		return;
	}
	free(r);
}

void repl_spare_free(struct repl *s)
{
	while (s->spare) {
		struct rrec *r = s->spare;
		s->spare = r->next;
		free(r);
	}
	s->nspare = 0;
}

/* Batching. The master writes each message at once to the destination's
 * master, whose answer the program may be waiting for, but only queues it
 * for the destination's other replicas, and it commits in batches: a
 * commit covers every message to a destination below a sequence number
 * (cumulative), so one frame per destination frees any number of
 * backups. Each non-master replica (the destination's and our own) is
 * then woken once per batch, not once per message. A batch goes out
 * (repl_flush) once REPL_BATCH_COUNT messages or REPL_BATCH_BYTES bytes
 * wait for it (batch_full), when the oldest uncommitted one is
 * REPL_BATCH_MS old (repl_progress), when a process dies (reap: a
 * promoted replica must get what its dead master had), at promotion and
 * at finalize. So our replicas' backups are rarely more than a batch
 * behind what the sockets took; what a replica holds in all is bounded by
 * CM_QUEUE_MAX (transport_repl.c: wait_queue_room). It is safe because
 * a record is committed only once all its writes are in the kernel: if we
 * die with writes still queued, our next replica re-sends the message
 * (receivers drop what they have). Large messages (REPL_BATCH_MAX and up)
 * are written to every replica at once: a batch would save nothing. */

/* Writes (or queues) record r's message to replica k of its destination
 * over c; copy k tells repl_on_sent when it is in the kernel. */
static void send_copy(struct repl *s, struct rrec *r, int k, struct cm_conn *c)
{
	struct cm_header h = {.type = CM_T_MSG,
	                      .flags = r->sync ? CM_F_SYNC : 0,
	                      .src = s->rank,
	                      .dst = r->dst,
	                      .tag = r->tag,
	                      .ctx = r->ctx,
	                      .clock = r->seq};
	r->copies[k] = (struct repl_copy){.rec = r, .conn = c};
	cm_conn_send(c, &h, r->data, r->len, &r->copies[k], 0);
}

/* The destination replicas' queued frames of the batch, each replica's in
 * order, then written with one system call per connection (ascending
 * process index within a rank, as for a single message). */
static void write_deferred(struct repl *s)
{
	struct rrec *list = s->deferred;
	s->deferred = s->deferred_tail = NULL;
	s->ndeferred = 0;
	s->deferred_bytes = 0;
	size_t nconns = 0;
	for (struct rrec *r = list; r; r = r->dnext) {
		for (int k = 0; k < s->nrep; k++) {
			if (!r->defer[k])
				continue;
			r->defer[k] = 0;
			int p = r->dst * s->nrep + k;
			struct cm_conn *c = s->finished[p] ? NULL : repl_link_to(s, p);
			if (c == NULL || !cm_conn_alive(c) || c->shut) {
				r->pending--; /* gone: nothing to write */
				continue;
			}
			if (!s->batch_saved[p]) {
				/* Park the connection: cm_conn_send only queues while
				 * it believes the kernel is full. */
				s->batch_saved[p] = 1 + (char)c->wblocked;
				s->batch_conns[nconns++] = p;
				c->wblocked = 1;
			}
			send_copy(s, r, k, c);
		}
	}
	for (size_t i = 0; i < nconns; i++) {
		int p = s->batch_conns[i];
		struct cm_conn *c = s->out[p];
		int was_blocked = s->batch_saved[p] - 1;
		s->batch_saved[p] = 0;
		if (c == NULL)
			continue;
		c->wblocked = was_blocked;
		if (!was_blocked && cm_conn_alive(c))
			cm_conn_flush(c); /* may complete records (repl_on_sent) */
	}
	/* Records whose writes are all done complete here (the caller
	 * commits them together). */
	s->in_batch = 1;
	for (struct rrec *r = list, *next; r; r = next) {
		next = r->dnext;
		r->dnext = NULL;
		r->batched = 0;
		if (r->pending == 0)
			repl_record_done(s, r);
	}
	s->in_batch = 0;
}

/* Messages written everywhere since the last commit: what a commit now
 * would free in our replicas. */
static int commit_due(const struct repl *s)
{
	return s->uncommitted - s->ninflight >= REPL_BATCH_COUNT ||
	       s->uncommitted_bytes - s->inflight_bytes >= REPL_BATCH_BYTES;
}

/* Is the batch big enough to go out: the writes waiting for it, and the
 * messages written but not committed? Messages still being written (a
 * receiver slower than us) do not count: flushing the batch moves them
 * no further. */
static int batch_full(const struct repl *s)
{
	return s->uncommitted - s->ninflight + s->ndeferred >= REPL_BATCH_COUNT ||
	       s->uncommitted_bytes - s->inflight_bytes + s->deferred_bytes >= REPL_BATCH_BYTES;
}

void repl_commit(struct repl *s, int flush)
{
	if (s->uncommitted == s->ninflight)
		return; /* nothing new is written */
	int queued = 0;
	for (int dst = 0; dst < s->size; dst++) {
		/* Everything to dst below upto is in every live destination
		 * replica's kernel: sent, or skipped because an earlier master
		 * committed it. */
		uint64_t upto = s->sendseq[dst];
		const struct rrec *oldest =
		    cm_list_entry(cm_list_first(&s->inflight[dst]), struct rrec, link);
		if (oldest)
			upto = oldest->seq;
		if (upto <= s->commit_sent[dst])
			continue;
		s->commit_sent[dst] = upto;
		for (int k = 0; k < s->nrep; k++) {
			int p = s->rank * s->nrep + k;
			if (k == s->replica || s->dead[p] || s->finished[p])
				continue;
			struct cm_conn *c = repl_link_to(s, p);
			if (c &&
			    cm_conn_queue_ctl(c,
			                      &(struct cm_header){.type = CM_T_SYNC_ACK,
			                                          .src = s->rank,
			                                          .dst = s->rank,
			                                          .clock = repl_key(dst, upto - 1)},
			                      NULL, 0) == 0)
				queued = 1;
		}
	}
	s->uncommitted = s->ninflight;
	s->uncommitted_bytes = s->inflight_bytes;
	s->uncommitted_since_ms = cm_now_ms();
	if (queued)
		s->replicas_queued = 1;
	if (flush)
		repl_flush_replicas(s);
}

void repl_flush_replicas(struct repl *s)
{
	if (!s->replicas_queued)
		return;
	s->replicas_queued = 0;
	for (int k = 0; k < s->nrep; k++) {
		struct cm_conn *c = s->out[s->rank * s->nrep + k];
		if (c && cm_conn_alive(c) && !c->wblocked)
			cm_conn_flush(c);
	}
}

void repl_flush(struct repl *s)
{
	if (s->deferred)
		write_deferred(s);
	repl_commit(s, 0);
	repl_flush_replicas(s);
}

/* Every write of in-flight record r is done (or its connection died): it
 * is no longer needed. */
void repl_record_done(struct repl *s, struct rrec *r)
{
	if (r->batched)
		return; /* write_deferred finishes it */
	if (cm_list_empty(&r->link))
		return; /* linked to itself: in no list, not in flight */
	cm_list_remove(&r->link);
	s->ninflight--;
	s->inflight_bytes -= r->len;
	repl_record_free(s, r);
	if (!s->in_batch && commit_due(s))
		repl_commit(s, 1);
}

static int any_finished(const struct repl *s, int rank)
{
	for (int k = 0; k < s->nrep; k++)
		if (s->finished[rank * s->nrep + k])
			return 1;
	return 0;
}

/* Master: puts record r on the wire to the live replicas of its
 * destination: now to its master (and to every one for a large message),
 * in the next batch to the others. */
int repl_wire_send(struct repl *s, struct rrec *r)
{
	r->next = NULL;
	cm_list_push_back(&s->inflight[r->dst], &r->link);
	s->ninflight++;
	s->inflight_bytes += r->len;
	if (s->uncommitted++ == 0)
		s->uncommitted_since_ms = cm_now_ms();
	s->uncommitted_bytes += r->len;
	r->pending = 1; /* held until every write is queued */
	/* The events decided so far reach our replicas before a message that
	 * may depend on them leaves: a replica taking over must decide as we
	 * did. */
	repl_flush_replicas(s);
	int deferred = 0;
	int now_to = r->len >= REPL_BATCH_MAX ? s->nrep : repl_master_of(s, r->dst) + 1;
	for (int k = 0; k < s->nrep; k++) {
		int p = r->dst * s->nrep + k;
		if (s->finished[p] || s->dead[p])
			continue;
		if (k >= now_to) {
			r->defer[k] = 1;
			r->pending++;
			deferred = 1;
			continue;
		}
		struct cm_conn *c = repl_link_to(s, p);
		if (c == NULL || !cm_conn_alive(c))
			continue;
		r->pending++;
		send_copy(s, r, k, c); /* on failure the reaper settles its token */
	}
	if (repl_master_of(s, r->dst) < 0 && !any_finished(s, r->dst)) {
		cm_err("rank %d: cannot send to rank %d: every replica of it is dead", s->rank,
		       r->dst);
		s->fatal = 1;
	}
	if (deferred) {
		r->batched = 1;
		if (s->deferred_tail)
			s->deferred_tail->dnext = r;
		else
			s->deferred = r;
		s->deferred_tail = r;
		s->ndeferred++;
		s->deferred_bytes += r->len;
	}
	r->pending--;
	if (r->pending == 0)
		repl_record_done(s, r);
	if (batch_full(s))
		repl_flush(s);
	return s->fatal ? -1 : 0;
}

void repl_on_sent(struct cm_conn *c, void *token)
{
	struct repl *s = c->owner;
	struct repl_copy *copy = token;
	if (copy->conn == NULL)
		return;
	copy->conn = NULL;
	struct rrec *r = copy->rec;
	if (--r->pending == 0)
		repl_record_done(s, r);
}

/* Connection c is going: its unwritten copies will never be written. */
void repl_settle_conn(struct repl *s, struct cm_conn *c)
{
	for (int dst = 0; dst < s->size; dst++) {
		struct rrec *r;
		cm_list_for_each(r, &s->inflight[dst], struct rrec, link)
		{
			int settled = 0;
			for (int k = 0; k < s->nrep; k++) {
				if (r->copies[k].conn == c) {
					r->copies[k].conn = NULL;
					r->pending--;
					settled = 1;
				}
			}
			if (settled && r->pending == 0)
				repl_record_done(s, r); /* may free r */
		}
	}
}

int repl_add_event(struct repl *s, uint32_t kind, const void *value, size_t len)
{
	struct repl_event *e = cm_vec_push(&s->events);
	if (e == NULL)
		return -1;
	memset(e, 0, sizeof *e);
	e->kind = kind;
	e->len = (uint32_t)(len < CM_EVENT_PAYLOAD_MAX ? len : CM_EVENT_PAYLOAD_MAX);
	memcpy(e->value, value, e->len);
	return 0;
}

/* Master: event i to every live replica of ours, ascending (so the next
 * master, the lowest survivor, has every event any other one has). */
void repl_send_event(struct repl *s, size_t i)
{
	const struct repl_event *e = &s->events.items[i];
	for (int k = 0; k < s->nrep; k++) {
		int p = s->rank * s->nrep + k;
		if (k == s->replica || s->dead[p] || s->finished[p])
			continue;
		struct cm_conn *c = repl_link_to(s, p);
		if (c && cm_conn_queue_ctl(c,
		                           &(struct cm_header){.type = CM_T_EVENT,
		                                               .src = s->rank,
		                                               .dst = s->rank,
		                                               .tag = (int)e->kind,
		                                               .clock = i},
		                           e->value, e->len) == 0)
			s->replicas_queued = 1;
	}
}

void repl_send_choice(struct repl *s, size_t i)
{
	uint8_t src[4];
	cm_put_u32(src, (uint32_t)s->choices[i].src);
	for (int k = 0; k < s->nrep; k++) {
		int p = s->rank * s->nrep + k;
		if (k == s->replica || s->dead[p] || s->finished[p])
			continue;
		struct cm_conn *c = repl_link_to(s, p);
		if (c && cm_conn_queue_ctl(c,
		                           &(struct cm_header){.type = CM_T_EVENT,
		                                               .src = s->rank,
		                                               .dst = s->rank,
		                                               .tag = REPL_CHOICE,
		                                               .clock = s->choices[i].reqid},
		                           src, sizeof src) == 0)
			s->replicas_queued = 1;
	}
}

int repl_promote(struct repl *s)
{
	for (size_t i = 0; i < s->events.n; i++)
		repl_send_event(s, i);
	for (size_t i = 0; i < s->nchoices; i++)
		repl_send_choice(s, i);
	struct rrec *r = s->backups;
	s->backups = s->backups_tail = NULL;
	int rc = 0;
	while (r) {
		struct rrec *next = r->next;
		if (rc == 0 && repl_wire_send(s, r) < 0)
			rc = -1;
		else if (rc < 0)
			repl_record_free(s, r);
		r = next;
	}
	repl_flush(s);
	return rc;
}

void repl_on_commit(struct repl *s, uint64_t key)
{
	int dst = (int)(key >> REPL_SEQ_BITS);
	uint64_t seq = key & REPL_SEQ_MASK;
	if (dst < 0 || dst >= s->size)
		return;
	if (seq + 1 > s->committed[dst])
		s->committed[dst] = seq + 1;
	/* Backups are in sending order, so dst's ascend: the walk ends at the
	 * first one the commit does not cover (the tail is then unchanged). */
	struct rrec **pp = &s->backups, *prev = NULL;
	while (*pp) {
		struct rrec *r = *pp;
		if (r->dst == dst && r->seq > seq)
			return;
		if (r->dst == dst) {
			*pp = r->next;
			repl_record_free(s, r);
			continue;
		}
		prev = r;
		pp = &r->next;
	}
	s->backups_tail = prev;
}

/* ---- sends to another rank, and the transport hooks of events ---- */

int repl_send_to_peer(struct repl *s, struct cm_req *req)
{
	uint64_t seq = s->sendseq[req->peer]++;
	req->id = seq;
	if (seq < s->committed[req->peer]) {
		req->done = 1; /* our (earlier) master sent it already */
		return 0;
	}
	struct rrec *r = repl_record_new(s, req->slen);
	if (r == NULL) {
		cm_err("rank %d: out of memory for a %zu-byte message", s->rank, req->slen);
		return -1;
	}
	r->dst = req->peer;
	r->tag = req->tag;
	r->ctx = req->ctx;
	r->seq = seq;
	r->sync = req->sync;
	r->len = req->slen;
	if (req->slen)
		memcpy(r->data, req->sbuf, req->slen);
	if (!repl_is_master(s)) {
		/* A backup until the master's commit; the send itself is done. */
		if (s->backups_tail)
			s->backups_tail->next = r;
		else
			s->backups = r;
		s->backups_tail = r;
		req->done = 1;
		return 0;
	}
	if (req->sync) {
		req->t_wait = CM_SEND_WAIT_ACK;
		req->id = repl_key(req->peer, seq);
		if (cm_reqmap_put(&s->syncs, req) < 0)
			return -1;
	} else {
		req->done = 1;
	}
	return repl_wire_send(s, r);
}

/* A nondeterministic value (MPI_Wtime): the master's own, sent to its
 * replicas; a non-master waits for the master's and uses it. */
int repl_event_peek(struct cm_transport *t, uint32_t *kind)
{
	struct repl *s = t->state;
	if (s->events_used < s->events.n) {
		*kind = s->events.items[s->events_used].kind;
		return 1;
	}
	return repl_is_master(s) ? 0 : -1;
}

int repl_event(struct cm_transport *t, uint32_t kind, void *value, size_t len, int *replayed)
{
	struct repl *s = t->state;
	*replayed = 0;
	if (len < 1 || len > CM_EVENT_PAYLOAD_MAX)
		return -1;
	while (s->events_used == s->events.n && !repl_is_master(s))
		if (t->progress(t, -1) < 0)
			return -1;
	if (s->events_used < s->events.n) {
		const struct repl_event *e = &s->events.items[s->events_used++];
		if (e->kind != kind || e->len != len) {
			cm_err("rank %d replica %d: event %zu is of kind %u, the program asks for "
			       "kind %u: the replicas diverged",
			       s->rank, s->replica, s->events_used - 1, e->kind, kind);
			return -1;
		}
		memcpy(value, e->value, len);
		*replayed = 1;
		return 0;
	}
	if (repl_add_event(s, kind, value, len) < 0) {
		cm_err("rank %d: out of memory for events", s->rank);
		return -1;
	}
	s->events_used++;
	repl_send_event(s, s->events.n - 1);
	return 0;
}
