/* The journal file (journal.h).
 *
 * Two files. FILE holds records: a 16-byte file header ("chanmemJ", u32 version, u32 the
 * cut-through size the records were written with), then records:
 *
 *   u64 length of what follows | u8 kind | u8 flags | u16 0 | u32 valid |
 *   u64 session id | u64 extent | [32-byte frame header: FRAME, MSG] | data
 *
 * all little-endian. FILE.data holds the extents of large payloads, each
 * a whole number of pages, written straight from the page-aligned log
 * buffers, with direct I/O when a write is large (no copy into the page
 * cache, and no dirty pages for the kernel to throttle a long run on); a
 * record says how much of an extent is valid only after those bytes are
 * written.
 *
 * Small records collect in a buffer that is written before any output
 * leaves the CM (cm_journal_flush); one with more data is written at once,
 * together with what is buffered (one writev). One mutex keeps the file in the order the
 * core handed records over, which is the order it applied them in each of
 * its domains. */
#include "config.h"

#include "journal.h"

#include "core.h"
#include "log.h"
#include "mirror.h"
#include "net.h"
#include "protocol.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define FILE_MAGIC "chanmemJ"
#define FILE_VERSION 1
#define FILE_HEADER 16
#define REC_PREFIX 32
#define PAGE CM_JOURNAL_PAGE
#define BUF_SIZE (256u * 1024)
#define INLINE_MAX (8u * 1024) /* larger data is written straight from the caller */
/* Extent writes this large go around the page cache. A direct write waits
 * for the disk (about 170 us for 64 KiB here), too long for a message a
 * rank waits on; a buffered one is a copy, until a long run's dirty pages
 * make the kernel throttle the writer down to the disk's buffered rate
 * (390 MB/s after 3 GB, against 1.1-1.9 GB/s direct). NPcm through a
 * journaled CM, mono, same run: 64 KiB 5.3-6.9 Gbit/s with this split
 * against 1.5-1.7 all direct; 8 MiB 3.8-8.4 against 1.0-1.5 all buffered. */
#define DIRECT_MIN (256u * 1024)
/* What a standby is sent of the journal per read when it catches up. */
#define CATCH_UP_CHUNK (1u << 20)

struct cm_journal {
	int fd;
	/* FILE.data: with O_DIRECT when the file system takes it, and
	 * buffered for what is not page-aligned. */
	int data_direct, data_buffered;
	uint64_t data_end; /* atomic: where the next extent goes */
	char *path;
	uint32_t cut_through_min;
	pthread_mutex_t mu;
	uint8_t *buf;
	size_t used;
	bool pending; /* atomic: used > 0 */
	struct cm_journal_ops ops;
	/* The standby's copy (cmserver --mirror), or NULL. rec_end (under mu)
	 * is where the next records land: the offset the standby writes at.
	 * catching_up: connected, to be sent what the journal holds once
	 * recovery has cut it (cm_journal_recover), and only then mirrored. */
	struct cm_mirror *mirror;
	struct cm_mirror *catching_up;
	uint64_t rec_end;
};

static void file_header(uint8_t fh[FILE_HEADER], uint32_t cut_through_min)
{
	memcpy(fh, FILE_MAGIC, 8);
	cm_put_u32(fh + 8, FILE_VERSION);
	cm_put_u32(fh + 12, cut_through_min);
}

/* A journal that cannot be written cannot keep the promise the CM makes by
 * answering: the CM stops (the dispatcher restarts it from the file). */
static void write_all(struct cm_journal *j, struct iovec *iov, int n)
{
	if (j->mirror)
		j->rec_end += cm_mirror_send(j->mirror, false, j->rec_end, iov, n);
	while (n > 0) {
		ssize_t w = writev(j->fd, iov, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			cm_err("journal %s: %s: stopping, the log could not be kept", j->path,
			       strerror(errno));
			_exit(1);
		}
		cm_iov_consume(&iov, &n, (size_t)w);
	}
}

static void record(void *ctx, const struct cm_jrec *rec, const void *data, size_t len)
{
	struct cm_journal *j = ctx;
	uint8_t head[REC_PREFIX + CM_HEADER_SIZE];
	size_t hl = REC_PREFIX;
	memset(head, 0, sizeof head);
	head[8] = rec->kind;
	head[9] = rec->flags;
	cm_put_u32(head + 12, rec->valid);
	cm_put_u64(head + 16, rec->session);
	cm_put_u64(head + 24, rec->extent);
	if (rec->kind == CM_J_FRAME || rec->kind == CM_J_MSG) {
		cm_header_encode(&rec->h, head + REC_PREFIX);
		hl += CM_HEADER_SIZE;
	}
	cm_put_u64(head, hl - 8 + len);

	pthread_mutex_lock(&j->mu);
	if (len <= INLINE_MAX && hl + len <= BUF_SIZE - j->used) {
		memcpy(j->buf + j->used, head, hl);
		if (len)
			memcpy(j->buf + j->used + hl, data, len);
		j->used += hl + len;
		__atomic_store_n(&j->pending, true, __ATOMIC_RELEASE);
	} else {
		struct iovec iov[3];
		int n = 0;
		if (j->used)
			iov[n++] = (struct iovec){.iov_base = j->buf, .iov_len = j->used};
		iov[n++] = (struct iovec){.iov_base = head, .iov_len = hl};
		if (len)
			iov[n++] = (struct iovec){.iov_base = (void *)data, .iov_len = len};
		write_all(j, iov, n);
		j->used = 0;
		__atomic_store_n(&j->pending, false, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&j->mu);
}

static uint64_t reserve(void *ctx, uint32_t len)
{
	struct cm_journal *j = ctx;
	uint64_t pages = ((uint64_t)len + PAGE - 1) & ~(uint64_t)(PAGE - 1);
	return __atomic_fetch_add(&j->data_end, pages, __ATOMIC_RELAXED);
}

static void write_extent(void *ctx, uint64_t extent, const uint8_t *base, uint32_t from,
                         uint32_t to)
{
	struct cm_journal *j = ctx;
	/* The log buffer is rounded up to a page: its tail is written too. */
	uint64_t end = ((uint64_t)to + PAGE - 1) & ~(uint64_t)(PAGE - 1);
	const uint8_t *p = base + from;
	uint64_t off = extent + from, left = end - from;
	bool direct = j->data_direct >= 0 && ((uintptr_t)p & (PAGE - 1)) == 0 &&
	              (off & (PAGE - 1)) == 0 && left >= DIRECT_MIN;
	while (left > 0) {
		ssize_t w = pwrite(direct ? j->data_direct : j->data_buffered, p,
		                   left > (1u << 30) ? (1u << 30) : (size_t)left, (off_t)off);
		if (w < 0 && errno == EINVAL && direct) {
			direct = false; /* this file system refuses direct I/O after all */
			continue;
		}
		if (w <= 0) {
			if (w < 0 && errno == EINTR)
				continue;
			cm_err("journal %s.data: %s: stopping, the log could not be kept", j->path,
			       w < 0 ? strerror(errno) : "nothing written");
			_exit(1);
		}
		p += w;
		off += (uint64_t)w;
		left -= (uint64_t)w;
	}
	if (j->mirror) {
		struct iovec iov = {.iov_base = (void *)(base + from), .iov_len = end - from};
		cm_mirror_send(j->mirror, true, extent + from, &iov, 1);
	}
}

static int read_extent(void *ctx, uint64_t extent, void *out, uint32_t len)
{
	struct cm_journal *j = ctx;
	if (cm_pread_full(j->data_buffered, out, len, (off_t)extent) == 0)
		return 0;
	cm_err("journal %s.data: reading back %u bytes at %llu: %s", j->path, (unsigned)len,
	       (unsigned long long)extent, errno == EIO ? "past its end" : strerror(errno));
	return -1;
}

void cm_journal_flush(struct cm_journal *j)
{
	if (__atomic_load_n(&j->pending, __ATOMIC_ACQUIRE)) {
		pthread_mutex_lock(&j->mu);
		if (j->used) {
			struct iovec iov = {.iov_base = j->buf, .iov_len = j->used};
			write_all(j, &iov, 1);
			j->used = 0;
		}
		__atomic_store_n(&j->pending, false, __ATOMIC_RELEASE);
		pthread_mutex_unlock(&j->mu);
	}
	if (j->mirror)
		cm_mirror_wait(j->mirror);
}

int cm_journal_mirror(struct cm_journal *j, const char *standby, const char *secret,
                      uint32_t world_size, char *err, size_t errlen)
{
	j->catching_up = cm_mirror_connect(standby, secret, world_size, err, errlen);
	return j->catching_up ? 0 : -1;
}

/* Sends bytes [from, to) of fd to the standby, a chunk at a time. */
static int copy_range(struct cm_journal *j, struct cm_mirror *m, int fd, bool data, uint8_t *chunk,
                      uint64_t from, uint64_t to)
{
	while (from < to) {
		size_t n = to - from < CATCH_UP_CHUNK ? (size_t)(to - from) : CATCH_UP_CHUNK;
		if (cm_pread_full(fd, chunk, n, (off_t)from) < 0) {
			cm_err("journal %s%s: reading it for the standby: %s", j->path,
			       data ? ".data" : "",
			       errno == EIO ? "shorter than it was" : strerror(errno));
			return -1;
		}
		struct iovec iov = {.iov_base = chunk, .iov_len = n};
		cm_mirror_send(m, data, from, &iov, 1);
		from += n;
	}
	return 0;
}

/* The standby of a CM restarted on its journal gets the whole journal
 * before anything else (its extents skipping the data file's holes), then
 * the mark that its copy is whole, and only then every write. Before the
 * mark it would not take over: a copy without the journal's past would
 * forget what ranks were told was logged. */
static int catch_up(struct cm_journal *j)
{
	struct cm_mirror *m = j->catching_up;
	j->catching_up = NULL;
	long long t0 = cm_now_ms();
	cm_journal_flush(j);
	struct stat st, dst;
	uint8_t *chunk = malloc(CATCH_UP_CHUNK);
	int rc = chunk && fstat(j->fd, &st) == 0 && fstat(j->data_buffered, &dst) == 0 ? 0 : -1;
	if (rc == 0)
		rc = copy_range(j, m, j->fd, false, chunk, 0, (uint64_t)st.st_size);
	for (off_t at = 0; rc == 0 && at < dst.st_size;) {
		off_t start = lseek(j->data_buffered, at, SEEK_DATA);
		if (start < 0 && errno == ENXIO)
			break; /* nothing but a hole past at */
		if (start < 0) {
			rc = -1;
			break;
		}
		off_t end = lseek(j->data_buffered, start, SEEK_HOLE);
		if (end < 0)
			end = dst.st_size;
		rc =
		    copy_range(j, m, j->data_buffered, true, chunk, (uint64_t)start, (uint64_t)end);
		at = end;
	}
	free(chunk);
	if (rc < 0) {
		cm_err("journal %s: could not copy it to the standby", j->path);
		cm_mirror_abandon(m);
		return -1;
	}
	cm_mirror_whole(m);
	pthread_mutex_lock(&j->mu);
	j->rec_end = (uint64_t)st.st_size;
	j->mirror = m;
	pthread_mutex_unlock(&j->mu);
	cm_info("journal %s: copied whole to the standby (%llu bytes of records, %llu of data) "
	        "in %.3f s",
	        j->path, (unsigned long long)st.st_size, (unsigned long long)dst.st_size,
	        (double)(cm_now_ms() - t0) / 1e3);
	return 0;
}

const struct cm_journal_ops *cm_journal_ops(struct cm_journal *j)
{
	return &j->ops;
}

struct cm_journal *cm_journal_open(const char *path, uint32_t cut_through_min, char *err,
                                   size_t errlen)
{
	int fd = open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0) {
		snprintf(err, errlen, "--journal %s: %s", path, strerror(errno));
		return NULL;
	}
	struct stat st;
	uint8_t fh[FILE_HEADER];
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "--journal %s: not a regular file", path);
		close(fd);
		return NULL;
	}
	if (st.st_size == 0) {
		file_header(fh, cut_through_min);
		if (write(fd, fh, sizeof fh) != (ssize_t)sizeof fh) {
			snprintf(err, errlen, "--journal %s: %s", path, strerror(errno));
			close(fd);
			return NULL;
		}
	} else if (st.st_size < FILE_HEADER || cm_pread_full(fd, fh, sizeof fh, 0) < 0 ||
	           memcmp(fh, FILE_MAGIC, 8) != 0 || cm_get_u32(fh + 8) != FILE_VERSION) {
		snprintf(err, errlen, "--journal %s: not a chanmem journal", path);
		close(fd);
		return NULL;
	} else if (cm_get_u32(fh + 12) != cut_through_min) {
		snprintf(err, errlen,
		         "--journal %s: written with --cut-through-min %u, this CM has %u (a "
		         "journal is replayed with the options that wrote it)",
		         path, (unsigned)cm_get_u32(fh + 12), (unsigned)cut_through_min);
		close(fd);
		return NULL;
	}
	char data_path[PATH_MAX];
	if (cm_journal_data_path(path, data_path, sizeof data_path) < 0) {
		snprintf(err, errlen, "--journal %s: name too long", path);
		close(fd);
		return NULL;
	}
	int data_buffered = open(data_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	struct stat dst;
	if (data_buffered < 0 || fstat(data_buffered, &dst) < 0) {
		snprintf(err, errlen, "--journal %s: %s", data_path, strerror(errno));
		if (data_buffered >= 0)
			close(data_buffered);
		close(fd);
		return NULL;
	}
	struct cm_journal *j = calloc(1, sizeof *j);
	if (j == NULL || (j->buf = malloc(BUF_SIZE)) == NULL || (j->path = strdup(path)) == NULL) {
		snprintf(err, errlen, "out of memory");
		if (j)
			free(j->buf);
		free(j);
		close(data_buffered);
		close(fd);
		return NULL;
	}
	j->fd = fd;
	j->data_buffered = data_buffered;
	j->data_direct = open(data_path, O_RDWR | O_DIRECT | O_CLOEXEC);
	j->data_end = ((uint64_t)dst.st_size + PAGE - 1) & ~(uint64_t)(PAGE - 1);
	j->cut_through_min = cut_through_min;
	pthread_mutex_init(&j->mu, NULL);
	j->ops = (struct cm_journal_ops){.record = record,
	                                 .reserve = reserve,
	                                 .write_extent = write_extent,
	                                 .read_extent = read_extent,
	                                 .ctx = j};
	return j;
}

/* Records applied between two drops of the mapping's pages behind them. */
#define RECOVER_DROP_EVERY (1u << 20)

/* A recovery reads each byte of the files once, from mappings whose pages
 * would stay resident -- counted in the CM's RSS, gigabytes past its
 * --log-mem for a long run's journal -- until unmapped: the pages of
 * [from, to) (a read-only private mapping of the file: nothing is lost,
 * the page cache keeps them) go as soon as they are applied. */
static void drop_pages(const uint8_t *map, size_t size, uint64_t from, uint64_t to)
{
	from &= ~(uint64_t)(PAGE - 1);
	if (to > size)
		to = size;
	if (to > from)
		madvise((void *)(map + from), (size_t)(to - from), MADV_DONTNEED);
}

int cm_journal_recover(struct cm_journal *j, struct cm_core *core)
{
	struct stat st;
	if (fstat(j->fd, &st) < 0) {
		cm_err("journal %s: %s", j->path, strerror(errno));
		return -1;
	}
	size_t size = (size_t)st.st_size;
	if (size <= FILE_HEADER)
		return j->catching_up ? catch_up(j) : 0;
	const uint8_t *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, j->fd, 0);
	if (map == MAP_FAILED) {
		cm_err("journal %s: %s", j->path, strerror(errno));
		return -1;
	}
	struct stat dst;
	size_t dsize = fstat(j->data_buffered, &dst) == 0 ? (size_t)dst.st_size : 0;
	const uint8_t *dmap = NULL;
	if (dsize &&
	    (dmap = mmap(NULL, dsize, PROT_READ, MAP_PRIVATE, j->data_buffered, 0)) == MAP_FAILED) {
		cm_err("journal %s.data: %s", j->path, strerror(errno));
		munmap((void *)map, size);
		return -1;
	}
	madvise((void *)map, size, MADV_SEQUENTIAL);
	struct cm_recovery *r = cm_recovery_begin(core);
	if (r == NULL) {
		munmap((void *)map, size);
		cm_err("journal %s: out of memory", j->path);
		return -1;
	}
	const struct cm_limits lim = {.world_size = 0, .max_payload = UINT32_MAX};
	size_t off = FILE_HEADER, dropped = 0;
	int rc = 0;
	while (size - off >= REC_PREFIX) {
		uint64_t len = cm_get_u64(map + off);
		if (len < REC_PREFIX - 8 || len > size - off - 8)
			break; /* the torn last record */
		const uint8_t *p = map + off + REC_PREFIX;
		size_t body = (size_t)len - (REC_PREFIX - 8);
		struct cm_jrec rec = {.kind = map[off + 8],
		                      .flags = map[off + 9],
		                      .valid = cm_get_u32(map + off + 12),
		                      .session = cm_get_u64(map + off + 16),
		                      .extent = cm_get_u64(map + off + 24)};
		const char *why = NULL;
		if (rec.kind == CM_J_FRAME || rec.kind == CM_J_MSG) {
			if (body < CM_HEADER_SIZE ||
			    cm_header_decode(p, CM_HEADER_SIZE, &lim, &rec.h) != CM_OK)
				why = "a record with a bad frame header";
			p += CM_HEADER_SIZE;
			body -= CM_HEADER_SIZE;
		}
		if (why == NULL && rec.flags & CM_J_EXTENT) {
			/* Its valid bytes were written before the record that says
			 * so; an extent with none may lie past the file's end. */
			if (body != 0 || (rec.valid > 0 &&
			                  (rec.extent > dsize || rec.valid > dsize - rec.extent)))
				why = "an extent the data file does not hold";
			p = rec.valid > 0 ? dmap + rec.extent : NULL;
			body = rec.valid;
			if (rec.kind == CM_J_MSG) {
				/* Reserved whole: new extents go past every one. */
				uint64_t end = rec.extent + (((uint64_t)rec.h.len + PAGE - 1) &
				                             ~(uint64_t)(PAGE - 1));
				if (end > j->data_end)
					j->data_end = end;
			}
		}
		if (why == NULL && cm_recovery_apply(r, &rec, p, body, &why) == 0) {
			if (rec.flags & CM_J_EXTENT && rec.valid > 0)
				drop_pages(dmap, dsize, rec.extent, rec.extent + rec.valid);
			off += 8 + (size_t)len;
			if (off - dropped >= RECOVER_DROP_EVERY) {
				drop_pages(map, size, dropped, off & ~(size_t)(PAGE - 1));
				dropped = off & ~(size_t)(PAGE - 1);
			}
			continue;
		}
		cm_err("journal %s: record at byte %zu: %s", j->path, off, why);
		rc = -1;
		break;
	}
	munmap((void *)map, size);
	if (dmap)
		munmap((void *)dmap, dsize);
	if (rc == 0 && off < size) {
		/* Cut before cm_recovery_end appends the closes. */
		cm_info("journal %s: dropping the last %zu bytes (a record the CM was writing when "
		        "it died)",
		        j->path, size - off);
		if (ftruncate(j->fd, (off_t)off) < 0) {
			cm_err("journal %s: %s", j->path, strerror(errno));
			rc = -1;
		}
	}
	uint64_t records, sessions;
	cm_recovery_end(r, &records, &sessions);
	if (rc < 0)
		return -1;
	cm_info("journal %s: recovered %llu records of %llu connections (%zu bytes)", j->path,
	        (unsigned long long)records, (unsigned long long)sessions, off);
	return j->catching_up ? catch_up(j) : 0;
}

void cm_journal_close(struct cm_journal *j)
{
	if (j == NULL)
		return;
	cm_journal_flush(j);
	cm_mirror_end(j->mirror);
	cm_mirror_abandon(j->catching_up);
	close(j->fd);
	close(j->data_buffered);
	if (j->data_direct >= 0)
		close(j->data_direct);
	pthread_mutex_destroy(&j->mu);
	free(j->buf);
	free(j->path);
	free(j);
}

int cm_journal_data_path(const char *path, char *out, size_t len)
{
	return snprintf(out, len, "%s.data", path) < (int)len ? 0 : -1;
}

void cm_journal_remove(const char *path)
{
	char data_path[PATH_MAX];
	unlink(path);
	if (cm_journal_data_path(path, data_path, sizeof data_path) == 0)
		unlink(data_path);
}
