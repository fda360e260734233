/* Log-linear histogram (see histogram.h).
 *
 * Layout: values below 32 have a bucket each (exact). Above, a value whose
 * highest set bit is m (5 <= m <= 39) falls in one of 32 buckets of width
 * 2^(m-5) covering [2^m, 2^(m+1)): its index is (m-5)*32 + (v >> (m-5)),
 * the second term being the value's top six bits (32..63). The indices are
 * contiguous, 0..1151, and a bucket's width is at most 1/32 of the values it
 * holds, which bounds a percentile's relative error. */
#include "core/histogram.h"

#include <string.h>

#define MAX_VALUE ((UINT64_C(1) << 40) - 1)
#define SUB (1u << SLUICE__HIST_SUB_BITS)

static unsigned bucket_of(uint64_t v) {
  if (v < SUB)
    return (unsigned)v;
  unsigned msb = 63u - (unsigned)__builtin_clzll(v);
  unsigned shift = msb - SLUICE__HIST_SUB_BITS;
  return (shift << SLUICE__HIST_SUB_BITS) + (unsigned)(v >> shift);
}

/* The highest value bucket i holds: what a percentile reports, so that a
 * reported p99 is never below the true one by more than rounding. */
static uint64_t bucket_high(unsigned i) {
  if (i < 2 * SUB)
    return i; /* width 1 */
  unsigned shift = (i >> SLUICE__HIST_SUB_BITS) - 1;
  uint64_t mant = i - (shift << SLUICE__HIST_SUB_BITS); /* 32..63 */
  return ((mant + 1) << shift) - 1;
}

void sluice__histogram_init(sluice__histogram *h) { memset(h, 0, sizeof *h); }

void sluice__histogram_record(sluice__histogram *h, uint64_t v) {
  if (v > MAX_VALUE)
    v = MAX_VALUE;
  h->counts[bucket_of(v)]++;
  if (h->total == 0 || v < h->min)
    h->min = v;
  if (h->total == 0 || v > h->max)
    h->max = v;
  h->total++;
  h->sum += (double)v;
}

void sluice__histogram_merge(sluice__histogram *dst,
                             const sluice__histogram *src) {
  if (src->total == 0)
    return;
  for (unsigned i = 0; i < SLUICE__HIST_BUCKETS; i++)
    dst->counts[i] += src->counts[i];
  if (dst->total == 0 || src->min < dst->min)
    dst->min = src->min;
  if (dst->total == 0 || src->max > dst->max)
    dst->max = src->max;
  dst->total += src->total;
  dst->sum += src->sum;
}

uint64_t sluice__histogram_percentile(const sluice__histogram *h, double p) {
  if (h->total == 0)
    return 0;
  if (p <= 0)
    return h->min;
  if (p >= 100)
    return h->max;
  /* The nearest-rank definition: the smallest value with at least p % of
   * the samples at or below it, i.e. sorted[ceil(p/100 * n) - 1]. */
  double want = p / 100.0 * (double)h->total;
  uint64_t rank = (uint64_t)want;
  if ((double)rank < want)
    rank++;
  if (rank < 1)
    rank = 1;
  uint64_t seen = 0;
  for (unsigned i = 0; i < SLUICE__HIST_BUCKETS; i++) {
    seen += h->counts[i];
    if (seen >= rank) {
      uint64_t v = bucket_high(i);
      if (v < h->min)
        v = h->min;
      if (v > h->max)
        v = h->max;
      return v;
    }
  }
  return h->max;
}

double sluice__histogram_mean(const sluice__histogram *h) {
  return h->total ? h->sum / (double)h->total : 0.0;
}
