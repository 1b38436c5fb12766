/* Hosts files and lists (hosts.h). */
#include <config.h>

#include "hosts.h"

#include <arpa/inet.h>
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

/* Attributes of a host line, one row each in attr_table. */
struct host_attrs {
	int slots;
	char addr[16];
	unsigned roles;
};

/* Adds a host; where says where it came from ("FILE:LINE" or "--host"). */
static int add_host(struct cmrun_hosts *h, const char *name, size_t len, const struct host_attrs *a,
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
	h->list[h->count].slots = a->slots;
	snprintf(h->list[h->count].addr, sizeof h->list[h->count].addr, "%s", a->addr);
	h->list[h->count].roles = a->roles;
	h->count++;
	if (a->roles & HOST_ROLE_RANK)
		h->total_slots += a->slots;
	if (h->total_slots > CMRUN_MAX_RANKS)
		h->total_slots = CMRUN_MAX_RANKS; /* enough for any job; no overflow */
	return 0;
}

#define HOSTS_STR_(x) #x
#define HOSTS_STR(x) HOSTS_STR_(x)

static int set_slots(struct host_attrs *a, const char *value)
{
	return parse_slots(value, &a->slots);
}

/* A dotted quad (no names: a host file must not depend on a resolver that
 * may differ between hosts), not 0.0.0.0 nor broadcast or multicast. */
static int set_addr(struct host_attrs *a, const char *value)
{
	struct in_addr in;
	if (strlen(value) >= sizeof a->addr || inet_pton(AF_INET, value, &in) != 1)
		return -1;
	uint32_t v = ntohl(in.s_addr);
	if (v == 0 || v == 0xffffffffu || (v >> 28) == 0xe)
		return -1;
	strcpy(a->addr, value);
	return 0;
}

static int set_roles(struct host_attrs *a, const char *value)
{
	unsigned roles = 0;
	const char *p = value;
	for (;;) {
		size_t len = strcspn(p, ",");
		unsigned role = len == 4 && strncmp(p, "rank", 4) == 0   ? HOST_ROLE_RANK
		                : len == 2 && strncmp(p, "cm", 2) == 0   ? HOST_ROLE_CM
		                : len == 4 && strncmp(p, "ckpt", 4) == 0 ? HOST_ROLE_CKPT
		                                                         : 0;
		if (role == 0 || (roles & role))
			return -1; /* unknown, empty or repeated */
		roles |= role;
		if (p[len] == '\0')
			break;
		p += len + 1;
	}
	a->roles = roles;
	return 0;
}

static const struct {
	const char *key;
	int (*set)(struct host_attrs *a, const char *value);
	const char *want; /* for the error message */
} attr_table[] = {
    {"slots", set_slots, "a number of ranks from 1 to " HOSTS_STR(CMRUN_MAX_RANKS)},
    {"addr", set_addr, "an IPv4 address such as 10.0.0.2 (no names)"},
    {"roles", set_roles, "a comma list of rank, cm and ckpt, each once, such as rank,cm"},
};

/* seen: the attributes this line already set (one bit per attr_table
 * row): a second one would silently win. */
static int parse_attr(struct host_attrs *a, unsigned *seen, char *word, const char *where,
                      char *err, size_t errlen)
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
		if (*seen & (1u << i)) {
			snprintf(err, errlen, "%s: %s= given twice", where, word);
			return -1;
		}
		*seen |= 1u << i;
		if (attr_table[i].set(a, eq + 1) < 0) {
			snprintf(err, errlen, "%s: %s='%s': want %s", where, word, eq + 1,
			         attr_table[i].want);
			return -1;
		}
		return 0;
	}
	snprintf(err, errlen, "%s: unknown attribute '%s' (known: slots, addr, roles)", where,
	         word);
	return -1;
}

/* A hosts file is a short list typed by people: reading it is bounded, so
 * that --hosts /dev/zero (or any endless stream) is refused, not read into
 * memory for ever. */
#define HOSTS_LINE_MAX 1024
#define HOSTS_LINES_MAX 100000

/* One line into buf (cap bytes), newline included, NUL-terminated: its
 * length (NUL bytes inside count), 0 at the end of the file, or cap - 1
 * for a line that does not fit (the rest is not read). */
static size_t read_line(FILE *f, char *buf, size_t cap)
{
	size_t n = 0;
	int c;
	while (n + 1 < cap && (c = getc(f)) != EOF) {
		buf[n++] = (char)c;
		if (c == '\n')
			break;
	}
	buf[n] = '\0';
	return n;
}

int hosts_parse_file(const char *path, struct cmrun_hosts *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof *out);
	FILE *f = fopen(path, "re");
	if (f == NULL) {
		snprintf(err, errlen, "--hosts %s: %s", path, strerror(errno));
		return -1;
	}
	char line[HOSTS_LINE_MAX + 2];
	size_t n;
	int lineno = 0, rc = 0;
	while (rc == 0 && (n = read_line(f, line, sizeof line)) > 0) {
		lineno++;
		char where[64 + 32];
		snprintf(where, sizeof where, "%.64s:%d", path, lineno);
		if (lineno > HOSTS_LINES_MAX) {
			snprintf(err, errlen, "--hosts %s: more than %d lines", path,
			         HOSTS_LINES_MAX);
			rc = -1;
			break;
		}
		if (n > HOSTS_LINE_MAX) {
			snprintf(err, errlen, "%s: a line longer than %d bytes", where,
			         HOSTS_LINE_MAX);
			rc = -1;
			break;
		}
		if (n != strlen(line)) {
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
		struct host_attrs attrs = {.slots = 1, .roles = HOST_ROLE_RANK};
		unsigned seen = 0;
		char *word;
		while (rc == 0 && (word = strtok_r(NULL, " \t\r\n", &save)) != NULL)
			rc = parse_attr(&attrs, &seen, word, where, err, errlen);
		if (rc == 0)
			rc = add_host(out, name, strlen(name), &attrs, where, err, errlen);
	}
	if (rc == 0 && ferror(f)) {
		snprintf(err, errlen, "--hosts %s: read error", path);
		rc = -1;
	}
	if (rc == 0 && out->count == 0) {
		snprintf(err, errlen, "--hosts %s: no host in the file", path);
		rc = -1;
	}
	if (rc == 0 && out->total_slots == 0) {
		snprintf(err, errlen, "--hosts %s: no host with role rank (roles=rank,...)", path);
		rc = -1;
	}
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
		struct host_attrs attrs = {.slots = 1, .roles = HOST_ROLE_RANK};
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
		attrs.slots = slots;
		if (add_host(out, p, name_len, &attrs, "--host", err, errlen) < 0) {
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

/* The n-th host with role `role` (n taken modulo their count), or -1. */
static int nth_with_role(const struct cmrun_hosts *h, unsigned role, int n)
{
	int count = 0;
	for (int i = 0; i < h->count; i++)
		count += (h->list[i].roles & role) != 0;
	if (count == 0)
		return -1;
	n %= count;
	for (int i = 0; i < h->count; i++)
		if ((h->list[i].roles & role) && n-- == 0)
			return i;
	return -1;
}

int hosts_place(struct cmrun_hosts *h, int nranks)
{
	free(h->rank_host);
	h->rank_host = calloc((size_t)(nranks ? nranks : 1), sizeof *h->rank_host);
	if (h->rank_host == NULL)
		return -1;
	h->nranks = nranks;
	int *used = calloc((size_t)h->count, sizeof *used);
	if (used == NULL)
		return -1;
	int cursor = 0;
	for (int rank = 0; rank < nranks; rank++) {
		int chosen = -1;
		/* By slot: the first rank host with a free slot. By host: the
		 * next one after the previous rank's that has one. */
		for (int k = 0; k < h->count && chosen < 0; k++) {
			int i = h->map_by == MAP_BY_HOST ? (cursor + k) % h->count : k;
			if ((h->list[i].roles & HOST_ROLE_RANK) && used[i] < h->list[i].slots)
				chosen = i;
		}
		if (chosen < 0)
			chosen = nth_with_role(h, HOST_ROLE_RANK, rank); /* more ranks than slots */
		used[chosen]++;
		cursor = chosen + 1;
		h->rank_host[rank] = chosen;
	}
	free(used);
	return 0;
}

int hosts_of_replica(const struct cmrun_hosts *h, int rank, int replica)
{
	int first = hosts_of_rank(h, rank);
	if (first < 0 || replica == 0)
		return first;
	/* replica k: k rank hosts further on */
	int nth = 0;
	for (int i = 0; i < first; i++)
		nth += (h->list[i].roles & HOST_ROLE_RANK) != 0;
	return nth_with_role(h, HOST_ROLE_RANK, nth + replica);
}

int hosts_of_rank(const struct cmrun_hosts *h, int rank)
{
	if (rank < 0 || rank >= h->nranks || h->rank_host == NULL)
		return -1;
	return h->rank_host[rank];
}

int hosts_of_cm(const struct cmrun_hosts *h, int cm)
{
	int i = nth_with_role(h, HOST_ROLE_CM, cm);
	return i >= 0 ? i : nth_with_role(h, HOST_ROLE_RANK, cm);
}

int hosts_of_standby(const struct cmrun_hosts *h, int cm)
{
	int home = hosts_of_cm(h, cm);
	unsigned role = nth_with_role(h, HOST_ROLE_CM, 0) >= 0 ? HOST_ROLE_CM : HOST_ROLE_RANK;
	for (int k = 1; k <= h->count; k++) {
		int i = nth_with_role(h, role, cm + k);
		if (i >= 0 && i != home)
			return i;
	}
	/* Every CM host is this one: a rank host then. */
	for (int k = 1; k <= h->count; k++) {
		int i = nth_with_role(h, HOST_ROLE_RANK, cm + k);
		if (i >= 0 && i != home)
			return i;
	}
	return home;
}

int hosts_of_ckpt(const struct cmrun_hosts *h)
{
	int i = nth_with_role(h, HOST_ROLE_CKPT, 0);
	return i >= 0 ? i : 0;
}

void hosts_roles_text(unsigned roles, char *buf, size_t len)
{
	snprintf(buf, len, "%s%s%s%s%s", roles & HOST_ROLE_RANK ? "rank" : "",
	         (roles & HOST_ROLE_RANK) && (roles & (HOST_ROLE_CM | HOST_ROLE_CKPT)) ? "," : "",
	         roles & HOST_ROLE_CM ? "cm" : "",
	         (roles & HOST_ROLE_CM) && (roles & HOST_ROLE_CKPT) ? "," : "",
	         roles & HOST_ROLE_CKPT ? "ckpt" : "");
}

void hosts_free(struct cmrun_hosts *h)
{
	for (int i = 0; i < h->count; i++)
		free(h->list[i].name);
	free(h->list);
	free(h->rank_host);
	memset(h, 0, sizeof *h);
}

void hosts_report_placement(const struct cmrun_hosts *h, int nranks)
{
	for (int i = 0; i < h->count; i++) {
		const struct cmrun_host *host = &h->list[i];
		const char *plural = host->slots == 1 ? "" : "s";
		char ranks[96] = "";
		size_t len = 0;
		int n = 0;
		for (int r = 0; r < nranks && r < h->nranks; r++) {
			if (h->rank_host[r] != i)
				continue;
			if (len < sizeof ranks - 16)
				len += (size_t)snprintf(ranks + len, sizeof ranks - len, "%s%d",
				                        n ? "," : "", r);
			else if (len < sizeof ranks - 4)
				len += (size_t)snprintf(ranks + len, sizeof ranks - len, "...");
			n++;
		}
		output_verbose("host %s (%d slot%s%s%s): %s%s", host->name, host->slots, plural,
		               host->addr[0] ? ", addr " : "", host->addr,
		               n == 0   ? "no rank"
		               : n == 1 ? "rank "
		                        : "ranks ",
		               ranks);
	}
}
