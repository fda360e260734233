/* The channel's service config: per-method settings (timeout, message
 * sizes, retry or hedging policy) found by a call's path, retry throttling,
 * the strategy a config names and the health-check service name. Built
 * from gRPC's service config JSON (parsed with jansson) or from the typed
 * setters of sluice/resilience.h; both validate the same way, and an
 * invalid input leaves the config untouched with an error naming the field.
 *
 * Pure: no loop, no channel. Any thread, one at a time per config.
 */
#ifndef SLUICE_CLIENT_SERVICE_CONFIG_H
#define SLUICE_CLIENT_SERVICE_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "sluice/resilience.h"

/* One methodConfig name and its settings. */
typedef struct sluice__mc_entry {
  char *service; /* "pkg.Svc"; "" for the channel default */
  char *method;  /* "M"; "" for every method of service */
  sluice_method_config mc;
} sluice__mc_entry;

typedef struct sluice__svc_config {
  sluice__mc_entry *entries; /* owned */
  size_t n;
  /* retryThrottling: max_tokens 0 = off; the ratio in thousandths of a
   * token (C-core keeps milli-tokens) */
  uint32_t throttle_max_tokens;
  uint32_t throttle_ratio_milli;
  /* loadBalancingConfig: the sluice strategy it maps to ("rr", "lcc",
   * "bcc", "btc"; static) or NULL when the config names none */
  const char *lb_name;
  /* healthCheckConfig.serviceName (owned), NULL when absent */
  char *health_service;
  int have_health; /* healthCheckConfig present */
} sluice__svc_config;

/* Parses json into *out (which the caller cleared or zeroed). On an error
 * returns SLUICE_ERR_INVALID_ARG with "field.path: what is wrong" in err
 * and *out untouched; SLUICE_ERR_NOMEM. */
int sluice__svc_config_parse(sluice__svc_config *out, const char *json,
                             char *err, size_t errlen);

/* Checks one method config as the JSON parser does (name the field from
 * prefix, e.g. "retryPolicy"); per_call allows max_attempts 1. Returns 0
 * or SLUICE_ERR_INVALID_ARG with the text in err. */
int sluice__method_config_check(const sluice_method_config *mc, char *err,
                                size_t errlen);
int sluice__retry_policy_check(const sluice_retry_policy *p, int per_call,
                               char *err, size_t errlen);
int sluice__hedging_policy_check(const sluice_hedging_policy *p, int per_call,
                                 char *err, size_t errlen);

/* Sets (mc non-NULL) or removes the entry for name ("pkg.Svc/M", "pkg.Svc"
 * or ""). Returns 0, SLUICE_ERR_INVALID_ARG (err says why) or
 * SLUICE_ERR_NOMEM; on an error c is untouched. */
int sluice__svc_config_set(sluice__svc_config *c, const char *name,
                           const sluice_method_config *mc, char *err,
                           size_t errlen);

/* The entry that applies to path ("/pkg.Svc/M"): exact method, else the
 * service's, else the default; NULL when none. */
const sluice_method_config *
sluice__svc_config_find(const sluice__svc_config *c, const char *path);

/* Deep copy (dst is overwritten, not cleared first). Returns 0 or
 * SLUICE_ERR_NOMEM (dst then holds nothing). */
int sluice__svc_config_copy(sluice__svc_config *dst,
                            const sluice__svc_config *src);
/* Frees what c holds and zeroes it. Idempotent. */
void sluice__svc_config_clear(sluice__svc_config *c);

#endif
