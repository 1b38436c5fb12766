/* ft_detect: a ring whose rank R, on its first incarnation, fails in a way
 * only cmrun's detection can see (the process does not die by itself):
 *
 *   ft_detect ITERATIONS
 *   FT_DETECT_RANK=R FT_DETECT_AT=I    rank R fails at iteration I ...
 *   FT_DETECT_HOW=cut                  ... by shutting down its sockets to the
 *                                      channel memories (cut off from the
 *                                      network), then waiting (bounded);
 *   FT_DETECT_HOW=stop                 ... by stopping itself (SIGSTOP), as a
 *                                      hung process: heartbeats stop too
 *   FT_DETECT_REPLICA=K                with --replicate: only replica K fails
 *   FT_SLEEP_MS=M                      sleep M ms per iteration
 *
 * Only a restart by cmrun lets the job finish with the failure-free output:
 * a cut rank left alone exits with status 3 after 20 s, a stopped one waits
 * for cmrun's --timeout. Every rank prints one line per iteration (running
 * checksum of what it received); run with --tag-output and a stable sort on
 * the tag, the output is the same with or without the failure. */
#include <arpa/inet.h>
#include <dirent.h>
#include <mpi.h>
#include <netinet/in.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static int rank, size;

static int env_int(const char *name, int dflt)
{
	const char *v = getenv(name);
	return v && *v ? atoi(v) : dflt;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) < 0)
		;
}

/* Is fd a connection to one of the CMs (CHANMEM_CMS "h:p,unix:@NAME,...":
 * TCP, or the abstract unix socket of a CM on this host)? */
static int is_cm_socket(int fd, const char *cms)
{
	struct stat st;
	union {
		struct sockaddr_in in;
		struct sockaddr_un un;
	} peer;
	socklen_t len = sizeof peer;
	if (fstat(fd, &st) < 0 || !S_ISSOCK(st.st_mode) ||
	    getpeername(fd, (struct sockaddr *)&peer, &len) < 0)
		return 0;
	char want[sizeof peer.un.sun_path + 8];
	size_t name_off = offsetof(struct sockaddr_un, sun_path) + 1; /* after the 0 */
	if (peer.in.sin_family == AF_UNIX && len > name_off)
		snprintf(want, sizeof want, "unix:@%.*s", (int)(len - name_off),
		         peer.un.sun_path + 1);
	else if (peer.in.sin_family == AF_INET)
		snprintf(want, sizeof want, ":%u", (unsigned)ntohs(peer.in.sin_port));
	else
		return 0;
	for (const char *p = strstr(cms, want); p; p = strstr(p + 1, want)) {
		char c = p[strlen(want)];
		if (c == '\0' || c == ',')
			return 1;
	}
	return 0;
}

/* The rank is cut off: every connection to a CM is shut down (the CM sees
 * it end without BYE), the process lives on. */
static void cut_cm_connections(void)
{
	const char *cms = getenv("CHANMEM_CMS");
	DIR *d = opendir("/proc/self/fd");
	int cut = 0;
	if (cms == NULL || d == NULL) {
		fprintf(stderr, "ft_detect: rank %d: no CHANMEM_CMS or /proc/self/fd\n", rank);
		exit(4);
	}
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		int fd = atoi(e->d_name);
		if (e->d_name[0] != '.' && fd != dirfd(d) && is_cm_socket(fd, cms)) {
			shutdown(fd, SHUT_RDWR);
			cut++;
		}
	}
	closedir(d);
	if (cut == 0) {
		fprintf(stderr, "ft_detect: rank %d: no connection to a CM found\n", rank);
		exit(4);
	}
	sleep_ms(20000);
	exit(3); /* nobody noticed */
}

static void maybe_fail(int iter, int at, int who, const char *how)
{
	if (rank != who || iter != at || env_int("CHANMEM_INCARNATION", 0) != 0 ||
	    env_int("CHANMEM_REPLICA", 0) != env_int("FT_DETECT_REPLICA", 0))
		return;
	fflush(stdout);
	if (strcmp(how, "cut") == 0)
		cut_cm_connections();
	else if (strcmp(how, "stop") == 0)
		raise(SIGSTOP);
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	int iters = argc > 1 ? atoi(argv[1]) : 30;
	int who = env_int("FT_DETECT_RANK", -1), at = env_int("FT_DETECT_AT", -1);
	int pause_ms = env_int("FT_SLEEP_MS", 0);
	const char *how = getenv("FT_DETECT_HOW") ? getenv("FT_DETECT_HOW") : "none";
	if (iters < 1 || iters > 100000) {
		if (rank == 0)
			fprintf(stderr, "usage: ft_detect ITERATIONS (1..100000)\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	int next = (rank + 1) % size, prev = (rank + size - 1) % size;
	uint64_t sum = 14695981039346656037ull;
	for (int it = 0; it < iters; it++) {
		maybe_fail(it, at, who, how);
		if (pause_ms > 0)
			sleep_ms(pause_ms);
		uint64_t out = (uint64_t)rank * 1000003u + (uint64_t)it * 7919u, in;
		MPI_Sendrecv(&out, 1, MPI_UINT64_T, next, it, &in, 1, MPI_UINT64_T, prev, it,
		             MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		if (in != (uint64_t)prev * 1000003u + (uint64_t)it * 7919u) {
			fprintf(stderr, "ft_detect: rank %d: FAIL: wrong value at iteration %d\n",
			        rank, it);
			MPI_Abort(MPI_COMM_WORLD, 3);
		}
		sum = (sum ^ in) * 0x100000001B3ull;
		printf("ring it %d sum %016llx\n", it, (unsigned long long)sum);
	}
	uint64_t total = 0;
	MPI_Reduce(&sum, &total, 1, MPI_UINT64_T, MPI_BXOR, 0, MPI_COMM_WORLD);
	if (rank == 0)
		printf("total %016llx\n", (unsigned long long)total);
	MPI_Finalize();
	return 0;
}
