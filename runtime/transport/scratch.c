/* Per-thread I/O scratch buffers (see scratch.h). */
#include "transport/scratch.h"

#include "core/alloc.h"
#include <pthread.h>
#include <stdlib.h>

typedef struct bufs {
  uint8_t *buf[SLUICE__SCRATCH_N];
  int taken[SLUICE__SCRATCH_N];
} bufs;

static const size_t g_size[SLUICE__SCRATCH_N] = {SLUICE__SCRATCH_READ_SIZE,
                                                 SLUICE__SCRATCH_WRITE_SIZE};
static pthread_key_t g_key;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static _Thread_local bufs *t_bufs;

static void bufs_free(void *p) {
  bufs *b = p;
  for (int i = 0; i < SLUICE__SCRATCH_N; i++)
    free(b->buf[i]);
  free(b);
  t_bufs = NULL;
}

static void make_key(void) { pthread_key_create(&g_key, bufs_free); }

uint8_t *sluice__scratch_take(sluice__scratch_slot slot) {
  bufs *b = t_bufs;
  if (!b) {
    pthread_once(&g_once, make_key);
    if (!(b = sluice__calloc(1, sizeof *b)))
      return NULL;
    if (pthread_setspecific(g_key, b) != 0) {
      free(b);
      return NULL;
    }
    t_bufs = b;
  }
  if (b->taken[slot])
    return NULL;
  if (!b->buf[slot] && !(b->buf[slot] = sluice__malloc(g_size[slot])))
    return NULL;
  b->taken[slot] = 1;
  return b->buf[slot];
}

void sluice__scratch_give(sluice__scratch_slot slot) {
  if (t_bufs)
    t_bufs->taken[slot] = 0;
}

void sluice__scratch_thread_release(void) {
  if (t_bufs) {
    pthread_setspecific(g_key, NULL);
    bufs_free(t_bufs);
  }
}
