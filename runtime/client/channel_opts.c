/* Channel options: defaults, setters (each rejects what it cannot use with
 * SLUICE_ERR_INVALID_ARG, see sluice/channel.h) and the deep copy a channel
 * keeps. */
#include <stdlib.h>
#include <string.h>

#include "client/channel_int.h"
#include "transport/tls.h"

int sluice_channel_opts_new(sluice_channel_opts **out) {
  if (!out)
    return SLUICE_ERR_INVALID_ARG;
  sluice_channel_opts *o = calloc(1, sizeof *o);
  if (!o)
    return SLUICE_ERR_NOMEM;
  o->max_response_size = 4u * 1024 * 1024;
  o->max_request_size = UINT32_MAX;
  o->resolve_interval_ms = 30000;
  o->backoff_initial_ms = 1000;
  o->backoff_max_ms = 120000;
  o->connect_timeout_ms = 20000;
  o->lb = &sluice__lb_btc;
  *out = o;
  return 0;
}

void sluice_channel_opts_del(sluice_channel_opts *o) {
  if (o) {
    free(o->authority);
    sluice__tls_ctx_unref(o->tls);
    free(o->tls_name);
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
      !(name = strdup(cfg->server_name_override))) {
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
  char *a = strdup(authority);
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

int sluice__channel_opts_copy(struct sluice_channel_opts *dst,
                              const struct sluice_channel_opts *src) {
  *dst = *src;
  dst->authority = NULL;
  dst->tls_name = NULL;
  dst->tls = NULL;
  if ((src->authority && !(dst->authority = strdup(src->authority))) ||
      (src->tls_name && !(dst->tls_name = strdup(src->tls_name)))) {
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
  sluice__tls_ctx_unref(o->tls);
  o->authority = o->tls_name = NULL;
  o->tls = NULL;
}
