/* Error classes, their strings, raising an error through a communicator's
 * handler, and ending the process (fatal errors, MPI_Abort). Setting and
 * getting a communicator's handler is in mpi_comm.c. */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jobenv.h"
#include "mpi_internal.h"
#include "units.h"

static const char *const error_strings[MPI_ERR_LASTCODE + 1] = {
    [MPI_SUCCESS] = "MPI_SUCCESS: no errors",
    [MPI_ERR_BUFFER] = "MPI_ERR_BUFFER: invalid buffer pointer",
    [MPI_ERR_COUNT] = "MPI_ERR_COUNT: invalid count argument (negative, or a message over "
                      "4294967295 bytes, the largest one frame carries)",
    [MPI_ERR_TYPE] = "MPI_ERR_TYPE: invalid datatype",
    [MPI_ERR_TAG] = "MPI_ERR_TAG: invalid tag",
    [MPI_ERR_COMM] = "MPI_ERR_COMM: invalid communicator",
    [MPI_ERR_RANK] = "MPI_ERR_RANK: invalid rank",
    [MPI_ERR_REQUEST] = "MPI_ERR_REQUEST: invalid request",
    [MPI_ERR_ROOT] = "MPI_ERR_ROOT: invalid root",
    [MPI_ERR_GROUP] = "MPI_ERR_GROUP: invalid group",
    [MPI_ERR_OP] = "MPI_ERR_OP: invalid reduce operation",
    [MPI_ERR_TOPOLOGY] = "MPI_ERR_TOPOLOGY: invalid communicator topology",
    [MPI_ERR_DIMS] = "MPI_ERR_DIMS: invalid topology dimension argument",
    [MPI_ERR_ARG] = "MPI_ERR_ARG: invalid argument of some other kind",
    [MPI_ERR_UNKNOWN] = "MPI_ERR_UNKNOWN: unknown error",
    [MPI_ERR_TRUNCATE] = "MPI_ERR_TRUNCATE: message truncated",
    [MPI_ERR_OTHER] = "MPI_ERR_OTHER: known error not in this list",
    [MPI_ERR_INTERN] = "MPI_ERR_INTERN: internal error",
    [MPI_ERR_IN_STATUS] = "MPI_ERR_IN_STATUS: error code is in status",
    [MPI_ERR_PENDING] = "MPI_ERR_PENDING: pending request",
    [MPI_ERR_KEYVAL] = "MPI_ERR_KEYVAL: invalid key value",
    [MPI_ERR_NO_MEM] = "MPI_ERR_NO_MEM: out of memory",
    [MPI_ERR_BASE] = "MPI_ERR_BASE: invalid base",
    [MPI_ERR_INFO_KEY] = "MPI_ERR_INFO_KEY: key longer than MPI_MAX_INFO_KEY",
    [MPI_ERR_INFO_VALUE] = "MPI_ERR_INFO_VALUE: value longer than MPI_MAX_INFO_VAL",
    [MPI_ERR_INFO_NOKEY] = "MPI_ERR_INFO_NOKEY: no such key",
    [MPI_ERR_SPAWN] = "MPI_ERR_SPAWN: could not spawn processes",
    [MPI_ERR_PORT] = "MPI_ERR_PORT: invalid port name",
    [MPI_ERR_SERVICE] = "MPI_ERR_SERVICE: invalid service name",
    [MPI_ERR_NAME] = "MPI_ERR_NAME: service name not published",
    [MPI_ERR_WIN] = "MPI_ERR_WIN: invalid window",
    [MPI_ERR_SIZE] = "MPI_ERR_SIZE: invalid size",
    [MPI_ERR_DISP] = "MPI_ERR_DISP: invalid displacement",
    [MPI_ERR_INFO] = "MPI_ERR_INFO: invalid info object",
    [MPI_ERR_LOCKTYPE] = "MPI_ERR_LOCKTYPE: invalid lock type",
    [MPI_ERR_ASSERT] = "MPI_ERR_ASSERT: invalid assertion",
    [MPI_ERR_RMA_CONFLICT] = "MPI_ERR_RMA_CONFLICT: conflicting accesses to a window",
    [MPI_ERR_RMA_SYNC] = "MPI_ERR_RMA_SYNC: wrong synchronization of RMA calls",
    [MPI_ERR_FILE] = "MPI_ERR_FILE: invalid file handle",
    [MPI_ERR_NOT_SAME] = "MPI_ERR_NOT_SAME: collective arguments not identical",
    [MPI_ERR_AMODE] = "MPI_ERR_AMODE: invalid file access mode",
    [MPI_ERR_UNSUPPORTED_DATAREP] = "MPI_ERR_UNSUPPORTED_DATAREP: unsupported data representation",
    [MPI_ERR_UNSUPPORTED_OPERATION] = "MPI_ERR_UNSUPPORTED_OPERATION: unsupported operation",
    [MPI_ERR_NO_SUCH_FILE] = "MPI_ERR_NO_SUCH_FILE: file does not exist",
    [MPI_ERR_FILE_EXISTS] = "MPI_ERR_FILE_EXISTS: file exists",
    [MPI_ERR_BAD_FILE] = "MPI_ERR_BAD_FILE: invalid file name",
    [MPI_ERR_ACCESS] = "MPI_ERR_ACCESS: permission denied",
    [MPI_ERR_NO_SPACE] = "MPI_ERR_NO_SPACE: no space left on device",
    [MPI_ERR_QUOTA] = "MPI_ERR_QUOTA: quota exceeded",
    [MPI_ERR_READ_ONLY] = "MPI_ERR_READ_ONLY: read-only file or file system",
    [MPI_ERR_FILE_IN_USE] = "MPI_ERR_FILE_IN_USE: file in use",
    [MPI_ERR_DUP_DATAREP] = "MPI_ERR_DUP_DATAREP: data representation already defined",
    [MPI_ERR_CONVERSION] = "MPI_ERR_CONVERSION: data conversion failed",
    [MPI_ERR_IO] = "MPI_ERR_IO: input/output error",
    [MPI_ERR_RMA_RANGE] = "MPI_ERR_RMA_RANGE: target memory outside the window",
    [MPI_ERR_RMA_ATTACH] = "MPI_ERR_RMA_ATTACH: memory cannot be attached",
    [MPI_ERR_RMA_SHARED] = "MPI_ERR_RMA_SHARED: memory cannot be shared",
    [MPI_ERR_RMA_FLAVOR] = "MPI_ERR_RMA_FLAVOR: wrong window flavor",
};

static const char *error_text(int code)
{
	if (code < 0 || code > MPI_ERR_LASTCODE || !error_strings[code])
		return NULL;
	return error_strings[code];
}

void cm_mpi_exit(int status)
{
	fflush(NULL);
	_exit(status);
}

static void print_rank_prefix(void)
{
	if (cm_mpi.world_rank >= 0)
		fprintf(stderr, "chanmem: rank %d: ", cm_mpi.world_rank);
	else
		fprintf(stderr, "chanmem: rank ?: ");
}

void cm_mpi_not_initialized(const char *func)
{
	fflush(stdout);
	print_rank_prefix();
	fprintf(stderr, "%s: MPI_ERR_OTHER: called %s\n", func,
	        cm_mpi.finalized ? "after MPI_Finalize" : "before MPI_Init");
	cm_mpi_exit(1);
}

void cm_mpi_fatal(const char *func, const char *fmt, ...)
{
	char why[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof why, fmt, ap);
	va_end(ap);
	fflush(stdout);
	print_rank_prefix();
	fprintf(stderr, "%s: %s\n", func, why);
	cm_mpi_exit(1);
}

/* Tells cmrun (through the inherited control pipe) that this exit is an
 * abort with that code, before any peer can notice this rank is gone. */
static void report_abort_to_cmrun(int rank, int status)
{
	long fd;
	const char *text = getenv(CM_ENV_CONTROL_FD);
	if (text == NULL || rank < 0 || cm_parse_long(text, 0, INT_MAX, &fd) < 0)
		return;
	char line[64];
	int len = snprintf(line, sizeof line, "abort %d %d\n", rank, status);
	ssize_t unused = write((int)fd, line, (size_t)len); /* one write: atomic on a pipe */
	(void)unused;
}

int MPI_Abort(MPI_Comm comm, int errorcode)
{
	(void)comm; /* every rank of the job goes down: cmrun tears the job down */
	int status = errorcode >= 1 && errorcode <= 255 ? errorcode : 1;
	fflush(stdout);
	if (cm_mpi.world_rank >= 0)
		fprintf(stderr, "chanmem: rank %d: MPI_Abort(%d)\n", cm_mpi.world_rank, errorcode);
	else
		fprintf(stderr, "chanmem: rank ?: MPI_Abort(%d)\n", errorcode);
	report_abort_to_cmrun(cm_mpi.world_rank, status);
	cm_mpi_exit(status);
}

/* The communicator whose handler takes the errors tied to none; set by
 * mpi_comm.c, which owns it. Until then the default handler applies:
 * fatal. */
static const struct cm_mpi_comm *comm_for_untied_errors;

void cm_mpi_error_set_world(const struct cm_mpi_comm *world)
{
	comm_for_untied_errors = world;
}

int cm_mpi_raise(struct cm_mpi_comm *c, int code, const char *func)
{
	if (code == MPI_SUCCESS)
		return code;
	const struct cm_mpi_comm *handler_of = c ? c : comm_for_untied_errors;
	if (handler_of && handler_of->errhandler == MPI_ERRORS_RETURN)
		return code;
	const char *text = error_text(code);
	fflush(stdout);
	print_rank_prefix();
	if (text)
		fprintf(stderr, "%s: %s\n", func, text);
	else
		fprintf(stderr, "%s: error code %d\n", func, code);
	cm_mpi_exit(1);
}

/* Error strings and classes work at any time, even outside
 * MPI_Init..MPI_Finalize (MPI-4 allows it, and it costs nothing). */
int MPI_Error_string(int errorcode, char *string, int *resultlen)
{
	const char *text = error_text(errorcode);
	if (!string || !resultlen)
		return MPI_ERR_ARG;
	if (!text) {
		string[0] = '\0';
		*resultlen = 0;
		return cm_mpi.initialized && !cm_mpi.finalized
		           ? cm_mpi_raise(NULL, MPI_ERR_ARG, "MPI_Error_string")
		           : MPI_ERR_ARG;
	}
	size_t len = strlen(text);
	if (len > MPI_MAX_ERROR_STRING - 1)
		len = MPI_MAX_ERROR_STRING - 1;
	memcpy(string, text, len);
	string[len] = '\0';
	*resultlen = (int)len;
	return MPI_SUCCESS;
}

int MPI_Error_class(int errorcode, int *errorclass)
{
	if (!errorclass || !error_text(errorcode))
		return cm_mpi.initialized && !cm_mpi.finalized
		           ? cm_mpi_raise(NULL, MPI_ERR_ARG, "MPI_Error_class")
		           : MPI_ERR_ARG;
	/* Every code this library returns is a class. */
	*errorclass = errorcode;
	return MPI_SUCCESS;
}
