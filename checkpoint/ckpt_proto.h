/* ckptserver wire protocol: frame layout, encode, decode, validate.
 *
 * The checkpoint protocol has its own small header (own magic and version
 * byte) instead of common/protocol.h frames: its frame types (upload, fetch,
 * data chunks) have nothing to do with ranks, tags or clocks, and the CM type
 * space is not ours to extend. Every frame is a 16-byte little-endian header
 * followed by `len` payload bytes:
 *
 *   off 0  u8[2] magic 'C' 'K'
 *   off 2  u8    version (CKPT_PROTO_VERSION)
 *   off 3  u8    type (enum ckpt_frame_type)
 *   off 4  u32   len (payload bytes)
 *   off 8  u64   arg (ERROR: error code; PUT_OK: committed number; DROP_OK:
 *                images removed; else 0)
 *
 * Nothing here does I/O. docs/checkpoint.md describes every frame; keep the
 * two in step. */
#ifndef CHANMEM_CKPT_PROTO_H
#define CHANMEM_CKPT_PROTO_H

#include <stddef.h>
#include <stdint.h>

#define CKPT_PROTO_VERSION 1
#define CKPT_HEADER_SIZE 16
#define CKPT_MAGIC0 'C'
#define CKPT_MAGIC1 'K'

/* Job ids: 1..CKPT_JOB_MAX characters of [A-Za-z0-9._-]. */
#define CKPT_JOB_MAX 64
/* Ranks are MPI ranks: 0 .. CKPT_RANK_MAX. */
#define CKPT_RANK_MAX (INT32_MAX - 1)
/* Largest data chunk in one PUT_DATA / GET_DATA frame. */
#define CKPT_CHUNK_MAX (1024u * 1024u)
/* The job secret (same convention as the channel memories). */
#define CKPT_SECRET_LEN 32
#define CKPT_ERROR_TEXT_MAX 256

enum ckpt_frame_type {
	CKPT_T_HELLO = 1,      /* client -> server: payload = 32-byte job secret */
	CKPT_T_HELLO_ACK = 2,  /* server -> client: authenticated */
	CKPT_T_PUT_BEGIN = 3,  /* client: start an upload of (job, rank, number) */
	CKPT_T_PUT_DATA = 4,   /* client: next 1..CKPT_CHUNK_MAX bytes of the image */
	CKPT_T_PUT_END = 5,    /* client: total size + checksum; asks for the commit */
	CKPT_T_PUT_OK = 6,     /* server: image committed (arg = number) */
	CKPT_T_GET_LATEST = 7, /* client: send the latest image of (job, rank) */
	CKPT_T_GET_BEGIN = 8,  /* server: number, size, checksum of the image that follows */
	CKPT_T_GET_DATA = 9,   /* server: next chunk of the image */
	CKPT_T_GET_END = 10,   /* server: image complete */
	CKPT_T_ERROR = 11,     /* server: refused (arg = enum ckpt_err, payload = text) */
	CKPT_T_DROP_JOB = 12,  /* client: remove every image of the job (payload = job id) */
	CKPT_T_DROP_OK = 13,   /* server: removed (arg = number of images) */
	CKPT_T_TYPE_MAX = 13
};

enum ckpt_err {
	CKPT_OK = 0,
	CKPT_E_TRUNCATED = 1, /* fewer bytes than the header or a fixed payload */
	CKPT_E_MAGIC = 2,     /* not a checkpoint frame */
	CKPT_E_VERSION = 3,   /* version byte is not CKPT_PROTO_VERSION */
	CKPT_E_TYPE = 4,      /* unknown frame type */
	CKPT_E_LENGTH = 5,    /* payload length wrong for the type */
	CKPT_E_FIELD = 6,     /* bad job id, rank out of range, nonzero reserved/arg */
	CKPT_E_AUTH = 7,      /* missing or wrong secret, or a frame before HELLO */
	CKPT_E_STATE = 8,     /* valid frame that is not allowed now */
	CKPT_E_TOO_BIG = 9,   /* upload larger than the server's --max-image */
	CKPT_E_CHECKSUM = 10, /* upload size or checksum differs from PUT_END */
	CKPT_E_NOTFOUND = 11, /* no committed image for (job, rank); connection stays */
	CKPT_E_STORAGE = 12,  /* the server could not write or read its storage */
	CKPT_E_CORRUPT = 13,  /* a stored image failed verification while served */
	CKPT_E_BUSY = 14,     /* too many connections */
	CKPT_E_MAX = 14,
	/* Client-side only, never on the wire: */
	CKPT_E_IO = 100,     /* connection failed or closed (errno kept by the client) */
	CKPT_E_PROTO = 101,  /* the server sent something this client does not accept */
	CKPT_E_ARG = 102,    /* the caller passed a bad argument */
	CKPT_E_ABORTED = 103 /* the caller's sink stopped a fetch */
};

struct ckpt_header {
	uint8_t version;
	uint8_t type;
	uint32_t len;
	uint64_t arg;
};

/* What PUT_BEGIN and GET_LATEST name. number is unused by GET_LATEST. */
struct ckpt_ref {
	char job[CKPT_JOB_MAX + 1];
	uint32_t rank;
	uint64_t number;
};

/* PUT_END (size, checksum) and GET_BEGIN (number, size, checksum). */
struct ckpt_summary {
	uint64_t number;
	uint64_t size;
	uint64_t checksum;
};
#define CKPT_PUT_END_PAYLOAD 16
#define CKPT_GET_BEGIN_PAYLOAD 24
#define CKPT_PUT_BEGIN_FIXED 16 /* + job bytes */
#define CKPT_GET_LATEST_FIXED 8 /* + job bytes */

/* version is forced to CKPT_PROTO_VERSION. */
void ckpt_header_encode(const struct ckpt_header *h, uint8_t out[CKPT_HEADER_SIZE]);
/* Reads and validates a header (magic, version, type, length and arg rules
 * per type). Never reads past buf+avail. */
enum ckpt_err ckpt_header_decode(const uint8_t *buf, size_t avail, struct ckpt_header *h);

/* 1 if job is a valid job id (length and characters), else 0. */
int ckpt_job_valid(const char *job, size_t len);

/* Payload codecs. Encoders return the payload length, or 0 if the input is
 * invalid (bad job id, rank out of range). out must hold
 * CKPT_PUT_BEGIN_FIXED + CKPT_JOB_MAX bytes. */
size_t ckpt_put_begin_encode(const struct ckpt_ref *ref, uint8_t *out);
enum ckpt_err ckpt_put_begin_decode(const uint8_t *buf, size_t len, struct ckpt_ref *ref);
size_t ckpt_get_latest_encode(const struct ckpt_ref *ref, uint8_t *out);
enum ckpt_err ckpt_get_latest_decode(const uint8_t *buf, size_t len, struct ckpt_ref *ref);
void ckpt_put_end_encode(const struct ckpt_summary *s, uint8_t out[CKPT_PUT_END_PAYLOAD]);
enum ckpt_err ckpt_put_end_decode(const uint8_t *buf, size_t len, struct ckpt_summary *s);
void ckpt_get_begin_encode(const struct ckpt_summary *s, uint8_t out[CKPT_GET_BEGIN_PAYLOAD]);
enum ckpt_err ckpt_get_begin_decode(const uint8_t *buf, size_t len, struct ckpt_summary *s);

/* Image checksum: 64-bit FNV-1a over the raw (uncompressed) bytes, fed in
 * pieces: start with CKPT_CHECKSUM_INIT, then h = ckpt_checksum(h, p, n). */
#define CKPT_CHECKSUM_INIT 0xcbf29ce484222325ull
uint64_t ckpt_checksum(uint64_t h, const void *data, size_t len);

const char *ckpt_err_str(int e);
const char *ckpt_type_str(unsigned type);

#endif
