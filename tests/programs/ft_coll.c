/* ft_coll: collectives on two communicators, meant to be killed at random
 * (cmrun --kill-every, --kill-cm-every), with or without checkpoints.
 *
 *   ft_coll ITERS SIZE [ckpt]
 *   ft_coll flood COUNT SIZE SLEEP_MS
 *
 * Each iteration runs, on MPI_COMM_WORLD and on a communicator split from
 * it (even and odd ranks, in reverse rank order): MPI_Bcast from a root that
 * rotates with the iteration, MPI_Reduce, MPI_Allreduce (SUM, BXOR or MAX on
 * SIZE/8 64-bit words, by iteration), MPI_Allgather, MPI_Alltoall,
 * MPI_Gather and MPI_Scatter (SIZE bytes a block), then MPI_Ibcast and
 * MPI_Iallreduce on both communicators at once, completed by one
 * MPI_Waitall; then, every fourth iteration, on an inter-communicator
 * between the two halves, MPI_Bcast, MPI_Allreduce, MPI_Alltoall,
 * MPI_Ibcast and MPI_Iallreduce.
 * What a rank contributes is derived from the iteration, its
 * rank and its checksum so far; every byte it receives is folded into that
 * checksum, and it prints "rank R it I sum HEX" once per iteration: the
 * same lines whatever was killed, replayed or restored.
 *
 * With `ckpt` the iteration and the checksum are registered with
 * chanmem_ckpt_register and chanmem_checkpoint is called at the end of
 * every iteration, once the split and inter-communicators are freed (only
 * MPI_COMM_WORLD is in use across a checkpoint); a restored rank resumes
 * at the iteration after its image, and replays the steps of its
 * non-blocking collectives from there (the image holds the world's count
 * of them, which picks their tags, the engine's collective ids and the
 * frame count the logged steps name).
 *
 * `flood`: rank 0 runs COUNT MPI_Bcast of SIZE bytes back to back while
 * the other ranks sleep SLEEP_MS before they join; each checks every byte
 * it receives and prints "rank R flood COUNT sum HEX". Under the cm
 * transport the receivers' home CM pushes the broadcasts to them without
 * a request, and only a window of them ahead of what they consumed: a
 * sleeping rank's memory stays bounded (integration/ft_coll.sh samples it).
 */
#include <chanmem.h>

#include "testutil.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define USAGE "ITERS SIZE [ckpt] | flood COUNT SIZE SLEEP_MS"

struct state {
	int64_t it;
	uint64_t sum;
};

static struct state st;

static uint64_t seed_of(int64_t it, int op, int comm)
{
	uint64_t s = tu_hash_u64(st.sum, (uint64_t)it);
	s = tu_hash_u64(s, ((uint64_t)tu_rank << 16) | ((uint64_t)comm << 8) | (uint64_t)op);
	return s;
}

static void fold(const void *buf, size_t len)
{
	st.sum = tu_hash(st.sum, buf, len);
}

static MPI_Op op_of(int64_t it)
{
	switch (it % 3) {
	case 0:
		return MPI_SUM;
	case 1:
		return MPI_BXOR;
	default:
		return MPI_MAX;
	}
}

struct bufs {
	size_t size;          /* bytes a block */
	unsigned char *send;  /* P blocks */
	unsigned char *recv;  /* P blocks */
	unsigned char *nb[4]; /* the non-blocking collectives' buffers */
};

/* The blocking collectives of one iteration on comm (index ci). */
static void blocking(MPI_Comm comm, int ci, int64_t it, struct bufs *b)
{
	int P, r;
	TU_MPI(MPI_Comm_size(comm, &P));
	TU_MPI(MPI_Comm_rank(comm, &r));
	size_t n = b->size, words = n / 8;
	int root;

	/* Bcast */
	root = (int)(it % P);
	if (r == root)
		tu_fill(b->recv, n, seed_of(it, 1, ci));
	TU_MPI(MPI_Bcast(b->recv, (int)n, MPI_BYTE, root, comm));
	fold(b->recv, n);

	/* Reduce */
	root = (int)((it + 1) % P);
	tu_fill(b->send, words * 8, seed_of(it, 2, ci));
	TU_MPI(MPI_Reduce(b->send, b->recv, (int)words, MPI_UINT64_T, op_of(it), root, comm));
	if (r == root)
		fold(b->recv, words * 8);

	/* Allreduce */
	tu_fill(b->send, words * 8, seed_of(it, 3, ci));
	TU_MPI(MPI_Allreduce(b->send, b->recv, (int)words, MPI_UINT64_T, op_of(it + 1), comm));
	fold(b->recv, words * 8);

	/* Allgather */
	tu_fill(b->send, n, seed_of(it, 4, ci));
	TU_MPI(MPI_Allgather(b->send, (int)n, MPI_BYTE, b->recv, (int)n, MPI_BYTE, comm));
	fold(b->recv, n * (size_t)P);

	/* Alltoall */
	tu_fill(b->send, n * (size_t)P, seed_of(it, 5, ci));
	TU_MPI(MPI_Alltoall(b->send, (int)n, MPI_BYTE, b->recv, (int)n, MPI_BYTE, comm));
	fold(b->recv, n * (size_t)P);

	/* Gather */
	root = (int)((it + 2) % P);
	tu_fill(b->send, n, seed_of(it, 6, ci));
	TU_MPI(MPI_Gather(b->send, (int)n, MPI_BYTE, b->recv, (int)n, MPI_BYTE, root, comm));
	if (r == root)
		fold(b->recv, n * (size_t)P);

	/* Scatter */
	root = (int)((it + 3) % P);
	if (r == root)
		tu_fill(b->send, n * (size_t)P, seed_of(it, 7, ci));
	TU_MPI(MPI_Scatter(b->send, (int)n, MPI_BYTE, b->recv, (int)n, MPI_BYTE, root, comm));
	fold(b->recv, n);
}

/* MPI_Ibcast and MPI_Iallreduce on both communicators, one MPI_Waitall. */
static void nonblocking(MPI_Comm world, MPI_Comm sub, int64_t it, struct bufs *b)
{
	MPI_Comm comms[2] = {world, sub};
	MPI_Request req[4];
	size_t n = b->size, words = n / 8;
	for (int ci = 0; ci < 2; ci++) {
		int P, r;
		TU_MPI(MPI_Comm_size(comms[ci], &P));
		TU_MPI(MPI_Comm_rank(comms[ci], &r));
		int root = (int)((it + 1 + ci) % P);
		unsigned char *bc = b->nb[2 * ci], *ar = b->nb[2 * ci + 1];
		if (r == root)
			tu_fill(bc, n, seed_of(it, 8, ci));
		TU_MPI(MPI_Ibcast(bc, (int)n, MPI_BYTE, root, comms[ci], &req[2 * ci]));
		tu_fill(b->send + (size_t)ci * n, words * 8, seed_of(it, 9, ci));
		TU_MPI(MPI_Iallreduce(b->send + (size_t)ci * n, ar, (int)words, MPI_UINT64_T,
		                      op_of(it + 2 + ci), comms[ci], &req[2 * ci + 1]));
	}
	TU_MPI(MPI_Waitall(4, req, MPI_STATUSES_IGNORE));
	for (int i = 0; i < 4; i++)
		fold(b->nb[i], i % 2 ? words * 8 : n);
}

/* An inter-communicator between the two halves of the split (each
 * half's leader is its highest world rank): MPI_Bcast from a root of each
 * group in turn, MPI_Allreduce, MPI_Alltoall, then MPI_Ibcast and
 * MPI_Iallreduce pending at once. */
static void inter(MPI_Comm sub, int64_t it, struct bufs *b)
{
	int other = tu_size - 1;
	if (other % 2 == tu_rank % 2)
		other--;
	MPI_Comm ic;
	int r, L, R;
	TU_MPI(MPI_Intercomm_create(sub, 0, MPI_COMM_WORLD, other, 40, &ic));
	TU_MPI(MPI_Comm_rank(ic, &r));
	TU_MPI(MPI_Comm_size(ic, &L));
	TU_MPI(MPI_Comm_remote_size(ic, &R));
	size_t n = b->size, words = n / 8;

	/* Bcast: the root's group alternates, the root rotates in it. */
	int in_root_group = tu_rank % 2 == (int)(it % 2);
	int j = (int)((it / 2) % (in_root_group ? L : R));
	int root = in_root_group ? (r == j ? MPI_ROOT : MPI_PROC_NULL) : j;
	if (root == MPI_ROOT)
		tu_fill(b->recv, n, seed_of(it, 10, 2));
	TU_MPI(MPI_Bcast(b->recv, (int)n, MPI_BYTE, root, ic));
	if (!in_root_group)
		fold(b->recv, n);

	/* Allreduce: each group gets the other's reduction. */
	tu_fill(b->send, words * 8, seed_of(it, 11, 2));
	TU_MPI(MPI_Allreduce(b->send, b->recv, (int)words, MPI_UINT64_T, op_of(it), ic));
	fold(b->recv, words * 8);

	/* Alltoall: a block to and from every process of the other group. */
	tu_fill(b->send, n * (size_t)R, seed_of(it, 12, 2));
	TU_MPI(MPI_Alltoall(b->send, (int)n, MPI_BYTE, b->recv, (int)n, MPI_BYTE, ic));
	fold(b->recv, n * (size_t)R);

	/* Ibcast from the other root group's rank 0, with an Iallreduce. */
	MPI_Request req[2];
	root = !in_root_group ? (r == 0 ? MPI_ROOT : MPI_PROC_NULL) : 0;
	if (root == MPI_ROOT)
		tu_fill(b->nb[0], n, seed_of(it, 13, 2));
	TU_MPI(MPI_Ibcast(b->nb[0], (int)n, MPI_BYTE, root, ic, &req[0]));
	tu_fill(b->send, words * 8, seed_of(it, 14, 2));
	TU_MPI(MPI_Iallreduce(b->send, b->nb[1], (int)words, MPI_UINT64_T, op_of(it + 1), ic,
	                      &req[1]));
	TU_MPI(MPI_Waitall(2, req, MPI_STATUSES_IGNORE));
	if (in_root_group)
		fold(b->nb[0], n);
	fold(b->nb[1], words * 8);
	TU_MPI(MPI_Comm_free(&ic));
}

static int flood(int argc, char **argv)
{
	if (argc != 5)
		tu_arg_long("", 1, 0, "flood wants COUNT SIZE SLEEP_MS", USAGE);
	long count = tu_arg_long(argv[2], 1, 1000000, "COUNT wants 1 to 1000000", USAGE);
	long size = tu_arg_long(argv[3], 1, 64L << 20, "SIZE wants 1 to 64 MiB", USAGE);
	long sleep_ms = tu_arg_long(argv[4], 0, 600000, "SLEEP_MS wants 0 to 600000", USAGE);
	unsigned char *buf = malloc((size_t)size);
	TU_CHECK(buf, "out of memory");
	if (tu_rank != 0)
		tu_sleep_ms((int)sleep_ms);
	uint64_t sum = TU_HASH_INIT;
	for (long i = 0; i < count; i++) {
		uint64_t seed = 0xf100d00000000000ull | (uint64_t)i;
		if (tu_rank == 0)
			tu_fill(buf, (size_t)size, seed);
		TU_MPI(MPI_Bcast(buf, (int)size, MPI_BYTE, 0, MPI_COMM_WORLD));
		long bad = tu_verify(buf, (size_t)size, seed);
		TU_CHECK(bad < 0, "broadcast %ld: byte %ld differs", i, bad);
		sum = tu_hash(sum, buf, (size_t)size);
	}
	printf("rank %d flood %ld sum %016llx\n", tu_rank, count, (unsigned long long)sum);
	free(buf);
	return tu_finalize();
}

int main(int argc, char **argv)
{
	tu_init(&argc, &argv, "ft_coll");
	if (argc > 1 && strcmp(argv[1], "flood") == 0)
		return flood(argc, argv);
	if (argc < 3 || argc > 4 || (argc == 4 && strcmp(argv[3], "ckpt") != 0))
		tu_arg_long("", 1, 0, "wrong arguments", USAGE);
	long iters = tu_arg_long(argv[1], 1, 1000000, "ITERS wants 1 to 1000000", USAGE);
	long size = tu_arg_long(argv[2], 8, 16L << 20, "SIZE wants 8 to 16 MiB", USAGE);
	int ckpt = argc == 4;

	/* At least two blocks: the two MPI_Iallreduce send from one each. */
	size_t blocks = tu_size < 2 ? 2 : (size_t)tu_size;
	struct bufs b = {.size = (size_t)size};
	b.send = malloc((size_t)size * blocks);
	b.recv = malloc((size_t)size * blocks);
	TU_CHECK(b.send && b.recv, "out of memory");
	for (int i = 0; i < 4; i++) {
		b.nb[i] = malloc((size_t)size);
		TU_CHECK(b.nb[i], "out of memory");
	}

	st.it = 0;
	st.sum = TU_HASH_INIT ^ (uint64_t)tu_rank;
	if (ckpt) {
		TU_CHECK(chanmem_ckpt_register(&st, sizeof st) == MPI_SUCCESS,
		         "chanmem_ckpt_register failed");
		if (chanmem_ckpt_recovering())
			TU_CHECK(chanmem_ckpt_restore() == MPI_SUCCESS, "restore failed");
	}

	while (st.it < iters) {
		int64_t it = st.it;
		MPI_Comm sub;
		TU_MPI(MPI_Comm_split(MPI_COMM_WORLD, tu_rank % 2, tu_size - tu_rank, &sub));
		blocking(MPI_COMM_WORLD, 0, it, &b);
		blocking(sub, 1, it, &b);
		nonblocking(MPI_COMM_WORLD, sub, it, &b);
		if (tu_size > 1 && it % 4 == 1) /* a quarter of the iterations: it costs */
			inter(sub, it, &b);     /* as much as the rest together */
		TU_MPI(MPI_Comm_free(&sub));
		printf("rank %d it %lld sum %016llx\n", tu_rank, (long long)it,
		       (unsigned long long)st.sum);
		st.it++;
		if (ckpt) {
			int rc = chanmem_checkpoint(NULL);
			TU_CHECK(rc == MPI_SUCCESS, "checkpoint failed (%s)", tu_err_name(rc));
		}
	}
	free(b.send);
	free(b.recv);
	for (int i = 0; i < 4; i++)
		free(b.nb[i]);
	return tu_finalize();
}
