/* Starting a job: the CMs (and the wait for their addresses), the
 * listening sockets of direct-transport ranks, the ranks' environment and
 * the ranks themselves. job.c's loop calls these at the right phase. */
#include <config.h>

#include "job.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "control.h"
#include "jobenv.h"
#include "net.h"
#include "output.h"
#include "spawn.h"

static int build_rank_env(struct job *job)
{
	const struct cmrun_options *o = job->opts;
	/* Transport cm: CHANMEM_CMS depends on where the rank runs, so each
	 * spawn adds its own (cms_env_for). */
	const char *list_name =
	    o->transport == CMRUN_TRANSPORT_REPL ? CM_ENV_REPL_PEERS : CM_ENV_PEERS;
	int n = 0;
	job->rank_env = calloc(16, sizeof *job->rank_env);
	if (job->rank_env == NULL ||
	    asprintf(&job->rank_env[n++], "%s=%d", CM_ENV_SIZE, o->nranks) < 0 ||
	    asprintf(&job->rank_env[n++], "%s=%s", CM_ENV_SECRET, job->secret) < 0 ||
	    asprintf(&job->rank_env[n++], "%s=%s", CM_ENV_TRANSPORT,
	             cmrun_transport_name(o->transport)) < 0 ||
	    asprintf(&job->rank_env[n++], "%s=%d", CM_ENV_CONTROL_FD, control_rank_fd(job)) < 0)
		return -1;
	if (o->transport != CMRUN_TRANSPORT_CM &&
	    asprintf(&job->rank_env[n++], "%s=%s", list_name, job->peers) < 0)
		return -1;
	if (o->transport == CMRUN_TRANSPORT_REPL &&
	    asprintf(&job->rank_env[n++], "%s=%d", CM_ENV_REPLICAS, o->replicas) < 0)
		return -1;
	/* A beat every quarter of the timeout: three can be late or skipped
	 * (full pipe, a loaded machine) before a rank looks silent. */
	uint64_t beat_ms = o->heartbeat_timeout_ns / 4000000u;
	if (o->heartbeat_timeout_ns &&
	    asprintf(&job->rank_env[n++], "%s=%llu", CMRUN_ENV_HEARTBEAT_MS,
	             (unsigned long long)(beat_ms ? beat_ms : 1)) < 0)
		return -1;
	if (o->cm_restart && asprintf(&job->rank_env[n++], "%s=%d", CMRUN_ENV_CM_RECONNECT,
	                              CMRUN_CM_RECONNECT_S) < 0)
		return -1;
	if (job->ckpt_pid > 0 &&
	    (asprintf(&job->rank_env[n++], "%s=%s", CM_ENV_CKPT, job->ckpt_addr) < 0 ||
	     asprintf(&job->rank_env[n++], "%s=%s", CM_ENV_JOB_ID, job->ckpt_job_id) < 0 ||
	     (o->ckpt_every &&
	      asprintf(&job->rank_env[n++], "%s=%s", CM_ENV_CKPT_EVERY, o->ckpt_every) < 0)))
		return -1;
	return 0;
}

void job_start_ranks(struct job *job)
{
	if (build_rank_env(job) < 0) {
		output_message("error: out of memory");
		job_stop(job, CMRUN_EXIT_FAILURE);
		return;
	}
	job_enter_phase(job, PHASE_RUN, 0);
	for (int i = 0; i < job->nprocs && job->phase == PHASE_RUN; i++) {
		if (spawn_rank(job, &job->ranks[i]) < 0) {
			job_stop(job, CMRUN_EXIT_NOT_EXECUTABLE);
			break;
		}
		if (job->ranks[i].rank == 0 && job->rank0_stdin >= 0) {
			/* Rank 0 holds it now; a later incarnation reads /dev/null. */
			close(job->rank0_stdin);
			job->rank0_stdin = -1;
		}
	}
	if (job->phase == PHASE_RUN)
		ft_start(job);
}

/* text: "HOST:PORT", then " unix:@NAME" unless the CM runs --no-unix. */
void job_cm_ready(struct job *job, struct cm_proc *cm, const char *text)
{
	if (cm->ready)
		return;
	char tcp[32] = "", unix_text[CM_ADDR_TEXT_MAX] = "", why[128] = "";
	size_t tcp_len = strcspn(text, " ");
	const char *rest = text + tcp_len + (text[tcp_len] == ' ');
	struct cm_addr tcp_addr, unix_addr;
	if (tcp_len < sizeof tcp)
		memcpy(tcp, text, tcp_len);
	if (tcp_len >= sizeof tcp || cm_parse_addr(tcp, &tcp_addr, why, sizeof why) < 0 ||
	    tcp_addr.u.sa.sa_family != AF_INET) {
		output_message("error: cmserver %d reported '%.64s', not a HOST:PORT address",
		               cm->index, text);
		job_stop(job, CMRUN_EXIT_FAILURE);
		return;
	}
	if (*rest && (strlen(rest) >= sizeof unix_text ||
	              cm_parse_addr(rest, &unix_addr, why, sizeof why) < 0 ||
	              unix_addr.u.sa.sa_family != AF_UNIX)) {
		output_message("error: cmserver %d reported '%.64s' after its TCP address, not "
		               "unix:@NAME",
		               cm->index, rest);
		job_stop(job, CMRUN_EXIT_FAILURE);
		return;
	}
	if (*rest)
		cm_format_any(&unix_addr, unix_text, sizeof unix_text);
	cm_format_any(&tcp_addr, tcp, sizeof tcp);
	if (cm->addr[0] && (strcmp(tcp, cm->addr) != 0 || strcmp(unix_text, cm->unix_addr) != 0)) {
		/* Restarted (--cm-restart): its ranks only know the old one. */
		output_message("error: cmserver %d came back on %s%s%s, not on %s%s%s", cm->index,
		               tcp, *unix_text ? " " : "", unix_text, cm->addr,
		               cm->unix_addr[0] ? " " : "", cm->unix_addr);
		job_stop(job, CMRUN_EXIT_FAILURE);
		return;
	}
	bool again = cm->addr[0] != '\0';
	snprintf(cm->addr, sizeof cm->addr, "%s", tcp);
	snprintf(cm->unix_addr, sizeof cm->unix_addr, "%s", unix_text);
	cm->ready = true;
	output_verbose("cmserver %d (pid %d) listening %son %s%s%s", cm->index, (int)cm->pid,
	               again ? "again " : "", cm->addr, *unix_text ? " " : "", unix_text);
	if (again)
		cmft_cm_listening(job, cm);
}

void job_start_cms(struct job *job)
{
	job_enter_phase(job, PHASE_START_CMS, CMRUN_CM_START_TIMEOUT);
	for (int i = 0; i < job->ncms; i++) {
		if (spawn_cm(job, &job->cms[i]) < 0) {
			job_stop(job, CMRUN_EXIT_FAILURE);
			return;
		}
		detect_cm_spawned(job, &job->cms[i]);
	}
}

int job_open_direct_listeners(struct job *job)
{
	const struct cmrun_options *o = job->opts;
	struct sockaddr_in any;
	char text[32];
	/* Reached from other hosts when some are remote. */
	snprintf(text, sizeof text, "%s:0", job->any_remote ? job->local_ip : "127.0.0.1");
	cm_parse_hostport(text, 0, &any);
	for (int i = 0; i < job->nprocs; i++) {
		struct rank_proc *r = &job->ranks[i];
		if (r->remote) {
			/* It listens itself, on its host's address, at a port
			 * known in advance (--port-base). */
			snprintf(text, sizeof text, "%s:%d", o->hosts.list[r->host_index].addr,
			         o->port_base + i);
			cm_parse_hostport(text, 0, &r->listen_addr);
			continue;
		}
		r->listen_fd = cm_tcp_listen(&any, &r->listen_addr);
		if (r->listen_fd < 0) {
			output_message("error: rank %d: cannot listen on %s: %s", i, text,
			               strerror(errno));
			return -1;
		}
	}
	job->peers = join_rank_addresses(job);
	return job->peers ? 0 : -1;
}
