/* What each destination measures, whatever the strategy: calls in flight
 * (per path too), latency (EWMA and windowed minimum, per path too),
 * completion rate, and a gradient concurrency limit in the manner of
 * Netflix concurrency-limits' Gradient2 and Envoy's adaptive concurrency
 * filter. Every update is O(1) and clock-free (`now` comes in).
 *
 * The gradient limit. After each successful call on path p:
 *   gradient  = clamp(allowed(min_p) / ewma_p, 0.5, 1.0), allowed(m) =
 *               max(tolerance * m, m + latency_slack)
 *   new       = limit * gradient + sqrt(limit)      (queue allowance)
 *   limit     = limit + smoothing * (new - limit),  clamped to
 *               [min_limit, max_limit]
 * While latency stays within tolerance of the no-load latency the gradient
 * is 1 and the limit grows by ~sqrt(limit) steps; once calls queue at the
 * destination the latency rises and the limit shrinks until
 *   limit * (1 - gradient) = sqrt(limit),
 * i.e. a little above the concurrency the destination serves without
 * queueing. The limit grows only while it is being used (in flight at least
 * half of it), as Gradient2 does: an idle channel keeps its permissive
 * initial limit instead of inflating it to max_limit. A call that failed
 * for overload (RESOURCE_EXHAUSTED, DEADLINE_EXCEEDED, UNAVAILABLE) cuts
 * the limit by 10 % at once, as a loss does in AIMD, unless a fresh load
 * report says the server is far from busy (the overload is a deeper
 * tier's, passed on).
 *
 * The gradient compares a path's latency with that path's own minimum, so
 * a channel that mixes a 1 ms and a 100 ms method does not read the mix
 * as queueing. */
#include <string.h>

#include "lb/lb.h"

#define OVERLOAD_CUT 0.9
#define RATE_MAX_DECAY 0.99
#define GRADIENT_MIN 0.5

/* sqrt without libm (runtime/ does not link it): a bit-level first guess
 * (halved exponent) and Newton steps; exact enough for a queue allowance
 * and O(1). */
static double lb_sqrt(double x) {
  if (!(x > 0))
    return 0;
  union {
    double d;
    uint64_t u;
  } v = {x};
  v.u = (v.u >> 1) + (UINT64_C(1023) << 51);
  double r = v.d;
  for (int i = 0; i < 5; i++)
    r = 0.5 * (r + x / r);
  return r;
}

static double clamp(double v, double lo, double hi) {
  return v < lo ? lo : v > hi ? hi : v;
}

/* Never below 1, whatever min_limit says: a limit of 0 means "none" to
 * admission (rr), so a limit cut to nothing must not open the gates. */
static double clamp_limit(const sluice__lb_config *cfg, double v) {
  return clamp(v, cfg->min_limit > 1 ? cfg->min_limit : 1, cfg->max_limit);
}

void sluice__lb_est_init(sluice__lb_est *e, const sluice__lb_config *cfg,
                         uint64_t now) {
  memset(e, 0, sizeof *e);
  e->limit = clamp_limit(cfg, cfg->initial_limit);
  e->lat_min_since_ns = now;
  e->win_start_ns = now;
  e->peer_util = -1;
  e->peer_down = -1;
  e->peer_queue_ms = -1;
}

void sluice__lb_est_sent(sluice__lb_est *e, const sluice__lb_call *call,
                         uint64_t now) {
  (void)now;
  e->in_flight++;
  e->path_in_flight[sluice__lb_path(call)]++;
}

/* The minimum is re-learnt every min_rtt_reset_ns: the current period's
 * minimum replaces the old one when the period ends, so a destination
 * that became slower for good (new hardware, heavier data) is not judged
 * forever against its old best, while one slow period cannot erase the
 * minimum before a new one was measured. */
static void roll_min_period(sluice__lb_est *e, const sluice__lb_config *cfg,
                            uint64_t now) {
  if (now - e->lat_min_since_ns < cfg->min_rtt_reset_ns)
    return;
  if (e->lat_min_cur_ns > 0)
    e->lat_min_ns = e->lat_min_cur_ns;
  e->lat_min_cur_ns = 0;
  for (int p = 0; p < SLUICE__LB_MAX_PATHS; p++) {
    if (e->path_lat_min_cur_ns[p] > 0)
      e->path_lat_min_ns[p] = e->path_lat_min_cur_ns[p];
    e->path_lat_min_cur_ns[p] = 0;
  }
  e->lat_min_since_ns = now;
}

/* Closes the rate window once window_ns has passed. An idle gap longer
 * than a window is averaged in (the rate really was low). rate_max decays
 * a little at every window so a destination that slowed down is
 * re-estimated rather than trusted at its old peak. */
static void roll_window(sluice__lb_est *e, const sluice__lb_config *cfg,
                        uint64_t now) {
  uint64_t elapsed = now - e->win_start_ns;
  if (now < e->win_start_ns || elapsed < cfg->window_ns || elapsed == 0)
    return;
  e->rate_calls = (double)e->win_calls * 1e9 / (double)elapsed;
  e->rate_bytes = (double)e->win_bytes * 1e9 / (double)elapsed;
  e->rate_max *= RATE_MAX_DECAY;
  if (e->rate_calls > e->rate_max)
    e->rate_max = e->rate_calls;
  e->win_calls = e->win_bytes = 0;
  e->win_start_ns = now;
}

static void ewma(double *avg, double sample, double smoothing) {
  if (*avg <= 0)
    *avg = sample;
  else
    *avg += smoothing * (sample - *avg);
}

static void lower(double *min, double sample) {
  if (*min <= 0 || sample < *min)
    *min = sample;
}

void sluice__lb_est_done(sluice__lb_est *e, const sluice__lb_config *cfg,
                         const sluice__lb_call *call, uint64_t latency_ns,
                         int outcome, uint32_t resp_size, uint64_t now) {
  uint32_t p = sluice__lb_path(call);
  uint32_t seen = e->in_flight; /* in flight while this call was */
  if (e->in_flight)
    e->in_flight--;
  if (e->path_in_flight[p])
    e->path_in_flight[p]--;
  roll_min_period(e, cfg, now);
  roll_window(e, cfg, now);
  double lat = latency_ns ? (double)latency_ns : 1.0;

  if (outcome == SLUICE__LB_CENSORED)
    return; /* out of flight, nothing learnt */
  if (outcome == SLUICE__LB_OVERLOAD) {
    /* A failed call's latency is censored (a deadline says only "at least
     * this slow"; a refusal says nothing): it does not enter the latency
     * estimates, which the deadline check trusts, and it is no completion;
     * the limit backs off instead -- unless the server says it is far from
     * busy: then the overload is not its own (a deeper tier of a chain
     * refused, and it passed the failure on), and backing off here would
     * shed at every tier above the bottleneck. */
    (void)lat;
    if (!sluice__lb_est_peer_idle(e, now))
      e->limit = clamp_limit(cfg, e->limit * OVERLOAD_CUT);
    return;
  }

  e->samples++;
  ewma(&e->lat_ewma_ns, lat, cfg->smoothing);
  ewma(&e->path_lat_ewma_ns[p], lat, cfg->smoothing);
  lower(&e->lat_min_ns, lat);
  lower(&e->lat_min_cur_ns, lat);
  lower(&e->path_lat_min_ns[p], lat);
  lower(&e->path_lat_min_cur_ns[p], lat);
  e->win_calls++;
  e->win_bytes += (uint64_t)call->size + resp_size;

  double gradient =
      clamp(sluice__lb_allowed_latency(cfg, e->path_lat_min_ns[p]) /
                e->path_lat_ewma_ns[p],
            GRADIENT_MIN, 1.0);
  double target = e->limit * gradient + lb_sqrt(e->limit);
  /* The server says it is far from busy: rising latency is not its queue
   * (it may be the client's own loop), so the limit does not shrink on it.
   * Without this a closed-loop caller whose calls are dropped locally
   * spins, slows its own loop, and the limit collapses. */
  if (target < e->limit && sluice__lb_est_peer_idle(e, now))
    return;
  if (target > e->limit && 2.0 * seen < e->limit)
    return; /* not using the limit: no evidence it should grow */
  e->limit = clamp_limit(cfg, e->limit + cfg->smoothing * (target - e->limit));
}

double sluice__lb_allowed_latency(const sluice__lb_config *cfg, double min_ns) {
  double a = cfg->tolerance * min_ns,
         b = min_ns + (double)cfg->latency_slack_ns;
  return a > b ? a : b;
}

int sluice__lb_est_peer_idle(const sluice__lb_est *e, uint64_t now) {
  return e->peer_util >= 0 && e->peer_util < SLUICE__LB_PEER_IDLE &&
         !e->chain_busy && now - e->peer_load_ns < SLUICE__LB_PEER_FRESH_NS;
}

void sluice__lb_est_peer_load(sluice__lb_est *e, const sluice__lb_peer_load *l,
                              uint64_t now) {
  e->peer_util = l->utilization;
  e->peer_down = l->downstream;
  e->peer_queue_ms = l->queue_ms;
  e->peer_load_ns = now;
}

/* Expected latency of a call sent now (sluice__lb_expected in lb.h).
 *
 * The base is the latency EWMA (the path's when measured). When the
 * destination is visibly queueing (latency above twice its minimum), it is
 * saturated and its completion rate is its capacity; a call joining now
 * then completes after the calls ahead of it and itself:
 * (in_flight + 1) / rate (Little's law for a FIFO server), which reacts to
 * a growing backlog before the EWMA does. While not queueing, the rate is
 * only the offered load and says nothing about waiting, so it is not
 * used: a lightly used destination with one call in flight at 1 call/s
 * must not look a second away. */
uint64_t sluice__lb_expected(double lat_ewma_ns, double lat_min_ns,
                             double path_ewma_ns, double path_min_ns,
                             double rate_calls, uint32_t in_flight) {
  double base = lat_ewma_ns, min = lat_min_ns;
  if (path_ewma_ns > 0) {
    base = path_ewma_ns;
    min = path_min_ns;
  }
  if (base <= 0)
    return 0;
  if (rate_calls > 0 && min > 0 && base > 2 * min) {
    double backlog = ((double)in_flight + 1) * 1e9 / rate_calls;
    if (backlog > base)
      base = backlog;
  }
  return (uint64_t)base;
}

uint64_t sluice__lb_est_expected_ns(const sluice__lb_est *e, uint64_t now) {
  (void)now;
  return sluice__lb_expected(e->lat_ewma_ns, e->lat_min_ns, 0, 0, e->rate_calls,
                             e->in_flight);
}
