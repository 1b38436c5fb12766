/* The cm transport's side of a channel memory's death, against a fake CM
 * played here frame by frame: a rank process (forked) runs the transport
 * with CHANMEM_CM_RECONNECT set; the test accepts its connections, checks
 * every frame it writes, closes the connection in the middle of a DELIVER
 * and checks what the rank sends on its new connection. Without the
 * variable, no MSG carries CM_F_ACK and nothing waits for LOGGED. */
#include <config.h>

#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "live_server.h"
#include "transport.h"

#define BIG_LEN (70 * 1024) /* over CM_RETAIN_ACK_SIZE: asks for LOGGED, waits for it */
#define SMALL_LEN 100
#define PART_LEN 50

/* A stand-in CM: a listening socket the rank connects to. */
static int fake_listen(char *addr, size_t cap)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(fd, 0);
	/* A small window (inherited by accepted sockets): a large MSG the fake
	 * does not read stays partly unwritten in the rank. */
	int rcvbuf = 64 * 1024;
	ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf), 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
	ck_assert_int_eq(listen(fd, 4), 0);
	socklen_t len = sizeof sa;
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	snprintf(addr, cap, "127.0.0.1:%u", (unsigned)ntohs(sa.sin_port));
	return fd;
}

static int fake_accept(int lfd)
{
	struct pollfd p = {.fd = lfd, .events = POLLIN};
	ck_assert_msg(poll(&p, 1, IO_MS) == 1, "the rank did not connect");
	int fd = accept(lfd, NULL, NULL);
	ck_assert_int_ge(fd, 0);
	return fd;
}

static void fill(uint8_t *buf, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)(i * 7 + seed);
}

static int filled(const uint8_t *buf, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		if (buf[i] != (uint8_t)(i * 7 + seed))
			return 0;
	return 1;
}

/* PUSH_START frames the rank sent (after each HELLO_ACK of its home), and
 * the push number the last one named. */
static unsigned push_starts;
static uint64_t push_from;

/* One frame of the given type; returns its header, payload in *p. A
 * PUSH_START is counted and passed over unless it is the one asked for. */
static struct cm_header expect(int fd, uint8_t type, uint64_t clock, uint8_t **p)
{
	struct cm_header h;
	recv_frame(fd, &h, p);
	while (h.type == CM_T_PUSH_START && type != CM_T_PUSH_START) {
		push_starts++;
		push_from = h.clock;
		free(*p);
		recv_frame(fd, &h, p);
	}
	ck_assert_msg(h.type == type, "expected %s %llu, got %s %llu", cm_type_str(type),
	              (unsigned long long)clock, cm_type_str(h.type), (unsigned long long)h.clock);
	ck_assert_uint_eq(h.clock, clock);
	return h;
}

static void expect_hello(int fd)
{
	uint8_t *p;
	struct cm_header h = expect(fd, CM_T_HELLO, 0, &p);
	struct cm_hello hello;
	ck_assert_int_eq(cm_hello_decode(p, h.len, &hello), CM_OK);
	ck_assert_uint_eq(hello.incarnation, 0); /* the same incarnation */
	ck_assert_uint_eq(h.flags, 0);           /* and no TAKEOVER */
	free(p);
}

static void expect_msg(int fd, uint64_t clock, size_t len, uint16_t flags, unsigned seed)
{
	uint8_t *p;
	struct cm_header h = expect(fd, CM_T_MSG, clock, &p);
	ck_assert_uint_eq(h.len, len);
	ck_assert_uint_eq(h.flags, flags);
	ck_assert_msg(filled(p, len, seed), "MSG %llu: payload differs", (unsigned long long)clock);
	free(p);
}

static void expect_frame(int fd, uint8_t type, uint64_t clock)
{
	uint8_t *p;
	expect(fd, type, clock, &p);
	free(p);
}

/* A connection of the rank, accepted with HELLO_ACK(clock). */
static int admit(int lfd, uint64_t clock)
{
	int fd = fake_accept(lfd);
	expect_hello(fd);
	send_frame(fd, CM_T_HELLO_ACK, 0, 0, 0, 0, 0, clock, NULL, 0);
	return fd;
}

static void say_bye(int fd)
{
	expect_frame(fd, CM_T_BYE, 0);
	send_frame(fd, CM_T_BYE_ACK, 0, 0, 0, 0, 0, 0, NULL, 0);
	close(fd);
}

/* ---- the rank (a child process: exit status is the verdict) ---- */

static int rank_init(struct cm_transport *t, char *addr)
{
	static char *cms[1];
	static int home[2] = {0, 0};
	cms[0] = addr;
	struct cm_job job = {.rank = 0, .size = 2, .ncms = 1, .cms = cms, .home = home};
	memcpy(job.secret, SECRET, CM_SECRET_LEN + 1);
	setenv("CHANMEM_COALESCE_US", "0", 1); /* frames in program order, at once */
	cm_transport_cm(t);
	return t->init(t, &job);
}

static int wait_all(struct cm_transport *t, struct cm_req **reqs, int n)
{
	long long deadline = now_ms() + 2 * IO_MS;
	for (;;) {
		int done = 1;
		for (int i = 0; i < n; i++)
			done &= reqs[i]->done;
		if (done)
			return 0;
		if (now_ms() > deadline || t->progress(t, 100) < 0)
			return -1;
	}
}

/* Two sends (a small one and one that waits for LOGGED), a receive, an
 * event, a wildcard receive; both receives answered after the reconnection. */
static int rank_main(char *addr)
{
	struct cm_transport t;
	if (rank_init(&t, addr) < 0)
		return 10;
	static uint8_t small[SMALL_LEN], big[BIG_LEN];
	fill(small, sizeof small, 1);
	fill(big, sizeof big, 2);
	struct cm_req m0 = {
	    .kind = CM_REQ_SEND, .peer = 1, .tag = 1, .sbuf = small, .slen = SMALL_LEN};
	struct cm_req m1 = {.kind = CM_REQ_SEND, .peer = 1, .tag = 1, .sbuf = big, .slen = BIG_LEN};
	if (t.isend(&t, &m0) < 0 || t.isend(&t, &m1) < 0)
		return 11;
	int retaining = getenv("CHANMEM_CM_RECONNECT") != NULL;
	if (retaining && m1.done)
		return 12; /* its buffer is retained until LOGGED */
	uint8_t buf0[64] = {0}, buf1[64] = {0};
	struct cm_req r0 = {.kind = CM_REQ_RECV, .peer = 1, .tag = 5, .rbuf = buf0, .rcap = 64};
	struct cm_req r1 = {.kind = CM_REQ_RECV,
	                    .peer = CM_ANY_SOURCE,
	                    .tag = CM_ANY_TAG,
	                    .rbuf = buf1,
	                    .rcap = 64};
	double value = 1.5;
	int replayed;
	if (t.irecv(&t, &r0) < 0 || t.event(&t, CM_EV_WTIME, &value, sizeof value, &replayed) < 0 ||
	    t.irecv(&t, &r1) < 0)
		return 13;
	struct cm_req *all[] = {&r0, &r1, &m0, &m1};
	if (wait_all(&t, all, 4) < 0)
		return 14;
	if (r0.st_bytes != PART_LEN || !filled(buf0, PART_LEN, 3) || r1.st_bytes != 10 ||
	    r1.st_tag != 9 || !filled(buf1, 10, 4))
		return 15;
	return t.finalize(&t) < 0 ? 16 : 0;
}

#define HUGE_LEN (8u << 20) /* more than the socket buffers hold */

/* One large send, cut by the CM's death while it is being written. */
static int rank_huge(char *addr)
{
	struct cm_transport t;
	if (rank_init(&t, addr) < 0)
		return 10;
	uint8_t *huge = malloc(HUGE_LEN);
	if (huge == NULL)
		return 11;
	fill(huge, HUGE_LEN, 6);
	struct cm_req m = {
	    .kind = CM_REQ_SEND, .peer = 1, .tag = 2, .sbuf = huge, .slen = HUGE_LEN};
	uint8_t buf[64];
	struct cm_req r = {.kind = CM_REQ_RECV, .peer = 1, .tag = 5, .rbuf = buf, .rcap = 64};
	if (t.isend(&t, &m) < 0 || t.irecv(&t, &r) < 0)
		return 13;
	struct cm_req *all[] = {&m, &r};
	if (wait_all(&t, all, 2) < 0)
		return 14;
	if (r.st_bytes != PART_LEN || !filled(buf, PART_LEN, 3))
		return 15;
	free(huge);
	return t.finalize(&t) < 0 ? 16 : 0;
}

/* A synchronous send, a cancelled receive, a blocking probe, a TRIM and BYE,
 * each cut by a CM death before its answer. */
static int rank_requests(char *addr)
{
	struct cm_transport t;
	if (rank_init(&t, addr) < 0)
		return 10;
	uint8_t small[SMALL_LEN], buf[64];
	fill(small, sizeof small, 1);
	struct cm_req m = {
	    .kind = CM_REQ_SEND, .peer = 1, .tag = 1, .sbuf = small, .slen = SMALL_LEN, .sync = 1};
	struct cm_req r = {.kind = CM_REQ_RECV, .peer = 1, .tag = 5, .rbuf = buf, .rcap = 64};
	int cancelled = 0;
	if (t.isend(&t, &m) < 0 || t.irecv(&t, &r) < 0 || t.cancel(&t, &r, &cancelled) < 0)
		return 11;
	struct cm_req *all[] = {&m};
	if (!cancelled || wait_all(&t, all, 1) < 0)
		return 12;
	struct cm_probe_result pr;
	if (t.probe(&t, 1, 7, 0, 1, &pr) < 0)
		return 13;
	if (!pr.found || pr.source != 1 || pr.tag != 7 || pr.bytes != 5)
		return 14;
	struct cm_resume image = {.clock = 1, .reqid = 2, .events = 0};
	t.ckpt_committed(&t, &image);
	return t.finalize(&t) < 0 ? 16 : 0;
}

/* Two collective receives and a collective send: the receives are
 * matched in the rank from pushed messages, without RECV_REQ. */
static int rank_pushes(char *addr)
{
	struct cm_transport t;
	if (rank_init(&t, addr) < 0)
		return 10;
	uint8_t small[SMALL_LEN], buf0[64] = {0}, buf1[64] = {0};
	fill(small, sizeof small, 1);
	struct cm_req r0 = {.kind = CM_REQ_RECV,
	                    .peer = 1,
	                    .tag = 3,
	                    .ctx = 1,
	                    .coll = 1,
	                    .rbuf = buf0,
	                    .rcap = 64};
	struct cm_req r1 = {.kind = CM_REQ_RECV,
	                    .peer = 1,
	                    .tag = 4,
	                    .ctx = 1,
	                    .coll = 1,
	                    .rbuf = buf1,
	                    .rcap = 64};
	struct cm_req m = {.kind = CM_REQ_SEND,
	                   .peer = 1,
	                   .tag = 3,
	                   .ctx = 1,
	                   .coll = 1,
	                   .sbuf = small,
	                   .slen = SMALL_LEN};
	if (t.irecv(&t, &r0) < 0 || t.irecv(&t, &r1) < 0 || t.isend(&t, &m) < 0)
		return 11;
	struct cm_req *all[] = {&r0, &r1, &m};
	if (wait_all(&t, all, 3) < 0)
		return 14;
	if (r0.st_bytes != PART_LEN || !filled(buf0, PART_LEN, 3) || r1.st_bytes != 10 ||
	    r1.st_tag != 4 || !filled(buf1, 10, 4))
		return 15;
	return t.finalize(&t) < 0 ? 16 : 0;
}

/* A restarted rank (incarnation 1): its init only, with the event log
 * fetched (empty). */
static int rank_restarted(char *addr)
{
	static char *cms[1];
	static int home[2] = {0, 0};
	cms[0] = addr;
	struct cm_job job = {
	    .rank = 0, .size = 2, .incarnation = 1, .ncms = 1, .cms = cms, .home = home};
	memcpy(job.secret, SECRET, CM_SECRET_LEN + 1);
	struct cm_transport t;
	cm_transport_cm(&t);
	return t.init(&t, &job) < 0 ? 10 : 0;
}

/* A HELLO of incarnation 1; its flags. */
static uint16_t expect_restart_hello(int fd)
{
	uint8_t *p;
	struct cm_header h = expect(fd, CM_T_HELLO, 0, &p);
	struct cm_hello hello;
	ck_assert_int_eq(cm_hello_decode(p, h.len, &hello), CM_OK);
	ck_assert_uint_eq(hello.incarnation, 1);
	free(p);
	return h.flags;
}

static pid_t start_rank_fn(char *addr, const char *reconnect, int (*fn)(char *))
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		alarm(60);
		if (reconnect)
			setenv("CHANMEM_CM_RECONNECT", reconnect, 1);
		else
			unsetenv("CHANMEM_CM_RECONNECT");
		_exit(fn(addr));
	}
	return pid;
}

static pid_t start_rank(char *addr, const char *reconnect)
{
	return start_rank_fn(addr, reconnect, rank_main);
}

static void expect_rank_exit(pid_t pid, int code)
{
	int st = wait_exit(pid, 3 * IO_MS);
	ck_assert_msg(st != -1, "the rank did not finish");
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == code, "rank exit status %d, wanted %d",
	              WIFEXITED(st) ? WEXITSTATUS(st) : -1, code);
}

/* The frames of rank_main up to the second receive, on a first connection. */
static int first_connection(int lfd, uint16_t big_flags)
{
	int fd = admit(lfd, 0);
	expect_msg(fd, 0, SMALL_LEN, 0, 1);
	expect_msg(fd, 1, BIG_LEN, big_flags, 2);
	expect_frame(fd, CM_T_RECV_REQ, 0);
	expect_frame(fd, CM_T_EVENT, 0);
	expect_frame(fd, CM_T_RECV_REQ, 1);
	return fd;
}

static void answer_and_finish(int fd, uint64_t logged)
{
	uint8_t part[PART_LEN], other[10];
	fill(part, sizeof part, 3);
	fill(other, sizeof other, 4);
	if (logged)
		send_frame(fd, CM_T_LOGGED, 0, 0, 0, 0, 0, logged, NULL, 0);
	send_frame(fd, CM_T_DELIVER, 0, 1, 0, 5, 0, 0, part, sizeof part);
	send_frame(fd, CM_T_DELIVER, 0, 1, 0, 9, 0, 1, other, sizeof other);
	say_bye(fd);
}

START_TEST(reconnect_resends_and_reposts)
{
	char addr[64];
	int lfd = fake_listen(addr, sizeof addr);
	pid_t rank = start_rank(addr, "20");
	int fd = first_connection(lfd, CM_F_ACK);
	/* m0 is logged; the CM dies in the middle of r0's DELIVER. */
	send_frame(fd, CM_T_LOGGED, 0, 0, 0, 0, 0, 1, NULL, 0);
	uint8_t hdr[CM_HEADER_SIZE], part[PART_LEN];
	fill(part, sizeof part, 3);
	struct cm_header h = {
	    .type = CM_T_DELIVER, .src = 1, .dst = 0, .tag = 5, .len = PART_LEN, .clock = 0};
	cm_header_encode(&h, hdr);
	send_all(fd, hdr, sizeof hdr);
	send_all(fd, part, 20);
	close(fd);

	/* The restarted CM holds m0 (clock 1 expected next). */
	fd = admit(lfd, 1);
	expect_frame(fd, CM_T_EVENT, 0);         /* not acknowledged: first */
	expect_msg(fd, 1, BIG_LEN, CM_F_ACK, 2); /* whole, m0 not again */
	expect_frame(fd, CM_T_RECV_REQ, 0);      /* its DELIVER was cut short */
	expect_frame(fd, CM_T_RECV_REQ, 1);
	answer_and_finish(fd, 2);
	expect_rank_exit(rank, 0);
	close(lfd);
}
END_TEST

/* A CM that dies before HELLO_ACK of the new connection, then comes back:
 * the same re-sends on the third connection, m0 included this time. */
START_TEST(reconnect_twice)
{
	char addr[64];
	int lfd = fake_listen(addr, sizeof addr);
	pid_t rank = start_rank(addr, "20");
	int fd = first_connection(lfd, CM_F_ACK);
	close(fd);
	fd = fake_accept(lfd);
	expect_hello(fd);
	close(fd);
	fd = admit(lfd, 0);
	expect_frame(fd, CM_T_EVENT, 0);
	expect_msg(fd, 0, SMALL_LEN, 0, 1);
	expect_msg(fd, 1, BIG_LEN, CM_F_ACK, 2);
	expect_frame(fd, CM_T_RECV_REQ, 0);
	expect_frame(fd, CM_T_RECV_REQ, 1);
	answer_and_finish(fd, 2);
	expect_rank_exit(rank, 0);
	close(lfd);
}
END_TEST

/* A CM names its standby after HELLO_ACK (a standby started after the
 * rank, which its environment does not list): when the CM's address
 * refuses connections, the rank reconnects there and sends again what the
 * CM had not logged. */
START_TEST(reconnect_to_named_standby)
{
	char addr[64], standby[64];
	int lfd = fake_listen(addr, sizeof addr);
	int sfd = fake_listen(standby, sizeof standby);
	pid_t rank = start_rank(addr, "20");
	int fd = fake_accept(lfd);
	expect_hello(fd);
	send_frame(fd, CM_T_HELLO_ACK, 0, 0, 0, 0, 0, 0, NULL, 0);
	send_frame(fd, CM_T_STANDBY, 0, 0, 0, 0, 0, 0, standby, strlen(standby));
	expect_msg(fd, 0, SMALL_LEN, 0, 1);
	expect_msg(fd, 1, BIG_LEN, CM_F_ACK, 2);
	expect_frame(fd, CM_T_RECV_REQ, 0);
	expect_frame(fd, CM_T_EVENT, 0);
	expect_frame(fd, CM_T_RECV_REQ, 1);
	close(fd);
	/* The CM's address turns every connection away (the rank holds its
	 * listening socket too, a fork's copy: it cannot simply be closed). */
	for (;;) {
		struct pollfd p[2] = {{.fd = lfd, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
		ck_assert_msg(poll(p, 2, IO_MS) > 0, "the rank did not reconnect");
		if (p[1].revents)
			break;
		close(fake_accept(lfd));
	}
	fd = admit(sfd, 0);
	expect_frame(fd, CM_T_EVENT, 0);
	expect_msg(fd, 0, SMALL_LEN, 0, 1);
	expect_msg(fd, 1, BIG_LEN, CM_F_ACK, 2);
	expect_frame(fd, CM_T_RECV_REQ, 0);
	expect_frame(fd, CM_T_RECV_REQ, 1);
	answer_and_finish(fd, 2);
	expect_rank_exit(rank, 0);
	close(lfd);
	close(sfd);
}
END_TEST

/* A STANDBY whose text is no address fails the rank's connection. */
START_TEST(standby_not_an_address)
{
	char addr[64];
	int lfd = fake_listen(addr, sizeof addr);
	pid_t rank = start_rank(addr, "20");
	int fd = fake_accept(lfd);
	expect_hello(fd);
	send_frame(fd, CM_T_HELLO_ACK, 0, 0, 0, 0, 0, 0, NULL, 0);
	send_frame(fd, CM_T_STANDBY, 0, 0, 0, 0, 0, 0, "no where", 8);
	int st = wait_exit(rank, 3 * IO_MS);
	ck_assert_msg(st != -1, "the rank did not stop");
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) != 0, "the rank went on");
	close(fd);
	close(lfd);
}
END_TEST

/* A MSG partly written when the CM died goes again whole, and its send
 * completes only with LOGGED. */
START_TEST(partly_written_message_resent_whole)
{
	char addr[64];
	int lfd = fake_listen(addr, sizeof addr);
	pid_t rank = start_rank_fn(addr, "20", rank_huge);
	int fd = admit(lfd, 0);
	expect_frame(fd, CM_T_PUSH_START, 0);
	uint8_t hdr[CM_HEADER_SIZE];
	ck_assert_int_eq(recv_exact(fd, hdr, sizeof hdr, now_ms() + IO_MS), 0);
	ck_assert_uint_eq(hdr[1], CM_T_MSG);
	uint8_t *some = malloc(1u << 20);
	ck_assert_int_eq(recv_exact(fd, some, 1u << 20, now_ms() + IO_MS), 0);
	ck_assert(filled(some, 1u << 20, 6));
	free(some);
	close(fd);

	fd = admit(lfd, 0);
	expect_msg(fd, 0, HUGE_LEN, CM_F_ACK, 6);
	expect_frame(fd, CM_T_RECV_REQ, 0);
	uint8_t part[PART_LEN];
	fill(part, sizeof part, 3);
	send_frame(fd, CM_T_LOGGED, 0, 0, 0, 0, 0, 1, NULL, 0);
	send_frame(fd, CM_T_DELIVER, 0, 1, 0, 5, 0, 0, part, sizeof part);
	say_bye(fd);
	expect_rank_exit(rank, 0);
	close(lfd);
}
END_TEST

/* A restarted rank whose CM dies before HELLO_ACK: the restarted CM holds
 * its new HELLO back (as behind the old incarnation's connection, which
 * had not ended). The rank must still take over, as on its first
 * connection: a HELLO with TAKEOVER, here on a connection made again. */
START_TEST(restarted_rank_takes_over_after_reconnect)
{
	char addr[64];
	int lfd = fake_listen(addr, sizeof addr);
	pid_t rank = start_rank_fn(addr, "20", rank_restarted);
	int fd = fake_accept(lfd);
	ck_assert_uint_eq(expect_restart_hello(fd), 0);
	close(fd); /* the CM dies before HELLO_ACK */
	fd = fake_accept(lfd);
	ck_assert_uint_eq(expect_restart_hello(fd), 0); /* the takeover is not due yet */
	/* No answer. Within TAKEOVER_AFTER_MS (3 s) of its start, and IO_MS
	 * more, a HELLO with TAKEOVER: on this connection or a new one. */
	struct pollfd p[2] = {{.fd = fd, .events = POLLIN}, {.fd = lfd, .events = POLLIN}};
	ck_assert_msg(poll(p, 2, 3000 + IO_MS) > 0, "no TAKEOVER from the rank");
	uint8_t byte;
	if (!(p[0].revents & POLLIN) || recv(fd, &byte, 1, MSG_PEEK) == 0) {
		close(fd);
		fd = fake_accept(lfd);
	}
	ck_assert_uint_eq(expect_restart_hello(fd), CM_F_TAKEOVER);
	send_frame(fd, CM_T_HELLO_ACK, 0, 0, 0, 0, 0, 0, NULL, 0);
	uint8_t *payload;
	struct cm_header h = expect(fd, CM_T_EVENT_ACK, 0, &payload); /* the event log */
	free(payload);
	ck_assert_uint_eq(h.flags, CM_F_REPLAY);
	send_frame(fd, CM_T_EVENT_ACK, 0, 0, 0, 0, 0, 0, NULL, 0);
	expect_rank_exit(rank, 0);
	close(fd);
	close(lfd);
}
END_TEST

START_TEST(requests_reposted)
{
	char addr[64];
	int lfd = fake_listen(addr, sizeof addr);
	pid_t rank = start_rank_fn(addr, "20", rank_requests);
	int fd = admit(lfd, 0);
	expect_msg(fd, 0, SMALL_LEN, CM_F_SYNC, 1);
	expect_frame(fd, CM_T_RECV_REQ, 0);
	expect_frame(fd, CM_T_CANCEL, 0);
	send_frame(fd, CM_T_LOGGED, 0, 0, 0, 0, 0, 1, NULL, 0);
	close(fd);

	/* The message is logged; its SYNC_ACK and the CANCEL_ACK were lost. */
	fd = admit(lfd, 1);
	expect_msg(fd, 0, SMALL_LEN, CM_F_SYNC, 1); /* again, only for its SYNC_ACK */
	expect_frame(fd, CM_T_RECV_REQ, 0);
	expect_frame(fd, CM_T_CANCEL, 0);
	send_frame(fd, CM_T_CANCEL_ACK, CM_F_CANCELLED, 0, 0, 0, 0, 0, NULL, 0);
	send_frame(fd, CM_T_SYNC_ACK, 0, 1, 0, 1, 0, 0, NULL, 0);
	uint8_t *p;
	struct cm_header h = expect(fd, CM_T_PROBE, 1, &p);
	free(p);
	ck_assert_uint_eq(h.flags, CM_F_BLOCKING);
	close(fd);

	fd = admit(lfd, 1);
	h = expect(fd, CM_T_PROBE, 1, &p); /* the receive is gone: cancelled */
	free(p);
	ck_assert_uint_eq(h.flags, CM_F_BLOCKING);
	ck_assert_int_eq(h.src, 1);
	ck_assert_int_eq(h.tag, 7);
	uint8_t len[CM_PROBE_REPLY_PAYLOAD];
	cm_put_u64(len, 5);
	send_frame(fd, CM_T_PROBE_REPLY, CM_F_FOUND, 1, 0, 7, 0, 1, len, sizeof len);
	expect_frame(fd, CM_T_TRIM, 2);
	expect_frame(fd, CM_T_BYE, 0);
	close(fd);

	fd = admit(lfd, 1);
	expect_frame(fd, CM_T_TRIM, 2);
	say_bye(fd);
	expect_rank_exit(rank, 0);
	close(lfd);
}
END_TEST

/* A pushed message cut short by the CM's death is pushed again into the
 * same receive: the new connection's PUSH_START names the first push
 * the rank lacks. Receives of a collective send no RECV_REQ; its send is
 * flagged PUSH. */
START_TEST(pushed_message_pushed_again)
{
	char addr[64];
	int lfd = fake_listen(addr, sizeof addr);
	pid_t rank = start_rank_fn(addr, "20", rank_pushes);
	int fd = admit(lfd, 0);
	expect_frame(fd, CM_T_PUSH_START, 0);
	expect_msg(fd, 0, SMALL_LEN, CM_F_PUSH, 1);
	uint8_t part[PART_LEN], other[10];
	fill(part, sizeof part, 3);
	fill(other, sizeof other, 4);
	/* Push 0 (for the second receive) whole, push 1 cut short. */
	send_frame(fd, CM_T_DELIVER, CM_F_PUSH, 1, 0, 4, 1, 0, other, sizeof other);
	uint8_t hdr[CM_HEADER_SIZE];
	struct cm_header h = {.type = CM_T_DELIVER,
	                      .flags = CM_F_PUSH,
	                      .src = 1,
	                      .dst = 0,
	                      .tag = 3,
	                      .ctx = 1,
	                      .len = PART_LEN,
	                      .clock = 1};
	cm_header_encode(&h, hdr);
	send_all(fd, hdr, sizeof hdr);
	send_all(fd, part, 20);
	close(fd);

	fd = admit(lfd, 1); /* the MSG was logged */
	expect_frame(fd, CM_T_PUSH_START, 1);
	send_frame(fd, CM_T_DELIVER, CM_F_PUSH, 1, 0, 3, 1, 1, part, sizeof part);
	say_bye(fd);
	expect_rank_exit(rank, 0);
	close(lfd);
}
END_TEST

/* A home CM that dies before the first HELLO_ACK: the connection made
 * again asks for pushes once (a second PUSH_START would have the CM push
 * from 0 again, after the rank had some). */
START_TEST(push_start_once_after_early_reconnect)
{
	char addr[64];
	int lfd = fake_listen(addr, sizeof addr);
	pid_t rank = start_rank_fn(addr, "20", rank_pushes);
	int fd = fake_accept(lfd);
	expect_hello(fd);
	close(fd);
	fd = admit(lfd, 0);
	expect_frame(fd, CM_T_PUSH_START, 0);
	push_starts = 0;
	expect_msg(fd, 0, SMALL_LEN, CM_F_PUSH, 1);
	uint8_t part[PART_LEN], other[10];
	fill(part, sizeof part, 3);
	fill(other, sizeof other, 4);
	send_frame(fd, CM_T_DELIVER, CM_F_PUSH, 1, 0, 4, 1, 0, other, sizeof other);
	send_frame(fd, CM_T_DELIVER, CM_F_PUSH, 1, 0, 3, 1, 1, part, sizeof part);
	say_bye(fd);
	ck_assert_uint_eq(push_starts, 0);
	expect_rank_exit(rank, 0);
	close(lfd);
}
END_TEST

/* Without CHANMEM_CM_RECONNECT: no ACK flag, no wait for LOGGED, and a
 * lost connection is fatal at once. */
START_TEST(off_by_default)
{
	char addr[64];
	int lfd = fake_listen(addr, sizeof addr);
	pid_t rank = start_rank(addr, NULL);
	int fd = first_connection(lfd, 0);
	answer_and_finish(fd, 0);
	expect_rank_exit(rank, 0);

	rank = start_rank(addr, NULL);
	fd = first_connection(lfd, 0);
	close(fd);
	expect_rank_exit(rank, 14);
	close(lfd);
}
END_TEST

/* The CM does not come back within the limit: the usual fatal error. */
START_TEST(gives_up_after_the_limit)
{
	char addr[64];
	int lfd = fake_listen(addr, sizeof addr);
	pid_t rank = start_rank(addr, "1");
	int fd = first_connection(lfd, CM_F_ACK);
	close(fd);
	close(lfd); /* connections refused from now on */
	long long t0 = now_ms();
	expect_rank_exit(rank, 14);
	ck_assert_int_ge(now_ms() - t0, 900); /* it did try for the second */
}
END_TEST

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	Suite *s = suite_create("cm_reconnect");
	TCase *tc = tcase_create("fake cm");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, reconnect_resends_and_reposts);
	tcase_add_test(tc, reconnect_twice);
	tcase_add_test(tc, reconnect_to_named_standby);
	tcase_add_test(tc, standby_not_an_address);
	tcase_add_test(tc, partly_written_message_resent_whole);
	tcase_add_test(tc, pushed_message_pushed_again);
	tcase_add_test(tc, push_start_once_after_early_reconnect);
	tcase_add_test(tc, requests_reposted);
	tcase_add_test(tc, restarted_rank_takes_over_after_reconnect);
	tcase_add_test(tc, off_by_default);
	tcase_add_test(tc, gives_up_after_the_limit);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
