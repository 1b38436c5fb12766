/* chanmem-specific additions to the MPI interface of libchanmem.
 * A program that also builds with other MPIs guards their use with
 * #ifdef CHANMEM_VERSION. */
#ifndef CHANMEM_CHANMEM_H
#define CHANMEM_CHANMEM_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Version of the headers the program was compiled with. */
#define CHANMEM_VERSION "0.1.0"

/* Version of the library the program runs with ("0.1.0"): may differ from
 * CHANMEM_VERSION when the shared library was upgraded since. */
const char *chanmem_version(void);

/* Name of the transport this process uses: "direct" (TCP mesh between
 * ranks) or "cm" (every message through a channel memory). Valid from
 * MPI_Init on (also after MPI_Finalize). Returns 0 (MPI_SUCCESS), or
 * MPI_ERR_ARG for a NULL name, or MPI_ERR_OTHER before MPI_Init; error
 * handlers are not involved. */
int chanmem_transport_name(const char **name);

/* ---- Application checkpoints (docs/checkpointing.md) ----
 *
 * A program registers the memory that makes up its state, calls
 * chanmem_checkpoint at safe points (no request pending), and after MPI_Init
 * asks whether it is recovering:
 *
 *   MPI_Init(&argc, &argv);
 *   chanmem_ckpt_register(&state, sizeof state);
 *   if (chanmem_ckpt_recovering())
 *       chanmem_ckpt_restore();        // state is as at the last checkpoint
 *   else
 *       init_state(&state);
 *   for (; state.step < steps; state.step++) {
 *       compute_and_communicate(&state);
 *       chanmem_checkpoint(NULL);      // returns at once unless one is due
 *   }
 *
 * Checkpoints are taken only under the cm transport with a checkpoint
 * server (cmrun --ckpt-dir, or CHANMEM_CKPT), at the first call after
 * --ckpt-every has passed since the last one (every call without it). They
 * are independent: no other rank takes part. A rank killed later restarts
 * from its latest image and the channel memory replays only what came
 * after it. The communicators, datatypes and requests a program creates are
 * not part of the image: take checkpoints where only MPI_COMM_WORLD (and
 * MPI_COMM_SELF) matter and nothing is pending. All functions return
 * MPI_SUCCESS or an MPI error code; error handlers are not involved. */

/* Adds [addr, addr+len) to the state (at most 64 regions, in a fixed
 * order: a restored image needs the same regions, same sizes). */
int chanmem_ckpt_register(void *addr, size_t len);
/* 1 if MPI_Init found a checkpoint image of this rank that
 * chanmem_ckpt_restore has not copied back yet, else 0. */
int chanmem_ckpt_recovering(void);
/* Copies the image into the registered regions (MPI_ERR_ARG if they do not
 * have the image's count and sizes). */
int chanmem_ckpt_restore(void);
/* Takes a checkpoint if one is due; *taken (may be NULL) says whether it
 * did. MPI_ERR_PENDING: a request is pending, no image was taken. */
int chanmem_checkpoint(int *taken);

#ifdef __cplusplus
}
#endif

#endif
