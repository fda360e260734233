/* The method registry (see route.h). */
#include "server/route.h"

#include "core/alloc.h"
#include <stdlib.h>
#include <string.h>

int sluice__routes_add(sluice__routes *r, const sluice_service_desc *desc,
                       const sluice_method_dispatch *dispatch,
                       sluice_raw_dispatch raw, const void *handlers,
                       size_t handlers_size, void *user_data,
                       const sluice_server_opts *o) {
  for (size_t i = 0; i < desc->n_methods; i++)
    if (sluice__routes_find(r, desc->methods[i].path,
                            strlen(desc->methods[i].path)))
      return SLUICE_ERR_DUPLICATE;
  void *copy = sluice__malloc(handlers_size ? handlers_size : 1);
  void **copies =
      sluice__realloc(r->handler_copies, (r->n_services + 1) * sizeof *copies);
  /* realloc(p, 0) may free p: only grow. */
  sluice__route *routes =
      desc->n_methods
          ? sluice__realloc(r->v, (r->n + desc->n_methods) * sizeof *routes)
          : r->v;
  if (copies)
    r->handler_copies = copies;
  if (routes)
    r->v = routes;
  if (!copy || !copies || (desc->n_methods && !routes)) {
    free(copy);
    return SLUICE_ERR_NOMEM;
  }
  if (handlers_size)
    memcpy(copy, handlers, handlers_size);
  r->handler_copies[r->n_services++] = copy;
  for (size_t i = 0; i < desc->n_methods; i++) {
    sluice__route *rt = &r->v[r->n++];
    rt->method = &desc->methods[i];
    rt->dispatch = raw ? NULL : dispatch[i];
    rt->raw = raw;
    rt->handlers = copy;
    rt->user_data = user_data;
    rt->limit.limit = 0;
    rt->limit.in_flight = 0;
    rt->bypass = 0;
    for (size_t j = 0; j < o->n_method_limits; j++)
      if (strcmp(o->method_limits[j].path, rt->method->path) == 0)
        rt->limit.limit = o->method_limits[j].limit;
  }
  return 0;
}

/* Linear: services have few methods; a hash comes with the benchmarks if a
 * profile shows it. */
sluice__route *sluice__routes_find(sluice__routes *r, const char *path,
                                   size_t len) {
  for (size_t i = 0; i < r->n; i++) {
    const char *p = r->v[i].method->path;
    if (strlen(p) == len && memcmp(p, path, len) == 0)
      return &r->v[i];
  }
  return NULL;
}

void sluice__routes_clear(sluice__routes *r) {
  for (size_t i = 0; i < r->n_services; i++)
    free(r->handler_copies[i]);
  free(r->handler_copies);
  free(r->v);
  memset(r, 0, sizeof *r);
}
