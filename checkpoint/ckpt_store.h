/* Image storage of ckptserver: zstd-compressed files in one directory,
 * indexed in an LMDB environment in the same directory.
 *
 * Commit protocol (why a crash never shows a half image): an upload streams
 * into "tmp-XXXXXX"; at the end its size and checksum are verified, the file
 * is fsynced, renamed to its final "img-..." name, the directory is fsynced,
 * and only then the LMDB transaction that indexes it (and drops the images
 * past --keep) commits. A file is visible to fetches only through the index.
 * At open, temp files and image files the index does not name are deleted.
 *
 * Thread safe: uploads compress in parallel; commits and the lookup+open of
 * a fetch are serialized by one mutex (short, no compression under it). */
#ifndef CHANMEM_CKPT_STORE_H
#define CHANMEM_CKPT_STORE_H

#include "ckpt_proto.h"

#include <stddef.h>
#include <stdint.h>

struct ckpt_store_opts {
	const char *dir;
	unsigned keep;      /* images kept per (job, rank), >= 1 */
	int level;          /* zstd level */
	uint64_t max_image; /* largest raw image accepted */
	int reset_corrupt;  /* a damaged store is moved aside, not refused */
	int must_exist;     /* dir must hold a store already: nothing created */
};

struct ckpt_store;
struct store_upload;
struct store_reader;

/* Creates dir if missing (must_exist: refuses a dir without a store), takes its lock (one server
 * per directory), verifies the index (see ckpt_store.c: a damaged store is refused, or with
 * reset_corrupt moved aside into DIR/corrupt-TIME-PID and replaced by an
 * empty one), sweeps leftovers, drops index entries whose file is gone.
 * Returns NULL after logging why. */
struct ckpt_store *ckpt_store_open(const struct ckpt_store_opts *opts);
/* Waits for a commit in progress, then closes. */
void ckpt_store_close(struct ckpt_store *st);
/* Waits for a commit in progress and blocks further commits and fetches
 * for good: the process exits next, with nothing half committed. */
void ckpt_store_quiesce(struct ckpt_store *st);
/* Number of committed images in the index. */
uint64_t ckpt_store_count(struct ckpt_store *st);

/* One (job, rank) of the index: its newest image and how many it has. */
struct ckpt_store_rank {
	const char *job;
	uint32_t rank;
	uint64_t number, raw, compressed, time_ns;
	unsigned images;
};
/* Calls fn for every (job, rank), ordered by job then rank. 0, or -1 when
 * an index entry is damaged or LMDB fails (logged). */
int ckpt_store_list(struct ckpt_store *st, void (*fn)(void *arg, const struct ckpt_store_rank *r),
                    void *arg);
/* Removes every image of job in one index transaction, then their files.
 * *removed = images removed (0 when the job has none). 0, or -1 (logged). */
int ckpt_store_remove_job(struct ckpt_store *st, const char *job, uint64_t *removed);

/* All return CKPT_OK or an enum ckpt_err code; *why gets a short reason. */
int store_upload_start(struct ckpt_store *st, const struct ckpt_ref *ref, struct store_upload **out,
                       const char **why);
int store_upload_add(struct store_upload *up, const void *data, size_t len, const char **why);
/* Verifies against the client's claim and commits. Frees up in any case. */
int store_upload_commit(struct store_upload *up, const struct ckpt_summary *claim,
                        const char **why);
/* Abandons an upload: the temp file goes, nothing committed is touched. */
void store_upload_discard(struct store_upload *up);

/* Opens the latest image of (job, rank); *info = number, size, checksum. */
int store_reader_open(struct ckpt_store *st, const struct ckpt_ref *ref, struct ckpt_summary *info,
                      struct store_reader **out, const char **why);
/* Next up to cap decompressed bytes; *got = 0 at the end (after the size and
 * checksum were verified: a mismatch returns CKPT_E_CORRUPT). */
int store_reader_next(struct store_reader *r, void *buf, size_t cap, size_t *got, const char **why);
void store_reader_close(struct store_reader *r);

#endif
