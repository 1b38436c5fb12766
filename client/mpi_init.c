/* Environment management: MPI_Init/MPI_Finalize, transport selection,
 * timers, versions, and the chanmem.h extras. The top of the MPI layer:
 * it calls down into requests, collectives and the transport; the
 * progress hook every waiting call goes through is in mpi_request.c, so
 * nothing below calls up into this file. */
#include "config.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "chanmem.h"
#include "ckpt_app.h"
#include "heartbeat.h"
#include "jobenv.h"
#include "mpi_internal.h"
#include "mpi_test.h"
#include "stdin_log.h"
#include "units.h"

struct cm_mpi_state cm_mpi = {.world_rank = -1, .job = {.listen_fd = -1}};

/* Fills cm_mpi.transport for the name the job environment gave. */
static int select_transport(const char *name)
{
	memset(&cm_mpi.transport, 0, sizeof cm_mpi.transport);
	if (strcmp(name, "direct") == 0)
		cm_transport_direct(&cm_mpi.transport);
	else if (strcmp(name, "cm") == 0) {
		cm_transport_cm(&cm_mpi.transport);
		/* Benchmarks only (netpipe/ftbench): without event logging a
		 * restarted rank re-decides its clock values and test outcomes. */
		const char *events = getenv("CHANMEM_EVENTS");
		if (events && strcmp(events, "off") == 0)
			cm_mpi.transport.event = NULL;
	} else if (strcmp(name, "repl") == 0)
		cm_transport_repl(&cm_mpi.transport);
	else
		return -1;
	return 0;
}

static int init(int required, const char *func)
{
	if (cm_mpi.initialized || cm_mpi.finalized)
		return cm_mpi_raise(NULL, MPI_ERR_OTHER, func);
	/* Failures below have printed why (cm_job_from_env, the transport);
	 * the default handler of MPI_COMM_WORLD then ends the process. */
	char name[sizeof cm_mpi.transport_name];
	if (cm_job_from_env(&cm_mpi.job, name, sizeof name) < 0)
		return cm_mpi_raise(NULL, MPI_ERR_OTHER, func);
	cm_mpi.world_rank = cm_mpi.job.rank;
	if (select_transport(name) < 0) {
		fprintf(stderr, "chanmem: rank %d: unknown transport '%s' (want direct or cm)\n",
		        cm_mpi.job.rank, name);
		cm_job_free(&cm_mpi.job);
		return cm_mpi_raise(NULL, MPI_ERR_OTHER, func);
	}
	/* A restarted rank resumes from its latest checkpoint image, if any:
	 * the transport must start from the image's counters. */
	if ((cm_mpi.transport.snapshot && cm_ckpt_recover(&cm_mpi.job) < 0) ||
	    cm_mpi.transport.init(&cm_mpi.transport, &cm_mpi.job) < 0) {
		cm_job_free(&cm_mpi.job);
		return cm_mpi_raise(NULL, MPI_ERR_OTHER, func);
	}
	snprintf(cm_mpi.transport_name, sizeof cm_mpi.transport_name, "%s", name);
	/* Under cmrun stdout is a pipe, hence fully buffered: lines would show
	 * up late and out of step with stderr. Terminal-like line buffering is
	 * what a user of mpirun expects. */
	if (getenv(CM_ENV_RANK) != NULL)
		setvbuf(stdout, NULL, _IOLBF, 0);
	cm_mpi_comm_init(cm_mpi.job.rank, cm_mpi.job.size);
	/* The outcome log counts frames from here, not from the program's
	 * first test or collective, so every incarnation counts the same (its
	 * steps and marks name counts). */
	cm_mpi_nd_on();
	if (cm_mpi.job.resume)
		cm_mpi_nd_resume(cm_mpi.job.resume);
	cm_mpi.thread_level = required > MPI_THREAD_FUNNELED ? MPI_THREAD_FUNNELED : required;
	cm_mpi.main_thread = pthread_self();
	cm_mpi.initialized = 1;
	uint64_t in_consumed, in_delivered;
	cm_ckpt_stdin_position(&in_consumed, &in_delivered);
	cm_stdin_init(in_consumed, in_delivered);
	cm_heartbeat_start(cm_mpi.job.rank, cm_mpi.job.incarnation, cm_mpi.job.replica);
	return MPI_SUCCESS;
}

int MPI_Init(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	return init(MPI_THREAD_SINGLE, "MPI_Init");
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
	(void)argc;
	(void)argv;
	if (!provided || required < MPI_THREAD_SINGLE || required > MPI_THREAD_MULTIPLE)
		return cm_mpi_raise(NULL, MPI_ERR_ARG, "MPI_Init_thread");
	int rc = init(required, "MPI_Init_thread");
	if (rc == MPI_SUCCESS)
		*provided = cm_mpi.thread_level;
	return rc;
}

int MPI_Initialized(int *flag)
{
	if (!flag)
		return cm_mpi.initialized && !cm_mpi.finalized
		           ? cm_mpi_raise(NULL, MPI_ERR_ARG, "MPI_Initialized")
		           : MPI_ERR_ARG;
	*flag = cm_mpi.initialized;
	return MPI_SUCCESS;
}

int MPI_Finalized(int *flag)
{
	if (!flag)
		return cm_mpi.initialized && !cm_mpi.finalized
		           ? cm_mpi_raise(NULL, MPI_ERR_ARG, "MPI_Finalized")
		           : MPI_ERR_ARG;
	*flag = cm_mpi.finalized;
	return MPI_SUCCESS;
}

int MPI_Finalize(void)
{
	CM_MPI_REQUIRE_INIT("MPI_Finalize");
	struct cm_mpi_comm *world = cm_mpi_comm_world();
	/* Nobody closes its connections while a peer may still send to it. */
	int rc = cm_mpi_barrier(world);
	if (cm_mpi.transport.finalize(&cm_mpi.transport) < 0 && rc == MPI_SUCCESS)
		rc = MPI_ERR_OTHER;
	cm_mpi_req_shutdown();
	cm_heartbeat_stop(); /* after the barrier: a rank waiting there is alive */
	cm_job_free(&cm_mpi.job);
	cm_mpi.finalized = 1;
	return cm_mpi_raise(world, rc, "MPI_Finalize");
}

int MPI_Query_thread(int *provided)
{
	CM_MPI_REQUIRE_INIT("MPI_Query_thread");
	if (!provided)
		return cm_mpi_raise(NULL, MPI_ERR_ARG, "MPI_Query_thread");
	*provided = cm_mpi.thread_level;
	return MPI_SUCCESS;
}

int MPI_Is_thread_main(int *flag)
{
	CM_MPI_REQUIRE_INIT("MPI_Is_thread_main");
	if (!flag)
		return cm_mpi_raise(NULL, MPI_ERR_ARG, "MPI_Is_thread_main");
	*flag = pthread_equal(pthread_self(), cm_mpi.main_thread) != 0;
	return MPI_SUCCESS;
}

int MPI_Get_processor_name(char *name, int *resultlen)
{
	CM_MPI_REQUIRE_INIT("MPI_Get_processor_name");
	if (!name || !resultlen)
		return cm_mpi_raise(NULL, MPI_ERR_ARG, "MPI_Get_processor_name");
	char host[HOST_NAME_MAX + 1];
	if (gethostname(host, sizeof host) < 0)
		snprintf(host, sizeof host, "localhost");
	host[sizeof host - 1] = '\0';
	int len = snprintf(name, MPI_MAX_PROCESSOR_NAME, "%s", host);
	*resultlen = len < MPI_MAX_PROCESSOR_NAME ? len : MPI_MAX_PROCESSOR_NAME - 1;
	return MPI_SUCCESS;
}

/* Allowed at any time, even before MPI_Init. */
int MPI_Get_version(int *version, int *subversion)
{
	if (!version || !subversion)
		return cm_mpi.initialized && !cm_mpi.finalized
		           ? cm_mpi_raise(NULL, MPI_ERR_ARG, "MPI_Get_version")
		           : MPI_ERR_ARG;
	*version = MPI_VERSION;
	*subversion = MPI_SUBVERSION;
	return MPI_SUCCESS;
}

int MPI_Get_library_version(char *version, int *resultlen)
{
	if (!version || !resultlen)
		return cm_mpi.initialized && !cm_mpi.finalized
		           ? cm_mpi_raise(NULL, MPI_ERR_ARG, "MPI_Get_library_version")
		           : MPI_ERR_ARG;
	/* The transport in use once MPI_Init has chosen it. */
	const char *in_use =
	    cm_mpi.initialized && cm_mpi.transport.name ? cm_mpi.transport.name : NULL;
	int len = snprintf(version, MPI_MAX_LIBRARY_VERSION_STRING,
	                   "%s %s: MPI-%d.%d subset (point-to-point, persistent requests, "
	                   "collectives, communicators, groups, topologies, derived datatypes); "
	                   "transports cm (fault-tolerant channel memories), direct, repl%s%s",
	                   PACKAGE_NAME, PACKAGE_VERSION, MPI_VERSION, MPI_SUBVERSION,
	                   in_use ? "; using " : "", in_use ? in_use : "");
	*resultlen =
	    len < MPI_MAX_LIBRARY_VERSION_STRING ? len : MPI_MAX_LIBRARY_VERSION_STRING - 1;
	return MPI_SUCCESS;
}

/* Under a fault-tolerant transport every value returned is an event logged
 * at the rank's home CM; a re-executing rank gets the logged values back in
 * order, then real time shifted by whatever keeps it monotonic (never below
 * the last value returned: the new process may run on a clock that is
 * behind the dead one's). */
double MPI_Wtime(void)
{
	static double offset, last;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	double now = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9 + offset;
	if (now < last) {
		offset += last - now;
		now = last;
	}
	if (!cm_mpi.initialized || cm_mpi.finalized || cm_mpi.transport.event == NULL)
		return last = now;
	uint8_t wire[8];
	uint64_t bits;
	memcpy(&bits, &now, sizeof bits);
	cm_put_u64(wire, bits);
	int replayed = 0;
	if (cm_mpi.transport.event(&cm_mpi.transport, CM_EV_WTIME, wire, sizeof wire, &replayed) <
	    0) {
		cm_mpi_fatal("MPI_Wtime", "cannot log or replay the value");
	}
	if (replayed) {
		bits = cm_get_u64(wire);
		memcpy(&now, &bits, sizeof now);
	}
	return last = now;
}

double MPI_Wtick(void)
{
	struct timespec res;
	if (clock_getres(CLOCK_MONOTONIC, &res) < 0 || (res.tv_sec == 0 && res.tv_nsec == 0))
		return 1e-9;
	return (double)res.tv_sec + (double)res.tv_nsec * 1e-9;
}

/* ---- chanmem.h ---- */

const char *chanmem_version(void)
{
	return PACKAGE_VERSION;
}

int chanmem_transport_name(const char **name)
{
	if (!name)
		return MPI_ERR_ARG;
	if (!cm_mpi.initialized)
		return MPI_ERR_OTHER;
	*name = cm_mpi.transport_name;
	return MPI_SUCCESS;
}
