/* The progress engine and the waits: every MPI call that waits loops on
 * cm_mpi_progress or cm_mpi_req_wait, and a non-blocking collective starts
 * here. This is where the three pieces below meet: the requests
 * (mpi_request.c), the coroutines of the non-blocking collectives
 * (mpi_coll_nb_engine.c) and the log that decides when those go on
 * (mpi_nondet.c). None of them calls back up: the engine and the log are
 * asked from here at each point of the program's own flow. */
#include "mpi_coll_nb.h"
#include "mpi_test.h"

int cm_mpi_progress(int timeout_ms)
{
	/* Non-blocking collectives go on from the program's flow only: a
	 * coroutine never resumes another. One that went on may have made
	 * more work possible at once: no blocking then. */
	int nbc = !cm_nbc_inside() && cm_nbc_pending();
	if (nbc) {
		int resumed = cm_mpi_nd_nbc_point(0);
		if (resumed < 0)
			return -1;
		if (resumed > 0)
			timeout_ms = 0;
	}
	int rc = cm_mpi.transport.progress(&cm_mpi.transport, timeout_ms);
	cm_mpi_req_reap_detached();
	if (rc == 0 && nbc && cm_mpi_nd_nbc_point(0) < 0)
		return -1;
	return rc;
}

int cm_mpi_wait_point(void)
{
	if (cm_nbc_inside() || !cm_nbc_pending())
		return 0;
	return cm_mpi_nd_nbc_point(0) < 0 ? -1 : 0;
}

int cm_mpi_req_wait(struct cm_mpi_request *r)
{
	if (cm_nbc_inside())
		return cm_nbc_wait(r);
	if (cm_mpi_wait_point() < 0)
		return -1;
	while (!cm_mpi_req_poll(r))
		if (cm_mpi_progress(-1) < 0)
			return -1;
	return 0;
}

int cm_nbc_start(const char *func, MPI_Comm comm, cm_nbc_run_fn *run, const void *args, size_t len,
                 MPI_Request *request)
{
	CM_MPI_REQUIRE_INIT(func);
	struct cm_mpi_comm *c = cm_mpi_comm_get(comm);
	if (!c)
		return cm_mpi_raise(NULL, MPI_ERR_COMM, func);
	if (!request)
		return cm_mpi_raise(c, MPI_ERR_ARG, func);
	if (cm_nbc_inside() || len > CM_NBC_ARGS_MAX) /* cannot happen */
		return cm_mpi_raise(c, MPI_ERR_INTERN, func);
	/* The outcome log must count frames from a point every execution
	 * shares: here, at the latest (cm_mpi_nd_nbc_start sets it up). */
	if (cm_mpi_nd_nbc_start() < 0)
		return cm_mpi_raise(c, MPI_ERR_OTHER, func);
	return cm_nbc_launch(func, c, run, args, len, request);
}

/* ---- the MPI calls that wait for every request they are given ---- */

int MPI_Wait(MPI_Request *request, MPI_Status *status)
{
	CM_MPI_REQUIRE_INIT("MPI_Wait");
	if (!request)
		return cm_mpi_raise(NULL, MPI_ERR_REQUEST, "MPI_Wait");
	if (*request == MPI_REQUEST_NULL) {
		cm_mpi_status_empty(status);
		return MPI_SUCCESS;
	}
	struct cm_mpi_request *r = cm_mpi_req_get(*request);
	if (!r)
		return cm_mpi_raise(NULL, MPI_ERR_REQUEST, "MPI_Wait");
	if (cm_mpi_req_wait(r) < 0)
		return cm_mpi_raise(r->comm, MPI_ERR_OTHER, "MPI_Wait");
	return cm_mpi_finish_one(request, r, status, "MPI_Wait");
}

int MPI_Waitall(int count, MPI_Request array_of_requests[], MPI_Status array_of_statuses[])
{
	CM_MPI_REQUIRE_INIT("MPI_Waitall");
	int rc = cm_mpi_check_request_array(count, array_of_requests, "MPI_Waitall");
	if (rc)
		return rc;
	if (cm_mpi_wait_point() < 0)
		return cm_mpi_raise(NULL, MPI_ERR_OTHER, "MPI_Waitall");
	/* Requests complete roughly in order: skip the finished prefix so a
	 * long array is not rescanned after every progress step. */
	int first_pending = 0;
	for (;;) {
		while (first_pending < count) {
			struct cm_mpi_request *r = cm_mpi_req_get(array_of_requests[first_pending]);
			if (r && !cm_mpi_req_poll(r))
				break;
			first_pending++;
		}
		if (first_pending == count)
			break;
		if (cm_mpi_progress(-1) < 0) {
			struct cm_mpi_request *r = cm_mpi_req_get(array_of_requests[first_pending]);
			return cm_mpi_raise(r->comm, MPI_ERR_OTHER, "MPI_Waitall");
		}
	}
	return cm_mpi_finish_all(count, array_of_requests, array_of_statuses, "MPI_Waitall");
}
