/* grpc-timeout: the input is a header value to decode; its first 8 bytes
 * are also a duration in ns to encode.
 * Invariants: decode accepts exactly 1..8 digits and one unit of "HMSmun";
 * what it accepts equals digits x unit, saturated at UINT64_MAX; encoding
 * gives at most 8 digits and a unit, never a shorter timeout than asked
 * and less than one unit more; and decode(encode(decode(s))) ==
 * decode(s) (each unit divides the next, so nothing is lost). */
#include "fuzz.h"

#include "wire/timeout.h"

static uint64_t unit_ns(char u) {
  switch (u) {
  case 'n':
    return 1;
  case 'u':
    return 1000;
  case 'm':
    return 1000000;
  case 'S':
    return UINT64_C(1000000000);
  case 'M':
    return UINT64_C(60000000000);
  case 'H':
    return UINT64_C(3600000000000);
  }
  return 0;
}

/* Checks an encoding and returns its unit's size. */
static uint64_t check_encoding(const char *s, size_t n) {
  FUZZ_CHECK(n >= 2 && n <= 9 && n < SLUICE__TIMEOUT_MAX);
  FUZZ_CHECK(s[n] == '\0');
  for (size_t i = 0; i + 1 < n; i++)
    FUZZ_CHECK(s[i] >= '0' && s[i] <= '9');
  /* No leading zeros: the shortest form, as peers write it. */
  FUZZ_CHECK(n == 2 || s[0] != '0');
  uint64_t u = unit_ns(s[n - 1]);
  FUZZ_CHECK(u != 0);
  return u;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *s = (char *)fuzz_dup(data, size);
  uint64_t ns = 12345;
  int rc = sluice__timeout_decode(s, size, &ns);

  /* The reference grammar. */
  int valid = size >= 2 && size <= 9 && unit_ns(s[size - 1]) != 0;
  uint64_t value = 0;
  for (size_t i = 0; valid && i + 1 < size; i++) {
    if (s[i] < '0' || s[i] > '9')
      valid = 0;
    else
      value = value * 10 + (uint64_t)(s[i] - '0');
  }
  FUZZ_CHECK((rc == 0) == valid);
  if (rc == 0) {
    uint64_t u = unit_ns(s[size - 1]);
    if (value > UINT64_MAX / u)
      FUZZ_CHECK(ns == UINT64_MAX);
    else
      FUZZ_CHECK(ns == value * u);

    char enc[SLUICE__TIMEOUT_MAX];
    size_t n = sluice__timeout_encode(ns, enc);
    check_encoding(enc, n);
    uint64_t back = 0;
    FUZZ_CHECK(sluice__timeout_decode(enc, n, &back) == 0);
    FUZZ_CHECK(back == ns);
  } else {
    FUZZ_CHECK(ns == 12345); /* untouched on failure */
  }
  free(s);

  /* Encoding any duration. */
  fuzz_in in = {data, size};
  uint64_t d = fuzz_u64(&in);
  char enc[SLUICE__TIMEOUT_MAX];
  size_t n = sluice__timeout_encode(d, enc);
  uint64_t u = check_encoding(enc, n);
  uint64_t back = 0;
  FUZZ_CHECK(sluice__timeout_decode(enc, n, &back) == 0);
  FUZZ_CHECK(back >= d);
  FUZZ_CHECK(back == UINT64_MAX || back - d < u);
  return 0;
}
