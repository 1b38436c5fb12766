/* The I/O engines of cmserver. An engine owns sockets, the event loop(s)
 * and threads; the protocol itself lives in the core (core.h). Every engine
 * takes the same options and already listening sockets, serves until
 * SIGTERM or SIGINT, and returns the process exit status. */
#ifndef CHANMEM_ENGINE_H
#define CHANMEM_ENGINE_H

#include "monitor.h"
#include "protocol.h"

#include <stdbool.h>
#include <stdint.h>

struct cm_logmem;
struct cm_journal;

struct cm_server_opts {
	const char *mode;
	uint32_t max_message;     /* largest accepted payload */
	uint64_t log_mem;         /* --log-mem: the bound of mem */
	struct cm_logmem *mem;    /* payload memory (logmem.h) */
	uint32_t cut_through_min; /* forward payloads this large as they arrive; 0: off */
	unsigned threads;         /* multiplexer, specialized: worker loops (1..64) */
	uint32_t world_size;      /* --world-size, 0: the first HELLO's (core.h) */
	char secret[CM_SECRET_LEN];
	struct cm_monitor *monitor; /* reports to the dispatcher (monitor.h), or NULL */
	/* Where delivered payloads go past log_mem (spill.h), or NULL: dropped. */
	const struct cm_spill_ops *spill;
	void *spill_ctx;
	/* --journal (journal.h): recovered from before serving, then appended
	 * to; NULL: none. */
	struct cm_journal *journal;
	/* --mirror: the standby's address, which ranks are told (core.h). */
	const char *standby_addr;
};

/* --threads bounds, and the environment variable that supplies the default
 * (so a launcher that only passes --mode, like cmrun, can set it). */
#define CM_THREADS_MIN 1
#define CM_THREADS_MAX 64
#define CM_THREADS_DEFAULT 2

/* Seconds between tries of a sender held back for log memory
 * (cm_session_held), in every engine. */
#define CM_HOLD_RETRY 0.001
#define CM_ENV_CM_THREADS "CHANMEM_CM_THREADS"

/* The sockets an engine accepts connections on, served alike (the core
 * authenticates every peer by the job secret): the TCP one, and the
 * abstract AF_UNIX one for ranks on this host unless --no-unix. The engine
 * closes them when it returns. */
#define CM_MAX_LISTENERS 2
struct cm_listeners {
	int fds[CM_MAX_LISTENERS];
	unsigned n;
};

typedef int (*cm_engine_fn)(const struct cm_server_opts *opts, const struct cm_listeners *ls);
/* Closes every listening socket of ls; returns status (an engine's way
 * out). */
int cm_listeners_close(const struct cm_listeners *ls, int status);

struct cm_engine {
	const char *name;
	cm_engine_fn run; /* NULL: the mode is planned but not built yet */
};

/* Every mode --mode knows, built or not; ends with a NULL name. */
extern const struct cm_engine cm_engines[];

/* One libev loop, no threads, no locks. */
int cm_engine_mono(const struct cm_server_opts *opts, const struct cm_listeners *ls);
/* An accepting thread plus one thread per connection. */
int cm_engine_thread_per_client(const struct cm_server_opts *opts, const struct cm_listeners *ls);
/* opts->threads event loops, connections spread over them. */
int cm_engine_multiplexer(const struct cm_server_opts *opts, const struct cm_listeners *ls);
/* Acceptor, opts->threads receiving loops, one sending thread. */
int cm_engine_specialized(const struct cm_server_opts *opts, const struct cm_listeners *ls);

#endif
