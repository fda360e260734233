/* A wave of live objects (connections, calls) whose memory goes back to the
 * system when it ebbs.
 *
 * Why: malloc keeps freed memory for reuse, and the blocks a loop thread
 * caches are scattered through it and pin its pages, so a server that once
 * held many connections or calls keeps their memory after they are gone.
 * Trimming on every free would cost too much; a wave counts the live
 * objects and says when to trim: after a peak of at least min_peak, when
 * the count falls to half of it, then to each further half, and to none
 * (about log2(peak) trims per wave). Plain counters: one thread only.
 */
#ifndef SLUICE_CORE_WAVE_H
#define SLUICE_CORE_WAVE_H

#include <stddef.h>

typedef struct sluice__wave {
  size_t n;       /* live now */
  size_t peak;    /* most in this wave (0: none) */
  size_t trim_at; /* trim when down to this many */
} sluice__wave;

/* One more object. */
static inline void sluice__wave_up(sluice__wave *w) {
  if (++w->n > w->peak) {
    w->peak = w->n;
    w->trim_at = w->n / 2;
  }
}

/* One object fewer. Returns non-zero when the caller should give memory
 * back now (see the top of this file). */
static inline int sluice__wave_down(sluice__wave *w, size_t min_peak) {
  w->n--;
  if (w->peak < min_peak || (w->n > w->trim_at && w->n > 0))
    return 0;
  w->trim_at = w->n / 2;
  if (w->n == 0)
    w->peak = 0; /* the wave is over */
  return 1;
}

#endif
