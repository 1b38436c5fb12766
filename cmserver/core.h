/* The channel-memory protocol core: every rule of the rank <-> CM protocol
 * (authentication, message logs, matching, dedup, probes, BYE) with no I/O,
 * no threads and no locks. An I/O engine (engine_mono.c, and the threaded
 * engines of later issues) owns the sockets and drives the core through the
 * calls below.
 *
 * Reading. The engine asks the core where the next bytes of a connection go
 * (cm_session_read_iov: the session's staging buffer, or straight into the
 * payload buffer of the log entry being received, so a large message is
 * copied once, from the socket into the log), reads with readv, and reports
 * how many bytes arrived (cm_session_input, or, for engines that lock per
 * domain, cm_session_received + cm_session_next_frame + cm_core_dispatch).
 * The frame-assembly state survives any split of the byte stream.
 *
 * Writing. Frames for a connection go to that session's output queue: a
 * header buffer plus a reference to payload bytes (a log entry's payload is
 * shared, reference counted, never copied). The engine drains it with
 * writev/sendmsg (cm_session_out_iov + cm_session_out_consumed), surviving
 * partial writes. The core calls hooks.wake(session) when a queue becomes
 * non-empty or a session must be closed, so the engine can arm a writer.
 *
 * ---------------------------------------------------------------------
 * State domains (the contract the threaded engines rely on)
 *
 * The core's state falls in four domains. A threaded engine guards each with
 * its own lock; the core never takes a lock itself.
 *
 *   SESSION(s)   input assembly + authentication state of one connection.
 *                Touched only by calls that take s as the reading session:
 *                cm_session_read_iov, cm_session_received,
 *                cm_session_next_frame. One reader per session at a time.
 *
 *   OUTQ(s)      the output queue of session s. Appended while processing a
 *                frame of ANY session (a MSG from rank A delivers to B's
 *                queue; a RECV_REQ of B sends SYNC_ACK to A's queue); drained
 *                by s's writer (cm_session_out_iov/out_consumed/out_pending).
 *                Every append inside the core is bracketed by
 *                hooks.out_lock(s)/hooks.out_unlock(s) (NULL = no locking, as
 *                in mono), so the engine decides how it is protected.
 *
 *   DEST(d)      the log of destination rank d, its match index, its pending
 *                receive requests and blocking probes. Touched by dispatching
 *                MSG with dst = d, RECV_REQ/PROBE from rank d, and the close
 *                of a session of rank d.
 *
 *   SENDER(r)    the highest clock accepted from rank r (dedup). Touched by
 *                dispatching MSG with src = r (written) and HELLO of rank r
 *                (read). cm_session_next_frame reads it without a lock to skip
 *                obvious re-sends early; the value only grows, and
 *                dispatch checks again, so a stale read is harmless.
 *
 *   GLOBAL       world size, the rank -> live session table. Touched by
 *                dispatching HELLO and by cm_session_closed. world_size is
 *                written once (0 -> N, at the first accepted HELLO) and read
 *                (atomically) by header decoding. The delivered-bytes budget
 *                of --log-mem is one atomic counter shared by every DEST;
 *                the counters of cm_core_stats are plain and approximate
 *                under threads.
 *
 * What each call needs (lock order when several: GLOBAL, SENDER, DEST,
 * OUTQ):
 *
 *   cm_core_dispatch(s, f)   f.h.type HELLO:    GLOBAL + SENDER(rank) + DEST(rank)
 *                                                (+ OUTQ of s and of a replaced session)
 *                            MSG:               SENDER(src) + DEST(dst) (+ OUTQs)
 *                            RECV_REQ, PROBE, CANCEL, TRIM, PUSH_START, PUSH_ACK:
 *                                               DEST(rank) (+ OUTQs)
 *                            BYE:               OUTQ(s)
 *                            EVENT, EVENT_ACK:  DEST(rank) (+ OUTQ of s)
 *                            cm_frame_domain() names the rank.
 *   cm_session_closed(s)     GLOBAL + SENDER(rank of s) + DEST(rank of s) + SESSION(s)
 *                            + OUTQ(s) (+ OUTQ of the newer incarnation it admits)
 *   cm_session_next_frame(s) SESSION(s); on a bad frame also OUTQ(s) (ERROR)
 *   cm_session_fill_notify(s) SENDER(rank of s) + DEST(cm_session_fill_domain(s))
 *                            + SESSION(s) (+ OUTQs, through the hooks)
 *   cm_core_relieve(core, r) DEST(r) (+ OUTQs)
 *   cm_session_out_*(s)      OUTQ(s)
 *
 * A HELLO of a newer incarnation waits while the old incarnation's
 * connection is open (its unread frames are processed first);
 * cm_session_closed of the old one admits it. With CM_F_TAKEOVER it replaces
 * the old connection at once.
 *
 * Session state (new / ready / bye / closing / gone) is atomic: a HELLO of a
 * newer incarnation marks the old session closing from another thread. The
 * matcher (DEST) skips waits of closing sessions, so nothing is delivered
 * to a connection that is going away; the message waits for the rank's
 * next connection.
 *
 * Lifetimes. Sessions and payload buffers are reference counted with atomic
 * counters. The engine holds one reference on each session it created and
 * drops it with cm_session_release after cm_session_closed. A pending
 * request or blocking probe points at its session; cm_session_closed removes
 * them under DEST, so nobody finds a closed session through DEST afterwards.
 * An undelivered synchronous MSG holds a reference to the session it came
 * from (its SYNC_ACK goes there, or nowhere if that session is closed by
 * then). A payload is freed when the log has dropped its entry and every
 * DELIVER that carried it was written out.
 *
 * Fault tolerance (replay). Every DELIVER and PROBE_REPLY is recorded in
 * DEST(rank) under its request id (cm_dest.recs). A RECV_REQ or PROBE whose
 * id is recorded -- a new incarnation re-executing -- is answered from the
 * record and changes no matching state; any other id matches as usual. A
 * synchronous MSG dropped as a re-send is handed to dispatch with entry NULL
 * so its SYNC_ACK is answered (SENDER(src) + DEST(dst), like any MSG).
 *
 * Cut-through (cfg.cut_through_min). A large MSG is dispatched at its
 * header; its reader (SESSION) then fills the logged payload buffer and
 * advances its atomic watermark, which writers (OUTQ) read: no lock shared
 * between them. Who must be woken -- the sessions with a DELIVER of that
 * buffer queued -- is DEST(dst) state: registered when the DELIVER is
 * queued, used by cm_session_fill_notify. The partial payload a dead sender
 * left, and the header a re-send must match, are SENDER(src) state (the
 * re-send resumes it in MSG dispatch; cm_session_next_frame only peeks).
 *
 * Nondeterministic events. A rank's EVENT frames (its MPI_Wtime values...)
 * are appended to DEST(rank).events in event order, whatever the
 * incarnation; an EVENT already logged is dropped, one past a gap refused.
 * EVENT_ACK answers how many are logged; with CM_F_REPLAY it first sends
 * them all back (a new incarnation re-executing).
 * --------------------------------------------------------------------- */
#ifndef CHANMEM_CORE_H
#define CHANMEM_CORE_H

#include "protocol.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

struct cm_core;
struct cm_session;
struct cm_entry;
struct cm_logmem;

struct cm_core_hooks {
	void *ctx;
	/* s has output to write (its queue went from empty to non-empty) or must
	 * be closed (cm_session_closing). Called with OUTQ(s) held. */
	void (*wake)(void *ctx, struct cm_session *s);
	/* Optional: bracket every append to s's output queue. */
	void (*out_lock)(void *ctx, struct cm_session *s);
	void (*out_unlock)(void *ctx, struct cm_session *s);
};

/* The journal (journal.c): every input that changes the core's state, in
 * the order the core applies it, so that a CM started on the same journal
 * rebuilds the same state (cm_recovery_*). The core hands records to
 * cfg.journal and never writes them itself; the engine makes sure what was
 * handed over is in the file before it writes any output (cm_journal_flush
 * in eng_send_output). */
enum cm_jrec_kind {
	CM_J_FRAME = 1, /* HELLO, RECV_REQ, PROBE, CANCEL, EVENT, TRIM: header + its payload */
	CM_J_MSG = 2,   /* an accepted MSG: header + the payload bytes present at dispatch */
	CM_J_FILL = 3,  /* more payload bytes of the session's cut-through MSG */
	CM_J_CLOSED = 4 /* the session's connection ended */
};
enum cm_jrec_flags {
	CM_J_CUT = 1u << 0,    /* CM_J_MSG: dispatched at its header, filled later */
	CM_J_RESUME = 1u << 1, /* CM_J_MSG: a re-send resuming a partial payload */
	CM_J_EXTENT = 1u << 2  /* CM_J_MSG, CM_J_FILL: the bytes are in the payload's extent */
};
struct cm_jrec {
	uint8_t kind, flags;
	uint64_t session;   /* the session's id (cm_session_id) */
	struct cm_header h; /* CM_J_FRAME, CM_J_MSG */
	/* CM_J_EXTENT: where the payload's extent is, and how many of its
	 * bytes (from the start) are written there now. */
	uint64_t extent;
	uint32_t valid;
};
/* A large payload (a page-aligned buffer) is not copied into the record
 * stream: it gets an extent of its own, written straight from the log
 * buffer (direct I/O), and the records say how much of it is valid. */
#define CM_JOURNAL_PAGE 4096u
struct cm_journal_ops {
	/* Appends rec and its data (len bytes). Called in the domains of the
	 * input it records, from any thread; keeps the call order. */
	void (*record)(void *ctx, const struct cm_jrec *rec, const void *data, size_t len);
	/* An extent for a payload of len bytes (rounded up to a page). */
	uint64_t (*reserve)(void *ctx, uint32_t len);
	/* Writes base[from, to) to the extent (from a multiple of
	 * CM_JOURNAL_PAGE; to one too, or the payload's end: the buffer is
	 * rounded up to a page). Returns once the bytes are in the file. */
	void (*write_extent)(void *ctx, uint64_t extent, const uint8_t *base, uint32_t from,
	                     uint32_t to);
	/* Reads len bytes of a written extent back (a replay of a payload the
	 * log let go of: the journal is its spill store). 0, or -1. */
	int (*read_extent)(void *ctx, uint64_t extent, void *out, uint32_t len);
	void *ctx;
};

struct cm_core_config {
	char secret[CM_SECRET_LEN]; /* job secret, exactly CM_SECRET_LEN bytes */
	uint32_t max_payload;       /* --max-message */
	/* The job's world size as whoever started the CM knows it
	 * (--world-size): a HELLO with another is refused. 0: unknown, the
	 * first accepted HELLO sets it, up to CM_WORLD_MAX (its state is
	 * allocated for every rank at once). */
	uint32_t world_size;
	/* Delivered entries are kept in memory for replay up to this many bytes
	 * (payload + bookkeeping) over all destinations; past it the oldest
	 * delivered entries of a destination are spilled (or dropped without
	 * a spill store). UINT64_MAX = keep all. */
	uint64_t log_mem;
	/* Where every payload buffer is allocated and charged (logmem.h), or
	 * NULL (malloc, no bound). With a bound: a MSG whose payload does not
	 * fit is not taken in (cm_session_held: the engine stops reading that
	 * connection, and the sender's socket fills); delivered entries are
	 * spilled while the live payload memory is past half the bound, and
	 * undelivered ones as they arrive past three quarters. */
	struct cm_logmem *mem;
	struct cm_core_hooks hooks;
	/* A rank's connection ended without BYE and without being refused or
	 * replaced: the rank is probably dead (the dispatcher is told). Called
	 * from cm_session_closed, GLOBAL held. NULL: nobody to tell. */
	void (*rank_lost)(void *ctx, int rank, uint32_t incarnation);
	void *rank_lost_ctx;
	/* Where delivered payloads go past log_mem (spill.c: LMDB), so a
	 * replay can still fetch them; NULL: they are dropped. Called in the
	 * DEST(dst) domain; each call stands alone (own transaction). */
	const struct cm_spill_ops *spill;
	void *spill_ctx;
	/* Cut-through forwarding: a MSG with at least this many payload bytes
	 * is dispatched (logged, matched, its DELIVER queued) as soon as its
	 * header arrives, and its payload forwarded as it arrives. 0: off. */
	uint32_t cut_through_min;
	/* Where state-changing inputs are journaled (see above), or NULL. */
	const struct cm_journal_ops *journal;
	/* The address of this CM's standby (--mirror), told to every rank
	 * after its HELLO_ACK (a STANDBY frame), or NULL: none. Lives as long
	 * as the core. */
	const char *standby_addr;
};

struct cm_buf;
struct cm_spill_ops {
	/* Stores len bytes under (dst, seq). 0, or -1 (the payload is then
	 * dropped instead, as without a spill store). */
	int (*put)(void *ctx, int32_t dst, uint64_t seq, const void *data, uint32_t len);
	/* Optional, preferred when set: takes a reference on the payload
	 * buffer and stores it later, off the caller's thread (a log-writer
	 * thread); get must find it meanwhile. 0, or -1 as for put. */
	int (*put_buf)(void *ctx, int32_t dst, uint64_t seq, struct cm_buf *buf);
	/* Copies the payload stored under (dst, seq), exactly len bytes, into
	 * out. 0, or -1 (gone or unreadable: the replay fails cleanly). */
	int (*get)(void *ctx, int32_t dst, uint64_t seq, void *out, uint32_t len);
	/* Forgets it (a committed checkpoint covers it). */
	void (*del)(void *ctx, int32_t dst, uint64_t seq);
};

/* Counters for --verbose reports and tests. Read them in the GLOBAL domain;
 * they are approximate under threads. */
struct cm_core_stats {
	uint64_t sessions_opened;
	uint64_t msgs_logged;
	uint64_t msgs_duplicate;
	uint64_t msgs_delivered;
	uint64_t bytes_logged;
	uint64_t log_entries_kept;  /* entries still in logs (delivered or not) */
	uint64_t log_bytes_held;    /* their payload bytes in memory */
	uint64_t log_bytes_spilled; /* delivered payload bytes moved to the spill store */
	uint64_t log_bytes_delivered_kept;
	uint64_t frames_refused; /* ERROR frames sent */
	/* Fault tolerance (added): */
	uint64_t sessions_replaced; /* HELLO of a newer incarnation took a rank's slot */
	uint64_t msgs_replayed;     /* DELIVERs re-sent from the delivery record */
	uint64_t probes_replayed;   /* PROBE_REPLYs re-sent from the delivery record */
	uint64_t sync_acks_resent;  /* SYNC_ACKs for dropped synchronous re-sends */
	uint64_t replay_lost;       /* replays refused: the entry was trimmed (--log-mem) */
	/* Nondeterministic events (added): */
	uint64_t events_logged;    /* EVENT frames appended to a rank's event log */
	uint64_t events_duplicate; /* EVENTs already logged (dropped) */
	uint64_t events_replayed;  /* EVENT frames sent back to a new incarnation */
	/* Garbage collection (TRIM after a committed checkpoint): */
	uint64_t log_entries_collected; /* delivered messages dropped */
	uint64_t events_collected;      /* events dropped */
	/* Cut-through forwarding (added): */
	uint64_t msgs_cut_through; /* MSGs dispatched at their header */
	uint64_t cut_resumed;      /* partial payloads a re-send completed */
	/* Pushed messages (collective contexts): */
	uint64_t msgs_pushed;   /* DELIVERs of pushed messages written to a rank */
	uint64_t pushes_resent; /* of those, pushed again to a new connection */
};

struct cm_core *cm_core_new(const struct cm_core_config *cfg);
/* Frees everything. Every session must have been closed and released. */
void cm_core_free(struct cm_core *core);
void cm_core_stats(const struct cm_core *core, struct cm_core_stats *out);
/* One info line with the counters a run ends with (at shutdown). */
void cm_core_log_summary(const struct cm_core *core);
/* Largest world size a HELLO may set when the CM was not given one. */
#define CM_WORLD_MAX 65536

/* World size learned from the first accepted HELLO, 0 before. */
uint32_t cm_core_world_size(const struct cm_core *core);

/* ---- sessions (one per connection) ---- */

/* A new unauthenticated session; engine_data is handed back by
 * cm_session_engine_data. Holds one reference for the caller. NULL when out
 * of memory. */
struct cm_session *cm_session_new(struct cm_core *core, void *engine_data);
void *cm_session_engine_data(const struct cm_session *s);
/* The connection is gone (EOF, error, or the engine closes it after
 * cm_session_closing): leaves the rank table, drops its pending requests and
 * probes, releases queued output. Idempotent. */
void cm_session_closed(struct cm_session *s);
void cm_session_ref(struct cm_session *s);
void cm_session_release(struct cm_session *s);

/* The core wants this connection closed (an ERROR was queued, or a newer
 * incarnation replaced it): the engine stops processing input, writes the
 * remaining output, then closes. Input that still arrives is discarded. */
int cm_session_closing(const struct cm_session *s);
/* The peer has shown the job secret (its HELLO may still wait for an older
 * incarnation's connection to end). Any thread may ask: engines drop
 * connections that have not within a deadline. */
int cm_session_authenticated(const struct cm_session *s);
/* Authenticated rank, or -1. */
int cm_session_rank(const struct cm_session *s);
/* The connection said BYE and got BYE_ACK: a close now is not a failure. */
int cm_session_said_bye(const struct cm_session *s);

/* A number naming the session in the journal, unique in the core (and over
 * the recovered sessions of a journal). */
uint64_t cm_session_id(const struct cm_session *s);
/* cfg.journal's context, or NULL: the engine flushes it before writing. */
void *cm_session_journal(const struct cm_session *s);

/* ---- recovery from a journal (recover.c) ---- */

/* Before the engine accepts anyone, a journal's records are applied in
 * order to a fresh core: each record's session is re-created (without a
 * connection, its output discarded), its frames dispatched, its payload
 * bytes filled, its close applied. Nothing is journaled meanwhile; at the
 * end the sessions still open are closed (and that is journaled), so the
 * ranks reconnect and re-send what the journal did not hold. */
struct cm_recovery;
struct cm_recovery *cm_recovery_begin(struct cm_core *core);
/* 0, or -1 with a message in *why (a record that cannot belong to a
 * journal this core wrote). */
int cm_recovery_apply(struct cm_recovery *r, const struct cm_jrec *rec, const uint8_t *data,
                      size_t len, const char **why);
/* Counts of what was applied, for the log line. */
void cm_recovery_end(struct cm_recovery *r, uint64_t *records, uint64_t *sessions);

/* ---- input ---- */

/* Where the next bytes go: fills up to 2 iovecs (read them in order with
 * readv) and returns how many. Never 0 for a live session. */
int cm_session_read_iov(struct cm_session *s, struct iovec iov[2]);
/* n bytes were read into the iovecs of the last cm_session_read_iov. */
void cm_session_received(struct cm_session *s, size_t n);

/* One complete frame, ready for cm_core_dispatch. */
struct cm_frame {
	struct cm_header h;
	struct cm_hello hello; /* HELLO */
	/* MSG: the filled log entry (owned by the frame until dispatch). NULL
	 * for a synchronous MSG already dropped as a re-send (its payload is
	 * skipped): dispatching it only answers its SYNC_ACK (same domains as
	 * any MSG). */
	struct cm_entry *entry;
	/* EVENT, TRIM: the payload bytes (h.len of them). */
	uint8_t event[CM_TRIM_PAYLOAD_MAX];
	/* MSG, cut-through: entry's payload is still arriving (cut), or, with
	 * entry NULL, this re-send may resume a partial payload (resume). */
	bool cut, resume;
};

/* Next complete frame of s: 1 (and *f filled), 0 when more bytes are needed,
 * the session is closing, or cm_session_fill_notify is due (see below). A
 * malformed or refused frame queues ERROR, marks s closing and returns 0. */
int cm_session_next_frame(struct cm_session *s, struct cm_frame *f);
/* Processes a frame from cm_session_next_frame. */
void cm_core_dispatch(struct cm_session *s, struct cm_frame *f);
/* The rank whose DEST/SENDER domain dispatching f touches (see above): MSG
 * -> dst (and SENDER(src)), RECV_REQ/PROBE/HELLO/EVENT/EVENT_ACK -> the
 * rank, BYE -> -1. */
int cm_frame_domain(const struct cm_frame *f);

/* Cut-through. After cm_session_received, and whenever
 * cm_session_next_frame returns 0, an engine asks cm_session_fill_domain:
 * a rank >= 0 means the payload s fills moved past a watermark a writer is
 * parked on, or completed; the engine then calls cm_session_fill_notify in
 * the DEST domain of that rank (it wakes those writers through hooks.wake,
 * OUTQ held) and goes on with cm_session_next_frame. -1: nothing due. */
int cm_session_fill_domain(const struct cm_session *s);
void cm_session_fill_notify(struct cm_session *s);
/* s is receiving the payload of a cut-through MSG: an engine that writes
 * on the reading thread should flush output between reads. */
int cm_session_filling(const struct cm_session *s);

/* Backpressure (cfg.mem): the next frame of s is a MSG whose payload the
 * log cannot take now. The engine stops reading s and calls
 * cm_session_input(s, 0) (or its locked equivalent) again a little later:
 * memory is freed by the log writer, by deliveries written out and by
 * collection, none of which needs s to be read. */
int cm_session_held(const struct cm_session *s);
/* Held because s's queued answers passed CM_OUTQ_CTRL_MAX (its peer does
 * not read them), or because its next frame is a receive that waits for
 * the read-backs queued to be written (logmem.h), not for memory the logs
 * can give back: writers draining queues is what frees it, so the engine
 * need not relieve the logs meanwhile. */
int cm_session_held_output(const struct cm_session *s);
/* While a sender is held, the engine offers every rank's log the chance to
 * give memory back (each call in DEST(rank)): delivered payloads past the
 * budget and undelivered ones near the bound go to the spill store. A rank
 * whose requests are queued behind a held MSG may be the one whose
 * messages fill the memory; nothing else would visit its log. */
void cm_core_relieve(struct cm_core *core, int rank);

/* Convenience for single-threaded engines: received + next_frame/dispatch
 * (and fill_notify) until no complete frame is left. */
void cm_session_input(struct cm_session *s, size_t n);

/* ---- output ---- */

/* Fills up to max iovecs with the unwritten output, in order; returns the
 * count. 0 = nothing to write now: nothing pending, or (cut-through) the
 * next byte is a payload byte that has not arrived yet -- the writer then
 * stops (disarms) until hooks.wake; it must not poll. */
int cm_session_out_iov(struct cm_session *s, struct iovec *iov, int max);
/* n bytes of that output were written. */
void cm_session_out_consumed(struct cm_session *s, size_t n);
/* Bytes queued and not yet written. */
size_t cm_session_out_pending(const struct cm_session *s);

#endif
