/* coll_errors: argument errors of the collectives and reduction operations.
 *
 * Mode "return" (default): with MPI_ERRORS_RETURN on MPI_COMM_WORLD, every
 * rank makes the same invalid call, so each detects the error before
 * sending anything; the call must return the standard error class, and
 * the collectives must work normally afterwards.
 * Mode "fatal": under the default MPI_ERRORS_ARE_FATAL, an MPI_Bcast with
 * a root out of range must end the job with a non-zero status; reaching the
 * next line is a failure (exit status 2). */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int checks_done;

static void expect_class(int rc, int expected_class, const char *what)
{
	int cls = -1;
	TU_CHECK(rc != MPI_SUCCESS, "%s: returned MPI_SUCCESS, expected %s", what,
	         tu_err_name(expected_class));
	TU_MPI(MPI_Error_class(rc, &cls));
	TU_CHECK(cls == expected_class, "%s: returned %s, expected %s", what, tu_err_name(rc),
	         tu_err_name(expected_class));
	checks_done++;
	if (tu_rank == 0)
		printf("coll_errors: %s: %s\n", what, tu_err_name(expected_class));
}

/* A negative value that is not one of the special rank constants. */
static int invalid_root_below(void)
{
	int r = -1000;
#ifdef MPI_ROOT
	while (r == MPI_PROC_NULL || r == MPI_ANY_SOURCE || r == MPI_ROOT)
		r--;
#else
	while (r == MPI_PROC_NULL || r == MPI_ANY_SOURCE)
		r--;
#endif
	return r;
}

static void noop_fn(void *in, void *inout, int *len, MPI_Datatype *type)
{
	(void)in;
	(void)inout;
	(void)len;
	(void)type;
}

static void argument_errors(void)
{
	int P = tu_size;
	int a[4] = {1, 2, 3, 4}, b[4 * 64];
	double d[2] = {1.0, 2.0}, e[2];
	int *counts = calloc((size_t)P, sizeof(int)), *displs = calloc((size_t)P, sizeof(int));
	TU_CHECK(counts && displs, "out of memory");

	/* roots */
	expect_class(MPI_Bcast(a, 4, MPI_INT, P, MPI_COMM_WORLD), MPI_ERR_ROOT,
	             "MPI_Bcast with root = size");
	expect_class(MPI_Bcast(a, 4, MPI_INT, invalid_root_below(), MPI_COMM_WORLD), MPI_ERR_ROOT,
	             "MPI_Bcast with a negative root");
	expect_class(MPI_Reduce(a, b, 4, MPI_INT, MPI_SUM, P, MPI_COMM_WORLD), MPI_ERR_ROOT,
	             "MPI_Reduce with root = size");
	expect_class(MPI_Gather(a, 1, MPI_INT, b, 1, MPI_INT, P + 2, MPI_COMM_WORLD), MPI_ERR_ROOT,
	             "MPI_Gather with root = size + 2");
	expect_class(MPI_Scatter(b, 1, MPI_INT, a, 1, MPI_INT, P, MPI_COMM_WORLD), MPI_ERR_ROOT,
	             "MPI_Scatter with root = size");
	expect_class(MPI_Gatherv(a, 1, MPI_INT, b, counts, displs, MPI_INT, invalid_root_below(),
	                         MPI_COMM_WORLD),
	             MPI_ERR_ROOT, "MPI_Gatherv with a negative root");
	expect_class(MPI_Scatterv(b, counts, displs, MPI_INT, a, 1, MPI_INT, P, MPI_COMM_WORLD),
	             MPI_ERR_ROOT, "MPI_Scatterv with root = size");

	/* ops */
	expect_class(MPI_Allreduce(a, b, 4, MPI_INT, MPI_OP_NULL, MPI_COMM_WORLD), MPI_ERR_OP,
	             "MPI_Allreduce with MPI_OP_NULL");
	expect_class(MPI_Allreduce(d, e, 2, MPI_DOUBLE, MPI_BAND, MPI_COMM_WORLD), MPI_ERR_OP,
	             "MPI_Allreduce MPI_BAND on MPI_DOUBLE");
	expect_class(MPI_Allreduce(d, e, 2, MPI_FLOAT, MPI_LXOR, MPI_COMM_WORLD), MPI_ERR_OP,
	             "MPI_Allreduce MPI_LXOR on MPI_FLOAT");
	expect_class(MPI_Allreduce(a, b, 4, MPI_INT, MPI_MAXLOC, MPI_COMM_WORLD), MPI_ERR_OP,
	             "MPI_Allreduce MPI_MAXLOC on MPI_INT");
	expect_class(MPI_Reduce(d, e, 1, MPI_C_DOUBLE_COMPLEX, MPI_MAX, 0, MPI_COMM_WORLD),
	             MPI_ERR_OP, "MPI_Reduce MPI_MAX on MPI_C_DOUBLE_COMPLEX");
	expect_class(MPI_Scan(a, b, 4, MPI_INT, MPI_OP_NULL, MPI_COMM_WORLD), MPI_ERR_OP,
	             "MPI_Scan with MPI_OP_NULL");
	expect_class(MPI_Exscan(d, e, 2, MPI_DOUBLE, MPI_BOR, MPI_COMM_WORLD), MPI_ERR_OP,
	             "MPI_Exscan MPI_BOR on MPI_DOUBLE");
	expect_class(MPI_Reduce_scatter_block(a, b, 1, MPI_INT, MPI_OP_NULL, MPI_COMM_WORLD),
	             MPI_ERR_OP, "MPI_Reduce_scatter_block with MPI_OP_NULL");
	expect_class(MPI_Reduce_local(d, e, 2, MPI_DOUBLE, MPI_BXOR), MPI_ERR_OP,
	             "MPI_Reduce_local MPI_BXOR on MPI_DOUBLE");
	MPI_Op op = MPI_SUM;
	expect_class(MPI_Op_free(&op), MPI_ERR_OP, "MPI_Op_free of MPI_SUM");
	TU_MPI(MPI_Op_create(noop_fn, 1, &op));
	TU_MPI(MPI_Op_free(&op));
	TU_CHECK(op == MPI_OP_NULL, "MPI_Op_free did not set MPI_OP_NULL");
	expect_class(MPI_Op_free(&op), MPI_ERR_OP, "MPI_Op_free of MPI_OP_NULL");

	/* counts, datatypes, communicators */
	expect_class(MPI_Allreduce(a, b, -1, MPI_INT, MPI_SUM, MPI_COMM_WORLD), MPI_ERR_COUNT,
	             "MPI_Allreduce with count -1");
	expect_class(MPI_Bcast(a, -1, MPI_INT, 0, MPI_COMM_WORLD), MPI_ERR_COUNT,
	             "MPI_Bcast with count -1");
	expect_class(MPI_Alltoall(a, -1, MPI_INT, b, -1, MPI_INT, MPI_COMM_WORLD), MPI_ERR_COUNT,
	             "MPI_Alltoall with counts -1");
	expect_class(MPI_Reduce_scatter_block(a, b, -1, MPI_INT, MPI_SUM, MPI_COMM_WORLD),
	             MPI_ERR_COUNT, "MPI_Reduce_scatter_block with count -1");
	expect_class(MPI_Bcast(a, 4, MPI_DATATYPE_NULL, 0, MPI_COMM_WORLD), MPI_ERR_TYPE,
	             "MPI_Bcast of MPI_DATATYPE_NULL");
	expect_class(MPI_Allgather(a, 1, MPI_DATATYPE_NULL, b, 1, MPI_INT, MPI_COMM_WORLD),
	             MPI_ERR_TYPE, "MPI_Allgather of MPI_DATATYPE_NULL");
	expect_class(MPI_Bcast(a, 4, MPI_INT, 0, MPI_COMM_NULL), MPI_ERR_COMM,
	             "MPI_Bcast on MPI_COMM_NULL");
	expect_class(MPI_Allreduce(a, b, 4, MPI_INT, MPI_SUM, MPI_COMM_NULL), MPI_ERR_COMM,
	             "MPI_Allreduce on MPI_COMM_NULL");
	expect_class(MPI_Alltoall(a, 1, MPI_INT, b, 1, MPI_INT, MPI_COMM_NULL), MPI_ERR_COMM,
	             "MPI_Alltoall on MPI_COMM_NULL");
	expect_class(MPI_Barrier(MPI_COMM_NULL), MPI_ERR_COMM, "MPI_Barrier on MPI_COMM_NULL");
	free(counts);
	free(displs);
}

/* After the errors, collectives still work (nothing was left half-sent). */
static void still_working(void)
{
	int mine = tu_rank + 1, sum = 0;
	TU_MPI(MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
	TU_CHECK(sum == tu_size * (tu_size + 1) / 2, "MPI_Allreduce after the errors: %d", sum);
	int v = tu_rank == 0 ? 42 : 0;
	TU_MPI(MPI_Bcast(&v, 1, MPI_INT, 0, MPI_COMM_WORLD));
	TU_CHECK(v == 42, "MPI_Bcast after the errors: %d", v);
	if (tu_rank == 0)
		printf("coll_errors: %d invalid calls returned their error class; collectives "
		       "continue\n",
		       checks_done);
}

int main(int argc, char **argv)
{
	tu_init(&argc, &argv, "coll_errors");
	const char *mode = argc > 1 ? argv[1] : "return";
	if (strcmp(mode, "fatal") == 0) {
		int v = 0;
		MPI_Bcast(&v, 1, MPI_INT, tu_size, MPI_COMM_WORLD);
		fprintf(stderr,
		        "coll_errors: rank %d: FAIL: MPI_Bcast with an invalid root "
		        "returned under MPI_ERRORS_ARE_FATAL\n",
		        tu_rank);
		return 2;
	}
	TU_CHECK(strcmp(mode, "return") == 0, "unknown mode '%s'", mode);
	TU_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
	argument_errors();
	still_working();
	TU_MPI(MPI_Barrier(MPI_COMM_WORLD));
	if (tu_rank == 0)
		printf("coll_errors: all checks passed\n");
	return tu_finalize();
}
