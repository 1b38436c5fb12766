/* Replication in cmrun (--replicate r, docs/replication.md): every rank
 * runs as r processes (job->ranks[rank * r + replica]). A replica killed by
 * a signal is not restarted; the rank goes on while another of its
 * replicas runs (or has finished). Only one replica's output reaches the
 * user: the rank's first live replica. The others' pipes are not read
 * (their bytes wait in the pipe, enlarged to hold a run's output); when
 * the forwarded replica dies, the next one's pipes are opened, skipping
 * the bytes the dead one already printed (deterministic output: byte
 * counting, as for restarts in ft.c). */
#include <config.h>

#include "job.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "output.h"
#include "repl.h"

#define HELD_PIPE_BYTES (1 << 20)

static void forward(struct rank_proc *r, int out_fd, int err_fd, const char *prefix)
{
	r->forwarded = true;
	r->out = output_source_open(out_fd, OUT_STDOUT, prefix);
	r->err = output_source_open(err_fd, OUT_STDERR, prefix);
}

void repl_spawned(struct job *job, struct rank_proc *r, int out_fd, int err_fd, const char *prefix)
{
	if (r->replica == 0) {
		forward(r, out_fd, err_fd, prefix);
		return;
	}
	/* Room for the output it makes while it is not forwarded (a full
	 * pipe would stop it, and with it the master's sends to it). Best
	 * effort: the default size is the fallback. */
	fcntl(out_fd, F_SETPIPE_SZ, HELD_PIPE_BYTES);
	fcntl(err_fd, F_SETPIPE_SZ, HELD_PIPE_BYTES);
	r->held_out = out_fd;
	r->held_err = err_fd;
}

/* Replica states that still stand for the rank: running, or done. */
static bool stands(const struct rank_proc *p)
{
	return p->state == PROC_RUNNING || (p->state == PROC_EXITED && p->wait_status == 0);
}

bool repl_replica_failed(struct job *job, struct rank_proc *r, int wait_status)
{
	const struct cmrun_options *o = job->opts;
	struct rank_proc *first = &job->ranks[r->rank * o->replicas];
	struct rank_proc *next = NULL;
	int left = 0;
	for (int k = 0; k < o->replicas; k++) {
		if (stands(&first[k])) {
			left++;
			if (next == NULL)
				next = &first[k];
		}
	}
	char how[96];
	describe_wait_status(wait_status, how, sizeof how);
	if (next == NULL) {
		output_message("rank %d: every replica is dead (the last, replica %d, %s)", r->rank,
		               r->replica, how);
		return false;
	}
	output_verbose("rank %d replica %d (pid %d) %s; %d replica%s left, not restarted", r->rank,
	               r->replica, (int)r->pid, how, left, left == 1 ? "" : "s");
	if (r->forwarded && next->held_out >= 0) {
		/* The dead one's last bytes were drained before this call. */
		unsigned long long out_pos = r->out ? output_source_position(r->out) : 0;
		unsigned long long err_pos = r->err ? output_source_position(r->err) : 0;
		char prefix[32] = "";
		if (o->tag_output)
			snprintf(prefix, sizeof prefix, "[%d] ", next->rank);
		forward(next, next->held_out, next->held_err, prefix);
		next->held_out = next->held_err = -1;
		output_source_follow(next->out, r->out, out_pos);
		output_source_follow(next->err, r->err, err_pos);
		r->forwarded = false;
	}
	return true;
}

void repl_close_held(struct job *job)
{
	for (int i = 0; job->ranks && i < job->nprocs; i++) {
		struct rank_proc *r = &job->ranks[i];
		if (r->held_out >= 0)
			close(r->held_out);
		if (r->held_err >= 0)
			close(r->held_err);
		r->held_out = r->held_err = -1;
	}
}
