/* Send coalescing of the cm transport (transport_cm.h).
 *
 * A receive through a channel memory costs the rank a RECV_REQ frame on
 * top of the message itself. In the common pattern "MPI_Send, then
 * MPI_Recv" the message and the request left in two system calls, and the
 * first one woke the CM before the second was written: on a shared core
 * that is a second wake-up of the CM per message (measured pinned to one
 * core: 12.7 us against 9.9 us one way for NPcm's 1-byte ping-pong).
 *
 * So a small eager message is queued (copied: the send completes at once)
 * instead of written, and leaves with the next frame the rank writes,
 * which in that pattern is the RECV_REQ: one system call, one wake-up.
 * Every transport call that may wait flushes it first, so nothing waits on
 * a queued message while the rank itself waits.
 *
 * Queuing pays only while the program calls MPI again at once. A queued
 * message that waited more than prompt_ns (200 us) for its flush (the program
 * computed in between) turns queuing off for the next `pause` sends; pause
 * doubles with every late flush (16 .. 65536) and shrinks by one with every
 * prompt one, so a program that always computes after sending soon stops
 * queuing, and one late flush between benchmark trials costs little.
 * If the program computes for long, a flusher thread writes the message
 * once it is window_ns old. The flusher wakes once per window while sends
 * are being queued, so the window is a safety net, and the prompt check is
 * what catches a program that computes after sending: it pays
 * min(compute time, window) once per `pause` sends.
 * Those wake-ups are dear on a virtual machine, where every timer interrupt
 * exits to the host (measured pinned, NPcm 1 B: 8.76 us one way with a 1 ms
 * window against 8.39 us with 100 ms). So the flusher's timer gets a slack
 * of three windows (PR_SET_TIMERSLACK): the kernel may fire it with an
 * interrupt it takes anyway, such as the scheduler tick of a busy core
 * (8.45 us). A message then waits at most four windows.
 * CHANMEM_COALESCE_US sets the window (0: off), CHANMEM_COALESCE_PROMPT_US
 * the prompt limit; CHANMEM_COALESCE_STATS=1 prints the counts at
 * MPI_Finalize. */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include "log.h"
#include "transport_cm.h"
#include "transport_common.h"
#include "units.h"

#define COALESCE_DEFAULT_US 1000
#define COALESCE_MAX_US 100000
/* Larger messages gain nothing from riding with the next frame. */
#define COALESCE_MAX_MESSAGE 4096u
/* A batch of queued messages is written once it holds this much. */
#define COALESCE_MAX_BATCH (16u * 1024u)
#define COALESCE_MAX_FRAMES 8u
#define PAUSE_MIN 16u
#define PAUSE_MAX 65536u
#define PROMPT_US 200L
#define SLACK_WINDOWS 3

static long long monotonic_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int env_microseconds(const struct cmt *s, const char *name, long *us)
{
	const char *text = getenv(name);
	if (text && *text && cm_parse_long(text, 0, COALESCE_MAX_US, us) < 0) {
		cm_err("rank %d: %s '%s': expected microseconds from 0 to %d", s->rank, name, text,
		       COALESCE_MAX_US);
		return -1;
	}
	return 0;
}

int cmt_coalesce_init(struct cmt *s)
{
	struct cmt_coalesce *co = &s->co;
	long us = COALESCE_DEFAULT_US, prompt_us = PROMPT_US;
	if (env_microseconds(s, "CHANMEM_COALESCE_US", &us) < 0 ||
	    env_microseconds(s, "CHANMEM_COALESCE_PROMPT_US", &prompt_us) < 0)
		return -1;
	co->window_ns = us * 1000LL;
	co->pause = PAUSE_MIN;
	/* A flush by the flusher is always late. */
	co->prompt_ns = (prompt_us < us ? prompt_us : us) * 1000LL;
	co->on = calloc((size_t)s->ncms, 1);
	if (co->on == NULL) {
		cm_err("rank %d: out of memory", s->rank);
		return -1;
	}
	pthread_mutexattr_t attr;
	pthread_mutexattr_init(&attr);
	/* The transport's own waits (finalize, init) call progress again. */
	pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&co->lock, &attr);
	pthread_mutexattr_destroy(&attr);
	pthread_mutex_init(&co->wake_mu, NULL);
	pthread_cond_init(&co->wake_cv, NULL);
	co->ready = 1;
	return 0;
}

/* Writes the queued messages (and whatever queued frames precede them). */
int cmt_coalesce_flush(struct cmt *s)
{
	struct cmt_coalesce *co = &s->co;
	int rc = 0;
	for (int i = 0; i < s->ncms && co->deferred > 0; i++) {
		struct cm_conn *c = s->cms[i];
		/* A blocked socket is flushed by progress on POLLOUT. */
		if (co->on[i] && cm_conn_alive(c) && !c->wblocked && cm_conn_flush(c) < 0)
			rc = -1;
		cmt_coalesce_written(s, i);
	}
	return rc;
}

void cmt_coalesce_written(struct cmt *s, int cm)
{
	struct cmt_coalesce *co = &s->co;
	if (!co->on[cm])
		return;
	/* A failed connection is the transport's to report, not ours. */
	if (cm_conn_pending_output(s->cms[cm]) && cm_conn_alive(s->cms[cm]))
		return;
	co->on[cm] = 0;
	if (--co->deferred > 0)
		return;
	co->deferred_bytes = co->deferred_frames = 0;
	if (monotonic_ns() - co->deferred_since >= co->prompt_ns) {
		co->backoff = co->pause;
		co->pause = co->pause * 2 > PAUSE_MAX ? PAUSE_MAX : co->pause * 2;
		co->late++;
	} else if (co->pause > PAUSE_MIN) {
		co->pause--;
	}
}

static void *flusher_main(void *arg)
{
	struct cmt *s = arg;
	struct cmt_coalesce *co = &s->co;
	long long sleep_ns = co->window_ns;
	/* Per thread: the rank's own timers keep their precision. Only ever
	 * widened (a tiny window must not make the timer more precise than the
	 * default); failure only costs wake-ups. */
	unsigned long slack = (unsigned long)(SLACK_WINDOWS * co->window_ns);
	int current = prctl(PR_GET_TIMERSLACK);
	if (current >= 0 && slack > (unsigned long)current)
		prctl(PR_SET_TIMERSLACK, slack);
	for (;;) {
		pthread_mutex_lock(&co->wake_mu);
		while (!co->stop && !atomic_load(&co->armed))
			pthread_cond_wait(&co->wake_cv, &co->wake_mu);
		int stop = co->stop;
		pthread_mutex_unlock(&co->wake_mu);
		if (stop)
			return NULL;
		struct timespec ts = {.tv_sec = sleep_ns / 1000000000LL,
		                      .tv_nsec = sleep_ns % 1000000000LL};
		while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR)
			;
		sleep_ns = co->window_ns;
		/* Taken: the rank is in a transport call, which flushes before it
		 * waits. */
		if (pthread_mutex_trylock(&co->lock) != 0)
			continue;
		if (co->deferred) {
			long long age = monotonic_ns() - co->deferred_since;
			if (age >= co->window_ns) {
				co->timer_flushes++;
				cmt_coalesce_flush(s);
			} else {
				sleep_ns = co->window_ns - age;
			}
		} else if (co->deferrals == co->deferrals_seen) {
			/* Idle for a window: sleep until the next deferral. The rank
			 * defers only under co->lock, so it sees armed == 0 and wakes
			 * us, or we saw its deferral. */
			atomic_store(&co->armed, 0);
		}
		co->deferrals_seen = co->deferrals;
		pthread_mutex_unlock(&co->lock);
	}
}

static int arm_flusher(struct cmt *s)
{
	struct cmt_coalesce *co = &s->co;
	if (atomic_load(&co->armed))
		return 0;
	pthread_mutex_lock(&co->wake_mu);
	int rc = 0;
	if (!co->thread_started) {
		rc = pthread_create(&co->thread, NULL, flusher_main, s);
		co->thread_started = rc == 0;
	}
	if (rc == 0) {
		atomic_store(&co->armed, 1);
		pthread_cond_signal(&co->wake_cv);
	}
	pthread_mutex_unlock(&co->wake_mu);
	if (rc != 0)
		cm_err("rank %d: cannot start the send flusher thread: %s", s->rank, strerror(rc));
	return rc == 0 ? 0 : -1;
}

int cmt_coalesce_send(struct cmt *s, int cm, struct cm_header *h, struct cm_req *req)
{
	struct cmt_coalesce *co = &s->co;
	struct cm_conn *c = s->cms[cm];
	if (co->window_ns == 0 || req->sync || req->slen > COALESCE_MAX_MESSAGE || c->wblocked ||
	    !cm_conn_alive(c))
		return 0;
	/* Events queued lazily must reach the CM with this send, as before
	 * (they are logged before anything the rank does after them): a queue
	 * holds either events or queued messages, never both. */
	if (cm_conn_pending_output(c) && !co->on[cm])
		return 0;
	if (co->backoff > 0) {
		co->backoff--;
		return 0;
	}
	if (co->deferred_bytes + req->slen > COALESCE_MAX_BATCH ||
	    co->deferred_frames >= COALESCE_MAX_FRAMES)
		return cmt_coalesce_flush(s) < 0 ? -1 : 0;
	if (cm_conn_queue(c, h, req->sbuf, req->slen) < 0)
		return -1;
	if (co->deferred == 0)
		co->deferred_since = monotonic_ns();
	if (!co->on[cm]) {
		co->on[cm] = 1;
		co->deferred++;
	}
	co->deferred_bytes += req->slen;
	co->deferred_frames++;
	co->deferrals++;
	cm_send_settle(req, CM_SEND_WAIT_WRITE);
	if (arm_flusher(s) < 0) {
		cmt_coalesce_flush(s);
		co->window_ns = 0;
	}
	return 1;
}

void cmt_coalesce_stop(struct cmt *s)
{
	struct cmt_coalesce *co = &s->co;
	if (!co->ready)
		return;
	pthread_mutex_lock(&co->wake_mu);
	co->stop = 1;
	pthread_cond_signal(&co->wake_cv);
	int started = co->thread_started;
	co->thread_started = 0;
	pthread_mutex_unlock(&co->wake_mu);
	if (started)
		pthread_join(co->thread, NULL);
	co->window_ns = 0; /* nothing is queued from here on */
}

void cmt_coalesce_free(struct cmt *s)
{
	struct cmt_coalesce *co = &s->co;
	if (!co->ready)
		return;
	cmt_coalesce_stop(s);
	const char *stats = getenv("CHANMEM_COALESCE_STATS");
	if (stats && *stats && strcmp(stats, "0") != 0)
		fprintf(stderr,
		        "chanmem: rank %d: %llu sends queued to leave with the next frame, %llu "
		        "written late by the flusher, %llu times queuing paused\n",
		        s->rank, (unsigned long long)co->deferrals,
		        (unsigned long long)co->timer_flushes, (unsigned long long)co->late);
	pthread_cond_destroy(&co->wake_cv);
	pthread_mutex_destroy(&co->wake_mu);
	pthread_mutex_destroy(&co->lock);
	free(co->on);
	co->ready = 0;
}
