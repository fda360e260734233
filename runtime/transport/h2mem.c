#include "transport/h2mem.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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
  lists *l = calloc(1, sizeof *l);
  if (!l || pthread_setspecific(g_key, l) != 0) {
    free(l);
    return NULL;
  }
  return t_lists = l;
}

static void *h2_malloc(size_t size, void *ud) {
  (void)ud;
  if (size > SIZE_MAX - sizeof(hdr))
    return NULL;
  size_t need = size + sizeof(hdr);
  size_t c = 0;
  while (c < N_CLASSES && CLASS_SIZE(c) < need)
    c++;
  hdr *h;
  if (c == N_CLASSES) {
    if (!(h = malloc(need)))
      return NULL;
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
  } else if (!(h = malloc(CLASS_SIZE(c)))) {
    return NULL;
  }
  h->cls = c;
  h->usable = CLASS_SIZE(c) - sizeof(hdr);
  return h + 1;
}

static void h2_free(void *ptr, void *ud) {
  (void)ud;
  if (!ptr)
    return;
  hdr *h = (hdr *)ptr - 1;
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
    return NULL;
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

static nghttp2_mem g_mem = {NULL, h2_malloc, h2_free, h2_calloc, h2_realloc};

nghttp2_mem *sluice__h2mem(void) { return &g_mem; }
