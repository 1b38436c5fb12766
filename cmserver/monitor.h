/* What a channel memory tells its dispatcher (cmrun), over a descriptor
 * cmrun hands it (--report-fd): a rank whose connection ended without BYE
 * (cmrun declares it failed), and the counters of cmrun's status line.
 * One line per report, text, so it can be read with a line reader:
 *
 *   lost RANK INCARNATION
 *   stats LOG_BYTES REPLAYED      every CM_MONITOR_STATS_PERIOD_MS, and once
 *                                 more at detach
 *   stopping                      freeing its spill store (see below)
 *   takeover                      a standby (cmserver --standby) whose CM's
 *                                 stream ended: it serves from now on
 *
 * LOG_BYTES: payload bytes appended to the message logs (held, unless
 * --log-mem trimmed delivered entries: the core does not count trimmed
 * bytes); REPLAYED: messages re-delivered to restarted ranks.
 *
 * A channel memory started without --report-fd has no monitor (NULL) and
 * reports nothing. */
#ifndef CHANMEM_MONITOR_H
#define CHANMEM_MONITOR_H

#include <stdint.h>

struct cm_core;
struct cm_monitor;

#define CM_MONITOR_STATS_PERIOD_MS 500

/* NULL when out of memory. fd is written with blocking writes of whole
 * lines; a dispatcher that has gone away (EPIPE) ends reporting, not the
 * server. */
struct cm_monitor *cm_monitor_new(int fd);
void cm_monitor_free(struct cm_monitor *m);

/* The engines call these: attach once the core exists, detach before it is
 * freed (the monitor may read its counters in between). attach starts the
 * stats thread (signals blocked in it), detach stops and joins it, then
 * writes a last stats line. detach without attach is allowed. */
void cm_monitor_attach(struct cm_monitor *m, struct cm_core *core);
void cm_monitor_detach(struct cm_monitor *m);

/* The core's rank_lost hook (ctx is the monitor). Called with GLOBAL held:
 * must not block for long nor call into the core. */
void cm_monitor_rank_lost(void *ctx, int rank, uint32_t incarnation);
/* "stopping": the CM served its last connection and is freeing its spill
 * store, which the kernel does at about 4-5 GB/s (a log of tens of GB
 * takes seconds): the dispatcher should not take it for hung. */
void cm_monitor_stopping(struct cm_monitor *m);

/* "takeover": the standby recovers its copy of the journal and serves. */
void cm_monitor_taking_over(struct cm_monitor *m);

#endif
