/* Building blocks of the collective algorithms: typed work buffers, local
 * copies between datatypes, transfers on the collective context, and the
 * argument checks the MPI calls share. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_coll_internal.h"

/* ---- buffers and local copies ---- */

/* The bytes count items of t may touch, relative to the buffer address:
 * [*lo, *hi). */
static void typed_span(const struct cm_mpi_datatype *t, size_t count, ptrdiff_t *lo, ptrdiff_t *hi)
{
	*lo = *hi = 0;
	if (count == 0)
		return;
	ptrdiff_t last = (ptrdiff_t)(count - 1) * t->extent;
	*lo = t->true_lb + (last < 0 ? last : 0);
	*hi = t->true_lb + t->true_extent + (last > 0 ? last : 0);
	/* The loops of the predefined ops assign whole items, the padding of
	 * a pair type included. */
	if (!t->derived && t->extent > 0) {
		if (t->lb < *lo)
			*lo = t->lb;
		if (t->lb + (ptrdiff_t)count * t->extent > *hi)
			*hi = t->lb + (ptrdiff_t)count * t->extent;
	}
	if (*hi < *lo)
		*hi = *lo;
}

void *cm_coll_alloc_typed(const struct cm_mpi_datatype *t, size_t count, char **base)
{
	ptrdiff_t lo, hi;
	typed_span(t, count, &lo, &hi);
	char *block = malloc(hi > lo ? (size_t)(hi - lo) : 1);
	if (!block)
		return NULL;
	/* base + lo == block: the items land inside the block. Integer
	 * arithmetic, as base itself may point outside it. */
	*base = cm_mpi_addr(block, -lo);
	return block;
}

void cm_coll_free(struct cm_coll *k, void *block)
{
	if (!k->abandoned)
		free(block);
}

int cm_coll_pack_new(const struct cm_mpi_datatype *t, const void *buf, size_t count, char **out)
{
	size_t len = count * t->size;
	*out = malloc(len ? len : 1);
	if (!*out)
		return MPI_ERR_NO_MEM;
	if (len)
		cm_mpi_pack(t, buf, count, *out);
	return MPI_SUCCESS;
}

int cm_coll_copy_typed(const struct cm_mpi_datatype *t, size_t count, const void *src, void *dst)
{
	return cm_coll_copy(src, count, t, dst, count, t);
}

int cm_coll_copy(const void *sbuf, size_t scount, const struct cm_mpi_datatype *stype, void *rbuf,
                 size_t rcount, const struct cm_mpi_datatype *rtype)
{
	size_t len = scount * stype->size;
	if (len > rcount * rtype->size)
		return MPI_ERR_TRUNCATE;
	if (len == 0 || sbuf == rbuf)
		return MPI_SUCCESS;
	if (stype->contiguous && rtype->contiguous) {
		memmove(cm_mpi_addr(rbuf, rtype->lb), cm_mpi_addr(sbuf, stype->lb), len);
		return MPI_SUCCESS;
	}
	if (stype->contiguous) {
		cm_mpi_unpack(rtype, cm_mpi_addr(sbuf, stype->lb), len, rbuf);
		return MPI_SUCCESS;
	}
	char *packed;
	int rc = cm_coll_pack_new(stype, sbuf, scount, &packed);
	if (rc)
		return rc;
	cm_mpi_unpack(rtype, packed, len, rbuf);
	free(packed);
	return MPI_SUCCESS;
}

/* ---- transfers ---- */

int cm_coll_check_bytes(size_t count, const struct cm_mpi_datatype *t)
{
	if (t->size > 0 && count > CM_DEFAULT_MAX_PAYLOAD / t->size)
		return MPI_ERR_COUNT;
	return count > INT_MAX ? MPI_ERR_COUNT : MPI_SUCCESS;
}

int cm_coll_isend(struct cm_coll *k, const void *buf, size_t count, const struct cm_mpi_datatype *t,
                  int peer, int phase, struct cm_mpi_request **out)
{
	*out = NULL;
	int rc = cm_coll_check_bytes(count, t);
	if (rc)
		return rc;
	return cm_mpi_start_send(k->c, buf, (int)count, t, peer, k->tag + phase, k->c->ctx_coll, 0,
	                         out);
}

int cm_coll_irecv(struct cm_coll *k, void *buf, size_t count, const struct cm_mpi_datatype *t,
                  int peer, int phase, struct cm_mpi_request **out)
{
	*out = NULL;
	int rc = cm_coll_check_bytes(count, t);
	if (rc)
		return rc;
	return cm_mpi_start_recv(k->c, buf, (int)count, t, peer, k->tag + phase, k->c->ctx_coll,
	                         out);
}

int cm_coll_isend_bytes(struct cm_coll *k, const void *buf, size_t len, int peer, int phase,
                        struct cm_mpi_request **out)
{
	return cm_coll_isend(k, buf, len, cm_mpi_type_get(MPI_BYTE), peer, phase, out);
}

int cm_coll_irecv_bytes(struct cm_coll *k, void *buf, size_t len, int peer, int phase,
                        struct cm_mpi_request **out)
{
	return cm_coll_irecv(k, buf, len, cm_mpi_type_get(MPI_BYTE), peer, phase, out);
}

void cm_coll_abandon(struct cm_coll *k, struct cm_mpi_request **reqs, int n)
{
	for (int i = 0; i < n; i++) {
		struct cm_mpi_request *r = reqs[i];
		if (!r)
			continue;
		reqs[i] = NULL;
		if (cm_mpi_req_poll(r)) {
			cm_mpi_req_release(r);
		} else {
			cm_mpi_req_detach(r);
			k->abandoned = 1;
		}
	}
}

int cm_coll_waitall(struct cm_coll *k, struct cm_mpi_request **reqs, int n)
{
	int err = MPI_SUCCESS;
	for (int i = 0; i < n; i++) {
		if (!reqs[i])
			continue;
		if (cm_mpi_req_wait(reqs[i]) < 0) {
			cm_coll_abandon(k, reqs + i, n - i);
			return MPI_ERR_OTHER;
		}
		int e = cm_mpi_req_finish(reqs[i], NULL);
		reqs[i] = NULL;
		if (e && !err)
			err = e;
	}
	return err;
}

int cm_coll_send(struct cm_coll *k, const void *buf, size_t count, const struct cm_mpi_datatype *t,
                 int peer, int phase)
{
	struct cm_mpi_request *r;
	int rc = cm_coll_isend(k, buf, count, t, peer, phase, &r);
	return rc ? rc : cm_coll_waitall(k, &r, 1);
}

int cm_coll_recv(struct cm_coll *k, void *buf, size_t count, const struct cm_mpi_datatype *t,
                 int peer, int phase)
{
	struct cm_mpi_request *r;
	int rc = cm_coll_irecv(k, buf, count, t, peer, phase, &r);
	return rc ? rc : cm_coll_waitall(k, &r, 1);
}

int cm_coll_sendrecv(struct cm_coll *k, const void *sbuf, size_t scount,
                     const struct cm_mpi_datatype *stype, int dst, void *rbuf, size_t rcount,
                     const struct cm_mpi_datatype *rtype, int src, int phase)
{
	struct cm_mpi_request *reqs[2] = {NULL, NULL};
	int send_first = cm_coll_send_first(scount * stype->size);
	int rc = MPI_SUCCESS;
	if (send_first)
		rc = cm_coll_isend(k, sbuf, scount, stype, dst, phase, &reqs[1]);
	if (!rc)
		rc = cm_coll_irecv(k, rbuf, rcount, rtype, src, phase, &reqs[0]);
	if (!rc && !send_first)
		rc = cm_coll_isend(k, sbuf, scount, stype, dst, phase, &reqs[1]);
	if (rc) {
		cm_coll_abandon(k, reqs, 2);
		return rc;
	}
	return cm_coll_waitall(k, reqs, 2);
}

/* ---- argument checks ---- */

const struct cm_mpi_datatype *cm_coll_type(MPI_Datatype type)
{
	const struct cm_mpi_datatype *t = cm_mpi_type_get(type);
	return t && t->committed ? t : NULL;
}

int cm_coll_buf_ok(const void *buf, size_t count, const struct cm_mpi_datatype *t)
{
	/* NULL is MPI_BOTTOM: a valid buffer for a derived type, whose
	 * displacements may be absolute addresses. */
	return count == 0 || buf || t->derived;
}

int cm_coll_check_buf(const void *buf, int count, MPI_Datatype type,
                      const struct cm_mpi_datatype **t)
{
	if (count < 0)
		return MPI_ERR_COUNT;
	*t = cm_coll_type(type);
	if (!*t)
		return MPI_ERR_TYPE;
	if (!cm_coll_buf_ok(buf, (size_t)count, *t))
		return MPI_ERR_BUFFER;
	return cm_coll_check_bytes((size_t)count, *t);
}

int cm_coll_check_root(const struct cm_mpi_comm *c, int root)
{
	if (c->remote && (root == MPI_ROOT || root == MPI_PROC_NULL))
		return MPI_SUCCESS;
	return root < 0 || root >= cm_mpi_peer_count(c) ? MPI_ERR_ROOT : MPI_SUCCESS;
}

int cm_coll_check_counts(int n, const int *counts, const struct cm_mpi_datatype *t)
{
	if (!counts)
		return MPI_ERR_ARG;
	for (int i = 0; i < n; i++) {
		if (counts[i] < 0)
			return MPI_ERR_COUNT;
		int rc = cm_coll_check_bytes((size_t)counts[i], t);
		if (rc)
			return rc;
	}
	return MPI_SUCCESS;
}

int cm_coll_check_vbuf(int n, const int *counts, const void *buf, const struct cm_mpi_datatype *t)
{
	for (int i = 0; i < n; i++)
		if (!cm_coll_buf_ok(buf, (size_t)counts[i], t))
			return MPI_ERR_BUFFER;
	return MPI_SUCCESS;
}
