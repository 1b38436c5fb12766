/* Attribute caching on communicators: keyvals and the attribute calls
 * (the lookup, MPI_Comm_get_attr, is in mpi_comm.c with the predefined
 * attributes). Attributes are a short list per communicator; copy and
 * delete callbacks run as MPI says: copy on MPI_Comm_dup, delete on
 * MPI_Comm_free, MPI_Comm_delete_attr and when a value is replaced. */
#include <stdlib.h>

#include "mpi_internal.h"

int chanmem_comm_dup_fn(MPI_Comm oldcomm, int comm_keyval, void *extra_state,
                        void *attribute_val_in, void *attribute_val_out, int *flag)
{
	(void)oldcomm;
	(void)comm_keyval;
	(void)extra_state;
	*(void **)attribute_val_out = attribute_val_in;
	*flag = 1;
	return MPI_SUCCESS;
}

static int is_predefined_key(int keyval)
{
	return keyval == MPI_TAG_UB || keyval == MPI_HOST || keyval == MPI_IO ||
	       keyval == MPI_WTIME_IS_GLOBAL;
}

int MPI_Comm_create_keyval(MPI_Comm_copy_attr_function *comm_copy_attr_fn,
                           MPI_Comm_delete_attr_function *comm_delete_attr_fn, int *comm_keyval,
                           void *extra_state)
{
	CM_MPI_REQUIRE_INIT("MPI_Comm_create_keyval");
	if (!comm_keyval)
		return cm_mpi_raise(NULL, MPI_ERR_ARG, "MPI_Comm_create_keyval");
	struct cm_mpi_keyval *kv = malloc(sizeof *kv);
	if (!kv)
		return cm_mpi_raise(NULL, MPI_ERR_NO_MEM, "MPI_Comm_create_keyval");
	*kv = (struct cm_mpi_keyval){.copy_fn = comm_copy_attr_fn,
	                             .delete_fn = comm_delete_attr_fn,
	                             .extra_state = extra_state,
	                             .refs = 1};
	int rc = cm_mpi_keyval_register(kv, comm_keyval);
	return rc ? cm_mpi_raise(NULL, rc, "MPI_Comm_create_keyval") : MPI_SUCCESS;
}

/* The keyval lives on while attributes use it (their delete callbacks
 * still need it). */
int MPI_Comm_free_keyval(int *comm_keyval)
{
	CM_MPI_REQUIRE_INIT("MPI_Comm_free_keyval");
	if (!comm_keyval || !cm_mpi_keyval_get(*comm_keyval))
		return cm_mpi_raise(NULL, MPI_ERR_KEYVAL, "MPI_Comm_free_keyval");
	cm_mpi_keyval_drop_handle(*comm_keyval);
	*comm_keyval = MPI_KEYVAL_INVALID;
	return MPI_SUCCESS;
}

/* Runs a's delete callback; 0 or its error. */
static int delete_value(struct cm_mpi_comm *c, struct cm_mpi_attr *a)
{
	if (!a->kv->delete_fn)
		return MPI_SUCCESS;
	return a->kv->delete_fn(c->handle, a->keyval, a->value, a->kv->extra_state);
}

static struct cm_mpi_attr **find_attr(struct cm_mpi_comm *c, int keyval)
{
	struct cm_mpi_attr **link = &c->attrs;
	while (*link && (*link)->keyval != keyval)
		link = &(*link)->next;
	return link;
}

/* Adds a new attribute at the head of c's list. */
static int add_attr(struct cm_mpi_comm *c, int keyval, struct cm_mpi_keyval *kv, void *value)
{
	struct cm_mpi_attr *a = malloc(sizeof *a);
	if (!a)
		return MPI_ERR_NO_MEM;
	*a = (struct cm_mpi_attr){.keyval = keyval, .kv = kv, .value = value, .next = c->attrs};
	kv->refs++;
	c->attrs = a;
	return MPI_SUCCESS;
}

static void unlink_attr(struct cm_mpi_attr **link)
{
	struct cm_mpi_attr *a = *link;
	*link = a->next;
	cm_mpi_keyval_unref(a->kv);
	free(a);
}

static int set_attr(MPI_Comm comm, int keyval, void *value, const char *func)
{
	CM_MPI_REQUIRE_INIT(func);
	struct cm_mpi_comm *c = cm_mpi_comm_get(comm);
	if (!c)
		return cm_mpi_raise(NULL, MPI_ERR_COMM, func);
	struct cm_mpi_keyval *kv = cm_mpi_keyval_get(keyval);
	if (!kv) /* the predefined attributes are read-only */
		return cm_mpi_raise(c, MPI_ERR_KEYVAL, func);
	struct cm_mpi_attr **link = find_attr(c, keyval);
	int rc;
	if (*link) {
		rc = delete_value(c, *link);
		if (!rc)
			(*link)->value = value;
	} else {
		rc = add_attr(c, keyval, kv, value);
	}
	return rc ? cm_mpi_raise(c, rc, func) : MPI_SUCCESS;
}

int MPI_Comm_set_attr(MPI_Comm comm, int comm_keyval, void *attribute_val)
{
	return set_attr(comm, comm_keyval, attribute_val, "MPI_Comm_set_attr");
}

int MPI_Attr_put(MPI_Comm comm, int keyval, void *attribute_val)
{
	return set_attr(comm, keyval, attribute_val, "MPI_Attr_put");
}

static int delete_attr(MPI_Comm comm, int keyval, const char *func)
{
	CM_MPI_REQUIRE_INIT(func);
	struct cm_mpi_comm *c = cm_mpi_comm_get(comm);
	if (!c)
		return cm_mpi_raise(NULL, MPI_ERR_COMM, func);
	if (!cm_mpi_keyval_get(keyval) || is_predefined_key(keyval))
		return cm_mpi_raise(c, MPI_ERR_KEYVAL, func);
	struct cm_mpi_attr **link = find_attr(c, keyval);
	if (!*link)
		return cm_mpi_raise(c, MPI_ERR_KEYVAL, func); /* nothing cached under it */
	int rc = delete_value(c, *link);
	if (rc)
		return cm_mpi_raise(c, rc, func);
	unlink_attr(link);
	return MPI_SUCCESS;
}

int MPI_Comm_delete_attr(MPI_Comm comm, int comm_keyval)
{
	return delete_attr(comm, comm_keyval, "MPI_Comm_delete_attr");
}

int MPI_Attr_delete(MPI_Comm comm, int keyval)
{
	return delete_attr(comm, keyval, "MPI_Attr_delete");
}

int MPI_Keyval_create(MPI_Copy_function *copy_fn, MPI_Delete_function *delete_fn, int *keyval,
                      void *extra_state)
{
	return MPI_Comm_create_keyval(copy_fn, delete_fn, keyval, extra_state);
}

int MPI_Keyval_free(int *keyval)
{
	return MPI_Comm_free_keyval(keyval);
}

int cm_mpi_attr_copy_all(struct cm_mpi_comm *from, struct cm_mpi_comm *to)
{
	for (struct cm_mpi_attr *a = from->attrs; a; a = a->next) {
		if (!a->kv->copy_fn)
			continue;
		void *copy = NULL;
		int flag = 0;
		int rc = a->kv->copy_fn(from->handle, a->keyval, a->kv->extra_state, a->value,
		                        &copy, &flag);
		if (rc)
			return rc;
		if (flag && (rc = add_attr(to, a->keyval, a->kv, copy)))
			return rc;
	}
	return MPI_SUCCESS;
}

int cm_mpi_attr_delete_all(struct cm_mpi_comm *c)
{
	while (c->attrs) {
		int rc = delete_value(c, c->attrs);
		if (rc)
			return rc;
		unlink_attr(&c->attrs);
	}
	return MPI_SUCCESS;
}
