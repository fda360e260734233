#include "transport/recv.h"

#include <stdlib.h>
#include <string.h>

#include "core/bigbuf.h"

void sluice__recv_init(sluice__recv *r, uint32_t max_size,
                       sluice__deliver_fn deliver, void *owner, int paused) {
  memset(r, 0, sizeof *r);
  sluice__deframer_init(&r->deframer, max_size);
  r->deliver = deliver;
  r->owner = owner;
  r->paused = paused;
}

void sluice__recv_reset(sluice__recv *r) {
  while (r->head) {
    sluice__inmsg *m = r->head;
    r->head = m->next;
    sluice__bigbuf_put(m);
  }
  r->tail = NULL;
  r->held = 0;
  sluice__deframer_reset(&r->deframer);
}

static int hold(sluice__recv *r, int compressed, const uint8_t *msg,
                size_t len) {
  sluice__inmsg *m = sluice__bigbuf_get(sizeof *m + len);
  if (!m)
    return 1;
  m->next = NULL;
  m->compressed = compressed;
  m->len = len;
  if (len)
    memcpy(m->data, msg, len);
  if (r->tail)
    r->tail->next = m;
  else
    r->head = m;
  r->tail = m;
  r->held += len;
  return 0;
}

static int on_frame(void *ud, int compressed, const uint8_t *msg, size_t len) {
  sluice__recv *r = ud;
  if (r->paused || r->head)
    return hold(r, compressed, msg, len);
  if (r->deliver(r->owner, compressed, msg, len) != 0) {
    r->failed = 1;
    return 1;
  }
  return 0;
}

static void note_buffered(sluice__recv *r) {
  size_t now = r->unconsumed + r->deframer.filled;
  /* Read from any thread (sluice_call_recv_buffered_max): atomic. */
  if (now > r->buffered_max)
    __atomic_store_n(&r->buffered_max, now, __ATOMIC_RELAXED);
}

static void settle(sluice__recv *r, size_t *consume) {
  note_buffered(r);
  *consume = 0;
  if (!r->head) { /* everything delivered: give the window back */
    *consume = r->unconsumed;
    r->unconsumed = 0;
  }
}

sluice_status_code sluice__recv_feed(sluice__recv *r, const uint8_t *data,
                                     size_t len, size_t *consume,
                                     const char **reason) {
  r->unconsumed += len;
  sluice_status_code code =
      sluice__deframer_feed(&r->deframer, data, len, on_frame, r, reason);
  settle(r, consume);
  if (code == SLUICE_STATUS_CANCELLED && !r->failed) {
    /* The deframer's consumer stopped because hold() found no memory: the
     * call ends for want of a resource, not by anyone's cancel. */
    *reason = "out of memory holding a received message";
    code = SLUICE_STATUS_RESOURCE_EXHAUSTED;
  }
  return code;
}

int sluice__recv_drain(sluice__recv *r, size_t *consume) {
  int rv = 0;
  while (r->head && !r->paused) {
    sluice__inmsg *m = r->head;
    r->head = m->next;
    if (!r->head)
      r->tail = NULL;
    r->held -= m->len;
    rv = r->deliver(r->owner, m->compressed, m->data, m->len);
    sluice__bigbuf_put(m);
    if (rv != 0) {
      r->failed = 1;
      break;
    }
  }
  settle(r, consume);
  return rv;
}

size_t sluice__recv_take_unconsumed(sluice__recv *r) {
  size_t n = r->unconsumed;
  r->unconsumed = 0;
  return n;
}
