/* Internals of the direct transport shared by transport_direct.c
 * (connections, progress, life cycle) and transport_direct_match.c (the
 * posted-receive and unexpected-message queues). */
#ifndef CHANMEM_TRANSPORT_DIRECT_H
#define CHANMEM_TRANSPORT_DIRECT_H

#include <netinet/in.h>

#include "conn.h"
#include "transport.h"
#include "transport_common.h"
#include "transport_match.h"

/* A message that arrived before a receive matching it was posted. */
struct umsg {
	struct cm_msg m; /* first: the matching queue links these */
	int sync;
	uint64_t clock;
	void *data;               /* len bytes (ours), or the sender's buffer (self_sync) */
	int complete;             /* all of the payload is in data */
	struct cm_conn *conn;     /* where the rest of the payload is arriving */
	struct cm_conn *from;     /* where it came from: its SYNC_ACK goes back there */
	struct cm_req *self_sync; /* synchronous send to self, completes when matched */
};

/* What an incoming payload's sink cookie is. */
enum { SINK_REQ = 1, SINK_UMSG = 2 };

struct direct {
	int rank;
	int size;
	unsigned incarnation;
	char secret[33];
	struct cm_limits lim;
	struct sockaddr_in *addrs;
	int listen_fd;

	/* A pair of ranks shares one connection when it can: i sends to j on
	 * the connection i opened to j, or on the one j opened to i if that
	 * was there first. Either way all of i's messages to j take one TCP
	 * stream, and replies ride the same socket as the requests (a second
	 * socket per pair costs every message an extra pure-ACK segment). */
	struct cm_conn **link; /* [size] connection we send to each rank on */
	struct cm_conn **from; /* [size] connection each rank opened to us */
	char *gone;            /* [size] the rank closed its link (finalized) */
	/* A rank is settled once it can no longer open a connection to us
	 * (it has one, or it adopted ours: HELLO_ACK clock 0). With every
	 * rank settled and a single source, progress sleeps in recvmsg()
	 * on it instead of epoll_wait() + recvmsg() (single_source). */
	char *settled;
	int unsettled;
	struct cm_connset net;  /* every connection */
	size_t queued;          /* their queued_total (conn.h: CM_QUEUE_MAX) */
	long long last_poll_ms; /* the last epoll round (single_source) */
	/* progress(-1) polls without sleeping for up to spin_us first
	 * (spin_wait); happenings counts what a poll can bring (frames,
	 * writes done, connections), so the spin ends at the first one. */
	int spin_us;
	uint64_t happenings;

	struct cm_matchq match;
	struct cm_reqmap syncs; /* synchronous sends waiting for SYNC_ACK */

	uint64_t clock; /* one counter over all our messages */
	uint64_t reqid;
	int dead;
	int draining;
};

/* transport_direct_match.c */
int direct_msg_header(struct direct *s, struct cm_conn *c, const struct cm_header *h,
                      struct cm_sink *sink);
void direct_msg_complete(struct direct *s, const struct cm_sink *sink);
int direct_self_send(struct direct *s, struct cm_req *req);
int direct_post_recv(struct direct *s, struct cm_req *req);
void direct_conn_gone(struct direct *s, struct cm_conn *c);
void direct_free_queues(struct direct *s);

#endif
