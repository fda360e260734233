/* ORCA load reports (wire/orca.h): the input is a received
 * endpoint-load-metrics-bin value; its first 56 bytes are also a report to
 * encode.
 * Invariants: decode(encode(decode(x))) == decode(x), bit for bit; every
 * decoded member is -1 (absent) or >= 0, never NaN; encode fits
 * SLUICE__ORCA_MAX, returns 0 when cap is too small and writes nothing
 * beyond cap; and a report built from raw doubles survives encode +
 * decode, its negative and NaN members read back as absent. */
#include "fuzz.h"

#include <math.h>

#include "wire/orca.h"

static const double *member(const sluice__orca *r, int i) {
  const double *m[] = {&r->cpu_utilization, &r->mem_utilization,
                       &r->rps_fractional,  &r->queue_ms,
                       &r->in_flight,       &r->application_utilization,
                       &r->downstream};
  return m[i];
}
#define N_MEMBERS 7

static void check_members(const sluice__orca *r) {
  for (int i = 0; i < N_MEMBERS; i++) {
    double d = *member(r, i);
    FUZZ_CHECK(!isnan(d) && (d == -1 || d >= 0));
  }
}

static void check_equal(const sluice__orca *a, const sluice__orca *b) {
  for (int i = 0; i < N_MEMBERS; i++)
    FUZZ_CHECK(memcmp(member(a, i), member(b, i), sizeof(double)) == 0);
}

/* encode then decode; returns the encoding's length. */
static size_t reencode(const sluice__orca *r, sluice__orca *back) {
  uint8_t buf[SLUICE__ORCA_MAX];
  size_t n = sluice__orca_encode(r, buf, sizeof buf);
  FUZZ_CHECK(n <= SLUICE__ORCA_MAX);
  uint8_t *exact = fuzz_dup(buf, n);
  FUZZ_CHECK(sluice__orca_decode(exact, n, back) == 0);
  /* One byte short must fail cleanly, touching nothing past cap. */
  if (n > 0) {
    uint8_t *small = fuzz_dup(NULL, n - 1);
    FUZZ_CHECK(sluice__orca_encode(r, small, n - 1) == 0);
    free(small);
  }
  free(exact);
  return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t *copy = fuzz_dup(data, size);
  sluice__orca r, again, third;
  if (sluice__orca_decode(copy, size, &r) == 0) {
    check_members(&r);
    reencode(&r, &again);
    check_equal(&r, &again);
    reencode(&again, &third);
    check_equal(&again, &third);
  }
  free(copy);

  sluice__orca raw;
  fuzz_in in = {data, size};
  for (int i = 0; i < N_MEMBERS; i++) {
    uint64_t u = fuzz_u64(&in);
    double d;
    memcpy(&d, &u, sizeof d);
    *(double *)member(&raw, i) = d;
  }
  reencode(&raw, &again);
  check_members(&again);
  for (int i = 0; i < N_MEMBERS; i++) {
    double d = *member(&raw, i);
    if (d >= 0)
      FUZZ_CHECK(memcmp(member(&again, i), &d, sizeof d) == 0);
    else
      FUZZ_CHECK(*member(&again, i) == -1);
  }
  return 0;
}
