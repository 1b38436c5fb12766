/* cg: conjugate gradients on a distributed sparse matrix.
 *
 *   cg [-n M] [-i MAXITER]    the M x M grid Laplacian (default M = 40,
 *                             M*M unknowns), at most MAXITER iterations
 *                             (default 5000)
 *
 * A is the 5-point Laplacian of an M x M grid with zero Dirichlet edges
 * (4 on the diagonal, -1 for each grid neighbour): symmetric positive
 * definite. It is stored in CSR, rows block-distributed over the ranks
 * without regard to grid rows, so a rank's rows may need values from
 * several ranks (more than two when blocks are shorter than a grid row).
 * Set-up, as a sparse library does it: each rank lists the columns it does
 * not own, MPI_Alltoall tells every owner how many of its values each rank
 * needs and MPI_Alltoallv which ones. Every product A*p then starts with a
 * point-to-point halo exchange (MPI_Irecv/MPI_Isend/MPI_Waitall with just
 * those ranks); every dot product is an MPI_Allreduce.
 *
 * Self-check: b = A*x* for a known x*; CG from x = 0 must reach a relative
 * residual below 1e-10 within MAXITER iterations, the recomputed residual
 * ||b - A*x|| / ||b|| must agree, and the largest error |x - x*|
 * (MPI_Allreduce with MPI_MAX) must be below 1e-6.
 *
 * Output (deterministic for a given rank count and MPI): rank 0 prints the
 * residual every 10 iterations and the iteration count, every rank its
 * rows and the ranks it trades halo values with; the result line depends
 * on neither. A "step" for the
 * fault points (app_common.h) is an iteration. */
#include "app_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOLERANCE 1e-10
#define MAX_ERROR 1e-6
#define PRINT_EVERY 10

static long grid, unknowns; /* M, M*M */
static long row_lo, nrows;  /* my rows [row_lo, row_lo + nrows) */

static long first_row(int rank)
{
	long base = unknowns / app_size, extra = unknowns % app_size;
	return rank * base + (rank < extra ? rank : extra);
}

static int owner(long row)
{
	int lo = 0, hi = app_size - 1; /* the last rank whose first row <= row */
	while (lo < hi) {
		int mid = (lo + hi + 1) / 2;
		if (first_row(mid) <= row)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}

/* The known solution. */
static double xstar(long g)
{
	return (double)((g * 37) % 101) / 50.0 - 1.0;
}

/* The local rows of A: CSR with global column numbers, then local ones
 * (owned columns first, then the ghosts in ascending order). */
struct matrix {
	long *rowptr, *col;
	double *val;
	long nghosts;
	long *ghost;                   /* global numbers of the ghost columns */
	int *recv_count, *recv_offset; /* per rank: ghosts it owns, where they go */
	int *send_count, *send_offset; /* per rank: my values it needs ... */
	long *send_index;              /* ... which ones (local rows) */
	double *send_buf;
	MPI_Request *requests;
};

static int cmp_long(const void *a, const void *b)
{
	long x = *(const long *)a, y = *(const long *)b;
	return (x > y) - (x < y);
}

static void build(struct matrix *A)
{
	A->rowptr = app_alloc((size_t)(nrows + 1) * sizeof(long));
	A->col = app_alloc((size_t)nrows * 5 * sizeof(long));
	A->val = app_alloc((size_t)nrows * 5 * sizeof(double));
	long *outside = app_alloc((size_t)nrows * 5 * sizeof(long)), nout = 0, nz = 0;
	for (long r = 0; r < nrows; r++) {
		long g = row_lo + r, i = g / grid, j = g % grid;
		long nb[5] = {i > 0 ? g - grid : -1, j > 0 ? g - 1 : -1, g,
		              j < grid - 1 ? g + 1 : -1, i < grid - 1 ? g + grid : -1};
		A->rowptr[r] = nz;
		for (int k = 0; k < 5; k++) {
			if (nb[k] < 0)
				continue;
			A->col[nz] = nb[k];
			A->val[nz++] = nb[k] == g ? 4.0 : -1.0;
			if (nb[k] < row_lo || nb[k] >= row_lo + nrows)
				outside[nout++] = nb[k];
		}
	}
	A->rowptr[nrows] = nz;
	qsort(outside, (size_t)nout, sizeof *outside, cmp_long);
	A->ghost = app_alloc((size_t)nout * sizeof(long));
	A->nghosts = 0;
	for (long k = 0; k < nout; k++)
		if (A->nghosts == 0 || A->ghost[A->nghosts - 1] != outside[k])
			A->ghost[A->nghosts++] = outside[k];
	free(outside);
	for (long k = 0; k < nz; k++) { /* global -> local column numbers */
		long c = A->col[k];
		if (c >= row_lo && c < row_lo + nrows) {
			A->col[k] = c - row_lo;
		} else {
			long *at =
			    bsearch(&c, A->ghost, (size_t)A->nghosts, sizeof(long), cmp_long);
			A->col[k] = nrows + (at - A->ghost);
		}
	}

	/* Who needs what: counts with MPI_Alltoall, indices with MPI_Alltoallv. */
	int P = app_size;
	A->recv_count = calloc((size_t)P, sizeof(int));
	A->recv_offset = app_alloc((size_t)P * sizeof(int));
	A->send_count = app_alloc((size_t)P * sizeof(int));
	A->send_offset = app_alloc((size_t)P * sizeof(int));
	APP_CHECK(A->recv_count, "out of memory");
	for (long k = 0; k < A->nghosts; k++)
		A->recv_count[owner(A->ghost[k])]++;
	MPI_Alltoall(A->recv_count, 1, MPI_INT, A->send_count, 1, MPI_INT, MPI_COMM_WORLD);
	int nsend = 0, nrecv = 0;
	for (int q = 0; q < P; q++) {
		A->recv_offset[q] = nrecv;
		nrecv += A->recv_count[q];
		A->send_offset[q] = nsend;
		nsend += A->send_count[q];
	}
	A->send_index = app_alloc((size_t)nsend * sizeof(long));
	MPI_Alltoallv(A->ghost, A->recv_count, A->recv_offset, MPI_LONG, A->send_index,
	              A->send_count, A->send_offset, MPI_LONG, MPI_COMM_WORLD);
	for (int k = 0; k < nsend; k++) {
		APP_CHECK(A->send_index[k] >= row_lo && A->send_index[k] < row_lo + nrows,
		          "asked for row %ld, which is not mine", A->send_index[k]);
		A->send_index[k] -= row_lo;
	}
	A->send_buf = app_alloc((size_t)nsend * sizeof(double));
	A->requests = app_alloc((size_t)P * 2 * sizeof(MPI_Request));
}

/* y = A*x; x holds nrows owned values and room for the ghosts after them. */
static void spmv(struct matrix *A, double *x, double *y)
{
	int n = 0;
	for (int q = 0; q < app_size; q++)
		if (A->recv_count[q] > 0)
			MPI_Irecv(x + nrows + A->recv_offset[q], A->recv_count[q], MPI_DOUBLE, q, 7,
			          MPI_COMM_WORLD, &A->requests[n++]);
	for (int q = 0; q < app_size; q++) {
		double *buf = A->send_buf + A->send_offset[q];
		for (int k = 0; k < A->send_count[q]; k++)
			buf[k] = x[A->send_index[A->send_offset[q] + k]];
		if (A->send_count[q] > 0)
			MPI_Isend(buf, A->send_count[q], MPI_DOUBLE, q, 7, MPI_COMM_WORLD,
			          &A->requests[n++]);
	}
	MPI_Waitall(n, A->requests, MPI_STATUSES_IGNORE);
	for (long r = 0; r < nrows; r++) {
		double s = 0.0;
		for (long k = A->rowptr[r]; k < A->rowptr[r + 1]; k++)
			s += A->val[k] * x[A->col[k]];
		y[r] = s;
	}
}

/* " 1 3" (the ranks this one trades halo values with) or " no rank". */
static const char *halo_peers(const struct matrix *A)
{
	static char text[256];
	size_t at = 0;
	text[0] = '\0';
	for (int q = 0; q < app_size && at < sizeof text - 16; q++)
		if (A->recv_count[q] > 0 || A->send_count[q] > 0)
			at += (size_t)snprintf(text + at, sizeof text - at, " %d", q);
	return at > 0 ? text : " no rank";
}

static double dot(const double *a, const double *b)
{
	double local = 0.0, all;
	for (long r = 0; r < nrows; r++)
		local += a[r] * b[r];
	MPI_Allreduce(&local, &all, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	return all;
}

int main(int argc, char **argv)
{
	long maxiter = 5000;
	grid = 40;
	const struct app_option options[] = {
	    {"-n", "M", &grid, 2, 3000},
	    {"-i", "MAXITER", &maxiter, 1, 1000000},
	};
	app_init(&argc, &argv, "cg", options, 2);
	unknowns = grid * grid;
	row_lo = first_row(app_rank);
	nrows = first_row(app_rank + 1) - row_lo;

	struct matrix A;
	build(&A);
	if (nrows == 0)
		printf("cg: rank %d: no rows\n", app_rank);
	else
		printf("cg: rank %d: rows %ld-%ld, %ld ghost values, halo with%s\n", app_rank,
		       row_lo, row_lo + nrows - 1, A.nghosts, halo_peers(&A));

	/* b = A*x*, row by row from the formula (no communication). */
	size_t ext = (size_t)(nrows + A.nghosts);
	double *b = app_alloc((size_t)nrows * sizeof *b), *x = app_alloc(ext * sizeof *x);
	double *r = app_alloc((size_t)nrows * sizeof *r), *p = app_alloc(ext * sizeof *p);
	double *q = app_alloc((size_t)nrows * sizeof *q);
	for (long i = 0; i < nrows; i++) {
		double s = 0.0;
		for (long k = A.rowptr[i]; k < A.rowptr[i + 1]; k++) {
			long c = A.col[k];
			s += A.val[k] * xstar(c < nrows ? row_lo + c : A.ghost[c - nrows]);
		}
		b[i] = s;
		x[i] = 0.0;
		r[i] = p[i] = b[i];
	}
	double bb = dot(b, b), rr = bb, rel = 1.0;
	APP_CHECK(bb > 0.0, "b is zero");
	if (app_rank == 0)
		printf("cg: %ldx%ld grid Laplacian, %ld unknowns, %d ranks\n", grid, grid, unknowns,
		       app_size);
	long it = 0;
	while (rel >= TOLERANCE && it < maxiter) {
		app_step(++it);
		spmv(&A, p, q);
		double alpha = rr / dot(p, q);
		for (long i = 0; i < nrows; i++) {
			x[i] += alpha * p[i];
			r[i] -= alpha * q[i];
		}
		double rr_next = dot(r, r);
		rel = sqrt(rr_next / bb);
		for (long i = 0; i < nrows; i++)
			p[i] = r[i] + (rr_next / rr) * p[i];
		rr = rr_next;
		if (app_rank == 0 && it % PRINT_EVERY == 0)
			printf("cg: iteration %ld: relative residual %.6e\n", it, rel);
	}
	APP_CHECK(rel < TOLERANCE, "no convergence in %ld iterations (relative residual %.3e)",
	          maxiter, rel);

	/* The true residual and the error against x*. */
	spmv(&A, x, q);
	double err = 0.0, maxerr;
	for (long i = 0; i < nrows; i++) {
		q[i] = b[i] - q[i];
		double e = fabs(x[i] - xstar(row_lo + i));
		err = e > err ? e : err;
	}
	double true_rel = sqrt(dot(q, q) / bb);
	MPI_Allreduce(&err, &maxerr, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	APP_CHECK(true_rel < 10 * TOLERANCE, "recomputed relative residual %.3e", true_rel);
	APP_CHECK(maxerr < MAX_ERROR, "largest error against the known solution %.3e", maxerr);
	if (app_rank == 0)
		printf("cg: converged in %ld iterations\n", it);
	if (app_rank == 0)
		printf("cg: result: %ld unknowns, relative residual below %.0e, largest error "
		       "against the known solution below %.0e: ok\n",
		       unknowns, TOLERANCE, MAX_ERROR);
	free(b), free(x), free(r), free(p), free(q);
	free(A.rowptr), free(A.col), free(A.val), free(A.ghost), free(A.recv_count);
	free(A.recv_offset), free(A.send_count), free(A.send_offset), free(A.send_index);
	free(A.send_buf), free(A.requests);
	MPI_Finalize();
	return 0;
}
