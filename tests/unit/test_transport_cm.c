/* The cm transport through its API, against the real cmserver ($CMSERVER,
 * started here on 127.0.0.1:0 with --ready-fd): the same exchanges as the
 * direct transport, through one CM and through two. */
#include <config.h>

#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_transport_harness.h"

#define JOB_TIMEOUT_S 90

/* Runs fn over ncms fresh cmservers; each must then stop cleanly. */
static int run_over(int n, int ncms, const char *home, rank_fn fn)
{
	char addrs[4][64];
	pid_t pids[4];
	char cms[300] = "";
	for (int i = 0; i < ncms; i++) {
		pids[i] = cmserver_start(addrs[i], sizeof addrs[i]);
		ck_assert_msg(pids[i] > 0, "cmserver did not start");
		if (i > 0)
			strcat(cms, ",");
		strcat(cms, addrs[i]);
	}
	struct tjob job = {.n = n, .transport = "cm", .cms = cms, .home = home};
	int failures = tjob_run(&job, fn, JOB_TIMEOUT_S);
	for (int i = 0; i < ncms; i++)
		ck_assert_msg(cmserver_stop(pids[i]) == 0, "cmserver %d did not exit cleanly", i);
	return failures;
}

static int run(int n, rank_fn fn)
{
	return run_over(n, 1, NULL, fn);
}

START_TEST(sizes_0_to_8mib)
{
	ck_assert_int_eq(run(2, scenario_sizes), 0);
}
END_TEST

START_TEST(unexpected_messages)
{
	ck_assert_int_eq(run(2, scenario_unexpected), 0);
}
END_TEST

START_TEST(wildcards)
{
	ck_assert_int_eq(run(4, scenario_wildcards), 0);
}
END_TEST

START_TEST(order_10000)
{
	ck_assert_int_eq(run(3, scenario_order), 0);
}
END_TEST

START_TEST(sync_sends)
{
	ck_assert_int_eq(run(2, scenario_sync), 0);
}
END_TEST

START_TEST(probe)
{
	ck_assert_int_eq(run(2, scenario_probe), 0);
}
END_TEST

START_TEST(truncation)
{
	ck_assert_int_eq(run(2, scenario_truncate), 0);
}
END_TEST

START_TEST(self_messages)
{
	ck_assert_int_eq(run(2, scenario_self), 0);
}
END_TEST

START_TEST(alltoall_8)
{
	ck_assert_int_eq(run(8, scenario_alltoall), 0);
}
END_TEST

/* Two CMs, default homes (rank % 2): messages to a rank go through its
 * home, receives to one's own. */
START_TEST(two_cms_order)
{
	ck_assert_int_eq(run_over(3, 2, NULL, scenario_order), 0);
}
END_TEST

START_TEST(two_cms_wildcards_explicit_home)
{
	ck_assert_int_eq(run_over(4, 2, "1,1,0,1", scenario_wildcards), 0);
}
END_TEST

START_TEST(two_cms_alltoall)
{
	ck_assert_int_eq(run_over(8, 2, "0,1,1,0,1,0,0,1", scenario_alltoall), 0);
}
END_TEST

/* Losing the CM is a fatal transport error, reported, not a hang. */
static pid_t victim;
static int scenario_lost_cm(struct cm_transport *t, int rank, int size)
{
	char buf[4];
	struct cm_req r = {.kind = CM_REQ_RECV, .peer = 0, .tag = 1, .rbuf = buf, .rcap = 4};
	if (t->irecv(t, &r) < 0)
		FAILF("irecv");
	kill(victim, SIGKILL);
	for (int i = 0; i < 100; i++)
		if (t->progress(t, 100) < 0)
			return 0;
	FAILF("progress did not report the lost channel memory");
}

START_TEST(lost_cm_is_fatal)
{
	char addr[64];
	victim = cmserver_start(addr, sizeof addr);
	ck_assert_int_gt(victim, 0);
	struct tjob job = {.n = 1, .transport = "cm", .cms = addr};
	/* The rank passes; its finalize fails (no CM to say BYE to). */
	int failures = tjob_run(&job, scenario_lost_cm, JOB_TIMEOUT_S);
	cmserver_stop(victim);
	ck_assert_int_eq(failures, 1);
}
END_TEST

static int scenario_never_runs(struct cm_transport *t, int rank, int size)
{
	FAILF("init succeeded with a wrong secret");
}

/* The CM refuses a wrong secret (ERROR, printed): init fails, no hang. */
START_TEST(wrong_secret_refused)
{
	char addr[64];
	pid_t cm = cmserver_start(addr, sizeof addr);
	ck_assert_int_gt(cm, 0);
	struct tjob job = {
	    .n = 2, .transport = "cm", .cms = addr, .secret = "ffffffffffffffffffffffffffffffff"};
	ck_assert_int_eq(tjob_run(&job, scenario_never_runs, JOB_TIMEOUT_S), 2);
	ck_assert_int_eq(cmserver_stop(cm), 0);
}
END_TEST

static Suite *cm_suite(void)
{
	Suite *s = suite_create("transport_cm");
	TCase *tc = tcase_create("cm");
	tcase_set_timeout(tc, JOB_TIMEOUT_S + 30);
	tcase_add_test(tc, sizes_0_to_8mib);
	tcase_add_test(tc, unexpected_messages);
	tcase_add_test(tc, wildcards);
	tcase_add_test(tc, order_10000);
	tcase_add_test(tc, sync_sends);
	tcase_add_test(tc, probe);
	tcase_add_test(tc, truncation);
	tcase_add_test(tc, self_messages);
	tcase_add_test(tc, alltoall_8);
	tcase_add_test(tc, two_cms_order);
	tcase_add_test(tc, two_cms_wildcards_explicit_home);
	tcase_add_test(tc, two_cms_alltoall);
	tcase_add_test(tc, lost_cm_is_fatal);
	tcase_add_test(tc, wrong_secret_refused);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(cm_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
