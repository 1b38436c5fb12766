/* --ckpt-dir: the checkpoint server of the job (ckpt.c). */
#ifndef CMRUN_CKPT_H
#define CMRUN_CKPT_H

#include "job.h"

/* Starts ckptserver on opts->ckpt_dir and waits for its address (bounded);
 * nothing without --ckpt-dir. 0, or -1 after saying why. */
int ckpt_server_start(struct job *job);
/* It exited while the job ran (from the child watcher). */
void ckpt_server_exited(struct job *job, int wait_status);
/* SIGTERM, a bounded wait, then SIGKILL. */
void ckpt_server_stop(struct job *job);
/* The end of the job: removes its images if it succeeded (and no
 * --ckpt-keep), stops the server, and says where kept images are. */
void ckpt_server_finish(struct job *job);

#endif
