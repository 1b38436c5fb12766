/* Unit tests of the MPI layer's environment, datatypes and errors, over the
 * fake transport (mpi_fake_transport.h). Every test runs in its own
 * process (check's fork mode), so each starts before MPI_Init. */
#include "config.h"

#include <check.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chanmem.h"
#include "mpi.h"
#include "mpi_fake_transport.h"

/* Handles are integer constant expressions: static initialisers and
 * switch labels must compile, as with any real mpi.h. */
static const MPI_Datatype static_types[] = {MPI_INT, MPI_DOUBLE, MPI_BYTE};
static MPI_Comm static_comm = MPI_COMM_WORLD;
static MPI_Request static_request = MPI_REQUEST_NULL;

static const char *comm_name(MPI_Comm c)
{
	switch (c) {
	case MPI_COMM_WORLD:
		return "world";
	case MPI_COMM_SELF:
		return "self";
	default:
		return "other";
	}
}

static void init_as(int rank, int size)
{
	fake_reset(rank, size);
	ck_assert_int_eq(MPI_Init(NULL, NULL), MPI_SUCCESS);
}

START_TEST(handles_are_constants)
{
	ck_assert_int_eq(static_types[1], MPI_DOUBLE);
	ck_assert_str_eq(comm_name(static_comm), "world");
	ck_assert_str_eq(comm_name(MPI_COMM_SELF), "self");
	ck_assert(static_request == MPI_REQUEST_NULL);
	ck_assert(MPI_COMM_WORLD != MPI_COMM_SELF && MPI_COMM_WORLD != MPI_COMM_NULL);
	ck_assert(MPI_LONG_LONG == MPI_LONG_LONG_INT);
	ck_assert(MPI_ERRORS_RETURN != MPI_ERRORS_ARE_FATAL);
	ck_assert_int_eq(MPI_ANY_SOURCE, -1);
	ck_assert_int_eq(MPI_ANY_TAG, -1);
	ck_assert(MPI_PROC_NULL != MPI_ANY_SOURCE && MPI_PROC_NULL < 0);
	ck_assert(MPI_UNDEFINED < 0);
	ck_assert(MPI_ERR_LASTCODE >= MPI_ERR_PENDING);
}
END_TEST

START_TEST(init_and_finalize)
{
	int flag = -1;
	fake_reset(0, 1);
	ck_assert_int_eq(MPI_Initialized(&flag), MPI_SUCCESS);
	ck_assert_int_eq(flag, 0);
	ck_assert_int_eq(MPI_Finalized(&flag), MPI_SUCCESS);
	ck_assert_int_eq(flag, 0);
	ck_assert_int_eq(MPI_Init(NULL, NULL), MPI_SUCCESS);
	ck_assert_str_eq(fake.constructed, "direct");
	ck_assert_int_eq(fake.inits, 1);
	MPI_Initialized(&flag);
	ck_assert_int_eq(flag, 1);
	int rank = -1, size = -1;
	ck_assert_int_eq(MPI_Comm_rank(MPI_COMM_WORLD, &rank), MPI_SUCCESS);
	ck_assert_int_eq(MPI_Comm_size(MPI_COMM_WORLD, &size), MPI_SUCCESS);
	ck_assert_int_eq(rank, 0);
	ck_assert_int_eq(size, 1);
	ck_assert_int_eq(MPI_Finalize(), MPI_SUCCESS);
	ck_assert_int_eq(fake.finalizes, 1);
	ck_assert_int_eq(fake.nsent, 0); /* a barrier of one rank sends nothing */
	MPI_Initialized(&flag);
	ck_assert_int_eq(flag, 1); /* stays true after MPI_Finalize */
	MPI_Finalized(&flag);
	ck_assert_int_eq(flag, 1);
}
END_TEST

START_TEST(world_and_self)
{
	int rank, size;
	init_as(3, 5);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	ck_assert_int_eq(rank, 3);
	ck_assert_int_eq(size, 5);
	MPI_Comm_rank(MPI_COMM_SELF, &rank);
	MPI_Comm_size(MPI_COMM_SELF, &size);
	ck_assert_int_eq(rank, 0);
	ck_assert_int_eq(size, 1);
}
END_TEST

START_TEST(transport_choice)
{
	const char *name = NULL;
	ck_assert_int_eq(chanmem_transport_name(&name), MPI_ERR_OTHER); /* before MPI_Init */
	fake_reset(1, 2);
	fake.transport = "cm";
	ck_assert_int_eq(MPI_Init(NULL, NULL), MPI_SUCCESS);
	ck_assert_str_eq(fake.constructed, "cm");
	ck_assert_int_eq(chanmem_transport_name(&name), MPI_SUCCESS);
	ck_assert_str_eq(name, "cm");
	ck_assert_int_eq(chanmem_transport_name(NULL), MPI_ERR_ARG);
	ck_assert_str_eq(chanmem_version(), CHANMEM_VERSION);
	ck_assert_str_eq(CHANMEM_VERSION, PACKAGE_VERSION);
}
END_TEST

START_TEST(thread_levels)
{
	static const int asked[] = {MPI_THREAD_SINGLE, MPI_THREAD_FUNNELED, MPI_THREAD_SERIALIZED,
	                            MPI_THREAD_MULTIPLE};
	static const int granted[] = {MPI_THREAD_SINGLE, MPI_THREAD_FUNNELED, MPI_THREAD_FUNNELED,
	                              MPI_THREAD_FUNNELED};
	int i = _i;
	int provided = -1, queried = -1, main_thread = 0;
	fake_reset(0, 1);
	ck_assert_int_eq(MPI_Init_thread(NULL, NULL, asked[i], &provided), MPI_SUCCESS);
	ck_assert_int_eq(provided, granted[i]);
	ck_assert_int_eq(MPI_Query_thread(&queried), MPI_SUCCESS);
	ck_assert_int_eq(queried, granted[i]);
	ck_assert_int_eq(MPI_Is_thread_main(&main_thread), MPI_SUCCESS);
	ck_assert_int_eq(main_thread, 1);
}
END_TEST

START_TEST(versions_and_timers)
{
	int v = 0, sv = -1, len = 0;
	char lib[MPI_MAX_LIBRARY_VERSION_STRING];
	/* Allowed before MPI_Init. */
	ck_assert_int_eq(MPI_Get_version(&v, &sv), MPI_SUCCESS);
	ck_assert_int_eq(v, MPI_VERSION);
	ck_assert_int_eq(sv, MPI_SUBVERSION);
	ck_assert_int_eq(MPI_Get_library_version(lib, &len), MPI_SUCCESS);
	ck_assert_int_eq(len, (int)strlen(lib));
	ck_assert_ptr_nonnull(strstr(lib, PACKAGE_VERSION));
	init_as(0, 1);
	char host[MPI_MAX_PROCESSOR_NAME];
	ck_assert_int_eq(MPI_Get_processor_name(host, &len), MPI_SUCCESS);
	ck_assert_int_gt(len, 0);
	ck_assert_int_eq(len, (int)strlen(host));
	double tick = MPI_Wtick();
	ck_assert(tick > 0 && tick <= 1e-3);
	double t0 = MPI_Wtime(), t1 = MPI_Wtime();
	ck_assert(t1 >= t0);
}
END_TEST

START_TEST(tag_ub_attribute)
{
	int *value = NULL, flag = 0;
	init_as(0, 1);
	ck_assert_int_eq(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &value, &flag), MPI_SUCCESS);
	ck_assert_int_eq(flag, 1);
	ck_assert_int_eq(*value, INT_MAX);
	ck_assert_int_eq(MPI_Comm_get_attr(MPI_COMM_SELF, MPI_WTIME_IS_GLOBAL, &value, &flag),
	                 MPI_SUCCESS);
	ck_assert_int_eq(*value, 0);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	ck_assert_int_eq(MPI_Comm_get_attr(MPI_COMM_WORLD, 12345, &value, &flag), MPI_ERR_KEYVAL);
	/* The largest tag is valid, and reaches the transport as is. */
	ck_assert_int_eq(MPI_Send(NULL, 0, MPI_INT, 0, INT_MAX, MPI_COMM_WORLD), MPI_SUCCESS);
	MPI_Status st;
	ck_assert_int_eq(MPI_Recv(NULL, 0, MPI_INT, 0, INT_MAX, MPI_COMM_WORLD, &st), MPI_SUCCESS);
	ck_assert_int_eq(st.MPI_TAG, INT_MAX);
}
END_TEST

/* ---- datatypes ---- */

struct type_case {
	MPI_Datatype type;
	size_t size;
	size_t extent;
};

struct double_int {
	double v;
	int i;
};
struct long_double_int {
	long double v;
	int i;
};
struct short_int {
	short v;
	int i;
};

static const struct type_case type_cases[] = {
    {MPI_CHAR, sizeof(char), sizeof(char)},
    {MPI_SIGNED_CHAR, 1, 1},
    {MPI_UNSIGNED_CHAR, 1, 1},
    {MPI_BYTE, 1, 1},
    {MPI_PACKED, 1, 1},
    {MPI_WCHAR, sizeof(wchar_t), sizeof(wchar_t)},
    {MPI_SHORT, sizeof(short), sizeof(short)},
    {MPI_UNSIGNED_SHORT, sizeof(unsigned short), sizeof(unsigned short)},
    {MPI_INT, sizeof(int), sizeof(int)},
    {MPI_UNSIGNED, sizeof(unsigned), sizeof(unsigned)},
    {MPI_LONG, sizeof(long), sizeof(long)},
    {MPI_UNSIGNED_LONG, sizeof(unsigned long), sizeof(unsigned long)},
    {MPI_LONG_LONG_INT, sizeof(long long), sizeof(long long)},
    {MPI_LONG_LONG, sizeof(long long), sizeof(long long)},
    {MPI_UNSIGNED_LONG_LONG, sizeof(unsigned long long), sizeof(unsigned long long)},
    {MPI_FLOAT, sizeof(float), sizeof(float)},
    {MPI_DOUBLE, sizeof(double), sizeof(double)},
    {MPI_LONG_DOUBLE, sizeof(long double), sizeof(long double)},
    {MPI_INT8_T, 1, 1},
    {MPI_INT16_T, 2, 2},
    {MPI_INT32_T, 4, 4},
    {MPI_INT64_T, 8, 8},
    {MPI_UINT8_T, 1, 1},
    {MPI_UINT16_T, 2, 2},
    {MPI_UINT32_T, 4, 4},
    {MPI_UINT64_T, 8, 8},
    {MPI_C_BOOL, sizeof(bool), sizeof(bool)},
    {MPI_AINT, sizeof(MPI_Aint), sizeof(MPI_Aint)},
    {MPI_OFFSET, sizeof(MPI_Offset), sizeof(MPI_Offset)},
    {MPI_COUNT, sizeof(MPI_Count), sizeof(MPI_Count)},
    {MPI_C_FLOAT_COMPLEX, sizeof(float _Complex), sizeof(float _Complex)},
    {MPI_C_DOUBLE_COMPLEX, sizeof(double _Complex), sizeof(double _Complex)},
    {MPI_C_LONG_DOUBLE_COMPLEX, sizeof(long double _Complex), sizeof(long double _Complex)},
    {MPI_2INT, 2 * sizeof(int), 2 * sizeof(int)},
    {MPI_FLOAT_INT, sizeof(float) + sizeof(int), 8},
    {MPI_DOUBLE_INT, sizeof(double) + sizeof(int), sizeof(struct double_int)},
    {MPI_LONG_INT, sizeof(long) + sizeof(int), 16},
    {MPI_SHORT_INT, sizeof(short) + sizeof(int), sizeof(struct short_int)},
    {MPI_LONG_DOUBLE_INT, sizeof(long double) + sizeof(int), sizeof(struct long_double_int)},
};

START_TEST(datatype_sizes)
{
	init_as(0, 1);
	for (size_t i = 0; i < sizeof type_cases / sizeof type_cases[0]; i++) {
		int size = -1;
		MPI_Count size_x = -1;
		MPI_Aint lb = -1, extent = -1;
		ck_assert_int_eq(MPI_Type_size(type_cases[i].type, &size), MPI_SUCCESS);
		ck_assert_msg(size == (int)type_cases[i].size, "type %zu: size %d", i, size);
		ck_assert_int_eq(MPI_Type_size_x(type_cases[i].type, &size_x), MPI_SUCCESS);
		ck_assert(size_x == (MPI_Count)type_cases[i].size);
		ck_assert_int_eq(MPI_Type_get_extent(type_cases[i].type, &lb, &extent),
		                 MPI_SUCCESS);
		ck_assert(lb == 0);
		ck_assert_msg(extent == (MPI_Aint)type_cases[i].extent, "type %zu: extent %ld", i,
		              (long)extent);
	}
	int size;
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	ck_assert_int_eq(MPI_Type_size(MPI_DATATYPE_NULL, &size), MPI_ERR_TYPE);
	ck_assert_int_eq(MPI_Type_size(0x4c0000ff, &size), MPI_ERR_TYPE);
	ck_assert_int_eq(MPI_Type_size(MPI_COMM_WORLD, &size), MPI_ERR_TYPE);
	ck_assert_int_eq(MPI_Type_size(MPI_INT, NULL), MPI_ERR_ARG);
}
END_TEST

static MPI_Status status_of_bytes(MPI_Count bytes)
{
	MPI_Status st = {.MPI_SOURCE = 0, .MPI_TAG = 0, .MPI_ERROR = 0, .cm_bytes = bytes};
	return st;
}

START_TEST(get_count_and_elements)
{
	int n;
	MPI_Count nx;
	init_as(0, 1);
	MPI_Status st = status_of_bytes(12);
	ck_assert_int_eq(MPI_Get_count(&st, MPI_INT, &n), MPI_SUCCESS);
	ck_assert_int_eq(n, 3);
	ck_assert_int_eq(MPI_Get_count(&st, MPI_BYTE, &n), MPI_SUCCESS);
	ck_assert_int_eq(n, 12);
	ck_assert_int_eq(MPI_Get_count(&st, MPI_DOUBLE, &n), MPI_SUCCESS);
	ck_assert_int_eq(n, MPI_UNDEFINED); /* 12 bytes are not whole doubles */
	ck_assert_int_eq(MPI_Get_elements(&st, MPI_DOUBLE, &n), MPI_SUCCESS);
	ck_assert_int_eq(n, MPI_UNDEFINED);
	ck_assert_int_eq(MPI_Get_elements(&st, MPI_SHORT, &n), MPI_SUCCESS);
	ck_assert_int_eq(n, 6);

	/* Pair types: two basic elements per item. MPI_DOUBLE_INT carries 12
	 * bytes per item; 2 items and a lone double are 32 bytes. */
	st = status_of_bytes(2 * 12 + 8);
	ck_assert_int_eq(MPI_Get_count(&st, MPI_DOUBLE_INT, &n), MPI_SUCCESS);
	ck_assert_int_eq(n, MPI_UNDEFINED);
	ck_assert_int_eq(MPI_Get_elements(&st, MPI_DOUBLE_INT, &n), MPI_SUCCESS);
	ck_assert_int_eq(n, 5);
	ck_assert_int_eq(MPI_Get_elements_x(&st, MPI_DOUBLE_INT, &nx), MPI_SUCCESS);
	ck_assert(nx == 5);
	st = status_of_bytes(2 * 12 + 4); /* cuts the double */
	ck_assert_int_eq(MPI_Get_elements(&st, MPI_DOUBLE_INT, &n), MPI_SUCCESS);
	ck_assert_int_eq(n, MPI_UNDEFINED);
	st = status_of_bytes(3 * 12);
	ck_assert_int_eq(MPI_Get_count(&st, MPI_DOUBLE_INT, &n), MPI_SUCCESS);
	ck_assert_int_eq(n, 3);

	st = status_of_bytes(0);
	ck_assert_int_eq(MPI_Get_count(&st, MPI_LONG_DOUBLE, &n), MPI_SUCCESS);
	ck_assert_int_eq(n, 0);
	ck_assert_int_eq(MPI_Get_elements(&st, MPI_LONG_DOUBLE, &n), MPI_SUCCESS);
	ck_assert_int_eq(n, 0);

	/* A count beyond int is MPI_UNDEFINED for the int versions only. */
	st = status_of_bytes((MPI_Count)INT_MAX + 1);
	ck_assert_int_eq(MPI_Get_count(&st, MPI_BYTE, &n), MPI_SUCCESS);
	ck_assert_int_eq(n, MPI_UNDEFINED);
	ck_assert_int_eq(MPI_Get_elements_x(&st, MPI_BYTE, &nx), MPI_SUCCESS);
	ck_assert(nx == (MPI_Count)INT_MAX + 1);

	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	ck_assert_int_eq(MPI_Get_count(MPI_STATUS_IGNORE, MPI_INT, &n), MPI_ERR_ARG);
	ck_assert_int_eq(MPI_Get_count(&st, MPI_DATATYPE_NULL, &n), MPI_ERR_TYPE);
	ck_assert_int_eq(MPI_Get_elements(&st, MPI_INT, NULL), MPI_ERR_ARG);
}
END_TEST

/* ---- errors and error handlers ---- */

START_TEST(error_strings_and_classes)
{
	char text[MPI_MAX_ERROR_STRING];
	int len, cls;
	for (int code = MPI_SUCCESS; code <= MPI_ERR_LASTCODE; code++) {
		ck_assert_int_eq(MPI_Error_string(code, text, &len), MPI_SUCCESS);
		ck_assert_int_gt(len, 0);
		ck_assert_int_eq(len, (int)strlen(text));
		ck_assert_int_eq(MPI_Error_class(code, &cls), MPI_SUCCESS);
		ck_assert_int_eq(cls, code);
	}
	MPI_Error_string(MPI_ERR_TRUNCATE, text, &len);
	ck_assert_str_eq(text, "MPI_ERR_TRUNCATE: message truncated");
	ck_assert_int_eq(MPI_Error_string(MPI_ERR_LASTCODE + 1, text, &len), MPI_ERR_ARG);
	ck_assert_int_eq(MPI_Error_string(-1, text, &len), MPI_ERR_ARG);
	ck_assert_int_eq(MPI_Error_class(-5, &cls), MPI_ERR_ARG);
}
END_TEST

START_TEST(errhandler_per_communicator)
{
	MPI_Errhandler eh = MPI_ERRHANDLER_NULL;
	init_as(0, 2);
	ck_assert_int_eq(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh), MPI_SUCCESS);
	ck_assert(eh == MPI_ERRORS_ARE_FATAL);
	ck_assert_int_eq(MPI_Comm_get_errhandler(MPI_COMM_SELF, &eh), MPI_SUCCESS);
	ck_assert(eh == MPI_ERRORS_ARE_FATAL);
	ck_assert_int_eq(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN), MPI_SUCCESS);
	ck_assert_int_eq(MPI_Send(NULL, 0, MPI_INT, 1, 0, MPI_COMM_SELF), MPI_ERR_RANK);
	MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh);
	ck_assert(eh == MPI_ERRORS_ARE_FATAL); /* untouched */
	ck_assert_int_eq(MPI_Errhandler_set(MPI_COMM_WORLD, MPI_ERRORS_RETURN), MPI_SUCCESS);
	ck_assert_int_eq(MPI_Errhandler_get(MPI_COMM_WORLD, &eh), MPI_SUCCESS);
	ck_assert(eh == MPI_ERRORS_RETURN);
	ck_assert_int_eq(MPI_Comm_set_errhandler(MPI_COMM_WORLD, 42), MPI_ERR_ARG);
	ck_assert_int_eq(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRHANDLER_NULL), MPI_ERR_ARG);
	/* An invalid communicator is reported through MPI_COMM_WORLD. */
	ck_assert_int_eq(MPI_Comm_set_errhandler(MPI_COMM_NULL, MPI_ERRORS_RETURN), MPI_ERR_COMM);
	ck_assert_int_eq(MPI_Comm_call_errhandler(MPI_COMM_WORLD, MPI_ERR_OTHER), MPI_SUCCESS);
	ck_assert_int_eq(fake.nsent, 0);
}
END_TEST

static void fatal_send_bad_tag(void)
{
	fake_reset(3, 4);
	MPI_Init(NULL, NULL);
	MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN); /* not the world's */
	MPI_Send(NULL, 0, MPI_INT, 0, -4, MPI_COMM_WORLD);
}

START_TEST(errors_are_fatal_by_default)
{
	char err[1024];
	int status = fake_run_child(fatal_send_bad_tag, err, sizeof err);
	ck_assert_int_eq(status, 1);
	ck_assert_str_eq(err, "chanmem: rank 3: MPI_Send: MPI_ERR_TAG: invalid tag\n");
}
END_TEST

static void fatal_invalid_comm(void)
{
	fake_reset(0, 1);
	MPI_Init(NULL, NULL);
	int rank;
	MPI_Comm_rank((MPI_Comm)0x44000777, &rank);
}

START_TEST(fatal_invalid_comm_uses_world)
{
	char err[1024];
	ck_assert_int_eq(fake_run_child(fatal_invalid_comm, err, sizeof err), 1);
	ck_assert_str_eq(err,
	                 "chanmem: rank 0: MPI_Comm_rank: MPI_ERR_COMM: invalid communicator\n");
}
END_TEST

static void call_errhandler_fatal(void)
{
	fake_reset(1, 2);
	MPI_Init(NULL, NULL);
	MPI_Comm_call_errhandler(MPI_COMM_WORLD, MPI_ERR_OTHER);
}

START_TEST(call_errhandler_is_fatal)
{
	char err[1024];
	ck_assert_int_eq(fake_run_child(call_errhandler_fatal, err, sizeof err), 1);
	ck_assert_str_eq(
	    err, "chanmem: rank 1: MPI_Comm_call_errhandler: MPI_ERR_OTHER: known error not in "
	         "this list\n");
}
END_TEST

static int abort_code;
static void do_abort(void)
{
	fake_reset(2, 3);
	MPI_Init(NULL, NULL);
	MPI_Abort(MPI_COMM_WORLD, abort_code);
}

START_TEST(abort_exit_status)
{
	static const int codes[][2] = {{7, 7}, {255, 255}, {0, 1}, {256, 1}, {-3, 1}};
	char err[1024], want[128];
	abort_code = codes[_i][0];
	ck_assert_int_eq(fake_run_child(do_abort, err, sizeof err), codes[_i][1]);
	snprintf(want, sizeof want, "chanmem: rank 2: MPI_Abort(%d)\n", codes[_i][0]);
	ck_assert_str_eq(err, want);
}
END_TEST

static void send_before_init(void)
{
	fake_reset(0, 1);
	MPI_Send(NULL, 0, MPI_INT, 0, 0, MPI_COMM_WORLD);
}

static void send_after_finalize(void)
{
	fake_reset(0, 1);
	MPI_Init(NULL, NULL);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	MPI_Finalize();
	MPI_Send(NULL, 0, MPI_INT, 0, 0, MPI_COMM_WORLD);
}

static void init_twice(void)
{
	fake_reset(0, 1);
	MPI_Init(NULL, NULL);
	MPI_Init(NULL, NULL);
}

static void init_env_broken(void)
{
	fake_reset(0, 1);
	fake.env_fails = 1;
	MPI_Init(NULL, NULL);
}

static void init_transport_fails(void)
{
	fake_reset(4, 8);
	fake.init_fails = 1;
	MPI_Init(NULL, NULL);
}

static void init_unknown_transport(void)
{
	fake_reset(0, 1);
	fake.transport = "carrier-pigeon";
	MPI_Init(NULL, NULL);
}

static void init_thread_bad_level(void)
{
	int provided;
	fake_reset(0, 1);
	MPI_Init_thread(NULL, NULL, 17, &provided);
}

START_TEST(outside_init_is_fatal)
{
	char err[1024];
	ck_assert_int_eq(fake_run_child(send_before_init, err, sizeof err), 1);
	ck_assert_str_eq(err, "chanmem: rank ?: MPI_Send: MPI_ERR_OTHER: called before MPI_Init\n");
	ck_assert_int_eq(fake_run_child(send_after_finalize, err, sizeof err), 1);
	ck_assert_str_eq(err,
	                 "chanmem: rank 0: MPI_Send: MPI_ERR_OTHER: called after MPI_Finalize\n");
	ck_assert_int_eq(fake_run_child(init_twice, err, sizeof err), 1);
	ck_assert_ptr_nonnull(strstr(err, "chanmem: rank 0: MPI_Init: MPI_ERR_OTHER"));
}
END_TEST

START_TEST(init_failures_are_fatal)
{
	char err[1024];
	ck_assert_int_eq(fake_run_child(init_env_broken, err, sizeof err), 1);
	ck_assert_ptr_nonnull(strstr(err, "fake: CHANMEM_SIZE is wrong\n"));
	ck_assert_ptr_nonnull(strstr(err, "MPI_Init: MPI_ERR_OTHER"));
	ck_assert_int_eq(fake_run_child(init_transport_fails, err, sizeof err), 1);
	ck_assert_ptr_nonnull(strstr(err, "chanmem: rank 4: MPI_Init: MPI_ERR_OTHER"));
	ck_assert_int_eq(fake_run_child(init_unknown_transport, err, sizeof err), 1);
	ck_assert_ptr_nonnull(strstr(err, "unknown transport 'carrier-pigeon'"));
	ck_assert_int_eq(fake_run_child(init_thread_bad_level, err, sizeof err), 1);
	ck_assert_ptr_nonnull(strstr(err, "MPI_Init_thread: MPI_ERR_ARG"));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("mpi");
	TCase *env = tcase_create("environment");
	tcase_add_test(env, handles_are_constants);
	tcase_add_test(env, init_and_finalize);
	tcase_add_test(env, world_and_self);
	tcase_add_test(env, transport_choice);
	tcase_add_loop_test(env, thread_levels, 0, 4);
	tcase_add_test(env, versions_and_timers);
	tcase_add_test(env, tag_ub_attribute);
	suite_add_tcase(s, env);
	TCase *types = tcase_create("datatypes");
	tcase_add_test(types, datatype_sizes);
	tcase_add_test(types, get_count_and_elements);
	suite_add_tcase(s, types);
	TCase *errors = tcase_create("errors");
	tcase_add_test(errors, error_strings_and_classes);
	tcase_add_test(errors, errhandler_per_communicator);
	tcase_add_test(errors, errors_are_fatal_by_default);
	tcase_add_test(errors, fatal_invalid_comm_uses_world);
	tcase_add_test(errors, call_errhandler_is_fatal);
	tcase_add_loop_test(errors, abort_exit_status, 0, 5);
	tcase_add_test(errors, outside_init_is_fatal);
	tcase_add_test(errors, init_failures_are_fatal);
	suite_add_tcase(s, errors);
	SRunner *sr = srunner_create(s);
	srunner_set_fork_status(sr, CK_FORK); /* every test starts before MPI_Init */
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
