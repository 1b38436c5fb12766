/* The MPI layer over the real direct transport (libchanmem as programs link
 * it): a singleton started without cmrun, and small jobs of forked ranks
 * wired up here the way cmrun does it (one listening socket per rank on
 * 127.0.0.1, CHANMEM_PEERS, CHANMEM_LISTEN_FD). */
#include <check.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "chanmem.h"
#include "jobenv.h"
#include "mpi.h"
#include "net.h"

static void clear_job_env(void)
{
	static const char *const vars[] = {CM_ENV_RANK,   CM_ENV_SIZE,      CM_ENV_INCARNATION,
	                                   CM_ENV_SECRET, CM_ENV_TRANSPORT, CM_ENV_CMS,
	                                   CM_ENV_HOME,   CM_ENV_PEERS,     CM_ENV_LISTEN_FD};
	for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
		unsetenv(vars[i]);
}

/* Runs rank_main(rank, size) in `size` forked ranks of one direct-transport
 * job. Returns 0 if every rank exited 0; kills them all (by pid) after
 * 20 s. */
static int run_direct_job(int size, int (*rank_main)(int rank, int size))
{
	int fds[16];
	char peers[16 * 24] = "";
	ck_assert_int_le(size, 16);
	for (int i = 0; i < size; i++) {
		struct sockaddr_in addr, bound;
		char text[24];
		ck_assert_int_eq(cm_parse_hostport("127.0.0.1:0", 0, &addr), 0);
		fds[i] = cm_tcp_listen(&addr, &bound);
		ck_assert_int_ge(fds[i], 0);
		cm_format_addr(&bound, text, sizeof text);
		if (i)
			strcat(peers, ",");
		strcat(peers, text);
	}
	pid_t pids[16];
	fflush(NULL);
	for (int i = 0; i < size; i++) {
		pids[i] = fork();
		ck_assert_int_ge(pids[i], 0);
		if (pids[i] == 0) {
			char num[16];
			for (int j = 0; j < size; j++)
				if (j != i)
					close(fds[j]);
			clear_job_env();
			snprintf(num, sizeof num, "%d", i);
			setenv(CM_ENV_RANK, num, 1);
			snprintf(num, sizeof num, "%d", size);
			setenv(CM_ENV_SIZE, num, 1);
			snprintf(num, sizeof num, "%d", fds[i]);
			setenv(CM_ENV_LISTEN_FD, num, 1);
			setenv(CM_ENV_PEERS, peers, 1);
			setenv(CM_ENV_SECRET, "0123456789abcdef0123456789abcdef", 1);
			setenv(CM_ENV_TRANSPORT, "direct", 1);
			_exit(rank_main(i, size));
		}
	}
	for (int i = 0; i < size; i++)
		close(fds[i]);
	int failed = 0, left = size;
	struct timespec start, now;
	clock_gettime(CLOCK_MONOTONIC, &start);
	while (left > 0) {
		int status;
		pid_t pid = waitpid(-1, &status, WNOHANG);
		if (pid > 0) {
			left--;
			if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
				fprintf(stderr, "rank pid %d: status %d\n", (int)pid, status);
				failed = 1;
			}
			continue;
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - start.tv_sec > 20) {
			for (int i = 0; i < size; i++)
				kill(pids[i], SIGKILL);
			while (left > 0 && waitpid(-1, &status, 0) > 0)
				left--;
			return -1;
		}
		poll(NULL, 0, 20); /* a job of a few ranks ends in well under a second */
	}
	return failed;
}

/* ---- singleton ---- */

START_TEST(singleton_send_to_self)
{
	clear_job_env();
	ck_assert_int_eq(MPI_Init(NULL, NULL), MPI_SUCCESS);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	int rank = -1, size = -1;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	ck_assert_int_eq(rank, 0);
	ck_assert_int_eq(size, 1);
	const char *name;
	ck_assert_int_eq(chanmem_transport_name(&name), 0);
	ck_assert_str_eq(name, "direct");

	static const int sizes[] = {0, 1, 1000, 65536, 1 << 20};
	for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
		int n = sizes[k];
		unsigned char *out = malloc((size_t)n + 1), *in = calloc(1, (size_t)n + 1);
		for (int i = 0; i < n; i++)
			out[i] = (unsigned char)(i * 7 + k);
		MPI_Request rq;
		MPI_Status st;
		ck_assert_int_eq(MPI_Isend(out, n, MPI_BYTE, 0, (int)k, MPI_COMM_WORLD, &rq),
		                 MPI_SUCCESS);
		ck_assert_int_eq(
		    MPI_Recv(in, n, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st),
		    MPI_SUCCESS);
		ck_assert_int_eq(MPI_Wait(&rq, MPI_STATUS_IGNORE), MPI_SUCCESS);
		ck_assert_int_eq(st.MPI_SOURCE, 0);
		ck_assert_int_eq(st.MPI_TAG, (int)k);
		int count;
		MPI_Get_count(&st, MPI_BYTE, &count);
		ck_assert_int_eq(count, n);
		ck_assert(memcmp(in, out, (size_t)n) == 0);
		free(out);
		free(in);
	}

	/* Truncation, probe, Ssend and MPI_COMM_SELF through the transport. */
	int eight[8] = {1, 2, 3, 4, 5, 6, 7, 8}, four[4] = {0}, flag = 0;
	MPI_Status st;
	MPI_Request rs, rr;
	MPI_Send(eight, 8, MPI_INT, 0, 1, MPI_COMM_WORLD);
	ck_assert_int_eq(MPI_Probe(0, 1, MPI_COMM_WORLD, &st), MPI_SUCCESS);
	int count;
	MPI_Get_count(&st, MPI_INT, &count);
	ck_assert_int_eq(count, 8);
	ck_assert_int_eq(MPI_Recv(four, 4, MPI_INT, 0, 1, MPI_COMM_WORLD, &st), MPI_ERR_TRUNCATE);
	ck_assert_int_eq(four[3], 4);
	ck_assert_int_eq(MPI_Issend(eight, 2, MPI_INT, 0, 2, MPI_COMM_WORLD, &rs), MPI_SUCCESS);
	ck_assert_int_eq(MPI_Test(&rs, &flag, MPI_STATUS_IGNORE), MPI_SUCCESS);
	ck_assert_int_eq(flag, 0); /* not matched yet */
	MPI_Irecv(four, 2, MPI_INT, 0, 2, MPI_COMM_WORLD, &rr);
	MPI_Request both[2] = {rs, rr};
	ck_assert_int_eq(MPI_Waitall(2, both, MPI_STATUSES_IGNORE), MPI_SUCCESS);
	ck_assert_int_eq(four[1], 2);
	MPI_Send(eight, 1, MPI_INT, 0, 3, MPI_COMM_SELF);
	MPI_Iprobe(0, 3, MPI_COMM_WORLD, &flag, &st);
	ck_assert_int_eq(flag, 0); /* another context */
	ck_assert_int_eq(MPI_Recv(four, 1, MPI_INT, 0, 3, MPI_COMM_SELF, &st), MPI_SUCCESS);
	ck_assert_int_eq(MPI_Barrier(MPI_COMM_WORLD), MPI_SUCCESS);
	ck_assert_int_eq(MPI_Finalize(), MPI_SUCCESS);
}
END_TEST

/* ---- jobs of several ranks ---- */

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "rank %d: %s:%d: %s\n", rank, __FILE__, __LINE__, #cond);  \
			return 1;                                                                  \
		}                                                                                  \
	} while (0)

static int ring_and_barriers(int rank, int size)
{
	CHECK(MPI_Init(NULL, NULL) == MPI_SUCCESS);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	int r, s;
	MPI_Comm_rank(MPI_COMM_WORLD, &r);
	MPI_Comm_size(MPI_COMM_WORLD, &s);
	CHECK(r == rank && s == size);
	for (int i = 0; i < 20; i++)
		CHECK(MPI_Barrier(MPI_COMM_WORLD) == MPI_SUCCESS);

	/* A ring of Sendrecv: each rank gets its left neighbour's rank. */
	int got = -1;
	MPI_Status st;
	CHECK(MPI_Sendrecv(&rank, 1, MPI_INT, (rank + 1) % size, 7, &got, 1, MPI_INT,
	                   (rank + size - 1) % size, 7, MPI_COMM_WORLD, &st) == MPI_SUCCESS);
	CHECK(got == (rank + size - 1) % size);
	CHECK(st.MPI_SOURCE == (rank + size - 1) % size && st.MPI_TAG == 7);

	/* Everyone to rank 0 with MPI_ANY_SOURCE; sources are world ranks. */
	if (rank == 0) {
		int seen = 0;
		for (int i = 1; i < size; i++) {
			int v;
			CHECK(MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 3, MPI_COMM_WORLD, &st) ==
			      MPI_SUCCESS);
			CHECK(v == st.MPI_SOURCE * 100);
			seen |= 1 << st.MPI_SOURCE;
		}
		CHECK(seen == (1 << size) - 2);
	} else {
		int v = rank * 100;
		CHECK(MPI_Ssend(&v, 1, MPI_INT, 0, 3, MPI_COMM_WORLD) == MPI_SUCCESS);
	}
	/* Round 0 of the barrier goes to the right neighbour on the same
	 * connection as a message sent just before it, so once the barrier is
	 * over that message has arrived: MPI_Iprobe sees it at once. */
	int token = rank, flag = 0;
	MPI_Request rq;
	CHECK(MPI_Isend(&token, 1, MPI_INT, (rank + 1) % size, 9, MPI_COMM_WORLD, &rq) ==
	      MPI_SUCCESS);
	CHECK(MPI_Wait(&rq, MPI_STATUS_IGNORE) == MPI_SUCCESS);
	CHECK(MPI_Barrier(MPI_COMM_WORLD) == MPI_SUCCESS);
	CHECK(MPI_Iprobe((rank + size - 1) % size, 9, MPI_COMM_WORLD, &flag, &st) == MPI_SUCCESS);
	CHECK(flag == 1);
	int v = -1;
	CHECK(MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 9, MPI_COMM_WORLD, &st) == MPI_SUCCESS);
	CHECK(v == (rank + size - 1) % size);
	CHECK(MPI_Finalize() == MPI_SUCCESS);
	return 0;
}

START_TEST(direct_jobs)
{
	static const int sizes[] = {2, 3, 5};
	ck_assert_int_eq(run_direct_job(sizes[_i], ring_and_barriers), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("mpi_direct");
	TCase *tc = tcase_create("direct");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, singleton_send_to_self);
	tcase_add_loop_test(tc, direct_jobs, 0, 3);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
