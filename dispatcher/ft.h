/* Fault tolerance (ft.c): restarting ranks (on a surviving host when
 * theirs is dead), fault injection, the status line and the fault report.
 * Called by the loop (job.c); calls cm_restart.c, detect.c and spawn.c. */
#ifndef CMRUN_FT_H
#define CMRUN_FT_H

#include "job.h"

/* Called once the ranks are started: arms fault injection and the status
 * line. */
void ft_start(struct job *job);
/* The job is stopping or done: no more kills; the final status line. */
void ft_stop(struct job *job);
/* The job is over (every CM reaped, its last counters read): the final
 * status line, if the status line is on. */
void ft_final_status(struct job *job);
/* Rank r (already marked exited, output drained) died with wait_status in
 * the run phase. Restarts it when that is what fault tolerance does;
 * returns true if it did (the job goes on), false when the job must stop
 * (a message saying why was printed if it is a restart limit). */
bool ft_rank_failed(struct job *job, struct rank_proc *r, int wait_status);
/* Counts r's death during the run (by a signal, or declared failed) for
 * the fault report, before it is judged. */
void ft_note_failure(struct job *job, struct rank_proc *r, int wait_status);
/* The end of a run that had faults: what failed, what was restarted from
 * where, what was replayed, how long ranks were down (stderr). */
void ft_report(struct job *job);

#endif
