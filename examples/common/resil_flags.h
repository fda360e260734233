/* The resilience flags shared by the example clients, the testbed layers
 * and sluice-bench (header only, so that tools/ can use it without linking
 * anything from examples/):
 *
 *   --service-config FILE|JSON   gRPC service config (sluice/resilience.h):
 *                                an argument starting with '{' is the JSON
 *                                itself, anything else a file to read
 *   --breakers REQ[,PEND[,RETRIES]]   circuit breakers (0 = off)
 *
 * and the counters of sluice_channel_get_resilience_stats(), summed over a
 * program's channels and printed the same way everywhere (a line for
 * people, an object for --json). */
#ifndef SLUICE_EXAMPLE_RESIL_FLAGS_H
#define SLUICE_EXAMPLE_RESIL_FLAGS_H

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sluice/sluice.h>

/* Largest service config file read. */
#define SX_MAX_CONFIG_BYTES (1u << 20)

/* The JSON of a --service-config argument: a copy of arg when it starts
 * (after blanks) with '{', else the contents of the file arg. Returns a
 * malloc'd string or NULL with the reason in err. */
static inline char *sx_load_service_config(const char *arg, char *err,
                                           size_t errlen) {
  const char *p = arg;
  while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
    p++;
  if (*p == '{') {
    char *s = strdup(arg);
    if (s == NULL)
      snprintf(err, errlen, "out of memory");
    return s;
  }
  FILE *f = fopen(arg, "rb");
  if (f == NULL) {
    snprintf(err, errlen, "cannot open %s: %s", arg, strerror(errno));
    return NULL;
  }
  char *buf = malloc(SX_MAX_CONFIG_BYTES + 1);
  size_t n = buf != NULL ? fread(buf, 1, SX_MAX_CONFIG_BYTES + 1, f) : 0;
  int bad = buf == NULL || ferror(f) || n > SX_MAX_CONFIG_BYTES;
  fclose(f);
  if (bad) {
    snprintf(err, errlen, "cannot read %s (missing, unreadable or over %u B)",
             arg, SX_MAX_CONFIG_BYTES);
    free(buf);
    return NULL;
  }
  buf[n] = '\0';
  return buf;
}

/* Parses "REQ[,PEND[,RETRIES]]" (decimal, 0 = that breaker off) into
 * out[3]. Returns 0 or -1. */
static inline int sx_parse_breakers(const char *arg, uint32_t out[3]) {
  out[0] = out[1] = out[2] = 0;
  const char *p = arg;
  for (int i = 0; i < 3; i++) {
    if (*p < '0' || *p > '9')
      return -1;
    char *end;
    errno = 0;
    unsigned long v = strtoul(p, &end, 10);
    if (errno != 0 || v > UINT32_MAX)
      return -1;
    out[i] = (uint32_t)v;
    if (*end == '\0')
      return 0;
    if (*end != ',')
      return -1;
    p = end + 1;
  }
  return -1; /* a fourth field */
}

/* Applies a service config (json may be NULL) and breakers (NULL: leave
 * them) to channel options. Returns 0, or the error after printing it as
 * "PROG: what: why" on stderr. */
static inline int sx_apply(sluice_channel_opts *co, const char *prog,
                           const char *json, const uint32_t *breakers) {
  int rc;
  if (json != NULL && (rc = sluice_channel_opts_set_service_config(co, json))) {
    const char *why = sluice_channel_opts_last_error(co);
    fprintf(stderr, "%s: --service-config refused: %s\n", prog,
            why != NULL && *why ? why : sluice_strerror(rc));
    return rc;
  }
  if (breakers != NULL && (rc = sluice_channel_opts_set_circuit_breakers(
                               co, breakers[0], breakers[1], breakers[2]))) {
    const char *why = sluice_channel_opts_last_error(co);
    fprintf(stderr, "%s: --breakers refused: %s\n", prog,
            why != NULL && *why ? why : sluice_strerror(rc));
    return rc;
  }
  return 0;
}

/* The counters a report needs, summed over channels. */
typedef struct sx_res {
  int have; /* at least one channel answered */
  uint64_t calls, attempts, retries, transparent, hedges;
  uint64_t throttled, budget_denied, pushback_denied, deadline_denied,
      breaker_retry_denied, exhausted;
  uint64_t breaker_requests, breaker_pending;
  uint64_t retry_delay_ms;
} sx_res;

/* Adds ch's counters to *r (nothing when the channel cannot give them). */
static inline void sx_res_add_channel(sx_res *r, sluice_channel *ch) {
  if (ch == NULL)
    return;
  sluice_resilience_stats s;
  sluice_resilience_stats_init(&s);
  if (sluice_channel_get_resilience_stats(ch, &s) != 0)
    return;
  const sluice_retry_counters *t = &s.total;
  r->have = 1;
  r->calls += t->calls;
  r->attempts += t->attempts;
  r->retries += t->retries;
  r->transparent += t->transparent_retries;
  r->hedges += t->hedges;
  r->throttled += t->retries_throttled;
  r->budget_denied += t->retries_budget_denied;
  r->pushback_denied += t->retries_pushback_denied;
  r->deadline_denied += t->retries_deadline_denied;
  r->breaker_retry_denied += t->retries_breaker_denied;
  r->exhausted += t->retries_exhausted;
  r->retry_delay_ms += t->retry_delay_ms_sum;
  r->breaker_requests += s.breaker_requests;
  r->breaker_pending += s.breaker_pending;
  sluice_resilience_stats_clear(&s);
}

/* *r -= *before, field by field (a phase's share of cumulative counters). */
static inline void sx_res_sub(sx_res *r, const sx_res *before) {
#define SX_SUB(f) r->f = r->f >= before->f ? r->f - before->f : 0
  SX_SUB(calls);
  SX_SUB(attempts);
  SX_SUB(retries);
  SX_SUB(transparent);
  SX_SUB(hedges);
  SX_SUB(throttled);
  SX_SUB(budget_denied);
  SX_SUB(pushback_denied);
  SX_SUB(deadline_denied);
  SX_SUB(breaker_retry_denied);
  SX_SUB(exhausted);
  SX_SUB(breaker_requests);
  SX_SUB(breaker_pending);
  SX_SUB(retry_delay_ms);
#undef SX_SUB
}

/* Retries not made, whatever the reason but max_attempts. */
static inline uint64_t sx_res_denials(const sx_res *r) {
  return r->throttled + r->budget_denied + r->pushback_denied +
         r->deadline_denied + r->breaker_retry_denied;
}

/* "attempts=.. retries=.. hedges=.. denials=.. (throttled .., budget ..,
 * pushback .., deadline .., breaker ..) exhausted=.. breaker_open=..
 * (requests .., pending ..)" on one line, with prefix before it. */
static inline void sx_res_print(FILE *f, const char *prefix, const sx_res *r) {
  if (!r->have) {
    fprintf(f, "%sresilience stats not available\n", prefix);
    return;
  }
  fprintf(f,
          "%scalls=%" PRIu64 " attempts=%" PRIu64 " retries=%" PRIu64
          " transparent=%" PRIu64 " hedges=%" PRIu64 " denials=%" PRIu64
          " (throttled %" PRIu64 ", budget %" PRIu64 ", pushback %" PRIu64
          ", deadline %" PRIu64 ", max_retries %" PRIu64 ") exhausted=%" PRIu64
          " breaker_refused=%" PRIu64 " (max_requests %" PRIu64
          ", max_pending %" PRIu64 ")\n",
          prefix, r->calls, r->attempts, r->retries, r->transparent, r->hedges,
          sx_res_denials(r), r->throttled, r->budget_denied, r->pushback_denied,
          r->deadline_denied, r->breaker_retry_denied, r->exhausted,
          r->breaker_requests + r->breaker_pending, r->breaker_requests,
          r->breaker_pending);
}

/* The same as one JSON object (null when not available). */
static inline void sx_res_json(FILE *f, const sx_res *r) {
  if (!r->have) {
    fprintf(f, "null");
    return;
  }
  fprintf(f,
          "{\"calls\": %" PRIu64 ", \"attempts\": %" PRIu64
          ", \"retries\": %" PRIu64 ", \"transparent_retries\": %" PRIu64
          ", \"hedges\": %" PRIu64 ", \"denials\": %" PRIu64
          ", \"throttled\": %" PRIu64 ", \"budget_denied\": %" PRIu64
          ", \"pushback_denied\": %" PRIu64 ", \"deadline_denied\": %" PRIu64
          ", \"max_retries_denied\": %" PRIu64 ", \"exhausted\": %" PRIu64
          ", \"breaker_requests\": %" PRIu64 ", \"breaker_pending\": %" PRIu64
          ", \"retry_delay_ms\": %" PRIu64 "}",
          r->calls, r->attempts, r->retries, r->transparent, r->hedges,
          sx_res_denials(r), r->throttled, r->budget_denied, r->pushback_denied,
          r->deadline_denied, r->breaker_retry_denied, r->exhausted,
          r->breaker_requests, r->breaker_pending, r->retry_delay_ms);
}

#endif
