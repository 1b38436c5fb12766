/* Cartesian topologies. A Cartesian communicator is an ordinary one (made
 * by MPI_Comm_split over the old communicator, ranks never reordered) with
 * the grid attached; ranks map to coordinates in row-major order, the last
 * dimension varying fastest. */
#include <stdlib.h>
#include <string.h>

#include "mpi_internal.h"

static int *topo_dims(struct cm_mpi_topo *t)
{
	return t->v;
}

static int *topo_periods(struct cm_mpi_topo *t)
{
	return t->v + t->ndims;
}

static struct cm_mpi_topo *topo_new(int ndims)
{
	struct cm_mpi_topo *t = malloc(cm_mpi_topo_bytes(ndims));
	if (t)
		t->ndims = ndims;
	return t;
}

static void rank_to_coords(struct cm_mpi_topo *t, int rank, int coords[])
{
	for (int d = t->ndims - 1; d >= 0; d--) {
		coords[d] = rank % topo_dims(t)[d];
		rank /= topo_dims(t)[d];
	}
}

/* The Cartesian communicator behind a handle, as an error class. */
static int get_cart(MPI_Comm comm, struct cm_mpi_comm **c)
{
	*c = cm_mpi_comm_get(comm);
	if (!*c)
		return MPI_ERR_COMM;
	return (*c)->topo ? MPI_SUCCESS : MPI_ERR_TOPOLOGY;
}

/* ---- MPI_Dims_create ---- */

/* The search for the most balanced factorization: factors chosen in
 * non-increasing order from the divisors of the number to split. */
struct dims_search {
	const long *divisors; /* of the number to split, increasing */
	int ndivisors;
	int k;      /* factors wanted */
	long *cur;  /* [k] being built */
	long *best; /* [k] best so far */
	long best_spread;
};

static int power_at_least(long f, int n, long target)
{
	long p = 1;
	for (int i = 0; i < n; i++) {
		if (p >= target)
			return 1;
		p *= f;
	}
	return p >= target;
}

static void dims_search(struct dims_search *s, int i, long rest, long upper)
{
	if (i == s->k) {
		long spread = s->cur[0] - s->cur[s->k - 1];
		if (rest == 1 && (s->best_spread < 0 || spread < s->best_spread)) {
			s->best_spread = spread;
			memcpy(s->best, s->cur, (size_t)s->k * sizeof *s->cur);
		}
		return;
	}
	for (int j = s->ndivisors - 1; j >= 0; j--) {
		long f = s->divisors[j];
		if (f > upper || rest % f != 0)
			continue;
		/* The remaining factors are at most f: f^(k - i) must reach rest. */
		if (!power_at_least(f, s->k - i, rest))
			break;
		if (s->best_spread >= 0 && s->cur[0] - f >= s->best_spread && i > 0)
			break; /* already as spread as the best: smaller f only widens it */
		s->cur[i] = f;
		dims_search(s, i + 1, rest / f, f);
	}
}

int MPI_Dims_create(int nnodes, int ndims, int dims[])
{
	CM_MPI_REQUIRE_INIT("MPI_Dims_create");
	if (nnodes <= 0 || ndims < 0 || (ndims > 0 && !dims))
		return cm_mpi_raise(NULL, MPI_ERR_ARG, "MPI_Dims_create");
	long fixed = 1;
	int free_dims = 0;
	for (int d = 0; d < ndims; d++) {
		if (dims[d] < 0)
			return cm_mpi_raise(NULL, MPI_ERR_DIMS, "MPI_Dims_create");
		if (dims[d] == 0)
			free_dims++;
		else
			fixed *= dims[d];
		if (fixed > nnodes)
			return cm_mpi_raise(NULL, MPI_ERR_DIMS, "MPI_Dims_create");
	}
	if (nnodes % fixed != 0)
		return cm_mpi_raise(NULL, MPI_ERR_DIMS, "MPI_Dims_create");
	if (free_dims == 0)
		return fixed == nnodes ? MPI_SUCCESS
		                       : cm_mpi_raise(NULL, MPI_ERR_DIMS, "MPI_Dims_create");
	long rest = nnodes / fixed;
	long *divisors = malloc(((size_t)rest < 4096 ? (size_t)rest : 4096) * sizeof *divisors);
	long *cur = malloc(2 * (size_t)free_dims * sizeof *cur);
	if (!divisors || !cur) {
		free(divisors);
		free(cur);
		return cm_mpi_raise(NULL, MPI_ERR_NO_MEM, "MPI_Dims_create");
	}
	int n = 0;
	for (long f = 1; f * f <= rest; f++)
		if (rest % f == 0)
			divisors[n++] = f;
	for (int i = n - 1; i >= 0; i--)
		if (divisors[i] * divisors[i] != rest)
			divisors[n++] = rest / divisors[i];
	struct dims_search s = {.divisors = divisors,
	                        .ndivisors = n,
	                        .k = free_dims,
	                        .cur = cur,
	                        .best = cur + free_dims,
	                        .best_spread = -1};
	dims_search(&s, 0, rest, rest);
	for (int d = 0, i = 0; d < ndims; d++)
		if (dims[d] == 0)
			dims[d] = (int)s.best[i++];
	free(divisors);
	free(cur);
	return MPI_SUCCESS;
}

/* ---- creation ---- */

/* The first nnodes ranks of c (in order) form the grid; the others get
 * MPI_COMM_NULL. */
static int make_cart(struct cm_mpi_comm *c, int ndims, const int dims[], const int periods[],
                     int nnodes, struct cm_mpi_comm **out)
{
	struct cm_mpi_topo *t = topo_new(ndims);
	if (!t)
		return MPI_ERR_NO_MEM;
	for (int d = 0; d < ndims; d++) {
		topo_dims(t)[d] = dims[d];
		topo_periods(t)[d] = periods[d] != 0;
	}
	int rc = cm_mpi_comm_split(c, c->rank < nnodes ? 0 : MPI_UNDEFINED, c->rank, out);
	if (rc || !*out) {
		free(t);
		return rc;
	}
	(*out)->topo = t;
	return MPI_SUCCESS;
}

int MPI_Cart_create(MPI_Comm comm_old, int ndims, const int dims[], const int periods[],
                    int reorder, MPI_Comm *comm_cart)
{
	CM_MPI_REQUIRE_INIT("MPI_Cart_create");
	(void)reorder; /* keeping the old order is always a valid choice */
	struct cm_mpi_comm *c = cm_mpi_comm_get(comm_old), *d = NULL;
	if (!c || c->remote)
		return cm_mpi_raise(c, MPI_ERR_COMM, "MPI_Cart_create");
	if (ndims < 0 || (ndims > 0 && (!dims || !periods)) || !comm_cart)
		return cm_mpi_raise(c, MPI_ERR_ARG, "MPI_Cart_create");
	long nnodes = 1;
	for (int i = 0; i < ndims; i++) {
		if (dims[i] <= 0)
			return cm_mpi_raise(c, MPI_ERR_DIMS, "MPI_Cart_create");
		nnodes *= dims[i];
		if (nnodes > c->size)
			return cm_mpi_raise(c, MPI_ERR_ARG, "MPI_Cart_create");
	}
	int rc = make_cart(c, ndims, dims, periods, (int)nnodes, &d);
	if (rc)
		return cm_mpi_raise(c, rc, "MPI_Cart_create");
	*comm_cart = d ? d->handle : MPI_COMM_NULL;
	return MPI_SUCCESS;
}

/* The grid of the dimensions kept; each slice (same coordinates in the
 * dropped dimensions) becomes one communicator. */
int MPI_Cart_sub(MPI_Comm comm, const int remain_dims[], MPI_Comm *newcomm)
{
	CM_MPI_REQUIRE_INIT("MPI_Cart_sub");
	struct cm_mpi_comm *c, *d = NULL;
	int rc = get_cart(comm, &c);
	if (rc)
		return cm_mpi_raise(c, rc, "MPI_Cart_sub");
	struct cm_mpi_topo *t = c->topo;
	if ((t->ndims > 0 && !remain_dims) || !newcomm)
		return cm_mpi_raise(c, MPI_ERR_ARG, "MPI_Cart_sub");
	int *coords = malloc(3 * ((size_t)t->ndims + 1) * sizeof *coords);
	if (!coords)
		return cm_mpi_raise(c, MPI_ERR_NO_MEM, "MPI_Cart_sub");
	int *sub_dims = coords + t->ndims + 1, *sub_periods = sub_dims + t->ndims + 1;
	rank_to_coords(t, c->rank, coords);
	int color = 0, nsub = 0;
	for (int i = 0; i < t->ndims; i++) {
		if (remain_dims[i]) {
			sub_dims[nsub] = topo_dims(t)[i];
			sub_periods[nsub++] = topo_periods(t)[i];
		} else {
			color = color * topo_dims(t)[i] + coords[i];
		}
	}
	struct cm_mpi_topo *sub = topo_new(nsub);
	rc = sub ? cm_mpi_comm_split(c, color, c->rank, &d) : MPI_ERR_NO_MEM;
	if (!rc) {
		memcpy(topo_dims(sub), sub_dims, (size_t)nsub * sizeof(int));
		memcpy(topo_periods(sub), sub_periods, (size_t)nsub * sizeof(int));
		d->topo = sub;
	} else {
		free(sub);
	}
	free(coords);
	if (rc)
		return cm_mpi_raise(c, rc, "MPI_Cart_sub");
	*newcomm = d->handle;
	return MPI_SUCCESS;
}

/* ---- queries ---- */

int MPI_Topo_test(MPI_Comm comm, int *status)
{
	CM_MPI_REQUIRE_INIT("MPI_Topo_test");
	struct cm_mpi_comm *c = cm_mpi_comm_get(comm);
	if (!c)
		return cm_mpi_raise(NULL, MPI_ERR_COMM, "MPI_Topo_test");
	if (!status)
		return cm_mpi_raise(c, MPI_ERR_ARG, "MPI_Topo_test");
	*status = c->topo ? MPI_CART : MPI_UNDEFINED;
	return MPI_SUCCESS;
}

int MPI_Cartdim_get(MPI_Comm comm, int *ndims)
{
	CM_MPI_REQUIRE_INIT("MPI_Cartdim_get");
	struct cm_mpi_comm *c;
	int rc = get_cart(comm, &c);
	if (!rc && !ndims)
		rc = MPI_ERR_ARG;
	if (rc)
		return cm_mpi_raise(c, rc, "MPI_Cartdim_get");
	*ndims = c->topo->ndims;
	return MPI_SUCCESS;
}

int MPI_Cart_get(MPI_Comm comm, int maxdims, int dims[], int periods[], int coords[])
{
	CM_MPI_REQUIRE_INIT("MPI_Cart_get");
	struct cm_mpi_comm *c;
	int rc = get_cart(comm, &c);
	if (!rc &&
	    (maxdims < c->topo->ndims || (c->topo->ndims > 0 && (!dims || !periods || !coords))))
		rc = MPI_ERR_ARG;
	if (rc)
		return cm_mpi_raise(c, rc, "MPI_Cart_get");
	struct cm_mpi_topo *t = c->topo;
	memcpy(dims, topo_dims(t), (size_t)t->ndims * sizeof(int));
	memcpy(periods, topo_periods(t), (size_t)t->ndims * sizeof(int));
	rank_to_coords(t, c->rank, coords);
	return MPI_SUCCESS;
}

int MPI_Cart_coords(MPI_Comm comm, int rank, int maxdims, int coords[])
{
	CM_MPI_REQUIRE_INIT("MPI_Cart_coords");
	struct cm_mpi_comm *c;
	int rc = get_cart(comm, &c);
	if (!rc && (rank < 0 || rank >= c->size))
		rc = MPI_ERR_RANK;
	if (!rc && (maxdims < c->topo->ndims || (c->topo->ndims > 0 && !coords)))
		rc = MPI_ERR_ARG;
	if (rc)
		return cm_mpi_raise(c, rc, "MPI_Cart_coords");
	rank_to_coords(c->topo, rank, coords);
	return MPI_SUCCESS;
}

/* coords -> rank: a periodic dimension wraps, a coordinate outside a
 * non-periodic one is an error (MPI_ERR_ARG). */
static int coords_to_rank(struct cm_mpi_topo *t, const int coords[], int *rank)
{
	int r = 0;
	for (int d = 0; d < t->ndims; d++) {
		int n = topo_dims(t)[d], x = coords[d];
		if (topo_periods(t)[d])
			x = ((x % n) + n) % n;
		else if (x < 0 || x >= n)
			return MPI_ERR_ARG;
		r = r * n + x;
	}
	*rank = r;
	return MPI_SUCCESS;
}

int MPI_Cart_rank(MPI_Comm comm, const int coords[], int *rank)
{
	CM_MPI_REQUIRE_INIT("MPI_Cart_rank");
	struct cm_mpi_comm *c;
	int rc = get_cart(comm, &c);
	if (!rc && (!rank || (c->topo->ndims > 0 && !coords)))
		rc = MPI_ERR_ARG;
	if (!rc)
		rc = coords_to_rank(c->topo, coords, rank);
	return rc ? cm_mpi_raise(c, rc, "MPI_Cart_rank") : MPI_SUCCESS;
}

/* The neighbours disp steps down and up dimension direction: wrapped in a
 * periodic dimension, MPI_PROC_NULL past the edge of a non-periodic one. */
int MPI_Cart_shift(MPI_Comm comm, int direction, int disp, int *rank_source, int *rank_dest)
{
	CM_MPI_REQUIRE_INIT("MPI_Cart_shift");
	struct cm_mpi_comm *c;
	int rc = get_cart(comm, &c);
	if (!rc && (direction < 0 || direction >= c->topo->ndims || !rank_source || !rank_dest))
		rc = MPI_ERR_ARG;
	int *coords = rc ? NULL : malloc((size_t)c->topo->ndims * sizeof *coords);
	if (!rc && !coords)
		rc = MPI_ERR_NO_MEM;
	if (rc)
		return cm_mpi_raise(c, rc, "MPI_Cart_shift");
	struct cm_mpi_topo *t = c->topo;
	rank_to_coords(t, c->rank, coords);
	int mine = coords[direction];
	coords[direction] = (int)((long)mine + disp);
	if (coords_to_rank(t, coords, rank_dest))
		*rank_dest = MPI_PROC_NULL;
	coords[direction] = (int)((long)mine - disp);
	if (coords_to_rank(t, coords, rank_source))
		*rank_source = MPI_PROC_NULL;
	free(coords);
	return MPI_SUCCESS;
}

/* ---- memory ---- */

/* Plain heap memory: no transport here registers or pins anything. */
int MPI_Alloc_mem(MPI_Aint size, MPI_Info info, void *baseptr)
{
	CM_MPI_REQUIRE_INIT("MPI_Alloc_mem");
	if (size < 0 || !baseptr)
		return cm_mpi_raise(NULL, MPI_ERR_ARG, "MPI_Alloc_mem");
	if (info != MPI_INFO_NULL)
		return cm_mpi_raise(NULL, MPI_ERR_INFO, "MPI_Alloc_mem");
	void *p = malloc(size > 0 ? (size_t)size : 1);
	if (!p)
		return cm_mpi_raise(NULL, MPI_ERR_NO_MEM, "MPI_Alloc_mem");
	*(void **)baseptr = p;
	return MPI_SUCCESS;
}

int MPI_Free_mem(void *base)
{
	CM_MPI_REQUIRE_INIT("MPI_Free_mem");
	free(base);
	return MPI_SUCCESS;
}
