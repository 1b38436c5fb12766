#include <config.h>

#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "input.h"
#include "jobenv.h"
#include "launch.h"
#include "net.h"
#include "output.h"
#include "repl.h"

extern char **environ;

/* Signals cmrun's own parent set to ignored (nohup, a background job of a
 * non-interactive shell): the ranks inherit that as they would without
 * cmrun. Every other signal starts at its default in a child. */
static sigset_t inherited_ignored;

void spawn_save_signal_dispositions(void)
{
	sigemptyset(&inherited_ignored);
	for (int sig = 1; sig < NSIG; sig++) {
		struct sigaction sa;
		if (sigaction(sig, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN)
			sigaddset(&inherited_ignored, sig);
	}
}

/* What the child becomes. Everything is prepared before fork: between fork
 * and exec the child only makes async-signal-safe calls (the writer threads
 * may hold the allocator's lock at fork time). */
static void __attribute__((noreturn))
child_exec(const struct child_spec *spec, int status_fd, pid_t parent)
{
	/* Own process group: teardown signals the group, which also reaches
	 * what the program itself started; the terminal's Ctrl-C goes to cmrun
	 * alone, which then stops the job in order. */
	setpgid(0, 0);
	/* Die with cmrun, even when cmrun is SIGKILLed. If cmrun died before
	 * the prctl took effect, getppid() already shows another parent. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		goto fail;
	if (getppid() != parent)
		_exit(CMRUN_EXIT_NOT_FOUND);

	/* cmrun ignores SIGPIPE and blocks signals around fork; an ignored
	 * disposition and the mask would survive exec. */
	for (int sig = 1; sig < NSIG; sig++) {
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = sigismember(&inherited_ignored, sig) == 1 ? SIG_IGN : SIG_DFL;
		sigaction(sig, &sa, NULL);
	}

	if (dup2(spec->stdin_fd, STDIN_FILENO) < 0 || dup2(spec->stdout_fd, STDOUT_FILENO) < 0 ||
	    dup2(spec->stderr_fd, STDERR_FILENO) < 0)
		goto fail;
	if (spec->keep_fd >= 0 && fcntl(spec->keep_fd, F_SETFD, 0) < 0)
		goto fail;
	if (spec->keep_fd2 >= 0 && fcntl(spec->keep_fd2, F_SETFD, 0) < 0)
		goto fail;

	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	execve(spec->path, spec->argv, spec->envp);
fail:;
	int e = errno;
	ssize_t unused = write(status_fd, &e, sizeof e);
	(void)unused;
	_exit(CMRUN_EXIT_NOT_FOUND);
}

/* fork + exec. Returns the pid once exec succeeded (a CLOEXEC pipe tells:
 * EOF means exec happened, an int means it failed with that errno). */
pid_t spawn_process(const struct child_spec *spec, char *err, size_t errlen)
{
	int status_pipe[2];
	sigset_t all, old;

	if (pipe2(status_pipe, O_CLOEXEC) < 0) {
		snprintf(err, errlen, "pipe: %s", strerror(errno));
		return -1;
	}
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid == 0)
		child_exec(spec, status_pipe[1], parent);
	int fork_errno = errno;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	close(status_pipe[1]);
	if (pid < 0) {
		close(status_pipe[0]);
		snprintf(err, errlen, "fork: %s", strerror(fork_errno));
		return -1;
	}
	/* Also from this side, so the group exists before we may signal it
	 * (fails harmlessly with EACCES once the child has exec'd). */
	setpgid(pid, pid);

	int child_errno = 0;
	ssize_t n;
	do
		n = read(status_pipe[0], &child_errno, sizeof child_errno);
	while (n < 0 && errno == EINTR);
	close(status_pipe[0]);
	if (n == (ssize_t)sizeof child_errno) {
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		snprintf(err, errlen, "cannot execute %s: %s", spec->path, strerror(child_errno));
		return -1;
	}
	return pid;
}

/* Checks one candidate path; returns 0 if it can be executed, else an errno. */
static int check_executable(const char *path)
{
	struct stat st;
	if (stat(path, &st) < 0)
		return errno;
	if (S_ISDIR(st.st_mode))
		return EISDIR;
	if (!S_ISREG(st.st_mode) || access(path, X_OK) < 0)
		return EACCES;
	return 0;
}

char *spawn_find_program(const char *name, char *err, size_t errlen, int *exit_status)
{
	*exit_status = CMRUN_EXIT_NOT_FOUND;
	if (strchr(name, '/')) {
		int e = check_executable(name);
		if (e == 0)
			return strdup(name);
		if (e != ENOENT && e != ENOTDIR)
			*exit_status = CMRUN_EXIT_NOT_EXECUTABLE;
		snprintf(err, errlen, "cannot run '%s': %s", name, strerror(e));
		return NULL;
	}

	const char *path = getenv("PATH");
	if (path == NULL)
		path = "/usr/local/bin:/usr/bin:/bin";
	int first_error = 0;
	char candidate[PATH_MAX];
	for (const char *p = path;; p++) {
		const char *end = strchr(p, ':');
		size_t dirlen = end ? (size_t)(end - p) : strlen(p);
		/* An empty PATH entry means the current directory, as for execvp. */
		int n = dirlen
		            ? snprintf(candidate, sizeof candidate, "%.*s/%s", (int)dirlen, p, name)
		            : snprintf(candidate, sizeof candidate, "%s", name);
		if (n > 0 && (size_t)n < sizeof candidate) {
			int e = check_executable(candidate);
			if (e == 0)
				return strdup(candidate);
			if (e != ENOENT && e != ENOTDIR && first_error == 0)
				first_error = e;
		}
		if (end == NULL)
			break;
		p = end;
	}
	/* Then the current directory, as mpirun does: "cmrun -n 4 app" right after
	 * "cmcc -o app app.c" runs ./app. The absolute path keeps it valid for
	 * processes started elsewhere. */
	char cwd[PATH_MAX];
	if (first_error == 0 && getcwd(cwd, sizeof cwd) != NULL) {
		int n = snprintf(candidate, sizeof candidate, "%s/%s", cwd, name);
		if (n > 0 && (size_t)n < sizeof candidate) {
			int e = check_executable(candidate);
			if (e == 0)
				return strdup(candidate);
			if (e != ENOENT && e != ENOTDIR)
				first_error = e;
		}
	}
	if (first_error) {
		*exit_status = CMRUN_EXIT_NOT_EXECUTABLE;
		snprintf(err, errlen, "cannot run '%s': found but %s", name, strerror(first_error));
	} else {
		snprintf(err, errlen,
		         "cannot run '%s': no such program in PATH or the current directory", name);
	}
	return NULL;
}

char *spawn_find_server(const char *name, const char *env_var, const char *build_dir, char *err,
                        size_t errlen)
{
	int status;
	const char *from_env = getenv(env_var);
	if (from_env && *from_env) {
		char why[PATH_MAX + 128];
		char *path = spawn_find_program(from_env, why, sizeof why, &status);
		if (path == NULL)
			snprintf(err, errlen, "%s: %s", env_var, why);
		return path;
	}

	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n > 0) {
		self[n] = '\0';
		char *slash = strrchr(self, '/');
		if (slash) {
			*slash = '\0';
			char candidate[2 * PATH_MAX];
			snprintf(candidate, sizeof candidate, "%s/%s", self, name);
			if (check_executable(candidate) == 0)
				return strdup(candidate);
			snprintf(candidate, sizeof candidate, "%s/../%s/%s", self, build_dir, name);
			if (check_executable(candidate) == 0)
				return strdup(candidate);
		}
	}
	char why[PATH_MAX + 128];
	char *path = spawn_find_program(name, why, sizeof why, &status);
	if (path == NULL)
		snprintf(err, errlen,
		         "cannot find %s (not next to cmrun, not in PATH; %s may name it)", name,
		         env_var);
	return path;
}

char *spawn_find_cmserver(char *err, size_t errlen)
{
	return spawn_find_server("cmserver", "CHANMEM_CMSERVER", "cmserver", err, errlen);
}

int spawn_make_secret(char out[CM_SECRET_LEN + 1])
{
	unsigned char raw[CM_SECRET_LEN / 2];
	size_t have = 0;
	while (have < sizeof raw) {
		ssize_t n = getrandom(raw + have, sizeof raw - have, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		have += (size_t)n;
	}
	static const char hex[] = "0123456789abcdef";
	for (size_t i = 0; i < sizeof raw; i++) {
		out[2 * i] = hex[raw[i] >> 4];
		out[2 * i + 1] = hex[raw[i] & 15];
	}
	out[CM_SECRET_LEN] = '\0';
	return 0;
}

/* Variables cmrun owns: an inherited value (from an enclosing job, say)
 * must not leak into this one. */
static bool is_job_variable(const char *entry)
{
	static const char *const names[] = {CM_ENV_RANK,
	                                    CM_ENV_SIZE,
	                                    CM_ENV_INCARNATION,
	                                    CM_ENV_SECRET,
	                                    CM_ENV_TRANSPORT,
	                                    CM_ENV_CMS,
	                                    CM_ENV_CM_STANDBYS,
	                                    CM_ENV_HOME,
	                                    CM_ENV_PEERS,
	                                    CM_ENV_LISTEN_FD,
	                                    CM_ENV_CONTROL_FD,
	                                    CMRUN_ENV_HEARTBEAT_MS,
	                                    CMRUN_ENV_CM_RECONNECT,
	                                    CM_ENV_CONTROL,
	                                    CM_ENV_LISTEN};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		size_t len = strlen(names[i]);
		if (strncmp(entry, names[i], len) == 0 && entry[len] == '=')
			return true;
	}
	return false;
}

int spawn_base_env(struct job *job)
{
	size_t n = 0;
	for (char **e = environ; *e; e++)
		n++;
	job->base_env = calloc(n + 1, sizeof *job->base_env);
	if (job->base_env == NULL)
		return -1;
	job->base_env_len = 0;
	for (char **e = environ; *e; e++)
		if (!is_job_variable(*e))
			job->base_env[job->base_env_len++] = *e;
	return 0;
}

/* base_env + extra (NULL-terminated) + up to three more entries. */
char **spawn_build_env(struct job *job, char **extra, const char *a, const char *b, const char *c)
{
	size_t nextra = 0;
	while (extra && extra[nextra])
		nextra++;
	char **env = malloc((job->base_env_len + nextra + 4) * sizeof *env);
	if (env == NULL)
		return NULL;
	size_t i = 0;
	for (size_t k = 0; k < job->base_env_len; k++)
		env[i++] = job->base_env[k];
	for (size_t k = 0; k < nextra; k++)
		env[i++] = extra[k];
	if (a)
		env[i++] = (char *)a;
	if (b)
		env[i++] = (char *)b;
	if (c)
		env[i++] = (char *)c;
	env[i] = NULL;
	return env;
}

static void close_pair(int p[2])
{
	if (p[0] >= 0)
		close(p[0]);
	if (p[1] >= 0)
		close(p[1]);
}

/* A rank incarnation was (re)spawned: fresh detection and failure state. */
static void fresh_incarnation(struct job *job, struct rank_proc *r)
{
	if (ev_is_active(&r->lost_timer) || ev_is_pending(&r->lost_timer))
		ev_timer_stop(job->loop, &r->lost_timer);
	r->declared_failed = false;
	r->failed_why[0] = '\0';
	r->hb_watched = r->hb_finished = false;
	r->mpi_started = r->from_image = r->kill_injected = r->crashed = false;
	r->image = 0;
}

/* The bookkeeping of a CM just started: its report pipe, stderr source
 * and ready pipe (-1: a remote CM, whose address comes with its reports).
 * The loop watches the pipes (detect_cm_spawned). */
static void cm_started(struct job *job, struct cm_proc *cm, pid_t pid, int report_fd, int ready_fd,
                       int err_fd)
{
	cm->report_fd = report_fd;
	cm_set_nonblock(report_fd, 1);
	cm->pid = pid;
	cm->state = PROC_RUNNING;
	job->cms_running++;
	cm->ready_fd = ready_fd;
	if (ready_fd >= 0)
		cm_set_nonblock(ready_fd, 1);
	cm->err = output_source_open(err_fd, OUT_STDERR, NULL);
}

/* ---- through a launcher (launch.h): ranks and servers on remote hosts.
 * Their environment goes in the command, the job secret on their stdin,
 * their output through the launcher's pipes. ---- */

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

/* spawn_rank for a rank on a remote host (stdout and stderr are the write
 * ends of the rank's pipes). */
static pid_t spawn_rank_remote(struct job *job, struct rank_proc *r, const char *rank_var,
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
 * server, launch.h); its report, ready and error pipes are taken over. */
static int spawn_cm_remote(struct job *job, struct cm_proc *cm, char **argv, int ready[2],
                           int err[2], int report[2])
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
	cm_started(job, cm, pid, report[0], -1, err[0]); /* the address comes with its reports */
	output_verbose("cmserver %d started on host %s through %s (pid %d, mode %s)", cm->index,
	               job->opts->hosts.list[cm->host_index].name, launch_name(job->opts), (int)pid,
	               job->opts->mode);
	return 0;
}

/* ---- ranks and CMs ---- */

int spawn_rank(struct job *job, struct rank_proc *r)
{
	int out[2] = {-1, -1}, err[2] = {-1, -1};
	char why[PATH_MAX + 256];

	if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0) {
		output_message("error: rank %d: pipe: %s", r->rank, strerror(errno));
		close_pair(out);
		close_pair(err);
		return -1;
	}
	char rank_var[48], incarnation_var[48], fd_var[48];
	snprintf(rank_var, sizeof rank_var, "%s=%d", CM_ENV_RANK, r->rank);
	/* Replicas are never restarted (incarnation 0, the default): the
	 * slot carries the replica index instead. */
	if (job->opts->transport == CMRUN_TRANSPORT_REPL)
		snprintf(incarnation_var, sizeof incarnation_var, "%s=%d", CM_ENV_REPLICA,
		         r->replica);
	else
		snprintf(incarnation_var, sizeof incarnation_var, "%s=%u", CM_ENV_INCARNATION,
		         r->incarnation);
	snprintf(fd_var, sizeof fd_var, "%s=%d", CM_ENV_LISTEN_FD, r->listen_fd);
	if (job->ncms) {
		/* Where it runs now decides which CMs it reaches by unix socket. */
		free(r->cms_env);
		if ((r->cms_env = cms_env_for(job, r)) == NULL) {
			output_message("error: rank %d: out of memory", r->rank);
			close_pair(out);
			close_pair(err);
			return -1;
		}
	}
	/* A restarted rank 0 reads cmrun's input again from its first byte
	 * (input.c); the first incarnation's pipe comes from job_run. */
	bool rewound = false;
	if (r->rank == 0 && r->incarnation > 0 && job->opts->transport == CMRUN_TRANSPORT_CM &&
	    job->rank0_stdin < 0) {
		job->rank0_stdin = input_rewind(r->remote);
		rewound = job->rank0_stdin >= 0;
	}
	pid_t pid;
	if (r->remote) {
		pid = spawn_rank_remote(job, r, rank_var, incarnation_var, out[1], err[1], why,
		                        sizeof why);
		goto spawned;
	}
	/* The last slot: CHANMEM_CMS (transport cm) or the listening socket
	 * (direct transports); never both. */
	char **env = spawn_build_env(job, job->rank_env, rank_var, incarnation_var,
	                             r->cms_env          ? r->cms_env
	                             : r->listen_fd >= 0 ? fd_var
	                                                 : NULL);
	if (env == NULL) {
		output_message("error: rank %d: out of memory", r->rank);
		close_pair(out);
		close_pair(err);
		return -1;
	}

	struct child_spec spec = {
	    .path = job->program_path,
	    .argv = job->opts->program_argv,
	    .envp = env,
	    .stdin_fd = (r->rank == 0 && r->replica == 0 && job->rank0_stdin >= 0)
	                    ? job->rank0_stdin
	                    : job->devnull_fd,
	    .stdout_fd = out[1],
	    .stderr_fd = err[1],
	    .keep_fd = r->listen_fd,
	    .keep_fd2 = job->control_wr,
	};
	pid = spawn_process(&spec, why, sizeof why);
	free(env);
spawned:
	close(out[1]);
	close(err[1]);
	if (rewound) {
		close(job->rank0_stdin); /* the rank holds it now */
		job->rank0_stdin = -1;
	}
	if (pid < 0) {
		output_message("error: rank %d: %s", r->rank, why);
		close(out[0]);
		close(err[0]);
		return -1;
	}
	r->pid = pid;
	r->state = PROC_RUNNING;
	job->ranks_running++;
	fresh_incarnation(job, r);

	char prefix[32] = "";
	if (job->opts->tag_output)
		snprintf(prefix, sizeof prefix, "[%d] ", r->rank);
	if (job->opts->transport == CMRUN_TRANSPORT_REPL) {
		/* Its own copy of the listening socket: once it dies, the port
		 * refuses, which is how the others learn it is gone. */
		if (r->listen_fd >= 0)
			close(r->listen_fd);
		r->listen_fd = -1;
		repl_spawned(job, r, out[0], err[0], prefix);
	} else {
		r->out = output_source_open(out[0], OUT_STDOUT, prefix);
		r->err = output_source_open(err[0], OUT_STDERR, prefix);
	}
	if ((r->out == NULL || r->err == NULL) && r->held_out < 0) {
		/* The rank runs; only its output is lost. Say so. */
		output_message("error: rank %d: out of memory, its output is not forwarded",
		               r->rank);
	}
	const char *how = r->remote ? ", through " : "";
	const char *launcher = r->remote ? launch_name(job->opts) : "";
	if (job->opts->transport == CMRUN_TRANSPORT_REPL)
		output_verbose("rank %d replica %d started (pid %d, host %s%s%s)", r->rank,
		               r->replica, (int)pid, r->host, how, launcher);
	else
		output_verbose("rank %d started (pid %d, incarnation %u, host %s%s%s)", r->rank,
		               (int)pid, r->incarnation, r->host, how, launcher);
	return 0;
}

/* cm's journal file (--cm-restart, cm_restart.c), "" without one: a
 * standby's copy, and the journal of a CM its standby took over, are the
 * standby's (cm-K.standby, then cm-K.standby-2, ... for the standbys a CM
 * gets after a takeover). */
void spawn_journal_path(const struct job *job, const struct cm_proc *cm, char *buf, size_t len)
{
	if (job->journal_dir == NULL) {
		if (len)
			buf[0] = '\0';
	} else if (cm->journal_gen == 0) {
		snprintf(buf, len, "%s/cm-%d.journal", job->journal_dir, cm->index);
	} else if (cm->journal_gen == 1) {
		snprintf(buf, len, "%s/cm-%d.standby", job->journal_dir, cm->index);
	} else {
		snprintf(buf, len, "%s/cm-%d.standby-%u", job->journal_dir, cm->index,
		         cm->journal_gen);
	}
}

/* The standby a CM process copies its journal to (--cm-standby): one that
 * listens and has not been used. A CM restarted on its journal copies the
 * whole journal to it first (cmserver --mirror). */
static const struct cm_proc *mirror_for(const struct job *job, const struct cm_proc *cm)
{
	if (job->standbys == NULL || cm->is_standby)
		return NULL;
	const struct cm_proc *sb = &job->standbys[cm->index];
	return sb->state == PROC_RUNNING && sb->ready && !sb->used ? sb : NULL;
}

int spawn_cm(struct job *job, struct cm_proc *cm)
{
	const struct cmrun_options *o = job->opts;
	cm->ready = false;
	cm->ready_len = 0;
	cm->report_len = 0;
	int ready[2] = {-1, -1}, err[2] = {-1, -1}, report[2] = {-1, -1};
	char why[PATH_MAX + 256];

	if (pipe2(ready, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0 ||
	    pipe2(report, O_CLOEXEC) < 0) {
		output_message("error: cmserver %d: pipe: %s", cm->index, strerror(errno));
		close_pair(ready);
		close_pair(err);
		close_pair(report);
		return -1;
	}
	char ready_fd[16], report_fd[16], max_message[32], secret_var[64], world[16];
	snprintf(ready_fd, sizeof ready_fd, "%d", ready[1]);
	snprintf(report_fd, sizeof report_fd, "%d", report[1]);
	snprintf(max_message, sizeof max_message, "%llu", (unsigned long long)o->max_message);
	snprintf(secret_var, sizeof secret_var, "%s=%s", CM_ENV_SECRET, job->secret);

	/* The secret travels in the environment, never on the command line
	 * (which every user of the machine can read in /proc). */
	char *argv[24 + CMRUN_CM_ARGV_MAX];
	int argc = 0;
	char listen[32], journal[PATH_MAX];
	const struct cmrun_host *host = &o->hosts.list[cm->host_index];
	/* Reached by ranks on other hosts: on its host's address (remote), or
	 * the one remote processes reach this machine at. A restarted CM
	 * listens where its ranks knew it: the port and unix name it had. */
	if (cm->addr[0])
		snprintf(listen, sizeof listen, "%s", cm->addr);
	else
		snprintf(listen, sizeof listen, "%s:0",
		         cm->remote        ? host->addr
		         : job->any_remote ? job->local_ip
		                           : "127.0.0.1");
	argv[argc++] = cm->remote ? job->cmserver_path : "cmserver";
	argv[argc++] = "--mode";
	argv[argc++] = (char *)o->mode;
	argv[argc++] = "--listen";
	argv[argc++] = listen;
	if (cm->unix_addr[0]) {
		argv[argc++] = "--unix";
		argv[argc++] = cm->unix_addr;
	}
	spawn_journal_path(job, cm, journal, sizeof journal);
	if (journal[0]) {
		argv[argc++] = "--journal";
		argv[argc++] = journal;
		/* cmrun made the directory on its own host only, and removes
		 * only what it finds there. */
		if (cm->remote)
			argv[argc++] = "--journal-scratch";
	}
	const struct cm_proc *sb = mirror_for(job, cm);
	cm->mirrored = sb != NULL;
	if (cm->is_standby)
		argv[argc++] = "--standby";
	else if (sb) {
		argv[argc++] = "--mirror";
		argv[argc++] = (char *)sb->addr;
	}
	if (cm->remote) {
		/* No descriptor crosses the launcher: its stdout carries the
		 * "listening on" line, then its reports. */
		argv[argc++] = "--report-fd";
		argv[argc++] = "1";
	} else {
		argv[argc++] = "--ready-fd";
		argv[argc++] = ready_fd;
		/* Lost connections and counters (detect.c). */
		argv[argc++] = "--report-fd";
		argv[argc++] = report_fd;
	}
	/* The job's size is cmrun's to say: a rank's HELLO must not set it. */
	snprintf(world, sizeof world, "%d", o->nranks);
	argv[argc++] = "--world-size";
	argv[argc++] = world;
	if (o->max_message) {
		argv[argc++] = "--max-message";
		argv[argc++] = max_message;
	}
	cmrun_cm_argv(o, argv, &argc);
	if (o->verbosity >= 2)
		argv[argc++] = "--verbose";
	argv[argc] = NULL;

	if (cm->remote)
		return spawn_cm_remote(job, cm, argv, ready, err, report);
	char **env = spawn_build_env(job, NULL, secret_var, NULL, NULL);
	if (env == NULL) {
		output_message("error: cmserver %d: out of memory", cm->index);
		close_pair(ready);
		close_pair(err);
		close_pair(report);
		return -1;
	}
	/* Its "listening on" line is for people running it by hand; with -v
	 * it comes to cmrun's stderr along with its diagnostics. */
	struct child_spec spec = {
	    .path = job->cmserver_path,
	    .argv = argv,
	    .envp = env,
	    .stdin_fd = job->devnull_fd,
	    .stdout_fd = o->verbosity >= 1 ? err[1] : job->devnull_fd,
	    .stderr_fd = err[1],
	    .keep_fd = ready[1],
	    .keep_fd2 = report[1],
	};
	pid_t pid = spawn_process(&spec, why, sizeof why);
	free(env);
	close(ready[1]);
	close(err[1]);
	close(report[1]);
	if (pid < 0) {
		output_message("error: cmserver %d: %s", cm->index, why);
		close(ready[0]);
		close(err[0]);
		close(report[0]);
		return -1;
	}
	cm_started(job, cm, pid, report[0], ready[0], err[0]);
	output_verbose("cmserver %d started (pid %d, %s, mode %s)", cm->index, (int)pid,
	               job->cmserver_path, o->mode);
	return 0;
}
