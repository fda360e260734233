/* core/histogram.c: percentiles against exact sorted samples (random and
 * skewed distributions), merge, empty, a single value, huge values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "core/histogram.h"

#define MAX_VALUE ((UINT64_C(1) << 40) - 1)

static uint64_t rng = 88172645463325252u;
static uint64_t next(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* The exact nearest-rank percentile of sorted v[0..n). */
static uint64_t exact(const uint64_t *v, size_t n, double p) {
  if (p <= 0)
    return v[0];
  double want = p / 100.0 * (double)n;
  size_t rank = (size_t)want;
  if ((double)rank < want)
    rank++;
  if (rank < 1)
    rank = 1;
  if (rank > n)
    rank = n;
  return v[rank - 1];
}

/* Every percentile within 1/32 relative error of the exact one, never
 * below it (a bucket reports its highest value). */
static void check_against_exact(uint64_t *v, size_t n) {
  sluice__histogram *h = malloc(sizeof *h);
  assert_non_null(h);
  sluice__histogram_init(h);
  for (size_t i = 0; i < n; i++)
    sluice__histogram_record(h, v[i]);
  qsort(v, n, sizeof *v, cmp_u64);
  static const double ps[] = {0,  0.1, 1,    10,   25,    50,     75, 90,
                              95, 99,  99.5, 99.9, 99.99, 99.999, 100};
  for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) {
    uint64_t want = exact(v, n, ps[i]);
    uint64_t got = sluice__histogram_percentile(h, ps[i]);
    assert_true(got >= want);
    assert_true((double)(got - want) <= (double)want / 32.0);
  }
  assert_int_equal(h->total, n);
  assert_int_equal(h->min, v[0]);
  assert_int_equal(h->max, v[n - 1]);
  free(h);
}

static void uniform_random(void **state) {
  (void)state;
  size_t n = 100000;
  uint64_t *v = malloc(n * sizeof *v);
  assert_non_null(v);
  for (size_t i = 0; i < n; i++)
    v[i] = next() % 10000000;
  check_against_exact(v, n);
  free(v);
}

/* Log-uniform over 1..2^40 (every bucket range) and a latency-like
 * distribution: most calls fast, a long tail of slow ones. */
static void skewed(void **state) {
  (void)state;
  size_t n = 100000;
  uint64_t *v = malloc(n * sizeof *v);
  assert_non_null(v);
  for (size_t i = 0; i < n; i++)
    v[i] = (next() >> 24) >> (next() % 40);
  check_against_exact(v, n);
  for (size_t i = 0; i < n; i++) {
    uint64_t r = next() % 1000;
    v[i] = r < 990 ? 200 + next() % 300 : 50000 + next() % 5000000;
  }
  check_against_exact(v, n);
  free(v);
}

static void small_values_exact(void **state) {
  (void)state;
  sluice__histogram h;
  sluice__histogram_init(&h);
  for (uint64_t i = 0; i < 64; i++)
    sluice__histogram_record(&h, i);
  /* Below 64 every value has its own bucket. */
  assert_int_equal(sluice__histogram_percentile(&h, 50), 31);
  assert_int_equal(sluice__histogram_percentile(&h, 100), 63);
  assert_int_equal(sluice__histogram_percentile(&h, 0), 0);
  assert_true(sluice__histogram_mean(&h) == 31.5);
}

static void empty(void **state) {
  (void)state;
  sluice__histogram h;
  sluice__histogram_init(&h);
  assert_int_equal(sluice__histogram_percentile(&h, 0), 0);
  assert_int_equal(sluice__histogram_percentile(&h, 50), 0);
  assert_int_equal(sluice__histogram_percentile(&h, 100), 0);
  assert_true(sluice__histogram_mean(&h) == 0);
  assert_int_equal(h.total, 0);
}

/* One value: every percentile is that value exactly (clamped to
 * [min, max], not the bucket's top). */
static void single_value(void **state) {
  (void)state;
  sluice__histogram h;
  sluice__histogram_init(&h);
  sluice__histogram_record(&h, 123457);
  assert_int_equal(sluice__histogram_percentile(&h, 0), 123457);
  assert_int_equal(sluice__histogram_percentile(&h, 50), 123457);
  assert_int_equal(sluice__histogram_percentile(&h, 99.9), 123457);
  assert_int_equal(sluice__histogram_percentile(&h, 100), 123457);
  assert_true(sluice__histogram_mean(&h) == 123457);
}

static void huge_values_clamped(void **state) {
  (void)state;
  sluice__histogram h;
  sluice__histogram_init(&h);
  sluice__histogram_record(&h, UINT64_MAX);
  sluice__histogram_record(&h, UINT64_C(1) << 50);
  sluice__histogram_record(&h, MAX_VALUE);
  assert_int_equal(h.total, 3);
  assert_int_equal(h.max, MAX_VALUE);
  assert_int_equal(sluice__histogram_percentile(&h, 100), MAX_VALUE);
  assert_int_equal(sluice__histogram_percentile(&h, 1), MAX_VALUE);
  /* The last bucket holds them. */
  assert_int_equal(h.counts[SLUICE__HIST_BUCKETS - 1], 3);
}

static void merge(void **state) {
  (void)state;
  sluice__histogram *a = malloc(sizeof *a), *b = malloc(sizeof *b),
                    *all = malloc(sizeof *all);
  assert_non_null(a);
  assert_non_null(b);
  assert_non_null(all);
  sluice__histogram_init(a);
  sluice__histogram_init(b);
  sluice__histogram_init(all);
  for (int i = 0; i < 50000; i++) {
    uint64_t x = next() % 1000000, y = 5000000 + next() % 1000;
    sluice__histogram_record(a, x);
    sluice__histogram_record(b, y);
    sluice__histogram_record(all, x);
    sluice__histogram_record(all, y);
  }
  sluice__histogram empty_h;
  sluice__histogram_init(&empty_h);
  sluice__histogram_merge(a, &empty_h); /* no-op: min stays */
  sluice__histogram_merge(a, b);
  assert_int_equal(a->total, all->total);
  assert_int_equal(a->min, all->min);
  assert_int_equal(a->max, all->max);
  assert_memory_equal(a->counts, all->counts, sizeof a->counts);
  assert_true(sluice__histogram_mean(a) == sluice__histogram_mean(all));
  for (double p = 0; p <= 100; p += 12.5)
    assert_int_equal(sluice__histogram_percentile(a, p),
                     sluice__histogram_percentile(all, p));
  /* Into an empty one: a copy. */
  sluice__histogram_merge(&empty_h, b);
  assert_int_equal(empty_h.min, b->min);
  assert_int_equal(empty_h.max, b->max);
  assert_int_equal(empty_h.total, b->total);
  free(a);
  free(b);
  free(all);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(uniform_random),
      cmocka_unit_test(skewed),
      cmocka_unit_test(small_values_exact),
      cmocka_unit_test(empty),
      cmocka_unit_test(single_value),
      cmocka_unit_test(huge_values_clamped),
      cmocka_unit_test(merge),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
