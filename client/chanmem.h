/* chanmem-specific additions to the MPI interface of libchanmem.
 * A program that also builds with other MPIs guards their use with
 * #ifdef CHANMEM_VERSION. */
#ifndef CHANMEM_CHANMEM_H
#define CHANMEM_CHANMEM_H

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

#ifdef __cplusplus
}
#endif

#endif
