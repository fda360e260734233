/* A whole client connection with calls in flight, sans network: the
 * fuzzer is the server.
 *
 * A channel on a borrowed uv loop run on the fuzzer's own thread
 * (sluice_channel_opts_set_loop: no thread) calls "unix:<path>", a Unix
 * socket this process listens on (one for the whole run, never a port).
 * The channel connects as it would to any server; the fuzzer accepts the
 * connection and answers from its end: the channel, its subchannel, the
 * picker, the calls and their attempts, client_h2.c and conn.c all run as
 * in a client, a few hundred microseconds an input. (The channel makes its
 * own socket; a socketpair would need a way into the subchannel that no
 * client has, so the listener is the narrowest seam here: none.)
 *
 * Input: [config] then, unless config bit 0 asks for raw bytes, the ops of
 * h2peer.h, written after the server's SETTINGS and the ACK of the
 * client's. The client's streams are 1, 3, 5 ... in the order the calls
 * start (sid bytes 0, 1, 2 ...). The end of the input is the peer closing
 * the connection; the channel is then destroyed. config:
 *   bit 0  raw: the rest of the input is written as it is
 *   bit 1  also a bidi call (streamt.Streams/Bidi), two messages sent
 *   bit 2  also a server-streaming call (streamt.Streams/Download)
 *   bit 3  also a raw unary call (fuzz.Raw/Unary)
 *   bit 4  calls with a 10 s deadline (grpc-timeout sent; the timer set)
 *   bit 5  calls compress (gzip)
 *   bit 6  one call with a 1 ms deadline (it may expire while the input runs)
 *   bit 7  responses of at most 100 bytes
 * The first call is always a unary e2e.Echo/Echo. Op 11 ([action]) acts on
 * the bidi call: send a message, half-close, cancel, pause or resume
 * receiving, or start another unary call.
 *
 * Invariants: each call's completion fires exactly once, last (nothing
 * after it), with a status code of gRPC's, and an OK unary or raw call has
 * its one response; at most one initial metadata per call, before the end;
 * once the peer has closed and the channel is destroyed, every call has
 * completed, no handle is left on the loop and (LeakSanitizer) no
 * memory. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <uv.h>

#include "e2e.pb-c.h"
#include "e2e.sluice.h"
#include "fuzz.h"
#include "h2peer.h"
#include "sluice/buf.h"
#include "sluice/call.h"
#include "sluice/channel.h"
#include "stream.pb-c.h"
#include "stream.sluice.h"

#define PUMP_TURNS 4
#define END_TURNS 2000
#define MAX_CALLS 12

static uv_loop_t g_uv;
static int g_listen = -1;
static char g_target[sizeof(((struct sockaddr_un *)0)->sun_path) + 8];
static char g_dir[64];

/* One call's record: what its callbacks saw. */
typedef struct rec {
  int kind; /* 0 unary, 1 bidi, 2 download, 3 raw unary */
  int done;
  int initial_md;
  int messages;
  sluice_status_code code;
  sluice_call *call; /* streaming and raw: the handle until on_done */
} rec;

static rec g_recs[MAX_CALLS];
static unsigned g_n_recs;
static sluice_channel *g_ch;
static sluice_call_opts g_opts;
static int g_bidi = -1; /* index of the bidi call's record */

static void check_status(rec *r, const sluice_status *st) {
  FUZZ_CHECK(!r->done);
  FUZZ_CHECK(st && (unsigned)st->code <= 16);
  FUZZ_CHECK(st->message != NULL);
  r->done = 1;
  r->code = st->code;
}

static void on_unary(const sluice_status *st, const ProtobufCMessage *resp,
                     void *ud) {
  rec *r = ud;
  check_status(r, st);
  if (st->code == SLUICE_STATUS_OK)
    FUZZ_CHECK(resp && resp->descriptor == &e2e__echo_msg__descriptor);
  else
    FUZZ_CHECK(resp == NULL);
}

static void on_initial(sluice_call *call, const sluice_metadata *md, void *ud) {
  (void)md;
  rec *r = ud;
  FUZZ_CHECK(!r->done && r->call == call && !r->initial_md);
  r->initial_md = 1;
}

static void on_message(sluice_call *call, const ProtobufCMessage *msg,
                       void *ud) {
  rec *r = ud;
  FUZZ_CHECK(!r->done && r->call == call);
  FUZZ_CHECK(msg && msg->descriptor == &streamt__chunk__descriptor);
  r->messages++;
}

static void on_done(sluice_call *call, const sluice_status *st, void *ud) {
  rec *r = ud;
  FUZZ_CHECK(r->call == call);
  check_status(r, st);
  r->call = NULL;
  sluice_call_release(call);
}

static const sluice_call_handlers handlers = {on_initial, on_message, NULL,
                                              on_done};

static void on_raw_message(sluice_call *call, sluice_buf *msg, void *ud) {
  rec *r = ud;
  FUZZ_CHECK(!r->done && r->call == call && msg);
  r->messages++;
  sluice_buf_free(msg);
}

static void on_raw_done(sluice_call *call, const sluice_status *st, void *ud) {
  rec *r = ud;
  on_done(call, st, ud);
  if (st->code == SLUICE_STATUS_OK)
    FUZZ_CHECK(r->messages == 1);
}

static const sluice_call_raw_handlers raw_handlers = {
    on_initial, on_raw_message, NULL, on_raw_done};

static const sluice_method_desc raw_unary = {
    "/fuzz.Raw/Unary", "Unary", NULL, NULL, SLUICE_CALL_UNARY, 0, 0, 0, NULL};

static rec *rec_new(int kind) {
  if (g_n_recs == MAX_CALLS)
    return NULL;
  rec *r = &g_recs[g_n_recs++];
  memset(r, 0, sizeof *r);
  r->kind = kind;
  return r;
}

static void start_unary(const char *text, int short_deadline) {
  rec *r = rec_new(0);
  if (!r)
    return;
  E2e__EchoMsg req = E2E__ECHO_MSG__INIT;
  req.text = (char *)text;
  sluice_call_opts o = g_opts;
  if (short_deadline)
    o.timeout_ms = 1;
  FUZZ_CHECK(sluice_unary_call(g_ch, &e2e__echo__sluice_methods[0], &req.base,
                               &o, on_unary, r) == 0);
}

static void bidi_send(size_t len) {
  rec *r = &g_recs[g_bidi];
  if (!r->call)
    return;
  static uint8_t payload[4096];
  Streamt__Chunk c = STREAMT__CHUNK__INIT;
  c.seq = (uint64_t)r->messages + 1;
  c.payload.data = payload;
  c.payload.len = len > sizeof payload ? sizeof payload : len;
  /* Refused when full or over: part of what is tested. */
  (void)sluice_call_send(r->call, &c.base);
}

static void start_calls(uint8_t config) {
  start_unary("first", 0);
  if (config & 2) {
    rec *r = rec_new(1);
    g_bidi = (int)(r - g_recs);
    FUZZ_CHECK(sluice_call_start(g_ch, &streamt__streams__sluice_methods[0],
                                 &g_opts, &handlers, r, &r->call) == 0);
    bidi_send(10);
    bidi_send(300);
  }
  if (config & 4) {
    rec *r = rec_new(2);
    Streamt__DownloadReq req = STREAMT__DOWNLOAD_REQ__INIT;
    req.count = 3;
    req.size = 10;
    FUZZ_CHECK(sluice_call_start_msg(g_ch, &streamt__streams__sluice_methods[2],
                                     &req.base, &g_opts, &handlers, r,
                                     &r->call) == 0);
  }
  if (config & 8) {
    rec *r = rec_new(3);
    FUZZ_CHECK(sluice_call_start_raw(g_ch, &raw_unary, &g_opts, &raw_handlers,
                                     r, &r->call) == 0);
    sluice_buf *b;
    FUZZ_CHECK(sluice_buf_new(4, &b) == 0);
    memcpy(sluice_buf_data(b), "ping", 4);
    if (sluice_call_send_buf(r->call, b) != 0)
      sluice_buf_free(b);
    (void)sluice_call_close_send(r->call);
  }
  if (config & 64)
    start_unary("hurry", 1);
}

/* ---- the peer */

static void accept_more(h2peer *p) {
  for (;;) {
    int fd = accept4(g_listen, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0)
      return;
    if (p->fd < 0 && !p->eof)
      p->fd = fd; /* the first connection is the peer's */
    else
      close(fd); /* reconnections (a transparent retry) are refused */
  }
}

static void pump(h2peer *p) {
  for (int i = 0; i < PUMP_TURNS; i++) {
    uv_run(&g_uv, UV_RUN_NOWAIT);
    h2peer_drain(p);
  }
  accept_more(p);
}

static void hook(h2peer *p, fuzz_in *in) {
  uint8_t a = fuzz_u8(in);
  rec *r = g_bidi >= 0 ? &g_recs[g_bidi] : NULL;
  switch (a % 6) {
  case 0:
    if (r)
      bidi_send(a >> 3 << 6);
    break;
  case 1:
    if (r && r->call)
      (void)sluice_call_close_send(r->call);
    break;
  case 2:
    if (r && r->call)
      (void)sluice_call_cancel(r->call, "fuzz cancels");
    break;
  case 3:
  case 4:
    if (r && r->call)
      (void)sluice_call_set_recv_paused(r->call, a % 6 == 3);
    break;
  default:
    start_unary("another", 0);
    break;
  }
  (void)p;
}

static int all_done(void) {
  for (unsigned i = 0; i < g_n_recs; i++)
    if (!g_recs[i].done)
      return 0;
  return 1;
}

static void count_handle(uv_handle_t *h, void *arg) {
  (void)h;
  (*(unsigned *)arg)++;
}

static void setup_once(void) {
  FUZZ_CHECK(uv_loop_init(&g_uv) == 0);
  snprintf(g_dir, sizeof g_dir, "/tmp/sluice-fuzz-XXXXXX");
  FUZZ_CHECK(mkdtemp(g_dir) != NULL);
  struct sockaddr_un un;
  memset(&un, 0, sizeof un);
  un.sun_family = AF_UNIX;
  snprintf(un.sun_path, sizeof un.sun_path, "%s/s", g_dir);
  snprintf(g_target, sizeof g_target, "unix:%s", un.sun_path);
  g_listen = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  FUZZ_CHECK(g_listen >= 0);
  FUZZ_CHECK(bind(g_listen, (struct sockaddr *)&un, sizeof un) == 0);
  FUZZ_CHECK(listen(g_listen, 64) == 0);
}

/* The socket's name and directory go at exit (a crashed run leaves them
 * in /tmp: connecting needs the name, so it cannot go earlier). */
static void cleanup(void) {
  if (g_listen >= 0) {
    char path[sizeof g_dir + 4];
    snprintf(path, sizeof path, "%s/s", g_dir);
    unlink(path);
    rmdir(g_dir);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (g_listen < 0) {
    setup_once();
    atexit(cleanup);
  }
  fuzz_in in = {data, size};
  uint8_t config = fuzz_u8(&in);
  g_n_recs = 0;
  g_bidi = -1;

  sluice_channel_opts *o;
  FUZZ_CHECK(sluice_channel_opts_new(&o) == 0);
  FUZZ_CHECK(sluice_channel_opts_set_loop(o, &g_uv) == 0);
  if (config & 128)
    FUZZ_CHECK(sluice_channel_opts_set_max_response_size(o, 100) == 0);
  FUZZ_CHECK(sluice_channel_new(&g_ch, g_target, o) == 0);
  sluice_channel_opts_del(o);
  sluice_call_opts_init(&g_opts);
  if (config & 16)
    g_opts.timeout_ms = 10000;
  if (config & 32)
    g_opts.compression = SLUICE_COMPRESS_GZIP;
  start_calls(config);

  h2peer p;
  h2peer_init(&p, -1, pump, hook, NULL);
  for (int i = 0; i < 64 && p.fd < 0; i++)
    pump(&p);
  FUZZ_CHECK(p.fd >= 0); /* the channel connected */
  h2peer_play(&p, &in, config & 1);

  /* The peer goes: the calls on the connection end (UNAVAILABLE); those
   * waiting for another connection end when the channel goes. */
  close(p.fd);
  p.fd = -1;
  p.eof = 1;
  for (int i = 0; i < 16 && !all_done(); i++)
    pump(&p);
  sluice_channel_del(g_ch);
  g_ch = NULL;
  for (int i = 0; i < END_TURNS && uv_loop_alive(&g_uv); i++) {
    uv_run(&g_uv, UV_RUN_NOWAIT);
    accept_more(&p);
  }
  h2peer_free(&p);
  unsigned handles = 0;
  uv_walk(&g_uv, count_handle, &handles);
  FUZZ_CHECK(handles == 0);
  if (getenv("FUZZ_CONN_DEBUG"))
    for (unsigned i = 0; i < g_n_recs; i++)
      fprintf(stderr, "call %u (kind %d): done %d code %d messages %d\n", i,
              g_recs[i].kind, g_recs[i].done, (int)g_recs[i].code,
              g_recs[i].messages);
  for (unsigned i = 0; i < g_n_recs; i++) {
    FUZZ_CHECK(g_recs[i].done == 1);
    FUZZ_CHECK(g_recs[i].call == NULL);
  }
  return 0;
}
