/* Helpers and checks shared by the live tests of the real cmserver binary
 * ($CMSERVER, default ../cmserver/cmserver) on 127.0.0.1: test_server_live
 * and test_engines_live. Every wait is bounded (LIVE_IO_MS); a server that a
 * failed test leaves behind is killed by pid in teardown, and dies with the
 * test process in any case. */
#ifndef CHANMEM_TEST_LIVE_SERVER_H
#define CHANMEM_TEST_LIVE_SERVER_H

#include "protocol.h"

#include <check.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SECRET "fedcba9876543210fedcba9876543210"
#define MAX_MESSAGE (1024 * 1024)
#define IO_MS 10000 /* generous: the machine is shared */

/* The --mode start_server() runs cmserver with; NULL (the default) passes no
 * --mode. With a mode set, the server may run threads, so a rank that
 * reconnects right after BYE may be refused with CM_E_STATE until the server
 * has seen its old connection close: the shared checks then retry (bounded);
 * without, the new HELLO must be accepted at once. */
extern const char *live_server_mode;
/* The server start_server() (or a test's own spawn_server()) started, -1 if
 * none, and where it listens. */
extern pid_t server_pid;
extern struct sockaddr_in server_addr;

const char *cmserver_path(void);
long long now_ms(void);
/* Starts cmserver with extra arguments (NULL-terminated list), env secret
 * if secret != NULL. Returns the child pid; *ready_out gets what it wrote
 * on --ready-fd (or "" if it exited first). */
pid_t spawn_server(const char *secret, char *const extra[], char *ready_out, size_t cap,
                   int *stdout_fd);
/* Waits up to ms for pid; returns its wait status, or -1 on timeout. */
int wait_exit(pid_t pid, int ms);
/* Starts cmserver on 127.0.0.1:0 with --max-message 1MiB (and
 * live_server_mode) and checks its ready line and stdout. */
void start_server(void);
/* SIGTERM, then a bounded wait: exit status 0 expected. */
void stop_server_expect_clean(void);
/* Checked-fixture teardown: kills a server left running. */
void teardown(void);

int dial(void);
/* All len bytes within IO_MS (fails the test otherwise). */
void send_all(int fd, const void *buf, size_t len);
/* Reads exactly len bytes before deadline (now_ms() scale): 0, or -1 on
 * EOF, error or timeout. */
int recv_exact(int fd, void *buf, size_t len, long long deadline);
void send_frame(int fd, uint8_t type, uint16_t flags, int32_t src, int32_t dst, int32_t tag,
                uint32_t ctx, uint64_t clock, const void *payload, uint32_t len);
void send_hello(int fd, int rank, int world, unsigned inc, const char *secret);
void send_hello_flags(int fd, uint16_t flags, int rank, int world, unsigned inc,
                      const char *secret);
/* Nothing arrives on fd within ms milliseconds. */
void expect_quiet(int fd, int ms);
/* One frame; the payload (malloc'd, caller frees) in *payload. */
void recv_frame(int fd, struct cm_header *h, uint8_t **payload);
void expect_header_only(int fd, uint8_t type, uint64_t clock);
/* The peer must get ERROR(code) and then see the connection closed. */
void expect_refused(int fd, enum cm_err code);
/* The good client: rank `rank` sends a message to itself and receives it,
 * content checked byte for byte. *clock and *req are its counters. */
void good_roundtrip(int fd, int rank, uint64_t *clock, uint64_t *req, uint32_t len);

/* Adds the teardown fixture and the checks every mode passes: bad clients
 * refused while a good one is served, a client that stops reading does not
 * stall the others, SIGTERM with clients connected exits 0. */
void live_add_common_tests(TCase *t);

#endif
