/* Image storage, the reading side: the latest committed image of a rank,
 * decompressed as a stream and checked against its recorded size and
 * checksum (ckpt_store.h). */
#include "config.h"

#include "ckpt_store.h"
#include "ckpt_store_impl.h"

#include "log.h"
#include "protocol.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

struct store_reader {
	int fd;
	ZSTD_DCtx *dctx;
	uint8_t *in;
	size_t in_cap;
	ZSTD_inBuffer input;
	size_t last_ret; /* 0 once a frame is complete */
	int eof;
	struct ckpt_summary info;
	uint64_t got, sum;
};

int store_reader_open(struct ckpt_store *st, const struct ckpt_ref *ref, struct ckpt_summary *info,
                      struct store_reader **out, const char **why)
{
	uint8_t key[KEY_MAX], next[KEY_MAX];
	size_t plen = store_make_key(key, ref->job, ref->rank, 0) - 8;
	/* First key past this rank: the entry before it is the latest. */
	MDB_val k = {store_make_key(next, ref->job, ref->rank + 1, 0), next}, v;
	struct index_val iv;
	MDB_txn *txn;
	MDB_cursor *cur;
	int fd = -1, found = 0;

	pthread_mutex_lock(&st->commit_lock);
	int rc = mdb_txn_begin(st->env, NULL, MDB_RDONLY, &txn);
	if (rc == 0) {
		mdb_cursor_open(txn, st->dbi, &cur);
		rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
		rc = mdb_cursor_get(cur, &k, &v, rc == 0 ? MDB_PREV : MDB_LAST);
		if (rc == 0 && k.mv_size == plen + 8 && memcmp(k.mv_data, key, plen) == 0) {
			char job[CKPT_JOB_MAX + 1];
			uint32_t rank;
			int ok = store_parse_key(&k, job, &rank, &info->number) == 0 &&
			         store_decode_val(&k, &v, &iv) == 0;
			found = ok ? 1 : -1;
		}
		mdb_cursor_close(cur);
		mdb_txn_abort(txn);
	}
	if (found == 1)
		fd = openat(st->dirfd, iv.name, O_RDONLY | O_CLOEXEC);
	pthread_mutex_unlock(&st->commit_lock);
	if (found == 0) {
		*why = "no committed image for this job and rank";
		return CKPT_E_NOTFOUND;
	}
	if (found < 0) {
		cm_err("%s: the index entry of %s rank %u fails its checksum", st->dir, ref->job,
		       (unsigned)ref->rank);
		*why = "the index entry of this image is damaged";
		return CKPT_E_CORRUPT;
	}
	if (fd < 0) {
		cm_err("%s: image %s: %s", st->dir, iv.name, strerror(errno));
		*why = "cannot open the stored image";
		return CKPT_E_STORAGE;
	}
	/* A file of another length was damaged: refused before a byte goes out. */
	struct stat sb;
	if (fstat(fd, &sb) < 0 || (uint64_t)sb.st_size != iv.compressed) {
		cm_err("%s: image %s: not the size the index recorded", st->dir, iv.name);
		close(fd);
		*why = "the stored image fails its size or checksum";
		return CKPT_E_CORRUPT;
	}
	struct store_reader *r = calloc(1, sizeof *r);
	if (r)
		r->in_cap = ZSTD_DStreamInSize();
	if (r == NULL || (r->in = malloc(r->in_cap)) == NULL ||
	    (r->dctx = ZSTD_createDCtx()) == NULL) {
		if (r)
			free(r->in);
		free(r);
		close(fd);
		*why = "out of memory";
		return CKPT_E_STORAGE;
	}
	r->fd = fd;
	r->input.src = r->in;
	r->last_ret = 1;
	info->size = iv.raw;
	info->checksum = iv.checksum;
	r->info = *info;
	r->sum = CKPT_CHECKSUM_INIT;
	*out = r;
	return CKPT_OK;
}

int store_reader_next(struct store_reader *r, void *buf, size_t cap, size_t *got, const char **why)
{
	ZSTD_outBuffer o = {buf, cap, 0};
	while (o.pos < o.size) {
		if (r->input.pos == r->input.size && !r->eof) {
			ssize_t n = read(r->fd, r->in, r->in_cap);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0) {
				*why = "cannot read the stored image";
				return CKPT_E_STORAGE;
			}
			r->input.size = (size_t)n;
			r->input.pos = 0;
			r->eof = n == 0;
		}
		if (r->input.pos == r->input.size && r->eof && r->last_ret == 0)
			break;
		size_t before = o.pos, in_before = r->input.pos;
		size_t ret = ZSTD_decompressStream(r->dctx, &o, &r->input);
		if (ZSTD_isError(ret)) {
			*why = "the stored image does not decompress";
			return CKPT_E_CORRUPT;
		}
		/* A call that moved nothing says nothing about the frame. */
		if (o.pos != before || r->input.pos != in_before)
			r->last_ret = ret;
		else if (r->eof && r->input.pos == r->input.size)
			break; /* truncated file: last_ret != 0 reports it */
	}
	*got = o.pos;
	r->got += o.pos;
	r->sum = ckpt_checksum(r->sum, buf, o.pos);
	if (r->got > r->info.size || (o.pos == 0 && (r->last_ret != 0 || r->got != r->info.size ||
	                                             r->sum != r->info.checksum))) {
		*why = "the stored image fails its size or checksum";
		return CKPT_E_CORRUPT;
	}
	return CKPT_OK;
}

void store_reader_close(struct store_reader *r)
{
	if (r == NULL)
		return;
	close(r->fd);
	ZSTD_freeDCtx(r->dctx);
	free(r->in);
	free(r);
}

int ckpt_store_list(struct ckpt_store *st, void (*fn)(void *arg, const struct ckpt_store_rank *r),
                    void *arg)
{
	MDB_txn *txn;
	MDB_cursor *cur;
	MDB_val k, v;
	char job[CKPT_JOB_MAX + 1] = "";
	struct ckpt_store_rank r = {.job = job};
	int bad = 0;
	int rc = mdb_txn_begin(st->env, NULL, MDB_RDONLY, &txn);
	if (rc != 0) {
		cm_err("%s: index: %s", st->dir, mdb_strerror(rc));
		return -1;
	}
	if ((rc = mdb_cursor_open(txn, st->dbi, &cur)) != 0) {
		mdb_txn_abort(txn);
		cm_err("%s: index: %s", st->dir, mdb_strerror(rc));
		return -1;
	}
	/* Entries sort by job, rank, number: a (job, rank) is a run of
	 * adjacent entries whose last one is its newest image. */
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		struct index_val iv;
		char kjob[CKPT_JOB_MAX + 1];
		uint32_t rank;
		uint64_t number;
		if (store_parse_key(&k, kjob, &rank, &number) < 0 ||
		    store_decode_val(&k, &v, &iv) < 0) {
			cm_err("%s: an index entry fails its checksum", st->dir);
			bad = 1;
			break;
		}
		if (r.images && (rank != r.rank || strcmp(job, kjob) != 0)) {
			fn(arg, &r);
			r.images = 0;
		}
		strcpy(job, kjob);
		r.rank = rank;
		r.number = number;
		r.raw = iv.raw;
		r.compressed = iv.compressed;
		r.time_ns = iv.time_ns;
		r.images++;
	}
	mdb_cursor_close(cur);
	mdb_txn_abort(txn);
	if (!bad && rc != MDB_NOTFOUND)
		cm_err("%s: index: %s", st->dir, mdb_strerror(rc));
	if (bad || rc != MDB_NOTFOUND)
		return -1;
	if (r.images)
		fn(arg, &r);
	return 0;
}
