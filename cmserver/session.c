/* Sessions of the protocol core: their creation, and who holds a rank's
 * slot -- the HELLO that authenticates a connection, a newer incarnation
 * waiting for the old one's connection to end, and the close that admits
 * it. Their lifetime (references, release) is in emit.c. */
#include "config.h"

#include "core_impl.h"

#include "log.h"

#include <stdlib.h>
#include <string.h>

struct cm_session *cm_session_new(struct cm_core *core, void *engine_data)
{
	struct cm_session *s = calloc(1, sizeof *s);
	if (s == NULL)
		return NULL;
	s->in_cap = CM_UNAUTH_STAGING;
	s->in = malloc(s->in_cap);
	if (s->in == NULL) {
		free(s);
		return NULL;
	}
	s->core = core;
	s->engine_data = engine_data;
	s->refs = 1;
	s->state = CM_S_NEW;
	s->rank = -1;
	s->id = __atomic_fetch_add(&core->next_session_id, 1, __ATOMIC_RELAXED);
	cm_outq_init(&s->out);
	CM_STAT_ADD(core, sessions_opened, 1);
	return s;
}

uint64_t cm_session_id(const struct cm_session *s)
{
	return s->id;
}

void *cm_session_journal(const struct cm_session *s)
{
	return s->core->cfg.journal ? s->core->cfg.journal->ctx : NULL;
}

int cm_session_authenticated(const struct cm_session *s)
{
	return __atomic_load_n(&s->authed, __ATOMIC_RELAXED);
}

/* Leaves the rank table and drops what the session was waiting for. */
static void unregister(struct cm_session *s)
{
	struct cm_core *core = s->core;
	if (!s->registered)
		return;
	s->registered = false;
	if (core->rank_sess[s->rank] == s)
		core->rank_sess[s->rank] = NULL;
	cm_dest_drop_session(&core->dests[s->rank], s);
}

static void admit(struct cm_session *s, int32_t rank, uint32_t incarnation);

/* A waiting newer incarnation gives up its place (it closed, or another one
 * took it). */
static void unpark(struct cm_session *s)
{
	if (!s->parked)
		return;
	s->parked = false;
	struct cm_session *old = s->core->rank_sess[s->parked_rank];
	if (old && old->successor == s) {
		old->successor = NULL;
		cm_session_release(s);
	}
}

void cm_session_closed(struct cm_session *s)
{
	enum cm_sess_state was = __atomic_exchange_n(&s->state, CM_S_GONE, __ATOMIC_ACQ_REL);
	if (was == CM_S_GONE)
		return;
	if (s->journaled)
		cm_core_journal(s, CM_J_CLOSED, 0, NULL, NULL, 0);
	const struct cm_core_config *cfg = &s->core->cfg;
	if (was == CM_S_READY && s->registered && cfg->rank_lost)
		cfg->rank_lost(cfg->rank_lost_ctx, s->rank, s->incarnation);
	unpark(s);
	/* A payload left partial waits for its re-send, before a waiting
	 * newer incarnation is admitted below. */
	cm_cut_orphan(s);
	int32_t rank = s->rank;
	struct cm_session *next = s->successor;
	s->successor = NULL;
	unregister(s);
	if (next) {
		/* Everything the old incarnation sent is in: the new one goes on. */
		if (next->parked && sess_state(next) == CM_S_NEW) {
			next->parked = false;
			admit(next, rank, next->parked_incarnation);
		}
		cm_session_release(next);
	}
	cm_entry_free(s->in_entry);
	s->in_entry = NULL;
	struct cm_core_hooks *hk = &s->core->cfg.hooks;
	if (hk->out_lock)
		hk->out_lock(hk->ctx, s);
	cm_outq_free(&s->out);
	if (hk->out_unlock)
		hk->out_unlock(hk->ctx, s);
}

/* ---- output ---- */

/* Here, with the HELLO that sets it, so that frame assembly (input.c)
 * reads it from below dispatch. */
uint32_t cm_core_world_size(const struct cm_core *core)
{
	return cm_atomic_load32(&core->world_size);
}

static bool setup_world(struct cm_core *core, uint32_t n)
{
	struct cm_dest *dests = calloc(n, sizeof *dests);
	struct cm_sender *senders = calloc(n, sizeof *senders);
	struct cm_session **rank_sess = calloc(n, sizeof *rank_sess);
	uint32_t ok = 0;
	if (dests && senders && rank_sess)
		while (ok < n && cm_dest_init(&dests[ok]))
			ok++;
	if (ok < n) {
		for (uint32_t i = 0; i < ok; i++)
			cm_dest_free(&dests[i]);
		free(dests);
		free(senders);
		free(rank_sess);
		return false;
	}
	core->dests = dests;
	core->senders = senders;
	core->rank_sess = rank_sess;
	__atomic_store_n(&core->world_size, n, __ATOMIC_RELEASE);
	return true;
}

void cm_core_hello(struct cm_session *s, const struct cm_frame *f)
{
	struct cm_core *core = s->core;
	const struct cm_hello *hello = &f->hello;
	int32_t rank = f->h.src;

	if (sess_state(s) == CM_S_READY) { /* acceptable() let a late TAKEOVER through */
		if (hello->incarnation != s->incarnation)
			cm_session_fail(s, CM_E_STATE, "second HELLO on this connection");
		return;
	}
	if (!cm_secret_equal(hello->secret, core->cfg.secret)) {
		cm_session_fail(s, CM_E_AUTH, "wrong job secret");
		return;
	}
	__atomic_store_n(&s->authed, true, __ATOMIC_RELAXED);
	if (hello->kind != CM_PEER_RANK) {
		cm_session_fail(s, CM_E_FIELD,
		                "peer kind %u: a channel memory accepts ranks (kind 0)",
		                (unsigned)hello->kind);
		return;
	}
	if (f->h.dst != rank) {
		cm_session_fail(s, CM_E_RANK, "HELLO src %d and dst %d must both be the rank",
		                (int)rank, (int)f->h.dst);
		return;
	}
	if (core->world_size == 0) {
		/* Whoever comes first must not size the job for everyone: not
		 * past what the CM was told, nor past a sane ceiling. */
		if (core->cfg.world_size && hello->world_size != core->cfg.world_size) {
			cm_session_fail(s, CM_E_SIZE, "world size %u, the job has %u",
			                (unsigned)hello->world_size,
			                (unsigned)core->cfg.world_size);
			return;
		}
		if (!core->cfg.world_size && hello->world_size > CM_WORLD_MAX) {
			cm_session_fail(
			    s, CM_E_SIZE,
			    "world size %u: more than %u ranks needs cmserver --world-size",
			    (unsigned)hello->world_size, (unsigned)CM_WORLD_MAX);
			return;
		}
		if ((uint32_t)rank >= hello->world_size) {
			cm_session_fail(s, CM_E_RANK, "rank %d out of range for world size %u",
			                (int)rank, (unsigned)hello->world_size);
			return;
		}
		if (!setup_world(core, hello->world_size)) {
			cm_session_fail(s, CM_E_SIZE, "cannot allocate state for %u ranks",
			                (unsigned)hello->world_size);
			return;
		}
		cm_info("world size %u (from rank %d)", (unsigned)hello->world_size, (int)rank);
	} else if (hello->world_size != core->world_size) {
		cm_session_fail(s, CM_E_SIZE, "world size %u, the job has %u",
		                (unsigned)hello->world_size, (unsigned)core->world_size);
		return;
	}
	if ((uint32_t)rank >= core->world_size) {
		cm_session_fail(s, CM_E_RANK, "rank %d out of range for world size %u", (int)rank,
		                (unsigned)core->world_size);
		return;
	}

	if (s->parked) {
		if (!(f->h.flags & CM_F_TAKEOVER) || hello->incarnation != s->parked_incarnation ||
		    rank != s->parked_rank) {
			cm_session_fail(s, CM_E_STATE, "a second HELLO");
			return;
		}
		unpark(s);
	}
	struct cm_session *old = core->rank_sess[rank];
	if (old) {
		if (old->incarnation >= hello->incarnation) {
			cm_session_fail(s, CM_E_STATE,
			                "rank %d is already connected (incarnation %u, this is %u)",
			                (int)rank, (unsigned)old->incarnation,
			                (unsigned)hello->incarnation);
			return;
		}
		struct cm_session *waiting = old->successor;
		if (waiting && waiting->parked_incarnation >= hello->incarnation) {
			cm_session_fail(s, CM_E_STATE,
			                "incarnation %u of rank %d is already waiting (this is %u)",
			                (unsigned)waiting->parked_incarnation, (int)rank,
			                (unsigned)hello->incarnation);
			return;
		}
		if (waiting) {
			unpark(waiting);
			cm_session_fail(waiting, CM_E_STATE,
			                "replaced by incarnation %u of rank %d",
			                (unsigned)hello->incarnation, (int)rank);
		}
		if (sess_state(old) != CM_S_CLOSING && !(f->h.flags & CM_F_TAKEOVER)) {
			/* The old incarnation is dead (the dispatcher restarts a rank
			 * only after it ended) but its last frames may still sit unread
			 * in its socket: wait for its end of stream. */
			cm_session_ref(s);
			old->successor = s;
			s->parked = true;
			s->parked_rank = rank;
			s->parked_incarnation = hello->incarnation;
			cm_info(
			    "rank %d: incarnation %u waits for incarnation %u's connection to end",
			    (int)rank, (unsigned)hello->incarnation, (unsigned)old->incarnation);
			return;
		}
		cm_info("rank %d: incarnation %u replaces incarnation %u", (int)rank,
		        (unsigned)hello->incarnation, (unsigned)old->incarnation);
		cm_session_fail(old, CM_E_STATE, "replaced by incarnation %u of rank %d",
		                (unsigned)hello->incarnation, (int)rank);
		unregister(old);
		CM_STAT_ADD(core, sessions_replaced, 1);
	}
	admit(s, rank, hello->incarnation);
}

/* Takes the rank's slot and answers HELLO_ACK. Under GLOBAL + SENDER(rank) +
 * DEST(rank): from the session's own HELLO, or from the close of the
 * connection it waited for. The fields are written before the state moves
 * to READY (release), which the session's reader loads (acquire) before it
 * reads them. */
static void admit(struct cm_session *s, int32_t rank, uint32_t incarnation)
{
	struct cm_core *core = s->core;
	/* Atomic: a refusal by the session's own reader may log the rank. */
	__atomic_store_n(&s->rank, rank, __ATOMIC_RELAXED);
	s->incarnation = incarnation;
	if (!sess_move(s, CM_S_NEW, CM_S_READY)) {
		__atomic_store_n(&s->rank, -1, __ATOMIC_RELAXED);
		return; /* closed meanwhile */
	}
	s->registered = true;
	core->rank_sess[rank] = s;

	const struct cm_sender *snd = &core->senders[rank];
	uint64_t next = snd->has ? snd->highest + 1 : 0;
	if (snd->cut_orphan && cm_buf_partial(snd->cut_buf))
		next = snd->cut_clock; /* accepted, but its payload is not all here */
	struct cm_header ack = {.type = CM_T_HELLO_ACK, .src = rank, .dst = rank, .clock = next};
	cm_core_emit_header(s, &ack);
	if (core->cfg.standby_addr) {
		/* A rank knows the standbys cmrun started with the job; this
		 * one may have been started since (after a takeover). */
		size_t n = strlen(core->cfg.standby_addr);
		struct cm_header sb = {
		    .type = CM_T_STANDBY, .src = rank, .dst = rank, .len = (uint32_t)n};
		struct cm_out_item it = {.head_len = CM_HEADER_SIZE,
		                         .body = (const uint8_t *)core->cfg.standby_addr,
		                         .body_len = (uint32_t)n};
		cm_header_encode(&sb, it.head);
		cm_core_emit(s, &it);
	}
	cm_info("rank %d connected (incarnation %u)", (int)rank, (unsigned)incarnation);
}
