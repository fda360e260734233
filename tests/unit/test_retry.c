/* client/retry.c: the retry throttle's token bucket (gRFC A6, in
 * milli-tokens as C-core), the retry budget, the backoff delays, the
 * pushback header and the order in which a failed attempt's retry is
 * decided; and the send queue's retention limit and copy that retries and
 * hedges rely on. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include <sluice/status.h>

#include "client/retry.h"
#include "transport/sendq.h"

static sluice_retry_policy policy(void) {
  sluice_retry_policy p;
  memset(&p, 0, sizeof p);
  p.max_attempts = 5;
  p.initial_backoff_ms = 100;
  p.max_backoff_ms = 1000;
  p.backoff_multiplier = 2;
  p.retryable_codes = SLUICE_CODE_BIT(SLUICE_STATUS_UNAVAILABLE);
  return p;
}

static sluice__retry_facts facts(sluice_status_code code) {
  sluice__retry_facts f;
  memset(&f, 0, sizeof f);
  f.code = code;
  f.attempts = 1;
  f.max_attempts = 5;
  f.backoff_n = 1;
  f.budget_ok = 1;
  f.breaker_ok = 1;
  f.now_ns = 1000000000ull;
  f.jitter_u = 0.5;
  return f;
}

/* maxTokens 10, tokenRatio 0.1: the bucket starts full; a failure takes a
 * token; retries only while tokens > 5; a success adds 0.1, capped. */
static void test_throttle(void **state) {
  (void)state;
  sluice__throttle t;
  sluice__throttle_init(&t, 10, 100);
  assert_int_equal(t.tokens_milli, 10000);
  assert_true(sluice__throttle_allows(&t));
  for (int i = 0; i < 4; i++)
    assert_true(sluice__throttle_failure(&t)); /* 9, 8, 7, 6 */
  assert_false(sluice__throttle_failure(&t));  /* 5: not > 5 */
  assert_false(sluice__throttle_allows(&t));
  sluice__throttle_success(&t); /* 5.1 */
  assert_true(sluice__throttle_allows(&t));
  assert_int_equal(t.tokens_milli, 5100);
  for (int i = 0; i < 200; i++)
    sluice__throttle_success(&t);
  assert_int_equal(t.tokens_milli, 10000); /* capped */
  for (int i = 0; i < 50; i++)
    sluice__throttle_failure(&t);
  assert_int_equal(t.tokens_milli, 0); /* floor */

  /* Off: always allows, never changes. */
  sluice__throttle off;
  sluice__throttle_init(&off, 0, 100);
  assert_true(sluice__throttle_failure(&off));
  assert_true(sluice__throttle_allows(&off));
  /* Past 1000 tokens: clamped. */
  sluice__throttle big;
  sluice__throttle_init(&big, 5000, 1);
  assert_int_equal(big.max_milli, 1000000);
}

/* Envoy's budget: in_retry + 1 <= max(min, percent of active). */
static void test_budget(void **state) {
  (void)state;
  assert_true(sluice__budget_allows(20, 3, 0, 0));
  assert_true(sluice__budget_allows(20, 3, 2, 0));
  assert_false(sluice__budget_allows(20, 3, 3, 0));
  assert_true(sluice__budget_allows(20, 3, 19, 100)); /* 20 % of 100 */
  assert_false(sluice__budget_allows(20, 3, 20, 100));
  assert_true(sluice__budget_allows(0, 0, 1000, 1)); /* off */
  assert_false(sluice__budget_allows(0, 1, 1, 1000));
}

/* min(initial * mult^(n-1), max) * (0.8 + 0.4 u). */
static void test_backoff(void **state) {
  (void)state;
  sluice_retry_policy p = policy();
  assert_int_equal(sluice__retry_backoff_ms(&p, 1, 0.5), 100);
  assert_int_equal(sluice__retry_backoff_ms(&p, 2, 0.5), 200);
  assert_int_equal(sluice__retry_backoff_ms(&p, 3, 0.5), 400);
  assert_int_equal(sluice__retry_backoff_ms(&p, 4, 0.5), 800);
  assert_int_equal(sluice__retry_backoff_ms(&p, 5, 0.5), 1000);
  assert_int_equal(sluice__retry_backoff_ms(&p, 1, 0.0), 80);
  assert_int_equal(sluice__retry_backoff_ms(&p, 1, 0.9999999), 120);
  /* Out-of-range draws are clamped; huge n stays at the cap. */
  assert_int_equal(sluice__retry_backoff_ms(&p, 1, -3), 80);
  assert_true(sluice__retry_backoff_ms(&p, 1, 7) <= 120);
  assert_int_equal(sluice__retry_backoff_ms(&p, 4000000000u, 0.5), 1000);
  p.backoff_multiplier = 1;
  assert_int_equal(sluice__retry_backoff_ms(&p, 4, 0.5), 100);
}

static void test_pushback_parse(void **state) {
  (void)state;
  uint64_t ms = 7;
  assert_int_equal(sluice__pushback_parse(NULL, 0, &ms), 0);
  assert_int_equal(sluice__pushback_parse("250", 3, &ms), 1);
  assert_int_equal(ms, 250);
  assert_int_equal(sluice__pushback_parse("0", 1, &ms), 1);
  assert_int_equal(ms, 0);
  assert_int_equal(sluice__pushback_parse("-1", 2, &ms), -1);
  assert_int_equal(sluice__pushback_parse("abc", 3, &ms), -1);
  assert_int_equal(sluice__pushback_parse("1.5", 3, &ms), -1);
  assert_int_equal(sluice__pushback_parse("", 0, &ms), -1);
  assert_int_equal(sluice__pushback_parse("99999999999999999999", 20, &ms), 1);
  assert_int_equal(ms, 2147483647);
  /* Only len bytes count: "25" of "250". */
  assert_int_equal(sluice__pushback_parse("250", 2, &ms), 1);
  assert_int_equal(ms, 25);
}

/* The order of C-core's ShouldRetry, with sluice's budget and breaker. */
static void test_decide_order(void **state) {
  (void)state;
  sluice_retry_policy p = policy();
  sluice__throttle t;
  uint64_t d;
  int reset;

  /* OK: no retry, the throttle hears of the success. */
  sluice__throttle_init(&t, 10, 500);
  t.tokens_milli = 6000;
  sluice__retry_facts f = facts(SLUICE_STATUS_OK);
  assert_int_equal(sluice__retry_decide(&p, &f, &t, &d, &reset),
                   SLUICE__RETRY_NO);
  assert_int_equal(t.tokens_milli, 6500);

  /* A code the policy does not name: the throttle never hears of it. */
  f = facts(SLUICE_STATUS_INTERNAL);
  assert_int_equal(sluice__retry_decide(&p, &f, &t, &d, &reset),
                   SLUICE__RETRY_NO);
  assert_int_equal(t.tokens_milli, 6500);
  f.code = (sluice_status_code)40; /* outside the mask: not retried */
  assert_int_equal(sluice__retry_decide(&p, &f, &t, &d, &reset),
                   SLUICE__RETRY_NO);

  /* The throttle comes first, even for a committed call. */
  f = facts(SLUICE_STATUS_UNAVAILABLE);
  f.committed = 1;
  t.tokens_milli = 5500; /* 4.5 after this failure */
  assert_int_equal(sluice__retry_decide(&p, &f, &t, &d, &reset),
                   SLUICE__RETRY_THROTTLED);
  t.tokens_milli = 10000;
  assert_int_equal(sluice__retry_decide(&p, &f, &t, &d, &reset),
                   SLUICE__RETRY_COMMITTED);
  t.tokens_milli = 10000; /* each failure takes one */
  f.committed = 0;
  f.attempts = 5;
  f.pushback = -1;
  assert_int_equal(sluice__retry_decide(&p, &f, &t, &d, &reset),
                   SLUICE__RETRY_EXHAUSTED);
  t.tokens_milli = 10000; /* each failure takes one */
  f.attempts = 2;
  f.budget_ok = 0;
  assert_int_equal(sluice__retry_decide(&p, &f, &t, &d, &reset),
                   SLUICE__RETRY_PUSHBACK);
  t.tokens_milli = 10000; /* each failure takes one */
  f.pushback = 0;
  f.breaker_ok = 0;
  assert_int_equal(sluice__retry_decide(&p, &f, &t, &d, &reset),
                   SLUICE__RETRY_BUDGET);
  t.tokens_milli = 10000; /* each failure takes one */
  f.budget_ok = 1;
  assert_int_equal(sluice__retry_decide(&p, &f, &t, &d, &reset),
                   SLUICE__RETRY_BREAKER);
  f.breaker_ok = 1;

  /* The delay: the backoff of the n-th retry since a pushback... */
  f.backoff_n = 3;
  assert_int_equal(sluice__retry_decide(&p, &f, NULL, &d, &reset),
                   SLUICE__RETRY_YES);
  assert_int_equal(d, 400);
  assert_int_equal(reset, 0);
  /* ...or exactly the pushback, which restarts the exponent. */
  f.pushback = 1;
  f.pushback_ms = 1234;
  assert_int_equal(sluice__retry_decide(&p, &f, NULL, &d, &reset),
                   SLUICE__RETRY_YES);
  assert_int_equal(d, 1234);
  assert_int_equal(reset, 1);
  /* A retry that would start at or past the deadline is not made. */
  f.deadline_ns = f.now_ns + 1234 * 1000000ull;
  assert_int_equal(sluice__retry_decide(&p, &f, NULL, &d, &reset),
                   SLUICE__RETRY_DEADLINE);
  f.deadline_ns += 1000000;
  assert_int_equal(sluice__retry_decide(&p, &f, NULL, &d, &reset),
                   SLUICE__RETRY_YES);

  for (int v = SLUICE__RETRY_NO; v <= SLUICE__RETRY_YES; v++)
    assert_true(strlen(sluice__retry_verdict_name((sluice__retry_verdict)v)) >
                0);
}

/* The A6 pattern on an always failing server, 5 attempts, maxTokens 10
 * ratio 0.1: 5, 1, 1 attempts. */
static void test_throttle_pattern(void **state) {
  (void)state;
  sluice_retry_policy p = policy();
  sluice__throttle t;
  sluice__throttle_init(&t, 10, 100);
  int want[] = {5, 1, 1};
  for (int call = 0; call < 3; call++) {
    sluice__retry_facts f = facts(SLUICE_STATUS_UNAVAILABLE);
    uint64_t d;
    int reset;
    while (sluice__retry_decide(&p, &f, &t, &d, &reset) == SLUICE__RETRY_YES)
      f.attempts++;
    assert_int_equal(f.attempts, want[call]);
  }
}

static uint8_t *bytes(size_t len, uint8_t seed) {
  uint8_t *b = malloc(len);
  assert_non_null(b);
  memset(b, seed, len);
  return b;
}

/* Retention up to a limit: past it, what was kept is dropped for good and
 * the queue can no longer be rewound (the call commits). */
static void test_sendq_retain_limit(void **state) {
  (void)state;
  sluice__sendq q;
  assert_int_equal(sluice__sendq_init(&q, 0), 0);
  sluice__sendq_retain_upto(&q, 100);
  int deferred;
  assert_int_equal(sluice__sendq_push(&q, bytes(60, 1), 60, 1, &deferred), 0);
  uint8_t out[200];
  size_t n = 0;
  int flags = 0;
  sluice__sendq_read(&q, out, sizeof out, &n, &flags);
  assert_int_equal(n, 60);
  assert_false(sluice__sendq_retain_dropped(&q));
  assert_int_equal(sluice__sendq_rewind(&q), 0);
  assert_int_equal(sluice__sendq_push(&q, bytes(60, 2), 60, 1, &deferred), 0);
  assert_true(sluice__sendq_retain_dropped(&q));
  sluice__sendq_read(&q, out, sizeof out, &n, &flags);
  assert_int_equal(sluice__sendq_rewind(&q), -1);
  sluice__sendq_destroy(&q);
}

/* A hedge's copy: everything the source keeps, sent or not, and closed
 * when the source is. */
static void test_sendq_copy(void **state) {
  (void)state;
  sluice__sendq src, dst;
  assert_int_equal(sluice__sendq_init(&src, 0), 0);
  assert_int_equal(sluice__sendq_init(&dst, 0), 0);
  sluice__sendq_retain(&src);
  int deferred;
  assert_int_equal(sluice__sendq_push(&src, bytes(10, 7), 10, 1, &deferred), 0);
  uint8_t out[64];
  size_t n = 0;
  int flags = 0;
  sluice__sendq_read(&src, out, 4, &n, &flags); /* partly sent */
  assert_int_equal(sluice__sendq_push(&src, bytes(5, 9), 5, 1, &deferred), 0);
  sluice__sendq_close(&src, &deferred);
  assert_int_equal(sluice__sendq_copy(&dst, &src), 0);
  assert_true(sluice__sendq_is_closed(&dst));
  assert_int_equal(sluice__sendq_queued(&dst), 15);
  size_t got = 0;
  for (int i = 0; i < 10 && got < 15; i++) {
    sluice__sendq_read(&dst, out + got, sizeof out - got, &n, &flags);
    got += n;
  }
  assert_int_equal(got, 15);
  for (size_t i = 0; i < 10; i++)
    assert_int_equal(out[i], 7);
  for (size_t i = 10; i < 15; i++)
    assert_int_equal(out[i], 9);
  sluice__sendq_destroy(&src);
  sluice__sendq_destroy(&dst);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_throttle),
      cmocka_unit_test(test_budget),
      cmocka_unit_test(test_backoff),
      cmocka_unit_test(test_pushback_parse),
      cmocka_unit_test(test_decide_order),
      cmocka_unit_test(test_throttle_pattern),
      cmocka_unit_test(test_sendq_retain_limit),
      cmocka_unit_test(test_sendq_copy),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
