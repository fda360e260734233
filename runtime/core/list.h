/* The one intrusive doubly linked list of the runtime, and container-of.
 *
 * Why intrusive: a node lives inside the object it links (a call, a
 * connection), so linking never allocates and unlinking is O(1) from the
 * object alone. A list head is a node whose prev/next point at itself when
 * empty (libuv's queue is the model). Everything here is static inline and
 * does no locking: the owner of the list says which thread may touch it.
 *
 *   struct conn { sluice__list link; ... };
 *   sluice__list conns;  sluice__list_init(&conns);
 *   sluice__list_push(&conns, &c->link);
 *   SLUICE__LIST_FOREACH(n, &conns) {
 *     struct conn *c = SLUICE__CONTAINER_OF(n, struct conn, link);
 *   }
 */
#ifndef SLUICE_CORE_LIST_H
#define SLUICE_CORE_LIST_H

#include <stddef.h>

/* The object of type `type` whose member `member` is at `ptr`. */
#define SLUICE__CONTAINER_OF(ptr, type, member)                                \
  ((type *)((char *)(ptr)-offsetof(type, member)))

typedef struct sluice__list {
  struct sluice__list *prev, *next;
} sluice__list;

/* An empty list head, or an unlinked node (sluice__list_linked() is 0). */
static inline void sluice__list_init(sluice__list *h) { h->prev = h->next = h; }

static inline int sluice__list_empty(const sluice__list *h) {
  return h->next == h;
}

/* Non-zero when node n is in a list (it was pushed and not removed since);
 * n must have been initialized or removed before. */
static inline int sluice__list_linked(const sluice__list *n) {
  return n->next != n;
}

/* Appends n (unlinked) at the tail of h. */
static inline void sluice__list_push(sluice__list *h, sluice__list *n) {
  n->prev = h->prev;
  n->next = h;
  h->prev->next = n;
  h->prev = n;
}

/* Unlinks n from its list and leaves it unlinked (removing an unlinked,
 * initialized node is a no-op). */
static inline void sluice__list_remove(sluice__list *n) {
  n->prev->next = n->next;
  n->next->prev = n->prev;
  n->prev = n->next = n;
}

/* The first node of h, or NULL when h is empty. */
static inline sluice__list *sluice__list_head(const sluice__list *h) {
  return h->next == h ? NULL : h->next;
}

/* Iterates n over h's nodes in order; n must not be removed in the body
 * (use SLUICE__LIST_FOREACH_SAFE for that). */
#define SLUICE__LIST_FOREACH(n, h)                                             \
  for (sluice__list *n = (h)->next; n != (h); n = n->next)

/* As SLUICE__LIST_FOREACH, but the body may remove n (not other nodes). */
#define SLUICE__LIST_FOREACH_SAFE(n, h)                                        \
  for (sluice__list *n = (h)->next, *n##_next = n->next; n != (h);             \
       n = n##_next, n##_next = n->next)

#endif
