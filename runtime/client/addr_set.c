/* See addr_set.h. */
#include "client/addr_set.h"

#include "core/alloc.h"
#include <stdlib.h>
#include <string.h>

typedef struct entry {
  const char *name;
  size_t index; /* in addrs: equal names stay in their order */
} entry;

static int by_name(const void *a, const void *b) {
  const entry *x = a, *y = b;
  int c = strcmp(x->name, y->name);
  if (c)
    return c;
  return x->index < y->index ? -1 : x->index > y->index;
}

/* The first entry of sorted[0..n) named name, or n. */
static size_t find(const entry *sorted, size_t n, const char *name) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (strcmp(sorted[mid].name, name) < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < n && strcmp(sorted[lo].name, name) == 0 ? lo : n;
}

int sluice__addr_set_diff(const char *const *old, size_t n_old,
                          const sluice__addr *addrs, size_t n,
                          unsigned char *keep, unsigned char *add) {
  entry *sorted = sluice__malloc((n ? n : 1) * sizeof *sorted);
  /* seen[k]: the name of sorted[k] is taken (among old, or added). */
  unsigned char *seen = sluice__calloc(n ? n : 1, 1);
  if (!sorted || !seen) {
    free(sorted);
    free(seen);
    return -1;
  }
  for (size_t j = 0; j < n; j++) {
    sorted[j].name = addrs[j].name;
    sorted[j].index = j;
  }
  qsort(sorted, n, sizeof *sorted, by_name);
  for (size_t i = 0; i < n_old; i++) {
    size_t k = find(sorted, n, old[i]);
    keep[i] = k < n;
    if (k < n)
      seen[k] = 1; /* the first of its name stands for all of them */
  }
  memset(add, 0, n);
  /* In the resolution's order: a name's first occurrence is added unless
   * it was seen; its later ones find it seen. */
  for (size_t j = 0; j < n; j++) {
    size_t k = find(sorted, n, addrs[j].name);
    if (!seen[k]) {
      seen[k] = 1;
      add[j] = 1;
    }
  }
  free(sorted);
  free(seen);
  return 0;
}
