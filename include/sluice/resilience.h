/** @file
 * Resilience settings of a channel: the gRPC service config (as JSON or
 * typed), retries (gRFC A6) with retry throttling and a retry budget,
 * hedging, and circuit breakers. docs/resilience.md is the guide.
 *
 * Every setter here works on channel options (sluice/channel.h) before the
 * channel is made; a channel keeps a deep copy. Setters return 0 or a
 * negative SLUICE_ERR_* value; on SLUICE_ERR_INVALID_ARG,
 * sluice_channel_opts_last_error() names the field that was refused, and
 * the options are left exactly as they were (nothing is half-applied).
 *
 * Precedence for a call, highest first: the call's own options
 * (sluice_call_opts), the channel's service config (JSON or typed), the
 * method's options in its .proto ((sluice.method)), the library defaults.
 *
 * Not thread-safe: one thread sets up an options object.
 */
#ifndef SLUICE_RESILIENCE_H
#define SLUICE_RESILIENCE_H

#include "sluice/export.h"

#include <stddef.h>
#include <stdint.h>

#include "sluice/status.h"

#ifdef __cplusplus
extern "C" {
#endif

struct sluice_channel_opts;

/** The bit of status code c in a set of codes (retryable_codes,
 * non_fatal_codes). */
#define SLUICE_CODE_BIT(c) (1u << (unsigned)(c))

/** A retry policy (gRFC A6 retryPolicy). Durations in milliseconds. */
typedef struct sluice_retry_policy {
  /** Attempts in all, the first one included: at least 2. Values above the
   * channel's cap (sluice_channel_opts_set_max_attempts_cap(), default 5)
   * are clamped to it. */
  uint32_t max_attempts;
  /** Delay before the first retry (> 0). The n-th retry waits
   * min(initial * multiplier^(n-1), max) * U(0.8, 1.2). */
  uint32_t initial_backoff_ms;
  /** Upper bound of the delay (> 0). */
  uint32_t max_backoff_ms;
  /** Growth of the delay per retry (> 0). */
  double backoff_multiplier;
  /** The status codes that are retried: SLUICE_CODE_BIT(code) ORed; not 0,
   * and never OK. */
  uint32_t retryable_codes;
} sluice_retry_policy;

/** A hedging policy (gRFC A6 hedgingPolicy): the same request is sent up
 * to max_attempts times, hedging_delay_ms apart, without waiting for the
 * earlier attempts; the first response headers win and the other attempts
 * are cancelled. For unary and server-streaming methods only (a policy for
 * a client- or bidi-streaming method is ignored). */
typedef struct sluice_hedging_policy {
  /** Attempts in all (at least 2; clamped to the cap as retries). */
  uint32_t max_attempts;
  /** Delay between two hedges; 0 sends them all at once. */
  uint32_t hedging_delay_ms;
  /** Codes that do not end the call: an attempt failing with one of them
   * lets the others (and the hedges still to come) go on. Any other code
   * ends the call with it. SLUICE_CODE_BIT(code) ORed; may be 0. */
  uint32_t non_fatal_codes;
} sluice_hedging_policy;

/** One entry of the service config's methodConfig, typed. A field left at
 * its "unset" value does not override a lower level. */
typedef struct sluice_method_config {
  /** Call timeout in ms when the call sets none; 0: unset. */
  uint64_t timeout_ms;
  /** gRPC's waitForReady: -1 unset, 0 fail fast, 1 wait for a READY
   * destination until the deadline; a call's own
   * sluice_call_opts::wait_for_ready wins over it (docs/keepalive.md). */
  int wait_for_ready;
  /** Largest request message in bytes (maxRequestMessageBytes); 0: unset.
   * The smallest of channel, method and call limits applies, as before. */
  uint32_t max_request_bytes,
      /** Largest response message in bytes (maxResponseMessageBytes); 0:
       * unset. The smallest of the limits applies. */
      max_response_bytes;
  /** Non-zero: retry is the method's policy. At most one of has_retry and
   * has_hedging may be set. */
  int has_retry;
  /** The retry policy; read only when has_retry is set. */
  sluice_retry_policy retry;
  /** Non-zero: hedging is the method's policy. */
  int has_hedging;
  /** The hedging policy; read only when has_hedging is set. */
  sluice_hedging_policy hedging;
} sluice_method_config;

/** Fills mc with "unset everywhere": every field 0, wait_for_ready -1, no
 * policy. Start every sluice_method_config with it, so that fields added
 * later read as unset. Thread-safe (touches only mc).
 * @param mc the config to fill; NULL is ignored */
SLUICE_API void sluice_method_config_init(sluice_method_config *mc);

/** Sets the method config for name: "pkg.Service/Method" (that method),
 * "pkg.Service" (every method of the service without its own entry) or ""
 * (every method without one): exact method beats service beats default.
 * The entry that matches applies whole (as in gRPC, an unset field does
 * not fall back to a less specific entry). Replaces an earlier entry of
 * the same name, also one set by sluice_channel_opts_set_service_config();
 * mc NULL removes it (removing an absent entry is not an error). Checked
 * as the JSON is: max_attempts at least 2, backoffs and multiplier > 0,
 * retryable_codes not 0, no OK bit nor bits above 16, at most one of
 * has_retry and has_hedging, wait_for_ready -1, 0 or 1.
 * @param o the options
 * @param name the method or service the entry is for; copied. A call's
 *   path ("/pkg.Service/Method") names the method too; no other form
 *   starts with '/'
 * @param mc the settings, copied (the caller keeps it); NULL removes the
 *   entry
 * @retval 0 set (or removed)
 * @retval SLUICE_ERR_INVALID_ARG o or name is NULL, name is malformed
 *   ("pkg.Svc/", "/pkg.Svc", "a/b/c"), or a value of mc is refused;
 *   sluice_channel_opts_last_error() names it; the options are unchanged
 * @retval SLUICE_ERR_NOMEM out of memory; the options are unchanged */
SLUICE_API int
sluice_channel_opts_set_method_config(struct sluice_channel_opts *o,
                                      const char *name,
                                      const sluice_method_config *mc);

/** Parses gRPC's service config JSON (https://github.com/grpc/grpc/blob/
 * master/doc/service_config.md): methodConfig (name, timeout, waitForReady,
 * maxRequestMessageBytes, maxResponseMessageBytes, retryPolicy,
 * hedgingPolicy), retryThrottling, loadBalancingConfig (the first entry
 * whose name is a sluice strategy: "round_robin" -> rr, "rr", "lcc",
 * "least_request" -> lcc, "bcc", "btc"; "pick_first" -> rr, the closest
 * sluice has; the deprecated loadBalancingPolicy string is read the same
 * way when loadBalancingConfig is absent) and healthCheckConfig
 * (serviceName, kept for health checking). Unknown top-level fields are
 * ignored, as gRPC does. The config replaces every method config, the
 * throttling and, if it names one, the strategy, all at once; an invalid
 * one is rejected whole: SLUICE_ERR_INVALID_ARG, options untouched, and
 * sluice_channel_opts_last_error() names the field
 * ("methodConfig[0].retryPolicy.maxAttempts: must be an integer > 1").
 *
 * The rules (gRFC A6, service_config.proto): names are unique across the
 * config; a name with a method needs a service. Durations are proto3 JSON
 * strings ("1.5s", "0.000001s"; rounded up to whole ms): timeout and
 * hedgingDelay >= 0 ("0s" timeout: none), initialBackoff and maxBackoff >
 * 0. maxAttempts is an integer > 1 (larger than the cap is clamped later,
 * not refused); backoffMultiplier a number > 0; retryableStatusCodes a
 * non-empty list, nonFatalStatusCodes a list, of code names (any case) or
 * numbers, never OK. maxRequestMessageBytes and maxResponseMessageBytes
 * are integers > 0, as numbers or strings (clamped to 2^32 - 1). retryPolicy
 * and hedgingPolicy exclude each other. retryThrottling needs maxTokens, an
 * integer in 1..1000, and tokenRatio, a number >= 0.001 (decimals past the
 * third are dropped). An unknown field inside a methodConfig or policy is
 * ignored; duplicate keys are refused.
 * @param o the options
 * @param json the config, NUL-terminated UTF-8; read, not kept
 * @retval 0 applied
 * @retval SLUICE_ERR_INVALID_ARG o or json is NULL, the JSON is malformed,
 *   or a field is refused (sluice_channel_opts_last_error() says which);
 *   the options are unchanged
 * @retval SLUICE_ERR_NOMEM out of memory; the options are unchanged */
SLUICE_API int
sluice_channel_opts_set_service_config(struct sluice_channel_opts *o,
                                       const char *json);

/** Retry throttling (gRFC A6 retryThrottling): a token bucket per channel
 * holding max_tokens (1..1000) tokens; each failed attempt with a
 * retryable code takes one, each OK adds token_ratio (> 0, three decimals
 * kept); retries and hedges are sent only while more than half the tokens
 * are left. max_tokens 0 turns throttling off (the default). Replaces the
 * throttling a service config set (and is replaced by a later one).
 * @param o the options
 * @param max_tokens the bucket's size, 1..1000; 0: off
 * @param token_ratio tokens an OK call gives back, >= 0.001; ignored when
 *   max_tokens is 0
 * @retval 0 set
 * @retval SLUICE_ERR_INVALID_ARG o is NULL, max_tokens is over 1000, or
 *   token_ratio is below 0.001 or not a finite number; last_error says
 *   which */
SLUICE_API int sluice_channel_opts_set_retry_throttling(
    struct sluice_channel_opts *o, uint32_t max_tokens, double token_ratio);

/** The retry budget (Envoy's; a sluice addition, on by default whenever a
 * method has a retry or hedging policy): calls in retry, including those
 * waiting out their backoff, and hedges in flight stay at most
 * max(min_retry_concurrency, budget_percent % of the calls in flight and
 * queued). A retry over the budget is not made: the call ends with its
 * last status. Defaults 20 %, 3. budget_percent 0 with
 * min_retry_concurrency 0 turns the budget off; budget_percent must be in
 * [0, 100].
 * @param o the options
 * @param budget_percent share of the calls that may be in retry, 0..100
 * @param min_retry_concurrency calls that may always be in retry
 * @retval 0 set
 * @retval SLUICE_ERR_INVALID_ARG o is NULL or budget_percent is outside
 *   [0, 100] (or NaN) */
SLUICE_API int
sluice_channel_opts_set_retry_budget(struct sluice_channel_opts *o,
                                     double budget_percent,
                                     uint32_t min_retry_concurrency);

/** The largest max_attempts any policy may use (default 5, at least 1):
 * larger values in a policy are clamped to it, not refused. 1 makes every
 * call a single attempt.
 * @param o the options
 * @param max_attempts the cap, at least 1
 * @retval 0 set
 * @retval SLUICE_ERR_INVALID_ARG o is NULL or max_attempts is 0 */
SLUICE_API int
sluice_channel_opts_set_max_attempts_cap(struct sluice_channel_opts *o,
                                         uint32_t max_attempts);

/** Request bytes a call keeps for replay (default 256 KiB, as gRPC's
 * per-RPC retry buffer). A call whose request grows past it commits: it is
 * not retried or hedged from then on, and the bytes are freed as sent.
 * @param o the options
 * @param per_call_bytes the buffer per call, at least 1 (turn retries off
 *   with sluice_channel_opts_set_retries_enabled() instead)
 * @retval 0 set
 * @retval SLUICE_ERR_INVALID_ARG o is NULL or per_call_bytes is 0 */
SLUICE_API int
sluice_channel_opts_set_retry_buffer(struct sluice_channel_opts *o,
                                     uint32_t per_call_bytes);

/** Turns retries and hedging off (enabled: 0) or back on (the default),
 * whatever the method configs say (gRFC A6 "disabling retries").
 * Transparent retries of streams the server never saw are not affected.
 * @param o the options
 * @param enabled 0: off; any other value: on
 * @retval 0 set
 * @retval SLUICE_ERR_INVALID_ARG o is NULL */
SLUICE_API int
sluice_channel_opts_set_retries_enabled(struct sluice_channel_opts *o,
                                        int enabled);

/** Circuit breakers, as Envoy's cluster thresholds (Istio's
 * http2MaxRequests, http1MaxPendingRequests, maxRetries); 0 leaves one
 * off (the default for all three). Each call replaces all three:
 *  - max_requests: calls in flight on the channel, all destinations;
 *  - max_pending: calls waiting for a connection, a stream or in the wait
 *    queue;
 *  - max_retries: retries and hedges in flight (and in backoff).
 * A call over max_requests or max_pending fails at once, without I/O, with
 * RESOURCE_EXHAUSTED "circuit breaker max_requests (20) is open: ..."; a
 * retry over max_retries is not made (the call ends with its last status).
 * Counted apart in the stats; never retried.
 * @param o the options
 * @param max_requests calls in flight on the channel; 0: no limit
 * @param max_pending calls waiting; 0: no limit
 * @param max_retries retries and hedges in flight; 0: no limit
 * @retval 0 set
 * @retval SLUICE_ERR_INVALID_ARG o is NULL */
SLUICE_API int sluice_channel_opts_set_circuit_breakers(
    struct sluice_channel_opts *o, uint32_t max_requests, uint32_t max_pending,
    uint32_t max_retries);

/** Retry, hedging and circuit-breaker counters of one method (or, in
 * sluice_resilience_stats.total, of the channel). */
typedef struct sluice_retry_counters {
  uint64_t calls;                   /**< calls started */
  uint64_t attempts;                /**< attempts sent, first ones included */
  uint64_t retries;                 /**< retry attempts started */
  uint64_t transparent_retries;     /**< replays of streams the server never
                                       saw (REFUSED_STREAM, GOAWAY) */
  uint64_t hedges;                  /**< hedged attempts started */
  uint64_t retries_throttled;       /**< retries not made: token bucket */
  uint64_t retries_budget_denied;   /**< not made: retry budget */
  uint64_t retries_pushback_denied; /**< not made: server pushback < 0 */
  uint64_t retries_deadline_denied; /**< not made: past the deadline */
  uint64_t retries_breaker_denied;  /**< not made: max_retries */
  uint64_t retries_exhausted;       /**< not made: max_attempts reached */
  uint64_t retry_delay_ms_sum;      /**< backoff waited, summed */
  /** Calls by attempts made: [0] one attempt ... [4] five or more. */
  uint64_t calls_by_attempts[5];
} sluice_retry_counters;

/** Resilience statistics of a channel (sluice_channel_get_resilience_stats).
 * Versioned as sluice_call_opts: struct_size first. */
typedef struct sluice_resilience_stats {
  /** Set by sluice_resilience_stats_init(); leave it alone. */
  size_t struct_size;
  sluice_retry_counters total; /**< the channel's */
  /** Calls refused by the max_requests circuit breaker. */
  uint64_t breaker_requests,
      /** Calls refused by the max_pending circuit breaker. */
      breaker_pending;
  uint64_t retries_in_flight; /**< calls in backoff or retrying, now */
  uint64_t hedges_in_flight;  /**< hedged attempts open, now */
  double throttle_tokens;     /**< tokens in the bucket (-1: no throttling) */
  size_t n_methods;           /**< entries in methods */
  /** The counters of one method (an entry of methods). */
  struct sluice_method_retry_stats {
    char path[128]; /**< "/pkg.Svc/Method" (truncated if longer) */
    sluice_retry_counters counters; /**< the method's counters */
  }
      /** Per method, n_methods entries for the methods called so far;
       * malloc'd, owned by the struct: sluice_resilience_stats_clear()
       * frees it. NULL when n_methods is 0. */
      * methods;
} sluice_resilience_stats;

/** Fills the first struct_size bytes of s with zeros and records the
 * size. Programs call sluice_resilience_stats_init(); this form is for
 * bindings that cannot use an inline function. Thread-safe (touches only
 * s).
 * @param s the snapshot to initialise; NULL is ignored
 * @param struct_size sizeof(sluice_resilience_stats) as the caller knows
 *   it; below sizeof(size_t) nothing is done */
SLUICE_API void sluice_resilience_stats_init_sized(sluice_resilience_stats *s,
                                                   size_t struct_size);
/** Zeroes s and records sizeof(sluice_resilience_stats) as this program
 * was compiled.
 * @param s the snapshot to initialise; NULL is ignored */
static inline void sluice_resilience_stats_init(sluice_resilience_stats *s) {
  sluice_resilience_stats_init_sized(s, sizeof(sluice_resilience_stats));
}

#ifdef __cplusplus
}
#endif
#endif
