/* Private structures of the protocol core, shared by its layers (core.c
 * names them, top to bottom). Engines use core.h only. */
#ifndef CHANMEM_CORE_IMPL_H
#define CHANMEM_CORE_IMPL_H

#include "core.h"
#include "list.h"
#include "logmem.h"
#include "vec.h"

#include <stdbool.h>

/* ---- reference-counted payload bytes ---- */

/* Cut-through (cfg.cut_through_min): a large payload is logged and
 * delivered when its header arrives and filled while its bytes arrive.
 * `filled` is the watermark: data[0, filled) is final; a writer exposes no
 * body byte past it (cm_outq_iov), the reader advances it after each read.
 * Every other buffer is born complete (filled == len). */
struct cm_buf {
	struct cm_logmem *mem; /* charged there (cfg.mem), or NULL */
	size_t alloc;          /* bytes allocated, header included */
	uint32_t refs;         /* atomic */
	uint32_t len;
	uint32_t filled; /* atomic: bytes of data that are valid */
	uint32_t parked; /* atomic: a writer found nothing to write past filled */
	/* Sessions with a DELIVER of this partial buffer queued (each holds a
	 * reference): woken when the watermark moves. DEST(dst) domain. */
	struct cm_cut_waiters *waiters;
	/* The bytes: right after this header, or, from CM_BUF_ALIGN_MIN
	 * bytes on, at the next CM_BUF_ALIGN boundary of the block with the
	 * length rounded up to one, so that the spill store can write them
	 * with direct I/O straight from here (no copy into the page cache). */
	uint8_t *data;
	bool aligned;
	bool read_back; /* counted as one (cm_logmem_read_back_start) */
	/* Journaled in an extent of its own (cm_journal_ops.reserve), or
	 * CM_NO_EXTENT. Set once, under DEST(dst), before it is shared. */
	uint64_t extent;
};
#define CM_NO_EXTENT UINT64_MAX

#define CM_BUF_ALIGN 4096
#define CM_BUF_ALIGN_MIN (32 * 1024)

struct cm_cut_waiters {
	uint32_t n, cap;
	struct cm_session *sess[];
};

struct cm_buf *cm_buf_new(struct cm_logmem *mem, uint32_t len);
void cm_buf_ref(struct cm_buf *b);
void cm_buf_unref(struct cm_buf *b);

static inline uint32_t cm_buf_filled(const struct cm_buf *b)
{
	return __atomic_load_n(&b->filled, __ATOMIC_SEQ_CST);
}

/* Still filling (cut-through): not fully logged yet. */
static inline bool cm_buf_partial(const struct cm_buf *b)
{
	return b && cm_buf_filled(b) < b->len;
}

/* ---- the log and its match index ---- */

/* A message is indexed under four keys so that a receive request finds the
 * earliest message it accepts with one lookup whatever its wildcards:
 * (src, tag, ctx), (ANY, tag, ctx), (src, ANY, ctx), (ANY, ANY, ctx). */
#define CM_IDX_EXACT 0
#define CM_IDX_ANYSRC 1
#define CM_IDX_ANYTAG 2
#define CM_IDX_ANYBOTH 3
#define CM_NIDX 4

struct cm_bucket;

struct cm_entry {
	struct cm_entry *log_next;             /* arrival order, delivered or not */
	struct cm_list idx[CM_NIDX];           /* in idx_bucket[k]->msgs */
	struct cm_bucket *idx_bucket[CM_NIDX]; /* set while undelivered and indexed */
	struct cm_buf *payload;                /* NULL for a zero-length message */
	struct cm_session *sync_sess; /* CM_F_SYNC: where SYNC_ACK goes (holds a reference) */
	uint64_t seq;                 /* position in the destination's log */
	uint64_t clock;
	uint64_t req_id; /* delivered: the request it answered */
	int32_t src, dst, tag;
	uint32_t ctx, len;
	uint16_t flags;
	bool delivered;
	/* Payload in the spill store (cfg.spill), none in memory; or, with
	 * extent set, in the journal already (nothing was written for it). */
	bool spilled;
	uint64_t extent;
	/* Linked in the log list; a spilled entry out of it is reached
	 * through its delivery record only (a pushed one: through the
	 * destination's pushes). */
	bool in_log;
	/* CM_F_PUSH: its number in the destination's push order. */
	uint64_t push_seq;
};

static inline bool cm_entry_pushed(const struct cm_entry *e)
{
	return (e->flags & CM_F_PUSH) != 0;
}

enum cm_wait_kind { CM_WAIT_RECV = 1, CM_WAIT_PROBE = 2 };

/* A pending receive request or blocking probe. */
struct cm_wait {
	struct cm_list link; /* in its bucket's reqs or probes */
	struct cm_list all;  /* in the destination's waits */
	struct cm_bucket *bucket;
	struct cm_session *sess;
	uint64_t seq; /* post order */
	uint64_t id;  /* request / probe id */
	int32_t src, tag;
	uint32_t ctx;
	enum cm_wait_kind kind;
};

struct cm_bucket {
	struct cm_bucket *hnext;
	int32_t src, tag; /* either may be CM_ANY_* */
	uint32_t ctx;
	int slot;              /* CM_IDX_* that the key's shape selects */
	struct cm_list msgs;   /* undelivered entries, through their idx[slot] */
	struct cm_list reqs;   /* receive requests, in post order */
	struct cm_list probes; /* blocking probes, in post order */
};

/* What the rank was told for one request id (receive request or probe): the
 * delivery record a new incarnation is replayed from (fault tolerance). */
enum cm_rec_kind {
	CM_REC_NONE = 0,  /* not answered (yet), or never posted */
	CM_REC_DELIVER,   /* DELIVER of entry e */
	CM_REC_TRIMMED,   /* DELIVER of an entry --log-mem has dropped since */
	CM_REC_PROBE,     /* PROBE_REPLY: found (src, tag, len) or not (src = -1) */
	CM_REC_CANCELLED, /* a RECV_REQ withdrawn by CANCEL before anything matched it */
};

struct cm_rec {
	struct cm_entry *e; /* CM_REC_DELIVER */
	uint32_t len;       /* CM_REC_PROBE: length of the message found;
	                       CM_REC_CANCELLED: the request's ctx (keeps the record 24 bytes) */
	int32_t src, tag;   /* CM_REC_PROBE: -1, -1 when nothing was found;
	                       CM_REC_CANCELLED: the request's src and tag (wildcards kept) */
	uint8_t kind;
};

/* Request ids are dense per rank (0,1,2,...); an id this far past the
 * highest recorded one is not recorded (a hostile or broken peer must not
 * make the CM allocate without bound). Nor is one past twice the requests
 * the rank ever posted plus CM_REC_SLACK: a request's id is below the
 * count of requests its incarnation posted, so only a peer that makes ids
 * up is refused, and the record grows with what was really posted (a gap
 * per step alone let PROBE ids stepped by 2^20 take gigabytes). */
#define CM_REC_MAX_GAP (1u << 20)
#define CM_REC_SLACK 4096u

/* One logged nondeterministic event of a rank (an MPI_Wtime value, ...). */
struct cm_event {
	uint32_t kind;
	uint8_t len;
	uint8_t value[CM_EVENT_PAYLOAD_MAX];
};

struct cm_dest {
	struct cm_entry *log_head, *log_tail;
	/* The rank's event log, in event order, kept across incarnations
	 * (DEST domain): events.items[i] is event events_base + i, so
	 * events_base + events.n counts every event ever logged (those a
	 * committed checkpoint consumed are dropped: events_base). */
	CM_VEC(struct cm_event) events;
	uint64_t events_base;
	/* Delivery record indexed by request id (DEST domain): recs[i] is
	 * request recs_base + i (those below, a committed checkpoint covers). */
	struct cm_rec *recs;
	uint64_t nrecs; /* 1 + highest id recorded, 0 if none */
	uint64_t recs_cap, recs_base;
	uint64_t posted; /* atomic: RECV_REQ and PROBE frames of the rank (input.c) */
	uint64_t next_seq;
	uint64_t undelivered;
	struct cm_bucket **table;
	size_t table_size; /* power of two */
	size_t buckets;
	struct cm_list waits; /* every cm_wait, through its `all` */
	uint64_t next_wait_seq;
	uint64_t nreqs, nprobes;
	/* Pushed messages (push.c), in the order they were logged:
	 * pushes.items[i] is push number push_base + i (those below, a
	 * committed checkpoint covers); NULL once --log-mem dropped it
	 * without a spill store. They are matched by the rank, never here. */
	CM_VEC(struct cm_entry *) pushes;
	uint64_t push_base;
	/* The connection pushed to (its PUSH_START came), or NULL; the next
	 * push number it gets, and the bytes sent past its PUSH_ACKs. */
	struct cm_session *push_sess;
	uint64_t push_next;
	uint64_t push_out;
};

/* Events ever logged for the destination, those collected included. */
static inline uint64_t dest_nevents(const struct cm_dest *d)
{
	return d->events_base + d->events.n;
}

/* ---- output queue ---- */

struct cm_out_item {
	uint8_t head[CM_HEADER_SIZE + CM_PROBE_REPLY_PAYLOAD]; /* header + small payload */
	uint32_t head_len;
	uint32_t body_len;
	const uint8_t *body;
	struct cm_buf *ref; /* reference held on body's buffer, or NULL */
};

struct cm_outq {
	struct cm_out_item *items; /* ring */
	size_t cap;                /* power of two (or 0) */
	size_t first, count;
	size_t first_off; /* bytes of items[first] already written */
	size_t pending;   /* unwritten bytes */
	/* Memory held by queued items that carry no log payload (answers,
	 * replayed events, acknowledgements): written under OUTQ, read
	 * atomically by the session's reader for backpressure. */
	size_t ctrl_bytes;
};

/* Output a session may have queued in frames without a log payload before
 * its reader stops taking its input (cm_session_held): a rank that never
 * reads what it asks for (EVENT_ACK with REPLAY resends every event) must
 * not grow its queue without bound. Payload memory has its own bound
 * (--log-mem); this covers the rest. */
#define CM_OUTQ_CTRL_MAX (8u << 20)

void cm_outq_init(struct cm_outq *q);
void cm_outq_free(struct cm_outq *q);
/* Appends; takes over the item's reference. Returns false when out of memory
 * (the reference is released). */
bool cm_outq_push(struct cm_outq *q, const struct cm_out_item *item);
int cm_outq_iov(const struct cm_outq *q, struct iovec *iov, int max);
/* The payload buffer whose watermark holds the queue up (nothing can be
 * written before it moves), or NULL. */
struct cm_buf *cm_outq_blocked(const struct cm_outq *q);
void cm_outq_consumed(struct cm_outq *q, size_t n);

/* ---- sessions ---- */

enum cm_sess_state {
	CM_S_NEW,     /* waiting for HELLO */
	CM_S_READY,   /* authenticated */
	CM_S_BYE,     /* BYE answered: nothing more is accepted */
	CM_S_CLOSING, /* error sent or replaced: input discarded, output flushed, then close */
	CM_S_GONE     /* cm_session_closed was called */
};

#define CM_STAGING_SIZE (64 * 1024)
/* Until its HELLO is accepted a connection gets a staging buffer just big
 * enough for a HELLO frame: idle or hostile unauthenticated peers cost
 * little memory. */
#define CM_UNAUTH_STAGING 128
/* After a MSG of at least CM_BULK_MSG bytes, staging reads shrink to
 * CM_BULK_READ: the next frame is likely another large MSG, whose payload
 * should go straight into its log entry rather than through staging (only
 * the first CM_BULK_READ bytes of it are copied). */
#define CM_BULK_MSG (32 * 1024)
#define CM_BULK_READ (4 * 1024)

struct cm_session {
	struct cm_core *core;
	void *engine_data;
	uint64_t id;    /* cm_session_id */
	bool journaled; /* something of it is in the journal (its close must be too) */
	bool fill_ack;  /* the MSG being filled asked for LOGGED (CM_F_ACK) */
	uint32_t refs;  /* atomic */
	enum cm_sess_state state;
	int32_t rank; /* -1 until authenticated */
	uint32_t incarnation;
	bool registered; /* holds its rank's slot in the rank table */
	bool authed;     /* atomic: a HELLO with the job secret came (cm_session_authenticated) */
	bool said_bye;
	/* GLOBAL. A newer incarnation's HELLO waits (successor, holding a
	 * reference) until this live connection closes, so every frame the dead
	 * incarnation got onto the wire is processed before the new one
	 * re-executes. The waiting session keeps its HELLO in parked_*. */
	struct cm_session *successor;
	bool parked;
	int32_t parked_rank;
	uint32_t parked_incarnation;

	/* Input: bytes land in the staging buffer, or straight in in_entry's
	 * payload while a MSG's payload is outstanding. */
	uint8_t *in;
	size_t in_cap, in_pos, in_end;
	struct cm_entry *in_entry;
	uint32_t in_got;
	uint64_t in_skip;      /* payload bytes of a dropped re-send still to discard */
	bool last_iov_payload; /* the last read_iov started with in_entry's payload */
	bool bulk;             /* the last MSG was large: read staging in small pieces */

	/* Cut-through: the payload of an already dispatched MSG this connection
	 * is filling (a reference), read straight into it past its watermark.
	 * On a resume (a re-executed sender re-sends a MSG whose payload a dead
	 * connection left partial) the first fill_verify re-sent bytes are read
	 * into scratch and compared instead. fill_notify: the watermark moved
	 * while a writer was parked on it, or the payload is complete; the
	 * engine calls cm_session_fill_notify in DEST(fill_dst) before the next
	 * frame. */
	struct cm_buf *fill;
	uint32_t fill_got, fill_verify;
	int32_t fill_dst;
	uint64_t fill_clock;
	uint8_t *scratch;
	bool fill_notify, fill_diverged;
	/* The next frame is a MSG the log memory cannot take yet (its header
	 * stays staged, unparsed): see cm_session_held. held_output: held
	 * because the peer does not read (CM_OUTQ_CTRL_MAX), not for memory. */
	bool held, held_output;
	bool last_iov_fill; /* the last read_iov started with the fill */

	struct cm_outq out;
};

/* The state may be moved to CLOSING by another session's HELLO (a newer
 * incarnation replaces this connection), so every access is atomic and every
 * transition a compare-and-swap from the state the caller saw. */
static inline enum cm_sess_state sess_state(const struct cm_session *s)
{
	return __atomic_load_n(&s->state, __ATOMIC_ACQUIRE);
}

static inline bool sess_move(struct cm_session *s, enum cm_sess_state from, enum cm_sess_state to)
{
	return __atomic_compare_exchange_n(&s->state, &from, to, false, __ATOMIC_ACQ_REL,
	                                   __ATOMIC_ACQUIRE);
}

/* Any live state -> CLOSING; false if it was already closing or gone. */
static inline bool sess_begin_closing(struct cm_session *s)
{
	enum cm_sess_state cur = sess_state(s);
	while (cur != CM_S_CLOSING && cur != CM_S_GONE)
		if (__atomic_compare_exchange_n(&s->state, &cur, CM_S_CLOSING, false,
		                                __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			return true;
	return false;
}

/* ---- the core ---- */

struct cm_sender {
	uint64_t highest; /* highest accepted clock, valid if has */
	bool has;
	/* The last cut-through MSG accepted from this rank (a reference) and its
	 * header: a re-send of that clock resumes it if it is still partial and
	 * the connection that filled it is gone (cut_orphan). cut_buf and
	 * cut_clock are also peeked without the lock by input.c. */
	struct cm_buf *cut_buf;
	uint64_t cut_clock;
	struct cm_header cut_h;
	bool cut_orphan;
};

struct cm_core {
	struct cm_core_config cfg;
	uint32_t world_size; /* atomic; 0 until the first HELLO is accepted */
	struct cm_dest *dests;
	struct cm_sender *senders;
	struct cm_session **rank_sess; /* live session per rank */
	uint64_t delivered_kept;       /* bytes of delivered entries still kept */
	uint64_t next_session_id;      /* atomic */
	struct cm_core_stats stats;
};

/* emit.c: hands a record to cfg.journal (nothing without one) and marks
 * s as journaled. */
void cm_core_journal(struct cm_session *s, uint8_t kind, uint8_t flags, const struct cm_header *h,
                     const void *data, size_t len);
/* Writes b[from, to) to b's journal extent and records that its first to
 * bytes are there (emit.c). */
void cm_core_journal_extent(struct cm_session *s, uint8_t kind, uint8_t flags,
                            const struct cm_header *h, struct cm_buf *b, uint32_t from,
                            uint32_t to);
/* The bytes of b that are journaled when got of them arrived: all of them
 * without a journal extent, else whole pages (or the end). */
static inline uint32_t cm_buf_durable(const struct cm_buf *b, uint32_t got)
{
	if (b->extent == CM_NO_EXTENT || got == b->len)
		return got;
	return got & ~(CM_JOURNAL_PAGE - 1);
}
/* LOGGED to the sender s: every MSG of its rank below the next expected
 * clock is logged (SENDER(rank of s)). */
void cm_core_logged(struct cm_session *s);

/* core.c */
_Static_assert(CM_PROBE_REPLY_PAYLOAD >= CM_EVENT_PAYLOAD_MAX,
               "an output item's head must hold an EVENT frame");
void cm_core_emit(struct cm_session *to, const struct cm_out_item *item);
void cm_core_emit_header(struct cm_session *to, const struct cm_header *h);
/* HELLO (session.c): authenticate, then take the rank's slot, wait for the
 * older incarnation's connection to end, or take over from it. */
void cm_core_hello(struct cm_session *s, const struct cm_frame *f);
/* Queues ERROR(code, text) on s and marks it closing. */
void cm_session_fail(struct cm_session *s, enum cm_err code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A log entry for h, its payload buffer allocated (uninitialised). With
 * admit, the payload is a sender's and comes in only under the --log-mem
 * rule (cm_logmem_alloc_admitted): NULL with *held set when it cannot yet. */
struct cm_entry *cm_entry_new(struct cm_core *core, const struct cm_header *h, bool admit,
                              bool *held);
void cm_entry_free(struct cm_entry *e);

/* emit.c: the waiters of a partial payload. */
/* A DELIVER of partial buffer b is queued on s: s's writer is woken when
 * the watermark moves. DEST(dst). false: out of memory. */
bool cm_cut_watch(struct cm_buf *b, struct cm_session *s);
/* Releases the waiters of b (b complete, or being freed). */
void cm_cut_waiters_free(struct cm_buf *b);

/* cut.c: cut-through forwarding. */
/* Reader side: n payload bytes were stored in s->fill at fill_got. */
void cm_cut_advance(struct cm_session *s, uint32_t n);
/* Copies (or, resuming, compares) up to n bytes from p into the fill;
 * returns how many it took. */
size_t cm_cut_take(struct cm_session *s, const uint8_t *p, size_t n);
/* A connection that was filling a payload ends: a partial one is left for a
 * re-send to resume (SENDER(rank of s)). */
void cm_cut_orphan(struct cm_session *s);
/* A re-send of a clock cut_clock names (MSG dispatch, SENDER(src) +
 * DEST(dst)): resumes the partial payload, or false (an ordinary
 * duplicate). May fail s. */
bool cm_cut_resume(struct cm_session *s, const struct cm_header *h);

/* push.c: pushed messages (DEST(d) domain). */
/* Pushed entry e joins the push order (the caller logs it, then pumps).
 * false: out of memory. */
bool cm_push_add(struct cm_dest *d, struct cm_entry *e);
/* Pushes what the window allows to the connection pushed to. */
void cm_push_pump(struct cm_core *core, struct cm_dest *d);
/* PUSH_START: s gets the pushes from number first on. false: refused (s
 * failed). */
bool cm_push_start(struct cm_core *core, struct cm_dest *d, struct cm_session *s, uint64_t first);
/* PUSH_ACK: bytes more may be pushed to s. */
void cm_push_credit(struct cm_core *core, struct cm_dest *d, struct cm_session *s, uint64_t bytes);
/* s is closing: nothing more is pushed to it. */
void cm_push_drop_session(struct cm_dest *d, struct cm_session *s);
/* --log-mem let go of a pushed entry without a spill store. */
void cm_push_lost(struct cm_dest *d, struct cm_entry *e);
/* A committed checkpoint covers the pushes below cut: they are dropped. */
void cm_push_gc(struct cm_core *core, struct cm_dest *d, uint64_t cut);
void cm_push_free(struct cm_dest *d);

/* msglog.c, msgrec.c: everything here is DEST(d) domain. */
bool cm_dest_init(struct cm_dest *d);
void cm_dest_free(struct cm_dest *d);
/* Appends e (already accepted by dedup) and matches it: a pending request
 * takes it (DELIVER, and SYNC_ACK if asked), or it stays undelivered and
 * answers the blocking probes it matches. Returns false when out of memory
 * (e is then not logged and freed). */
bool cm_dest_add_msg(struct cm_core *core, struct cm_dest *d, struct cm_entry *e);
/* A RECV_REQ from s: delivered at once, or queued. false: out of memory. */
bool cm_dest_post_recv(struct cm_core *core, struct cm_dest *d, struct cm_session *s,
                       const struct cm_header *h);
/* A PROBE from s: answered at once, or queued when blocking and no match. */
bool cm_dest_probe(struct cm_core *core, struct cm_dest *d, struct cm_session *s,
                   const struct cm_header *h);
/* Drops every pending request and probe of s. */
void cm_dest_drop_session(struct cm_dest *d, struct cm_session *s);
/* Spills (or drops) delivered entries of d's log, oldest first, while over
 * the budget. */
void cm_dest_trim(struct cm_core *core, struct cm_dest *d);
/* A sender is held for memory: every complete payload of d's log goes to
 * the spill store, delivered or not, whatever the budget. */
void cm_dest_relieve(struct cm_core *core, struct cm_dest *d);

/* Shared by msglog.c (matching) and msgrec.c (the delivery record). */
/* Slot recording request id (grows the record); NULL when the id is below
 * a checkpoint's cut, too far past the record, or memory is short. */
struct cm_rec *cm_rec_slot(struct cm_dest *d, uint64_t id);
/* The answer recorded for id, or NULL. */
const struct cm_rec *cm_rec_find(const struct cm_dest *d, uint64_t id);
/* DELIVER of e: to request req_id, or with CM_F_PUSH in flags as push
 * number req_id. */
void cm_emit_deliver(const struct cm_entry *e, struct cm_session *to, uint64_t req_id,
                     uint16_t flags);
void cm_emit_probe_reply(struct cm_session *to, uint64_t probe_id, uint32_t ctx, int32_t src,
                         int32_t tag, uint32_t len);
void cm_dest_remove_wait(struct cm_dest *d, struct cm_wait *w);
/* Memory an entry kept for replay stands for (the --log-mem budget). */
static inline uint64_t cm_entry_cost(const struct cm_entry *e)
{
	return sizeof *e + (e->spilled ? 0 : e->len);
}
/* e went out for the first time (a DELIVER, or a push): from here it is a
 * delivered entry, kept for a re-execution within --log-mem. */
void cm_entry_delivered(struct cm_core *core, struct cm_entry *e);
/* Moves an entry's payload to cfg.spill (a delivered one past --log-mem,
 * an undelivered one near the memory bound). true: spilled (the entry
 * stays, without payload); false: no store, or it failed (a delivered
 * entry is then dropped, an undelivered one stays in memory). */
bool cm_spill_entry(struct cm_core *core, struct cm_entry *e);
/* A spilled entry is dropped: the spill store forgets its payload (one in
 * the journal stays there). */
void cm_spill_forget(struct cm_core *core, struct cm_entry *e);
/* DELIVER of e to request req_id of to, its payload read back from the
 * spill store if it is there. false: it cannot be read back. */
bool cm_emit_entry(struct cm_core *core, struct cm_entry *e, struct cm_session *to, uint64_t req_id,
                   uint16_t flags);
/* TRIM: a committed checkpoint of the rank covers its requests below
 * req_cut and events below ev_cut; drops their records, the delivered
 * messages they took, and the events. */
void cm_dest_gc(struct cm_core *core, struct cm_dest *d, uint64_t req_cut, uint64_t ev_cut,
                uint64_t push_cut);
/* A re-sent synchronous MSG (src, clock) of d's log was dropped as a
 * duplicate: SYNC_ACK to s now if the original was delivered (or trimmed,
 * so delivered long ago), else when it is. */
void cm_dest_sync_duplicate(struct cm_core *core, struct cm_dest *d, struct cm_session *s,
                            const struct cm_header *h);

enum cm_replay {
	CM_REPLAY_NONE,     /* id not in the record: match normally */
	CM_REPLAY_DONE,     /* the recorded answer was sent again */
	CM_REPLAY_LOST,     /* recorded, but the entry was trimmed: cannot replay */
	CM_REPLAY_DIVERGED, /* recorded answer does not fit this request */
};
/* A RECV_REQ or PROBE (h) whose id the record may already hold: answers it
 * from the record, in the DEST(rank) domain. */
enum cm_replay cm_dest_replay(struct cm_core *core, struct cm_dest *d, struct cm_session *s,
                              const struct cm_header *h);

enum cm_cancel {
	CM_CANCEL_DONE,     /* withdrawn (now or earlier): CANCEL_ACK with CM_F_CANCELLED */
	CM_CANCEL_TOO_LATE, /* already matched: CANCEL_ACK without CM_F_CANCELLED */
	CM_CANCEL_UNKNOWN,  /* the id is no receive request this rank posted: refuse */
	CM_CANCEL_NOMEM,    /* the outcome could not be recorded: refuse */
};
/* A CANCEL (h, from s) of receive request h->clock: a pending request of s
 * is removed and recorded as cancelled, so a re-sent RECV_REQ with that id
 * matches nothing and a re-sent CANCEL gets the same answer. Answers
 * CANCEL_ACK to s unless the result is UNKNOWN or NOMEM. DEST(rank). */
enum cm_cancel cm_dest_cancel(struct cm_core *core, struct cm_dest *d, struct cm_session *s,
                              const struct cm_header *h);

static inline uint32_t cm_atomic_load32(const uint32_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

/* Statistics are updated under different ranks' locks by threaded engines:
 * plain increments would be data races. Relaxed atomics keep them exact and
 * cost nothing measurable; readers get a per-field snapshot. */
#define CM_STAT_ADD(core, field, n)                                                                \
	__atomic_fetch_add(&(core)->stats.field, (uint64_t)(n), __ATOMIC_RELAXED)
#define CM_STAT_SUB(core, field, n)                                                                \
	__atomic_fetch_sub(&(core)->stats.field, (uint64_t)(n), __ATOMIC_RELAXED)
#define CM_STAT_SET(core, field, v)                                                                \
	__atomic_store_n(&(core)->stats.field, (uint64_t)(v), __ATOMIC_RELAXED)

#endif
