/* The server side of one HTTP/2 connection: nghttp2 server session
 * callbacks that turn streams into calls (see server_conn.h). */
#include "server/server_conn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/clock.h"
#include "transport/h2session.h"
#include "transport/tls.h"

/* One HTTP/2 server connection. */
typedef struct sluice__sconn {
  sluice__conn conn;
  sluice__sconn_loop *cl;
  sluice__list link; /* in cl->conns */
  int draining;
  char *peer_identity; /* verified client certificate subject, or NULL */
  sluice__list calls;  /* its calls' streams (sluice__sstream.link) */
  sluice__load_pacer load_pacer; /* next load report due */
} sluice__sconn;

/* The call of stream id (its sluice__sstream), or NULL. */
static sluice__sstream *stream_of(nghttp2_session *s, int32_t id) {
  return nghttp2_session_get_stream_user_data(s, id);
}

static int on_begin_headers(nghttp2_session *s, const nghttp2_frame *frame,
                            void *ud) {
  sluice__sconn *sc = ud;
  if (frame->hd.type != NGHTTP2_HEADERS ||
      frame->headers.cat != NGHTTP2_HCAT_REQUEST)
    return 0;
  sluice__sstream *st =
      sluice__scall_new(&sc->cl->calls, &sc->conn, frame->hd.stream_id,
                        sc->peer_identity, &sc->load_pacer);
  if (!st)
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* resets the stream */
  sluice__list_push(&sc->calls, &st->link);
  nghttp2_session_set_stream_user_data(s, frame->hd.stream_id, st);
  return 0;
}

static int on_header(nghttp2_session *s, const nghttp2_frame *frame,
                     const uint8_t *name, size_t nlen, const uint8_t *value,
                     size_t vlen, uint8_t flags, void *ud) {
  (void)flags;
  (void)ud;
  sluice__sstream *st = stream_of(s, frame->hd.stream_id);
  if (!st || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
    return 0; /* trailers from a client carry nothing for unary calls */
  /* An entry without memory is lost; the request goes on. */
  sluice__grpc_req_header(&st->req, (const char *)name, nlen, value, vlen);
  return 0;
}

static int on_frame_recv(nghttp2_session *s, const nghttp2_frame *frame,
                         void *ud) {
  sluice__sconn *sc = ud;
  if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA)
    return 0;
  sluice__sstream *st = stream_of(s, frame->hd.stream_id);
  if (!st)
    return 0;
  const sluice__grpc_req *rq = &st->req;
  if (frame->hd.type == NGHTTP2_HEADERS &&
      frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
    if (rq->have_timeout)
      st->deadline_ns = sluice__grpc_req_deadline(rq, sluice_now_ns());
    /* Headers complete: refuse early what can never succeed, so a client
     * does not stream a large body for nothing (wire/grpc_headers.h: a bad
     * content-type is answered with HTTP 415). */
    sluice__grpc_req_verdict v = sluice__grpc_req_done(rq);
    if (v.fault != SLUICE__GRPC_REQ_OK) {
      sluice__scall_fail(st, v.code, v.text);
      return 0;
    }
    sluice__route *route =
        sluice__routes_find(sc->cl->shared->routes, rq->path, strlen(rq->path));
    if (!route || !route->dispatch) {
      char msg[300];
      snprintf(msg, sizeof msg, "unknown method %.250s", rq->path);
      sluice__scall_fail(st, SLUICE_STATUS_UNIMPLEMENTED, msg);
      return 0;
    }
    sluice__scall_headers_done(st, route);
  }
  if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)
    sluice__scall_request_done(st);
  return 0;
}

static int on_data(nghttp2_session *s, uint8_t flags, int32_t id,
                   const uint8_t *data, size_t len, void *ud) {
  (void)flags;
  (void)ud;
  sluice__sstream *st = stream_of(s, id);
  if (!st) {
    nghttp2_session_consume(s, id, len);
    return 0;
  }
  sluice__scall_data(st, data, len);
  return 0;
}

/* After our trailers, a client that has not finished sending gets
 * RST_STREAM(NO_ERROR), as gRPC servers do: the call is over. */
static int on_frame_send(nghttp2_session *s, const nghttp2_frame *frame,
                         void *ud) {
  sluice__sconn *sc = ud;
  if (frame->hd.type != NGHTTP2_HEADERS ||
      !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM) ||
      nghttp2_session_get_stream_remote_close(s, frame->hd.stream_id) != 0)
    return 0;
  nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, frame->hd.stream_id,
                            NGHTTP2_NO_ERROR);
  sluice__conn_want_write(&sc->conn);
  return 0;
}

static int on_stream_close(nghttp2_session *s, int32_t id, uint32_t err,
                           void *ud) {
  sluice__sconn *sc = ud;
  sluice__sstream *st = stream_of(s, id);
  if (!st)
    return 0;
  nghttp2_session_set_stream_user_data(s, id, NULL);
  sluice__list_remove(&st->link);
  sluice__scall_stream_closed(st, err);
  if (sc->draining && sluice__list_empty(&sc->calls))
    sluice__conn_close_when_flushed(&sc->conn);
  return 0;
}

static nghttp2_session_callbacks *g_callbacks;
static uv_once_t g_once = UV_ONCE_INIT;

static void init_callbacks(void) {
  nghttp2_session_callbacks *cbs;
  if (nghttp2_session_callbacks_new(&cbs) != 0)
    return;
  nghttp2_session_callbacks_set_on_begin_headers_callback(cbs,
                                                          on_begin_headers);
  nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data);
  nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
  nghttp2_session_callbacks_set_on_frame_send_callback(cbs, on_frame_send);
  g_callbacks = cbs;
}

static void on_closed(sluice__conn *conn, const char *reason) {
  (void)reason;
  sluice__sconn *sc = SLUICE__CONTAINER_OF(conn, sluice__sconn, conn);
  /* nghttp2_session_del does not report stream closes: end each call. */
  for (sluice__list *n; (n = sluice__list_head(&sc->calls));) {
    sluice__list_remove(n);
    sluice__scall_stream_closed(SLUICE__CONTAINER_OF(n, sluice__sstream, link),
                                NGHTTP2_CANCEL);
  }
  if (conn->session)
    nghttp2_session_del(conn->session);
  sluice__list_remove(&sc->link);
  sluice__sconn_shared *sh = sc->cl->shared;
  free(sc->peer_identity);
  free(sc);
  uv_mutex_lock(&sh->mu);
  sh->live--;
  uv_cond_broadcast(&sh->cv);
  uv_mutex_unlock(&sh->mu);
}

/* TLS established: remember who the client proved to be (mutual TLS). */
static void on_established(sluice__conn *conn) {
  sluice__sconn *sc = SLUICE__CONTAINER_OF(conn, sluice__sconn, conn);
  sc->peer_identity = sluice__tls_peer_subject(conn->tls);
}

static const sluice__conn_hooks hooks = {on_closed, NULL, on_established};

int sluice__sconn_accept(sluice__sconn_loop *cl, uv_os_sock_t fd, int is_pipe) {
  sluice__sconn_shared *sh = cl->shared;
  uv_once(&g_once, init_callbacks);
  if (!g_callbacks)
    return SLUICE_ERR_NOMEM;
  sluice__sconn *sc = calloc(1, sizeof *sc);
  if (!sc)
    return SLUICE_ERR_NOMEM;
  sc->cl = cl;
  if (sluice__conn_init(&sc->conn, sluice__sconn_loop_loop(cl), is_pipe,
                        &hooks) != 0) {
    free(sc);
    return SLUICE_ERR_NOMEM;
  }
  sluice__list_init(&sc->calls);
  sluice__list_push(&cl->conns, &sc->link);
  uv_mutex_lock(&sh->mu);
  sh->live++;
  uv_mutex_unlock(&sh->mu);
  nghttp2_session *s;
  if (sluice__conn_open_fd(&sc->conn, fd) != 0 ||
      sluice__h2session_new(&s, SLUICE__H2_SERVER, g_callbacks, sc) != 0) {
    /* on_closed frees sc; the descriptor is closed with the handle if it
     * was adopted, by the caller otherwise */
    sluice__conn_close(&sc->conn, "cannot set up connection");
    return 0;
  }
  sc->conn.session = s;
  if (sh->opts->tls) {
    sluice__tls *t = sluice__tls_new(sh->opts->tls, 0, NULL);
    if (!t) {
      sluice__conn_close(&sc->conn, "out of memory");
      return 0;
    }
    sluice__conn_set_tls(&sc->conn, t);
  }
  sluice__h2session_settings(s, SLUICE__H2_SERVER,
                             sh->opts->max_concurrent_streams);
  sluice__conn_start(&sc->conn);
  return 0;
}

static void goaway(sluice__sconn *sc) {
  if (sc->draining || !sc->conn.session)
    return;
  sc->draining = 1;
  /* Streams up to the last one we saw go on; the client retries the rest
   * elsewhere. nghttp2 ends the session once they are done. */
  nghttp2_submit_goaway(
      sc->conn.session, NGHTTP2_FLAG_NONE,
      nghttp2_session_get_last_proc_stream_id(sc->conn.session),
      NGHTTP2_NO_ERROR, (const uint8_t *)"shutdown", 8);
  if (sluice__list_empty(&sc->calls))
    sluice__conn_close_when_flushed(&sc->conn);
  sluice__conn_want_write(&sc->conn);
}

void sluice__sconn_loop_goaway(sluice__sconn_loop *cl) {
  SLUICE__LIST_FOREACH_SAFE(n, &cl->conns) {
    goaway(SLUICE__CONTAINER_OF(n, sluice__sconn, link));
  }
}

void sluice__sconn_loop_close(sluice__sconn_loop *cl, const char *reason) {
  SLUICE__LIST_FOREACH_SAFE(n, &cl->conns) {
    sluice__sconn *sc = SLUICE__CONTAINER_OF(n, sluice__sconn, link);
    if (sc->conn.session)
      sluice__conn_flush(&sc->conn);
    sluice__conn_close(&sc->conn, reason);
  }
}

/* ---- the server's and the loops' */

void sluice__sconn_shared_init(sluice__sconn_shared *sh,
                               const sluice_server_opts *opts,
                               sluice__routes *routes) {
  sh->opts = opts;
  sh->routes = routes;
  sh->live = 0;
  uv_mutex_init(&sh->mu);
  uv_cond_init(&sh->cv);
}

void sluice__sconn_shared_destroy(sluice__sconn_shared *sh) {
  uv_mutex_destroy(&sh->mu);
  uv_cond_destroy(&sh->cv);
}

void sluice__sconn_wait_gone(sluice__sconn_shared *sh, uint64_t end_ns) {
  uv_mutex_lock(&sh->mu);
  while (sh->live > 0) {
    uint64_t now = uv_hrtime();
    if (now >= end_ns)
      break;
    uv_cond_timedwait(&sh->cv, &sh->mu, end_ns - now);
  }
  uv_mutex_unlock(&sh->mu);
}

void sluice__sconn_loop_init(sluice__sconn_loop *cl, sluice__sconn_shared *sh) {
  cl->shared = sh;
  sluice__list_init(&cl->conns);
}
