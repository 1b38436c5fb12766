/* Socket helpers shared by every component. All return -1 with errno set
 * (and never print) on failure, so callers decide how to report. */
#ifndef CHANMEM_NET_H
#define CHANMEM_NET_H

#include <netinet/in.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

/* "HOST:PORT" (IPv4 dotted quad or "localhost"; PORT 0..65535) -> sockaddr.
 * A bare "HOST" takes default_port. Returns 0 or -1 (errno = EINVAL). */
int cm_parse_hostport(const char *text, int default_port, struct sockaddr_in *out);

/* Formats "a.b.c.d:port" into buf (at least 24 bytes). */
void cm_format_addr(const struct sockaddr_in *addr, char *buf, size_t buflen);

/* Listening TCP socket (SO_REUSEADDR, backlog 512). *bound receives the
 * actual address (port 0 picks one). */
int cm_tcp_listen(const struct sockaddr_in *addr, struct sockaddr_in *bound);

/* Blocking connect, retrying ECONNREFUSED for up to timeout_ms (a server
 * that is still starting). Sets TCP_NODELAY. */
int cm_tcp_connect(const struct sockaddr_in *addr, int timeout_ms);
/* A stream socket address of either kind a rank reaches a channel memory
 * by: TCP "HOST:PORT", or "unix:@NAME", an abstract-namespace AF_UNIX
 * socket (Linux; no file, gone with its last descriptor) for a CM on the
 * same host, which costs less per message than TCP loopback. */
#define CM_UNIX_PREFIX "unix:@"
/* NAME: 1..107 characters from [A-Za-z0-9._-] (autobound names are 5 hex
 * digits). */
#define CM_UNIX_NAME_MAX (sizeof(((struct sockaddr_un *)0)->sun_path) - 1)
/* Longest text form of either kind, with its NUL. */
#define CM_ADDR_TEXT_MAX (sizeof CM_UNIX_PREFIX + CM_UNIX_NAME_MAX)
struct cm_addr {
	socklen_t len;
	union {
		struct sockaddr sa;
		struct sockaddr_in in;
		struct sockaddr_un un;
	} u;
};

/* "HOST:PORT" (as cm_parse_hostport, the port required) or "unix:@NAME".
 * Returns 0, or -1 with errno = EINVAL and a one-line reason in why. */
int cm_parse_addr(const char *text, struct cm_addr *out, char *why, size_t whylen);
/* Text form of addr (as cm_parse_addr reads it) into buf (CM_ADDR_TEXT_MAX
 * bytes is always enough). */
void cm_format_any(const struct cm_addr *addr, char *buf, size_t buflen);

/* Listening AF_UNIX stream socket in the abstract namespace, named want
 * (a unix:@NAME address), or with want NULL a name picked by the kernel
 * (autobind: unique); nothing to clean up either way; *bound receives it.
 * Anyone on the host can connect: authenticate peers. */
int cm_unix_listen(const struct cm_addr *want, struct cm_addr *bound);

/* cm_tcp_connect for either kind of address: the same retries of
 * ECONNREFUSED (a server still starting) for up to timeout_ms. */
int cm_connect(const struct cm_addr *addr, int timeout_ms);

/* Milliseconds on the monotonic clock: deadlines and timeouts. */
long long cm_now_ms(void);

/* A connected stream socket tuned for frames: on TCP, TCP_NODELAY (small
 * frames must not wait for Nagle + delayed ACK); on AF_UNIX, SO_SNDBUF of
 * CM_UNIX_SNDBUF (best effort, capped by net.core.wmem_max). */
#define CM_UNIX_SNDBUF (4 * 1024 * 1024)
int cm_tune_socket(int fd);
/* A TCP connection whose peer's host may vanish without a FIN: probes after
 * idle_s of silence, every interval_s, count of them; data unacknowledged
 * for user_timeout_ms fails the connection too. 0 also for a unix socket
 * (nothing to probe); -1 with errno. */
int cm_set_keepalive(int fd, int idle_s, int interval_s, int count, unsigned user_timeout_ms);
int cm_set_nonblock(int fd, int on);
int cm_set_cloexec(int fd, int on);

/* Loops over short writes/reads and EINTR on a blocking fd. read_full
 * returns 0 on success, -1 on error, and sets errno = ECONNRESET on EOF. */
int cm_write_full(int fd, const void *buf, size_t len);
int cm_read_full(int fd, void *buf, size_t len);
/* The same by position (pread): 0, or -1 with errno (EIO when the file
 * ends before len bytes). */
int cm_pread_full(int fd, void *buf, size_t len, off_t off);

struct iovec;
/* After a writev that wrote done bytes of (*iov)[0..*n): drops the whole
 * iovecs it wrote and trims the one it wrote part of, so the same call
 * can go on with the rest. */
void cm_iov_consume(struct iovec **iov, int *n, size_t done);

#endif
