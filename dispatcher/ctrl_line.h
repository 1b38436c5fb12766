/* The report lines ranks send cmrun (client/heartbeat.h, MPI_Abort): on the
 * control pipe, and after the secret on a remote process's control
 * connection. Anyone who can reach the control port can send bytes, so
 * every field is parsed strictly and checked against the job's bounds here,
 * in one place, before any of it indexes cmrun's tables. */
#ifndef CMRUN_CTRL_LINE_H
#define CMRUN_CTRL_LINE_H

#include <stdbool.h>
#include <stdint.h>

enum ctrl_kind {
	CTRL_BAD,       /* not a report line, or a field out of range */
	CTRL_ABORT,     /* "abort RANK CODE" */
	CTRL_HEARTBEAT, /* "heartbeat RANK INCARNATION REPLICA" */
	CTRL_FINALIZED, /* "finalized RANK INCARNATION REPLICA" */
	CTRL_INIT,      /* "init RANK INCARNATION REPLICA start|image" */
	CTRL_RESTORED,  /* "restored RANK INCARNATION REPLICA IMAGE OUT ERR" */
	CTRL_CRASHED,   /* "crashed RANK INCARNATION REPLICA SIGNAL PROGRESS" */
	CTRL_HELLO,     /* "hello RANK INCARNATION REPLICA" (control connection) */
};

struct ctrl_line {
	enum ctrl_kind kind;
	int rank;                 /* 0 .. nranks-1 */
	unsigned incarnation;     /* every kind but ABORT */
	int replica;              /* 0 .. replicas-1, every kind but ABORT */
	int code;                 /* ABORT: the exit code MPI_Abort was given */
	bool from_image;          /* INIT */
	int sig;                  /* CRASHED: 1 .. 64 */
	uint64_t progress;        /* CRASHED */
	uint64_t image, out, err; /* RESTORED */
};

/* Parses one line (without its newline) for a job of nranks ranks with
 * replicas copies each: every field a decimal number without sign (but an
 * abort code), separated by single spaces, nothing else on the line.
 * Returns out->kind (CTRL_BAD when refused). */
enum ctrl_kind ctrl_line_parse(const char *line, int nranks, int replicas, struct ctrl_line *out);

#endif
