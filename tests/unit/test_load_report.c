/* The server's load report (runtime/server/load_report.c): the downstream
 * pressure its handlers' calls note (back-pressure through a chain,
 * docs/flow-control.md §11), as the report's named metric "downstream". */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cmocka.h>

#include "server/load_report.h"
#include "server/server_opts.h"
#include "wire/base64.h"
#include "wire/orca.h"

static void near(double got, double want) {
  assert_true(got >= want - 1e-9 && got <= want + 1e-9);
}

/* The report l would send now, decoded. */
static sluice__orca report(sluice__load *l) {
  char b64[SLUICE__LOAD_REPORT_B64];
  size_t n = sluice__load_report(l, 3, b64);
  assert_true(n > 0 && n < sizeof b64);
  uint8_t raw[SLUICE__BASE64_DECODED_MAX(SLUICE__LOAD_REPORT_B64)];
  size_t len = 0;
  assert_int_equal(sluice__base64_decode(b64, n, raw, &len), 0);
  sluice__orca r;
  assert_int_equal(sluice__orca_decode(raw, len, &r), 0);
  return r;
}

static void sleep_ms(unsigned ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0)
    ;
}

static void downstream_metric(void **state) {
  (void)state;
  sluice_server_opts *o = NULL;
  assert_int_equal(sluice_server_opts_new(&o), 0);
  sluice__load l;
  sluice__load_init(&l, o);
  sluice__load_start(&l);
  /* Nothing noted: not in the report. */
  near(report(&l).downstream, -1);
  near(report(&l).in_flight, 3);
  /* The largest figure of the last 100-200 ms: a server is as pressed as
   * its most pressed downstream service. */
  sluice__load_note_downstream(&l, 0.3);
  sluice__load_note_downstream(&l, 0.9);
  sluice__load_note_downstream(&l, 0.5);
  near(report(&l).downstream, 0.9);
  /* NaN is ignored, the rest clamped to 0..1. */
  sluice__load_note_downstream(&l, 0.0 / 0.0);
  sluice__load_note_downstream(&l, 7);
  near(report(&l).downstream, 1);
  /* Nothing noted for 250 ms (more than two buckets): gone. */
  sleep_ms(250);
  near(report(&l).downstream, -1);
  sluice__load_note_downstream(&l, -2);
  near(report(&l).downstream, 0);
  sluice__load_destroy(&l);
  sluice_server_opts_del(o);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(downstream_metric),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
