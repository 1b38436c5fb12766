/* The everyday calls without communication: info objects, MPI_Pcontrol,
 * handle conversions, MPI_Type_match_size, the status setters; plus a
 * matched receive that truncates. Rank 0 prints what it checked; every
 * error class is printed by name (MPI_ERRORS_RETURN). */
#include <mpi.h>

#include <stdio.h>
#include <string.h>

#include "testutil.h"

static void show(const char *what, int rc)
{
	printf("%s: %s\n", what, tu_err_name(rc));
}

static void info_calls(void)
{
	MPI_Info info, dup;
	char value[MPI_MAX_INFO_VAL], key[MPI_MAX_INFO_KEY];
	int flag, n, len;
	MPI_Info_create(&info);
	MPI_Info_set(info, "wdir", "/tmp");
	MPI_Info_set(info, "host", "a");
	MPI_Info_set(info, "host", "node-b"); /* replaces, keeps its place */
	MPI_Info_get_nkeys(info, &n);
	printf("nkeys %d\n", n);
	for (int i = 0; i < n; i++) {
		MPI_Info_get_nthkey(info, i, key);
		MPI_Info_get_valuelen(info, key, &len, &flag);
		MPI_Info_get(info, key, MPI_MAX_INFO_VAL - 1, value, &flag);
		printf("key %d: %s=%s (%d)\n", i, key, value, len);
	}
	MPI_Info_get(info, "host", 3, value, &flag);
	printf("host cut to 3: %s\n", value);
	MPI_Info_get(info, "none", MPI_MAX_INFO_VAL - 1, value, &flag);
	printf("none: flag %d\n", flag);
	MPI_Info_dup(info, &dup);
	MPI_Info_delete(info, "wdir");
	MPI_Info_get_nkeys(info, &n);
	printf("after delete: %d keys, dup ", n);
	MPI_Info_get_nkeys(dup, &n);
	printf("%d keys\n", n);
	show("delete missing key", MPI_Info_delete(info, "wdir"));
	show("empty key", MPI_Info_set(info, "", "x"));
	char longkey[MPI_MAX_INFO_KEY + 8];
	memset(longkey, 'k', sizeof longkey - 1);
	longkey[sizeof longkey - 1] = '\0';
	show("long key", MPI_Info_set(info, longkey, "x"));
	show("empty value", MPI_Info_set(info, "k", ""));
	show("nthkey out of range", MPI_Info_get_nthkey(info, 5, key));
	show("null info", MPI_Info_set(MPI_INFO_NULL, "k", "v"));
	MPI_Info_get_nkeys(MPI_INFO_ENV, &n);
	printf("MPI_INFO_ENV keys %d\n", n);
	show("free MPI_INFO_ENV", MPI_Info_free(&(MPI_Info){MPI_INFO_ENV}));
	MPI_Info_free(&info);
	MPI_Info_free(&dup);
	printf("freed: %d %d\n", info == MPI_INFO_NULL, dup == MPI_INFO_NULL);
	show("free again", MPI_Info_free(&info));
}

static void handle_calls(void)
{
	MPI_Fint f = MPI_Comm_c2f(MPI_COMM_WORLD);
	int size;
	MPI_Comm_size(MPI_Comm_f2c(f), &size);
	printf("comm round trip: %d\n", MPI_Comm_f2c(f) == MPI_COMM_WORLD);
	MPI_Datatype t = MPI_Type_f2c(MPI_Type_c2f(MPI_DOUBLE));
	int tsize;
	MPI_Type_size(t, &tsize);
	printf("type round trip: %d size %d\n", t == MPI_DOUBLE, tsize);
	MPI_Group g;
	MPI_Comm_group(MPI_COMM_WORLD, &g);
	printf("group round trip: %d\n", MPI_Group_f2c(MPI_Group_c2f(g)) == g);
	MPI_Group_free(&g);
	printf("op, info, errhandler, request, message: %d %d %d %d %d\n",
	       MPI_Op_f2c(MPI_Op_c2f(MPI_SUM)) == MPI_SUM,
	       MPI_Info_f2c(MPI_Info_c2f(MPI_INFO_NULL)) == MPI_INFO_NULL,
	       MPI_Errhandler_f2c(MPI_Errhandler_c2f(MPI_ERRORS_RETURN)) == MPI_ERRORS_RETURN,
	       MPI_Request_f2c(MPI_Request_c2f(MPI_REQUEST_NULL)) == MPI_REQUEST_NULL,
	       MPI_Message_f2c(MPI_Message_c2f(MPI_MESSAGE_NULL)) == MPI_MESSAGE_NULL);
	MPI_Status st = {.MPI_SOURCE = 3, .MPI_TAG = 7}, back;
	MPI_Fint fs[MPI_F_STATUS_SIZE];
	MPI_Status_set_elements(&st, MPI_INT, 5);
	MPI_Status_c2f(&st, fs);
	MPI_Status_f2c(fs, &back);
	int count;
	MPI_Get_count(&back, MPI_INT, &count);
	printf("status round trip: %d %d count %d\n", back.MPI_SOURCE, back.MPI_TAG, count);
	printf("pcontrol: %s\n", tu_err_name(MPI_Pcontrol(1)));
}

static void type_calls(void)
{
	static const struct {
		int cls, size;
	} asks[] = {{MPI_TYPECLASS_INTEGER, 1}, {MPI_TYPECLASS_INTEGER, 4},
	            {MPI_TYPECLASS_INTEGER, 8}, {MPI_TYPECLASS_REAL, 4},
	            {MPI_TYPECLASS_REAL, 8},    {MPI_TYPECLASS_COMPLEX, 16}};
	for (size_t i = 0; i < sizeof asks / sizeof *asks; i++) {
		MPI_Datatype t;
		MPI_Type_match_size(asks[i].cls, asks[i].size, &t);
		int s;
		MPI_Type_size(t, &s);
		printf("match_size class %d size %d: size %d\n", asks[i].cls, asks[i].size, s);
	}
	MPI_Datatype t;
	show("match_size 3", MPI_Type_match_size(MPI_TYPECLASS_INTEGER, 3, &t));
	/* Elements of a derived type: a vector of 2 x 3 doubles. */
	MPI_Datatype v;
	MPI_Type_vector(2, 3, 4, MPI_DOUBLE, &v);
	MPI_Type_commit(&v);
	MPI_Status st;
	int count, elems;
	MPI_Status_set_elements(&st, v, 8);
	MPI_Get_count(&st, v, &count);
	MPI_Get_elements(&st, v, &elems);
	printf("set_elements 8 of vector: count %d elements %d\n",
	       count == MPI_UNDEFINED ? -1 : count, elems);
	MPI_Count ex;
	MPI_Status_set_elements_x(&st, MPI_DOUBLE, 12);
	MPI_Get_elements_x(&st, v, &ex);
	MPI_Get_count(&st, v, &count);
	printf("set_elements_x 12: count %d elements %lld\n", count, (long long)ex);
	MPI_Type_free(&v);
	int flag;
	MPI_Status_set_cancelled(&st, 1);
	MPI_Test_cancelled(&st, &flag);
	printf("set_cancelled: %d\n", flag);
}

/* A matched message longer than the receive buffer: MPI_ERR_TRUNCATE,
 * what fits is stored. */
static void mrecv_truncate(void)
{
	int data[4] = {1, 2, 3, 4}, got[4] = {0};
	MPI_Send(data, 4, MPI_INT, 0, 9, MPI_COMM_SELF);
	MPI_Message m;
	MPI_Status st;
	MPI_Mprobe(0, 9, MPI_COMM_SELF, &m, &st);
	int rc = MPI_Mrecv(got, 2, MPI_INT, &m, &st);
	printf("mrecv 4 into 2: %s, got %d %d %d\n", tu_err_name(rc), got[0], got[1], got[2]);
	show("mrecv null message", MPI_Mrecv(got, 1, MPI_INT, &m, &st));
}

int main(int argc, char **argv)
{
	tu_init(&argc, &argv, "mpi_misc");
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
	int rank;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	if (rank == 0) {
		info_calls();
		handle_calls();
		type_calls();
		mrecv_truncate();
	}
	MPI_Finalize();
	return 0;
}
