#include "net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
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
	if (colon) {
		char *end;
		errno = 0;
		port = strtol(colon + 1, &end, 10);
		if (errno || end == colon + 1 || *end != '\0')
			goto bad;
	}
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

int cm_set_nodelay(int fd)
{
	int one = 1;
	return setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
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
fail:;
	int saved = errno;
	close(fd);
	errno = saved;
	return -1;
}

long long cm_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int cm_tcp_connect(const struct sockaddr_in *addr, int timeout_ms)
{
	long long deadline = cm_now_ms() + timeout_ms;
	int delay_ms = 5;
	for (;;) {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -1;
		if (connect(fd, (const struct sockaddr *)addr, sizeof *addr) == 0) {
			cm_set_nodelay(fd);
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
