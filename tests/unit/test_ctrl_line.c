/* cmrun's control-line parser (dispatcher/ctrl_line.c): what ranks send is
 * accepted, and every field out of the job's bounds or spelled another way
 * is refused -- "hello 4294967295 0 0" once became rank -1 through
 * sscanf("%d") and indexed cmrun's rank table before it. */
#include "config.h"

#include "ctrl_line.h"

#include <check.h>
#include <stdlib.h>

static enum ctrl_kind parse(const char *line, struct ctrl_line *l)
{
	return ctrl_line_parse(line, 4, 2, l); /* 4 ranks, 2 replicas */
}

START_TEST(test_accepted)
{
	struct ctrl_line l;
	ck_assert_int_eq(parse("hello 3 4294967295 1", &l), CTRL_HELLO);
	ck_assert_int_eq(l.rank, 3);
	ck_assert_uint_eq(l.incarnation, 4294967295u);
	ck_assert_int_eq(l.replica, 1);
	ck_assert_int_eq(parse("abort 2 -7", &l), CTRL_ABORT);
	ck_assert_int_eq(l.code, -7);
	ck_assert_int_eq(parse("heartbeat 0 1 0", &l), CTRL_HEARTBEAT);
	ck_assert_int_eq(parse("finalized 1 0 1", &l), CTRL_FINALIZED);
	ck_assert_int_eq(parse("init 1 2 0 image", &l), CTRL_INIT);
	ck_assert(l.from_image);
	ck_assert_int_eq(parse("init 1 2 0 start", &l), CTRL_INIT);
	ck_assert(!l.from_image);
	ck_assert_int_eq(parse("restored 1 2 0 3 400 500", &l), CTRL_RESTORED);
	ck_assert_uint_eq(l.out, 400);
	ck_assert_int_eq(parse("crashed 3 1 1 11 123456789012", &l), CTRL_CRASHED);
	ck_assert_int_eq(l.sig, 11);
	ck_assert_uint_eq(l.progress, 123456789012ull);
}
END_TEST

START_TEST(test_refused)
{
	static const char *bad[] = {
	    "hello 4294967295 0 0", /* rank past the job (was rank -1) */
	    "hello -1 0 0",
	    "hello 4 0 0",
	    "hello 0 0 2", /* replica past --replicate */
	    "hello 0 4294967296 0",
	    "hello 0 -1 0",
	    "hello  0 0 0",
	    "hello 0 0 0 ",
	    "hello +0 0 0",
	    "hello 0x1 0 0",
	    "hello 0 0",
	    "hello 0 0 0 0",
	    "hello 00000000000000000000000000000001 0 0",
	    "abort 0 2147483648",
	    "abort 0",
	    "abort 4 1",
	    "init 0 0 0 imag",
	    "crashed 0 0 0 0 1",
	    "crashed 0 0 0 65 1",
	    "restored 0 0 0 -1 0 0",
	    "heartbeat 0 0 0\t",
	    "",
	    " ",
	    "bogus 0 0 0",
	};
	struct ctrl_line l;
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		ck_assert_msg(parse(bad[i], &l) == CTRL_BAD, "'%s' accepted", bad[i]);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ctrl_line");
	TCase *t = tcase_create("parse");
	tcase_add_test(t, test_accepted);
	tcase_add_test(t, test_refused);
	suite_add_tcase(s, t);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
