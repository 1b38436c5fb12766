/* Prefix reductions: Scan (inclusive) and Exscan (exclusive).
 *
 * Two schemes, picked by the cost model: recursive doubling (ceil(log2 P)
 * rounds, but every rank sends the whole vector each round) and a chain
 * (rank r receives the prefix of 0..r-1 from r - 1, folds its own value in
 * and passes it on: P - 1 rounds, the least traffic through the relays).
 * Both combine lower ranks on the left, so non-commutative ops are right. */
#include <stdlib.h>

#include "mpi_coll_internal.h"

/* The scheme of MPICH's scan: partial is the reduction of the block of
 * ranks this rank has heard of so far (aligned on a power of two); at each
 * step it is exchanged with the partner block. Exclusive: the first lower
 * block sets the result instead of folding into it. */
static int scan_doubling(struct cm_coll *k, const void *input, void *recvbuf, size_t count,
                         const struct cm_mpi_datatype *t, const struct cm_mpi_op *op, int exclusive)
{
	int P = k->c->size, rank = k->c->rank, rc;
	char *bufs[2];
	void *blocks[2] = {cm_coll_alloc_typed(t, count, &bufs[0]),
	                   cm_coll_alloc_typed(t, count, &bufs[1])};
	int partial = 0, have_result = !exclusive;
	if (!blocks[0] || !blocks[1]) {
		rc = MPI_ERR_NO_MEM;
		goto out;
	}
	/* The input is copied before recvbuf is written: it may be recvbuf. */
	rc = cm_coll_copy_typed(t, count, input, bufs[partial]);
	if (!rc && !exclusive)
		rc = cm_coll_copy_typed(t, count, input, recvbuf);
	for (int mask = 1; !rc && mask < P; mask <<= 1) {
		int dst = rank ^ mask;
		if (dst >= P)
			continue;
		char *in = bufs[!partial];
		rc = cm_coll_sendrecv(k, bufs[partial], count, t, dst, in, count, t, dst, 0);
		if (rc)
			break;
		if (rank > dst) {
			/* in: the block just below ours */
			rc = cm_mpi_op_apply(op, t, in, bufs[partial], count);
			if (!rc && have_result)
				rc = cm_mpi_op_apply(op, t, in, recvbuf, count);
			else if (!rc)
				rc = cm_coll_copy_typed(t, count, in, recvbuf);
			have_result = 1;
		} else {
			rc = cm_mpi_op_apply(op, t, bufs[partial], in, count);
			partial = !partial;
		}
	}
out:
	cm_coll_free(k, blocks[0]);
	cm_coll_free(k, blocks[1]);
	return rc;
}

static int scan_chain(struct cm_coll *k, const void *input, void *recvbuf, size_t count,
                      const struct cm_mpi_datatype *t, const struct cm_mpi_op *op, int exclusive)
{
	int P = k->c->size, rank = k->c->rank, rc = MPI_SUCCESS;
	int first = rank == 0, last = rank == P - 1;
	if (!exclusive) {
		/* recvbuf = prefix(0..r-1) op input, passed on. */
		char *prev = NULL;
		void *block = NULL;
		if (!first) {
			block = cm_coll_alloc_typed(t, count, &prev);
			rc = block ? cm_coll_recv(k, prev, count, t, rank - 1, 0) : MPI_ERR_NO_MEM;
		}
		if (!rc)
			rc = cm_coll_copy_typed(t, count, input, recvbuf);
		if (!rc && !first)
			rc = cm_mpi_op_apply(op, t, prev, recvbuf, count);
		if (!rc && !last)
			rc = cm_coll_send(k, recvbuf, count, t, rank + 1, 0);
		cm_coll_free(k, block);
		return rc;
	}
	/* Exclusive: recvbuf = prefix(0..r-1); prefix(0..r) is passed on. */
	if (first)
		return cm_coll_send(k, input, count, t, rank + 1, 0);
	if (last)
		return cm_coll_recv(k, recvbuf, count, t, rank - 1, 0);
	char *prev, *mine;
	void *prev_block = cm_coll_alloc_typed(t, count, &prev);
	void *mine_block = cm_coll_alloc_typed(t, count, &mine);
	rc = prev_block && mine_block ? cm_coll_recv(k, prev, count, t, rank - 1, 0)
	                              : MPI_ERR_NO_MEM;
	if (!rc)
		rc = cm_coll_copy_typed(t, count, input, mine);
	if (!rc)
		rc = cm_mpi_op_apply(op, t, prev, mine, count);
	if (!rc)
		rc = cm_coll_send(k, mine, count, t, rank + 1, 0);
	if (!rc)
		rc = cm_coll_copy_typed(t, count, prev, recvbuf);
	cm_coll_free(k, prev_block);
	cm_coll_free(k, mine_block);
	return rc;
}

static int scan_call(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                     MPI_Op op, MPI_Comm comm, int exclusive, const char *func)
{
	const struct cm_mpi_datatype *t;
	const struct cm_mpi_op *o;
	struct cm_coll k;
	CM_MPI_REQUIRE_INIT(func);
	struct cm_mpi_comm *c = cm_mpi_comm_get(comm);
	if (!c || c->remote) /* a prefix needs one order of all processes */
		return cm_mpi_raise(c, MPI_ERR_COMM, func);
	int rc = cm_coll_check_reduction(sendbuf, recvbuf, count, datatype, op, 1, &t, &o);
	if (rc)
		return cm_mpi_raise(c, rc, func);
	const void *input = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
	size_t n = (size_t)count;
	cm_coll_begin(&k, c, exclusive ? CM_COLL_TAG_EXSCAN : CM_COLL_TAG_SCAN);
	if (c->size == 1 || count == 0)
		rc = exclusive ? MPI_SUCCESS : cm_coll_copy_typed(t, n, input, recvbuf);
	else if (cm_coll_scan_alg(c, n * t->size) == CM_SCAN_CHAIN)
		rc = scan_chain(&k, input, recvbuf, n, t, o, exclusive);
	else
		rc = scan_doubling(&k, input, recvbuf, n, t, o, exclusive);
	return cm_mpi_raise(c, rc, func);
}

int MPI_Scan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
             MPI_Comm comm)
{
	return scan_call(sendbuf, recvbuf, count, datatype, op, comm, 0, "MPI_Scan");
}

int MPI_Exscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
               MPI_Comm comm)
{
	return scan_call(sendbuf, recvbuf, count, datatype, op, comm, 1, "MPI_Exscan");
}
