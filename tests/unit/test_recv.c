/* transport/recv.c: the receiving side of one stream: deframing across any
 * split, messages held while paused (or behind held ones), the window given
 * back only once what it carried was delivered, failures, and the memory
 * bound a paused receiver keeps under HTTP/2 flow control: at most one
 * stream window plus one message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "transport/recv.h"

#define MAX_MSGS 512

/* A byte stream of framed messages; message i has bytes (i * 31 + j). */
typedef struct {
  uint8_t *bytes;
  size_t len;
  size_t n;
  size_t lens[MAX_MSGS];
  int comp[MAX_MSGS];
  size_t largest;
} stream;

static void stream_make(stream *s, const size_t *lens, size_t n) {
  assert_true(n <= MAX_MSGS);
  memset(s, 0, sizeof *s);
  size_t total = 0;
  for (size_t i = 0; i < n; i++)
    total += 5 + lens[i];
  s->bytes = malloc(total ? total : 1);
  assert_non_null(s->bytes);
  for (size_t i = 0; i < n; i++) {
    s->lens[i] = lens[i];
    s->comp[i] = (int)(i % 3 == 1);
    sluice__frame_header(s->bytes + s->len, s->comp[i], (uint32_t)lens[i]);
    s->len += 5;
    for (size_t j = 0; j < lens[i]; j++)
      s->bytes[s->len++] = (uint8_t)(i * 31 + j);
    if (lens[i] > s->largest)
      s->largest = lens[i];
  }
  s->n = n;
}

static void stream_free(stream *s) { free(s->bytes); }

typedef struct {
  sluice__recv r;
  const stream *want;
  size_t got;        /* messages delivered */
  size_t fail_at;    /* fail the delivery of message number fail_at (1-based) */
  size_t pause_each; /* pause after every pause_each deliveries */
} owner;

static int deliver(void *ud, int compressed, const uint8_t *msg, size_t len) {
  owner *o = ud;
  size_t i = o->got;
  assert_true(i < o->want->n);
  assert_int_equal(len, o->want->lens[i]);
  assert_int_equal(compressed, o->want->comp[i]);
  for (size_t j = 0; j < len; j++)
    if (msg[j] != (uint8_t)(i * 31 + j))
      fail_msg("message %zu byte %zu: %u", i, j, msg[j]);
  if (o->fail_at && i + 1 == o->fail_at)
    return 1;
  o->got++;
  if (o->pause_each && o->got % o->pause_each == 0)
    o->r.paused = 1; /* the owner pauses from inside its callback */
  return 0;
}

static void owner_init(owner *o, const stream *s, uint32_t max, int paused) {
  memset(o, 0, sizeof *o);
  o->want = s;
  sluice__recv_init(&o->r, max, deliver, o, paused);
}

/* Feeds s[from, to) in chunks of split bytes; returns the bytes consumed. */
static size_t feed_range(owner *o, const stream *s, size_t from, size_t to,
                         size_t split) {
  size_t consumed = 0;
  for (size_t p = from; p < to; p += split) {
    size_t n = to - p < split ? to - p : split;
    size_t c = 12345;
    const char *reason = "unset";
    assert_int_equal(sluice__recv_feed(&o->r, s->bytes + p, n, &c, &reason),
                     SLUICE_STATUS_OK);
    consumed += c;
  }
  return consumed;
}

static const size_t mixed[] = {0, 1, 5, 300, 2, 0, 1000, 17, 0};
#define N_MIXED (sizeof mixed / sizeof mixed[0])

static void delivers_across_splits(void **state) {
  (void)state;
  stream s;
  stream_make(&s, mixed, N_MIXED);
  static const size_t splits[] = {1, 2, 3, 4, 5, 6, 7, 64, 299, 4096};
  for (size_t k = 0; k < sizeof splits / sizeof splits[0]; k++) {
    owner o;
    owner_init(&o, &s, 1 << 20, 0);
    /* Not paused, nothing held: every byte goes back at once. */
    assert_int_equal(feed_range(&o, &s, 0, s.len, splits[k]), s.len);
    assert_int_equal(o.got, N_MIXED);
    assert_false(sluice__recv_holding(&o.r));
    assert_int_equal(o.r.unconsumed, 0);
    assert_int_equal(o.r.held, 0);
    assert_false(sluice__deframer_partial(&o.r.deframer));
    sluice__recv_reset(&o.r);
  }
  stream_free(&s);
}

static void paused_holds_then_drains(void **state) {
  (void)state;
  stream s;
  stream_make(&s, mixed, N_MIXED);
  owner o;
  owner_init(&o, &s, 1 << 20, 1); /* paused from the start */
  /* Held, and the window kept: nothing consumed. */
  assert_int_equal(feed_range(&o, &s, 0, s.len, 100), 0);
  assert_int_equal(o.got, 0);
  assert_true(sluice__recv_holding(&o.r));
  size_t body = 0;
  for (size_t i = 0; i < N_MIXED; i++)
    body += mixed[i];
  assert_int_equal(o.r.held, body);
  assert_int_equal(o.r.unconsumed, s.len);
  /* Draining while still paused delivers nothing. */
  size_t c = 99;
  assert_int_equal(sluice__recv_drain(&o.r, &c), 0);
  assert_int_equal(c, 0);
  assert_int_equal(o.got, 0);
  /* Resumed: all of it, in order, and the whole window back. */
  o.r.paused = 0;
  assert_int_equal(sluice__recv_drain(&o.r, &c), 0);
  assert_int_equal(c, s.len);
  assert_int_equal(o.got, N_MIXED);
  assert_false(sluice__recv_holding(&o.r));
  assert_int_equal(o.r.held, 0);
  assert_int_equal(o.r.unconsumed, 0);
  sluice__recv_reset(&o.r);
  stream_free(&s);
}

static void pause_from_callback(void **state) {
  (void)state;
  stream s;
  stream_make(&s, mixed, N_MIXED);
  owner o;
  owner_init(&o, &s, 1 << 20, 0);
  o.pause_each = 2;
  /* One chunk: two delivered, then the owner paused; the rest is held and
   * nothing is consumed (the chunk carried held messages). */
  assert_int_equal(feed_range(&o, &s, 0, s.len, s.len), 0);
  assert_int_equal(o.got, 2);
  assert_true(o.r.paused);
  /* Each resume delivers two more. */
  size_t c;
  o.r.paused = 0;
  assert_int_equal(sluice__recv_drain(&o.r, &c), 0);
  assert_int_equal(o.got, 4);
  assert_int_equal(c, 0);
  o.pause_each = 0;
  o.r.paused = 0;
  assert_int_equal(sluice__recv_drain(&o.r, &c), 0);
  assert_int_equal(o.got, N_MIXED);
  assert_int_equal(c, s.len);
  sluice__recv_reset(&o.r);
  stream_free(&s);
}

static void order_kept_behind_held(void **state) {
  (void)state;
  static const size_t two[] = {10, 20};
  stream s;
  stream_make(&s, two, 2);
  owner o;
  owner_init(&o, &s, 1 << 20, 1);
  assert_int_equal(feed_range(&o, &s, 0, 15, 15), 0); /* message 0 held */
  assert_int_equal(o.got, 0);
  /* Unpaused but not drained yet: message 1 must wait behind message 0
   * (deliver() checks the order). */
  o.r.paused = 0;
  assert_int_equal(feed_range(&o, &s, 15, s.len, 100), 0);
  assert_int_equal(o.got, 0);
  size_t c;
  assert_int_equal(sluice__recv_drain(&o.r, &c), 0);
  assert_int_equal(o.got, 2);
  assert_int_equal(c, s.len);
  sluice__recv_reset(&o.r);
  stream_free(&s);
}

static void window_follows_delivery(void **state) {
  (void)state;
  static const size_t three[] = {100, 100, 100};
  stream s;
  stream_make(&s, three, 3);
  owner o;
  owner_init(&o, &s, 1 << 20, 1);
  /* One whole message and half the next: kept. */
  assert_int_equal(feed_range(&o, &s, 0, 160, 160), 0);
  assert_int_equal(o.r.unconsumed, 160);
  assert_int_equal(o.r.held, 100);
  assert_true(sluice__deframer_partial(&o.r.deframer));
  /* Delivered: everything received so far goes back, the partial bytes
   * too (they are in the deframer, not in a held message). */
  o.r.paused = 0;
  size_t c;
  assert_int_equal(sluice__recv_drain(&o.r, &c), 0);
  assert_int_equal(c, 160);
  assert_int_equal(o.got, 1);
  /* The rest flows straight through. */
  assert_int_equal(feed_range(&o, &s, 160, s.len, 1000), s.len - 160);
  assert_int_equal(o.got, 3);
  sluice__recv_reset(&o.r);
  stream_free(&s);
}

static void partial_message_not_held(void **state) {
  (void)state;
  /* Paused, but nothing complete: the bytes go back, so a message larger
   * than the window can still arrive. */
  static const size_t big[] = {50000};
  stream s;
  stream_make(&s, big, 1);
  owner o;
  owner_init(&o, &s, 1 << 20, 1);
  assert_int_equal(feed_range(&o, &s, 0, 30000, 16384), 30000);
  assert_false(sluice__recv_holding(&o.r));
  assert_int_equal(o.r.deframer.filled, 30000 - 5);
  /* Completed while paused: now it is held, and its last bytes kept. */
  assert_int_equal(feed_range(&o, &s, 30000, s.len, s.len), 0);
  assert_true(sluice__recv_holding(&o.r));
  assert_int_equal(o.r.held, 50000);
  assert_int_equal(o.r.unconsumed, s.len - 30000);
  assert_int_equal(sluice__recv_take_unconsumed(&o.r), s.len - 30000);
  assert_int_equal(sluice__recv_take_unconsumed(&o.r), 0);
  sluice__recv_reset(&o.r);
  stream_free(&s);
}

static void deliver_failure(void **state) {
  (void)state;
  stream s;
  stream_make(&s, mixed, N_MIXED);
  owner o;
  owner_init(&o, &s, 1 << 20, 0);
  o.fail_at = 3;
  size_t c = 0;
  const char *reason = NULL;
  assert_int_equal(sluice__recv_feed(&o.r, s.bytes, s.len, &c, &reason),
                   SLUICE_STATUS_CANCELLED);
  assert_string_equal(reason, "message consumer stopped");
  assert_int_equal(o.got, 2);
  assert_true(o.r.failed);
  assert_int_equal(c, s.len); /* nothing held: the window goes back */
  /* Sticky: nothing more is read. */
  reason = NULL;
  assert_int_equal(sluice__recv_feed(&o.r, s.bytes, 5, &c, &reason),
                   SLUICE_STATUS_CANCELLED);
  assert_string_equal(reason, "message consumer stopped");
  assert_int_equal(o.got, 2);
  sluice__recv_reset(&o.r);
  stream_free(&s);
}

static void drain_failure(void **state) {
  (void)state;
  stream s;
  stream_make(&s, mixed, N_MIXED);
  owner o;
  owner_init(&o, &s, 1 << 20, 1);
  feed_range(&o, &s, 0, s.len, s.len);
  o.fail_at = 2;
  o.r.paused = 0;
  size_t c = 99;
  assert_int_not_equal(sluice__recv_drain(&o.r, &c), 0);
  assert_int_equal(o.got, 1);
  assert_true(o.r.failed);
  /* The failed one is gone, the rest still held: no window back. */
  assert_true(sluice__recv_holding(&o.r));
  assert_int_equal(c, 0);
  size_t rest = 0;
  for (size_t i = 2; i < N_MIXED; i++)
    rest += mixed[i];
  assert_int_equal(o.r.held, rest);
  sluice__recv_reset(&o.r); /* frees them (ASan) */
  assert_false(sluice__recv_holding(&o.r));
  assert_int_equal(o.r.held, 0);
  stream_free(&s);
}

static void deframer_errors(void **state) {
  (void)state;
  static const size_t one[] = {101};
  stream s;
  stream_make(&s, one, 1);
  owner o;
  owner_init(&o, &s, 100, 0);
  size_t c = 0;
  const char *reason = NULL;
  assert_int_equal(sluice__recv_feed(&o.r, s.bytes, 7, &c, &reason),
                   SLUICE_STATUS_RESOURCE_EXHAUSTED);
  assert_string_equal(reason, "received message larger than max");
  assert_int_equal(sluice__deframer_last_len(&o.r.deframer), 101);
  assert_int_equal(c, 7);
  sluice__recv_reset(&o.r);

  owner_init(&o, &s, 100, 0);
  static const uint8_t bad_flag[] = {2, 0, 0, 0, 0};
  reason = NULL;
  assert_int_equal(sluice__recv_feed(&o.r, bad_flag, 1, &c, &reason),
                   SLUICE_STATUS_INTERNAL);
  assert_string_equal(reason, "invalid compressed flag in message prefix");
  assert_int_equal(o.got, 0);
  sluice__recv_reset(&o.r);
  stream_free(&s);
}

static void reset_keeps_unconsumed(void **state) {
  (void)state;
  stream s;
  stream_make(&s, mixed, N_MIXED);
  owner o;
  owner_init(&o, &s, 1 << 20, 1);
  feed_range(&o, &s, 0, s.len - 3, 50);
  assert_true(sluice__recv_holding(&o.r));
  sluice__recv_reset(&o.r);
  assert_false(sluice__recv_holding(&o.r));
  assert_int_equal(o.r.held, 0);
  assert_false(sluice__deframer_partial(&o.r.deframer));
  /* What the peer sent is still owed to the connection's window. */
  assert_int_equal(o.r.unconsumed, s.len - 3);
  assert_int_equal(sluice__recv_take_unconsumed(&o.r), s.len - 3);
  /* The receiver starts over cleanly from a message boundary. */
  o.got = 0;
  o.r.paused = 0;
  assert_int_equal(feed_range(&o, &s, 0, s.len, 33), s.len);
  assert_int_equal(o.got, N_MIXED);
  sluice__recv_reset(&o.r);
  stream_free(&s);
}

/* A peer that respects a stream window of W bytes sends to a receiver that
 * pauses after every few messages and resumes only when the peer is stuck.
 * What the receiver holds (held messages plus the partial one) never
 * exceeds W plus the largest message. */
static void bounded_while_paused(size_t window, const size_t *lens, size_t n,
                                 size_t pause_each) {
  stream s;
  stream_make(&s, lens, n);
  owner o;
  owner_init(&o, &s, 1 << 24, 0);
  o.pause_each = pause_each;
  size_t pos = 0, outstanding = 0, worst = 0, stalls = 0;
  const size_t bound = window + s.largest;
  for (;;) {
    if (pos < s.len && outstanding < window) {
      size_t chunk = window - outstanding;
      if (chunk > 16384)
        chunk = 16384; /* one DATA frame */
      if (chunk > s.len - pos)
        chunk = s.len - pos;
      size_t c;
      const char *reason;
      assert_int_equal(
          sluice__recv_feed(&o.r, s.bytes + pos, chunk, &c, &reason),
          SLUICE_STATUS_OK);
      pos += chunk;
      outstanding += chunk;
      assert_true(c <= outstanding);
      outstanding -= c;
    } else if (o.r.paused) {
      /* The peer is stuck on the window (or done): resume. */
      if (pos < s.len)
        assert_int_equal(outstanding, window);
      stalls++;
      o.r.paused = 0;
      size_t c;
      assert_int_equal(sluice__recv_drain(&o.r, &c), 0);
      outstanding -= c;
    } else {
      assert_int_equal(pos, s.len);
      break;
    }
    size_t now = o.r.held + o.r.deframer.filled;
    if (now > worst)
      worst = now;
    assert_true(now <= bound);
  }
  assert_int_equal(o.got, n);
  assert_int_equal(outstanding, 0);
  assert_true(stalls > 0);
  assert_true(o.r.buffered_max <= bound);
  /* The bound is not slack: holding came close to one window. */
  assert_true(worst + s.largest + 16384 >= window);
  sluice__recv_reset(&o.r);
  stream_free(&s);
}

static void bound_small_messages(void **state) {
  (void)state;
  size_t lens[400];
  for (size_t i = 0; i < 400; i++)
    lens[i] = 100 + (i * 53) % 900;
  bounded_while_paused(65535, lens, 400, 50);
}

static void bound_messages_larger_than_window(void **state) {
  (void)state;
  static const size_t lens[] = {200000, 10, 150000, 70000, 5, 300000, 1};
  bounded_while_paused(65535, lens, sizeof lens / sizeof lens[0], 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(delivers_across_splits),
      cmocka_unit_test(paused_holds_then_drains),
      cmocka_unit_test(pause_from_callback),
      cmocka_unit_test(order_kept_behind_held),
      cmocka_unit_test(window_follows_delivery),
      cmocka_unit_test(partial_message_not_held),
      cmocka_unit_test(deliver_failure),
      cmocka_unit_test(drain_failure),
      cmocka_unit_test(deframer_errors),
      cmocka_unit_test(reset_keeps_unconsumed),
      cmocka_unit_test(bound_small_messages),
      cmocka_unit_test(bound_messages_larger_than_window),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
