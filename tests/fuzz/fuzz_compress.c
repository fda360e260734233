/* gzip decompression with size limits (wire/compress.h), and the encoding
 * header values.
 *
 * Input: [mode] [2 bytes: max] [1 byte: where to corrupt] [bytes...]
 *   mode bits 0-1: what the bytes are: 0 a received gzip message as is,
 *   1 a message the harness compresses first (then bit 2: flips the byte
 *   at the corrupt offset, so the fuzzer reaches inflate's deep states
 *   without having to forge a CRC), 2 an identity message, 3 a
 *   grpc-encoding and a grpc-accept-encoding value.
 *   max is the limit, 0..65535 (bit 3 of mode: times 64, for larger
 *   messages).
 * Invariants: on OK the output is at most max bytes (never beyond, whatever
 * the trailer claims) and compresses and decompresses back to itself; on
 * an error *out and *out_len are untouched and a reason is given;
 * compress(x) decompresses to x under max >= |x| and is refused under
 * |x| - 1; the encoding values parse exactly as the spec's tokens. */
#include "fuzz.h"

#include "wire/compress.h"

static void roundtrip(const uint8_t *msg, size_t len) {
  uint8_t *z = NULL;
  size_t zlen = 0;
  size_t reserve = len % 8; /* the 5-byte prefix, and odd offsets */
  FUZZ_CHECK(sluice__compress(SLUICE_COMPRESS_GZIP, msg, len, reserve, &z,
                              &zlen) == 0);
  uint8_t *out = NULL;
  size_t olen = 0;
  const char *why = NULL;
  FUZZ_CHECK(sluice__decompress(SLUICE_COMPRESS_GZIP, z + reserve, zlen,
                                (uint32_t)len, &out, &olen,
                                &why) == SLUICE_STATUS_OK);
  FUZZ_CHECK(olen == len && (len == 0 || memcmp(out, msg, len) == 0));
  free(out);
  if (len > 0) {
    out = NULL;
    FUZZ_CHECK(sluice__decompress(SLUICE_COMPRESS_GZIP, z + reserve, zlen,
                                  (uint32_t)len - 1, &out, &olen,
                                  &why) == SLUICE_STATUS_RESOURCE_EXHAUSTED);
    FUZZ_CHECK(out == NULL && why != NULL);
  }
  free(z);
}

static void decompress(sluice_compression c, const uint8_t *in, size_t len,
                       uint32_t max) {
  uint8_t *copy = fuzz_dup(in, len);
  uint8_t sentinel = 0;
  uint8_t *out = &sentinel;
  size_t olen = 77;
  const char *why = NULL;
  sluice_status_code rc =
      sluice__decompress(c, copy, len, max, &out, &olen, &why);
  free(copy);
  if (rc == SLUICE_STATUS_OK) {
    FUZZ_CHECK(out != NULL && out != &sentinel);
    FUZZ_CHECK(olen <= max);
    if (c == SLUICE_COMPRESS_NONE)
      FUZZ_CHECK(olen == len && (len == 0 || memcmp(out, in, len) == 0));
    else
      roundtrip(out, olen);
    free(out);
  } else {
    FUZZ_CHECK(out == &sentinel && olen == 77);
    FUZZ_CHECK(why != NULL && why[0] != '\0');
    FUZZ_CHECK(rc == SLUICE_STATUS_INTERNAL ||
               rc == SLUICE_STATUS_RESOURCE_EXHAUSTED);
    if (c == SLUICE_COMPRESS_NONE)
      FUZZ_CHECK(len > max);
  }
}

static int same(const uint8_t *v, size_t n, const char *lit) {
  return strlen(lit) == n && memcmp(v, lit, n) == 0;
}

static void encodings(const uint8_t *v, size_t n) {
  /* grpc-encoding: the first line; grpc-accept-encoding: the rest. */
  const uint8_t *nl = memchr(v, '\n', n);
  size_t a = nl ? (size_t)(nl - v) : n;
  char *e = (char *)fuzz_dup(v, a);
  sluice_compression c = (sluice_compression)99;
  int rc = sluice__encoding_parse(e, a, &c);
  if (same(v, a, "identity"))
    FUZZ_CHECK(rc == 0 && c == SLUICE_COMPRESS_NONE);
  else if (same(v, a, "gzip"))
    FUZZ_CHECK(rc == 0 && c == SLUICE_COMPRESS_GZIP);
  else
    FUZZ_CHECK(rc == -1 && c == (sluice_compression)99);
  if (rc == 0) /* the name sent back is the one received */
    FUZZ_CHECK(same(v, a, sluice__encoding_name(c)));
  free(e);

  size_t rn = nl ? n - a - 1 : 0;
  char *list = (char *)fuzz_dup(nl ? nl + 1 : v, rn);
  int has = sluice__accept_encoding_has(list, rn, SLUICE_COMPRESS_GZIP);
  int want = 0;
  for (size_t i = 0; i <= rn && !want; i++) {
    size_t s = i;
    while (i < rn && list[i] != ',')
      i++;
    size_t t = i;
    while (s < t && (list[s] == ' ' || list[s] == '\t'))
      s++;
    while (t > s && (list[t - 1] == ' ' || list[t - 1] == '\t'))
      t--;
    want = same((const uint8_t *)list + s, t - s, "gzip");
  }
  FUZZ_CHECK(has == want);
  FUZZ_CHECK(sluice__accept_encoding_has(list, rn, SLUICE_COMPRESS_NONE) == 1);
  free(list);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_in in = {data, size};
  uint8_t mode = fuzz_u8(&in);
  uint32_t max = (uint32_t)fuzz_u8(&in) << 8;
  max |= fuzz_u8(&in);
  if (mode & 8)
    max *= 64;
  size_t corrupt = fuzz_u8(&in);
  switch (mode & 3) {
  case 0:
    decompress(SLUICE_COMPRESS_GZIP, in.p, in.n, max);
    break;
  case 1: {
    roundtrip(in.p, in.n);
    uint8_t *z;
    size_t zlen;
    FUZZ_CHECK(
        sluice__compress(SLUICE_COMPRESS_GZIP, in.p, in.n, 0, &z, &zlen) == 0);
    if (mode & 4)
      z[corrupt % zlen] ^= (uint8_t)(1u << (mode >> 5));
    decompress(SLUICE_COMPRESS_GZIP, z, zlen, max);
    free(z);
    break;
  }
  case 2:
    decompress(SLUICE_COMPRESS_NONE, in.p, in.n, max);
    break;
  case 3:
    encodings(in.p, in.n);
    break;
  }
  return 0;
}
