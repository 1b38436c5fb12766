/* Non-blocking collectives: the MPI calls, each a coroutine running the
 * blocking collective (the coroutines: mpi_coll_nb_engine.c). Argument
 * errors are found by the blocking code before it waits for anything, so
 * they still come back from the MPI_I... call itself. The arrays of the v
 * and w variants are read while the collective runs: MPI forbids changing
 * them before it completes. */
#include "mpi_coll_nb.h"

/* The arguments of any of the calls; each call's runner reads its own. */
struct nbc_args {
	const void *sbuf;
	void *rbuf;
	int scount, rcount, root;
	const int *scounts, *sdispls, *rcounts, *rdispls;
	MPI_Datatype stype, rtype;
	const MPI_Datatype *stypes, *rtypes;
	MPI_Op op;
	MPI_Comm comm;
};
_Static_assert(sizeof(struct nbc_args) <= CM_NBC_ARGS_MAX, "CM_NBC_ARGS_MAX too small");

static int start(const char *func, cm_nbc_run_fn *run, const struct nbc_args *a,
                 MPI_Request *request)
{
	return cm_nbc_start(func, a->comm, run, a, sizeof *a, request);
}

/* ---- the calls ---- */

static int run_barrier(const void *args)
{
	const struct nbc_args *a = args;
	return MPI_Barrier(a->comm);
}

static int run_bcast(const void *args)
{
	const struct nbc_args *a = args;
	return MPI_Bcast(a->rbuf, a->rcount, a->rtype, a->root, a->comm);
}

static int run_reduce(const void *args)
{
	const struct nbc_args *a = args;
	return MPI_Reduce(a->sbuf, a->rbuf, a->rcount, a->rtype, a->op, a->root, a->comm);
}

static int run_allreduce(const void *args)
{
	const struct nbc_args *a = args;
	return MPI_Allreduce(a->sbuf, a->rbuf, a->rcount, a->rtype, a->op, a->comm);
}

static int run_reduce_scatter(const void *args)
{
	const struct nbc_args *a = args;
	return MPI_Reduce_scatter(a->sbuf, a->rbuf, a->rcounts, a->rtype, a->op, a->comm);
}

static int run_reduce_scatter_block(const void *args)
{
	const struct nbc_args *a = args;
	return MPI_Reduce_scatter_block(a->sbuf, a->rbuf, a->rcount, a->rtype, a->op, a->comm);
}

static int run_scan(const void *args)
{
	const struct nbc_args *a = args;
	return MPI_Scan(a->sbuf, a->rbuf, a->rcount, a->rtype, a->op, a->comm);
}

static int run_exscan(const void *args)
{
	const struct nbc_args *a = args;
	return MPI_Exscan(a->sbuf, a->rbuf, a->rcount, a->rtype, a->op, a->comm);
}

static int run_gather(const void *args)
{
	const struct nbc_args *a = args;
	return MPI_Gather(a->sbuf, a->scount, a->stype, a->rbuf, a->rcount, a->rtype, a->root,
	                  a->comm);
}

static int run_gatherv(const void *args)
{
	const struct nbc_args *a = args;
	return MPI_Gatherv(a->sbuf, a->scount, a->stype, a->rbuf, a->rcounts, a->rdispls, a->rtype,
	                   a->root, a->comm);
}

static int run_scatter(const void *args)
{
	const struct nbc_args *a = args;
	return MPI_Scatter(a->sbuf, a->scount, a->stype, a->rbuf, a->rcount, a->rtype, a->root,
	                   a->comm);
}

static int run_scatterv(const void *args)
{
	const struct nbc_args *a = args;
	return MPI_Scatterv(a->sbuf, a->scounts, a->sdispls, a->stype, a->rbuf, a->rcount, a->rtype,
	                    a->root, a->comm);
}

static int run_allgather(const void *args)
{
	const struct nbc_args *a = args;
	return MPI_Allgather(a->sbuf, a->scount, a->stype, a->rbuf, a->rcount, a->rtype, a->comm);
}

static int run_allgatherv(const void *args)
{
	const struct nbc_args *a = args;
	return MPI_Allgatherv(a->sbuf, a->scount, a->stype, a->rbuf, a->rcounts, a->rdispls,
	                      a->rtype, a->comm);
}

static int run_alltoall(const void *args)
{
	const struct nbc_args *a = args;
	return MPI_Alltoall(a->sbuf, a->scount, a->stype, a->rbuf, a->rcount, a->rtype, a->comm);
}

static int run_alltoallv(const void *args)
{
	const struct nbc_args *a = args;
	return MPI_Alltoallv(a->sbuf, a->scounts, a->sdispls, a->stype, a->rbuf, a->rcounts,
	                     a->rdispls, a->rtype, a->comm);
}

static int run_alltoallw(const void *args)
{
	const struct nbc_args *a = args;
	return MPI_Alltoallw(a->sbuf, a->scounts, a->sdispls, a->stypes, a->rbuf, a->rcounts,
	                     a->rdispls, a->rtypes, a->comm);
}

int MPI_Ibarrier(MPI_Comm comm, MPI_Request *request)
{
	struct nbc_args a = {.comm = comm};
	return start("MPI_Ibarrier", run_barrier, &a, request);
}

int MPI_Ibcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm,
               MPI_Request *request)
{
	struct nbc_args a = {
	    .rbuf = buffer, .rcount = count, .rtype = datatype, .root = root, .comm = comm};
	return start("MPI_Ibcast", run_bcast, &a, request);
}

int MPI_Ireduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                int root, MPI_Comm comm, MPI_Request *request)
{
	struct nbc_args a = {.sbuf = sendbuf,
	                     .rbuf = recvbuf,
	                     .rcount = count,
	                     .rtype = datatype,
	                     .op = op,
	                     .root = root,
	                     .comm = comm};
	return start("MPI_Ireduce", run_reduce, &a, request);
}

int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                   MPI_Comm comm, MPI_Request *request)
{
	struct nbc_args a = {.sbuf = sendbuf,
	                     .rbuf = recvbuf,
	                     .rcount = count,
	                     .rtype = datatype,
	                     .op = op,
	                     .comm = comm};
	return start("MPI_Iallreduce", run_allreduce, &a, request);
}

int MPI_Ireduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[],
                        MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *request)
{
	struct nbc_args a = {.sbuf = sendbuf,
	                     .rbuf = recvbuf,
	                     .rcounts = recvcounts,
	                     .rtype = datatype,
	                     .op = op,
	                     .comm = comm};
	return start("MPI_Ireduce_scatter", run_reduce_scatter, &a, request);
}

int MPI_Ireduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount,
                              MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *request)
{
	struct nbc_args a = {.sbuf = sendbuf,
	                     .rbuf = recvbuf,
	                     .rcount = recvcount,
	                     .rtype = datatype,
	                     .op = op,
	                     .comm = comm};
	return start("MPI_Ireduce_scatter_block", run_reduce_scatter_block, &a, request);
}

int MPI_Iscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
              MPI_Comm comm, MPI_Request *request)
{
	struct nbc_args a = {.sbuf = sendbuf,
	                     .rbuf = recvbuf,
	                     .rcount = count,
	                     .rtype = datatype,
	                     .op = op,
	                     .comm = comm};
	return start("MPI_Iscan", run_scan, &a, request);
}

int MPI_Iexscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                MPI_Comm comm, MPI_Request *request)
{
	struct nbc_args a = {.sbuf = sendbuf,
	                     .rbuf = recvbuf,
	                     .rcount = count,
	                     .rtype = datatype,
	                     .op = op,
	                     .comm = comm};
	return start("MPI_Iexscan", run_exscan, &a, request);
}

int MPI_Igather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request)
{
	struct nbc_args a = {.sbuf = sendbuf,
	                     .scount = sendcount,
	                     .stype = sendtype,
	                     .rbuf = recvbuf,
	                     .rcount = recvcount,
	                     .rtype = recvtype,
	                     .root = root,
	                     .comm = comm};
	return start("MPI_Igather", run_gather, &a, request);
}

int MPI_Igatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                 const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root,
                 MPI_Comm comm, MPI_Request *request)
{
	struct nbc_args a = {.sbuf = sendbuf,
	                     .scount = sendcount,
	                     .stype = sendtype,
	                     .rbuf = recvbuf,
	                     .rcounts = recvcounts,
	                     .rdispls = displs,
	                     .rtype = recvtype,
	                     .root = root,
	                     .comm = comm};
	return start("MPI_Igatherv", run_gatherv, &a, request);
}

int MPI_Iscatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                 int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                 MPI_Request *request)
{
	struct nbc_args a = {.sbuf = sendbuf,
	                     .scount = sendcount,
	                     .stype = sendtype,
	                     .rbuf = recvbuf,
	                     .rcount = recvcount,
	                     .rtype = recvtype,
	                     .root = root,
	                     .comm = comm};
	return start("MPI_Iscatter", run_scatter, &a, request);
}

int MPI_Iscatterv(const void *sendbuf, const int sendcounts[], const int displs[],
                  MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype,
                  int root, MPI_Comm comm, MPI_Request *request)
{
	struct nbc_args a = {.sbuf = sendbuf,
	                     .scounts = sendcounts,
	                     .sdispls = displs,
	                     .stype = sendtype,
	                     .rbuf = recvbuf,
	                     .rcount = recvcount,
	                     .rtype = recvtype,
	                     .root = root,
	                     .comm = comm};
	return start("MPI_Iscatterv", run_scatterv, &a, request);
}

int MPI_Iallgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                   int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request)
{
	struct nbc_args a = {.sbuf = sendbuf,
	                     .scount = sendcount,
	                     .stype = sendtype,
	                     .rbuf = recvbuf,
	                     .rcount = recvcount,
	                     .rtype = recvtype,
	                     .comm = comm};
	return start("MPI_Iallgather", run_allgather, &a, request);
}

int MPI_Iallgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                    const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                    MPI_Comm comm, MPI_Request *request)
{
	struct nbc_args a = {.sbuf = sendbuf,
	                     .scount = sendcount,
	                     .stype = sendtype,
	                     .rbuf = recvbuf,
	                     .rcounts = recvcounts,
	                     .rdispls = displs,
	                     .rtype = recvtype,
	                     .comm = comm};
	return start("MPI_Iallgatherv", run_allgatherv, &a, request);
}

int MPI_Ialltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request)
{
	struct nbc_args a = {.sbuf = sendbuf,
	                     .scount = sendcount,
	                     .stype = sendtype,
	                     .rbuf = recvbuf,
	                     .rcount = recvcount,
	                     .rtype = recvtype,
	                     .comm = comm};
	return start("MPI_Ialltoall", run_alltoall, &a, request);
}

int MPI_Ialltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[],
                   MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                   const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request)
{
	struct nbc_args a = {.sbuf = sendbuf,
	                     .scounts = sendcounts,
	                     .sdispls = sdispls,
	                     .stype = sendtype,
	                     .rbuf = recvbuf,
	                     .rcounts = recvcounts,
	                     .rdispls = rdispls,
	                     .rtype = recvtype,
	                     .comm = comm};
	return start("MPI_Ialltoallv", run_alltoallv, &a, request);
}

int MPI_Ialltoallw(const void *sendbuf, const int sendcounts[], const int sdispls[],
                   const MPI_Datatype sendtypes[], void *recvbuf, const int recvcounts[],
                   const int rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm,
                   MPI_Request *request)
{
	struct nbc_args a = {.sbuf = sendbuf,
	                     .scounts = sendcounts,
	                     .sdispls = sdispls,
	                     .stypes = sendtypes,
	                     .rbuf = recvbuf,
	                     .rcounts = recvcounts,
	                     .rdispls = rdispls,
	                     .rtypes = recvtypes,
	                     .comm = comm};
	return start("MPI_Ialltoallw", run_alltoallw, &a, request);
}
