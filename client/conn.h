/* A non-blocking frame connection: the plumbing both client transports
 * share (rank -> channel memory, rank -> rank).
 *
 * Output: a queue of frames, each a 32-byte header plus a pointer to its
 * payload. Large payloads are written straight from the user's send buffer
 * (writev, no copy) and the owner hears of it (on_sent, with the token it
 * queued the frame with) once the kernel has taken the last byte; payloads
 * up to CM_COPY_LIMIT are copied when they cannot be written at once, so a
 * small isend completes immediately; the owner bounds how much it lets
 * queue up that way (CM_QUEUE_MAX).
 *
 * Input: frames are assembled from a staging buffer that survives any
 * partial read. For every frame the owner chooses where the payload goes
 * (a sink): a matched receive buffer, a fresh allocation, or a small
 * scratch area. Large payloads are read from the socket directly into the
 * sink, together with the next bytes of the stream (one recvmsg), so a message
 * whose receive is posted is never copied by us.
 *
 * Handshake: the connecting side queues HELLO and expects HELLO_ACK (or
 * ERROR) as the first frame back; the accepting side expects HELLO first.
 * An ERROR frame from the other side is printed with its code and text and
 * fails the connection.
 *
 * Retention (cm_conn_retain: a rank that survives its channel memory's
 * death): every MSG written is kept, header and payload, until a LOGGED
 * frame says the CM has logged it, so a connection that breaks can be
 * re-established (cm_conn_break, cm_conn_attach, cm_conn_resume) and the
 * unlogged messages re-sent whole. A kept payload is a copy, except for a
 * large message sent with a token: that one keeps pointing into the user's
 * buffer, and its on_sent comes with LOGGED. */
#ifndef CHANMEM_CONN_H
#define CHANMEM_CONN_H

#include <stddef.h>
#include <stdint.h>

#include "net.h" /* cm_now_ms */
#include "protocol.h"
#include "transport.h"

/* Sends up to this size may be copied into the queue to complete at once. */
#define CM_COPY_LIMIT (16u * 1024u)

/* Retention policy: a MSG asks for LOGGED (CM_F_ACK) when it is this large
 * (and then, sent with a token, its on_sent waits for LOGGED instead of its
 * payload being copied), or
 * when the messages since the last ask reach one of the other two bounds,
 * so one answer frees many. CM_RETAIN_MAX is the owner's bound on kept
 * bytes per connection, the payloads and a frame's bookkeeping each. */
#define CM_RETAIN_ACK_SIZE (64u * 1024u)
#define CM_RETAIN_ACK_BYTES (256u * 1024u)
#define CM_RETAIN_ACK_MSGS 32u
#define CM_RETAIN_MAX ((size_t)64 * 1024 * 1024)

/* The owner's bound on the memory of its queued, not yet written frames
 * (queued_total: copied payloads and every frame's block, so a stream of
 * tiny messages is bounded as well as a few large ones), over all of a
 * rank's connections: a send that finds more queued waits, progressing
 * every connection, until the kernel has taken enough. Without it a
 * rank whose small sends complete on a copy runs ahead of a slow reader
 * with no limit. */
#define CM_QUEUE_MAX ((size_t)16 * 1024 * 1024)

enum cm_conn_state {
	CM_CONN_AWAIT_ACK,   /* we said HELLO: HELLO_ACK or ERROR comes first */
	CM_CONN_AWAIT_HELLO, /* we accepted: the peer's first frame must be HELLO */
	CM_CONN_READY,
	CM_CONN_CLOSED, /* orderly end of stream at a frame boundary */
	CM_CONN_FAILED  /* error, printed once; the owner closes it */
};

/* Where the payload of an incoming frame goes. Bytes beyond cap are read
 * and dropped (truncation). kind and cookie are the owner's, handed back
 * with the completed frame. */
struct cm_sink {
	void *buf;
	size_t cap;
	int kind;
	void *cookie;
};

struct cm_conn;

struct cm_conn_ops {
	/* Accepting side: a decoded HELLO. Return CM_OK to accept (the owner
	 * then queues its HELLO_ACK), or a code to refuse: the connection sends
	 * ERROR(code, text) and fails. */
	enum cm_err (*on_hello)(struct cm_conn *c, const struct cm_header *h,
	                        const struct cm_hello *hello, char *text, size_t textlen);
	/* A validated header after the handshake: fill *sink (zeroed: drop the
	 * payload). Return 0, or -1 after cm_conn_fail/cm_conn_refuse. */
	int (*on_header)(struct cm_conn *c, const struct cm_header *h, struct cm_sink *sink);
	/* The whole payload is in the sink (min(len, cap) bytes stored). */
	int (*on_frame)(struct cm_conn *c, const struct cm_header *h, const struct cm_sink *sink);
	/* Optional: our HELLO was accepted (HELLO_ACK; its clock is in
	 * c->ack_clock). Return 0, or -1 after cm_conn_fail. */
	int (*on_ready)(struct cm_conn *c);
	/* The frame queued with token no longer needs its payload: it was
	 * fully written or copied, or, a retained MSG whose payload stays in
	 * the sender's buffer (CM_RETAIN_ACK_SIZE and up), the CM logged it.
	 * token is the owner's, opaque here. */
	void (*on_sent)(struct cm_conn *c, void *token);
};

struct cm_out; /* a queued frame (conn.c) */
#define CM_CONN_SPARES 4

struct cm_conn {
	int fd;
	enum cm_conn_state state;
	int self;      /* our rank, for messages and checks */
	int peer;      /* the other side's rank or CM index, the owner's to set */
	char name[96]; /* "channel memory 1 (127.0.0.1:4000)", "rank 3" */
	const struct cm_conn_ops *ops;
	void *owner;
	struct cm_limits lim;
	uint64_t ack_clock;   /* HELLO_ACK's clock */
	int shut;             /* write side shut down (finalize) */
	int accepted;         /* we accepted it: protocol errors are answered with ERROR */
	int poll_before_wait; /* a unix socket: cm_conn_read_wait polls first (conn.c) */
	int wait_limit_ms;    /* cm_conn_limit_wait's bound; -1: none */
	/* The peer's death is part of normal operation (a replica killed on
	 * purpose): a reset or a frame cut short ends the connection like an
	 * orderly close, with no error printed. */
	int peer_may_die;
	unsigned watching; /* the owner's record of the events it registered */

	int refused; /* the other side sent ERROR: the failure is its verdict */

	/* output */
	struct cm_out *out_head, *out_tail;
	int write_budget;                      /* frames flush may still write; -1: any number */
	struct cm_out *spares[CM_CONN_SPARES]; /* recycled small frame blocks (conn.c) */
	unsigned nspares;
	int wblocked; /* the kernel refused more: wait for POLLOUT */
	/* Memory of the frames in the output queue (conn.c: out_cost), and
	 * the owner's sum over its connections (cm_conn_count_into). */
	size_t queued_bytes;
	size_t *queued_total;

	/* input */
	uint8_t *in_buf;
	size_t in_start, in_end;
	int in_body; /* reading the payload of in_h */
	struct cm_header in_h;
	struct cm_sink in_sink;
	size_t in_got;
	uint8_t scratch[CM_ERROR_TEXT_MAX + 1];

	/* retention */
	int retain;
	struct cm_out *kept_head, *kept_tail; /* written MSGs not known to be logged,
	                                         in clock order */
	size_t kept_bytes;                    /* memory of every retained MSG, queued too: payload
	                                         and queue block (conn.c: kept_cost) */
	size_t ack_bytes;                     /* MSG bytes since the last CM_F_ACK */
	unsigned ack_msgs;
};

enum cm_io { CM_IO_ERR = -1, CM_IO_OK = 0, CM_IO_EOF = 1 };

/* Wraps a connected socket (left in blocking mode: every call but
 * cm_conn_read_wait passes MSG_DONTWAIT). state is AWAIT_ACK for a
 * connection we opened, AWAIT_HELLO for one we accepted. */
struct cm_conn *cm_conn_new(int fd, enum cm_conn_state state, int self, const char *name,
                            const struct cm_conn_ops *ops, void *owner,
                            const struct cm_limits *lim);
/* Closes the socket and frees queued and kept frames (their tokens are
 * never reported: only for teardown). */
void cm_conn_free(struct cm_conn *c);

/* Queues a frame (h->len is set from len) and tries to write at once.
 * token (may be NULL) is handed back through on_sent when the payload is
 * no longer needed; copy_ok lets a payload of at most CM_COPY_LIMIT be
 * copied so on_sent comes now. The payload must otherwise stay valid until
 * on_sent. Returns 0 or -1 (the connection failed; printed). */
int cm_conn_send(struct cm_conn *c, struct cm_header *h, const void *payload, size_t len,
                 void *token, int copy_ok);
/* Header-only or small control frame, always copied. Callers name the
 * fields they set (designated initializers); version and len are filled in
 * here, everything unnamed is 0. */
int cm_conn_send_ctl(struct cm_conn *c, const struct cm_header *h, const void *payload, size_t len);
/* The same, but only queued: the next send or flush writes it together
 * with what follows (one system call for a batch of small frames). */
int cm_conn_queue_ctl(struct cm_conn *c, const struct cm_header *h, const void *payload,
                      size_t len);
/* Queues a frame of at most CM_COPY_LIMIT payload bytes, copied: the
 * caller's buffer is free at once; the next send or flush writes it. */
int cm_conn_queue(struct cm_conn *c, struct cm_header *h, const void *payload, size_t len);
/* Queues our HELLO (connecting side); flags: 0 or CM_F_TAKEOVER. */
int cm_conn_send_hello(struct cm_conn *c, uint16_t flags, int src, int dst, unsigned incarnation,
                       unsigned world_size, unsigned kind, const char *secret);

/* Writes queued frames until done or the kernel pushes back. */
int cm_conn_flush(struct cm_conn *c);
/* Reads and dispatches everything available. CM_IO_EOF: the peer closed
 * cleanly at a frame boundary (state CLOSED, nothing printed). */
enum cm_io cm_conn_read(struct cm_conn *c);
/* The same, but sleeps in the kernel until the first bytes (or the end
 * of the stream) arrive: for a caller with nothing else to wait for. A
 * signal ends the wait early (CM_IO_OK). */
enum cm_io cm_conn_read_wait(struct cm_conn *c);
/* Bounds every later cm_conn_read_wait on c to about ms milliseconds
 * (SO_RCVTIMEO): with nothing read by then it returns CM_IO_OK. For an
 * owner that also watches other sockets and must look at them now and
 * then (the other reads pass MSG_DONTWAIT and are not affected). */
void cm_conn_limit_wait(struct cm_conn *c, int ms);
/* From now on c's queued_bytes is part of *total (its owner's sum over
 * its connections, which it bounds by CM_QUEUE_MAX), kept up to date as
 * frames are queued, written and dropped, and when c is freed. */
static inline void cm_conn_count_into(struct cm_conn *c, size_t *total)
{
	c->queued_total = total;
	*total += c->queued_bytes;
}
static inline int cm_conn_pending_output(const struct cm_conn *c)
{
	return c->out_head != NULL;
}
static inline int cm_conn_alive(const struct cm_conn *c)
{
	return c->state != CM_CONN_CLOSED && c->state != CM_CONN_FAILED;
}

/* The payload now being read (an unexpected message matched before all of
 * it arrived) moves to a new sink: the bytes read so far are copied there,
 * the rest goes there directly. The old buffer is no longer referenced. */
void cm_conn_redirect(struct cm_conn *c, const struct cm_sink *sink);

/* Prints "rank R: NAME: message" and fails the connection. Returns -1. */
int cm_conn_fail(struct cm_conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Sends ERROR(code, text) to the peer (best effort), prints, fails. */
int cm_conn_refuse(struct cm_conn *c, enum cm_err code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Shuts the write side once the queue is empty (orderly close). */
void cm_conn_shutdown(struct cm_conn *c);

/* Retention (see the top). Only for a connecting side's MSGs. */
void cm_conn_retain(struct cm_conn *c);
/* LOGGED(clock), or HELLO_ACK's clock: frees every kept MSG below clock
 * (on_sent for a token still waiting for that). */
void cm_conn_logged(struct cm_conn *c, uint64_t clock);
/* The connection ended (CLOSED or FAILED): the socket is closed, a partial
 * inbound frame is dropped, queued MSGs join the kept ones (to be re-sent
 * whole, even if partly written), other queued frames are dropped (the
 * owner re-creates what still matters). The connection stays usable:
 * frames queued from here on are held until cm_conn_resume. */
void cm_conn_break(struct cm_conn *c);
/* A new socket to the same peer for a broken connection: awaits HELLO_ACK
 * again; only the HELLO queued next is written until cm_conn_resume. */
int cm_conn_attach(struct cm_conn *c, int fd);
/* After HELLO_ACK on an attached connection: frames queued meanwhile are
 * sorted as cm_conn_break does, and kept MSGs below HELLO_ACK's clock are
 * freed. The owner then queues what must precede the re-sent messages,
 * calls cm_conn_resend, queues its re-posted requests, and cm_conn_release. */
void cm_conn_resume(struct cm_conn *c);
/* Queues every kept MSG again, in clock order; returns how many. */
unsigned cm_conn_resend(struct cm_conn *c);
/* Lets everything queued be written (ends the hold of cm_conn_attach). */
int cm_conn_release(struct cm_conn *c);
/* Queues a copy of a MSG the peer has already logged and that is not kept
 * again: a synchronous send re-sent only to get its SYNC_ACK again. */
int cm_conn_queue_again(struct cm_conn *c, struct cm_header *h, const void *payload, size_t len);

/* Requests by id (send clock or receive request id), chained through
 * t_next: O(1) lookups however many requests are outstanding. */
struct cm_reqmap {
	struct cm_req **buckets;
	size_t nbuckets; /* power of two */
	size_t count;
};
int cm_reqmap_put(struct cm_reqmap *m, struct cm_req *req);
struct cm_req *cm_reqmap_take(struct cm_reqmap *m, uint64_t id);
void cm_reqmap_free(struct cm_reqmap *m);
/* Every request of m, in increasing id order, in a new array of m->count
 * entries (NULL when empty or out of memory: *ok says which). */
struct cm_req **cm_reqmap_sorted(const struct cm_reqmap *m, int *ok);

#endif
