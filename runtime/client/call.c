/* The life of one client call: creation on any thread, start on the loop,
 * completion exactly once (response, error, deadline, cancel, channel
 * destroyed), and freeing once its timer and stream have let go. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nghttp2/nghttp2.h>

#include "client/client.h"
#include "transport/message.h"
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

void sluice_call_opts_init_sized(sluice_call_opts *o, size_t struct_size) {
  if (!o || struct_size < sizeof o->struct_size)
    return;
  memset(o, 0, struct_size < sizeof *o ? struct_size : sizeof *o);
  o->struct_size = struct_size;
}

/* The caller's options as this library's layout: fields its program did not
 * know of (an older, shorter struct) read as 0, fields this library does not
 * know of (a newer program) are ignored. */
static const sluice_call_opts *call_opts_read(const sluice_call_opts *opts,
                                              sluice_call_opts *local) {
  if (!opts || opts->struct_size == 0 || opts->struct_size >= sizeof *opts)
    return opts;
  memset(local, 0, sizeof *local);
  memcpy(local, opts, opts->struct_size);
  return local;
}

static void ccall_free(sluice__ccall *c) {
  sluice_channel *ch = c->ch;
  /* Tasks queued on the loop thread would run on freed memory. */
  sluice__loop_cancel(ch->loop, &c->ready_task);
  sluice__loop_cancel(ch->loop, &c->resume_task);
  sluice__loop_cancel(ch->loop, &c->kick_task);
  sluice__loop_cancel(ch->loop, &c->fail_task);
  sluice__sendq_destroy(&c->sendq);
  free(c->grpc_message);
  sluice_metadata_del(c->send_md);
  sluice_metadata_del(c->hdr_md);
  sluice_metadata_del(c->initial_md);
  sluice_metadata_del(c->trailing_md);
  sluice__recv_reset(&c->recv);
  if (c->resp)
    protobuf_c_message_free_unpacked(c->resp, NULL);
  /* Cached before live_calls drops: the channel may be freed right after. */
  if (sluice__loop_on_thread(ch->loop))
    sluice__objcache_put(&ch->call_cache, c);
  else
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
  sluice__channel_lb_done(c, code);
  sluice__sendq_abort(&c->sendq); /* later sends: SLUICE_ERR_STATE */
  if (prev == SLUICE__CALL_PENDING) {
    sluice__link_remove(&c->link);
    if (c->wait_since) {
      c->wait_since = 0;
      c->ch->n_waiting--;
    }
  }
  if (prev == SLUICE__CALL_ACTIVE && c->conn)
    sluice__cconn_cancel_stream(c->conn, c, NGHTTP2_CANCEL);
  if (c->timer_open) {
    c->timer_open = 0;
    uv_close((uv_handle_t *)&c->timer, on_timer_closed);
  }
  /* Held messages are dropped; their bytes go back to the connection when
   * the stream closes. */
  size_t unconsumed = c->recv.unconsumed;
  sluice__recv_reset(&c->recv);
  c->recv.unconsumed = unconsumed;

  if (!c->tramp) {
    sluice_status st = {code, (char *)(message ? message : ""), c->initial_md,
                        c->trailing_md};
    c->h.on_done(c, &st, c->user_data);
    sluice__ccall_unref(c);
    return;
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
  if (sluice__timer_early(t, c->deadline_ns, on_deadline))
    return;
  char msg[96];
  snprintf(msg, sizeof msg, "deadline exceeded after %" PRIu64 " ms",
           (sluice_now_ns() - c->start_ns) / 1000000);
  sluice__ccall_complete(c, SLUICE_STATUS_DEADLINE_EXCEEDED, msg);
}

static int single_response(const sluice__ccall *c) {
  return c->method->kind == SLUICE_CALL_UNARY ||
         c->method->kind == SLUICE_CALL_CLIENT_STREAMING;
}

/* Resets what a first attempt received, for a transparent retry. */
static void reset_for_retry(sluice__ccall *c) {
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
  sluice__recv_reset(&c->recv);
  c->recv.unconsumed = 0;
  c->enc_ok = 0;
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
    if (code == SLUICE_STATUS_OK && sluice__recv_holding(&c->recv)) {
      /* Paused: on_done waits until every message was delivered. */
      sluice__channel_lb_done(c, code);
      c->final_pending = 1;
      sluice__ccall_unref(c); /* the stream's reference */
      return;
    }
    if (code == SLUICE_STATUS_OK && single_response(c) && c->n_msgs != 1) {
      code = SLUICE_STATUS_UNIMPLEMENTED;
      snprintf(msg, sizeof msg,
               "server answered a %s call with %d response messages",
               c->method->kind == SLUICE_CALL_UNARY ? "unary"
                                                    : "client-streaming",
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
  } else if (h2_error == NGHTTP2_REFUSED_STREAM && !c->got_headers &&
             sluice__sendq_rewind(&c->sendq) == 0) {
    /* Never processed by the server (GOAWAY or REFUSED_STREAM): retry
     * transparently, as gRPC does. */
    sluice__channel_lb_unsent(c);
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
  /* What the balancer knows of the call: its path, size and deadline. */
  c->lbc.path_id = sluice__channel_path_id(ch, c->method);
  size_t q = sluice__sendq_queued(&c->sendq);
  c->lbc.size = q > UINT32_MAX ? UINT32_MAX : (uint32_t)q;
  c->lbc.deadline_ns = c->deadline_ns;
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
    sluice__timer_start_deadline(&c->timer, c->deadline_ns, now, on_deadline);
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

/* ---- work handed to the loop from any thread */

static sluice__ccall *of_task(sluice__task *t, size_t off) {
  return (sluice__ccall *)((char *)t - off);
}

static void kick_on_loop(sluice__task *t) {
  sluice__ccall *c = of_task(t, offsetof(sluice__ccall, kick_task));
  sluice__loop_posted_clear(&c->kick_posted);
  if (c->state == SLUICE__CALL_ACTIVE && c->conn) {
    nghttp2_session_resume_data(c->conn->conn.session, c->stream_id);
    sluice__conn_want_write(&c->conn->conn);
  }
}

static void kick(sluice__ccall *c) {
  sluice__loop_post_once(c->ch->loop, &c->kick_task, &c->kick_posted);
}

static void ready_on_loop(sluice__task *t) {
  sluice__ccall *c = of_task(t, offsetof(sluice__ccall, ready_task));
  if (c->state != SLUICE__CALL_DONE && c->h.on_send_ready)
    c->h.on_send_ready(c, c->user_data);
}

static void give_back(sluice__ccall *c, size_t n) {
  if (n && c->conn && c->conn->conn.session) {
    nghttp2_session_consume(c->conn->conn.session, c->stream_id, n);
    sluice__conn_want_write(&c->conn->conn);
  }
}

/* Delivers held messages if allowed; completes a call whose stream ended
 * while they were held. */
static void drain_held(sluice__ccall *c) {
  size_t n = 0;
  if (sluice__recv_drain(&c->recv, &n) != 0) {
    if (c->state != SLUICE__CALL_DONE)
      sluice__ccall_complete(
          c, c->fail_code ? c->fail_code : SLUICE_STATUS_INTERNAL,
          c->fail_reason ? c->fail_reason : "");
    return;
  }
  give_back(c, n);
  if (c->final_pending && !sluice__recv_holding(&c->recv) &&
      c->state != SLUICE__CALL_DONE) {
    c->final_pending = 0;
    if (single_response(c) && c->n_msgs != 1)
      sluice__ccall_complete(c, SLUICE_STATUS_UNIMPLEMENTED,
                             "server sent no response message");
    else
      sluice__ccall_complete(c, SLUICE_STATUS_OK,
                             c->grpc_message ? c->grpc_message : "");
  }
}

static void resume_on_loop(sluice__task *t) {
  sluice__ccall *c = of_task(t, offsetof(sluice__ccall, resume_task));
  sluice__loop_posted_clear(&c->resume_posted);
  c->recv.paused = __atomic_load_n(&c->want_paused, __ATOMIC_ACQUIRE);
  if (c->state != SLUICE__CALL_DONE && !c->recv.paused)
    drain_held(c);
}

static void fail_on_loop(sluice__task *t) {
  sluice__ccall *c = of_task(t, offsetof(sluice__ccall, fail_task));
  if (c->state == SLUICE__CALL_NEW) {
    /* Not started yet: start_on_loop reports it. */
    c->fail_code = c->fail_req;
    c->fail_reason = c->fail_req_msg;
    return;
  }
  sluice__ccall_complete(c, c->fail_req, c->fail_req_msg);
}

static void release_on_loop(sluice__task *t) {
  sluice__ccall_unref(of_task(t, offsetof(sluice__ccall, release_task)));
}

/* Fails the call from any thread (first request wins). */
static void request_fail(sluice__ccall *c, sluice_status_code code,
                         const char *msg) {
  if (__atomic_exchange_n(&c->fail_posted, 1, __ATOMIC_ACQ_REL))
    return;
  c->fail_req = code;
  snprintf(c->fail_req_msg, sizeof c->fail_req_msg, "%s", msg ? msg : "");
  sluice__loop_post(c->ch->loop, &c->fail_task);
}

/* ---- creation */

/* Builds a call on the caller's thread; it reaches the loop with post_start.
 */
static sluice__ccall *ccall_new(sluice_channel *ch, const sluice_method_desc *m,
                                const sluice_call_opts *opts) {
  sluice_call_opts local;
  opts = call_opts_read(opts, &local);
  /* Calls started on the loop thread reuse freed ones (objcache.h). */
  sluice__ccall *c = sluice__loop_on_thread(ch->loop)
                         ? sluice__objcache_get(&ch->call_cache)
                         : calloc(1, sizeof *c);
  if (!c)
    return NULL;
  size_t bound = opts && opts->send_buffer ? opts->send_buffer
                                           : SLUICE_DEFAULT_SEND_BUFFER;
  if (sluice__sendq_init(&c->sendq, bound) != 0) {
    free(c);
    return NULL;
  }
  if (m->kind == SLUICE_CALL_UNARY || m->kind == SLUICE_CALL_SERVER_STREAMING)
    sluice__sendq_retain(&c->sendq); /* replayable on REFUSED_STREAM */
  c->ch = ch;
  c->method = m;
  c->refs = 1;
  c->start_ns = sluice_now_ns();
  c->start_task.fn = start_on_loop;
  c->kick_task.fn = kick_on_loop;
  c->ready_task.fn = ready_on_loop;
  c->resume_task.fn = resume_on_loop;
  c->fail_task.fn = fail_on_loop;
  c->release_task.fn = release_on_loop;
  sluice__link_init(&c->link);
  c->max_request_size =
      min_nonzero(min_nonzero(ch->opts.max_request_size, m->max_request_size),
                  opts ? opts->max_request_size : 0);
  c->max_response_size =
      min_nonzero(min_nonzero(ch->opts.max_response_size, m->max_response_size),
                  opts ? opts->max_response_size : 0);
  sluice__recv_init(&c->recv, c->max_response_size, sluice__ccall_deliver, c,
                    0);
  c->compression = opts ? opts->compression : SLUICE_COMPRESS_NONE;
  if (c->compression != SLUICE_COMPRESS_GZIP)
    c->compression = SLUICE_COMPRESS_NONE;

  uint64_t timeout_ms =
      opts && opts->timeout_ms ? opts->timeout_ms : m->default_timeout_ms;
  if (timeout_ms)
    c->deadline_ns = c->start_ns + timeout_ms * 1000000ull;
  if (opts && opts->deadline_ns &&
      (!c->deadline_ns || opts->deadline_ns < c->deadline_ns))
    c->deadline_ns = opts->deadline_ns;

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
  return c;
nomem:
  sluice_metadata_del(c->send_md);
  sluice__sendq_destroy(&c->sendq);
  free(c);
  return NULL;
}

static void post_start(sluice__ccall *c) {
  /* Counted from any thread; the channel waits for it to reach 0. */
  __atomic_add_fetch(&c->ch->live_calls, 1, __ATOMIC_RELAXED);
  sluice__loop_post(c->ch->loop, &c->start_task);
}

/* Serializes msg and queues it. On TOO_LARGE the call is failed with
 * RESOURCE_EXHAUSTED (before it starts: *pre_fail set, no task). */
static int queue_message(sluice__ccall *c, const ProtobufCMessage *msg,
                         unsigned flags, int started) {
  uint8_t *buf;
  size_t len, size;
  sluice_compression comp =
      (flags & SLUICE_SEND_NO_COMPRESS) ? SLUICE_COMPRESS_NONE : c->compression;
  int rv = sluice__msg_pack(msg, comp, c->max_request_size, &buf, &len, &size);
  if (rv == SLUICE_ERR_TOO_LARGE) {
    char text[160];
    snprintf(text, sizeof text,
             "request message larger than max (%zu vs. %" PRIu32 "); not sent",
             size, c->max_request_size);
    if (started) {
      request_fail(c, SLUICE_STATUS_RESOURCE_EXHAUSTED, text);
    } else {
      c->fail_code = SLUICE_STATUS_RESOURCE_EXHAUSTED;
      snprintf(c->fail_buf, sizeof c->fail_buf, "%s", text);
      c->fail_reason = c->fail_buf;
    }
    return rv;
  }
  if (rv != 0)
    return rv;
  int deferred;
  rv = sluice__sendq_push(&c->sendq, buf, len, 0, &deferred);
  if (rv != 0) {
    free(buf);
    return rv;
  }
  if (deferred)
    kick(c);
  return 0;
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
  sluice__ccall *c = ccall_new(ch, m, opts);
  if (!c)
    return SLUICE_ERR_NOMEM;
  c->tramp = tramp;
  c->cb = cb;
  c->user_data = user_data;
  int rv = queue_message(c, req, 0, 0);
  if (rv == SLUICE_ERR_NOMEM) {
    sluice_metadata_del(c->send_md);
    sluice__sendq_destroy(&c->sendq);
    free(c);
    return rv;
  }
  int deferred;
  sluice__sendq_close(&c->sendq, &deferred);
  post_start(c);
  return 0;
}

int sluice_call_start(sluice_channel *ch, const sluice_method_desc *m,
                      const sluice_call_opts *opts,
                      const sluice_call_handlers *h, void *user_data,
                      sluice_call **out) {
  if (!ch || !m || !h || !h->on_done || !out || !m->path || !m->request ||
      !m->response)
    return SLUICE_ERR_INVALID_ARG;
  sluice__ccall *c = ccall_new(ch, m, opts);
  if (!c)
    return SLUICE_ERR_NOMEM;
  c->h = *h;
  c->user_data = user_data;
  c->refs = 2; /* logical + the user's handle */
  *out = c;
  post_start(c);
  return 0;
}

int sluice_call_start_msg(sluice_channel *ch, const sluice_method_desc *m,
                          const ProtobufCMessage *req,
                          const sluice_call_opts *opts,
                          const sluice_call_handlers *h, void *user_data,
                          sluice_call **out) {
  if (!ch || !m || !h || !h->on_done || !out || !req || !m->path ||
      !m->request || !m->response || req->descriptor != m->request)
    return SLUICE_ERR_INVALID_ARG;
  sluice__ccall *c = ccall_new(ch, m, opts);
  if (!c)
    return SLUICE_ERR_NOMEM;
  c->h = *h;
  c->user_data = user_data;
  c->refs = 2; /* logical + the user's handle */
  if (queue_message(c, req, 0, 0) == SLUICE_ERR_NOMEM) {
    sluice_metadata_del(c->send_md);
    sluice__sendq_destroy(&c->sendq);
    free(c);
    return SLUICE_ERR_NOMEM;
  }
  int deferred;
  sluice__sendq_close(&c->sendq, &deferred);
  *out = c;
  post_start(c);
  return 0;
}

/* The typed handlers live in the call object, so the trampolines' user_data
 * needs no allocation of its own and lives exactly as long as they run. */
int sluice_call_start_typed(sluice_channel *ch, const sluice_method_desc *m,
                            const ProtobufCMessage *req,
                            const sluice_call_opts *opts,
                            const sluice_call_handlers *tramps,
                            const sluice_call_typed_handlers *typed,
                            sluice_call **out) {
  if (!ch || !m || !tramps || !tramps->on_done || !typed || !typed->on_done ||
      !out || !m->path || !m->request || !m->response ||
      (req && req->descriptor != m->request))
    return SLUICE_ERR_INVALID_ARG;
  sluice__ccall *c = ccall_new(ch, m, opts);
  if (!c)
    return SLUICE_ERR_NOMEM;
  c->h = *tramps;
  c->typed = *typed;
  c->user_data = &c->typed;
  c->refs = 2; /* logical + the user's handle */
  /* With a request: as sluice_call_start_msg(). */
  if (req) {
    if (queue_message(c, req, 0, 0) == SLUICE_ERR_NOMEM) {
      sluice_metadata_del(c->send_md);
      sluice__sendq_destroy(&c->sendq);
      free(c);
      return SLUICE_ERR_NOMEM;
    }
    int deferred;
    sluice__sendq_close(&c->sendq, &deferred);
  }
  *out = c;
  post_start(c);
  return 0;
}

int sluice_call_send_ex(sluice_call *c, const ProtobufCMessage *msg,
                        unsigned flags) {
  if (!c || !msg || msg->descriptor != c->method->request)
    return SLUICE_ERR_INVALID_ARG;
  if (sluice__sendq_is_closed(&c->sendq))
    return SLUICE_ERR_STATE;
  if ((c->method->kind == SLUICE_CALL_UNARY ||
       c->method->kind == SLUICE_CALL_SERVER_STREAMING) &&
      sluice__sendq_pushed(&c->sendq) > 0)
    return SLUICE_ERR_STATE;
  return queue_message(c, msg, flags, 1);
}

int sluice_call_send(sluice_call *c, const ProtobufCMessage *msg) {
  return sluice_call_send_ex(c, msg, 0);
}

int sluice_call_close_send(sluice_call *c) {
  if (!c)
    return SLUICE_ERR_INVALID_ARG;
  int deferred;
  int rv = sluice__sendq_close(&c->sendq, &deferred);
  if (deferred)
    kick(c);
  return rv;
}

int sluice_call_cancel(sluice_call *c, const char *message) {
  if (!c)
    return SLUICE_ERR_INVALID_ARG;
  request_fail(c, SLUICE_STATUS_CANCELLED,
               message && *message ? message : "cancelled by the client");
  return 0;
}

int sluice_call_set_recv_paused(sluice_call *c, int paused) {
  if (!c)
    return SLUICE_ERR_INVALID_ARG;
  __atomic_store_n(&c->want_paused, paused ? 1 : 0, __ATOMIC_RELEASE);
  if (paused && sluice__loop_on_thread(c->ch->loop))
    c->recv.paused = 1; /* at once: no further message in this callback */
  sluice__loop_post_once(c->ch->loop, &c->resume_task, &c->resume_posted);
  return 0;
}

size_t sluice_call_send_queued(const sluice_call *c) {
  return c ? sluice__sendq_queued((sluice__sendq *)&c->sendq) : 0;
}

size_t sluice_call_recv_buffered_max(const sluice_call *c) {
  return c ? __atomic_load_n(&c->recv.buffered_max, __ATOMIC_RELAXED) : 0;
}

int sluice_call_last_message_compressed(const sluice_call *c) {
  return c ? c->last_compressed : 0;
}

void sluice_call_release(sluice_call *c) {
  if (c)
    sluice__loop_post(c->ch->loop, &c->release_task);
}

/* ---- the loop side of sending and receiving */

ssize_t sluice__ccall_read(sluice__ccall *c, uint8_t *buf, size_t len,
                           uint32_t *flags) {
  size_t n;
  int ready;
  sluice__sendq_state st = sluice__sendq_read(&c->sendq, buf, len, &n, &ready);
  if (!c->strat_done && c->lb_dest && n) {
    /* Strategy time: from the first decision until the request leaves. */
    c->strat_done = 1;
    c->lb_dest->lb.stats.strat_ns_sum += sluice_now_ns() - c->pick_ns;
    c->lb_dest->lb.stats.strat_n++;
  }
  if (ready)
    sluice__loop_post(c->ch->loop, &c->ready_task);
  if (st == SLUICE__SENDQ_DEFERRED)
    return NGHTTP2_ERR_DEFERRED;
  if (st == SLUICE__SENDQ_EOF)
    *flags |= NGHTTP2_DATA_FLAG_EOF;
  return (ssize_t)n;
}

int sluice__ccall_deliver(void *ud, int compressed, const uint8_t *data,
                          size_t len) {
  sluice__ccall *c = ud;
  if (c->state == SLUICE__CALL_DONE)
    return 1;
  /* Cancelled (the task completing it is on its way): drop the message. */
  if (__atomic_load_n(&c->fail_posted, __ATOMIC_ACQUIRE))
    return 0;
  if (single_response(c) && c->n_msgs >= 1) {
    c->fail_code = SLUICE_STATUS_UNIMPLEMENTED;
    c->fail_reason = "server sent more than one response message";
    return 1;
  }
  ProtobufCMessage *m;
  sluice_status_code code = sluice__msg_unpack(
      c->method->response, compressed, c->enc_ok, c->enc, data, len,
      c->max_response_size, &m, c->fail_buf, sizeof c->fail_buf);
  if (code != SLUICE_STATUS_OK) {
    c->fail_code = code;
    c->fail_reason = c->fail_buf;
    return 1;
  }
  c->n_msgs++;
  c->last_compressed = compressed;
  if (c->tramp) {
    c->resp = m; /* handed over at completion */
    return 0;
  }
  if (c->h.on_message)
    c->h.on_message(c, m, c->user_data);
  protobuf_c_message_free_unpacked(m, NULL);
  return c->state == SLUICE__CALL_DONE ? 1 : 0;
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
