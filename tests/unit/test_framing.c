/* Length-prefixed message framing: the prefix, reassembly across every split,
 * limits, bad flags, partial messages and the zero-copy path. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "wire/framing.h"

#define MAX_MSGS 16

/* A stream of messages with their prefixes, and what a deframer gave back. */
typedef struct {
  uint8_t bytes[4096];
  size_t len;
  size_t n_msgs;
  size_t msg_len[MAX_MSGS];
  int msg_compressed[MAX_MSGS];
  size_t msg_off[MAX_MSGS]; /* where the message body starts in bytes */
} stream;

typedef struct {
  const stream *want;
  size_t got;
  int stop_after;       /* stop once this many messages arrived; 0 = never */
  const uint8_t *chunk; /* the chunk being fed, for the zero-copy check */
  size_t chunk_len;
  size_t zero_copy; /* messages that pointed into the fed chunk */
} collector;

static void add_msg(stream *s, int compressed, size_t len, uint8_t seed) {
  assert_true(s->n_msgs < MAX_MSGS);
  assert_true(s->len + 5 + len <= sizeof s->bytes);
  sluice__frame_header(s->bytes + s->len, compressed, (uint32_t)len);
  s->len += 5;
  s->msg_len[s->n_msgs] = len;
  s->msg_compressed[s->n_msgs] = compressed;
  s->msg_off[s->n_msgs] = s->len;
  for (size_t i = 0; i < len; i++)
    s->bytes[s->len++] = (uint8_t)(seed + i * 7);
  s->n_msgs++;
}

/* Several messages, among them zero-length ones (also last) and one larger
 * than a typical split. */
static void make_stream(stream *s) {
  memset(s, 0, sizeof *s);
  add_msg(s, 0, 3, 1);
  add_msg(s, 1, 0, 2);
  add_msg(s, 0, 1, 3);
  add_msg(s, 0, 17, 4);
  add_msg(s, 1, 300, 5);
  add_msg(s, 0, 0, 6);
  add_msg(s, 0, 6, 7);
  add_msg(s, 0, 0, 8);
}

static int collect(void *ud, int compressed, const uint8_t *msg, size_t len) {
  collector *c = ud;
  const stream *s = c->want;
  assert_true(c->got < s->n_msgs);
  assert_int_equal(compressed, s->msg_compressed[c->got]);
  assert_int_equal(len, s->msg_len[c->got]);
  assert_non_null(msg);
  if (len > 0)
    assert_memory_equal(msg, s->bytes + s->msg_off[c->got], len);
  if (c->chunk != NULL && msg >= c->chunk &&
      msg + len <= c->chunk + c->chunk_len)
    c->zero_copy++;
  c->got++;
  return c->stop_after != 0 && c->got == (size_t)c->stop_after;
}

static void feed_ok(sluice__deframer *d, collector *c, const uint8_t *p,
                    size_t n) {
  const char *reason = NULL;
  c->chunk = p;
  c->chunk_len = n;
  assert_int_equal(sluice__deframer_feed(d, p, n, collect, c, &reason),
                   SLUICE_STATUS_OK);
  assert_null(reason);
}

static void frame_header_bytes(void **state) {
  (void)state;
  uint8_t h[5];
  sluice__frame_header(h, 0, 0x01020304u);
  assert_memory_equal(h, "\x00\x01\x02\x03\x04", 5);
  sluice__frame_header(h, 1, 0);
  assert_memory_equal(h, "\x01\x00\x00\x00\x00", 5);
  sluice__frame_header(h, 5, UINT32_MAX); /* any non-zero means compressed */
  assert_memory_equal(h, "\x01\xff\xff\xff\xff", 5);
}

static void whole_stream_in_one_chunk(void **state) {
  (void)state;
  stream s;
  make_stream(&s);
  sluice__deframer d;
  sluice__deframer_init(&d, 1024);
  collector c = {.want = &s};
  feed_ok(&d, &c, s.bytes, s.len);
  assert_int_equal(c.got, s.n_msgs);
  assert_int_equal(c.zero_copy, s.n_msgs);
  assert_false(sluice__deframer_partial(&d));
  assert_null(d.buf); /* nothing was copied, so nothing was allocated */
  sluice__deframer_reset(&d);
}

static void every_split_point(void **state) {
  (void)state;
  stream s;
  make_stream(&s);
  for (size_t i = 0; i <= s.len; i++) {
    sluice__deframer d;
    sluice__deframer_init(&d, 1024);
    collector c = {.want = &s};
    feed_ok(&d, &c, s.bytes, i);
    feed_ok(&d, &c, s.bytes + i, s.len - i);
    assert_int_equal(c.got, s.n_msgs);
    assert_false(sluice__deframer_partial(&d));
    sluice__deframer_reset(&d);
  }
}

static void every_pair_of_split_points(void **state) {
  (void)state;
  stream s;
  make_stream(&s);
  sluice__deframer d;
  sluice__deframer_init(&d, 1024);
  for (size_t i = 0; i <= s.len; i++) {
    for (size_t j = i; j <= s.len; j++) {
      collector c = {.want = &s};
      feed_ok(&d, &c, s.bytes, i);
      feed_ok(&d, &c, s.bytes + i, j - i);
      feed_ok(&d, &c, s.bytes + j, s.len - j);
      assert_int_equal(c.got, s.n_msgs);
      assert_false(sluice__deframer_partial(&d));
    }
  }
  sluice__deframer_reset(&d); /* the buffer is reused across all of them */
}

static void one_byte_at_a_time(void **state) {
  (void)state;
  stream s;
  make_stream(&s);
  sluice__deframer d;
  sluice__deframer_init(&d, 1024);
  collector c = {.want = &s};
  for (size_t i = 0; i < s.len; i++) {
    feed_ok(&d, &c, s.bytes + i, 1);
    feed_ok(&d, &c, s.bytes + i + 1, 0); /* empty DATA frames change nothing */
  }
  assert_int_equal(c.got, s.n_msgs);
  sluice__deframer_reset(&d);
}

static void random_multi_splits(void **state) {
  (void)state;
  stream s;
  make_stream(&s);
  uint32_t x = 2463534242u;
  for (int round = 0; round < 5000; round++) {
    sluice__deframer d;
    sluice__deframer_init(&d, 1024);
    collector c = {.want = &s};
    size_t pos = 0;
    while (pos < s.len) {
      x ^= x << 13;
      x ^= x >> 17;
      x ^= x << 5;
      /* Mostly small chunks, sometimes large, sometimes empty. */
      size_t n = (x >> 8) % 4 == 0 ? (x >> 12) % 400 : (x >> 12) % 12;
      if (n > s.len - pos)
        n = s.len - pos;
      /* Copy so a message is only "zero-copy" if it lies in this chunk. */
      uint8_t *chunk = malloc(n ? n : 1);
      assert_non_null(chunk);
      memcpy(chunk, s.bytes + pos, n);
      feed_ok(&d, &c, chunk, n);
      free(chunk);
      pos += n;
    }
    assert_int_equal(c.got, s.n_msgs);
    assert_false(sluice__deframer_partial(&d));
    sluice__deframer_reset(&d);
  }
}

static void zero_copy_only_when_whole(void **state) {
  (void)state;
  stream s;
  memset(&s, 0, sizeof s);
  add_msg(&s, 0, 10, 9);
  add_msg(&s, 0, 10, 10);
  sluice__deframer d;
  sluice__deframer_init(&d, 100);
  collector c = {.want = &s};
  /* First message whole in chunk one, second split between the chunks. */
  uint8_t a[22], b[10];
  memcpy(a, s.bytes, 22);
  memcpy(b, s.bytes + 22, 8);
  feed_ok(&d, &c, a, 22);
  assert_int_equal(c.got, 1);
  assert_int_equal(c.zero_copy, 1);
  assert_true(sluice__deframer_partial(&d));
  feed_ok(&d, &c, b, 8);
  assert_int_equal(c.got, 2);
  assert_int_equal(c.zero_copy, 1); /* reassembled in the buffer */
  sluice__deframer_reset(&d);

  /* A prefix alone, then the whole body in the next chunk: no copy either. */
  collector c2 = {.want = &s};
  sluice__deframer_init(&d, 100);
  memcpy(a, s.bytes, 5);
  feed_ok(&d, &c2, a, 5);
  memcpy(b, s.bytes + 5, 10);
  feed_ok(&d, &c2, b, 10);
  assert_int_equal(c2.got, 1);
  assert_int_equal(c2.zero_copy, 1);
  assert_null(d.buf);
  sluice__deframer_reset(&d);
}

/* The raw path's hand-over: a reassembled message's block can be taken from
 * inside the callback (message at block + 5, room for a prefix), the
 * deframer then starts a new buffer; a message that pointed into the fed
 * chunk cannot be taken. */
typedef struct {
  sluice__deframer *d;
  uint8_t *taken[4];
  size_t n, lens[4];
} taker;

static int take_cb(void *ud, int compressed, const uint8_t *msg, size_t len) {
  (void)compressed;
  taker *t = ud;
  uint8_t *block = sluice__deframer_take(t->d, msg);
  if (block)
    assert_ptr_equal(block + SLUICE__FRAME_HEADER_LEN, msg);
  /* Taken once only. */
  assert_null(sluice__deframer_take(t->d, msg));
  t->taken[t->n] = block;
  t->lens[t->n++] = len;
  return 0;
}

static void take_reassembled(void **state) {
  (void)state;
  stream s;
  memset(&s, 0, sizeof s);
  add_msg(&s, 0, 40, 1);
  add_msg(&s, 0, 40, 2);
  add_msg(&s, 0, 4, 3);
  sluice__deframer d;
  sluice__deframer_init(&d, 100);
  taker t = {.d = &d};
  const char *reason = NULL;
  /* Message one split, message two split, message three whole. */
  size_t cuts[] = {20, 60, 90, s.len};
  size_t at = 0;
  for (size_t i = 0; i < 4; i++) {
    assert_int_equal(sluice__deframer_feed(&d, s.bytes + at, cuts[i] - at,
                                           take_cb, &t, &reason),
                     SLUICE_STATUS_OK);
    at = cuts[i];
  }
  assert_int_equal(t.n, 3);
  for (size_t i = 0; i < 2; i++) {
    assert_non_null(t.taken[i]);
    assert_int_equal(t.lens[i], 40);
    assert_memory_equal(t.taken[i] + SLUICE__FRAME_HEADER_LEN,
                        s.bytes + s.msg_off[i], 40);
    free(t.taken[i]);
  }
  assert_null(t.taken[2]); /* whole in its chunk: not the deframer's */
  sluice__deframer_reset(&d);
}

static void partial_detection(void **state) {
  (void)state;
  stream s;
  memset(&s, 0, sizeof s);
  add_msg(&s, 0, 4, 1);
  add_msg(&s, 0, 0, 2);
  sluice__deframer d;
  sluice__deframer_init(&d, 100);
  collector c = {.want = &s};
  assert_false(sluice__deframer_partial(&d));
  feed_ok(&d, &c, s.bytes, 1);
  assert_true(sluice__deframer_partial(&d)); /* inside the prefix */
  feed_ok(&d, &c, s.bytes + 1, 4);
  assert_true(sluice__deframer_partial(&d)); /* prefix done, no body */
  feed_ok(&d, &c, s.bytes + 5, 3);
  assert_true(sluice__deframer_partial(&d)); /* inside the body */
  feed_ok(&d, &c, s.bytes + 8, 1);
  assert_false(sluice__deframer_partial(&d));
  assert_int_equal(c.got, 1);
  feed_ok(&d, &c, s.bytes + 9, 4);
  assert_true(sluice__deframer_partial(&d));
  feed_ok(&d, &c, s.bytes + 13, 1); /* a zero-length message completes */
  assert_false(sluice__deframer_partial(&d));
  assert_int_equal(c.got, 2);
  sluice__deframer_reset(&d);
}

static void max_size(void **state) {
  (void)state;
  stream s;
  memset(&s, 0, sizeof s);
  add_msg(&s, 0, 64, 1);
  sluice__deframer d;
  const char *reason = NULL;

  /* Exactly the limit is fine. */
  sluice__deframer_init(&d, 64);
  collector c = {.want = &s};
  feed_ok(&d, &c, s.bytes, s.len);
  assert_int_equal(c.got, 1);
  assert_int_equal(sluice__deframer_last_len(&d), 0);
  sluice__deframer_reset(&d);

  /* One byte less: refused as soon as the prefix is complete, before any
   * body arrives or memory is reserved for it. */
  sluice__deframer_init(&d, 63);
  c = (collector){.want = &s};
  feed_ok(&d, &c, s.bytes, 3);
  assert_int_equal(
      sluice__deframer_feed(&d, s.bytes + 3, 2, collect, &c, &reason),
      SLUICE_STATUS_RESOURCE_EXHAUSTED);
  assert_non_null(reason);
  assert_string_equal(reason, "received message larger than max");
  assert_int_equal(sluice__deframer_last_len(&d), 64);
  assert_null(d.buf);
  assert_int_equal(c.got, 0);
  /* Sticky. */
  reason = NULL;
  assert_int_equal(
      sluice__deframer_feed(&d, s.bytes + 5, 64, collect, &c, &reason),
      SLUICE_STATUS_RESOURCE_EXHAUSTED);
  assert_non_null(reason);
  assert_int_equal(c.got, 0);
  sluice__deframer_reset(&d);
  assert_int_equal(sluice__deframer_last_len(&d), 0);

  /* A 4 GiB declaration against the 4 MiB default. */
  sluice__deframer_init(&d, 4 * 1024 * 1024);
  uint8_t huge[5];
  sluice__frame_header(huge, 0, UINT32_MAX);
  assert_int_equal(sluice__deframer_feed(&d, huge, 5, collect, &c, &reason),
                   SLUICE_STATUS_RESOURCE_EXHAUSTED);
  assert_int_equal(sluice__deframer_last_len(&d), UINT32_MAX);
  sluice__deframer_reset(&d);

  /* A limit of 0 still accepts empty messages. */
  memset(&s, 0, sizeof s);
  add_msg(&s, 0, 0, 1);
  sluice__deframer_init(&d, 0);
  c = (collector){.want = &s};
  feed_ok(&d, &c, s.bytes, s.len);
  assert_int_equal(c.got, 1);
  sluice__deframer_reset(&d);
}

static void bad_flag(void **state) {
  (void)state;
  static const uint8_t flags[] = {2, 0x80, 0xff};
  for (size_t i = 0; i < sizeof flags; i++) {
    uint8_t bytes[8] = {flags[i], 0, 0, 0, 3, 'a', 'b', 'c'};
    stream s;
    memset(&s, 0, sizeof s);
    collector c = {.want = &s};
    sluice__deframer d;
    sluice__deframer_init(&d, 100);
    const char *reason = NULL;
    assert_int_equal(
        sluice__deframer_feed(&d, bytes, sizeof bytes, collect, &c, &reason),
        SLUICE_STATUS_INTERNAL);
    assert_non_null(reason);
    assert_int_equal(c.got, 0);
    assert_int_equal(sluice__deframer_last_len(&d), 0);
    sluice__deframer_reset(&d);
  }
  /* A bad flag after a good message: the good one is still delivered. */
  stream s;
  memset(&s, 0, sizeof s);
  add_msg(&s, 0, 2, 1);
  s.bytes[s.len++] = 7;
  collector c = {.want = &s};
  sluice__deframer d;
  sluice__deframer_init(&d, 100);
  const char *reason = NULL;
  assert_int_equal(
      sluice__deframer_feed(&d, s.bytes, s.len, collect, &c, &reason),
      SLUICE_STATUS_INTERNAL);
  assert_int_equal(c.got, 1);
  sluice__deframer_reset(&d);
}

static void consumer_stops(void **state) {
  (void)state;
  stream s;
  make_stream(&s);
  sluice__deframer d;
  sluice__deframer_init(&d, 1024);
  collector c = {.want = &s, .stop_after = 2};
  const char *reason = NULL;
  assert_int_equal(
      sluice__deframer_feed(&d, s.bytes, s.len, collect, &c, &reason),
      SLUICE_STATUS_CANCELLED);
  assert_non_null(reason);
  assert_int_equal(c.got, 2);
  assert_int_equal(
      sluice__deframer_feed(&d, s.bytes, s.len, collect, &c, &reason),
      SLUICE_STATUS_CANCELLED);
  assert_int_equal(c.got, 2);
  sluice__deframer_reset(&d);

  /* Stopping on a reassembled message, then reset and reuse. */
  sluice__deframer_init(&d, 1024);
  c = (collector){.want = &s, .stop_after = 1};
  feed_ok(&d, &c, s.bytes, 4);
  assert_int_equal(
      sluice__deframer_feed(&d, s.bytes + 4, s.len - 4, collect, &c, NULL),
      SLUICE_STATUS_CANCELLED);
  assert_int_equal(c.got, 1);
  sluice__deframer_reset(&d);
  c = (collector){.want = &s};
  feed_ok(&d, &c, s.bytes, s.len);
  assert_int_equal(c.got, s.n_msgs);
  sluice__deframer_reset(&d);
}

/* A large message that trickles in: the deframer holds a first block of
 * at most 64 KiB until bytes beyond it arrive, then the whole declared
 * length, and the message comes out intact whatever the split (a split
 * right at the first block's end, one across it, one-byte pieces at the
 * start). Before the staged reserve, a 4 MiB declaration took a 4 MiB
 * block at its first body byte. */
typedef struct {
  size_t got, len;
  int intact;
} big_collector;

static int on_big(void *ud, int compressed, const uint8_t *msg, size_t len) {
  (void)compressed;
  big_collector *c = ud;
  c->got++;
  c->len = len;
  c->intact = 1;
  for (size_t i = 0; i < len; i++)
    if (msg[i] != (uint8_t)(i * 13 + 5))
      c->intact = 0;
  return 0;
}

static void large_message_reserves_in_stages(void **state) {
  (void)state;
  const size_t len = 4u << 20;
  uint8_t *wire = malloc(5 + len);
  assert_non_null(wire);
  sluice__frame_header(wire, 0, (uint32_t)len);
  for (size_t i = 0; i < len; i++)
    wire[5 + i] = (uint8_t)(i * 13 + 5);
  const size_t splits[][3] = {
      {5 + 10, 5 + 64 * 1024, 5 + len}, /* at the first block's end */
      {5 + 1, 5 + 70 * 1024, 5 + len},  /* across it */
      {5 + 64 * 1024 - 1, 5 + 64 * 1024 + 1, 5 + len},
  };
  for (size_t k = 0; k < sizeof splits / sizeof splits[0]; k++) {
    sluice__deframer d;
    sluice__deframer_init(&d, 8u << 20);
    big_collector c = {0};
    size_t at = 0;
    for (size_t j = 0; j < 3; j++) {
      size_t end = splits[k][j];
      /* the first piece one byte at a time */
      size_t step = j == 0 ? 1 : end - at;
      while (at < end) {
        size_t n = end - at < step ? end - at : step;
        assert_int_equal(
            sluice__deframer_feed(&d, wire + at, n, on_big, &c, NULL),
            SLUICE_STATUS_OK);
        at += n;
        if (c.got == 0)
          assert_true(d.filled <= 64 * 1024 ? d.cap <= 64 * 1024
                                            : d.cap == len);
      }
    }
    assert_int_equal(c.got, 1);
    assert_int_equal(c.len, len);
    assert_true(c.intact);
    sluice__deframer_reset(&d);
  }
  free(wire);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(frame_header_bytes),
      cmocka_unit_test(whole_stream_in_one_chunk),
      cmocka_unit_test(every_split_point),
      cmocka_unit_test(every_pair_of_split_points),
      cmocka_unit_test(one_byte_at_a_time),
      cmocka_unit_test(random_multi_splits),
      cmocka_unit_test(zero_copy_only_when_whole),
      cmocka_unit_test(take_reassembled),
      cmocka_unit_test(partial_detection),
      cmocka_unit_test(max_size),
      cmocka_unit_test(bad_flag),
      cmocka_unit_test(consumer_stops),
      cmocka_unit_test(large_message_reserves_in_stages),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
