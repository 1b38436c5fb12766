/* Gather, Gatherv, Scatter, Scatterv, Allgather, Allgatherv.
 *
 * Gather and scatter are flat: the root exchanges one message with every
 * other rank, all in flight at once. Through a relay every byte crosses a
 * CM: a tree would forward the blocks of a subtree several times, the flat
 * scheme moves each block once. Allgather: Bruck (ceil(log2 P) rounds, any
 * P) or a ring (P - 1 rounds with neighbours only, no extra copy), both
 * moving each block P - 1 times, the least possible; the cost model picks.
 * On an inter-communicator the root exchanges with every process of the
 * other group, and in Allgather every process with every process of the
 * other group. */
#include <stdlib.h>
#include <string.h>

#include "mpi_coll_internal.h"

#define AT(buf, off) CM_COLL_AT(buf, off)

/* ---- the algorithms (arguments validated) ---- */

/* sendbuf NULL: MPI_IN_PLACE at the root. rblk: root only, one block per
 * process the root addresses (on an inter-communicator, the other group;
 * the root, then, has no block of its own). root: MPI_ROOT at the root of
 * an inter-communicator; MPI_PROC_NULL does not reach here. */
static int gatherv(struct cm_mpi_comm *c, const void *sendbuf, size_t scount,
                   const struct cm_mpi_datatype *stype, void *recvbuf,
                   const struct cm_coll_blk *rblk, int root)
{
	struct cm_coll k;
	int P = cm_mpi_peer_count(c), self = c->remote ? -1 : root, rc = MPI_SUCCESS;
	cm_coll_begin(&k, c, CM_COLL_TAG_GATHER);
	if (!cm_coll_is_root(c, root))
		return cm_coll_send(&k, sendbuf, scount, stype, root, 0);
	struct cm_mpi_request **reqs = calloc((size_t)P, sizeof *reqs);
	if (!reqs)
		return MPI_ERR_NO_MEM;
	for (int i = 0; !rc && i < P; i++)
		if (i != self)
			rc = cm_coll_irecv(&k, AT(recvbuf, rblk[i].off), rblk[i].count, rblk[i].t,
			                   i, 0, &reqs[i]);
	if (!rc && sendbuf && self >= 0)
		rc = cm_coll_copy(sendbuf, scount, stype, AT(recvbuf, rblk[self].off),
		                  rblk[self].count, rblk[self].t);
	if (rc)
		cm_coll_abandon(&k, reqs, P);
	else
		rc = cm_coll_waitall(&k, reqs, P);
	free(reqs);
	return rc;
}

int cm_coll_scatterv(struct cm_mpi_comm *c, const void *sendbuf, const struct cm_coll_blk *sblk,
                     void *recvbuf, size_t rcount, const struct cm_mpi_datatype *rtype, int root,
                     int tag)
{
	struct cm_coll k;
	int P = cm_mpi_peer_count(c), self = c->remote ? -1 : root, rc = MPI_SUCCESS;
	cm_coll_begin(&k, c, tag);
	if (!cm_coll_is_root(c, root))
		return cm_coll_recv(&k, recvbuf, rcount, rtype, root, 0);
	struct cm_mpi_request **reqs = calloc((size_t)P, sizeof *reqs);
	if (!reqs)
		return MPI_ERR_NO_MEM;
	for (int i = 0; !rc && i < P; i++)
		if (i != self)
			rc = cm_coll_isend(&k, AT(sendbuf, sblk[i].off), sblk[i].count, sblk[i].t,
			                   i, 0, &reqs[i]);
	if (!rc && recvbuf && self >= 0)
		rc = cm_coll_copy(AT(sendbuf, sblk[self].off), sblk[self].count, sblk[self].t,
		                  recvbuf, rcount, rtype);
	if (rc)
		cm_coll_abandon(&k, reqs, P);
	else
		rc = cm_coll_waitall(&k, reqs, P);
	free(reqs);
	return rc;
}

/* Ring: at step s, pass block r - s to r + 1 and take block r - s - 1
 * from r - 1, straight between the user's buffers. */
static int allgather_ring(struct cm_coll *k, void *recvbuf, const struct cm_coll_blk *rblk)
{
	int P = k->c->size, r = k->c->rank;
	int next = (r + 1) % P, prev = (r - 1 + P) % P;
	for (int s = 0; s < P - 1; s++) {
		const struct cm_coll_blk *out = &rblk[(r - s + P) % P];
		const struct cm_coll_blk *in = &rblk[(r - s - 1 + P) % P];
		int rc = cm_coll_sendrecv(k, AT(recvbuf, out->off), out->count, out->t, next,
		                          AT(recvbuf, in->off), in->count, in->t, prev, 0);
		if (rc)
			return rc;
	}
	return MPI_SUCCESS;
}

/* Bruck: in a packed buffer, position i holds block r + i. At the round
 * of distance d a rank has blocks r .. r+d-1; it sends the first
 * min(d, P-d) of them to r - d and appends the same number from r + d.
 * The final unpacking into the user's layout undoes the rotation (the
 * rank's own block is in place already). */
static int allgather_bruck(struct cm_coll *k, const void *own, size_t own_len, void *recvbuf,
                           const struct cm_coll_blk *rblk)
{
	int P = k->c->size, r = k->c->rank, rc = MPI_SUCCESS;
	size_t *pre = malloc(((size_t)P + 1) * sizeof *pre);
	if (!pre)
		return MPI_ERR_NO_MEM;
	pre[0] = 0;
	for (int i = 0; i < P; i++) {
		const struct cm_coll_blk *b = &rblk[(r + i) % P];
		pre[i + 1] = pre[i] + b->count * b->t->size;
	}
	char *tmp = malloc(pre[P] ? pre[P] : 1);
	if (!tmp) {
		free(pre);
		return MPI_ERR_NO_MEM;
	}
	memcpy(tmp, own, own_len);
	for (int dist = 1; dist < P; dist <<= 1) {
		int cnt = dist < P - dist ? dist : P - dist;
		struct cm_mpi_request *reqs[2] = {NULL, NULL};
		int send_first = cm_coll_send_first(pre[cnt]);
		if (send_first)
			rc = cm_coll_isend_bytes(k, tmp, pre[cnt], (r - dist + P) % P, 0, &reqs[1]);
		if (!rc)
			rc = cm_coll_irecv_bytes(k, tmp + pre[dist], pre[dist + cnt] - pre[dist],
			                         (r + dist) % P, 0, &reqs[0]);
		if (!rc && !send_first)
			rc = cm_coll_isend_bytes(k, tmp, pre[cnt], (r - dist + P) % P, 0, &reqs[1]);
		if (rc)
			cm_coll_abandon(k, reqs, 2);
		else
			rc = cm_coll_waitall(k, reqs, 2);
		if (rc)
			break;
	}
	for (int i = 0; !rc && i < P; i++) {
		int b = (r + i) % P;
		if (b != r)
			cm_mpi_unpack(rblk[b].t, tmp + pre[i], pre[i + 1] - pre[i],
			              AT(recvbuf, rblk[b].off));
	}
	cm_coll_free(k, tmp);
	free(pre);
	return rc;
}

/* sendbuf NULL: MPI_IN_PLACE (the rank's block is already in recvbuf). */
static int allgatherv(struct cm_mpi_comm *c, const void *sendbuf, size_t scount,
                      const struct cm_mpi_datatype *stype, void *recvbuf,
                      const struct cm_coll_blk *rblk)
{
	struct cm_coll k;
	int P = c->size, r = c->rank, rc = MPI_SUCCESS;
	cm_coll_begin(&k, c, CM_COLL_TAG_ALLGATHER);
	const struct cm_coll_blk *mine = &rblk[r];
	if (sendbuf)
		rc = cm_coll_copy(sendbuf, scount, stype, AT(recvbuf, mine->off), mine->count,
		                  mine->t);
	if (rc || P == 1)
		return rc;
	size_t total = 0;
	for (int i = 0; i < P; i++)
		total += rblk[i].count * rblk[i].t->size;
	/* Bruck's messages grow to half the total: past the message limit
	 * only the ring (one block per message) will do. */
	if (total > CM_DEFAULT_MAX_PAYLOAD || cm_coll_allgather_alg(c, total) == CM_ALLGATHER_RING)
		return allgather_ring(&k, recvbuf, rblk);
	char *own;
	rc = cm_coll_pack_new(mine->t, AT(recvbuf, mine->off), mine->count, &own);
	if (rc)
		return rc;
	rc = allgather_bruck(&k, own, mine->count * mine->t->size, recvbuf, rblk);
	free(own);
	return rc;
}

/* On an inter-communicator: every process sends its block to every
 * process of the other group and receives theirs, all at once, so each
 * block crosses the network once per receiver and no process relays. */
static int allgather_inter(struct cm_mpi_comm *c, const void *sendbuf, size_t scount,
                           const struct cm_mpi_datatype *stype, void *recvbuf,
                           const struct cm_coll_blk *rblk)
{
	struct cm_coll k;
	int R = c->remote->size, rc = MPI_SUCCESS;
	cm_coll_begin(&k, c, CM_COLL_TAG_ALLGATHER);
	struct cm_mpi_request **reqs = calloc(2 * (size_t)R, sizeof *reqs);
	if (!reqs)
		return MPI_ERR_NO_MEM;
	for (int i = 0; !rc && i < R; i++) {
		rc = cm_coll_irecv(&k, AT(recvbuf, rblk[i].off), rblk[i].count, rblk[i].t, i, 0,
		                   &reqs[2 * i]);
		if (!rc)
			rc = cm_coll_isend(&k, sendbuf, scount, stype, i, 0, &reqs[2 * i + 1]);
	}
	if (rc)
		cm_coll_abandon(&k, reqs, 2 * R);
	else
		rc = cm_coll_waitall(&k, reqs, 2 * R);
	free(reqs);
	return rc;
}

/* ---- argument checks ---- */

/* The send side of a call (where it is significant). in_place_ok: this
 * rank may pass MPI_IN_PLACE. */
static int check_send_side(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                           int in_place_ok, const struct cm_mpi_datatype **st)
{
	*st = NULL;
	if (sendbuf == MPI_IN_PLACE)
		return in_place_ok ? MPI_SUCCESS : MPI_ERR_BUFFER;
	return cm_coll_check_buf(sendbuf, sendcount, sendtype, st);
}

static int check_recv_side(const void *recvbuf, int recvcount, MPI_Datatype recvtype,
                           const struct cm_mpi_datatype **rt)
{
	if (recvbuf == MPI_IN_PLACE)
		return MPI_ERR_BUFFER;
	return cm_coll_check_buf(recvbuf, recvcount, recvtype, rt);
}

/* The v-side: counts and displacements for every process c addresses
 * (the other group of an inter-communicator). */
static int check_v_side(const struct cm_mpi_comm *c, const void *buf, const int *counts,
                        const int *displs, MPI_Datatype type, const struct cm_mpi_datatype **t)
{
	if (buf == MPI_IN_PLACE)
		return MPI_ERR_BUFFER;
	*t = cm_coll_type(type);
	if (!*t)
		return MPI_ERR_TYPE;
	int n = cm_mpi_peer_count(c);
	int rc = cm_coll_check_counts(n, counts, *t);
	if (!rc)
		rc = cm_coll_check_vbuf(n, counts, buf, *t);
	if (!rc && !displs)
		rc = MPI_ERR_ARG;
	return rc;
}

/* Blocks of a v-call, or of a plain call (counts NULL: count each, at
 * rank * count). NULL if out of memory. */
static struct cm_coll_blk *make_blocks(int P, const struct cm_mpi_datatype *t, const int *counts,
                                       const int *displs, int count)
{
	struct cm_coll_blk *blk = malloc((size_t)P * sizeof *blk);
	if (!blk)
		return NULL;
	for (int i = 0; i < P; i++) {
		blk[i].t = t;
		blk[i].count = (size_t)(counts ? counts[i] : count);
		blk[i].off = cm_coll_offset(t, counts ? displs[i] : (long long)i * count);
	}
	return blk;
}

/* ---- Gather, Gatherv ---- */

static int gather_call(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                       const int *recvcounts, const int *displs, int recvcount,
                       MPI_Datatype recvtype, int root, MPI_Comm comm, int vector, const char *func)
{
	const struct cm_mpi_datatype *st = NULL, *rt = NULL;
	struct cm_coll_blk *rblk = NULL;
	CM_MPI_REQUIRE_INIT(func);
	struct cm_mpi_comm *c = cm_mpi_comm_get(comm);
	if (!c)
		return cm_mpi_raise(NULL, MPI_ERR_COMM, func);
	int rc = cm_coll_check_root(c, root);
	if (!rc && root == MPI_PROC_NULL)
		return MPI_SUCCESS; /* inter-communicator: the root's group, not the root */
	int is_root = !rc && cm_coll_is_root(c, root);
	/* The root of an inter-communicator only receives. */
	if (!rc && !(c->remote && is_root))
		rc = check_send_side(sendbuf, sendcount, sendtype, is_root && !c->remote, &st);
	if (!rc && is_root && vector)
		rc = check_v_side(c, recvbuf, recvcounts, displs, recvtype, &rt);
	else if (!rc && is_root)
		rc = check_recv_side(recvbuf, recvcount, recvtype, &rt);
	if (!rc && is_root) {
		rblk = make_blocks(cm_mpi_peer_count(c), rt, vector ? recvcounts : NULL, displs,
		                   recvcount);
		if (!rblk)
			rc = MPI_ERR_NO_MEM;
	}
	if (!rc)
		rc = gatherv(c, sendbuf == MPI_IN_PLACE ? NULL : sendbuf, (size_t)sendcount, st,
		             recvbuf, rblk, root);
	free(rblk);
	return cm_mpi_raise(c, rc, func);
}

int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
               int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
	return gather_call(sendbuf, sendcount, sendtype, recvbuf, NULL, NULL, recvcount, recvtype,
	                   root, comm, 0, "MPI_Gather");
}

int MPI_Gatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root,
                MPI_Comm comm)
{
	return gather_call(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, 0, recvtype,
	                   root, comm, 1, "MPI_Gatherv");
}

/* ---- Scatter, Scatterv ---- */

static int scatter_call(const void *sendbuf, const int *sendcounts, const int *displs,
                        int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                        MPI_Datatype recvtype, int root, MPI_Comm comm, int vector,
                        const char *func)
{
	const struct cm_mpi_datatype *st = NULL, *rt = NULL;
	struct cm_coll_blk *sblk = NULL;
	CM_MPI_REQUIRE_INIT(func);
	struct cm_mpi_comm *c = cm_mpi_comm_get(comm);
	if (!c)
		return cm_mpi_raise(NULL, MPI_ERR_COMM, func);
	int rc = cm_coll_check_root(c, root);
	if (!rc && root == MPI_PROC_NULL)
		return MPI_SUCCESS; /* inter-communicator: the root's group, not the root */
	int is_root = !rc && cm_coll_is_root(c, root);
	/* The root of an inter-communicator only sends. */
	int receives = !(c->remote && is_root);
	int in_place = is_root && !c->remote && recvbuf == MPI_IN_PLACE;
	if (!rc && is_root && vector) {
		rc = check_v_side(c, sendbuf, sendcounts, displs, sendtype, &st);
	} else if (!rc && is_root) {
		rc = sendbuf == MPI_IN_PLACE ? MPI_ERR_BUFFER
		                             : cm_coll_check_buf(sendbuf, sendcount, sendtype, &st);
	}
	if (!rc && receives && !in_place)
		rc = check_recv_side(recvbuf, recvcount, recvtype, &rt);
	if (!rc && is_root) {
		sblk = make_blocks(cm_mpi_peer_count(c), st, vector ? sendcounts : NULL, displs,
		                   sendcount);
		if (!sblk)
			rc = MPI_ERR_NO_MEM;
	}
	if (!rc)
		rc = cm_coll_scatterv(c, sendbuf, sblk, in_place ? NULL : recvbuf,
		                      (size_t)recvcount, rt, root, CM_COLL_TAG_SCATTER);
	free(sblk);
	return cm_mpi_raise(c, rc, func);
}

int MPI_Scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
	return scatter_call(sendbuf, NULL, NULL, sendcount, sendtype, recvbuf, recvcount, recvtype,
	                    root, comm, 0, "MPI_Scatter");
}

int MPI_Scatterv(const void *sendbuf, const int sendcounts[], const int displs[],
                 MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype,
                 int root, MPI_Comm comm)
{
	return scatter_call(sendbuf, sendcounts, displs, 0, sendtype, recvbuf, recvcount, recvtype,
	                    root, comm, 1, "MPI_Scatterv");
}

/* ---- Allgather, Allgatherv ---- */

static int allgather_call(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                          const int *recvcounts, const int *displs, int recvcount,
                          MPI_Datatype recvtype, MPI_Comm comm, int vector, const char *func)
{
	const struct cm_mpi_datatype *st = NULL, *rt = NULL;
	struct cm_coll_blk *rblk = NULL;
	CM_MPI_REQUIRE_INIT(func);
	struct cm_mpi_comm *c = cm_mpi_comm_get(comm);
	if (!c)
		return cm_mpi_raise(NULL, MPI_ERR_COMM, func);
	int rc = check_send_side(sendbuf, sendcount, sendtype, !c->remote, &st);
	if (!rc && vector)
		rc = check_v_side(c, recvbuf, recvcounts, displs, recvtype, &rt);
	else if (!rc)
		rc = check_recv_side(recvbuf, recvcount, recvtype, &rt);
	if (!rc) {
		rblk = make_blocks(cm_mpi_peer_count(c), rt, vector ? recvcounts : NULL, displs,
		                   recvcount);
		if (!rblk)
			rc = MPI_ERR_NO_MEM;
	}
	if (!rc && c->remote)
		rc = allgather_inter(c, sendbuf, (size_t)sendcount, st, recvbuf, rblk);
	else if (!rc)
		rc = allgatherv(c, sendbuf == MPI_IN_PLACE ? NULL : sendbuf, (size_t)sendcount, st,
		                recvbuf, rblk);
	free(rblk);
	return cm_mpi_raise(c, rc, func);
}

int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
	return allgather_call(sendbuf, sendcount, sendtype, recvbuf, NULL, NULL, recvcount,
	                      recvtype, comm, 0, "MPI_Allgather");
}

int MPI_Allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                   const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm)
{
	return allgather_call(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, 0,
	                      recvtype, comm, 1, "MPI_Allgatherv");
}
