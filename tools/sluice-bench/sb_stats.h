/* sluice-bench: statistics of one stream of completions. Not thread-safe:
 * keep one per channel (its callbacks all run on the channel's loop thread)
 * and merge them at the end. */
#ifndef SLUICE_BENCH_STATS_H
#define SLUICE_BENCH_STATS_H

#include <stdint.h>

#include "core/histogram.h"

/* Mean and variance by Welford's method (no cancellation: the naive
 * sum-of-squares formula loses every digit when the mean is large against
 * the spread); merged with Chan et al.'s pairwise formula. */
typedef struct sb_welford {
  uint64_t n;
  double mean;
  double m2; /* sum of squared deviations from the mean */
} sb_welford;

void sb_welford_init(sb_welford *w);
void sb_welford_add(sb_welford *w, double x);
void sb_welford_merge(sb_welford *dst, const sb_welford *src);
/* Sample standard deviation (n - 1); 0 below two samples. */
double sb_welford_stddev(const sb_welford *w);

#define SB_N_CODES 17 /* gRPC's status codes 0..16 */

typedef struct sb_stats {
  sluice__histogram hist; /* latency of successful calls, ns */
  sb_welford lat;         /* the same, for mean and standard deviation */
  uint64_t ok;
  uint64_t by_code[SB_N_CODES + 1]; /* failures by code; last: out of range */
} sb_stats;

void sb_stats_init(sb_stats *s);
/* One completed call: its status code and latency in ns. Latency is kept
 * for successful calls only. */
void sb_stats_record(sb_stats *s, int code, uint64_t latency_ns);
void sb_stats_merge(sb_stats *dst, const sb_stats *src);
uint64_t sb_stats_errors(const sb_stats *s);

#endif
