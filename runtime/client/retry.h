/* Retry decisions (gRFC A6), the retry throttle's token bucket, the retry
 * budget and the backoff delay: the pure part of retries and hedging.
 *
 * The call (call.c) owns every side effect: it gathers the facts of an
 * attempt that failed, asks sluice__retry_decide, and schedules, counts or
 * completes. Nothing here reads a clock or touches a call, so every rule is
 * unit-tested with plain numbers (tests/unit/test_retry.c). Loop thread of
 * the channel that owns the throttle; the functions keep no other state.
 */
#ifndef SLUICE_CLIENT_RETRY_H
#define SLUICE_CLIENT_RETRY_H

#include <stddef.h>
#include <stdint.h>

#include "sluice/resilience.h"
#include "sluice/status.h"

/* gRFC A6 retryThrottling, in milli-tokens as C-core keeps them. */
typedef struct sluice__throttle {
  int32_t max_milli;   /* 0: throttling off */
  int32_t ratio_milli; /* added per success */
  int32_t tokens_milli;
} sluice__throttle;

/* max_tokens 0 turns it off. The bucket starts full. */
void sluice__throttle_init(sluice__throttle *t, uint32_t max_tokens,
                           uint32_t ratio_milli);
/* An attempt of a call with a policy ended OK: tokens grow, capped. */
void sluice__throttle_success(sluice__throttle *t);
/* An attempt failed with a retryable (or non-fatal) code: one token
 * less, floor 0. Returns non-zero when retries are still allowed. */
int sluice__throttle_failure(sluice__throttle *t);
/* Non-zero when retries and hedges are allowed now (tokens > max / 2, or
 * throttling off). */
int sluice__throttle_allows(const sluice__throttle *t);

/* Envoy's retry budget: one more call may go into retry (or one more hedge
 * be sent) when in_retry + 1 <= max(min_concurrency, percent / 100 *
 * active). percent 0 with min_concurrency 0: no budget (always allows). */
int sluice__budget_allows(double percent, uint32_t min_concurrency,
                          uint64_t in_retry, uint64_t active);

/* The delay before a retry, in ms: min(initial * multiplier^(n-1), max)
 * * (0.8 + 0.4 * u) for the n-th retry since the last pushback (n >= 1),
 * u in [0, 1) the caller's random draw. */
uint64_t sluice__retry_backoff_ms(const sluice_retry_policy *p, unsigned n,
                                  double u);

/* grpc-retry-pushback-ms as the server sent it (value of len bytes, not
 * NUL-terminated): 1 with *ms set for a decimal integer >= 0 (values past
 * 2^31 - 1 are taken as that), -1 for a negative or malformed value (gRPC:
 * do not retry), 0 when absent (v NULL). */
int sluice__pushback_parse(const char *v, size_t len, uint64_t *ms);

/* What the call knows of an attempt that ended without being committed to
 * its result. */
typedef struct sluice__retry_facts {
  sluice_status_code code; /* the attempt's final code */
  int committed;         /* response headers seen, or the retry buffer passed */
  unsigned attempts;     /* attempts made so far, this one included */
  unsigned max_attempts; /* the policy's, clamped to the channel's cap */
  int pushback;          /* as sluice__pushback_parse returned */
  uint64_t pushback_ms;
  unsigned backoff_n; /* this would be the n-th retry since a pushback */
  int budget_ok;      /* the retry budget allows one more */
  int breaker_ok;     /* the max_retries circuit breaker allows one more */
  uint64_t now_ns, deadline_ns; /* deadline 0: none */
  double jitter_u;              /* [0, 1) */
} sluice__retry_facts;

typedef enum sluice__retry_verdict {
  SLUICE__RETRY_NO,        /* OK, or a code the policy does not retry */
  SLUICE__RETRY_THROTTLED, /* the token bucket is at or below half */
  SLUICE__RETRY_COMMITTED, /* the call committed to this attempt */
  SLUICE__RETRY_EXHAUSTED, /* max_attempts reached */
  SLUICE__RETRY_PUSHBACK,  /* the server said not to (pushback < 0) */
  SLUICE__RETRY_BUDGET,    /* over the retry budget */
  SLUICE__RETRY_BREAKER,   /* the max_retries breaker is open */
  SLUICE__RETRY_DEADLINE,  /* the retry would start past the deadline */
  SLUICE__RETRY_YES        /* retry after *delay_ms */
} sluice__retry_verdict;

/* Decides in C-core's order (RetryFilter ... ShouldRetry): OK records a
 * success; a code outside p->retryable_codes ends the call untouched;
 * otherwise the throttle records a failure and may refuse; then commit,
 * attempts, pushback, budget, breaker (sluice's additions) and deadline.
 * On YES, *delay_ms is the wait and *reset tells that the backoff exponent
 * restarts (a pushback set the delay). t may be NULL (no throttling). */
sluice__retry_verdict sluice__retry_decide(const sluice_retry_policy *p,
                                           const sluice__retry_facts *f,
                                           sluice__throttle *t,
                                           uint64_t *delay_ms, int *reset);

/* A short name of a verdict for texts and tests ("throttled", ...). */
const char *sluice__retry_verdict_name(sluice__retry_verdict v);

#endif
