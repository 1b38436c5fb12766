/* Persistent requests (MPI_Send_init & co, MPI_Start, MPI_Startall),
 * MPI_Cancel, MPI_Test_cancelled and MPI_Request_get_status.
 *
 * A persistent request is an ordinary request object that remembers its
 * arguments and, once completed, goes back to CM_RQ_INACTIVE instead of
 * being released (mpi_request.c); MPI_Start runs the same code paths as
 * the non-blocking calls (mpi_pt2pt.c).
 *
 * Cancel. Only receives can be cancelled, and only while no message has
 * matched them; the transport decides (struct cm_transport's cancel):
 * - direct: the receive is unlinked from this process's posted queue if
 *   no message header has matched it yet;
 * - cm: the channel memory that matches the rank's receives decides
 *   (CANCEL/CANCEL_ACK) and records the outcome, so a re-executed rank
 *   gets the same one (docs/protocol.md);
 * - repl: cancelled only if every live replica still has it posted (each
 *   votes to the master, which logs the decision for all of them).
 * When it is too late the receive completes normally with its message
 * (MPI_Test_cancelled says false), as MPI allows. A transport without a
 * cancel entry never cancels. A send is never cancelled: it completes
 * normally. */
#include <stdlib.h>
#include <string.h>

#include "mpi_internal.h"
#include "mpi_test.h"

/* ---- creating and starting ---- */

static int persistent_init(const void *buf, int count, MPI_Datatype datatype, int peer, int tag,
                           MPI_Comm comm, MPI_Request *request, enum cm_mpi_persist_mode mode,
                           const char *func)
{
	struct cm_mpi_comm *c = NULL;
	const struct cm_mpi_datatype *t;
	CM_MPI_REQUIRE_INIT(func);
	int rc = mode == CM_PERSIST_RECV
	             ? cm_mpi_check_recv(comm, buf, count, datatype, peer, tag, &c, &t)
	             : cm_mpi_check_send(comm, buf, count, datatype, peer, tag, &c, &t);
	if (!rc && !request)
		rc = MPI_ERR_ARG;
	struct cm_mpi_request *r = rc ? NULL : cm_mpi_req_alloc(c);
	if (!rc && !r)
		rc = MPI_ERR_NO_MEM;
	if (rc)
		return cm_mpi_raise(c, rc, func);
	r->persistent = 1;
	r->persist = (struct cm_mpi_persist){
	    .mode = mode, .buf = (void *)buf, .count = count, .type = t, .peer = peer, .tag = tag};
	cm_mpi_type_ref(t);
	cm_mpi_status_empty(&r->status);
	r->state = CM_RQ_INACTIVE;
	*request = r->handle;
	return MPI_SUCCESS;
}

int MPI_Send_init(const void *buf, int count, MPI_Datatype datatype, int dest, int tag,
                  MPI_Comm comm, MPI_Request *request)
{
	return persistent_init(buf, count, datatype, dest, tag, comm, request, CM_PERSIST_SEND,
	                       "MPI_Send_init");
}

int MPI_Ssend_init(const void *buf, int count, MPI_Datatype datatype, int dest, int tag,
                   MPI_Comm comm, MPI_Request *request)
{
	return persistent_init(buf, count, datatype, dest, tag, comm, request, CM_PERSIST_SSEND,
	                       "MPI_Ssend_init");
}

/* A ready send is a standard send here (see MPI_Rsend). */
int MPI_Rsend_init(const void *buf, int count, MPI_Datatype datatype, int dest, int tag,
                   MPI_Comm comm, MPI_Request *request)
{
	return persistent_init(buf, count, datatype, dest, tag, comm, request, CM_PERSIST_SEND,
	                       "MPI_Rsend_init");
}

int MPI_Bsend_init(const void *buf, int count, MPI_Datatype datatype, int dest, int tag,
                   MPI_Comm comm, MPI_Request *request)
{
	return persistent_init(buf, count, datatype, dest, tag, comm, request, CM_PERSIST_BSEND,
	                       "MPI_Bsend_init");
}

int MPI_Recv_init(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
                  MPI_Request *request)
{
	return persistent_init(buf, count, datatype, source, tag, comm, request, CM_PERSIST_RECV,
	                       "MPI_Recv_init");
}

int cm_mpi_start_persistent(struct cm_mpi_request *r)
{
	struct cm_mpi_persist *p = &r->persist;
	memset(&r->op, 0, sizeof r->op);
	memset(&r->status, 0, sizeof r->status);
	r->error = 0;
	r->ubuf = NULL;
	r->type = NULL;
	r->bounce = NULL;
	r->state = CM_RQ_ACTIVE;
	int rc;
	switch (p->mode) {
	case CM_PERSIST_RECV:
		rc = cm_mpi_launch_recv(r, p->buf, p->count, p->type, p->peer, p->tag,
		                        r->comm->ctx_pt2pt);
		break;
	case CM_PERSIST_BSEND:
		/* Done once copied: the request completes at once. */
		rc = cm_mpi_bsend_start(r->comm, p->buf, p->count, p->type, p->peer, p->tag);
		if (!rc) {
			cm_mpi_status_empty(&r->status);
			r->state = CM_RQ_COMPLETE;
		}
		break;
	default:
		rc = cm_mpi_launch_send(r, p->buf, p->count, p->type, p->peer, p->tag,
		                        r->comm->ctx_pt2pt, p->mode == CM_PERSIST_SSEND);
		break;
	}
	if (rc) {
		free(r->bounce);
		r->bounce = NULL;
		if (r->type)
			cm_mpi_type_unref(r->type);
		r->type = NULL;
		r->state = CM_RQ_INACTIVE;
	}
	return rc;
}

static struct cm_mpi_request *startable(MPI_Request handle)
{
	struct cm_mpi_request *r = cm_mpi_req_get(handle);
	return r && r->persistent && r->state == CM_RQ_INACTIVE ? r : NULL;
}

int MPI_Start(MPI_Request *request)
{
	CM_MPI_REQUIRE_INIT("MPI_Start");
	struct cm_mpi_request *r = request ? startable(*request) : NULL;
	if (!r)
		return cm_mpi_raise(NULL, MPI_ERR_REQUEST, "MPI_Start");
	int rc = cm_mpi_start_persistent(r);
	return rc ? cm_mpi_raise(r->comm, rc, "MPI_Start") : MPI_SUCCESS;
}

/* Every request is checked before any is started. */
int MPI_Startall(int count, MPI_Request array_of_requests[])
{
	CM_MPI_REQUIRE_INIT("MPI_Startall");
	if (count < 0 || (count > 0 && !array_of_requests))
		return cm_mpi_raise(NULL, MPI_ERR_ARG, "MPI_Startall");
	for (int i = 0; i < count; i++)
		if (!startable(array_of_requests[i]))
			return cm_mpi_raise(NULL, MPI_ERR_REQUEST, "MPI_Startall");
	for (int i = 0; i < count; i++) {
		struct cm_mpi_request *r = cm_mpi_req_get(array_of_requests[i]);
		if (r->state != CM_RQ_INACTIVE)
			continue; /* listed twice */
		int rc = cm_mpi_start_persistent(r);
		if (rc)
			return cm_mpi_raise(r->comm, rc, "MPI_Startall");
	}
	return MPI_SUCCESS;
}

/* ---- cancel ---- */

/* Withdraws a posted receive the transport has not matched yet: 1 if it
 * did (the transport has forgotten op), 0 if op completes normally, -1 on
 * a transport failure. */
static int transport_cancel_recv(struct cm_req *op)
{
	int cancelled = 0;
	if (cm_mpi.transport.cancel == NULL)
		return 0;
	if (cm_mpi.transport.cancel(&cm_mpi.transport, op, &cancelled) < 0)
		return -1;
	return cancelled;
}

int MPI_Cancel(MPI_Request *request)
{
	CM_MPI_REQUIRE_INIT("MPI_Cancel");
	struct cm_mpi_request *r = request ? cm_mpi_req_get(*request) : NULL;
	if (!r)
		return cm_mpi_raise(NULL, MPI_ERR_REQUEST, "MPI_Cancel");
	/* A receive that is done asks the transport too: whether it is done
	 * yet depends on timing, and a transport that logs its answer (repl)
	 * must be asked the same number of times by every replica. */
	if (r->state != CM_RQ_ACTIVE || r->op.kind != CM_REQ_RECV)
		return MPI_SUCCESS; /* completes (or completed) normally */
	int cancelled = transport_cancel_recv(&r->op);
	if (cancelled < 0)
		return cm_mpi_raise(r->comm, MPI_ERR_OTHER, "MPI_Cancel");
	if (!cancelled)
		return MPI_SUCCESS;
	free(r->bounce);
	r->bounce = NULL;
	if (r->type)
		cm_mpi_type_unref(r->type);
	r->type = NULL;
	cm_mpi_status_empty(&r->status);
	r->status.cm_cancelled = 1;
	r->error = MPI_SUCCESS;
	r->state = CM_RQ_COMPLETE;
	return MPI_SUCCESS;
}

int MPI_Test_cancelled(const MPI_Status *status, int *flag)
{
	CM_MPI_REQUIRE_INIT("MPI_Test_cancelled");
	if (!status || !flag)
		return cm_mpi_raise(NULL, MPI_ERR_ARG, "MPI_Test_cancelled");
	*flag = status->cm_cancelled != 0;
	return MPI_SUCCESS;
}

/* MPI_Test without completing: the request stays as it is. */
int MPI_Request_get_status(MPI_Request request, int *flag, MPI_Status *status)
{
	CM_MPI_REQUIRE_INIT("MPI_Request_get_status");
	if (!flag)
		return cm_mpi_raise(NULL, MPI_ERR_ARG, "MPI_Request_get_status");
	if (request == MPI_REQUEST_NULL) {
		*flag = 1;
		cm_mpi_status_empty(status);
		return MPI_SUCCESS;
	}
	struct cm_mpi_request *r = cm_mpi_req_get(request);
	if (!r)
		return cm_mpi_raise(NULL, MPI_ERR_REQUEST, "MPI_Request_get_status");
	if (cm_mpi_progress(0) < 0)
		return cm_mpi_raise(r->comm, MPI_ERR_OTHER, "MPI_Request_get_status");
	/* An outcome that depends on timing: logged, or taken from the log
	 * (mpi_nondet.c), like MPI_Test's. */
	if (cm_mpi_test_request(r, CM_ND_GET_STATUS, flag) < 0)
		return cm_mpi_raise(r->comm, MPI_ERR_OTHER, "MPI_Request_get_status");
	if (*flag && status) {
		status->MPI_SOURCE = r->status.MPI_SOURCE;
		status->MPI_TAG = r->status.MPI_TAG;
		status->cm_cancelled = r->status.cm_cancelled;
		status->cm_bytes = r->status.cm_bytes;
		if (r->error)
			status->MPI_ERROR = r->error;
	}
	return MPI_SUCCESS;
}
