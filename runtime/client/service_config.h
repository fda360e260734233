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

/* Check one method config or policy by the rules the JSON parser applies;
 * the text names the C field ("retry.max_attempts: must be at least 2").
 * per_call (a policy in sluice_call_opts) allows max_attempts 1. Return 0
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

/* Sets the retry throttling: max_tokens 0 (off) or 1..1000 with
 * ratio_milli > 0 (thousandths of a token per OK call). Returns 0 or
 * SLUICE_ERR_INVALID_ARG (c untouched). */
int sluice__svc_config_set_throttling(sluice__svc_config *c,
                                      uint32_t max_tokens,
                                      uint32_t ratio_milli);
/* A tokenRatio in thousandths, decimals past the third dropped (as C-core
 * does), at most 1000000; 0 when ratio is not a number > 0 or rounds to
 * 0. */
uint32_t sluice__token_ratio_milli(double ratio);

/* The entry that applies to path ("/pkg.Svc/M"; the leading '/' may be
 * left out): exact method, else the service's, else the default; NULL when
 * none. The entry applies whole, as in gRPC: its unset fields do not fall
 * back to a less specific entry, only to the method's .proto options and
 * the library defaults. */
const sluice_method_config *sluice__svc_config_find(const sluice__svc_config *c,
                                                    const char *path);

/* Deep copy (dst is overwritten, not cleared first). Returns 0 or
 * SLUICE_ERR_NOMEM (dst then holds nothing). */
int sluice__svc_config_copy(sluice__svc_config *dst,
                            const sluice__svc_config *src);
/* Frees what c holds and zeroes it. Idempotent. */
void sluice__svc_config_clear(sluice__svc_config *c);

#endif
