/* Internal to the channel-memory transport: transport_cm.c (connections,
 * sends, receives), transport_cm_progress.c (waiting), transport_cm_events.c
 * (its fault-tolerance side: nondeterministic events, checkpoint
 * snapshots), transport_cm_coalesce.c and transport_cm_reconnect.c. */
#ifndef CHANMEM_TRANSPORT_CM_H
#define CHANMEM_TRANSPORT_CM_H

#include <poll.h>
#include <pthread.h>
#include <stdint.h>

#include "conn.h"
#include "transport.h"
#include "transport_match.h"

#define CONNECT_TIMEOUT_MS 20000
#define HELLO_TIMEOUT_MS 30000
/* A re-executing rank's HELLO waits at the CM until the dead incarnation's
 * connection has ended (its last frames processed). A connection that does
 * not end by then belongs to a process cut off rather than dead: take over. */
#define TAKEOVER_AFTER_MS 3000
#define BYE_TIMEOUT_MS 10000

enum { SINK_DELIVER = 1, SINK_PROBE = 2, SINK_PUSH_POSTED = 3, SINK_PUSH_HELD = 4 };

/* Pushed messages (transport_cm_push.c). */
struct cmt_push {
	struct cm_matchq q; /* collective receives posted, pushed messages held */
	uint64_t next;      /* the push number expected next */
	uint64_t held;      /* bytes (with headers) of the messages held */
	uint64_t unacked;   /* bytes consumed and not acknowledged (PUSH_ACK) */
	int started;        /* PUSH_START is on the home connection: one per connection
	                       (a second would have the CM push from its number again) */
	uint8_t *snap;      /* the last snapshot's held messages */
};

/* An event of the dead incarnations, as the home CM replayed it. */
struct cm_replayed_event {
	uint32_t kind;
	uint8_t len;
	uint8_t value[CM_EVENT_PAYLOAD_MAX];
};

/* Where a CM may serve from besides its own address: its standby from the
 * job's environment, then the standbys it named since (STANDBY frames),
 * oldest first, the oldest dropped past CMT_ALTS_MAX. */
#define CMT_ALTS_MAX 4
struct cmt_alts {
	unsigned n;
	char *addr[CMT_ALTS_MAX];
	uint8_t named[CM_STANDBY_ADDR_MAX]; /* a STANDBY frame's payload, as it arrives */
};

/* A CM connection broken and being re-established (transport_cm_reconnect.c). */
struct cmt_link {
	int down;
	unsigned tries;                 /* turns over the CM's address and its alts */
	long long down_since, next_try; /* cm_now_ms() */
};

/* Send coalescing (transport_cm_coalesce.c). */
struct cmt_coalesce {
	int ready;
	long long window_ns; /* 0: every message is written at once */
	long long prompt_ns; /* a flush later than this pauses queuing */
	/* Held by the MPI thread inside every transport call; the flusher only
	 * tries it. Everything below but the wake-up fields is under it. */
	pthread_mutex_t lock;
	unsigned char *on;     /* [ncms] messages wait in that queue */
	unsigned deferred;     /* connections with waiting messages */
	size_t deferred_bytes; /* their payload */
	unsigned deferred_frames;
	long long deferred_since; /* CLOCK_MONOTONIC ns of the oldest */
	unsigned backoff;         /* sends that go out at once after a late flush */
	unsigned pause;           /* the next late flush sets backoff to this */
	uint64_t deferrals, deferrals_seen, timer_flushes;
	uint64_t late; /* flushes later than prompt_ns: queuing paused */
	/* the flusher thread, started at the first deferral */
	pthread_t thread;
	int thread_started, stop; /* under wake_mu */
	pthread_mutex_t wake_mu;
	pthread_cond_t wake_cv;
	_Atomic int armed; /* the flusher watches (else it sleeps on wake_cv) */
};

struct cmt {
	int rank;
	int size;
	int ncms;
	int myhome;
	int *home; /* [size] home CM of every rank */
	struct cm_limits lim;
	struct cm_conn **cms; /* [ncms] */
	size_t queued;        /* their queued_total (conn.h: CM_QUEUE_MAX) */
	char *bye_acked;      /* [ncms] */
	struct pollfd *pfds;  /* [ncms] */

	struct cm_reqmap recvs; /* posted receives by request id */
	struct cm_reqmap syncs; /* synchronous sends by clock */
	uint64_t clock;         /* one counter over all our messages */
	uint64_t reqid;         /* receive requests and probes */

	int probe_waiting;
	uint64_t probe_id;
	int probe_src, probe_tag; /* the probe's question, to ask it again */
	uint32_t probe_ctx;
	uint16_t probe_flags;
	/* MPI_Cancel of a receive: CANCEL sent, CANCEL_ACK awaited. */
	int cancel_waiting;
	uint64_t cancel_id;
	int cancel_result; /* the CM withdrew the request */
	struct cm_probe_result probe_result;
	uint8_t probe_buf[CM_PROBE_REPLY_PAYLOAD];

	int saying_bye;
	int dead;

	/* Events: ev_next is the index of the next event; events below
	 * ev_acked are known to be logged at home. A new incarnation replays
	 * replay[0..nreplay) first. */
	uint64_t ev_next, ev_acked;
	unsigned ev_unwritten; /* queued on the home connection, not flushed */
	int ev_fetching;       /* EVENT_ACK|REPLAY sent, its answer not yet in */
	struct cm_replayed_event *replay;
	uint64_t nreplay, replay_cap;
	uint64_t replay_base; /* index of replay[0]: events a checkpoint image consumed */
	unsigned *acks_out;   /* [ncms] EVENT_ACK requests not answered yet */
	uint8_t ev_buf[CM_EVENT_PAYLOAD_MAX];
	struct cmt_coalesce co;

	/* Surviving a CM's death (CHANMEM_CM_RECONNECT; reconnect_ms 0: off).
	 * What a new connection to a restarted CM needs again: the events
	 * home has not acknowledged (ev_kept[0] is event ev_kept_base) and
	 * the last TRIM. */
	long long reconnect_ms;
	struct cmt_link *links; /* [ncms] */
	char **addrs;           /* [ncms] */
	struct cmt_alts *alts;  /* [ncms], with reconnection */
	unsigned incarnation;
	char secret[CM_SECRET_LEN + 1];
	/* A reconnection's HELLO flags: 0, or TAKEOVER while a restarted
	 * rank's first HELLO_ACK is overdue (cmt_init). */
	uint16_t hello_flags;
	struct cm_replayed_event *ev_kept;
	uint64_t ev_kept_base, ev_kept_n, ev_kept_cap;
	int trim_sent;
	uint64_t trim_reqid, trim_events, trim_pushes;
	struct cmt_push push;
};

/* Queued events are written at least every this many events. */
#define EV_FLUSH_BATCH 64
/* With reconnection, this many unacknowledged events ask home for a count. */
#define EV_KEEP_ASK 256

/* Who calls whom: transport_cm.c (the interface's entry points, init,
 * frame dispatch) calls transport_cm_events.c (events, snapshots); both
 * call transport_cm_progress.c (waiting), transport_cm_coalesce.c and
 * transport_cm_reconnect.c (connection loss); all of them call
 * transport_cm_push.c (pushed messages), which calls only conn.c and
 * transport_match.c. Nothing calls back up. */

/* transport_cm_progress.c */
int cmt_progress(struct cm_transport *t, int timeout_ms);

/* transport_cm_reconnect.c */
/* Marks the transport dead once a connection is lost (after saying so),
 * or starts re-establishing it (CHANMEM_CM_RECONNECT). */
void cmt_check_lost(struct cmt *s);
/* The outcome rc of queueing a frame: a broken connection is fatal only
 * when it cannot be re-established (what it carried is then re-sent). */
int cmt_sent(struct cmt *s, int rc);
/* CM connection cm, re-established first if it is found broken. */
struct cm_conn *cmt_conn(struct cmt *s, int cm);
int cmt_reconnect_init(struct cmt *s, const struct cm_job *job);
void cmt_reconnect_watch(struct cmt *s, struct cm_conn *c);
void cmt_reconnect_free(struct cmt *s);
/* The first connection to CM cm: to its address, and when it has a
 * standby to the two in turn (the standby may have taken over), until
 * timeout_ms. A socket, or -1 with errno. */
int cmt_connect_first(struct cmt *s, int cm, const char *addr_text, int timeout_ms);
/* Connection cm ended: 0 if it is being re-established, -1 if fatal. */
int cmt_reconnect_start(struct cmt *s, int cm);
/* Tries the broken connections whose turn it is; the ms until the next
 * try (-1: none broken). Marks the transport dead past the time limit. */
int cmt_reconnect_poll(struct cmt *s);
/* The last TRIM (trim_*) on home connection c, written now or queued. */
int cmt_trim_send(struct cmt *s, struct cm_conn *c, int queue);
/* HELLO_ACK on a re-established connection: re-sends and re-posts. */
int cmt_reconnect_resume(struct cm_conn *c);
/* CM c->peer named its standby (a STANDBY frame of len bytes, read into
 * alts[c->peer].named): tried too from now on when the connection to it
 * breaks. 0, or -1 after cm_conn_fail (not an address). Without
 * reconnection (no alts) the frame is read and ignored. */
int cmt_standby_named(struct cmt *s, struct cm_conn *c, size_t len);
/* Logged event idx (kept until home acknowledges it). */
int cmt_event_keep(struct cmt *s, uint64_t idx, uint32_t kind, const void *value, size_t len);
void cmt_events_acked(struct cmt *s);

/* transport_cm_coalesce.c: a small message queued instead of written
 * leaves with the next frame (1: queued and complete; 0: send it now). */
int cmt_coalesce_init(struct cmt *s);
int cmt_coalesce_send(struct cmt *s, int cm, struct cm_header *h, struct cm_req *req);
/* Writes every queued message: before the rank waits. */
int cmt_coalesce_flush(struct cmt *s);
/* A frame was written to CM cm: the messages queued there went with it. */
void cmt_coalesce_written(struct cmt *s, int cm);
/* Stops the flusher thread: the MPI thread alone writes from then on. */
void cmt_coalesce_stop(struct cmt *s);
void cmt_coalesce_free(struct cmt *s);

/* transport_cm_push.c: a collective's transfers, pushed by home. */
/* A collective's receive: matched with a held message, or posted. */
int cmt_push_irecv(struct cmt *s, struct cm_req *req);
/* A DELIVER with CM_F_PUSH from c: where its payload goes. */
int cmt_push_header(struct cmt *s, struct cm_conn *c, const struct cm_header *h,
                    struct cm_sink *sink);
/* ...and it is all here. */
int cmt_push_frame(struct cmt *s, const struct cm_header *h, const struct cm_sink *sink);
/* Connection c breaks: a pushed message cut short comes again, and the
 * next connection to home sends PUSH_START. */
void cmt_push_broken(struct cmt *s, struct cm_conn *c);
/* PUSH_START on home connection c, written now or only queued; nothing
 * if this connection has one already. */
int cmt_push_start(struct cmt *s, struct cm_conn *c, int queue);
/* Before waiting: acknowledges what is held if a receive may wait behind
 * it. */
void cmt_push_waiting(struct cmt *s);
/* The image's share: out->pushes and the held messages. */
int cmt_push_snapshot(struct cmt *s, struct cm_resume *out);
/* Restored from an image: its push count and held messages. */
int cmt_push_restore(struct cmt *s, const struct cm_resume *r);
void cmt_push_free(struct cmt *s);

/* transport_cm_events.c */
int cmt_add_replayed(struct cm_conn *c, struct cmt *s, const struct cm_header *h);
int cmt_on_event_ack(struct cm_conn *c, struct cmt *s, const struct cm_header *h);
/* The pessimistic condition before a frame to another CM than home. */
int cmt_events_settle(struct cm_transport *t);
int cmt_event(struct cm_transport *t, uint32_t kind, void *value, size_t len, int *replayed);
int cmt_event_peek(struct cm_transport *t, uint32_t *kind);
int cmt_fetch_events(struct cm_transport *t, long long deadline);
int cmt_snapshot(struct cm_transport *t, struct cm_resume *out);
void cmt_ckpt_committed(struct cm_transport *t, const struct cm_resume *state);

#endif
