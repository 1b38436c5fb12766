#include "config.h"

#include "ckpt_cli.h"

#include "ckpt_proto.h"
#include "jobenv.h"
#include "net.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <zstd.h>

#define DEFAULT_KEEP 2
#define MAX_KEEP 100000
#define DEFAULT_LEVEL 3
#define DEFAULT_MAX_IMAGE (64ull << 30)

static int set_dir(void *ctx, const struct cmdline_opt *o, const char *arg, char *err,
                   size_t errlen)
{
	((struct ckpt_args *)ctx)->store.dir = arg;
	return arg[0] == '\0' ? -1 : 0;
}

static int set_remove(void *ctx, const struct cmdline_opt *o, const char *arg, char *err,
                      size_t errlen)
{
	if (!ckpt_job_valid(arg, strlen(arg)))
		return -1;
	((struct ckpt_args *)ctx)->remove_job = arg;
	return 0;
}

#define AT(M, T) CMDLINE_AT(struct ckpt_args, M, T)
#define S CMDLINE_STR
/* Not const: the bounds of --level are zstd's, known at run time. */
static struct cmdline_opt ckpt_opts[] = {
    {.kind = CMDLINE_TEXT,
     .help = "Usage: ckptserver --dir DIR [OPTION]...\n"
             "       ckptserver --list --dir DIR\n"
             "       ckptserver --remove JOB --dir DIR\n"
             "The chanmem checkpoint server: stores rank images (zstd-compressed files\n"
             "indexed in LMDB) and serves the latest one of a rank on request.\n"
             "\n"
             "Options:\n"},
    {"dir", .kind = CMDLINE_CALL, .meta = "DIR", .set = set_dir,
     .bad = "--dir: empty directory name",
     .help = "directory of the images and the index (created if\n"
             "missing; one ckptserver per directory)"},
    {"listen", .kind = CMDLINE_STRING, .meta = "ADDR:PORT", .field = AT(listen_text, const char *),
     .help = "address to listen on (default 127.0.0.1:0; port 0 picks\n"
             "a free port). Prints 'ckptserver: listening on HOST:PORT'."},
    {"ready-fd", .kind = CMDLINE_LONG, .meta = "N", .field = AT(ready_fd, long), .lo = 0,
     .hi = INT_MAX, .bad = "--ready-fd '{}': not a file descriptor number",
     .help = "once listening, write \"HOST:PORT\\n\" to fd N and close it"},
    {"keep", .kind = CMDLINE_LONG, .meta = "K", .field = AT(keep, long), .lo = 1, .hi = MAX_KEEP,
     .bad = "--keep '{}': expected a whole number from 1 to {hi}",
     .help = "images kept per job and rank (default " S(DEFAULT_KEEP) ", 1..{hi})"},
    {"level", .kind = CMDLINE_LONG, .meta = "L", .field = AT(level, long),
     .bad = "--level '{}': expected a zstd level from {lo} to {hi}",
     .help = "zstd compression level (default " S(DEFAULT_LEVEL) ", {lo}..{hi})"},
    {"max-image", .kind = CMDLINE_SIZE, .meta = "BYTES", .field = AT(store.max_image, uint64_t),
     .ulo = 1, .uhi = UINT64_MAX,
     .bad = "--max-image '{}': not a size of at least 1 byte (examples: 65536, 64K, 4MiB, 1G)",
     .help = "largest image accepted (default 64GiB; units K, M, G,\n"
             "KiB, MiB, GiB)"},
    {"secret-file", .kind = CMDLINE_STRING, .meta = "FILE", .field = AT(secret_file, const char *),
     .help = "read the 32-character job secret from the first line of\n"
             "FILE; the environment variable " CM_ENV_SECRET " takes precedence"},
    {"reset-corrupt-store", .kind = CMDLINE_FLAG, .field = AT(reset_corrupt, bool),
     .help = "if the store in DIR is damaged, move it into\n"
             "DIR/corrupt-TIME-PID and start with an empty one\n"
             "(without it a damaged store is refused: exit 1)",
     .man = "A store is damaged when its index fails its checksum or LMDB's checks; without "
            "this option the server names the directory and the damage."},
    {"list", .kind = CMDLINE_FLAG, .field = AT(list, bool),
     .help = "print what DIR holds, one line per job and rank (its\n"
             "newest image: generation, size, time; images kept),\n"
             "and exit without serving"},
    {"remove", .kind = CMDLINE_CALL, .meta = "JOB", .set = set_remove,
     .bad = "--remove '{}': not a job id (1-" S(CKPT_JOB_MAX) " of A-Z a-z 0-9 . _ -)",
     .help = "remove every image of job JOB from DIR and exit\n"
             "without serving (exit 1 if DIR has none of JOB)"},
    {"verbose", 'v', .kind = CMDLINE_COUNT, .field = AT(verbosity, int),
     .help = "report commits and refusals; twice for debug output"},
    {"help", 'h', .kind = CMDLINE_HELP, .help = "show this help and exit"},
    {"version", .kind = CMDLINE_VERSION, .help = "show the version and exit"},
    {"help-man", .kind = CMDLINE_HELP_MAN},
    {.kind = CMDLINE_TEXT,
     .help = "\n"
             "SIGTERM or SIGINT stop it cleanly (exit 0) after any commit in progress;\n"
             "unfinished uploads are discarded. Exit status: 0 after a clean stop, 1 on a\n"
             "runtime failure, 2 on a usage error.\n"},
};
#undef S
#undef AT

const struct cmdline_prog ckpt_cmdline = {
    .name = "ckptserver",
    .version = "ckptserver (chanmem) " PACKAGE_VERSION,
    .opts = ckpt_opts,
    .nopts = sizeof ckpt_opts / sizeof ckpt_opts[0],
    .help_col = 23,
    .flags = CMDLINE_NO_OPERANDS,
};

int ckpt_parse_args(int argc, char **argv, struct ckpt_args *a, struct cmdline_state *st)
{
	for (size_t i = 0; i < sizeof ckpt_opts / sizeof ckpt_opts[0]; i++)
		if (ckpt_opts[i].name && strcmp(ckpt_opts[i].name, "level") == 0) {
			ckpt_opts[i].lo = ZSTD_minCLevel();
			ckpt_opts[i].hi = ZSTD_maxCLevel();
		}
	*a = (struct ckpt_args){.listen_text = "127.0.0.1:0",
	                        .ready_fd = -1,
	                        .keep = DEFAULT_KEEP,
	                        .level = DEFAULT_LEVEL,
	                        .store = {.max_image = DEFAULT_MAX_IMAGE}};
	int r = cmdline_parse(&ckpt_cmdline, argc, argv, a, st);
	if (r != CMDLINE_OK)
		return r;
	if (a->store.dir == NULL)
		return cmdline_fail(st, "--dir DIR is required (where the images are stored)");
	a->store.keep = (unsigned)a->keep;
	a->store.level = (int)a->level;
	a->store.reset_corrupt = a->reset_corrupt;
	if (a->list && a->remove_job)
		return cmdline_fail(st, "--list and --remove: one at a time");
	if (cm_parse_hostport(a->listen_text, 0, &a->addr) < 0)
		return cmdline_fail(st,
		                    "--listen '%s': expected ADDR:PORT (IPv4 address or localhost, "
		                    "port 0-65535)",
		                    a->listen_text);
	return CMDLINE_OK;
}
