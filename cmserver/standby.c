/* The standby's loop (standby.h): one poll over the listeners, the
 * connections that have not said who they are yet, and the CM's stream.
 *
 * The stream is read a whole frame at a time on a blocking socket (the
 * peer is the authenticated CM, which sends frames whole); its payload is
 * written to the files a chunk at a time as it arrives, and acknowledged
 * once the socket has nothing more to read or a good part of a large
 * frame is written, so that a CM waiting for the acknowledgement never
 * waits for the next chunk of its own stream. */
#include "config.h"

#include "standby.h"

#include "journal.h"

#include "log.h"
#include "net.h"
#include "protocol.h"
#include "secret.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define PENDING_MAX 16
#define PENDING_TIMEOUT_MS 5000
#define CHUNK (1u << 20)
#define ACK_EVERY (256u * 1024) /* of one large frame: the CM pipelines past it */
/* A CM's host that vanishes sends no FIN: its silence ends the stream. */
#define KEEPALIVE_IDLE_S 2
#define KEEPALIVE_INTERVAL_S 1
#define KEEPALIVE_COUNT 3
#define USER_TIMEOUT_MS 5000

struct pending {
	int fd;
	size_t got;
	long long since;
	uint8_t buf[CM_HEADER_SIZE + CM_HELLO_PAYLOAD];
};

struct standby {
	const char *path;
	const char *secret;
	int rec_fd, data_fd;
	uint64_t rec_size; /* bytes in the records file */
	uint64_t written;  /* MIRROR payload bytes written: what MIRROR_ACK says */
	uint64_t acked;
	bool whole; /* the CM said the copy holds its whole journal (CM_F_WHOLE) */
	int mirror; /* the CM's stream, or -1 */
	bool had_mirror;
	struct pending pend[PENDING_MAX];
	int npend;
	uint8_t *chunk;
};

enum frame_end { FRAME_OK, FRAME_END, FRAME_STREAM_LOST, FRAME_FAILED };

static int open_empty(const char *path)
{
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		cm_err("--standby: %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (!S_ISREG(st.st_mode) || st.st_size != 0) {
		cm_err("--standby: %s is not an empty file: a standby's copy starts with its CM's "
		       "first byte",
		       path);
		close(fd);
		return -1;
	}
	return fd;
}

static int send_ack(struct standby *sb)
{
	struct cm_header h = {
	    .version = CM_PROTO_VERSION, .type = CM_T_MIRROR_ACK, .clock = sb->written};
	uint8_t buf[CM_HEADER_SIZE];
	cm_header_encode(&h, buf);
	if (cm_write_full(sb->mirror, buf, sizeof buf) < 0)
		return -1;
	sb->acked = sb->written;
	return 0;
}

static bool more_to_read(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	return poll(&p, 1, 0) == 1;
}

/* One frame of the CM's stream, written and acknowledged. */
static enum frame_end mirror_frame(struct standby *sb)
{
	uint8_t head[CM_HEADER_SIZE];
	if (cm_read_full(sb->mirror, head, sizeof head) < 0)
		return FRAME_STREAM_LOST;
	const struct cm_limits lim = {.world_size = 0, .max_payload = UINT32_MAX};
	struct cm_header h;
	enum cm_err e = cm_header_decode(head, sizeof head, &lim, &h);
	if (e != CM_OK || h.type != CM_T_MIRROR) {
		cm_err("--standby: the CM's stream holds a %s frame (%s): its copy cannot be kept",
		       cm_type_str(h.type), e != CM_OK ? cm_err_str(e) : "not MIRROR");
		return FRAME_FAILED;
	}
	if (h.flags & CM_F_END)
		return h.len == 0 ? FRAME_END : FRAME_FAILED;
	if (h.flags & CM_F_WHOLE) {
		uint8_t mark;
		if (h.len != 1 || (h.flags & CM_F_DATA) || sb->whole) {
			cm_err("--standby: a malformed mark of a whole copy in the CM's stream");
			return FRAME_FAILED;
		}
		if (cm_read_full(sb->mirror, &mark, 1) < 0)
			return FRAME_STREAM_LOST;
		sb->whole = true;
		sb->written++;
		return send_ack(sb) < 0 ? FRAME_STREAM_LOST : FRAME_OK;
	}
	bool data = (h.flags & CM_F_DATA) != 0;
	if (!data && h.clock != sb->rec_size) {
		cm_err("--standby: records at byte %llu, the copy has %llu: a gap in the stream",
		       (unsigned long long)h.clock, (unsigned long long)sb->rec_size);
		return FRAME_FAILED;
	}
	uint64_t off = h.clock;
	uint32_t left = h.len;
	while (left > 0) {
		uint32_t n = left < CHUNK ? left : CHUNK;
		if (cm_read_full(sb->mirror, sb->chunk, n) < 0)
			return FRAME_STREAM_LOST; /* a torn last write: recovery cuts it */
		const uint8_t *p = sb->chunk;
		for (uint32_t done = 0; done < n;) {
			ssize_t w = pwrite(data ? sb->data_fd : sb->rec_fd, p + done, n - done,
			                   (off_t)(off + done));
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				cm_err("--standby: writing %s%s: %s", sb->path, data ? ".data" : "",
				       w < 0 ? strerror(errno) : "nothing written");
				return FRAME_FAILED;
			}
			done += (uint32_t)w;
		}
		off += n;
		left -= n;
		if (!data)
			sb->rec_size += n;
		sb->written += n;
		if (sb->written - sb->acked >= ACK_EVERY && send_ack(sb) < 0)
			return FRAME_STREAM_LOST;
	}
	if (sb->written != sb->acked && !more_to_read(sb->mirror) && send_ack(sb) < 0)
		return FRAME_STREAM_LOST;
	return FRAME_OK;
}

static void drop_pending(struct standby *sb, int i)
{
	close(sb->pend[i].fd);
	sb->pend[i] = sb->pend[--sb->npend];
}

/* A connection said HELLO: the CM's, or someone to turn away. */
static void hello_from(struct standby *sb, int i)
{
	struct pending *p = &sb->pend[i];
	struct cm_hello hello;
	if (cm_hello_decode(p->buf + CM_HEADER_SIZE, CM_HELLO_PAYLOAD, &hello) != CM_OK ||
	    hello.kind != CM_PEER_MIRROR) {
		cm_debug("turned a connection away: this standby serves no rank yet");
		drop_pending(sb, i);
		return;
	}
	if (!cm_secret_equal(hello.secret, sb->secret) || sb->had_mirror) {
		cm_err("refused a channel memory's stream: %s",
		       sb->had_mirror ? "this standby already copies one" : "wrong job secret");
		drop_pending(sb, i);
		return;
	}
	int fd = p->fd;
	sb->pend[i] = sb->pend[--sb->npend];
	struct cm_header ack = {.version = CM_PROTO_VERSION, .type = CM_T_HELLO_ACK};
	uint8_t buf[CM_HEADER_SIZE];
	cm_header_encode(&ack, buf);
	if (cm_set_nonblock(fd, 0) < 0 || cm_write_full(fd, buf, sizeof buf) < 0) {
		close(fd);
		return;
	}
	/* Acknowledgements are small writes the CM waits for: no Nagle. */
	(void)cm_tune_socket(fd);
	(void)cm_set_keepalive(fd, KEEPALIVE_IDLE_S, KEEPALIVE_INTERVAL_S, KEEPALIVE_COUNT,
	                       USER_TIMEOUT_MS);
	sb->mirror = fd;
	sb->had_mirror = true;
	cm_info("copying the journal of the channel memory that connected");
}

static void read_pending(struct standby *sb, int i)
{
	struct pending *p = &sb->pend[i];
	size_t want = CM_HEADER_SIZE;
	if (p->got >= CM_HEADER_SIZE)
		want += CM_HELLO_PAYLOAD;
	ssize_t r = read(p->fd, p->buf + p->got, want - p->got);
	if (r < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (r <= 0) {
		drop_pending(sb, i);
		return;
	}
	p->got += (size_t)r;
	if (p->got == CM_HEADER_SIZE) {
		const struct cm_limits lim = {.world_size = 0, .max_payload = CM_HELLO_PAYLOAD};
		struct cm_header h;
		if (cm_header_decode(p->buf, CM_HEADER_SIZE, &lim, &h) != CM_OK ||
		    h.type != CM_T_HELLO)
			drop_pending(sb, i);
	} else if (p->got == sizeof p->buf) {
		hello_from(sb, i);
	}
}

/* One per wake-up: the listener may be a blocking socket (the engines
 * set it up their way after this). */
static void accept_one(struct standby *sb, int listener)
{
	int fd = accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0)
		return; /* a connection that went before we took it */
	if (sb->npend == PENDING_MAX) {
		int oldest = 0;
		for (int i = 1; i < sb->npend; i++)
			if (sb->pend[i].since < sb->pend[oldest].since)
				oldest = i;
		drop_pending(sb, oldest);
	}
	sb->pend[sb->npend++] = (struct pending){.fd = fd, .since = cm_now_ms()};
}

static enum cm_standby_end serve(struct standby *sb, const struct cm_listeners *ls, int sigfd)
{
	for (;;) {
		struct pollfd pfd[2 + CM_MAX_LISTENERS + PENDING_MAX];
		int n = 0;
		pfd[n++] = (struct pollfd){.fd = sigfd, .events = POLLIN};
		for (unsigned i = 0; i < ls->n; i++)
			pfd[n++] = (struct pollfd){.fd = ls->fds[i], .events = POLLIN};
		int first_pending = n;
		for (int i = 0; i < sb->npend; i++)
			pfd[n++] = (struct pollfd){.fd = sb->pend[i].fd, .events = POLLIN};
		int mirror_at = -1;
		if (sb->mirror >= 0) {
			mirror_at = n;
			pfd[n++] = (struct pollfd){.fd = sb->mirror, .events = POLLIN};
		}
		if (poll(pfd, (nfds_t)n, 1000) < 0) {
			if (errno == EINTR)
				continue;
			cm_err("--standby: poll: %s", strerror(errno));
			return CM_STANDBY_FAILED;
		}
		if (pfd[0].revents) {
			cm_info("stopped before its channel memory needed it");
			return CM_STANDBY_NOT_NEEDED;
		}
		if (mirror_at >= 0 && pfd[mirror_at].revents) {
			switch (mirror_frame(sb)) {
			case FRAME_OK:
				break;
			case FRAME_END:
				cm_info(
				    "the channel memory ended cleanly: its standby is not needed");
				return CM_STANDBY_NOT_NEEDED;
			case FRAME_STREAM_LOST:
				if (!sb->whole) {
					cm_err("--standby: the channel memory left before its "
					       "journal was copied whole: this copy cannot serve");
					return CM_STANDBY_FAILED;
				}
				return CM_STANDBY_TAKE_OVER;
			case FRAME_FAILED:
				return CM_STANDBY_FAILED;
			}
			/* A long copy must not keep ranks that try this address
			 * waiting for an answer: they are turned away below. */
		}
		/* Newest first, so that dropping one does not skip another. */
		for (int i = sb->npend - 1; i >= 0; i--)
			if (pfd[first_pending + i].revents)
				read_pending(sb, i);
		long long now = cm_now_ms();
		for (int i = sb->npend - 1; i >= 0; i--)
			if (now - sb->pend[i].since > PENDING_TIMEOUT_MS)
				drop_pending(sb, i);
		for (unsigned i = 0; i < ls->n; i++)
			if (pfd[1 + i].revents)
				accept_one(sb, ls->fds[i]);
	}
}

enum cm_standby_end cm_standby_run(const struct cm_listeners *ls, const char *path,
                                   const char *secret)
{
	struct standby sb = {
	    .path = path, .secret = secret, .mirror = -1, .rec_fd = -1, .data_fd = -1};
	char data_path[PATH_MAX];
	if (cm_journal_data_path(path, data_path, sizeof data_path) < 0) {
		cm_err("--journal %s: name too long", path);
		return CM_STANDBY_FAILED;
	}
	sigset_t stop;
	sigemptyset(&stop);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGINT);
	int sigfd = signalfd(-1, &stop, SFD_CLOEXEC);
	enum cm_standby_end end = CM_STANDBY_FAILED;
	if (sigfd < 0)
		cm_err("--standby: signalfd: %s", strerror(errno));
	else if ((sb.chunk = malloc(CHUNK)) == NULL)
		cm_err("out of memory");
	else if ((sb.rec_fd = open_empty(path)) >= 0 && (sb.data_fd = open_empty(data_path)) >= 0)
		end = serve(&sb, ls, sigfd);
	if (end == CM_STANDBY_TAKE_OVER) {
		cm_notice("taking over: journal %s, %llu bytes copied", path,
		          (unsigned long long)sb.written);
	}
	while (sb.npend > 0)
		drop_pending(&sb, sb.npend - 1);
	if (sb.mirror >= 0)
		close(sb.mirror);
	if (sb.rec_fd >= 0)
		close(sb.rec_fd);
	if (sb.data_fd >= 0)
		close(sb.data_fd);
	if (sigfd >= 0)
		close(sigfd);
	free(sb.chunk);
	return end;
}
