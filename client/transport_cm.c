/* The channel-memory transport: every message travels through the
 * destination's home channel memory (CM), which logs it and does all the
 * matching, so the match order is logged by construction.
 *
 * At init the rank connects to every CM and says HELLO (kind
 * CM_PEER_RANK). A send is a MSG to home[dst] carrying the sender clock (one
 * counter over all messages). A receive is a RECV_REQ to our own home CM
 * the moment it is posted; the DELIVER carrying its request id completes
 * it, its payload read straight into the receive buffer. Probes ask the
 * home CM (PROBE/PROBE_REPLY). Finalize says BYE to every CM and waits for
 * BYE_ACK. Losing a CM is fatal: progress returns -1 after saying which.
 * MPI_Cancel of a receive asks the home CM (CANCEL/CANCEL_ACK).
 *
 * Nondeterministic events (the event hook: MPI_Wtime values) are logged at
 * our home CM before anything that may depend on them leaves: an EVENT frame
 * is queued on the home connection at once (not written: the next frame to
 * home carries it in the same write, and TCP order puts it first); before a
 * MSG to another CM, the home CM must have acknowledged every event
 * (EVENT_ACK round trip, only when events are unacknowledged). A new
 * incarnation fetches its event log at init (EVENT_ACK with CM_F_REPLAY)
 * and its events are answered from it until it runs out.
 *
 * With CHANMEM_CM_RECONNECT=<seconds> a lost CM connection is not fatal:
 * transport_cm_reconnect.c re-establishes it and re-sends what the CM may
 * not have logged. */
#include <config.h>

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conn.h"
#include "log.h"
#include "net.h"
#include "transport.h"
#include "transport_common.h"

#include "transport_cm.h"

static int accepts(const struct cm_req *r, int src, int tag, uint32_t ctx)
{
	return r->ctx == ctx && (r->peer == CM_ANY_SOURCE || r->peer == src) &&
	       (r->tag == CM_ANY_TAG || r->tag == tag);
}

static enum cm_err on_hello(struct cm_conn *c, const struct cm_header *h,
                            const struct cm_hello *hello, char *text, size_t textlen)
{
	return CM_E_STATE; /* we never accept connections */
}

static int on_header(struct cm_conn *c, const struct cm_header *h, struct cm_sink *sink)
{
	struct cmt *s = c->owner;
	if (h->dst != s->rank)
		return cm_conn_fail(c, "%s for rank %d", cm_type_str(h->type), h->dst);
	switch (h->type) {
	case CM_T_DELIVER: {
		if (h->flags & CM_F_PUSH)
			return cmt_push_header(s, c, h, sink);
		if (c->peer != s->myhome)
			return cm_conn_fail(c,
			                    "DELIVER from a channel memory that is not our home");
		struct cm_req *r = cm_reqmap_take(&s->recvs, h->clock);
		if (r == NULL)
			return cm_conn_fail(c, "DELIVER for unknown receive request %llu",
			                    (unsigned long long)h->clock);
		if (!accepts(r, h->src, h->tag, h->ctx))
			return cm_conn_fail(c,
			                    "DELIVER of (src %d, tag %d, ctx %u) to request %llu "
			                    "for (src %d, tag %d, ctx %u)",
			                    h->src, h->tag, h->ctx, (unsigned long long)h->clock,
			                    r->peer, r->tag, r->ctx);
		r->st_source = h->src;
		r->st_tag = h->tag;
		r->st_bytes = h->len;
		r->error = h->len > r->rcap ? CM_REQ_ERR_TRUNCATE : 0;
		*sink = (struct cm_sink){
		    .buf = r->rbuf, .cap = r->rcap, .kind = SINK_DELIVER, .cookie = r};
		return 0;
	}
	case CM_T_PROBE_REPLY:
		if (!s->probe_waiting || h->clock != s->probe_id)
			return cm_conn_fail(c, "PROBE_REPLY for unknown probe %llu",
			                    (unsigned long long)h->clock);
		*sink = (struct cm_sink){
		    .buf = s->probe_buf, .cap = sizeof s->probe_buf, .kind = SINK_PROBE};
		return 0;
	case CM_T_EVENT:
		if (c->peer != s->myhome || !s->ev_fetching)
			return cm_conn_fail(c, "EVENT %llu not asked for",
			                    (unsigned long long)h->clock);
		if (h->clock != s->replay_base + s->nreplay)
			return cm_conn_fail(c, "replayed EVENT %llu, expected %llu",
			                    (unsigned long long)h->clock,
			                    (unsigned long long)(s->replay_base + s->nreplay));
		*sink = (struct cm_sink){.buf = s->ev_buf, .cap = sizeof s->ev_buf};
		return 0;
	case CM_T_EVENT_ACK:
		if (s->acks_out[c->peer] == 0)
			return cm_conn_fail(c, "EVENT_ACK not asked for");
		return 0;
	case CM_T_CANCEL_ACK:
		if (c->peer != s->myhome || !s->cancel_waiting || h->clock != s->cancel_id)
			return cm_conn_fail(c, "CANCEL_ACK for request %llu not cancelled",
			                    (unsigned long long)h->clock);
		return 0;
	case CM_T_SYNC_ACK:
	case CM_T_BYE_ACK:
	case CM_T_LOGGED:
		return 0;
	case CM_T_STANDBY:
		/* Per CM: payloads of two connections may arrive interleaved. */
		if (s->alts)
			*sink = (struct cm_sink){.buf = s->alts[c->peer].named,
			                         .cap = sizeof s->alts[c->peer].named};
		return 0;
	default:
		return cm_conn_fail(c, "unexpected %s", cm_type_str(h->type));
	}
}

static int on_frame(struct cm_conn *c, const struct cm_header *h, const struct cm_sink *sink)
{
	struct cmt *s = c->owner;
	switch (h->type) {
	case CM_T_DELIVER: {
		if (h->flags & CM_F_PUSH)
			return cmt_push_frame(s, h, sink);
		struct cm_req *r = sink->cookie;
		r->done = 1;
		return 0;
	}
	case CM_T_PROBE_REPLY: {
		struct cm_probe_result *p = &s->probe_result;
		p->found = (h->flags & CM_F_FOUND) != 0;
		p->source = p->found ? h->src : -1;
		p->tag = p->found ? h->tag : -1;
		p->bytes = p->found ? (size_t)cm_get_u64(s->probe_buf) : 0;
		s->probe_waiting = 0;
		return 0;
	}
	case CM_T_SYNC_ACK: {
		struct cm_req *r = cm_reqmap_take(&s->syncs, h->clock);
		if (r == NULL && s->reconnect_ms > 0)
			return 0; /* asked again after a reconnection, answered twice */
		if (r == NULL)
			return cm_conn_fail(c, "SYNC_ACK for unknown message %llu",
			                    (unsigned long long)h->clock);
		cm_send_settle(r, CM_SEND_WAIT_ACK);
		return 0;
	}
	case CM_T_EVENT:
		return cmt_add_replayed(c, s, h);
	case CM_T_EVENT_ACK:
		return cmt_on_event_ack(c, s, h);
	case CM_T_CANCEL_ACK:
		s->cancel_result = (h->flags & CM_F_CANCELLED) != 0;
		if (s->cancel_result && cm_reqmap_take(&s->recvs, h->clock) == NULL)
			return cm_conn_fail(c, "CANCEL_ACK: request %llu was already delivered",
			                    (unsigned long long)h->clock);
		s->cancel_waiting = 0;
		return 0;
	case CM_T_BYE_ACK:
		if (!s->saying_bye)
			return cm_conn_fail(c, "BYE_ACK before BYE");
		s->bye_acked[c->peer] = 1;
		return 0;
	case CM_T_LOGGED:
		cm_conn_logged(c, h->clock);
		return 0;
	case CM_T_STANDBY:
		return cmt_standby_named(s, c, h->len);
	default:
		return cm_conn_fail(c, "unexpected %s", cm_type_str(h->type));
	}
}

/* Every token this transport queues is the send request. */
static void on_sent(struct cm_conn *c, void *token)
{
	cm_send_settle(token, CM_SEND_WAIT_WRITE);
}

static const struct cm_conn_ops cm_ops = {.on_hello = on_hello,
                                          .on_header = on_header,
                                          .on_frame = on_frame,
                                          .on_ready = cmt_reconnect_resume,
                                          .on_sent = on_sent};

/* Before a send: while the frames queued to the CMs hold more than
 * CM_QUEUE_MAX, writes what the sockets take and waits in progress, which
 * keeps reading every CM (deliveries, LOGGED, acknowledgements) and
 * re-establishes a broken connection, whose queue then joins its kept
 * messages. A CM never waits for this rank to send before it reads from
 * it, so the wait ends. */
static int wait_queue_room(struct cm_transport *t)
{
	struct cmt *s = t->state;
	while (s->queued > CM_QUEUE_MAX) {
		for (int i = 0; i < s->ncms; i++) {
			struct cm_conn *c = s->cms[i];
			/* A blocked socket is flushed by progress on POLLOUT. */
			if (cm_conn_alive(c) && !c->wblocked && cmt_sent(s, cm_conn_flush(c)) < 0)
				return -1;
			cmt_coalesce_written(s, i);
		}
		if (s->queued > CM_QUEUE_MAX && cmt_progress(t, -1) < 0)
			return -1;
	}
	return 0;
}

static int cmt_isend(struct cm_transport *t, struct cm_req *req)
{
	struct cmt *s = t->state;
	if (cm_check_send(req, s->rank, s->size) < 0 || s->dead)
		return -1;
	if (s->home[req->peer] != s->myhome && cmt_events_settle(t) < 0)
		return -1;
	int cm = s->home[req->peer];
	/* Retained bytes are bounded: past the bound, wait for LOGGED. */
	while (s->cms[cm]->kept_bytes > CM_RETAIN_MAX)
		if (cmt_progress(t, -1) < 0)
			return -1;
	if (wait_queue_room(t) < 0)
		return -1;
	/* Alive, or broken and taking frames until it is re-established. */
	struct cm_conn *c = cmt_conn(s, cm);
	req->id = s->clock++;
	struct cm_header h;
	if (cm_start_send(req, s->rank, &s->syncs, &h) < 0)
		return -1;
	if (req->coll && !req->sync)
		h.flags |= CM_F_PUSH; /* home of the receiver sends it on unasked */
	int queued = cmt_coalesce_send(s, cm, &h, req);
	/* The connection broke while the messages queued before this one
	 * were written, and it is being made again: this one goes there too
	 * (dropped, its clock would be missing and its send never done). */
	if (queued < 0 && cmt_sent(s, -1) == 0)
		queued = 0;
	if (queued == 0 && cm_conn_send(c, &h, req->sbuf, req->slen, req, 1) < 0)
		queued = -1;
	if (cmt_sent(s, queued < 0 ? -1 : 0) < 0)
		return -1;
	cmt_coalesce_written(s, cm);
	return 0;
}

static int cmt_irecv(struct cm_transport *t, struct cm_req *req)
{
	struct cmt *s = t->state;
	if (cm_check_recv(req, s->rank, s->size) < 0)
		return -1;
	if (s->dead)
		return -1;
	if (req->coll)
		return cmt_push_irecv(s, req);
	req->id = s->reqid++;
	if (cm_reqmap_put(&s->recvs, req) < 0) {
		cm_err("rank %d: out of memory", s->rank);
		return -1;
	}
	if (cmt_sent(s, cm_conn_send_ctl(cmt_conn(s, s->myhome),
	                                 &(struct cm_header){.type = CM_T_RECV_REQ,
	                                                     .src = req->peer,
	                                                     .dst = s->rank,
	                                                     .tag = req->tag,
	                                                     .ctx = req->ctx,
	                                                     .clock = req->id},
	                                 NULL, 0)) < 0)
		return -1;
	cmt_coalesce_written(s, s->myhome);
	return 0;
}

static int cmt_probe(struct cm_transport *t, int src, int tag, uint32_t ctx, int blocking,
                     struct cm_probe_result *out)
{
	struct cmt *s = t->state;
	if (cm_check_probe(s->rank, s->size, src, tag) < 0 || s->dead)
		return -1;
	s->probe_id = s->reqid++;
	s->probe_waiting = 1;
	s->probe_src = src;
	s->probe_tag = tag;
	s->probe_ctx = ctx;
	s->probe_flags = blocking ? CM_F_BLOCKING : 0;
	if (cmt_sent(s, cm_conn_send_ctl(cmt_conn(s, s->myhome),
	                                 &(struct cm_header){.type = CM_T_PROBE,
	                                                     .flags = s->probe_flags,
	                                                     .src = src,
	                                                     .dst = s->rank,
	                                                     .tag = tag,
	                                                     .ctx = ctx,
	                                                     .clock = s->probe_id},
	                                 NULL, 0)) < 0)
		return -1;
	while (s->probe_waiting)
		if (cmt_progress(t, -1) < 0)
			return -1;
	*out = s->probe_result;
	return 0;
}

/* The receive is a RECV_REQ at our home CM, which matches it: only the CM
 * can say whether it is still pending. It records the outcome under the
 * request id, so a re-execution re-posting and re-cancelling the request
 * is answered the same. "Too late" means the CM matched it first: its
 * DELIVER precedes the CANCEL_ACK on the home connection, so the request
 * has completed by the time the answer is read. */
static int cmt_cancel(struct cm_transport *t, struct cm_req *req, int *cancelled)
{
	struct cmt *s = t->state;
	*cancelled = 0;
	if (req->done || req->coll) /* a collective's receive completes */
		return 0;
	if (s->dead)
		return -1;
	s->cancel_id = req->id;
	s->cancel_waiting = 1;
	if (cmt_sent(s, cm_conn_send_ctl(cmt_conn(s, s->myhome),
	                                 &(struct cm_header){.type = CM_T_CANCEL,
	                                                     .src = s->rank,
	                                                     .dst = s->rank,
	                                                     .clock = req->id},
	                                 NULL, 0)) < 0)
		return -1;
	while (s->cancel_waiting)
		if (cmt_progress(t, -1) < 0)
			return -1;
	*cancelled = s->cancel_result;
	return 0;
}

static void cmt_free(struct cmt *s)
{
	cmt_coalesce_free(s);
	cmt_reconnect_free(s);
	for (int i = 0; s->cms && i < s->ncms; i++)
		cm_conn_free(s->cms[i]);
	free(s->cms);
	free(s->bye_acked);
	free(s->pfds);
	free(s->home);
	cm_reqmap_free(&s->recvs);
	cm_reqmap_free(&s->syncs);
	cmt_push_free(s);
	free(s->replay);
	free(s->acks_out);
	free(s);
}

static int connect_cm(struct cmt *s, const struct cm_job *job, int i)
{
	/* TCP, or an abstract unix socket when the CM is on this host. */
	struct cm_addr addr;
	char why[128];
	if (cm_parse_addr(job->cms[i], &addr, why, sizeof why) < 0) {
		cm_err("rank %d: bad channel memory address '%s': %s", s->rank, job->cms[i], why);
		return -1;
	}
	int fd = cmt_connect_first(s, i, job->cms[i], CONNECT_TIMEOUT_MS);
	if (fd < 0) {
		cm_err("rank %d: cannot connect to channel memory %d at %s: %s", s->rank, i,
		       job->cms[i], strerror(errno));
		return -1;
	}
	char name[96];
	snprintf(name, sizeof name, "channel memory %d (%s)", i, job->cms[i]);
	s->cms[i] = cm_conn_new(fd, CM_CONN_AWAIT_ACK, s->rank, name, &cm_ops, s, &s->lim);
	if (s->cms[i] == NULL) {
		close(fd);
		cm_err("rank %d: out of memory", s->rank);
		return -1;
	}
	s->cms[i]->peer = i;
	cm_conn_count_into(s->cms[i], &s->queued);
	cmt_reconnect_watch(s, s->cms[i]);
	/* The CM may have died since the connect (its HELLO's write fails
	 * with EPIPE or a reset): a lost connection like any other. */
	return cmt_sent(s, cm_conn_send_hello(s->cms[i], 0, s->rank, s->rank, job->incarnation,
	                                      (unsigned)job->size, CM_PEER_RANK, job->secret));
}

static int all_ready(struct cmt *s)
{
	for (int i = 0; i < s->ncms; i++)
		if (s->cms[i]->state != CM_CONN_READY)
			return 0;
	return 1;
}

static int cmt_init(struct cm_transport *t, const struct cm_job *job)
{
	if (job->ncms < 1 || job->home == NULL) {
		cm_err("rank %d: the cm transport needs at least one channel memory", job->rank);
		return -1;
	}
	struct cmt *s = calloc(1, sizeof *s);
	if (s == NULL) {
		cm_err("rank %d: out of memory", job->rank);
		return -1;
	}
	t->state = s;
	s->rank = job->rank;
	s->size = job->size;
	s->ncms = job->ncms;
	s->lim =
	    (struct cm_limits){.world_size = (uint32_t)job->size, .max_payload = CM_MAX_PAYLOAD};
	s->cms = calloc((size_t)job->ncms, sizeof *s->cms);
	s->bye_acked = calloc((size_t)job->ncms, 1);
	s->pfds = calloc((size_t)job->ncms, sizeof *s->pfds);
	s->acks_out = calloc((size_t)job->ncms, sizeof *s->acks_out);
	s->home = malloc((size_t)job->size * sizeof *s->home);
	if (!s->cms || !s->bye_acked || !s->pfds || !s->acks_out || !s->home) {
		cm_err("rank %d: out of memory", job->rank);
		goto fail;
	}
	for (int i = 0; i < job->size; i++) {
		if (job->home[i] < 0 || job->home[i] >= job->ncms) {
			cm_err("rank %d: home of rank %d is %d, not a channel memory index",
			       s->rank, i, job->home[i]);
			goto fail;
		}
		s->home[i] = job->home[i];
	}
	s->myhome = s->home[s->rank];
	if (cmt_coalesce_init(s) < 0 || cmt_reconnect_init(s, job) < 0)
		goto fail;
	if (job->resume) { /* restored from a checkpoint image */
		s->clock = job->resume->clock;
		s->reqid = job->resume->reqid;
		s->ev_next = s->ev_acked = s->replay_base = job->resume->events;
		if (cmt_push_restore(s, job->resume) < 0)
			goto fail;
	}
	for (int i = 0; i < job->ncms; i++)
		if (connect_cm(s, job, i) < 0)
			goto fail;
	long long deadline = cm_now_ms() + HELLO_TIMEOUT_MS;
	long long takeover = job->incarnation > 0 ? cm_now_ms() + TAKEOVER_AFTER_MS : -1;
	while (!all_ready(s)) {
		if (takeover >= 0 && cm_now_ms() >= takeover) {
			takeover = -1;
			/* A connection re-established meanwhile (its CM died before
			 * HELLO_ACK) writes nothing after its HELLO until HELLO_ACK:
			 * it is made again, and every reconnection until HELLO_ACK
			 * says TAKEOVER. */
			s->hello_flags = CM_F_TAKEOVER;
			for (int i = 0; i < s->ncms; i++) {
				if (s->cms[i]->state == CM_CONN_READY)
					continue;
				if (s->links && s->links[i].down) {
					if (s->cms[i]->fd >= 0 && cmt_reconnect_start(s, i) < 0)
						goto fail;
				} else if (cmt_sent(s,
				                    cm_conn_send_hello(
				                        s->cms[i], CM_F_TAKEOVER, s->rank, s->rank,
				                        job->incarnation, (unsigned)job->size,
				                        CM_PEER_RANK, job->secret)) < 0) {
					goto fail;
				}
			}
		}
		long long left = deadline - cm_now_ms();
		if (takeover >= 0 && takeover - cm_now_ms() < left)
			left = takeover - cm_now_ms() + 1;
		if (left <= 0) {
			for (int i = 0; i < s->ncms; i++)
				if (s->cms[i]->state != CM_CONN_READY)
					cm_err("rank %d: no HELLO_ACK from %s within %d s", s->rank,
					       s->cms[i]->name, HELLO_TIMEOUT_MS / 1000);
			goto fail;
		}
		if (cmt_progress(t, (int)(left < 1000 ? left : 1000)) < 0)
			goto fail;
	}
	s->hello_flags = 0; /* from here on a reconnection is not a restart */
	if (cmt_sent(s, cmt_push_start(s, cmt_conn(s, s->myhome), 0)) < 0)
		goto fail;
	if (job->incarnation > 0 && cmt_fetch_events(t, deadline) < 0)
		goto fail;
	return 0;
fail:
	cmt_free(s);
	t->state = NULL;
	return -1;
}

static int any_output(struct cmt *s)
{
	for (int i = 0; i < s->ncms; i++)
		if (cm_conn_pending_output(s->cms[i]) && cm_conn_alive(s->cms[i]))
			return 1;
	return 0;
}

static int all_byes_acked(void *state)
{
	struct cmt *s = state;
	for (int i = 0; i < s->ncms; i++)
		if (!s->bye_acked[i])
			return 0;
	return 1;
}

static int no_output(void *state)
{
	return !any_output(state);
}

static int cmt_finalize(struct cm_transport *t)
{
	struct cmt *s = t->state;
	if (s == NULL)
		return 0;
	/* From here on the MPI thread alone touches the connections. */
	cmt_coalesce_stop(s);
	int rc = s->dead ? -1 : 0;
	/* Output merely queued (events after the last frame: a 1-rank job's
	 * MPI_Test outcomes) waits for a frame that will not come: progress
	 * writes only to full sockets. */
	for (int i = 0; i < s->ncms && rc == 0; i++)
		if (cm_conn_pending_output(s->cms[i]) && cm_conn_alive(s->cms[i]) &&
		    !s->cms[i]->wblocked)
			rc = cmt_sent(s, cm_conn_flush(s->cms[i]));
	if (rc == 0)
		rc =
		    cm_wait_until(t, s->rank, no_output, CM_FLUSH_TIMEOUT_MS + (int)s->reconnect_ms,
		                  "messages still unsent");
	if (rc == 0) {
		s->saying_bye = 1;
		for (int i = 0; i < s->ncms && rc == 0; i++)
			rc = cmt_sent(s, cm_conn_send_ctl(cmt_conn(s, i),
			                                  &(struct cm_header){.type = CM_T_BYE,
			                                                      .src = s->rank,
			                                                      .dst = s->rank},
			                                  NULL, 0));
		if (rc == 0)
			rc = cm_wait_until(t, s->rank, all_byes_acked,
			                   BYE_TIMEOUT_MS + (int)s->reconnect_ms, "no BYE_ACK");
	}
	cmt_free(s);
	t->state = NULL;
	return rc;
}

/* The entry points the MPI layer calls hold the coalescing lock, so the
 * flusher thread never writes while the rank is inside the transport. */
static struct cmt *enter(struct cm_transport *t)
{
	struct cmt *s = t->state;
	if (s)
		pthread_mutex_lock(&s->co.lock);
	return s;
}

static int leave(struct cmt *s, int rc)
{
	if (s)
		pthread_mutex_unlock(&s->co.lock);
	return rc;
}

static int locked_isend(struct cm_transport *t, struct cm_req *req)
{
	struct cmt *s = enter(t);
	return leave(s, cmt_isend(t, req));
}

static int locked_irecv(struct cm_transport *t, struct cm_req *req)
{
	struct cmt *s = enter(t);
	return leave(s, cmt_irecv(t, req));
}

static int locked_probe(struct cm_transport *t, int src, int tag, uint32_t ctx, int blocking,
                        struct cm_probe_result *out)
{
	struct cmt *s = enter(t);
	return leave(s, cmt_probe(t, src, tag, ctx, blocking, out));
}

static int locked_progress(struct cm_transport *t, int timeout_ms)
{
	struct cmt *s = enter(t);
	return leave(s, cmt_progress(t, timeout_ms));
}

static int locked_event(struct cm_transport *t, uint32_t kind, void *value, size_t len,
                        int *replayed)
{
	struct cmt *s = enter(t);
	return leave(s, cmt_event(t, kind, value, len, replayed));
}

static int locked_event_peek(struct cm_transport *t, uint32_t *kind)
{
	struct cmt *s = enter(t);
	return leave(s, cmt_event_peek(t, kind));
}

static int locked_cancel(struct cm_transport *t, struct cm_req *req, int *cancelled)
{
	struct cmt *s = enter(t);
	return leave(s, cmt_cancel(t, req, cancelled));
}

static int locked_snapshot(struct cm_transport *t, struct cm_resume *out)
{
	struct cmt *s = enter(t);
	return leave(s, cmt_snapshot(t, out));
}

static void locked_ckpt_committed(struct cm_transport *t, const struct cm_resume *state)
{
	struct cmt *s = enter(t);
	cmt_ckpt_committed(t, state);
	leave(s, 0);
}

void cm_transport_cm(struct cm_transport *t)
{
	*t = (struct cm_transport){.name = "cm",
	                           .init = cmt_init,
	                           .isend = locked_isend,
	                           .irecv = locked_irecv,
	                           .probe = locked_probe,
	                           .progress = locked_progress,
	                           .finalize = cmt_finalize,
	                           .event = locked_event,
	                           .event_peek = locked_event_peek,
	                           .cancel = locked_cancel,
	                           .snapshot = locked_snapshot,
	                           .ckpt_committed = locked_ckpt_committed};
}
