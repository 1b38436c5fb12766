/* Application checkpoints, the library side (ckpt_app.c). */
#ifndef CHANMEM_CKPT_APP_H
#define CHANMEM_CKPT_APP_H

#include "mpi_internal.h"
#include "transport.h"

/* Called by MPI_Init before the transport starts: a restarted rank
 * (incarnation > 0) of a job with a checkpoint server fetches its latest
 * image; if there is one, job->resume points at the counters the transport
 * resumes from and chanmem_ckpt_recovering() says so. 0, or -1 after saying
 * why (the image exists but cannot be read: starting over would diverge). */
CM_HIDDEN int cm_ckpt_recover(struct cm_job *job);
/* The restored image's stdin position (stdin_log.c); 0, 0 without one. */
CM_HIDDEN void cm_ckpt_stdin_position(uint64_t *consumed, uint64_t *delivered);

#endif
