/* transport/headers.c: nghttp2 header lists: borrowed names and values,
 * growth past the inline array, metadata appended with "-bin" values
 * base64-encoded (unpadded) into buffers the list owns, the two-list limit
 * and the sticky failure flag. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include <sluice/metadata.h>

#include "transport/headers.h"

static void expect_nv(const sluice__nvs *h, size_t i, const char *name,
                      const char *value) {
  assert_true(i < h->n);
  const nghttp2_nv *nv = &h->nv[i];
  assert_int_equal(nv->namelen, strlen(name));
  assert_memory_equal(nv->name, name, nv->namelen);
  assert_int_equal(nv->valuelen, strlen(value));
  assert_memory_equal(nv->value, value, nv->valuelen);
  assert_int_equal(nv->flags, NGHTTP2_NV_FLAG_NONE);
}

static void borrowed(void **state) {
  (void)state;
  sluice__nvs h;
  sluice__nvs_init(&h);
  assert_int_equal(h.n, 0);
  assert_ptr_equal(h.nv, h.inline_nv);
  static const char method[] = ":methodPOSTx";
  /* Lengths, not NULs, delimit: a name and value cut out of one string. */
  sluice__nvs_add(&h, method, 7, method + 7, 4);
  char path[] = "/pkg.Svc/M";
  sluice__nvs_add_str(&h, ":path", path);
  assert_int_equal(h.n, 2);
  expect_nv(&h, 0, ":method", "POST");
  expect_nv(&h, 1, ":path", "/pkg.Svc/M");
  /* Borrowed, not copied. */
  assert_ptr_equal(h.nv[0].name, method);
  assert_ptr_equal(h.nv[0].value, method + 7);
  assert_ptr_equal(h.nv[1].value, path);
  assert_false(sluice__nvs_failed(&h));
  sluice__nvs_free(&h);
}

static void grows_past_inline(void **state) {
  (void)state;
  sluice__nvs h;
  sluice__nvs_init(&h);
  static char names[100][16];
  size_t inline_cap = sizeof h.inline_nv / sizeof h.inline_nv[0];
  for (size_t i = 0; i < 100; i++) {
    snprintf(names[i], sizeof names[i], "x-h%zu", i);
    sluice__nvs_add_str(&h, names[i], names[i]);
    if (i + 1 == inline_cap)
      assert_ptr_equal(h.nv, h.inline_nv); /* exactly full: still inline */
  }
  assert_ptr_not_equal(h.nv, h.inline_nv);
  assert_int_equal(h.n, 100);
  assert_true(h.cap >= 100);
  for (size_t i = 0; i < 100; i++)
    expect_nv(&h, i, names[i], names[i]);
  assert_false(sluice__nvs_failed(&h));
  sluice__nvs_free(&h); /* frees the grown array (ASan) */
  assert_ptr_equal(h.nv, h.inline_nv);
  sluice__nvs_free(&h); /* twice: harmless */
}

static void metadata_appended(void **state) {
  (void)state;
  sluice_metadata *md = NULL;
  assert_int_equal(sluice_metadata_new(&md), 0);
  assert_int_equal(sluice_metadata_add_str(md, "x-a", "plain"), 0);
  static const uint8_t bin3[] = {0xab, 0xab, 0xab};
  static const uint8_t bin1[] = {0x01};
  static const uint8_t bin2[] = {0xff, 0xee};
  assert_int_equal(sluice_metadata_add(md, "x-t-bin", bin3, 3), 0);
  assert_int_equal(sluice_metadata_add(md, "x-one-bin", bin1, 1), 0);
  assert_int_equal(sluice_metadata_add(md, "x-two-bin", bin2, 2), 0);
  assert_int_equal(sluice_metadata_add(md, "x-empty-bin", NULL, 0), 0);
  assert_int_equal(sluice_metadata_add_str(md, "x-b", ""), 0);

  sluice__nvs h;
  sluice__nvs_init(&h);
  sluice__nvs_add_str(&h, ":status", "200");
  sluice__nvs_add_md(&h, md);
  assert_false(sluice__nvs_failed(&h));
  assert_int_equal(h.n, 7);
  expect_nv(&h, 0, ":status", "200");
  expect_nv(&h, 1, "x-a", "plain");
  expect_nv(&h, 2, "x-t-bin", "q6ur"); /* unpadded */
  expect_nv(&h, 3, "x-one-bin", "AQ");
  expect_nv(&h, 4, "x-two-bin", "/+4");
  expect_nv(&h, 5, "x-empty-bin", "");
  expect_nv(&h, 6, "x-b", "");
  /* ASCII values are borrowed from the list; the encoded ones live in one
   * buffer the header list owns. */
  assert_ptr_equal(h.nv[1].value, sluice_metadata_find(md, "x-a", NULL));
  assert_int_equal(h.n_b64, 1);
  assert_ptr_equal(h.nv[2].value, (uint8_t *)h.b64[0]);
  sluice__nvs_free(&h);
  assert_int_equal(h.n_b64, 0);
  sluice_metadata_del(md);
}

static void empty_and_null_lists(void **state) {
  (void)state;
  sluice_metadata *md = NULL;
  assert_int_equal(sluice_metadata_new(&md), 0);
  sluice__nvs h;
  sluice__nvs_init(&h);
  sluice__nvs_add_md(&h, md);
  sluice__nvs_add_md(&h, NULL);
  assert_int_equal(h.n, 0);
  assert_int_equal(h.n_b64, 0);
  assert_false(sluice__nvs_failed(&h));
  sluice__nvs_free(&h);
  sluice_metadata_del(md);
}

static void two_binary_lists_at_most(void **state) {
  (void)state;
  sluice_metadata *a = NULL, *b = NULL, *c = NULL, *plain = NULL;
  assert_int_equal(sluice_metadata_new(&a), 0);
  assert_int_equal(sluice_metadata_new(&b), 0);
  assert_int_equal(sluice_metadata_new(&c), 0);
  assert_int_equal(sluice_metadata_new(&plain), 0);
  static const uint8_t v[] = {1, 2, 3};
  sluice_metadata_add(a, "a-bin", v, 3);
  sluice_metadata_add(b, "b-bin", v, 3);
  sluice_metadata_add(c, "c-bin", v, 3);
  sluice_metadata_add_str(plain, "p", "q");

  sluice__nvs h;
  sluice__nvs_init(&h);
  sluice__nvs_add_md(&h, a); /* initial */
  sluice__nvs_add_md(&h, b); /* trailing */
  assert_int_equal(h.n_b64, 2);
  /* A list without binary values needs no buffer: still fine. */
  sluice__nvs_add_md(&h, plain);
  assert_false(sluice__nvs_failed(&h));
  assert_int_equal(h.n, 3);
  expect_nv(&h, 0, "a-bin", "AQID");
  expect_nv(&h, 1, "b-bin", "AQID");
  expect_nv(&h, 2, "p", "q");
  /* A third one with binary values does not fit: the list fails, and the
   * failure sticks (later adds are ignored). */
  sluice__nvs_add_md(&h, c);
  assert_true(sluice__nvs_failed(&h));
  assert_int_equal(h.n, 3);
  sluice__nvs_add_str(&h, "later", "ignored");
  assert_int_equal(h.n, 3);
  sluice__nvs_free(&h); /* both buffers freed (ASan) */

  /* free resets the buffers: the list can be set up again. */
  sluice__nvs_init(&h);
  sluice__nvs_add_md(&h, c);
  assert_false(sluice__nvs_failed(&h));
  expect_nv(&h, 0, "c-bin", "AQID");
  sluice__nvs_free(&h);
  sluice_metadata_del(a);
  sluice_metadata_del(b);
  sluice_metadata_del(c);
  sluice_metadata_del(plain);
}

static void large_binary_values(void **state) {
  (void)state;
  /* Many encoded values in one buffer, each at a stable address. */
  sluice_metadata *md = NULL;
  assert_int_equal(sluice_metadata_new(&md), 0);
  static uint8_t big[3000];
  for (size_t i = 0; i < sizeof big; i++)
    big[i] = (uint8_t)(i * 7);
  char key[32];
  for (int i = 0; i < 20; i++) {
    snprintf(key, sizeof key, "k%d-bin", i);
    assert_int_equal(sluice_metadata_add(md, key, big, 100 + (size_t)i * 140),
                     0);
  }
  sluice__nvs h;
  sluice__nvs_init(&h);
  sluice__nvs_add_md(&h, md);
  assert_false(sluice__nvs_failed(&h));
  assert_int_equal(h.n, 20);
  for (int i = 0; i < 20; i++) {
    size_t n = 100 + (size_t)i * 140;
    assert_int_equal(h.nv[i].valuelen, (n * 4 + 2) / 3); /* unpadded */
    if (i > 0) /* laid out one after the other, NUL-separated */
      assert_ptr_equal(h.nv[i].value,
                       h.nv[i - 1].value + h.nv[i - 1].valuelen + 1);
  }
  sluice__nvs_free(&h);
  sluice_metadata_del(md);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(borrowed),
      cmocka_unit_test(grows_past_inline),
      cmocka_unit_test(metadata_appended),
      cmocka_unit_test(empty_and_null_lists),
      cmocka_unit_test(two_binary_lists_at_most),
      cmocka_unit_test(large_binary_values),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
