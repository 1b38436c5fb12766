/* Unit tests of the table-driven command-line parser (common/cmdline.c):
 * the spellings getopt_long users expect, the messages of every refusal,
 * and the help and roff printed from the same rows. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "cmdline.h"

struct args {
	bool flag;
	int verbose, color;
	long n;
	uint64_t size, wait_ns;
	const char *name;
};

#define AT(M, T) CMDLINE_AT(struct args, M, T)
static const struct cmdline_opt rows[] = {
    {.kind = CMDLINE_TEXT, .help = "Usage: prog [OPTIONS]\n", .man = ".SS Main"},
    {"count", 'n', "-np", CMDLINE_LONG, "N", AT(n, long), 1, 99,
     .bad = "-n takes 1 to {hi}, not '{}'", .help = "how many (1..{hi})"},
    {"flag", 'f', .kind = CMDLINE_FLAG, .field = AT(flag, bool), .help = "a flag"},
    {"fill", .kind = CMDLINE_STRING, .meta = "NAME", .field = AT(name, const char *),
     .help = "first line\nsecond line"},
    {"size", .kind = CMDLINE_SIZE, .meta = "B", .field = AT(size, uint64_t), .ulo = 2, .uhi = 1024,
     .bad = "--size '{}': not a size", .bad_range = "--size {}: {lo} to {hi}", .help = "a size"},
    {"wait", .kind = CMDLINE_DURATION, .meta = "T", .field = AT(wait_ns, uint64_t),
     .uhi = UINT64_MAX, .help = "a duration"},
    {"color", .kind = CMDLINE_CHOICE, .meta = "C", .field = AT(color, int),
     .choices = (const char *const[]){"red", "green", NULL}, .bad = "--color: not '{}'",
     .help = "red or green"},
    {"a-very-long-option-name", .kind = CMDLINE_FLAG, .field = AT(flag, bool), .help = "long"},
    {"verbose", 'v', .kind = CMDLINE_COUNT, .field = AT(verbose, int), .help = "more"},
    {"help", 'h', .kind = CMDLINE_HELP, .help = "this help"},
    {"help-man", .kind = CMDLINE_HELP_MAN},
};
#undef AT

static struct cmdline_prog prog = {.name = "prog",
                                   .version = "prog 1",
                                   .opts = rows,
                                   .nopts = sizeof rows / sizeof rows[0],
                                   .help_col = 20,
                                   .flags = CMDLINE_ALIGN_LONG};

static struct args a;
static struct cmdline_state st;
static bool given[sizeof rows / sizeof rows[0]];

/* Parses the NULL-terminated words after "prog" with prog's flags. */
static int parse_words(unsigned flags, const char *const *words)
{
	char *argv[32] = {"prog"};
	int argc = 1;
	while (words[argc - 1])
		argv[argc] = (char *)words[argc - 1], argc++;
	prog.flags = flags;
	memset(&a, 0, sizeof a);
	memset(&st, 0, sizeof st);
	st.given = given;
	return cmdline_parse(&prog, argc, argv, &a, &st);
}
#define PARSE(flags, ...) parse_words(flags, (const char *const[]){__VA_ARGS__, NULL})

START_TEST(long_spellings)
{
	ck_assert_int_eq(PARSE(0, "--count", "5", "--fill=x", "--si=64", "--wait", "2s"),
	                 CMDLINE_OK);
	ck_assert_int_eq(a.n, 5);
	ck_assert_str_eq(a.name, "x");
	ck_assert_uint_eq(a.size, 64);
	ck_assert_uint_eq(a.wait_ns, 2000000000ull);
	ck_assert(cmdline_given(&prog, &st, "size") && !cmdline_given(&prog, &st, "flag"));
	/* "--f" could be --flag or --fill. */
	ck_assert_int_eq(PARSE(0, "--f"), CMDLINE_ERROR);
	ck_assert_str_eq(st.err, "unknown option '--f'");
	ck_assert_int_eq(PARSE(0, "--flag=1"), CMDLINE_ERROR);
	ck_assert_str_eq(st.err, "unknown option '--flag=1'");
	ck_assert_int_eq(PARSE(0, "--fill"), CMDLINE_ERROR);
	ck_assert_str_eq(st.err, "option '--fill' needs a value");
	/* The next word is the value, whatever it looks like. */
	ck_assert_int_eq(PARSE(0, "--fill", "--flag"), CMDLINE_OK);
	ck_assert_str_eq(a.name, "--flag");
	ck_assert(!a.flag);
}
END_TEST

START_TEST(short_spellings)
{
	ck_assert_int_eq(PARSE(0, "-vvfn7"), CMDLINE_OK);
	ck_assert_int_eq(a.verbose, 2);
	ck_assert(a.flag);
	ck_assert_int_eq(a.n, 7);
	ck_assert_int_eq(PARSE(0, "-np", "3"), CMDLINE_OK);
	ck_assert_int_eq(a.n, 3);
	ck_assert_int_eq(PARSE(0, "-np"), CMDLINE_ERROR);
	ck_assert_str_eq(st.err, "option '-np' needs a value");
	ck_assert_int_eq(PARSE(0, "-vn"), CMDLINE_ERROR);
	ck_assert_str_eq(st.err, "option '-n' needs a value");
	ck_assert_int_eq(PARSE(0, "-vx"), CMDLINE_ERROR);
	ck_assert_str_eq(st.err, "unknown option '-x'");
}
END_TEST

START_TEST(refused_values)
{
	ck_assert_int_eq(PARSE(0, "-n", "100"), CMDLINE_ERROR);
	ck_assert_str_eq(st.err, "-n takes 1 to 99, not '100'");
	ck_assert_int_eq(PARSE(0, "-n", " 5"), CMDLINE_ERROR);
	ck_assert_int_eq(PARSE(0, "--size", "1K"), CMDLINE_OK);
	ck_assert_int_eq(PARSE(0, "--size", "2K"), CMDLINE_ERROR);
	ck_assert_str_eq(st.err, "--size 2K: 2 to 1024");
	ck_assert_int_eq(PARSE(0, "--size", "lots"), CMDLINE_ERROR);
	ck_assert_str_eq(st.err, "--size 'lots': not a size");
	ck_assert_int_eq(PARSE(0, "--color", "green"), CMDLINE_OK);
	ck_assert_int_eq(a.color, 1);
	ck_assert_int_eq(PARSE(0, "--color", "blue"), CMDLINE_ERROR);
	ck_assert_str_eq(st.err, "--color: not 'blue'");
	/* No message of its own: still a message. */
	ck_assert_int_eq(PARSE(0, "--wait", "soon"), CMDLINE_ERROR);
	ck_assert_str_eq(st.err, "bad value 'soon'");
}
END_TEST

START_TEST(operands)
{
	ck_assert_int_eq(PARSE(CMDLINE_STOP_AT_OPERAND, "-f", "prog2", "-v"), CMDLINE_OK);
	ck_assert_int_eq(st.optind, 2);
	ck_assert_int_eq(a.verbose, 0);
	ck_assert_int_eq(PARSE(CMDLINE_STOP_AT_OPERAND, "-f", "--", "-v"), CMDLINE_OK);
	ck_assert_int_eq(st.optind, 3);
	/* Operands between options, as getopt permutes them. */
	ck_assert_int_eq(PARSE(0, "one", "-v", "two"), CMDLINE_OK);
	ck_assert_int_eq(a.verbose, 1);
	ck_assert_int_eq(st.optind, 1);
	ck_assert_int_eq(PARSE(CMDLINE_NO_OPERANDS, "-v", "extra", "-f"), CMDLINE_ERROR);
	ck_assert_str_eq(st.err, "unexpected argument 'extra'");
	ck_assert_int_eq(PARSE(CMDLINE_NO_OPERANDS, "-"), CMDLINE_ERROR);
}
END_TEST

START_TEST(help_requests)
{
	ck_assert_int_eq(PARSE(0, "-h", "--bogus"), CMDLINE_SHOW_HELP);
	ck_assert_int_eq(PARSE(0, "--bogus", "--help"), CMDLINE_ERROR);
	ck_assert_int_eq(PARSE(CMDLINE_HELP_FIRST, "--bogus", "--help"), CMDLINE_SHOW_HELP);
	ck_assert_int_eq(PARSE(CMDLINE_HELP_FIRST, "--", "--help"), CMDLINE_OK);
	ck_assert_int_eq(PARSE(0, "--help-man"), CMDLINE_SHOW_MAN);
}
END_TEST

static char *printed(void (*print)(const struct cmdline_prog *, FILE *), unsigned flags)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	ck_assert_ptr_nonnull(f);
	prog.flags = flags;
	print(&prog, f);
	fclose(f);
	return text;
}

START_TEST(help_layout)
{
	char *help = printed(cmdline_help, CMDLINE_ALIGN_LONG);
	ck_assert_str_eq(help, "Usage: prog [OPTIONS]\n"
	                       "  -n, -np, --count N  how many (1..99)\n"
	                       "  -f, --flag        a flag\n"
	                       "      --fill NAME   first line\n"
	                       "                    second line\n"
	                       "      --size B      a size\n"
	                       "      --wait T      a duration\n"
	                       "      --color C     red or green\n"
	                       "      --a-very-long-option-name  long\n"
	                       "  -v, --verbose     more\n"
	                       "  -h, --help        this help\n");
	free(help);
	help = printed(cmdline_help, CMDLINE_LONG_OWN_LINE);
	ck_assert_ptr_nonnull(
	    strstr(help, "  --a-very-long-option-name\n                    long\n"));
	free(help);
	char *man = printed(cmdline_man, 0);
	ck_assert_ptr_nonnull(
	    strstr(man, ".SS Main\n.TP\n.BI \\-n \", \" \\-np \", \" \\-\\-count \" N\"\n"
	                "how many (1..99).\n"));
	ck_assert_ptr_nonnull(strstr(man, ".TP\n.BR \\-f \", \" \\-\\-flag\na flag.\n"));
	ck_assert_ptr_nonnull(strstr(man, "first line second line.\n"));
	ck_assert_ptr_nonnull(
	    strstr(man, ".BR \\-h \", \" \\-\\-help\nPrint the options and exit.\n"));
	ck_assert_ptr_null(strstr(man, "help\\-man"));
	free(man);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cmdline");
	TCase *tc = tcase_create("parse");
	tcase_add_test(tc, long_spellings);
	tcase_add_test(tc, short_spellings);
	tcase_add_test(tc, refused_values);
	tcase_add_test(tc, operands);
	tcase_add_test(tc, help_requests);
	tcase_add_test(tc, help_layout);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
