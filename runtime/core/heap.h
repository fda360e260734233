/* An intrusive min-heap of uint64_t keys (the server's deadlines): a
 * pairing heap.
 *
 * Why intrusive: a node lives inside the object it orders (a server call),
 * so inserting never allocates and cannot fail, and any node can be taken
 * out from the object alone (a call that finishes before its deadline).
 * Why a pairing heap: an insert is one comparison and a few pointer moves
 * (O(1)), whatever the keys; taking out the minimum or any other node is
 * O(log n) amortized. Deadlines mostly arrive in increasing order (the
 * same timeout on calls that come one after another): each new node then
 * simply becomes a child of the root.
 *
 * Shape: every node keeps its first child, its next sibling, and `prev`:
 * the previous sibling, or the parent for a first child (NULL for the
 * root). A node's key is never below its parent's. Everything here is
 * static inline and does no locking: the owner of the heap says which
 * thread may touch it.
 *
 *   struct call { sluice__heap_node dl; ... };
 *   sluice__heap h;  sluice__heap_init(&h);
 *   c->dl.key = deadline;  sluice__heap_insert(&h, &c->dl);
 *   sluice__heap_node *n = sluice__heap_min(&h);  // earliest, or NULL
 *   sluice__heap_remove(&h, n);
 */
#ifndef SLUICE_CORE_HEAP_H
#define SLUICE_CORE_HEAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct sluice__heap_node {
  struct sluice__heap_node *child; /* first child */
  struct sluice__heap_node *next;  /* next sibling */
  struct sluice__heap_node *prev;  /* previous sibling, or the parent */
  uint64_t key;
} sluice__heap_node;

typedef struct sluice__heap {
  sluice__heap_node *min; /* the root */
  size_t n;
} sluice__heap;

static inline void sluice__heap_init(sluice__heap *h) {
  h->min = NULL;
  h->n = 0;
}

/* The node with the smallest key, or NULL when empty. */
static inline sluice__heap_node *sluice__heap_min(const sluice__heap *h) {
  return h->min;
}

/* Joins two trees (roots without siblings; either may be NULL): the root
 * with the larger key becomes the other's first child. Returns the root. */
static inline sluice__heap_node *sluice__heap_join(sluice__heap_node *a,
                                                   sluice__heap_node *b) {
  if (!a)
    return b;
  if (!b)
    return a;
  if (b->key < a->key) {
    sluice__heap_node *t = a;
    a = b;
    b = t;
  }
  b->prev = a;
  b->next = a->child;
  if (a->child)
    a->child->prev = b;
  a->child = b;
  return a;
}

/* One tree of a list of sibling trees (a removed node's children): joined
 * in pairs from the left, then the pairs from the right, the two passes
 * that give the heap its amortized bound. Returns the root (prev NULL), or
 * NULL for an empty list. */
static inline sluice__heap_node *sluice__heap_join_all(sluice__heap_node *t) {
  sluice__heap_node *pairs = NULL; /* joined pairs, the last one first */
  while (t) {
    sluice__heap_node *a = t, *b = t->next;
    t = b ? b->next : NULL;
    a->next = a->prev = NULL;
    if (b)
      b->next = b->prev = NULL;
    a = sluice__heap_join(a, b);
    a->next = pairs;
    pairs = a;
  }
  sluice__heap_node *root = NULL;
  while (pairs) {
    sluice__heap_node *p = pairs;
    pairs = p->next;
    p->next = NULL;
    root = sluice__heap_join(root, p);
  }
  return root;
}

/* Adds n with its key set (n must not be in a heap). */
static inline void sluice__heap_insert(sluice__heap *h, sluice__heap_node *n) {
  n->child = n->next = n->prev = NULL;
  h->min = sluice__heap_join(h->min, n);
  h->n++;
}

/* Takes n (which is in h) out. */
static inline void sluice__heap_remove(sluice__heap *h, sluice__heap_node *n) {
  sluice__heap_node *sub = sluice__heap_join_all(n->child);
  if (n == h->min) {
    h->min = sub;
  } else {
    /* Unlinked from its parent's list of children, then its children,
     * joined, go back in at the root. */
    if (n->prev->child == n)
      n->prev->child = n->next;
    else
      n->prev->next = n->next;
    if (n->next)
      n->next->prev = n->prev;
    h->min = sluice__heap_join(h->min, sub);
  }
  n->child = n->next = n->prev = NULL;
  h->n--;
}

#endif
