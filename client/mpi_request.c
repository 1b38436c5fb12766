/* Requests: the handle table, completion of what the transport finished,
 * the detached requests, the request-array helpers of the completion calls
 * and MPI_Request_free. Nothing here waits: the waits and the progress hook
 * are in mpi_progress.c, the Test family, Waitany and Waitsome in
 * mpi_test.c.
 *
 * A request object is allocated once and never moves (the transport links
 * its struct cm_req into its queues); the table maps handle indexes to
 * objects, and released objects are reused through a free list, so a
 * blocking MPI_Send costs no malloc in the steady state. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "heartbeat.h"
#include "mpi_test.h"
#include "vec.h"

static CM_VEC(struct cm_mpi_request *) slots;
static struct cm_mpi_request *free_list;     /* linked through next_detached */
static struct cm_mpi_request *detached_list; /* Request_free'd while active */

struct cm_mpi_request *cm_mpi_req_alloc(struct cm_mpi_comm *c)
{
	struct cm_mpi_request *r = free_list;
	if (r) {
		free_list = r->next_detached;
	} else {
		if (slots.n > CM_HANDLE_INDEX_MAX || !cm_vec_reserve(&slots, slots.n + 1))
			return NULL;
		r = calloc(1, sizeof *r);
		if (!r)
			return NULL;
		r->handle = (MPI_Request)(CM_KIND_REQUEST | slots.n);
		slots.items[slots.n++] = r;
	}
	MPI_Request handle = r->handle;
	memset(r, 0, sizeof *r);
	r->handle = handle;
	r->state = CM_RQ_ACTIVE;
	r->comm = c;
	/* A plain load and store (one writer): no locked instruction. */
	atomic_store_explicit(&cm_progress,
	                      atomic_load_explicit(&cm_progress, memory_order_relaxed) + 1,
	                      memory_order_relaxed);
	if (c)
		cm_mpi_comm_ref(c);
	return r;
}

void cm_mpi_req_release(struct cm_mpi_request *r)
{
	free(r->bounce);
	r->bounce = NULL;
	if (r->type)
		cm_mpi_type_unref(r->type);
	r->type = NULL;
	if (r->persistent && r->persist.type)
		cm_mpi_type_unref(r->persist.type);
	r->persistent = 0;
	if (r->comm)
		cm_mpi_comm_unref(r->comm);
	r->comm = NULL;
	r->state = CM_RQ_FREE;
	r->detached = 0;
	r->next_detached = free_list;
	free_list = r;
}

struct cm_mpi_request *cm_mpi_req_get(MPI_Request handle)
{
	if (CM_HANDLE_KIND(handle) != CM_KIND_REQUEST)
		return NULL;
	unsigned index = CM_HANDLE_INDEX(handle);
	if (index >= slots.n)
		return NULL;
	struct cm_mpi_request *r = slots.items[index];
	if (r->state == CM_RQ_FREE || r->detached)
		return NULL;
	return r;
}

/* The transport finished r: build the MPI status, unpack a bounced
 * receive. */
static void complete(struct cm_mpi_request *r)
{
	struct cm_req *op = &r->op;
	if (op->kind == CM_REQ_RECV) {
		size_t stored = op->st_bytes < op->rcap ? op->st_bytes : op->rcap;
		if (r->matched && stored > r->ucap) {
			stored = r->ucap;
			op->error = CM_REQ_ERR_TRUNCATE;
		}
		if (r->bounce)
			cm_mpi_unpack(r->type, r->bounce, stored, r->ubuf);
		if (r->type)
			cm_mpi_type_unref(r->type);
		r->type = NULL;
		r->status.MPI_SOURCE = cm_mpi_peer_rank_of(r->comm, op->st_source);
		r->status.MPI_TAG = op->st_tag;
		r->status.MPI_ERROR = MPI_SUCCESS;
		r->status.cm_cancelled = 0;
		r->status.cm_bytes = (MPI_Count)stored;
		if (op->error == CM_REQ_ERR_TRUNCATE)
			r->error = MPI_ERR_TRUNCATE;
		else if (op->error)
			r->error = MPI_ERR_INTERN;
	} else {
		cm_mpi_status_empty(&r->status);
		if (op->error)
			r->error = MPI_ERR_INTERN;
	}
	free(r->bounce);
	r->bounce = NULL;
	r->state = CM_RQ_COMPLETE;
}

int cm_mpi_req_poll(struct cm_mpi_request *r)
{
	if (r->state == CM_RQ_COMPLETE || r->state == CM_RQ_INACTIVE)
		return 1;
	if (r->state == CM_RQ_ACTIVE && r->op.done) {
		complete(r);
		return 1;
	}
	return 0;
}

int cm_mpi_req_finish(struct cm_mpi_request *r, MPI_Status *st)
{
	int error = r->error;
	/* MPI_ERROR is left alone: only the multiple-completion calls set it,
	 * and only when they return MPI_ERR_IN_STATUS. */
	if (st) {
		st->MPI_SOURCE = r->status.MPI_SOURCE;
		st->MPI_TAG = r->status.MPI_TAG;
		st->cm_cancelled = r->status.cm_cancelled;
		st->cm_bytes = r->status.cm_bytes;
	}
	if (r->persistent) {
		/* Ready to be started again; waiting on it now returns at once
		 * with an empty status, as MPI says for an inactive request. */
		r->state = CM_RQ_INACTIVE;
		r->error = 0;
		cm_mpi_status_empty(&r->status);
	} else {
		cm_mpi_req_release(r);
	}
	return error;
}

void cm_mpi_req_detach(struct cm_mpi_request *r)
{
	r->detached = 1;
	r->next_detached = detached_list;
	detached_list = r;
}

void cm_mpi_req_reap_detached(void)
{
	struct cm_mpi_request **link = &detached_list;
	while (*link) {
		struct cm_mpi_request *r = *link;
		if (cm_mpi_req_poll(r)) {
			*link = r->next_detached;
			cm_mpi_req_release(r);
		} else {
			link = &r->next_detached;
		}
	}
}

void cm_mpi_req_shutdown(void)
{
	for (size_t i = 0; i < slots.n; i++) {
		free(slots.items[i]->bounce);
		free(slots.items[i]);
	}
	cm_vec_free(&slots);
	free_list = detached_list = NULL;
}

/* ---- request arrays (mpi_test.h) and MPI_Request_free ---- */

int cm_mpi_check_request_array(int count, const MPI_Request reqs[], const char *func)
{
	if (count < 0)
		return cm_mpi_raise(NULL, MPI_ERR_COUNT, func);
	if (count > 0 && !reqs)
		return cm_mpi_raise(NULL, MPI_ERR_REQUEST, func);
	for (int i = 0; i < count; i++)
		if (reqs[i] != MPI_REQUEST_NULL && !cm_mpi_req_get(reqs[i]))
			return cm_mpi_raise(NULL, MPI_ERR_REQUEST, func);
	return MPI_SUCCESS;
}

struct cm_mpi_request *cm_mpi_active_req(MPI_Request handle)
{
	struct cm_mpi_request *r = cm_mpi_req_get(handle);
	return r && r->state != CM_RQ_INACTIVE ? r : NULL;
}

int cm_mpi_finish_one(MPI_Request *handle, struct cm_mpi_request *r, MPI_Status *status,
                      const char *func)
{
	struct cm_mpi_comm *c = r->comm; /* kept alive for the error handler */
	if (!r->persistent)
		*handle = MPI_REQUEST_NULL;
	cm_mpi_comm_ref(c);
	int err = cm_mpi_req_finish(r, status);
	int rc = err ? cm_mpi_raise(c, err, func) : MPI_SUCCESS;
	cm_mpi_comm_unref(c);
	return rc;
}

/* An error on any request puts every status's MPI_ERROR in play
 * (MPI_ERR_IN_STATUS). */
int cm_mpi_finish_all(int count, MPI_Request reqs[], MPI_Status statuses[], const char *func)
{
	struct cm_mpi_comm *err_comm = NULL;
	for (int i = 0; i < count && !err_comm; i++) {
		struct cm_mpi_request *r = cm_mpi_req_get(reqs[i]);
		if (r && r->error)
			err_comm = r->comm;
	}
	if (err_comm)
		cm_mpi_comm_ref(err_comm);
	for (int i = 0; i < count; i++) {
		MPI_Status *st = statuses == MPI_STATUSES_IGNORE ? NULL : &statuses[i];
		struct cm_mpi_request *r = cm_mpi_req_get(reqs[i]);
		if (!r) { /* MPI_REQUEST_NULL (or a handle listed twice) */
			cm_mpi_status_empty(st);
			continue;
		}
		if (!r->persistent)
			reqs[i] = MPI_REQUEST_NULL;
		int err = cm_mpi_req_finish(r, st);
		if (err_comm && st)
			st->MPI_ERROR = err;
	}
	if (!err_comm)
		return MPI_SUCCESS;
	int rc = cm_mpi_raise(err_comm, MPI_ERR_IN_STATUS, func);
	cm_mpi_comm_unref(err_comm);
	return rc;
}

int MPI_Request_free(MPI_Request *request)
{
	CM_MPI_REQUIRE_INIT("MPI_Request_free");
	struct cm_mpi_request *r = request ? cm_mpi_req_get(*request) : NULL;
	if (!r)
		return cm_mpi_raise(NULL, MPI_ERR_REQUEST, "MPI_Request_free");
	if (cm_mpi_req_poll(r))
		cm_mpi_req_release(r);
	else
		cm_mpi_req_detach(r);
	*request = MPI_REQUEST_NULL;
	return MPI_SUCCESS;
}
