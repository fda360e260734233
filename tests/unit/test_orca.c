/* ORCA load reports (endpoint-load-metrics-bin): encoding checked byte for
 * byte, round trips, a report serialized by Python protobuf (with fields
 * and map keys sluice does not use), unknown fields of every wire type,
 * and malformed input refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "wire/orca.h"

/* A C double compare without -Wfloat-equal complaints: the values used here
 * are exact in binary. */
static void assert_double(double got, double want) {
  if (memcmp(&got, &want, sizeof got) != 0)
    fail_msg("got %.17g, want %.17g", got, want);
}

/* {cpu 0.5, rps_fractional 10, queue_ms 2.5, in_flight 1}, computed by hand
 * (and parsed back with Python protobuf when the test was written). */
static const uint8_t k_small[] = {
    /* 1: cpu_utilization, fixed64 0.5 */
    0x09, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xe0, 0x3f,
    /* 6: rps_fractional, fixed64 10.0 */
    0x31, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x24, 0x40,
    /* 8: named_metrics {1: "queue_ms", 2: 2.5} */
    0x42, 0x13, 0x0a, 0x08, 'q', 'u', 'e', 'u', 'e', '_', 'm', 's', 0x11, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x40,
    /* 8: named_metrics {1: "in_flight", 2: 1.0} */
    0x42, 0x14, 0x0a, 0x09, 'i', 'n', '_', 'f', 'l', 'i', 'g', 'h', 't', 0x11,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xf0, 0x3f};

/* Python protobuf 3.21 (SerializeToString(deterministic=True)) of an
 * OrcaLoadReport with cpu_utilization 0.75, mem_utilization 0.5, rps 99,
 * request_cost {"db": 7}, utilization {"gpu": 0.125}, rps_fractional
 * 1234.5, eps 3, named_metrics {"in_flight": 3, "other": 9, "queue_ms":
 * 12.5}, application_utilization 0.25. */
static const uint8_t k_python[] = {
    0x09, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xe8, 0x3f, 0x11, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0xe0, 0x3f, 0x18, 0x63, 0x22, 0x0d, 0x0a, 0x02,
    0x64, 0x62, 0x11, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x1c, 0x40, 0x2a,
    0x0e, 0x0a, 0x03, 0x67, 0x70, 0x75, 0x11, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0xc0, 0x3f, 0x31, 0x00, 0x00, 0x00, 0x00, 0x00, 0x4a, 0x93, 0x40,
    0x39, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x08, 0x40, 0x42, 0x14, 0x0a,
    0x09, 0x69, 0x6e, 0x5f, 0x66, 0x6c, 0x69, 0x67, 0x68, 0x74, 0x11, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x08, 0x40, 0x42, 0x10, 0x0a, 0x05, 0x6f,
    0x74, 0x68, 0x65, 0x72, 0x11, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x22,
    0x40, 0x42, 0x13, 0x0a, 0x08, 0x71, 0x75, 0x65, 0x75, 0x65, 0x5f, 0x6d,
    0x73, 0x11, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x29, 0x40, 0x49, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0xd0, 0x3f};

/* Python protobuf: rps 42 (the deprecated integer field only) and
 * named_metrics {"in_flight": 0} (a map entry keeps its zero value). */
static const uint8_t k_python_rps[] = {
    0x18, 0x2a, 0x42, 0x14, 0x0a, 0x09, 0x69, 0x6e, 0x5f, 0x66, 0x6c, 0x69,
    0x67, 0x68, 0x74, 0x11, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};

static void encode_by_hand(void **state) {
  (void)state;
  sluice__orca r = {0.5, -1, 10, 2.5, 1, -1, -1};
  uint8_t buf[SLUICE__ORCA_MAX];
  size_t n = sluice__orca_encode(&r, buf, sizeof buf);
  assert_int_equal(n, sizeof k_small);
  assert_memory_equal(buf, k_small, n);
  /* Too small a buffer: nothing written, 0 returned. */
  memset(buf, 0xee, sizeof buf);
  assert_int_equal(sluice__orca_encode(&r, buf, sizeof k_small - 1), 0);
  assert_int_equal(buf[0], 0xee);
}

static void encode_empty_and_full(void **state) {
  (void)state;
  sluice__orca r;
  sluice__orca_init(&r);
  uint8_t buf[SLUICE__ORCA_MAX];
  assert_int_equal(sluice__orca_encode(&r, buf, sizeof buf), 0);
  sluice__orca back;
  assert_int_equal(sluice__orca_decode(buf, 0, &back), 0);
  assert_double(back.cpu_utilization, -1);
  assert_double(back.in_flight, -1);
  /* Every member present fits SLUICE__ORCA_MAX. */
  sluice__orca full = {1e300, 1, 1e300, 1e300, 1e300, 1e300, 1e300};
  size_t n = sluice__orca_encode(&full, buf, sizeof buf);
  assert_true(n > 0 && n <= SLUICE__ORCA_MAX);
}

static void round_trip(void **state) {
  (void)state;
  const sluice__orca cases[] = {
      {0.5, -1, 10, 2.5, 1, -1, -1},
      {0, 0, 0, 0, 0, 0, -1}, /* zeros are encoded: present, unlike proto3 */
      {1.75, 0.125, 123456.25, 0.001, 1000, 0.875, -1},
      {-1, -1, -1, -1, 3, -1, -1},
      {0.25, -1, -1, -1, -1, 2.5, -1},
      {-1, -1, -1, -1, -1, 0.5, 0.75}, /* downstream back-pressure */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uint8_t buf[SLUICE__ORCA_MAX];
    size_t n = sluice__orca_encode(&cases[i], buf, sizeof buf);
    sluice__orca back;
    memset(&back, 0x55, sizeof back);
    assert_int_equal(sluice__orca_decode(buf, n, &back), 0);
    assert_double(back.cpu_utilization, cases[i].cpu_utilization);
    assert_double(back.mem_utilization, cases[i].mem_utilization);
    assert_double(back.rps_fractional, cases[i].rps_fractional);
    assert_double(back.queue_ms, cases[i].queue_ms);
    assert_double(back.in_flight, cases[i].in_flight);
    assert_double(back.downstream, cases[i].downstream);
    assert_double(back.application_utilization,
                  cases[i].application_utilization);
  }
}

/* application_utilization is field 9, fixed64: tag 0x49. */
static void application_utilization(void **state) {
  (void)state;
  sluice__orca r;
  sluice__orca_init(&r);
  r.application_utilization = 0.5;
  uint8_t buf[SLUICE__ORCA_MAX];
  size_t n = sluice__orca_encode(&r, buf, sizeof buf);
  const uint8_t want[] = {0x49, 0, 0, 0, 0, 0, 0, 0xe0, 0x3f};
  assert_int_equal(n, sizeof want);
  assert_memory_equal(buf, want, n);
  sluice__orca back;
  assert_int_equal(sluice__orca_decode(buf, n, &back), 0);
  assert_double(back.application_utilization, 0.5);
  assert_double(back.cpu_utilization, -1);
  /* Every member present still fits SLUICE__ORCA_MAX. */
  sluice__orca full = {1e300, 1, 1e300, 1e300, 1e300, 1e300, 1e300};
  n = sluice__orca_encode(&full, buf, sizeof buf);
  assert_true(n > 0 && n <= SLUICE__ORCA_MAX);
  assert_int_equal(sluice__orca_decode(buf, n, &back), 0);
  assert_double(back.application_utilization, 1e300);
  assert_double(back.downstream, 1e300);
}

static void decode_python(void **state) {
  (void)state;
  sluice__orca r;
  assert_int_equal(sluice__orca_decode(k_python, sizeof k_python, &r), 0);
  assert_double(r.cpu_utilization, 0.75);
  assert_double(r.mem_utilization, 0.5);
  assert_double(r.rps_fractional, 1234.5); /* rps_fractional beats rps */
  assert_double(r.queue_ms, 12.5);
  assert_double(r.in_flight, 3);

  assert_int_equal(sluice__orca_decode(k_python_rps, sizeof k_python_rps, &r),
                   0);
  assert_double(r.rps_fractional, 42); /* the deprecated integer field */
  assert_double(r.in_flight, 0);
  assert_double(r.cpu_utilization, -1);
  assert_double(r.queue_ms, -1);
}

static void unknown_fields_any_order(void **state) {
  (void)state;
  /* Unknown fields of every wire type, known ones out of order, a field
   * repeated (the last wins), an entry with its value before its key, an
   * entry without a value (0), an entry with an unknown field. */
  // clang-format off
  static const uint8_t in[] = {
      0x42, 0x10, 0x11, 0, 0, 0, 0, 0, 0, 0x14, 0x40, /* value 5 first */
      0x0a, 0x05, 'o', 't', 'h', 'e', 'r', /* key "other": ignored */
      0x78, 0x96, 0x01,                        /* 15: varint 150 */
      0x7d, 1, 2, 3, 4,                        /* 15: fixed32 */
      0x79, 1, 2, 3, 4, 5, 6, 7, 8,            /* 15: fixed64 */
      0x82, 0x01, 0x03, 'a', 'b', 'c',         /* 16: bytes */
      0x31, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f,      /* 6: rps 1 */
      0x09, 0, 0, 0, 0, 0, 0, 0xe0, 0x3f,      /* 1: cpu 0.5 */
      0x42, 0x0b, 0x0a, 0x09, 'i', 'n', '_', 'f', 'l', 'i', 'g', 'h',
      't', /* in_flight without a value */
      0x42, 0x15, 0x18, 0x07, /* 3: varint inside the entry */
      0x0a, 0x08, 'q', 'u', 'e', 'u', 'e', '_', 'm', 's', 0x11, 0, 0, 0, 0, 0,
      0, 0x20, 0x40,                      /* queue_ms 8 */
      0x09, 0, 0, 0, 0, 0, 0, 0xd0, 0x3f, /* 1: cpu 0.25: the last wins */
      0x08, 0x01,                         /* 1 as a varint: skipped */
  };
  // clang-format on
  sluice__orca r;
  assert_int_equal(sluice__orca_decode(in, sizeof in, &r), 0);
  assert_double(r.cpu_utilization, 0.25);
  assert_double(r.rps_fractional, 1);
  assert_double(r.in_flight, 0);
  assert_double(r.queue_ms, 8);
  assert_double(r.mem_utilization, -1);
}

/* Every prefix of in[0..len) is refused unless it ends at a field boundary
 * (then it is a valid, shorter report). */
static void check_prefixes(const uint8_t *in, size_t len,
                           const size_t *boundaries, size_t n_boundaries) {
  sluice__orca r;
  for (size_t cut = 0; cut <= len; cut++) {
    int at_boundary = 0;
    for (size_t i = 0; i < n_boundaries; i++)
      at_boundary |= boundaries[i] == cut;
    int rv = sluice__orca_decode(in, cut, &r);
    if (at_boundary && rv != 0)
      fail_msg("prefix of %zu bytes (a field boundary) refused", cut);
    if (!at_boundary && rv != -1)
      fail_msg("prefix of %zu bytes accepted", cut);
  }
}

static void truncated_refused(void **state) {
  (void)state;
  static const size_t small[] = {0, 9, 18, 39, sizeof k_small};
  check_prefixes(k_small, sizeof k_small, small, sizeof small / sizeof *small);
  static const size_t python[] = {0,  9,  18, 20,  35,  51,
                                  60, 69, 91, 109, 130, sizeof k_python};
  check_prefixes(k_python, sizeof k_python, python,
                 sizeof python / sizeof *python);
}

static void malformed_refused(void **state) {
  (void)state;
  sluice__orca r;
  static const uint8_t len_too_long[] = {0x42, 0x20, 0x0a, 0x01, 'x'};
  static const uint8_t entry_inner_truncated[] = {0x42, 0x03, 0x0a, 0x05, 'x'};
  static const uint8_t group[] = {0x0b, 0x0c};       /* start group 1 */
  static const uint8_t wire_type_6[] = {0x0e, 0x00}; /* reserved */
  static const uint8_t field_zero[] = {0x01, 0, 0, 0, 0, 0, 0, 0, 0};
  static const uint8_t varint_11_bytes[] = {0x18, 0xff, 0xff, 0xff, 0xff, 0xff,
                                            0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
  static const uint8_t tag_cut[] = {0xff};
  assert_int_equal(sluice__orca_decode(len_too_long, sizeof len_too_long, &r),
                   -1);
  assert_int_equal(sluice__orca_decode(entry_inner_truncated,
                                       sizeof entry_inner_truncated, &r),
                   -1);
  assert_int_equal(sluice__orca_decode(group, sizeof group, &r), -1);
  assert_int_equal(sluice__orca_decode(wire_type_6, sizeof wire_type_6, &r),
                   -1);
  assert_int_equal(sluice__orca_decode(field_zero, sizeof field_zero, &r), -1);
  assert_int_equal(
      sluice__orca_decode(varint_11_bytes, sizeof varint_11_bytes, &r), -1);
  assert_int_equal(sluice__orca_decode(tag_cut, sizeof tag_cut, &r), -1);
  assert_int_equal(sluice__orca_decode(NULL, 3, &r), -1);
}

static void negative_and_nan_absent(void **state) {
  (void)state;
  uint8_t buf[SLUICE__ORCA_MAX];
  double nan = NAN;
  uint64_t u;
  memcpy(&u, &nan, sizeof u);
  size_t n = 0;
  buf[n++] = 0x09; /* cpu: NaN */
  for (int i = 0; i < 8; i++)
    buf[n++] = (uint8_t)(u >> (8 * i));
  static const uint8_t neg[] = {0x31, 0, 0, 0, 0, 0, 0, 0xf0, 0xbf}; /* -1 */
  memcpy(buf + n, neg, sizeof neg);
  n += sizeof neg;
  sluice__orca r;
  assert_int_equal(sluice__orca_decode(buf, n, &r), 0);
  assert_double(r.cpu_utilization, -1);
  assert_double(r.rps_fractional, -1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(encode_by_hand),
      cmocka_unit_test(encode_empty_and_full),
      cmocka_unit_test(round_trip),
      cmocka_unit_test(application_utilization),
      cmocka_unit_test(decode_python),
      cmocka_unit_test(unknown_fields_any_order),
      cmocka_unit_test(truncated_refused),
      cmocka_unit_test(malformed_refused),
      cmocka_unit_test(negative_and_nan_absent),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
