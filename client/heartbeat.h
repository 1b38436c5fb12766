/* Heartbeats from a rank to cmrun: a small thread writes one line to the
 * control pipe (CHANMEM_CONTROL_FD) every CHANMEM_HEARTBEAT_MS
 * milliseconds between MPI_Init and MPI_Finalize, so cmrun can tell a hung
 * or stopped rank (no more lines) from a slow one (cmrun --heartbeat-timeout,
 * docs/fault-tolerance.md). Lines, each one write shorter than PIPE_BUF:
 *
 *   heartbeat RANK INCARNATION REPLICA
 *   finalized RANK INCARNATION REPLICA     (last one: stop watching me)
 *
 * and, whether heartbeats are on or not, at MPI_Init "init RANK INCARNATION
 * REPLICA start|image", before a checkpoint's filler "restored RANK
 * INCARNATION REPLICA IMAGE OUT ERR" (a remote rank then waits for cmrun's
 * "ok" line), and when the program dies of SIGSEGV,
 * SIGBUS, SIGFPE, SIGILL or SIGABRT "crashed RANK INCARNATION REPLICA
 * SIGNAL PROGRESS" (PROGRESS: MPI requests made so far).
 *
 * Without both variables (no cmrun, or heartbeats off) nothing is started.
 * Never writes to stdout; a bad value is reported once on stderr.
 *
 * A rank on another host than cmrun gets CHANMEM_CONTROL=IP:PORT instead
 * of a pipe (common/jobenv.h): MPI_Init connects there, sends the job
 * secret and "hello RANK INCARNATION REPLICA", and the same lines follow
 * on that connection (the MPI_Abort report too: CHANMEM_CONTROL_FD is set
 * to it). The thread also watches it: when it ends (cmrun gave this
 * incarnation up, or is gone) the process exits at once, so a rank cut
 * off by a partition never runs on as a stale incarnation. */
#ifndef CHANMEM_HEARTBEAT_H
#define CHANMEM_HEARTBEAT_H

#include <stdatomic.h>

/* The interval variable; cmrun sets it when heartbeats are on. */
#define CM_ENV_HEARTBEAT_MS "CHANMEM_HEARTBEAT_MS"
#define CM_HEARTBEAT_MAX_MS 3600000

/* Starts the thread (MPI_Init, once the job environment is known).
 * Failing to start only means no heartbeats: cmrun then treats the rank as
 * one that never started heartbeating. */
void cm_heartbeat_start(int rank, unsigned incarnation, int replica);
/* Stops and joins the thread, then says "finalized" (MPI_Finalize). */
void cm_heartbeat_stop(void);
/* A restarted rank resumed from a checkpoint image and is about to write
 * out/err filler bytes in place of what it printed before the image: cmrun
 * drops them, and matches what follows line by line. Said before the
 * filler, so cmrun always knows when it reads it. */
void cm_control_restored(int rank, unsigned incarnation, int replica, unsigned long long image,
                         unsigned long long out, unsigned long long err);
/* The rank's progress: MPI requests made so far (crash reports). */
extern _Atomic unsigned long cm_progress;

#endif
