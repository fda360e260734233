/* Retry decisions, the throttle, the budget and the backoff (retry.h). */
#include "client/retry.h"

void sluice__throttle_init(sluice__throttle *t, uint32_t max_tokens,
                           uint32_t ratio_milli) {
  if (max_tokens > 1000)
    max_tokens = 1000;
  t->max_milli = (int32_t)max_tokens * 1000;
  t->ratio_milli = (int32_t)ratio_milli;
  t->tokens_milli = t->max_milli;
}

void sluice__throttle_success(sluice__throttle *t) {
  if (!t->max_milli)
    return;
  t->tokens_milli += t->ratio_milli;
  if (t->tokens_milli > t->max_milli)
    t->tokens_milli = t->max_milli;
}

int sluice__throttle_failure(sluice__throttle *t) {
  if (!t->max_milli)
    return 1;
  t->tokens_milli -= 1000;
  if (t->tokens_milli < 0)
    t->tokens_milli = 0;
  return sluice__throttle_allows(t);
}

int sluice__throttle_allows(const sluice__throttle *t) {
  return !t->max_milli || t->tokens_milli > t->max_milli / 2;
}

int sluice__budget_allows(double percent, uint32_t min_concurrency,
                          uint64_t in_retry, uint64_t active) {
  if (percent <= 0 && min_concurrency == 0)
    return 1;
  double cap = percent / 100.0 * (double)active;
  if (cap < (double)min_concurrency)
    cap = (double)min_concurrency;
  return (double)(in_retry + 1) <= cap;
}

uint64_t sluice__retry_backoff_ms(const sluice_retry_policy *p, unsigned n,
                                  double u) {
  double d = (double)p->initial_backoff_ms;
  /* Grows until it passes the cap; a loop (not pow) stops early and never
   * overflows whatever n is. */
  for (unsigned i = 1; i < n && d < (double)p->max_backoff_ms; i++)
    d *= p->backoff_multiplier;
  if (d > (double)p->max_backoff_ms)
    d = (double)p->max_backoff_ms;
  if (u < 0)
    u = 0;
  if (u >= 1)
    u = 0.999999;
  d *= 0.8 + 0.4 * u;
  return (uint64_t)(d + 0.5);
}

int sluice__pushback_parse(const char *v, size_t len, uint64_t *ms) {
  if (!v)
    return 0;
  if (len == 0)
    return -1;
  uint64_t x = 0;
  for (size_t i = 0; i < len; i++) {
    if (v[i] < '0' || v[i] > '9')
      return -1; /* "-1", "abc", "1.5": gRPC does not retry */
    if (x < INT32_MAX)
      x = x * 10 + (uint64_t)(v[i] - '0');
  }
  *ms = x > INT32_MAX ? INT32_MAX : x;
  return 1;
}

sluice__retry_verdict sluice__retry_decide(const sluice_retry_policy *p,
                                           const sluice__retry_facts *f,
                                           sluice__throttle *t,
                                           uint64_t *delay_ms, int *reset) {
  *delay_ms = 0;
  *reset = 0;
  if (f->code == SLUICE_STATUS_OK) {
    if (t)
      sluice__throttle_success(t);
    return SLUICE__RETRY_NO;
  }
  if ((unsigned)f->code >= 32 ||
      !(p->retryable_codes & SLUICE_CODE_BIT(f->code)))
    return SLUICE__RETRY_NO; /* the throttle never hears of it */
  if (t && !sluice__throttle_failure(t))
    return SLUICE__RETRY_THROTTLED;
  if (f->committed)
    return SLUICE__RETRY_COMMITTED;
  if (f->attempts >= f->max_attempts)
    return SLUICE__RETRY_EXHAUSTED;
  if (f->pushback < 0)
    return SLUICE__RETRY_PUSHBACK;
  if (!f->budget_ok)
    return SLUICE__RETRY_BUDGET;
  if (!f->breaker_ok)
    return SLUICE__RETRY_BREAKER;
  uint64_t d;
  if (f->pushback > 0) {
    d = f->pushback_ms;
    *reset = 1;
  } else {
    d = sluice__retry_backoff_ms(p, f->backoff_n ? f->backoff_n : 1,
                                 f->jitter_u);
  }
  if (f->deadline_ns && f->now_ns + d * 1000000ull >= f->deadline_ns)
    return SLUICE__RETRY_DEADLINE;
  *delay_ms = d;
  return SLUICE__RETRY_YES;
}

const char *sluice__retry_verdict_name(sluice__retry_verdict v) {
  switch (v) {
  case SLUICE__RETRY_NO:
    return "not retryable";
  case SLUICE__RETRY_THROTTLED:
    return "retry throttled";
  case SLUICE__RETRY_COMMITTED:
    return "committed";
  case SLUICE__RETRY_EXHAUSTED:
    return "max attempts reached";
  case SLUICE__RETRY_PUSHBACK:
    return "server pushback";
  case SLUICE__RETRY_BUDGET:
    return "retry budget exhausted";
  case SLUICE__RETRY_BREAKER:
    return "max_retries circuit breaker open";
  case SLUICE__RETRY_DEADLINE:
    return "retry would pass the deadline";
  case SLUICE__RETRY_YES:
    return "retry";
  }
  return "?";
}
