/* Output forwarding: every child's stdout/stderr pipe is a source; cmrun's
 * own stdout and stderr are the two streams. A source hands whole lines to
 * its stream, so a line of one rank is never interleaved with another's
 * (a line longer than the carry buffer holds the stream until its newline).
 *
 * Each stream has a writer thread doing blocking writes, so a slow or
 * stopped reader of cmrun's output never stalls the event loop (child exits,
 * signals, timers keep working); past a high-water mark of queued bytes the
 * sources stop reading, which back-pressures the ranks instead of growing
 * memory. All functions here are called from the event loop thread. */
#ifndef CMRUN_OUTPUT_H
#define CMRUN_OUTPUT_H

#include <stdbool.h>

struct ev_loop;
struct out_source;

enum out_target {
	OUT_STDOUT = 0,
	OUT_STDERR = 1,
};

/* Starts the writer threads. tag_lines_at_eof: end an unterminated last
 * line with a newline (used with --tag-output, where output is
 * line-oriented); without it the bytes go out exactly as written. */
int output_init(struct ev_loop *loop, bool tag_lines_at_eof);

/* Takes ownership of fd (read end of a pipe; made non-blocking). prefix
 * (copied, may be NULL) starts every line. */
struct out_source *output_source_open(int fd, enum out_target target, const char *prefix);

/* Reads whatever the pipe holds now (the writer just died: its last lines
 * must come before cmrun's message about it). */
void output_source_drain(struct out_source *src);

/* Bytes read from the source's pipe so far (dropped ones included). */
unsigned long long output_source_position(const struct out_source *src);

/* Drops the first n bytes the source reads instead of forwarding them (a
 * re-executed rank repeating what an earlier incarnation printed). */
void output_source_skip(struct out_source *src, unsigned long long n);

/* src is a re-executed rank's stream, prev its dead predecessor's: src's
 * lines are matched against the lines prev and those before it printed;
 * repeats are dropped, new lines forwarded (output.c). When prev kept no
 * line history (too many lines), the first bytes_seen bytes are dropped. */
void output_source_follow(struct out_source *src, struct out_source *prev,
                          unsigned long long bytes_seen);

/* Called when a following source needs the ranks' reports read now (a
 * restored rank announces its filler on the control pipe). */
void output_set_sync_hook(void (*fn)(void *), void *arg);

/* The new incarnation is about to write n filler bytes ('\n') standing
 * for what it printed before its checkpoint image: they are dropped and
 * stand for as many bytes of the earlier output (output_source_skip). */
void output_source_filler(struct out_source *src, unsigned long long n);

/* True once the source has seen EOF (or was closed). */
bool output_source_done(const struct out_source *src);

/* True while the source waits for its stream (the reader of cmrun's output
 * is behind, or another source holds the stream mid-line). */
bool output_source_paused(const struct out_source *src);

/* Gives up waiting for EOF: forwards what is buffered, closes the fd. The
 * source stays allocated (done) until output_shutdown. */
void output_source_close(struct out_source *src);

/* cmrun's own diagnostics ("cmrun: ..." lines) through the stderr stream,
 * ordered with the forwarded lines. Before output_init and after
 * output_shutdown they go straight to stderr. */
void output_message(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The status line (text without newline): drawn on stderr below the
 * forwarded lines, redrawn after them; final draws it once more and ends it
 * with a newline. */
void output_status(const char *text, bool final);

/* The same, only with --verbose. */
void output_verbose(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Sources not yet at EOF. */
int output_open_sources(void);

/* True when nothing is queued and the writers are idle. */
bool output_flushed(void);

/* Bytes the writer threads have written so far (progress of a slow reader). */
unsigned long long output_bytes_written(void);

/* Stops the writer threads after they have written everything (call once
 * output_flushed() is true, or to give up on a stuck reader at exit). */
void output_shutdown(bool wait_for_writers);

#endif
