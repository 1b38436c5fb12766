/* The fake transport of mpi_fake_transport.h. Single-threaded, bounded
 * queues, aborts on misuse: it only has to be right for the unit tests. */
#include "mpi_fake_transport.h"

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "protocol.h"

struct fake_state fake;

struct fake_msg {
	int src, tag;
	uint32_t ctx;
	size_t len;
	unsigned char *data;
	struct cm_req *sync_sender; /* self Ssend waiting for its match */
	int due;                    /* progress calls left before it arrives */
	struct fake_msg *next;
};

static struct fake_msg *unexpected; /* arrived, unmatched, in arrival order */
static struct fake_msg *scheduled;  /* injected for a later progress call */
static struct cm_req *posted;       /* posted receives, in post order */

void fake_reset(int rank, int size)
{
	memset(&fake, 0, sizeof fake);
	fake.rank = rank;
	fake.size = size;
	fake.transport = "direct";
	unexpected = scheduled = NULL;
	posted = NULL;
}

static int matches(const struct cm_req *r, int src, int tag, uint32_t ctx)
{
	return r->ctx == ctx && (r->peer == CM_ANY_SOURCE || r->peer == src) &&
	       (r->tag == CM_ANY_TAG || r->tag == tag);
}

static void deliver(struct cm_req *r, int src, int tag, const void *data, size_t len)
{
	size_t n = len < r->rcap ? len : r->rcap;
	if (n)
		memcpy(r->rbuf, data, n);
	r->st_source = src;
	r->st_tag = tag;
	r->st_bytes = len;
	r->error = len > r->rcap ? CM_REQ_ERR_TRUNCATE : 0;
	r->done = 1;
}

/* A message arrives: the earliest matching posted receive takes it,
 * otherwise it joins the unexpected queue. */
static void arrive(struct fake_msg *m)
{
	for (struct cm_req **link = &posted; *link; link = &(*link)->t_next) {
		struct cm_req *r = *link;
		if (!matches(r, m->src, m->tag, m->ctx))
			continue;
		*link = r->t_next;
		fake.posted_recvs--;
		deliver(r, m->src, m->tag, m->data, m->len);
		if (m->sync_sender)
			m->sync_sender->done = 1;
		free(m->data);
		free(m);
		return;
	}
	m->next = NULL;
	struct fake_msg **tail = &unexpected;
	while (*tail)
		tail = &(*tail)->next;
	*tail = m;
}

static struct fake_msg *new_msg(int src, int tag, uint32_t ctx, const void *data, size_t len)
{
	struct fake_msg *m = calloc(1, sizeof *m);
	m->src = src;
	m->tag = tag;
	m->ctx = ctx;
	m->len = len;
	m->data = malloc(len ? len : 1);
	if (len)
		memcpy(m->data, data, len);
	return m;
}

void fake_inject(int src, int tag, uint32_t ctx, const void *data, size_t len, int after_progress)
{
	struct fake_msg *m = new_msg(src, tag, ctx, data, len);
	if (after_progress <= 0) {
		arrive(m);
		return;
	}
	m->due = after_progress;
	m->next = scheduled;
	scheduled = m;
}

static int fake_init(struct cm_transport *t, const struct cm_job *job)
{
	fake.inits++;
	if (job->rank != fake.rank || job->size != fake.size)
		abort();
	return fake.init_fails ? -1 : 0;
}

static int fake_isend(struct cm_transport *t, struct cm_req *req)
{
	if (fake.nsent < FAKE_LOG_MAX) {
		struct fake_sent *s = &fake.sent[fake.nsent++];
		s->peer = req->peer;
		s->tag = req->tag;
		s->ctx = req->ctx;
		s->len = req->slen;
		s->sync = req->sync;
		if (req->slen)
			memcpy(s->data, req->sbuf,
			       req->slen < sizeof s->data ? req->slen : sizeof s->data);
	}
	req->error = 0;
	req->done = 0;
	if (req->peer != fake.rank) { /* another rank: as if sent and matched */
		req->done = 1;
		return 0;
	}
	struct fake_msg *m = new_msg(fake.rank, req->tag, req->ctx, req->sbuf, req->slen);
	if (req->sync)
		m->sync_sender = req;
	else
		req->done = 1; /* buffered */
	arrive(m);
	return 0;
}

static int fake_irecv(struct cm_transport *t, struct cm_req *req)
{
	req->done = 0;
	req->error = 0;
	for (struct fake_msg **link = &unexpected; *link; link = &(*link)->next) {
		struct fake_msg *m = *link;
		if (!matches(req, m->src, m->tag, m->ctx))
			continue;
		*link = m->next;
		deliver(req, m->src, m->tag, m->data, m->len);
		if (m->sync_sender)
			m->sync_sender->done = 1;
		free(m->data);
		free(m);
		return 0;
	}
	if ((req->ctx & 1) && req->peer != fake.rank && req->peer != CM_ANY_SOURCE) {
		deliver(req, req->peer, req->tag, NULL, 0); /* the other rank's collective part */
		return 0;
	}
	req->t_next = NULL;
	struct cm_req **tail = &posted;
	while (*tail)
		tail = &(*tail)->t_next;
	*tail = req;
	fake.posted_recvs++;
	return 0;
}

static int fake_probe(struct cm_transport *t, int src, int tag, uint32_t ctx, int blocking,
                      struct cm_probe_result *out)
{
	fake.probes++;
	struct cm_req want = {.peer = src, .tag = tag, .ctx = ctx};
	memset(out, 0, sizeof *out);
	out->source = out->tag = -1;
	for (struct fake_msg *m = unexpected; m; m = m->next) {
		if (matches(&want, m->src, m->tag, m->ctx)) {
			out->found = 1;
			out->source = m->src;
			out->tag = m->tag;
			out->bytes = m->len;
			return 0;
		}
	}
	return blocking ? -1 : 0; /* a blocking probe would never return */
}

static int fake_progress(struct cm_transport *t, int timeout_ms)
{
	if (timeout_ms == 0)
		fake.progress_poll++;
	else
		fake.progress_block++;
	int delivered = 0;
	for (struct fake_msg **link = &scheduled; *link;) {
		struct fake_msg *m = *link;
		if (--m->due > 0) {
			link = &m->next;
			continue;
		}
		*link = m->next;
		arrive(m);
		delivered++;
	}
	if (timeout_ms != 0 && !delivered && !scheduled)
		return -1; /* would block forever */
	return 0;
}

static int fake_finalize(struct cm_transport *t)
{
	fake.finalizes++;
	return 0;
}

static void construct(struct cm_transport *t, const char *name)
{
	fake.constructed = name;
	t->name = name;
	t->init = fake_init;
	t->isend = fake_isend;
	t->irecv = fake_irecv;
	t->probe = fake_probe;
	t->progress = fake_progress;
	t->finalize = fake_finalize;
	t->state = &fake;
}

void cm_transport_direct(struct cm_transport *t)
{
	construct(t, "direct");
}

void cm_transport_cm(struct cm_transport *t)
{
	construct(t, "cm");
}

void cm_transport_repl(struct cm_transport *t)
{
	construct(t, "repl");
}

int cm_job_from_env(struct cm_job *job, char *transport_name, size_t namelen)
{
	if (fake.env_fails) {
		fprintf(stderr, "fake: CHANMEM_SIZE is wrong\n");
		return -1;
	}
	memset(job, 0, sizeof *job);
	job->rank = fake.rank;
	job->size = fake.size;
	job->listen_fd = -1;
	snprintf(transport_name, namelen, "%s", fake.transport);
	return 0;
}

void cm_job_free(struct cm_job *job)
{
	memset(job, 0, sizeof *job);
	job->listen_fd = -1;
}

int fake_run_child(void (*fn)(void), char *err, size_t errlen)
{
	int fds[2];
	if (pipe(fds) < 0)
		abort();
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		abort();
	if (pid == 0) {
		close(fds[0]);
		dup2(fds[1], 2);
		close(fds[1]);
		fn();
		_exit(99); /* fn was expected not to return */
	}
	close(fds[1]);
	size_t used = 0;
	struct timespec start;
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) { /* the child exits at once; give up after 10 s */
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		long left = 10000 - ((now.tv_sec - start.tv_sec) * 1000 +
		                     (now.tv_nsec - start.tv_nsec) / 1000000);
		struct pollfd p = {.fd = fds[0], .events = POLLIN};
		if (left <= 0 || poll(&p, 1, (int)left) <= 0) {
			kill(pid, SIGKILL);
			break;
		}
		ssize_t n = read(fds[0], err + used, errlen - 1 - used);
		if (n <= 0)
			break;
		used += (size_t)n;
		if (used == errlen - 1)
			break;
	}
	err[used] = '\0';
	close(fds[0]);
	int status;
	if (waitpid(pid, &status, 0) < 0)
		abort();
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
