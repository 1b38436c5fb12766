/* spill.c, the store a CM's log spills to: payloads of every size, small
 * ones packed through direct I/O (or the page cache where the filesystem
 * refuses it), come back byte for byte -- while the log writer is still
 * storing them, once stored, across many batches that each begin in the
 * block the last one ended in -- and a deleted one is gone. */
#include <config.h>

#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core_impl.h"
#include "logmem.h"
#include "spill.h"

#define PAYLOADS 3000
#define RANKS 3

static uint32_t size_of(unsigned i)
{
	/* Mostly small and unaligned, now and then one of the large file's. */
	static const uint32_t sizes[] = {1, 7, 100, 511, 4095, 4096, 4097, 9000, 16384, 30000};
	if (i % 97 == 0)
		return 32 * 1024 + 13 * i;
	return sizes[(i * 7 + i / 10) % (sizeof sizes / sizeof sizes[0])];
}

static uint8_t byte_of(unsigned i, uint32_t k)
{
	return (uint8_t)(i * 131u + k * 7u + (k >> 9));
}

static void check_payload(const struct cm_spill_ops *ops, void *ctx, unsigned i, uint8_t *buf)
{
	uint32_t len = size_of(i);
	memset(buf, 0xee, len);
	ck_assert_int_eq(ops->get(ctx, (int32_t)(i % RANKS), i / RANKS, buf, len), 0);
	for (uint32_t k = 0; k < len; k++)
		if (buf[k] != byte_of(i, k))
			ck_abort_msg("payload %u (%u bytes): byte %u is %u, not %u", i, len, k,
			             buf[k], byte_of(i, k));
}

START_TEST(payloads_come_back)
{
	struct cm_logmem *mem = cm_logmem_new(UINT64_MAX);
	struct cm_spill_store *st = cm_spill_store_open(NULL);
	ck_assert_ptr_nonnull(st);
	const struct cm_spill_ops *ops = cm_spill_store_ops(st);
	void *ctx = st;
	uint8_t *buf = malloc(64 * 1024 + 13 * PAYLOADS);
	for (unsigned i = 0; i < PAYLOADS; i++) {
		uint32_t len = size_of(i);
		struct cm_buf *b = cm_buf_new(mem, len);
		ck_assert_ptr_nonnull(b);
		for (uint32_t k = 0; k < len; k++)
			b->data[k] = byte_of(i, k);
		ck_assert_int_eq(ops->put_buf(ctx, (int32_t)(i % RANKS), i / RANKS, b), 0);
		cm_buf_unref(b); /* the store holds its own reference */
		/* Read one back now and then: queued, or written a moment ago. */
		if (i % 11 == 0)
			check_payload(ops, ctx, i / 2, buf);
		/* Small batches: let the writer catch up now and then. */
		if (i % 50 == 0)
			nanosleep(&(struct timespec){.tv_nsec = 200000}, NULL);
	}
	for (unsigned i = 0; i < PAYLOADS; i += 5)
		ops->del(ctx, (int32_t)(i % RANKS), i / RANKS);
	/* Wait until the writer has stored everything and taken the deletions:
	 * every memory buffer comes back. */
	struct cm_logmem_stats ms;
	for (int tries = 0; tries < 1000; tries++) {
		cm_logmem_stats(mem, &ms);
		if (ms.live == 0)
			break;
		nanosleep(&(struct timespec){.tv_nsec = 10000000}, NULL);
	}
	ck_assert_uint_eq(ms.live, 0);
	for (unsigned i = 0; i < PAYLOADS; i++) {
		if (i % 5 == 0) {
			uint32_t len = size_of(i);
			int rc = -1;
			/* A deletion may still be queued behind the last write. */
			for (int tries = 0; tries < 100; tries++) {
				rc = ops->get(ctx, (int32_t)(i % RANKS), i / RANKS, buf, len);
				if (rc != 0)
					break;
				nanosleep(&(struct timespec){.tv_nsec = 10000000}, NULL);
			}
			ck_assert_int_eq(rc, -1);
			continue;
		}
		check_payload(ops, ctx, i, buf);
	}
	free(buf);
	cm_spill_store_close(st);
	cm_logmem_free(mem);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("spill_store");
	TCase *tc = tcase_create("spill_store");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, payloads_come_back);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
