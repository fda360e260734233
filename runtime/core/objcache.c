#include "core/objcache.h"

#include <stdlib.h>
#include <string.h>

#if defined(__SANITIZE_ADDRESS__)
#define SLUICE__ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SLUICE__ASAN 1
#endif
#endif

#ifdef SLUICE__ASAN
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

void sluice__objcache_init(sluice__objcache *c, size_t size, unsigned max) {
  c->head = NULL;
  c->n = 0;
  c->max = max;
  c->size = size < sizeof(void *) ? sizeof(void *) : size;
}

void *sluice__objcache_get(sluice__objcache *c) {
  void *p = c->head;
  if (!p)
    return calloc(1, c->size);
  UNPOISON(p, c->size);
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
  POISON(p, c->size);
}

void sluice__objcache_drain(sluice__objcache *c) {
  while (c->head) {
    void *p = c->head;
    UNPOISON(p, c->size);
    c->head = *(void **)p;
    free(p);
  }
  c->n = 0;
}
