/* Process harness for the transport tests: see test_transport_harness.h. */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#endif

#include "conn.h"
#include "jobenv.h"
#include "net.h"
#include "test_transport_harness.h"

#define WAIT_LIMIT_MS 60000

static void sleep_ms(int ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

int t_wait(struct cm_transport *t, struct cm_req *r)
{
	long long deadline = cm_now_ms() + WAIT_LIMIT_MS;
	while (!r->done) {
		if (cm_now_ms() > deadline) {
			fprintf(stderr,
			        "t_wait: request (peer %d tag %d) still pending after %d s\n",
			        r->peer, r->tag, WAIT_LIMIT_MS / 1000);
			return -1;
		}
		if (t->progress(t, 1000) < 0)
			return -1;
	}
	return 0;
}

int t_send(struct cm_transport *t, int dst, int tag, uint32_t ctx, const void *buf, size_t len,
           int sync)
{
	struct cm_req r = {.kind = CM_REQ_SEND,
	                   .peer = dst,
	                   .tag = tag,
	                   .ctx = ctx,
	                   .sbuf = buf,
	                   .slen = len,
	                   .sync = sync};
	if (t->isend(t, &r) < 0)
		return -1;
	return t_wait(t, &r);
}

int t_recv(struct cm_transport *t, int src, int tag, uint32_t ctx, void *buf, size_t cap,
           struct cm_req *status)
{
	struct cm_req r = {
	    .kind = CM_REQ_RECV, .peer = src, .tag = tag, .ctx = ctx, .rbuf = buf, .rcap = cap};
	if (t->irecv(t, &r) < 0 || t_wait(t, &r) < 0)
		return -1;
	if (status)
		*status = r;
	return 0;
}

static inline uint8_t pattern_byte(size_t i, uint32_t seed)
{
	uint32_t x = (uint32_t)i * 2654435761u + seed * 40503u;
	return (uint8_t)(x >> 13 ^ x >> 3 ^ (uint32_t)(i >> 8));
}

void fill_pattern(void *buf, size_t len, uint32_t seed)
{
	uint8_t *p = buf;
	for (size_t i = 0; i < len; i++)
		p[i] = pattern_byte(i, seed);
}

size_t check_pattern(const void *buf, size_t len, uint32_t seed)
{
	const uint8_t *p = buf;
	for (size_t i = 0; i < len; i++)
		if (p[i] != pattern_byte(i, seed))
			return i;
	return (size_t)-1;
}

static void set_int_env(const char *name, long v)
{
	char text[32];
	snprintf(text, sizeof text, "%ld", v);
	setenv(name, text, 1);
}

static int run_rank(const struct tjob *job, rank_fn fn, int rank)
{
	char transport_name[16];
	struct cm_job cj;
	struct cm_transport t;
	set_int_env(CM_ENV_RANK, rank);
	if (cm_job_from_env(&cj, transport_name, sizeof transport_name) < 0)
		return 2;
	if (strcmp(transport_name, "cm") == 0)
		cm_transport_cm(&t);
	else
		cm_transport_direct(&t);
	if (t.init(&t, &cj) < 0) {
		cm_job_free(&cj);
		return 3;
	}
	int rc = fn(&t, rank, cj.size);
	if (t.finalize(&t) < 0 && rc == 0)
		rc = 4;
	cm_job_free(&cj);
	return rc;
}

static int wait_children(pid_t *pids, int n, int timeout_s)
{
	int failures = 0, left = n;
	long long deadline = cm_now_ms() + timeout_s * 1000LL;
	while (left > 0) {
		for (int i = 0; i < n; i++) {
			int status;
			if (pids[i] <= 0 || waitpid(pids[i], &status, WNOHANG) != pids[i])
				continue;
			pids[i] = -1;
			left--;
			if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
				fprintf(stderr, "rank %d exited with %s %d\n", i,
				        WIFEXITED(status) ? "status" : "signal",
				        WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
				failures++;
			}
		}
		if (left == 0)
			break;
		if (cm_now_ms() > deadline) {
			for (int i = 0; i < n; i++) {
				if (pids[i] > 0) {
					fprintf(stderr,
					        "rank %d still running after %d s: killed\n", i,
					        timeout_s);
					kill(pids[i], SIGKILL);
					waitpid(pids[i], NULL, 0);
					pids[i] = -1;
					failures++;
				}
			}
			break;
		}
		sleep_ms(5);
	}
	return failures;
}

int tjob_run(const struct tjob *job, rank_fn fn, int timeout_s)
{
	int n = job->n;
	int *lfds = calloc((size_t)n, sizeof *lfds);
	pid_t *pids = calloc((size_t)n, sizeof *pids);
	size_t peers_len = (size_t)n * 24 + 1;
	char *peers = calloc(peers_len, 1);
	if (!lfds || !pids || !peers)
		return -1;
	int direct = strcmp(job->transport, "direct") == 0;
	for (int i = 0; i < n; i++)
		lfds[i] = -1;
	if (direct && n > 1) {
		struct sockaddr_in any;
		cm_parse_hostport("127.0.0.1:0", 0, &any);
		for (int i = 0; i < n; i++) {
			struct sockaddr_in bound;
			char addr[32];
			lfds[i] = cm_tcp_listen(&any, &bound);
			if (lfds[i] < 0) {
				perror("listen");
				return -1;
			}
			cm_format_addr(&bound, addr, sizeof addr);
			if (i > 0)
				strcat(peers, ",");
			strcat(peers, addr);
		}
	}
	fflush(NULL);
	for (int i = 0; i < n; i++) {
		pids[i] = fork();
		if (pids[i] < 0) {
			perror("fork");
			wait_children(pids, i, 1);
			return -1;
		}
		if (pids[i] > 0)
			continue;
		/* child: the environment cmrun would give rank i */
		set_int_env(CM_ENV_SIZE, n);
		setenv(CM_ENV_SECRET, job->secret ? job->secret : TEST_SECRET, 1);
		setenv(CM_ENV_TRANSPORT, job->transport, 1);
		unsetenv(CM_ENV_INCARNATION);
		unsetenv(CM_ENV_PEERS);
		unsetenv(CM_ENV_LISTEN_FD);
		unsetenv(CM_ENV_CMS);
		unsetenv(CM_ENV_HOME);
		if (job->cms)
			setenv(CM_ENV_CMS, job->cms, 1);
		if (job->home)
			setenv(CM_ENV_HOME, job->home, 1);
		if (direct && n > 1) {
			setenv(CM_ENV_PEERS, peers, 1);
			set_int_env(CM_ENV_LISTEN_FD, lfds[i]);
			for (int j = 0; j < n; j++)
				if (j != i)
					close(lfds[j]);
		}
		free(lfds);
		free(pids);
		free(peers);
		int rc = run_rank(job, fn, i);
		fflush(NULL);
#ifdef __SANITIZE_ADDRESS__
		/* _exit skips the leak check: a rank must end with nothing leaked. */
		if (rc == 0 && __lsan_do_recoverable_leak_check() != 0)
			rc = 5;
#endif
		_exit(rc);
	}
	for (int i = 0; i < n; i++)
		if (lfds[i] >= 0)
			close(lfds[i]);
	int failures = wait_children(pids, n, timeout_s);
	free(lfds);
	free(pids);
	free(peers);
	return failures;
}

pid_t cmserver_start(char *addr, size_t addrlen)
{
	const char *path = getenv("CMSERVER");
	if (path == NULL || access(path, X_OK) != 0) {
		fprintf(stderr, "cmserver not found: CMSERVER=%s\n", path ? path : "(unset)");
		return -1;
	}
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC) < 0)
		return -1;
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		char fdtext[16];
		close(pfd[0]);
		fcntl(pfd[1], F_SETFD, 0);
		snprintf(fdtext, sizeof fdtext, "%d", pfd[1]);
		setenv("CHANMEM_SECRET", TEST_SECRET, 1);
		int devnull = open("/dev/null", O_WRONLY);
		if (devnull >= 0)
			dup2(devnull, 1); /* its "listening on" line */
		execl(path, path, "--listen", "127.0.0.1:0", "--ready-fd", fdtext, (char *)NULL);
		perror("exec cmserver");
		_exit(127);
	}
	close(pfd[1]);
	size_t got = 0;
	long long deadline = cm_now_ms() + 10000;
	while (got + 1 < addrlen) {
		struct pollfd p = {.fd = pfd[0], .events = POLLIN};
		long long left = deadline - cm_now_ms();
		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			break;
		ssize_t r = read(pfd[0], addr + got, addrlen - 1 - got);
		if (r <= 0)
			break;
		got += (size_t)r;
		addr[got] = '\0';
		if (strchr(addr, '\n'))
			break;
	}
	close(pfd[0]);
	char *nl = got ? strchr(addr, '\n') : NULL;
	if (nl == NULL) {
		fprintf(stderr, "cmserver did not report its address\n");
		cmserver_stop(pid);
		return -1;
	}
	*nl = '\0';
	addr[strcspn(addr, " ")] = '\0'; /* its TCP address; " unix:@NAME" follows */
	return pid;
}

int cmserver_stop(pid_t pid)
{
	int status;
	kill(pid, SIGTERM);
	long long deadline = cm_now_ms() + 5000;
	while (waitpid(pid, &status, WNOHANG) == 0) {
		if (cm_now_ms() > deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			return -1;
		}
		sleep_ms(5);
	}
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
