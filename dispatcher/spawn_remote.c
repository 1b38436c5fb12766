/* Spawning through a launcher (launch.h): ranks and servers on remote
 * hosts. Their environment goes in the command, the job secret on their
 * stdin, their output through the launcher's pipes. */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "input.h"
#include "jobenv.h"
#include "launch.h"
#include "net.h"
#include "output.h"
#include "spawn.h"

static void close_pair(int p[2])
{
	if (p[0] >= 0)
		close(p[0]);
	if (p[1] >= 0)
		close(p[1]);
}

/* Starts argv on a remote host through its launcher, the secret first on
 * its stdin: stdin_fd is the read end of a pipe whose write end is
 * stdin_wr (-1: the caller writes the line itself); the secret line is
 * written here, closing stdin_wr is the caller's. Returns the launcher's
 * pid or -1 with why. */
static pid_t spawn_remote(struct job *job, int host, char *const *env, char *const *argv,
                          bool watched, int stdin_fd, int stdin_wr, int stdout_fd, int stderr_fd,
                          char *why, size_t whylen)
{
	const struct cmrun_options *o = job->opts;
	char **largv = launch_argv(o, host, env, argv, watched);
	if (largv == NULL) {
		snprintf(why, whylen, "out of memory");
		return -1;
	}
	int status;
	char *path = spawn_find_program(largv[0], why, whylen, &status);
	if (path == NULL) {
		launch_free_argv(largv);
		return -1;
	}
	if (o->verbosity >= 2) {
		char *line = launch_describe(largv);
		output_verbose("launching on host %s: %s", o->hosts.list[host].name,
		               line ? line : "(out of memory)");
		free(line);
	}
	char **envp = spawn_build_env(job, NULL, NULL, NULL, NULL);
	struct child_spec spec = {
	    .path = path,
	    .argv = largv,
	    .envp = envp,
	    .stdin_fd = stdin_fd,
	    .stdout_fd = stdout_fd,
	    .stderr_fd = stderr_fd,
	    .keep_fd = -1,
	    .keep_fd2 = -1,
	};
	pid_t pid = envp ? spawn_process(&spec, why, whylen) : -1;
	if (envp == NULL)
		snprintf(why, whylen, "out of memory");
	free(envp);
	free(path);
	launch_free_argv(largv);
	if (pid > 0 && stdin_wr >= 0) {
		/* A pipe's first 4 KiB never block: the line goes at once. */
		char line[CM_SECRET_LEN + 2];
		snprintf(line, sizeof line, "%s\n", job->secret);
		if (cm_write_full(stdin_wr, line, strlen(line)) < 0)
			output_verbose("host %s: cannot hand the secret over: %s",
			               o->hosts.list[host].name, strerror(errno));
	}
	return pid;
}

/* A remote rank's command environment: the job's entries (without the
 * secret, which goes on stdin, and the control pipe it cannot inherit),
 * its control address, its own entries. */
static char **remote_rank_env(struct job *job, struct rank_proc *r, const char *rank_var,
                              const char *incarnation_var)
{
	const struct cmrun_options *o = job->opts;
	size_t n = 0;
	while (job->rank_env[n])
		n++;
	char **env = calloc(n + (size_t)o->nexports + 5, sizeof *env);
	if (env == NULL)
		return NULL;
	size_t k = 0;
	for (int i = 0; i < o->nexports; i++)
		env[k++] = o->exports[i];
	for (size_t i = 0; i < n; i++) {
		const char *e = job->rank_env[i];
		if (strncmp(e, CM_ENV_SECRET "=", strlen(CM_ENV_SECRET) + 1) == 0 ||
		    strncmp(e, CM_ENV_CONTROL_FD "=", strlen(CM_ENV_CONTROL_FD) + 1) == 0)
			continue;
		env[k++] = (char *)e;
	}
	env[k++] = (char *)rank_var;
	env[k++] = (char *)incarnation_var;
	env[k++] = job->control_env;
	if (r->cms_env)
		env[k++] = r->cms_env;
	if (job->opts->transport != CMRUN_TRANSPORT_CM) {
		char addr[32], *listen = NULL;
		cm_format_addr(&r->listen_addr, addr, sizeof addr);
		if (asprintf(&listen, "%s=%s", CM_ENV_LISTEN, addr) < 0) {
			free(env);
			return NULL;
		}
		env[k++] = listen; /* freed by the caller (the last entry) */
	}
	env[k] = NULL;
	return env;
}

/* spawn_rank for a rank on a remote host. */
pid_t spawn_rank_remote(struct job *job, struct rank_proc *r, const char *rank_var,
                        const char *incarnation_var, int out_wr, int err_wr, char *why,
                        size_t whylen)
{
	char **env = remote_rank_env(job, r, rank_var, incarnation_var);
	if (env == NULL) {
		snprintf(why, whylen, "out of memory");
		return -1;
	}
	int in[2] = {-1, -1};
	bool user_stdin = r->rank == 0 && r->replica == 0 && job->rank0_stdin >= 0;
	pid_t pid = -1;
	if (user_stdin) {
		/* cmrun's stdin follows the secret line in the same pipe. */
		char line[CM_SECRET_LEN + 2];
		snprintf(line, sizeof line, "%s\n", job->secret);
		pid = spawn_remote(job, r->host_index, env, job->opts->program_argv, false,
		                   job->rank0_stdin, -1, out_wr, err_wr, why, whylen);
		if (pid > 0)
			input_release(line);
	} else if (pipe2(in, O_CLOEXEC) < 0) {
		snprintf(why, whylen, "pipe: %s", strerror(errno));
	} else {
		pid = spawn_remote(job, r->host_index, env, job->opts->program_argv, false, in[0],
		                   in[1], out_wr, err_wr, why, whylen);
	}
	close_pair(in);
	if (job->opts->transport != CMRUN_TRANSPORT_CM) {
		size_t last = 0;
		while (env[last + 1])
			last++;
		free(env[last]);
	}
	free(env);
	return pid;
}

pid_t spawn_remote_server(struct job *job, int host, char **argv, int stdout_fd, int stderr_fd,
                          int *stdin_wr, char *why, size_t whylen)
{
	int in[2];
	char *no_env[] = {NULL};
	*stdin_wr = -1;
	if (pipe2(in, O_CLOEXEC) < 0) {
		snprintf(why, whylen, "pipe: %s", strerror(errno));
		return -1;
	}
	pid_t pid = spawn_remote(job, host, no_env, argv, true, in[0], in[1], stdout_fd, stderr_fd,
	                         why, whylen);
	close(in[0]);
	if (pid < 0)
		close(in[1]);
	else
		*stdin_wr = in[1];
	return pid;
}

/* spawn_cm on a remote host: stdout is the report pipe (the address
 * comes on it first), the stdin pipe stays open (its end stops a watched
 * server, launch.h). */
int spawn_cm_remote(struct job *job, struct cm_proc *cm, char **argv, int ready[2], int err[2],
                    int report[2])
{
	char why[PATH_MAX + 256];
	close_pair(ready);
	pid_t pid = spawn_remote_server(job, cm->host_index, argv, report[1], err[1], &cm->stdin_wr,
	                                why, sizeof why);
	close(err[1]);
	close(report[1]);
	if (pid < 0) {
		output_message("error: cmserver %d: %s", cm->index, why);
		close(err[0]);
		close(report[0]);
		return -1;
	}
	spawn_cm_started(job, cm, pid, report[0], -1,
	                 err[0]); /* the address comes with its reports */
	output_verbose("cmserver %d started on host %s through %s (pid %d, mode %s)", cm->index,
	               job->opts->hosts.list[cm->host_index].name, launch_name(job->opts), (int)pid,
	               job->opts->mode);
	return 0;
}
