/* The failure switch of core/alloc.h, compiled in SLUICE_FAILMALLOC builds
 * only. One switch for the process: a test arms it, then runs an operation
 * whose allocations happen on several threads (the caller's and the loop
 * threads'), so "the n-th" is in the order the atomic counter sees them;
 * that order may differ between runs, which only widens what a sweep over n
 * reaches. */
#include "core/alloc.h"

#ifdef SLUICE_FAILMALLOC
#include <stdatomic.h>

static atomic_long g_count;  /* allocations since arm */
static atomic_long g_target; /* which one fails; 0 none */
static atomic_int g_on;      /* counting at all */
static atomic_int g_fired;
static void (*_Atomic g_on_fire)(long n);

int sluice__failmalloc_fails(void) {
  if (!atomic_load_explicit(&g_on, memory_order_relaxed))
    return 0;
  long n = atomic_fetch_add(&g_count, 1) + 1;
  if (n != atomic_load(&g_target))
    return 0;
  atomic_store(&g_fired, 1);
  void (*fn)(long) = atomic_load(&g_on_fire);
  if (fn)
    fn(n);
  return 1;
}

void sluice__failmalloc_arm(long n) {
  atomic_store(&g_on, 0);
  atomic_store(&g_count, 0);
  atomic_store(&g_target, n);
  atomic_store(&g_fired, 0);
  atomic_store(&g_on, 1);
}

long sluice__failmalloc_count(void) { return atomic_load(&g_count); }

int sluice__failmalloc_fired(void) { return atomic_load(&g_fired); }

void sluice__failmalloc_disarm(void) {
  atomic_store(&g_on, 0);
  atomic_store(&g_target, 0);
}
void sluice__failmalloc_on_fire(void (*fn)(long n)) {
  atomic_store(&g_on_fire, fn);
}
#else
/* ISO C wants something in a translation unit. */
typedef int sluice__alloc_unused;
#endif
