/* comm_cart: Cartesian topologies.
 *
 * MPI_Dims_create on fixed inputs; a 3 x 2 grid, periodic in the first
 * dimension only, over the first 6 ranks (the others get MPI_COMM_NULL);
 * coordinates and ranks both ways; shifts in both dimensions and both
 * directions (periodic wrap, MPI_PROC_NULL at non-periodic edges); a halo
 * exchange with MPI_Sendrecv along the shifts; MPI_Cart_get,
 * MPI_Cartdim_get, MPI_Topo_test; MPI_Cart_sub into rows and columns; a
 * duplicate keeps the topology. Needs at least 6 ranks; the expected
 * output is for 7. */
#include "testutil.h"

#include <stdio.h>
#include <string.h>

static void dims_case(int nnodes, int ndims, const int *given)
{
	int dims[8] = {0};
	char in[64] = "", out[64] = "";
	for (int i = 0; i < ndims; i++) {
		dims[i] = given ? given[i] : 0;
		size_t len = strlen(in);
		snprintf(in + len, sizeof in - len, "%s%d", i ? "," : "", dims[i]);
	}
	TU_MPI(MPI_Dims_create(nnodes, ndims, dims));
	long product = 1;
	for (int i = 0; i < ndims; i++) {
		product *= dims[i];
		size_t len = strlen(out);
		snprintf(out + len, sizeof out - len, "%s%d", i ? "," : "", dims[i]);
	}
	TU_CHECK(product == nnodes, "Dims_create(%d, %d): product %ld", nnodes, ndims, product);
	if (tu_rank == 0)
		printf("Dims_create(%d, [%s]) = [%s]\n", nnodes, in, out);
}

static const char *rank_name(int r, char *buf)
{
	if (r == MPI_PROC_NULL)
		return "PROC_NULL";
	snprintf(buf, 16, "%d", r);
	return buf;
}

int main(int argc, char **argv)
{
	tu_init(&argc, &argv, "comm_cart");
	tu_require_size(6, 64);

	dims_case(6, 2, NULL);
	dims_case(12, 2, NULL);
	dims_case(16, 3, NULL);
	dims_case(36, 3, NULL);
	dims_case(7, 2, NULL);
	dims_case(1, 3, NULL);
	dims_case(24, 3, (const int[]){0, 3, 0});
	dims_case(30, 3, (const int[]){2, 0, 0});

	int topo = -1;
	TU_MPI(MPI_Topo_test(MPI_COMM_WORLD, &topo));
	TU_CHECK(topo == MPI_UNDEFINED, "MPI_COMM_WORLD has a topology: %d", topo);

	int dims[2] = {3, 2}, periods[2] = {1, 0};
	MPI_Comm grid;
	TU_MPI(MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &grid));
	char line[256];
	if (grid == MPI_COMM_NULL) {
		TU_CHECK(tu_rank >= 6, "rank %d left out of a 6-rank grid", tu_rank);
		snprintf(line, sizeof line, "rank %d: not in the grid", tu_rank);
		tu_print_ranked(line);
		tu_print_ranked(line);
		tu_print_ranked(line);
		if (tu_rank == 0)
			printf("comm_cart: all checks passed\n");
		return tu_finalize();
	}
	int r, n, nd = -1;
	TU_MPI(MPI_Comm_rank(grid, &r));
	TU_MPI(MPI_Comm_size(grid, &n));
	TU_MPI(MPI_Topo_test(grid, &topo));
	TU_MPI(MPI_Cartdim_get(grid, &nd));
	TU_CHECK(n == 6 && r == tu_rank && topo == MPI_CART && nd == 2,
	         "grid: rank %d of %d, topology %d, %d dims", r, n, topo, nd);
	int coords[2], gd[2], gp[2], gc[2], back = -1;
	TU_MPI(MPI_Cart_coords(grid, r, 2, coords));
	TU_MPI(MPI_Cart_get(grid, 2, gd, gp, gc));
	TU_MPI(MPI_Cart_rank(grid, coords, &back));
	TU_CHECK(gd[0] == 3 && gd[1] == 2 && gp[0] == 1 && gp[1] == 0 && gc[0] == coords[0] &&
	             gc[1] == coords[1] && back == r,
	         "Cart_get/Cart_rank disagree with Cart_coords");
	/* A coordinate outside a periodic dimension wraps. */
	int wrapped[2] = {coords[0] + 3, coords[1]}, wr = -1;
	TU_MPI(MPI_Cart_rank(grid, wrapped, &wr));
	TU_CHECK(wr == r, "periodic coordinate %d did not wrap to rank %d (%d)", wrapped[0], r, wr);

	int up, down, left, right, up2, down2;
	char a[16], b[16], c[16], d[16];
	TU_MPI(MPI_Cart_shift(grid, 0, 1, &up, &down));
	TU_MPI(MPI_Cart_shift(grid, 1, 1, &left, &right));
	TU_MPI(MPI_Cart_shift(grid, 0, 2, &up2, &down2));
	snprintf(line, sizeof line,
	         "rank %d: coords (%d,%d) dim0 src %s dst %s, dim1 src %s dst %s, dim0+2 dst %s", r,
	         coords[0], coords[1], rank_name(up, a), rank_name(down, b), rank_name(left, c),
	         rank_name(right, d), rank_name(down2, a));
	tu_print_ranked(line);

	/* Halo exchange along both dimensions: each rank sends its rank to
	 * the destination of the shift and receives from the source (nothing
	 * from MPI_PROC_NULL). */
	int got[2] = {-5, -5};
	int srcs[2] = {up, left}, dsts[2] = {down, right};
	for (int dim = 0; dim < 2; dim++) {
		MPI_Status st;
		TU_MPI(MPI_Sendrecv(&r, 1, MPI_INT, dsts[dim], 40 + dim, &got[dim], 1, MPI_INT,
		                    srcs[dim], 40 + dim, grid, &st));
		int want = srcs[dim] == MPI_PROC_NULL ? -5 : srcs[dim];
		TU_CHECK(got[dim] == want, "halo dim %d: got %d want %d", dim, got[dim], want);
		TU_CHECK(st.MPI_SOURCE == srcs[dim], "halo dim %d: status source %d", dim,
		         st.MPI_SOURCE);
	}
	if (tu_rank == 0)
		printf("halo exchange along both dimensions: every rank got its sources' values\n");

	/* Rows (keep dimension 1) and columns (keep dimension 0). */
	MPI_Comm row, col;
	int keep_row[2] = {0, 1}, keep_col[2] = {1, 0};
	TU_MPI(MPI_Cart_sub(grid, keep_row, &row));
	TU_MPI(MPI_Cart_sub(grid, keep_col, &col));
	int rr, rn, cr, cn, rdims, rd[1], rp[1], rc[1];
	TU_MPI(MPI_Comm_rank(row, &rr));
	TU_MPI(MPI_Comm_size(row, &rn));
	TU_MPI(MPI_Comm_rank(col, &cr));
	TU_MPI(MPI_Comm_size(col, &cn));
	TU_MPI(MPI_Cartdim_get(row, &rdims));
	TU_MPI(MPI_Cart_get(col, 1, rd, rp, rc));
	TU_CHECK(rdims == 1 && rd[0] == 3 && rp[0] == 1 && rc[0] == coords[0],
	         "column topology: %d dims, [%d] periodic %d coord %d", rdims, rd[0], rp[0], rc[0]);
	int sum_row = 0, sum_col = 0;
	/* Ring sums inside the row and the column (point-to-point only). */
	for (int k = 0; k < rn; k++) {
		int v = -1, from = (rr + rn - k) % rn, to = (rr + k) % rn;
		TU_MPI(MPI_Sendrecv(&tu_rank, 1, MPI_INT, to, 50, &v, 1, MPI_INT, from, 50, row,
		                    MPI_STATUS_IGNORE));
		sum_row += v;
	}
	for (int k = 0; k < cn; k++) {
		int v = -1, from = (cr + cn - k) % cn, to = (cr + k) % cn;
		TU_MPI(MPI_Sendrecv(&tu_rank, 1, MPI_INT, to, 51, &v, 1, MPI_INT, from, 51, col,
		                    MPI_STATUS_IGNORE));
		sum_col += v;
	}
	snprintf(line, sizeof line,
	         "rank %d: row rank %d of %d (sum %d), column rank %d of %d (sum %d)", r, rr, rn,
	         sum_row, cr, cn, sum_col);
	tu_print_ranked(line);

	MPI_Comm copy;
	TU_MPI(MPI_Comm_dup(grid, &copy));
	int cd[2], cp[2], cc[2];
	TU_MPI(MPI_Cart_get(copy, 2, cd, cp, cc));
	TU_CHECK(cd[0] == 3 && cd[1] == 2 && cp[0] == 1 && cp[1] == 0 && cc[0] == coords[0] &&
	             cc[1] == coords[1],
	         "duplicate lost the topology");
	snprintf(line, sizeof line, "rank %d: duplicate keeps the 3x2 topology", r);
	tu_print_ranked(line);

	TU_MPI(MPI_Comm_free(&copy));
	TU_MPI(MPI_Comm_free(&row));
	TU_MPI(MPI_Comm_free(&col));
	TU_MPI(MPI_Comm_free(&grid));
	if (tu_rank == 0)
		printf("comm_cart: all checks passed\n");
	return tu_finalize();
}
