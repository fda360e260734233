/* btc: back-pressure by throughput and concurrency (the paper's BTC), the
 * default strategy. docs/flow-control.md explains it with a diagram; this
 * comment is the reference.
 *
 * ## Two axes, three segments each, nine states
 *
 * A destination is classified once per rate window (est.window_ns,
 * 100 ms), at the completion that closes it, from:
 *
 *   L      d->limit, the admission limit (sluice__lb_admits)
 *   Leff   min(L, est.limit): the gradient limit joins in, so queueing is
 *          seen while L is still permissive
 *   rate   d->rate_avg: rate_calls smoothed over windows (0.25 a window)
 *   base   the no-load latency of the present traffic: lat_min with one
 *          method; with several, lat_ewma x the in-flight-weighted
 *          path_lat_min / path_lat_ewma (Little's law per path), so a mix
 *          of 1 ms and 50 ms methods does not look queued
 *   queueing  lat_ewma > allowed latency of base (tolerance x base, at
 *             least base + slack)
 *   n      rate x lat_ewma: calls in flight on average (Little's law; the
 *          instantaneous count jumps at every send and completion), or the
 *          instantaneous count when it is beyond Leff
 *   uC     n / Leff, or in_flight / (2n + 2) when queueing and larger: a
 *          backlog building faster than the averages follow, seen even
 *          while every limit is still permissive      concurrency usage
 *   uT     the peer's utilization smoothed over windows, while reports are
 *          fresh (younger than 10 windows); else rate / cap; 0 while no
 *          capacity is known                          throughput usage
 *
 * cap (d->cap) is the capacity learnt, calls/s. The destination is
 * saturated when it is queueing and uC is high: its workers are all busy,
 * so what it completes is what it can do; cap takes that rate (up at
 * once, down by smoothing). Otherwise a known cap rises when a queueing
 * window or the smoothed rate did more, and becomes unknown again when
 * the smoothed rate exceeds it by 10 % (the destination got faster).
 * Until a first saturation nothing says the rate is high: a fresh channel
 * at 30 % or 80 % load is T-low.
 *
 * Segments by btc_low / btc_high (0.5 / 0.9): entered upward at the
 * boundary at once; left downward only 10 % below it (high below 0.81,
 * mid below 0.45) and only once the state has lasted the hold time (5
 * dwells, 1 s). state = T * 3 + C:
 *
 *            C-low         C-mid         C-high
 *   T-low    0 stable      1 stable      2 unstable
 *   T-mid    3 stable      4 stable      5 unstable
 *   T-high   6 unstable    7 unstable    8 unstable
 *
 * Within the unstable states the state only escalates (7 -> 8, never
 * 8 -> 7): their action is the same, and stepping back and forth between
 * them is the loop the paper breaks. An unstable state ends when both
 * axes are below high (after the hold), into the stable state they give.
 *
 * A completion that failed for overload (RESOURCE_EXHAUSTED,
 * DEADLINE_EXCEEDED, UNAVAILABLE: the destination pushed back) is
 * classified at once with T high; the limit does not move for it (a lost
 * connection says nothing about capacity), only at the next window. Not
 * when a fresh report says the destination is far from busy (the peer's
 * veto, sluice__lb_est_peer_idle): in a chain that failure is a deeper
 * tier's refusal passed on, and marking every tier above the bottleneck
 * saturated would shed at each of them, at the edge most, at loads the
 * bottleneck itself admits (the gradient limit does not back off for it
 * either). The failure is then only a censored completion.
 *
 * ## Actions, at most one per btc_dwell_ns (200 ms)
 *
 *   target = cap x allowed(base)      (Little's law: the calls in flight
 *            that sustain the capacity at the tolerated latency; the
 *            present rate_calls while cap is unknown)
 *
 * Unstable -- both dimensions:
 * - throughput: the destination is saturated; pick() sends there only
 *   when no unsaturated destination can take the call;
 * - concurrency: L moves to the target: down at once, but not below half
 *   the gradient limit (est.limit) -- a stale or unrepresentative lat_min
 *   (the destination became slower for good; a few cheap calls on a
 *   method whose calls usually cost more) makes the target too low, and
 *   cutting to it would lower the rate, the capacity learnt, the target
 *   ... in a spiral the gradient limit stops; the first cut from the
 *   permissive start stops at the average in flight n instead of waiting
 *   for the gradient limit to come down; up by max(1, 5 % of L) per
 *   action.
 * Stable, C-mid (the limit is in use): L grows by max(1, 5 %), up to
 * est.limit, and once cap is known no further than the target.
 * Stable, C-low, cap unknown: L drifts back to initial_limit the same way
 * (a destination that failed for a while is ranked like the others
 * again). Stable, C-low, cap known: nothing (L remembers the capacity).
 *
 * Convergence: an unstable state's action moves L to a fixed point (the
 * target), so a destination held at its capacity stays in one state with
 * L constant; the state escalates but never steps back while unstable;
 * hysteresis and hold keep a stable state once entered; T reads smoothed
 * rates; the dwell lets a move show its effect before the next.
 *
 * L starts at initial_limit (1000): an unloaded channel is state 0
 * everywhere and pick() is lcc's least in flight.
 *
 * Pick: among usable destinations that admit the call (limit and path
 * share) and can answer before its deadline: unsaturated first, then the
 * least (in_flight + 1) / L; ties round robin. Saturated = unstable and
 * measured within the hold time: a destination that gets no calls
 * completes none and is not re-classified, so its mark lapses and it is
 * tried again. None qualifies -> OVER_LIMIT / PATH_LIMIT / DEADLINE (the
 * most common reason among the usable), NONE when nothing is usable: the
 * call is dropped early. O(n); classification is O(1) per window. */
#include "lb/lb.h"

enum { SEG_LOW = 0, SEG_MID = 1, SEG_HIGH = 2 };

#define BTC_HYST 0.9         /* leave a segment 10 % below its boundary */
#define BTC_HOLD_DWELLS 5    /* and only after 5 dwells (1 s) in a state */
#define BTC_CUT 0.5          /* a cut stops at half the gradient limit */
#define BTC_STEP 0.05        /* increase: max(1, 5 % of L) */
#define BTC_SMOOTHING 0.25   /* per window: the rate and peer utilization */
#define BTC_CAP_OBSOLETE 1.1 /* rate this far above cap: cap unknown */
#define BTC_PEER_WINDOWS 10  /* a peer report is fresh for this many */

/* Never below 1 whatever min_limit says: 0 means "no limit" to
 * admission. */
static double clamp_limit(const sluice__lb *lb, double v) {
  double lo = lb->cfg.min_limit > 1 ? lb->cfg.min_limit : 1;
  if (v < lo)
    v = lo;
  if (v > lb->cfg.max_limit)
    v = lb->cfg.max_limit;
  return v;
}

static int t_seg(int state) { return state / 3; }
static int c_seg(int state) { return state % 3; }

static int unstable(int state) {
  return t_seg(state) == SEG_HIGH || c_seg(state) == SEG_HIGH;
}

/* The segment of usage u, coming from segment cur: up at a boundary at
 * once; down only BTC_HYST below it, and only when the state has lasted
 * the hold time (may_fall). */
static int segment(double u, int cur, double lo, double hi, int may_fall) {
  int s = u >= hi ? SEG_HIGH : u >= lo ? SEG_MID : SEG_LOW;
  if (s >= cur)
    return s;
  if (!may_fall)
    return cur;
  if (cur == SEG_HIGH && u >= hi * BTC_HYST)
    return SEG_HIGH;
  if (u >= lo * BTC_HYST)
    return SEG_MID;
  return SEG_LOW;
}

static void set_state(sluice__lb_dest *d, int st, uint64_t now) {
  if (d->state != st) {
    d->state = st;
    d->state_since_ns = now;
  }
}

static double step(double limit) {
  double s = limit * BTC_STEP;
  return s > 1 ? s : 1;
}

/* Smooths a per-window sample into *avg (< 0: none yet). */
static void smooth(double *avg, double sample) {
  if (*avg < 0)
    *avg = sample;
  else
    *avg += BTC_SMOOTHING * (sample - *avg);
}

/* Learns the capacity. Saturated (calls queue there and the concurrency
 * is high: its workers are all busy), what the destination completes is
 * what it can do: the estimate takes it, up at once, down by smoothing.
 * Otherwise a known estimate rises when a queueing window or the smoothed
 * rate did more; a smoothed rate far above it (10 %) makes it obsolete
 * (the destination got faster): unknown until the next saturation. One
 * queueing window alone does not set a first estimate: at 80 % load a
 * burst queues for a while and completes less than capacity. */
static void learn_cap(const sluice__lb_config *cfg, sluice__lb_dest *d,
                      int queueing, int saturated) {
  double rate = d->est.rate_calls;
  if (rate <= 0)
    return;
  if (saturated) {
    if (d->cap <= 0 || rate > d->cap)
      d->cap = rate;
    else
      d->cap += cfg->smoothing * (rate - d->cap);
  } else if (d->cap > 0) {
    if (d->rate_avg > d->cap * BTC_CAP_OBSOLETE)
      d->cap = 0;
    else if (queueing && rate > d->cap)
      d->cap = rate;
    else if (d->rate_avg > d->cap)
      d->cap = d->rate_avg;
  }
}

/* The no-load latency of the traffic d carries now. With one method it
 * is lat_min. A channel that mixes a 1 ms and a 50 ms method has calls of
 * both in flight, and the 1 ms minimum would make every 50 ms call look
 * queued and the Little's-law target far too small. By Little's law per
 * path, the calls in flight at no load are sum(n_p x min_p / ewma_p); as
 * a latency, lat_ewma times the in-flight-weighted min_p / ewma_p (the
 * call that just completed counts on its path). */
static double base_latency(const sluice__lb_est *e, uint32_t path) {
  double w = 0, wg = 0;
  for (uint32_t p = 0; p < SLUICE__LB_MAX_PATHS; p++) {
    double n = (double)e->path_in_flight[p] + (p == path ? 1 : 0);
    double min = e->path_lat_min_ns[p], avg = e->path_lat_ewma_ns[p];
    if (n <= 0 || min <= 0 || avg <= 0)
      continue;
    w += n;
    wg += n * (min < avg ? min / avg : 1);
  }
  if (w <= 0 || e->lat_ewma_ns <= 0)
    return e->lat_min_ns;
  double base = e->lat_ewma_ns * wg / w;
  return base > e->lat_min_ns ? base : e->lat_min_ns;
}

/* The action of d's state, if the dwell allows one. */
static void act(sluice__lb *lb, sluice__lb_dest *d, double base, uint64_t now) {
  const sluice__lb_config *cfg = &lb->cfg;
  const sluice__lb_est *e = &d->est;
  if (now - d->last_action_ns < cfg->btc_dwell_ns)
    return;
  /* The Little's-law limit that sustains the capacity (or, before it is
   * known, the present rate) at the tolerated latency. */
  double r = d->cap > 0 ? d->cap : e->rate_calls;
  if (r <= 0 || base <= 0)
    return; /* nothing measured to act on */
  double target =
      clamp_limit(lb, r * sluice__lb_allowed_latency(cfg, base) * 1e-9);
  double limit = d->limit;
  if (unstable(d->state)) {
    if (target < limit) {
      /* Down to the target, not below half the gradient limit (a stale
       * or unrepresentative lat_min: see above); the first cut from the
       * permissive start not below half of 2n. */
      double grad = e->limit;
      double n_avg = (d->rate_avg > 0 ? d->rate_avg : e->rate_calls) *
                     e->lat_ewma_ns * 1e-9;
      if (limit >= cfg->initial_limit && grad > 2 * n_avg)
        grad = 2 * n_avg;
      double floor = grad * BTC_CUT;
      if (floor < target)
        floor = target;
      if (floor < limit)
        limit = floor;
    } else if (target > limit) {
      limit += step(limit);
      if (limit > target)
        limit = target;
    }
  } else {
    /* Stable. The limit in use (C-mid): probe upward, as far as the
     * gradient limit allows and, once the capacity is known, no further
     * than it needs. The limit unused (C-low) and no capacity known (never
     * saturated, or what was learnt is obsolete): drift back to the
     * permissive start, so that a destination that failed for a while is
     * ranked like the others again. */
    double bound = limit;
    if (c_seg(d->state) == SEG_MID)
      bound = d->cap > 0 && target < e->limit ? target : e->limit;
    else if (d->cap <= 0)
      bound = cfg->initial_limit;
    if (bound > limit) {
      limit += step(limit);
      if (limit > bound)
        limit = bound;
    }
  }
  limit = clamp_limit(lb, limit);
  if (limit != d->limit) {
    d->limit = limit;
    d->last_action_ns = now;
  }
}

/* Classifies d (state), then acts. pressure: the destination just pushed
 * back (T high whatever the rates say). */
static void evaluate(sluice__lb *lb, sluice__lb_dest *d, uint32_t path,
                     int pressure, uint64_t now) {
  const sluice__lb_config *cfg = &lb->cfg;
  const sluice__lb_est *e = &d->est;
  if (e->lat_min_ns <= 0 && !pressure)
    return; /* nothing measured yet: stay as we are (state 0) */
  double base = base_latency(e, path);
  /* A server reporting itself far from busy has no queue, whatever the
   * latency (the client's own loop may be the slow part). */
  int queueing = base > 0 &&
                 e->lat_ewma_ns > sluice__lb_allowed_latency(cfg, base) &&
                 !sluice__lb_est_peer_idle(e, now);
  /* One window's rate is noisy (a Poisson 800/s flow gives 80 +- 9 calls
   * per 100 ms), and so is a peer's utilization (in flight / capacity at
   * the moment it answered): T reads both smoothed over a few windows. */
  double busy = sluice__lb_peer_busy(lb, e);
  int peer =
      busy >= 0 && now - e->peer_load_ns < BTC_PEER_WINDOWS * cfg->window_ns;
  if (d->est.win_start_ns == now) {
    smooth(&d->rate_avg, e->rate_calls);
    if (peer)
      smooth(&d->util_avg, busy);
  }
  double l_eff = d->limit;
  if (e->limit > 0 && e->limit < l_eff)
    l_eff = e->limit;
  if (l_eff < 1)
    l_eff = 1;
  double rate = d->rate_avg > 0 ? d->rate_avg : e->rate_calls;
  double n_avg = rate * e->lat_ewma_ns * 1e-9;
  if ((double)e->in_flight > l_eff && (double)e->in_flight > n_avg)
    n_avg = (double)e->in_flight; /* beyond the limit now: a backlog that
                                     the averages have not seen yet */
  double u_c = n_avg / l_eff;
  /* Calls queue there and it holds more than twice the calls its recent
   * throughput and latency account for (Little's law), plus two: a
   * backlog building faster than the averages follow, high concurrency
   * whatever the limits say (they may still be at their permissive
   * start). */
  double backlog = 2 * n_avg + 2;
  if (queueing && e->in_flight > backlog && e->in_flight / backlog > u_c)
    u_c = e->in_flight / backlog;
  int fall = now - d->state_since_ns >= BTC_HOLD_DWELLS * cfg->btc_dwell_ns;
  int c = segment(u_c, c_seg(d->state), cfg->btc_low, cfg->btc_high, fall);

  learn_cap(cfg, d, queueing, queueing && c == SEG_HIGH);
  double u_t = 0; /* capacity unknown: nothing says the rate is high */
  if (peer && d->util_avg >= 0) {
    u_t = d->util_avg;
    /* At the edge of a chain, the downstream pressure is already a moving
     * average where it is measured (100 ms, lb.c): read it as it comes,
     * or a load spike would be over before the edge saw it. */
    if (!lb->inner && e->peer_down > u_t)
      u_t = e->peer_down;
  } else if (d->cap > 0)
    u_t = d->rate_avg > 0 ? d->rate_avg / d->cap : 0;
  int t = pressure ? SEG_HIGH
                   : segment(u_t, t_seg(d->state), cfg->btc_low, cfg->btc_high,
                             fall);
  if (unstable(d->state) && (t == SEG_HIGH || c == SEG_HIGH)) {
    /* Still unstable: escalate, never step back within the unstable
     * states (their action is the same; stepping back and forth between
     * T-high/C-mid and T-high/C-high is the loop the paper breaks). */
    if (t < t_seg(d->state))
      t = t_seg(d->state);
    if (c < c_seg(d->state))
      c = c_seg(d->state);
  }
  set_state(d, t * 3 + c, now);
  /* A push-back marks the destination at once; the limit moves on
   * measurements only (a lost connection fails its calls without saying
   * anything about capacity). */
  if (!pressure)
    act(lb, d, base, now);
}

static void btc_dest_init(sluice__lb *lb, sluice__lb_dest *d, uint64_t now) {
  d->limit = clamp_limit(lb, lb->cfg.initial_limit);
  d->cap = 0;
  d->rate_avg = -1;
  d->util_avg = -1;
  d->state = 0;
  d->state_since_ns = now;
}

static void btc_on_complete(sluice__lb *lb, sluice__lb_dest *d,
                            const sluice__lb_call *call, uint64_t latency_ns,
                            sluice_status_code code, uint32_t resp_size,
                            uint64_t now) {
  (void)latency_ns;
  (void)resp_size;
  /* A push-back from a destination whose fresh load report says it is
   * far from busy is not its own overload: a deeper tier refused or timed
   * out, and the destination passed the failure on (a chain). Marking it
   * saturated and cutting its limit would shed at every tier above the
   * bottleneck, and at the edge most. The peer's veto, as for latency. */
  int pressure = (code == SLUICE_STATUS_RESOURCE_EXHAUSTED ||
                  code == SLUICE_STATUS_DEADLINE_EXCEEDED ||
                  code == SLUICE_STATUS_UNAVAILABLE) &&
                 !sluice__lb_est_peer_idle(&d->est, now);
  /* est_done has just run: a window closed at this completion when its
   * start moved to now. */
  if (pressure || d->est.win_start_ns == now)
    evaluate(lb, d, sluice__lb_path(call), pressure, now);
}

/* Unstable, and measured lately: saturated until the hold time after the
 * window that classified it. A saturated destination that no longer gets
 * calls (pick prefers the others) completes none, so its state is not
 * evaluated again: after the hold time without a closed window the mark
 * lapses and the destination is tried again like the others, which
 * re-measures it (a destination that failed every call gets about one
 * call per hold time). */
static uint64_t btc_demoted_until(const sluice__lb *lb,
                                  const sluice__lb_dest *d) {
  return unstable(d->state)
             ? d->est.win_start_ns + BTC_HOLD_DWELLS * lb->cfg.btc_dwell_ns
             : 0;
}

static sluice__lb_verdict btc_pick(sluice__lb *lb, const sluice__lb_call *call,
                                   uint64_t now, size_t *chosen) {
  /* Least loaded, saturated destinations last (btc_demoted_until). */
  return sluice__lb_pick_least(lb, call, now, chosen);
}

static const char *btc_state_name(const sluice__lb_dest *d) {
  static const char *const names[9] = {
      "T-low/C-low",  "T-low/C-mid",  "T-low/C-high",
      "T-mid/C-low",  "T-mid/C-mid",  "T-mid/C-high",
      "T-high/C-low", "T-high/C-mid", "T-high/C-high"};
  return d->state >= 0 && d->state < 9 ? names[d->state] : "?";
}

const sluice__lb_ops sluice__lb_btc = {
    .name = "btc",
    .dest_init = btc_dest_init,
    .pick = btc_pick,
    .demoted_until = btc_demoted_until,
    .on_complete = btc_on_complete,
    .state_name = btc_state_name,
};
