/* The log of the completion calls' outcomes (mpi_test.h): events of kind
 * CM_EV_TEST through the transport's `event` hook.
 *
 * One record is 8 bytes, a little-endian u64:
 *   bits 0-3   call: 0 = none (a run of failed polls only), or enum cm_nd_call
 *   bit 4      more: another element of the same set follows (Testsome/Waitsome)
 *   bits 5-7   zero
 *   bits 8-31  misses: failed polls before this outcome (calls of the Test
 *              family that found nothing complete, whichever call)
 *   bits 32-63 value: the index completed (0 for Test, Testall,
 *              Request_get_status); for a set, one element per record
 *
 * Failed polls are counted, not logged one by one: a busy Test loop costs
 * nothing until it succeeds, and its count rides with the success in one
 * record. The count must still be logged before anything that may depend on
 * it leaves the rank, so every transport hook that emits a frame (isend,
 * irecv, probe, cancel, and an event of another kind such as an MPI_Wtime
 * value) is wrapped here: it first logs the pending count as a misses-only
 * record. The transport puts that event on the stream ahead of the frame
 * (and, before a message to another channel memory, waits for the
 * acknowledgement as for any event), so nothing costs a round trip of its
 * own.
 *
 * A process starts by following the log: at a decision with no record in
 * hand it passes its own outcome to the hook; a replayed record comes back
 * (a re-execution, or a replica that is not the master) and is obeyed, or
 * the log has run out, the hook has just logged the process's own outcome
 * and from then on the process leads (decides, counts, logs). A follower
 * owes the record's failed polls first, then its outcome; a frame while it
 * still owes some means the program took another path.
 *
 * A non-blocking collective's coroutine resumes when its transfer is done:
 * timing again, and what it sends then takes its place in the stream of
 * frames. Each resumption is a "step" record (call 8: bits 8-31 the
 * collective's id, bits 32-63 the number of frames the rank had produced,
 * counted by the wrapped hooks), logged before the coroutine runs. Not
 * resuming is a timing decision too: before a frame that follows a point
 * of the progress engine at which a collective was pending, a leader logs
 * a "mark" (call 9, the same count), so that no frame leaves the rank
 * depending on a decision the log does not hold. A follower reads the log
 * at every point (never only when a collective happens to be ready: that
 * is timing of the replay), resumes exactly the logged steps at their
 * counts, and before such a frame reads up to the mark. A record of
 * another call read ahead is kept for the next decision, so the failed
 * polls it owes still come after the frames before them. The argument is
 * in docs/collectives.md (replay of non-blocking collectives). */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>

#include "mpi_coll_nb.h"
#include "mpi_test.h"

#define ND_CALL_MASK 0xfu
#define ND_MORE 0x10u
#define ND_RESERVED 0xe0u
#define ND_MISSES_MAX 0xffffffu

struct nd_record {
	unsigned call; /* 0: failed polls only */
	int more;
	uint32_t misses;
	uint32_t value;
};

static struct {
	int on;               /* the transport logs events: the hooks below are wrapped */
	int lead;             /* the log has run out: this process decides */
	uint32_t pending;     /* leading: failed polls not logged yet */
	uint32_t owed_misses; /* following: failed polls the record in hand still owes */
	int held;             /* following: the record's outcome is still to be taken */
	struct nd_record rec; /* ...that record */
	uint32_t frames;      /* frames produced through the wrapped hooks */
	int in_point;         /* cm_mpi_nd_nbc_point is running */
	int step_held;        /* following: a step record in hand... */
	int mark_held;        /* ...or a mark */
	uint32_t step_id, step_at;
	int dirty; /* a point with a collective pending since the last mark */
	int look;  /* following: a record read ahead, for the next decision */
	struct nd_record look_rec;
	/* The transport's own hooks. */
	int (*isend)(struct cm_transport *t, struct cm_req *req);
	int (*irecv)(struct cm_transport *t, struct cm_req *req);
	int (*probe)(struct cm_transport *t, int src, int tag, uint32_t ctx, int blocking,
	             struct cm_probe_result *out);
	int (*event)(struct cm_transport *t, uint32_t kind, void *value, size_t len, int *replayed);
	int (*cancel)(struct cm_transport *t, struct cm_req *req, int *cancelled);
	int (*snapshot)(struct cm_transport *t, struct cm_resume *out);
} nd;

const char *cm_mpi_nd_call_name(int call)
{
	static const char *const names[] = {
	    [0] = "a failed poll",
	    [CM_ND_TEST] = "MPI_Test",
	    [CM_ND_TESTALL] = "MPI_Testall",
	    [CM_ND_TESTANY] = "MPI_Testany",
	    [CM_ND_WAITANY] = "MPI_Waitany",
	    [CM_ND_TESTSOME] = "MPI_Testsome",
	    [CM_ND_WAITSOME] = "MPI_Waitsome",
	    [CM_ND_GET_STATUS] = "MPI_Request_get_status",
	    [CM_ND_NBC_STEP] = "a non-blocking collective",
	    [CM_ND_NBC_MARK] = "the end of a non-blocking collective's steps",
	};
	return call >= 0 && call <= CM_ND_NBC_MARK ? names[call] : "?";
}

void cm_mpi_nd_diverged(const char *func, const char *fmt, ...)
{
	char why[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof why, fmt, ap);
	va_end(ap);
	fflush(stdout);
	fprintf(stderr,
	        "chanmem: rank %d: %s: cannot follow the logged outcome: %s (the program took "
	        "another path than the logged run: it must be deterministic apart from what MPI "
	        "calls return)\n",
	        cm_mpi.world_rank, func, why);
	MPI_Abort(MPI_COMM_WORLD, 1);
	cm_mpi_exit(1); /* not reached */
}

static void encode(const struct nd_record *r, uint8_t out[8])
{
	uint64_t v = (uint64_t)r->call | (r->more ? ND_MORE : 0) | (uint64_t)r->misses << 8 |
	             (uint64_t)r->value << 32;
	cm_put_u64(out, v);
}

static int single_outcome(unsigned call)
{
	return call == CM_ND_TEST || call == CM_ND_TESTALL || call == CM_ND_GET_STATUS;
}

/* Returns 0, or -1 for a record no version of this code writes. */
static int decode(const uint8_t in[8], struct nd_record *r)
{
	uint64_t v = cm_get_u64(in);
	r->call = (unsigned)(v & ND_CALL_MASK);
	r->more = (v & ND_MORE) != 0;
	r->misses = (uint32_t)(v >> 8) & ND_MISSES_MAX;
	r->value = (uint32_t)(v >> 32);
	if (r->call == CM_ND_NBC_STEP)
		return (v & ND_RESERVED) || r->more ? -1 : 0;
	if (r->call == CM_ND_NBC_MARK)
		return (v & ND_RESERVED) || r->more || r->misses ? -1 : 0;
	if ((v & ND_RESERVED) || r->call > CM_ND_GET_STATUS || r->value > INT_MAX)
		return -1;
	if (r->call == 0)
		return r->misses >= 1 && r->value == 0 && !r->more ? 0 : -1;
	if (single_outcome(r->call) && r->value != 0)
		return -1;
	if (r->more && r->call != CM_ND_TESTSOME && r->call != CM_ND_WAITSOME)
		return -1;
	return 0;
}

/* Passes *r to the hook: logged (*replayed = 0: the log has run out, this
 * process leads from now on) or replaced by the next logged record. */
static int put_record(struct nd_record *r, int *replayed, const char *func)
{
	uint8_t buf[8];
	encode(r, buf);
	if (nd.event(&cm_mpi.transport, CM_EV_TEST, buf, sizeof buf, replayed) < 0)
		return -1;
	if (!*replayed) {
		nd.lead = 1;
		return 0;
	}
	if (decode(buf, r) < 0)
		cm_mpi_nd_diverged(func, "malformed record %016llx",
		                   (unsigned long long)cm_get_u64(buf));
	return 0;
}

/* Leading: the record is this process's decision and must be logged. */
static int lead_record(struct nd_record r, const char *func)
{
	int replayed;
	if (put_record(&r, &replayed, func) < 0)
		return -1;
	if (replayed)
		cm_mpi_nd_diverged(func, "the log holds an outcome past its end");
	return 0;
}

static int flush_misses(const char *func)
{
	struct nd_record r = {.call = 0, .misses = nd.pending};
	nd.pending = 0;
	return lead_record(r, func);
}

/* Takes a record read while following: a step is held for the frame
 * count it names, anything else becomes the record in hand. */
static void take(const struct nd_record *r)
{
	if (r->call == CM_ND_NBC_MARK) {
		nd.mark_held = 1;
		nd.step_at = r->value;
		return;
	}
	if (r->call == CM_ND_NBC_STEP) {
		nd.step_held = 1;
		nd.step_id = r->misses;
		nd.step_at = r->value;
		return;
	}
	nd.rec = *r;
	nd.owed_misses = r->misses;
	nd.held = r->call != 0;
}

int cm_mpi_nd_first(enum cm_nd_call call, struct cm_nd_elem *e)
{
	const char *func = cm_mpi_nd_call_name(call);
	int waits = call == CM_ND_WAITANY || call == CM_ND_WAITSOME;
	if (cm_mpi_nd_nbc_point(1) < 0)
		return -1;
	while (!nd.lead && nd.owed_misses == 0 && !nd.held) {
		struct nd_record r;
		if (nd.look) {
			r = nd.look_rec;
			nd.look = 0;
		} else {
			r = (struct nd_record){.call = 0, .misses = 1};
			if (e->value >= 0)
				r = (struct nd_record){
				    .call = call, .more = e->more, .value = (uint32_t)e->value};
			int replayed;
			if (put_record(&r, &replayed, func) < 0)
				return -1;
			if (!replayed)
				return 0; /* our own outcome, now logged */
		}
		take(&r);
		if ((nd.step_held || nd.mark_held) && cm_mpi_nd_nbc_point(1) < 0)
			return -1;
	}
	if (nd.lead) {
		if (e->value < 0)
			return ++nd.pending == ND_MISSES_MAX ? flush_misses(func) : 0;
		struct nd_record r = {.call = call,
		                      .more = e->more,
		                      .misses = nd.pending,
		                      .value = (uint32_t)e->value};
		nd.pending = 0;
		return lead_record(r, func);
	}
	if (nd.owed_misses > 0) {
		if (waits)
			cm_mpi_nd_diverged(func, "the log says nothing was complete, which a wait "
			                         "cannot return");
		nd.owed_misses--;
		*e = (struct cm_nd_elem){.value = -1, .more = 0};
		return 0;
	}
	nd.held = 0;
	if (nd.rec.call != (unsigned)call)
		cm_mpi_nd_diverged(func, "the logged outcome is of %s",
		                   cm_mpi_nd_call_name((int)nd.rec.call));
	*e = (struct cm_nd_elem){.value = (int)nd.rec.value, .more = nd.rec.more};
	return 0;
}

int cm_mpi_nd_next(enum cm_nd_call call, struct cm_nd_elem *e)
{
	const char *func = cm_mpi_nd_call_name(call);
	struct nd_record r = {.call = call, .more = e->more, .value = (uint32_t)e->value};
	if (nd.lead)
		return lead_record(r, func);
	int replayed;
	if (put_record(&r, &replayed, func) < 0)
		return -1;
	if (!replayed)
		return 0; /* the log broke off inside the set: the rest is ours */
	if (r.call != (unsigned)call || r.misses != 0)
		cm_mpi_nd_diverged(func, "the logged set of completed requests ends early");
	*e = (struct cm_nd_elem){.value = (int)r.value, .more = r.more};
	return 0;
}

int cm_mpi_nd_replaying(void)
{
	return nd.on && !nd.lead;
}

/* ---- the wrapped hooks: the pending count goes first ---- */

/* Where a follower reads the log of steps: a point of the progress engine
 * (the leader's points: decisions and cm_mpi_progress), a decision (its
 * record comes after anything read here), the start of a collective (steps
 * due must be taken before its coroutine runs: no coroutine resumes
 * another), or a frame about to be produced. */
enum follow_at { AT_POINT, AT_DECISION, AT_START, AT_FRAME };

static int follow(enum follow_at at);

/* What must be in the log before the next frame: the failed polls and,
 * after a point that decided by timing, a mark (leading), or the records
 * up to that frame (following). frame: a frame is produced now and
 * counted; 0 for a checkpoint's cut, which is no frame: a re-execution
 * takes its images at other points (they are due by time), so counting
 * the cut would shift every later step and mark it follows. */
static int settle(int frame)
{
	if (nd.in_point) {
		/* A coroutine resumed at a logged step: its frames follow from
		 * the step, nothing was decided since. */
		nd.frames += frame != 0;
		return 0;
	}
	if (!nd.lead && follow(AT_FRAME) < 0)
		return -1;
	if (nd.lead) {
		if (nd.pending && flush_misses("MPI_Test") < 0)
			return -1;
		/* A point since the last mark decided, by timing, that no
		 * collective went on there: logged before the frame that
		 * depends on it (the pessimistic condition), or a re-execution
		 * whose log ends here could decide otherwise and send another
		 * frame in this one's place. */
		if (nd.dirty) {
			struct nd_record m = {.call = CM_ND_NBC_MARK, .value = nd.frames};
			if (lead_record(m, "MPI") < 0)
				return -1;
			nd.dirty = 0;
		}
		nd.frames += frame != 0;
		return 0;
	}
	if (!frame)
		return 0; /* owed polls may still come before the next frame */
	nd.frames++;
	if (nd.owed_misses > 0)
		cm_mpi_nd_diverged("MPI", "%u more failed polls were logged before this point",
		                   (unsigned)nd.owed_misses);
	if (nd.held)
		cm_mpi_nd_diverged("MPI", "an outcome of %s was logged before this point",
		                   cm_mpi_nd_call_name((int)nd.rec.call));
	return 0;
}

static int before_frame(void)
{
	return settle(1);
}

static int wrap_isend(struct cm_transport *t, struct cm_req *req)
{
	return before_frame() < 0 ? -1 : nd.isend(t, req);
}

static int wrap_irecv(struct cm_transport *t, struct cm_req *req)
{
	return before_frame() < 0 ? -1 : nd.irecv(t, req);
}

static int wrap_probe(struct cm_transport *t, int src, int tag, uint32_t ctx, int blocking,
                      struct cm_probe_result *out)
{
	return before_frame() < 0 ? -1 : nd.probe(t, src, tag, ctx, blocking, out);
}

static int wrap_cancel(struct cm_transport *t, struct cm_req *req, int *cancelled)
{
	*cancelled = 0;
	return before_frame() < 0 ? -1 : nd.cancel(t, req, cancelled);
}

/* Following: a record taken from the log but not acted on yet (polls
 * owed, an outcome held, a step or mark held, a record read ahead). */
static int record_in_hand(void)
{
	return !nd.lead &&
	       (nd.owed_misses > 0 || nd.held || nd.step_held || nd.mark_held || nd.look);
}

/* A checkpoint image cuts the event log at the snapshot: the polls counted
 * so far must be logged below the cut, or a rank restored from the image
 * would start with none pending while the log's next record still counts
 * them (it would poll in vain once more than the dead incarnation did).
 * A follower with a record in hand has no cut that fits: the transport has
 * handed the record over, so a rank restored from the image would start
 * past it. That includes a record settle reads ahead (it may be a
 * collective's step due first). No image this time (2). */
static int wrap_snapshot(struct cm_transport *t, struct cm_resume *out)
{
	if (cm_nbc_pending())
		return 1; /* a collective still running is a request pending */
	if (record_in_hand())
		return 2;
	if (settle(0) < 0)
		return -1;
	if (record_in_hand())
		return 2;
	int rc = nd.snapshot(t, out);
	if (rc == 0) {
		/* What the log after the cut counts from: the frames, the
		 * collectives' ids and the world's and self's collective tags. */
		out->nd_frames = nd.frames;
		out->nbc_next_id = cm_nbc_next_id();
		out->nbc_seq_world = cm_mpi_comm_get(MPI_COMM_WORLD)->nbc_seq;
		out->nbc_seq_self = cm_mpi_comm_get(MPI_COMM_SELF)->nbc_seq;
	}
	return rc;
}

void cm_mpi_nd_resume(const struct cm_resume *r)
{
	nd.frames = r->nd_frames;
	cm_nbc_set_next_id(r->nbc_next_id);
	cm_mpi_comm_get(MPI_COMM_WORLD)->nbc_seq = r->nbc_seq_world;
	cm_mpi_comm_get(MPI_COMM_SELF)->nbc_seq = r->nbc_seq_self;
}

/* Another kind of event (MPI_Wtime): a follower whose hook says the log
 * has run out leads from now on. */
static int wrap_event(struct cm_transport *t, uint32_t kind, void *value, size_t len, int *replayed)
{
	*replayed = 0;
	if (before_frame() < 0 || nd.event(t, kind, value, len, replayed) < 0)
		return -1;
	if (!*replayed)
		nd.lead = 1;
	return 0;
}

/* ---- non-blocking collectives' steps ---- */

/* Resumes coroutine id at a logged step (following). 0, -1 if the
 * transport failed. */
static int force_step(uint32_t id)
{
	if (cm_nbc_inside())
		cm_mpi_nd_diverged("MPI", "a step of a non-blocking collective is due inside "
		                          "another one");
	int saved = nd.in_point;
	nd.in_point = 1;
	int rc = cm_nbc_force(id);
	nd.in_point = saved;
	if (rc == -2)
		cm_mpi_nd_diverged("MPI", "the logged step is of a non-blocking collective that "
		                          "is not waiting");
	/* The leader's point that logged the step ended with a collective
	 * pending at its start. */
	nd.dirty = 1;
	return rc < 0 ? -1 : 0;
}

/* Following: takes what the log says about the collectives here. The
 * leader logged every step at a point, at the frame count it names, and a
 * mark before every frame that followed a point with a collective pending;
 * so steps at the current count are taken as soon as they are read, and
 * before a frame after such a point the log must be read up to its mark,
 * waiting for it when the transport does not know it yet (a replica ahead
 * of its master). When the log has run out the rank leads from here.
 * Returns the number of coroutines resumed, -1 if the transport failed. */
static int follow(enum follow_at at)
{
	int resumed = 0;
	int need_mark = (at == AT_FRAME || at == AT_START) && nd.dirty;
	while (!nd.lead) {
		if (nd.step_held) {
			int32_t ahead = (int32_t)(nd.step_at - nd.frames);
			if (ahead < 0 || (ahead > 0 && (at == AT_DECISION || need_mark)))
				cm_mpi_nd_diverged("MPI",
				                   "a step of a non-blocking collective was logged "
				                   "after %u frames, this point is after %u",
				                   (unsigned)nd.step_at, (unsigned)nd.frames);
			if (ahead > 0)
				break;
			nd.step_held = 0;
			if (force_step(nd.step_id) < 0)
				return -1;
			resumed++;
			need_mark = at == AT_FRAME || at == AT_START;
			continue;
		}
		if (nd.mark_held) {
			int32_t ahead = (int32_t)(nd.step_at - nd.frames);
			if (ahead > 0 && !need_mark && at != AT_DECISION)
				break; /* it closes the steps of a later count */
			if (ahead != 0 || at == AT_DECISION)
				cm_mpi_nd_diverged(
				    "MPI",
				    "the steps of non-blocking collectives were closed "
				    "after %u frames, this point is after %u%s",
				    (unsigned)nd.step_at, (unsigned)nd.frames,
				    at == AT_DECISION ? " and decides an outcome" : "");
			if (at == AT_FRAME) {
				nd.mark_held = 0;
				nd.dirty = 0;
			}
			break;
		}
		if (nd.owed_misses || nd.held || nd.look) {
			if (need_mark)
				cm_mpi_nd_diverged("MPI",
				                   "an outcome was logged where the steps of "
				                   "non-blocking collectives were closed");
			break; /* a record of another call comes first */
		}
		struct cm_transport *t = &cm_mpi.transport;
		uint32_t kind = 0;
		int rc = t->event_peek ? t->event_peek(t, &kind) : -1;
		if (rc == 0) {
			nd.lead = 1; /* the log has run out: decide from here */
			break;
		}
		if (rc < 0) {
			if (!need_mark || !t->event_peek)
				break;
			if (t->progress(t, -1) < 0)
				return -1;
			continue;
		}
		if (kind != CM_EV_TEST) {
			if (need_mark)
				cm_mpi_nd_diverged("MPI",
				                   "an event of kind %u was logged where the "
				                   "steps of non-blocking collectives were "
				                   "closed",
				                   (unsigned)kind);
			break; /* read by its own call */
		}
		struct nd_record r = {.call = CM_ND_NBC_MARK, .value = nd.frames};
		int replayed;
		if (put_record(&r, &replayed, "MPI") < 0)
			return -1;
		if (!replayed)
			cm_mpi_nd_diverged("MPI", "the log ended after announcing a record");
		if (r.call == CM_ND_NBC_STEP || r.call == CM_ND_NBC_MARK) {
			take(&r);
		} else {
			nd.look = 1;
			nd.look_rec = r;
		}
	}
	return resumed;
}

/* Leading: resumes every coroutine whose transfer is complete, the oldest
 * first, each logged before it runs. */
static int lead_steps(void)
{
	int resumed = 0;
	uint32_t id;
	while (cm_nbc_ready(&id)) {
		if (nd.pending && flush_misses("MPI_Test") < 0)
			return -1;
		struct nd_record r = {
		    .call = CM_ND_NBC_STEP, .misses = id & ND_MISSES_MAX, .value = nd.frames};
		if (lead_record(r, "MPI") < 0)
			return -1;
		cm_nbc_resume(id);
		resumed++;
	}
	return resumed;
}

int cm_mpi_nd_nbc_point(int decision)
{
	if (cm_nbc_inside() || nd.in_point)
		return 0;
	int pending = cm_nbc_pending();
	if (!pending && !nd.step_held && !nd.mark_held)
		return 0;
	int resumed = 0;
	uint32_t id;
	if (!cm_mpi_nd_on()) {
		while (cm_nbc_ready(&id)) {
			cm_nbc_resume(id);
			resumed++;
		}
		return resumed;
	}
	nd.in_point = 1;
	if (!nd.lead)
		resumed = follow(decision ? AT_DECISION : AT_POINT);
	if (resumed >= 0 && nd.lead) {
		int more = lead_steps();
		resumed = more < 0 ? -1 : resumed + more;
	}
	/* Whether a collective went on here or not was decided by timing: the
	 * frames that follow depend on it (the mark, before_frame). */
	if (pending)
		nd.dirty = 1;
	nd.in_point = 0;
	return resumed;
}

int cm_mpi_nd_nbc_start(void)
{
	if (!cm_mpi_nd_on() || nd.lead || nd.in_point)
		return 0;
	return follow(AT_START) < 0 ? -1 : 0;
}

int cm_mpi_nd_on(void)
{
	if (nd.on)
		return 1;
	struct cm_transport *t = &cm_mpi.transport;
	if (t->event == NULL)
		return 0; /* nothing logs events (yet: a test may add the hook) */
	nd.on = 1;
	nd.isend = t->isend;
	nd.irecv = t->irecv;
	nd.probe = t->probe;
	nd.event = t->event;
	nd.cancel = t->cancel;
	nd.snapshot = t->snapshot;
	t->isend = wrap_isend;
	t->irecv = wrap_irecv;
	t->probe = wrap_probe;
	t->event = wrap_event;
	if (t->cancel)
		t->cancel = wrap_cancel;
	if (t->snapshot)
		t->snapshot = wrap_snapshot;
	return 1;
}
