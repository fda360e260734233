/* Client-side load balancing and back-pressure: which destination a call
 * goes to, and whether it may be sent at all.
 *
 * Pure code, no I/O and no clock of its own: every function takes `now` in
 * nanoseconds, so strategies are unit-tested against simulated destinations
 * with a deterministic clock. The channel (client/channel.c) owns one
 * sluice__lb and one sluice__lb_dest per destination, calls pick() for each
 * call, on_sent() when the call is handed to a connection, on_complete()
 * when it ends, and on_peer_load() when a server reports its load
 * (endpoint-load-metrics-bin trailer). Everything runs on the channel's loop
 * thread.
 *
 * Layers: lb/ includes only core/ and sluice/ headers.
 */
#ifndef SLUICE_LB_LB_H
#define SLUICE_LB_LB_H

#include <stddef.h>
#include <stdint.h>

#include "core/histogram.h"
#include "sluice/status.h"

/* Paths (methods) tracked separately per destination; a channel's paths
 * beyond this share the last slot. */
#define SLUICE__LB_MAX_PATHS 8
/* Sampled picks (sluice__lb_pick_least): destinations sampled at most
 * to find SLUICE__LB_CHOICES that qualify, before the full scan ... */
#define SLUICE__LB_PROBES 8
/* ... and how many qualifying destinations are compared. */
#define SLUICE__LB_CHOICES 3
/* Successful calls a destination must have answered before a call is
 * refused for its deadline there. */
#define SLUICE__LB_MIN_SAMPLES 8

/* Why a call was not sent (also the stats' drop reasons). */
typedef enum sluice__lb_verdict {
  SLUICE__LB_PICKED = 0,     /* *chosen is set */
  SLUICE__LB_NONE = 1,       /* no usable destination (none connected) */
  SLUICE__LB_OVER_LIMIT = 2, /* every usable destination is at its limit */
  SLUICE__LB_PATH_LIMIT = 3, /* ... at its limit for this call's path */
  SLUICE__LB_DEADLINE = 4,   /* no destination can answer before the
                                call's deadline */
  SLUICE__LB_N_VERDICTS      /* how many there are (arrays by verdict) */
} sluice__lb_verdict;

/* Tunables; sluice__lb_config_default() gives the defaults in comments. */
typedef struct sluice__lb_config {
  double initial_limit;      /* 1000: permissive start, behaves like lcc */
  double min_limit;          /* 1 */
  double max_limit;          /* 10000 */
  double path_share;         /* 0.5: a path may hold at most this share of a
                                destination's limit while other paths are
                                active (so a slow method cannot starve a fast
                                one); a path holding less than min(share,
                                1 - share) of the limit is admitted even at
                                the limit, up to that much above it */
  uint64_t window_ns;        /* 100 ms: rate measurement window */
  uint64_t min_rtt_reset_ns; /* 10 s: the no-load latency is re-learnt */
  double tolerance;          /* 1.5: latency may grow to tolerance x min RTT
                                before the gradient limiter backs off ... */
  uint64_t latency_slack_ns; /* 1 ms: ... and at least to min RTT + this:
                                a sub-millisecond service on loopback
                                doubles its latency with any batching or a
                                busy client loop, which is not a queue worth
                                cutting limits for (see
                                sluice__lb_allowed_latency) */
  double smoothing;          /* 0.2: EWMA factor of latency and limit moves */
  double bcc_low, bcc_high;  /* 0.5, 0.9: usage thresholds (in_flight/limit) */
  double btc_low, btc_high;  /* 0.5, 0.9: segment thresholds, both axes */
  uint64_t btc_dwell_ns;     /* 200 ms: minimum time between BTC actions */
  int lcc_p2c;               /* 0: ties by round robin; 1: power of 2 choices */
  uint32_t scan_max;         /* 16: with more destinations than this, lcc,
                                bcc and btc pick the best of three sampled
                                ones instead of scanning them all
                                (sluice__lb_pick_least); 0 = always scan */
  /* Outlier ejection (lb.c, every strategy, rr too): a destination whose
   * calls fail for its own fault (UNAVAILABLE, INTERNAL, UNIMPLEMENTED,
   * UNKNOWN, DATA_LOSS) is not picked for a while. See "Outlier
   * ejection" in docs/flow-control.md. */
  uint32_t eject_consecutive; /* 5: that many such failures in a row eject
                                 (Envoy's consecutive_5xx); 0 = off */
  double eject_ratio;         /* 0.85: or that share of its calls over the
                                 last 1-2 windows (gRPC's and Envoy's
                                 failure_percentage threshold); 0 = off */
  uint32_t eject_min_calls;   /* 20: calls the ratio needs (same span) */
  uint64_t eject_window_ns;   /* 1 s: the ratio's window */
  uint64_t eject_base_ns;     /* 1 s: an ejection lasts base x level, level
                                 = ejections not yet forgiven (1, 2 ...) */
  uint64_t eject_max_ns;      /* 30 s: ... at most max(base, this) */
  uint64_t eject_decay_ns;    /* 10 s: one level forgiven per such period
                                 since the last ejection ended */
  uint32_t eject_max_percent; /* 50: a destination is ejected only while
                                 fewer than this percentage of the
                                 channel's destinations are (gRPC's
                                 max_ejection_percent: 1 of 2, 2 of 3 or
                                 4), and never the last one; 0 = ejection
                                 off */
} sluice__lb_config;

void sluice__lb_config_default(sluice__lb_config *c);

/* What the balancer knows of a call. */
typedef struct sluice__lb_call {
  uint32_t path_id;     /* 0..SLUICE__LB_MAX_PATHS-1 */
  uint32_t size;        /* serialized request bytes (first message) */
  uint64_t deadline_ns; /* absolute, on sluice_now_ns's clock; 0 = none */
  int again; /* a retry or hedge of a call already picked: it does not move
              * a rotation (rr), or the next call would land where this one
              * was steered away from */
  int child; /* made by a server's handler for its call
              * (sluice_call_opts_set_parent): the channel is inside a
              * chain, not at its edge (see sluice__lb.inner) */
} sluice__lb_call;

/* The slot of call's path: its path_id, paths beyond the last slot
 * sharing it. */
static inline uint32_t sluice__lb_path(const sluice__lb_call *call) {
  return call->path_id < SLUICE__LB_MAX_PATHS ? call->path_id
                                              : SLUICE__LB_MAX_PATHS - 1;
}

/* A server's own load report (ORCA endpoint-load-metrics). Unknown fields
 * are negative. */
typedef struct sluice__lb_peer_load {
  double utilization; /* 0..1 (cpu_utilization or application_utilization) */
  double rps;         /* the server's completion rate */
  double queue_ms;    /* time calls wait before their handler */
  double in_flight;
  double downstream; /* the back-pressure of the services it calls, 0..1
                        (named metric downstream); < 0 none */
} sluice__lb_peer_load;

/* Measurements of one destination, kept by lb_est.c for every strategy. */
typedef struct sluice__lb_est {
  /* First what every pick reads (admission, the evidence test of the
   * deadline check): with sluice__lb_dest's usable and limit, one cache
   * line per destination looked at. */
  uint32_t in_flight;
  uint32_t path_in_flight[SLUICE__LB_MAX_PATHS];
  uint64_t samples;   /* completed calls measured */
  double lat_ewma_ns; /* EWMA of completed calls' latency; 0 = none yet */
  double lat_min_ns;  /* windowed minimum: the no-load latency; 0 = none */
  uint64_t lat_min_since_ns;
  double lat_min_cur_ns; /* minimum of the current period (since
                            lat_min_since_ns): replaces lat_min_ns when
                            the period ends; 0 = none */
  double rate_calls;     /* completions per second (last full window) */
  double rate_bytes;     /* request+response bytes per second */
  double rate_max;       /* highest rate_calls seen: the capacity estimate */
  uint64_t win_start_ns;
  uint64_t win_calls, win_bytes;
  double limit; /* gradient concurrency limit (Gradient2-like):
                   min_limit..max_limit */
  double path_lat_ewma_ns[SLUICE__LB_MAX_PATHS];
  /* Per-path windowed minimum, as lat_min_ns: the gradient compares a
   * path's latency with its own no-load latency, so a channel mixing a
   * 1 ms and a 100 ms method does not read the mix as queueing. */
  double path_lat_min_ns[SLUICE__LB_MAX_PATHS];
  double path_lat_min_cur_ns[SLUICE__LB_MAX_PATHS];
  double peer_util; /* last report, < 0 none */
  double peer_down; /* last report's downstream utilization, < 0 none */
  int chain_busy;   /* at the edge of a chain: the last report's downstream
                       pressure is at least SLUICE__LB_CHAIN_BUSY (lb.c) */
  double peer_queue_ms;
  uint64_t peer_load_ns;
} sluice__lb_est;

void sluice__lb_est_init(sluice__lb_est *e, const sluice__lb_config *cfg,
                         uint64_t now);
void sluice__lb_est_sent(sluice__lb_est *e, const sluice__lb_call *call,
                         uint64_t now);
/* How a finished call counts for the estimators. */
enum {
  SLUICE__LB_MEASURED = 0, /* answered (OK, or an error about the call
                              itself): a latency sample */
  SLUICE__LB_OVERLOAD = 1, /* RESOURCE_EXHAUSTED, DEADLINE_EXCEEDED,
                              UNAVAILABLE: the limit backs off */
  SLUICE__LB_CENSORED = 2  /* INTERNAL, UNKNOWN, UNIMPLEMENTED, DATA_LOSS,
                              CANCELLED: its latency says nothing of the
                              service time (a crash answers in microseconds)
                              and enters no estimate; outlier ejection deals
                              with a destination that keeps failing */
};

/* A call ended after latency_ns; outcome is one of the values above. */
void sluice__lb_est_done(sluice__lb_est *e, const sluice__lb_config *cfg,
                         const sluice__lb_call *call, uint64_t latency_ns,
                         int outcome, uint32_t resp_size, uint64_t now);
void sluice__lb_est_peer_load(sluice__lb_est *e, const sluice__lb_peer_load *l,
                              uint64_t now);
/* The latency a destination (or path) whose no-load latency is min_ns may
 * show before it counts as queueing: max(tolerance x min, min + slack). */
double sluice__lb_allowed_latency(const sluice__lb_config *cfg, double min_ns);

/* A peer report younger than SLUICE__LB_PEER_FRESH_NS says utilization
 * below SLUICE__LB_PEER_IDLE: latency growth is not that server's queue. */
#define SLUICE__LB_PEER_IDLE 0.5
/* ... unless, at the edge of a chain, the server's downstream pressure is
 * this high: then the chain's bottleneck is at its limit, and the latency
 * growth is its queue, which the edge is the place to act on. */
#define SLUICE__LB_CHAIN_BUSY 0.9
#define SLUICE__LB_PEER_FRESH_NS 1000000000ull
int sluice__lb_est_peer_idle(const sluice__lb_est *e, uint64_t now);
/* Expected time until a call sent now would complete here: its wait behind
 * the calls in flight (in_flight / completion rate) plus the latency
 * estimate. 0 when nothing was measured yet. */
uint64_t sluice__lb_est_expected_ns(const sluice__lb_est *e, uint64_t now);
/* The same from the figures (what the deadline check reads of a
 * destination's compact record): a path's EWMA and minimum when that path
 * was measured (path_ewma_ns > 0), else the destination's. */
uint64_t sluice__lb_expected(double lat_ewma_ns, double lat_min_ns,
                             double path_ewma_ns, double path_min_ns,
                             double rate_calls, uint32_t in_flight);

/* Outlier ejection state of one destination, kept by lb.c. It lives in
 * the stats so that it outlasts a reconnection, as the counters do (the
 * channel keeps them when it re-initialises a destination): a server that
 * crashes on every call and is reconnected stays ejected, as gRPC keeps an
 * address's ejection state across its subchannel's reconnections. */
typedef struct sluice__lb_outlier {
  uint64_t ejections;        /* times ejected, in all */
  uint64_t ejected_until_ns; /* ejected while now < this (0: never was);
                                see sluice__lb_ejected */
  uint32_t level;            /* ejections not yet forgiven when the last one
                                began (decays by eject_decay_ns, applied at
                                the next ejection) */
  uint32_t consecutive;      /* destination failures in a row */
  uint32_t win_calls, win_failed;   /* calls counted, failed: this window */
  uint32_t prev_calls, prev_failed; /* ... the window before */
  uint64_t win_start_ns;
  int ejected; /* was ejected: restarted once the end is seen (by the
                  first pick or completion at or after ejected_until_ns) */
} sluice__lb_outlier;

/* Per-destination stats, kept by lb.c. */
typedef struct sluice__lb_stats {
  uint64_t sent, ok, failed;
  sluice__lb_outlier outlier;     /* ejection (stats: .ejections, and
                                     ejected now: sluice__lb_ejected) */
  sluice__histogram latency;      /* completed calls, microseconds */
  uint64_t algo_ns_sum, algo_n;   /* pick() time */
  uint64_t strat_ns_sum, strat_n; /* pick until the request is flushed */
} sluice__lb_stats;

/* What a pick reads of one destination, copied out of its sluice__lb_dest
 * into an array of the balancer (sluice__lb.hot, by table index), so that
 * a pick among 1,000 destinations reads 64 contiguous bytes per
 * candidate instead of a line of a 10 KB structure each (a cache and a
 * TLB miss apiece inside a channel, where the destinations are its
 * subchannels, far apart). Written only by lb_table.c's sluice__lb_sync, from
 * the destination itself, after every event that changes any of these fields;
 * never written anywhere else, so it cannot drift. */
typedef struct sluice__lb_hot {
  /* A cache line each (64 bytes, aligned: lb.c allocates them so): one
   * line read per candidate. */
  _Alignas(64) uint8_t usable; /* d->usable */
  uint8_t ejected;  /* d->stats.outlier.ejected: out of the picks (see
                       sluice__lb_candidate) */
  uint8_t evidence; /* est.samples >= SLUICE__LB_MIN_SAMPLES: the deadline
                       check may refuse */
  uint32_t in_flight;
  double limit;                               /* d->limit */
  uint64_t demoted_until_ns;                  /* ops->demoted_until */
  double rate_calls, lat_ewma_ns, lat_min_ns; /* est's, for the deadline */
} sluice__lb_hot;

/* ... and per path (sluice__lb.hot_path[p], one array per path: a pick
 * reads its call's path only). */
typedef struct sluice__lb_hot_path {
  _Alignas(32) uint32_t in_flight;
  /* 32 bytes: two to a cache line */ /* est.path_in_flight[p] */
  double lat_ewma_ns, lat_min_ns;     /* est.path_lat_ewma_ns[p], _min_ */
} sluice__lb_hot_path;

/* d->slot of a destination in no table. */
#define SLUICE__LB_NO_SLOT UINT32_MAX

/* One destination as the balancer sees it. (A field added here must be
 * reset by lb.c's restart() too, when an ejection ends.) A pick reads its
 * compact record (sluice__lb_hot), not this: whoever changes a field the
 * record copies outside lb.c (a test) says so with sluice__lb_dest_changed;
 * the channel changes usable with sluice__lb_set_usable. */
typedef struct sluice__lb_dest {
  int usable;    /* connected: may be picked (set by the channel, through
                    sluice__lb_set_usable) */
  uint32_t slot; /* index in the balancer's table, if lb->dests[slot] is
                    this destination (the table is rebuilt when the set
                    changes: a removed destination's slot is stale, which
                    the check sees) */
  double limit;  /* the strategy's admission limit; 0 = none (rr) */
  sluice__lb_est est;
  double cap;      /* btc: capacity estimate, calls/s, learnt while the
                      destination queued; 0 = not known yet */
  double rate_avg; /* btc: rate_calls smoothed over windows, calls/s */
  double util_avg; /* btc: the peer's utilization smoothed over windows */
  int state;       /* strategy-defined (bcc: 0 low, 1 normal, 2 high; btc:
                      0..8 = throughput segment * 3 + concurrency segment) */
  uint64_t state_since_ns;
  uint64_t last_action_ns;
  sluice__lb_stats stats;
} sluice__lb_dest;

typedef struct sluice__lb sluice__lb;

typedef struct sluice__lb_ops {
  const char *name;
  /* Sets up d's strategy fields (limit, state). */
  void (*dest_init)(sluice__lb *lb, sluice__lb_dest *d, uint64_t now);
  /* Chooses among the destinations of lb's table (sluice__lb_set_dests)
   * that are candidates (sluice__lb_candidate), reading only their compact
   * records (lb->hot, lb->hot_path). O(1) for rr; for the others O(n) up to
   * cfg.scan_max destinations and O(1) beyond but for a scan when no
   * sample qualifies (sluice__lb_pick_least). Returns PICKED with *chosen
   * set (an index in the table), or why not. */
  sluice__lb_verdict (*pick)(sluice__lb *lb, const sluice__lb_call *call,
                             uint64_t now, size_t *chosen);
  /* Until when d ranks after every destination that is not (the
   * least-loaded picks' tier: btc's saturated mark); 0 = never. Read when
   * d's compact record is written, after every event that may change it.
   * NULL: 0. */
  uint64_t (*demoted_until)(const sluice__lb *lb, const sluice__lb_dest *d);
  /* The call was handed to d's connection. */
  void (*on_sent)(sluice__lb *lb, sluice__lb_dest *d,
                  const sluice__lb_call *call, uint64_t now);
  /* The call sent to d ended. */
  void (*on_complete)(sluice__lb *lb, sluice__lb_dest *d,
                      const sluice__lb_call *call, uint64_t latency_ns,
                      sluice_status_code code, uint32_t resp_size,
                      uint64_t now);
  /* d reported its load. */
  void (*on_peer_load)(sluice__lb *lb, sluice__lb_dest *d,
                       const sluice__lb_peer_load *l, uint64_t now);
  /* A short name of d's state ("normal", "T-mid/C-high" ...). */
  const char *(*state_name)(const sluice__lb_dest *d);
} sluice__lb_ops;

struct sluice__lb {
  const sluice__lb_ops *ops;
  sluice__lb_config cfg;
  /* The table: the destinations picks choose among, in the channel's order
   * (sluice__lb_set_dests), and their compact records, index for index.
   * hot_path[p] is n_cap records from hot_path_block + p * n_cap. */
  sluice__lb_dest **dests;
  sluice__lb_hot *hot;
  sluice__lb_hot_path *hot_path[SLUICE__LB_MAX_PATHS];
  size_t n, n_cap;
  /* Of the table, from the records (sluice__lb_sync keeps them): usable,
   * ejected, and both; skip_ejected = some usable destination is not
   * ejected (candidates leave the ejected out only then). */
  size_t n_usable, n_ejected, n_usable_ejected;
  uint8_t skip_ejected;
  size_t rr_next;
  uint64_t rng; /* xorshift state (p2c) */
  /* Ejections to end: a min-heap of the table's ejected destinations by
   * the end of their ejection, looked at by every pick and completion
   * (O(1) while none ends; O(log n) per ending). Rebuilt with the table. */
  struct sluice__lb_eject_end {
    uint64_t until_ns;
    uint32_t slot;
  } * eject_heap;
  size_t eject_n;
  /* Sampled picks (scan_max): gen counts every event that may let a
   * destination admit a call it refused (a completion, a sent call, a load
   * report, a destination's (re)start, sluice__lb_set_usable,
   * sluice__lb_set_dests, sluice__lb_dest_changed). A full scan
   * that found every usable destination at its limits for a path is
   * remembered, so that while nothing changes the calls of that path are
   * refused in O(1), not by a scan each: an overloaded channel of 10,000
   * destinations drops at the cost of a small one. */
  uint64_t gen;
  uint64_t full_gen;  /* gen of the remembered scan; 0 = none */
  size_t full_n;      /* its number of destinations */
  uint32_t full_path; /* its call's path */
  sluice__lb_verdict full_verdict;
  /* Back-pressure through a chain (docs/flow-control.md). inner: this
   * channel's calls are made by a server's handlers (set at the first
   * child call, and kept): the downstream pressure its destinations report
   * is passed up, not acted on. At the edge (inner 0) it counts as the
   * destination's utilization (sluice__lb_peer_busy), so the edge sheds
   * what the chain's bottleneck cannot take, before any tier has done work
   * for it. */
  int inner;
  double pressure;      /* this channel's own back-pressure, 0..1 (moving
                           average of sluice__lb_pressure_sample over ~100 ms of
                           decisions); < 0 none */
  uint64_t pressure_ns; /* its last decision */
  /* What sluice__lb_pressure_sample adds up, kept as the records change
   * (sluice__lb_sync): the in flight and limits of the usable destinations that
   * have a limit; p_limit is summed anew every SLUICE__LB_RESUM changes so
   * that rounding cannot accumulate. */
  size_t p_n; /* how many such destinations: none, p_limit is 0 */
  uint64_t p_in_flight;
  double p_limit;
  uint32_t p_changes;
  /* The downstream pressures the table's destinations reported (> 0): a
   * max-heap, one entry per report, an entry valid while it is its
   * destination's latest report and fresh (stale ones leave when they
   * come to the top; the heap is rebuilt from the destinations when it
   * holds far more entries than destinations). */
  struct sluice__lb_down {
    double down;
    uint64_t ns;
    uint32_t slot;
  } * down_heap;
  size_t down_n, down_cap;
  int down_scan; /* a report could not be kept (no memory): samples scan
                    the table until it is rebuilt */
};

/* See sluice__lb.p_changes. */
#define SLUICE__LB_RESUM 65536

/* The strategies, by name: "rr", "lcc", "bcc", "btc". NULL if unknown. */
const sluice__lb_ops *sluice__lb_find(const char *name);
extern const sluice__lb_ops sluice__lb_rr, sluice__lb_lcc, sluice__lb_bcc,
    sluice__lb_btc;

/* Sets lb up with ops and cfg (NULL = defaults). */
void sluice__lb_init(sluice__lb *lb, const sluice__lb_ops *ops,
                     const sluice__lb_config *cfg);
/* Frees the table (the destinations are the caller's). */
void sluice__lb_free(sluice__lb *lb);
/* A new destination, in no table yet (slot SLUICE__LB_NO_SLOT). */
void sluice__lb_dest_init(sluice__lb *lb, sluice__lb_dest *d, uint64_t now);
/* d starts afresh as a new server (a reconnection): measurements, limits,
 * strategy state; its stats, usable flag and place in the table stay. */
void sluice__lb_dest_reset(sluice__lb *lb, sluice__lb_dest *d, uint64_t now);
/* The destinations picks choose among from now on, dests[0..n) (copied:
 * the array is the caller's), each destination's record written anew.
 * O(n): called when the set changes, not per call. Returns 0, or -1
 * without memory (the table is then empty: picks find nothing). */
int sluice__lb_set_dests(sluice__lb *lb, sluice__lb_dest *const *dests,
                         size_t n);
/* Non-zero when every record of the table is what a fresh copy of its
 * destination gives, and the counts and sums kept from them are right
 * (O(n): tests, and the channel's debug checks). */
int sluice__lb_records_ok(const sluice__lb *lb);
/* The channel connects or loses d (a pick's candidate or not). */
void sluice__lb_set_usable(sluice__lb *lb, sluice__lb_dest *d, int usable);
/* A field of d that picks read (its compact record) was changed outside
 * lb/ (tests do): the record is written again, and a remembered
 * saturation forgotten (sluice__lb.gen). */
void sluice__lb_dest_changed(sluice__lb *lb, sluice__lb_dest *d);

/* What the channel calls: pick (with algo-time and drop accounting),
 * sent, complete (latency histogram, ok/failed, estimators, then the
 * strategy), peer load report.
 *
 * Outlier ejection wraps every strategy: complete() counts the failures
 * that are the destination's own fault and ejects a destination whose
 * detector fired (when the channel may lose it and another destination
 * fails clearly less); the strategy leaves the ejected destinations out
 * (sluice__lb_candidate) -- unless every usable one is, so that ejection
 * never turns into "no destination". pick() and complete() end the
 * ejections whose time is up first (one test while none is).
 *
 * pick() chooses among the table (sluice__lb_set_dests) and reads only the
 * compact records; *chosen is an index in the table. */
sluice__lb_verdict sluice__lb_pick(sluice__lb *lb, const sluice__lb_call *call,
                                   uint64_t now, size_t *chosen);
void sluice__lb_sent(sluice__lb *lb, sluice__lb_dest *d,
                     const sluice__lb_call *call, uint64_t now);
void sluice__lb_complete(sluice__lb *lb, sluice__lb_dest *d,
                         const sluice__lb_call *call, uint64_t latency_ns,
                         sluice_status_code code, uint32_t resp_size,
                         uint64_t now);
/* How busy d's server says it is, for the throughput axis of the
 * strategies (bcc, btc): its own utilization (peer_util) or, at the edge
 * of a chain (not lb->inner), its downstream pressure when that is
 * higher. < 0: no report. The latency veto (sluice__lb_est_peer_idle)
 * reads the server's own figure, and the downstream pressure only once it
 * reaches SLUICE__LB_CHAIN_BUSY: below that the chain's latency varies
 * with its load and says nothing the edge should act on. */
double sluice__lb_peer_busy(const sluice__lb *lb, const sluice__lb_est *e);

/* Folds one decision at now into lb->pressure: sample 0..1 (a refusal is
 * 1, more is clamped), weighted by the time since the previous one (time
 * constant 100 ms). */
void sluice__lb_pressure_note(sluice__lb *lb, double sample, uint64_t now);
/* The back-pressure the channel sees now (not clamped): the calls in flight
 * and waiting against the usable destinations' limits (0 when none has a
 * limit: rr), or the largest downstream pressure a usable destination
 * reported lately, whichever is higher. O(1) amortised: the sums are kept
 * by sluice__lb_sync, the largest report by a heap. */
double sluice__lb_pressure_sample(sluice__lb *lb, size_t waiting, uint64_t now);
/* (Named _peer_report, not _peer_load: that is the report's type.) */
void sluice__lb_peer_report(sluice__lb *lb, sluice__lb_dest *d,
                            const sluice__lb_peer_load *l, uint64_t now);

/* The call sent to d never reached its server (refused before processing,
 * REFUSED_STREAM / GOAWAY) and is sent again elsewhere: as if never sent,
 * no measurement, no push-back. */
void sluice__lb_unsent(sluice__lb *lb, sluice__lb_dest *d,
                       const sluice__lb_call *call);

/* Non-zero while d is ejected (not picked unless every usable
 * destination is). */
int sluice__lb_ejected(const sluice__lb_dest *d, uint64_t now);

/* Helpers shared by strategies. */
/* Non-zero when the table's destination with record h may be picked:
 * usable, and not ejected unless every usable destination is. */
static inline int sluice__lb_candidate(const sluice__lb *lb,
                                       const sluice__lb_hot *h) {
  return h->usable && !(h->ejected & lb->skip_ejected);
}
/* Why the destination of records h (hp: its record for call's path) cannot
 * take call now, or PICKED: admission (its limit and its path's share,
 * see lb.c) and the deadline (sluice__lb_in_time). */
sluice__lb_verdict sluice__lb_hot_check(const sluice__lb *lb,
                                        const sluice__lb_hot *h,
                                        const sluice__lb_hot_path *hp,
                                        const sluice__lb_call *call,
                                        uint64_t now);
/* The load as the least-loaded strategies rank it: calls in flight,
 * counting the new one, per unit of the admission limit (limit > 0). */
static inline double sluice__lb_hot_load(const sluice__lb_hot *h) {
  return (h->in_flight + 1.0) / h->limit;
}
/* The same on a destination itself (its records computed from it, as
 * sluice__lb_sync would): what the tests and the strategies' own bookkeeping
 * use. */
/* Non-zero when d may take call under limit (its own and its path's). */
int sluice__lb_admits(const sluice__lb *lb, const sluice__lb_dest *d,
                      const sluice__lb_call *call);
/* PICKED when d may take call: admitted (sluice__lb_admits) and in time
 * (sluice__lb_in_time); otherwise why not (OVER_LIMIT, PATH_LIMIT,
 * DEADLINE). d must be usable. */
sluice__lb_verdict sluice__lb_check(const sluice__lb *lb,
                                    const sluice__lb_dest *d,
                                    const sluice__lb_call *call, uint64_t now);
/* Non-zero when call's deadline leaves time for d's expected latency
 * (the call's path's latency when that path was measured here). */
int sluice__lb_in_time(const sluice__lb_dest *d, const sluice__lb_call *call,
                       uint64_t now);
/* sluice__lb_hot_load of d. */
double sluice__lb_load(const sluice__lb_dest *d);
/* The least loaded (sluice__lb_hot_load) of the table's candidates that
 * admit call and can answer it in time, the scan starting after the last
 * pick so ties go round robin. With more than cfg.scan_max destinations,
 * O(1): the best of SLUICE__LB_CHOICES (3) sampled destinations that
 * qualify (power of d choices; Envoy's least_request uses two), up to
 * SLUICE__LB_PROBES samples to find them, and the full scan only when no
 * sample qualifies (so a call is never refused while some destination
 * could take it; a scan that refuses is remembered, see sluice__lb.gen).
 * A demoted destination (ops->demoted_until: btc's saturated ones) ranks
 * after every one that is not. Returns PICKED with *chosen set, NONE when
 * no candidate is usable, else the most frequent refusal (capacity reasons
 * first on a tie). lcc, bcc and btc pick with it. */
sluice__lb_verdict sluice__lb_pick_least(sluice__lb *lb,
                                         const sluice__lb_call *call,
                                         uint64_t now, size_t *chosen);
/* xorshift64* in [0, n). */
size_t sluice__lb_rand(sluice__lb *lb, size_t n);

#endif
