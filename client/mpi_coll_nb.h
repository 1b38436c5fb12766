/* Non-blocking collectives (mpi_coll_nb.c): each one runs the blocking
 * algorithm of the same collective as a coroutine on its own stack. Where
 * the blocking code would wait for a transfer (cm_mpi_req_wait) the
 * coroutine returns to the program instead; the progress engine resumes it
 * once that transfer is complete. So a non-blocking collective sends exactly
 * the messages of its blocking twin, computes the same bits, and progresses
 * in every MPI call that drives progress, while the program computes
 * between them.
 *
 * When a coroutine is resumed depends on timing, and what it sends then
 * takes its place in the rank's stream of frames: under a transport that
 * logs events every resumption is logged (mpi_nondet.c, a "step" record
 * naming the collective and the number of frames the rank had produced), and
 * a re-execution resumes each coroutine at exactly the logged point. */
#ifndef CHANMEM_MPI_COLL_NB_H
#define CHANMEM_MPI_COLL_NB_H

#include <stddef.h>
#include <stdint.h>

#include "mpi_internal.h"

/* Added to every tag a coroutine sends or receives on a collective context,
 * so an instance never matches the messages of another instance or of a
 * blocking collective (0 outside coroutines). */
extern int cm_nbc_tag_bias CM_HIDDEN;

/* One non-blocking collective: run(args) is its blocking twin; args (len
 * bytes, at most CM_NBC_ARGS_MAX) are copied. Starts it on comm up to its
 * first wait; *request completes when run returns. An error run returns
 * before its first wait is the call's (already raised by run). In
 * mpi_progress.c, above the log (mpi_nondet.c) and the engine. */
#define CM_NBC_ARGS_MAX 160
typedef int cm_nbc_run_fn(const void *args);
CM_HIDDEN int cm_nbc_start(const char *func, MPI_Comm comm, cm_nbc_run_fn *run, const void *args,
                           size_t len, MPI_Request *request);
/* cm_nbc_start's second half (the engine, mpi_coll_nb_engine.c), once the
 * arguments are checked and the log has taken the steps due: the request,
 * the stack, and the coroutine run up to its first wait. */
CM_HIDDEN int cm_nbc_launch(const char *func, struct cm_mpi_comm *c, cm_nbc_run_fn *run,
                            const void *args, size_t len, MPI_Request *request);

/* Is the caller running inside a coroutine? */
CM_HIDDEN int cm_nbc_inside(void);
/* Inside a coroutine: gives control back until r is complete. 0. */
CM_HIDDEN int cm_nbc_wait(struct cm_mpi_request *r);
/* A coroutine waiting for a transfer that is now complete, the oldest
 * first: 1 and its id, or 0. */
CM_HIDDEN int cm_nbc_ready(uint32_t *id);
/* Runs coroutine id until it waits again or ends. */
CM_HIDDEN void cm_nbc_resume(uint32_t id);
/* Waits until coroutine id can go on, then resumes it. 0, -1 if the
 * transport failed, -2 if no such coroutine is waiting. */
CM_HIDDEN int cm_nbc_force(uint32_t id);
/* Any coroutine pending? */
CM_HIDDEN int cm_nbc_pending(void);
/* The id the next collective gets; a rank restored from a checkpoint
 * image goes on from the image's (the log's steps name collectives by
 * id). */
CM_HIDDEN uint32_t cm_nbc_next_id(void);
CM_HIDDEN void cm_nbc_set_next_id(uint32_t id);

/* The progress engine's part (mpi_nondet.c): at a point of the program's
 * own flow (not inside a coroutine), resumes the coroutines that may go on,
 * leading or following the log. decision: called by a Test-family decision
 * (a logged resumption that cannot be taken here is a divergence). Returns
 * the number resumed, or -1 if the transport failed. */
CM_HIDDEN int cm_mpi_nd_nbc_point(int decision);
/* Before a collective starts (its coroutine runs up to its first wait):
 * a follower takes the steps logged up to here first, as no coroutine can
 * resume another. 0, or -1 if the transport failed. */
CM_HIDDEN int cm_mpi_nd_nbc_start(void);

#endif
