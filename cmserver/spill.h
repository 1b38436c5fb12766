/* The LMDB spill store behind the core's cm_spill_ops (spill.c). */
#ifndef CHANMEM_SPILL_H
#define CHANMEM_SPILL_H

#include "core.h"

struct cm_spill_store;

/* Opens a store in dir (created if missing), or in a new temporary
 * directory under $TMPDIR (removed at close) when dir is NULL, with a
 * log-writer thread (payloads queued, stored off the caller's thread; in
 * place if the thread cannot start). NULL after saying why. */
struct cm_spill_store *cm_spill_store_open(const char *dir);
/* The ops to hand the core with this store as their ctx. */
const struct cm_spill_ops *cm_spill_store_ops(const struct cm_spill_store *st);
const char *cm_spill_store_dir(const struct cm_spill_store *st);
void cm_spill_store_close(struct cm_spill_store *st);

#endif
