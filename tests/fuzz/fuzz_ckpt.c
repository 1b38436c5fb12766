/* libFuzzer target: the checkpoint protocol (checkpoint/ckpt_proto.c) as
 * ckptserver and its clients read it: a stream of frames, each header
 * decoded, then its payload by the type's decoder. What decodes must
 * re-encode to the same bytes. */
#include "config.h"

#include "ckpt_proto.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void payload(const struct ckpt_header *h, const uint8_t *p, size_t len)
{
	struct ckpt_ref ref;
	struct ckpt_summary sum;
	uint8_t again[CKPT_HEADER_SIZE + CKPT_PUT_BEGIN_FIXED + CKPT_JOB_MAX + 64];
	switch (h->type) {
	case CKPT_T_PUT_BEGIN:
		if (ckpt_put_begin_decode(p, len, &ref) == CKPT_OK &&
		    (ckpt_put_begin_encode(&ref, again) != len || memcmp(again, p, len) != 0))
			abort();
		break;
	case CKPT_T_GET_LATEST:
		if (ckpt_get_latest_decode(p, len, &ref) == CKPT_OK &&
		    (ckpt_get_latest_encode(&ref, again) != len || memcmp(again, p, len) != 0))
			abort();
		break;
	case CKPT_T_PUT_END:
		if (ckpt_put_end_decode(p, len, &sum) == CKPT_OK) {
			ckpt_put_end_encode(&sum, again);
			if (memcmp(again, p, CKPT_PUT_END_PAYLOAD) != 0)
				abort();
		}
		break;
	case CKPT_T_GET_BEGIN:
		if (ckpt_get_begin_decode(p, len, &sum) == CKPT_OK) {
			ckpt_get_begin_encode(&sum, again);
			if (memcmp(again, p, CKPT_GET_BEGIN_PAYLOAD) != 0)
				abort();
		}
		break;
	default:
		(void)ckpt_checksum(0, p, len);
		break;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	while (size >= CKPT_HEADER_SIZE) {
		struct ckpt_header h;
		if (ckpt_header_decode(data, size, &h) != CKPT_OK)
			return 0;
		uint8_t again[CKPT_HEADER_SIZE];
		ckpt_header_encode(&h, again);
		if (memcmp(again, data, CKPT_HEADER_SIZE) != 0)
			abort();
		(void)ckpt_type_str(h.type);
		data += CKPT_HEADER_SIZE;
		size -= CKPT_HEADER_SIZE;
		size_t len = h.len < size ? h.len : size;
		payload(&h, data, len);
		data += len;
		size -= len;
	}
	return 0;
}
