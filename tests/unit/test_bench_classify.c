/* tools/sluice-bench/sb_stats.c: the kinds of failed calls (sb_classify)
 * from status code and message, with the messages the sluice channel
 * really produces (runtime/client/channel.c, call.c), the same passed
 * through a server chain, and near misses; and that failed calls' latency
 * lands in the histogram of their kind and survives merging. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "sb_stats.h"
#include "sluice/status.h"

static void classify_messages(void **state) {
  (void)state;
  const int RE = SLUICE_STATUS_RESOURCE_EXHAUSTED;
  const int DE = SLUICE_STATUS_DEADLINE_EXCEEDED;
  const struct {
    int code;
    const char *msg;
    sb_kind want;
  } cases[] = {
      /* The channel's own drops. */
      {RE,
       "dropped locally by the btc strategy: every destination is at its "
       "concurrency limit (decided in 12 us)",
       SB_KIND_EARLY_DROP},
      {RE,
       "dropped locally by the bcc strategy: every destination is at its "
       "limit for this method (decided in 0 us)",
       SB_KIND_EARLY_DROP},
      {RE,
       "dropped locally by the btc strategy: wait queue full (decided in 3 "
       "us)",
       SB_KIND_EARLY_DROP},
      {DE,
       "dropped locally by the btc strategy: the remaining deadline is "
       "shorter than the expected latency at every destination (840 us "
       "left; decided in 5 us)",
       SB_KIND_DEADLINE_REFUSAL},
      /* Passed through a chain of sluice servers (a prefix in front). */
      {RE,
       "upstream /bench.Echo/Unary: dropped locally by the btc strategy: "
       "every destination is at its concurrency limit (decided in 7 us)",
       SB_KIND_EARLY_DROP},
      {DE, "layer 2: dropped locally by the lcc strategy: ... (1 us left)",
       SB_KIND_DEADLINE_REFUSAL},
      /* Timeouts: the client's timer, the server's, an expired deadline. */
      {DE, "deadline exceeded after 250 ms", SB_KIND_TIMEOUT},
      {DE, "Deadline Exceeded", SB_KIND_TIMEOUT},
      {DE,
       "deadline already expired before the call started (nothing was "
       "sent)",
       SB_KIND_TIMEOUT},
      {DE, "", SB_KIND_TIMEOUT},
      {DE, NULL, SB_KIND_TIMEOUT},
      /* Everything else, including the right words with the wrong code and
       * RESOURCE_EXHAUSTED for another reason. */
      {RE, "request message larger than max (70000 vs. 65536); not sent",
       SB_KIND_OTHER},
      {RE, NULL, SB_KIND_OTHER},
      {RE, "Dropped Locally", SB_KIND_OTHER}, /* the match is exact */
      {RE, "dropped  locally", SB_KIND_OTHER},
      {SLUICE_STATUS_UNAVAILABLE,
       "dropped locally by the btc strategy: no destination is connected "
       "(decided in 0 us)",
       SB_KIND_OTHER},
      {SLUICE_STATUS_UNAVAILABLE, "connection refused", SB_KIND_OTHER},
      {SLUICE_STATUS_CANCELLED, "channel destroyed", SB_KIND_OTHER},
      {SLUICE_STATUS_INTERNAL, "dropped locally", SB_KIND_OTHER},
      /* A circuit breaker's refusal (sluice/resilience.h), also passed
       * through a chain; the words with another code are something else. */
      {RE, "circuit breaker max_requests (20) is open: 20 calls in flight",
       SB_KIND_BREAKER},
      {RE,
       "circuit breaker max_pending (4) is open; passed on by t1; passed on "
       "by t2",
       SB_KIND_BREAKER},
      {SLUICE_STATUS_UNAVAILABLE, "circuit breaker max_requests (1) is open",
       SB_KIND_OTHER},
      {99, "dropped locally", SB_KIND_OTHER},
      {-1, NULL, SB_KIND_OTHER},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    sb_kind got = sb_classify(cases[i].code, cases[i].msg);
    if (got != cases[i].want)
      print_error("case %zu: code %d \"%s\": %s, want %s\n", i, cases[i].code,
                  cases[i].msg ? cases[i].msg : "(null)", sb_kind_name(got),
                  sb_kind_name(cases[i].want));
    assert_int_equal(got, cases[i].want);
  }
  assert_string_equal(sb_kind_name(SB_KIND_EARLY_DROP), "early_drop");
  assert_string_equal(sb_kind_name(SB_KIND_DEADLINE_REFUSAL),
                      "deadline_refusal");
  assert_string_equal(sb_kind_name(SB_KIND_TIMEOUT), "timeout");
  assert_string_equal(sb_kind_name(SB_KIND_OTHER), "other");
  assert_string_equal(sb_kind_name(SB_KIND_BREAKER), "breaker");
}

static void kind_latency_and_merge(void **state) {
  (void)state;
  const char *drop = "dropped locally by the btc strategy: every destination "
                     "is at its concurrency limit (decided in 1 us)";
  sb_stats a, b, m;
  sb_stats_init(&a);
  sb_stats_init(&b);
  sb_stats_init(&m);
  /* 100 early drops of 1..100 us, split over two workers; 10 timeouts of
   * 250 ms; one other; ok calls must not leak into the kinds. */
  for (uint64_t i = 1; i <= 100; i++)
    sb_stats_record_status(i % 3 ? &a : &b, SLUICE_STATUS_RESOURCE_EXHAUSTED,
                           drop, i * 1000);
  for (int i = 0; i < 10; i++)
    sb_stats_record_status(&b, SLUICE_STATUS_DEADLINE_EXCEEDED,
                           "deadline exceeded after 250 ms", 250000000);
  sb_stats_record_status(&a, SLUICE_STATUS_UNAVAILABLE, "refused", 42000);
  sb_stats_record_status(&a, SLUICE_STATUS_OK, NULL, 5000);
  sb_stats_record(&b, SLUICE_STATUS_DEADLINE_EXCEEDED, 7000); /* no message */
  sb_stats_merge(&m, &a);
  sb_stats_merge(&m, &b);
  const sluice__histogram *e = &m.kind_hist[SB_KIND_EARLY_DROP];
  assert_int_equal(e->total, 100);
  assert_int_equal(e->min, 1000);
  assert_int_equal(e->max, 100000);
  uint64_t p50 = sluice__histogram_percentile(e, 50);
  assert_true(p50 >= 50000 && p50 <= 50000 * 1.04);
  assert_int_equal(m.kind_hist[SB_KIND_DEADLINE_REFUSAL].total, 0);
  assert_int_equal(
      sluice__histogram_percentile(&m.kind_hist[SB_KIND_DEADLINE_REFUSAL], 99),
      0);
  assert_int_equal(m.kind_hist[SB_KIND_TIMEOUT].total, 11);
  assert_int_equal(m.kind_hist[SB_KIND_TIMEOUT].max, 250000000);
  assert_int_equal(m.kind_hist[SB_KIND_TIMEOUT].min, 7000);
  assert_int_equal(m.kind_hist[SB_KIND_OTHER].total, 1);
  assert_int_equal(m.kind_hist[SB_KIND_OTHER].max, 42000);
  assert_int_equal(m.ok, 1);
  assert_int_equal(m.hist.total, 1);
  assert_int_equal(sb_stats_errors(&m), 112);
  assert_int_equal(m.by_code[SLUICE_STATUS_RESOURCE_EXHAUSTED], 100);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(classify_messages),
      cmocka_unit_test(kind_latency_and_merge),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
