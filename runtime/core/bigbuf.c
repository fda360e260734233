/* The large-buffer cache (see bigbuf.h). */
#include "core/bigbuf.h"

#include <stdint.h>
#include <stdlib.h>
#include <uv.h>

#include "core/alloc.h"
#include "core/poison.h"

#if defined(__GLIBC__) || defined(__linux__)
#include <malloc.h>
#define SLUICE__USABLE(p) malloc_usable_size(p)
#endif

typedef struct {
  void *p;
  size_t cap;       /* usable bytes */
  uint64_t used_ms; /* when it was put back */
} slot;

static struct {
  uv_mutex_t mu;
  slot s[SLUICE__BIGBUF_SLOTS];
  unsigned n;
  size_t bytes;
} g;
static uv_once_t g_once = UV_ONCE_INIT;
static int g_ok;

static void init(void) { g_ok = uv_mutex_init(&g.mu) == 0; }

static uint64_t now_ms(void) { return uv_hrtime() / 1000000; }

/* Removes slot i (under the lock) and returns its block, unpoisoned. */
static void *take(unsigned i) {
  void *p = g.s[i].p;
  SLUICE__UNPOISON(p, g.s[i].cap);
  g.bytes -= g.s[i].cap;
  g.s[i] = g.s[--g.n];
  return p;
}

/* Moves blocks unused for too long to *old (a list threaded through the
 * blocks themselves, freed by the caller outside the lock). */
static void expire(uint64_t now, void **old) {
  for (unsigned i = 0; i < g.n;) {
    if (now - g.s[i].used_ms > SLUICE__BIGBUF_AGE_MS) {
      void *p = take(i);
      *(void **)p = *old;
      *old = p;
    } else {
      i++;
    }
  }
}

static void free_list(void *p) {
  while (p) {
    void *next = *(void **)p;
    free(p);
    p = next;
  }
}

/* Rounds a large request up to a quarter of its power of two, so that
 * blocks of nearby sizes (a message with and without its prefix, or a
 * little larger next time) fit each other's slot. The headroom makes a
 * size on a class boundary (1 MiB exactly) land in the next class: the
 * same payload plus its 5-byte prefix or a few bytes of protobuf framing
 * must still fit, and malloc_usable_size gives no slack under ASan (glibc's
 * mmap'd chunks happen to have a page of it, which hid this). */
static size_t round_class(size_t len) {
  len += SLUICE__BIGBUF_HEADROOM;
  size_t q = SLUICE__BIGBUF_MIN / 4;
  while (q * 8 <= len)
    q *= 2;
  return (len + q - 1) / q * q;
}

void *sluice__bigbuf_get(size_t len) {
#ifdef SLUICE__USABLE
  if (len >= SLUICE__BIGBUF_MIN) {
    uv_once(&g_once, init);
    if (g_ok) {
      void *old = NULL, *hit = NULL;
      uv_mutex_lock(&g.mu);
      expire(now_ms(), &old);
      /* The smallest block that fits and wastes under half of len. */
      unsigned best = g.n;
      for (unsigned i = 0; i < g.n; i++)
        if (g.s[i].cap >= len && g.s[i].cap - len <= len / 2 &&
            (best == g.n || g.s[i].cap < g.s[best].cap))
          best = i;
      if (best < g.n)
        hit = take(best);
      uv_mutex_unlock(&g.mu);
      free_list(old);
      if (hit)
        return hit;
    }
    return sluice__malloc(round_class(len));
  }
#endif
  return sluice__malloc(len ? len : 1);
}

void sluice__bigbuf_put(void *p) {
  if (!p)
    return;
#ifdef SLUICE__USABLE
  size_t cap = SLUICE__USABLE(p);
  if (cap >= SLUICE__BIGBUF_MIN) {
    uv_once(&g_once, init);
    if (g_ok) {
      void *old = NULL;
      uint64_t now = now_ms();
      uv_mutex_lock(&g.mu);
      expire(now, &old);
      if (g.n < SLUICE__BIGBUF_SLOTS &&
          g.bytes + cap <= SLUICE__BIGBUF_MAX_BYTES) {
        g.s[g.n].p = p;
        g.s[g.n].cap = cap;
        g.s[g.n].used_ms = now;
        g.n++;
        g.bytes += cap;
        SLUICE__POISON(p, cap);
        p = NULL;
      }
      uv_mutex_unlock(&g.mu);
      free_list(old);
    }
  }
#endif
  free(p);
}

void sluice__bigbuf_drain(void) {
  uv_once(&g_once, init);
  if (!g_ok)
    return;
  void *old = NULL;
  uv_mutex_lock(&g.mu);
  while (g.n) {
    void *p = take(g.n - 1);
    *(void **)p = old;
    old = p;
  }
  uv_mutex_unlock(&g.mu);
  free_list(old);
}

void sluice__mem_trim(void) {
  sluice__bigbuf_drain();
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

void sluice__bigbuf_stats(size_t *blocks, size_t *bytes) {
  uv_once(&g_once, init);
  *blocks = *bytes = 0;
  if (!g_ok)
    return;
  uv_mutex_lock(&g.mu);
  *blocks = g.n;
  *bytes = g.bytes;
  uv_mutex_unlock(&g.mu);
}

static void *pb_alloc(void *ud, size_t size) {
  (void)ud;
  return sluice__bigbuf_get(size);
}

static void pb_free(void *ud, void *p) {
  (void)ud;
  sluice__bigbuf_put(p);
}

static ProtobufCAllocator g_pb = {pb_alloc, pb_free, NULL};

ProtobufCAllocator *sluice__bigbuf_pb_allocator(void) { return &g_pb; }
