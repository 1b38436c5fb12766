/* The wall clock of an unmodified program, logged like MPI_Wtime.
 *
 * Programs time themselves with gettimeofday (NetPIPE does) and seed their
 * random numbers with time(NULL). Both are nondeterministic: a rank that is
 * restarted and re-executes would read other values and could take other
 * decisions (NetPIPE's repeat counts come from its timings), so the
 * re-execution would diverge from what the dead incarnation already sent.
 * libchanmem therefore defines both functions: the program's calls bind to
 * these before libc's (symbol interposition; libchanmem comes before libc in
 * the link). Between MPI_Init and MPI_Finalize, on the thread that called
 * MPI_Init, under a fault-tolerant transport, each value read is an event
 * logged at the rank's home CM, and a re-executing rank reads the logged
 * values back in order. Anywhere else they are plain reads of the clock.
 *
 * After the logged values run out, real time continues, shifted so that the
 * clock never goes back below the last value returned (the restarted
 * process may run on a host whose clock is behind). */
#include <config.h>

#include <stdint.h>
#include <sys/time.h>
#include <time.h>

#include "mpi_internal.h"
#include "protocol.h"

/* Kept since the first read: what keeps the clock monotonic across a
 * restart. Only the MPI thread touches them while logging; other threads
 * read the clock plainly. */
static int64_t last_ns, offset_ns;

static int64_t realtime_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int clock_is_logged(void)
{
	return cm_mpi.initialized && !cm_mpi.finalized && cm_mpi.transport.event != NULL &&
	       pthread_equal(pthread_self(), cm_mpi.main_thread);
}

/* The wall clock in nanoseconds since the epoch, as the rank must see it. */
static int64_t logged_realtime_ns(const char *what)
{
	int64_t now = realtime_ns();
	if (!clock_is_logged())
		return now;
	now += offset_ns;
	if (now < last_ns) {
		offset_ns += last_ns - now;
		now = last_ns;
	}
	uint8_t wire[8];
	cm_put_u64(wire, (uint64_t)now);
	int replayed = 0;
	if (cm_mpi.transport.event(&cm_mpi.transport, CM_EV_REALTIME, wire, sizeof wire,
	                           &replayed) < 0) {
		cm_mpi_fatal(what, "cannot log or replay the clock value");
	}
	if (replayed)
		now = (int64_t)cm_get_u64(wire);
	return last_ns = now;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz)
{
	(void)tz; /* obsolete; glibc fills nothing either */
	int64_t ns = logged_realtime_ns("gettimeofday");
	tv->tv_sec = (time_t)(ns / 1000000000);
	tv->tv_usec = (suseconds_t)(ns % 1000000000 / 1000);
	return 0;
}

time_t time(time_t *tloc)
{
	time_t sec = (time_t)(logged_realtime_ns("time") / 1000000000);
	if (tloc)
		*tloc = sec;
	return sec;
}
