/* comm_groups: groups and attribute caching.
 *
 * Groups: MPI_Comm_group, incl/excl (explicit and ranges), rank and size,
 * translate_ranks (MPI_PROC_NULL and non-members), union, intersection,
 * difference, compare, MPI_GROUP_EMPTY, free; the group of a split
 * communicator. Attributes: MPI_TAG_UB, user keyvals
 * with MPI_COMM_DUP_FN, a null copy function and a copy function of its
 * own, delete callbacks on replace, delete, free; a keyval freed while
 * still in use. Needs at least 4 ranks; the expected output is for 5. */
#include "testutil.h"

#include <stdio.h>
#include <string.h>

/* "a b c" of the group's members as world ranks. */
static void members(MPI_Group g, char *out, size_t cap)
{
	MPI_Group world;
	int n;
	TU_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world));
	TU_MPI(MPI_Group_size(g, &n));
	out[0] = '\0';
	for (int r = 0; r < n; r++) {
		int w;
		TU_MPI(MPI_Group_translate_ranks(g, 1, &r, world, &w));
		size_t len = strlen(out);
		snprintf(out + len, cap - len, "%s%d", r ? " " : "", w);
	}
	if (n == 0)
		snprintf(out, cap, "(empty)");
	TU_MPI(MPI_Group_free(&world));
}

static void show(const char *what, MPI_Group g)
{
	char list[256];
	members(g, list, sizeof list);
	if (tu_rank == 0)
		printf("%s: %s\n", what, list);
}

static const char *compare_name(int result)
{
	return result == MPI_IDENT     ? "IDENT"
	       : result == MPI_SIMILAR ? "SIMILAR"
	       : result == MPI_UNEQUAL ? "UNEQUAL"
	                               : "?";
}

static int group_compare(MPI_Group a, MPI_Group b)
{
	int result = -1;
	TU_MPI(MPI_Group_compare(a, b, &result));
	return result;
}

static void groups(void)
{
	MPI_Group world, picked, rest, evens, evens2, u, in, diff, empty, again;
	TU_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world));
	int n, r;
	TU_MPI(MPI_Group_size(world, &n));
	TU_MPI(MPI_Group_rank(world, &r));
	TU_CHECK(n == tu_size && r == tu_rank, "world group: rank %d of %d", r, n);

	int pick[3] = {tu_size - 1, 1, 3};
	TU_MPI(MPI_Group_incl(world, 3, pick, &picked));
	TU_MPI(MPI_Group_rank(picked, &r));
	int want = tu_rank == tu_size - 1 ? 0 : tu_rank == 1 ? 1 : tu_rank == 3 ? 2 : MPI_UNDEFINED;
	TU_CHECK(r == want, "rank in the picked group: %d, want %d", r, want);
	show("incl {last, 1, 3}", picked);

	int drop[2] = {0, 2};
	TU_MPI(MPI_Group_excl(world, 2, drop, &rest));
	show("excl {0, 2}", rest);

	int range_in[1][3] = {{0, tu_size - 1, 2}};
	int range_out[1][3] = {{1, tu_size - 1, 2}};
	TU_MPI(MPI_Group_range_incl(world, 1, range_in, &evens));
	TU_MPI(MPI_Group_range_excl(world, 1, range_out, &evens2));
	show("range_incl {0, last, 2}", evens);
	if (tu_rank == 0)
		printf("compare range_incl evens / range_excl odds: %s\n",
		       compare_name(group_compare(evens, evens2)));

	int ranks1[4] = {0, 1, 2, MPI_PROC_NULL}, ranks2[4];
	TU_MPI(MPI_Group_translate_ranks(picked, 4, ranks1, world, ranks2));
	TU_CHECK(ranks2[0] == tu_size - 1 && ranks2[1] == 1 && ranks2[2] == 3 &&
	             ranks2[3] == MPI_PROC_NULL,
	         "translate picked -> world: %d %d %d %d", ranks2[0], ranks2[1], ranks2[2],
	         ranks2[3]);
	int all[64], in_picked[64];
	for (int i = 0; i < tu_size; i++)
		all[i] = i;
	TU_MPI(MPI_Group_translate_ranks(world, tu_size, all, picked, in_picked));
	for (int i = 0; i < tu_size; i++) {
		int w = i == tu_size - 1 ? 0 : i == 1 ? 1 : i == 3 ? 2 : MPI_UNDEFINED;
		TU_CHECK(in_picked[i] == w, "translate world %d -> picked: %d", i, in_picked[i]);
	}
	if (tu_rank == 0)
		printf("translate_ranks: members, non-members (MPI_UNDEFINED), MPI_PROC_NULL\n");

	TU_MPI(MPI_Group_union(evens, picked, &u));
	TU_MPI(MPI_Group_intersection(evens, picked, &in));
	TU_MPI(MPI_Group_difference(evens, picked, &diff));
	show("union evens picked", u);
	show("intersection evens picked", in);
	show("difference evens picked", diff);

	int swapped[3] = {1, tu_size - 1, 3};
	TU_MPI(MPI_Group_incl(world, 3, swapped, &again));
	if (tu_rank == 0) {
		printf("compare picked / same members reordered: %s\n",
		       compare_name(group_compare(picked, again)));
		printf("compare picked / evens: %s\n", compare_name(group_compare(picked, evens)));
		printf("compare world / world: %s\n", compare_name(group_compare(world, world)));
	}

	/* The empty group. */
	MPI_Group none;
	int odd_ranks[1] = {1};
	TU_MPI(MPI_Group_incl(world, 1, odd_ranks, &none));
	TU_MPI(MPI_Group_intersection(evens, none, &empty));
	TU_MPI(MPI_Group_size(MPI_GROUP_EMPTY, &n));
	TU_MPI(MPI_Group_rank(MPI_GROUP_EMPTY, &r));
	TU_CHECK(n == 0 && r == MPI_UNDEFINED, "MPI_GROUP_EMPTY: rank %d of %d", r, n);
	TU_MPI(MPI_Group_size(empty, &n));
	TU_CHECK(n == 0, "empty intersection has %d members", n);
	if (tu_rank == 0)
		printf("compare empty intersection / MPI_GROUP_EMPTY: %s\n",
		       compare_name(group_compare(empty, MPI_GROUP_EMPTY)));

	/* The group of a split communicator. */
	MPI_Comm half;
	MPI_Group half_group;
	TU_MPI(MPI_Comm_split(MPI_COMM_WORLD, tu_rank % 2, -tu_rank, &half));
	TU_MPI(MPI_Comm_group(half, &half_group));
	char list[256];
	members(half_group, list, sizeof list);
	char line[300];
	snprintf(line, sizeof line, "rank %d: group of its half: %s", tu_rank, list);
	tu_print_ranked(line);

	MPI_Group *all_groups[] = {&world, &picked, &rest,  &evens, &evens2, &u,
	                           &in,    &diff,   &empty, &again, &none,   &half_group};
	for (size_t i = 0; i < sizeof all_groups / sizeof all_groups[0]; i++) {
		TU_MPI(MPI_Group_free(all_groups[i]));
		TU_CHECK(*all_groups[i] == MPI_GROUP_NULL, "MPI_Group_free left a handle");
	}
	TU_MPI(MPI_Comm_free(&half));
}

/* ---- attributes ---- */

static int deletes; /* delete callbacks seen */

static int count_delete(MPI_Comm comm, int keyval, void *value, void *extra)
{
	(void)comm;
	(void)keyval;
	(void)value;
	deletes += *(int *)extra;
	return MPI_SUCCESS;
}

/* Copies the value plus one (values are small integers cast to pointers). */
static int copy_plus_one(MPI_Comm comm, int keyval, void *extra, void *in, void *out, int *flag)
{
	(void)comm;
	(void)keyval;
	(void)extra;
	*(void **)out = (void *)((char *)in + 1);
	*flag = 1;
	return MPI_SUCCESS;
}

static long get_attr(MPI_Comm c, int keyval, int *flag)
{
	void *v = NULL;
	TU_MPI(MPI_Comm_get_attr(c, keyval, &v, flag));
	return *flag ? (long)((char *)v - (char *)0) : -1;
}

static void attributes(void)
{
	static int one = 1;
	MPI_Comm a, b;
	int *tag_ub, flag = 0;
	/* The standard attaches the predefined attributes to MPI_COMM_WORLD
	 * (other MPIs do not all show them on other communicators). */
	TU_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &flag));
	TU_CHECK(flag && *tag_ub >= 32767, "MPI_TAG_UB");
	TU_MPI(MPI_Comm_split(MPI_COMM_WORLD, tu_rank % 2, 0, &a));

	int k_dup, k_null, k_plus;
	TU_MPI(MPI_Comm_create_keyval(MPI_COMM_DUP_FN, count_delete, &k_dup, &one));
	TU_MPI(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, count_delete, &k_null, &one));
	TU_MPI(MPI_Comm_create_keyval(copy_plus_one, MPI_COMM_NULL_DELETE_FN, &k_plus, NULL));
	TU_CHECK(get_attr(a, k_dup, &flag) == -1 && !flag,
	         "attribute set before MPI_Comm_set_attr");
	TU_MPI(MPI_Comm_set_attr(a, k_dup, (char *)0 + 10));
	TU_MPI(MPI_Comm_set_attr(a, k_null, (char *)0 + 20));
	TU_MPI(MPI_Comm_set_attr(a, k_plus, (char *)0 + 30));
	TU_MPI(MPI_Comm_set_attr(a, k_dup, (char *)0 + 11)); /* replaces: one delete */
	TU_CHECK(deletes == 1, "replacing an attribute ran %d delete callbacks", deletes);
	TU_CHECK(get_attr(a, k_dup, &flag) == 11 && flag, "replaced attribute");

	TU_MPI(MPI_Comm_dup(a, &b));
	long v_dup = get_attr(b, k_dup, &flag);
	int f_dup = flag;
	long v_null = get_attr(b, k_null, &flag);
	int f_null = flag;
	long v_plus = get_attr(b, k_plus, &flag);
	int f_plus = flag;
	TU_CHECK(f_dup && v_dup == 11 && !f_null && f_plus && v_plus == 31,
	         "copied attributes: %ld/%d %ld/%d %ld/%d", v_dup, f_dup, v_null, f_null, v_plus,
	         f_plus);
	if (tu_rank == 0)
		printf(
		    "MPI_Comm_dup: MPI_COMM_DUP_FN copies, a null copy function does not, a user "
		    "copy function's value is used\n");

	TU_MPI(MPI_Comm_delete_attr(a, k_null));
	TU_CHECK(deletes == 2 && get_attr(a, k_null, &flag) == -1 && !flag, "MPI_Comm_delete_attr");
	/* A keyval freed while an attribute uses it: the attribute stays and
	 * its delete callback still runs. */
	int k_gone = k_dup;
	TU_MPI(MPI_Comm_free_keyval(&k_gone));
	TU_CHECK(k_gone == MPI_KEYVAL_INVALID, "MPI_Comm_free_keyval left the handle");
	TU_MPI(MPI_Comm_free(&a)); /* k_dup's attribute: one delete */
	TU_MPI(MPI_Comm_free(&b)); /* k_dup's copy: one more */
	TU_CHECK(deletes == 4, "after freeing both communicators: %d delete callbacks", deletes);
	TU_MPI(MPI_Comm_free_keyval(&k_null));
	TU_MPI(MPI_Comm_free_keyval(&k_plus));
	if (tu_rank == 0)
		printf("delete callbacks: on replace, MPI_Comm_delete_attr and MPI_Comm_free (4 in "
		       "all)\n");
}

int main(int argc, char **argv)
{
	tu_init(&argc, &argv, "comm_groups");
	tu_require_size(4, 64);
	groups();
	attributes();
	if (tu_rank == 0)
		printf("comm_groups: all checks passed\n");
	return tu_finalize();
}
