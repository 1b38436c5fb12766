/* Attribute caching on communicators and datatypes: keyvals and the
 * attribute calls (the communicator lookup, MPI_Comm_get_attr, is in
 * mpi_comm.c with the predefined attributes). Attributes are a short list
 * per object; copy and delete callbacks run as MPI says: copy on
 * MPI_Comm_dup / MPI_Type_dup, delete on MPI_Comm_free / MPI_Type_free,
 * MPI_*_delete_attr and when a value is replaced. */
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

int chanmem_type_dup_fn(MPI_Datatype oldtype, int type_keyval, void *extra_state,
                        void *attribute_val_in, void *attribute_val_out, int *flag)
{
	return chanmem_comm_dup_fn(oldtype, type_keyval, extra_state, attribute_val_in,
	                           attribute_val_out, flag);
}

static int is_predefined_key(int keyval)
{
	return keyval == MPI_TAG_UB || keyval == MPI_HOST || keyval == MPI_IO ||
	       keyval == MPI_WTIME_IS_GLOBAL;
}

/* ---- the lists, for either kind of object ---- */

/* Runs a's delete callback; 0 or its error. */
static int delete_value(int handle, struct cm_mpi_attr *a)
{
	if (!a->kv->delete_fn)
		return MPI_SUCCESS;
	return a->kv->delete_fn(handle, a->keyval, a->value, a->kv->extra_state);
}

/* By the keyval itself, not its handle: a freed keyval's handle names the
 * next keyval created, and the attributes left under the old one must not
 * show through it. */
static struct cm_mpi_attr **find_attr(struct cm_mpi_attr **list, const struct cm_mpi_keyval *kv)
{
	struct cm_mpi_attr **link = list;
	while (*link && (*link)->kv != kv)
		link = &(*link)->next;
	return link;
}

/* Adds a new attribute at the head of the list. */
static int add_attr(struct cm_mpi_attr **list, int keyval, struct cm_mpi_keyval *kv, void *value)
{
	struct cm_mpi_attr *a = malloc(sizeof *a);
	if (!a)
		return MPI_ERR_NO_MEM;
	*a = (struct cm_mpi_attr){.keyval = keyval, .kv = kv, .value = value, .next = *list};
	kv->refs++;
	*list = a;
	return MPI_SUCCESS;
}

static void unlink_attr(struct cm_mpi_attr **link)
{
	struct cm_mpi_attr *a = *link;
	*link = a->next;
	cm_mpi_keyval_unref(a->kv);
	free(a);
}

/* MPI_*_set_attr on a list: a replaced value is deleted first. */
static int list_set(struct cm_mpi_attr **list, int handle, int keyval, struct cm_mpi_keyval *kv,
                    void *value)
{
	struct cm_mpi_attr **link = find_attr(list, kv);
	if (!*link)
		return add_attr(list, keyval, kv, value);
	int rc = delete_value(handle, *link);
	if (!rc)
		(*link)->value = value;
	return rc;
}

/* MPI_*_delete_attr on a list: MPI_ERR_KEYVAL when nothing is cached. */
static int list_delete(struct cm_mpi_attr **list, int handle, const struct cm_mpi_keyval *kv)
{
	struct cm_mpi_attr **link = find_attr(list, kv);
	if (!*link)
		return MPI_ERR_KEYVAL;
	int rc = delete_value(handle, *link);
	if (!rc)
		unlink_attr(link);
	return rc;
}

int cm_mpi_attr_copy_all(struct cm_mpi_attr *from, int from_handle, struct cm_mpi_attr **to)
{
	for (struct cm_mpi_attr *a = from; a; a = a->next) {
		if (!a->kv->copy_fn)
			continue;
		void *copy = NULL;
		int flag = 0;
		int rc = a->kv->copy_fn(from_handle, a->keyval, a->kv->extra_state, a->value, &copy,
		                        &flag);
		if (rc)
			return rc;
		if (flag && (rc = add_attr(to, a->keyval, a->kv, copy)))
			return rc;
	}
	return MPI_SUCCESS;
}

int cm_mpi_attr_delete_all(struct cm_mpi_attr **list, int handle)
{
	while (*list) {
		int rc = delete_value(handle, *list);
		if (rc)
			return rc;
		unlink_attr(list);
	}
	return MPI_SUCCESS;
}

void cm_mpi_attr_discard_all(struct cm_mpi_attr **list)
{
	while (*list)
		unlink_attr(list);
}

/* ---- keyvals ---- */

static int create_keyval(MPI_Comm_copy_attr_function *copy_fn,
                         MPI_Comm_delete_attr_function *delete_fn, int *keyval, void *extra_state,
                         enum cm_mpi_keyval_kind kind, const char *func)
{
	CM_MPI_REQUIRE_INIT(func);
	if (!keyval)
		return cm_mpi_raise(NULL, MPI_ERR_ARG, func);
	struct cm_mpi_keyval *kv = malloc(sizeof *kv);
	if (!kv)
		return cm_mpi_raise(NULL, MPI_ERR_NO_MEM, func);
	*kv = (struct cm_mpi_keyval){.copy_fn = copy_fn,
	                             .delete_fn = delete_fn,
	                             .extra_state = extra_state,
	                             .kind = kind,
	                             .refs = 1};
	int rc = cm_mpi_keyval_register(kv, keyval);
	return rc ? cm_mpi_raise(NULL, rc, func) : MPI_SUCCESS;
}

/* The keyval lives on while attributes use it (their delete callbacks
 * still need it). */
static int free_keyval(int *keyval, enum cm_mpi_keyval_kind kind, const char *func)
{
	CM_MPI_REQUIRE_INIT(func);
	if (!keyval || !cm_mpi_keyval_get(*keyval, kind))
		return cm_mpi_raise(NULL, MPI_ERR_KEYVAL, func);
	cm_mpi_keyval_drop_handle(*keyval);
	*keyval = MPI_KEYVAL_INVALID;
	return MPI_SUCCESS;
}

int MPI_Comm_create_keyval(MPI_Comm_copy_attr_function *comm_copy_attr_fn,
                           MPI_Comm_delete_attr_function *comm_delete_attr_fn, int *comm_keyval,
                           void *extra_state)
{
	return create_keyval(comm_copy_attr_fn, comm_delete_attr_fn, comm_keyval, extra_state,
	                     CM_KEYVAL_COMM, "MPI_Comm_create_keyval");
}

int MPI_Comm_free_keyval(int *comm_keyval)
{
	return free_keyval(comm_keyval, CM_KEYVAL_COMM, "MPI_Comm_free_keyval");
}

int MPI_Type_create_keyval(MPI_Type_copy_attr_function *type_copy_attr_fn,
                           MPI_Type_delete_attr_function *type_delete_attr_fn, int *type_keyval,
                           void *extra_state)
{
	return create_keyval(type_copy_attr_fn, type_delete_attr_fn, type_keyval, extra_state,
	                     CM_KEYVAL_TYPE, "MPI_Type_create_keyval");
}

int MPI_Type_free_keyval(int *type_keyval)
{
	return free_keyval(type_keyval, CM_KEYVAL_TYPE, "MPI_Type_free_keyval");
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

/* ---- on communicators ---- */

static int comm_set_attr(MPI_Comm comm, int keyval, void *value, const char *func)
{
	CM_MPI_REQUIRE_INIT(func);
	struct cm_mpi_comm *c = cm_mpi_comm_get(comm);
	if (!c)
		return cm_mpi_raise(NULL, MPI_ERR_COMM, func);
	struct cm_mpi_keyval *kv = cm_mpi_keyval_get(keyval, CM_KEYVAL_COMM);
	if (!kv) /* the predefined attributes are read-only */
		return cm_mpi_raise(c, MPI_ERR_KEYVAL, func);
	int rc = list_set(&c->attrs, c->handle, keyval, kv, value);
	return rc ? cm_mpi_raise(c, rc, func) : MPI_SUCCESS;
}

int MPI_Comm_set_attr(MPI_Comm comm, int comm_keyval, void *attribute_val)
{
	return comm_set_attr(comm, comm_keyval, attribute_val, "MPI_Comm_set_attr");
}

int MPI_Attr_put(MPI_Comm comm, int keyval, void *attribute_val)
{
	return comm_set_attr(comm, keyval, attribute_val, "MPI_Attr_put");
}

static int comm_delete_attr(MPI_Comm comm, int keyval, const char *func)
{
	CM_MPI_REQUIRE_INIT(func);
	struct cm_mpi_comm *c = cm_mpi_comm_get(comm);
	if (!c)
		return cm_mpi_raise(NULL, MPI_ERR_COMM, func);
	struct cm_mpi_keyval *kv = cm_mpi_keyval_get(keyval, CM_KEYVAL_COMM);
	if (!kv || is_predefined_key(keyval))
		return cm_mpi_raise(c, MPI_ERR_KEYVAL, func);
	int rc = list_delete(&c->attrs, c->handle, kv);
	return rc ? cm_mpi_raise(c, rc, func) : MPI_SUCCESS;
}

int MPI_Comm_delete_attr(MPI_Comm comm, int comm_keyval)
{
	return comm_delete_attr(comm, comm_keyval, "MPI_Comm_delete_attr");
}

int MPI_Attr_delete(MPI_Comm comm, int keyval)
{
	return comm_delete_attr(comm, keyval, "MPI_Attr_delete");
}

/* ---- on datatypes ---- */

/* The type's list and its keyval, or an error class. */
static int type_and_keyval(MPI_Datatype datatype, int keyval, struct cm_mpi_attr ***list,
                           struct cm_mpi_keyval **kv)
{
	*list = cm_mpi_type_attrs(datatype);
	if (!*list)
		return MPI_ERR_TYPE;
	*kv = cm_mpi_keyval_get(keyval, CM_KEYVAL_TYPE);
	return *kv ? MPI_SUCCESS : MPI_ERR_KEYVAL;
}

int MPI_Type_set_attr(MPI_Datatype datatype, int type_keyval, void *attribute_val)
{
	CM_MPI_REQUIRE_INIT("MPI_Type_set_attr");
	struct cm_mpi_attr **list;
	struct cm_mpi_keyval *kv;
	int rc = type_and_keyval(datatype, type_keyval, &list, &kv);
	if (!rc)
		rc = list_set(list, datatype, type_keyval, kv, attribute_val);
	return rc ? cm_mpi_raise(NULL, rc, "MPI_Type_set_attr") : MPI_SUCCESS;
}

int MPI_Type_get_attr(MPI_Datatype datatype, int type_keyval, void *attribute_val, int *flag)
{
	CM_MPI_REQUIRE_INIT("MPI_Type_get_attr");
	struct cm_mpi_attr **list;
	struct cm_mpi_keyval *kv;
	int rc = type_and_keyval(datatype, type_keyval, &list, &kv);
	if (!rc && (!attribute_val || !flag))
		rc = MPI_ERR_ARG;
	if (rc)
		return cm_mpi_raise(NULL, rc, "MPI_Type_get_attr");
	struct cm_mpi_attr *a = *find_attr(list, kv);
	*flag = a != NULL;
	if (a)
		*(void **)attribute_val = a->value;
	return MPI_SUCCESS;
}

int MPI_Type_delete_attr(MPI_Datatype datatype, int type_keyval)
{
	CM_MPI_REQUIRE_INIT("MPI_Type_delete_attr");
	struct cm_mpi_attr **list;
	struct cm_mpi_keyval *kv;
	int rc = type_and_keyval(datatype, type_keyval, &list, &kv);
	if (!rc)
		rc = list_delete(list, datatype, kv);
	return rc ? cm_mpi_raise(NULL, rc, "MPI_Type_delete_attr") : MPI_SUCCESS;
}
