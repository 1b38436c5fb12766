/* The completion calls whose outcome depends on timing: MPI_Test,
 * MPI_Testall, MPI_Testany, MPI_Waitany, MPI_Testsome, MPI_Waitsome (and,
 * through cm_mpi_test_request, MPI_Request_get_status).
 *
 * Each decides live first (what is complete now), then, under a transport
 * that logs events, hands its decision to the outcome log (mpi_nondet.c),
 * which logs it or replaces it by the logged one. A logged "nothing
 * complete" is returned even if something is complete now; a logged
 * "complete" (a request, an index, a set) is waited for. A call whose
 * requests are all null or inactive has a fixed outcome and logs nothing. */
#include <stdio.h>
#include <stdlib.h>

#include "mpi_test.h"

int cm_mpi_test_request(struct cm_mpi_request *r, int call, int *flag)
{
	int done = cm_mpi_req_poll(r);
	if (r->state == CM_RQ_INACTIVE || !cm_mpi_nd_on()) {
		*flag = done;
		return 0;
	}
	struct cm_nd_elem e = {.value = done ? 0 : -1};
	if (cm_mpi_nd_first(call, &e) < 0)
		return -1;
	if (e.value < 0) {
		*flag = 0;
		return 0;
	}
	if (!done && cm_mpi_req_wait(r) < 0)
		return -1;
	*flag = 1;
	return 0;
}

int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status)
{
	CM_MPI_REQUIRE_INIT("MPI_Test");
	if (!request)
		return cm_mpi_raise(NULL, MPI_ERR_REQUEST, "MPI_Test");
	if (!flag)
		return cm_mpi_raise(NULL, MPI_ERR_ARG, "MPI_Test");
	if (*request == MPI_REQUEST_NULL) {
		*flag = 1;
		cm_mpi_status_empty(status);
		return MPI_SUCCESS;
	}
	struct cm_mpi_request *r = cm_mpi_req_get(*request);
	if (!r)
		return cm_mpi_raise(NULL, MPI_ERR_REQUEST, "MPI_Test");
	if (cm_mpi_progress(0) < 0 || cm_mpi_test_request(r, CM_ND_TEST, flag) < 0)
		return cm_mpi_raise(r->comm, MPI_ERR_OTHER, "MPI_Test");
	if (!*flag)
		return MPI_SUCCESS;
	return cm_mpi_finish_one(request, r, status, "MPI_Test");
}

/* Waits for every request of the array. 0, or -1 if the transport failed. */
static int wait_all(int count, MPI_Request reqs[])
{
	for (int i = 0; i < count; i++) {
		struct cm_mpi_request *r = cm_mpi_req_get(reqs[i]);
		if (r && cm_mpi_req_wait(r) < 0)
			return -1;
	}
	return 0;
}

int MPI_Testall(int count, MPI_Request array_of_requests[], int *flag,
                MPI_Status array_of_statuses[])
{
	CM_MPI_REQUIRE_INIT("MPI_Testall");
	int rc = cm_mpi_check_request_array(count, array_of_requests, "MPI_Testall");
	if (rc)
		return rc;
	if (!flag)
		return cm_mpi_raise(NULL, MPI_ERR_ARG, "MPI_Testall");
	if (cm_mpi_progress(0) < 0)
		return cm_mpi_raise(NULL, MPI_ERR_OTHER, "MPI_Testall");
	int all_done = 1, timing = 0;
	for (int i = 0; i < count; i++) {
		struct cm_mpi_request *r = cm_mpi_req_get(array_of_requests[i]);
		if (!r)
			continue;
		if (r->state != CM_RQ_INACTIVE)
			timing = 1;
		if (!cm_mpi_req_poll(r))
			all_done = 0;
	}
	*flag = 0;
	if (timing && cm_mpi_nd_on()) {
		struct cm_nd_elem e = {.value = all_done ? 0 : -1};
		if (cm_mpi_nd_first(CM_ND_TESTALL, &e) < 0)
			return cm_mpi_raise(NULL, MPI_ERR_OTHER, "MPI_Testall");
		if (e.value < 0)
			return MPI_SUCCESS;
		if (!all_done && wait_all(count, array_of_requests) < 0)
			return cm_mpi_raise(NULL, MPI_ERR_OTHER, "MPI_Testall");
	} else if (!all_done) {
		return MPI_SUCCESS;
	}
	*flag = 1;
	return cm_mpi_finish_all(count, array_of_requests, array_of_statuses, "MPI_Testall");
}

/* The first complete request of the array: its index, MPI_UNDEFINED if
 * all are null or inactive, or -1 if some are still pending. */
static int find_complete(int count, MPI_Request reqs[])
{
	int live = 0;
	for (int i = 0; i < count; i++) {
		struct cm_mpi_request *r = cm_mpi_active_req(reqs[i]);
		if (!r)
			continue;
		live++;
		if (cm_mpi_req_poll(r))
			return i;
	}
	return live ? -1 : MPI_UNDEFINED;
}

/* A logged index must name an active request of the array; it is waited
 * for. 0, or -1 if the transport failed. */
static int take_index(int count, MPI_Request reqs[], int index, const char *func)
{
	struct cm_mpi_request *r = index < count ? cm_mpi_active_req(reqs[index]) : NULL;
	if (!r)
		cm_mpi_nd_diverged(func, "request %d of %d %s", index, count,
		                   index < count ? "is null or inactive" : "does not exist");
	return cm_mpi_req_wait(r);
}

/* Testany/Waitany: the live index i (-1: none complete) replaced by the
 * logged one when replaying. 0, or -1 if the transport failed. */
static int decide_index(enum cm_nd_call call, int count, MPI_Request reqs[], int *i)
{
	if (*i == MPI_UNDEFINED || !cm_mpi_nd_on())
		return 0;
	struct cm_nd_elem e = {.value = *i};
	if (cm_mpi_nd_first(call, &e) < 0)
		return -1;
	if (e.value >= 0 && e.value != *i &&
	    take_index(count, reqs, e.value, cm_mpi_nd_call_name(call)) < 0)
		return -1;
	*i = e.value;
	return 0;
}

int MPI_Waitany(int count, MPI_Request array_of_requests[], int *index, MPI_Status *status)
{
	CM_MPI_REQUIRE_INIT("MPI_Waitany");
	int rc = cm_mpi_check_request_array(count, array_of_requests, "MPI_Waitany");
	if (rc)
		return rc;
	if (!index)
		return cm_mpi_raise(NULL, MPI_ERR_ARG, "MPI_Waitany");
	int i;
	while ((i = find_complete(count, array_of_requests)) == -1)
		if (cm_mpi_progress(-1) < 0)
			return cm_mpi_raise(NULL, MPI_ERR_OTHER, "MPI_Waitany");
	if (decide_index(CM_ND_WAITANY, count, array_of_requests, &i) < 0)
		return cm_mpi_raise(NULL, MPI_ERR_OTHER, "MPI_Waitany");
	*index = i;
	if (i == MPI_UNDEFINED) {
		cm_mpi_status_empty(status);
		return MPI_SUCCESS;
	}
	return cm_mpi_finish_one(&array_of_requests[i], cm_mpi_req_get(array_of_requests[i]),
	                         status, "MPI_Waitany");
}

int MPI_Testany(int count, MPI_Request array_of_requests[], int *index, int *flag,
                MPI_Status *status)
{
	CM_MPI_REQUIRE_INIT("MPI_Testany");
	int rc = cm_mpi_check_request_array(count, array_of_requests, "MPI_Testany");
	if (rc)
		return rc;
	if (!index || !flag)
		return cm_mpi_raise(NULL, MPI_ERR_ARG, "MPI_Testany");
	if (cm_mpi_progress(0) < 0)
		return cm_mpi_raise(NULL, MPI_ERR_OTHER, "MPI_Testany");
	int i = find_complete(count, array_of_requests);
	if (decide_index(CM_ND_TESTANY, count, array_of_requests, &i) < 0)
		return cm_mpi_raise(NULL, MPI_ERR_OTHER, "MPI_Testany");
	if (i == -1) {
		*flag = 0;
		*index = MPI_UNDEFINED;
		return MPI_SUCCESS;
	}
	*flag = 1;
	*index = i;
	if (i == MPI_UNDEFINED) {
		cm_mpi_status_empty(status);
		return MPI_SUCCESS;
	}
	return cm_mpi_finish_one(&array_of_requests[i], cm_mpi_req_get(array_of_requests[i]),
	                         status, "MPI_Testany");
}

/* Collects the complete requests into indices. Returns how many, or
 * MPI_UNDEFINED if every request is null or inactive. */
static int collect_complete(int count, MPI_Request reqs[], int indices[])
{
	int live = 0, done = 0;
	for (int i = 0; i < count; i++) {
		struct cm_mpi_request *r = cm_mpi_active_req(reqs[i]);
		if (!r)
			continue;
		live++;
		if (cm_mpi_req_poll(r))
			indices[done++] = i;
	}
	return live ? done : MPI_UNDEFINED;
}

/* Replaying a set whose log broke off (the failure cut it short): the next
 * element is ours to choose, and must be complete. Waits until an active
 * request outside the set is; its index, or -1 if the transport failed. */
static int candidate(int count, MPI_Request reqs[], const char *in_set, const char *func)
{
	for (;;) {
		int outside = 0;
		for (int i = 0; i < count; i++) {
			struct cm_mpi_request *r = in_set[i] ? NULL : cm_mpi_active_req(reqs[i]);
			if (!r)
				continue;
			outside++;
			if (cm_mpi_req_poll(r))
				return i;
		}
		if (!outside)
			cm_mpi_nd_diverged(func, "the logged set has more elements than there are "
			                         "active requests");
		if (cm_mpi_progress(-1) < 0)
			return -1;
	}
}

/* Following the log: the logged set, first element in *e, into indices[],
 * validated (in range, active, no repeat) and waited for. Its size, or -1
 * if the transport failed. */
static int follow_set(enum cm_nd_call call, int count, MPI_Request reqs[], int indices[],
                      struct cm_nd_elem e)
{
	const char *func = cm_mpi_nd_call_name(call);
	char *in_set = calloc((size_t)count, 1);
	if (!in_set) {
		fprintf(stderr, "chanmem: rank %d: %s: out of memory\n", cm_mpi.world_rank, func);
		return -1;
	}
	int n = 0, rc = 0;
	for (;;) {
		int v = e.value;
		if (v >= count || in_set[v] || !cm_mpi_active_req(reqs[v]))
			cm_mpi_nd_diverged(func, "request %d of %d %s", v, count,
			                   v >= count  ? "does not exist"
			                   : in_set[v] ? "is in the set twice"
			                               : "is null or inactive");
		in_set[v] = 1;
		indices[n++] = v;
		if (!e.more)
			break;
		int next = candidate(count, reqs, in_set, func);
		e = (struct cm_nd_elem){.value = next};
		if (next < 0 || cm_mpi_nd_next(call, &e) < 0) {
			rc = -1;
			break;
		}
	}
	free(in_set);
	for (int k = 0; k < n && rc == 0; k++)
		rc = cm_mpi_req_wait(cm_mpi_req_get(reqs[indices[k]]));
	return rc < 0 ? -1 : n;
}

/* Testsome/Waitsome: the live set (done elements of indices[]) logged, or
 * replaced by the logged one. Returns the set's size (0: nothing complete),
 * or -1 if the transport failed. */
static int decide_set(enum cm_nd_call call, int count, MPI_Request reqs[], int indices[], int done)
{
	struct cm_nd_elem e = {.value = done > 0 ? indices[0] : -1, .more = done > 1};
	if (cm_mpi_nd_first(call, &e) < 0)
		return -1;
	if (e.value < 0)
		return 0;
	if (cm_mpi_nd_replaying())
		return follow_set(call, count, reqs, indices, e);
	for (int k = 1; k < done; k++) {
		e = (struct cm_nd_elem){.value = indices[k], .more = k + 1 < done};
		if (cm_mpi_nd_next(call, &e) < 0)
			return -1;
	}
	return done;
}

static int finish_some(int done, MPI_Request reqs[], const int indices[], MPI_Status statuses[],
                       const char *func)
{
	struct cm_mpi_comm *err_comm = NULL;
	for (int k = 0; k < done && !err_comm; k++) {
		struct cm_mpi_request *r = cm_mpi_req_get(reqs[indices[k]]);
		if (r && r->error)
			err_comm = r->comm;
	}
	if (err_comm)
		cm_mpi_comm_ref(err_comm);
	for (int k = 0; k < done; k++) {
		MPI_Status *st = statuses == MPI_STATUSES_IGNORE ? NULL : &statuses[k];
		struct cm_mpi_request *r = cm_mpi_req_get(reqs[indices[k]]);
		if (!r) { /* a handle listed twice */
			cm_mpi_status_empty(st);
			continue;
		}
		if (!r->persistent)
			reqs[indices[k]] = MPI_REQUEST_NULL;
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

static int check_some_args(int incount, MPI_Request reqs[], int *outcount, int indices[],
                           const char *func)
{
	int rc = cm_mpi_check_request_array(incount, reqs, func);
	if (rc)
		return rc;
	if (!outcount || (incount > 0 && !indices))
		return cm_mpi_raise(NULL, MPI_ERR_ARG, func);
	return MPI_SUCCESS;
}

int MPI_Waitsome(int incount, MPI_Request array_of_requests[], int *outcount,
                 int array_of_indices[], MPI_Status array_of_statuses[])
{
	CM_MPI_REQUIRE_INIT("MPI_Waitsome");
	int rc =
	    check_some_args(incount, array_of_requests, outcount, array_of_indices, "MPI_Waitsome");
	if (rc)
		return rc;
	int done;
	while ((done = collect_complete(incount, array_of_requests, array_of_indices)) == 0)
		if (cm_mpi_progress(-1) < 0)
			return cm_mpi_raise(NULL, MPI_ERR_OTHER, "MPI_Waitsome");
	if (done != MPI_UNDEFINED && cm_mpi_nd_on() &&
	    (done = decide_set(CM_ND_WAITSOME, incount, array_of_requests, array_of_indices,
	                       done)) < 0)
		return cm_mpi_raise(NULL, MPI_ERR_OTHER, "MPI_Waitsome");
	*outcount = done;
	if (done == MPI_UNDEFINED)
		return MPI_SUCCESS;
	return finish_some(done, array_of_requests, array_of_indices, array_of_statuses,
	                   "MPI_Waitsome");
}

int MPI_Testsome(int incount, MPI_Request array_of_requests[], int *outcount,
                 int array_of_indices[], MPI_Status array_of_statuses[])
{
	CM_MPI_REQUIRE_INIT("MPI_Testsome");
	int rc =
	    check_some_args(incount, array_of_requests, outcount, array_of_indices, "MPI_Testsome");
	if (rc)
		return rc;
	if (cm_mpi_progress(0) < 0)
		return cm_mpi_raise(NULL, MPI_ERR_OTHER, "MPI_Testsome");
	int done = collect_complete(incount, array_of_requests, array_of_indices);
	if (done != MPI_UNDEFINED && cm_mpi_nd_on() &&
	    (done = decide_set(CM_ND_TESTSOME, incount, array_of_requests, array_of_indices,
	                       done)) < 0)
		return cm_mpi_raise(NULL, MPI_ERR_OTHER, "MPI_Testsome");
	*outcount = done;
	if (done == MPI_UNDEFINED || done == 0)
		return MPI_SUCCESS;
	return finish_some(done, array_of_requests, array_of_indices, array_of_statuses,
	                   "MPI_Testsome");
}
