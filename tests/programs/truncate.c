/* truncate: a message longer than the receive buffer.
 *
 * Mode "return" (default): MPI_ERRORS_RETURN on MPI_COMM_WORLD. Recv, Wait
 * and Waitall report MPI_ERR_TRUNCATE (Waitall via MPI_ERR_IN_STATUS and the
 * status' MPI_ERROR), the status names the right source and tag, the buffer
 * holds the message's first bytes and nothing past its capacity is written,
 * and the next message is received normally. Also for a zero-capacity
 * buffer and for a message to self.
 * Mode "fatal": the default MPI_ERRORS_ARE_FATAL: the truncating MPI_Recv
 * must stop the job with a non-zero status; reaching the next line is a
 * failure (exit status 2). */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { CAP = 50, LONG_COUNT = 100, GUARD = 10, SENTINEL = -12345 };

static void check_truncated(int rc, const MPI_Status *st, int source, int tag, int capacity,
                            int sent, const char *what)
{
	int cls = -1;
	TU_CHECK(rc != MPI_SUCCESS, "%s: a truncated receive returned MPI_SUCCESS", what);
	TU_MPI(MPI_Error_class(rc, &cls));
	TU_CHECK(cls == MPI_ERR_TRUNCATE, "%s: returned %s, expected MPI_ERR_TRUNCATE", what,
	         tu_err_name(rc));
	TU_CHECK(st->MPI_SOURCE == source && st->MPI_TAG == tag,
	         "%s: status source %d tag %d, expected %d %d", what, st->MPI_SOURCE, st->MPI_TAG,
	         source, tag);
	/* The standard leaves open whether the count is what was stored or the
	 * message's length; implementations differ (Open MPI: the length). */
	int count = -1;
	TU_MPI(MPI_Get_count(st, MPI_INT, &count));
	TU_CHECK(count == capacity || count == sent,
	         "%s: MPI_Get_count says %d, expected %d (stored) or %d (sent)", what, count,
	         capacity, sent);
}

static void check_prefix(const int *buf, int capacity, int base, const char *what)
{
	for (int i = 0; i < capacity; i++)
		TU_CHECK(buf[i] == base + i, "%s: word %d is %d, expected %d", what, i, buf[i],
		         base + i);
	for (int i = capacity; i < capacity + GUARD; i++)
		TU_CHECK(buf[i] == SENTINEL, "%s: word %d past the buffer's capacity %d written",
		         what, i, capacity);
}

static void send_ints(int count, int base, int to, int tag)
{
	int *buf = malloc((size_t)count * sizeof(int) + 1);
	TU_CHECK(buf, "out of memory");
	for (int i = 0; i < count; i++)
		buf[i] = base + i;
	TU_MPI(MPI_Send(buf, count, MPI_INT, to, tag, MPI_COMM_WORLD));
	free(buf);
}

static void reset(int *buf)
{
	for (int i = 0; i < LONG_COUNT + GUARD; i++)
		buf[i] = SENTINEL;
}

static void receiver_checks(void)
{
	int buf[LONG_COUNT + GUARD], buf2[LONG_COUNT + GUARD];
	MPI_Status st, sts[2];
	MPI_Request reqs[2];

	reset(buf);
	int rc = MPI_Recv(buf, CAP, MPI_INT, 1, 1, MPI_COMM_WORLD, &st);
	check_truncated(rc, &st, 1, 1, CAP, LONG_COUNT, "MPI_Recv");
	check_prefix(buf, CAP, 1000, "MPI_Recv");
	reset(buf);
	TU_MPI(MPI_Recv(buf, CAP, MPI_INT, 1, 2, MPI_COMM_WORLD, &st));
	int count = -1;
	TU_MPI(MPI_Get_count(&st, MPI_INT, &count));
	TU_CHECK(count == 10 && st.MPI_TAG == 2, "message after the truncated one: count %d tag %d",
	         count, st.MPI_TAG);
	check_prefix(buf, 10, 2000, "message after the truncated one");
	printf("truncate: MPI_Recv: MPI_ERR_TRUNCATE, status and buffer right, next message "
	       "intact\n");

	reset(buf);
	TU_MPI(MPI_Irecv(buf, 2, MPI_INT, 1, 3, MPI_COMM_WORLD, &reqs[0]));
	rc = MPI_Wait(&reqs[0], &st);
	check_truncated(rc, &st, 1, 3, 2, 5, "MPI_Wait");
	check_prefix(buf, 2, 3000, "MPI_Wait");
	printf("truncate: MPI_Irecv+MPI_Wait: MPI_ERR_TRUNCATE\n");

	reset(buf);
	reset(buf2);
	TU_MPI(MPI_Irecv(buf, CAP, MPI_INT, 1, 4, MPI_COMM_WORLD, &reqs[0]));
	TU_MPI(MPI_Irecv(buf2, 3, MPI_INT, 1, 5, MPI_COMM_WORLD, &reqs[1]));
	sts[0].MPI_ERROR = sts[1].MPI_ERROR = -1;
	rc = MPI_Waitall(2, reqs, sts);
	int cls = -1;
	TU_MPI(MPI_Error_class(rc, &cls));
	TU_CHECK(cls == MPI_ERR_IN_STATUS, "MPI_Waitall with a truncation returned %s",
	         tu_err_name(rc));
	TU_CHECK(sts[0].MPI_ERROR == MPI_SUCCESS, "MPI_Waitall: the intact receive's error is %s",
	         tu_err_name(sts[0].MPI_ERROR));
	check_truncated(sts[1].MPI_ERROR, &sts[1], 1, 5, 3, 7, "MPI_Waitall entry 1");
	check_prefix(buf, 4, 4000, "MPI_Waitall entry 0");
	check_prefix(buf2, 3, 5000, "MPI_Waitall entry 1");
	printf("truncate: MPI_Waitall: MPI_ERR_IN_STATUS, MPI_ERR_TRUNCATE in the truncated "
	       "entry only\n");

	reset(buf);
	rc = MPI_Recv(buf, 0, MPI_INT, 1, 6, MPI_COMM_WORLD, &st);
	check_truncated(rc, &st, 1, 6, 0, 1, "MPI_Recv into 0 elements");
	check_prefix(buf, 0, 0, "MPI_Recv into 0 elements");
	printf("truncate: one element into a zero-element buffer: MPI_ERR_TRUNCATE\n");
}

static void self_truncation(void)
{
	int v[8] = {7000, 7001, 7002, 7003, 7004, 7005, 7006, 7007};
	int buf[4 + GUARD];
	MPI_Request req;
	MPI_Status st;
	for (int i = 0; i < 4 + GUARD; i++)
		buf[i] = SENTINEL;
	TU_MPI(MPI_Isend(v, 8, MPI_INT, tu_rank, 7, MPI_COMM_WORLD, &req));
	int rc = MPI_Recv(buf, 4, MPI_INT, tu_rank, 7, MPI_COMM_WORLD, &st);
	check_truncated(rc, &st, tu_rank, 7, 4, 8, "MPI_Recv from self");
	check_prefix(buf, 4, 7000, "MPI_Recv from self");
	TU_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
}

static int return_mode(void)
{
	TU_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
	if (tu_rank == 1) {
		send_ints(LONG_COUNT, 1000, 0, 1);
		send_ints(10, 2000, 0, 2);
		send_ints(5, 3000, 0, 3);
		send_ints(4, 4000, 0, 4);
		send_ints(7, 5000, 0, 5);
		send_ints(1, 6000, 0, 6);
	} else if (tu_rank == 0) {
		receiver_checks();
	}
	self_truncation();
	TU_MPI(MPI_Barrier(MPI_COMM_WORLD));
	/* Communication goes on normally after the errors. */
	int token = tu_rank == 0 ? 42 : -1;
	if (tu_rank == 0)
		TU_MPI(MPI_Send(&token, 1, MPI_INT, 1, 8, MPI_COMM_WORLD));
	else if (tu_rank == 1)
		TU_MPI(MPI_Recv(&token, 1, MPI_INT, 0, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
	TU_CHECK(tu_rank > 1 || token == 42, "message after the errors carried %d", token);
	TU_MPI(MPI_Barrier(MPI_COMM_WORLD));
	if (tu_rank == 0) {
		printf(
		    "truncate: to self: MPI_ERR_TRUNCATE; communication continues after errors\n");
		printf("truncate: all checks passed\n");
	}
	return tu_finalize();
}

static int fatal_mode(void)
{
	if (tu_rank == 1) {
		send_ints(LONG_COUNT, 1000, 0, 1);
	} else if (tu_rank == 0) {
		int buf[CAP];
		MPI_Recv(buf, CAP, MPI_INT, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		fprintf(stderr, "truncate: rank 0: FAIL: MPI_ERRORS_ARE_FATAL let a truncated "
		                "MPI_Recv return\n");
		fflush(stderr);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	/* The other ranks wait here until the job is torn down. */
	MPI_Barrier(MPI_COMM_WORLD);
	return tu_finalize();
}

int main(int argc, char **argv)
{
	tu_init(&argc, &argv, "truncate");
	tu_require_size(2, 64);
	const char *mode = argc > 1 ? argv[1] : "return";
	if (strcmp(mode, "return") == 0)
		return return_mode();
	if (strcmp(mode, "fatal") == 0)
		return fatal_mode();
	tu_fail("unknown mode '%s' (return | fatal)", mode);
}
