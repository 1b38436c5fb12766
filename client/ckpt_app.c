/* Application checkpoints (chanmem.h, docs/checkpointing.md): the memory a
 * program registers plus the library's own counters, uploaded to the
 * checkpoint server as one image; on restart MPI_Init fetches the latest
 * image, hands the counters to the transport (which then resumes where the
 * image was taken instead of replaying from the start) and keeps the
 * program's bytes until chanmem_ckpt_restore puts them back.
 *
 * Image (little-endian): "CMCKPT01", u32 version, u32 region count,
 * u64 checkpoint number, u64 send clock, u64 next request id, u64 events,
 * u64 stdout bytes, u64 stderr bytes, (version 2:) u64 stdin bytes
 * consumed, u64 stdin bytes delivered to stdio (stdin_log.c), (version 3:)
 * u64 first push number not received, u64 length of the pushed messages
 * held (the transport's cm_resume.held), u32 frames counted by the outcome
 * log, u32 next non-blocking collective id, u32 non-blocking collectives
 * started on MPI_COMM_WORLD, u32 on MPI_COMM_SELF (mpi_nondet.c), then
 * u64 length of each region, the held messages' bytes, and the regions'
 * bytes. Images of versions 1 (no stdin position) and 2 (no pushed
 * messages) are still read. The checkpoint server checksums, compresses
 * and commits it atomically.
 *
 * Output. cmrun drops as many bytes of a re-executed rank's stdout (and
 * stderr) as the dead incarnation printed: a full re-execution prints them
 * again. A rank restored from an image does not print what came before the
 * image, so while checkpoints are on, stdout and stderr count the bytes
 * printed since MPI_Init (a counting stdio stream over the same
 * descriptor), the image keeps the counts, and a restored rank first writes
 * that many filler bytes, which cmrun drops in their place. Output written
 * with write(2) on descriptors 1 and 2 directly is not counted. */
#include "config.h"

#include "chanmem.h"
#include "ckpt_app.h"
#include "ckpt_client.h"
#include "heartbeat.h"
#include "jobenv.h"
#include "log.h"
#include "mpi_internal.h"
#include "net.h"
#include "protocol.h"
#include "stdin_log.h"
#include "units.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define IMAGE_MAGIC "CMCKPT01"
#define IMAGE_VERSION 3u
#define IMAGE_FIXED_V1 (8 + 4 + 4 + 6 * 8)
#define IMAGE_FIXED_V2 (IMAGE_FIXED_V1 + 2 * 8)
#define IMAGE_FIXED (IMAGE_FIXED_V2 + 2 * 8 + 4 * 4)
#define MAX_REGIONS 64
#define CKPT_TIMEOUT_MS 30000
#define JOB_ID_DEFAULT "chanmem"

struct region {
	void *addr;
	size_t len;
};

/* stdout or stderr, counted (see the top of this file). */
struct counted_fd {
	int fd;
	uint64_t bytes;
};

static struct {
	struct region regions[MAX_REGIONS];
	unsigned nregions;
	uint64_t number;    /* of the last image taken or restored */
	long long last_ms;  /* when it was taken (or the run started) */
	long long every_ms; /* CHANMEM_CKPT_EVERY; -1: checkpoints are off */
	/* The image MPI_Init restored, until chanmem_ckpt_restore. */
	uint8_t *restored;
	size_t restored_len;
	unsigned restored_regions;
	bool recovering;
	struct cm_resume resume;
	struct counted_fd out, err;
	bool counting;
	uint64_t out_at_image, err_at_image; /* the restored image's counts */
	uint64_t in_consumed, in_delivered;  /* ...and stdin position */
	size_t restored_fixed;               /* its header's size (by version) */
	size_t restored_held;                /* its held pushed messages' length */
} ck;

static ssize_t counted_write(void *cookie, const char *buf, size_t len)
{
	struct counted_fd *c = cookie;
	size_t done = 0;
	while (done < len) {
		ssize_t w = write(c->fd, buf + done, len - done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return done ? (ssize_t)done : -1;
		done += (size_t)w;
	}
	c->bytes += done;
	return (ssize_t)done;
}

/* Replaces stdout and stderr by counting streams over the same fds. */
static void count_output(void)
{
	cookie_io_functions_t io = {.write = counted_write};
	fflush(stdout);
	fflush(stderr);
	ck.out = (struct counted_fd){.fd = STDOUT_FILENO, .bytes = ck.out_at_image};
	ck.err = (struct counted_fd){.fd = STDERR_FILENO, .bytes = ck.err_at_image};
	FILE *o = fopencookie(&ck.out, "w", io), *e = fopencookie(&ck.err, "w", io);
	if (o == NULL || e == NULL) {
		if (o)
			fclose(o);
		if (e)
			fclose(e);
		return; /* uncounted: a restored rank's output may lose lines */
	}
	setvbuf(e, NULL, _IONBF, 0);
	stdout = o;
	stderr = e;
	ck.counting = true;
}

/* What the image's owner printed before it: cmrun drops this many bytes of
 * a re-execution's output in place of the lines it will not print again. */
static void write_filler(int fd, uint64_t n)
{
	char buf[4096];
	memset(buf, '\n', sizeof buf);
	while (n > 0) {
		size_t k = n < sizeof buf ? (size_t)n : sizeof buf;
		ssize_t w = write(fd, buf, k);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		n -= (uint64_t)w;
	}
}

static const char *job_id(void)
{
	const char *id = getenv(CM_ENV_JOB_ID);
	return id && *id ? id : JOB_ID_DEFAULT;
}

/* The checkpoint server of the job, or NULL: checkpoints are off. */
static const char *server(void)
{
	const char *s = getenv(CM_ENV_CKPT);
	return s && *s ? s : NULL;
}

static struct ckpt_client *connect_server(const struct cm_job *job)
{
	struct ckpt_client *c = ckpt_client_new(CKPT_TIMEOUT_MS);
	if (c == NULL) {
		cm_err("rank %d: checkpoint: out of memory", job->rank);
		return NULL;
	}
	if (ckpt_client_connect(c, server(), job->secret) != CKPT_OK) {
		cm_err("rank %d: checkpoint server %s: %s", job->rank, server(),
		       ckpt_client_error(c));
		ckpt_client_free(c);
		return NULL;
	}
	return c;
}

/* Checks the image and fills ck.resume; false (after saying why) if it is
 * not one of ours. */
static bool parse_image(int rank, const uint8_t *img, size_t len)
{
	uint32_t version = len >= IMAGE_FIXED_V1 ? cm_get_u32(img + 8) : 0;
	size_t fixed = version == 1 ? IMAGE_FIXED_V1 : version == 2 ? IMAGE_FIXED_V2 : IMAGE_FIXED;
	if (len < IMAGE_FIXED_V1 || memcmp(img, IMAGE_MAGIC, 8) != 0 || version < 1 ||
	    version > IMAGE_VERSION || len < fixed) {
		cm_err("rank %d: checkpoint image: not a chanmem image of version 1 to %u", rank,
		       IMAGE_VERSION);
		return false;
	}
	uint32_t n = cm_get_u32(img + 12);
	if (n > MAX_REGIONS || len < fixed + (size_t)n * 8) {
		cm_err("rank %d: checkpoint image: %u regions in %zu bytes", rank, (unsigned)n,
		       len);
		return false;
	}
	uint64_t held = version >= 3 ? cm_get_u64(img + 88) : 0;
	uint64_t total = fixed + (uint64_t)n * 8;
	for (uint32_t i = 0; i < n && total <= len; i++)
		total += cm_get_u64(img + fixed + 8 * i);
	if (held > len || total > len - held || total + held != len) {
		cm_err("rank %d: checkpoint image: regions add up to %llu bytes, image has %zu",
		       rank, (unsigned long long)total, len);
		return false;
	}
	ck.restored_regions = n;
	ck.restored_fixed = fixed;
	ck.number = cm_get_u64(img + 16);
	ck.resume.clock = cm_get_u64(img + 24);
	ck.resume.reqid = cm_get_u64(img + 32);
	ck.resume.events = cm_get_u64(img + 40);
	ck.out_at_image = cm_get_u64(img + 48);
	ck.err_at_image = cm_get_u64(img + 56);
	ck.in_consumed = version >= 2 ? cm_get_u64(img + 64) : 0;
	ck.in_delivered = version >= 2 ? cm_get_u64(img + 72) : 0;
	if (version >= 3) {
		ck.resume.pushes = cm_get_u64(img + 80);
		ck.resume.nd_frames = cm_get_u32(img + 96);
		ck.resume.nbc_next_id = cm_get_u32(img + 100);
		ck.resume.nbc_seq_world = cm_get_u32(img + 104);
		ck.resume.nbc_seq_self = cm_get_u32(img + 108);
	}
	ck.restored_held = (size_t)held;
	ck.resume.held = held ? img + fixed + (size_t)n * 8 : NULL;
	ck.resume.held_len = (size_t)held;
	return true;
}

void cm_ckpt_stdin_position(uint64_t *consumed, uint64_t *delivered)
{
	*consumed = ck.in_consumed;
	*delivered = ck.in_delivered;
}

int cm_ckpt_recover(struct cm_job *job)
{
	ck.last_ms = cm_now_ms();
	/* Read once here, not at every chanmem_checkpoint call. */
	ck.every_ms = -1;
	if (server() == NULL)
		return 0;
	const char *every = getenv(CM_ENV_CKPT_EVERY);
	uint64_t ns = 0;
	if (!every || !*every || cm_parse_duration(every, &ns) == 0)
		ck.every_ms = (long long)(ns / 1000000);
	/* else cmrun validated it; a hand-set bad value disables checkpoints */
	if (job->incarnation == 0) {
		count_output();
		return 0;
	}
	struct ckpt_client *c = connect_server(job);
	if (c == NULL)
		return -1;
	uint64_t number;
	void *img;
	size_t len;
	int rc = ckpt_fetch_latest_alloc(c, job_id(), (uint32_t)job->rank, &number, &img, &len);
	if (rc == CKPT_E_NOTFOUND) {
		ckpt_client_free(c);
		count_output();
		return 0; /* no image yet: re-execute from the start */
	}
	if (rc != CKPT_OK) {
		cm_err("rank %d: fetching its checkpoint from %s: %s", job->rank, server(),
		       ckpt_client_error(c));
		ckpt_client_free(c);
		return -1;
	}
	ckpt_client_free(c);
	if (!parse_image(job->rank, img, len)) {
		free(img);
		return -1;
	}
	ck.restored = img;
	ck.restored_len = len;
	ck.recovering = true;
	job->resume = &ck.resume;
	/* After what the re-execution printed before MPI_Init, as the dead
	 * incarnation did. */
	fflush(stdout);
	fflush(stderr);
	cm_control_restored(job->rank, job->incarnation, job->replica, number, ck.out_at_image,
	                    ck.err_at_image);
	write_filler(STDOUT_FILENO, ck.out_at_image);
	write_filler(STDERR_FILENO, ck.err_at_image);
	count_output();
	cm_info("rank %d: restored checkpoint %llu (%zu bytes)", job->rank,
	        (unsigned long long)number, len);
	return 0;
}

int chanmem_ckpt_register(void *addr, size_t len)
{
	if (addr == NULL || len == 0)
		return MPI_ERR_ARG;
	if (ck.nregions == MAX_REGIONS)
		return MPI_ERR_NO_MEM;
	ck.regions[ck.nregions++] = (struct region){addr, len};
	return MPI_SUCCESS;
}

int chanmem_ckpt_recovering(void)
{
	return ck.recovering && ck.restored != NULL;
}

int chanmem_ckpt_restore(void)
{
	if (ck.restored == NULL)
		return MPI_ERR_OTHER;
	if (ck.restored_regions != ck.nregions) {
		cm_err("checkpoint restore: the image has %u regions, %u are registered",
		       ck.restored_regions, ck.nregions);
		return MPI_ERR_ARG;
	}
	const uint8_t *sizes = ck.restored + ck.restored_fixed;
	const uint8_t *data = sizes + 8 * (size_t)ck.nregions + ck.restored_held;
	for (unsigned i = 0; i < ck.nregions; i++) {
		uint64_t len = cm_get_u64(sizes + 8 * i);
		if (len != ck.regions[i].len) {
			cm_err("checkpoint restore: region %u is %llu bytes in the image, %zu "
			       "registered",
			       i, (unsigned long long)len, ck.regions[i].len);
			return MPI_ERR_ARG;
		}
	}
	for (unsigned i = 0; i < ck.nregions; i++) {
		memcpy(ck.regions[i].addr, data, ck.regions[i].len);
		data += ck.regions[i].len;
	}
	free(ck.restored);
	ck.restored = NULL;
	return MPI_SUCCESS;
}

/* Due: checkpoints are on and CHANMEM_CKPT_EVERY has passed since the last
 * one (no interval: every call). */
static bool due(void)
{
	return ck.every_ms >= 0 && cm_now_ms() - ck.last_ms >= ck.every_ms;
}

static int upload(const struct cm_job *job, const struct cm_resume *state)
{
	size_t len = IMAGE_FIXED + 8 * (size_t)ck.nregions;
	uint8_t head[IMAGE_FIXED + 8 * MAX_REGIONS];
	memcpy(head, IMAGE_MAGIC, 8);
	cm_put_u32(head + 8, IMAGE_VERSION);
	cm_put_u32(head + 12, ck.nregions);
	cm_put_u64(head + 16, ck.number + 1);
	cm_put_u64(head + 24, state->clock);
	cm_put_u64(head + 32, state->reqid);
	cm_put_u64(head + 40, state->events);
	/* Everything printed before the image is out, and counted. */
	fflush(stdout);
	fflush(stderr);
	cm_put_u64(head + 48, ck.counting ? ck.out.bytes : 0);
	cm_put_u64(head + 56, ck.counting ? ck.err.bytes : 0);
	uint64_t in_consumed, in_delivered;
	cm_stdin_position(&in_consumed, &in_delivered);
	cm_put_u64(head + 64, in_consumed);
	cm_put_u64(head + 72, in_delivered);
	cm_put_u64(head + 80, state->pushes);
	cm_put_u64(head + 88, state->held_len);
	cm_put_u32(head + 96, state->nd_frames);
	cm_put_u32(head + 100, state->nbc_next_id);
	cm_put_u32(head + 104, state->nbc_seq_world);
	cm_put_u32(head + 108, state->nbc_seq_self);
	for (unsigned i = 0; i < ck.nregions; i++)
		cm_put_u64(head + IMAGE_FIXED + 8 * i, ck.regions[i].len);

	struct ckpt_client *c = connect_server(job);
	if (c == NULL)
		return MPI_ERR_OTHER;
	int rc = ckpt_upload_begin(c, job_id(), (uint32_t)job->rank, ck.number + 1);
	if (rc == CKPT_OK)
		rc = ckpt_upload_write(c, head, len);
	if (rc == CKPT_OK && state->held_len)
		rc = ckpt_upload_write(c, state->held, state->held_len);
	for (unsigned i = 0; rc == CKPT_OK && i < ck.nregions; i++)
		rc = ckpt_upload_write(c, ck.regions[i].addr, ck.regions[i].len);
	if (rc == CKPT_OK)
		rc = ckpt_upload_end(c);
	if (rc != CKPT_OK) {
		cm_err("rank %d: checkpoint %llu to %s: %s", job->rank,
		       (unsigned long long)ck.number + 1, server(), ckpt_client_error(c));
		ckpt_client_free(c);
		return MPI_ERR_OTHER;
	}
	ckpt_client_free(c);
	ck.number++;
	ck.last_ms = cm_now_ms();
	return MPI_SUCCESS;
}

int chanmem_checkpoint(int *taken)
{
	int ignored;
	if (taken == NULL)
		taken = &ignored;
	*taken = 0;
	if (!cm_mpi.initialized || cm_mpi.finalized)
		return MPI_ERR_OTHER;
	/* Only a transport that can resume from an image takes one (cm); the
	 * others restart nothing or replicate instead. */
	if (cm_mpi.transport.snapshot == NULL || !due())
		return MPI_SUCCESS;
	if (ck.restored) {
		cm_err("rank %d: chanmem_checkpoint before chanmem_ckpt_restore", cm_mpi.job.rank);
		return MPI_ERR_OTHER;
	}
	struct cm_resume state;
	int rc = cm_mpi.transport.snapshot(&cm_mpi.transport, &state);
	if (rc == 2)
		return MPI_SUCCESS; /* replaying inside a logged outcome: at a later call */
	if (rc != 0)
		return rc > 0 ? MPI_ERR_PENDING : MPI_ERR_OTHER;
	rc = upload(&cm_mpi.job, &state);
	if (rc != MPI_SUCCESS)
		return rc;
	*taken = 1;
	/* The image is committed: the home CM may drop what it consumed. */
	if (cm_mpi.transport.ckpt_committed)
		cm_mpi.transport.ckpt_committed(&cm_mpi.transport, &state);
	return MPI_SUCCESS;
}
