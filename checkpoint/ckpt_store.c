/* Image storage: see ckpt_store.h for the commit protocol. */
#include "config.h"

#include "ckpt_store.h"
#include "ckpt_store_impl.h"

#include "log.h"
#include "protocol.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <lmdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#define LOCK_NAME "ckptserver.lock"
#define TMP_PREFIX "tmp-"
#define DATA_NAME "data.mdb"
#define LMDB_LOCK_NAME "lock.mdb"
/* The checksum of data.mdb as of the last index commit. LMDB 0.9 checks
 * only its meta pages: a flipped byte in a tree page makes its cursor
 * functions crash or misread, so the file is verified before LMDB sees it. */
#define SUM_NAME "index.sum"
#define SUM_TMP "index.sum.tmp"
#define SUM_TAG "chanmem-ckpt-index 1"
#define CORRUPT_PREFIX "corrupt-"
/* LMDB maps this much address space (sparse); the index itself is tiny. */
#define MAP_SIZE (1ull << 30)
#define MAX_READERS 1024
struct store_upload {
	struct ckpt_store *st;
	struct ckpt_ref ref;
	char tmp_name[32];
	int fd;
	ZSTD_CCtx *cctx;
	uint8_t *out;
	size_t out_cap;
	uint64_t raw, compressed, sum;
};

static int write_all(int fd, const uint8_t *p, size_t n);

static void put_be(uint8_t *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
}

static uint64_t get_be(const uint8_t *p, int n)
{
	uint64_t v = 0;
	for (int i = 0; i < n; i++)
		v = (v << 8) | p[i];
	return v;
}

size_t store_make_key(uint8_t *k, const char *job, uint32_t rank, uint64_t number)
{
	size_t j = strlen(job);
	memcpy(k, job, j);
	k[j] = 0;
	put_be(k + j + 1, rank, 4);
	put_be(k + j + 5, number, 8);
	return j + KEY_TAIL;
}

int store_parse_key(const MDB_val *k, char *job, uint32_t *rank, uint64_t *number)
{
	const uint8_t *p = k->mv_data;
	if (k->mv_size <= KEY_TAIL || k->mv_size > KEY_MAX || p[k->mv_size - KEY_TAIL] != 0)
		return -1;
	size_t j = k->mv_size - KEY_TAIL;
	memcpy(job, p, j);
	job[j] = '\0';
	*rank = (uint32_t)get_be(p + j + 1, 4);
	*number = get_be(p + j + 5, 8);
	return 0;
}

static uint64_t entry_sum(const uint8_t *k, size_t klen, const uint8_t *v, size_t vlen)
{
	uint64_t h = ckpt_checksum(CKPT_CHECKSUM_INIT, k, klen);
	h = ckpt_checksum(h, v, VAL_SUM_OFF);
	return ckpt_checksum(h, v + VAL_FIXED, vlen - VAL_FIXED);
}

static size_t encode_val(uint8_t *v, const uint8_t *k, size_t klen, const struct index_val *iv)
{
	size_t n = strlen(iv->name);
	cm_put_u64(v, iv->raw);
	cm_put_u64(v + 8, iv->compressed);
	cm_put_u64(v + 16, iv->checksum);
	cm_put_u64(v + 24, iv->time_ns);
	memcpy(v + VAL_FIXED, iv->name, n);
	cm_put_u64(v + VAL_SUM_OFF, entry_sum(k, klen, v, VAL_FIXED + n));
	return VAL_FIXED + n;
}

int store_decode_val(const MDB_val *k, const MDB_val *v, struct index_val *iv)
{
	if (v->mv_size <= VAL_FIXED || v->mv_size > VAL_FIXED + NAME_MAX_LEN ||
	    k->mv_size > KEY_MAX)
		return -1;
	const uint8_t *p = v->mv_data;
	if (cm_get_u64(p + VAL_SUM_OFF) != entry_sum(k->mv_data, k->mv_size, p, v->mv_size))
		return -1;
	iv->raw = cm_get_u64(p);
	iv->compressed = cm_get_u64(p + 8);
	iv->checksum = cm_get_u64(p + 16);
	iv->time_ns = cm_get_u64(p + 24);
	size_t n = v->mv_size - VAL_FIXED;
	memcpy(iv->name, p + VAL_FIXED, n);
	iv->name[n] = '\0';
	if (strlen(iv->name) != n || strchr(iv->name, '/') ||
	    strncmp(iv->name, IMG_PREFIX, strlen(IMG_PREFIX)) != 0)
		return -1;
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* FNV-1a and size of a file of the directory; -1 with errno. */
static int file_sum(int dirfd, const char *name, uint64_t *sum, uint64_t *size)
{
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	uint8_t buf[16384]; /* commits run on 256 KiB session stacks */
	*sum = CKPT_CHECKSUM_INIT;
	*size = 0;
	for (;;) {
		ssize_t n = read(fd, buf, sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;
			close(fd);
			errno = e;
			return -1;
		}
		if (n == 0)
			break;
		*sum = ckpt_checksum(*sum, buf, (size_t)n);
		*size += (uint64_t)n;
	}
	close(fd);
	return 0;
}

/* Records the checksum of data.mdb as LMDB just committed it: written
 * aside, synced, renamed over the old one, so a crash leaves one whole. */
static int write_index_sum(struct ckpt_store *st)
{
	uint64_t sum, size;
	char line[96];
	if (file_sum(st->dirfd, DATA_NAME, &sum, &size) < 0)
		goto fail;
	int n = snprintf(line, sizeof line, SUM_TAG " %llu %016llx\n", (unsigned long long)size,
	                 (unsigned long long)sum);
	int fd = openat(st->dirfd, SUM_TMP, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		goto fail;
	if (write_all(fd, (const uint8_t *)line, (size_t)n) < 0 || fsync(fd) < 0) {
		close(fd);
		goto fail;
	}
	close(fd);
	if (renameat(st->dirfd, SUM_TMP, st->dirfd, SUM_NAME) < 0 || fsync(st->dirfd) < 0)
		goto fail;
	return 0;
fail:
	cm_err("%s: cannot record the index checksum (%s): the next start will refuse the "
	       "store",
	       st->dir, strerror(errno));
	return -1;
}

/* 0: data.mdb matches index.sum (or neither exists: a new store); 1: the
 * store is damaged, *why says how; -1: cannot tell (logged). */
static int check_index_sum(struct ckpt_store *st, const char **why)
{
	struct stat sb;
	int have_data = fstatat(st->dirfd, DATA_NAME, &sb, 0) == 0;
	int fd = openat(st->dirfd, SUM_NAME, O_RDONLY | O_CLOEXEC);
	if (fd < 0 && errno != ENOENT) {
		cm_err("%s/%s: %s", st->dir, SUM_NAME, strerror(errno));
		return -1;
	}
	if (fd < 0) {
		*why = "data.mdb has no checksum file (index.sum)";
		return have_data ? 1 : 0;
	}
	char line[128];
	ssize_t n = read(fd, line, sizeof line - 1);
	close(fd);
	line[n > 0 ? n : 0] = '\0';
	unsigned long long size, sum;
	char end;
	if (sscanf(line, SUM_TAG " %llu %llx%c", &size, &sum, &end) != 3 || end != '\n') {
		*why = "index.sum is unreadable";
		return 1;
	}
	uint64_t got_sum, got_size;
	if (!have_data || file_sum(st->dirfd, DATA_NAME, &got_sum, &got_size) < 0) {
		*why = "data.mdb is missing or unreadable";
		return 1;
	}
	if (got_size != size || got_sum != sum) {
		*why = "data.mdb does not match its checksum (index.sum)";
		return 1;
	}
	return 0;
}

/* LMDB's own findings about its file: damage, not a runtime failure. */
static int lmdb_damage(int rc)
{
	return rc == MDB_CORRUPTED || rc == MDB_PAGE_NOTFOUND || rc == MDB_INVALID ||
	       rc == MDB_VERSION_MISMATCH || rc == MDB_BAD_TXN;
}

/* Drops index entries whose file is gone (a fetch could not serve them and
 * an older image may still be there), then deletes temp files and image
 * files the index does not name. 0, 1 when an entry fails its checksum or
 * LMDB reports damage (*why), -1 on other failures. */
static int sweep(struct ckpt_store *st, const char **why)
{
	MDB_txn *txn;
	MDB_cursor *cur;
	MDB_val k, v;
	char **names = NULL;
	size_t n = 0, cap = 0;
	int rc = mdb_txn_begin(st->env, NULL, 0, &txn);
	if (rc != 0) {
		cm_err("%s: index: %s", st->dir, mdb_strerror(rc));
		return lmdb_damage(rc) ? (*why = "LMDB reports a damaged index", 1) : -1;
	}
	if ((rc = mdb_cursor_open(txn, st->dbi, &cur)) != 0) {
		mdb_txn_abort(txn);
		*why = "LMDB reports a damaged index";
		return lmdb_damage(rc) ? 1 : -1;
	}
	int bad = 0;
	/* After mdb_cursor_del, MDB_NEXT yields the entry that followed. */
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		struct index_val iv;
		struct stat sb;
		if (store_decode_val(&k, &v, &iv) < 0) {
			*why = "an index entry fails its checksum";
			bad = 1;
			break;
		}
		if (fstatat(st->dirfd, iv.name, &sb, 0) < 0) {
			cm_err("%s: index entry without its image file %s dropped", st->dir,
			       iv.name);
			if ((rc = mdb_cursor_del(cur, 0)) != 0)
				break;
			continue;
		}
		if (n + 1 >= cap) {
			cap = cap < 64 ? 64 : cap * 2;
			names = realloc(names, cap * sizeof *names);
			if (names == NULL)
				cm_die(1, "out of memory");
		}
		names[n++] = strdup(iv.name);
	}
	mdb_cursor_close(cur);
	if (!bad && rc != MDB_NOTFOUND) {
		cm_err("%s: index: %s", st->dir, mdb_strerror(rc));
		*why = "LMDB reports a damaged index";
		bad = lmdb_damage(rc) ? 1 : -1;
	}
	if (bad) {
		mdb_txn_abort(txn);
		for (size_t i = 0; i < n; i++)
			free(names[i]);
		free(names);
		return bad;
	}
	if ((rc = mdb_txn_commit(txn)) != 0) {
		cm_err("%s: index: %s", st->dir, mdb_strerror(rc));
		for (size_t i = 0; i < n; i++)
			free(names[i]);
		free(names);
		return -1;
	}
	if (n)
		qsort(names, n, sizeof *names, cmp_str);

	int fd = dup(st->dirfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (d == NULL) {
		cm_err("%s: %s", st->dir, strerror(errno));
		return -1;
	}
	struct dirent *de;
	unsigned removed = 0;
	while ((de = readdir(d)) != NULL) {
		const char *name = de->d_name;
		int temp = strncmp(name, TMP_PREFIX, strlen(TMP_PREFIX)) == 0;
		int img = strncmp(name, IMG_PREFIX, strlen(IMG_PREFIX)) == 0;
		if (img && n && bsearch(&name, names, n, sizeof *names, cmp_str))
			continue;
		if ((temp || img) && unlinkat(st->dirfd, name, 0) == 0)
			removed++;
	}
	closedir(d);
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	if (removed)
		cm_info("%s: removed %u unfinished upload file(s)", st->dir, removed);
	fsync(st->dirfd);
	return write_index_sum(st) < 0 ? -1 : 0;
}

/* Verifies and opens the index, then sweeps: 0, 1 if the store is damaged
 * (*why), -1 on other failures (logged). */
static int open_index(struct ckpt_store *st, const char **why)
{
	int dmg = check_index_sum(st, why);
	if (dmg != 0)
		return dmg;
	int rc = mdb_env_create(&st->env);
	if (rc == 0)
		rc = mdb_env_set_mapsize(st->env, MAP_SIZE);
	if (rc == 0)
		rc = mdb_env_set_maxreaders(st->env, MAX_READERS);
	if (rc == 0)
		rc = mdb_env_open(st->env, st->dir, MDB_NOTLS, 0600);
	MDB_txn *txn = NULL;
	if (rc == 0)
		rc = mdb_txn_begin(st->env, NULL, 0, &txn);
	if (rc == 0)
		rc = mdb_dbi_open(txn, NULL, 0, &st->dbi);
	if (rc == 0)
		rc = mdb_txn_commit(txn);
	else if (txn)
		mdb_txn_abort(txn);
	if (rc != 0) {
		if (lmdb_damage(rc)) {
			*why = mdb_strerror(rc);
			return 1;
		}
		cm_err("--dir %s: cannot open the index: %s", st->dir, mdb_strerror(rc));
		return -1;
	}
	return sweep(st, why);
}

/* Moves the damaged store (index, its checksum, every image) into a new
 * DIR/corrupt-TIME-PID, where it stays for inspection. 0, or -1 (logged). */
static int move_aside(struct ckpt_store *st)
{
	char aside[64];
	snprintf(aside, sizeof aside, CORRUPT_PREFIX "%lld-%ld", (long long)time(NULL),
	         (long)getpid());
	if (mkdirat(st->dirfd, aside, 0700) < 0) {
		cm_err("%s/%s: %s", st->dir, aside, strerror(errno));
		return -1;
	}
	int fd = dup(st->dirfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (d == NULL) {
		cm_err("%s: %s", st->dir, strerror(errno));
		return -1;
	}
	struct dirent *de;
	char dest[64 + NAME_MAX + 2];
	int rc = 0;
	while ((de = readdir(d)) != NULL) {
		const char *name = de->d_name;
		if (strcmp(name, DATA_NAME) != 0 && strcmp(name, LMDB_LOCK_NAME) != 0 &&
		    strcmp(name, SUM_NAME) != 0 && strcmp(name, SUM_TMP) != 0 &&
		    strncmp(name, IMG_PREFIX, strlen(IMG_PREFIX)) != 0 &&
		    strncmp(name, TMP_PREFIX, strlen(TMP_PREFIX)) != 0)
			continue;
		snprintf(dest, sizeof dest, "%s/%s", aside, name);
		if (renameat(st->dirfd, name, st->dirfd, dest) < 0) {
			cm_err("%s/%s: cannot move it aside: %s", st->dir, name, strerror(errno));
			rc = -1;
		}
	}
	closedir(d);
	fsync(st->dirfd);
	if (rc == 0)
		cm_err("%s: the damaged store was moved to %s/%s; starting with an empty store",
		       st->dir, st->dir, aside);
	return rc;
}

struct ckpt_store *ckpt_store_open(const struct ckpt_store_opts *opts)
{
	struct ckpt_store *st = calloc(1, sizeof *st);
	if (st == NULL)
		return NULL;
	st->opts = *opts;
	st->dir = strdup(opts->dir);
	st->lockfd = -1;
	pthread_mutex_init(&st->commit_lock, NULL);
	if (!opts->must_exist && mkdir(opts->dir, 0700) < 0 && errno != EEXIST) {
		cm_err("--dir %s: %s", opts->dir, strerror(errno));
		goto fail;
	}
	st->dirfd = open(opts->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (st->dirfd < 0) {
		cm_err("--dir %s: %s", opts->dir, strerror(errno));
		goto fail;
	}
	struct stat sb;
	if (opts->must_exist && fstatat(st->dirfd, DATA_NAME, &sb, 0) < 0) {
		cm_err("--dir %s: not a checkpoint directory (no %s)", opts->dir, DATA_NAME);
		goto fail;
	}
	st->lockfd = openat(st->dirfd, LOCK_NAME, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (st->lockfd < 0 || flock(st->lockfd, LOCK_EX | LOCK_NB) < 0) {
		cm_err("--dir %s: %s", opts->dir,
		       errno == EWOULDBLOCK ? "another ckptserver uses this directory"
		                            : strerror(errno));
		goto fail;
	}
	const char *why = "";
	int dmg = open_index(st, &why);
	if (dmg == 1 && !opts->reset_corrupt) {
		cm_err("--dir %s: the checkpoint store is damaged (%s); refusing it. "
		       "--reset-corrupt-store moves it aside and starts empty",
		       opts->dir, why);
		goto fail;
	}
	if (dmg == 1) {
		cm_err("--dir %s: the checkpoint store is damaged (%s)", opts->dir, why);
		if (st->env)
			mdb_env_close(st->env);
		st->env = NULL;
		if (move_aside(st) < 0)
			goto fail;
		dmg = open_index(st, &why);
		if (dmg == 1)
			cm_err("--dir %s: the new store is damaged too (%s)", opts->dir, why);
	}
	if (dmg != 0)
		goto fail;
	return st;
fail:
	ckpt_store_close(st);
	return NULL;
}

void ckpt_store_close(struct ckpt_store *st)
{
	if (st == NULL)
		return;
	pthread_mutex_lock(&st->commit_lock);
	if (st->env)
		mdb_env_close(st->env);
	if (st->lockfd >= 0)
		close(st->lockfd);
	if (st->dirfd > 0)
		close(st->dirfd);
	pthread_mutex_unlock(&st->commit_lock);
	free(st->dir);
	free(st);
}

void ckpt_store_quiesce(struct ckpt_store *st)
{
	pthread_mutex_lock(&st->commit_lock);
}

uint64_t ckpt_store_count(struct ckpt_store *st)
{
	MDB_txn *txn;
	MDB_stat ms;
	if (mdb_txn_begin(st->env, NULL, MDB_RDONLY, &txn) != 0)
		return 0;
	int rc = mdb_stat(txn, st->dbi, &ms);
	mdb_txn_abort(txn);
	return rc == 0 ? ms.ms_entries : 0;
}

int store_upload_start(struct ckpt_store *st, const struct ckpt_ref *ref, struct store_upload **out,
                       const char **why)
{
	struct store_upload *up = calloc(1, sizeof *up);
	if (up == NULL) {
		*why = "out of memory";
		return CKPT_E_STORAGE;
	}
	up->st = st;
	up->ref = *ref;
	up->sum = CKPT_CHECKSUM_INIT;
	up->out_cap = ZSTD_CStreamOutSize();
	up->out = malloc(up->out_cap);
	up->cctx = ZSTD_createCCtx();
	strcpy(up->tmp_name, TMP_PREFIX "XXXXXX");
	/* mkstemp wants a path: build it relative to the directory. */
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/%s", st->dir, up->tmp_name);
	up->fd = up->out && up->cctx ? mkostemp(path, O_CLOEXEC) : -1;
	if (up->fd < 0) {
		cm_err("%s: cannot create an upload file: %s", st->dir, strerror(errno));
		free(up->out);
		ZSTD_freeCCtx(up->cctx);
		free(up);
		*why = "cannot create the upload file";
		return CKPT_E_STORAGE;
	}
	memcpy(up->tmp_name, path + strlen(path) - strlen(up->tmp_name), strlen(up->tmp_name));
	ZSTD_CCtx_setParameter(up->cctx, ZSTD_c_compressionLevel, st->opts.level);
	/* zstd's own frame checksum catches on-disk corruption at fetch time. */
	ZSTD_CCtx_setParameter(up->cctx, ZSTD_c_checksumFlag, 1);
	*out = up;
	return CKPT_OK;
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Feeds zstd and writes whatever it produces; mode end flushes the frame. */
static int compress_step(struct store_upload *up, const void *data, size_t len,
                         ZSTD_EndDirective mode, const char **why)
{
	ZSTD_inBuffer in = {data, len, 0};
	for (;;) {
		ZSTD_outBuffer o = {up->out, up->out_cap, 0};
		size_t left = ZSTD_compressStream2(up->cctx, &o, &in, mode);
		if (ZSTD_isError(left)) {
			cm_err("zstd: %s", ZSTD_getErrorName(left));
			*why = "compression failed";
			return CKPT_E_STORAGE;
		}
		if (o.pos && write_all(up->fd, up->out, o.pos) < 0) {
			cm_err("%s/%s: %s", up->st->dir, up->tmp_name, strerror(errno));
			*why = "cannot write the upload file";
			return CKPT_E_STORAGE;
		}
		up->compressed += o.pos;
		int done = mode == ZSTD_e_end ? left == 0 : in.pos == in.size;
		if (done)
			return CKPT_OK;
	}
}

int store_upload_add(struct store_upload *up, const void *data, size_t len, const char **why)
{
	if (len > up->st->opts.max_image - up->raw) {
		*why = "image larger than --max-image";
		return CKPT_E_TOO_BIG;
	}
	up->raw += len;
	up->sum = ckpt_checksum(up->sum, data, len);
	return compress_step(up, data, len, ZSTD_e_continue, why);
}

static void upload_free(struct store_upload *up, int unlink_tmp)
{
	if (up->fd >= 0)
		close(up->fd);
	if (unlink_tmp)
		unlinkat(up->st->dirfd, up->tmp_name, 0);
	ZSTD_freeCCtx(up->cctx);
	free(up->out);
	free(up);
}

void store_upload_discard(struct store_upload *up)
{
	upload_free(up, 1);
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* In the commit transaction: puts the new entry, collects the names of the
 * entry it replaces and of the images past --keep for unlinking after the
 * commit. */
static int index_commit(struct ckpt_store *st, const struct ckpt_ref *ref,
                        const struct index_val *iv, char (*gone)[NAME_MAX_LEN + 1], size_t gone_cap,
                        size_t *ngone)
{
	uint8_t key[KEY_MAX], val[VAL_FIXED + NAME_MAX_LEN];
	MDB_txn *txn;
	MDB_cursor *cur = NULL;
	MDB_val k = {store_make_key(key, ref->job, ref->rank, ref->number), key}, v, old;
	*ngone = 0;
	int rc = mdb_txn_begin(st->env, NULL, 0, &txn);
	if (rc != 0)
		return rc;
	struct index_val prev;
	if (mdb_get(txn, st->dbi, &k, &old) == 0 && store_decode_val(&k, &old, &prev) == 0)
		strcpy(gone[(*ngone)++], prev.name);
	v.mv_data = val;
	v.mv_size = encode_val(val, key, k.mv_size, iv);
	if ((rc = mdb_put(txn, st->dbi, &k, &v, 0)) != 0)
		goto abort;

	/* Count this rank's images, then delete the oldest beyond keep. */
	uint8_t first[KEY_MAX];
	size_t plen = store_make_key(first, ref->job, ref->rank, 0) - 8; /* job NUL rank */
	if ((rc = mdb_cursor_open(txn, st->dbi, &cur)) != 0)
		goto abort;
	MDB_val ck = {plen + 8, first}, cv;
	size_t count = 0;
	for (rc = mdb_cursor_get(cur, &ck, &cv, MDB_SET_RANGE);
	     rc == 0 && ck.mv_size == plen + 8 && memcmp(ck.mv_data, first, plen) == 0;
	     rc = mdb_cursor_get(cur, &ck, &cv, MDB_NEXT))
		count++;
	ck.mv_size = plen + 8;
	ck.mv_data = first;
	size_t excess = count > st->opts.keep ? count - st->opts.keep : 0;
	/* Oldest first; after mdb_cursor_del, MDB_NEXT yields the next one. */
	for (rc = mdb_cursor_get(cur, &ck, &cv, MDB_SET_RANGE); rc == 0 && excess > 0;
	     rc = mdb_cursor_get(cur, &ck, &cv, MDB_NEXT)) {
		if (ck.mv_size != plen + 8 || memcmp(ck.mv_data, first, plen) != 0)
			break;
		if (store_decode_val(&ck, &cv, &prev) == 0 && *ngone < gone_cap)
			strcpy(gone[(*ngone)++], prev.name);
		if ((rc = mdb_cursor_del(cur, 0)) != 0)
			goto abort;
		excess--;
	}
	if (rc != 0 && rc != MDB_NOTFOUND)
		goto abort;
	mdb_cursor_close(cur);
	if ((rc = mdb_txn_commit(txn)) == 0)
		/* A failure is logged; the commit stands, the next start refuses. */
		write_index_sum(st);
	return rc;
abort:
	if (cur)
		mdb_cursor_close(cur);
	mdb_txn_abort(txn);
	return rc;
}

int store_upload_commit(struct store_upload *up, const struct ckpt_summary *claim, const char **why)
{
	struct ckpt_store *st = up->st;
	int rc = compress_step(up, NULL, 0, ZSTD_e_end, why);
	if (rc != CKPT_OK)
		goto discard;
	if (claim->size != up->raw || claim->checksum != up->sum) {
		*why = claim->size != up->raw ? "size differs from the bytes received"
		                              : "checksum differs from the bytes received";
		rc = CKPT_E_CHECKSUM;
		goto discard;
	}
	if (fsync(up->fd) < 0) {
		cm_err("%s/%s: fsync: %s", st->dir, up->tmp_name, strerror(errno));
		*why = "cannot sync the image";
		rc = CKPT_E_STORAGE;
		goto discard;
	}
	struct index_val iv = {.raw = up->raw, .compressed = up->compressed, .checksum = up->sum};
	snprintf(iv.name, sizeof iv.name, IMG_PREFIX "%s-%u-%llu-%s.zst", up->ref.job,
	         (unsigned)up->ref.rank, (unsigned long long)up->ref.number,
	         up->tmp_name + strlen(TMP_PREFIX));

	/* Normally the replaced entry and one pruned image per commit; more
	 * only if --keep was lowered since the last run (the rest become
	 * orphans the next start sweeps). */
	size_t gone_cap = st->opts.keep + 64, ngone = 0;
	char(*gone)[NAME_MAX_LEN + 1] = calloc(gone_cap, sizeof *gone);
	if (gone == NULL) {
		*why = "out of memory";
		rc = CKPT_E_STORAGE;
		goto discard;
	}
	pthread_mutex_lock(&st->commit_lock);
	if (renameat(st->dirfd, up->tmp_name, st->dirfd, iv.name) < 0 || fsync(st->dirfd) < 0) {
		cm_err("%s/%s: cannot commit: %s", st->dir, iv.name, strerror(errno));
		pthread_mutex_unlock(&st->commit_lock);
		free(gone);
		unlinkat(st->dirfd, iv.name, 0);
		*why = "cannot commit the image file";
		rc = CKPT_E_STORAGE;
		goto discard;
	}
	iv.time_ns = now_ns();
	int mrc = index_commit(st, &up->ref, &iv, gone, gone_cap, &ngone);
	if (mrc != 0) {
		cm_err("%s: index commit: %s", st->dir, mdb_strerror(mrc));
		unlinkat(st->dirfd, iv.name, 0);
		pthread_mutex_unlock(&st->commit_lock);
		free(gone);
		*why = "cannot update the index";
		upload_free(up, 0);
		return CKPT_E_STORAGE;
	}
	/* After the commit: a crash before these unlinks leaves orphans the
	 * next start sweeps. The new image itself may be among them if it is
	 * older than the `keep` newest. */
	for (size_t i = 0; i < ngone; i++)
		unlinkat(st->dirfd, gone[i], 0);
	pthread_mutex_unlock(&st->commit_lock);
	cm_debug("committed %s rank %u number %llu: %llu -> %llu bytes", up->ref.job,
	         (unsigned)up->ref.rank, (unsigned long long)up->ref.number,
	         (unsigned long long)up->raw, (unsigned long long)up->compressed);
	free(gone);
	upload_free(up, 0);
	return CKPT_OK;
discard:
	upload_free(up, 1);
	return rc;
}

int ckpt_store_remove_job(struct ckpt_store *st, const char *job, uint64_t *removed)
{
	uint8_t first[KEY_MAX];
	char kjob[CKPT_JOB_MAX + 1];
	uint32_t rank;
	uint64_t number;
	MDB_val k = {store_make_key(first, job, 0, 0), first}, v;
	MDB_txn *txn = NULL;
	MDB_cursor *cur = NULL;
	char(*names)[NAME_MAX_LEN + 1] = NULL;
	size_t n = 0, cap = 0;
	*removed = 0;
	pthread_mutex_lock(&st->commit_lock);
	int rc = mdb_txn_begin(st->env, NULL, 0, &txn);
	if (rc == 0 && (rc = mdb_cursor_open(txn, st->dbi, &cur)) == 0) {
		/* After mdb_cursor_del, MDB_NEXT yields the entry that followed. */
		for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
		     rc == 0 && store_parse_key(&k, kjob, &rank, &number) == 0 &&
		     strcmp(kjob, job) == 0;
		     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
			if (n == cap) {
				cap = cap ? cap * 2 : 64;
				void *more = realloc(names, cap * sizeof *names);
				if (more == NULL)
					cm_die(1, "out of memory");
				names = more;
			}
			struct index_val iv;
			if (store_decode_val(&k, &v, &iv) == 0)
				strcpy(names[n++], iv.name);
			if ((rc = mdb_cursor_del(cur, 0)) != 0)
				break;
		}
	}
	if (cur)
		mdb_cursor_close(cur);
	if (rc == MDB_NOTFOUND || rc == 0)
		rc = mdb_txn_commit(txn);
	else if (txn)
		mdb_txn_abort(txn);
	if (rc != 0) {
		cm_err("%s: index: %s", st->dir, mdb_strerror(rc));
		pthread_mutex_unlock(&st->commit_lock);
		free(names);
		return -1;
	}
	/* The index no longer names them: a crash before these unlinks leaves
	 * orphans the next start sweeps. */
	for (size_t i = 0; i < n; i++)
		unlinkat(st->dirfd, names[i], 0);
	fsync(st->dirfd);
	rc = write_index_sum(st);
	pthread_mutex_unlock(&st->commit_lock);
	free(names);
	*removed = n;
	return rc;
}
