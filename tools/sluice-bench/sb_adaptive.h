/* sluice-bench: the adaptive load controller, after Nighthawk's: open-loop
 * steps of a few seconds each; the rate grows by a factor while a step
 * holds the SLO, then a binary search between the last good and the first
 * bad rate narrows the answer down. Bounded by a number of steps (the
 * caller bounds the total time with the step length). Pure: it only turns
 * step outcomes into the next rate. */
#ifndef SLUICE_BENCH_ADAPTIVE_H
#define SLUICE_BENCH_ADAPTIVE_H

typedef struct sb_adaptive {
  double rate;      /* the rate of the next step */
  double good, bad; /* highest rate that held, lowest that did not (0: none) */
  double factor;    /* growth factor while searching upward */
  double precision; /* stop when (bad - good) / bad is below this */
  int steps, max_steps;
  int searching; /* 0: growing, 1: binary search */
} sb_adaptive;

void sb_adaptive_init(sb_adaptive *a, double start_rate, double factor,
                      double precision, int max_steps);
/* The outcome of the step run at a->rate: held != 0 when it met the SLO.
 * Returns 1 when another step should run (at a->rate), 0 when done: the
 * answer is then a->good (0 when even the first rate failed). */
int sb_adaptive_step(sb_adaptive *a, int held);

#endif
