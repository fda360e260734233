/* The balancer's common part: configuration, strategy lookup, and the
 * wrappers the channel calls around a strategy (stats, estimators, drop
 * counting), plus the admission helpers every strategy shares.
 *
 * lb/ is clock-free, so pick() cannot time itself: the channel reads the
 * clock around sluice__lb_pick and fills stats.algo_ns_* / strat_ns_*. */
#include <string.h>

#include "lb/lb.h"

void sluice__lb_config_default(sluice__lb_config *c) {
  memset(c, 0, sizeof *c);
  c->initial_limit = 1000;
  c->min_limit = 1;
  c->max_limit = 10000;
  c->path_share = 0.5;
  c->window_ns = 100 * UINT64_C(1000000);
  c->min_rtt_reset_ns = 10 * UINT64_C(1000000000);
  c->tolerance = 1.5;
  c->smoothing = 0.2;
  c->bcc_low = 0.5;
  c->bcc_high = 0.9;
  c->btc_low = 0.5;
  c->btc_high = 0.9;
  c->btc_dwell_ns = 200 * UINT64_C(1000000);
  c->lcc_p2c = 0;
}

const sluice__lb_ops *sluice__lb_find(const char *name) {
  static const sluice__lb_ops *const all[] = {&sluice__lb_rr, &sluice__lb_lcc,
                                              &sluice__lb_bcc, &sluice__lb_btc};
  if (!name)
    return NULL;
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    if (strcmp(all[i]->name, name) == 0)
      return all[i];
  return NULL;
}

void sluice__lb_init(sluice__lb *lb, const sluice__lb_ops *ops,
                     const sluice__lb_config *cfg) {
  memset(lb, 0, sizeof *lb);
  lb->ops = ops;
  if (cfg)
    lb->cfg = *cfg;
  else
    sluice__lb_config_default(&lb->cfg);
  /* Fixed seed: runs are reproducible; p2c needs spread, not secrecy. */
  lb->rng = UINT64_C(0x9E3779B97F4A7C15);
}

void sluice__lb_dest_init(sluice__lb *lb, sluice__lb_dest *d, uint64_t now) {
  memset(d, 0, sizeof *d);
  sluice__lb_est_init(&d->est, &lb->cfg, now);
  sluice__histogram_init(&d->stats.latency);
  d->state_since_ns = now;
  d->last_action_ns = now;
  if (lb->ops->dest_init)
    lb->ops->dest_init(lb, d, now);
}

sluice__lb_verdict sluice__lb_pick(sluice__lb *lb,
                                   sluice__lb_dest *const *dests, size_t n,
                                   const sluice__lb_call *call, uint64_t now,
                                   size_t *chosen) {
  sluice__lb_verdict v =
      n ? lb->ops->pick(lb, dests, n, call, now, chosen) : SLUICE__LB_NONE;
  if (v != SLUICE__LB_PICKED && (unsigned)v < 5)
    lb->dropped[v]++;
  return v;
}

void sluice__lb_sent(sluice__lb *lb, sluice__lb_dest *d,
                     const sluice__lb_call *call, uint64_t now) {
  d->stats.sent++;
  sluice__lb_est_sent(&d->est, call, now);
  if (lb->ops->on_sent)
    lb->ops->on_sent(lb, d, call, now);
}

void sluice__lb_unsent(sluice__lb *lb, sluice__lb_dest *d,
                       const sluice__lb_call *call) {
  (void)lb;
  if (d->stats.sent)
    d->stats.sent--;
  if (d->est.in_flight)
    d->est.in_flight--;
  uint32_t p = call->path_id < SLUICE__LB_MAX_PATHS ? call->path_id
                                                    : SLUICE__LB_MAX_PATHS - 1;
  if (d->est.path_in_flight[p])
    d->est.path_in_flight[p]--;
}

/* Statuses that say the destination could not keep up: the limits back
 * off. Other failures (NOT_FOUND, INVALID_ARGUMENT ...) are the call's own
 * business and are measured like successes. */
static int is_overload(sluice_status_code code) {
  return code == SLUICE_STATUS_RESOURCE_EXHAUSTED ||
         code == SLUICE_STATUS_DEADLINE_EXCEEDED ||
         code == SLUICE_STATUS_UNAVAILABLE;
}

void sluice__lb_complete(sluice__lb *lb, sluice__lb_dest *d,
                         const sluice__lb_call *call, uint64_t latency_ns,
                         sluice_status_code code, uint32_t resp_size,
                         uint64_t now) {
  sluice__histogram_record(&d->stats.latency, latency_ns / 1000);
  if (code == SLUICE_STATUS_OK)
    d->stats.ok++;
  else
    d->stats.failed++;
  sluice__lb_est_done(&d->est, &lb->cfg, call, latency_ns, is_overload(code),
                      resp_size, now);
  if (lb->ops->on_complete)
    lb->ops->on_complete(lb, d, call, latency_ns, code, resp_size, now);
}

void sluice__lb_peer_report(sluice__lb *lb, sluice__lb_dest *d,
                            const sluice__lb_peer_load *l, uint64_t now) {
  sluice__lb_est_peer_load(&d->est, l, now);
  if (lb->ops->on_peer_load)
    lb->ops->on_peer_load(lb, d, l, now);
}

/* Why d cannot take call under its limits, or PICKED.
 *
 * The path share s = max(1, path_share x limit) applies only while another
 * path has calls in flight there: a single method may use the whole limit,
 * but a slow one cannot hold more than s against a fast one. Each path is
 * also guaranteed g = max(1, min(path_share, 1 - path_share) x limit), as
 * in Netflix's partitioned limiter: when the limit is reached (typically
 * because it was just cut, below what a slow path already holds), a path
 * holding less than g is still admitted, up to g above the limit; only the
 * paths over their part wait. (path_share 0.5: s = g = half the limit.)
 * Otherwise a slow method queueing at the destination would, through the
 * limit cuts its latency causes, shut out a fast one. */
static sluice__lb_verdict admit(const sluice__lb *lb, const sluice__lb_dest *d,
                                const sluice__lb_call *call) {
  double limit = d->limit;
  if (limit <= 0)
    return SLUICE__LB_PICKED;
  const sluice__lb_est *e = &d->est;
  uint32_t p = call->path_id < SLUICE__LB_MAX_PATHS ? call->path_id
                                                    : SLUICE__LB_MAX_PATHS - 1;
  double mine = e->path_in_flight[p], all = e->in_flight;
  int others = all > mine;
  double share = lb->cfg.path_share * limit;
  if (share < 1)
    share = 1;
  if (all >= limit) {
    double g =
        lb->cfg.path_share < 0.5 ? lb->cfg.path_share : 1 - lb->cfg.path_share;
    g *= limit;
    if (g < 1)
      g = 1;
    if (others && mine < g && all < limit + g)
      return SLUICE__LB_PICKED;
    return SLUICE__LB_OVER_LIMIT;
  }
  if (others && mine >= share)
    return SLUICE__LB_PATH_LIMIT;
  return SLUICE__LB_PICKED;
}

int sluice__lb_admits(const sluice__lb *lb, const sluice__lb_dest *d,
                      const sluice__lb_call *call) {
  return admit(lb, d, call) == SLUICE__LB_PICKED;
}

sluice__lb_verdict sluice__lb_check(const sluice__lb *lb,
                                    const sluice__lb_dest *d,
                                    const sluice__lb_call *call, uint64_t now) {
  sluice__lb_verdict v = admit(lb, d, call);
  if (v != SLUICE__LB_PICKED)
    return v;
  return sluice__lb_in_time(d, call, now) ? SLUICE__LB_PICKED
                                          : SLUICE__LB_DEADLINE;
}

size_t sluice__lb_rand(sluice__lb *lb, size_t n) {
  if (n == 0)
    return 0;
  uint64_t x = lb->rng ? lb->rng : UINT64_C(0x9E3779B97F4A7C15);
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  lb->rng = x;
  uint64_t r = x * UINT64_C(2685821657736338717);
  /* Multiply-shift instead of %: unbiased enough and no division. */
  return (size_t)(((r >> 32) * (uint64_t)(uint32_t)n) >> 32);
}
