/* conn.c's account of its output queue (queued_bytes, and the owner's sum
 * over its connections that a transport bounds by CM_QUEUE_MAX): small
 * sends copied into a queue the peer does not read count until the kernel
 * has taken them, on every connection summed into one total, and the
 * total comes back to zero once everything is written, when a
 * connection is freed with frames still queued, and across a broken and
 * re-attached retaining connection (its kept messages are CM_RETAIN_MAX's,
 * not the queue's, until they are queued again). */
#include <config.h>

#include <check.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn.h"

#define SMALL 64
#define FRAMES 4000

static unsigned sent_tokens;

static enum cm_err no_hello(struct cm_conn *c, const struct cm_header *h,
                            const struct cm_hello *hello, char *text, size_t textlen)
{
	return CM_E_STATE;
}

static int no_header(struct cm_conn *c, const struct cm_header *h, struct cm_sink *sink)
{
	return cm_conn_fail(c, "unexpected frame");
}

static int no_frame(struct cm_conn *c, const struct cm_header *h, const struct cm_sink *sink)
{
	return cm_conn_fail(c, "unexpected frame");
}

static void count_sent(struct cm_conn *c, void *token)
{
	sent_tokens++;
}

static const struct cm_conn_ops ops = {
    .on_hello = no_hello, .on_header = no_header, .on_frame = no_frame, .on_sent = count_sent};
static const struct cm_limits lim = {.world_size = 2, .max_payload = CM_MAX_PAYLOAD};

/* A connection whose peer end (*peer, non-blocking) nobody reads yet, with
 * a small send buffer so that most frames stay queued. */
static struct cm_conn *open_conn(int *peer, size_t *total)
{
	int sv[2];
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	ck_assert_int_eq(fcntl(sv[1], F_SETFL, O_NONBLOCK), 0);
	struct cm_conn *c = cm_conn_new(sv[0], CM_CONN_READY, 0, "test", &ops, NULL, &lim);
	ck_assert_ptr_nonnull(c);
	/* After cm_conn_new, which widens a unix socket's buffer. */
	int small = 4096;
	ck_assert_int_eq(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small), 0);
	cm_conn_count_into(c, total);
	*peer = sv[1];
	return c;
}

/* FRAMES small MSGs, each completing at once (written, or copied). */
static void send_small(struct cm_conn *c, struct cm_req *reqs)
{
	uint8_t payload[SMALL];
	memset(payload, 0x5a, sizeof payload);
	unsigned before = sent_tokens;
	for (unsigned i = 0; i < FRAMES; i++) {
		struct cm_header h = {.type = CM_T_MSG, .src = 0, .dst = 1, .clock = i};
		ck_assert_int_eq(cm_conn_send(c, &h, payload, sizeof payload, &reqs[i], 1), 0);
	}
	ck_assert_uint_eq(sent_tokens - before, FRAMES);
}

/* Reads what the peer end holds and lets c write more, until c's queue is
 * empty. */
static void drain(struct cm_conn *c, int peer)
{
	static uint8_t sink[1 << 16];
	while (cm_conn_pending_output(c)) {
		while (read(peer, sink, sizeof sink) > 0)
			;
		ck_assert_int_eq(cm_conn_flush(c), 0);
	}
}

START_TEST(copies_count_until_written)
{
	static struct cm_req reqs[2][FRAMES];
	size_t total = 0;
	int peer[2];
	struct cm_conn *c[2] = {open_conn(&peer[0], &total), open_conn(&peer[1], &total)};
	send_small(c[0], reqs[0]);
	size_t first = total;
	ck_assert_uint_eq(c[0]->queued_bytes, first);
	/* Far more than the socket took: most frames wait, each at least
	 * its payload and its header's worth. */
	ck_assert_uint_gt(first, FRAMES / 2 * (SMALL + CM_HEADER_SIZE));
	send_small(c[1], reqs[1]);
	ck_assert_uint_eq(total, c[0]->queued_bytes + c[1]->queued_bytes);
	ck_assert_uint_gt(c[1]->queued_bytes, 0);

	drain(c[0], peer[0]);
	ck_assert_uint_eq(c[0]->queued_bytes, 0);
	ck_assert_uint_eq(total, c[1]->queued_bytes);
	/* Freed with frames still queued: they leave the owner's sum too. */
	cm_conn_free(c[1]);
	ck_assert_uint_eq(total, 0);
	cm_conn_free(c[0]);
	close(peer[0]);
	close(peer[1]);
}
END_TEST

START_TEST(kept_messages_count_again_when_requeued)
{
	static struct cm_req reqs[FRAMES];
	size_t total = 0;
	int peer;
	struct cm_conn *c = open_conn(&peer, &total);
	cm_conn_retain(c);
	send_small(c, reqs);
	ck_assert_uint_gt(total, 0);

	/* The connection breaks: its queued MSGs join the kept ones. */
	cm_conn_break(c);
	close(peer);
	ck_assert_uint_eq(total, 0);
	ck_assert_uint_eq(c->queued_bytes, 0);
	ck_assert_uint_gt(c->kept_bytes, 0);

	int sv[2];
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	ck_assert_int_eq(fcntl(sv[1], F_SETFL, O_NONBLOCK), 0);
	ck_assert_int_eq(cm_conn_attach(c, sv[0]), 0);
	int small = 4096;
	ck_assert_int_eq(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small), 0);
	ck_assert_uint_eq(cm_conn_resend(c), FRAMES);
	ck_assert_uint_gt(total, FRAMES * (SMALL + CM_HEADER_SIZE));
	ck_assert_uint_eq(total, c->queued_bytes);
	c->state = CM_CONN_READY; /* as after HELLO_ACK */
	ck_assert_int_eq(cm_conn_release(c), 0);
	drain(c, sv[1]);
	ck_assert_uint_eq(total, 0);
	cm_conn_free(c);
	close(sv[1]);
}
END_TEST

static Suite *conn_queue_suite(void)
{
	Suite *s = suite_create("conn_queue");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, copies_count_until_written);
	tcase_add_test(tc, kept_messages_count_again_when_requeued);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(conn_queue_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
