/* Metadata lists: the public API, key and value rules, reserved headers and
 * the receiving side's base64 decoding of -bin values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include <sluice/metadata.h>
#include <sluice/status.h>

#include "wire/metadata_internal.h"
#include "wire/metadata_rules.h"

static int setup(void **state) {
  sluice_metadata *md = NULL;
  if (sluice_metadata_new(&md) != 0)
    return -1;
  *state = md;
  return 0;
}

static int teardown(void **state) {
  sluice_metadata_del(*state);
  return 0;
}

static void check_entry(const sluice_metadata *md, size_t i, const char *key,
                        const void *value, size_t len) {
  const char *k;
  const void *v;
  size_t n;
  assert_int_equal(sluice_metadata_get(md, i, &k, &v, &n), 0);
  assert_string_equal(k, key);
  assert_int_equal(n, len);
  if (len > 0)
    assert_memory_equal(v, value, len);
  assert_int_equal(((const char *)v)[n], '\0');
}

static void new_and_del(void **state) {
  (void)state;
  assert_int_equal(sluice_metadata_new(NULL), SLUICE_ERR_INVALID_ARG);
  sluice_metadata *md = NULL;
  assert_int_equal(sluice_metadata_new(&md), 0);
  assert_non_null(md);
  assert_int_equal(sluice_metadata_count(md), 0);
  sluice_metadata_del(md);
  sluice_metadata_del(NULL);
  assert_int_equal(sluice_metadata_count(NULL), 0);
}

static void add_get_find(void **state) {
  sluice_metadata *md = *state;
  assert_int_equal(sluice_metadata_add_str(md, "x-user", "alice"), 0);
  assert_int_equal(sluice_metadata_add(md, "x-n", "12345", 3), 0);
  assert_int_equal(sluice_metadata_add_str(md, "x-user", "bob"), 0);
  assert_int_equal(sluice_metadata_add(md, "empty", NULL, 0), 0);
  assert_int_equal(sluice_metadata_add_str(md, "user-agent", "me/1.0"), 0);
  assert_int_equal(sluice_metadata_count(md), 5);

  check_entry(md, 0, "x-user", "alice", 5);
  check_entry(md, 1, "x-n", "123", 3);
  check_entry(md, 2, "x-user", "bob", 3);
  check_entry(md, 3, "empty", "", 0);

  size_t n = 99;
  assert_string_equal(sluice_metadata_find(md, "x-user", &n), "alice");
  assert_int_equal(n, 5);
  assert_string_equal(sluice_metadata_find(md, "x-n", NULL), "123");
  assert_string_equal(sluice_metadata_find(md, "empty", &n), "");
  assert_int_equal(n, 0);
  assert_null(sluice_metadata_find(md, "x-use", &n));
  assert_null(sluice_metadata_find(md, "X-USER", &n));
  assert_null(sluice_metadata_find(NULL, "x-user", &n));
  assert_null(sluice_metadata_find(md, NULL, &n));

  const char *k;
  const void *v;
  assert_int_equal(sluice_metadata_get(md, 5, &k, &v, &n),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice_metadata_get(NULL, 0, &k, &v, &n),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice_metadata_get(md, 0, NULL, &v, &n),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice_metadata_get(md, 0, &k, NULL, &n),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice_metadata_get(md, 0, &k, &v, NULL),
                   SLUICE_ERR_INVALID_ARG);
}

static void many_entries(void **state) {
  sluice_metadata *md = *state;
  char key[16], val[16];
  for (int i = 0; i < 1000; i++) {
    snprintf(key, sizeof key, "k%d", i);
    snprintf(val, sizeof val, "v%d", i * 3);
    assert_int_equal(sluice_metadata_add_str(md, key, val), 0);
  }
  assert_int_equal(sluice_metadata_count(md), 1000);
  assert_string_equal(sluice_metadata_find(md, "k999", NULL), "v2997");
  check_entry(md, 500, "k500", "v1500", 5);
}

/* Entries are stored in the list's inline arena while they fit and on the
 * heap otherwise; both kinds, interleaved, keep their bytes and are freed
 * once (ASan checks the frees). */
static void arena_and_heap_mix(void **state) {
  sluice_metadata *md = *state;
  char big[400], mid[200], key[16];
  memset(big, 'b', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  memset(mid, 'm', sizeof mid - 1);
  mid[sizeof mid - 1] = '\0';
  assert_int_equal(sluice_metadata_add_str(md, "big", big), 0);  /* heap */
  assert_int_equal(sluice_metadata_add_str(md, "a", "1"), 0);    /* arena */
  assert_int_equal(sluice_metadata_add_str(md, "mid", mid), 0);  /* arena */
  assert_int_equal(sluice_metadata_add_str(md, "mid2", mid), 0); /* heap */
  for (int i = 0; i < 20; i++) {
    snprintf(key, sizeof key, "k%d", i);
    assert_int_equal(sluice_metadata_add_str(md, key, "v"), 0);
  }
  assert_int_equal(sluice_metadata_count(md), 24);
  check_entry(md, 0, "big", big, sizeof big - 1);
  check_entry(md, 1, "a", "1", 1);
  check_entry(md, 2, "mid", mid, sizeof mid - 1);
  check_entry(md, 3, "mid2", mid, sizeof mid - 1);
  check_entry(md, 23, "k19", "v", 1);
}

static void add_rejects(void **state) {
  sluice_metadata *md = *state;
  static const char *bad_keys[] = {
      "",
      "Upper",
      "x user",
      "x:y",
      ":path",
      "x/y",
      "caf\xc3\xa9",
      "grpc-anything",
      "grpc-timeout",
      "grpc-status-details-bin",
      "grpc-retry-pushback-ms",
      "grpc-",
  };
  for (size_t i = 0; i < sizeof bad_keys / sizeof bad_keys[0]; i++)
    assert_int_equal(sluice_metadata_add_str(md, bad_keys[i], "v"),
                     SLUICE_ERR_BAD_METADATA);
  /* "grpc" without the dash, or grpc- elsewhere, is an ordinary key. */
  assert_int_equal(sluice_metadata_add_str(md, "grpc", "v"), 0);
  assert_int_equal(sluice_metadata_add_str(md, "x-grpc-y", "v"), 0);
  assert_int_equal(sluice_metadata_add_str(md, "a.b_c-0", "v"), 0);

  /* Non-printable values for ASCII keys. */
  assert_int_equal(sluice_metadata_add_str(md, "k", "tab\there"),
                   SLUICE_ERR_BAD_METADATA);
  assert_int_equal(sluice_metadata_add_str(md, "k", "nl\n"),
                   SLUICE_ERR_BAD_METADATA);
  assert_int_equal(sluice_metadata_add_str(md, "k", "\x7f"),
                   SLUICE_ERR_BAD_METADATA);
  assert_int_equal(sluice_metadata_add_str(md, "k", "caf\xc3\xa9"),
                   SLUICE_ERR_BAD_METADATA);
  assert_int_equal(sluice_metadata_add(md, "k", "a\0b", 3),
                   SLUICE_ERR_BAD_METADATA);
  assert_int_equal(sluice_metadata_add_str(md, "k", " ~ "), 0);

  /* The error names the rules, not a NULL. */
  assert_non_null(
      strstr(sluice_strerror(SLUICE_ERR_BAD_METADATA), "[0-9a-z_.-]"));
  assert_null(strstr(sluice_strerror(SLUICE_ERR_BAD_METADATA), "NULL"));

  /* NULL arguments. */
  assert_int_equal(sluice_metadata_add_str(NULL, "k", "v"),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice_metadata_add_str(md, NULL, "v"),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice_metadata_add_str(md, "k", NULL),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice_metadata_add(md, "k", NULL, 1),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice_metadata_count(md), 4);
}

static void bin_values_hold_any_bytes(void **state) {
  sluice_metadata *md = *state;
  static const uint8_t bytes[] = {0, 1, 0, 0xff, '\n', 0};
  assert_int_equal(sluice_metadata_add(md, "trace-bin", bytes, sizeof bytes),
                   0);
  check_entry(md, 0, "trace-bin", bytes, sizeof bytes);
  size_t n;
  const char *v = sluice_metadata_find(md, "trace-bin", &n);
  assert_non_null(v);
  assert_int_equal(n, sizeof bytes);
  assert_memory_equal(v, bytes, sizeof bytes);
}

static void rules(void **state) {
  (void)state;
  assert_true(sluice__md_key_valid("abc-0._", 7));
  assert_false(sluice__md_key_valid("", 0));
  assert_false(sluice__md_key_valid("aBc", 3));
  assert_false(sluice__md_key_valid("a\0b", 3));
  assert_true(sluice__md_key_valid("ab!", 2)); /* only len bytes count */

  assert_true(sluice__md_is_bin("x-bin", 5));
  assert_true(sluice__md_is_bin("-bin", 4));
  assert_false(sluice__md_is_bin("bin", 3));
  assert_false(sluice__md_is_bin("x-binary", 8));
  assert_false(sluice__md_is_bin("x-bin", 4));

  assert_true(sluice__md_ascii_value_valid("", 0));
  assert_true(sluice__md_ascii_value_valid(" ~", 2));
  assert_false(sluice__md_ascii_value_valid("\x1f", 1));
  assert_false(sluice__md_ascii_value_valid("\x80", 1));
}

static int reserved(const char *name) {
  return sluice__md_is_reserved(name, strlen(name));
}

static void reserved_headers(void **state) {
  (void)state;
  static const char *hidden[] = {
      ":path",
      ":authority",
      ":status",
      "content-type",
      "te",
      "grpc-timeout",
      "grpc-encoding",
      "grpc-accept-encoding",
      "grpc-status",
      "grpc-message",
      "grpc-message-type",
      "grpc-future-thing",
      "grpc-",
  };
  for (size_t i = 0; i < sizeof hidden / sizeof hidden[0]; i++)
    assert_true(reserved(hidden[i]));
  static const char *visible[] = {
      "user-agent",
      "grpc-previous-rpc-attempts",
      "grpc-retry-pushback-ms",
      "grpc-status-details-bin",
      "x-custom",
      "content-typex",
      "tea",
      "grpc",
      "x-grpc-status",
  };
  for (size_t i = 0; i < sizeof visible / sizeof visible[0]; i++)
    assert_false(reserved(visible[i]));
  /* Only len bytes count. */
  assert_true(sluice__md_is_reserved("tex", 2));
}

static int add_rx(sluice_metadata *md, const char *key, const char *value) {
  return sluice__metadata_add_received(md, key, strlen(key),
                                       (const uint8_t *)value, strlen(value));
}

static void received_ascii(void **state) {
  sluice_metadata *md = *state;
  assert_int_equal(add_rx(md, "x-a", "hello"), 0);
  assert_int_equal(add_rx(md, "grpc-retry-pushback-ms", "100"), 0);
  assert_int_equal(add_rx(md, ":authority", "localhost:50051"), 0);
  /* Dropped without error: bad values, bad keys. */
  assert_int_equal(add_rx(md, "x-b", "caf\xc3\xa9"), 0);
  assert_int_equal(add_rx(md, "x-c", "a\tb"), 0);
  assert_int_equal(add_rx(md, "X-Upper", "v"), 0);
  assert_int_equal(add_rx(md, "", "v"), 0);
  assert_int_equal(add_rx(md, ":", "v"), 0);
  assert_int_equal(
      sluice__metadata_add_received(md, "x\0y", 3, (const uint8_t *)"v", 1), 0);
  assert_int_equal(sluice_metadata_count(md), 3);
  check_entry(md, 0, "x-a", "hello", 5);
  check_entry(md, 1, "grpc-retry-pushback-ms", "100", 3);
  check_entry(md, 2, ":authority", "localhost:50051", 15);

  assert_int_equal(sluice__metadata_add_received(NULL, "k", 1, NULL, 0),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice__metadata_add_received(md, NULL, 1, NULL, 0),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice__metadata_add_received(md, "k", 1, NULL, 1),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice__metadata_add_received(md, "k", 1, NULL, 0), 0);
  check_entry(md, 3, "k", "", 0);
}

static void received_bin(void **state) {
  sluice_metadata *md = *state;
  static const uint8_t ab[] = {0xab, 0xab, 0xab};
  assert_int_equal(add_rx(md, "x-bin", "q6ur"), 0);
  check_entry(md, 0, "x-bin", ab, 3);
  /* Padded and unpadded; NUL bytes survive. */
  assert_int_equal(add_rx(md, "x-bin", "AAEA"), 0);
  check_entry(md, 1, "x-bin", "\0\1\0", 3);
  assert_int_equal(add_rx(md, "x-bin", "AA=="), 0);
  check_entry(md, 2, "x-bin", "\0", 1);
  assert_int_equal(add_rx(md, "x-bin", "AA"), 0);
  check_entry(md, 3, "x-bin", "\0", 1);
  assert_int_equal(add_rx(md, "x-bin", ""), 0);
  check_entry(md, 4, "x-bin", "", 0);
  assert_int_equal(sluice_metadata_count(md), 5);
}

static void received_bin_comma_joined(void **state) {
  sluice_metadata *md = *state;
  /* Duplicates joined by a proxy, padded and not, with optional spaces. */
  assert_int_equal(add_rx(md, "t-bin", "Zm9v,YmFy, Zg==,Zm8"), 0);
  assert_int_equal(sluice_metadata_count(md), 4);
  check_entry(md, 0, "t-bin", "foo", 3);
  check_entry(md, 1, "t-bin", "bar", 3);
  check_entry(md, 2, "t-bin", "f", 1);
  check_entry(md, 3, "t-bin", "fo", 2);
  /* A bad part drops the whole header: nothing half-added. */
  assert_int_equal(add_rx(md, "u-bin", "Zm9v,!!!!,YmFy"), 0);
  assert_int_equal(add_rx(md, "u-bin", "Zm9v,Z"), 0);
  assert_int_equal(add_rx(md, "u-bin", "Zg=,Zm9v"), 0);
  assert_int_equal(sluice_metadata_count(md), 4);
  assert_null(sluice_metadata_find(md, "u-bin", NULL));
}

static void received_bin_large(void **state) {
  sluice_metadata *md = *state;
  /* Larger than the on-stack scratch buffer. */
  char enc[2001];
  for (size_t i = 0; i < 2000; i++)
    enc[i] = "ABCD"[i % 4];
  enc[2000] = '\0';
  assert_int_equal(add_rx(md, "big-bin", enc), 0);
  size_t n;
  assert_non_null(sluice_metadata_find(md, "big-bin", &n));
  assert_int_equal(n, 1500);
}

static void internal_append(void **state) {
  sluice_metadata *md = *state;
  assert_int_equal(
      sluice__metadata_append(md, "grpc-retry-pushback-msXX", 22, "10", 2), 0);
  check_entry(md, 0, "grpc-retry-pushback-ms", "10", 2);
}

#define MD_TEST(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(new_and_del),
      MD_TEST(add_get_find),
      MD_TEST(many_entries),
      MD_TEST(arena_and_heap_mix),
      MD_TEST(add_rejects),
      MD_TEST(bin_values_hold_any_bytes),
      cmocka_unit_test(rules),
      cmocka_unit_test(reserved_headers),
      MD_TEST(received_ascii),
      MD_TEST(received_bin),
      MD_TEST(received_bin_comma_joined),
      MD_TEST(received_bin_large),
      MD_TEST(internal_append),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
