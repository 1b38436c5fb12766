/* Communicators: the handle table, the two predefined communicators, the
 * group objects they share, context ids, error handlers and the attribute
 * lookup. The collective creation calls are in mpi_comm_create.c, the group
 * calls in mpi_group.c, the rest of attribute caching in mpi_attr.c.
 *
 * A communicator object lives as long as its handle or a request using it:
 * MPI_Comm_free only drops the handle, so a pending operation on a freed
 * communicator still completes (as MPI requires). */
#include <stdlib.h>
#include <string.h>

#include "mpi_internal.h"
#include "vec.h"

/* ---- groups ---- */

struct cm_mpi_group *cm_mpi_group_new(int size)
{
	struct cm_mpi_group *g = calloc(1, sizeof *g);
	if (!g)
		return NULL;
	size_t n = size > 0 ? (size_t)size : 1;
	g->world_of = malloc(n * sizeof *g->world_of);
	g->by_world = malloc(n * sizeof *g->by_world);
	if (!g->world_of || !g->by_world) {
		free(g->world_of);
		free(g->by_world);
		free(g);
		return NULL;
	}
	g->refs = 1;
	g->size = size;
	return g;
}

static const struct cm_mpi_group *sorting_group; /* qsort has no context argument */

static int by_world_rank(const void *a, const void *b)
{
	int wa = sorting_group->world_of[*(const int *)a];
	int wb = sorting_group->world_of[*(const int *)b];
	return (wa > wb) - (wa < wb);
}

int cm_mpi_group_index(struct cm_mpi_group *g)
{
	for (int r = 0; r < g->size; r++)
		g->by_world[r] = r;
	sorting_group = g;
	qsort(g->by_world, (size_t)g->size, sizeof *g->by_world, by_world_rank);
	for (int i = 1; i < g->size; i++)
		if (g->world_of[g->by_world[i]] == g->world_of[g->by_world[i - 1]])
			return MPI_ERR_RANK;
	return MPI_SUCCESS;
}

int cm_mpi_group_of_list(const int *world, int n, struct cm_mpi_group **out)
{
	struct cm_mpi_group *g = cm_mpi_group_new(n);
	if (!g)
		return MPI_ERR_NO_MEM;
	memcpy(g->world_of, world, (size_t)n * sizeof *world);
	int rc = cm_mpi_group_index(g);
	if (rc) {
		cm_mpi_group_unref(g);
		return rc;
	}
	*out = g;
	return MPI_SUCCESS;
}

void cm_mpi_group_ref(struct cm_mpi_group *g)
{
	g->refs++;
}

void cm_mpi_group_unref(struct cm_mpi_group *g)
{
	if (--g->refs > 0)
		return;
	free(g->world_of);
	free(g->by_world);
	free(g);
}

int cm_mpi_group_rank_of(const struct cm_mpi_group *g, int world_rank)
{
	int lo = 0, hi = g->size;
	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;
		int w = g->world_of[g->by_world[mid]];
		if (w == world_rank)
			return g->by_world[mid];
		if (w < world_rank)
			lo = mid + 1;
		else
			hi = mid;
	}
	return MPI_UNDEFINED;
}

/* ---- the predefined communicators ---- */

static struct cm_mpi_comm comm_world = {
    .handle = MPI_COMM_WORLD,
    .world_of = NULL,
    .ctx_pt2pt = CM_CTX_WORLD_PT2PT,
    .ctx_coll = CM_CTX_WORLD_COLL,
    .errhandler = MPI_ERRORS_ARE_FATAL,
    .name = "MPI_COMM_WORLD",
    .predefined = 1,
};

static struct cm_mpi_comm comm_self = {
    .handle = MPI_COMM_SELF,
    .rank = 0,
    .size = 1,
    .ctx_pt2pt = CM_CTX_SELF_PT2PT,
    .ctx_coll = CM_CTX_SELF_COLL,
    .errhandler = MPI_ERRORS_ARE_FATAL,
    .name = "MPI_COMM_SELF",
    .predefined = 1,
};

/* Handle index -> communicator; NULL for a free slot. Slots 0 and 1 are
 * the predefined ones; freed slots are reused. */
static CM_VEC(struct cm_mpi_comm *) comm_table;
static uint32_t next_ctx_pair = CM_CTX_PAIR_FIRST_FREE;
static uint32_t idups_led; /* MPI_Comm_idup calls this process led */

/* A group of the given world ranks (n of them from first, or the single
 * rank me). Failure here is out of memory at MPI_Init: fatal. */
static struct cm_mpi_group *predefined_group(int n, int first)
{
	struct cm_mpi_group *g = cm_mpi_group_new(n);
	if (!g) {
		cm_mpi_raise(NULL, MPI_ERR_NO_MEM, "MPI_Init");
		cm_mpi_exit(1);
	}
	for (int r = 0; r < n; r++)
		g->world_of[r] = first + r;
	cm_mpi_group_index(g);
	return g;
}

void cm_mpi_comm_init(int world_rank, int world_size)
{
	cm_mpi_error_set_world(&comm_world);
	comm_world.rank = world_rank;
	comm_world.size = world_size;
	comm_world.errhandler = MPI_ERRORS_ARE_FATAL;
	comm_self.errhandler = MPI_ERRORS_ARE_FATAL;
	if (comm_world.group)
		cm_mpi_group_unref(comm_world.group);
	if (comm_self.group)
		cm_mpi_group_unref(comm_self.group);
	comm_world.group = predefined_group(world_size, 0);
	comm_self.group = predefined_group(1, world_rank);
	comm_self.world_of = comm_self.group->world_of;
	cm_vec_free(&comm_table);
	if (!cm_vec_reserve(&comm_table, 2)) {
		cm_mpi_raise(NULL, MPI_ERR_NO_MEM, "MPI_Init");
		cm_mpi_exit(1);
	}
	comm_table.items[CM_HANDLE_INDEX(MPI_COMM_WORLD)] = &comm_world;
	comm_table.items[CM_HANDLE_INDEX(MPI_COMM_SELF)] = &comm_self;
	comm_table.n = 2;
	next_ctx_pair = CM_CTX_PAIR_FIRST_FREE;
	idups_led = 0;
}

struct cm_mpi_comm *cm_mpi_comm_world(void)
{
	return &comm_world;
}

struct cm_mpi_comm *cm_mpi_comm_get(MPI_Comm comm)
{
	if (CM_HANDLE_KIND(comm) != CM_KIND_COMM)
		return NULL;
	unsigned index = CM_HANDLE_INDEX(comm);
	if (index >= comm_table.n)
		return NULL;
	struct cm_mpi_comm *c = comm_table.items[index];
	return c && !c->pending ? c : NULL;
}

int cm_mpi_comm_rank_of(const struct cm_mpi_comm *c, int world_rank)
{
	if (!c->world_of)
		return world_rank >= 0 && world_rank < c->size ? world_rank : MPI_UNDEFINED;
	return cm_mpi_group_rank_of(c->group, world_rank);
}

int cm_mpi_peer_rank_of(const struct cm_mpi_comm *c, int world_rank)
{
	return c->remote ? cm_mpi_group_rank_of(c->remote, world_rank)
	                 : cm_mpi_comm_rank_of(c, world_rank);
}

/* ---- created communicators ---- */

struct cm_mpi_comm *cm_mpi_comm_new(struct cm_mpi_group *g, int rank, uint32_t ctx_pair,
                                    MPI_Errhandler errhandler)
{
	size_t slot = cm_vec_claim_slot(&comm_table, 0, CM_HANDLE_INDEX_MAX);
	if (slot == SIZE_MAX) {
		cm_mpi_group_unref(g);
		return NULL;
	}
	struct cm_mpi_comm *c = calloc(1, sizeof *c);
	if (!c) {
		cm_mpi_group_unref(g);
		return NULL;
	}
	c->handle = (MPI_Comm)(CM_KIND_COMM | slot);
	c->rank = rank;
	c->size = g->size;
	c->group = g;
	c->world_of = g->world_of;
	c->ctx_pt2pt = 2 * ctx_pair;
	c->ctx_coll = 2 * ctx_pair + 1;
	c->errhandler = errhandler;
	c->refs = 1;
	comm_table.items[slot] = c;
	return c;
}

void cm_mpi_comm_ref(struct cm_mpi_comm *c)
{
	c->refs++;
}

void cm_mpi_comm_unref(struct cm_mpi_comm *c)
{
	if (--c->refs > 0 || c->predefined)
		return;
	cm_mpi_group_unref(c->group);
	if (c->remote)
		cm_mpi_group_unref(c->remote);
	if (c->local)
		cm_mpi_comm_drop_handle(c->local);
	free(c->topo);
	free(c);
}

void cm_mpi_comm_drop_handle(struct cm_mpi_comm *c)
{
	comm_table.items[CM_HANDLE_INDEX(c->handle)] = NULL;
	cm_mpi_comm_unref(c);
}

uint32_t cm_mpi_ctx_pair_next(void)
{
	return next_ctx_pair;
}

void cm_mpi_ctx_pair_claim(uint32_t ctx_pair)
{
	if (ctx_pair >= next_ctx_pair)
		next_ctx_pair = ctx_pair + 1;
}

static uint32_t idup_slice(void)
{
	return CM_CTX_PAIR_IDUP_FIRST / (uint32_t)comm_world.size;
}

int cm_mpi_ctx_idup_lead(void)
{
	if (idups_led < idup_slice())
		return (int)idups_led++;
	return (int)idups_led;
}

int cm_mpi_ctx_idup_pair(int leader, int k, uint32_t *pair)
{
	if (leader < 0 || leader >= comm_world.size || k < 0 || (uint32_t)k >= idup_slice())
		return MPI_ERR_INTERN; /* the leader has used up its slice */
	*pair = CM_CTX_PAIR_IDUP_FIRST + (uint32_t)leader * idup_slice() + (uint32_t)k;
	return MPI_SUCCESS;
}

/* ---- rank and size ---- */

int MPI_Comm_rank(MPI_Comm comm, int *rank)
{
	CM_MPI_REQUIRE_INIT("MPI_Comm_rank");
	struct cm_mpi_comm *c = cm_mpi_comm_get(comm);
	if (!c)
		return cm_mpi_raise(NULL, MPI_ERR_COMM, "MPI_Comm_rank");
	if (!rank)
		return cm_mpi_raise(c, MPI_ERR_ARG, "MPI_Comm_rank");
	*rank = c->rank;
	return MPI_SUCCESS;
}

int MPI_Comm_size(MPI_Comm comm, int *size)
{
	CM_MPI_REQUIRE_INIT("MPI_Comm_size");
	struct cm_mpi_comm *c = cm_mpi_comm_get(comm);
	if (!c)
		return cm_mpi_raise(NULL, MPI_ERR_COMM, "MPI_Comm_size");
	if (!size)
		return cm_mpi_raise(c, MPI_ERR_ARG, "MPI_Comm_size");
	*size = c->size;
	return MPI_SUCCESS;
}

int MPI_Comm_remote_size(MPI_Comm comm, int *size)
{
	CM_MPI_REQUIRE_INIT("MPI_Comm_remote_size");
	struct cm_mpi_comm *c = cm_mpi_comm_get(comm);
	if (!c || !c->remote)
		return cm_mpi_raise(c, MPI_ERR_COMM, "MPI_Comm_remote_size");
	if (!size)
		return cm_mpi_raise(c, MPI_ERR_ARG, "MPI_Comm_remote_size");
	*size = c->remote->size;
	return MPI_SUCCESS;
}

/* ---- error handlers ---- */

int cm_mpi_errhandler_valid(MPI_Errhandler eh)
{
	return eh == MPI_ERRORS_ARE_FATAL || eh == MPI_ERRORS_RETURN;
}

static int set_errhandler(MPI_Comm comm, MPI_Errhandler eh, const char *func)
{
	CM_MPI_REQUIRE_INIT(func);
	struct cm_mpi_comm *c = cm_mpi_comm_get(comm);
	if (!c)
		return cm_mpi_raise(NULL, MPI_ERR_COMM, func);
	if (!cm_mpi_errhandler_valid(eh))
		return cm_mpi_raise(c, MPI_ERR_ARG, func);
	c->errhandler = eh;
	return MPI_SUCCESS;
}

static int get_errhandler(MPI_Comm comm, MPI_Errhandler *eh, const char *func)
{
	CM_MPI_REQUIRE_INIT(func);
	struct cm_mpi_comm *c = cm_mpi_comm_get(comm);
	if (!c)
		return cm_mpi_raise(NULL, MPI_ERR_COMM, func);
	if (!eh)
		return cm_mpi_raise(c, MPI_ERR_ARG, func);
	*eh = c->errhandler;
	return MPI_SUCCESS;
}

int MPI_Comm_set_errhandler(MPI_Comm comm, MPI_Errhandler errhandler)
{
	return set_errhandler(comm, errhandler, "MPI_Comm_set_errhandler");
}

int MPI_Errhandler_set(MPI_Comm comm, MPI_Errhandler errhandler)
{
	return set_errhandler(comm, errhandler, "MPI_Errhandler_set");
}

int MPI_Comm_get_errhandler(MPI_Comm comm, MPI_Errhandler *errhandler)
{
	return get_errhandler(comm, errhandler, "MPI_Comm_get_errhandler");
}

int MPI_Errhandler_get(MPI_Comm comm, MPI_Errhandler *errhandler)
{
	return get_errhandler(comm, errhandler, "MPI_Errhandler_get");
}

int MPI_Comm_call_errhandler(MPI_Comm comm, int errorcode)
{
	CM_MPI_REQUIRE_INIT("MPI_Comm_call_errhandler");
	struct cm_mpi_comm *c = cm_mpi_comm_get(comm);
	if (!c)
		return cm_mpi_raise(NULL, MPI_ERR_COMM, "MPI_Comm_call_errhandler");
	/* The call itself succeeded once the handler returns. */
	cm_mpi_raise(c, errorcode, "MPI_Comm_call_errhandler");
	return MPI_SUCCESS;
}

/* ---- keyvals and attribute lookup ---- */

/* User keyval handles: CM_KIND_KEYVAL | (slot + 1), below the predefined
 * keys (0x644000xx). */
#define KEYVAL_SLOTS_MAX 0x3fffffu

static CM_VEC(struct cm_mpi_keyval *) keyvals;

static int keyval_slot(int keyval)
{
	if (CM_HANDLE_KIND(keyval) != CM_KIND_KEYVAL)
		return -1;
	unsigned index = CM_HANDLE_INDEX(keyval);
	if (index == 0 || index - 1 >= keyvals.n)
		return -1;
	return (int)(index - 1);
}

struct cm_mpi_keyval *cm_mpi_keyval_get(int keyval, enum cm_mpi_keyval_kind kind)
{
	int slot = keyval_slot(keyval);
	struct cm_mpi_keyval *kv = slot < 0 ? NULL : keyvals.items[slot];
	return kv && kv->kind == kind ? kv : NULL;
}

int cm_mpi_keyval_register(struct cm_mpi_keyval *kv, int *keyval)
{
	size_t slot = cm_vec_claim_slot(&keyvals, 0, KEYVAL_SLOTS_MAX);
	if (slot == SIZE_MAX) {
		free(kv);
		return MPI_ERR_NO_MEM;
	}
	keyvals.items[slot] = kv;
	*keyval = (int)(CM_KIND_KEYVAL | (slot + 1));
	return MPI_SUCCESS;
}

void cm_mpi_keyval_drop_handle(int keyval)
{
	int slot = keyval_slot(keyval);
	if (slot < 0 || !keyvals.items[slot])
		return;
	struct cm_mpi_keyval *kv = keyvals.items[slot];
	keyvals.items[slot] = NULL;
	cm_mpi_keyval_unref(kv);
}

void cm_mpi_keyval_unref(struct cm_mpi_keyval *kv)
{
	if (--kv->refs == 0)
		free(kv);
}

/* The predefined attributes. Their values live here: MPI hands out a
 * pointer to the value, which must stay valid. */
static int attr_tag_ub = CM_MPI_TAG_UB;
static int attr_host = MPI_PROC_NULL; /* no distinguished host process */
static int attr_io = MPI_ANY_SOURCE;  /* every process can do I/O */
static int attr_wtime_is_global = 0;  /* clocks are per process */

int MPI_Comm_get_attr(MPI_Comm comm, int comm_keyval, void *attribute_val, int *flag)
{
	CM_MPI_REQUIRE_INIT("MPI_Comm_get_attr");
	struct cm_mpi_comm *c = cm_mpi_comm_get(comm);
	if (!c)
		return cm_mpi_raise(NULL, MPI_ERR_COMM, "MPI_Comm_get_attr");
	if (!attribute_val || !flag)
		return cm_mpi_raise(c, MPI_ERR_ARG, "MPI_Comm_get_attr");
	int *value;
	switch (comm_keyval) {
	case MPI_TAG_UB:
		value = &attr_tag_ub;
		break;
	case MPI_HOST:
		value = &attr_host;
		break;
	case MPI_IO:
		value = &attr_io;
		break;
	case MPI_WTIME_IS_GLOBAL:
		value = &attr_wtime_is_global;
		break;
	default:
		const struct cm_mpi_keyval *kv = cm_mpi_keyval_get(comm_keyval, CM_KEYVAL_COMM);
		if (!kv)
			return cm_mpi_raise(c, MPI_ERR_KEYVAL, "MPI_Comm_get_attr");
		*flag = 0;
		/* By the keyval, not its handle (mpi_attr.c: find_attr). */
		for (struct cm_mpi_attr *a = c->attrs; a; a = a->next) {
			if (a->kv == kv) {
				*(void **)attribute_val = a->value;
				*flag = 1;
				break;
			}
		}
		return MPI_SUCCESS;
	}
	*(int **)attribute_val = value;
	*flag = 1;
	return MPI_SUCCESS;
}

int MPI_Attr_get(MPI_Comm comm, int keyval, void *attribute_val, int *flag)
{
	return MPI_Comm_get_attr(comm, keyval, attribute_val, flag);
}
