/* tools/sluice-bench/sched.c, the open-loop scheduler, in simulated time:
 * mean rates of uniform and Poisson arrivals, a stalled sender's calls keep
 * their intended times, late / waited / never-sent accounting, and a
 * simulated server stall of 200 ms that must show up in p99.9 when latency
 * is measured from intended send times (and hides when it is measured from
 * actual send times: coordinated omission). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>

#include "sb_sched.h"
#include "sb_stats.h"

#define MS UINT64_C(1000000)
#define SEC UINT64_C(1000000000)

/* Takes every call intended in [start, end) with a punctual sender. */
static uint64_t count_calls(sb_sched *s, uint64_t end) {
  uint64_t n = 0, t;
  while (sb_sched_peek(s) < end) {
    uint64_t now = sb_sched_peek(s);
    assert_int_equal(sb_sched_next(s, now, 0, &t), 1);
    assert_int_equal(t, now);
    n++;
  }
  return n;
}

static void uniform_rate(void **state) {
  (void)state;
  sb_sched s;
  sb_sched_init(&s, SB_ARRIVAL_UNIFORM, 1000, 5 * SEC, 1, MS);
  uint64_t n = count_calls(&s, 15 * SEC);
  assert_int_equal(n, 10000);
  assert_int_equal(s.late, 0);
  /* Not due yet: nothing taken, the wait time given. */
  uint64_t t;
  assert_int_equal(sb_sched_next(&s, 15 * SEC - 1, 0, &t), 0);
  assert_int_equal(t, 15 * SEC);
  assert_int_equal(s.issued, 10000);
}

static void poisson_rate(void **state) {
  (void)state;
  sb_sched s;
  sb_sched_init(&s, SB_ARRIVAL_POISSON, 5000, 0, 42, MS);
  /* Gaps: mean 1/rate and coefficient of variation 1 (exponential). */
  double sum = 0, sum2 = 0;
  uint64_t prev = 0, t;
  uint64_t n = 0;
  while (sb_sched_peek(&s) < 100ull * SEC) {
    assert_int_equal(sb_sched_next(&s, sb_sched_peek(&s), 0, &t), 1);
    double g = (double)(t - prev);
    if (n > 0) {
      sum += g;
      sum2 += g * g;
    }
    prev = t;
    n++;
  }
  /* 500000 expected; the standard deviation of a Poisson count is ~707. */
  assert_true(fabs((double)n - 500000.0) < 3500);
  double mean = sum / (double)(n - 1);
  double sd = sqrt(sum2 / (double)(n - 1) - mean * mean);
  assert_true(fabs(mean - 200000.0) < 2000);
  assert_true(fabs(sd / mean - 1.0) < 0.02);

  /* Seeded: the same seed gives the same schedule, another seed another. */
  sb_sched a, b, c;
  sb_sched_init(&a, SB_ARRIVAL_POISSON, 1000, 0, 7, MS);
  sb_sched_init(&b, SB_ARRIVAL_POISSON, 1000, 0, 7, MS);
  sb_sched_init(&c, SB_ARRIVAL_POISSON, 1000, 0, 8, MS);
  int differ = 0;
  for (int i = 0; i < 1000; i++) {
    uint64_t ta, tb, tc;
    sb_sched_next(&a, UINT64_MAX / 2, 0, &ta);
    sb_sched_next(&b, UINT64_MAX / 2, 0, &tb);
    sb_sched_next(&c, UINT64_MAX / 2, 0, &tc);
    assert_int_equal(ta, tb);
    differ |= ta != tc;
  }
  assert_true(differ);
}

/* A sender that stalls for 200 ms: the calls it owes keep their intended
 * times (so the stall shows in latency), and those more than 1 ms late are
 * counted. */
static void stalled_sender_keeps_intended_times(void **state) {
  (void)state;
  sb_sched s;
  sb_sched_init(&s, SB_ARRIVAL_UNIFORM, 1000, 0, 1, MS);
  assert_int_equal(count_calls(&s, 1 * SEC), 1000);
  /* Nothing taken between 1.0 s and 1.2 s; at 1.2 s the sender catches up,
   * having waited for a free slot. */
  uint64_t now = 1200 * MS, t, k = 0;
  while (sb_sched_next(&s, now, 1, &t)) {
    assert_int_equal(t, 1 * SEC + k * MS); /* the intended time, not now */
    k++;
  }
  assert_int_equal(k, 201); /* 1.000 .. 1.200 inclusive */
  /* Late: intended before 1.199 s (more than 1 ms behind): 199 calls. */
  assert_int_equal(s.late, 199);
  assert_int_equal(s.blocked, 201);
  assert_int_equal(t, 1201 * MS); /* the next one, not due yet */
  /* Back on schedule: no more late calls. */
  assert_int_equal(count_calls(&s, 2 * SEC), 799);
  assert_int_equal(s.late, 199);
  assert_int_equal(s.issued, 2000);

  /* The run stops at 3 s while the sender is stuck since 2.5 s: the 500
   * calls it never sent are counted. */
  assert_int_equal(count_calls(&s, 2500 * MS), 500);
  assert_int_equal(sb_sched_skip_until(&s, 3 * SEC), 500);
  assert_int_equal(s.issued, 2500);
}

/* Discrete-event simulation: open loop at 1000 calls/s for 10 s against a
 * server with 100 us of service time that stalls from 5.0 s to 5.2 s. The
 * sender may have one call outstanding (the worst case for coordinated
 * omission: a stalled server also stalls the sender). */
static void server_stall_shows_in_p999(void **state) {
  (void)state;
  sb_sched s;
  sb_sched_init(&s, SB_ARRIVAL_UNIFORM, 1000, 0, 1, MS);
  sb_stats from_intended, from_sent;
  sb_stats_init(&from_intended);
  sb_stats_init(&from_sent);
  const uint64_t service = 100000, stall_from = 5 * SEC, stall_to = 5200 * MS;
  uint64_t free_at = 0; /* when the outstanding call completes */
  while (sb_sched_peek(&s) < 10ull * SEC) {
    uint64_t due = sb_sched_peek(&s);
    int blocked = free_at > due;
    uint64_t now = blocked ? free_at : due, intended;
    assert_int_equal(sb_sched_next(&s, now, blocked, &intended), 1);
    uint64_t begin = now;
    if (begin >= stall_from && begin < stall_to)
      begin = stall_to;
    uint64_t done = begin + service;
    sb_stats_record(&from_intended, 0, done - intended);
    sb_stats_record(&from_sent, 0, done - now);
    free_at = done;
  }
  assert_int_equal(from_intended.ok, 10000);
  uint64_t p50 = sluice__histogram_percentile(&from_intended.hist, 50);
  uint64_t p999 = sluice__histogram_percentile(&from_intended.hist, 99.9);
  uint64_t max = from_intended.hist.max;
  print_message("from intended: p50 %.3f ms, p99 %.3f ms, p99.9 %.3f ms, "
                "max %.3f ms; late %llu, waited %llu\n",
                (double)p50 / 1e6,
                (double)sluice__histogram_percentile(&from_intended.hist, 99) /
                    1e6,
                (double)p999 / 1e6, (double)max / 1e6,
                (unsigned long long)s.late, (unsigned long long)s.blocked);
  assert_true(p50 < 1 * MS);
  assert_true(p999 >= 150 * MS); /* the stall is in the tail */
  assert_true(max >= 199 * MS && max <= 201 * MS);
  /* ~200 calls fell due during the stall and the backlog behind it. */
  assert_true(s.late >= 190 && s.late <= 260);
  assert_true(s.blocked >= s.late);
  /* Measured from actual send times, one call saw the stall and the rest
   * look fine: coordinated omission hides it below p99.9. */
  uint64_t co_p999 = sluice__histogram_percentile(&from_sent.hist, 99.9);
  assert_true(co_p999 < 1 * MS);
  assert_true(from_sent.hist.max >= 199 * MS);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(uniform_rate),
      cmocka_unit_test(poisson_rate),
      cmocka_unit_test(stalled_sender_keeps_intended_times),
      cmocka_unit_test(server_stall_shows_in_p999),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
