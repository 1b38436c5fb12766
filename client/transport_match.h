/* MPI matching shared by the transports that match in the receiving rank
 * (direct, repl): posted receives in post order, unexpected messages in
 * arrival order, and the MPI order rules over both. When a message counts
 * as arrived is the transport's choice: direct offers it at its header,
 * repl only once all of it is there (and in its sender's order). */
#ifndef CHANMEM_TRANSPORT_MATCH_H
#define CHANMEM_TRANSPORT_MATCH_H

#include "conn.h"
#include "transport.h"

/* What matching needs of an unexpected message; a transport's own record
 * starts with it. */
struct cm_msg {
	struct cm_msg *next;
	int src;
	int tag;
	uint32_t ctx;
	size_t len;
};

struct cm_matchq {
	struct cm_req *posted_head, *posted_tail;
	struct cm_msg *unexp_head, *unexp_tail;
};

int cm_match_accepts(const struct cm_req *r, int src, int tag, uint32_t ctx);
/* Fills r's status for a message from src with tag and len bytes. */
void cm_match_set_status(struct cm_req *r, int src, int tag, size_t len);
/* Copies what fits of data into r's buffer; sets its status, completes it. */
void cm_match_deliver_copy(struct cm_req *r, int src, int tag, const void *data, size_t len);

/* The earliest posted receive that accepts the message, unlinked; or NULL. */
struct cm_req *cm_match_take_posted(struct cm_matchq *q, int src, int tag, uint32_t ctx);
/* Takes req out of the posted queue: 1 if it was there. */
int cm_match_unpost(struct cm_matchq *q, struct cm_req *req);
void cm_match_post(struct cm_matchq *q, struct cm_req *req);
/* Posts req ahead of every other: it was the earliest that accepts a
 * message whose delivery was cut short, and takes it when it comes again. */
void cm_match_post_first(struct cm_matchq *q, struct cm_req *req);

void cm_match_add_unexpected(struct cm_matchq *q, struct cm_msg *m);
/* The earliest unexpected message req accepts, unlinked; or NULL. */
struct cm_msg *cm_match_take_unexpected(struct cm_matchq *q, const struct cm_req *req);
/* Unlinks m, which follows prev (NULL: m is the head). */
void cm_match_unlink(struct cm_matchq *q, struct cm_msg *m, struct cm_msg *prev);
/* Probe: fills out from the earliest matching unexpected message, 1 if any. */
int cm_match_find(const struct cm_matchq *q, int src, int tag, uint32_t ctx,
                  struct cm_probe_result *out);

/* The probe operation of a transport that matches in the rank: checks the
 * arguments, then looks in q, making progress (t->progress) until found
 * when blocking, once when not. */
int cm_match_probe(struct cm_transport *t, const struct cm_matchq *q, int rank, int size, int src,
                   int tag, uint32_t ctx, int blocking, struct cm_probe_result *out);

#endif
