/* tcprelay: the cheapest TCP relay, the reference netpipe/bench measures a
 * channel memory's 1-byte latency against (not part of chanmem).
 *
 *   tcprelay --listen PORT --target PORT [--count N] [--timeout SECONDS]
 *
 * Listens on 127.0.0.1:PORT; for each accepted connection (up to N, default
 * 1) it connects to 127.0.0.1:TARGET and forwards bytes both ways: one
 * epoll loop, read() then write() of what was read, TCP_NODELAY on every
 * socket (chanmem's common/net.c sets the sockets up), no logging. An end of stream is passed on
 * (shutdown of the other side's write half) once the bytes before it are written. It exits once N
 * connections were accepted and all have closed both ways (status 0), or
 * after SECONDS (default 300; status 1), or when it cannot set up a
 * connection (status 1). A reset by either side ends that pair quietly. */
#include <config.h>

#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net.h"
#include "units.h"

/* Bytes read from one side before they are written to the other. */
#define FLOW_BUF (128u * 1024u)
#define MAX_EVENTS 16

/* Bytes read from one end of a pair, to be written to the other end. */
struct flow {
	char buf[FLOW_BUF];
	size_t start, end; /* buf[start, end) is not written yet */
	int eof;           /* the source ended its stream */
	int passed;        /* ... and the destination's write half is shut */
};

struct pair;

/* One socket of a pair; epoll's data pointer. */
struct end {
	struct pair *pair;
	int side; /* 0: the accepted client, 1: the target */
	int fd;
	unsigned watched; /* events registered, 0: not in epoll */
};

struct pair {
	struct end end[2];
	struct flow flow[2]; /* flow[i]: read from end[i], written to end[1 - i] */
	int closed;          /* freed after the current batch of events */
	struct pair *next_closed;
};

static int epfd = -1;
static int open_pairs;
static struct pair *closed_pairs; /* later events of a batch may still name them */

static void on_alarm(int sig)
{
	(void)sig;
	static const char msg[] = "tcprelay: time limit reached (--timeout)\n";
	ssize_t r = write(STDERR_FILENO, msg, sizeof msg - 1);
	(void)r;
	_exit(1);
}

static void usage(FILE *to)
{
	fprintf(to, "usage: tcprelay --listen PORT --target PORT [--count N] [--timeout SECONDS]\n"
	            "Relays each connection accepted on 127.0.0.1:PORT to 127.0.0.1:TARGET, both\n"
	            "ways (one epoll loop, TCP_NODELAY). Exits once N connections (default 1)\n"
	            "have closed, or after SECONDS (default 300).\n");
}

/* --opt's value, a whole number in [min, max]; else says so and returns -1. */
static int number_option(const char *opt, const char *text, long min, long max, const char *wanted,
                         long *out)
{
	if (cm_parse_long(text, min, max, out) == 0)
		return 0;
	fprintf(stderr, "tcprelay: %s wants %s, not '%s'\n", opt, wanted, text);
	return -1;
}

static struct sockaddr_in loopback(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return a;
}

static int listen_on(int port)
{
	struct sockaddr_in a = loopback(port);
	int fd = cm_tcp_listen(&a, NULL);
	if (fd >= 0 && cm_set_nonblock(fd, 1) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Registers, changes or removes (0) what epoll reports for e. An end with
 * nothing to wait for leaves epoll, so a hung-up socket cannot spin. */
static void watch(struct end *e, unsigned events)
{
	if (events == e->watched)
		return;
	struct epoll_event ev = {.events = events, .data.ptr = e};
	int op = e->watched == 0 ? EPOLL_CTL_ADD : events == 0 ? EPOLL_CTL_DEL : EPOLL_CTL_MOD;
	if (epoll_ctl(epfd, op, e->fd, &ev) < 0) {
		fprintf(stderr, "tcprelay: epoll_ctl: %s\n", strerror(errno));
		exit(1);
	}
	e->watched = events;
}

static void close_pair(struct pair *p)
{
	for (int i = 0; i < 2; i++)
		close(p->end[i].fd); /* also leaves epoll */
	p->closed = 1;
	p->next_closed = closed_pairs;
	closed_pairs = p;
	open_pairs--;
}

/* Writes what flow f holds to fd; passes its end of stream on once empty.
 * -1: the destination failed. */
static int drain(struct flow *f, int fd)
{
	while (f->start < f->end) {
		ssize_t n = write(fd, f->buf + f->start, f->end - f->start);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
		}
		f->start += (size_t)n;
	}
	f->start = f->end = 0;
	if (f->eof && !f->passed) {
		f->passed = 1;
		(void)shutdown(fd, SHUT_WR);
	}
	return 0;
}

/* Reads once from end i into its (empty) flow and writes it on. -1: the
 * pair failed. */
static int forward(struct pair *p, int i)
{
	struct flow *f = &p->flow[i];
	ssize_t n = read(p->end[i].fd, f->buf, sizeof f->buf);
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
	if (n == 0)
		f->eof = 1;
	f->end = (size_t)n;
	return drain(f, p->end[1 - i].fd);
}

/* Services an event on end e; closes the pair when it is done or failed. */
static void service(struct end *e, unsigned events)
{
	struct pair *p = e->pair;
	if (p->closed)
		return;
	int i = e->side;
	int failed = (events & EPOLLERR) != 0;
	if (!failed && (events & EPOLLOUT))
		failed = drain(&p->flow[1 - i], e->fd) < 0;
	if (!failed && (events & (EPOLLIN | EPOLLHUP)) && p->flow[i].start == p->flow[i].end &&
	    !p->flow[i].eof)
		failed = forward(p, i) < 0;
	if (failed || (p->flow[0].passed && p->flow[1].passed)) {
		close_pair(p);
		return;
	}
	/* Read an end only while its flow is empty; wait for room only where
	 * a flow is stuck. */
	for (int k = 0; k < 2; k++) {
		const struct flow *in = &p->flow[k], *out = &p->flow[1 - k];
		unsigned want = 0;
		if (in->start == in->end && !in->eof)
			want |= EPOLLIN;
		if (out->start < out->end)
			want |= EPOLLOUT;
		watch(&p->end[k], want);
	}
}

/* Accepts the pending connections (up to *left more) and connects each to
 * the target. -1: a connection could not be set up. */
static int accept_all(int listen_fd, int target, int *left)
{
	while (*left > 0) {
		int client = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (client < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			fprintf(stderr, "tcprelay: accept: %s\n", strerror(errno));
			return -1;
		}
		(*left)--;
		struct sockaddr_in to = loopback(target);
		int server = cm_tcp_connect(&to, 0); /* one try; TCP_NODELAY on */
		struct pair *p = server < 0 ? NULL : malloc(sizeof *p);
		if (p == NULL) {
			fprintf(stderr, "tcprelay: cannot relay to 127.0.0.1:%d: %s\n", target,
			        strerror(errno));
			close(client);
			if (server >= 0)
				close(server);
			return -1;
		}
		/* Non-blocking only once connected: connect() above waits. */
		(void)cm_set_nonblock(server, 1);
		(void)cm_tune_socket(client);
		memset(p, 0, sizeof *p);
		int fds[2] = {client, server};
		for (int i = 0; i < 2; i++) {
			p->end[i] = (struct end){.pair = p, .side = i, .fd = fds[i]};
			watch(&p->end[i], EPOLLIN);
		}
		open_pairs++;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
	    {"listen", required_argument, NULL, 'l'}, {"target", required_argument, NULL, 't'},
	    {"count", required_argument, NULL, 'n'},  {"timeout", required_argument, NULL, 'T'},
	    {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0}};
	long port = -1, target = -1, count = 1, timeout = 300;
	int opt;
	while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
		switch (opt) {
		case 'l':
			if (number_option("--listen", optarg, 1, 65535, "a port 1..65535", &port) <
			    0)
				return 2;
			break;
		case 't':
			if (number_option("--target", optarg, 1, 65535, "a port 1..65535",
			                  &target) < 0)
				return 2;
			break;
		case 'n':
			if (number_option("--count", optarg, 1, 1000000, "1..1000000", &count) < 0)
				return 2;
			break;
		case 'T':
			if (number_option("--timeout", optarg, 1, 86400, "1..86400 seconds",
			                  &timeout) < 0)
				return 2;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "tcprelay: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	if (port < 0 || target < 0) {
		fprintf(stderr, "tcprelay: --listen and --target are required\n");
		usage(stderr);
		return 2;
	}
	if (port == target) {
		fprintf(stderr, "tcprelay: --listen and --target are the same port (%ld)\n", port);
		return 2;
	}
	struct sigaction sa = {.sa_handler = on_alarm};
	sigaction(SIGALRM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN); /* a closed destination is a write error, not a death */
	alarm((unsigned)timeout);

	int listen_fd = listen_on((int)port);
	if (listen_fd < 0) {
		fprintf(stderr, "tcprelay: cannot listen on 127.0.0.1:%ld: %s\n", port,
		        strerror(errno));
		return 1;
	}
	epfd = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event lev = {.events = EPOLLIN, .data.ptr = NULL};
	if (epfd < 0 || epoll_ctl(epfd, EPOLL_CTL_ADD, listen_fd, &lev) < 0) {
		fprintf(stderr, "tcprelay: epoll: %s\n", strerror(errno));
		return 1;
	}
	int left = (int)count;
	while (left > 0 || open_pairs > 0) {
		struct epoll_event ev[MAX_EVENTS];
		int n = epoll_wait(epfd, ev, MAX_EVENTS, -1); /* bounded by alarm() */
		if (n < 0) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, "tcprelay: epoll_wait: %s\n", strerror(errno));
			return 1;
		}
		for (int i = 0; i < n; i++) {
			if (ev[i].data.ptr != NULL) {
				service(ev[i].data.ptr, ev[i].events);
				continue;
			}
			if (accept_all(listen_fd, (int)target, &left) < 0)
				return 1;
			if (left == 0 && listen_fd >= 0) {
				close(listen_fd); /* takes it out of epoll */
				listen_fd = -1;
			}
		}
		while (closed_pairs) {
			struct pair *p = closed_pairs;
			closed_pairs = p->next_closed;
			free(p);
		}
	}
	return 0;
}
