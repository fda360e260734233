/* The balancer's common part: configuration, strategy lookup, and the
 * wrappers the channel calls around a strategy (stats, estimators, drop
 * counting, outlier ejection), plus the admission helpers every strategy
 * shares.
 *
 * lb/ is clock-free, so pick() cannot time itself: the channel reads the
 * clock around sluice__lb_pick and fills stats.algo_ns_* / strat_ns_*.
 *
 * ## Outlier ejection
 *
 * A destination that fails every call at once has nothing in flight and
 * looks idlest to a least-loaded strategy: it draws most of the traffic
 * and a broken server of three fails most calls (a "black hole"). As
 * gRPC's outlier_detection and Envoy do, such a destination is ejected --
 * not picked -- for a while. It works around every strategy, rr too:
 *
 * What counts (outlier_class): UNAVAILABLE, INTERNAL, UNIMPLEMENTED,
 * UNKNOWN and DATA_LOSS are the destination's failures (Envoy's 5xx, the
 * gateway's 504 aside). OK and the codes by which a server answers about
 * the call itself (NOT_FOUND, INVALID_ARGUMENT, PERMISSION_DENIED ...) are
 * successes: it works. Not counted at all: RESOURCE_EXHAUSTED (a server
 * shedding load is back-pressure; the limits of lcc/bcc/btc already back
 * off on it, and ejecting shedding servers would push their load onto the
 * others), DEADLINE_EXCEEDED and CANCELLED (the call's own budget, or the
 * caller's choice; a server too slow for its calls holds them in flight
 * and least-loaded strategies avoid it anyway).
 *
 * Detectors, on each completion (O(1), complete()): eject_consecutive (5)
 * failures in a row; or failures at least eject_ratio (0.85) of the calls
 * counted over the current and previous window (eject_window_ns, 1 s;
 * tumbling), once there are eject_min_calls (20) of them -- a destination
 * failing 90 % of its calls, interleaved with successes, is caught even
 * when its failures never come 5 in a row. Completions while the
 * destination is ejected are not counted (they were sent before).
 *
 * A detector that fires decides at once, in that completion (O(1) but for
 * the relative test's search, below):
 * - the percentage, as gRPC counts it: ejected only while fewer than
 *   eject_max_percent (50) of the table's destinations are ejected
 *   (100 x ejected / n < 50 %: 1 of 2, 2 of 3 or 4, 3 of 5 or 6), and
 *   never the last one (a channel of one destination ejects nothing);
 * - relatively: another usable destination must fail at most half as
 *   often (its failure share over its last 1-2 windows, any number of
 *   calls) -- when every destination fails alike (a shared database is
 *   down) ejecting some would only pile the traffic onto the others, and
 *   keep them ejected for seconds after the recovery. The search for one
 *   starts after the destination and stops at the first found: O(1) while
 *   most destinations are healthy, O(n) per such failure only when most
 *   fail (a pass per pick did the same before, for every pick).
 * Refused, nothing is kept: the next failure decides again.
 *
 * Ejected: not picked until now + eject_base_ns x level (1 s, 2 s ...,
 * at most max(base, eject_max_ns), 30 s), level = its ejections not yet
 * forgiven, one forgiven per eject_decay_ns (10 s) since the previous
 * ejection ended. Its counts start again from zero. When it ends (seen by
 * the next pick or completion, from a heap of the ends: O(1) while none
 * ends) the destination starts afresh, as a reconnected one does
 * (restart(): measurements, limits and strategy state; not its stats nor
 * its calls in flight), and is picked like the others -- nothing probes it
 * meanwhile, as in gRPC. Still failing, it is ejected again after as many
 * failures, for longer.
 *
 * pick(): the strategy leaves the ejected destinations out
 * (sluice__lb_candidate, from their compact records; a sampled pick
 * draws again) -- unless every usable destination is ejected: then it
 * chooses among them all, so that ejection never makes a call fail with
 * "no destination" -- it fails, if
 * it must, with the destination's own status. */
#include <stdlib.h>
#include <string.h>

#include "lb/lb.h"
#include "lb/lb_table.h"

void sluice__lb_config_default(sluice__lb_config *c) {
  memset(c, 0, sizeof *c);
  c->initial_limit = 1000;
  c->min_limit = 1;
  c->max_limit = 10000;
  c->path_share = 0.5;
  c->window_ns = 100 * UINT64_C(1000000);
  c->min_rtt_reset_ns = 10 * UINT64_C(1000000000);
  c->tolerance = 1.5;
  c->latency_slack_ns = UINT64_C(1000000);
  c->smoothing = 0.2;
  c->bcc_low = 0.5;
  c->bcc_high = 0.9;
  c->btc_low = 0.5;
  c->btc_high = 0.9;
  c->btc_dwell_ns = 200 * UINT64_C(1000000);
  c->lcc_p2c = 0;
  c->scan_max = 16;
  c->eject_consecutive = 5;
  c->eject_ratio = 0.85;
  c->eject_min_calls = 20;
  c->eject_window_ns = UINT64_C(1000000000);
  c->eject_base_ns = UINT64_C(1000000000);
  c->eject_max_ns = 30 * UINT64_C(1000000000);
  c->eject_decay_ns = 10 * UINT64_C(1000000000);
  c->eject_max_percent = 50;
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
  lb->pressure = -1;
  lb->gen = 1;
}

void sluice__lb_dest_init(sluice__lb *lb, sluice__lb_dest *d, uint64_t now) {
  memset(d, 0, sizeof *d);
  d->slot = SLUICE__LB_NO_SLOT;
  sluice__lb_est_init(&d->est, &lb->cfg, now);
  sluice__histogram_init(&d->stats.latency);
  d->state_since_ns = now;
  d->last_action_ns = now;
  if (lb->ops->dest_init)
    lb->ops->dest_init(lb, d, now);
  lb->gen++;
}

void sluice__lb_dest_reset(sluice__lb *lb, sluice__lb_dest *d, uint64_t now) {
  sluice__lb_stats keep = d->stats;
  int usable = d->usable;
  uint32_t slot = d->slot;
  sluice__lb_dest_init(lb, d, now);
  d->stats = keep;
  d->usable = usable;
  d->slot = slot;
  sluice__lb_sync(lb, d, SLUICE__LB_SYNC_ALL);
}

/* --- outlier ejection (see the top comment) ------------------------------ */

#define EJECT_RELATIVE                                                         \
  0.5                        /* another destination fails at most this         \
                                share of d's failure rate */
#define EJECT_LEVEL_MAX 1024 /* level saturates (the duration did long ago) */

int sluice__lb_ejected(const sluice__lb_dest *d, uint64_t now) {
  return now < d->stats.outlier.ejected_until_ns;
}

/* 1: the destination failed; 0: it answered; -1: says nothing about it. */
static int outlier_class(sluice_status_code code) {
  switch (code) {
  case SLUICE_STATUS_UNAVAILABLE:
  case SLUICE_STATUS_INTERNAL:
  case SLUICE_STATUS_UNIMPLEMENTED:
  case SLUICE_STATUS_UNKNOWN:
  case SLUICE_STATUS_DATA_LOSS:
    return 1;
  case SLUICE_STATUS_RESOURCE_EXHAUSTED:
  case SLUICE_STATUS_DEADLINE_EXCEEDED:
  case SLUICE_STATUS_CANCELLED:
    return -1;
  default:
    return 0;
  }
}

static uint64_t eject_window(const sluice__lb_config *cfg) {
  return cfg->eject_window_ns ? cfg->eject_window_ns : UINT64_C(1000000000);
}

/* Calls counted and failed over the current and previous window as seen
 * at now (windows that ended long ago count nothing). */
static void outlier_counts(const sluice__lb_outlier *o,
                           const sluice__lb_config *cfg, uint64_t now,
                           uint64_t *calls, uint64_t *failed) {
  uint64_t w = eject_window(cfg), age = now - o->win_start_ns;
  *calls = *failed = 0;
  if (now < o->win_start_ns || age < w) {
    *calls = (uint64_t)o->win_calls + o->prev_calls;
    *failed = (uint64_t)o->win_failed + o->prev_failed;
  } else if (age < 2 * w) {
    *calls = o->win_calls;
    *failed = o->win_failed;
  }
}

/* Counts a completion at d; non-zero when a detector fired. */
static int outlier_record(sluice__lb *lb, sluice__lb_dest *d,
                          sluice_status_code code, uint64_t now) {
  const sluice__lb_config *cfg = &lb->cfg;
  sluice__lb_outlier *o = &d->stats.outlier;
  int k = outlier_class(code);
  if (!cfg->eject_max_percent || k < 0 || now < o->ejected_until_ns)
    return 0;
  uint64_t w = eject_window(cfg);
  if (now >= o->win_start_ns && now - o->win_start_ns >= w) {
    int adjacent = now - o->win_start_ns < 2 * w;
    o->prev_calls = adjacent ? o->win_calls : 0;
    o->prev_failed = adjacent ? o->win_failed : 0;
    o->win_calls = o->win_failed = 0;
    o->win_start_ns = now;
  }
  if (o->win_calls < UINT32_MAX)
    o->win_calls++;
  if (!k) {
    o->consecutive = 0;
    return 0;
  }
  if (o->win_failed < UINT32_MAX)
    o->win_failed++;
  if (o->consecutive < UINT32_MAX)
    o->consecutive++;
  uint64_t calls = (uint64_t)o->win_calls + o->prev_calls;
  uint64_t failed = (uint64_t)o->win_failed + o->prev_failed;
  uint64_t min = cfg->eject_min_calls ? cfg->eject_min_calls : 1;
  return (cfg->eject_consecutive && o->consecutive >= cfg->eject_consecutive) ||
         (cfg->eject_ratio > 0 && calls >= min &&
          (double)failed >= cfg->eject_ratio * (double)calls);
}

/* May the table's destination i (a detector fired, not ejected) be
 * ejected? The others are searched from i + 1 on for one that fails at
 * most half as often, up to the first found. */
static int may_eject(const sluice__lb *lb, size_t i, uint64_t now) {
  const sluice__lb_config *cfg = &lb->cfg;
  size_t n = lb->n, ejected = lb->n_ejected;
  if (ejected + 1 >= n ||
      100 * (double)ejected >= (double)cfg->eject_max_percent * (double)n)
    return 0;
  uint64_t calls, failed;
  outlier_counts(&lb->dests[i]->stats.outlier, cfg, now, &calls, &failed);
  double bar = EJECT_RELATIVE * (calls ? (double)failed / (double)calls : 1);
  for (size_t k = 1, j = i; k < n; k++) {
    j = j + 1 < n ? j + 1 : 0;
    const sluice__lb_hot *h = &lb->hot[j];
    if (!h->usable || h->ejected)
      continue;
    uint64_t oc, of;
    outlier_counts(&lb->dests[j]->stats.outlier, cfg, now, &oc, &of);
    if (oc && (double)of <= bar * (double)oc)
      return 1;
  }
  return 0;
}

/* d's ejection is over: as a reconnected destination does
 * (client/dest.c), it starts afresh -- measurements, limits, strategy
 * state -- keeping its stats (and outlier state) and the calls still in
 * flight there. Otherwise what its failures left behind would keep it out
 * once repaired: limits cut to the minimum by UNAVAILABLE (lcc and bcc
 * rank it last for good, as nothing is sent there to raise them again), a
 * 1 ns latency minimum from calls failed at once (every real latency then
 * looks like queueing). Still broken, it is ejected again after as many
 * failures as the first time. */
static void restart(sluice__lb *lb, sluice__lb_dest *d, uint64_t now) {
  uint32_t in_flight = d->est.in_flight;
  uint32_t path[SLUICE__LB_MAX_PATHS];
  memcpy(path, d->est.path_in_flight, sizeof path);
  sluice__lb_est_init(&d->est, &lb->cfg, now);
  d->est.in_flight = in_flight;
  memcpy(d->est.path_in_flight, path, sizeof path);
  /* The fields sluice__lb_dest_init clears, but usable and stats. */
  d->limit = 0;
  d->cap = 0;
  d->rate_avg = 0;
  d->util_avg = 0;
  d->state = 0;
  d->state_since_ns = now;
  d->last_action_ns = now;
  if (lb->ops->dest_init)
    lb->ops->dest_init(lb, d, now);
  lb->gen++;
  sluice__lb_sync(lb, d, SLUICE__LB_SYNC_ALL);
}

static void eject(sluice__lb *lb, sluice__lb_dest *d, uint64_t now) {
  const sluice__lb_config *cfg = &lb->cfg;
  sluice__lb_outlier *o = &d->stats.outlier;
  if (o->level && cfg->eject_decay_ns && now > o->ejected_until_ns) {
    uint64_t forgiven = (now - o->ejected_until_ns) / cfg->eject_decay_ns;
    o->level = forgiven < o->level ? o->level - (uint32_t)forgiven : 0;
  }
  if (o->level < EJECT_LEVEL_MAX)
    o->level++;
  uint64_t base = cfg->eject_base_ns;
  uint64_t max = cfg->eject_max_ns > base ? cfg->eject_max_ns : base;
  uint64_t dur = base && o->level > max / base ? max : base * o->level;
  o->ejected_until_ns = now + dur;
  o->ejected = 1;
  o->ejections++;
  o->consecutive = 0;
  o->win_calls = o->win_failed = o->prev_calls = o->prev_failed = 0;
  o->win_start_ns = now;
  lb->gen++;
  sluice__lb_sync(lb, d, SLUICE__LB_SYNC_NO_PATH);
  uint32_t i = sluice__lb_slot(lb, d);
  if (i != SLUICE__LB_NO_SLOT)
    sluice__lb_eject_push(lb, o->ejected_until_ns, i);
}

/* Restarts the destinations whose ejection is over at now (the heap's
 * top: one test while none is). */
static void end_ejections(sluice__lb *lb, uint64_t now) {
  while (lb->eject_n && lb->eject_heap[0].until_ns <= now) {
    struct sluice__lb_eject_end e = lb->eject_heap[0];
    sluice__lb_eject_pop(lb);
    sluice__lb_dest *d = lb->dests[e.slot];
    sluice__lb_outlier *o = &d->stats.outlier;
    if (o->ejected && o->ejected_until_ns == e.until_ns) {
      o->ejected = 0;
      restart(lb, d, now);
    }
  }
}

sluice__lb_verdict sluice__lb_pick(sluice__lb *lb, const sluice__lb_call *call,
                                   uint64_t now, size_t *chosen) {
  if (!lb->n)
    return SLUICE__LB_NONE;
  if (lb->eject_n && lb->eject_heap[0].until_ns <= now)
    end_ejections(lb, now);
  return lb->ops->pick(lb, call, now, chosen);
}

void sluice__lb_sent(sluice__lb *lb, sluice__lb_dest *d,
                     const sluice__lb_call *call, uint64_t now) {
  lb->gen++;
  d->stats.sent++;
  sluice__lb_est_sent(&d->est, call, now);
  if (lb->ops->on_sent)
    lb->ops->on_sent(lb, d, call, now);
  sluice__lb_sync(lb, d, sluice__lb_path(call));
}

void sluice__lb_unsent(sluice__lb *lb, sluice__lb_dest *d,
                       const sluice__lb_call *call) {
  lb->gen++;
  if (d->stats.sent)
    d->stats.sent--;
  if (d->est.in_flight)
    d->est.in_flight--;
  uint32_t p = sluice__lb_path(call);
  if (d->est.path_in_flight[p])
    d->est.path_in_flight[p]--;
  sluice__lb_sync(lb, d, p);
}

/* How a status counts for the estimators (lb.h): statuses that say the
 * destination could not keep up back the limits off; a crash-like failure
 * or a cancellation is censored; other failures (NOT_FOUND,
 * INVALID_ARGUMENT ...) are the call's own business and are measured like
 * successes. */
static int est_outcome(sluice_status_code code) {
  switch (code) {
  case SLUICE_STATUS_RESOURCE_EXHAUSTED:
  case SLUICE_STATUS_DEADLINE_EXCEEDED:
  case SLUICE_STATUS_UNAVAILABLE:
    return SLUICE__LB_OVERLOAD;
  case SLUICE_STATUS_INTERNAL:
  case SLUICE_STATUS_UNKNOWN:
  case SLUICE_STATUS_UNIMPLEMENTED:
  case SLUICE_STATUS_DATA_LOSS:
  case SLUICE_STATUS_CANCELLED:
    return SLUICE__LB_CENSORED;
  default:
    return SLUICE__LB_MEASURED;
  }
}

void sluice__lb_complete(sluice__lb *lb, sluice__lb_dest *d,
                         const sluice__lb_call *call, uint64_t latency_ns,
                         sluice_status_code code, uint32_t resp_size,
                         uint64_t now) {
  /* First the ends due (d's own may be one): a detector that fires below
   * decides on the destinations as they are now. */
  end_ejections(lb, now);
  lb->gen++;
  sluice__histogram_record(&d->stats.latency, latency_ns / 1000);
  if (code == SLUICE_STATUS_OK)
    d->stats.ok++;
  else
    d->stats.failed++;
  int fired = outlier_record(lb, d, code, now);
  uint64_t period = d->est.lat_min_since_ns;
  sluice__lb_est_done(&d->est, &lb->cfg, call, latency_ns, est_outcome(code),
                      resp_size, now);
  if (lb->ops->on_complete)
    lb->ops->on_complete(lb, d, call, latency_ns, code, resp_size, now);
  /* A new minimum period re-learnt every path's minimum at once. */
  sluice__lb_sync(lb, d,
                  d->est.lat_min_since_ns != period ? SLUICE__LB_SYNC_ALL
                                                    : sluice__lb_path(call));
  /* A detector fired: decided now (see the top comment). */
  uint32_t i = fired ? sluice__lb_slot(lb, d) : SLUICE__LB_NO_SLOT;
  if (i != SLUICE__LB_NO_SLOT && !sluice__lb_ejected(d, now) &&
      may_eject(lb, i, now))
    eject(lb, d, now);
}

void sluice__lb_peer_report(sluice__lb *lb, sluice__lb_dest *d,
                            const sluice__lb_peer_load *l, uint64_t now) {
  lb->gen++;
  sluice__lb_est_peer_load(&d->est, l, now);
  d->est.chain_busy = !lb->inner && l->downstream >= SLUICE__LB_CHAIN_BUSY;
  if (lb->ops->on_peer_load)
    lb->ops->on_peer_load(lb, d, l, now);
  sluice__lb_sync(lb, d, SLUICE__LB_SYNC_NO_PATH);
  uint32_t i = sluice__lb_slot(lb, d);
  if (i != SLUICE__LB_NO_SLOT && d->est.peer_down > 0) {
    /* Superseded and stale entries leave only from the top: rebuilt when
     * they are most of the heap (amortised O(1) per report). */
    if (lb->down_n >= 2 * lb->n + 64)
      sluice__lb_down_rebuild(lb);
    sluice__lb_down_push(lb, d->est.peer_down, d->est.peer_load_ns, i);
  }
}

double sluice__lb_peer_busy(const sluice__lb *lb, const sluice__lb_est *e) {
  /* At the edge of a chain a destination is as busy as the busiest tier
   * behind it. Inside the chain its downstream pressure is only passed up
   * (sluice__lb_pressure_sample): shedding there would throw away the
   * work the tiers above have done. */
  if (!lb->inner && e->peer_down > e->peer_util)
    return e->peer_down;
  return e->peer_util;
}

/* The pressure's time constant: decisions come at the call rate (a
 * thousand a second inside a busy chain), and a single burst should not
 * read as a bottleneck at its limit three tiers up. */
#define PRESSURE_TAU_NS (100 * UINT64_C(1000000))

void sluice__lb_pressure_note(sluice__lb *lb, double sample, uint64_t now) {
  if (sample < 0)
    sample = 0;
  if (sample > 1)
    sample = 1;
  if (lb->pressure < 0 || now <= lb->pressure_ns) {
    if (lb->pressure < 0)
      lb->pressure = sample;
    else /* same instant (or a clock step back): a small step */
      lb->pressure += 0.01 * (sample - lb->pressure);
  } else {
    uint64_t dt = now - lb->pressure_ns;
    double a = dt >= PRESSURE_TAU_NS ? 1 : (double)dt / PRESSURE_TAU_NS;
    lb->pressure += a * (sample - lb->pressure);
  }
  lb->pressure_ns = now;
}

/* A downstream report that still counts: its destination's latest, and
 * fresh. */
static int down_valid(const sluice__lb *lb, const struct sluice__lb_down *e,
                      uint64_t now) {
  const sluice__lb_est *est = &lb->dests[e->slot]->est;
  return est->peer_load_ns == e->ns && est->peer_down == e->down &&
         now - e->ns < SLUICE__LB_PEER_FRESH_NS;
}

/* The largest fresh downstream report of a usable destination, by a scan
 * (what the heap gives; its fallback). */
static double down_scan(const sluice__lb *lb, uint64_t now) {
  double down = 0;
  for (size_t i = 0; i < lb->n; i++) {
    const sluice__lb_est *e = &lb->dests[i]->est;
    if (lb->hot[i].usable && e->peer_down > down &&
        now - e->peer_load_ns < SLUICE__LB_PEER_FRESH_NS)
      down = e->peer_down;
  }
  return down;
}

/* Valid entries of destinations that are not usable, set aside while the
 * heap is searched under them; more than this: a scan. */
#define DOWN_ASIDE 8

double sluice__lb_pressure_sample(sluice__lb *lb, size_t waiting,
                                  uint64_t now) {
  double own = lb->p_limit > 0
                   ? ((double)waiting + (double)lb->p_in_flight) / lb->p_limit
                   : 0;
  double down = 0;
  if (lb->down_scan) {
    down = down_scan(lb, now);
  } else {
    struct sluice__lb_down aside[DOWN_ASIDE];
    size_t n_aside = 0;
    while (lb->down_n) {
      struct sluice__lb_down top = lb->down_heap[0];
      if (!down_valid(lb, &top, now)) {
        sluice__lb_down_pop(lb); /* superseded or stale: for good */
        continue;
      }
      if (lb->hot[top.slot].usable) {
        down = top.down;
        break;
      }
      if (n_aside == DOWN_ASIDE) {
        down = down_scan(lb, now);
        break;
      }
      aside[n_aside++] = top;
      sluice__lb_down_pop(lb);
    }
    for (size_t k = 0; k < n_aside; k++) /* room: they were just popped */
      sluice__lb_down_push(lb, aside[k].down, aside[k].ns, aside[k].slot);
  }
  return own > down ? own : down;
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
static sluice__lb_verdict admit(const sluice__lb *lb, const sluice__lb_hot *h,
                                const sluice__lb_hot_path *hp) {
  double limit = h->limit;
  if (limit <= 0)
    return SLUICE__LB_PICKED;
  double mine = hp->in_flight, all = h->in_flight;
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

/* The deadline check (sluice__lb_in_time) on the records. */
static int in_time(const sluice__lb_hot *h, const sluice__lb_hot_path *hp,
                   const sluice__lb_call *call, uint64_t now) {
  if (!call->deadline_ns)
    return 1;
  if (call->deadline_ns <= now)
    return 0;
  /* Refuse only on evidence: a few successful calls measured. */
  if (!h->evidence)
    return 1;
  uint64_t want;
  if (h->in_flight == 0) {
    /* Idle: nothing to wait behind, so only the no-load latency counts.
     * Judging an idle destination by an average raised in a past spike
     * would refuse every call for good (only answered calls move it): the
     * lock-out found by examples/testbed/repro_deadline_lockout.sh. */
    double min = hp->lat_min_ns > 0 ? hp->lat_min_ns : h->lat_min_ns;
    want = min > 0 ? (uint64_t)min : 0;
  } else {
    want = sluice__lb_expected(h->lat_ewma_ns, h->lat_min_ns, hp->lat_ewma_ns,
                               hp->lat_min_ns, h->rate_calls, h->in_flight);
  }
  return want == 0 || call->deadline_ns - now >= want;
}

sluice__lb_verdict sluice__lb_hot_check(const sluice__lb *lb,
                                        const sluice__lb_hot *h,
                                        const sluice__lb_hot_path *hp,
                                        const sluice__lb_call *call,
                                        uint64_t now) {
  sluice__lb_verdict v = admit(lb, h, hp);
  if (v != SLUICE__LB_PICKED)
    return v;
  return in_time(h, hp, call, now) ? SLUICE__LB_PICKED : SLUICE__LB_DEADLINE;
}

int sluice__lb_admits(const sluice__lb *lb, const sluice__lb_dest *d,
                      const sluice__lb_call *call) {
  sluice__lb_hot h;
  sluice__lb_hot_path hp;
  sluice__lb_fill_hot(NULL, d, &h);
  sluice__lb_fill_hot_path(d, sluice__lb_path(call), &hp);
  return admit(lb, &h, &hp) == SLUICE__LB_PICKED;
}

sluice__lb_verdict sluice__lb_check(const sluice__lb *lb,
                                    const sluice__lb_dest *d,
                                    const sluice__lb_call *call, uint64_t now) {
  sluice__lb_hot h;
  sluice__lb_hot_path hp;
  sluice__lb_fill_hot(NULL, d, &h);
  sluice__lb_fill_hot_path(d, sluice__lb_path(call), &hp);
  return sluice__lb_hot_check(lb, &h, &hp, call, now);
}

int sluice__lb_in_time(const sluice__lb_dest *d, const sluice__lb_call *call,
                       uint64_t now) {
  sluice__lb_hot h;
  sluice__lb_hot_path hp;
  sluice__lb_fill_hot(NULL, d, &h);
  sluice__lb_fill_hot_path(d, sluice__lb_path(call), &hp);
  return in_time(&h, &hp, call, now);
}

double sluice__lb_load(const sluice__lb_dest *d) {
  return (d->est.in_flight + 1.0) / d->limit;
}

/* Most frequent refusal, for the caller's error message; on a tie the
 * capacity reasons come first (they say the channel is saturated). */
static sluice__lb_verdict most_common(const unsigned cnt[5]) {
  sluice__lb_verdict v = SLUICE__LB_OVER_LIMIT;
  if (cnt[SLUICE__LB_PATH_LIMIT] > cnt[v])
    v = SLUICE__LB_PATH_LIMIT;
  if (cnt[SLUICE__LB_DEADLINE] > cnt[v])
    v = SLUICE__LB_DEADLINE;
  return v;
}

/* The least-loaded order: a lower tier first, then the lower load. */
static int ranks_before(int t, double k, int best_t, double best_k) {
  return t < best_t || (t == best_t && k < best_k);
}

/* The exact pick: every candidate looked at. *deadline counts the
 * refusals for the call's deadline. */
static sluice__lb_verdict scan_least(sluice__lb *lb,
                                     const sluice__lb_call *call, uint64_t now,
                                     size_t *chosen, unsigned *deadline) {
  unsigned cnt[5] = {0};
  size_t n = lb->n, usable = 0, best = n;
  int best_t = 0;
  double best_k = 0;
  const sluice__lb_hot *hot = lb->hot;
  const sluice__lb_hot_path *hp = lb->hot_path[sluice__lb_path(call)];
  size_t i = lb->rr_next < n ? lb->rr_next : 0;
  for (size_t k = 0; k < n; k++, i = i + 1 < n ? i + 1 : 0) {
    const sluice__lb_hot *h = &hot[i];
    if (!sluice__lb_candidate(lb, h))
      continue;
    usable++;
    sluice__lb_verdict a = admit(lb, h, &hp[i]);
    if (a != SLUICE__LB_PICKED) {
      cnt[a]++;
      continue;
    }
    int t = now < h->demoted_until_ns;
    double kd = sluice__lb_hot_load(h);
    if (best < n && !ranks_before(t, kd, best_t, best_k))
      continue;
    /* The deadline estimate costs divisions: only for a new best. */
    if (!in_time(h, &hp[i], call, now)) {
      cnt[SLUICE__LB_DEADLINE]++;
      continue;
    }
    best = i;
    best_t = t;
    best_k = kd;
  }
  *deadline = cnt[SLUICE__LB_DEADLINE];
  if (best < n) {
    *chosen = best;
    lb->rr_next = best + 1 < n ? best + 1 : 0;
    return SLUICE__LB_PICKED;
  }
  return usable ? most_common(cnt) : SLUICE__LB_NONE;
}

sluice__lb_verdict sluice__lb_pick_least(sluice__lb *lb,
                                         const sluice__lb_call *call,
                                         uint64_t now, size_t *chosen) {
  unsigned deadline = 0;
  size_t n = lb->n;
  if (!lb->cfg.scan_max || n <= lb->cfg.scan_max)
    return scan_least(lb, call, now, chosen, &deadline);
  uint32_t path = sluice__lb_path(call);
  if (lb->full_gen == lb->gen && lb->full_n == n && lb->full_path == path)
    return lb->full_verdict; /* nothing changed since every one refused */
  /* Power of d choices (d = SLUICE__LB_CHOICES). Sampled with
   * replacement: a repeat of the best so far is skipped, a repeat of a
   * refusal costs one more check. The samples of a round are fetched
   * before any is read, so that their misses overlap instead of adding
   * up (the records are small and contiguous, but 10,000 of them are
   * 640 KB and more: not all in cache). */
  const sluice__lb_hot *hot = lb->hot;
  const sluice__lb_hot_path *hp = lb->hot_path[path];
  size_t best = n, found = 0;
  int best_t = 0;
  double best_k = 0;
  for (int k = 0; k < SLUICE__LB_PROBES && found < SLUICE__LB_CHOICES;) {
    size_t idx[SLUICE__LB_CHOICES];
    int m = 0;
    for (; m < SLUICE__LB_CHOICES && k < SLUICE__LB_PROBES; m++, k++) {
      idx[m] = sluice__lb_rand(lb, n);
      __builtin_prefetch(&hot[idx[m]]);
      __builtin_prefetch(&hp[idx[m]]);
    }
    for (int j = 0; j < m && found < SLUICE__LB_CHOICES; j++) {
      size_t i = idx[j];
      const sluice__lb_hot *h = &hot[i];
      if (i == best || !sluice__lb_candidate(lb, h) ||
          sluice__lb_hot_check(lb, h, &hp[i], call, now) != SLUICE__LB_PICKED)
        continue;
      found++;
      int t = now < h->demoted_until_ns;
      double kd = sluice__lb_hot_load(h);
      if (best == n || ranks_before(t, kd, best_t, best_k)) {
        best = i;
        best_t = t;
        best_k = kd;
      }
    }
  }
  if (best < n) {
    *chosen = best;
    return SLUICE__LB_PICKED;
  }
  sluice__lb_verdict v = scan_least(lb, call, now, chosen, &deadline);
  /* Remembered only when the refusals were all limits, which depend on
   * the destinations and the path, not on the call's deadline or now. */
  if ((v == SLUICE__LB_OVER_LIMIT || v == SLUICE__LB_PATH_LIMIT) && !deadline) {
    lb->full_gen = lb->gen;
    lb->full_n = n;
    lb->full_path = path;
    lb->full_verdict = v;
  }
  return v;
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
