/* Replication, --replicate (repl.c). */
#ifndef CMRUN_REPL_H
#define CMRUN_REPL_H

#include "job.h"

/* Keeps or forwards the output pipes of a just-spawned replica. */
void repl_spawned(struct job *job, struct rank_proc *r, int out_fd, int err_fd, const char *prefix);
/* Replica r died by a signal in the run phase: true if the rank goes on
 * (another replica is alive or finished), false when every replica of it
 * is dead (a message says so). */
bool repl_replica_failed(struct job *job, struct rank_proc *r, int wait_status);
/* Closes held pipes (job end). */
void repl_close_held(struct job *job);

#endif
