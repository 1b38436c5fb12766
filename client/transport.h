/* The one interface every client transport implements (direct TCP mesh,
 * channel memory, and later replication). The MPI layer (mpi_*.c) speaks
 * only to this; a transport never sees MPI handles or datatypes, only
 * contiguous byte buffers and world ranks.
 *
 * Progress model: single-threaded (MPI_THREAD_FUNNELED at most). Nothing
 * happens in the background: the MPI layer calls progress() while it waits,
 * and progress() blocks in the kernel (poll/epoll, or recvmsg when only one
 * connection can produce anything) until some I/O could be done (never a busy
 * spin: a 2-core machine runs the ranks and the servers side by side). */
#ifndef CHANMEM_TRANSPORT_H
#define CHANMEM_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include "protocol.h" /* CM_ANY_SOURCE, CM_ANY_TAG */

enum cm_req_kind { CM_REQ_SEND = 1, CM_REQ_RECV = 2 };

/* A point-to-point operation in flight. Owned by the MPI layer (embedded
 * in its MPI_Request object); the transport links it into its own queues
 * through the t_* fields and must not touch it after completing it. */
struct cm_req {
	enum cm_req_kind kind;

	/* Set by the MPI layer before isend/irecv. */
	int peer;     /* send: destination world rank; recv: source world rank or CM_ANY_SOURCE */
	int tag;      /* send: tag >= 0; recv: tag or CM_ANY_TAG */
	uint32_t ctx; /* communicator context id: part of the matching key */
	const void *sbuf; /* send: bytes to send (must stay valid until done) */
	size_t slen;
	int sync;    /* send: synchronous (MPI_Ssend): done only once matched */
	void *rbuf;  /* recv: where the payload goes */
	size_t rcap; /* recv: capacity of rbuf in bytes */
	/* A collective's transfer, on the communicator's collective context:
	 * a receive names its source and tag and is never cancelled or
	 * probed, a send is not synchronous, and every transfer on that
	 * context is one. A transport may deliver these without being asked
	 * (the cm transport's CM pushes them). */
	int coll;

	/* Set by the transport. */
	volatile int done; /* 1 once complete: buffers may be reused */
	int error;         /* 0, or CM_REQ_ERR_TRUNCATE (recv payload longer than rcap:
	                      rcap bytes were stored, st_bytes is the full length) */
	int st_source;     /* recv: matched message's source world rank */
	int st_tag;        /* recv: matched message's tag */
	size_t st_bytes;   /* recv: matched message's length (may exceed rcap) */
	uint64_t id;       /* send: the message clock; recv: the request id */

	/* Transport-private bookkeeping. */
	struct cm_req *t_next;
	unsigned t_wait; /* send: CM_SEND_WAIT_* conditions still pending (transport_common.h) */
	/* repl recv, on a non-master replica: matching waits, because this is an
	 * MPI_ANY_SOURCE receive whose source the master has not chosen yet, or
	 * a receive posted after one such that could take the same messages. */
	int t_deferred;
};

#define CM_REQ_ERR_TRUNCATE 1

struct cm_probe_result {
	int found;
	int source;
	int tag;
	size_t bytes;
};

/* What a transport needs to start: parsed from the job environment
 * (common/jobenv.h) by client/env.c. */
/* Where a rank restored from a checkpoint image resumes: its next send
 * clock, next request id, and the number of its events the image already
 * consumed. */
struct cm_resume {
	uint64_t clock;
	uint64_t reqid;
	uint64_t events;
	/* Pushed messages (cm): the first push number not received, and the
	 * received ones no receive consumed yet (held_len bytes, in the
	 * transport's own format; owned by the transport, valid until its
	 * next snapshot). */
	uint64_t pushes;
	const void *held;
	size_t held_len;
	/* The MPI layer's (mpi_nondet.c fills them around the transport's
	 * snapshot): frames counted by the outcome log, the next non-blocking
	 * collective's id, and the non-blocking collectives started on
	 * MPI_COMM_WORLD and MPI_COMM_SELF (their tags). */
	uint32_t nd_frames, nbc_next_id, nbc_seq_world, nbc_seq_self;
};

struct cm_job {
	int rank;
	int size;
	unsigned incarnation;
	char secret[33];
	int ncms;
	char **cms; /* ncms "host:port" strings */
	/* ncms addresses of each CM's standby (CHANMEM_CM_STANDBYS), NULL
	 * entries for none; NULL when no CM has one */
	char **cm_standbys;
	int *home;     /* size entries: home CM index of every rank */
	char **peers;  /* direct: size "host:port" strings, or NULL */
	int listen_fd; /* direct: inherited listening socket, or -1 */
	/* repl: replica index, replica count, size * replicas "host:port"
	 * strings (index rank * replicas + replica) */
	int replica;
	int replicas;
	char **repl_peers;
	/* A checkpoint image's counters (set by MPI_Init before init), or NULL:
	 * start from the beginning. */
	const struct cm_resume *resume;
};

struct cm_transport {
	const char *name;
	/* Connects, authenticates. Returns 0 or -1 (after printing why). */
	int (*init)(struct cm_transport *t, const struct cm_job *job);
	/* Starts a send; may complete it at once (req->done = 1). */
	int (*isend)(struct cm_transport *t, struct cm_req *req);
	/* Posts a receive; matching obeys MPI order: per (source, tag, ctx)
	 * messages are matched in the order they were sent, and a message
	 * matches the earliest posted receive that accepts it. */
	int (*irecv)(struct cm_transport *t, struct cm_req *req);
	/* Is there a message a receive for (src, tag, ctx) would match now?
	 * blocking=1 waits until there is one (MPI_Probe). */
	int (*probe)(struct cm_transport *t, int src, int tag, uint32_t ctx, int blocking,
	             struct cm_probe_result *out);
	/* Moves data; waits at most timeout_ms (-1: until something happens,
	 * 0: poll only). Returns 0, or -1 on a fatal transport error. */
	int (*progress)(struct cm_transport *t, int timeout_ms);
	/* Flushes every queued send, says goodbye, closes. Collective
	 * synchronisation is the MPI layer's job (it calls a barrier first). */
	int (*finalize)(struct cm_transport *t);
	/* Optional (NULL: no fault tolerance, nothing logged). A
	 * nondeterministic outcome the rank is about to act on (enum
	 * cm_event_kind, value of len <= CM_EVENT_PAYLOAD_MAX bytes). A
	 * re-executing rank whose event log still has this event gets the
	 * logged value in *value and *replayed = 1; otherwise *value is logged
	 * as it is (at the rank's home CM, before anything the rank sends
	 * after this call) and *replayed = 0. Returns 0, or -1 after printing
	 * why (a replayed event of another kind: the re-execution diverged). */
	int (*event)(struct cm_transport *t, uint32_t kind, void *value, size_t len, int *replayed);
	/* With event (a transport that logs events without it replays
	 * non-blocking collectives only at decisions, which is not exact).
	 * What the next call of event would do, without
	 * doing it: 1 and *kind when it would return a logged event, 0 when it
	 * would log (the log has run out), -1 when that is not known yet (a
	 * replica waiting for its master's next event). Never blocks. */
	int (*event_peek)(struct cm_transport *t, uint32_t *kind);
	/* Optional (NULL: receives cannot be cancelled; they complete
	 * normally). MPI_Cancel of the posted receive req, not done yet:
	 * *cancelled = 1 when it was withdrawn before any message matched it
	 * (the transport has forgotten req and never completes it), 0 when it
	 * is too late (req completes normally, maybe already has). Under a
	 * fault-tolerant transport the outcome is logged and a re-execution
	 * gets the same one. Returns 0, or -1 after printing why. */
	int (*cancel)(struct cm_transport *t, struct cm_req *req, int *cancelled);
	/* Optional (NULL: this transport cannot resume from a checkpoint
	 * image). The counters an image must hold (client/ckpt_app.c), once
	 * everything sent so far is processed where it was sent: 0; 1 while a
	 * request is outstanding (nothing taken); 2 when the MPI layer is
	 * replaying inside a logged outcome (nothing taken, no error: the
	 * next call may); -1 after printing why. */
	int (*snapshot)(struct cm_transport *t, struct cm_resume *out);
	/* Optional. The image holding *state is committed: the home CM may
	 * drop the log entries and events it consumed (garbage collection). */
	void (*ckpt_committed)(struct cm_transport *t, const struct cm_resume *state);
	void *state;
};

/* Kinds of logged events (the EVENT frame's tag). */
enum cm_event_kind {
	CM_EV_WTIME = 1, /* an MPI_Wtime value: 8-byte LE IEEE double */
	/* 2: a cancel decision of the replication transport (REPL_EV_CANCEL) */
	CM_EV_TEST = 3,     /* a completion call's outcome (MPI_Test & co): 8-byte LE record,
	                       client/mpi_nondet.c */
	CM_EV_PROBE = 4,    /* a probe answer decided by a replication master: LE int32 source
	                       (-1: none), int32 tag (the cm transport's CM records probes) */
	CM_EV_REALTIME = 5, /* a wall-clock read of the program (gettimeofday, time):
	                       LE int64 nanoseconds since the epoch, client/libc_clocks.c */
	CM_EV_STDIN = 6,    /* a read of the program's stdin: LE u64 bytes returned (0: EOF),
	                       client/stdin_log.c */
};

/* Transport constructors: fill *t. */
void cm_transport_direct(struct cm_transport *t);
void cm_transport_cm(struct cm_transport *t);
void cm_transport_repl(struct cm_transport *t);

/* Reads the job environment into *job. A missing CHANMEM_RANK means a
 * singleton (rank 0 of 1, direct, no peers). Returns 0 or -1 after printing
 * which variable is wrong. */
int cm_job_from_env(struct cm_job *job, char *transport_name, size_t namelen);
void cm_job_free(struct cm_job *job);

#endif
