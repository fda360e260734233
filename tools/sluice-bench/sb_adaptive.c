/* Adaptive load controller (see sb_adaptive.h). */
#include "sb_adaptive.h"

void sb_adaptive_init(sb_adaptive *a, double start_rate, double factor,
                      double precision, int max_steps) {
  a->rate = start_rate;
  a->good = a->bad = 0;
  a->factor = factor > 1 ? factor : 2;
  a->precision = precision > 0 ? precision : 0.05;
  a->steps = 0;
  a->max_steps = max_steps;
  a->searching = 0;
}

int sb_adaptive_step(sb_adaptive *a, int held) {
  a->steps++;
  if (held) {
    if (a->rate > a->good)
      a->good = a->rate;
  } else if (a->bad == 0 || a->rate < a->bad) {
    a->bad = a->rate;
  }
  if (!held)
    a->searching = 1;
  if (a->steps >= a->max_steps)
    return 0;
  if (!a->searching) {
    a->rate *= a->factor;
    return 1;
  }
  /* Binary search in (good, bad); with no good rate yet, below bad. */
  if ((a->bad - a->good) / a->bad < a->precision)
    return 0;
  a->rate = (a->good + a->bad) / 2;
  return a->rate >= 1;
}
