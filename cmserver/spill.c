/* The spill store of cmserver (--log-mem, --spill-dir): the payloads the
 * log moves out of memory, in the shape of Kafka's log.
 *
 *  - Payloads are appended to a log file by one log-writer thread, a batch
 *    per pwritev: the disk sees large sequential writes. Payloads of
 *    CM_BUF_ALIGN_MIN bytes and more (their bytes are page-aligned in
 *    memory, outq.c) go to the large-payload file with direct I/O, at
 *    page-aligned offsets: no copy into the page cache, and no writer
 *    throttled by dirty pages (measured here: 1.8-1.9 GB/s sustained,
 *    against 0.47-0.86 GB/s buffered for 4 GB). Smaller ones are packed
 *    into the small-payload file, copied into a page-aligned stage that is
 *    written with direct I/O too (write_staged). Each file is cut into
 *    segments of SEGMENT_SIZE (a payload never straddles two).
 *  - An LMDB index beside them maps (destination rank, log position) to
 *    (file, segment, offset, length); one index transaction per batch.
 *  - A replay reads a payload back by position (one pread).
 *  - A segment whose payloads were all collected (a committed checkpoint
 *    covers them) gives its disk space back (a hole punched over it).
 *
 * The engine thread that spills only queues the payload buffer (a
 * reference, no copy) with the position it reserves in its file; the
 * writer stores queued payloads in order and then releases them, which
 * frees their memory (logmem.c). The queue needs no bound of its own:
 * every payload in it is charged to the log memory, so a writer that falls
 * behind, or a full disk, holds the senders back (cm_session_held) instead
 * of growing the CM.
 *
 * The log of a CM lives as long as the CM: its files are unlinked as soon
 * as they are open (their names are unique: CMs may share a directory),
 * and a directory the store made itself is removed at once. Whatever ends
 * the CM -- exit, SIGKILL, the OOM killer -- the kernel frees the space
 * with the last descriptor; nothing is left on disk. */
#include "config.h"

#include "spill.h"

#include "core_impl.h"
#include "log.h"
#include "net.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <lmdb.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define SEGMENT_SIZE (256ull << 20)
/* Address space, not disk: the index is ~100 bytes a payload. */
#define INDEX_MAP_SIZE (64ull << 30)
#define WRITE_BATCH_MAX (64u << 20) /* bytes per pwritev */
/* The small-payload file's staging buffer: direct-I/O writes of up to this
 * many bytes. */
#define STAGE_SIZE (1u << 20)
#define RETRY_NS (100 * 1000 * 1000)

enum { FILE_SMALL, FILE_LARGE, NFILES };

/* A payload (or a deletion) waiting for the log writer. */
struct pending {
	struct pending *next;
	int32_t dst;
	uint64_t seq;
	struct cm_buf *buf; /* NULL: delete the key */
	uint32_t file, seg;
	uint64_t off;
	uint32_t disk_len; /* bytes it takes in the file (rounded for direct I/O) */
	uint32_t del_len;  /* a deletion that found its payload: its disk length */
};

struct segment {
	uint64_t base, end; /* its range of the file */
	uint64_t live;      /* bytes in it not collected yet */
};

struct spill_file {
	int wfd;     /* the writer's: direct I/O where the filesystem allows */
	int rfd;     /* reads back, through the page cache */
	bool direct; /* wfd is O_DIRECT */
	/* Small payloads under direct I/O (writer thread): copied into stage,
	 * which holds the file from a block boundary on, and written a whole
	 * number of blocks at a time, the last one padded. Its bytes up to
	 * the last payload (tail_len from tail_base, a block boundary) are
	 * kept in tail, so that the next batch writes that block again, whole,
	 * without reading it back. */
	uint8_t *stage;
	uint8_t *tail;
	uint64_t tail_base;
	uint32_t tail_len;
	/* Segments (under mu): payloads are reserved at the end of the last. */
	CM_VEC(struct segment) segs;
};

struct cm_spill_store {
	char *dir;
	MDB_env *env;
	MDB_dbi dbi;
	pthread_t writer;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	struct pending *head, *tail; /* under mu, in queue order */
	bool stop;
	struct spill_file files[NFILES];
	bool punch_said; /* writer thread */
	/* Writer statistics (writer thread, read at close). */
	uint64_t bytes_written, batches;
	double write_seconds;
	bool disk_full_said;
};

struct location {
	uint32_t file, seg, len, disk_len;
	uint64_t off;
};

static void make_key(uint8_t key[12], int32_t dst, uint64_t seq)
{
	uint32_t d = (uint32_t)dst;
	for (int i = 0; i < 4; i++)
		key[i] = (uint8_t)(d >> (24 - 8 * i));
	for (int i = 0; i < 8; i++)
		key[4 + i] = (uint8_t)(seq >> (56 - 8 * i));
}

static double now_seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The writer takes the whole queue each round and looks again before it
 * sleeps: only a queue that was empty needs to wake it (one wake-up per
 * batch, not per payload, when small messages spill fast). */
static void enqueue_locked(struct cm_spill_store *st, struct pending *p)
{
	p->next = NULL;
	if (st->tail) {
		st->tail->next = p;
	} else {
		st->head = p;
		pthread_cond_signal(&st->cond);
	}
	st->tail = p;
}

/* ---- the engine's side: reserve, queue, read back ---- */

static int spill_put_buf(void *ctx, int32_t dst, uint64_t seq, struct cm_buf *buf)
{
	struct cm_spill_store *st = ctx;
	/* A payload within a page of the largest one (4 GiB - 1) would round
	 * past what a length holds: it goes through the page cache instead. */
	uint64_t rounded = ((uint64_t)buf->len + CM_BUF_ALIGN - 1) & ~(uint64_t)(CM_BUF_ALIGN - 1);
	bool direct = buf->aligned && rounded <= UINT32_MAX;
	uint32_t which = direct ? FILE_LARGE : FILE_SMALL;
	uint32_t disk_len = direct ? (uint32_t)rounded : buf->len;
	struct pending *p = malloc(sizeof *p);
	if (p == NULL)
		return -1;
	struct spill_file *f = &st->files[which];
	pthread_mutex_lock(&st->mu);
	struct segment *cur = f->segs.n ? cm_vec_at(&f->segs, f->segs.n - 1) : NULL;
	if (cur == NULL ||
	    (cur->end > cur->base && cur->end - cur->base + disk_len > SEGMENT_SIZE)) {
		uint64_t base = cur ? cur->end : 0;
		if ((cur = cm_vec_push(&f->segs)) == NULL) {
			pthread_mutex_unlock(&st->mu);
			free(p);
			return -1;
		}
		*cur = (struct segment){.base = base, .end = base, .live = 0};
	}
	cm_buf_ref(buf);
	*p = (struct pending){.dst = dst,
	                      .seq = seq,
	                      .buf = buf,
	                      .file = which,
	                      .seg = (uint32_t)(f->segs.n - 1),
	                      .off = cur->end,
	                      .disk_len = disk_len};
	cur->end += disk_len;
	cur->live += disk_len;
	enqueue_locked(st, p);
	pthread_mutex_unlock(&st->mu);
	return 0;
}

static void spill_del(void *ctx, int32_t dst, uint64_t seq)
{
	struct cm_spill_store *st = ctx;
	struct pending *p = malloc(sizeof *p);
	if (p == NULL)
		return; /* the payload stays on disk until the store goes */
	*p = (struct pending){.dst = dst, .seq = seq, .buf = NULL};
	pthread_mutex_lock(&st->mu);
	enqueue_locked(st, p);
	pthread_mutex_unlock(&st->mu);
}

static int index_lookup(struct cm_spill_store *st, MDB_txn *txn, int32_t dst, uint64_t seq,
                        struct location *loc)
{
	uint8_t k[12];
	make_key(k, dst, seq);
	MDB_val key = {sizeof k, k}, val;
	int rc = mdb_get(txn, st->dbi, &key, &val);
	if (rc == 0 && val.mv_size != sizeof *loc)
		rc = MDB_CORRUPTED;
	if (rc == 0)
		memcpy(loc, val.mv_data, sizeof *loc);
	if (rc == 0 && loc->file >= NFILES)
		rc = MDB_CORRUPTED;
	return rc;
}

static int spill_get(void *ctx, int32_t dst, uint64_t seq, void *out, uint32_t len)
{
	struct cm_spill_store *st = ctx;
	/* Still queued: the newest queued operation on the key decides. */
	pthread_mutex_lock(&st->mu);
	struct pending *found = NULL;
	for (struct pending *p = st->head; p; p = p->next)
		if (p->dst == dst && p->seq == seq)
			found = p;
	if (found && found->buf && found->buf->len == len) {
		memcpy(out, found->buf->data, len);
		pthread_mutex_unlock(&st->mu);
		return 0;
	}
	pthread_mutex_unlock(&st->mu);
	if (found) {
		cm_err("spill store %s: message %llu of rank %d was collected", st->dir,
		       (unsigned long long)seq, (int)dst);
		return -1;
	}

	MDB_txn *txn;
	struct location loc;
	int rc = mdb_txn_begin(st->env, NULL, MDB_RDONLY, &txn);
	if (rc == 0) {
		rc = index_lookup(st, txn, dst, seq, &loc);
		mdb_txn_abort(txn);
	}
	if (rc == 0 && loc.len != len)
		rc = MDB_CORRUPTED;
	if (rc != 0) {
		cm_err("spill store %s: cannot find message %llu of rank %d: %s", st->dir,
		       (unsigned long long)seq, (int)dst, mdb_strerror(rc));
		return -1;
	}
	if (cm_pread_full(st->files[loc.file].rfd, out, len, (off_t)loc.off) == 0)
		return 0;
	cm_err("spill store %s: reading back message %llu of rank %d: %s", st->dir,
	       (unsigned long long)seq, (int)dst, errno == EIO ? "short file" : strerror(errno));
	return -1;
}

/* ---- the log writer ---- */

/* pwritev until all of iov[0..n) is written at off. 0, or -1 with errno. */
static int write_all(struct spill_file *f, struct iovec *iov, int n, uint64_t off, size_t bytes)
{
	size_t done = 0;
	while (done < bytes) {
		ssize_t w = pwritev(f->wfd, iov, n, (off_t)(off + done));
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EINVAL && f->direct) {
			/* The filesystem took O_DIRECT at open but refuses it
			 * here: write through the page cache from now on. */
			f->direct = false;
			close(f->wfd);
			f->wfd = f->rfd;
			continue;
		}
		if (w <= 0) {
			if (w == 0)
				errno = ENOSPC;
			return -1;
		}
		done += (size_t)w;
		cm_iov_consume(&iov, &n, (size_t)w);
	}
	return 0;
}

/* Writes stage[0..fill) at base (a block boundary), padded to whole
 * blocks. 0, or -1 with errno. */
static int write_stage(struct cm_spill_store *st, struct spill_file *f, uint64_t base, size_t fill)
{
	size_t whole = (fill + CM_BUF_ALIGN - 1) & ~(size_t)(CM_BUF_ALIGN - 1);
	memset(f->stage + fill, 0, whole - fill);
	struct iovec iov = {.iov_base = f->stage, .iov_len = whole};
	if (write_all(f, &iov, 1, base, whole) < 0)
		return -1;
	st->bytes_written += whole;
	return 0;
}

/* The small payloads of [first, last] under direct I/O, through the stage:
 * a copy costs the CM a fraction of what the page cache's does (measured
 * on the project's machine writing 3 GiB in 16 KiB payloads: 0.4-0.5 s of
 * CPU against 1.9-3.5 s buffered), and the writer is not throttled by
 * dirty pages. Their offsets follow each other (reserved in queue order);
 * a batch starts inside the block the last one ended in, whose head is
 * the kept tail (or, after a failed batch, read back). 0, or -1 with
 * errno; the tail changes only once the whole batch is written. */
static int write_staged(struct cm_spill_store *st, struct spill_file *f, uint32_t which,
                        struct pending *first, struct pending *last)
{
	uint64_t base = 0;
	size_t fill = 0;
	bool started = false;
	for (struct pending *p = first; p; p = p == last ? NULL : p->next) {
		if (p->buf == NULL || p->file != which)
			continue;
		if (!started || p->off != base + fill) {
			if (started && write_stage(st, f, base, fill) < 0)
				return -1;
			started = true;
			base = p->off & ~(uint64_t)(CM_BUF_ALIGN - 1);
			fill = (size_t)(p->off - base);
			if (fill > 0 && f->tail_base == base && f->tail_len >= fill)
				memcpy(f->stage, f->tail, fill);
			else if (fill > 0 && cm_pread_full(f->rfd, f->stage, fill, (off_t)base) < 0)
				return -1;
		}
		const uint8_t *src = p->buf->data;
		size_t left = p->disk_len;
		while (left > 0) {
			if (fill == STAGE_SIZE) {
				if (write_stage(st, f, base, fill) < 0)
					return -1;
				base += fill;
				fill = 0;
			}
			size_t k = STAGE_SIZE - fill < left ? STAGE_SIZE - fill : left;
			memcpy(f->stage + fill, src, k);
			fill += k;
			src += k;
			left -= k;
		}
		if (__atomic_load_n(&st->stop, __ATOMIC_RELAXED))
			return 0; /* closing: the rest of the batch is dropped unwritten */
	}
	if (!started || fill == 0)
		return 0;
	if (write_stage(st, f, base, fill) < 0)
		return -1;
	size_t head = fill & ~(size_t)(CM_BUF_ALIGN - 1);
	f->tail_base = base + head;
	f->tail_len = (uint32_t)(fill - head);
	memcpy(f->tail, f->stage + head, f->tail_len);
	return 0;
}

/* Writes every payload of file `which` queued in [first, last] in queue
 * order -- their offsets follow each other, reserved in that order -- in
 * pwritev calls of up to IOV_MAX pieces and WRITE_BATCH_MAX bytes (small
 * payloads under direct I/O: through the stage). 0, or -1 with errno. */
static int write_file(struct cm_spill_store *st, uint32_t which, struct pending *first,
                      struct pending *last)
{
	struct spill_file *f = &st->files[which];
	if (f->direct && f->stage)
		return write_staged(st, f, which, first, last);
	struct iovec iov[IOV_MAX];
	struct pending *p = first;
	while (p) {
		int n = 0;
		size_t bytes = 0;
		uint64_t off = 0;
		for (; p && n < IOV_MAX && bytes < WRITE_BATCH_MAX;
		     p = p == last ? NULL : p->next) {
			if (p->buf == NULL || p->file != which)
				continue;
			if (n == 0)
				off = p->off;
			iov[n].iov_base = p->buf->data;
			iov[n].iov_len = p->disk_len;
			bytes += p->disk_len;
			n++;
		}
		if (n > 0 && write_all(f, iov, n, off, bytes) < 0)
			return -1;
		st->bytes_written += bytes;
		if (__atomic_load_n(&st->stop, __ATOMIC_RELAXED))
			return 0; /* closing: the rest of the batch is dropped unwritten */
	}
	return 0;
}

/* disk_len bytes of segment i of a file were collected: once nothing in it
 * is live and payloads are reserved past it, its disk space is given back. */
static void segment_release(struct cm_spill_store *st, uint32_t which, uint32_t i,
                            uint32_t disk_len)
{
	struct spill_file *f = &st->files[which];
	uint64_t base = 0, size = 0;
	pthread_mutex_lock(&st->mu);
	f->segs.items[i].live -= disk_len;
	if (f->segs.items[i].live == 0 && i + 1 < f->segs.n) {
		base = f->segs.items[i].base;
		size = f->segs.items[i].end - base;
		f->segs.items[i].end = base; /* done: nothing to give back twice */
	}
	pthread_mutex_unlock(&st->mu);
	if (size > 0 &&
	    fallocate(f->rfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)base,
	              (off_t)size) < 0 &&
	    !st->punch_said) {
		st->punch_said = true;
		cm_info("spill store %s: collected segments keep their disk space until the CM "
		        "exits (%s)",
		        st->dir, strerror(errno));
	}
}

/* The index operations of one batch, in one transaction. */
static int index_batch(struct cm_spill_store *st, struct pending *first, struct pending *last)
{
	MDB_txn *txn;
	int rc = mdb_txn_begin(st->env, NULL, 0, &txn);
	if (rc != 0)
		return rc;
	for (struct pending *p = first; rc == 0; p = p->next) {
		uint8_t k[12];
		make_key(k, p->dst, p->seq);
		MDB_val key = {sizeof k, k};
		if (p->buf) {
			struct location loc = {.file = p->file,
			                       .seg = p->seg,
			                       .len = p->buf->len,
			                       .disk_len = p->disk_len,
			                       .off = p->off};
			MDB_val val = {sizeof loc, &loc};
			rc = mdb_put(txn, st->dbi, &key, &val, 0);
		} else {
			struct location loc;
			rc = index_lookup(st, txn, p->dst, p->seq, &loc);
			if (rc == 0)
				rc = mdb_del(txn, st->dbi, &key, NULL);
			p->del_len = 0;
			if (rc == 0) {
				p->file = loc.file; /* accounted once the batch is in */
				p->seg = loc.seg;
				p->del_len = loc.disk_len;
			} else if (rc == MDB_NOTFOUND) {
				rc = 0;
			}
		}
		if (p == last)
			break;
	}
	if (rc == 0)
		return mdb_txn_commit(txn);
	mdb_txn_abort(txn);
	return rc;
}

/* Waits RETRY_NS unless the store is closing (under mu). */
static void retry_pause(struct cm_spill_store *st)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += RETRY_NS;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	if (!st->stop)
		pthread_cond_timedwait(&st->cond, &st->mu, &ts);
}

/* Stores queued payloads, a batch at a time: the payload bytes first, then
 * their index entries; only then are they dropped from the queue (until
 * then get finds them there). A write that fails (a full disk) is said
 * once and retried: the payloads stay queued, and charged, meanwhile. */
static void *writer_main(void *arg)
{
	struct cm_spill_store *st = arg;
	pthread_mutex_lock(&st->mu);
	for (;;) {
		while (st->head == NULL && !st->stop)
			pthread_cond_wait(&st->cond, &st->mu);
		if (st->stop)
			break; /* the job is over: nothing will read the log again */
		struct pending *first = st->head, *last = st->tail;
		pthread_mutex_unlock(&st->mu);

		double t0 = now_seconds();
		int err = 0, rc = 0;
		for (uint32_t which = 0; which < NFILES && err == 0; which++)
			if (write_file(st, which, first, last) < 0)
				err = errno;
		if (err == 0)
			rc = index_batch(st, first, last);
		st->write_seconds += now_seconds() - t0;

		pthread_mutex_lock(&st->mu);
		if (err != 0 || rc != 0) {
			if (!st->disk_full_said)
				cm_err(
				    "spill store %s: %s; the log is held in memory and senders are "
				    "held back until it can be written",
				    st->dir, err ? strerror(err) : mdb_strerror(rc));
			st->disk_full_said = true;
			retry_pause(st);
			continue;
		}
		if (st->disk_full_said)
			cm_notice("spill store %s: writing again", st->dir);
		st->disk_full_said = false;
		st->batches++;
		st->head = last->next;
		if (st->head == NULL)
			st->tail = NULL;
		last->next = NULL;
		pthread_mutex_unlock(&st->mu);
		while (first) {
			struct pending *next = first->next;
			if (first->buf)
				cm_buf_unref(first->buf); /* its memory can take a new payload */
			else if (first->del_len > 0)
				segment_release(st, first->file, first->seg, first->del_len);
			free(first);
			first = next;
		}
		pthread_mutex_lock(&st->mu);
	}
	pthread_mutex_unlock(&st->mu);
	return NULL;
}

const struct cm_spill_ops cm_spill_segments = {
    .put_buf = spill_put_buf, .get = spill_get, .del = spill_del};

/* ---- opening and closing ---- */

static char *make_dir(const char *dir, bool *made)
{
	*made = false;
	if (dir) {
		if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
			cm_err("spill store: cannot create %s: %s", dir, strerror(errno));
			return NULL;
		}
		struct stat sb;
		if (stat(dir, &sb) < 0 || !S_ISDIR(sb.st_mode) || access(dir, W_OK | X_OK) < 0) {
			cm_err("spill store: %s is not a writable directory", dir);
			return NULL;
		}
		char *copy = strdup(dir);
		if (copy == NULL)
			cm_err("spill store: out of memory");
		return copy;
	}
	const char *tmp = getenv("TMPDIR");
	if (tmp == NULL || *tmp == '\0')
		tmp = "/tmp";
	char *path;
	if (asprintf(&path, "%s/cmserver-spill-XXXXXX", tmp) < 0) {
		cm_err("spill store: out of memory");
		return NULL;
	}
	if (mkdtemp(path) == NULL) {
		cm_err("spill store: cannot create a directory in %s: %s", tmp, strerror(errno));
		free(path);
		return NULL;
	}
	*made = true;
	return path;
}

/* A new file with a unique name in dir, unlinked once open: its buffered
 * descriptor, and with direct set a direct-I/O one where the filesystem
 * allows (else the same); with staged, the stage that small payloads go
 * through under direct I/O. false after saying why. */
static bool open_file(const char *dir, const char *stem, bool direct, bool staged,
                      struct spill_file *f)
{
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/%s-XXXXXX", dir, stem);
	f->rfd = mkostemp(path, O_CLOEXEC);
	if (f->rfd < 0) {
		cm_err("spill store: cannot create a file in %s: %s", dir, strerror(errno));
		return false;
	}
	f->wfd = direct ? open(path, O_WRONLY | O_DIRECT | O_CLOEXEC) : -1;
	f->direct = f->wfd >= 0;
	if (!f->direct)
		f->wfd = f->rfd;
	unlink(path);
	if (f->direct && staged) {
		void *stage = NULL, *tail = NULL;
		/* Pages are touched only as payloads fill them. */
		if (posix_memalign(&stage, CM_BUF_ALIGN, STAGE_SIZE) != 0 ||
		    (tail = malloc(CM_BUF_ALIGN)) == NULL) {
			free(stage);
			close(f->wfd);
			f->wfd = f->rfd;
			f->direct = false;
		} else {
			f->stage = stage;
			f->tail = tail;
		}
	}
	return true;
}

static void close_file(struct spill_file *f)
{
	if (f->wfd >= 0 && f->wfd != f->rfd)
		close(f->wfd);
	if (f->rfd >= 0)
		close(f->rfd);
	free(f->stage);
	free(f->tail);
	cm_vec_free(&f->segs);
}

/* The LMDB index, its files unlinked once open. 0 or an LMDB error (said). */
static int open_index(struct cm_spill_store *st)
{
	char index[PATH_MAX], lock[PATH_MAX + 8];
	snprintf(index, sizeof index, "%s/index-XXXXXX", st->dir);
	int fd = mkostemp(index, O_CLOEXEC);
	if (fd < 0) {
		cm_err("spill store: cannot create an index in %s: %s", st->dir, strerror(errno));
		return EIO;
	}
	close(fd); /* LMDB opens it by name */
	snprintf(lock, sizeof lock, "%s-lock", index);
	MDB_txn *txn = NULL;
	int rc = mdb_env_create(&st->env);
	if (rc == 0)
		rc = mdb_env_set_mapsize(st->env, INDEX_MAP_SIZE);
	/* Volatile by design: no syncs. NOTLS: reads come from whichever
	 * engine thread replays. */
	if (rc == 0)
		rc = mdb_env_open(st->env, index,
		                  MDB_NOSUBDIR | MDB_NOSYNC | MDB_NOMETASYNC | MDB_NOTLS, 0600);
	if (rc == 0)
		rc = mdb_txn_begin(st->env, NULL, 0, &txn);
	if (rc == 0)
		rc = mdb_dbi_open(txn, NULL, 0, &st->dbi);
	if (rc == 0) {
		rc = mdb_txn_commit(txn);
		txn = NULL;
	}
	if (txn)
		mdb_txn_abort(txn);
	unlink(index);
	unlink(lock);
	if (rc != 0)
		cm_err("spill store %s: %s", st->dir, mdb_strerror(rc));
	return rc;
}

struct cm_spill_store *cm_spill_store_open(const char *dir)
{
	struct cm_spill_store *st = calloc(1, sizeof *st);
	if (st == NULL) {
		cm_err("spill store: out of memory");
		return NULL;
	}
	for (int i = 0; i < NFILES; i++)
		st->files[i].rfd = st->files[i].wfd = -1;
	bool made = false;
	st->dir = make_dir(dir, &made);
	bool ok =
	    st->dir != NULL && open_file(st->dir, "small", true, true, &st->files[FILE_SMALL]) &&
	    open_file(st->dir, "large", true, false, &st->files[FILE_LARGE]) && open_index(st) == 0;
	/* Open files survive their names: from here on nothing of the store
	 * is visible on disk, so nothing can be left behind. */
	if (made)
		rmdir(st->dir);
	int err = 0;
	if (ok) {
		pthread_mutex_init(&st->mu, NULL);
		pthread_cond_init(&st->cond, NULL);
		err = pthread_create(&st->writer, NULL, writer_main, st);
		if (err) {
			cm_err("spill store: no log-writer thread: %s", strerror(err));
			pthread_mutex_destroy(&st->mu);
			pthread_cond_destroy(&st->cond);
		}
	}
	if (!ok || err) {
		if (st->env)
			mdb_env_close(st->env);
		for (int i = 0; i < NFILES; i++)
			close_file(&st->files[i]);
		free(st->dir);
		free(st);
		return NULL;
	}
	if (!st->files[FILE_LARGE].direct)
		cm_debug("spill store %s: no direct I/O here; payloads go through the page cache",
		         st->dir);
	return st;
}

const struct cm_spill_ops *cm_spill_store_ops(const struct cm_spill_store *st)
{
	(void)st;
	return &cm_spill_segments;
}

const char *cm_spill_store_dir(const struct cm_spill_store *st)
{
	return st->dir;
}

void cm_spill_store_close(struct cm_spill_store *st)
{
	if (st == NULL)
		return;
	pthread_mutex_lock(&st->mu);
	__atomic_store_n(&st->stop, true, __ATOMIC_RELAXED);
	pthread_cond_signal(&st->cond);
	pthread_mutex_unlock(&st->mu);
	pthread_join(st->writer, NULL);
	if (st->bytes_written > 0)
		cm_info("spill store: %.1f MB written in %llu batches, %.2f s writing (%.2f GB/s)",
		        (double)st->bytes_written / 1e6, (unsigned long long)st->batches,
		        st->write_seconds,
		        st->write_seconds > 0 ? (double)st->bytes_written / st->write_seconds / 1e9
		                              : 0.0);
	/* Queued payloads are dropped unwritten: the job is over. */
	while (st->head) {
		struct pending *next = st->head->next;
		cm_buf_unref(st->head->buf);
		free(st->head);
		st->head = next;
	}
	for (int i = 0; i < NFILES; i++)
		close_file(&st->files[i]);
	pthread_mutex_destroy(&st->mu);
	pthread_cond_destroy(&st->cond);
	mdb_env_close(st->env);
	free(st->dir);
	free(st);
}
