/* Status names, API error strings, the status lifecycle and the maps from
 * HTTP status, HTTP/2 error codes and grpc-status text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sluice/metadata.h>
#include <sluice/status.h>

#include "wire/status_map.h"

static void names_of_all_codes(void **state) {
  (void)state;
  static const char *names[] = {
      "OK",
      "CANCELLED",
      "UNKNOWN",
      "INVALID_ARGUMENT",
      "DEADLINE_EXCEEDED",
      "NOT_FOUND",
      "ALREADY_EXISTS",
      "PERMISSION_DENIED",
      "RESOURCE_EXHAUSTED",
      "FAILED_PRECONDITION",
      "ABORTED",
      "OUT_OF_RANGE",
      "UNIMPLEMENTED",
      "INTERNAL",
      "UNAVAILABLE",
      "DATA_LOSS",
      "UNAUTHENTICATED",
  };
  assert_int_equal(sizeof names / sizeof names[0], 17);
  for (int i = 0; i < 17; i++)
    assert_string_equal(sluice_status_name((sluice_status_code)i), names[i]);
  assert_string_equal(sluice_status_name((sluice_status_code)17),
                      "UNKNOWN_CODE");
  assert_string_equal(sluice_status_name((sluice_status_code)-1),
                      "UNKNOWN_CODE");
}

static void strerror_strings(void **state) {
  (void)state;
  assert_string_equal(sluice_strerror(0), "success");
  assert_string_equal(sluice_strerror(SLUICE_ERR_NOMEM), "out of memory");
  assert_string_equal(sluice_strerror(SLUICE_ERR_DUPLICATE),
                      "already registered");
  for (int e = SLUICE_ERR_BAD_METADATA; e <= SLUICE_ERR_INVALID_ARG; e++) {
    assert_non_null(sluice_strerror(e));
    assert_string_not_equal(sluice_strerror(e), "unknown error");
  }
  assert_string_equal(sluice_strerror(-1000), "unknown error");
  assert_string_equal(sluice_strerror(5), "unknown error");
}

static void init_and_clear(void **state) {
  (void)state;
  sluice_status st;
  memset(&st, 0xff, sizeof st);
  sluice_status_init(&st);
  assert_int_equal(st.code, SLUICE_STATUS_OK);
  assert_null(st.message);
  assert_null(st.initial_md);
  assert_null(st.trailing_md);

  st.code = SLUICE_STATUS_INTERNAL;
  st.message = malloc(6);
  assert_non_null(st.message);
  memcpy(st.message, "oops!", 6);
  assert_int_equal(sluice_metadata_new(&st.initial_md), 0);
  assert_int_equal(sluice_metadata_new(&st.trailing_md), 0);
  assert_int_equal(sluice_metadata_add_str(st.trailing_md, "k", "v"), 0);
  sluice_status_clear(&st); /* ASan/LSan check that nothing leaks */
  assert_int_equal(st.code, SLUICE_STATUS_OK);
  assert_null(st.message);
  assert_null(st.initial_md);
  assert_null(st.trailing_md);

  sluice_status_init(NULL);
  sluice_status_clear(NULL);
}

static void http_map(void **state) {
  (void)state;
  assert_int_equal(sluice__status_from_http(400), SLUICE_STATUS_INTERNAL);
  assert_int_equal(sluice__status_from_http(401),
                   SLUICE_STATUS_UNAUTHENTICATED);
  assert_int_equal(sluice__status_from_http(403),
                   SLUICE_STATUS_PERMISSION_DENIED);
  assert_int_equal(sluice__status_from_http(404), SLUICE_STATUS_UNIMPLEMENTED);
  assert_int_equal(sluice__status_from_http(429), SLUICE_STATUS_UNAVAILABLE);
  assert_int_equal(sluice__status_from_http(502), SLUICE_STATUS_UNAVAILABLE);
  assert_int_equal(sluice__status_from_http(503), SLUICE_STATUS_UNAVAILABLE);
  assert_int_equal(sluice__status_from_http(504), SLUICE_STATUS_UNAVAILABLE);
  assert_int_equal(sluice__status_from_http(200), SLUICE_STATUS_UNKNOWN);
  assert_int_equal(sluice__status_from_http(415), SLUICE_STATUS_UNKNOWN);
  assert_int_equal(sluice__status_from_http(500), SLUICE_STATUS_UNKNOWN);
  assert_int_equal(sluice__status_from_http(0), SLUICE_STATUS_UNKNOWN);
}

static void h2_error_map(void **state) {
  (void)state;
  static const struct {
    uint32_t h2;
    sluice_status_code want;
  } map[] = {
      {0x0, SLUICE_STATUS_INTERNAL},           /* NO_ERROR */
      {0x1, SLUICE_STATUS_INTERNAL},           /* PROTOCOL_ERROR */
      {0x2, SLUICE_STATUS_INTERNAL},           /* INTERNAL_ERROR */
      {0x3, SLUICE_STATUS_INTERNAL},           /* FLOW_CONTROL_ERROR */
      {0x4, SLUICE_STATUS_INTERNAL},           /* SETTINGS_TIMEOUT */
      {0x5, SLUICE_STATUS_INTERNAL},           /* STREAM_CLOSED */
      {0x6, SLUICE_STATUS_INTERNAL},           /* FRAME_SIZE_ERROR */
      {0x7, SLUICE_STATUS_UNAVAILABLE},        /* REFUSED_STREAM */
      {0x8, SLUICE_STATUS_CANCELLED},          /* CANCEL */
      {0x9, SLUICE_STATUS_INTERNAL},           /* COMPRESSION_ERROR */
      {0xa, SLUICE_STATUS_INTERNAL},           /* CONNECT_ERROR */
      {0xb, SLUICE_STATUS_RESOURCE_EXHAUSTED}, /* ENHANCE_YOUR_CALM */
      {0xc, SLUICE_STATUS_PERMISSION_DENIED},  /* INADEQUATE_SECURITY */
      {0xd, SLUICE_STATUS_INTERNAL},           /* HTTP_1_1_REQUIRED */
      {0x1234, SLUICE_STATUS_INTERNAL},
      {UINT32_MAX, SLUICE_STATUS_INTERNAL},
  };
  for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
    assert_int_equal(sluice__status_from_h2_error(map[i].h2), map[i].want);
}

static void check_parse(const char *s, int want_rc, sluice_status_code want) {
  sluice_status_code out = (sluice_status_code)99; /* sentinel */
  assert_int_equal(sluice__status_parse(s, strlen(s), &out), want_rc);
  if (want_rc == 0)
    assert_int_equal(out, want);
  else
    assert_int_equal(out, 99);
}

static void parse(void **state) {
  (void)state;
  for (int i = 0; i <= 16; i++) {
    char buf[4];
    snprintf(buf, sizeof buf, "%d", i);
    check_parse(buf, 0, (sluice_status_code)i);
  }
  check_parse("17", 0, SLUICE_STATUS_UNKNOWN);
  check_parse("99", 0, SLUICE_STATUS_UNKNOWN);
  check_parse("07", 0, SLUICE_STATUS_PERMISSION_DENIED);
  check_parse("", -1, 0);
  check_parse("100", -1, 0);
  check_parse("-1", -1, 0);
  check_parse("+1", -1, 0);
  check_parse(" 1", -1, 0);
  check_parse("1 ", -1, 0);
  check_parse("x", -1, 0);
  check_parse("1a", -1, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(names_of_all_codes), cmocka_unit_test(strerror_strings),
      cmocka_unit_test(init_and_clear),     cmocka_unit_test(http_map),
      cmocka_unit_test(h2_error_map),       cmocka_unit_test(parse),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
