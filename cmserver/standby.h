/* cmserver --standby: the copy of another CM's journal, on another host,
 * and the CM that takes over from it.
 *
 * A standby listens where it will serve, but serves no rank: it accepts
 * one connection that says HELLO as CM_PEER_MIRROR with the job secret
 * (its CM, started with --mirror), writes every MIRROR frame to its own
 * journal files and acknowledges it. Anyone else is disconnected, which a
 * rank takes as "try the other address". When the stream ends without
 * END (the CM's process or host died, or the two lost each other), the
 * journal it holds is whole up to what it acknowledged, and the CM could
 * not answer anything past that: the standby takes over. */
#ifndef CHANMEM_STANDBY_H
#define CHANMEM_STANDBY_H

#include <stddef.h>

#include "engine.h"

enum cm_standby_end {
	CM_STANDBY_TAKE_OVER, /* the journal at path is the CM's: serve from it */
	CM_STANDBY_NOT_NEEDED, /* the CM ended cleanly, or never connected before SIGTERM */
	CM_STANDBY_FAILED,     /* logged */
};

/* Runs until one of the ends above. path must not exist yet, or be empty:
 * the copy starts with the CM's first byte. */
enum cm_standby_end cm_standby_run(const struct cm_listeners *ls, const char *path,
                                   const char *secret);

#endif
