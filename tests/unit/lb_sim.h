/* A deterministic discrete-event simulator for the load-balancing
 * strategies (runtime/lb/): simulated destinations behind one simulated
 * channel, driven through sluice__lb_* exactly as client/channel.c drives
 * them, on a simulated clock. Same seed, same run.
 *
 * Destinations: `workers` calls are served in parallel, each in
 * workers / capacity seconds (times path_cost[path]); more wait in a FIFO
 * queue. Every `report_ns` a destination can report its load (utilization
 * = busy workers / workers). A `down` destination is unusable (as a lost
 * connection is) and its calls fail UNAVAILABLE at once. A broken one
 * (fail_ratio) stays usable and fails a share of its calls at once with
 * fail_code.
 *
 * Flows: open-loop generators (Poisson with the seed, or constant rate),
 * each with a path id, sizes and an optional relative deadline. A call is
 * picked when it arrives; a refused call is dropped (counted by verdict);
 * a call whose deadline passes first completes DEADLINE_EXCEEDED at the
 * deadline (the client gives up; the server still works on it).
 *
 * Use:
 *   lb_sim *s = lb_sim_new(&sluice__lb_lcc, NULL, 3, 42);
 *   lb_sim_dest_set(s, 0, 1000, 8);  ... (capacity, workers)
 *   s->flow[0].rate = 1400;           (calls/s)
 *   lb_sim_run(s, 2 * LB_SIM_SEC);    warm up
 *   lb_sim_reset_stats(s);
 *   lb_sim_run(s, 5 * LB_SIM_SEC);    measure
 *   s->dest[0].ok, s->dropped[SLUICE__LB_OVER_LIMIT],
 *   sluice__histogram_percentile(&s->lat_us, 99), s->lbd[0]->est.limit
 *   lb_sim_free(s);
 * Any field marked "config" may be changed between two lb_sim_run calls
 * (load steps, capacity changes); lb_sim_set_down changes the down flag. */
#ifndef SLUICE_TESTS_LB_SIM_H
#define SLUICE_TESTS_LB_SIM_H

#include <stddef.h>
#include <stdint.h>

#include "core/histogram.h"
#include "lb/lb.h"

#define LB_SIM_MS UINT64_C(1000000)
#define LB_SIM_SEC UINT64_C(1000000000)
#define LB_SIM_MAX_FLOWS 4
#define LB_SIM_MAX_STATES 4096 /* state changes kept per destination */

typedef struct lb_sim_dest {
  /* config */
  double capacity;  /* calls/s with every worker busy (path cost 1) */
  unsigned workers; /* calls served in parallel */
  double path_cost[SLUICE__LB_MAX_PATHS]; /* service-time factor; 0 = 1 */
  uint64_t rtt_ns;   /* network round trip added to each call (default 0) */
  int report_load;   /* 1: report utilization every report_ns (default 0) */
  int down_usable;   /* 1: a down destination stays usable (a server that
                        answers every call with UNAVAILABLE, or fail_code) */
  double fail_ratio; /* 0..1: this share of the calls sent here fail at
                        once with fail_code, without reaching a worker (a
                        broken server); spread evenly and deterministically
                        (0.9: 9 failures, 1 call served, ...); default 0 */
  sluice_status_code fail_code; /* of those failures, and of a down_usable
                                   destination's; 0 (OK) = UNAVAILABLE */
  /* read-only: lb_sim_set_down changes it */
  int down;
  /* results since the last lb_sim_reset_stats */
  uint64_t sent, ok, deadline, unavailable; /* unavailable: failed with any
                                               other code */
  uint64_t path_sent[SLUICE__LB_MAX_PATHS];
  sluice__histogram lat_us; /* OK calls, microseconds */
  /* results since lb_sim_new: every change of lbd->state, with its time */
  size_t n_states;
  uint64_t state_t[LB_SIM_MAX_STATES];
  int state[LB_SIM_MAX_STATES];
  /* internal */
  unsigned busy;
  size_t q_head, q_tail, q_len; /* FIFO of call indexes (internal) */
  uint64_t served_win;          /* completions since the last report */
  double fail_acc;              /* fail_ratio's accumulator */
} lb_sim_dest;

typedef struct lb_sim_flow {
  /* config */
  double rate;          /* calls/s offered; 0 = off */
  int constant;         /* 1: constant gaps; 0: Poisson (default) */
  uint64_t deadline_ns; /* relative deadline of each call; 0 = none */
  uint32_t path_id;
  uint32_t size, resp_size; /* bytes (default 4096 and 4096) */
  /* results since the last lb_sim_reset_stats */
  uint64_t offered, ok, deadline, unavailable;
  uint64_t dropped[SLUICE__LB_N_VERDICTS]; /* by sluice__lb_verdict */
  sluice__histogram lat_us;                /* OK calls, microseconds */
  /* internal */
  int armed;
} lb_sim_flow;

struct lb_sim_impl;

typedef struct lb_sim {
  sluice__lb lb;
  size_t n;              /* destinations */
  lb_sim_dest *dest;     /* [n] */
  sluice__lb_dest **lbd; /* [n]: the balancer's view (est, limit, state) */
  lb_sim_flow flow[LB_SIM_MAX_FLOWS];
  uint64_t now;       /* simulated clock, ns (starts at 1 s) */
  uint64_t report_ns; /* config: load report period (100 ms) */
  /* results since the last lb_sim_reset_stats, all flows */
  uint64_t offered, ok, deadline, unavailable;
  uint64_t dropped[SLUICE__LB_N_VERDICTS]; /* by sluice__lb_verdict */
  sluice__histogram lat_us;                /* OK calls, microseconds */
  struct lb_sim_impl *impl;
} lb_sim;

/* A simulator of n destinations (capacity 1000 calls/s, 8 workers each),
 * one flow (flow[0], rate 0), balanced by ops with cfg (NULL = defaults).
 * seed drives the arrivals. */
lb_sim *lb_sim_new(const sluice__lb_ops *ops, const sluice__lb_config *cfg,
                   size_t n, uint64_t seed);
void lb_sim_free(lb_sim *s);
/* Shorthand for dest[i].capacity and .workers. */
void lb_sim_dest_set(lb_sim *s, size_t i, double capacity, unsigned workers);
/* Marks destination i down (its in-flight calls fail UNAVAILABLE now, its
 * queue is lost) or up again. */
void lb_sim_set_down(lb_sim *s, size_t i, int down);
/* Advances the clock by duration_ns, processing every event. */
void lb_sim_run(lb_sim *s, uint64_t duration_ns);
/* Zeroes the results (not the state sequences, not the balancer). */
void lb_sim_reset_stats(lb_sim *s);
/* Prints one line per destination and a total line, prefixed by label. */
void lb_sim_print(const lb_sim *s, const char *label);

#endif
