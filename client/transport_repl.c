/* The replication transport (P2P-MPI protocol, docs/replication.md).
 *
 * Every rank runs as R replica processes, each with its own listening
 * socket (CHANMEM_REPL_PEERS lists them, index rank * R + replica). All
 * replicas of a rank execute the same deterministic program. The lowest
 * live replica is the master: only its sends go on the wire, to every live
 * replica of the destination (ascending replica index), and once the kernel
 * has taken the message for each of them it sends a commit (SYNC_ACK with
 * src = dst = its rank) to its own live replicas. A non-master keeps a copy
 * (backup) of every send until its commit arrives.
 *
 * Latency (a ping-pong's critical path is master to master): the copies for
 * the destination's other replicas and the commits go out in batches
 * (transport_repl_send.c), non-masters read lazily, and a master with a
 * single source sleeps in recvmsg() on it (transport_repl_wait.c).
 *
 * Memory: every message a replica sends is copied (a master's record until
 * written to every destination replica, a backup until committed), so no
 * send waits for its receiver (but MPI_Ssend for its ack); a send that
 * finds more than CM_QUEUE_MAX held waits instead (wait_queue_room, below).
 *
 * Message id: (source, destination, sequence number of the pair), computed
 * identically by every replica; the pair's sequence goes in the header's
 * clock. A receiver accepts exactly sequence next[src], holds later ones
 * (a new master's re-send can overtake the dead master's last bytes) and
 * drops earlier ones (already delivered).
 *
 * Connections carry frames one way: a process writes only on connections
 * it opened and only reads those it accepted (no HELLO_ACK; SYNC_ACKs go
 * back on a connection of their own). So a write to a dead peer can never
 * fail a connection whose unread input a dead sender left behind.
 *
 * Liveness: a replica is dead once a connection to or from it ends or
 * fails, or a connect to it is refused (cmrun closes its copy of every
 * replica's listening socket, so a dead replica's port refuses). Replicas
 * of a rank connect to each other at init, so each sees its siblings die;
 * before acting on a death we read everything the dead one sent. When the
 * master dies the next live replica becomes master and re-sends its backups
 * (and its MPI_Wtime values) in order; receivers drop what they have. A
 * replica that finalized says BYE first: it needs nothing more. */
#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "log.h"
#include "net.h"
#include "transport_repl.h"

/* ---- connections ---- */

static enum cm_err on_hello(struct cm_conn *c, const struct cm_header *h,
                            const struct cm_hello *hello, char *text, size_t textlen)
{
	struct repl *s = c->owner;
	if (!cm_secret_equal(hello->secret, s->secret)) {
		snprintf(text, textlen, "wrong job secret");
		return CM_E_AUTH;
	}
	if (hello->kind != CM_PEER_DIRECT || hello->world_size != (uint32_t)s->size) {
		snprintf(text, textlen, "peer kind %u / world size %u on a %d-rank replicated job",
		         hello->kind, hello->world_size, s->size);
		return CM_E_SIZE;
	}
	/* The HELLO's incarnation field carries the replica index (no
	 * restarts in this mode). */
	if (h->dst != s->rank || hello->incarnation >= (uint32_t)s->nrep ||
	    (h->src == s->rank && hello->incarnation == (uint32_t)s->replica)) {
		snprintf(text, textlen,
		         "HELLO from rank %d replica %u to rank %d reached rank %d "
		         "replica %d",
		         h->src, hello->incarnation, h->dst, s->rank, s->replica);
		return CM_E_RANK;
	}
	c->peer = h->src * s->nrep + (int)hello->incarnation;
	c->peer_may_die = 1; /* a replica dies and the rank goes on */
	snprintf(c->name, sizeof c->name, "connection from rank %d replica %u", h->src,
	         hello->incarnation);
	repl_prepare_reads(s, c);
	/* No HELLO_ACK: an accepted connection is only ever read (SYNC_ACKs
	 * go back on a connection of their own), so a write error can never
	 * make us drop input a dead sender left in it; its opener only ever
	 * writes. */
	return CM_OK;
}

/* ---- frames ---- */

static int on_header(struct cm_conn *c, const struct cm_header *h, struct cm_sink *sink)
{
	struct repl *s = c->owner;
	int peer_rank = c->peer / s->nrep;
	if (h->type == CM_T_SYNC_ACK)
		return 0;
	if (h->type == CM_T_BYE) {
		s->finished[c->peer] = 1;
		return 0;
	}
	if (h->type == CM_T_EVENT && peer_rank == s->rank && h->src == s->rank) {
		*sink = (struct cm_sink){.buf = s->event_in, .cap = sizeof s->event_in};
		return 0;
	}
	if (h->type != CM_T_MSG || h->src != peer_rank || h->dst != s->rank || peer_rank == s->rank)
		return cm_conn_refuse(c, CM_E_STATE, "%s %d->%d on the connection with rank %d",
		                      cm_type_str(h->type), h->src, h->dst, peer_rank);
	struct rmsg *u = repl_msg_new(h->len);
	if (u == NULL)
		return cm_conn_fail(c, "out of memory for a %u-byte message", h->len);
	*sink = (struct cm_sink){.buf = u->data, .cap = h->len, .kind = 1, .cookie = u};
	return 0;
}

static int on_frame(struct cm_conn *c, const struct cm_header *h, const struct cm_sink *sink)
{
	struct repl *s = c->owner;
	s->frames_in++;
	if (h->type == CM_T_BYE)
		return 0;
	if (h->type == CM_T_EVENT && h->tag == REPL_VOTE_CANCEL) {
		repl_record_vote(s, c->peer, h);
		return 0;
	}
	if (h->type == CM_T_EVENT && h->tag == REPL_CHOICE) {
		if (h->len != 4)
			return cm_conn_fail(c, "receive choice of %u bytes", h->len);
		repl_record_choice(s, h->clock, (int)(int32_t)cm_get_u32(s->event_in));
		return 0;
	}
	if (h->type == CM_T_EVENT) {
		/* From our master; a new master re-sends its whole log. */
		if (h->clock == s->events.n &&
		    repl_add_event(s, (uint32_t)h->tag, s->event_in, h->len) < 0)
			return cm_conn_fail(c, "out of memory for events");
		return 0;
	}
	if (h->type == CM_T_SYNC_ACK) {
		if (h->src == s->rank && h->dst == s->rank && c->peer / s->nrep == s->rank) {
			repl_on_commit(s, h->clock);
			return 0;
		}
		struct cm_req *req = cm_reqmap_take(&s->syncs, repl_key(h->src, h->clock));
		if (req) /* later replicas' acks for the same message find nothing */
			cm_send_settle(req, CM_SEND_WAIT_ACK);
		return 0;
	}
	struct rmsg *u = sink->cookie;
	u->m = (struct cm_msg){.src = h->src, .tag = h->tag, .ctx = h->ctx, .len = h->len};
	u->seq = h->clock;
	u->sync = (h->flags & CM_F_SYNC) != 0;
	u->from = c->peer;
	repl_accept(s, u);
	return 0;
}

static const struct cm_conn_ops repl_ops = {
    .on_hello = on_hello,
    .on_header = on_header,
    .on_frame = on_frame,
    .on_sent = repl_on_sent,
};

/* ---- requests ---- */

/* Before a send to another rank: while this replica holds more than
 * CM_QUEUE_MAX for its sends (struct repl: queued), waits in progress. A
 * master's records are freed once every write of theirs is in the kernel,
 * so it first writes its batch (the copies that wait for it), then waits
 * for the sockets to take the rest; a non-master's backups are freed by
 * its master's commits, which progress reads. Progress reads every
 * connection meanwhile, so ranks that send to each other without
 * receiving do not deadlock (each one's records drain into the others'
 * unexpected messages, as in the direct transport), and neither do a
 * master and its replicas: the master's records wait for the replicas of
 * their destinations to read, never for its own replicas, and its commits
 * go out whatever those do. */
static int wait_queue_room(struct cm_transport *t)
{
	struct repl *s = t->state;
	while (s->queued > CM_QUEUE_MAX) {
		if (s->deferred)
			repl_flush(s);
		if (s->queued > CM_QUEUE_MAX && repl_progress(t, -1) < 0)
			return -1;
	}
	return 0;
}

/* Every replica does its sends to itself locally (nothing on the wire);
 * the others are the sending side's. */
static int repl_isend(struct cm_transport *t, struct cm_req *req)
{
	struct repl *s = t->state;
	req->done = 0;
	req->error = 0;
	if (req->peer < 0 || req->peer >= s->size || req->tag < 0 || req->slen > CM_MAX_PAYLOAD ||
	    (req->slen && !req->sbuf)) {
		cm_err("rank %d: send to rank %d tag %d length %zu: bad destination, tag "
		       "or length",
		       s->rank, req->peer, req->tag, req->slen);
		return -1;
	}
	if (s->fatal)
		return -1;
	if (req->peer == s->rank)
		return repl_self_send(s, req);
	if (wait_queue_room(t) < 0)
		return -1;
	return repl_send_to_peer(s, req);
}

static int repl_irecv(struct cm_transport *t, struct cm_req *req)
{
	struct repl *s = t->state;
	if (cm_check_recv(req, s->rank, s->size) < 0)
		return -1;
	req->id = s->reqid++;
	return repl_post_recv(s, req);
}

/* ---- life cycle ---- */

static void repl_free(struct repl *s)
{
	for (size_t i = 0; i < s->net.nconns; i++)
		repl_conn_free(s->net.conns[i]);
	s->net.nconns = 0;
	cm_connset_free(&s->net);
	if (s->listen_fd >= 0)
		close(s->listen_fd);
	repl_free_queues(s);
	for (struct rrec *r = s->backups, *n; r; r = n) {
		n = r->next;
		repl_record_free(s, r);
	}
	for (int dst = 0; s->inflight && dst < s->size; dst++) {
		struct rrec *r;
		cm_list_for_each(r, &s->inflight[dst], struct rrec, link)
		{
			repl_record_free(s, r);
		}
	}
	free(s->inflight);
	repl_spare_free(s);
	cm_reqmap_free(&s->syncs);
	free(s->out);
	free(s->dead);
	free(s->finished);
	free(s->addrs);
	free(s->sendseq);
	free(s->committed);
	free(s->commit_sent);
	free(s->batch_saved);
	free(s->batch_conns);
	free(s->nextseq);
	cm_vec_free(&s->events);
	free(s->choices);
	free(s->vote_seq);
	free(s->vote_val);
	free(s->vote_have);
	free(s);
}

static int repl_setup(struct repl *s, const struct cm_job *job)
{
	s->rank = job->rank;
	s->size = job->size;
	s->nrep = job->replicas;
	s->replica = job->replica;
	s->listen_fd = -1;
	memcpy(s->secret, job->secret, sizeof s->secret);
	s->lim =
	    (struct cm_limits){.world_size = (uint32_t)job->size, .max_payload = CM_MAX_PAYLOAD};
	size_t nproc = (size_t)job->size * (size_t)s->nrep;
	s->net.epfd = epoll_create1(EPOLL_CLOEXEC);
	s->out = calloc(nproc, sizeof *s->out);
	s->dead = calloc(nproc, 1);
	s->finished = calloc(nproc, 1);
	s->addrs = calloc(nproc, sizeof *s->addrs);
	s->sendseq = calloc((size_t)job->size, sizeof *s->sendseq);
	s->committed = calloc((size_t)job->size, sizeof *s->committed);
	s->commit_sent = calloc((size_t)job->size, sizeof *s->commit_sent);
	s->inflight = calloc((size_t)job->size, sizeof *s->inflight);
	for (int dst = 0; s->inflight && dst < job->size; dst++)
		cm_list_init(&s->inflight[dst]);
	s->batch_saved = calloc(nproc, 1);
	s->batch_conns = calloc(nproc, sizeof *s->batch_conns);
	s->nextseq = calloc((size_t)job->size, sizeof *s->nextseq);
	if (s->net.epfd < 0 || !s->out || !s->dead || !s->finished || !s->addrs || !s->sendseq ||
	    !s->committed || !s->commit_sent || !s->inflight || !s->batch_saved ||
	    !s->batch_conns || !s->nextseq) {
		cm_err("rank %d: cannot set up the replication transport: %s", job->rank,
		       strerror(errno));
		return -1;
	}
	if (s->nrep < 1 || s->replica < 0 || s->replica >= s->nrep || job->repl_peers == NULL ||
	    job->listen_fd < 0) {
		cm_err("rank %d: the repl transport needs %s, %s and a listening socket", job->rank,
		       "CHANMEM_REPLICA(S)", "CHANMEM_REPL_PEERS");
		return -1;
	}
	for (size_t i = 0; i < nproc; i++) {
		if (cm_parse_hostport(job->repl_peers[i], -1, &s->addrs[i]) < 0) {
			cm_err("rank %d: bad replica address '%s'", job->rank, job->repl_peers[i]);
			return -1;
		}
	}
	s->ops = &repl_ops;
	if (cm_connset_listen(&s->net, job->listen_fd) < 0)
		return -1;
	s->listen_fd = job->listen_fd;
	/* Connect to our siblings now: their connections ending is how we
	 * learn that they died. */
	for (int k = 0; k < s->nrep; k++)
		if (k != s->replica)
			repl_link_to(s, s->rank * s->nrep + k);
	s->changed = 1;
	repl_check_master(s);
	return 0;
}

static int repl_init(struct cm_transport *t, const struct cm_job *job)
{
	struct repl *s = calloc(1, sizeof *s);
	if (s == NULL) {
		cm_err("rank %d: out of memory", job->rank);
		return -1;
	}
	s->net.epfd = -1;
	if (repl_setup(s, job) < 0) {
		s->listen_fd = -1;
		repl_free(s);
		return -1;
	}
	t->state = s;
	return 0;
}

static int flushed(void *state)
{
	struct repl *s = state;
	return s->fatal || (s->ninflight == 0 && !cm_connset_output_pending(&s->net));
}

static int repl_finalize(struct cm_transport *t)
{
	struct repl *s = t->state;
	if (s == NULL)
		return 0;
	/* Everything on the wire and committed first: a sibling that sees
	 * our BYE and then our end must find no backup to re-send. */
	if (repl_is_master(s))
		repl_flush(s);
	int rc = cm_wait_until(t, s->rank, flushed, CM_FLUSH_TIMEOUT_MS, "messages still unsent");
	if (repl_is_master(s)) {
		repl_commit(s, 0);
		repl_flush_replicas(s);
	}
	/* BYE on every connection we opened: we finished, nothing of ours
	 * is missing (a sibling must not take over and re-send). */
	for (size_t i = 0; i < s->net.nconns; i++) {
		struct cm_conn *c = s->net.conns[i];
		if (cm_conn_alive(c) && c->peer >= 0 && s->out[c->peer] == c)
			cm_conn_send_ctl(c,
			                 &(struct cm_header){.type = CM_T_BYE,
			                                     .src = s->rank,
			                                     .dst = c->peer / s->nrep},
			                 NULL, 0);
	}
	if (cm_connset_finish(t, &s->net, s->rank, flushed, &s->fatal, &s->draining) < 0)
		rc = -1;
	repl_free(s);
	t->state = NULL;
	return rc;
}

void cm_transport_repl(struct cm_transport *t)
{
	*t = (struct cm_transport){.name = "repl",
	                           .init = repl_init,
	                           .isend = repl_isend,
	                           .irecv = repl_irecv,
	                           .probe = repl_probe,
	                           .progress = repl_progress,
	                           .finalize = repl_finalize,
	                           .event = repl_event,
	                           .event_peek = repl_event_peek,
	                           .cancel = repl_cancel};
}
