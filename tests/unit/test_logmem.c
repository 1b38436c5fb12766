/* logmem.c, the CM's payload memory under --log-mem: a sender's payload
 * is admitted and charged in one step, so that engine threads taking
 * payloads in at the same instant never pass the bound together; the
 * quarter rule lets a payload larger than the bound in once little is
 * live; a refusal is counted as a hold and charges nothing; blocks come
 * back for reuse. */
#include <config.h>

#include <check.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "logmem.h"

#define KIB 1024u
#define MIB (1024u * 1024u)

START_TEST(admitted_within_bound)
{
	struct cm_logmem *m = cm_logmem_new(1 * MIB);
	ck_assert_ptr_nonnull(m);
	void *held[16];
	size_t got[16];
	unsigned n = 0;
	bool refused = false;
	/* 64 KiB blocks fill the bound exactly; the next one is refused. */
	while (n < 16) {
		bool h;
		held[n] = cm_logmem_alloc_admitted(m, 64 * KIB, &got[n], &h);
		if (held[n] == NULL) {
			ck_assert(h);
			refused = true;
			break;
		}
		ck_assert_uint_eq(got[n], 64 * KIB);
		memset(held[n], 0xa5, got[n]);
		n++;
	}
	ck_assert(refused || n == 16);
	struct cm_logmem_stats st;
	cm_logmem_stats(m, &st);
	ck_assert_uint_eq(st.live, (uint64_t)n * 64 * KIB);
	ck_assert_uint_le(st.peak_live, 1 * MIB);
	bool h;
	size_t g;
	ck_assert_ptr_null(cm_logmem_alloc_admitted(m, 64 * KIB, &g, &h));
	ck_assert(h);
	cm_logmem_stats(m, &st);
	ck_assert_uint_ge(st.held, 1);
	ck_assert_uint_eq(st.live, (uint64_t)n * 64 * KIB); /* a refusal charges nothing */
	/* An unadmitted allocation (a read-back, an output buffer) is not refused. */
	void *extra = cm_logmem_alloc(m, 64 * KIB, &g);
	ck_assert_ptr_nonnull(extra);
	cm_logmem_release(m, extra, g);
	for (unsigned i = 0; i < n; i++)
		cm_logmem_release(m, held[i], got[i]);
	cm_logmem_stats(m, &st);
	ck_assert_uint_eq(st.live, 0);
	/* Released blocks are kept and served again. */
	void *again = cm_logmem_alloc_admitted(m, 64 * KIB, &g, &h);
	ck_assert_ptr_nonnull(again);
	cm_logmem_stats(m, &st);
	ck_assert_uint_ge(st.reused, 1);
	cm_logmem_release(m, again, g);
	cm_logmem_free(m);
}
END_TEST

START_TEST(quarter_rule)
{
	struct cm_logmem *m = cm_logmem_new(1 * MIB);
	bool h;
	size_t g1, g2, g3;
	/* Larger than the bound, taken while nothing is live. */
	void *big = cm_logmem_alloc_admitted(m, 3 * MIB / 2, &g1, &h);
	ck_assert_ptr_nonnull(big);
	/* Nothing more while it is live... */
	ck_assert_ptr_null(cm_logmem_alloc_admitted(m, 100, &g2, &h));
	ck_assert(h);
	cm_logmem_release(m, big, g1);
	/* ...and after it, a small one, then a large one while at most a
	 * quarter is live. */
	void *small = cm_logmem_alloc_admitted(m, 100, &g2, &h);
	ck_assert_ptr_nonnull(small);
	void *big2 = cm_logmem_alloc_admitted(m, 3 * MIB / 2, &g3, &h);
	ck_assert_ptr_nonnull(big2);
	cm_logmem_release(m, big2, g3);
	cm_logmem_release(m, small, g2);
	cm_logmem_free(m);
}
END_TEST

/* Threads that each take payloads in and give them back, as the engines'
 * readers and writers do: the bound holds at every instant, not only for
 * one thread at a time. */
#define RACERS 4
#define ROUNDS 20000
#define RACE_BOUND (512 * KIB)

struct racer {
	struct cm_logmem *m;
	pthread_barrier_t *filled;
	unsigned seed;
	unsigned taken;
};

static void *race(void *arg)
{
	struct racer *r = arg;
	void *keep[4] = {0};
	size_t got[4] = {0};
	/* Every thread first asks for its four largest payloads and waits for
	 * the others to have asked too: 16 x 96 KiB cannot all fit in the
	 * bound, so it is reached however the threads are scheduled. */
	for (unsigned slot = 0; slot < 4; slot++) {
		bool h;
		keep[slot] = cm_logmem_alloc_admitted(r->m, 96 * KIB, &got[slot], &h);
		if (keep[slot])
			r->taken++;
	}
	pthread_barrier_wait(r->filled);
	for (unsigned i = 0; i < ROUNDS; i++) {
		unsigned slot = (unsigned)rand_r(&r->seed) % 4;
		if (keep[slot]) {
			cm_logmem_release(r->m, keep[slot], got[slot]);
			keep[slot] = NULL;
			continue;
		}
		/* 32..96 KiB: past a quarter of the bound, each must fit. */
		size_t size = 32 * KIB * (1 + (unsigned)rand_r(&r->seed) % 3);
		bool h;
		keep[slot] = cm_logmem_alloc_admitted(r->m, size, &got[slot], &h);
		if (keep[slot])
			r->taken++;
	}
	for (unsigned s = 0; s < 4; s++)
		cm_logmem_release(r->m, keep[s], got[s]);
	return NULL;
}

START_TEST(threads_never_pass_bound)
{
	struct cm_logmem *m = cm_logmem_new(RACE_BOUND);
	pthread_t t[RACERS];
	struct racer r[RACERS];
	pthread_barrier_t filled;
	ck_assert_int_eq(pthread_barrier_init(&filled, NULL, RACERS), 0);
	for (unsigned i = 0; i < RACERS; i++) {
		r[i] = (struct racer){.m = m, .filled = &filled, .seed = 17 + i};
		ck_assert_int_eq(pthread_create(&t[i], NULL, race, &r[i]), 0);
	}
	unsigned taken = 0;
	for (unsigned i = 0; i < RACERS; i++) {
		pthread_join(t[i], NULL);
		taken += r[i].taken;
	}
	pthread_barrier_destroy(&filled);
	struct cm_logmem_stats st;
	cm_logmem_stats(m, &st);
	ck_assert_uint_eq(st.live, 0);
	ck_assert_uint_gt(taken, ROUNDS / 2);
	ck_assert_uint_gt(st.held, 0); /* the bound was reached, and held */
	ck_assert_msg(st.peak_live <= RACE_BOUND, "peak %llu bytes > bound %u",
	              (unsigned long long)st.peak_live, RACE_BOUND);
	cm_logmem_free(m);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("logmem");
	TCase *tc = tcase_create("logmem");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, admitted_within_bound);
	tcase_add_test(tc, quarter_rule);
	tcase_add_test(tc, threads_never_pass_bound);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
