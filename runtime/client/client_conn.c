/* The client side of one HTTP/2 connection: nghttp2 client session
 * callbacks, request submission and response parsing for its calls. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"
#include "transport/h2mem.h"
#include "transport/headers.h"
#include "transport/tls.h"
#include "wire/compress.h"
#include "wire/metadata_internal.h"
#include "wire/metadata_rules.h"
#include "wire/percent.h"
#include "wire/status_map.h"
#include "wire/timeout.h"

/* Receive windows: 1 MiB per stream, 16 MiB per connection, so a 4 MiB
 * response does not stall on WINDOW_UPDATE round trips while what one slow
 * call can make us buffer stays bounded. */
#define STREAM_WINDOW SLUICE_STREAM_WINDOW
#define CONN_WINDOW (16 << 20)

static sluice__ccall *call_of(nghttp2_session *s, int32_t stream_id) {
  return nghttp2_session_get_stream_user_data(s, stream_id);
}

static int on_header(nghttp2_session *s, const nghttp2_frame *frame,
                     const uint8_t *name, size_t nlen, const uint8_t *value,
                     size_t vlen, uint8_t flags, void *ud) {
  (void)flags;
  (void)ud;
  if (frame->hd.type != NGHTTP2_HEADERS)
    return 0;
  sluice__ccall *c = call_of(s, frame->hd.stream_id);
  if (!c)
    return 0;
  const char *n = (const char *)name;
  if (nlen == 7 && memcmp(n, ":status", 7) == 0) {
    c->http_status = 0;
    for (size_t i = 0; i < vlen && value[i] >= '0' && value[i] <= '9'; i++)
      c->http_status = c->http_status * 10 + (value[i] - '0');
  } else if (nlen == 12 && memcmp(n, "content-type", 12) == 0) {
    c->bad_content_type =
        !(vlen >= 16 && memcmp(value, "application/grpc", 16) == 0 &&
          (vlen == 16 || value[16] == '+' || value[16] == ';'));
  } else if (nlen == 11 && memcmp(n, "grpc-status", 11) == 0) {
    sluice_status_code code;
    if (sluice__status_parse((const char *)value, vlen, &code) == 0) {
      c->grpc_status = code;
    } else {
      c->grpc_status = SLUICE_STATUS_UNKNOWN;
    }
    c->have_grpc_status = 1;
  } else if (nlen == 13 && memcmp(n, "grpc-encoding", 13) == 0) {
    c->enc_ok = sluice__encoding_parse((const char *)value, vlen, &c->enc) == 0;
  } else if (nlen == 12 && memcmp(n, "grpc-message", 12) == 0) {
    free(c->grpc_message);
    c->grpc_message = malloc(vlen + 1);
    if (c->grpc_message) {
      size_t l =
          sluice__percent_decode((const char *)value, vlen, c->grpc_message);
      c->grpc_message[l] = 0;
    }
  } else if (!sluice__md_is_reserved(n, nlen)) {
    if (!c->hdr_md && sluice_metadata_new(&c->hdr_md) != 0)
      return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    sluice__metadata_add_received(c->hdr_md, n, nlen, value, vlen);
  }
  return 0;
}

static int on_data(nghttp2_session *s, uint8_t flags, int32_t stream_id,
                   const uint8_t *data, size_t len, void *ud) {
  (void)flags;
  sluice__cconn *cc = ud;
  sluice__ccall *c = call_of(s, stream_id);
  if (!c || c->state == SLUICE__CALL_DONE) {
    nghttp2_session_consume(s, stream_id, len);
    return 0;
  }
  const char *reason = "";
  size_t consume = 0;
  c->resp_bytes += len;
  sluice_status_code code =
      sluice__recv_feed(&c->recv, data, len, &consume, &reason);
  if (consume) {
    nghttp2_session_consume(s, stream_id, consume);
    sluice__conn_want_write(&cc->conn);
  }
  if (code == SLUICE_STATUS_OK || c->state == SLUICE__CALL_DONE)
    return 0;
  if (c->fail_code == SLUICE_STATUS_OK) { /* the deframer's own failure */
    c->fail_code = code;
    if (code == SLUICE_STATUS_RESOURCE_EXHAUSTED &&
        sluice__deframer_last_len(&c->recv.deframer)) {
      snprintf(c->fail_buf, sizeof c->fail_buf,
               "received message larger than max (%u vs. %u)",
               sluice__deframer_last_len(&c->recv.deframer),
               c->max_response_size);
      c->fail_reason = c->fail_buf;
    } else {
      c->fail_reason = reason;
    }
  }
  /* Fail now and reset the stream: no point receiving the rest. */
  sluice__ccall_complete(c, c->fail_code, c->fail_reason);
  return 0;
}

/* The server ended the stream (trailers) while we may still be sending:
 * the call is over, as in gRPC; stop sending and close our side with
 * RST_STREAM(NO_ERROR) so that the stream closes and the status is
 * reported now. */
static void server_ended(nghttp2_session *s, sluice__cconn *cc,
                         int32_t stream_id) {
  sluice__ccall *c = call_of(s, stream_id);
  if (!c || nghttp2_session_get_stream_local_close(s, stream_id) != 0)
    return;
  sluice__sendq_abort(&c->sendq);
  nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, stream_id, NGHTTP2_NO_ERROR);
  sluice__conn_want_write(&cc->conn);
}

static int on_frame_recv(nghttp2_session *s, const nghttp2_frame *frame,
                         void *ud) {
  sluice__cconn *cc = ud;
  if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
      (frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
    server_ended(s, cc, frame->hd.stream_id);
  switch (frame->hd.type) {
  case NGHTTP2_HEADERS: {
    sluice__ccall *c = call_of(s, frame->hd.stream_id);
    if (!c)
      break;
    c->got_headers = 1;
    /* A block that ends the stream holds trailers (or is Trailers-Only). */
    if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) {
      sluice_metadata_del(c->trailing_md);
      c->trailing_md = c->hdr_md;
      if (c->trailing_md)
        sluice__channel_peer_load(cc->dest, c->trailing_md);
    } else if (frame->headers.cat == NGHTTP2_HCAT_RESPONSE) {
      sluice_metadata_del(c->initial_md);
      c->initial_md = c->hdr_md;
    } else {
      sluice_metadata_del(c->hdr_md);
    }
    c->hdr_md = NULL;
    if (!(frame->hd.flags & NGHTTP2_FLAG_END_STREAM) &&
        frame->headers.cat == NGHTTP2_HCAT_RESPONSE &&
        c->state == SLUICE__CALL_ACTIVE && !c->tramp &&
        c->h.on_initial_metadata)
      c->h.on_initial_metadata(c, c->initial_md, c->user_data);
    if ((frame->hd.flags & NGHTTP2_FLAG_END_STREAM) &&
        sluice__deframer_partial(&c->recv.deframer) &&
        c->fail_code == SLUICE_STATUS_OK) {
      c->fail_code = SLUICE_STATUS_INTERNAL;
      c->fail_reason = "stream ended in the middle of a message";
    }
    break;
  }
  case NGHTTP2_GOAWAY:
    /* No new streams here; calls above last-stream-id are refused and
     * retried on a new connection (see sluice__ccall_stream_closed). */
    cc->draining = 1;
    if (cc->dest->conn == cc) {
      cc->dest->conn = NULL;
      if (cc->dest->state == SLUICE__DEST_READY)
        cc->dest->state = SLUICE__DEST_IDLE;
    }
    sluice__channel_dispatch(cc->dest->ch);
    break;
  case NGHTTP2_SETTINGS:
    cc->got_settings = 1;
    /* MAX_CONCURRENT_STREAMS may have grown. */
    sluice__channel_dispatch(cc->dest->ch);
    break;
  default:
    break;
  }
  return 0;
}

static int on_stream_close(nghttp2_session *s, int32_t stream_id,
                           uint32_t error_code, void *ud) {
  sluice__cconn *cc = ud;
  sluice__ccall *c = call_of(s, stream_id);
  if (!c)
    return 0;
  nghttp2_session_set_stream_user_data(s, stream_id, NULL);
  /* Held or undelivered bytes go back to the connection's window. */
  size_t left = sluice__recv_take_unconsumed(&c->recv);
  if (left)
    nghttp2_session_consume_connection(s, left);
  sluice__link_remove(&c->link);
  cc->active_streams--;
  c->conn = NULL;
  cc->dest->in_flight--;
  sluice__ccall_stream_closed(c, error_code);
  if (cc->draining && cc->active_streams == 0)
    sluice__conn_close_when_flushed(&cc->conn);
  sluice__channel_dispatch(cc->dest->ch);
  return 0;
}

static ssize_t read_request(nghttp2_session *s, int32_t stream_id, uint8_t *buf,
                            size_t len, uint32_t *flags,
                            nghttp2_data_source *src, void *ud) {
  (void)s;
  (void)stream_id;
  (void)ud;
  return sluice__ccall_read(src->ptr, buf, len, flags);
}

int sluice__cconn_can_take(const sluice__cconn *c) {
  if (!c->ready || c->draining)
    return 0;
  uint32_t max = nghttp2_session_get_remote_settings(
      c->conn.session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
  return c->active_streams < max;
}

int sluice__cconn_submit(sluice__cconn *cc, sluice__ccall *c) {
  sluice_channel *ch = cc->dest->ch;
  sluice__nvs h;
  sluice__nvs_init(&h);
  sluice__nvs_add(&h, ":method", 7, "POST", 4);
  if (ch->opts.tls)
    sluice__nvs_add(&h, ":scheme", 7, "https", 5);
  else
    sluice__nvs_add(&h, ":scheme", 7, "http", 4);
  sluice__nvs_add_str(&h, ":path", c->method->path);
  sluice__nvs_add_str(&h, ":authority", ch->authority);
  char tmo[SLUICE__TIMEOUT_MAX];
  if (c->deadline_ns) {
    uint64_t now = sluice_now_ns();
    sluice__timeout_encode(c->deadline_ns > now ? c->deadline_ns - now : 0,
                           tmo);
    sluice__nvs_add_str(&h, "grpc-timeout", tmo);
  }
  sluice__nvs_add(&h, "te", 2, "trailers", 8);
  sluice__nvs_add(&h, "content-type", 12, "application/grpc", 16);
  sluice__nvs_add_str(&h, "user-agent", ch->user_agent);
  if (c->compression != SLUICE_COMPRESS_NONE)
    sluice__nvs_add_str(&h, "grpc-encoding",
                        sluice__encoding_name(c->compression));
  sluice__nvs_add_str(&h, "grpc-accept-encoding", SLUICE__ACCEPT_ENCODING);
  sluice__nvs_add_md(&h, c->send_md);
  if (sluice__nvs_failed(&h)) {
    sluice__nvs_free(&h);
    return SLUICE_ERR_NOMEM;
  }
  nghttp2_data_provider dp;
  dp.source.ptr = c;
  dp.read_callback = read_request;
  int32_t id =
      nghttp2_submit_request(cc->conn.session, NULL, h.nv, h.n, &dp, c);
  sluice__nvs_free(&h);
  if (id < 0)
    return SLUICE_ERR_SYSTEM;
  c->stream_id = id;
  c->conn = cc;
  c->state = SLUICE__CALL_ACTIVE;
  c->refs++; /* the stream's */
  sluice__link_push(&cc->calls, &c->link);
  cc->active_streams++;
  cc->dest->in_flight++;
  sluice__conn_want_write(&cc->conn);
  return 0;
}

void sluice__cconn_cancel_stream(sluice__cconn *cc, sluice__ccall *c,
                                 uint32_t h2_error) {
  nghttp2_submit_rst_stream(cc->conn.session, NGHTTP2_FLAG_NONE, c->stream_id,
                            h2_error);
  sluice__conn_want_write(&cc->conn);
}

/* ---- connection lifecycle */

static void on_connected(sluice__conn *conn, int status);
static void on_closed(sluice__conn *conn, const char *reason);
static void on_established(sluice__conn *conn);
static const sluice__conn_hooks hooks = {on_closed, on_connected,
                                         on_established};

static nghttp2_session_callbacks *g_callbacks;
static nghttp2_option *g_options;
static uv_once_t g_callbacks_once = UV_ONCE_INIT;

static void init_callbacks(void) {
  /* Window updates follow delivery (transport/recv.h): bounded memory for
   * a paused or slow receiver. */
  if (nghttp2_option_new(&g_options) != 0)
    return;
  nghttp2_option_set_no_auto_window_update(g_options, 1);
  nghttp2_session_callbacks *cbs;
  if (nghttp2_session_callbacks_new(&cbs) != 0)
    return;
  nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data);
  nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
  g_callbacks = cbs;
}

int sluice__cconn_new(sluice__cconn **out, sluice__dest *d) {
  uv_once(&g_callbacks_once, init_callbacks);
  if (!g_callbacks)
    return SLUICE_ERR_NOMEM;
  sluice__cconn *cc = calloc(1, sizeof *cc);
  if (!cc)
    return SLUICE_ERR_NOMEM;
  cc->dest = d;
  sluice__link_init(&cc->calls);
  int is_pipe = d->addr.ss.ss_family == AF_UNIX;
  int rv = sluice__conn_init(&cc->conn, d->ch->loop, is_pipe, &hooks);
  if (rv != 0) {
    free(cc);
    return rv;
  }
  d->n_conns++;
  *out = cc;
  /* A connect that cannot even start closes the socket: on_closed then
   * reports the failure like any other. */
  if (sluice__conn_connect(&cc->conn, (const struct sockaddr *)&d->addr.ss,
                           d->addr.name, d->ch->opts.connect_timeout_ms) != 0)
    sluice__conn_close(&cc->conn, "cannot start connecting");
  return 0;
}

/* The name the server's certificate must carry (and the SNI): the override,
 * else the target's host name, else the destination's IP address. */
static const char *tls_name(const sluice__dest *d, char *buf, size_t len) {
  const sluice_channel *ch = d->ch;
  if (ch->opts.tls_name)
    return ch->opts.tls_name;
  if (ch->target.kind == SLUICE__TARGET_DNS && ch->target.host)
    return ch->target.host;
  buf[0] = 0;
  if (d->addr.ss.ss_family == AF_INET)
    uv_ip4_name((const struct sockaddr_in *)&d->addr.ss, buf, len);
  else if (d->addr.ss.ss_family == AF_INET6)
    uv_ip6_name((const struct sockaddr_in6 *)&d->addr.ss, buf, len);
  return buf;
}

static void on_connected(sluice__conn *conn, int status) {
  sluice__cconn *cc = (sluice__cconn *)conn;
  if (status != 0) {
    sluice__conn_close(conn, status == UV_ETIMEDOUT ? "connect timed out"
                                                    : uv_strerror(status));
    return;
  }
  nghttp2_session *s;
  if (nghttp2_session_client_new3(&s, g_callbacks, cc, g_options,
                                  sluice__h2mem()) != 0) {
    sluice__conn_close(conn, "out of memory");
    return;
  }
  nghttp2_settings_entry iv[] = {
      {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, STREAM_WINDOW},
  };
  nghttp2_submit_settings(s, NGHTTP2_FLAG_NONE, iv, sizeof iv / sizeof iv[0]);
  nghttp2_session_set_local_window_size(s, NGHTTP2_FLAG_NONE, 0, CONN_WINDOW);
  conn->session = s;
  sluice_channel *ch = cc->dest->ch;
  if (ch->opts.tls) {
    char name[INET6_ADDRSTRLEN + 1];
    sluice__tls *t =
        sluice__tls_new(ch->opts.tls, 1, tls_name(cc->dest, name, sizeof name));
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
  sluice__dest_conn_ready(cc->dest, cc);
}

static void on_established(sluice__conn *conn) {
  sluice__cconn *cc = (sluice__cconn *)conn;
  cc->ready = 1;
  sluice__dest_conn_ready(cc->dest, cc);
}

static void on_closed(sluice__conn *conn, const char *reason) {
  sluice__cconn *cc = (sluice__cconn *)conn;
  sluice__dest *d = cc->dest;
  char msg[400];
  /* A server that never spoke HTTP/2 to a plaintext client most likely
   * expects TLS: say so. */
  int hint = cc->ready && !cc->got_settings && !conn->tls;
  snprintf(msg, sizeof msg, "connection to %s lost: %s%s", d->addr.name,
           reason ? reason : "closed",
           hint ? " before any HTTP/2 settings (is the server expecting TLS?)"
                : "");
  while (!sluice__link_empty(&cc->calls)) {
    sluice__ccall *c = (sluice__ccall *)((char *)cc->calls.next -
                                         offsetof(sluice__ccall, link));
    sluice__link_remove(&c->link);
    cc->active_streams--;
    d->in_flight--;
    c->conn = NULL;
    sluice__ccall_complete(c, SLUICE_STATUS_UNAVAILABLE, msg);
    sluice__ccall_unref(c); /* the stream's reference */
  }
  if (conn->session)
    nghttp2_session_del(conn->session);
  conn->session = NULL;
  int was_ready = cc->ready;
  sluice__dest_conn_failed(d, cc, reason ? reason : "closed", was_ready);
  free(cc);
}
