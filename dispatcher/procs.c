/* The rank and CM tables: what a wait status means to a user, signalling
 * children and what they started, and the address lists ranks get. */
#include <config.h>

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "job.h"
#include "jobenv.h"
#include "net.h"
#include "procs.h"

void signal_name(int sig, char *buf, size_t len)
{
	const char *abbrev = sigabbrev_np(sig);
	if (abbrev)
		snprintf(buf, len, "SIG%s", abbrev);
	else
		snprintf(buf, len, "%d", sig);
}

void describe_wait_status(int wait_status, char *buf, size_t len)
{
	if (WIFEXITED(wait_status)) {
		snprintf(buf, len, "exited with status %d", WEXITSTATUS(wait_status));
	} else if (WIFSIGNALED(wait_status)) {
		char name[32];
		signal_name(WTERMSIG(wait_status), name, sizeof name);
		snprintf(buf, len, "killed by signal %s%s", name,
		         WCOREDUMP(wait_status) ? " (core dumped)" : "");
	} else {
		snprintf(buf, len, "ended with wait status 0x%x", (unsigned)wait_status);
	}
}

int exit_status_of(int wait_status)
{
	if (WIFEXITED(wait_status))
		return WEXITSTATUS(wait_status);
	if (WIFSIGNALED(wait_status))
		return 128 + WTERMSIG(wait_status);
	return CMRUN_EXIT_FAILURE;
}

/* ---- signalling children ---- */

/* A running child's process group (its own, set at spawn) also reaches what
 * it started; the child by pid too if it moved to another group. Only
 * while the child is unreaped: its pid, and so the group id, cannot be
 * reused by another process until then. */
static void signal_group(pid_t pid, int sig)
{
	if (kill(-pid, sig) == 0 && getpgid(pid) == pid)
		return;
	kill(pid, sig);
}

void signal_ranks(struct job *job, int sig)
{
	for (int i = 0; i < job->nprocs && job->ranks_running > 0; i++) {
		struct rank_proc *r = &job->ranks[i];
		if (r->state == PROC_RUNNING)
			signal_group(r->pid, sig);
	}
}

void signal_cms(struct job *job, int sig)
{
	for (int i = 0; i < job->ncms; i++) {
		struct cm_proc *cm = &job->cms[i];
		if (cm->state == PROC_RUNNING)
			signal_group(cm->pid, sig);
		/* A CM stopped while its standby runs would find it gone and
		 * stop as if cut off: the standby goes once its CM has ended
		 * (its clean END releases it), or at once when forced. */
		if (sig == SIGKILL || cm->state != PROC_RUNNING)
			signal_standby(job, i, sig);
	}
}

void signal_standby(struct job *job, int cm, int sig)
{
	if (job->standbys && job->standbys[cm].state == PROC_RUNNING)
		signal_group(job->standbys[cm].pid, sig);
}

static bool is_known_child(struct job *job, pid_t pid)
{
	/* It outlives the ranks: a successful job's images are removed
	 * through it before ckpt_server_finish stops it. */
	if (job->ckpt_pid > 0 && pid == job->ckpt_pid)
		return true;
	for (int i = 0; i < job->nprocs && job->ranks_running > 0; i++)
		if (job->ranks[i].state == PROC_RUNNING && job->ranks[i].pid == pid)
			return true;
	for (int i = 0; i < job_cm_procs(job); i++)
		if (job_cm_proc(job, i)->state == PROC_RUNNING && job_cm_proc(job, i)->pid == pid)
			return true;
	return false;
}

int signal_leftovers(struct job *job, int sig)
{
	/* cmrun is a child subreaper: what a rank started and left behind is
	 * re-parented to cmrun, so it shows among cmrun's own children (of
	 * any of its threads) and can be signalled by pid without any risk of
	 * hitting an unrelated process. */
	int found = 0;
	DIR *tasks = opendir("/proc/self/task");
	if (tasks == NULL)
		return 0;
	struct dirent *t;
	while ((t = readdir(tasks)) != NULL) {
		if (t->d_name[0] == '.')
			continue;
		char path[300];
		snprintf(path, sizeof path, "/proc/self/task/%s/children", t->d_name);
		FILE *f = fopen(path, "re");
		if (f == NULL)
			continue;
		long pid;
		while (fscanf(f, "%ld", &pid) == 1) {
			if (pid <= 0 || is_known_child(job, (pid_t)pid))
				continue;
			found++;
			if (sig)
				kill((pid_t)pid, sig);
		}
		fclose(f);
	}
	closedir(tasks);
	return found;
}

int count_running(struct job *job)
{
	int n = 0;
	for (int i = 0; i < job->nprocs; i++)
		if (job->ranks[i].state == PROC_RUNNING)
			n++;
	for (int i = 0; i < job_cm_procs(job); i++)
		n += job_cm_proc(job, i)->state == PROC_RUNNING;
	return n;
}

char *join_rank_addresses(struct job *job)
{
	int n = job->nprocs;
	size_t cap = (size_t)n * 24 + 1;
	char *list = malloc(cap);
	if (list == NULL)
		return NULL;
	size_t len = 0;
	list[0] = '\0';
	for (int i = 0; i < n; i++) {
		char one[32];
		cm_format_addr(&job->ranks[i].listen_addr, one, sizeof one);
		len += (size_t)snprintf(list + len, cap - len, "%s%s", i ? "," : "", one);
	}
	return list;
}

/* Same host: the same host entry, or both children of cmrun on this
 * machine (local launch, where host names are labels). */
static bool same_host(const struct rank_proc *r, const struct cm_proc *cm)
{
	return r->host_index == cm->host_index || (!r->remote && !cm->remote);
}

char *cms_env_for(struct job *job, const struct rank_proc *r)
{
	size_t cap = strlen(CM_ENV_CMS) + 2 + (size_t)job->ncms * CM_ADDR_TEXT_MAX;
	char *env = malloc(cap);
	if (env == NULL)
		return NULL;
	size_t len = (size_t)snprintf(env, cap, "%s=", CM_ENV_CMS);
	for (int i = 0; i < job->ncms; i++) {
		const struct cm_proc *cm = &job->cms[i];
		bool local = !job->opts->cm_socket_tcp && cm->unix_addr[0] && same_host(r, cm);
		len += (size_t)snprintf(env + len, cap - len, "%s%s", i ? "," : "",
		                        local ? cm->unix_addr : cm->addr);
	}
	return env;
}

/* xorshift64*: reproducible for one --seed on every platform. */
uint64_t job_random(struct job *job)
{
	uint64_t x = job->rng;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	job->rng = x;
	return x * 0x2545F4914F6CDD1Dull;
}

void describe_failures(int injected, int other, const char *noun, const char *first, char *buf,
                       size_t len)
{
	size_t off = 0;
	buf[0] = '\0';
	if (injected)
		off += (size_t)snprintf(buf, len, "%d injected kill%s", injected,
		                        injected == 1 ? "" : "s");
	if (other && off < len)
		snprintf(buf + off, len - off, "%s%d %s%s (%s%s)", off ? ", " : "", other, noun,
		         other == 1 ? "" : "s", other == 1 ? "" : "first: ", first);
}

void describe_down(const char *back, const char *noun, int count, double total, double max,
                   char *buf, size_t len)
{
	buf[0] = '\0';
	if (count == 1)
		snprintf(buf, len, "; %s %.3f s after its %s", back, total, noun);
	else if (count > 1)
		snprintf(buf, len, "; %s %.3f s after a %s on average, %.3f s at most", back,
		         total / count, noun, max);
}

void describe_start(bool from_image, unsigned long long image, char *buf, size_t len)
{
	if (from_image)
		snprintf(buf, len, "resumed from checkpoint image %llu", image);
	else
		snprintf(buf, len, "re-executed from the start");
}
