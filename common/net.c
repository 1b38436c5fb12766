#include "net.h"

#include "units.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

int cm_parse_hostport(const char *text, int default_port, struct sockaddr_in *out)
{
	char host[64];
	const char *colon = strrchr(text, ':');
	size_t hlen = colon ? (size_t)(colon - text) : strlen(text);
	long port = default_port;

	if (hlen == 0 || hlen >= sizeof host)
		goto bad;
	memcpy(host, text, hlen);
	host[hlen] = '\0';
	if (colon && cm_parse_long(colon + 1, 0, 65535, &port) < 0)
		goto bad;
	if (port < 0 || port > 65535)
		goto bad;
	memset(out, 0, sizeof *out);
	out->sin_family = AF_INET;
	out->sin_port = htons((uint16_t)port);
	if (strcmp(host, "localhost") == 0)
		strcpy(host, "127.0.0.1");
	if (inet_pton(AF_INET, host, &out->sin_addr) != 1)
		goto bad;
	return 0;
bad:
	errno = EINVAL;
	return -1;
}

void cm_format_addr(const struct sockaddr_in *addr, char *buf, size_t buflen)
{
	char ip[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, &addr->sin_addr, ip, sizeof ip);
	snprintf(buf, buflen, "%s:%u", ip, (unsigned)ntohs(addr->sin_port));
}

int cm_tune_socket(int fd)
{
	int one = 1;
	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0)
		return 0;
	if (errno != EOPNOTSUPP)
		return -1;
	/* AF_UNIX: no Nagle to turn off, but a send buffer to widen. What a
	 * stream unix socket has queued at its peer (each frame charged with
	 * its skb overhead, ~1 KiB for a small one) counts against the
	 * sender's SO_SNDBUF; the default 208 KiB fills after ~200 small
	 * frames, while TCP loopback takes megabytes before EAGAIN. Capped by
	 * net.core.wmem_max; best effort. */
	int size = CM_UNIX_SNDBUF;
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
	return 0;
}

int cm_set_keepalive(int fd, int idle_s, int interval_s, int count, unsigned user_timeout_ms)
{
	int on = 1;
	if (setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on) < 0 ||
	    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle_s, sizeof idle_s) < 0 ||
	    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval_s, sizeof interval_s) < 0 ||
	    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count) < 0)
		return errno == EOPNOTSUPP ? 0 : -1;
	return setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms,
	                  sizeof user_timeout_ms);
}

int cm_set_nonblock(int fd, int on)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0)
		return -1;
	fl = on ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK);
	return fcntl(fd, F_SETFL, fl);
}

int cm_set_cloexec(int fd, int on)
{
	int fl = fcntl(fd, F_GETFD);
	if (fl < 0)
		return -1;
	fl = on ? (fl | FD_CLOEXEC) : (fl & ~FD_CLOEXEC);
	return fcntl(fd, F_SETFD, fl);
}

/* Closes a socket that failed to set up; -1 with the failure's errno. */
static int close_failed(int fd)
{
	int saved = errno;
	close(fd);
	errno = saved;
	return -1;
}

int cm_tcp_listen(const struct sockaddr_in *addr, struct sockaddr_in *bound)
{
	int one = 1;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
	    bind(fd, (const struct sockaddr *)addr, sizeof *addr) < 0 || listen(fd, 512) < 0)
		goto fail;
	if (bound) {
		socklen_t len = sizeof *bound;
		if (getsockname(fd, (struct sockaddr *)bound, &len) < 0)
			goto fail;
	}
	return fd;
fail:
	return close_failed(fd);
}

long long cm_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Connects a new socket of addr's family, retrying ECONNREFUSED (and
 * EINTR, EAGAIN) with a growing pause until timeout_ms is over. */
static int connect_retrying(const struct sockaddr *sa, socklen_t len, int timeout_ms)
{
	long long deadline = cm_now_ms() + timeout_ms;
	int delay_ms = 5;
	for (;;) {
		int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -1;
		if (connect(fd, sa, len) == 0) {
			cm_tune_socket(fd);
			return fd;
		}
		int saved = errno;
		close(fd);
		if ((saved != ECONNREFUSED && saved != EINTR && saved != EAGAIN) ||
		    cm_now_ms() + delay_ms > deadline) {
			errno = saved;
			return -1;
		}
		poll(NULL, 0, delay_ms);
		if (delay_ms < 200)
			delay_ms *= 2;
	}
}

int cm_tcp_connect(const struct sockaddr_in *addr, int timeout_ms)
{
	return connect_retrying((const struct sockaddr *)addr, sizeof *addr, timeout_ms);
}

int cm_connect(const struct cm_addr *addr, int timeout_ms)
{
	return connect_retrying(&addr->u.sa, addr->len, timeout_ms);
}

static int unix_name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '.' || c == '_' || c == '-';
}

int cm_parse_addr(const char *text, struct cm_addr *out, char *why, size_t whylen)
{
	memset(out, 0, sizeof *out);
	if (strncmp(text, "unix:", 5) == 0) {
		if (text[5] != '@') {
			snprintf(why, whylen,
			         "only abstract unix sockets are supported: write unix:@NAME");
			goto bad;
		}
		const char *name = text + strlen(CM_UNIX_PREFIX);
		size_t n = strlen(name);
		if (n == 0 || n > CM_UNIX_NAME_MAX) {
			snprintf(why, whylen, "the name after unix:@ must have 1 to %zu characters",
			         CM_UNIX_NAME_MAX);
			goto bad;
		}
		for (size_t i = 0; i < n; i++)
			if (!unix_name_char(name[i])) {
				snprintf(
				    why, whylen,
				    "the name after unix:@ may only hold letters, digits, '.', '_' "
				    "and '-'");
				goto bad;
			}
		out->u.un.sun_family = AF_UNIX;
		memcpy(out->u.un.sun_path + 1, name, n); /* sun_path[0] = 0: abstract */
		out->len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
		return 0;
	}
	if (cm_parse_hostport(text, -1, &out->u.in) < 0 || strchr(text, ':') == NULL ||
	    out->u.in.sin_port == 0) {
		snprintf(why, whylen, "not an IPv4 HOST:PORT or unix:@NAME address");
		goto bad;
	}
	out->len = sizeof out->u.in;
	return 0;
bad:
	errno = EINVAL;
	return -1;
}

void cm_format_any(const struct cm_addr *addr, char *buf, size_t buflen)
{
	if (addr->u.sa.sa_family == AF_INET) {
		cm_format_addr(&addr->u.in, buf, buflen);
		return;
	}
	size_t off = offsetof(struct sockaddr_un, sun_path) + 1;
	size_t n = addr->len > off ? addr->len - off : 0;
	snprintf(buf, buflen, "%s%.*s", CM_UNIX_PREFIX, (int)n, addr->u.un.sun_path + 1);
}

int cm_unix_listen(const struct cm_addr *want, struct cm_addr *bound)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	struct sockaddr_un any = {.sun_family = AF_UNIX};
	memset(bound, 0, sizeof *bound);
	bound->len = sizeof bound->u.un;
	/* An address of just the family: the kernel autobinds a unique
	 * abstract name (5 hex digits). */
	const struct sockaddr *at = want ? &want->u.sa : (const struct sockaddr *)&any;
	socklen_t at_len = want ? want->len : (socklen_t)sizeof(sa_family_t);
	if (bind(fd, at, at_len) < 0 || listen(fd, 512) < 0 ||
	    getsockname(fd, &bound->u.sa, &bound->len) < 0)
		goto fail;
	size_t off = offsetof(struct sockaddr_un, sun_path) + 1;
	for (size_t i = off; i < bound->len; i++)
		if (!unix_name_char(((const char *)&bound->u.un)[i])) {
			errno = EADDRNOTAVAIL; /* not the autobind name we expect */
			goto fail;
		}
	if (bound->len <= off) {
		errno = EADDRNOTAVAIL;
		goto fail;
	}
	return fd;
fail:
	return close_failed(fd);
}

int cm_write_full(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int cm_pread_full(int fd, void *buf, size_t len, off_t off)
{
	char *p = buf;
	while (len > 0) {
		ssize_t n = pread(fd, p, len, off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (n == 0) {
			errno = EIO;
			return -1;
		}
		p += n;
		off += n;
		len -= (size_t)n;
	}
	return 0;
}

void cm_iov_consume(struct iovec **iov, int *n, size_t done)
{
	while (*n > 0 && done >= (*iov)->iov_len) {
		done -= (*iov)->iov_len;
		(*iov)++;
		(*n)--;
	}
	if (*n > 0) {
		(*iov)->iov_base = (char *)(*iov)->iov_base + done;
		(*iov)->iov_len -= done;
	}
}

int cm_read_full(int fd, void *buf, size_t len)
{
	char *p = buf;
	while (len > 0) {
		ssize_t n = read(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (n == 0) {
			errno = ECONNRESET;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}
