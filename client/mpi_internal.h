/* Private interface between the mpi_*.c files of libchanmem.
 *
 * Objects behind the integer handles of mpi.h:
 * - a communicator has a group (comm rank -> world rank table) and two
 *   context ids, one for point-to-point and one for collectives, so the
 *   messages of a collective can never match a user receive;
 * - a datatype has a size (data bytes per item), an extent (memory span per
 *   item) and a list of blocks; contiguous types go to the transport straight
 *   from the user's buffer, the others are packed into a bounce buffer;
 * - a request embeds the transport's struct cm_req, so a request object
 *   never moves while the transport holds it.
 * Only the handle tables and the MPI layer know these; the transport sees
 * world ranks, context ids and byte buffers. Internal symbols are hidden
 * from programs linking libchanmem. */
#ifndef CHANMEM_MPI_INTERNAL_H
#define CHANMEM_MPI_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "mpi.h"
#include "transport.h"

#define CM_HIDDEN __attribute__((visibility("hidden")))

/* Handle layout: the top byte says the kind, the rest is a table index. */
#define CM_HANDLE_KIND(h) ((unsigned)(h)&0xff000000u)
#define CM_HANDLE_INDEX(h) ((unsigned)(h)&0x00ffffffu)
#define CM_KIND_COMM 0x44000000u
#define CM_KIND_DATATYPE 0x4c000000u
#define CM_KIND_REQUEST 0x58000000u
#define CM_KIND_ERRHANDLER 0x54000000u
#define CM_HANDLE_INDEX_MAX 0x00ffffffu

/* Largest tag a program may use (the value of the MPI_TAG_UB attribute):
 * every non-negative int fits the wire's int32 tag. */
#define CM_MPI_TAG_UB 2147483647

/* Context ids of the predefined communicators (TEAM.md conventions). */
#define CM_CTX_WORLD_PT2PT 0u
#define CM_CTX_WORLD_COLL 1u
#define CM_CTX_SELF_PT2PT 2u
#define CM_CTX_SELF_COLL 3u

/* Tags inside a communicator's collective context: one range per
 * collective, so two different collectives can never cross-match even if a
 * program calls them in a different order on different ranks. */
#define CM_COLL_TAG_BARRIER 0x100

/* ---- library state (mpi_init.c) ---- */

struct cm_mpi_state {
	int initialized; /* MPI_Init succeeded */
	int finalized;   /* MPI_Finalize ran */
	int thread_level;
	pthread_t main_thread;
	struct cm_transport transport;
	struct cm_job job;
	char transport_name[16];
	int world_rank; /* for messages; -1 before the job is known */
};
extern struct cm_mpi_state cm_mpi CM_HIDDEN;

/* Every MPI function but the few the standard allows outside
 * MPI_Init..MPI_Finalize starts with this: calling MPI before MPI_Init or
 * after MPI_Finalize is fatal (there is no error handler to consult). */
#define CM_MPI_REQUIRE_INIT(func)                                                                  \
	do {                                                                                       \
		if (!cm_mpi.initialized || cm_mpi.finalized)                                       \
			cm_mpi_not_initialized(func);                                              \
	} while (0)
CM_HIDDEN void cm_mpi_not_initialized(const char *func) __attribute__((noreturn));

/* One call into the transport's progress engine (timeout_ms as in
 * transport.h), then releases freed requests that completed. 0 or -1. */
CM_HIDDEN int cm_mpi_progress(int timeout_ms);

/* ---- communicators (mpi_comm.c) ---- */

struct cm_mpi_comm {
	MPI_Comm handle;
	int rank;
	int size;
	const int *world_of; /* comm rank -> world rank; NULL: identity (the world) */
	uint32_t ctx_pt2pt;
	uint32_t ctx_coll;
	MPI_Errhandler errhandler;
	const char *name;
};

/* Sets up MPI_COMM_WORLD and MPI_COMM_SELF for this job. */
CM_HIDDEN void cm_mpi_comm_init(int world_rank, int world_size);
/* The communicator behind a handle, or NULL if the handle is not a live
 * communicator (MPI_COMM_NULL included). */
CM_HIDDEN struct cm_mpi_comm *cm_mpi_comm_get(MPI_Comm comm);
CM_HIDDEN struct cm_mpi_comm *cm_mpi_comm_world(void);
static inline int cm_mpi_world_rank(const struct cm_mpi_comm *c, int rank)
{
	return c->world_of ? c->world_of[rank] : rank;
}
/* World rank -> rank in c, or MPI_UNDEFINED if not a member. */
CM_HIDDEN int cm_mpi_comm_rank_of(const struct cm_mpi_comm *c, int world_rank);

/* ---- errors (mpi_error.c) ---- */

/* Applies c's error handler to code (c NULL: MPI_COMM_WORLD's, as the
 * standard says for errors not tied to a communicator). Returns code for
 * MPI_ERRORS_RETURN; MPI_ERRORS_ARE_FATAL prints
 * "chanmem: rank R: FUNC: <error string>" and exits with status 1. */
CM_HIDDEN int cm_mpi_raise(struct cm_mpi_comm *c, int code, const char *func);
CM_HIDDEN int cm_mpi_errhandler_valid(MPI_Errhandler eh);
/* Flushes stdio and ends the process at once (no atexit handlers: the
 * transport may be mid-operation). */
CM_HIDDEN void cm_mpi_exit(int status) __attribute__((noreturn));

/* ---- datatypes (mpi_datatype.c) ---- */

struct cm_mpi_block {
	size_t offset;    /* from the start of the item */
	size_t elem_size; /* bytes of one basic element */
	size_t nelems;    /* consecutive basic elements */
};

struct cm_mpi_datatype {
	MPI_Datatype handle;
	const char *name;
	size_t size; /* data bytes per item, gaps excluded: what travels */
	MPI_Aint lb; /* memory layout of one item */
	MPI_Aint extent;
	size_t elements; /* basic elements per item (MPI_Get_elements) */
	int contiguous;  /* one item's data is [lb, lb + size) with no gap and size == extent */
	int nblocks;
	const struct cm_mpi_block *blocks;
};

/* The datatype behind a handle, or NULL (MPI_DATATYPE_NULL included). */
CM_HIDDEN const struct cm_mpi_datatype *cm_mpi_type_get(MPI_Datatype type);
/* count items of type at src -> size*count contiguous bytes at dst. */
CM_HIDDEN void cm_mpi_pack(const struct cm_mpi_datatype *type, const void *src, size_t count,
                           void *dst);
/* The first nbytes of a packed stream at src -> the items at dst (a
 * truncated last item is stored as far as it goes). */
CM_HIDDEN void cm_mpi_unpack(const struct cm_mpi_datatype *type, const void *src, size_t nbytes,
                             void *dst);
/* Status helpers shared by every completion path. */
CM_HIDDEN void cm_mpi_status_empty(MPI_Status *st);
CM_HIDDEN void cm_mpi_status_proc_null(MPI_Status *st);

/* ---- requests (mpi_request.c) ---- */

enum cm_mpi_req_state {
	CM_RQ_FREE = 0, /* slot unused */
	CM_RQ_ACTIVE,   /* handed to the transport, op.done not yet seen */
	CM_RQ_COMPLETE  /* finished: status and error are final */
};

struct cm_mpi_request {
	struct cm_req op; /* the transport's view; must not move while active */
	MPI_Request handle;
	enum cm_mpi_req_state state;
	int detached; /* MPI_Request_free'd while active: released when it completes */
	struct cm_mpi_comm *comm;
	/* recv: where the items go; bounce is the packed image for a
	 * non-contiguous type (send: the packed copy of the items). */
	void *ubuf;
	const struct cm_mpi_datatype *type;
	void *bounce;
	MPI_Status status; /* final status once CM_RQ_COMPLETE */
	int error;         /* final MPI error code once CM_RQ_COMPLETE */
	struct cm_mpi_request *next_detached;
};

CM_HIDDEN struct cm_mpi_request *cm_mpi_req_alloc(struct cm_mpi_comm *c);
CM_HIDDEN void cm_mpi_req_release(struct cm_mpi_request *r);
/* The live, user-visible request behind a handle, or NULL. */
CM_HIDDEN struct cm_mpi_request *cm_mpi_req_get(MPI_Request handle);
/* Moves an active request to CM_RQ_COMPLETE if the transport finished it.
 * Returns 1 if the request is complete. */
CM_HIDDEN int cm_mpi_req_poll(struct cm_mpi_request *r);
/* Waits (progress(-1) loop) until r completes. Returns 0, or -1 if the
 * transport failed (r stays active). */
CM_HIDDEN int cm_mpi_req_wait(struct cm_mpi_request *r);
/* Completes the call on a finished request: copies its status out (unless
 * st is NULL), releases it, returns its error code. */
CM_HIDDEN int cm_mpi_req_finish(struct cm_mpi_request *r, MPI_Status *st);
/* Lets an active request finish in the background. */
CM_HIDDEN void cm_mpi_req_detach(struct cm_mpi_request *r);
CM_HIDDEN void cm_mpi_req_reap_detached(void);
/* Frees every request object (after the transport is gone). */
CM_HIDDEN void cm_mpi_req_shutdown(void);

/* ---- point-to-point engine (mpi_pt2pt.c) ---- */

/* Start a send / receive of count items on context ctx. Arguments must be
 * validated already; peer is a rank of c or MPI_PROC_NULL (receive: also
 * MPI_ANY_SOURCE). On success *out is an active (or, for MPI_PROC_NULL,
 * complete) request. Returns an MPI error code. */
CM_HIDDEN int cm_mpi_start_send(struct cm_mpi_comm *c, const void *buf, int count,
                                const struct cm_mpi_datatype *type, int peer, int tag, uint32_t ctx,
                                int sync, struct cm_mpi_request **out);
CM_HIDDEN int cm_mpi_start_recv(struct cm_mpi_comm *c, void *buf, int count,
                                const struct cm_mpi_datatype *type, int peer, int tag, uint32_t ctx,
                                struct cm_mpi_request **out);

/* ---- collectives (mpi_coll.c) ---- */

/* Dissemination barrier on c's collective context. Returns an MPI error
 * code (not raised). */
CM_HIDDEN int cm_mpi_barrier(struct cm_mpi_comm *c);

#endif
