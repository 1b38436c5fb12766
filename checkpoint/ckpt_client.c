/* Checkpoint client: blocking socket, one request at a time. */
#include "config.h"

#include "ckpt_client.h"

#include "net.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#define DEFAULT_TIMEOUT_MS 30000

struct ckpt_client {
	int fd;
	int timeout_ms;
	int last_errno;
	int uploading;
	uint64_t up_size, up_sum;
	size_t fill;  /* image bytes staged after the header space in buf */
	uint8_t *buf; /* CKPT_HEADER_SIZE + CKPT_CHUNK_MAX */
	char errtext[CKPT_ERROR_TEXT_MAX + 64];
};

struct ckpt_client *ckpt_client_new(int timeout_ms)
{
	struct ckpt_client *c = calloc(1, sizeof *c);
	if (c == NULL)
		return NULL;
	c->buf = malloc(CKPT_HEADER_SIZE + CKPT_CHUNK_MAX);
	if (c->buf == NULL) {
		free(c);
		return NULL;
	}
	c->fd = -1;
	c->timeout_ms = timeout_ms > 0 ? timeout_ms : DEFAULT_TIMEOUT_MS;
	return c;
}

void ckpt_client_free(struct ckpt_client *c)
{
	if (c == NULL)
		return;
	if (c->fd >= 0)
		close(c->fd);
	free(c->buf);
	free(c);
}

const char *ckpt_client_error(const struct ckpt_client *c)
{
	return c->errtext;
}

int ckpt_client_errno(const struct ckpt_client *c)
{
	return c->last_errno;
}

static int fail(struct ckpt_client *c, int code, int close_conn, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(struct ckpt_client *c, int code, int close_conn, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->errtext, sizeof c->errtext, fmt, ap);
	va_end(ap);
	if (close_conn && c->fd >= 0) {
		close(c->fd);
		c->fd = -1;
	}
	c->uploading = 0;
	return code;
}

static int io_fail(struct ckpt_client *c, const char *what)
{
	c->last_errno = errno ? errno : ECONNRESET;
	return fail(c, CKPT_E_IO, 1, "%s: %s", what, strerror(c->last_errno));
}

static int send_frame(struct ckpt_client *c, uint8_t type, const void *payload, uint32_t len)
{
	uint8_t hdr[CKPT_HEADER_SIZE];
	struct ckpt_header h = {.type = type, .len = len};
	ckpt_header_encode(&h, hdr);
	if (cm_write_full(c->fd, hdr, sizeof hdr) < 0 ||
	    (len && cm_write_full(c->fd, payload, len) < 0))
		return -1;
	return 0;
}

/* Reads one frame; payload (<= cap bytes) into buf. An ERROR frame becomes
 * the return value (and closes unless it is NOTFOUND). */
static int recv_frame(struct ckpt_client *c, struct ckpt_header *h, uint8_t *buf, size_t cap)
{
	uint8_t hdr[CKPT_HEADER_SIZE];
	if (cm_read_full(c->fd, hdr, sizeof hdr) < 0)
		return io_fail(c, "reading from the checkpoint server");
	enum ckpt_err e = ckpt_header_decode(hdr, sizeof hdr, h);
	if (e != CKPT_OK)
		return fail(c, CKPT_E_PROTO, 1, "bad frame from the server: %s", ckpt_err_str(e));
	if (h->len > cap)
		return fail(c, CKPT_E_PROTO, 1, "%s frame of %u bytes from the server",
		            ckpt_type_str(h->type), (unsigned)h->len);
	if (h->len && cm_read_full(c->fd, buf, h->len) < 0)
		return io_fail(c, "reading from the checkpoint server");
	if (h->type == CKPT_T_ERROR) {
		int code = (int)h->arg;
		return fail(c, code, code != CKPT_E_NOTFOUND, "server: %s: %.*s",
		            ckpt_err_str(code), (int)h->len, (const char *)buf);
	}
	return CKPT_OK;
}

static int expect(struct ckpt_client *c, const struct ckpt_header *h, uint8_t type)
{
	if (h->type == type)
		return CKPT_OK;
	return fail(c, CKPT_E_PROTO, 1, "server sent %s where %s was due", ckpt_type_str(h->type),
	            ckpt_type_str(type));
}

int ckpt_client_connect(struct ckpt_client *c, const char *hostport, const char *secret)
{
	struct sockaddr_in addr;
	if (c->fd >= 0)
		return fail(c, CKPT_E_ARG, 0, "already connected");
	if (hostport == NULL || cm_parse_hostport(hostport, 0, &addr) < 0)
		return fail(c, CKPT_E_ARG, 0, "bad server address '%s'", hostport ? hostport : "");
	if (secret == NULL || strlen(secret) != CKPT_SECRET_LEN)
		return fail(c, CKPT_E_ARG, 0, "the secret must be %d characters", CKPT_SECRET_LEN);
	c->fd = cm_tcp_connect(&addr, c->timeout_ms);
	if (c->fd < 0)
		return io_fail(c, "connecting to the checkpoint server");
	struct timeval tv = {.tv_sec = c->timeout_ms / 1000,
	                     .tv_usec = (c->timeout_ms % 1000) * 1000};
	setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	cm_set_cloexec(c->fd, 1);
	if (send_frame(c, CKPT_T_HELLO, secret, CKPT_SECRET_LEN) < 0)
		return io_fail(c, "sending HELLO");
	struct ckpt_header h;
	uint8_t reply[CKPT_ERROR_TEXT_MAX];
	int rc = recv_frame(c, &h, reply, sizeof reply);
	if (rc != CKPT_OK)
		return rc;
	return expect(c, &h, CKPT_T_HELLO_ACK);
}

static int need_conn(struct ckpt_client *c)
{
	if (c->fd >= 0)
		return CKPT_OK;
	c->last_errno = ENOTCONN;
	return fail(c, CKPT_E_IO, 0, "not connected");
}

int ckpt_upload_begin(struct ckpt_client *c, const char *job, uint32_t rank, uint64_t number)
{
	int rc = need_conn(c);
	if (rc != CKPT_OK)
		return rc;
	if (c->uploading)
		return fail(c, CKPT_E_ARG, 0, "an upload is already in progress");
	struct ckpt_ref ref = {.rank = rank, .number = number};
	if (job == NULL || strlen(job) > CKPT_JOB_MAX)
		return fail(c, CKPT_E_ARG, 0, "bad job id");
	strcpy(ref.job, job);
	uint8_t payload[CKPT_PUT_BEGIN_FIXED + CKPT_JOB_MAX];
	size_t len = ckpt_put_begin_encode(&ref, payload);
	if (len == 0)
		return fail(c, CKPT_E_ARG, 0, "bad job id '%s' or rank %u", job, (unsigned)rank);
	if (send_frame(c, CKPT_T_PUT_BEGIN, payload, (uint32_t)len) < 0)
		return io_fail(c, "sending PUT_BEGIN");
	c->uploading = 1;
	c->up_size = 0;
	c->up_sum = CKPT_CHECKSUM_INIT;
	c->fill = 0;
	return CKPT_OK;
}

/* The server answers an upload only at its end, or early with an ERROR
 * (oversize, storage failure): look for one without waiting, or after a
 * failed write, where the refusal explains why the server stopped reading. */
static int pending_refusal(struct ckpt_client *c, int wait_ms)
{
	struct pollfd p = {.fd = c->fd, .events = POLLIN};
	if (poll(&p, 1, wait_ms) <= 0 || !(p.revents & (POLLIN | POLLHUP | POLLERR)))
		return CKPT_OK;
	struct ckpt_header h;
	uint8_t text[CKPT_ERROR_TEXT_MAX];
	int rc = recv_frame(c, &h, text, sizeof text);
	if (rc != CKPT_OK)
		return rc;
	return fail(c, CKPT_E_PROTO, 1, "server sent %s during an upload", ckpt_type_str(h.type));
}

static int flush_chunk(struct ckpt_client *c)
{
	if (c->fill == 0)
		return CKPT_OK;
	int rc = pending_refusal(c, 0);
	if (rc != CKPT_OK)
		return rc;
	struct ckpt_header h = {.type = CKPT_T_PUT_DATA, .len = (uint32_t)c->fill};
	ckpt_header_encode(&h, c->buf);
	if (cm_write_full(c->fd, c->buf, CKPT_HEADER_SIZE + c->fill) < 0) {
		int saved = errno;
		rc = pending_refusal(c, 1000);
		if (rc != CKPT_OK)
			return rc;
		errno = saved;
		return io_fail(c, "sending PUT_DATA");
	}
	c->fill = 0;
	return CKPT_OK;
}

int ckpt_upload_write(struct ckpt_client *c, const void *data, size_t len)
{
	int rc = need_conn(c);
	if (rc != CKPT_OK)
		return rc;
	if (!c->uploading)
		return fail(c, CKPT_E_ARG, 0, "no upload in progress");
	const uint8_t *p = data;
	c->up_sum = ckpt_checksum(c->up_sum, p, len);
	c->up_size += len;
	while (len > 0) {
		size_t n = CKPT_CHUNK_MAX - c->fill;
		if (n > len)
			n = len;
		memcpy(c->buf + CKPT_HEADER_SIZE + c->fill, p, n);
		c->fill += n;
		p += n;
		len -= n;
		if (c->fill == CKPT_CHUNK_MAX && (rc = flush_chunk(c)) != CKPT_OK)
			return rc;
	}
	return CKPT_OK;
}

int ckpt_upload_end(struct ckpt_client *c)
{
	int rc = need_conn(c);
	if (rc != CKPT_OK)
		return rc;
	if (!c->uploading)
		return fail(c, CKPT_E_ARG, 0, "no upload in progress");
	if ((rc = flush_chunk(c)) != CKPT_OK)
		return rc;
	struct ckpt_summary s = {.size = c->up_size, .checksum = c->up_sum};
	uint8_t payload[CKPT_PUT_END_PAYLOAD];
	ckpt_put_end_encode(&s, payload);
	if (send_frame(c, CKPT_T_PUT_END, payload, sizeof payload) < 0) {
		int saved = errno;
		if ((rc = pending_refusal(c, 1000)) != CKPT_OK)
			return rc;
		errno = saved;
		return io_fail(c, "sending PUT_END");
	}
	c->uploading = 0;
	struct ckpt_header h;
	uint8_t text[CKPT_ERROR_TEXT_MAX];
	if ((rc = recv_frame(c, &h, text, sizeof text)) != CKPT_OK)
		return rc;
	if ((rc = expect(c, &h, CKPT_T_PUT_OK)) != CKPT_OK)
		return rc;
	c->errtext[0] = '\0';
	return CKPT_OK;
}

int ckpt_upload(struct ckpt_client *c, const char *job, uint32_t rank, uint64_t number,
                const void *data, size_t len)
{
	int rc = ckpt_upload_begin(c, job, rank, number);
	if (rc == CKPT_OK)
		rc = ckpt_upload_write(c, data, len);
	if (rc == CKPT_OK)
		rc = ckpt_upload_end(c);
	return rc;
}

int ckpt_fetch_latest(struct ckpt_client *c, const char *job, uint32_t rank,
                      struct ckpt_summary *info, ckpt_sink_fn sink, void *arg)
{
	int rc = need_conn(c);
	if (rc != CKPT_OK)
		return rc;
	if (c->uploading)
		return fail(c, CKPT_E_ARG, 0, "an upload is in progress");
	struct ckpt_ref ref = {.rank = rank};
	if (job == NULL || strlen(job) > CKPT_JOB_MAX || sink == NULL || info == NULL)
		return fail(c, CKPT_E_ARG, 0, "bad argument");
	strcpy(ref.job, job);
	uint8_t payload[CKPT_GET_LATEST_FIXED + CKPT_JOB_MAX];
	size_t plen = ckpt_get_latest_encode(&ref, payload);
	if (plen == 0)
		return fail(c, CKPT_E_ARG, 0, "bad job id '%s' or rank %u", job, (unsigned)rank);
	if (send_frame(c, CKPT_T_GET_LATEST, payload, (uint32_t)plen) < 0)
		return io_fail(c, "sending GET_LATEST");

	struct ckpt_header h;
	uint8_t *data = c->buf; /* no upload in progress: the staging buffer is free */
	if ((rc = recv_frame(c, &h, data, CKPT_CHUNK_MAX)) != CKPT_OK)
		return rc;
	if ((rc = expect(c, &h, CKPT_T_GET_BEGIN)) != CKPT_OK)
		return rc;
	if (ckpt_get_begin_decode(data, h.len, info) != CKPT_OK)
		return fail(c, CKPT_E_PROTO, 1, "bad GET_BEGIN");
	uint64_t got = 0, sum = CKPT_CHECKSUM_INIT;
	for (;;) {
		if ((rc = recv_frame(c, &h, data, CKPT_CHUNK_MAX)) != CKPT_OK)
			return rc;
		if (h.type == CKPT_T_GET_END)
			break;
		if ((rc = expect(c, &h, CKPT_T_GET_DATA)) != CKPT_OK)
			return rc;
		got += h.len;
		if (got > info->size)
			return fail(c, CKPT_E_CORRUPT, 1,
			            "server sent more than the announced %llu bytes",
			            (unsigned long long)info->size);
		sum = ckpt_checksum(sum, data, h.len);
		if (sink(arg, data, h.len) != 0)
			return fail(c, CKPT_E_ABORTED, 1, "fetch stopped by the caller");
	}
	if (got != info->size || sum != info->checksum)
		return fail(c, CKPT_E_CORRUPT, 1, "image failed verification (%llu of %llu bytes)",
		            (unsigned long long)got, (unsigned long long)info->size);
	c->errtext[0] = '\0';
	return CKPT_OK;
}

int ckpt_drop_job(struct ckpt_client *c, const char *job, uint64_t *removed)
{
	int rc = need_conn(c);
	if (rc != CKPT_OK)
		return rc;
	if (c->uploading)
		return fail(c, CKPT_E_ARG, 0, "an upload is in progress");
	if (job == NULL || !ckpt_job_valid(job, strlen(job)))
		return fail(c, CKPT_E_ARG, 0, "bad job id");
	if (send_frame(c, CKPT_T_DROP_JOB, job, (uint32_t)strlen(job)) < 0)
		return io_fail(c, "sending DROP_JOB");
	struct ckpt_header h;
	if ((rc = recv_frame(c, &h, c->buf, CKPT_CHUNK_MAX)) != CKPT_OK)
		return rc;
	if ((rc = expect(c, &h, CKPT_T_DROP_OK)) != CKPT_OK)
		return rc;
	if (removed)
		*removed = h.arg;
	c->errtext[0] = '\0';
	return CKPT_OK;
}

struct grow_buf {
	uint8_t *data;
	size_t len, cap;
};

static int grow_sink(void *arg, const void *data, size_t len)
{
	struct grow_buf *g = arg;
	if (g->len + len > g->cap) {
		size_t cap = g->cap ? g->cap : 65536;
		while (cap < g->len + len)
			cap *= 2;
		uint8_t *p = realloc(g->data, cap);
		if (p == NULL)
			return -1;
		g->data = p;
		g->cap = cap;
	}
	memcpy(g->data + g->len, data, len);
	g->len += len;
	return 0;
}

int ckpt_fetch_latest_alloc(struct ckpt_client *c, const char *job, uint32_t rank, uint64_t *number,
                            void **data, size_t *size)
{
	struct ckpt_summary info;
	struct grow_buf g = {0};
	*data = NULL;
	*size = 0;
	int rc = ckpt_fetch_latest(c, job, rank, &info, grow_sink, &g);
	if (rc != CKPT_OK) {
		free(g.data);
		return rc;
	}
	if (g.data == NULL && (g.data = malloc(1)) == NULL)
		return fail(c, CKPT_E_ABORTED, 0, "out of memory");
	*number = info.number;
	*data = g.data;
	*size = g.len;
	return CKPT_OK;
}
