/* The program's standard input, logged and replayed like MPI_Wtime.
 *
 * What a rank reads from stdin is input from outside, so a re-executed rank
 * must read the same bytes at the same points. Two halves make that so:
 *
 * - The bytes. cmrun keeps everything it relayed to rank 0 and feeds each
 *   new incarnation of rank 0 the whole stream again from its first byte
 *   (dispatcher/input.c): the stream is the same in every incarnation.
 * - The boundaries. How many bytes one read(2) of a pipe returns depends on
 *   timing, and so does where EOF shows (a read that returns 0). Under the
 *   cm transport `stdin` is replaced at MPI_Init by a stdio stream whose
 *   read function logs the length of every read (kind CM_EV_STDIN, an
 *   8-byte LE count, 0 for EOF) as an event at the home CM, before anything
 *   the rank sends after it. A re-execution gets the logged length back and
 *   returns exactly that many bytes of the same stream (reading on while it
 *   has fewer, keeping the surplus for the next read when it has more).
 *
 * Bytes read ahead of a logged length wait in `carry`; bytes the original
 * stdin had buffered before MPI_Init (the program may read before it) start
 * `carry`, since its reads before MPI_Init are not logged: the
 * re-execution repeats them on the same stream.
 *
 * Checkpoints. An image records `consumed` (bytes the program has taken
 * from the stream since MPI_Init: delivered to stdio minus what stdio still
 * buffers) and `delivered` (bytes the read function has returned). A rank
 * restored from it skips `consumed` bytes, then returns the next
 * delivered - consumed bytes without an event: the dead incarnation's
 * stdio buffer held them, no read of it stands in the log for them. The
 * reads after that follow the log from the image's event index.
 *
 * Only reads through `stdin` (scanf, fgets, getchar, fread...) are logged;
 * read(2) on descriptor 0 directly is not (its bytes are the same in a
 * re-execution, its lengths may differ). */
#include <config.h>

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mpi_internal.h"
#include "protocol.h"
#include "stdin_log.h"

static struct {
	FILE *stream; /* ours, installed as stdin; NULL: stdin is left alone */
	FILE *old;    /* libc's stdin, put back if the program reopens stdin */
	uint8_t *carry;
	size_t carry_pos, carry_len, carry_cap;
	/* Offset (in the stream after MPI_Init) of the next byte stream_read
	 * returns; a restored rank starts at the image's `consumed`. */
	uint64_t delivered;
	uint64_t skip;      /* restored: bytes to drop before anything else */
	uint64_t free_left; /* restored: bytes returned without an event */
} in;

static int logged(void)
{
	return cm_mpi.initialized && !cm_mpi.finalized && cm_mpi.transport.event != NULL &&
	       pthread_equal(pthread_self(), cm_mpi.main_thread);
}

static int carry_reserve(size_t n)
{
	if (in.carry_pos > 0 && in.carry_pos == in.carry_len)
		in.carry_pos = in.carry_len = 0;
	if (in.carry_len + n <= in.carry_cap)
		return 0;
	if (in.carry_pos > 0) {
		memmove(in.carry, in.carry + in.carry_pos, in.carry_len - in.carry_pos);
		in.carry_len -= in.carry_pos;
		in.carry_pos = 0;
		if (in.carry_len + n <= in.carry_cap)
			return 0;
	}
	size_t cap = in.carry_cap ? in.carry_cap : 4096;
	while (cap < in.carry_len + n)
		cap *= 2;
	uint8_t *p = realloc(in.carry, cap);
	if (p == NULL)
		return -1;
	in.carry = p;
	in.carry_cap = cap;
	return 0;
}

/* Puts bytes back in front of what is carried (they came before it). */
static int unread(const char *buf, size_t n)
{
	if (n == 0)
		return 0;
	if (in.carry_pos >= n) {
		in.carry_pos -= n;
		memcpy(in.carry + in.carry_pos, buf, n);
		return 0;
	}
	size_t rest = in.carry_len - in.carry_pos;
	if (carry_reserve(n) < 0)
		return -1;
	memmove(in.carry + n, in.carry + in.carry_pos, rest);
	memcpy(in.carry, buf, n);
	in.carry_pos = 0;
	in.carry_len = n + rest;
	return 0;
}

/* One chunk of the stream: from carry if it holds any, else one read of
 * descriptor 0. 0 at EOF, -1 on error (errno). */
static ssize_t take(char *buf, size_t size)
{
	size_t have = in.carry_len - in.carry_pos;
	if (have > 0) {
		size_t n = have < size ? have : size;
		memcpy(buf, in.carry + in.carry_pos, n);
		in.carry_pos += n;
		return (ssize_t)n;
	}
	for (;;) {
		ssize_t n = read(STDIN_FILENO, buf, size);
		if (n >= 0 || errno != EINTR)
			return n;
	}
}

/* Exactly n bytes (fewer only at EOF or on error). */
static ssize_t take_all(char *buf, size_t n)
{
	size_t got = 0;
	while (got < n) {
		ssize_t k = take(buf + got, n - got);
		if (k < 0)
			return got ? (ssize_t)got : -1;
		if (k == 0)
			break;
		got += (size_t)k;
	}
	return (ssize_t)got;
}

static void die(const char *what)
{
	fprintf(stderr, "chanmem: rank %d: stdin: %s\n", cm_mpi.world_rank, what);
	fflush(stderr);
	_exit(1);
}

static ssize_t stream_read(void *cookie, char *buf, size_t size)
{
	(void)cookie;
	while (in.skip > 0) {
		char junk[4096];
		ssize_t k = take(junk, in.skip < sizeof junk ? (size_t)in.skip : sizeof junk);
		if (k <= 0)
			die("the input ended before the position the checkpoint image recorded");
		in.skip -= (uint64_t)k;
	}
	if (size == 0)
		return 0;
	if (in.free_left > 0) {
		/* What the restored image's stdio buffer held: no event. */
		size_t want = in.free_left < size ? (size_t)in.free_left : size;
		ssize_t k = take_all(buf, want);
		if (k < (ssize_t)want)
			die("the input ended before the position the checkpoint image recorded");
		in.free_left -= want;
		in.delivered += want;
		return k;
	}
	ssize_t n = take(buf, size);
	if (n < 0 || !logged()) {
		if (n > 0)
			in.delivered += (uint64_t)n;
		return n; /* an error is not an event: a re-execution reads again */
	}
	uint8_t wire[8];
	cm_put_u64(wire, (uint64_t)n);
	int replayed = 0;
	if (cm_mpi.transport.event(&cm_mpi.transport, CM_EV_STDIN, wire, sizeof wire, &replayed) <
	    0)
		die("cannot log or replay a read");
	if (replayed) {
		uint64_t want = cm_get_u64(wire);
		if (want > size)
			die("re-execution diverged: a logged read is longer than the buffer");
		if (want < (uint64_t)n) {
			if (unread(buf + want, (size_t)n - (size_t)want) < 0)
				die("out of memory");
			n = (ssize_t)want;
		} else if (want > (uint64_t)n) {
			ssize_t k = take_all(buf + n, (size_t)want - (size_t)n);
			if (k != (ssize_t)(want - (uint64_t)n))
				die("re-execution diverged: the input is shorter than the logged "
				    "reads");
			n = (ssize_t)want;
		}
	}
	in.delivered += (uint64_t)n;
	return n;
}

void cm_stdin_init(uint64_t consumed, uint64_t delivered)
{
	/* Logged only where a re-execution replays it: the cm transport (the
	 * replication transport's replicas do not all read rank 0's input). */
	if (cm_mpi.transport.event == NULL || strcmp(cm_mpi.transport.name, "cm") != 0)
		return;
	/* What the original stdin read ahead before MPI_Init comes first (glibc
	 * keeps it between _IO_read_ptr and _IO_read_end). */
	FILE *old = stdin;
	size_t ahead = 0;
	if (old->_IO_read_ptr && old->_IO_read_end > old->_IO_read_ptr)
		ahead = (size_t)(old->_IO_read_end - old->_IO_read_ptr);
	if (ahead > 0) {
		if (carry_reserve(ahead) < 0)
			return;
		memcpy(in.carry, old->_IO_read_ptr, ahead);
		in.carry_len = ahead;
	}
	cookie_io_functions_t io = {.read = stream_read};
	FILE *f = fopencookie(NULL, "r", io);
	if (f == NULL)
		return; /* stdin unlogged: a re-execution may read other lengths */
	/* The original stream stays open (descriptor 0 is ours to read now) but
	 * must not hand out its read-ahead a second time. */
	if (ahead > 0)
		old->_IO_read_ptr = old->_IO_read_end;
	/* fileno(stdin) stays 0 (isatty, poll on it): glibc reads it from
	 * here; the cookie's own read function does the reading. */
	f->_fileno = STDIN_FILENO;
	in.stream = f;
	in.old = old;
	in.skip = consumed;
	in.free_left = delivered > consumed ? delivered - consumed : 0;
	in.delivered = consumed;
	stdin = f;
}

void cm_stdin_position(uint64_t *consumed, uint64_t *delivered)
{
	*consumed = *delivered = 0;
	if (in.stream == NULL)
		return;
	FILE *f = in.stream;
	uint64_t buffered = 0;
	if (f->_IO_read_ptr && f->_IO_read_end > f->_IO_read_ptr)
		buffered = (uint64_t)(f->_IO_read_end - f->_IO_read_ptr);
	/* Bytes a restored rank still owes without an event are, for the next
	 * image, what the dead incarnation's stdio held: delivered already. */
	*consumed = in.delivered - buffered;
	*delivered = in.delivered + in.free_left;
}

/* freopen(path, mode, stdin) reopens libc's own stream: ours reads
 * descriptor 0 and could not be reopened on a file. What the program reads
 * from that file is not logged (a file is the same in a re-execution). */
typedef FILE *reopen_fn(const char *, const char *, FILE *);

static FILE *reopen(const char *name, reopen_fn **real, const char *path, const char *mode,
                    FILE *stream)
{
	if (*real == NULL)
		*real = (reopen_fn *)dlsym(RTLD_NEXT, name);
	if (*real == NULL) {
		errno = ENOSYS;
		return NULL;
	}
	if (stream != NULL && stream == in.stream) {
		stream = in.old;
		if (stdin == in.stream)
			stdin = in.old;
		in.stream = NULL;
	}
	return (*real)(path, mode, stream);
}

FILE *freopen(const char *path, const char *mode, FILE *stream)
{
	static reopen_fn *real;
	return reopen("freopen", &real, path, mode, stream);
}

/* The same under _FILE_OFFSET_BITS=64. */
FILE *freopen64(const char *path, const char *mode, FILE *stream)
{
	static reopen_fn *real;
	return reopen("freopen64", &real, path, mode, stream);
}
