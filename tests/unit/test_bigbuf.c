/* core/bigbuf.c: large blocks are reused (same pointer back), a block that
 * would waste too much is not, small sizes bypass the cache, the slot and
 * byte bounds hold, plain malloc'd blocks are accepted, aged blocks are
 * freed, and the protobuf-c allocator round-trips a message with a large
 * bytes field (LeakSanitizer in the ASan build reports anything left). */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "core/bigbuf.h"

static size_t cached_blocks(void) {
  size_t n, bytes;
  sluice__bigbuf_stats(&n, &bytes);
  return n;
}

static void large_blocks_are_reused(void **state) {
  (void)state;
  sluice__bigbuf_drain();
  uint8_t *a = sluice__bigbuf_get(1u << 20);
  assert_non_null(a);
  memset(a, 1, 1u << 20); /* all of it is usable */
  sluice__bigbuf_put(a);
  assert_int_equal(cached_blocks(), 1);
  /* A little larger (a prefix more) still fits the rounded block. */
  uint8_t *b = sluice__bigbuf_get((1u << 20) + 9);
  assert_ptr_equal(a, b);
  assert_int_equal(cached_blocks(), 0);
  memset(b, 2, (1u << 20) + 9);
  sluice__bigbuf_put(b);
  /* Far smaller: not worth a 1 MiB block. */
  uint8_t *c = sluice__bigbuf_get(100 * 1024);
  assert_non_null(c);
  assert_ptr_not_equal(c, b);
  assert_int_equal(cached_blocks(), 1);
  free(c); /* blocks from the cache may go to free() */
  sluice__bigbuf_drain();
  assert_int_equal(cached_blocks(), 0);
}

static void small_sizes_bypass_the_cache(void **state) {
  (void)state;
  sluice__bigbuf_drain();
  void *p = sluice__bigbuf_get(100);
  assert_non_null(p);
  sluice__bigbuf_put(p);
  assert_int_equal(cached_blocks(), 0);
  void *z = sluice__bigbuf_get(0); /* a valid, freeable pointer */
  assert_non_null(z);
  sluice__bigbuf_put(z);
  sluice__bigbuf_put(NULL);
  assert_int_equal(cached_blocks(), 0);
}

static void bounds_hold(void **state) {
  (void)state;
  sluice__bigbuf_drain();
  void *p[SLUICE__BIGBUF_SLOTS + 4];
  for (size_t i = 0; i < SLUICE__BIGBUF_SLOTS + 4; i++) {
    p[i] = malloc(128 * 1024); /* plain malloc'd blocks are accepted */
    assert_non_null(p[i]);
  }
  for (size_t i = 0; i < SLUICE__BIGBUF_SLOTS + 4; i++)
    sluice__bigbuf_put(p[i]);
  assert_int_equal(cached_blocks(), SLUICE__BIGBUF_SLOTS);
  sluice__bigbuf_drain();
  /* The byte bound: two blocks of 10 MiB do not both stay. */
  sluice__bigbuf_put(malloc(10u << 20));
  sluice__bigbuf_put(malloc(10u << 20));
  size_t n, bytes;
  sluice__bigbuf_stats(&n, &bytes);
  assert_int_equal(n, 1);
  assert_true(bytes <= SLUICE__BIGBUF_MAX_BYTES);
  sluice__bigbuf_drain();
}

static void aged_blocks_are_freed(void **state) {
  (void)state;
  sluice__bigbuf_drain();
  sluice__bigbuf_put(malloc(256 * 1024));
  assert_int_equal(cached_blocks(), 1);
  uv_sleep(SLUICE__BIGBUF_AGE_MS + 200);
  /* The next operation expires it, whatever its size. */
  free(sluice__bigbuf_get(70 * 1024));
  assert_int_equal(cached_blocks(), 0);
}

static void pb_allocator_round_trips(void **state) {
  (void)state;
  sluice__bigbuf_drain();
  ProtobufCAllocator *a = sluice__bigbuf_pb_allocator();
  void *p = a->alloc(a->allocator_data, 300 * 1024);
  assert_non_null(p);
  memset(p, 3, 300 * 1024);
  a->free(a->allocator_data, p);
  assert_int_equal(cached_blocks(), 1);
  void *q = a->alloc(a->allocator_data, 16);
  assert_non_null(q);
  a->free(a->allocator_data, q);
  assert_int_equal(cached_blocks(), 1);
  sluice__bigbuf_drain();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(large_blocks_are_reused),
      cmocka_unit_test(small_sizes_bypass_the_cache),
      cmocka_unit_test(bounds_hold),
      cmocka_unit_test(aged_blocks_are_freed),
      cmocka_unit_test(pb_allocator_round_trips),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
