/* The life of one server call: created with its stream, dispatched to the
 * handler when the request is complete, finished exactly once by the
 * handler (from any thread) or answered by the library (bad request,
 * deadline), and freed when both the stream and the handler let go. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server_internal.h"
#include "transport/headers.h"
#include "wire/percent.h"

static void on_finish_task(sluice__task *t);

sluice_server_call *sluice__scall_new(sluice__sconn *sc, int32_t stream_id) {
  sluice_server_call *call = calloc(1, sizeof *call);
  if (!call)
    return NULL;
  if (sluice_metadata_new(&call->md) != 0) {
    free(call);
    return NULL;
  }
  call->sc = sc;
  call->sl = sc->sl;
  call->srv = sc->sl->srv;
  call->stream_id = stream_id;
  call->refs = 1; /* the stream's */
  call->finish_task.fn = on_finish_task;
  snprintf(call->peer, sizeof call->peer, "%s", sc->conn.peer);
  call->next = sc->calls;
  if (sc->calls)
    sc->calls->prev = call;
  sc->calls = call;
  sc->active_calls++;
  return call;
}

static void scall_free(sluice_server_call *call) {
  free(call->path);
  free(call->message);
  free(call->resp);
  sluice_metadata_del(call->md);
  sluice_metadata_del(call->initial_md);
  sluice_metadata_del(call->trailing_md);
  sluice__deframer_reset(&call->deframer);
  if (call->req)
    protobuf_c_message_free_unpacked(call->req, NULL);
  free(call);
}

void sluice__scall_unref(sluice_server_call *call) {
  if (--call->refs == 0)
    scall_free(call);
}

static void on_timer_closed(uv_handle_t *h) { sluice__scall_unref(h->data); }

static void close_timer(sluice_server_call *call) {
  if (call->timer_open) {
    call->timer_open = 0;
    uv_close((uv_handle_t *)&call->timer, on_timer_closed);
  }
}

/* ---- responses */

static ssize_t read_response(nghttp2_session *s, int32_t id, uint8_t *buf,
                             size_t len, uint32_t *flags,
                             nghttp2_data_source *src, void *ud) {
  (void)ud;
  sluice_server_call *call = src->ptr;
  size_t n =
      sluice__copy_next(call->resp, call->resp_len, &call->resp_sent, buf, len);
  if (call->resp_sent == call->resp_len) {
    *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
    sluice__nvs t;
    sluice__nvs_init(&t);
    sluice__nvs_add(&t, "grpc-status", 11, "0", 1);
    sluice__nvs_add_md(&t, call->trailing_md);
    int rv =
        sluice__nvs_failed(&t) ? -1 : nghttp2_submit_trailer(s, id, t.nv, t.n);
    sluice__nvs_free(&t);
    if (rv != 0)
      return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  }
  return (ssize_t)n;
}

/* Submits the response held in call (code, message, resp) on the stream. */
static void submit(sluice_server_call *call, int http_status) {
  sluice__sconn *sc = call->sc;
  call->responded = 1;
  __atomic_store_n(&call->cancelled, 1, __ATOMIC_RELAXED);
  close_timer(call);
  sluice__nvs h;
  sluice__nvs_init(&h);
  char st[16], code[16];
  snprintf(st, sizeof st, "%d", http_status);
  sluice__nvs_add_str(&h, ":status", st);
  sluice__nvs_add(&h, "content-type", 12, "application/grpc", 16);
  sluice__nvs_add_md(&h, call->initial_md);
  int rv;
  char *msg = NULL;
  if (call->code == SLUICE_STATUS_OK && call->resp) {
    nghttp2_data_provider dp;
    dp.source.ptr = call;
    dp.read_callback = read_response;
    rv = sluice__nvs_failed(&h)
             ? -1
             : nghttp2_submit_response(sc->conn.session, call->stream_id, h.nv,
                                       h.n, &dp);
  } else {
    /* Trailers-Only: one HEADERS frame with END_STREAM. */
    snprintf(code, sizeof code, "%d", (int)call->code);
    sluice__nvs_add_str(&h, "grpc-status", code);
    if (call->message && *call->message) {
      size_t ml = strlen(call->message);
      msg = malloc(ml * 3 + 1);
      if (msg) {
        size_t el = sluice__percent_encode(call->message, ml, msg);
        sluice__nvs_add(&h, "grpc-message", 12, msg, el);
      }
    }
    sluice__nvs_add_md(&h, call->trailing_md);
    rv = sluice__nvs_failed(&h)
             ? -1
             : nghttp2_submit_response(sc->conn.session, call->stream_id, h.nv,
                                       h.n, NULL);
  }
  sluice__nvs_free(&h);
  free(msg);
  if (rv != 0)
    nghttp2_submit_rst_stream(sc->conn.session, NGHTTP2_FLAG_NONE,
                              call->stream_id, NGHTTP2_INTERNAL_ERROR);
  sluice__conn_want_write(&sc->conn);
}

void sluice__scall_fail(sluice_server_call *call, sluice_status_code code,
                        const char *message) {
  if (call->responded || !call->sc)
    return;
  int http = call->bad_content_type ? 415 : 200;
  call->code = code;
  free(call->message);
  call->message = strdup(message ? message : "");
  free(call->resp);
  call->resp = NULL;
  submit(call, http);
}

/* ---- deadline and dispatch */

static void on_deadline(uv_timer_t *t) {
  sluice_server_call *call = t->data;
  if (call->responded || !call->sc)
    return;
  /* The request is complete (the handler is running), so the stream can end
   * with a status rather than a bare RST_STREAM; the handler's reply is
   * dropped. */
  sluice__scall_fail(call, SLUICE_STATUS_DEADLINE_EXCEEDED,
                     "deadline exceeded while the server handled the call");
}

void sluice__scall_request_done(sluice_server_call *call) {
  if (call->responded || !call->route)
    return;
  if (call->fail_code != SLUICE_STATUS_OK) {
    sluice__scall_fail(call, call->fail_code, call->fail_reason);
    return;
  }
  if (sluice__deframer_partial(&call->deframer)) {
    sluice__scall_fail(call, SLUICE_STATUS_INTERNAL,
                       "request ended in the middle of a message");
    return;
  }
  if (call->n_msgs != 1) {
    sluice__scall_fail(call, SLUICE_STATUS_UNIMPLEMENTED,
                       "expected exactly one request message for a unary "
                       "method, got none");
    return;
  }
  if (call->deadline_ns) {
    uint64_t now = sluice_now_ns();
    if (now >= call->deadline_ns) {
      sluice__scall_fail(call, SLUICE_STATUS_DEADLINE_EXCEEDED,
                         "deadline exceeded before the handler ran");
      return;
    }
    uv_timer_init(sluice__loop_uv(call->sl->loop), &call->timer);
    call->timer.data = call;
    call->timer_open = 1;
    call->refs++;
    uv_timer_start(&call->timer, on_deadline,
                   (call->deadline_ns - now + 999999) / 1000000, 0);
  }
  call->handler_owes = 1;
  call->refs++; /* the handler's, released by finish */
  call->route->dispatch(call, call->req, call->route->handlers,
                        call->route->user_data);
}

void sluice__scall_stream_closed(sluice_server_call *call) {
  sluice__sconn *sc = call->sc;
  if (sc) {
    if (call->prev)
      call->prev->next = call->next;
    else
      sc->calls = call->next;
    if (call->next)
      call->next->prev = call->prev;
    call->prev = call->next = NULL;
  }
  call->sc = NULL;
  __atomic_store_n(&call->cancelled, 1, __ATOMIC_RELAXED);
  close_timer(call);
  sluice__scall_unref(call);
}

/* ---- finishing, from any thread */

static void on_finish_task(sluice__task *t) {
  sluice_server_call *call = (sluice_server_call *)t;
  call->handler_owes = 0;
  if (call->sc && !call->responded)
    submit(call, 200);
  sluice__scall_unref(call);
}

int sluice_server_call_finish(sluice_server_call *call, sluice_status_code code,
                              const char *message,
                              const ProtobufCMessage *resp) {
  if (!call)
    return SLUICE_ERR_INVALID_ARG;
  const sluice_method_desc *m = call->route->method;
  if (code == SLUICE_STATUS_OK && (!resp || resp->descriptor != m->response))
    return SLUICE_ERR_INVALID_ARG;
  if ((unsigned)code > SLUICE_STATUS_UNAUTHENTICATED)
    code = SLUICE_STATUS_UNKNOWN;
  call->code = code;
  char buf[160];
  if (code == SLUICE_STATUS_OK &&
      !__atomic_load_n(&call->cancelled, __ATOMIC_RELAXED)) {
    /* Serialize on the caller's thread: keeps the work off the loop. */
    size_t len = protobuf_c_message_get_packed_size(resp);
    uint32_t max = call->srv->opts.max_response_size;
    if (m->max_response_size && m->max_response_size < max)
      max = m->max_response_size;
    if (len > max) {
      snprintf(buf, sizeof buf,
               "response message larger than max (%zu vs. %" PRIu32 ")", len,
               max);
      call->code = SLUICE_STATUS_RESOURCE_EXHAUSTED;
      message = buf;
    } else if ((call->resp = malloc(len + 5)) != NULL) {
      sluice__frame_header(call->resp, 0, (uint32_t)len);
      protobuf_c_message_pack(resp, call->resp + 5);
      call->resp_len = len + 5;
    } else {
      call->code = SLUICE_STATUS_RESOURCE_EXHAUSTED;
      message = "out of memory for the response";
    }
  }
  if (call->code != SLUICE_STATUS_OK)
    call->message = strdup(message ? message : "");
  sluice_server *srv = call->srv;
  uv_mutex_lock(&srv->mu);
  if (srv->stopped) {
    /* The loops are gone and the stream with them: nothing to send. */
    uv_mutex_unlock(&srv->mu);
    scall_free(call);
    return 0;
  }
  sluice__loop_post(call->sl->loop, &call->finish_task);
  uv_mutex_unlock(&srv->mu);
  return 0;
}

int sluice_server_call_reply(sluice_server_call *call,
                             const ProtobufCMessage *resp) {
  return sluice_server_call_finish(call, SLUICE_STATUS_OK, NULL, resp);
}

static int add_md(sluice_metadata **md, const char *key, const void *value,
                  size_t len) {
  if (!*md && sluice_metadata_new(md) != 0)
    return SLUICE_ERR_NOMEM;
  return sluice_metadata_add(*md, key, value, len);
}

int sluice_server_call_add_initial_metadata(sluice_server_call *call,
                                            const char *key, const void *value,
                                            size_t len) {
  if (!call)
    return SLUICE_ERR_INVALID_ARG;
  return add_md(&call->initial_md, key, value, len);
}

int sluice_server_call_add_trailing_metadata(sluice_server_call *call,
                                             const char *key, const void *value,
                                             size_t len) {
  if (!call)
    return SLUICE_ERR_INVALID_ARG;
  return add_md(&call->trailing_md, key, value, len);
}

const sluice_metadata *
sluice_server_call_metadata(const sluice_server_call *call) {
  return call ? call->md : NULL;
}

uint64_t sluice_server_call_deadline(const sluice_server_call *call) {
  return call ? call->deadline_ns : 0;
}

const char *sluice_server_call_peer(const sluice_server_call *call) {
  return call ? call->peer : NULL;
}

const sluice_method_desc *
sluice_server_call_method(const sluice_server_call *call) {
  return call && call->route ? call->route->method : NULL;
}

int sluice_server_call_is_cancelled(const sluice_server_call *call) {
  return call ? __atomic_load_n(&call->cancelled, __ATOMIC_RELAXED) : 1;
}
