/* The journal: a core that journals what it is sent, "killed" at a point
 * (the file copied as it is then), and a new core recovered from that copy,
 * must answer the reconnecting ranks as the first would have: the same
 * matches for the same request ids, the next clocks it expects, the events
 * it logged, a cut-through payload resumed where the file left it. */
#include "config.h"

#include "journal.h"
#include "logmem.h"
#include "test_core_harness.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#define CUT (64u * 1024)
#define BIG (200u * 1024)
#define WORLD 3

static char dir[64];
static struct cm_journal *J;
/* With the log memory, large payloads sit in page-aligned buffers and go
 * to the journal's data file; without it, into the records. */
static bool use_mem;
static struct cm_logmem *M;

static void path_of(char *out, size_t n, const char *name)
{
	snprintf(out, n, "%s/%s", dir, name);
}

static void start(const char *name)
{
	char path[128], err[512];
	path_of(path, sizeof path, name);
	J = cm_journal_open(path, CUT, err, sizeof err);
	ck_assert_msg(J != NULL, "%s", err);
	M = use_mem ? cm_logmem_new(64u << 20) : NULL;
	struct cm_core_config cfg = {.max_payload = H_MAX_PAYLOAD,
	                             .log_mem = UINT64_MAX,
	                             .mem = M,
	                             .hooks = {.ctx = &H, .wake = h_wake},
	                             .cut_through_min = CUT,
	                             .journal = cm_journal_ops(J)};
	memcpy(cfg.secret, H_SECRET, CM_SECRET_LEN);
	H.core = cm_core_new(&cfg);
	ck_assert_ptr_nonnull(H.core);
	nsessions = 0;
	ck_assert_int_eq(cm_journal_recover(J, H.core), 0);
}

static void stop(void)
{
	teardown();
	cm_journal_close(J);
	J = NULL;
	cm_logmem_free(M);
	M = NULL;
}

static void copy_file(const char *a, const char *b, const void *torn, size_t torn_len);

/* The file as a CM killed now leaves it: everything handed over (an engine
 * flushes before any output), nothing of what follows. */
static void snapshot(const char *from, const char *to, const void *torn, size_t torn_len)
{
	char a[128], b[128];
	cm_journal_flush(J);
	path_of(a, sizeof a, from);
	path_of(b, sizeof b, to);
	copy_file(a, b, torn, torn_len);
	strcat(a, ".data");
	strcat(b, ".data");
	copy_file(a, b, NULL, 0);
}

static void copy_file(const char *a, const char *b, const void *torn, size_t torn_len)
{
	int in = open(a, O_RDONLY), out = open(b, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_ge(in, 0);
	ck_assert_int_ge(out, 0);
	char buf[65536];
	ssize_t n;
	while ((n = read(in, buf, sizeof buf)) > 0)
		ck_assert_int_eq(write(out, buf, (size_t)n), n);
	if (torn_len)
		ck_assert_int_eq(write(out, torn, torn_len), (ssize_t)torn_len);
	close(in);
	close(out);
}

static uint8_t big[BIG];

static void event(struct cm_session *s, int rank, uint64_t index, const void *v, uint32_t len)
{
	struct bytes b = {0};
	frame_add(&b, CM_T_EVENT, 0, rank, rank, 1, 0, index, v, len);
	feed_bytes(s, &b, SIZE_MAX);
	bytes_free(&b);
}

/* One DELIVER for id: its source and payload. */
static void expect_deliver_bytes(struct cm_session *s, int src, uint64_t id, const void *p,
                                 uint32_t len)
{
	struct rframe fr[4];
	ck_assert_uint_eq(take(s, fr, 4), 1);
	ck_assert_int_eq(fr[0].h.type, CM_T_DELIVER);
	ck_assert_int_eq(fr[0].h.src, src);
	ck_assert_uint_eq(fr[0].h.clock, id);
	ck_assert_uint_eq(fr[0].h.len, len);
	ck_assert(memcmp(fr[0].payload, p, len) == 0);
}

static void expect_logged(struct cm_session *s, uint64_t next)
{
	struct rframe fr[4];
	ck_assert_uint_eq(take(s, fr, 4), 1);
	ck_assert_int_eq(fr[0].h.type, CM_T_LOGGED);
	ck_assert_uint_eq(fr[0].h.clock, next);
}

/* Before the kill: two ANY_SOURCE receives matched, an event logged, a
 * cut-through message half arrived and matched. */
static void first_life(void)
{
	for (uint32_t i = 0; i < BIG; i++)
		big[i] = (uint8_t)(i * 7 + 3);
	start("j");
	struct cm_session *r0 = join(0, WORLD), *r1 = join(1, WORLD), *r2 = join(2, WORLD);
	send_str(r2, 2, 0, 5, 0, "from two");
	send_msg(r1, 1, 0, 5, 0, 3, CM_F_ACK, "from one", 8);
	expect_logged(r1, 4);
	post(r0, 0, CM_ANY_SOURCE, 5, 0, 0);
	expect_deliver(r0, 2, 5, 0, "from two");
	post(r0, 0, CM_ANY_SOURCE, 5, 0, 1);
	expect_deliver(r0, 1, 5, 1, "from one");
	double t = 1.5;
	event(r0, 0, 0, &t, sizeof t);
	/* Message 4 of rank 1: its header and half its payload. */
	struct bytes b = {0};
	frame_add(&b, CM_T_MSG, CM_F_ACK, 1, 0, 9, 0, 4, big, BIG);
	uint32_t half = BIG / 2 + 1000;
	feed(r1, b.p, CM_HEADER_SIZE + half, 4096);
	bytes_free(&b);
	post(r0, 0, 1, 9, 0, 2);
	struct bytes out = {0};
	drain(r0, &out, SIZE_MAX); /* the DELIVER's first half */
	/* In an extent, only whole pages are shown before the end. */
	uint32_t shown = use_mem ? half & ~(CM_JOURNAL_PAGE - 1) : half;
	ck_assert_uint_eq(out.len, CM_HEADER_SIZE + shown);
	bytes_free(&out);
	expect_nothing(r1); /* no LOGGED before the whole payload */
}

static void recovered_core_answers_as_the_first(void)
{
	first_life();
	/* A kill while a record was being written leaves its start. */
	uint8_t torn[12] = {200, 0, 0, 0, 0, 0, 0, 0, CM_J_FRAME};
	snapshot("j", "k", torn, sizeof torn);
	stop();

	start("k");
	uint64_t next;
	struct cm_session *r1 = join_inc(1, WORLD, 0, &next);
	ck_assert_uint_eq(next, 4); /* message 4 is not all here: re-send it */
	struct cm_session *r2 = join_inc(2, WORLD, 0, &next);
	ck_assert_uint_eq(next, 1);
	struct cm_session *r0 = join(0, WORLD);
	/* The ids it had answered are answered alike. */
	post(r0, 0, CM_ANY_SOURCE, 5, 0, 0);
	expect_deliver(r0, 2, 5, 0, "from two");
	post(r0, 0, CM_ANY_SOURCE, 5, 0, 1);
	expect_deliver(r0, 1, 5, 1, "from one");
	send_msg(r1, 1, 0, 9, 0, 4, CM_F_ACK, big, BIG);
	expect_logged(r1, 5);
	post(r0, 0, 1, 9, 0, 2);
	expect_deliver_bytes(r0, 1, 2, big, BIG);
	/* The event comes back. */
	struct bytes b = {0};
	frame_add(&b, CM_T_EVENT_ACK, CM_F_REPLAY, 0, 0, 0, 0, 0, NULL, 0);
	feed_bytes(r0, &b, SIZE_MAX);
	bytes_free(&b);
	struct rframe fr[4];
	ck_assert_uint_eq(take(r0, fr, 4), 2);
	ck_assert_int_eq(fr[0].h.type, CM_T_EVENT);
	double t;
	memcpy(&t, fr[0].payload, sizeof t);
	ck_assert(t == 1.5);
	ck_assert_int_eq(fr[1].h.type, CM_T_EVENT_ACK);
	ck_assert_uint_eq(fr[1].h.clock, 1);
	(void)r2;

	/* Killed again: the second journal holds the first's records, the
	 * closes of the recovered connections and what came since. */
	snapshot("k", "l", NULL, 0);
	stop();
	start("l");
	r1 = join_inc(1, WORLD, 0, &next);
	ck_assert_uint_eq(next, 5);
	r0 = join(0, WORLD);
	post(r0, 0, 1, 9, 0, 2);
	expect_deliver_bytes(r0, 1, 2, big, BIG);
	post(r0, 0, CM_ANY_SOURCE, 5, 0, 0);
	expect_deliver(r0, 2, 5, 0, "from two");
	stop();
}

START_TEST(test_recovered_core_answers_as_the_first)
{
	use_mem = false;
	recovered_core_answers_as_the_first();
}
END_TEST

START_TEST(test_recovered_core_with_payload_extents)
{
	use_mem = true;
	recovered_core_answers_as_the_first();
}
END_TEST

START_TEST(test_journal_refuses_other_files)
{
	char path[128], err[512];
	path_of(path, sizeof path, "not-a-journal");
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "hello, world, not a journal\n", 28), 28);
	close(fd);
	ck_assert_ptr_null(cm_journal_open(path, CUT, err, sizeof err));
	ck_assert_ptr_nonnull(strstr(err, "not a chanmem journal"));
	/* Another cut-through size would dispatch its messages elsewhere. */
	path_of(path, sizeof path, "cut");
	struct cm_journal *j = cm_journal_open(path, CUT, err, sizeof err);
	ck_assert_ptr_nonnull(j);
	cm_journal_close(j);
	ck_assert_ptr_null(cm_journal_open(path, 0, err, sizeof err));
	ck_assert_ptr_nonnull(strstr(err, "--cut-through-min"));
}
END_TEST

static void make_dir(void)
{
	snprintf(dir, sizeof dir, "%s/cmjXXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void remove_dir(void)
{
	const char *names[] = {"j",      "k",      "l",      "not-a-journal", "cut",
	                       "j.data", "k.data", "l.data", "cut.data"};
	char path[128];
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		path_of(path, sizeof path, names[i]);
		unlink(path);
	}
	rmdir(dir);
}

int main(void)
{
	Suite *s = suite_create("core_journal");
	TCase *tc = tcase_create("recover");
	tcase_add_checked_fixture(tc, make_dir, remove_dir);
	tcase_add_test(tc, test_recovered_core_answers_as_the_first);
	tcase_add_test(tc, test_recovered_core_with_payload_extents);
	tcase_add_test(tc, test_journal_refuses_other_files);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
