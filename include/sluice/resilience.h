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
  /** gRPC's waitForReady: -1 unset, 0 fail fast, 1 wait. Stored and
   * reported; the connection issue makes the picker honour it. */
  int wait_for_ready;
  /** Largest request / response message in bytes; 0: unset. The smallest
   * of channel, method and call limits applies, as before. */
  uint32_t max_request_bytes, max_response_bytes;
  /** Non-zero: retry is the method's policy. At most one of has_retry and
   * has_hedging may be set. */
  int has_retry;
  sluice_retry_policy retry;
  /** Non-zero: hedging is the method's policy. */
  int has_hedging;
  sluice_hedging_policy hedging;
} sluice_method_config;

/** Fills mc with "unset everywhere". */
SLUICE_API void sluice_method_config_init(sluice_method_config *mc);

/** Sets the method config for name: "pkg.Service/Method" (that method),
 * "pkg.Service" (every method of the service without its own entry) or ""
 * (every method without one): exact method beats service beats default.
 * Replaces an earlier entry of the same name; mc NULL removes it. Returns
 * 0, SLUICE_ERR_INVALID_ARG (a bad name or value; last_error says which)
 * or SLUICE_ERR_NOMEM. */
SLUICE_API int sluice_channel_opts_set_method_config(
    struct sluice_channel_opts *o, const char *name,
    const sluice_method_config *mc);

/** Parses gRPC's service config JSON (https://github.com/grpc/grpc/blob/
 * master/doc/service_config.md): methodConfig (name, timeout, waitForReady,
 * maxRequestMessageBytes, maxResponseMessageBytes, retryPolicy,
 * hedgingPolicy), retryThrottling, loadBalancingConfig (the first entry
 * whose name is a sluice strategy: "round_robin" -> rr, "rr", "lcc",
 * "least_request" -> lcc, "bcc", "btc"; "pick_first" -> rr) and
 * healthCheckConfig (serviceName, kept for health checking). Unknown
 * top-level fields are ignored, as gRPC does. The config replaces every
 * method config, the throttling and, if it names one, the strategy, all at
 * once; an invalid one is rejected whole: SLUICE_ERR_INVALID_ARG, options
 * untouched, and sluice_channel_opts_last_error() names the field
 * ("methodConfig[0].retryPolicy.maxAttempts: must be an integer > 1"). */
SLUICE_API int
sluice_channel_opts_set_service_config(struct sluice_channel_opts *o,
                                       const char *json);

/** Retry throttling (gRFC A6 retryThrottling): a token bucket per channel
 * holding max_tokens (1..1000) tokens; each failed attempt with a
 * retryable code takes one, each OK adds token_ratio (> 0, three decimals
 * kept); retries and hedges are sent only while more than half the tokens
 * are left. max_tokens 0 turns throttling off (the default). */
SLUICE_API int
sluice_channel_opts_set_retry_throttling(struct sluice_channel_opts *o,
                                         uint32_t max_tokens,
                                         double token_ratio);

/** The retry budget (Envoy's; a sluice addition, on by default whenever a
 * method has a retry or hedging policy): calls in retry, including those
 * waiting out their backoff, and hedges in flight stay at most
 * max(min_retry_concurrency, budget_percent % of the calls in flight and
 * queued). A retry over the budget is not made: the call ends with its
 * last status. Defaults 20 %, 3. budget_percent 0 with
 * min_retry_concurrency 0 turns the budget off; budget_percent must be in
 * [0, 100]. */
SLUICE_API int sluice_channel_opts_set_retry_budget(
    struct sluice_channel_opts *o, double budget_percent,
    uint32_t min_retry_concurrency);

/** The largest max_attempts any policy may use (default 5, at least 1):
 * larger values in a policy are clamped to it, not refused. */
SLUICE_API int sluice_channel_opts_set_max_attempts_cap(
    struct sluice_channel_opts *o, uint32_t max_attempts);

/** Request bytes a call keeps for replay (default 256 KiB, as gRPC's
 * per-RPC retry buffer). A call whose request grows past it commits: it is
 * not retried or hedged from then on, and the bytes are freed as sent. */
SLUICE_API int sluice_channel_opts_set_retry_buffer(
    struct sluice_channel_opts *o, uint32_t per_call_bytes);

/** Turns retries and hedging off (enabled: 0) or back on (the default),
 * whatever the method configs say (gRFC A6 "disabling retries").
 * Transparent retries of streams the server never saw are not affected. */
SLUICE_API int sluice_channel_opts_set_retries_enabled(
    struct sluice_channel_opts *o, int enabled);

/** Circuit breakers, as Envoy's cluster thresholds (Istio's
 * http2MaxRequests, http1MaxPendingRequests, maxRetries); 0 leaves one
 * off (the default for all three):
 *  - max_requests: calls in flight on the channel, all destinations;
 *  - max_pending: calls waiting for a connection, a stream or in the wait
 *    queue;
 *  - max_retries: retries and hedges in flight (and in backoff).
 * A call over max_requests or max_pending fails at once, without I/O, with
 * RESOURCE_EXHAUSTED "circuit breaker max_requests (20) is open: ..."; a
 * retry over max_retries is not made (the call ends with its last status).
 * Counted apart in the stats; never retried. */
SLUICE_API int sluice_channel_opts_set_circuit_breakers(
    struct sluice_channel_opts *o, uint32_t max_requests, uint32_t max_pending,
    uint32_t max_retries);

/** Retry, hedging and circuit-breaker counters of one method (or, in
 * sluice_resilience_stats.total, of the channel). */
typedef struct sluice_retry_counters {
  uint64_t calls;    /**< calls started */
  uint64_t attempts; /**< attempts sent, first ones included */
  uint64_t retries;  /**< retry attempts started */
  uint64_t transparent_retries; /**< replays of streams the server never
                                   saw (REFUSED_STREAM, GOAWAY) */
  uint64_t hedges;              /**< hedged attempts started */
  uint64_t retries_throttled;   /**< retries not made: token bucket */
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
  /** Calls refused by a circuit breaker: max_requests, max_pending. */
  uint64_t breaker_requests, breaker_pending;
  uint64_t retries_in_flight; /**< calls in backoff or retrying, now */
  uint64_t hedges_in_flight;  /**< hedged attempts open, now */
  double throttle_tokens;     /**< tokens in the bucket (-1: no throttling) */
  size_t n_methods;           /**< entries in methods */
  /** Per method, the methods called so far (owned by the struct). */
  struct sluice_method_retry_stats {
    char path[128];              /**< "/pkg.Svc/Method" */
    sluice_retry_counters counters;
  } * methods;
} sluice_resilience_stats;

/** Fills the first struct_size bytes of s with zeros and records the
 * size. */
SLUICE_API void sluice_resilience_stats_init_sized(sluice_resilience_stats *s,
                                                   size_t struct_size);
/** Zeroes s and records sizeof(sluice_resilience_stats). */
static inline void sluice_resilience_stats_init(sluice_resilience_stats *s) {
  sluice_resilience_stats_init_sized(s, sizeof(sluice_resilience_stats));
}

#ifdef __cplusplus
}
#endif
#endif
