/* machlimits: the machine's own limits that a relay's bandwidth is read
 * against, measured in the benchmark's run (netpipe/bench):
 *
 *   fresh   memcpy into memory never touched before (every page faulted in
 *           and zeroed by the kernel first): what a log that keeps every
 *           message in new memory pays per byte
 *   reused  memcpy into memory already faulted in, larger than the caches:
 *           what a log that reuses its buffers pays
 *   write   sequential buffered write() of 4 MiB blocks to a new file in
 *           DIR (the spill store's filesystem), then the same with the
 *           fdatasync that makes it reach the disk; the file is removed
 *
 *   machlimits [--mem-bytes B] [--disk-dir DIR] [--disk-bytes B]
 *
 * Prints one "NAME MBPS MIBPS" line per measure, MBPS in NetPIPE's Mbps
 * (bits / (s * 2^20)) so a curve's point divides by it directly, MIBPS in
 * MiB/s. Plain C, no MPI. Exit status 2 on a usage error, 1 when a measure
 * fails. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define CHUNK ((size_t)4 << 20) /* NetPIPE's headline size, and a spill write's */

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void report(const char *name, size_t bytes, double seconds)
{
	double mibps = seconds > 0 ? (double)bytes / seconds / (1024.0 * 1024.0) : 0;
	printf("%s %.1f %.1f\n", name, mibps * 8, mibps);
	fflush(stdout);
}

/* Keeps the compiler from dropping copies nobody reads. */
static volatile unsigned char sink;

/* Copies bytes in CHUNK pieces from a warm source into a new anonymous
 * mapping, each page touched for the first time by the copy. */
static int measure_fresh(const unsigned char *src, size_t bytes)
{
	unsigned char *dst =
	    mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (dst == MAP_FAILED) {
		fprintf(stderr, "machlimits: mmap %zu bytes: %s\n", bytes, strerror(errno));
		return -1;
	}
	double start = now();
	for (size_t off = 0; off + CHUNK <= bytes; off += CHUNK)
		memcpy(dst + off, src, CHUNK);
	double seconds = now() - start;
	sink = dst[bytes / 2];
	munmap(dst, bytes);
	report("fresh", bytes / CHUNK * CHUNK, seconds);
	return 0;
}

/* The same copies into a buffer faulted in beforehand, 64 MiB (past any
 * cache here) reused round robin. */
static int measure_reused(const unsigned char *src, size_t bytes)
{
	const size_t ring = (size_t)64 << 20;
	unsigned char *dst = malloc(ring);
	if (dst == NULL) {
		fprintf(stderr, "machlimits: out of memory\n");
		return -1;
	}
	memset(dst, 1, ring);
	double start = now();
	size_t done = 0;
	for (size_t off = 0; done + CHUNK <= bytes; done += CHUNK, off = (off + CHUNK) % ring)
		memcpy(dst + off, src, CHUNK);
	double seconds = now() - start;
	sink = dst[ring / 2];
	free(dst);
	report("reused", done, seconds);
	return 0;
}

static int write_all(int fd, const unsigned char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Two lines: "write" (the write() calls only: what a writer that does not
 * sync sees while the page cache takes it) and "write+sync" (until
 * fdatasync returns: what the disk sustains). */
static int measure_write(const unsigned char *src, const char *dir, size_t bytes)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/machlimits-XXXXXX", dir);
	int fd = mkstemp(path);
	if (fd < 0) {
		fprintf(stderr, "machlimits: cannot create a file in %s: %s\n", dir,
		        strerror(errno));
		return -1;
	}
	unlink(path); /* removed whatever happens next */
	double start = now();
	size_t done = 0;
	int rc = 0;
	for (; done + CHUNK <= bytes; done += CHUNK)
		if (write_all(fd, src, CHUNK) < 0) {
			fprintf(stderr, "machlimits: write to %s: %s\n", dir, strerror(errno));
			rc = -1;
			break;
		}
	double written = now() - start;
	if (rc == 0 && fdatasync(fd) < 0) {
		fprintf(stderr, "machlimits: fdatasync in %s: %s\n", dir, strerror(errno));
		rc = -1;
	}
	double synced = now() - start;
	close(fd);
	if (rc == 0) {
		report("write", done, written);
		report("write+sync", done, synced);
	}
	return rc;
}

static int parse_bytes(const char *text, size_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(text, &end, 10);
	unsigned long long unit = 1;
	if (strcmp(end, "M") == 0 || strcmp(end, "MiB") == 0)
		unit = 1ull << 20;
	else if (strcmp(end, "G") == 0 || strcmp(end, "GiB") == 0)
		unit = 1ull << 30;
	else if (*end != '\0')
		return -1;
	if (errno || end == text || text[0] == '-' || v == 0 || v > (64ull << 30) / unit)
		return -1;
	*out = (size_t)(v * unit);
	return *out >= CHUNK ? 0 : -1;
}

int main(int argc, char **argv)
{
	size_t mem_bytes = (size_t)512 << 20, disk_bytes = (size_t)1 << 30;
	const char *dir = NULL;
	for (int i = 1; i < argc; i++) {
		const char *opt = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
		int bad = val == NULL;
		if (strcmp(opt, "--mem-bytes") == 0 && val)
			bad = parse_bytes(val, &mem_bytes) < 0;
		else if (strcmp(opt, "--disk-bytes") == 0 && val)
			bad = parse_bytes(val, &disk_bytes) < 0;
		else if (strcmp(opt, "--disk-dir") == 0 && val)
			dir = val;
		else
			bad = 1;
		if (bad) {
			fprintf(
			    stderr,
			    "usage: machlimits [--mem-bytes B] [--disk-dir DIR] [--disk-bytes B]\n"
			    "  sizes: bytes, or with M/MiB or G/GiB, at least 4MiB\n");
			return 2;
		}
		i++;
	}
	unsigned char *src = malloc(CHUNK);
	if (src == NULL)
		return 1;
	for (size_t i = 0; i < CHUNK; i++)
		src[i] = (unsigned char)(i * 131 + 7);
	int rc = 0;
	rc |= measure_fresh(src, mem_bytes);
	rc |= measure_reused(src, mem_bytes);
	if (dir)
		rc |= measure_write(src, dir, disk_bytes);
	free(src);
	return rc ? 1 : 0;
}
