/* misc_requests: persistent requests, Waitsome/Testsome, Iprobe with
 * MPI_ANY_TAG, Request_get_status, Cancel.
 *
 * Usage: misc_requests must-cancel|may-complete
 *   must-cancel   a receive nobody has sent to yet must be cancelled
 *                 (Open MPI; chanmem's direct transport)
 *   may-complete  the cancel may not take, the receive then completes
 *                 normally (chanmem's cm transport, where a posted receive
 *                 lives at the channel memory)
 * The output is the same either way. Needs 3 ranks. */
#include "testutil.h"

#include <stdio.h>
#include <string.h>

static int must_cancel;

/* A ring of persistent requests started 10 times: each start sends what
 * the buffer holds at that moment; plain, synchronous and ready sends, and
 * a derived datatype. */
static void persistent(void)
{
	int right = (tu_rank + 1) % tu_size, left = (tu_rank + tu_size - 1) % tu_size;
	int out[3], in[3], vec_out[6], vec_in[6];
	MPI_Datatype pairs; /* elements 0 and 2 of 4, as one item: a vector */
	TU_MPI(MPI_Type_vector(2, 1, 2, MPI_INT, &pairs));
	TU_MPI(MPI_Type_commit(&pairs));
	MPI_Request reqs[6];
	TU_MPI(MPI_Recv_init(&in[0], 1, MPI_INT, left, 1, MPI_COMM_WORLD, &reqs[0]));
	TU_MPI(MPI_Recv_init(&in[1], 1, MPI_INT, left, 2, MPI_COMM_WORLD, &reqs[1]));
	TU_MPI(MPI_Recv_init(vec_in, 1, pairs, left, 3, MPI_COMM_WORLD, &reqs[2]));
	TU_MPI(MPI_Send_init(&out[0], 1, MPI_INT, right, 1, MPI_COMM_WORLD, &reqs[3]));
	TU_MPI(MPI_Ssend_init(&out[1], 1, MPI_INT, right, 2, MPI_COMM_WORLD, &reqs[4]));
	TU_MPI(MPI_Send_init(vec_out, 1, pairs, right, 3, MPI_COMM_WORLD, &reqs[5]));
	TU_MPI(MPI_Type_free(&pairs)); /* the requests keep it */

	/* An inactive request completes at once with an empty status. */
	int flag = 0, count = -1;
	MPI_Status st;
	TU_MPI(MPI_Test(&reqs[0], &flag, &st));
	TU_MPI(MPI_Get_count(&st, MPI_INT, &count));
	TU_CHECK(flag && count == 0 && reqs[0] != MPI_REQUEST_NULL,
	         "test on an inactive persistent request: flag %d count %d", flag, count);

	for (int it = 0; it < 10; it++) {
		out[0] = 1000 * it + tu_rank;
		out[1] = 2000 * it + tu_rank;
		for (int i = 0; i < 6; i++)
			vec_out[i] = it * 10 + i + 100 * tu_rank;
		memset(vec_in, 0, sizeof vec_in);
		TU_MPI(MPI_Startall(3, reqs)); /* the receives */
		TU_MPI(MPI_Start(&reqs[3]));
		TU_MPI(MPI_Startall(2, &reqs[4]));
		MPI_Status sts[6];
		TU_MPI(MPI_Waitall(6, reqs, sts));
		for (int i = 0; i < 6; i++)
			TU_CHECK(reqs[i] != MPI_REQUEST_NULL, "persistent request %d became null",
			         i);
		TU_CHECK(in[0] == 1000 * it + left && in[1] == 2000 * it + left,
		         "iteration %d: got %d %d", it, in[0], in[1]);
		TU_CHECK(sts[1].MPI_SOURCE == left && sts[1].MPI_TAG == 2, "status of a start");
		TU_CHECK(vec_in[0] == it * 10 + 100 * left &&
		             vec_in[2] == it * 10 + 2 + 100 * left && vec_in[1] == 0 &&
		             vec_in[3] == 0,
		         "iteration %d: vector %d %d %d %d", it, vec_in[0], vec_in[1], vec_in[2],
		         vec_in[3]);
	}
	/* Waiting again on completed (inactive) requests returns at once. */
	TU_MPI(MPI_Waitall(6, reqs, MPI_STATUSES_IGNORE));
	for (int i = 0; i < 6; i++) {
		TU_MPI(MPI_Request_free(&reqs[i]));
		TU_CHECK(reqs[i] == MPI_REQUEST_NULL, "Request_free left a handle");
	}
	if (tu_rank == 0)
		printf("persistent requests: 10 rounds of Start/Startall + Waitall, values read at "
		       "each start\n");
}

/* Rank 0 waits on 3 receives from each other rank; the others send them
 * in reverse tag order with pauses. Waitsome, then Testsome, must report
 * each request exactly once. */
static void some(int use_test)
{
	enum { PER = 3 };
	int base = use_test ? 300 : 200;
	if (tu_rank != 0) {
		for (int t = PER - 1; t >= 0; t--) {
			int v = tu_rank * 10 + t;
			tu_sleep_ms(5);
			TU_MPI(MPI_Send(&v, 1, MPI_INT, 0, base + t, MPI_COMM_WORLD));
		}
		return;
	}
	int n = (tu_size - 1) * PER, done = 0, seen[64] = {0}, vals[64], idx[64];
	MPI_Request reqs[64];
	MPI_Status sts[64];
	for (int i = 0; i < n; i++)
		TU_MPI(MPI_Irecv(&vals[i], 1, MPI_INT, 1 + i / PER, base + i % PER, MPI_COMM_WORLD,
		                 &reqs[i]));
	while (done < n) {
		int outcount = -1;
		if (use_test) {
			TU_MPI(MPI_Testsome(n, reqs, &outcount, idx, sts));
			if (outcount == 0)
				tu_sleep_ms(1);
		} else {
			TU_MPI(MPI_Waitsome(n, reqs, &outcount, idx, sts));
			TU_CHECK(outcount > 0, "Waitsome returned %d", outcount);
		}
		for (int k = 0; k < outcount; k++) {
			int i = idx[k];
			TU_CHECK(!seen[i] && reqs[i] == MPI_REQUEST_NULL,
			         "request %d reported twice", i);
			seen[i] = 1;
			TU_CHECK(vals[i] == (1 + i / PER) * 10 + i % PER &&
			             sts[k].MPI_SOURCE == 1 + i / PER &&
			             sts[k].MPI_TAG == base + i % PER,
			         "request %d: value %d source %d tag %d", i, vals[i],
			         sts[k].MPI_SOURCE, sts[k].MPI_TAG);
		}
		done += outcount;
	}
	int outcount = 0;
	TU_MPI(MPI_Waitsome(n, reqs, &outcount, idx, sts));
	TU_CHECK(outcount == MPI_UNDEFINED, "Waitsome on null requests: %d", outcount);
	printf("%s: %d requests, each reported exactly once\n", use_test ? "Testsome" : "Waitsome",
	       n);
}

/* Iprobe with MPI_ANY_TAG sees the message's tag and size, and a message
 * on MPI_COMM_WORLD is invisible to a probe on a duplicate. */
static void probes(void)
{
	MPI_Comm dup;
	TU_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
	if (tu_rank == 1) {
		int data[7] = {0};
		TU_MPI(MPI_Send(data, 7, MPI_INT, 0, 33, MPI_COMM_WORLD));
	} else if (tu_rank == 0) {
		int flag = 0, count = -1;
		MPI_Status st;
		for (int i = 0; i < 20000 && !flag; i++) {
			TU_MPI(MPI_Iprobe(1, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st));
			if (!flag)
				tu_sleep_ms(1);
		}
		TU_CHECK(flag, "Iprobe never saw the message");
		TU_MPI(MPI_Get_count(&st, MPI_INT, &count));
		TU_CHECK(st.MPI_SOURCE == 1 && st.MPI_TAG == 33 && count == 7,
		         "Iprobe: source %d tag %d count %d", st.MPI_SOURCE, st.MPI_TAG, count);
		TU_MPI(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, dup, &flag, &st));
		TU_CHECK(!flag, "a probe on a duplicate saw a message of MPI_COMM_WORLD");
		int data[7];
		TU_MPI(MPI_Recv(data, 7, MPI_INT, 1, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
		printf(
		    "Iprobe(MPI_ANY_TAG): tag 33, 7 ints; invisible on a duplicate communicator\n");
	}
	TU_MPI(MPI_Comm_free(&dup));
}

static void cancels(void)
{
	/* A receive nothing has matched yet. */
	if (tu_rank == 0) {
		int v = -1, cancelled = -1;
		MPI_Request req;
		MPI_Status st;
		TU_MPI(MPI_Irecv(&v, 1, MPI_INT, 1, 77, MPI_COMM_WORLD, &req));
		TU_MPI(MPI_Cancel(&req));
		TU_MPI(MPI_Barrier(MPI_COMM_WORLD)); /* rank 1 sends only now */
		TU_MPI(MPI_Wait(&req, &st));
		TU_MPI(MPI_Test_cancelled(&st, &cancelled));
		TU_CHECK(!must_cancel || cancelled, "the unmatched receive was not cancelled");
		if (cancelled) {
			TU_CHECK(v == -1, "a cancelled receive wrote %d", v);
			TU_MPI(MPI_Recv(&v, 1, MPI_INT, 1, 77, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
		}
		TU_CHECK(v == 1, "first message: %d", v);
		TU_MPI(MPI_Recv(&v, 1, MPI_INT, 1, 77, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
		TU_CHECK(v == 2, "second message: %d", v);
		printf("cancel of an unmatched receive: each message delivered exactly once\n");
	} else {
		TU_MPI(MPI_Barrier(MPI_COMM_WORLD));
		if (tu_rank == 1) {
			int one = 1, two = 2;
			TU_MPI(MPI_Send(&one, 1, MPI_INT, 0, 77, MPI_COMM_WORLD));
			TU_MPI(MPI_Send(&two, 1, MPI_INT, 0, 77, MPI_COMM_WORLD));
		}
	}

	/* A receive that has completed cannot be cancelled. */
	if (tu_rank == 0) {
		int v = -1, flag = 0, cancelled = -1;
		MPI_Request req;
		MPI_Status st;
		TU_MPI(MPI_Irecv(&v, 1, MPI_INT, 2, 78, MPI_COMM_WORLD, &req));
		for (int i = 0; i < 20000 && !flag; i++) {
			TU_MPI(MPI_Request_get_status(req, &flag, &st));
			if (!flag)
				tu_sleep_ms(1);
		}
		TU_CHECK(flag && req != MPI_REQUEST_NULL,
		         "Request_get_status never saw completion");
		TU_MPI(MPI_Cancel(&req));
		TU_MPI(MPI_Wait(&req, &st));
		TU_MPI(MPI_Test_cancelled(&st, &cancelled));
		TU_CHECK(!cancelled && v == 3 && st.MPI_SOURCE == 2,
		         "completed receive: cancelled %d v %d", cancelled, v);
		printf("cancel of a completed receive: not cancelled, data kept\n");
	} else if (tu_rank == 2) {
		int three = 3;
		TU_MPI(MPI_Send(&three, 1, MPI_INT, 0, 78, MPI_COMM_WORLD));
	}

	/* A send may or may not be cancelled; the receiver learns which and
	 * gets the message only if it was not. */
	if (tu_rank == 1) {
		int v = 4, cancelled = -1;
		MPI_Request req;
		MPI_Status st;
		TU_MPI(MPI_Isend(&v, 1, MPI_INT, 2, 79, MPI_COMM_WORLD, &req));
		TU_MPI(MPI_Cancel(&req));
		TU_MPI(MPI_Wait(&req, &st));
		TU_MPI(MPI_Test_cancelled(&st, &cancelled));
		TU_MPI(MPI_Send(&cancelled, 1, MPI_INT, 2, 80, MPI_COMM_WORLD));
	} else if (tu_rank == 2) {
		int cancelled = -1, v = -1;
		TU_MPI(MPI_Recv(&cancelled, 1, MPI_INT, 1, 80, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
		if (!cancelled) {
			TU_MPI(MPI_Recv(&v, 1, MPI_INT, 1, 79, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
			TU_CHECK(v == 4, "uncancelled send delivered %d", v);
		}
	}
	TU_MPI(MPI_Barrier(MPI_COMM_WORLD));
	if (tu_rank == 0)
		printf("cancel of a send: delivered unless cancelled\n");
}

int main(int argc, char **argv)
{
	tu_init(&argc, &argv, "misc_requests");
	tu_require_size(3, 3);
	if (argc != 2 || (strcmp(argv[1], "must-cancel") && strcmp(argv[1], "may-complete")))
		tu_fail("usage: misc_requests must-cancel|may-complete");
	must_cancel = strcmp(argv[1], "must-cancel") == 0;
	persistent();
	some(0);
	some(1);
	probes();
	cancels();
	if (tu_rank == 0)
		printf("misc_requests: all checks passed\n");
	return tu_finalize();
}
