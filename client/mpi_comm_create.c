/* Creating and freeing communicators: MPI_Comm_dup, _idup, _split,
 * _split_type, _create, _create_group, _free, the inter-communicator
 * calls (MPI_Intercomm_create, _merge; dup, split and create of an
 * inter-communicator), and the local queries (compare, test_inter, names).
 *
 * Context ids. A communicator's two contexts are part of the matching key
 * of every message on it, so each process must use a pair that no other
 * communicator it shares with the same peers uses. Every process keeps the
 * lowest pair it has never used; a creation call exchanges these over the
 * parent (cm_mpi_comm_allgather_ints) and every member takes the maximum,
 * then marks everything up to it used. Two communicators sharing a member
 * thus never get the same pair (that member would have had to reuse one);
 * the disjoint communicators of one MPI_Comm_split share a pair, which is
 * harmless since no message can travel between them. The agreement is
 * made of ordinary messages on the parent's collective context: no side
 * channel, so it is logged and replayed like the program's own traffic,
 * and a re-executed process computes the same ids. MPI_Comm_create_group
 * runs the same agreement among the group's members only. These pairs
 * stay below CM_CTX_PAIR_IDUP_FIRST.
 *
 * MPI_Comm_idup cannot take part in that agreement: between sending its
 * lowest unused pair and learning the maximum, a process may create other
 * communicators (MPI allows blocking creation calls, and other idups, while
 * one is pending), and the maximum, which depends on the other members,
 * may be a pair one of those took meanwhile. So an idup's pair comes from
 * a range of its own, [CM_CTX_PAIR_IDUP_FIRST, 2^31), cut into one slice
 * per world rank: the pair is number k of the slice of the parent's rank
 * 0 (its leader), where k is how many idups that process has led before.
 * The leader takes k at the call and broadcasts it over the parent in the
 * idup's coroutine; every member then knows the pair. Two communicators
 * sharing a member cannot get the same pair: made by blocking calls,
 * above; made by idups with different leaders, different slices; with the
 * same leader, that process numbered them differently; one of each, the
 * ranges differ. The pair depends on the order of the leader's calls only,
 * never on timing. An idup of an inter-communicator needs a second pair,
 * for the new local intra-communicator: each group's leader takes numbers
 * k and k + 1 of its slice, and both groups use those of the leader with
 * the lower world rank (the two leaders swap theirs in the coroutine). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mpi_coll_internal.h"
#include "mpi_coll_nb.h"
#include "mpi_internal.h"

/* ---- the exchange ---- */

/* One step of an exchange: n_out ints to process `to` of c and n_in ints
 * from process `from`, on context ctx with tag, both posted before either
 * is awaited. A message of another length is MPI_ERR_INTERN: the peer is
 * in another call, a broken program. On an error that leaves the receive
 * in flight (*in_flight set), `in` may still be written: the caller must
 * not free it. */
static int swap_ints(struct cm_mpi_comm *c, const int *out, int n_out, int to, int *in, int n_in,
                     int from, int tag, uint32_t ctx, int *in_flight)
{
	MPI_Status st;
	size_t want = (size_t)n_in * sizeof *in;
	int rc = cm_mpi_exchange(c, out, (size_t)n_out * sizeof *out, to, in, want, from, tag, ctx,
	                         &st, in_flight);
	if (!rc && st.cm_bytes != (MPI_Count)want)
		rc = MPI_ERR_INTERN;
	return rc;
}

/* Bruck's allgather among P members of c, member i being c's rank
 * rank_of[i] (NULL: c's ranks themselves), me the caller's index: in
 * round k every member sends the blocks it holds (its own, then those of
 * the next members) to member me - 2^k and receives as many from member
 * me + 2^k, so after ceil(log2 P) rounds it holds all P blocks, rotated by
 * its index. Round k uses its own tag; every receive names its source, so
 * messages of consecutive exchanges between the same two processes match
 * in order. */
static int allgather_among(struct cm_mpi_comm *c, int P, int me, const int *rank_of,
                           const int *mine, int n, int *all)
{
	int *held = malloc((size_t)P * (size_t)n * sizeof *held);
	if (!held)
		return MPI_ERR_NO_MEM;
	memcpy(held, mine, (size_t)n * sizeof *held);
	int have = 1, round = 0;
	for (int dist = 1; dist < P; dist <<= 1, round++) {
		int m = have < P - have ? have : P - have;
		int to = (me - dist + P) % P, from = (me + dist) % P;
		if (rank_of) {
			to = rank_of[to];
			from = rank_of[from];
		}
		int in_flight;
		int rc = swap_ints(c, held, m * n, to, held + (size_t)have * (size_t)n, m * n, from,
		                   CM_COMM_TAG_EXCHANGE + round, c->ctx_coll, &in_flight);
		if (rc) {
			if (!in_flight)
				free(held); /* else it leaks: the receive may still write it */
			return rc;
		}
		have += m;
	}
	for (int i = 0; i < P; i++)
		memcpy(all + (size_t)((me + i) % P) * (size_t)n, held + (size_t)i * (size_t)n,
		       (size_t)n * sizeof *held);
	free(held);
	return MPI_SUCCESS;
}

int cm_mpi_comm_allgather_ints(struct cm_mpi_comm *c, const int *mine, int n, int *all)
{
	return allgather_among(c, c->size, c->rank, NULL, mine, n, all);
}

/* The largest of the members' lowest unused pairs (member r's at
 * all[r * stride]; each below CM_CTX_PAIR_IDUP_FIRST, see next_pair). */
static uint32_t largest_pair(const int *all, int stride, int P)
{
	uint32_t pair = 0;
	for (int r = 0; r < P; r++)
		if ((uint32_t)all[(size_t)r * (size_t)stride] > pair)
			pair = (uint32_t)all[(size_t)r * (size_t)stride];
	return pair;
}

/* The context pair for a new communicator: the largest, now used here. */
static uint32_t agreed_pair(const int *all, int stride, int P)
{
	uint32_t pair = largest_pair(all, stride, P);
	cm_mpi_ctx_pair_claim(pair);
	return pair;
}

/* This process's lowest unused pair as an int for the exchange. */
static int next_pair(int *out)
{
	uint32_t next = cm_mpi_ctx_pair_next();
	if (next >= CM_CTX_PAIR_IDUP_FIRST)
		return MPI_ERR_INTERN; /* 2^30 communicators created: out of context ids */
	*out = (int)next;
	return MPI_SUCCESS;
}

/* ---- groups from the exchange ---- */

struct member {
	int key;
	int parent_rank;
};

static int by_key(const void *a, const void *b)
{
	const struct member *x = a, *y = b;
	if (x->key != y->key)
		return (x->key > y->key) - (x->key < y->key);
	return (x->parent_rank > y->parent_rank) - (x->parent_rank < y->parent_rank);
}

/* The processes of `from` (in its order) whose color is `color`, ordered
 * by key, ties by rank in `from`: all[stride * r] is rank r's color,
 * all[stride * r + 1] its key. *g NULL if there are none; *my_rank: the
 * rank of from's rank `me` in it. */
static int group_of_color(const int *all, int stride, const struct cm_mpi_group *from, int color,
                          int me, struct cm_mpi_group **g, int *my_rank)
{
	int P = from->size, n = 0;
	*g = NULL;
	struct member *members = malloc(((size_t)P + 1) * sizeof *members);
	if (!members)
		return MPI_ERR_NO_MEM;
	for (int r = 0; r < P; r++)
		if (all[stride * r] == color)
			members[n++] = (struct member){all[stride * r + 1], r};
	if (n > 0 && !(*g = cm_mpi_group_new(n))) {
		free(members);
		return MPI_ERR_NO_MEM;
	}
	qsort(members, (size_t)n, sizeof *members, by_key);
	for (int i = 0; i < n; i++) {
		(*g)->world_of[i] = from->world_of[members[i].parent_rank];
		if (members[i].parent_rank == me)
			*my_rank = i;
	}
	if (*g)
		cm_mpi_group_index(*g);
	free(members);
	return MPI_SUCCESS;
}

/* ---- agreement across two groups ----
 *
 * An inter-communicator's context pair is agreed by both groups: each
 * group finds the largest of its members' lowest unused pairs (the
 * exchange above, over its own intra-communicator), the two leaders swap
 * theirs, and each broadcasts the larger to its group. Every member of
 * both groups then claims it and the next one: pair + 1 is the context
 * pair of each group's local intra-communicator, on which the
 * inter-communicator's collectives run (the two groups are disjoint, so
 * they can share it, as the parts of one split do). Like the other
 * creation calls, the agreement is ordinary logged messages. */

/* What a leader broadcasts to its group: a status (an error found by the
 * leader, which every member then returns), the pair, then what the other
 * leader sent. */
enum { AGREE_STATUS, AGREE_PAIR, AGREE_WORDS };

/* local: the group's intra-communicator, leader its leader's rank there.
 * The leader swaps [its group's largest pair, words[0..n-1]] with process
 * peer of x, on context ctx with tag, receiving [pair, n_theirs words];
 * fail (at the leader): an error found in its arguments, broadcast instead
 * of swapping. Every member gets the other leader's words in theirs and
 * the agreed pair in *pair (not claimed). */
static int agree_across(struct cm_mpi_comm *local, int leader, struct cm_mpi_comm *x, int peer,
                        uint32_t ctx, int tag, int fail, const int *words, int n, int *theirs,
                        int n_theirs, uint32_t *pair)
{
	int *all = malloc((size_t)local->size * sizeof *all);
	int *out = malloc(((size_t)n + 1) * sizeof *out);
	int *got = malloc(((size_t)n_theirs + AGREE_WORDS) * sizeof *got);
	int mine, rc = all && out && got ? next_pair(&mine) : MPI_ERR_NO_MEM;
	if (!rc)
		rc = cm_mpi_comm_allgather_ints(local, &mine, 1, all);
	if (!rc && local->rank == leader) {
		got[AGREE_STATUS] = fail;
		out[0] = (int)largest_pair(all, 1, local->size);
		if (n)
			memcpy(out + 1, words, (size_t)n * sizeof *out);
		if (!fail) {
			int in_flight;
			got[AGREE_STATUS] = swap_ints(x, out, n + 1, peer, got + AGREE_PAIR,
			                              n_theirs + 1, peer, tag, ctx, &in_flight);
			if (in_flight)
				return got[AGREE_STATUS]; /* got leaks: it may still be written */
		}
		if (!got[AGREE_STATUS]) {
			if (got[AGREE_PAIR] < out[0])
				got[AGREE_PAIR] = out[0];
			/* pair + 1 must stay below MPI_Comm_idup's range as well. */
			if (got[AGREE_PAIR] < 0 ||
			    (uint32_t)got[AGREE_PAIR] + 1 >= CM_CTX_PAIR_IDUP_FIRST)
				got[AGREE_STATUS] = MPI_ERR_INTERN;
		}
	}
	if (!rc)
		rc = cm_coll_bcast(local, got, (size_t)n_theirs + AGREE_WORDS,
		                   cm_mpi_type_get(MPI_INT), leader);
	if (!rc)
		rc = got[AGREE_STATUS];
	if (!rc) {
		*pair = (uint32_t)got[AGREE_PAIR];
		if (n_theirs)
			memcpy(theirs, got + AGREE_WORDS, (size_t)n_theirs * sizeof *theirs);
	}
	free(all);
	free(out);
	free(got);
	return rc;
}

/* The inter-communicator between local group g (this process's rank in
 * it: rank) and remote group rg on the agreed pair, with its local
 * intra-communicator on pair + 1; both pairs are claimed. g is borrowed,
 * rg's reference taken over. */
static int inter_new(struct cm_mpi_group *g, int rank, struct cm_mpi_group *rg, uint32_t pair,
                     MPI_Errhandler eh, struct cm_mpi_comm **out)
{
	cm_mpi_ctx_pair_claim(pair + 1);
	cm_mpi_group_ref(g);
	struct cm_mpi_comm *local = cm_mpi_comm_new(g, rank, pair + 1, eh), *d = NULL;
	if (local) {
		cm_mpi_group_ref(g);
		d = cm_mpi_comm_new(g, rank, pair, eh);
	}
	if (!d) {
		if (local)
			cm_mpi_comm_drop_handle(local);
		cm_mpi_group_unref(rg);
		return MPI_ERR_NO_MEM;
	}
	d->remote = rg;
	d->local = local;
	*out = d;
	return MPI_SUCCESS;
}

/* ---- inter-communicators ---- */

/* A group of the n world ranks listed, or an error a broken list gives
 * (every member checks the same list, so all fail alike). */
static int group_of_list(const int *world, int n, struct cm_mpi_group **out)
{
	int world_size = cm_mpi_comm_world()->size;
	if (n < 1 || n > world_size)
		return MPI_ERR_INTERN;
	for (int i = 0; i < n; i++)
		if (world[i] < 0 || world[i] >= world_size)
			return MPI_ERR_INTERN;
	return cm_mpi_group_of_list(world, n, out);
}

/* The leaders swap their groups' world ranks over the peer communicator
 * (sizes learnt in the agreement); each broadcasts [status, the other
 * group's list] to its group. The two groups must be disjoint. */
static int remote_list(struct cm_mpi_comm *c, int leader, struct cm_mpi_comm *peer,
                       int remote_leader, int tag, int their_size, struct cm_mpi_group **rg)
{
	int *got = malloc(((size_t)their_size + 1) * sizeof *got);
	if (!got)
		return MPI_ERR_NO_MEM;
	if (c->rank == leader) {
		int in_flight;
		got[0] = swap_ints(peer, c->group->world_of, c->size, remote_leader, got + 1,
		                   their_size, remote_leader, tag, peer->ctx_pt2pt, &in_flight);
		if (in_flight)
			return got[0]; /* got leaks: it may still be written */
		for (int i = 0; !got[0] && i < their_size; i++)
			if (cm_mpi_group_rank_of(c->group, got[1 + i]) != MPI_UNDEFINED)
				got[0] = MPI_ERR_COMM; /* a process in both groups */
	}
	int rc = cm_coll_bcast(c, got, (size_t)their_size + 1, cm_mpi_type_get(MPI_INT), leader);
	if (!rc)
		rc = got[0];
	if (!rc)
		rc = group_of_list(got + 1, their_size, rg);
	free(got);
	return rc;
}

/* Collective over the union of two disjoint groups, each calling it on an
 * intra-communicator of its own (local_comm) with its leader's rank there;
 * the leaders talk over peer_comm, with tag, to each other's rank in it
 * (significant at the leaders only). */
int MPI_Intercomm_create(MPI_Comm local_comm, int local_leader, MPI_Comm peer_comm,
                         int remote_leader, int tag, MPI_Comm *newintercomm)
{
	static const char func[] = "MPI_Intercomm_create";
	CM_MPI_REQUIRE_INIT(func);
	struct cm_mpi_comm *c = cm_mpi_comm_get(local_comm), *peer = NULL, *d = NULL;
	if (!c || c->remote)
		return cm_mpi_raise(c, MPI_ERR_COMM, func);
	if (!newintercomm)
		return cm_mpi_raise(c, MPI_ERR_ARG, func);
	if (local_leader < 0 || local_leader >= c->size)
		return cm_mpi_raise(c, MPI_ERR_RANK, func);
	if (tag < 0 || tag > CM_MPI_TAG_UB)
		return cm_mpi_raise(c, MPI_ERR_TAG, func);
	int fail = MPI_SUCCESS;
	if (c->rank == local_leader) {
		if (!(peer = cm_mpi_comm_get(peer_comm)))
			fail = MPI_ERR_COMM;
		else if (remote_leader < 0 || remote_leader >= cm_mpi_peer_count(peer) ||
		         cm_mpi_group_rank_of(c->group, cm_mpi_peer_world(peer, remote_leader)) !=
		             MPI_UNDEFINED)
			fail = MPI_ERR_RANK; /* none, or one in the local group */
	}
	int their_size;
	uint32_t pair;
	struct cm_mpi_group *rg = NULL;
	int rc = agree_across(c, local_leader, peer, remote_leader, peer ? peer->ctx_pt2pt : 0, tag,
	                      fail, &c->size, 1, &their_size, 1, &pair);
	if (!rc && (their_size < 1 || their_size >= cm_mpi_comm_world()->size))
		rc = MPI_ERR_INTERN; /* the other leader is in another call */
	if (!rc)
		rc = remote_list(c, local_leader, peer, remote_leader, tag, their_size, &rg);
	if (!rc)
		rc = inter_new(c->group, c->rank, rg, pair, c->errhandler, &d);
	if (rc)
		return cm_mpi_raise(c, rc, func);
	*newintercomm = d->handle;
	return MPI_SUCCESS;
}

/* MPI_Comm_split of an inter-communicator: the processes of each group
 * with one color form the local group of a new inter-communicator, whose
 * remote group is the other group's processes of that color (both ordered
 * by key, ties by rank). *out is NULL for MPI_UNDEFINED, and where the
 * other group has no process of the color. */
static int inter_split(struct cm_mpi_comm *c, int color, int key, struct cm_mpi_comm **out)
{
	int L = c->size, R = c->remote->size, mine[2] = {color, key};
	int *ours = malloc(2 * (size_t)L * sizeof *ours),
	    *theirs = malloc(2 * (size_t)R * sizeof *theirs);
	int rc =
	    ours && theirs ? cm_mpi_comm_allgather_ints(c->local, mine, 2, ours) : MPI_ERR_NO_MEM;
	uint32_t pair;
	if (!rc)
		rc = agree_across(c->local, 0, c, 0, c->ctx_coll, CM_COMM_TAG_EXCHANGE, 0, ours,
		                  2 * L, theirs, 2 * R, &pair);
	struct cm_mpi_group *g = NULL, *rg = NULL;
	int my_rank = 0, unused;
	if (!rc && color != MPI_UNDEFINED)
		rc = group_of_color(ours, 2, c->group, color, c->rank, &g, &my_rank);
	if (!rc && g)
		rc = group_of_color(theirs, 2, c->remote, color, -1, &rg, &unused);
	*out = NULL;
	if (!rc && rg) {
		rc = inter_new(g, my_rank, rg, pair, c->errhandler, out);
	} else if (!rc) {
		cm_mpi_ctx_pair_claim(pair + 1); /* as every other member does */
	}
	if (g)
		cm_mpi_group_unref(g);
	free(ours);
	free(theirs);
	return rc;
}

/* MPI_Comm_create of an inter-communicator: each group passes a subgroup
 * of its own (the same at all its members); the new inter-communicator
 * joins the two. *out is NULL outside the subgroup, and where the other
 * group's is empty. */
static int inter_create(struct cm_mpi_comm *c, struct cm_mpi_group *g, struct cm_mpi_comm **out)
{
	int L = c->size, R = c->remote->size;
	if (g->size > L)
		return MPI_ERR_GROUP;
	for (int i = 0; i < g->size; i++)
		if (cm_mpi_group_rank_of(c->group, g->world_of[i]) == MPI_UNDEFINED)
			return MPI_ERR_GROUP;
	/* [size, world ranks], padded to the largest a group can send. */
	int *ours = calloc((size_t)L + 1, sizeof *ours),
	    *theirs = malloc(((size_t)R + 1) * sizeof *theirs);
	int rc = ours && theirs ? MPI_SUCCESS : MPI_ERR_NO_MEM;
	uint32_t pair;
	if (!rc) {
		ours[0] = g->size;
		memcpy(ours + 1, g->world_of, (size_t)g->size * sizeof *ours);
		rc = agree_across(c->local, 0, c, 0, c->ctx_coll, CM_COMM_TAG_EXCHANGE, 0, ours,
		                  L + 1, theirs, R + 1, &pair);
	}
	*out = NULL;
	int my_rank = rc ? MPI_UNDEFINED : cm_mpi_group_rank_of(g, cm_mpi_world_rank(c, c->rank));
	struct cm_mpi_group *rg = NULL;
	if (!rc && (theirs[0] < 0 || theirs[0] > R))
		rc = MPI_ERR_INTERN; /* the other group is in another call */
	if (!rc && my_rank != MPI_UNDEFINED && theirs[0] > 0)
		rc = group_of_list(theirs + 1, theirs[0], &rg);
	if (!rc && rg)
		rc = inter_new(g, my_rank, rg, pair, c->errhandler, out);
	else if (!rc)
		cm_mpi_ctx_pair_claim(pair + 1); /* as every other member does */
	free(ours);
	free(theirs);
	return rc;
}

/* The union of both groups: the group whose processes pass high = 0
 * first; when both pass the same, the group whose leader has the lower
 * rank in MPI_COMM_WORLD (the standard leaves that order to the
 * implementation). */
int MPI_Intercomm_merge(MPI_Comm intercomm, int high, MPI_Comm *newintracomm)
{
	static const char func[] = "MPI_Intercomm_merge";
	CM_MPI_REQUIRE_INIT(func);
	struct cm_mpi_comm *c = cm_mpi_comm_get(intercomm), *d = NULL;
	if (!c || !c->remote)
		return cm_mpi_raise(c, MPI_ERR_COMM, func);
	if (!newintracomm)
		return cm_mpi_raise(c, MPI_ERR_ARG, func);
	int mine = high != 0, theirs;
	uint32_t pair;
	int rc = agree_across(c->local, 0, c, 0, c->ctx_coll, CM_COMM_TAG_EXCHANGE, 0, &mine, 1,
	                      &theirs, 1, &pair);
	struct cm_mpi_group *g = NULL;
	int L = c->size, R = c->remote->size;
	if (!rc && !(g = cm_mpi_group_new(L + R)))
		rc = MPI_ERR_NO_MEM;
	if (!rc) {
		int local_first =
		    mine != theirs ? mine < theirs : c->group->world_of[0] < c->remote->world_of[0];
		const struct cm_mpi_group *first = local_first ? c->group : c->remote;
		const struct cm_mpi_group *second = local_first ? c->remote : c->group;
		memcpy(g->world_of, first->world_of, (size_t)first->size * sizeof *g->world_of);
		memcpy(g->world_of + first->size, second->world_of,
		       (size_t)second->size * sizeof *g->world_of);
		cm_mpi_group_index(g);
		cm_mpi_ctx_pair_claim(pair);
		if (!(d = cm_mpi_comm_new(g, local_first ? c->rank : R + c->rank, pair,
		                          c->errhandler)))
			rc = MPI_ERR_NO_MEM;
	}
	if (rc)
		return cm_mpi_raise(c, rc, func);
	*newintracomm = d->handle;
	return MPI_SUCCESS;
}

/* ---- the creation calls ---- */

/* A duplicate keeps the topology. */
static int topo_copy(const struct cm_mpi_comm *from, struct cm_mpi_comm *to)
{
	if (!from->topo)
		return MPI_SUCCESS;
	size_t bytes = cm_mpi_topo_bytes(from->topo->ndims);
	to->topo = malloc(bytes);
	if (!to->topo)
		return MPI_ERR_NO_MEM;
	memcpy(to->topo, from->topo, bytes);
	return MPI_SUCCESS;
}

static int comm_dup(MPI_Comm comm, MPI_Comm *newcomm, const char *func)
{
	struct cm_mpi_comm *c = cm_mpi_comm_get(comm);
	if (!c)
		return cm_mpi_raise(NULL, MPI_ERR_COMM, func);
	if (!newcomm)
		return cm_mpi_raise(c, MPI_ERR_ARG, func);
	struct cm_mpi_comm *d = NULL;
	int mine, *all = NULL, rc;
	if (c->remote) {
		uint32_t pair;
		rc = agree_across(c->local, 0, c, 0, c->ctx_coll, CM_COMM_TAG_EXCHANGE, 0, NULL, 0,
		                  NULL, 0, &pair);
		if (!rc) {
			cm_mpi_group_ref(c->remote);
			rc = inter_new(c->group, c->rank, c->remote, pair, c->errhandler, &d);
		}
	} else {
		all = malloc((size_t)c->size * sizeof *all);
		rc = all ? next_pair(&mine) : MPI_ERR_NO_MEM;
		if (!rc)
			rc = cm_mpi_comm_allgather_ints(c, &mine, 1, all);
		if (!rc) {
			uint32_t pair = agreed_pair(all, 1, c->size);
			cm_mpi_group_ref(c->group);
			d = cm_mpi_comm_new(c->group, c->rank, pair, c->errhandler);
			rc = d ? topo_copy(c, d) : MPI_ERR_NO_MEM;
		}
	}
	if (!rc)
		rc = cm_mpi_attr_copy_all(c->attrs, c->handle, &d->attrs);
	free(all);
	if (rc) {
		if (d) {
			cm_mpi_attr_delete_all(&d->attrs, d->handle);
			cm_mpi_comm_drop_handle(d);
		}
		return cm_mpi_raise(c, rc, func);
	}
	*newcomm = d->handle;
	return MPI_SUCCESS;
}

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm)
{
	CM_MPI_REQUIRE_INIT("MPI_Comm_dup");
	return comm_dup(comm, newcomm, "MPI_Comm_dup");
}

/* No hint changes what the library does, so the new communicator is a
 * plain duplicate; the info handle must still be valid. */
int MPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm)
{
	CM_MPI_REQUIRE_INIT("MPI_Comm_dup_with_info");
	if (!cm_mpi_info_valid(info))
		return cm_mpi_raise(cm_mpi_comm_get(comm), MPI_ERR_INFO, "MPI_Comm_dup_with_info");
	return comm_dup(comm, newcomm, "MPI_Comm_dup_with_info");
}

/* ---- MPI_Comm_idup ---- */

/* The coroutine's arguments: the parent (alive as long as the request,
 * which holds a reference), the new communicator (pending: no handle
 * reaches it, so nothing frees it meanwhile) and, at the leader, the
 * number of the pair in its slice. */
struct idup_args {
	struct cm_mpi_comm *parent, *d;
	int k;
};

/* The leader broadcasts [its world rank, k]. Of an inter-communicator,
 * each group's leader took two numbers (the second for the local
 * intra-communicator); the leaders swap theirs and both groups take the
 * pair of the leader with the lower world rank. */
static int run_idup(const void *args)
{
	const struct idup_args *a = args;
	struct cm_mpi_comm *p = a->parent, *d = a->d;
	const struct cm_mpi_datatype *ints = cm_mpi_type_get(MPI_INT);
	/* on the coroutine's stack, which lives until it returns */
	int lead[2] = {cm_mpi_world_rank(p, 0), a->k}, theirs[2];
	int rc = MPI_SUCCESS;
	if (p->remote && p->rank == 0) {
		struct cm_coll k;
		cm_coll_begin(&k, p, CM_COMM_TAG_EXCHANGE);
		rc = cm_coll_sendrecv(&k, lead, 2, ints, 0, theirs, 2, ints, 0, 0);
		if (!rc && theirs[0] < lead[0])
			memcpy(lead, theirs, sizeof lead);
	}
	if (!rc)
		rc = cm_coll_bcast(p->remote ? p->local : p, lead, 2, ints, 0);
	uint32_t pair, local_pair = 0;
	if (!rc)
		rc = cm_mpi_ctx_idup_pair(lead[0], lead[1], &pair);
	if (!rc && d->local)
		rc = cm_mpi_ctx_idup_pair(lead[0], lead[1] + 1, &local_pair);
	if (!rc) {
		d->ctx_pt2pt = 2 * pair;
		d->ctx_coll = 2 * pair + 1;
		d->pending = 0;
		if (d->local) {
			d->local->ctx_pt2pt = 2 * local_pair;
			d->local->ctx_coll = 2 * local_pair + 1;
			d->local->pending = 0;
		}
	}
	/* On error the communicator stays pending: its handle, which the
	 * program holds, keeps naming nothing. */
	return cm_mpi_raise(p, rc, "MPI_Comm_idup");
}

/* MPI_Comm_dup as if called now (attributes copied, error handler and
 * topology inherited), except that the context pair is learnt in a
 * non-blocking collective. *newcomm is written now; the communicator is
 * usable once the request completes (before, its handle is MPI_ERR_COMM). */
int MPI_Comm_idup(MPI_Comm comm, MPI_Comm *newcomm, MPI_Request *request)
{
	CM_MPI_REQUIRE_INIT("MPI_Comm_idup");
	struct cm_mpi_comm *c = cm_mpi_comm_get(comm);
	if (!c)
		return cm_mpi_raise(NULL, MPI_ERR_COMM, "MPI_Comm_idup");
	if (!newcomm || !request)
		return cm_mpi_raise(c, MPI_ERR_ARG, "MPI_Comm_idup");
	cm_mpi_group_ref(c->group);
	struct cm_mpi_comm *d = cm_mpi_comm_new(c->group, c->rank, 0, c->errhandler);
	int rc = MPI_ERR_NO_MEM;
	if (d) {
		d->pending = 1;
		rc = topo_copy(c, d);
	}
	if (!rc && c->remote) {
		cm_mpi_group_ref(c->group);
		if ((d->local = cm_mpi_comm_new(c->group, c->rank, 0, c->errhandler))) {
			d->local->pending = 1;
			cm_mpi_group_ref(c->remote);
			d->remote = c->remote;
		} else {
			rc = MPI_ERR_NO_MEM;
		}
	}
	if (!rc)
		rc = cm_mpi_attr_copy_all(c->attrs, c->handle, &d->attrs);
	int raised = 0;
	if (!rc) {
		struct idup_args a = {
		    .parent = c, .d = d, .k = c->rank == 0 ? cm_mpi_ctx_idup_lead() : 0};
		if (c->remote && c->rank == 0)
			cm_mpi_ctx_idup_lead(); /* k + 1: the local intra-communicator's */
		rc = cm_nbc_start("MPI_Comm_idup", comm, run_idup, &a, sizeof a, request);
		if (!rc) {
			*newcomm = d->handle;
			return MPI_SUCCESS;
		}
		raised = 1; /* by cm_nbc_start, or by run_idup before its first wait */
	}
	if (d) {
		cm_mpi_attr_delete_all(&d->attrs, d->handle);
		cm_mpi_comm_drop_handle(d);
	}
	return raised ? rc : cm_mpi_raise(c, rc, "MPI_Comm_idup");
}

int cm_mpi_comm_split(struct cm_mpi_comm *c, int color, int key, struct cm_mpi_comm **out)
{
	int P = c->size;
	int mine[3] = {color, key, 0};
	int *all = malloc((size_t)P * 3 * sizeof *all);
	int rc = all ? next_pair(&mine[2]) : MPI_ERR_NO_MEM;
	if (!rc)
		rc = cm_mpi_comm_allgather_ints(c, mine, 3, all);
	*out = NULL;
	if (!rc) {
		uint32_t pair = agreed_pair(all + 2, 3, P);
		struct cm_mpi_group *g = NULL;
		int my_rank = 0;
		if (color != MPI_UNDEFINED)
			rc = group_of_color(all, 3, c->group, color, c->rank, &g, &my_rank);
		if (g && !(*out = cm_mpi_comm_new(g, my_rank, pair, c->errhandler)))
			rc = MPI_ERR_NO_MEM;
	}
	free(all);
	return rc;
}

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm)
{
	CM_MPI_REQUIRE_INIT("MPI_Comm_split");
	struct cm_mpi_comm *c = cm_mpi_comm_get(comm), *d;
	if (!c)
		return cm_mpi_raise(NULL, MPI_ERR_COMM, "MPI_Comm_split");
	if (!newcomm || (color < 0 && color != MPI_UNDEFINED))
		return cm_mpi_raise(c, MPI_ERR_ARG, "MPI_Comm_split");
	int rc = c->remote ? inter_split(c, color, key, &d) : cm_mpi_comm_split(c, color, key, &d);
	if (rc)
		return cm_mpi_raise(c, rc, "MPI_Comm_split");
	*newcomm = d ? d->handle : MPI_COMM_NULL;
	return MPI_SUCCESS;
}

/* A host name as HOST_INTS ints for the exchange (NUL padded). */
enum { HOST_INTS = 64 };

static void host_name(int out[HOST_INTS], int undefined)
{
	char *name = (char *)out;
	memset(out, 0, HOST_INTS * sizeof(int));
	if (undefined)
		return; /* an empty name: MPI_UNDEFINED */
	if (gethostname(name, HOST_INTS * sizeof(int) - 1) < 0 || name[0] == '\0')
		strcpy(name, "localhost");
	name[HOST_INTS * sizeof(int) - 1] = '\0';
}

/* MPI_COMM_TYPE_SHARED: the processes on one host share memory. Every
 * process learns every host name; a host's color is its lowest rank. */
int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm *newcomm)
{
	CM_MPI_REQUIRE_INIT("MPI_Comm_split_type");
	struct cm_mpi_comm *c = cm_mpi_comm_get(comm), *d = NULL;
	if (!c || c->remote)
		return cm_mpi_raise(c, MPI_ERR_COMM, "MPI_Comm_split_type");
	if (!newcomm || (split_type != MPI_COMM_TYPE_SHARED && split_type != MPI_UNDEFINED))
		return cm_mpi_raise(c, MPI_ERR_ARG, "MPI_Comm_split_type");
	if (info != MPI_INFO_NULL)
		return cm_mpi_raise(c, MPI_ERR_INFO, "MPI_Comm_split_type");
	int mine[HOST_INTS];
	host_name(mine, split_type == MPI_UNDEFINED);
	int *all = malloc((size_t)c->size * HOST_INTS * sizeof *all);
	int rc = all ? cm_mpi_comm_allgather_ints(c, mine, HOST_INTS, all) : MPI_ERR_NO_MEM;
	if (!rc) {
		int color = MPI_UNDEFINED;
		for (int r = 0; r < c->size && split_type != MPI_UNDEFINED; r++)
			if (memcmp(all + (size_t)r * HOST_INTS, mine, sizeof mine) == 0) {
				color = r;
				break;
			}
		rc = cm_mpi_comm_split(c, color, key, &d);
	}
	free(all);
	if (rc)
		return cm_mpi_raise(c, rc, "MPI_Comm_split_type");
	*newcomm = d ? d->handle : MPI_COMM_NULL;
	return MPI_SUCCESS;
}

/* The communicator of group g, a subgroup of c's: the pair is agreed over
 * all of c (among_members 0, MPI_Comm_create) or among g's members only
 * (MPI_Comm_create_group, where a non-member returns at once). *out is
 * NULL for a process outside g. */
static int create_from_group(struct cm_mpi_comm *c, struct cm_mpi_group *g, int among_members,
                             struct cm_mpi_comm **out)
{
	*out = NULL;
	int my_rank = cm_mpi_group_rank_of(g, cm_mpi_world_rank(c, c->rank));
	if (among_members && my_rank == MPI_UNDEFINED)
		return MPI_SUCCESS;
	int P = among_members ? g->size : c->size;
	int *rank_of = malloc(((size_t)g->size + 1) * sizeof *rank_of);
	int *all = malloc(((size_t)P + 1) * sizeof *all);
	int mine, rc = rank_of && all ? MPI_SUCCESS : MPI_ERR_NO_MEM;
	for (int r = 0; !rc && r < g->size; r++)
		if ((rank_of[r] = cm_mpi_comm_rank_of(c, g->world_of[r])) == MPI_UNDEFINED)
			rc = MPI_ERR_GROUP;
	if (!rc)
		rc = next_pair(&mine);
	if (!rc)
		rc = among_members ? allgather_among(c, P, my_rank, rank_of, &mine, 1, all)
		                   : cm_mpi_comm_allgather_ints(c, &mine, 1, all);
	if (!rc) {
		uint32_t pair = agreed_pair(all, 1, P);
		if (my_rank != MPI_UNDEFINED) {
			cm_mpi_group_ref(g);
			*out = cm_mpi_comm_new(g, my_rank, pair, c->errhandler);
			if (!*out)
				rc = MPI_ERR_NO_MEM;
		}
	}
	free(rank_of);
	free(all);
	return rc;
}

/* The arguments both creation calls from a group take; inter_ok: an
 * inter-communicator is one. */
static int check_group_args(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm, int inter_ok,
                            struct cm_mpi_comm **c, struct cm_mpi_group **g)
{
	if (!(*c = cm_mpi_comm_get(comm)) || ((*c)->remote && !inter_ok))
		return MPI_ERR_COMM;
	if (!(*g = cm_mpi_group_get(group)))
		return MPI_ERR_GROUP;
	return newcomm ? MPI_SUCCESS : MPI_ERR_ARG;
}

int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm)
{
	CM_MPI_REQUIRE_INIT("MPI_Comm_create");
	struct cm_mpi_comm *c, *d;
	struct cm_mpi_group *g;
	int rc = check_group_args(comm, group, newcomm, 1, &c, &g);
	if (!rc)
		rc = c->remote ? inter_create(c, g, &d) : create_from_group(c, g, 0, &d);
	if (rc)
		return cm_mpi_raise(c, rc, "MPI_Comm_create");
	*newcomm = d ? d->handle : MPI_COMM_NULL;
	return MPI_SUCCESS;
}

/* Collective over the group's members only: the context agreement runs
 * among them (on c's collective context, addressed by c's ranks), so a
 * process outside the group takes no part and may be busy elsewhere.
 * Calls of one process are sequential (threads are at most FUNNELED), so
 * the tag distinguishes nothing the order of the calls does not. */
int MPI_Comm_create_group(MPI_Comm comm, MPI_Group group, int tag, MPI_Comm *newcomm)
{
	CM_MPI_REQUIRE_INIT("MPI_Comm_create_group");
	struct cm_mpi_comm *c, *d;
	struct cm_mpi_group *g;
	int rc = check_group_args(comm, group, newcomm, 0, &c, &g);
	if (!rc && (tag < 0 || tag > CM_MPI_TAG_UB))
		rc = MPI_ERR_TAG;
	if (!rc)
		rc = create_from_group(c, g, 1, &d);
	if (rc)
		return cm_mpi_raise(c, rc, "MPI_Comm_create_group");
	*newcomm = d ? d->handle : MPI_COMM_NULL;
	return MPI_SUCCESS;
}

/* Local: the attributes are deleted now, the communicator goes once the
 * operations still pending on it complete. */
int MPI_Comm_free(MPI_Comm *comm)
{
	CM_MPI_REQUIRE_INIT("MPI_Comm_free");
	struct cm_mpi_comm *c = comm ? cm_mpi_comm_get(*comm) : NULL;
	if (!c || c->predefined)
		return cm_mpi_raise(c, MPI_ERR_COMM, "MPI_Comm_free");
	int rc = cm_mpi_attr_delete_all(&c->attrs, c->handle);
	if (rc)
		return cm_mpi_raise(c, rc, "MPI_Comm_free");
	cm_mpi_comm_drop_handle(c);
	*comm = MPI_COMM_NULL;
	return MPI_SUCCESS;
}

/* ---- local queries ---- */

int MPI_Comm_compare(MPI_Comm comm1, MPI_Comm comm2, int *result)
{
	CM_MPI_REQUIRE_INIT("MPI_Comm_compare");
	struct cm_mpi_comm *c1 = cm_mpi_comm_get(comm1), *c2 = cm_mpi_comm_get(comm2);
	if (!c1 || !c2)
		return cm_mpi_raise(c1, MPI_ERR_COMM, "MPI_Comm_compare");
	if (!result)
		return cm_mpi_raise(c1, MPI_ERR_ARG, "MPI_Comm_compare");
	if (c1 == c2) {
		*result = MPI_IDENT;
		return MPI_SUCCESS;
	}
	*result = MPI_UNEQUAL;
	if (!c1->remote != !c2->remote)
		return MPI_SUCCESS;
	int local = cm_mpi_group_compare(c1->group, c2->group);
	int remote = c1->remote ? cm_mpi_group_compare(c1->remote, c2->remote) : MPI_IDENT;
	/* The weaker of the two (MPI_IDENT < MPI_SIMILAR < MPI_UNEQUAL); two
	 * communicators are never more than congruent. */
	*result = local > remote ? local : remote;
	if (*result == MPI_IDENT)
		*result = MPI_CONGRUENT;
	return MPI_SUCCESS;
}

int MPI_Comm_test_inter(MPI_Comm comm, int *flag)
{
	CM_MPI_REQUIRE_INIT("MPI_Comm_test_inter");
	struct cm_mpi_comm *c = cm_mpi_comm_get(comm);
	if (!c)
		return cm_mpi_raise(NULL, MPI_ERR_COMM, "MPI_Comm_test_inter");
	if (!flag)
		return cm_mpi_raise(c, MPI_ERR_ARG, "MPI_Comm_test_inter");
	*flag = c->remote != NULL;
	return MPI_SUCCESS;
}

int MPI_Comm_set_name(MPI_Comm comm, const char *comm_name)
{
	CM_MPI_REQUIRE_INIT("MPI_Comm_set_name");
	struct cm_mpi_comm *c = cm_mpi_comm_get(comm);
	if (!c)
		return cm_mpi_raise(NULL, MPI_ERR_COMM, "MPI_Comm_set_name");
	if (!comm_name)
		return cm_mpi_raise(c, MPI_ERR_ARG, "MPI_Comm_set_name");
	/* Longer names are truncated, as the standard allows. */
	snprintf(c->name, sizeof c->name, "%s", comm_name);
	return MPI_SUCCESS;
}

int MPI_Comm_get_name(MPI_Comm comm, char *comm_name, int *resultlen)
{
	CM_MPI_REQUIRE_INIT("MPI_Comm_get_name");
	struct cm_mpi_comm *c = cm_mpi_comm_get(comm);
	if (!c)
		return cm_mpi_raise(NULL, MPI_ERR_COMM, "MPI_Comm_get_name");
	if (!comm_name || !resultlen)
		return cm_mpi_raise(c, MPI_ERR_ARG, "MPI_Comm_get_name");
	size_t len = strnlen(c->name, sizeof c->name - 1);
	memcpy(comm_name, c->name, len);
	comm_name[len] = '\0';
	*resultlen = (int)len;
	return MPI_SUCCESS;
}
