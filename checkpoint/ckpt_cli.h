/* ckptserver's command line: the option table, and the checks that need
 * no file descriptor or secret (ckpt_server.c does those). */
#ifndef CKPT_CLI_H
#define CKPT_CLI_H

#include <netinet/in.h>

#include "ckpt_store.h"
#include "cmdline.h"

struct ckpt_args {
	const char *listen_text, *secret_file;
	long ready_fd, keep, level;
	int verbosity;
	struct ckpt_store_opts store; /* dir, keep, level, max_image, reset_corrupt */
	bool reset_corrupt;
	bool list;              /* --list: print what DIR holds, serve nothing */
	const char *remove_job; /* --remove JOB: remove its images, serve nothing */
	struct sockaddr_in addr;
};

extern const struct cmdline_prog ckpt_cmdline;

/* Returns CMDLINE_OK, CMDLINE_ERROR (message in st->err) or what to show
 * instead of running. Never exits, allocates nothing. */
int ckpt_parse_args(int argc, char **argv, struct ckpt_args *a, struct cmdline_state *st);

#endif
