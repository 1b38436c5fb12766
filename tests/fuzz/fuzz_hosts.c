/* libFuzzer target: cmrun's hosts files and --host lists
 * (dispatcher/hosts.c). The first byte picks the number of ranks to place;
 * the rest is the file (read through a memfd, as cmrun reads a path) and,
 * up to its first NUL, a --host list. What parses must place the ranks on
 * hosts of the list. */
#define _GNU_SOURCE
#include "config.h"

#include "hosts.h"
#include "output.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* hosts.c reports placements through cmrun's output; nothing to say here. */
void output_verbose(const char *fmt, ...)
{
	(void)fmt;
}

static void check(struct cmrun_hosts *h, int nranks)
{
	if (hosts_place(h, nranks) != 0)
		return;
	for (int r = 0; r < nranks; r++) {
		int at = hosts_of_rank(h, r);
		if (at < 0 || at >= h->count)
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > 65536)
		return 0;
	int nranks = 1 + data[0] % 64;
	data++;
	size--;
	char err[512];
	struct cmrun_hosts h;
	int fd = memfd_create("hosts", MFD_CLOEXEC);
	if (fd < 0)
		return 0;
	if (write(fd, data, size) == (ssize_t)size) {
		char path[64];
		snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
		if (hosts_parse_file(path, &h, err, sizeof err) == 0) {
			check(&h, nranks);
			hosts_free(&h);
		}
	}
	close(fd);
	char *list = strndup((const char *)data, size);
	if (list && hosts_parse_list(list, &h, err, sizeof err) == 0) {
		check(&h, nranks);
		hosts_free(&h);
	}
	free(list);
	return 0;
}
