/* A bounded free list of same-size objects (calls), owned by one loop
 * thread.
 *
 * Why: a call object is over 1 KiB, a "large" request for glibc's malloc,
 * and every such request first consolidates the fast bins the rest of the
 * call's small allocations just filled. A loop recycling its call objects
 * skips malloc for them and that consolidation (measured: ~5 % of a unary
 * echo server's CPU). Only the owning thread may get or put; other threads
 * use calloc/free directly. Under AddressSanitizer the cached objects stay
 * poisoned, so a use after "free" is still reported.
 */
#ifndef SLUICE_CORE_OBJCACHE_H
#define SLUICE_CORE_OBJCACHE_H

#include <stddef.h>

typedef struct sluice__objcache {
  void *head;   /* cached objects, linked through their first pointer */
  unsigned n;   /* how many are cached */
  unsigned max; /* at most this many are kept; more are freed */
  size_t size;  /* every object's size */
} sluice__objcache;

/* Sets c up for objects of size bytes (rounded up to 16), keeping at most
 * max of them. */
void sluice__objcache_init(sluice__objcache *c, size_t size, unsigned max);

/* A zeroed object of c's size (a cached one, else calloc's), NULL when out
 * of memory. Give it back with sluice__objcache_put or free(). */
void *sluice__objcache_get(sluice__objcache *c);

/* Takes p (from sluice__objcache_get or calloc of c's size) back: cached,
 * or freed when the cache is full. */
void sluice__objcache_put(sluice__objcache *c, void *p);

/* Frees every cached object (the owner is going away). */
void sluice__objcache_drain(sluice__objcache *c);

#endif
