/* Internals of the replication transport, its files from the top down:
 * transport_repl.c (life cycle, the transport's table, the frames each
 * connection delivers), transport_repl_wait.c (progress: how a replica
 * waits, peers that went, promotion), transport_repl_match.c (in-order
 * acceptance and MPI matching), transport_repl_send.c (sends, batches,
 * commits, events) and transport_repl_peers.c (who is alive, who is
 * master, the connection to each process). Each calls only those below
 * it. */
#ifndef CHANMEM_TRANSPORT_REPL_H
#define CHANMEM_TRANSPORT_REPL_H

#include <netinet/in.h>

#include "conn.h"
#include "list.h"
#include "transport.h"
#include "transport_common.h"
#include "transport_match.h"
#include "vec.h"

/* A message id on the wire: destination rank and the pair's sequence. */
#define REPL_SEQ_BITS 40
#define REPL_SEQ_MASK ((UINT64_C(1) << REPL_SEQ_BITS) - 1)
static inline uint64_t repl_key(int rank, uint64_t seq)
{
	return ((uint64_t)rank << REPL_SEQ_BITS) | (seq & REPL_SEQ_MASK);
}

/* The write of a record's message to one replica of its destination: the
 * token that connection hands back to repl_on_sent. */
struct repl_copy {
	struct rrec *rec;
	struct cm_conn *conn; /* where the write is queued; NULL once written or gone */
};

/* A message this replica sends: a backup (non-master) or in flight
 * (master: being written to the destination's replicas). */
struct rrec {
	struct rrec *next;   /* in the backups */
	struct cm_list link; /* in the in-flight list of its destination */
	struct rrec *dnext;  /* in the batch of deferred writes */
	int batched;         /* some writes wait for the batch (defer) */
	int dst;
	int tag;
	uint32_t ctx;
	int sync;
	uint64_t seq;
	size_t len;
	void *data;
	int pending;              /* writes not yet taken by the kernel (+1 while queueing) */
	struct repl_copy *copies; /* [nrep] the write to each destination replica */
	char *defer;              /* [nrep] that write waits for the next batch */
	size_t cap;               /* room for the payload */
};

/* A message received, accepted in order, not yet matched (or held until
 * the messages before it arrive). */
struct rmsg {
	struct cm_msg m;    /* first: the matching queue links these */
	struct rmsg *early; /* next in the list of those held */
	int sync;
	uint64_t seq;
	void *data;
	int from; /* process it came from (its SYNC_ACK goes back there), -1: self */
};

struct repl {
	int rank, size;
	int replica, nrep;
	char secret[33];
	struct cm_limits lim;
	struct sockaddr_in *addrs; /* [size * nrep] */
	int listen_fd;
	struct cm_connset net;
	/* What every connection of ours calls back with its frames
	 * (transport_repl.c's). */
	const struct cm_conn_ops *ops;
	struct cm_conn **out; /* [size * nrep] connection we opened to each process */
	char *dead;           /* [size * nrep] gone (died, or finished and closed) */
	char *finished;       /* [size * nrep] said BYE: it finalized, it needs nothing more
	                       */
	int changed;          /* some process died since the last master check */
	int was_master;       /* we have been master (and re-sent our backups) */
	int fatal;
	int draining;

	uint64_t *sendseq;   /* [size] next sequence of our messages to each rank */
	uint64_t *committed; /* [size] our master committed sequences below this */
	uint64_t *nextseq;   /* [size] next sequence accepted from each rank */
	struct rrec *backups, *backups_tail;
	/* [size] per destination, oldest first: the head holds the lowest
	 * sequence still being written, so a commit needs no search. */
	struct cm_list *inflight;
	size_t ninflight, inflight_bytes;
	struct rrec *spare; /* freed small records, for reuse */
	int nspare;
	/* Memory this replica holds for its sends to other ranks: every
	 * record (backup or in flight, repl_record_new) and the frames queued
	 * on the connections it opened (cm_conn_count_into). A send that finds
	 * more than CM_QUEUE_MAX waits (transport_repl.c: wait_queue_room). */
	size_t queued;
	/* Master: batches (transport_repl_send.c). deferred: records with
	 * writes to non-master replicas waiting for the batch, oldest first.
	 * commit_sent[dst]: our last commit covered dst's sequences below it;
	 * uncommitted(_bytes, _since_ms): messages put on the wire since,
	 * i.e. what each replica of ours keeps as backups; those no longer in
	 * flight are the ones the next commit can cover. */
	struct rrec *deferred, *deferred_tail;
	size_t ndeferred, deferred_bytes;
	uint64_t *commit_sent; /* [size] */
	size_t uncommitted, uncommitted_bytes;
	long long uncommitted_since_ms;
	int replicas_queued; /* frames (events, commits) queued to our replicas */
	int in_batch;        /* write_deferred is completing records */
	char *batch_saved;   /* [size * nrep] scratch of write_deferred */
	int *batch_conns;    /* [size * nrep] */
	/* Non-master: lazy reading (repl_lazy_*). frames_in counts frames
	 * received, to tell an idle wait from a busy one. */
	int lazy;
	long long last_sweep_ms;
	long long last_poll_ms; /* the last epoll round (single_source) */
	unsigned long frames_in;
	struct cm_reqmap syncs;

	struct cm_matchq match;
	struct rmsg *early; /* arrived ahead of a gap */
	/* MPI_Cancel waiting for the replicas' votes or the master's decision:
	 * messages accepted meanwhile are held, in order, unmatched (linked
	 * through m.next). */
	int hold_matching;
	struct rmsg *held, *held_tail;
	/* MPI_Cancel: cancels done so far; the master collects every live
	 * replica's vote for cancel number vote_seq[k] (vote_val[k]: it still
	 * had the receive posted), [nrep] each, allocated at the first cancel. */
	uint64_t ncancels;
	uint64_t *vote_seq;
	uint8_t *vote_val;
	char *vote_have;
	uint64_t reqid;
	/* MPI_ANY_SOURCE receives: the master's choice of source for each
	 * (request id -> source), sent to its replicas; kept for a promoted
	 * replica to re-send. A non-master's wildcard receive waits for its
	 * choice, and so do the receives and messages it could compete with
	 * (transport_repl_match.c). */
	struct repl_choice *choices; /* [nchoices]: made or received */
	size_t nchoices, choices_cap;
	size_t unused_from; /* choices before this index have been applied */

	/* Nondeterministic outcomes (MPI_Wtime): the master decides each
	 * and sends it to its replicas, which use its value, in order. */
	CM_VEC(struct repl_event) events; /* decided or received */
	size_t events_used;               /* consumed by this replica's program */
	uint8_t event_in[CM_EVENT_PAYLOAD_MAX];
};

struct repl_choice {
	uint64_t reqid;
	int src;
	int applied; /* this replica's receive took it (or it was re-sent twice) */
};

struct repl_event {
	uint32_t kind;
	uint32_t len;
	uint8_t value[CM_EVENT_PAYLOAD_MAX];
};

/* transport_repl_peers.c */
/* The master of rank: its lowest live replica, -1 if none is left. */
int repl_master_of(const struct repl *s, int rank);
int repl_is_master(const struct repl *s);
/* Since the last call, have processes died (s->changed) and made this
 * replica master for the first time? 1 once, then 0. */
int repl_elect(struct repl *s);
/* The connection to process p (rank * nrep + replica), opened at first
 * use. NULL: p is dead (its port refuses) or out of memory. */
struct cm_conn *repl_link_to(struct repl *s, int p);

/* transport_repl_wait.c */
/* The transport's progress hook. */
int repl_progress(struct cm_transport *t, int timeout_ms);
/* A connection from a peer, just introduced: read it as the others (lazily
 * while we read lazily; a master's sleep in recvmsg() on it bounded). */
void repl_prepare_reads(struct repl *s, struct cm_conn *c);
/* Frees c, and the message it was receiving: a sender that died in the
 * middle of a frame leaves its part behind (its next replica re-sends it
 * whole). */
void repl_conn_free(struct cm_conn *c);
/* After processes died: if this replica has just become master, it
 * promotes itself (repl_promote) and matches its undecided receives. */
void repl_check_master(struct repl *s);

/* A master's batch (writes to the destinations' non-master replicas and
 * commits) goes out at the latest after this many messages or bytes, or
 * once its oldest message is this old; messages of REPL_BATCH_MAX bytes
 * and more are not deferred (transport_repl_send.c). */
#define REPL_BATCH_COUNT 64
#define REPL_BATCH_BYTES (512u * 1024u)
#define REPL_BATCH_MS 2
#define REPL_BATCH_MAX (16u * 1024u)

/* transport_repl_send.c */
/* The isend hook's send to another rank (sends to self are matched
 * locally, transport_repl_match.c). */
int repl_send_to_peer(struct repl *s, struct cm_req *req);
/* The transport's event hooks (struct cm_transport). */
int repl_event(struct cm_transport *t, uint32_t kind, void *value, size_t len, int *replayed);
int repl_event_peek(struct cm_transport *t, uint32_t *kind);
/* A record for a len-byte message (data to be filled), zeroed otherwise. */
struct rrec *repl_record_new(struct repl *s, size_t len);
void repl_record_free(struct repl *s, struct rrec *r);
void repl_spare_free(struct repl *s); /* the records kept for reuse */
/* Master: commits to our replicas what is on the wire (cumulative, one
 * frame per destination); flush 0: only queued, the next write to each
 * replica carries it. */
void repl_commit(struct repl *s, int flush);
/* Master: writes the batch and commits (see REPL_BATCH_COUNT). */
void repl_flush(struct repl *s);
/* Master: writes the frames queued to our replicas: the events (MPI_Wtime
 * values, receive choices, test outcomes) are queued as they are decided
 * and written before the next message leaves or the next wait. */
void repl_flush_replicas(struct repl *s);
/* Every write of in-flight record r is done (or can no longer be). */
void repl_record_done(struct repl *s, struct rrec *r);
int repl_wire_send(struct repl *s, struct rrec *r);
void repl_on_sent(struct cm_conn *c, void *token);
void repl_settle_conn(struct repl *s, struct cm_conn *c);
int repl_add_event(struct repl *s, uint32_t kind, const void *value, size_t len);
void repl_send_event(struct repl *s, size_t i);
/* This replica has just become master: re-sends our events, our choices
 * for MPI_ANY_SOURCE receives (the old master's included), our backups,
 * oldest first, and flushes. 0, -1 if a backup could not be sent. */
int repl_promote(struct repl *s);
void repl_on_commit(struct repl *s, uint64_t key);

/* transport_repl_match.c */
/* The transport's probe hook. */
int repl_probe(struct cm_transport *t, int src, int tag, uint32_t ctx, int blocking,
               struct cm_probe_result *out);
/* A received message with room for len bytes of payload (data). */
struct rmsg *repl_msg_new(size_t len);
void repl_msg_free(struct rmsg *u);
void repl_accept(struct repl *s, struct rmsg *u);
int repl_self_send(struct repl *s, struct cm_req *req);
int repl_post_recv(struct repl *s, struct cm_req *req);
void repl_free_queues(struct repl *s);
/* on: accepted messages wait unmatched; off: they are matched, in order. */
void repl_hold_matching(struct repl *s, int on);
/* MPI_Cancel of a receive (the transport's cancel hook). */
int repl_cancel(struct cm_transport *t, struct cm_req *req, int *cancelled);
/* Event kind of a cancel decision (enum cm_event_kind's 2; events of this
 * transport never leave the rank's replicas), and the EVENT tag a replica
 * votes with (never logged). See repl_cancel. */
#define REPL_EV_CANCEL 2
#define REPL_VOTE_CANCEL 0x10002
/* An EVENT with tag REPL_VOTE_CANCEL from process `from`, value in
 * s->event_in. */
void repl_record_vote(struct repl *s, int from, const struct cm_header *h);
/* The EVENT tag of a master's choice for an MPI_ANY_SOURCE receive
 * (clock = request id, value = LE int32 source; never logged). */
#define REPL_CHOICE 0x10003
/* A choice from our master (EVENT with tag REPL_CHOICE). */
void repl_record_choice(struct repl *s, uint64_t reqid, int src);
/* Master: choice i to every live replica of ours, ascending. */
void repl_send_choice(struct repl *s, size_t i);
/* We have just become master: our undecided receives are ours to match. */
void repl_decide_own(struct repl *s);
/* Has a message from src with that tag arrived (matchable now, or held)? */
int repl_find_arrived(const struct repl *s, int src, int tag, uint32_t ctx,
                      struct cm_probe_result *out);

#endif
