/* MPI_Cancel of receives, checked on every transport and, under cm, with
 * the cancelling rank killed and re-executed (the outcomes are replayed).
 *
 *   cancel_recv ROUNDS [norace]      3 or more ranks
 *
 * Each round rank 0 (the canceller):
 *  - cancels a receive nothing will ever match (tag T_NEVER): cancelled;
 *  - cancels a receive whose message is known to have matched (rank 1 sent
 *    it before a token rank 0 then received): too late, the data arrives;
 *  - cancels a receive from rank 2 before rank 2 sends, then receives the
 *    message with a new receive: the cancelled one took nothing;
 *  - unless "norace": cancels a receive whose message is in flight (either
 *    outcome), receives the message anyway, and sends the outcome to rank
 *    1. At the end rank 0 sends all its outcomes again; rank 1 checks they
 *    equal what it was told during the run, so a re-executed rank 0 that
 *    got another answer than its dead incarnation fails the job.
 * Rank 1 also cancels its own Isend: sends are never cancelled.
 * Output (rank 0) is the same whatever the timing.
 *
 * CANCEL_KILL_AT=R [CANCEL_KILL_TIMES=K]: rank 0 raises SIGKILL after round
 * R's cancels while CHANMEM_INCARNATION < K (default 1); with
 * CANCEL_KILL_REPLICA=P (cmrun --replicate) only replica P does. CANCEL_VERBOSE=1:
 * rank 0 tells on stderr how many racing cancels were cancelled. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define MAX_ROUNDS 1000
#define DATA_BYTES 3000

enum { T_NEVER = 1, T_DATA, T_SYNC, T_LATE, T_GO, T_RACE, T_OUTCOME, T_SUMMARY, T_PERSIST };

static long env_long(const char *name, long dflt)
{
	const char *v = getenv(name);
	return v && *v ? strtol(v, NULL, 10) : dflt;
}

static int cancelled_of(const MPI_Status *st)
{
	int flag = -1;
	TU_MPI(MPI_Test_cancelled(st, &flag));
	return flag;
}

/* A persistent receive started and cancelled, then started again and
 * matched: cancel does not spoil the request. */
static void persistent_once(void)
{
	int v = -1;
	MPI_Request p;
	MPI_Status st;
	if (tu_rank == 0) {
		TU_MPI(MPI_Recv_init(&v, 1, MPI_INT, 1, T_PERSIST, MPI_COMM_WORLD, &p));
		TU_MPI(MPI_Start(&p));
		TU_MPI(MPI_Cancel(&p));
		TU_MPI(MPI_Wait(&p, &st));
		TU_CHECK(cancelled_of(&st) == 1, "persistent receive not cancelled");
		int go = 1;
		TU_MPI(MPI_Send(&go, 1, MPI_INT, 1, T_GO, MPI_COMM_WORLD));
		TU_MPI(MPI_Start(&p));
		TU_MPI(MPI_Wait(&p, &st));
		TU_CHECK(cancelled_of(&st) == 0 && v == 77, "restarted persistent receive got %d",
		         v);
		TU_MPI(MPI_Request_free(&p));
		printf("persistent receive: cancelled once, then received\n");
	} else if (tu_rank == 1) {
		int go;
		TU_MPI(MPI_Recv(&go, 1, MPI_INT, 0, T_GO, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
		v = 77;
		TU_MPI(MPI_Send(&v, 1, MPI_INT, 0, T_PERSIST, MPI_COMM_WORLD));
	}
}

static int canceller_round(int r, int race)
{
	unsigned char data[DATA_BYTES];
	int never = -1, tok, late = -1, got = -1;
	MPI_Request a, b, c, e;
	MPI_Status st;

	TU_MPI(MPI_Irecv(&never, 1, MPI_INT, MPI_ANY_SOURCE, T_NEVER, MPI_COMM_WORLD, &a));
	TU_MPI(MPI_Irecv(data, DATA_BYTES, MPI_BYTE, 1, T_DATA, MPI_COMM_WORLD, &b));
	/* Rank 1 sent the data before this token: b has matched. */
	TU_MPI(MPI_Recv(&tok, 1, MPI_INT, 1, T_SYNC, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
	TU_MPI(MPI_Cancel(&a));
	TU_MPI(MPI_Cancel(&b));
	TU_MPI(MPI_Wait(&a, &st));
	TU_CHECK(cancelled_of(&st) == 1 && never == -1, "round %d: unmatched receive not cancelled",
	         r);
	TU_MPI(MPI_Wait(&b, &st));
	TU_CHECK(cancelled_of(&st) == 0, "round %d: a matched receive was cancelled", r);
	int count = -1;
	TU_MPI(MPI_Get_count(&st, MPI_BYTE, &count));
	TU_CHECK(st.MPI_SOURCE == 1 && st.MPI_TAG == T_DATA && count == DATA_BYTES,
	         "round %d: status source %d tag %d count %d", r, st.MPI_SOURCE, st.MPI_TAG, count);
	long bad = tu_verify(data, DATA_BYTES, (uint64_t)r);
	TU_CHECK(bad < 0, "round %d: data differs at byte %ld", r, bad);

	/* Cancelled before the message exists: a later receive gets it. */
	TU_MPI(MPI_Irecv(&late, 1, MPI_INT, 2, T_LATE, MPI_COMM_WORLD, &c));
	TU_MPI(MPI_Cancel(&c));
	int done = 0;
	while (!done)
		TU_MPI(MPI_Test(&c, &done, &st));
	TU_CHECK(cancelled_of(&st) == 1, "round %d: receive before its message not cancelled", r);
	TU_MPI(MPI_Send(&r, 1, MPI_INT, 2, T_GO, MPI_COMM_WORLD));
	TU_MPI(MPI_Recv(&late, 1, MPI_INT, 2, T_LATE, MPI_COMM_WORLD, &st));
	TU_CHECK(late == 1000 + r && cancelled_of(&st) == 0, "round %d: late message %d", r, late);

	int outcome = 0;
	if (race) {
		/* The message may or may not have matched: either answer is
		 * right, and the message is received exactly once. One round in
		 * three rank 1 sent it before the token (mostly too late); the
		 * others, when told to, just now (mostly cancelled). */
		if (r % 3 != 0)
			TU_MPI(MPI_Send(&r, 1, MPI_INT, 1, T_GO, MPI_COMM_WORLD));
		TU_MPI(MPI_Irecv(&got, 1, MPI_INT, 1, T_RACE, MPI_COMM_WORLD, &e));
		TU_MPI(MPI_Cancel(&e));
		TU_MPI(MPI_Wait(&e, &st));
		outcome = cancelled_of(&st);
		if (outcome)
			TU_MPI(MPI_Recv(&got, 1, MPI_INT, 1, T_RACE, MPI_COMM_WORLD, &st));
		TU_CHECK(got == 2000 + r, "round %d: racing message %d", r, got);
		TU_MPI(MPI_Send(&outcome, 1, MPI_INT, 1, T_OUTCOME, MPI_COMM_WORLD));
	}
	printf("round %d: unmatched receive cancelled; matched receive completed (%d bytes); "
	       "message after a cancelled receive received%s\n",
	       r, DATA_BYTES, race ? "; racing cancel answered" : "");
	fflush(stdout);
	return outcome;
}

static void sender_round(int r, int race, int *told)
{
	unsigned char data[DATA_BYTES];
	tu_fill(data, DATA_BYTES, (uint64_t)r);
	MPI_Request s;
	MPI_Status st;
	TU_MPI(MPI_Isend(data, DATA_BYTES, MPI_BYTE, 0, T_DATA, MPI_COMM_WORLD, &s));
	TU_MPI(MPI_Cancel(&s));
	TU_MPI(MPI_Wait(&s, &st));
	TU_CHECK(cancelled_of(&st) == 0, "round %d: a send was cancelled", r);
	int tok = r, v = 2000 + r;
	if (race && r % 3 == 0)
		TU_MPI(MPI_Send(&v, 1, MPI_INT, 0, T_RACE, MPI_COMM_WORLD));
	TU_MPI(MPI_Send(&tok, 1, MPI_INT, 0, T_SYNC, MPI_COMM_WORLD));
	if (race) {
		if (r % 3 != 0) {
			int go;
			TU_MPI(
			    MPI_Recv(&go, 1, MPI_INT, 0, T_GO, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
			TU_MPI(MPI_Send(&v, 1, MPI_INT, 0, T_RACE, MPI_COMM_WORLD));
		}
		TU_MPI(MPI_Recv(&told[r], 1, MPI_INT, 0, T_OUTCOME, MPI_COMM_WORLD,
		                MPI_STATUS_IGNORE));
	}
}

int main(int argc, char **argv)
{
	tu_init(&argc, &argv, "cancel_recv");
	long rounds = argc > 1 ? strtol(argv[1], NULL, 10) : 10;
	int race = !(argc > 2 && strcmp(argv[2], "norace") == 0);
	if (rounds < 1 || rounds > MAX_ROUNDS || tu_size < 3) {
		if (tu_rank == 0)
			fprintf(stderr, "usage: cancel_recv ROUNDS (1..%d) [norace], 3+ ranks\n",
			        MAX_ROUNDS);
		MPI_Finalize();
		return 2;
	}
	long kill_at = env_long("CANCEL_KILL_AT", -1);
	long kill_times = env_long("CANCEL_KILL_TIMES", 1);
	long incarnation = env_long("CHANMEM_INCARNATION", 0);
	long kill_replica = env_long("CANCEL_KILL_REPLICA", -1);
	if (kill_replica >= 0 && env_long("CHANMEM_REPLICA", 0) != kill_replica)
		kill_at = -1; /* replication: only that replica of rank 0 dies */

	persistent_once();
	static int outcomes[MAX_ROUNDS], told[MAX_ROUNDS];
	for (int r = 0; r < rounds; r++) {
		if (tu_rank == 0) {
			outcomes[r] = canceller_round(r, race);
			if (r == kill_at && incarnation < kill_times)
				raise(SIGKILL);
		} else if (tu_rank == 1) {
			sender_round(r, race, told);
		} else if (tu_rank == 2) {
			int go;
			TU_MPI(
			    MPI_Recv(&go, 1, MPI_INT, 0, T_GO, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
			TU_CHECK(go == r, "round %d: go for round %d", r, go);
			int v = 1000 + r;
			TU_MPI(MPI_Send(&v, 1, MPI_INT, 0, T_LATE, MPI_COMM_WORLD));
		}
	}
	if (race && tu_rank == 0) {
		TU_MPI(MPI_Send(outcomes, (int)rounds, MPI_INT, 1, T_SUMMARY, MPI_COMM_WORLD));
		if (getenv("CANCEL_VERBOSE")) { /* timing-dependent: never on stdout */
			int n = 0;
			for (int r = 0; r < rounds; r++)
				n += outcomes[r];
			fprintf(stderr, "cancel_recv: %d of %ld racing cancels cancelled\n", n,
			        rounds);
		}
	} else if (race && tu_rank == 1) {
		static int summary[MAX_ROUNDS];
		TU_MPI(MPI_Recv(summary, (int)rounds, MPI_INT, 0, T_SUMMARY, MPI_COMM_WORLD,
		                MPI_STATUS_IGNORE));
		for (int r = 0; r < rounds; r++)
			TU_CHECK(summary[r] == told[r],
			         "round %d: rank 0 now says its racing receive was %scancelled, it "
			         "said %scancelled during the run",
			         r, summary[r] ? "" : "not ", told[r] ? "" : "not ");
	}
	TU_MPI(MPI_Barrier(MPI_COMM_WORLD));
	if (tu_rank == 0)
		printf("cancel_recv: all checks passed\n");
	return tu_finalize();
}
