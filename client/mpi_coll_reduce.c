/* Reductions: Reduce, Allreduce, Reduce_scatter, Reduce_scatter_block,
 * on intra- and inter-communicators.
 *
 * Work buffers hold items in the user's memory layout of the datatype, as
 * user functions expect them. Every combination is written in = in op inout
 * with in the lower ranks' part (tree and doubling schemes), so a
 * non-commutative op is applied in rank order; the ring schemes combine in
 * ring order and are used only for commutative ops. In every scheme each
 * reduced value is computed by one rank (or by two partners from the same
 * operands in the same order) and then copied: every rank gets the same
 * bits. */
#include <stdlib.h>

#include "mpi_coll_internal.h"

/* Blocks of a vector of count items split over P ranks, as even as can
 * be: the first count % P ranks get one more. */
static void even_split(size_t count, int P, size_t *cnt, size_t *off)
{
	size_t base = count / (size_t)P, rem = count % (size_t)P, at = 0;
	for (int i = 0; i < P; i++) {
		cnt[i] = base + ((size_t)i < rem);
		off[i] = at;
		at += cnt[i];
	}
}

#define ITEM(buf, t, i) CM_COLL_AT((buf), cm_coll_offset((t), (long long)(i)))

/* Ring reduce-scatter in place in acc (the whole vector, user layout):
 * afterwards block r of acc holds the reduction of block r over all ranks.
 * Step s: send block r-s-1 to r+1, receive block r-s-2 from r-1 and fold
 * it in. tmp holds the largest block. */
static int ring_reduce_scatter(struct cm_coll *k, char *acc, char *tmp, const size_t *cnt,
                               const size_t *off, const struct cm_mpi_datatype *t,
                               const struct cm_mpi_op *op, int phase)
{
	int P = k->c->size, r = k->c->rank;
	int next = (r + 1) % P, prev = (r - 1 + P) % P;
	for (int s = 0; s < P - 1; s++) {
		int sidx = (r - s - 1 + 2 * P) % P, ridx = (r - s - 2 + 2 * P) % P;
		int rc = cm_coll_sendrecv(k, ITEM(acc, t, off[sidx]), cnt[sidx], t, next, tmp,
		                          cnt[ridx], t, prev, phase);
		if (!rc)
			rc = cm_mpi_op_apply(op, t, tmp, ITEM(acc, t, off[ridx]), cnt[ridx]);
		if (rc)
			return rc;
	}
	return MPI_SUCCESS;
}

/* Ring allgather of the blocks of acc: block r is rank r's. */
static int ring_allgather(struct cm_coll *k, char *acc, const size_t *cnt, const size_t *off,
                          const struct cm_mpi_datatype *t, int phase)
{
	int P = k->c->size, r = k->c->rank;
	int next = (r + 1) % P, prev = (r - 1 + P) % P;
	for (int s = 0; s < P - 1; s++) {
		int sidx = (r - s + P) % P, ridx = (r - s - 1 + P) % P;
		int rc = cm_coll_sendrecv(k, ITEM(acc, t, off[sidx]), cnt[sidx], t, next,
		                          ITEM(acc, t, off[ridx]), cnt[ridx], t, prev, phase);
		if (rc)
			return rc;
	}
	return MPI_SUCCESS;
}

static size_t max_of(const size_t *v, int n)
{
	size_t m = 0;
	for (int i = 0; i < n; i++)
		if (v[i] > m)
			m = v[i];
	return m;
}

/* ---- Recursive halving (Rabenseifner), commutative ops ----
 *
 * Over the largest power of two p2 <= P: the first 2 (P - p2) ranks pair
 * up beforehand (2i sends its vector to 2i + 1, which folds it in) and
 * 2i takes no further part. The p2 remaining ranks ("new ranks" 0 .. p2-1,
 * in rank order) split the vector into p2 blocks. At the step of distance
 * d (p2/2 down to 1) a rank keeps the half of its current range of blocks
 * on its side of bit d, sends the other half to its partner (new rank
 * xor d) and folds the partner's copy of its own half in: after log2 p2
 * steps new rank i holds block i reduced over all ranks, having sent
 * (p2-1)/p2 of the vector in log2 p2 messages. Each block is reduced by
 * one rank only, so whoever receives it afterwards gets the same bits. */
struct halving {
	int p2, rem, newrank; /* newrank -1: folded into rank + 1 */
	size_t *off;          /* p2 + 1 item offsets of the blocks */
};

static int halving_init(struct halving *h, int P, int rank, size_t count)
{
	h->p2 = 1;
	while (h->p2 * 2 <= P)
		h->p2 *= 2;
	h->rem = P - h->p2;
	if (rank < 2 * h->rem)
		h->newrank = rank % 2 ? rank / 2 : -1;
	else
		h->newrank = rank - h->rem;
	h->off = malloc(((size_t)h->p2 + 1) * sizeof *h->off);
	if (!h->off)
		return MPI_ERR_NO_MEM;
	size_t base = count / (size_t)h->p2, extra = count % (size_t)h->p2;
	h->off[0] = 0;
	for (int i = 0; i < h->p2; i++)
		h->off[i + 1] = h->off[i] + base + ((size_t)i < extra);
	return MPI_SUCCESS;
}

static int halving_rank(const struct halving *h, int newrank)
{
	return newrank < h->rem ? newrank * 2 + 1 : newrank + h->rem;
}

/* Items of blocks [a, a + n). */
static size_t halving_span(const struct halving *h, int a, int n)
{
	return h->off[a + n] - h->off[a];
}

/* The fold (phase 0) and the halving steps (phase 1) in acc, which holds
 * this rank's input; tmp holds count items. Afterwards a rank with
 * newrank >= 0 has its block reduced in acc. */
static int halving_reduce_scatter(struct cm_coll *k, const struct halving *h, char *acc, char *tmp,
                                  size_t count, const struct cm_mpi_datatype *t,
                                  const struct cm_mpi_op *op)
{
	int rank = k->c->rank, rc;
	if (h->newrank < 0)
		return cm_coll_send(k, acc, count, t, rank + 1, 0);
	if (rank < 2 * h->rem) {
		rc = cm_coll_recv(k, tmp, count, t, rank - 1, 0);
		if (!rc)
			rc = cm_mpi_op_apply(op, t, tmp, acc, count);
		if (rc)
			return rc;
	}
	int lo = 0;
	for (int d = h->p2 / 2; d > 0; d >>= 1) {
		int keep = h->newrank & d ? lo + d : lo, give = h->newrank & d ? lo : lo + d;
		int peer = halving_rank(h, h->newrank ^ d);
		rc = cm_coll_sendrecv(k, ITEM(acc, t, h->off[give]), halving_span(h, give, d), t,
		                      peer, tmp, halving_span(h, keep, d), t, peer, 1);
		if (!rc)
			rc = cm_mpi_op_apply(op, t, tmp, ITEM(acc, t, h->off[keep]),
			                     halving_span(h, keep, d));
		if (rc)
			return rc;
		lo = keep;
	}
	return MPI_SUCCESS;
}

/* Reduce-scatter by recursive halving, then recursive doubling to gather
 * every block on every new rank (phase 2), then the result to the folded
 * ranks (phase 3): 2 log2 p2 steps, 2 (p2-1)/p2 of the vector sent. */
static int allreduce_halving(struct cm_coll *k, const void *input, void *recvbuf, size_t count,
                             const struct cm_mpi_datatype *t, const struct cm_mpi_op *op)
{
	struct halving h;
	int rank = k->c->rank;
	int rc = halving_init(&h, k->c->size, rank, count);
	if (rc)
		return rc;
	char *tmp;
	void *tmp_block = cm_coll_alloc_typed(t, count, &tmp);
	rc = tmp_block ? cm_coll_copy_typed(t, count, input, recvbuf) : MPI_ERR_NO_MEM;
	if (!rc)
		rc = halving_reduce_scatter(k, &h, recvbuf, tmp, count, t, op);
	for (int d = 1; !rc && h.newrank >= 0 && d < h.p2; d <<= 1) {
		int mine = h.newrank & ~(d - 1), theirs = (h.newrank ^ d) & ~(d - 1);
		int peer = halving_rank(&h, h.newrank ^ d);
		rc = cm_coll_sendrecv(k, ITEM(recvbuf, t, h.off[mine]), halving_span(&h, mine, d),
		                      t, peer, ITEM(recvbuf, t, h.off[theirs]),
		                      halving_span(&h, theirs, d), t, peer, 2);
	}
	if (!rc && h.newrank < 0)
		rc = cm_coll_recv(k, recvbuf, count, t, rank + 1, 3);
	else if (!rc && rank < 2 * h.rem)
		rc = cm_coll_send(k, recvbuf, count, t, rank - 1, 3);
	cm_coll_free(k, tmp_block);
	free(h.off);
	return rc;
}

/* Reduce-scatter by recursive halving, then every block straight to the
 * root (phase 2), which may be a folded rank. */
static int reduce_halving(struct cm_coll *k, const void *input, void *recvbuf, size_t count,
                          const struct cm_mpi_datatype *t, const struct cm_mpi_op *op, int root)
{
	struct halving h;
	int rank = k->c->rank;
	int rc = halving_init(&h, k->c->size, rank, count);
	if (rc)
		return rc;
	char *tmp, *acc = recvbuf;
	void *acc_block = NULL, *tmp_block = cm_coll_alloc_typed(t, count, &tmp);
	if (rank != root)
		acc_block = cm_coll_alloc_typed(t, count, &acc);
	rc = tmp_block && (rank == root || acc_block) ? cm_coll_copy_typed(t, count, input, acc)
	                                              : MPI_ERR_NO_MEM;
	if (!rc)
		rc = halving_reduce_scatter(k, &h, acc, tmp, count, t, op);
	if (!rc && rank != root && h.newrank >= 0) {
		rc = cm_coll_send(k, ITEM(acc, t, h.off[h.newrank]), halving_span(&h, h.newrank, 1),
		                  t, root, 2);
	} else if (!rc && rank == root) {
		struct cm_mpi_request **reqs = calloc((size_t)h.p2, sizeof *reqs);
		rc = reqs ? MPI_SUCCESS : MPI_ERR_NO_MEM;
		for (int i = 0; !rc && i < h.p2; i++)
			if (i != h.newrank)
				rc =
				    cm_coll_irecv(k, ITEM(acc, t, h.off[i]), halving_span(&h, i, 1),
				                  t, halving_rank(&h, i), 2, &reqs[i]);
		if (rc && reqs)
			cm_coll_abandon(k, reqs, h.p2);
		else if (reqs)
			rc = cm_coll_waitall(k, reqs, h.p2);
		free(reqs);
	}
	cm_coll_free(k, acc_block);
	cm_coll_free(k, tmp_block);
	free(h.off);
	return rc;
}

/* ---- Reduce ---- */

/* Binomial tree. A rank receives the partial results of the subtrees
 * above it (ranks vr + 1, vr + 2, vr + 4, ... relative to the tree's root)
 * and folds each in on the right, then sends to its parent. For a
 * non-commutative op the tree is rooted at rank 0, so relative order is
 * rank order, and rank 0 forwards the result to the root.
 *
 * Up to PREPOST_MAX bytes, a rank posts the receives from all its children
 * at once, each into a buffer of its own: under the cm transport every
 * receive is a request to the CM and its answer, and posted one after the
 * other they would put that round trip on the critical path once per
 * child. Longer vectors take one receive at a time in two buffers. */
#define PREPOST_MAX ((size_t)64 * 1024)

static int reduce_binomial(struct cm_coll *k, const void *input, void *recvbuf, size_t count,
                           const struct cm_mpi_datatype *t, const struct cm_mpi_op *op, int root)
{
	int P = k->c->size, rank = k->c->rank;
	int tree_root = cm_mpi_op_commutative(op) ? root : 0;
	int vr = (rank - tree_root + P) % P;
	int prepost = count * t->size <= PREPOST_MAX;
	const char *acc = input;
	/* one per bit of a rank: the children's buffers and receives */
	void *blocks[32] = {NULL};
	char *bufs[32] = {NULL};
	struct cm_mpi_request *reqs[32] = {NULL};
	int nchild = 0, rc = MPI_SUCCESS, parent_mask = 0;

	for (int mask = 1; mask < P; mask <<= 1) {
		if (vr & mask) {
			parent_mask = mask;
			break;
		}
		if (vr + mask < P)
			nchild++;
	}
	int nbufs = prepost ? nchild : nchild < 2 ? nchild : 2;
	for (int i = 0; i < nbufs; i++) {
		blocks[i] = cm_coll_alloc_typed(t, count, &bufs[i]);
		if (!blocks[i]) {
			rc = MPI_ERR_NO_MEM;
			goto out;
		}
	}
	for (int i = 0; prepost && i < nchild; i++) {
		rc = cm_coll_irecv(k, bufs[i], count, t, (rank + (1 << i)) % P, 0, &reqs[i]);
		if (rc) {
			cm_coll_abandon(k, reqs, i);
			goto out;
		}
	}
	/* the children are vr + 1, vr + 2, ..., vr + 2^(nchild-1) */
	for (int i = 0; i < nchild; i++) {
		char *buf = bufs[prepost ? i : i % 2];
		if (prepost)
			rc = cm_coll_waitall(k, &reqs[i], 1);
		else
			rc = cm_coll_recv(k, buf, count, t, (rank + (1 << i)) % P, 0);
		if (!rc) /* buf = acc op buf */
			rc = cm_mpi_op_apply(op, t, acc, buf, count);
		if (rc) {
			cm_coll_abandon(k, reqs, nchild);
			goto out;
		}
		acc = buf;
	}
	if (parent_mask)
		rc = cm_coll_send(k, acc, count, t, (rank - parent_mask + P) % P, 0);
	else if (tree_root == root) /* vr == 0: acc is the result */
		rc = cm_coll_copy_typed(t, count, acc, recvbuf);
	else
		rc = cm_coll_send(k, acc, count, t, root, 1);
	if (!rc && rank == root && tree_root != root)
		rc = cm_coll_recv(k, recvbuf, count, t, tree_root, 1);
out:
	for (int i = 0; i < nbufs; i++)
		cm_coll_free(k, blocks[i]);
	return rc;
}

/* Ring reduce-scatter, then every block sent straight to the root. The
 * root reduces in its receive buffer. */
static int reduce_ring(struct cm_coll *k, const void *input, void *recvbuf, size_t count,
                       const struct cm_mpi_datatype *t, const struct cm_mpi_op *op, int root)
{
	int P = k->c->size, rank = k->c->rank, rc;
	size_t *cnt = malloc(2 * (size_t)P * sizeof *cnt);
	if (!cnt)
		return MPI_ERR_NO_MEM;
	size_t *off = cnt + P;
	even_split(count, P, cnt, off);
	char *acc, *tmp;
	void *acc_block = NULL, *tmp_block = cm_coll_alloc_typed(t, max_of(cnt, P), &tmp);
	if (rank == root) {
		acc = recvbuf;
		rc = cm_coll_copy_typed(t, count, input, acc);
	} else {
		acc_block = cm_coll_alloc_typed(t, count, &acc);
		rc = acc_block ? cm_coll_copy_typed(t, count, input, acc) : MPI_ERR_NO_MEM;
	}
	if (!tmp_block && !rc)
		rc = MPI_ERR_NO_MEM;
	if (!rc)
		rc = ring_reduce_scatter(k, acc, tmp, cnt, off, t, op, 0);
	if (!rc && rank != root) {
		rc = cm_coll_send(k, ITEM(acc, t, off[rank]), cnt[rank], t, root, 1);
	} else if (!rc) {
		struct cm_mpi_request **reqs = calloc((size_t)P, sizeof *reqs);
		rc = reqs ? MPI_SUCCESS : MPI_ERR_NO_MEM;
		for (int i = 0; !rc && i < P; i++)
			if (i != root)
				rc = cm_coll_irecv(k, ITEM(acc, t, off[i]), cnt[i], t, i, 1,
				                   &reqs[i]);
		if (rc && reqs)
			cm_coll_abandon(k, reqs, P);
		else if (reqs)
			rc = cm_coll_waitall(k, reqs, P);
		free(reqs);
	}
	cm_coll_free(k, acc_block);
	cm_coll_free(k, tmp_block);
	free(cnt);
	return rc;
}

int cm_coll_reduce(struct cm_mpi_comm *c, const void *sendbuf, void *recvbuf, size_t count,
                   const struct cm_mpi_datatype *t, const struct cm_mpi_op *op, int root, int tag)
{
	struct cm_coll k;
	const void *input = sendbuf ? sendbuf : recvbuf;
	if (c->size == 1)
		return cm_coll_copy_typed(t, count, input, recvbuf);
	if (count == 0)
		return MPI_SUCCESS;
	cm_coll_begin(&k, c, tag);
	int ring_ok = cm_mpi_op_commutative(op);
	switch (cm_coll_reduce_alg(c, count * t->size, ring_ok)) {
	case CM_REDUCE_RING:
		return reduce_ring(&k, input, recvbuf, count, t, op, root);
	case CM_REDUCE_HALVING:
		return reduce_halving(&k, input, recvbuf, count, t, op, root);
	default:
		return reduce_binomial(&k, input, recvbuf, count, t, op, root);
	}
}

/* ---- on an inter-communicator ----
 *
 * Each group reduces its own data to its leader over its local
 * intra-communicator (the algorithms above, so in rank order); the other
 * group gets that result: its root (Reduce), every process through a
 * broadcast (Allreduce), or its blocks scattered (Reduce_scatter). */

/* The group's reduction of count items of input, at its leader in a new
 * work buffer (*block to free, *acc the items); *block NULL elsewhere. */
static int reduce_to_leader(struct cm_coll *k, const void *input, size_t count,
                            const struct cm_mpi_datatype *t, const struct cm_mpi_op *op, int tag,
                            void **block, char **acc)
{
	struct cm_mpi_comm *l = k->c->local;
	*block = NULL;
	*acc = NULL;
	if (l->rank == 0 && !(*block = cm_coll_alloc_typed(t, count, acc)))
		return MPI_ERR_NO_MEM;
	return cm_coll_reduce(l, input, *acc, count, t, op, 0, tag);
}

static int reduce_inter(struct cm_mpi_comm *c, const void *sendbuf, void *recvbuf, size_t count,
                        const struct cm_mpi_datatype *t, const struct cm_mpi_op *op, int root)
{
	struct cm_coll k;
	cm_coll_begin(&k, c, CM_COLL_TAG_REDUCE);
	if (root == MPI_ROOT)
		return cm_coll_recv(&k, recvbuf, count, t, 0, 0);
	void *block;
	char *acc;
	int rc = reduce_to_leader(&k, sendbuf, count, t, op, CM_COLL_TAG_REDUCE, &block, &acc);
	if (!rc && block)
		rc = cm_coll_send(&k, acc, count, t, root, 0);
	cm_coll_free(&k, block);
	return rc;
}

static int allreduce_inter(struct cm_mpi_comm *c, const void *sendbuf, void *recvbuf, size_t count,
                           const struct cm_mpi_datatype *t, const struct cm_mpi_op *op)
{
	struct cm_coll k;
	cm_coll_begin(&k, c, CM_COLL_TAG_ALLREDUCE);
	void *block;
	char *acc;
	int rc = reduce_to_leader(&k, sendbuf, count, t, op, CM_COLL_TAG_ALLREDUCE, &block, &acc);
	if (!rc && block)
		rc = cm_coll_sendrecv(&k, acc, count, t, 0, recvbuf, count, t, 0, 0);
	cm_coll_free(&k, block);
	return rc ? rc : cm_coll_bcast(c->local, recvbuf, count, t, 0);
}

/* cnt, off: the blocks of this group's processes (their total is the
 * other group's too, as the standard requires). */
static int reduce_scatter_inter(struct cm_mpi_comm *c, const void *input, void *recvbuf,
                                const size_t *cnt, const size_t *off, size_t total,
                                const struct cm_mpi_datatype *t, const struct cm_mpi_op *op)
{
	struct cm_coll k;
	struct cm_mpi_comm *l = c->local;
	cm_coll_begin(&k, c, CM_COLL_TAG_REDUCE_SCATTER);
	struct cm_coll_blk *blk = malloc((size_t)l->size * sizeof *blk);
	void *block = NULL, *other_block = NULL;
	char *acc, *other = NULL;
	int rc = blk ? reduce_to_leader(&k, input, total, t, op, CM_COLL_TAG_REDUCE_SCATTER, &block,
	                                &acc)
	             : MPI_ERR_NO_MEM;
	if (!rc && block) {
		other_block = cm_coll_alloc_typed(t, total, &other);
		rc = other_block ? cm_coll_sendrecv(&k, acc, total, t, 0, other, total, t, 0, 0)
		                 : MPI_ERR_NO_MEM;
	}
	for (int i = 0; !rc && i < l->size; i++)
		blk[i] = (struct cm_coll_blk){t, cnt[i], cm_coll_offset(t, (long long)off[i])};
	if (!rc)
		rc = cm_coll_scatterv(l, other, blk, recvbuf, cnt[l->rank], t, 0,
		                      CM_COLL_TAG_REDUCE_SCATTER + 0x20);
	cm_coll_free(&k, block);
	cm_coll_free(&k, other_block);
	free(blk);
	return rc;
}

int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
               int root, MPI_Comm comm)
{
	const struct cm_mpi_datatype *t;
	const struct cm_mpi_op *o;
	CM_MPI_REQUIRE_INIT("MPI_Reduce");
	struct cm_mpi_comm *c = cm_mpi_comm_get(comm);
	if (!c)
		return cm_mpi_raise(NULL, MPI_ERR_COMM, "MPI_Reduce");
	int rc = cm_coll_check_root(c, root);
	if (!rc && root == MPI_PROC_NULL)
		return MPI_SUCCESS; /* inter-communicator: the root's group, not the root */
	int is_root = cm_coll_is_root(c, root);
	if (!rc && c->remote) {
		/* The root only receives, the other group only sends. */
		const void *buf = is_root ? recvbuf : sendbuf;
		rc = cm_coll_check_reduction(buf, NULL, count, datatype, op, 0, &t, &o);
		if (!rc && buf == MPI_IN_PLACE)
			rc = MPI_ERR_BUFFER;
		if (!rc)
			rc = reduce_inter(c, sendbuf, recvbuf, (size_t)count, t, o, root);
		return cm_mpi_raise(c, rc, "MPI_Reduce");
	}
	if (!rc)
		rc =
		    cm_coll_check_reduction(sendbuf, recvbuf, count, datatype, op, is_root, &t, &o);
	if (!rc && sendbuf == MPI_IN_PLACE && !is_root)
		rc = MPI_ERR_BUFFER;
	if (!rc)
		rc = cm_coll_reduce(c, sendbuf == MPI_IN_PLACE ? NULL : sendbuf, recvbuf,
		                    (size_t)count, t, o, root, CM_COLL_TAG_REDUCE);
	return cm_mpi_raise(c, rc, "MPI_Reduce");
}

/* ---- Allreduce ---- */

/* Recursive doubling over the largest power of two p2 <= P. The first
 * 2 * (P - p2) ranks pair up (2i folds into 2i + 1) beforehand and get the
 * result back afterwards. At each step partners exchange their partial
 * results and both compute lower op upper: the same operands in the same
 * order, hence the same bits on both. */
static int allreduce_doubling(struct cm_coll *k, const void *input, void *recvbuf, size_t count,
                              const struct cm_mpi_datatype *t, const struct cm_mpi_op *op)
{
	int P = k->c->size, rank = k->c->rank;
	int p2 = 1;
	while (p2 * 2 <= P)
		p2 *= 2;
	int rem = P - p2, newrank, rc;
	char *bufs[2];
	void *blocks[2] = {cm_coll_alloc_typed(t, count, &bufs[0]),
	                   cm_coll_alloc_typed(t, count, &bufs[1])};
	if (!blocks[0] || !blocks[1]) {
		rc = MPI_ERR_NO_MEM;
		goto out;
	}
	int acc = 0; /* bufs[acc] is the partial result, bufs[!acc] the spare */
	rc = cm_coll_copy_typed(t, count, input, bufs[acc]);
	if (rc)
		goto out;
	if (rank < 2 * rem) {
		if (rank % 2 == 0) {
			rc = cm_coll_send(k, bufs[acc], count, t, rank + 1, 0);
			newrank = -1;
		} else {
			rc = cm_coll_recv(k, bufs[!acc], count, t, rank - 1, 0);
			if (!rc)
				rc = cm_mpi_op_apply(op, t, bufs[!acc], bufs[acc], count);
			newrank = rank / 2;
		}
		if (rc)
			goto out;
	} else {
		newrank = rank - rem;
	}
	for (int mask = 1; newrank >= 0 && mask < p2; mask <<= 1) {
		int newdst = newrank ^ mask;
		int dst = newdst < rem ? newdst * 2 + 1 : newdst + rem;
		rc = cm_coll_sendrecv(k, bufs[acc], count, t, dst, bufs[!acc], count, t, dst, 1);
		if (rc)
			goto out;
		if (dst < rank) {
			rc = cm_mpi_op_apply(op, t, bufs[!acc], bufs[acc], count);
		} else {
			rc = cm_mpi_op_apply(op, t, bufs[acc], bufs[!acc], count);
			acc = !acc;
		}
		if (rc)
			goto out;
	}
	if (rank < 2 * rem && rank % 2 == 0)
		rc = cm_coll_recv(k, recvbuf, count, t, rank + 1, 2);
	else if (rank < 2 * rem)
		rc = cm_coll_send(k, bufs[acc], count, t, rank - 1, 2);
	if (!rc && !(rank < 2 * rem && rank % 2 == 0))
		rc = cm_coll_copy_typed(t, count, bufs[acc], recvbuf);
out:
	cm_coll_free(k, blocks[0]);
	cm_coll_free(k, blocks[1]);
	return rc;
}

/* Ring reduce-scatter then ring allgather, in the receive buffer: each
 * rank sends 2 (P-1)/P of the vector in all, the least any scheme needs. */
static int allreduce_ring(struct cm_coll *k, const void *input, void *recvbuf, size_t count,
                          const struct cm_mpi_datatype *t, const struct cm_mpi_op *op)
{
	int P = k->c->size;
	size_t *cnt = malloc(2 * (size_t)P * sizeof *cnt);
	if (!cnt)
		return MPI_ERR_NO_MEM;
	size_t *off = cnt + P;
	even_split(count, P, cnt, off);
	char *tmp;
	void *tmp_block = cm_coll_alloc_typed(t, max_of(cnt, P), &tmp);
	int rc = tmp_block ? cm_coll_copy_typed(t, count, input, recvbuf) : MPI_ERR_NO_MEM;
	if (!rc)
		rc = ring_reduce_scatter(k, recvbuf, tmp, cnt, off, t, op, 0);
	if (!rc)
		rc = ring_allgather(k, recvbuf, cnt, off, t, 1);
	cm_coll_free(k, tmp_block);
	free(cnt);
	return rc;
}

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                  MPI_Comm comm)
{
	const struct cm_mpi_datatype *t;
	const struct cm_mpi_op *o;
	struct cm_coll k;
	CM_MPI_REQUIRE_INIT("MPI_Allreduce");
	struct cm_mpi_comm *c = cm_mpi_comm_get(comm);
	if (!c)
		return cm_mpi_raise(NULL, MPI_ERR_COMM, "MPI_Allreduce");
	int rc = cm_coll_check_reduction(sendbuf, recvbuf, count, datatype, op, 1, &t, &o);
	if (rc)
		return cm_mpi_raise(c, rc, "MPI_Allreduce");
	int in_place = sendbuf == MPI_IN_PLACE;
	const void *input = in_place ? recvbuf : sendbuf;
	size_t n = (size_t)count;
	if (c->remote)
		return cm_mpi_raise(
		    c, in_place ? MPI_ERR_BUFFER : allreduce_inter(c, input, recvbuf, n, t, o),
		    "MPI_Allreduce");
	cm_coll_begin(&k, c, CM_COLL_TAG_ALLREDUCE);
	if (c->size == 1 || count == 0)
		rc = cm_coll_copy_typed(t, n, input, recvbuf);
	else
		switch (cm_coll_allreduce_alg(c, n * t->size, cm_mpi_op_commutative(o))) {
		case CM_ALLREDUCE_DOUBLING:
			rc = allreduce_doubling(&k, input, recvbuf, n, t, o);
			break;
		case CM_ALLREDUCE_RING:
			rc = allreduce_ring(&k, input, recvbuf, n, t, o);
			break;
		case CM_ALLREDUCE_HALVING:
			rc = allreduce_halving(&k, input, recvbuf, n, t, o);
			break;
		case CM_ALLREDUCE_REDUCE_BCAST:
			rc = cm_coll_reduce(c, in_place && c->rank == 0 ? NULL : input, recvbuf, n,
			                    t, o, 0, CM_COLL_TAG_ALLREDUCE + 0x10);
			if (!rc)
				rc = cm_coll_bcast(c, recvbuf, n, t, 0);
			break;
		}
	return cm_mpi_raise(c, rc, "MPI_Allreduce");
}

/* ---- Reduce_scatter ---- */

static int reduce_scatter(struct cm_mpi_comm *c, const void *input, void *recvbuf,
                          const size_t *cnt, const size_t *off, size_t total,
                          const struct cm_mpi_datatype *t, const struct cm_mpi_op *op)
{
	struct cm_coll k;
	int P = c->size, rank = c->rank, rc;
	cm_coll_begin(&k, c, CM_COLL_TAG_REDUCE_SCATTER);
	if (P == 1)
		return cm_coll_copy_typed(t, cnt[0], input, recvbuf);
	if (total == 0)
		return MPI_SUCCESS;
	char *full = NULL;
	void *full_block = NULL;
	int ring_ok = cm_mpi_op_commutative(op);
	if (cm_coll_reduce_scatter_alg(c, total * t->size, ring_ok) == CM_REDUCE_SCATTER_RING) {
		/* In a copy of the whole vector (the input may be recvbuf). */
		char *tmp;
		void *tmp_block = cm_coll_alloc_typed(t, max_of(cnt, P), &tmp);
		full_block = cm_coll_alloc_typed(t, total, &full);
		rc = tmp_block && full_block ? cm_coll_copy_typed(t, total, input, full)
		                             : MPI_ERR_NO_MEM;
		if (!rc)
			rc = ring_reduce_scatter(&k, full, tmp, cnt, off, t, op, 0);
		if (!rc)
			rc = cm_coll_copy_typed(t, cnt[rank], ITEM(full, t, off[rank]), recvbuf);
		cm_coll_free(&k, tmp_block);
	} else {
		/* Reduce to rank 0, which scatters the blocks. */
		struct cm_coll_blk *blk = malloc((size_t)P * sizeof *blk);
		rc = blk ? MPI_SUCCESS : MPI_ERR_NO_MEM;
		if (!rc && rank == 0) {
			full_block = cm_coll_alloc_typed(t, total, &full);
			rc = full_block ? MPI_SUCCESS : MPI_ERR_NO_MEM;
		}
		for (int i = 0; !rc && i < P; i++)
			blk[i] =
			    (struct cm_coll_blk){t, cnt[i], cm_coll_offset(t, (long long)off[i])};
		if (!rc)
			rc = cm_coll_reduce(c, input, full, total, t, op, 0,
			                    CM_COLL_TAG_REDUCE_SCATTER + 0x10);
		if (!rc)
			rc = cm_coll_scatterv(c, full, blk, recvbuf, cnt[rank], t, 0,
			                      CM_COLL_TAG_REDUCE_SCATTER + 0x20);
		free(blk);
	}
	cm_coll_free(&k, full_block);
	return rc;
}

/* counts: recvcounts, or NULL: every rank gets block items. */
static int reduce_scatter_call(const void *sendbuf, void *recvbuf, const int *counts, int block,
                               MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, const char *func)
{
	const struct cm_mpi_datatype *t = NULL;
	const struct cm_mpi_op *o = NULL;
	CM_MPI_REQUIRE_INIT(func);
	struct cm_mpi_comm *c = cm_mpi_comm_get(comm);
	if (!c)
		return cm_mpi_raise(NULL, MPI_ERR_COMM, func);
	int P = c->size, rc = MPI_SUCCESS;
	if (counts) {
		if (!(t = cm_coll_type(datatype)))
			rc = MPI_ERR_TYPE;
		else
			rc = cm_coll_check_counts(P, counts, t);
	} else if (block < 0) {
		rc = MPI_ERR_COUNT;
	}
	size_t *cnt = NULL;
	if (!rc) {
		cnt = malloc(2 * (size_t)P * sizeof *cnt);
		rc = cnt ? MPI_SUCCESS : MPI_ERR_NO_MEM;
	}
	if (!rc) {
		size_t *off = cnt + P, total = 0;
		for (int i = 0; i < P; i++) {
			cnt[i] = (size_t)(counts ? counts[i] : block);
			off[i] = total;
			total += cnt[i];
		}
		/* The whole vector is the input: it must fit an int count and a
		 * message. */
		int whole = total > (size_t)2147483647 ? -1 : (int)total;
		int in_place = sendbuf == MPI_IN_PLACE;
		const void *input = in_place ? recvbuf : sendbuf;
		rc = cm_coll_check_reduction(input, NULL, whole, datatype, op, 0, &t, &o);
		if (!rc && (!cm_coll_buf_ok(recvbuf, cnt[c->rank], t) || recvbuf == MPI_IN_PLACE))
			rc = MPI_ERR_BUFFER;
		if (!rc && !in_place && total > 0 && sendbuf == recvbuf)
			rc = MPI_ERR_BUFFER;
		if (!rc && c->remote)
			rc = in_place
			         ? MPI_ERR_BUFFER
			         : reduce_scatter_inter(c, input, recvbuf, cnt, off, total, t, o);
		else if (!rc)
			rc = reduce_scatter(c, input, recvbuf, cnt, off, total, t, o);
	}
	free(cnt);
	return cm_mpi_raise(c, rc, func);
}

int MPI_Reduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[],
                       MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
	if (!recvcounts) {
		CM_MPI_REQUIRE_INIT("MPI_Reduce_scatter");
		struct cm_mpi_comm *c = cm_mpi_comm_get(comm);
		return cm_mpi_raise(c, c ? MPI_ERR_ARG : MPI_ERR_COMM, "MPI_Reduce_scatter");
	}
	return reduce_scatter_call(sendbuf, recvbuf, recvcounts, 0, datatype, op, comm,
	                           "MPI_Reduce_scatter");
}

int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount,
                             MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
	return reduce_scatter_call(sendbuf, recvbuf, NULL, recvcount, datatype, op, comm,
	                           "MPI_Reduce_scatter_block");
}
