/* cmrun's stdin, relayed to rank 0 through a pipe, and kept.
 *
 * Everything read from cmrun's stdin is appended to a spool (an unlinked
 * temporary file, so a long input costs disk, not memory) and fed to rank 0
 * from there. When rank 0 is restarted, its new incarnation gets a new
 * pipe fed from the spool's first byte: the re-execution reads the same
 * stream as the dead incarnation, whatever that one had read or left in
 * its pipe. (libchanmem logs where each read ended, client/stdin_log.c, so
 * the re-execution also reads it in the same pieces.) cmrun's stdin itself
 * is read no further ahead of rank 0 than INPUT_AHEAD bytes, as before. */
#include <config.h>

#include "input.h"

#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "net.h"

#define INPUT_BUFFER (64 * 1024)
/* cmrun reads its stdin this far ahead of what rank 0 took at most. */
#define INPUT_AHEAD (64 * 1024)

static struct {
	struct ev_loop *loop;
	bool active;
	bool eof;  /* cmrun's stdin ended: the spool is complete */
	bool held; /* nothing written until input_release (remote rank 0) */
	bool stdin_watched;
	int pipe_fd;   /* write end towards the current rank 0 */
	int spool_fd;  /* everything read so far, or -1 (kept in buf only) */
	off_t spooled; /* bytes in the spool */
	off_t fed;     /* bytes of it written into the current pipe */
	ev_io read_io, write_io;
	char buf[INPUT_BUFFER];
} in = {.pipe_fd = -1, .spool_fd = -1};

static void close_pipe(void)
{
	ev_io_stop(in.loop, &in.write_io);
	if (in.pipe_fd >= 0)
		close(in.pipe_fd);
	in.pipe_fd = -1;
}

static void watch_stdin(bool on)
{
	if (on == in.stdin_watched || (on && in.eof))
		return;
	in.stdin_watched = on;
	if (on)
		ev_io_start(in.loop, &in.read_io);
	else
		ev_io_stop(in.loop, &in.read_io);
}

/* Starts or stops the watchers after the spool or the feed moved. */
static void update(void)
{
	if (!in.active)
		return;
	watch_stdin(in.spooled - in.fed < INPUT_AHEAD);
	if (in.pipe_fd < 0 || in.held)
		return;
	if (in.fed < in.spooled)
		ev_io_start(in.loop, &in.write_io);
	else {
		ev_io_stop(in.loop, &in.write_io);
		if (in.eof)
			close_pipe(); /* rank 0 sees EOF */
	}
}

static void on_stdin(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop;
	(void)w;
	(void)revents;
	/* Readiness was reported, so this read does not block (stdin itself is
	 * left blocking: its file description is shared with the shell). */
	ssize_t n = read(STDIN_FILENO, in.buf, sizeof in.buf);
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		watch_stdin(false);
		in.eof = true;
		update();
		return;
	}
	if (pwrite(in.spool_fd, in.buf, (size_t)n, in.spooled) != n) {
		/* No room to keep it: a restarted rank 0 could not read it again. */
		fprintf(stderr, "cmrun: stdin: cannot keep the input for a restart: %s\n",
		        strerror(errno));
		watch_stdin(false);
		in.eof = true;
		update();
		return;
	}
	in.spooled += n;
	update();
}

static void on_pipe_writable(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop;
	(void)w;
	(void)revents;
	char chunk[INPUT_BUFFER];
	size_t want = (size_t)(in.spooled - in.fed) < sizeof chunk ? (size_t)(in.spooled - in.fed)
	                                                           : sizeof chunk;
	ssize_t k = pread(in.spool_fd, chunk, want, in.fed);
	if (k <= 0) {
		close_pipe();
		return;
	}
	ssize_t n = write(in.pipe_fd, chunk, (size_t)k);
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n < 0) {
		/* Rank 0 closed its stdin or exited: its next incarnation, if
		 * any, gets a pipe of its own (input_rewind). */
		close_pipe();
		return;
	}
	in.fed += n;
	update();
}

void input_release(const char *first_line)
{
	size_t n = strlen(first_line);
	if (!in.held || in.pipe_fd < 0)
		return;
	in.held = false;
	/* Nothing was written yet: the line goes first, straight into the
	 * empty pipe (far below its capacity), then the spool. */
	if (cm_write_full(in.pipe_fd, first_line, n) < 0) {
		close_pipe();
		return;
	}
	update();
}

/* A new pipe fed from the spool's first byte; returns its read end. */
static int open_pipe(bool hold)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	cm_set_nonblock(p[1], 1);
	close_pipe();
	in.pipe_fd = p[1];
	in.fed = 0;
	in.held = hold;
	ev_io_init(&in.write_io, on_pipe_writable, p[1], EV_WRITE);
	update();
	return p[0];
}

int input_start(struct ev_loop *loop, bool hold)
{
	/* Reading a terminal from a background process group would stop cmrun
	 * (SIGTTIN). */
	if (isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) != getpgrp())
		return -1;
	FILE *spool = tmpfile();
	if (spool == NULL)
		return -1;
	in.spool_fd = fcntl(fileno(spool), F_DUPFD_CLOEXEC, 0);
	fclose(spool);
	if (in.spool_fd < 0)
		return -1;
	in.loop = loop;
	in.active = true;
	ev_io_init(&in.read_io, on_stdin, STDIN_FILENO, EV_READ);
	return open_pipe(hold);
}

int input_rewind(bool hold)
{
	if (in.spool_fd < 0)
		return -1;
	in.active = true;
	return open_pipe(hold);
}

/* The spool stays: a restarted rank 0 is fed from it (input_rewind). It
 * goes with cmrun. */
void input_stop(void)
{
	if (!in.active)
		return;
	in.active = false;
	watch_stdin(false);
	close_pipe();
}
