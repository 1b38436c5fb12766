/* libFuzzer target: cmserver's session input (cmserver/input.c and the
 * dispatch behind it) on a protocol core without sockets, fed as the mono
 * engine feeds it: where cm_session_read_iov says, in pieces of a size the
 * first input byte picks, with the output drained between pieces.
 *
 * First byte: bit 0 authenticates the session first (a HELLO of rank 0 in
 * a world of 2, with the secret the fuzzer could never guess), bit 1 also
 * connects rank 1 on a second session (so MSGs to it are matched and
 * delivered), bit 2 turns cut-through on for payloads from 64 bytes; the
 * other bits and the second byte pick the piece size. The rest is the
 * stream. The core must never crash, leak or read past what it was given,
 * whatever the frames. */
#include "config.h"

#include "core.h"
#include "protocol.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SECRET "0123456789abcdef0123456789abcdef"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void drain(struct cm_session *s)
{
	struct iovec iov[16];
	int n;
	while ((n = cm_session_out_iov(s, iov, 16)) > 0) {
		size_t len = 0;
		for (int i = 0; i < n; i++)
			len += iov[i].iov_len;
		cm_session_out_consumed(s, len);
	}
}

/* Feeds bytes as an engine would; stops when the session closes or takes
 * no more. */
static void feed(struct cm_session *s, const uint8_t *p, size_t len, size_t piece)
{
	while (len > 0 && !cm_session_closing(s)) {
		struct iovec iov[2];
		int n = cm_session_read_iov(s, iov);
		size_t took = 0;
		for (int i = 0; i < n && took < piece && took < len; i++) {
			size_t k = iov[i].iov_len;
			if (k > piece - took)
				k = piece - took;
			if (k > len - took)
				k = len - took;
			memcpy(iov[i].iov_base, p + took, k);
			took += k;
			if (k < iov[i].iov_len)
				break;
		}
		if (took == 0)
			return;
		cm_session_input(s, took);
		drain(s);
		if (cm_session_held(s))
			return; /* nothing would free it here */
		p += took;
		len -= took;
	}
}

static size_t hello(uint8_t out[CM_HEADER_SIZE + CM_HELLO_PAYLOAD], int32_t rank)
{
	struct cm_header h = {.version = CM_PROTO_VERSION,
	                      .type = CM_T_HELLO,
	                      .src = rank,
	                      .dst = rank,
	                      .len = CM_HELLO_PAYLOAD};
	struct cm_hello hl = {.world_size = 2, .kind = CM_PEER_RANK};
	memcpy(hl.secret, SECRET, CM_SECRET_LEN);
	cm_header_encode(&h, out);
	cm_hello_encode(&hl, out + CM_HEADER_SIZE);
	return CM_HEADER_SIZE + CM_HELLO_PAYLOAD;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	unsigned mode = data[0];
	size_t piece = 1 + (((size_t)(mode >> 3) << 8 | data[1]) % 8192);
	data += 2;
	size -= 2;
	/* The world size cmrun gives its CMs: a HELLO may not set up state
	 * for 65536 ranks per run, which would make each run slow. */
	struct cm_core_config cfg = {.max_payload = 1 << 16,
	                             .world_size = 2,
	                             .log_mem = 1 << 16,
	                             .cut_through_min = (mode & 4) ? 64 : 0};
	memcpy(cfg.secret, SECRET, CM_SECRET_LEN);
	struct cm_core *core = cm_core_new(&cfg);
	if (core == NULL)
		return 0;
	struct cm_session *s = cm_session_new(core, NULL), *other = NULL;
	uint8_t h[CM_HEADER_SIZE + CM_HELLO_PAYLOAD];
	if (s && (mode & 1))
		feed(s, h, hello(h, 0), sizeof h);
	if (s && (mode & 2) && (other = cm_session_new(core, NULL)) != NULL)
		feed(other, h, hello(h, 1), sizeof h);
	if (s)
		feed(s, data, size, piece);
	if (other) {
		drain(other);
		cm_session_closed(other);
		cm_session_release(other);
	}
	if (s) {
		cm_session_closed(s);
		cm_session_release(s);
	}
	cm_core_free(core);
	return 0;
}
