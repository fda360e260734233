/* Allocation-failure injection (issue 16 part 2, docs/fuzzing.md): runs one
 * operation — a unary call, a bidi streaming call, a unary call over TLS
 * (the handshake), a server's creation and first accept — again and again,
 * failing the n-th allocation of the run for n = 1, 2, ... until a run
 * reaches its end without meeting an armed failure. Each run must end
 * cleanly: no crash, no leak (LeakSanitizer is asked after every run), the
 * call's completion fires exactly once with OK (and the right answer) or a
 * status that says what happened — RESOURCE_EXHAUSTED, INTERNAL or
 * UNAVAILABLE (the connection closed) — and every server call that
 * started ends exactly once.
 *
 * What fails: every allocation of the runtime (runtime/core/alloc.h, in the
 * SLUICE_FAILMALLOC build), nghttp2's (through the runtime's nghttp2_mem),
 * protobuf-c's in the runtime (its allocator) and OpenSSL's
 * (CRYPTO_set_mem_functions), all counted by one switch. libuv's do not:
 * libuv aborts the process when some of its allocations fail (growing its
 * watcher array, uv_loop_init), so failing them tests libuv's choice, not
 * ours. Nor do the C library's own (threads, getaddrinfo).
 *
 * Usage: failmalloc SCENARIO [CERT_DIR]
 *   SCENARIO  unary | stream | tls | accept
 *   FAILMALLOC_STRIDE=k  try every k-th n only (default 1), starting at a
 *                        random n in 1..k (printed) unless FROM says
 *   FAILMALLOC_FROM=n    start the sweep at n (to replay one failure)
 *   FAILMALLOC_TRACE=1   print the stack of every failed allocation
 *   FAILMALLOC_VERBOSE=1 print how every run ended */
#include "e2e_common.h"

#include <openssl/crypto.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/bigbuf.h"
#include "stream.sluice.h"

#if defined(__SANITIZE_ADDRESS__)
#define FM_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FM_LSAN 1
#endif
#endif
#ifdef FM_LSAN
#include <sanitizer/common_interface_defs.h>
#include <sanitizer/lsan_interface.h>
#endif

/* Bound of one run's wait for its call: only there to catch a hang. The
 * call's own deadline is below it, so a call the failure lost shows as
 * DEADLINE_EXCEEDED, which is a finding. */
#define FM_DEADLINE_MS 8000u
#define FM_HANG_MS 20000u

/* ---- OpenSSL's allocator, on the same switch */

static void *ssl_m(size_t n, const char *f, int l) {
  (void)f, (void)l;
  return sluice__failmalloc_fails() ? NULL : malloc(n);
}
static void *ssl_r(void *p, size_t n, const char *f, int l) {
  (void)f, (void)l;
  return sluice__failmalloc_fails() ? NULL : realloc(p, n);
}
static void ssl_f(void *p, const char *f, int l) {
  (void)f, (void)l;
  free(p);
}

/* ---- server side */

static atomic_int g_srv_started, g_srv_done; /* bidi server calls */

static void on_echo(sluice_server_call *call, const E2e__EchoMsg *req,
                    void *ud) {
  (void)ud;
  E2e__EchoMsg resp = E2E__ECHO_MSG__INIT;
  resp.text = req->text;
  e2e__echo__echo__reply(call, &resp); /* never fails for memory */
}

typedef struct bidi {
  int finished;
} bidi;

static void bidi_msg(sluice_server_call *call, const ProtobufCMessage *m,
                     void *ud) {
  bidi *b = ud;
  if (!b->finished && streamt__streams__bidi__send_response(
                          call, (const Streamt__Chunk *)m) != 0) {
    b->finished = 1;
    sluice_server_call_finish(call, SLUICE_STATUS_RESOURCE_EXHAUSTED,
                              "send refused", NULL);
  }
}

static void bidi_half_close(sluice_server_call *call, void *ud) {
  bidi *b = ud;
  if (!b->finished) {
    b->finished = 1;
    sluice_server_call_finish(call, SLUICE_STATUS_OK, NULL, NULL);
  }
}

static void bidi_done(sluice_server_call *call, int cancelled, void *ud) {
  (void)cancelled;
  bidi *b = ud;
  if (!b->finished)
    sluice_server_call_finish(call, SLUICE_STATUS_CANCELLED, NULL, NULL);
  free(b);
  atomic_fetch_add(&g_srv_done, 1);
}

static void on_bidi(sluice_server_call *call, void *ud) {
  (void)ud;
  bidi *b = calloc(1, sizeof *b);
  if (!b) {
    sluice_server_call_finish(call, SLUICE_STATUS_RESOURCE_EXHAUSTED, NULL,
                              NULL);
    return;
  }
  sluice_server_call_handlers h = {bidi_msg, bidi_half_close, NULL, bidi_done};
  if (sluice_server_call_set_handlers(call, &h, b) != 0) {
    free(b);
    sluice_server_call_finish(call, SLUICE_STATUS_RESOURCE_EXHAUSTED, NULL,
                              NULL);
    return;
  }
  atomic_fetch_add(&g_srv_started, 1);
}

static void on_upload(sluice_server_call *call, void *ud) {
  (void)ud;
  sluice_server_call_finish(call, SLUICE_STATUS_UNIMPLEMENTED, NULL, NULL);
}

static void on_download(sluice_server_call *call, const Streamt__DownloadReq *r,
                        void *ud) {
  (void)r, (void)ud;
  sluice_server_call_finish(call, SLUICE_STATUS_UNIMPLEMENTED, NULL, NULL);
}

static const char *g_certs; /* certificate directory (tls) */

static void cert_path(char *out, size_t n, const char *name) {
  snprintf(out, n, "%s/%s", g_certs, name);
}

/* A server with both services on a free loopback port, or NULL (and the
 * failing step's code in *rc) when any step fails: that is an allowed
 * outcome while allocations fail. */
static sluice_server *server_start(int tls, int *port, int *rc) {
  sluice_server_opts *o = NULL;
  sluice_server *srv = NULL;
  if ((*rc = sluice_server_opts_new(&o)) != 0)
    return NULL;
  sluice_server_opts_set_threads(o, 1);
  if (tls) {
    char crt[512], key[512];
    cert_path(crt, sizeof crt, "server.pem");
    cert_path(key, sizeof key, "server.key");
    sluice_tls_server_config c;
    sluice_tls_server_config_init(&c);
    c.cert.file = crt;
    c.key.file = key;
    *rc = sluice_server_opts_set_tls(o, &c);
  }
  if (*rc == 0)
    *rc = sluice_server_new(&srv, o);
  sluice_server_opts_del(o);
  if (*rc != 0)
    return NULL;
  E2e__Echo_SluiceHandlers eh = {on_echo, NULL};
  Streamt__Streams_SluiceHandlers sh = {on_bidi, on_upload, on_download};
  if ((*rc = e2e__echo__sluice_register(srv, &eh, NULL)) != 0 ||
      (*rc = streamt__streams__sluice_register(srv, &sh, NULL)) != 0 ||
      (*rc = sluice_server_listen(srv, "127.0.0.1:0", port)) != 0 ||
      (*rc = sluice_server_start(srv)) != 0) {
    sluice_server_del(srv);
    return NULL;
  }
  return srv;
}

/* ---- client side */

typedef struct outcome {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done; /* completions: must end at exactly 1 */
  sluice_status_code code;
  char message[256];
  int bad_answer; /* OK, but not the answer asked for */
  int sent;       /* bidi messages the call accepted */
  int received;   /* bidi messages back */
} outcome;

static void out_done(outcome *o, const sluice_status *st) {
  pthread_mutex_lock(&o->mu);
  o->done++;
  o->code = st->code;
  snprintf(o->message, sizeof o->message, "%s", st->message ? st->message : "");
  pthread_cond_broadcast(&o->cv);
  pthread_mutex_unlock(&o->mu);
}

static void unary_cb(const sluice_status *st, const E2e__EchoMsg *resp,
                     void *ud) {
  outcome *o = ud;
  if (st->code == SLUICE_STATUS_OK &&
      (!resp || !resp->text || strcmp(resp->text, "hello") != 0))
    o->bad_answer = 1;
  out_done(o, st);
}

static void c_msg(sluice_call *call, const ProtobufCMessage *m, void *ud) {
  (void)call;
  outcome *o = ud;
  const Streamt__Chunk *c = (const Streamt__Chunk *)m;
  pthread_mutex_lock(&o->mu);
  if (c->seq != (uint64_t)o->received)
    o->bad_answer = 1;
  o->received++;
  pthread_mutex_unlock(&o->mu);
}

static void c_done(sluice_call *call, const sluice_status *st, void *ud) {
  (void)call;
  outcome *o = ud;
  /* A send refused (out of memory) was said so to the sender; the echo
   * of every accepted one must be back. */
  pthread_mutex_lock(&o->mu);
  if (st->code == SLUICE_STATUS_OK && o->received != o->sent)
    o->bad_answer = 1;
  pthread_mutex_unlock(&o->mu);
  out_done(o, st);
}

static const sluice_call_handlers BIDI_H = {NULL, c_msg, NULL, c_done};

/* Waits (bounded) for the completion; 1 when it came. */
static int out_wait(outcome *o) {
  struct timespec ts;
  e2e_abs_ms(&ts, FM_HANG_MS);
  pthread_mutex_lock(&o->mu);
  while (o->done == 0)
    if (pthread_cond_timedwait(&o->cv, &o->mu, &ts) != 0)
      break;
  int d = o->done;
  pthread_mutex_unlock(&o->mu);
  return d > 0;
}

/* Channel options (with TLS when tls, trusting the test CA), or NULL
 * with *rc. */
static sluice_channel_opts *channel_opts(int tls, int *rc) {
  sluice_channel_opts *co = NULL;
  if ((*rc = sluice_channel_opts_new(&co)) != 0)
    return NULL;
  if (tls) {
    char ca[512];
    cert_path(ca, sizeof ca, "ca.pem");
    sluice_tls_client_config c;
    sluice_tls_client_config_init(&c);
    c.ca.file = ca;
    if ((*rc = sluice_channel_opts_set_tls(co, &c)) != 0) {
      sluice_channel_opts_del(co);
      return NULL;
    }
  }
  return co;
}

/* A channel to the port with co (NULL: made here), or NULL with *rc. */
static sluice_channel *channel(int port, sluice_channel_opts *co, int *rc) {
  char target[64];
  snprintf(target, sizeof target, "ipv4:127.0.0.1:%d", port);
  sluice_channel_opts *own = co ? NULL : channel_opts(0, rc);
  if (!co && !own)
    return NULL;
  sluice_channel *ch = NULL;
  *rc = sluice_channel_new(&ch, target, co ? co : own);
  sluice_channel_opts_del(own);
  return *rc == 0 ? ch : NULL;
}

/* One call of the scenario's kind on ch; *started 0 when the start itself
 * failed (nothing then fires). */
static void call_once(sluice_channel *ch, int stream, outcome *o, int *started,
                      int *start_rc) {
  sluice_call_opts opts;
  sluice_call_opts_init(&opts);
  opts.timeout_ms = FM_DEADLINE_MS;
  opts.compression = stream ? SLUICE_COMPRESS_NONE : SLUICE_COMPRESS_GZIP;
  *started = 0;
  if (!stream) {
    E2e__EchoMsg req = E2E__ECHO_MSG__INIT;
    req.text = "hello";
    *start_rc = e2e__echo__echo__async(ch, &req, &opts, unary_cb, o);
    *started = *start_rc == 0;
    return;
  }
  sluice_call *call = NULL;
  *start_rc = sluice_call_start(ch, &streamt__streams__sluice_methods[0], &opts,
                                &BIDI_H, o, &call);
  if (*start_rc != 0)
    return;
  *started = 1;
  uint8_t payload[64];
  e2e_fill(payload, sizeof payload);
  for (uint64_t i = 0; i < 3; i++) {
    Streamt__Chunk c = STREAMT__CHUNK__INIT;
    c.seq = i;
    c.payload.data = payload;
    c.payload.len = sizeof payload;
    if (sluice_call_send(call, &c.base) != 0)
      break; /* refused (out of memory, or the call ended): on_done says */
    pthread_mutex_lock(&o->mu);
    o->sent++;
    pthread_mutex_unlock(&o->mu);
  }
  sluice_call_close_send(call);
  out_wait(o);
  sluice_call_release(call);
}

/* ---- one run */

typedef enum { SC_UNARY, SC_STREAM, SC_TLS, SC_ACCEPT } scenario;

/* How a run ended, for the tally printed at the end. */
enum {
  END_SERVER = 17, /* the server did not come up (accept) */
  END_CHANNEL,     /* the channel was not created */
  END_START,       /* the call did not start */
  END_KINDS
};

typedef struct run_result {
  int end;        /* a status code, or an END_ */
  int ok;         /* the operation succeeded end to end */
  int fired;      /* the armed failure was met */
  long count;     /* allocations counted */
  char what[512]; /* a finding, empty when the run was clean */
} run_result;

static int allowed(sluice_status_code c) {
  return c == SLUICE_STATUS_OK || c == SLUICE_STATUS_RESOURCE_EXHAUSTED ||
         c == SLUICE_STATUS_INTERNAL || c == SLUICE_STATUS_UNAVAILABLE;
}

static void run(scenario sc, long n, run_result *r) {
  memset(r, 0, sizeof *r);
  /* Empty the process-wide caches, so that the run allocates what a cold
   * process would (a cached block never fails). */
  sluice__mem_trim();
  atomic_store(&g_srv_started, 0);
  atomic_store(&g_srv_done, 0);
  int tls = sc == SC_TLS, stream = sc == SC_STREAM;
  int port = 0, rc = 0;
  sluice_server *srv = NULL;
  if (sc != SC_ACCEPT) { /* set up before the failures begin */
    srv = server_start(tls, &port, &rc);
    if (!srv) {
      snprintf(r->what, sizeof r->what, "server setup failed: %s",
               sluice_strerror(rc));
      return;
    }
  }
  /* TLS: the credentials are loaded before the failures begin (thousands
   * of OpenSSL's allocations, not the handshake's). */
  sluice_channel_opts *co = tls ? channel_opts(1, &rc) : NULL;
  if (tls && !co) {
    snprintf(r->what, sizeof r->what, "channel options failed: %s",
             sluice_strerror(rc));
    sluice_server_del(srv);
    return;
  }
  sluice__failmalloc_arm(n);
  if (sc == SC_ACCEPT)
    srv = server_start(0, &port, &rc);
  outcome o;
  memset(&o, 0, sizeof o);
  pthread_mutex_init(&o.mu, NULL);
  e2e_cond_init(&o.cv);
  int started = 0, start_rc = 0, ch_rc = 0;
  sluice_channel *ch = srv ? channel(port, co, &ch_rc) : NULL;
  if (ch) {
    call_once(ch, stream, &o, &started, &start_rc);
    if (started && !out_wait(&o))
      snprintf(r->what, sizeof r->what, "hang: no completion in %u ms",
               FM_HANG_MS);
    sluice_channel_del(ch);
  }
  if (sc == SC_ACCEPT && srv)
    sluice_server_del(srv);
  r->count = sluice__failmalloc_count();
  r->fired = sluice__failmalloc_fired();
  sluice__failmalloc_disarm();
  if (sc != SC_ACCEPT)
    sluice_server_del(srv);
  sluice_channel_opts_del(co);

  /* The verdict. */
  if (r->what[0]) {
    /* a hang, said above */
  } else if (ch && started && o.done != 1) {
    snprintf(r->what, sizeof r->what, "completion fired %d times", o.done);
  } else if (ch && started && !allowed(o.code)) {
    snprintf(r->what, sizeof r->what, "status %s: %s",
             sluice_status_name(o.code), o.message);
  } else if (ch && started && o.code == SLUICE_STATUS_OK && o.bad_answer) {
    snprintf(r->what, sizeof r->what, "OK with a wrong answer");
  } else if (ch && !started && start_rc != SLUICE_ERR_NOMEM) {
    snprintf(r->what, sizeof r->what, "call start: %s",
             sluice_strerror(start_rc));
  } else if (atomic_load(&g_srv_started) != atomic_load(&g_srv_done)) {
    snprintf(r->what, sizeof r->what, "server calls: %d started, %d ended",
             atomic_load(&g_srv_started), atomic_load(&g_srv_done));
  }
  r->ok = srv && ch && started && o.done == 1 && o.code == SLUICE_STATUS_OK &&
          !o.bad_answer;
  r->end = !srv       ? END_SERVER
           : !ch      ? END_CHANNEL
           : !started ? END_START
                      : (int)o.code;
  if (!r->ok && !r->what[0] && !r->fired)
    snprintf(r->what, sizeof r->what,
             "failed without an injected failure (server %s, channel %s, "
             "start %s, status %s: %s)",
             srv ? "up" : sluice_strerror(rc),
             ch ? "up" : sluice_strerror(ch_rc),
             started ? "ok" : sluice_strerror(start_rc),
             sluice_status_name(o.code), o.message);
  pthread_mutex_destroy(&o.mu);
  pthread_cond_destroy(&o.cv);
#ifdef FM_LSAN
  if (!r->what[0] && __lsan_do_recoverable_leak_check() != 0)
    snprintf(r->what, sizeof r->what, "leak (LeakSanitizer's report above)");
#endif
}

static void print_fire(long n) {
  fprintf(stderr, "failmalloc: allocation %ld fails here:\n", n);
#ifdef FM_LSAN
  __sanitizer_print_stack_trace();
#endif
}

/* A run that takes this long hangs somewhere the run's own bounded waits
 * do not cover (a destroy waiting forever): say which n, show every
 * thread's stack when gdb is at hand, and stop. */
#define FM_RUN_LIMIT_S 120u
static volatile long g_run_n;

static void on_alarm(int sig) {
  (void)sig;
  char msg[128];
  int len = snprintf(msg, sizeof msg, "failmalloc: run n=%ld hangs\n", g_run_n);
  if (write(2, msg, (size_t)len) < 0) {
  }
  char pid[32];
  snprintf(pid, sizeof pid, "%d", (int)getpid());
  pid_t child = fork();
  if (child == 0) {
    execlp("gdb", "gdb", "-p", pid, "-batch", "-ex", "thread apply all bt 30",
           (char *)NULL);
    _exit(127);
  }
  if (child > 0)
    waitpid(child, NULL, 0);
  abort();
}

static long env_long(const char *name, long dflt) {
  const char *v = getenv(name);
  return v && *v ? strtol(v, NULL, 10) : dflt;
}

int main(int argc, char **argv) {
  /* Before anything allocates through them. */
  if (!CRYPTO_set_mem_functions(ssl_m, ssl_r, ssl_f)) {
    fprintf(stderr, "failmalloc: cannot install the allocators\n");
    return 1;
  }
  e2e_init();
  static const char *const names[] = {"unary", "stream", "tls", "accept"};
  scenario sc = SC_UNARY;
  int found = 0;
  for (int i = 0; argc > 1 && i < 4; i++)
    if (strcmp(argv[1], names[i]) == 0)
      sc = (scenario)i, found = 1;
  if (!found || (sc == SC_TLS && argc < 3)) {
    fprintf(stderr, "usage: failmalloc unary|stream|tls|accept [CERT_DIR]\n");
    return 2;
  }
  g_certs = argc > 2 ? argv[2] : ".";
  signal(SIGALRM, on_alarm);
  if (env_long("FAILMALLOC_TRACE", 0))
    sluice__failmalloc_on_fire(print_fire);

  run_result r;
  run(sc, 0, &r); /* counts only */
  if (!r.ok) {
    fprintf(stderr, "failmalloc %s: the run without failures failed: %s\n",
            names[sc], r.what);
    return 1;
  }
  long total = r.count, stride = env_long("FAILMALLOC_STRIDE", 1);
  if (stride < 1)
    stride = 1;
  /* A stride samples; a random start makes every n reachable over many
   * runs (ctest uses one for the slow TLS sweep). */
  long from = env_long("FAILMALLOC_FROM", 1 + (long)getpid() % stride);
  fprintf(stderr, "failmalloc %s: %ld allocations in a clean run\n", names[sc],
          total);
  /* Until a run meets no armed failure: the count varies a little between
   * runs (threads), so the end is found, not taken from the first run. The
   * bound only stops a runaway. */
  int verbose = env_long("FAILMALLOC_VERBOSE", 0) != 0;
  long findings = 0, runs = 0, ends[END_KINDS] = {0}, n;
  for (n = from; n < from + 4 * total + 1000; n += stride) {
    g_run_n = n;
    alarm(FM_RUN_LIMIT_S);
    run(sc, n, &r);
    alarm(0);
    runs++;
    if (r.end >= 0 && r.end < END_KINDS)
      ends[r.end]++;
    if (verbose)
      fprintf(stderr, "failmalloc %s: n=%ld ended %d%s\n", names[sc], n, r.end,
              r.fired ? "" : " (no failure met)");
    if (r.what[0]) {
      findings++;
      fprintf(stderr, "failmalloc %s: n=%ld: %s\n", names[sc], n, r.what);
    }
    if (!r.fired)
      break;
    if (n % 200 == 0)
      fprintf(stderr, "failmalloc %s: n=%ld of ~%ld, %ld findings\n", names[sc],
              n, total, findings);
  }
  fprintf(stderr, "failmalloc %s: how the runs ended:", names[sc]);
  for (int e = 0; e < END_KINDS; e++)
    if (ends[e])
      fprintf(stderr, " %s %ld,",
              e == END_SERVER    ? "server not up"
              : e == END_CHANNEL ? "no channel"
              : e == END_START   ? "call not started"
                                 : sluice_status_name((sluice_status_code)e),
              ends[e]);
  fprintf(stderr, "\n");
  fprintf(stderr,
          "failmalloc %s: %ld runs (n=%ld..%ld, stride %ld), %ld findings; "
          "the last run met no failure and %s\n",
          names[sc], runs, from, n, stride, findings,
          r.ok ? "succeeded" : "did not succeed");
  return findings == 0 && r.ok && !r.fired ? 0 : 1;
}
