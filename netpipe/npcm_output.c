/* What NPcm prints: the banner, np.out (NetPIPE 3.x columns) and the progress lines. Only the
 * leader writes; the other ranks only send it their processor names. */
#include "npcm.h"
#ifdef CHANMEM /* defined by netpipe/Makefile.am: the banner names chanmem's transport */
#include <chanmem.h>
#endif

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAMES_SHOWN 4 /* distinct processor names the banner lists */

void send_processor_name(const struct bench *b)
{
	char name[MPI_MAX_PROCESSOR_NAME + 1] = "";
	int len = 0;
	MPI_Get_processor_name(name, &len);
	MPI_Send(name, MPI_MAX_PROCESSOR_NAME, MPI_BYTE, LEADER, TAG_NAME, MPI_COMM_WORLD);
}

/* Where the ranks run: "rank 0 on A, rank 1 on B" for one pair, the distinct names for more. */
static void print_hosts(const struct bench *b)
{
	static char names[NAMES_SHOWN][MPI_MAX_PROCESSOR_NAME + 1];
	char theirs[MPI_MAX_PROCESSOR_NAME + 1] = "";
	int len = 0, distinct = 1, beyond = 0;
	MPI_Get_processor_name(names[0], &len);
	for (int r = 1; r < b->nranks; r++) {
		MPI_Recv(theirs, MPI_MAX_PROCESSOR_NAME, MPI_BYTE,
		         b->src == MPI_ANY_SOURCE ? b->src : r, TAG_NAME, MPI_COMM_WORLD,
		         MPI_STATUS_IGNORE);
		theirs[MPI_MAX_PROCESSOR_NAME] = '\0';
		if (b->pairs == 1) {
			if (!b->opt.quiet)
				printf("NPcm: rank 0 on %s, rank 1 on %s\n", names[0], theirs);
			return;
		}
		int known = 0;
		for (int k = 0; k < distinct && !known; k++)
			known = strcmp(names[k], theirs) == 0;
		if (!known && distinct < NAMES_SHOWN)
			memcpy(names[distinct++], theirs, sizeof theirs);
		else if (!known)
			beyond = 1;
	}
	if (b->opt.quiet)
		return;
	printf("NPcm: %d ranks on %s", b->nranks, names[0]);
	for (int k = 1; k < distinct; k++)
		printf(", %s", names[k]);
	printf("%s\n", beyond ? ", ..." : "");
}

void print_banner(const struct bench *b, int sizes)
{
	const struct options *o = &b->opt;
	if (!o->quiet) {
		printf("NPcm: %s, %d sizes from %lld to %lld bytes (perturbation %lld), %d trial%s "
		       "of %g s per size\n",
		       o->streaming ? "streaming" : "ping-pong", sizes, o->lower, o->upper,
		       o->perturbation, o->trials, o->trials > 1 ? "s" : "", o->target);
		printf("NPcm: %s sends, %s receives%s%s, verification %s, output to %s\n",
		       o->synchronous ? "synchronous" : "standard",
		       o->async_recv ? "pre-posted" : "blocking",
		       o->any_source ? " from any source" : "",
		       o->reset ? ", barrier between trials" : "", o->verify ? "on" : "off",
		       o->output);
		if (b->pairs > 1)
			printf("NPcm: %d pairs (rank 2i transmits to rank 2i+1) run every size at "
			       "once; Mbps is their sum, the time their mean\n",
			       b->pairs);
	}
	print_hosts(b);
	if (o->quiet)
		return;
#ifdef CHANMEM
	const char *transport = "?";
	chanmem_transport_name(&transport);
	printf("NPcm: chanmem %s, transport %s\n", chanmem_version(), transport);
#endif
	printf("Now starting the main loop\n");
	fflush(stdout);
}

FILE *open_output(const struct bench *b)
{
	FILE *out = fopen(b->opt.output, "w");
	if (out == NULL) {
		fprintf(stderr, "NPcm: cannot write %s: %s\n", b->opt.output, strerror(errno));
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	return out;
}

/* np.out: NetPIPE's bytes, Mbps, one-way seconds; with several pairs the Mbps are the sum over
 * the pairs and the seconds their mean, followed by the slowest and the fastest pair's Mbps. */
void write_row(const struct bench *b, FILE *out, int n, long long size, long long nrepeat,
               const struct result *r)
{
	if (b->pairs == 1)
		fprintf(out, "%8lld %lf %12.8lf\n", size, r->aggregate, r->mean);
	else
		fprintf(out, "%8lld %lf %12.8lf %lf %lf\n", size, r->aggregate, r->mean, r->slowest,
		        r->fastest);
	fflush(out);
	if (b->opt.quiet)
		return;
	printf("%3d: %7lld bytes %6lld times --> %9.2f Mbps in %10.2f usec", n, size, nrepeat,
	       r->aggregate, r->mean * 1e6);
	if (b->pairs > 1)
		printf(" (pairs %.2f .. %.2f Mbps)", r->slowest, r->fastest);
	printf("\n");
	fflush(stdout);
}

void close_output(const struct bench *b, FILE *out)
{
	if (fclose(out) != 0) {
		fprintf(stderr, "NPcm: writing %s failed: %s\n", b->opt.output, strerror(errno));
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
}
