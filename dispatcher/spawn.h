/* Starting processes: finding executables, building environments, the
 * fork/exec that every child of cmrun goes through, launchers for remote
 * hosts, and the ranks and CMs themselves (spawn_rank, spawn_cm). Calls
 * nothing above it: the caller watches what it started. */
#ifndef CMRUN_SPAWN_H
#define CMRUN_SPAWN_H

#include <stddef.h>
#include <sys/types.h>

#include "job.h"

/* Records which signals cmrun was started with ignored; call before any
 * handler is installed. */
void spawn_save_signal_dispositions(void);

/* Resolves name as execvp would (a name with '/' as is, else each PATH
 * entry). Returns a malloc'd path, or NULL with a user-facing reason in
 * err and *exit_status set to 127 (not found) or 126 (not executable). */
char *spawn_find_program(const char *name, char *err, size_t errlen, int *exit_status);

/* A server program: $ENV_VAR, else next to cmrun's own executable, else
 * ../BUILD_DIR/NAME from it (build tree), else PATH. */
char *spawn_find_server(const char *name, const char *env_var, const char *build_dir, char *err,
                        size_t errlen);
/* cmserver (CHANMEM_CMSERVER, ../cmserver/cmserver). */
char *spawn_find_cmserver(char *err, size_t errlen);

struct child_spec {
	const char *path;
	char *const *argv;
	char *const *envp;
	int stdin_fd, stdout_fd, stderr_fd;
	int keep_fd;  /* inherited across exec (listening socket, ready pipe), or -1 */
	int keep_fd2; /* a second one (the control pipe of ranks), or -1 */
};
/* fork + exec with cmrun's child set-up (own process group, PDEATHSIG,
 * default signal dispositions). Returns the pid once exec succeeded, or -1
 * with the reason in err. */
pid_t spawn_process(const struct child_spec *spec, char *err, size_t errlen);
/* The user's environment plus the job-wide extra entries and a, b, c
 * (each may be NULL). malloc'd array of borrowed strings. */
char **spawn_build_env(struct job *job, char **extra, const char *a, const char *b, const char *c);

/* 32 hex characters from 16 random bytes. Returns 0 or -1. */
int spawn_make_secret(char out[CM_SECRET_LEN + 1]);

/* The user's environment without the variables cmrun sets for the job. */
int spawn_base_env(struct job *job);

/* Starts (or restarts, with the incarnation already incremented) one rank:
 * own process group, PDEATHSIG, stdout/stderr pipes forwarded, job
 * environment. Returns 0, or -1 with a message already printed. */
int spawn_rank(struct job *job, struct rank_proc *r);

/* Starts a server (argv: absolute path first) on remote host `host`
 * through its launcher, the job secret on its stdin, whose write end is
 * left open in *stdin_wr (closing it stops the server behind ssh or a
 * template). Returns the launcher's pid, or -1 with why. */
pid_t spawn_remote_server(struct job *job, int host, char **argv, int stdout_fd, int stderr_fd,
                          int *stdin_wr, char *why, size_t whylen);

/* Starts cmserver number cm->index with a ready pipe the loop watches. */
int spawn_cm(struct job *job, struct cm_proc *cm);
/* cm's journal file (--cm-restart), "" without one. */
void spawn_journal_path(const struct job *job, const struct cm_proc *cm, char *buf, size_t len);

#endif
