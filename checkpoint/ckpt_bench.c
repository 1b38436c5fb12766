/* ckpt_bench: upload and fetch throughput of ckptserver and the compression
 * ratio on a realistic state. Not a test (prints numbers, no pass/fail).
 *
 *   ckpt_bench [--server PATH] [--size MiB] [--level L] [--runs N]
 *
 * Starts its own ckptserver on 127.0.0.1 in a temp directory under /tmp,
 * builds a state that is half a smooth field of doubles (what a PDE solver
 * checkpoints) and half random bytes (what does not compress), uploads it
 * in 1 MiB writes, fetches it back, checks it byte for byte, and reports
 * MB/s (10^6 bytes per second of raw image) and raw/compressed size. */
#include "config.h"

#include "ckpt_client.h"

#include <dirent.h>
#include <ftw.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SECRET "bench0bench0bench0bench0bench0be"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	return remove(path);
}

static uint8_t *make_state(size_t size)
{
	uint8_t *p = malloc(size);
	size_t half = size / 2 / sizeof(double);
	double *field = (double *)p;
	for (size_t i = 0; i < half; i++) {
		double x = (double)(i % 4096) / 4096.0, y = (double)(i / 4096) / 4096.0;
		field[i] = sin(6.28 * x) * cos(3.14 * y) + 0.001 * x * y;
	}
	uint64_t s = 88172645463325252ull;
	for (size_t i = half * sizeof(double); i < size; i++) {
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		p[i] = (uint8_t)s;
	}
	return p;
}

struct cmp_sink {
	const uint8_t *expect;
	size_t off;
	int bad;
};

static int compare_sink(void *arg, const void *data, size_t len)
{
	struct cmp_sink *c = arg;
	if (memcmp(c->expect + c->off, data, len) != 0)
		c->bad = 1;
	c->off += len;
	return 0;
}

static unsigned long long image_bytes(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	unsigned long long total = 0;
	while (d && (de = readdir(d)) != NULL) {
		if (strncmp(de->d_name, "img-", 4) != 0)
			continue;
		char path[512];
		struct stat sb;
		snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
		if (stat(path, &sb) == 0)
			total += (unsigned long long)sb.st_size;
	}
	if (d)
		closedir(d);
	return total;
}

int main(int argc, char **argv)
{
	const char *server = "./ckptserver", *level = "3";
	long mib = 100, runs = 3;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--server") == 0 && i + 1 < argc)
			server = argv[++i];
		else if (strcmp(argv[i], "--size") == 0 && i + 1 < argc)
			mib = atol(argv[++i]);
		else if (strcmp(argv[i], "--level") == 0 && i + 1 < argc)
			level = argv[++i];
		else if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc)
			runs = atol(argv[++i]);
		else {
			fprintf(stderr,
			        "usage: ckpt_bench [--server PATH] [--size MiB] [--level L] "
			        "[--runs N]\n");
			return 2;
		}
	}
	if (mib < 1 || mib > 4096 || runs < 1 || runs > 100) {
		fprintf(stderr, "ckpt_bench: --size 1..4096, --runs 1..100\n");
		return 2;
	}
	char dir[] = "/tmp/ckpt-bench-XXXXXX";
	if (mkdtemp(dir) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	int ready[2];
	if (pipe(ready) < 0)
		return 1;
	pid_t pid = fork();
	if (pid == 0) {
		close(ready[0]);
		dup2(ready[1], 3);
		setenv("CHANMEM_SECRET", SECRET, 1);
		execl(server, server, "--dir", dir, "--ready-fd", "3", "--keep", "1", "--level",
		      level, (char *)NULL);
		perror(server);
		_exit(127);
	}
	close(ready[1]);
	char addr[64] = "";
	struct pollfd p = {.fd = ready[0], .events = POLLIN};
	ssize_t n = poll(&p, 1, 10000) > 0 ? read(ready[0], addr, sizeof addr - 1) : -1;
	close(ready[0]);
	int rc = 1;
	if (n <= 0 || strchr(addr, '\n') == NULL) {
		fprintf(stderr, "ckpt_bench: %s did not start\n", server);
		goto out;
	}
	*strchr(addr, '\n') = '\0';

	size_t size = (size_t)mib << 20;
	uint8_t *state = make_state(size);
	struct ckpt_client *c = ckpt_client_new(120000);
	if (ckpt_client_connect(c, addr, SECRET) != CKPT_OK) {
		fprintf(stderr, "ckpt_bench: %s\n", ckpt_client_error(c));
		goto out;
	}
	printf("state %ld MiB (half smooth doubles, half random), zstd level %s, %ld runs\n", mib,
	       level, runs);
	for (long r = 0; r < runs; r++) {
		double t0 = now_s();
		int e = ckpt_upload_begin(c, "bench", 0, (uint64_t)r + 1);
		for (size_t off = 0; e == CKPT_OK && off < size; off += 1u << 20)
			e = ckpt_upload_write(c, state + off, 1u << 20);
		if (e == CKPT_OK)
			e = ckpt_upload_end(c);
		double t1 = now_s();
		struct ckpt_summary info;
		struct cmp_sink cs = {.expect = state};
		if (e == CKPT_OK)
			e = ckpt_fetch_latest(c, "bench", 0, &info, compare_sink, &cs);
		double t2 = now_s();
		if (e != CKPT_OK || cs.bad || cs.off != size) {
			fprintf(stderr, "ckpt_bench: run %ld failed: %s\n", r,
			        e ? ckpt_client_error(c) : "contents differ");
			goto out;
		}
		unsigned long long stored = image_bytes(dir);
		printf(
		    "run %ld: upload %.1f MB/s, fetch %.1f MB/s, stored %llu bytes, ratio %.2f\n",
		    r + 1, size / 1e6 / (t1 - t0), size / 1e6 / (t2 - t1), stored,
		    (double)size / (double)stored);
	}
	ckpt_client_free(c);
	free(state);
	rc = 0;
out:
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	return rc;
}
