/* Remote processes (docs/deployment.md): their control connections and
 * what happens when a host is lost.
 *
 * A rank on another host cannot inherit cmrun's control pipe. Its
 * libchanmem connects to CHANMEM_CONTROL (this listener) instead, sends
 * the job secret as its first line (nobody else can inject reports),
 * then "hello RANK INCARNATION REPLICA", then the same lines as on the
 * pipe (heartbeats, abort, finalized). One connection per process:
 *
 *  - EOF before "finalized": the process is gone or cut off. Like a CM's
 *    "lost" report, confirmed CMRUN_LOST_CONFIRM later: a launcher that
 *    is still running then is killed and the rank restarted.
 *  - cmrun closes the connection when it gives a process up (declared
 *    failed, exited, end of the job): the remote libchanmem then exits
 *    the process, so a rank that was cut off does not run on as a stale
 *    incarnation once its host is reachable again.
 *
 * What a lost connection means is decided above this file: it reports
 * the loss through job->events (detect.c confirms it), and ft.c restarts
 * remote ranks on a surviving host when theirs is dead (node failure). */
#include <config.h>

#include "job.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "control.h"
#include "ctrl_line.h"
#include "launch.h"
#include "net.h"
#include "output.h"
#include "remote.h"

/* Connections that have not said who they are, at most: a port scan or a
 * stray client must not exhaust cmrun's descriptors. A full table makes
 * room by dropping the oldest of them, and each gets CTRL_HELLO_DEADLINE
 * seconds to send the secret and its hello line (a real process sends
 * both at once, right after connecting), so idle connections can neither
 * fill the table for long nor keep a restarted rank from reporting in. */
#define PENDING_MAX 64
#define CTRL_HELLO_DEADLINE 5.0
#define CTRL_ACCEPT_PAUSE 0.1 /* seconds without accepting when out of descriptors */

struct ctrl_conn {
	struct job *job;
	int fd;
	ev_io io;
	ev_timer deadline; /* until the hello line */
	bool authed;
	struct rank_proc *rank; /* after hello */
	struct ctrl_conn *next;
	size_t len;
	char buf[256];
};

static void conn_free(struct job *job, struct ctrl_conn *c)
{
	for (struct ctrl_conn **p = &job->conns; *p; p = &(*p)->next)
		if (*p == c) {
			*p = c->next;
			break;
		}
	job->nconns--;
	ev_io_stop(job->loop, &c->io);
	ev_timer_stop(job->loop, &c->deadline);
	close(c->fd);
	if (c->rank && c->rank->ctrl == c)
		c->rank->ctrl = NULL;
	free(c);
}

/* Constant time: how much of the secret a guess matched must not show. */
static bool secret_matches(const struct job *job, const char *line)
{
	size_t n = strlen(line);
	unsigned char diff = n != CM_SECRET_LEN;
	for (size_t i = 0; i < CM_SECRET_LEN; i++)
		diff |= (unsigned char)(job->secret[i] ^ (i < n ? line[i] : 0));
	return diff == 0;
}

/* The "hello" line: binds the connection to the rank's current
 * incarnation. Returns false to close it (stale or malformed). */
static bool hello(struct job *job, struct ctrl_conn *c, const char *line)
{
	const struct cmrun_options *o = job->opts;
	struct ctrl_line l;
	if (ctrl_line_parse(line, o->nranks, o->replicas, &l) != CTRL_HELLO) {
		output_verbose("control connection: bad hello '%.64s'; closing it", line);
		return false;
	}
	int rank = l.rank, replica = l.replica;
	unsigned incarnation = l.incarnation;
	struct rank_proc *r = &job->ranks[rank * o->replicas + replica];
	if (r->state != PROC_RUNNING || r->incarnation != incarnation || r->ctrl) {
		/* An incarnation cmrun gave up: closing makes it exit. */
		output_verbose("control connection of rank %d incarnation %u refused (current "
		               "incarnation %u%s)",
		               rank, incarnation, r->incarnation,
		               r->state == PROC_RUNNING ? "" : ", not running");
		return false;
	}
	c->rank = r;
	r->ctrl = c;
	ev_timer_stop(job->loop, &c->deadline);
	if (o->verbosity >= 2)
		output_verbose("rank %d incarnation %u: control connection", rank, incarnation);
	return true;
}

/* The connection ended (EOF or error) while its rank ran. */
static void conn_lost(struct job *job, struct ctrl_conn *c)
{
	struct rank_proc *r = c->rank;
	if (r == NULL || r->state != PROC_RUNNING || r->hb_finished || r->declared_failed ||
	    job->phase != PHASE_RUN || ev_is_active(&r->lost_timer))
		return;
	output_verbose("rank %d incarnation %u: its control connection ended", r->rank,
	               r->incarnation);
	/* Confirmed later (detect.c): a process exiting on its own is reaped
	 * first. */
	r->lost_incarnation = r->incarnation;
	r->lost_cm = -1;
	job->events.connection_lost(job, r);
}

/* Reads and handles what the connection holds; false once it is closed. */
static bool conn_read(struct job *job, struct ctrl_conn *c)
{
	for (;;) {
		ssize_t n = read(c->fd, c->buf + c->len, sizeof c->buf - 1 - c->len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return true;
		if (n <= 0) {
			conn_lost(job, c);
			conn_free(job, c);
			return false;
		}
		c->len += (size_t)n;
		c->buf[c->len] = '\0';
		char *start = c->buf, *nl;
		while ((nl = strchr(start, '\n')) != NULL) {
			*nl = '\0';
			if (!c->authed) {
				if (!secret_matches(job, start)) {
					output_verbose("control connection with a wrong secret; "
					               "closing it");
					conn_free(job, c);
					return false;
				}
				c->authed = true;
			} else if (c->rank == NULL) {
				if (!hello(job, c, start)) {
					conn_free(job, c);
					return false;
				}
			} else if (control_handle_line(job, start)) {
				/* A line in a socket cmrun never writes otherwise: it fits. */
				ssize_t unused =
				    send(c->fd, "ok\n", 3, MSG_NOSIGNAL | MSG_DONTWAIT);
				(void)unused;
			}
			start = nl + 1;
		}
		c->len -= (size_t)(start - c->buf);
		memmove(c->buf, start, c->len);
		if (c->len == sizeof c->buf - 1) {
			output_verbose("control connection: a line longer than any report; closing "
			               "it");
			conn_lost(job, c);
			conn_free(job, c);
			return false;
		}
	}
}

static void on_conn(struct ev_loop *loop, ev_io *w, int revents)
{
	struct ctrl_conn *c = w->data;
	conn_read(c->job, c);
}

static void on_accept_pause(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct job *job = w->data;
	ev_io_start(loop, &job->ctrl_accept_io);
}

static void on_deadline(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct ctrl_conn *c = w->data;
	output_verbose("control connection: no hello within %.0f s; closing it",
	               CTRL_HELLO_DEADLINE);
	conn_free(c->job, c);
}

/* The connection that has waited longest without a hello (the list is
 * newest first), or NULL. */
static struct ctrl_conn *oldest_pending(struct job *job, int *pending)
{
	struct ctrl_conn *oldest = NULL;
	*pending = 0;
	for (struct ctrl_conn *c = job->conns; c; c = c->next)
		if (c->rank == NULL) {
			++*pending;
			oldest = c;
		}
	return oldest;
}

static void on_accept(struct ev_loop *loop, ev_io *w, int revents)
{
	struct job *job = w->data;
	for (;;) {
		int fd = accept4(job->ctrl_listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		int pending;
		struct ctrl_conn *oldest = oldest_pending(job, &pending);
		if (fd < 0 &&
		    (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)) {
			/* The listener stays readable: make room from the
			 * unidentified ones, else stop watching it for a while
			 * rather than spin. */
			if (oldest) {
				conn_free(job, oldest);
				continue;
			}
			ev_io_stop(loop, &job->ctrl_accept_io);
			ev_timer_set(&job->ctrl_pause, CTRL_ACCEPT_PAUSE, 0.);
			ev_timer_start(loop, &job->ctrl_pause);
			return;
		}
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return; /* EAGAIN */
		}
		if (pending >= PENDING_MAX) {
			if (!job->ctrl_evicting)
				output_verbose(
				    "control connections: %d not identified yet; dropping "
				    "the oldest ones",
				    pending);
			job->ctrl_evicting = true;
			conn_free(job, oldest);
		} else {
			job->ctrl_evicting = false;
		}
		struct ctrl_conn *c = calloc(1, sizeof *c);
		if (c == NULL) {
			output_verbose("control connection refused: out of memory");
			close(fd);
			continue;
		}
		c->job = job;
		c->fd = fd;
		c->next = job->conns;
		job->conns = c;
		job->nconns++;
		ev_io_init(&c->io, on_conn, fd, EV_READ);
		c->io.data = c;
		ev_io_start(loop, &c->io);
		ev_timer_init(&c->deadline, on_deadline, CTRL_HELLO_DEADLINE, 0.);
		c->deadline.data = c;
		ev_timer_start(loop, &c->deadline);
	}
}

/* The local address the kernel would use towards addr (a UDP connect
 * sends nothing). */
static int local_address_towards(const char *addr, char *out, size_t len)
{
	struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(9)}, me;
	socklen_t mlen = sizeof me;
	if (inet_pton(AF_INET, addr, &to.sin_addr) != 1)
		return -1;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	int rc = connect(fd, (struct sockaddr *)&to, sizeof to) < 0 ||
	                 getsockname(fd, (struct sockaddr *)&me, &mlen) < 0
	             ? -1
	             : 0;
	close(fd);
	if (rc == 0 && inet_ntop(AF_INET, &me.sin_addr, out, (socklen_t)len) == NULL)
		rc = -1;
	return rc;
}

int remote_open(struct job *job)
{
	const struct cmrun_options *o = job->opts;
	job->ctrl_listen_fd = -1;
	if (!job->any_remote)
		return 0;
	job->host_dead = calloc((size_t)o->hosts.count, sizeof *job->host_dead);
	if (job->host_dead == NULL) {
		output_message("error: out of memory");
		return -1;
	}
	ev_init(&job->host_timer, NULL);
	if (o->control_addr) {
		snprintf(job->local_ip, sizeof job->local_ip, "%s", o->control_addr);
	} else {
		int first = -1;
		for (int i = 0; i < o->hosts.count && first < 0; i++)
			if (launch_is_remote(o, i))
				first = i;
		if (local_address_towards(o->hosts.list[first].addr, job->local_ip,
		                          sizeof job->local_ip) < 0) {
			output_message("error: no route from this machine to host %s (%s): give "
			               "--control-addr",
			               o->hosts.list[first].name, o->hosts.list[first].addr);
			return -1;
		}
	}
	struct sockaddr_in addr, bound;
	char text[32];
	snprintf(text, sizeof text, "%s:0", job->local_ip);
	if (cm_parse_hostport(text, 0, &addr) < 0 ||
	    (job->ctrl_listen_fd = cm_tcp_listen(&addr, &bound)) < 0) {
		output_message("error: cannot listen for control connections on %s: %s",
		               job->local_ip, strerror(errno));
		return -1;
	}
	cm_set_nonblock(job->ctrl_listen_fd, 1);
	cm_set_cloexec(job->ctrl_listen_fd, 1);
	cm_format_addr(&bound, job->control_addr, sizeof job->control_addr);
	ev_io_init(&job->ctrl_accept_io, on_accept, job->ctrl_listen_fd, EV_READ);
	job->ctrl_accept_io.data = job;
	ev_timer_init(&job->ctrl_pause, on_accept_pause, CTRL_ACCEPT_PAUSE, 0.);
	job->ctrl_pause.data = job;
	ev_io_start(job->loop, &job->ctrl_accept_io);
	output_verbose("control connections of remote processes: %s", job->control_addr);
	return 0;
}

void remote_drain(struct job *job, struct rank_proc *r)
{
	if (r->ctrl)
		conn_read(job, r->ctrl);
}

void remote_await_reports(struct job *job, int wait_ms)
{
	enum { MAX_POLLED = 256, ROUNDS = 4, LATER_MS = 20 };
	if (job->ctrl_listen_fd < 0)
		return;
	/* The connection may not even be accepted yet (a restored rank opens
	 * it just before writing its filler): accept, then read what comes,
	 * a few rounds while something does. */
	for (int round = 0; round < ROUNDS; round++) {
		on_accept(job->loop, &job->ctrl_accept_io, EV_READ);
		struct pollfd p[MAX_POLLED];
		struct ctrl_conn *polled[MAX_POLLED];
		int n = 0;
		p[n] = (struct pollfd){.fd = job->ctrl_listen_fd, .events = POLLIN};
		polled[n++] = NULL;
		for (struct ctrl_conn *c = job->conns; c && n < MAX_POLLED; c = c->next) {
			p[n] = (struct pollfd){.fd = c->fd, .events = POLLIN};
			polled[n++] = c;
		}
		if (poll(p, (nfds_t)n, round == 0 ? wait_ms : LATER_MS) <= 0)
			return;
		/* conn_read may free the connection it reads, never another one. */
		for (int i = 1; i < n; i++)
			if (p[i].revents)
				conn_read(job, polled[i]);
	}
}

void remote_detach(struct job *job, struct rank_proc *r)
{
	if (r->ctrl)
		conn_free(job, r->ctrl);
}

void remote_close(struct job *job)
{
	while (job->conns)
		conn_free(job, job->conns);
	if (job->ctrl_listen_fd >= 0) {
		ev_io_stop(job->loop, &job->ctrl_accept_io);
		ev_timer_stop(job->loop, &job->ctrl_pause);
		close(job->ctrl_listen_fd);
		job->ctrl_listen_fd = -1;
	}
	if (job->host_dead)
		ev_timer_stop(job->loop, &job->host_timer);
	free(job->host_dead);
	job->host_dead = NULL;
}
