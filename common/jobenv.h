/* The environment cmrun hands every rank: the contract between the
 * dispatcher and libchanmem. A program started without cmrun sees none of
 * these and runs as a singleton (rank 0 of 1, no network). */
#ifndef CHANMEM_JOBENV_H
#define CHANMEM_JOBENV_H

#define CM_ENV_RANK "CHANMEM_RANK"               /* this rank, 0..size-1 */
#define CM_ENV_SIZE "CHANMEM_SIZE"               /* number of ranks */
#define CM_ENV_INCARNATION "CHANMEM_INCARNATION" /* 0, then +1 per restart */
#define CM_ENV_SECRET "CHANMEM_SECRET"           /* job secret, CM_SECRET_LEN chars */
#define CM_ENV_TRANSPORT "CHANMEM_TRANSPORT"     /* "direct" or "cm" */
#define CM_ENV_CMS "CHANMEM_CMS"                 /* "h:p,h:p,..." channel memories */
/* optional "h:p,-,..." per CM: its standby (cmserver --standby), which
 * takes over when the CM dies; "-" for a CM without one */
#define CM_ENV_CM_STANDBYS "CHANMEM_CM_STANDBYS"
#define CM_ENV_HOME                                                                                \
	"CHANMEM_HOME" /* optional "i,j,..." home CM index per rank (default rank % ncms) */
#define CM_ENV_PEERS "CHANMEM_PEERS"         /* direct: "h:p,..." listening address of every rank */
#define CM_ENV_LISTEN_FD "CHANMEM_LISTEN_FD" /* direct: inherited listening socket of this rank */
/* Inherited pipe to cmrun: a rank writes "abort RANK CODE\n" before it
 * exits from MPI_Abort, so the job's status is that code. */
#define CM_ENV_CONTROL_FD "CHANMEM_CONTROL_FD"
/* A rank on another host (docs/deployment.md) cannot inherit descriptors:
 * it connects to cmrun at CHANMEM_CONTROL ("IP:PORT") instead of writing
 * to CHANMEM_CONTROL_FD, sends the job secret as the first line, then
 * "hello RANK INCARNATION REPLICA", then the same lines as on the pipe;
 * when that connection ends, the process exits. A direct-transport rank
 * there listens on CHANMEM_LISTEN ("IP:PORT", its entry in
 * CHANMEM_PEERS) instead of inheriting CHANMEM_LISTEN_FD. */
#define CM_ENV_CONTROL "CHANMEM_CONTROL"
#define CM_ENV_LISTEN "CHANMEM_LISTEN"
/* Replication (cmrun --replicate r, transport "repl"): this process's
 * replica index 0..r-1, the replica count r, and the listening address of
 * every replica process ("h:p,...", index rank * r + replica). */
#define CM_ENV_REPLICA "CHANMEM_REPLICA"
#define CM_ENV_REPLICAS "CHANMEM_REPLICAS"
#define CM_ENV_REPL_PEERS "CHANMEM_REPL_PEERS"
/* Application checkpoints: the checkpoint server ("host:port"; unset: no
 * checkpoints), the job id images are stored under, and the interval
 * between checkpoints (a duration such as "2s"; unset: every call). */
#define CM_ENV_CKPT "CHANMEM_CKPT"
#define CM_ENV_JOB_ID "CHANMEM_JOB_ID"
#define CM_ENV_CKPT_EVERY "CHANMEM_CKPT_EVERY"

#endif
