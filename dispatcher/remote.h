/* Control connections of remote processes (remote.c): the TCP version of
 * the control pipe. Calls control.c; reports a lost connection up through
 * job->events. */
#ifndef CMRUN_REMOTE_H
#define CMRUN_REMOTE_H

#include "job.h"

/* Listens for them (when some process is remote). Returns 0 or -1
 * (printed). */
int remote_open(struct job *job);
/* Reads what r's connection holds (before its exit is judged). */
void remote_drain(struct job *job, struct rank_proc *r);
/* Waits up to wait_ms for what remote processes report and handles it: a
 * restored rank announces its output filler on its control connection
 * before writing it on its output, which travels another way. */
void remote_await_reports(struct job *job, int wait_ms);
/* Closes r's connection: a remote process whose connection ends exits. */
void remote_detach(struct job *job, struct rank_proc *r);
/* Closes every connection and the listener (teardown). */
void remote_close(struct job *job);

#endif
