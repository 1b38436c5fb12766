/* The completion calls whose outcome depends on timing (MPI_Test,
 * MPI_Testany, MPI_Testall, MPI_Testsome, MPI_Waitany, MPI_Waitsome,
 * MPI_Request_get_status: mpi_test.c), the request-array helpers they share
 * with MPI_Wait and MPI_Waitall (mpi_progress.c), and the log of their
 * outcomes (mpi_nondet.c).
 *
 * Whether a request is complete when a Test looks depends on when its
 * DELIVER (or its write) happened: a re-executed rank, whose DELIVERs are
 * replayed at once, would see other outcomes and take another path. Under a
 * transport with an `event` hook every such outcome is therefore an event
 * (kind CM_EV_TEST): the first execution logs what it decided, a
 * re-execution (or a replica that is not the master) takes the logged
 * outcome and waits for exactly the requests it names. */
#ifndef CHANMEM_MPI_TEST_H
#define CHANMEM_MPI_TEST_H

#include "mpi_internal.h"

/* ---- request arrays (mpi_request.c) ---- */

/* Validates count and every handle (null allowed). An MPI error code,
 * raised on func. */
CM_HIDDEN int cm_mpi_check_request_array(int count, const MPI_Request reqs[], const char *func);
/* An active or complete request, or NULL for a null or inactive one (the
 * any/some calls ignore both; their outcome is not timing-dependent). */
CM_HIDDEN struct cm_mpi_request *cm_mpi_active_req(MPI_Request handle);
/* Finishes one complete request: its status out, the handle becomes
 * MPI_REQUEST_NULL unless persistent, its error raised on func. */
CM_HIDDEN int cm_mpi_finish_one(MPI_Request *handle, struct cm_mpi_request *r, MPI_Status *status,
                                const char *func);
/* Finishes every request of the array (all complete or null);
 * MPI_ERR_IN_STATUS if any failed. */
CM_HIDDEN int cm_mpi_finish_all(int count, MPI_Request reqs[], MPI_Status statuses[],
                                const char *func);

/* ---- one request (mpi_test.c) ---- */

/* Is r (a live request, not MPI_REQUEST_NULL) complete? The decision of
 * MPI_Test and MPI_Request_get_status (call is CM_ND_TEST or
 * CM_ND_GET_STATUS): decided here and logged, or taken from the log, in
 * which case "complete" waits until r is. Does not finish r. Sets *flag;
 * returns 0, or -1 if the transport failed (r unchanged). */
CM_HIDDEN int cm_mpi_test_request(struct cm_mpi_request *r, int call, int *flag);

/* ---- the outcome log (mpi_nondet.c) ---- */

/* Which call an outcome belongs to (logged with it: a re-execution that
 * makes another call at that point has diverged). */
enum cm_nd_call {
	CM_ND_TEST = 1,
	CM_ND_TESTALL = 2,
	CM_ND_TESTANY = 3,
	CM_ND_WAITANY = 4,
	CM_ND_TESTSOME = 5,
	CM_ND_WAITSOME = 6,
	CM_ND_GET_STATUS = 7,
	/* A non-blocking collective's coroutine resumed (mpi_coll_nb.h): bits
	 * 8-31 its id, bits 32-63 the frames the rank had produced. */
	CM_ND_NBC_STEP = 8,
	/* No more steps before the next frame (bits 32-63 the frames the
	 * rank had produced): logged before a frame that follows a point at
	 * which a collective was pending, since whether it went on there was
	 * decided by timing. */
	CM_ND_NBC_MARK = 9
};

/* One outcome: value -1 = nothing complete (a failed poll), otherwise the
 * index the call completes (0 for Test, Testall, Request_get_status); for
 * Testsome/Waitsome one element of the set, more = another follows. */
struct cm_nd_elem {
	int value;
	int more;
};

/* Does the transport log outcomes (it has an `event` hook)? The first call
 * sets the log up. 0 for the direct transport: its calls decide live, at no
 * cost. */
CM_HIDDEN int cm_mpi_nd_on(void);
/* A rank restored from a checkpoint image: the MPI layer's counters go on
 * from the image's (after MPI_COMM_WORLD and MPI_COMM_SELF exist). */
CM_HIDDEN void cm_mpi_nd_resume(const struct cm_resume *r);
/* The outcome of one call (for a set: its first element). *e in: what the
 * call sees now; out: what it must do (the logged outcome when replaying).
 * Returns 0, or -1 if the transport failed (after printing why). An outcome
 * the call cannot take (another call's, a wait told nothing completed)
 * ends the process (cm_mpi_nd_diverged). */
CM_HIDDEN int cm_mpi_nd_first(enum cm_nd_call call, struct cm_nd_elem *e);
/* The next element of a set whose previous element had more set. *e in:
 * the caller's candidate (the next element it decided itself; when
 * replaying, one that is complete now and not in the set yet, because a log
 * cut short by the failure makes it the element logged); out: the element. */
CM_HIDDEN int cm_mpi_nd_next(enum cm_nd_call call, struct cm_nd_elem *e);
/* Outcomes still come from the log (a re-execution that has not caught up,
 * or a replica that is not the master). */
CM_HIDDEN int cm_mpi_nd_replaying(void);
/* A logged outcome the program cannot take: the re-execution diverged.
 * Prints why and aborts the job (as MPI_Abort: cmrun does not restart it). */
CM_HIDDEN void cm_mpi_nd_diverged(const char *func, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 2, 3)));
/* Name of a call, for messages. */
CM_HIDDEN const char *cm_mpi_nd_call_name(int call);

#endif
