/* core/objcache.c: recycled objects come back zeroed, the bound holds,
 * objects from calloc are accepted, drain frees everything (LeakSanitizer
 * in the ASan build reports anything left). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "core/objcache.h"

typedef struct obj {
  void *first; /* the cache links through this word */
  char bytes[1200];
} obj;

static int all_zero(const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    if (b[i])
      return 0;
  return 1;
}

static void recycled_objects_are_zeroed(void **state) {
  (void)state;
  sluice__objcache c;
  sluice__objcache_init(&c, sizeof(obj), 4);
  obj *a = sluice__objcache_get(&c);
  assert_non_null(a);
  assert_true(all_zero(a, sizeof *a));
  memset(a, 0xab, sizeof *a);
  sluice__objcache_put(&c, a);
  assert_int_equal(c.n, 1);
  obj *b = sluice__objcache_get(&c);
  assert_ptr_equal(a, b); /* reused, not a new allocation */
  assert_int_equal(c.n, 0);
  assert_true(all_zero(b, sizeof *b));
  sluice__objcache_put(&c, b);
  sluice__objcache_drain(&c);
  assert_int_equal(c.n, 0);
  assert_null(c.head);
}

static void bound_holds(void **state) {
  (void)state;
  sluice__objcache c;
  sluice__objcache_init(&c, sizeof(obj), 3);
  obj *o[10];
  for (int i = 0; i < 10; i++)
    assert_non_null(o[i] = sluice__objcache_get(&c));
  for (int i = 0; i < 10; i++) {
    sluice__objcache_put(&c, o[i]);
    assert_true(c.n <= 3);
  }
  assert_int_equal(c.n, 3);
  /* Last in, first out: the three kept are the first three put. */
  obj *x = sluice__objcache_get(&c);
  assert_ptr_equal(x, o[2]);
  free(x); /* an object from the cache may also simply be freed */
  sluice__objcache_drain(&c);
}

static void accepts_calloc_objects_and_null(void **state) {
  (void)state;
  sluice__objcache c;
  sluice__objcache_init(&c, sizeof(obj), 2);
  sluice__objcache_put(&c, NULL);
  assert_int_equal(c.n, 0);
  obj *p = calloc(1, sizeof *p);
  assert_non_null(p);
  sluice__objcache_put(&c, p);
  assert_int_equal(c.n, 1);
  sluice__objcache_drain(&c);
  /* drain on an empty cache is harmless */
  sluice__objcache_drain(&c);
  assert_int_equal(c.n, 0);
}

static void tiny_objects_hold_the_link(void **state) {
  (void)state;
  sluice__objcache c;
  sluice__objcache_init(&c, 1, 8); /* rounded up to the link + skip */
  assert_int_equal(c.size, 16);
  void *a = sluice__objcache_get(&c), *b = sluice__objcache_get(&c);
  sluice__objcache_put(&c, a);
  sluice__objcache_put(&c, b);
  assert_ptr_equal(sluice__objcache_get(&c), b);
  assert_ptr_equal(sluice__objcache_get(&c), a);
  free(a);
  free(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(recycled_objects_are_zeroed),
      cmocka_unit_test(bound_holds),
      cmocka_unit_test(accepts_calloc_objects_and_null),
      cmocka_unit_test(tiny_objects_hold_the_link),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
