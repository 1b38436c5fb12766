/* Command lines from tables: every program of the suite describes its
 * options as rows (names, the kind of value, where it goes, how a refused
 * value is reported, the help text), and the same rows drive the parser,
 * --help, --version and the OPTIONS section of the manual page. The parser
 * never prints and never exits: it returns, so that programs and the fuzz
 * target can run it alike. */
#ifndef CHANMEM_CMDLINE_H
#define CHANMEM_CMDLINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The exit status of a usage error, in every program. */
#define CM_EXIT_USAGE 2

enum cmdline_kind {
	CMDLINE_TEXT,      /* no option: a heading or paragraph of --help */
	CMDLINE_FLAG,      /* bool field set to true */
	CMDLINE_COUNT,     /* int field counted up at each use (-v -v) */
	CMDLINE_STRING,    /* const char * field pointing into argv */
	CMDLINE_LONG,      /* long field, cm_parse_long within [lo, hi] */
	CMDLINE_SIZE,      /* uint64_t field, cm_parse_size within [ulo, uhi] */
	CMDLINE_DURATION,  /* uint64_t field in ns, cm_parse_duration within [ulo, uhi] */
	CMDLINE_CHOICE,    /* int field: the index of the value in choices */
	CMDLINE_CALL,      /* set alone; takes a value */
	CMDLINE_CALL_FLAG, /* set alone; takes no value */
	CMDLINE_HELP,      /* the parse returns CMDLINE_SHOW_HELP */
	CMDLINE_VERSION,   /* the parse returns CMDLINE_SHOW_VERSION */
	CMDLINE_HELP_MAN,  /* the parse returns CMDLINE_SHOW_MAN (not in --help) */
};

/* One option. A value the conversion refuses, or set refuses without a
 * message of its own, is reported with bad: "{}" stands for the value,
 * "{lo}" and "{hi}" for the bounds (they also work in help). */
struct cmdline_opt {
	const char *name;  /* long name without "--"; NULL: short only */
	char short_name;   /* 0: none */
	const char *alias; /* another whole-word spelling ("-np"), or NULL */
	enum cmdline_kind kind;
	const char *meta; /* the value's name in the help ("N", "DIR") */
	size_t field;     /* CMDLINE_AT(...) into the context, for the plain kinds */
	long lo, hi;
	uint64_t ulo, uhi;
	const char *const *choices; /* CHOICE: the words taken, NULL-terminated */
	/* Called after the conversion (value in field), or instead of it for
	 * CALL: 0, or -1 with a message in err (empty: bad is used). */
	int (*set)(void *ctx, const struct cmdline_opt *o, const char *arg, char *err,
	           size_t errlen);
	const char *bad;
	const char *bad_range; /* a value that converts but is out of bounds (NULL: bad) */
	/* The --help text; its lines after the first go under the first.
	 * For TEXT rows, printed as it is. */
	const char *help;
	/* roff appended to the help text in the manual page, or for a TEXT
	 * row the page's own text for it (NULL: left out of the page). */
	const char *man;
};

/* A macro's value as a string, for help texts. */
#define CMDLINE_STR_(x) #x
#define CMDLINE_STR(x) CMDLINE_STR_(x)

/* offsetof(ST, M), refused at compile time unless M has type T. */
#define CMDLINE_AT(ST, M, T)                                                                       \
	(offsetof(ST, M) +                                                                         \
	 0 * sizeof(char[__builtin_types_compatible_p(__typeof__(((ST *)0)->M), T) ? 1 : -1]))

enum cmdline_flags {
	CMDLINE_STOP_AT_OPERAND = 1, /* the first operand ends the options (cmrun PROGRAM) */
	CMDLINE_NO_OPERANDS = 2,     /* an operand is an error ("unexpected argument") */
	CMDLINE_ALIGN_LONG = 4,      /* long-only options under the long names of the others */
	CMDLINE_LONG_OWN_LINE = 8,   /* help of a name wider than the column on the next line */
	CMDLINE_HELP_FIRST = 16,     /* --help / --version win wherever they are (before --) */
};

struct cmdline_prog {
	const char *name;    /* "cmrun": messages, the man page */
	const char *version; /* the --version line */
	const struct cmdline_opt *opts;
	size_t nopts;
	int help_col; /* where help texts start in --help */
	unsigned flags;
	/* The parser's own messages, "{}" the option or word concerned;
	 * NULL: "unknown option '{}'", "option '{}' needs a value",
	 * "unexpected argument '{}'". */
	const char *msg_unknown, *msg_needs_value, *msg_unexpected;
};

enum cmdline_result {
	CMDLINE_ERROR = -1,
	CMDLINE_OK = 0,
	CMDLINE_SHOW_HELP,
	CMDLINE_SHOW_VERSION,
	CMDLINE_SHOW_MAN,
};

struct cmdline_state {
	int optind;  /* after CMDLINE_OK: the first operand (argc: none) */
	bool *given; /* NULL, or one per row of the table: the options seen */
	char err[1024];
};

/* Parses argv[1..] into ctx. Returns a cmdline_result; with CMDLINE_ERROR
 * the message is in st->err. */
int cmdline_parse(const struct cmdline_prog *p, int argc, char **argv, void *ctx,
                  struct cmdline_state *st);

/* Whether the row of long name NAME was seen (st->given must be set). */
bool cmdline_given(const struct cmdline_prog *p, const struct cmdline_state *st, const char *name);

void cmdline_help(const struct cmdline_prog *p, FILE *out);
/* The OPTIONS section of the manual page, in roff. */
void cmdline_man(const struct cmdline_prog *p, FILE *out);

/* What a program does with a result other than CMDLINE_OK or
 * CMDLINE_ERROR: prints the help, version or roff on stdout and exits 0. */
void cmdline_show(const struct cmdline_prog *p, int result) __attribute__((noreturn));

/* A program's own check refusing the command line: the message (printf
 * style) into st->err; returns CMDLINE_ERROR. */
int cmdline_fail(struct cmdline_state *st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* What a program's main does with the result of its parse: returns on
 * CMDLINE_OK, reports a usage error (exit 2), or shows what was asked for
 * (exit 0). */
void cmdline_settle(const struct cmdline_prog *p, int result, const struct cmdline_state *st);

/* "PROG: error: MSG" and "Try 'PROG --help' ..." on stderr, exit 2. */
void cmdline_bad_usage(const char *prog, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 2, 3)));

/* Copies fmt into out, "{}" replaced by arg, "{lo}"/"{hi}" by o's bounds. */
void cmdline_expand(char *out, size_t len, const char *fmt, const struct cmdline_opt *o,
                    const char *arg);

#endif
