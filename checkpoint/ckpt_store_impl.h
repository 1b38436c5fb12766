/* Internals shared by the image store's writer side (ckpt_store.c: open,
 * uploads, commits, sweeping) and its reader side (ckpt_store_read.c). */
#ifndef CKPT_STORE_IMPL_H
#define CKPT_STORE_IMPL_H

#include <lmdb.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "ckpt_store.h"

#define IMG_PREFIX "img-"
#define NAME_MAX_LEN 160
/* Key: job bytes, NUL, rank (u32 BE), number (u64 BE): sorts by job, rank,
 * then number, so a rank's images are adjacent and oldest first. */
#define KEY_TAIL (1 + 4 + 8)
#define KEY_MAX (CKPT_JOB_MAX + KEY_TAIL)
/* Value: raw size, compressed size, checksum, commit time (ns since the
 * epoch), entry checksum, all u64 LE, then the file name. The entry
 * checksum (FNV-1a over the key, then the value without it) ties a value to
 * its key: a damaged entry is refused instead of naming another image. */
#define VAL_FIXED 40
#define VAL_SUM_OFF 32

struct ckpt_store {
	struct ckpt_store_opts opts;
	char *dir;
	int dirfd, lockfd;
	MDB_env *env;
	MDB_dbi dbi;
	pthread_mutex_t commit_lock;
};

struct index_val {
	uint64_t raw, compressed, checksum, time_ns;
	char name[NAME_MAX_LEN + 1];
};

/* The index key of (job, rank, number); returns its length. */
size_t store_make_key(uint8_t *k, const char *job, uint32_t rank, uint64_t number);
/* The reverse: job (CKPT_JOB_MAX + 1 bytes), rank, number. 0, or -1 for a
 * key of another shape. */
int store_parse_key(const MDB_val *k, char *job, uint32_t *rank, uint64_t *number);
/* Index entries come from disk: the entry checksum must match and the
 * name must be one of ours. 0, or -1. */
int store_decode_val(const MDB_val *k, const MDB_val *v, struct index_val *iv);

#endif
