/* Collectives, built on point-to-point in each communicator's collective
 * context (so they can never match a user's receive). This file: Barrier,
 * which needs nothing but the point-to-point engine (MPI_Finalize uses it).
 * The others: mpi_coll_bcast.c, mpi_coll_reduce.c (Reduce, Allreduce,
 * Reduce_scatter), mpi_coll_scan.c, mpi_coll_gather.c (Gather, Scatter,
 * Allgather), mpi_coll_alltoall.c; their shared pieces are in
 * mpi_coll_util.c and mpi_coll_internal.h, the algorithm choice in
 * mpi_coll_model.c, the reduction operations in mpi_op.c. */
#include "mpi_internal.h"

/* One signal: a zero-byte message to `to` and one from `from`. */
static int signal_pair(struct cm_mpi_comm *c, int to, int from, int tag)
{
	static char token; /* zero-byte messages: any valid address will do */
	int in_flight;
	return cm_mpi_exchange(c, &token, 0, to, &token, 0, from, tag, c->ctx_coll, NULL,
	                       &in_flight);
}

/* Dissemination barrier: in round k every rank signals rank + 2^k and
 * waits for rank - 2^k (mod P). After ceil(log2 P) rounds every rank has
 * heard, directly or transitively, from every other one, whatever P is.
 * The round number is part of the tag so a message can only satisfy its
 * own round; successive barriers reuse the tags safely because messages
 * between one pair of ranks on one (tag, context) are matched in order.
 *
 * On an inter-communicator: a barrier in each group, its leader's signal
 * to the other group's leader, and a second barrier in each group; nobody
 * leaves before every process of both groups has entered. */
int cm_mpi_barrier(struct cm_mpi_comm *c)
{
	if (c->remote) {
		int rc = cm_mpi_barrier(c->local);
		if (!rc && c->local->rank == 0)
			rc = signal_pair(c, 0, 0, CM_COLL_TAG_BARRIER);
		return rc ? rc : cm_mpi_barrier(c->local);
	}
	int round = 0;
	for (int dist = 1; dist < c->size; dist <<= 1, round++) {
		int rc =
		    signal_pair(c, (c->rank + dist) % c->size, (c->rank - dist + c->size) % c->size,
		                CM_COLL_TAG_BARRIER + round);
		if (rc)
			return rc;
	}
	return MPI_SUCCESS;
}

int MPI_Barrier(MPI_Comm comm)
{
	CM_MPI_REQUIRE_INIT("MPI_Barrier");
	struct cm_mpi_comm *c = cm_mpi_comm_get(comm);
	if (!c)
		return cm_mpi_raise(NULL, MPI_ERR_COMM, "MPI_Barrier");
	return cm_mpi_raise(c, cm_mpi_barrier(c), "MPI_Barrier");
}
