/* Lend scopes (see lend.h). */
#include "transport/lend.h"

#include "core/bigbuf.h"

static __thread struct {
  unsigned depth;
  uint64_t epoch; /* of the open outermost scope; the last one after it */
  unsigned reserved, kept;
  void *keep[SLUICE__LEND_MAX];
} t;

void sluice__lend_enter(void) {
  if (t.depth++ == 0)
    t.epoch++;
}

void sluice__lend_leave(void) {
  if (--t.depth)
    return;
  for (unsigned i = 0; i < t.kept; i++)
    sluice__bigbuf_put(t.keep[i]);
  t.kept = t.reserved = 0;
}

uint64_t sluice__lend_epoch(void) { return t.depth ? t.epoch : 0; }

int sluice__lend_reserve(void) {
  if (!t.depth || t.reserved == SLUICE__LEND_MAX)
    return 0;
  t.reserved++;
  return 1;
}

void sluice__lend_keep(void *p) {
  /* kept <= reserved: every lent piece reserved its place, and a buffer is
   * freed (so kept) at most once. */
  t.keep[t.kept++] = p;
}
