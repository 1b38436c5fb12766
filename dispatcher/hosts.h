/* Hosts: named groups of ranks (cmrun --hosts FILE, --host a,b:2). A host
 * line is a name followed by KEY=VALUE attributes, parsed from one table:
 * slots=N (ranks it takes), addr=IPv4 (where its processes listen and are
 * reached; without one a host is a label on this machine) and roles=LIST
 * (rank, cm, ckpt: what runs there; default rank). Ranks go to the hosts
 * with role rank, by slot (the first host's slots take ranks 0, 1, ...,
 * then the next host's) or round robin by host (--map-by host). */
#ifndef CMRUN_HOSTS_H
#define CMRUN_HOSTS_H

#include <stddef.h>

#define CMRUN_MAX_HOSTS 4096
#define CMRUN_HOST_NAME_MAX 255

/* roles=LIST */
#define HOST_ROLE_RANK 1u
#define HOST_ROLE_CM 2u
#define HOST_ROLE_CKPT 4u

enum map_policy {
	MAP_BY_SLOT, /* fill each rank host's slots in turn (default) */
	MAP_BY_HOST, /* rank i to the i-th rank host, round robin within slots */
};

struct cmrun_host {
	char *name;
	int slots;      /* ranks it takes (slots=N, default 1) */
	char addr[16];  /* addr=IPv4, "" when none (a label on this machine) */
	unsigned roles; /* HOST_ROLE_* (default rank) */
};

struct cmrun_hosts {
	struct cmrun_host *list;
	int count;
	int total_slots; /* of the hosts with role rank */
	enum map_policy map_by;
	int *rank_host; /* after hosts_place: the host of every rank */
	int nranks;
};

/* Parses a hosts file: one host per line, "NAME [slots=N]"; '#' starts a
 * comment; blank lines are skipped. Returns 0, or -1 with "FILE:LINE:
 * what is wrong" (or why the file cannot be read) in err. */
int hosts_parse_file(const char *path, struct cmrun_hosts *out, char *err, size_t errlen);
/* The short form "a,b:2,c": NAME or NAME:SLOTS. Returns 0 or -1 with err. */
int hosts_parse_list(const char *text, struct cmrun_hosts *out, char *err, size_t errlen);
/* Index of the host called name, or -1. */
int hosts_find(const struct cmrun_hosts *h, const char *name);
/* Places nranks ranks by h->map_by over the hosts with role rank (the
 * slots must suffice). Returns 0, or -1 when out of memory. */
int hosts_place(struct cmrun_hosts *h, int nranks);
/* Index of the host of rank (after hosts_place); -1 past the last. */
int hosts_of_rank(const struct cmrun_hosts *h, int rank);
/* The host of channel memory cm of ncms: the hosts with role cm round
 * robin, else the rank hosts. */
int hosts_of_cm(const struct cmrun_hosts *h, int cm);
/* Where CM cm's standby runs (--cm-standby): the next CM host (rank host
 * when none has role cm) that is not CM cm's, or its own with one host. */
int hosts_of_standby(const struct cmrun_hosts *h, int cm);
/* The host of the checkpoint server: the first with role ckpt, else the
 * first host. */
int hosts_of_ckpt(const struct cmrun_hosts *h);
/* "rank,cm" for a roles mask. */
void hosts_roles_text(unsigned roles, char *buf, size_t len);
/* The host of replica `replica` of rank (--replicate): replica k goes k hosts
 * after its rank's, so the replicas of a rank are on different hosts when
 * there are enough of them. */
int hosts_of_replica(const struct cmrun_hosts *h, int rank, int replica);
/* -v: which ranks each host holds. */
void hosts_report_placement(const struct cmrun_hosts *h, int nranks);
void hosts_free(struct cmrun_hosts *h);

#endif
