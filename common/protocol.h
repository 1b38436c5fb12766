/* chanmem wire protocol: frame layout, encode, decode, validate.
 *
 * Every frame is a fixed 32-byte little-endian header followed by `len`
 * payload bytes. Nothing here does I/O: callers hand in buffers and get a
 * precise error code for every malformed case. docs/protocol.md is the
 * normative description; keep the two in step. */
#ifndef CHANMEM_PROTOCOL_H
#define CHANMEM_PROTOCOL_H

#include <stddef.h>
#include <stdint.h>

#define CM_PROTO_VERSION 1
#define CM_HEADER_SIZE 32

/* Wildcards as they travel on the wire (same values as MPI_ANY_*). */
#define CM_ANY_SOURCE (-1)
#define CM_ANY_TAG (-1)

/* The largest payload a frame carries: what its 32-bit len field holds
 * (4 GiB - 1). One MPI message is one frame, so this is also the largest
 * message. */
#define CM_MAX_PAYLOAD UINT32_MAX
/* A server's ceiling unless --max-message lowers it: the wire's own. */
#define CM_DEFAULT_MAX_PAYLOAD CM_MAX_PAYLOAD

/* Job secret: 32 printable characters (hex of 16 random bytes). */
#define CM_SECRET_LEN 32

enum cm_frame_type {
	CM_T_HELLO = 1,       /* any peer -> server/peer: authenticate, say who I am */
	CM_T_HELLO_ACK = 2,   /* server/peer -> peer: accepted */
	CM_T_MSG = 3,         /* application message from src to dst */
	CM_T_RECV_REQ = 4,    /* rank -> home CM: a posted receive (src/tag may be wildcards) */
	CM_T_DELIVER = 5,     /* home CM -> rank: message matched to receive request `clock` */
	CM_T_PROBE = 6,       /* rank -> home CM: (i)probe for src/tag/ctx, id in `clock` */
	CM_T_PROBE_REPLY = 7, /* home CM -> rank: probe outcome for probe `clock` */
	CM_T_SYNC_ACK = 8,    /* receiver side -> sender: synchronous send `clock` was matched */
	CM_T_BYE = 9,         /* rank -> server: finished; everything sent before is processed */
	CM_T_BYE_ACK = 10,    /* server -> rank: all frames before BYE were processed */
	CM_T_ERROR = 11,      /* server -> peer: the frame was refused; connection closes */
	/* Fault tolerance: nondeterministic events (MPI_Wtime values, ...). */
	CM_T_EVENT = 12,     /* rank -> home CM: log event `clock` (kind in tag, value in payload);
	                        home CM -> rank: a logged event replayed to a new incarnation */
	CM_T_EVENT_ACK = 13, /* rank -> home CM: tell me how many of my events you hold (with
	                        CM_F_REPLAY: send them all first); home CM -> rank: `clock` =
	                        number of the rank's events logged */
	/* Cancelling a posted receive (MPI_Cancel), decided and recorded at the home CM. */
	CM_T_CANCEL = 14,     /* rank -> home CM: withdraw receive request `clock` */
	CM_T_CANCEL_ACK = 15, /* home CM -> rank: outcome for request `clock`: CM_F_CANCELLED
	                         (removed, nothing will be delivered for it) or not (too late:
	                         its DELIVER was sent before this answer) */
	/* Garbage collection after an application checkpoint committed. */
	CM_T_TRIM = 16, /* rank -> home CM: `clock` = first request id the rank's committed
	                   checkpoint image does not cover; payload: u64 LE first event index
	                   it does not cover. What the image consumed may be dropped. */
	/* Surviving a channel memory's death. */
	CM_T_LOGGED = 17, /* CM -> rank: every MSG of the rank through this CM with a clock below
	                     `clock` is logged (the answer to CM_F_ACK) */
	CM_T_MIRROR = 18, /* CM -> its standby: bytes of the CM's journal files, to write at
	                     `clock` (the offset) in the records file, or with CM_F_DATA in
	                     the data file; CM_F_END (no payload): the CM ended cleanly */
	CM_T_MIRROR_ACK = 19, /* standby -> CM: `clock` = MIRROR payload bytes written so far */
	CM_T_STANDBY = 20,    /* CM -> rank: payload = the address of the CM's standby, which
	                         serves as this CM if it dies (after HELLO_ACK) */
	/* Pushed messages (collective contexts): delivered without a RECV_REQ. */
	CM_T_PUSH_START = 21, /* rank -> home CM: push my messages to this connection from
	                         push number `clock` on */
	CM_T_PUSH_ACK = 22,   /* rank -> home CM: `clock` more pushed bytes may be sent */
	CM_T_TYPE_MAX = 22
};

/* Header flag bits. Bits not defined for a frame type must be zero. */
enum cm_frame_flags {
	CM_F_SYNC = 1u << 0,      /* MSG: synchronous send, sender wants SYNC_ACK when matched */
	CM_F_BLOCKING = 1u << 1,  /* PROBE: reply only when a match exists (MPI_Probe) */
	CM_F_FOUND = 1u << 2,     /* PROBE_REPLY: a matching message exists */
	CM_F_REPLAY = 1u << 3,    /* EVENT_ACK request: replay the logged events before the ack */
	CM_F_TAKEOVER = 1u << 4,  /* HELLO: replace the older incarnation's connection now, without
	                             waiting for it to close (its unread frames are lost) */
	CM_F_CANCELLED = 1u << 5, /* CANCEL_ACK: the receive request was withdrawn */
	CM_F_ACK = 1u << 6,       /* MSG: answer LOGGED once this message is logged */
	CM_F_DATA = 1u << 7,      /* MIRROR: the bytes go to the data file */
	CM_F_END = 1u << 8,       /* MIRROR: the CM ended cleanly; the standby is not needed */
	CM_F_WHOLE = 1u << 9,     /* MIRROR: everything the journal held is copied (1-byte
	                             payload): from here the copy may take over */
	CM_F_PUSH = 1u << 10      /* MSG: push it to its receiver, which matches it itself;
	                             DELIVER: a pushed message, `clock` = its push number */
};

/* What a HELLO says the connecting party is. */
enum cm_peer_kind {
	CM_PEER_RANK = 0,   /* an MPI rank connecting to a channel memory */
	CM_PEER_DIRECT = 1, /* an MPI rank connecting to another rank (direct transport) */
	CM_PEER_ADMIN = 2,  /* a dispatcher or tool (status queries) */
	CM_PEER_MIRROR = 3  /* a channel memory connecting to its standby (cmserver --standby) */
};

struct cm_header {
	uint8_t version;
	uint8_t type;
	uint16_t flags;
	int32_t src;    /* sender rank, or CM_ANY_SOURCE in RECV_REQ/PROBE */
	int32_t dst;    /* receiver rank */
	int32_t tag;    /* MPI tag (>= 0), CM_ANY_TAG in RECV_REQ/PROBE, error code in ERROR */
	uint32_t ctx;   /* communicator context id */
	uint32_t len;   /* payload bytes that follow the header */
	uint64_t clock; /* MSG: sender clock; RECV_REQ, DELIVER, PROBE(_REPLY), CANCEL(_ACK):
	                   request id; DELIVER with CM_F_PUSH, PUSH_START: push number;
	                   SYNC_ACK: clock of the acknowledged MSG */
};

/* HELLO payload, fixed size. */
#define CM_HELLO_PAYLOAD 48
struct cm_hello {
	uint32_t incarnation; /* 0 for the first run of a rank, +1 per restart */
	uint32_t world_size;  /* number of ranks in the job */
	uint32_t kind;        /* enum cm_peer_kind */
	uint32_t reserved;    /* must be 0 */
	char secret[CM_SECRET_LEN];
};

/* PROBE_REPLY payload: the matched message's payload length. */
#define CM_PROBE_REPLY_PAYLOAD 8

/* EVENT payload: the event's value, 1 to CM_EVENT_PAYLOAD_MAX bytes. */
#define CM_EVENT_PAYLOAD_MAX 8
/* TRIM payload: the u64 first event index not covered, then optionally
 * the u64 first push number not covered. */
#define CM_TRIM_PAYLOAD 8
#define CM_TRIM_PAYLOAD_MAX 16
/* Pushed bytes (payload and header) a CM may have sent to a rank beyond
 * what the rank acknowledged with PUSH_ACK (one message always may). */
#define CM_PUSH_WINDOW ((uint64_t)1 << 20)
/* STANDBY payload: an address as text ("host:port"), at most this long. */
#define CM_STANDBY_ADDR_MAX 255

/* Longest ERROR payload text. */
#define CM_ERROR_TEXT_MAX 256

enum cm_err {
	CM_OK = 0,
	CM_E_TRUNCATED = 1, /* fewer bytes than a header (or a fixed payload) */
	CM_E_VERSION = 2,   /* version byte is not CM_PROTO_VERSION */
	CM_E_TYPE = 3,      /* unknown frame type */
	CM_E_LENGTH = 4,    /* payload length over the maximum, or wrong for a fixed-size type */
	CM_E_RANK = 5,      /* src or dst out of range for the job */
	CM_E_TAG = 6,       /* negative tag where wildcards are not allowed */
	CM_E_FLAGS = 7,     /* flag bits not defined for this frame type */
	CM_E_FIELD = 8,     /* a field that must be zero or fixed is not */
	CM_E_AUTH = 9,      /* missing or wrong job secret, or a frame before HELLO */
	CM_E_STATE = 10,    /* a valid frame the receiver cannot accept now (e.g. second HELLO) */
	CM_E_SIZE = 11,     /* HELLO world size disagrees with the job */
	CM_E_MAX = 11
};

/* Limits a decoder validates against. world_size 0 means "not yet known":
 * ranks are then only checked to be >= 0 (or wildcards where allowed). */
struct cm_limits {
	uint32_t world_size;
	uint32_t max_payload;
};

/* Writes h into out[0..CM_HEADER_SIZE) in wire order. version is forced to
 * CM_PROTO_VERSION. */
void cm_header_encode(const struct cm_header *h, uint8_t out[CM_HEADER_SIZE]);

/* Reads a header from buf (avail bytes) and validates it against lim.
 * Never reads past buf+avail. On error *h may be partially filled. */
enum cm_err cm_header_decode(const uint8_t *buf, size_t avail, const struct cm_limits *lim,
                             struct cm_header *h);

/* Field checks of an already decoded header (decode calls it). */
enum cm_err cm_header_validate(const struct cm_header *h, const struct cm_limits *lim);

void cm_hello_encode(const struct cm_hello *hello, uint8_t out[CM_HELLO_PAYLOAD]);
enum cm_err cm_hello_decode(const uint8_t *buf, size_t avail, struct cm_hello *hello);

/* Constant-time comparison of a presented secret with the expected one. */
int cm_secret_equal(const char *presented, const char *expected);

/* Short human text for an error code ("bad protocol version", ...). */
const char *cm_err_str(enum cm_err e);
/* Name of a frame type ("MSG"), or "?" */
const char *cm_type_str(unsigned type);

/* Little-endian helpers shared by every encoder. */
static inline void cm_put_u16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}
static inline void cm_put_u32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}
static inline void cm_put_u64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint16_t cm_get_u16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}
static inline uint32_t cm_get_u32(const uint8_t *p)
{
	return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
	       ((uint32_t)p[3] << 24);
}
static inline uint64_t cm_get_u64(const uint8_t *p)
{
	return (uint64_t)cm_get_u32(p) | ((uint64_t)cm_get_u32(p + 4) << 32);
}

#endif
