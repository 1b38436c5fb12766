#include <config.h>

#include "output.h"

#include <errno.h>
#include <ev.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "net.h"
#include "status_line.h"
#include "vec.h"

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

/* One complete line a rank printed: what a later incarnation's lines are
 * matched against. head hashes its first HEAD_BYTES bytes: a line
 * re-printed with other contents usually keeps its beginning ("step 7:",
 * " 24:    1024 bytes"), which tells it from a line the rank added. */
struct line_rec {
	uint64_t hash;
	uint32_t len; /* at most UINT32_MAX: longer lines compare by hash */
	uint32_t head;
};
#define HEAD_BYTES 16

/* The lines an incarnation (and its predecessors) printed, handed from a
 * dead incarnation's source to the next one's. */
struct history {
	CM_VEC(struct line_rec) lines;
	bool lost;             /* past HISTORY_MAX lines: byte counting instead */
	uint64_t partial_hash; /* an unterminated last line, already forwarded */
	uint64_t partial_len;
};

/* Lines of a re-executed rank held at once, and their bytes. */
#define HELD_MAX 8
#define HELD_BYTES (4 * CARRY_MAX)

struct held_line {
	size_t off, len;
	uint64_t hash;
	uint32_t head;
};

struct out_source {
	ev_io io;
	int fd;
	struct out_stream *stream;
	char *prefix;
	size_t prefix_len;
	CM_VEC(char) carry;      /* partial line not yet emitted */
	bool at_line_start;      /* false while this source owns its stream mid-line */
	unsigned long long pos;  /* bytes read from the pipe so far, skipped ones included */
	unsigned long long skip; /* bytes still to drop before forwarding (re-execution) */
	/* Every line read, for a next incarnation (NULL once handed over). */
	struct history *hist;
	uint64_t line_hash, line_len; /* the line being read */
	uint64_t line_head;           /* its first HEAD_BYTES, hashed so far */
	/* Following (a re-executed rank): its lines are matched against what
	 * its predecessors printed, prev, from line cursor on. */
	struct history *prev;
	size_t cursor;
	bool following;
	unsigned long long filler;     /* filler bytes still to come */
	unsigned long long filler_acc; /* filler bytes not yet a whole old line */
	bool filler_known;             /* the filler was announced (and may be consumed) */
	/* Lines that matched no old line, held until a later line tells
	 * which of them the rank added (forwarded) and which re-printed an
	 * old line with other contents (dropped): see follow_line. */
	struct held_line held[HELD_MAX];
	size_t held_n;
	CM_VEC(char) held_buf; /* their bytes, one after the other */
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
	void (*sync_hook)(void *);
	void *sync_arg;
} out;

/* Lines kept per source for re-executions (16 bytes each). */
#define HISTORY_MAX (1u << 20)

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
	if (!cm_vec_append(&src->carry, data, len)) {
		static const char msg[] = "cmrun: out of memory, output lost\n";
		cm_write_full(STDERR_FILENO, msg, sizeof msg - 1);
		abort();
	}
}

/* ---- line history and re-executions ----
 *
 * A re-executed rank prints again what its dead incarnation printed, and a
 * rank restored from a checkpoint image may print lines its predecessor
 * did not ("resuming from step 7"). Its lines are matched one by one
 * against the lines its predecessors printed (a 64-bit hash and a length
 * per line): a line equal to the next expected one is dropped, a line
 * that is not stands for the old line at its position unless what follows
 * shows the rank added it (follow_line). The filler a restored rank writes
 * for what came before its image (ft.c, "restored") stands for as many
 * bytes of old lines. Once every old line is accounted for, the rank's
 * output flows as usual. So output stays whole lines, each printed once. */

static uint64_t fnv(uint64_t h, const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)p[i]) * 0x100000001B3ull;
	return h;
}
#define FNV_START 14695981039346656037ull

static void history_free(struct history *h)
{
	if (h) {
		cm_vec_free(&h->lines);
		free(h);
	}
}

static uint32_t rec_len(uint64_t len)
{
	return len > UINT32_MAX ? UINT32_MAX : (uint32_t)len;
}

static void history_push(struct out_source *src, uint64_t hash, uint64_t len, uint32_t head)
{
	struct history *h = src->hist;
	if (h == NULL || h->lost)
		return;
	if (h->lines.n == HISTORY_MAX || !cm_vec_reserve(&h->lines, h->lines.n + 1)) {
		/* Too many lines to keep: re-executions count bytes. */
		cm_vec_free(&h->lines);
		h->lost = true;
		return;
	}
	h->lines.items[h->lines.n++] = (struct line_rec){hash, rec_len(len), head};
}

/* Records the lines of data (forwarded as usual). */
static void history_record(struct out_source *src, const char *data, size_t len)
{
	while (len > 0) {
		const char *nl = memchr(data, '\n', len);
		size_t piece = nl ? (size_t)(nl - data) + 1 : len;
		src->line_hash = fnv(src->line_len ? src->line_hash : FNV_START, data, piece);
		if (src->line_len < HEAD_BYTES) {
			size_t take = HEAD_BYTES - (size_t)src->line_len;
			src->line_head = fnv(src->line_len ? src->line_head : FNV_START, data,
			                     piece < take ? piece : take);
		}
		src->line_len += piece;
		if (nl) {
			history_push(src, src->line_hash, src->line_len, (uint32_t)src->line_head);
			src->line_len = 0;
		}
		data += piece;
		len -= piece;
	}
}

static bool is_old(const struct out_source *src, size_t at, uint64_t hash, size_t len)
{
	const struct history *h = src->prev;
	return at < h->lines.n && h->lines.items[at].hash == hash &&
	       h->lines.items[at].len == rec_len(len);
}

/* Every old line accounted for: the rest of the output is new, and is
 * what the next incarnation, if any, is matched against. */
static void stop_following(struct out_source *src)
{
	src->following = false;
	if (src->hist) {
		history_free(src->hist);
		src->hist = NULL;
	}
	src->hist = src->prev; /* the furthest any incarnation got, grown from here */
	src->prev = NULL;
}

/* A line of a following source that is new. Past the old lines it is
 * recorded, as a line a next incarnation re-prints (a line the rank adds
 * among its old ones is not: it would shift their positions). The first
 * line past them may re-print the dead incarnation's unterminated last
 * line, which went out already: only its rest is new. */
static void forward_new(struct out_source *src, struct builder *b, const char *line, size_t len)
{
	if (!src->following && src->hist) {
		struct history *h = src->hist;
		history_record(src, line, len); /* whole: as it will be re-printed */
		if (h->partial_len && len > h->partial_len &&
		    fnv(FNV_START, line, h->partial_len) == h->partial_hash) {
			line += h->partial_len;
			len -= h->partial_len;
		}
		h->partial_len = 0;
	}
	emit_text(src, b, line, len);
}

/* Resolves the first n held lines: the first `added` of them are lines
 * the rank added and are forwarded, the others stand for the next old
 * lines and are dropped. */
static void held_resolve(struct out_source *src, struct builder *b, size_t n, size_t added)
{
	for (size_t i = 0; i < n; i++) {
		if (i < added)
			emit_text(src, b, src->held_buf.items + src->held[i].off, src->held[i].len);
		else
			src->cursor++;
	}
	if (n == 0)
		return;
	size_t shift = n < src->held_n ? src->held[n].off : src->held_buf.n;
	cm_vec_drop_front(&src->held_buf, shift);
	for (size_t i = n; i < src->held_n; i++) {
		src->held[i - n] = src->held[i];
		src->held[i - n].off -= shift;
	}
	src->held_n -= n;
}

/* Every held line out as new: past the old lines, or when matching ends. */
static void held_flush(struct out_source *src, struct builder *b)
{
	for (size_t i = 0; i < src->held_n; i++)
		forward_new(src, b, src->held_buf.items + src->held[i].off, src->held[i].len);
	src->held_n = 0;
	src->held_buf.n = 0;
}

static bool held_push(struct out_source *src, const char *line, size_t len, uint64_t hash)
{
	size_t off = src->held_buf.n;
	if (!cm_vec_append(&src->held_buf, line, len))
		return false;
	uint32_t head = (uint32_t)fnv(FNV_START, line, len < HEAD_BYTES ? len : HEAD_BYTES);
	src->held[src->held_n++] = (struct held_line){off, len, hash, head};
	return true;
}

/* One complete line of a following source.
 *
 * A re-execution prints the lines its predecessor printed, in the same
 * order, some perhaps with other contents (a time, a value the program
 * does not take from MPI, printed before it was logged), and a restored
 * rank may add lines ("resuming from step 7") before them. So a line
 * stands for the old line at its position, unless what follows shows it
 * was added: a line that is not the next expected one is held; when a
 * later line equals the old line j places after the cursor, the m held
 * lines stood for j old lines, and the first m - j were added. When more
 * lines are held than old lines remain, the first ones stand for the
 * remaining old lines and the rest are new: a re-printed last old line
 * with other contents followed by a new line is not mistaken for an
 * added line (it would be printed twice). */
static void follow_line(struct out_source *src, struct builder *b, const char *line, size_t len)
{
	struct history *h = src->prev;
	uint64_t hash = fnv(FNV_START, line, len);
	if (len == 1 && line[0] == '\n' && src->filler == 0 && !src->filler_known &&
	    !is_old(src, src->cursor, hash, len) && out.sync_hook) {
		/* Perhaps a restored rank's filler: it said so before writing it. */
		out.sync_hook(out.sync_arg);
	}
	if (len == 1 && line[0] == '\n' && src->filler > 0) {
		held_resolve(src, b, src->held_n, src->held_n);
		src->filler--;
		src->filler_acc++;
		while (src->cursor < h->lines.n &&
		       src->filler_acc >= h->lines.items[src->cursor].len)
			src->filler_acc -= h->lines.items[src->cursor++].len;
	} else {
		size_t m = src->held_n, j = m + 1;
		/* Fewest added lines first: a deterministic re-execution adds
		 * none. */
		while (j-- > 0)
			if (is_old(src, src->cursor + j, hash, len))
				break;
		if (j <= m) {
			held_resolve(src, b, m, m - j);
			src->cursor++;
		} else {
			if (m == HELD_MAX || src->held_buf.n + len > HELD_BYTES ||
			    !held_push(src, line, len, hash)) {
				/* Too much to hold: the oldest held line
				 * stands for its old line. */
				if (m > 0)
					held_resolve(src, b, 1, 0);
				if (!held_push(src, line, len, hash))
					emit_text(src, b, line, len);
			}
			size_t left = h->lines.n - src->cursor;
			if (src->held_n > left) {
				/* A restored rank adds its line before the old
				 * ones: the first held line is taken for an
				 * added one when it does not begin as the old
				 * line does and the next one does. */
				size_t added =
				    left > 0 &&
				    src->held[0].head != h->lines.items[src->cursor].head &&
				    src->held[1].head == h->lines.items[src->cursor].head;
				held_resolve(src, b, added + left, added);
			}
		}
	}
	/* With an unterminated old last line, the next line is awaited: it
	 * may re-print it. */
	if (src->cursor >= h->lines.n && src->filler == 0 && (h->partial_len == 0 || src->held_n)) {
		stop_following(src);
		held_flush(src, b);
	}
}

/* The bytes of a following source: whole lines are matched; what comes
 * after the last old line is consumed as usual. Returns how many bytes
 * were taken. */
static size_t follow(struct out_source *src, struct builder *b, const char *data, size_t len)
{
	size_t used = 0;
	while (src->following && used < len) {
		const char *nl = memchr(data + used, '\n', len - used);
		if (nl == NULL) {
			size_t rest = len - used;
			if (src->carry.n + rest > CARRY_MAX) {
				/* A line too long to hold: out as it comes, and
				 * no more matching. */
				held_flush(src, b);
				stop_following(src);
				return used;
			}
			carry_append(src, data + used, rest);
			return len;
		}
		size_t piece = (size_t)(nl - (data + used)) + 1;
		if (src->carry.n) {
			carry_append(src, data + used, piece);
			follow_line(src, b, src->carry.items, src->carry.n);
			src->carry.n = 0;
		} else {
			follow_line(src, b, data + used, piece);
		}
		used += piece;
	}
	return used;
}

/* New bytes from the pipe: complete lines go out, the tail waits in carry
 * unless it grew past CARRY_MAX (then it goes out and the source holds the
 * stream until the line ends). */
static void consume(struct out_source *src, const char *data, size_t len)
{
	struct builder b = {0};
	if (src->following) {
		size_t used = follow(src, &b, data, len);
		data += used;
		len -= used;
		if (len == 0 || src->following) {
			builder_commit(src, &b);
			return;
		}
	}
	history_record(src, data, len);
	const char *last_nl = memrchr(data, '\n', len);
	if (last_nl == NULL && src->carry.n + len <= CARRY_MAX) {
		carry_append(src, data, len);
		return;
	}
	size_t upto = last_nl ? (size_t)(last_nl - data) + 1 : len;
	emit_text(src, &b, src->carry.items, src->carry.n);
	src->carry.n = 0;
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
	if (src->following) {
		/* Held lines stand for old lines, which went out already. */
		const struct history *h = src->prev;
		size_t at = src->cursor + src->held_n;
		src->held_n = 0;
		src->held_buf.n = 0;
		/* Cut off while re-printing an old line: that line went out
		 * whole already; so did the old unterminated last line. */
		if (src->carry.n && at < h->lines.n && src->carry.n < h->lines.items[at].len) {
			src->carry.n = 0;
		} else if (src->carry.n && at >= h->lines.n && h->partial_len) {
			if (src->carry.n <= h->partial_len) {
				src->carry.n = 0;
			} else if (fnv(FNV_START, src->carry.items, h->partial_len) ==
			           h->partial_hash) {
				cm_vec_drop_front(&src->carry, h->partial_len);
			}
		}
	} else if (src->hist && src->line_len) {
		src->hist->partial_hash = src->line_hash;
		src->hist->partial_len = src->line_len;
	}
	emit_text(src, &b, src->carry.items, src->carry.n);
	src->carry.n = 0;
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
	src->hist = calloc(1, sizeof *src->hist); /* NULL: no matching, byte counts */
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

void output_source_follow(struct out_source *src, struct out_source *prev,
                          unsigned long long bytes_seen)
{
	if (src == NULL)
		return;
	struct history *h = prev ? prev->hist : NULL;
	if (h == NULL || h->lost) {
		src->skip = bytes_seen; /* what is left: count bytes */
		return;
	}
	/* The dead incarnation's lines are what the new one is matched
	 * against; the dead source keeps forwarding whatever still comes,
	 * unrecorded. */
	prev->hist = NULL;
	history_free(src->hist);
	src->hist = NULL;
	src->prev = h;
	src->cursor = 0;
	src->following = h->lines.n > 0 || h->partial_len > 0;
	if (!src->following) {
		src->hist = h;
		src->prev = NULL;
	}
}

void output_source_filler(struct out_source *src, unsigned long long n)
{
	if (src && src->following && !src->filler_known) {
		src->filler = n;
		src->filler_known = true;
	}
}

void output_set_sync_hook(void (*fn)(void *), void *arg)
{
	out.sync_hook = fn;
	out.sync_arg = arg;
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
	if (final) {
		/* Drawn here and now: what cmrun prints after it (the fault
		 * report) must come after it, not race the writer thread. */
		status_line_redraw();
		return;
	}
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
		cm_vec_free(&src->carry);
		cm_vec_free(&src->held_buf);
		history_free(src->hist);
		history_free(src->prev);
		free(src);
	}
}
