/* Small calls of the everyday API that need no state of their own:
 * MPI_Pcontrol, the C <-> Fortran handle conversions, the status setters
 * and MPI_Type_match_size. */
#include <stdarg.h>
#include <string.h>

#include "mpi_internal.h"

/* No profiling layer is attached: the level is accepted and ignored, as
 * the standard allows. Callable at any time, like MPI_Wtime's kin. */
int MPI_Pcontrol(const int level, ...)
{
	(void)level;
	return MPI_SUCCESS;
}

/* Handles are integers already, so the Fortran handle is the C one; an
 * invalid handle converts to itself and is refused where it is used. */
MPI_Fint MPI_Comm_c2f(MPI_Comm comm)
{
	return comm;
}
MPI_Comm MPI_Comm_f2c(MPI_Fint comm)
{
	return comm;
}
MPI_Fint MPI_Type_c2f(MPI_Datatype datatype)
{
	return datatype;
}
MPI_Datatype MPI_Type_f2c(MPI_Fint datatype)
{
	return datatype;
}
MPI_Fint MPI_Group_c2f(MPI_Group group)
{
	return group;
}
MPI_Group MPI_Group_f2c(MPI_Fint group)
{
	return group;
}
MPI_Fint MPI_Request_c2f(MPI_Request request)
{
	return request;
}
MPI_Request MPI_Request_f2c(MPI_Fint request)
{
	return request;
}
MPI_Fint MPI_Op_c2f(MPI_Op op)
{
	return op;
}
MPI_Op MPI_Op_f2c(MPI_Fint op)
{
	return op;
}
MPI_Fint MPI_Info_c2f(MPI_Info info)
{
	return info;
}
MPI_Info MPI_Info_f2c(MPI_Fint info)
{
	return info;
}
MPI_Fint MPI_Errhandler_c2f(MPI_Errhandler errhandler)
{
	return errhandler;
}
MPI_Errhandler MPI_Errhandler_f2c(MPI_Fint errhandler)
{
	return errhandler;
}
MPI_Fint MPI_Message_c2f(MPI_Message message)
{
	return message;
}
MPI_Message MPI_Message_f2c(MPI_Fint message)
{
	return message;
}

/* A status is MPI_F_STATUS_SIZE MPI_Fint values: its bytes as they are. */
int MPI_Status_c2f(const MPI_Status *c_status, MPI_Fint *f_status)
{
	if (!c_status || !f_status)
		return cm_mpi_raise(NULL, MPI_ERR_ARG, "MPI_Status_c2f");
	memcpy(f_status, c_status, sizeof *c_status);
	return MPI_SUCCESS;
}

int MPI_Status_f2c(const MPI_Fint *f_status, MPI_Status *c_status)
{
	if (!c_status || !f_status)
		return cm_mpi_raise(NULL, MPI_ERR_ARG, "MPI_Status_f2c");
	memcpy(c_status, f_status, sizeof *c_status);
	return MPI_SUCCESS;
}

/* Bytes holding count basic elements of type t: the inverse of
 * MPI_Get_elements (whole items, then the first elements of one more). */
static MPI_Count bytes_of_elements(const struct cm_mpi_datatype *t, MPI_Count count)
{
	if (t->elements == 0)
		return 0;
	MPI_Count bytes = count / (MPI_Count)t->elements * (MPI_Count)t->size;
	size_t rest = (size_t)(count % (MPI_Count)t->elements);
	for (int b = 0; b < t->nblocks && rest > 0; b++) {
		const struct cm_mpi_block *blk = &t->blocks[b];
		size_t in_block = blk->nelems * blk->count;
		size_t take = rest < in_block ? rest : in_block;
		bytes += (MPI_Count)(take * blk->elem_size);
		rest -= take;
	}
	return bytes;
}

int MPI_Status_set_elements_x(MPI_Status *status, MPI_Datatype datatype, MPI_Count count)
{
	CM_MPI_REQUIRE_INIT("MPI_Status_set_elements_x");
	const struct cm_mpi_datatype *t = cm_mpi_type_get(datatype);
	if (!t)
		return cm_mpi_raise(NULL, MPI_ERR_TYPE, "MPI_Status_set_elements_x");
	if (!status || count < 0)
		return cm_mpi_raise(NULL, MPI_ERR_ARG, "MPI_Status_set_elements_x");
	status->cm_bytes = bytes_of_elements(t, count);
	return MPI_SUCCESS;
}

int MPI_Status_set_elements(MPI_Status *status, MPI_Datatype datatype, int count)
{
	CM_MPI_REQUIRE_INIT("MPI_Status_set_elements");
	return MPI_Status_set_elements_x(status, datatype, count);
}

int MPI_Status_set_cancelled(MPI_Status *status, int flag)
{
	CM_MPI_REQUIRE_INIT("MPI_Status_set_cancelled");
	if (!status)
		return cm_mpi_raise(NULL, MPI_ERR_ARG, "MPI_Status_set_cancelled");
	status->cm_cancelled = flag != 0;
	return MPI_SUCCESS;
}

/* Without Fortran types, the C types of each class, smallest first. */
int MPI_Type_match_size(int typeclass, int size, MPI_Datatype *datatype)
{
	static const MPI_Datatype reals[] = {MPI_FLOAT, MPI_DOUBLE, MPI_LONG_DOUBLE};
	static const MPI_Datatype ints[] = {MPI_SIGNED_CHAR, MPI_SHORT, MPI_INT, MPI_LONG,
	                                    MPI_LONG_LONG};
	static const MPI_Datatype complexes[] = {MPI_C_FLOAT_COMPLEX, MPI_C_DOUBLE_COMPLEX,
	                                         MPI_C_LONG_DOUBLE_COMPLEX};
	CM_MPI_REQUIRE_INIT("MPI_Type_match_size");
	const MPI_Datatype *list = NULL;
	size_t n = 0;
	switch (typeclass) {
	case MPI_TYPECLASS_REAL:
		list = reals, n = sizeof reals / sizeof *reals;
		break;
	case MPI_TYPECLASS_INTEGER:
		list = ints, n = sizeof ints / sizeof *ints;
		break;
	case MPI_TYPECLASS_COMPLEX:
		list = complexes, n = sizeof complexes / sizeof *complexes;
		break;
	}
	for (size_t i = 0; datatype && i < n; i++) {
		const struct cm_mpi_datatype *t = cm_mpi_type_get(list[i]);
		if (t && (int)t->size == size) {
			*datatype = list[i];
			return MPI_SUCCESS;
		}
	}
	return cm_mpi_raise(NULL, MPI_ERR_ARG, "MPI_Type_match_size");
}
