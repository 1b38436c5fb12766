/* Unit tests of the MPI layer's requests over the fake transport
 * (mpi_fake_transport.h): the Wait/Test families, null requests,
 * MPI_Request_free of active requests, and the progress discipline
 * (blocking calls block in progress(-1), Test polls with progress(0)).
 * Linked into test_mpi_pt2pt, which runs each test in its own process. */
#include <check.h>
#include <string.h>

#include "mpi.h"
#include "mpi_fake_transport.h"
#include "mpi_unit.h"

START_TEST(request_argument_errors)
{
	MPI_Status st;
	int flag, index, outcount, indices[2];
	init_returning(0, 1);
	MPI_Request bogus = (MPI_Request)0x58000777, junk = 42;
	ck_assert_int_eq(MPI_Wait(&bogus, &st), MPI_ERR_REQUEST);
	ck_assert_int_eq(MPI_Wait(&junk, &st), MPI_ERR_REQUEST);
	ck_assert_int_eq(MPI_Wait(NULL, &st), MPI_ERR_REQUEST);
	ck_assert_int_eq(MPI_Test(&bogus, &flag, &st), MPI_ERR_REQUEST);
	MPI_Request null = MPI_REQUEST_NULL;
	ck_assert_int_eq(MPI_Request_free(&null), MPI_ERR_REQUEST);
	ck_assert_int_eq(MPI_Request_free(&bogus), MPI_ERR_REQUEST);
	MPI_Request arr[2] = {MPI_REQUEST_NULL, bogus};
	ck_assert_int_eq(MPI_Waitall(2, arr, MPI_STATUSES_IGNORE), MPI_ERR_REQUEST);
	ck_assert_int_eq(MPI_Waitall(-1, arr, MPI_STATUSES_IGNORE), MPI_ERR_COUNT);
	ck_assert_int_eq(MPI_Waitall(1, NULL, MPI_STATUSES_IGNORE), MPI_ERR_REQUEST);
	ck_assert_int_eq(MPI_Waitany(2, arr, &index, &st), MPI_ERR_REQUEST);
	ck_assert_int_eq(MPI_Testany(2, arr, &index, &flag, &st), MPI_ERR_REQUEST);
	ck_assert_int_eq(MPI_Testall(2, arr, &flag, MPI_STATUSES_IGNORE), MPI_ERR_REQUEST);
	ck_assert_int_eq(MPI_Waitsome(2, arr, &outcount, indices, MPI_STATUSES_IGNORE),
	                 MPI_ERR_REQUEST);
	ck_assert_int_eq(MPI_Waitany(1, arr, NULL, &st), MPI_ERR_ARG);
	/* A request is gone once completed: its old handle is invalid. */
	MPI_Request rq, copy;
	int x = 1;
	MPI_Isend(&x, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, &rq);
	copy = rq;
	ck_assert_int_eq(MPI_Wait(&rq, &st), MPI_SUCCESS);
	ck_assert(rq == MPI_REQUEST_NULL);
	ck_assert_int_eq(MPI_Wait(&copy, &st), MPI_ERR_REQUEST);
}
END_TEST

START_TEST(null_requests)
{
	MPI_Request rq = MPI_REQUEST_NULL,
	            arr[3] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL};
	MPI_Status st = poisoned_status();
	int flag = 0, index = 0, outcount = 0, indices[3];
	init_returning(0, 1);
	ck_assert_int_eq(MPI_Wait(&rq, &st), MPI_SUCCESS);
	ck_assert_int_eq(st.MPI_SOURCE, MPI_ANY_SOURCE); /* the empty status */
	ck_assert_int_eq(st.MPI_TAG, MPI_ANY_TAG);
	ck_assert_int_eq(st.MPI_ERROR, MPI_SUCCESS);
	ck_assert_int_eq(status_count(&st, MPI_INT), 0);
	ck_assert_int_eq(MPI_Test(&rq, &flag, &st), MPI_SUCCESS);
	ck_assert_int_eq(flag, 1);
	ck_assert_int_eq(MPI_Waitany(3, arr, &index, &st), MPI_SUCCESS);
	ck_assert_int_eq(index, MPI_UNDEFINED);
	flag = 0;
	ck_assert_int_eq(MPI_Testany(3, arr, &index, &flag, &st), MPI_SUCCESS);
	ck_assert_int_eq(flag, 1);
	ck_assert_int_eq(index, MPI_UNDEFINED);
	ck_assert_int_eq(MPI_Waitall(3, arr, MPI_STATUSES_IGNORE), MPI_SUCCESS);
	ck_assert_int_eq(MPI_Testall(3, arr, &flag, MPI_STATUSES_IGNORE), MPI_SUCCESS);
	ck_assert_int_eq(flag, 1);
	ck_assert_int_eq(MPI_Waitsome(3, arr, &outcount, indices, MPI_STATUSES_IGNORE),
	                 MPI_SUCCESS);
	ck_assert_int_eq(outcount, MPI_UNDEFINED);
	ck_assert_int_eq(MPI_Testsome(3, arr, &outcount, indices, MPI_STATUSES_IGNORE),
	                 MPI_SUCCESS);
	ck_assert_int_eq(outcount, MPI_UNDEFINED);
	ck_assert_int_eq(MPI_Waitall(0, NULL, MPI_STATUSES_IGNORE), MPI_SUCCESS);
	ck_assert_int_eq(MPI_Waitany(0, NULL, &index, MPI_STATUS_IGNORE), MPI_SUCCESS);
	ck_assert_int_eq(index, MPI_UNDEFINED);
}
END_TEST

START_TEST(any_some_completion)
{
	int in[3] = {0}, vals[3] = {100, 101, 102};
	MPI_Request rq[3];
	MPI_Status st, sts[3];
	int index = -1, flag = -1, outcount = -1, indices[3];
	init_returning(0, 3);
	for (int i = 0; i < 3; i++)
		MPI_Irecv(&in[i], 1, MPI_INT, 1, i, MPI_COMM_WORLD, &rq[i]);
	ck_assert_int_eq(MPI_Testany(3, rq, &index, &flag, &st), MPI_SUCCESS);
	ck_assert_int_eq(flag, 0);
	ck_assert_int_eq(index, MPI_UNDEFINED);
	ck_assert_int_eq(MPI_Testall(3, rq, &flag, sts), MPI_SUCCESS);
	ck_assert_int_eq(flag, 0);
	ck_assert_int_eq(MPI_Testsome(3, rq, &outcount, indices, sts), MPI_SUCCESS);
	ck_assert_int_eq(outcount, 0);

	fake_inject(1, 2, CTX_WORLD, &vals[2], sizeof(int), 0);
	ck_assert_int_eq(MPI_Waitany(3, rq, &index, &st), MPI_SUCCESS);
	ck_assert_int_eq(index, 2);
	ck_assert_int_eq(st.MPI_TAG, 2);
	ck_assert_int_eq(in[2], 102);
	ck_assert(rq[2] == MPI_REQUEST_NULL);

	fake_inject(1, 0, CTX_WORLD, &vals[0], sizeof(int), 0);
	fake_inject(1, 1, CTX_WORLD, &vals[1], sizeof(int), 0);
	ck_assert_int_eq(MPI_Waitsome(3, rq, &outcount, indices, sts), MPI_SUCCESS);
	ck_assert_int_eq(outcount, 2);
	ck_assert_int_eq(indices[0], 0);
	ck_assert_int_eq(indices[1], 1);
	ck_assert_int_eq(sts[0].MPI_TAG, 0);
	ck_assert_int_eq(sts[1].MPI_TAG, 1);
	ck_assert_int_eq(in[0], 100);
	ck_assert_int_eq(in[1], 101);
	ck_assert_int_eq(MPI_Waitany(3, rq, &index, &st), MPI_SUCCESS);
	ck_assert_int_eq(index, MPI_UNDEFINED);
}
END_TEST

START_TEST(blocking_waits_in_progress_not_spinning)
{
	int v = 0;
	const int sent = 77;
	init_returning(0, 2);
	/* The message arrives during the third progress call. */
	fake_inject(1, 0, CTX_WORLD, &sent, sizeof sent, 3);
	ck_assert_int_eq(MPI_Recv(&v, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
	                 MPI_SUCCESS);
	ck_assert_int_eq(v, 77);
	ck_assert_int_eq(fake.progress_block, 3);
	ck_assert_int_eq(fake.progress_poll, 0);

	/* Test polls once per call and does not block. */
	MPI_Request rq;
	int flag = 1;
	MPI_Irecv(&v, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, &rq);
	fake_inject(1, 0, CTX_WORLD, &sent, sizeof sent, 2);
	ck_assert_int_eq(MPI_Test(&rq, &flag, MPI_STATUS_IGNORE), MPI_SUCCESS);
	ck_assert_int_eq(flag, 0);
	ck_assert_int_eq(fake.progress_poll, 1);
	ck_assert_int_eq(MPI_Test(&rq, &flag, MPI_STATUS_IGNORE), MPI_SUCCESS);
	ck_assert_int_eq(flag, 1);
	ck_assert_int_eq(fake.progress_poll, 2);
	ck_assert_int_eq(fake.progress_block, 3);

	/* A receive that can never complete fails (the fake's "would block
	 * forever") instead of spinning. */
	ck_assert_int_eq(MPI_Recv(&v, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
	                 MPI_ERR_OTHER);
}
END_TEST

START_TEST(request_free_lets_it_finish)
{
	int v = 0, w = 0;
	const int sent = 31;
	init_returning(0, 2);
	MPI_Request rq;
	MPI_Irecv(&v, 1, MPI_INT, 1, 4, MPI_COMM_WORLD, &rq);
	MPI_Request old = rq;
	ck_assert_int_eq(MPI_Request_free(&rq), MPI_SUCCESS);
	ck_assert(rq == MPI_REQUEST_NULL);
	ck_assert_int_eq(MPI_Wait(&old, MPI_STATUS_IGNORE), MPI_ERR_REQUEST);
	ck_assert_int_eq(fake.posted_recvs, 1); /* still posted */
	/* It completes while the program waits for something else. */
	fake_inject(1, 4, CTX_WORLD, &sent, sizeof sent, 1);
	fake_inject(1, 5, CTX_WORLD, &sent, sizeof sent, 2);
	ck_assert_int_eq(MPI_Recv(&w, 1, MPI_INT, 1, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
	                 MPI_SUCCESS);
	ck_assert_int_eq(v, 31);
	ck_assert_int_eq(fake.posted_recvs, 0);
	/* Freeing a complete request releases it at once. */
	int x = 1;
	MPI_Isend(&x, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, &rq);
	ck_assert_int_eq(MPI_Request_free(&rq), MPI_SUCCESS);
	/* Released request objects are reused: many cycles need no new
	 * handles beyond a few. */
	MPI_Request first, again;
	MPI_Isend(&x, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, &first);
	MPI_Wait(&first, MPI_STATUS_IGNORE);
	for (int i = 0; i < 1000; i++) {
		MPI_Isend(&x, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, &again);
		ck_assert_int_eq(MPI_Request_free(&again), MPI_SUCCESS);
	}
	MPI_Isend(&x, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, &again);
	ck_assert_int_lt(again & 0xffffff, 8);
	MPI_Wait(&again, MPI_STATUS_IGNORE);
}
END_TEST

TCase *mpi_request_tcase(void)
{
	TCase *reqs = tcase_create("requests");
	tcase_add_test(reqs, request_argument_errors);
	tcase_add_test(reqs, null_requests);
	tcase_add_test(reqs, any_some_completion);
	tcase_add_test(reqs, blocking_waits_in_progress_not_spinning);
	tcase_add_test(reqs, request_free_lets_it_finish);
	return reqs;
}
