/* An in-process stand-in for the transports and the job environment, so
 * the MPI layer can be unit-tested without sockets or other processes.
 *
 * The fake plays rank fake_job.rank of fake_job.size. Messages to itself
 * are matched locally in MPI order (posted receives, then an unexpected
 * queue). Messages to other ranks are only logged and complete at once.
 * Messages from other ranks are injected by the test, at once or after a
 * number of progress calls. A receive on a collective context (odd ctx)
 * from another rank is satisfied at once with an empty message, as if every
 * other rank had entered the collective.
 *
 * progress(-1) with nothing scheduled would block forever in a real
 * transport: the fake fails it (returns -1), so a test that would hang
 * fails instead. */
#ifndef CHANMEM_TEST_MPI_FAKE_TRANSPORT_H
#define CHANMEM_TEST_MPI_FAKE_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include "transport.h"

struct fake_sent {
	int peer;
	int tag;
	uint32_t ctx;
	size_t len;
	int sync;
	unsigned char data[64]; /* first bytes of the payload */
};

#define FAKE_LOG_MAX 256

struct fake_state {
	/* Set by the test before MPI_Init. */
	int rank;
	int size;
	const char *transport; /* name cm_job_from_env hands back */
	int env_fails;         /* cm_job_from_env returns -1 */
	int init_fails;        /* transport init returns -1 */

	/* Observed. */
	const char *constructed; /* "direct" or "cm": which constructor ran */
	int inits;
	int finalizes;
	int progress_poll;  /* progress(t, 0) calls */
	int progress_block; /* progress(t, -1) calls */
	int probes;
	int posted_recvs; /* receives currently posted (not matched) */
	int nsent;
	struct fake_sent sent[FAKE_LOG_MAX];
};

extern struct fake_state fake;

/* Resets everything; the fake is then rank `rank` of `size`, "direct". */
void fake_reset(int rank, int size);

/* A message from rank src arrives now (after_progress 0) or during the
 * after_progress-th later progress call. */
void fake_inject(int src, int tag, uint32_t ctx, const void *data, size_t len, int after_progress);

/* Runs fn in a child process whose stderr is captured into err (NUL
 * terminated). Returns the child's exit status (99 if fn returned,
 * 128 + signal if it was killed; it is killed after 10 s). */
int fake_run_child(void (*fn)(void), char *err, size_t errlen);

#endif
