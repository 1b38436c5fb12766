/* Live tests of the real ckptserver binary ($CKPTSERVER) on 127.0.0.1,
 * driven through libckptclient: what it stores and serves back. Byte-exact
 * round trips, --keep pruning, restart, uploads killed midway, many clients
 * at once, removing a job's images (DROP_JOB, --remove) and --list. Refusals are
 * test_ckpt_server_refusals.c's; the fixture is test_ckpt_server_fixture.c's. */
#include "config.h"

#include "test_ckpt_server_fixture.h"

#include "ckpt_proto.h"

#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

START_TEST(round_trip_sizes)
{
	static const size_t sizes[] = {0, 1, 4097, 1000003, CKPT_CHUNK_MAX, 20u << 20};
	struct ckpt_client *c = connect_ok();
	for (uint32_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		uint8_t *img = make_image(sizes[i], i);
		upload_ok(c, i, 100 + i, img, sizes[i]);
		expect_latest(c, i, 100 + i, img, sizes[i]);
		free(img);
	}
	/* Nothing for an unknown rank or job: NOTFOUND, connection stays. */
	void *got;
	size_t n;
	uint64_t num;
	ck_assert_int_eq(ckpt_fetch_latest_alloc(c, JOB, 99, &num, &got, &n), CKPT_E_NOTFOUND);
	ck_assert_int_eq(ckpt_fetch_latest_alloc(c, "otherjob", 0, &num, &got, &n),
	                 CKPT_E_NOTFOUND);
	uint8_t one = 42;
	upload_ok(c, 99, 1, &one, 1);
	expect_latest(c, 99, 1, &one, 1);
	/* Streaming in odd pieces equals one buffer. */
	uint8_t *img = make_image(3u << 20, 7);
	ck_assert_int_eq(ckpt_upload_begin(c, JOB, 98, 5), CKPT_OK);
	for (size_t off = 0; off < (3u << 20);) {
		size_t piece = 1 + (off * 7919) % 300000;
		if (piece > (3u << 20) - off)
			piece = (3u << 20) - off;
		ck_assert_int_eq(ckpt_upload_write(c, img + off, piece), CKPT_OK);
		off += piece;
	}
	ck_assert_int_eq(ckpt_upload_end(c), CKPT_OK);
	expect_latest(c, 98, 5, img, 3u << 20);
	free(img);
	ckpt_client_free(c);
	ck_assert_int_eq(count_files("tmp-"), 0);
}
END_TEST

START_TEST(keep_prunes_oldest)
{
	stop_server();
	const char *args[] = {"--keep", "2", NULL};
	start_server(args);
	struct ckpt_client *c = connect_ok();
	uint8_t *img[4];
	for (int i = 1; i <= 3; i++) {
		img[i] = make_image(10000 + (size_t)i, (uint32_t)i);
		upload_ok(c, 0, (uint64_t)i, img[i], 10000 + (size_t)i);
	}
	upload_ok(c, 1, 1, img[1], 10001); /* another rank is counted apart */
	expect_latest(c, 0, 3, img[3], 10003);
	ck_assert_int_eq(count_files("img-" JOB "-0-"), 2);
	ck_assert_int_eq(count_files("img-" JOB "-0-1-"), 0);
	ck_assert_int_eq(count_files("img-" JOB "-1-"), 1);
	/* An image older than the kept ones is accepted and dropped at once. */
	upload_ok(c, 0, 0, img[1], 10001);
	expect_latest(c, 0, 3, img[3], 10003);
	ck_assert_int_eq(count_files("img-" JOB "-0-"), 2);
	/* Re-uploading the latest number replaces it. */
	upload_ok(c, 0, 3, img[2], 10002);
	expect_latest(c, 0, 3, img[2], 10002);
	ck_assert_int_eq(count_files("img-" JOB "-0-"), 2);
	ckpt_client_free(c);
	for (int i = 1; i <= 3; i++)
		free(img[i]);
}
END_TEST

START_TEST(restart_keeps_images)
{
	struct ckpt_client *c = connect_ok();
	uint8_t *a = make_image(500000, 1), *b = make_image(77, 2);
	upload_ok(c, 0, 1, b, 77);
	upload_ok(c, 0, 2, a, 500000);
	upload_ok(c, 3, 9, b, 77);
	ckpt_client_free(c);
	stop_server();
	start_server(NULL);
	c = connect_ok();
	expect_latest(c, 0, 2, a, 500000);
	expect_latest(c, 3, 9, b, 77);
	ckpt_client_free(c);
	/* And after a SIGKILL too: commits were durable before PUT_OK. */
	kill_server();
	start_server(NULL);
	c = connect_ok();
	expect_latest(c, 0, 2, a, 500000);
	ckpt_client_free(c);
	free(a);
	free(b);
}
END_TEST

/* A child that uploads half an image (then _exit or pause). */
static pid_t half_upload(uint32_t rank, uint64_t number, size_t size, int die)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct ckpt_client *c = ckpt_client_new(IO_MS);
		uint8_t *img = make_image(size, 99);
		if (ckpt_client_connect(c, server_addr, SECRET) != CKPT_OK ||
		    ckpt_upload_begin(c, JOB, rank, number) != CKPT_OK ||
		    ckpt_upload_write(c, img, size / 2) != CKPT_OK)
			_exit(1);
		if (!die)
			pause(); /* killed by the parent, with the SIGKILLed server */
		_exit(0);
	}
	return pid;
}

START_TEST(killed_client_leaves_nothing)
{
	struct ckpt_client *c = connect_ok();
	uint8_t *a = make_image(300000, 5);
	upload_ok(c, 2, 1, a, 300000);
	pid_t child = half_upload(2, 2, 6u << 20, 1);
	int st = wait_bounded(child, IO_MS);
	ck_assert_msg(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "uploader failed");
	/* The server discards the temp file once it sees the connection end. */
	ck_assert_int_eq(wait_for_files("tmp-", 0, IO_MS), 0);
	expect_latest(c, 2, 1, a, 300000);
	ckpt_client_free(c);

	/* Server killed mid-upload: the next start sweeps the temp file. */
	child = half_upload(2, 3, 6u << 20, 0);
	ck_assert_int_eq(wait_for_files("tmp-", 1, IO_MS), 1);
	kill_server();
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	ck_assert_int_eq(count_files("tmp-"), 1);
	start_server(NULL);
	ck_assert_int_eq(count_files("tmp-"), 0);
	c = connect_ok();
	expect_latest(c, 2, 1, a, 300000);
	ckpt_client_free(c);
	free(a);
}
END_TEST

START_TEST(parallel_clients)
{
	enum { CLIENTS = 8 };
	pid_t kids[CLIENTS];
	for (int i = 0; i < CLIENTS; i++) {
		kids[i] = fork();
		ck_assert_int_ge(kids[i], 0);
		if (kids[i] == 0) {
			struct ckpt_client *c = ckpt_client_new(IO_MS);
			if (ckpt_client_connect(c, server_addr, SECRET) != CKPT_OK)
				_exit(2);
			for (uint64_t n = 1; n <= 3; n++) {
				size_t size = 200000 + (size_t)i * 1000 + n;
				uint8_t *img = make_image(size, (uint32_t)(i * 10 + n));
				void *got;
				size_t got_size;
				uint64_t num;
				if (ckpt_upload(c, JOB, (uint32_t)i, n, img, size) != CKPT_OK ||
				    ckpt_fetch_latest_alloc(c, JOB, (uint32_t)i, &num, &got,
				                            &got_size) != CKPT_OK ||
				    num != n || got_size != size || memcmp(got, img, size) != 0)
					_exit(3);
				free(got);
				free(img);
			}
			ckpt_client_free(c);
			_exit(0);
		}
	}
	int failed = 0;
	for (int i = 0; i < CLIENTS; i++) {
		int st = wait_bounded(kids[i], 60000);
		if (st == -1) {
			kill(kids[i], SIGKILL);
			waitpid(kids[i], NULL, 0);
		}
		if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			failed++;
	}
	ck_assert_int_eq(failed, 0);
	ck_assert_int_eq(count_files("img-"), CLIENTS * 2); /* --keep 2 default */
}
END_TEST

/* DROP_JOB removes every image of that job, and only of that job. */
START_TEST(drop_job_removes_only_its_own)
{
	struct ckpt_client *c = connect_ok();
	uint8_t *img = make_image(30000, 3);
	for (uint32_t rank = 0; rank < 2; rank++)
		for (uint64_t number = 1; number <= 2; number++)
			upload_ok(c, rank, number, img, 30000);
	ck_assert_int_eq(ckpt_upload(c, "otherjob", 0, 5, img, 1000), CKPT_OK);
	uint64_t removed = 99;
	ck_assert_int_eq(ckpt_drop_job(c, JOB, &removed), CKPT_OK);
	ck_assert_uint_eq(removed, 4);
	ck_assert_int_eq(count_files("img-" JOB "-"), 0);
	ck_assert_int_eq(count_files("img-otherjob-"), 1);
	void *got;
	size_t n;
	uint64_t num;
	ck_assert_int_eq(ckpt_fetch_latest_alloc(c, JOB, 0, &num, &got, &n), CKPT_E_NOTFOUND);
	ck_assert_int_eq(ckpt_fetch_latest_alloc(c, "otherjob", 0, &num, &got, &n), CKPT_OK);
	ck_assert_uint_eq(num, 5);
	ck_assert_uint_eq(n, 1000);
	ck_assert_int_eq(memcmp(got, img, 1000), 0);
	free(got);
	/* Nothing left of it: 0 removed, and the job can store again. */
	ck_assert_int_eq(ckpt_drop_job(c, JOB, &removed), CKPT_OK);
	ck_assert_uint_eq(removed, 0);
	upload_ok(c, 0, 3, img, 30000);
	expect_latest(c, 0, 3, img, 30000);
	ck_assert_int_eq(ckpt_drop_job(c, "bad/job", &removed), CKPT_E_ARG);
	ckpt_client_free(c);
	/* The removal survives a restart: the index says the same. */
	stop_server();
	start_server(NULL);
	c = connect_ok();
	ck_assert_int_eq(ckpt_fetch_latest_alloc(c, JOB, 1, &num, &got, &n), CKPT_E_NOTFOUND);
	expect_latest(c, 0, 3, img, 30000);
	ckpt_client_free(c);
	free(img);
}
END_TEST

/* --list: one line per job and rank (newest generation, sizes, images). */
START_TEST(list_and_remove)
{
	struct ckpt_client *c = connect_ok();
	uint8_t *img = make_image(20000, 4);
	upload_ok(c, 0, 1, img, 10000);
	upload_ok(c, 0, 2, img, 20000);
	upload_ok(c, 3, 7, img, 123);
	ck_assert_int_eq(ckpt_upload(c, "job-b", 1, 4, img, 5), CKPT_OK);
	ckpt_client_free(c);
	free(img);
	char out[4096];
	const char *list[] = {"--list", "--dir", server_dir, NULL};
	/* Not while a server uses the directory. */
	ck_assert_int_eq(run_ckptserver(list, out, sizeof out), 1);
	ck_assert_ptr_nonnull(strstr(out, "another ckptserver uses this directory"));
	stop_server();

	ck_assert_int_eq(run_ckptserver(list, out, sizeof out), 0);
	char job[80], when[40];
	unsigned rank, images;
	unsigned long long gen, size, stored;
	const char *line = strchr(out, '\n');
	ck_assert_ptr_nonnull(line);
	ck_assert_int_eq(strncmp(out, "JOB ", 4), 0);
	static const struct {
		const char *job;
		unsigned rank;
		unsigned long long gen, size;
		unsigned images;
	} want[] = {{"job-b", 1, 4, 5, 1}, {JOB, 0, 2, 20000, 2}, {JOB, 3, 7, 123, 1}};
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
		ck_assert_int_eq(sscanf(line + 1, "%79s %u %llu %llu %llu %39s %u", job, &rank,
		                        &gen, &size, &stored, when, &images),
		                 7);
		ck_assert_str_eq(job, want[i].job);
		ck_assert_uint_eq(rank, want[i].rank);
		ck_assert_uint_eq(gen, want[i].gen);
		ck_assert_uint_eq(size, want[i].size);
		ck_assert_uint_eq(images, want[i].images);
		ck_assert_uint_gt(stored, 0);
		ck_assert_int_eq((int)strlen(when), 20); /* 2026-01-02T03:04:05Z */
		line = strchr(line + 1, '\n');
		ck_assert_ptr_nonnull(line);
	}
	ck_assert_str_eq(line, "\n");

	const char *rm[] = {"--remove", JOB, "--dir", server_dir, NULL};
	ck_assert_int_eq(run_ckptserver(rm, out, sizeof out), 0);
	ck_assert_ptr_nonnull(strstr(out, "removed 3 image(s) of job " JOB));
	ck_assert_int_eq(count_files("img-" JOB "-"), 0);
	ck_assert_int_eq(count_files("img-job-b-"), 1);
	ck_assert_int_eq(run_ckptserver(rm, out, sizeof out), 1);
	ck_assert_ptr_nonnull(strstr(out, "no images of job " JOB));
	ck_assert_int_eq(run_ckptserver(list, out, sizeof out), 0);
	ck_assert_ptr_null(strstr(out, JOB));
	ck_assert_ptr_nonnull(strstr(out, "job-b "));
	const char *rm_b[] = {"--remove", "job-b", "--dir", server_dir, NULL};
	ck_assert_int_eq(run_ckptserver(rm_b, out, sizeof out), 0);
	ck_assert_int_eq(run_ckptserver(list, out, sizeof out), 0);
	ck_assert_ptr_nonnull(strstr(out, ": no images"));
	/* The server still starts on what is left. */
	start_server(NULL);
}
END_TEST

/* What --list and --remove refuse: never a store created or touched. */
START_TEST(list_refusals)
{
	stop_server();
	char out[4096], missing[128], empty[128];
	snprintf(missing, sizeof missing, "%s/missing", server_dir);
	snprintf(empty, sizeof empty, "%s/empty", server_dir);
	ck_assert_int_eq(mkdir(empty, 0700), 0);
	const char *list_missing[] = {"--list", "--dir", missing, NULL};
	ck_assert_int_eq(run_ckptserver(list_missing, out, sizeof out), 1);
	ck_assert_ptr_nonnull(strstr(out, "No such file or directory"));
	ck_assert_int_eq(access(missing, F_OK), -1);
	const char *list_empty[] = {"--list", "--dir", empty, NULL};
	ck_assert_int_eq(run_ckptserver(list_empty, out, sizeof out), 1);
	ck_assert_ptr_nonnull(strstr(out, "not a checkpoint directory"));
	const char *both[] = {"--list", "--remove", JOB, "--dir", server_dir, NULL};
	ck_assert_int_eq(run_ckptserver(both, out, sizeof out), 2);
	const char *bad_job[] = {"--remove", "a/b", "--dir", server_dir, NULL};
	ck_assert_int_eq(run_ckptserver(bad_job, out, sizeof out), 2);
	ck_assert_ptr_nonnull(strstr(out, "not a job id"));
	const char *no_dir[] = {"--list", NULL};
	ck_assert_int_eq(run_ckptserver(no_dir, out, sizeof out), 2);
	/* A damaged index: the start-up refusal, word for word. */
	char data[160];
	snprintf(data, sizeof data, "%s/data.mdb", server_dir);
	FILE *f = fopen(data, "r+");
	ck_assert_ptr_nonnull(f);
	fseek(f, 100, SEEK_SET);
	int ch = fgetc(f);
	fseek(f, 100, SEEK_SET);
	fputc(ch ^ 0x5a, f);
	fclose(f);
	const char *list[] = {"--list", "--dir", server_dir, NULL};
	ck_assert_int_eq(run_ckptserver(list, out, sizeof out), 1);
	ck_assert_ptr_nonnull(strstr(out, "the checkpoint store is damaged"));
	const char *rm[] = {"--remove", JOB, "--dir", server_dir, NULL};
	ck_assert_int_eq(run_ckptserver(rm, out, sizeof out), 1);
	ck_assert_ptr_nonnull(strstr(out, "the checkpoint store is damaged"));
}
END_TEST

static void add_tests(TCase *tc)
{
	tcase_add_test(tc, round_trip_sizes);
	tcase_add_test(tc, keep_prunes_oldest);
	tcase_add_test(tc, restart_keeps_images);
	tcase_add_test(tc, killed_client_leaves_nothing);
	tcase_add_test(tc, parallel_clients);
	tcase_add_test(tc, drop_job_removes_only_its_own);
	tcase_add_test(tc, list_and_remove);
	tcase_add_test(tc, list_refusals);
}

int main(void)
{
	return run_live_tests("ckpt_server", add_tests);
}
