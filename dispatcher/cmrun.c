/* cmrun: starts the channel memories and the ranks of one MPI job on this
 * machine, forwards their output, and tears everything down at the end.
 *
 *   options.c  command line
 *   spawn.c    finding executables, environments, fork/exec, launchers
 *   output.c   forwarding of the children's output, whole lines
 *   input.c    cmrun's stdin to rank 0
 *   procs.c    the rank and CM tables: wait statuses, signalling, addresses
 *   job.c      the event loop, on top: start-up, exits, signals, timeout,
 *              teardown; the files below report to it through job->events
 *   hosts.c    --hosts / --host: hosts, their roles, placement (--map-by)
 *   launch.c   --launch: ssh, srun, netns, templates
 *   remote.c   control connections of remote ranks
 *   remote_exec.c  cmrun --remote-exec: the launch helper on remote hosts
 *   ft.c       restarts (node failure too), fault injection, the status line
 *   cm_restart.c  --cm-restart: CM journals, restarting dead CMs, CM kills
 *   detect.c   failure detection: CM pipes, heartbeats
 *   control.c  the ranks' control pipe (MPI_Abort, heartbeats, rank reports)
 *   repl.c     --replicate */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "job.h"
#include "launch.h"
#include "log.h"
#include "options.h"
#include "output.h"
#include "remote_exec.h"
#include "spawn.h"

/* A cmrun started with fd 0, 1 or 2 closed would hand those numbers to its
 * pipes, and a child's dup2 onto them would then clobber them. */
static void ensure_standard_fds(void)
{
	for (int fd = 0; fd < 3; fd++) {
		if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF)
			continue;
		int nul = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
		if (nul < 0)
			exit(CMRUN_EXIT_FAILURE);
		if (nul != fd) {
			dup2(nul, fd);
			close(nul);
		}
	}
}

/* Each rank costs cmrun two pipe ends (three with the direct transport),
 * each CM two: raise the soft limit as far as allowed and check. */
static void ensure_fd_limit(const struct cmrun_options *o)
{
	struct rlimit rl;
	rlim_t need = (rlim_t)o->nranks * (rlim_t)o->replicas * 3 + (rlim_t)o->ncms * 3 + 64;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return;
	if (rl.rlim_cur < need && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur =
		    rl.rlim_max == RLIM_INFINITY || rl.rlim_max > need * 2 ? need * 2 : rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
		getrlimit(RLIMIT_NOFILE, &rl);
	}
	if (rl.rlim_cur < need)
		cm_die(CMRUN_EXIT_USAGE,
		       "%d ranks need about %llu open files, the limit is %llu (see ulimit -n)",
		       o->nranks, (unsigned long long)need, (unsigned long long)rl.rlim_cur);
}

/* --print-map for a job with remote hosts: each host's launch, then where
 * the servers go. */
static void print_remote_plan(const struct cmrun_options *o)
{
	char line[1024], roles[32];
	for (int i = 0; i < o->hosts.count; i++) {
		const struct cmrun_host *h = &o->hosts.list[i];
		hosts_roles_text(h->roles, roles, sizeof roles);
		launch_host_line(o, i, line, sizeof line);
		printf("host %s addr %s slots %d roles %s: %s\n", h->name, h->addr, h->slots, roles,
		       line);
	}
	for (int cm = 0; o->transport == CMRUN_TRANSPORT_CM && cm < o->ncms; cm++) {
		const struct cmrun_host *h = &o->hosts.list[hosts_of_cm(&o->hosts, cm)];
		printf("cmserver %d -> %s (%s)\n", cm, h->name, h->addr);
	}
	if (o->ckpt_dir) {
		const struct cmrun_host *h = &o->hosts.list[hosts_of_ckpt(&o->hosts)];
		printf("ckptserver -> %s (%s)\n", h->name, h->addr);
	}
}

/* --print-map: where every rank goes, without running anything. Home CM
 * as the ranks compute it without CHANMEM_HOME: rank % ncms. With remote
 * hosts, their launch command lines and the servers come first; {cmd} is
 * "CMRUN --remote-exec CHANMEM_...=... PROGRAM ARGS" (remote_exec.h). */
static int print_map(const struct cmrun_options *o)
{
	bool remote = false;
	for (int i = 0; i < o->hosts.count; i++)
		remote = remote || launch_is_remote(o, i);
	if (remote)
		print_remote_plan(o);
	for (int rank = 0; rank < o->nranks; rank++) {
		const char *host = o->hosts.list[hosts_of_rank(&o->hosts, rank)].name;
		if (o->transport == CMRUN_TRANSPORT_CM)
			printf("rank %d -> %s (home CM %d)\n", rank, host, rank % o->ncms);
		else if (o->transport == CMRUN_TRANSPORT_REPL)
			for (int k = 0; k < o->replicas; k++)
				printf("rank %d replica %d -> %s\n", rank, k,
				       o->hosts.list[hosts_of_replica(&o->hosts, rank, k)].name);
		else
			printf("rank %d -> %s\n", rank, host);
	}
	return fflush(stdout) == 0 && !ferror(stdout) ? 0 : CMRUN_EXIT_FAILURE;
}

int main(int argc, char **argv)
{
	struct cmrun_options opts;
	struct job job;
	char why[PATH_MAX + 256];
	int status;

	ensure_standard_fds();
	if (argc > 1 && strcmp(argv[1], CMRUN_REMOTE_EXEC_OPTION) == 0)
		remote_exec_main(argc - 2, argv + 2);
	struct cmdline_state st = {0};
	int parsed = cmrun_parse_options(argc, argv, &opts, &st);
	cmdline_settle(&cmrun_cmdline, parsed, &st);
	cm_log_init("cmrun", opts.verbosity);
	if (opts.print_map) {
		status = print_map(&opts);
		cmrun_options_free(&opts);
		return status;
	}
	ensure_fd_limit(&opts);

	memset(&job, 0, sizeof job);
	job.opts = &opts;
	job.rank0_stdin = -1;
	job.program_path = spawn_find_program(opts.program_argv[0], why, sizeof why, &status);
	if (job.program_path == NULL)
		cm_die(status, "%s", why);
	if (opts.transport == CMRUN_TRANSPORT_CM) {
		job.cmserver_path = spawn_find_cmserver(why, sizeof why);
		if (job.cmserver_path == NULL)
			cm_die(CMRUN_EXIT_FAILURE, "%s", why);
	}
	if (spawn_make_secret(job.secret) < 0)
		cm_die(CMRUN_EXIT_FAILURE, "cannot generate the job secret: %s", strerror(errno));
	if (spawn_base_env(&job) < 0)
		cm_die(CMRUN_EXIT_FAILURE, "out of memory");
	job.devnull_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (job.devnull_fd < 0)
		cm_die(CMRUN_EXIT_FAILURE, "cannot open /dev/null: %s", strerror(errno));

	/* What a rank starts and leaves behind is re-parented to cmrun rather
	 * than to init, so the teardown can find and stop it by pid. */
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
		cm_die(CMRUN_EXIT_FAILURE, "prctl(PR_SET_CHILD_SUBREAPER): %s", strerror(errno));
	spawn_save_signal_dispositions();
	/* A reader of our output that goes away must not kill cmrun (and with
	 * it the teardown): writes then fail with EPIPE instead. */
	signal(SIGPIPE, SIG_IGN);

	job.loop = ev_default_loop(EVFLAG_AUTO);
	if (job.loop == NULL)
		cm_die(CMRUN_EXIT_FAILURE, "cannot initialise the event loop (libev)");
	if (output_init(job.loop, opts.tag_output) < 0)
		cm_die(CMRUN_EXIT_FAILURE, "cannot start the output threads: %s", strerror(errno));

	status = job_run(&job);
	/* A reader that stopped reading (job failed or interrupted) does not
	 * keep cmrun alive: exit ends the writer threads. */
	bool abandon = job.abandon_output;
	output_shutdown(!abandon);
	if (!abandon) {
		job_free(&job); /* a writer thread may still use the loop otherwise */
		cmrun_options_free(&opts);
	}
	return status;
}
