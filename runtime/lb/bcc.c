/* bcc: back-pressure by concurrency (the paper's BCC), one dimension.
 *
 * ## BCC: concurrency limit per destination
 *
 * Each destination has a concurrency limit `limit` (starting at
 * `initial_limit`, 1000: permissive, so an unloaded channel behaves like
 * lcc). Its usage u = in_flight / limit falls in one of three segments:
 *
 * | state  | usage                   | meaning                         |
 * |--------|-------------------------|---------------------------------|
 * | low    | u < bcc_low (0.5)       | the limit is far from used      |
 * | normal | bcc_low <= u <= bcc_high| working range                   |
 * | high   | u > bcc_high (0.9)      | at the limit: decide up or down |
 *
 * (On a completion, u counts the finishing call: the load it saw.)
 *
 * Decisions, on each completion:
 * - high and congested -> step down. Congested = the peer reports
 *   utilization > 0.9 (report younger than 10 windows, 1 s), or the
 *   call's path shows queueing (latency EWMA > allowed latency of its
 *   minimum: tolerance x min, at least min + slack,
 *   1.5x), or the call failed for overload (RESOURCE_EXHAUSTED,
 *   DEADLINE_EXCEEDED, UNAVAILABLE). If the measured gradient limit
 *   (est.limit) is below the limit: limit = max(est.limit, 0.9 x limit)
 *   on every completion, so a permissive limit falls quickly to the
 *   measured capacity. Otherwise (the peer is busy though latency does not
 *   show it): limit x 0.9 at most once per round trip (latency EWMA),
 *   since a cut shows its effect only after the calls in flight finished.
 * - high and not congested -> step up, probing for capacity:
 *   limit += max(1, 0.05 x limit), at most once per round trip (additive
 *   increase, as TCP does per RTT).
 * - low for longer than 10 windows (1 s) -> the limit drifts to
 *   max(est.limit, 2 x in_flight) (by smoothing, 0.2 per completion), so
 *   it follows the real capacity instead of staying where an old overload
 *   left it, and keeps headroom for twice the present load.
 * - normal -> no change.
 * The limit stays within [min_limit, max_limit] (1 .. 10000).
 *
 * Pick: among usable destinations that admit the call (in_flight < limit,
 * and the path share) and can answer before its deadline, the one with
 * the least usage counting the call, (in_flight + 1) / limit; ties round
 * robin. (Counting the call matters for a destination that fails every
 * call at once: nothing in flight, but its limit cut to the minimum by
 * those failures, so it ranks last instead of first.) Limits that follow
 * capacity make least-usage split traffic by capacity. No destination
 * qualifies -> OVER_LIMIT / PATH_LIMIT / DEADLINE (the most common reason
 * among usable ones): the call is dropped early.
 *
 * BCC controls concurrency only; a flow whose calls are individually cheap
 * but too many per second is BTC's job (btc.c). */
#include "lb/lb.h"

enum { BCC_LOW = 0, BCC_NORMAL = 1, BCC_HIGH = 2 };

#define BCC_PEER_HOT 0.9
#define BCC_STEP_DOWN 0.9
#define BCC_STEP_UP 0.05
#define BCC_LOW_WINDOWS 10  /* low for this many windows -> drift */
#define BCC_PEER_WINDOWS 10 /* a peer report is fresh for this many */

/* Never below 1: a limit of 0 means "none" to admission. */
static double clamp_limit(const sluice__lb *lb, double v) {
  double lo = lb->cfg.min_limit > 1 ? lb->cfg.min_limit : 1;
  if (v < lo)
    v = lo;
  if (v > lb->cfg.max_limit)
    v = lb->cfg.max_limit;
  return v;
}

static int segment(const sluice__lb *lb, double in_flight, double limit) {
  double u = in_flight / limit;
  return u < lb->cfg.bcc_low    ? BCC_LOW
         : u > lb->cfg.bcc_high ? BCC_HIGH
                                : BCC_NORMAL;
}

static void set_state(sluice__lb_dest *d, int st, uint64_t now) {
  if (d->state != st) {
    d->state = st;
    d->state_since_ns = now;
  }
}

static void bcc_dest_init(sluice__lb *lb, sluice__lb_dest *d, uint64_t now) {
  d->limit = clamp_limit(lb, lb->cfg.initial_limit);
  d->state = BCC_LOW;
  d->state_since_ns = now;
}

static void bcc_on_sent(sluice__lb *lb, sluice__lb_dest *d,
                        const sluice__lb_call *call, uint64_t now) {
  (void)call;
  set_state(d, segment(lb, d->est.in_flight, d->limit), now);
}

static int congested(const sluice__lb *lb, const sluice__lb_dest *d,
                     const sluice__lb_call *call, sluice_status_code code,
                     uint64_t now) {
  const sluice__lb_est *e = &d->est;
  if (code == SLUICE_STATUS_RESOURCE_EXHAUSTED ||
      code == SLUICE_STATUS_DEADLINE_EXCEEDED ||
      code == SLUICE_STATUS_UNAVAILABLE)
    return 1;
  if (sluice__lb_peer_busy(lb, e) > BCC_PEER_HOT &&
      now - e->peer_load_ns < BCC_PEER_WINDOWS * lb->cfg.window_ns)
    return 1;
  if (sluice__lb_est_peer_idle(e, now))
    return 0; /* the server says it is not busy: no queue there */
  uint32_t p = sluice__lb_path(call);
  double min = e->path_lat_min_ns[p], avg = e->path_lat_ewma_ns[p];
  return min > 0 && avg > sluice__lb_allowed_latency(&lb->cfg, min);
}

static void bcc_on_complete(sluice__lb *lb, sluice__lb_dest *d,
                            const sluice__lb_call *call, uint64_t latency_ns,
                            sluice_status_code code, uint32_t resp_size,
                            uint64_t now) {
  (void)latency_ns;
  (void)resp_size;
  const sluice__lb_est *e = &d->est;
  int st = segment(lb, (double)e->in_flight + 1, d->limit);
  set_state(d, st, now);
  /* Pace the unfloored moves to one per round trip. */
  int paced = now - d->last_action_ns >= (uint64_t)e->lat_ewma_ns;
  double limit = d->limit;
  int hot = congested(lb, d, call, code, now);
  if (hot && e->limit < limit) {
    /* Queueing, and the measured limit is lower: come down to it. */
    limit *= BCC_STEP_DOWN;
    if (limit < e->limit)
      limit = e->limit;
  } else if (st == BCC_HIGH) {
    if (hot) {
      if (paced) {
        limit *= BCC_STEP_DOWN;
        d->last_action_ns = now;
      }
    } else if (paced) {
      double step = limit * BCC_STEP_UP;
      limit += step > 1 ? step : 1;
      d->last_action_ns = now;
    }
  } else if (st == BCC_LOW &&
             now - d->state_since_ns >= BCC_LOW_WINDOWS * lb->cfg.window_ns) {
    double target = 2.0 * e->in_flight;
    if (target < e->limit)
      target = e->limit;
    limit += lb->cfg.smoothing * (target - limit);
  }
  d->limit = clamp_limit(lb, limit);
}

static sluice__lb_verdict bcc_pick(sluice__lb *lb, const sluice__lb_call *call,
                                   uint64_t now, size_t *chosen) {
  return sluice__lb_pick_least(lb, call, now, chosen);
}

static const char *bcc_state_name(const sluice__lb_dest *d) {
  return d->state == BCC_HIGH ? "high" : d->state == BCC_LOW ? "low" : "normal";
}

const sluice__lb_ops sluice__lb_bcc = {
    .name = "bcc",
    .dest_init = bcc_dest_init,
    .pick = bcc_pick,
    .on_sent = bcc_on_sent,
    .on_complete = bcc_on_complete,
    .state_name = bcc_state_name,
};
