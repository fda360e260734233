#include "core/objcache.h"

#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/poison.h"

void sluice__objcache_init(sluice__objcache *c, size_t size, unsigned max) {
  c->head = NULL;
  c->n = 0;
  c->max = max;
  c->size = size < SLUICE__POISON_SKIP ? SLUICE__POISON_SKIP : size;
}

void *sluice__objcache_get(sluice__objcache *c) {
  void *p = c->head;
  if (!p)
    return sluice__calloc(1, c->size);
  SLUICE__UNPOISON(p, c->size);
  c->head = *(void **)p;
  c->n--;
  memset(p, 0, c->size);
  return p;
}

void sluice__objcache_put(sluice__objcache *c, void *p) {
  if (!p)
    return;
  if (c->n >= c->max) {
    free(p);
    return;
  }
  *(void **)p = c->head;
  c->head = p;
  c->n++;
  SLUICE__POISON(p, c->size);
}

void sluice__objcache_drain(sluice__objcache *c) {
  while (c->head) {
    void *p = c->head;
    SLUICE__UNPOISON(p, c->size);
    c->head = *(void **)p;
    free(p);
  }
  c->n = 0;
}
