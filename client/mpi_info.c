/* Info objects: ordered (key, value) string pairs a program hands to calls
 * that take hints. Nothing in the library acts on a hint, so an info is
 * only stored and given back; the calls still check what MPI requires of
 * keys and values so a program that is wrong here fails here too. */
#include <stdlib.h>
#include <string.h>

#include "mpi_internal.h"

#define CM_KIND_INFO 0x5c000000u

struct info_pair {
	char *key;
	char *value;
};

struct info {
	int npairs;
	int cap;
	struct info_pair *pairs; /* in the order the keys were first set */
};

/* Slot 0 is MPI_INFO_ENV: predefined, empty, never freed. */
static struct info env_info;
static struct info **infos;
static unsigned ninfos = 1, infos_cap;

static struct info *info_get(MPI_Info h)
{
	if (CM_HANDLE_KIND(h) != CM_KIND_INFO)
		return NULL;
	unsigned i = CM_HANDLE_INDEX(h);
	if (i == 0)
		return &env_info;
	return i < ninfos ? infos[i] : NULL;
}

static int new_handle(struct info *in, MPI_Info *out)
{
	unsigned i;
	for (i = 1; i < ninfos; i++)
		if (!infos[i])
			break;
	if (i == ninfos) {
		if (ninfos > CM_HANDLE_INDEX_MAX)
			return MPI_ERR_NO_MEM;
		if (ninfos >= infos_cap) {
			unsigned cap = infos_cap ? infos_cap * 2 : 16;
			struct info **n = realloc(infos, cap * sizeof *n);
			if (!n)
				return MPI_ERR_NO_MEM;
			infos = n;
			infos_cap = cap;
		}
		ninfos++;
	}
	infos[i] = in;
	*out = (MPI_Info)(CM_KIND_INFO | i);
	return MPI_SUCCESS;
}

static void info_destroy(struct info *in)
{
	for (int i = 0; i < in->npairs; i++) {
		free(in->pairs[i].key);
		free(in->pairs[i].value);
	}
	free(in->pairs);
	free(in);
}

/* MPI_ERR_INFO_KEY for a key that is empty or too long. */
static int check_key(const char *key)
{
	if (!key)
		return MPI_ERR_ARG;
	size_t n = strnlen(key, MPI_MAX_INFO_KEY);
	return n == 0 || n >= MPI_MAX_INFO_KEY ? MPI_ERR_INFO_KEY : MPI_SUCCESS;
}

static int find(const struct info *in, const char *key)
{
	for (int i = 0; i < in->npairs; i++)
		if (strcmp(in->pairs[i].key, key) == 0)
			return i;
	return -1;
}

/* The info behind h for a call that reads it, or the error class. Errors
 * go to MPI_COMM_WORLD's handler: an info belongs to no communicator. */
static int lookup(MPI_Info h, const char *key, struct info **in)
{
	*in = info_get(h);
	if (!*in)
		return MPI_ERR_INFO;
	return key ? check_key(key) : MPI_SUCCESS;
}

int MPI_Info_create(MPI_Info *info)
{
	CM_MPI_REQUIRE_INIT("MPI_Info_create");
	if (!info)
		return cm_mpi_raise(NULL, MPI_ERR_ARG, "MPI_Info_create");
	struct info *in = calloc(1, sizeof *in);
	int rc = in ? new_handle(in, info) : MPI_ERR_NO_MEM;
	if (rc) {
		free(in);
		return cm_mpi_raise(NULL, rc, "MPI_Info_create");
	}
	return MPI_SUCCESS;
}

int MPI_Info_set(MPI_Info info, const char *key, const char *value)
{
	CM_MPI_REQUIRE_INIT("MPI_Info_set");
	struct info *in;
	int rc = lookup(info, key, &in);
	if (!rc && in == &env_info)
		rc = MPI_ERR_INFO; /* read-only */
	if (!rc && !value)
		rc = MPI_ERR_ARG;
	size_t vlen = value ? strnlen(value, MPI_MAX_INFO_VAL) : 0;
	if (!rc && (vlen == 0 || vlen >= MPI_MAX_INFO_VAL))
		rc = MPI_ERR_INFO_VALUE;
	if (rc)
		return cm_mpi_raise(NULL, rc, "MPI_Info_set");
	char *v = strdup(value);
	if (!v)
		return cm_mpi_raise(NULL, MPI_ERR_NO_MEM, "MPI_Info_set");
	int i = find(in, key);
	if (i >= 0) {
		free(in->pairs[i].value);
		in->pairs[i].value = v;
		return MPI_SUCCESS;
	}
	char *k = strdup(key);
	if (!k || (in->npairs == in->cap && in->cap > (INT32_MAX / 2))) {
		free(k);
		free(v);
		return cm_mpi_raise(NULL, MPI_ERR_NO_MEM, "MPI_Info_set");
	}
	if (in->npairs == in->cap) {
		int cap = in->cap ? in->cap * 2 : 8;
		struct info_pair *p = realloc(in->pairs, (size_t)cap * sizeof *p);
		if (!p) {
			free(k);
			free(v);
			return cm_mpi_raise(NULL, MPI_ERR_NO_MEM, "MPI_Info_set");
		}
		in->pairs = p;
		in->cap = cap;
	}
	in->pairs[in->npairs++] = (struct info_pair){k, v};
	return MPI_SUCCESS;
}

int MPI_Info_get(MPI_Info info, const char *key, int valuelen, char *value, int *flag)
{
	CM_MPI_REQUIRE_INIT("MPI_Info_get");
	struct info *in;
	int rc = lookup(info, key, &in);
	if (!rc && (valuelen < 0 || !flag || (valuelen > 0 && !value)))
		rc = MPI_ERR_ARG;
	if (rc)
		return cm_mpi_raise(NULL, rc, "MPI_Info_get");
	int i = find(in, key);
	*flag = i >= 0;
	if (i >= 0) {
		/* At most valuelen characters, then a null: value has valuelen + 1
		 * bytes, as the standard has it. */
		size_t n = strlen(in->pairs[i].value);
		if (n > (size_t)valuelen)
			n = (size_t)valuelen;
		if (value) {
			memcpy(value, in->pairs[i].value, n);
			value[n] = '\0';
		}
	}
	return MPI_SUCCESS;
}

int MPI_Info_get_valuelen(MPI_Info info, const char *key, int *valuelen, int *flag)
{
	CM_MPI_REQUIRE_INIT("MPI_Info_get_valuelen");
	struct info *in;
	int rc = lookup(info, key, &in);
	if (!rc && (!valuelen || !flag))
		rc = MPI_ERR_ARG;
	if (rc)
		return cm_mpi_raise(NULL, rc, "MPI_Info_get_valuelen");
	int i = find(in, key);
	*flag = i >= 0;
	if (i >= 0)
		*valuelen = (int)strlen(in->pairs[i].value);
	return MPI_SUCCESS;
}

int MPI_Info_get_nkeys(MPI_Info info, int *nkeys)
{
	CM_MPI_REQUIRE_INIT("MPI_Info_get_nkeys");
	struct info *in;
	int rc = lookup(info, NULL, &in);
	if (!rc && !nkeys)
		rc = MPI_ERR_ARG;
	if (rc)
		return cm_mpi_raise(NULL, rc, "MPI_Info_get_nkeys");
	*nkeys = in->npairs;
	return MPI_SUCCESS;
}

int MPI_Info_get_nthkey(MPI_Info info, int n, char *key)
{
	CM_MPI_REQUIRE_INIT("MPI_Info_get_nthkey");
	struct info *in;
	int rc = lookup(info, NULL, &in);
	if (!rc && (!key || n < 0 || n >= in->npairs))
		rc = MPI_ERR_ARG;
	if (rc)
		return cm_mpi_raise(NULL, rc, "MPI_Info_get_nthkey");
	strcpy(key, in->pairs[n].key); /* key has MPI_MAX_INFO_KEY bytes */
	return MPI_SUCCESS;
}

int MPI_Info_delete(MPI_Info info, const char *key)
{
	CM_MPI_REQUIRE_INIT("MPI_Info_delete");
	struct info *in;
	int rc = lookup(info, key, &in);
	if (!rc && in == &env_info)
		rc = MPI_ERR_INFO;
	int i = rc ? -1 : find(in, key);
	if (!rc && i < 0)
		rc = MPI_ERR_INFO_NOKEY;
	if (rc)
		return cm_mpi_raise(NULL, rc, "MPI_Info_delete");
	free(in->pairs[i].key);
	free(in->pairs[i].value);
	/* The rest keep their order: MPI_Info_get_nthkey numbers keys stably. */
	memmove(&in->pairs[i], &in->pairs[i + 1], (size_t)(in->npairs - i - 1) * sizeof *in->pairs);
	in->npairs--;
	return MPI_SUCCESS;
}

int MPI_Info_dup(MPI_Info info, MPI_Info *newinfo)
{
	CM_MPI_REQUIRE_INIT("MPI_Info_dup");
	struct info *in;
	int rc = lookup(info, NULL, &in);
	if (!rc && !newinfo)
		rc = MPI_ERR_ARG;
	if (rc)
		return cm_mpi_raise(NULL, rc, "MPI_Info_dup");
	struct info *d = calloc(1, sizeof *d);
	rc = d ? MPI_SUCCESS : MPI_ERR_NO_MEM;
	if (!rc && in->npairs > 0) {
		d->pairs = calloc((size_t)in->npairs, sizeof *d->pairs);
		d->cap = in->npairs;
		rc = d->pairs ? MPI_SUCCESS : MPI_ERR_NO_MEM;
		for (int i = 0; !rc && i < in->npairs; i++) {
			d->pairs[i].key = strdup(in->pairs[i].key);
			d->pairs[i].value = strdup(in->pairs[i].value);
			d->npairs++;
			if (!d->pairs[i].key || !d->pairs[i].value)
				rc = MPI_ERR_NO_MEM;
		}
	}
	if (!rc)
		rc = new_handle(d, newinfo);
	if (rc) {
		if (d)
			info_destroy(d);
		return cm_mpi_raise(NULL, rc, "MPI_Info_dup");
	}
	return MPI_SUCCESS;
}

int MPI_Info_free(MPI_Info *info)
{
	CM_MPI_REQUIRE_INIT("MPI_Info_free");
	struct info *in = info ? info_get(*info) : NULL;
	if (!in || in == &env_info)
		return cm_mpi_raise(NULL, MPI_ERR_INFO, "MPI_Info_free");
	infos[CM_HANDLE_INDEX(*info)] = NULL;
	info_destroy(in);
	*info = MPI_INFO_NULL;
	return MPI_SUCCESS;
}

int cm_mpi_info_valid(MPI_Info info)
{
	return info == MPI_INFO_NULL || info_get(info) != NULL;
}

/* Communicator hints: none is acted on, so none is kept; the info in use
 * is always empty (the standard lets an implementation ignore hints). */
int MPI_Comm_set_info(MPI_Comm comm, MPI_Info info)
{
	CM_MPI_REQUIRE_INIT("MPI_Comm_set_info");
	struct cm_mpi_comm *c = cm_mpi_comm_get(comm);
	if (!c)
		return cm_mpi_raise(NULL, MPI_ERR_COMM, "MPI_Comm_set_info");
	if (!cm_mpi_info_valid(info))
		return cm_mpi_raise(c, MPI_ERR_INFO, "MPI_Comm_set_info");
	return MPI_SUCCESS;
}

int MPI_Comm_get_info(MPI_Comm comm, MPI_Info *info_used)
{
	CM_MPI_REQUIRE_INIT("MPI_Comm_get_info");
	struct cm_mpi_comm *c = cm_mpi_comm_get(comm);
	if (!c)
		return cm_mpi_raise(NULL, MPI_ERR_COMM, "MPI_Comm_get_info");
	if (!info_used)
		return cm_mpi_raise(c, MPI_ERR_ARG, "MPI_Comm_get_info");
	return MPI_Info_create(info_used);
}
