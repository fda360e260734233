/* The method registry: one route per registered method (its dispatch, the
 * service's handler struct, its concurrency limit), found by path. Filled
 * before the server starts, read-only afterwards except for the limits'
 * atomic counters. */
#ifndef SLUICE_SERVER_ROUTE_H
#define SLUICE_SERVER_ROUTE_H

#include <stddef.h>

#include "server/admit.h"
#include "server/server_opts.h"
#include "sluice/server.h"

/* A registered method. */
typedef struct sluice__route {
  const sluice_method_desc *method;
  sluice_method_dispatch dispatch; /* NULL for a raw route */
  sluice_raw_dispatch raw;         /* a raw route's (add_raw_service) */
  const void *handlers;            /* the service's copy */
  void *user_data;
  sluice__admit_limit limit; /* max concurrent calls of this method */
  int bypass; /* skips admission (the library's health service) */
} sluice__route;

typedef struct sluice__routes {
  sluice__route *v;
  size_t n;
  void **handler_copies; /* one per service */
  size_t n_services;
} sluice__routes;

/* Registers desc's methods (arguments checked by the caller), with a copy
 * of handlers (handlers_size bytes) and each method's limit from o. With
 * raw set (dispatch then NULL) they are raw routes, all dispatched to it.
 * Returns 0, SLUICE_ERR_DUPLICATE (a path is taken; nothing added) or
 * SLUICE_ERR_NOMEM. */
int sluice__routes_add(sluice__routes *r, const sluice_service_desc *desc,
                       const sluice_method_dispatch *dispatch,
                       sluice_raw_dispatch raw, const void *handlers,
                       size_t handlers_size, void *user_data,
                       const sluice_server_opts *o);

/* The route of path (len bytes, not NUL-terminated), or NULL. */
sluice__route *sluice__routes_find(sluice__routes *r, const char *path,
                                   size_t len);

/* Frees the routes and the handler copies. */
void sluice__routes_clear(sluice__routes *r);

#endif
