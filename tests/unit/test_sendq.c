/* transport/sendq.c: the bounded send queue of one call: the inline first
 * node, reads across buffers, FULL and the ready signal, force, close and
 * abort, the data provider's DEFERRED, retained buffers and rewind, a
 * producer thread against a reader, and pieces lent to a write batch
 * (transport/lend.h) outliving the queue's frees until the scope closes. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include <sluice/status.h>

#include "core/bigbuf.h"
#include "transport/lend.h"
#include "transport/sendq.h"

/* A malloc'd buffer of len bytes: seed, seed+1, ... */
static uint8_t *buf(size_t len, uint8_t seed) {
  uint8_t *b = malloc(len ? len : 1);
  assert_non_null(b);
  for (size_t i = 0; i < len; i++)
    b[i] = (uint8_t)(seed + i);
  return b;
}

static void push_ok(sluice__sendq *q, size_t len, uint8_t seed, int force) {
  int deferred = -1;
  assert_int_equal(sluice__sendq_push(q, buf(len, seed), len, force, &deferred),
                   0);
  assert_true(deferred == 0 || deferred == 1);
}

/* Reads everything with reads of cap bytes; returns the bytes in out and
 * the state of the last read. */
static sluice__sendq_state read_all(sluice__sendq *q, size_t cap, uint8_t *out,
                                    size_t *total) {
  uint8_t tmp[4096];
  assert_true(cap <= sizeof tmp);
  *total = 0;
  for (;;) {
    size_t n = 99999;
    int ready = -1;
    sluice__sendq_state st = sluice__sendq_read(q, tmp, cap, &n, &ready);
    assert_true(n <= cap);
    memcpy(out + *total, tmp, n);
    *total += n;
    if (st != SLUICE__SENDQ_DATA || n == 0)
      return st;
  }
}

static void unary_first_node(void **state) {
  (void)state;
  sluice__sendq q;
  assert_int_equal(sluice__sendq_init(&q, 0), 0);
  assert_int_equal(sluice__sendq_queued(&q), 0);
  assert_int_equal(sluice__sendq_pushed(&q), 0);
  assert_false(sluice__sendq_is_closed(&q));

  /* The first message lives in the embedded node. */
  uint8_t *m = buf(10, 1);
  int deferred = -1;
  assert_int_equal(sluice__sendq_push(&q, m, 10, 0, &deferred), 0);
  assert_int_equal(deferred, 0);
  assert_ptr_equal(q.head, &q.first);
  assert_ptr_equal(q.first.data, m);
  assert_int_equal(sluice__sendq_queued(&q), 10);
  assert_int_equal(sluice__sendq_pushed(&q), 1);
  assert_int_equal(sluice__sendq_close(&q, &deferred), 0);
  assert_true(sluice__sendq_is_closed(&q));

  /* One read takes all of it and sees the end. */
  uint8_t out[32];
  size_t n = 0;
  int ready = -1;
  assert_int_equal(sluice__sendq_read(&q, out, sizeof out, &n, &ready),
                   SLUICE__SENDQ_EOF);
  assert_int_equal(n, 10);
  assert_int_equal(ready, 0);
  for (size_t i = 0; i < 10; i++)
    assert_int_equal(out[i], 1 + i);
  assert_int_equal(sluice__sendq_queued(&q), 0);
  /* And again: EOF with nothing. */
  assert_int_equal(sluice__sendq_read(&q, out, sizeof out, &n, &ready),
                   SLUICE__SENDQ_EOF);
  assert_int_equal(n, 0);
  sluice__sendq_destroy(&q);
}

static void later_nodes_allocated(void **state) {
  (void)state;
  sluice__sendq q;
  assert_int_equal(sluice__sendq_init(&q, 0), 0);
  push_ok(&q, 3, 0, 0);
  push_ok(&q, 4, 10, 0);
  assert_ptr_equal(q.head, &q.first);
  assert_ptr_not_equal(q.tail, &q.first);
  /* Once the first node has been sent it is not used again (it may be
   * freed with the queue only): the next push allocates. */
  uint8_t out[64];
  size_t total = 0;
  assert_int_equal(read_all(&q, sizeof out, out, &total),
                   SLUICE__SENDQ_DEFERRED);
  assert_int_equal(total, 7);
  push_ok(&q, 2, 20, 0);
  assert_ptr_not_equal(q.head, &q.first);
  assert_int_equal(sluice__sendq_pushed(&q), 3);
  sluice__sendq_destroy(&q); /* frees the queued one (ASan) */
}

static void reads_across_buffers(void **state) {
  (void)state;
  /* Every cap from 1 to past the total: the bytes come out in order and
   * whole, whatever the split. */
  static const size_t lens[] = {5, 1, 0, 17, 3, 40};
  size_t total_len = 0;
  for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++)
    total_len += lens[i];
  for (size_t cap = 1; cap <= total_len + 3; cap++) {
    sluice__sendq q;
    assert_int_equal(sluice__sendq_init(&q, 0), 0);
    uint8_t want[128];
    size_t w = 0;
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
      uint8_t seed = (uint8_t)(i * 50);
      push_ok(&q, lens[i], seed, 0);
      for (size_t j = 0; j < lens[i]; j++)
        want[w++] = (uint8_t)(seed + j);
    }
    int deferred;
    assert_int_equal(sluice__sendq_close(&q, &deferred), 0);
    uint8_t got[128];
    size_t total = 0;
    assert_int_equal(read_all(&q, cap, got, &total), SLUICE__SENDQ_EOF);
    assert_int_equal(total, total_len);
    assert_memory_equal(got, want, total_len);
    assert_int_equal(sluice__sendq_queued(&q), 0);
    sluice__sendq_destroy(&q);
  }
}

static void deferred_and_resume(void **state) {
  (void)state;
  sluice__sendq q;
  assert_int_equal(sluice__sendq_init(&q, 0), 0);
  uint8_t out[8];
  size_t n = 1;
  int ready;
  /* Empty and open: DEFERRED; the next push says the provider must be
   * resumed, once. */
  assert_int_equal(sluice__sendq_read(&q, out, sizeof out, &n, &ready),
                   SLUICE__SENDQ_DEFERRED);
  assert_int_equal(n, 0);
  int deferred = -1;
  assert_int_equal(sluice__sendq_push(&q, buf(2, 0), 2, 0, &deferred), 0);
  assert_int_equal(deferred, 1);
  assert_int_equal(sluice__sendq_push(&q, buf(2, 0), 2, 0, &deferred), 0);
  assert_int_equal(deferred, 0);
  /* Data read, queue now empty but open: DATA (bytes were copied). */
  assert_int_equal(sluice__sendq_read(&q, out, sizeof out, &n, &ready),
                   SLUICE__SENDQ_DATA);
  assert_int_equal(n, 4);
  /* Deferred again; a close then reports it too. */
  assert_int_equal(sluice__sendq_read(&q, out, sizeof out, &n, &ready),
                   SLUICE__SENDQ_DEFERRED);
  assert_int_equal(sluice__sendq_close(&q, &deferred), 0);
  assert_int_equal(deferred, 1);
  assert_int_equal(sluice__sendq_read(&q, out, sizeof out, &n, &ready),
                   SLUICE__SENDQ_EOF);
  assert_int_equal(n, 0);
  sluice__sendq_destroy(&q);
}

static void bound_full_ready_force(void **state) {
  (void)state;
  sluice__sendq q;
  assert_int_equal(sluice__sendq_init(&q, 100), 0);
  /* A push is refused only once the queue is at the bound: the one that
   * crosses it is accepted (so at most bound + one message waits). */
  push_ok(&q, 60, 0, 0);
  push_ok(&q, 60, 0, 0);
  assert_int_equal(sluice__sendq_queued(&q), 120);
  uint8_t *m = buf(1, 0);
  int deferred = -1;
  assert_int_equal(sluice__sendq_push(&q, m, 1, 0, &deferred), SLUICE_ERR_FULL);
  assert_int_equal(deferred, 0);
  assert_true(q.want_ready);
  assert_int_equal(sluice__sendq_pushed(&q), 2);
  /* force goes past the bound (a server's last message); m is still ours
   * after FULL. */
  assert_int_equal(sluice__sendq_push(&q, m, 1, 1, &deferred), 0);
  assert_int_equal(sluice__sendq_queued(&q), 121);

  /* Ready is reported once, when the queue drops below half the bound. */
  uint8_t out[128];
  size_t n;
  int ready = -1;
  assert_int_equal(sluice__sendq_read(&q, out, 70, &n, &ready),
                   SLUICE__SENDQ_DATA);
  assert_int_equal(n, 70);
  assert_int_equal(ready, 0); /* 51 queued: not below 50 */
  assert_int_equal(sluice__sendq_read(&q, out, 1, &n, &ready),
                   SLUICE__SENDQ_DATA);
  assert_int_equal(ready, 0); /* 50: still not below */
  assert_int_equal(sluice__sendq_read(&q, out, 1, &n, &ready),
                   SLUICE__SENDQ_DATA);
  assert_int_equal(ready, 1); /* 49 */
  assert_false(q.want_ready);
  assert_int_equal(sluice__sendq_read(&q, out, 1, &n, &ready),
                   SLUICE__SENDQ_DATA);
  assert_int_equal(ready, 0); /* once */
  /* Nobody was refused: no ready, however low it goes. */
  size_t total;
  read_all(&q, sizeof out, out, &total);
  assert_int_equal(total, 48);
  push_ok(&q, 10, 0, 0);
  assert_int_equal(sluice__sendq_read(&q, out, sizeof out, &n, &ready),
                   SLUICE__SENDQ_DATA);
  assert_int_equal(ready, 0);
  sluice__sendq_destroy(&q);
}

static void unbounded_never_full(void **state) {
  (void)state;
  sluice__sendq q;
  assert_int_equal(sluice__sendq_init(&q, 0), 0);
  for (int i = 0; i < 100; i++)
    push_ok(&q, 1000, (uint8_t)i, 0);
  assert_int_equal(sluice__sendq_queued(&q), 100000);
  assert_int_equal(sluice__sendq_pushed(&q), 100);
  sluice__sendq_destroy(&q);
}

static void close_and_after(void **state) {
  (void)state;
  sluice__sendq q;
  assert_int_equal(sluice__sendq_init(&q, 10), 0);
  push_ok(&q, 4, 0, 0);
  int deferred = -1;
  assert_int_equal(sluice__sendq_close(&q, &deferred), 0);
  assert_int_equal(deferred, 0);
  assert_int_equal(sluice__sendq_close(&q, &deferred), SLUICE_ERR_STATE);
  /* Closed: pushes are refused (even forced) and the data stays ours. */
  uint8_t *m = buf(1, 0);
  assert_int_equal(sluice__sendq_push(&q, m, 1, 0, &deferred),
                   SLUICE_ERR_STATE);
  assert_int_equal(sluice__sendq_push(&q, m, 1, 1, &deferred),
                   SLUICE_ERR_STATE);
  free(m);
  /* What was queued still goes out, and the read that empties it says
   * EOF. */
  uint8_t out[8];
  size_t n;
  int ready;
  assert_int_equal(sluice__sendq_read(&q, out, 3, &n, &ready),
                   SLUICE__SENDQ_DATA);
  assert_int_equal(sluice__sendq_read(&q, out, 3, &n, &ready),
                   SLUICE__SENDQ_EOF);
  assert_int_equal(n, 1);
  sluice__sendq_destroy(&q);
}

static void abort_drops(void **state) {
  (void)state;
  sluice__sendq q;
  assert_int_equal(sluice__sendq_init(&q, 10), 0);
  sluice__sendq_retain(&q);
  push_ok(&q, 8, 0, 0);
  push_ok(&q, 8, 0, 0);
  uint8_t *m = buf(1, 0);
  int deferred;
  assert_int_equal(sluice__sendq_push(&q, m, 1, 0, &deferred), SLUICE_ERR_FULL);
  free(m);
  uint8_t out[16];
  size_t n;
  int ready;
  sluice__sendq_read(&q, out, 10, &n, &ready); /* one retained, one half */
  sluice__sendq_abort(&q); /* frees queued and retained buffers (ASan) */
  assert_int_equal(sluice__sendq_queued(&q), 0);
  assert_true(sluice__sendq_is_closed(&q));
  assert_false(q.want_ready);
  assert_int_equal(sluice__sendq_read(&q, out, sizeof out, &n, &ready),
                   SLUICE__SENDQ_EOF);
  assert_int_equal(n, 0);
  assert_int_equal(ready, 0);
  m = buf(1, 0);
  assert_int_equal(sluice__sendq_push(&q, m, 1, 0, &deferred),
                   SLUICE_ERR_STATE);
  free(m);
  sluice__sendq_abort(&q); /* twice: harmless */
  sluice__sendq_destroy(&q);
}

static void rewind_retained(void **state) {
  (void)state;
  sluice__sendq q;
  assert_int_equal(sluice__sendq_init(&q, 0), 0);
  sluice__sendq_retain(&q);
  push_ok(&q, 6, 1, 0);
  push_ok(&q, 5, 100, 0);
  int deferred;
  assert_int_equal(sluice__sendq_close(&q, &deferred), 0);
  uint8_t first[32], again[32];
  size_t total = 0;
  assert_int_equal(read_all(&q, 4, first, &total), SLUICE__SENDQ_EOF);
  assert_int_equal(total, 11);
  /* Refused before the server processed it: everything is put back, in
   * order, and the queue stays closed. */
  assert_int_equal(sluice__sendq_rewind(&q), 0);
  assert_int_equal(sluice__sendq_queued(&q), 11);
  assert_true(sluice__sendq_is_closed(&q));
  assert_int_equal(read_all(&q, 32, again, &total), SLUICE__SENDQ_EOF);
  assert_int_equal(total, 11);
  assert_memory_equal(first, again, 11);
  /* Twice in a row: the same again. */
  assert_int_equal(sluice__sendq_rewind(&q), 0);
  assert_int_equal(read_all(&q, 3, again, &total), SLUICE__SENDQ_EOF);
  assert_memory_equal(first, again, 11);
  sluice__sendq_destroy(&q);
}

static void rewind_partial(void **state) {
  (void)state;
  sluice__sendq q;
  assert_int_equal(sluice__sendq_init(&q, 0), 0);
  sluice__sendq_retain(&q);
  push_ok(&q, 10, 0, 0);
  push_ok(&q, 10, 10, 0);
  uint8_t out[32];
  size_t n;
  int ready;
  /* Half of the first buffer went out. */
  assert_int_equal(sluice__sendq_read(&q, out, 5, &n, &ready),
                   SLUICE__SENDQ_DATA);
  assert_int_equal(sluice__sendq_rewind(&q), 0);
  assert_int_equal(sluice__sendq_queued(&q), 20);
  size_t total;
  assert_int_equal(read_all(&q, sizeof out, out, &total),
                   SLUICE__SENDQ_DEFERRED);
  assert_int_equal(total, 20);
  for (size_t i = 0; i < 20; i++)
    assert_int_equal(out[i], i);
  /* A rewind clears the pending DEFERRED: the next push must not ask for a
   * resume of a provider that was never told to defer. */
  assert_int_equal(sluice__sendq_rewind(&q), 0);
  int deferred = -1;
  assert_int_equal(sluice__sendq_push(&q, buf(1, 0), 1, 0, &deferred), 0);
  assert_int_equal(deferred, 0);
  sluice__sendq_destroy(&q);
}

static void rewind_without_retain(void **state) {
  (void)state;
  sluice__sendq q;
  assert_int_equal(sluice__sendq_init(&q, 0), 0);
  push_ok(&q, 4, 0, 0);
  push_ok(&q, 4, 0, 0);
  /* Nothing sent yet: a rewind is possible (and changes nothing). */
  assert_int_equal(sluice__sendq_rewind(&q), 0);
  assert_int_equal(sluice__sendq_queued(&q), 8);
  /* A partly sent buffer still in the queue can be replayed ... */
  uint8_t out[8];
  size_t n;
  int ready;
  sluice__sendq_read(&q, out, 2, &n, &ready);
  assert_int_equal(sluice__sendq_rewind(&q), 0);
  assert_int_equal(sluice__sendq_queued(&q), 8);
  /* ... a finished one that was freed cannot. */
  sluice__sendq_read(&q, out, 5, &n, &ready);
  assert_int_equal(sluice__sendq_rewind(&q), -1);
  assert_int_equal(sluice__sendq_queued(&q), 3); /* untouched */
  sluice__sendq_destroy(&q);
}

/* A producer thread against the loop's reader: every byte arrives once, in
 * order; FULL is retried; the queue never holds more than bound + one
 * message. */
#define P_MSGS 2000
#define P_BOUND 1000

typedef struct {
  sluice__sendq *q;
  int fulls;
} producer;

static void produce(void *arg) {
  producer *p = arg;
  for (int i = 0; i < P_MSGS; i++) {
    size_t len = 1 + (size_t)(i * 37) % 200;
    uint8_t *b = malloc(len);
    for (size_t j = 0; j < len; j++)
      b[j] = (uint8_t)(i + j);
    int deferred;
    int rv;
    while ((rv = sluice__sendq_push(p->q, b, len, 0, &deferred)) ==
           SLUICE_ERR_FULL) {
      p->fulls++;
      uv_sleep(0);
    }
    if (rv != 0)
      abort();
  }
  int deferred;
  sluice__sendq_close(p->q, &deferred);
}

static void producer_thread(void **state) {
  (void)state;
  sluice__sendq q;
  assert_int_equal(sluice__sendq_init(&q, P_BOUND), 0);
  producer p = {&q, 0};
  uv_thread_t t;
  assert_int_equal(uv_thread_create(&t, produce, &p), 0);
  int i = 0;
  size_t j = 0, got = 0;
  uint8_t out[333];
  for (;;) {
    size_t queued = sluice__sendq_queued(&q);
    assert_true(queued < P_BOUND + 200);
    size_t n;
    int ready;
    sluice__sendq_state st =
        sluice__sendq_read(&q, out, sizeof out, &n, &ready);
    for (size_t k = 0; k < n; k++) {
      size_t len = 1 + (size_t)(i * 37) % 200;
      assert_int_equal(out[k], (uint8_t)(i + j));
      if (++j == len) {
        j = 0;
        i++;
      }
    }
    got += n;
    if (st == SLUICE__SENDQ_EOF)
      break;
    if (n == 0)
      uv_sleep(0);
  }
  uv_thread_join(&t);
  assert_int_equal(i, P_MSGS);
  assert_int_equal(j, 0);
  assert_int_equal(sluice__sendq_pushed(&q), P_MSGS);
  (void)got;
  sluice__sendq_destroy(&q);
}

/* --- lending (sluice__sendq_lend, transport/lend.h) ---------------------- */

/* Large enough for the big-buffer cache, which makes a free observable:
 * sluice__bigbuf_put caches a block of this size. */
#define BIG (80 * 1024)

typedef struct {
  const uint8_t *p[8];
  size_t n[8];
  int count;
  int lend;   /* lend when allowed */
  int may[8]; /* what the queue allowed */
} pieces;

static int take_piece(void *ud, const uint8_t *p, size_t n, int may_lend) {
  pieces *c = ud;
  assert_true(c->count < 8);
  c->p[c->count] = p;
  c->n[c->count] = n;
  c->may[c->count++] = may_lend;
  /* As the write batch does: a place for the block is reserved first. */
  return c->lend && may_lend && sluice__lend_reserve() ? 1 : 0;
}

static size_t cached(void) {
  size_t blocks, bytes;
  sluice__bigbuf_stats(&blocks, &bytes);
  return blocks;
}

static size_t lend(sluice__sendq *q, size_t cap, pieces *c) {
  size_t n = 0;
  int ready;
  sluice__sendq_lend(q, cap, take_piece, c, &n, &ready);
  return n;
}

/* The bytes of a lent piece still hold the pattern buf() wrote (under
 * ASan a freed block would be reported here). */
static void check_piece(const uint8_t *p, size_t n, size_t offset,
                        uint8_t seed) {
  for (size_t i = 0; i < n; i += 997)
    assert_int_equal(p[i], (uint8_t)(seed + offset + i));
}

static void lend_needs_a_scope(void **state) {
  (void)state;
  sluice__bigbuf_drain();
  sluice__sendq q;
  assert_int_equal(sluice__sendq_init(&q, 0), 0);
  push_ok(&q, BIG, 1, 0);
  pieces c = {.lend = 1};
  assert_int_equal(sluice__lend_epoch(), 0);
  assert_int_equal(sluice__lend_reserve(), 0);
  assert_int_equal(lend(&q, 1000, &c), 1000);
  assert_int_equal(c.count, 1);
  assert_false(c.may[0]); /* outside a scope: copy */
  sluice__sendq_destroy(&q);
  assert_int_equal(cached(), 1); /* freed at once */
  sluice__bigbuf_drain();
}

static void lent_buffers_outlive_abort(void **state) {
  (void)state;
  sluice__bigbuf_drain();
  sluice__sendq q;
  assert_int_equal(sluice__sendq_init(&q, 0), 0);
  push_ok(&q, BIG, 1, 0);
  push_ok(&q, BIG, 2, 0);
  push_ok(&q, BIG, 3, 0);
  sluice__lend_enter();
  assert_true(sluice__lend_epoch() != 0);
  pieces c = {.lend = 1};
  /* All of the first buffer (it leaves the queue: freed by the queue,
   * kept by the scope) and part of the second (still queued). */
  assert_int_equal(lend(&q, BIG + 100, &c), BIG + 100);
  assert_int_equal(c.count, 2);
  assert_true(c.may[0] && c.may[1]);
  assert_int_equal(cached(), 0);
  /* The call ends inside the gather: everything queued is dropped. */
  sluice__sendq_abort(&q);
  sluice__sendq_destroy(&q);
  /* The third buffer, never lent, went at once; the lent two are kept. */
  assert_int_equal(cached(), 1);
  check_piece(c.p[0], c.n[0], 0, 1);
  check_piece(c.p[1], c.n[1], 0, 2);
  sluice__lend_leave();
  assert_int_equal(sluice__lend_epoch(), 0);
  assert_int_equal(cached(), 3);
  sluice__bigbuf_drain();
}

static void retained_lent_buffers_outlive_destroy(void **state) {
  (void)state;
  sluice__bigbuf_drain();
  sluice__sendq q;
  assert_int_equal(sluice__sendq_init(&q, 0), 0);
  sluice__sendq_retain(&q);
  push_ok(&q, BIG, 7, 0);
  sluice__lend_enter();
  pieces c = {.lend = 1};
  assert_int_equal(lend(&q, BIG, &c), BIG); /* sent and retained */
  assert_true(c.may[0]);
  sluice__sendq_destroy(&q);
  assert_int_equal(cached(), 0);
  check_piece(c.p[0], c.n[0], 0, 7);
  sluice__lend_leave();
  assert_int_equal(cached(), 1);
  sluice__bigbuf_drain();
}

/* A retry buffer's queue frees on the producer's thread when it overflows,
 * which no lend scope covers: it never lends. */
static void retain_limit_never_lends(void **state) {
  (void)state;
  sluice__sendq q;
  assert_int_equal(sluice__sendq_init(&q, 0), 0);
  sluice__sendq_retain_upto(&q, 4 * BIG);
  push_ok(&q, BIG, 1, 0);
  sluice__lend_enter();
  pieces c = {.lend = 1};
  assert_int_equal(lend(&q, 100, &c), 100);
  assert_false(c.may[0]);
  sluice__lend_leave();
  sluice__sendq_destroy(&q);
  sluice__bigbuf_drain();
}

/* What was lent in an earlier scope is no longer referred to (the batch
 * was written or copied aside): freed at once. Nested scopes share the
 * outermost one's epoch and free at its close. */
static void scopes_epochs_and_nesting(void **state) {
  (void)state;
  sluice__bigbuf_drain();
  sluice__sendq q;
  assert_int_equal(sluice__sendq_init(&q, 0), 0);
  push_ok(&q, BIG, 1, 0);
  sluice__lend_enter();
  pieces c = {.lend = 1};
  assert_int_equal(lend(&q, 100, &c), 100);
  sluice__lend_leave();
  sluice__lend_enter();
  sluice__sendq_abort(&q); /* lent in the previous scope: freed now */
  assert_int_equal(cached(), 1);
  sluice__lend_leave();
  sluice__sendq_destroy(&q);
  sluice__bigbuf_drain();

  assert_int_equal(sluice__sendq_init(&q, 0), 0);
  push_ok(&q, BIG, 4, 0);
  sluice__lend_enter();
  uint64_t outer = sluice__lend_epoch();
  sluice__lend_enter(); /* a callback of the gather flushes another */
  assert_true(sluice__lend_epoch() == outer);
  pieces d = {.lend = 1};
  assert_int_equal(lend(&q, 100, &d), 100);
  sluice__sendq_abort(&q);
  sluice__lend_leave(); /* inner: nothing freed yet */
  assert_int_equal(cached(), 0);
  check_piece(d.p[0], d.n[0], 0, 4);
  sluice__lend_leave();
  assert_int_equal(cached(), 1);
  sluice__sendq_destroy(&q);
  sluice__bigbuf_drain();
}

/* A scope keeps at most SLUICE__LEND_MAX buffers: past that the batch
 * copies (sluice__lend_reserve says no). */
static void reserve_is_bounded(void **state) {
  (void)state;
  sluice__lend_enter();
  for (int i = 0; i < SLUICE__LEND_MAX; i++)
    assert_int_equal(sluice__lend_reserve(), 1);
  assert_int_equal(sluice__lend_reserve(), 0);
  sluice__lend_leave();
  sluice__lend_enter(); /* a new scope starts empty */
  assert_int_equal(sluice__lend_reserve(), 1);
  sluice__lend_leave();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(unary_first_node),
      cmocka_unit_test(later_nodes_allocated),
      cmocka_unit_test(reads_across_buffers),
      cmocka_unit_test(deferred_and_resume),
      cmocka_unit_test(bound_full_ready_force),
      cmocka_unit_test(unbounded_never_full),
      cmocka_unit_test(close_and_after),
      cmocka_unit_test(abort_drops),
      cmocka_unit_test(rewind_retained),
      cmocka_unit_test(rewind_partial),
      cmocka_unit_test(rewind_without_retain),
      cmocka_unit_test(producer_thread),
      cmocka_unit_test(lend_needs_a_scope),
      cmocka_unit_test(lent_buffers_outlive_abort),
      cmocka_unit_test(retained_lent_buffers_outlive_destroy),
      cmocka_unit_test(retain_limit_never_lends),
      cmocka_unit_test(scopes_epochs_and_nesting),
      cmocka_unit_test(reserve_is_bounded),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
