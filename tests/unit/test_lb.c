/* Load balancing (runtime/lb/): rr, lcc and bcc picks, the estimators and
 * their gradient limit, admission (limits, path shares, deadlines), and
 * the strategies against simulated destinations (lb_sim.h): traffic split
 * by capacity, early drop under 2x overload, deadline-aware refusal, a
 * slow path that cannot starve a fast one, a limit that follows capacity.
 * Simulations are deterministic (seeded); their numbers are printed so a
 * change in behaviour shows in the log, and the assertions hold loose
 * margins around them. A micro-benchmark prints the cost of a pick. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "lb/lb.h"
#include "lb_sim.h"

#define MS LB_SIM_MS
#define SEC LB_SIM_SEC

/* --- direct picks --------------------------------------------------------- */

typedef struct fixture {
  sluice__lb lb;
  sluice__lb_dest d[8];
  sluice__lb_dest *v[8];
  size_t n;
} fixture;

/* |got - want| <= eps (cmocka 1.1 has no double compare). */
static void assert_near(double got, double want, double eps) {
  assert_true(got >= want - eps && got <= want + eps);
}

static void fx_init(fixture *f, const sluice__lb_ops *ops, size_t n,
                    const sluice__lb_config *cfg) {
  memset(f, 0, sizeof *f);
  sluice__lb_init(&f->lb, ops, cfg);
  f->n = n;
  for (size_t i = 0; i < n; i++) {
    sluice__lb_dest_init(&f->lb, &f->d[i], SEC);
    f->d[i].usable = 1;
    f->v[i] = &f->d[i];
  }
  assert_int_equal(sluice__lb_set_dests(&f->lb, f->v, n), 0);
}

static const sluice__lb_call plain = {0, 100, 0, 0, 0};

static void find_by_name(void **state) {
  (void)state;
  assert_ptr_equal(sluice__lb_find("rr"), &sluice__lb_rr);
  assert_ptr_equal(sluice__lb_find("lcc"), &sluice__lb_lcc);
  assert_ptr_equal(sluice__lb_find("bcc"), &sluice__lb_bcc);
  assert_ptr_equal(sluice__lb_find("btc"), &sluice__lb_btc);
  assert_null(sluice__lb_find("nope"));
  assert_null(sluice__lb_find(NULL));
  sluice__lb_config c;
  sluice__lb_config_default(&c);
  assert_true(c.initial_limit == 1000 && c.min_limit == 1 &&
              c.max_limit == 10000 && c.path_share == 0.5);
  assert_true(c.window_ns == 100 * MS && c.min_rtt_reset_ns == 10 * SEC);
  assert_true(c.tolerance == 1.5 && c.smoothing == 0.2);
  assert_true(c.bcc_low == 0.5 && c.bcc_high == 0.9);
  assert_true(c.btc_dwell_ns == 200 * MS && c.lcc_p2c == 0);
}

static void rr_spreads_evenly(void **state) {
  (void)state;
  fixture f;
  fx_init(&f, &sluice__lb_rr, 4, NULL);
  size_t count[4] = {0};
  for (int i = 0; i < 4000; i++) {
    size_t c = 99;
    assert_int_equal(sluice__lb_pick(&f.lb, &plain, SEC, &c),
                     SLUICE__LB_PICKED);
    count[c]++;
    sluice__lb_sent(&f.lb, f.v[c], &plain, SEC); /* rr ignores load */
  }
  for (int i = 0; i < 4; i++)
    assert_int_equal(count[i], 1000);
  /* Unusable destinations are skipped, the others still alternate. */
  sluice__lb_set_usable(&f.lb, &f.d[1], 0);
  memset(count, 0, sizeof count);
  for (int i = 0; i < 300; i++) {
    size_t c = 99;
    assert_int_equal(sluice__lb_pick(&f.lb, &plain, SEC, &c),
                     SLUICE__LB_PICKED);
    count[c]++;
  }
  assert_int_equal(count[1], 0);
  /* A retry or hedge (again) does not move the rotation. */
  sluice__lb_set_usable(&f.lb, &f.d[1], 1);
  sluice__lb_call again = plain;
  again.again = 1;
  size_t first = 99, second = 99, third = 99;
  sluice__lb_pick(&f.lb, &plain, SEC, &first);
  sluice__lb_pick(&f.lb, &again, SEC, &second);
  sluice__lb_pick(&f.lb, &plain, SEC, &third);
  assert_int_equal(second, (first + 1) % 4);
  assert_int_equal(third, second);
  assert_int_equal(count[0], 100);
  assert_int_equal(count[2], 100);
  assert_int_equal(count[3], 100);
  for (int i = 0; i < 4; i++)
    sluice__lb_set_usable(&f.lb, &f.d[i], 0);
  size_t c = 99;
  assert_int_equal(sluice__lb_pick(&f.lb, &plain, SEC, &c), SLUICE__LB_NONE);
  assert_int_equal(sluice__lb_set_dests(&f.lb, f.v, 0), 0);
  assert_int_equal(sluice__lb_pick(&f.lb, &plain, SEC, &c), SLUICE__LB_NONE);
  sluice__lb_free(&f.lb);
}

static void lcc_prefers_least_loaded(void **state) {
  (void)state;
  fixture f;
  fx_init(&f, &sluice__lb_lcc, 3, NULL);
  for (int i = 0; i < 3; i++)
    sluice__lb_sent(&f.lb, &f.d[0], &plain, SEC);
  sluice__lb_sent(&f.lb, &f.d[1], &plain, SEC);
  for (int i = 0; i < 2; i++)
    sluice__lb_sent(&f.lb, &f.d[2], &plain, SEC);
  size_t c = 99;
  assert_int_equal(sluice__lb_pick(&f.lb, &plain, SEC, &c), SLUICE__LB_PICKED);
  assert_int_equal(c, 1);
  /* Picking and sending fills the least loaded first: 1, then 1 or 2 ... */
  size_t count[3] = {0};
  for (int i = 0; i < 6; i++) {
    assert_int_equal(sluice__lb_pick(&f.lb, &plain, SEC, &c),
                     SLUICE__LB_PICKED);
    count[c]++;
    sluice__lb_sent(&f.lb, f.v[c], &plain, SEC);
  }
  assert_int_equal(count[0], 1);
  assert_int_equal(count[1], 3);
  assert_int_equal(count[2], 2);
  /* All at 4 now: ties go round robin. */
  size_t seen[3] = {0};
  for (int i = 0; i < 3; i++) {
    assert_int_equal(sluice__lb_pick(&f.lb, &plain, SEC, &c),
                     SLUICE__LB_PICKED);
    seen[c]++;
  }
  assert_int_equal(seen[0] + seen[1] + seen[2], 3);
  assert_true(seen[0] == 1 && seen[1] == 1 && seen[2] == 1);
  /* Unusable: never picked even when least loaded. */
  sluice__lb_set_usable(&f.lb, &f.d[1], 0);
  sluice__lb_complete(&f.lb, &f.d[1], &plain, MS, SLUICE_STATUS_OK, 10,
                      SEC + MS);
  for (int i = 0; i < 10; i++) {
    assert_int_equal(sluice__lb_pick(&f.lb, &plain, SEC, &c),
                     SLUICE__LB_PICKED);
    assert_int_not_equal(c, 1);
  }
  sluice__lb_free(&f.lb);
}

/* Power of two choices: the less loaded of two random destinations; the
 * most loaded one can never win against a less loaded one. */
static void lcc_p2c(void **state) {
  (void)state;
  sluice__lb_config cfg;
  sluice__lb_config_default(&cfg);
  cfg.lcc_p2c = 1;
  fixture f;
  fx_init(&f, &sluice__lb_lcc, 4, &cfg);
  for (int k = 0; k < 4; k++)
    for (int i = 0; i < k * 10; i++)
      sluice__lb_sent(&f.lb, &f.d[k], &plain, SEC);
  size_t count[4] = {0};
  for (int i = 0; i < 1200; i++) {
    size_t c = 99;
    assert_int_equal(sluice__lb_pick(&f.lb, &plain, SEC, &c),
                     SLUICE__LB_PICKED);
    count[c]++;
  }
  assert_int_equal(count[3], 0);
  /* 0 wins whenever drawn (half the pairs), 1 in a third, 2 in a sixth. */
  assert_true(count[0] > 500 && count[0] < 700);
  assert_true(count[1] > 300 && count[1] < 500);
  assert_true(count[2] > 120 && count[2] < 280);
  sluice__lb_free(&f.lb);
}

/* --- estimators ----------------------------------------------------------- */

static void estimator_basics(void **state) {
  (void)state;
  sluice__lb_config cfg;
  sluice__lb_config_default(&cfg);
  sluice__lb_est e;
  sluice__lb_call a = {0, 1000, 0, 0, 0}, b = {3, 500, 0, 0, 0},
                  far = {99, 10, 0, 0, 0};
  uint64_t t = SEC;
  sluice__lb_est_init(&e, &cfg, t);
  assert_true(e.limit == 1000 && e.peer_util < 0);
  assert_int_equal(sluice__lb_est_expected_ns(&e, t), 0);
  sluice__lb_est_sent(&e, &a, t);
  sluice__lb_est_sent(&e, &b, t);
  sluice__lb_est_sent(&e, &far, t);
  assert_int_equal(e.in_flight, 3);
  assert_int_equal(e.path_in_flight[0], 1);
  assert_int_equal(e.path_in_flight[3], 1);
  assert_int_equal(e.path_in_flight[SLUICE__LB_MAX_PATHS - 1], 1);
  sluice__lb_est_done(&e, &cfg, &a, 10 * MS, 0, 2000, t + 10 * MS);
  assert_true(e.lat_ewma_ns == 10 * MS && e.lat_min_ns == 10 * MS);
  assert_true(e.path_lat_ewma_ns[0] == 10 * MS);
  sluice__lb_est_done(&e, &cfg, &b, 20 * MS, 0, 0, t + 20 * MS);
  /* EWMA: 10 + 0.2 * (20 - 10) */
  assert_true(e.lat_ewma_ns > 11.99 * MS && e.lat_ewma_ns < 12.01 * MS);
  assert_true(e.lat_min_ns == 10 * MS && e.path_lat_min_ns[3] == 20 * MS);
  assert_int_equal(e.in_flight, 1);
  assert_int_equal(e.path_in_flight[3], 0);
  /* A deadline-exceeded call's latency is censored: it moves neither the
   * average nor the minimum, and cuts the limit by 10 %. */
  double lim = e.limit;
  double avg = e.lat_ewma_ns;
  sluice__lb_est_done(&e, &cfg, &far, 100 * MS, 1, 0, t + 100 * MS);
  assert_true(e.lat_min_ns == 10 * MS);
  assert_true(e.lat_ewma_ns == avg);
  assert_true(e.limit > lim * 0.89 && e.limit < lim * 0.91);
  assert_int_equal(e.in_flight, 0);
  assert_int_equal(e.samples, 2);
  /* A crash-like failure (INTERNAL after 1 us) is censored too, and leaves
   * the limit alone: it must not become the "no-load latency" that makes a
   * broken destination look fastest. */
  lim = e.limit;
  sluice__lb_est_sent(&e, &a, t + 100 * MS);
  sluice__lb_est_done(&e, &cfg, &a, 1000, SLUICE__LB_CENSORED, 0,
                      t + 100 * MS + 1000);
  assert_true(e.lat_min_ns == 10 * MS && e.path_lat_min_ns[0] == 10 * MS);
  assert_true(e.lat_ewma_ns == avg && e.limit == lim);
  assert_int_equal(e.in_flight, 0);
  assert_int_equal(e.samples, 2);
  /* Never below zero in flight. */
  sluice__lb_est_done(&e, &cfg, &a, MS, 0, 0, t + 101 * MS);
  assert_int_equal(e.in_flight, 0);
  sluice__lb_peer_load l = {0.75, 100, 3, 5, -1};
  sluice__lb_est_peer_load(&e, &l, t + 200 * MS);
  assert_true(e.peer_util == 0.75 && e.peer_queue_ms == 3);
  assert_true(e.peer_load_ns == t + 200 * MS);
}

/* A channel's own back-pressure (what a parent's server passes up): calls
 * in flight and waiting against the usable destinations' limits, or a
 * destination's fresh downstream report when higher; smoothed over time
 * (100 ms) and clamped to 0..1. */
static void pressure_sample_and_note(void **state) {
  (void)state;
  sluice__lb lb;
  sluice__lb_init(&lb, &sluice__lb_btc, NULL);
  assert_true(lb.pressure < 0); /* nothing decided yet */
  sluice__lb_dest a, b, off;
  uint64_t t = SEC;
  sluice__lb_dest_init(&lb, &a, t);
  sluice__lb_dest_init(&lb, &b, t);
  sluice__lb_dest_init(&lb, &off, t);
  a.usable = b.usable = 1;
  a.limit = b.limit = off.limit = 10;
  a.est.in_flight = 5;
  b.est.in_flight = 3;
  off.est.in_flight = 10; /* not usable: not counted */
  sluice__lb_dest *ds[] = {&a, &b, &off};
  assert_int_equal(sluice__lb_set_dests(&lb, ds, 3), 0);
  assert_near(sluice__lb_pressure_sample(&lb, 2, t), 0.5, 1e-9);
  sluice__lb_peer_load l = {0.1, 100, 0, 0, 0.8};
  sluice__lb_peer_report(&lb, &b, &l, t);
  assert_near(sluice__lb_pressure_sample(&lb, 2, t), 0.8, 1e-9);
  /* Not usable: its report does not count either. */
  sluice__lb_peer_load more = {0.1, 100, 0, 0, 0.9};
  sluice__lb_peer_report(&lb, &off, &more, t);
  assert_near(sluice__lb_pressure_sample(&lb, 2, t), 0.8, 1e-9);
  /* No limits (rr): only what the destinations report. */
  a.limit = b.limit = 0;
  sluice__lb_dest_changed(&lb, &a);
  sluice__lb_dest_changed(&lb, &b);
  assert_near(sluice__lb_pressure_sample(&lb, 2, t), 0.8, 1e-9);
  /* A newer report replaces the older one; a stale one counts no more. */
  sluice__lb_peer_load calm = {0.1, 100, 0, 0, 0.3};
  sluice__lb_peer_report(&lb, &b, &calm, t + MS);
  assert_near(sluice__lb_pressure_sample(&lb, 2, t + MS), 0.3, 1e-9);
  assert_near(sluice__lb_pressure_sample(&lb, 2, t + MS + SEC), 0, 1e-9);
  /* The first decision sets it; then each moves it by the time since the
   * previous one over the 100 ms time constant. */
  sluice__lb_pressure_note(&lb, 0.5, t);
  assert_near(lb.pressure, 0.5, 1e-9);
  sluice__lb_pressure_note(&lb, 7, t + 10 * MS); /* clamped to 1: +10 % */
  assert_near(lb.pressure, 0.55, 1e-9);
  sluice__lb_pressure_note(&lb, 1, t + 60 * MS); /* half the way */
  assert_near(lb.pressure, 0.775, 1e-9);
  /* A burst of refusals within a millisecond barely moves it. */
  for (int i = 0; i < 10; i++)
    sluice__lb_pressure_note(&lb, 0, t + 60 * MS + (uint64_t)i * 100000);
  assert_true(lb.pressure > 0.75);
  /* A decision long after sets it (and clamps below at 0). */
  sluice__lb_pressure_note(&lb, -3, t + 2 * SEC);
  assert_near(lb.pressure, 0, 1e-9);
  sluice__lb_free(&lb);
}

/* --- the compact records under random events ----------------------------- */

static uint64_t rnd_state = 88172645463325252ull;
static uint64_t rnd(uint64_t n) {
  rnd_state ^= rnd_state << 13;
  rnd_state ^= rnd_state >> 7;
  rnd_state ^= rnd_state << 17;
  return n ? rnd_state % n : 0;
}

/* sluice__lb_pressure_sample as it was computed before it was kept
 * incrementally: a pass over the table. */
static double pressure_ref(const sluice__lb *lb, size_t waiting, uint64_t now) {
  double in_flight = (double)waiting, limit = 0, down = 0;
  for (size_t i = 0; i < lb->n; i++) {
    const sluice__lb_dest *d = lb->dests[i];
    if (!d->usable)
      continue;
    if (d->limit > 0) {
      in_flight += d->est.in_flight;
      limit += d->limit;
    }
    if (d->est.peer_down > down &&
        now - d->est.peer_load_ns < SLUICE__LB_PEER_FRESH_NS)
      down = d->est.peer_down;
  }
  double own = limit > 0 ? in_flight / limit : 0;
  return own > down ? own : down;
}

/* Every event that changes what a pick reads, in random order with random
 * values (calls on 10 paths, failures that eject, load reports, usable
 * flags, direct writes, reconnections, new tables): after each, the
 * compact records, the table's counts and the pressure's running sums are
 * what a full recomputation gives. */
static void records_follow_random_events(void **state) {
  (void)state;
  enum { N = 40, CALLS = 4096 };
  const sluice__lb_ops *ops[] = {&sluice__lb_rr, &sluice__lb_lcc,
                                 &sluice__lb_bcc, &sluice__lb_btc};
  static const sluice_status_code codes[] = {SLUICE_STATUS_OK,
                                             SLUICE_STATUS_OK,
                                             SLUICE_STATUS_OK,
                                             SLUICE_STATUS_OK,
                                             SLUICE_STATUS_NOT_FOUND,
                                             SLUICE_STATUS_UNAVAILABLE,
                                             SLUICE_STATUS_INTERNAL,
                                             SLUICE_STATUS_RESOURCE_EXHAUSTED,
                                             SLUICE_STATUS_DEADLINE_EXCEEDED};
  static sluice__lb_dest d[N];
  sluice__lb_dest *v[N];
  static struct {
    size_t dest;
    sluice__lb_call call;
  } out[CALLS];
  for (size_t s = 0; s < 4; s++) {
    sluice__lb_config cfg;
    sluice__lb_config_default(&cfg);
    cfg.initial_limit = 20; /* limits that are reached and move */
    sluice__lb lb;
    sluice__lb_init(&lb, ops[s], &cfg);
    uint64_t now = SEC;
    size_t n_out = 0, outstanding[N] = {0}, ejections = 0;
    for (size_t i = 0; i < N; i++) {
      sluice__lb_dest_init(&lb, &d[i], now);
      d[i].usable = i % 5 != 0;
      v[i] = &d[i];
    }
    assert_int_equal(sluice__lb_set_dests(&lb, v, N), 0);
    for (int step = 0; step < 30000; step++) {
      now += rnd(2 * MS);
      uint64_t r = rnd(1000);
      if (r < 450) { /* a call, on one of 10 paths (the last ones share) */
        sluice__lb_call c = {(uint32_t)rnd(10), 100,
                             rnd(3) ? 0 : now + rnd(40 * MS), 0, 0};
        size_t i = N;
        if (n_out < CALLS &&
            sluice__lb_pick(&lb, &c, now, &i) == SLUICE__LB_PICKED) {
          assert_true(i < lb.n);
          size_t k = (size_t)(lb.dests[i] - d);
          sluice__lb_sent(&lb, &d[k], &c, now);
          out[n_out].dest = k;
          out[n_out++].call = c;
          outstanding[k]++;
        }
      } else if (r < 850 && n_out) { /* one ends (or is refused unsent) */
        size_t j = rnd(n_out), k = out[j].dest;
        sluice__lb_call c = out[j].call;
        out[j] = out[--n_out];
        outstanding[k]--;
        if (r < 830) {
          /* A failing destination keeps failing: ejections happen. */
          sluice_status_code code =
              k % 7 == 3 && rnd(10) ? SLUICE_STATUS_INTERNAL
                                    : codes[rnd(sizeof codes / sizeof *codes)];
          sluice__lb_complete(&lb, &d[k], &c, MS + rnd(20 * MS), code, 200,
                              now);
        } else {
          sluice__lb_unsent(&lb, &d[k], &c);
        }
      } else if (r < 900) {
        size_t k = rnd(N);
        sluice__lb_set_usable(&lb, &d[k], !d[k].usable);
      } else if (r < 960) {
        double util = rnd(4) ? (double)rnd(100) / 100 : -1;
        double down = rnd(3) ? (double)rnd(100) / 100 : -1;
        sluice__lb_peer_load l = {util, 100, 1, 3, down};
        sluice__lb_peer_report(&lb, &d[rnd(N)], &l, now);
      } else if (r < 975) { /* a field written directly, then told */
        size_t k = rnd(N);
        d[k].limit = 1 + (double)rnd(40);
        sluice__lb_dest_changed(&lb, &d[k]);
      } else if (r < 990) { /* a reconnection (nothing in flight there) */
        size_t k = rnd(N);
        if (!outstanding[k])
          sluice__lb_dest_reset(&lb, &d[k], now);
      } else { /* a new table: shuffled, sometimes without a few */
        for (size_t i = N - 1; i > 0; i--) {
          size_t j = rnd(i + 1);
          sluice__lb_dest *t = v[i];
          v[i] = v[j];
          v[j] = t;
        }
        assert_int_equal(sluice__lb_set_dests(&lb, v, rnd(2) ? N : N - 5), 0);
      }
      assert_true(sluice__lb_records_ok(&lb));
      size_t waiting = rnd(5);
      assert_near(sluice__lb_pressure_sample(&lb, waiting, now),
                  pressure_ref(&lb, waiting, now), 1e-9);
    }
    for (size_t i = 0; i < N; i++)
      ejections += d[i].stats.outlier.ejections;
    printf("  random events, %s: %zu ejections, %zu calls still out\n",
           ops[s]->name, ejections, n_out);
    assert_true(ejections > 0);
    sluice__lb_free(&lb);
  }
}

/* 1000 completions/s of 1000 + 500 bytes over 100 ms windows. */
static void estimator_rates(void **state) {
  (void)state;
  sluice__lb_config cfg;
  sluice__lb_config_default(&cfg);
  sluice__lb_est e;
  sluice__lb_call c = {0, 1000, 0, 0, 0};
  uint64_t t = SEC;
  sluice__lb_est_init(&e, &cfg, t);
  for (int i = 0; i < 1000; i++) {
    t += MS;
    sluice__lb_est_sent(&e, &c, t - MS / 2);
    sluice__lb_est_done(&e, &cfg, &c, MS / 2, 0, 500, t);
  }
  assert_true(e.rate_calls > 990 && e.rate_calls < 1010);
  assert_true(e.rate_bytes > 1.48e6 && e.rate_bytes < 1.52e6);
  assert_true(e.rate_max >= e.rate_calls * 0.99);
  double peak = e.rate_max;
  /* Slower now: the rate follows at once, rate_max decays slowly. */
  for (int i = 0; i < 100; i++) {
    t += 10 * MS;
    sluice__lb_est_sent(&e, &c, t - MS / 2);
    sluice__lb_est_done(&e, &cfg, &c, MS / 2, 0, 500, t);
  }
  assert_true(e.rate_calls > 90 && e.rate_calls < 110);
  assert_true(e.rate_max < peak && e.rate_max > peak * 0.8);
  /* Unqueued latency, a light load: nothing but the latency to wait for. */
  for (int i = 0; i < 5; i++)
    sluice__lb_est_sent(&e, &c, t);
  assert_true(sluice__lb_est_expected_ns(&e, t) == (uint64_t)e.lat_ewma_ns);
}

/* Windowed minimum: a new period's minimum replaces the old one at the
 * period's end, so a destination that became slower for good is re-learnt;
 * a lower sample is taken at once. */
static void estimator_min_rtt_relearnt(void **state) {
  (void)state;
  sluice__lb_config cfg;
  sluice__lb_config_default(&cfg);
  sluice__lb_est e;
  sluice__lb_call c = {0, 10, 0, 0, 0};
  uint64_t t = SEC;
  sluice__lb_est_init(&e, &cfg, t);
  sluice__lb_est_sent(&e, &c, t);
  sluice__lb_est_done(&e, &cfg, &c, MS, 0, 0, t);
  for (int i = 0; i < 300; i++) { /* 30 s at 5 ms */
    t += 100 * MS;
    sluice__lb_est_sent(&e, &c, t);
    sluice__lb_est_done(&e, &cfg, &c, 5 * MS, 0, 0, t);
    if (t - SEC < 10 * SEC)
      assert_true(e.lat_min_ns == MS);
  }
  assert_true(e.lat_min_ns == 5 * MS);
  assert_true(e.path_lat_min_ns[0] == 5 * MS);
  sluice__lb_est_sent(&e, &c, t);
  sluice__lb_est_done(&e, &cfg, &c, 2 * MS, 0, 0, t + 1);
  assert_true(e.lat_min_ns == 2 * MS);
}

/* The gradient limit: latency at the minimum and the limit in use -> it
 * grows; latency at 3x the minimum -> it shrinks towards the queue
 * allowance; an unused limit does not grow. */
static void estimator_gradient_limit(void **state) {
  (void)state;
  sluice__lb_config cfg;
  sluice__lb_config_default(&cfg);
  cfg.initial_limit = 20;
  sluice__lb_est e;
  sluice__lb_call c = {0, 10, 0, 0, 0};
  uint64_t t = SEC;
  sluice__lb_est_init(&e, &cfg, t);
  /* Unused (1 in flight of 20): no growth. */
  for (int i = 0; i < 100; i++) {
    sluice__lb_est_sent(&e, &c, t);
    sluice__lb_est_done(&e, &cfg, &c, MS, 0, 0, t += MS);
  }
  assert_true(e.limit == 20);
  /* In use (15 in flight) at the minimum latency: grows. */
  for (int i = 0; i < 15; i++)
    sluice__lb_est_sent(&e, &c, t);
  for (int i = 0; i < 50; i++) {
    sluice__lb_est_sent(&e, &c, t);
    sluice__lb_est_done(&e, &cfg, &c, MS, 0, 0, t += MS);
  }
  assert_true(e.limit > 30); /* up to twice what is in flight (16) */
  /* 1.9x the 1 ms minimum is within the slack (min + 1 ms): no cut. */
  double before = e.limit;
  for (int i = 0; i < 100; i++) {
    sluice__lb_est_sent(&e, &c, t);
    sluice__lb_est_done(&e, &cfg, &c, 19 * MS / 10, 0, 0, t += MS);
  }
  assert_true(e.limit >= before);
  /* Queueing (3x the minimum): shrinks towards the point where the queue
   * allowance balances the gradient, allowed 2 ms / 3 ms:
   * limit * (1 - 2/3) = sqrt(limit) -> 9. */
  for (int i = 0; i < 500; i++) {
    sluice__lb_est_sent(&e, &c, t);
    sluice__lb_est_done(&e, &cfg, &c, 3 * MS, 0, 0, t += MS);
  }
  assert_true(e.limit > 8.8 && e.limit < 9.6);
  /* Without the slack the allowance is tolerance x min = 1.5 ms:
   * limit * (1 - 0.5) = sqrt(limit) -> 4. */
  cfg.latency_slack_ns = 0;
  for (int i = 0; i < 500; i++) {
    sluice__lb_est_sent(&e, &c, t);
    sluice__lb_est_done(&e, &cfg, &c, 3 * MS, 0, 0, t += MS);
  }
  assert_true(e.limit > 3.9 && e.limit < 4.5);
  for (int i = 0; i < 100; i++) {
    sluice__lb_est_sent(&e, &c, t);
    sluice__lb_est_done(&e, &cfg, &c, 3 * MS, 1, 0, t += MS);
  }
  assert_true(e.limit == cfg.min_limit);
}

/* --- admission ------------------------------------------------------------ */

static void admission_limits_and_paths(void **state) {
  (void)state;
  fixture f;
  fx_init(&f, &sluice__lb_lcc, 1, NULL);
  sluice__lb_dest *d = &f.d[0];
  sluice__lb_call p0 = {0, 10, 0, 0, 0}, p1 = {1, 10, 0, 0, 0};
  d->limit = 4;
  /* One path alone may use the whole limit. */
  for (int i = 0; i < 4; i++) {
    assert_true(sluice__lb_admits(&f.lb, d, &p0));
    sluice__lb_est_sent(&d->est, &p0, SEC);
  }
  assert_false(sluice__lb_admits(&f.lb, d, &p0));
  assert_int_equal(sluice__lb_check(&f.lb, d, &p0, SEC), SLUICE__LB_OVER_LIMIT);
  /* With another path active, a path holds at most half: 4 of 10 may
   * grow to 5, not beyond. */
  d->limit = 10;
  sluice__lb_est_sent(&d->est, &p1, SEC);
  assert_true(sluice__lb_admits(&f.lb, d, &p0));
  sluice__lb_est_sent(&d->est, &p0, SEC);
  assert_int_equal(sluice__lb_check(&f.lb, d, &p0, SEC), SLUICE__LB_PATH_LIMIT);
  assert_true(sluice__lb_admits(&f.lb, d, &p1));
  sluice__lb_free(&f.lb);
}

static void admission_path_share(void **state) {
  (void)state;
  fixture f;
  fx_init(&f, &sluice__lb_lcc, 1, NULL);
  sluice__lb_dest *d = &f.d[0];
  sluice__lb_call p0 = {0, 10, 0, 0, 0}, p1 = {1, 10, 0, 0, 0};
  d->limit = 10;
  for (int i = 0; i < 5; i++)
    sluice__lb_est_sent(&d->est, &p0, SEC);
  assert_true(sluice__lb_admits(&f.lb, d, &p0)); /* alone: up to 10 */
  sluice__lb_est_sent(&d->est, &p1, SEC);
  /* p1 active: p0 holds 5 = 0.5 x 10, no more; p1 may still come. */
  assert_int_equal(sluice__lb_check(&f.lb, d, &p0, SEC), SLUICE__LB_PATH_LIMIT);
  assert_true(sluice__lb_admits(&f.lb, d, &p1));
  /* A limit of 0 means none (rr). */
  d->limit = 0;
  assert_true(sluice__lb_admits(&f.lb, d, &p0));
  /* A tiny limit still lets each path hold one call. */
  d->limit = 1.5;
  sluice__lb_est_init(&d->est, &f.lb.cfg, SEC);
  sluice__lb_est_sent(&d->est, &p1, SEC);
  assert_true(sluice__lb_admits(&f.lb, d, &p0));
  sluice__lb_free(&f.lb);
}

static void admission_deadline(void **state) {
  (void)state;
  fixture f;
  fx_init(&f, &sluice__lb_lcc, 1, NULL);
  sluice__lb_dest *d = &f.d[0];
  uint64_t t = SEC;
  sluice__lb_call none = {0, 10, 0, 0, 0};
  sluice__lb_call tight = {0, 10, t + 5 * MS, 0, 0};
  sluice__lb_call loose = {0, 10, t + 50 * MS, 0, 0};
  sluice__lb_call gone = {0, 10, t - 1, 0, 0};
  /* Nothing measured: every live deadline is in time. */
  assert_true(sluice__lb_in_time(d, &tight, t));
  assert_false(sluice__lb_in_time(d, &gone, t));
  /* Refusals need evidence: SLUICE__LB_MIN_SAMPLES answered calls. */
  for (int i = 0; i < SLUICE__LB_MIN_SAMPLES; i++) {
    if (i == SLUICE__LB_MIN_SAMPLES - 1)
      assert_true(sluice__lb_in_time(d, &tight, t));
    sluice__lb_sent(&f.lb, d, &none, t - 20 * MS);
    sluice__lb_complete(&f.lb, d, &none, 20 * MS, SLUICE_STATUS_OK, 0, t);
  }
  /* Idle: judged by the no-load latency (20 ms here too: still late). */
  assert_false(sluice__lb_in_time(d, &tight, t));
  /* Busy: judged by the estimate. */
  sluice__lb_sent(&f.lb, d, &none, t);
  assert_true(sluice__lb_in_time(d, &none, t));
  assert_false(sluice__lb_in_time(d, &tight, t));
  assert_true(sluice__lb_in_time(d, &loose, t));
  size_t c = 99;
  assert_int_equal(sluice__lb_pick(&f.lb, &tight, t, &c), SLUICE__LB_DEADLINE);
  assert_int_equal(sluice__lb_pick(&f.lb, &loose, t, &c), SLUICE__LB_PICKED);
  /* Per path: a fast path's deadline is judged by its own latency. */
  sluice__lb_call fast = {2, 10, 0, 0, 0};
  sluice__lb_sent(&f.lb, d, &fast, t);
  sluice__lb_complete(&f.lb, d, &fast, MS, SLUICE_STATUS_OK, 0, t + MS);
  sluice__lb_call fast_tight = {2, 10, t + MS + 5 * MS, 0, 0};
  assert_true(sluice__lb_in_time(d, &fast_tight, t + MS));
  assert_false(sluice__lb_in_time(d, &tight, t + MS));
  sluice__lb_free(&f.lb);
}

/* --- simulations ---------------------------------------------------------- */

/* Three destinations of 1000, 500 and 250 calls/s (8 workers each: 8, 16
 * and 32 ms per call), Poisson arrivals at `load` x 1750 calls/s; warm up
 * 3 s, measure 10 s. */
static lb_sim *three(const sluice__lb_ops *ops, double load, uint64_t seed) {
  lb_sim *s = lb_sim_new(ops, NULL, 3, seed);
  lb_sim_dest_set(s, 0, 1000, 8);
  lb_sim_dest_set(s, 1, 500, 8);
  lb_sim_dest_set(s, 2, 250, 8);
  s->flow[0].rate = load * 1750;
  lb_sim_run(s, 3 * SEC);
  lb_sim_reset_stats(s);
  lb_sim_run(s, 10 * SEC);
  char label[32];
  snprintf(label, sizeof label, "%s %.0f%%", ops->name, load * 100);
  lb_sim_print(s, label);
  return s;
}

static void split_by_capacity(void **state) {
  (void)state;
  const sluice__lb_ops *ops[] = {&sluice__lb_lcc, &sluice__lb_bcc};
  for (size_t k = 0; k < 2; k++) {
    for (uint64_t seed = 1; seed <= 3; seed++) {
      lb_sim *s = three(ops[k], 0.8, seed);
      /* 1000 : 500 : 250 offered 80 %: about 800 : 400 : 200 per s. */
      assert_true(s->dest[0].sent > 1.5 * s->dest[1].sent);
      assert_true(s->dest[1].sent > 1.5 * s->dest[2].sent);
      assert_true(s->dest[2].sent > 1000); /* used, not starved */
      /* Nobody is pushed past capacity; nothing is dropped. */
      assert_true(s->dest[2].sent < 10 * 250 * 0.95);
      assert_int_equal(s->dropped[SLUICE__LB_OVER_LIMIT], 0);
      assert_true(s->ok > s->offered * 0.99);
      assert_true(sluice__histogram_percentile(&s->lat_us, 99) < 100000);
      lb_sim_free(s);
    }
  }
  /* rr, for contrast, pushes the 250 one past its capacity. */
  lb_sim *s = three(&sluice__lb_rr, 0.8, 1);
  assert_true(s->dest[2].sent > s->dest[2].ok * 1.5);
  lb_sim_free(s);
}

static void overload_drops_early(void **state) {
  (void)state;
  lb_sim *rr = three(&sluice__lb_rr, 2.0, 5);
  uint64_t rr_p99 = sluice__histogram_percentile(&rr->lat_us, 99);
  assert_int_equal(rr->dropped[SLUICE__LB_OVER_LIMIT], 0);
  const sluice__lb_ops *ops[] = {&sluice__lb_lcc, &sluice__lb_bcc};
  for (size_t k = 0; k < 2; k++) {
    lb_sim *s = three(ops[k], 2.0, 5);
    uint64_t p99 = sluice__histogram_percentile(&s->lat_us, 99);
    printf("  %s p99 %.1f ms vs rr %.1f ms; dropped over limit %llu of "
           "%llu\n",
           ops[k]->name, p99 / 1e3, rr_p99 / 1e3,
           (unsigned long long)s->dropped[SLUICE__LB_OVER_LIMIT],
           (unsigned long long)s->offered);
    /* Half the offered load cannot be served: it is dropped at once. */
    assert_true(s->dropped[SLUICE__LB_OVER_LIMIT] > s->offered / 3);
    /* What is accepted is served at about full capacity ... */
    assert_true(s->ok > 0.9 * 1750 * 10);
    assert_true(s->ok > 0.95 * rr->ok); /* rr keeps everyone busy too */
    /* ... and fast: the accepted calls' p99 stays a small multiple of the
     * slowest service time (32 ms) while rr's queues grow for seconds. */
    assert_true(p99 < rr_p99 / 10);
    assert_true(p99 < 250000);
    /* Still split by capacity. */
    assert_true(s->dest[0].ok > 1.5 * s->dest[1].ok);
    assert_true(s->dest[1].ok > 1.5 * s->dest[2].ok);
    lb_sim_free(s);
  }
  lb_sim_free(rr);
}

/* One destination of 100 calls/s (8 workers, 80 ms a call), a flow without
 * deadline at half its capacity and a flow whose 30 ms deadline no call can
 * meet: the latter are refused at once with DEADLINE, not sent to time out;
 * calls with a 500 ms deadline go through. */
static void deadline_refusal(void **state) {
  (void)state;
  const sluice__lb_ops *ops[] = {&sluice__lb_lcc, &sluice__lb_bcc};
  for (size_t k = 0; k < 2; k++) {
    lb_sim *s = lb_sim_new(ops[k], NULL, 1, 9);
    lb_sim_dest_set(s, 0, 100, 8);
    s->flow[0].rate = 50;
    s->flow[1].rate = 20;
    s->flow[1].deadline_ns = 30 * MS;
    s->flow[2].rate = 20;
    s->flow[2].deadline_ns = 500 * MS;
    lb_sim_run(s, 2 * SEC);
    lb_sim_reset_stats(s);
    lb_sim_run(s, 10 * SEC);
    lb_sim_print(s, ops[k]->name);
    printf("  %s: 30 ms flow: offered %llu refused DEADLINE %llu, sent "
           "and timed out %llu; 500 ms flow: ok %llu of %llu\n",
           ops[k]->name, (unsigned long long)s->flow[1].offered,
           (unsigned long long)s->flow[1].dropped[SLUICE__LB_DEADLINE],
           (unsigned long long)s->flow[1].deadline,
           (unsigned long long)s->flow[2].ok,
           (unsigned long long)s->flow[2].offered);
    /* All refused up front, except the odd one that found the
     * destination idle: that one is sent as a probe (and may time out). */
    assert_true(s->flow[1].dropped[SLUICE__LB_DEADLINE] + 5 >=
                s->flow[1].offered);
    assert_true(s->flow[1].deadline <= 5);
    assert_int_equal(s->flow[2].dropped[SLUICE__LB_DEADLINE], 0);
    assert_int_equal(s->flow[2].deadline, 0);
    assert_true(s->flow[2].ok >= s->flow[2].offered - 3);
    assert_true(s->flow[0].ok >= s->flow[0].offered - 5);
    lb_sim_free(s);
  }
  /* rr does not look: the same calls are sent and time out. */
  lb_sim *s = lb_sim_new(&sluice__lb_rr, NULL, 1, 9);
  lb_sim_dest_set(s, 0, 100, 8);
  s->flow[1].rate = 20;
  s->flow[1].deadline_ns = 30 * MS;
  lb_sim_run(s, 5 * SEC);
  assert_int_equal(s->flow[1].dropped[SLUICE__LB_DEADLINE], 0);
  assert_true(s->flow[1].deadline > 0.9 * s->flow[1].offered);
  lb_sim_free(s);
}

/* One destination, 8 workers; path 0 takes 1 ms a call, path 1 (cost 10)
 * 10 ms. Path 1 is offered 2000 calls/s, 2.5x what the destination could
 * serve of it alone; path 0 500 calls/s. With the path share (0.5), path 0
 * keeps flowing; with the share at 1 (no partition) it is crowded out:
 * the slow path fills the limit, and each limit cut its queueing causes
 * refuses fast calls too. */
static lb_sim *two_paths(const sluice__lb_ops *ops, double share) {
  sluice__lb_config cfg;
  sluice__lb_config_default(&cfg);
  cfg.path_share = share;
  lb_sim *s = lb_sim_new(ops, &cfg, 1, 11);
  lb_sim_dest_set(s, 0, 8000, 8);
  s->dest[0].path_cost[1] = 10;
  s->flow[0].rate = 500;
  s->flow[0].path_id = 0;
  s->flow[1].rate = 2000;
  s->flow[1].path_id = 1;
  lb_sim_run(s, 3 * SEC);
  lb_sim_reset_stats(s);
  lb_sim_run(s, 10 * SEC);
  return s;
}

static void slow_path_cannot_starve_fast(void **state) {
  (void)state;
  const sluice__lb_ops *ops[] = {&sluice__lb_lcc, &sluice__lb_bcc};
  for (size_t k = 0; k < 2; k++) {
    lb_sim *s = two_paths(ops[k], 0.5);
    lb_sim *flat = two_paths(ops[k], 1.0);
    const lb_sim_flow *fast = &s->flow[0], *slow = &s->flow[1];
    printf("  %s share 0.5: fast ok %llu of %llu (p99 %.1f ms), slow ok "
           "%llu of %llu, path-limit drops %llu; share 1: fast ok %llu of "
           "%llu (p99 %.1f ms)\n",
           ops[k]->name, (unsigned long long)fast->ok,
           (unsigned long long)fast->offered,
           sluice__histogram_percentile(&fast->lat_us, 99) / 1e3,
           (unsigned long long)slow->ok, (unsigned long long)slow->offered,
           (unsigned long long)s->dropped[SLUICE__LB_PATH_LIMIT],
           (unsigned long long)flat->flow[0].ok,
           (unsigned long long)flat->flow[0].offered,
           sluice__histogram_percentile(&flat->flow[0].lat_us, 99) / 1e3);
    assert_true(fast->ok > 0.97 * fast->offered);
    assert_true(slow->dropped[SLUICE__LB_PATH_LIMIT] > 0);
    assert_true(slow->ok > 0.3 * 800 * 10); /* the slow path still flows */
    assert_true(flat->flow[0].ok < 0.7 * flat->flow[0].offered);
    lb_sim_free(s);
    lb_sim_free(flat);
  }
}

/* One destination of 16 workers, 10 ms a call (1600 calls/s) offered
 * 3200 calls/s; then half the workers go (800 calls/s): the measured limit
 * drops with the capacity, and comes back when the workers return. */
static void limit_follows_capacity(void **state) {
  (void)state;
  lb_sim *s = lb_sim_new(&sluice__lb_lcc, NULL, 1, 13);
  lb_sim_dest_set(s, 0, 1600, 16);
  s->flow[0].rate = 3200;
  double before = 0, after = 0, again = 0;
  lb_sim_run(s, 3 * SEC);
  for (int i = 0; i < 50; i++) { /* average: the limit oscillates */
    lb_sim_run(s, 20 * MS);
    before += s->lbd[0]->est.limit / 50;
  }
  lb_sim_reset_stats(s);
  lb_sim_dest_set(s, 0, 800, 8); /* same 10 ms per call, half the workers */
  lb_sim_run(s, 3 * SEC);
  for (int i = 0; i < 50; i++) {
    lb_sim_run(s, 20 * MS);
    after += s->lbd[0]->est.limit / 50;
  }
  uint64_t ok_half = s->ok;
  lb_sim_dest_set(s, 0, 1600, 16);
  lb_sim_run(s, 3 * SEC);
  for (int i = 0; i < 50; i++) {
    lb_sim_run(s, 20 * MS);
    again += s->lbd[0]->est.limit / 50;
  }
  printf("  limit: %.1f at 16 workers, %.1f at 8, %.1f at 16 again; "
         "%llu ok in 4 s at 800/s\n",
         before, after, again, (unsigned long long)ok_half);
  assert_true(before > 16 && before < 64);
  assert_true(after < 0.75 * before);
  assert_true(after > 6);
  assert_true(again > 1.3 * after);
  assert_true(ok_half > 0.9 * 800 * 4);
  lb_sim_free(s);
}

/* A destination that goes down is avoided; its in-flight calls fail
 * UNAVAILABLE; it is used again when it comes back. */
static void dest_down_and_back(void **state) {
  (void)state;
  const sluice__lb_ops *ops[] = {&sluice__lb_rr, &sluice__lb_lcc,
                                 &sluice__lb_bcc};
  for (size_t k = 0; k < 3; k++) {
    lb_sim *s = lb_sim_new(ops[k], NULL, 3, 17);
    s->flow[0].rate = 1500;
    lb_sim_run(s, 2 * SEC);
    lb_sim_reset_stats(s);
    lb_sim_set_down(s, 1, 1);
    assert_true(s->dest[1].unavailable > 0); /* its in-flight calls */
    lb_sim_run(s, 2 * SEC);
    assert_int_equal(s->dest[1].sent, 0);
    assert_true(s->ok > 0.95 * s->offered);
    lb_sim_set_down(s, 1, 0);
    lb_sim_reset_stats(s);
    lb_sim_run(s, 2 * SEC);
    assert_true(s->dest[1].sent > 500);
    lb_sim_free(s);
  }
}

/* A destination that stays usable but fails every call at once (a server
 * refusing or shedding everything) has almost nothing in flight; it must
 * not look like the idlest one and draw the traffic. Its overload
 * statuses cut its limit, and lcc/bcc rank by in-flight per limit. */
static void fail_fast_destination_avoided(void **state) {
  (void)state;
  const sluice__lb_ops *ops[] = {&sluice__lb_lcc, &sluice__lb_bcc};
  for (size_t k = 0; k < 2; k++) {
    lb_sim *s = lb_sim_new(ops[k], NULL, 3, 3);
    s->flow[0].rate = 1500;
    lb_sim_run(s, 2 * SEC);
    s->dest[1].down_usable = 1;
    lb_sim_set_down(s, 1, 1);
    lb_sim_reset_stats(s);
    lb_sim_run(s, 5 * SEC);
    printf("  %s: failing destination got %llu of %llu calls\n", ops[k]->name,
           (unsigned long long)s->dest[1].sent, (unsigned long long)s->offered);
    assert_true(s->dest[1].sent < s->offered / 50);
    assert_true(s->ok > 0.98 * s->offered);
    lb_sim_free(s);
  }
}

/* Peer load: bcc steps its limit down when the peer says it is busy
 * (utilization > 0.9) although latency does not show it yet. */
static void bcc_peer_load(void **state) {
  (void)state;
  sluice__lb_config cfg;
  sluice__lb_config_default(&cfg);
  cfg.initial_limit = 10;
  fixture f;
  fx_init(&f, &sluice__lb_bcc, 1, &cfg);
  sluice__lb_dest *d = &f.d[0];
  uint64_t t = SEC;
  sluice__lb_call c = {0, 10, 0, 0, 0};
  /* In flight 10 of 10, latency flat: high, not congested -> probes up. */
  for (int i = 0; i < 10; i++)
    sluice__lb_sent(&f.lb, d, &c, t);
  assert_int_equal(d->state, 2);
  assert_string_equal(sluice__lb_bcc.state_name(d), "high");
  for (int i = 0; i < 20; i++) {
    t += 2 * MS;
    sluice__lb_complete(&f.lb, d, &c, MS, SLUICE_STATUS_OK, 0, t);
    sluice__lb_sent(&f.lb, d, &c, t);
  }
  double probed = d->limit;
  assert_true(probed > 10);
  /* The peer reports 95 % busy: steps down, once per round trip. */
  sluice__lb_peer_load busy = {0.95, 1000, 5, 10, -1};
  sluice__lb_peer_report(&f.lb, d, &busy, t);
  for (int i = 0; i < 20; i++) {
    t += 2 * MS;
    sluice__lb_complete(&f.lb, d, &c, MS, SLUICE_STATUS_OK, 0, t);
    sluice__lb_sent(&f.lb, d, &c, t);
    while (d->est.in_flight < d->limit * 0.95)
      sluice__lb_sent(&f.lb, d, &c, t);
  }
  assert_true(d->limit < probed * 0.5);
  /* Low for over a second: drifts to max(est.limit, 2 x in flight). */
  while (d->est.in_flight > 1) {
    t += MS;
    sluice__lb_complete(&f.lb, d, &c, MS, SLUICE_STATUS_OK, 0, t);
  }
  d->limit = 100; /* an old limit, far above the load */
  for (int i = 0; i < 300; i++) {
    t += 10 * MS;
    sluice__lb_sent(&f.lb, d, &c, t);
    sluice__lb_complete(&f.lb, d, &c, MS, SLUICE_STATUS_OK, 0, t);
  }
  assert_string_equal(sluice__lb_bcc.state_name(d), "low");
  assert_true(d->limit < 100 && d->limit > d->est.limit * 0.99);
  sluice__lb_free(&f.lb);
}

/* --- many destinations: sampled picks ------------------------------------ */

/* n destinations of capacities 1000 : 500 : 250 in turn, offered load x
 * their total; scan_max 0 = the exact scan. */
typedef struct many_result {
  double ok_share;  /* ok / offered */
  double p99_ms;    /* accepted calls */
  double split;     /* ok per 1000-destination / ok per 250-destination */
  uint64_t dropped; /* refused over limit */
  uint64_t ok;
} many_result;

static many_result many(const sluice__lb_ops *ops, size_t n, double load,
                        uint32_t scan_max) {
  sluice__lb_config cfg;
  sluice__lb_config_default(&cfg);
  cfg.scan_max = scan_max;
  lb_sim *s = lb_sim_new(ops, &cfg, n, 7);
  double total = 0;
  for (size_t i = 0; i < n; i++) {
    double cap = i % 3 == 0 ? 1000 : i % 3 == 1 ? 500 : 250;
    lb_sim_dest_set(s, i, cap, 8);
    total += cap;
  }
  s->flow[0].rate = load * total;
  lb_sim_run(s, 3 * SEC);
  lb_sim_reset_stats(s);
  lb_sim_run(s, 4 * SEC);
  many_result r;
  uint64_t ok_fast = 0, ok_slow = 0;
  for (size_t i = 0; i < n; i++) {
    if (i % 3 == 0)
      ok_fast += s->dest[i].ok;
    else if (i % 3 == 2)
      ok_slow += s->dest[i].ok;
  }
  r.ok = s->ok;
  r.ok_share = (double)s->ok / (double)s->offered;
  r.p99_ms = sluice__histogram_percentile(&s->lat_us, 99) / 1e3;
  r.split = ok_slow ? (double)ok_fast / (double)ok_slow : 0;
  r.dropped = s->dropped[SLUICE__LB_OVER_LIMIT];
  printf("  %s %zu destinations, %.0f%% load, %s: ok %.3f of offered, p99 "
         "%.1f ms, split 1000:250 %.2f, dropped %llu\n",
         ops->name, n, load * 100, scan_max ? "sampled" : "scan", r.ok_share,
         r.p99_ms, r.split, (unsigned long long)r.dropped);
  lb_sim_free(s);
  return r;
}

/* With more destinations than scan_max, lcc, bcc and btc sample two
 * (power of two choices) instead of scanning: the decisions must stay as
 * good as the exact scan's -- split by capacity, nothing dropped below
 * capacity, the same goodput and a comparable tail in overload. */
static void many_destinations_sampled(void **state) {
  (void)state;
  const sluice__lb_ops *ops[] = {&sluice__lb_lcc, &sluice__lb_bcc,
                                 &sluice__lb_btc};
  for (size_t k = 0; k < 3; k++) {
    many_result scan = many(ops[k], 60, 0.8, 0);
    many_result smp = many(ops[k], 60, 0.8, 16);
    assert_true(smp.ok_share > 0.99);
    assert_true(smp.split > 2.0); /* 4 by capacity */
    assert_true(smp.p99_ms < 2 * scan.p99_ms + 5);
    scan = many(ops[k], 60, 2.0, 0);
    smp = many(ops[k], 60, 2.0, 16);
    assert_true(smp.ok > 0.95 * scan.ok);
    assert_true(smp.dropped > 0);
    assert_true(smp.p99_ms < 2 * scan.p99_ms + 5);
  }
}

/* An overloaded channel of many destinations: once a scan found them all
 * at their limits, refusals cost O(1) until something changes. */
static void many_destinations_saturated(void **state) {
  (void)state;
  enum { N = 1000 };
  static sluice__lb_dest d[N];
  sluice__lb_dest *v[N];
  sluice__lb lb;
  sluice__lb_config cfg;
  sluice__lb_config_default(&cfg);
  cfg.initial_limit = 2;
  sluice__lb_init(&lb, &sluice__lb_lcc, &cfg);
  sluice__lb_call c = {0, 100, 0, 0, 0};
  for (size_t i = 0; i < N; i++) {
    sluice__lb_dest_init(&lb, &d[i], SEC);
    d[i].usable = 1;
    v[i] = &d[i];
  }
  assert_int_equal(sluice__lb_set_dests(&lb, v, N), 0);
  for (size_t i = 0; i < N; i++) {
    sluice__lb_sent(&lb, &d[i], &c, SEC);
    sluice__lb_sent(&lb, &d[i], &c, SEC);
  }
  size_t chosen = N;
  assert_int_equal(sluice__lb_pick(&lb, &c, SEC, &chosen),
                   SLUICE__LB_OVER_LIMIT);
  assert_true(lb.full_gen == lb.gen);
  /* Remembered, not scanned again: a change behind the balancer's back
   * (room made without any event it sees) is not noticed ... */
  d[321].est.in_flight = 0;
  assert_int_equal(sluice__lb_pick(&lb, &c, SEC, &chosen),
                   SLUICE__LB_OVER_LIMIT);
  /* ... until it is told (sluice__lb_dest_changed). */
  sluice__lb_dest_changed(&lb, &d[321]);
  assert_int_equal(sluice__lb_pick(&lb, &c, SEC, &chosen), SLUICE__LB_PICKED);
  assert_int_equal(chosen, 321);
  d[321].est.in_flight = 2;
  sluice__lb_dest_changed(&lb, &d[321]);
  assert_int_equal(sluice__lb_pick(&lb, &c, SEC, &chosen),
                   SLUICE__LB_OVER_LIMIT);
  /* One completion anywhere: the next pick finds that destination. */
  sluice__lb_complete(&lb, &d[777], &c, MS, SLUICE_STATUS_OK, 10, SEC + MS);
  assert_int_equal(sluice__lb_pick(&lb, &c, SEC + MS, &chosen),
                   SLUICE__LB_PICKED);
  assert_int_equal(chosen, 777);
  sluice__lb_sent(&lb, &d[777], &c, SEC + MS);
  sluice__lb_sent(&lb, &d[777], &c, SEC + MS); /* past its grown limit */
  assert_int_equal(sluice__lb_pick(&lb, &c, SEC + MS, &chosen),
                   SLUICE__LB_OVER_LIMIT);
  /* A destination restarted while down, then made usable by the channel
   * (sluice__lb_set_usable). */
  sluice__lb_set_usable(&lb, &d[5], 0);
  sluice__lb_dest_reset(&lb, &d[5], SEC);
  assert_int_equal(sluice__lb_pick(&lb, &c, SEC + MS, &chosen),
                   SLUICE__LB_OVER_LIMIT);
  sluice__lb_set_usable(&lb, &d[5], 1);
  assert_int_equal(sluice__lb_pick(&lb, &c, SEC + MS, &chosen),
                   SLUICE__LB_PICKED);
  assert_int_equal(chosen, 5);
  sluice__lb_free(&lb);
}

/* --- cost of a pick ------------------------------------------------------- */

#define COST_MAX 10000

static double pick_ns(const sluice__lb_ops *ops, size_t n) {
  static sluice__lb_dest d[COST_MAX];
  static sluice__lb_dest *v[COST_MAX];
  sluice__lb lb;
  sluice__lb_init(&lb, ops, NULL);
  sluice__lb_call c = {0, 100, SEC * 100, 0, 0};
  for (size_t i = 0; i < n; i++) {
    sluice__lb_dest_init(&lb, &d[i], SEC);
    d[i].usable = 1;
    v[i] = &d[i];
  }
  sluice__lb_set_dests(&lb, v, n);
  for (size_t i = 0; i < n; i++) {
    for (size_t k = 0; k < i % 7; k++)
      sluice__lb_sent(&lb, &d[i], &c, SEC);
    sluice__lb_complete(&lb, &d[i], &c, MS, SLUICE_STATUS_OK, 10, SEC + MS);
  }
  int iters = n > 10 ? 200000 : 2000000;
  struct timespec a, b;
  size_t sink = 0, chosen = 0;
  timespec_get(&a, TIME_UTC);
  for (int i = 0; i < iters; i++) {
    sluice__lb_pick(&lb, &c, SEC + 2 * MS, &chosen);
    sink += chosen;
  }
  timespec_get(&b, TIME_UTC);
  sluice__lb_free(&lb);
  double ns =
      ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) /
      iters;
  return sink == (size_t)-1 ? 0 : ns;
}

static void pick_cost(void **state) {
  (void)state;
  const sluice__lb_ops *ops[] = {&sluice__lb_rr, &sluice__lb_lcc,
                                 &sluice__lb_bcc, &sluice__lb_btc};
  for (size_t k = 0; k < 4; k++)
    printf("  pick cost %s: %.1f ns with 3 destinations, %.1f ns with 100, "
           "%.1f ns with 1000, %.1f ns with 10000 (not asserted)\n",
           ops[k]->name, pick_ns(ops[k], 3), pick_ns(ops[k], 100),
           pick_ns(ops[k], 1000), pick_ns(ops[k], 10000));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(find_by_name),
      cmocka_unit_test(rr_spreads_evenly),
      cmocka_unit_test(lcc_prefers_least_loaded),
      cmocka_unit_test(lcc_p2c),
      cmocka_unit_test(estimator_basics),
      cmocka_unit_test(estimator_rates),
      cmocka_unit_test(pressure_sample_and_note),
      cmocka_unit_test(records_follow_random_events),
      cmocka_unit_test(estimator_min_rtt_relearnt),
      cmocka_unit_test(estimator_gradient_limit),
      cmocka_unit_test(admission_limits_and_paths),
      cmocka_unit_test(admission_path_share),
      cmocka_unit_test(admission_deadline),
      cmocka_unit_test(split_by_capacity),
      cmocka_unit_test(overload_drops_early),
      cmocka_unit_test(deadline_refusal),
      cmocka_unit_test(slow_path_cannot_starve_fast),
      cmocka_unit_test(limit_follows_capacity),
      cmocka_unit_test(dest_down_and_back),
      cmocka_unit_test(fail_fast_destination_avoided),
      cmocka_unit_test(bcc_peer_load),
      cmocka_unit_test(many_destinations_sampled),
      cmocka_unit_test(many_destinations_saturated),
      cmocka_unit_test(pick_cost),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
