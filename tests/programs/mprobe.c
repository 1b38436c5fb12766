/* Matched probes whose outcome depends on timing, for their replay.
 *
 * usage: mprobe ROUNDS
 *
 * Each round every other rank sleeps a random 0-2 ms between three
 * messages to rank 0 (tags 0-2, lengths from the round, sender and tag).
 * Rank 0 takes them with one of four methods (round % 4): MPI_Mprobe
 * (MPI_ANY_SOURCE, MPI_ANY_TAG) with a wildcard MPI_Irecv posted between
 * the probe and the MPI_Mrecv (it must get another message, never the
 * probed one); MPI_Improbe polled, then MPI_Imrecv; MPI_Mprobe from each
 * sender in turn with any tag; MPI_Improbe polled for each tag with any
 * source, then MPI_Mrecv. Every payload is checked against the probe's
 * status. Rank 0 notes the order it got the messages in and its failed
 * polls, prints it, and sends it to the others, who each answer with a
 * number of messages derived from it (their flow depends on it). At the
 * end every rank prints every round's observation as it knows it: a
 * correct replay makes them equal, also when rank 0 was re-executed.
 *
 *   MP_KILL_AT=I   rank 0 raises SIGKILL after round I (first incarnation) */
#include <mpi.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#define MAXR 64
#define OBS_MAX 512

static int rank, size;

static void fail(const char *what, int round)
{
	fprintf(stderr, "mprobe: rank %d: FAIL: %s in round %d\n", rank, what, round);
	MPI_Abort(MPI_COMM_WORLD, 1);
}

static int msg_len(int round, int src, int tag)
{
	return 3 + ((round * 7 + src * 3 + tag * 5) % 11) * 40;
}

static void fill(int *buf, int len, int round, int src, int tag)
{
	for (int i = 0; i < len; i++)
		buf[i] = round * 100000 + src * 1000 + tag * 100 + i % 97;
}

/* The payload of a message must be what (src, tag) sent this round. */
static void check(const int *buf, const MPI_Status *st, int round)
{
	int n;
	MPI_Get_count(st, MPI_INT, &n);
	if (n != msg_len(round, st->MPI_SOURCE, st->MPI_TAG))
		fail("length differs from the probe's", round);
	for (int i = 0; i < n; i++)
		if (buf[i] != round * 100000 + st->MPI_SOURCE * 1000 + st->MPI_TAG * 100 + i % 97)
			fail("payload is not the probed message's", round);
}

static int add(char *obs, int at, const MPI_Status *st)
{
	return at + snprintf(obs + at, OBS_MAX - at, "%d%d", st->MPI_SOURCE, st->MPI_TAG);
}

static void collect(int round, char *obs)
{
	int total = 3 * (size - 1), at = 0, got = 0;
	long polls = 0;
	int buf[1024];
	MPI_Status st;
	MPI_Message m;
	int method = round % 4;
	at += snprintf(obs, OBS_MAX, "%d:", method);
	while (got < total) {
		if (method == 0) {
			MPI_Mprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &m, &st);
			int probed_src = st.MPI_SOURCE, probed_tag = st.MPI_TAG;
			MPI_Request thief = MPI_REQUEST_NULL;
			int tbuf[1024];
			if (got + 1 < total)
				MPI_Irecv(tbuf, 1024, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG,
				          MPI_COMM_WORLD, &thief);
			MPI_Mrecv(buf, 1024, MPI_INT, &m, &st);
			if (m != MPI_MESSAGE_NULL)
				fail("MPI_Mrecv left the message handle", round);
			if (st.MPI_SOURCE != probed_src || st.MPI_TAG != probed_tag)
				fail("MPI_Mrecv got another message than the probe", round);
			check(buf, &st, round);
			at = add(obs, at, &st);
			got++;
			if (thief != MPI_REQUEST_NULL) {
				MPI_Wait(&thief, &st);
				if (st.MPI_SOURCE == probed_src && st.MPI_TAG == probed_tag)
					fail("a receive stole the probed message", round);
				check(tbuf, &st, round);
				at += snprintf(obs + at, OBS_MAX - at, "t");
				at = add(obs, at, &st);
				got++;
			}
		} else if (method == 1) {
			int flag = 0;
			while (!flag) {
				MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &m,
				            &st);
				if (!flag)
					polls++;
			}
			MPI_Request req;
			MPI_Imrecv(buf, 1024, MPI_INT, &m, &req);
			MPI_Wait(&req, &st);
			check(buf, &st, round);
			at = add(obs, at, &st);
			got++;
		} else if (method == 2) {
			for (int s = 1; s < size; s++) {
				MPI_Mprobe(s, MPI_ANY_TAG, MPI_COMM_WORLD, &m, &st);
				MPI_Mrecv(buf, 1024, MPI_INT, &m, &st);
				check(buf, &st, round);
				at = add(obs, at, &st);
				got++;
			}
		} else {
			for (int tag = 0; tag < 3 && got < total; tag++) {
				int flag = 0;
				MPI_Improbe(MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &flag, &m, &st);
				if (!flag) {
					polls++;
					continue;
				}
				MPI_Mrecv(buf, 1024, MPI_INT, &m, &st);
				check(buf, &st, round);
				at = add(obs, at, &st);
				got++;
			}
			/* MPI_PROC_NULL's message: found at once, received empty. */
			MPI_Mprobe(MPI_PROC_NULL, 0, MPI_COMM_WORLD, &m, &st);
			if (m != MPI_MESSAGE_NO_PROC || st.MPI_SOURCE != MPI_PROC_NULL)
				fail("MPI_Mprobe(MPI_PROC_NULL)", round);
			MPI_Mrecv(buf, 1, MPI_INT, &m, &st);
			if (m != MPI_MESSAGE_NULL || st.MPI_SOURCE != MPI_PROC_NULL)
				fail("MPI_Mrecv(MPI_MESSAGE_NO_PROC)", round);
		}
	}
	snprintf(obs + at, OBS_MAX - at, ".%ld", polls);
}

static unsigned checksum(const char *s)
{
	unsigned h = 5381;
	while (*s)
		h = h * 33 + (unsigned char)*s++;
	return h;
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	int rounds = argc > 1 ? atoi(argv[1]) : 0;
	if (rounds < 1 || rounds > MAXR || size < 2) {
		if (rank == 0)
			fprintf(stderr, "usage: mprobe ROUNDS (1..%d), 2 or more ranks\n", MAXR);
		MPI_Finalize();
		return 2;
	}
	const char *kill_at = getenv("MP_KILL_AT");
	const char *inc = getenv("CHANMEM_INCARNATION");
	int kill_round = kill_at && (!inc || atoi(inc) == 0) ? atoi(kill_at) : -1;
	static char obs[MAXR][OBS_MAX];
	struct timeval tv;
	gettimeofday(&tv, NULL);
	srand((unsigned)(tv.tv_usec * 31 + rank));
	for (int r = 0; r < rounds; r++) {
		if (rank == 0) {
			collect(r, obs[r]);
			printf("round %d: %s\n", r, obs[r]);
			fflush(stdout);
			for (int s = 1; s < size; s++)
				MPI_Send(obs[r], OBS_MAX, MPI_CHAR, s, 100, MPI_COMM_WORLD);
			unsigned extra = checksum(obs[r]) % 3 + 1;
			int v;
			for (int s = 1; s < size; s++)
				for (unsigned k = 0; k < extra; k++)
					MPI_Recv(&v, 1, MPI_INT, s, 200, MPI_COMM_WORLD,
					         MPI_STATUS_IGNORE);
			if (r == kill_round)
				raise(SIGKILL);
		} else {
			int buf[1024];
			for (int tag = 0; tag < 3; tag++) {
				usleep((useconds_t)(rand() % 2000));
				int len = msg_len(r, rank, tag);
				fill(buf, len, r, rank, tag);
				MPI_Send(buf, len, MPI_INT, 0, tag, MPI_COMM_WORLD);
			}
			MPI_Recv(obs[r], OBS_MAX, MPI_CHAR, 0, 100, MPI_COMM_WORLD,
			         MPI_STATUS_IGNORE);
			unsigned extra = checksum(obs[r]) % 3 + 1;
			for (unsigned k = 0; k < extra; k++)
				MPI_Send(&rank, 1, MPI_INT, 0, 200, MPI_COMM_WORLD);
		}
	}
	printf("rank %d rounds:", rank);
	for (int r = 0; r < rounds; r++)
		printf(" %s", obs[r]);
	printf("\n");
	MPI_Finalize();
	return 0;
}
