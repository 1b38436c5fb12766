/* Communicators: MPI_COMM_WORLD and MPI_COMM_SELF for now. The table is
 * indexed by the low bits of the handle, so communicators created later
 * (MPI_Comm_dup/split) only append entries with their own group and
 * context ids. */
#include <stddef.h>

#include "mpi_internal.h"

#define COMM_TABLE_SIZE 2

static int self_world_rank; /* MPI_COMM_SELF's group: just this process */

static struct cm_mpi_comm comm_world = {
    .handle = MPI_COMM_WORLD,
    .world_of = NULL,
    .ctx_pt2pt = CM_CTX_WORLD_PT2PT,
    .ctx_coll = CM_CTX_WORLD_COLL,
    .errhandler = MPI_ERRORS_ARE_FATAL,
    .name = "MPI_COMM_WORLD",
};

static struct cm_mpi_comm comm_self = {
    .handle = MPI_COMM_SELF,
    .rank = 0,
    .size = 1,
    .world_of = &self_world_rank,
    .ctx_pt2pt = CM_CTX_SELF_PT2PT,
    .ctx_coll = CM_CTX_SELF_COLL,
    .errhandler = MPI_ERRORS_ARE_FATAL,
    .name = "MPI_COMM_SELF",
};

static struct cm_mpi_comm *const comm_table[COMM_TABLE_SIZE] = {&comm_world, &comm_self};

void cm_mpi_comm_init(int world_rank, int world_size)
{
	comm_world.rank = world_rank;
	comm_world.size = world_size;
	comm_world.errhandler = MPI_ERRORS_ARE_FATAL;
	self_world_rank = world_rank;
	comm_self.errhandler = MPI_ERRORS_ARE_FATAL;
}

struct cm_mpi_comm *cm_mpi_comm_world(void)
{
	return &comm_world;
}

struct cm_mpi_comm *cm_mpi_comm_get(MPI_Comm comm)
{
	if (CM_HANDLE_KIND(comm) != CM_KIND_COMM)
		return NULL;
	unsigned index = CM_HANDLE_INDEX(comm);
	if (index >= COMM_TABLE_SIZE)
		return NULL;
	return comm_table[index];
}

int cm_mpi_comm_rank_of(const struct cm_mpi_comm *c, int world_rank)
{
	if (!c->world_of)
		return world_rank >= 0 && world_rank < c->size ? world_rank : MPI_UNDEFINED;
	/* Linear: groups are tiny today (MPI_COMM_SELF). Sub-communicators
	 * will want an inverse table built at creation. */
	for (int r = 0; r < c->size; r++)
		if (c->world_of[r] == world_rank)
			return r;
	return MPI_UNDEFINED;
}

int MPI_Comm_rank(MPI_Comm comm, int *rank)
{
	CM_MPI_REQUIRE_INIT("MPI_Comm_rank");
	struct cm_mpi_comm *c = cm_mpi_comm_get(comm);
	if (!c)
		return cm_mpi_raise(NULL, MPI_ERR_COMM, "MPI_Comm_rank");
	if (!rank)
		return cm_mpi_raise(c, MPI_ERR_ARG, "MPI_Comm_rank");
	*rank = c->rank;
	return MPI_SUCCESS;
}

int MPI_Comm_size(MPI_Comm comm, int *size)
{
	CM_MPI_REQUIRE_INIT("MPI_Comm_size");
	struct cm_mpi_comm *c = cm_mpi_comm_get(comm);
	if (!c)
		return cm_mpi_raise(NULL, MPI_ERR_COMM, "MPI_Comm_size");
	if (!size)
		return cm_mpi_raise(c, MPI_ERR_ARG, "MPI_Comm_size");
	*size = c->size;
	return MPI_SUCCESS;
}

/* The predefined attributes. Their values live here: MPI hands out a
 * pointer to the value, which must stay valid. */
static int attr_tag_ub = CM_MPI_TAG_UB;
static int attr_host = MPI_PROC_NULL; /* no distinguished host process */
static int attr_io = MPI_ANY_SOURCE;  /* every process can do I/O */
static int attr_wtime_is_global = 0;  /* clocks are per process */

int MPI_Comm_get_attr(MPI_Comm comm, int comm_keyval, void *attribute_val, int *flag)
{
	CM_MPI_REQUIRE_INIT("MPI_Comm_get_attr");
	struct cm_mpi_comm *c = cm_mpi_comm_get(comm);
	if (!c)
		return cm_mpi_raise(NULL, MPI_ERR_COMM, "MPI_Comm_get_attr");
	if (!attribute_val || !flag)
		return cm_mpi_raise(c, MPI_ERR_ARG, "MPI_Comm_get_attr");
	int *value;
	switch (comm_keyval) {
	case MPI_TAG_UB:
		value = &attr_tag_ub;
		break;
	case MPI_HOST:
		value = &attr_host;
		break;
	case MPI_IO:
		value = &attr_io;
		break;
	case MPI_WTIME_IS_GLOBAL:
		value = &attr_wtime_is_global;
		break;
	default:
		return cm_mpi_raise(c, MPI_ERR_KEYVAL, "MPI_Comm_get_attr");
	}
	*(int **)attribute_val = value;
	*flag = 1;
	return MPI_SUCCESS;
}
