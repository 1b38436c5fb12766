/* comm_split: creating communicators and keeping their traffic apart.
 *
 * - MPI_Comm_split with colors, reversed keys and MPI_UNDEFINED; key ties
 *   (ordered by parent rank); a split of a split;
 * - MPI_Comm_dup and MPI_Comm_create (a group in a non-rank order);
 * - the same tags on a communicator and its duplicate at the same time, in
 *   an order where mixed contexts would deliver the wrong values;
 * - wildcard receives on sub-communicators while the parent carries
 *   wildcard traffic too: MPI_SOURCE is the rank in the sub-communicator;
 * - MPI_Comm_compare, MPI_Comm_test_inter, names, MPI_Comm_free with a
 *   pending operation on the freed communicator, many dup/free cycles.
 * Needs at least 4 ranks; the expected output is for 6. */
#include "testutil.h"

#include <stdio.h>
#include <string.h>

enum { TAG = 7 };

/* Ring traffic on a and b (same members, same order) with the same tag at
 * once: every rank sends on a first, then on b, and receives on b first. */
static void check_separation(MPI_Comm a, MPI_Comm b, int base)
{
	int rank, size;
	TU_MPI(MPI_Comm_rank(a, &rank));
	TU_MPI(MPI_Comm_size(a, &size));
	int right = (rank + 1) % size, left = (rank + size - 1) % size;
	int out_a = base + rank, out_b = base + 1000 + rank, in_a = -1, in_b = -1;
	MPI_Request reqs[2];
	TU_MPI(MPI_Isend(&out_a, 1, MPI_INT, right, TAG, a, &reqs[0]));
	TU_MPI(MPI_Isend(&out_b, 1, MPI_INT, right, TAG, b, &reqs[1]));
	MPI_Status st;
	TU_MPI(MPI_Recv(&in_b, 1, MPI_INT, MPI_ANY_SOURCE, TAG, b, &st));
	TU_CHECK(in_b == base + 1000 + left && st.MPI_SOURCE == left,
	         "on the second communicator got %d from %d, want %d from %d", in_b, st.MPI_SOURCE,
	         base + 1000 + left, left);
	TU_MPI(MPI_Recv(&in_a, 1, MPI_INT, left, MPI_ANY_TAG, a, &st));
	TU_CHECK(in_a == base + left, "on the first communicator got %d, want %d", in_a,
	         base + left);
	TU_MPI(MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE));
}

static const char *compare_name(int result)
{
	switch (result) {
	case MPI_IDENT:
		return "IDENT";
	case MPI_CONGRUENT:
		return "CONGRUENT";
	case MPI_SIMILAR:
		return "SIMILAR";
	case MPI_UNEQUAL:
		return "UNEQUAL";
	}
	return "?";
}

static int compare(MPI_Comm a, MPI_Comm b)
{
	int result = -1;
	TU_MPI(MPI_Comm_compare(a, b, &result));
	return result;
}

/* Every member of sub except its rank 0 sends its world rank to sub rank
 * 0 with tag 100 + its sub rank; meanwhile every world rank but 0 sends
 * to world rank 0 with tag 100 + its world rank. Both receivers use
 * MPI_ANY_SOURCE/MPI_ANY_TAG. Called by every rank. */
static void check_wildcards(MPI_Comm sub)
{
	int srank, ssize;
	TU_MPI(MPI_Comm_rank(sub, &srank));
	TU_MPI(MPI_Comm_size(sub, &ssize));
	MPI_Request reqs[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
	if (srank != 0)
		TU_MPI(MPI_Isend(&tu_rank, 1, MPI_INT, 0, 100 + srank, sub, &reqs[0]));
	if (tu_rank != 0)
		TU_MPI(MPI_Isend(&tu_rank, 1, MPI_INT, 0, 100 + tu_rank, MPI_COMM_WORLD, &reqs[1]));
	if (srank == 0) {
		MPI_Group sub_group, world_group;
		TU_MPI(MPI_Comm_group(sub, &sub_group));
		TU_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world_group));
		for (int i = 1; i < ssize; i++) {
			int v = -1, world = -1;
			MPI_Status st;
			TU_MPI(MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, sub, &st));
			TU_CHECK(st.MPI_TAG == 100 + st.MPI_SOURCE,
			         "sub-communicator wildcard: source %d tag %d", st.MPI_SOURCE,
			         st.MPI_TAG);
			TU_MPI(MPI_Group_translate_ranks(sub_group, 1, &st.MPI_SOURCE, world_group,
			                                 &world));
			TU_CHECK(v == world, "sub rank %d sent %d, it is world rank %d",
			         st.MPI_SOURCE, v, world);
		}
		TU_MPI(MPI_Group_free(&sub_group));
		TU_MPI(MPI_Group_free(&world_group));
	}
	if (tu_rank == 0) {
		for (int i = 1; i < tu_size; i++) {
			int v = -1;
			MPI_Status st;
			TU_MPI(MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD,
			                &st));
			TU_CHECK(st.MPI_TAG == 100 + v && st.MPI_SOURCE == v,
			         "world wildcard: value %d from %d tag %d", v, st.MPI_SOURCE,
			         st.MPI_TAG);
		}
	}
	TU_MPI(MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE));
	/* Nobody sends anything else to world rank 0 before its wildcard
	 * receives are done. */
	TU_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

int main(int argc, char **argv)
{
	tu_init(&argc, &argv, "comm_split");
	tu_require_size(4, 64);
	char line[256];

	/* Split: two colors with reversed keys, the last rank out. */
	int color = tu_rank == tu_size - 1 ? MPI_UNDEFINED : tu_rank % 2;
	MPI_Comm half;
	TU_MPI(MPI_Comm_split(MPI_COMM_WORLD, color, tu_size - tu_rank, &half));
	if (color == MPI_UNDEFINED) {
		TU_CHECK(half == MPI_COMM_NULL, "MPI_UNDEFINED color gave a communicator");
		snprintf(line, sizeof line, "rank %d: color UNDEFINED -> MPI_COMM_NULL", tu_rank);
	} else {
		int r, n;
		TU_MPI(MPI_Comm_rank(half, &r));
		TU_MPI(MPI_Comm_size(half, &n));
		snprintf(line, sizeof line, "rank %d: color %d -> rank %d of %d", tu_rank, color, r,
		         n);
	}
	tu_print_ranked(line);

	/* Key ties keep the parent's order; negative keys reverse it. */
	MPI_Comm same, reversed, dup;
	TU_MPI(MPI_Comm_split(MPI_COMM_WORLD, 0, 0, &same));
	TU_MPI(MPI_Comm_split(MPI_COMM_WORLD, 5, -tu_rank, &reversed));
	TU_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
	int rrank;
	TU_MPI(MPI_Comm_rank(reversed, &rrank));
	TU_CHECK(rrank == tu_size - 1 - tu_rank, "reversed split: rank %d", rrank);
	if (tu_rank == 0) {
		printf("compare world/world: %s\n",
		       compare_name(compare(MPI_COMM_WORLD, MPI_COMM_WORLD)));
		printf("compare world/dup: %s\n", compare_name(compare(MPI_COMM_WORLD, dup)));
		printf("compare world/split with equal keys: %s\n",
		       compare_name(compare(MPI_COMM_WORLD, same)));
		printf("compare world/split with reversed keys: %s\n",
		       compare_name(compare(MPI_COMM_WORLD, reversed)));
		printf("compare world/half: %s\n", compare_name(compare(MPI_COMM_WORLD, half)));
		printf("compare world/self: %s\n",
		       compare_name(compare(MPI_COMM_WORLD, MPI_COMM_SELF)));
	}

	/* The same tags on a communicator and its duplicate, at once. */
	check_separation(MPI_COMM_WORLD, dup, 0);
	check_separation(dup, MPI_COMM_WORLD, 100);
	check_separation(same, MPI_COMM_WORLD, 200);
	if (half != MPI_COMM_NULL) {
		MPI_Comm half_dup;
		TU_MPI(MPI_Comm_dup(half, &half_dup));
		check_separation(half, half_dup, 300);
		TU_MPI(MPI_Comm_free(&half_dup));
	}
	if (tu_rank == 0)
		printf("same tags on a communicator and its duplicate at once: kept apart\n");

	/* Wildcards on the halves (the excluded rank uses MPI_COMM_SELF). */
	check_wildcards(half != MPI_COMM_NULL ? half : MPI_COMM_SELF);
	if (tu_rank == 0)
		printf("wildcard receives on sub-communicators: MPI_SOURCE is the sub-communicator "
		       "rank\n");

	/* A split of a split. */
	if (half != MPI_COMM_NULL) {
		int hr, qr, qn;
		MPI_Comm quarter;
		TU_MPI(MPI_Comm_rank(half, &hr));
		TU_MPI(MPI_Comm_split(half, hr < 2 ? 0 : 1, 0, &quarter));
		TU_MPI(MPI_Comm_rank(quarter, &qr));
		TU_MPI(MPI_Comm_size(quarter, &qn));
		snprintf(line, sizeof line, "rank %d: half rank %d -> quarter rank %d of %d",
		         tu_rank, hr, qr, qn);
		check_wildcards(quarter);
		TU_MPI(MPI_Comm_free(&quarter));
	} else {
		check_wildcards(MPI_COMM_SELF);
		snprintf(line, sizeof line, "rank %d: no half", tu_rank);
	}
	tu_print_ranked(line);

	/* MPI_Comm_create from a group listed out of order. */
	MPI_Group world_group, picked;
	int ranks[3] = {tu_size - 1, 0, 2};
	TU_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world_group));
	TU_MPI(MPI_Group_incl(world_group, 3, ranks, &picked));
	MPI_Comm created;
	TU_MPI(MPI_Comm_create(MPI_COMM_WORLD, picked, &created));
	if (created != MPI_COMM_NULL) {
		int r, n;
		TU_MPI(MPI_Comm_rank(created, &r));
		TU_MPI(MPI_Comm_size(created, &n));
		TU_CHECK(n == 3 && tu_rank == ranks[r], "created: rank %d of %d", r, n);
		MPI_Comm created_dup;
		TU_MPI(MPI_Comm_dup(created, &created_dup));
		check_separation(created, created_dup, 400);
		TU_MPI(MPI_Comm_free(&created_dup));
		snprintf(line, sizeof line, "rank %d: created rank %d of %d", tu_rank, r, n);
	} else {
		snprintf(line, sizeof line, "rank %d: not in the created group", tu_rank);
	}
	tu_print_ranked(line);
	TU_MPI(MPI_Group_free(&picked));
	TU_MPI(MPI_Group_free(&world_group));

	/* The processes sharing memory: one host here, ordered by key; a
	 * process passing MPI_UNDEFINED gets MPI_COMM_NULL. */
	MPI_Comm node;
	int type = tu_rank == 1 ? MPI_UNDEFINED : MPI_COMM_TYPE_SHARED;
	TU_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, type, -tu_rank, MPI_INFO_NULL, &node));
	if (tu_rank == 1) {
		TU_CHECK(node == MPI_COMM_NULL, "MPI_UNDEFINED split type gave a communicator");
	} else {
		int r, n;
		TU_MPI(MPI_Comm_rank(node, &r));
		TU_MPI(MPI_Comm_size(node, &n));
		int want = 0;
		for (int k = tu_size - 1; k > tu_rank; k--)
			want += k != 1;
		TU_CHECK(n == tu_size - 1 && r == want, "shared split: rank %d of %d", r, n);
		MPI_Comm node_dup;
		TU_MPI(MPI_Comm_dup(node, &node_dup));
		check_separation(node, node_dup, 500);
		TU_MPI(MPI_Comm_free(&node_dup));
		TU_MPI(MPI_Comm_free(&node));
	}
	if (tu_rank == 0)
		printf("split_type SHARED: every other process on this host, ordered by key\n");

	/* Inter-communicator test, names. */
	int inter = -1, len = -1;
	char name[MPI_MAX_OBJECT_NAME];
	TU_MPI(MPI_Comm_test_inter(dup, &inter));
	TU_MPI(MPI_Comm_get_name(dup, name, &len));
	TU_CHECK(inter == 0 && len == 0 && name[0] == '\0', "dup: inter %d, name '%s'", inter,
	         name);
	TU_MPI(MPI_Comm_set_name(dup, "my duplicate"));
	TU_MPI(MPI_Comm_get_name(dup, name, &len));
	TU_CHECK(strcmp(name, "my duplicate") == 0 && len == 12, "name '%s' (%d)", name, len);
	TU_MPI(MPI_Comm_get_name(MPI_COMM_WORLD, name, &len));
	if (tu_rank == 0)
		printf("names: world '%s', dup 'my duplicate'\n", name);

	/* Free with an operation pending on the freed communicator. */
	MPI_Comm doomed;
	TU_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &doomed));
	int out = 5000 + tu_rank, in = -1;
	MPI_Request reqs[2];
	TU_MPI(
	    MPI_Irecv(&in, 1, MPI_INT, (tu_rank + tu_size - 1) % tu_size, TAG, doomed, &reqs[0]));
	TU_MPI(MPI_Isend(&out, 1, MPI_INT, (tu_rank + 1) % tu_size, TAG, doomed, &reqs[1]));
	TU_MPI(MPI_Comm_free(&doomed));
	TU_CHECK(doomed == MPI_COMM_NULL, "MPI_Comm_free did not reset the handle");
	TU_MPI(MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE));
	TU_CHECK(in == 5000 + (tu_rank + tu_size - 1) % tu_size, "pending receive got %d", in);
	if (tu_rank == 0)
		printf("operations pending on a freed communicator complete\n");

	/* Many creations: contexts keep being agreed and traffic kept apart. */
	for (int i = 0; i < 100; i++) {
		MPI_Comm c;
		TU_MPI(MPI_Comm_dup(i % 2 ? dup : MPI_COMM_WORLD, &c));
		if (i % 25 == 0)
			check_separation(c, MPI_COMM_WORLD, 600 + i);
		TU_MPI(MPI_Comm_free(&c));
	}
	if (tu_rank == 0)
		printf("100 dup/free cycles\n");

	/* Freeing a predefined communicator is an error. */
	MPI_Comm world = MPI_COMM_WORLD;
	TU_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
	int rc = MPI_Comm_free(&world);
	TU_CHECK(rc != MPI_SUCCESS, "MPI_Comm_free(MPI_COMM_WORLD) succeeded");
	if (tu_rank == 0)
		printf("MPI_Comm_free(MPI_COMM_WORLD): error %s\n", tu_err_name(rc));
	TU_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));

	TU_MPI(MPI_Comm_free(&same));
	TU_MPI(MPI_Comm_free(&reversed));
	TU_MPI(MPI_Comm_free(&dup));
	if (half != MPI_COMM_NULL)
		TU_MPI(MPI_Comm_free(&half));
	if (created != MPI_COMM_NULL)
		TU_MPI(MPI_Comm_free(&created));
	if (tu_rank == 0)
		printf("comm_split: all checks passed\n");
	return tu_finalize();
}
