/* Attributes cached on datatypes: MPI_Type_create_keyval, MPI_Type_set_attr,
 * MPI_Type_get_attr, MPI_Type_delete_attr, MPI_Type_free_keyval, and their
 * callbacks on MPI_Type_dup and MPI_Type_free.
 *
 * usage: type_attr
 *
 * Every rank runs the same local checks; rank 0 prints the callbacks in
 * the order they ran (compared with integration/type_attr.expected):
 * a copy callback that makes a new value, MPI_TYPE_DUP_FN, a keyval that is
 * never copied, a value replaced (the old one deleted), an attribute on a
 * predefined type, a keyval freed while an attribute still uses it (a
 * keyval created next sees no value, though it may get the same handle), a
 * delete callback that fails (MPI_Type_free then fails and the type
 * lives), and the keyval kinds kept apart (a communicator keyval on a
 * type, a type keyval on a communicator: MPI_ERR_KEYVAL), and a duplicate
 * whose copy callbacks fail half-way (no type made, nothing leaked). Then
 * rank 0 sends with a duplicated type to rank 1, which checks the data and
 * the attribute the duplicate carries.
 *
 *   TA_KILL=1   rank 1 raises SIGKILL after its receive (first incarnation
 *               only); its restart must do the same again. */
#include <mpi.h>

#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* What happened, in order: printed by rank 0 at the end. */
static char events[4096];

__attribute__((format(printf, 1, 2))) static void note(const char *fmt, ...)
{
	size_t n = strlen(events);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(events + n, sizeof events - n, fmt, ap);
	va_end(ap);
}

static int copy_plus_100(MPI_Datatype old, int keyval, void *extra, void *in, void *out, int *flag)
{
	(void)old;
	(void)keyval;
	note("  copy callback %d: %ld -> %ld\n", *(int *)extra, (long)(intptr_t)in,
	     (long)(intptr_t)in + 100);
	*(void **)out = (void *)((intptr_t)in + 100);
	*flag = 1;
	return MPI_SUCCESS;
}

static int fail_delete;

static int record_delete(MPI_Datatype type, int keyval, void *value, void *extra)
{
	(void)type;
	(void)keyval;
	note("  delete callback %d: %ld%s\n", *(int *)extra, (long)(intptr_t)value,
	     fail_delete ? " (fails)" : "");
	return fail_delete ? MPI_ERR_OTHER : MPI_SUCCESS;
}

static int copy_fails(MPI_Datatype old, int keyval, void *extra, void *in, void *out, int *flag)
{
	(void)old;
	(void)keyval;
	(void)in;
	(void)out;
	note("  copy callback %d fails\n", *(int *)extra);
	*flag = 0;
	return MPI_ERR_OTHER;
}

/* The value cached under keyval, or -1 for none. */
static long get(MPI_Datatype t, int keyval)
{
	void *v;
	int flag;
	TU_MPI(MPI_Type_get_attr(t, keyval, &v, &flag));
	return flag ? (long)(intptr_t)v : -1;
}

static const char *error_name(int rc)
{
	int cls;
	TU_MPI(MPI_Error_class(rc, &cls));
	return tu_err_name(cls);
}

int main(int argc, char **argv)
{
	tu_init(&argc, &argv, "type_attr");
	tu_require_size(2, 2);
	static int id_copy = 1, id_dup = 2, id_none = 3;
	int k_copy, k_dup, k_none;
	TU_MPI(MPI_Type_create_keyval(copy_plus_100, record_delete, &k_copy, &id_copy));
	TU_MPI(MPI_Type_create_keyval(MPI_TYPE_DUP_FN, record_delete, &k_dup, &id_dup));
	TU_MPI(MPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, record_delete, &k_none, &id_none));

	MPI_Datatype vec, dup;
	TU_MPI(MPI_Type_vector(4, 1, 2, MPI_INT, &vec));
	TU_MPI(MPI_Type_commit(&vec));
	note("set 5, 6, 7 under keyvals 1, 2, 3 on a vector\n");
	TU_MPI(MPI_Type_set_attr(vec, k_copy, (void *)(intptr_t)5));
	TU_MPI(MPI_Type_set_attr(vec, k_dup, (void *)(intptr_t)6));
	TU_MPI(MPI_Type_set_attr(vec, k_none, (void *)(intptr_t)7));
	note("replace keyval 1's value by 8\n");
	TU_MPI(MPI_Type_set_attr(vec, k_copy, (void *)(intptr_t)8));
	note("duplicate the vector\n");
	TU_MPI(MPI_Type_dup(vec, &dup));
	note("  vector: %ld %ld %ld, duplicate: %ld %ld %ld\n", get(vec, k_copy), get(vec, k_dup),
	     get(vec, k_none), get(dup, k_copy), get(dup, k_dup), get(dup, k_none));
	note("delete keyval 2 from the vector\n");
	TU_MPI(MPI_Type_delete_attr(vec, k_dup));
	note("free the vector\n");
	TU_MPI(MPI_Type_free(&vec));

	note("set 9 under keyval 3 on MPI_INT, free keyval 3\n");
	TU_MPI(MPI_Type_set_attr(MPI_INT, k_none, (void *)(intptr_t)9));
	TU_MPI(MPI_Type_free_keyval(&k_none));
	TU_CHECK(k_none == MPI_KEYVAL_INVALID, "freed keyval not MPI_KEYVAL_INVALID");
	/* A keyval created now may reuse keyval 3's handle: the value cached
	 * under keyval 3 is not its. */
	int k_new;
	TU_MPI(
	    MPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, MPI_TYPE_NULL_DELETE_FN, &k_new, NULL));
	note("  a new keyval on MPI_INT: %ld\n", get(MPI_INT, k_new));
	TU_MPI(MPI_Type_free_keyval(&k_new));
	TU_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));

	/* Keyvals of one kind are invalid on the other. */
	int ck;
	void *v;
	int flag;
	TU_MPI(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &ck, NULL));
	note("communicator keyval on a type: %s\n",
	     error_name(MPI_Type_set_attr(MPI_INT, ck, NULL)));
	note("type keyval on a communicator: set %s, get %s\n",
	     error_name(MPI_Comm_set_attr(MPI_COMM_WORLD, k_copy, NULL)),
	     error_name(MPI_Comm_get_attr(MPI_COMM_WORLD, k_copy, &v, &flag)));
	note("attribute of MPI_DATATYPE_NULL: %s\n",
	     error_name(MPI_Type_get_attr(MPI_DATATYPE_NULL, k_copy, &v, &flag)));
	note("delete with nothing cached: %s\n", error_name(MPI_Type_delete_attr(MPI_INT, k_copy)));
	TU_MPI(MPI_Comm_free_keyval(&ck));

	fail_delete = 1;
	MPI_Datatype keep = dup;
	note("free the duplicate, its delete callback failing: %s\n",
	     error_name(MPI_Type_free(&dup)));
	fail_delete = 0;
	TU_CHECK(dup == keep, "a failed MPI_Type_free changed the handle");
	TU_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
	note("  the duplicate lives: keyval 1 = %ld\n", get(dup, k_copy));

	/* The duplicate in use: rank 0 sends 4 ints spread out, rank 1 receives
	 * them packed. */
	int spread[8], packed[4];
	if (tu_rank == 0) {
		for (int i = 0; i < 8; i++)
			spread[i] = i * 11;
		TU_MPI(MPI_Send(spread, 1, dup, 1, 1, MPI_COMM_WORLD));
		int ok;
		TU_MPI(MPI_Recv(&ok, 1, MPI_INT, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
		note("sent with the duplicate: %s\n",
		     ok ? "rank 1 received 0 22 44 66" : "rank 1 received other data");
	} else {
		TU_MPI(MPI_Recv(packed, 4, MPI_INT, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
		const char *kill = getenv("TA_KILL"), *inc = getenv("CHANMEM_INCARNATION");
		if (kill && strcmp(kill, "1") == 0 && (!inc || strcmp(inc, "0") == 0))
			raise(SIGKILL);
		int ok = packed[0] == 0 && packed[1] == 22 && packed[2] == 44 && packed[3] == 66;
		TU_MPI(MPI_Send(&ok, 1, MPI_INT, 0, 2, MPI_COMM_WORLD));
	}
	/* A duplicate whose copying fails half-way, and the delete callback of
	 * what was copied already fails too: no duplicate, nothing left behind
	 * (an address sanitizer build reports what leaks). */
	static int id_fail = 4;
	int k_fail;
	TU_MPI(MPI_Type_create_keyval(copy_fails, record_delete, &k_fail, &id_fail));
	MPI_Datatype pair, pair_dup = MPI_INT;
	TU_MPI(MPI_Type_contiguous(2, MPI_INT, &pair));
	note("set 10 under keyval 4, then 11 under keyval 1 on a contiguous type\n");
	TU_MPI(MPI_Type_set_attr(pair, k_fail, (void *)(intptr_t)10));
	TU_MPI(MPI_Type_set_attr(pair, k_copy, (void *)(intptr_t)11));
	TU_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
	fail_delete = 1;
	note("duplicate it, keyval 4's copy and keyval 1's delete failing: %s\n",
	     error_name(MPI_Type_dup(pair, &pair_dup)));
	fail_delete = 0;
	TU_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
	TU_CHECK(pair_dup == MPI_DATATYPE_NULL, "a failed MPI_Type_dup left a type");
	note("free the contiguous type\n");
	TU_MPI(MPI_Type_free(&pair));
	TU_MPI(MPI_Type_free_keyval(&k_fail));

	note("free the duplicate\n");
	TU_MPI(MPI_Type_free(&dup));
	note("free keyvals 1 and 2\n");
	TU_MPI(MPI_Type_free_keyval(&k_copy));
	TU_MPI(MPI_Type_free_keyval(&k_dup));
	if (tu_rank == 0)
		printf("%s", events);
	return tu_finalize();
}
