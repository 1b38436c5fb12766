#include <config.h>

#include "output.h"

#include <errno.h>
#include <ev.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "net.h"
#include "status_line.h"

/* One read takes at most this much from a pipe, so a chatty rank cannot
 * starve the others; a partial line up to this size is kept per source. */
#define READ_CHUNK (64 * 1024)
#define CARRY_MAX READ_CHUNK
/* Queued bytes per stream past which sources stop reading, and below which
 * they resume. */
#define QUEUE_HIGH (8u << 20)
#define QUEUE_LOW (2u << 20)

struct chunk {
	struct chunk *next;
	size_t len;
	char data[];
};

struct out_stream {
	int fd;
	pthread_t thread;
	bool thread_started;
	/* Shared with the writer thread, under lock. */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct chunk *head, *tail;
	size_t queued;              /* bytes queued or being written */
	unsigned long long written; /* bytes handed to write(2) so far */
	bool writing;
	bool stop;
	bool status_wake; /* stderr: the status line changed */
	/* Loop thread only. */
	struct out_source *owner; /* source that emitted a partial line */
	struct out_source *waiting_head, *waiting_tail;
};

struct out_source {
	ev_io io;
	int fd;
	struct out_stream *stream;
	char *prefix;
	size_t prefix_len;
	char *carry; /* partial line not yet emitted */
	size_t carry_len, carry_cap;
	bool at_line_start;      /* false while this source owns its stream mid-line */
	unsigned long long pos;  /* bytes read from the pipe so far, skipped ones included */
	unsigned long long skip; /* bytes still to drop before forwarding (re-execution) */
	bool done;
	bool waiting;
	struct out_source *next_waiting;
	struct out_source *next_all;
};

/* A chunk being filled by a source before it is queued. */
struct builder {
	struct chunk *c;
	size_t cap;
};

static struct {
	bool running;
	struct ev_loop *loop;
	ev_async wakeup;
	struct out_stream streams[2];
	bool tag_lines_at_eof;
	int open_sources;
	struct out_source *all_sources;
	char scratch[READ_CHUNK];
} out;

static void *writer_main(void *arg)
{
	struct out_stream *s = arg;
	int which = s == &out.streams[OUT_STDOUT] ? OUT_STDOUT : OUT_STDERR;
	bool broken = false;

	for (;;) {
		pthread_mutex_lock(&s->lock);
		while (s->head == NULL && !s->stop && !s->status_wake)
			pthread_cond_wait(&s->cond, &s->lock);
		struct chunk *c = s->head;
		bool redraw = s->status_wake;
		s->status_wake = false;
		if (c == NULL) {
			pthread_mutex_unlock(&s->lock);
			if (redraw) {
				status_line_redraw();
				continue;
			}
			break;
		}
		s->head = c->next;
		if (s->head == NULL)
			s->tail = NULL;
		s->writing = true;
		pthread_mutex_unlock(&s->lock);

		/* A reader that went away (EPIPE: `cmrun ... | head`) loses the
		 * rest; the job itself goes on, as ranks' writes still drain. */
		broken = status_line_write(which, s->fd, c->data, c->len, broken);

		pthread_mutex_lock(&s->lock);
		s->queued -= c->len;
		s->written += c->len;
		s->writing = false;
		pthread_mutex_unlock(&s->lock);
		free(c);
		ev_async_send(out.loop, &out.wakeup);
	}
	return NULL;
}

static size_t stream_queued(struct out_stream *s)
{
	pthread_mutex_lock(&s->lock);
	size_t q = s->queued;
	pthread_mutex_unlock(&s->lock);
	return q;
}

static void stream_enqueue(struct out_stream *s, struct chunk *c)
{
	c->next = NULL;
	pthread_mutex_lock(&s->lock);
	if (s->tail)
		s->tail->next = c;
	else
		s->head = c;
	s->tail = c;
	s->queued += c->len;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

static void builder_append(struct builder *b, const char *data, size_t len)
{
	if (len == 0)
		return;
	size_t have = b->c ? b->c->len : 0;
	if (b->c == NULL || have + len > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < have + len)
			cap *= 2;
		struct chunk *c = realloc(b->c, sizeof *c + cap);
		if (c == NULL) {
			/* Out of memory while forwarding: say so rather than crash. */
			static const char msg[] = "cmrun: out of memory, output lost\n";
			cm_write_full(STDERR_FILENO, msg, sizeof msg - 1);
			abort();
		}
		if (b->c == NULL)
			c->len = 0;
		b->c = c;
		b->cap = cap;
	}
	memcpy(b->c->data + b->c->len, data, len);
	b->c->len += len;
}

/* Appends text to the chunk, inserting the source's prefix at every line
 * start, and tracks whether the source is now mid-line. */
static void emit_text(struct out_source *src, struct builder *b, const char *text, size_t len)
{
	while (len > 0) {
		if (src->at_line_start && src->prefix_len)
			builder_append(b, src->prefix, src->prefix_len);
		const char *nl = memchr(text, '\n', len);
		size_t piece = nl ? (size_t)(nl - text) + 1 : len;
		builder_append(b, text, piece);
		src->at_line_start = nl != NULL;
		text += piece;
		len -= piece;
	}
}

static void wake_waiting(struct out_stream *s);

/* Queues what the builder holds and updates stream ownership: a source
 * that stopped mid-line keeps the stream until it ends that line. */
static void builder_commit(struct out_source *src, struct builder *b)
{
	struct out_stream *s = src->stream;
	if (b->c && b->c->len)
		stream_enqueue(s, b->c);
	else
		free(b->c);
	b->c = NULL;
	if (!src->at_line_start) {
		s->owner = src;
	} else if (s->owner == src) {
		s->owner = NULL;
		wake_waiting(s);
	}
}

static bool may_emit(struct out_source *src)
{
	struct out_stream *s = src->stream;
	return (s->owner == NULL || s->owner == src) && stream_queued(s) < QUEUE_HIGH;
}

static void pause_source(struct out_source *src)
{
	struct out_stream *s = src->stream;
	ev_io_stop(out.loop, &src->io);
	if (src->waiting)
		return;
	src->waiting = true;
	src->next_waiting = NULL;
	if (s->waiting_tail)
		s->waiting_tail->next_waiting = src;
	else
		s->waiting_head = src;
	s->waiting_tail = src;
}

static void resume_source(struct out_source *src)
{
	src->waiting = false;
	if (!src->done)
		ev_io_start(out.loop, &src->io);
}

static void unlink_waiting(struct out_stream *s, struct out_source *src)
{
	struct out_source **link = &s->waiting_head, *prev = NULL;
	while (*link) {
		struct out_source *w = *link;
		if (w == src) {
			*link = w->next_waiting;
			if (s->waiting_tail == w)
				s->waiting_tail = prev;
			w->waiting = false;
			return;
		}
		prev = w;
		link = &w->next_waiting;
	}
}

static void wake_waiting(struct out_stream *s)
{
	if (s->waiting_head == NULL || stream_queued(s) >= QUEUE_LOW)
		return;
	if (s->owner) {
		/* Only the owner can make progress; the others would pause again. */
		if (s->owner->waiting) {
			struct out_source *owner = s->owner;
			unlink_waiting(s, owner);
			resume_source(owner);
		}
		return;
	}
	struct out_source *w = s->waiting_head;
	s->waiting_head = s->waiting_tail = NULL;
	while (w) {
		struct out_source *next = w->next_waiting;
		resume_source(w);
		w = next;
	}
}

static void carry_append(struct out_source *src, const char *data, size_t len)
{
	if (len == 0)
		return;
	if (src->carry_len + len > src->carry_cap) {
		size_t cap = src->carry_cap ? src->carry_cap : 256;
		while (cap < src->carry_len + len)
			cap *= 2;
		char *p = realloc(src->carry, cap);
		if (p == NULL) {
			static const char msg[] = "cmrun: out of memory, output lost\n";
			cm_write_full(STDERR_FILENO, msg, sizeof msg - 1);
			abort();
		}
		src->carry = p;
		src->carry_cap = cap;
	}
	memcpy(src->carry + src->carry_len, data, len);
	src->carry_len += len;
}

/* New bytes from the pipe: complete lines go out, the tail waits in carry
 * unless it grew past CARRY_MAX (then it goes out and the source holds the
 * stream until the line ends). */
static void consume(struct out_source *src, const char *data, size_t len)
{
	struct builder b = {0};
	const char *last_nl = memrchr(data, '\n', len);
	if (last_nl == NULL && src->carry_len + len <= CARRY_MAX) {
		carry_append(src, data, len);
		return;
	}
	size_t upto = last_nl ? (size_t)(last_nl - data) + 1 : len;
	emit_text(src, &b, src->carry, src->carry_len);
	src->carry_len = 0;
	emit_text(src, &b, data, upto);
	size_t rest = len - upto;
	if (rest > CARRY_MAX)
		emit_text(src, &b, data + upto, rest);
	else
		carry_append(src, data + upto, rest);
	builder_commit(src, &b);
}

static void finish(struct out_source *src)
{
	struct builder b = {0};
	emit_text(src, &b, src->carry, src->carry_len);
	src->carry_len = 0;
	if (!src->at_line_start && out.tag_lines_at_eof)
		emit_text(src, &b, "\n", 1);
	/* Done either way: an unterminated last line releases the stream. */
	src->at_line_start = true;
	builder_commit(src, &b);
	ev_io_stop(out.loop, &src->io);
	close(src->fd);
	src->fd = -1;
	src->done = true;
	out.open_sources--;
}

/* Returns false when nothing more can be read now. */
static bool read_once(struct out_source *src)
{
	if (src->done)
		return false;
	if (!may_emit(src)) {
		pause_source(src);
		return false;
	}
	ssize_t n = read(src->fd, out.scratch, sizeof out.scratch);
	if (n < 0 && errno == EINTR)
		return true;
	if (n < 0 && errno == EAGAIN)
		return false;
	if (n <= 0) {
		finish(src);
		return false;
	}
	src->pos += (unsigned long long)n;
	size_t k = 0;
	if (src->skip) {
		/* A re-executed rank prints again what its earlier incarnations
		 * already printed: those bytes went out once already. */
		k = src->skip < (unsigned long long)n ? (size_t)src->skip : (size_t)n;
		src->skip -= k;
	}
	if ((size_t)n > k)
		consume(src, out.scratch + k, (size_t)n - k);
	return true;
}

static void source_readable(struct ev_loop *loop, ev_io *w, int revents)
{
	read_once((struct out_source *)w);
}

static void on_wakeup(struct ev_loop *loop, ev_async *w, int revents)
{
	for (int i = 0; i < 2; i++)
		wake_waiting(&out.streams[i]);
}

int output_init(struct ev_loop *loop, bool tag_lines_at_eof)
{
	sigset_t all, old;

	out.loop = loop;
	out.tag_lines_at_eof = tag_lines_at_eof;
	ev_async_init(&out.wakeup, on_wakeup);
	ev_async_start(loop, &out.wakeup);

	/* Writers inherit a fully blocked mask: signals belong to the loop. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (int i = 0; i < 2; i++) {
		struct out_stream *s = &out.streams[i];
		s->fd = i == OUT_STDOUT ? STDOUT_FILENO : STDERR_FILENO;
		pthread_mutex_init(&s->lock, NULL);
		pthread_cond_init(&s->cond, NULL);
		int err = pthread_create(&s->thread, NULL, writer_main, s);
		if (err) {
			pthread_sigmask(SIG_SETMASK, &old, NULL);
			errno = err;
			return -1;
		}
		s->thread_started = true;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	out.running = true;
	return 0;
}

struct out_source *output_source_open(int fd, enum out_target target, const char *prefix)
{
	struct out_source *src = calloc(1, sizeof *src);
	if (src == NULL)
		return NULL;
	if (prefix && *prefix) {
		src->prefix = strdup(prefix);
		if (src->prefix == NULL) {
			free(src);
			return NULL;
		}
		src->prefix_len = strlen(prefix);
	}
	cm_set_nonblock(fd, 1);
	cm_set_cloexec(fd, 1);
	src->fd = fd;
	src->stream = &out.streams[target];
	src->at_line_start = true;
	src->next_all = out.all_sources;
	out.all_sources = src;
	out.open_sources++;
	ev_io_init(&src->io, source_readable, fd, EV_READ);
	ev_io_start(out.loop, &src->io);
	return src;
}

void output_source_drain(struct out_source *src)
{
	/* Bounded: a grandchild still writing cannot keep us here forever. */
	for (int i = 0; i < 64 && read_once(src); i++)
		;
}

unsigned long long output_source_position(const struct out_source *src)
{
	return src ? src->pos : 0;
}

void output_source_skip(struct out_source *src, unsigned long long n)
{
	if (src)
		src->skip = n;
}

bool output_source_done(const struct out_source *src)
{
	return src->done;
}

bool output_source_paused(const struct out_source *src)
{
	return src->waiting;
}

void output_source_close(struct out_source *src)
{
	if (src->done)
		return;
	if (src->waiting)
		unlink_waiting(src->stream, src);
	finish(src);
}

static void message_v(const char *fmt, va_list ap)
{
	char line[1024];
	int n = snprintf(line, sizeof line, "cmrun: ");
	vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
	size_t len = strlen(line);
	line[len++] = '\n';

	if (!out.running) {
		cm_write_full(STDERR_FILENO, line, len);
		return;
	}
	struct chunk *c = malloc(sizeof *c + len);
	if (c == NULL) {
		cm_write_full(STDERR_FILENO, line, len);
		return;
	}
	memcpy(c->data, line, len);
	c->len = len;
	stream_enqueue(&out.streams[OUT_STDERR], c);
}

void output_status(const char *text, bool final)
{
	if (!out.running) {
		/* No writer: straight out (early exits). */
		char line[600];
		int n = snprintf(line, sizeof line, "\r%s%s", text, final ? "\033[K\n" : "\033[K");
		if (n > 0)
			cm_write_full(STDERR_FILENO, line,
			              (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
		return;
	}
	status_line_set(text, final);
	struct out_stream *s = &out.streams[OUT_STDERR];
	pthread_mutex_lock(&s->lock);
	s->status_wake = true;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

void output_message(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	message_v(fmt, ap);
	va_end(ap);
}

void output_verbose(const char *fmt, ...)
{
	if (cm_log_verbosity() < 1)
		return;
	va_list ap;
	va_start(ap, fmt);
	message_v(fmt, ap);
	va_end(ap);
}

int output_open_sources(void)
{
	return out.open_sources;
}

bool output_flushed(void)
{
	for (int i = 0; i < 2; i++) {
		struct out_stream *s = &out.streams[i];
		pthread_mutex_lock(&s->lock);
		bool idle = s->head == NULL && !s->writing;
		pthread_mutex_unlock(&s->lock);
		if (!idle)
			return false;
	}
	return true;
}

unsigned long long output_bytes_written(void)
{
	unsigned long long total = 0;
	for (int i = 0; i < 2; i++) {
		struct out_stream *s = &out.streams[i];
		pthread_mutex_lock(&s->lock);
		total += s->written;
		pthread_mutex_unlock(&s->lock);
	}
	return total;
}

void output_shutdown(bool wait_for_writers)
{
	if (!out.running)
		return;
	out.running = false;
	for (int i = 0; i < 2; i++) {
		struct out_stream *s = &out.streams[i];
		pthread_mutex_lock(&s->lock);
		s->stop = true;
		pthread_cond_signal(&s->cond);
		pthread_mutex_unlock(&s->lock);
	}
	if (!wait_for_writers)
		return; /* exit() ends a writer stuck on a reader that never reads */
	for (int i = 0; i < 2; i++)
		if (out.streams[i].thread_started)
			pthread_join(out.streams[i].thread, NULL);
	ev_async_stop(out.loop, &out.wakeup);
	while (out.all_sources) {
		struct out_source *src = out.all_sources;
		out.all_sources = src->next_all;
		if (!src->done) {
			ev_io_stop(out.loop, &src->io);
			close(src->fd);
		}
		free(src->prefix);
		free(src->carry);
		free(src);
	}
}
