/* ckptserver: the checkpoint server. Parses and validates the command line,
 * reads the job secret, opens the image store, listens, tells whoever
 * started it where, and serves each connection in its own thread (see
 * ckpt_session.c for why threads). */
#include "config.h"

#include "ckpt_cli.h"
#include "ckpt_session.h"
#include "ckpt_store.h"

#include "jobenv.h"
#include "log.h"
#include "net.h"
#include "protocol.h"
#include "secret.h"
#include "units.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

struct conn_start {
	struct ckpt_server *srv;
	int fd;
};

static void *conn_thread(void *arg)
{
	struct conn_start cs = *(struct conn_start *)arg;
	free(arg);
	if (atomic_fetch_add(&cs.srv->sessions, 1) >= CKPT_MAX_SESSIONS)
		ckpt_session_refuse(cs.fd, CKPT_E_BUSY, "too many connections");
	else
		ckpt_session_serve(cs.srv, cs.fd);
	atomic_fetch_sub(&cs.srv->sessions, 1);
	return NULL;
}

static void start_connection(struct ckpt_server *srv, int fd)
{
	cm_tune_socket(fd);
	cm_set_cloexec(fd, 1);
	struct timeval tv = {.tv_sec = CKPT_IO_TIMEOUT_MS / 1000};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	struct conn_start *cs = malloc(sizeof *cs);
	pthread_attr_t attr;
	pthread_t tid;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	/* Frames and zstd state live on the heap: a small stack suffices. */
	pthread_attr_setstacksize(&attr, 256 * 1024);
	if (cs == NULL) {
		close(fd);
	} else {
		cs->srv = srv;
		cs->fd = fd;
		if (pthread_create(&tid, &attr, conn_thread, cs) != 0) {
			cm_err("cannot start a connection thread: %s", strerror(errno));
			free(cs);
			close(fd);
		}
	}
	pthread_attr_destroy(&attr);
}

static void print_rank(void *arg, const struct ckpt_store_rank *r)
{
	int *lines = arg;
	if ((*lines)++ == 0)
		printf("%-24s %6s %10s %12s %12s %-20s %s\n", "JOB", "RANK", "GENERATION", "SIZE",
		       "STORED", "TIME", "IMAGES");
	time_t t = (time_t)(r->time_ns / 1000000000ull);
	struct tm tm;
	char when[32];
	strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
	printf("%-24s %6u %10llu %12llu %12llu %-20s %u\n", r->job, (unsigned)r->rank,
	       (unsigned long long)r->number, (unsigned long long)r->raw,
	       (unsigned long long)r->compressed, when, r->images);
}

/* --list and --remove: the store opened as a server opens it (same checks,
 * same lock), no socket. The exit status. */
static int maintain(struct ckpt_store_opts *so, const char *remove_job)
{
	so->must_exist = 1;
	struct ckpt_store *st = ckpt_store_open(so);
	if (st == NULL)
		return 1;
	int rc = 0, lines = 0;
	uint64_t removed = 0;
	if (remove_job == NULL) {
		rc = ckpt_store_list(st, print_rank, &lines) < 0 ? 1 : 0;
		if (rc == 0 && lines == 0)
			printf("%s: no images\n", so->dir);
	} else if (ckpt_store_remove_job(st, remove_job, &removed) < 0) {
		rc = 1;
	} else if (removed == 0) {
		cm_err("--dir %s: no images of job %s", so->dir, remove_job);
		rc = 1;
	} else {
		printf("%s: removed %llu image(s) of job %s\n", so->dir,
		       (unsigned long long)removed, remove_job);
	}
	ckpt_store_close(st);
	return rc;
}

int main(int argc, char **argv)
{
	struct ckpt_args a;
	struct cmdline_state st = {0};

	cm_log_init("ckptserver", 0);
	int parsed = ckpt_parse_args(argc, argv, &a, &st);
	cmdline_settle(&ckpt_cmdline, parsed, &st);
	cm_log_init("ckptserver", a.verbosity);
	struct ckpt_store_opts so = a.store;
	if (a.list || a.remove_job)
		return maintain(&so, a.remove_job);
	const char *listen_text = a.listen_text;
	long ready_fd = a.ready_fd;
	if (ready_fd >= 0 && fcntl((int)ready_fd, F_GETFD) < 0)
		cmdline_bad_usage("ckptserver", "--ready-fd %ld: not an open file descriptor",
		                  ready_fd);
	static struct ckpt_server srv;
	pthread_mutex_init(&srv.unauth_mu, NULL);
	cm_secret_load_or_exit("ckptserver", a.secret_file, srv.secret);

	/* Blocked in every thread (inherited); the accept loop takes them from
	 * a signalfd, so a SIGTERM right after the ready line is a clean exit. */
	sigset_t stop;
	sigemptyset(&stop);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGINT);
	sigprocmask(SIG_BLOCK, &stop, NULL);
	signal(SIGPIPE, SIG_IGN);
	int sfd = signalfd(-1, &stop, SFD_CLOEXEC);
	if (sfd < 0) {
		cm_err("signalfd: %s", strerror(errno));
		return 1;
	}

	srv.store = ckpt_store_open(&so);
	if (srv.store == NULL)
		return 1;
	struct sockaddr_in bound;
	int lfd = cm_tcp_listen(&a.addr, &bound);
	if (lfd < 0) {
		cm_err("cannot listen on %s: %s", listen_text, strerror(errno));
		return 1;
	}
	cm_set_cloexec(lfd, 1);
	char where[64];
	cm_format_addr(&bound, where, sizeof where);
	printf("ckptserver: listening on %s\n", where);
	fflush(stdout);
	cm_info("dir %s: %llu image(s); keep %u, level %d, max image %llu bytes", so.dir,
	        (unsigned long long)ckpt_store_count(srv.store), so.keep, so.level,
	        (unsigned long long)so.max_image);
	if (ready_fd >= 0) {
		char line[80];
		int n = snprintf(line, sizeof line, "%s\n", where);
		if (cm_write_full((int)ready_fd, line, (size_t)n) < 0) {
			cm_err("--ready-fd %ld: %s", ready_fd, strerror(errno));
			return 1;
		}
		close((int)ready_fd);
	}

	for (;;) {
		struct pollfd p[2] = {{.fd = lfd, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			cm_err("poll: %s", strerror(errno));
			return 1;
		}
		if (p[1].revents)
			break;
		if (p[0].revents) {
			int fd = accept(lfd, NULL, NULL);
			if (fd >= 0)
				start_connection(&srv, fd);
			else if (errno == EMFILE || errno == ENFILE)
				/* Out of descriptors: back off instead of spinning. */
				poll(NULL, 0, 100);
		}
	}
	close(lfd);
	ckpt_store_quiesce(srv.store);
	cm_info("stopping");
	fflush(stdout);
	_exit(0);
}
