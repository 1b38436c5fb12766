/* The status line on cmrun's stderr (output_status in output.h is the way
 * in): kept below the forwarded lines. Before a writer thread writes a
 * chunk, a visible status line is erased; once both streams are at the
 * start of a line it is drawn again, by whichever writer gets there. While
 * the status line is on, both writers write under one lock, so an erase, a
 * chunk and a redraw never interleave. Until the first status_line_set the
 * writers write as if it did not exist. */
#ifndef CMRUN_STATUS_LINE_H
#define CMRUN_STATUS_LINE_H

#include <stdbool.h>
#include <stddef.h>

/* Writer thread of stream which (OUT_STDOUT/OUT_STDERR): writes len bytes
 * to fd around the status line. broken: the reader went away (nothing is
 * written any more); returns the new value. */
bool status_line_write(int which, int fd, const char *data, size_t len, bool broken);
/* The stderr writer, woken by output_status: draws the line if it changed
 * and the screen is at the start of a line. */
void status_line_redraw(void);
/* New text (no newline); final: draw it once more with a newline and
 * forget it. The caller then wakes the stderr writer. */
void status_line_set(const char *text, bool final);

#endif
