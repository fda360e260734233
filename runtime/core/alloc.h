/* The library's allocation calls. Every malloc, calloc, realloc and strdup
 * of the runtime goes through these, so that a test build can make any one
 * of them fail (tests/failmalloc, docs/fuzzing.md). Memory still comes from
 * the C library and is freed with free(): blocks reach applications that
 * free them with free() or protobuf_c_message_free_unpacked(m, NULL).
 *
 * In a normal build these are the C library's functions. In a build with
 * SLUICE_FAILMALLOC (the ASan+UBSan tree) each first asks
 * sluice__failmalloc_fails(), which says yes to exactly one allocation
 * once a test armed it; nothing fails until then. */
#ifndef SLUICE_CORE_ALLOC_H
#define SLUICE_CORE_ALLOC_H

#include <stdlib.h>
#include <string.h>

#ifdef SLUICE_FAILMALLOC
/* 1 when the caller's allocation is the one to fail (and counts it). */
int sluice__failmalloc_fails(void);
/* Arms the failure: the n-th allocation counted from now fails (n >= 1),
 * once; n 0 only counts. Resets the count. Any thread. */
void sluice__failmalloc_arm(long n);
/* Allocations counted since the last arm, and whether the armed one has
 * failed yet. */
long sluice__failmalloc_count(void);
int sluice__failmalloc_fired(void);
/* Stops counting and failing. */
void sluice__failmalloc_disarm(void);
/* fn (NULL: none) runs on the failing thread just before an armed failure
 * is returned, with its n: a test prints the stack there. */
void sluice__failmalloc_on_fire(void (*fn)(long n));
#define SLUICE__FAILS() sluice__failmalloc_fails()
#else
#define SLUICE__FAILS() 0
#endif

static inline void *sluice__malloc(size_t n) {
  return SLUICE__FAILS() ? NULL : malloc(n);
}

static inline void *sluice__calloc(size_t n, size_t size) {
  return SLUICE__FAILS() ? NULL : calloc(n, size);
}

static inline void *sluice__realloc(void *p, size_t n) {
  return SLUICE__FAILS() ? NULL : realloc(p, n);
}

static inline char *sluice__strdup(const char *s) {
  return SLUICE__FAILS() ? NULL : strdup(s);
}

#endif
