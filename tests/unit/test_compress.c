/* gzip message compression: round trips, the reserved prefix, interop with
 * zlib and the gzip tool, the output limit against compression bombs, broken
 * input, and the grpc-encoding / grpc-accept-encoding values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "wire/compress.h"

#define MIB (1024u * 1024u)

/* Deterministic pseudo-random bytes (xorshift64). */
static void fill_random(uint8_t *p, size_t n, uint64_t seed) {
  uint64_t x = seed ? seed : 1;
  for (size_t i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    p[i] = (uint8_t)(x >> 24);
  }
}

/* Text-like bytes that compress well. */
static void fill_compressible(uint8_t *p, size_t n) {
  static const char words[] = "the quick brown fox jumps over the lazy dog ";
  for (size_t i = 0; i < n; i++)
    p[i] = (uint8_t)words[(i * 7 / 5 + i / 1000) % (sizeof words - 1)];
}

/* Compresses with no reserve; the caller frees. */
static uint8_t *gz(const uint8_t *in, size_t len, size_t *out_len) {
  uint8_t *out = NULL;
  assert_int_equal(
      sluice__compress(SLUICE_COMPRESS_GZIP, in, len, 0, &out, out_len), 0);
  assert_non_null(out);
  return out;
}

static sluice_status_code gunzip(const uint8_t *in, size_t len, uint32_t max,
                                 uint8_t **out, size_t *out_len,
                                 const char **reason) {
  *out = NULL;
  *out_len = 0;
  *reason = NULL;
  return sluice__decompress(SLUICE_COMPRESS_GZIP, in, len, max, out, out_len,
                            reason);
}

static void round_trip(const uint8_t *in, size_t len) {
  size_t clen;
  uint8_t *c = gz(in, len, &clen);
  assert_true(clen >= 18); /* gzip header + trailer */
  assert_int_equal(c[0], 0x1f);
  assert_int_equal(c[1], 0x8b);
  uint8_t *d;
  size_t dlen;
  const char *why;
  assert_int_equal(gunzip(c, clen, (uint32_t)len, &d, &dlen, &why),
                   SLUICE_STATUS_OK);
  assert_non_null(d);
  assert_int_equal(dlen, len);
  if (len > 0)
    assert_memory_equal(d, in, len);
  free(d);
  free(c);
}

static void round_trip_empty(void **state) {
  (void)state;
  round_trip(NULL, 0);
  uint8_t none[1];
  round_trip(none, 0);
}

static void round_trip_one_byte(void **state) {
  (void)state;
  uint8_t b[1] = {0x42};
  round_trip(b, 1);
  b[0] = 0;
  round_trip(b, 1);
}

static void round_trip_random_mib(void **state) {
  (void)state;
  uint8_t *in = malloc(MIB);
  assert_non_null(in);
  fill_random(in, MIB, 12345);
  round_trip(in, MIB);
  free(in);
}

static void round_trip_compressible_mib(void **state) {
  (void)state;
  uint8_t *in = malloc(MIB);
  assert_non_null(in);
  fill_compressible(in, MIB);
  size_t clen;
  uint8_t *c = gz(in, MIB, &clen);
  assert_true(clen < MIB / 10);
  free(c);
  round_trip(in, MIB);
  free(in);
}

/* The reserved front is the caller's: writing a message prefix there leaves
 * the compressed bytes intact (ASan checks the bounds). */
static void reserve_honoured(void **state) {
  (void)state;
  uint8_t in[1000];
  fill_compressible(in, sizeof in);
  size_t plain_len;
  uint8_t *plain = gz(in, sizeof in, &plain_len);

  for (size_t reserve = 0; reserve <= 9; reserve += 3) {
    uint8_t *out = NULL;
    size_t out_len = 0;
    assert_int_equal(sluice__compress(SLUICE_COMPRESS_GZIP, in, sizeof in,
                                      reserve, &out, &out_len),
                     0);
    assert_int_equal(out_len, plain_len);
    memset(out, 0xAA, reserve);
    assert_memory_equal(out + reserve, plain, plain_len);
    uint8_t *d;
    size_t dlen;
    const char *why;
    assert_int_equal(gunzip(out + reserve, out_len, sizeof in, &d, &dlen, &why),
                     SLUICE_STATUS_OK);
    assert_int_equal(dlen, sizeof in);
    assert_memory_equal(d, in, sizeof in);
    free(d);
    free(out);
  }
  free(plain);
}

/* What we send is plain gzip: zlib's own inflate (gzip-only mode) reads it. */
static void output_readable_by_zlib(void **state) {
  (void)state;
  uint8_t in[5000];
  fill_compressible(in, sizeof in);
  size_t clen;
  uint8_t *c = gz(in, sizeof in, &clen);
  assert_int_equal(c[0], 0x1f);
  assert_int_equal(c[1], 0x8b);
  assert_int_equal(c[2], 8); /* deflate */

  uint8_t back[sizeof in + 1];
  z_stream zs;
  memset(&zs, 0, sizeof zs);
  assert_int_equal(inflateInit2(&zs, 15 + 16), Z_OK);
  zs.next_in = c;
  zs.avail_in = (uInt)clen;
  zs.next_out = back;
  zs.avail_out = sizeof back;
  assert_int_equal(inflate(&zs, Z_FINISH), Z_STREAM_END);
  assert_int_equal(zs.total_out, sizeof in);
  assert_int_equal(zs.avail_in, 0);
  assert_memory_equal(back, in, sizeof in);
  inflateEnd(&zs);
  free(c);
}

/* `gzip -9 hi.txt` with a name and a modification time in the header. */
static void reads_gzip_tool_output(void **state) {
  (void)state;
  static const uint8_t file[] = {0x1f, 0x8b, 0x08, 0x08, 0x00, 0xf1, 0x53, 0x65,
                                 0x02, 0x03, 0x68, 0x69, 0x2e, 0x74, 0x78, 0x74,
                                 0x00, 0xcb, 0x48, 0xcd, 0xc9, 0xc9, 0xd7, 0x51,
                                 0x48, 0xaf, 0xca, 0x2c, 0xe0, 0x02, 0x00, 0x86,
                                 0x1f, 0x82, 0xa4, 0x0c, 0x00, 0x00, 0x00};
  uint8_t *d;
  size_t dlen;
  const char *why;
  assert_int_equal(gunzip(file, sizeof file, 100, &d, &dlen, &why),
                   SLUICE_STATUS_OK);
  assert_int_equal(dlen, 12);
  assert_memory_equal(d, "hello, gzip\n", 12);
  free(d);
}

/* 64 MiB of zeros squeeze into a few tens of KB; the limit stops them. */
static void bomb_limited(void **state) {
  (void)state;
  size_t n = 64 * (size_t)MIB;
  uint8_t *zeros = calloc(n, 1);
  assert_non_null(zeros);
  size_t clen;
  uint8_t *c = gz(zeros, n, &clen);
  free(zeros);
  assert_true(clen < 128 * 1024);

  uint8_t *d = NULL;
  size_t dlen = 0;
  const char *why = NULL;
  assert_int_equal(gunzip(c, clen, 4 * MIB, &d, &dlen, &why),
                   SLUICE_STATUS_RESOURCE_EXHAUSTED);
  assert_null(d);
  assert_string_equal(why, "decompressed message larger than max");

  assert_int_equal(gunzip(c, clen, (uint32_t)n - 1, &d, &dlen, &why),
                   SLUICE_STATUS_RESOURCE_EXHAUSTED);
  assert_null(d);

  assert_int_equal(gunzip(c, clen, (uint32_t)n, &d, &dlen, &why),
                   SLUICE_STATUS_OK);
  assert_int_equal(dlen, n);
  assert_int_equal(d[0], 0);
  assert_int_equal(d[n - 1], 0);
  free(d);
  free(c);
}

/* The limit at the edges for a small message, and max 0. */
static void limit_edges(void **state) {
  (void)state;
  uint8_t in[100];
  fill_random(in, sizeof in, 7);
  size_t clen;
  uint8_t *c = gz(in, sizeof in, &clen);
  uint8_t *d;
  size_t dlen;
  const char *why;
  assert_int_equal(gunzip(c, clen, 99, &d, &dlen, &why),
                   SLUICE_STATUS_RESOURCE_EXHAUSTED);
  assert_int_equal(gunzip(c, clen, 0, &d, &dlen, &why),
                   SLUICE_STATUS_RESOURCE_EXHAUSTED);
  assert_int_equal(gunzip(c, clen, 100, &d, &dlen, &why), SLUICE_STATUS_OK);
  free(d);
  free(c);

  c = gz(NULL, 0, &clen);
  assert_int_equal(gunzip(c, clen, 0, &d, &dlen, &why), SLUICE_STATUS_OK);
  assert_non_null(d);
  assert_int_equal(dlen, 0);
  free(d);
  free(c);
}

static void expect_internal(const uint8_t *in, size_t len, const char *reason) {
  uint8_t *d = NULL;
  size_t dlen = 0;
  const char *why = NULL;
  assert_int_equal(gunzip(in, len, 16 * MIB, &d, &dlen, &why),
                   SLUICE_STATUS_INTERNAL);
  assert_null(d);
  assert_int_equal(dlen, 0);
  assert_non_null(why);
  if (reason != NULL)
    assert_string_equal(why, reason);
}

static void corrupt_middle(void **state) {
  (void)state;
  uint8_t *in = malloc(MIB);
  assert_non_null(in);
  fill_random(in, MIB, 99);
  size_t clen;
  uint8_t *c = gz(in, MIB, &clen);
  c[clen / 2] ^= 0x01; /* inside a stored block: caught by the CRC */
  expect_internal(c, clen, "corrupt gzip data");
  free(c);

  fill_compressible(in, MIB);
  c = gz(in, MIB, &clen);
  c[clen / 2] ^= 0xFF;
  expect_internal(c, clen, NULL);
  free(c);

  c = gz(in, 100, &clen);
  c[0] = 0x1e; /* bad magic */
  expect_internal(c, clen, "corrupt gzip data");
  free(c);
  free(in);
}

/* Every proper prefix of a message is truncated, the empty one too. */
static void truncated(void **state) {
  (void)state;
  uint8_t in[300];
  fill_compressible(in, sizeof in);
  size_t clen;
  uint8_t *c = gz(in, sizeof in, &clen);
  for (size_t cut = 0; cut < clen; cut++)
    expect_internal(c, cut, "truncated gzip data");
  free(c);
}

static void trailing_garbage(void **state) {
  (void)state;
  uint8_t in[300];
  fill_compressible(in, sizeof in);
  size_t clen;
  uint8_t *c = gz(in, sizeof in, &clen);
  uint8_t *buf = malloc(2 * clen);
  assert_non_null(buf);
  memcpy(buf, c, clen);
  buf[clen] = 0;
  expect_internal(buf, clen + 1, "trailing data after gzip stream");
  /* A second member is trailing data too: a message is one member. */
  memcpy(buf + clen, c, clen);
  expect_internal(buf, 2 * clen, "trailing data after gzip stream");
  free(buf);
  free(c);
}

/* A zlib (RFC 1950) stream is not gzip. */
static void zlib_stream_refused(void **state) {
  (void)state;
  uint8_t in[300];
  fill_compressible(in, sizeof in);
  uint8_t z[600];
  uLongf zlen = sizeof z;
  assert_int_equal(compress2(z, &zlen, in, sizeof in, 6), Z_OK);
  expect_internal(z, zlen, "corrupt gzip data");
}

static void identity_copies(void **state) {
  (void)state;
  const uint8_t in[] = "abc";
  uint8_t *d = NULL;
  size_t dlen = 0;
  const char *why = NULL;
  assert_int_equal(
      sluice__decompress(SLUICE_COMPRESS_NONE, in, 3, 3, &d, &dlen, &why),
      SLUICE_STATUS_OK);
  assert_int_equal(dlen, 3);
  assert_memory_equal(d, "abc", 3);
  free(d);
  assert_int_equal(
      sluice__decompress(SLUICE_COMPRESS_NONE, in, 3, 2, &d, &dlen, &why),
      SLUICE_STATUS_RESOURCE_EXHAUSTED);
  assert_int_equal(
      sluice__decompress(SLUICE_COMPRESS_NONE, NULL, 0, 0, &d, &dlen, &why),
      SLUICE_STATUS_OK);
  assert_non_null(d);
  assert_int_equal(dlen, 0);
  free(d);
}

static void compress_bad_args(void **state) {
  (void)state;
  uint8_t in[4] = {1, 2, 3, 4};
  uint8_t *out = (uint8_t *)in;
  size_t out_len = 77;
  assert_int_equal(
      sluice__compress(SLUICE_COMPRESS_NONE, in, 4, 0, &out, &out_len),
      SLUICE_ERR_INVALID_ARG);
  assert_int_equal(
      sluice__compress((sluice_compression)9, in, 4, 0, &out, &out_len),
      SLUICE_ERR_INVALID_ARG);
  assert_int_equal(
      sluice__compress(SLUICE_COMPRESS_GZIP, NULL, 4, 0, &out, &out_len),
      SLUICE_ERR_INVALID_ARG);
  assert_int_equal(
      sluice__compress(SLUICE_COMPRESS_GZIP, in, 4, 0, NULL, &out_len),
      SLUICE_ERR_INVALID_ARG);
  assert_ptr_equal(out, in); /* untouched on failure */
  assert_int_equal(out_len, 77);
}

static void encoding_parse(void **state) {
  (void)state;
  sluice_compression c = (sluice_compression)42;
  assert_int_equal(sluice__encoding_parse("identity", 8, &c), 0);
  assert_int_equal(c, SLUICE_COMPRESS_NONE);
  assert_int_equal(sluice__encoding_parse("gzip", 4, &c), 0);
  assert_int_equal(c, SLUICE_COMPRESS_GZIP);

  c = (sluice_compression)42;
  assert_int_equal(sluice__encoding_parse("deflate", 7, &c), -1);
  assert_int_equal(sluice__encoding_parse("snappy", 6, &c), -1);
  assert_int_equal(sluice__encoding_parse("", 0, &c), -1);
  assert_int_equal(sluice__encoding_parse("GZIP", 4, &c), -1);
  assert_int_equal(sluice__encoding_parse("gzip ", 5, &c), -1);
  assert_int_equal(sluice__encoding_parse("gzipx", 4, &c), 0); /* len rules */
  assert_int_equal(c, SLUICE_COMPRESS_GZIP);
  c = (sluice_compression)42;
  assert_int_equal(sluice__encoding_parse("gzi", 3, &c), -1);
  assert_int_equal(c, 42);

  assert_string_equal(sluice__encoding_name(SLUICE_COMPRESS_NONE), "identity");
  assert_string_equal(sluice__encoding_name(SLUICE_COMPRESS_GZIP), "gzip");
  assert_string_equal(SLUICE__ACCEPT_ENCODING, "identity,gzip");
}

static int has_gzip(const char *v) {
  return sluice__accept_encoding_has(v, strlen(v), SLUICE_COMPRESS_GZIP);
}

static void accept_encoding(void **state) {
  (void)state;
  assert_true(has_gzip("gzip"));
  assert_true(has_gzip("identity, gzip"));
  assert_true(has_gzip("identity,deflate,gzip"));
  assert_true(has_gzip("gzip,identity"));
  assert_true(has_gzip("  gzip  "));
  assert_true(has_gzip("identity ,\tgzip\t, deflate"));
  assert_true(has_gzip(SLUICE__ACCEPT_ENCODING));
  assert_true(has_gzip(",,gzip,"));

  assert_false(has_gzip(""));
  assert_false(has_gzip(" "));
  assert_false(has_gzip(","));
  assert_false(has_gzip("identity,deflate"));
  assert_false(has_gzip("gzip;q=1"));
  assert_false(has_gzip("GZIP"));
  assert_false(has_gzip("gzipx"));
  assert_false(has_gzip("xgzip"));
  assert_false(has_gzip("g zip"));
  assert_false(sluice__accept_encoding_has(NULL, 0, SLUICE_COMPRESS_GZIP));
  /* Only the given length counts. */
  assert_false(
      sluice__accept_encoding_has("identity,gzip", 9, SLUICE_COMPRESS_GZIP));

  /* identity needs no negotiation. */
  assert_true(sluice__accept_encoding_has("", 0, SLUICE_COMPRESS_NONE));
  assert_true(sluice__accept_encoding_has("gzip", 4, SLUICE_COMPRESS_NONE));
  assert_true(sluice__accept_encoding_has(NULL, 0, SLUICE_COMPRESS_NONE));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(round_trip_empty),
      cmocka_unit_test(round_trip_one_byte),
      cmocka_unit_test(round_trip_random_mib),
      cmocka_unit_test(round_trip_compressible_mib),
      cmocka_unit_test(reserve_honoured),
      cmocka_unit_test(output_readable_by_zlib),
      cmocka_unit_test(reads_gzip_tool_output),
      cmocka_unit_test(bomb_limited),
      cmocka_unit_test(limit_edges),
      cmocka_unit_test(corrupt_middle),
      cmocka_unit_test(truncated),
      cmocka_unit_test(trailing_garbage),
      cmocka_unit_test(zlib_stream_refused),
      cmocka_unit_test(identity_copies),
      cmocka_unit_test(compress_bad_args),
      cmocka_unit_test(encoding_parse),
      cmocka_unit_test(accept_encoding),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
