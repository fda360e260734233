/* grpc-timeout: every unit both ways, rounding, the 8-digit limit, garbage. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "wire/timeout.h"

#define US UINT64_C(1000)
#define MS UINT64_C(1000000)
#define SEC UINT64_C(1000000000)
#define MIN (60 * SEC)
#define HOUR (3600 * SEC)

static void check_encode(uint64_t ns, const char *want) {
  char out[SLUICE__TIMEOUT_MAX];
  memset(out, 'x', sizeof out);
  size_t n = sluice__timeout_encode(ns, out);
  assert_string_equal(out, want);
  assert_int_equal(n, strlen(want));
}

static void check_decode(const char *s, uint64_t want) {
  uint64_t ns = 0;
  assert_int_equal(sluice__timeout_decode(s, strlen(s), &ns), 0);
  assert_true(ns == want);
}

static void encode_units(void **state) {
  (void)state;
  check_encode(0, "0n");
  check_encode(1, "1n");
  check_encode(99999999, "99999999n");
  check_encode(100000000, "100000u");
  check_encode(100000001, "100001u"); /* rounded up */
  check_encode(99999999 * US, "99999999u");
  check_encode(99999999 * US + 1, "100000m");
  check_encode(100000 * SEC - MS, "99999999m");
  check_encode(100000 * SEC, "100000S");
  check_encode(99999999 * MS, "99999999m");
  check_encode(99999999 * MS + 1, "100000S");
  check_encode(99999999 * SEC, "99999999S");
  check_encode(99999999 * SEC + 1, "1666667M");
  check_encode(99999999 * MIN, "99999999M");
  check_encode(99999999 * MIN + 1, "1666667H");
  check_encode(UINT64_MAX, "5124096H");
}

static void decode_units(void **state) {
  (void)state;
  check_decode("0n", 0);
  check_decode("1n", 1);
  check_decode("7u", 7 * US);
  check_decode("250m", 250 * MS);
  check_decode("1S", SEC);
  check_decode("2M", 2 * MIN);
  check_decode("3H", 3 * HOUR);
  check_decode("99999999n", 99999999);
  check_decode("00000001S", SEC); /* leading zeros are still digits */
  check_decode("99999999M", 99999999 * MIN);
  check_decode("5124095H", 5124095 * HOUR);
  check_decode("5124096H", UINT64_MAX); /* saturates */
  check_decode("99999999H", UINT64_MAX);
}

static void round_trip_never_shortens(void **state) {
  (void)state;
  uint64_t x = 88172645463325252u;
  for (int i = 0; i < 10000; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    uint64_t ns = x >> (x % 64);
    char out[SLUICE__TIMEOUT_MAX];
    size_t n = sluice__timeout_encode(ns, out);
    uint64_t back;
    assert_int_equal(sluice__timeout_decode(out, n, &back), 0);
    assert_true(back >= ns);
    assert_true(n <= 9);
  }
}

static void decode_invalid(void **state) {
  (void)state;
  static const char *bad[] = {
      "",           /* empty */
      "S",          /* no digits */
      "1",          /* no unit */
      "100000000n", /* 9 digits */
      "10x",        /* unknown unit */
      "10s",        /* units are case sensitive */
      "-1S",        /* negative */
      "+1S",        /* sign */
      " 1S",        /* space */
      "1 S",        /* space */
      "1.5S",       /* fraction */
      "1SS",        /* two units */
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    uint64_t ns = 42;
    assert_int_equal(sluice__timeout_decode(bad[i], strlen(bad[i]), &ns), -1);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(encode_units),
      cmocka_unit_test(decode_units),
      cmocka_unit_test(round_trip_never_shortens),
      cmocka_unit_test(decode_invalid),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
