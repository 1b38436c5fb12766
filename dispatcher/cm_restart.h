/* --cm-restart, --kill-cm-at, --kill-cm-every (cm_restart.c): journals,
 * restarts and kills of channel memories. Called by the loop (job.c) and
 * by ft.c; calls spawn.c and detect.c. */
#ifndef CMRUN_CM_RESTART_H
#define CMRUN_CM_RESTART_H

#include "job.h"

/* Makes the journal directory (--cm-restart). 0, or -1 printed. */
int cmft_open(struct job *job);
/* Removes it and what it holds (the job is over, however it ended). */
void cmft_close(struct job *job);
/* CM cm (marked exited, pipes read) ended during the run. Restarts it when
 * --cm-restart allows; true if it did (the job goes on), false when the
 * job must stop (a message saying why was printed if a limit did it). */
bool cmft_cm_died(struct job *job, struct cm_proc *cm, int wait_status);
/* Standby sb said it took over (its CM's stream ended). */
void cmft_standby_took_over(struct job *job, struct cm_proc *sb);
/* Standby sb (marked exited, pipes read) ended. */
void cmft_standby_exited(struct job *job, struct cm_proc *sb, int wait_status);
/* A restarted CM reported its address again. */
void cmft_cm_listening(struct job *job, struct cm_proc *cm);
/* A standby started during the run (after its CM's standby took over)
 * listens: the CM is started again with it (cmserver --mirror). */
void cmft_standby_ready(struct job *job, struct cm_proc *sb);
/* Arms and stops --kill-cm-at and --kill-cm-every (ft_start, ft_stop). */
void cmft_start(struct job *job);
void cmft_stop(struct job *job);
/* The fault report's lines about CM deaths and restarts. */
void cmft_report(struct job *job);
/* "CHANMEM_CM_STANDBYS=..." for a rank starting now (malloc'd), or NULL
 * when out of memory. A new standby after a takeover updates the job's
 * rank environment itself. */
char *cmft_standbys_env(struct job *job);

#endif
