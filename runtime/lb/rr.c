/* rr: round robin over the usable destinations, the paper's baseline.
 *
 * No limits and no deadline check: it sends whatever comes (front
 * pressure only), which is what the other strategies are measured
 * against. A retry or hedge (call->again) does not move the rotation: with
 * one slow and one fast destination, a hedge steered to the fast one would
 * otherwise send every next call's first attempt to the slow one. Skipping
 * the destinations that are not candidates (down, or ejected) makes it O(1)
 * amortised: each pick advances past at most those. */
#include "lb/lb.h"

static void rr_dest_init(sluice__lb *lb, sluice__lb_dest *d, uint64_t now) {
  (void)lb;
  (void)now;
  d->limit = 0; /* no admission limit */
}

static sluice__lb_verdict rr_pick(sluice__lb *lb, const sluice__lb_call *call,
                                  uint64_t now, size_t *chosen) {
  (void)now;
  size_t n = lb->n;
  size_t i = lb->rr_next < n ? lb->rr_next : 0;
  for (size_t k = 0; k < n; k++) {
    if (sluice__lb_candidate(lb, &lb->hot[i])) {
      *chosen = i;
      if (!call->again)
        lb->rr_next = i + 1 < n ? i + 1 : 0;
      return SLUICE__LB_PICKED;
    }
    if (++i == n)
      i = 0;
  }
  return SLUICE__LB_NONE;
}

static const char *rr_state_name(const sluice__lb_dest *d) {
  (void)d;
  return "-";
}

const sluice__lb_ops sluice__lb_rr = {
    .name = "rr",
    .dest_init = rr_dest_init,
    .pick = rr_pick,
    .state_name = rr_state_name,
};
