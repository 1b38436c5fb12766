/* Test harness for the client transports: starts N rank processes with the
 * job environment cmrun would give them (listening sockets on 127.0.0.1:0
 * for the direct transport), runs one scenario in each through the
 * transport API, and waits for them, bounded in time, killing leftovers by
 * pid. The scenarios are shared by the direct and cm transport tests. */
#ifndef TEST_TRANSPORT_HARNESS_H
#define TEST_TRANSPORT_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "protocol.h"
#include "transport.h"

#define TEST_SECRET "0123456789abcdef0123456789abcdef"

struct tjob {
	int n;
	const char *transport; /* "direct" or "cm" */
	const char *cms;       /* cm: "h:p,h:p" */
	const char *home;      /* cm: optional CHANMEM_HOME */
	const char *secret;    /* NULL: TEST_SECRET (what the test cmservers use) */
};

/* A scenario: runs in every rank; returns 0 on success (prints why not). */
typedef int (*rank_fn)(struct cm_transport *t, int rank, int size);

/* Runs fn in job->n processes; 0 if every rank initialised, passed and
 * finalized. Ranks still running after timeout_s are killed. */
int tjob_run(const struct tjob *job, rank_fn fn, int timeout_s);

/* Starts `cmserver` (path from $CMSERVER) on 127.0.0.1:0 with the test
 * secret; writes "host:port" into addr. Returns its pid, or -1. */
pid_t cmserver_start(char *addr, size_t addrlen);
/* SIGTERM, bounded wait, SIGKILL if needed. Returns its exit status or -1. */
int cmserver_stop(pid_t pid);

/* Blocking helpers over the transport API (bounded waits). */
int t_wait(struct cm_transport *t, struct cm_req *r);
int t_send(struct cm_transport *t, int dst, int tag, uint32_t ctx, const void *buf, size_t len,
           int sync);
int t_recv(struct cm_transport *t, int src, int tag, uint32_t ctx, void *buf, size_t cap,
           struct cm_req *status);

/* Deterministic content: byte i of a message with this seed. */
void fill_pattern(void *buf, size_t len, uint32_t seed);
/* Returns the first mismatching offset, or (size_t)-1 when all match. */
size_t check_pattern(const void *buf, size_t len, uint32_t seed);

/* The scenarios (test_transport_scenarios.c). */
int scenario_sizes(struct cm_transport *t, int rank, int size);
int scenario_unexpected(struct cm_transport *t, int rank, int size);
int scenario_wildcards(struct cm_transport *t, int rank, int size);
int scenario_order(struct cm_transport *t, int rank, int size);
int scenario_sync(struct cm_transport *t, int rank, int size);
int scenario_probe(struct cm_transport *t, int rank, int size);
int scenario_truncate(struct cm_transport *t, int rank, int size);
int scenario_self(struct cm_transport *t, int rank, int size);
int scenario_alltoall(struct cm_transport *t, int rank, int size);

#define FAILF(...)                                                                                 \
	do {                                                                                       \
		fprintf(stderr, "rank %d: FAIL %s:%d: ", rank, __FILE__, __LINE__);                \
		fprintf(stderr, __VA_ARGS__);                                                      \
		fprintf(stderr, "\n");                                                             \
		return 1;                                                                          \
	} while (0)

#endif
