/* A program whose control flow depends on when messages arrive, for the
 * replay of the completion calls' outcomes.
 *
 * usage: ft_nondet ROUNDS
 *
 * Each round every other rank sleeps a random 0-2 ms and sends one message
 * to rank 0, which takes the round's messages with one of eight methods
 * (round % 8): MPI_Testany polled, MPI_Waitany, MPI_Testsome polled,
 * MPI_Waitsome, MPI_Test round-robin, MPI_Testall polled, MPI_Iprobe
 * (MPI_ANY_SOURCE) polled, MPI_Recv (MPI_ANY_SOURCE). It notes what it saw: how many polls failed,
 * the order the senders came in, how many calls returned something. Then it sends that observation
 * to every other rank, followed by a number of messages derived from it (so the flow of every rank
 * depends on it), and polls once (MPI_Test) a receive that only completes at the end. Rank 0 prints
 * one line per round as it goes; at the end every rank prints every round's observation as it knows
 * it. A correct replay makes them equal even when rank 0 was killed and re-executed: the others
 * received the dead incarnation's observations, rank 0's summary is the re-execution's, and its
 * round lines before the kill are the dead incarnation's.
 *
 *   FT_KILL_AT=I [FT_KILL_TIMES=K]  rank 0 raises SIGKILL after round I (and
 *                                   two more failed MPI_Test polls, sent
 *                                   nowhere) while CHANMEM_INCARNATION < K
 *                                   (default 1)
 *   FT_KILL_REPLICA=K               under cmrun --replicate: only replica K of
 *                                   rank 0 dies (default: every replica)
 *   FT_METHODS=N                    cycle through the first N methods only
 *                                   (6: no MPI_Iprobe, MPI_ANY_SOURCE rounds)
 *   FT_SLOW_REPLICA=K               under cmrun --replicate: replica K of rank 0
 *                                   sleeps 5 ms before each round, so it reads
 *                                   the round's messages in another order than
 *                                   its master
 *   FT_DIVERGE=1                    a re-executed rank 0 uses MPI_Test where
 *                                   the first run used MPI_Testany: it must
 *                                   be stopped with an error, not hang */
#include <mpi.h>

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_ROUNDS 500
#define MAX_SENDERS 8
#define TAG_OBS 10000
#define TAG_EXTRA 10001
#define TAG_END 10002
/* A poll loop gives up after this many polls 100 us apart (10 s or more). */
#define MAX_POLLS 100000

enum method { TESTANY, WAITANY, TESTSOME, WAITSOME, TEST_RR, TESTALL, IPROBE, ANYSRC, NMETHODS };

/* What rank 0 saw in one round. */
struct obs {
	int method;
	int polls;              /* failed polls */
	int calls;              /* calls that returned something (some/any/test) */
	int order[MAX_SENDERS]; /* senders in the order they were taken */
};
#define OBS_INTS (3 + MAX_SENDERS)

static int rank, size, nsend;

static long env_long(const char *name, long def)
{
	const char *v = getenv(name);
	if (v == NULL || *v == '\0')
		return def;
	char *end;
	long x = strtol(v, &end, 10);
	return *end == '\0' ? x : def;
}

static void fail(const char *what, long round)
{
	fprintf(stderr, "ft_nondet: rank %d: FAIL: %s in round %ld\n", rank, what, round);
	MPI_Abort(MPI_COMM_WORLD, 3);
}

static void pause_us(long us)
{
	struct timespec ts = {0, us * 1000};
	nanosleep(&ts, NULL);
}

/* One failed poll: counted, then a short sleep (never a busy spin). */
static void missed(struct obs *o, long round)
{
	if (++o->polls > MAX_POLLS)
		fail("no message within the poll limit", round);
	pause_us(100);
}

static void take(struct obs *o, int *taken, int source)
{
	o->order[(*taken)++] = source;
}

/* Rank 0 takes the round's messages with method m. */
static void collect(long round, int m, int diverge, struct obs *o)
{
	MPI_Request req[MAX_SENDERS];
	long val[MAX_SENDERS];
	int taken = 0;
	memset(o, 0, sizeof *o);
	o->method = m;
	if (m != IPROBE && m != ANYSRC)
		for (int i = 0; i < nsend; i++)
			MPI_Irecv(&val[i], 1, MPI_LONG, i + 1, (int)round, MPI_COMM_WORLD, &req[i]);
	switch (m) {
	case TESTANY:
		while (taken < nsend) {
			int idx, flag;
			if (diverge) { /* another call than the logged run made */
				MPI_Test(&req[0], &flag, MPI_STATUS_IGNORE);
				idx = 0;
			} else {
				MPI_Testany(nsend, req, &idx, &flag, MPI_STATUS_IGNORE);
			}
			if (!flag) {
				missed(o, round);
				continue;
			}
			o->calls++;
			take(o, &taken, idx + 1);
		}
		break;
	case WAITANY:
		while (taken < nsend) {
			int idx;
			MPI_Waitany(nsend, req, &idx, MPI_STATUS_IGNORE);
			o->calls++;
			take(o, &taken, idx + 1);
		}
		break;
	case TESTSOME:
	case WAITSOME:
		while (taken < nsend) {
			int n, idx[MAX_SENDERS];
			if (m == TESTSOME)
				MPI_Testsome(nsend, req, &n, idx, MPI_STATUSES_IGNORE);
			else
				MPI_Waitsome(nsend, req, &n, idx, MPI_STATUSES_IGNORE);
			if (n == MPI_UNDEFINED)
				fail("Testsome/Waitsome: every request null", round);
			if (n == 0) {
				missed(o, round);
				continue;
			}
			o->calls++;
			for (int k = 0; k < n; k++)
				take(o, &taken, idx[k] + 1);
		}
		break;
	case TEST_RR:
		for (int i = 0; taken < nsend; i = (i + 1) % nsend) {
			if (req[i] == MPI_REQUEST_NULL)
				continue;
			int flag;
			MPI_Test(&req[i], &flag, MPI_STATUS_IGNORE);
			if (!flag) {
				missed(o, round);
				continue;
			}
			o->calls++;
			take(o, &taken, i + 1);
		}
		break;
	case TESTALL:
		for (;;) {
			int flag;
			MPI_Testall(nsend, req, &flag, MPI_STATUSES_IGNORE);
			if (flag)
				break;
			missed(o, round);
		}
		o->calls = 1;
		for (int i = 0; i < nsend; i++)
			take(o, &taken, i + 1);
		break;
	case IPROBE:
		while (taken < nsend) {
			int flag;
			MPI_Status st;
			MPI_Iprobe(MPI_ANY_SOURCE, (int)round, MPI_COMM_WORLD, &flag, &st);
			if (!flag) {
				missed(o, round);
				continue;
			}
			o->calls++;
			MPI_Recv(&val[st.MPI_SOURCE - 1], 1, MPI_LONG, st.MPI_SOURCE, (int)round,
			         MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			take(o, &taken, st.MPI_SOURCE);
		}
		break;
	case ANYSRC:
		while (taken < nsend) {
			MPI_Status st;
			long v;
			MPI_Recv(&v, 1, MPI_LONG, MPI_ANY_SOURCE, (int)round, MPI_COMM_WORLD, &st);
			val[st.MPI_SOURCE - 1] = v;
			o->calls++;
			take(o, &taken, st.MPI_SOURCE);
		}
		break;
	}
	for (int i = 0; i < nsend; i++)
		if (val[i] != round * 100 + i + 1)
			fail("wrong message content", round);
}

/* How many extra messages a round's observation asks for (1 to 4). */
static int extras_of(const struct obs *o)
{
	unsigned h = (unsigned)o->method * 31u + (unsigned)o->polls * 7u + (unsigned)o->calls;
	for (int i = 0; i < MAX_SENDERS; i++)
		h = h * 17u + (unsigned)o->order[i];
	return 1 + (int)(h % 4u);
}

static void print_obs(const struct obs *o)
{
	printf(" %d.%d.%d.", o->method, o->polls, o->calls);
	for (int i = 0; i < nsend; i++)
		printf("%d", o->order[i]);
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	long rounds = argc > 1 ? strtol(argv[1], NULL, 10) : 10;
	nsend = size - 1;
	if (rounds < 1 || rounds > MAX_ROUNDS || nsend < 1 || nsend > MAX_SENDERS) {
		if (rank == 0)
			fprintf(stderr, "usage: ft_nondet ROUNDS (1..%d), 2 to %d ranks\n",
			        MAX_ROUNDS, MAX_SENDERS + 1);
		MPI_Finalize();
		return 2;
	}
	long kill_at = env_long("FT_KILL_AT", -1);
	long kill_times = env_long("FT_KILL_TIMES", 1);
	long incarnation = env_long("CHANMEM_INCARNATION", 0);
	long nmethods = env_long("FT_METHODS", NMETHODS);
	if (nmethods < 1 || nmethods > NMETHODS)
		nmethods = NMETHODS;
	long kill_replica = env_long("FT_KILL_REPLICA", -1);
	int slow = env_long("FT_SLOW_REPLICA", -1) == env_long("CHANMEM_REPLICA", -2);
	if (kill_replica >= 0 && env_long("CHANMEM_REPLICA", 0) != kill_replica)
		kill_at = -1;
	int diverge = env_long("FT_DIVERGE", 0) && incarnation > 0;
	unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid() * 2654435761u;

	static struct obs seen[MAX_ROUNDS];
	uint64_t checksum = 0;
	if (rank == 0) {
		/* Completes only at the end: polled once per round. */
		int end_msg;
		MPI_Request end_req;
		MPI_Irecv(&end_msg, 1, MPI_INT, 1, TAG_END, MPI_COMM_WORLD, &end_req);
		for (long r = 0; r < rounds; r++) {
			struct obs *o = &seen[r];
			if (slow)
				pause_us(5000); /* the senders' messages wait in its sockets */
			collect(r, (int)(r % nmethods), diverge && r % nmethods == TESTANY, o);
			printf("round %ld:", r);
			print_obs(o);
			printf("\n");
			fflush(stdout);
			int n = extras_of(o);
			for (int dst = 1; dst < size; dst++) {
				MPI_Send(o, OBS_INTS, MPI_INT, dst, TAG_OBS, MPI_COMM_WORLD);
				for (int k = 0; k < n; k++) {
					long v = r * 1000 + k;
					MPI_Send(&v, 1, MPI_LONG, dst, TAG_EXTRA, MPI_COMM_WORLD);
				}
			}
			int flag;
			MPI_Test(&end_req, &flag, MPI_STATUS_IGNORE);
			if (flag && r + 1 < rounds) /* rank 1 sends it after the last round */
				fail("the end message came early", r);
			if (r == kill_at && incarnation < kill_times) {
				/* Failed polls nothing depends on: never logged. */
				MPI_Test(&end_req, &flag, MPI_STATUS_IGNORE);
				MPI_Test(&end_req, &flag, MPI_STATUS_IGNORE);
				raise(SIGKILL);
			}
		}
		MPI_Wait(&end_req, MPI_STATUS_IGNORE);
	} else {
		for (long r = 0; r < rounds; r++) {
			pause_us(rand_r(&seed) % 2000);
			long v = r * 100 + rank;
			MPI_Send(&v, 1, MPI_LONG, 0, (int)r, MPI_COMM_WORLD);
			MPI_Recv(&seen[r], OBS_INTS, MPI_INT, 0, TAG_OBS, MPI_COMM_WORLD,
			         MPI_STATUS_IGNORE);
			if (seen[r].method != r % nmethods)
				fail("observation of another method", r);
			int n = extras_of(&seen[r]);
			for (int k = 0; k < n; k++) {
				MPI_Recv(&v, 1, MPI_LONG, 0, TAG_EXTRA, MPI_COMM_WORLD,
				         MPI_STATUS_IGNORE);
				if (v != r * 1000 + k)
					fail("wrong extra message", r);
				checksum = checksum * 31 + (uint64_t)v;
			}
		}
		if (rank == 1) {
			int end_msg = 1;
			MPI_Send(&end_msg, 1, MPI_INT, 0, TAG_END, MPI_COMM_WORLD);
		}
	}
	MPI_Barrier(MPI_COMM_WORLD);
	printf("rank %d rounds:", rank);
	for (long r = 0; r < rounds; r++)
		print_obs(&seen[r]);
	printf("\n");
	if (rank != 0)
		printf("rank %d checksum: %llu\n", rank, (unsigned long long)checksum);
	fflush(stdout);
	MPI_Finalize();
	return 0;
}
