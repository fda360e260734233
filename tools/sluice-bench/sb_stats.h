/* sluice-bench: statistics of one stream of completions. Not thread-safe:
 * keep one per event-loop thread (the callbacks of its channels all run on
 * it) and merge them at the end. */
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

/* What kind of failure a failed call is, from its status code and message.
 * The sluice channel fails a call it drops without sending it with a
 * message containing "dropped locally" (RESOURCE_EXHAUSTED: every
 * destination at its limit; DEADLINE_EXCEEDED: it could not be answered in
 * time), one its circuit breaker refuses with RESOURCE_EXHAUSTED "circuit
 * breaker ... is open" (sluice/resilience.h), and a chain of sluice servers
 * passes those messages through. */
typedef enum sb_kind {
  SB_KIND_EARLY_DROP = 0,       /* RESOURCE_EXHAUSTED, "dropped locally" */
  SB_KIND_DEADLINE_REFUSAL = 1, /* DEADLINE_EXCEEDED, "dropped locally" */
  SB_KIND_TIMEOUT = 2,          /* any other DEADLINE_EXCEEDED */
  SB_KIND_OTHER = 3,            /* everything else */
  SB_KIND_BREAKER = 4,          /* RESOURCE_EXHAUSTED, "circuit breaker" */
  SB_N_KINDS = 5
} sb_kind;

/* The kind of a failed call (code != OK; message may be NULL). */
sb_kind sb_classify(int code, const char *message);
/* "early_drop", "deadline_refusal", "timeout", "other", "breaker" (the
 * JSON keys). */
const char *sb_kind_name(sb_kind k);

typedef struct sb_stats {
  sluice__histogram hist; /* latency of successful calls, ns */
  sb_welford lat;         /* the same, for mean and standard deviation */
  uint64_t ok;
  uint64_t by_code[SB_N_CODES + 1]; /* failures by code; last: out of range */
  sluice__histogram kind_hist[SB_N_KINDS]; /* latency of failures, by kind */
} sb_stats;

void sb_stats_init(sb_stats *s);
/* One completed call: its status code, status message (may be NULL) and
 * latency in ns. A successful call's latency goes to hist and lat, a failed
 * one's to the histogram of its kind (sb_classify). */
void sb_stats_record_status(sb_stats *s, int code, const char *message,
                            uint64_t latency_ns);
/* The same without a message. */
void sb_stats_record(sb_stats *s, int code, uint64_t latency_ns);
void sb_stats_merge(sb_stats *dst, const sb_stats *src);
uint64_t sb_stats_errors(const sb_stats *s);

#endif
