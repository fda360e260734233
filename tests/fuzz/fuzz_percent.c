/* grpc-message percent-encoding: the input is both a message to encode and
 * a received header value to decode.
 * Invariants: the encoding is printable ASCII without a bare '%', at most
 * 3n bytes, equal to the input exactly when needs_encoding says no, and
 * decodes back to the input; decoding writes at most n bytes, is the same
 * in place, and its result survives encode + decode. */
#include "fuzz.h"

#include "wire/percent.h"

static int hexdigit(unsigned char c) {
  return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *in = (const char *)data;
  char *enc = (char *)fuzz_dup(NULL, 3 * size);
  size_t en = sluice__percent_encode(in, size, enc);
  FUZZ_CHECK(en >= size && en <= 3 * size);
  for (size_t i = 0; i < en; i++) {
    unsigned char c = (unsigned char)enc[i];
    FUZZ_CHECK(c >= 0x20 && c <= 0x7E);
    if (c == '%') /* only as an escape, uppercase as the spec says */
      FUZZ_CHECK(i + 2 < en && hexdigit((unsigned char)enc[i + 1]) &&
                 hexdigit((unsigned char)enc[i + 2]));
  }
  int needs = sluice__percent_needs_encoding(in, size);
  FUZZ_CHECK(needs == !(en == size && memcmp(enc, in, size) == 0));

  char *dec = (char *)fuzz_dup(NULL, en);
  size_t dn = sluice__percent_decode(enc, en, dec);
  FUZZ_CHECK(dn == size && memcmp(dec, in, size) == 0);
  free(dec);
  free(enc);

  /* Lenient decoding of whatever arrived. */
  char *out = (char *)fuzz_dup(NULL, size);
  size_t on = sluice__percent_decode(in, size, out);
  FUZZ_CHECK(on <= size);
  char *inplace = (char *)fuzz_dup(data, size);
  size_t ipn = sluice__percent_decode(inplace, size, inplace);
  FUZZ_CHECK(ipn == on && memcmp(inplace, out, on) == 0);
  free(inplace);
  /* Nothing is dropped: every input byte is either copied or one of the
   * three of an escape. */
  size_t escapes = (size - on) / 2;
  FUZZ_CHECK((size - on) % 2 == 0 && escapes * 3 <= size);

  char *enc2 = (char *)fuzz_dup(NULL, 3 * on);
  size_t en2 = sluice__percent_encode(out, on, enc2);
  char *dec2 = (char *)fuzz_dup(NULL, en2);
  size_t dn2 = sluice__percent_decode(enc2, en2, dec2);
  FUZZ_CHECK(dn2 == on && memcmp(dec2, out, on) == 0);
  free(dec2);
  free(enc2);
  free(out);
  return 0;
}
