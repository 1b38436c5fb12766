/* Failure detection (detect.c): what CMs report on their pipes (address,
 * lost connections, counters), heartbeat ages, declaring a rank failed.
 * Calls control.c and remote.c; reports up through job->events. */
#ifndef CMRUN_DETECT_H
#define CMRUN_DETECT_H

#include "job.h"

/* Starts reading a just-spawned CM's report pipe and ready pipe. */
void detect_cm_spawned(struct job *job, struct cm_proc *cm);
/* The CM exited: reads what is left in its report pipe, closes it. */
void detect_cm_exited(struct job *job, struct cm_proc *cm);
/* Arms the heartbeat check (run phase), and stops it. */
void detect_start(struct job *job);
void detect_stop(struct job *job);
/* r's connection (to CM r->lost_cm, or -1: its control connection) ended:
 * declared failed CMRUN_LOST_CONFIRM later if still alive then. */
void detect_confirm_lost(struct job *job, struct rank_proc *r);
/* Kills r (SIGKILL, by pid) and marks it failed for why: its exit then
 * restarts it like a rank killed by a signal. */
void detect_declare_failed(struct job *job, struct rank_proc *r, const char *why);
/* Sum of the CMs' replay counters, for the status line. */
unsigned long long detect_replayed(const struct job *job);
unsigned long long detect_events_replayed(const struct job *job);
/* Alive: not a zombie and not exiting (/proc); unknown counts as alive. */
bool detect_process_alive(pid_t pid);

#endif
