/* errors: error handlers, error classes and MPI_Abort.
 *
 * Mode "return" (default): with MPI_ERRORS_RETURN, invalid arguments give the
 * standard error class (rank, tag, count, buffer, communicator, datatype,
 * request), nothing is sent, communication works afterwards, and
 * MPI_Error_string/MPI_Error_class give sensible results for every class.
 * Mode "abort": after a Barrier, rank 1 calls MPI_Abort(MPI_COMM_WORLD, 7)
 * while the others are blocked in a receive: the job must end with status 7.
 * Mode "fatal": under the default MPI_ERRORS_ARE_FATAL, a send to an invalid
 * rank must stop the job with a non-zero status; reaching the next line is a
 * failure (exit status 2). */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ABORT_CODE = 7, TAG = 5 };

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
		printf("errors: %s: %s\n", what, tu_err_name(expected_class));
}

/* A value that is not a rank and not one of the special rank constants. */
static int invalid_rank_below(void)
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

static int invalid_negative_tag(void)
{
	int t = -3;
	while (t == MPI_ANY_TAG)
		t--;
	return t;
}

static void argument_errors(void)
{
	int v[4] = {1, 2, 3, 4};
	MPI_Status st;
	MPI_Request req = MPI_REQUEST_NULL;
	int bad_rank = invalid_rank_below();
	int bad_tag = invalid_negative_tag();

	expect_class(MPI_Send(v, 1, MPI_INT, tu_size, TAG, MPI_COMM_WORLD), MPI_ERR_RANK,
	             "MPI_Send to rank = size");
	expect_class(MPI_Send(v, 1, MPI_INT, bad_rank, TAG, MPI_COMM_WORLD), MPI_ERR_RANK,
	             "MPI_Send to a negative rank");
	expect_class(MPI_Recv(v, 1, MPI_INT, tu_size, TAG, MPI_COMM_WORLD, &st), MPI_ERR_RANK,
	             "MPI_Recv from rank = size");
	expect_class(MPI_Isend(v, 1, MPI_INT, tu_size + 3, TAG, MPI_COMM_WORLD, &req), MPI_ERR_RANK,
	             "MPI_Isend to rank = size + 3");
	expect_class(MPI_Irecv(v, 1, MPI_INT, bad_rank, TAG, MPI_COMM_WORLD, &req), MPI_ERR_RANK,
	             "MPI_Irecv from a negative rank");
	expect_class(MPI_Ssend(v, 1, MPI_INT, tu_size, TAG, MPI_COMM_WORLD), MPI_ERR_RANK,
	             "MPI_Ssend to rank = size");
	expect_class(MPI_Probe(tu_size, TAG, MPI_COMM_WORLD, &st), MPI_ERR_RANK,
	             "MPI_Probe of rank = size");

	expect_class(MPI_Send(v, 1, MPI_INT, 0, bad_tag, MPI_COMM_WORLD), MPI_ERR_TAG,
	             "MPI_Send with a negative tag");
	expect_class(MPI_Send(v, 1, MPI_INT, 0, MPI_ANY_TAG, MPI_COMM_WORLD), MPI_ERR_TAG,
	             "MPI_Send with tag MPI_ANY_TAG");
	expect_class(MPI_Recv(v, 1, MPI_INT, 0, bad_tag, MPI_COMM_WORLD, &st), MPI_ERR_TAG,
	             "MPI_Recv with a negative tag");
	expect_class(MPI_Isend(v, 1, MPI_INT, 0, bad_tag, MPI_COMM_WORLD, &req), MPI_ERR_TAG,
	             "MPI_Isend with a negative tag");

	expect_class(MPI_Send(v, -1, MPI_INT, 0, TAG, MPI_COMM_WORLD), MPI_ERR_COUNT,
	             "MPI_Send with count -1");
	expect_class(MPI_Recv(v, -1, MPI_INT, 0, TAG, MPI_COMM_WORLD, &st), MPI_ERR_COUNT,
	             "MPI_Recv with count -1");
	expect_class(MPI_Irecv(v, -1, MPI_INT, 0, TAG, MPI_COMM_WORLD, &req), MPI_ERR_COUNT,
	             "MPI_Irecv with count -1");

	expect_class(MPI_Send(NULL, 4, MPI_INT, 0, TAG, MPI_COMM_WORLD), MPI_ERR_BUFFER,
	             "MPI_Send of 4 ints from NULL");

	expect_class(MPI_Send(v, 1, MPI_INT, 0, TAG, MPI_COMM_NULL), MPI_ERR_COMM,
	             "MPI_Send on MPI_COMM_NULL");
	expect_class(MPI_Recv(v, 1, MPI_INT, 0, TAG, MPI_COMM_NULL, &st), MPI_ERR_COMM,
	             "MPI_Recv on MPI_COMM_NULL");
	int r = -1;
	expect_class(MPI_Comm_rank(MPI_COMM_NULL, &r), MPI_ERR_COMM,
	             "MPI_Comm_rank of MPI_COMM_NULL");

	expect_class(MPI_Send(v, 1, MPI_DATATYPE_NULL, 0, TAG, MPI_COMM_WORLD), MPI_ERR_TYPE,
	             "MPI_Send of MPI_DATATYPE_NULL");
	expect_class(MPI_Recv(v, 1, MPI_DATATYPE_NULL, 0, TAG, MPI_COMM_WORLD, &st), MPI_ERR_TYPE,
	             "MPI_Recv of MPI_DATATYPE_NULL");

	req = MPI_REQUEST_NULL;
	expect_class(MPI_Request_free(&req), MPI_ERR_REQUEST,
	             "MPI_Request_free of MPI_REQUEST_NULL");

	/* Nothing above may have sent anything. */
	int flag = 1;
	TU_MPI(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
	TU_CHECK(!flag, "an invalid call sent a message after all");
}

static void error_strings(void)
{
	static const int classes[] = {
	    MPI_SUCCESS,    MPI_ERR_BUFFER,    MPI_ERR_COUNT,   MPI_ERR_TYPE,     MPI_ERR_TAG,
	    MPI_ERR_COMM,   MPI_ERR_RANK,      MPI_ERR_REQUEST, MPI_ERR_ROOT,     MPI_ERR_GROUP,
	    MPI_ERR_OP,     MPI_ERR_ARG,       MPI_ERR_UNKNOWN, MPI_ERR_TRUNCATE, MPI_ERR_OTHER,
	    MPI_ERR_INTERN, MPI_ERR_IN_STATUS, MPI_ERR_PENDING,
	};
	int n = (int)(sizeof(classes) / sizeof(classes[0]));
	for (int i = 0; i < n; i++) {
		char text[MPI_MAX_ERROR_STRING + 1];
		int len = -1, cls = -1;
		memset(text, 0x7f, sizeof(text));
		TU_MPI(MPI_Error_string(classes[i], text, &len));
		TU_CHECK(len > 0 && len < MPI_MAX_ERROR_STRING && text[len] == '\0' &&
		             (int)strlen(text) == len,
		         "MPI_Error_string(%s): length %d", tu_err_name(classes[i]), len);
		TU_MPI(MPI_Error_class(classes[i], &cls));
		TU_CHECK(cls == classes[i], "MPI_Error_class(%s) gave %d", tu_err_name(classes[i]),
		         cls);
		for (int j = 0; j < i; j++)
			TU_CHECK(classes[j] != classes[i], "two error classes share the value %d",
			         classes[i]);
	}
	TU_CHECK(MPI_SUCCESS == 0, "MPI_SUCCESS is %d", MPI_SUCCESS);
	if (tu_rank == 0)
		printf("errors: MPI_Error_string/MPI_Error_class: %d classes, distinct, with "
		       "non-empty texts\n",
		       n);
}

static int return_mode(void)
{
	TU_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
	TU_MPI(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
	argument_errors();
	error_strings();
	TU_MPI(MPI_Barrier(MPI_COMM_WORLD));
	/* The errors left nothing behind: a ring of tokens still works. */
	int next = (tu_rank + 1) % tu_size, prev = (tu_rank + tu_size - 1) % tu_size;
	int out = tu_rank, in = -1;
	TU_MPI(MPI_Sendrecv(&out, 1, MPI_INT, next, TAG, &in, 1, MPI_INT, prev, TAG, MPI_COMM_WORLD,
	                    MPI_STATUS_IGNORE));
	TU_CHECK(in == prev, "token after the errors: %d from rank %d", in, prev);
	TU_MPI(MPI_Barrier(MPI_COMM_WORLD));
	if (tu_rank == 0) {
		printf("errors: %d invalid calls returned their error class; communication "
		       "continues\n",
		       checks_done);
		printf("errors: all checks passed\n");
	}
	return tu_finalize();
}

static int abort_mode(void)
{
	TU_MPI(MPI_Barrier(MPI_COMM_WORLD));
	if (tu_rank == 1)
		MPI_Abort(MPI_COMM_WORLD, ABORT_CODE);
	/* Nobody sends this: the others stay blocked until the job is torn down. */
	int v;
	MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	fprintf(stderr, "errors: rank %d: FAIL: a receive nobody sent to completed\n", tu_rank);
	return 2;
}

static int fatal_mode(void)
{
	if (tu_rank == 0) {
		int v = 1;
		MPI_Send(&v, 1, MPI_INT, tu_size, TAG, MPI_COMM_WORLD);
		fprintf(stderr, "errors: rank 0: FAIL: MPI_ERRORS_ARE_FATAL let MPI_Send to an "
		                "invalid rank return\n");
		fflush(stderr);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	MPI_Barrier(MPI_COMM_WORLD);
	return tu_finalize();
}

int main(int argc, char **argv)
{
	tu_init(&argc, &argv, "errors");
	tu_require_size(2, 64);
	const char *mode = argc > 1 ? argv[1] : "return";
	if (strcmp(mode, "return") == 0)
		return return_mode();
	if (strcmp(mode, "abort") == 0)
		return abort_mode();
	if (strcmp(mode, "fatal") == 0)
		return fatal_mode();
	tu_fail("unknown mode '%s' (return | abort | fatal)", mode);
}
