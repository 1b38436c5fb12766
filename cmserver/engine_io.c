/* Socket I/O every engine does the same way: accepting, reading a
 * connection into the core, draining its output (see engine_io.h). */
#include "config.h"

#include "engine_io.h"

#include "core.h"
#include "journal.h"
#include "log.h"
#include "net.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define WRITE_IOV 64 /* iovecs per sendmsg: up to 32 frames */

int cm_listeners_close(const struct cm_listeners *ls, int status)
{
	for (unsigned k = 0; k < ls->n; k++)
		close(ls->fds[k]);
	return status;
}

/* true: log now (with *repeats, the repeats not logged since); false:
 * counted, stay quiet. */
static bool log_due(struct eng_log_limit *l, double now, unsigned long *repeats)
{
	if (l->last != 0 && now - l->last < ENG_LOG_EVERY) {
		l->quiet++;
		return false;
	}
	*repeats = l->quiet;
	l->quiet = 0;
	l->last = now;
	return true;
}

/* ---- the acceptor ---- */

/* Out of descriptors (or memory, or threads): make room from the peers
 * without the secret, and stop accepting for a moment. */
static void pause_accepting(struct eng_acceptor *a, const char *why, unsigned dropped)
{
	unsigned long repeats;
	if (log_due(&a->accept_log, ev_now(a->loop), &repeats))
		cm_err("cannot take a new connection: %s; dropped %u without the job secret, "
		       "pausing (%lu more times since the last report)",
		       why, dropped, repeats);
	for (unsigned k = 0; k < a->listeners.n; k++)
		ev_io_stop(a->loop, &a->accept_w[k]);
	/* A one-shot timer that has fired keeps its expired time: started
	 * again as it is, it would fire at once and the pause never pause. */
	ev_timer_set(&a->accept_pause, ENG_ACCEPT_PAUSE, 0.);
	ev_timer_start(a->loop, &a->accept_pause);
}

static void on_accept(struct ev_loop *loop, ev_io *w, int revents)
{
	struct eng_acceptor *a = w->data;
	for (int i = 0; i < 64; i++) {
		int fd = accept4(w->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			/* EMFILE, ENFILE, ENOBUFS, ENOMEM: the backlog keeps them.
			 * A peer without the secret gives way to whoever waits
			 * there; where its socket is closed later, by its reader,
			 * or with none left, retry a little later rather than
			 * spinning. */
			int err = errno;
			if (a->drops_close_at_once) {
				if (a->ops->drop_unauthenticated(
				        a->ctx, 0, 1,
				        "dropped for a new connection (descriptor limit)"))
					continue;
				pause_accepting(a, strerror(err), 0);
			} else {
				unsigned n = a->ops->drop_unauthenticated(
				    a->ctx, 0, 16,
				    "dropped for a new connection (descriptor limit)");
				pause_accepting(a, strerror(err), n);
			}
			return;
		}
		cm_tune_socket(fd);
		if (!a->ops->adopt(a->ctx, fd, ev_now(loop))) {
			close(fd);
			/* Most likely out of descriptors for a worker's loop or of
			 * threads: the same remedy as a failed accept. */
			unsigned n =
			    a->drops_close_at_once
			        ? 0
			        : a->ops->drop_unauthenticated(
			              a->ctx, 0, 16, "dropped for a new connection (no resources)");
			pause_accepting(a, "out of memory, descriptors or threads", n);
			return;
		}
		cm_debug("connection fd %d accepted", fd);
	}
}

static void on_accept_pause(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct eng_acceptor *a = w->data;
	for (unsigned k = 0; k < a->listeners.n; k++)
		ev_io_start(loop, &a->accept_w[k]);
}

static void on_auth_sweep(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct eng_acceptor *a = w->data;
	unsigned n = a->ops->drop_unauthenticated(a->ctx, ev_now(loop) - ENG_AUTH_DEADLINE,
	                                          UINT_MAX, "no HELLO with the job secret in time");
	if (n)
		cm_debug("%u connections without the job secret in time dropped", n);
}

static void on_signal(struct ev_loop *loop, ev_signal *w, int revents)
{
	cm_info("signal %d: shutting down", w->signum);
	ev_break(loop, EVBREAK_ALL);
}

int eng_acceptor_run(struct eng_acceptor *a)
{
	for (unsigned k = 0; k < a->listeners.n; k++)
		if (cm_set_nonblock(a->listeners.fds[k], 1) < 0) {
			cm_err("listening socket: %s", strerror(errno));
			return 1;
		}
	for (unsigned k = 0; k < a->listeners.n; k++) {
		ev_io_init(&a->accept_w[k], on_accept, a->listeners.fds[k], EV_READ);
		a->accept_w[k].data = a;
		ev_io_start(a->loop, &a->accept_w[k]);
	}
	ev_timer_init(&a->accept_pause, on_accept_pause, ENG_ACCEPT_PAUSE, 0.);
	a->accept_pause.data = a;
	ev_timer_init(&a->auth_sweep, on_auth_sweep, ENG_AUTH_SWEEP, ENG_AUTH_SWEEP);
	a->auth_sweep.data = a;
	ev_timer_start(a->loop, &a->auth_sweep);
	ev_signal_init(&a->sigterm, on_signal, SIGTERM);
	ev_signal_init(&a->sigint, on_signal, SIGINT);
	ev_signal_start(a->loop, &a->sigterm);
	ev_signal_start(a->loop, &a->sigint);
	/* main blocked them until now: a pending one is delivered here. */
	sigset_t stop;
	sigemptyset(&stop);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGINT);
	pthread_sigmask(SIG_UNBLOCK, &stop, NULL);
	ev_run(a->loop, 0);
	/* Shutting down: a second SIGTERM (a launcher signalling the process
	 * group and the process) must not kill us half-way once the watchers
	 * below restore the default action. */
	pthread_sigmask(SIG_BLOCK, &stop, NULL);
	for (unsigned k = 0; k < a->listeners.n; k++)
		ev_io_stop(a->loop, &a->accept_w[k]);
	ev_timer_stop(a->loop, &a->accept_pause);
	ev_timer_stop(a->loop, &a->auth_sweep);
	ev_signal_stop(a->loop, &a->sigterm);
	ev_signal_stop(a->loop, &a->sigint);
	return 0;
}

/* ---- reading and writing a connection ---- */

enum eng_read_result eng_read_burst(struct ev_loop *loop, ev_io *rw, ev_timer *hold,
                                    struct cm_session *s, eng_input_fn input, void *conn, int *err)
{
	for (int i = 0; i < ENG_READS_PER_EVENT; i++) {
		struct iovec iov[2];
		int n = cm_session_read_iov(s, iov);
		size_t want = iov[0].iov_len + (n > 1 ? iov[1].iov_len : 0);
		ssize_t r = readv(rw->fd, iov, n);
		if (r > 0) {
			bool others_wait = input(conn, s, (size_t)r);
			if (cm_session_held(s)) {
				/* Backpressure: this sender waits, its socket fills. */
				ev_io_stop(loop, rw);
				ev_timer_again(loop, hold);
				return ENG_READ_HELD;
			}
			if ((size_t)r < want)
				return ENG_READ_WAIT; /* drained the socket for now */
			if (others_wait && cm_session_filling(s))
				return ENG_READ_WAIT; /* cut-through: forward what arrived, then
				                         read on */
			continue;
		}
		if (r == 0) {
			*err = 0;
			return ENG_READ_CLOSED;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return ENG_READ_WAIT;
		*err = errno;
		return ENG_READ_CLOSED;
	}
	return ENG_READ_WAIT;
}

enum eng_send_result eng_send_output(struct cm_session *s, int fd, int *err)
{
	for (;;) {
		struct iovec iov[WRITE_IOV];
		int n = cm_session_out_iov(s, iov, WRITE_IOV);
		if (n == 0)
			return ENG_SEND_DRAINED;
		size_t want = 0;
		for (int i = 0; i < n; i++)
			want += iov[i].iov_len;
		/* Nothing leaves before the inputs it depends on are in the
		 * journal: what these iovecs hold was journaled before it was
		 * queued (or, payload bytes, before the watermark showed it). */
		void *journal = cm_session_journal(s);
		if (journal)
			cm_journal_flush(journal);
		struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)n};
		ssize_t w = sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return ENG_SEND_BLOCKED;
			*err = errno;
			return ENG_SEND_FAILED;
		}
		cm_session_out_consumed(s, (size_t)w);
		/* The kernel took what it could: the socket is full. */
		if ((size_t)w < want)
			return ENG_SEND_BLOCKED;
	}
}
