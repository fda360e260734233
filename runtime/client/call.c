/* The life of one client call: creation on any thread, start on the loop,
 * completion exactly once (response, error, deadline, cancel, channel
 * destroyed), and freeing once its timer and stream have let go. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nghttp2/nghttp2.h>

#include "client/client.h"
#include "wire/status_map.h"

/* What a trampoline receives. Internal tramps (blocking calls) may take
 * ownership of the response and metadata by setting the fields to NULL. */
typedef struct completion {
  sluice_status st;
  ProtobufCMessage *resp;
} completion;

void sluice__link_init(sluice__link *h) { h->prev = h->next = h; }
void sluice__link_push(sluice__link *h, sluice__link *n) {
  n->prev = h->prev;
  n->next = h;
  h->prev->next = n;
  h->prev = n;
}
void sluice__link_remove(sluice__link *n) {
  n->prev->next = n->next;
  n->next->prev = n->prev;
  n->prev = n->next = n;
}
int sluice__link_empty(const sluice__link *h) { return h->next == h; }

void sluice_call_opts_init(sluice_call_opts *o) {
  if (o)
    memset(o, 0, sizeof *o);
}

static void ccall_free(sluice__ccall *c) {
  sluice_channel *ch = c->ch;
  free(c->req);
  free(c->grpc_message);
  sluice_metadata_del(c->send_md);
  sluice_metadata_del(c->hdr_md);
  sluice_metadata_del(c->initial_md);
  sluice_metadata_del(c->trailing_md);
  sluice__deframer_reset(&c->deframer);
  if (c->resp)
    protobuf_c_message_free_unpacked(c->resp, NULL);
  free(c);
  __atomic_sub_fetch(&ch->live_calls, 1, __ATOMIC_RELAXED);
  sluice__channel_maybe_free(ch);
}

void sluice__ccall_unref(sluice__ccall *c) {
  if (--c->refs == 0)
    ccall_free(c);
}

static void on_timer_closed(uv_handle_t *h) { sluice__ccall_unref(h->data); }

void sluice__ccall_complete(sluice__ccall *c, sluice_status_code code,
                            const char *message) {
  if (c->state == SLUICE__CALL_DONE)
    return;
  sluice__call_state prev = c->state;
  c->state = SLUICE__CALL_DONE;
  if (prev == SLUICE__CALL_PENDING)
    sluice__link_remove(&c->link);
  if (prev == SLUICE__CALL_ACTIVE && c->conn)
    sluice__cconn_cancel_stream(c->conn, c, NGHTTP2_CANCEL);
  if (c->timer_open) {
    c->timer_open = 0;
    uv_close((uv_handle_t *)&c->timer, on_timer_closed);
  }

  completion done = {
      {code, (char *)(message ? message : ""), c->initial_md, c->trailing_md},
      code == SLUICE_STATUS_OK ? c->resp : NULL};
  c->tramp(&done.st, done.resp, c->cb, c->user_data);
  c->initial_md = done.st.initial_md;
  c->trailing_md = done.st.trailing_md;
  if (code == SLUICE_STATUS_OK)
    c->resp = done.resp;
  sluice__ccall_unref(c);
}

static void on_deadline(uv_timer_t *t) {
  sluice__ccall *c = t->data;
  char msg[96];
  snprintf(msg, sizeof msg, "deadline exceeded after %" PRIu64 " ms",
           (sluice_now_ns() - c->start_ns) / 1000000);
  sluice__ccall_complete(c, SLUICE_STATUS_DEADLINE_EXCEEDED, msg);
}

/* Resets what a first attempt received, for a transparent retry. */
static void reset_for_retry(sluice__ccall *c) {
  c->req_sent = 0;
  c->http_status = 0;
  c->got_headers = 0;
  c->have_grpc_status = 0;
  c->bad_content_type = 0;
  c->n_msgs = 0;
  free(c->grpc_message);
  c->grpc_message = NULL;
  sluice_metadata_del(c->hdr_md);
  sluice_metadata_del(c->initial_md);
  sluice_metadata_del(c->trailing_md);
  c->hdr_md = c->initial_md = c->trailing_md = NULL;
  sluice__deframer_reset(&c->deframer);
  sluice__deframer_init(&c->deframer, c->max_response_size);
}

void sluice__ccall_stream_closed(sluice__ccall *c, uint32_t h2_error) {
  char msg[200];
  if (c->state == SLUICE__CALL_DONE) {
    sluice__ccall_unref(c);
    return;
  }
  sluice_status_code code;
  const char *text = msg;
  if (c->fail_code != SLUICE_STATUS_OK) {
    code = c->fail_code;
    text = c->fail_reason;
  } else if (c->have_grpc_status) {
    code = c->grpc_status;
    text = c->grpc_message ? c->grpc_message : "";
    if (code == SLUICE_STATUS_OK && c->n_msgs != 1) {
      code = SLUICE_STATUS_UNIMPLEMENTED;
      snprintf(msg, sizeof msg,
               "server answered a unary call with %d response messages",
               c->n_msgs);
      text = msg;
    }
  } else if (c->got_headers && c->http_status != 200) {
    code = sluice__status_from_http(c->http_status);
    snprintf(msg, sizeof msg,
             "peer answered HTTP status %d without grpc-status (not a gRPC "
             "server?)",
             c->http_status);
  } else if (c->bad_content_type) {
    code = SLUICE_STATUS_UNKNOWN;
    snprintf(msg, sizeof msg,
             "peer answered with a content-type that is not application/grpc");
  } else if (h2_error == NGHTTP2_REFUSED_STREAM && !c->got_headers) {
    /* Never processed by the server (GOAWAY or REFUSED_STREAM): retry
     * transparently, as gRPC does. */
    reset_for_retry(c);
    c->state = SLUICE__CALL_PENDING;
    sluice__link_push(&c->ch->pending, &c->link);
    sluice__ccall_unref(c);
    sluice__channel_dispatch(c->ch);
    return;
  } else if (h2_error == NGHTTP2_CANCEL && c->deadline_ns &&
             sluice_now_ns() + 5000000 >= c->deadline_ns) {
    /* The server's timer beat ours: report it as the deadline it is. */
    code = SLUICE_STATUS_DEADLINE_EXCEEDED;
    snprintf(msg, sizeof msg, "deadline exceeded (cancelled by the server)");
  } else if (h2_error != NGHTTP2_NO_ERROR) {
    code = sluice__status_from_h2_error(h2_error);
    snprintf(msg, sizeof msg, "stream reset by peer (HTTP/2 error %s)",
             nghttp2_http2_strerror(h2_error));
  } else {
    code = SLUICE_STATUS_INTERNAL;
    snprintf(msg, sizeof msg,
             "server closed the stream without sending grpc-status");
  }
  sluice__ccall_complete(c, code, text);
  sluice__ccall_unref(c); /* the stream's reference */
}

static void start_on_loop(sluice__task *t) {
  sluice__ccall *c =
      (sluice__ccall *)((char *)t - offsetof(sluice__ccall, start_task));
  sluice_channel *ch = c->ch;
  c->state = SLUICE__CALL_PENDING;
  sluice__link_push(&ch->pending, &c->link);
  if (ch->closing) {
    sluice__ccall_complete(c, SLUICE_STATUS_CANCELLED, "channel destroyed");
    return;
  }
  if (c->fail_code != SLUICE_STATUS_OK) {
    sluice__ccall_complete(c, c->fail_code, c->fail_reason);
    return;
  }
  if (c->deadline_ns) {
    uint64_t now = sluice_now_ns();
    if (now >= c->deadline_ns) {
      sluice__ccall_complete(c, SLUICE_STATUS_DEADLINE_EXCEEDED,
                             "deadline already expired before the call "
                             "started (nothing was sent)");
      return;
    }
    uv_timer_init(sluice__loop_uv(ch->loop), &c->timer);
    c->timer.data = c;
    c->timer_open = 1;
    c->refs++;
    /* Round up so the timer never fires before the deadline. */
    uv_timer_start(&c->timer, on_deadline,
                   (c->deadline_ns - now + 999999) / 1000000, 0);
  }
  sluice__channel_dispatch(ch);
}

static uint32_t min_nonzero(uint32_t a, uint32_t b) {
  if (!a)
    return b;
  if (!b)
    return a;
  return a < b ? a : b;
}

/* Builds the call on the caller's thread (packing the request there keeps
 * that work off the loop) and hands it to the loop. */
int sluice_unary_call_tramp(sluice_channel *ch, const sluice_method_desc *m,
                            const ProtobufCMessage *req,
                            const sluice_call_opts *opts,
                            sluice_unary_tramp tramp, sluice_generic_fn cb,
                            void *user_data) {
  if (!ch || !m || !req || !tramp || !cb || !m->path || !m->request ||
      !m->response || req->descriptor != m->request)
    return SLUICE_ERR_INVALID_ARG;
  sluice__ccall *c = calloc(1, sizeof *c);
  if (!c)
    return SLUICE_ERR_NOMEM;
  c->ch = ch;
  c->method = m;
  c->tramp = tramp;
  c->cb = cb;
  c->user_data = user_data;
  c->refs = 1;
  c->start_ns = sluice_now_ns();
  c->start_task.fn = start_on_loop;
  sluice__link_init(&c->link);

  uint32_t max_req =
      min_nonzero(min_nonzero(ch->opts.max_request_size, m->max_request_size),
                  opts ? opts->max_request_size : 0);
  c->max_response_size =
      min_nonzero(min_nonzero(ch->opts.max_response_size, m->max_response_size),
                  opts ? opts->max_response_size : 0);
  sluice__deframer_init(&c->deframer, c->max_response_size);

  uint64_t timeout_ms =
      opts && opts->timeout_ms ? opts->timeout_ms : m->default_timeout_ms;
  if (timeout_ms)
    c->deadline_ns = c->start_ns + timeout_ms * 1000000ull;
  if (opts && opts->deadline_ns &&
      (!c->deadline_ns || opts->deadline_ns < c->deadline_ns))
    c->deadline_ns = opts->deadline_ns;

  size_t len = protobuf_c_message_get_packed_size(req);
  if (len > max_req || len > UINT32_MAX) {
    snprintf(c->fail_buf, sizeof c->fail_buf,
             "request message larger than max (%zu vs. %" PRIu32 "); not sent",
             len, max_req);
    c->fail_code = SLUICE_STATUS_RESOURCE_EXHAUSTED;
    c->fail_reason = c->fail_buf;
  } else {
    c->req = malloc(len + 5);
    if (!c->req) {
      free(c);
      return SLUICE_ERR_NOMEM;
    }
    sluice__frame_header(c->req, 0, (uint32_t)len);
    protobuf_c_message_pack(req, c->req + 5);
    c->req_len = len + 5;
  }
  if (opts && opts->metadata && sluice_metadata_count(opts->metadata)) {
    if (sluice_metadata_new(&c->send_md) != 0)
      goto nomem;
    for (size_t i = 0; i < sluice_metadata_count(opts->metadata); i++) {
      const char *k;
      const void *v;
      size_t vl;
      sluice_metadata_get(opts->metadata, i, &k, &v, &vl);
      if (sluice_metadata_add(c->send_md, k, v, vl) != 0)
        goto nomem;
    }
  }
  /* Counted from any thread; the channel waits for it to reach 0. */
  __atomic_add_fetch(&ch->live_calls, 1, __ATOMIC_RELAXED);
  sluice__loop_post(ch->loop, &c->start_task);
  return 0;
nomem:
  sluice_metadata_del(c->send_md);
  free(c->req);
  free(c);
  return SLUICE_ERR_NOMEM;
}

static void generic_tramp(const sluice_status *st, const ProtobufCMessage *resp,
                          sluice_generic_fn cb, void *user_data) {
  ((sluice_unary_cb)cb)(st, resp, user_data);
}

int sluice_unary_call(sluice_channel *ch, const sluice_method_desc *method,
                      const ProtobufCMessage *req, const sluice_call_opts *opts,
                      sluice_unary_cb cb, void *user_data) {
  if (!cb)
    return SLUICE_ERR_INVALID_ARG;
  return sluice_unary_call_tramp(ch, method, req, opts, generic_tramp,
                                 (sluice_generic_fn)cb, user_data);
}

/* ---- blocking calls: a condition variable the loop thread signals */

typedef struct blocking {
  uv_mutex_t mu;
  uv_cond_t cv;
  int done;
  sluice_status st;
  ProtobufCMessage *resp;
} blocking;

static void blocking_tramp(const sluice_status *st,
                           const ProtobufCMessage *resp, sluice_generic_fn cb,
                           void *user_data) {
  (void)cb;
  (void)resp;
  blocking *b = user_data;
  completion *done = (completion *)(void *)st; /* see struct completion */
  b->st.code = st->code;
  b->st.message = strdup(st->message ? st->message : "");
  b->st.initial_md = done->st.initial_md;
  b->st.trailing_md = done->st.trailing_md;
  done->st.initial_md = done->st.trailing_md = NULL;
  b->resp = done->resp;
  done->resp = NULL;
  uv_mutex_lock(&b->mu);
  b->done = 1;
  uv_cond_signal(&b->cv);
  uv_mutex_unlock(&b->mu);
}

static sluice_status_code local_fail(sluice_status *out,
                                     sluice_status_code code, const char *msg) {
  if (out) {
    sluice_status_init(out);
    out->code = code;
    out->message = strdup(msg);
  }
  return code;
}

static void noop_fn(void) {}

sluice_status_code sluice_unary_call_blocking(sluice_channel *ch,
                                              const sluice_method_desc *method,
                                              const ProtobufCMessage *req,
                                              ProtobufCMessage **resp,
                                              const sluice_call_opts *opts,
                                              sluice_status *status) {
  if (resp)
    *resp = NULL;
  if (!ch || !method || !req || !resp)
    return local_fail(status, SLUICE_STATUS_INVALID_ARGUMENT,
                      "blocking call: channel, method, request and response "
                      "pointer are required");
  if (req->descriptor != method->request)
    return local_fail(status, SLUICE_STATUS_INVALID_ARGUMENT,
                      "blocking call: request is not of the method's type");
  if (sluice__loop_on_thread(ch->loop))
    return local_fail(status, SLUICE_STATUS_FAILED_PRECONDITION,
                      "blocking call made on the channel's loop thread (it "
                      "would deadlock); use the async call there");
  blocking b;
  memset(&b, 0, sizeof b);
  uv_mutex_init(&b.mu);
  uv_cond_init(&b.cv);
  int rv = sluice_unary_call_tramp(ch, method, req, opts, blocking_tramp,
                                   noop_fn, &b);
  if (rv != 0) {
    uv_mutex_destroy(&b.mu);
    uv_cond_destroy(&b.cv);
    return local_fail(status, SLUICE_STATUS_INTERNAL, sluice_strerror(rv));
  }
  uv_mutex_lock(&b.mu);
  while (!b.done)
    uv_cond_wait(&b.cv, &b.mu);
  uv_mutex_unlock(&b.mu);
  uv_mutex_destroy(&b.mu);
  uv_cond_destroy(&b.cv);
  *resp = b.resp;
  sluice_status_code code = b.st.code;
  if (status)
    *status = b.st;
  else
    sluice_status_clear(&b.st);
  return code;
}
