/* Hosts files and lists (hosts.h). */
#include <config.h>

#include "hosts.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "options.h"
#include "output.h"
#include "units.h"

/* Letters, digits, '.', '-', '_': a host name or a label, nothing a shell,
 * a list separator (',', ':') or an attribute ('=') would misread. */
static bool valid_name(const char *s, size_t len)
{
	if (len == 0 || len > CMRUN_HOST_NAME_MAX)
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '-' || c == '_'))
			return false;
	}
	return true;
}

static int parse_slots(const char *text, int *out)
{
	long v;
	if (cm_parse_long(text, 1, CMRUN_MAX_RANKS, &v) < 0)
		return -1;
	*out = (int)v;
	return 0;
}

/* Adds a host; where says where it came from ("FILE:LINE" or "--host"). */
static int add_host(struct cmrun_hosts *h, const char *name, size_t len, int slots,
                    const char *where, char *err, size_t errlen)
{
	if (!valid_name(name, len)) {
		snprintf(err, errlen,
		         "%s: '%.*s' is not a host name (letters, digits, '.', '-', '_'; "
		         "at most %d characters)",
		         where, (int)(len > 64 ? 64 : len), name, CMRUN_HOST_NAME_MAX);
		return -1;
	}
	for (int i = 0; i < h->count; i++)
		if (strlen(h->list[i].name) == len && memcmp(h->list[i].name, name, len) == 0) {
			snprintf(err, errlen, "%s: host '%.*s' is listed twice", where, (int)len,
			         name);
			return -1;
		}
	if (h->count == CMRUN_MAX_HOSTS) {
		snprintf(err, errlen, "%s: more than %d hosts", where, CMRUN_MAX_HOSTS);
		return -1;
	}
	struct cmrun_host *grown = realloc(h->list, (size_t)(h->count + 1) * sizeof *grown);
	char *copy = strndup(name, len);
	if (grown)
		h->list = grown;
	if (grown == NULL || copy == NULL) {
		free(copy);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	h->list[h->count].name = copy;
	h->list[h->count].slots = slots;
	h->count++;
	h->total_slots += slots;
	if (h->total_slots > CMRUN_MAX_RANKS)
		h->total_slots = CMRUN_MAX_RANKS; /* enough for any job; no overflow */
	return 0;
}

#define HOSTS_STR_(x) #x
#define HOSTS_STR(x) HOSTS_STR_(x)

/* Attributes of a host line. Issue 8 adds addresses, roles, launch
 * templates: one row each. */
struct host_attrs {
	int slots;
};

static int set_slots(struct host_attrs *a, const char *value)
{
	return parse_slots(value, &a->slots);
}

static const struct {
	const char *key;
	int (*set)(struct host_attrs *a, const char *value);
	const char *want; /* for the error message */
} attr_table[] = {
    {"slots", set_slots, "a number of ranks from 1 to " HOSTS_STR(CMRUN_MAX_RANKS)},
};

static int parse_attr(struct host_attrs *a, char *word, const char *where, char *err, size_t errlen)
{
	char *eq = strchr(word, '=');
	if (eq == NULL) {
		snprintf(err, errlen, "%s: '%s' is not KEY=VALUE (e.g. slots=4)", where, word);
		return -1;
	}
	*eq = '\0';
	for (size_t i = 0; i < sizeof attr_table / sizeof attr_table[0]; i++) {
		if (strcmp(word, attr_table[i].key) != 0)
			continue;
		if (attr_table[i].set(a, eq + 1) < 0) {
			snprintf(err, errlen, "%s: %s='%s': want %s", where, word, eq + 1,
			         attr_table[i].want);
			return -1;
		}
		return 0;
	}
	snprintf(err, errlen, "%s: unknown attribute '%s' (known: slots)", where, word);
	return -1;
}

int hosts_parse_file(const char *path, struct cmrun_hosts *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof *out);
	FILE *f = fopen(path, "re");
	if (f == NULL) {
		snprintf(err, errlen, "--hosts %s: %s", path, strerror(errno));
		return -1;
	}
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int lineno = 0, rc = 0;
	while (rc == 0 && (n = getline(&line, &cap, f)) >= 0) {
		lineno++;
		char where[64 + 32];
		snprintf(where, sizeof where, "%.64s:%d", path, lineno);
		if ((size_t)n != strlen(line)) {
			snprintf(err, errlen, "%s: a NUL byte in the line", where);
			rc = -1;
			break;
		}
		char *hash = strchr(line, '#');
		if (hash)
			*hash = '\0';
		char *save = NULL;
		char *name = strtok_r(line, " \t\r\n", &save);
		if (name == NULL)
			continue; /* blank or comment */
		struct host_attrs attrs = {.slots = 1};
		char *word;
		while (rc == 0 && (word = strtok_r(NULL, " \t\r\n", &save)) != NULL)
			rc = parse_attr(&attrs, word, where, err, errlen);
		if (rc == 0)
			rc = add_host(out, name, strlen(name), attrs.slots, where, err, errlen);
	}
	if (rc == 0 && ferror(f)) {
		snprintf(err, errlen, "--hosts %s: read error", path);
		rc = -1;
	}
	if (rc == 0 && out->count == 0) {
		snprintf(err, errlen, "--hosts %s: no host in the file", path);
		rc = -1;
	}
	free(line);
	fclose(f);
	if (rc < 0)
		hosts_free(out);
	return rc;
}

int hosts_parse_list(const char *text, struct cmrun_hosts *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof *out);
	const char *p = text;
	for (;;) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		const char *colon = memchr(p, ':', len);
		size_t name_len = colon ? (size_t)(colon - p) : len;
		int slots = 1;
		if (colon) {
			char num[16];
			size_t nl = len - name_len - 1;
			if (nl == 0 || nl >= sizeof num) {
				snprintf(err, errlen, "--host: '%.*s': want NAME or NAME:SLOTS",
				         (int)(len > 64 ? 64 : len), p);
				hosts_free(out);
				return -1;
			}
			memcpy(num, colon + 1, nl);
			num[nl] = '\0';
			if (parse_slots(num, &slots) < 0) {
				snprintf(err, errlen,
				         "--host: '%.*s': slots must be a number from 1 to %d",
				         (int)len, p, CMRUN_MAX_RANKS);
				hosts_free(out);
				return -1;
			}
		}
		if (add_host(out, p, name_len, slots, "--host", err, errlen) < 0) {
			hosts_free(out);
			return -1;
		}
		if (end == NULL)
			return 0;
		p = end + 1;
	}
}

int hosts_find(const struct cmrun_hosts *h, const char *name)
{
	for (int i = 0; i < h->count; i++)
		if (strcmp(h->list[i].name, name) == 0)
			return i;
	return -1;
}

int hosts_of_replica(const struct cmrun_hosts *h, int rank, int replica)
{
	int first = hosts_of_rank(h, rank);
	return first < 0 || h->count == 0 ? first : (first + replica) % h->count;
}

int hosts_of_rank(const struct cmrun_hosts *h, int rank)
{
	int first = 0;
	for (int i = 0; i < h->count; i++) {
		if (rank < first + h->list[i].slots)
			return i;
		first += h->list[i].slots;
	}
	return -1; /* more ranks than slots: refused by option parsing */
}

void hosts_free(struct cmrun_hosts *h)
{
	for (int i = 0; i < h->count; i++)
		free(h->list[i].name);
	free(h->list);
	memset(h, 0, sizeof *h);
}

void hosts_report_placement(const struct cmrun_hosts *h, int nranks)
{
	int first = 0;
	for (int i = 0; i < h->count; i++) {
		const struct cmrun_host *host = &h->list[i];
		int n = first + host->slots > nranks ? nranks - first : host->slots;
		const char *plural = host->slots == 1 ? "" : "s";
		if (n <= 0)
			output_verbose("host %s (%d slot%s): no rank", host->name, host->slots,
			               plural);
		else if (n == 1)
			output_verbose("host %s (%d slot%s): rank %d", host->name, host->slots,
			               plural, first);
		else
			output_verbose("host %s (%d slot%s): ranks %d-%d", host->name, host->slots,
			               plural, first, first + n - 1);
		first += host->slots;
	}
}
