/* Open-loop scheduler (see sb_sched.h). */
#include "sb_sched.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *s) {
  uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));
  z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
  return z ^ (z >> 31);
}

double sb_rand01(uint64_t *state) {
  /* 53 random bits, shifted off zero so that log() is finite. */
  return ((double)(splitmix64(state) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

/* Moves to the following call. Uniform offsets are k gaps, computed, not
 * summed, so they never drift; Poisson offsets add exponential gaps. */
static void advance(sb_sched *s) {
  s->k++;
  if (s->arrival == SB_ARRIVAL_POISSON)
    s->offset += -log(sb_rand01(&s->rng)) * s->gap_ns;
  else
    s->offset = (double)s->k * s->gap_ns;
}

static uint64_t next_time(const sb_sched *s) {
  return s->start + (uint64_t)llround(s->offset);
}

void sb_sched_init(sb_sched *s, sb_arrival arrival, double rate,
                   uint64_t start_ns, uint64_t seed, uint64_t late_ns) {
  s->arrival = arrival;
  s->gap_ns = rate > 0 ? 1e9 / rate : 1e18;
  s->start = start_ns;
  s->k = 0;
  s->offset = 0;
  s->rng = seed;
  s->late_ns = late_ns;
  s->issued = s->late = s->blocked = 0;
}

uint64_t sb_sched_peek(const sb_sched *s) { return next_time(s); }

int sb_sched_next(sb_sched *s, uint64_t now, int blocked, uint64_t *intended) {
  uint64_t t = next_time(s);
  *intended = t;
  if (t > now)
    return 0;
  s->issued++;
  if (now - t > s->late_ns)
    s->late++;
  if (blocked)
    s->blocked++;
  advance(s);
  return 1;
}

uint64_t sb_sched_skip_until(sb_sched *s, uint64_t end) {
  uint64_t n = 0;
  while (next_time(s) < end) {
    advance(s);
    n++;
  }
  return n;
}
