#include <config.h>

#include "input.h"

#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "net.h"

#define INPUT_BUFFER (64 * 1024)

static struct {
	struct ev_loop *loop;
	bool active;
	bool eof;
	bool held;   /* nothing written until input_release (remote rank 0) */
	int pipe_fd; /* write end towards rank 0 */
	ev_io read_io, write_io;
	size_t len;
	char buf[INPUT_BUFFER];
} in = {.pipe_fd = -1};

static void close_pipe(void)
{
	ev_io_stop(in.loop, &in.write_io);
	if (in.pipe_fd >= 0)
		close(in.pipe_fd);
	in.pipe_fd = -1;
}

static void on_stdin(struct ev_loop *loop, ev_io *w, int revents)
{
	/* Readiness was reported, so this read does not block (stdin itself is
	 * left blocking: its file description is shared with the shell). */
	ssize_t n = read(STDIN_FILENO, in.buf + in.len, sizeof in.buf - in.len);
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		in.eof = true;
		ev_io_stop(loop, &in.read_io);
		if (in.len == 0 && !in.held)
			close_pipe();
		return;
	}
	in.len += (size_t)n;
	if (in.len == sizeof in.buf)
		ev_io_stop(loop, &in.read_io);
	if (!in.held)
		ev_io_start(loop, &in.write_io);
}

static void on_pipe_writable(struct ev_loop *loop, ev_io *w, int revents)
{
	ssize_t n = write(in.pipe_fd, in.buf, in.len);
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n < 0) {
		/* Rank 0 closed its stdin or exited: nothing more to relay. */
		input_stop();
		return;
	}
	memmove(in.buf, in.buf + n, in.len - (size_t)n);
	in.len -= (size_t)n;
	if (in.len == 0) {
		ev_io_stop(loop, &in.write_io);
		if (in.eof)
			close_pipe();
	}
	if (!in.eof)
		ev_io_start(loop, &in.read_io);
}

void input_release(const char *first_line)
{
	size_t n = strlen(first_line);
	if (!in.held || in.pipe_fd < 0)
		return;
	in.held = false;
	/* Nothing was written yet: the line goes first, straight into the
	 * empty pipe (far below its capacity), then what was read. */
	if (cm_write_full(in.pipe_fd, first_line, n) < 0) {
		input_stop();
		return;
	}
	if (in.len > 0)
		ev_io_start(in.loop, &in.write_io);
	else if (in.eof)
		close_pipe();
}

int input_start(struct ev_loop *loop, bool hold)
{
	int p[2];

	/* Reading a terminal from a background process group would stop cmrun
	 * (SIGTTIN). */
	if (isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) != getpgrp())
		return -1;
	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	cm_set_nonblock(p[1], 1);
	in.loop = loop;
	in.pipe_fd = p[1];
	in.active = true;
	in.held = hold;
	ev_io_init(&in.read_io, on_stdin, STDIN_FILENO, EV_READ);
	ev_io_init(&in.write_io, on_pipe_writable, p[1], EV_WRITE);
	ev_io_start(loop, &in.read_io);
	return p[0];
}

void input_stop(void)
{
	if (!in.active)
		return;
	in.active = false;
	ev_io_stop(in.loop, &in.read_io);
	close_pipe();
}
