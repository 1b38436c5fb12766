/* The CM's side of the journal's copy on its standby (mirror.h).
 *
 * Senders write whole MIRROR frames under one mutex on a blocking socket,
 * so the stream holds the writes in the order the journal made them. A
 * thread of its own reads MIRROR_ACKs and wakes whoever waits for them:
 * waiting costs a round trip to the standby only when something was sent
 * since the last acknowledgement. */
#include "config.h"

#include "mirror.h"

#include "log.h"
#include "net.h"
#include "protocol.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define CONNECT_TIMEOUT_MS 10000
#define HELLO_ACK_TIMEOUT_MS 10000
/* A frame's length is a u32: larger writes go as several frames. */
#define FRAME_MAX (1u << 30)

struct cm_mirror {
	int fd;
	char *addr;
	pthread_mutex_t send_mu;
	uint64_t sent; /* atomic; payload bytes handed to the socket */
	pthread_mutex_t ack_mu;
	pthread_cond_t acked_cv;
	uint64_t acked; /* atomic; under ack_mu when it changes */
	bool ending;    /* atomic: the EOF that follows END is expected */
	pthread_t reader;
};

static void lost(struct cm_mirror *m, const char *why)
{
	cm_err("standby at %s lost (%s): stopping, so that it alone takes over", m->addr, why);
	_exit(1);
}

static void *read_acks(void *arg)
{
	struct cm_mirror *m = arg;
	const struct cm_limits lim = {.world_size = 0, .max_payload = 0};
	for (;;) {
		uint8_t buf[CM_HEADER_SIZE];
		struct cm_header h;
		if (cm_read_full(m->fd, buf, sizeof buf) < 0) {
			if (__atomic_load_n(&m->ending, __ATOMIC_ACQUIRE))
				return NULL;
			lost(m, strerror(errno));
		}
		if (cm_header_decode(buf, sizeof buf, &lim, &h) != CM_OK ||
		    h.type != CM_T_MIRROR_ACK)
			lost(m, "it sent something else than MIRROR_ACK");
		pthread_mutex_lock(&m->ack_mu);
		if (h.clock < m->acked || h.clock > __atomic_load_n(&m->sent, __ATOMIC_ACQUIRE)) {
			pthread_mutex_unlock(&m->ack_mu);
			lost(m, "it acknowledged bytes it was not sent");
		}
		__atomic_store_n(&m->acked, h.clock, __ATOMIC_RELEASE);
		pthread_cond_broadcast(&m->acked_cv);
		pthread_mutex_unlock(&m->ack_mu);
	}
}

/* Writes the whole iovec array; exits on a broken stream. */
static void write_iov(struct cm_mirror *m, struct iovec *iov, int n)
{
	while (n > 0) {
		ssize_t w = writev(m->fd, iov, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			lost(m, strerror(errno));
		}
		cm_iov_consume(&iov, &n, (size_t)w);
	}
}

size_t cm_mirror_send(struct cm_mirror *m, bool data, uint64_t offset, const struct iovec *iov,
                      int n)
{
	struct iovec left[8];
	if (n > (int)(sizeof left / sizeof left[0]) - 1)
		lost(m, "too many pieces in one write"); /* the journal sends at most 3 */
	memcpy(left, iov, (size_t)n * sizeof *iov);
	struct iovec *rest = left;
	size_t total = 0;
	for (int i = 0; i < n; i++)
		total += iov[i].iov_len;
	size_t sent = total;
	pthread_mutex_lock(&m->send_mu);
	while (total > 0) {
		uint32_t len = total > FRAME_MAX ? FRAME_MAX : (uint32_t)total;
		struct cm_header h = {.version = CM_PROTO_VERSION,
		                      .type = CM_T_MIRROR,
		                      .flags = data ? CM_F_DATA : 0,
		                      .len = len,
		                      .clock = offset};
		uint8_t head[CM_HEADER_SIZE];
		cm_header_encode(&h, head);
		/* This frame's share of the iovecs, after its header. */
		struct iovec frame[9];
		int k = 0;
		frame[k++] = (struct iovec){.iov_base = head, .iov_len = sizeof head};
		size_t want = len;
		for (int i = 0; want > 0; i++) {
			size_t take = rest[i].iov_len < want ? rest[i].iov_len : want;
			frame[k++] = (struct iovec){.iov_base = rest[i].iov_base, .iov_len = take};
			want -= take;
		}
		/* Counted first: the standby may acknowledge part of it early. */
		__atomic_add_fetch(&m->sent, len, __ATOMIC_RELEASE);
		write_iov(m, frame, k);
		cm_iov_consume(&rest, &n, len);
		offset += len;
		total -= len;
	}
	pthread_mutex_unlock(&m->send_mu);
	return sent;
}

void cm_mirror_wait(struct cm_mirror *m)
{
	uint64_t want = __atomic_load_n(&m->sent, __ATOMIC_ACQUIRE);
	if (__atomic_load_n(&m->acked, __ATOMIC_ACQUIRE) >= want)
		return;
	pthread_mutex_lock(&m->ack_mu);
	while (m->acked < want)
		pthread_cond_wait(&m->acked_cv, &m->ack_mu);
	pthread_mutex_unlock(&m->ack_mu);
}

struct cm_mirror *cm_mirror_connect(const char *addr_text, const char *secret, uint32_t world_size,
                                    char *err, size_t errlen)
{
	struct cm_addr addr;
	char why[128];
	if (cm_parse_addr(addr_text, &addr, why, sizeof why) < 0) {
		snprintf(err, errlen, "--mirror %s: %s", addr_text, why);
		return NULL;
	}
	int fd = cm_connect(&addr, CONNECT_TIMEOUT_MS);
	if (fd < 0) {
		snprintf(err, errlen, "--mirror %s: cannot connect: %s", addr_text,
		         strerror(errno));
		return NULL;
	}
	struct cm_hello hello = {.world_size = world_size ? world_size : 1, .kind = CM_PEER_MIRROR};
	memcpy(hello.secret, secret, CM_SECRET_LEN);
	struct cm_header h = {
	    .version = CM_PROTO_VERSION, .type = CM_T_HELLO, .len = CM_HELLO_PAYLOAD};
	uint8_t frame[CM_HEADER_SIZE + CM_HELLO_PAYLOAD];
	cm_header_encode(&h, frame);
	cm_hello_encode(&hello, frame + CM_HEADER_SIZE);
	uint8_t reply[CM_HEADER_SIZE];
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	const struct cm_limits lim = {.world_size = 0, .max_payload = CM_ERROR_TEXT_MAX};
	struct cm_header r;
	const char *refused = NULL;
	if (cm_write_full(fd, frame, sizeof frame) < 0 ||
	    poll(&pfd, 1, HELLO_ACK_TIMEOUT_MS) != 1 || cm_read_full(fd, reply, sizeof reply) < 0)
		refused = "no HELLO_ACK";
	else if (cm_header_decode(reply, sizeof reply, &lim, &r) != CM_OK ||
	         r.type != CM_T_HELLO_ACK)
		refused = "refused (not a fresh standby of this job?)";
	struct cm_mirror *m = refused ? NULL : calloc(1, sizeof *m);
	if (m == NULL || (m->addr = strdup(addr_text)) == NULL) {
		snprintf(err, errlen, "--mirror %s: %s", addr_text,
		         refused ? refused : "out of memory");
		free(m);
		close(fd);
		return NULL;
	}
	m->fd = fd;
	(void)cm_set_keepalive(fd, 2, 1, 3, 5000); /* the standby's host may vanish silently */
	pthread_mutex_init(&m->send_mu, NULL);
	pthread_mutex_init(&m->ack_mu, NULL);
	pthread_cond_init(&m->acked_cv, NULL);
	if (pthread_create(&m->reader, NULL, read_acks, m) != 0) {
		snprintf(err, errlen, "--mirror %s: cannot start a thread", addr_text);
		close(fd);
		free(m->addr);
		free(m);
		return NULL;
	}
	cm_info("journal mirrored to the standby at %s", addr_text);
	return m;
}

void cm_mirror_whole(struct cm_mirror *m)
{
	static const uint8_t mark = 0;
	struct cm_header h = {
	    .version = CM_PROTO_VERSION, .type = CM_T_MIRROR, .flags = CM_F_WHOLE, .len = 1};
	uint8_t head[CM_HEADER_SIZE];
	cm_header_encode(&h, head);
	struct iovec frame[2] = {{.iov_base = head, .iov_len = sizeof head},
	                         {.iov_base = (void *)&mark, .iov_len = 1}};
	pthread_mutex_lock(&m->send_mu);
	__atomic_add_fetch(&m->sent, 1, __ATOMIC_RELEASE);
	write_iov(m, frame, 2);
	pthread_mutex_unlock(&m->send_mu);
	cm_mirror_wait(m);
}

static void close_mirror(struct cm_mirror *m)
{
	pthread_join(m->reader, NULL);
	close(m->fd);
	pthread_mutex_destroy(&m->send_mu);
	pthread_mutex_destroy(&m->ack_mu);
	pthread_cond_destroy(&m->acked_cv);
	free(m->addr);
	free(m);
}

void cm_mirror_abandon(struct cm_mirror *m)
{
	if (m == NULL)
		return;
	__atomic_store_n(&m->ending, true, __ATOMIC_RELEASE);
	shutdown(m->fd, SHUT_RDWR);
	close_mirror(m);
}

void cm_mirror_end(struct cm_mirror *m)
{
	if (m == NULL)
		return;
	cm_mirror_wait(m);
	__atomic_store_n(&m->ending, true, __ATOMIC_RELEASE);
	struct cm_header h = {.version = CM_PROTO_VERSION, .type = CM_T_MIRROR, .flags = CM_F_END};
	uint8_t head[CM_HEADER_SIZE];
	cm_header_encode(&h, head);
	pthread_mutex_lock(&m->send_mu);
	(void)cm_write_full(m->fd, head, sizeof head);
	pthread_mutex_unlock(&m->send_mu);
	shutdown(m->fd, SHUT_WR);
	close_mirror(m);
}
