/* Pieces every transport repeats: argument checks of the requests, the
 * start of a send, an epoll-watched set of connections, and finalize's
 * waits. */
#ifndef CHANMEM_TRANSPORT_COMMON_H
#define CHANMEM_TRANSPORT_COMMON_H

#include "conn.h"
#include "transport.h"

/* Resets req's outcome and checks a send's destination, tag and length
 * (with an error message): 0 if good, -1 if not. */
int cm_check_send(struct cm_req *req, int rank, int size);
/* Same for a receive's source, tag and buffer. */
int cm_check_recv(struct cm_req *req, int rank, int size);
/* A probe's source and tag. */
int cm_check_probe(int rank, int size, int src, int tag);

/* Send completion conditions kept in req->t_wait while a send is in flight;
 * the send is done once none is left. A retained MSG whose payload stays
 * in the user's buffer keeps WRITE until the CM has logged it (conn.h:
 * on_sent). */
#define CM_SEND_WAIT_WRITE 1u /* the connection still needs the payload */
#define CM_SEND_WAIT_ACK 2u   /* synchronous send not yet matched */

static inline void cm_send_settle(struct cm_req *req, unsigned condition)
{
	req->t_wait &= ~condition;
	if (req->t_wait == 0)
		req->done = 1; /* last touch: the MPI layer owns req from here */
}

/* Fills the MSG header of send req (its id is set: the header's clock) and
 * its waits: the write, and the SYNC_ACK of a synchronous send, which then
 * goes into syncs under its id. -1: out of memory. */
int cm_start_send(struct cm_req *req, int rank, struct cm_reqmap *syncs, struct cm_header *h);

/* Connections watched by one epoll instance; the listening socket, if
 * any, is registered with a NULL data pointer. */
struct cm_connset {
	int epfd;
	struct cm_conn **conns;
	size_t nconns, conns_cap;
};

/* How long finalize waits for queued output to reach the kernel. */
#define CM_FLUSH_TIMEOUT_MS 60000

/* Registers (or updates) what epoll reports for c. */
int cm_connset_watch(struct cm_connset *cs, struct cm_conn *c, unsigned events);
int cm_connset_add(struct cm_connset *cs, struct cm_conn *c, int rank);
/* Watches listening socket fd (made non-blocking, close-on-exec); -1 with
 * errno set on failure. */
int cm_connset_listen(struct cm_connset *cs, int fd);
/* Accepts every pending connection on listen_fd as one awaiting HELLO and
 * reads what it already holds. Accept errors are reported unless quiet. */
void cm_connset_accept(struct cm_connset *cs, int listen_fd, int rank,
                       const struct cm_conn_ops *ops, void *owner, const struct cm_limits *lim,
                       int quiet);
/* 1 if a live connection still has output queued. */
int cm_connset_output_pending(const struct cm_connset *cs);
/* Waits up to timeout_ms and services what epoll reports (the listening
 * socket through on_listen(owner)). -1: epoll_wait failed. */
int cm_connset_poll(struct cm_connset *cs, int rank, int timeout_ms, void (*on_listen)(void *),
                    void *owner);
/* Finalize: shuts every connection's write half and makes progress until
 * the far ends close too (or a time limit), clearing *failed each round:
 * errors no longer matter then. */
void cm_connset_drain(struct cm_transport *t, struct cm_connset *cs, int *failed);
/* Finalize of a mesh transport: waits (CM_FLUSH_TIMEOUT_MS) until
 * flushed(t->state), then sets *draining and drains. -1 if the wait failed
 * or *failed was set. */
int cm_connset_finish(struct cm_transport *t, struct cm_connset *cs, int rank,
                      int (*flushed)(void *state), int *failed, int *draining);
void cm_connset_free(struct cm_connset *cs);

/* Finalize: makes progress until done(t->state), at most timeout_ms; -1
 * (with "finalize: WHAT after N s") on timeout or when progress fails. */
int cm_wait_until(struct cm_transport *t, int rank, int (*done)(void *state), int timeout_ms,
                  const char *what);

#endif
