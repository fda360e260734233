/* sluice-bench: the open-loop scheduler. Pure: no clock, no I/O; every
 * function takes `now`, so tests drive it with simulated time.
 *
 * The schedule is fixed in advance by the rate and the arrival process:
 * call k is intended to start at start + sum of the first k gaps (uniform:
 * 1/rate each; Poisson: exponential with mean 1/rate, from a seeded RNG).
 * A sender that falls behind (a stall, or --max-outstanding reached) does
 * not shift the schedule: the calls it owes keep their intended times and
 * are sent as soon as it can, and latency is measured from the intended
 * time, so a stalled server shows up in the tail instead of hiding behind
 * coordinated omission. Calls sent more than `late_ns` after their intended
 * time are counted as late. */
#ifndef SLUICE_BENCH_SCHED_H
#define SLUICE_BENCH_SCHED_H

#include <stdint.h>

typedef enum sb_arrival {
  SB_ARRIVAL_UNIFORM = 0,
  SB_ARRIVAL_POISSON = 1
} sb_arrival;

typedef struct sb_sched {
  sb_arrival arrival;
  double gap_ns;    /* mean gap: 1e9 / rate */
  uint64_t start;   /* intended time of the first call */
  uint64_t k;       /* calls scheduled before the next one */
  double offset;    /* next call's intended time - start (ns) */
  uint64_t rng;     /* splitmix64 state */
  uint64_t late_ns; /* tolerance before a call counts as late */
  uint64_t issued;  /* calls taken */
  uint64_t late;    /* taken more than late_ns after their intended time */
  uint64_t blocked; /* of those taken, how many had waited for a free slot */
} sb_sched;

/* rate in calls per second (> 0); first call intended at start_ns. */
void sb_sched_init(sb_sched *s, sb_arrival arrival, double rate,
                   uint64_t start_ns, uint64_t seed, uint64_t late_ns);

/* Intended time of the next call (not taken yet). */
uint64_t sb_sched_peek(const sb_sched *s);

/* Takes the next call if it is due (intended time <= now): returns 1 and
 * stores its intended time in *intended; counts it late when now is more
 * than late_ns after that, and blocked when `blocked` is set (the sender
 * had to wait for a free slot before it could send). Returns 0 when nothing
 * is due yet (*intended = the time to wait for). */
int sb_sched_next(sb_sched *s, uint64_t now, int blocked, uint64_t *intended);

/* Advances past every call intended before end without sending it and
 * returns how many there were: the calls a sender still owed when the run
 * stopped. */
uint64_t sb_sched_skip_until(sb_sched *s, uint64_t end);

/* The RNG the scheduler uses (splitmix64), exposed for tests: a uniform
 * double in (0, 1). */
double sb_rand01(uint64_t *state);

#endif
