/* e2e: streaming calls over loopback — 10,000 messages each way on one bidi
 * call, flow control with a paused reader while the writer pushes 100 MiB
 * (both directions; buffering stays under the documented bound), cancel
 * from either side mid-stream, a peer killed mid-stream (UNAVAILABLE, every
 * callback once), compression per call and per message, a compression bomb.
 * Every wait is bounded; nothing asserts speed. */
#include "e2e_common.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "stream.sluice.h"

/* ---- server side */

typedef struct srv_stats {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done, cancelled; /* on_done count, of which cancelled */
  size_t upload_buffered_max;
  int api_errors; /* server API calls that did not return what they should */
  sluice_server_call *upload_call; /* a paused upload, resumed by the test */
} srv_stats;

static srv_stats g_srv;

static void srv_note_done(int cancelled) {
  pthread_mutex_lock(&g_srv.mu);
  g_srv.done++;
  g_srv.cancelled += cancelled != 0;
  pthread_cond_broadcast(&g_srv.cv);
  pthread_mutex_unlock(&g_srv.mu);
}

static int srv_wait_done(int n) {
  struct timespec ts;
  e2e_abs_ms(&ts, E2E_HANG_MS);
  pthread_mutex_lock(&g_srv.mu);
  while (g_srv.done < n)
    if (pthread_cond_timedwait(&g_srv.cv, &g_srv.mu, &ts) != 0)
      break;
  int d = g_srv.done;
  pthread_mutex_unlock(&g_srv.mu);
  return d;
}

/* Bidi echo. A send refused with FULL pauses receiving until on_send_ready,
 * so the server never buffers more than its send queue bound. */
typedef struct bidi_state {
  sluice_server_call *call;
  Streamt__Chunk held; /* refused echo (payload malloc'd) */
  int holding;
  int half_closed;
  int finished;
} bidi_state;

static void bidi_finish(bidi_state *b) {
  if (!b->finished) {
    b->finished = 1;
    sluice_server_call_finish(b->call, SLUICE_STATUS_OK, NULL, NULL);
  }
}

static void bidi_msg(sluice_server_call *call, const ProtobufCMessage *m,
                     void *ud) {
  bidi_state *b = ud;
  const Streamt__Chunk *c = (const Streamt__Chunk *)m;
  if (b->finished)
    return;
  if (c->seq == 999999) { /* the test asks the server to fail mid-stream */
    b->finished = 1;
    sluice_server_call_finish(call, SLUICE_STATUS_ABORTED, "server gave up",
                              NULL);
    return;
  }
  int rv = streamt__streams__bidi__send_response(call, c);
  if (rv == SLUICE_ERR_FULL) {
    streamt__chunk__init(&b->held);
    b->held.seq = c->seq;
    b->held.payload.len = c->payload.len;
    b->held.payload.data = malloc(c->payload.len ? c->payload.len : 1);
    memcpy(b->held.payload.data, c->payload.data, c->payload.len);
    b->holding = 1;
    sluice_server_call_set_recv_paused(call, 1);
  }
}

static void bidi_ready(sluice_server_call *call, void *ud) {
  bidi_state *b = ud;
  if (!b->holding)
    return;
  if (streamt__streams__bidi__send_response(call, &b->held) == SLUICE_ERR_FULL)
    return;
  free(b->held.payload.data);
  b->holding = 0;
  sluice_server_call_set_recv_paused(call, 0);
  if (b->half_closed)
    bidi_finish(b);
}

static void bidi_half_close(sluice_server_call *call, void *ud) {
  (void)call;
  bidi_state *b = ud;
  b->half_closed = 1;
  if (!b->holding)
    bidi_finish(b);
}

static void bidi_done(sluice_server_call *call, int cancelled, void *ud) {
  bidi_state *b = ud;
  if (b->holding)
    free(b->held.payload.data);
  if (!b->finished) /* finish is owed even when cancelled */
    sluice_server_call_finish(call, SLUICE_STATUS_CANCELLED, NULL, NULL);
  free(b);
  srv_note_done(cancelled);
}

static void on_bidi(sluice_server_call *call, void *ud) {
  (void)ud;
  bidi_state *b = calloc(1, sizeof *b);
  b->call = call;
  sluice_server_call_handlers h = {bidi_msg, bidi_half_close, bidi_ready,
                                   bidi_done};
  assert_int_equal(sluice_server_call_set_handlers(call, &h, b), 0);
}

/* Upload: counts; "x-paused" metadata starts it paused (the test resumes). */
typedef struct upload_state {
  uint64_t messages, bytes;
  int finished;
} upload_state;

static void upload_msg(sluice_server_call *call, const ProtobufCMessage *m,
                       void *ud) {
  (void)call;
  upload_state *u = ud;
  u->messages++;
  u->bytes += ((const Streamt__Chunk *)m)->payload.len;
}

static void upload_half_close(sluice_server_call *call, void *ud) {
  upload_state *u = ud;
  Streamt__Sum sum = STREAMT__SUM__INIT;
  sum.messages = u->messages;
  sum.bytes = u->bytes;
  pthread_mutex_lock(&g_srv.mu);
  g_srv.upload_buffered_max = sluice_server_call_recv_buffered_max(call);
  pthread_mutex_unlock(&g_srv.mu);
  u->finished = 1;
  streamt__streams__upload__reply(call, &sum);
}

static void upload_done(sluice_server_call *call, int cancelled, void *ud) {
  upload_state *u = ud;
  pthread_mutex_lock(&g_srv.mu);
  if (g_srv.upload_call == call)
    g_srv.upload_call = NULL;
  g_srv.upload_buffered_max = sluice_server_call_recv_buffered_max(call);
  pthread_mutex_unlock(&g_srv.mu);
  if (!u->finished)
    sluice_server_call_finish(call, SLUICE_STATUS_CANCELLED, NULL, NULL);
  free(u);
  srv_note_done(cancelled);
}

static void on_upload(sluice_server_call *call, void *ud) {
  (void)ud;
  upload_state *u = calloc(1, sizeof *u);
  sluice_server_call_handlers h = {upload_msg, upload_half_close, NULL,
                                   upload_done};
  if (sluice_metadata_find(sluice_server_call_metadata(call), "x-paused",
                           NULL)) {
    sluice_server_call_set_recv_paused(call, 1);
    pthread_mutex_lock(&g_srv.mu);
    g_srv.upload_call = call;
    pthread_cond_broadcast(&g_srv.cv);
    pthread_mutex_unlock(&g_srv.mu);
  }
  assert_int_equal(sluice_server_call_set_handlers(call, &h, u), 0);
  /* A client-streaming method has one response: streaming sends and an OK
   * finish without it are refused. */
  Streamt__Chunk c = STREAMT__CHUNK__INIT;
  int bad = sluice_server_call_send(call, &c.base) != SLUICE_ERR_INVALID_ARG;
  Streamt__Sum sum = STREAMT__SUM__INIT;
  bad += sluice_server_call_send(call, &sum.base) != SLUICE_ERR_STATE;
  bad += sluice_server_call_finish(call, SLUICE_STATUS_OK, NULL, NULL) !=
         SLUICE_ERR_INVALID_ARG;
  pthread_mutex_lock(&g_srv.mu);
  g_srv.api_errors += bad;
  pthread_mutex_unlock(&g_srv.mu);
}

/* Download: count chunks of size bytes, as fast as flow control allows. */
typedef struct download_state {
  sluice_server_call *call;
  uint32_t next, count, size;
  int compressed;
  uint8_t *payload;
  int finished;
} download_state;

static void download_pump(download_state *d) {
  while (d->next < d->count) {
    Streamt__Chunk c = STREAMT__CHUNK__INIT;
    c.seq = d->next;
    c.payload.data = d->payload;
    c.payload.len = d->size;
    /* Every other message opts out of compression when compressing. */
    unsigned flags =
        d->compressed && (d->next & 1) ? SLUICE_SEND_NO_COMPRESS : 0;
    int rv = sluice_server_call_send_ex(d->call, &c.base, flags);
    if (rv == SLUICE_ERR_FULL)
      return; /* on_send_ready continues */
    if (rv != 0)
      return; /* cancelled: on_done follows */
    d->next++;
  }
  if (!d->finished) {
    d->finished = 1;
    sluice_server_call_finish(d->call, SLUICE_STATUS_OK, NULL, NULL);
  }
}

static void download_ready(sluice_server_call *call, void *ud) {
  (void)call;
  download_pump(ud);
}

static void download_done(sluice_server_call *call, int cancelled, void *ud) {
  download_state *d = ud;
  if (!d->finished)
    sluice_server_call_finish(call, SLUICE_STATUS_CANCELLED, NULL, NULL);
  free(d->payload);
  free(d);
  srv_note_done(cancelled);
}

static void on_download(sluice_server_call *call,
                        const Streamt__DownloadReq *req, void *ud) {
  (void)ud;
  download_state *d = calloc(1, sizeof *d);
  d->call = call;
  d->count = req->count;
  d->size = req->size;
  d->compressed = req->compressed;
  d->payload = malloc(req->size ? req->size : 1);
  e2e_fill(d->payload, req->size);
  if (req->compressed)
    sluice_server_call_set_compression(call, SLUICE_COMPRESS_GZIP);
  sluice_server_call_handlers h = {NULL, NULL, download_ready, download_done};
  assert_int_equal(sluice_server_call_set_handlers(call, &h, d), 0);
  /* Misuse is refused with a status, not a crash. */
  Streamt__Sum wrong = STREAMT__SUM__INIT;
  int bad = sluice_server_call_set_handlers(call, &h, d) != SLUICE_ERR_STATE;
  bad += sluice_server_call_send(call, &wrong.base) != SLUICE_ERR_INVALID_ARG;
  bad += sluice_server_call_send(call, NULL) != SLUICE_ERR_INVALID_ARG;
  bad += sluice_server_call_set_handlers(NULL, &h, d) != SLUICE_ERR_INVALID_ARG;
  bad += sluice_server_call_set_compression(call, (sluice_compression)7) !=
         SLUICE_ERR_INVALID_ARG;
  /* Metadata against the rules has its own error; NULL stays INVALID_ARG. */
  bad += sluice_server_call_add_initial_metadata(call, "Bad Key", "v", 1) !=
         SLUICE_ERR_BAD_METADATA;
  bad += sluice_server_call_add_trailing_metadata(call, "x-nl", "\n", 1) !=
         SLUICE_ERR_BAD_METADATA;
  bad += sluice_server_call_add_trailing_metadata(call, "grpc-x", "v", 1) !=
         SLUICE_ERR_BAD_METADATA;
  bad += sluice_server_call_add_initial_metadata(NULL, "k", "v", 1) !=
         SLUICE_ERR_INVALID_ARG;
  bad += sluice_server_call_add_initial_metadata(call, NULL, "v", 1) !=
         SLUICE_ERR_INVALID_ARG;
  pthread_mutex_lock(&g_srv.mu);
  g_srv.api_errors += bad;
  pthread_mutex_unlock(&g_srv.mu);
  download_pump(d);
}

static sluice_server *start_server(int *port) {
  sluice_server_opts *o = NULL;
  assert_int_equal(sluice_server_opts_new(&o), 0);
  sluice_server_opts_set_threads(o, 2);
  sluice_server *srv = NULL;
  assert_int_equal(sluice_server_new(&srv, o), 0);
  sluice_server_opts_del(o);
  Streamt__Streams_SluiceHandlers h = {on_bidi, on_upload, on_download};
  assert_int_equal(streamt__streams__sluice_register(srv, &h, NULL), 0);
  assert_int_equal(sluice_server_listen(srv, "127.0.0.1:0", port), 0);
  assert_int_equal(sluice_server_start(srv), 0);
  return srv;
}

/* ---- client side: a synchronous view of one call */

typedef struct cstate {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  uint64_t received, bytes, next_seq, compressed;
  int out_of_order, bad_payload;
  int ready; /* on_send_ready count */
  int done;  /* on_done count: must end at 1 */
  sluice_status_code code;
  char message[256];
  int pause_on_headers;
  uint64_t cancel_at; /* c_msg cancels the call at this message (0: no) */
  Streamt__Sum sum;
  int got_sum;
} cstate;

static void cs_init(cstate *s) {
  memset(s, 0, sizeof *s);
  pthread_mutex_init(&s->mu, NULL);
  e2e_cond_init(&s->cv);
}

static void cs_destroy(cstate *s) {
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->cv);
}

static void c_md(sluice_call *call, const sluice_metadata *md, void *ud) {
  (void)md;
  cstate *s = ud;
  if (s->pause_on_headers)
    sluice_call_set_recv_paused(call, 1);
}

static void c_msg(sluice_call *call, const ProtobufCMessage *m, void *ud) {
  cstate *s = ud;
  pthread_mutex_lock(&s->mu);
  if (m->descriptor == &streamt__sum__descriptor) {
    const Streamt__Sum *sum = (const Streamt__Sum *)m;
    s->sum.messages = sum->messages;
    s->sum.bytes = sum->bytes;
    s->got_sum++;
  } else {
    const Streamt__Chunk *c = (const Streamt__Chunk *)m;
    if (c->seq != s->next_seq)
      s->out_of_order++;
    s->next_seq = c->seq + 1;
    s->bytes += c->payload.len;
    if (!e2e_check(c->payload.data, c->payload.len))
      s->bad_payload++;
    s->compressed += sluice_call_last_message_compressed(call) != 0;
  }
  s->received++;
  int cancel = s->cancel_at && s->received == s->cancel_at;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
  if (cancel)
    sluice_call_cancel(call, "cancelled in on_message");
}

static void c_ready(sluice_call *call, void *ud) {
  (void)call;
  cstate *s = ud;
  pthread_mutex_lock(&s->mu);
  s->ready++;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

static void c_done(sluice_call *call, const sluice_status *st, void *ud) {
  (void)call;
  cstate *s = ud;
  pthread_mutex_lock(&s->mu);
  s->done++;
  s->code = st->code;
  snprintf(s->message, sizeof s->message, "%s", st->message);
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

static const sluice_call_handlers CH = {c_md, c_msg, c_ready, c_done};

/* The calls here go through the generic API on the generated method table,
 * so that one set of handlers (CH: c_msg tells the response types apart)
 * serves every method; test_typed.c drives the typed stubs. */
static const sluice_method_desc *const BIDI =
    &streamt__streams__sluice_methods[0];
static const sluice_method_desc *const UPLOAD =
    &streamt__streams__sluice_methods[1];
static const sluice_method_desc *const DOWNLOAD =
    &streamt__streams__sluice_methods[2];

/* Waits until pred(s) holds or ms pass; returns pred's value. */
static int cs_wait(cstate *s, int (*pred)(cstate *), unsigned ms) {
  struct timespec ts;
  e2e_abs_ms(&ts, ms);
  pthread_mutex_lock(&s->mu);
  int ok;
  while (!(ok = pred(s)))
    if (pthread_cond_timedwait(&s->cv, &s->mu, &ts) != 0)
      break;
  pthread_mutex_unlock(&s->mu);
  return ok;
}

static int is_done(cstate *s) { return s->done > 0; }

/* Sends one chunk, waiting (bounded) for on_send_ready when the queue is
 * full. Returns the last sluice_call_send result. */
static int send_chunk(sluice_call *call, cstate *s, uint64_t seq,
                      const uint8_t *payload, size_t len, unsigned flags) {
  Streamt__Chunk c = STREAMT__CHUNK__INIT;
  c.seq = seq;
  c.payload.data = (uint8_t *)payload;
  c.payload.len = len;
  for (;;) {
    pthread_mutex_lock(&s->mu);
    int ready_before = s->ready;
    pthread_mutex_unlock(&s->mu);
    int rv = sluice_call_send_ex(call, &c.base, flags);
    if (rv != SLUICE_ERR_FULL)
      return rv;
    struct timespec ts;
    e2e_abs_ms(&ts, E2E_HANG_MS);
    pthread_mutex_lock(&s->mu);
    while (s->ready == ready_before && !s->done)
      if (pthread_cond_timedwait(&s->cv, &s->mu, &ts) != 0)
        break;
    int stuck = s->ready == ready_before && !s->done;
    pthread_mutex_unlock(&s->mu);
    if (stuck)
      return SLUICE_ERR_FULL;
  }
}

typedef struct fixture {
  sluice_server *srv;
  int port;
  sluice_channel *ch;
} fixture;

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  memset(&g_srv.done, 0, sizeof g_srv - offsetof(srv_stats, done));
  f->srv = start_server(&f->port);
  char target[64];
  snprintf(target, sizeof target, "ipv4:127.0.0.1:%d", f->port);
  assert_int_equal(sluice_channel_new(&f->ch, target, NULL), 0);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  assert_int_equal(g_srv.api_errors, 0);
  sluice_channel_del(f->ch);
  sluice_server_del(f->srv);
  free(f);
  return 0;
}

/* ---- tests */

enum { N_BIDI = 10000 };

static int bidi_all_back(cstate *s) { return s->received == N_BIDI || s->done; }

static void test_bidi_10000_each_way(void **state) {
  fixture *f = *state;
  cstate s;
  cs_init(&s);
  sluice_call *call = NULL;
  assert_int_equal(sluice_call_start(f->ch, BIDI, NULL, &CH, &s, &call), 0);
  uint8_t payload[100];
  e2e_fill(payload, sizeof payload);
  for (uint64_t i = 0; i < N_BIDI; i++)
    assert_int_equal(send_chunk(call, &s, i, payload, sizeof payload, 0), 0);
  assert_int_equal(sluice_call_close_send(call), 0);
  assert_int_equal(sluice_call_close_send(call), SLUICE_ERR_STATE);
  assert_true(cs_wait(&s, is_done, E2E_HANG_MS));
  assert_int_equal(s.code, SLUICE_STATUS_OK);
  assert_int_equal(s.received, N_BIDI);
  assert_int_equal(s.out_of_order, 0);
  assert_int_equal(s.bad_payload, 0);
  assert_int_equal(bidi_all_back(&s), 1);
  assert_int_equal(srv_wait_done(1), 1);
  assert_int_equal(g_srv.cancelled, 0);
  /* After on_done: the handle is still valid, sending is refused. */
  Streamt__Chunk c = STREAMT__CHUNK__INIT;
  assert_int_equal(sluice_call_send(call, &c.base), SLUICE_ERR_STATE);
  sluice_call_release(call);
  e2e_sleep_ms(50);
  assert_int_equal(s.done, 1);
  cs_destroy(&s);
}

enum { BIG_MSG = 64 * 1024, BIG_COUNT = 1600 }; /* 100 MiB */

static int upload_waiting(void) {
  struct timespec ts;
  e2e_abs_ms(&ts, E2E_HANG_MS);
  pthread_mutex_lock(&g_srv.mu);
  while (!g_srv.upload_call)
    if (pthread_cond_timedwait(&g_srv.cv, &g_srv.mu, &ts) != 0)
      break;
  int ok = g_srv.upload_call != NULL;
  pthread_mutex_unlock(&g_srv.mu);
  return ok;
}

/* The server pauses its reader; the client pushes 100 MiB. The client's
 * queue stalls at its bound, the server holds at most one stream window
 * plus one message; after resuming everything arrives. */
static void test_paused_server_reader_100mib(void **state) {
  fixture *f = *state;
  cstate s;
  cs_init(&s);
  sluice_metadata *md = NULL;
  sluice_metadata_new(&md);
  sluice_metadata_add_str(md, "x-paused", "1");
  sluice_call_opts o;
  sluice_call_opts_init(&o);
  o.metadata = md;
  sluice_call *call = NULL;
  assert_int_equal(sluice_call_start(f->ch, UPLOAD, &o, &CH, &s, &call), 0);
  sluice_metadata_del(md);
  uint8_t *payload = malloc(BIG_MSG);
  e2e_fill(payload, BIG_MSG);
  Streamt__Chunk c = STREAMT__CHUNK__INIT;
  c.payload.data = payload;
  c.payload.len = BIG_MSG;
  uint64_t sent = 0;
  size_t queued_max = 0;
  int stalled = 0;
  /* Write until the writer is refused and no on_send_ready comes for
   * 300 ms: the reader's pause has stalled it. */
  while (sent < BIG_COUNT && !stalled) {
    pthread_mutex_lock(&s.mu);
    int ready_before = s.ready;
    pthread_mutex_unlock(&s.mu);
    int rv = sluice_call_send(call, &c.base);
    size_t q = sluice_call_send_queued(call);
    if (q > queued_max)
      queued_max = q;
    if (rv == 0) {
      sent++;
      continue;
    }
    assert_int_equal(rv, SLUICE_ERR_FULL);
    struct timespec ts;
    e2e_abs_ms(&ts, 300);
    pthread_mutex_lock(&s.mu);
    while (s.ready == ready_before)
      if (pthread_cond_timedwait(&s.cv, &s.mu, &ts) != 0)
        break;
    stalled = s.ready == ready_before;
    pthread_mutex_unlock(&s.mu);
  }
  assert_true(stalled);
  assert_true(sent < BIG_COUNT);
  assert_true(queued_max <= SLUICE_DEFAULT_SEND_BUFFER + BIG_MSG + 64);
  assert_true(upload_waiting());
  pthread_mutex_lock(&g_srv.mu);
  assert_int_equal(sluice_server_call_set_recv_paused(g_srv.upload_call, 0), 0);
  pthread_mutex_unlock(&g_srv.mu);
  for (; sent < BIG_COUNT; sent++) {
    c.seq = sent;
    assert_int_equal(send_chunk(call, &s, sent, payload, BIG_MSG, 0), 0);
    size_t q = sluice_call_send_queued(call);
    if (q > queued_max)
      queued_max = q;
  }
  assert_int_equal(sluice_call_close_send(call), 0);
  assert_true(cs_wait(&s, is_done, 60000));
  assert_int_equal(s.code, SLUICE_STATUS_OK);
  assert_int_equal(s.got_sum, 1);
  assert_int_equal(s.sum.messages, BIG_COUNT);
  assert_int_equal(s.sum.bytes, (uint64_t)BIG_COUNT * BIG_MSG);
  assert_true(queued_max <= SLUICE_DEFAULT_SEND_BUFFER + BIG_MSG + 64);
  assert_int_equal(srv_wait_done(1), 1);
  pthread_mutex_lock(&g_srv.mu);
  size_t held = g_srv.upload_buffered_max;
  pthread_mutex_unlock(&g_srv.mu);
  print_message("client queue max %zu, server held max %zu bytes\n", queued_max,
                held);
  assert_true(held > 0);
  assert_true(held <= SLUICE_STREAM_WINDOW + BIG_MSG + 5);
  sluice_call_release(call);
  free(payload);
  cs_destroy(&s);
}

static int got_any(cstate *s) { return s->received > 0 || s->done; }
static int got_all_download(cstate *s) {
  return s->received == BIG_COUNT || s->done;
}

/* The client pauses (from its initial-metadata callback); the server pushes
 * 100 MiB. Nothing is delivered while paused and the client holds at most
 * one stream window plus one message. */
static void test_paused_client_reader_100mib(void **state) {
  fixture *f = *state;
  cstate s;
  cs_init(&s);
  s.pause_on_headers = 1;
  Streamt__DownloadReq req = STREAMT__DOWNLOAD_REQ__INIT;
  req.count = BIG_COUNT;
  req.size = BIG_MSG;
  sluice_call *call = NULL;
  assert_int_equal(
      sluice_call_start_msg(f->ch, DOWNLOAD, &req.base, NULL, &CH, &s, &call),
      0);
  assert_false(cs_wait(&s, got_any, 500));
  size_t held = sluice_call_recv_buffered_max(call);
  print_message("client held while paused: %zu bytes\n", held);
  assert_true(held > 0);
  assert_true(held <= SLUICE_STREAM_WINDOW + BIG_MSG + 5);
  assert_int_equal(sluice_call_set_recv_paused(call, 0), 0);
  assert_true(cs_wait(&s, is_done, 60000));
  assert_int_equal(s.code, SLUICE_STATUS_OK);
  assert_int_equal(s.received, BIG_COUNT);
  assert_int_equal(got_all_download(&s), 1);
  assert_int_equal(s.out_of_order, 0);
  assert_int_equal(s.bad_payload, 0);
  assert_true(sluice_call_recv_buffered_max(call) <=
              SLUICE_STREAM_WINDOW + BIG_MSG + 5);
  assert_int_equal(srv_wait_done(1), 1);
  assert_int_equal(g_srv.cancelled, 0);
  sluice_call_release(call);
  cs_destroy(&s);
}

/* The call ended OK while its reader was paused: on_done waits for the
 * held messages to be taken, but a channel destroyed meanwhile completes
 * it (CANCELLED) before sluice_channel_del returns. Before, such a call
 * was on no connection and in no queue: its on_done never came and the
 * channel waited for it forever (found by fuzz_client_conn). */
static void test_held_call_ends_with_its_channel(void **state) {
  fixture *f = *state;
  cstate s;
  cs_init(&s);
  s.pause_on_headers = 1;
  Streamt__DownloadReq req = STREAMT__DOWNLOAD_REQ__INIT;
  req.count = 3;
  req.size = 10;
  sluice_call *call = NULL;
  assert_int_equal(
      sluice_call_start_msg(f->ch, DOWNLOAD, &req.base, NULL, &CH, &s, &call),
      0);
  assert_int_equal(srv_wait_done(1), 1);
  assert_int_equal(g_srv.cancelled, 0);
  /* Time for the trailers to arrive; the call is held, not done. */
  assert_false(cs_wait(&s, is_done, 300));
  assert_int_equal(s.received, 0);
  /* Released first (the call goes on): a handle is not used after its
   * channel is gone. */
  sluice_call_release(call);
  sluice_channel_del(f->ch);
  f->ch = NULL;
  assert_int_equal(s.done, 1);
  assert_int_equal(s.code, SLUICE_STATUS_CANCELLED);
  cs_destroy(&s);
}

static int got_five(cstate *s) { return s->received >= 5 || s->done; }

/* Two server streams on one connection: an endless one (its handler
 * refills the send queue whenever there is room, so it always has data)
 * and a short one started after it. The server sends responses whole, in
 * order (RFC 9218, transport/h2session.c), except those of streaming
 * methods, which are incremental and share the connection: the short
 * stream must finish while the endless one still streams. */
static void test_streams_share_the_connection(void **state) {
  fixture *f = *state;
  cstate big, small;
  cs_init(&big);
  cs_init(&small);
  Streamt__DownloadReq req = STREAMT__DOWNLOAD_REQ__INIT;
  req.count = 4000000; /* 64 GB: ends only by the cancel below */
  req.size = 16 * 1024;
  sluice_call *bc = NULL, *sc = NULL;
  assert_int_equal(
      sluice_call_start_msg(f->ch, DOWNLOAD, &req.base, NULL, &CH, &big, &bc),
      0);
  assert_true(cs_wait(&big, got_any, E2E_HANG_MS));
  req.count = 20;
  assert_int_equal(
      sluice_call_start_msg(f->ch, DOWNLOAD, &req.base, NULL, &CH, &small, &sc),
      0);
  assert_true(cs_wait(&small, is_done, E2E_HANG_MS));
  assert_int_equal(small.code, SLUICE_STATUS_OK);
  assert_int_equal(small.received, 20);
  pthread_mutex_lock(&big.mu);
  int big_done = big.done;
  uint64_t big_received = big.received;
  pthread_mutex_unlock(&big.mu);
  print_message("the endless stream had sent %" PRIu64 " messages\n",
                big_received);
  assert_int_equal(big_done, 0);
  assert_int_equal(sluice_call_cancel(bc, NULL), 0);
  assert_true(cs_wait(&big, is_done, E2E_HANG_MS));
  assert_int_equal(big.code, SLUICE_STATUS_CANCELLED);
  assert_int_equal(big.out_of_order + small.out_of_order, 0);
  assert_int_equal(big.bad_payload + small.bad_payload, 0);
  assert_int_equal(srv_wait_done(2), 2);
  assert_int_equal(g_srv.cancelled, 1);
  sluice_call_release(bc);
  sluice_call_release(sc);
  cs_destroy(&big);
  cs_destroy(&small);
}

/* A stream of requests that always has data (a 16 MiB send queue a thread
 * keeps topped up) and a Download started beside it on the same
 * connection. The client sends each request whole, in order (RFC 9218,
 * transport/h2session.c), but a stream of requests gives up its turn every
 * SLUICE__STREAM_QUANTUM bytes: the Download's request must go out, and
 * its answers arrive, while the upload still runs. On loopback the upload
 * also loses its turn whenever it waits for window (the server is slower
 * than the socket), so this passes without the quantum too; unit.stream
 * checks the quantum itself. Over a slow link the socket, not the window,
 * is the limit, and only the quantum gives the other requests a turn. */
typedef struct {
  sluice_call *call;
  cstate *s; /* the call's, for send_chunk's wait on on_send_ready */
  atomic_int stop;
  uint64_t sent;
  int last_rv;
} pusher;

static void *push_until_stopped(void *arg) {
  pusher *p = arg;
  uint8_t *payload = malloc(BIG_MSG);
  e2e_fill(payload, BIG_MSG);
  /* Bounded: at most ~6 GB or the stop flag. A full queue waits for
   * on_send_ready, at half of 16 MiB: the queue never runs dry. */
  while (!atomic_load(&p->stop) && p->sent < 100000) {
    p->last_rv = send_chunk(p->call, p->s, p->sent, payload, BIG_MSG, 0);
    if (p->last_rv != 0)
      break;
    p->sent++;
  }
  free(payload);
  return NULL;
}

static void test_request_streams_take_turns(void **state) {
  fixture *f = *state;
  cstate up, down;
  cs_init(&up);
  cs_init(&down);
  sluice_call_opts opts;
  sluice_call_opts_init(&opts);
  opts.send_buffer = 16u << 20;
  sluice_call *uc = NULL, *dc = NULL;
  assert_int_equal(sluice_call_start(f->ch, UPLOAD, &opts, &CH, &up, &uc), 0);
  pusher p = {.call = uc, .s = &up};
  atomic_init(&p.stop, 0);
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, push_until_stopped, &p), 0);
  e2e_sleep_ms(100); /* the upload is streaming */
  Streamt__DownloadReq req = STREAMT__DOWNLOAD_REQ__INIT;
  req.count = 20;
  req.size = 1024;
  assert_int_equal(
      sluice_call_start_msg(f->ch, DOWNLOAD, &req.base, NULL, &CH, &down, &dc),
      0);
  int down_ok = cs_wait(&down, is_done, E2E_HANG_MS);
  pthread_mutex_lock(&up.mu);
  int up_done = up.done;
  pthread_mutex_unlock(&up.mu);
  atomic_store(&p.stop, 1);
  pthread_join(th, NULL);
  print_message("requests pushed meanwhile: %" PRIu64 " x %d B\n", p.sent,
                (int)BIG_MSG);
  assert_true(down_ok);
  assert_int_equal(up_done, 0); /* the upload was still running */
  assert_int_equal(p.last_rv, 0);
  assert_int_equal(down.code, SLUICE_STATUS_OK);
  assert_int_equal(down.received, 20);
  /* The upload then ends normally, every message counted. */
  assert_int_equal(sluice_call_close_send(uc), 0);
  assert_true(cs_wait(&up, is_done, 60000));
  assert_int_equal(up.code, SLUICE_STATUS_OK);
  assert_int_equal(up.got_sum, 1);
  assert_int_equal(up.sum.messages, p.sent);
  assert_int_equal(srv_wait_done(2), 2);
  sluice_call_release(uc);
  sluice_call_release(dc);
  cs_destroy(&up);
  cs_destroy(&down);
}

static void test_client_cancels_mid_stream(void **state) {
  fixture *f = *state;
  cstate s;
  cs_init(&s);
  sluice_call *call = NULL;
  assert_int_equal(sluice_call_start(f->ch, BIDI, NULL, &CH, &s, &call), 0);
  uint8_t p[10];
  e2e_fill(p, sizeof p);
  for (int i = 0; i < 10; i++)
    assert_int_equal(send_chunk(call, &s, (uint64_t)i, p, sizeof p, 0), 0);
  assert_true(cs_wait(&s, got_five, E2E_HANG_MS));
  assert_int_equal(sluice_call_cancel(call, "test cancels"), 0);
  assert_int_equal(sluice_call_cancel(call, NULL), 0); /* idempotent */
  assert_true(cs_wait(&s, is_done, E2E_HANG_MS));
  assert_int_equal(s.code, SLUICE_STATUS_CANCELLED);
  assert_string_equal(s.message, "test cancels");
  assert_int_equal(srv_wait_done(1), 1);
  assert_int_equal(g_srv.cancelled, 1);
  Streamt__Chunk c = STREAMT__CHUNK__INIT;
  assert_int_equal(sluice_call_send(call, &c.base), SLUICE_ERR_STATE);
  sluice_call_release(call);
  e2e_sleep_ms(50);
  assert_int_equal(s.done, 1);
  cs_destroy(&s);
}

/* A cancel from inside on_message, while the rest of the response and
 * its OK trailers have already arrived (a short Download: the server
 * queues every chunk and its status at once, so they usually come in the
 * read that delivers the first chunk): on_done must report CANCELLED and
 * no message may follow the cancel. Before the fix the messages after it
 * were dropped but the call completed with the server's OK. */
static void test_client_cancels_in_on_message(void **state) {
  fixture *f = *state;
  for (int round = 0; round < 20; round++) {
    cstate s;
    cs_init(&s);
    s.cancel_at = 1 + (uint64_t)(round % 3);
    Streamt__DownloadReq req = STREAMT__DOWNLOAD_REQ__INIT;
    req.count = 16;
    req.size = 10;
    sluice_call *call = NULL;
    assert_int_equal(
        sluice_call_start_msg(f->ch, DOWNLOAD, &req.base, NULL, &CH, &s, &call),
        0);
    assert_true(cs_wait(&s, is_done, E2E_HANG_MS));
    assert_int_equal(s.code, SLUICE_STATUS_CANCELLED);
    assert_string_equal(s.message, "cancelled in on_message");
    assert_int_equal(s.received, s.cancel_at);
    sluice_call_release(call);
    cs_destroy(&s);
  }
}

static void test_server_fails_mid_stream(void **state) {
  fixture *f = *state;
  cstate s;
  cs_init(&s);
  sluice_call *call = NULL;
  assert_int_equal(sluice_call_start(f->ch, BIDI, NULL, &CH, &s, &call), 0);
  uint8_t p[10];
  e2e_fill(p, sizeof p);
  for (int i = 0; i < 5; i++)
    assert_int_equal(send_chunk(call, &s, (uint64_t)i, p, sizeof p, 0), 0);
  assert_true(cs_wait(&s, got_five, E2E_HANG_MS));
  assert_int_equal(send_chunk(call, &s, 999999, p, sizeof p, 0), 0);
  assert_true(cs_wait(&s, is_done, E2E_HANG_MS));
  assert_int_equal(s.code, SLUICE_STATUS_ABORTED);
  assert_string_equal(s.message, "server gave up");
  assert_int_equal(s.received, 5);
  assert_int_equal(srv_wait_done(1), 1);
  /* The handler's own status, sent: not cancelled, even though not OK. */
  assert_int_equal(g_srv.cancelled, 0);
  sluice_call_release(call);
  cs_destroy(&s);
}

/* Starts a call from a raw client that sends grpc-timeout 200m but never
 * resets the stream (a sluice client's own deadline would race the
 * server's): only the server's deadline timer can end the call. The client
 * grants HTTP/2's default 64 KiB window and reads nothing. Returns the
 * socket, to keep open until the server is done. */
static int raw_timeout_call(int port, const char *path, const char *timeout,
                            const uint8_t *msg, size_t len, int end_stream) {
  int fd = e2e_connect_loopback(port);
  assert_true(fd >= 0);
  uint8_t *bytes;
  size_t n = e2e_raw_call_bytes(path, timeout, msg, len, end_stream, 0, &bytes);
  assert_int_equal(send(fd, bytes, n, MSG_NOSIGNAL), (ssize_t)n);
  free(bytes);
  return fd;
}

static int raw_deadline_call(int port, const char *path, const uint8_t *msg,
                             size_t len, int end_stream) {
  return raw_timeout_call(port, path, "200m", msg, len, end_stream);
}

/* A call whose server-side deadline passes is cancelled for its handler
 * (on_done(cancelled 1)), as when the client resets it: the status went
 * out, but it was the library's DEADLINE_EXCEEDED, not the handler's. */
static void test_server_deadline_is_cancelled(void **state) {
  fixture *f = *state;
  /* Server streaming: the handler sends as flow control allows and cannot
   * finish (64 KiB of window for 1 GB). */
  Streamt__DownloadReq req = STREAMT__DOWNLOAD_REQ__INIT;
  req.count = 1000000;
  req.size = 1024;
  uint8_t msg[32];
  size_t ml = streamt__download_req__pack(&req, msg);
  uint64_t t0 = e2e_now_ms();
  int fd = raw_deadline_call(f->port, "/streamt.Streams/Download", msg, ml, 1);
  assert_int_equal(srv_wait_done(1), 1);
  uint64_t took = e2e_now_ms() - t0;
  assert_int_equal(g_srv.cancelled, 1);
  /* Ended by the 200 ms timer (a lower bound only: it cannot fire early). */
  assert_true(took >= 150);
  close(fd);

  /* Bidi: headers only, the request stream left open; the handler waits
   * for messages that never come. */
  fd = raw_deadline_call(f->port, "/streamt.Streams/Bidi", NULL, 0, 0);
  assert_int_equal(srv_wait_done(2), 2);
  assert_int_equal(g_srv.cancelled, 2);
  close(fd);

  /* Client streaming, one message, stream left open. */
  Streamt__Chunk c = STREAMT__CHUNK__INIT;
  c.seq = 1;
  ml = streamt__chunk__pack(&c, msg);
  fd = raw_deadline_call(f->port, "/streamt.Streams/Upload", msg, ml, 0);
  assert_int_equal(srv_wait_done(3), 3);
  assert_int_equal(g_srv.cancelled, 3);
  close(fd);
}

/* The server times every call's deadline on one timer per loop: deadlines
 * that arrive out of order each end their own call, none before its time
 * (lower bounds only: a loaded machine may be late, never early). */
static void test_server_deadlines_out_of_order(void **state) {
  fixture *f = *state;
  static const char *const timeouts[] = {"600m", "150m", "350m"};
  int fds[3];
  uint64_t t0 = e2e_now_ms();
  for (int i = 0; i < 3; i++)
    fds[i] = raw_timeout_call(f->port, "/streamt.Streams/Bidi", timeouts[i],
                              NULL, 0, 0);
  static const uint64_t at_least[] = {140, 340, 590};
  for (int i = 0; i < 3; i++) {
    assert_int_equal(srv_wait_done(i + 1), i + 1);
    assert_true(e2e_now_ms() - t0 >= at_least[i]);
  }
  assert_int_equal(g_srv.cancelled, 3);
  for (int i = 0; i < 3; i++)
    close(fds[i]);
}

static void test_compression_both_ways(void **state) {
  fixture *f = *state;
  /* Server -> client: every other message compressed. */
  cstate s;
  cs_init(&s);
  Streamt__DownloadReq req = STREAMT__DOWNLOAD_REQ__INIT;
  req.count = 20;
  req.size = 100000;
  req.compressed = 1;
  sluice_call *call = NULL;
  assert_int_equal(
      sluice_call_start_msg(f->ch, DOWNLOAD, &req.base, NULL, &CH, &s, &call),
      0);
  assert_true(cs_wait(&s, is_done, E2E_HANG_MS));
  assert_int_equal(s.code, SLUICE_STATUS_OK);
  assert_int_equal(s.received, 20);
  assert_int_equal(s.compressed, 10);
  assert_int_equal(s.bad_payload, 0);
  sluice_call_release(call);
  cs_destroy(&s);

  /* Client -> server: gzip per call, one message opts out. */
  cs_init(&s);
  sluice_call_opts o;
  sluice_call_opts_init(&o);
  o.compression = SLUICE_COMPRESS_GZIP;
  assert_int_equal(sluice_call_start(f->ch, UPLOAD, &o, &CH, &s, &call), 0);
  uint8_t *p = malloc(200000);
  e2e_fill(p, 200000);
  assert_int_equal(send_chunk(call, &s, 0, p, 200000, 0), 0);
  assert_int_equal(send_chunk(call, &s, 1, p, 1000, SLUICE_SEND_NO_COMPRESS),
                   0);
  assert_int_equal(sluice_call_close_send(call), 0);
  assert_true(cs_wait(&s, is_done, E2E_HANG_MS));
  assert_int_equal(s.code, SLUICE_STATUS_OK);
  assert_int_equal(s.sum.messages, 2);
  assert_int_equal(s.sum.bytes, 201000);
  sluice_call_release(call);
  free(p);
  cs_destroy(&s);
}

/* 8 MiB of zeros gzip to a few KiB; the server (max 4 MiB) must refuse it
 * after decompression, not trust the wire size. */
static void test_compression_bomb(void **state) {
  fixture *f = *state;
  cstate s;
  cs_init(&s);
  sluice_call_opts o;
  sluice_call_opts_init(&o);
  o.compression = SLUICE_COMPRESS_GZIP;
  sluice_call *call = NULL;
  assert_int_equal(sluice_call_start(f->ch, UPLOAD, &o, &CH, &s, &call), 0);
  uint8_t *zeros = calloc(1, 8u << 20);
  Streamt__Chunk c = STREAMT__CHUNK__INIT;
  c.payload.data = zeros;
  c.payload.len = 8u << 20;
  assert_int_equal(sluice_call_send(call, &c.base), 0);
  assert_int_equal(sluice_call_close_send(call), 0);
  assert_true(cs_wait(&s, is_done, E2E_HANG_MS));
  assert_int_equal(s.code, SLUICE_STATUS_RESOURCE_EXHAUSTED);
  assert_non_null(strstr(s.message, "decompressed message larger than max"));
  sluice_call_release(call);
  free(zeros);
  cs_destroy(&s);
}

static void test_api_misuse(void **state) {
  fixture *f = *state;
  cstate s;
  cs_init(&s);
  sluice_call *call = NULL;
  sluice_call_handlers no_done = {NULL, NULL, NULL, NULL};
  assert_int_equal(sluice_call_start(f->ch, NULL, NULL, &CH, &s, &call),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice_call_start(f->ch, BIDI, NULL, &no_done, &s, &call),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice_call_start(NULL, BIDI, NULL, &CH, &s, &call),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(
      sluice_call_start_msg(f->ch, DOWNLOAD, NULL, NULL, &CH, &s, &call),
      SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice_call_send(NULL, NULL), SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice_call_close_send(NULL), SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice_call_cancel(NULL, NULL), SLUICE_ERR_INVALID_ARG);
  sluice_call_release(NULL);
  assert_int_equal(sluice_call_start(f->ch, BIDI, NULL, &CH, &s, &call), 0);
  Streamt__Sum wrong = STREAMT__SUM__INIT;
  assert_int_equal(sluice_call_send(call, &wrong.base), SLUICE_ERR_INVALID_ARG);
  assert_int_equal(streamt__streams__bidi__send(call, NULL),
                   SLUICE_ERR_INVALID_ARG);
  /* A bidi call with no messages at all: the server finishes OK. */
  assert_int_equal(sluice_call_close_send(call), 0);
  assert_true(cs_wait(&s, is_done, E2E_HANG_MS));
  assert_int_equal(s.code, SLUICE_STATUS_OK);
  assert_int_equal(s.received, 0);
  sluice_call_release(call);
  cs_destroy(&s);
}

/* ---- a peer killed mid-stream: the server runs in a child process */

static void serve_forever(void) {
  int port = 0;
  memset(&g_srv, 0, sizeof g_srv);
  pthread_mutex_init(&g_srv.mu, NULL);
  pthread_cond_init(&g_srv.cv, NULL);
  sluice_server *srv = start_server(&port);
  printf("%d\n", port);
  fflush(stdout);
  sleep(60); /* bounded: the parent kills us long before */
  sluice_server_del(srv);
}

static int three_echoes(cstate *s) { return s->received >= 1 || s->done; }

static void test_peer_killed_mid_stream(void **state) {
  (void)state;
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    execl("/proc/self/exe", "test_streaming", "--serve", (char *)NULL);
    _exit(127);
  }
  close(fds[1]);
  char buf[32] = {0};
  ssize_t n = read(fds[0], buf, sizeof buf - 1);
  close(fds[0]);
  assert_true(n > 0);
  char target[64];
  snprintf(target, sizeof target, "ipv4:127.0.0.1:%d", atoi(buf));
  sluice_channel *ch = NULL;
  assert_int_equal(sluice_channel_new(&ch, target, NULL), 0);
  enum { N = 3 };
  cstate s[N];
  sluice_call *calls[N];
  uint8_t p[10];
  e2e_fill(p, sizeof p);
  for (int i = 0; i < N; i++) {
    cs_init(&s[i]);
    assert_int_equal(sluice_call_start(ch, BIDI, NULL, &CH, &s[i], &calls[i]),
                     0);
    assert_int_equal(send_chunk(calls[i], &s[i], 0, p, sizeof p, 0), 0);
    assert_true(cs_wait(&s[i], three_echoes, E2E_HANG_MS));
  }
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  for (int i = 0; i < N; i++) {
    assert_true(cs_wait(&s[i], is_done, E2E_HANG_MS));
    assert_int_equal(s[i].code, SLUICE_STATUS_UNAVAILABLE);
    sluice_call_release(calls[i]);
  }
  sluice_channel_del(ch);
  for (int i = 0; i < N; i++) {
    assert_int_equal(s[i].done, 1);
    cs_destroy(&s[i]);
  }
}

int main(int argc, char **argv) {
  e2e_init();
  if (argc > 1 && strcmp(argv[1], "--serve") == 0) {
    serve_forever();
    return 0;
  }
  pthread_mutex_init(&g_srv.mu, NULL);
  e2e_cond_init(&g_srv.cv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_bidi_10000_each_way, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_paused_server_reader_100mib, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_paused_client_reader_100mib, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_held_call_ends_with_its_channel,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_streams_share_the_connection, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_request_streams_take_turns, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_client_cancels_mid_stream, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_client_cancels_in_on_message, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_server_fails_mid_stream, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_server_deadline_is_cancelled, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_server_deadlines_out_of_order, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_compression_both_ways, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_compression_bomb, setup, teardown),
      cmocka_unit_test_setup_teardown(test_api_misuse, setup, teardown),
      cmocka_unit_test(test_peer_killed_mid_stream),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
