/* Hosts: named groups of ranks (cmrun --hosts FILE, --host a,b:2). On one
 * machine a host is a label: every rank is a local process, and a host is
 * what --kill-host kills together. Ranks are placed by slots in order
 * (map-by slot): the first host's slots take ranks 0, 1, ..., then the next
 * host's. Later issues give hosts addresses and launch templates: a host
 * line is a name followed by KEY=VALUE attributes, parsed from one table. */
#ifndef CMRUN_HOSTS_H
#define CMRUN_HOSTS_H

#include <stddef.h>

#define CMRUN_MAX_HOSTS 4096
#define CMRUN_HOST_NAME_MAX 255

struct cmrun_host {
	char *name;
	int slots; /* ranks it takes (slots=N, default 1) */
};

struct cmrun_hosts {
	struct cmrun_host *list;
	int count;
	int total_slots;
};

/* Parses a hosts file: one host per line, "NAME [slots=N]"; '#' starts a
 * comment; blank lines are skipped. Returns 0, or -1 with "FILE:LINE:
 * what is wrong" (or why the file cannot be read) in err. */
int hosts_parse_file(const char *path, struct cmrun_hosts *out, char *err, size_t errlen);
/* The short form "a,b:2,c": NAME or NAME:SLOTS. Returns 0 or -1 with err. */
int hosts_parse_list(const char *text, struct cmrun_hosts *out, char *err, size_t errlen);
/* Index of the host called name, or -1. */
int hosts_find(const struct cmrun_hosts *h, const char *name);
/* Index of the host of rank: ranks are placed by slots in order (a rank's
 * replicas go with it); -1 past the last slot. */
int hosts_of_rank(const struct cmrun_hosts *h, int rank);
/* The host of replica `replica` of rank (--replicate): replica k goes k hosts
 * after its rank's, so the replicas of a rank are on different hosts when
 * there are enough of them. */
int hosts_of_replica(const struct cmrun_hosts *h, int rank, int replica);
/* -v: which ranks each host holds. */
void hosts_report_placement(const struct cmrun_hosts *h, int nranks);
void hosts_free(struct cmrun_hosts *h);

#endif
