/* An intrusive doubly-linked list, as in the Linux kernel: a struct cm_list
 * node is embedded in each element, and a list is a struct cm_list head
 * (a sentinel) that must be initialised with cm_list_init and must not
 * move while it holds elements. No operation allocates or branches on
 * "first" or "last", and cm_list_remove needs no head. An element can
 * be on as many lists as it has nodes. */
#ifndef CM_LIST_H
#define CM_LIST_H

#include <stdbool.h>
#include <stddef.h>

struct cm_list {
	struct cm_list *next, *prev;
};

#define cm_container_of(ptr, type, member) ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

static inline void cm_list_init(struct cm_list *head)
{
	head->next = head->prev = head;
}

static inline bool cm_list_empty(const struct cm_list *head)
{
	return head->next == head;
}

static inline void cm_list_insert_(struct cm_list *n, struct cm_list *prev, struct cm_list *next)
{
	n->prev = prev;
	n->next = next;
	prev->next = n;
	next->prev = n;
}

static inline void cm_list_push_back(struct cm_list *head, struct cm_list *n)
{
	cm_list_insert_(n, head->prev, head);
}

static inline void cm_list_push_front(struct cm_list *head, struct cm_list *n)
{
	cm_list_insert_(n, head, head->next);
}

/* Unlinks n from whatever list holds it; n's links point to itself after,
 * so a second remove is harmless. */
static inline void cm_list_remove(struct cm_list *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->next = n->prev = n;
}

/* The first / last element's node, or NULL when the list is empty. */
static inline struct cm_list *cm_list_first(const struct cm_list *head)
{
	return cm_list_empty(head) ? NULL : head->next;
}

static inline struct cm_list *cm_list_last(const struct cm_list *head)
{
	return cm_list_empty(head) ? NULL : head->prev;
}

/* The element holding node n (type and member as in cm_container_of), or
 * NULL when n is NULL. */
#define cm_list_entry(n, type, member) ((n) ? cm_container_of((n), type, member) : (type *)NULL)

#define CM_LIST_CAT2_(a, b) a##b
#define CM_LIST_CAT_(a, b) CM_LIST_CAT2_(a, b)

/* For each element `it` (a `type *`) of head, front to back. The loop
 * body may remove `it` (the successor is read before the body runs) but
 * no other element. The hidden cursors are named after the line, so
 * loops nest without shadowing. */
#define cm_list_for_each(it, head, type, member)                                                   \
	cm_list_for_each_(it, head, type, member, CM_LIST_CAT_(cm_node_, __LINE__),                \
	                  CM_LIST_CAT_(cm_next_, __LINE__))
#define cm_list_for_each_(it, head, type, member, cur, nxt)                                        \
	for (struct cm_list *cur = (head)->next, *nxt = cur->next;                                 \
	     cur != (head) && ((it) = cm_container_of(cur, type, member), 1);                      \
	     cur = nxt, nxt = cur->next)

/* The same, back to front. */
#define cm_list_for_each_reverse(it, head, type, member)                                           \
	cm_list_for_each_reverse_(it, head, type, member, CM_LIST_CAT_(cm_node_, __LINE__),        \
	                          CM_LIST_CAT_(cm_prev_, __LINE__))
#define cm_list_for_each_reverse_(it, head, type, member, cur, prv)                                \
	for (struct cm_list *cur = (head)->prev, *prv = cur->prev;                                 \
	     cur != (head) && ((it) = cm_container_of(cur, type, member), 1);                      \
	     cur = prv, prv = cur->prev)

#endif
