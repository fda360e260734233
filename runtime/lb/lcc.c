/* lcc: least calls in flight among the usable destinations that admit the
 * call and can answer it in time (ranked per unit of measured limit, see
 * sluice__lb_load: the same order as long as limits are at their common start).
 *
 * A faster destination finishes its calls sooner and so holds fewer in
 * flight: picking the least loaded splits traffic by capacity without
 * knowing capacities. The admission limit is the destination's measured
 * gradient limit (est.limit, lb_est.c), so lcc also stops at measured
 * capacity and drops early instead of queueing without bound. Ties go
 * round robin (the scan starts after the last pick), or with lcc_p2c to
 * the better of two random destinations (O(1) when both qualify; the full
 * scan remains the fallback so a call is never refused while some
 * destination could take it).
 *
 * The load (sluice__lb_load): calls in flight, counting this one, per unit
 * of the measured limit. While limits are all at their permissive start
 * this ranks exactly as least in-flight; once measured, it weighs by them,
 * which also keeps a destination whose limit was cut to the minimum by
 * refusals or shedding (in flight always near 0) from looking idlest. */
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

static sluice__lb_verdict lcc_pick(sluice__lb *lb, const sluice__lb_call *call,
                                   uint64_t now, size_t *chosen) {
  size_t n = lb->n;
  if (lb->cfg.lcc_p2c && n >= 2) {
    size_t a = sluice__lb_rand(lb, n);
    size_t b = sluice__lb_rand(lb, n - 1);
    if (b >= a)
      b++;
    const sluice__lb_hot *ha = &lb->hot[a], *hb = &lb->hot[b];
    const sluice__lb_hot_path *hp = lb->hot_path[sluice__lb_path(call)];
    if (sluice__lb_candidate(lb, ha) && sluice__lb_candidate(lb, hb) &&
        sluice__lb_hot_check(lb, ha, &hp[a], call, now) == SLUICE__LB_PICKED &&
        sluice__lb_hot_check(lb, hb, &hp[b], call, now) == SLUICE__LB_PICKED) {
      *chosen = sluice__lb_hot_load(hb) < sluice__lb_hot_load(ha) ? b : a;
      return SLUICE__LB_PICKED;
    }
  }
  return sluice__lb_pick_least(lb, call, now, chosen);
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
