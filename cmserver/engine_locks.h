/* Locks of the core's state domains for the threaded engines (see the
 * contract in core.h) and the locked wrappers of the core calls. */
#ifndef CHANMEM_ENGINE_LOCKS_H
#define CHANMEM_ENGINE_LOCKS_H

#include "core.h"

#include <pthread.h>
#include <stdbool.h>

#define ENG_RANK_STRIPES 256
#define ENG_OUT_STRIPES 1024

struct eng_locks {
	pthread_mutex_t global;
	pthread_mutex_t sender[ENG_RANK_STRIPES];
	pthread_mutex_t dest[ENG_RANK_STRIPES];
	pthread_mutex_t outq[ENG_OUT_STRIPES];
};

void eng_locks_init(struct eng_locks *l);
void eng_locks_destroy(struct eng_locks *l);

/* OUTQ(s): the core's out_lock/out_unlock hooks, and the writer's drain. */
void eng_out_lock(struct eng_locks *l, struct cm_session *s);
void eng_out_unlock(struct eng_locks *l, struct cm_session *s);

struct cm_session *eng_session_new(struct eng_locks *l, struct cm_core *core, void *data);
/* cm_core_dispatch under the domains the frame's type needs. */
void eng_dispatch(struct eng_locks *l, struct cm_session *s, struct cm_frame *f);
/* n bytes arrived for s (its only reader calls this): every complete frame
 * is dispatched under its locks, and the writers a cut-through payload
 * holds up are woken as it fills. */
void eng_input(struct eng_locks *l, struct cm_session *s, size_t n);
/* cm_core_relieve for every rank, each under its DEST lock. */
void eng_relieve(struct eng_locks *l, struct cm_core *core);
/* cm_session_closed under GLOBAL + DEST(rank). Returns the rank (-1 if it
 * never authenticated); *orderly: it said BYE or the server refused it. */
int eng_session_closed(struct eng_locks *l, struct cm_session *s, bool *orderly);

#endif
