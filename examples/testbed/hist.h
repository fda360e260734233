/* tb_hist: a small log-linear latency histogram for the chain testbed (the
 * library's own is private). Values are nanoseconds, 0 to 2^40 - 1 (~18
 * minutes; larger ones are clamped). Below 2^TB_HIST_SUB_BITS every value
 * has its own bucket; above, each power of two is cut into
 * 2^TB_HIST_SUB_BITS equal buckets, so a bucket's width is at most 1/32 of
 * its lower bound: a percentile read as the bucket's upper bound is at most
 * ~3 % above the true value, never below it. min, max, count and sum are
 * exact.
 *
 * Recording is lock-free (relaxed atomics), so any thread may record while
 * another reads: a reader sees each counter whole, though not all of them
 * at one instant. Header-only; a tb_hist is zero-initialised (static
 * storage or tb_hist_init). */
#ifndef TESTBED_HIST_H
#define TESTBED_HIST_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#define TB_HIST_SUB_BITS 5
#define TB_HIST_MAX_BITS 40
#define TB_HIST_SUB (1u << TB_HIST_SUB_BITS)
#define TB_HIST_BUCKETS                                                        \
  ((TB_HIST_MAX_BITS - TB_HIST_SUB_BITS + 1) * TB_HIST_SUB)

typedef struct tb_hist {
  atomic_uint_fast64_t counts[TB_HIST_BUCKETS];
  atomic_uint_fast64_t n, sum_ns, max_ns;
  atomic_uint_fast64_t min_plus1; /* min + 1; 0 while empty */
} tb_hist;

static inline void tb_hist_init(tb_hist *h) {
  for (unsigned i = 0; i < TB_HIST_BUCKETS; i++)
    atomic_init(&h->counts[i], 0);
  atomic_init(&h->n, 0);
  atomic_init(&h->sum_ns, 0);
  atomic_init(&h->max_ns, 0);
  atomic_init(&h->min_plus1, 0);
}

static inline unsigned tb_hist_index(uint64_t v) {
  if (v >= (1ull << TB_HIST_MAX_BITS))
    v = (1ull << TB_HIST_MAX_BITS) - 1;
  if (v < TB_HIST_SUB)
    return (unsigned)v;
  unsigned e = 63u - (unsigned)__builtin_clzll(v); /* >= TB_HIST_SUB_BITS */
  unsigned shift = e - TB_HIST_SUB_BITS;
  return (shift + 1) * TB_HIST_SUB +
         (unsigned)((v >> shift) - TB_HIST_SUB); /* sub-bucket 0..SUB-1 */
}

/* The bucket's bounds: it holds [lo, hi]. */
static inline uint64_t tb_hist_lo(unsigned i) {
  if (i < TB_HIST_SUB)
    return i;
  unsigned shift = i / TB_HIST_SUB - 1;
  return ((uint64_t)(i % TB_HIST_SUB) + TB_HIST_SUB) << shift;
}

static inline uint64_t tb_hist_hi(unsigned i) {
  if (i < TB_HIST_SUB)
    return i;
  unsigned shift = i / TB_HIST_SUB - 1;
  return tb_hist_lo(i) + ((uint64_t)1 << shift) - 1;
}

static inline void tb_hist_record(tb_hist *h, uint64_t v) {
  atomic_fetch_add_explicit(&h->counts[tb_hist_index(v)], 1,
                            memory_order_relaxed);
  atomic_fetch_add_explicit(&h->n, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&h->sum_ns, v, memory_order_relaxed);
  uint64_t m = atomic_load_explicit(&h->max_ns, memory_order_relaxed);
  while (v > m && !atomic_compare_exchange_weak_explicit(&h->max_ns, &m, v,
                                                         memory_order_relaxed,
                                                         memory_order_relaxed))
    ;
  m = atomic_load_explicit(&h->min_plus1, memory_order_relaxed);
  while ((m == 0 || v + 1 < m) &&
         !atomic_compare_exchange_weak_explicit(&h->min_plus1, &m, v + 1,
                                                memory_order_relaxed,
                                                memory_order_relaxed))
    ;
}

/* The value at percentile p (0..100], nearest rank: the upper bound of the
 * bucket holding that rank, clamped to [min, max]; 0 when empty. The total
 * is the sum of the bucket counts (consistent with the walk even while
 * other threads record). */
static inline uint64_t tb_hist_percentile(const tb_hist *h, double p) {
  uint64_t total = 0;
  for (unsigned i = 0; i < TB_HIST_BUCKETS; i++)
    total += atomic_load_explicit(&h->counts[i], memory_order_relaxed);
  if (total == 0)
    return 0;
  double r = p / 100.0 * (double)total;
  uint64_t rank = (uint64_t)r;
  if ((double)rank < r)
    rank++;
  if (rank < 1)
    rank = 1;
  if (rank > total)
    rank = total;
  uint64_t seen = 0;
  unsigned i = 0;
  for (; i < TB_HIST_BUCKETS; i++) {
    seen += atomic_load_explicit(&h->counts[i], memory_order_relaxed);
    if (seen >= rank)
      break;
  }
  uint64_t v = tb_hist_hi(i < TB_HIST_BUCKETS ? i : TB_HIST_BUCKETS - 1);
  uint64_t max = atomic_load_explicit(&h->max_ns, memory_order_relaxed);
  uint64_t minp1 = atomic_load_explicit(&h->min_plus1, memory_order_relaxed);
  if (v > max)
    v = max;
  if (minp1 != 0 && v < minp1 - 1)
    v = minp1 - 1;
  return v;
}

/* Writes {"n":..,"p50_us":..,"p99_us":..,"max_us":..,"mean_us":..,
 * "min_us":..,"buckets":[[lo_ns,hi_ns,count],...]} (non-empty buckets only,
 * so that a reader can merge instances exactly). */
static inline void tb_hist_json(FILE *f, const tb_hist *h) {
  uint64_t n = atomic_load_explicit(&h->n, memory_order_relaxed);
  uint64_t sum = atomic_load_explicit(&h->sum_ns, memory_order_relaxed);
  uint64_t max = atomic_load_explicit(&h->max_ns, memory_order_relaxed);
  uint64_t minp1 = atomic_load_explicit(&h->min_plus1, memory_order_relaxed);
  fprintf(f,
          "{\"n\":%llu,\"p50_us\":%.3f,\"p99_us\":%.3f,\"max_us\":%.3f,"
          "\"mean_us\":%.3f,\"min_us\":%.3f,\"buckets\":[",
          (unsigned long long)n, (double)tb_hist_percentile(h, 50) / 1e3,
          (double)tb_hist_percentile(h, 99) / 1e3, (double)max / 1e3,
          n ? (double)sum / (double)n / 1e3 : 0.0,
          minp1 ? (double)(minp1 - 1) / 1e3 : 0.0);
  int first = 1;
  for (unsigned i = 0; i < TB_HIST_BUCKETS; i++) {
    uint64_t c = atomic_load_explicit(&h->counts[i], memory_order_relaxed);
    if (c == 0)
      continue;
    fprintf(f, "%s[%llu,%llu,%llu]", first ? "" : ",",
            (unsigned long long)tb_hist_lo(i),
            (unsigned long long)tb_hist_hi(i), (unsigned long long)c);
    first = 0;
  }
  fprintf(f, "]}");
}

#endif
