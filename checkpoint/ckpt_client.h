/* Client side of the checkpoint server: connect and authenticate, upload an
 * image as a stream of chunks, fetch the latest committed image of a rank.
 *
 * Blocking calls, each bounded by the timeout given at creation (per read or
 * write). Every call returns CKPT_OK or an enum ckpt_err code;
 * ckpt_client_error() gives the text (the server's words for a refusal).
 * After any error except CKPT_E_NOTFOUND and CKPT_E_ARG the connection is
 * closed and later calls return CKPT_E_IO: make a new client to retry. */
#ifndef CHANMEM_CKPT_CLIENT_H
#define CHANMEM_CKPT_CLIENT_H

#include "ckpt_proto.h"

#include <stddef.h>
#include <stdint.h>

struct ckpt_client;

/* timeout_ms bounds each wait (connect retry, read, write); <= 0 means 30 s. */
struct ckpt_client *ckpt_client_new(int timeout_ms);
void ckpt_client_free(struct ckpt_client *c);

/* Connects to "HOST:PORT" and authenticates with the 32-character secret. */
int ckpt_client_connect(struct ckpt_client *c, const char *hostport, const char *secret);

/* Text of the last error ("" if none). */
const char *ckpt_client_error(const struct ckpt_client *c);
/* errno of the last CKPT_E_IO error (0 if none). */
int ckpt_client_errno(const struct ckpt_client *c);

/* Streaming upload: begin, any number of writes of any size, end. The image
 * becomes visible only when end returns CKPT_OK. A write may already return
 * the server's refusal (e.g. CKPT_E_TOO_BIG) before end. */
int ckpt_upload_begin(struct ckpt_client *c, const char *job, uint32_t rank, uint64_t number);
int ckpt_upload_write(struct ckpt_client *c, const void *data, size_t len);
int ckpt_upload_end(struct ckpt_client *c);
/* All three for one buffer. */
int ckpt_upload(struct ckpt_client *c, const char *job, uint32_t rank, uint64_t number,
                const void *data, size_t len);

/* Receives the image in order, in chunks of at most CKPT_CHUNK_MAX bytes.
 * Nonzero stops the fetch (CKPT_E_ABORTED). */
typedef int (*ckpt_sink_fn)(void *arg, const void *data, size_t len);

/* Fetches the latest (highest number) committed image of (job, rank).
 * *info (number, size, checksum) is filled before the first sink call. The
 * data is verified (size and checksum) only at the end: on any error the
 * caller must discard what the sink received. CKPT_E_NOTFOUND: no image,
 * the connection stays usable. */
int ckpt_fetch_latest(struct ckpt_client *c, const char *job, uint32_t rank,
                      struct ckpt_summary *info, ckpt_sink_fn sink, void *arg);
/* Same into a malloc'd buffer (*data, free it; non-NULL even for 0 bytes). */
int ckpt_fetch_latest_alloc(struct ckpt_client *c, const char *job, uint32_t rank, uint64_t *number,
                            void **data, size_t *size);

/* Removes every image of job from the server's store (those of other jobs
 * stay); *removed (if not NULL) = how many there were. */
int ckpt_drop_job(struct ckpt_client *c, const char *job, uint64_t *removed);

#endif
