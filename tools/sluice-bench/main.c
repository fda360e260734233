/* sluice-bench: a load generator for any gRPC unary method and for bidi
 * ping-pong, against sluice or any stock gRPC server. See usage() below and
 * tools/sluice-bench/README.md.
 *
 * Messages go through a generic "raw" message (raw.proto: a message with no
 * fields), so protobuf-c keeps every field of any request or response as
 * unknown fields and packs them back byte for byte: the tool needs no
 * generated code for the method it calls.
 *
 * Threads: every connection is one sluice channel with one ipv4:/ipv6:
 * destination, hence one TCP connection. --threads worker threads each run
 * one libuv loop; channel i is made on loop i mod T (sluice_channel_opts_
 * set_loop), so its completion callbacks run on that thread, and every
 * call starts on that thread too: no hand-off between threads per call.
 * Each worker keeps its own statistics without locks; they are merged at
 * the end. The main thread only hands each loop a command per phase (start,
 * stop, a barrier, quit: uv_async) and reports progress.
 *
 * Closed loop: a completion starts the next call of its slot on the same
 * channel, from the loop thread; after a failed call, the slot restarts
 * from the worker's timer RETRY_NS later (never from the completion, so
 * calls that fail at once cannot spin the loop).
 * Open loop: each worker runs its share of the schedule (sb_sched.h, rate
 * R/T: interleaved uniform offsets or independent Poisson processes) from
 * a timerfd polled on its loop, armed at the next intended send time but
 * at most one wake per MIN_WAKE_NS, and starts the due calls round robin
 * on its own channels; latency is measured from each call's intended send
 * time. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>

#include <uv.h>

#include "sluice/sluice.h"

#include "raw.pb-c.h"
#include "sb_adaptive.h"
#include "sb_sched.h"
#include "sb_stats.h"

#include "resil_flags.h" /* examples/common: --service-config, --breakers */

#define DEFAULT_METHOD "/bench.Echo/Unary"
#define DEFAULT_BIDI_METHOD "/bench.Echo/Bidi"

/* ---- configuration */

typedef struct config {
  const char *target;
  const char *method;
  const char *request_file;
  size_t size;
  int bidi;
  unsigned concurrency;
  double rate; /* > 0: open loop */
  sb_arrival arrival;
  unsigned max_outstanding;
  double late_ms;
  unsigned connections;
  unsigned threads;
  double duration_s, warmup_s;
  uint64_t deadline_ms;
  const char *lb;
  int json;
  int quiet;
  uint64_t seed;
  /* adaptive */
  int adaptive;
  double slo_p99_ms;
  double max_error_rate; /* fraction */
  double start_rate;
  double step_s;
  int max_steps;
  /* resilience (sluice/resilience.h) */
  char *service_config; /* JSON (malloc'd), NULL: none */
  uint32_t breakers[3];
  int have_breakers;
  int cdf; /* --json: the latency CDFs too */
  /* connections (gRFC A8 keepalive; wait-for-ready) */
  uint64_t ka_time_ms, ka_timeout_ms;
  int ka_without_calls;
  int wait_for_ready;
} config;

static void usage(FILE *f, const char *prog) {
  fprintf(
      f,
      "usage: %s --target HOST:PORT [options]\n"
      "\n"
      "What to call:\n"
      "  --method PATH          unary method (default " DEFAULT_METHOD ", or\n"
      "                         " DEFAULT_BIDI_METHOD " with --bidi)\n"
      "  --request FILE         serialized request message (e.g. /dev/null "
      "for an\n"
      "                         empty message); default: bench.EchoMsg with "
      "--size\n"
      "  --size B               payload bytes of the default request "
      "(default 64)\n"
      "  --bidi                 ping-pong on a bidi method: one message in "
      "flight per\n"
      "                         stream, latency per round trip (closed loop "
      "only)\n"
      "\n"
      "Load:\n"
      "  --concurrency N        closed loop: N calls (streams with --bidi) "
      "outstanding\n"
      "                         (default 1)\n"
      "  --rate R               open loop: R calls/s on a fixed schedule; "
      "latency from\n"
      "                         each call's intended send time\n"
      "  --arrival uniform|poisson   open-loop arrivals (default uniform)\n"
      "  --max-outstanding N    open loop: calls in flight at most (default "
      "10000);\n"
      "                         calls due meanwhile wait and are counted\n"
      "  --late-ms MS           a call sent later than this after its "
      "intended time\n"
      "                         counts as late (default 1)\n"
      "  --connections C        exactly C TCP connections (one channel each), "
      "calls\n"
      "                         spread round robin (default 1)\n"
      "  --threads T            event-loop threads the connections are "
      "spread over;\n"
      "                         in open loop each sends its share of the "
      "calls\n"
      "                         (default 1; at most --connections are "
      "used)\n"
      "  --duration S           measured seconds (default 10)\n"
      "  --warmup S             seconds before measuring (default 1)\n"
      "  --deadline MS          per-call deadline (default none)\n"
      "  --lb NAME              channel strategy: rr, lcc, bcc, btc (default: "
      "the\n"
      "                         library's, btc)\n"
      "  --seed N               RNG seed of Poisson arrivals (default 1)\n"
      "\n"
      "Connections:\n"
      "  --keepalive-time-ms MS   client keepalive: PING after MS without a "
      "byte\n"
      "                         read (at least 1000; default off)\n"
      "  --keepalive-timeout-ms MS  close when nothing arrives MS after it\n"
      "                         (default 20000)\n"
      "  --keepalive-without-calls  ping while no call is open too\n"
      "  --wait-for-ready       calls wait for a ready destination (until "
      "their\n"
      "                         deadline) instead of failing fast\n"
      "\n"
      "Resilience (every channel; see sluice/resilience.h):\n"
      "  --service-config FILE|JSON  gRPC service config (retryPolicy,\n"
      "                         hedgingPolicy, retryThrottling, ...): inline "
      "when\n"
      "                         the argument starts with '{', else a file\n"
      "  --breakers REQ,PEND,RETRIES  circuit breakers per channel: calls in\n"
      "                         flight, calls pending, retries in flight (0 = "
      "off)\n"
      "\n"
      "Adaptive search (open loop, like Nighthawk's adaptive load "
      "controller):\n"
      "  --adaptive             find the highest rate that holds the SLO\n"
      "  --slo-p99 DUR          p99 latency bound, e.g. 5ms, 800us (default "
      "5ms)\n"
      "  --max-error-rate P     e.g. 0.1%% or 0.001 (default 0.1%%)\n"
      "  --start-rate R         first step's rate (default 1000)\n"
      "  --step-duration S      measured seconds per step (default 3; +0.5 s "
      "settling)\n"
      "  --max-steps N          at most N steps (default 12)\n"
      "\n"
      "Output:\n"
      "  --json                 machine-readable summary on stdout\n"
      "  --cdf                  with --json: latency CDFs (\"cdf\": ok "
      "calls and all\n"
      "                         calls, [us, fraction] points)\n"
      "  --quiet                no progress on stderr\n"
      "  --help\n",
      prog);
}

static int parse_double(const char *s, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || !(v >= 0) || isinf(v))
    return -1;
  *out = v;
  return 0;
}

static int parse_u64(const char *s, uint64_t max, uint64_t *out) {
  char *end;
  if (!*s || *s == '-')
    return -1;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || *end || v > max)
    return -1;
  *out = v;
  return 0;
}

/* "5ms", "800us", "2s", "1500000ns"; a bare number is ms. */
static int parse_duration_ms(const char *s, double *ms) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || !(v >= 0))
    return -1;
  if (!*end || strcmp(end, "ms") == 0)
    *ms = v;
  else if (strcmp(end, "us") == 0)
    *ms = v / 1e3;
  else if (strcmp(end, "ns") == 0)
    *ms = v / 1e6;
  else if (strcmp(end, "s") == 0)
    *ms = v * 1e3;
  else
    return -1;
  return 0;
}

/* "0.1%" or a fraction "0.001". */
static int parse_rate_fraction(const char *s, double *out) {
  char buf[64];
  size_t n = strlen(s);
  if (n == 0 || n >= sizeof buf)
    return -1;
  memcpy(buf, s, n + 1);
  double scale = 1;
  if (buf[n - 1] == '%') {
    buf[n - 1] = 0;
    scale = 0.01;
  }
  double v;
  if (parse_double(buf, &v) != 0)
    return -1;
  *out = v * scale;
  return *out <= 1 ? 0 : -1;
}

static int parse_args(int argc, char **argv, config *c) {
  memset(c, 0, sizeof *c);
  c->size = 64;
  c->concurrency = 1;
  c->arrival = SB_ARRIVAL_UNIFORM;
  c->max_outstanding = 10000;
  c->late_ms = 1;
  c->connections = 1;
  c->threads = 1;
  c->duration_s = 10;
  c->warmup_s = 1;
  c->seed = 1;
  c->slo_p99_ms = 5;
  c->max_error_rate = 0.001;
  c->start_rate = 1000;
  c->step_s = 3;
  c->max_steps = 12;
  const char *prog = argv[0];
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout, prog);
      exit(0);
    }
    if (strcmp(a, "--bidi") == 0) {
      c->bidi = 1;
      continue;
    }
    if (strcmp(a, "--json") == 0) {
      c->json = 1;
      continue;
    }
    if (strcmp(a, "--quiet") == 0) {
      c->quiet = 1;
      continue;
    }
    if (strcmp(a, "--adaptive") == 0) {
      c->adaptive = 1;
      continue;
    }
    if (strcmp(a, "--cdf") == 0) {
      c->cdf = 1;
      continue;
    }
    if (strcmp(a, "--keepalive-without-calls") == 0) {
      c->ka_without_calls = 1;
      continue;
    }
    if (strcmp(a, "--wait-for-ready") == 0) {
      c->wait_for_ready = 1;
      continue;
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "%s: %s needs a value (or is unknown)\n", prog, a);
      return -1;
    }
    const char *v = argv[++i];
    uint64_t u;
    int bad = 0;
    if (strcmp(a, "--target") == 0)
      c->target = v;
    else if (strcmp(a, "--method") == 0)
      c->method = v;
    else if (strcmp(a, "--request") == 0)
      c->request_file = v;
    else if (strcmp(a, "--size") == 0)
      bad = parse_u64(v, 64u << 20, &u), c->size = (size_t)u;
    else if (strcmp(a, "--concurrency") == 0)
      bad = parse_u64(v, 1000000, &u) || u == 0, c->concurrency = (unsigned)u;
    else if (strcmp(a, "--rate") == 0)
      bad = parse_double(v, &c->rate) || c->rate <= 0;
    else if (strcmp(a, "--arrival") == 0) {
      if (strcmp(v, "uniform") == 0)
        c->arrival = SB_ARRIVAL_UNIFORM;
      else if (strcmp(v, "poisson") == 0)
        c->arrival = SB_ARRIVAL_POISSON;
      else
        bad = 1;
    } else if (strcmp(a, "--max-outstanding") == 0)
      bad = parse_u64(v, 10000000, &u) || u == 0,
      c->max_outstanding = (unsigned)u;
    else if (strcmp(a, "--late-ms") == 0)
      bad = parse_double(v, &c->late_ms);
    else if (strcmp(a, "--connections") == 0)
      bad = parse_u64(v, 10000, &u) || u == 0, c->connections = (unsigned)u;
    else if (strcmp(a, "--threads") == 0)
      bad = parse_u64(v, 1024, &u) || u == 0, c->threads = (unsigned)u;
    else if (strcmp(a, "--duration") == 0)
      bad = parse_double(v, &c->duration_s) || c->duration_s <= 0;
    else if (strcmp(a, "--warmup") == 0)
      bad = parse_double(v, &c->warmup_s);
    else if (strcmp(a, "--deadline") == 0)
      bad = parse_u64(v, UINT32_MAX, &c->deadline_ms);
    else if (strcmp(a, "--lb") == 0)
      c->lb = v;
    else if (strcmp(a, "--keepalive-time-ms") == 0)
      bad = parse_u64(v, UINT32_MAX, &c->ka_time_ms) ||
            (c->ka_time_ms && c->ka_time_ms < SLUICE_KEEPALIVE_MIN_TIME_MS);
    else if (strcmp(a, "--keepalive-timeout-ms") == 0)
      bad = parse_u64(v, UINT32_MAX, &c->ka_timeout_ms) || !c->ka_timeout_ms;
    else if (strcmp(a, "--seed") == 0)
      bad = parse_u64(v, UINT64_MAX, &c->seed);
    else if (strcmp(a, "--slo-p99") == 0)
      bad = parse_duration_ms(v, &c->slo_p99_ms) || c->slo_p99_ms <= 0;
    else if (strcmp(a, "--max-error-rate") == 0)
      bad = parse_rate_fraction(v, &c->max_error_rate);
    else if (strcmp(a, "--start-rate") == 0)
      bad = parse_double(v, &c->start_rate) || c->start_rate < 1;
    else if (strcmp(a, "--step-duration") == 0)
      bad = parse_double(v, &c->step_s) || c->step_s <= 0;
    else if (strcmp(a, "--max-steps") == 0)
      bad = parse_u64(v, 1000, &u) || u == 0, c->max_steps = (int)u;
    else if (strcmp(a, "--breakers") == 0)
      bad = sx_parse_breakers(v, c->breakers) != 0, c->have_breakers = 1;
    else if (strcmp(a, "--service-config") == 0) {
      char err[300];
      free(c->service_config);
      c->service_config = sx_load_service_config(v, err, sizeof err);
      if (c->service_config == NULL) {
        fprintf(stderr, "%s: --service-config: %s\n", prog, err);
        return -1;
      }
    } else {
      fprintf(stderr, "%s: unknown option %s\n", prog, a);
      return -1;
    }
    if (bad) {
      fprintf(stderr, "%s: bad value for %s: %s\n", prog, a, v);
      return -1;
    }
  }
  if (!c->target) {
    fprintf(stderr, "%s: --target is required\n", prog);
    return -1;
  }
  if (c->cdf && !c->json)
    fprintf(stderr, "%s: --cdf has no effect without --json\n", prog);
  if (!c->method)
    c->method = c->bidi ? DEFAULT_BIDI_METHOD : DEFAULT_METHOD;
  if (c->method[0] != '/' || !strchr(c->method + 1, '/')) {
    fprintf(stderr, "%s: --method must look like /package.Service/Method\n",
            prog);
    return -1;
  }
  if (c->bidi && (c->rate > 0 || c->adaptive)) {
    fprintf(stderr, "%s: --bidi runs closed loop only (no --rate/--adaptive)\n",
            prog);
    return -1;
  }
  return 0;
}

/* ---- the run */

/* Open loop: a worker's timer wakes it at most once per MIN_WAKE_NS (at
 * high rates calls then leave in small bursts, up to 50 us after their
 * intended times, and that counts in their latency), and one wake starts
 * at most PUMP_MAX calls before the loop gets to do I/O again. */
#define MIN_WAKE_NS 50000u
#define PUMP_MAX 256
/* Closed loop: a slot whose call failed starts its next call this long
 * after the failure, from the worker's timer, not from the completion. */
#define RETRY_NS 100000u
/* Open loop: a call intended before the end of a phase may still leave up
 * to this long after it (the last wake can come up to MIN_WAKE_NS after
 * the end); later it counts as never sent. */
#define STOP_GRACE_NS 10000000u

typedef struct bench bench;
typedef struct worker worker;
typedef struct slot slot;

typedef struct chan {
  sluice_channel *ch;
  worker *w; /* the worker whose loop runs it */
} chan;

/* Commands of the main thread to a worker (see send_cmd). */
enum { CMD_START = 1, CMD_STOP, CMD_SYNC, CMD_QUIT };

/* A worker thread runs one libuv loop for channels index, index +
 * n_workers, ... (like h2load's -t). A channel on a user loop must be made
 * on the thread that runs the loop, so the worker makes its own. Every
 * call of those channels starts on this thread (the completion of the
 * previous one, or the worker's timer) and completes on it, so nothing
 * below is shared with another thread except where noted. */
struct worker {
  bench *b;
  unsigned index, n_workers;
  const char *target;
  uv_loop_t loop;
  pthread_t th;
  int rc;
  _Atomic int state; /* 0 starting, 1 running, -1 failed */
  /* Commands: the main thread stores cmd, then cmd_seq (release), wakes
   * the loop with ctl and waits until the loop, having run the command,
   * stores ack_seq (release). One command at a time. */
  uv_async_t ctl;
  int cmd;
  _Atomic unsigned cmd_seq, ack_seq;
  unsigned seen_seq;
  chan **own; /* the channels of this loop */
  unsigned n_own, rr;
  /* The timer: a timerfd polled on the loop (libuv's timers tick in ms).
   * Open loop: armed at the next intended send time; closed loop: at the
   * restart of parked slots. */
  int tfd;
  uv_poll_t tpoll;
  int quitting;
  /* Open loop: this loop's share of the schedule. */
  int phase;        /* of the running schedule */
  int sched_active; /* until the end of the phase (or CMD_STOP) */
  int behind;       /* due calls are waiting for a free slot */
  sb_sched sched;   /* read by main after CMD_STOP */
  uint64_t unsent;  /* likewise */
  /* Closed loop: slots whose call failed, waiting for the timer. */
  slot *parked;
  /* Statistics of the current phase; read by main after CMD_SYNC. */
  sb_stats stats;
  char first_error[200];
  uint64_t resp_bytes;           /* of recorded successful calls */
  _Atomic uint64_t done, failed; /* completions, for progress (any thread) */
};

struct bench {
  const config *cfg;
  chan *chans;
  unsigned n_chans;
  worker *workers;
  unsigned n_workers;
  sluice_method_desc method;
  ProtobufCMessage *req;
  sluice_call_opts copts;
  _Atomic int phase; /* completions of another phase are not recorded */
  /* The current phase: written by main before CMD_START, then read-only. */
  double rate;
  uint64_t start_ns, record_from_ns, end_ns;
  slot *slots; /* closed loop: concurrency slots */
  _Atomic long outstanding;
  _Atomic uint64_t start_failed;
};

/* One unary call in flight (closed loop: reused for the next call). */
struct slot {
  chan *c;
  uint64_t t0; /* sent (closed loop) or intended (open loop) */
  int phase;
  int closed;
  slot *next; /* in the worker's parked list */
};

static void record(chan *c, int phase, uint64_t t0, const sluice_status *st,
                   const ProtobufCMessage *resp, uint64_t now) {
  worker *w = c->w;
  bench *b = w->b;
  if (phase == atomic_load_explicit(&b->phase, memory_order_relaxed) &&
      t0 >= b->record_from_ns && t0 < b->end_ns) {
    sb_stats_record_status(&w->stats, (int)st->code, st->message,
                           now > t0 ? now - t0 : 0);
    if (resp)
      w->resp_bytes += protobuf_c_message_get_packed_size(resp);
    if (st->code != SLUICE_STATUS_OK && !w->first_error[0])
      snprintf(w->first_error, sizeof w->first_error, "%s: %s",
               sluice_status_name(st->code), st->message ? st->message : "");
  }
  atomic_fetch_add_explicit(&w->done, 1, memory_order_relaxed);
  if (st->code != SLUICE_STATUS_OK)
    atomic_fetch_add_explicit(&w->failed, 1, memory_order_relaxed);
}

/* The worker's timer at absolute time t (sluice_now_ns()'s clock, which is
 * CLOCK_MONOTONIC); a time already past fires on the next loop turn. */
static void arm(worker *w, uint64_t t) {
  if (w->quitting)
    return;
  struct itimerspec it = {{0, 0}, {0, 0}};
  it.it_value.tv_sec = (time_t)(t / 1000000000u);
  it.it_value.tv_nsec = (long)(t % 1000000000u);
  if (it.it_value.tv_sec == 0 && it.it_value.tv_nsec == 0)
    it.it_value.tv_nsec = 1; /* zero would disarm */
  timerfd_settime(w->tfd, TFD_TIMER_ABSTIME, &it, NULL);
}

static void disarm(worker *w) {
  struct itimerspec it = {{0, 0}, {0, 0}};
  if (w->tfd >= 0)
    timerfd_settime(w->tfd, 0, &it, NULL);
}

static void pump(worker *w);

static int start_unary(bench *b, slot *s);

/* Closed loop: a failed slot restarts from the timer, RETRY_NS later. */
static void park(worker *w, slot *s, uint64_t now) {
  s->next = w->parked;
  if (!w->parked)
    arm(w, now + RETRY_NS);
  w->parked = s;
}

/* Restarts the parked slots (restart != 0, while their phase runs) or
 * releases them. */
static void unpark(worker *w, int restart) {
  bench *b = w->b;
  slot *s = w->parked;
  w->parked = NULL;
  uint64_t now = sluice_now_ns();
  while (s) {
    slot *next = s->next;
    if (restart && !w->quitting && now < b->end_ns &&
        s->phase == atomic_load_explicit(&b->phase, memory_order_relaxed)) {
      s->t0 = now;
      if (start_unary(b, s) == 0) {
        s = next;
        continue;
      }
    }
    atomic_fetch_sub_explicit(&b->outstanding, 1, memory_order_release);
    s = next;
  }
}

static void unary_done(const sluice_status *st, const ProtobufCMessage *resp,
                       void *ud) {
  slot *s = ud;
  chan *c = s->c;
  worker *w = c->w;
  bench *b = w->b;
  uint64_t now = sluice_now_ns();
  record(c, s->phase, s->t0, st, resp, now);
  if (s->closed) {
    if (!w->quitting &&
        s->phase == atomic_load_explicit(&b->phase, memory_order_relaxed) &&
        now < b->end_ns) {
      /* After a failure the next call waits for the timer: a call failed
       * at once (a local drop, UNAVAILABLE fail-fast) would otherwise
       * start the next at once, spinning the loop. */
      if (st->code != SLUICE_STATUS_OK) {
        park(w, s, now);
        return;
      }
      s->t0 = now;
      if (start_unary(b, s) == 0)
        return;
    }
    atomic_fetch_sub_explicit(&b->outstanding, 1, memory_order_release);
    return;
  }
  free(s);
  atomic_fetch_sub_explicit(&b->outstanding, 1, memory_order_release);
  if (w->sched_active && w->behind)
    pump(w); /* a slot is free and calls are waiting for one */
}

static int start_unary(bench *b, slot *s) {
  int rc =
      sluice_unary_call(s->c->ch, &b->method, b->req, &b->copts, unary_done, s);
  if (rc != 0)
    atomic_fetch_add(&b->start_failed, 1);
  return rc;
}

/* One bidi stream (ping-pong). */
typedef struct stream {
  chan *c;
  uint64_t t0;
  int phase;
} stream;

static void bidi_message(sluice_call *call, const ProtobufCMessage *msg,
                         void *ud) {
  stream *s = ud;
  chan *c = s->c;
  bench *b = c->w->b;
  uint64_t now = sluice_now_ns();
  sluice_status ok = {.code = SLUICE_STATUS_OK};
  record(c, s->phase, s->t0, &ok, msg, now);
  if (!c->w->quitting &&
      s->phase == atomic_load_explicit(&b->phase, memory_order_relaxed) &&
      now < b->end_ns) {
    s->t0 = now;
    if (sluice_call_send(call, b->req) == 0)
      return;
    atomic_fetch_add(&b->start_failed, 1);
  }
  sluice_call_close_send(call);
}

static void bidi_done(sluice_call *call, const sluice_status *st, void *ud) {
  (void)call;
  stream *s = ud;
  if (st->code != SLUICE_STATUS_OK)
    record(s->c, s->phase, s->t0, st, NULL, sluice_now_ns());
  bench *b = s->c->w->b;
  free(s);
  atomic_fetch_sub_explicit(&b->outstanding, 1, memory_order_release);
}

static int start_stream(bench *b, chan *c, int phase) {
  stream *s = calloc(1, sizeof *s);
  if (!s)
    return SLUICE_ERR_NOMEM;
  s->c = c;
  s->phase = phase;
  s->t0 = sluice_now_ns();
  sluice_call_handlers h = {.on_message = bidi_message, .on_done = bidi_done};
  sluice_call *call;
  int rc = sluice_call_start(c->ch, &b->method, &b->copts, &h, s, &call);
  if (rc != 0) {
    free(s);
    return rc;
  }
  /* The handle is ours until released; callbacks get it as an argument. */
  if (sluice_call_send(call, b->req) != 0)
    sluice_call_cancel(call, "send failed");
  sluice_call_release(call);
  return 0;
}

/* Open loop: the schedule has reached the end of the phase, or main
 * stopped it (STOP_GRACE_NS after the end): the calls intended before the
 * end that are still owed then are never sent. */
static void end_schedule(worker *w) {
  if (!w->sched_active)
    return;
  w->sched_active = 0;
  w->unsent = sb_sched_skip_until(&w->sched, w->b->end_ns);
  disarm(w);
}

/* Open loop: starts every call of this worker's schedule that is due, on
 * its channels round robin, then arms the timer for the next one. */
static void pump(worker *w) {
  bench *b = w->b;
  long max_out = (long)b->cfg->max_outstanding;
  for (int n = 0;; n++) {
    uint64_t now = sluice_now_ns();
    if (sb_sched_peek(&w->sched) >= b->end_ns) {
      end_schedule(w); /* every call intended in the phase has left */
      return;
    }
    if (n == PUMP_MAX) {
      arm(w, now); /* let the loop do I/O first, then go on */
      return;
    }
    if (atomic_load_explicit(&b->outstanding, memory_order_acquire) >=
        max_out) {
      if (sb_sched_peek(&w->sched) <= now)
        w->behind = 1;
      arm(w, now + MIN_WAKE_NS); /* or a completion here frees a slot */
      return;
    }
    uint64_t intended;
    if (!sb_sched_next(&w->sched, now, w->behind, &intended)) {
      w->behind = 0;
      arm(w, intended > now + MIN_WAKE_NS ? intended : now + MIN_WAKE_NS);
      return;
    }
    slot *s = malloc(sizeof *s);
    if (!s) {
      atomic_fetch_add(&b->start_failed, 1);
      continue;
    }
    s->c = w->own[w->rr];
    w->rr = (w->rr + 1) % w->n_own;
    s->t0 = intended;
    s->phase = w->phase;
    s->closed = 0;
    s->next = NULL;
    atomic_fetch_add_explicit(&b->outstanding, 1, memory_order_relaxed);
    if (start_unary(b, s) != 0) {
      atomic_fetch_sub_explicit(&b->outstanding, 1, memory_order_release);
      free(s);
    }
  }
}

static void on_timer(uv_poll_t *h, int status, int events) {
  (void)status;
  (void)events;
  worker *w = h->data;
  uint64_t expirations;
  if (read(w->tfd, &expirations, sizeof expirations) < 0 && errno != EAGAIN)
    return;
  if (w->sched_active)
    pump(w);
  else if (w->parked)
    unpark(w, 1);
}

/* CMD_START on the loop thread: this worker's part of a phase. */
static void start_phase(worker *w) {
  bench *b = w->b;
  const config *cfg = b->cfg;
  int phase = atomic_load(&b->phase);
  sb_stats_init(&w->stats);
  w->first_error[0] = 0;
  w->resp_bytes = 0;
  w->unsent = 0;
  w->behind = 0;
  w->phase = phase;
  if (b->rate > 0) {
    /* Uniform: the workers interleave (worker k is k gaps of the whole
     * schedule later); Poisson: n independent processes of rate R/n add
     * up to one of rate R. */
    double gap_ns = 1e9 / b->rate;
    sb_sched_init(&w->sched, cfg->arrival, b->rate / w->n_workers,
                  b->start_ns + (uint64_t)(w->index * gap_ns),
                  cfg->seed + w->index, (uint64_t)(cfg->late_ms * 1e6));
    w->sched_active = 1;
    arm(w, sb_sched_peek(&w->sched));
  } else if (cfg->bidi) {
    for (unsigned i = 0; i < cfg->concurrency; i++) {
      chan *c = &b->chans[i % b->n_chans];
      if (c->w != w)
        continue;
      atomic_fetch_add(&b->outstanding, 1);
      if (start_stream(b, c, phase) != 0) {
        atomic_fetch_sub(&b->outstanding, 1);
        atomic_fetch_add(&b->start_failed, 1);
      }
    }
  } else {
    for (unsigned i = 0; b->slots && i < cfg->concurrency; i++) {
      slot *s = &b->slots[i];
      if (s->c->w != w)
        continue;
      s->t0 = sluice_now_ns();
      atomic_fetch_add(&b->outstanding, 1);
      if (start_unary(b, s) != 0)
        atomic_fetch_sub(&b->outstanding, 1);
    }
  }
}

static void on_tpoll_closed(uv_handle_t *h) {
  worker *w = h->data;
  close(w->tfd);
  w->tfd = -1;
}

static void on_ctl(uv_async_t *h) {
  worker *w = h->data;
  unsigned seq = atomic_load_explicit(&w->cmd_seq, memory_order_acquire);
  if (seq == w->seen_seq)
    return;
  w->seen_seq = seq;
  switch (w->cmd) {
  case CMD_START:
    start_phase(w);
    break;
  case CMD_STOP: /* the phase's time is up */
    end_schedule(w);
    disarm(w);
    unpark(w, 0);
    break;
  case CMD_SYNC: /* a barrier: every callback before it has returned */
    break;
  case CMD_QUIT:
    end_schedule(w);
    unpark(w, 0);
    w->quitting = 1;
    /* Calls in flight complete with CANCELLED on the next turns; uv_run
     * returns once every channel and handle is closed. */
    for (unsigned i = 0; i < w->n_own; i++)
      sluice_channel_del(w->own[i]->ch);
    uv_poll_stop(&w->tpoll);
    uv_close((uv_handle_t *)&w->tpoll, on_tpoll_closed);
    uv_close((uv_handle_t *)&w->ctl, NULL);
    break;
  }
  atomic_store_explicit(&w->ack_seq, seq, memory_order_release);
}

static void sleep_until(uint64_t t_ns) {
  struct timespec ts = {.tv_sec = (time_t)(t_ns / 1000000000u),
                        .tv_nsec = (long)(t_ns % 1000000000u)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
    ;
}

/* Runs cmd on every worker's loop and waits (at most 30 s: a loop that
 * does not answer by then is stuck) until each has; CMD_QUIT does not
 * wait. */
static void send_cmd(bench *b, int cmd) {
  for (unsigned k = 0; k < b->n_workers; k++) {
    worker *w = &b->workers[k];
    w->cmd = cmd;
    atomic_fetch_add_explicit(&w->cmd_seq, 1, memory_order_release);
    uv_async_send(&w->ctl);
  }
  if (cmd == CMD_QUIT)
    return;
  uint64_t until = sluice_now_ns() + 30000000000u;
  for (unsigned k = 0; k < b->n_workers; k++) {
    worker *w = &b->workers[k];
    unsigned want = atomic_load_explicit(&w->cmd_seq, memory_order_relaxed);
    while (atomic_load_explicit(&w->ack_seq, memory_order_acquire) != want) {
      if (sluice_now_ns() >= until) {
        fprintf(stderr, "sluice-bench: event loop %u does not answer\n", k);
        exit(1);
      }
      sleep_until(sluice_now_ns() + 100000);
    }
  }
}

/* What one phase (a whole run, or one adaptive step) measured. */
typedef struct result {
  double rate; /* offered (open loop); 0 closed loop */
  double seconds;
  sb_stats stats;
  char first_error[200];
  uint64_t issued, late, blocked, unsent, unfinished, start_failed;
  uint64_t dropped_locally; /* by the channels' strategy, never sent */
  uint64_t resp_bytes;      /* serialized responses of successful calls */
  sx_res res;               /* retries, hedges, breakers of the phase */
} result;

/* The channels' resilience counters, summed (cumulative). */
static sx_res resilience_sum(bench *b) {
  sx_res r;
  memset(&r, 0, sizeof r);
  for (unsigned i = 0; i < b->n_chans; i++)
    sx_res_add_channel(&r, b->chans[i].ch);
  return r;
}

/* Calls the channels' strategy dropped without sending them, so far. */
static uint64_t local_drops(bench *b) {
  uint64_t n = 0;
  for (unsigned i = 0; i < b->n_chans; i++) {
    sluice_channel_stats st;
    if (sluice_channel_get_stats(b->chans[i].ch, &st) != 0)
      continue;
    n += st.dropped_limit + st.dropped_path_limit + st.dropped_deadline +
         st.dropped_wait;
    sluice_channel_stats_clear(&st);
  }
  return n;
}

static double now_s(uint64_t t0) {
  uint64_t now = sluice_now_ns();
  return now > t0 ? (double)(now - t0) / 1e9 : 0.0;
}

static void progress_loop(bench *b, uint64_t start, int show) {
  uint64_t last_done = 0, t_last = sluice_now_ns();
  for (;;) {
    uint64_t now = sluice_now_ns();
    if (now >= b->end_ns)
      break;
    uint64_t next = t_last + 1000000000u;
    sleep_until(next < b->end_ns ? next : b->end_ns);
    if (sluice_now_ns() < next)
      continue; /* the run ended first */
    if (!show) {
      t_last = next;
      continue;
    }
    uint64_t done = 0, failed = 0;
    for (unsigned k = 0; k < b->n_workers; k++) {
      done += atomic_load_explicit(&b->workers[k].done, memory_order_relaxed);
      failed +=
          atomic_load_explicit(&b->workers[k].failed, memory_order_relaxed);
    }
    uint64_t t = sluice_now_ns();
    fprintf(stderr,
            "sluice-bench: %5.1f s  %9.0f calls/s  %" PRIu64 " done  %" PRIu64
            " errors  %ld in flight%s\n",
            now_s(start),
            (double)(done - last_done) * 1e9 / (double)(t - t_last), done,
            failed, atomic_load(&b->outstanding),
            t < b->record_from_ns ? "  (warm-up)" : "");
    last_done = done;
    t_last = t;
  }
}

/* Runs one phase: closed loop when rate == 0, else open loop at rate. The
 * worker loops do the work (send_cmd); this thread only reports progress
 * and collects the results. */
static void run_phase(bench *b, double rate, double warmup_s, double dur_s,
                      int show, result *r) {
  const config *cfg = b->cfg;
  memset(r, 0, sizeof *r);
  r->rate = rate;
  atomic_fetch_add(&b->phase, 1);
  atomic_store(&b->start_failed, 0);
  uint64_t drops_before = local_drops(b);
  sx_res res_before = resilience_sum(b);
  /* Open loop: the first intended send time is 2 ms ahead, so that every
   * loop has its command before its first call is due. */
  uint64_t start = sluice_now_ns() + (rate > 0 ? 2000000u : 0);
  b->rate = rate;
  b->start_ns = start;
  b->record_from_ns = start + (uint64_t)(warmup_s * 1e9);
  b->end_ns = b->record_from_ns + (uint64_t)(dur_s * 1e9);
  r->seconds = dur_s;
  b->slots = NULL;
  if (rate <= 0 && !cfg->bidi) {
    int phase = atomic_load(&b->phase);
    b->slots = calloc(cfg->concurrency, sizeof *b->slots);
    for (unsigned i = 0; b->slots && i < cfg->concurrency; i++) {
      slot *s = &b->slots[i];
      s->c = &b->chans[i % b->n_chans];
      s->phase = phase;
      s->closed = 1;
    }
  }
  send_cmd(b, CMD_START);

  progress_loop(b, start, show);

  if (rate > 0)
    sleep_until(b->end_ns + STOP_GRACE_NS);
  send_cmd(b, CMD_STOP);
  if (rate > 0)
    for (unsigned k = 0; k < b->n_workers; k++) {
      worker *w = &b->workers[k];
      r->issued += w->sched.issued;
      r->late += w->sched.late;
      r->blocked += w->sched.blocked;
      r->unsent += w->unsent;
    }
  /* Drain: calls still in flight may finish within their deadline (or 5 s
   * without one); what is left then is reported as unfinished. */
  uint64_t grace =
      cfg->deadline_ms ? cfg->deadline_ms * 1000000u + 500000000u : 5000000000u;
  uint64_t until = sluice_now_ns() + grace;
  while (atomic_load_explicit(&b->outstanding, memory_order_acquire) > 0 &&
         sluice_now_ns() < until)
    sleep_until(sluice_now_ns() + 1000000);
  long left = atomic_load(&b->outstanding);
  r->unfinished = left > 0 ? (uint64_t)left : 0;
  /* Completions of this phase arriving from now on are not recorded; once
   * every loop has passed the barrier, the statistics are ours to read. */
  atomic_fetch_add(&b->phase, 1);
  send_cmd(b, CMD_SYNC);
  sb_stats_init(&r->stats);
  for (unsigned k = 0; k < b->n_workers; k++) {
    worker *w = &b->workers[k];
    sb_stats_merge(&r->stats, &w->stats);
    r->resp_bytes += w->resp_bytes;
    if (!r->first_error[0] && w->first_error[0])
      memcpy(r->first_error, w->first_error, sizeof r->first_error);
  }
  r->start_failed = atomic_load(&b->start_failed);
  r->dropped_locally = local_drops(b) - drops_before;
  r->res = resilience_sum(b);
  sx_res_sub(&r->res, &res_before);
  if (left == 0)
    free(b->slots);
  /* else: slots are still referenced by calls in flight; the channels'
   * destruction completes them, and the memory goes with the process. */
  b->slots = NULL;
}

/* ---- setup */

static void *worker_main(void *arg) {
  worker *w = arg;
  bench *b = w->b;
  /* Timer wake-ups to the microsecond, not the default 50 us slack. */
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  sluice_channel_opts *co = NULL;
  int rc = uv_loop_init(&w->loop) != 0 ? SLUICE_ERR_SYSTEM : 0;
  if (rc == 0) {
    w->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (w->tfd < 0 || uv_poll_init(&w->loop, &w->tpoll, w->tfd) != 0 ||
        uv_async_init(&w->loop, &w->ctl, on_ctl) != 0)
      rc = SLUICE_ERR_SYSTEM;
    w->tpoll.data = w;
    w->ctl.data = w;
  }
  if (rc == 0)
    rc = sluice_channel_opts_new(&co);
  if (rc == 0)
    rc = sluice_channel_opts_set_loop(co, &w->loop);
  if (rc == 0 && b->cfg->lb)
    rc = sluice_channel_opts_set_lb(co, b->cfg->lb);
  if (rc == 0 && b->cfg->ka_time_ms)
    rc = sluice_channel_opts_set_keepalive(
        co, (uint32_t)b->cfg->ka_time_ms,
        b->cfg->ka_timeout_ms ? (uint32_t)b->cfg->ka_timeout_ms : 20000,
        b->cfg->ka_without_calls);
  if (rc == 0)
    rc = sx_apply(co, "sluice-bench", b->cfg->service_config,
                  b->cfg->have_breakers ? b->cfg->breakers : NULL);
  w->own = calloc(b->n_chans / w->n_workers + 1, sizeof *w->own);
  if (rc == 0 && !w->own)
    rc = SLUICE_ERR_NOMEM;
  for (unsigned i = w->index; rc == 0 && i < b->n_chans; i += w->n_workers) {
    b->chans[i].w = w;
    rc = sluice_channel_new(&b->chans[i].ch, w->target, co);
    if (rc == 0)
      w->own[w->n_own++] = &b->chans[i];
  }
  sluice_channel_opts_del(co);
  if (rc == 0)
    uv_poll_start(&w->tpoll, UV_READABLE, on_timer);
  w->rc = rc;
  atomic_store(&w->state, rc == 0 ? 1 : -1);
  if (rc != 0)
    return NULL; /* main exits */
  uv_run(&w->loop, UV_RUN_DEFAULT);
  uv_loop_close(&w->loop);
  return NULL;
}

/* One destination per channel: HOST:PORT is resolved once here and the
 * channel gets an ipv4:/ipv6: target with that one address. unix:, ipv4:
 * and ipv6: targets are used as given. */
static int resolve_target(const char *target, char *out, size_t n) {
  if (strncmp(target, "unix:", 5) == 0 || strncmp(target, "ipv4:", 5) == 0 ||
      strncmp(target, "ipv6:", 5) == 0) {
    snprintf(out, n, "%s", target);
    return 0;
  }
  if (strncmp(target, "dns:", 4) == 0)
    target += 4;
  char host[256];
  const char *colon = strrchr(target, ':');
  if (!colon || colon == target || (size_t)(colon - target) >= sizeof host)
    return -1;
  memcpy(host, target, (size_t)(colon - target));
  host[colon - target] = 0;
  const char *port = colon + 1;
  char *h = host;
  size_t hl = strlen(h);
  if (h[0] == '[' && hl > 2 && h[hl - 1] == ']') {
    h[hl - 1] = 0;
    h++;
  }
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
  struct addrinfo *res;
  int rc = getaddrinfo(h, port, &hints, &res);
  if (rc != 0) {
    fprintf(stderr, "sluice-bench: cannot resolve %s: %s\n", h,
            gai_strerror(rc));
    return -1;
  }
  /* Prefer IPv4 (what a listener on "host:port" usually binds). */
  struct addrinfo *pick = res;
  for (struct addrinfo *a = res; a; a = a->ai_next)
    if (a->ai_family == AF_INET) {
      pick = a;
      break;
    }
  char addr[INET6_ADDRSTRLEN];
  if (pick->ai_family == AF_INET) {
    inet_ntop(AF_INET, &((struct sockaddr_in *)pick->ai_addr)->sin_addr, addr,
              sizeof addr);
    snprintf(out, n, "ipv4:%s:%s", addr, port);
  } else {
    inet_ntop(AF_INET6, &((struct sockaddr_in6 *)pick->ai_addr)->sin6_addr,
              addr, sizeof addr);
    snprintf(out, n, "ipv6:[%s]:%s", addr, port);
  }
  freeaddrinfo(res);
  return 0;
}

/* The request as bytes: the file, or bench.EchoMsg { payload = size bytes }
 * encoded by hand (tag 0x0a, varint length, bytes). */
static uint8_t *request_bytes(const config *cfg, size_t *len) {
  if (cfg->request_file) {
    FILE *f = fopen(cfg->request_file, "rb");
    if (!f) {
      fprintf(stderr, "sluice-bench: %s: %s\n", cfg->request_file,
              strerror(errno));
      return NULL;
    }
    size_t cap = 4096, n = 0;
    uint8_t *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
      n += got;
      if (n == cap) {
        uint8_t *nb = realloc(buf, cap *= 2);
        if (!nb)
          free(buf);
        buf = nb;
      }
    }
    fclose(f);
    *len = n;
    return buf;
  }
  uint8_t *buf = malloc(cfg->size + 11);
  if (!buf)
    return NULL;
  size_t n = 0;
  if (cfg->size > 0) {
    buf[n++] = 0x0a;
    uint64_t v = cfg->size;
    while (v >= 0x80) {
      buf[n++] = (uint8_t)(v | 0x80);
      v >>= 7;
    }
    buf[n++] = (uint8_t)v;
    memset(buf + n, 'x', cfg->size);
    n += cfg->size;
  }
  *len = n;
  return buf;
}

/* ---- output */

static double us(uint64_t ns) { return (double)ns / 1e3; }

static uint64_t phase_failures(const result *r) {
  return sb_stats_errors(&r->stats) + r->unsent + r->unfinished +
         r->start_failed;
}

static void print_human(FILE *f, const config *cfg, const result *r) {
  const sb_stats *s = &r->stats;
  uint64_t errs = sb_stats_errors(s);
  const sluice__histogram *h = &s->hist;
  if (r->rate > 0)
    fprintf(f, "open loop at %.0f calls/s (%s arrivals)", r->rate,
            cfg->arrival == SB_ARRIVAL_POISSON ? "poisson" : "uniform");
  else
    fprintf(f, "closed loop, %u %s", cfg->concurrency,
            cfg->bidi ? "streams (ping-pong)" : "calls outstanding");
  fprintf(f, ", %u connection%s, %.1f s measured\n", cfg->connections,
          cfg->connections == 1 ? "" : "s", r->seconds);
  fprintf(f, "  calls:       %" PRIu64 " ok, %" PRIu64 " errors\n", s->ok,
          errs);
  fprintf(f, "  throughput:  %.1f ok calls/s, responses %.1f B on average\n",
          (double)s->ok / r->seconds,
          s->ok ? (double)r->resp_bytes / (double)s->ok : 0.0);
  fprintf(f,
          "  latency us:  min %.1f  p50 %.1f  p90 %.1f  p99 %.1f  p99.9 %.1f"
          "  max %.1f\n",
          us(s->ok ? h->min : 0), us(sluice__histogram_percentile(h, 50)),
          us(sluice__histogram_percentile(h, 90)),
          us(sluice__histogram_percentile(h, 99)),
          us(sluice__histogram_percentile(h, 99.9)), us(h->max));
  fprintf(f, "               mean %.1f  stddev %.1f%s\n", s->lat.mean / 1e3,
          sb_welford_stddev(&s->lat) / 1e3,
          r->rate > 0 ? "  (from intended send times)" : "");
  if (errs) {
    fprintf(f, "  errors:     ");
    for (int i = 0; i <= SB_N_CODES; i++)
      if (s->by_code[i])
        fprintf(f, " %s %" PRIu64,
                i < SB_N_CODES ? sluice_status_name((sluice_status_code)i)
                               : "OTHER",
                s->by_code[i]);
    fprintf(f, "\n  first error: %s\n", r->first_error);
    for (int k = 0; k < SB_N_KINDS; k++) {
      const sluice__histogram *kh = &s->kind_hist[k];
      if (kh->total)
        fprintf(f,
                "  failed, %-16s %" PRIu64 " calls, latency us: p50 %.1f"
                "  p99 %.1f  max %.1f\n",
                sb_kind_name((sb_kind)k), kh->total,
                us(sluice__histogram_percentile(kh, 50)),
                us(sluice__histogram_percentile(kh, 99)), us(kh->max));
    }
  }
  if (r->rate > 0)
    fprintf(f,
            "  schedule:    %" PRIu64 " sent, %" PRIu64
            " late (> %.3g ms behind), %" PRIu64
            " of them waited for a free slot (--max-outstanding), %" PRIu64
            " never sent\n",
            r->issued, r->late, cfg->late_ms, r->blocked, r->unsent);
  if (r->dropped_locally)
    fprintf(f,
            "  dropped locally by the channel's strategy (%s): %" PRIu64
            "\n               (among the errors above, warm-up included;"
            " use --lb rr to measure the server without "
            "client-side back-pressure)\n",
            cfg->lb ? cfg->lb : "default btc", r->dropped_locally);
  if (r->unfinished || r->start_failed)
    fprintf(f,
            "  unfinished at the end: %" PRIu64 ", failed to start: %" PRIu64
            "\n",
            r->unfinished, r->start_failed);
  /* Counted by the channels from the phase's start to its end (warm-up
   * included): attempts are all the calls' tries, the first ones too. */
  sx_res_print(f, "  resilience:  ", &r->res);
}

/* The CDF of h as [us, fraction] points: at 1 %, 2 % ... 99 %, then the
 * tail in finer steps, and the max. */
static void print_json_cdf(FILE *f, const sluice__histogram *h) {
  static const double tail[] = {99.5, 99.9, 99.95, 99.99};
  fprintf(f, "[");
  if (h->total == 0) {
    fprintf(f, "]");
    return;
  }
  int first = 1;
  for (int p = 1; p <= 99; p++) {
    fprintf(f, "%s[%.1f, %.4f]", first ? "" : ", ",
            us(sluice__histogram_percentile(h, (double)p)), p / 100.0);
    first = 0;
  }
  for (size_t i = 0; i < sizeof tail / sizeof tail[0]; i++)
    fprintf(f, ", [%.1f, %.4f]", us(sluice__histogram_percentile(h, tail[i])),
            tail[i] / 100.0);
  fprintf(f, ", [%.1f, 1.0]]", us(h->max));
}

static void print_json_result(FILE *f, const result *r, int cdf) {
  const sb_stats *s = &r->stats;
  const sluice__histogram *h = &s->hist;
  fprintf(f,
          "{\"rate\": %.3f, \"seconds\": %.3f, \"ok\": %" PRIu64
          ", \"errors\": %" PRIu64 ", \"throughput\": %.3f",
          r->rate, r->seconds, s->ok, sb_stats_errors(s),
          (double)s->ok / r->seconds);
  fprintf(f, ", \"errors_by_code\": {");
  int first = 1;
  for (int i = 0; i <= SB_N_CODES; i++)
    if (s->by_code[i]) {
      fprintf(f, "%s\"%s\": %" PRIu64, first ? "" : ", ",
              i < SB_N_CODES ? sluice_status_name((sluice_status_code)i)
                             : "OTHER",
              s->by_code[i]);
      first = 0;
    }
  fprintf(f, "}");
  fprintf(f,
          ", \"latency_us\": {\"min\": %.3f, \"p50\": %.3f, \"p90\": %.3f, "
          "\"p99\": %.3f, \"p999\": %.3f, \"max\": %.3f, \"mean\": %.3f, "
          "\"stddev\": %.3f}",
          us(s->ok ? h->min : 0), us(sluice__histogram_percentile(h, 50)),
          us(sluice__histogram_percentile(h, 90)),
          us(sluice__histogram_percentile(h, 99)),
          us(sluice__histogram_percentile(h, 99.9)), us(h->max),
          s->lat.mean / 1e3, sb_welford_stddev(&s->lat) / 1e3);
  fprintf(f,
          ", \"sent\": %" PRIu64 ", \"late\": %" PRIu64
          ", \"waited_for_slot\": %" PRIu64 ", \"unsent\": %" PRIu64
          ", \"unfinished\": %" PRIu64 ", \"start_failed\": %" PRIu64
          ", \"dropped_locally\": %" PRIu64 ", \"response_bytes\": %" PRIu64,
          r->issued, r->late, r->blocked, r->unsent, r->unfinished,
          r->start_failed, r->dropped_locally, r->resp_bytes);
  /* Failed calls by kind (sb_classify), latency measured like ok calls'. */
  fprintf(f, ", \"kinds\": {");
  for (int k = 0; k < SB_N_KINDS; k++) {
    const sluice__histogram *kh = &s->kind_hist[k];
    fprintf(f,
            "%s\"%s\": {\"n\": %" PRIu64
            ", \"p50_us\": %.3f, \"p99_us\": %.3f, \"max_us\": %.3f}",
            k ? ", " : "", sb_kind_name((sb_kind)k), kh->total,
            us(sluice__histogram_percentile(kh, 50)),
            us(sluice__histogram_percentile(kh, 99)), us(kh->max));
  }
  fprintf(f, "}, \"resilience\": ");
  sx_res_json(f, &r->res);
  if (cdf) {
    /* Every call: the successful ones and every kind of failure. */
    sluice__histogram all;
    sluice__histogram_init(&all);
    sluice__histogram_merge(&all, h);
    for (int k = 0; k < SB_N_KINDS; k++)
      sluice__histogram_merge(&all, &s->kind_hist[k]);
    fprintf(f, ", \"cdf\": {\"ok\": ");
    print_json_cdf(f, h);
    fprintf(f, ", \"all\": ");
    print_json_cdf(f, &all);
    fprintf(f, "}");
  }
  fprintf(f, "}");
}

static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\')
      fprintf(f, "\\%c", ch);
    else if (ch < 0x20)
      fprintf(f, "\\u%04x", ch);
    else
      fputc(ch, f);
  }
  fputc('"', f);
}

static void print_json_head(FILE *f, const config *cfg) {
  fprintf(f, "{\"target\": ");
  json_str(f, cfg->target);
  fprintf(f, ", \"method\": ");
  json_str(f, cfg->method);
  fprintf(f,
          ", \"mode\": \"%s\", \"connections\": %u, \"concurrency\": %u, "
          "\"threads\": %u, \"lb\": \"%s\", \"deadline_ms\": %" PRIu64,
          cfg->adaptive   ? "adaptive"
          : cfg->rate > 0 ? "open"
          : cfg->bidi     ? "bidi"
                          : "closed",
          cfg->connections, cfg->concurrency, cfg->threads,
          cfg->lb ? cfg->lb : "default", cfg->deadline_ms);
}

/* ---- main */

static int step_holds(const config *cfg, const result *r) {
  uint64_t fails = phase_failures(r);
  uint64_t all = r->stats.ok + fails;
  if (r->stats.ok == 0)
    return 0;
  double err_rate = (double)fails / (double)all;
  double p99_ms =
      (double)sluice__histogram_percentile(&r->stats.hist, 99) / 1e6;
  return err_rate <= cfg->max_error_rate && p99_ms <= cfg->slo_p99_ms;
}

int main(int argc, char **argv) {
  config cfg;
  if (parse_args(argc, argv, &cfg) != 0) {
    usage(stderr, argv[0]);
    return 2;
  }
  char target[512];
  if (resolve_target(cfg.target, target, sizeof target) != 0) {
    fprintf(stderr, "sluice-bench: bad target %s\n", cfg.target);
    return 2;
  }
  size_t req_len;
  uint8_t *req_buf = request_bytes(&cfg, &req_len);
  if (!req_buf)
    return 2;
  ProtobufCMessage *req = protobuf_c_message_unpack(
      &sluice_bench__raw__descriptor, NULL, req_len, req_buf);
  free(req_buf);
  if (!req) {
    fprintf(stderr, "sluice-bench: the request is not a valid protobuf "
                    "message\n");
    return 2;
  }

  bench b;
  memset(&b, 0, sizeof b);
  b.cfg = &cfg;
  b.req = req;
  const char *name = strrchr(cfg.method, '/') + 1;
  b.method = (sluice_method_desc){
      .path = cfg.method,
      .name = name,
      .request = &sluice_bench__raw__descriptor,
      .response = &sluice_bench__raw__descriptor,
      .kind = cfg.bidi ? SLUICE_CALL_BIDI_STREAMING : SLUICE_CALL_UNARY,
  };
  sluice_call_opts_init(&b.copts);
  if (!cfg.bidi)
    b.copts.timeout_ms = cfg.deadline_ms;
  b.copts.wait_for_ready = cfg.wait_for_ready;

  if (cfg.lb) {
    sluice_channel_opts *co;
    if (sluice_channel_opts_new(&co) != 0)
      return 1;
    int bad = sluice_channel_opts_set_lb(co, cfg.lb) != 0;
    sluice_channel_opts_del(co);
    if (bad) {
      fprintf(stderr, "sluice-bench: unknown --lb %s (rr, lcc, bcc, btc)\n",
              cfg.lb);
      return 2;
    }
  }
  if (cfg.service_config || cfg.have_breakers) {
    /* Refused here (exit 2, with the field) rather than in every loop. */
    sluice_channel_opts *co;
    if (sluice_channel_opts_new(&co) != 0)
      return 1;
    int bad = sx_apply(co, "sluice-bench", cfg.service_config,
                       cfg.have_breakers ? cfg.breakers : NULL) != 0;
    sluice_channel_opts_del(co);
    if (bad)
      return 2;
  }
  b.n_chans = cfg.connections;
  b.chans = calloc(b.n_chans, sizeof *b.chans);
  unsigned n_workers =
      cfg.threads < cfg.connections ? cfg.threads : cfg.connections;
  worker *workers = calloc(n_workers, sizeof *workers);
  if (!b.chans || !workers)
    return 1;
  b.workers = workers;
  b.n_workers = n_workers;
  for (unsigned k = 0; k < n_workers; k++) {
    worker *w = &workers[k];
    w->b = &b;
    w->index = k;
    w->n_workers = n_workers;
    w->target = target;
    w->tfd = -1;
    if (pthread_create(&w->th, NULL, worker_main, w) != 0) {
      fprintf(stderr, "sluice-bench: cannot start a worker thread\n");
      return 1;
    }
  }
  for (unsigned k = 0; k < n_workers; k++) {
    while (!atomic_load(&workers[k].state))
      sleep_until(sluice_now_ns() + 1000000);
    if (workers[k].state < 0) {
      fprintf(stderr, "sluice-bench: channel to %s: %s\n", target,
              sluice_strerror(workers[k].rc));
      return 2;
    }
  }

  /* Open every connection before the clock starts, with one call each
   * (not counted); a failure here is reported but does not stop the run. */
  if (!cfg.bidi) {
    for (unsigned i = 0; i < b.n_chans; i++) {
      sluice_call_opts o = b.copts;
      o.timeout_ms = 5000;
      sluice_status st;
      sluice_status_init(&st);
      ProtobufCMessage *resp = NULL;
      if (sluice_unary_call_blocking(b.chans[i].ch, &b.method, req, &resp, &o,
                                     &st) != SLUICE_STATUS_OK)
        fprintf(stderr, "sluice-bench: first call on connection %u: %s: %s\n",
                i + 1, sluice_status_name(st.code), st.message);
      if (resp)
        protobuf_c_message_free_unpacked(resp, NULL);
      sluice_status_clear(&st);
    }
  }

  int show = !cfg.quiet;
  int exit_code = 0;
  if (!cfg.adaptive) {
    result r;
    if (show)
      fprintf(stderr, "sluice-bench: %s %s via %u connection%s\n", target,
              cfg.method, cfg.connections, cfg.connections == 1 ? "" : "s");
    run_phase(&b, cfg.rate, cfg.warmup_s, cfg.duration_s, show, &r);
    if (cfg.json) {
      print_json_head(stdout, &cfg);
      fprintf(stdout, ", \"result\": ");
      print_json_result(stdout, &r, cfg.cdf);
      fprintf(stdout, "}\n");
    } else {
      printf("sluice-bench %s %s\n", cfg.target, cfg.method);
      print_human(stdout, &cfg, &r);
    }
    exit_code = r.stats.ok > 0 ? 0 : 1;
  } else {
    sb_adaptive a;
    sb_adaptive_init(&a, cfg.start_rate, 2, 0.05, cfg.max_steps);
    result *steps = calloc((size_t)cfg.max_steps, sizeof *steps);
    int best = -1, n = 0;
    if (!steps)
      return 1;
    for (;;) {
      result *r = &steps[n];
      if (show)
        fprintf(stderr, "sluice-bench: adaptive step %d at %.0f calls/s\n",
                n + 1, a.rate);
      run_phase(&b, a.rate, 0.5, cfg.step_s, show, r);
      int held = step_holds(&cfg, r);
      if (show)
        fprintf(stderr,
                "sluice-bench: step %d: %.0f calls/s -> p99 %.1f us, %" PRIu64
                " ok, %" PRIu64 " failed: %s\n",
                n + 1, r->rate,
                us(sluice__histogram_percentile(&r->stats.hist, 99)),
                r->stats.ok, phase_failures(r), held ? "holds" : "breaks");
      if (held && (best < 0 || r->rate > steps[best].rate))
        best = n;
      n++;
      if (!sb_adaptive_step(&a, held) || n >= cfg.max_steps)
        break;
    }
    if (cfg.json) {
      print_json_head(stdout, &cfg);
      fprintf(stdout,
              ", \"slo_p99_ms\": %.3f, \"max_error_rate\": %.6f, "
              "\"max_rate\": %.3f, \"steps\": [",
              cfg.slo_p99_ms, cfg.max_error_rate, a.good);
      for (int i = 0; i < n; i++) {
        if (i)
          fprintf(stdout, ", ");
        fprintf(stdout, "{\"holds\": %s, \"result\": ",
                step_holds(&cfg, &steps[i]) ? "true" : "false");
        print_json_result(stdout, &steps[i], cfg.cdf);
        fprintf(stdout, "}");
      }
      fprintf(stdout, "]}\n");
    } else {
      printf("sluice-bench %s %s: adaptive search, SLO p99 <= %.3g ms, "
             "errors <= %.3g %%\n",
             cfg.target, cfg.method, cfg.slo_p99_ms, cfg.max_error_rate * 100);
      for (int i = 0; i < n; i++)
        printf("  step %2d: %9.0f calls/s  p99 %9.1f us  errors %" PRIu64
               "  %s\n",
               i + 1, steps[i].rate,
               us(sluice__histogram_percentile(&steps[i].stats.hist, 99)),
               phase_failures(&steps[i]),
               step_holds(&cfg, &steps[i]) ? "holds" : "breaks");
      if (best >= 0) {
        printf("highest rate that holds the SLO: %.0f calls/s\n", a.good);
        print_human(stdout, &cfg, &steps[best]);
      } else {
        printf("no rate tried holds the SLO (lowest tried: %.0f calls/s)\n",
               a.bad);
      }
    }
    exit_code = best >= 0 ? 0 : 1;
    free(steps);
  }

  /* Each loop deletes its channels and closes its handles; its uv_run
   * returns when the last is gone. */
  send_cmd(&b, CMD_QUIT);
  for (unsigned k = 0; k < n_workers; k++) {
    pthread_join(workers[k].th, NULL);
    free(workers[k].own);
  }
  free(workers);
  free(b.chans);
  protobuf_c_message_free_unpacked(req, NULL);
  free(cfg.service_config);
  return exit_code;
}
