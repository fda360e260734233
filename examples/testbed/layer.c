/* testbed_layer: one layer of the chain testbed (docs/results/README.md).
 *
 *   testbed_layer --port N --workers W --service-us U
 *                 [--next TARGET --lb rr|lcc|bcc|btc] [--threads T]
 *                 [--name NAME] [--stats FILE] [--fanout F]
 *                 [--fanout-mode parallel|sequential]
 *                 [--service-config FILE|JSON] [--retry ATTEMPTS,BACKOFF_MS]
 *                 [--hedge ATTEMPTS,DELAY_MS] [--retry-codes CODE,...]
 *                 [--breakers REQ,PEND,RETRIES] [--retry-budget PCT,MIN]
 *                 [--retry-throttling TOKENS,RATIO] [--no-retries]
 *                 [--shutdown-grace-ms MS]
 *
 * Serves testbed.Layer/Call. Its capacity is simulated: a pool of W worker
 * threads, each spending U microseconds per call (sleeping, so that a 2-core
 * machine can host the whole chain: the capacity is W / U calls per
 * microsecond whatever the CPU does). The handler only queues the call; a
 * worker takes it (FIFO), skips it when the client has given up meanwhile
 * (cancelled or past its deadline: no work is spent on it), otherwise
 * "works" U us, then either echoes the request (no --next: the database) or
 * forwards it through one sluice channel to TARGET (e.g.
 * "ipv4:127.0.0.1:P1,127.0.0.1:P2") with strategy --lb, passing on the
 * call's deadline (sluice_call_opts_set_parent). The worker does not wait
 * for the downstream answer: the channel's callback finishes the call with
 * it, or with the downstream status when it failed: the same code, and the
 * message with "; passed on by NAME" appended, so that every layer above
 * can tell a call its own channel refused from one refused further down.
 *
 * Each downstream call is timed from just before it is started to its
 * completion callback and classed by its outcome: ok; early_drop
 * (RESOURCE_EXHAUSTED "dropped locally": this layer's strategy refused it);
 * deadline_refusal (DEADLINE_EXCEEDED "dropped locally": this layer's
 * strategy saw that the deadline could not be met); downstream_drop (either
 * of those, made by a layer further down and passed on); timeout (any other
 * DEADLINE_EXCEEDED); other (any other error). One log-linear histogram per
 * class (hist.h); the stats give n, p50, p99, max (and the non-empty
 * buckets) of each under "kinds". For the local drops, "drop_decided"
 * holds the library's own figure from the drop's message ("decided in N
 * us": from the call's start to the strategy's decision), so the rest of
 * the drop's latency is the delivery of its completion.
 *
 * Fan-out (--fanout F, default 1): after its work a worker starts F
 * downstream calls, each with the request's payload (the testbed's 4 KB),
 * and the layer's call fails if any of them fails. --fanout-mode parallel
 * (the default) starts all F at once and finishes the call when all F
 * have: OK (the payload echoed, hops the deepest) when every one
 * succeeded, else with the first failure to complete (same code, message
 * passed on as above); the others are not cancelled but run to their end.
 * --fanout-mode sequential starts each call when the one before succeeded
 * (as a service making dependent calls one after another) and fails the
 * layer's call at the first failure, without making the rest. So a
 * request entering a chain of fan-outs F1, F2 ... reaches the deepest
 * layer F1 x F2 x ... times when nothing fails, is retried or dropped.
 *
 * Resilience of the channel to the next layer (sluice/resilience.h):
 * --service-config takes gRPC's service config JSON (inline when it starts
 * with '{', else a file); --retry ATTEMPTS,BACKOFF_MS sets a retryPolicy
 * for testbed.Layer (maxAttempts ATTEMPTS, the first included; initial
 * and max backoff BACKOFF_MS, multiplier 1: a fixed interval, jittered
 * +-20 % by the library; BACKOFF_MS 0 is taken as 1 ms, the smallest gRPC
 * allows) retrying --retry-codes (default UNAVAILABLE,RESOURCE_EXHAUSTED);
 * --hedge ATTEMPTS,DELAY_MS a hedgingPolicy instead (non-fatal codes the
 * same); --breakers, --retry-budget, --retry-throttling and --no-retries
 * call the setters of the same names. The flags apply in that order, so
 * --retry/--hedge override a service config's entry for testbed.Layer.
 *
 * Every attempt that arrives is a call here, so "received" counts attempts
 * (a retried call counts once per attempt): the report divides the deepest
 * layer's by the requests entering the chain and the fan-outs to get the
 * retry amplification. "fwd_calls" counts downstream calls started (each
 * may make several attempts: "resilience" has the channel's counters).
 *
 * Prints "listening on PORT" on stdout. SIGUSR1 writes the statistics as
 * one JSON line (to --stats FILE, appended, or to stderr); SIGINT/SIGTERM
 * shut down gracefully and write them once more.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sluice/sluice.h>

#include "hist.h"
#include "resil_flags.h"
#include "serve.h"
#include "testbed.sluice.h"

#define SHUTDOWN_GRACE_MS 2000
#define MAX_WORKERS 1024
#define MAX_FANOUT 64
#define PASSED_ON "; passed on by "
#define DROPPED_LOCALLY "dropped locally"

/* Outcome classes of the downstream calls (see the top comment). */
enum {
  K_OK,
  K_EARLY_DROP,
  K_DEADLINE_REFUSAL,
  K_DOWNSTREAM_DROP,
  K_TIMEOUT,
  K_OTHER,
  K_BREAKER,
  K_DOWNSTREAM_BREAKER,
  N_KINDS
};
static const char *const kind_names[N_KINDS] = {
    "ok",      "early_drop", "deadline_refusal", "downstream_drop",
    "timeout", "other",      "breaker",          "downstream_breaker"};

struct job;
/* One of a job's downstream calls. */
typedef struct fwd {
  struct job *j;
  uint64_t start_ns; /* when the downstream call was started */
} fwd;

typedef struct job {
  sluice_server_call *call;
  const Testbed__Msg *req; /* borrowed until the call is finished */
  uint64_t queued_ns;
  struct job *next;
  /* Fan-out: downstream calls still to complete; the first failure (the
   * one that set `failed`) and the deepest hops of the replies. */
  atomic_uint pending;
  atomic_int failed;
  atomic_uint max_hops;
  sluice_status_code fail_code;
  char fail_msg[900];
  unsigned n_fwd;
  fwd fwds[]; /* n_fwd */
} job;

static struct {
  const char *name;
  unsigned workers;
  unsigned long service_us;
  sluice_channel *ch; /* NULL for the database */
  const char *lb;
  int port;
  unsigned fanout;
  int sequential; /* --fanout-mode sequential */

  pthread_mutex_t mu;
  pthread_cond_t cv;
  job *head, *tail;
  size_t queued;
  unsigned busy; /* workers in their service time */
  int stopping;
  sluice_server *srv; /* for the load report (set once it exists) */

  /* counters (atomics: workers, loop threads and the dumper) */
  atomic_uint_fast64_t received, skipped, served, fwd_ok, fwd_failed,
      fwd_start_failed, queue_wait_ns, queue_max, fwd_calls, replied_ok,
      replied_failed;
  tb_hist kinds[N_KINDS]; /* latency of the downstream calls, by outcome */
  tb_hist drop_decided;   /* local drops: "decided in N us" */
} L;

/* ---- statistics */

static void dump_stats(FILE *f, const char *why) {
  fprintf(f,
          "{\"layer\":\"%s\",\"port\":%d,\"why\":\"%s\",\"workers\":%u,"
          "\"service_us\":%lu,\"fanout\":%u,\"fwd_calls\":%" PRIuFAST64
          ",\"replied_ok\":%" PRIuFAST64 ",\"replied_failed\":%" PRIuFAST64
          ",\"received\":%" PRIuFAST64 ",\"skipped\":%" PRIuFAST64
          ",\"served\":%" PRIuFAST64 ",\"fwd_ok\":%" PRIuFAST64
          ",\"fwd_failed\":%" PRIuFAST64
          ",\"queue_wait_us_mean\":%.1f,\"queue_max\":%" PRIuFAST64,
          L.name, L.port, why, L.workers, L.service_us, L.fanout,
          atomic_load(&L.fwd_calls), atomic_load(&L.replied_ok),
          atomic_load(&L.replied_failed), atomic_load(&L.received),
          atomic_load(&L.skipped), atomic_load(&L.served),
          atomic_load(&L.fwd_ok), atomic_load(&L.fwd_failed),
          atomic_load(&L.served) + atomic_load(&L.skipped) > 0
              ? (double)atomic_load(&L.queue_wait_ns) / 1e3 /
                    (double)(atomic_load(&L.served) + atomic_load(&L.skipped))
              : 0.0,
          atomic_load(&L.queue_max));
  if (L.ch != NULL) {
    fprintf(f, ",\"kinds\":{");
    for (int k = 0; k < N_KINDS; k++) {
      fprintf(f, "%s\"%s\":", k ? "," : "", kind_names[k]);
      tb_hist_json(f, &L.kinds[k]);
    }
    fprintf(f, "},\"drop_decided\":");
    tb_hist_json(f, &L.drop_decided);
    sx_res res = {0};
    sx_res_add_channel(&res, L.ch);
    fprintf(f, ",\"resilience\":");
    sx_res_json(f, &res);
  }
  sluice_channel_stats s;
  if (L.ch != NULL && sluice_channel_get_stats(L.ch, &s) == 0) {
    fprintf(f,
            ",\"channel\":{\"lb\":\"%s\",\"dropped_unavailable\":%" PRIu64
            ",\"dropped_limit\":%" PRIu64 ",\"dropped_path_limit\":%" PRIu64
            ",\"dropped_deadline\":%" PRIu64 ",\"dropped_wait\":%" PRIu64
            ",\"dests\":[",
            s.lb, s.dropped_unavailable, s.dropped_limit, s.dropped_path_limit,
            s.dropped_deadline, s.dropped_wait);
    for (size_t i = 0; i < s.n_dests; i++) {
      const sluice_dest_stats *d = &s.dests[i];
      fprintf(f,
              "%s{\"address\":\"%s\",\"conn\":\"%s\",\"lb_state\":\"%s\","
              "\"in_flight\":%u,\"limit\":%.1f,\"adaptive_limit\":%.1f,"
              "\"rate\":%.1f,\"latency_min_us\":%.1f,"
              "\"latency_ewma_us\":%.1f,\"peer_utilization\":%.3f,"
              "\"sent\":%" PRIu64 ",\"ok\":%" PRIu64 ",\"failed\":%" PRIu64
              ",\"p50_us\":%" PRIu64 ",\"p99_us\":%" PRIu64
              ",\"p999_us\":%" PRIu64 ",\"algo_ns\":%.1f,"
              "\"strategy_us\":%.2f}",
              i > 0 ? "," : "", d->address, d->conn_state, d->lb_state,
              d->in_flight, d->limit, d->adaptive_limit, d->rate,
              d->latency_min_us, d->latency_ewma_us, d->peer_utilization,
              d->sent, d->ok, d->failed, d->p50_us, d->p99_us, d->p999_us,
              d->algo_ns, d->strategy_us);
    }
    fprintf(f, "]}");
    sluice_channel_stats_clear(&s);
  }
  fprintf(f, "}\n");
  fflush(f);
}

static void dump_stats_to(const char *path, const char *why) {
  if (path == NULL) {
    dump_stats(stderr, why);
    return;
  }
  FILE *f = fopen(path, "a");
  if (f == NULL) {
    fprintf(stderr, "%s: cannot open %s: %s\n", L.name, path, strerror(errno));
    dump_stats(stderr, why);
    return;
  }
  dump_stats(f, why);
  fclose(f);
}

/* ---- forwarding */

static int classify(const sluice_status *st) {
  if (st->code == SLUICE_STATUS_OK)
    return K_OK;
  const char *m = st->message != NULL ? st->message : "";
  int dropped = strstr(m, DROPPED_LOCALLY) != NULL;
  int here = strstr(m, PASSED_ON) == NULL; /* not from further down */
  if (st->code == SLUICE_STATUS_RESOURCE_EXHAUSTED &&
      strstr(m, "circuit breaker") != NULL)
    return here ? K_BREAKER : K_DOWNSTREAM_BREAKER;
  if (st->code == SLUICE_STATUS_RESOURCE_EXHAUSTED && dropped)
    return here ? K_EARLY_DROP : K_DOWNSTREAM_DROP;
  if (st->code == SLUICE_STATUS_DEADLINE_EXCEEDED && dropped)
    return here ? K_DEADLINE_REFUSAL : K_DOWNSTREAM_DROP;
  if (st->code == SLUICE_STATUS_DEADLINE_EXCEEDED)
    return K_TIMEOUT;
  return K_OTHER;
}

/* The last of a job's downstream calls is done: finishes the server call
 * (OK when every one succeeded, else with the first failure) and frees j. */
static void job_complete(job *j) {
  sluice_server_call *call = j->call;
  if (atomic_load(&j->failed)) {
    atomic_fetch_add(&L.replied_failed, 1);
    sluice_server_call_finish(call, j->fail_code, j->fail_msg, NULL);
  } else {
    Testbed__Msg out = TESTBED__MSG__INIT;
    out.payload = j->req->payload;
    out.hops = atomic_load(&j->max_hops);
    atomic_fetch_add(&L.replied_ok, 1);
    testbed__layer__call__reply(call, &out);
  }
  free(j);
}

/* One downstream call of j is over (or could not start): remembers the
 * first failure, and completes j when it was the last. */
static void fwd_finished(job *j, const sluice_status_code code, const char *msg,
                         uint32_t hops) {
  if (code != SLUICE_STATUS_OK) {
    int expected = 0;
    if (atomic_compare_exchange_strong(&j->failed, &expected, 1)) {
      j->fail_code = code;
      snprintf(j->fail_msg, sizeof j->fail_msg, "%s", msg);
    }
  } else {
    unsigned cur = atomic_load(&j->max_hops);
    while (hops > cur &&
           !atomic_compare_exchange_weak(&j->max_hops, &cur, (unsigned)hops))
      ;
  }
  /* acq_rel: the failure written above is seen by the last one. */
  if (atomic_fetch_sub_explicit(&j->pending, 1, memory_order_acq_rel) == 1)
    job_complete(j);
}

static void forward_done(const sluice_status *st, const Testbed__Msg *resp,
                         void *user_data);

/* Starts j's downstream call i (the request forwarded, the deadline and
 * cancellation passed on); a call that cannot start counts as failed. */
static void start_fwd(job *j, unsigned i) {
  Testbed__Msg out = TESTBED__MSG__INIT;
  out.payload = j->req->payload;
  out.hops = j->req->hops + 1;
  sluice_call_opts opts;
  sluice_call_opts_init(&opts);
  sluice_call_opts_set_parent(&opts, j->call);
  fwd *fw = &j->fwds[i];
  fw->j = j;
  fw->start_ns = sluice_now_ns();
  atomic_fetch_add(&L.fwd_calls, 1);
  if (testbed__layer__call__async(L.ch, &out, &opts, forward_done, fw) != 0) {
    atomic_fetch_add(&L.fwd_start_failed, 1);
    fwd_finished(j, SLUICE_STATUS_INTERNAL, "cannot start the downstream call",
                 0);
  }
}

/* The channel's callback (its loop thread): records the downstream call's
 * latency and outcome, then counts it against its job (sequential fan-out:
 * starts the next call after a success). */
static void forward_done(const sluice_status *st, const Testbed__Msg *resp,
                         void *user_data) {
  fwd *fw = user_data;
  job *j = fw->j;
  uint64_t took = sluice_now_ns() - fw->start_ns;
  int kind = classify(st);
  tb_hist_record(&L.kinds[kind], took);
  if (kind == K_EARLY_DROP || kind == K_DEADLINE_REFUSAL) {
    const char *d = strstr(st->message, "decided in ");
    unsigned long long us;
    if (d != NULL && sscanf(d, "decided in %llu us", &us) == 1)
      tb_hist_record(&L.drop_decided, us * 1000ull);
  }
  if (st->code == SLUICE_STATUS_OK) {
    atomic_fetch_add(&L.fwd_ok, 1);
    unsigned next = (unsigned)(fw - j->fwds) + 1;
    if (L.sequential && next < j->n_fwd) {
      /* pending is 1 here (see pass_on): the next call takes it over. */
      uint32_t hops = resp != NULL ? resp->hops : 0;
      if (hops > atomic_load(&j->max_hops))
        atomic_store(&j->max_hops, hops);
      start_fwd(j, next);
      return;
    }
    fwd_finished(j, SLUICE_STATUS_OK, NULL, resp != NULL ? resp->hops : 0);
    return;
  }
  atomic_fetch_add(&L.fwd_failed, 1);
  char msg[1024];
  snprintf(msg, sizeof msg, "%s" PASSED_ON "%s",
           st->message != NULL ? st->message : "", L.name);
  fwd_finished(j, st->code, msg, 0);
}

/* Runs on a worker thread, after the simulated work. Returns 1 when j now
 * belongs to the downstream calls (the last to finish frees it; it may
 * already have done so), 0 when the caller still owns it. */
static int pass_on(job *j) {
  if (L.ch == NULL) { /* the database: echo */
    Testbed__Msg out = TESTBED__MSG__INIT;
    out.payload = j->req->payload;
    out.hops = j->req->hops + 1;
    testbed__layer__call__reply(j->call, &out);
    return 0;
  }
  unsigned n = j->n_fwd;
  if (L.sequential) {
    /* One call at a time: the one count is handed from each call to the
     * next; the first failure, or the last success, completes j. */
    atomic_store(&j->pending, 1);
    start_fwd(j, 0);
    return 1;
  }
  /* One count more than the calls, dropped after the loop: no callback
   * can complete j while calls are still being started. */
  atomic_store(&j->pending, n + 1);
  for (unsigned i = 0; i < n; i++)
    start_fwd(j, i);
  fwd_finished(j, SLUICE_STATUS_OK, NULL, 0);
  return 1;
}

static void sleep_us(unsigned long us) {
  struct timespec ts = {.tv_sec = (time_t)(us / 1000000UL),
                        .tv_nsec = (long)(us % 1000000UL) * 1000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    ;
}

/* Tells clients how busy this layer is (mu held): the worker pool, not the
 * library, is where calls wait here, so the library cannot know. Sent in
 * the load report as application_utilization; the strategies read it. */
static void report_load(void) {
  if (L.srv)
    sluice_server_set_utilization(L.srv, (double)(L.busy + L.queued) /
                                             (double)L.workers);
}

static void *worker_main(void *arg) {
  (void)arg;
  for (;;) {
    pthread_mutex_lock(&L.mu);
    while (L.head == NULL && !L.stopping)
      pthread_cond_wait(&L.cv, &L.mu);
    job *j = L.head;
    if (j != NULL) {
      L.head = j->next;
      if (L.head == NULL)
        L.tail = NULL;
      L.queued--;
      L.busy++;
      report_load();
    }
    int stopping = L.stopping;
    pthread_mutex_unlock(&L.mu);
    if (j == NULL)
      return NULL; /* stopping and nothing left */

    uint64_t now = sluice_now_ns();
    atomic_fetch_add(&L.queue_wait_ns, now - j->queued_ns);
    uint64_t deadline = sluice_server_call_deadline(j->call);
    int skipped = 0;
    if (stopping) {
      sluice_server_call_finish(j->call, SLUICE_STATUS_UNAVAILABLE,
                                "layer shutting down", NULL);
    } else if (sluice_server_call_is_cancelled(j->call) ||
               (deadline != 0 && now >= deadline)) {
      skipped = 1;
      atomic_fetch_add(&L.skipped, 1);
      sluice_server_call_finish(j->call, SLUICE_STATUS_DEADLINE_EXCEEDED,
                                "expired in the layer's queue", NULL);
    } else {
      sleep_us(L.service_us);
      atomic_fetch_add(&L.served, 1);
    }
    pthread_mutex_lock(&L.mu);
    L.busy--;
    report_load();
    pthread_mutex_unlock(&L.mu);
    if (!stopping && !skipped && pass_on(j))
      continue; /* j is the downstream call's now */
    free(j);
  }
}

/* ---- the handler (loop thread): queue only */

static void handle_call(sluice_server_call *call, const Testbed__Msg *req,
                        void *user_data) {
  (void)user_data;
  atomic_fetch_add(&L.received, 1);
  unsigned n_fwd = L.ch != NULL ? L.fanout : 0;
  job *j = malloc(sizeof *j + n_fwd * sizeof(fwd));
  if (j == NULL) {
    sluice_server_call_finish(call, SLUICE_STATUS_RESOURCE_EXHAUSTED,
                              "out of memory", NULL);
    return;
  }
  j->call = call;
  j->req = req;
  j->queued_ns = sluice_now_ns();
  j->next = NULL;
  atomic_init(&j->pending, 0);
  atomic_init(&j->failed, 0);
  atomic_init(&j->max_hops, req->hops + 1);
  j->fail_code = SLUICE_STATUS_OK;
  j->fail_msg[0] = '\0';
  j->n_fwd = n_fwd;
  pthread_mutex_lock(&L.mu);
  if (L.tail != NULL)
    L.tail->next = j;
  else
    L.head = j;
  L.tail = j;
  L.queued++;
  report_load();
  if (L.queued > atomic_load(&L.queue_max))
    atomic_store(&L.queue_max, L.queued);
  pthread_cond_signal(&L.cv);
  pthread_mutex_unlock(&L.mu);
}

/* ---- command line */

static void usage(FILE *f, const char *prog) {
  fprintf(
      f,
      "usage: %s --port N --workers W --service-us U\n"
      "          [--next TARGET --lb rr|lcc|bcc|btc] [--threads T]\n"
      "          [--name NAME] [--stats FILE] [--fanout F]\n"
      "          [--fanout-mode parallel|sequential]\n"
      "          [--service-config FILE|JSON] [--retry ATTEMPTS,BACKOFF_MS]\n"
      "          [--hedge ATTEMPTS,DELAY_MS] [--retry-codes CODE,...]\n"
      "          [--breakers REQ,PEND,RETRIES] [--retry-budget PCT,MIN]\n"
      "          [--retry-throttling TOKENS,RATIO] [--no-retries]\n"
      "          [--no-health]\n"
      "  --no-health  do not serve grpc.health.v1.Health (on by default)\n"
      "  --fanout F   downstream calls per call (default 1)\n"
      "  --fanout-mode parallel|sequential   all at once (default), or one\n"
      "               after the other, stopping at the first failure\n"
      "  --shutdown-grace-ms MS   drain time at SIGTERM (default 2000)\n"
      "  the others set the channel to --next: see the top of layer.c\n"
      "  and sluice/resilience.h\n",
      prog);
}

/* "A,B" -> two numbers (B may have a fraction). Returns 0 or -1. */
static int parse_pair(const char *v, unsigned long *a, double *b) {
  char *end;
  if (v == NULL || *v < '0' || *v > '9')
    return -1;
  errno = 0;
  *a = strtoul(v, &end, 10);
  if (errno != 0 || *a > UINT32_MAX || *end != ',' || end[1] < '0' ||
      end[1] > '9')
    return -1;
  const char *p = end + 1;
  *b = strtod(p, &end);
  /* Both end up in uint32_t fields: larger values would wrap. */
  return errno != 0 || *end != '\0' || !(*b <= UINT32_MAX) ? -1 : 0;
}

/* "PCT,MIN" (PCT may have a fraction; MIN a count up to UINT32_MAX).
 * Returns 0 or -1. */
static int parse_pct_min(const char *v, double *pct, unsigned long *min) {
  int used = 0;
  const char *comma = v != NULL ? strchr(v, ',') : NULL;
  if (comma == NULL || comma[1] < '0' || comma[1] > '9' ||
      sscanf(v, "%lf,%lu%n", pct, min, &used) != 2 || v[used] != '\0' ||
      *min > UINT32_MAX)
    return -1;
  return 0;
}

/* "UNAVAILABLE,RESOURCE_EXHAUSTED" -> SLUICE_CODE_BIT()s. 0 when bad. */
static uint32_t parse_codes(const char *v) {
  uint32_t bits = 0;
  char buf[512];
  if (v == NULL || strlen(v) >= sizeof buf)
    return 0;
  strcpy(buf, v);
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok != NULL;
       tok = strtok_r(NULL, ",", &save)) {
    int found = 0;
    for (int c = 1; c <= SLUICE_STATUS_UNAUTHENTICATED; c++)
      if (strcmp(tok, sluice_status_name((sluice_status_code)c)) == 0) {
        bits |= SLUICE_CODE_BIT(c);
        found = 1;
      }
    if (!found)
      return 0;
  }
  return bits;
}

/* The resilience flags (applied to the channel's options in this order). */
typedef struct resil {
  char *service_config;
  unsigned long retry_attempts, hedge_attempts;
  double retry_backoff_ms, hedge_delay_ms;
  uint32_t codes;
  uint32_t breakers[3];
  int have_breakers;
  int have_budget, have_throttling, no_retries;
  unsigned long budget_min, throttle_tokens;
  double budget_pct, throttle_ratio;
} resil;

static int apply_resil(sluice_channel_opts *co, const char *prog,
                       const resil *r) {
  int rc = sx_apply(co, prog, r->service_config, NULL);
  if (rc == 0 && (r->retry_attempts || r->hedge_attempts)) {
    sluice_method_config mc;
    sluice_method_config_init(&mc);
    if (r->hedge_attempts) {
      mc.has_hedging = 1;
      mc.hedging.max_attempts = (uint32_t)r->hedge_attempts;
      mc.hedging.hedging_delay_ms = (uint32_t)r->hedge_delay_ms;
      mc.hedging.non_fatal_codes = r->codes;
    } else {
      mc.has_retry = 1;
      mc.retry.max_attempts = (uint32_t)r->retry_attempts;
      /* gRPC wants a backoff > 0: "0" is the smallest it takes. */
      uint32_t ms =
          r->retry_backoff_ms >= 1 ? (uint32_t)r->retry_backoff_ms : 1;
      mc.retry.initial_backoff_ms = mc.retry.max_backoff_ms = ms;
      mc.retry.backoff_multiplier = 1.0;
      mc.retry.retryable_codes = r->codes;
    }
    if ((rc = sluice_channel_opts_set_method_config(co, "testbed.Layer", &mc)))
      fprintf(stderr, "%s: --retry/--hedge refused: %s\n", prog,
              sluice_channel_opts_last_error(co));
  }
  if (rc == 0 && r->have_breakers)
    rc = sx_apply(co, prog, NULL, r->breakers);
  if (rc == 0 && r->have_budget &&
      (rc = sluice_channel_opts_set_retry_budget(co, r->budget_pct,
                                                 (uint32_t)r->budget_min)))
    fprintf(stderr, "%s: --retry-budget refused: %s\n", prog,
            sluice_channel_opts_last_error(co));
  if (rc == 0 && r->have_throttling &&
      (rc = sluice_channel_opts_set_retry_throttling(
           co, (uint32_t)r->throttle_tokens, r->throttle_ratio)))
    fprintf(stderr, "%s: --retry-throttling refused: %s\n", prog,
            sluice_channel_opts_last_error(co));
  if (rc == 0 && r->no_retries &&
      (rc = sluice_channel_opts_set_retries_enabled(co, 0)))
    fprintf(stderr, "%s: --no-retries refused: %s\n", prog,
            sluice_channel_opts_last_error(co));
  return rc;
}

int main(int argc, char **argv) {
  const char *prog = argv[0];
  resil R;
  memset(&R, 0, sizeof R);
  R.codes = SLUICE_CODE_BIT(SLUICE_STATUS_UNAVAILABLE) |
            SLUICE_CODE_BIT(SLUICE_STATUS_RESOURCE_EXHAUSTED);
  unsigned long fanout = 1, grace_ms = SHUTDOWN_GRACE_MS;
  const char *next = NULL, *stats_path = NULL;
  unsigned long port = 0, workers = 4, service_us = 1000, threads = 1;
  int health = 1;
  L.name = "layer";
  L.lb = "btc";

  for (int i = 1; i < argc; i++) {
    const char *flag = argv[i];
    if (strcmp(flag, "--help") == 0 || strcmp(flag, "-h") == 0) {
      usage(stdout, prog);
      return 0;
    }
    if (strcmp(flag, "--no-retries") == 0) {
      R.no_retries = 1;
      continue;
    }
    if (strcmp(flag, "--no-health") == 0) {
      health = 0;
      continue;
    }
    const char *val = i + 1 < argc ? argv[++i] : NULL;
    int bad = val == NULL || *val == '\0';
    if (strcmp(flag, "--port") == 0)
      bad = sluice_example_parse_ulong(val, 65535, &port);
    else if (strcmp(flag, "--workers") == 0)
      bad = sluice_example_parse_ulong(val, MAX_WORKERS, &workers) ||
            workers == 0;
    else if (strcmp(flag, "--service-us") == 0)
      bad = sluice_example_parse_ulong(val, 10000000UL, &service_us);
    else if (strcmp(flag, "--threads") == 0)
      bad = sluice_example_parse_ulong(val, 64, &threads);
    else if (strcmp(flag, "--next") == 0)
      next = val;
    else if (strcmp(flag, "--lb") == 0)
      L.lb = val;
    else if (strcmp(flag, "--name") == 0)
      L.name = val;
    else if (strcmp(flag, "--stats") == 0)
      stats_path = val;
    else if (strcmp(flag, "--shutdown-grace-ms") == 0)
      bad = sluice_example_parse_ulong(val, 600000UL, &grace_ms);
    else if (strcmp(flag, "--fanout-mode") == 0) {
      if (val != NULL && strcmp(val, "sequential") == 0)
        L.sequential = 1;
      else if (val != NULL && strcmp(val, "parallel") == 0)
        L.sequential = 0;
      else
        bad = 1;
    } else if (strcmp(flag, "--fanout") == 0)
      bad = sluice_example_parse_ulong(val, MAX_FANOUT, &fanout) || fanout == 0;
    else if (strcmp(flag, "--service-config") == 0) {
      char why[300];
      if (!bad) {
        free(R.service_config);
        R.service_config = sx_load_service_config(val, why, sizeof why);
        if (R.service_config == NULL) {
          fprintf(stderr, "%s: --service-config: %s\n", prog, why);
          return 2;
        }
      }
    } else if (strcmp(flag, "--retry") == 0)
      bad = parse_pair(val, &R.retry_attempts, &R.retry_backoff_ms) ||
            R.retry_attempts < 1;
    else if (strcmp(flag, "--hedge") == 0)
      bad = parse_pair(val, &R.hedge_attempts, &R.hedge_delay_ms) ||
            R.hedge_attempts < 1;
    else if (strcmp(flag, "--retry-codes") == 0)
      bad = (R.codes = parse_codes(val)) == 0;
    else if (strcmp(flag, "--breakers") == 0)
      bad = sx_parse_breakers(val, R.breakers) != 0, R.have_breakers = 1;
    else if (strcmp(flag, "--retry-budget") == 0)
      bad = parse_pct_min(val, &R.budget_pct, &R.budget_min), R.have_budget = 1;
    else if (strcmp(flag, "--retry-throttling") == 0)
      bad = parse_pair(val, &R.throttle_tokens, &R.throttle_ratio),
      R.have_throttling = 1;
    else {
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
  L.workers = (unsigned)workers;
  L.service_us = service_us;
  L.fanout = (unsigned)fanout;
  /* --retry 1,X: one attempt, no retry (a baseline run); no policy set. */
  if (R.retry_attempts == 1)
    R.retry_attempts = 0;
  if (R.hedge_attempts == 1)
    R.hedge_attempts = 0;

  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &sigs, NULL);
  pthread_mutex_init(&L.mu, NULL);
  pthread_cond_init(&L.cv, NULL);
  for (int k = 0; k < N_KINDS; k++)
    tb_hist_init(&L.kinds[k]);
  tb_hist_init(&L.drop_decided);

  int exit_code = 1, rc;
  sluice_server_opts *sopts = NULL;
  sluice_server *srv = NULL;
  pthread_t tids[MAX_WORKERS];
  unsigned started = 0;

  if (next != NULL) {
    sluice_channel_opts *co = NULL;
    if ((rc = sluice_channel_opts_new(&co)) == 0 &&
        (rc = sluice_channel_opts_set_lb(co, L.lb)) == 0 &&
        apply_resil(co, prog, &R) != 0) { /* it said why */
      sluice_channel_opts_del(co);
      return 2;
    }
    if (rc != 0 || (rc = sluice_channel_new(&L.ch, next, co)) != 0) {
      fprintf(stderr, "%s: cannot create the channel to %s (lb %s): %s\n", prog,
              next, L.lb, sluice_strerror(rc));
      sluice_channel_opts_del(co);
      return 2;
    }
    sluice_channel_opts_del(co);
  }
  for (; started < L.workers; started++)
    if (pthread_create(&tids[started], NULL, worker_main, NULL) != 0) {
      fprintf(stderr, "%s: cannot start worker threads\n", prog);
      goto out;
    }

  char address[64];
  snprintf(address, sizeof address, "127.0.0.1:%lu", port);
  const Testbed__Layer_SluiceHandlers handlers = {.call = handle_call};
  if ((rc = sluice_server_opts_new(&sopts)) != 0 ||
      (rc = sluice_server_opts_set_threads(sopts, (unsigned)threads)) != 0 ||
      (rc = sluice_server_opts_set_health(sopts, health)) != 0 ||
      (rc = sluice_server_new(&srv, sopts)) != 0 ||
      (rc = testbed__layer__sluice_register(srv, &handlers, NULL)) != 0 ||
      (rc = sluice_server_listen(srv, address, &L.port)) != 0 ||
      (rc = sluice_server_start(srv)) != 0) {
    fprintf(stderr, "%s: cannot start the server on %s: %s\n", prog, address,
            sluice_strerror(rc));
    goto out;
  }
  pthread_mutex_lock(&L.mu);
  L.srv = srv;
  report_load();
  pthread_mutex_unlock(&L.mu);
  printf("listening on %d\n", L.port);
  fflush(stdout);

  for (;;) {
    int sig = 0;
    if (sigwait(&sigs, &sig) != 0)
      continue;
    if (sig == SIGUSR1) {
      dump_stats_to(stats_path, "SIGUSR1");
      continue;
    }
    break;
  }
  sluice_server_shutdown(srv, (uint64_t)grace_ms);
  dump_stats_to(stats_path, "exit");
  exit_code = 0;

out:
  /* Workers finish what is queued (UNAVAILABLE) and stop; then the channel
   * completes the forwarded calls still in flight (CANCELLED), which
   * finishes their server calls; only then is the server freed. */
  pthread_mutex_lock(&L.mu);
  L.stopping = 1;
  pthread_cond_broadcast(&L.cv);
  pthread_mutex_unlock(&L.mu);
  for (unsigned i = 0; i < started; i++)
    pthread_join(tids[i], NULL);
  pthread_mutex_lock(&L.mu);
  L.srv = NULL;
  pthread_mutex_unlock(&L.mu);
  sluice_channel_del(L.ch);
  sluice_server_del(srv);
  sluice_server_opts_del(sopts);
  free(R.service_config);
  return exit_code;
}
