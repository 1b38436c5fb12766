/* Requests by id (send clock or receive request id), for the SYNC_ACK,
 * DELIVER and similar frames that name one: a power-of-two table chained
 * through the requests' own t_next, so no allocation per request. Ids are
 * consecutive, so the low bits spread them evenly. */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "conn.h"

int cm_reqmap_put(struct cm_reqmap *m, struct cm_req *req)
{
	if (m->count >= m->nbuckets) {
		size_t nb = m->nbuckets ? m->nbuckets * 2 : 64;
		struct cm_req **b = calloc(nb, sizeof *b);
		if (b == NULL)
			return -1;
		for (size_t i = 0; i < m->nbuckets; i++) {
			struct cm_req *r = m->buckets[i];
			while (r) {
				struct cm_req *next = r->t_next;
				size_t k = (size_t)r->id & (nb - 1);
				r->t_next = b[k];
				b[k] = r;
				r = next;
			}
		}
		free(m->buckets);
		m->buckets = b;
		m->nbuckets = nb;
	}
	size_t k = (size_t)req->id & (m->nbuckets - 1);
	req->t_next = m->buckets[k];
	m->buckets[k] = req;
	m->count++;
	return 0;
}

struct cm_req *cm_reqmap_take(struct cm_reqmap *m, uint64_t id)
{
	if (m->nbuckets == 0)
		return NULL;
	struct cm_req **pp = &m->buckets[(size_t)id & (m->nbuckets - 1)];
	for (; *pp; pp = &(*pp)->t_next) {
		struct cm_req *r = *pp;
		if (r->id == id) {
			*pp = r->t_next;
			r->t_next = NULL;
			m->count--;
			return r;
		}
	}
	return NULL;
}

void cm_reqmap_free(struct cm_reqmap *m)
{
	free(m->buckets);
	memset(m, 0, sizeof *m);
}

static int by_id(const void *a, const void *b)
{
	uint64_t x = (*(struct cm_req *const *)a)->id, y = (*(struct cm_req *const *)b)->id;
	return x < y ? -1 : x > y;
}

struct cm_req **cm_reqmap_sorted(const struct cm_reqmap *m, int *ok)
{
	*ok = 1;
	if (m->count == 0)
		return NULL;
	struct cm_req **v = malloc(m->count * sizeof *v);
	if (v == NULL) {
		*ok = 0;
		return NULL;
	}
	size_t n = 0;
	for (size_t i = 0; i < m->nbuckets; i++)
		for (struct cm_req *r = m->buckets[i]; r; r = r->t_next)
			v[n++] = r;
	qsort(v, n, sizeof *v, by_id);
	return v;
}
