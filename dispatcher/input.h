/* cmrun's stdin goes to rank 0 (as with mpirun); the other ranks read
 * /dev/null. Ranks live in their own process groups, so rank 0 cannot read
 * the terminal itself: cmrun relays it through a pipe. */
#ifndef CMRUN_INPUT_H
#define CMRUN_INPUT_H

struct ev_loop;

/* Returns the read end to give rank 0 as its stdin, or -1 when stdin is not
 * relayed (cmrun is in the background of a terminal, or no pipe). */
int input_start(struct ev_loop *loop);

/* Stops relaying (rank 0 is gone or the job is over). */
void input_stop(void);

#endif
