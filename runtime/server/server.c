/* Servers: options, the method registry, listening sockets, loop threads,
 * and graceful shutdown. Connections are accepted on loop 0 and handed to
 * loops round robin (SO_REUSEPORT's hashing balanced poorly here). */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "server/server_internal.h"
#include "transport/tls.h"

int sluice_server_opts_new(sluice_server_opts **out) {
  if (!out)
    return SLUICE_ERR_INVALID_ARG;
  sluice_server_opts *o = calloc(1, sizeof *o);
  if (!o)
    return SLUICE_ERR_NOMEM;
  o->max_request_size = 4u * 1024 * 1024;
  o->max_response_size = UINT32_MAX;
  o->max_concurrent_streams = 1000;
  o->send_buffer = SLUICE_DEFAULT_SEND_BUFFER;
  o->max_queue = 1000;
  o->load_report = 1;
  o->load_report_interval_ms = 10; /* see server.h: cost vs freshness */
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
  char *copy = strdup(path);
  sluice__method_limit *l = realloc(
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

int sluice_server_opts_set_load_report_interval(sluice_server_opts *o,
                                                uint32_t ms) {
  if (!o || ms > 3600000u)
    return SLUICE_ERR_INVALID_ARG;
  o->load_report_interval_ms = ms;
  return 0;
}

/* The server's own copy of the per-method limits. */
static int copy_method_limits(sluice_server_opts *dst,
                              const sluice_server_opts *src) {
  dst->method_limits = NULL;
  dst->n_method_limits = 0;
  if (!src->n_method_limits)
    return 0;
  dst->method_limits = calloc(src->n_method_limits, sizeof *dst->method_limits);
  if (!dst->method_limits)
    return SLUICE_ERR_NOMEM;
  for (size_t i = 0; i < src->n_method_limits; i++) {
    dst->method_limits[i].limit = src->method_limits[i].limit;
    dst->method_limits[i].path = strdup(src->method_limits[i].path);
    dst->n_method_limits++;
    if (!dst->method_limits[i].path) {
      free_method_limits(dst);
      return SLUICE_ERR_NOMEM;
    }
  }
  return 0;
}

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
  s->opts = *opts;
  if (copy_method_limits(&s->opts, opts) != 0) {
    sluice_server_opts_del(defaults);
    free(s);
    return SLUICE_ERR_NOMEM;
  }
  sluice__tls_ctx_ref(s->opts.tls); /* dropped in sluice_server_del */
  sluice_server_opts_del(defaults);
  s->limits = s->opts.max_calls > 0;
  for (size_t i = 0; i < s->opts.n_method_limits; i++)
    s->limits |= s->opts.method_limits[i].limit > 0;
  s->count_calls = s->limits || s->opts.load_report;
  uv_mutex_init(&s->mu);
  uv_mutex_init(&s->win_mu);
  sluice_server_set_utilization(s, -1); /* not given until the user says */
  uv_cond_init(&s->cv);
  *out = s;
  return 0;
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
    r->limit = 0;
    r->in_flight = 0;
    for (size_t j = 0; j < srv->opts.n_method_limits; j++)
      if (strcmp(srv->opts.method_limits[j].path, r->method->path) == 0)
        r->limit = srv->opts.method_limits[j].limit;
  }
  return 0;
}

/* Linear: services have few methods; a hash comes with the benchmarks if a
 * profile shows it. */
const sluice__route *sluice__server_route(const sluice_server *srv,
                                          const char *path, size_t len) {
  for (size_t i = 0; i < srv->n_routes; i++) {
    const char *p = srv->routes[i].method->path;
    if (strlen(p) == len && memcmp(p, path, len) == 0)
      return &srv->routes[i];
  }
  return NULL;
}

/* ---- listening (plain sockets: the port is known before loops start) */

/* Keeps a listening socket; closes fd on failure. */
static int add_listener(sluice_server *srv, int fd, const char *path) {
  sluice__listener *l =
      realloc(srv->listeners, (srv->n_listeners + 1) * sizeof *l);
  if (!l) {
    close(fd);
    return SLUICE_ERR_NOMEM;
  }
  srv->listeners = l;
  l = &srv->listeners[srv->n_listeners++];
  memset(l, 0, sizeof *l);
  l->fd = fd;
  l->is_pipe = path != NULL;
  l->path = path ? strdup(path) : NULL;
  return 0;
}

static int listen_unix(sluice_server *srv, const char *path) {
  struct sockaddr_un sa;
  memset(&sa, 0, sizeof sa);
  if (!*path || strlen(path) >= sizeof sa.sun_path)
    return SLUICE_ERR_BAD_ADDRESS;
  sa.sun_family = AF_UNIX;
  strcpy(sa.sun_path, path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return SLUICE_ERR_SYSTEM;
  unlink(path); /* a stale socket file from an earlier run */
  if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
      listen(fd, 1024) != 0) {
    close(fd);
    return SLUICE_ERR_BAD_ADDRESS;
  }
  return add_listener(srv, fd, path);
}

int sluice_server_listen(sluice_server *srv, const char *address,
                         int *port_out) {
  if (!srv || !address)
    return SLUICE_ERR_INVALID_ARG;
  if (srv->started)
    return SLUICE_ERR_STATE;
  if (port_out)
    *port_out = 0;
  if (strncmp(address, "unix:", 5) == 0)
    return listen_unix(srv, address + 5);
  /* host:port or [v6]:port */
  char host[256];
  const char *colon = strrchr(address, ':');
  if (!colon || colon == address || strlen(colon + 1) == 0 ||
      (size_t)(colon - address) >= sizeof host)
    return SLUICE_ERR_BAD_ADDRESS;
  const char *hs = address;
  size_t hl = (size_t)(colon - address);
  if (hs[0] == '[' && hl >= 2 && hs[hl - 1] == ']') {
    hs++;
    hl -= 2;
  }
  memcpy(host, hs, hl);
  host[hl] = 0;
  for (const char *p = colon + 1; *p; p++)
    if (*p < '0' || *p > '9')
      return SLUICE_ERR_BAD_ADDRESS;
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  if (getaddrinfo(hl ? host : NULL, colon + 1, &hints, &res) != 0 || !res)
    return SLUICE_ERR_BAD_ADDRESS;
  int fd =
      socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    freeaddrinfo(res);
    return SLUICE_ERR_SYSTEM;
  }
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 1024) != 0) {
    freeaddrinfo(res);
    close(fd);
    return SLUICE_ERR_BAD_ADDRESS;
  }
  freeaddrinfo(res);
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  getsockname(fd, (struct sockaddr *)&ss, &sl);
  int port = ss.ss_family == AF_INET6
                 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                 : ntohs(((struct sockaddr_in *)&ss)->sin_port);
  int rv = add_listener(srv, fd, NULL);
  if (rv == 0 && port_out)
    *port_out = port;
  return rv;
}

/* ---- accepting */

typedef struct handoff {
  sluice__task task;
  sluice__sloop *sl;
  int fd;
  int is_pipe;
} handoff;

static void on_handoff(sluice__task *t) {
  handoff *h = (handoff *)t;
  if (__atomic_load_n(&h->sl->srv->shut_down, __ATOMIC_ACQUIRE) ||
      sluice__sconn_accept(h->sl, h->fd, h->is_pipe) != 0)
    close(h->fd);
  free(h);
}

static void on_listen_readable(uv_poll_t *p, int status, int events) {
  sluice__listener *l = p->data;
  sluice_server *srv = ((sluice__sloop *)l->poll.loop->data)->srv;
  (void)events;
  if (status < 0)
    return;
  /* Drain the backlog, bounded so one burst cannot starve the loop. */
  for (int i = 0; i < 64; i++) {
    int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0)
      break;
    handoff *h = malloc(sizeof *h);
    if (!h) {
      close(fd);
      continue;
    }
    memset(h, 0, sizeof *h);
    h->task.fn = on_handoff;
    h->sl = &srv->loops[srv->next_loop++ % srv->n_loops];
    h->fd = fd;
    h->is_pipe = l->is_pipe;
    sluice__loop_post(h->sl->loop, &h->task);
  }
}

static void start_listeners(sluice__task *t) {
  sluice__sloop *sl =
      (sluice__sloop *)((char *)t - offsetof(sluice__sloop, start_task));
  sluice_server *srv = sl->srv;
  sluice__loop_uv(sl->loop)->data = sl;
  for (size_t i = 0; i < srv->n_listeners; i++) {
    sluice__listener *l = &srv->listeners[i];
    uv_poll_init(sluice__loop_uv(sl->loop), &l->poll, l->fd);
    l->poll.data = l;
    uv_poll_start(&l->poll, UV_READABLE, on_listen_readable);
    srv->listeners_open++;
  }
}

int sluice_server_start(sluice_server *srv) {
  if (!srv)
    return SLUICE_ERR_INVALID_ARG;
  if (srv->started || srv->n_listeners == 0)
    return SLUICE_ERR_STATE;
  unsigned n = srv->opts.threads;
  if (n == 0) {
    n = (unsigned)uv_available_parallelism();
    if (n == 0)
      n = 1;
  }
  srv->loops = calloc(n, sizeof *srv->loops);
  if (!srv->loops)
    return SLUICE_ERR_NOMEM;
  for (unsigned i = 0; i < n; i++) {
    sluice__sloop *sl = &srv->loops[i];
    sl->srv = srv;
    sluice__objcache_init(&sl->call_cache, sizeof(sluice_server_call), 128);
    int rv = sluice__loop_new(&sl->loop, NULL);
    if (rv != 0) {
      srv->n_loops = i;
      srv->started = 1;
      sluice_server_shutdown(srv, 0);
      return rv;
    }
    srv->n_loops = i + 1;
  }
  srv->started = 1;
  sluice__admit_init(srv);
  srv->loops[0].start_task.fn = start_listeners;
  sluice__loop_post(srv->loops[0].loop, &srv->loops[0].start_task);
  return 0;
}

/* ---- shutdown */

static void on_listener_closed(uv_handle_t *h) {
  sluice__listener *l = h->data;
  close(l->fd);
  if (l->path)
    unlink(l->path);
  l->fd = -1;
}

static void drain_loop(sluice__task *t) {
  sluice__sloop *sl =
      (sluice__sloop *)((char *)t - offsetof(sluice__sloop, drain_task));
  sluice_server *srv = sl->srv;
  if (sl == &srv->loops[0]) {
    for (size_t i = 0; i < srv->n_listeners; i++)
      if (srv->listeners[i].fd >= 0 && srv->listeners_open)
        uv_close((uv_handle_t *)&srv->listeners[i].poll, on_listener_closed);
    srv->listeners_open = 0;
  }
  for (sluice__sconn *sc = sl->conns; sc;) {
    sluice__sconn *next = sc->next;
    sluice__sconn_goaway(sc);
    sc = next;
  }
}

static void force_loop(void *ud) {
  sluice__sloop *sl = ud;
  sluice__admit_loop_close(sl);
  for (sluice__sconn *sc = sl->conns; sc;) {
    sluice__sconn *next = sc->next;
    sluice__sconn_close(sc, "server shut down");
    sc = next;
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
  /* Read by loop threads (hand-offs still in flight close their socket). */
  __atomic_store_n(&srv->shut_down, 1, __ATOMIC_RELEASE);
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
  for (size_t i = 0; i < srv->n_listeners; i++)
    if (srv->listeners[i].fd >= 0) {
      close(srv->listeners[i].fd);
      if (srv->listeners[i].path)
        unlink(srv->listeners[i].path);
      srv->listeners[i].fd = -1;
    }
  return 0;
}

void sluice_server_del(sluice_server *srv) {
  if (!srv)
    return;
  sluice_server_shutdown(srv, 0);
  for (size_t i = 0; i < srv->n_listeners; i++) {
    if (srv->listeners[i].fd >= 0)
      close(srv->listeners[i].fd);
    free(srv->listeners[i].path);
  }
  free(srv->listeners);
  for (size_t i = 0; i < srv->n_services; i++)
    free(srv->handler_copies[i]);
  free(srv->handler_copies);
  free(srv->routes);
  free(srv->loops);
  sluice__tls_ctx_unref(srv->opts.tls);
  free_method_limits(&srv->opts);
  uv_mutex_destroy(&srv->mu);
  uv_mutex_destroy(&srv->win_mu);
  uv_cond_destroy(&srv->cv);
  free(srv);
}
