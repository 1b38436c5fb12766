/* The LMDB spill store behind the core's cm_spill_ops (spill.c). */
#ifndef CHANMEM_SPILL_H
#define CHANMEM_SPILL_H

#include "core.h"

struct cm_spill_store;

/* The ops; their ctx is a store from cm_spill_store_open. */
extern const struct cm_spill_ops cm_spill_lmdb;

/* Opens a store in dir (created by the caller), or in a new temporary
 * directory under $TMPDIR (removed at close) when dir is NULL. NULL after
 * saying why. */
struct cm_spill_store *cm_spill_store_open(const char *dir);
const char *cm_spill_store_dir(const struct cm_spill_store *st);
void cm_spill_store_close(struct cm_spill_store *st);

#endif
