/* The memory the log's payloads live in (--log-mem): every payload buffer
 * of the CM is charged here, so the bound covers the log, cut-through
 * buffers, output queues and replay reads alike. Large buffers are carved
 * from anonymous mappings (2 MiB-aligned and huge-page backed where the
 * kernel allows) and kept for reuse when freed, so a steady run stops
 * faulting in fresh pages; what is kept for reuse counts against the bound
 * too. Thread-safe: the buffers are freed by whichever thread wrote them
 * last (an engine's writer, the log writer). */
#ifndef CHANMEM_LOGMEM_H
#define CHANMEM_LOGMEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cm_logmem;

struct cm_logmem_stats {
	uint64_t limit;     /* the bound */
	uint64_t live;      /* bytes in buffers in use */
	uint64_t cached;    /* bytes in free buffers kept for reuse */
	uint64_t peak_live; /* highest live seen */
	uint64_t reused;    /* allocations served from the kept buffers */
	uint64_t fresh;     /* allocations that mapped new memory */
	uint64_t held;      /* times a sender was held back (backpressure) */
};

/* limit: the bound in bytes (UINT64_MAX: none). NULL when out of memory. */
struct cm_logmem *cm_logmem_new(uint64_t limit);
/* Every buffer must have been released. */
void cm_logmem_free(struct cm_logmem *m);

/* A block of at least size bytes, charged to m; *got is its real size
 * (hand it back to cm_logmem_release). NULL when out of memory. m NULL:
 * plain malloc, charged nowhere. */
void *cm_logmem_alloc(struct cm_logmem *m, size_t size, size_t *got);
/* The same for a sender's payload (or a journaled one at recovery): taken
 * while it fits under the bound, and whatever its size while less than a
 * quarter of the bound is live (a payload larger than three quarters of
 * the bound is taken then, and may pass the bound by its own size).
 * Decided and charged in one atomic step, so that engine threads taking
 * payloads in at the same instant cannot pass the bound together. NULL
 * with *held set when refused (counted as a hold), NULL with *held clear
 * when out of memory. */
void *cm_logmem_alloc_admitted(struct cm_logmem *m, size_t size, size_t *got, bool *held);
void cm_logmem_release(struct cm_logmem *m, void *p, size_t got);

/* Read-backs: buffers a payload on disk (spill store, journal) is read
 * into to be written to a receiver, charged like any other and counted
 * apart from start (once allocated) to done (once released). */
void cm_logmem_read_back_start(struct cm_logmem *m, size_t got);
void cm_logmem_read_back_done(struct cm_logmem *m, size_t got);
/* May a request whose answer may read a payload back go on now (a receive:
 * what it matches, and so the size, is known only once it is dispatched)?
 * True while at most half the bound is live, or while no read-back is
 * outstanding: a request waits only for read-backs its receivers are
 * being written, never for memory that only the progress of a rank
 * (maybe the one waiting) gives back -- such as the partial payload of a
 * re-executing sender. So a read-back passes the bound only when taken
 * while none other was outstanding, by its own size at most. (Not
 * counted as a hold: those count senders.) */
bool cm_logmem_admit_read_back(struct cm_logmem *m);
/* Live bytes are past this fraction of the bound (in 1/256ths). */
bool cm_logmem_over(const struct cm_logmem *m, unsigned per256);
void cm_logmem_stats(struct cm_logmem *m, struct cm_logmem_stats *out);
/* One info line with the stats (at shutdown). */
void cm_logmem_log_summary(struct cm_logmem *m);

#endif
