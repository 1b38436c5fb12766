/* Socket helpers shared by every component. All return -1 with errno set
 * (and never print) on failure, so callers decide how to report. */
#ifndef CHANMEM_NET_H
#define CHANMEM_NET_H

#include <netinet/in.h>
#include <stddef.h>
#include <sys/types.h>

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
/* Milliseconds on the monotonic clock: deadlines and timeouts. */
long long cm_now_ms(void);

/* TCP_NODELAY on: small frames must not wait for Nagle + delayed ACK. */
int cm_set_nodelay(int fd);
int cm_set_nonblock(int fd, int on);
int cm_set_cloexec(int fd, int on);

/* Loops over short writes/reads and EINTR on a blocking fd. read_full
 * returns 0 on success, -1 on error, and sets errno = ECONNRESET on EOF. */
int cm_write_full(int fd, const void *buf, size_t len);
int cm_read_full(int fd, void *buf, size_t len);

#endif
