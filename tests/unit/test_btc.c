/* btc (runtime/lb/btc.c) against simulated destinations (lb_sim.c) on a
 * deterministic clock: the FSM settles under load steps instead of
 * oscillating, traffic splits by capacity, overload is dropped early with
 * goodput kept near capacity, deadlines are refused up front; plus the
 * cost of a pick (printed, not asserted). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lb/lb.h"
#include "lb_sim.h"
#include "sluice/clock.h"

#define MS LB_SIM_MS
#define SEC LB_SIM_SEC

/* State changes of destination i within [from, to). */
/* |got - want| <= eps (cmocka 1.1 has no double compare). */
static void assert_near(double got, double want, double eps) {
  assert_true(got >= want - eps && got <= want + eps);
}

static size_t changes_between(const lb_sim *s, size_t i, uint64_t from,
                              uint64_t to) {
  const lb_sim_dest *d = &s->dest[i];
  size_t k = 0;
  for (size_t j = 0; j < d->n_states; j++)
    if (d->state_t[j] >= from && d->state_t[j] < to)
      k++;
  return k;
}

/* The states visited in [from, to) as "a b c" (the state at `from` first). */
static void states_between(const lb_sim *s, size_t i, uint64_t from,
                           uint64_t to, char *out, size_t cap) {
  const lb_sim_dest *d = &s->dest[i];
  int cur = 0;
  for (size_t j = 0; j < d->n_states && d->state_t[j] < from; j++)
    cur = d->state[j];
  size_t len = (size_t)snprintf(out, cap, "%d", cur);
  for (size_t j = 0; j < d->n_states; j++) {
    if (d->state_t[j] < from || d->state_t[j] >= to)
      continue;
    if (len + 8 >= cap) {
      snprintf(out + len, cap - len, " ...");
      return;
    }
    len += (size_t)snprintf(out + len, cap - len, " %d", d->state[j]);
  }
}

static double p99_ms(const sluice__histogram *h) {
  return (double)sluice__histogram_percentile(h, 99) / 1000.0;
}

/* ---------------------------------------------------------------------- */

typedef struct step_result {
  size_t changes; /* in the last 2 s */
  int state;      /* at the end */
  uint64_t offered, ok, dropped;
  double p99; /* ms, OK calls of the last 2 s */
  double limit;
} step_result;

/* One destination (1000 calls/s, 8 workers: 8 ms a call) through load
 * steps of 5 s each; the last 2 s of each step are measured. */
static void run_steps(lb_sim *s, const double *load, size_t nsteps,
                      step_result *out, const char *label) {
  for (size_t k = 0; k < nsteps; k++) {
    s->flow[0].rate = load[k] * s->dest[0].capacity;
    lb_sim_run(s, 3 * SEC);
    lb_sim_reset_stats(s);
    uint64_t from = s->now;
    lb_sim_run(s, 2 * SEC);
    step_result *r = &out[k];
    r->changes = changes_between(s, 0, from, s->now + 1);
    r->state = s->lbd[0]->state;
    r->offered = s->offered;
    r->ok = s->ok;
    r->dropped = s->dropped[SLUICE__LB_OVER_LIMIT] +
                 s->dropped[SLUICE__LB_PATH_LIMIT] +
                 s->dropped[SLUICE__LB_DEADLINE];
    r->p99 = p99_ms(&s->lat_us);
    r->limit = s->lbd[0]->limit;
    char seq[256];
    states_between(s, 0, from - 3 * SEC, s->now + 1, seq, sizeof seq);
    printf(
        "  %s %3.0f%%: states over the step %s; last 2 s: %zu "
        "changes, ends %s; limit %.1f est.limit %.1f; offered %llu ok "
        "%llu dropped %llu; p50 %.2f ms p99 %.2f ms\n",
        label, load[k] * 100, seq, r->changes, s->lb.ops->state_name(s->lbd[0]),
        r->limit, s->lbd[0]->est.limit, (unsigned long long)r->offered,
        (unsigned long long)r->ok, (unsigned long long)r->dropped,
        (double)sluice__histogram_percentile(&s->lat_us, 50) / 1000.0, r->p99);
  }
}

static void check_steps(const step_result *r) {
  /* No oscillation: at most 4 state changes in the last 2 s of a step. */
  for (size_t k = 0; k < 4; k++)
    assert_true(r[k].changes <= 4);
  /* 30 %: low throughput, a stable state, nothing dropped. */
  assert_int_equal(r[0].state / 3, 0);
  assert_true(r[0].state % 3 < 2);
  assert_int_equal(r[0].dropped, 0);
  /* 100 %: at capacity; most of it is served. */
  assert_true(r[1].ok >= r[1].offered * 85 / 100);
  /* 200 %: unstable (an axis high), the excess dropped early, the
   * admitted calls' latency bounded, goodput near capacity (2 s x 1000). */
  assert_true(r[2].state / 3 == 2 || r[2].state % 3 == 2);
  assert_true(r[2].dropped > 0);
  assert_true(r[2].dropped >= r[2].offered * 40 / 100);
  assert_true(r[2].p99 <= 3 * r[0].p99);
  assert_true(r[2].ok >= 1700);
  /* back to 30 %: low throughput again, stable, (almost) nothing dropped. */
  assert_int_equal(r[3].state / 3, 0);
  assert_true(r[3].state % 3 < 2);
  assert_true(r[3].dropped <= r[3].offered / 1000);
}

static void load_steps(void **state) {
  (void)state;
  static const double load[4] = {0.3, 1.0, 2.0, 0.3};
  for (uint64_t seed = 1; seed <= 3; seed++) {
    lb_sim *s = lb_sim_new(&sluice__lb_btc, NULL, 1, seed);
    step_result r[4];
    char label[32];
    snprintf(label, sizeof label, "steps seed %llu", (unsigned long long)seed);
    run_steps(s, load, 4, r, label);
    check_steps(r);
    lb_sim_free(s);
  }
}

/* The same steps with constant arrivals and with the destination
 * reporting its utilization (then T is the peer's own measure). */
static void load_steps_variants(void **state) {
  (void)state;
  static const double load[4] = {0.3, 1.0, 2.0, 0.3};
  lb_sim *s = lb_sim_new(&sluice__lb_btc, NULL, 1, 7);
  s->flow[0].constant = 1;
  step_result r[4];
  run_steps(s, load, 4, r, "constant");
  check_steps(r);
  lb_sim_free(s);

  s = lb_sim_new(&sluice__lb_btc, NULL, 1, 7);
  s->dest[0].report_load = 1;
  run_steps(s, load, 4, r, "peer report");
  for (size_t k = 0; k < 4; k++)
    assert_true(r[k].changes <= 4);
  assert_true(r[2].state / 3 == 2 || r[2].state % 3 == 2);
  assert_true(r[2].dropped > 0);
  assert_true(r[2].ok >= 1700);
  assert_true(r[3].dropped <= r[3].offered / 1000);
  lb_sim_free(s);
}

/* Long runs at a constant load: one state, or two adjacent ones rarely. */
static void settles(void **state) {
  (void)state;
  static const double load[] = {0.3, 0.6, 0.8, 0.95, 1.0, 1.2, 2.0, 4.0};
  for (size_t k = 0; k < sizeof load / sizeof load[0]; k++) {
    lb_sim *s = lb_sim_new(&sluice__lb_btc, NULL, 1, 11 + k);
    s->flow[0].rate = load[k] * 1000;
    lb_sim_run(s, 5 * SEC);
    lb_sim_reset_stats(s);
    uint64_t from = s->now;
    lb_sim_run(s, 10 * SEC);
    size_t ch = changes_between(s, 0, from, s->now + 1);
    char seq[256];
    states_between(s, 0, from, s->now + 1, seq, sizeof seq);
    printf("  settle %3.0f%%: last 10 s %zu changes (%s), ends %s, limit "
           "%.1f, ok %llu dropped %llu p99 %.2f ms\n",
           load[k] * 100, ch, seq, s->lb.ops->state_name(s->lbd[0]),
           s->lbd[0]->limit, (unsigned long long)s->ok,
           (unsigned long long)s->dropped[SLUICE__LB_OVER_LIMIT],
           p99_ms(&s->lat_us));
    assert_true(ch <= 10);
    lb_sim_free(s);
  }
}

/* ---------------------------------------------------------------------- */

static lb_sim *three(const sluice__lb_ops *ops, uint64_t seed) {
  lb_sim *s = lb_sim_new(ops, NULL, 3, seed);
  lb_sim_dest_set(s, 0, 1000, 8);
  lb_sim_dest_set(s, 1, 500, 8);
  lb_sim_dest_set(s, 2, 250, 8);
  return s;
}

static void split_by_capacity(void **state) {
  (void)state;
  lb_sim *s = three(&sluice__lb_btc, 5);
  s->flow[0].rate = 0.6 * 1750;
  lb_sim_run(s, 2 * SEC);
  lb_sim_reset_stats(s);
  lb_sim_run(s, 5 * SEC);
  lb_sim_print(s, "split 60%");
  double total = (double)(s->dest[0].sent + s->dest[1].sent + s->dest[2].sent);
  static const double share[3] = {1000.0 / 1750, 500.0 / 1750, 250.0 / 1750};
  for (size_t i = 0; i < 3; i++) {
    double got = (double)s->dest[i].sent / total;
    printf("  split 60%%: dest %zu share %.3f (capacity share %.3f)\n", i, got,
           share[i]);
    assert_true(got >= share[i] * 0.7 && got <= share[i] * 1.3);
  }
  assert_int_equal(s->dropped[SLUICE__LB_OVER_LIMIT], 0);
  lb_sim_free(s);
}

static void overload_goodput(void **state) {
  (void)state;
  double p99_60 = 0;
  {
    lb_sim *s = three(&sluice__lb_btc, 9);
    s->flow[0].rate = 0.6 * 1750;
    lb_sim_run(s, 2 * SEC);
    lb_sim_reset_stats(s);
    lb_sim_run(s, 5 * SEC);
    p99_60 = p99_ms(&s->lat_us);
    lb_sim_free(s);
  }
  lb_sim *s = three(&sluice__lb_btc, 9);
  s->flow[0].rate = 2 * 1750;
  lb_sim_run(s, 2 * SEC);
  lb_sim_reset_stats(s);
  lb_sim_run(s, 5 * SEC);
  lb_sim_print(s, "btc 2x");
  double goodput = (double)s->ok / 5;
  uint64_t dropped = s->dropped[SLUICE__LB_OVER_LIMIT];
  printf("  btc 2x: goodput %.0f/s = %.1f %% of capacity 1750/s; dropped "
         "%llu of %llu offered (%.1f %%); p99 %.2f ms (60 %% load: %.2f "
         "ms)\n",
         goodput, goodput / 17.5, (unsigned long long)dropped,
         (unsigned long long)s->offered, 100.0 * dropped / s->offered,
         p99_ms(&s->lat_us), p99_60);
  assert_true(goodput >= 0.85 * 1750);
  assert_true(dropped >= s->offered * 40 / 100); /* the excess, early */
  assert_int_equal(s->deadline, 0);
  assert_true(p99_ms(&s->lat_us) <= 3 * p99_60);
  for (size_t i = 0; i < 3; i++) /* every one held at its capacity */
    assert_true(s->lbd[i]->state / 3 == 2 || s->lbd[i]->state % 3 == 2);
  lb_sim_free(s);

  /* For comparison (not asserted): rr queues everything. */
  s = three(&sluice__lb_rr, 9);
  s->flow[0].rate = 2 * 1750;
  lb_sim_run(s, 2 * SEC);
  lb_sim_reset_stats(s);
  lb_sim_run(s, 5 * SEC);
  printf("  rr 2x: goodput %.0f/s, dropped %llu, p99 %.2f ms\n",
         (double)s->ok / 5,
         (unsigned long long)s->dropped[SLUICE__LB_OVER_LIMIT],
         p99_ms(&s->lat_us));
  lb_sim_free(s);
}

/* A destination that fails every call at once (a server answering
 * UNAVAILABLE) is marked saturated and avoided, probed about once per hold
 * time (1 s), and used again once it answers. */
static void down_and_back(void **state) {
  (void)state;
  lb_sim *s = lb_sim_new(&sluice__lb_btc, NULL, 2, 3);
  s->flow[0].rate = 600;
  lb_sim_run(s, 2 * SEC);
  s->dest[1].down_usable = 1;
  lb_sim_set_down(s, 1, 1);
  lb_sim_reset_stats(s);
  lb_sim_run(s, 5 * SEC);
  lb_sim_print(s, "dest 1 down");
  assert_true(s->dest[1].sent <= 10);
  assert_true(s->ok + s->unavailable >= s->offered - 10);
  lb_sim_set_down(s, 1, 0);
  lb_sim_run(s, 2 * SEC);
  lb_sim_reset_stats(s);
  lb_sim_run(s, 5 * SEC);
  lb_sim_print(s, "dest 1 back");
  assert_true(s->dest[1].sent >= s->offered / 4);
  assert_int_equal(s->dropped[SLUICE__LB_OVER_LIMIT], 0);
  lb_sim_free(s);
}

/* The destination's capacity changes under load: the limit follows it
 * without collapsing (slower: lat_min is stale until it is re-learnt) and
 * without holding the flow back for long (faster). */
static void capacity_change(void **state) {
  (void)state;
  lb_sim *s = lb_sim_new(&sluice__lb_btc, NULL, 1, 5);
  s->flow[0].rate = 1500; /* saturate: the capacity is learnt */
  lb_sim_run(s, 3 * SEC);
  s->flow[0].rate = 800;
  lb_sim_run(s, 3 * SEC);
  lb_sim_dest_set(s, 0, 500, 8); /* half as fast: now 160 % load */
  lb_sim_reset_stats(s);
  lb_sim_run(s, 5 * SEC);
  lb_sim_print(s, "halved");
  printf("  halved: goodput %.0f/s of 500/s, p99 %.2f ms (service 16 ms)\n",
         s->ok / 5.0, p99_ms(&s->lat_us));
  assert_true(s->ok >= 0.75 * 500 * 5);
  assert_true(p99_ms(&s->lat_us) <= 2.5 * 16);
  lb_sim_dest_set(s, 0, 2000, 8); /* 4x as fast: now 90 % load */
  s->flow[0].rate = 1800;
  lb_sim_reset_stats(s);
  lb_sim_run(s, 10 * SEC);
  lb_sim_print(s, "faster");
  printf("  faster: goodput %.0f/s of 1800/s offered, dropped %.1f %%\n",
         s->ok / 10.0, 100.0 * s->dropped[SLUICE__LB_OVER_LIMIT] / s->offered);
  assert_true(s->ok >= 0.9 * s->offered);
  lb_sim_free(s);
}

/* A call whose deadline is shorter than the destination's latency is
 * refused up front (DEADLINE), not sent to time out. */
static void deadline_refused(void **state) {
  (void)state;
  lb_sim *s = lb_sim_new(&sluice__lb_btc, NULL, 1, 3);
  s->flow[0].rate = 300; /* 8 ms a call */
  lb_sim_run(s, SEC);
  s->flow[1].rate = 100;
  s->flow[1].deadline_ns = 4 * MS;
  lb_sim_run(s, SEC);
  printf("  deadline: 4 ms calls offered %llu refused %llu timed out %llu\n",
         (unsigned long long)s->flow[1].offered,
         (unsigned long long)s->flow[1].dropped[SLUICE__LB_DEADLINE],
         (unsigned long long)s->flow[1].deadline);
  /* Refused up front, but for the few that found it idle (probes). */
  assert_true(s->flow[1].dropped[SLUICE__LB_DEADLINE] + 5 >=
              s->flow[1].offered);
  assert_int_equal(s->flow[0].dropped[SLUICE__LB_DEADLINE], 0);
  lb_sim_free(s);
}

static void names_and_verdicts(void **state) {
  (void)state;
  sluice__lb lb;
  sluice__lb_init(&lb, sluice__lb_find("btc"), NULL);
  assert_ptr_equal(lb.ops, &sluice__lb_btc);
  sluice__lb_dest d0, d1;
  sluice__lb_dest_init(&lb, &d0, 1);
  sluice__lb_dest_init(&lb, &d1, 1);
  assert_string_equal(lb.ops->state_name(&d0), "T-low/C-low");
  assert_true(d0.limit == lb.cfg.initial_limit);
  d0.state = 7;
  assert_string_equal(lb.ops->state_name(&d0), "T-high/C-mid");
  d0.state = 0;
  sluice__lb_dest *ds[2] = {&d0, &d1};
  assert_int_equal(sluice__lb_set_dests(&lb, ds, 2), 0);
  sluice__lb_call call = {0};
  size_t chosen = 9;
  /* nothing usable: NONE */
  assert_int_equal(sluice__lb_pick(&lb, &call, 2, &chosen), SLUICE__LB_NONE);
  sluice__lb_set_usable(&lb, &d0, 1);
  sluice__lb_set_usable(&lb, &d1, 1);
  /* unloaded: least in flight, ties round robin (like lcc) */
  assert_int_equal(sluice__lb_pick(&lb, &call, 2, &chosen), SLUICE__LB_PICKED);
  size_t first = chosen;
  assert_int_equal(sluice__lb_pick(&lb, &call, 2, &chosen), SLUICE__LB_PICKED);
  assert_true(chosen != first);
  sluice__lb_sent(&lb, &d0, &call, 3);
  assert_int_equal(sluice__lb_pick(&lb, &call, 3, &chosen), SLUICE__LB_PICKED);
  assert_int_equal(chosen, 1);
  /* a saturated destination is used only when it is the only choice */
  d1.state = 8;
  sluice__lb_dest_changed(&lb, &d1);
  assert_int_equal(sluice__lb_pick(&lb, &call, 3, &chosen), SLUICE__LB_PICKED);
  assert_int_equal(chosen, 0);
  d0.limit = 1; /* d0 full */
  sluice__lb_dest_changed(&lb, &d0);
  assert_int_equal(sluice__lb_pick(&lb, &call, 3, &chosen), SLUICE__LB_PICKED);
  assert_int_equal(chosen, 1);
  d1.limit = 1;
  sluice__lb_dest_changed(&lb, &d1);
  sluice__lb_sent(&lb, &d1, &call, 3);
  assert_int_equal(sluice__lb_pick(&lb, &call, 3, &chosen),
                   SLUICE__LB_OVER_LIMIT);
  sluice__lb_free(&lb);
}

/* A push-back passed on by an idle tier of a chain: the destination
 * reports itself far from busy and fails a call for overload because a
 * deeper tier refused it. It is not marked saturated and neither limit
 * moves; the same failure from a busy destination marks it at once and
 * cuts the gradient limit. */
static void chain_pushback(void **state) {
  (void)state;
  sluice__lb lb;
  sluice__lb_init(&lb, &sluice__lb_btc, NULL);
  sluice__lb_dest d;
  sluice__lb_dest_init(&lb, &d, 1);
  d.usable = 1;
  sluice__lb_call call = {0};
  uint64_t t = SEC;
  for (int i = 0; i < 20; i++, t += MS) { /* measured: 5 ms a call */
    sluice__lb_sent(&lb, &d, &call, t);
    sluice__lb_complete(&lb, &d, &call, 5 * MS, SLUICE_STATUS_OK, 0,
                        t + 5 * MS);
  }
  sluice__lb_peer_load idle = {0.02, 100, 0, 0, -1};
  sluice__lb_peer_report(&lb, &d, &idle, t);
  double limit = d.limit, grad = d.est.limit;
  for (int i = 0; i < 20; i++, t += MS) {
    sluice__lb_sent(&lb, &d, &call, t);
    sluice__lb_complete(&lb, &d, &call, 2 * MS,
                        SLUICE_STATUS_RESOURCE_EXHAUSTED, 0, t + 2 * MS);
  }
  assert_string_equal(lb.ops->state_name(&d), "T-low/C-low");
  assert_true(d.limit == limit && d.est.limit == grad);
  sluice__lb_peer_load busy = {0.95, 100, 5, 10, -1};
  sluice__lb_peer_report(&lb, &d, &busy, t);
  sluice__lb_sent(&lb, &d, &call, t);
  sluice__lb_complete(&lb, &d, &call, 2 * MS, SLUICE_STATUS_RESOURCE_EXHAUSTED,
                      0, t + 2 * MS);
  assert_true(d.state / 3 == 2); /* T-high: saturated */
  assert_true(d.est.limit < grad);
}

/* Back-pressure through a chain: a destination that is itself idle (0.02)
 * but reports that the services behind it are at their limits (downstream
 * 0.95). At the edge of the chain that is its utilization: T-high, the
 * latency veto lifted. Inside the chain (lb.inner: the channel's calls
 * come from a server's handlers) it is only passed up: the destination
 * stays T-low, the veto holds, and the channel's own pressure sample
 * carries the downstream figure. Below SLUICE__LB_CHAIN_BUSY the veto
 * holds at the edge too. */
static void chain_edge(void **state) {
  (void)state;
  for (int inner = 0; inner <= 1; inner++) {
    sluice__lb lb;
    sluice__lb_init(&lb, &sluice__lb_btc, NULL);
    lb.inner = inner;
    sluice__lb_dest d;
    sluice__lb_dest_init(&lb, &d, 1);
    d.usable = 1;
    sluice__lb_dest *ds[] = {&d};
    assert_int_equal(sluice__lb_set_dests(&lb, ds, 1), 0);
    sluice__lb_call call = {0};
    uint64_t t = SEC;
    sluice__lb_peer_load mild = {0.02, 100, 0, 0, 0.6};
    sluice__lb_peer_report(&lb, &d, &mild, t);
    assert_true(sluice__lb_est_peer_idle(&d.est, t));
    sluice__lb_peer_load deep = {0.02, 100, 0, 0, 0.95};
    for (int i = 0; i < 30; i++, t += 20 * MS) {
      sluice__lb_peer_report(&lb, &d, &deep, t);
      sluice__lb_sent(&lb, &d, &call, t);
      sluice__lb_complete(&lb, &d, &call, 5 * MS, SLUICE_STATUS_OK, 0,
                          t + 5 * MS);
    }
    double busy = sluice__lb_peer_busy(&lb, &d.est);
    double sample = sluice__lb_pressure_sample(&lb, 0, t);
    if (inner) {
      assert_near(busy, 0.02, 1e-9);
      assert_true(sluice__lb_est_peer_idle(&d.est, t));
      assert_int_equal(d.state / 3, 0); /* T-low */
    } else {
      assert_near(busy, 0.95, 1e-9);
      assert_false(sluice__lb_est_peer_idle(&d.est, t));
      assert_int_equal(d.state / 3, 2); /* T-high: saturated */
    }
    /* Passed up either way (what a parent's server would report). */
    assert_true(sample >= 0.95 - 1e-9);
    /* A stale report is not passed up. */
    assert_near(
        sluice__lb_pressure_sample(&lb, 0, t + SLUICE__LB_PEER_FRESH_NS + MS),
        0, 1e-9);
    sluice__lb_free(&lb);
  }
}

/* ---------------------------------------------------------------------- */

static uint64_t wall_ns(void) { return sluice_now_ns(); }

/* ns per pick (and per pick + sent + complete) with n destinations of
 * varied load. Printed, not asserted: machines differ. */
static void pick_cost(size_t n) {
  sluice__lb lb;
  sluice__lb_init(&lb, &sluice__lb_btc, NULL);
  sluice__lb_dest *d = calloc(n, sizeof *d);
  sluice__lb_dest **ds = calloc(n, sizeof *ds);
  assert_non_null(d);
  assert_non_null(ds);
  uint64_t now = SEC;
  sluice__lb_call call = {.path_id = 0, .size = 4096, .deadline_ns = 0};
  for (size_t i = 0; i < n; i++) {
    sluice__lb_dest_init(&lb, &d[i], now);
    d[i].usable = 1;
    ds[i] = &d[i];
  }
  assert_int_equal(sluice__lb_set_dests(&lb, ds, n), 0);
  for (size_t i = 0; i < n; i++)
    for (size_t k = 0; k < i % 7; k++)
      sluice__lb_sent(&lb, &d[i], &call, now);
  const size_t iters = 1000000 / (n < 10 ? 1 : n / 10);
  size_t chosen = 0, sink = 0;
  uint64_t t0 = wall_ns();
  for (size_t k = 0; k < iters; k++) {
    sluice__lb_pick(&lb, &call, now, &chosen);
    sink += chosen;
  }
  uint64_t t1 = wall_ns();
  for (size_t k = 0; k < iters; k++) {
    now += 1000;
    if (sluice__lb_pick(&lb, &call, now, &chosen) == SLUICE__LB_PICKED) {
      sluice__lb_sent(&lb, ds[chosen], &call, now);
      sluice__lb_complete(&lb, ds[chosen], &call, 8 * MS, SLUICE_STATUS_OK,
                          4096, now);
    }
  }
  uint64_t t2 = wall_ns();
  printf("  cost: %3zu destinations: %.0f ns/pick, %.0f ns/pick+sent+"
         "complete (%zu)\n",
         n, (double)(t1 - t0) / iters, (double)(t2 - t1) / iters, sink % 2);
  sluice__lb_free(&lb);
  free(d);
  free(ds);
}

static void cost(void **state) {
  (void)state;
  pick_cost(3);
  pick_cost(100);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(names_and_verdicts),  cmocka_unit_test(load_steps),
      cmocka_unit_test(load_steps_variants), cmocka_unit_test(settles),
      cmocka_unit_test(split_by_capacity),   cmocka_unit_test(overload_goodput),
      cmocka_unit_test(down_and_back),       cmocka_unit_test(capacity_change),
      cmocka_unit_test(deadline_refused),    cmocka_unit_test(chain_pushback),
      cmocka_unit_test(chain_edge),          cmocka_unit_test(cost),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
