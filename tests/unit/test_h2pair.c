/* gRPC over two nghttp2 sessions back to back in memory (h2pair.c): the
 * request and response header sets as each side parses them
 * (wire/grpc_headers.c), framed messages through transport/recv.c, the
 * final status the client derives (wire/final_status.c), Trailers-Only,
 * a peer that is not gRPC, resets and GOAWAY (transparent retry), and flow
 * control holding a paused server to one window plus one message. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include <sluice/metadata.h>

#include "h2pair.h"
#include "transport/headers.h"
#include "transport/message.h"
#include "transport/recv.h"
#include "transport/sendq.h"
#include "unit.pb-c.h"
#include "wire/compress.h"
#include "wire/final_status.h"
#include "wire/grpc_headers.h"
#include "wire/orca.h"
#include "wire/percent.h"
#include "wire/timeout.h"

#define PATH "/unit.Svc/Echo"
#define MAX_SEEN 256

/* ---- the server side */

typedef struct {
  sluice_metadata *md; /* the request's, for grpc_req */
  sluice__grpc_req req;
  int began, headers_done, end_stream;
  int start_paused; /* the receiver holds messages from the first byte */
  int32_t stream_id;
  sluice__grpc_req_verdict verdict;
  sluice__recv recv;
  int n_msgs;
  Unit__Blob *msgs[MAX_SEEN];
  uint64_t data_in, consumed; /* DATA bytes received, given back */
  int closed;
  uint32_t close_error;
  /* the response: one framed message, then trailers (none: END_STREAM with
   * the data) */
  uint8_t *resp;
  size_t resp_len, resp_sent;
  sluice__nvs trailers;
  int have_trailers;
} sside;

static int s_deliver(void *ud, int compressed, const uint8_t *msg, size_t len) {
  sside *s = ud;
  ProtobufCMessage *m;
  char err[160];
  if (sluice__msg_unpack(&unit__blob__descriptor, compressed, s->req.enc_ok,
                         s->req.enc, msg, len, 1 << 20, &m, err,
                         sizeof err) != SLUICE_STATUS_OK)
    fail_msg("server unpack: %s", err);
  assert_true(s->n_msgs < MAX_SEEN);
  s->msgs[s->n_msgs++] = (Unit__Blob *)m;
  return 0;
}

static sside *s_of(void *ud) { return ud; }

static int s_on_begin_headers(nghttp2_session *ses, const nghttp2_frame *f,
                              void *ud) {
  (void)ses;
  sside *s = s_of(ud);
  if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
    return 0;
  assert_false(s->began); /* one stream per test */
  s->began = 1;
  s->stream_id = f->hd.stream_id;
  assert_int_equal(sluice_metadata_new(&s->md), 0);
  sluice__grpc_req_init(&s->req, s->md);
  return 0;
}

static int s_on_header(nghttp2_session *ses, const nghttp2_frame *f,
                       const uint8_t *name, size_t nlen, const uint8_t *value,
                       size_t vlen, uint8_t flags, void *ud) {
  (void)ses;
  (void)flags;
  sside *s = s_of(ud);
  if (f->headers.cat != NGHTTP2_HCAT_REQUEST)
    return 0;
  sluice__grpc_req_header(&s->req, (const char *)name, nlen, value, vlen);
  return 0;
}

static int s_on_frame_recv(nghttp2_session *ses, const nghttp2_frame *f,
                           void *ud) {
  (void)ses;
  sside *s = s_of(ud);
  if (f->hd.type == NGHTTP2_HEADERS && f->headers.cat == NGHTTP2_HCAT_REQUEST) {
    s->headers_done = 1;
    s->verdict = sluice__grpc_req_done(&s->req);
    sluice__recv_init(&s->recv, 1 << 20, s_deliver, s, s->start_paused);
  }
  if ((f->hd.type == NGHTTP2_HEADERS || f->hd.type == NGHTTP2_DATA) &&
      (f->hd.flags & NGHTTP2_FLAG_END_STREAM) &&
      f->hd.stream_id == s->stream_id)
    s->end_stream = 1;
  return 0;
}

static int s_on_data(nghttp2_session *ses, uint8_t flags, int32_t id,
                     const uint8_t *data, size_t len, void *ud) {
  (void)flags;
  sside *s = s_of(ud);
  assert_int_equal(id, s->stream_id);
  s->data_in += len;
  size_t consume = 0;
  const char *reason = "";
  assert_int_equal(sluice__recv_feed(&s->recv, data, len, &consume, &reason),
                   SLUICE_STATUS_OK);
  if (consume) {
    nghttp2_session_consume(ses, id, consume);
    s->consumed += consume;
  }
  return 0;
}

/* As sluice's server: after our trailers, a client still sending gets
 * RST_STREAM(NO_ERROR). */
static int s_on_frame_send(nghttp2_session *ses, const nghttp2_frame *f,
                           void *ud) {
  (void)ud;
  if (f->hd.type == NGHTTP2_HEADERS &&
      (f->hd.flags & NGHTTP2_FLAG_END_STREAM) &&
      nghttp2_session_get_stream_remote_close(ses, f->hd.stream_id) == 0)
    nghttp2_submit_rst_stream(ses, NGHTTP2_FLAG_NONE, f->hd.stream_id,
                              NGHTTP2_NO_ERROR);
  return 0;
}

static int s_on_close(nghttp2_session *ses, int32_t id, uint32_t err,
                      void *ud) {
  (void)ses;
  sside *s = s_of(ud);
  if (id == s->stream_id) {
    s->closed = 1;
    s->close_error = err;
  }
  return 0;
}

static ssize_t s_read(nghttp2_session *ses, int32_t id, uint8_t *buf,
                      size_t len, uint32_t *flags, nghttp2_data_source *src,
                      void *ud) {
  (void)ud;
  sside *s = src->ptr;
  size_t n =
      s->resp_len - s->resp_sent < len ? s->resp_len - s->resp_sent : len;
  memcpy(buf, s->resp + s->resp_sent, n);
  s->resp_sent += n;
  if (s->resp_sent == s->resp_len) {
    *flags |= NGHTTP2_DATA_FLAG_EOF;
    if (s->have_trailers) {
      *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
      if (nghttp2_submit_trailer(ses, id, s->trailers.nv, s->trailers.n) != 0)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
  }
  return (ssize_t)n;
}

static void sside_free(sside *s) {
  for (int i = 0; i < s->n_msgs; i++)
    protobuf_c_message_free_unpacked(&s->msgs[i]->base, NULL);
  if (s->began) {
    sluice__grpc_req_reset(&s->req);
    sluice__recv_reset(&s->recv);
  }
  sluice_metadata_del(s->md);
  free(s->resp);
  if (s->have_trailers)
    sluice__nvs_free(&s->trailers);
}

/* ---- the client side */

typedef struct {
  sluice__grpc_resp rx;
  sluice_metadata *initial_md, *trailing_md;
  int n_blocks;
  sluice__grpc_block_kind kinds[4];
  int load_report;
  sluice__recv recv;
  int n_msgs;
  Unit__Blob *msgs[MAX_SEEN];
  int closed;
  uint32_t close_error;
  /* the request body: a send queue (NULL: none, DEFERRED forever) */
  sluice__sendq *sq;
  int raw;          /* the response body is not gRPC: only count it */
  size_t raw_bytes; /* its bytes */
} cside;

static int c_deliver(void *ud, int compressed, const uint8_t *msg, size_t len) {
  cside *c = ud;
  ProtobufCMessage *m;
  char err[160];
  if (sluice__msg_unpack(&unit__blob__descriptor, compressed, c->rx.enc_ok,
                         c->rx.enc, msg, len, 1 << 20, &m, err,
                         sizeof err) != SLUICE_STATUS_OK)
    fail_msg("client unpack: %s", err);
  assert_true(c->n_msgs < MAX_SEEN);
  c->msgs[c->n_msgs++] = (Unit__Blob *)m;
  return 0;
}

static int c_on_header(nghttp2_session *ses, const nghttp2_frame *f,
                       const uint8_t *name, size_t nlen, const uint8_t *value,
                       size_t vlen, uint8_t flags, void *ud) {
  (void)ses;
  (void)flags;
  cside *c = ud;
  if (f->hd.type != NGHTTP2_HEADERS)
    return 0;
  if (sluice__grpc_resp_header(&c->rx, (const char *)name, nlen, value, vlen) !=
      0)
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  return 0;
}

static int c_on_frame_recv(nghttp2_session *ses, const nghttp2_frame *f,
                           void *ud) {
  cside *c = ud;
  /* As sluice's client: the server ended the stream while we may still be
   * sending: stop, with RST_STREAM(NO_ERROR). */
  if ((f->hd.type == NGHTTP2_HEADERS || f->hd.type == NGHTTP2_DATA) &&
      (f->hd.flags & NGHTTP2_FLAG_END_STREAM) &&
      nghttp2_session_get_stream_local_close(ses, f->hd.stream_id) == 0)
    nghttp2_submit_rst_stream(ses, NGHTTP2_FLAG_NONE, f->hd.stream_id,
                              NGHTTP2_NO_ERROR);
  if (f->hd.type != NGHTTP2_HEADERS)
    return 0;
  sluice__grpc_block b = sluice__grpc_resp_block_done(
      &c->rx, (f->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0,
      f->headers.cat == NGHTTP2_HCAT_RESPONSE);
  assert_true(c->n_blocks < 4);
  c->kinds[c->n_blocks++] = b.kind;
  if (b.kind == SLUICE__GRPC_BLOCK_INITIAL) {
    sluice_metadata_del(c->initial_md);
    c->initial_md = b.md;
  } else if (b.kind == SLUICE__GRPC_BLOCK_TRAILERS) {
    sluice_metadata_del(c->trailing_md);
    c->trailing_md = b.md;
    c->load_report = b.load_report;
  }
  return 0;
}

static int c_on_data(nghttp2_session *ses, uint8_t flags, int32_t id,
                     const uint8_t *data, size_t len, void *ud) {
  (void)flags;
  cside *c = ud;
  if (c->raw) {
    c->raw_bytes += len;
    nghttp2_session_consume(ses, id, len);
    return 0;
  }
  size_t consume = 0;
  const char *reason = "";
  assert_int_equal(sluice__recv_feed(&c->recv, data, len, &consume, &reason),
                   SLUICE_STATUS_OK);
  nghttp2_session_consume(ses, id, consume);
  return 0;
}

static int c_on_close(nghttp2_session *ses, int32_t id, uint32_t err,
                      void *ud) {
  (void)ses;
  (void)id;
  cside *c = ud;
  c->closed = 1;
  c->close_error = err;
  return 0;
}

static ssize_t c_read(nghttp2_session *ses, int32_t id, uint8_t *buf,
                      size_t len, uint32_t *flags, nghttp2_data_source *src,
                      void *ud) {
  (void)ses;
  (void)id;
  (void)ud;
  cside *c = src->ptr;
  if (!c->sq)
    return NGHTTP2_ERR_DEFERRED;
  size_t n = 0;
  int ready;
  switch (sluice__sendq_read(c->sq, buf, len, &n, &ready)) {
  case SLUICE__SENDQ_DEFERRED:
    return NGHTTP2_ERR_DEFERRED;
  case SLUICE__SENDQ_EOF:
    *flags |= NGHTTP2_DATA_FLAG_EOF;
    break;
  case SLUICE__SENDQ_DATA:
    break;
  }
  return (ssize_t)n;
}

static void cside_init(cside *c) {
  memset(c, 0, sizeof *c);
  sluice__grpc_resp_init(&c->rx);
  sluice__recv_init(&c->recv, 1 << 20, c_deliver, c, 0);
}

static void cside_free(cside *c) {
  for (int i = 0; i < c->n_msgs; i++)
    protobuf_c_message_free_unpacked(&c->msgs[i]->base, NULL);
  sluice__grpc_resp_reset(&c->rx);
  sluice__recv_reset(&c->recv);
  sluice_metadata_del(c->initial_md);
  sluice_metadata_del(c->trailing_md);
}

/* ---- set-up */

typedef struct {
  nghttp2_session_callbacks *ccb, *scb;
  nghttp2_option *opt;
  h2pair pair;
  cside c;
  sside s;
  sluice__sendq sq;
  int32_t id;
} rig;

static void rig_init(rig *r, uint32_t stream_window) {
  memset(r, 0, sizeof *r);
  assert_int_equal(nghttp2_session_callbacks_new(&r->ccb), 0);
  nghttp2_session_callbacks_set_on_header_callback(r->ccb, c_on_header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(r->ccb, c_on_frame_recv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(r->ccb, c_on_data);
  nghttp2_session_callbacks_set_on_stream_close_callback(r->ccb, c_on_close);
  assert_int_equal(nghttp2_session_callbacks_new(&r->scb), 0);
  nghttp2_session_callbacks_set_on_begin_headers_callback(r->scb,
                                                          s_on_begin_headers);
  nghttp2_session_callbacks_set_on_header_callback(r->scb, s_on_header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(r->scb, s_on_frame_recv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(r->scb, s_on_data);
  nghttp2_session_callbacks_set_on_frame_send_callback(r->scb, s_on_frame_send);
  nghttp2_session_callbacks_set_on_stream_close_callback(r->scb, s_on_close);
  /* As sluice runs them: windows follow delivery (transport/recv.h). */
  assert_int_equal(nghttp2_option_new(&r->opt), 0);
  nghttp2_option_set_no_auto_window_update(r->opt, 1);
  cside_init(&r->c);
  assert_int_equal(h2pair_init(&r->pair, r->ccb, &r->c, r->scb, &r->s, r->opt),
                   0);
  nghttp2_settings_entry iv[] = {
      {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, stream_window},
  };
  assert_int_equal(
      nghttp2_submit_settings(r->pair.client, NGHTTP2_FLAG_NONE, iv, 2), 0);
  nghttp2_settings_entry siv[] = {
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 100},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, stream_window},
  };
  assert_int_equal(
      nghttp2_submit_settings(r->pair.server, NGHTTP2_FLAG_NONE, siv, 2), 0);
  /* The connection is up before the call starts. */
  assert_int_equal(h2pair_pump(&r->pair), 0);
  assert_int_equal(sluice__sendq_init(&r->sq, 0), 0);
}

static void rig_free(rig *r) {
  h2pair_free(&r->pair);
  cside_free(&r->c);
  sside_free(&r->s);
  sluice__sendq_destroy(&r->sq);
  nghttp2_session_callbacks_del(r->ccb);
  nghttp2_session_callbacks_del(r->scb);
  nghttp2_option_del(r->opt);
}

static void push_blob(sluice__sendq *q, const char *name, uint32_t n,
                      const void *data, size_t len, sluice_compression comp) {
  Unit__Blob b = UNIT__BLOB__INIT;
  b.name = (char *)name;
  b.n = n;
  b.data.data = (uint8_t *)data;
  b.data.len = len;
  uint8_t *out;
  size_t out_len;
  assert_int_equal(sluice__msg_pack(&b.base, comp, 0, &out, &out_len, NULL), 0);
  int deferred;
  assert_int_equal(sluice__sendq_push(q, out, out_len, 0, &deferred), 0);
}

/* Submits the request, as sluice's client does, with md as custom
 * metadata and the send queue as its body (NULL: a body that never comes). */
static void submit_request(rig *r, const char *path, const sluice_metadata *md,
                           sluice__sendq *body, uint64_t timeout_ns) {
  sluice__nvs h;
  sluice__nvs_init(&h);
  sluice__nvs_add_str(&h, ":method", "POST");
  sluice__nvs_add_str(&h, ":scheme", "http");
  sluice__nvs_add_str(&h, ":path", path);
  sluice__nvs_add_str(&h, ":authority", "unit.test:50051");
  char tmo[SLUICE__TIMEOUT_MAX];
  if (timeout_ns) {
    sluice__timeout_encode(timeout_ns, tmo);
    sluice__nvs_add_str(&h, "grpc-timeout", tmo);
  }
  sluice__nvs_add_str(&h, "te", "trailers");
  sluice__nvs_add_str(&h, "content-type", "application/grpc");
  sluice__nvs_add_str(&h, "user-agent", "sluice-unit/1");
  sluice__nvs_add_str(&h, "grpc-encoding", "gzip");
  sluice__nvs_add_str(&h, "grpc-accept-encoding", SLUICE__ACCEPT_ENCODING);
  sluice__nvs_add_md(&h, md);
  assert_false(sluice__nvs_failed(&h));
  r->c.sq = body;
  nghttp2_data_provider dp;
  dp.source.ptr = &r->c;
  dp.read_callback = c_read;
  r->id = nghttp2_submit_request(r->pair.client, NULL, h.nv, h.n, &dp, &r->c);
  assert_true(r->id > 0);
  sluice__nvs_free(&h);
}

/* The server's answer: headers with initial_md, one message, trailers with
 * the status, trailing_md and a load report. */
static void answer(rig *r, sluice_status_code code, const char *message,
                   const sluice_metadata *initial_md,
                   const sluice_metadata *trailing_md,
                   const Unit__Blob *reply) {
  sside *s = &r->s;
  assert_int_equal(sluice__msg_pack(&reply->base, SLUICE_COMPRESS_NONE, 0,
                                    &s->resp, &s->resp_len, NULL),
                   0);
  static char code_s[4], enc[256];
  snprintf(code_s, sizeof code_s, "%d", code);
  size_t el = sluice__percent_encode(message, strlen(message), enc);
  enc[el] = '\0';
  sluice__nvs_init(&s->trailers);
  s->have_trailers = 1;
  sluice__nvs_add_str(&s->trailers, "grpc-status", code_s);
  sluice__nvs_add_str(&s->trailers, "grpc-message", enc);
  sluice__nvs_add_md(&s->trailers, trailing_md);
  sluice__nvs h;
  sluice__nvs_init(&h);
  sluice__nvs_add_str(&h, ":status", "200");
  sluice__nvs_add_str(&h, "content-type", "application/grpc");
  sluice__nvs_add_str(&h, "grpc-accept-encoding", SLUICE__ACCEPT_ENCODING);
  sluice__nvs_add_md(&h, initial_md);
  nghttp2_data_provider dp;
  dp.source.ptr = s;
  dp.read_callback = s_read;
  assert_int_equal(
      nghttp2_submit_response(r->pair.server, s->stream_id, h.nv, h.n, &dp), 0);
  sluice__nvs_free(&h);
}

static sluice__final client_final(rig *r, sluice_call_kind kind,
                                  uint64_t deadline_ns, uint64_t now_ns,
                                  char *buf, size_t len) {
  assert_true(r->c.closed);
  sluice__final_facts f = {&r->c.rx,    SLUICE_STATUS_OK,
                           NULL,        kind,
                           r->c.n_msgs, sluice__recv_holding(&r->c.recv),
                           deadline_ns};
  return sluice__final_status(&f, r->c.close_error, now_ns, buf, len);
}

static void expect_md(const sluice_metadata *md, size_t i, const char *key,
                      const void *value, size_t len) {
  const char *k;
  const void *v;
  size_t n;
  assert_int_equal(sluice_metadata_get(md, i, &k, &v, &n), 0);
  assert_string_equal(k, key);
  assert_int_equal(n, len);
  assert_memory_equal(v, value, len);
}

/* ---- tests */

static void unary_round_trip(void **state) {
  (void)state;
  rig r;
  rig_init(&r, 65535);
  sluice_metadata *md;
  assert_int_equal(sluice_metadata_new(&md), 0);
  sluice_metadata_add_str(md, "x-request-id", "abc-123");
  static const uint8_t bin[] = {0xab, 0xab, 0xab};
  sluice_metadata_add(md, "x-grpc-test-echo-trailing-bin", bin, 3);
  push_blob(&r.sq, "ping", 42, "payload", 7, SLUICE_COMPRESS_GZIP);
  int deferred;
  sluice__sendq_close(&r.sq, &deferred);
  submit_request(&r, PATH, md, &r.sq, 1500000000ull);
  assert_int_equal(h2pair_pump(&r.pair), 0);

  /* What the server saw. */
  sside *s = &r.s;
  assert_true(s->headers_done);
  assert_int_equal(s->verdict.fault, SLUICE__GRPC_REQ_OK);
  assert_int_equal(sluice__grpc_req_http_status(&s->req), 200);
  assert_string_equal(s->req.path, PATH);
  assert_ptr_equal(s->req.path, s->req.path_buf);
  assert_true(s->req.have_te);
  assert_true(s->req.have_timeout);
  assert_int_equal(s->req.timeout_ns, 1500000000ull);
  assert_int_equal(sluice__grpc_req_deadline(&s->req, 10), 1500000010ull);
  assert_true(s->req.enc_ok);
  assert_int_equal(s->req.enc, SLUICE_COMPRESS_GZIP);
  assert_true(s->req.accept_gzip);
  assert_int_equal(sluice_metadata_count(s->md), 4);
  expect_md(s->md, 0, ":authority", "unit.test:50051", 15);
  expect_md(s->md, 1, "user-agent", "sluice-unit/1", 13);
  expect_md(s->md, 2, "x-request-id", "abc-123", 7);
  expect_md(s->md, 3, "x-grpc-test-echo-trailing-bin", bin, 3);
  assert_true(s->end_stream);
  assert_int_equal(s->n_msgs, 1);
  assert_string_equal(s->msgs[0]->name, "ping");
  assert_int_equal(s->msgs[0]->n, 42);
  assert_memory_equal(s->msgs[0]->data.data, "payload", 7);
  assert_int_equal(s->consumed, s->data_in); /* all given back */
  assert_false(r.c.closed);
  assert_int_equal(r.c.n_blocks, 0);

  /* The answer. */
  sluice_metadata *imd, *tmd;
  assert_int_equal(sluice_metadata_new(&imd), 0);
  assert_int_equal(sluice_metadata_new(&tmd), 0);
  sluice_metadata_add_str(imd, "x-initial", "hello");
  sluice_metadata_add(tmd, "x-grpc-test-echo-trailing-bin", bin, 3);
  sluice__orca load;
  sluice__orca_init(&load);
  load.cpu_utilization = 0.25;
  load.queue_ms = 3;
  uint8_t orca[SLUICE__ORCA_MAX];
  size_t orca_len = sluice__orca_encode(&load, orca, sizeof orca);
  assert_true(orca_len > 0);
  sluice_metadata_add(tmd, "endpoint-load-metrics-bin", orca, orca_len);
  Unit__Blob reply = UNIT__BLOB__INIT;
  reply.name = (char *)"pong";
  reply.n = 43;
  answer(&r, SLUICE_STATUS_OK, "done \xE2\x98\xBA", imd, tmd, &reply);
  assert_int_equal(h2pair_pump(&r.pair), 0);

  /* What the client saw. */
  cside *c = &r.c;
  assert_int_equal(c->n_blocks, 2);
  assert_int_equal(c->kinds[0], SLUICE__GRPC_BLOCK_INITIAL);
  assert_int_equal(c->kinds[1], SLUICE__GRPC_BLOCK_TRAILERS);
  assert_int_equal(c->rx.http_status, 200);
  assert_false(c->rx.bad_content_type);
  assert_true(c->rx.have_grpc_status);
  assert_int_equal(c->rx.grpc_status, SLUICE_STATUS_OK);
  assert_string_equal(c->rx.grpc_message, "done \xE2\x98\xBA");
  assert_int_equal(sluice_metadata_count(c->initial_md), 1);
  expect_md(c->initial_md, 0, "x-initial", "hello", 5);
  assert_int_equal(sluice_metadata_count(c->trailing_md), 2);
  expect_md(c->trailing_md, 0, "x-grpc-test-echo-trailing-bin", bin, 3);
  assert_true(c->load_report);
  size_t vlen = 0;
  const char *v =
      sluice_metadata_find(c->trailing_md, "endpoint-load-metrics-bin", &vlen);
  assert_non_null(v);
  sluice__orca got;
  assert_int_equal(sluice__orca_decode((const uint8_t *)v, vlen, &got), 0);
  assert_true(got.cpu_utilization == 0.25);
  assert_true(got.queue_ms == 3);
  assert_int_equal(c->n_msgs, 1);
  assert_string_equal(c->msgs[0]->name, "pong");
  assert_int_equal(c->msgs[0]->n, 43);
  assert_true(c->closed);
  assert_int_equal(c->close_error, NGHTTP2_NO_ERROR);
  assert_true(s->closed);

  char buf[200];
  sluice__final d = client_final(&r, SLUICE_CALL_UNARY, 0, 0, buf, sizeof buf);
  assert_int_equal(d.action, SLUICE__FINAL_COMPLETE);
  assert_int_equal(d.code, SLUICE_STATUS_OK);
  assert_string_equal(d.text, "done \xE2\x98\xBA");

  sluice_metadata_del(md);
  sluice_metadata_del(imd);
  sluice_metadata_del(tmd);
  rig_free(&r);
}

static void trailers_only_error(void **state) {
  (void)state;
  rig r;
  rig_init(&r, 65535);
  /* The request body never comes: the server answers from the headers. */
  submit_request(&r, "/unit.Svc/Nope", NULL, NULL, 0);
  assert_int_equal(h2pair_pump(&r.pair), 0);
  assert_true(r.s.headers_done);
  assert_false(r.s.end_stream);
  assert_string_equal(r.s.req.path, "/unit.Svc/Nope");

  sluice__nvs h;
  sluice__nvs_init(&h);
  sluice__nvs_add_str(&h, ":status", "200");
  sluice__nvs_add_str(&h, "content-type", "application/grpc");
  sluice__nvs_add_str(&h, "grpc-status", "12");
  sluice__nvs_add_str(&h, "grpc-message", "unknown method /unit.Svc/Nope");
  sluice__nvs_add_str(&h, "x-why", "not registered");
  assert_int_equal(
      nghttp2_submit_response(r.pair.server, r.s.stream_id, h.nv, h.n, NULL),
      0);
  sluice__nvs_free(&h);
  assert_int_equal(h2pair_pump(&r.pair), 0);

  /* One block, ending the stream: the trailers (and no initial
   * metadata). */
  assert_int_equal(r.c.n_blocks, 1);
  assert_int_equal(r.c.kinds[0], SLUICE__GRPC_BLOCK_TRAILERS);
  assert_null(r.c.initial_md);
  assert_int_equal(sluice_metadata_count(r.c.trailing_md), 1);
  expect_md(r.c.trailing_md, 0, "x-why", "not registered", 14);
  assert_false(r.c.load_report);
  /* The client was still sending: the server's RST_STREAM(NO_ERROR) closed
   * the stream. */
  assert_true(r.c.closed);
  assert_int_equal(r.c.close_error, NGHTTP2_NO_ERROR);
  char buf[200];
  sluice__final d = client_final(&r, SLUICE_CALL_UNARY, 0, 0, buf, sizeof buf);
  assert_int_equal(d.action, SLUICE__FINAL_COMPLETE);
  assert_int_equal(d.code, SLUICE_STATUS_UNIMPLEMENTED);
  assert_string_equal(d.text, "unknown method /unit.Svc/Nope");
  rig_free(&r);
}

static void not_a_grpc_peer(void **state) {
  (void)state;
  rig r;
  rig_init(&r, 65535);
  submit_request(&r, PATH, NULL, NULL, 0);
  assert_int_equal(h2pair_pump(&r.pair), 0);
  /* A proxy's error page: HTTP 503, text/html, a body, no grpc-status. */
  static const char page[] = "<html>busy</html>";
  r.s.resp = malloc(sizeof page - 1);
  memcpy(r.s.resp, page, sizeof page - 1);
  r.s.resp_len = sizeof page - 1;
  sluice__nvs h;
  sluice__nvs_init(&h);
  sluice__nvs_add_str(&h, ":status", "503");
  sluice__nvs_add_str(&h, "content-type", "text/html");
  nghttp2_data_provider dp;
  dp.source.ptr = &r.s;
  dp.read_callback = s_read;
  assert_int_equal(
      nghttp2_submit_response(r.pair.server, r.s.stream_id, h.nv, h.n, &dp), 0);
  sluice__nvs_free(&h);
  /* The client does not read the page as gRPC (its deframer would refuse
   * the '<' as a flag byte): this test is about the headers. */
  r.c.raw = 1;
  assert_int_equal(h2pair_pump(&r.pair), 0);
  assert_int_equal(r.c.raw_bytes, sizeof page - 1);
  assert_int_equal(r.c.rx.http_status, 503);
  assert_true(r.c.rx.bad_content_type);
  assert_false(r.c.rx.have_grpc_status);
  assert_true(r.c.closed);
  char buf[200];
  sluice__final d = client_final(&r, SLUICE_CALL_UNARY, 0, 0, buf, sizeof buf);
  assert_int_equal(d.code, SLUICE_STATUS_UNAVAILABLE);
  assert_string_equal(d.text, "peer answered HTTP status 503 without "
                              "grpc-status (not a gRPC server?)");
  rig_free(&r);
}

static void refused_before_processing(void **state) {
  (void)state;
  rig r;
  rig_init(&r, 65535);
  sluice__sendq_retain(&r.sq); /* a unary request may be replayed */
  push_blob(&r.sq, "once", 1, "x", 1, SLUICE_COMPRESS_NONE);
  int deferred;
  sluice__sendq_close(&r.sq, &deferred);
  submit_request(&r, PATH, NULL, &r.sq, 0);
  assert_int_equal(h2pair_pump(&r.pair), 0);
  assert_true(r.s.began);
  nghttp2_submit_rst_stream(r.pair.server, NGHTTP2_FLAG_NONE, r.s.stream_id,
                            NGHTTP2_REFUSED_STREAM);
  assert_int_equal(h2pair_pump(&r.pair), 0);
  assert_true(r.c.closed);
  assert_int_equal(r.c.close_error, NGHTTP2_REFUSED_STREAM);
  assert_int_equal(r.c.n_blocks, 0);
  char buf[200];
  sluice__final d = client_final(&r, SLUICE_CALL_UNARY, 0, 0, buf, sizeof buf);
  assert_int_equal(d.action, SLUICE__FINAL_RETRY);
  assert_int_equal(d.code, SLUICE_STATUS_UNAVAILABLE);
  assert_string_equal(d.text,
                      "stream reset by peer (HTTP/2 error REFUSED_STREAM)");
  /* The caller's part of a retry: the request can be rewound whole. */
  assert_int_equal(sluice__sendq_queued(&r.sq), 0);
  assert_int_equal(sluice__sendq_rewind(&r.sq), 0);
  assert_true(sluice__sendq_queued(&r.sq) > 5);
  rig_free(&r);
}

static void goaway_refuses_unprocessed(void **state) {
  (void)state;
  rig r;
  rig_init(&r, 65535);
  /* The request leaves the client ... */
  submit_request(&r, PATH, NULL, NULL, 0);
  const uint8_t *out;
  ssize_t n = nghttp2_session_mem_send(r.pair.client, &out);
  assert_true(n > 0);
  uint8_t *in_flight = malloc((size_t)n);
  memcpy(in_flight, out, (size_t)n);
  /* ... while the server, which has seen no stream, goes away: the GOAWAY
   * (last-stream-id 0) crosses it on the wire. */
  assert_int_equal(nghttp2_submit_goaway(r.pair.server, NGHTTP2_FLAG_NONE, 0,
                                         NGHTTP2_NO_ERROR,
                                         (const uint8_t *)"shutdown", 8),
                   0);
  assert_true(h2pair_pump_s2c(&r.pair) > 0);
  /* nghttp2 closes the client's stream above last-stream-id with
   * REFUSED_STREAM: not processed, retried transparently. */
  assert_true(r.c.closed);
  assert_int_equal(r.c.close_error, NGHTTP2_REFUSED_STREAM);
  char buf[200];
  sluice__final d = client_final(&r, SLUICE_CALL_UNARY, 0, 0, buf, sizeof buf);
  assert_int_equal(d.action, SLUICE__FINAL_RETRY);
  assert_int_equal(d.code, SLUICE_STATUS_UNAVAILABLE);
  /* The server then ignores the stream. */
  assert_int_equal(
      nghttp2_session_mem_recv(r.pair.server, in_flight, (size_t)n), n);
  free(in_flight);
  assert_int_equal(h2pair_pump(&r.pair), 0);
  assert_false(r.s.began);
  rig_free(&r);
}

static void reset_after_headers(void **state) {
  (void)state;
  rig r;
  rig_init(&r, 65535);
  submit_request(&r, PATH, NULL, NULL, 2000000000ull);
  assert_int_equal(h2pair_pump(&r.pair), 0);
  /* Response headers (no END_STREAM), then the server's deadline fires:
   * RST_STREAM(CANCEL). */
  sluice__nvs h;
  sluice__nvs_init(&h);
  sluice__nvs_add_str(&h, ":status", "200");
  sluice__nvs_add_str(&h, "content-type", "application/grpc");
  assert_int_equal(nghttp2_submit_headers(r.pair.server, NGHTTP2_FLAG_NONE,
                                          r.s.stream_id, NULL, h.nv, h.n, NULL),
                   0);
  sluice__nvs_free(&h);
  assert_int_equal(h2pair_pump(&r.pair), 0);
  assert_int_equal(r.c.n_blocks, 1);
  assert_int_equal(r.c.kinds[0], SLUICE__GRPC_BLOCK_INITIAL);
  nghttp2_submit_rst_stream(r.pair.server, NGHTTP2_FLAG_NONE, r.s.stream_id,
                            NGHTTP2_CANCEL);
  assert_int_equal(h2pair_pump(&r.pair), 0);
  assert_true(r.c.closed);
  assert_int_equal(r.c.close_error, NGHTTP2_CANCEL);
  char buf[200];
  const uint64_t dl = 5000000000ull;
  /* Near the client's deadline: the server's timer fired first. */
  sluice__final d =
      client_final(&r, SLUICE_CALL_UNARY, dl, dl - 1000, buf, sizeof buf);
  assert_int_equal(d.code, SLUICE_STATUS_DEADLINE_EXCEEDED);
  assert_string_equal(d.text, "deadline exceeded (cancelled by the server)");
  /* Long before it: a cancel; and never a retry once headers came. */
  d = client_final(&r, SLUICE_CALL_UNARY, dl, 0, buf, sizeof buf);
  assert_int_equal(d.action, SLUICE__FINAL_COMPLETE);
  assert_int_equal(d.code, SLUICE_STATUS_CANCELLED);
  assert_string_equal(d.text, "stream reset by peer (HTTP/2 error CANCEL)");
  rig_free(&r);
}

/* A client-streaming call pushing ~2 MB at a server that holds what it
 * gets until the client is stuck on flow control, then delivers it all:
 * at no point does the server hold more than one stream window plus one
 * message, and every message arrives, in order. */
static void paused_server_is_bounded(void **state) {
  (void)state;
  const uint32_t window = 65535;
  enum { N = 100, SIZE = 20000 };
  rig r;
  rig_init(&r, window);
  static uint8_t data[SIZE];
  for (size_t i = 0; i < SIZE; i++)
    data[i] = (uint8_t)(i * 13);
  for (int i = 0; i < N; i++)
    push_blob(&r.sq, "chunk", (uint32_t)i, data, SIZE, SLUICE_COMPRESS_NONE);
  int deferred;
  sluice__sendq_close(&r.sq, &deferred);
  submit_request(&r, PATH, NULL, &r.sq, 0);
  size_t framed = 0;
  {
    Unit__Blob b = UNIT__BLOB__INIT;
    b.name = (char *)"chunk";
    b.n = N - 1;
    b.data.data = data;
    b.data.len = SIZE;
    framed = 5 + protobuf_c_message_get_packed_size(&b.base);
  }
  r.s.start_paused = 1;
  int stalls = 0;
  size_t worst = 0;
  for (;;) {
    assert_int_equal(h2pair_pump(&r.pair), 0);
    sside *s = &r.s;
    size_t holding = s->recv.held + s->recv.deframer.filled;
    if (holding > worst)
      worst = holding;
    assert_true(holding <= window + framed);
    /* The client never got more on the wire than the window allows. */
    assert_true(s->data_in - s->consumed <= window);
    if (s->end_stream && !sluice__recv_holding(&s->recv))
      break;
    /* Stuck: deliver what is held, give the window back, hold again. */
    stalls++;
    assert_true(stalls < 1000);
    s->recv.paused = 0;
    size_t consume = 0;
    assert_int_equal(sluice__recv_drain(&s->recv, &consume), 0);
    if (consume) {
      nghttp2_session_consume(r.pair.server, s->stream_id, consume);
      s->consumed += consume;
    }
    s->recv.paused = 1;
  }
  assert_true(stalls >= (int)(N * framed / window) - 1);
  assert_true(worst > window / 2); /* it did fill up */
  assert_int_equal(r.s.n_msgs, N);
  for (int i = 0; i < N; i++) {
    assert_int_equal(r.s.msgs[i]->n, (uint32_t)i);
    assert_int_equal(r.s.msgs[i]->data.len, SIZE);
    assert_memory_equal(r.s.msgs[i]->data.data, data, SIZE);
  }
  assert_int_equal(r.s.consumed, r.s.data_in);

  /* The one response and OK. */
  Unit__Blob reply = UNIT__BLOB__INIT;
  reply.n = N;
  answer(&r, SLUICE_STATUS_OK, "", NULL, NULL, &reply);
  assert_int_equal(h2pair_pump(&r.pair), 0);
  char buf[200];
  sluice__final d =
      client_final(&r, SLUICE_CALL_CLIENT_STREAMING, 0, 0, buf, sizeof buf);
  assert_int_equal(d.action, SLUICE__FINAL_COMPLETE);
  assert_int_equal(d.code, SLUICE_STATUS_OK);
  assert_string_equal(d.text, "");
  assert_int_equal(r.c.n_msgs, 1);
  assert_int_equal(r.c.msgs[0]->n, N);
  rig_free(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(unary_round_trip),
      cmocka_unit_test(trailers_only_error),
      cmocka_unit_test(not_a_grpc_peer),
      cmocka_unit_test(refused_before_processing),
      cmocka_unit_test(goaway_refuses_unprocessed),
      cmocka_unit_test(reset_after_headers),
      cmocka_unit_test(paused_server_is_bounded),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
