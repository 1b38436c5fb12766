/* MPI_Bcast: the root sending to all for short messages on 3 ranks, a
 * binomial tree for short messages, a segmented pipeline along a chain for
 * long ones (the cost model in mpi_coll_model.c picks); on an
 * inter-communicator, through the receiving group's leader. */
#include <stdlib.h>

#include "mpi_coll_internal.h"

/* Binomial tree rooted at root, on ranks relative to it: a rank receives
 * from the rank that differs in its lowest set bit, then sends to the
 * ranks below that bit, largest subtree first. ceil(log2 P) rounds, each
 * byte crosses the network P - 1 times in all. */
static int bcast_binomial(struct cm_coll *k, void *buf, size_t count,
                          const struct cm_mpi_datatype *t, int root)
{
	int P = k->c->size, rank = k->c->rank;
	int vr = (rank - root + P) % P;
	int mask = 1;
	for (; mask < P; mask <<= 1) {
		if (vr & mask) {
			int rc = cm_coll_recv(k, buf, count, t, (rank - mask + P) % P, 0);
			if (rc)
				return rc;
			break;
		}
	}
	struct cm_mpi_request *reqs[32]; /* one per bit of a rank */
	int n = 0;
	for (mask >>= 1; mask > 0; mask >>= 1) {
		if (vr + mask >= P)
			continue;
		int rc = cm_coll_isend(k, buf, count, t, (rank + mask) % P, 0, &reqs[n]);
		if (rc) {
			cm_coll_abandon(k, reqs, n);
			return rc;
		}
		n++;
	}
	return cm_coll_waitall(k, reqs, n);
}

/* Flat: the root sends to every rank at once. One hop on the critical
 * path instead of ceil(log2 P), at P - 1 sends by the root: the short
 * broadcasts of 3 ranks, where the tree's root sends as many. */
static int bcast_flat(struct cm_coll *k, void *buf, size_t count, const struct cm_mpi_datatype *t,
                      int root)
{
	int P = k->c->size, rank = k->c->rank;
	if (rank != root)
		return cm_coll_recv(k, buf, count, t, root, 0);
	struct cm_mpi_request **reqs = calloc((size_t)P, sizeof *reqs);
	if (!reqs)
		return MPI_ERR_NO_MEM;
	int rc = MPI_SUCCESS;
	for (int s = 1; !rc && s < P; s++)
		rc = cm_coll_isend(k, buf, count, t, (root + s) % P, 0, &reqs[s]);
	if (rc)
		cm_coll_abandon(k, reqs, P);
	else
		rc = cm_coll_waitall(k, reqs, P);
	free(reqs);
	return rc;
}

/* Segmented chain (pipeline) over the ranks root, root+1, ... : each rank
 * forwards segment i to its successor as soon as it has it, while the next
 * segments arrive. Every byte crosses the network P - 1 times, as in the
 * tree, but the root sends the message once and the stages overlap, so the
 * time approaches that of one transfer for long messages. At most WINDOW
 * receives and WINDOW sends are in flight per rank. */
#define WINDOW 4

static int bcast_chain(struct cm_coll *k, char *data, size_t len, int root)
{
	int P = k->c->size, rank = k->c->rank;
	int vr = (rank - root + P) % P;
	int prev = (rank - 1 + P) % P, next = (rank + 1) % P;
	int has_prev = vr > 0, has_next = vr < P - 1;
	size_t nseg = (len + CM_COLL_SEGMENT - 1) / CM_COLL_SEGMENT;
	struct cm_mpi_request *rreq[WINDOW] = {0}, *sreq[WINDOW] = {0};
	int rc = MPI_SUCCESS;

#define SEG_PTR(i) (data + (i)*CM_COLL_SEGMENT)
#define SEG_LEN(i) ((i) + 1 < nseg ? CM_COLL_SEGMENT : len - (i)*CM_COLL_SEGMENT)
	for (size_t i = 0; has_prev && i < nseg && i < WINDOW; i++) {
		rc = cm_coll_irecv_bytes(k, SEG_PTR(i), SEG_LEN(i), prev, 0, &rreq[i]);
		if (rc)
			goto fail;
	}
	for (size_t i = 0; i < nseg; i++) {
		size_t slot = i % WINDOW;
		if (has_prev) {
			rc = cm_coll_waitall(k, &rreq[slot], 1);
			if (rc)
				goto fail;
			if (i + WINDOW < nseg) {
				rc = cm_coll_irecv_bytes(k, SEG_PTR(i + WINDOW),
				                         SEG_LEN(i + WINDOW), prev, 0, &rreq[slot]);
				if (rc)
					goto fail;
			}
		}
		if (has_next) {
			rc = cm_coll_waitall(k, &sreq[slot], 1);
			if (!rc)
				rc = cm_coll_isend_bytes(k, SEG_PTR(i), SEG_LEN(i), next, 0,
				                         &sreq[slot]);
			if (rc)
				goto fail;
		}
	}
#undef SEG_PTR
#undef SEG_LEN
	return cm_coll_waitall(k, sreq, WINDOW);
fail:
	cm_coll_abandon(k, rreq, WINDOW);
	cm_coll_abandon(k, sreq, WINDOW);
	return rc;
}

int cm_coll_bcast(struct cm_mpi_comm *c, void *buf, size_t count, const struct cm_mpi_datatype *t,
                  int root)
{
	struct cm_coll k;
	size_t len = count * t->size;
	if (c->size == 1 || len == 0)
		return MPI_SUCCESS;
	cm_coll_begin(&k, c, CM_COLL_TAG_BCAST);
	enum cm_bcast_alg alg = cm_coll_bcast_alg(c, len);
	if (alg == CM_BCAST_BINOMIAL)
		return bcast_binomial(&k, buf, count, t, root);
	if (alg == CM_BCAST_FLAT)
		return bcast_flat(&k, buf, count, t, root);
	if (t->contiguous)
		return bcast_chain(&k, CM_COLL_AT(buf, t->lb), len, root);
	char *packed;
	int rc;
	if (c->rank == root) {
		rc = cm_coll_pack_new(t, buf, count, &packed);
	} else {
		packed = malloc(len);
		rc = packed ? MPI_SUCCESS : MPI_ERR_NO_MEM;
	}
	if (rc)
		return rc;
	rc = bcast_chain(&k, packed, len, root);
	if (!rc && c->rank != root)
		cm_mpi_unpack(t, packed, len, buf);
	cm_coll_free(&k, packed);
	return rc;
}

/* On an inter-communicator: the root sends to the other group's leader,
 * which broadcasts over its group. */
static int bcast_inter(struct cm_mpi_comm *c, void *buf, size_t count,
                       const struct cm_mpi_datatype *t, int root)
{
	struct cm_coll k;
	cm_coll_begin(&k, c, CM_COLL_TAG_BCAST);
	if (root == MPI_ROOT)
		return cm_coll_send(&k, buf, count, t, 0, 0);
	int rc = c->local->rank == 0 ? cm_coll_recv(&k, buf, count, t, root, 0) : MPI_SUCCESS;
	return rc ? rc : cm_coll_bcast(c->local, buf, count, t, 0);
}

int MPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm)
{
	const struct cm_mpi_datatype *t;
	CM_MPI_REQUIRE_INIT("MPI_Bcast");
	struct cm_mpi_comm *c = cm_mpi_comm_get(comm);
	if (!c)
		return cm_mpi_raise(NULL, MPI_ERR_COMM, "MPI_Bcast");
	int rc = cm_coll_check_root(c, root);
	if (!rc && root == MPI_PROC_NULL)
		return MPI_SUCCESS; /* inter-communicator: the root's group, not the root */
	if (!rc)
		rc = cm_coll_check_buf(buffer, count, datatype, &t);
	if (!rc && buffer == MPI_IN_PLACE)
		rc = MPI_ERR_BUFFER;
	if (!rc && c->remote)
		rc = bcast_inter(c, buffer, (size_t)count, t, root);
	else if (!rc)
		rc = cm_coll_bcast(c, buffer, (size_t)count, t, root);
	return cm_mpi_raise(c, rc, "MPI_Bcast");
}
