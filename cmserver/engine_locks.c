/* The locks of the core's state domains (core.h) and the locked calls into
 * the core every threaded engine makes. Lock order: GLOBAL, SENDER, DEST,
 * OUTQ. SENDER and DEST are striped by rank, OUTQ by session address: no
 * global lock on the MSG / RECV_REQ fast path, and a lock never outlives
 * the engine's connection object (a session may be referenced by a log
 * entry after its connection is gone). */
#include "config.h"

#include "engine_locks.h"

#include <stdint.h>

static inline unsigned rank_stripe(int rank)
{
	return (uint32_t)rank % ENG_RANK_STRIPES;
}

static inline pthread_mutex_t *out_mutex(struct eng_locks *l, const struct cm_session *s)
{
	return &l->outq[((uintptr_t)s >> 6) % ENG_OUT_STRIPES];
}

void eng_locks_init(struct eng_locks *l)
{
	pthread_mutex_init(&l->global, NULL);
	for (unsigned i = 0; i < ENG_RANK_STRIPES; i++) {
		pthread_mutex_init(&l->sender[i], NULL);
		pthread_mutex_init(&l->dest[i], NULL);
	}
	for (unsigned i = 0; i < ENG_OUT_STRIPES; i++)
		pthread_mutex_init(&l->outq[i], NULL);
}

void eng_locks_destroy(struct eng_locks *l)
{
	pthread_mutex_destroy(&l->global);
	for (unsigned i = 0; i < ENG_RANK_STRIPES; i++) {
		pthread_mutex_destroy(&l->sender[i]);
		pthread_mutex_destroy(&l->dest[i]);
	}
	for (unsigned i = 0; i < ENG_OUT_STRIPES; i++)
		pthread_mutex_destroy(&l->outq[i]);
}

void eng_out_lock(struct eng_locks *l, struct cm_session *s)
{
	pthread_mutex_lock(out_mutex(l, s));
}

void eng_out_unlock(struct eng_locks *l, struct cm_session *s)
{
	pthread_mutex_unlock(out_mutex(l, s));
}

struct cm_session *eng_session_new(struct eng_locks *l, struct cm_core *core, void *data)
{
	pthread_mutex_lock(&l->global); /* the sessions_opened counter */
	struct cm_session *s = cm_session_new(core, data);
	pthread_mutex_unlock(&l->global);
	return s;
}

void eng_dispatch(struct eng_locks *l, struct cm_session *s, struct cm_frame *f)
{
	int r = cm_frame_domain(f);
	switch (f->h.type) {
	case CM_T_HELLO:
		pthread_mutex_lock(&l->global);
		pthread_mutex_lock(&l->sender[rank_stripe(r)]);
		pthread_mutex_lock(&l->dest[rank_stripe(r)]);
		cm_core_dispatch(s, f);
		pthread_mutex_unlock(&l->dest[rank_stripe(r)]);
		pthread_mutex_unlock(&l->sender[rank_stripe(r)]);
		pthread_mutex_unlock(&l->global);
		break;
	case CM_T_MSG:
		pthread_mutex_lock(&l->sender[rank_stripe(f->h.src)]);
		pthread_mutex_lock(&l->dest[rank_stripe(r)]);
		cm_core_dispatch(s, f);
		pthread_mutex_unlock(&l->dest[rank_stripe(r)]);
		pthread_mutex_unlock(&l->sender[rank_stripe(f->h.src)]);
		break;
	default:
		if (r < 0) { /* BYE: OUTQ(s) only, which the core takes through the hooks */
			cm_core_dispatch(s, f);
			break;
		}
		/* RECV_REQ, PROBE, EVENT, EVENT_ACK: DEST of the connection's rank,
		 * as for any frame cm_frame_domain names a rank for. */
		pthread_mutex_lock(&l->dest[rank_stripe(r)]);
		cm_core_dispatch(s, f);
		pthread_mutex_unlock(&l->dest[rank_stripe(r)]);
		break;
	}
}

void eng_input(struct eng_locks *l, struct cm_session *s, size_t n)
{
	struct cm_frame f;
	cm_session_received(s, n);
	for (;;) {
		if (cm_session_next_frame(s, &f)) {
			eng_dispatch(l, s, &f);
			continue;
		}
		/* Cut-through: writers parked on the payload s fills are woken
		 * under the DEST lock of its destination, then input goes on. */
		int r = cm_session_fill_domain(s);
		if (r < 0)
			break;
		int src = cm_session_rank(s);
		pthread_mutex_lock(&l->sender[rank_stripe(src)]);
		pthread_mutex_lock(&l->dest[rank_stripe(r)]);
		cm_session_fill_notify(s);
		pthread_mutex_unlock(&l->dest[rank_stripe(r)]);
		pthread_mutex_unlock(&l->sender[rank_stripe(src)]);
	}
}

void eng_relieve(struct eng_locks *l, struct cm_core *core)
{
	uint32_t n = cm_core_world_size(core);
	for (uint32_t r = 0; r < n; r++) {
		pthread_mutex_lock(&l->dest[rank_stripe((int)r)]);
		cm_core_relieve(core, (int)r);
		pthread_mutex_unlock(&l->dest[rank_stripe((int)r)]);
	}
}

int eng_session_closed(struct eng_locks *l, struct cm_session *s, bool *orderly)
{
	pthread_mutex_lock(&l->global);
	int rank = cm_session_rank(s);
	bool closing = cm_session_closing(s);
	*orderly = cm_session_said_bye(s) || closing;
	/* SENDER too: a newer incarnation waiting for this connection to end
	 * is admitted by cm_session_closed, as a HELLO is. */
	if (rank >= 0) {
		pthread_mutex_lock(&l->sender[rank_stripe(rank)]);
		pthread_mutex_lock(&l->dest[rank_stripe(rank)]);
	}
	cm_session_closed(s);
	if (rank >= 0) {
		pthread_mutex_unlock(&l->dest[rank_stripe(rank)]);
		pthread_mutex_unlock(&l->sender[rank_stripe(rank)]);
	}
	pthread_mutex_unlock(&l->global);
	return rank;
}
