/* The protobuf wire reader (runtime/wire/pb.c) shared by the ORCA, health
 * and reflection decoders. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "wire/pb.h"

/* The result of reading every field of in[0..n). */
static int read_all(const uint8_t *in, size_t n, unsigned *fields) {
  sluice__pb r = {in, in + n};
  uint32_t num;
  int wt, rv;
  const uint8_t *d;
  size_t len;
  uint64_t v;
  *fields = 0;
  while ((rv = sluice__pb_field(&r, &num, &wt, &d, &len, &v)) == 1)
    (*fields)++;
  return rv;
}

static void fields(void **state) {
  (void)state;
  /* 1: varint 150; 2: "hi"; 3: fixed64 1; 4: fixed32 2 */
  static const uint8_t in[] = {0x08, 0x96, 0x01, 0x12, 2, 'h', 'i',
                               0x19, 1,    0,    0,    0, 0,   0,
                               0,    0,    0x25, 2,    0, 0,   0};
  sluice__pb r = {in, in + sizeof in};
  uint32_t num;
  int wt;
  const uint8_t *d;
  size_t len;
  uint64_t v;
  assert_int_equal(sluice__pb_field(&r, &num, &wt, &d, &len, &v), 1);
  assert_true(num == 1 && wt == SLUICE__PB_VARINT && v == 150);
  assert_int_equal(sluice__pb_field(&r, &num, &wt, &d, &len, &v), 1);
  assert_true(num == 2 && wt == SLUICE__PB_LEN && len == 2 && d[0] == 'h');
  assert_int_equal(sluice__pb_field(&r, &num, &wt, &d, &len, &v), 1);
  assert_true(num == 3 && wt == SLUICE__PB_I64 && len == 8);
  assert_true(sluice__pb_fixed64(d) == 1);
  assert_int_equal(sluice__pb_field(&r, &num, &wt, &d, &len, &v), 1);
  assert_true(num == 4 && wt == SLUICE__PB_I32 && len == 4 && d[0] == 2);
  assert_int_equal(sluice__pb_field(&r, &num, &wt, &d, &len, &v), 0);
}

static void malformed(void **state) {
  (void)state;
  unsigned n;
  static const uint8_t field0[] = {0x00, 0x01};
  static const uint8_t group[] = {0x0b};    /* field 1, start group */
  static const uint8_t reserved[] = {0x0e}; /* wire type 6 */
  static const uint8_t trunc_varint[] = {0x08, 0x80};
  static const uint8_t long_varint[] = {0x08, 0x80, 0x80, 0x80, 0x80, 0x80,
                                        0x80, 0x80, 0x80, 0x80, 0x80, 0x01};
  static const uint8_t beyond[] = {0x12, 5, 'a'};
  static const uint8_t short_i64[] = {0x19, 1, 2, 3};
  static const uint8_t huge_field[] = {0xf8, 0xff, 0xff, 0xff, 0x1f, 0x00};
  assert_int_equal(read_all(field0, sizeof field0, &n), -1);
  assert_int_equal(read_all(group, sizeof group, &n), -1);
  assert_int_equal(read_all(reserved, sizeof reserved, &n), -1);
  assert_int_equal(read_all(trunc_varint, sizeof trunc_varint, &n), -1);
  assert_int_equal(read_all(long_varint, sizeof long_varint, &n), -1);
  assert_int_equal(read_all(beyond, sizeof beyond, &n), -1);
  assert_int_equal(read_all(short_i64, sizeof short_i64, &n), -1);
  assert_int_equal(read_all(huge_field, sizeof huge_field, &n), -1);
  assert_int_equal(read_all(NULL, 0, &n), 0);
  assert_int_equal(n, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(fields),
      cmocka_unit_test(malformed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
