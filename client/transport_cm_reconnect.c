/* Surviving a channel memory's death (CHANMEM_CM_RECONNECT=<seconds>,
 * which cmrun --cm-restart sets): the CM is restarted on the same address
 * and recovers its state from its journal; the rank reconnects and sends
 * again whatever the CM may not have logged.
 *
 * Every connection retains the MSGs it wrote until LOGGED covers them
 * (conn.c). When one ends (EOF, reset, any error but an ERROR frame, which
 * is the CM's verdict), it is broken (partial inbound frame dropped, a
 * DELIVER cut short gives its receive back to the posted ones) and
 * connected again every RETRY_MS until the time limit, then it is the
 * usual fatal "lost connection". The HELLO is the same incarnation's,
 * without TAKEOVER: a reconnection is not a restart, nothing is executed
 * again, so the MPI layer never sees it (but a restarted rank's init past
 * its takeover time says TAKEOVER: hello_flags); only HELLO is written
 * until HELLO_ACK(C). Then, in this order:
 *   1. the events home has not acknowledged (home only): pessimistic
 *      logging wants an event logged before anything that may depend on it,
 *      and a re-sent message may;
 *   2. the retained MSGs with clock >= C, in clock order (those below C are
 *      logged and freed), each whole even if it was partly written;
 *   3. synchronous sends below C still without SYNC_ACK: the CM drops them
 *      as logged and answers SYNC_ACK again (the first may have been lost);
 *   4. the outstanding requests in their order (home only): RECV_REQs and
 *      the probe without their answer, by id; the CANCEL without CANCEL_ACK;
 *   5. EVENT_ACK requests without their answer (the replay request first);
 *   6. the last TRIM (home), and BYE if it was said and not acknowledged.
 * Frames the rank queued while the connection was down are sorted the
 * same way: its MSGs go after the retained ones, its other frames are
 * re-created from the state above.
 *
 * A CM with a standby (CHANMEM_CM_STANDBYS: cmserver --standby on another
 * host, which takes over when the CM dies) is tried at its address and
 * its standby's in turn: the standby turns ranks away until it serves. */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "net.h"
#include "transport_cm.h"
#include "units.h"

#define RETRY_MS 50
#define CONNECT_TRY_MS 1000
#define RECONNECT_MAX_S 86400
/* Silence on a CM connection (TCP keepalive: idle, probe interval, probes;
 * unacknowledged data) after which it counts as lost. */
#define KEEPALIVE_IDLE_S 2
#define KEEPALIVE_INTERVAL_S 1
#define KEEPALIVE_COUNT 3
#define USER_TIMEOUT_MS 5000

/* Each CM's standby (env.c parsed CHANMEM_CM_STANDBYS), or none. */
static int standbys_init(struct cmt *s, const struct cm_job *job)
{
	if ((s->alts = calloc((size_t)s->ncms, sizeof *s->alts)) == NULL)
		goto oom;
	for (int i = 0; job->cm_standbys && i < s->ncms; i++) {
		if (job->cm_standbys[i] == NULL)
			continue;
		if ((s->alts[i].addr[0] = strdup(job->cm_standbys[i])) == NULL)
			goto oom;
		s->alts[i].n = 1;
	}
	return 0;
oom:
	cm_err("rank %d: out of memory", s->rank);
	return -1;
}

/* The address of CM cm to try the n-th time: its own, then each other
 * place it may serve from, in turn. */
static const char *address_of_try(const struct cmt *s, int cm, const char *addr, unsigned n)
{
	unsigned alts = s->alts ? s->alts[cm].n : 0;
	unsigned k = n % (alts + 1);
	return k == 0 ? addr : s->alts[cm].addr[k - 1];
}

int cmt_standby_named(struct cmt *s, struct cm_conn *c, size_t len)
{
	if (s->alts == NULL)
		return 0; /* no reconnection: nothing would try it */
	const uint8_t *text = s->alts[c->peer].named;
	char addr_text[CM_STANDBY_ADDR_MAX + 1];
	struct cm_addr addr;
	char why[128];
	for (size_t i = 0; i < len; i++)
		if (text[i] < 0x21 || text[i] > 0x7e)
			return cm_conn_fail(c, "STANDBY: not an address");
	memcpy(addr_text, text, len);
	addr_text[len] = '\0';
	if (cm_parse_addr(addr_text, &addr, why, sizeof why) < 0)
		return cm_conn_fail(c, "STANDBY '%s': %s", addr_text, why);
	struct cmt_alts *a = &s->alts[c->peer];
	if (strcmp(addr_text, s->addrs[c->peer]) == 0)
		return 0;
	for (unsigned i = 0; i < a->n; i++)
		if (strcmp(addr_text, a->addr[i]) == 0)
			return 0;
	char *copy = strdup(addr_text);
	if (copy == NULL)
		return cm_conn_fail(c, "out of memory");
	if (a->n == CMT_ALTS_MAX) {
		free(a->addr[0]);
		memmove(a->addr, a->addr + 1, (CMT_ALTS_MAX - 1) * sizeof a->addr[0]);
		a->n--;
	}
	a->addr[a->n++] = copy;
	cm_info("rank %d: %s names its standby %s", s->rank, c->name, addr_text);
	return 0;
}

int cmt_connect_first(struct cmt *s, int cm, const char *addr_text, int timeout_ms)
{
	int standby = s->alts && s->alts[cm].n > 0;
	long long deadline = cm_now_ms() + timeout_ms;
	for (unsigned turn = 0;; turn++) {
		const char *text = address_of_try(s, cm, addr_text, turn);
		struct cm_addr addr;
		char why[128];
		if (cm_parse_addr(text, &addr, why, sizeof why) < 0) {
			errno = EINVAL;
			return -1;
		}
		long long left = deadline - cm_now_ms();
		int fd = cm_connect(&addr, (int)(standby && left > CONNECT_TRY_MS ? CONNECT_TRY_MS
		                                 : left > 0                       ? left
		                                                                  : 0));
		if (fd >= 0 || cm_now_ms() >= deadline)
			return fd;
	}
}

int cmt_reconnect_init(struct cmt *s, const struct cm_job *job)
{
	const char *text = getenv("CHANMEM_CM_RECONNECT");
	long seconds = 0;
	if (text && *text && cm_parse_long(text, 0, RECONNECT_MAX_S, &seconds) < 0) {
		cm_err("rank %d: CHANMEM_CM_RECONNECT '%s': expected seconds from 0 to %d", s->rank,
		       text, RECONNECT_MAX_S);
		return -1;
	}
	if (seconds == 0)
		return 0;
	s->links = calloc((size_t)s->ncms, sizeof *s->links);
	s->addrs = calloc((size_t)s->ncms, sizeof *s->addrs);
	if (s->links == NULL || s->addrs == NULL)
		goto oom;
	for (int i = 0; i < s->ncms; i++)
		if ((s->addrs[i] = strdup(job->cms[i])) == NULL)
			goto oom;
	if (standbys_init(s, job) < 0)
		return -1;
	s->incarnation = job->incarnation;
	memcpy(s->secret, job->secret, CM_SECRET_LEN);
	s->reconnect_ms = seconds * 1000LL;
	return 0;
oom:
	cm_err("rank %d: out of memory", s->rank);
	return -1;
}

/* A CM behind a partition or on a host that vanished sends no FIN: the
 * connection must fail on its own for the rank to try the standby. */
static void watch_silence(int fd)
{
	(void)cm_set_keepalive(fd, KEEPALIVE_IDLE_S, KEEPALIVE_INTERVAL_S, KEEPALIVE_COUNT,
	                       USER_TIMEOUT_MS);
}

void cmt_reconnect_watch(struct cmt *s, struct cm_conn *c)
{
	if (s->reconnect_ms == 0)
		return;
	watch_silence(c->fd);
	cm_conn_retain(c);
	c->peer_may_die = 1; /* a reset or a cut frame: reconnect, nothing to print */
}

void cmt_reconnect_free(struct cmt *s)
{
	for (int i = 0; s->addrs && i < s->ncms; i++)
		free(s->addrs[i]);
	for (int i = 0; s->alts && i < s->ncms; i++)
		for (unsigned k = 0; k < s->alts[i].n; k++)
			free(s->alts[i].addr[k]);
	free(s->addrs);
	free(s->alts);
	s->alts = NULL;
	free(s->links);
	free(s->ev_kept);
	s->addrs = NULL;
	s->links = NULL;
	s->ev_kept = NULL;
}

int cmt_reconnect_start(struct cmt *s, int cm)
{
	struct cm_conn *c = s->cms[cm];
	if (s->reconnect_ms == 0 || c->refused)
		return -1;
	/* A DELIVER cut short: its receive is posted again and answered again. */
	if (c->in_body && c->in_sink.kind == SINK_DELIVER &&
	    cm_reqmap_put(&s->recvs, c->in_sink.cookie) < 0)
		return -1;
	cmt_push_broken(s, c); /* and a pushed one is pushed again */
	cm_conn_break(c);
	struct cmt_link *l = &s->links[cm];
	long long now = cm_now_ms();
	if (!l->down) { /* not when the new connection broke in turn */
		l->down = 1;
		l->down_since = now;
		cm_info("rank %d: lost connection to %s: reconnecting", s->rank, c->name);
	}
	l->next_try = now;
	return 0;
}

static void try_connect(struct cmt *s, int cm, long long left_ms)
{
	struct cm_conn *c = s->cms[cm];
	struct cmt_link *l = &s->links[cm];
	const char *text = address_of_try(s, cm, s->addrs[cm], l->tries++);
	struct cm_addr addr;
	char why[128];
	if (cm_parse_addr(text, &addr, why, sizeof why) < 0)
		return; /* it was good at init */
	/* With other places to try, a refusal moves on to the next one at
	 * once: the CM may be back at any of them. */
	long long budget = s->alts && s->alts[cm].n > 0 ? 0
	                   : left_ms < CONNECT_TRY_MS   ? left_ms
	                                                : CONNECT_TRY_MS;
	int fd = cm_connect(&addr, (int)budget);
	if (fd < 0)
		return;
	watch_silence(fd);
	if (cm_conn_attach(c, fd) < 0) {
		close(fd);
		return;
	}
	if (cm_conn_send_hello(c, s->hello_flags, s->rank, s->rank, s->incarnation,
	                       (unsigned)s->size, CM_PEER_RANK, s->secret) < 0)
		cmt_check_lost(s); /* broken again: the next try comes */
}

int cmt_reconnect_poll(struct cmt *s)
{
	if (s->links == NULL)
		return -1;
	long long wait = -1;
	for (int i = 0; i < s->ncms && !s->dead; i++) {
		struct cmt_link *l = &s->links[i];
		if (!l->down)
			continue;
		long long now = cm_now_ms();
		long long left = l->down_since + s->reconnect_ms - now;
		if (left <= 0) {
			cm_err("rank %d: lost connection to %s (not back within %lld s)", s->rank,
			       s->cms[i]->name, s->reconnect_ms / 1000);
			s->dead = 1;
			break;
		}
		if (s->cms[i]->fd < 0 && now >= l->next_try) {
			try_connect(s, i, left);
			now = cm_now_ms();
			l->next_try = now + RETRY_MS;
		}
		/* Attached: HELLO_ACK comes on the socket; the limit still holds. */
		long long next = s->cms[i]->fd < 0 ? l->next_try - now : left;
		if (next < 0)
			next = 0;
		if (wait < 0 || next < wait)
			wait = next;
	}
	return wait > INT32_MAX ? INT32_MAX : (int)wait;
}

int cmt_event_keep(struct cmt *s, uint64_t idx, uint32_t kind, const void *value, size_t len)
{
	if (s->reconnect_ms == 0)
		return 0;
	if (s->ev_kept_n == 0)
		s->ev_kept_base = idx;
	if (s->ev_kept_n == s->ev_kept_cap) {
		uint64_t cap = s->ev_kept_cap ? s->ev_kept_cap * 2 : 64;
		struct cm_replayed_event *v = realloc(s->ev_kept, cap * sizeof *v);
		if (v == NULL) {
			cm_err("rank %d: out of memory keeping events", s->rank);
			return -1;
		}
		s->ev_kept = v;
		s->ev_kept_cap = cap;
	}
	struct cm_replayed_event *ev = &s->ev_kept[s->ev_kept_n++];
	ev->kind = kind;
	ev->len = (uint8_t)len;
	memcpy(ev->value, value, len);
	return 0;
}

void cmt_events_acked(struct cmt *s)
{
	if (s->ev_kept_n == 0 || s->ev_acked <= s->ev_kept_base)
		return;
	uint64_t k = s->ev_acked - s->ev_kept_base;
	if (k > s->ev_kept_n)
		k = s->ev_kept_n;
	memmove(s->ev_kept, s->ev_kept + k, (size_t)(s->ev_kept_n - k) * sizeof *s->ev_kept);
	s->ev_kept_n -= k;
	s->ev_kept_base += k;
}

/* Step 4: receive requests and the probe share one id sequence. */
static int repost_requests(struct cmt *s, struct cm_conn *c)
{
	int ok;
	struct cm_req **v = cm_reqmap_sorted(&s->recvs, &ok);
	if (!ok)
		return cm_conn_fail(c, "out of memory re-posting requests");
	int rc = 0, probe = s->probe_waiting;
	for (size_t k = 0; k <= s->recvs.count && rc == 0; k++) {
		struct cm_req *r = k < s->recvs.count ? v[k] : NULL;
		if (probe && (r == NULL || s->probe_id < r->id)) {
			probe = 0;
			rc = cm_conn_queue_ctl(c,
			                       &(struct cm_header){.type = CM_T_PROBE,
			                                           .flags = s->probe_flags,
			                                           .src = s->probe_src,
			                                           .dst = s->rank,
			                                           .tag = s->probe_tag,
			                                           .ctx = s->probe_ctx,
			                                           .clock = s->probe_id},
			                       NULL, 0);
		}
		if (r && rc == 0)
			rc = cm_conn_queue_ctl(c,
			                       &(struct cm_header){.type = CM_T_RECV_REQ,
			                                           .src = r->peer,
			                                           .dst = s->rank,
			                                           .tag = r->tag,
			                                           .ctx = r->ctx,
			                                           .clock = r->id},
			                       NULL, 0);
	}
	free(v);
	if (rc == 0 && s->cancel_waiting)
		rc = cm_conn_queue_ctl(
		    c,
		    &(struct cm_header){
		        .type = CM_T_CANCEL, .src = s->rank, .dst = s->rank, .clock = s->cancel_id},
		    NULL, 0);
	return rc;
}

/* Step 3. */
static int resend_syncs(struct cmt *s, struct cm_conn *c)
{
	int ok;
	struct cm_req **v = cm_reqmap_sorted(&s->syncs, &ok);
	if (!ok)
		return cm_conn_fail(c, "out of memory re-sending messages");
	int rc = 0;
	for (size_t k = 0; k < s->syncs.count && rc == 0; k++) {
		struct cm_req *r = v[k];
		if (s->home[r->peer] != c->peer || r->id >= c->ack_clock)
			continue;
		struct cm_header h = {.type = CM_T_MSG,
		                      .flags = CM_F_SYNC,
		                      .src = s->rank,
		                      .dst = r->peer,
		                      .tag = r->tag,
		                      .ctx = r->ctx,
		                      .clock = r->id};
		rc = cm_conn_queue_again(c, &h, r->sbuf, r->slen);
	}
	free(v);
	return rc;
}

int cmt_trim_send(struct cmt *s, struct cm_conn *c, int queue)
{
	uint8_t cuts[CM_TRIM_PAYLOAD_MAX];
	cm_put_u64(cuts, s->trim_events);
	cm_put_u64(cuts + 8, s->trim_pushes);
	struct cm_header h = {
	    .type = CM_T_TRIM, .src = s->rank, .dst = s->rank, .clock = s->trim_reqid};
	return queue ? cm_conn_queue_ctl(c, &h, cuts, sizeof cuts)
	             : cm_conn_send_ctl(c, &h, cuts, sizeof cuts);
}

int cmt_reconnect_resume(struct cm_conn *c)
{
	struct cmt *s = c->owner;
	int cm = c->peer, home = cm == s->myhome;
	if (s->links == NULL || !s->links[cm].down)
		return 0; /* the first connection */
	s->links[cm].down = 0;
	cm_conn_resume(c);
	int rc = 0;
	for (uint64_t i = s->ev_acked; home && i < s->ev_next && rc == 0; i++) {
		const struct cm_replayed_event *ev = &s->ev_kept[i - s->ev_kept_base];
		rc = cm_conn_queue_ctl(c,
		                       &(struct cm_header){.type = CM_T_EVENT,
		                                           .src = s->rank,
		                                           .dst = s->rank,
		                                           .tag = (int)ev->kind,
		                                           .clock = i},
		                       ev->value, ev->len);
	}
	unsigned msgs = cm_conn_resend(c);
	if (rc == 0)
		rc = resend_syncs(s, c);
	if (rc == 0 && home)
		rc = repost_requests(s, c);
	if (rc == 0 && home)
		rc = cmt_push_start(s, c, 1);
	for (unsigned k = 0; k < s->acks_out[cm] && rc == 0; k++) {
		int replay = home && s->ev_fetching && k == 0;
		rc = cm_conn_queue_ctl(
		    c,
		    &(struct cm_header){.type = CM_T_EVENT_ACK,
		                        .flags = replay ? CM_F_REPLAY : 0,
		                        .src = s->rank,
		                        .dst = s->rank,
		                        .clock = replay ? s->replay_base + s->nreplay : s->ev_next},
		    NULL, 0);
	}
	if (rc == 0 && home && s->trim_sent)
		rc = cmt_trim_send(s, c, 1);
	if (rc == 0 && s->saying_bye && !s->bye_acked[cm])
		rc = cm_conn_queue_ctl(
		    c, &(struct cm_header){.type = CM_T_BYE, .src = s->rank, .dst = s->rank}, NULL,
		    0);
	if (rc < 0)
		return -1;
	cm_info("rank %d: reconnected to %s (next clock it expects %llu): %u messages sent again",
	        s->rank, c->name, (unsigned long long)c->ack_clock, msgs);
	return cm_conn_release(c);
}

/* A CM connection that ended is fatal, unless it ended after our BYE was
 * acknowledged or it can be re-established. */
void cmt_check_lost(struct cmt *s)
{
	for (int i = 0; i < s->ncms; i++) {
		struct cm_conn *c = s->cms[i];
		if (c == NULL || cm_conn_alive(c) || s->bye_acked[i])
			continue;
		if (!s->dead && cmt_reconnect_start(s, i) == 0)
			continue;
		if (!s->dead)
			cm_err("rank %d: lost connection to %s", s->rank, c->name);
		s->dead = 1;
	}
}

int cmt_sent(struct cmt *s, int rc)
{
	if (rc < 0)
		cmt_check_lost(s);
	return rc < 0 && (s->dead || s->reconnect_ms == 0) ? -1 : 0;
}

struct cm_conn *cmt_conn(struct cmt *s, int cm)
{
	if (!cm_conn_alive(s->cms[cm]))
		cmt_check_lost(s);
	return s->cms[cm];
}
