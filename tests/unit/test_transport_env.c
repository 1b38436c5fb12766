/* Parsing of the job environment (common/jobenv.h): every good form, and
 * every bad one refused with a message naming the variable. */
#include <config.h>

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "jobenv.h"
#include "net.h"
#include "transport.h"

#define SECRET "0123456789abcdef0123456789abcdef"

static const char *const all_vars[] = {
    CM_ENV_RANK, CM_ENV_SIZE, CM_ENV_INCARNATION, CM_ENV_SECRET,    CM_ENV_TRANSPORT,
    CM_ENV_CMS,  CM_ENV_HOME, CM_ENV_PEERS,       CM_ENV_LISTEN_FD, CM_ENV_CM_STANDBYS};

static void clear_env(void)
{
	for (size_t i = 0; i < sizeof all_vars / sizeof all_vars[0]; i++)
		unsetenv(all_vars[i]);
}

/* A valid cm job of 4 ranks, rank 1, two CMs. */
static void cm_env(void)
{
	clear_env();
	setenv(CM_ENV_RANK, "1", 1);
	setenv(CM_ENV_SIZE, "4", 1);
	setenv(CM_ENV_SECRET, SECRET, 1);
	setenv(CM_ENV_TRANSPORT, "cm", 1);
	setenv(CM_ENV_CMS, "127.0.0.1:4000,localhost:4001", 1);
}

static int listen_fd = -1;
static char own_addr[32]; /* where listen_fd listens */

/* A valid direct job of 3 ranks, rank 2, its listening socket open. */
static void direct_env(void)
{
	clear_env();
	if (listen_fd < 0) {
		struct sockaddr_in any, bound;
		cm_parse_hostport("127.0.0.1:0", 0, &any);
		listen_fd = cm_tcp_listen(&any, &bound);
		cm_format_addr(&bound, own_addr, sizeof own_addr);
	}
	char fd[16], peers[128];
	snprintf(fd, sizeof fd, "%d", listen_fd);
	snprintf(peers, sizeof peers, "127.0.0.1:5000,127.0.0.1:5001,%s", own_addr);
	setenv(CM_ENV_RANK, "2", 1);
	setenv(CM_ENV_SIZE, "3", 1);
	setenv(CM_ENV_SECRET, SECRET, 1);
	setenv(CM_ENV_TRANSPORT, "direct", 1);
	setenv(CM_ENV_PEERS, peers, 1);
	setenv(CM_ENV_LISTEN_FD, fd, 1);
}

/* Runs cm_job_from_env expecting failure; returns what it printed. */
static char printed[2048];
static int parse_capturing(struct cm_job *job, char *name, size_t namelen)
{
	fflush(stderr);
	FILE *tmp = tmpfile();
	int saved = dup(2);
	dup2(fileno(tmp), 2);
	int rc = cm_job_from_env(job, name, namelen);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	rewind(tmp);
	size_t n = fread(printed, 1, sizeof printed - 1, tmp);
	printed[n] = '\0';
	fclose(tmp);
	return rc;
}

static void expect_refused(const char *var)
{
	struct cm_job job;
	char name[16];
	ck_assert_int_eq(parse_capturing(&job, name, sizeof name), -1);
	ck_assert_msg(strstr(printed, var) != NULL, "message '%s' does not name %s", printed, var);
	/* A failed parse leaves nothing to free. */
	ck_assert_ptr_null(job.cms);
	ck_assert_ptr_null(job.peers);
	ck_assert_ptr_null(job.home);
}

START_TEST(singleton_without_rank)
{
	clear_env();
	setenv(CM_ENV_SIZE, "8", 1); /* ignored without a rank */
	struct cm_job job;
	char name[16] = "";
	ck_assert_int_eq(cm_job_from_env(&job, name, sizeof name), 0);
	ck_assert_str_eq(name, "direct");
	ck_assert_int_eq(job.rank, 0);
	ck_assert_int_eq(job.size, 1);
	ck_assert_int_eq(job.ncms, 0);
	ck_assert_ptr_null(job.peers);
	ck_assert_int_eq(job.listen_fd, -1);
	cm_job_free(&job);
}
END_TEST

START_TEST(cm_job_default_home)
{
	cm_env();
	struct cm_job job;
	char name[16] = "";
	ck_assert_int_eq(cm_job_from_env(&job, name, sizeof name), 0);
	ck_assert_str_eq(name, "cm");
	ck_assert_int_eq(job.rank, 1);
	ck_assert_int_eq(job.size, 4);
	ck_assert_uint_eq(job.incarnation, 0);
	ck_assert_str_eq(job.secret, SECRET);
	ck_assert_int_eq(job.ncms, 2);
	ck_assert_str_eq(job.cms[0], "127.0.0.1:4000");
	ck_assert_str_eq(job.cms[1], "localhost:4001");
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(job.home[i], i % 2);
	ck_assert_ptr_null(job.peers);
	ck_assert_int_eq(job.listen_fd, -1);
	cm_job_free(&job);
}
END_TEST

START_TEST(cm_job_explicit_home_incarnation)
{
	cm_env();
	setenv(CM_ENV_HOME, "1,1,0,1", 1);
	setenv(CM_ENV_INCARNATION, "3", 1);
	struct cm_job job;
	char name[16] = "";
	ck_assert_int_eq(cm_job_from_env(&job, name, sizeof name), 0);
	ck_assert_uint_eq(job.incarnation, 3);
	ck_assert_int_eq(job.home[0], 1);
	ck_assert_int_eq(job.home[1], 1);
	ck_assert_int_eq(job.home[2], 0);
	ck_assert_int_eq(job.home[3], 1);
	cm_job_free(&job);
}
END_TEST

/* Each CM's standby, "-" for none. */
START_TEST(cm_job_standbys)
{
	cm_env();
	setenv(CM_ENV_CM_STANDBYS, "-,unix:@ab12", 1);
	struct cm_job job;
	char name[16] = "";
	ck_assert_int_eq(cm_job_from_env(&job, name, sizeof name), 0);
	ck_assert_ptr_nonnull(job.cm_standbys);
	ck_assert_ptr_null(job.cm_standbys[0]);
	ck_assert_str_eq(job.cm_standbys[1], "unix:@ab12");
	cm_job_free(&job);
	setenv(CM_ENV_CM_STANDBYS, "", 1); /* empty: none */
	ck_assert_int_eq(cm_job_from_env(&job, name, sizeof name), 0);
	ck_assert_ptr_null(job.cm_standbys);
	cm_job_free(&job);
}
END_TEST

/* A CM on the rank's host may be given by its abstract unix socket. */
START_TEST(cm_job_unix_address)
{
	cm_env();
	setenv(CM_ENV_CMS, "unix:@0a1f3,127.0.0.1:4001", 1);
	struct cm_job job;
	char name[16] = "";
	ck_assert_int_eq(cm_job_from_env(&job, name, sizeof name), 0);
	ck_assert_int_eq(job.ncms, 2);
	ck_assert_str_eq(job.cms[0], "unix:@0a1f3");
	ck_assert_str_eq(job.cms[1], "127.0.0.1:4001");
	cm_job_free(&job);
}
END_TEST

START_TEST(transport_defaults_to_cm)
{
	cm_env();
	unsetenv(CM_ENV_TRANSPORT);
	struct cm_job job;
	char name[16] = "";
	ck_assert_int_eq(cm_job_from_env(&job, name, sizeof name), 0);
	ck_assert_str_eq(name, "cm");
	cm_job_free(&job);
}
END_TEST

START_TEST(direct_job)
{
	direct_env();
	struct cm_job job;
	char name[16] = "";
	ck_assert_int_eq(cm_job_from_env(&job, name, sizeof name), 0);
	ck_assert_str_eq(name, "direct");
	ck_assert_int_eq(job.rank, 2);
	ck_assert_int_eq(job.size, 3);
	ck_assert_int_eq(job.listen_fd, listen_fd);
	ck_assert_str_eq(job.peers[0], "127.0.0.1:5000");
	ck_assert_str_eq(job.peers[2], own_addr);
	ck_assert_int_eq(job.ncms, 0);
	cm_job_free(&job);
}
END_TEST

START_TEST(direct_size_one_needs_no_peers)
{
	clear_env();
	setenv(CM_ENV_RANK, "0", 1);
	setenv(CM_ENV_SIZE, "1", 1);
	setenv(CM_ENV_SECRET, SECRET, 1);
	setenv(CM_ENV_TRANSPORT, "direct", 1);
	struct cm_job job;
	char name[16] = "";
	ck_assert_int_eq(cm_job_from_env(&job, name, sizeof name), 0);
	ck_assert_int_eq(job.size, 1);
	cm_job_free(&job);
}
END_TEST

/* One bad value per row: variable, value, the variable the message names. */
struct bad_case {
	const char *var;
	const char *value; /* NULL: unset */
	const char *named;
};

static const struct bad_case cm_bad[] = {
    {CM_ENV_SIZE, NULL, CM_ENV_SIZE},
    {CM_ENV_SIZE, "0", CM_ENV_SIZE},
    {CM_ENV_SIZE, "-2", CM_ENV_SIZE},
    {CM_ENV_SIZE, "four", CM_ENV_SIZE},
    {CM_ENV_SIZE, "4x", CM_ENV_SIZE},
    {CM_ENV_SIZE, "", CM_ENV_SIZE},
    {CM_ENV_SIZE, "99999999999999999999", CM_ENV_SIZE},
    {CM_ENV_SIZE, " 4", CM_ENV_SIZE},
    {CM_ENV_RANK, "4", CM_ENV_RANK},
    {CM_ENV_RANK, "-1", CM_ENV_RANK},
    {CM_ENV_RANK, "one", CM_ENV_RANK},
    {CM_ENV_RANK, "", CM_ENV_RANK},
    {CM_ENV_RANK, "+1", CM_ENV_RANK},
    {CM_ENV_INCARNATION, "-1", CM_ENV_INCARNATION},
    {CM_ENV_INCARNATION, "x", CM_ENV_INCARNATION},
    {CM_ENV_INCARNATION, "4294967296", CM_ENV_INCARNATION},
    {CM_ENV_SECRET, NULL, CM_ENV_SECRET},
    {CM_ENV_SECRET, "short", CM_ENV_SECRET},
    {CM_ENV_SECRET, SECRET "0", CM_ENV_SECRET},
    {CM_ENV_SECRET, "0123456789abcdef 123456789abcdef", CM_ENV_SECRET},
    {CM_ENV_SECRET, "0123456789abcdef\t123456789abcdef", CM_ENV_SECRET},
    {CM_ENV_TRANSPORT, "tcp", CM_ENV_TRANSPORT},
    {CM_ENV_TRANSPORT, "", CM_ENV_TRANSPORT},
    {CM_ENV_CMS, NULL, CM_ENV_CMS},
    {CM_ENV_CMS, "", CM_ENV_CMS},
    {CM_ENV_CMS, "127.0.0.1", CM_ENV_CMS},
    {CM_ENV_CMS, "127.0.0.1:99999", CM_ENV_CMS},
    {CM_ENV_CMS, "127.0.0.1:-1", CM_ENV_CMS},
    {CM_ENV_CMS, "host.invalid:4000", CM_ENV_CMS},
    {CM_ENV_CMS, "127.0.0.1:4000,,127.0.0.1:4001", CM_ENV_CMS},
    {CM_ENV_CMS, "127.0.0.1:4000,", CM_ENV_CMS},
    {CM_ENV_CMS, ":4000", CM_ENV_CMS},
    {CM_ENV_CMS, "unix:/tmp/cm.sock,127.0.0.1:4001", CM_ENV_CMS}, /* abstract only */
    {CM_ENV_CMS, "unix:@,127.0.0.1:4001", CM_ENV_CMS},
    {CM_ENV_CMS, "unix:@a b,127.0.0.1:4001", CM_ENV_CMS},
    {CM_ENV_CMS,
     "unix:@"
     "0123456789012345678901234567890123456789012345678901234567890123456789"
     "0123456789012345678901234567890123456789",
     CM_ENV_CMS}, /* 110 characters: longer than sun_path */
    {CM_ENV_HOME, "0,1,0", CM_ENV_HOME},
    {CM_ENV_HOME, "0,1,0,1,0", CM_ENV_HOME},
    {CM_ENV_HOME, "0,1,2,0", CM_ENV_HOME},
    {CM_ENV_HOME, "0,1,-1,0", CM_ENV_HOME},
    {CM_ENV_HOME, "0,a,0,1", CM_ENV_HOME},
    {CM_ENV_HOME, "0,,0,1", CM_ENV_HOME},
    {CM_ENV_HOME, "", CM_ENV_HOME},
    {CM_ENV_PEERS, "127.0.0.1:1", CM_ENV_PEERS}, /* present: must have SIZE entries */
    {CM_ENV_CM_STANDBYS, "127.0.0.1:5000", CM_ENV_CM_STANDBYS}, /* one per CM */
    {CM_ENV_CM_STANDBYS, "-,-,-", CM_ENV_CM_STANDBYS},
    {CM_ENV_CM_STANDBYS, "-,nohost", CM_ENV_CM_STANDBYS},
    {CM_ENV_CM_STANDBYS, "-,", CM_ENV_CM_STANDBYS},
};

START_TEST(cm_bad_values)
{
	const struct bad_case *c = &cm_bad[_i];
	cm_env();
	if (c->value)
		setenv(c->var, c->value, 1);
	else
		unsetenv(c->var);
	expect_refused(c->named);
}
END_TEST

static const struct bad_case direct_bad[] = {
    {CM_ENV_PEERS, NULL, CM_ENV_PEERS},
    {CM_ENV_PEERS, "", CM_ENV_PEERS},
    {CM_ENV_PEERS, "127.0.0.1:5000,127.0.0.1:5001", CM_ENV_PEERS},
    {CM_ENV_PEERS, "127.0.0.1:5000,127.0.0.1:5001,127.0.0.1:5002,127.0.0.1:5003", CM_ENV_PEERS},
    {CM_ENV_PEERS, "127.0.0.1:5000,127.0.0.1,127.0.0.1:5002", CM_ENV_PEERS},
    {CM_ENV_PEERS, "127.0.0.1:5000,nohost:1,127.0.0.1:5002", CM_ENV_PEERS},
    {CM_ENV_LISTEN_FD, NULL, CM_ENV_LISTEN_FD},
    {CM_ENV_LISTEN_FD, "", CM_ENV_LISTEN_FD},
    {CM_ENV_LISTEN_FD, "-1", CM_ENV_LISTEN_FD},
    {CM_ENV_LISTEN_FD, "x", CM_ENV_LISTEN_FD},
    {CM_ENV_LISTEN_FD, "987654", CM_ENV_LISTEN_FD}, /* not open */
    {CM_ENV_LISTEN_FD, "0", CM_ENV_LISTEN_FD},      /* open, not a listening socket */
    {CM_ENV_HOME, "0,0,0", CM_ENV_HOME},            /* HOME without CMS */
    {CM_ENV_CMS, "bad", CM_ENV_CMS},                /* present: validated even for direct */
    {CM_ENV_PEERS, "127.0.0.1:5000,unix:@1a2b3,127.0.0.1:5002", CM_ENV_PEERS}, /* TCP only */
};

START_TEST(direct_bad_values)
{
	const struct bad_case *c = &direct_bad[_i];
	direct_env();
	if (c->value)
		setenv(c->var, c->value, 1);
	else
		unsetenv(c->var);
	expect_refused(c->named);
}
END_TEST

/* A connected (not listening) socket is refused as listening fd. */
START_TEST(direct_fd_not_listening)
{
	direct_env();
	int sv[2];
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	char fd[16];
	snprintf(fd, sizeof fd, "%d", sv[0]);
	setenv(CM_ENV_LISTEN_FD, fd, 1);
	expect_refused(CM_ENV_LISTEN_FD);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

/* The listening socket is not the one CHANMEM_PEERS gives this rank. */
START_TEST(direct_fd_port_mismatch)
{
	direct_env();
	setenv(CM_ENV_PEERS, "127.0.0.1:5000,127.0.0.1:5001,127.0.0.1:5002", 1);
	expect_refused(CM_ENV_LISTEN_FD);
	ck_assert_ptr_nonnull(strstr(printed, CM_ENV_PEERS));
}
END_TEST

START_TEST(transport_name_buffer_too_small)
{
	cm_env();
	struct cm_job job;
	char name[2];
	ck_assert_int_eq(parse_capturing(&job, name, sizeof name), -1);
	ck_assert_ptr_nonnull(strstr(printed, CM_ENV_TRANSPORT));
}
END_TEST

static Suite *env_suite(void)
{
	Suite *s = suite_create("transport_env");
	TCase *tc = tcase_create("env");
	tcase_add_test(tc, singleton_without_rank);
	tcase_add_test(tc, cm_job_default_home);
	tcase_add_test(tc, cm_job_unix_address);
	tcase_add_test(tc, cm_job_explicit_home_incarnation);
	tcase_add_test(tc, cm_job_standbys);
	tcase_add_test(tc, transport_defaults_to_cm);
	tcase_add_test(tc, direct_job);
	tcase_add_test(tc, direct_size_one_needs_no_peers);
	tcase_add_loop_test(tc, cm_bad_values, 0, (int)(sizeof cm_bad / sizeof cm_bad[0]));
	tcase_add_loop_test(tc, direct_bad_values, 0,
	                    (int)(sizeof direct_bad / sizeof direct_bad[0]));
	tcase_add_test(tc, direct_fd_not_listening);
	tcase_add_test(tc, direct_fd_port_mismatch);
	tcase_add_test(tc, transport_name_buffer_too_small);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(env_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
