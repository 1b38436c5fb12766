/* Helpers shared by the MPI integration test programs (see testutil.h). */
#include "testutil.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int tu_rank = -1;
int tu_size = 0;
const char *tu_prog = "test";

void tu_init(int *argc, char ***argv, const char *prog)
{
	tu_prog = prog;
	int flag = -1;
	if (MPI_Initialized(&flag) != MPI_SUCCESS || flag != 0) {
		fprintf(stderr, "%s: FAIL: MPI_Initialized before MPI_Init gave %d\n", prog, flag);
		exit(TU_FAIL_CODE);
	}
	if (MPI_Init(argc, argv) != MPI_SUCCESS) {
		fprintf(stderr, "%s: FAIL: MPI_Init failed\n", prog);
		exit(TU_FAIL_CODE);
	}
	TU_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &tu_rank));
	TU_MPI(MPI_Comm_size(MPI_COMM_WORLD, &tu_size));
}

void tu_fail(const char *fmt, ...)
{
	char what[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s: rank %d: FAIL: %s\n", tu_prog, tu_rank, what);
	fflush(stderr);
	fflush(stdout);
	MPI_Abort(MPI_COMM_WORLD, TU_FAIL_CODE);
	exit(TU_FAIL_CODE); /* MPI_Abort does not return; be sure anyway */
}

const char *tu_err_name(int code)
{
	static const struct {
		int cls;
		const char *name;
	} names[] = {
	    {MPI_SUCCESS, "MPI_SUCCESS"},
	    {MPI_ERR_BUFFER, "MPI_ERR_BUFFER"},
	    {MPI_ERR_COUNT, "MPI_ERR_COUNT"},
	    {MPI_ERR_TYPE, "MPI_ERR_TYPE"},
	    {MPI_ERR_TAG, "MPI_ERR_TAG"},
	    {MPI_ERR_COMM, "MPI_ERR_COMM"},
	    {MPI_ERR_RANK, "MPI_ERR_RANK"},
	    {MPI_ERR_REQUEST, "MPI_ERR_REQUEST"},
	    {MPI_ERR_ROOT, "MPI_ERR_ROOT"},
	    {MPI_ERR_GROUP, "MPI_ERR_GROUP"},
	    {MPI_ERR_OP, "MPI_ERR_OP"},
	    {MPI_ERR_TOPOLOGY, "MPI_ERR_TOPOLOGY"},
	    {MPI_ERR_DIMS, "MPI_ERR_DIMS"},
	    {MPI_ERR_ARG, "MPI_ERR_ARG"},
	    {MPI_ERR_UNKNOWN, "MPI_ERR_UNKNOWN"},
	    {MPI_ERR_TRUNCATE, "MPI_ERR_TRUNCATE"},
	    {MPI_ERR_OTHER, "MPI_ERR_OTHER"},
	    {MPI_ERR_INTERN, "MPI_ERR_INTERN"},
	    {MPI_ERR_IN_STATUS, "MPI_ERR_IN_STATUS"},
	    {MPI_ERR_PENDING, "MPI_ERR_PENDING"},
	    {MPI_ERR_INFO_KEY, "MPI_ERR_INFO_KEY"},
	    {MPI_ERR_INFO_VALUE, "MPI_ERR_INFO_VALUE"},
	    {MPI_ERR_INFO_NOKEY, "MPI_ERR_INFO_NOKEY"},
	    {MPI_ERR_INFO, "MPI_ERR_INFO"},
	    {MPI_ERR_KEYVAL, "MPI_ERR_KEYVAL"},
	};
	int cls = code;
	if (code != MPI_SUCCESS && MPI_Error_class(code, &cls) != MPI_SUCCESS)
		return "(MPI_Error_class failed)";
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (names[i].cls == cls)
			return names[i].name;
	return "(unnamed error class)";
}

long tu_arg_long(const char *text, long min, long max, const char *what, const char *args_usage)
{
	char *end;
	long v = strtol(text, &end, 10);
	if (end == text || *end != '\0' || v < min || v > max) {
		if (tu_rank == 0)
			fprintf(stderr, "usage: %s %s\n%s: %s: '%s'\n", tu_prog, args_usage,
			        tu_prog, what, text);
		MPI_Abort(MPI_COMM_WORLD, 2);
		exit(2);
	}
	return v;
}

void tu_require_size(int min, int max)
{
	if (tu_size < min || tu_size > max) {
		if (tu_rank == 0)
			fprintf(stderr, "%s: needs %d to %d ranks, got %d\n", tu_prog, min, max,
			        tu_size);
		tu_fail("wrong number of ranks: %d", tu_size);
	}
}

uint64_t tu_rand(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* The 8 bytes of pattern word k (little-endian whatever the host). */
static void pattern_word(uint64_t seed, uint64_t k, unsigned char out[8])
{
	uint64_t state = seed * 0x100000001b3ULL + k;
	uint64_t w = tu_rand(&state);
	for (int i = 0; i < 8; i++)
		out[i] = (unsigned char)(w >> (8 * i));
}

void tu_fill(void *buf, size_t len, uint64_t seed)
{
	unsigned char *p = buf;
	unsigned char word[8];
	for (size_t off = 0; off < len; off += 8) {
		pattern_word(seed, off / 8, word);
		size_t n = len - off < 8 ? len - off : 8;
		memcpy(p + off, word, n);
	}
}

long tu_verify(const void *buf, size_t len, uint64_t seed)
{
	const unsigned char *p = buf;
	unsigned char word[8];
	for (size_t off = 0; off < len; off += 8) {
		pattern_word(seed, off / 8, word);
		size_t n = len - off < 8 ? len - off : 8;
		if (memcmp(p + off, word, n) != 0) {
			for (size_t i = 0; i < n; i++)
				if (p[off + i] != word[i])
					return (long)(off + i);
		}
	}
	return -1;
}

uint64_t tu_hash(uint64_t h, const void *buf, size_t len)
{
	const unsigned char *p = buf;
	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

uint64_t tu_hash_u64(uint64_t h, uint64_t v)
{
	unsigned char le[8];
	for (int i = 0; i < 8; i++)
		le[i] = (unsigned char)(v >> (8 * i));
	return tu_hash(h, le, sizeof(le));
}

void tu_sleep_ms(int ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

void tu_print_ranked(const char *line)
{
	enum { LINE_MAX_LEN = 256 };
	if (tu_rank != 0) {
		size_t n = strnlen(line, LINE_MAX_LEN - 1);
		TU_MPI(MPI_Send(line, (int)n, MPI_CHAR, 0, TU_TAG_REPORT, MPI_COMM_WORLD));
		return;
	}
	printf("%s\n", line);
	char buf[LINE_MAX_LEN];
	for (int r = 1; r < tu_size; r++) {
		MPI_Status st;
		int n = -1;
		TU_MPI(MPI_Recv(buf, LINE_MAX_LEN - 1, MPI_CHAR, r, TU_TAG_REPORT, MPI_COMM_WORLD,
		                &st));
		TU_MPI(MPI_Get_count(&st, MPI_CHAR, &n));
		TU_CHECK(n >= 0 && n < LINE_MAX_LEN, "report line from rank %d: count %d", r, n);
		buf[n] = '\0';
		printf("%s\n", buf);
	}
	fflush(stdout);
}

int tu_finalize(void)
{
	fflush(stdout);
	int flag = -1;
	TU_MPI(MPI_Finalized(&flag));
	TU_CHECK(flag == 0, "MPI_Finalized before MPI_Finalize gave %d", flag);
	if (MPI_Finalize() != MPI_SUCCESS) {
		fprintf(stderr, "%s: rank %d: FAIL: MPI_Finalize failed\n", tu_prog, tu_rank);
		return TU_FAIL_CODE;
	}
	flag = -1;
	if (MPI_Finalized(&flag) != MPI_SUCCESS || flag != 1) {
		fprintf(stderr, "%s: rank %d: FAIL: MPI_Finalized after MPI_Finalize gave %d\n",
		        tu_prog, tu_rank, flag);
		return TU_FAIL_CODE;
	}
	return 0;
}
