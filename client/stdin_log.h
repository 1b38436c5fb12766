/* The program's stdin, logged and replayed (stdin_log.c). */
#ifndef CHANMEM_STDIN_LOG_H
#define CHANMEM_STDIN_LOG_H

#include <stdint.h>

#include "mpi_internal.h"

/* At MPI_Init, once the transport runs: under the cm transport, stdin
 * becomes a stream whose reads are events. consumed/delivered: the
 * restored image's position (0, 0 without one). */
CM_HIDDEN void cm_stdin_init(uint64_t consumed, uint64_t delivered);
/* Where the program is in its input, for a checkpoint image. */
CM_HIDDEN void cm_stdin_position(uint64_t *consumed, uint64_t *delivered);

#endif
