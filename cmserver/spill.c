/* The spill store of cmserver (--log-mem, --spill-dir): delivered payloads
 * past the in-memory budget, in an LMDB database keyed by (destination
 * rank, log position), read back when a re-executed rank is replayed. The
 * store lives only as long as the server (the log itself is volatile), so
 * nothing is synced to disk and a directory cmserver made itself is removed
 * at exit.
 *
 * With a log-writer thread (every mode), the engine thread that
 * trims the log only queues the payload buffer (one reference more, no
 * copy); the writer stores queued payloads in batches, one transaction
 * each, and a replay meanwhile reads the buffer from the queue. */
#include "config.h"

#include "spill.h"

#include "core_impl.h"
#include "log.h"

#include <errno.h>
#include <lmdb.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Address space, not disk: LMDB maps the file, which grows as it fills. */
#define SPILL_MAP_SIZE (256ull << 30)

/* A payload (or a deletion) waiting for the log-writer thread. */
struct pending {
	struct pending *next;
	int32_t dst;
	uint64_t seq;
	struct cm_buf *buf; /* NULL: delete the key */
};

struct cm_spill_store {
	MDB_env *env;
	MDB_dbi dbi;
	char *dir;
	bool made_dir; /* a temporary directory of ours: removed at close */
	/* Log-writer thread (async stores only). */
	bool async;
	pthread_t writer;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	struct pending *head, *tail; /* under mu, in queue order */
	bool stop;
};

static void make_key(uint8_t key[12], int32_t dst, uint64_t seq)
{
	uint32_t d = (uint32_t)dst;
	for (int i = 0; i < 4; i++)
		key[i] = (uint8_t)(d >> (24 - 8 * i));
	for (int i = 0; i < 8; i++)
		key[4 + i] = (uint8_t)(seq >> (56 - 8 * i));
}

static int spill_put(void *ctx, int32_t dst, uint64_t seq, const void *data, uint32_t len)
{
	struct cm_spill_store *st = ctx;
	uint8_t k[12];
	make_key(k, dst, seq);
	MDB_val key = {sizeof k, k}, val = {len, (void *)data};
	MDB_txn *txn;
	int rc = mdb_txn_begin(st->env, NULL, 0, &txn);
	if (rc == 0) {
		rc = mdb_put(txn, st->dbi, &key, &val, 0);
		rc = rc == 0 ? mdb_txn_commit(txn) : (mdb_txn_abort(txn), rc);
	}
	if (rc != 0) {
		cm_err("spill store %s: cannot store %u bytes for rank %d: %s", st->dir,
		       (unsigned)len, (int)dst, mdb_strerror(rc));
		return -1;
	}
	return 0;
}

static int spill_get(void *ctx, int32_t dst, uint64_t seq, void *out, uint32_t len)
{
	struct cm_spill_store *st = ctx;
	uint8_t k[12];
	make_key(k, dst, seq);
	MDB_val key = {sizeof k, k}, val;
	MDB_txn *txn;
	int rc = mdb_txn_begin(st->env, NULL, MDB_RDONLY, &txn);
	if (rc == 0) {
		rc = mdb_get(txn, st->dbi, &key, &val);
		if (rc == 0 && val.mv_size != len)
			rc = MDB_CORRUPTED;
		if (rc == 0)
			memcpy(out, val.mv_data, len);
		mdb_txn_abort(txn);
	}
	if (rc != 0) {
		cm_err("spill store %s: cannot read back message %llu of rank %d: %s", st->dir,
		       (unsigned long long)seq, (int)dst, mdb_strerror(rc));
		return -1;
	}
	return 0;
}

static void spill_del(void *ctx, int32_t dst, uint64_t seq)
{
	struct cm_spill_store *st = ctx;
	uint8_t k[12];
	make_key(k, dst, seq);
	MDB_val key = {sizeof k, k};
	MDB_txn *txn;
	if (mdb_txn_begin(st->env, NULL, 0, &txn) != 0)
		return;
	if (mdb_del(txn, st->dbi, &key, NULL) == 0)
		mdb_txn_commit(txn);
	else
		mdb_txn_abort(txn);
}

/* The newest queued entry for the key, under mu. */
static struct pending *pending_find(struct cm_spill_store *st, int32_t dst, uint64_t seq)
{
	struct pending *found = NULL;
	for (struct pending *p = st->head; p; p = p->next)
		if (p->dst == dst && p->seq == seq)
			found = p;
	return found;
}

static void enqueue(struct cm_spill_store *st, struct pending *p)
{
	pthread_mutex_lock(&st->mu);
	p->next = NULL;
	if (st->tail)
		st->tail->next = p;
	else
		st->head = p;
	st->tail = p;
	pthread_cond_signal(&st->cond);
	pthread_mutex_unlock(&st->mu);
}

static int spill_put_buf(void *ctx, int32_t dst, uint64_t seq, struct cm_buf *buf)
{
	struct cm_spill_store *st = ctx;
	struct pending *p = malloc(sizeof *p);
	if (p == NULL)
		return -1;
	cm_buf_ref(buf);
	*p = (struct pending){.dst = dst, .seq = seq, .buf = buf};
	enqueue(st, p);
	return 0;
}

static int spill_get_async(void *ctx, int32_t dst, uint64_t seq, void *out, uint32_t len)
{
	struct cm_spill_store *st = ctx;
	pthread_mutex_lock(&st->mu);
	struct pending *p = pending_find(st, dst, seq);
	bool queued = p && p->buf && p->buf->len == len;
	if (queued)
		memcpy(out, p->buf->data, len);
	pthread_mutex_unlock(&st->mu);
	if (p && !queued)
		return -1; /* deleted, or another length */
	return queued ? 0 : spill_get(ctx, dst, seq, out, len);
}

static void spill_del_async(void *ctx, int32_t dst, uint64_t seq)
{
	struct cm_spill_store *st = ctx;
	struct pending *p = malloc(sizeof *p);
	if (p == NULL)
		return; /* the key stays on disk until the store goes */
	*p = (struct pending){.dst = dst, .seq = seq, .buf = NULL};
	enqueue(st, p);
}

/* Stores every queued payload in one transaction, then drops them from
 * the queue: until then get finds them there. */
static void *writer_main(void *arg)
{
	struct cm_spill_store *st = arg;
	pthread_mutex_lock(&st->mu);
	for (;;) {
		while (st->head == NULL && !st->stop)
			pthread_cond_wait(&st->cond, &st->mu);
		if (st->head == NULL)
			break;
		struct pending *last = st->tail;
		pthread_mutex_unlock(&st->mu);

		MDB_txn *txn = NULL;
		int rc = mdb_txn_begin(st->env, NULL, 0, &txn);
		if (rc != 0)
			txn = NULL;
		for (struct pending *p = st->head; rc == 0; p = p->next) {
			uint8_t k[12];
			make_key(k, p->dst, p->seq);
			MDB_val key = {sizeof k, k};
			if (p->buf) {
				MDB_val val = {p->buf->len, p->buf->data};
				rc = mdb_put(txn, st->dbi, &key, &val, 0);
			} else if (mdb_del(txn, st->dbi, &key, NULL) == MDB_NOTFOUND) {
				rc = 0;
			}
			if (p == last)
				break;
		}
		if (rc == 0)
			rc = mdb_txn_commit(txn);
		else if (txn)
			mdb_txn_abort(txn);
		if (rc != 0)
			cm_err("spill store %s: log writer: %s (those payloads cannot be replayed)",
			       st->dir, mdb_strerror(rc));

		pthread_mutex_lock(&st->mu);
		struct pending *batch = st->head;
		st->head = last->next;
		if (st->head == NULL)
			st->tail = NULL;
		last->next = NULL;
		pthread_mutex_unlock(&st->mu);
		while (batch) {
			struct pending *next = batch->next;
			cm_buf_unref(batch->buf);
			free(batch);
			batch = next;
		}
		pthread_mutex_lock(&st->mu);
	}
	pthread_mutex_unlock(&st->mu);
	return NULL;
}

const struct cm_spill_ops cm_spill_lmdb = {.put = spill_put, .get = spill_get, .del = spill_del};
const struct cm_spill_ops cm_spill_lmdb_async = {
    .put = spill_put, .put_buf = spill_put_buf, .get = spill_get_async, .del = spill_del_async};

struct cm_spill_store *cm_spill_store_open(const char *dir)
{
	struct cm_spill_store *st = calloc(1, sizeof *st);
	if (st == NULL) {
		cm_err("spill store: out of memory");
		return NULL;
	}
	if (dir) {
		if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
			cm_err("spill store: cannot create %s: %s", dir, strerror(errno));
			free(st);
			return NULL;
		}
		st->dir = strdup(dir);
	} else {
		const char *tmp = getenv("TMPDIR");
		if (asprintf(&st->dir, "%s/cmserver-spill-XXXXXX", tmp && *tmp ? tmp : "/tmp") < 0)
			st->dir = NULL;
		else if (mkdtemp(st->dir) == NULL) {
			cm_err("spill store: cannot create a directory in %s: %s",
			       tmp && *tmp ? tmp : "/tmp", strerror(errno));
			free(st->dir);
			free(st);
			return NULL;
		} else
			st->made_dir = true;
	}
	if (st->dir == NULL) {
		cm_err("spill store: out of memory");
		free(st);
		return NULL;
	}
	MDB_txn *txn = NULL;
	int rc = mdb_env_create(&st->env);
	if (rc == 0)
		rc = mdb_env_set_mapsize(st->env, SPILL_MAP_SIZE);
	/* Volatile by design: no syncs; NOTLS because reads and writes come from
	 * whichever engine thread replays or trims. */
	if (rc == 0)
		rc = mdb_env_open(st->env, st->dir, MDB_NOSYNC | MDB_NOMETASYNC | MDB_NOTLS, 0600);
	if (rc == 0)
		rc = mdb_txn_begin(st->env, NULL, 0, &txn);
	if (rc == 0)
		rc = mdb_dbi_open(txn, NULL, 0, &st->dbi);
	if (rc == 0) {
		rc = mdb_txn_commit(txn);
		txn = NULL;
	}
	if (rc != 0) {
		cm_err("spill store %s: %s", st->dir, mdb_strerror(rc));
		if (txn)
			mdb_txn_abort(txn);
		cm_spill_store_close(st);
		return NULL;
	}
	pthread_mutex_init(&st->mu, NULL);
	pthread_cond_init(&st->cond, NULL);
	int err = pthread_create(&st->writer, NULL, writer_main, st);
	if (err) {
		cm_err("spill store: no log-writer thread (%s): writing in place", strerror(err));
		pthread_mutex_destroy(&st->mu);
		pthread_cond_destroy(&st->cond);
	} else {
		st->async = true;
	}
	return st;
}

const struct cm_spill_ops *cm_spill_store_ops(const struct cm_spill_store *st)
{
	return st->async ? &cm_spill_lmdb_async : &cm_spill_lmdb;
}

const char *cm_spill_store_dir(const struct cm_spill_store *st)
{
	return st->dir;
}

void cm_spill_store_close(struct cm_spill_store *st)
{
	if (st == NULL)
		return;
	if (st->async) { /* the writer drains the queue first */
		pthread_mutex_lock(&st->mu);
		st->stop = true;
		pthread_cond_signal(&st->cond);
		pthread_mutex_unlock(&st->mu);
		pthread_join(st->writer, NULL);
		pthread_mutex_destroy(&st->mu);
		pthread_cond_destroy(&st->cond);
	}
	if (st->env)
		mdb_env_close(st->env);
	if (st->made_dir) {
		char path[4096];
		static const char *const files[] = {"data.mdb", "lock.mdb"};
		for (size_t i = 0; i < 2; i++) {
			snprintf(path, sizeof path, "%s/%s", st->dir, files[i]);
			unlink(path);
		}
		rmdir(st->dir);
	}
	free(st->dir);
	free(st);
}
