/* Alltoall, Alltoallv, Alltoallw: pairwise exchange.
 *
 * At step s (1 .. P-1) rank r sends its block for r + s and receives the
 * block of r - s: every block crosses the network once, directly from its
 * sender to its receiver (through one CM under the cm transport), and each
 * rank has one send and one receive per step, so the load on every rank
 * and CM is even. Steps are started in batches of BATCH so that a step's
 * latency overlaps the next ones' without flooding the CMs with the whole
 * exchange at once; short blocks are posted before the receives (see
 * cm_coll_send_first). All three calls run the same code on per-peer blocks
 * (count, type, byte offset). On an inter-communicator the steps go round
 * the larger group, each process exchanging with the other group's. */
#include <stdlib.h>
#include <string.h>

#include "mpi_coll_internal.h"

#define BATCH 8

#define AT(buf, off) CM_COLL_AT(buf, off)

/* sendbuf NULL: MPI_IN_PLACE, the outgoing blocks are rblk's blocks of
 * recvbuf (packed first, since they are overwritten as data arrives). */
static int alltoallw(struct cm_mpi_comm *c, const void *sendbuf, const struct cm_coll_blk *sblk,
                     void *recvbuf, const struct cm_coll_blk *rblk)
{
	struct cm_coll k;
	int P = c->size, r = c->rank, rc = MPI_SUCCESS;
	/* Steps go round M ranks; on an inter-communicator, where step 0 is
	 * a transfer too, M is the larger group and a step whose peer is past
	 * the other group has no transfer that way. */
	int R = cm_mpi_peer_count(c), M = c->remote && R > P ? R : P,
	    first_step = c->remote ? 0 : 1;
	char *packed = NULL;
	size_t *pre = NULL;
	cm_coll_begin(&k, c, CM_COLL_TAG_ALLTOALL);
	if (c->remote) {
		/* nothing of its own to copy: MPI_IN_PLACE is refused */
	} else if (!sendbuf) {
		pre = malloc(((size_t)P + 1) * sizeof *pre);
		if (!pre)
			return MPI_ERR_NO_MEM;
		pre[0] = 0;
		for (int i = 0; i < P; i++)
			pre[i + 1] = pre[i] + rblk[i].count * rblk[i].t->size;
		packed = malloc(pre[P] ? pre[P] : 1);
		if (!packed) {
			free(pre);
			return MPI_ERR_NO_MEM;
		}
		for (int i = 0; i < P; i++)
			if (i != r)
				cm_mpi_pack(rblk[i].t, AT(recvbuf, rblk[i].off), rblk[i].count,
				            packed + pre[i]);
	} else {
		rc = cm_coll_copy(AT(sendbuf, sblk[r].off), sblk[r].count, sblk[r].t,
		                  AT(recvbuf, rblk[r].off), rblk[r].count, rblk[r].t);
	}
	struct cm_mpi_request *reqs[2 * BATCH];
	for (int first = first_step; !rc && first < M; first += BATCH) {
		int n = 0, last = first + BATCH < M ? first + BATCH : M;
		/* short blocks first, then the receives, then the long blocks
		 * (cm_coll_send_first) */
		for (int pass = 0; pass < 3; pass++) {
			for (int s = first; !rc && s < last; s++) {
				int to = (r + s) % M, from = (r - s + M) % M;
				if (pass == 1) {
					if (from < R)
						rc = cm_coll_irecv(&k, AT(recvbuf, rblk[from].off),
						                   rblk[from].count, rblk[from].t,
						                   from, 0, &reqs[n++]);
					continue;
				}
				if (to >= R)
					continue;
				size_t len = packed ? pre[to + 1] - pre[to]
				                    : sblk[to].count * sblk[to].t->size;
				if (cm_coll_send_first(len) != (pass == 0))
					continue;
				else if (packed)
					rc = cm_coll_isend_bytes(&k, packed + pre[to], len, to, 0,
					                         &reqs[n++]);
				else
					rc = cm_coll_isend(&k, AT(sendbuf, sblk[to].off),
					                   sblk[to].count, sblk[to].t, to, 0,
					                   &reqs[n++]);
			}
		}
		if (rc)
			cm_coll_abandon(&k, reqs, n);
		else
			rc = cm_coll_waitall(&k, reqs, n);
	}
	cm_coll_free(&k, packed);
	free(pre);
	return rc;
}

/* Bruck's alltoall, for MPI_Alltoall's equal blocks of b bytes: in a
 * packed buffer, position i holds the block for rank r + i. At the step of
 * distance d = 1, 2, 4, ... every block whose position has bit d set moves
 * d ranks on (one message to r + d with all of them, one from r - d), so
 * after ceil(log2 P) steps position i holds the block rank r - i sent to
 * r. Each rank sends ceil(log2 P) messages instead of P - 1, each block
 * travelling up to log2 P times: fewer, larger messages for short blocks,
 * where the count of messages (through a CM: three frames each) is the
 * cost. sendbuf NULL: MPI_IN_PLACE. */
static int alltoall_bruck(struct cm_mpi_comm *c, const void *sendbuf,
                          const struct cm_coll_blk *sblk, void *recvbuf,
                          const struct cm_coll_blk *rblk)
{
	struct cm_coll k;
	int P = c->size, r = c->rank, rc = MPI_SUCCESS;
	const struct cm_coll_blk *src = sendbuf ? sblk : rblk;
	const void *from_buf = sendbuf ? sendbuf : recvbuf;
	size_t b = src[0].count * src[0].t->size;
	if (b > rblk[0].count * rblk[0].t->size)
		return MPI_ERR_TRUNCATE;
	cm_coll_begin(&k, c, CM_COLL_TAG_ALLTOALL);
	/* positions, then the outgoing and the incoming blocks of a step */
	char *tmp = malloc(3 * (size_t)P * b + 1);
	if (!tmp)
		return MPI_ERR_NO_MEM;
	char *out = tmp + (size_t)P * b, *in = out + (size_t)P * b;
	for (int i = 0; i < P; i++) {
		const struct cm_coll_blk *s = &src[(r + i) % P];
		cm_mpi_pack(s->t, AT(from_buf, s->off), s->count, tmp + (size_t)i * b);
	}
	for (int dist = 1, step = 1; !rc && dist < P; dist <<= 1, step++) {
		size_t n = 0;
		for (int i = 1; i < P; i++)
			if (i & dist)
				memcpy(out + n++ * b, tmp + (size_t)i * b, b);
		struct cm_mpi_request *reqs[2] = {NULL, NULL};
		int send_first = cm_coll_send_first(n * b);
		if (send_first)
			rc = cm_coll_isend_bytes(&k, out, n * b, (r + dist) % P, step, &reqs[1]);
		if (!rc)
			rc = cm_coll_irecv_bytes(&k, in, n * b, (r - dist + P) % P, step, &reqs[0]);
		if (!rc && !send_first)
			rc = cm_coll_isend_bytes(&k, out, n * b, (r + dist) % P, step, &reqs[1]);
		if (rc) {
			cm_coll_abandon(&k, reqs, 2);
			break;
		}
		rc = cm_coll_waitall(&k, reqs, 2);
		n = 0;
		for (int i = 1; !rc && i < P; i++)
			if (i & dist)
				memcpy(tmp + (size_t)i * b, in + n++ * b, b);
	}
	for (int i = 0; !rc && i < P; i++) {
		const struct cm_coll_blk *d = &rblk[(r - i + P) % P];
		cm_mpi_unpack(d->t, tmp + (size_t)i * b, b, AT(recvbuf, d->off));
	}
	cm_coll_free(&k, tmp);
	return rc;
}

/* ---- argument checks and the MPI calls ---- */

/* One side of a call: per-peer counts, displacements (in extents of the
 * type, or in bytes when bytes is set) and types (types NULL: type for
 * all). counts NULL: count for all, at rank * count. Fills blk. */
static int fill_side(const struct cm_mpi_comm *c, const void *buf, const int *counts,
                     const int *displs, int count, MPI_Datatype type, const MPI_Datatype *types,
                     int vector, int bytes, struct cm_coll_blk *blk)
{
	if (buf == MPI_IN_PLACE)
		return MPI_ERR_BUFFER;
	if (vector && (!counts || !displs || (bytes && !types)))
		return MPI_ERR_ARG;
	for (int i = 0; i < cm_mpi_peer_count(c); i++) {
		const struct cm_mpi_datatype *t = cm_coll_type(types ? types[i] : type);
		int n = vector ? counts[i] : count;
		if (!t)
			return MPI_ERR_TYPE;
		if (n < 0)
			return MPI_ERR_COUNT;
		if (!cm_coll_buf_ok(buf, (size_t)n, t))
			return MPI_ERR_BUFFER;
		int rc = cm_coll_check_bytes((size_t)n, t);
		if (rc)
			return rc;
		blk[i].t = t;
		blk[i].count = (size_t)n;
		if (bytes)
			blk[i].off = (ptrdiff_t)displs[i];
		else
			blk[i].off = cm_coll_offset(t, vector ? displs[i] : (long long)i * count);
	}
	return MPI_SUCCESS;
}

enum a2a_kind { A2A_PLAIN, A2A_V, A2A_W };

struct a2a_side {
	const void *buf;
	const int *counts;
	const int *displs;
	int count;
	MPI_Datatype type;
	const MPI_Datatype *types;
};

static int alltoall_call(struct a2a_side snd, struct a2a_side rcv, MPI_Comm comm,
                         enum a2a_kind kind, const char *func)
{
	CM_MPI_REQUIRE_INIT(func);
	struct cm_mpi_comm *c = cm_mpi_comm_get(comm);
	if (!c)
		return cm_mpi_raise(NULL, MPI_ERR_COMM, func);
	int P = cm_mpi_peer_count(c), vector = kind != A2A_PLAIN, bytes = kind == A2A_W;
	struct cm_coll_blk *blk = malloc(2 * (size_t)P * sizeof *blk);
	if (!blk)
		return cm_mpi_raise(c, MPI_ERR_NO_MEM, func);
	struct cm_coll_blk *sblk = blk, *rblk = blk + P;
	int in_place = snd.buf == MPI_IN_PLACE;
	int rc = in_place && c->remote ? MPI_ERR_BUFFER : MPI_SUCCESS;
	if (!rc && !in_place)
		rc = fill_side(c, snd.buf, snd.counts, snd.displs, snd.count, snd.type, snd.types,
		               vector, bytes, sblk);
	if (!rc)
		rc = fill_side(c, rcv.buf, rcv.counts, rcv.displs, rcv.count, rcv.type, rcv.types,
		               vector, bytes, rblk);
	if (!rc && kind == A2A_PLAIN && !c->remote &&
	    cm_coll_alltoall_bruck(c, rblk[0].count * rblk[0].t->size))
		rc = alltoall_bruck(c, in_place ? NULL : snd.buf, sblk, (void *)rcv.buf, rblk);
	else if (!rc)
		rc = alltoallw(c, in_place ? NULL : snd.buf, sblk, (void *)rcv.buf, rblk);
	free(blk);
	return cm_mpi_raise(c, rc, func);
}

int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                 int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
	struct a2a_side snd = {sendbuf, NULL, NULL, sendcount, sendtype, NULL};
	struct a2a_side rcv = {recvbuf, NULL, NULL, recvcount, recvtype, NULL};
	return alltoall_call(snd, rcv, comm, A2A_PLAIN, "MPI_Alltoall");
}

int MPI_Alltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[],
                  MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int rdispls[],
                  MPI_Datatype recvtype, MPI_Comm comm)
{
	struct a2a_side snd = {sendbuf, sendcounts, sdispls, 0, sendtype, NULL};
	struct a2a_side rcv = {recvbuf, recvcounts, rdispls, 0, recvtype, NULL};
	return alltoall_call(snd, rcv, comm, A2A_V, "MPI_Alltoallv");
}

int MPI_Alltoallw(const void *sendbuf, const int sendcounts[], const int sdispls[],
                  const MPI_Datatype sendtypes[], void *recvbuf, const int recvcounts[],
                  const int rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm)
{
	struct a2a_side snd = {sendbuf, sendcounts, sdispls, 0, MPI_DATATYPE_NULL, sendtypes};
	struct a2a_side rcv = {recvbuf, recvcounts, rdispls, 0, MPI_DATATYPE_NULL, recvtypes};
	return alltoall_call(snd, rcv, comm, A2A_W, "MPI_Alltoallw");
}
