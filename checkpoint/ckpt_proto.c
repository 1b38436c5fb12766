/* ckptserver wire protocol: see ckpt_proto.h and docs/checkpoint.md. */
#include "config.h"

#include "ckpt_proto.h"

#include "protocol.h"

#include <string.h>

/* Payload length bounds per frame type, indexed by type. */
static const struct {
	uint32_t min, max;
} len_rule[CKPT_T_TYPE_MAX + 1] = {
    [CKPT_T_HELLO] = {CKPT_SECRET_LEN, CKPT_SECRET_LEN},
    [CKPT_T_HELLO_ACK] = {0, 0},
    [CKPT_T_PUT_BEGIN] = {CKPT_PUT_BEGIN_FIXED + 1, CKPT_PUT_BEGIN_FIXED + CKPT_JOB_MAX},
    [CKPT_T_PUT_DATA] = {1, CKPT_CHUNK_MAX},
    [CKPT_T_PUT_END] = {CKPT_PUT_END_PAYLOAD, CKPT_PUT_END_PAYLOAD},
    [CKPT_T_PUT_OK] = {0, 0},
    [CKPT_T_GET_LATEST] = {CKPT_GET_LATEST_FIXED + 1, CKPT_GET_LATEST_FIXED + CKPT_JOB_MAX},
    [CKPT_T_GET_BEGIN] = {CKPT_GET_BEGIN_PAYLOAD, CKPT_GET_BEGIN_PAYLOAD},
    [CKPT_T_GET_DATA] = {1, CKPT_CHUNK_MAX},
    [CKPT_T_GET_END] = {0, 0},
    [CKPT_T_ERROR] = {0, CKPT_ERROR_TEXT_MAX},
    [CKPT_T_DROP_JOB] = {1, CKPT_JOB_MAX},
    [CKPT_T_DROP_OK] = {0, 0},
};

void ckpt_header_encode(const struct ckpt_header *h, uint8_t out[CKPT_HEADER_SIZE])
{
	out[0] = CKPT_MAGIC0;
	out[1] = CKPT_MAGIC1;
	out[2] = CKPT_PROTO_VERSION;
	out[3] = h->type;
	cm_put_u32(out + 4, h->len);
	cm_put_u64(out + 8, h->arg);
}

enum ckpt_err ckpt_header_decode(const uint8_t *buf, size_t avail, struct ckpt_header *h)
{
	if (avail < CKPT_HEADER_SIZE)
		return CKPT_E_TRUNCATED;
	if (buf[0] != CKPT_MAGIC0 || buf[1] != CKPT_MAGIC1)
		return CKPT_E_MAGIC;
	h->version = buf[2];
	h->type = buf[3];
	h->len = cm_get_u32(buf + 4);
	h->arg = cm_get_u64(buf + 8);
	if (h->version != CKPT_PROTO_VERSION)
		return CKPT_E_VERSION;
	if (h->type < 1 || h->type > CKPT_T_TYPE_MAX)
		return CKPT_E_TYPE;
	if (h->len < len_rule[h->type].min || h->len > len_rule[h->type].max)
		return CKPT_E_LENGTH;
	switch (h->type) {
	case CKPT_T_ERROR:
		if (h->arg < 1 || h->arg > CKPT_E_MAX)
			return CKPT_E_FIELD;
		break;
	case CKPT_T_PUT_OK:
	case CKPT_T_DROP_OK:
		break;
	default:
		if (h->arg != 0)
			return CKPT_E_FIELD;
	}
	return CKPT_OK;
}

int ckpt_job_valid(const char *job, size_t len)
{
	if (len < 1 || len > CKPT_JOB_MAX)
		return 0;
	for (size_t i = 0; i < len; i++) {
		char c = job[i];
		int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		         (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
		if (!ok)
			return 0;
	}
	return 1;
}

/* Shared layout: rank u32, reserved u32 (0), [number u64], job bytes. */
static size_t ref_encode(const struct ckpt_ref *ref, uint8_t *out, int with_number)
{
	size_t jlen = strnlen(ref->job, CKPT_JOB_MAX + 1);
	if (!ckpt_job_valid(ref->job, jlen) || ref->rank > CKPT_RANK_MAX)
		return 0;
	size_t off = 0;
	cm_put_u32(out, ref->rank);
	cm_put_u32(out + 4, 0);
	off = 8;
	if (with_number) {
		cm_put_u64(out + 8, ref->number);
		off = 16;
	}
	memcpy(out + off, ref->job, jlen);
	return off + jlen;
}

static enum ckpt_err ref_decode(const uint8_t *buf, size_t len, struct ckpt_ref *ref,
                                int with_number)
{
	size_t fixed = with_number ? CKPT_PUT_BEGIN_FIXED : CKPT_GET_LATEST_FIXED;
	if (len < fixed + 1)
		return CKPT_E_TRUNCATED;
	if (len > fixed + CKPT_JOB_MAX)
		return CKPT_E_LENGTH;
	ref->rank = cm_get_u32(buf);
	if (cm_get_u32(buf + 4) != 0 || ref->rank > CKPT_RANK_MAX)
		return CKPT_E_FIELD;
	ref->number = with_number ? cm_get_u64(buf + 8) : 0;
	size_t jlen = len - fixed;
	if (!ckpt_job_valid((const char *)buf + fixed, jlen))
		return CKPT_E_FIELD;
	memcpy(ref->job, buf + fixed, jlen);
	ref->job[jlen] = '\0';
	return CKPT_OK;
}

size_t ckpt_put_begin_encode(const struct ckpt_ref *ref, uint8_t *out)
{
	return ref_encode(ref, out, 1);
}

enum ckpt_err ckpt_put_begin_decode(const uint8_t *buf, size_t len, struct ckpt_ref *ref)
{
	return ref_decode(buf, len, ref, 1);
}

size_t ckpt_get_latest_encode(const struct ckpt_ref *ref, uint8_t *out)
{
	return ref_encode(ref, out, 0);
}

enum ckpt_err ckpt_get_latest_decode(const uint8_t *buf, size_t len, struct ckpt_ref *ref)
{
	return ref_decode(buf, len, ref, 0);
}

void ckpt_put_end_encode(const struct ckpt_summary *s, uint8_t out[CKPT_PUT_END_PAYLOAD])
{
	cm_put_u64(out, s->size);
	cm_put_u64(out + 8, s->checksum);
}

enum ckpt_err ckpt_put_end_decode(const uint8_t *buf, size_t len, struct ckpt_summary *s)
{
	if (len < CKPT_PUT_END_PAYLOAD)
		return CKPT_E_TRUNCATED;
	if (len > CKPT_PUT_END_PAYLOAD)
		return CKPT_E_LENGTH;
	s->number = 0;
	s->size = cm_get_u64(buf);
	s->checksum = cm_get_u64(buf + 8);
	return CKPT_OK;
}

void ckpt_get_begin_encode(const struct ckpt_summary *s, uint8_t out[CKPT_GET_BEGIN_PAYLOAD])
{
	cm_put_u64(out, s->number);
	cm_put_u64(out + 8, s->size);
	cm_put_u64(out + 16, s->checksum);
}

enum ckpt_err ckpt_get_begin_decode(const uint8_t *buf, size_t len, struct ckpt_summary *s)
{
	if (len < CKPT_GET_BEGIN_PAYLOAD)
		return CKPT_E_TRUNCATED;
	if (len > CKPT_GET_BEGIN_PAYLOAD)
		return CKPT_E_LENGTH;
	s->number = cm_get_u64(buf);
	s->size = cm_get_u64(buf + 8);
	s->checksum = cm_get_u64(buf + 16);
	return CKPT_OK;
}

uint64_t ckpt_checksum(uint64_t h, const void *data, size_t len)
{
	const uint8_t *p = data;
	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

const char *ckpt_err_str(int e)
{
	switch (e) {
	case CKPT_OK:
		return "ok";
	case CKPT_E_TRUNCATED:
		return "truncated frame";
	case CKPT_E_MAGIC:
		return "not a checkpoint protocol frame";
	case CKPT_E_VERSION:
		return "bad protocol version";
	case CKPT_E_TYPE:
		return "unknown frame type";
	case CKPT_E_LENGTH:
		return "bad payload length";
	case CKPT_E_FIELD:
		return "bad field value";
	case CKPT_E_AUTH:
		return "not authenticated";
	case CKPT_E_STATE:
		return "frame not allowed now";
	case CKPT_E_TOO_BIG:
		return "image larger than the server accepts";
	case CKPT_E_CHECKSUM:
		return "image size or checksum mismatch";
	case CKPT_E_NOTFOUND:
		return "no committed image";
	case CKPT_E_STORAGE:
		return "server storage failure";
	case CKPT_E_CORRUPT:
		return "stored image is corrupt";
	case CKPT_E_BUSY:
		return "server busy";
	case CKPT_E_IO:
		return "connection failure";
	case CKPT_E_PROTO:
		return "unexpected reply from the server";
	case CKPT_E_ARG:
		return "bad argument";
	case CKPT_E_ABORTED:
		return "fetch stopped by the caller";
	default:
		return "unknown error";
	}
}

const char *ckpt_type_str(unsigned type)
{
	static const char *const names[] = {
	    "?",          "HELLO",     "HELLO_ACK", "PUT_BEGIN", "PUT_DATA", "PUT_END",  "PUT_OK",
	    "GET_LATEST", "GET_BEGIN", "GET_DATA",  "GET_END",   "ERROR",    "DROP_JOB", "DROP_OK",
	};
	return type <= CKPT_T_TYPE_MAX ? names[type] : "?";
}
