#include "protocol.h"

#include <string.h>

void cm_header_encode(const struct cm_header *h, uint8_t out[CM_HEADER_SIZE])
{
	out[0] = CM_PROTO_VERSION;
	out[1] = h->type;
	cm_put_u16(out + 2, h->flags);
	cm_put_u32(out + 4, (uint32_t)h->src);
	cm_put_u32(out + 8, (uint32_t)h->dst);
	cm_put_u32(out + 12, (uint32_t)h->tag);
	cm_put_u32(out + 16, h->ctx);
	cm_put_u32(out + 20, h->len);
	cm_put_u64(out + 24, h->clock);
}

static int rank_ok(int32_t r, const struct cm_limits *lim)
{
	if (r < 0)
		return 0;
	return lim->world_size == 0 || (uint32_t)r < lim->world_size;
}

static int src_or_any_ok(int32_t r, const struct cm_limits *lim)
{
	return r == CM_ANY_SOURCE || rank_ok(r, lim);
}

/* Flags allowed per frame type; everything else must be zero. */
static uint16_t allowed_flags(unsigned type)
{
	switch (type) {
	case CM_T_MSG:
		return CM_F_SYNC | CM_F_ACK;
	case CM_T_PROBE:
		return CM_F_BLOCKING;
	case CM_T_PROBE_REPLY:
		return CM_F_FOUND;
	case CM_T_EVENT_ACK:
		return CM_F_REPLAY;
	case CM_T_HELLO:
		return CM_F_TAKEOVER;
	case CM_T_CANCEL_ACK:
		return CM_F_CANCELLED;
	default:
		return 0;
	}
}

enum cm_err cm_header_validate(const struct cm_header *h, const struct cm_limits *lim)
{
	if (h->version != CM_PROTO_VERSION)
		return CM_E_VERSION;
	if (h->type < 1 || h->type > CM_T_TYPE_MAX)
		return CM_E_TYPE;
	if (h->len > lim->max_payload)
		return CM_E_LENGTH;
	if (h->flags & ~allowed_flags(h->type))
		return CM_E_FLAGS;

	switch (h->type) {
	case CM_T_HELLO:
		if (h->len != CM_HELLO_PAYLOAD)
			return CM_E_LENGTH;
		if (!rank_ok(h->src, lim) || !rank_ok(h->dst, lim))
			return CM_E_RANK;
		if (h->tag != 0 || h->ctx != 0 || h->clock != 0)
			return CM_E_FIELD;
		return CM_OK;
	case CM_T_MSG:
	case CM_T_DELIVER:
		if (!rank_ok(h->src, lim) || !rank_ok(h->dst, lim))
			return CM_E_RANK;
		if (h->tag < 0)
			return CM_E_TAG;
		return CM_OK;
	case CM_T_RECV_REQ:
	case CM_T_PROBE:
		if (h->len != 0)
			return CM_E_LENGTH;
		if (!src_or_any_ok(h->src, lim) || !rank_ok(h->dst, lim))
			return CM_E_RANK;
		if (h->tag < 0 && h->tag != CM_ANY_TAG)
			return CM_E_TAG;
		return CM_OK;
	case CM_T_PROBE_REPLY:
		if (h->len != CM_PROBE_REPLY_PAYLOAD)
			return CM_E_LENGTH;
		if (!rank_ok(h->dst, lim))
			return CM_E_RANK;
		if (h->flags & CM_F_FOUND) {
			if (!rank_ok(h->src, lim))
				return CM_E_RANK;
			if (h->tag < 0)
				return CM_E_TAG;
		}
		return CM_OK;
	case CM_T_HELLO_ACK:
	case CM_T_LOGGED:
	case CM_T_SYNC_ACK:
	case CM_T_BYE:
	case CM_T_BYE_ACK:
		if (h->len != 0)
			return CM_E_LENGTH;
		if (!rank_ok(h->src, lim) || !rank_ok(h->dst, lim))
			return CM_E_RANK;
		if (h->type != CM_T_SYNC_ACK && (h->tag != 0 || h->ctx != 0))
			return CM_E_FIELD;
		return CM_OK;
	case CM_T_EVENT:
		if (h->len < 1 || h->len > CM_EVENT_PAYLOAD_MAX)
			return CM_E_LENGTH;
		if (!rank_ok(h->src, lim) || !rank_ok(h->dst, lim))
			return CM_E_RANK;
		if (h->tag < 0)
			return CM_E_TAG;
		if (h->ctx != 0)
			return CM_E_FIELD;
		return CM_OK;
	case CM_T_EVENT_ACK:
	case CM_T_CANCEL: /* the request id alone names what is cancelled */
	case CM_T_CANCEL_ACK:
		if (h->len != 0)
			return CM_E_LENGTH;
		if (!rank_ok(h->src, lim) || !rank_ok(h->dst, lim))
			return CM_E_RANK;
		if (h->tag != 0 || h->ctx != 0)
			return CM_E_FIELD;
		return CM_OK;
	case CM_T_TRIM:
		if (h->len != CM_TRIM_PAYLOAD)
			return CM_E_LENGTH;
		if (!rank_ok(h->src, lim) || !rank_ok(h->dst, lim))
			return CM_E_RANK;
		if (h->tag != 0 || h->ctx != 0)
			return CM_E_FIELD;
		return CM_OK;
	case CM_T_ERROR:
		if (h->len > CM_ERROR_TEXT_MAX)
			return CM_E_LENGTH;
		if (h->tag < 0 || h->tag > CM_E_MAX)
			return CM_E_FIELD;
		return CM_OK;
	}
	return CM_E_TYPE;
}

enum cm_err cm_header_decode(const uint8_t *buf, size_t avail, const struct cm_limits *lim,
                             struct cm_header *h)
{
	if (buf == NULL || avail < CM_HEADER_SIZE)
		return CM_E_TRUNCATED;
	h->version = buf[0];
	h->type = buf[1];
	h->flags = cm_get_u16(buf + 2);
	h->src = (int32_t)cm_get_u32(buf + 4);
	h->dst = (int32_t)cm_get_u32(buf + 8);
	h->tag = (int32_t)cm_get_u32(buf + 12);
	h->ctx = cm_get_u32(buf + 16);
	h->len = cm_get_u32(buf + 20);
	h->clock = cm_get_u64(buf + 24);
	return cm_header_validate(h, lim);
}

void cm_hello_encode(const struct cm_hello *hello, uint8_t out[CM_HELLO_PAYLOAD])
{
	cm_put_u32(out, hello->incarnation);
	cm_put_u32(out + 4, hello->world_size);
	cm_put_u32(out + 8, hello->kind);
	cm_put_u32(out + 12, 0);
	memcpy(out + 16, hello->secret, CM_SECRET_LEN);
}

enum cm_err cm_hello_decode(const uint8_t *buf, size_t avail, struct cm_hello *hello)
{
	if (buf == NULL || avail < CM_HELLO_PAYLOAD)
		return CM_E_TRUNCATED;
	hello->incarnation = cm_get_u32(buf);
	hello->world_size = cm_get_u32(buf + 4);
	hello->kind = cm_get_u32(buf + 8);
	hello->reserved = cm_get_u32(buf + 12);
	memcpy(hello->secret, buf + 16, CM_SECRET_LEN);
	if (hello->reserved != 0 || hello->kind > CM_PEER_ADMIN)
		return CM_E_FIELD;
	if (hello->world_size == 0)
		return CM_E_SIZE;
	return CM_OK;
}

int cm_secret_equal(const char *presented, const char *expected)
{
	/* Constant time over the fixed length so timing does not leak a prefix. */
	unsigned diff = 0;
	for (size_t i = 0; i < CM_SECRET_LEN; i++)
		diff |= (unsigned)(presented[i] ^ expected[i]);
	return diff == 0;
}

const char *cm_err_str(enum cm_err e)
{
	switch (e) {
	case CM_OK:
		return "ok";
	case CM_E_TRUNCATED:
		return "truncated frame";
	case CM_E_VERSION:
		return "unsupported protocol version";
	case CM_E_TYPE:
		return "unknown frame type";
	case CM_E_LENGTH:
		return "bad payload length";
	case CM_E_RANK:
		return "rank out of range";
	case CM_E_TAG:
		return "bad tag";
	case CM_E_FLAGS:
		return "undefined flag bits";
	case CM_E_FIELD:
		return "bad field value";
	case CM_E_AUTH:
		return "not authenticated";
	case CM_E_STATE:
		return "frame not allowed in this state";
	case CM_E_SIZE:
		return "world size mismatch";
	}
	return "unknown error";
}

const char *cm_type_str(unsigned type)
{
	static const char *const names[] = {
	    "?",     "HELLO",       "HELLO_ACK", "MSG",        "RECV_REQ", "DELIVER",
	    "PROBE", "PROBE_REPLY", "SYNC_ACK",  "BYE",        "BYE_ACK",  "ERROR",
	    "EVENT", "EVENT_ACK",   "CANCEL",    "CANCEL_ACK", "TRIM",     "LOGGED"};
	return type <= CM_T_TYPE_MAX ? names[type] : "?";
}
