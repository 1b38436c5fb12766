/* cmrun's stdin goes to rank 0 (as with mpirun); the other ranks read
 * /dev/null. Ranks live in their own process groups, so rank 0 cannot read
 * the terminal itself: cmrun relays it through a pipe. */
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

/* Stops relaying (rank 0 is gone or the job is over). */
void input_stop(void);

#endif
