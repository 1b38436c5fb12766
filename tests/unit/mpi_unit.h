/* Helpers shared by the unit tests of the MPI layer over the fake
 * transport (test_mpi_pt2pt.c, test_mpi_request.c: one program). */
#ifndef CHANMEM_TEST_MPI_UNIT_H
#define CHANMEM_TEST_MPI_UNIT_H

#include <check.h>
#include <string.h>

#include "mpi.h"
#include "mpi_fake_transport.h"

#define CTX_WORLD 0u
#define CTX_WORLD_COLL 1u
#define CTX_SELF 2u

/* Rank `rank` of `size`, errors returned (not fatal) on both communicators. */
static inline void init_returning(int rank, int size)
{
	fake_reset(rank, size);
	ck_assert_int_eq(MPI_Init(NULL, NULL), MPI_SUCCESS);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
}

/* A status whose every field is a sentinel, to see what a call writes. */
static inline MPI_Status poisoned_status(void)
{
	MPI_Status st;
	memset(&st, 0x5a, sizeof st);
	st.MPI_ERROR = 12345;
	return st;
}

static inline int status_count(const MPI_Status *st, MPI_Datatype type)
{
	int n = -99;
	ck_assert_int_eq(MPI_Get_count(st, type, &n), MPI_SUCCESS);
	return n;
}

/* The request tests (test_mpi_request.c). */
TCase *mpi_request_tcase(void);

#endif
