/* ckptserver: the checkpoint server. Parses and validates the command line,
 * reads the job secret, opens the image store, listens, tells whoever
 * started it where, and serves each connection in its own thread (see
 * ckpt_session.c for why threads). --list and --remove open the store, act
 * and exit instead. */
#include "config.h"

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
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#define EXIT_USAGE 2
#define DEFAULT_KEEP 2
#define MAX_KEEP 100000
#define DEFAULT_LEVEL 3
#define DEFAULT_MAX_IMAGE (64ull << 30)

static void usage(FILE *out)
{
	fprintf(
	    out,
	    "Usage: ckptserver --dir DIR [OPTION]...\n"
	    "       ckptserver --list --dir DIR\n"
	    "       ckptserver --remove JOB --dir DIR\n"
	    "The chanmem checkpoint server: stores rank images (zstd-compressed files\n"
	    "indexed in LMDB) and serves the latest one of a rank on request.\n"
	    "\n"
	    "Options:\n"
	    "  --dir DIR            directory of the images and the index (created if\n"
	    "                       missing; one ckptserver per directory)\n"
	    "  --listen ADDR:PORT   address to listen on (default 127.0.0.1:0; port 0 picks\n"
	    "                       a free port). Prints 'ckptserver: listening on HOST:PORT'.\n"
	    "  --ready-fd N         once listening, write \"HOST:PORT\\n\" to fd N and close it\n"
	    "  --keep K             images kept per job and rank (default %d, 1..%d)\n"
	    "  --level L            zstd compression level (default %d, %d..%d)\n"
	    "  --max-image BYTES    largest image accepted (default 64GiB; units K, M, G,\n"
	    "                       KiB, MiB, GiB)\n"
	    "  --secret-file FILE   read the 32-character job secret from the first line of\n"
	    "                       FILE; the environment variable %s takes precedence\n"
	    "  --reset-corrupt-store  if the store in DIR is damaged, move it into\n"
	    "                       DIR/corrupt-TIME-PID and start with an empty one\n"
	    "                       (without it a damaged store is refused: exit 1)\n"
	    "  --list               print what DIR holds, one line per job and rank (its\n"
	    "                       newest image: generation, size, time; images kept),\n"
	    "                       and exit without serving\n"
	    "  --remove JOB         remove every image of job JOB from DIR and exit\n"
	    "                       without serving (exit 1 if DIR has none of JOB)\n"
	    "  -v, --verbose        report commits and refusals; twice for debug output\n"
	    "  -h, --help           show this help and exit\n"
	    "      --version        show the version and exit\n"
	    "\n"
	    "SIGTERM or SIGINT stop it cleanly (exit 0) after any commit in progress;\n"
	    "unfinished uploads are discarded. Exit status: 0 after a clean stop, 1 on a\n"
	    "runtime failure, 2 on a usage error.\n",
	    DEFAULT_KEEP, MAX_KEEP, DEFAULT_LEVEL, ZSTD_minCLevel(), ZSTD_maxCLevel(),
	    CM_ENV_SECRET);
}

static void __attribute__((noreturn)) bad_usage(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

static void bad_usage(const char *fmt, ...)
{
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	cm_err("%s", line);
	fprintf(stderr, "Try 'ckptserver --help' for more information.\n");
	exit(EXIT_USAGE);
}

static void read_secret(const char *file, char out[CM_SECRET_LEN + 1])
{
	char why[512];
	if (cm_secret_load(file, out, why, sizeof why) < 0)
		bad_usage("%s", why);
}

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
	enum {
		OPT_LISTEN = 256,
		OPT_READY_FD,
		OPT_DIR,
		OPT_KEEP,
		OPT_LEVEL,
		OPT_MAX_IMAGE,
		OPT_SECRET,
		OPT_RESET_CORRUPT,
		OPT_LIST,
		OPT_REMOVE,
		OPT_VERSION
	};
	static const struct option longopts[] = {
	    {"listen", required_argument, NULL, OPT_LISTEN},
	    {"ready-fd", required_argument, NULL, OPT_READY_FD},
	    {"dir", required_argument, NULL, OPT_DIR},
	    {"keep", required_argument, NULL, OPT_KEEP},
	    {"level", required_argument, NULL, OPT_LEVEL},
	    {"max-image", required_argument, NULL, OPT_MAX_IMAGE},
	    {"secret-file", required_argument, NULL, OPT_SECRET},
	    {"reset-corrupt-store", no_argument, NULL, OPT_RESET_CORRUPT},
	    {"list", no_argument, NULL, OPT_LIST},
	    {"remove", required_argument, NULL, OPT_REMOVE},
	    {"verbose", no_argument, NULL, 'v'},
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, OPT_VERSION},
	    {NULL, 0, NULL, 0},
	};
	const char *listen_text = "127.0.0.1:0", *secret_file = NULL, *remove_job = NULL;
	int list = 0;
	long ready_fd = -1, keep = DEFAULT_KEEP, level = DEFAULT_LEVEL;
	int verbosity = 0;
	struct ckpt_store_opts so = {.max_image = DEFAULT_MAX_IMAGE};

	cm_log_init("ckptserver", 0);
	opterr = 0;
	int c;
	while ((c = getopt_long(argc, argv, ":hv", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_LISTEN:
			listen_text = optarg;
			break;
		case OPT_READY_FD:
			if (cm_parse_long(optarg, 0, INT_MAX, &ready_fd) < 0)
				bad_usage("--ready-fd '%s': not a file descriptor number", optarg);
			break;
		case OPT_DIR:
			if (*optarg == '\0')
				bad_usage("--dir: empty directory name");
			so.dir = optarg;
			break;
		case OPT_KEEP:
			if (cm_parse_long(optarg, 1, MAX_KEEP, &keep) < 0)
				bad_usage("--keep '%s': expected a whole number from 1 to %d",
				          optarg, MAX_KEEP);
			break;
		case OPT_LEVEL:
			if (cm_parse_long(optarg, ZSTD_minCLevel(), ZSTD_maxCLevel(), &level) < 0)
				bad_usage("--level '%s': expected a zstd level from %d to %d",
				          optarg, ZSTD_minCLevel(), ZSTD_maxCLevel());
			break;
		case OPT_MAX_IMAGE:
			if (cm_parse_size(optarg, &so.max_image) < 0 || so.max_image == 0)
				bad_usage(
				    "--max-image '%s': not a size of at least 1 byte (examples: "
				    "65536, 64K, 4MiB, 1G)",
				    optarg);
			break;
		case OPT_SECRET:
			secret_file = optarg;
			break;
		case OPT_RESET_CORRUPT:
			so.reset_corrupt = 1;
			break;
		case OPT_LIST:
			list = 1;
			break;
		case OPT_REMOVE:
			if (!ckpt_job_valid(optarg, strlen(optarg)))
				bad_usage("--remove '%s': not a job id (1-%d of A-Z a-z 0-9 . _ -)",
				          optarg, CKPT_JOB_MAX);
			remove_job = optarg;
			break;
		case 'v':
			verbosity++;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case OPT_VERSION:
			printf("ckptserver (chanmem) %s\n", PACKAGE_VERSION);
			return 0;
		case ':':
			bad_usage("option '%s' needs a value", argv[optind - 1]);
		default:
			bad_usage("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		bad_usage("unexpected argument '%s'", argv[optind]);
	if (so.dir == NULL)
		bad_usage("--dir DIR is required (where the images are stored)");
	cm_log_init("ckptserver", verbosity);
	so.keep = (unsigned)keep;
	so.level = (int)level;
	if (list && remove_job)
		bad_usage("--list and --remove: one at a time");
	if (list || remove_job)
		return maintain(&so, remove_job);

	struct sockaddr_in addr;
	if (cm_parse_hostport(listen_text, 0, &addr) < 0)
		bad_usage("--listen '%s': expected ADDR:PORT (IPv4 address or localhost, port "
		          "0-65535)",
		          listen_text);
	if (ready_fd >= 0 && fcntl((int)ready_fd, F_GETFD) < 0)
		bad_usage("--ready-fd %ld: not an open file descriptor", ready_fd);
	static struct ckpt_server srv;
	pthread_mutex_init(&srv.unauth_mu, NULL);
	read_secret(secret_file, srv.secret);

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
	int lfd = cm_tcp_listen(&addr, &bound);
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
