/* A log-linear histogram in the manner of HdrHistogram: values from 0 to
 * 2^40 in buckets whose width is 1/32 of their power of two, so any
 * percentile is exact to within ~3 % relative error, with no sampling loss
 * and fixed memory (~10 KiB). Not thread-safe; merge per-thread copies. */
#ifndef SLUICE_CORE_HISTOGRAM_H
#define SLUICE_CORE_HISTOGRAM_H

#include <stdint.h>

#define SLUICE__HIST_SUB_BITS 5 /* 32 sub-buckets per power of two */
#define SLUICE__HIST_BUCKETS                                                   \
  ((40 - SLUICE__HIST_SUB_BITS + 1) << SLUICE__HIST_SUB_BITS)

typedef struct sluice__histogram {
  uint64_t counts[SLUICE__HIST_BUCKETS];
  uint64_t total;
  uint64_t min, max; /* exact */
  double sum;        /* for the mean */
} sluice__histogram;

void sluice__histogram_init(sluice__histogram *h);
/* Records one value (clamped to 2^40 - 1). */
void sluice__histogram_record(sluice__histogram *h, uint64_t v);
/* Adds src's counts into dst. */
void sluice__histogram_merge(sluice__histogram *dst,
                             const sluice__histogram *src);
/* The value at percentile p (0..100): the highest value of the bucket that
 * holds it, clamped to [min, max]; 0 when empty. */
uint64_t sluice__histogram_percentile(const sluice__histogram *h, double p);
double sluice__histogram_mean(const sluice__histogram *h);

#endif
