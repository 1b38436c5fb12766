/* The processes of a replicated job as one replica sees them: which are
 * alive, which replica of each rank is its master, and the connection this
 * replica opens to each (transport_repl.c has the overview). The master of
 * a rank is its lowest live replica; this file is the one place that says
 * so. Every other file of the transport calls here; this one calls none of
 * them: the frames arriving on a connection go to the callbacks
 * transport_repl.c put in s->ops, and what a replica does on becoming
 * master is its caller's (repl_check_master). */
#include <config.h>

#include <stdio.h>
#include <unistd.h>

#include "net.h"
#include "transport_repl.h"

int repl_master_of(const struct repl *s, int rank)
{
	for (int k = 0; k < s->nrep; k++)
		if (!s->dead[rank * s->nrep + k])
			return k;
	return -1;
}

int repl_is_master(const struct repl *s)
{
	return repl_master_of(s, s->rank) == s->replica;
}

int repl_elect(struct repl *s)
{
	if (!s->changed)
		return 0;
	s->changed = 0;
	if (s->was_master || !repl_is_master(s))
		return 0;
	s->was_master = 1;
	return 1;
}

/* The connection to process p (rank * nrep + replica), opened at first
 * use. NULL: p is dead (its port refuses) or out of memory. */
struct cm_conn *repl_link_to(struct repl *s, int p)
{
	if (s->out[p])
		return s->out[p];
	if (s->dead[p])
		return NULL;
	/* One attempt: every listening socket exists before any replica
	 * starts, so a refusal means the process is gone. */
	int fd = cm_tcp_connect(&s->addrs[p], 0);
	if (fd < 0) {
		s->dead[p] = 1; /* cmrun closed its listening socket copy: it is gone */
		s->changed = 1;
		return NULL;
	}
	char name[64];
	snprintf(name, sizeof name, "connection to rank %d replica %d", p / s->nrep, p % s->nrep);
	struct cm_conn *c = cm_conn_new(fd, CM_CONN_AWAIT_ACK, s->rank, name, s->ops, s, &s->lim);
	if (c == NULL) {
		close(fd);
		return NULL;
	}
	c->peer = p;
	c->peer_may_die = 1; /* a replica dies and the rank goes on */
	cm_conn_count_into(c, &s->queued);
	if (cm_connset_add(&s->net, c, s->rank) < 0) {
		cm_conn_free(c);
		return NULL;
	}
	s->out[p] = c;
	if (cm_conn_send_hello(c, 0, s->rank, p / s->nrep, (unsigned)s->replica, (unsigned)s->size,
	                       CM_PEER_DIRECT, s->secret) < 0)
		return NULL;
	return c;
}
