/* An intrusive binary min-heap of uint64_t keys (deadlines), after
 * libuv's heap-inl.h.
 *
 * Why intrusive and pointer-linked: a node lives inside the object it
 * orders (a server call), so inserting never allocates and cannot fail, and
 * removing is O(log n) from the object alone. Keys that arrive in
 * increasing order (the same timeout on calls that come one after another)
 * stay at the bottom: an insert then costs a walk down one path and no
 * swap. Everything here is static inline and does no locking: the owner of
 * the heap says which thread may touch it.
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
  struct sluice__heap_node *left, *right, *parent;
  uint64_t key;
} sluice__heap_node;

typedef struct sluice__heap {
  sluice__heap_node *min;
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

/* Swaps a child with its parent (the links only: keys stay with their
 * nodes). */
static inline void sluice__heap_swap(sluice__heap *h, sluice__heap_node *parent,
                                     sluice__heap_node *child) {
  sluice__heap_node t = *parent, *sibling;
  parent->left = child->left;
  parent->right = child->right;
  parent->parent = child->parent;
  child->left = t.left;
  child->right = t.right;
  child->parent = t.parent;
  parent->parent = child;
  if (child->left == child) {
    child->left = parent;
    sibling = child->right;
  } else {
    child->right = parent;
    sibling = child->left;
  }
  if (sibling)
    sibling->parent = child;
  if (parent->left)
    parent->left->parent = parent;
  if (parent->right)
    parent->right->parent = parent;
  if (!child->parent)
    h->min = child;
  else if (child->parent->left == parent)
    child->parent->left = child;
  else
    child->parent->right = child;
}

/* The slot of the heap's node number i (1-based, breadth first): the root's
 * pointer, or a left/right pointer of the node above it. */
static inline sluice__heap_node **sluice__heap_slot(sluice__heap *h, size_t i,
                                                    sluice__heap_node **above) {
  size_t path = 0, k = 0;
  for (; i >= 2; k++, i /= 2)
    path = (path << 1) | (i & 1);
  sluice__heap_node **slot = &h->min;
  *above = NULL;
  for (; k > 0; k--, path >>= 1) {
    *above = *slot;
    slot = (path & 1) ? &(*slot)->right : &(*slot)->left;
  }
  return slot;
}

/* Adds n with its key set (n must not be in a heap). */
static inline void sluice__heap_insert(sluice__heap *h, sluice__heap_node *n) {
  n->left = n->right = NULL;
  sluice__heap_node *above;
  sluice__heap_node **slot = sluice__heap_slot(h, h->n + 1, &above);
  n->parent = above;
  *slot = n;
  h->n++;
  while (n->parent && n->key < n->parent->key)
    sluice__heap_swap(h, n->parent, n);
}

/* Takes n (which is in h) out. */
static inline void sluice__heap_remove(sluice__heap *h, sluice__heap_node *n) {
  sluice__heap_node *above;
  sluice__heap_node **last = sluice__heap_slot(h, h->n, &above);
  sluice__heap_node *c = *last;
  *last = NULL;
  h->n--;
  if (c == n) /* the last node in breadth-first order */
    return;
  /* The last node takes n's place, then moves down or up to where its key
   * belongs. */
  c->left = n->left;
  c->right = n->right;
  c->parent = n->parent;
  if (c->left)
    c->left->parent = c;
  if (c->right)
    c->right->parent = c;
  if (!n->parent)
    h->min = c;
  else if (n->parent->left == n)
    n->parent->left = c;
  else
    n->parent->right = c;
  for (;;) {
    sluice__heap_node *s = c;
    if (c->left && c->left->key < s->key)
      s = c->left;
    if (c->right && c->right->key < s->key)
      s = c->right;
    if (s == c)
      break;
    sluice__heap_swap(h, c, s);
  }
  while (c->parent && c->key < c->parent->key)
    sluice__heap_swap(h, c->parent, c);
}

#endif
