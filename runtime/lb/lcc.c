/* lcc: least calls in flight among the usable destinations that admit the
 * call and can answer it in time (ranked per unit of measured limit, see
 * key(): the same order as long as limits are at their common start).
 *
 * A faster destination finishes its calls sooner and so holds fewer in
 * flight: picking the least loaded splits traffic by capacity without
 * knowing capacities. The admission limit is the destination's measured
 * gradient limit (est.limit, lb_est.c), so lcc also stops at measured
 * capacity and drops early instead of queueing without bound. Ties go
 * round robin (the scan starts after the last pick), or with lcc_p2c to
 * the better of two random destinations (O(1) when both qualify; the full
 * scan remains the fallback so a call is never refused while some
 * destination could take it). */
#include "lb/lb.h"

static void lcc_dest_init(sluice__lb *lb, sluice__lb_dest *d, uint64_t now) {
  (void)lb;
  (void)now;
  d->limit = d->est.limit;
}

static void lcc_on_complete(sluice__lb *lb, sluice__lb_dest *d,
                            const sluice__lb_call *call, uint64_t latency_ns,
                            sluice_status_code code, uint32_t resp_size,
                            uint64_t now) {
  (void)lb;
  (void)call;
  (void)latency_ns;
  (void)code;
  (void)resp_size;
  (void)now;
  d->limit = d->est.limit;
}

/* The load of d as lcc ranks it: calls in flight, counting this one,
 * per unit of d's measured limit. While limits are all at their permissive
 * start this ranks exactly as least in-flight; once measured, it weighs
 * by them. It also keeps a destination that fails every call at once
 * (refusing, shedding: its limit cut to the minimum by those statuses,
 * its in-flight count always near 0) from looking like the idlest one and
 * drawing all the traffic. */
static double key(const sluice__lb_dest *d) {
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

static sluice__lb_verdict lcc_pick(sluice__lb *lb,
                                   sluice__lb_dest *const *dests, size_t n,
                                   const sluice__lb_call *call, uint64_t now,
                                   size_t *chosen) {
  if (lb->cfg.lcc_p2c && n >= 2) {
    size_t a = sluice__lb_rand(lb, n);
    size_t b = sluice__lb_rand(lb, n - 1);
    if (b >= a)
      b++;
    const sluice__lb_dest *da = dests[a], *db = dests[b];
    if (da->usable && db->usable &&
        sluice__lb_check(lb, da, call, now) == SLUICE__LB_PICKED &&
        sluice__lb_check(lb, db, call, now) == SLUICE__LB_PICKED) {
      *chosen = key(db) < key(da) ? b : a;
      return SLUICE__LB_PICKED;
    }
  }
  unsigned cnt[5] = {0};
  size_t usable = 0, best = n;
  double best_k = 0;
  size_t i = lb->rr_next < n ? lb->rr_next : 0;
  for (size_t k = 0; k < n; k++, i = i + 1 < n ? i + 1 : 0) {
    const sluice__lb_dest *d = dests[i];
    if (!d->usable)
      continue;
    usable++;
    if (!sluice__lb_admits(lb, d, call)) {
      cnt[d->est.in_flight >= d->limit ? SLUICE__LB_OVER_LIMIT
                                       : SLUICE__LB_PATH_LIMIT]++;
      continue;
    }
    double k = key(d);
    /* The deadline estimate costs divisions: only for a new best. */
    if (best < n && k >= best_k)
      continue;
    if (!sluice__lb_in_time(d, call, now)) {
      cnt[SLUICE__LB_DEADLINE]++;
      continue;
    }
    best = i;
    best_k = k;
  }
  if (best < n) {
    *chosen = best;
    lb->rr_next = best + 1 < n ? best + 1 : 0;
    return SLUICE__LB_PICKED;
  }
  return usable ? most_common(cnt) : SLUICE__LB_NONE;
}

static const char *lcc_state_name(const sluice__lb_dest *d) {
  (void)d;
  return "-";
}

const sluice__lb_ops sluice__lb_lcc = {
    .name = "lcc",
    .dest_init = lcc_dest_init,
    .pick = lcc_pick,
    .on_complete = lcc_on_complete,
    .state_name = lcc_state_name,
};
