/* Base64 of -bin metadata: the input is both a received value to decode
 * and bytes to encode.
 * Invariants: decode writes at most SLUICE__BASE64_DECODED_MAX(n) bytes;
 * what it accepts is padded or unpadded standard base64 (checked against a
 * reference grammar), and re-encodes to the same characters up to the
 * padding and the unused low bits of the last one; encode gives exactly
 * encoded_len characters of the alphabet, never pads, and decodes back. */
#include "fuzz.h"

#include "wire/base64.h"

static int in_alphabet(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
         (c >= '0' && c <= '9') || c == '+' || c == '/';
}

/* RFC 4648 section 4, padding optional: the accepted length without the
 * padding, or -1. */
static long reference_len(const char *s, size_t n) {
  size_t body = n;
  if (n % 4 == 0 && n > 0 && s[n - 1] == '=') {
    body--;
    if (s[body - 1] == '=')
      body--;
  }
  if (body % 4 == 1)
    return -1;
  for (size_t i = 0; i < body; i++)
    if (!in_alphabet((unsigned char)s[i]))
      return -1;
  return (long)body;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *in = (const char *)data;
  size_t room = SLUICE__BASE64_DECODED_MAX(size);
  uint8_t *out = fuzz_dup(NULL, room);
  size_t on = (size_t)-1;
  int rc = sluice__base64_decode(in, size, out, &on);
  long body = reference_len(in, size);
  FUZZ_CHECK((rc == 0) == (body >= 0));
  if (rc == 0) {
    FUZZ_CHECK(on <= room);
    FUZZ_CHECK(on == (size_t)body / 4 * 3 +
                         ((size_t)body % 4 ? (size_t)body % 4 - 1 : 0));
    size_t el = sluice__base64_encoded_len(on);
    FUZZ_CHECK(el == (size_t)body);
    char *enc = (char *)fuzz_dup(NULL, el);
    FUZZ_CHECK(sluice__base64_encode(out, on, enc) == el);
    /* Same characters, but the last may differ in bits decode ignores. */
    FUZZ_CHECK(el == 0 || memcmp(enc, in, el - 1) == 0);
    free(enc);
  }
  free(out);

  size_t el = sluice__base64_encoded_len(size);
  char *enc = (char *)fuzz_dup(NULL, el);
  FUZZ_CHECK(sluice__base64_encode(data, size, enc) == el);
  for (size_t i = 0; i < el; i++)
    FUZZ_CHECK(in_alphabet((unsigned char)enc[i]));
  uint8_t *back = fuzz_dup(NULL, SLUICE__BASE64_DECODED_MAX(el));
  size_t bn = 0;
  FUZZ_CHECK(sluice__base64_decode(enc, el, back, &bn) == 0);
  FUZZ_CHECK(bn == size && memcmp(back, data, size) == 0);
  free(back);

  /* The padded form too (what many peers send). */
  size_t pl = (el + 3) / 4 * 4;
  char *padded = (char *)fuzz_dup(NULL, pl);
  memcpy(padded, enc, el);
  for (size_t i = el; i < pl; i++)
    padded[i] = '=';
  back = fuzz_dup(NULL, SLUICE__BASE64_DECODED_MAX(pl));
  FUZZ_CHECK(sluice__base64_decode(padded, pl, back, &bn) == 0);
  FUZZ_CHECK(bn == size && memcmp(back, data, size) == 0);
  free(back);
  free(padded);
  free(enc);
  return 0;
}
