/* grpc-message percent-encoding: the interop special_status_message and
 * lenient decoding. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "wire/percent.h"

static const char special[] =
    "\t\ntest with whitespace\r\nand Unicode BMP \xE2\x98\xBA and non-BMP "
    "\xF0\x9F\x98\x88\t\n";
static const char special_encoded[] =
    "%09%0Atest with whitespace%0D%0Aand Unicode BMP %E2%98%BA and non-BMP "
    "%F0%9F%98%88%09%0A";

static void special_status_message(void **state) {
  (void)state;
  size_t n = strlen(special);
  char enc[3 * sizeof special];
  assert_true(sluice__percent_needs_encoding(special, n));
  size_t elen = sluice__percent_encode(special, n, enc);
  assert_int_equal(elen, strlen(special_encoded));
  assert_memory_equal(enc, special_encoded, elen);

  char dec[sizeof special_encoded];
  size_t dlen = sluice__percent_decode(enc, elen, dec);
  assert_int_equal(dlen, n);
  assert_memory_equal(dec, special, n);
}

static void plain_text_untouched(void **state) {
  (void)state;
  const char *s = "Hello, world! ~{}[]<>:;'\"";
  size_t n = strlen(s);
  char out[128];
  assert_false(sluice__percent_needs_encoding(s, n));
  assert_int_equal(sluice__percent_encode(s, n, out), n);
  assert_memory_equal(out, s, n);
  assert_true(sluice__percent_needs_encoding("100%", 4));
  assert_int_equal(sluice__percent_encode("100%", 4, out), 6);
  assert_memory_equal(out, "100%25", 6);
  assert_int_equal(sluice__percent_encode("\x7f", 1, out), 3);
  assert_memory_equal(out, "%7F", 3);
  assert_int_equal(sluice__percent_encode("\0", 1, out), 3);
  assert_memory_equal(out, "%00", 3);
}

static void check_decode(const char *in, const char *want, size_t want_len) {
  char out[64];
  size_t n = sluice__percent_decode(in, strlen(in), out);
  assert_int_equal(n, want_len);
  assert_memory_equal(out, want, n);
}

static void lenient_decode(void **state) {
  (void)state;
  check_decode("%", "%", 1);
  check_decode("%4", "%4", 2);
  check_decode("%zz", "%zz", 3);
  check_decode("a%4g%", "a%4g%", 5);
  check_decode("%e2%98%ba", "\xE2\x98\xBA", 3);
  check_decode("%20%3a", " :", 2); /* grpc-js escapes more than required */
  check_decode("%%41", "%A", 2);
  check_decode("%00", "\0", 1);
  check_decode("end%4", "end%4", 5);
}

static void decode_in_place(void **state) {
  (void)state;
  char buf[] = "a%20b%zz";
  size_t n = sluice__percent_decode(buf, strlen(buf), buf);
  assert_int_equal(n, 6);
  assert_memory_equal(buf, "a b%zz", 6);
}

static void all_bytes_round_trip(void **state) {
  (void)state;
  char in[256], enc[768], dec[768];
  for (int i = 0; i < 256; i++)
    in[i] = (char)i;
  size_t elen = sluice__percent_encode(in, sizeof in, enc);
  for (size_t i = 0; i < elen; i++)
    assert_true(enc[i] >= 0x20 && enc[i] <= 0x7E);
  assert_int_equal(sluice__percent_decode(enc, elen, dec), sizeof in);
  assert_memory_equal(dec, in, sizeof in);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(special_status_message),
      cmocka_unit_test(plain_text_untouched),
      cmocka_unit_test(lenient_decode),
      cmocka_unit_test(decode_in_place),
      cmocka_unit_test(all_bytes_round_trip),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
