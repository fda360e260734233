/* tools/sluice-bench/stats.c and adaptive.c: Welford's mean and standard
 * deviation against a two-pass computation on random data (also far from
 * zero, where the naive sum-of-squares formula falls apart), merging
 * partial results, status-code accounting, and the adaptive controller's
 * search against a simulated capacity. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdlib.h>

#include "sb_adaptive.h"
#include "sb_sched.h"
#include "sb_stats.h"

#define N 100000

static void two_pass(const double *v, size_t n, double *mean, double *sd) {
  long double s = 0;
  for (size_t i = 0; i < n; i++)
    s += v[i];
  long double m = s / (long double)n, q = 0;
  for (size_t i = 0; i < n; i++)
    q += (v[i] - m) * (v[i] - m);
  *mean = (double)m;
  *sd = (double)sqrtl(q / (long double)(n - 1));
}

static double rel(double a, double b) { return fabs(a - b) / fabs(b); }

static void welford_vs_two_pass(void **state) {
  (void)state;
  double *v = malloc(N * sizeof *v);
  assert_non_null(v);
  uint64_t rng = 12345;
  /* Offsets: latencies around 100 us, and a large offset (1e9) with a small
   * spread, where sum-of-squares cancels catastrophically. */
  const double offsets[] = {1e5, 1e9};
  for (int o = 0; o < 2; o++) {
    for (size_t i = 0; i < N; i++)
      v[i] = offsets[o] + 1000.0 * -log(sb_rand01(&rng));
    sb_welford w;
    sb_welford_init(&w);
    double naive_s = 0, naive_q = 0;
    for (size_t i = 0; i < N; i++) {
      sb_welford_add(&w, v[i]);
      naive_s += v[i];
      naive_q += v[i] * v[i];
    }
    double mean, sd;
    two_pass(v, N, &mean, &sd);
    assert_int_equal(w.n, N);
    assert_true(rel(w.mean, mean) < 1e-12);
    assert_true(rel(sb_welford_stddev(&w), sd) < 1e-9);
    double naive_var = (naive_q - naive_s * naive_s / N) / (double)(N - 1);
    double naive_sd = naive_var > 0 ? sqrt(naive_var) : 0;
    print_message("offset %.0e: sd two-pass %.6f, welford %.6f, naive %.6f\n",
                  offsets[o], sd, sb_welford_stddev(&w), naive_sd);
    /* Merge: three uneven parts give the whole. */
    sb_welford p[3], m;
    for (int k = 0; k < 3; k++)
      sb_welford_init(&p[k]);
    for (size_t i = 0; i < N; i++)
      sb_welford_add(&p[i < 10 ? 0 : i < 60000 ? 1 : 2], v[i]);
    sb_welford_init(&m);
    sb_welford_merge(&m, &p[0]);
    sb_welford_merge(&m, &p[1]);
    sb_welford_merge(&m, &p[2]);
    assert_int_equal(m.n, N);
    assert_true(rel(m.mean, mean) < 1e-12);
    assert_true(rel(sb_welford_stddev(&m), sd) < 1e-9);
  }
  free(v);
  /* Degenerate cases. */
  sb_welford w, e;
  sb_welford_init(&w);
  sb_welford_init(&e);
  assert_true(sb_welford_stddev(&w) == 0);
  sb_welford_add(&w, 5);
  assert_true(sb_welford_stddev(&w) == 0 && w.mean == 5);
  sb_welford_merge(&w, &e);
  assert_int_equal(w.n, 1);
  sb_welford_merge(&e, &w);
  assert_int_equal(e.n, 1);
  assert_true(e.mean == 5);
}

static void stats_record_and_merge(void **state) {
  (void)state;
  sb_stats a, b, m;
  sb_stats_init(&a);
  sb_stats_init(&b);
  sb_stats_init(&m);
  for (uint64_t i = 1; i <= 1000; i++)
    sb_stats_record(i % 2 ? &a : &b, 0, i * 1000);
  sb_stats_record(&a, 14, 5); /* UNAVAILABLE */
  sb_stats_record(&b, 14, 5);
  sb_stats_record(&b, 4, 5);  /* DEADLINE_EXCEEDED */
  sb_stats_record(&b, 99, 5); /* out of range */
  sb_stats_merge(&m, &a);
  sb_stats_merge(&m, &b);
  assert_int_equal(m.ok, 1000);
  assert_int_equal(m.hist.total, 1000);
  assert_int_equal(m.lat.n, 1000);
  assert_true(fabs(m.lat.mean - 500500.0) < 1e-6);
  assert_int_equal(m.by_code[14], 2);
  assert_int_equal(m.by_code[4], 1);
  assert_int_equal(m.by_code[SB_N_CODES], 1);
  assert_int_equal(sb_stats_errors(&m), 4);
  assert_int_equal(m.hist.min, 1000);
  assert_int_equal(m.hist.max, 1000000);
  uint64_t p50 = sluice__histogram_percentile(&m.hist, 50);
  assert_true(p50 >= 500000 && p50 <= 500000 * 1.04);
}

/* The controller against a system that holds the SLO up to `cap`. */
static void adaptive_finds_capacity(void **state) {
  (void)state;
  const double caps[] = {7300, 1000, 500, 123456};
  for (int i = 0; i < 4; i++) {
    sb_adaptive a;
    sb_adaptive_init(&a, 1000, 2, 0.05, 30);
    int steps = 0;
    while (sb_adaptive_step(&a, a.rate <= caps[i]))
      steps++;
    print_message("capacity %.0f: found %.0f in %d steps\n", caps[i], a.good,
                  a.steps);
    assert_true(a.good <= caps[i]);
    if (caps[i] >= 1000)
      assert_true(a.good >= caps[i] * 0.95);
    else
      assert_true(a.good >= caps[i] * 0.9 || a.good == 0);
    assert_true(a.steps <= 30);
  }
  /* Bounded: at most max_steps steps even when every step holds. */
  sb_adaptive a;
  sb_adaptive_init(&a, 10, 2, 0.05, 5);
  int n = 1;
  while (sb_adaptive_step(&a, 1))
    n++;
  assert_int_equal(n, 5);
  assert_true(a.good == 160);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(welford_vs_two_pass),
      cmocka_unit_test(stats_record_and_merge),
      cmocka_unit_test(adaptive_finds_capacity),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
