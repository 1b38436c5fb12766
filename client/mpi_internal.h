/* Private interface between the mpi_*.c files of libchanmem.
 *
 * Objects behind the integer handles of mpi.h:
 * - a communicator has a group (comm rank -> world rank table, shared and
 *   reference counted) and two context ids, one for point-to-point and one
 *   for collectives, so the messages of a collective can never match a user
 *   receive; communicators created by the program agree on their context
 *   ids through messages on the parent (mpi_comm_create.c);
 * - a datatype has a size (data bytes per item), an extent (memory span per
 *   item) and a list of runs; contiguous types go to the transport straight
 *   from the user's buffer, the others are packed once into a bounce buffer
 *   on send and unpacked once from it on receive;
 * - a request embeds the transport's struct cm_req, so a request object
 *   never moves while the transport holds it; a persistent one is reused by
 *   every start.
 * Objects a pending operation uses (communicator, derived datatype) are
 * reference counted, so MPI_Comm_free / MPI_Type_free can come first.
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
#define CM_KIND_GROUP 0x48000000u
#define CM_KIND_KEYVAL 0x64000000u
#define CM_HANDLE_INDEX_MAX 0x00ffffffu

/* Largest tag a program may use (the value of the MPI_TAG_UB attribute):
 * every non-negative int fits the wire's int32 tag. */
#define CM_MPI_TAG_UB 2147483647

/* Context ids of the predefined communicators (TEAM.md conventions). */
#define CM_CTX_WORLD_PT2PT 0u
#define CM_CTX_WORLD_COLL 1u
#define CM_CTX_SELF_PT2PT 2u
#define CM_CTX_SELF_COLL 3u
/* Communicators created later get the pairs (2k, 2k + 1), k >= 2: below
 * CM_CTX_PAIR_IDUP_FIRST agreed on by their members in the blocking calls,
 * from it up to 2^31 named by MPI_Comm_idup's leader (mpi_comm_create.c). */
#define CM_CTX_PAIR_FIRST_FREE 2u
#define CM_CTX_PAIR_IDUP_FIRST 0x40000000u

/* Tags inside a communicator's collective context: one range per
 * collective, so two different collectives can never cross-match even if a
 * program calls them in a different order on different ranks. */
#define CM_COLL_TAG_BARRIER 0x100
/* Communicator creation (mpi_comm_create.c): far above the collectives'
 * ranges, one tag per round of its exchange. */
#define CM_COMM_TAG_EXCHANGE 0x40000000

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

/* mpi_progress.c: one call into the transport's progress engine (timeout_ms
 * as in transport.h), then releases freed requests that completed; the
 * non-blocking collectives that may go on go on. 0 or -1. */
CM_HIDDEN int cm_mpi_progress(int timeout_ms);
/* Where the program's flow waits (whether or not what it waits for is
 * complete already, which is timing): a point of the non-blocking
 * collectives' engine if one is pending, so that every execution passes
 * the same points between two frames (mpi_nondet.c's marks). 0 or -1. */
CM_HIDDEN int cm_mpi_wait_point(void);

/* ---- groups (core in mpi_comm.c, MPI calls in mpi_group.c) ---- */

/* An ordered set of world ranks, shared (reference counted) by the
 * communicators and group handles that use it. Immutable once built. */
struct cm_mpi_group {
	int refs;
	int size;
	int *world_of; /* group rank -> world rank */
	int *by_world; /* group ranks in increasing world rank: the inverse, by bisection */
};

/* A group of size members, refs = 1, world_of to be filled in by the
 * caller, who then calls cm_mpi_group_index. NULL if out of memory. */
CM_HIDDEN struct cm_mpi_group *cm_mpi_group_new(int size);
/* Builds the inverse table once world_of is filled in. Returns
 * MPI_SUCCESS, or MPI_ERR_RANK if a world rank repeats. */
CM_HIDDEN int cm_mpi_group_index(struct cm_mpi_group *g);
/* A new group of the n world ranks listed (refs = 1): MPI_ERR_RANK if one
 * repeats, MPI_ERR_NO_MEM. */
CM_HIDDEN int cm_mpi_group_of_list(const int *world, int n, struct cm_mpi_group **out);
CM_HIDDEN void cm_mpi_group_ref(struct cm_mpi_group *g);
CM_HIDDEN void cm_mpi_group_unref(struct cm_mpi_group *g);
/* World rank -> rank in g, or MPI_UNDEFINED. */
CM_HIDDEN int cm_mpi_group_rank_of(const struct cm_mpi_group *g, int world_rank);
/* MPI_IDENT (same members, same order), MPI_SIMILAR (same members) or
 * MPI_UNEQUAL (mpi_group.c). */
CM_HIDDEN int cm_mpi_group_compare(const struct cm_mpi_group *g1, const struct cm_mpi_group *g2);
/* The group behind a handle (MPI_GROUP_EMPTY included), or NULL
 * (mpi_group.c). */
CM_HIDDEN struct cm_mpi_group *cm_mpi_group_get(MPI_Group group);

/* ---- communicators (mpi_comm.c, creation in mpi_comm_create.c) ---- */

struct cm_mpi_attr; /* a cached attribute (mpi_comm.c, mpi_attr.c) */
/* A Cartesian topology (made and read in mpi_topo.c; copied by
 * MPI_Comm_dup in mpi_comm_create.c, freed with its communicator). */
struct cm_mpi_topo {
	int ndims;
	int v[]; /* dims[ndims] then periods[ndims] */
};

static inline size_t cm_mpi_topo_bytes(int ndims)
{
	return sizeof(struct cm_mpi_topo) + 2 * (size_t)ndims * sizeof(int);
}

struct cm_mpi_comm {
	MPI_Comm handle;
	int rank;
	int size;
	const int *world_of; /* comm rank -> world rank; NULL: identity (the world) */
	uint32_t ctx_pt2pt;
	uint32_t ctx_coll;
	MPI_Errhandler errhandler;
	char name[MPI_MAX_OBJECT_NAME];
	struct cm_mpi_group *group; /* holds a reference; world_of is group->world_of or NULL */
	int refs;                   /* the handle (until MPI_Comm_free) + requests using it */
	int predefined;             /* MPI_COMM_WORLD, MPI_COMM_SELF: never freed */
	struct cm_mpi_attr *attrs;
	struct cm_mpi_topo *topo; /* owned; NULL: no topology */
	uint32_t nbc_seq;         /* non-blocking collectives started on it (their tags) */
	/* Made by MPI_Comm_idup, whose request has not completed: no context
	 * yet, and its handle names nothing (cm_mpi_comm_get). */
	int pending;
	/* An inter-communicator: the remote group (a reference), whose ranks
	 * point-to-point calls and collective roots name, and the
	 * intra-communicator of the local group (owned, its handle hidden)
	 * that the collectives and MPI_Intercomm_merge run on. Both NULL in
	 * an intra-communicator. */
	struct cm_mpi_group *remote;
	struct cm_mpi_comm *local;
};

/* A live info object, or MPI_INFO_NULL (mpi_info.c). */
CM_HIDDEN int cm_mpi_info_valid(MPI_Info info);

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
/* The processes point-to-point calls on c address: c's own group, or the
 * remote group of an inter-communicator. _count: how many; _world: the
 * world rank of one; _rank_of: the rank of a world rank among them
 * (MPI_UNDEFINED if it is not). */
static inline int cm_mpi_peer_count(const struct cm_mpi_comm *c)
{
	return c->remote ? c->remote->size : c->size;
}
static inline int cm_mpi_peer_world(const struct cm_mpi_comm *c, int rank)
{
	return c->remote ? c->remote->world_of[rank] : cm_mpi_world_rank(c, rank);
}
CM_HIDDEN int cm_mpi_peer_rank_of(const struct cm_mpi_comm *c, int world_rank);
/* A new communicator with a handle: group g (its reference is taken
 * over), this process's rank in it, context pair ctx_pair (contexts
 * 2 * ctx_pair and 2 * ctx_pair + 1). NULL if out of memory (g released). */
CM_HIDDEN struct cm_mpi_comm *cm_mpi_comm_new(struct cm_mpi_group *g, int rank, uint32_t ctx_pair,
                                              MPI_Errhandler errhandler);
CM_HIDDEN void cm_mpi_comm_ref(struct cm_mpi_comm *c);
CM_HIDDEN void cm_mpi_comm_unref(struct cm_mpi_comm *c);
/* MPI_Comm_free's end: the handle dies, the object once no request uses
 * it. The attributes must have been deleted already. */
CM_HIDDEN void cm_mpi_comm_drop_handle(struct cm_mpi_comm *c);
/* The lowest context pair this process has never used. */
CM_HIDDEN uint32_t cm_mpi_ctx_pair_next(void);
/* Marks the pairs up to ctx_pair as used. */
CM_HIDDEN void cm_mpi_ctx_pair_claim(uint32_t ctx_pair);
/* MPI_Comm_idup's pairs: a slice of CM_CTX_PAIR_IDUP_FIRST / world size
 * pairs per world rank, the leader's. _lead: the next number of this
 * process's slice, taken (the slice's size once it is used up). _idup_pair:
 * the pair numbered k in leader's slice; MPI_ERR_INTERN if k is outside. */
CM_HIDDEN int cm_mpi_ctx_idup_lead(void);
CM_HIDDEN int cm_mpi_ctx_idup_pair(int leader, int k, uint32_t *pair);

/* Communicator creation helpers (mpi_comm_create.c). They return an MPI
 * error code (not raised). */
/* Every member of c contributes n ints: all[r * n ... r * n + n - 1] gets
 * rank r's. A Bruck allgather in point-to-point messages on c's collective
 * context (so it is logged and replayed like any message). Collective. */
CM_HIDDEN int cm_mpi_comm_allgather_ints(struct cm_mpi_comm *c, const int *mine, int n, int *all);
/* MPI_Comm_split's engine: *out is the new communicator, or NULL for
 * color MPI_UNDEFINED. Collective over c. */
CM_HIDDEN int cm_mpi_comm_split(struct cm_mpi_comm *c, int color, int key,
                                struct cm_mpi_comm **out);

/* ---- attributes (lookup in mpi_comm.c, the rest in mpi_attr.c) ---- */

/* What a keyval caches attributes on: a keyval of one kind is invalid on
 * the other (MPI_ERR_KEYVAL). */
enum cm_mpi_keyval_kind { CM_KEYVAL_COMM, CM_KEYVAL_TYPE };

/* The callbacks of either kind: MPI_Comm and MPI_Datatype are both int, so
 * MPI_Type_copy_attr_function is this very function type. */
struct cm_mpi_keyval {
	MPI_Comm_copy_attr_function *copy_fn;
	MPI_Comm_delete_attr_function *delete_fn;
	void *extra_state;
	enum cm_mpi_keyval_kind kind;
	int refs; /* the handle (until MPI_*_free_keyval) + attributes using it */
};

struct cm_mpi_attr {
	int keyval;
	struct cm_mpi_keyval *kv; /* holds a reference */
	void *value;
	struct cm_mpi_attr *next;
};

/* The live keyval of that kind behind a user keyval handle, or NULL. */
CM_HIDDEN struct cm_mpi_keyval *cm_mpi_keyval_get(int keyval, enum cm_mpi_keyval_kind kind);
/* Gives kv (heap allocated, refs = 1) a handle: MPI_SUCCESS or
 * MPI_ERR_NO_MEM (kv freed). */
CM_HIDDEN int cm_mpi_keyval_register(struct cm_mpi_keyval *kv, int *keyval);
/* MPI_Comm_free_keyval: the handle dies, the keyval once no attribute
 * uses it. */
CM_HIDDEN void cm_mpi_keyval_drop_handle(int keyval);
CM_HIDDEN void cm_mpi_keyval_unref(struct cm_mpi_keyval *kv);
/* MPI_Comm_dup, MPI_Type_dup: the attributes of from (whose handle is
 * from_handle) copied onto the list *to through their copy callbacks.
 * MPI_Comm_free, MPI_Type_free: every attribute of the list deleted through
 * its delete callback. Both return MPI_SUCCESS or the first callback's
 * error (mpi_attr.c). */
CM_HIDDEN int cm_mpi_attr_copy_all(struct cm_mpi_attr *from, int from_handle,
                                   struct cm_mpi_attr **to);
CM_HIDDEN int cm_mpi_attr_delete_all(struct cm_mpi_attr **list, int handle);
/* Drops whatever attributes the list still holds, without callbacks
 * (MPI_Type_dup undoing a failed copy when a delete callback refuses). */
CM_HIDDEN void cm_mpi_attr_discard_all(struct cm_mpi_attr **list);

/* ---- errors (mpi_error.c) ---- */

/* Applies c's error handler to code (c NULL: MPI_COMM_WORLD's, as the
 * standard says for errors not tied to a communicator). Returns code for
 * MPI_ERRORS_RETURN; MPI_ERRORS_ARE_FATAL prints
 * "chanmem: rank R: FUNC: <error string>" and exits with status 1. */
CM_HIDDEN int cm_mpi_raise(struct cm_mpi_comm *c, int code, const char *func);
/* The communicator whose handler cm_mpi_raise applies when given none
 * (mpi_comm.c passes MPI_COMM_WORLD's at MPI_Init). */
CM_HIDDEN void cm_mpi_error_set_world(const struct cm_mpi_comm *world);
/* MPI_ERRORS_ARE_FATAL or MPI_ERRORS_RETURN (mpi_comm.c). */
CM_HIDDEN int cm_mpi_errhandler_valid(MPI_Errhandler eh);
/* Flushes stdio and ends the process at once (no atexit handlers: the
 * transport may be mid-operation). */
CM_HIDDEN void cm_mpi_exit(int status) __attribute__((noreturn));
/* A fatal error outside any communicator's error handler (the transport
 * cannot log or replay a value the rank must act on): "chanmem: rank N:
 * func: why" on stderr, then cm_mpi_exit(1). Never returns. */
CM_HIDDEN void cm_mpi_fatal(const char *func, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 2, 3)));

/* ---- datatypes (mpi_datatype.c, constructors in mpi_type_create.c) ---- */

/* A run of the type map: count repetitions, the i-th at offset + i * stride
 * bytes from the item's origin (the buffer address of item 0: offsets are
 * not relative to lb, and may be negative), each nelems consecutive basic
 * elements of elem_size bytes. Runs are in type-map order, which is the
 * order of the packed bytes. */
struct cm_mpi_block {
	ptrdiff_t offset;
	size_t elem_size; /* bytes of one basic element */
	size_t nelems;    /* consecutive basic elements per repetition */
	size_t count;     /* repetitions (>= 1) */
	ptrdiff_t stride; /* bytes between repetitions */
};

struct cm_mpi_datatype {
	MPI_Datatype handle;
	const char *name;
	size_t size; /* data bytes per item, gaps excluded: what travels */
	MPI_Aint lb; /* memory layout of one item: item i starts at i * extent */
	MPI_Aint extent;
	MPI_Aint true_lb; /* the bytes really touched by one item */
	MPI_Aint true_extent;
	size_t elements; /* basic elements per item (MPI_Get_elements) */
	size_t align;    /* strictest alignment of its basic types (struct padding) */
	/* The predefined type every basic element is of (a pair type counts as
	 * one), or MPI_DATATYPE_NULL if mixed: a reduction can use it. */
	MPI_Datatype basic;
	int contiguous; /* count items are the bytes [lb, lb + count * size): no gap, size == extent
	                 */
	int committed;  /* usable for communication (predefined: always) */
	int derived;    /* built by a constructor: reference counted, freed by MPI_Type_free */
	/* lb / ub set explicitly (MPI_Type_create_resized, a subarray, or a part
	 * that has them): they override the bounds of the data, as MPI's sticky
	 * lb and ub markers do, and an explicit ub is never padded. */
	int sticky_lb, sticky_ub;
	int refs; /* derived: the user handle + operations in flight */
	int nblocks;
	const struct cm_mpi_block *blocks;
	/* How a derived type was built (MPI_Type_get_contents); NULL for a
	 * predefined one. */
	struct cm_mpi_contents *contents;
	/* MPI_Type_set_name on a derived type (a predefined one's lives in a
	 * table of mpi_datatype.c: this struct is read-only there). */
	char user_name[MPI_MAX_OBJECT_NAME];
	struct cm_mpi_attr *attrs; /* a derived type's (cm_mpi_type_attrs) */
};

/* A constructor call as MPI_Type_get_contents returns it: the combiner and
 * its integer, address and datatype arguments in the standard's order.
 * The datatypes are held (referenced) as long as the type built from
 * them lives. One allocation with the arrays after it. */
struct cm_mpi_contents {
	int combiner;
	int nints, naddrs, ntypes;
	int *ints;
	MPI_Aint *addrs;
	const struct cm_mpi_datatype **types;
};

/* Room for the arguments of a combiner (arrays uninitialised; the caller
 * fills them, then cm_mpi_contents_hold). NULL when out of memory. */
CM_HIDDEN struct cm_mpi_contents *cm_mpi_contents_new(int combiner, int nints, int naddrs,
                                                      int ntypes);
/* References every datatype of a filled record. */
CM_HIDDEN void cm_mpi_contents_hold(struct cm_mpi_contents *c);
/* Drops the references and the record (NULL: nothing). */
CM_HIDDEN void cm_mpi_contents_free(struct cm_mpi_contents *c);

/* The datatype behind a handle, or NULL (MPI_DATATYPE_NULL included).
 * Uncommitted derived types are returned too: check ->committed before
 * communicating with one. */
CM_HIDDEN const struct cm_mpi_datatype *cm_mpi_type_get(MPI_Datatype type);
/* An operation in flight keeps a derived type alive past MPI_Type_free
 * (no-ops for predefined types). */
CM_HIDDEN void cm_mpi_type_ref(const struct cm_mpi_datatype *type);
CM_HIDDEN void cm_mpi_type_unref(const struct cm_mpi_datatype *type);
/* MPI_Type_free of a derived type: its handle dies now, the type once no
 * operation in flight uses it. */
CM_HIDDEN void cm_mpi_type_drop_handle(const struct cm_mpi_datatype *type);
/* The attribute list of a datatype, predefined ones included, or NULL for
 * an invalid handle. */
CM_HIDDEN struct cm_mpi_attr **cm_mpi_type_attrs(MPI_Datatype datatype);
/* Gives a new derived type (refs = 1, heap allocated with its blocks) a
 * handle. Returns MPI_SUCCESS or MPI_ERR_NO_MEM (type freed). */
CM_HIDDEN int cm_mpi_type_register(struct cm_mpi_datatype *type);
/* Helpers for packing and unpacking, usable by every MPI file (the
 * collectives use them for non-contiguous data):
 * count items of type at src (the buffer argument of an MPI call) ->
 * count * type->size contiguous bytes at dst. */
CM_HIDDEN void cm_mpi_pack(const struct cm_mpi_datatype *type, const void *src, size_t count,
                           void *dst);
/* The first nbytes of a packed stream at src -> the items at dst (the
 * buffer argument; a truncated last item is stored as far as it goes). */
CM_HIDDEN void cm_mpi_unpack(const struct cm_mpi_datatype *type, const void *src, size_t nbytes,
                             void *dst);
/* buf + off as an address, without C pointer arithmetic (buf may be
 * MPI_BOTTOM, i.e. NULL, with absolute displacements in the type). */
static inline void *cm_mpi_addr(const void *buf, MPI_Aint off)
{
	return (void *)((uintptr_t)buf + (uintptr_t)off);
}
/* Status helpers shared by every completion path. */
CM_HIDDEN void cm_mpi_status_empty(MPI_Status *st);
CM_HIDDEN void cm_mpi_status_proc_null(MPI_Status *st);

/* ---- requests (mpi_request.c) ---- */

enum cm_mpi_req_state {
	CM_RQ_FREE = 0, /* slot unused */
	CM_RQ_ACTIVE,   /* handed to the transport, op.done not yet seen */
	CM_RQ_COMPLETE, /* finished: status and error are final */
	CM_RQ_INACTIVE  /* persistent request not started (or finished and completed) */
};

/* What a persistent request does each time it is started. */
enum cm_mpi_persist_mode {
	CM_PERSIST_SEND = 1,
	CM_PERSIST_SSEND,
	CM_PERSIST_BSEND,
	CM_PERSIST_RECV
};

struct cm_mpi_persist {
	enum cm_mpi_persist_mode mode;
	void *buf;
	int count;
	const struct cm_mpi_datatype *type; /* holds a reference */
	int peer;
	int tag;
};

struct cm_mpi_request {
	struct cm_req op; /* the transport's view; must not move while active */
	MPI_Request handle;
	enum cm_mpi_req_state state;
	int detached;             /* MPI_Request_free'd while active: released when it completes */
	struct cm_mpi_comm *comm; /* holds a reference */
	/* recv: where the items go; bounce is the packed image for a
	 * non-contiguous type (send: the packed copy of the items). type holds
	 * a reference until the receive is unpacked. */
	void *ubuf;
	const struct cm_mpi_datatype *type;
	void *bounce;
	MPI_Status status; /* final status once CM_RQ_COMPLETE */
	int error;         /* final MPI error code once CM_RQ_COMPLETE */
	int persistent;    /* MPI_Send_init & co: completing makes it CM_RQ_INACTIVE */
	struct cm_mpi_persist persist;
	/* A matched receive (MPI_Imrecv): the message was received whole into
	 * bounce before the program said where it goes; only ucap bytes of it
	 * fit the program's buffer (more is MPI_ERR_TRUNCATE). */
	int matched;
	size_t ucap;
	struct cm_mpi_request *next_detached;
};

CM_HIDDEN struct cm_mpi_request *cm_mpi_req_alloc(struct cm_mpi_comm *c);
/* Frees the request's slot (a persistent request: its arguments too). */
CM_HIDDEN void cm_mpi_req_release(struct cm_mpi_request *r);
/* The live, user-visible request behind a handle (an inactive persistent
 * one included), or NULL. */
CM_HIDDEN struct cm_mpi_request *cm_mpi_req_get(MPI_Request handle);
/* Moves an active request to CM_RQ_COMPLETE if the transport finished it.
 * Returns 1 if the request is complete. */
CM_HIDDEN int cm_mpi_req_poll(struct cm_mpi_request *r);
/* Waits (progress(-1) loop; inside a non-blocking collective, gives control
 * back) until r completes. Returns 0, or -1 if the transport failed (r
 * stays active). mpi_progress.c. */
CM_HIDDEN int cm_mpi_req_wait(struct cm_mpi_request *r);
/* Completes the call on a finished request: copies its status out (unless
 * st is NULL), releases it (a persistent one becomes inactive instead),
 * returns its error code. */
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
/* A send of slen bytes to `to` and a receive of up to rlen bytes from
 * `from`, on context ctx with tag, both posted (the receive first) before
 * either is awaited: safe between two processes that both call it. *st
 * (if not NULL) gets the receive's status. On an error that leaves a
 * transfer running (*in_flight set) rbuf may still be written: the caller
 * must not free it. */
CM_HIDDEN int cm_mpi_exchange(struct cm_mpi_comm *c, const void *sbuf, size_t slen, int to,
                              void *rbuf, size_t rlen, int from, int tag, uint32_t ctx,
                              MPI_Status *st, int *in_flight);
/* The same on a request object already allocated (a persistent request
 * being started): the send or receive is started in r. On error r may
 * hold a bounce buffer and a type reference the caller must drop. */
CM_HIDDEN int cm_mpi_launch_send(struct cm_mpi_request *r, const void *buf, int count,
                                 const struct cm_mpi_datatype *type, int peer, int tag,
                                 uint32_t ctx, int sync);
CM_HIDDEN int cm_mpi_launch_recv(struct cm_mpi_request *r, void *buf, int count,
                                 const struct cm_mpi_datatype *type, int peer, int tag,
                                 uint32_t ctx);
/* Gives r (fresh from cm_mpi_req_alloc, or a persistent request being
 * started) a send of len bytes at data; bounce (may be NULL) is a malloc'd
 * buffer r owns from now on. */
CM_HIDDEN int cm_mpi_launch_send_bytes(struct cm_mpi_request *r, const void *data, size_t len,
                                       void *bounce, int peer, int tag, uint32_t ctx, int sync);
/* A buffered send on c's point-to-point context: the message is copied
 * into the attached buffer and sent from there (MPI_ERR_BUFFER if it does
 * not fit). Complete for the caller when it returns MPI_SUCCESS. */
CM_HIDDEN int cm_mpi_bsend_start(struct cm_mpi_comm *c, const void *buf, int count,
                                 const struct cm_mpi_datatype *type, int peer, int tag);
/* (Re)starts a persistent request r (state CM_RQ_INACTIVE) on its saved
 * arguments. Returns an MPI error code; on error r stays inactive
 * (mpi_persist.c). */
CM_HIDDEN int cm_mpi_start_persistent(struct cm_mpi_request *r);
/* Validation shared with the persistent-request calls; they return an
 * error class (raising is the caller's). */
CM_HIDDEN int cm_mpi_check_send(MPI_Comm comm, const void *buf, int count, MPI_Datatype datatype,
                                int dest, int tag, struct cm_mpi_comm **c,
                                const struct cm_mpi_datatype **t);
CM_HIDDEN int cm_mpi_check_recv(MPI_Comm comm, const void *buf, int count, MPI_Datatype datatype,
                                int source, int tag, struct cm_mpi_comm **c,
                                const struct cm_mpi_datatype **t);
/* A receive's or probe's source and tag: an error class, or MPI_SUCCESS. */
CM_HIDDEN int cm_mpi_check_source_tag(const struct cm_mpi_comm *c, int source, int tag);
/* MPI_Probe/MPI_Iprobe, shared with the matched probes: checks the
 * arguments (args_ok: the caller's own ones), answers MPI_PROC_NULL, asks
 * the transport (after a progress round when not blocking), and fills
 * *flag and *status. MPI_SUCCESS with *cp and *res (res->found 0 for
 * MPI_PROC_NULL), or the error raised. */
CM_HIDDEN int cm_mpi_probe(MPI_Comm comm, int source, int tag, int blocking, int args_ok, int *flag,
                           MPI_Status *status, struct cm_mpi_comm **cp, struct cm_probe_result *res,
                           const char *func);

/* ---- collectives (mpi_coll.c) ---- */

/* Dissemination barrier on c's collective context. Returns an MPI error
 * code (not raised). */
CM_HIDDEN int cm_mpi_barrier(struct cm_mpi_comm *c);

#endif
