/* cmrun command line: parsing and validation. Every bad option is reported
 * with a clear message and exit status 2 before anything is started. */
#ifndef CMRUN_OPTIONS_H
#define CMRUN_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>

#define CMRUN_MAX_RANKS 4096
#define CMRUN_MAX_CMS 256
#define CMRUN_EXIT_USAGE 2

enum cmrun_transport {
	CMRUN_TRANSPORT_CM,
	CMRUN_TRANSPORT_DIRECT,
};

struct cmrun_options {
	int nranks;                     /* -n */
	int ncms;                       /* --cms (transport cm only) */
	const char *mode;               /* --mode, passed to cmserver */
	enum cmrun_transport transport; /* --transport */
	bool tag_output;                /* --tag-output */
	uint64_t timeout_ns;            /* --timeout, 0 = none */
	const char *timeout_text;       /* as the user wrote it, for the timeout message */
	uint64_t max_message;           /* --max-message, 0 = cmserver's default */
	int verbosity;                  /* --verbose, repeatable */
	char *const *program_argv;      /* PROGRAM ARGS..., NULL-terminated (points into argv) */
};

/* Parses argv. Exits 0 after --help, exits 2 with a message on any error. */
void cmrun_parse_options(int argc, char **argv, struct cmrun_options *opts);

const char *cmrun_transport_name(enum cmrun_transport t);

#endif
