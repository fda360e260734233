/* The client side of one HTTP/2 connection: nghttp2 client session
 * callbacks, request submission, and response frames turned into stream
 * facts reported through the stream's ops. */
#include "client/client_h2.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "transport/h2session.h"
#include "transport/headers.h"
#include "transport/tls.h"
#include "wire/compress.h"
#include "wire/timeout.h"

void sluice__cstream_init(sluice__cstream *s, sluice__sendq *sendq,
                          uint32_t max_msg, sluice__deliver_fn deliver,
                          void *owner, const sluice__cstream_ops *ops,
                          const sluice__stream_ops *stream_ops) {
  sluice__grpc_resp_init(&s->rx);
  s->cc = NULL;
  s->discard = 0;
  s->rx_bytes = 0;
  s->ops = ops;
  sluice__list_init(&s->link);
  sluice__stream_init(&s->st, sendq, max_msg, deliver, owner, stream_ops);
}

void sluice__cstream_clear(sluice__cstream *s) {
  sluice__grpc_resp_reset(&s->rx);
  sluice__recv_reset(&s->st.recv);
  s->st.recv.unconsumed = 0;
}

/* ---- keepalive (gRFC A8): time since the last frame read, a PING when
 * it passes keepalive_time with calls open (or permit_without_calls), the
 * connection closed when nothing arrives within the timeout. The timer is
 * re-armed lazily: reads only record their time. */

static uint64_t loop_now_ms(sluice__cconn *cc) {
  return uv_now(sluice__loop_uv(cc->conn.loop));
}

static void on_ka_timer(uv_timer_t *t);

static void ka_arm(sluice__cconn *cc, uint64_t ms) {
  if (cc->ka_timer_open)
    uv_timer_start(&cc->ka_timer, on_ka_timer, ms ? ms : 1, 0);
}

static void ka_ping(sluice__cconn *cc);

static void on_ka_timer(uv_timer_t *t) {
  sluice__cconn *cc = t->data;
  if (!cc->conn.session || cc->conn.closing)
    return;
  uint64_t now = loop_now_ms(cc);
  if (cc->ka_pinging) {
    char text[300];
    snprintf(text, sizeof text,
             "keepalive timeout: no bytes for %" PRIu32 " ms after PING (%s)",
             cc->cfg->keepalive_timeout_ms, cc->addr_name);
    cc->ka_timed_out = 1;
    cc->draining = 1; /* no new stream until the socket has closed */
    sluice__cconn_abort(cc, SLUICE_STATUS_UNAVAILABLE, text);
    return;
  }
  uint64_t due = cc->last_read_ms + cc->ka_time_ms;
  if (due > now) {
    ka_arm(cc, due - now);
    return;
  }
  if (cc->active_streams > 0 || cc->cfg->keepalive_permit_without_calls)
    ka_ping(cc);
  else
    ka_arm(cc, cc->ka_time_ms); /* a new stream pings first (A8) */
}

static void ka_ping(sluice__cconn *cc) {
  if (nghttp2_submit_ping(cc->conn.session, NGHTTP2_FLAG_NONE, NULL) != 0) {
    ka_arm(cc, cc->ka_time_ms);
    return;
  }
  cc->ka_pinging = 1;
  cc->ka_pings++;
  sluice__conn_want_write(&cc->conn);
  ka_arm(cc, cc->cfg->keepalive_timeout_ms);
}

/* A frame arrived: any byte disarms the timeout. */
static int on_begin_frame(nghttp2_session *session, const nghttp2_frame_hd *hd,
                          void *ud) {
  (void)session;
  (void)hd;
  sluice__cconn *cc = ud;
  if (!cc->ka_time_ms)
    return 0;
  cc->last_read_ms = loop_now_ms(cc);
  if (cc->ka_pinging) {
    cc->ka_pinging = 0;
    ka_arm(cc, cc->ka_time_ms);
  }
  return 0;
}

static sluice__cstream *stream_of(nghttp2_session *s, int32_t stream_id) {
  return nghttp2_session_get_stream_user_data(s, stream_id);
}

/* Parses one response header into the stream's facts. */
static int on_header(nghttp2_session *session, const nghttp2_frame *frame,
                     const uint8_t *name, size_t nlen, const uint8_t *value,
                     size_t vlen, uint8_t flags, void *ud) {
  (void)flags;
  (void)ud;
  if (frame->hd.type != NGHTTP2_HEADERS)
    return 0;
  sluice__cstream *s = stream_of(session, frame->hd.stream_id);
  if (!s || s->discard)
    return 0;
  sluice__cconn *cc = ud;
  s->hdr_bytes += sluice__h2_field_size(nlen, vlen);
  if (s->hdr_bytes > cc->cfg->max_header_list_size) {
    snprintf(s->fail_buf, sizeof s->fail_buf,
             "response header list too large: over %" PRIu32
             " bytes (SETTINGS_MAX_HEADER_LIST_SIZE)",
             cc->cfg->max_header_list_size);
    s->ops->on_data_failed(s, SLUICE_STATUS_RESOURCE_EXHAUSTED, s->fail_buf);
    return 0;
  }
  if (sluice__grpc_resp_header(&s->rx, (const char *)name, nlen, value, vlen) !=
      0)
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  return 0;
}

static int on_data(nghttp2_session *session, uint8_t flags, int32_t stream_id,
                   const uint8_t *data, size_t len, void *ud) {
  (void)flags;
  (void)ud;
  sluice__cstream *s = stream_of(session, stream_id);
  if (!s || s->discard) {
    nghttp2_session_consume(session, stream_id, len);
    return 0;
  }
  s->rx_bytes += len;
  const char *reason;
  sluice_status_code code = sluice__stream_data_in(
      &s->st, data, len, s->fail_buf, sizeof s->fail_buf, &reason);
  if (code != SLUICE_STATUS_OK && !s->discard)
    s->ops->on_data_failed(s, code, reason);
  return 0;
}

/* The server ended the stream (trailers) while we may still be sending:
 * the call is over, as in gRPC; stop sending and close our side with
 * RST_STREAM(NO_ERROR) so that the stream closes and the status is
 * reported now. */
static void server_ended(nghttp2_session *session, int32_t stream_id) {
  sluice__cstream *s = stream_of(session, stream_id);
  if (!s || nghttp2_session_get_stream_local_close(session, stream_id) != 0)
    return;
  if (s->st.sendq)
    sluice__sendq_abort(s->st.sendq);
  sluice__stream_reset(&s->st, NGHTTP2_NO_ERROR);
}

static int on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame,
                         void *ud) {
  sluice__cconn *cc = ud;
  int end = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
  if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
      end)
    server_ended(session, frame->hd.stream_id);
  switch (frame->hd.type) {
  case NGHTTP2_HEADERS: {
    sluice__cstream *s = stream_of(session, frame->hd.stream_id);
    if (!s || s->discard)
      break;
    s->hdr_bytes = 0; /* the next block counts anew */
    sluice__grpc_block b = sluice__grpc_resp_block_done(
        &s->rx, end, frame->headers.cat == NGHTTP2_HCAT_RESPONSE);
    if (b.kind == SLUICE__GRPC_BLOCK_TRAILERS) {
      if (b.load_report && cc->hooks->on_trailers)
        cc->hooks->on_trailers(cc, cc->ud, b.md);
      s->ops->on_headers(s, 1, b.md);
    } else if (b.kind == SLUICE__GRPC_BLOCK_INITIAL) {
      s->ops->on_headers(s, 0, b.md);
    }
    break;
  }
  case NGHTTP2_GOAWAY:
    if (frame->goaway.error_code == NGHTTP2_ENHANCE_YOUR_CALM &&
        frame->goaway.opaque_data_len == 14 &&
        memcmp(frame->goaway.opaque_data, "too_many_pings", 14) == 0 &&
        cc->hooks->on_too_many_pings)
      cc->hooks->on_too_many_pings(cc, cc->ud);
    /* No new streams here; calls above last-stream-id are refused and
     * replayed on a new connection by their owner. */
    cc->draining = 1;
    cc->hooks->on_goaway(cc, cc->ud);
    break;
  case NGHTTP2_SETTINGS:
    cc->got_settings = 1;
    /* MAX_CONCURRENT_STREAMS may have grown. */
    cc->hooks->on_capacity(cc, cc->ud);
    break;
  default:
    break;
  }
  return 0;
}

/* Takes s off cc (the stream is over for the connection). */
static void unlink_stream(sluice__cconn *cc, sluice__cstream *s) {
  if (cc->conn.session)
    nghttp2_session_set_stream_user_data(cc->conn.session, s->st.id, NULL);
  sluice__list_remove(&s->link);
  cc->active_streams--;
  s->cc = NULL;
  /* Held or undelivered bytes go back to the connection's window. */
  sluice__stream_detach(&s->st);
}

static int on_stream_close(nghttp2_session *session, int32_t stream_id,
                           uint32_t error_code, void *ud) {
  sluice__cconn *cc = ud;
  sluice__cstream *s = stream_of(session, stream_id);
  if (!s)
    return 0;
  unlink_stream(cc, s);
  s->ops->on_closed(s, error_code, SLUICE_STATUS_OK, NULL);
  if (cc->draining && cc->active_streams == 0)
    sluice__conn_close_when_flushed(&cc->conn);
  cc->hooks->on_capacity(cc, cc->ud);
  return 0;
}

int sluice__cconn_can_take(const sluice__cconn *cc) {
  if (!cc->ready || cc->draining)
    return 0;
  uint32_t max = nghttp2_session_get_remote_settings(
      cc->conn.session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
  return cc->active_streams < max;
}

int sluice__cconn_submit(sluice__cconn *cc, sluice__cstream *s,
                         const sluice__creq *req) {
  const sluice__cconn_cfg *cfg = cc->cfg;
  sluice__nvs h;
  sluice__nvs_init(&h);
  sluice__nvs_add(&h, ":method", 7, "POST", 4);
  if (cfg->tls)
    sluice__nvs_add(&h, ":scheme", 7, "https", 5);
  else
    sluice__nvs_add(&h, ":scheme", 7, "http", 4);
  sluice__nvs_add_str(&h, ":path", req->path);
  sluice__nvs_add_str(&h, ":authority", cfg->authority);
  char tmo[SLUICE__TIMEOUT_MAX];
  if (req->deadline_ns) {
    uint64_t now = sluice_now_ns();
    sluice__timeout_encode(req->deadline_ns > now ? req->deadline_ns - now : 0,
                           tmo);
    sluice__nvs_add_str(&h, "grpc-timeout", tmo);
    sluice__nvs_no_index_last(&h);
  }
  sluice__nvs_add(&h, "te", 2, "trailers", 8);
  sluice__nvs_add(&h, "content-type", 12, "application/grpc", 16);
  sluice__nvs_add_str(&h, "user-agent", cfg->user_agent);
  if (req->compression != SLUICE_COMPRESS_NONE)
    sluice__nvs_add_str(&h, "grpc-encoding",
                        sluice__encoding_name(req->compression));
  sluice__nvs_add_str(&h, "grpc-accept-encoding", SLUICE__ACCEPT_ENCODING);
  char prev[12];
  if (req->prev_attempts) {
    snprintf(prev, sizeof prev, "%u", req->prev_attempts);
    sluice__nvs_add_str(&h, "grpc-previous-rpc-attempts", prev);
  }
  sluice__nvs_add_md(&h, req->md);
  if (sluice__nvs_failed(&h)) {
    sluice__nvs_free(&h);
    return SLUICE_ERR_NOMEM;
  }
  /* The server's limit, before anything is sent (RFC 9113 10.5.1). */
  size_t hl = 0;
  for (size_t i = 0; i < h.n; i++)
    hl += sluice__h2_field_size(h.nv[i].namelen, h.nv[i].valuelen);
  if (hl > sluice__h2_peer_max_header_list(cc->conn.session)) {
    sluice__nvs_free(&h);
    return SLUICE__CCONN_HEADERS_TOO_LARGE;
  }
  nghttp2_data_provider dp = sluice__stream_provider(&s->st);
  int32_t id =
      nghttp2_submit_request(cc->conn.session, NULL, h.nv, h.n, &dp, s);
  sluice__nvs_free(&h);
  if (id < 0)
    return SLUICE_ERR_SYSTEM;
  sluice__stream_attach(&s->st, &cc->conn, id);
  s->cc = cc;
  sluice__list_push(&cc->streams, &s->link);
  cc->active_streams++;
  /* A8: a stream on a connection silent for keepalive_time pings first. */
  if (cc->ka_time_ms && !cc->ka_pinging &&
      loop_now_ms(cc) - cc->last_read_ms >= cc->ka_time_ms)
    ka_ping(cc);
  sluice__conn_want_write(&cc->conn);
  return 0;
}

void sluice__cconn_drain(sluice__cconn *cc) {
  cc->draining = 1;
  if (cc->conn.session)
    nghttp2_session_terminate_session(cc->conn.session, NGHTTP2_NO_ERROR);
  sluice__conn_want_write(&cc->conn);
}

/* Ends every open stream with code/text (the connection is going). */
static void end_streams(sluice__cconn *cc, sluice_status_code code,
                        const char *text) {
  while (!sluice__list_empty(&cc->streams)) {
    sluice__cstream *s = SLUICE__CONTAINER_OF(sluice__list_head(&cc->streams),
                                              sluice__cstream, link);
    unlink_stream(cc, s);
    s->ops->on_closed(s, NGHTTP2_CANCEL, code, text);
  }
}

void sluice__cconn_abort(sluice__cconn *cc, sluice_status_code code,
                         const char *text) {
  end_streams(cc, code, text);
  sluice__conn_close(&cc->conn, text);
}

/* ---- connection lifecycle */

static void on_connected(sluice__conn *conn, int status);
static void on_closed(sluice__conn *conn, const char *reason);
static void on_established(sluice__conn *conn);
static const sluice__conn_hooks hooks = {on_closed, on_connected,
                                         on_established, NULL};

static nghttp2_session_callbacks *g_callbacks;
static uv_once_t g_callbacks_once = UV_ONCE_INIT;

static void init_callbacks(void) {
  nghttp2_session_callbacks *cbs;
  if (nghttp2_session_callbacks_new(&cbs) != 0)
    return;
  nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data);
  nghttp2_session_callbacks_set_send_data_callback(cbs,
                                                   sluice__stream_send_data);
  nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
  nghttp2_session_callbacks_set_on_begin_frame_callback(cbs, on_begin_frame);
  g_callbacks = cbs;
}

/* The TLS name (see sluice__cconn_new) lives until the handshake starts,
 * which is in on_connected: keep a copy. */
typedef struct {
  sluice__cconn cc;
  char tls_name[256];
} cconn_alloc;

int sluice__cconn_new(sluice__cconn **out, sluice__loop *loop,
                      const sluice__addr *addr, const char *tls_name,
                      const sluice__cconn_cfg *cfg,
                      const sluice__cconn_hooks *hooks_up, void *ud) {
  uv_once(&g_callbacks_once, init_callbacks);
  if (!g_callbacks)
    return SLUICE_ERR_NOMEM;
  cconn_alloc *a = sluice__calloc(1, sizeof *a);
  if (!a)
    return SLUICE_ERR_NOMEM;
  sluice__cconn *cc = &a->cc;
  cc->cfg = cfg;
  cc->hooks = hooks_up;
  cc->ud = ud;
  sluice__list_init(&cc->streams);
  snprintf(cc->addr_name, sizeof cc->addr_name, "%s", addr->name);
  snprintf(a->tls_name, sizeof a->tls_name, "%s", tls_name ? tls_name : "");
  cc->ka_time_ms = cfg->keepalive_time_ms;
  int is_pipe = addr->ss.ss_family == AF_UNIX;
  int rv = sluice__conn_init(&cc->conn, loop, is_pipe, &hooks);
  if (rv != 0) {
    free(a);
    return rv;
  }
  if (cc->ka_time_ms) {
    uv_timer_init(sluice__loop_uv(loop), &cc->ka_timer);
    cc->ka_timer.data = cc;
    cc->ka_timer_open = 1;
  }
  *out = cc;
  /* A connect that cannot even start closes the socket: on_closed then
   * reports the failure like any other. */
  if (sluice__conn_connect(&cc->conn, (const struct sockaddr *)&addr->ss,
                           addr->name, cfg->connect_timeout_ms) != 0)
    sluice__conn_close(&cc->conn, "cannot start connecting");
  return 0;
}

/* The connection is ready: keepalive counts from now. */
static void ka_start(sluice__cconn *cc) {
  if (!cc->ka_timer_open)
    return;
  cc->last_read_ms = loop_now_ms(cc);
  ka_arm(cc, cc->ka_time_ms);
}

static void on_ka_timer_closed(uv_handle_t *h) {
  free(SLUICE__CONTAINER_OF(h->data, cconn_alloc, cc));
}

static void on_connected(sluice__conn *conn, int status) {
  sluice__cconn *cc = SLUICE__CONTAINER_OF(conn, sluice__cconn, conn);
  if (status != 0) {
    sluice__conn_close(conn, status == UV_ETIMEDOUT ? "connect timed out"
                                                    : uv_strerror(status));
    return;
  }
  nghttp2_session *s;
  if (sluice__h2session_new(&s, SLUICE__H2_CLIENT, g_callbacks, cc,
                            &conn->h2guard) != 0) {
    sluice__conn_close(conn, "out of memory");
    return;
  }
  sluice__h2session_settings(s, SLUICE__H2_CLIENT, 0,
                             cc->cfg->max_header_list_size);
  conn->session = s;
  if (cc->cfg->tls) {
    cconn_alloc *a = SLUICE__CONTAINER_OF(cc, cconn_alloc, cc);
    sluice__tls *t = sluice__tls_new(cc->cfg->tls, 1, a->tls_name);
    if (!t) {
      sluice__conn_close(conn, "out of memory");
      return;
    }
    sluice__conn_set_tls(conn, t);
    sluice__conn_start(conn); /* ready once the handshake completes */
    return;
  }
  cc->ready = 1;
  if (sluice__conn_start(conn) != 0)
    return;
  ka_start(cc);
  cc->hooks->on_ready(cc, cc->ud);
}

static void on_established(sluice__conn *conn) {
  sluice__cconn *cc = SLUICE__CONTAINER_OF(conn, sluice__cconn, conn);
  cc->ready = 1;
  ka_start(cc);
  cc->hooks->on_ready(cc, cc->ud);
}

static void on_closed(sluice__conn *conn, const char *reason) {
  sluice__cconn *cc = SLUICE__CONTAINER_OF(conn, sluice__cconn, conn);
  char msg[400];
  /* A server that never spoke HTTP/2 to a plaintext client most likely
   * expects TLS: say so. */
  int hint = cc->ready && !cc->got_settings && !conn->tls;
  snprintf(msg, sizeof msg, "connection to %s lost: %s%s", cc->addr_name,
           reason ? reason : "closed",
           hint ? " before any HTTP/2 settings (is the server expecting TLS?)"
                : "");
  end_streams(cc, SLUICE_STATUS_UNAVAILABLE, msg);
  if (conn->session)
    sluice__h2session_del(conn->session, &conn->h2guard);
  conn->session = NULL;
  cc->hooks->on_closed(cc, cc->ud, reason ? reason : "closed", cc->ready);
  if (cc->ka_timer_open) /* freed when the timer's handle has closed */
    uv_close((uv_handle_t *)&cc->ka_timer, on_ka_timer_closed);
  else
    free(SLUICE__CONTAINER_OF(cc, cconn_alloc, cc));
}
