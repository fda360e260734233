/* transport/message.c: one protobuf message <-> one length-prefixed gRPC
 * message: the prefix, gzip, the send limit (checked before compression),
 * the receive limit on decompression, and every failure's exact text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "transport/message.h"
#include "unit.pb-c.h"
#include "wire/compress.h"
#include "wire/framing.h"

static Unit__Blob blob(const char *name, uint32_t n, const void *data,
                       size_t len) {
  Unit__Blob b = UNIT__BLOB__INIT;
  b.name = (char *)name;
  b.n = n;
  b.data.data = (uint8_t *)data;
  b.data.len = len;
  return b;
}

static uint32_t prefix_len(const uint8_t *p) {
  return (uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 8 |
         p[4];
}

static Unit__Blob *unpack_ok(const uint8_t *body, size_t len, int compressed,
                             uint32_t max) {
  ProtobufCMessage *m = (ProtobufCMessage *)0x1;
  char err[160] = "";
  sluice_status_code code = sluice__msg_unpack(
      &unit__blob__descriptor, compressed, 1, SLUICE_COMPRESS_GZIP, body, len,
      max, &m, err, sizeof err);
  if (code != SLUICE_STATUS_OK)
    fail_msg("unpack: %d %s", code, err);
  assert_non_null(m);
  return (Unit__Blob *)m;
}

static void pack_plain(void **state) {
  (void)state;
  Unit__Blob b = blob("greeting", 7, "hello", 5);
  size_t packed = protobuf_c_message_get_packed_size(&b.base);
  uint8_t *out = NULL;
  size_t out_len = 0, size = 0;
  assert_int_equal(
      sluice__msg_pack(&b.base, SLUICE_COMPRESS_NONE, 0, &out, &out_len, &size),
      0);
  assert_int_equal(size, packed);
  assert_int_equal(out_len, SLUICE__FRAME_HEADER_LEN + packed);
  assert_int_equal(out[0], 0); /* not compressed */
  assert_int_equal(prefix_len(out), packed);
  /* The body is the plain serialization. */
  uint8_t plain[64];
  assert_int_equal(protobuf_c_message_pack(&b.base, plain), packed);
  assert_memory_equal(out + SLUICE__FRAME_HEADER_LEN, plain, packed);

  Unit__Blob *back = unpack_ok(out + 5, out_len - 5, 0, 0);
  assert_string_equal(back->name, "greeting");
  assert_int_equal(back->n, 7);
  assert_int_equal(back->data.len, 5);
  assert_memory_equal(back->data.data, "hello", 5);
  protobuf_c_message_free_unpacked(&back->base, NULL);
  free(out);

  /* size_out may be NULL. */
  assert_int_equal(
      sluice__msg_pack(&b.base, SLUICE_COMPRESS_NONE, 0, &out, &out_len, NULL),
      0);
  free(out);
}

static void pack_empty(void **state) {
  (void)state;
  Unit__Blob b = UNIT__BLOB__INIT; /* every field default: 0 bytes */
  uint8_t *out = NULL;
  size_t out_len = 0, size = 99;
  assert_int_equal(
      sluice__msg_pack(&b.base, SLUICE_COMPRESS_NONE, 1, &out, &out_len, &size),
      0);
  assert_int_equal(size, 0);
  assert_int_equal(out_len, 5);
  static const uint8_t zero[5] = {0, 0, 0, 0, 0};
  assert_memory_equal(out, zero, 5);
  Unit__Blob *back = unpack_ok(out + 5, 0, 0, 0);
  assert_int_equal(back->n, 0);
  assert_int_equal(back->data.len, 0);
  protobuf_c_message_free_unpacked(&back->base, NULL);
  free(out);

  /* Compressed, an empty message is still a gzip member, flagged. */
  assert_int_equal(
      sluice__msg_pack(&b.base, SLUICE_COMPRESS_GZIP, 0, &out, &out_len, &size),
      0);
  assert_int_equal(out[0], 1);
  assert_int_equal(prefix_len(out), out_len - 5);
  assert_true(out_len > 5 + 10); /* gzip header and trailer */
  back = unpack_ok(out + 5, out_len - 5, 1, 100);
  assert_int_equal(back->data.len, 0);
  protobuf_c_message_free_unpacked(&back->base, NULL);
  free(out);
}

static void pack_gzip(void **state) {
  (void)state;
  static uint8_t data[20000];
  memset(data, 'a', sizeof data);
  Unit__Blob b = blob("z", 1, data, sizeof data);
  size_t packed = protobuf_c_message_get_packed_size(&b.base);
  uint8_t *out = NULL;
  size_t out_len = 0, size = 0;
  assert_int_equal(
      sluice__msg_pack(&b.base, SLUICE_COMPRESS_GZIP, 0, &out, &out_len, &size),
      0);
  assert_int_equal(size, packed); /* the uncompressed size */
  assert_int_equal(out[0], 1);
  assert_int_equal(prefix_len(out), out_len - 5);
  assert_true(out_len < packed / 10); /* it did compress */

  /* The body is one gzip member of the plain serialization. */
  uint8_t *plain = NULL;
  size_t plen = 0;
  assert_int_equal(sluice__decompress(SLUICE_COMPRESS_GZIP, out + 5,
                                      out_len - 5, (uint32_t)packed, &plain,
                                      &plen, NULL),
                   SLUICE_STATUS_OK);
  assert_int_equal(plen, packed);
  free(plain);

  Unit__Blob *back = unpack_ok(out + 5, out_len - 5, 1, (uint32_t)packed);
  assert_int_equal(back->data.len, sizeof data);
  assert_memory_equal(back->data.data, data, sizeof data);
  protobuf_c_message_free_unpacked(&back->base, NULL);
  free(out);
}

static void pack_limit(void **state) {
  (void)state;
  static uint8_t data[10000];
  memset(data, 'b', sizeof data);
  Unit__Blob b = blob(NULL, 0, data, sizeof data);
  size_t packed = protobuf_c_message_get_packed_size(&b.base);
  assert_true(packed > sizeof data);
  uint8_t *out = (uint8_t *)"untouched";
  size_t out_len = 12345, size = 0;
  /* At the limit: fine. */
  assert_int_equal(sluice__msg_pack(&b.base, SLUICE_COMPRESS_NONE,
                                    (uint32_t)packed, &out, &out_len, &size),
                   0);
  free(out);
  /* One byte over: refused, the size reported, outputs untouched. */
  out = (uint8_t *)"untouched";
  out_len = 12345;
  size = 0;
  assert_int_equal(sluice__msg_pack(&b.base, SLUICE_COMPRESS_NONE,
                                    (uint32_t)packed - 1, &out, &out_len,
                                    &size),
                   SLUICE_ERR_TOO_LARGE);
  assert_int_equal(size, packed);
  assert_string_equal((const char *)out, "untouched");
  assert_int_equal(out_len, 12345);
  /* Checked before compression, as gRPC does: the compressed form would
   * fit, the message does not. */
  size = 0;
  assert_int_equal(sluice__msg_pack(&b.base, SLUICE_COMPRESS_GZIP, 1000, &out,
                                    &out_len, &size),
                   SLUICE_ERR_TOO_LARGE);
  assert_int_equal(size, packed);
  assert_string_equal((const char *)out, "untouched");
}

static void expect_unpack_error(const uint8_t *body, size_t len, int compressed,
                                int enc_ok, sluice_compression enc,
                                uint32_t max, sluice_status_code want,
                                const char *want_text) {
  ProtobufCMessage *m = (ProtobufCMessage *)0x1;
  char err[160];
  memset(err, 'x', sizeof err);
  sluice_status_code code =
      sluice__msg_unpack(&unit__blob__descriptor, compressed, enc_ok, enc, body,
                         len, max, &m, err, sizeof err);
  assert_null(m);
  if (code != want || strcmp(err, want_text) != 0)
    fail_msg("got %d \"%s\", want %d \"%s\"", code, err, want, want_text);
}

static void unpack_errors(void **state) {
  (void)state;
  Unit__Blob b = blob("x", 3, "abc", 3);
  uint8_t *z = NULL;
  size_t zlen = 0;
  assert_int_equal(
      sluice__msg_pack(&b.base, SLUICE_COMPRESS_GZIP, 0, &z, &zlen, NULL), 0);
  const uint8_t *gz = z + 5;
  size_t gzlen = zlen - 5;

  /* A compressed message needs a usable grpc-encoding. */
  const char *no_enc = "compressed message without a usable grpc-encoding";
  expect_unpack_error(gz, gzlen, 1, 0, SLUICE_COMPRESS_GZIP, 100,
                      SLUICE_STATUS_INTERNAL, no_enc);
  expect_unpack_error(gz, gzlen, 1, 1, SLUICE_COMPRESS_NONE, 100,
                      SLUICE_STATUS_INTERNAL, no_enc);

  /* Damaged gzip. */
  uint8_t bad[64];
  memcpy(bad, gz, gzlen);
  bad[0] ^= 0xff; /* the magic */
  expect_unpack_error(bad, gzlen, 1, 1, SLUICE_COMPRESS_GZIP, 100,
                      SLUICE_STATUS_INTERNAL,
                      "cannot decompress message: corrupt gzip data");
  expect_unpack_error(gz, gzlen - 4, 1, 1, SLUICE_COMPRESS_GZIP, 100,
                      SLUICE_STATUS_INTERNAL,
                      "cannot decompress message: truncated gzip data");
  memcpy(bad, gz, gzlen);
  bad[gzlen] = 0;
  expect_unpack_error(bad, gzlen + 1, 1, 1, SLUICE_COMPRESS_GZIP, 100,
                      SLUICE_STATUS_INTERNAL,
                      "cannot decompress message: trailing data after gzip "
                      "stream");

  /* Over the receive limit once decompressed. */
  size_t packed = protobuf_c_message_get_packed_size(&b.base);
  assert_int_equal(packed, 10); /* 2 + 3 data, 2 n, 2 + 1 name */
  expect_unpack_error(gz, gzlen, 1, 1, SLUICE_COMPRESS_GZIP,
                      (uint32_t)packed - 1, SLUICE_STATUS_RESOURCE_EXHAUSTED,
                      "decompressed message larger than max (over 9 bytes)");
  /* Exactly the limit is fine. */
  Unit__Blob *back = unpack_ok(gz, gzlen, 1, (uint32_t)packed);
  protobuf_c_message_free_unpacked(&back->base, NULL);
  free(z);

  /* Not a Blob: field 1 claims 5 bytes, 1 follows. */
  static const uint8_t junk[] = {0x0a, 0x05, 'a'};
  expect_unpack_error(junk, sizeof junk, 0, 1, SLUICE_COMPRESS_NONE, 0,
                      SLUICE_STATUS_INTERNAL,
                      "failed to parse message (3 bytes) as unit.Blob");
  /* After decompression, the decompressed size is reported. */
  uint8_t *zj = NULL;
  size_t zjlen = 0;
  assert_int_equal(
      sluice__compress(SLUICE_COMPRESS_GZIP, junk, sizeof junk, 0, &zj, &zjlen),
      0);
  expect_unpack_error(zj, zjlen, 1, 1, SLUICE_COMPRESS_GZIP, 100,
                      SLUICE_STATUS_INTERNAL,
                      "failed to parse message (3 bytes) as unit.Blob");
  free(zj);
}

static void unpack_limits_only_decompression(void **state) {
  (void)state;
  /* An uncompressed message is not measured here: the deframer refused
   * anything over the limit before it got this far. */
  static uint8_t data[1000];
  memset(data, 'c', sizeof data);
  Unit__Blob b = blob(NULL, 0, data, sizeof data);
  uint8_t *out = NULL;
  size_t out_len = 0;
  assert_int_equal(
      sluice__msg_pack(&b.base, SLUICE_COMPRESS_NONE, 0, &out, &out_len, NULL),
      0);
  Unit__Blob *back = unpack_ok(out + 5, out_len - 5, 0, 10);
  assert_int_equal(back->data.len, sizeof data);
  protobuf_c_message_free_unpacked(&back->base, NULL);
  free(out);
}

static void unpack_error_truncated(void **state) {
  (void)state;
  /* The text is cut to the caller's buffer, NUL-terminated. */
  static const uint8_t junk[] = {0x0a, 0x05, 'a'};
  ProtobufCMessage *m = NULL;
  char err[12];
  assert_int_equal(sluice__msg_unpack(&unit__blob__descriptor, 0, 1,
                                      SLUICE_COMPRESS_NONE, junk, sizeof junk,
                                      0, &m, err, sizeof err),
                   SLUICE_STATUS_INTERNAL);
  assert_string_equal(err, "failed to p");
  assert_null(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(pack_plain),
      cmocka_unit_test(pack_empty),
      cmocka_unit_test(pack_gzip),
      cmocka_unit_test(pack_limit),
      cmocka_unit_test(unpack_errors),
      cmocka_unit_test(unpack_limits_only_decompression),
      cmocka_unit_test(unpack_error_truncated),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
