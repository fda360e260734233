/* echo_client: the sluice side of the client benchmark, calling
 * /bench.Echo/Unary with the generated stubs.
 *
 *   echo_client --target HOST:PORT [--concurrency N] [--connections C]
 *               [--duration S] [--warmup S] [--size B] [--rate R]
 *               [--lb NAME] [--raw] [--use_tls [--tls_ca FILE]
 *               [--server_host_override NAME]]
 *   echo_client --target HOST:PORT --bulk upload|download --total BYTES
 *               --size B [--timeout S] [--use_tls ...]
 *
 * Closed loop (default): N calls outstanding at all times, spread over C
 * channels (one TCP connection each); each completion starts the next call.
 * Open loop (--rate R): R calls per second in total, started on schedule
 * whatever the server does, each call's latency measured from its intended
 * start (no coordinated omission); calls that could not start because
 * 100000 were already outstanding are counted as "missed". A timerfd on the
 * loop wakes it at the next intended start, but at most once per 50 us
 * (MIN_WAKE_NS): at high rates calls start in small bursts, up to 50 us
 * late, and that counts in their latency (bench/cpp/echo_client.cc
 * schedules the same way).
 *
 * Everything runs on one libuv loop on the main thread: the channels are
 * created on it (sluice_channel_opts_set_loop), so every callback and every
 * new call stay on that thread with no hand-off. Channels use the "rr"
 * strategy by default (no admission limits, as a gRPC channel), so every
 * call goes out; --lb btc measures the default strategy instead.
 *
 * --raw: raw calls (sluice_call_start_raw, sluice/buf.h): each request is
 * a copy of the serialized request into a new sluice_buf (the one copy an
 * application filling its own buffer makes), handed over without another;
 * each response arrives as a buffer, checked by its length, not decoded.
 * Against `echo_server --raw` this is the zero-copy path end to end.
 *
 * Output (stdout), one line, the same keys as bench/cpp/echo_client:
 *   {"client":"sluice" (or
 * "sluice-raw"),"mode":"closed","concurrency":N,"connections":C,
 *    "size":B,"duration_s":S,"calls":K,"errors":E,"missed":M,
 *    "calls_per_s":X,"p50_us":..,"p90_us":..,"p99_us":..,"p999_us":..,
 *    "max_us":..}
 * Latencies are exact percentiles of every call completed in the measured
 * window (after --warmup, default 0.5 s); errors are calls completed with a
 * status other than OK or a payload of the wrong size.
 *
 * Bulk mode (--bulk): one call on one connection moves --total payload
 * bytes in messages of --size bytes (the last one shorter if size does not
 * divide total): upload = /bench.Echo/Upload, client streaming, sent as
 * fast as the send queue takes them (until SLUICE_ERR_FULL, then on
 * on_send_ready), the server answers with the totals it counted; download
 * = /bench.Echo/Download, server streaming. An empty unary call first, so
 * that the connection (and the TLS handshake) is up before the clock
 * starts; the clock stops at on_done. Bounded by --timeout (the call's
 * deadline, default 120 s). Output, one line, the same keys as
 * bench/cpp/echo_client --bulk:
 *   {"client":"sluice","mode":"upload","size":B,"total":N,"bytes":K,
 *    "messages":M,"seconds":S,"mb_per_s":X,"errors":E}
 * bytes and messages: as the receiver counted them; MB = 10^6 bytes;
 * errors: 1 if the call failed or the count is not total.
 *
 * --use_tls: over TLS (OpenSSL), trusting the CA certificates of --tls_ca
 * (default: the system's); --server_host_override NAME: the name to check
 * the server's certificate against (default: the target's host).
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <sluice/sluice.h>
#include <uv.h>

#include "echo.sluice.h"

#define MAX_OUTSTANDING 100000u
#define CALL_TIMEOUT_MS 10000u
#define MIN_WAKE_NS 50000u
#define BULK_MAX_SIZE ((4u << 20) - 64u) /* gRPC's default limit, framed */

typedef struct bench {
  uv_loop_t loop;
  uv_timer_t tick; /* open loop: the schedule; closed loop: end of run */
  uv_poll_t sched; /* open loop: a timerfd at the next intended start */
  int tfd;
  sluice_channel **channels;
  unsigned n_channels, next_channel;
  Bench__EchoMsg req;
  sluice_call_opts opts;
  int raw;           /* --raw */
  uint8_t *req_wire; /* --raw: the serialized request, copied per call */
  size_t req_wire_len;

  /* settings */
  unsigned concurrency;
  double rate; /* 0: closed loop */
  size_t size;

  /* run state, all on the loop thread */
  uint64_t t0, warm_end, end; /* sluice_now_ns() */
  uint64_t scheduled;         /* open loop: calls due so far */
  unsigned outstanding;
  int stopping;

  /* results (measured window only) */
  uint64_t *lat_ns;
  size_t n_lat, cap_lat;
  uint64_t errors, missed, first_error_code;
  char first_error[160];
} bench;

typedef struct call_ctx {
  bench *b;
  uint64_t start_ns; /* intended start (open loop) or actual start */
  size_t raw_len;    /* --raw: the response's length; SIZE_MAX: none */
} call_ctx;

static void start_call(bench *b, call_ctx *c);
static void schedule(bench *b, uint64_t now);

static void record(bench *b, uint64_t ns) {
  if (b->n_lat == b->cap_lat) {
    size_t cap = b->cap_lat ? b->cap_lat * 2 : 1u << 16;
    uint64_t *p = realloc(b->lat_ns, cap * sizeof *p);
    if (p == NULL)
      return; /* drop the sample rather than the run */
    b->lat_ns = p;
    b->cap_lat = cap;
  }
  b->lat_ns[b->n_lat++] = ns;
}

static void maybe_finish(bench *b) {
  if (b->stopping && b->outstanding == 0) {
    uv_timer_stop(&b->tick);
    if (b->rate > 0)
      uv_poll_stop(&b->sched);
    uv_stop(&b->loop);
  }
}

/* A completed call: ok when it answered OK with the right payload. */
static void completed(call_ctx *c, const sluice_status *st, int ok) {
  bench *b = c->b;
  uint64_t now = sluice_now_ns();
  b->outstanding--;
  if (c->start_ns >= b->warm_end && now <= b->end) {
    if (ok) {
      record(b, now - c->start_ns);
    } else {
      if (b->errors++ == 0) {
        b->first_error_code = (uint64_t)st->code;
        snprintf(b->first_error, sizeof b->first_error, "%s: %s",
                 sluice_status_name(st->code),
                 st->code == SLUICE_STATUS_OK ? "wrong payload size"
                 : st->message                ? st->message
                                              : "");
      }
    }
  }
  if (b->rate == 0 && now < b->end && !b->stopping) {
    start_call(b, c); /* closed loop: the next call takes this slot */
    return;
  }
  free(c);
  maybe_finish(b);
}

static void on_reply(const sluice_status *st, const Bench__EchoMsg *resp,
                     void *user_data) {
  call_ctx *c = user_data;
  completed(c, st,
            st->code == SLUICE_STATUS_OK && resp != NULL &&
                resp->payload.len == c->b->size);
}

/* --raw: the echo is the request's bytes back. */
static void on_raw_message(sluice_call *call, sluice_buf *msg, void *ud) {
  (void)call;
  call_ctx *c = ud;
  c->raw_len = sluice_buf_len(msg);
  sluice_buf_free(msg);
}

static void on_raw_done(sluice_call *call, const sluice_status *st, void *ud) {
  call_ctx *c = ud;
  sluice_call_release(call);
  completed(c, st,
            st->code == SLUICE_STATUS_OK && c->raw_len == c->b->req_wire_len);
}

static const sluice_call_raw_handlers raw_handlers = {NULL, on_raw_message,
                                                      NULL, on_raw_done};

static int start_raw(bench *b, sluice_channel *ch, call_ctx *c) {
  sluice_buf *req;
  sluice_call *call;
  c->raw_len = SIZE_MAX;
  if (sluice_buf_new(b->req_wire_len, &req) != 0)
    return -1;
  memcpy(sluice_buf_data(req), b->req_wire, b->req_wire_len);
  if (sluice_call_start_raw(ch, &bench__echo__sluice_methods[0], &b->opts,
                            &raw_handlers, c, &call) != 0) {
    sluice_buf_free(req);
    return -1;
  }
  if (sluice_call_send_buf(call, req) != 0)
    sluice_buf_free(req); /* the call fails; on_done counts it */
  sluice_call_close_send(call);
  return 0;
}

static void start_call(bench *b, call_ctx *c) {
  sluice_channel *ch = b->channels[b->next_channel];
  b->next_channel = (b->next_channel + 1) % b->n_channels;
  if (b->rate == 0)
    c->start_ns = sluice_now_ns();
  b->outstanding++;
  if (b->raw ? start_raw(b, ch, c) != 0
             : bench__echo__unary__async(ch, &b->req, &b->opts, on_reply, c) !=
                   0) {
    b->outstanding--;
    b->errors++;
    free(c);
    maybe_finish(b);
  }
}

static void on_tick(uv_timer_t *t) {
  bench *b = t->data;
  uint64_t now = sluice_now_ns();
  if (now >= b->end) {
    b->stopping = 1;
    uv_timer_stop(&b->tick);
    maybe_finish(b);
  }
}

/* Open loop: starts every call whose intended time has come (call k is
 * intended at t0 + k / rate). */
static void schedule(bench *b, uint64_t now) {
  uint64_t due = (uint64_t)((double)(now - b->t0) * 1e-9 * b->rate) + 1;
  while (b->scheduled < due) {
    uint64_t intended =
        b->t0 + (uint64_t)((double)b->scheduled * 1e9 / b->rate);
    b->scheduled++;
    if (b->outstanding >= MAX_OUTSTANDING) {
      if (intended >= b->warm_end)
        b->missed++;
      continue;
    }
    call_ctx *c = malloc(sizeof *c);
    if (c == NULL) {
      b->missed++;
      continue;
    }
    c->b = b;
    c->start_ns = intended;
    start_call(b, c);
  }
}

/* Arms the timerfd for the next intended start, at least MIN_WAKE_NS from
 * now. */
static void arm(bench *b, uint64_t now) {
  uint64_t next = b->t0 + (uint64_t)((double)b->scheduled * 1e9 / b->rate);
  if (next < now + MIN_WAKE_NS)
    next = now + MIN_WAKE_NS;
  struct itimerspec it = {{0, 0}, {0, 0}};
  it.it_value.tv_sec = (time_t)(next / 1000000000u);
  it.it_value.tv_nsec = (long)(next % 1000000000u);
  timerfd_settime(b->tfd, TFD_TIMER_ABSTIME, &it, NULL);
}

static void on_sched(uv_poll_t *h, int status, int events) {
  (void)status;
  (void)events;
  bench *b = h->data;
  uint64_t expirations;
  if (read(b->tfd, &expirations, sizeof expirations) < 0 && errno != EAGAIN)
    return;
  uint64_t now = sluice_now_ns();
  if (b->stopping || now >= b->end)
    return; /* the tick ends the run */
  schedule(b, now);
  arm(b, now);
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static double pct_us(const uint64_t *v, size_t n, double q) {
  if (n == 0)
    return 0;
  size_t i = (size_t)ceil(q * (double)n);
  if (i > 0)
    i--;
  if (i >= n)
    i = n - 1;
  return (double)v[i] / 1000.0;
}

/* ---- bulk mode */

typedef struct bulk {
  uv_loop_t loop;
  sluice_channel *ch;
  sluice_call *call;
  sluice_call_opts opts;
  int upload;
  uint64_t total, sent, bytes, messages;
  size_t size;
  Bench__EchoMsg msg; /* the upload's messages, size bytes of 'x' */
  uint64_t t0, t1;
  int done, failed;
  char error[160];
} bulk;

static void bulk_fail(bulk *k, const char *what, const char *why) {
  if (k->failed++ == 0)
    snprintf(k->error, sizeof k->error, "%s: %s", what, why ? why : "");
}

/* Upload: sends until the queue is full or everything is sent. */
static void bulk_pump(bulk *k) {
  while (k->sent < k->total) {
    uint64_t left = k->total - k->sent;
    k->msg.payload.len = left < k->size ? (size_t)left : k->size;
    int rc = bench__echo__upload__send(k->call, &k->msg);
    if (rc == SLUICE_ERR_FULL)
      return; /* on_send_ready goes on */
    if (rc != 0) {
      bulk_fail(k, "send", sluice_strerror(rc));
      sluice_call_cancel(k->call, "send failed");
      return;
    }
    k->sent += k->msg.payload.len;
  }
  int rc = sluice_call_close_send(k->call);
  if (rc != 0 && rc != SLUICE_ERR_STATE)
    bulk_fail(k, "close_send", sluice_strerror(rc));
}

static void bulk_on_send_ready(sluice_call *call, void *user_data) {
  (void)call;
  bulk_pump(user_data);
}

static void upload_on_message(sluice_call *call, const Bench__BulkCount *msg,
                              void *user_data) {
  (void)call;
  bulk *k = user_data;
  k->bytes = msg->bytes;
  k->messages = msg->messages;
}

static void download_on_message(sluice_call *call, const Bench__EchoMsg *msg,
                                void *user_data) {
  (void)call;
  bulk *k = user_data;
  k->bytes += msg->payload.len;
  k->messages++;
}

static void bulk_on_done(sluice_call *call, const sluice_status *st,
                         void *user_data) {
  bulk *k = user_data;
  k->t1 = sluice_now_ns();
  if (st->code != SLUICE_STATUS_OK)
    bulk_fail(k, sluice_status_name(st->code), st->message);
  else if (k->bytes != k->total)
    bulk_fail(k, "OK", "the receiver counted a different number of bytes");
  k->done = 1;
  sluice_call_release(call);
  uv_stop(&k->loop);
}

static void bulk_start(bulk *k) {
  int rc;
  k->t0 = sluice_now_ns();
  if (k->upload) {
    const Bench__Echo__Upload_Handlers h = {
        .on_message = upload_on_message,
        .on_send_ready = bulk_on_send_ready,
        .on_done = bulk_on_done,
    };
    rc = bench__echo__upload__start(k->ch, &k->opts, &h, k, &k->call);
    if (rc == 0)
      bulk_pump(k);
  } else {
    Bench__BulkRequest req = BENCH__BULK_REQUEST__INIT;
    req.total = k->total;
    req.size = (uint32_t)k->size;
    const Bench__Echo__Download_Handlers h = {
        .on_message = download_on_message,
        .on_done = bulk_on_done,
    };
    rc = bench__echo__download__start(k->ch, &req, &k->opts, &h, k, &k->call);
  }
  if (rc != 0) {
    bulk_fail(k, "start", sluice_strerror(rc));
    k->done = 1;
    uv_stop(&k->loop);
  }
}

/* The warm-up call's answer: the connection is up, the clock starts. */
static void bulk_on_warm(const sluice_status *st, const Bench__EchoMsg *resp,
                         void *user_data) {
  (void)resp;
  bulk *k = user_data;
  if (st->code != SLUICE_STATUS_OK) {
    bulk_fail(k, "warm-up call", st->message);
    k->done = 1;
    uv_stop(&k->loop);
    return;
  }
  bulk_start(k);
}

static int run_bulk(const char *prog, const char *target,
                    sluice_channel_opts *copts, int upload, double total,
                    double size, double timeout) {
  static bulk k; /* zeroed */
  k.upload = upload;
  k.total = (uint64_t)total;
  k.size = (size_t)size;
  uint8_t *payload = malloc(k.size);
  if (payload == NULL) {
    fprintf(stderr, "%s: out of memory\n", prog);
    return 1;
  }
  memset(payload, 'x', k.size);
  bench__echo_msg__init(&k.msg);
  k.msg.payload.data = payload;
  sluice_call_opts_init(&k.opts);
  k.opts.timeout_ms = (uint64_t)(timeout * 1000);

  uv_loop_init(&k.loop);
  int rc;
  if ((rc = sluice_channel_opts_set_loop(copts, &k.loop)) != 0 ||
      (rc = sluice_channel_new(&k.ch, target, copts)) != 0) {
    fprintf(stderr, "%s: cannot make a channel to %s: %s\n", prog, target,
            sluice_strerror(rc));
    return 1;
  }
  sluice_channel_opts_del(copts);

  Bench__EchoMsg empty = BENCH__ECHO_MSG__INIT;
  sluice_call_opts warm;
  sluice_call_opts_init(&warm);
  warm.timeout_ms = CALL_TIMEOUT_MS;
  if ((rc = bench__echo__unary__async(k.ch, &empty, &warm, bulk_on_warm, &k)) !=
      0) {
    bulk_fail(&k, "warm-up call", sluice_strerror(rc));
    k.done = 1;
  }
  /* Every path ends in on_done (the call's deadline bounds it), or a
   * failure before the call exists; both stop the loop. */
  if (!k.done)
    uv_run(&k.loop, UV_RUN_DEFAULT);

  double secs = k.t1 > k.t0 ? (double)(k.t1 - k.t0) * 1e-9 : 0;
  printf("{\"client\":\"sluice\",\"mode\":\"%s\",\"size\":%zu,"
         "\"total\":%llu,\"bytes\":%llu,\"messages\":%llu,"
         "\"seconds\":%.3f,\"mb_per_s\":%.1f,\"errors\":%d}\n",
         upload ? "upload" : "download", k.size, (unsigned long long)k.total,
         (unsigned long long)k.bytes, (unsigned long long)k.messages, secs,
         secs > 0 && !k.failed ? (double)k.bytes / secs / 1e6 : 0.0,
         k.failed ? 1 : 0);
  fflush(stdout);
  if (k.failed)
    fprintf(stderr, "%s: bulk %s failed: %s\n", prog,
            upload ? "upload" : "download", k.error);

  sluice_channel_del(k.ch);
  uv_run(&k.loop, UV_RUN_DEFAULT);
  uv_loop_close(&k.loop);
  free(payload);
  return k.failed ? 1 : 0;
}

/* ---- command line */

static void usage(FILE *f, const char *prog) {
  fprintf(f,
          "usage: %s --target HOST:PORT [--concurrency N] [--connections C]\n"
          "          [--duration S] [--warmup S] [--size B] [--rate R] "
          "[--lb NAME]\n"
          "          [--use_tls [--tls_ca FILE] [--server_host_override "
          "NAME]]\n"
          "       %s --target HOST:PORT --bulk upload|download --total BYTES\n"
          "          --size B [--timeout S] [--use_tls ...]\n"
          "  --target HOST:PORT  the bench.Echo server\n"
          "  --concurrency N     calls outstanding, closed loop (default 64)\n"
          "  --connections C     channels = TCP connections (default 1)\n"
          "  --duration S        measured seconds (default 5)\n"
          "  --warmup S          seconds before measuring (default 0.5)\n"
          "  --size B            payload bytes (default 64; bulk: per "
          "message, 1 .. 4 MiB - 64)\n"
          "  --rate R            open loop: R calls/s in total\n"
          "  --lb NAME           channel strategy (default rr)\n"
          "  --bulk upload|download  one Upload (client streaming) or "
          "Download\n"
          "                      (server streaming) call of --total payload "
          "bytes\n"
          "  --total BYTES       bulk: payload bytes in all (default 256 "
          "MiB)\n"
          "  --timeout S         bulk: the call's deadline (default 120)\n"
          "  --raw               raw calls: serialized buffers, no protobuf\n"
          "                      decoding (sluice/buf.h; unary only)\n"
          "  --use_tls           call over TLS\n"
          "  --tls_ca FILE       CA certificates to trust (PEM; default: the "
          "system's)\n"
          "  --server_host_override NAME  name to verify the server's "
          "certificate\n"
          "                      against (default: the target's host)\n",
          prog, prog);
}

static int parse_double(const char *s, double min, double max, double *out) {
  char *end;
  if (s == NULL || *s == '\0')
    return -1;
  errno = 0;
  double v = strtod(s, &end);
  if (*end != '\0' || errno != 0 || !(v >= min && v <= max))
    return -1;
  *out = v;
  return 0;
}

int main(int argc, char **argv) {
  const char *prog = argv[0];
  const char *target = NULL, *lb = "rr", *bulk_mode = NULL;
  const char *tls_ca = NULL, *host_override = NULL;
  int use_tls = 0, size_given = 0;
  int raw = 0;
  double concurrency = 64, connections = 1, duration = 5, warmup = 0.5,
         size = 64, rate = 0, total = 256.0 * 1024 * 1024, timeout = 120;

  for (int i = 1; i < argc; i++) {
    const char *flag = argv[i];
    if (strcmp(flag, "--help") == 0 || strcmp(flag, "-h") == 0) {
      usage(stdout, prog);
      return 0;
    }
    if (strcmp(flag, "--raw") == 0) {
      raw = 1;
      continue;
    }
    if (strcmp(flag, "--use_tls") == 0) {
      use_tls = 1;
      continue;
    }
    const char *val = i + 1 < argc ? argv[++i] : NULL;
    int bad = 0;
    if (strcmp(flag, "--target") == 0) {
      bad = val == NULL || *val == '\0';
      target = val;
    } else if (strcmp(flag, "--lb") == 0) {
      bad = val == NULL || *val == '\0';
      lb = val;
    } else if (strcmp(flag, "--concurrency") == 0) {
      bad = parse_double(val, 1, MAX_OUTSTANDING, &concurrency);
    } else if (strcmp(flag, "--connections") == 0) {
      bad = parse_double(val, 1, 1024, &connections);
    } else if (strcmp(flag, "--duration") == 0) {
      bad = parse_double(val, 0.01, 3600, &duration);
    } else if (strcmp(flag, "--warmup") == 0) {
      bad = parse_double(val, 0, 3600, &warmup);
    } else if (strcmp(flag, "--size") == 0) {
      bad = parse_double(val, 0, 4 << 20, &size);
      size_given = 1;
    } else if (strcmp(flag, "--rate") == 0) {
      bad = parse_double(val, 0, 1e8, &rate);
    } else if (strcmp(flag, "--bulk") == 0) {
      bad = val == NULL ||
            (strcmp(val, "upload") != 0 && strcmp(val, "download") != 0);
      bulk_mode = val;
    } else if (strcmp(flag, "--total") == 0) {
      bad = parse_double(val, 1, 1e12, &total);
    } else if (strcmp(flag, "--timeout") == 0) {
      bad = parse_double(val, 0.01, 3600, &timeout);
    } else if (strcmp(flag, "--tls_ca") == 0) {
      bad = val == NULL || *val == '\0';
      tls_ca = val;
    } else if (strcmp(flag, "--server_host_override") == 0) {
      bad = val == NULL || *val == '\0';
      host_override = val;
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
  if (target == NULL) {
    fprintf(stderr, "%s: --target is required\n", prog);
    usage(stderr, prog);
    return 2;
  }
  if (!use_tls && (tls_ca != NULL || host_override != NULL)) {
    fprintf(stderr, "%s: --tls_ca and --server_host_override need --use_tls\n",
            prog);
    return 2;
  }
  if (bulk_mode != NULL && (!size_given || size < 1 || size > BULK_MAX_SIZE ||
                            size != floor(size) || total != floor(total))) {
    fprintf(stderr, "%s: --bulk needs --size 1 .. %u and whole numbers\n", prog,
            BULK_MAX_SIZE);
    return 2;
  }

  sluice_channel_opts *copts;
  int rc;
  if ((rc = sluice_channel_opts_new(&copts)) != 0 ||
      (rc = sluice_channel_opts_set_lb(copts, lb)) != 0) {
    fprintf(stderr, "%s: channel options: %s\n", prog, sluice_strerror(rc));
    return 2;
  }
  if (use_tls) {
    sluice_tls_client_config tls;
    sluice_tls_client_config_init(&tls);
    tls.ca.file = tls_ca;
    tls.server_name_override = host_override;
    if ((rc = sluice_channel_opts_set_tls(copts, &tls)) != 0) {
      fprintf(stderr, "%s: TLS: %s\n", prog,
              sluice_channel_opts_last_error(copts));
      return 2;
    }
  }
  if (bulk_mode != NULL && raw) {
    fprintf(stderr, "%s: --raw is for unary calls, not --bulk\n", prog);
    return 2;
  }
  if (bulk_mode != NULL)
    return run_bulk(prog, target, copts, strcmp(bulk_mode, "upload") == 0,
                    total, size, timeout);

  static bench b; /* large; zeroed */
  b.concurrency = (unsigned)concurrency;
  b.rate = rate;
  b.size = (size_t)size;
  b.n_channels = (unsigned)connections;
  uint8_t *payload = malloc(b.size ? b.size : 1);
  b.channels = calloc(b.n_channels, sizeof *b.channels);
  if (payload == NULL || b.channels == NULL) {
    fprintf(stderr, "%s: out of memory\n", prog);
    return 1;
  }
  memset(payload, 'x', b.size);
  bench__echo_msg__init(&b.req);
  b.req.payload.data = payload;
  b.req.payload.len = b.size;
  b.raw = raw;
  if (raw) {
    b.req_wire_len = bench__echo_msg__get_packed_size(&b.req);
    b.req_wire = malloc(b.req_wire_len ? b.req_wire_len : 1);
    if (b.req_wire == NULL) {
      fprintf(stderr, "%s: out of memory\n", prog);
      return 1;
    }
    bench__echo_msg__pack(&b.req, b.req_wire);
  }
  sluice_call_opts_init(&b.opts);
  b.opts.timeout_ms = CALL_TIMEOUT_MS;

  uv_loop_init(&b.loop);
  uv_timer_init(&b.loop, &b.tick);
  b.tick.data = &b;
  b.tfd = -1;
  if (rate > 0) {
    b.tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (b.tfd < 0 || uv_poll_init(&b.loop, &b.sched, b.tfd) != 0) {
      fprintf(stderr, "%s: timerfd: %s\n", prog, strerror(errno));
      return 1;
    }
    b.sched.data = &b;
  }

  if ((rc = sluice_channel_opts_set_loop(copts, &b.loop)) != 0) {
    fprintf(stderr, "%s: channel options: %s\n", prog, sluice_strerror(rc));
    return 2;
  }
  for (unsigned i = 0; i < b.n_channels; i++) {
    if ((rc = sluice_channel_new(&b.channels[i], target, copts)) != 0) {
      fprintf(stderr, "%s: cannot make a channel to %s: %s\n", prog, target,
              sluice_strerror(rc));
      return 1;
    }
  }
  sluice_channel_opts_del(copts);

  b.t0 = sluice_now_ns();
  b.warm_end = b.t0 + (uint64_t)(warmup * 1e9);
  b.end = b.warm_end + (uint64_t)(duration * 1e9);
  if (rate > 0) {
    uv_poll_start(&b.sched, UV_READABLE, on_sched);
    arm(&b, b.t0);
  } else {
    for (unsigned i = 0; i < b.concurrency; i++) {
      call_ctx *c = malloc(sizeof *c);
      if (c == NULL)
        break;
      c->b = &b;
      start_call(&b, c);
    }
  }
  /* Ends the run (and wakes the loop then even if every call hangs). */
  uv_timer_start(&b.tick, on_tick, (b.end - b.t0) / 1000000u + 1, 1);
  uv_run(&b.loop, UV_RUN_DEFAULT);

  qsort(b.lat_ns, b.n_lat, sizeof *b.lat_ns, cmp_u64);
  double secs = duration;
  printf("{\"client\":\"%s\",\"mode\":\"%s\",\"concurrency\":%u,"
         "\"connections\":%u,\"size\":%zu,\"rate\":%.0f,\"duration_s\":%.2f,"
         "\"calls\":%zu,\"errors\":%llu,\"missed\":%llu,"
         "\"calls_per_s\":%.0f,\"p50_us\":%.1f,\"p90_us\":%.1f,"
         "\"p99_us\":%.1f,\"p999_us\":%.1f,\"max_us\":%.1f}\n",
         raw ? "sluice-raw" : "sluice", rate > 0 ? "open" : "closed",
         rate > 0 ? 0 : b.concurrency, b.n_channels, b.size, rate, secs,
         b.n_lat, (unsigned long long)b.errors, (unsigned long long)b.missed,
         (double)b.n_lat / secs, pct_us(b.lat_ns, b.n_lat, 0.50),
         pct_us(b.lat_ns, b.n_lat, 0.90), pct_us(b.lat_ns, b.n_lat, 0.99),
         pct_us(b.lat_ns, b.n_lat, 0.999),
         b.n_lat ? (double)b.lat_ns[b.n_lat - 1] / 1000.0 : 0.0);
  if (b.errors > 0)
    fprintf(stderr, "%s: %llu errors; first: %s\n", prog,
            (unsigned long long)b.errors, b.first_error);

  /* Channels on a user loop finish closing on the next turns of it. */
  for (unsigned i = 0; i < b.n_channels; i++)
    sluice_channel_del(b.channels[i]);
  uv_close((uv_handle_t *)&b.tick, NULL);
  if (rate > 0)
    uv_close((uv_handle_t *)&b.sched, NULL);
  uv_run(&b.loop, UV_RUN_DEFAULT);
  uv_loop_close(&b.loop);
  if (b.tfd >= 0)
    close(b.tfd);
  free(b.channels);
  free(b.lat_ns);
  free(payload);
  free(b.req_wire);
  return b.n_lat > 0 && b.errors == 0 ? 0 : 1;
}
