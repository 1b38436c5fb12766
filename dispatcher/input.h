/* cmrun's stdin goes to rank 0 (as with mpirun); the other ranks read
 * /dev/null. Ranks live in their own process groups, so rank 0 cannot read
 * the terminal itself: cmrun relays it through a pipe. What it relayed is
 * kept: a restarted rank 0 reads it again from the start (input.c). */
#ifndef CMRUN_INPUT_H
#define CMRUN_INPUT_H

#include <stdbool.h>

struct ev_loop;

/* Returns the read end to give rank 0 as its stdin, or -1 when stdin is not
 * relayed (cmrun is in the background of a terminal, or no pipe). hold:
 * nothing is written into the pipe until input_release. */
int input_start(struct ev_loop *loop, bool hold);
/* Writes first_line into the pipe, then relays what cmrun's stdin gives
 * (a remote rank 0 reads the job secret first). */
void input_release(const char *first_line);

/* For a new incarnation of rank 0: the read end of a new pipe, fed from
 * the first byte of the input (the old pipe is closed), or -1. hold: as for
 * input_start. */
int input_rewind(bool hold);

/* Stops relaying (rank 0 is gone or the job is over); input_rewind
 * starts again for a restarted rank 0. */
void input_stop(void);

#endif
