/* Decoding datatypes: MPI_Type_get_envelope and MPI_Type_get_contents.
 *
 * Every constructor (mpi_type_create.c) records its call in the new type
 * (struct cm_mpi_contents) in the order the standard gives for its
 * combiner. The datatypes it names are referenced, so the record stays
 * valid after the program frees them; get_contents hands each derived one
 * back as a fresh handle (a copy of the type, record included), as the
 * standard wants, since the original handle may be gone or reused. */
#include <stdlib.h>
#include <string.h>

#include "mpi_internal.h"

static struct cm_mpi_contents *contents_copy(const struct cm_mpi_contents *from)
{
	struct cm_mpi_contents *c =
	    cm_mpi_contents_new(from->combiner, from->nints, from->naddrs, from->ntypes);
	if (!c)
		return NULL;
	memcpy(c->ints, from->ints, (size_t)from->nints * sizeof *c->ints);
	memcpy(c->addrs, from->addrs, (size_t)from->naddrs * sizeof *c->addrs);
	memcpy(c->types, from->types, (size_t)from->ntypes * sizeof *c->types);
	cm_mpi_contents_hold(c);
	return c;
}

/* A new handle for t: t itself if predefined, else a registered copy. */
static int handle_for(const struct cm_mpi_datatype *t, MPI_Datatype *out)
{
	if (!t->derived) {
		*out = t->handle;
		return MPI_SUCCESS;
	}
	struct cm_mpi_datatype *copy = malloc(sizeof *copy);
	struct cm_mpi_block *blocks = malloc(((size_t)t->nblocks + 1) * sizeof *blocks);
	struct cm_mpi_contents *contents = t->contents ? contents_copy(t->contents) : NULL;
	if (!copy || !blocks || (t->contents && !contents)) {
		free(copy);
		free(blocks);
		cm_mpi_contents_free(contents);
		return MPI_ERR_NO_MEM;
	}
	*copy = *t;
	memcpy(blocks, t->blocks, (size_t)t->nblocks * sizeof *blocks);
	copy->blocks = blocks;
	copy->contents = contents;
	int rc = cm_mpi_type_register(copy);
	if (rc == MPI_SUCCESS)
		*out = copy->handle;
	return rc;
}

int MPI_Type_get_envelope(MPI_Datatype datatype, int *num_integers, int *num_addresses,
                          int *num_datatypes, int *combiner)
{
	CM_MPI_REQUIRE_INIT("MPI_Type_get_envelope");
	const struct cm_mpi_datatype *t = cm_mpi_type_get(datatype);
	if (!t)
		return cm_mpi_raise(NULL, MPI_ERR_TYPE, "MPI_Type_get_envelope");
	if (!num_integers || !num_addresses || !num_datatypes || !combiner)
		return cm_mpi_raise(NULL, MPI_ERR_ARG, "MPI_Type_get_envelope");
	const struct cm_mpi_contents *c = t->contents;
	*num_integers = c ? c->nints : 0;
	*num_addresses = c ? c->naddrs : 0;
	*num_datatypes = c ? c->ntypes : 0;
	*combiner = c ? c->combiner : MPI_COMBINER_NAMED;
	return MPI_SUCCESS;
}

int MPI_Type_get_contents(MPI_Datatype datatype, int max_integers, int max_addresses,
                          int max_datatypes, int array_of_integers[], MPI_Aint array_of_addresses[],
                          MPI_Datatype array_of_datatypes[])
{
	CM_MPI_REQUIRE_INIT("MPI_Type_get_contents");
	const struct cm_mpi_datatype *t = cm_mpi_type_get(datatype);
	if (!t)
		return cm_mpi_raise(NULL, MPI_ERR_TYPE, "MPI_Type_get_contents");
	const struct cm_mpi_contents *c = t->contents;
	/* A predefined type has no constructor arguments to give. */
	if (!c || max_integers < c->nints || max_addresses < c->naddrs ||
	    max_datatypes < c->ntypes || (c->nints && !array_of_integers) ||
	    (c->naddrs && !array_of_addresses) || (c->ntypes && !array_of_datatypes))
		return cm_mpi_raise(NULL, MPI_ERR_ARG, "MPI_Type_get_contents");
	MPI_Datatype *handles = malloc(((size_t)c->ntypes + 1) * sizeof *handles);
	if (!handles)
		return cm_mpi_raise(NULL, MPI_ERR_NO_MEM, "MPI_Type_get_contents");
	int made = 0, rc = MPI_SUCCESS;
	while (made < c->ntypes && (rc = handle_for(c->types[made], &handles[made])) == MPI_SUCCESS)
		made++;
	if (rc != MPI_SUCCESS) {
		/* All or nothing: the copies made so far go. */
		for (int i = 0; i < made; i++)
			if (c->types[i]->derived)
				MPI_Type_free(&handles[i]);
		free(handles);
		return cm_mpi_raise(NULL, rc, "MPI_Type_get_contents");
	}
	if (c->nints)
		memcpy(array_of_integers, c->ints, (size_t)c->nints * sizeof *c->ints);
	if (c->naddrs)
		memcpy(array_of_addresses, c->addrs, (size_t)c->naddrs * sizeof *c->addrs);
	if (c->ntypes)
		memcpy(array_of_datatypes, handles, (size_t)c->ntypes * sizeof *handles);
	free(handles);
	return MPI_SUCCESS;
}
