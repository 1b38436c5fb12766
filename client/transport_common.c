/* Pieces shared by the transports (transport_common.h). */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "net.h"
#include "transport_common.h"

#define MAX_EVENTS 64
#define DRAIN_TIMEOUT_MS 10000

int cm_check_send(struct cm_req *req, int rank, int size)
{
	req->done = 0;
	req->error = 0;
	if (req->peer < 0 || req->peer >= size) {
		cm_err("rank %d: send to rank %d: not a rank of this %d-rank job", rank, req->peer,
		       size);
		return -1;
	}
	if (req->tag < 0 || req->slen > CM_MAX_PAYLOAD || (req->slen && !req->sbuf)) {
		cm_err("rank %d: send to rank %d: bad tag %d or length %zu", rank, req->peer,
		       req->tag, req->slen);
		return -1;
	}
	return 0;
}

int cm_check_recv(struct cm_req *req, int rank, int size)
{
	req->done = 0;
	req->error = 0;
	if ((req->peer < 0 && req->peer != CM_ANY_SOURCE) || req->peer >= size ||
	    (req->tag < 0 && req->tag != CM_ANY_TAG) || (req->rcap && !req->rbuf)) {
		cm_err("rank %d: receive from %d tag %d: bad source, tag or buffer", rank,
		       req->peer, req->tag);
		return -1;
	}
	return 0;
}

int cm_check_probe(int rank, int size, int src, int tag)
{
	if ((src < 0 && src != CM_ANY_SOURCE) || src >= size || (tag < 0 && tag != CM_ANY_TAG)) {
		cm_err("rank %d: probe for source %d tag %d: bad source or tag", rank, src, tag);
		return -1;
	}
	return 0;
}

int cm_start_send(struct cm_req *req, int rank, struct cm_reqmap *syncs, struct cm_header *h)
{
	*h = (struct cm_header){.type = CM_T_MSG,
	                        .flags = req->sync ? CM_F_SYNC : 0,
	                        .src = rank,
	                        .dst = req->peer,
	                        .tag = req->tag,
	                        .ctx = req->ctx,
	                        .clock = req->id};
	req->t_wait = CM_SEND_WAIT_WRITE;
	if (req->sync) {
		req->t_wait |= CM_SEND_WAIT_ACK;
		if (cm_reqmap_put(syncs, req) < 0) {
			cm_err("rank %d: out of memory", rank);
			return -1;
		}
	}
	return 0;
}

int cm_connset_watch(struct cm_connset *cs, struct cm_conn *c, unsigned events)
{
	if (c->watching == events)
		return 0;
	struct epoll_event ev = {.events = events, .data.ptr = c};
	if (epoll_ctl(cs->epfd, c->watching ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, c->fd, &ev) < 0)
		return cm_conn_fail(c, "epoll_ctl: %s", strerror(errno));
	c->watching = events;
	return 0;
}

int cm_connset_add(struct cm_connset *cs, struct cm_conn *c, int rank)
{
	if (cs->nconns == cs->conns_cap) {
		size_t cap = cs->conns_cap ? cs->conns_cap * 2 : 16;
		struct cm_conn **v = realloc(cs->conns, cap * sizeof *v);
		if (v == NULL) {
			cm_err("rank %d: out of memory", rank);
			return -1;
		}
		cs->conns = v;
		cs->conns_cap = cap;
	}
	if (cm_connset_watch(cs, c, EPOLLIN) < 0)
		return -1;
	cs->conns[cs->nconns++] = c;
	return 0;
}

int cm_connset_listen(struct cm_connset *cs, int fd)
{
	if (cm_set_nonblock(fd, 1) < 0 || cm_set_cloexec(fd, 1) < 0)
		return -1;
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
	return epoll_ctl(cs->epfd, EPOLL_CTL_ADD, fd, &ev);
}

void cm_connset_accept(struct cm_connset *cs, int listen_fd, int rank,
                       const struct cm_conn_ops *ops, void *owner, const struct cm_limits *lim,
                       int quiet)
{
	for (;;) {
		int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR)
				continue;
			if (!quiet && errno != EAGAIN && errno != EWOULDBLOCK &&
			    errno != ECONNABORTED)
				cm_err("rank %d: accept: %s", rank, strerror(errno));
			return;
		}
		struct cm_conn *c = cm_conn_new(fd, CM_CONN_AWAIT_HELLO, rank,
		                                "incoming connection", ops, owner, lim);
		if (c == NULL) {
			close(fd);
			continue;
		}
		if (cm_connset_add(cs, c, rank) < 0) {
			cm_conn_free(c);
			continue;
		}
		cm_conn_read(c); /* its HELLO and first messages are often there already */
	}
}

int cm_connset_output_pending(const struct cm_connset *cs)
{
	for (size_t i = 0; i < cs->nconns; i++)
		if (cm_conn_pending_output(cs->conns[i]) && cm_conn_alive(cs->conns[i]))
			return 1;
	return 0;
}

int cm_connset_poll(struct cm_connset *cs, int rank, int timeout_ms, void (*on_listen)(void *),
                    void *owner)
{
	for (size_t i = 0; i < cs->nconns; i++) {
		struct cm_conn *c = cs->conns[i];
		if (cm_conn_alive(c))
			cm_connset_watch(cs, c,
			                 EPOLLIN | (cm_conn_pending_output(c) ? EPOLLOUT : 0));
	}
	struct epoll_event ev[MAX_EVENTS];
	int n = epoll_wait(cs->epfd, ev, MAX_EVENTS, timeout_ms);
	if (n < 0) {
		if (errno == EINTR)
			return 0;
		cm_err("rank %d: epoll_wait: %s", rank, strerror(errno));
		return -1;
	}
	for (int i = 0; i < n; i++) {
		struct cm_conn *c = ev[i].data.ptr;
		unsigned e = ev[i].events;
		if (c == NULL) {
			on_listen(owner);
			continue;
		}
		if ((e & (EPOLLOUT | EPOLLERR | EPOLLHUP)) && cm_conn_pending_output(c) &&
		    cm_conn_alive(c)) {
			c->wblocked = 0;
			cm_conn_flush(c);
		}
		if ((e & (EPOLLIN | EPOLLERR | EPOLLHUP)) && cm_conn_alive(c))
			cm_conn_read(c);
	}
	return 0;
}

void cm_connset_drain(struct cm_transport *t, struct cm_connset *cs, int *failed)
{
	long long deadline = cm_now_ms() + DRAIN_TIMEOUT_MS;
	for (;;) {
		for (size_t i = 0; i < cs->nconns; i++)
			cm_conn_shutdown(cs->conns[i]);
		long long left = deadline - cm_now_ms();
		if (cs->nconns == 0 || left <= 0)
			break;
		t->progress(t, (int)(left < 200 ? left : 200));
		*failed = 0;
	}
}

int cm_connset_finish(struct cm_transport *t, struct cm_connset *cs, int rank,
                      int (*flushed)(void *state), int *failed, int *draining)
{
	int rc = cm_wait_until(t, rank, flushed, CM_FLUSH_TIMEOUT_MS, "messages still unsent");
	if (*failed)
		rc = -1;
	*draining = 1;
	*failed = 0;
	cm_connset_drain(t, cs, failed);
	return rc;
}

void cm_connset_free(struct cm_connset *cs)
{
	for (size_t i = 0; i < cs->nconns; i++)
		cm_conn_free(cs->conns[i]);
	free(cs->conns);
	if (cs->epfd >= 0)
		close(cs->epfd);
}

int cm_wait_until(struct cm_transport *t, int rank, int (*done)(void *state), int timeout_ms,
                  const char *what)
{
	long long deadline = cm_now_ms() + timeout_ms;
	while (!done(t->state)) {
		long long left = deadline - cm_now_ms();
		if (left <= 0) {
			cm_err("rank %d: finalize: %s after %d s", rank, what, timeout_ms / 1000);
			return -1;
		}
		if (t->progress(t, (int)(left < 1000 ? left : 1000)) < 0)
			return -1;
	}
	return 0;
}
