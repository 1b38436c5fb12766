/* Private interface between the collective files of libchanmem
 * (mpi_coll*.c, mpi_op.c): reduction operations, the building blocks every
 * collective algorithm uses (typed work buffers, local copies, sends and
 * receives on the communicator's collective context) and the cost model
 * that picks an algorithm.
 *
 * Conventions of the algorithms:
 * - every transfer travels on c->ctx_coll with a tag from the collective's
 *   own range below, so collectives never match user receives nor each
 *   other, and always names its source (no wildcard: nothing to log as a
 *   nondeterministic event, and the same matches on replay);
 * - the algorithm is chosen from arguments every rank has in common (byte
 *   counts, communicator size, the op's commutativity, the number of CMs),
 *   never from timing, so every rank and every re-execution of a rank takes
 *   the same path;
 * - reductions combine in a fixed order, and every rank that obtains a
 *   reduced value obtains the same bits.
 * Argument errors are found before anything is sent. */
#ifndef CHANMEM_MPI_COLL_INTERNAL_H
#define CHANMEM_MPI_COLL_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "mpi_internal.h"

/* ---- tags (inside the collective context; Barrier has 0x100) ---- */
#define CM_COLL_TAG_BCAST 0x200
#define CM_COLL_TAG_REDUCE 0x300
#define CM_COLL_TAG_ALLREDUCE 0x400
#define CM_COLL_TAG_REDUCE_SCATTER 0x500
#define CM_COLL_TAG_SCAN 0x600
#define CM_COLL_TAG_EXSCAN 0x700
#define CM_COLL_TAG_GATHER 0x800
#define CM_COLL_TAG_SCATTER 0x900
#define CM_COLL_TAG_ALLGATHER 0xa00
#define CM_COLL_TAG_ALLTOALL 0xb00

/* ---- reduction operations (mpi_op.c) ---- */

#define CM_KIND_OP 0x70000000u

struct cm_mpi_op;

/* The op behind a handle, or NULL (MPI_OP_NULL, freed, garbage). */
CM_HIDDEN const struct cm_mpi_op *cm_mpi_op_get(MPI_Op op);
CM_HIDDEN int cm_mpi_op_commutative(const struct cm_mpi_op *op);
/* MPI_SUCCESS if op can reduce items of type t, else MPI_ERR_OP (a
 * predefined op on a type the standard does not list for it). */
CM_HIDDEN int cm_mpi_op_check(const struct cm_mpi_op *op, const struct cm_mpi_datatype *t);
/* inout[i] = in[i] op inout[i] for count items of type t (memory layout of
 * the type: item i at i * extent). The op must have passed cm_mpi_op_check.
 * Returns MPI_SUCCESS, or MPI_ERR_NO_MEM (a predefined op on a derived
 * type needs work space). */
CM_HIDDEN int cm_mpi_op_apply(const struct cm_mpi_op *op, const struct cm_mpi_datatype *t,
                              const void *in, void *inout, size_t count);
/* Checks shared by the reductions: count, datatype, op (and its fit to
 * the datatype), buffers (sendbuf may be MPI_IN_PLACE). recv_used:
 * recvbuf is significant on this rank. Calls the buffer checks of
 * mpi_coll_util.c, which never call back here. */
CM_HIDDEN int cm_coll_check_reduction(const void *sendbuf, const void *recvbuf, int count,
                                      MPI_Datatype datatype, MPI_Op op, int recv_used,
                                      const struct cm_mpi_datatype **t, const struct cm_mpi_op **o);

/* ---- building blocks (mpi_coll_util.c) ---- */

/* One collective call in progress: where its messages go. */
struct cm_coll {
	struct cm_mpi_comm *c;
	int tag;
	/* Set when a transfer was left in flight after a transport failure:
	 * its buffer may still be written, so work buffers are leaked rather
	 * than freed (the job is lost anyway). */
	int abandoned;
};

static inline void cm_coll_begin(struct cm_coll *k, struct cm_mpi_comm *c, int tag)
{
	k->c = c;
	k->tag = tag;
	k->abandoned = 0;
}

/* Typed work buffer for count items of t, laid out as in user memory:
 * returns the malloc'd block (to pass to cm_coll_free) and in *base the
 * address to use as the buffer argument. NULL if out of memory. */
CM_HIDDEN void *cm_coll_alloc_typed(const struct cm_mpi_datatype *t, size_t count, char **base);
CM_HIDDEN void cm_coll_free(struct cm_coll *k, void *block);

/* Copies count items of t from src to dst (both user-layout buffers). */
CM_HIDDEN int cm_coll_copy_typed(const struct cm_mpi_datatype *t, size_t count, const void *src,
                                 void *dst);
/* Local part of a collective: scount items of stype -> rcount items of
 * rtype, through their packed images. MPI_ERR_TRUNCATE if the data does
 * not fit. */
CM_HIDDEN int cm_coll_copy(const void *sbuf, size_t scount, const struct cm_mpi_datatype *stype,
                           void *rbuf, size_t rcount, const struct cm_mpi_datatype *rtype);
/* Packs count items into a new malloc'd buffer (*out; never NULL on
 * success, even for 0 bytes). */
CM_HIDDEN int cm_coll_pack_new(const struct cm_mpi_datatype *t, const void *buf, size_t count,
                               char **out);

/* Transfers of the collective (peer: a rank of k->c). Each start_* starts
 * one, on the collective context with tag k->tag + phase. Byte versions
 * move raw bytes. All return an MPI error code. */
CM_HIDDEN int cm_coll_isend(struct cm_coll *k, const void *buf, size_t count,
                            const struct cm_mpi_datatype *t, int peer, int phase,
                            struct cm_mpi_request **out);
CM_HIDDEN int cm_coll_irecv(struct cm_coll *k, void *buf, size_t count,
                            const struct cm_mpi_datatype *t, int peer, int phase,
                            struct cm_mpi_request **out);
CM_HIDDEN int cm_coll_isend_bytes(struct cm_coll *k, const void *buf, size_t len, int peer,
                                  int phase, struct cm_mpi_request **out);
CM_HIDDEN int cm_coll_irecv_bytes(struct cm_coll *k, void *buf, size_t len, int peer, int phase,
                                  struct cm_mpi_request **out);
/* Waits for n requests (NULL entries are skipped) and releases them.
 * Returns the first error; after a transport failure the unfinished ones
 * are left to the background and k->abandoned is set. Entries are NULL on
 * return. */
CM_HIDDEN int cm_coll_waitall(struct cm_coll *k, struct cm_mpi_request **reqs, int n);
/* Gives up on started requests after an error (see cm_coll_waitall). */
CM_HIDDEN void cm_coll_abandon(struct cm_coll *k, struct cm_mpi_request **reqs, int n);
/* Blocking forms. */
CM_HIDDEN int cm_coll_send(struct cm_coll *k, const void *buf, size_t count,
                           const struct cm_mpi_datatype *t, int peer, int phase);
CM_HIDDEN int cm_coll_recv(struct cm_coll *k, void *buf, size_t count,
                           const struct cm_mpi_datatype *t, int peer, int phase);
/* Order of posting a send and a receive that go out together. Under the
 * cm transport a receive is a RECV_REQ frame written at once, and a short
 * message is queued until the next frame the rank writes (send
 * coalescing): posted first, the message leaves in the RECV_REQ's write,
 * one system call and one wake-up of the CM instead of two (measured
 * through one CM, 4 ranks, 1 B .. 4 KiB: allreduce and allgather 10-20%
 * faster; direct: no difference). A long message is not queued, and its
 * receive goes first so that the direct transport can place it. */
#define CM_COLL_SEND_FIRST_MAX ((size_t)4096)
static inline int cm_coll_send_first(size_t send_bytes)
{
	return send_bytes <= CM_COLL_SEND_FIRST_MAX;
}
/* Both posted (the send first if cm_coll_send_first, else the receive),
 * then both awaited: safe in rings. */
CM_HIDDEN int cm_coll_sendrecv(struct cm_coll *k, const void *sbuf, size_t scount,
                               const struct cm_mpi_datatype *stype, int dst, void *rbuf,
                               size_t rcount, const struct cm_mpi_datatype *rtype, int src,
                               int phase);

/* ---- argument checks shared by the MPI calls (mpi_coll_util.c) ---- */

/* The committed datatype behind a handle, or NULL. */
CM_HIDDEN const struct cm_mpi_datatype *cm_coll_type(MPI_Datatype type);
/* buf can hold count items of t: non-NULL, or MPI_BOTTOM (NULL) with a
 * derived type, or nothing to hold. */
CM_HIDDEN int cm_coll_buf_ok(const void *buf, size_t count, const struct cm_mpi_datatype *t);
/* Every check returns an error class (MPI_SUCCESS if fine); raising is the
 * caller's. */
CM_HIDDEN int cm_coll_check_buf(const void *buf, int count, MPI_Datatype type,
                                const struct cm_mpi_datatype **t);
/* A rank of c, or on an inter-communicator a rank of the remote group,
 * MPI_ROOT or MPI_PROC_NULL. */
CM_HIDDEN int cm_coll_check_root(const struct cm_mpi_comm *c, int root);
/* Whether this process is the root: its rank, or MPI_ROOT on an
 * inter-communicator. */
static inline int cm_coll_is_root(const struct cm_mpi_comm *c, int root)
{
	return c->remote ? root == MPI_ROOT : c->rank == root;
}
/* counts: n of them (NULL: MPI_ERR_ARG), none negative, each fitting a
 * message. */
CM_HIDDEN int cm_coll_check_counts(int n, const int *counts, const struct cm_mpi_datatype *t);
/* MPI_ERR_BUFFER unless buf can hold each of the n blocks (cm_coll_buf_ok). */
CM_HIDDEN int cm_coll_check_vbuf(int n, const int *counts, const void *buf,
                                 const struct cm_mpi_datatype *t);
/* The data of one transfer must fit a message. */
CM_HIDDEN int cm_coll_check_bytes(size_t count, const struct cm_mpi_datatype *t);
/* Byte offset of item displ of t (a displacement counted in extents). */
static inline ptrdiff_t cm_coll_offset(const struct cm_mpi_datatype *t, long long displ)
{
	return (ptrdiff_t)(displ * (long long)t->extent);
}
/* buf + off bytes, without C pointer arithmetic (buf may be MPI_BOTTOM). */
#define CM_COLL_AT(buf, off) ((char *)cm_mpi_addr((buf), (MPI_Aint)(off)))

/* ---- cost model (mpi_coll_model.c, see docs/collectives.md) ---- */

enum cm_bcast_alg { CM_BCAST_BINOMIAL, CM_BCAST_CHAIN, CM_BCAST_FLAT };
enum cm_reduce_alg { CM_REDUCE_BINOMIAL, CM_REDUCE_RING, CM_REDUCE_HALVING };
enum cm_allreduce_alg {
	CM_ALLREDUCE_DOUBLING,
	CM_ALLREDUCE_RING,
	CM_ALLREDUCE_HALVING,
	CM_ALLREDUCE_REDUCE_BCAST
};
enum cm_allgather_alg { CM_ALLGATHER_BRUCK, CM_ALLGATHER_RING };
enum cm_scan_alg { CM_SCAN_DOUBLING, CM_SCAN_CHAIN };
enum cm_reduce_scatter_alg { CM_REDUCE_SCATTER_REDUCE, CM_REDUCE_SCATTER_RING };

/* Segment size of the pipelined chain broadcast. */
#define CM_COLL_SEGMENT ((size_t)64 * 1024)

/* bytes: the whole vector (reductions, broadcast) or the total gathered
 * (allgather). ring_ok: the op is commutative (ring schemes combine in ring
 * order, not rank order). */
CM_HIDDEN enum cm_bcast_alg cm_coll_bcast_alg(const struct cm_mpi_comm *c, size_t bytes);
CM_HIDDEN enum cm_reduce_alg cm_coll_reduce_alg(const struct cm_mpi_comm *c, size_t bytes,
                                                int ring_ok);
CM_HIDDEN enum cm_allreduce_alg cm_coll_allreduce_alg(const struct cm_mpi_comm *c, size_t bytes,
                                                      int ring_ok);
CM_HIDDEN enum cm_allgather_alg cm_coll_allgather_alg(const struct cm_mpi_comm *c, size_t bytes);
CM_HIDDEN enum cm_scan_alg cm_coll_scan_alg(const struct cm_mpi_comm *c, size_t bytes);
CM_HIDDEN enum cm_reduce_scatter_alg cm_coll_reduce_scatter_alg(const struct cm_mpi_comm *c,
                                                                size_t bytes, int ring_ok);
/* MPI_Alltoall with blocks of block bytes: 1 for Bruck's scheme, 0 for the
 * pairwise exchange. */
CM_HIDDEN int cm_coll_alltoall_bruck(const struct cm_mpi_comm *c, size_t block);

/* ---- internal entry points shared between the collective files ---- */

/* One rank's block of a v/w collective: count items of t at byte offset
 * off from the buffer. */
struct cm_coll_blk {
	const struct cm_mpi_datatype *t;
	size_t count;
	ptrdiff_t off;
};

/* Arguments already validated; they return an MPI error code. A NULL
 * sendbuf means MPI_IN_PLACE (input taken from recvbuf, as the standard
 * says for each call); arguments a rank does not use may be NULL. */
CM_HIDDEN int cm_coll_bcast(struct cm_mpi_comm *c, void *buf, size_t count,
                            const struct cm_mpi_datatype *t, int root);
CM_HIDDEN int cm_coll_reduce(struct cm_mpi_comm *c, const void *sendbuf, void *recvbuf,
                             size_t count, const struct cm_mpi_datatype *t,
                             const struct cm_mpi_op *op, int root, int tag);
/* sblk: root only, one block per process the root addresses (the other
 * group of an inter-communicator, whose root is MPI_ROOT). recvbuf NULL at
 * the root: MPI_IN_PLACE. */
CM_HIDDEN int cm_coll_scatterv(struct cm_mpi_comm *c, const void *sendbuf,
                               const struct cm_coll_blk *sblk, void *recvbuf, size_t rcount,
                               const struct cm_mpi_datatype *rtype, int root, int tag);
#endif
