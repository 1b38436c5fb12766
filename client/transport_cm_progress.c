/* The channel-memory transport's progress engine: writes what waits,
 * re-establishes broken connections when their turn comes, and sleeps in
 * the kernel until a CM connection can be read or written. Below
 * transport_cm.c and transport_cm_events.c, which both wait through it;
 * it calls only down (coalescing, reconnection, conn.c). */
#include <config.h>

#include <errno.h>
#include <poll.h>
#include <string.h>

#include "log.h"
#include "transport_cm.h"

int cmt_progress(struct cm_transport *t, int timeout_ms)
{
	struct cmt *s = t->state;
	if (s->dead)
		return -1;
	if (s->co.deferred && cmt_sent(s, cmt_coalesce_flush(s)) < 0)
		return -1;
	cmt_push_waiting(s);
	int retry_ms = cmt_reconnect_poll(s);
	if (s->dead)
		return -1;
	if (retry_ms >= 0 && (timeout_ms < 0 || retry_ms < timeout_ms))
		timeout_ms = retry_ms;
	if (timeout_ms < 0 && s->ncms == 1 && cm_conn_alive(s->cms[0]) &&
	    !cm_conn_pending_output(s->cms[0])) {
		/* One CM and nothing to write: sleep in the read itself. */
		cm_conn_read_wait(s->cms[0]);
		cmt_check_lost(s);
		return s->dead ? -1 : 0;
	}
	int n = 0;
	for (int i = 0; i < s->ncms; i++) {
		struct cm_conn *c = s->cms[i];
		short ev = POLLIN;
		/* Only a full socket waits for POLLOUT. Output merely queued
		 * (events, which need not leave before the next frame to that
		 * CM) goes out with that frame, in the same sendmsg. */
		if (c->wblocked)
			ev |= POLLOUT;
		/* A finished connection stays in the set with fd -1 (ignored). */
		s->pfds[n++] = (struct pollfd){.fd = cm_conn_alive(c) ? c->fd : -1, .events = ev};
	}
	int r = poll(s->pfds, (nfds_t)n, timeout_ms);
	if (r < 0) {
		if (errno == EINTR)
			return 0;
		cm_err("rank %d: poll: %s", s->rank, strerror(errno));
		return -1;
	}
	for (int i = 0; i < n && r > 0; i++) {
		short ev = s->pfds[i].revents;
		if (ev == 0)
			continue;
		r--;
		struct cm_conn *c = s->cms[i];
		if ((ev & (POLLOUT | POLLERR | POLLHUP)) && cm_conn_pending_output(c) &&
		    cm_conn_alive(c)) {
			c->wblocked = 0;
			cm_conn_flush(c);
		}
		if ((ev & (POLLIN | POLLERR | POLLHUP)) && cm_conn_alive(c))
			cm_conn_read(c);
	}
	cmt_check_lost(s);
	return s->dead ? -1 : 0;
}
