/* Unit tests of the completion calls' outcome log (client/mpi_nondet.c,
 * client/mpi_test.c) over the fake transport, given a scripted `event`
 * hook: what a leading rank logs (failed polls counted, flushed before a
 * send, carried by the next success), what a following rank does with a
 * replayed log (a logged miss even though the request is complete, a logged
 * index, a set, a set cut short by the failure), and a logged outcome the
 * program cannot take (the job is aborted with a message). Each test runs in
 * its own process (check's fork mode): the log's state is per process. */
#include <check.h>
#include <string.h>

#include "mpi.h"
#include "mpi_fake_transport.h"
#include "mpi_internal.h"
#include "mpi_test.h"
#include "mpi_unit.h"

/* The scripted hook: replays script[] first, then logs. */
static uint64_t script[16];
static int nscript, used;
static uint64_t logged[64];
static int nlogged;

static int scripted_event(struct cm_transport *t, uint32_t kind, void *value, size_t len,
                          int *replayed)
{
	ck_assert_uint_eq(kind, CM_EV_TEST);
	ck_assert_uint_eq(len, 8);
	if (used < nscript) {
		cm_put_u64(value, script[used++]);
		*replayed = 1;
		return 0;
	}
	ck_assert_int_lt(nlogged, 64);
	logged[nlogged++] = cm_get_u64(value);
	*replayed = 0;
	return 0;
}

static uint64_t rec(unsigned call, int more, uint32_t misses, uint32_t value)
{
	return call | (more ? 0x10u : 0) | (uint64_t)misses << 8 | (uint64_t)value << 32;
}

/* Rank 0 of 2, errors returned, the scripted hook in place. */
static void init_logging(void)
{
	init_returning(0, 2);
	cm_mpi.transport.event = scripted_event;
}

START_TEST(lead_counts_misses)
{
	int v = 0, flag, x = 7;
	MPI_Request rq;
	init_logging();
	MPI_Irecv(&v, 1, MPI_INT, 1, 5, MPI_COMM_WORLD, &rq);
	fake_inject(1, 5, CTX_WORLD, &x, sizeof x, 3);
	/* The first outcome is logged on its own (the log is found empty),
	 * the second only counted, the third carries the count. */
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(MPI_Test(&rq, &flag, MPI_STATUS_IGNORE), MPI_SUCCESS);
		ck_assert_int_eq(flag, 0);
	}
	ck_assert_int_eq(nlogged, 1);
	ck_assert_int_eq(MPI_Test(&rq, &flag, MPI_STATUS_IGNORE), MPI_SUCCESS);
	ck_assert_int_eq(flag, 1);
	ck_assert_int_eq(v, 7);
	ck_assert_int_eq(nlogged, 2);
	ck_assert(logged[0] == rec(0, 0, 1, 0));
	ck_assert(logged[1] == rec(CM_ND_TEST, 0, 1, 0));
	/* Pending failed polls are logged before a send leaves. */
	MPI_Irecv(&v, 1, MPI_INT, 1, 6, MPI_COMM_WORLD, &rq);
	fake_inject(1, 6, CTX_WORLD, &x, sizeof x, 3);
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(MPI_Test(&rq, &flag, MPI_STATUS_IGNORE), MPI_SUCCESS);
		ck_assert_int_eq(flag, 0);
	}
	ck_assert_int_eq(nlogged, 2);
	ck_assert_int_eq(MPI_Send(&x, 1, MPI_INT, 1, 0, MPI_COMM_WORLD), MPI_SUCCESS);
	ck_assert_int_eq(nlogged, 3);
	ck_assert(logged[2] == rec(0, 0, 2, 0));
	ck_assert_int_eq(MPI_Wait(&rq, MPI_STATUS_IGNORE), MPI_SUCCESS);
	ck_assert_int_eq(nlogged, 3); /* MPI_Wait decides nothing */
	MPI_Finalize();
}
END_TEST

START_TEST(follow_imposes_misses_and_index)
{
	int v[2] = {0, 0}, x[2] = {10, 20}, flag, index;
	MPI_Request rq[2];
	script[0] = rec(0, 0, 2, 0);
	script[1] = rec(CM_ND_TESTANY, 0, 1, 1);
	nscript = 2;
	init_logging();
	MPI_Irecv(&v[0], 1, MPI_INT, 1, 1, MPI_COMM_WORLD, &rq[0]);
	MPI_Irecv(&v[1], 1, MPI_INT, 1, 2, MPI_COMM_WORLD, &rq[1]);
	fake_inject(1, 1, CTX_WORLD, &x[0], sizeof x[0], 0);
	fake_inject(1, 2, CTX_WORLD, &x[1], sizeof x[1], 0);
	/* Both are complete, but the log says three failed polls, then 1. */
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(MPI_Testany(2, rq, &index, &flag, MPI_STATUS_IGNORE), MPI_SUCCESS);
		ck_assert_int_eq(flag, 0);
		ck_assert_int_eq(index, MPI_UNDEFINED);
	}
	ck_assert_int_eq(MPI_Testany(2, rq, &index, &flag, MPI_STATUS_IGNORE), MPI_SUCCESS);
	ck_assert_int_eq(flag, 1);
	ck_assert_int_eq(index, 1);
	ck_assert_int_eq(v[1], 20);
	ck_assert_int_eq(nlogged, 0);
	/* The log has run out: the rank decides (and logs) from now on. */
	ck_assert_int_eq(MPI_Testany(2, rq, &index, &flag, MPI_STATUS_IGNORE), MPI_SUCCESS);
	ck_assert_int_eq(flag, 1);
	ck_assert_int_eq(index, 0);
	ck_assert_int_eq(nlogged, 1);
	ck_assert(logged[0] == rec(CM_ND_TESTANY, 0, 0, 0));
	MPI_Finalize();
}
END_TEST

START_TEST(follow_sets)
{
	int v[3] = {0, 0, 0}, x = 5, outcount, idx[3];
	MPI_Request rq[3];
	/* Testsome: logged {2}, although 0 and 2 are complete. Waitsome: a set
	 * whose second element the failure cut off: the re-execution picks a
	 * complete request outside the set (0) and logs it. */
	script[0] = rec(CM_ND_TESTSOME, 0, 0, 2);
	script[1] = rec(CM_ND_WAITSOME, 1, 0, 1);
	nscript = 2;
	init_logging();
	for (int i = 0; i < 3; i++)
		MPI_Irecv(&v[i], 1, MPI_INT, 1, i, MPI_COMM_WORLD, &rq[i]);
	fake_inject(1, 0, CTX_WORLD, &x, sizeof x, 0);
	fake_inject(1, 2, CTX_WORLD, &x, sizeof x, 0);
	ck_assert_int_eq(MPI_Testsome(3, rq, &outcount, idx, MPI_STATUSES_IGNORE), MPI_SUCCESS);
	ck_assert_int_eq(outcount, 1);
	ck_assert_int_eq(idx[0], 2);
	ck_assert(rq[2] == MPI_REQUEST_NULL && rq[0] != MPI_REQUEST_NULL);
	fake_inject(1, 1, CTX_WORLD, &x, sizeof x, 1);
	ck_assert_int_eq(MPI_Waitsome(3, rq, &outcount, idx, MPI_STATUSES_IGNORE), MPI_SUCCESS);
	ck_assert_int_eq(outcount, 2);
	ck_assert_int_eq(idx[0], 1);
	ck_assert_int_eq(idx[1], 0);
	ck_assert_int_eq(nlogged, 1);
	ck_assert(logged[0] == rec(CM_ND_WAITSOME, 0, 0, 0));
	MPI_Finalize();
}
END_TEST

static void diverge_index(void)
{
	int v[2], flag, index;
	MPI_Request rq[2];
	script[0] = rec(CM_ND_TESTANY, 0, 0, 5);
	nscript = 1;
	init_logging();
	MPI_Irecv(&v[0], 1, MPI_INT, 1, 1, MPI_COMM_WORLD, &rq[0]);
	MPI_Irecv(&v[1], 1, MPI_INT, 1, 2, MPI_COMM_WORLD, &rq[1]);
	MPI_Testany(2, rq, &index, &flag, MPI_STATUS_IGNORE);
}

static void diverge_call(void)
{
	int v, flag;
	MPI_Request rq;
	script[0] = rec(CM_ND_TESTALL, 0, 0, 0);
	nscript = 1;
	init_logging();
	MPI_Irecv(&v, 1, MPI_INT, 1, 1, MPI_COMM_WORLD, &rq);
	MPI_Test(&rq, &flag, MPI_STATUS_IGNORE);
}

static void diverge_send(void)
{
	int v, flag, x = 1;
	MPI_Request rq;
	script[0] = rec(0, 0, 3, 0);
	nscript = 1;
	init_logging();
	MPI_Irecv(&v, 1, MPI_INT, 1, 1, MPI_COMM_WORLD, &rq);
	MPI_Test(&rq, &flag, MPI_STATUS_IGNORE);
	MPI_Send(&x, 1, MPI_INT, 1, 0, MPI_COMM_WORLD); /* two polls early */
}

/* A checkpoint image cuts the event log where the snapshot is taken:
 * failed polls counted before it must be logged below that cut. */
static int snapshots, logged_at_snapshot;

static int counting_snapshot(struct cm_transport *t, struct cm_resume *out)
{
	(void)t;
	snapshots++;
	logged_at_snapshot = nlogged;
	*out = (struct cm_resume){0};
	return 0;
}

START_TEST(snapshot_logs_pending_misses)
{
	int v = 0, flag, x = 7;
	MPI_Request rq;
	init_logging();
	cm_mpi.transport.snapshot = counting_snapshot;
	MPI_Irecv(&v, 1, MPI_INT, 1, 5, MPI_COMM_WORLD, &rq);
	fake_inject(1, 5, CTX_WORLD, &x, sizeof x, 3);
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(MPI_Test(&rq, &flag, MPI_STATUS_IGNORE), MPI_SUCCESS);
		ck_assert_int_eq(flag, 0);
	}
	ck_assert_int_eq(MPI_Wait(&rq, MPI_STATUS_IGNORE), MPI_SUCCESS);
	ck_assert_int_eq(nlogged, 1); /* one failed poll still only counted */
	struct cm_resume r;
	ck_assert_int_eq(cm_mpi.transport.snapshot(&cm_mpi.transport, &r), 0);
	ck_assert_int_eq(snapshots, 1);
	ck_assert_int_eq(logged_at_snapshot, 2);
	ck_assert(logged[1] == rec(0, 0, 1, 0));
	MPI_Finalize();
}
END_TEST

/* A rank replaying inside a logged outcome (a failed poll still owed)
 * takes no image there: a restored rank could not owe it. */
START_TEST(snapshot_waits_inside_a_record)
{
	int v = 0, flag, x = 7;
	MPI_Request rq;
	init_logging();
	cm_mpi.transport.snapshot = counting_snapshot;
	script[nscript++] = rec(CM_ND_TEST, 0, 2, 0);
	MPI_Irecv(&v, 1, MPI_INT, 1, 5, MPI_COMM_WORLD, &rq);
	fake_inject(1, 5, CTX_WORLD, &x, sizeof x, 0);
	ck_assert_int_eq(MPI_Test(&rq, &flag, MPI_STATUS_IGNORE), MPI_SUCCESS);
	ck_assert_int_eq(flag, 0); /* logged: not complete, twice */
	struct cm_resume r;
	ck_assert_int_eq(cm_mpi.transport.snapshot(&cm_mpi.transport, &r), 2);
	ck_assert_int_eq(snapshots, 0);
	ck_assert_int_eq(MPI_Test(&rq, &flag, MPI_STATUS_IGNORE), MPI_SUCCESS);
	ck_assert_int_eq(flag, 0);
	ck_assert_int_eq(MPI_Test(&rq, &flag, MPI_STATUS_IGNORE), MPI_SUCCESS);
	ck_assert_int_eq(flag, 1);
	ck_assert_int_eq(cm_mpi.transport.snapshot(&cm_mpi.transport, &r), 0);
	ck_assert_int_eq(snapshots, 1);
	MPI_Finalize();
}
END_TEST

/* The scripted log's next record, as the cm transport's peek says it: an
 * outcome (1), or none (0: the log has run out). */
static int scripted_peek(struct cm_transport *t, uint32_t *kind)
{
	(void)t;
	if (used >= nscript)
		return 0;
	*kind = CM_EV_TEST;
	return 1;
}

/* A replaying rank reads the next logged record ahead before a frame (it
 * may be a non-blocking collective's step due first). An image cut after
 * a record read ahead but not yet taken would make a rank restored from it
 * skip that record: no image there either. */
START_TEST(snapshot_waits_for_a_record_read_ahead)
{
	int v = 0, flag, x = 7;
	MPI_Request rq;
	init_logging();
	cm_mpi.transport.event_peek = scripted_peek;
	cm_mpi.transport.snapshot = counting_snapshot;
	script[nscript++] = rec(CM_ND_TEST, 0, 0, 0);
	ck_assert_int_eq(cm_mpi_nd_on(), 1); /* the hooks wrapped, as by a first decision */
	MPI_Irecv(&v, 1, MPI_INT, 1, 5, MPI_COMM_WORLD, &rq);
	fake_inject(1, 5, CTX_WORLD, &x, sizeof x, 0);
	struct cm_resume r;
	ck_assert_int_eq(cm_mpi.transport.snapshot(&cm_mpi.transport, &r), 2);
	ck_assert_int_eq(snapshots, 0);
	ck_assert_int_eq(MPI_Test(&rq, &flag, MPI_STATUS_IGNORE), MPI_SUCCESS);
	ck_assert_int_eq(flag, 1); /* the record read ahead, taken */
	ck_assert_int_eq(v, 7);
	ck_assert_int_eq(nlogged, 0);
	/* The log has run out: the rank leads, and the image is taken. */
	ck_assert_int_eq(cm_mpi.transport.snapshot(&cm_mpi.transport, &r), 0);
	ck_assert_int_eq(snapshots, 1);
	MPI_Finalize();
}
END_TEST

START_TEST(divergence_aborts)
{
	char err[1024];
	ck_assert_int_eq(fake_run_child(diverge_index, err, sizeof err), 1);
	ck_assert_msg(strstr(err, "MPI_Testany: cannot follow the logged outcome: request 5 of 2 "
	                          "does not exist"),
	              "stderr: %s", err);
	ck_assert_int_eq(fake_run_child(diverge_call, err, sizeof err), 1);
	ck_assert_msg(strstr(err, "MPI_Test: cannot follow the logged outcome: the logged "
	                          "outcome is of MPI_Testall"),
	              "stderr: %s", err);
	ck_assert_int_eq(fake_run_child(diverge_send, err, sizeof err), 1);
	ck_assert_msg(strstr(err, "2 more failed polls were logged before this point"),
	              "stderr: %s", err);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("nondet");
	TCase *tc = tcase_create("outcomes");
	tcase_add_test(tc, lead_counts_misses);
	tcase_add_test(tc, follow_imposes_misses_and_index);
	tcase_add_test(tc, follow_sets);
	tcase_add_test(tc, divergence_aborts);
	tcase_add_test(tc, snapshot_logs_pending_misses);
	tcase_add_test(tc, snapshot_waits_inside_a_record);
	tcase_add_test(tc, snapshot_waits_for_a_record_read_ahead);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
