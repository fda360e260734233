/* echo_server: the sluice side of the benchmarks, serving bench.Echo.
 *
 *   echo_server [--port N] [--host H] [--threads T] [--delay-us D]
 *               [--tls_cert FILE --tls_key FILE] [--raw]
 *
 * Unary answers with the request message itself (no copy on our side: the
 * decoded request is serialized straight into the response). Bidi sends
 * every message back as it arrives, the message the library handed to
 * on_message; only when the send queue is full (SLUICE_ERR_FULL) is that
 * one message copied, the call's receiving side paused, and the copy sent
 * on on_send_ready.
 *
 * --raw: bench.Echo served raw (echo_raw.c): requests and responses as
 * serialized buffers, the request's own buffer sent back; no protobuf
 * copies at all. Not with --delay-us.
 *
 * --delay-us D: every unary reply leaves D microseconds after its request
 * arrived (a delay line: one thread replies in arrival order), so the
 * server behaves as a fixed-latency service whose throughput is set by the
 * caller's concurrency (N outstanding / D), far from any CPU limit: the
 * setting in which two load generators must report the same numbers
 * (tools/sluice-bench/compare_h2load.sh).
 *
 * Upload (client streaming) counts the payload bytes and messages that
 * arrive and answers with the totals once the client half-closed. Download
 * (server streaming) sends BulkRequest.total payload bytes in messages of
 * BulkRequest.size bytes, all from one buffer of 'x': it sends until the
 * send queue is full (SLUICE_ERR_FULL), goes on from on_send_ready, and
 * finishes OK after the last one.
 *
 * Prints "listening on <port>" on stdout once it accepts (port 0 picks a
 * free one). SIGINT or SIGTERM shut it down gracefully (GOAWAY, 2 s drain).
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <pthread.h>
#include <sluice/sluice.h>

#include "echo.sluice.h"
#include "echo_raw.h"
#include "serve.h"

#define SHUTDOWN_GRACE_MS 2000

/* ---- Unary */

static void unary(sluice_server_call *call, const Bench__EchoMsg *req,
                  void *user_data) {
  (void)user_data;
  bench__echo__unary__reply(call, req);
}

/* ---- the delay line (--delay-us) */

typedef struct delayed {
  sluice_server_call *call;
  const Bench__EchoMsg *req; /* borrowed until the call is finished */
  uint64_t due_ns;
  struct delayed *next;
} delayed;

static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  delayed *head, *tail;
  int stop;
  uint64_t delay_ns;
  pthread_t thread;
} g_line = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static void unary_delayed(sluice_server_call *call, const Bench__EchoMsg *req,
                          void *user_data) {
  (void)user_data;
  delayed *d = malloc(sizeof *d);
  if (!d) {
    sluice_server_call_finish(call, SLUICE_STATUS_RESOURCE_EXHAUSTED,
                              "out of memory", NULL);
    return;
  }
  d->call = call;
  d->req = req;
  d->due_ns = sluice_now_ns() + g_line.delay_ns;
  d->next = NULL;
  pthread_mutex_lock(&g_line.mu);
  if (g_line.tail)
    g_line.tail->next = d;
  else
    g_line.head = d;
  g_line.tail = d;
  pthread_cond_signal(&g_line.cv);
  pthread_mutex_unlock(&g_line.mu);
}

/* Replies in arrival order, each at its due time (every call has the same
 * delay, so the queue is sorted by due time). At stop, replies to what is
 * left at once. */
static void *delay_line(void *arg) {
  (void)arg;
  pthread_mutex_lock(&g_line.mu);
  for (;;) {
    while (!g_line.head && !g_line.stop)
      pthread_cond_wait(&g_line.cv, &g_line.mu);
    if (!g_line.head)
      break;
    delayed *d = g_line.head;
    uint64_t now = sluice_now_ns();
    if (d->due_ns > now && !g_line.stop) {
      pthread_mutex_unlock(&g_line.mu);
      uint64_t wait = d->due_ns - now;
      struct timespec ts = {(time_t)(wait / 1000000000u),
                            (long)(wait % 1000000000u)};
      nanosleep(&ts, NULL);
      pthread_mutex_lock(&g_line.mu);
      continue;
    }
    g_line.head = d->next;
    if (!g_line.head)
      g_line.tail = NULL;
    pthread_mutex_unlock(&g_line.mu);
    bench__echo__unary__reply(d->call, d->req);
    free(d);
    pthread_mutex_lock(&g_line.mu);
  }
  pthread_mutex_unlock(&g_line.mu);
  return NULL;
}

/* ---- Bidi: every callback on the call's loop thread, no locks */

typedef struct bidi_state {
  Bench__EchoMsg pending; /* a copy the full send queue refused */
  int has_pending;
  int half_closed; /* the client sends no more messages */
  int finished;    /* finish was called */
} bidi_state;

static void bidi_finish(bidi_state *s, sluice_server_call *call,
                        sluice_status_code code, const char *message) {
  if (s->finished)
    return;
  s->finished = 1;
  sluice_server_call_finish(call, code, message, NULL);
}

static void drop_pending(bidi_state *s) {
  free(s->pending.payload.data);
  s->pending.payload.data = NULL;
  s->pending.payload.len = 0;
  s->has_pending = 0;
}

/* Keeps a copy of msg for on_send_ready. Returns 0 or -1 (no memory). */
static int keep_pending(bidi_state *s, const Bench__EchoMsg *msg) {
  bench__echo_msg__init(&s->pending);
  size_t len = msg->payload.len;
  if (len > 0) {
    if ((s->pending.payload.data = malloc(len)) == NULL)
      return -1;
    memcpy(s->pending.payload.data, msg->payload.data, len);
  }
  s->pending.payload.len = len;
  s->has_pending = 1;
  return 0;
}

static void bidi_on_message(sluice_server_call *call,
                            const ProtobufCMessage *msg, void *user_data) {
  bidi_state *s = user_data;
  if (s->finished)
    return;
  const Bench__EchoMsg *m = (const Bench__EchoMsg *)msg;
  int rc = bench__echo__bidi__send_response(call, m);
  if (rc == 0)
    return;
  if (rc != SLUICE_ERR_FULL) {
    bidi_finish(s, call, SLUICE_STATUS_INTERNAL, sluice_strerror(rc));
    return;
  }
  /* Full: hold this one message and stop reading until it drains. */
  if (keep_pending(s, m) != 0) {
    bidi_finish(s, call, SLUICE_STATUS_RESOURCE_EXHAUSTED, "out of memory");
    return;
  }
  sluice_server_call_set_recv_paused(call, 1);
}

static void bidi_on_send_ready(sluice_server_call *call, void *user_data) {
  bidi_state *s = user_data;
  if (!s->has_pending || s->finished)
    return;
  int rc = bench__echo__bidi__send_response(call, &s->pending);
  if (rc == SLUICE_ERR_FULL)
    return; /* another on_send_ready follows */
  drop_pending(s);
  if (rc != 0)
    bidi_finish(s, call, SLUICE_STATUS_INTERNAL, sluice_strerror(rc));
  else if (s->half_closed)
    bidi_finish(s, call, SLUICE_STATUS_OK, NULL);
  else
    sluice_server_call_set_recv_paused(call, 0);
}

static void bidi_on_half_close(sluice_server_call *call, void *user_data) {
  bidi_state *s = user_data;
  s->half_closed = 1;
  if (!s->has_pending) /* else once the last echo is queued */
    bidi_finish(s, call, SLUICE_STATUS_OK, NULL);
}

static void bidi_on_done(sluice_server_call *call, int cancelled,
                         void *user_data) {
  (void)cancelled;
  bidi_state *s = user_data;
  bidi_finish(s, call, SLUICE_STATUS_CANCELLED, NULL);
  drop_pending(s);
  free(s);
}

static void bidi(sluice_server_call *call, void *user_data) {
  (void)user_data;
  bidi_state *s = calloc(1, sizeof *s);
  const sluice_server_call_handlers h = {
      .on_message = bidi_on_message,
      .on_half_close = bidi_on_half_close,
      .on_send_ready = bidi_on_send_ready,
      .on_done = bidi_on_done,
  };
  if (s == NULL || sluice_server_call_set_handlers(call, &h, s) != 0) {
    free(s);
    sluice_server_call_finish(call, SLUICE_STATUS_RESOURCE_EXHAUSTED,
                              "cannot set up the call", NULL);
  }
}

/* ---- Upload: counts, answers with the totals */

typedef struct upload_state {
  uint64_t bytes, messages;
  int finished;
} upload_state;

static void upload_on_message(sluice_server_call *call,
                              const Bench__EchoMsg *msg, void *user_data) {
  (void)call;
  upload_state *s = user_data;
  s->bytes += msg->payload.len;
  s->messages++;
}

static void upload_on_half_close(sluice_server_call *call, void *user_data) {
  upload_state *s = user_data;
  if (s->finished)
    return;
  Bench__BulkCount count = BENCH__BULK_COUNT__INIT;
  count.bytes = s->bytes;
  count.messages = s->messages;
  s->finished = 1;
  bench__echo__upload__reply(call, &count);
}

static void upload_on_done(sluice_server_call *call, int cancelled,
                           void *user_data) {
  (void)cancelled;
  upload_state *s = user_data;
  if (!s->finished)
    sluice_server_call_finish(call, SLUICE_STATUS_CANCELLED, NULL, NULL);
  free(s);
}

static void upload(sluice_server_call *call, void *user_data) {
  (void)user_data;
  upload_state *s = calloc(1, sizeof *s);
  const Bench__Echo__Upload_ServerHandlers h = {
      .on_message = upload_on_message,
      .on_half_close = upload_on_half_close,
      .on_done = upload_on_done,
  };
  if (s == NULL || bench__echo__upload__set_handlers(call, &h, s) != 0) {
    free(s);
    sluice_server_call_finish(call, SLUICE_STATUS_RESOURCE_EXHAUSTED,
                              "cannot set up the call", NULL);
  }
}

/* ---- Download: streams total bytes, size bytes a message */

#define BULK_MAX_SIZE ((4u << 20) - 64u) /* gRPC's default limit, framed */

typedef struct download_state {
  uint8_t *buf; /* size bytes of 'x' */
  uint64_t left;
  uint32_t size;
  int finished;
} download_state;

static void download_finish(download_state *s, sluice_server_call *call,
                            sluice_status_code code, const char *message) {
  if (s->finished)
    return;
  s->finished = 1;
  sluice_server_call_finish(call, code, message, NULL);
}

/* Sends until the queue is full or everything is queued. */
static void download_pump(sluice_server_call *call, download_state *s) {
  while (!s->finished && s->left > 0) {
    Bench__EchoMsg m = BENCH__ECHO_MSG__INIT;
    m.payload.data = s->buf;
    m.payload.len = s->left < s->size ? (size_t)s->left : s->size;
    int rc = bench__echo__download__send_response(call, &m);
    if (rc == SLUICE_ERR_FULL)
      return; /* on_send_ready goes on */
    if (rc != 0) {
      download_finish(s, call, SLUICE_STATUS_INTERNAL, sluice_strerror(rc));
      return;
    }
    s->left -= m.payload.len;
  }
  download_finish(s, call, SLUICE_STATUS_OK, NULL);
}

static void download_on_send_ready(sluice_server_call *call, void *user_data) {
  download_pump(call, user_data);
}

static void download_on_done(sluice_server_call *call, int cancelled,
                             void *user_data) {
  (void)cancelled;
  download_state *s = user_data;
  download_finish(s, call, SLUICE_STATUS_CANCELLED, NULL);
  free(s->buf);
  free(s);
}

static void download(sluice_server_call *call, const Bench__BulkRequest *req,
                     void *user_data) {
  (void)user_data;
  if (req->size == 0 || req->size > BULK_MAX_SIZE) {
    sluice_server_call_finish(call, SLUICE_STATUS_INVALID_ARGUMENT,
                              "size must be 1 .. 4 MiB - 64", NULL);
    return;
  }
  download_state *s = calloc(1, sizeof *s);
  uint8_t *buf = malloc(req->size);
  const Bench__Echo__Download_ServerHandlers h = {
      .on_send_ready = download_on_send_ready,
      .on_done = download_on_done,
  };
  if (s == NULL || buf == NULL) {
    free(s);
    free(buf);
    sluice_server_call_finish(call, SLUICE_STATUS_RESOURCE_EXHAUSTED,
                              "out of memory", NULL);
    return;
  }
  memset(buf, 'x', req->size);
  s->buf = buf;
  s->size = req->size;
  s->left = req->total;
  if (bench__echo__download__set_handlers(call, &h, s) != 0) {
    free(buf);
    free(s);
    sluice_server_call_finish(call, SLUICE_STATUS_INTERNAL,
                              "cannot set up the call", NULL);
    return;
  }
  download_pump(call, s); /* on the loop thread, as on_send_ready */
}

/* ---- command line */

static void usage(FILE *f, const char *prog) {
  fprintf(f,
          "usage: %s [--port N] [--host H] [--threads T] [--delay-us D]\n"
          "          [--tls_cert FILE --tls_key FILE]\n"
          "  --port N     port to listen on (default 50051; 0 picks a free "
          "one)\n"
          "  --host H     address to listen on (default 127.0.0.1)\n"
          "  --threads T  server loop threads (default: one per core)\n"
          "  --delay-us D every unary reply D us after its request (a "
          "fixed-latency service)\n"
          "  --tls_cert FILE, --tls_key FILE\n"
          "               accept TLS only, with this certificate chain and "
          "key (PEM)\n"
          "  --no-health  do not serve grpc.health.v1.Health (on by default)\n"
          "  --raw        serve bench.Echo raw (serialized buffers, no\n"
          "               protobuf decoding; not with --delay-us)\n"
          "  --max-streams N  SETTINGS_MAX_CONCURRENT_STREAMS (default 1000)\n"
          "%s",
          prog, sluice_example_conn_flags_usage);
}

int main(int argc, char **argv) {
  const char *prog = argv[0];
  const char *host = "127.0.0.1";
  const char *tls_cert = NULL, *tls_key = NULL;
  unsigned long port = 50051, threads = 0, delay_us = 0, max_streams = 0;
  sluice_example_conn_flags conn_flags;
  sluice_example_conn_flags_init(&conn_flags);
  int health = 1, raw = 0;

  for (int i = 1; i < argc; i++) {
    const char *flag = argv[i];
    if (strcmp(flag, "--help") == 0 || strcmp(flag, "-h") == 0) {
      usage(stdout, prog);
      return 0;
    }
    if (strcmp(flag, "--no-health") == 0) {
      health = 0;
      continue;
    }
    if (strcmp(flag, "--raw") == 0) {
      raw = 1;
      continue;
    }
    const char *val = i + 1 < argc ? argv[++i] : NULL;
    int bad = 0;
    if (sluice_example_conn_flag(flag, val, &conn_flags, &bad)) {
      /* parsed */
    } else if (strcmp(flag, "--port") == 0) {
      bad = sluice_example_parse_ulong(val, 65535, &port);
    } else if (strcmp(flag, "--threads") == 0) {
      bad = sluice_example_parse_ulong(val, 1024, &threads);
    } else if (strcmp(flag, "--delay-us") == 0) {
      bad = sluice_example_parse_ulong(val, 60000000, &delay_us);
    } else if (strcmp(flag, "--max-streams") == 0) {
      bad = sluice_example_parse_ulong(val, 1000000, &max_streams) ||
            max_streams == 0;
    } else if (strcmp(flag, "--host") == 0) {
      bad = val == NULL || *val == '\0';
      host = val;
    } else if (strcmp(flag, "--tls_cert") == 0) {
      bad = val == NULL || *val == '\0';
      tls_cert = val;
    } else if (strcmp(flag, "--tls_key") == 0) {
      bad = val == NULL || *val == '\0';
      tls_key = val;
    } else {
      fprintf(stderr, "%s: unknown argument '%s'\n", prog, flag);
      usage(stderr, prog);
      return 2;
    }
    if (bad) {
      fprintf(stderr, "%s: %s needs a valid value\n", prog, flag);
      usage(stderr, prog);
      return 2;
    }
  }
  if (raw && delay_us) {
    fprintf(stderr, "%s: --raw and --delay-us do not go together\n", prog);
    return 2;
  }
  if (!tls_cert != !tls_key) {
    fprintf(stderr, "%s: --tls_cert and --tls_key go together\n", prog);
    return 2;
  }

  /* Before any thread exists (see serve.h). */
  sigset_t stop_signals;
  sluice_example_block_signals(&stop_signals);

  char address[300];
  if (sluice_example_address(address, sizeof address, host, port, prog) != 0)
    return 2;

  int exit_code = 1, rc;
  sluice_server_opts *opts = NULL;
  sluice_server *srv = NULL;
  const Bench__Echo_SluiceHandlers handlers = {.unary = delay_us ? unary_delayed
                                                                 : unary,
                                               .bidi = bidi,
                                               .upload = upload,
                                               .download = download};
  int line_started = 0;
  if (delay_us) {
    g_line.delay_ns = (uint64_t)delay_us * 1000u;
    if (pthread_create(&g_line.thread, NULL, delay_line, NULL) != 0) {
      fprintf(stderr, "%s: cannot start the delay line\n", prog);
      return 1;
    }
    line_started = 1;
  }

  if ((rc = sluice_server_opts_new(&opts)) != 0 ||
      (rc = sluice_server_opts_set_threads(opts, (unsigned)threads)) != 0 ||
      (rc = sluice_server_opts_set_health(opts, health)) != 0 ||
      (max_streams && (rc = sluice_server_opts_set_max_concurrent_streams(
                           opts, (uint32_t)max_streams)) != 0)) {
    fprintf(stderr, "%s: cannot create the server: %s\n", prog,
            sluice_strerror(rc));
    goto out;
  }
  if (sluice_example_apply_conn_flags(opts, &conn_flags, prog) != 0) {
    exit_code = 2;
    goto out;
  }
  if (tls_cert &&
      sluice_example_server_tls(opts, tls_cert, tls_key, NULL, 0, prog) != 0) {
    exit_code = 2; /* bad arguments */
    goto out;
  }
  if ((rc = sluice_server_new(&srv, opts)) != 0) {
    fprintf(stderr, "%s: cannot create the server: %s\n", prog,
            sluice_strerror(rc));
    goto out;
  }
  if ((rc = raw ? echo_raw_register(srv)
                : bench__echo__sluice_register(srv, &handlers, NULL)) != 0) {
    fprintf(stderr, "%s: cannot register Echo: %s\n", prog,
            sluice_strerror(rc));
    goto out;
  }
  exit_code = sluice_example_serve(srv, address, &stop_signals,
                                   SHUTDOWN_GRACE_MS, prog);

out:
  if (line_started) {
    /* After shutdown the late replies are harmless; the line must be
     * empty before the server is freed. */
    pthread_mutex_lock(&g_line.mu);
    g_line.stop = 1;
    pthread_cond_signal(&g_line.cv);
    pthread_mutex_unlock(&g_line.mu);
    pthread_join(g_line.thread, NULL);
  }
  sluice_server_del(srv);
  sluice_server_opts_del(opts);
  return exit_code;
}
