/* cmrun --remote-exec (remote_exec.c): the launch helper on remote hosts. */
#ifndef CMRUN_REMOTE_EXEC_H
#define CMRUN_REMOTE_EXEC_H

#define CMRUN_REMOTE_EXEC_OPTION "--remote-exec"

/* argv: what follows --remote-exec. Does not return. */
int remote_exec_main(int argc, char **argv) __attribute__((noreturn));

#endif
