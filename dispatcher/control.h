/* The control channel from ranks to cmrun: one pipe shared by every rank
 * (each report is one write shorter than PIPE_BUF, so reports never mix).
 * A rank that calls MPI_Abort reports it here before it exits; cmrun reads
 * what is queued before it looks at any rank's exit, so the job ends with
 * the abort code even when another rank notices the lost peer first.
 * Heartbeats come the same way (client/heartbeat.h, dispatcher/detect.c). */
#ifndef CMRUN_CONTROL_H
#define CMRUN_CONTROL_H

#include <stdbool.h>

#include "job.h"

/* Creates the pipe and watches its read end. Returns 0 or -1 (printed). */
int control_open(struct job *job);
/* Handles every report already written (non-blocking). */
void control_drain(struct job *job);
/* The write end every rank inherits (CHANMEM_CONTROL_FD), or -1. */
int control_rank_fd(const struct job *job);
void control_close(struct job *job);
/* One report line ("abort R C", "heartbeat R I K", ...). Returns true when
 * the reporter waits for an answer ("restored": a remote rank writes its
 * filler only once cmrun knows it), which a connection's owner sends. */
bool control_handle_line(struct job *job, const char *line);

#endif
