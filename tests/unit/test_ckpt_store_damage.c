/* A damaged store: a real ckptserver store (four ranks, two images each) is
 * copied and bytes are flipped in its data.mdb or in an image file, one
 * deterministic pattern per seed. Each run must end in a clean refusal
 * (exit 1, a message naming the directory) or in a server that serves
 * every intact latest image byte for byte and refuses a damaged one with
 * CORRUPT: never a signal, never wrong bytes, never an image lost
 * silently. Then --reset-corrupt-store moves a damaged store aside. */
#include "config.h"

#include "test_ckpt_server_fixture.h"

#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define RANKS 4
#define SEEDS 80
#define MAX_FILES 16

struct file {
	char name[200];
	uint8_t *data;
	size_t size;
	int rank, number; /* of an image file; -1 otherwise */
};

static struct file files[MAX_FILES];
static int nfiles;
static uint8_t *images[RANKS];
static size_t sizes[RANKS];

static uint8_t *slurp(const char *path, size_t *size)
{
	FILE *f = fopen(path, "rb");
	ck_assert_ptr_nonnull(f);
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *p = malloc((size_t)n + 1);
	ck_assert_ptr_nonnull(p);
	ck_assert_uint_eq(fread(p, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*size = (size_t)n;
	return p;
}

/* The pristine store: made by the fixture's server, stopped cleanly. */
static void make_store(void)
{
	struct ckpt_client *c = connect_ok();
	for (int r = 0; r < RANKS; r++) {
		size_t first = 2000 + (size_t)r * 3000;
		uint8_t *old = make_image(first, (uint32_t)(r * 100 + 1));
		upload_ok(c, (uint32_t)r, 1, old, first);
		free(old);
		sizes[r] = 5000 + (size_t)r * 7000;
		images[r] = make_image(sizes[r], (uint32_t)(r * 100 + 2));
		upload_ok(c, (uint32_t)r, 2, images[r], sizes[r]);
	}
	ckpt_client_free(c);
	stop_server();
	DIR *d = opendir(server_dir);
	ck_assert_ptr_nonnull(d);
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, "data.mdb") != 0 && strcmp(de->d_name, "index.sum") != 0 &&
		    strncmp(de->d_name, "img-", 4) != 0)
			continue;
		ck_assert_int_lt(nfiles, MAX_FILES);
		struct file *f = &files[nfiles++];
		ck_assert_int_lt(snprintf(f->name, sizeof f->name, "%s", de->d_name),
		                 (int)sizeof f->name);
		char path[400];
		ck_assert_int_lt(snprintf(path, sizeof path, "%s/%s", server_dir, de->d_name),
		                 (int)sizeof path);
		f->data = slurp(path, &f->size);
		f->rank = f->number = -1;
		sscanf(f->name, "img-" JOB "-%d-%d-", &f->rank, &f->number);
	}
	closedir(d);
	ck_assert_int_eq(nfiles, 2 + 2 * RANKS);
}

static uint64_t next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Writes the store into dir with this seed's flips; the rank whose latest
 * image file was damaged, or -1. */
static int damaged_copy(const char *dir, int seed, int into_index)
{
	ck_assert_int_eq(mkdir(dir, 0700), 0);
	uint64_t s = 0x9e3779b97f4a7c15ull * (uint64_t)(seed + 1);
	int target = -1;
	for (int i = 0; i < nfiles; i++)
		if (into_index ? strcmp(files[i].name, "data.mdb") == 0
		               : files[i].rank >= 0 && (int)(next(&s) % 2) == 0 && target < 0)
			target = i;
	if (target < 0)
		target = 2; /* some image file: the first two are not always images */
	while (files[target].rank < 0 && !into_index)
		target = (target + 1) % nfiles;
	int hurt = -1;
	for (int i = 0; i < nfiles; i++) {
		uint8_t *copy = malloc(files[i].size);
		memcpy(copy, files[i].data, files[i].size);
		if (i == target) {
			int flips = 1 + (int)(next(&s) % 4);
			for (int k = 0; k < flips; k++)
				copy[next(&s) % files[i].size] ^= (uint8_t)(1 + next(&s) % 255);
			if (files[i].number == 2)
				hurt = files[i].rank;
		}
		char path[400];
		ck_assert_int_lt(snprintf(path, sizeof path, "%s/%s", dir, files[i].name),
		                 (int)sizeof path);
		int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(write(fd, copy, files[i].size), (ssize_t)files[i].size);
		close(fd);
		free(copy);
	}
	return hurt;
}

/* Starts ckptserver on dir with its stderr in errpath; pid or -1. */
static pid_t spawn_logged(const char *dir, const char *errpath, int reset, int *status)
{
	const char *args[] = {"--dir", dir, reset ? "--reset-corrupt-store" : NULL, NULL};
	int saved = dup(2);
	int fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_ge(fd, 0);
	dup2(fd, 2);
	close(fd);
	pid_t pid = spawn(SECRET, args, server_addr, status);
	dup2(saved, 2);
	close(saved);
	return pid;
}

static int file_has(const char *path, const char *needle)
{
	size_t n;
	uint8_t *p = slurp(path, &n);
	p[n] = 0;
	int has = strstr((char *)p, needle) != NULL;
	free(p);
	return has;
}

enum { REFUSED, ALL_SERVED, DAMAGED_REFUSED_ON_FETCH };

/* One seed: refused at start, or every intact latest image served. */
static int run_seed(int seed, int into_index, char *dir, size_t dirlen)
{
	snprintf(dir, dirlen, "%s/s%d", server_dir, seed);
	char errpath[200];
	snprintf(errpath, sizeof errpath, "%s/s%d.err", server_dir, seed);
	int hurt = damaged_copy(dir, seed, into_index);
	int st = 0;
	pid_t pid = spawn_logged(dir, errpath, 0, &st);
	if (pid < 0) {
		ck_assert_msg(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 1,
		              "seed %d: status %#x (signal %d)", seed, st,
		              WIFSIGNALED(st) ? WTERMSIG(st) : 0);
		char msg[300];
		snprintf(msg, sizeof msg, "--dir %s: the checkpoint store is damaged", dir);
		ck_assert_msg(file_has(errpath, msg), "seed %d: refused without the message", seed);
		return REFUSED;
	}
	int outcome = ALL_SERVED;
	for (int r = 0; r < RANKS; r++) {
		struct ckpt_client *c = connect_ok();
		uint64_t number = 0;
		void *got = NULL;
		size_t got_size = 0;
		int rc = ckpt_fetch_latest_alloc(c, JOB, (uint32_t)r, &number, &got, &got_size);
		if (rc == CKPT_OK) {
			ck_assert_msg(number == 2 && got_size == sizes[r] &&
			                  memcmp(got, images[r], sizes[r]) == 0,
			              "seed %d rank %d: wrong image served", seed, r);
		} else {
			ck_assert_msg(rc == CKPT_E_CORRUPT && r == hurt,
			              "seed %d rank %d: intact image not served: %s", seed, r,
			              ckpt_client_error(c));
			outcome = DAMAGED_REFUSED_ON_FETCH;
		}
		free(got);
		ckpt_client_free(c);
	}
	ck_assert_int_eq(hurt >= 0, outcome == DAMAGED_REFUSED_ON_FETCH);
	kill(pid, SIGTERM);
	st = wait_bounded(pid, IO_MS);
	ck_assert_msg(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "seed %d: stop status %#x",
	              seed, st);
	return outcome;
}

START_TEST(test_flipped_bytes)
{
	make_store();
	int count[2][3] = {{0}};
	char dir[200], refused_dir[200] = "";
	for (int seed = 0; seed < SEEDS; seed++) {
		/* Three seeds in four hit the index, the rest an image file. */
		int into_index = seed % 4 != 3;
		int outcome = run_seed(seed, into_index, dir, sizeof dir);
		count[into_index][outcome]++;
		if (outcome == REFUSED && refused_dir[0] == '\0')
			snprintf(refused_dir, sizeof refused_dir, "%s", dir);
	}
	printf("data.mdb flips: %d refused, %d served intact; image flips: %d refused, %d all "
	       "served, %d damaged image refused on fetch\n",
	       count[1][REFUSED], count[1][ALL_SERVED] + count[1][DAMAGED_REFUSED_ON_FETCH],
	       count[0][REFUSED], count[0][ALL_SERVED], count[0][DAMAGED_REFUSED_ON_FETCH]);
	ck_assert_msg(refused_dir[0], "no seed damaged the index detectably");

	/* Asked to, the server moves the damaged store aside and starts empty. */
	char errpath[300];
	snprintf(errpath, sizeof errpath, "%s.reset.err", refused_dir);
	int st = 0;
	pid_t pid = spawn_logged(refused_dir, errpath, 1, &st);
	ck_assert_msg(pid > 0, "--reset-corrupt-store: status %#x", st);
	ck_assert(file_has(errpath, "the damaged store was moved to"));
	struct ckpt_client *c = connect_ok();
	uint64_t number;
	void *got = NULL;
	size_t got_size;
	ck_assert_int_eq(ckpt_fetch_latest_alloc(c, JOB, 0, &number, &got, &got_size),
	                 CKPT_E_NOTFOUND);
	upload_ok(c, 0, 7, images[0], sizes[0]);
	expect_latest(c, 0, 7, images[0], sizes[0]);
	ckpt_client_free(c);
	kill(pid, SIGTERM);
	st = wait_bounded(pid, IO_MS);
	ck_assert(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	DIR *d = opendir(refused_dir);
	ck_assert_ptr_nonnull(d);
	struct dirent *de;
	int aside = 0;
	while ((de = readdir(d)) != NULL) {
		if (strncmp(de->d_name, "corrupt-", 8) != 0)
			continue;
		char path[500];
		snprintf(path, sizeof path, "%s/%s/data.mdb", refused_dir, de->d_name);
		aside += access(path, F_OK) == 0;
	}
	closedir(d);
	ck_assert_int_eq(aside, 1);
	for (int r = 0; r < RANKS; r++)
		free(images[r]);
}
END_TEST

static void add_tests(TCase *tc)
{
	tcase_add_test(tc, test_flipped_bytes);
}

int main(void)
{
	return run_live_tests("ckpt_store_damage", add_tests);
}
