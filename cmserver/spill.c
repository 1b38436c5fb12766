/* The spill store of cmserver (--log-mem, --spill-dir): delivered payloads
 * past the in-memory budget, in an LMDB database keyed by (destination
 * rank, log position), read back when a re-executed rank is replayed. The
 * store lives only as long as the server (the log itself is volatile), so
 * nothing is synced to disk and a directory cmserver made itself is removed
 * at exit. */
#include "config.h"

#include "spill.h"

#include "log.h"

#include <errno.h>
#include <lmdb.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Address space, not disk: LMDB maps the file, which grows as it fills. */
#define SPILL_MAP_SIZE (256ull << 30)

struct cm_spill_store {
	MDB_env *env;
	MDB_dbi dbi;
	char *dir;
	bool made_dir; /* a temporary directory of ours: removed at close */
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

const struct cm_spill_ops cm_spill_lmdb = {.put = spill_put, .get = spill_get, .del = spill_del};

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
	return st;
}

const char *cm_spill_store_dir(const struct cm_spill_store *st)
{
	return st->dir;
}

void cm_spill_store_close(struct cm_spill_store *st)
{
	if (st == NULL)
		return;
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
