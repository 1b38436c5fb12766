/* --ckpt-dir: the job's checkpoint server. Started before the channel
 * memories and waited for (its address goes into every rank's
 * environment), stopped after them. It authenticates ranks with the job
 * secret, which it gets from its environment like a cmserver. Images are
 * stored under a job id fresh for every run, so a new job never resumes
 * from an old job's images left in the same directory. A job that succeeds
 * has its images removed (unless --ckpt-keep) by a DROP_JOB request to its
 * server before the server stops: the server holds the directory's lock,
 * so no other job's server can be using the directory meanwhile. */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ckpt.h"
#include "ckpt_client.h"
#include "jobenv.h"
#include "launch.h"
#include "log.h"
#include "net.h"
#include "output.h"
#include "spawn.h"

#define CKPT_START_TIMEOUT_MS 10000
#define CKPT_STOP_TIMEOUT_MS 5000
#define CKPT_DROP_TIMEOUT_MS 10000

/* Reads "HOST:PORT\n" from fd within the start-up bound. */
static int read_address(int fd, char *addr, size_t len)
{
	char buf[64];
	size_t got = 0;
	long long deadline = cm_now_ms() + CKPT_START_TIMEOUT_MS;
	while (got < sizeof buf - 1) {
		long long left = deadline - cm_now_ms();
		if (left <= 0)
			return -1;
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int r = poll(&p, 1, (int)left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		ssize_t n = read(fd, buf + got, sizeof buf - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		got += (size_t)n;
		buf[got] = '\0';
		char *nl = strchr(buf, '\n');
		if (nl) {
			*nl = '\0';
			/* A remote server's stdout: its "listening on" line. */
			static const char listening[] = "ckptserver: listening on ";
			const char *text = buf;
			if (strncmp(buf, listening, sizeof listening - 1) == 0)
				text += sizeof listening - 1;
			struct sockaddr_in sa;
			if (cm_parse_hostport(text, -1, &sa) < 0 || sa.sin_port == 0)
				return -1;
			cm_format_addr(&sa, addr, len);
			return 0;
		}
	}
	return -1;
}

static int started(struct job *job, pid_t pid, int ready_rd, char *path, const char *why);

int ckpt_server_start(struct job *job)
{
	const struct cmrun_options *o = job->opts;
	char why[PATH_MAX + 256];
	job->ckpt_pid = 0;
	job->ckpt_stdin = -1;
	if (o->ckpt_dir == NULL)
		return 0;
	char *path =
	    spawn_find_server("ckptserver", "CHANMEM_CKPTSERVER", "checkpoint", why, sizeof why);
	if (path == NULL) {
		output_message("error: --ckpt-dir: %s", why);
		return -1;
	}
	char id[CM_SECRET_LEN + 1];
	if (spawn_make_secret(id) < 0) {
		output_message("error: cannot make a job id: %s", strerror(errno));
		free(path);
		return -1;
	}
	snprintf(job->ckpt_job_id, sizeof job->ckpt_job_id, "job-%.16s", id);

	int ready[2];
	if (pipe2(ready, O_CLOEXEC) < 0) {
		output_message("error: ckptserver: pipe: %s", strerror(errno));
		free(path);
		return -1;
	}
	char ready_fd[16], secret_var[64], listen[32];
	int host = hosts_of_ckpt(&o->hosts);
	bool remote = launch_is_remote(o, host);
	/* Reached by ranks on other hosts when some are remote. */
	snprintf(listen, sizeof listen, "%s:0",
	         remote            ? o->hosts.list[host].addr
	         : job->any_remote ? job->local_ip
	                           : "127.0.0.1");
	snprintf(ready_fd, sizeof ready_fd, "%d", ready[1]);
	snprintf(secret_var, sizeof secret_var, "%s=%s", CM_ENV_SECRET, job->secret);
	char *argv[10];
	int argc = 0;
	argv[argc++] = remote ? path : "ckptserver";
	argv[argc++] = "--dir";
	argv[argc++] = (char *)o->ckpt_dir;
	argv[argc++] = "--listen";
	argv[argc++] = listen;
	if (!remote) {
		argv[argc++] = "--ready-fd";
		argv[argc++] = ready_fd;
	}
	if (o->verbosity >= 2)
		argv[argc++] = "--verbose";
	argv[argc] = NULL;
	if (remote) {
		/* No descriptor crosses the launcher: the address comes on its
		 * stdout ("ckptserver: listening on HOST:PORT"). */
		pid_t pid = spawn_remote_server(job, host, argv, ready[1], STDERR_FILENO,
		                                &job->ckpt_stdin, why, sizeof why);
		close(ready[1]);
		return started(job, pid, ready[0], path, why);
	}
	char **env = spawn_build_env(job, NULL, secret_var, NULL, NULL);
	if (env == NULL) {
		output_message("error: ckptserver: out of memory");
		close(ready[0]);
		close(ready[1]);
		free(path);
		return -1;
	}
	/* Its diagnostics (a directory it cannot use...) go to cmrun's stderr. */
	struct child_spec spec = {.path = path,
	                          .argv = argv,
	                          .envp = env,
	                          .stdin_fd = job->devnull_fd,
	                          .stdout_fd = job->devnull_fd,
	                          .stderr_fd = STDERR_FILENO,
	                          .keep_fd = ready[1],
	                          .keep_fd2 = -1};
	pid_t pid = spawn_process(&spec, why, sizeof why);
	free(env);
	close(ready[1]);
	return started(job, pid, ready[0], path, why);
}

/* Waits for the address of the server just spawned (pid, or -1 with why). */
static int started(struct job *job, pid_t pid, int ready_rd, char *path, const char *why)
{
	const struct cmrun_options *o = job->opts;
	int ready[1] = {ready_rd};
	if (pid < 0) {
		output_message("error: ckptserver: %s", why);
		close(ready[0]);
		free(path);
		return -1;
	}
	job->ckpt_pid = pid;
	int rc = read_address(ready[0], job->ckpt_addr, sizeof job->ckpt_addr);
	close(ready[0]);
	if (rc < 0) {
		output_message("error: ckptserver (%s --dir %s) did not start", path, o->ckpt_dir);
		free(path);
		ckpt_server_stop(job);
		return -1;
	}
	output_verbose("ckptserver (pid %d) listening on %s, images in %s as %s", (int)pid,
	               job->ckpt_addr, o->ckpt_dir, job->ckpt_job_id);
	free(path);
	return 0;
}

void ckpt_server_exited(struct job *job, int wait_status)
{
	char how[96];
	describe_wait_status(wait_status, how, sizeof how);
	/* During the run, checkpoints fail from now on (a rank that needs one
	 * says so); in the teardown it was stopped with the rest. */
	if (job->phase == PHASE_START_CMS || job->phase == PHASE_RUN)
		output_message("warning: ckptserver (pid %d) %s during the run", (int)job->ckpt_pid,
		               how);
	else
		output_verbose("ckptserver (pid %d) %s", (int)job->ckpt_pid, how);
	job->ckpt_pid = 0;
}

void ckpt_server_stop(struct job *job)
{
	if (job->ckpt_pid <= 0)
		return;
	pid_t pid = job->ckpt_pid;
	job->ckpt_pid = 0;
	if (job->ckpt_stdin >= 0) {
		close(job->ckpt_stdin); /* stops it behind ssh or a template */
		job->ckpt_stdin = -1;
	}
	kill(pid, SIGTERM);
	for (int waited = 0;; waited += 10) {
		int status;
		pid_t r = waitpid(pid, &status, WNOHANG);
		if (r == pid || (r < 0 && errno == ECHILD))
			return; /* gone (or the loop's child watcher reaped it) */
		if (waited >= CKPT_STOP_TIMEOUT_MS) {
			output_message("warning: ckptserver (pid %d) did not stop; killing it",
			               (int)pid);
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			return;
		}
		struct timespec ts = {0, 10 * 1000000L};
		nanosleep(&ts, NULL);
	}
}

/* The images of a job that succeeded go (one request to its server). */
static bool drop_images(struct job *job)
{
	struct ckpt_client *c = ckpt_client_new(CKPT_DROP_TIMEOUT_MS);
	uint64_t removed = 0;
	int rc = c ? ckpt_client_connect(c, job->ckpt_addr, job->secret) : CKPT_E_IO;
	if (rc == CKPT_OK)
		rc = ckpt_drop_job(c, job->ckpt_job_id, &removed);
	if (rc == CKPT_OK)
		output_verbose("removed the %llu checkpoint image(s) of %s from %s",
		               (unsigned long long)removed, job->ckpt_job_id, job->opts->ckpt_dir);
	else
		output_message("warning: cannot remove the checkpoint images of this job: %s",
		               c ? ckpt_client_error(c) : "out of memory");
	ckpt_client_free(c);
	return rc == CKPT_OK;
}

void ckpt_server_finish(struct job *job)
{
	const struct cmrun_options *o = job->opts;
	if (o->ckpt_dir == NULL || job->ckpt_job_id[0] == '\0')
		return;
	bool dropped = false;
	if (job->ckpt_pid > 0 && !job->failed && !o->ckpt_keep)
		dropped = drop_images(job);
	ckpt_server_stop(job);
	if (dropped)
		return;
	/* A success with --ckpt-keep stays quiet (ckptserver --list shows
	 * what it kept); a failure, or a removal that failed, says where. */
	if (!job->failed && o->ckpt_keep && cm_log_verbosity() < 1)
		return;
	int host = hosts_of_ckpt(&o->hosts);
	char where[PATH_MAX + 128];
	if (launch_is_remote(o, host))
		snprintf(where, sizeof where, "%s on host %s", o->ckpt_dir,
		         o->hosts.list[host].name);
	else
		snprintf(where, sizeof where, "%s", o->ckpt_dir);
	output_message("checkpoint images of this job kept in %s as job %s (list them: ckptserver "
	               "--list --dir %s; remove them: ckptserver --remove %s --dir %s)",
	               where, job->ckpt_job_id, o->ckpt_dir, job->ckpt_job_id, o->ckpt_dir);
}
