/* One message past 1 GiB, checked byte for byte.
 *
 * usage: bigmsg BYTES
 *
 * BYTES up to 2 GiB - 1 travel as MPI_BYTE; larger (a multiple of 4, up to
 * the limit) as MPI_INT, since a count is an int.
 *
 * Rank 0 first checks that a send past the largest message (4 GiB - 1
 * bytes: what a frame's length field holds) fails with MPI_ERR_COUNT and
 * an error string that names the limit, then sends BYTES bytes of
 * deterministic content to rank 1, which checks every byte, and answers
 * with the content's hash. Rank 0 prints the byte count and the hash.
 *
 *   BM_KILL=1   rank 1 raises SIGKILL once it has checked the message
 *               (first incarnation only): its restart gets the message
 *               again from the channel memory's log. */
#include <mpi.h>

#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define SEED 0x6269676d7367ULL
enum { TAG_DATA = 5, TAG_HASH = 6 };

static void check_over_limit(void)
{
	/* INT_MAX ints: 8 GiB, twice what one message may carry. Rejected
	 * before the buffer is read. */
	int small = 0, len = 0, cls = 0;
	char text[MPI_MAX_ERROR_STRING];
	TU_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
	int rc = MPI_Send(&small, INT_MAX, MPI_INT, 1, TAG_DATA, MPI_COMM_WORLD);
	TU_MPI(MPI_Error_class(rc, &cls));
	TU_CHECK(cls == MPI_ERR_COUNT, "an 8 GiB send returned %s, expected MPI_ERR_COUNT",
	         tu_err_name(rc));
	TU_MPI(MPI_Error_string(rc, text, &len));
	TU_CHECK(strstr(text, "4294967295") != NULL, "error string \"%s\" does not name the limit",
	         text);
	TU_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
}

int main(int argc, char **argv)
{
	tu_init(&argc, &argv, "bigmsg");
	tu_require_size(2, 2);
	long long want = argc > 1 ? atoll(argv[1]) : 0;
	TU_CHECK(want > 0 && want <= 4294967295LL && (want <= INT_MAX || want % 4 == 0),
	         "usage: bigmsg BYTES (1 .. 4294967295, past %d a multiple of 4)", INT_MAX);
	size_t bytes = (size_t)want;
	MPI_Datatype type = want <= INT_MAX ? MPI_BYTE : MPI_INT;
	int count = want <= INT_MAX ? (int)want : (int)(want / 4);
	unsigned char *buf = malloc(bytes);
	TU_CHECK(buf != NULL, "cannot allocate %zu bytes", bytes);
	if (tu_rank == 0) {
		check_over_limit();
		tu_fill(buf, bytes, SEED);
		uint64_t mine = tu_hash(TU_HASH_INIT, buf, bytes), theirs = 0;
		TU_MPI(MPI_Send(buf, count, type, 1, TAG_DATA, MPI_COMM_WORLD));
		TU_MPI(MPI_Recv(&theirs, 1, MPI_UINT64_T, 1, TAG_HASH, MPI_COMM_WORLD,
		                MPI_STATUS_IGNORE));
		TU_CHECK(theirs == mine, "rank 1 hashed %016llx, sent %016llx",
		         (unsigned long long)theirs, (unsigned long long)mine);
		printf("bigmsg: %zu bytes, hash %016llx\n", bytes, (unsigned long long)mine);
	} else {
		MPI_Status st;
		MPI_Count got = -1;
		memset(buf, 0, bytes);
		TU_MPI(MPI_Recv(buf, count, type, 0, TAG_DATA, MPI_COMM_WORLD, &st));
		TU_MPI(MPI_Get_elements_x(&st, MPI_BYTE, &got));
		TU_CHECK(got == (MPI_Count)bytes, "received %lld bytes, expected %zu",
		         (long long)got, bytes);
		long bad = tu_verify(buf, bytes, SEED);
		TU_CHECK(bad < 0, "byte %ld differs", bad);
		const char *kill = getenv("BM_KILL"), *inc = getenv("CHANMEM_INCARNATION");
		if (kill && strcmp(kill, "1") == 0 && (!inc || strcmp(inc, "0") == 0))
			raise(SIGKILL);
		uint64_t h = tu_hash(TU_HASH_INIT, buf, bytes);
		TU_MPI(MPI_Send(&h, 1, MPI_UINT64_T, 0, TAG_HASH, MPI_COMM_WORLD));
	}
	free(buf);
	return tu_finalize();
}
