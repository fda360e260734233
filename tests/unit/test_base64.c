/* Base64 for -bin metadata: RFC 4648 vectors, both paddings, bad input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "wire/base64.h"

static const struct {
  const char *plain;
  const char *unpadded;
  const char *padded;
} rfc4648[] = {
    {"", "", ""},
    {"f", "Zg", "Zg=="},
    {"fo", "Zm8", "Zm8="},
    {"foo", "Zm9v", "Zm9v"},
    {"foob", "Zm9vYg", "Zm9vYg=="},
    {"fooba", "Zm9vYmE", "Zm9vYmE="},
    {"foobar", "Zm9vYmFy", "Zm9vYmFy"},
};

#define N_VECTORS (sizeof rfc4648 / sizeof rfc4648[0])

static void encode_rfc4648_unpadded(void **state) {
  (void)state;
  for (size_t i = 0; i < N_VECTORS; i++) {
    char out[16];
    size_t n = strlen(rfc4648[i].plain);
    size_t len =
        sluice__base64_encode((const uint8_t *)rfc4648[i].plain, n, out);
    assert_int_equal(len, strlen(rfc4648[i].unpadded));
    assert_int_equal(len, sluice__base64_encoded_len(n));
    assert_memory_equal(out, rfc4648[i].unpadded, len);
  }
}

static void check_decode(const char *in, const char *want) {
  uint8_t out[32];
  size_t len = 12345;
  assert_int_equal(sluice__base64_decode(in, strlen(in), out, &len), 0);
  assert_int_equal(len, strlen(want));
  assert_memory_equal(out, want, len);
}

static void decode_rfc4648_both_forms(void **state) {
  (void)state;
  for (size_t i = 0; i < N_VECTORS; i++) {
    check_decode(rfc4648[i].padded, rfc4648[i].plain);
    check_decode(rfc4648[i].unpadded, rfc4648[i].plain);
  }
}

static void ababab(void **state) {
  (void)state;
  const uint8_t bytes[] = {0xab, 0xab, 0xab};
  char out[8];
  assert_int_equal(sluice__base64_encode(bytes, 3, out), 4);
  assert_memory_equal(out, "q6ur", 4);
  uint8_t back[8];
  size_t len;
  assert_int_equal(sluice__base64_decode("q6ur", 4, back, &len), 0);
  assert_int_equal(len, 3);
  assert_memory_equal(back, bytes, 3);
}

static void all_byte_values_round_trip(void **state) {
  (void)state;
  uint8_t in[256];
  for (int i = 0; i < 256; i++)
    in[i] = (uint8_t)i;
  for (size_t n = 0; n <= sizeof in; n++) {
    char enc[400];
    uint8_t dec[SLUICE__BASE64_DECODED_MAX(400)];
    size_t elen = sluice__base64_encode(in, n, enc);
    assert_int_equal(elen, sluice__base64_encoded_len(n));
    size_t dlen;
    assert_int_equal(sluice__base64_decode(enc, elen, dec, &dlen), 0);
    assert_int_equal(dlen, n);
    if (n > 0)
      assert_memory_equal(dec, in, n);
  }
}

static void invalid_input(void **state) {
  (void)state;
  static const char *bad[] = {
      "Zg=",      /* padding that does not complete a group */
      "Z",        /* one character cannot encode a byte */
      "Zm9vY",    /* likewise after a full group */
      "Zg===",    /* too much padding */
      "====",     /* padding only */
      "Z===",     /* three pad characters */
      "Zg==Zg==", /* padding in the middle */
      "Zm9v!",    /* outside the alphabet */
      "Zm 9v",    /* space */
      "Zm9v\n",   /* newline */
      "Zm-_",     /* URL-safe alphabet is not gRPC's */
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    uint8_t out[16];
    size_t len;
    assert_int_equal(sluice__base64_decode(bad[i], strlen(bad[i]), out, &len),
                     -1);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(encode_rfc4648_unpadded),
      cmocka_unit_test(decode_rfc4648_both_forms),
      cmocka_unit_test(ababab),
      cmocka_unit_test(all_byte_values_round_trip),
      cmocka_unit_test(invalid_input),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
