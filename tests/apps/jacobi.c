/* jacobi: steady-state heat on a square plate, by Jacobi iteration of the
 * 5-point stencil, on a 2-D Cartesian process grid.
 *
 *   jacobi [-n N] [-i MAXITER]    N x N interior points (default 32), at
 *                                 most MAXITER sweeps (default 2000)
 *
 * The edges are held at fixed temperatures (a parabola on the top edge, a
 * constant on the left, 0 elsewhere); the interior starts at 0. Each rank
 * owns a block of the plate (MPI_Dims_create, MPI_Cart_create,
 * MPI_Cart_coords) with a one-cell halo; every sweep it trades halo rows
 * (contiguous) and halo columns (an MPI_Type_vector) with its four
 * neighbours from MPI_Cart_shift (MPI_PROC_NULL at the plate's edges).
 * Every CHECK_EVERY sweeps an MPI_Allreduce(MPI_MAX) of the largest change
 * decides convergence. At the end the blocks are gathered on rank 0 with
 * MPI_Gatherv (each rank sends its block as an MPI_Type_create_subarray of
 * its haloed array) and rank 0 redoes the whole computation serially.
 *
 * Self-check: a point's new value depends only on its four neighbours'
 * old values, combined in the same order everywhere, and the maximum is
 * exact, so the parallel field must equal the serial one bit for bit, on
 * any process grid and with any MPI; the stopping sweep too. The field
 * must also obey the maximum principle (every value between the smallest
 * and largest edge temperature).
 *
 * Output (deterministic): rank 0 prints the grid, the largest change every
 * 100 sweeps and a result line that does not depend on the number of
 * ranks; every rank prints its block and the sum of its values. A "step"
 * for the fault points (app_common.h) is a sweep. */
#include "app_common.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK_EVERY 10
#define PRINT_EVERY 100
#define TOLERANCE 1e-2
#define TOP_PEAK 100.0
#define LEFT_TEMP 25.0

/* Temperature of edge cell (gi, gj) of the (n+2) x (n+2) plate, interior
 * cells 1..n; 0 for interior cells (the initial guess). */
static double edge_value(long gi, long gj, long n)
{
	if (gi == 0) { /* top: a parabola, TOP_PEAK in the middle */
		double x = (double)gj / (double)(n + 1);
		return TOP_PEAK * 4.0 * x * (1.0 - x);
	}
	if (gj == 0 && gi <= n)
		return LEFT_TEMP;
	return 0.0;
}

/* The stencil, shared by the parallel and serial sweeps so that both do
 * exactly the same floating-point operations. */
static inline double stencil(const double *u, long at, long width)
{
	return 0.25 * ((u[at - width] + u[at + width]) + (u[at - 1] + u[at + 1]));
}

/* One sweep over the rows x cols interior of a haloed array: returns the
 * largest change. */
static double sweep(const double *u, double *unew, long rows, long cols)
{
	long width = cols + 2;
	double change = 0.0;
	for (long i = 1; i <= rows; i++)
		for (long j = 1; j <= cols; j++) {
			long at = i * width + j;
			unew[at] = stencil(u, at, width);
			double d = fabs(unew[at] - u[at]);
			if (d > change)
				change = d;
		}
	return change;
}

/* Rows (or columns) of n owned by block `part` of `parts`. */
static void split(long n, int parts, int part, long *first, long *count)
{
	long base = n / parts, extra = n % parts;
	*first = part * base + (part < extra ? part : extra);
	*count = base + (part < extra ? 1 : 0);
}

/* A haloed (rows+2) x (cols+2) array for the block whose first interior
 * cell is global (row0, col0), edges set, interior 0. */
static double *plate(long row0, long col0, long rows, long cols, long n)
{
	double *u = app_alloc((size_t)(rows + 2) * (size_t)(cols + 2) * sizeof *u);
	for (long i = 0; i < rows + 2; i++)
		for (long j = 0; j < cols + 2; j++) {
			long gi = row0 + i - 1, gj = col0 + j - 1;
			bool edge = gi == 0 || gj == 0 || gi == n + 1 || gj == n + 1;
			u[i * (cols + 2) + j] = edge ? edge_value(gi, gj, n) : 0.0;
		}
	return u;
}

/* The serial computation: the same sweeps and the same convergence test
 * on the whole plate. Returns the field; *sweeps, the stopping sweep. */
static double *serial_jacobi(long n, long maxiter, long *sweeps)
{
	double *u = plate(1, 1, n, n, n), *unew = plate(1, 1, n, n, n);
	for (long it = 1; it <= maxiter; it++) {
		double change = sweep(u, unew, n, n);
		double *t = u;
		u = unew;
		unew = t;
		*sweeps = it;
		if ((it % CHECK_EVERY == 0 || it == maxiter) && change < TOLERANCE)
			break;
	}
	free(unew);
	return u;
}

int main(int argc, char **argv)
{
	long n = 32, maxiter = 2000;
	const struct app_option options[] = {
	    {"-n", "N", &n, 2, 4096},
	    {"-i", "MAXITER", &maxiter, 1, 1000000},
	};
	app_init(&argc, &argv, "jacobi", options, 2);

	int dims[2] = {0, 0}, periods[2] = {0, 0}, coords[2];
	MPI_Dims_create(app_size, 2, dims);
	if (dims[0] > n || dims[1] > n)
		app_fail("a %dx%d process grid needs N >= %d (N is %ld)", dims[0], dims[1],
		         dims[0] > dims[1] ? dims[0] : dims[1], n);
	MPI_Comm cart;
	MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart);
	int me;
	MPI_Comm_rank(cart, &me);
	MPI_Cart_coords(cart, me, 2, coords);
	int up, down, left, right;
	MPI_Cart_shift(cart, 0, 1, &up, &down);
	MPI_Cart_shift(cart, 1, 1, &left, &right);

	long row0, rows, col0, cols;
	split(n, dims[0], coords[0], &row0, &rows);
	split(n, dims[1], coords[1], &col0, &cols);
	row0++, col0++; /* interior cells start at 1 */
	long width = cols + 2;
	double *u = plate(row0, col0, rows, cols, n), *unew = plate(row0, col0, rows, cols, n);

	MPI_Datatype column;
	MPI_Type_vector((int)rows, 1, (int)width, MPI_DOUBLE, &column);
	MPI_Type_commit(&column);

	if (me == 0)
		printf("jacobi: %ldx%ld interior points on a %dx%d process grid\n", n, n, dims[0],
		       dims[1]);
	long sweeps = 0;
	double change = 0.0;
	for (long it = 1; it <= maxiter; it++) {
		app_step(it);
		/* Halo rows with the ranks above and below, then halo columns
		 * (the vector type) with the ranks left and right. */
		MPI_Sendrecv(&u[width + 1], (int)cols, MPI_DOUBLE, up, 1,
		             &u[(rows + 1) * width + 1], (int)cols, MPI_DOUBLE, down, 1, cart,
		             MPI_STATUS_IGNORE);
		MPI_Sendrecv(&u[rows * width + 1], (int)cols, MPI_DOUBLE, down, 2, &u[1], (int)cols,
		             MPI_DOUBLE, up, 2, cart, MPI_STATUS_IGNORE);
		MPI_Sendrecv(&u[width + 1], 1, column, left, 3, &u[width + cols + 1], 1, column,
		             right, 3, cart, MPI_STATUS_IGNORE);
		MPI_Sendrecv(&u[width + cols], 1, column, right, 4, &u[width], 1, column, left, 4,
		             cart, MPI_STATUS_IGNORE);
		double local = sweep(u, unew, rows, cols);
		double *t = u;
		u = unew;
		unew = t;
		sweeps = it;
		if (it % CHECK_EVERY == 0 || it == maxiter) {
			MPI_Allreduce(&local, &change, 1, MPI_DOUBLE, MPI_MAX, cart);
			if (me == 0 && it % PRINT_EVERY == 0)
				printf("jacobi: sweep %ld: largest change %.6e\n", it, change);
			if (change < TOLERANCE)
				break;
		}
	}

	double block_sum = 0.0;
	for (long i = 1; i <= rows; i++)
		for (long j = 1; j <= cols; j++)
			block_sum += u[i * width + j];
	printf("jacobi: rank %d: rows %ld-%ld, columns %ld-%ld: sum %.12e\n", me, row0,
	       row0 + rows - 1, col0, col0 + cols - 1, block_sum);

	/* Gather the blocks on rank 0: each sends its interior as a subarray
	 * of its haloed array, rank 0 receives them packed, rank after rank. */
	int sizes[2] = {(int)rows + 2, (int)cols + 2}, sub[2] = {(int)rows, (int)cols};
	int starts[2] = {1, 1};
	MPI_Datatype interior;
	MPI_Type_create_subarray(2, sizes, sub, starts, MPI_ORDER_C, MPI_DOUBLE, &interior);
	MPI_Type_commit(&interior);
	int *counts = NULL, *displs = NULL;
	double *packed = NULL;
	if (me == 0) {
		counts = app_alloc((size_t)app_size * sizeof *counts);
		displs = app_alloc((size_t)app_size * sizeof *displs);
		for (int r = 0, at = 0; r < app_size; r++) {
			int c[2];
			long f0, n0, f1, n1;
			MPI_Cart_coords(cart, r, 2, c);
			split(n, dims[0], c[0], &f0, &n0);
			split(n, dims[1], c[1], &f1, &n1);
			counts[r] = (int)(n0 * n1);
			displs[r] = at;
			at += counts[r];
		}
		packed = app_alloc((size_t)n * (size_t)n * sizeof *packed);
	}
	MPI_Gatherv(u, 1, interior, packed, counts, displs, MPI_DOUBLE, 0, cart);

	if (me == 0) {
		long serial_sweeps = 0;
		double *want = serial_jacobi(n, maxiter, &serial_sweeps);
		APP_CHECK(serial_sweeps == sweeps,
		          "stopped after %ld sweeps, the serial run after %ld", sweeps,
		          serial_sweeps);
		double sum = 0.0;
		for (int r = 0; r < app_size; r++) {
			int c[2];
			long f0, n0, f1, n1;
			MPI_Cart_coords(cart, r, 2, c);
			split(n, dims[0], c[0], &f0, &n0);
			split(n, dims[1], c[1], &f1, &n1);
			for (long i = 0; i < n0; i++)
				for (long j = 0; j < n1; j++) {
					double got = packed[displs[r] + i * n1 + j];
					double exp = want[(f0 + 1 + i) * (n + 2) + f1 + 1 + j];
					APP_CHECK(
					    got == exp,
					    "cell (%ld, %ld) of rank %d is %.17g, serially %.17g",
					    f0 + 1 + i, f1 + 1 + j, r, got, exp);
					APP_CHECK(
					    got >= 0.0 && got <= TOP_PEAK,
					    "cell (%ld, %ld) is %g, outside the edge temperatures",
					    f0 + 1 + i, f1 + 1 + j, got);
				}
		}
		for (long i = 1; i <= n; i++) /* in plate order: independent of the grid */
			for (long j = 1; j <= n; j++)
				sum += want[i * (n + 2) + j];
		printf("jacobi: result: %ldx%ld, %s after %ld sweeps, field sum %.12e, "
		       "equal to the serial computation: ok\n",
		       n, n, change < TOLERANCE ? "converged" : "not converged", sweeps, sum);
		free(want);
		free(packed);
		free(counts);
		free(displs);
	}
	MPI_Type_free(&interior);
	MPI_Type_free(&column);
	MPI_Comm_free(&cart);
	free(u);
	free(unew);
	MPI_Finalize();
	return 0;
}
