/* cmserver's command line: the option table, and the checks that need no
 * file descriptor or secret (main.c does those). */
#ifndef CMSERVER_CLI_H
#define CMSERVER_CLI_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>

#include "cmdline.h"
#include "net.h"

struct cmserver_args {
	int mode_index; /* --mode, in the engine names */
	const char *mode, *listen_text, *secret_file, *spill_dir;
	const char *threads_text;
	const char *unix_text;                /* --unix unix:@NAME, or NULL */
	const char *journal_path;             /* --journal FILE, or NULL */
	const char *mirror_text;              /* --mirror ADDR: the standby, or NULL */
	long ready_fd, report_fd, world_size; /* -1 / 0: not given */
	bool no_unix, no_spill, standby, journal_scratch;
	int verbosity;
	uint64_t max_message, log_mem, cut_through_min;
	/* Derived: */
	bool takes_threads; /* --mode multiplexer or specialized */
	unsigned threads;
	struct sockaddr_in addr;
	struct cm_addr unix_want; /* --unix */
};

extern const struct cmdline_prog cmserver_cmdline;

/* Returns CMDLINE_OK, CMDLINE_ERROR (message in st->err) or what to show
 * instead of running. Never exits, allocates nothing. */
int cmserver_parse_args(int argc, char **argv, struct cmserver_args *a, struct cmdline_state *st);

#endif
