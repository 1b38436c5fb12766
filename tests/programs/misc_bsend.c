/* misc_bsend: buffered sends through the attached buffer.
 *
 * Usage: misc_bsend strict|lenient
 *   strict   also checks the MPI_ERR_BUFFER cases (no buffer attached, a
 *            message larger than the buffer), which MPI requires but Open
 *            MPI does not report (it falls back to a standard send)
 * - a buffer sized with MPI_Pack_size + MPI_BSEND_OVERHEAD holds the
 *   messages it was sized for while the receiver is not receiving yet
 *   (basic and derived datatypes);
 * - MPI_Ibsend, MPI_Bsend_init started twice;
 * - MPI_Buffer_detach hands back the buffer and its size;
 * - a small buffer reused by 50 acknowledged buffered sends.
 * Needs 2 ranks. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N = 100 };

int main(int argc, char **argv)
{
	tu_init(&argc, &argv, "misc_bsend");
	tu_require_size(2, 2);
	if (argc != 2 || (strcmp(argv[1], "strict") && strcmp(argv[1], "lenient")))
		tu_fail("usage: misc_bsend strict|lenient");
	int strict = strcmp(argv[1], "strict") == 0;
	MPI_Datatype column; /* one column of a 10 x 10 int matrix */
	TU_MPI(MPI_Type_vector(10, 1, 10, MPI_INT, &column));
	TU_MPI(MPI_Type_commit(&column));
	int data[N], got[N], matrix[100];
	int s_data, s_column;
	TU_MPI(MPI_Pack_size(N, MPI_INT, MPI_COMM_WORLD, &s_data));
	TU_MPI(MPI_Pack_size(1, column, MPI_COMM_WORLD, &s_column));

	if (tu_rank == 0 && strict) {
		TU_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
		int rc = MPI_Bsend(data, 1, MPI_INT, 1, 9, MPI_COMM_WORLD);
		TU_CHECK(rc != MPI_SUCCESS, "MPI_Bsend with no buffer attached succeeded");
		TU_CHECK(strcmp(tu_err_name(rc), "MPI_ERR_BUFFER") == 0, "no buffer: %s",
		         tu_err_name(rc));
		TU_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
	}

	/* Exactly room for 3 arrays and a column. */
	int size = 3 * (s_data + MPI_BSEND_OVERHEAD) + s_column + MPI_BSEND_OVERHEAD;
	char *space = malloc((size_t)size);
	TU_CHECK(space, "out of memory");
	TU_MPI(MPI_Buffer_attach(space, size));
	if (tu_rank == 0) {
		for (int t = 0; t < 3; t++) {
			for (int i = 0; i < N; i++)
				data[i] = t * 1000 + i;
			TU_MPI(MPI_Bsend(data, N, MPI_INT, 1, t, MPI_COMM_WORLD));
		}
		for (int i = 0; i < 100; i++)
			matrix[i] = i;
		TU_MPI(MPI_Bsend(matrix + 3, 1, column, 1, 3, MPI_COMM_WORLD));
		memset(data, 0, sizeof data); /* the buffer holds the copies */
		memset(matrix, 0, sizeof matrix);
		if (strict) {
			TU_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
			int big = size / (int)sizeof(int) + 1;
			int *huge = calloc((size_t)big, sizeof(int));
			int rc = MPI_Bsend(huge, big, MPI_INT, 1, 99, MPI_COMM_WORLD);
			TU_CHECK(strcmp(tu_err_name(rc), "MPI_ERR_BUFFER") == 0,
			         "a message larger than the buffer: %s", tu_err_name(rc));
			free(huge);
			TU_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
		}
	}
	TU_MPI(MPI_Barrier(MPI_COMM_WORLD)); /* the receiver starts only now */
	if (tu_rank == 1) {
		for (int t = 0; t < 3; t++) {
			TU_MPI(MPI_Recv(got, N, MPI_INT, 0, t, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
			for (int i = 0; i < N; i++)
				TU_CHECK(got[i] == t * 1000 + i, "message %d: [%d] = %d", t, i,
				         got[i]);
		}
		TU_MPI(MPI_Recv(got, 10, MPI_INT, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
		for (int i = 0; i < 10; i++)
			TU_CHECK(got[i] == i * 10 + 3, "column [%d] = %d", i, got[i]);
	} else {
		printf("a buffer of 3 x (Pack_size + MPI_BSEND_OVERHEAD) + a column's holds them "
		       "all before the receiver starts\n");
	}

	/* Ibsend and a persistent buffered send. */
	if (tu_rank == 0) {
		MPI_Request req;
		int v = 41;
		TU_MPI(MPI_Ibsend(&v, 1, MPI_INT, 1, 10, MPI_COMM_WORLD, &req));
		TU_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
		TU_MPI(MPI_Bsend_init(&v, 1, MPI_INT, 1, 11, MPI_COMM_WORLD, &req));
		for (v = 42; v < 44; v++) {
			TU_MPI(MPI_Start(&req));
			TU_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
		}
		TU_MPI(MPI_Request_free(&req));
	} else {
		int v[3];
		TU_MPI(MPI_Recv(&v[0], 1, MPI_INT, 0, 10, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
		TU_MPI(MPI_Recv(&v[1], 1, MPI_INT, 0, 11, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
		TU_MPI(MPI_Recv(&v[2], 1, MPI_INT, 0, 11, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
		TU_CHECK(v[0] == 41 && v[1] == 42 && v[2] == 43, "Ibsend/Bsend_init: %d %d %d",
		         v[0], v[1], v[2]);
	}

	void *back = NULL;
	int back_size = -1;
	TU_MPI(MPI_Buffer_detach(&back, &back_size));
	TU_CHECK(back == space && back_size == size, "detach gave %p/%d", back, back_size);
	if (tu_rank == 0)
		printf(
		    "MPI_Ibsend, MPI_Bsend_init twice; MPI_Buffer_detach gives back the buffer\n");

	/* A buffer with room for one message, reused 50 times. */
	int small_size = s_data + MPI_BSEND_OVERHEAD;
	TU_MPI(MPI_Buffer_attach(space, small_size));
	for (int k = 0; k < 50; k++) {
		int ack = -1;
		if (tu_rank == 0) {
			for (int i = 0; i < N; i++)
				data[i] = k + i;
			TU_MPI(MPI_Bsend(data, N, MPI_INT, 1, 20, MPI_COMM_WORLD));
			TU_MPI(
			    MPI_Recv(&ack, 1, MPI_INT, 1, 21, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
			TU_CHECK(ack == k, "ack %d", ack);
		} else {
			TU_MPI(MPI_Recv(got, N, MPI_INT, 0, 20, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
			TU_CHECK(got[0] == k && got[N - 1] == k + N - 1, "round %d", k);
			TU_MPI(MPI_Send(&k, 1, MPI_INT, 0, 21, MPI_COMM_WORLD));
		}
	}
	TU_MPI(MPI_Buffer_detach(&back, &back_size));
	TU_CHECK(back == space && back_size == small_size, "second detach gave %p/%d", back,
	         back_size);
	if (tu_rank == 0)
		printf("a one-message buffer reused by 50 acknowledged buffered sends\n");

	if (tu_rank == 0 && strict) {
		TU_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
		int rc = MPI_Bsend(data, 1, MPI_INT, 1, 9, MPI_COMM_WORLD);
		TU_CHECK(strcmp(tu_err_name(rc), "MPI_ERR_BUFFER") == 0, "after detach: %s",
		         tu_err_name(rc));
		TU_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
	}
	free(space);
	TU_MPI(MPI_Type_free(&column));
	if (tu_rank == 0)
		printf("misc_bsend: all checks passed\n");
	return tu_finalize();
}
