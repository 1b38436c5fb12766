/* A ckptserver connection: HELLO, then any number of uploads, fetches and
 * job removals.
 *
 * Blocking I/O in a thread per connection (not the libev loop the channel
 * memories use): every request does disk work that blocks (compression,
 * fsync, directory sync), and a fetch or upload of a large image would stall
 * every other client of a single loop for seconds. Threads let uploads
 * compress on both cores and keep the streaming code straight-line. */
#include "config.h"

#include "ckpt_session.h"

#include "log.h"
#include "net.h"
#include "protocol.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* How long a refused client's remaining bytes are drained before closing:
 * closing with unread data would reset the connection and could destroy
 * the ERROR frame before the client reads it. */
#define LINGER_MS 2000

struct session {
	struct ckpt_server *srv;
	int fd;
	uint8_t *buf; /* CKPT_HEADER_SIZE + CKPT_CHUNK_MAX */
};

static int send_frame(int fd, uint8_t type, uint64_t arg, const void *payload, uint32_t len)
{
	uint8_t hdr[CKPT_HEADER_SIZE];
	struct ckpt_header h = {.type = type, .len = len, .arg = arg};
	ckpt_header_encode(&h, hdr);
	if (cm_write_full(fd, hdr, sizeof hdr) < 0 || (len && cm_write_full(fd, payload, len) < 0))
		return -1;
	return 0;
}

static void send_error(int fd, int code, const char *text)
{
	size_t n = strlen(text);
	if (n > CKPT_ERROR_TEXT_MAX)
		n = CKPT_ERROR_TEXT_MAX;
	send_frame(fd, CKPT_T_ERROR, (uint64_t)code, text, (uint32_t)n);
}

/* ERROR, then a bounded drain so the client can read it, then close. */
static void refuse_and_close(int fd, int code, const char *text)
{
	send_error(fd, code, text);
	shutdown(fd, SHUT_WR);
	long long deadline = cm_now_ms() + LINGER_MS;
	char sink[65536];
	for (;;) {
		long long left = deadline - cm_now_ms();
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			break;
		ssize_t n = recv(fd, sink, sizeof sink, MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
			break;
	}
	close(fd);
}

void ckpt_session_refuse(int fd, int code, const char *text)
{
	refuse_and_close(fd, code, text);
}

/* Reads one frame into s->buf. Returns CKPT_OK, a decode error, or -1 when
 * the connection failed or closed (nothing to answer). */
static int read_frame(struct session *s, struct ckpt_header *h)
{
	uint8_t hdr[CKPT_HEADER_SIZE];
	if (cm_read_full(s->fd, hdr, sizeof hdr) < 0)
		return -1;
	enum ckpt_err e = ckpt_header_decode(hdr, sizeof hdr, h);
	if (e != CKPT_OK)
		return e;
	if (h->len && cm_read_full(s->fd, s->buf, h->len) < 0)
		return -1;
	return CKPT_OK;
}

/* PUT_BEGIN received: stream PUT_DATA into the store until PUT_END. */
static int serve_upload(struct session *s, const struct ckpt_header *begin, const char **why)
{
	struct ckpt_ref ref;
	int rc = ckpt_put_begin_decode(s->buf, begin->len, &ref);
	if (rc != CKPT_OK) {
		*why = "bad PUT_BEGIN (job id: 1-64 of A-Z a-z 0-9 . _ -)";
		return rc;
	}
	struct store_upload *up;
	if ((rc = store_upload_start(s->srv->store, &ref, &up, why)) != CKPT_OK)
		return rc;
	for (;;) {
		struct ckpt_header h;
		rc = read_frame(s, &h);
		if (rc != CKPT_OK) {
			store_upload_discard(up);
			*why = rc < 0 ? NULL : ckpt_err_str(rc);
			return rc;
		}
		if (h.type == CKPT_T_PUT_DATA) {
			if ((rc = store_upload_add(up, s->buf, h.len, why)) != CKPT_OK) {
				store_upload_discard(up);
				return rc;
			}
			continue;
		}
		if (h.type != CKPT_T_PUT_END) {
			store_upload_discard(up);
			*why = "only PUT_DATA or PUT_END may follow PUT_BEGIN";
			return CKPT_E_STATE;
		}
		struct ckpt_summary claim;
		if ((rc = ckpt_put_end_decode(s->buf, h.len, &claim)) != CKPT_OK) {
			store_upload_discard(up);
			*why = ckpt_err_str(rc);
			return rc;
		}
		if ((rc = store_upload_commit(up, &claim, why)) != CKPT_OK)
			return rc;
		cm_info("committed job %s rank %u number %llu (%llu bytes)", ref.job,
		        (unsigned)ref.rank, (unsigned long long)ref.number,
		        (unsigned long long)claim.size);
		return send_frame(s->fd, CKPT_T_PUT_OK, ref.number, NULL, 0) < 0 ? -1 : CKPT_OK;
	}
}

/* GET_LATEST received: GET_BEGIN, GET_DATA..., GET_END, or ERROR. A
 * NOTFOUND answer keeps the connection (returns CKPT_OK). */
static int serve_fetch(struct session *s, const struct ckpt_header *req, const char **why)
{
	struct ckpt_ref ref;
	int rc = ckpt_get_latest_decode(s->buf, req->len, &ref);
	if (rc != CKPT_OK) {
		*why = "bad GET_LATEST (job id: 1-64 of A-Z a-z 0-9 . _ -)";
		return rc;
	}
	struct ckpt_summary info;
	struct store_reader *r;
	rc = store_reader_open(s->srv->store, &ref, &info, &r, why);
	if (rc == CKPT_E_NOTFOUND) {
		send_error(s->fd, rc, *why);
		return CKPT_OK;
	}
	if (rc != CKPT_OK)
		return rc;
	uint8_t begin[CKPT_GET_BEGIN_PAYLOAD];
	ckpt_get_begin_encode(&info, begin);
	if (send_frame(s->fd, CKPT_T_GET_BEGIN, 0, begin, sizeof begin) < 0)
		goto io_failed;
	for (;;) {
		size_t got;
		rc = store_reader_next(r, s->buf + CKPT_HEADER_SIZE, CKPT_CHUNK_MAX, &got, why);
		if (rc != CKPT_OK) {
			cm_err("job %s rank %u number %llu: %s", ref.job, (unsigned)ref.rank,
			       (unsigned long long)info.number, *why);
			store_reader_close(r);
			return rc;
		}
		if (got == 0)
			break;
		struct ckpt_header h = {.type = CKPT_T_GET_DATA, .len = (uint32_t)got};
		ckpt_header_encode(&h, s->buf);
		if (cm_write_full(s->fd, s->buf, CKPT_HEADER_SIZE + got) < 0)
			goto io_failed;
	}
	store_reader_close(r);
	return send_frame(s->fd, CKPT_T_GET_END, 0, NULL, 0) < 0 ? -1 : CKPT_OK;
io_failed:
	store_reader_close(r);
	return -1;
}

/* DROP_JOB received: the job's images go, DROP_OK says how many. */
static int serve_drop(struct session *s, const struct ckpt_header *req, const char **why)
{
	char job[CKPT_JOB_MAX + 1];
	if (!ckpt_job_valid((const char *)s->buf, req->len)) {
		*why = "bad DROP_JOB (job id: 1-64 of A-Z a-z 0-9 . _ -)";
		return CKPT_E_FIELD;
	}
	memcpy(job, s->buf, req->len);
	job[req->len] = '\0';
	uint64_t removed;
	if (ckpt_store_remove_job(s->srv->store, job, &removed) < 0) {
		*why = "cannot update the index";
		return CKPT_E_STORAGE;
	}
	cm_info("removed job %s: %llu image(s)", job, (unsigned long long)removed);
	return send_frame(s->fd, CKPT_T_DROP_OK, removed, NULL, 0) < 0 ? -1 : CKPT_OK;
}

/* Reads exactly len bytes by the absolute deadline (cm_now_ms). 0, or -1
 * (closed, failed, or too late). */
static int read_by(int fd, void *buf, size_t len, long long deadline)
{
	uint8_t *p = buf;
	while (len > 0) {
		long long left = deadline - cm_now_ms();
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		if (left <= 0)
			return -1;
		int r = poll(&pf, 1, (int)left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		ssize_t n = recv(fd, p, len, MSG_DONTWAIT);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Enters fd in the list of connections still authenticating; a full list
 * drops its oldest (shutdown: that session's read fails at once). */
static void unauth_enter(struct ckpt_server *srv, int fd)
{
	pthread_mutex_lock(&srv->unauth_mu);
	if (srv->nunauth == CKPT_MAX_UNAUTH) {
		shutdown(srv->unauth[0], SHUT_RDWR);
		memmove(srv->unauth, srv->unauth + 1,
		        (CKPT_MAX_UNAUTH - 1) * sizeof srv->unauth[0]);
		srv->nunauth--;
		static long long said;
		long long now = cm_now_ms();
		if (now - said > 10000) { /* a flood must not flood the log too */
			said = now;
			cm_info("%d connections without HELLO: dropping the oldest",
			        CKPT_MAX_UNAUTH);
		}
	}
	srv->unauth[srv->nunauth++] = fd;
	pthread_mutex_unlock(&srv->unauth_mu);
}

/* false: it was dropped meanwhile (see unauth_enter). */
static bool unauth_leave(struct ckpt_server *srv, int fd)
{
	bool found = false;
	pthread_mutex_lock(&srv->unauth_mu);
	for (int i = 0; i < srv->nunauth; i++)
		if (srv->unauth[i] == fd) {
			memmove(srv->unauth + i, srv->unauth + i + 1,
			        (size_t)(srv->nunauth - i - 1) * sizeof srv->unauth[0]);
			srv->nunauth--;
			found = true;
			break;
		}
	pthread_mutex_unlock(&srv->unauth_mu);
	return found;
}

/* The HELLO frame, whole within CKPT_AUTH_TIMEOUT_MS of connecting. */
static int authenticate(struct session *s, const char **why)
{
	long long deadline = cm_now_ms() + CKPT_AUTH_TIMEOUT_MS;
	uint8_t hdr[CKPT_HEADER_SIZE];
	struct ckpt_header h;
	unauth_enter(s->srv, s->fd);
	int rc = -1;
	if (read_by(s->fd, hdr, sizeof hdr, deadline) == 0)
		rc = (int)ckpt_header_decode(hdr, sizeof hdr, &h);
	if (rc == CKPT_OK && h.type != CKPT_T_HELLO)
		rc = CKPT_E_AUTH;
	if (rc == CKPT_OK && h.len && read_by(s->fd, s->buf, h.len, deadline) < 0)
		rc = -1;
	if (!unauth_leave(s->srv, s->fd) || rc < 0) {
		*why = NULL; /* dropped, gone or too slow: nobody to answer */
		return -1;
	}
	if (rc != CKPT_OK) {
		*why = rc == CKPT_E_AUTH ? "HELLO with the job secret must come first"
		                         : ckpt_err_str(rc);
		return rc;
	}
	char presented[CKPT_SECRET_LEN + 1];
	memcpy(presented, s->buf, CKPT_SECRET_LEN);
	presented[CKPT_SECRET_LEN] = '\0';
	if (strlen(presented) != CKPT_SECRET_LEN || !cm_secret_equal(presented, s->srv->secret)) {
		*why = "wrong job secret";
		return CKPT_E_AUTH;
	}
	return send_frame(s->fd, CKPT_T_HELLO_ACK, 0, NULL, 0) < 0 ? -1 : CKPT_OK;
}

void ckpt_session_serve(struct ckpt_server *srv, int fd)
{
	struct session s = {.srv = srv, .fd = fd, .buf = malloc(CKPT_HEADER_SIZE + CKPT_CHUNK_MAX)};
	const char *why = NULL;
	int rc;
	if (s.buf == NULL) {
		refuse_and_close(fd, CKPT_E_BUSY, "out of memory");
		return;
	}
	rc = authenticate(&s, &why);
	while (rc == CKPT_OK) {
		struct ckpt_header h;
		rc = read_frame(&s, &h);
		if (rc != CKPT_OK) {
			why = rc < 0 ? NULL : ckpt_err_str(rc);
			break;
		}
		if (h.type == CKPT_T_PUT_BEGIN)
			rc = serve_upload(&s, &h, &why);
		else if (h.type == CKPT_T_GET_LATEST)
			rc = serve_fetch(&s, &h, &why);
		else if (h.type == CKPT_T_DROP_JOB)
			rc = serve_drop(&s, &h, &why);
		else if (h.type == CKPT_T_HELLO) {
			why = "second HELLO";
			rc = CKPT_E_STATE;
		} else {
			why = "expected PUT_BEGIN, GET_LATEST or DROP_JOB";
			rc = CKPT_E_STATE;
		}
	}
	free(s.buf);
	if (rc > 0) {
		cm_info("client refused: %s: %s", ckpt_err_str(rc), why ? why : "");
		refuse_and_close(fd, rc, why ? why : ckpt_err_str(rc));
	} else {
		/* EOF or I/O failure: an upload in progress was discarded. */
		close(fd);
	}
}
