/* Groups: the handle table and the MPI_Group_* calls. A group is an
 * ordered list of world ranks (struct cm_mpi_group); the set operations
 * build new lists and never touch the network. */
#include <stdlib.h>
#include <string.h>

#include "mpi_internal.h"
#include "vec.h"

static int no_ranks[1];
static struct cm_mpi_group empty_group = {
    .refs = 1, .size = 0, .world_of = no_ranks, .by_world = no_ranks};

/* Handle index -> group; index 0 is MPI_GROUP_EMPTY. Freed slots are
 * reused. */
static CM_VEC(struct cm_mpi_group *) group_table;

struct cm_mpi_group *cm_mpi_group_get(MPI_Group group)
{
	if (group == MPI_GROUP_EMPTY)
		return &empty_group;
	if (CM_HANDLE_KIND(group) != CM_KIND_GROUP)
		return NULL;
	unsigned index = CM_HANDLE_INDEX(group);
	if (index >= group_table.n)
		return NULL;
	return group_table.items[index];
}

/* A handle for g, whose reference it takes over (an empty group is
 * MPI_GROUP_EMPTY). Returns an MPI error code. */
static int group_handle(struct cm_mpi_group *g, MPI_Group *out)
{
	if (g->size == 0) {
		cm_mpi_group_unref(g);
		*out = MPI_GROUP_EMPTY;
		return MPI_SUCCESS;
	}
	size_t slot = cm_vec_claim_slot(&group_table, 1, CM_HANDLE_INDEX_MAX);
	if (slot == SIZE_MAX) {
		cm_mpi_group_unref(g);
		return MPI_ERR_NO_MEM;
	}
	group_table.items[slot] = g;
	*out = (MPI_Group)(CM_KIND_GROUP | slot);
	return MPI_SUCCESS;
}

/* A new group of the n world ranks listed, with a handle in *out. */
static int group_of(const int *world, int n, MPI_Group *out)
{
	struct cm_mpi_group *g;
	int rc = cm_mpi_group_of_list(world, n, &g);
	return rc ? rc : group_handle(g, out);
}

static int raise_or(int rc, const char *func)
{
	return rc ? cm_mpi_raise(NULL, rc, func) : MPI_SUCCESS;
}

int MPI_Comm_group(MPI_Comm comm, MPI_Group *group)
{
	CM_MPI_REQUIRE_INIT("MPI_Comm_group");
	struct cm_mpi_comm *c = cm_mpi_comm_get(comm);
	if (!c)
		return cm_mpi_raise(NULL, MPI_ERR_COMM, "MPI_Comm_group");
	if (!group)
		return cm_mpi_raise(c, MPI_ERR_ARG, "MPI_Comm_group");
	cm_mpi_group_ref(c->group);
	int rc = group_handle(c->group, group);
	return rc ? cm_mpi_raise(c, rc, "MPI_Comm_group") : MPI_SUCCESS;
}

int MPI_Comm_remote_group(MPI_Comm comm, MPI_Group *group)
{
	CM_MPI_REQUIRE_INIT("MPI_Comm_remote_group");
	struct cm_mpi_comm *c = cm_mpi_comm_get(comm);
	if (!c || !c->remote)
		return cm_mpi_raise(c, MPI_ERR_COMM, "MPI_Comm_remote_group");
	if (!group)
		return cm_mpi_raise(c, MPI_ERR_ARG, "MPI_Comm_remote_group");
	cm_mpi_group_ref(c->remote);
	int rc = group_handle(c->remote, group);
	return rc ? cm_mpi_raise(c, rc, "MPI_Comm_remote_group") : MPI_SUCCESS;
}

int MPI_Group_size(MPI_Group group, int *size)
{
	CM_MPI_REQUIRE_INIT("MPI_Group_size");
	struct cm_mpi_group *g = cm_mpi_group_get(group);
	if (!g)
		return cm_mpi_raise(NULL, MPI_ERR_GROUP, "MPI_Group_size");
	if (!size)
		return cm_mpi_raise(NULL, MPI_ERR_ARG, "MPI_Group_size");
	*size = g->size;
	return MPI_SUCCESS;
}

int MPI_Group_rank(MPI_Group group, int *rank)
{
	CM_MPI_REQUIRE_INIT("MPI_Group_rank");
	struct cm_mpi_group *g = cm_mpi_group_get(group);
	if (!g)
		return cm_mpi_raise(NULL, MPI_ERR_GROUP, "MPI_Group_rank");
	if (!rank)
		return cm_mpi_raise(NULL, MPI_ERR_ARG, "MPI_Group_rank");
	*rank = cm_mpi_group_rank_of(g, cm_mpi_comm_world()->rank);
	return MPI_SUCCESS;
}

int MPI_Group_translate_ranks(MPI_Group group1, int n, const int ranks1[], MPI_Group group2,
                              int ranks2[])
{
	CM_MPI_REQUIRE_INIT("MPI_Group_translate_ranks");
	struct cm_mpi_group *g1 = cm_mpi_group_get(group1), *g2 = cm_mpi_group_get(group2);
	if (!g1 || !g2)
		return cm_mpi_raise(NULL, MPI_ERR_GROUP, "MPI_Group_translate_ranks");
	if (n < 0 || (n > 0 && (!ranks1 || !ranks2)))
		return cm_mpi_raise(NULL, MPI_ERR_ARG, "MPI_Group_translate_ranks");
	for (int i = 0; i < n; i++)
		if (ranks1[i] != MPI_PROC_NULL && (ranks1[i] < 0 || ranks1[i] >= g1->size))
			return cm_mpi_raise(NULL, MPI_ERR_RANK, "MPI_Group_translate_ranks");
	for (int i = 0; i < n; i++)
		ranks2[i] = ranks1[i] == MPI_PROC_NULL
		                ? MPI_PROC_NULL
		                : cm_mpi_group_rank_of(g2, g1->world_of[ranks1[i]]);
	return MPI_SUCCESS;
}

int cm_mpi_group_compare(const struct cm_mpi_group *g1, const struct cm_mpi_group *g2)
{
	if (g1->size != g2->size)
		return MPI_UNEQUAL;
	int same_order = 1;
	for (int r = 0; r < g1->size; r++) {
		int other = cm_mpi_group_rank_of(g2, g1->world_of[r]);
		if (other == MPI_UNDEFINED)
			return MPI_UNEQUAL;
		same_order &= other == r;
	}
	return same_order ? MPI_IDENT : MPI_SIMILAR;
}

int MPI_Group_compare(MPI_Group group1, MPI_Group group2, int *result)
{
	CM_MPI_REQUIRE_INIT("MPI_Group_compare");
	struct cm_mpi_group *g1 = cm_mpi_group_get(group1), *g2 = cm_mpi_group_get(group2);
	if (!g1 || !g2)
		return cm_mpi_raise(NULL, MPI_ERR_GROUP, "MPI_Group_compare");
	if (!result)
		return cm_mpi_raise(NULL, MPI_ERR_ARG, "MPI_Group_compare");
	*result = cm_mpi_group_compare(g1, g2);
	return MPI_SUCCESS;
}

enum set_op { SET_UNION, SET_INTERSECTION, SET_DIFFERENCE };

static int set_operation(MPI_Group group1, MPI_Group group2, MPI_Group *newgroup, enum set_op op,
                         const char *func)
{
	CM_MPI_REQUIRE_INIT(func);
	struct cm_mpi_group *g1 = cm_mpi_group_get(group1), *g2 = cm_mpi_group_get(group2);
	if (!g1 || !g2)
		return cm_mpi_raise(NULL, MPI_ERR_GROUP, func);
	if (!newgroup)
		return cm_mpi_raise(NULL, MPI_ERR_ARG, func);
	int *world = malloc(((size_t)g1->size + (size_t)g2->size + 1) * sizeof *world);
	if (!world)
		return cm_mpi_raise(NULL, MPI_ERR_NO_MEM, func);
	int n = 0;
	/* Members of group1 first, in its order; a union adds the members of
	 * group2 not in group1, in group2's order. */
	for (int r = 0; r < g1->size; r++) {
		int in2 = cm_mpi_group_rank_of(g2, g1->world_of[r]) != MPI_UNDEFINED;
		if (op == SET_UNION || (op == SET_INTERSECTION) == in2)
			world[n++] = g1->world_of[r];
	}
	if (op == SET_UNION)
		for (int r = 0; r < g2->size; r++)
			if (cm_mpi_group_rank_of(g1, g2->world_of[r]) == MPI_UNDEFINED)
				world[n++] = g2->world_of[r];
	int rc = group_of(world, n, newgroup);
	free(world);
	return raise_or(rc, func);
}

int MPI_Group_union(MPI_Group group1, MPI_Group group2, MPI_Group *newgroup)
{
	return set_operation(group1, group2, newgroup, SET_UNION, "MPI_Group_union");
}

int MPI_Group_intersection(MPI_Group group1, MPI_Group group2, MPI_Group *newgroup)
{
	return set_operation(group1, group2, newgroup, SET_INTERSECTION, "MPI_Group_intersection");
}

int MPI_Group_difference(MPI_Group group1, MPI_Group group2, MPI_Group *newgroup)
{
	return set_operation(group1, group2, newgroup, SET_DIFFERENCE, "MPI_Group_difference");
}

/* Marks the n ranks listed (each valid and distinct) in picked[]. */
static int pick_ranks(const struct cm_mpi_group *g, int n, const int ranks[], char *picked)
{
	for (int i = 0; i < n; i++) {
		if (ranks[i] < 0 || ranks[i] >= g->size || picked[ranks[i]])
			return MPI_ERR_RANK;
		picked[ranks[i]] = 1;
	}
	return MPI_SUCCESS;
}

/* Group_incl (exclude 0) or Group_excl (exclude 1) of an explicit list. */
static int incl_excl(MPI_Group group, int n, const int ranks[], MPI_Group *newgroup, int exclude,
                     const char *func)
{
	CM_MPI_REQUIRE_INIT(func);
	struct cm_mpi_group *g = cm_mpi_group_get(group);
	if (!g)
		return cm_mpi_raise(NULL, MPI_ERR_GROUP, func);
	if (n < 0 || n > g->size || (n > 0 && !ranks) || !newgroup)
		return cm_mpi_raise(NULL, MPI_ERR_ARG, func);
	char *picked = calloc((size_t)g->size + 1, 1);
	int *world = malloc(((size_t)g->size + 1) * sizeof *world);
	int rc = picked && world ? pick_ranks(g, n, ranks, picked) : MPI_ERR_NO_MEM;
	if (!rc) {
		int m = 0;
		if (exclude) {
			for (int r = 0; r < g->size; r++)
				if (!picked[r])
					world[m++] = g->world_of[r];
		} else {
			for (int i = 0; i < n; i++)
				world[m++] = g->world_of[ranks[i]];
		}
		rc = group_of(world, m, newgroup);
	}
	free(picked);
	free(world);
	return raise_or(rc, func);
}

int MPI_Group_incl(MPI_Group group, int n, const int ranks[], MPI_Group *newgroup)
{
	return incl_excl(group, n, ranks, newgroup, 0, "MPI_Group_incl");
}

int MPI_Group_excl(MPI_Group group, int n, const int ranks[], MPI_Group *newgroup)
{
	return incl_excl(group, n, ranks, newgroup, 1, "MPI_Group_excl");
}

/* Expands (first, last, stride) triplets into a rank list. */
static int expand_ranges(const struct cm_mpi_group *g, int n, int ranges[][3], int **out,
                         int *count)
{
	long long total = 0;
	for (int i = 0; i < n; i++) {
		int first = ranges[i][0], last = ranges[i][1], stride = ranges[i][2];
		if (stride == 0 || first < 0 || first >= g->size || last < 0 || last >= g->size ||
		    (stride > 0 && first > last) || (stride < 0 && first < last))
			return MPI_ERR_RANK;
		total += ((long long)last - first) / stride + 1;
		if (total > g->size)
			return MPI_ERR_RANK; /* some rank would repeat */
	}
	int *list = malloc(((size_t)total + 1) * sizeof *list);
	if (!list)
		return MPI_ERR_NO_MEM;
	int k = 0;
	for (int i = 0; i < n; i++) {
		int first = ranges[i][0], last = ranges[i][1], stride = ranges[i][2];
		for (long long r = first; stride > 0 ? r <= last : r >= last; r += stride)
			list[k++] = (int)r;
	}
	*out = list;
	*count = k;
	return MPI_SUCCESS;
}

static int range_incl_excl(MPI_Group group, int n, int ranges[][3], MPI_Group *newgroup,
                           int exclude, const char *func)
{
	CM_MPI_REQUIRE_INIT(func);
	struct cm_mpi_group *g = cm_mpi_group_get(group);
	if (!g)
		return cm_mpi_raise(NULL, MPI_ERR_GROUP, func);
	if (n < 0 || (n > 0 && !ranges) || !newgroup)
		return cm_mpi_raise(NULL, MPI_ERR_ARG, func);
	int *list = NULL, count = 0;
	int rc = expand_ranges(g, n, ranges, &list, &count);
	if (rc)
		return cm_mpi_raise(NULL, rc, func);
	rc = incl_excl(group, count, list, newgroup, exclude, func);
	free(list);
	return rc;
}

int MPI_Group_range_incl(MPI_Group group, int n, int ranges[][3], MPI_Group *newgroup)
{
	return range_incl_excl(group, n, ranges, newgroup, 0, "MPI_Group_range_incl");
}

int MPI_Group_range_excl(MPI_Group group, int n, int ranges[][3], MPI_Group *newgroup)
{
	return range_incl_excl(group, n, ranges, newgroup, 1, "MPI_Group_range_excl");
}

int MPI_Group_free(MPI_Group *group)
{
	CM_MPI_REQUIRE_INIT("MPI_Group_free");
	struct cm_mpi_group *g = group ? cm_mpi_group_get(*group) : NULL;
	if (!g)
		return cm_mpi_raise(NULL, MPI_ERR_GROUP, "MPI_Group_free");
	if (g != &empty_group) {
		group_table.items[CM_HANDLE_INDEX(*group)] = NULL;
		cm_mpi_group_unref(g);
	}
	*group = MPI_GROUP_NULL;
	return MPI_SUCCESS;
}
