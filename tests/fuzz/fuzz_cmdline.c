/* libFuzzer target: the whole command lines of cmrun, cmserver, ckptserver
 * and NPcm (common/cmdline.c and each program's table and checks). The
 * input split at its NUL bytes is argv[1..]; every parser gets it. None may
 * crash, leak, print or exit, and what one accepts must hold its bounds. */
#include "config.h"

#include "ckpt_cli.h"
#include "cli.h"
#include "engine.h"
#include "npcm.h"
#include "options.h"

#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* hosts.c reports placements through cmrun's output; nothing to say here. */
void output_verbose(const char *fmt, ...)
{
	(void)fmt;
}

/* Linked with --wrap=getaddrinfo: --launch ssh resolves host names, which
 * must not reach a name server a million times. No name resolves. */
int __wrap_getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                       struct addrinfo **res);
int __wrap_getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                       struct addrinfo **res)
{
	(void)node, (void)service, (void)hints;
	*res = NULL;
	return EAI_NONAME;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	/* "--hosts /dev/stdin" must not wait for a terminal. */
	if (freopen("/dev/null", "r", stdin) == NULL)
		abort();
	/* The help and roff printers once, for the sanitizers. */
	FILE *null = fopen("/dev/null", "w");
	if (null == NULL)
		abort();
	const struct cmdline_prog *progs[] = {&cmrun_cmdline, &cmserver_cmdline, &ckpt_cmdline,
	                                      &npcm_cmdline};
	for (size_t i = 0; i < sizeof progs / sizeof progs[0]; i++) {
		cmdline_help(progs[i], null);
		cmdline_man(progs[i], null);
	}
	fclose(null);
	return 0;
}

static void check_result(int r, const struct cmdline_state *st)
{
	if (r < CMDLINE_ERROR || r > CMDLINE_SHOW_MAN)
		abort();
	/* An error always says what is wrong. */
	if (r == CMDLINE_ERROR && st->err[0] == '\0')
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 4096)
		return 0;
	char *text = malloc(size + 1);
	char **argv = malloc((size + 2) * sizeof *argv);
	if (text == NULL || argv == NULL)
		abort();
	memcpy(text, data, size);
	text[size] = '\0';
	int argc = 0;
	argv[argc++] = "prog";
	for (size_t at = 0; at < size; at += strlen(text + at) + 1)
		argv[argc++] = text + at;
	argv[argc] = NULL;

	struct cmdline_state st = {0};
	struct cmrun_options run;
	int r = cmrun_parse_options(argc, argv, &run, &st);
	check_result(r, &st);
	if (r == CMDLINE_OK && (run.nranks < 1 || run.nranks > CMRUN_MAX_RANKS || run.ncms < 1 ||
	                        run.ncms > CMRUN_MAX_CMS || run.program_argv < argv + 1 ||
	                        run.program_argv >= argv + argc || run.hosts.count < 1))
		abort();
	cmrun_options_free(&run);

	struct cmserver_args cm;
	r = cmserver_parse_args(argc, argv, &cm, &st);
	check_result(r, &st);
	if (r == CMDLINE_OK && (cm.threads < CM_THREADS_MIN || cm.threads > CM_THREADS_MAX ||
	                        cm.max_message > UINT32_MAX || cm.cut_through_min > UINT32_MAX))
		abort();

	struct ckpt_args ck;
	r = ckpt_parse_args(argc, argv, &ck, &st);
	check_result(r, &st);
	if (r == CMDLINE_OK &&
	    (ck.store.dir == NULL || ck.store.keep < 1 || ck.store.max_image < 1))
		abort();

	struct options np;
	char err[1024];
	r = parse_options_quietly(argc, argv, &np, err, sizeof err);
	if (r == CMDLINE_OK && (np.lower < 0 || np.lower > np.upper || np.upper > MAX_UPPER ||
	                        np.trials < 1 || np.trials > MAX_TRIALS || !(np.target > 0)))
		abort();

	free(argv);
	free(text);
	return 0;
}
