/* A growable array, typed by macro: CM_VEC(struct foo) is a struct with
 * `items` (struct foo *), `n` (used) and `cap` (allocated). Elements are
 * reached as v.items[i] directly, so an index costs what a plain array
 * costs; only growth goes through a function. A zeroed CM_VEC is empty.
 *
 * Growth doubles (at least CM_VEC_MIN elements) and refuses sizes whose
 * byte count would overflow size_t; on failure the array is unchanged.
 * The macros evaluate their vector argument more than once: pass a plain
 * lvalue, not an expression with side effects. */
#ifndef CM_VEC_H
#define CM_VEC_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CM_VEC_MIN 16

#define CM_VEC(T)                                                                                  \
	struct {                                                                                   \
		T *items;                                                                          \
		size_t n, cap;                                                                     \
	}

/* Room for `need` elements of `elem` bytes at `items` (cap of them now).
 * Returns the possibly moved array; *cap is raised only on success, so
 * the caller tells failure by *cap < need. New elements are zeroed when
 * `zero`: tables whose unused slots must read as free rely on it. */
static inline void *cm_vec_grow_(void *items, size_t *cap, size_t need, size_t elem, bool zero)
{
	if (need <= *cap)
		return items;
	size_t ncap = *cap ? *cap : CM_VEC_MIN;
	while (ncap < need) {
		if (ncap > SIZE_MAX / 2)
			return items;
		ncap *= 2;
	}
	if (elem && ncap > SIZE_MAX / elem)
		return items;
	void *grown = realloc(items, ncap * elem);
	if (grown == NULL)
		return items;
	if (zero)
		memset((char *)grown + *cap * elem, 0, (ncap - *cap) * elem);
	*cap = ncap;
	return grown;
}

/* True when v has room for `need` elements (growing it if not). */
#define cm_vec_reserve(v, need)                                                                    \
	(((v)->items = cm_vec_grow_((v)->items, &(v)->cap, (need), sizeof *(v)->items, false)),    \
	 (v)->cap >= (need))

/* As cm_vec_reserve; the slots added are zeroed. */
#define cm_vec_reserve_zeroed(v, need)                                                             \
	(((v)->items = cm_vec_grow_((v)->items, &(v)->cap, (need), sizeof *(v)->items, true)),     \
	 (v)->cap >= (need))

/* Appends one element and returns it (uninitialised), or NULL when out of
 * memory. */
#define cm_vec_push(v) (cm_vec_reserve((v), (v)->n + 1) ? &(v)->items[(v)->n++] : NULL)

/* Appends k elements copied from src; false (v unchanged) when out of
 * memory. */
#define cm_vec_append(v, src, k)                                                                   \
	(cm_vec_reserve((v), (v)->n + (k))                                                         \
	     ? (memcpy((v)->items + (v)->n, (src), (k) * sizeof *(v)->items), (v)->n += (k), true) \
	     : false)

/* For a table of pointers in which NULL marks a free slot (handle tables):
 * claims the first free slot at or after `from`, appending one (NULL) when
 * none is free, as long as its index stays below `max`. Evaluates to the
 * index, or SIZE_MAX when the table is full or out of memory. The caller
 * fills the slot; a slot left NULL stays free. */
#define cm_vec_claim_slot(v, from, max)                                                            \
	__extension__({                                                                            \
		size_t cm_slot_ = (from);                                                          \
		while (cm_slot_ < (v)->n && (v)->items[cm_slot_])                                  \
			cm_slot_++;                                                                \
		if (cm_slot_ >= (v)->n) {                                                          \
			if (cm_slot_ >= (size_t)(max) || !cm_vec_reserve((v), cm_slot_ + 1))       \
				cm_slot_ = SIZE_MAX;                                               \
			else                                                                       \
				while ((v)->n <= cm_slot_)                                         \
					(v)->items[(v)->n++] = NULL;                               \
		}                                                                                  \
		cm_slot_;                                                                          \
	})

/* Pointer to element i (no bounds check: i < n is the caller's). */
#define cm_vec_at(v, i) (&(v)->items[(i)])

/* Drops the first k elements, keeping the rest in order. */
#define cm_vec_drop_front(v, k)                                                                    \
	do {                                                                                       \
		size_t cm_vec_k_ = (k);                                                            \
		memmove((v)->items, (v)->items + cm_vec_k_,                                        \
		        ((v)->n - cm_vec_k_) * sizeof *(v)->items);                                \
		(v)->n -= cm_vec_k_;                                                               \
	} while (0)

/* Removes element i, keeping the order of the rest. */
#define cm_vec_remove(v, i)                                                                        \
	do {                                                                                       \
		size_t cm_vec_i_ = (i);                                                            \
		memmove((v)->items + cm_vec_i_, (v)->items + cm_vec_i_ + 1,                        \
		        ((v)->n - cm_vec_i_ - 1) * sizeof *(v)->items);                            \
		(v)->n--;                                                                          \
	} while (0)

#define cm_vec_free(v)                                                                             \
	do {                                                                                       \
		free((v)->items);                                                                  \
		(v)->items = NULL;                                                                 \
		(v)->n = (v)->cap = 0;                                                             \
	} while (0)

#endif
