/* matching: tag and wildcard matching, probes, completion calls, PROC_NULL.
 *
 * Rank 0 receives; rank 1 (and for the wildcard sections every other rank)
 * sends. Sections are separated by Barriers so no message of one section can
 * be taken by another. Where a check needs "this has not happened yet" (Test
 * returning false), the sender waits for a "go" message from rank 0 before
 * sending: an ordering guarantee, never a timing assumption.
 * Needs at least 3 ranks; rank 0 prints one line per section. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
	TAG_GO = 999,
	ANY_SOURCE_MESSAGES = 20, /* per sender */
	ANY_BOTH_MESSAGES = 3,    /* per sender */
};

static void section_end(const char *line)
{
	TU_MPI(MPI_Barrier(MPI_COMM_WORLD));
	if (tu_rank == 0) {
		printf("matching: %s\n", line);
		fflush(stdout);
	}
}

static void send_go(void)
{
	TU_MPI(MPI_Send(NULL, 0, MPI_INT, 1, TAG_GO, MPI_COMM_WORLD));
}

static void wait_go(void)
{
	TU_MPI(MPI_Recv(NULL, 0, MPI_INT, 0, TAG_GO, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
}

static void check_status(const MPI_Status *st, int source, int tag, MPI_Datatype type, int count,
                         const char *what)
{
	int n = -1;
	TU_MPI(MPI_Get_count(st, type, &n));
	TU_CHECK(st->MPI_SOURCE == source && st->MPI_TAG == tag && n == count,
	         "%s: status source %d tag %d count %d, expected %d %d %d", what, st->MPI_SOURCE,
	         st->MPI_TAG, n, source, tag, count);
}

static void check_empty_status(const MPI_Status *st, const char *what)
{
	check_status(st, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_BYTE, 0, what);
}

/* Rank 1 sends tags 1..5 in order; rank 0 receives them in another order. */
static void tag_order(void)
{
	static const int order[2][5] = {{3, 1, 5, 2, 4}, {5, 4, 3, 2, 1}};
	for (int pass = 0; pass < 2; pass++) {
		if (tu_rank == 1) {
			int payload[5];
			MPI_Request reqs[5];
			for (int t = 1; t <= 5; t++) {
				payload[t - 1] = t * 100 + pass;
				TU_MPI(MPI_Isend(&payload[t - 1], 1, MPI_INT, 0, t, MPI_COMM_WORLD,
				                 &reqs[t - 1]));
			}
			TU_MPI(MPI_Waitall(5, reqs, MPI_STATUSES_IGNORE));
		} else if (tu_rank == 0) {
			for (int i = 0; i < 5; i++) {
				int t = order[pass][i], v = -1;
				MPI_Status st;
				TU_MPI(MPI_Recv(&v, 1, MPI_INT, 1, t, MPI_COMM_WORLD, &st));
				check_status(&st, 1, t, MPI_INT, 1, "tag order");
				TU_CHECK(v == t * 100 + pass, "tag %d carried %d, expected %d", t,
				         v, t * 100 + pass);
			}
		}
	}
	section_end("tags 1..5 sent in order, received in orders 3,1,5,2,4 and 5,4,3,2,1: ok");
}

/* ANY_TAG takes the earliest message of the source that is still pending. */
static void any_tag(void)
{
	static const int tags[4] = {10, 20, 30, 40};
	if (tu_rank == 1) {
		MPI_Request reqs[4];
		for (int i = 0; i < 4; i++)
			TU_MPI(
			    MPI_Isend(&tags[i], 1, MPI_INT, 0, tags[i], MPI_COMM_WORLD, &reqs[i]));
		TU_MPI(MPI_Waitall(4, reqs, MPI_STATUSES_IGNORE));
	} else if (tu_rank == 0) {
		MPI_Status st;
		int v = -1;
		TU_MPI(MPI_Recv(&v, 1, MPI_INT, 1, 30, MPI_COMM_WORLD, &st));
		check_status(&st, 1, 30, MPI_INT, 1, "specific tag 30");
		TU_CHECK(v == 30, "tag 30 carried %d", v);
		static const int expected[3] = {10, 20, 40};
		for (int i = 0; i < 3; i++) {
			TU_MPI(MPI_Recv(&v, 1, MPI_INT, 1, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
			check_status(&st, 1, expected[i], MPI_INT, 1, "MPI_ANY_TAG");
			TU_CHECK(v == expected[i], "MPI_ANY_TAG receive %d carried %d, expected %d",
			         i, v, expected[i]);
		}
	}
	section_end("MPI_ANY_TAG after a specific tag 30 got 10, 20, 40 in send order: ok");
}

/* Payload of wildcard messages: sender, sequence number, then filler. */
static int wildcard_count(int sender, int seq)
{
	return 2 + (sender + seq) % 5;
}

static void send_wildcard_batch(int nmsgs, int tag)
{
	int(*payload)[8] = calloc((size_t)nmsgs, sizeof(*payload));
	MPI_Request *reqs = calloc((size_t)nmsgs, sizeof(*reqs));
	TU_CHECK(payload && reqs, "out of memory");
	for (int seq = 0; seq < nmsgs; seq++) {
		int n = wildcard_count(tu_rank, seq);
		for (int k = 0; k < n; k++)
			payload[seq][k] = k == 0 ? tu_rank : k == 1 ? seq : tu_rank * 1000 + seq;
		TU_MPI(MPI_Isend(payload[seq], n, MPI_INT, 0, tag, MPI_COMM_WORLD, &reqs[seq]));
	}
	TU_MPI(MPI_Waitall(nmsgs, reqs, MPI_STATUSES_IGNORE));
	free(payload);
	free(reqs);
}

/* Receives every sender's batch through wildcards; per sender the sequence
 * numbers must come in order and each message exactly once. */
static void receive_wildcard_batches(int nmsgs, int source_arg, int tag_arg, int tag_base,
                                     const char *what)
{
	int *next_seq = calloc((size_t)tu_size, sizeof(int));
	TU_CHECK(next_seq, "out of memory");
	for (int i = 0; i < nmsgs * (tu_size - 1); i++) {
		int buf[8];
		MPI_Status st;
		TU_MPI(MPI_Recv(buf, 8, MPI_INT, source_arg, tag_arg, MPI_COMM_WORLD, &st));
		int src = st.MPI_SOURCE;
		TU_CHECK(src >= 1 && src < tu_size, "%s: status source %d", what, src);
		int seq = next_seq[src]++;
		TU_CHECK(seq < nmsgs, "%s: more than %d messages from rank %d", what, nmsgs, src);
		int expected_tag = tag_base == 60 ? 60 + src : tag_base;
		check_status(&st, src, expected_tag, MPI_INT, wildcard_count(src, seq), what);
		TU_CHECK(buf[0] == src && buf[1] == seq,
		         "%s: message from rank %d carried sender %d seq %d, expected seq %d", what,
		         src, buf[0], buf[1], seq);
		for (int k = 2; k < wildcard_count(src, seq); k++)
			TU_CHECK(buf[k] == src * 1000 + seq, "%s: rank %d seq %d word %d is %d",
			         what, src, seq, k, buf[k]);
	}
	for (int src = 1; src < tu_size; src++)
		TU_CHECK(next_seq[src] == nmsgs, "%s: %d messages from rank %d, expected %d", what,
		         next_seq[src], src, nmsgs);
	/* Anything still matching would be a duplicate. */
	int flag = 1;
	TU_MPI(MPI_Iprobe(MPI_ANY_SOURCE, tag_arg, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
	TU_CHECK(!flag, "%s: an extra message is waiting after all were received", what);
	free(next_seq);
}

static void any_source(void)
{
	char line[160];
	if (tu_rank != 0)
		send_wildcard_batch(ANY_SOURCE_MESSAGES, 50);
	else
		receive_wildcard_batches(ANY_SOURCE_MESSAGES, MPI_ANY_SOURCE, 50, 50,
		                         "MPI_ANY_SOURCE");
	snprintf(line, sizeof(line),
	         "MPI_ANY_SOURCE: %d senders x %d messages, each once, in order per sender: ok",
	         tu_size - 1, ANY_SOURCE_MESSAGES);
	section_end(line);

	if (tu_rank != 0)
		send_wildcard_batch(ANY_BOTH_MESSAGES, 60 + tu_rank);
	else
		receive_wildcard_batches(ANY_BOTH_MESSAGES, MPI_ANY_SOURCE, MPI_ANY_TAG, 60,
		                         "MPI_ANY_SOURCE+MPI_ANY_TAG");
	snprintf(line, sizeof(line),
	         "MPI_ANY_SOURCE+MPI_ANY_TAG: %d senders x %d messages, tags right: ok",
	         tu_size - 1, ANY_BOTH_MESSAGES);
	section_end(line);
}

/* Iprobe until something matches; bounded, sleeping between tries. */
static void iprobe_until_found(int source, int tag, MPI_Status *st)
{
	for (int tries = 0; tries < 30000; tries++) {
		int flag = 0;
		TU_MPI(MPI_Iprobe(source, tag, MPI_COMM_WORLD, &flag, st));
		if (flag)
			return;
		tu_sleep_ms(1);
	}
	tu_fail("MPI_Iprobe(%d, %d) found nothing for 30 s", source, tag);
}

static void probes(void)
{
	if (tu_rank == 1) {
		int *big = malloc(777 * sizeof(int));
		TU_CHECK(big, "out of memory");
		for (int i = 0; i < 777; i++)
			big[i] = i * 7;
		MPI_Request reqs[2];
		TU_MPI(MPI_Isend(big, 777, MPI_INT, 0, 70, MPI_COMM_WORLD, &reqs[0]));
		TU_MPI(MPI_Isend(NULL, 0, MPI_INT, 0, 71, MPI_COMM_WORLD, &reqs[1]));
		TU_MPI(MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE));
		free(big);
	} else if (tu_rank == 2) {
		double d[333];
		for (int i = 0; i < 333; i++)
			d[i] = i * 0.5;
		TU_MPI(MPI_Send(d, 333, MPI_DOUBLE, 0, 72, MPI_COMM_WORLD));
	} else if (tu_rank == 0) {
		MPI_Status st;
		int flag = 0;
		TU_MPI(MPI_Probe(1, 70, MPI_COMM_WORLD, &st));
		check_status(&st, 1, 70, MPI_INT, 777, "MPI_Probe");
		TU_MPI(MPI_Probe(1, 70, MPI_COMM_WORLD, &st)); /* a probe does not consume */
		check_status(&st, 1, 70, MPI_INT, 777, "second MPI_Probe");
		TU_MPI(MPI_Iprobe(1, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st));
		TU_CHECK(flag, "MPI_Iprobe misses a message MPI_Probe found");
		check_status(&st, 1, 70, MPI_INT, 777, "MPI_Iprobe after MPI_Probe");
		int count = 0;
		TU_MPI(MPI_Get_count(&st, MPI_INT, &count));
		int *big = malloc((size_t)count * sizeof(int));
		TU_CHECK(big, "out of memory");
		TU_MPI(
		    MPI_Recv(big, count, MPI_INT, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, &st));
		check_status(&st, 1, 70, MPI_INT, 777, "MPI_Recv of the probed size");
		for (int i = 0; i < 777; i++)
			TU_CHECK(big[i] == i * 7, "probed message word %d is %d", i, big[i]);
		free(big);

		TU_MPI(MPI_Probe(MPI_ANY_SOURCE, 71, MPI_COMM_WORLD, &st));
		check_status(&st, 1, 71, MPI_INT, 0, "MPI_Probe of an empty message");
		TU_MPI(MPI_Recv(NULL, 0, MPI_INT, 1, 71, MPI_COMM_WORLD, &st));

		iprobe_until_found(MPI_ANY_SOURCE, MPI_ANY_TAG, &st);
		check_status(&st, 2, 72, MPI_DOUBLE, 333, "MPI_Iprobe(ANY, ANY)");
		double d[333];
		TU_MPI(
		    MPI_Recv(d, 333, MPI_DOUBLE, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, &st));
		for (int i = 0; i < 333; i++)
			TU_CHECK(d[i] == i * 0.5, "double %d is %g", i, d[i]);

		TU_MPI(MPI_Iprobe(MPI_ANY_SOURCE, 79, MPI_COMM_WORLD, &flag, &st));
		TU_CHECK(!flag, "MPI_Iprobe found tag 79, which nobody sent");
	}
	section_end("MPI_Probe/MPI_Iprobe then MPI_Recv of the probed size: ok");
}

/* Test, Testany, Waitany, Waitall, Testall between ranks 0 and 1. */
static void completions(void)
{
	if (tu_rank == 1) {
		/* -1: wait for rank 0's next "go"; else send that tag. */
		static const int sequence[] = {-1, 80, -1, 82, -1, 83, 81, -1, 84, -1, 85, -1, 86};
		for (size_t i = 0; i < sizeof(sequence) / sizeof(sequence[0]); i++) {
			if (sequence[i] < 0)
				wait_go();
			else
				TU_MPI(MPI_Send(&sequence[i], 1, MPI_INT, 0, sequence[i],
				                MPI_COMM_WORLD));
		}
		int v = -1;
		TU_MPI(MPI_Recv(&v, 1, MPI_INT, 0, 87, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
		TU_CHECK(v == 87, "tag 87 carried %d", v);
		v = 88;
		TU_MPI(MPI_Send(&v, 1, MPI_INT, 0, 88, MPI_COMM_WORLD));
	} else if (tu_rank == 0) {
		int v[4] = {-1, -1, -1, -1}, flag = -1, index = -2;
		MPI_Request r[3];
		MPI_Status st, sts[3];

		/* Test: not before the message is sent, then Wait, then a null request. */
		TU_MPI(MPI_Irecv(&v[0], 1, MPI_INT, 1, 80, MPI_COMM_WORLD, &r[0]));
		TU_MPI(MPI_Test(&r[0], &flag, &st));
		TU_CHECK(flag == 0, "MPI_Test completed a receive whose message was not sent yet");
		send_go();
		TU_MPI(MPI_Wait(&r[0], &st));
		check_status(&st, 1, 80, MPI_INT, 1, "MPI_Wait");
		TU_CHECK(r[0] == MPI_REQUEST_NULL && v[0] == 80, "MPI_Wait: request %s, value %d",
		         r[0] == MPI_REQUEST_NULL ? "null" : "still set", v[0]);
		TU_MPI(MPI_Test(&r[0], &flag, &st));
		TU_CHECK(flag == 1, "MPI_Test of MPI_REQUEST_NULL gave flag 0");
		check_empty_status(&st, "MPI_Test of MPI_REQUEST_NULL");

		/* Testany (nothing), Waitany (the one sent), Waitall (with a null). */
		for (int i = 0; i < 3; i++)
			TU_MPI(MPI_Irecv(&v[i], 1, MPI_INT, 1, 81 + i, MPI_COMM_WORLD, &r[i]));
		TU_MPI(MPI_Testany(3, r, &index, &flag, &st));
		TU_CHECK(flag == 0 && index == MPI_UNDEFINED,
		         "MPI_Testany with nothing sent: flag %d index %d", flag, index);
		send_go();
		TU_MPI(MPI_Waitany(3, r, &index, &st));
		TU_CHECK(index == 1 && r[1] == MPI_REQUEST_NULL && v[1] == 82,
		         "MPI_Waitany: index %d value %d", index, v[1]);
		check_status(&st, 1, 82, MPI_INT, 1, "MPI_Waitany");
		send_go();
		TU_MPI(MPI_Waitall(3, r, sts));
		check_status(&sts[0], 1, 81, MPI_INT, 1, "MPI_Waitall entry 0");
		check_empty_status(&sts[1], "MPI_Waitall entry of a null request");
		check_status(&sts[2], 1, 83, MPI_INT, 1, "MPI_Waitall entry 2");
		TU_CHECK(v[0] == 81 && v[2] == 83, "MPI_Waitall values %d %d", v[0], v[2]);
		for (int i = 0; i < 3; i++)
			TU_CHECK(r[i] == MPI_REQUEST_NULL, "MPI_Waitall left request %d set", i);

		/* Testall: false while one is missing, true once both arrived. */
		TU_MPI(MPI_Irecv(&v[0], 1, MPI_INT, 1, 84, MPI_COMM_WORLD, &r[0]));
		TU_MPI(MPI_Irecv(&v[1], 1, MPI_INT, 1, 85, MPI_COMM_WORLD, &r[1]));
		TU_MPI(MPI_Testall(2, r, &flag, sts));
		TU_CHECK(flag == 0, "MPI_Testall true with nothing sent");
		send_go();
		TU_MPI(MPI_Testall(2, r, &flag, sts));
		TU_CHECK(flag == 0, "MPI_Testall true while tag 85 was not sent yet");
		send_go();
		for (int tries = 0; !flag; tries++) {
			TU_CHECK(tries < 30000, "MPI_Testall still false after 30 s");
			tu_sleep_ms(tries ? 1 : 0);
			TU_MPI(MPI_Testall(2, r, &flag, sts));
		}
		check_status(&sts[0], 1, 84, MPI_INT, 1, "MPI_Testall entry 0");
		check_status(&sts[1], 1, 85, MPI_INT, 1, "MPI_Testall entry 1");
		TU_CHECK(r[0] == MPI_REQUEST_NULL && r[1] == MPI_REQUEST_NULL && v[0] == 84 &&
		             v[1] == 85,
		         "MPI_Testall: requests not freed or values %d %d", v[0], v[1]);

		/* Only null requests. */
		TU_MPI(MPI_Testany(3, r, &index, &flag, &st));
		TU_CHECK(flag == 1 && index == MPI_UNDEFINED,
		         "MPI_Testany of null requests: flag %d index %d", flag, index);
		check_empty_status(&st, "MPI_Testany of null requests");
		TU_MPI(MPI_Waitany(3, r, &index, &st));
		TU_CHECK(index == MPI_UNDEFINED, "MPI_Waitany of null requests: index %d", index);
		TU_MPI(MPI_Testall(3, r, &flag, sts));
		TU_CHECK(flag == 1, "MPI_Testall of null requests gave flag 0");
		TU_MPI(MPI_Waitall(3, r, MPI_STATUSES_IGNORE));

		/* Test in a loop until the message arrives. */
		TU_MPI(MPI_Irecv(&v[0], 1, MPI_INT, 1, 86, MPI_COMM_WORLD, &r[0]));
		send_go();
		flag = 0;
		for (int tries = 0; !flag; tries++) {
			TU_CHECK(tries < 30000, "MPI_Test still false after 30 s");
			tu_sleep_ms(tries ? 1 : 0);
			TU_MPI(MPI_Test(&r[0], &flag, &st));
		}
		check_status(&st, 1, 86, MPI_INT, 1, "MPI_Test loop");
		TU_CHECK(v[0] == 86, "MPI_Test loop value %d", v[0]);

		/* Waitany over a send and a receive: each completes exactly once. */
		v[0] = 87;
		TU_MPI(MPI_Isend(&v[0], 1, MPI_INT, 1, 87, MPI_COMM_WORLD, &r[0]));
		TU_MPI(MPI_Irecv(&v[1], 1, MPI_INT, 1, 88, MPI_COMM_WORLD, &r[1]));
		int seen[2] = {0, 0};
		for (int k = 0; k < 2; k++) {
			TU_MPI(MPI_Waitany(2, r, &index, &st));
			TU_CHECK(index == 0 || index == 1, "MPI_Waitany index %d", index);
			seen[index]++;
			if (index == 1)
				check_status(&st, 1, 88, MPI_INT, 1, "MPI_Waitany receive");
		}
		TU_CHECK(seen[0] == 1 && seen[1] == 1 && v[1] == 88,
		         "MPI_Waitany over send+receive: completions %d %d value %d", seen[0],
		         seen[1], v[1]);
	}
	section_end("MPI_Test/Testany/Waitany/Waitall/Testall with pending, done and null "
	            "requests: ok");
}

/* A freed send still delivers; its buffer is reusable once the receiver says so. */
static void request_free(void)
{
	enum { N = 1000 };
	if (tu_rank == 1) {
		int *buf = malloc(N * sizeof(int));
		TU_CHECK(buf, "out of memory");
		for (int i = 0; i < N; i++)
			buf[i] = N - i;
		MPI_Request req;
		TU_MPI(MPI_Isend(buf, N, MPI_INT, 0, 90, MPI_COMM_WORLD, &req));
		TU_MPI(MPI_Request_free(&req));
		TU_CHECK(req == MPI_REQUEST_NULL, "MPI_Request_free did not null the handle");
		TU_MPI(MPI_Recv(NULL, 0, MPI_INT, 0, 91, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
		free(buf);
	} else if (tu_rank == 0) {
		int *buf = malloc(N * sizeof(int));
		TU_CHECK(buf, "out of memory");
		MPI_Status st;
		TU_MPI(MPI_Recv(buf, N, MPI_INT, 1, 90, MPI_COMM_WORLD, &st));
		check_status(&st, 1, 90, MPI_INT, N, "receive of a freed send");
		for (int i = 0; i < N; i++)
			TU_CHECK(buf[i] == N - i, "freed send word %d is %d", i, buf[i]);
		TU_MPI(MPI_Send(NULL, 0, MPI_INT, 1, 91, MPI_COMM_WORLD));
		free(buf);
	}
	section_end("MPI_Request_free of an active send: delivered intact: ok");
}

static void proc_null(void)
{
	int v = 5, w = 6, flag = 0;
	MPI_Status st;
	MPI_Request r[2];
	TU_MPI(MPI_Send(&v, 1, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD));
	TU_MPI(MPI_Ssend(&v, 1, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD));
	TU_MPI(MPI_Recv(&w, 1, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &st));
	check_status(&st, MPI_PROC_NULL, MPI_ANY_TAG, MPI_INT, 0, "MPI_Recv from MPI_PROC_NULL");
	TU_CHECK(w == 6, "MPI_Recv from MPI_PROC_NULL wrote the buffer");
	TU_MPI(MPI_Isend(&v, 1, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &r[0]));
	TU_MPI(MPI_Irecv(&w, 1, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &r[1]));
	MPI_Status sts[2];
	TU_MPI(MPI_Waitall(2, r, sts));
	check_status(&sts[1], MPI_PROC_NULL, MPI_ANY_TAG, MPI_INT, 0,
	             "MPI_Irecv from MPI_PROC_NULL");
	TU_MPI(MPI_Sendrecv(&v, 1, MPI_INT, MPI_PROC_NULL, 1, &w, 1, MPI_INT, MPI_PROC_NULL, 1,
	                    MPI_COMM_WORLD, &st));
	check_status(&st, MPI_PROC_NULL, MPI_ANY_TAG, MPI_INT, 0,
	             "MPI_Sendrecv with MPI_PROC_NULL");
	TU_MPI(MPI_Probe(MPI_PROC_NULL, 1, MPI_COMM_WORLD, &st));
	check_status(&st, MPI_PROC_NULL, MPI_ANY_TAG, MPI_INT, 0, "MPI_Probe of MPI_PROC_NULL");
	TU_MPI(MPI_Iprobe(MPI_PROC_NULL, 1, MPI_COMM_WORLD, &flag, &st));
	TU_CHECK(flag == 1, "MPI_Iprobe of MPI_PROC_NULL gave flag 0");
	check_status(&st, MPI_PROC_NULL, MPI_ANY_TAG, MPI_INT, 0, "MPI_Iprobe of MPI_PROC_NULL");
	TU_CHECK(w == 6, "a receive from MPI_PROC_NULL wrote the buffer");
	section_end("MPI_PROC_NULL: sends, receives, probes complete at once, empty status: ok");
}

/* Messages to self are matched like any other, wildcards included. */
static void self_messages(void)
{
	int v = tu_rank * 10 + 1, w = -1;
	MPI_Request req;
	MPI_Status st;
	TU_MPI(MPI_Isend(&v, 1, MPI_INT, tu_rank, 95, MPI_COMM_WORLD, &req));
	TU_MPI(MPI_Recv(&w, 1, MPI_INT, MPI_ANY_SOURCE, 95, MPI_COMM_WORLD, &st));
	TU_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
	check_status(&st, tu_rank, 95, MPI_INT, 1, "message to self");
	TU_CHECK(w == v, "message to self carried %d, expected %d", w, v);
	w = -1;
	TU_MPI(MPI_Sendrecv(&v, 1, MPI_INT, tu_rank, 96, &w, 1, MPI_INT, tu_rank, MPI_ANY_TAG,
	                    MPI_COMM_WORLD, &st));
	check_status(&st, tu_rank, 96, MPI_INT, 1, "MPI_Sendrecv to self");
	TU_CHECK(w == v, "MPI_Sendrecv to self carried %d", w);
	section_end("messages to self, MPI_ANY_SOURCE and MPI_Sendrecv: ok");
}

int main(int argc, char **argv)
{
	tu_init(&argc, &argv, "matching");
	tu_require_size(3, 64);
	tag_order();
	any_tag();
	any_source();
	probes();
	completions();
	request_free();
	proc_null();
	self_messages();
	if (tu_rank == 0)
		printf("matching: all checks passed\n");
	return tu_finalize();
}
