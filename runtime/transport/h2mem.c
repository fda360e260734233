#include "transport/h2mem.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/poison.h"

/* Every block starts with this header; the caller's memory follows, 16-byte
 * aligned as malloc's. */
typedef struct hdr {
  size_t cls;    /* size class index, or BIG */
  size_t usable; /* bytes after the header */
} hdr;

#define BIG SIZE_MAX
#define N_CLASSES 5 /* 64 B .. 1 KiB blocks, header included */
#define CLASS_SIZE(c) ((size_t)64 << (c))
/* A class keeps at most this many bytes of free blocks per thread (and at
 * least MIN_KEEP blocks): ~0.8 MiB per thread at worst. */
#define KEEP_BYTES (96u * 1024u)
#define MIN_KEEP 8u

typedef struct node {
  struct node *next;
} node;

typedef struct lists {
  node *head[N_CLASSES];
  unsigned n[N_CLASSES];
} lists;

static pthread_key_t g_key;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static _Thread_local lists *t_lists;

static unsigned keep(size_t c) {
  size_t k = KEEP_BYTES / CLASS_SIZE(c);
  return k < MIN_KEEP ? MIN_KEEP : (unsigned)k;
}

/* Thread exit: give the thread's blocks back to malloc. */
static void lists_free(void *p) {
  lists *l = p;
  for (size_t c = 0; c < N_CLASSES; c++)
    while (l->head[c]) {
      node *b = l->head[c];
      SLUICE__UNPOISON(b, CLASS_SIZE(c));
      l->head[c] = b->next;
      free(b);
    }
  free(l);
  t_lists = NULL;
}

void sluice__h2mem_thread_release(void) {
  if (t_lists) {
    pthread_setspecific(g_key, NULL);
    lists_free(t_lists);
  }
}

static void make_key(void) { pthread_key_create(&g_key, lists_free); }

/* The calling thread's lists, created on first use; NULL when out of memory
 * (blocks then go straight to malloc/free). */
static lists *my_lists(void) {
  if (t_lists)
    return t_lists;
  pthread_once(&g_once, make_key);
  lists *l = sluice__calloc(1, sizeof *l);
  if (!l || pthread_setspecific(g_key, l) != 0) {
    free(l);
    return NULL;
  }
  return t_lists = l;
}

/* An allocation of a guarded session failed (h2mem.h). */
static void *failed(void *ud) {
  sluice__h2mem_guard *g = ud;
  if (g)
    g->failed = 1;
  return NULL;
}

static void *h2_malloc(size_t size, void *ud) {
  if (size > SIZE_MAX - sizeof(hdr))
    return failed(ud);
  size_t need = size + sizeof(hdr);
  size_t c = 0;
  while (c < N_CLASSES && CLASS_SIZE(c) < need)
    c++;
  hdr *h;
  if (c == N_CLASSES) {
    if (!(h = sluice__malloc(need)))
      return failed(ud);
    h->cls = BIG;
    h->usable = size;
    return h + 1;
  }
  lists *l = my_lists();
  if (l && l->head[c]) {
    node *b = l->head[c];
    SLUICE__UNPOISON(b, CLASS_SIZE(c));
    l->head[c] = b->next;
    l->n[c]--;
    h = (hdr *)b;
  } else if (!(h = sluice__malloc(CLASS_SIZE(c)))) {
    return failed(ud);
  }
  h->cls = c;
  h->usable = CLASS_SIZE(c) - sizeof(hdr);
  return h + 1;
}

/* A free of a session that saw a failure: kept for later. Out of room for
 * the record, the block is let go of (leaked): better than freeing it
 * twice. Plain realloc, not counted by the failure tests: this is the
 * recovery from a failure. */
static void hold(sluice__h2mem_guard *g, void *ptr) {
  if (g->n == g->cap) {
    size_t cap = g->cap ? 2 * g->cap : 64;
    void **v = realloc(g->held, cap * sizeof *v);
    if (!v)
      return;
    g->held = v;
    g->cap = cap;
  }
  g->held[g->n++] = ptr;
}

static void h2_free(void *ptr, void *ud) {
  if (!ptr)
    return;
  sluice__h2mem_guard *g = ud;
  if (g && g->failed) {
    hold(g, ptr);
    return;
  }
  hdr *h = (hdr *)ptr - 1;
  if (SLUICE__IS_POISONED(h)) {
    fprintf(stderr, "sluice: nghttp2 block %p freed twice\n", ptr);
    abort();
  }
  size_t c = h->cls;
  lists *l;
  if (c == BIG || !(l = my_lists()) || l->n[c] >= keep(c)) {
    free(h);
    return;
  }
  node *b = (node *)h;
  b->next = l->head[c];
  l->head[c] = b;
  l->n[c]++;
  SLUICE__POISON(b, CLASS_SIZE(c));
}

static void *h2_calloc(size_t nmemb, size_t size, void *ud) {
  if (size && nmemb > SIZE_MAX / size)
    return failed(ud);
  void *p = h2_malloc(nmemb * size, ud);
  if (p)
    memset(p, 0, nmemb * size);
  return p;
}

static void *h2_realloc(void *ptr, size_t size, void *ud) {
  if (!ptr)
    return h2_malloc(size, ud);
  hdr *h = (hdr *)ptr - 1;
  if (size <= h->usable && h->cls != BIG)
    return ptr; /* still fits its block */
  void *p = h2_malloc(size, ud);
  if (!p)
    return NULL;
  memcpy(p, ptr, h->usable < size ? h->usable : size);
  h2_free(ptr, ud);
  return p;
}

void sluice__h2mem_for(nghttp2_mem *out, sluice__h2mem_guard *g) {
  *out = (nghttp2_mem){g, h2_malloc, h2_free, h2_calloc, h2_realloc};
}

static int cmp_ptr(const void *a, const void *b) {
  uintptr_t x = (uintptr_t) * (void *const *)a;
  uintptr_t y = (uintptr_t) * (void *const *)b;
  return x < y ? -1 : x > y;
}

void sluice__h2mem_guard_release(sluice__h2mem_guard *g) {
  if (g->n > 1)
    qsort(g->held, g->n, sizeof *g->held, cmp_ptr);
  for (size_t i = 0; i < g->n; i++)
    if (i == 0 || g->held[i] != g->held[i - 1])
      h2_free(g->held[i], NULL);
  free(g->held);
  *g = (sluice__h2mem_guard){0};
}
