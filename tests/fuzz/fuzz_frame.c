/* libFuzzer target: the frame decoder and validator (common/protocol.c).
 * The first 8 input bytes pick the limits (world size, largest payload),
 * the rest is what a peer sent. A header that decodes must re-encode to
 * the same 32 bytes; a HELLO payload that decodes likewise. */
#include "config.h"

#include "protocol.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 8)
		return 0;
	struct cm_limits lim = {.world_size = cm_get_u32(data) % 70000,
	                        .max_payload = cm_get_u32(data + 4)};
	data += 8;
	size -= 8;
	struct cm_header h;
	if (cm_header_decode(data, size, &lim, &h) != CM_OK)
		return 0;
	uint8_t again[CM_HEADER_SIZE];
	cm_header_encode(&h, again);
	if (memcmp(again, data, CM_HEADER_SIZE) != 0)
		abort(); /* a field decoded to something else than was sent */
	if (cm_header_validate(&h, &lim) != CM_OK)
		abort(); /* decode accepted what validate refuses */
	(void)cm_type_str(h.type);
	if (h.type == CM_T_HELLO && size >= CM_HEADER_SIZE + CM_HELLO_PAYLOAD) {
		struct cm_hello hello;
		const uint8_t *p = data + CM_HEADER_SIZE;
		if (cm_hello_decode(p, size - CM_HEADER_SIZE, &hello) == CM_OK) {
			uint8_t pl[CM_HELLO_PAYLOAD];
			cm_hello_encode(&hello, pl);
			if (memcmp(pl, p, CM_HELLO_PAYLOAD) != 0)
				abort();
		}
	}
	return 0;
}
