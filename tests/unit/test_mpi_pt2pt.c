/* Unit tests of the MPI layer's point-to-point calls and barrier over the
 * fake transport (mpi_fake_transport.h): argument validation,
 * MPI_PROC_NULL, truncation, Ssend, probes, rank translation, packing of
 * pair types, the dissemination barrier. Each test runs in its own
 * process. */
#include <check.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mpi.h"
#include "mpi_fake_transport.h"
#include "mpi_unit.h"

START_TEST(send_argument_errors)
{
	int buf[4] = {0};
	init_returning(1, 4);
	ck_assert_int_eq(MPI_Send(buf, 1, MPI_INT, 4, 0, MPI_COMM_WORLD), MPI_ERR_RANK);
	ck_assert_int_eq(MPI_Send(buf, 1, MPI_INT, -3, 0, MPI_COMM_WORLD), MPI_ERR_RANK);
	ck_assert_int_eq(MPI_Send(buf, 1, MPI_INT, MPI_ANY_SOURCE, 0, MPI_COMM_WORLD),
	                 MPI_ERR_RANK);
	ck_assert_int_eq(MPI_Send(buf, 1, MPI_INT, 1, 0, MPI_COMM_SELF), MPI_ERR_RANK);
	ck_assert_int_eq(MPI_Send(buf, 1, MPI_INT, 0, -1, MPI_COMM_WORLD), MPI_ERR_TAG);
	ck_assert_int_eq(MPI_Send(buf, 1, MPI_INT, 0, MPI_ANY_TAG, MPI_COMM_WORLD), MPI_ERR_TAG);
	ck_assert_int_eq(MPI_Send(buf, -1, MPI_INT, 0, 0, MPI_COMM_WORLD), MPI_ERR_COUNT);
	ck_assert_int_eq(MPI_Send(NULL, 1, MPI_INT, 0, 0, MPI_COMM_WORLD), MPI_ERR_BUFFER);
	ck_assert_int_eq(MPI_Send(MPI_IN_PLACE, 1, MPI_INT, 0, 0, MPI_COMM_WORLD), MPI_ERR_BUFFER);
	ck_assert_int_eq(MPI_Send(buf, 1, MPI_DATATYPE_NULL, 0, 0, MPI_COMM_WORLD), MPI_ERR_TYPE);
	ck_assert_int_eq(MPI_Send(buf, 1, 0x12345, 0, 0, MPI_COMM_WORLD), MPI_ERR_TYPE);
	ck_assert_int_eq(MPI_Send(buf, 1, MPI_INT, 0, 0, MPI_COMM_NULL), MPI_ERR_COMM);
	ck_assert_int_eq(MPI_Send(buf, 1, MPI_INT, 0, 0, (MPI_Comm)0x44000002), MPI_ERR_COMM);
	ck_assert_int_eq(MPI_Send(buf, 1, MPI_INT, 0, 0, MPI_INT), MPI_ERR_COMM);
	ck_assert_int_eq(MPI_Ssend(buf, 1, MPI_INT, 9, 0, MPI_COMM_WORLD), MPI_ERR_RANK);
	ck_assert_int_eq(MPI_Rsend(buf, 1, MPI_INT, 0, -2, MPI_COMM_WORLD), MPI_ERR_TAG);
	ck_assert_int_eq(MPI_Bsend(buf, -5, MPI_INT, 0, 0, MPI_COMM_WORLD), MPI_ERR_COUNT);
	/* Over the 4 GiB - 1 a message may carry (never read: rejected first). */
	ck_assert_int_eq(MPI_Send(buf, (1 << 30), MPI_INT, 0, 0, MPI_COMM_WORLD), MPI_ERR_COUNT);
	MPI_Request rq = MPI_REQUEST_NULL;
	ck_assert_int_eq(MPI_Isend(buf, 1, MPI_INT, 5, 0, MPI_COMM_WORLD, &rq), MPI_ERR_RANK);
	ck_assert(rq == MPI_REQUEST_NULL);
	ck_assert_int_eq(MPI_Issend(buf, 1, MPI_INT, 0, -1, MPI_COMM_WORLD, &rq), MPI_ERR_TAG);
	ck_assert_int_eq(MPI_Isend(buf, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, NULL), MPI_ERR_ARG);
	/* Several errors at once: the communicator is checked first. */
	ck_assert_int_eq(MPI_Send(NULL, -1, MPI_DATATYPE_NULL, 99, -1, MPI_COMM_NULL),
	                 MPI_ERR_COMM);
	ck_assert_int_eq(fake.nsent, 0); /* nothing invalid reached the transport */
	/* A NULL buffer is fine for zero items. */
	ck_assert_int_eq(MPI_Send(NULL, 0, MPI_INT, 0, 0, MPI_COMM_WORLD), MPI_SUCCESS);
	ck_assert_int_eq(fake.nsent, 1);
}
END_TEST

START_TEST(recv_argument_errors)
{
	int buf[4];
	MPI_Status st;
	init_returning(0, 2);
	ck_assert_int_eq(MPI_Recv(buf, 1, MPI_INT, 2, 0, MPI_COMM_WORLD, &st), MPI_ERR_RANK);
	ck_assert_int_eq(MPI_Recv(buf, 1, MPI_INT, -7, 0, MPI_COMM_WORLD, &st), MPI_ERR_RANK);
	ck_assert_int_eq(MPI_Recv(buf, 1, MPI_INT, 0, -2, MPI_COMM_WORLD, &st), MPI_ERR_TAG);
	ck_assert_int_eq(MPI_Recv(buf, -1, MPI_INT, 0, 0, MPI_COMM_WORLD, &st), MPI_ERR_COUNT);
	ck_assert_int_eq(MPI_Recv(NULL, 2, MPI_INT, 0, 0, MPI_COMM_WORLD, &st), MPI_ERR_BUFFER);
	ck_assert_int_eq(MPI_Recv(MPI_IN_PLACE, 2, MPI_INT, 0, 0, MPI_COMM_WORLD, &st),
	                 MPI_ERR_BUFFER);
	ck_assert_int_eq(MPI_Recv(buf, 2, MPI_DATATYPE_NULL, 0, 0, MPI_COMM_WORLD, &st),
	                 MPI_ERR_TYPE);
	ck_assert_int_eq(MPI_Recv(buf, 2, MPI_INT, 0, 0, MPI_COMM_NULL, &st), MPI_ERR_COMM);
	MPI_Request rq;
	ck_assert_int_eq(MPI_Irecv(buf, 1, MPI_INT, 3, 0, MPI_COMM_WORLD, &rq), MPI_ERR_RANK);
	ck_assert_int_eq(MPI_Irecv(buf, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, NULL), MPI_ERR_ARG);
	int flag;
	ck_assert_int_eq(MPI_Iprobe(5, 0, MPI_COMM_WORLD, &flag, &st), MPI_ERR_RANK);
	ck_assert_int_eq(MPI_Iprobe(0, -9, MPI_COMM_WORLD, &flag, &st), MPI_ERR_TAG);
	ck_assert_int_eq(MPI_Iprobe(0, 0, MPI_COMM_WORLD, NULL, &st), MPI_ERR_ARG);
	ck_assert_int_eq(MPI_Probe(0, 0, MPI_COMM_NULL, &st), MPI_ERR_COMM);
	ck_assert_int_eq(
	    MPI_Sendrecv(buf, 1, MPI_INT, 0, 0, buf, 1, MPI_INT, 4, 0, MPI_COMM_WORLD, &st),
	    MPI_ERR_RANK);
	ck_assert_int_eq(fake.posted_recvs, 0);
	ck_assert_int_eq(fake.nsent, 0); /* the send half was not started either */
}
END_TEST

START_TEST(proc_null)
{
	int buf[2] = {7, 8};
	init_returning(0, 2);
	MPI_Status st = poisoned_status();
	ck_assert_int_eq(MPI_Send(buf, 2, MPI_INT, MPI_PROC_NULL, 3, MPI_COMM_WORLD), MPI_SUCCESS);
	ck_assert_int_eq(MPI_Ssend(buf, 2, MPI_INT, MPI_PROC_NULL, 3, MPI_COMM_WORLD), MPI_SUCCESS);
	ck_assert_int_eq(MPI_Recv(buf, 2, MPI_INT, MPI_PROC_NULL, 3, MPI_COMM_WORLD, &st),
	                 MPI_SUCCESS);
	ck_assert_int_eq(st.MPI_SOURCE, MPI_PROC_NULL);
	ck_assert_int_eq(st.MPI_TAG, MPI_ANY_TAG);
	ck_assert_int_eq(status_count(&st, MPI_INT), 0);
	ck_assert_int_eq(st.MPI_ERROR, 12345); /* single-completion calls leave it alone */
	ck_assert_int_eq(buf[0], 7);

	MPI_Request rq[2];
	int flag = 0;
	ck_assert_int_eq(
	    MPI_Irecv(buf, 2, MPI_INT, MPI_PROC_NULL, MPI_ANY_TAG, MPI_COMM_WORLD, &rq[0]),
	    MPI_SUCCESS);
	ck_assert_int_eq(MPI_Isend(buf, 2, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &rq[1]),
	                 MPI_SUCCESS);
	st = poisoned_status();
	ck_assert_int_eq(MPI_Test(&rq[0], &flag, &st), MPI_SUCCESS);
	ck_assert_int_eq(flag, 1);
	ck_assert(rq[0] == MPI_REQUEST_NULL);
	ck_assert_int_eq(st.MPI_SOURCE, MPI_PROC_NULL);
	ck_assert_int_eq(st.MPI_TAG, MPI_ANY_TAG);
	ck_assert_int_eq(MPI_Wait(&rq[1], MPI_STATUS_IGNORE), MPI_SUCCESS);

	st = poisoned_status();
	ck_assert_int_eq(MPI_Iprobe(MPI_PROC_NULL, 0, MPI_COMM_WORLD, &flag, &st), MPI_SUCCESS);
	ck_assert_int_eq(flag, 1);
	ck_assert_int_eq(st.MPI_SOURCE, MPI_PROC_NULL);
	ck_assert_int_eq(MPI_Probe(MPI_PROC_NULL, 0, MPI_COMM_WORLD, &st), MPI_SUCCESS);
	ck_assert_int_eq(status_count(&st, MPI_BYTE), 0);
	ck_assert_int_eq(MPI_Sendrecv(buf, 1, MPI_INT, MPI_PROC_NULL, 0, buf, 1, MPI_INT,
	                              MPI_PROC_NULL, 0, MPI_COMM_WORLD, &st),
	                 MPI_SUCCESS);
	ck_assert_int_eq(st.MPI_SOURCE, MPI_PROC_NULL);
	/* None of it touched the transport. */
	ck_assert_int_eq(fake.nsent, 0);
	ck_assert_int_eq(fake.posted_recvs, 0);
	ck_assert_int_eq(fake.probes, 0);
}
END_TEST

START_TEST(send_to_self_and_status)
{
	int out[3] = {10, 20, 30}, in[3] = {0};
	init_returning(2, 4);
	ck_assert_int_eq(MPI_Send(out, 3, MPI_INT, 2, 5, MPI_COMM_WORLD), MPI_SUCCESS);
	ck_assert_int_eq(fake.nsent, 1);
	ck_assert_int_eq(fake.sent[0].peer, 2);
	ck_assert_int_eq(fake.sent[0].tag, 5);
	ck_assert_uint_eq(fake.sent[0].ctx, CTX_WORLD);
	ck_assert_uint_eq(fake.sent[0].len, sizeof out);
	ck_assert_int_eq(fake.sent[0].sync, 0);
	MPI_Status st = poisoned_status();
	ck_assert_int_eq(MPI_Recv(in, 3, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st),
	                 MPI_SUCCESS);
	ck_assert_mem_eq(in, out, sizeof out);
	ck_assert_int_eq(st.MPI_SOURCE, 2);
	ck_assert_int_eq(st.MPI_TAG, 5);
	ck_assert_int_eq(st.MPI_ERROR, 12345);
	ck_assert_int_eq(status_count(&st, MPI_INT), 3);

	/* MPI_COMM_SELF: its own context; rank 0 there is world rank 2. */
	ck_assert_int_eq(MPI_Send(out, 1, MPI_INT, 0, 1, MPI_COMM_SELF), MPI_SUCCESS);
	ck_assert_int_eq(fake.sent[1].peer, 2);
	ck_assert_uint_eq(fake.sent[1].ctx, CTX_SELF);
	int flag = 1;
	MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
	ck_assert_int_eq(flag, 0); /* not visible in the world's context */
	ck_assert_int_eq(MPI_Recv(in, 1, MPI_INT, 0, 1, MPI_COMM_SELF, &st), MPI_SUCCESS);
	ck_assert_int_eq(st.MPI_SOURCE, 0);
}
END_TEST

START_TEST(any_source_translates_ranks)
{
	double v = 0;
	const double sent = 2.5;
	init_returning(0, 3);
	fake_inject(2, 9, CTX_WORLD, &sent, sizeof sent, 0);
	MPI_Status st;
	ck_assert_int_eq(MPI_Recv(&v, 1, MPI_DOUBLE, MPI_ANY_SOURCE, 9, MPI_COMM_WORLD, &st),
	                 MPI_SUCCESS);
	ck_assert(v == 2.5);
	ck_assert_int_eq(st.MPI_SOURCE, 2);
	ck_assert_int_eq(st.MPI_TAG, 9);
}
END_TEST

START_TEST(truncation)
{
	int out[8] = {1, 2, 3, 4, 5, 6, 7, 8}, in[8] = {0};
	init_returning(0, 1);
	MPI_Send(out, 8, MPI_INT, 0, 0, MPI_COMM_WORLD);
	MPI_Status st = poisoned_status();
	ck_assert_int_eq(MPI_Recv(in, 4, MPI_INT, 0, 0, MPI_COMM_WORLD, &st), MPI_ERR_TRUNCATE);
	ck_assert_mem_eq(in, out, 4 * sizeof(int));
	ck_assert_int_eq(in[4], 0); /* nothing past the buffer */
	ck_assert_int_eq(st.MPI_SOURCE, 0);
	ck_assert_int_eq(st.MPI_TAG, 0);
	ck_assert_int_eq(st.MPI_ERROR, 12345);
	ck_assert_int_eq(status_count(&st, MPI_INT), 4);

	/* In a multiple completion the error goes to the statuses. */
	MPI_Request rq[3];
	MPI_Status sts[3] = {poisoned_status(), poisoned_status(), poisoned_status()};
	MPI_Send(out, 1, MPI_INT, 0, 1, MPI_COMM_WORLD);
	MPI_Send(out, 8, MPI_INT, 0, 2, MPI_COMM_WORLD);
	MPI_Irecv(in, 1, MPI_INT, 0, 1, MPI_COMM_WORLD, &rq[0]);
	MPI_Irecv(in + 1, 2, MPI_INT, 0, 2, MPI_COMM_WORLD, &rq[1]);
	rq[2] = MPI_REQUEST_NULL;
	ck_assert_int_eq(MPI_Waitall(3, rq, sts), MPI_ERR_IN_STATUS);
	ck_assert_int_eq(sts[0].MPI_ERROR, MPI_SUCCESS);
	ck_assert_int_eq(sts[1].MPI_ERROR, MPI_ERR_TRUNCATE);
	ck_assert_int_eq(sts[2].MPI_ERROR, MPI_SUCCESS);
	ck_assert_int_eq(sts[1].MPI_TAG, 2);
	ck_assert_int_eq(sts[2].MPI_SOURCE, MPI_ANY_SOURCE); /* empty status */
	for (int i = 0; i < 3; i++)
		ck_assert(rq[i] == MPI_REQUEST_NULL);

	/* Without errors MPI_Waitall leaves MPI_ERROR alone. */
	MPI_Send(out, 1, MPI_INT, 0, 3, MPI_COMM_WORLD);
	MPI_Irecv(in, 1, MPI_INT, 0, 3, MPI_COMM_WORLD, &rq[0]);
	sts[0] = poisoned_status();
	ck_assert_int_eq(MPI_Waitall(1, rq, sts), MPI_SUCCESS);
	ck_assert_int_eq(sts[0].MPI_ERROR, 12345);

	/* Waitany reports the error itself, not MPI_ERR_IN_STATUS. */
	int index = -1;
	MPI_Send(out, 2, MPI_INT, 0, 4, MPI_COMM_WORLD);
	MPI_Irecv(in, 1, MPI_INT, 0, 4, MPI_COMM_WORLD, &rq[0]);
	ck_assert_int_eq(MPI_Waitany(1, rq, &index, &st), MPI_ERR_TRUNCATE);
	ck_assert_int_eq(index, 0);
}
END_TEST

static void fatal_truncation(void)
{
	int out[2] = {1, 2}, in;
	fake_reset(0, 1);
	MPI_Init(NULL, NULL);
	MPI_Send(out, 2, MPI_INT, 0, 0, MPI_COMM_WORLD);
	MPI_Recv(&in, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

START_TEST(truncation_is_fatal_by_default)
{
	char err[1024];
	ck_assert_int_eq(fake_run_child(fatal_truncation, err, sizeof err), 1);
	ck_assert_str_eq(err, "chanmem: rank 0: MPI_Recv: MPI_ERR_TRUNCATE: message truncated\n");
}
END_TEST

START_TEST(ssend_completes_when_matched)
{
	int x = 5, y = 0, flag = 1;
	MPI_Request rs, rr;
	init_returning(0, 1);
	ck_assert_int_eq(MPI_Issend(&x, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, &rs), MPI_SUCCESS);
	ck_assert_int_eq(fake.sent[0].sync, 1);
	ck_assert_int_eq(MPI_Test(&rs, &flag, MPI_STATUS_IGNORE), MPI_SUCCESS);
	ck_assert_int_eq(flag, 0);
	MPI_Irecv(&y, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, &rr);
	ck_assert_int_eq(MPI_Test(&rs, &flag, MPI_STATUS_IGNORE), MPI_SUCCESS);
	ck_assert_int_eq(flag, 1);
	ck_assert_int_eq(MPI_Wait(&rr, MPI_STATUS_IGNORE), MPI_SUCCESS);
	ck_assert_int_eq(y, 5);
	/* A blocking Ssend to self with no receive would never complete. */
	ck_assert_int_eq(MPI_Ssend(&x, 1, MPI_INT, 0, 0, MPI_COMM_WORLD), MPI_ERR_OTHER);
	ck_assert_int_eq(fake.sent[1].sync, 1);
}
END_TEST

START_TEST(probe_reports_without_receiving)
{
	char msg[] = "hello, probe";
	char in[32] = {0};
	MPI_Status st = poisoned_status();
	int flag = 0;
	init_returning(0, 1);
	ck_assert_int_eq(MPI_Iprobe(0, 0, MPI_COMM_WORLD, &flag, &st), MPI_SUCCESS);
	ck_assert_int_eq(flag, 0);
	ck_assert_int_eq(fake.progress_poll, 1);
	MPI_Send(msg, (int)sizeof msg, MPI_CHAR, 0, 6, MPI_COMM_WORLD);
	ck_assert_int_eq(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st),
	                 MPI_SUCCESS);
	ck_assert_int_eq(flag, 1);
	ck_assert_int_eq(st.MPI_SOURCE, 0);
	ck_assert_int_eq(st.MPI_TAG, 6);
	ck_assert_int_eq(status_count(&st, MPI_CHAR), (int)sizeof msg);
	st = poisoned_status();
	ck_assert_int_eq(MPI_Probe(0, 6, MPI_COMM_WORLD, &st), MPI_SUCCESS);
	ck_assert_int_eq(status_count(&st, MPI_CHAR), (int)sizeof msg);
	ck_assert_int_eq(st.MPI_ERROR, 12345);
	MPI_Recv(in, (int)sizeof in, MPI_CHAR, 0, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	ck_assert_str_eq(in, msg);
}
END_TEST

START_TEST(pair_types_are_packed)
{
	struct di {
		double v;
		int i;
	} out[3] = {{1.5, 1}, {2.5, 2}, {-3.25, 3}}, in[3];
	memset(in, 0xaa, sizeof in);
	init_returning(0, 1);
	ck_assert_int_eq(MPI_Send(out, 3, MPI_DOUBLE_INT, 0, 0, MPI_COMM_WORLD), MPI_SUCCESS);
	ck_assert_uint_eq(fake.sent[0].len, 3 * (sizeof(double) + sizeof(int))); /* no padding */
	MPI_Status st;
	ck_assert_int_eq(MPI_Recv(in, 3, MPI_DOUBLE_INT, 0, 0, MPI_COMM_WORLD, &st), MPI_SUCCESS);
	for (int i = 0; i < 3; i++) {
		ck_assert(in[i].v == out[i].v);
		ck_assert_int_eq(in[i].i, out[i].i);
	}
	/* The padding of the receive buffer is not written. */
	unsigned char *pad = (unsigned char *)&in[0] + sizeof(double) + sizeof(int);
	if ((size_t)(pad - (unsigned char *)&in[0]) < sizeof in[0])
		ck_assert_int_eq(pad[0], 0xaa);
	ck_assert_int_eq(status_count(&st, MPI_DOUBLE_INT), 3);
	int n;
	MPI_Get_elements(&st, MPI_DOUBLE_INT, &n);
	ck_assert_int_eq(n, 6);

	/* A short message into a pair buffer: the items that came are whole. */
	MPI_Send(out, 1, MPI_DOUBLE_INT, 0, 1, MPI_COMM_WORLD);
	memset(in, 0, sizeof in);
	ck_assert_int_eq(MPI_Recv(in, 3, MPI_DOUBLE_INT, 0, 1, MPI_COMM_WORLD, &st), MPI_SUCCESS);
	ck_assert(in[0].v == 1.5 && in[0].i == 1 && in[1].v == 0);
	ck_assert_int_eq(status_count(&st, MPI_DOUBLE_INT), 1);
}
END_TEST

START_TEST(sendrecv_and_replace)
{
	int a[2] = {1, 2}, b[2] = {0};
	MPI_Status st;
	init_returning(0, 1);
	ck_assert_int_eq(
	    MPI_Sendrecv(a, 2, MPI_INT, 0, 8, b, 2, MPI_INT, 0, 8, MPI_COMM_WORLD, &st),
	    MPI_SUCCESS);
	ck_assert_int_eq(b[0], 1);
	ck_assert_int_eq(b[1], 2);
	ck_assert_int_eq(st.MPI_TAG, 8);
	/* Replace: the outgoing items are what the buffer held before. */
	ck_assert_int_eq(MPI_Send((int[]){9, 9}, 2, MPI_INT, 0, 3, MPI_COMM_WORLD), MPI_SUCCESS);
	ck_assert_int_eq(MPI_Sendrecv_replace(a, 2, MPI_INT, 0, 4, 0, 3, MPI_COMM_WORLD, &st),
	                 MPI_SUCCESS);
	ck_assert_int_eq(a[0], 9);
	ck_assert_int_eq(st.MPI_TAG, 3);
	ck_assert_int_eq(MPI_Recv(b, 2, MPI_INT, 0, 4, MPI_COMM_WORLD, &st), MPI_SUCCESS);
	ck_assert_int_eq(b[0], 1);
	ck_assert_int_eq(b[1], 2);
}
END_TEST

START_TEST(buffer_attach_detach)
{
	static char space[1024];
	void *back = NULL;
	int size = 0;
	init_returning(0, 1);
	ck_assert_int_eq(MPI_Buffer_attach(space, (int)sizeof space), MPI_SUCCESS);
	ck_assert_int_eq(MPI_Buffer_attach(space, (int)sizeof space), MPI_ERR_BUFFER);
	int x = 3, y = 0;
	ck_assert_int_eq(MPI_Bsend(&x, 1, MPI_INT, 0, 0, MPI_COMM_WORLD), MPI_SUCCESS);
	ck_assert_int_eq(MPI_Recv(&y, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
	                 MPI_SUCCESS);
	ck_assert_int_eq(y, 3);
	ck_assert_int_eq(MPI_Buffer_detach(&back, &size), MPI_SUCCESS);
	ck_assert_ptr_eq(back, space);
	ck_assert_int_eq(size, (int)sizeof space);
	ck_assert_int_eq(MPI_Buffer_attach(NULL, -1), MPI_ERR_BUFFER);
}
END_TEST

/* MPI_Bsend copies the packed message into the attached buffer, after an
 * MPI_BSEND_OVERHEAD header, and sends it from there; a message that does
 * not fit, or no buffer, is MPI_ERR_BUFFER. */
START_TEST(bsend_uses_the_attached_buffer)
{
	static unsigned char space[2 * (16 + MPI_BSEND_OVERHEAD)];
	short pair[2][2] = {{1, 2}, {3, 4}}; /* MPI_SHORT_INT packs away the padding */
	int big[40] = {0};
	void *back = NULL;
	int size = -1;
	init_returning(0, 2);
	ck_assert_int_eq(MPI_Bsend(big, 1, MPI_INT, 1, 0, MPI_COMM_WORLD), MPI_ERR_BUFFER);
	ck_assert_int_eq(MPI_Buffer_attach(space, (int)sizeof space), MPI_SUCCESS);
	memset(space, 0xee, sizeof space);
	ck_assert_int_eq(MPI_Bsend(big, 40, MPI_INT, 1, 0, MPI_COMM_WORLD), MPI_ERR_BUFFER);
	ck_assert_int_eq(fake.nsent, 0);
	int v[4] = {10, 11, 12, 13};
	ck_assert_int_eq(MPI_Bsend(v, 4, MPI_INT, 1, 5, MPI_COMM_WORLD), MPI_SUCCESS);
	ck_assert_int_eq(fake.nsent, 1);
	ck_assert_int_eq(fake.sent[0].len, 16);
	ck_assert_mem_eq(space + MPI_BSEND_OVERHEAD, v, 16); /* sent from the buffer */
	/* The first allocation is reclaimed (the fake completed the send), so
	 * a message filling the whole buffer fits. */
	int fill[(sizeof space - MPI_BSEND_OVERHEAD) / sizeof(int)];
	for (size_t i = 0; i < sizeof fill / sizeof fill[0]; i++)
		fill[i] = (int)i;
	ck_assert_int_eq(
	    MPI_Bsend(fill, (int)(sizeof fill / sizeof fill[0]), MPI_INT, 1, 6, MPI_COMM_WORLD),
	    MPI_SUCCESS);
	ck_assert_mem_eq(space + MPI_BSEND_OVERHEAD, fill, sizeof fill);
	MPI_Request rq = MPI_REQUEST_NULL;
	ck_assert_int_eq(MPI_Ibsend(pair, 1, MPI_SHORT_INT, 1, 7, MPI_COMM_WORLD, &rq),
	                 MPI_SUCCESS);
	ck_assert_int_eq(fake.sent[2].len, sizeof(short) + sizeof(int));
	int flag = 0;
	ck_assert_int_eq(MPI_Test(&rq, &flag, MPI_STATUS_IGNORE), MPI_SUCCESS);
	ck_assert_int_eq(flag, 1); /* complete once copied */
	ck_assert(rq == MPI_REQUEST_NULL);
	ck_assert_int_eq(MPI_Buffer_detach(&back, &size), MPI_SUCCESS);
	ck_assert_ptr_eq(back, space);
	ck_assert_int_eq(size, (int)sizeof space);
	ck_assert_int_eq(MPI_Bsend(v, 1, MPI_INT, 1, 8, MPI_COMM_WORLD), MPI_ERR_BUFFER);
	/* MPI_PROC_NULL needs no room. */
	ck_assert_int_eq(MPI_Bsend(v, 1, MPI_INT, MPI_PROC_NULL, 8, MPI_COMM_WORLD), MPI_SUCCESS);
}
END_TEST

/* The partners of the dissemination barrier: rank r sends to r + 2^k in
 * round k, for ceil(log2 P) rounds, on the collective context. */
START_TEST(barrier_is_dissemination)
{
	static const int sizes[] = {1, 2, 3, 5, 8, 9};
	int size = sizes[_i];
	int rounds = 0;
	while ((1 << rounds) < size)
		rounds++;
	for (int rank = 0; rank < size; rank += (size > 4 ? size / 3 : 1)) {
		/* Each rank in its own process: MPI_Init once per process. */
		pid_t pid = fork();
		ck_assert_int_ge(pid, 0);
		if (pid == 0) {
			init_returning(rank, size);
			if (MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS || fake.nsent != rounds)
				_exit(1);
			for (int k = 0; k < rounds; k++) {
				const struct fake_sent *s = &fake.sent[k];
				if (s->peer != (rank + (1 << k)) % size ||
				    s->ctx != CTX_WORLD_COLL || s->len != 0 ||
				    (k > 0 && s->tag == fake.sent[k - 1].tag))
					_exit(2);
			}
			if (MPI_Barrier(MPI_COMM_SELF) != MPI_SUCCESS || fake.nsent != rounds)
				_exit(3);
			if (MPI_Finalize() != MPI_SUCCESS || fake.nsent != 2 * rounds ||
			    fake.finalizes != 1)
				_exit(4);
			_exit(0);
		}
		int status;
		ck_assert_int_eq(waitpid(pid, &status, 0), pid);
		ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		              "size %d rank %d: child status %d", size, rank, status);
	}
}
END_TEST

START_TEST(barrier_argument_errors)
{
	init_returning(0, 2);
	ck_assert_int_eq(MPI_Barrier(MPI_COMM_NULL), MPI_ERR_COMM);
	ck_assert_int_eq(fake.nsent, 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("mpi_pt2pt");
	TCase *args = tcase_create("arguments");
	tcase_add_test(args, send_argument_errors);
	tcase_add_test(args, recv_argument_errors);
	tcase_add_test(args, barrier_argument_errors);
	suite_add_tcase(s, args);
	TCase *p2p = tcase_create("pt2pt");
	tcase_add_test(p2p, proc_null);
	tcase_add_test(p2p, send_to_self_and_status);
	tcase_add_test(p2p, any_source_translates_ranks);
	tcase_add_test(p2p, truncation);
	tcase_add_test(p2p, truncation_is_fatal_by_default);
	tcase_add_test(p2p, ssend_completes_when_matched);
	tcase_add_test(p2p, probe_reports_without_receiving);
	tcase_add_test(p2p, pair_types_are_packed);
	tcase_add_test(p2p, sendrecv_and_replace);
	tcase_add_test(p2p, buffer_attach_detach);
	tcase_add_test(p2p, bsend_uses_the_attached_buffer);
	suite_add_tcase(s, p2p);
	suite_add_tcase(s, mpi_request_tcase());
	TCase *coll = tcase_create("barrier");
	tcase_add_loop_test(coll, barrier_is_dissemination, 0, 6);
	suite_add_tcase(s, coll);
	SRunner *sr = srunner_create(s);
	srunner_set_fork_status(sr, CK_FORK); /* every test starts before MPI_Init */
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
