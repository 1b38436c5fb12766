#include "cmdline.h"

#include <ctype.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "units.h"

static bool is_unsigned_kind(enum cmdline_kind k)
{
	return k == CMDLINE_SIZE || k == CMDLINE_DURATION;
}

void cmdline_expand(char *out, size_t len, const char *fmt, const struct cmdline_opt *o,
                    const char *arg)
{
	size_t n = 0;
	char num[32];
	for (const char *f = fmt; *f && n + 1 < len;) {
		const char *sub = NULL;
		size_t skip = 0;
		if (strncmp(f, "{}", 2) == 0) {
			sub = arg ? arg : "", skip = 2;
		} else if (o && (strncmp(f, "{lo}", 4) == 0 || strncmp(f, "{hi}", 4) == 0)) {
			bool hi = f[1] == 'h';
			if (is_unsigned_kind(o->kind))
				snprintf(num, sizeof num, "%llu",
				         (unsigned long long)(hi ? o->uhi : o->ulo));
			else
				snprintf(num, sizeof num, "%ld", hi ? o->hi : o->lo);
			sub = num, skip = 4;
		}
		if (sub == NULL) {
			out[n++] = *f++;
			continue;
		}
		for (; *sub && n + 1 < len; sub++)
			out[n++] = *sub;
		f += skip;
	}
	out[n] = '\0';
}

static void fail(struct cmdline_state *st, const char *fmt, const char *dflt,
                 const struct cmdline_opt *o, const char *arg)
{
	cmdline_expand(st->err, sizeof st->err, fmt ? fmt : dflt, o, arg);
}

/* Stores arg (NULL for the kinds without a value) as o says. */
static int apply(const struct cmdline_opt *o, const char *arg, void *ctx, struct cmdline_state *st)
{
	char *field = (char *)ctx + o->field;
	long l;
	uint64_t u;
	bool ok = true, in_range = true;
	switch (o->kind) {
	case CMDLINE_FLAG:
		*(bool *)field = true;
		break;
	case CMDLINE_COUNT:
		++*(int *)field;
		break;
	case CMDLINE_STRING:
		*(const char **)field = arg;
		break;
	case CMDLINE_LONG:
		ok = cm_parse_long(arg, LONG_MIN, LONG_MAX, &l) == 0;
		in_range = ok && l >= o->lo && l <= o->hi;
		if (in_range)
			*(long *)field = l;
		break;
	case CMDLINE_CHOICE:
		ok = false;
		for (int i = 0; o->choices[i]; i++)
			if (strcmp(arg, o->choices[i]) == 0) {
				*(int *)field = i;
				ok = true;
			}
		break;
	case CMDLINE_SIZE:
	case CMDLINE_DURATION:
		ok = (o->kind == CMDLINE_SIZE ? cm_parse_size(arg, &u)
		                              : cm_parse_duration(arg, &u)) == 0;
		in_range = ok && u >= o->ulo && u <= o->uhi;
		if (in_range)
			*(uint64_t *)field = u;
		break;
	default:
		break;
	}
	st->err[0] = '\0';
	if (ok && !in_range) {
		fail(st, o->bad_range ? o->bad_range : o->bad, "bad value '{}'", o, arg);
		return -1;
	}
	if (ok && o->set && o->set(ctx, o, arg, st->err, sizeof st->err) < 0)
		ok = false;
	if (!ok && st->err[0] == '\0')
		fail(st, o->bad, "bad value '{}'", o, arg);
	return ok ? 0 : -1;
}

/* The row of --NAME (an unambiguous prefix will do, as with getopt_long). */
static const struct cmdline_opt *find_long(const struct cmdline_prog *p, const char *name,
                                           size_t len)
{
	const struct cmdline_opt *found = NULL;
	int matches = 0;
	for (size_t i = 0; i < p->nopts; i++) {
		const char *n = p->opts[i].name;
		if (n == NULL || p->opts[i].kind == CMDLINE_TEXT || strncmp(n, name, len) != 0)
			continue;
		if (n[len] == '\0')
			return &p->opts[i];
		found = &p->opts[i];
		matches++;
	}
	return matches == 1 ? found : NULL;
}

static const struct cmdline_opt *find_short(const struct cmdline_prog *p, char c)
{
	for (size_t i = 0; i < p->nopts; i++)
		if (c != 0 && p->opts[i].short_name == c && p->opts[i].kind != CMDLINE_TEXT)
			return &p->opts[i];
	return NULL;
}

static const struct cmdline_opt *find_alias(const struct cmdline_prog *p, const char *word)
{
	for (size_t i = 0; i < p->nopts; i++)
		if (p->opts[i].alias && strcmp(p->opts[i].alias, word) == 0)
			return &p->opts[i];
	return NULL;
}

static bool takes_value(const struct cmdline_opt *o)
{
	switch (o->kind) {
	case CMDLINE_STRING:
	case CMDLINE_LONG:
	case CMDLINE_SIZE:
	case CMDLINE_DURATION:
	case CMDLINE_CHOICE:
	case CMDLINE_CALL:
		return true;
	default:
		return false;
	}
}

static int result_of(const struct cmdline_opt *o)
{
	return o->kind == CMDLINE_HELP       ? CMDLINE_SHOW_HELP
	       : o->kind == CMDLINE_VERSION  ? CMDLINE_SHOW_VERSION
	       : o->kind == CMDLINE_HELP_MAN ? CMDLINE_SHOW_MAN
	                                     : CMDLINE_OK;
}

/* One use of o; value: the text after '=' or the rest of a short bundle
 * (NULL: none, the next word is taken if o needs one). Returns a result
 * other than CMDLINE_OK to stop the parse there. */
static int use(const struct cmdline_prog *p, const struct cmdline_opt *o, const char *spelled,
               const char *value, int argc, char **argv, int *i, void *ctx,
               struct cmdline_state *st)
{
	if (st->given)
		st->given[o - p->opts] = true;
	if (!takes_value(o)) {
		if (value) {
			fail(st, p->msg_unknown, "unknown option '{}'", NULL, argv[*i]);
			return CMDLINE_ERROR;
		}
		int r = result_of(o);
		if (r != CMDLINE_OK)
			return r;
		return apply(o, NULL, ctx, st) < 0 ? CMDLINE_ERROR : CMDLINE_OK;
	}
	if (value == NULL) {
		if (*i + 1 >= argc) {
			fail(st, p->msg_needs_value, "option '{}' needs a value", NULL, spelled);
			return CMDLINE_ERROR;
		}
		value = argv[++*i];
	}
	return apply(o, value, ctx, st) < 0 ? CMDLINE_ERROR : CMDLINE_OK;
}

/* Every short option of the word "-abc"; the first that takes a value
 * takes the rest of the word, or the next word. */
static int short_bundle(const struct cmdline_prog *p, int argc, char **argv, int *i, void *ctx,
                        struct cmdline_state *st)
{
	const char *word = argv[*i];
	for (const char *c = word + 1; *c; c++) {
		char spelled[3] = {'-', *c, '\0'};
		const struct cmdline_opt *o = find_short(p, *c);
		if (o == NULL) {
			fail(st, p->msg_unknown, "unknown option '{}'", NULL, spelled);
			return CMDLINE_ERROR;
		}
		bool rest = takes_value(o) && c[1] != '\0';
		int r = use(p, o, spelled, rest ? c + 1 : NULL, argc, argv, i, ctx, st);
		if (r != CMDLINE_OK || takes_value(o))
			return r;
	}
	return CMDLINE_OK;
}

static int one_word(const struct cmdline_prog *p, int argc, char **argv, int *i, void *ctx,
                    struct cmdline_state *st)
{
	const char *word = argv[*i];
	const struct cmdline_opt *o = find_alias(p, word);
	if (o)
		return use(p, o, word, NULL, argc, argv, i, ctx, st);
	if (word[1] != '-')
		return short_bundle(p, argc, argv, i, ctx, st);
	const char *eq = strchr(word + 2, '=');
	size_t len = eq ? (size_t)(eq - word - 2) : strlen(word + 2);
	o = find_long(p, word + 2, len);
	if (o == NULL) {
		fail(st, p->msg_unknown, "unknown option '{}'", NULL, word);
		return CMDLINE_ERROR;
	}
	return use(p, o, word, eq ? eq + 1 : NULL, argc, argv, i, ctx, st);
}

static int help_first(const struct cmdline_prog *p, int argc, char **argv)
{
	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
		const struct cmdline_opt *o = strncmp(argv[i], "--", 2) == 0
		                                  ? find_long(p, argv[i] + 2, strlen(argv[i] + 2))
		                                  : NULL;
		/* Whole names only: "--he" is not taken for --help here. */
		if (o && strcmp(o->name, argv[i] + 2) == 0 && result_of(o) != CMDLINE_OK)
			return result_of(o);
	}
	return CMDLINE_OK;
}

int cmdline_parse(const struct cmdline_prog *p, int argc, char **argv, void *ctx,
                  struct cmdline_state *st)
{
	int first_operand = -1, i, r;
	st->err[0] = '\0';
	if (st->given)
		memset(st->given, 0, p->nopts * sizeof *st->given);
	if ((p->flags & CMDLINE_HELP_FIRST) && (r = help_first(p, argc, argv)) != CMDLINE_OK)
		return r;
	for (i = 1; i < argc; i++) {
		const char *word = argv[i];
		if (strcmp(word, "--") == 0) {
			i++;
			break;
		}
		if (word[0] != '-' || word[1] == '\0') {
			if (p->flags & CMDLINE_STOP_AT_OPERAND)
				break;
			if (first_operand < 0)
				first_operand = i;
			continue;
		}
		if ((r = one_word(p, argc, argv, &i, ctx, st)) != CMDLINE_OK)
			return r;
	}
	/* Operands between options count as if they came last (getopt's
	 * permutation): only the first one is of interest here. */
	st->optind = first_operand >= 0 ? first_operand : i;
	if ((p->flags & CMDLINE_NO_OPERANDS) && st->optind < argc) {
		fail(st, p->msg_unexpected, "unexpected argument '{}'", NULL, argv[st->optind]);
		return CMDLINE_ERROR;
	}
	return CMDLINE_OK;
}

bool cmdline_given(const struct cmdline_prog *p, const struct cmdline_state *st, const char *name)
{
	for (size_t i = 0; i < p->nopts; i++)
		if (p->opts[i].name && strcmp(p->opts[i].name, name) == 0)
			return st->given && st->given[i];
	return false;
}

/* "-n, -np, --np N": the names as --help shows them. */
static void names_of(const struct cmdline_prog *p, const struct cmdline_opt *o, char *out,
                     size_t len)
{
	size_t n = 0;
	bool align = (p->flags & CMDLINE_ALIGN_LONG) && o->short_name == 0 && o->alias == NULL;
	n += (size_t)snprintf(out + n, len - n, "%s", align ? "    " : "");
	if (o->short_name)
		n += (size_t)snprintf(out + n, len - n, "-%c%s", o->short_name,
		                      o->alias || o->name ? ", " : "");
	if (o->alias && n < len)
		n += (size_t)snprintf(out + n, len - n, "%s%s", o->alias, o->name ? ", " : "");
	if (o->name && n < len)
		n += (size_t)snprintf(out + n, len - n, "--%s", o->name);
	if (o->meta && n < len)
		snprintf(out + n, len - n, " %s", o->meta);
}

void cmdline_help(const struct cmdline_prog *p, FILE *out)
{
	char names[128], text[2048];
	for (size_t i = 0; i < p->nopts; i++) {
		const struct cmdline_opt *o = &p->opts[i];
		if (o->kind == CMDLINE_TEXT) {
			fputs(o->help, out);
			continue;
		}
		if (o->help == NULL)
			continue;
		names_of(p, o, names, sizeof names);
		int width = 2 + (int)strlen(names);
		fprintf(out, "  %s", names);
		if (width < p->help_col)
			fprintf(out, "%*s", p->help_col - width, "");
		else if (p->flags & CMDLINE_LONG_OWN_LINE)
			fprintf(out, "\n%*s", p->help_col, "");
		else
			fputs("  ", out);
		cmdline_expand(text, sizeof text, o->help, o, NULL);
		for (char *line = text, *nl; line; line = nl) {
			nl = strchr(line, '\n');
			if (nl)
				*nl++ = '\0';
			if (line != text)
				fprintf(out, "%*s", p->help_col, "");
			fprintf(out, "%s\n", line);
		}
	}
}

/* Help text as roff running text: one paragraph ending with a period;
 * its indented lines (a list, like cmserver's modes) each on a line of
 * their own. '-' and '\' are escaped, no line starts with a control
 * character. */
static void roff_text(FILE *out, const char *text)
{
	bool space = false, start = true;
	char last = 0;
	for (const char *c = text; *c; c++) {
		if (*c == '\n' && c[1] == ' ' && !start) {
			fputs("\n.br\n", out);
			start = true;
			space = false;
			continue;
		}
		if (isspace((unsigned char)*c)) {
			space = true;
			continue;
		}
		if (space && !start)
			fputc(' ', out);
		space = false;
		if (start && (*c == '.' || *c == '\''))
			fputs("\\&", out);
		if (*c == '-' || *c == '\\')
			fputc('\\', out);
		fputc(*c, out);
		last = *c;
		start = false;
	}
	fputs(last == '.' ? "\n" : ".\n", out);
}

static void roff_name(FILE *out, const char *s)
{
	for (; *s; s++) {
		if (*s == '-' || *s == '\\')
			fputc('\\', out);
		fputc(*s, out);
	}
}

void cmdline_man(const struct cmdline_prog *p, FILE *out)
{
	char text[2048];
	for (size_t i = 0; i < p->nopts; i++) {
		const struct cmdline_opt *o = &p->opts[i];
		if (o->kind == CMDLINE_TEXT) {
			if (o->man)
				fprintf(out, "%s\n", o->man);
			continue;
		}
		if (o->help == NULL)
			continue;
		/* .BI alternates bold names and italic metas; .BR bold names
		 * and roman separators. */
		fputs(".TP\n", out);
		fputs(o->meta                                  ? ".BI "
		      : (o->short_name || o->alias) && o->name ? ".BR "
		                                               : ".B ",
		      out);
		const char *sep = " \", \" ";
		bool first = true;
		if (o->short_name) {
			fprintf(out, "\\-%c", o->short_name);
			first = false;
		}
		if (o->alias) {
			fputs(first ? "" : sep, out);
			roff_name(out, o->alias);
			first = false;
		}
		if (o->name) {
			fputs(first ? "" : sep, out);
			fputs("\\-\\-", out);
			roff_name(out, o->name);
		}
		if (o->meta)
			fprintf(out, " \" %s\"", o->meta);
		fputc('\n', out);
		/* What these do is the same everywhere, whatever --help says. */
		if (o->kind == CMDLINE_HELP)
			fputs("Print the options and exit.\n", out);
		else if (o->kind == CMDLINE_VERSION)
			fputs("Print the version and exit.\n", out);
		else {
			cmdline_expand(text, sizeof text, o->help, o, NULL);
			roff_text(out, text);
		}
		if (o->man)
			fprintf(out, "%s\n", o->man);
	}
}

void cmdline_show(const struct cmdline_prog *p, int result)
{
	if (result == CMDLINE_SHOW_HELP)
		cmdline_help(p, stdout);
	else if (result == CMDLINE_SHOW_MAN)
		cmdline_man(p, stdout);
	else
		printf("%s\n", p->version);
	exit(fflush(stdout) == 0 ? 0 : 1);
}

int cmdline_fail(struct cmdline_state *st, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(st->err, sizeof st->err, fmt, ap);
	va_end(ap);
	return CMDLINE_ERROR;
}

void cmdline_settle(const struct cmdline_prog *p, int result, const struct cmdline_state *st)
{
	if (result == CMDLINE_ERROR)
		cmdline_bad_usage(p->name, "%s", st->err);
	if (result != CMDLINE_OK)
		cmdline_show(p, result);
}

void cmdline_bad_usage(const char *prog, const char *fmt, ...)
{
	va_list ap;
	char msg[1024];
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s: error: %s\nTry '%s --help' for more information.\n", prog, msg, prog);
	exit(CM_EXIT_USAGE);
}
