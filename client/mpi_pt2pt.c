/* Point-to-point: argument validation, the start of sends and receives on
 * the transport, and the blocking and non-blocking MPI calls built on
 * them. Ranks are translated to world ranks here; the transport sees world
 * ranks, a context id and packed bytes only. */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_coll_nb.h"
#include "mpi_internal.h"
#include "protocol.h"

/* ---- validation (returns an error class, raising is the caller's) ---- */

static int check_data(MPI_Comm comm, const void *buf, int count, MPI_Datatype datatype,
                      struct cm_mpi_comm **c, const struct cm_mpi_datatype **t)
{
	*c = cm_mpi_comm_get(comm);
	if (!*c)
		return MPI_ERR_COMM;
	if (count < 0)
		return MPI_ERR_COUNT;
	/* MPI_IN_PLACE is for collectives only; as a point-to-point buffer it
	 * would be dereferenced. */
	if (buf == MPI_IN_PLACE)
		return MPI_ERR_BUFFER;
	*t = cm_mpi_type_get(datatype);
	if (!*t || !(*t)->committed)
		return MPI_ERR_TYPE;
	/* NULL is MPI_BOTTOM: a valid buffer only for a derived type, whose
	 * displacements may be absolute addresses (MPI_Get_address). */
	if (count > 0 && !buf && !(*t)->derived)
		return MPI_ERR_BUFFER;
	if ((*t)->size > 0 && (size_t)count > SIZE_MAX / (*t)->size)
		return MPI_ERR_COUNT;
	return MPI_SUCCESS;
}

int cm_mpi_check_send(MPI_Comm comm, const void *buf, int count, MPI_Datatype datatype, int dest,
                      int tag, struct cm_mpi_comm **c, const struct cm_mpi_datatype **t)
{
	int rc = check_data(comm, buf, count, datatype, c, t);
	if (rc)
		return rc;
	/* One message is one frame: its payload has a protocol ceiling. */
	if ((size_t)count * (*t)->size > CM_MAX_PAYLOAD)
		return MPI_ERR_COUNT;
	if (tag < 0 || tag > CM_MPI_TAG_UB)
		return MPI_ERR_TAG;
	if (dest != MPI_PROC_NULL && (dest < 0 || dest >= cm_mpi_peer_count(*c)))
		return MPI_ERR_RANK;
	return MPI_SUCCESS;
}

int cm_mpi_check_source_tag(const struct cm_mpi_comm *c, int source, int tag)
{
	if (tag != MPI_ANY_TAG && (tag < 0 || tag > CM_MPI_TAG_UB))
		return MPI_ERR_TAG;
	if (source != MPI_ANY_SOURCE && source != MPI_PROC_NULL &&
	    (source < 0 || source >= cm_mpi_peer_count(c)))
		return MPI_ERR_RANK;
	return MPI_SUCCESS;
}

int cm_mpi_check_recv(MPI_Comm comm, const void *buf, int count, MPI_Datatype datatype, int source,
                      int tag, struct cm_mpi_comm **c, const struct cm_mpi_datatype **t)
{
	int rc = check_data(comm, buf, count, datatype, c, t);
	return rc ? rc : cm_mpi_check_source_tag(*c, source, tag);
}

/* ---- starting operations ---- */

int cm_mpi_launch_send_bytes(struct cm_mpi_request *r, const void *data, size_t len, void *bounce,
                             int peer, int tag, uint32_t ctx, int sync)
{
	r->bounce = bounce;
	r->op.kind = CM_REQ_SEND;
	if (peer == MPI_PROC_NULL) {
		cm_mpi_status_proc_null(&r->status);
		free(r->bounce);
		r->bounce = NULL;
		r->state = CM_RQ_COMPLETE;
		return MPI_SUCCESS;
	}
	r->op.peer = cm_mpi_peer_world(r->comm, peer);
	r->op.tag = tag;
	r->op.ctx = ctx;
	r->op.sbuf = data;
	r->op.slen = len;
	r->op.sync = sync;
	r->op.coll = ctx == r->comm->ctx_coll;
	if (cm_mpi.transport.isend(&cm_mpi.transport, &r->op) < 0) {
		free(r->bounce);
		r->bounce = NULL;
		return MPI_ERR_OTHER;
	}
	return MPI_SUCCESS;
}

int cm_mpi_launch_send(struct cm_mpi_request *r, const void *buf, int count,
                       const struct cm_mpi_datatype *type, int peer, int tag, uint32_t ctx,
                       int sync)
{
	size_t len = (size_t)count * type->size;
	if (type->contiguous || peer == MPI_PROC_NULL)
		return cm_mpi_launch_send_bytes(r, cm_mpi_addr(buf, type->lb), len, NULL, peer, tag,
		                                ctx, sync);
	void *bounce = malloc(len ? len : 1);
	if (!bounce)
		return MPI_ERR_NO_MEM;
	cm_mpi_pack(type, buf, (size_t)count, bounce);
	return cm_mpi_launch_send_bytes(r, bounce, len, bounce, peer, tag, ctx, sync);
}

int cm_mpi_launch_recv(struct cm_mpi_request *r, void *buf, int count,
                       const struct cm_mpi_datatype *type, int peer, int tag, uint32_t ctx)
{
	r->op.kind = CM_REQ_RECV;
	if (peer == MPI_PROC_NULL) {
		cm_mpi_status_proc_null(&r->status);
		r->state = CM_RQ_COMPLETE;
		return MPI_SUCCESS;
	}
	size_t len = (size_t)count * type->size;
	r->ubuf = buf;
	if (type->contiguous) {
		r->op.rbuf = cm_mpi_addr(buf, type->lb);
	} else {
		r->bounce = malloc(len ? len : 1);
		if (!r->bounce)
			return MPI_ERR_NO_MEM;
		r->op.rbuf = r->bounce;
		r->type = type;
		cm_mpi_type_ref(type);
	}
	r->op.rcap = len;
	r->op.peer = peer == MPI_ANY_SOURCE ? CM_ANY_SOURCE : cm_mpi_peer_world(r->comm, peer);
	r->op.tag = tag == MPI_ANY_TAG ? CM_ANY_TAG : tag;
	r->op.ctx = ctx;
	r->op.coll = ctx == r->comm->ctx_coll;
	if (cm_mpi.transport.irecv(&cm_mpi.transport, &r->op) < 0)
		return MPI_ERR_OTHER;
	return MPI_SUCCESS;
}

int cm_mpi_start_send(struct cm_mpi_comm *c, const void *buf, int count,
                      const struct cm_mpi_datatype *type, int peer, int tag, uint32_t ctx, int sync,
                      struct cm_mpi_request **out)
{
	if (cm_nbc_tag_bias && ctx == c->ctx_coll)
		tag += cm_nbc_tag_bias;
	struct cm_mpi_request *r = cm_mpi_req_alloc(c);
	if (!r)
		return MPI_ERR_NO_MEM;
	int rc = cm_mpi_launch_send(r, buf, count, type, peer, tag, ctx, sync);
	if (rc) {
		cm_mpi_req_release(r);
		return rc;
	}
	*out = r;
	return MPI_SUCCESS;
}

int cm_mpi_start_recv(struct cm_mpi_comm *c, void *buf, int count,
                      const struct cm_mpi_datatype *type, int peer, int tag, uint32_t ctx,
                      struct cm_mpi_request **out)
{
	if (cm_nbc_tag_bias && ctx == c->ctx_coll)
		tag += cm_nbc_tag_bias;
	struct cm_mpi_request *r = cm_mpi_req_alloc(c);
	if (!r)
		return MPI_ERR_NO_MEM;
	int rc = cm_mpi_launch_recv(r, buf, count, type, peer, tag, ctx);
	if (rc) {
		cm_mpi_req_release(r);
		return rc;
	}
	*out = r;
	return MPI_SUCCESS;
}

int cm_mpi_exchange(struct cm_mpi_comm *c, const void *sbuf, size_t slen, int to, void *rbuf,
                    size_t rlen, int from, int tag, uint32_t ctx, MPI_Status *st, int *in_flight)
{
	const struct cm_mpi_datatype *bytes = cm_mpi_type_get(MPI_BYTE);
	struct cm_mpi_request *rr, *rs;
	*in_flight = 0;
	if (slen > INT_MAX || rlen > INT_MAX)
		return MPI_ERR_COUNT;
	int rc = cm_mpi_start_recv(c, rbuf, (int)rlen, bytes, from, tag, ctx, &rr);
	if (rc)
		return rc;
	rc = cm_mpi_start_send(c, sbuf, (int)slen, bytes, to, tag, ctx, 0, &rs);
	if (rc) {
		cm_mpi_req_detach(rr);
		*in_flight = 1;
		return rc;
	}
	if (cm_mpi_req_wait(rs) < 0 || cm_mpi_req_wait(rr) < 0) {
		cm_mpi_req_detach(rs);
		cm_mpi_req_detach(rr);
		*in_flight = 1;
		return MPI_ERR_OTHER;
	}
	int send_err = cm_mpi_req_finish(rs, NULL);
	int recv_err = cm_mpi_req_finish(rr, st);
	return send_err ? send_err : recv_err;
}

/* Waits for r and completes it: the tail of every blocking call. If the
 * transport fails, r is left to finish (or not) in the background. */
static int complete_blocking(struct cm_mpi_request *r, MPI_Status *status, const char *func)
{
	struct cm_mpi_comm *c = r->comm;
	if (cm_mpi_req_wait(r) < 0) {
		cm_mpi_req_detach(r);
		return cm_mpi_raise(c, MPI_ERR_OTHER, func);
	}
	int err = cm_mpi_req_finish(r, status);
	return err ? cm_mpi_raise(c, err, func) : MPI_SUCCESS;
}

/* ---- sends ---- */

static int send_blocking(const void *buf, int count, MPI_Datatype datatype, int dest, int tag,
                         MPI_Comm comm, int sync, const char *func)
{
	struct cm_mpi_comm *c = NULL;
	const struct cm_mpi_datatype *t;
	struct cm_mpi_request *r;
	CM_MPI_REQUIRE_INIT(func);
	int rc = cm_mpi_check_send(comm, buf, count, datatype, dest, tag, &c, &t);
	if (!rc)
		rc = cm_mpi_start_send(c, buf, count, t, dest, tag, c->ctx_pt2pt, sync, &r);
	if (rc)
		return cm_mpi_raise(c, rc, func);
	return complete_blocking(r, MPI_STATUS_IGNORE, func);
}

int MPI_Send(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm)
{
	return send_blocking(buf, count, datatype, dest, tag, comm, 0, "MPI_Send");
}

int MPI_Ssend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm)
{
	return send_blocking(buf, count, datatype, dest, tag, comm, 1, "MPI_Ssend");
}

/* A ready send is a correct standard send (the matching receive is
 * posted, so nothing is lost by not exploiting it). */
int MPI_Rsend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm)
{
	return send_blocking(buf, count, datatype, dest, tag, comm, 0, "MPI_Rsend");
}

static int send_nonblocking(const void *buf, int count, MPI_Datatype datatype, int dest, int tag,
                            MPI_Comm comm, int sync, MPI_Request *request, const char *func)
{
	struct cm_mpi_comm *c = NULL;
	const struct cm_mpi_datatype *t;
	struct cm_mpi_request *r;
	CM_MPI_REQUIRE_INIT(func);
	int rc = cm_mpi_check_send(comm, buf, count, datatype, dest, tag, &c, &t);
	if (!rc && !request)
		rc = MPI_ERR_ARG;
	if (!rc)
		rc = cm_mpi_start_send(c, buf, count, t, dest, tag, c->ctx_pt2pt, sync, &r);
	if (rc)
		return cm_mpi_raise(c, rc, func);
	*request = r->handle;
	return MPI_SUCCESS;
}

int MPI_Isend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
              MPI_Request *request)
{
	return send_nonblocking(buf, count, datatype, dest, tag, comm, 0, request, "MPI_Isend");
}

int MPI_Issend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
               MPI_Request *request)
{
	return send_nonblocking(buf, count, datatype, dest, tag, comm, 1, request, "MPI_Issend");
}

int MPI_Irsend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
               MPI_Request *request)
{
	return send_nonblocking(buf, count, datatype, dest, tag, comm, 0, request, "MPI_Irsend");
}

/* ---- receives ---- */

int MPI_Recv(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
             MPI_Status *status)
{
	struct cm_mpi_comm *c = NULL;
	const struct cm_mpi_datatype *t;
	struct cm_mpi_request *r;
	CM_MPI_REQUIRE_INIT("MPI_Recv");
	int rc = cm_mpi_check_recv(comm, buf, count, datatype, source, tag, &c, &t);
	if (!rc)
		rc = cm_mpi_start_recv(c, buf, count, t, source, tag, c->ctx_pt2pt, &r);
	if (rc)
		return cm_mpi_raise(c, rc, "MPI_Recv");
	return complete_blocking(r, status, "MPI_Recv");
}

int MPI_Irecv(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
              MPI_Request *request)
{
	struct cm_mpi_comm *c = NULL;
	const struct cm_mpi_datatype *t;
	struct cm_mpi_request *r;
	CM_MPI_REQUIRE_INIT("MPI_Irecv");
	int rc = cm_mpi_check_recv(comm, buf, count, datatype, source, tag, &c, &t);
	if (!rc && !request)
		rc = MPI_ERR_ARG;
	if (!rc)
		rc = cm_mpi_start_recv(c, buf, count, t, source, tag, c->ctx_pt2pt, &r);
	if (rc)
		return cm_mpi_raise(c, rc, "MPI_Irecv");
	*request = r->handle;
	return MPI_SUCCESS;
}

/* Both halves are posted before either is waited for, so a ring of
 * Sendrecv calls cannot deadlock whatever the transport buffers. */
static int sendrecv_wait(struct cm_mpi_request *rs, struct cm_mpi_request *rr, MPI_Status *status,
                         const char *func)
{
	struct cm_mpi_comm *c = rr->comm;
	if (cm_mpi_req_wait(rs) < 0 || cm_mpi_req_wait(rr) < 0) {
		if (rs->state == CM_RQ_COMPLETE)
			cm_mpi_req_release(rs);
		else
			cm_mpi_req_detach(rs);
		cm_mpi_req_detach(rr);
		return cm_mpi_raise(c, MPI_ERR_OTHER, func);
	}
	int send_err = cm_mpi_req_finish(rs, MPI_STATUS_IGNORE);
	int recv_err = cm_mpi_req_finish(rr, status);
	int err = send_err ? send_err : recv_err;
	return err ? cm_mpi_raise(c, err, func) : MPI_SUCCESS;
}

int MPI_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                 void *recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
                 MPI_Comm comm, MPI_Status *status)
{
	struct cm_mpi_comm *c = NULL;
	const struct cm_mpi_datatype *st, *rt;
	struct cm_mpi_request *rs, *rr;
	CM_MPI_REQUIRE_INIT("MPI_Sendrecv");
	int rc = cm_mpi_check_send(comm, sendbuf, sendcount, sendtype, dest, sendtag, &c, &st);
	if (!rc)
		rc =
		    cm_mpi_check_recv(comm, recvbuf, recvcount, recvtype, source, recvtag, &c, &rt);
	if (!rc)
		rc = cm_mpi_start_recv(c, recvbuf, recvcount, rt, source, recvtag, c->ctx_pt2pt,
		                       &rr);
	if (rc)
		return cm_mpi_raise(c, rc, "MPI_Sendrecv");
	rc = cm_mpi_start_send(c, sendbuf, sendcount, st, dest, sendtag, c->ctx_pt2pt, 0, &rs);
	if (rc) {
		cm_mpi_req_detach(rr);
		return cm_mpi_raise(c, rc, "MPI_Sendrecv");
	}
	return sendrecv_wait(rs, rr, status, "MPI_Sendrecv");
}

int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype datatype, int dest, int sendtag,
                         int source, int recvtag, MPI_Comm comm, MPI_Status *status)
{
	struct cm_mpi_comm *c = NULL;
	const struct cm_mpi_datatype *t;
	struct cm_mpi_request *rs, *rr;
	CM_MPI_REQUIRE_INIT("MPI_Sendrecv_replace");
	int rc = cm_mpi_check_send(comm, buf, count, datatype, dest, sendtag, &c, &t);
	if (!rc)
		rc = cm_mpi_check_source_tag(c, source, recvtag);
	if (rc)
		return cm_mpi_raise(c, rc, "MPI_Sendrecv_replace");
	/* The outgoing items are copied first: the receive overwrites buf. */
	size_t len = (size_t)count * t->size;
	void *copy = malloc(len ? len : 1);
	if (!copy)
		return cm_mpi_raise(c, MPI_ERR_NO_MEM, "MPI_Sendrecv_replace");
	cm_mpi_pack(t, buf, (size_t)count, copy);
	rc = cm_mpi_start_recv(c, buf, count, t, source, recvtag, c->ctx_pt2pt, &rr);
	if (rc) {
		free(copy);
		return cm_mpi_raise(c, rc, "MPI_Sendrecv_replace");
	}
	rs = cm_mpi_req_alloc(c);
	rc = rs ? cm_mpi_launch_send_bytes(rs, copy, len, copy, dest, sendtag, c->ctx_pt2pt, 0)
	        : MPI_ERR_NO_MEM;
	if (rc) {
		if (rs)
			cm_mpi_req_release(rs);
		else
			free(copy);
		cm_mpi_req_detach(rr);
		return cm_mpi_raise(c, rc, "MPI_Sendrecv_replace");
	}
	return sendrecv_wait(rs, rr, status, "MPI_Sendrecv_replace");
}

/* ---- probes ---- */

int cm_mpi_probe(MPI_Comm comm, int source, int tag, int blocking, int args_ok, int *flag,
                 MPI_Status *status, struct cm_mpi_comm **cp, struct cm_probe_result *res,
                 const char *func)
{
	struct cm_mpi_comm *c = cm_mpi_comm_get(comm);
	if (!c)
		return cm_mpi_raise(NULL, MPI_ERR_COMM, func);
	int rc = cm_mpi_check_source_tag(c, source, tag);
	if (!rc && (!args_ok || (!blocking && !flag)))
		rc = MPI_ERR_ARG;
	if (rc)
		return cm_mpi_raise(c, rc, func);
	*cp = c;
	*res = (struct cm_probe_result){0};
	if (source == MPI_PROC_NULL) {
		if (flag)
			*flag = 1;
		cm_mpi_status_proc_null(status);
		return MPI_SUCCESS;
	}
	struct cm_transport *tr = &cm_mpi.transport;
	int peer = source == MPI_ANY_SOURCE ? CM_ANY_SOURCE : cm_mpi_peer_world(c, source);
	if (!blocking && cm_mpi_progress(0) < 0)
		return cm_mpi_raise(c, MPI_ERR_OTHER, func);
	if (tr->probe(tr, peer, tag == MPI_ANY_TAG ? CM_ANY_TAG : tag, c->ctx_pt2pt, blocking,
	              res) < 0)
		return cm_mpi_raise(c, MPI_ERR_OTHER, func);
	if (flag)
		*flag = res->found;
	if (res->found && status) {
		status->MPI_SOURCE = cm_mpi_peer_rank_of(c, res->source);
		status->MPI_TAG = res->tag;
		status->cm_cancelled = 0;
		status->cm_bytes = (MPI_Count)res->bytes;
	}
	return MPI_SUCCESS;
}

static int probe(int source, int tag, MPI_Comm comm, int blocking, int *flag, MPI_Status *status,
                 const char *func)
{
	struct cm_mpi_comm *c;
	struct cm_probe_result res;
	return cm_mpi_probe(comm, source, tag, blocking, 1, flag, status, &c, &res, func);
}

int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *status)
{
	CM_MPI_REQUIRE_INIT("MPI_Probe");
	return probe(source, tag, comm, 1, NULL, status, "MPI_Probe");
}

int MPI_Iprobe(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status)
{
	CM_MPI_REQUIRE_INIT("MPI_Iprobe");
	return probe(source, tag, comm, 0, flag, status, "MPI_Iprobe");
}
