/* grpc.health.v1.Health, served by the library (see health.h).
 *
 * The two messages are tiny, so their protobuf-c descriptors are written
 * here by hand, field for field as protoc-c emits them for the standard
 * grpc/health/v1/health.proto (the status is an enum on the wire, a
 * varint: an int32 field reads and writes the same bytes). */
#include "server/health.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "core/alloc.h"
#include "core/list.h"

/* ---- the messages */

typedef struct {
  ProtobufCMessage base;
  char *service;
} health_req;

typedef struct {
  ProtobufCMessage base;
  int32_t status;
} health_resp;

static const ProtobufCMessageDescriptor req_desc;
static const ProtobufCMessageDescriptor resp_desc;

static void req_init(ProtobufCMessage *m) {
  static const health_req init = {PROTOBUF_C_MESSAGE_INIT(&req_desc),
                                  (char *)protobuf_c_empty_string};
  *(health_req *)m = init;
}

static void resp_init(ProtobufCMessage *m) {
  static const health_resp init = {PROTOBUF_C_MESSAGE_INIT(&resp_desc), 0};
  *(health_resp *)m = init;
}

static const ProtobufCFieldDescriptor req_fields[1] = {
    {"service", 1, PROTOBUF_C_LABEL_NONE, PROTOBUF_C_TYPE_STRING, 0,
     offsetof(health_req, service), NULL, &protobuf_c_empty_string, 0, 0, NULL,
     NULL},
};
static const ProtobufCFieldDescriptor resp_fields[1] = {
    {"status", 1, PROTOBUF_C_LABEL_NONE, PROTOBUF_C_TYPE_INT32, 0,
     offsetof(health_resp, status), NULL, NULL, 0, 0, NULL, NULL},
};
static const unsigned by_name[] = {0};
static const ProtobufCIntRange ranges[1 + 1] = {{1, 0}, {0, 1}};

static const ProtobufCMessageDescriptor req_desc = {
    PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC,
    "grpc.health.v1.HealthCheckRequest",
    "HealthCheckRequest",
    "Grpc__Health__V1__HealthCheckRequest",
    "grpc.health.v1",
    sizeof(health_req),
    1,
    req_fields,
    by_name,
    1,
    ranges,
    req_init,
    NULL,
    NULL,
    NULL};
static const ProtobufCMessageDescriptor resp_desc = {
    PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC,
    "grpc.health.v1.HealthCheckResponse",
    "HealthCheckResponse",
    "Grpc__Health__V1__HealthCheckResponse",
    "grpc.health.v1",
    sizeof(health_resp),
    1,
    resp_fields,
    by_name,
    1,
    ranges,
    resp_init,
    NULL,
    NULL,
    NULL};

#define HEALTH_SERVICE "grpc.health.v1.Health"

static const sluice_method_desc methods[2] = {
    {"/" HEALTH_SERVICE "/Check", "Check", &req_desc, &resp_desc,
     SLUICE_CALL_UNARY, 0, 0, 0, NULL},
    {"/" HEALTH_SERVICE "/Watch", "Watch", &req_desc, &resp_desc,
     SLUICE_CALL_SERVER_STREAMING, 0, 0, 0, NULL},
};
static const sluice_service_desc service = {HEALTH_SERVICE, 2, methods};

/* ---- the table */

typedef struct entry {
  char *name;
  sluice_serving_status status;
} entry;

/* One Watch stream. */
typedef struct watcher {
  sluice__list link; /* in h->watchers while the stream is ours to end */
  sluice__health *h;
  sluice_server_call *call;
  int last;     /* last status sent; -1: none */
  int pending;  /* status to send once the queue has room; -1: none */
  int full;     /* a send was refused: wait for on_send_ready */
  int finished; /* finish was called (by shutdown or on_done) */
  int ending;   /* finished by shutdown: counted in h->ending */
  char name[];
} watcher;

struct sluice__health {
  uv_mutex_t mu;
  uv_cond_t ended; /* a stream shutdown finished is over */
  size_t ending;   /* streams shutdown finished that are not over yet */
  entry *v;
  size_t n, cap;
  sluice__list watchers;
  int frozen; /* shut down: everything NOT_SERVING from now on */
};

int sluice__health_new(sluice__health **out) {
  sluice__health *h = sluice__calloc(1, sizeof *h);
  if (!h)
    return SLUICE_ERR_NOMEM;
  if (uv_mutex_init(&h->mu) != 0) {
    free(h);
    return SLUICE_ERR_NOMEM;
  }
  if (uv_cond_init(&h->ended) != 0) {
    uv_mutex_destroy(&h->mu);
    free(h);
    return SLUICE_ERR_NOMEM;
  }
  sluice__list_init(&h->watchers);
  if (sluice__health_add_default(h, "") != 0) {
    sluice__health_del(h);
    return SLUICE_ERR_NOMEM;
  }
  *out = h;
  return 0;
}

void sluice__health_del(sluice__health *h) {
  if (!h)
    return;
  /* The loops are gone, and every watcher with its call's on_done. */
  for (size_t i = 0; i < h->n; i++)
    free(h->v[i].name);
  free(h->v);
  uv_cond_destroy(&h->ended);
  uv_mutex_destroy(&h->mu);
  free(h);
}

/* Under mu. */
static entry *find(sluice__health *h, const char *name) {
  for (size_t i = 0; i < h->n; i++)
    if (strcmp(h->v[i].name, name) == 0)
      return &h->v[i];
  return NULL;
}

/* Under mu. Returns the entry, or NULL without memory. */
static entry *find_or_add(sluice__health *h, const char *name,
                          sluice_serving_status status, int *added) {
  entry *e = find(h, name);
  *added = 0;
  if (e)
    return e;
  if (h->n == h->cap) {
    size_t cap = h->cap ? h->cap * 2 : 8;
    entry *v = sluice__realloc(h->v, cap * sizeof *v);
    if (!v)
      return NULL;
    h->v = v;
    h->cap = cap;
  }
  char *copy = sluice__strdup(name);
  if (!copy)
    return NULL;
  e = &h->v[h->n++];
  e->name = copy;
  e->status = status;
  *added = 1;
  return e;
}

/* Under mu: sends status to w unless it has it; a full queue keeps only
 * the latest for on_send_ready. */
static void tell(watcher *w, int status) {
  if (w->finished)
    return;
  if (w->full) {
    w->pending = status;
    return;
  }
  w->pending = -1;
  if (status == w->last)
    return;
  health_resp r;
  resp_init(&r.base);
  r.status = status;
  int rv = sluice_server_call_send(w->call, &r.base);
  if (rv == SLUICE_ERR_FULL) {
    w->full = 1;
    w->pending = status;
  } else if (rv == 0) {
    w->last = status;
  }
  /* SLUICE_ERR_STATE: the call is over; on_done follows. */
}

static void tell_name(sluice__health *h, const char *name, int status) {
  SLUICE__LIST_FOREACH_SAFE(n, &h->watchers) {
    watcher *w = SLUICE__CONTAINER_OF(n, watcher, link);
    if (strcmp(w->name, name) == 0)
      tell(w, status);
  }
}

int sluice__health_add_default(sluice__health *h, const char *name) {
  uv_mutex_lock(&h->mu);
  int added;
  entry *e = find_or_add(h, name, SLUICE_SERVING, &added);
  if (e && added)
    tell_name(h, name, e->status);
  uv_mutex_unlock(&h->mu);
  return e ? 0 : SLUICE_ERR_NOMEM;
}

int sluice__health_set(sluice__health *h, const char *name,
                       sluice_serving_status status) {
  uv_mutex_lock(&h->mu);
  if (h->frozen) {
    uv_mutex_unlock(&h->mu);
    return SLUICE_ERR_STATE;
  }
  int added;
  entry *e = find_or_add(h, name, status, &added);
  if (e) {
    e->status = status;
    tell_name(h, name, status);
  }
  uv_mutex_unlock(&h->mu);
  return e ? 0 : SLUICE_ERR_NOMEM;
}

void sluice__health_shutdown(sluice__health *h, uint64_t wait_ms) {
  if (!h)
    return;
  uv_mutex_lock(&h->mu);
  h->frozen = 1;
  for (size_t i = 0; i < h->n; i++)
    h->v[i].status = SLUICE_NOT_SERVING;
  /* Each stream is told, then ended: its status follows the message on
   * the stream, and the connection can drain at once. */
  SLUICE__LIST_FOREACH_SAFE(n, &h->watchers) {
    watcher *w = SLUICE__CONTAINER_OF(n, watcher, link);
    sluice__list_remove(&w->link);
    w->full = 0; /* the last word goes out whatever the bound */
    tell(w, find(h, w->name) ? SLUICE_NOT_SERVING : SLUICE_SERVICE_UNKNOWN);
    if (!w->finished) {
      w->finished = 1;
      w->ending = 1;
      h->ending++;
      sluice_server_call_finish(w->call, SLUICE_STATUS_UNAVAILABLE,
                                "server shutting down", NULL);
    }
  }
  /* Until each stream's status is out (its on_done), bounded: a client
   * that reads nothing holds its stream no longer than this. */
  uint64_t end = uv_hrtime() + wait_ms * 1000000ull;
  while (h->ending) {
    uint64_t now = uv_hrtime();
    if (now >= end || uv_cond_timedwait(&h->ended, &h->mu, end - now) != 0)
      break;
  }
  uv_mutex_unlock(&h->mu);
}

/* ---- the handlers */

static void check(sluice_server_call *call, const ProtobufCMessage *req,
                  const void *handlers, void *user_data) {
  (void)handlers;
  sluice__health *h = user_data;
  const health_req *rq = (const health_req *)req;
  uv_mutex_lock(&h->mu);
  entry *e = find(h, rq->service ? rq->service : "");
  int status = e ? (int)e->status : -1;
  uv_mutex_unlock(&h->mu);
  if (status < 0) {
    sluice_server_call_finish(call, SLUICE_STATUS_NOT_FOUND, "unknown service",
                              NULL);
    return;
  }
  health_resp r;
  resp_init(&r.base);
  r.status = status;
  sluice_server_call_reply(call, &r.base);
}

static void watch_send_ready(sluice_server_call *call, void *ud) {
  (void)call;
  watcher *w = ud;
  sluice__health *h = w->h;
  uv_mutex_lock(&h->mu);
  w->full = 0;
  if (w->pending >= 0)
    tell(w, w->pending);
  uv_mutex_unlock(&h->mu);
}

static void watch_done(sluice_server_call *call, int cancelled, void *ud) {
  (void)cancelled;
  watcher *w = ud;
  sluice__health *h = w->h;
  uv_mutex_lock(&h->mu);
  sluice__list_remove(&w->link);
  int finished = w->finished;
  w->finished = 1;
  if (w->ending && --h->ending == 0)
    uv_cond_broadcast(&h->ended);
  uv_mutex_unlock(&h->mu);
  if (!finished)
    sluice_server_call_finish(call, SLUICE_STATUS_CANCELLED, "", NULL);
  free(w);
}

static void watch(sluice_server_call *call, const ProtobufCMessage *req,
                  const void *handlers, void *user_data) {
  (void)handlers;
  sluice__health *h = user_data;
  const health_req *rq = (const health_req *)req;
  const char *name = rq->service ? rq->service : "";
  size_t len = strlen(name);
  watcher *w = sluice__calloc(1, sizeof *w + len + 1);
  if (!w) {
    sluice_server_call_finish(call, SLUICE_STATUS_RESOURCE_EXHAUSTED,
                              "out of memory", NULL);
    return;
  }
  memcpy(w->name, name, len + 1);
  w->h = h;
  w->call = call;
  w->last = w->pending = -1;
  sluice__list_init(&w->link);
  static const sluice_server_call_handlers hs = {NULL, NULL, watch_send_ready,
                                                 watch_done};
  if (sluice_server_call_set_handlers(call, &hs, w) != 0) {
    free(w);
    sluice_server_call_finish(call, SLUICE_STATUS_INTERNAL, "", NULL);
    return;
  }
  /* From here on watch_done frees w. */
  uv_mutex_lock(&h->mu);
  entry *e = find(h, name);
  tell(w, e ? (int)e->status : SLUICE_SERVICE_UNKNOWN);
  if (h->frozen) { /* shutdown has begun: tell and end */
    w->finished = 1;
    sluice_server_call_finish(call, SLUICE_STATUS_UNAVAILABLE,
                              "server shutting down", NULL);
  } else {
    sluice__list_push(&h->watchers, &w->link);
  }
  uv_mutex_unlock(&h->mu);
}

int sluice__health_register(sluice__health *h, sluice__routes *r,
                            const sluice_server_opts *o) {
  static const sluice_method_dispatch dispatch[2] = {check, watch};
  int rv = sluice__routes_add(r, &service, dispatch, NULL, NULL, 0, h, o);
  if (rv == SLUICE_ERR_DUPLICATE)
    return 0; /* the application serves its own */
  if (rv != 0)
    return rv;
  for (size_t i = 0; i < r->n; i++)
    if (r->v[i].method == &methods[0] || r->v[i].method == &methods[1])
      r->v[i].bypass = o->health_bypass;
  return 0;
}
