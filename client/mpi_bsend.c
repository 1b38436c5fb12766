/* Buffered sends (MPI_Bsend, MPI_Ibsend, and persistent ones through
 * cm_mpi_bsend_start) and the buffer the program attaches for them. Above
 * mpi_pt2pt.c: a buffered send is a plain send from the attached buffer. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_internal.h"

/* ---- buffered sends ----
 *
 * MPI_Bsend packs the message into the buffer the program attached and
 * sends it from there, so the call returns as soon as the copy is made,
 * whatever the receiver does. The buffer holds a list of allocations in
 * address order, each a header (MPI_BSEND_OVERHEAD bytes, copied in and
 * out with memcpy: the buffer has no alignment guarantee) then the packed
 * data. An allocation is reclaimed once the send made from it completes. */

struct bsend_header {
	size_t next;                /* offset of the next allocation, or BSEND_END */
	size_t span;                /* bytes taken, header included */
	struct cm_mpi_request *req; /* the send made from this allocation */
};
_Static_assert(sizeof(struct bsend_header) <= MPI_BSEND_OVERHEAD,
               "MPI_BSEND_OVERHEAD must hold a buffered send's header");
#define BSEND_END SIZE_MAX

static char *attached_buffer;
static size_t attached_size;
static int buffer_is_attached;
static size_t bsend_head = BSEND_END; /* first allocation */

static struct bsend_header bsend_read(size_t off)
{
	struct bsend_header h;
	memcpy(&h, attached_buffer + off, sizeof h);
	return h;
}

static void bsend_write(size_t off, const struct bsend_header *h)
{
	memcpy(attached_buffer + off, h, sizeof *h);
}

/* Unlinks the allocations whose sends completed. Returns how many are
 * still in use. */
static int bsend_reclaim(void)
{
	int in_use = 0;
	size_t prev = BSEND_END;
	for (size_t off = bsend_head; off != BSEND_END;) {
		struct bsend_header h = bsend_read(off);
		if (cm_mpi_req_poll(h.req)) {
			cm_mpi_req_release(h.req);
			if (prev == BSEND_END) {
				bsend_head = h.next;
			} else {
				struct bsend_header p = bsend_read(prev);
				p.next = h.next;
				bsend_write(prev, &p);
			}
		} else {
			in_use++;
			prev = off;
		}
		off = h.next;
	}
	return in_use;
}

/* First fit: the offset of a free range of span bytes, linked into the
 * list with req as its owner, or BSEND_END if there is none. */
static size_t bsend_alloc(size_t span, struct cm_mpi_request *req)
{
	size_t prev = BSEND_END, free_from = 0;
	for (size_t off = bsend_head;;) {
		size_t free_to = off == BSEND_END ? attached_size : off;
		if (free_to >= free_from && free_to - free_from >= span) {
			struct bsend_header h = {.next = off, .span = span, .req = req};
			bsend_write(free_from, &h);
			if (prev == BSEND_END) {
				bsend_head = free_from;
			} else {
				struct bsend_header p = bsend_read(prev);
				p.next = free_from;
				bsend_write(prev, &p);
			}
			return free_from;
		}
		if (off == BSEND_END)
			return BSEND_END;
		struct bsend_header h = bsend_read(off);
		prev = off;
		free_from = off + h.span;
		off = h.next;
	}
}

/* Copies the message into the attached buffer and starts its send.
 * MPI_ERR_BUFFER if no buffer is attached or it has no room even after
 * reclaiming what the transport has finished with. */
int cm_mpi_bsend_start(struct cm_mpi_comm *c, const void *buf, int count,
                       const struct cm_mpi_datatype *type, int peer, int tag)
{
	if (peer == MPI_PROC_NULL)
		return MPI_SUCCESS;
	size_t len = (size_t)count * type->size;
	if (!buffer_is_attached || len > attached_size ||
	    attached_size - len < (size_t)MPI_BSEND_OVERHEAD)
		return MPI_ERR_BUFFER;
	struct cm_mpi_request *r = cm_mpi_req_alloc(c);
	if (!r)
		return MPI_ERR_NO_MEM;
	size_t span = len + MPI_BSEND_OVERHEAD;
	bsend_reclaim();
	size_t off = bsend_alloc(span, r);
	if (off == BSEND_END && cm_mpi_progress(0) == 0) {
		bsend_reclaim();
		off = bsend_alloc(span, r);
	}
	if (off == BSEND_END) {
		cm_mpi_req_release(r);
		return MPI_ERR_BUFFER;
	}
	char *data = attached_buffer + off + MPI_BSEND_OVERHEAD;
	cm_mpi_pack(type, buf, (size_t)count, data);
	int rc = cm_mpi_launch_send_bytes(r, data, len, NULL, peer, tag, c->ctx_pt2pt, 0);
	if (rc) {
		/* Leave the failed request complete so the allocation is reclaimed. */
		r->state = CM_RQ_COMPLETE;
		r->error = rc;
	}
	return rc;
}

/* ---- the buffered-send buffer ---- */

int MPI_Buffer_attach(void *buffer, int size)
{
	CM_MPI_REQUIRE_INIT("MPI_Buffer_attach");
	if (size < 0 || (size > 0 && !buffer) || buffer_is_attached)
		return cm_mpi_raise(NULL, MPI_ERR_BUFFER, "MPI_Buffer_attach");
	attached_buffer = buffer;
	attached_size = (size_t)size;
	buffer_is_attached = 1;
	bsend_head = BSEND_END;
	return MPI_SUCCESS;
}

/* Blocks until every buffered message has left the buffer, as MPI says.
 * With no buffer attached it hands back NULL and 0. */
int MPI_Buffer_detach(void *buffer_addr, int *size)
{
	CM_MPI_REQUIRE_INIT("MPI_Buffer_detach");
	if (!buffer_addr || !size)
		return cm_mpi_raise(NULL, MPI_ERR_ARG, "MPI_Buffer_detach");
	if (cm_mpi_wait_point() < 0)
		return cm_mpi_raise(NULL, MPI_ERR_OTHER, "MPI_Buffer_detach");
	while (bsend_reclaim() > 0)
		if (cm_mpi_progress(-1) < 0)
			return cm_mpi_raise(NULL, MPI_ERR_OTHER, "MPI_Buffer_detach");
	*(void **)buffer_addr = attached_buffer;
	*size = (int)attached_size;
	attached_buffer = NULL;
	attached_size = 0;
	buffer_is_attached = 0;
	return MPI_SUCCESS;
}

int MPI_Bsend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm)
{
	struct cm_mpi_comm *c = NULL;
	const struct cm_mpi_datatype *t;
	CM_MPI_REQUIRE_INIT("MPI_Bsend");
	int rc = cm_mpi_check_send(comm, buf, count, datatype, dest, tag, &c, &t);
	if (!rc)
		rc = cm_mpi_bsend_start(c, buf, count, t, dest, tag);
	return rc ? cm_mpi_raise(c, rc, "MPI_Bsend") : MPI_SUCCESS;
}

/* Complete at once: the data is in the attached buffer when it returns. */
int MPI_Ibsend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
               MPI_Request *request)
{
	struct cm_mpi_comm *c = NULL;
	const struct cm_mpi_datatype *t;
	struct cm_mpi_request *r = NULL;
	CM_MPI_REQUIRE_INIT("MPI_Ibsend");
	int rc = cm_mpi_check_send(comm, buf, count, datatype, dest, tag, &c, &t);
	if (!rc && !request)
		rc = MPI_ERR_ARG;
	if (!rc && !(r = cm_mpi_req_alloc(c)))
		rc = MPI_ERR_NO_MEM;
	if (!rc) {
		rc = cm_mpi_bsend_start(c, buf, count, t, dest, tag);
		if (rc)
			cm_mpi_req_release(r);
	}
	if (rc)
		return cm_mpi_raise(c, rc, "MPI_Ibsend");
	cm_mpi_status_empty(&r->status);
	r->state = CM_RQ_COMPLETE;
	*request = r->handle;
	return MPI_SUCCESS;
}
