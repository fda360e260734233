/* grpc.health.v1 messages as the client encodes and decodes them
 * (wire/health_msg.c): the request byte for byte (bytes as protoc's
 * python_out serializes HealthCheckRequest), responses with the status,
 * without it (proto3 default 0), with unknown fields of every wire type,
 * and malformed input refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "wire/health_msg.h"

static void check_request(const char *service, const uint8_t *want,
                          size_t want_len) {
  uint8_t *b = NULL;
  size_t len = 0;
  assert_int_equal(sluice__health_request(service, &b, &len), 0);
  assert_int_equal(len, 5 + want_len);
  assert_int_equal(b[0], 0); /* not compressed */
  size_t n = (size_t)b[1] << 24 | (size_t)b[2] << 16 | (size_t)b[3] << 8 | b[4];
  assert_int_equal(n, want_len);
  if (want_len)
    assert_memory_equal(b + 5, want, want_len);
  free(b);
}

static void test_request(void **state) {
  (void)state;
  check_request("", NULL, 0); /* proto3: the empty string is not sent */
  check_request(NULL, NULL, 0);
  static const uint8_t greeter[] = {0x0a, 0x12, 'h', 'e', 'l', 'l', 'o',
                                    'w',  'o',  'r', 'l', 'd', '.', 'G',
                                    'r',  'e',  'e', 't', 'e', 'r'};
  check_request("helloworld.Greeter", greeter, sizeof greeter);
  /* a 200-byte name: a two-byte length varint (0xc8 0x01) */
  char name[201];
  memset(name, 'x', 200);
  name[200] = 0;
  uint8_t *b = NULL;
  size_t len = 0;
  assert_int_equal(sluice__health_request(name, &b, &len), 0);
  assert_int_equal(len, 5 + 3 + 200);
  assert_int_equal(b[5], 0x0a);
  assert_int_equal(b[6], 0xc8);
  assert_int_equal(b[7], 0x01);
  free(b);
}

static void test_response(void **state) {
  (void)state;
  uint32_t st = 99;
  static const uint8_t serving[] = {0x08, 0x01};
  assert_int_equal(sluice__health_response(serving, sizeof serving, &st), 0);
  assert_int_equal(st, 1);
  static const uint8_t not_serving[] = {0x08, 0x02};
  assert_int_equal(
      sluice__health_response(not_serving, sizeof not_serving, &st), 0);
  assert_int_equal(st, 2);
  /* empty: status UNKNOWN (0) */
  st = 99;
  assert_int_equal(sluice__health_response(NULL, 0, &st), 0);
  assert_int_equal(st, 0);
  /* unknown fields of each wire type around the status (SERVICE_UNKNOWN) */
  static const uint8_t noisy[] = {
      0x10, 0x96, 0x01,                     /* 2: varint */
      0x19, 1,    2,    3,   4, 5, 6, 7, 8, /* 3: fixed64 */
      0x22, 0x02, 'h',  'i',                /* 4: bytes */
      0x2d, 1,    2,    3,   4,             /* 5: fixed32 */
      0x08, 0x03,                           /* 1: status */
  };
  assert_int_equal(sluice__health_response(noisy, sizeof noisy, &st), 0);
  assert_int_equal(st, 3);
}

static void test_malformed(void **state) {
  (void)state;
  uint32_t st = 7;
  static const uint8_t truncated_varint[] = {0x08, 0x81};
  static const uint8_t truncated_bytes[] = {0x22, 0x05, 'a'};
  static const uint8_t truncated_fixed[] = {0x19, 1, 2};
  static const uint8_t group[] = {0x0b}; /* wire type 3 */
  static const uint8_t field0[] = {0x00, 0x01};
  static const uint8_t long_varint[] = {0x08, 0xff, 0xff, 0xff, 0xff, 0xff,
                                        0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
  const struct {
    const uint8_t *p;
    size_t n;
  } bad[] = {{truncated_varint, sizeof truncated_varint},
             {truncated_bytes, sizeof truncated_bytes},
             {truncated_fixed, sizeof truncated_fixed},
             {group, sizeof group},
             {field0, sizeof field0},
             {long_varint, sizeof long_varint}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal(sluice__health_response(bad[i].p, bad[i].n, &st), -1);
    assert_int_equal(st, 7); /* untouched */
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_request),
      cmocka_unit_test(test_response),
      cmocka_unit_test(test_malformed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
