/* grpc-timeout encoding and decoding. */
#include "wire/timeout.h"

#define MAX_VALUE 99999999u /* 8 digits */

static const struct {
  char unit;
  uint64_t ns;
} units[] = {
    /* Finest first: the encoder takes the first that fits. */
    {'n', 1},
    {'u', 1000},
    {'m', 1000000},
    {'S', 1000000000},
    {'M', 60 * UINT64_C(1000000000)},
    {'H', 3600 * UINT64_C(1000000000)},
};

#define N_UNITS (sizeof units / sizeof units[0])

size_t sluice__timeout_encode(uint64_t ns, char out[SLUICE__TIMEOUT_MAX]) {
  uint64_t value = 0;
  char unit = 'H';
  for (size_t i = 0; i < N_UNITS; i++) {
    /* Round up so the peer never sees a shorter deadline than ours. */
    value = ns / units[i].ns + (ns % units[i].ns != 0);
    unit = units[i].unit;
    if (value <= MAX_VALUE)
      break;
  }
  /* UINT64_MAX ns is about 5.1 million hours, so the loop always ends with a
   * value of at most 8 digits. */
  char digits[20];
  size_t nd = 0;
  do {
    digits[nd++] = (char)('0' + value % 10);
    value /= 10;
  } while (value != 0);
  size_t len = 0;
  while (nd > 0)
    out[len++] = digits[--nd];
  out[len++] = unit;
  out[len] = '\0';
  return len;
}

int sluice__timeout_decode(const char *s, size_t n, uint64_t *ns) {
  if (n < 2 || n > 9)
    return -1;
  uint64_t value = 0;
  for (size_t i = 0; i + 1 < n; i++) {
    if (s[i] < '0' || s[i] > '9')
      return -1;
    value = value * 10 + (uint64_t)(s[i] - '0');
  }
  for (size_t i = 0; i < N_UNITS; i++) {
    if (units[i].unit != s[n - 1])
      continue;
    if (value > UINT64_MAX / units[i].ns)
      *ns = UINT64_MAX;
    else
      *ns = value * units[i].ns;
    return 0;
  }
  return -1;
}
