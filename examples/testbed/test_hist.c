/* testbed_test_hist: hist.h against exact nearest-rank percentiles. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hist.h"

static int failures;

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                          \
      fprintf(stderr, __VA_ARGS__);                                            \
      fputc('\n', stderr);                                                     \
      failures++;                                                              \
    }                                                                          \
  } while (0)

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static uint64_t exact(const uint64_t *sorted, size_t n, double p) {
  size_t k = (size_t)ceil(p / 100.0 * (double)n);
  if (k < 1)
    k = 1;
  if (k > n)
    k = n;
  return sorted[k - 1];
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t next_rand(void) {
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return rng * 2685821657736338717ull;
}

static tb_hist h; /* large: static storage */

int main(void) {
  /* Bucket bounds: contiguous, covering 0 .. 2^40 - 1, width <= lo / 32. */
  for (unsigned i = 0; i + 1 < TB_HIST_BUCKETS; i++) {
    CHECK(tb_hist_hi(i) + 1 == tb_hist_lo(i + 1), "gap after bucket %u", i);
    uint64_t lo = tb_hist_lo(i), hi = tb_hist_hi(i);
    CHECK(tb_hist_index(lo) == i && tb_hist_index(hi) == i,
          "bucket %u: [%llu, %llu] maps elsewhere", i, (unsigned long long)lo,
          (unsigned long long)hi);
    CHECK(lo < TB_HIST_SUB || (hi - lo + 1) * TB_HIST_SUB <= lo,
          "bucket %u too wide", i);
  }
  CHECK(tb_hist_hi(TB_HIST_BUCKETS - 1) == (1ull << TB_HIST_MAX_BITS) - 1,
        "last bucket does not end at 2^40 - 1");
  CHECK(tb_hist_index(~0ull) == TB_HIST_BUCKETS - 1, "no clamp");

  /* Empty. */
  tb_hist_init(&h);
  CHECK(tb_hist_percentile(&h, 99) == 0, "empty p99 not 0");

  /* Log-uniform values from 1 us to 1 s: every percentile within 1/32 above
   * the exact one, never below; max exact. */
  enum { N = 200000 };
  uint64_t *v = malloc(N * sizeof *v);
  if (v == NULL)
    return 1;
  for (size_t i = 0; i < N; i++) {
    double u = (double)(next_rand() >> 11) / 9007199254740992.0;
    v[i] = (uint64_t)(1000.0 * pow(1e6, u));
    tb_hist_record(&h, v[i]);
  }
  qsort(v, N, sizeof *v, cmp_u64);
  const double ps[] = {0.1, 1, 10, 50, 90, 99, 99.9, 99.99, 100};
  for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) {
    uint64_t e = exact(v, N, ps[i]), got = tb_hist_percentile(&h, ps[i]);
    CHECK(got >= e && (double)(got - e) <= (double)e / 32.0 + 1,
          "p%g: %llu, exact %llu", ps[i], (unsigned long long)got,
          (unsigned long long)e);
  }
  CHECK(tb_hist_percentile(&h, 100) == v[N - 1], "p100 is not the max");
  CHECK(atomic_load(&h.max_ns) == v[N - 1], "max");
  CHECK(atomic_load(&h.min_plus1) == v[0] + 1, "min");
  CHECK(atomic_load(&h.n) == N, "n");

  /* One value: every percentile is that value exactly. */
  tb_hist_init(&h);
  tb_hist_record(&h, 123456789);
  CHECK(tb_hist_percentile(&h, 1) == 123456789, "single p1");
  CHECK(tb_hist_percentile(&h, 99) == 123456789, "single p99");

  /* JSON: buckets sum to n. */
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (f == NULL)
    return 1;
  tb_hist_record(&h, 5);
  tb_hist_json(f, &h);
  fclose(f);
  CHECK(strstr(buf, "\"n\":2,") != NULL, "json n: %s", buf);
  CHECK(strstr(buf, "[5,5,1]") != NULL, "json small bucket: %s", buf);
  CHECK(strstr(buf, "\"max_us\":123456.789") != NULL, "json max: %s", buf);
  free(buf);
  free(v);

  if (failures)
    fprintf(stderr, "%d failures\n", failures);
  else
    printf("ok\n");
  return failures != 0;
}
