/* cmserver: a channel memory. Parses and validates the command line, reads
 * the job secret, opens the listening sockets (TCP, and an abstract unix
 * socket for ranks on this host), tells whoever started it where it listens, and hands over to the
 * I/O engine --mode selects. */
#include "config.h"

#include "cli.h"
#include "core.h"
#include "engine.h"
#include "journal.h"
#include "logmem.h"
#include "spill.h"
#include "standby.h"

#include "jobenv.h"
#include "log.h"
#include "net.h"
#include "secret.h"
#include "units.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const struct cm_engine cm_engines[] = {
    {"mono", cm_engine_mono},
    {"thread-per-client", cm_engine_thread_per_client},
    {"multiplexer", cm_engine_multiplexer},
    {"specialized", cm_engine_specialized},
    {NULL, NULL},
};

/* The TCP listener at addr and, unless no_unix, the abstract unix one;
 * where gets "HOST:PORT[ unix:@NAME]", TCP first so that readers that only
 * know TCP take the first word. */
static int open_listeners(const struct sockaddr_in *addr, const char *listen_text, bool no_unix,
                          const struct cm_addr *unix_want, struct cm_listeners *ls, char *where,
                          size_t wherelen)
{
	struct sockaddr_in bound;
	int fd = cm_tcp_listen(addr, &bound);
	if (fd < 0) {
		cm_err("cannot listen on %s: %s", listen_text, strerror(errno));
		return -1;
	}
	ls->fds[ls->n++] = fd;
	cm_format_addr(&bound, where, wherelen);
	if (no_unix)
		return 0;
	struct cm_addr unix_bound;
	if ((fd = cm_unix_listen(unix_want, &unix_bound)) < 0) {
		cm_err("cannot listen on an abstract unix socket: %s (--no-unix: TCP only)",
		       strerror(errno));
		cm_listeners_close(ls, 0);
		return -1;
	}
	ls->fds[ls->n++] = fd;
	size_t len = strlen(where);
	where[len++] = ' ';
	cm_format_any(&unix_bound, where + len, wherelen - len);
	return 0;
}

/* --journal-scratch: the journal's directory (a private one cmrun named
 * on its own host, maybe missing on this one, parents included), made if
 * missing, mode 0700: the journal holds the job's messages. 0, or -1 said. */
static int scratch_dir_make(const char *path)
{
	char dir[PATH_MAX];
	if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir) {
		cm_err("--journal %s: path too long", path);
		return -1;
	}
	char *slash = strrchr(dir, '/');
	if (slash == NULL || slash == dir)
		return 0;
	*slash = '\0';
	/* Each level from the top; the ones that exist are left as they are. */
	for (char *p = dir + 1;; p++) {
		bool last = *p == '\0';
		if (*p != '/' && !last)
			continue;
		*p = '\0';
		if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
			cm_err("--journal-scratch: cannot make %s: %s", dir, strerror(errno));
			return -1;
		}
		if (last)
			return 0;
		*p = '/';
	}
}

/* After a clean end: nothing will recover from the journal any more. The
 * directory goes once the last journal in it has (other CMs of the job
 * may share it). */
static void scratch_remove(const char *path)
{
	cm_journal_remove(path);
	char dir[PATH_MAX];
	snprintf(dir, sizeof dir, "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash != NULL && slash != dir) {
		*slash = '\0';
		(void)rmdir(dir);
	}
}

int main(int argc, char **argv)
{
	struct cmserver_args a;
	struct cmdline_state st = {0};

	cm_log_init("cmserver", 0);
	int parsed = cmserver_parse_args(argc, argv, &a, &st);
	cmdline_settle(&cmserver_cmdline, parsed, &st);
	cm_log_init("cmserver", a.verbosity);

	const struct cm_engine *engine = NULL;
	for (const struct cm_engine *e = cm_engines; e->name; e++)
		if (strcmp(e->name, a.mode) == 0)
			engine = e;
	if (engine == NULL || engine->run == NULL)
		cmdline_bad_usage("cmserver", "mode %s is not built yet", a.mode);
	struct cm_server_opts opts = {.mode = engine->name,
	                              .threads = a.threads,
	                              .max_message = (uint32_t)a.max_message,
	                              .log_mem = a.log_mem,
	                              .cut_through_min = (uint32_t)a.cut_through_min,
	                              .world_size = (uint32_t)a.world_size,
	                              .standby_addr = a.mirror_text};
	const char *listen_text = a.listen_text, *spill_dir = a.spill_dir;
	long ready_fd = a.ready_fd, report_fd = a.report_fd;
	if (ready_fd >= 0 && fcntl((int)ready_fd, F_GETFD) < 0)
		cmdline_bad_usage("cmserver", "--ready-fd %ld: not an open file descriptor",
		                  ready_fd);
	if (report_fd >= 0 && fcntl((int)report_fd, F_GETFD) < 0)
		cmdline_bad_usage("cmserver", "--report-fd %ld: not an open file descriptor",
		                  report_fd);
	char secret[CM_SECRET_LEN + 1];
	cm_secret_load_or_exit("cmserver", a.secret_file, secret);
	memcpy(opts.secret, secret, CM_SECRET_LEN);

	/* Held back until the engine's ev_signal watchers take over, so a
	 * SIGTERM right after the ready line still means a clean exit. */
	sigset_t stop;
	sigemptyset(&stop);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGINT);
	sigprocmask(SIG_BLOCK, &stop, NULL);
	signal(SIGPIPE, SIG_IGN);
	/* Payloads of 64 KiB and more live in the log memory's own blocks
	 * (logmem.c); the heap holds small ones and bookkeeping, whose freed
	 * memory glibc may keep up to this much before giving it back: a fixed
	 * threshold, so that it stays inside the documented overhead. */
	mallopt(M_TRIM_THRESHOLD, 64 * 1024 * 1024);

	/* The spill directory first: one that cannot be made is refused
	 * before anything listens. */
	struct cm_spill_store *spill = NULL;
	if (!a.no_spill) {
		spill = cm_spill_store_open(spill_dir);
		if (spill == NULL && spill_dir)
			return 1;
		if (spill == NULL)
			cm_err("running without a spill store: past --log-mem delivered messages "
			       "are dropped");
		opts.spill = spill ? cm_spill_store_ops(spill) : NULL;
		opts.spill_ctx = spill;
	}
	struct cm_logmem *mem = cm_logmem_new(opts.log_mem);
	if (mem == NULL) {
		cm_err("out of memory");
		cm_spill_store_close(spill);
		return 1;
	}
	opts.mem = mem;
	const char *journal_path = a.journal_path;
	if (a.journal_scratch && scratch_dir_make(journal_path) < 0) {
		cm_spill_store_close(spill);
		cm_logmem_free(mem);
		return 1;
	}
	if (journal_path && !a.standby) {
		char jwhy[256 + PATH_MAX];
		opts.journal =
		    cm_journal_open(journal_path, opts.cut_through_min, jwhy, sizeof jwhy);
		if (opts.journal == NULL) {
			cm_err("%s", jwhy);
			cm_spill_store_close(spill);
			cm_logmem_free(mem);
			return 1;
		}
		if (a.mirror_text && cm_journal_mirror(opts.journal, a.mirror_text, opts.secret,
		                                       opts.world_size, jwhy, sizeof jwhy) < 0) {
			cm_err("%s", jwhy);
			cm_journal_close(opts.journal);
			cm_spill_store_close(spill);
			cm_logmem_free(mem);
			return 1;
		}
	}

	struct cm_listeners ls = {.n = 0};
	char where[32 + CM_ADDR_TEXT_MAX];
	if (open_listeners(&a.addr, listen_text, a.no_unix, a.unix_text ? &a.unix_want : NULL, &ls,
	                   where, sizeof where) < 0)
		return 1;
	printf("cmserver: listening on %s\n", where);
	fflush(stdout);
	cm_info("mode %s (%u threads), max message %u bytes, log memory %llu bytes, "
	        "cut-through from %u bytes",
	        opts.mode, opts.threads, (unsigned)opts.max_message,
	        (unsigned long long)opts.log_mem, (unsigned)opts.cut_through_min);
	if (ready_fd >= 0) {
		char line[sizeof where + 1];
		int n = snprintf(line, sizeof line, "%s\n", where);
		if (cm_write_full((int)ready_fd, line, (size_t)n) < 0) {
			cm_err("--ready-fd %ld: %s", ready_fd, strerror(errno));
			cm_listeners_close(&ls, 0);
			return 1;
		}
		close((int)ready_fd);
	}
	if (report_fd >= 0 && (opts.monitor = cm_monitor_new((int)report_fd)) == NULL) {
		cm_err("out of memory");
		cm_listeners_close(&ls, 0);
		return 1;
	}
	if (a.standby) {
		enum cm_standby_end end = cm_standby_run(&ls, journal_path, opts.secret);
		if (end == CM_STANDBY_TAKE_OVER)
			cm_monitor_taking_over(opts.monitor);
		char jwhy[256 + PATH_MAX];
		if (end == CM_STANDBY_TAKE_OVER &&
		    (opts.journal = cm_journal_open(journal_path, opts.cut_through_min, jwhy,
		                                    sizeof jwhy)) == NULL)
			cm_err("%s", jwhy);
		if (opts.journal == NULL) {
			cm_listeners_close(&ls, 0);
			cm_spill_store_close(spill);
			cm_logmem_free(mem);
			cm_monitor_free(opts.monitor);
			if (end == CM_STANDBY_NOT_NEEDED && a.journal_scratch)
				scratch_remove(journal_path);
			return end == CM_STANDBY_NOT_NEEDED ? 0 : 1;
		}
	}
	int status = engine->run(&opts, &ls);
	/* The store drops its queue (the job is over) and releases those
	 * buffers into the log memory, which goes last. Closing its files
	 * frees their disk space, seconds for a long log: said first. */
	if (spill)
		cm_monitor_stopping(opts.monitor);
	cm_journal_close(opts.journal);
	cm_spill_store_close(spill);
	cm_logmem_log_summary(mem);
	cm_logmem_free(mem);
	cm_monitor_free(opts.monitor);
	if (status == 0 && a.journal_scratch)
		scratch_remove(journal_path);
	return status;
}
