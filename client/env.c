/* The job environment cmrun hands every rank (common/jobenv.h), parsed and
 * validated into a struct cm_job. Every variable is checked before a
 * transport touches the network, so a wrong launch fails with one line
 * naming the variable instead of a hang or a confusing connect error. */
#include <config.h>

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "jobenv.h"
#include "log.h"
#include "net.h"
#include "protocol.h"
#include "transport.h"

#define CM_MAX_REPLICAS 4
#include "units.h"

/* Far beyond any job this runtime launches; keeps per-rank arrays sane. */
#define CM_MAX_WORLD (1L << 20)
#define CM_MAX_CMS 4096

static void job_clear(struct cm_job *job)
{
	memset(job, 0, sizeof *job);
	job->listen_fd = -1;
}

void cm_job_free(struct cm_job *job)
{
	if (job == NULL)
		return;
	for (int i = 0; job->cms && i < job->ncms; i++)
		free(job->cms[i]);
	free(job->cms);
	for (int i = 0; job->cm_standbys && i < job->ncms; i++)
		free(job->cm_standbys[i]);
	free(job->cm_standbys);
	for (int i = 0; job->peers && i < job->size; i++)
		free(job->peers[i]);
	free(job->peers);
	free(job->home);
	for (int i = 0; job->repl_peers && i < job->size * job->replicas; i++)
		free(job->repl_peers[i]);
	free(job->repl_peers);
	job_clear(job);
}

static int parse_int_var(const char *name, const char *text, long min, long max, long *out)
{
	if (cm_parse_long(text, min, max, out) < 0 || isspace((unsigned char)text[0]) ||
	    text[0] == '+') {
		cm_err("%s: '%s' is not an integer in %ld..%ld", name, text, min, max);
		return -1;
	}
	return 0;
}

/* Splits a comma-separated list into exactly `want` items, one per `per`
 * (or any number >= 1 when want is 0). Returns the count, or -1 after
 * printing why. */
static int split_list(const char *name, const char *text, int want, const char *per, int max,
                      char ***out)
{
	int n = 1;
	for (const char *p = text; *p; p++)
		n += *p == ',';
	if (text[0] == '\0') {
		cm_err("%s is empty", name);
		return -1;
	}
	if (n > max) {
		cm_err("%s: %d entries, at most %d allowed", name, n, max);
		return -1;
	}
	if (want > 0 && n != want) {
		cm_err("%s: %d entries, expected exactly %d (one per %s)", name, n, want, per);
		return -1;
	}
	char **items = calloc((size_t)n, sizeof *items);
	if (items == NULL) {
		cm_err("%s: out of memory", name);
		return -1;
	}
	const char *p = text;
	for (int i = 0; i < n; i++) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		items[i] = strndup(p, len);
		if (items[i] == NULL) {
			cm_err("%s: out of memory", name);
			goto fail;
		}
		if (len == 0) {
			cm_err("%s: entry %d is empty", name, i);
			goto fail;
		}
		p += len + 1;
	}
	*out = items;
	return n;
fail:
	for (int i = 0; i < n; i++)
		free(items[i]);
	free(items);
	return -1;
}

/* allow_unix: channel memories on this host may be given as unix:@NAME
 * (an abstract unix socket); peers of the direct transports are TCP. NULL
 * items (no address) are skipped. */
static int check_addresses(const char *name, char **items, int n, bool allow_unix)
{
	for (int i = 0; i < n; i++) {
		struct sockaddr_in addr;
		if (items[i] == NULL)
			continue;
		if (allow_unix && strncmp(items[i], "unix:", 5) == 0) {
			struct cm_addr any;
			char why[128];
			if (cm_parse_addr(items[i], &any, why, sizeof why) == 0)
				continue;
			cm_err("%s: entry %d '%s': %s", name, i, items[i], why);
			return -1;
		}
		if (cm_parse_hostport(items[i], -1, &addr) < 0 || strchr(items[i], ':') == NULL) {
			cm_err("%s: entry %d '%s' is not an IPv4 HOST:PORT address", name, i,
			       items[i]);
			return -1;
		}
	}
	return 0;
}

static int parse_address_list(const char *name, const char *text, int want, const char *per,
                              int max, bool allow_unix, char ***out)
{
	char **items = NULL;
	int n = split_list(name, text, want, per, max, &items);
	if (n < 0)
		return -1;
	if (check_addresses(name, items, n, allow_unix) < 0) {
		for (int i = 0; i < n; i++)
			free(items[i]);
		free(items);
		return -1;
	}
	*out = items;
	return n;
}

static int parse_home(const char *text, struct cm_job *job)
{
	char **items = NULL;
	int n = split_list(CM_ENV_HOME, text, job->size, "rank", job->size, &items);
	int rc = n < 0 ? -1 : 0;
	for (int i = 0; i < n; i++) {
		long v;
		if (rc == 0 && cm_parse_long(items[i], 0, job->ncms - 1, &v) < 0) {
			cm_err("%s: entry %d '%s' is not a channel memory index in 0..%d",
			       CM_ENV_HOME, i, items[i], job->ncms - 1);
			rc = -1;
		}
		if (rc == 0)
			job->home[i] = (int)v;
		free(items[i]);
	}
	free(items);
	return rc;
}

static int check_listen_fd(const char *text, struct cm_job *job)
{
	long fd;
	if (parse_int_var(CM_ENV_LISTEN_FD, text, 0, 1 << 30, &fd) < 0)
		return -1;
	if (fcntl((int)fd, F_GETFD) < 0) {
		cm_err("%s: fd %ld is not open (%s)", CM_ENV_LISTEN_FD, fd, strerror(errno));
		return -1;
	}
	int listening = 0;
	socklen_t optlen = sizeof listening;
	if (getsockopt((int)fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &optlen) < 0 || !listening) {
		cm_err("%s: fd %ld is not a listening socket", CM_ENV_LISTEN_FD, fd);
		return -1;
	}
	job->listen_fd = (int)fd;
	return 0;
}

static int set_transport_name(const char *text, char *transport_name, size_t namelen)
{
	if (strcmp(text, "direct") != 0 && strcmp(text, "cm") != 0 && strcmp(text, "repl") != 0) {
		cm_err("%s: '%s' is not a transport (direct, cm or repl)", CM_ENV_TRANSPORT, text);
		return -1;
	}
	if (transport_name && namelen > 0) {
		if (strlen(text) >= namelen) {
			cm_err("%s: no room for the transport name", CM_ENV_TRANSPORT);
			return -1;
		}
		strcpy(transport_name, text);
	}
	return 0;
}

static int singleton(struct cm_job *job, char *transport_name, size_t namelen)
{
	job->rank = 0;
	job->size = 1;
	job->home = calloc(1, sizeof *job->home);
	if (job->home == NULL) {
		cm_err("out of memory");
		return -1;
	}
	return set_transport_name("direct", transport_name, namelen);
}

static int parse_secret(const char *text, struct cm_job *job)
{
	if (text == NULL) {
		cm_err("%s is not set (a %d-character job secret is required)", CM_ENV_SECRET,
		       CM_SECRET_LEN);
		return -1;
	}
	if (strlen(text) != CM_SECRET_LEN) {
		cm_err("%s: %zu characters, expected %d", CM_ENV_SECRET, strlen(text),
		       CM_SECRET_LEN);
		return -1;
	}
	for (int i = 0; i < CM_SECRET_LEN; i++) {
		if (!isgraph((unsigned char)text[i])) {
			cm_err("%s: character %d is not printable", CM_ENV_SECRET, i);
			return -1;
		}
	}
	memcpy(job->secret, text, CM_SECRET_LEN + 1);
	return 0;
}

/* CHANMEM_CM_STANDBYS: an address per CM, "-" for a CM without a standby
 * (a NULL entry); empty or unset: none. */
static int parse_standbys(const char *text, struct cm_job *job)
{
	if (job->ncms == 0) {
		cm_err("%s is set but %s is not", CM_ENV_CM_STANDBYS, CM_ENV_CMS);
		return -1;
	}
	char **items = NULL;
	int n =
	    split_list(CM_ENV_CM_STANDBYS, text, job->ncms, "channel memory", job->ncms, &items);
	if (n < 0)
		return -1;
	for (int i = 0; i < n; i++)
		if (strcmp(items[i], "-") == 0) {
			free(items[i]);
			items[i] = NULL;
		}
	job->cm_standbys = items;
	return check_addresses(CM_ENV_CM_STANDBYS, items, n, true);
}

static int parse_cms(const char *transport, struct cm_job *job)
{
	const char *cms = getenv(CM_ENV_CMS);
	const char *home = getenv(CM_ENV_HOME);
	if (cms == NULL && strcmp(transport, "cm") == 0) {
		cm_err("%s is not set (the cm transport needs the channel memory addresses)",
		       CM_ENV_CMS);
		return -1;
	}
	if (cms != NULL) {
		job->ncms = parse_address_list(CM_ENV_CMS, cms, 0, "", CM_MAX_CMS, true, &job->cms);
		if (job->ncms < 0) {
			job->ncms = 0;
			return -1;
		}
	}
	const char *standbys = getenv(CM_ENV_CM_STANDBYS);
	if (standbys && *standbys && parse_standbys(standbys, job) < 0)
		return -1;
	job->home = calloc((size_t)job->size, sizeof *job->home);
	if (job->home == NULL) {
		cm_err("out of memory");
		return -1;
	}
	if (home != NULL) {
		if (job->ncms == 0) {
			cm_err("%s is set but %s is not", CM_ENV_HOME, CM_ENV_CMS);
			return -1;
		}
		return parse_home(home, job);
	}
	for (int i = 0; i < job->size; i++)
		job->home[i] = job->ncms > 0 ? i % job->ncms : 0;
	return 0;
}

/* The listening socket must be the one the others will connect to. */
static int check_own_port(const struct cm_job *job)
{
	struct sockaddr_in bound, listed;
	socklen_t len = sizeof bound;
	if (getsockname(job->listen_fd, (struct sockaddr *)&bound, &len) < 0 ||
	    bound.sin_family != AF_INET)
		return 0; /* not IPv4: the connect will tell */
	cm_parse_hostport(job->peers[job->rank], -1, &listed);
	if (bound.sin_port != listed.sin_port) {
		cm_err("%s: fd %d listens on port %u but %s gives rank %d the address %s",
		       CM_ENV_LISTEN_FD, job->listen_fd, (unsigned)ntohs(bound.sin_port),
		       CM_ENV_PEERS, job->rank, job->peers[job->rank]);
		return -1;
	}
	return 0;
}

/* CHANMEM_LISTEN: a rank on another host than cmrun's listens itself. */
static int listen_on(const char *text, struct cm_job *job)
{
	struct sockaddr_in addr, bound;
	if (cm_parse_hostport(text, -1, &addr) < 0 || addr.sin_port == 0) {
		cm_err("%s: '%s' is not an IPv4 HOST:PORT address", CM_ENV_LISTEN, text);
		return -1;
	}
	job->listen_fd = cm_tcp_listen(&addr, &bound);
	if (job->listen_fd < 0) {
		cm_err("%s: cannot listen on %s: %s (another job's port? see cmrun --port-base)",
		       CM_ENV_LISTEN, text, strerror(errno));
		return -1;
	}
	cm_set_cloexec(job->listen_fd, 1);
	return 0;
}

static int parse_direct(const char *transport, struct cm_job *job)
{
	const char *peers = getenv(CM_ENV_PEERS);
	const char *fd = getenv(CM_ENV_LISTEN_FD);
	const char *listen = fd == NULL ? getenv(CM_ENV_LISTEN) : NULL;
	int needed = strcmp(transport, "direct") == 0 && job->size > 1;
	if (peers == NULL && needed) {
		cm_err("%s is not set (the direct transport needs every rank's address)",
		       CM_ENV_PEERS);
		return -1;
	}
	if (fd == NULL && listen == NULL && needed) {
		cm_err("%s is not set (the direct transport needs this rank's listening socket)",
		       CM_ENV_LISTEN_FD);
		return -1;
	}
	if (peers != NULL && parse_address_list(CM_ENV_PEERS, peers, job->size, "rank", job->size,
	                                        false, &job->peers) < 0)
		return -1;
	if (fd != NULL && check_listen_fd(fd, job) < 0)
		return -1;
	if (listen != NULL && strcmp(transport, "cm") != 0 && listen_on(listen, job) < 0)
		return -1;
	return job->peers && job->listen_fd >= 0 ? check_own_port(job) : 0;
}

/* Replication: CHANMEM_REPLICA, CHANMEM_REPLICAS and every replica's
 * address (needed with transport repl, ignored otherwise). */
static int parse_repl(const char *transport, struct cm_job *job)
{
	if (strcmp(transport, "repl") != 0)
		return 0;
	const char *replica = getenv(CM_ENV_REPLICA);
	const char *replicas = getenv(CM_ENV_REPLICAS);
	const char *peers = getenv(CM_ENV_REPL_PEERS);
	if (replica == NULL || replicas == NULL || peers == NULL || job->listen_fd < 0) {
		cm_err("the repl transport needs %s, %s, %s and %s", CM_ENV_REPLICA,
		       CM_ENV_REPLICAS, CM_ENV_REPL_PEERS, CM_ENV_LISTEN_FD);
		return -1;
	}
	long v;
	if (parse_int_var(CM_ENV_REPLICAS, replicas, 1, CM_MAX_REPLICAS, &v) < 0)
		return -1;
	job->replicas = (int)v;
	if (parse_int_var(CM_ENV_REPLICA, replica, 0, job->replicas - 1, &v) < 0)
		return -1;
	job->replica = (int)v;
	long total = (long)job->size * job->replicas;
	if (total > CM_MAX_WORLD * CM_MAX_REPLICAS) {
		cm_err("%s: too many processes", CM_ENV_REPL_PEERS);
		return -1;
	}
	if (parse_address_list(CM_ENV_REPL_PEERS, peers, (int)total, "replica", (int)total, false,
	                       &job->repl_peers) < 0) {
		job->repl_peers = NULL;
		return -1;
	}
	return 0;
}

int cm_job_from_env(struct cm_job *job, char *transport_name, size_t namelen)
{
	job_clear(job);
	const char *rank = getenv(CM_ENV_RANK);
	if (rank == NULL)
		return singleton(job, transport_name, namelen) < 0 ? (cm_job_free(job), -1) : 0;

	long v;
	const char *size = getenv(CM_ENV_SIZE);
	if (size == NULL) {
		cm_err("%s is set but %s is not", CM_ENV_RANK, CM_ENV_SIZE);
		goto fail;
	}
	if (parse_int_var(CM_ENV_SIZE, size, 1, CM_MAX_WORLD, &v) < 0)
		goto fail;
	job->size = (int)v;
	if (cm_parse_long(rank, 0, job->size - 1, &v) < 0 || !isdigit((unsigned char)rank[0])) {
		cm_err("%s: '%s' is not a rank of a %d-rank job (0..%d)", CM_ENV_RANK, rank,
		       job->size, job->size - 1);
		goto fail;
	}
	job->rank = (int)v;

	const char *inc = getenv(CM_ENV_INCARNATION);
	if (inc != NULL) {
		if (parse_int_var(CM_ENV_INCARNATION, inc, 0, UINT32_MAX, &v) < 0)
			goto fail;
		job->incarnation = (unsigned)v;
	}
	if (parse_secret(getenv(CM_ENV_SECRET), job) < 0)
		goto fail;

	const char *transport = getenv(CM_ENV_TRANSPORT);
	if (transport == NULL)
		transport = "cm"; /* cmrun's default */
	if (set_transport_name(transport, transport_name, namelen) < 0)
		goto fail;
	if (parse_cms(transport, job) < 0 || parse_direct(transport, job) < 0 ||
	    parse_repl(transport, job) < 0)
		goto fail;
	return 0;
fail:
	cm_job_free(job);
	return -1;
}
