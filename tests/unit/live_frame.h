/* One frame header, encoded from its fields: shared by the live cmserver
 * tests (live_server.c, over a socket) and the core harness
 * (test_core_harness.h, into a buffer). */
#ifndef CHANMEM_TEST_LIVE_FRAME_H
#define CHANMEM_TEST_LIVE_FRAME_H

#include "protocol.h"

#include <stdint.h>

static inline void frame_header_encode(uint8_t hdr[CM_HEADER_SIZE], uint8_t type, uint16_t flags,
                                       int32_t src, int32_t dst, int32_t tag, uint32_t ctx,
                                       uint64_t clock, uint32_t len)
{
	struct cm_header h = {.type = type,
	                      .flags = flags,
	                      .src = src,
	                      .dst = dst,
	                      .tag = tag,
	                      .ctx = ctx,
	                      .len = len,
	                      .clock = clock};
	cm_header_encode(&h, hdr);
}

#endif
