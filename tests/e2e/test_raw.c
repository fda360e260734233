/* End-to-end tests of raw calls (sluice/buf.h): serialized messages in and
 * out without protobuf decoding, over real loopback sockets.
 *
 *  - a raw client against the ordinary (protobuf) e2e server, small and
 *    large messages (a large one is handed over in its reassembly buffer);
 *  - a raw server (sluice_server_add_raw_service) that echoes the request
 *    buffer back, to a typed protobuf client;
 *  - a forwarding middle tier: a raw server whose handler passes each
 *    request on with a raw client call and answers with the buffer that
 *    comes back, statuses passed through;
 *  - raw streaming both ways (bidi echo, client streaming, server
 *    streaming) between a raw server and raw and protobuf clients;
 *  - limits and ownership: sizes over the maxima on both sides, buffers
 *    returned to the caller on every error (ASan/LSan see a double free or
 *    a leak), compression both ways, API misuse.
 */
#include <stdlib.h>
#include <string.h>

#include "e2e_common.h"
#include "stream.sluice.h"

/* ---- a synchronous view of one raw client call */

#define R_MAX 256

typedef struct rstate {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  sluice_buf *msgs[R_MAX];
  int n;          /* messages received */
  int compressed; /* messages that arrived compressed */
  int done;       /* on_done count: must end at 1 */
  sluice_status_code code;
  char message[256];
} rstate;

static void rs_init(rstate *s) {
  memset(s, 0, sizeof *s);
  pthread_mutex_init(&s->mu, NULL);
  e2e_cond_init(&s->cv);
}

static void rs_destroy(rstate *s) {
  for (int i = 0; i < s->n && i < R_MAX; i++)
    sluice_buf_free(s->msgs[i]);
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->cv);
}

static void r_msg(sluice_call *call, sluice_buf *m, void *ud) {
  rstate *s = ud;
  pthread_mutex_lock(&s->mu);
  if (s->n < R_MAX)
    s->msgs[s->n] = m;
  else
    sluice_buf_free(m);
  s->n++;
  s->compressed += sluice_call_last_message_compressed(call) != 0;
  pthread_mutex_unlock(&s->mu);
}

static void r_done(sluice_call *call, const sluice_status *st, void *ud) {
  (void)call;
  rstate *s = ud;
  pthread_mutex_lock(&s->mu);
  s->done++;
  s->code = st->code;
  snprintf(s->message, sizeof s->message, "%s", st->message ? st->message : "");
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

static const sluice_call_raw_handlers RH = {NULL, r_msg, NULL, r_done};

static int rs_wait_done(rstate *s) {
  uint64_t end = e2e_now_ms() + E2E_HANG_MS;
  pthread_mutex_lock(&s->mu);
  while (!s->done && e2e_now_ms() < end) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += 20 * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&s->cv, &s->mu, &ts);
  }
  int done = s->done;
  pthread_mutex_unlock(&s->mu);
  return done;
}

/* ---- messages */

static const sluice_method_desc *const ECHO = &e2e__echo__sluice_methods[0];
static const sluice_method_desc *const BIDI =
    &streamt__streams__sluice_methods[0];
static const sluice_method_desc *const UPLOAD =
    &streamt__streams__sluice_methods[1];
static const sluice_method_desc *const DOWNLOAD =
    &streamt__streams__sluice_methods[2];

/* An e2e.EchoMsg with n bytes of pattern, serialized; status: a code the
 * e2e server answers with instead of echoing (0: echo). */
static sluice_buf *echo_buf(size_t n, uint32_t status) {
  uint8_t *p = malloc(n ? n : 1);
  assert_non_null(p);
  e2e_fill(p, n);
  E2e__EchoMsg m = E2E__ECHO_MSG__INIT;
  m.payload.data = p;
  m.payload.len = n;
  m.status_code = status;
  m.text = (char *)"raw";
  sluice_buf *b = NULL;
  assert_int_equal(sluice_buf_pack(&m.base, &b), 0);
  assert_int_equal(sluice_buf_len(b),
                   protobuf_c_message_get_packed_size(&m.base));
  free(p);
  return b;
}

/* Checks that b is an e2e.EchoMsg carrying n bytes of pattern. */
static void check_echo(sluice_buf *b, size_t n) {
  E2e__EchoMsg *m =
      e2e__echo_msg__unpack(NULL, sluice_buf_len(b), sluice_buf_data(b));
  assert_non_null(m);
  assert_int_equal(m->payload.len, n);
  assert_true(e2e_check(m->payload.data, n));
  e2e__echo_msg__free_unpacked(m, NULL);
}

static sluice_buf *chunk_buf(uint64_t seq, size_t n) {
  uint8_t *p = malloc(n ? n : 1);
  assert_non_null(p);
  e2e_fill(p, n);
  Streamt__Chunk c = STREAMT__CHUNK__INIT;
  c.seq = seq;
  c.payload.data = p;
  c.payload.len = n;
  sluice_buf *b = NULL;
  assert_int_equal(sluice_buf_pack(&c.base, &b), 0);
  free(p);
  return b;
}

/* One raw unary call of ECHO-like method m on ch sending req (handed over);
 * fills s. */
static void raw_unary(sluice_channel *ch, const sluice_method_desc *m,
                      const sluice_call_opts *o, sluice_buf *req, rstate *s) {
  sluice_call *call = NULL;
  assert_int_equal(sluice_call_start_raw(ch, m, o, &RH, s, &call), 0);
  assert_int_equal(sluice_call_send_buf(call, req), 0);
  assert_int_equal(sluice_call_close_send(call), 0);
  sluice_call_release(call);
  assert_int_equal(rs_wait_done(s), 1);
}

/* ---- a raw server: e2e.Echo echoes the request buffer, streamt.Streams
 * echoes (Bidi), counts (Upload) and streams (Download) raw */

typedef struct rsrv {
  sluice_server *srv;
  int port;
  atomic_int api_errors; /* unexpected return codes in handlers */
  atomic_int compressed; /* requests that arrived compressed */
  atomic_int done;       /* on_done of streaming calls */
} rsrv;

typedef struct rstream {
  rsrv *rs;
  uint64_t messages, bytes;
} rstream;

static void echo_dispatch(sluice_server_call *call, sluice_buf *req, void *ud) {
  rsrv *rs = ud;
  if (sluice_server_call_message_compressed(call)) {
    atomic_fetch_add(&rs->compressed, 1);
    sluice_server_call_set_compression(call, SLUICE_COMPRESS_GZIP);
  }
  /* The protobuf set_handlers is not for raw calls. */
  static const sluice_server_call_handlers none = {0};
  if (sluice_server_call_set_handlers(call, &none, NULL) !=
      SLUICE_ERR_INVALID_ARG)
    atomic_fetch_add(&rs->api_errors, 1);
  if (sluice_server_call_finish_buf(call, SLUICE_STATUS_OK, NULL, req) != 0) {
    atomic_fetch_add(&rs->api_errors, 1);
    sluice_buf_free(req);
  }
}

static void bidi_msg(sluice_server_call *call, sluice_buf *m, void *ud) {
  rstream *st = ud;
  st->messages++;
  st->bytes += sluice_buf_len(m);
  int rv = sluice_server_call_send_buf(call, m);
  if (rv != 0) {
    /* The tests stay below the send buffer: FULL would be a bug here. */
    atomic_fetch_add(&st->rs->api_errors, 1);
    sluice_buf_free(m);
  }
}

static void upload_msg(sluice_server_call *call, sluice_buf *m, void *ud) {
  (void)call;
  rstream *st = ud;
  st->messages++;
  st->bytes += sluice_buf_len(m);
  sluice_buf_free(m);
}

static void s_half_close(sluice_server_call *call, void *ud) {
  rstream *st = ud;
  sluice_buf *resp = NULL;
  if (sluice_server_call_method(call) == UPLOAD) {
    Streamt__Sum sum = STREAMT__SUM__INIT;
    sum.messages = st->messages;
    sum.bytes = st->bytes;
    if (sluice_buf_pack(&sum.base, &resp) != 0)
      atomic_fetch_add(&st->rs->api_errors, 1);
  }
  if (sluice_server_call_finish_buf(call, SLUICE_STATUS_OK, NULL, resp) != 0)
    atomic_fetch_add(&st->rs->api_errors, 1);
}

static void s_done(sluice_server_call *call, int cancelled, void *ud) {
  (void)call;
  (void)cancelled;
  rstream *st = ud;
  atomic_fetch_add(&st->rs->done, 1);
  free(st);
}

static const sluice_server_call_raw_handlers SRH = {bidi_msg, s_half_close,
                                                    NULL, s_done};
static const sluice_server_call_raw_handlers SRH_UP = {upload_msg, s_half_close,
                                                       NULL, s_done};

static void streams_dispatch(sluice_server_call *call, sluice_buf *req,
                             void *ud) {
  rsrv *rs = ud;
  const sluice_method_desc *m = sluice_server_call_method(call);
  if (m == DOWNLOAD) {
    Streamt__DownloadReq *d = streamt__download_req__unpack(
        NULL, sluice_buf_len(req), sluice_buf_data(req));
    sluice_buf_free(req);
    if (!d) {
      sluice_server_call_finish(call, SLUICE_STATUS_INVALID_ARGUMENT, "bad",
                                NULL);
      return;
    }
    for (uint32_t i = 0; i < d->count; i++)
      if (sluice_server_call_send_buf(call, chunk_buf(i, d->size)) != 0)
        atomic_fetch_add(&rs->api_errors, 1);
    streamt__download_req__free_unpacked(d, NULL);
    if (sluice_server_call_finish_buf(call, SLUICE_STATUS_OK, NULL, NULL) != 0)
      atomic_fetch_add(&rs->api_errors, 1);
    return;
  }
  if (req != NULL)
    atomic_fetch_add(&rs->api_errors, 1); /* streaming requests: none */
  rstream *st = calloc(1, sizeof *st);
  st->rs = rs;
  if (sluice_server_call_set_raw_handlers(call, m == UPLOAD ? &SRH_UP : &SRH,
                                          st) != 0)
    atomic_fetch_add(&rs->api_errors, 1);
}

static rsrv *rsrv_start(uint32_t max_request, uint32_t max_response) {
  rsrv *rs = calloc(1, sizeof *rs);
  sluice_server_opts *o = NULL;
  assert_int_equal(sluice_server_opts_new(&o), 0);
  sluice_server_opts_set_threads(o, 2);
  if (max_request)
    sluice_server_opts_set_max_request_size(o, max_request);
  if (max_response)
    sluice_server_opts_set_max_response_size(o, max_response);
  assert_int_equal(sluice_server_new(&rs->srv, o), 0);
  sluice_server_opts_del(o);
  assert_int_equal(sluice_server_add_raw_service(
                       rs->srv, &e2e__echo__sluice_service, echo_dispatch, rs),
                   0);
  assert_int_equal(
      sluice_server_add_raw_service(rs->srv, &streamt__streams__sluice_service,
                                    streams_dispatch, rs),
      0);
  /* The same paths again: refused. */
  assert_int_equal(sluice_server_add_raw_service(
                       rs->srv, &e2e__echo__sluice_service, echo_dispatch, rs),
                   SLUICE_ERR_DUPLICATE);
  assert_int_equal(sluice_server_listen(rs->srv, "127.0.0.1:0", &rs->port), 0);
  assert_int_equal(sluice_server_start(rs->srv), 0);
  return rs;
}

static void rsrv_free(rsrv *rs) {
  assert_int_equal(sluice_server_shutdown(rs->srv, 0), 0);
  sluice_server_del(rs->srv);
  assert_int_equal(atomic_load(&rs->api_errors), 0);
  free(rs);
}

/* ---- tests */

/* A raw client against the protobuf e2e server: the bytes it sends are an
 * e2e.EchoMsg, the buffer it gets back one too. 1 and 3 MiB arrive in many
 * DATA frames (handed over from reassembly), the small ones in one
 * (copied). */
static void test_raw_client(void **state) {
  (void)state;
  e2e_server *s = e2e_server_start(NULL, NULL);
  sluice_channel *ch = e2e_channel(s, NULL);
  static const size_t sizes[] = {0, 100, 16000, 1u << 20, 3u << 20};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    rstate r;
    rs_init(&r);
    raw_unary(ch, ECHO, NULL, echo_buf(sizes[i], 0), &r);
    assert_int_equal(r.code, SLUICE_STATUS_OK);
    assert_int_equal(r.n, 1);
    check_echo(r.msgs[0], sizes[i]);
    rs_destroy(&r);
  }
  /* A status from the server, no message. */
  rstate r;
  rs_init(&r);
  raw_unary(ch, ECHO, NULL, echo_buf(10, SLUICE_STATUS_NOT_FOUND), &r);
  assert_int_equal(r.code, SLUICE_STATUS_NOT_FOUND);
  assert_int_equal(r.n, 0);
  rs_destroy(&r);
  sluice_channel_del(ch);
  e2e_server_free(s);
}

/* One typed (protobuf) e2e.Echo/Echo call with n bytes of pattern, which
 * must come back whole. */
static void typed_echo(sluice_channel *ch, size_t n) {
  uint8_t *p = malloc(n + 1);
  e2e_fill(p, n);
  E2e__EchoMsg req = E2E__ECHO_MSG__INIT;
  req.payload.data = p;
  req.payload.len = n;
  e2e_wait w;
  e2e_wait_init(&w);
  assert_int_equal(e2e__echo__echo__async(ch, &req, NULL, e2e_wait_cb, &w), 0);
  assert_int_equal(e2e_wait_for(&w, 1, E2E_HANG_MS), 1);
  assert_int_equal(w.code, SLUICE_STATUS_OK);
  assert_int_equal(w.payload_len, n);
  assert_true(w.payload_ok);
  e2e_wait_destroy(&w);
  free(p);
}

/* A typed protobuf client against a raw server that echoes the request's
 * bytes. */
static void test_raw_server(void **state) {
  (void)state;
  rsrv *rs = rsrv_start(0, 0);
  sluice_channel *ch = e2e_channel_port(rs->port, NULL);
  typed_echo(ch, 0);
  typed_echo(ch, 5000);
  typed_echo(ch, 2u << 20);
  sluice_channel_del(ch);
  rsrv_free(rs);
}

/* ---- a forwarding middle tier: raw server -> raw client call */

typedef struct fwd {
  sluice_server_call *call;
  sluice_buf *resp;
} fwd;

static atomic_int g_fwd_errors;

static void fwd_msg(sluice_call *c, sluice_buf *m, void *ud) {
  (void)c;
  fwd *f = ud;
  sluice_buf_free(f->resp); /* a unary method has one; keep the last */
  f->resp = m;
}

static void fwd_done(sluice_call *c, const sluice_status *st, void *ud) {
  (void)c;
  fwd *f = ud;
  int rv =
      st->code == SLUICE_STATUS_OK
          ? sluice_server_call_finish_buf(f->call, SLUICE_STATUS_OK, NULL,
                                          f->resp)
          : sluice_server_call_finish(f->call, st->code, st->message, NULL);
  if (rv != 0) {
    atomic_fetch_add(&g_fwd_errors, 1);
    sluice_buf_free(f->resp);
  } else if (st->code != SLUICE_STATUS_OK) {
    sluice_buf_free(f->resp);
  }
  free(f);
}

static const sluice_call_raw_handlers FH = {NULL, fwd_msg, NULL, fwd_done};

static void proxy_dispatch(sluice_server_call *call, sluice_buf *req,
                           void *ud) {
  sluice_channel *down = ud;
  fwd *f = calloc(1, sizeof *f);
  f->call = call;
  sluice_call *c = NULL;
  if (sluice_call_start_raw(down, sluice_server_call_method(call), NULL, &FH, f,
                            &c) != 0) {
    atomic_fetch_add(&g_fwd_errors, 1);
    sluice_buf_free(req);
    sluice_server_call_finish(call, SLUICE_STATUS_INTERNAL, "start", NULL);
    free(f);
    return;
  }
  if (sluice_call_send_buf(c, req) != 0) {
    atomic_fetch_add(&g_fwd_errors, 1);
    sluice_buf_free(req);
  }
  sluice_call_close_send(c);
  sluice_call_release(c);
}

static void test_forwarding_tier(void **state) {
  (void)state;
  atomic_store(&g_fwd_errors, 0);
  e2e_server *back = e2e_server_start(NULL, NULL);
  sluice_channel *down = e2e_channel(back, NULL);
  sluice_server_opts *o = NULL;
  assert_int_equal(sluice_server_opts_new(&o), 0);
  sluice_server *mid = NULL;
  assert_int_equal(sluice_server_new(&mid, o), 0);
  sluice_server_opts_del(o);
  assert_int_equal(sluice_server_add_raw_service(
                       mid, &e2e__echo__sluice_service, proxy_dispatch, down),
                   0);
  int port = 0;
  assert_int_equal(sluice_server_listen(mid, "127.0.0.1:0", &port), 0);
  assert_int_equal(sluice_server_start(mid), 0);
  sluice_channel *ch = e2e_channel_port(port, NULL);

  typed_echo(ch, 7);
  typed_echo(ch, 70000);
  typed_echo(ch, 3u << 20);
  /* The backend's status comes through the tier. */
  E2e__EchoMsg req = E2E__ECHO_MSG__INIT;
  req.status_code = SLUICE_STATUS_PERMISSION_DENIED;
  req.status_message = (char *)"no entry";
  e2e_wait w;
  e2e_wait_init(&w);
  assert_int_equal(e2e__echo__echo__async(ch, &req, NULL, e2e_wait_cb, &w), 0);
  assert_int_equal(e2e_wait_for(&w, 1, E2E_HANG_MS), 1);
  assert_int_equal(w.code, SLUICE_STATUS_PERMISSION_DENIED);
  assert_string_equal(w.message, "no entry");
  e2e_wait_destroy(&w);

  sluice_channel_del(ch);
  assert_int_equal(sluice_server_shutdown(mid, 1000), 0);
  sluice_server_del(mid);
  sluice_channel_del(down);
  e2e_server_free(back);
  assert_int_equal(atomic_load(&g_fwd_errors), 0);
}

/* Raw streaming: a raw bidi client against the raw server's Bidi (echo),
 * then Upload and Download. */
static void test_raw_streaming(void **state) {
  (void)state;
  rsrv *rs = rsrv_start(0, 0);
  sluice_channel *ch = e2e_channel_port(rs->port, NULL);

  enum { N = 200, SIZE = 1000 };
  rstate r;
  rs_init(&r);
  sluice_call *call = NULL;
  assert_int_equal(sluice_call_start_raw(ch, BIDI, NULL, &RH, &r, &call), 0);
  for (uint64_t i = 0; i < N; i++) {
    sluice_buf *b = chunk_buf(i, SIZE);
    assert_int_equal(sluice_call_send_buf(call, b), 0);
  }
  assert_int_equal(sluice_call_close_send(call), 0);
  /* After the half-close: refused, and the buffer is still the caller's. */
  sluice_buf *late = chunk_buf(N, 10);
  assert_int_equal(sluice_call_send_buf(call, late), SLUICE_ERR_STATE);
  sluice_buf_free(late);
  sluice_call_release(call);
  assert_int_equal(rs_wait_done(&r), 1);
  assert_int_equal(r.code, SLUICE_STATUS_OK);
  assert_int_equal(r.n, N);
  for (int i = 0; i < N; i++) {
    Streamt__Chunk *c = streamt__chunk__unpack(NULL, sluice_buf_len(r.msgs[i]),
                                               sluice_buf_data(r.msgs[i]));
    assert_non_null(c);
    assert_int_equal(c->seq, (uint64_t)i);
    assert_int_equal(c->payload.len, SIZE);
    assert_true(e2e_check(c->payload.data, SIZE));
    streamt__chunk__free_unpacked(c, NULL);
  }
  rs_destroy(&r);

  /* Upload: 50 chunks of 64 KiB; the Sum comes back as bytes. */
  rs_init(&r);
  assert_int_equal(sluice_call_start_raw(ch, UPLOAD, NULL, &RH, &r, &call), 0);
  size_t sent = 0;
  for (uint64_t i = 0; i < 50;) {
    sluice_buf *b = chunk_buf(i, 65536);
    size_t len = sluice_buf_len(b);
    int rv = sluice_call_send_buf(call, b);
    if (rv == SLUICE_ERR_FULL) { /* still ours: try again shortly */
      sluice_buf_free(b);
      e2e_sleep_ms(2);
      continue;
    }
    assert_int_equal(rv, 0);
    sent += len;
    i++;
  }
  assert_int_equal(sluice_call_close_send(call), 0);
  sluice_call_release(call);
  assert_int_equal(rs_wait_done(&r), 1);
  assert_int_equal(r.code, SLUICE_STATUS_OK);
  assert_int_equal(r.n, 1);
  Streamt__Sum *sum = streamt__sum__unpack(NULL, sluice_buf_len(r.msgs[0]),
                                           sluice_buf_data(r.msgs[0]));
  assert_non_null(sum);
  assert_int_equal(sum->messages, 50);
  assert_int_equal(sum->bytes, sent);
  streamt__sum__free_unpacked(sum, NULL);
  rs_destroy(&r);

  /* Download through the protobuf streaming API's request, raw response. */
  rs_init(&r);
  Streamt__DownloadReq d = STREAMT__DOWNLOAD_REQ__INIT;
  d.count = 20;
  d.size = 3000;
  sluice_buf *db = NULL;
  assert_int_equal(sluice_buf_pack(&d.base, &db), 0);
  raw_unary(ch, DOWNLOAD, NULL, db, &r);
  assert_int_equal(r.code, SLUICE_STATUS_OK);
  assert_int_equal(r.n, 20);
  rs_destroy(&r);

  sluice_channel_del(ch);
  uint64_t end = e2e_now_ms() + E2E_HANG_MS;
  while (atomic_load(&rs->done) < 2 && e2e_now_ms() < end)
    e2e_sleep_ms(5);
  assert_int_equal(atomic_load(&rs->done), 2);
  rsrv_free(rs);
}

/* Size limits on both sides, with the buffers' ownership on each error. */
static void test_raw_limits(void **state) {
  (void)state;
  rsrv *rs = rsrv_start(4096, 2048);
  sluice_channel *ch = e2e_channel_port(rs->port, NULL);

  /* The client's own limit: refused at send, the call fails, the buffer
   * stays with the caller. */
  sluice_call_opts o;
  sluice_call_opts_init(&o);
  o.max_request_size = 1024;
  rstate r;
  rs_init(&r);
  sluice_call *call = NULL;
  assert_int_equal(sluice_call_start_raw(ch, ECHO, &o, &RH, &r, &call), 0);
  sluice_buf *big = echo_buf(2000, 0);
  assert_int_equal(sluice_call_send_buf(call, big), SLUICE_ERR_TOO_LARGE);
  sluice_buf_free(big);
  sluice_call_release(call);
  assert_int_equal(rs_wait_done(&r), 1);
  assert_int_equal(r.code, SLUICE_STATUS_RESOURCE_EXHAUSTED);
  assert_non_null(strstr(r.message, "larger than max"));
  rs_destroy(&r);

  /* The server's request limit (4096). */
  rs_init(&r);
  raw_unary(ch, ECHO, NULL, echo_buf(5000, 0), &r);
  assert_int_equal(r.code, SLUICE_STATUS_RESOURCE_EXHAUSTED);
  assert_int_equal(r.n, 0);
  rs_destroy(&r);

  /* The server's response limit (2048): the echo of 3000 bytes is refused
   * by finish_buf, which still takes the buffer. */
  rs_init(&r);
  raw_unary(ch, ECHO, NULL, echo_buf(3000, 0), &r);
  assert_int_equal(r.code, SLUICE_STATUS_RESOURCE_EXHAUSTED);
  assert_non_null(strstr(r.message, "response message larger than max"));
  rs_destroy(&r);

  /* The client's response limit. */
  sluice_call_opts_init(&o);
  o.max_response_size = 500;
  rs_init(&r);
  raw_unary(ch, ECHO, &o, echo_buf(1000, 0), &r);
  assert_int_equal(r.code, SLUICE_STATUS_RESOURCE_EXHAUSTED);
  assert_int_equal(r.n, 0);
  rs_destroy(&r);

  /* Within every limit. */
  rs_init(&r);
  raw_unary(ch, ECHO, NULL, echo_buf(1500, 0), &r);
  assert_int_equal(r.code, SLUICE_STATUS_OK);
  assert_int_equal(r.n, 1);
  check_echo(r.msgs[0], 1500);
  rs_destroy(&r);

  sluice_channel_del(ch);
  rsrv_free(rs);
}

/* Compressed both ways: the raw sides see plain bytes. */
static void test_raw_compression(void **state) {
  (void)state;
  rsrv *rs = rsrv_start(0, 0);
  sluice_channel *ch = e2e_channel_port(rs->port, NULL);
  sluice_call_opts o;
  sluice_call_opts_init(&o);
  o.compression = SLUICE_COMPRESS_GZIP;
  rstate r;
  rs_init(&r);
  raw_unary(ch, ECHO, &o, echo_buf(300000, 0), &r);
  assert_int_equal(r.code, SLUICE_STATUS_OK);
  assert_int_equal(r.n, 1);
  assert_int_equal(r.compressed, 1);
  check_echo(r.msgs[0], 300000);
  rs_destroy(&r);
  assert_int_equal(atomic_load(&rs->compressed), 1);

  /* Bytes that do not compress: the compressed message spans many DATA
   * frames both ways, so each side inflates it out of the reassembly block
   * it took over (which must outlive the inflating). */
  sluice_buf *noise = NULL;
  assert_int_equal(sluice_buf_new(200000, &noise), 0);
  uint64_t seed = 0x9e3779b97f4a7c15u;
  for (size_t i = 0; i < 200000; i++) {
    seed ^= seed << 13;
    seed ^= seed >> 7;
    seed ^= seed << 17;
    sluice_buf_data(noise)[i] = (uint8_t)seed;
  }
  uint8_t *want = malloc(200000);
  memcpy(want, sluice_buf_data(noise), 200000);
  rs_init(&r);
  raw_unary(ch, ECHO, &o, noise, &r);
  assert_int_equal(r.code, SLUICE_STATUS_OK);
  assert_int_equal(r.n, 1);
  assert_int_equal(r.compressed, 1);
  assert_int_equal(sluice_buf_len(r.msgs[0]), 200000);
  assert_memory_equal(sluice_buf_data(r.msgs[0]), want, 200000);
  rs_destroy(&r);
  free(want);
  assert_int_equal(atomic_load(&rs->compressed), 2);
  sluice_channel_del(ch);
  rsrv_free(rs);
}

static void test_api_misuse(void **state) {
  (void)state;
  sluice_buf *b = NULL;
  assert_int_equal(sluice_buf_new(1, NULL), SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice_buf_new((size_t)UINT32_MAX + 1, &b),
                   SLUICE_ERR_INVALID_ARG);
  assert_null(b);
  assert_int_equal(sluice_buf_pack(NULL, &b), SLUICE_ERR_INVALID_ARG);
  assert_null(sluice_buf_data(NULL));
  assert_int_equal(sluice_buf_len(NULL), 0);
  assert_int_equal(sluice_buf_truncate(NULL, 0), SLUICE_ERR_INVALID_ARG);
  sluice_buf_free(NULL);
  assert_int_equal(sluice_buf_new(100, &b), 0);
  assert_int_equal(sluice_buf_len(b), 100);
  memset(sluice_buf_data(b), 0xab, 100);
  assert_int_equal(sluice_buf_truncate(b, 101), SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice_buf_truncate(b, 40), 0);
  assert_int_equal(sluice_buf_len(b), 40);

  sluice_call *call = NULL;
  assert_int_equal(sluice_call_start_raw(NULL, ECHO, NULL, &RH, NULL, &call),
                   SLUICE_ERR_INVALID_ARG);
  sluice_method_desc nopath = *ECHO;
  nopath.path = NULL;
  e2e_server *s = e2e_server_start(NULL, NULL);
  sluice_channel *ch = e2e_channel(s, NULL);
  assert_int_equal(sluice_call_start_raw(ch, &nopath, NULL, &RH, NULL, &call),
                   SLUICE_ERR_INVALID_ARG);
  sluice_call_raw_handlers no_done = RH;
  no_done.on_done = NULL;
  assert_int_equal(sluice_call_start_raw(ch, ECHO, NULL, &no_done, NULL, &call),
                   SLUICE_ERR_INVALID_ARG);
  assert_null(call);
  assert_int_equal(sluice_call_send_buf(NULL, b), SLUICE_ERR_INVALID_ARG);

  /* A method without descriptors: raw only (send() refuses a message). */
  sluice_method_desc bare = {
      ECHO->path, ECHO->name, NULL, NULL, SLUICE_CALL_UNARY, 0, 0, 0, NULL};
  rstate r;
  rs_init(&r);
  assert_int_equal(sluice_call_start_raw(ch, &bare, NULL, &RH, &r, &call), 0);
  E2e__EchoMsg m = E2E__ECHO_MSG__INIT;
  assert_int_equal(sluice_call_send(call, &m.base), SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice_call_send_buf(call, echo_buf(64, 0)), 0);
  /* A unary call takes one message: the second is refused, still ours. */
  assert_int_equal(sluice_call_send_buf(call, b), SLUICE_ERR_STATE);
  assert_int_equal(sluice_call_close_send(call), 0);
  sluice_call_release(call);
  assert_int_equal(rs_wait_done(&r), 1);
  assert_int_equal(r.code, SLUICE_STATUS_OK);
  check_echo(r.msgs[0], 64);
  rs_destroy(&r);
  sluice_buf_free(b);

  sluice_server *srv = NULL;
  sluice_server_opts *so = NULL;
  assert_int_equal(sluice_server_opts_new(&so), 0);
  assert_int_equal(sluice_server_new(&srv, so), 0);
  sluice_server_opts_del(so);
  assert_int_equal(sluice_server_add_raw_service(
                       srv, &e2e__echo__sluice_service, NULL, NULL),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice_server_add_raw_service(
                       NULL, &e2e__echo__sluice_service, echo_dispatch, NULL),
                   SLUICE_ERR_INVALID_ARG);
  sluice_server_del(srv);
  assert_int_equal(
      sluice_server_call_finish_buf(NULL, SLUICE_STATUS_OK, NULL, NULL),
      SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice_server_call_send_buf(NULL, NULL),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice_server_call_set_raw_handlers(NULL, NULL, NULL),
                   SLUICE_ERR_INVALID_ARG);
  sluice_channel_del(ch);
  e2e_server_free(s);
}

int main(void) {
  e2e_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_raw_client),
      cmocka_unit_test(test_raw_server),
      cmocka_unit_test(test_forwarding_tier),
      cmocka_unit_test(test_raw_streaming),
      cmocka_unit_test(test_raw_limits),
      cmocka_unit_test(test_raw_compression),
      cmocka_unit_test(test_api_misuse),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
