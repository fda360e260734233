/* Servers: the public server API over the layers below it, top to bottom
 * (each file sees only the headers of those under it):
 *
 *   server.c       the server: registry, loops, start, graceful shutdown
 *   listener.c     listening sockets, accept, hand-off to the loops
 *   server_conn.c  HTTP/2 connections: streams -> calls, validation, routing
 *   server_call.c  calls: request, handler, response, finish from any thread
 *   admit.c        admission: limits, queues, CoDel (never sees a call)
 *   load_report.c  the ORCA load report and its window
 *   health.c       the library's grpc.health.v1.Health (opt-in)
 *   reflection.c   the library's server reflection, v1 and v1alpha (opt-in)
 *   route.c        the method registry;  server_opts.c  the options
 *
 * Connections are accepted on loop 0 and handed to loops round robin. */
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/list.h"
#include "core/loop.h"
#include "server/admit.h"
#include "server/health.h"
#include "server/listener.h"
#include "server/load_report.h"
#include "server/reflection.h"
#include "server/route.h"
#include "server/server_call.h"
#include "server/server_conn.h"
#include "server/server_opts.h"

/* One loop of the server and what runs on it. */
typedef struct sluice__sloop {
  sluice_server *srv;
  sluice__loop *loop;       /* owned */
  sluice__sconn_loop conns; /* its connections and their calls */
  sluice__task drain_task;
} sluice__sloop;

struct sluice_server {
  sluice_server_opts opts; /* the server's own copy */
  sluice__routes routes;
  sluice__load load;
  sluice__admission admit;
  sluice__scall_shared calls;
  sluice__sconn_shared conns;
  sluice__listeners listeners;
  sluice__health *health;         /* NULL: no health service */
  sluice__reflection *reflection; /* NULL: no reflection service */
  sluice__sloop *loops;
  sluice__sconn_loop **targets; /* &loops[i].conns, for the listeners */
  unsigned n_loops;
  int started;
  int shut_down;           /* atomic */
  uint64_t drain_grace_ms; /* of the shutdown, for the loops' drain tasks */
};

int sluice_server_new(sluice_server **out, const sluice_server_opts *opts) {
  if (!out)
    return SLUICE_ERR_INVALID_ARG;
  sluice_server *s = sluice__calloc(1, sizeof *s);
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
  if ((s->opts.health && sluice__health_new(&s->health) != 0) ||
      (s->opts.reflection && sluice__reflection_new(&s->reflection) != 0)) {
    sluice__health_del(s->health);
    sluice__server_opts_clear(&s->opts);
    free(s);
    return SLUICE_ERR_NOMEM;
  }
  sluice__load_init(&s->load, &s->opts);
  sluice__admit_init(&s->admit, &s->opts, &s->load);
  sluice__scall_shared_init(&s->calls, &s->opts, &s->load, &s->admit);
  sluice__sconn_shared_init(&s->conns, &s->opts, &s->routes);
  *out = s;
  return 0;
}

/* The routes of a service, and its health status (SERVING by default). */
static int add_routes(sluice_server *srv, const sluice_service_desc *desc,
                      const sluice_method_dispatch *dispatch,
                      sluice_raw_dispatch raw, const void *handlers,
                      size_t handlers_size, void *user_data) {
  int rv = sluice__routes_add(&srv->routes, desc, dispatch, raw, handlers,
                              handlers_size, user_data, &srv->opts);
  if (rv == 0 && srv->health && desc->full_name)
    rv = sluice__health_add_default(srv->health, desc->full_name);
  return rv;
}

int sluice_server_add_service(sluice_server *srv,
                              const sluice_service_desc *desc,
                              const sluice_method_dispatch *dispatch,
                              const void *handlers, size_t handlers_size,
                              void *user_data) {
  /* A service without methods has no dispatch table (the generated code
   * passes NULL) and is registered all the same. */
  if (!srv || !desc || (desc->n_methods && (!dispatch || !desc->methods)) ||
      (!handlers && handlers_size))
    return SLUICE_ERR_INVALID_ARG;
  if (srv->started)
    return SLUICE_ERR_STATE;
  return add_routes(srv, desc, dispatch, NULL, handlers, handlers_size,
                    user_data);
}

int sluice_server_add_raw_service(sluice_server *srv,
                                  const sluice_service_desc *desc,
                                  sluice_raw_dispatch dispatch,
                                  void *user_data) {
  if (!srv || !desc || !dispatch || (desc->n_methods && !desc->methods))
    return SLUICE_ERR_INVALID_ARG;
  for (size_t i = 0; i < desc->n_methods; i++)
    if (!desc->methods[i].path)
      return SLUICE_ERR_INVALID_ARG;
  if (srv->started)
    return SLUICE_ERR_STATE;
  return add_routes(srv, desc, NULL, dispatch, NULL, 0, user_data);
}

int sluice_server_add_descriptors(sluice_server *srv,
                                  const sluice_file_descriptor *files,
                                  size_t n) {
  if (!srv || (!files && n))
    return SLUICE_ERR_INVALID_ARG;
  if (srv->started)
    return SLUICE_ERR_STATE;
  if (!srv->reflection || n == 0)
    return 0;
  return sluice__reflection_add(srv->reflection, files, n);
}

int sluice_server_set_serving_status(sluice_server *srv, const char *service,
                                     sluice_serving_status status) {
  if (!srv || !service ||
      (status != SLUICE_SERVING && status != SLUICE_NOT_SERVING))
    return SLUICE_ERR_INVALID_ARG;
  if (!srv->health)
    return SLUICE_ERR_STATE;
  return sluice__health_set(srv->health, service, status);
}

int sluice_server_set_utilization(sluice_server *srv, double utilization) {
  if (!srv)
    return SLUICE_ERR_INVALID_ARG;
  return sluice__load_set_utilization(&srv->load, utilization);
}

uint64_t sluice_server_conn_events(const sluice_server *srv,
                                   sluice_server_conn_event ev) {
  if (!srv || (unsigned)ev >= SLUICE__SCONN_EVENTS)
    return 0;
  return sluice__sconn_events(&srv->conns, (unsigned)ev);
}

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
  if (srv->health) {
    int rv = sluice__health_register(srv->health, &srv->routes, &srv->opts);
    if (rv != 0)
      return rv;
  }
  if (srv->reflection) {
    int rv =
        sluice__reflection_register(srv->reflection, &srv->routes, &srv->opts);
    if (rv != 0)
      return rv;
  }
  unsigned n = srv->opts.threads;
  if (n == 0) {
    n = (unsigned)uv_available_parallelism();
    if (n == 0)
      n = 1;
  }
  srv->loops = sluice__calloc(n, sizeof *srv->loops);
  srv->targets = sluice__calloc(n, sizeof *srv->targets);
  if (!srv->loops || !srv->targets ||
      sluice__admit_start(&srv->admit, n) != 0) {
    free(srv->loops);
    free(srv->targets);
    srv->loops = NULL;
    srv->targets = NULL;
    return SLUICE_ERR_NOMEM;
  }
  for (unsigned i = 0; i < n; i++) {
    sluice__sloop *sl = &srv->loops[i];
    sl->srv = srv;
    int rv = sluice__loop_new(&sl->loop, NULL);
    if (rv != 0) {
      srv->n_loops = i;
      srv->started = 1;
      sluice_server_shutdown(srv, 0);
      return rv;
    }
    sluice__scall_loop_init(&sl->conns.calls, &srv->calls, sl->loop,
                            sluice__admit_queue_open(&srv->admit, sl->loop));
    sluice__sconn_loop_init(&sl->conns, &srv->conns);
    srv->targets[i] = &sl->conns;
    srv->n_loops = i + 1;
  }
  srv->started = 1;
  sluice__load_start(&srv->load);
  sluice__listeners_start(&srv->listeners, srv->targets, srv->n_loops);
  return 0;
}

/* ---- shutdown */

static void drain_loop(sluice__task *t) {
  sluice__sloop *sl = SLUICE__CONTAINER_OF(t, sluice__sloop, drain_task);
  if (sl == &sl->srv->loops[0])
    sluice__listeners_close(&sl->srv->listeners);
  sluice__sconn_loop_goaway(&sl->conns, sl->srv->drain_grace_ms);
}

static void force_loop(void *ud) {
  sluice__sloop *sl = ud;
  sluice__admit_loop_close(sl->conns.calls.aq);
  sluice__sconn_loop_close(&sl->conns, "server shut down");
  sluice__scall_loop_close(&sl->conns.calls);
}

int sluice_server_shutdown(sluice_server *srv, uint64_t grace_ms) {
  if (!srv)
    return SLUICE_ERR_INVALID_ARG;
  if (!srv->started || __atomic_load_n(&srv->shut_down, __ATOMIC_ACQUIRE)) {
    __atomic_store_n(&srv->shut_down, 1, __ATOMIC_RELEASE);
    return 0;
  }
  __atomic_store_n(&srv->shut_down, 1, __ATOMIC_RELEASE);
  /* Health first: every name NOT_SERVING, each Watch stream told and
   * ended (waiting a little for their status to be out), then the GOAWAY.
   */
  sluice__health_shutdown(srv->health, grace_ms < 1000 ? grace_ms : 1000);
  sluice__listeners_stop(&srv->listeners); /* hand-offs in flight close */
  srv->drain_grace_ms = grace_ms;          /* read by drain_loop (posted) */
  for (unsigned i = 0; i < srv->n_loops; i++) {
    srv->loops[i].drain_task.fn = drain_loop;
    sluice__loop_post(srv->loops[i].loop, &srv->loops[i].drain_task);
  }
  /* Let in-flight calls finish until the grace period ends. */
  sluice__sconn_wait_gone(&srv->conns, uv_hrtime() + grace_ms * 1000000ull);
  /* Late finishes are parked until the loops are gone ... */
  sluice__scall_stop(&srv->calls);
  sluice__admit_stop(&srv->admit); /* no loop is woken from now on */
  /* ... and those that checked before are posted before a loop goes. */
  for (unsigned i = 0; i < srv->n_loops; i++)
    sluice__scall_loop_quiesce(&srv->loops[i].conns.calls);
  /* Cancel what is left and stop each loop (joins its thread). Loop 0 last:
   * it owns the listeners. */
  for (unsigned i = srv->n_loops; i-- > 0;) {
    sluice__loop_del(srv->loops[i].loop, force_loop, &srv->loops[i]);
    sluice__scall_loop_destroy(&srv->loops[i].conns.calls);
  }
  sluice__scall_free_orphans(&srv->calls);
  sluice__listeners_release(&srv->listeners);
  return 0;
}

void sluice_server_del(sluice_server *srv) {
  if (!srv)
    return;
  sluice_server_shutdown(srv, 0);
  sluice__listeners_free(&srv->listeners);
  sluice__routes_clear(&srv->routes);
  free(srv->loops);
  free(srv->targets);
  sluice__sconn_shared_destroy(&srv->conns);
  sluice__scall_shared_destroy(&srv->calls);
  sluice__admit_destroy(&srv->admit);
  sluice__load_destroy(&srv->load);
  sluice__health_del(srv->health);
  sluice__reflection_del(srv->reflection);
  sluice__server_opts_clear(&srv->opts);
  free(srv);
}
