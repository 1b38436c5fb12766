/* Helpers shared by the fault-tolerance tests of the protocol core
 * (test_core_ft.c, test_core_ft_log.c): sessions closed as a rank dies, and
 * nondeterministic events (MPI_Wtime values, ...) sent, asked for and
 * expected back. */
#ifndef CHANMEM_TEST_CORE_FT_H
#define CHANMEM_TEST_CORE_FT_H

#include "test_core_harness.h"

#define EV_KIND_TEST 1 /* any kind: the core does not interpret it */

static inline void close_sess(struct cm_session *s)
{
	cm_session_closed(s);
}

/* Event `idx` of rank with an 8-byte value, fed in pieces of `chunk`. */
static inline void event(struct cm_session *s, int rank, uint32_t kind, uint64_t idx,
                         uint64_t value, size_t chunk)
{
	uint8_t v[8];
	cm_put_u64(v, value);
	struct bytes b = {0};
	frame_add(&b, CM_T_EVENT, 0, rank, rank, (int32_t)kind, 0, idx, v, sizeof v);
	feed_bytes(s, &b, chunk);
	bytes_free(&b);
}

static inline void event_ack_req(struct cm_session *s, int rank, int replay_log)
{
	struct bytes b = {0};
	frame_add(&b, CM_T_EVENT_ACK, replay_log ? CM_F_REPLAY : 0, rank, rank, 0, 0, 0, NULL, 0);
	feed_bytes(s, &b, SIZE_MAX);
	bytes_free(&b);
}

/* The CM's answer to an EVENT_ACK request: n EVENTs with values[i], then
 * EVENT_ACK(count). */
static inline void expect_events(struct cm_session *s, int rank, const uint64_t *values, size_t n,
                                 uint64_t count)
{
	struct rframe fr[64];
	size_t got = take(s, fr, 64);
	ck_assert_uint_eq(got, n + 1);
	for (size_t i = 0; i < n; i++) {
		ck_assert_int_eq(fr[i].h.type, CM_T_EVENT);
		ck_assert_int_eq(fr[i].h.src, rank);
		ck_assert_int_eq(fr[i].h.dst, rank);
		ck_assert_int_eq(fr[i].h.tag, EV_KIND_TEST);
		ck_assert_uint_eq(fr[i].h.clock, i);
		ck_assert_uint_eq(fr[i].h.len, 8);
		ck_assert(cm_get_u64(fr[i].payload) == values[i]);
	}
	ck_assert_int_eq(fr[n].h.type, CM_T_EVENT_ACK);
	ck_assert_int_eq(fr[n].h.dst, rank);
	ck_assert_uint_eq(fr[n].h.clock, count);
}

#endif
