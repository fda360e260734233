/* Servers: the method registry, loop threads and graceful shutdown; the
 * options are in server_opts.c, the listening sockets and the hand-off of
 * accepted connections in listener.c. */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "server/server_internal.h"

int sluice_server_new(sluice_server **out, const sluice_server_opts *opts) {
  if (!out)
    return SLUICE_ERR_INVALID_ARG;
  sluice_server *s = calloc(1, sizeof *s);
  if (!s)
    return SLUICE_ERR_NOMEM;
  sluice_server_opts *defaults = NULL;
  if (!opts) {
    if (sluice_server_opts_new(&defaults) != 0) {
      free(s);
      return SLUICE_ERR_NOMEM;
    }
    opts = defaults;
  }
  if (sluice__server_opts_copy(&s->opts, opts) != 0) {
    sluice_server_opts_del(defaults);
    free(s);
    return SLUICE_ERR_NOMEM;
  }
  sluice_server_opts_del(defaults);
  sluice__load_init(&s->load, &s->opts);
  sluice__admit_init(&s->admit, &s->opts, &s->load);
  sluice__list_init(&s->orphans);
  uv_mutex_init(&s->mu);
  uv_cond_init(&s->cv);
  *out = s;
  return 0;
}

int sluice_server_add_service(sluice_server *srv,
                              const sluice_service_desc *desc,
                              const sluice_unary_dispatch *dispatch,
                              const void *handlers, size_t handlers_size,
                              void *user_data) {
  /* A service without methods has no dispatch table (the generated code
   * passes NULL) and is registered all the same. */
  if (!srv || !desc || (desc->n_methods && (!dispatch || !desc->methods)) ||
      (!handlers && handlers_size))
    return SLUICE_ERR_INVALID_ARG;
  if (srv->started)
    return SLUICE_ERR_STATE;
  for (size_t i = 0; i < desc->n_methods; i++)
    if (sluice__server_route(srv, desc->methods[i].path,
                             strlen(desc->methods[i].path)))
      return SLUICE_ERR_DUPLICATE;
  void *copy = malloc(handlers_size ? handlers_size : 1);
  void **copies =
      realloc(srv->handler_copies, (srv->n_services + 1) * sizeof *copies);
  /* realloc(p, 0) may free p: only grow. */
  sluice__route *routes =
      desc->n_methods ? realloc(srv->routes, (srv->n_routes + desc->n_methods) *
                                                 sizeof *routes)
                      : srv->routes;
  if (copies)
    srv->handler_copies = copies;
  if (routes)
    srv->routes = routes;
  if (!copy || !copies || (desc->n_methods && !routes)) {
    free(copy);
    return SLUICE_ERR_NOMEM;
  }
  if (handlers_size)
    memcpy(copy, handlers, handlers_size);
  srv->handler_copies[srv->n_services++] = copy;
  for (size_t i = 0; i < desc->n_methods; i++) {
    sluice__route *r = &srv->routes[srv->n_routes++];
    r->method = &desc->methods[i];
    r->dispatch = dispatch[i];
    r->handlers = copy;
    r->user_data = user_data;
    r->limit.limit = 0;
    r->limit.in_flight = 0;
    for (size_t j = 0; j < srv->opts.n_method_limits; j++)
      if (strcmp(srv->opts.method_limits[j].path, r->method->path) == 0)
        r->limit.limit = srv->opts.method_limits[j].limit;
  }
  return 0;
}

/* Linear: services have few methods; a hash comes with the benchmarks if a
 * profile shows it. */
sluice__route *sluice__server_route(sluice_server *srv, const char *path,
                                    size_t len) {
  for (size_t i = 0; i < srv->n_routes; i++) {
    const char *p = srv->routes[i].method->path;
    if (strlen(p) == len && memcmp(p, path, len) == 0)
      return &srv->routes[i];
  }
  return NULL;
}

int sluice_server_set_utilization(sluice_server *srv, double utilization) {
  if (!srv)
    return SLUICE_ERR_INVALID_ARG;
  return sluice__load_set_utilization(&srv->load, utilization);
}

/* ---- listening */

int sluice_server_listen(sluice_server *srv, const char *address,
                         int *port_out) {
  if (!srv || !address)
    return SLUICE_ERR_INVALID_ARG;
  if (srv->started)
    return SLUICE_ERR_STATE;
  return sluice__listeners_add(&srv->listeners, address, port_out);
}

int sluice_server_start(sluice_server *srv) {
  if (!srv)
    return SLUICE_ERR_INVALID_ARG;
  if (srv->started || srv->listeners.n == 0)
    return SLUICE_ERR_STATE;
  unsigned n = srv->opts.threads;
  if (n == 0) {
    n = (unsigned)uv_available_parallelism();
    if (n == 0)
      n = 1;
  }
  srv->loops = calloc(n, sizeof *srv->loops);
  if (!srv->loops || sluice__admit_start(&srv->admit, n) != 0) {
    free(srv->loops);
    srv->loops = NULL;
    return SLUICE_ERR_NOMEM;
  }
  for (unsigned i = 0; i < n; i++) {
    sluice__sloop *sl = &srv->loops[i];
    sl->srv = srv;
    sluice__list_init(&sl->conns);
    sluice__objcache_init(&sl->call_cache, sizeof(sluice_server_call), 128);
    int rv = sluice__loop_new(&sl->loop, NULL);
    if (rv != 0) {
      srv->n_loops = i;
      srv->started = 1;
      sluice_server_shutdown(srv, 0);
      return rv;
    }
    sl->aq = sluice__admit_queue_open(&srv->admit, sl->loop);
    srv->n_loops = i + 1;
  }
  srv->started = 1;
  sluice__load_start(&srv->load);
  sluice__listeners_start(&srv->listeners, srv->loops, srv->n_loops);
  return 0;
}

/* ---- shutdown */

static void drain_loop(sluice__task *t) {
  sluice__sloop *sl = SLUICE__CONTAINER_OF(t, sluice__sloop, drain_task);
  sluice_server *srv = sl->srv;
  if (sl == &srv->loops[0])
    sluice__listeners_close(&srv->listeners);
  SLUICE__LIST_FOREACH_SAFE(n, &sl->conns) {
    sluice__sconn_goaway(SLUICE__CONTAINER_OF(n, sluice__sconn, link));
  }
}

static void force_loop(void *ud) {
  sluice__sloop *sl = ud;
  sluice__admit_loop_close(sl->aq);
  SLUICE__LIST_FOREACH_SAFE(n, &sl->conns) {
    sluice__sconn_close(SLUICE__CONTAINER_OF(n, sluice__sconn, link),
                        "server shut down");
  }
}

void sluice__server_conn_gone(sluice_server *srv) {
  uv_mutex_lock(&srv->mu);
  srv->live_conns--;
  uv_cond_broadcast(&srv->cv);
  uv_mutex_unlock(&srv->mu);
}

int sluice_server_shutdown(sluice_server *srv, uint64_t grace_ms) {
  if (!srv)
    return SLUICE_ERR_INVALID_ARG;
  if (!srv->started || __atomic_load_n(&srv->shut_down, __ATOMIC_ACQUIRE)) {
    __atomic_store_n(&srv->shut_down, 1, __ATOMIC_RELEASE);
    return 0;
  }
  __atomic_store_n(&srv->shut_down, 1, __ATOMIC_RELEASE);
  sluice__listeners_stop(&srv->listeners); /* hand-offs in flight close */
  for (unsigned i = 0; i < srv->n_loops; i++) {
    srv->loops[i].drain_task.fn = drain_loop;
    sluice__loop_post(srv->loops[i].loop, &srv->loops[i].drain_task);
  }
  /* Let in-flight calls finish until the grace period ends. */
  uint64_t end = uv_hrtime() + grace_ms * 1000000ull;
  uv_mutex_lock(&srv->mu);
  while (srv->live_conns > 0) {
    uint64_t now = uv_hrtime();
    if (now >= end)
      break;
    uv_cond_timedwait(&srv->cv, &srv->mu, end - now);
  }
  /* Late finishes are parked until the loops are gone ... */
  __atomic_store_n(&srv->stopped, 1, __ATOMIC_SEQ_CST);
  uv_mutex_unlock(&srv->mu);
  sluice__admit_stop(&srv->admit); /* no loop is woken from now on */
  /* ... and those that checked before are posted before a loop goes. */
  for (unsigned i = 0; i < srv->n_loops; i++)
    while (__atomic_load_n(&srv->loops[i].finishing, __ATOMIC_SEQ_CST) != 0)
      sched_yield();
  /* Cancel what is left and stop each loop (joins its thread). Loop 0 last:
   * it owns the listeners. */
  for (unsigned i = srv->n_loops; i-- > 0;) {
    sluice__loop_del(srv->loops[i].loop, force_loop, &srv->loops[i]);
    sluice__objcache_drain(&srv->loops[i].call_cache);
  }
  sluice__server_free_orphans(srv);
  sluice__listeners_release(&srv->listeners);
  return 0;
}

void sluice_server_del(sluice_server *srv) {
  if (!srv)
    return;
  sluice_server_shutdown(srv, 0);
  sluice__listeners_free(&srv->listeners);
  for (size_t i = 0; i < srv->n_services; i++)
    free(srv->handler_copies[i]);
  free(srv->handler_copies);
  free(srv->routes);
  free(srv->loops);
  sluice__server_opts_clear(&srv->opts);
  sluice__admit_destroy(&srv->admit);
  sluice__load_destroy(&srv->load);
  uv_mutex_destroy(&srv->mu);
  uv_cond_destroy(&srv->cv);
  free(srv);
}
