/* The non-blocking frame connection both client transports share: see
 * conn.h for the model. Hot paths: one sendmsg() for as many queued frames
 * as fit, one recvmsg() that fills the current payload and the staging
 * buffer behind it.
 *
 * The socket itself stays in blocking mode and every call but one says
 * MSG_DONTWAIT: that lets cm_conn_read_wait() sleep in recvmsg() itself
 * when its connection is the only thing a rank can wait for, saving the
 * poll-then-read round of every message (the latency floor on loopback is
 * mostly system calls and wake-ups). Not on a unix socket, though: there a
 * reader asleep in recvmsg() is also woken whenever the peer reads what
 * this end wrote (the kernel's write-space wake-up, which poll() filters
 * out and a stream socket's own read wait does not), so every round trip
 * of a ping-pong cost one useless wake-up and two context switches.
 * Measured pinned to one core, NPcm 1 B through a CM: 8.39 us one way
 * sleeping in recvmsg, 7.79 us with poll() first; over TCP the recvmsg
 * sleep stays (10.02 against 10.37 us). */
#include <config.h>

#include "conn.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "net.h"

/* Staging buffer: many small frames per read(). */
#define IN_BUF_SIZE (64u * 1024u)
/* A payload remainder at least this long is read straight into its sink. */
#define DIRECT_READ_MIN 2048u
/* iovecs per sendmsg (two per frame). */
#define OUT_IOV_MAX 64

/* Queued frames of up to this many inline payload bytes (control frames,
 * small coalesced sends) are recycled through a few spare blocks per
 * connection instead of a malloc and a free each: a 1-byte ping-pong
 * queues two per round trip (the message and its RECV_REQ). */
#define SPARE_INLINE 64u

struct cm_out {
	struct cm_out *next;
	const uint8_t *payload;
	size_t len;
	size_t off;     /* bytes of header + payload already written */
	void *token;    /* handed back through on_sent, or NULL */
	int hold;       /* retained from the sender's buffer: on_sent on LOGGED */
	int again;      /* a re-sent logged MSG: not kept after it is written */
	uint8_t *owned; /* copy of the payload we free, or NULL */
	size_t cap;     /* inline_data bytes allocated */
	size_t cost;    /* counted in queued_bytes while in the output queue */
	uint8_t hdr[CM_HEADER_SIZE];
	uint8_t inline_data[]; /* control frames carry their payload here */
};

struct cm_conn *cm_conn_new(int fd, enum cm_conn_state state, int self, const char *name,
                            const struct cm_conn_ops *ops, void *owner, const struct cm_limits *lim)
{
	struct cm_conn *c = calloc(1, sizeof *c);
	if (c == NULL)
		return NULL;
	c->in_buf = malloc(IN_BUF_SIZE);
	if (c->in_buf == NULL || cm_set_nonblock(fd, 0) < 0) {
		free(c->in_buf);
		free(c);
		return NULL;
	}
	cm_tune_socket(fd);
	cm_set_cloexec(fd, 1);
	struct sockaddr_storage addr;
	socklen_t addr_len = sizeof addr;
	c->poll_before_wait =
	    getsockname(fd, (struct sockaddr *)&addr, &addr_len) == 0 && addr.ss_family == AF_UNIX;
	c->wait_limit_ms = -1;
	c->write_budget = -1;
	c->fd = fd;
	c->state = state;
	c->accepted = state == CM_CONN_AWAIT_HELLO;
	c->self = self;
	c->peer = -1;
	snprintf(c->name, sizeof c->name, "%s", name);
	c->ops = ops;
	c->owner = owner;
	c->lim = *lim;
	return c;
}

static struct cm_out *out_alloc(struct cm_conn *c, size_t inline_len)
{
	if (inline_len <= SPARE_INLINE && c->nspares > 0)
		return c->spares[--c->nspares];
	size_t cap = inline_len <= SPARE_INLINE ? SPARE_INLINE : inline_len;
	struct cm_out *o = malloc(sizeof *o + cap);
	if (o != NULL)
		o->cap = cap;
	return o;
}

static void out_free(struct cm_conn *c, struct cm_out *o)
{
	free(o->owned);
	if (o->cap == SPARE_INLINE && c->nspares < CM_CONN_SPARES) {
		c->spares[c->nspares++] = o;
		return;
	}
	free(o);
}

/* What a queued frame costs the rank: its block and, when the payload is
 * ours (copied), the copy, each with the allocator's overhead. A payload
 * still in the sender's buffer costs nothing here: that send is not
 * complete, so the program cannot pile them up without bound (its own
 * requests are its memory). */
static size_t out_cost(const struct cm_out *o)
{
	size_t cost = sizeof *o + o->cap + 16;
	if (o->owned)
		cost += o->len + 16;
	return cost;
}

static void count_queued(struct cm_conn *c, struct cm_out *o)
{
	o->cost = out_cost(o);
	c->queued_bytes += o->cost;
	if (c->queued_total)
		*c->queued_total += o->cost;
}

/* o left the output queue (written, moved to the kept ones, or dropped). */
static void uncount_queued(struct cm_conn *c, struct cm_out *o)
{
	c->queued_bytes -= o->cost;
	if (c->queued_total)
		*c->queued_total -= o->cost;
	o->cost = 0;
}

void cm_conn_free(struct cm_conn *c)
{
	if (c == NULL)
		return;
	while (c->out_head) {
		struct cm_out *o = c->out_head;
		c->out_head = o->next;
		uncount_queued(c, o);
		out_free(c, o); /* small blocks land in the spares, freed next */
	}
	while (c->kept_head) {
		struct cm_out *o = c->kept_head;
		c->kept_head = o->next;
		out_free(c, o);
	}
	while (c->nspares > 0)
		free(c->spares[--c->nspares]);
	if (c->fd >= 0)
		close(c->fd);
	free(c->in_buf);
	free(c);
}

static void vfail(struct cm_conn *c, const char *fmt, va_list ap)
{
	if (c->state == CM_CONN_FAILED)
		return;
	char msg[512];
	vsnprintf(msg, sizeof msg, fmt, ap);
	cm_err("rank %d: %s: %s", c->self, c->name, msg);
	c->state = CM_CONN_FAILED;
}

int cm_conn_fail(struct cm_conn *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfail(c, fmt, ap);
	va_end(ap);
	return -1;
}

/* ---- output ---- */

static void append(struct cm_conn *c, struct cm_out *o)
{
	count_queued(c, o);
	o->next = NULL;
	if (c->out_tail)
		c->out_tail->next = o;
	else
		c->out_head = o;
	c->out_tail = o;
}

static uint64_t out_clock(const struct cm_out *o)
{
	return cm_get_u64(o->hdr + 24);
}

static int out_is_msg(const struct cm_out *o)
{
	return o->hdr[1] == CM_T_MSG;
}

/* How a peer that may die is seen to be gone: it reset the connection,
 * or its host went silent (keepalive or unacknowledged data timed out)
 * or unreachable. */
static int peer_gone(int err)
{
	return err == ECONNRESET || err == EPIPE || err == ETIMEDOUT || err == EHOSTUNREACH ||
	       err == ENETUNREACH;
}

static void kept_append(struct cm_conn *c, struct cm_out *o)
{
	o->next = NULL;
	o->off = 0; /* a re-send starts with the header */
	if (c->kept_tail)
		c->kept_tail->next = o;
	else
		c->kept_head = o;
	c->kept_tail = o;
}

/* A retained MSG was written: it waits for LOGGED. Its token is reported
 * now, so a payload still in the sender's buffer is copied first, unless
 * the token itself waits for LOGGED (hold). */
static int keep_written(struct cm_conn *c, struct cm_out *o)
{
	if (o->hold) {
		kept_append(c, o);
		return 0;
	}
	void *token = o->token;
	if (o->len > 0 && o->payload != o->inline_data && o->owned == NULL) {
		uint8_t *copy = malloc(o->len);
		if (copy == NULL)
			return cm_conn_fail(c, "out of memory retaining a message");
		memcpy(copy, o->payload, o->len);
		o->owned = copy;
		o->payload = copy;
	}
	o->token = NULL;
	kept_append(c, o);
	if (token)
		c->ops->on_sent(c, token);
	return 0;
}

int cm_conn_flush(struct cm_conn *c)
{
	while (c->out_head && c->write_budget != 0 && c->fd >= 0) {
		struct iovec iov[OUT_IOV_MAX];
		int n = 0;
		size_t total = 0;
		int frames = 0;
		for (struct cm_out *o = c->out_head; o && n + 2 <= OUT_IOV_MAX; o = o->next) {
			if (c->write_budget >= 0 && frames++ == c->write_budget)
				break;
			if (o->off < CM_HEADER_SIZE) {
				iov[n].iov_base = o->hdr + o->off;
				iov[n].iov_len = CM_HEADER_SIZE - o->off;
				total += iov[n++].iov_len;
			}
			size_t done = o->off > CM_HEADER_SIZE ? o->off - CM_HEADER_SIZE : 0;
			if (o->len > done) {
				iov[n].iov_base = (void *)(o->payload + done);
				iov[n].iov_len = o->len - done;
				total += iov[n++].iov_len;
			}
		}
		struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)n};
		ssize_t w = sendmsg(c->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				c->wblocked = 1;
				return 0;
			}
			if (c->peer_may_die && peer_gone(errno)) {
				c->state = CM_CONN_CLOSED; /* its death, seen from here */
				return -1;
			}
			return cm_conn_fail(c, "write failed: %s", strerror(errno));
		}
		size_t left = (size_t)w;
		while (left > 0) {
			struct cm_out *o = c->out_head;
			size_t rest = CM_HEADER_SIZE + o->len - o->off;
			if (left < rest) {
				o->off += left;
				break;
			}
			left -= rest;
			c->out_head = o->next;
			if (c->out_head == NULL)
				c->out_tail = NULL;
			uncount_queued(c, o);
			if (c->write_budget > 0)
				c->write_budget--;
			if (c->retain && out_is_msg(o) && !o->again) {
				if (keep_written(c, o) < 0)
					return -1;
				continue;
			}
			if (o->token)
				c->ops->on_sent(c, o->token);
			out_free(c, o);
		}
		if ((size_t)w < total) {
			c->wblocked = 1; /* the socket buffer is full: POLLOUT tells when */
			return 0;
		}
	}
	c->wblocked = 0;
	return 0;
}

/* Takes a private copy of what is left of a queued small payload, so its
 * token can be reported now. A retained MSG keeps all of it:
 * it may have to be re-sent whole. */
static int copy_rest(struct cm_conn *c, struct cm_out *o)
{
	size_t done = o->off > CM_HEADER_SIZE ? o->off - CM_HEADER_SIZE : 0;
	if (c->retain && out_is_msg(o))
		done = 0;
	size_t rest = o->len - done;
	uint8_t *copy = malloc(rest ? rest : 1);
	if (copy == NULL)
		return -1;
	memcpy(copy, o->payload + done, rest);
	uncount_queued(c, o);
	o->owned = copy;
	o->payload = copy;
	o->len = rest;
	if (o->off > CM_HEADER_SIZE && done > 0)
		o->off = CM_HEADER_SIZE;
	count_queued(c, o);
	return 0;
}

/* What a retained MSG costs the rank: its payload, and its queue block
 * with the allocator's overhead, so that many tiny (even empty) messages
 * are bounded as well as a few large ones. */
static size_t kept_cost(size_t len)
{
	return len + sizeof(struct cm_out) + SPARE_INLINE + 16;
}

/* A MSG on a retaining connection: counted as kept, and CM_F_ACK set by
 * the policy of conn.h. 1 when its token is to wait for LOGGED (the
 * payload is not copied). */
static int retain_policy(struct cm_conn *c, struct cm_header *h, size_t len, const void *token)
{
	if (!c->retain || h->type != CM_T_MSG)
		return 0;
	c->kept_bytes += kept_cost(len);
	c->ack_bytes += len;
	c->ack_msgs++;
	if (len >= CM_RETAIN_ACK_SIZE || c->ack_bytes >= CM_RETAIN_ACK_BYTES ||
	    c->ack_msgs >= CM_RETAIN_ACK_MSGS) {
		h->flags |= CM_F_ACK;
		c->ack_bytes = 0;
		c->ack_msgs = 0;
	}
	return token != NULL && len >= CM_RETAIN_ACK_SIZE;
}

int cm_conn_send(struct cm_conn *c, struct cm_header *h, const void *payload, size_t len,
                 void *token, int copy_ok)
{
	if (!cm_conn_alive(c) || c->shut) {
		cm_err("rank %d: cannot send to %s: connection closed", c->self, c->name);
		return -1;
	}
	struct cm_out *o = out_alloc(c, 0);
	if (o == NULL)
		return cm_conn_fail(c, "out of memory queueing a frame");
	h->version = CM_PROTO_VERSION;
	h->len = (uint32_t)len;
	o->hold = retain_policy(c, h, len, token);
	o->again = 0;
	cm_header_encode(h, o->hdr);
	o->payload = payload;
	o->len = len;
	o->off = 0;
	o->token = token;
	o->owned = NULL;
	append(c, o);
	if (!c->wblocked && cm_conn_flush(c) < 0)
		return -1;
	/* o is the tail: if the queue is not empty, o is still in it. */
	if (c->out_head != NULL && token != NULL && copy_ok && len <= CM_COPY_LIMIT &&
	    copy_rest(c, o) == 0) {
		o->token = NULL;
		c->ops->on_sent(c, token);
	}
	return 0;
}

/* A frame with its payload copied inline, appended to the queue, not
 * written yet. */
static int queue_copy(struct cm_conn *c, struct cm_header *h, const void *payload, size_t len)
{
	if (!cm_conn_alive(c) || c->shut)
		return -1;
	struct cm_out *o = out_alloc(c, len);
	if (o == NULL)
		return cm_conn_fail(c, "out of memory queueing a frame");
	h->version = CM_PROTO_VERSION;
	h->len = (uint32_t)len;
	o->hold = retain_policy(c, h, len, NULL);
	o->again = 0;
	cm_header_encode(h, o->hdr);
	if (len)
		memcpy(o->inline_data, payload, len);
	o->payload = o->inline_data;
	o->len = len;
	o->off = 0;
	o->token = NULL;
	o->owned = NULL;
	append(c, o);
	return 0;
}

/* The caller's header stays untouched: queue_copy fills in version and len. */
static int queue_ctl(struct cm_conn *c, const struct cm_header *h, const void *payload, size_t len)
{
	struct cm_header copy = *h;
	return queue_copy(c, &copy, payload, len);
}

int cm_conn_queue(struct cm_conn *c, struct cm_header *h, const void *payload, size_t len)
{
	if (len > CM_COPY_LIMIT)
		return cm_conn_fail(c, "internal error: a queued frame of %zu bytes", len);
	return queue_copy(c, h, payload, len);
}

int cm_conn_send_ctl(struct cm_conn *c, const struct cm_header *h, const void *payload, size_t len)
{
	if (queue_ctl(c, h, payload, len) < 0)
		return -1;
	if (!c->wblocked)
		return cm_conn_flush(c);
	return 0;
}

int cm_conn_queue_ctl(struct cm_conn *c, const struct cm_header *h, const void *payload, size_t len)
{
	return queue_ctl(c, h, payload, len);
}

int cm_conn_send_hello(struct cm_conn *c, uint16_t flags, int src, int dst, unsigned incarnation,
                       unsigned world_size, unsigned kind, const char *secret)
{
	struct cm_hello hello = {
	    .incarnation = incarnation, .world_size = world_size, .kind = kind};
	memcpy(hello.secret, secret, CM_SECRET_LEN);
	uint8_t payload[CM_HELLO_PAYLOAD];
	cm_hello_encode(&hello, payload);
	return cm_conn_send_ctl(
	    c, &(struct cm_header){.type = CM_T_HELLO, .flags = flags, .src = src, .dst = dst},
	    payload, sizeof payload);
}

int cm_conn_refuse(struct cm_conn *c, enum cm_err code, const char *fmt, ...)
{
	char text[CM_ERROR_TEXT_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	if (cm_conn_alive(c) && !c->shut) {
		cm_conn_send_ctl(c, &(struct cm_header){.type = CM_T_ERROR, .tag = (int)code}, text,
		                 strlen(text));
		cm_conn_flush(c);
		/* FIN after the ERROR frame, so the peer can read it. */
		shutdown(c->fd, SHUT_WR);
		c->shut = 1;
	}
	return cm_conn_fail(c, "refused (error %d): %s", (int)code, text);
}

void cm_conn_shutdown(struct cm_conn *c)
{
	if (c->shut || c->out_head || !cm_conn_alive(c) || c->fd < 0)
		return;
	shutdown(c->fd, SHUT_WR);
	c->shut = 1;
}

/* ---- input ---- */

static void print_error_frame(struct cm_conn *c, const struct cm_header *h)
{
	size_t n = h->len < CM_ERROR_TEXT_MAX ? h->len : CM_ERROR_TEXT_MAX;
	char text[CM_ERROR_TEXT_MAX + 1];
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = c->scratch[i];
		text[i] = (ch >= 0x20 && ch < 0x7f) ? (char)ch : '?';
	}
	text[n] = '\0';
	c->refused = 1;
	cm_conn_fail(c, "refused by the other side, error %d (%s): %s", h->tag,
	             cm_err_str((enum cm_err)h->tag), text);
}

/* A header was decoded: decide where its payload goes. */
static int begin_frame(struct cm_conn *c)
{
	const struct cm_header *h = &c->in_h;
	struct cm_sink *sink = &c->in_sink;
	memset(sink, 0, sizeof *sink);
	if (h->type == CM_T_ERROR) {
		sink->buf = c->scratch;
		sink->cap = CM_ERROR_TEXT_MAX;
		return 0;
	}
	switch (c->state) {
	case CM_CONN_AWAIT_HELLO:
		if (h->type != CM_T_HELLO)
			return cm_conn_refuse(c, CM_E_AUTH, "%s before HELLO",
			                      cm_type_str(h->type));
		sink->buf = c->scratch;
		sink->cap = CM_HELLO_PAYLOAD;
		return 0;
	case CM_CONN_AWAIT_ACK:
		if (h->type != CM_T_HELLO_ACK)
			return cm_conn_fail(c, "expected HELLO_ACK, got %s", cm_type_str(h->type));
		if (h->dst != c->self)
			return cm_conn_fail(c, "HELLO_ACK for rank %d", h->dst);
		c->ack_clock = h->clock;
		c->state = CM_CONN_READY;
		if (c->ops->on_ready)
			return c->ops->on_ready(c);
		return 0;
	case CM_CONN_READY:
		if (h->type == CM_T_HELLO || h->type == CM_T_HELLO_ACK) {
			if (c->accepted)
				return cm_conn_refuse(c, CM_E_STATE, "second %s on a connection",
				                      cm_type_str(h->type));
			return cm_conn_fail(c, "unexpected %s", cm_type_str(h->type));
		}
		return c->ops->on_header(c, h, sink);
	default:
		return -1;
	}
}

static int end_frame(struct cm_conn *c)
{
	const struct cm_header *h = &c->in_h;
	switch (h->type) {
	case CM_T_ERROR:
		print_error_frame(c, h);
		return -1;
	case CM_T_HELLO_ACK:
		return 0; /* handled in begin_frame */
	case CM_T_HELLO: {
		struct cm_hello hello;
		enum cm_err e = cm_hello_decode(c->scratch, CM_HELLO_PAYLOAD, &hello);
		if (e != CM_OK)
			return cm_conn_refuse(c, e, "bad HELLO: %s", cm_err_str(e));
		char text[CM_ERROR_TEXT_MAX] = "";
		e = c->ops->on_hello(c, h, &hello, text, sizeof text);
		if (e != CM_OK)
			return cm_conn_refuse(c, e, "%s", text[0] ? text : cm_err_str(e));
		if (cm_conn_alive(c) && c->state == CM_CONN_AWAIT_HELLO)
			c->state = CM_CONN_READY;
		return cm_conn_alive(c) ? 0 : -1;
	}
	default:
		return c->ops->on_frame(c, h, &c->in_sink);
	}
}

static void sink_store(struct cm_conn *c, const uint8_t *p, size_t n)
{
	if (c->in_got < c->in_sink.cap) {
		size_t room = c->in_sink.cap - c->in_got;
		memcpy((uint8_t *)c->in_sink.buf + c->in_got, p, n < room ? n : room);
	}
	c->in_got += n;
}

/* Consumes the staged bytes: headers, payload pieces, whole frames. */
static int dispatch(struct cm_conn *c)
{
	for (;;) {
		if (c->state == CM_CONN_FAILED)
			return -1;
		size_t avail = c->in_end - c->in_start;
		if (!c->in_body) {
			if (avail < CM_HEADER_SIZE)
				break;
			enum cm_err e =
			    cm_header_decode(c->in_buf + c->in_start, avail, &c->lim, &c->in_h);
			c->in_start += CM_HEADER_SIZE;
			avail -= CM_HEADER_SIZE;
			if (e != CM_OK) {
				if (c->accepted)
					return cm_conn_refuse(c, e, "bad frame (type %u): %s",
					                      c->in_h.type, cm_err_str(e));
				return cm_conn_fail(c, "bad frame received: %s", cm_err_str(e));
			}
			if (begin_frame(c) < 0)
				return -1;
			c->in_body = 1;
			c->in_got = 0;
		}
		size_t need = c->in_h.len - c->in_got;
		size_t n = avail < need ? avail : need;
		if (n > 0) {
			sink_store(c, c->in_buf + c->in_start, n);
			c->in_start += n;
		}
		if (c->in_got < c->in_h.len)
			break;
		c->in_body = 0;
		if (end_frame(c) < 0)
			return -1;
	}
	/* At most a partial header is left: move it to the front. */
	size_t left = c->in_end - c->in_start;
	if (left > 0 && c->in_start > 0)
		memmove(c->in_buf, c->in_buf + c->in_start, left);
	c->in_start = 0;
	c->in_end = left;
	return 0;
}

static enum cm_io read_frames(struct cm_conn *c, int flags)
{
	if (!cm_conn_alive(c))
		return CM_IO_ERR;
	if (c->fd < 0)
		return CM_IO_OK; /* broken, not attached again yet: nothing to read */
	for (;; flags = MSG_DONTWAIT) {
		struct iovec iov[2];
		int n = 0;
		size_t direct = 0;
		if (c->in_body && c->in_got < c->in_sink.cap) {
			size_t stored_len =
			    c->in_h.len < c->in_sink.cap ? c->in_h.len : c->in_sink.cap;
			direct = stored_len - c->in_got;
			if (direct >= DIRECT_READ_MIN) {
				iov[n].iov_base = (uint8_t *)c->in_sink.buf + c->in_got;
				iov[n++].iov_len = direct;
			} else {
				direct = 0;
			}
		}
		iov[n].iov_base = c->in_buf + c->in_end;
		iov[n++].iov_len = IN_BUF_SIZE - c->in_end;
		size_t want = direct + iov[n - 1].iov_len;

		struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)n};
		ssize_t r = recvmsg(c->fd, &msg, flags);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return CM_IO_OK;
			if (c->peer_may_die && peer_gone(errno)) {
				c->state = CM_CONN_CLOSED; /* its death, seen from here */
				return CM_IO_EOF;
			}
			cm_conn_fail(c, "read failed: %s", strerror(errno));
			return CM_IO_ERR;
		}
		if (r == 0) {
			if ((c->in_body || c->in_end > c->in_start) && !c->peer_may_die) {
				cm_conn_fail(c, "connection closed in the middle of a frame");
				return CM_IO_ERR;
			}
			c->state = CM_CONN_CLOSED;
			return CM_IO_EOF;
		}
		size_t got = (size_t)r;
		if (direct > 0) {
			size_t k = got < direct ? got : direct;
			c->in_got += k;
			got -= k;
		}
		c->in_end += got;
		if (dispatch(c) < 0)
			return CM_IO_ERR;
		if (!cm_conn_alive(c))
			return c->state == CM_CONN_CLOSED ? CM_IO_EOF : CM_IO_ERR;
		if ((size_t)r < want)
			return CM_IO_OK; /* drained: skip the read that would say EAGAIN */
	}
}

enum cm_io cm_conn_read(struct cm_conn *c)
{
	return read_frames(c, MSG_DONTWAIT);
}

enum cm_io cm_conn_read_wait(struct cm_conn *c)
{
	if (!c->poll_before_wait || !cm_conn_alive(c) || c->fd < 0)
		return read_frames(c, 0);
	struct pollfd p = {.fd = c->fd, .events = POLLIN};
	/* A signal or the time limit ends the wait early, as in recvmsg(); if
	 * poll() itself fails, the wait falls back to recvmsg(). */
	int ready = poll(&p, 1, c->wait_limit_ms);
	if (ready == 0 || (ready < 0 && errno == EINTR))
		return CM_IO_OK;
	return read_frames(c, ready < 0 ? 0 : MSG_DONTWAIT);
}

void cm_conn_limit_wait(struct cm_conn *c, int ms)
{
	c->wait_limit_ms = ms > 0 ? ms : -1; /* as SO_RCVTIMEO: 0 is no limit */
	struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
	/* Best effort: without it the wait is only unbounded, as before. */
	(void)setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
}

void cm_conn_redirect(struct cm_conn *c, const struct cm_sink *sink)
{
	size_t have = c->in_got < c->in_sink.cap ? c->in_got : c->in_sink.cap;
	size_t keep = have < sink->cap ? have : sink->cap;
	if (keep > 0)
		memcpy(sink->buf, c->in_sink.buf, keep);
	c->in_sink = *sink;
}

/* ---- retention and re-connection ---- */

void cm_conn_retain(struct cm_conn *c)
{
	c->retain = 1;
}

void cm_conn_logged(struct cm_conn *c, uint64_t clock)
{
	while (c->kept_head && out_clock(c->kept_head) < clock) {
		struct cm_out *o = c->kept_head;
		c->kept_head = o->next;
		if (c->kept_head == NULL)
			c->kept_tail = NULL;
		c->kept_bytes -= kept_cost(o->len);
		if (o->token) /* held, or queued unwritten when the connection broke */
			c->ops->on_sent(c, o->token);
		out_free(c, o);
	}
}

/* Empties the output queue: MSGs join the kept ones (they go again in
 * their order), the rest is dropped. */
static void sort_queue(struct cm_conn *c)
{
	struct cm_out *o = c->out_head;
	c->out_head = c->out_tail = NULL;
	while (o) {
		struct cm_out *next = o->next;
		uncount_queued(c, o);
		if (c->retain && out_is_msg(o) && !o->again) {
			kept_append(c, o);
		} else {
			if (o->token) /* not retained: nothing will write it now */
				c->ops->on_sent(c, o->token);
			out_free(c, o);
		}
		o = next;
	}
	c->wblocked = 0;
}

void cm_conn_break(struct cm_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->in_start = c->in_end = 0;
	c->in_body = 0;
	c->in_got = 0;
	sort_queue(c);
	c->shut = 0;
	c->write_budget = 0;
	c->state = CM_CONN_AWAIT_ACK;
}

int cm_conn_attach(struct cm_conn *c, int fd)
{
	if (cm_set_nonblock(fd, 0) < 0)
		return -1;
	cm_tune_socket(fd);
	cm_set_cloexec(fd, 1);
	sort_queue(c); /* frames queued while broken */
	c->fd = fd;
	if (c->wait_limit_ms > 0)
		cm_conn_limit_wait(c, c->wait_limit_ms);
	c->state = CM_CONN_AWAIT_ACK;
	c->write_budget = 1;
	return 0;
}

void cm_conn_resume(struct cm_conn *c)
{
	sort_queue(c);
	c->write_budget = 0;
	cm_conn_logged(c, c->ack_clock);
}

unsigned cm_conn_resend(struct cm_conn *c)
{
	unsigned n = 0;
	struct cm_out *o = c->kept_head;
	c->kept_head = c->kept_tail = NULL;
	while (o) {
		struct cm_out *next = o->next;
		append(c, o);
		n++;
		o = next;
	}
	return n;
}

int cm_conn_release(struct cm_conn *c)
{
	c->write_budget = -1;
	return cm_conn_flush(c);
}

int cm_conn_queue_again(struct cm_conn *c, struct cm_header *h, const void *payload, size_t len)
{
	int retain = c->retain;
	c->retain = 0; /* not counted as kept */
	int rc = queue_copy(c, h, payload, len);
	c->retain = retain;
	if (rc == 0)
		c->out_tail->again = 1;
	return rc;
}
