/* Recovery from a journal (core.h): the records a dead CM journaled are
 * applied, in order, to a fresh core, through the same dispatch code that
 * applied them the first time. What the core decided then (matches, the
 * delivery record, per-sender clocks, events, trims) depends only on the
 * order of its inputs, so the same order rebuilds the same state.
 *
 * Each record names its session; a session is re-created at its first
 * record and has no connection: whatever it would send is drained and
 * dropped (the ranks re-post what they still wait for when they reconnect,
 * and the delivery record answers them). The engine's hooks, the rank-lost
 * report and the journal are off while records are applied: nothing here
 * is new, and no engine is running yet. */
#include "config.h"

#include "core_impl.h"

#include "log.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

struct rsess {
	uint64_t id;
	struct cm_session *s;
};

struct cm_recovery {
	struct cm_core *core;
	struct cm_core_hooks hooks;
	const struct cm_journal_ops *journal;
	void (*rank_lost)(void *ctx, int rank, uint32_t incarnation);
	CM_VEC(struct rsess) open; /* sessions not closed yet, in creation order */
	uint64_t records, sessions, next_id;
};

static void drain(struct cm_session *s)
{
	struct iovec iov[16];
	int n;
	while ((n = cm_session_out_iov(s, iov, 16)) > 0) {
		size_t len = 0;
		for (int i = 0; i < n; i++)
			len += iov[i].iov_len;
		cm_session_out_consumed(s, len);
	}
}

/* Output goes to sessions other than the one a record names (a DELIVER to
 * the receiver, a SYNC_ACK to the sender): every open session is drained
 * after each record. */
static void drain_all(struct cm_recovery *r)
{
	for (size_t i = 0; i < r->open.n; i++)
		drain(r->open.items[i].s);
}

struct cm_recovery *cm_recovery_begin(struct cm_core *core)
{
	struct cm_recovery *r = calloc(1, sizeof *r);
	if (r == NULL)
		return NULL;
	r->core = core;
	r->hooks = core->cfg.hooks;
	r->journal = core->cfg.journal;
	r->rank_lost = core->cfg.rank_lost;
	core->cfg.hooks = (struct cm_core_hooks){0};
	core->cfg.journal = NULL;
	core->cfg.rank_lost = NULL;
	return r;
}

static struct cm_session *find(struct cm_recovery *r, uint64_t id, size_t *at)
{
	for (size_t i = r->open.n; i-- > 0;)
		if (r->open.items[i].id == id) {
			if (at)
				*at = i;
			return r->open.items[i].s;
		}
	return NULL;
}

static struct cm_session *session(struct cm_recovery *r, uint64_t id)
{
	struct cm_session *s = find(r, id, NULL);
	if (s)
		return s;
	if (!cm_vec_reserve(&r->open, r->open.n + 1))
		return NULL;
	if ((s = cm_session_new(r->core, NULL)) == NULL)
		return NULL;
	s->id = id;
	s->journaled = true; /* its close goes in the journal at the end */
	r->open.items[r->open.n++] = (struct rsess){.id = id, .s = s};
	r->sessions++;
	if (id >= r->next_id)
		r->next_id = id + 1;
	return s;
}

/* The log entry of a journaled MSG, its payload admitted under --log-mem
 * as a sender's is (the same rule, the same rounded charge): while the
 * bound cannot take it, the log gives memory back (spilled by the log
 * writer) as it would for a held sender. NULL with *why set. */
static struct cm_entry *admitted_entry(struct cm_recovery *r, const struct cm_header *h,
                                       const char **why)
{
	struct cm_core *core = r->core;
	bool held;
	for (int tries = 0; tries <= 30000; tries++) {
		struct cm_entry *e = cm_entry_new(core, h, core->cfg.spill != NULL, &held);
		if (e != NULL || !held) {
			if (e == NULL)
				*why = "out of memory";
			return e;
		}
		for (uint32_t rank = 0; rank < cm_core_world_size(core); rank++)
			cm_core_relieve(core, (int)rank);
		nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
	}
	*why = "the log memory cannot take the journal's messages (raise --log-mem)";
	return NULL;
}

static int apply_msg(struct cm_recovery *r, struct cm_session *s, const struct cm_jrec *rec,
                     const uint8_t *data, size_t len, const char **why)
{
	struct cm_frame f = {.h = rec->h};
	if (rec->flags & CM_J_RESUME) {
		f.resume = true;
		cm_core_dispatch(s, &f);
		return 0;
	}
	bool cut = rec->flags & CM_J_CUT;
	if (len > rec->h.len || (!cut && len != rec->h.len)) {
		*why = "a message record whose payload does not match its length";
		return -1;
	}
	struct cm_entry *e = admitted_entry(r, &rec->h, why);
	if (e == NULL)
		return -1;
	if (len)
		memcpy(e->payload->data, data, len);
	if (rec->flags & CM_J_EXTENT)
		e->payload->extent = rec->extent; /* a resumed fill goes on writing it */
	if (cut) {
		/* As input.c leaves a cut-through MSG at its header. */
		e->payload->filled = (uint32_t)len;
		cm_buf_ref(e->payload);
		s->fill = e->payload;
		s->fill_got = (uint32_t)len;
		s->fill_verify = 0;
		s->fill_dst = rec->h.dst;
		s->fill_clock = rec->h.clock;
		f.cut = true;
	}
	f.entry = e;
	cm_core_dispatch(s, &f);
	return 0;
}

/* Inline records carry the new bytes; extent records the extent from its
 * start up to what is valid. */
static int apply_fill(struct cm_session *s, const struct cm_jrec *rec, const uint8_t *data,
                      size_t len, const char **why)
{
	struct cm_buf *b = s->fill;
	if (b == NULL) {
		*why = "payload bytes for a session that fills no message";
		return -1;
	}
	/* A resumed re-send's prefix was compared, not journaled. */
	if (s->fill_got < s->fill_verify)
		s->fill_got = s->fill_verify;
	if (rec->flags & CM_J_EXTENT) {
		if (len > b->len || len < s->fill_got) {
			*why = "an extent record that does not fit the message it fills";
			return -1;
		}
		data += s->fill_got;
		len -= s->fill_got;
		if (len == 0)
			return 0;
	}
	if (len > b->len - s->fill_got) {
		*why = "more payload bytes than the message has";
		return -1;
	}
	memcpy(b->data + s->fill_got, data, len);
	cm_cut_advance(s, (uint32_t)len);
	while (cm_session_fill_domain(s) >= 0)
		cm_session_fill_notify(s);
	return 0;
}

int cm_recovery_apply(struct cm_recovery *r, const struct cm_jrec *rec, const uint8_t *data,
                      size_t len, const char **why)
{
	r->records++;
	if (rec->kind == CM_J_CLOSED) {
		size_t at;
		struct cm_session *s = find(r, rec->session, &at);
		if (s == NULL)
			return 0; /* closed before it journaled anything */
		cm_session_closed(s);
		cm_session_release(s);
		cm_vec_remove(&r->open, at);
		drain_all(r);
		return 0;
	}
	struct cm_session *s = session(r, rec->session);
	if (s == NULL) {
		*why = "out of memory";
		return -1;
	}
	int rc = 0;
	switch (rec->kind) {
	case CM_J_FRAME: {
		struct cm_frame f = {.h = rec->h};
		if (rec->h.type == CM_T_HELLO) {
			if (cm_hello_decode(data, len, &f.hello) != CM_OK) {
				*why = "a HELLO record without its payload";
				return -1;
			}
		} else if (len > sizeof f.event || len != rec->h.len) {
			*why = "a frame record whose payload does not match its length";
			return -1;
		} else if (len) {
			memcpy(f.event, data, len);
		}
		if ((rec->h.type == CM_T_RECV_REQ || rec->h.type == CM_T_PROBE) && s->rank >= 0)
			s->core->dests[s->rank].posted++; /* as input.c counts them */
		cm_core_dispatch(s, &f);
		break;
	}
	case CM_J_MSG:
		if (s->rank < 0) {
			*why = "a message record before its session's HELLO";
			return -1;
		}
		rc = apply_msg(r, s, rec, data, len, why);
		break;
	case CM_J_FILL:
		rc = apply_fill(s, rec, data, len, why);
		break;
	default:
		*why = "an unknown record kind";
		return -1;
	}
	drain_all(r);
	return rc;
}

void cm_recovery_end(struct cm_recovery *r, uint64_t *records, uint64_t *sessions)
{
	struct cm_core *core = r->core;
	/* The dead CM's connections are gone: closed now, and journaled as
	 * closed, so that the ranks' new connections are admitted (the same
	 * incarnation reconnecting) and a later recovery sees the same. */
	core->cfg.journal = r->journal;
	for (size_t i = 0; i < r->open.n; i++) {
		cm_session_closed(r->open.items[i].s);
		cm_session_release(r->open.items[i].s);
	}
	core->cfg.hooks = r->hooks;
	core->cfg.rank_lost = r->rank_lost;
	uint64_t next = __atomic_load_n(&core->next_session_id, __ATOMIC_RELAXED);
	if (r->next_id > next)
		__atomic_store_n(&core->next_session_id, r->next_id, __ATOMIC_RELAXED);
	*records = r->records;
	*sessions = r->sessions;
	cm_vec_free(&r->open);
	free(r);
}
