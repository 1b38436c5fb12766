#include "protocol.h"

#include <stdbool.h>
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

/* What a rank field must hold. */
enum rank_rule {
	RANK_FREE,     /* anything (ERROR frames name no rank) */
	RANK_VALID,    /* a rank of the job */
	RANK_OR_ANY,   /* a rank or CM_ANY_SOURCE */
	RANK_IF_FOUND, /* a rank when CM_F_FOUND is set, else anything */
};
/* What the tag must hold, and the error when it does not. */
enum tag_rule {
	TAG_FREE,
	TAG_USER,        /* >= 0, else CM_E_TAG */
	TAG_USER_OR_ANY, /* >= 0 or CM_ANY_TAG, else CM_E_TAG */
	TAG_USER_IF_FOUND,
	TAG_ZERO,       /* 0, else CM_E_FIELD */
	TAG_ERROR_CODE, /* an enum cm_err, else CM_E_FIELD */
};
enum { ZERO_CTX = 1, ZERO_CLOCK = 2, ZERO_RANKS = 4 }; /* fields that must be 0 (CM_E_FIELD) */
#define LEN_ANY UINT32_MAX                             /* bounded by cm_limits.max_payload alone */

/* A header's checks per frame type, in this order after the common ones:
 * payload length, ranks, tag, zero fields. */
static const struct frame_rule {
	uint32_t len_min, len_max;
	uint16_t flags; /* allowed; every other flag must be 0 */
	uint8_t src, dst, tag, zero;
} frame_rule[CM_T_TYPE_MAX + 1] = {
    [CM_T_HELLO] = {CM_HELLO_PAYLOAD, CM_HELLO_PAYLOAD, CM_F_TAKEOVER, RANK_VALID, RANK_VALID,
                    TAG_ZERO, ZERO_CTX | ZERO_CLOCK},
    [CM_T_HELLO_ACK] = {0, 0, 0, RANK_VALID, RANK_VALID, TAG_ZERO, ZERO_CTX},
    [CM_T_MSG] = {0, LEN_ANY, CM_F_SYNC | CM_F_ACK | CM_F_PUSH, RANK_VALID, RANK_VALID, TAG_USER,
                  0},
    [CM_T_RECV_REQ] = {0, 0, 0, RANK_OR_ANY, RANK_VALID, TAG_USER_OR_ANY, 0},
    [CM_T_DELIVER] = {0, LEN_ANY, CM_F_PUSH, RANK_VALID, RANK_VALID, TAG_USER, 0},
    [CM_T_PROBE] = {0, 0, CM_F_BLOCKING, RANK_OR_ANY, RANK_VALID, TAG_USER_OR_ANY, 0},
    [CM_T_PROBE_REPLY] = {CM_PROBE_REPLY_PAYLOAD, CM_PROBE_REPLY_PAYLOAD, CM_F_FOUND, RANK_IF_FOUND,
                          RANK_VALID, TAG_USER_IF_FOUND, 0},
    [CM_T_LOGGED] = {0, 0, 0, RANK_VALID, RANK_VALID, TAG_ZERO, ZERO_CTX},
    [CM_T_SYNC_ACK] = {0, 0, 0, RANK_VALID, RANK_VALID, TAG_FREE, 0},
    [CM_T_BYE] = {0, 0, 0, RANK_VALID, RANK_VALID, TAG_ZERO, ZERO_CTX},
    [CM_T_BYE_ACK] = {0, 0, 0, RANK_VALID, RANK_VALID, TAG_ZERO, ZERO_CTX},
    [CM_T_ERROR] = {0, CM_ERROR_TEXT_MAX, 0, RANK_FREE, RANK_FREE, TAG_ERROR_CODE, 0},
    [CM_T_EVENT] = {1, CM_EVENT_PAYLOAD_MAX, 0, RANK_VALID, RANK_VALID, TAG_USER, ZERO_CTX},
    [CM_T_EVENT_ACK] = {0, 0, CM_F_REPLAY, RANK_VALID, RANK_VALID, TAG_ZERO, ZERO_CTX},
    /* The request id alone names what is cancelled. */
    [CM_T_CANCEL] = {0, 0, 0, RANK_VALID, RANK_VALID, TAG_ZERO, ZERO_CTX},
    [CM_T_CANCEL_ACK] = {0, 0, CM_F_CANCELLED, RANK_VALID, RANK_VALID, TAG_ZERO, ZERO_CTX},
    [CM_T_TRIM] = {CM_TRIM_PAYLOAD, CM_TRIM_PAYLOAD_MAX, 0, RANK_VALID, RANK_VALID, TAG_ZERO,
                   ZERO_CTX},
    /* Between two channel memories: no rank is named. */
    [CM_T_MIRROR] = {0, LEN_ANY, CM_F_DATA | CM_F_END | CM_F_WHOLE, RANK_FREE, RANK_FREE, TAG_ZERO,
                     ZERO_CTX | ZERO_RANKS},
    [CM_T_MIRROR_ACK] = {0, 0, 0, RANK_FREE, RANK_FREE, TAG_ZERO, ZERO_CTX | ZERO_RANKS},
    [CM_T_STANDBY] = {1, CM_STANDBY_ADDR_MAX, 0, RANK_VALID, RANK_VALID, TAG_ZERO,
                      ZERO_CTX | ZERO_CLOCK},
    [CM_T_PUSH_START] = {0, 0, 0, RANK_VALID, RANK_VALID, TAG_ZERO, ZERO_CTX},
    [CM_T_PUSH_ACK] = {0, 0, 0, RANK_VALID, RANK_VALID, TAG_ZERO, ZERO_CTX},
};

static int rank_follows(enum rank_rule rule, int32_t r, bool found, const struct cm_limits *lim)
{
	switch (rule) {
	case RANK_VALID:
		return rank_ok(r, lim);
	case RANK_OR_ANY:
		return r == CM_ANY_SOURCE || rank_ok(r, lim);
	case RANK_IF_FOUND:
		return !found || rank_ok(r, lim);
	default:
		return 1;
	}
}

/* CM_OK, CM_E_TAG or CM_E_FIELD. */
static enum cm_err tag_follows(enum tag_rule rule, int32_t tag, bool found)
{
	switch (rule) {
	case TAG_USER:
		return tag >= 0 ? CM_OK : CM_E_TAG;
	case TAG_USER_OR_ANY:
		return tag >= 0 || tag == CM_ANY_TAG ? CM_OK : CM_E_TAG;
	case TAG_USER_IF_FOUND:
		return !found || tag >= 0 ? CM_OK : CM_E_TAG;
	case TAG_ZERO:
		return tag == 0 ? CM_OK : CM_E_FIELD;
	case TAG_ERROR_CODE:
		return tag >= 0 && tag <= CM_E_MAX ? CM_OK : CM_E_FIELD;
	default:
		return CM_OK;
	}
}

enum cm_err cm_header_validate(const struct cm_header *h, const struct cm_limits *lim)
{
	if (h->version != CM_PROTO_VERSION)
		return CM_E_VERSION;
	if (h->type < 1 || h->type > CM_T_TYPE_MAX)
		return CM_E_TYPE;
	const struct frame_rule *rule = &frame_rule[h->type];
	if (h->len > lim->max_payload)
		return CM_E_LENGTH;
	if (h->flags & ~rule->flags)
		return CM_E_FLAGS;
	if (h->len < rule->len_min || h->len > rule->len_max)
		return CM_E_LENGTH;
	if (h->type == CM_T_TRIM && h->len != CM_TRIM_PAYLOAD && h->len != CM_TRIM_PAYLOAD_MAX)
		return CM_E_LENGTH; /* one u64, or two */
	bool found = (h->flags & CM_F_FOUND) != 0;
	if (!rank_follows(rule->dst, h->dst, found, lim) ||
	    !rank_follows(rule->src, h->src, found, lim))
		return CM_E_RANK;
	enum cm_err tag = tag_follows(rule->tag, h->tag, found);
	if (tag != CM_OK)
		return tag;
	if (((rule->zero & ZERO_CTX) && h->ctx != 0) ||
	    ((rule->zero & ZERO_CLOCK) && h->clock != 0) ||
	    ((rule->zero & ZERO_RANKS) && (h->src != 0 || h->dst != 0)))
		return CM_E_FIELD;
	return CM_OK;
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
	if (hello->reserved != 0 || hello->kind > CM_PEER_MIRROR)
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
	    "?",      "HELLO",       "HELLO_ACK", "MSG",        "RECV_REQ", "DELIVER",
	    "PROBE",  "PROBE_REPLY", "SYNC_ACK",  "BYE",        "BYE_ACK",  "ERROR",
	    "EVENT",  "EVENT_ACK",   "CANCEL",    "CANCEL_ACK", "TRIM",     "LOGGED",
	    "MIRROR", "MIRROR_ACK",  "STANDBY",   "PUSH_START", "PUSH_ACK"};
	return type <= CM_T_TYPE_MAX ? names[type] : "?";
}
