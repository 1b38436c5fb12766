/* MPI_Pack, MPI_Unpack, MPI_Pack_size. The packed form is the one that
 * travels in messages: the type map's bytes in order, gaps removed, in the
 * host's representation (a homogeneous job), so packed data can be sent
 * as MPI_PACKED and received into any type with the same type signature. */
#include <limits.h>

#include "mpi_internal.h"

static int check_type(MPI_Datatype datatype, const struct cm_mpi_datatype **t)
{
	*t = cm_mpi_type_get(datatype);
	return *t && (*t)->committed ? MPI_SUCCESS : MPI_ERR_TYPE;
}

int MPI_Pack(const void *inbuf, int incount, MPI_Datatype datatype, void *outbuf, int outsize,
             int *position, MPI_Comm comm)
{
	const struct cm_mpi_datatype *t = NULL;
	CM_MPI_REQUIRE_INIT("MPI_Pack");
	struct cm_mpi_comm *c = cm_mpi_comm_get(comm);
	if (!c)
		return cm_mpi_raise(NULL, MPI_ERR_COMM, "MPI_Pack");
	int rc = incount < 0 ? MPI_ERR_COUNT : check_type(datatype, &t);
	if (!rc && (!position || *position < 0 || outsize < 0 || (outsize > 0 && !outbuf)))
		rc = MPI_ERR_ARG;
	if (!rc && (incount > 0 && !inbuf && !t->derived))
		rc = MPI_ERR_BUFFER;
	if (rc)
		return cm_mpi_raise(c, rc, "MPI_Pack");
	size_t bytes = (size_t)incount * t->size;
	if (*position > outsize || bytes > (size_t)(outsize - *position))
		return cm_mpi_raise(c, MPI_ERR_TRUNCATE, "MPI_Pack");
	cm_mpi_pack(t, inbuf, (size_t)incount, (char *)outbuf + *position);
	*position += (int)bytes;
	return MPI_SUCCESS;
}

int MPI_Unpack(const void *inbuf, int insize, int *position, void *outbuf, int outcount,
               MPI_Datatype datatype, MPI_Comm comm)
{
	const struct cm_mpi_datatype *t = NULL;
	CM_MPI_REQUIRE_INIT("MPI_Unpack");
	struct cm_mpi_comm *c = cm_mpi_comm_get(comm);
	if (!c)
		return cm_mpi_raise(NULL, MPI_ERR_COMM, "MPI_Unpack");
	int rc = outcount < 0 ? MPI_ERR_COUNT : check_type(datatype, &t);
	if (!rc && (!position || *position < 0 || insize < 0 || *position > insize ||
	            (insize > 0 && !inbuf)))
		rc = MPI_ERR_ARG;
	if (!rc && (outcount > 0 && !outbuf && !t->derived))
		rc = MPI_ERR_BUFFER;
	if (rc)
		return cm_mpi_raise(c, rc, "MPI_Unpack");
	size_t bytes = (size_t)outcount * t->size;
	if (bytes > (size_t)(insize - *position))
		return cm_mpi_raise(c, MPI_ERR_TRUNCATE, "MPI_Unpack");
	cm_mpi_unpack(t, (const char *)inbuf + *position, bytes, outbuf);
	*position += (int)bytes;
	return MPI_SUCCESS;
}

int MPI_Pack_size(int incount, MPI_Datatype datatype, MPI_Comm comm, int *size)
{
	const struct cm_mpi_datatype *t = NULL;
	CM_MPI_REQUIRE_INIT("MPI_Pack_size");
	struct cm_mpi_comm *c = cm_mpi_comm_get(comm);
	if (!c)
		return cm_mpi_raise(NULL, MPI_ERR_COMM, "MPI_Pack_size");
	int rc = incount < 0 ? MPI_ERR_COUNT : check_type(datatype, &t);
	if (!rc && !size)
		rc = MPI_ERR_ARG;
	if (!rc && t->size > 0 && (size_t)incount > (size_t)INT_MAX / t->size)
		rc = MPI_ERR_COUNT;
	if (rc)
		return cm_mpi_raise(c, rc, "MPI_Pack_size");
	*size = (int)((size_t)incount * t->size);
	return MPI_SUCCESS;
}
