/* Marks memory a cache holds as off limits under AddressSanitizer, so a use
 * of a recycled object between its "free" and its reuse is still reported.
 * No-ops in other builds. Caches leave the first SLUICE__POISON_SKIP bytes
 * of a block (their free-list link) unpoisoned: LeakSanitizer does not read
 * pointers inside poisoned memory, and would call every cached block but the
 * first a leak. */
#ifndef SLUICE_CORE_POISON_H
#define SLUICE_CORE_POISON_H

#if defined(__SANITIZE_ADDRESS__)
#define SLUICE__ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SLUICE__ASAN 1
#endif
#endif

#define SLUICE__POISON_SKIP 16

#ifdef SLUICE__ASAN
#include <sanitizer/asan_interface.h>
#define SLUICE__POISON(p, n)                                                   \
  ASAN_POISON_MEMORY_REGION((char *)(p) + SLUICE__POISON_SKIP,                 \
                            (n)-SLUICE__POISON_SKIP)
#define SLUICE__UNPOISON(p, n)                                                 \
  ASAN_UNPOISON_MEMORY_REGION((char *)(p) + SLUICE__POISON_SKIP,               \
                              (n)-SLUICE__POISON_SKIP)
/* Whether a block of a cache is poisoned, that is, free in the cache: a
 * cache's put checks it, so that a double free, which a cache would take
 * twice and hand out twice, is reported where it happens. */
#define SLUICE__IS_POISONED(p)                                                 \
  __asan_address_is_poisoned((char *)(p) + SLUICE__POISON_SKIP)
#else
#define SLUICE__IS_POISONED(p) ((void)(p), 0)
#define SLUICE__POISON(p, n) ((void)(p), (void)(n))
#define SLUICE__UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#endif
