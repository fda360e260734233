/* Channel options: defaults, setters (each rejects what it cannot use with
 * SLUICE_ERR_INVALID_ARG, see sluice/channel.h) and the deep copy a channel
 * keeps. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/channel_int.h"
#include "core/alloc.h"
#include "transport/tls.h"

int sluice_channel_opts_new(sluice_channel_opts **out) {
  if (!out)
    return SLUICE_ERR_INVALID_ARG;
  sluice_channel_opts *o = sluice__calloc(1, sizeof *o);
  if (!o)
    return SLUICE_ERR_NOMEM;
  o->max_response_size = 4u * 1024 * 1024;
  o->max_request_size = UINT32_MAX;
  o->resolve_interval_ms = 30000;
  o->backoff_initial_ms = 1000;
  o->backoff_max_ms = 120000;
  o->connect_timeout_ms = 20000;
  o->lb = &sluice__lb_btc;
  /* resilience (sluice/resilience.h); the service config starts empty */
  o->max_attempts_cap = 5;
  o->retry_buffer = 256u * 1024; /* C-core's per-RPC retry buffer */
  o->retries_enabled = 1;
  o->budget_percent = 20; /* Envoy's retry budget defaults */
  o->budget_min_conc = 3;
  o->keepalive_timeout_ms = 20000; /* A8's default; keepalive itself off */
  o->max_header_list_size = 16u * 1024;
  *out = o;
  return 0;
}

void sluice_channel_opts_del(sluice_channel_opts *o) {
  if (o) {
    free(o->authority);
    sluice__tls_ctx_unref(o->tls);
    free(o->tls_name);
    free(o->health_check);
    sluice__svc_config_clear(&o->svc);
    free(o);
  }
}

int sluice_channel_opts_set_lb(sluice_channel_opts *o, const char *name) {
  const sluice__lb_ops *ops = name ? sluice__lb_find(name) : NULL;
  if (!o || !ops)
    return SLUICE_ERR_INVALID_ARG;
  o->lb = ops;
  return 0;
}

int sluice_channel_opts_set_health_check(sluice_channel_opts *o,
                                         const char *service_name) {
  if (!o)
    return SLUICE_ERR_INVALID_ARG;
  char *copy = NULL;
  if (service_name && !(copy = sluice__strdup(service_name)))
    return SLUICE_ERR_NOMEM;
  free(o->health_check);
  o->health_check = copy;
  return 0;
}

int sluice_channel_opts_set_keepalive(sluice_channel_opts *o, uint32_t time_ms,
                                      uint32_t timeout_ms,
                                      int permit_without_calls) {
  if (!o || (time_ms && time_ms < SLUICE_KEEPALIVE_MIN_TIME_MS) ||
      (time_ms && !timeout_ms))
    return SLUICE_ERR_INVALID_ARG;
  o->keepalive_time_ms = time_ms;
  o->keepalive_timeout_ms = time_ms ? timeout_ms : 20000;
  o->keepalive_permit_without_calls = time_ms && permit_without_calls;
  return 0;
}

int sluice_channel_opts_set_max_header_list_size(sluice_channel_opts *o,
                                                 uint32_t max_bytes) {
  if (!o || max_bytes < 1024)
    return SLUICE_ERR_INVALID_ARG;
  o->max_header_list_size = max_bytes;
  return 0;
}

int sluice_channel_opts_set_wait_queue(sluice_channel_opts *o, uint32_t max_len,
                                       uint32_t max_wait_ms) {
  if (!o || (max_len && !max_wait_ms))
    return SLUICE_ERR_INVALID_ARG;
  o->wait_max_len = max_len;
  o->wait_max_ms = max_wait_ms;
  return 0;
}

void sluice_tls_client_config_init(sluice_tls_client_config *c) {
  if (c)
    memset(c, 0, sizeof *c);
}

int sluice_channel_opts_set_tls(sluice_channel_opts *o,
                                const sluice_tls_client_config *cfg) {
  if (!o)
    return SLUICE_ERR_INVALID_ARG;
  o->last_error[0] = 0;
  sluice__tls_ctx *ctx = NULL;
  int rv =
      sluice__tls_ctx_client(&ctx, cfg, o->last_error, sizeof o->last_error);
  if (rv != 0)
    return rv;
  char *name = NULL;
  if (cfg->server_name_override && *cfg->server_name_override &&
      !(name = sluice__strdup(cfg->server_name_override))) {
    sluice__tls_ctx_unref(ctx);
    return SLUICE_ERR_NOMEM;
  }
  sluice__tls_ctx_unref(o->tls);
  free(o->tls_name);
  o->tls = ctx;
  o->tls_name = name;
  return 0;
}

const char *sluice_channel_opts_last_error(const sluice_channel_opts *o) {
  return o ? o->last_error : "";
}

int sluice_channel_opts_set_loop(sluice_channel_opts *o, uv_loop_t *loop) {
  if (!o)
    return SLUICE_ERR_INVALID_ARG;
  o->loop = loop;
  return 0;
}

int sluice_channel_opts_set_max_response_size(sluice_channel_opts *o,
                                              uint32_t bytes) {
  if (!o || !bytes)
    return SLUICE_ERR_INVALID_ARG;
  o->max_response_size = bytes;
  return 0;
}

int sluice_channel_opts_set_max_request_size(sluice_channel_opts *o,
                                             uint32_t bytes) {
  if (!o || !bytes)
    return SLUICE_ERR_INVALID_ARG;
  o->max_request_size = bytes;
  return 0;
}

int sluice_channel_opts_set_authority(sluice_channel_opts *o,
                                      const char *authority) {
  if (!o || !authority || !*authority)
    return SLUICE_ERR_INVALID_ARG;
  char *a = sluice__strdup(authority);
  if (!a)
    return SLUICE_ERR_NOMEM;
  free(o->authority);
  o->authority = a;
  return 0;
}

int sluice_channel_opts_set_resolve_interval_ms(sluice_channel_opts *o,
                                                uint32_t ms) {
  if (!o || !ms)
    return SLUICE_ERR_INVALID_ARG;
  o->resolve_interval_ms = ms;
  return 0;
}

int sluice_channel_opts_set_backoff_ms(sluice_channel_opts *o,
                                       uint32_t initial_ms, uint32_t max_ms) {
  if (!o || !initial_ms || max_ms < initial_ms)
    return SLUICE_ERR_INVALID_ARG;
  o->backoff_initial_ms = initial_ms;
  o->backoff_max_ms = max_ms;
  return 0;
}

int sluice_channel_opts_set_connect_timeout_ms(sluice_channel_opts *o,
                                               uint32_t ms) {
  if (!o || !ms)
    return SLUICE_ERR_INVALID_ARG;
  o->connect_timeout_ms = ms;
  return 0;
}

/* ---- resilience (sluice/resilience.h) ----
 *
 * Each setter clears last_error first and, on SLUICE_ERR_INVALID_ARG, says
 * there which argument was refused; nothing is changed then. */

static int refuse(sluice_channel_opts *o, const char *what) {
  snprintf(o->last_error, sizeof o->last_error, "%s", what);
  return SLUICE_ERR_INVALID_ARG;
}

void sluice_method_config_init(sluice_method_config *mc) {
  if (!mc)
    return;
  memset(mc, 0, sizeof *mc);
  mc->wait_for_ready = -1;
}

int sluice_channel_opts_set_method_config(sluice_channel_opts *o,
                                          const char *name,
                                          const sluice_method_config *mc) {
  if (!o)
    return SLUICE_ERR_INVALID_ARG;
  o->last_error[0] = 0;
  if (!name)
    return refuse(o, "name: NULL (\"\" is the channel default)");
  int rv = sluice__svc_config_set(&o->svc, name, mc, o->last_error,
                                  sizeof o->last_error);
  if (rv == SLUICE_ERR_NOMEM)
    o->last_error[0] = 0;
  return rv;
}

int sluice_channel_opts_set_service_config(sluice_channel_opts *o,
                                           const char *json) {
  if (!o)
    return SLUICE_ERR_INVALID_ARG;
  o->last_error[0] = 0;
  if (!json)
    return refuse(o, "service config: NULL");
  sluice__svc_config c;
  memset(&c, 0, sizeof c);
  int rv =
      sluice__svc_config_parse(&c, json, o->last_error, sizeof o->last_error);
  if (rv)
    return rv;
  /* the parser maps to sluice's own names only, so this is found; checked
   * anyway so that a strategy removed later cannot leave lb NULL */
  const sluice__lb_ops *lb = c.lb_name ? sluice__lb_find(c.lb_name) : NULL;
  if (c.lb_name && !lb) {
    sluice__svc_config_clear(&c);
    return refuse(o, "loadBalancingConfig: strategy not built in");
  }
  sluice__svc_config_clear(&o->svc);
  o->svc = c;
  if (lb)
    o->lb = lb;
  return 0;
}

int sluice_channel_opts_set_retry_throttling(sluice_channel_opts *o,
                                             uint32_t max_tokens,
                                             double token_ratio) {
  if (!o)
    return SLUICE_ERR_INVALID_ARG;
  o->last_error[0] = 0;
  if (max_tokens > 1000)
    return refuse(o, "max_tokens: must be 0 (off) or in 1..1000");
  uint32_t milli = sluice__token_ratio_milli(token_ratio);
  if (max_tokens && !milli)
    return refuse(o, "token_ratio: must be a number >= 0.001 (three "
                     "decimals are kept)");
  return sluice__svc_config_set_throttling(&o->svc, max_tokens, milli);
}

int sluice_channel_opts_set_retry_budget(sluice_channel_opts *o,
                                         double budget_percent,
                                         uint32_t min_retry_concurrency) {
  if (!o)
    return SLUICE_ERR_INVALID_ARG;
  o->last_error[0] = 0;
  /* written so that NaN fails too */
  if (!(budget_percent >= 0 && budget_percent <= 100))
    return refuse(o, "budget_percent: must be in [0, 100]");
  o->budget_percent = budget_percent;
  o->budget_min_conc = min_retry_concurrency;
  return 0;
}

int sluice_channel_opts_set_max_attempts_cap(sluice_channel_opts *o,
                                             uint32_t max_attempts) {
  if (!o)
    return SLUICE_ERR_INVALID_ARG;
  o->last_error[0] = 0;
  if (!max_attempts)
    return refuse(o, "max_attempts: must be at least 1");
  o->max_attempts_cap = max_attempts;
  return 0;
}

int sluice_channel_opts_set_retry_buffer(sluice_channel_opts *o,
                                         uint32_t per_call_bytes) {
  if (!o)
    return SLUICE_ERR_INVALID_ARG;
  o->last_error[0] = 0;
  if (!per_call_bytes)
    return refuse(o, "per_call_bytes: must be > 0 (to stop retries, "
                     "sluice_channel_opts_set_retries_enabled(o, 0))");
  o->retry_buffer = per_call_bytes;
  return 0;
}

int sluice_channel_opts_set_retries_enabled(sluice_channel_opts *o,
                                            int enabled) {
  if (!o)
    return SLUICE_ERR_INVALID_ARG;
  o->last_error[0] = 0;
  o->retries_enabled = enabled != 0;
  return 0;
}

int sluice_channel_opts_set_circuit_breakers(sluice_channel_opts *o,
                                             uint32_t max_requests,
                                             uint32_t max_pending,
                                             uint32_t max_retries) {
  if (!o)
    return SLUICE_ERR_INVALID_ARG;
  o->last_error[0] = 0;
  o->cb_max_requests = max_requests;
  o->cb_max_pending = max_pending;
  o->cb_max_retries = max_retries;
  return 0;
}

int sluice__channel_opts_copy(struct sluice_channel_opts *dst,
                              const struct sluice_channel_opts *src) {
  *dst = *src;
  dst->authority = NULL;
  dst->tls_name = NULL;
  dst->tls = NULL;
  dst->health_check = NULL;
  memset(&dst->svc, 0, sizeof dst->svc);
  if ((src->authority && !(dst->authority = sluice__strdup(src->authority))) ||
      (src->tls_name && !(dst->tls_name = sluice__strdup(src->tls_name))) ||
      (src->health_check &&
       !(dst->health_check = sluice__strdup(src->health_check))) ||
      sluice__svc_config_copy(&dst->svc, &src->svc) != 0) {
    sluice__channel_opts_clear(dst);
    return SLUICE_ERR_NOMEM;
  }
  dst->tls = src->tls;
  sluice__tls_ctx_ref(dst->tls);
  return 0;
}

void sluice__channel_opts_clear(struct sluice_channel_opts *o) {
  free(o->authority);
  free(o->tls_name);
  free(o->health_check);
  o->health_check = NULL;
  sluice__tls_ctx_unref(o->tls);
  sluice__svc_config_clear(&o->svc);
  o->authority = o->tls_name = NULL;
  o->tls = NULL;
}
