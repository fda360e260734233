/* Server options: defaults, the public setters, and the server's deep copy
 * (sluice_server_new keeps its own, so the user may free or change theirs
 * at once). */
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "server/server_opts.h"
#include "sluice/tls.h"
#include "transport/tls.h"

int sluice_server_opts_new(sluice_server_opts **out) {
  if (!out)
    return SLUICE_ERR_INVALID_ARG;
  sluice_server_opts *o = sluice__calloc(1, sizeof *o);
  if (!o)
    return SLUICE_ERR_NOMEM;
  o->max_request_size = 4u * 1024 * 1024;
  o->max_response_size = UINT32_MAX;
  o->max_concurrent_streams = 1000;
  o->send_buffer = SLUICE_DEFAULT_SEND_BUFFER;
  o->max_queue = 1000;
  o->load_report = 1;
  o->load_report_interval_ms = 10; /* see server.h: cost vs freshness */
  o->keepalive_time_ms = 2ull * 3600 * 1000; /* gRFC A9 */
  o->keepalive_timeout_ms = 20000;
  o->ping_min_time_ms = 300000; /* gRFC A8, as C-core */
  o->max_ping_strikes = 2;
  o->health_bypass = 1;
  o->handshake_timeout_ms = 10000;
  o->max_header_list_size = 16u * 1024;
  *out = o;
  return 0;
}

static void free_method_limits(sluice_server_opts *o) {
  for (size_t i = 0; i < o->n_method_limits; i++)
    free(o->method_limits[i].path);
  free(o->method_limits);
  o->method_limits = NULL;
  o->n_method_limits = 0;
}

void sluice_server_opts_del(sluice_server_opts *o) {
  if (o) {
    sluice__tls_ctx_unref(o->tls);
    free_method_limits(o);
    free(o);
  }
}

void sluice_tls_server_config_init(sluice_tls_server_config *c) {
  if (c)
    memset(c, 0, sizeof *c);
}

int sluice_server_opts_set_tls(sluice_server_opts *o,
                               const sluice_tls_server_config *cfg) {
  if (!o)
    return SLUICE_ERR_INVALID_ARG;
  o->last_error[0] = 0;
  sluice__tls_ctx *ctx = NULL;
  int rv =
      sluice__tls_ctx_server(&ctx, cfg, o->last_error, sizeof o->last_error);
  if (rv != 0)
    return rv;
  sluice__tls_ctx_unref(o->tls);
  o->tls = ctx;
  return 0;
}

const char *sluice_server_opts_last_error(const sluice_server_opts *o) {
  return o ? o->last_error : "";
}

int sluice_server_opts_set_threads(sluice_server_opts *o, unsigned n) {
  if (!o || n > 1024)
    return SLUICE_ERR_INVALID_ARG;
  o->threads = n;
  return 0;
}

int sluice_server_opts_set_max_request_size(sluice_server_opts *o,
                                            uint32_t bytes) {
  if (!o || !bytes)
    return SLUICE_ERR_INVALID_ARG;
  o->max_request_size = bytes;
  return 0;
}

int sluice_server_opts_set_max_response_size(sluice_server_opts *o,
                                             uint32_t bytes) {
  if (!o || !bytes)
    return SLUICE_ERR_INVALID_ARG;
  o->max_response_size = bytes;
  return 0;
}

int sluice_server_opts_set_max_concurrent_streams(sluice_server_opts *o,
                                                  uint32_t n) {
  if (!o || !n)
    return SLUICE_ERR_INVALID_ARG;
  o->max_concurrent_streams = n;
  return 0;
}

int sluice_server_opts_set_send_buffer(sluice_server_opts *o, uint32_t bytes) {
  if (!o || !bytes)
    return SLUICE_ERR_INVALID_ARG;
  o->send_buffer = bytes;
  return 0;
}

int sluice_server_opts_set_max_concurrent_calls(sluice_server_opts *o,
                                                uint32_t n) {
  if (!o || n > INT32_MAX)
    return SLUICE_ERR_INVALID_ARG;
  o->max_calls = n;
  return 0;
}

int sluice_server_opts_set_method_max_concurrent_calls(sluice_server_opts *o,
                                                       const char *path,
                                                       uint32_t n) {
  if (!o || !path || path[0] != '/' || n > INT32_MAX)
    return SLUICE_ERR_INVALID_ARG;
  for (size_t i = 0; i < o->n_method_limits; i++)
    if (strcmp(o->method_limits[i].path, path) == 0) {
      o->method_limits[i].limit = n;
      return 0;
    }
  char *copy = sluice__strdup(path);
  sluice__method_limit *l = sluice__realloc(
      o->method_limits, (o->n_method_limits + 1) * sizeof *o->method_limits);
  if (!copy || !l) {
    free(copy);
    if (l)
      o->method_limits = l;
    return SLUICE_ERR_NOMEM;
  }
  o->method_limits = l;
  l[o->n_method_limits].path = copy;
  l[o->n_method_limits].limit = n;
  o->n_method_limits++;
  return 0;
}

int sluice_server_opts_set_max_queue(sluice_server_opts *o, uint32_t n) {
  if (!o || n > INT32_MAX)
    return SLUICE_ERR_INVALID_ARG;
  o->max_queue = n;
  return 0;
}

int sluice_server_opts_set_codel(sluice_server_opts *o, uint32_t target_ms,
                                 uint32_t interval_ms) {
  if (!o || (target_ms && !interval_ms) || target_ms > 3600000u ||
      interval_ms > 3600000u)
    return SLUICE_ERR_INVALID_ARG;
  o->codel_target_ms = target_ms;
  o->codel_interval_ms = target_ms ? interval_ms : 0;
  return 0;
}

int sluice_server_opts_set_load_report(sluice_server_opts *o, int on) {
  if (!o)
    return SLUICE_ERR_INVALID_ARG;
  o->load_report = on != 0;
  return 0;
}

int sluice_server_opts_set_health(sluice_server_opts *o, int on) {
  if (!o)
    return SLUICE_ERR_INVALID_ARG;
  o->health = on != 0;
  return 0;
}

int sluice_server_opts_set_reflection(sluice_server_opts *o, int on) {
  if (!o)
    return SLUICE_ERR_INVALID_ARG;
  o->reflection = on != 0;
  return 0;
}

int sluice_server_opts_set_health_bypass(sluice_server_opts *o, int on) {
  if (!o)
    return SLUICE_ERR_INVALID_ARG;
  o->health_bypass = on != 0;
  return 0;
}

int sluice_server_opts_set_load_report_interval(sluice_server_opts *o,
                                                uint32_t ms) {
  if (!o || ms > 3600000u)
    return SLUICE_ERR_INVALID_ARG;
  o->load_report_interval_ms = ms;
  return 0;
}

/* The longest time any of the connection settings takes: a year. */
#define MAX_CONN_MS (365ull * 24 * 3600 * 1000)

int sluice_server_opts_set_connection_limits(sluice_server_opts *o,
                                             uint64_t max_idle_ms,
                                             uint64_t max_age_ms,
                                             uint64_t max_age_grace_ms) {
  if (!o || max_idle_ms > MAX_CONN_MS || max_age_ms > MAX_CONN_MS ||
      max_age_grace_ms > MAX_CONN_MS)
    return SLUICE_ERR_INVALID_ARG;
  o->max_idle_ms = max_idle_ms;
  o->max_age_ms = max_age_ms;
  o->max_age_grace_ms = max_age_grace_ms;
  return 0;
}

int sluice_server_opts_set_keepalive(sluice_server_opts *o, uint64_t time_ms,
                                     uint64_t timeout_ms) {
  if (!o || time_ms > MAX_CONN_MS || timeout_ms > MAX_CONN_MS ||
      (time_ms && !timeout_ms))
    return SLUICE_ERR_INVALID_ARG;
  o->keepalive_time_ms = time_ms;
  o->keepalive_timeout_ms = timeout_ms;
  return 0;
}

int sluice_server_opts_set_keepalive_enforcement(sluice_server_opts *o,
                                                 uint64_t min_time_ms,
                                                 int permit_without_calls,
                                                 uint32_t max_ping_strikes) {
  if (!o || min_time_ms > MAX_CONN_MS || max_ping_strikes > INT32_MAX)
    return SLUICE_ERR_INVALID_ARG;
  o->ping_min_time_ms = min_time_ms;
  o->ping_without_calls = permit_without_calls != 0;
  o->max_ping_strikes = max_ping_strikes;
  return 0;
}

int sluice_server_opts_set_max_connections(sluice_server_opts *o,
                                           uint32_t max_connections) {
  if (!o)
    return SLUICE_ERR_INVALID_ARG;
  o->max_connections = max_connections;
  return 0;
}

int sluice_server_opts_set_max_header_list_size(sluice_server_opts *o,
                                                uint32_t max_bytes) {
  if (!o || max_bytes < 1024)
    return SLUICE_ERR_INVALID_ARG;
  o->max_header_list_size = max_bytes;
  return 0;
}

int sluice_server_opts_set_handshake_timeout(sluice_server_opts *o,
                                             uint64_t timeout_ms) {
  if (!o || timeout_ms > MAX_CONN_MS)
    return SLUICE_ERR_INVALID_ARG;
  o->handshake_timeout_ms = timeout_ms;
  return 0;
}

/* The server's own copy of the per-method limits. */
static int copy_method_limits(sluice_server_opts *dst,
                              const sluice_server_opts *src) {
  dst->method_limits = NULL;
  dst->n_method_limits = 0;
  if (!src->n_method_limits)
    return 0;
  dst->method_limits =
      sluice__calloc(src->n_method_limits, sizeof *dst->method_limits);
  if (!dst->method_limits)
    return SLUICE_ERR_NOMEM;
  for (size_t i = 0; i < src->n_method_limits; i++) {
    dst->method_limits[i].limit = src->method_limits[i].limit;
    dst->method_limits[i].path = sluice__strdup(src->method_limits[i].path);
    dst->n_method_limits++;
    if (!dst->method_limits[i].path) {
      free_method_limits(dst);
      return SLUICE_ERR_NOMEM;
    }
  }
  return 0;
}

int sluice__server_opts_copy(sluice_server_opts *dst,
                             const sluice_server_opts *src) {
  *dst = *src;
  int rv = copy_method_limits(dst, src);
  if (rv != 0)
    return rv;
  sluice__tls_ctx_ref(dst->tls); /* dropped in sluice__server_opts_clear */
  return 0;
}

void sluice__server_opts_clear(sluice_server_opts *o) {
  sluice__tls_ctx_unref(o->tls);
  o->tls = NULL;
  free_method_limits(o);
}
