/* A whole server connection, sans network: the fuzzer is the client.
 *
 * The server's parts are put together here as sluice_server_start() does
 * for one loop (routes, load, admission, calls, connections), but the loop
 * is a borrowed uv loop run on the fuzzer's own thread, and the connection
 * is one end of a socketpair handed to sluice__sconn_accept(), the seam the
 * listener itself uses: everything from conn.c's reads and batched writes
 * up to the handlers runs as in a server, with no thread, port or timing
 * of another thread, a few hundred microseconds an input. A memory
 * transport in conn.c would be narrower still but would skip the socket
 * I/O (partial writes, pend, EOF, linger) that the socketpair exercises.
 *
 * Input: [config] then, unless config bit 0 asks for raw bytes, the ops of
 * h2peer.h (HTTP/2 frames built from the input), written after a valid
 * client preface (the magic, SETTINGS, a SETTINGS ACK). The end of the
 * input is the peer closing its side; then the server is shut down and
 * freed as sluice_server_shutdown() would. config:
 *   bit 0  raw: the rest of the input is written as it is
 *   bit 1  send buffer 1 KiB (streaming sends see SLUICE_ERR_FULL)
 *   bit 2  at most 2 calls at once, 2 queued (admission queueing, shedding)
 *   bit 3  ORCA load reports in the trailers
 *   bit 4  the health and reflection services
 *   bit 5  requests of at most 1000 bytes
 *   bit 6  request header lists of at most 512 bytes
 * Services: e2e.Echo (Echo, Big: unary; tests/e2e/e2e.proto, the request's
 * fields choose the reply: status_code/status_message, reply_size, hold
 * until op 11 or the end, echo_md) and streamt.Streams (Bidi echo, Upload
 * counts, Download sends count x size), typed, with hand-written dispatch;
 * fuzz.Raw (Unary echo, Bidi echo) as raw calls. Op 11 releases the held
 * unary calls.
 *
 * Invariants: every handler's call is finished exactly once (finish
 * returns 0 the first time; the handlers never finish twice); a streaming
 * call's on_done fires exactly once, last (no callback after it); when
 * the peer has closed, the connection is gone within a bounded number of
 * loop turns; after the shutdown no handle is left on the loop and
 * (LeakSanitizer) no memory. */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "e2e.pb-c.h"
#include "e2e.sluice.h"
#include "fuzz.h"
#include "h2peer.h"
#include "server/admit.h"
#include "server/health.h"
#include "server/load_report.h"
#include "server/reflection.h"
#include "server/route.h"
#include "server/server_call.h"
#include "server/server_conn.h"
#include "server/server_opts.h"
#include "sluice/buf.h"
#include "sluice/server.h"
#include "stream.pb-c.h"
#include "stream.sluice.h"

/* Loop turns one pump runs, and the most the end may take. */
#define PUMP_TURNS 4
#define END_TURNS 2000

static uv_loop_t g_uv;
static int g_uv_ready;

/* What the handlers did in this input. */
static struct {
  unsigned started;  /* calls handed to a handler */
  unsigned finished; /* of them, finished (finish returned 0) */
  unsigned handlers; /* streaming calls whose handlers were set */
  unsigned done;     /* on_done calls */
} g;

static void note_finish(int rv) {
  FUZZ_CHECK(rv == 0);
  g.finished++;
}

/* ---- unary: e2e.Echo */

#define MAX_HELD 16
static sluice_server_call *g_held[MAX_HELD];
static const E2e__EchoMsg *g_held_req[MAX_HELD];
static unsigned g_n_held;

static void echo_reply(sluice_server_call *call, const E2e__EchoMsg *req) {
  if (req->status_code) {
    note_finish(sluice_server_call_finish(
        call, (sluice_status_code)req->status_code, req->status_message, NULL));
    return;
  }
  if (req->echo_md) {
    const sluice_metadata *md = sluice_server_call_metadata(call);
    size_t n = sluice_metadata_count(md);
    for (size_t i = 0; i < n && i < 8; i++) {
      const char *k;
      const void *v;
      size_t vl;
      if (sluice_metadata_get(md, i, &k, &v, &vl) != 0)
        continue;
      /* Refusals (a reserved or bad key) are part of what is tested. */
      (void)sluice_server_call_add_initial_metadata(call, k, v, vl);
      (void)sluice_server_call_add_trailing_metadata(call, k, v, vl);
    }
  }
  if (req->delay_ms & 1)
    (void)sluice_server_call_set_compression(call, SLUICE_COMPRESS_GZIP);
  E2e__EchoMsg resp = E2E__ECHO_MSG__INIT;
  resp.text = req->text;
  uint8_t *payload = NULL;
  if (req->reply_size) {
    size_t n = req->reply_size > 65536 ? 65536 : req->reply_size;
    payload = calloc(1, n);
    if (!payload)
      abort();
    resp.payload.data = payload;
    resp.payload.len = n;
  } else {
    resp.payload = req->payload;
  }
  note_finish(sluice_server_call_reply(call, &resp.base));
  free(payload);
}

static void echo_dispatch(sluice_server_call *call, const ProtobufCMessage *req,
                          const void *handlers, void *ud) {
  (void)handlers;
  (void)ud;
  FUZZ_CHECK(req && req->descriptor == &e2e__echo_msg__descriptor);
  g.started++;
  const E2e__EchoMsg *m = (const E2e__EchoMsg *)req;
  if (m->hold && g_n_held < MAX_HELD) {
    /* The request stays valid until the call is finished. */
    g_held[g_n_held] = call;
    g_held_req[g_n_held++] = m;
    return;
  }
  echo_reply(call, m);
}

static void release_held(void) {
  for (unsigned i = 0; i < g_n_held; i++)
    echo_reply(g_held[i], g_held_req[i]);
  g_n_held = 0;
}

static const sluice_method_dispatch echo_table[2] = {echo_dispatch,
                                                     echo_dispatch};

/* ---- streaming: streamt.Streams; one state per call */

typedef struct scall {
  sluice_server_call *call;
  int kind; /* 0 bidi, 1 upload, 2 download */
  int finished, half_closed, done;
  uint64_t messages, bytes;
  uint32_t next, count, size; /* download */
  uint8_t *payload;
} scall;

static void s_finish(scall *s, sluice_status_code code) {
  if (s->finished)
    return;
  s->finished = 1;
  if (s->kind == 1 && code == SLUICE_STATUS_OK) {
    Streamt__Sum sum = STREAMT__SUM__INIT;
    sum.messages = s->messages;
    sum.bytes = s->bytes;
    note_finish(sluice_server_call_reply(s->call, &sum.base));
    return;
  }
  note_finish(sluice_server_call_finish(s->call, code, NULL, NULL));
}

static void download_pump(scall *s) {
  while (!s->finished && s->next < s->count) {
    Streamt__Chunk c = STREAMT__CHUNK__INIT;
    c.seq = s->next;
    c.payload.data = s->payload;
    c.payload.len = s->size;
    int rv = sluice_server_call_send_ex(
        s->call, &c.base, s->next & 1 ? SLUICE_SEND_NO_COMPRESS : 0);
    if (rv == SLUICE_ERR_FULL)
      return; /* on_send_ready goes on */
    if (rv != 0)
      break; /* cancelled: on_done follows; finish is still owed */
    s->next++;
  }
  s_finish(s, SLUICE_STATUS_OK);
}

static void s_msg(sluice_server_call *call, const ProtobufCMessage *m,
                  void *ud) {
  scall *s = ud;
  FUZZ_CHECK(!s->done && s->call == call);
  FUZZ_CHECK(m && m->descriptor == &streamt__chunk__descriptor);
  const Streamt__Chunk *c = (const Streamt__Chunk *)m;
  s->messages++;
  s->bytes += c->payload.len;
  if (s->kind != 0 || s->finished)
    return;
  if (c->seq == 999999) {
    s_finish(s, SLUICE_STATUS_ABORTED);
    return;
  }
  /* An echo refused (FULL, or the call is over) is dropped. */
  (void)sluice_server_call_send(call, m);
}

static void s_half_close(sluice_server_call *call, void *ud) {
  scall *s = ud;
  FUZZ_CHECK(!s->done && s->call == call && !s->half_closed);
  s->half_closed = 1;
  if (s->kind != 2)
    s_finish(s, SLUICE_STATUS_OK);
}

static void s_ready(sluice_server_call *call, void *ud) {
  scall *s = ud;
  FUZZ_CHECK(!s->done && s->call == call);
  if (s->kind == 2)
    download_pump(s);
}

static void s_done(sluice_server_call *call, int cancelled, void *ud) {
  scall *s = ud;
  FUZZ_CHECK(!s->done && s->call == call);
  FUZZ_CHECK(cancelled == 0 || cancelled == 1);
  s->done = 1;
  g.done++;
  s_finish(s, SLUICE_STATUS_CANCELLED); /* owed even when cancelled */
  free(s->payload);
  free(s);
}

static const sluice_server_call_handlers s_handlers = {s_msg, s_half_close,
                                                       s_ready, s_done};

static scall *s_new(sluice_server_call *call, int kind) {
  scall *s = calloc(1, sizeof *s);
  if (!s)
    abort();
  s->call = call;
  s->kind = kind;
  g.started++;
  return s;
}

static void s_start(scall *s) {
  FUZZ_CHECK(sluice_server_call_set_handlers(s->call, &s_handlers, s) == 0);
  g.handlers++;
  if (s->kind == 2)
    download_pump(s);
}

static void bidi_dispatch(sluice_server_call *call, const ProtobufCMessage *req,
                          const void *handlers, void *ud) {
  (void)handlers;
  (void)ud;
  FUZZ_CHECK(req == NULL);
  s_start(s_new(call, 0));
}

static void upload_dispatch(sluice_server_call *call,
                            const ProtobufCMessage *req, const void *handlers,
                            void *ud) {
  (void)handlers;
  (void)ud;
  FUZZ_CHECK(req == NULL);
  s_start(s_new(call, 1));
}

static void download_dispatch(sluice_server_call *call,
                              const ProtobufCMessage *req, const void *handlers,
                              void *ud) {
  (void)handlers;
  (void)ud;
  FUZZ_CHECK(req && req->descriptor == &streamt__download_req__descriptor);
  const Streamt__DownloadReq *r = (const Streamt__DownloadReq *)req;
  scall *s = s_new(call, 2);
  s->count = r->count > 64 ? 64 : r->count;
  s->size = r->size > 4096 ? 4096 : r->size;
  s->payload = calloc(1, s->size ? s->size : 1);
  if (!s->payload)
    abort();
  if (r->compressed)
    (void)sluice_server_call_set_compression(call, SLUICE_COMPRESS_GZIP);
  s_start(s);
}

static const sluice_method_dispatch streams_table[3] = {
    bidi_dispatch, upload_dispatch, download_dispatch};

/* ---- raw: fuzz.Raw */

static const sluice_method_desc raw_methods[2] = {
    {"/fuzz.Raw/Unary", "Unary", NULL, NULL, SLUICE_CALL_UNARY, 0, 0, 0, NULL},
    {"/fuzz.Raw/Bidi", "Bidi", NULL, NULL, SLUICE_CALL_BIDI_STREAMING, 0, 0, 0,
     NULL}};
static const sluice_service_desc raw_service = {"fuzz.Raw", 2, raw_methods};

typedef struct rcall {
  int finished, done;
} rcall;

static void r_msg(sluice_server_call *call, sluice_buf *msg, void *ud) {
  rcall *r = ud;
  FUZZ_CHECK(!r->done && msg);
  if (r->finished || sluice_server_call_send_buf(call, msg) != 0)
    sluice_buf_free(msg);
}

static void r_half_close(sluice_server_call *call, void *ud) {
  rcall *r = ud;
  FUZZ_CHECK(!r->done);
  if (!r->finished) {
    r->finished = 1;
    note_finish(
        sluice_server_call_finish_buf(call, SLUICE_STATUS_OK, NULL, NULL));
  }
}

static void r_done(sluice_server_call *call, int cancelled, void *ud) {
  (void)cancelled;
  rcall *r = ud;
  FUZZ_CHECK(!r->done);
  r->done = 1;
  g.done++;
  if (!r->finished)
    note_finish(sluice_server_call_finish_buf(call, SLUICE_STATUS_CANCELLED,
                                              NULL, NULL));
  free(r);
}

static const sluice_server_call_raw_handlers r_handlers = {r_msg, r_half_close,
                                                           NULL, r_done};

static void raw_dispatch(sluice_server_call *call, sluice_buf *req, void *ud) {
  (void)ud;
  g.started++;
  const sluice_method_desc *m = sluice_server_call_method(call);
  FUZZ_CHECK(m != NULL);
  if (m->kind == SLUICE_CALL_UNARY) {
    FUZZ_CHECK(req != NULL);
    int rv = sluice_server_call_finish_buf(call, SLUICE_STATUS_OK, NULL, req);
    if (rv != 0)
      sluice_buf_free(req);
    note_finish(rv);
    return;
  }
  FUZZ_CHECK(req == NULL);
  rcall *r = calloc(1, sizeof *r);
  if (!r)
    abort();
  FUZZ_CHECK(sluice_server_call_set_raw_handlers(call, &r_handlers, r) == 0);
  g.handlers++;
}

/* ---- the server, as sluice_server_start() builds it, on g_uv */

typedef struct server {
  sluice_server_opts *opts;
  sluice__routes routes;
  sluice__load load;
  sluice__admission admit;
  sluice__scall_shared calls;
  sluice__sconn_shared conns;
  sluice__health *health;
  sluice__reflection *reflection;
  sluice__loop *loop;
  sluice__sconn_loop cl;
} server;

static void server_new(server *s, uint8_t config) {
  memset(s, 0, sizeof *s);
  FUZZ_CHECK(sluice_server_opts_new(&s->opts) == 0);
  sluice_server_opts *o = s->opts;
  if (config & 2)
    sluice_server_opts_set_send_buffer(o, 1024);
  if (config & 4) {
    sluice_server_opts_set_max_concurrent_calls(o, 2);
    sluice_server_opts_set_max_queue(o, 2);
  }
  if (config & 8)
    sluice_server_opts_set_load_report(o, 1);
  if (config & 32)
    sluice_server_opts_set_max_request_size(o, 1000);
  if (config & 64)
    sluice_server_opts_set_max_header_list_size(o, 512);
  if (config & 16) {
    FUZZ_CHECK(sluice__health_new(&s->health) == 0);
    FUZZ_CHECK(sluice__reflection_new(&s->reflection) == 0);
  }
  FUZZ_CHECK(sluice__routes_add(&s->routes, &e2e__echo__sluice_service,
                                echo_table, NULL, NULL, 0, NULL, o) == 0);
  FUZZ_CHECK(sluice__routes_add(&s->routes, &streamt__streams__sluice_service,
                                streams_table, NULL, NULL, 0, NULL, o) == 0);
  FUZZ_CHECK(sluice__routes_add(&s->routes, &raw_service, NULL, raw_dispatch,
                                NULL, 0, NULL, o) == 0);
  if (s->health) {
    FUZZ_CHECK(sluice__health_add_default(s->health, "e2e.Echo") == 0);
    FUZZ_CHECK(sluice__health_register(s->health, &s->routes, o) == 0);
    FUZZ_CHECK(sluice__reflection_register(s->reflection, &s->routes, o) == 0);
  }
  sluice__load_init(&s->load, o);
  sluice__admit_init(&s->admit, o, &s->load);
  sluice__scall_shared_init(&s->calls, o, &s->load, &s->admit);
  sluice__sconn_shared_init(&s->conns, o, &s->routes);
  FUZZ_CHECK(sluice__admit_start(&s->admit, 1) == 0);
  FUZZ_CHECK(sluice__loop_new(&s->loop, &g_uv) == 0);
  sluice__scall_loop_init(&s->cl.calls, &s->calls, s->loop,
                          sluice__admit_queue_open(&s->admit, s->loop));
  sluice__sconn_loop_init(&s->cl, &s->conns);
  sluice__load_start(&s->load);
}

static void force_loop(void *ud) {
  server *s = ud;
  sluice__admit_loop_close(s->cl.calls.aq);
  sluice__sconn_loop_close(&s->cl, "server shut down");
  sluice__scall_loop_close(&s->cl.calls);
}

static void count_handle(uv_handle_t *h, void *arg) {
  (void)h;
  (*(unsigned *)arg)++;
}

static void run_until_no_handles(void) {
  for (int i = 0; i < END_TURNS && uv_loop_alive(&g_uv); i++)
    uv_run(&g_uv, UV_RUN_NOWAIT);
  unsigned handles = 0;
  uv_walk(&g_uv, count_handle, &handles);
  FUZZ_CHECK(handles == 0);
}

/* sluice_server_shutdown(srv, 0) and sluice_server_del(), for a server
 * whose one loop is g_uv, run here. */
static void server_del(server *s) {
  sluice__health_shutdown(s->health, 0);
  sluice__scall_stop(&s->calls);
  sluice__admit_stop(&s->admit);
  sluice__scall_loop_quiesce(&s->cl.calls);
  sluice__loop_del(s->loop, force_loop, s);
  run_until_no_handles();
  sluice__scall_loop_destroy(&s->cl.calls);
  sluice__scall_free_orphans(&s->calls);
  sluice__routes_clear(&s->routes);
  sluice__sconn_shared_destroy(&s->conns);
  sluice__scall_shared_destroy(&s->calls);
  sluice__admit_destroy(&s->admit);
  sluice__load_destroy(&s->load);
  sluice__health_del(s->health);
  sluice__reflection_del(s->reflection);
  sluice_server_opts_del(s->opts);
}

/* ---- the peer */

static void pump(h2peer *p) {
  for (int i = 0; i < PUMP_TURNS; i++) {
    uv_run(&g_uv, UV_RUN_NOWAIT);
    h2peer_drain(p);
  }
}

static void hook(h2peer *p, fuzz_in *in) {
  (void)p;
  (void)in;
  release_held();
}

static const uint8_t preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!g_uv_ready) {
    FUZZ_CHECK(uv_loop_init(&g_uv) == 0);
    g_uv_ready = 1;
  }
  memset(&g, 0, sizeof g);
  g_n_held = 0;
  fuzz_in in = {data, size};
  uint8_t config = fuzz_u8(&in);
  server srv;
  server_new(&srv, config);

  int sv[2];
  FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
  FUZZ_CHECK(fcntl(sv[1], F_SETFL, O_NONBLOCK) == 0);
  /* The listener's hand-off: the connection takes sv[1] (is_pipe 1). */
  FUZZ_CHECK(sluice__sconn_accept(&srv.cl, sv[1], 1) == 0);

  h2peer p;
  h2peer_init(&p, sv[0], pump, hook, NULL);
  h2peer_put(&p, preface, sizeof preface - 1);
  h2peer_play(&p, &in, config & 1);

  /* The peer closes its side: the connection must be gone soon. */
  shutdown(p.fd, SHUT_WR);
  int turns = 0;
  for (; turns < END_TURNS && srv.conns.live > 0; turns++) {
    uv_run(&g_uv, UV_RUN_NOWAIT);
    h2peer_drain(&p);
  }
  FUZZ_CHECK(srv.conns.live == 0);
  /* Held calls are finished now (their finish is owed and harmless). */
  release_held();
  uint64_t drained = p.drained;
  h2peer_free(&p);
  server_del(&srv);
  if (getenv("FUZZ_CONN_DEBUG"))
    fprintf(stderr,
            "calls %u finished %u streaming %u done %u; server wrote %llu "
            "bytes\n",
            g.started, g.finished, g.handlers, g.done,
            (unsigned long long)drained);
  FUZZ_CHECK(g.finished == g.started);
  FUZZ_CHECK(g.done == g.handlers);
  return 0;
}
