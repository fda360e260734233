/* Internal structures of the server layer: server -> loops -> HTTP/2
 * connections -> calls. */
#ifndef SLUICE_SERVER_INTERNAL_H
#define SLUICE_SERVER_INTERNAL_H

#include <stdint.h>

#include "core/loop.h"
#include "sluice/server.h"
#include "transport/conn.h"
#include "wire/framing.h"

typedef struct sluice__sloop sluice__sloop;
typedef struct sluice__sconn sluice__sconn;

/* A registered method. */
typedef struct sluice__route {
  const sluice_method_desc *method;
  sluice_unary_dispatch dispatch;
  const void *handlers; /* the service's copy */
  void *user_data;
} sluice__route;

struct sluice_server_opts {
  unsigned threads;
  uint32_t max_request_size;
  uint32_t max_response_size;
  uint32_t max_concurrent_streams;
};

typedef struct sluice__listener {
  int fd;
  int is_pipe;
  uv_poll_t poll;
  char *path; /* unix: to unlink on shutdown */
} sluice__listener;

struct sluice__sloop {
  sluice_server *srv;
  sluice__loop *loop;
  sluice__task start_task, drain_task, force_task;
  struct sluice__sconn *conns; /* doubly linked */
  unsigned n_conns;
};

struct sluice_server {
  struct sluice_server_opts opts;
  sluice__route *routes;
  size_t n_routes;
  void **handler_copies;
  size_t n_services;
  sluice__listener *listeners;
  size_t n_listeners;
  sluice__sloop *loops;
  unsigned n_loops;
  unsigned next_loop;
  int started;
  int stopped; /* guarded by mu: finish() after this frees calls directly */
  int shut_down;
  uv_mutex_t mu;
  uv_cond_t cv;
  unsigned live_conns;     /* guarded by mu */
  unsigned listeners_open; /* loop 0 only */
};

/* One HTTP/2 server connection. */
struct sluice__sconn {
  sluice__conn conn; /* first */
  sluice__sloop *sl;
  sluice__sconn *prev, *next;
  int draining;
  unsigned active_calls;
  struct sluice_server_call *calls; /* attached to a stream; linked */
};

struct sluice_server_call {
  sluice__task finish_task;
  sluice_server_call *prev, *next; /* in sc->calls while attached */
  sluice__sconn *sc;               /* NULL once the stream is gone */
  sluice_server *srv;
  sluice__sloop *sl;
  int32_t stream_id;
  const sluice__route *route;
  /* request */
  char *path;
  int bad_method, bad_content_type;
  int have_te;
  uint64_t deadline_ns;
  int bad_timeout;
  sluice_metadata *md;
  sluice__deframer deframer;
  ProtobufCMessage *req;
  int n_msgs;
  sluice_status_code fail_code;
  const char *fail_reason;
  char fail_buf[160];
  char peer[64];
  uv_timer_t timer;
  int timer_open;
  int refs;         /* stream + handler + timer */
  int handler_owes; /* dispatched, finish not yet called */
  int responded;    /* a response was submitted */
  int cancelled;    /* atomic: reply will be discarded */
  /* response (filled by finish, possibly on another thread) */
  sluice_status_code code;
  char *message;
  uint8_t *resp;
  size_t resp_len, resp_sent;
  sluice_metadata *initial_md, *trailing_md;
};

/* server_conn.c */
int sluice__sconn_accept(sluice__sloop *sl, uv_os_sock_t fd, int is_pipe);
void sluice__sconn_goaway(sluice__sconn *sc);
void sluice__sconn_close(sluice__sconn *sc, const char *reason);

/* server_call.c */
sluice_server_call *sluice__scall_new(sluice__sconn *sc, int32_t stream_id);
/* The request is complete: validate, decode and run the handler. */
void sluice__scall_request_done(sluice_server_call *call);
/* Answers with an error (trailers-only) from the library itself. */
void sluice__scall_fail(sluice_server_call *call, sluice_status_code code,
                        const char *message);
/* The stream closed (or the connection died). */
void sluice__scall_stream_closed(sluice_server_call *call);
void sluice__scall_unref(sluice_server_call *call);
const sluice__route *sluice__server_route(const sluice_server *srv,
                                          const char *path, size_t len);
void sluice__server_conn_gone(sluice_server *srv);

#endif
