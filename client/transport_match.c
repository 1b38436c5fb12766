/* MPI matching queues shared by the direct and repl transports
 * (transport_match.h). */
#include <config.h>

#include <string.h>

#include "transport_common.h"
#include "transport_match.h"

int cm_match_accepts(const struct cm_req *r, int src, int tag, uint32_t ctx)
{
	return r->ctx == ctx && (r->peer == CM_ANY_SOURCE || r->peer == src) &&
	       (r->tag == CM_ANY_TAG || r->tag == tag);
}

void cm_match_set_status(struct cm_req *r, int src, int tag, size_t len)
{
	r->st_source = src;
	r->st_tag = tag;
	r->st_bytes = len;
	r->error = len > r->rcap ? CM_REQ_ERR_TRUNCATE : 0;
}

void cm_match_deliver_copy(struct cm_req *r, int src, int tag, const void *data, size_t len)
{
	cm_match_set_status(r, src, tag, len);
	size_t n = len < r->rcap ? len : r->rcap;
	if (n > 0)
		memcpy(r->rbuf, data, n);
	r->done = 1;
}

static void unlink_posted(struct cm_matchq *q, struct cm_req *r, struct cm_req *prev)
{
	if (prev)
		prev->t_next = r->t_next;
	else
		q->posted_head = r->t_next;
	if (q->posted_tail == r)
		q->posted_tail = prev;
	r->t_next = NULL;
}

struct cm_req *cm_match_take_posted(struct cm_matchq *q, int src, int tag, uint32_t ctx)
{
	struct cm_req *prev = NULL;
	for (struct cm_req *r = q->posted_head; r; prev = r, r = r->t_next) {
		if (cm_match_accepts(r, src, tag, ctx)) {
			unlink_posted(q, r, prev);
			return r;
		}
	}
	return NULL;
}

int cm_match_unpost(struct cm_matchq *q, struct cm_req *req)
{
	struct cm_req *prev = NULL;
	for (struct cm_req *r = q->posted_head; r; prev = r, r = r->t_next) {
		if (r == req) {
			unlink_posted(q, r, prev);
			return 1;
		}
	}
	return 0;
}

void cm_match_post(struct cm_matchq *q, struct cm_req *req)
{
	req->t_next = NULL;
	if (q->posted_tail)
		q->posted_tail->t_next = req;
	else
		q->posted_head = req;
	q->posted_tail = req;
}

void cm_match_post_first(struct cm_matchq *q, struct cm_req *req)
{
	req->t_next = q->posted_head;
	q->posted_head = req;
	if (q->posted_tail == NULL)
		q->posted_tail = req;
}

void cm_match_add_unexpected(struct cm_matchq *q, struct cm_msg *m)
{
	m->next = NULL;
	if (q->unexp_tail)
		q->unexp_tail->next = m;
	else
		q->unexp_head = m;
	q->unexp_tail = m;
}

void cm_match_unlink(struct cm_matchq *q, struct cm_msg *m, struct cm_msg *prev)
{
	if (prev)
		prev->next = m->next;
	else
		q->unexp_head = m->next;
	if (q->unexp_tail == m)
		q->unexp_tail = prev;
}

struct cm_msg *cm_match_take_unexpected(struct cm_matchq *q, const struct cm_req *req)
{
	struct cm_msg *prev = NULL;
	for (struct cm_msg *m = q->unexp_head; m; prev = m, m = m->next) {
		if (cm_match_accepts(req, m->src, m->tag, m->ctx)) {
			cm_match_unlink(q, m, prev);
			return m;
		}
	}
	return NULL;
}

int cm_match_find(const struct cm_matchq *q, int src, int tag, uint32_t ctx,
                  struct cm_probe_result *out)
{
	struct cm_req probe = {.peer = src, .tag = tag, .ctx = ctx};
	for (const struct cm_msg *m = q->unexp_head; m; m = m->next) {
		if (cm_match_accepts(&probe, m->src, m->tag, m->ctx)) {
			out->found = 1;
			out->source = m->src;
			out->tag = m->tag;
			out->bytes = m->len;
			return 1;
		}
	}
	return 0;
}

int cm_match_probe(struct cm_transport *t, const struct cm_matchq *q, int rank, int size, int src,
                   int tag, uint32_t ctx, int blocking, struct cm_probe_result *out)
{
	if (cm_check_probe(rank, size, src, tag) < 0)
		return -1;
	memset(out, 0, sizeof *out);
	out->source = out->tag = -1;
	if (cm_match_find(q, src, tag, ctx, out))
		return 0;
	if (!blocking) {
		/* MPI_Iprobe makes progress: look at what the sockets hold now. */
		if (t->progress(t, 0) < 0)
			return -1;
		cm_match_find(q, src, tag, ctx, out);
		return 0;
	}
	while (!cm_match_find(q, src, tag, ctx, out))
		if (t->progress(t, -1) < 0)
			return -1;
	return 0;
}
