/* Unit tests of common/'s containers: the growable array keeps its
 * elements across growth, refuses sizes that overflow and stays intact
 * when it does; the intrusive list keeps order through pushes, removals
 * in any position and removal while iterating. And the I/O helpers that
 * go with them: consuming written iovecs, reading a file by position. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "list.h"
#include "net.h"
#include "vec.h"

struct pt {
	int x, y;
};

START_TEST(vec_push_keeps_elements_across_growth)
{
	CM_VEC(struct pt) v = {0};
	for (int i = 0; i < 1000; i++) {
		struct pt *p = cm_vec_push(&v);
		ck_assert_ptr_nonnull(p);
		*p = (struct pt){i, -i};
	}
	ck_assert_uint_eq(v.n, 1000);
	ck_assert_uint_ge(v.cap, 1000);
	for (int i = 0; i < 1000; i++) {
		ck_assert_int_eq(cm_vec_at(&v, i)->x, i);
		ck_assert_int_eq(v.items[i].y, -i);
	}
	cm_vec_free(&v);
	ck_assert_ptr_null(v.items);
	ck_assert_uint_eq(v.n, 0);
	ck_assert_uint_eq(v.cap, 0);
}
END_TEST

START_TEST(vec_reserve_grows_once_and_zeroes_when_asked)
{
	CM_VEC(int) v = {0};
	ck_assert(cm_vec_reserve(&v, 3));
	ck_assert_uint_eq(v.cap, CM_VEC_MIN);
	int *before = v.items;
	ck_assert(cm_vec_reserve(&v, CM_VEC_MIN)); /* enough room: no move */
	ck_assert_ptr_eq(v.items, before);
	ck_assert(cm_vec_reserve_zeroed(&v, 100));
	ck_assert_uint_eq(v.cap, 128);
	for (size_t i = CM_VEC_MIN; i < v.cap; i++)
		ck_assert_int_eq(v.items[i], 0);
	ck_assert_uint_eq(v.n, 0); /* reserving adds room, not elements */
	cm_vec_free(&v);
}
END_TEST

START_TEST(vec_overflow_refused_and_array_intact)
{
	CM_VEC(struct pt) v = {0};
	for (int i = 0; i < 5; i++)
		*cm_vec_push(&v) = (struct pt){i, i};
	struct pt *items = v.items;
	size_t cap = v.cap;
	/* Byte count past SIZE_MAX, and element count past SIZE_MAX / 2. */
	ck_assert(!cm_vec_reserve(&v, SIZE_MAX / sizeof(struct pt) + 1));
	ck_assert(!cm_vec_reserve(&v, SIZE_MAX));
	ck_assert_ptr_eq(v.items, items);
	ck_assert_uint_eq(v.cap, cap);
	ck_assert_uint_eq(v.n, 5);
	ck_assert_int_eq(v.items[4].x, 4);
	cm_vec_free(&v);
}
END_TEST

START_TEST(vec_drop_front_keeps_order)
{
	CM_VEC(unsigned) v = {0};
	for (unsigned i = 0; i < 40; i++)
		*cm_vec_push(&v) = i;
	cm_vec_drop_front(&v, 25);
	ck_assert_uint_eq(v.n, 15);
	for (unsigned i = 0; i < 15; i++)
		ck_assert_uint_eq(v.items[i], 25 + i);
	cm_vec_drop_front(&v, 15);
	ck_assert_uint_eq(v.n, 0);
	cm_vec_free(&v);
}
END_TEST

struct item {
	int v;
	struct cm_list a, b; /* on two lists at once */
};

static void expect(struct cm_list *head, const int *want, int n, int on_b)
{
	struct item *it;
	int i = 0;
	if (on_b)
		cm_list_for_each(it, head, struct item, b)
		{
			ck_assert_int_lt(i, n);
			ck_assert_int_eq(it->v, want[i++]);
		}
	else
		cm_list_for_each(it, head, struct item, a)
		{
			ck_assert_int_lt(i, n);
			ck_assert_int_eq(it->v, want[i++]);
		}
	ck_assert_int_eq(i, n);
	ck_assert(cm_list_empty(head) == (n == 0));
}

START_TEST(list_order_push_and_remove)
{
	struct cm_list la, lb;
	cm_list_init(&la);
	cm_list_init(&lb);
	ck_assert(cm_list_empty(&la));
	ck_assert_ptr_null(cm_list_first(&la));
	ck_assert_ptr_null(cm_list_entry(cm_list_first(&la), struct item, a));
	struct item it[5];
	for (int i = 0; i < 5; i++) {
		it[i].v = i;
		cm_list_push_back(&la, &it[i].a);
		cm_list_push_front(&lb, &it[i].b);
	}
	expect(&la, (int[]){0, 1, 2, 3, 4}, 5, 0);
	expect(&lb, (int[]){4, 3, 2, 1, 0}, 5, 1);
	ck_assert_ptr_eq(cm_list_entry(cm_list_first(&la), struct item, a), &it[0]);
	ck_assert_ptr_eq(cm_list_entry(cm_list_last(&la), struct item, a), &it[4]);
	cm_list_remove(&it[0].a); /* first */
	cm_list_remove(&it[2].a); /* middle */
	cm_list_remove(&it[4].a); /* last */
	cm_list_remove(&it[4].a); /* again: harmless */
	expect(&la, (int[]){1, 3}, 2, 0);
	expect(&lb, (int[]){4, 3, 2, 1, 0}, 5, 1); /* the other list untouched */
	cm_list_remove(&it[1].a);
	cm_list_remove(&it[3].a);
	expect(&la, NULL, 0, 0);
	cm_list_push_back(&la, &it[2].a); /* a removed node is reusable */
	expect(&la, (int[]){2}, 1, 0);
}
END_TEST

START_TEST(list_remove_while_iterating)
{
	struct cm_list l;
	cm_list_init(&l);
	struct item it[6];
	for (int i = 0; i < 6; i++) {
		it[i].v = i;
		cm_list_push_back(&l, &it[i].a);
	}
	struct item *p;
	int seen = 0;
	cm_list_for_each(p, &l, struct item, a)
	{
		seen++;
		if (p->v % 2 == 0)
			cm_list_remove(&p->a);
	}
	ck_assert_int_eq(seen, 6);
	expect(&l, (int[]){1, 3, 5}, 3, 0);
	/* Nested loops over the same list. */
	int pairs = 0;
	struct item *q;
	cm_list_for_each(p, &l, struct item, a)
	{
		cm_list_for_each(q, &l, struct item, a)
		{
			pairs += p->v * 10 + q->v > 0;
		}
	}
	ck_assert_int_eq(pairs, 9);
	/* Back to front, removing as it goes. */
	int want = 5;
	cm_list_for_each_reverse(p, &l, struct item, a)
	{
		ck_assert_int_eq(p->v, want);
		want -= 2;
		cm_list_remove(&p->a);
	}
	ck_assert_int_eq(want, -1);
	ck_assert(cm_list_empty(&l));
}
END_TEST

START_TEST(iov_consume_drops_written_and_trims_partial)
{
	char a[4], b[6], c[3];
	struct iovec v[3] = {{a, sizeof a}, {b, sizeof b}, {c, sizeof c}};
	struct iovec *iov = v;
	int n = 3;
	cm_iov_consume(&iov, &n, 0);
	ck_assert_ptr_eq(iov, v);
	ck_assert_int_eq(n, 3);
	cm_iov_consume(&iov, &n, 6); /* all of a, 2 bytes of b */
	ck_assert_ptr_eq(iov, &v[1]);
	ck_assert_int_eq(n, 2);
	ck_assert_ptr_eq(iov->iov_base, b + 2);
	ck_assert_uint_eq(iov->iov_len, 4);
	cm_iov_consume(&iov, &n, 4); /* exactly the rest of b */
	ck_assert_ptr_eq(iov, &v[2]);
	ck_assert_int_eq(n, 1);
	ck_assert_uint_eq(iov->iov_len, 3);
	cm_iov_consume(&iov, &n, 3);
	ck_assert_int_eq(n, 0);
}
END_TEST

START_TEST(pread_full_reads_by_position_and_names_a_short_file)
{
	char path[] = "/tmp/cmpreadXXXXXX";
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	unlink(path);
	const char text[] = "0123456789abcdef";
	ck_assert_int_eq(write(fd, text, 16), 16);
	char got[8];
	ck_assert_int_eq(cm_pread_full(fd, got, 8, 5), 0);
	ck_assert(memcmp(got, text + 5, 8) == 0);
	errno = 0;
	ck_assert_int_eq(cm_pread_full(fd, got, 8, 12), -1); /* 4 bytes left */
	ck_assert_int_eq(errno, EIO);
	close(fd);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("containers");
	TCase *tc = tcase_create("vec_list");
	tcase_add_test(tc, vec_push_keeps_elements_across_growth);
	tcase_add_test(tc, vec_reserve_grows_once_and_zeroes_when_asked);
	tcase_add_test(tc, vec_overflow_refused_and_array_intact);
	tcase_add_test(tc, vec_drop_front_keeps_order);
	tcase_add_test(tc, list_order_push_and_remove);
	tcase_add_test(tc, list_remove_while_iterating);
	tcase_add_test(tc, iov_consume_drops_written_and_trims_partial);
	tcase_add_test(tc, pread_full_reads_by_position_and_names_a_short_file);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
