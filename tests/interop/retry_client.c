/* retry_client: the sluice client with a retry policy (gRFC A6) against a
 * stock grpcio 1.51 server of retrytest.RetryTest (py_retry_server.py),
 * using the resilience API of sluice/resilience.h and sluice/channel.h:
 * sluice_channel_opts_set_service_config() with a retryPolicy and
 * retryThrottling, sluice_call_opts.retry_policy / no_retry,
 * sluice_channel_opts_set_retry_budget(), sluice_call_opts.hedging_policy
 * and sluice_channel_get_resilience_stats().
 *
 *   retry_client --target HOST:PORT [--hedge-targets ipv4:FAST,SLOW]
 *                [--only NAME]
 *
 * --hedge-targets names two grpcio servers, FAST (answers at once) and
 * SLOW (py_retry_server.py --delay-ms 2000), as "ipv4:127.0.0.1:P1,
 * 127.0.0.1:P2" (fast first); the hedging scenario runs only with it.
 *
 * Runs the scenarios below one after another, each on channels of its own
 * (so that counters and throttle tokens start fresh), asks the server what
 * it saw (Observe, over a channel without any retry configuration) and
 * prints "ok  NAME" or "FAIL NAME -- detail" per check, then "N passed,
 * N failed". Exits 0 when every check passed, 1 otherwise, 2 on bad
 * arguments. Every wait is bounded; times are only bounded from below
 * (backoff and pushback floors, with SLACK_MS), except that a call with a
 * deadline must end within a generous DEADLINE_SLACK_MS of it.
 *
 * test_retry_peers.py --c-client starts the grpcio server and runs this.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sluice/sluice.h>

#include "retrytest.sluice.h"

#define SLACK_MS 15.0
#define DEADLINE_SLACK_MS 2000.0
#define CALL_TIMEOUT_MS 20000u
#define WAIT_MS 30000u

static const char *target;
static const char *hedge_targets;
static const char *only;
static unsigned n_pass, n_fail;
static char key_prefix[64];

/* ---- checks */

static int check(const char *name, int ok, const char *fmt, ...) {
  char detail[1024] = "";
  if (!ok && fmt) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
  }
  printf("%s %s%s%s\n", ok ? "ok  " : "FAIL", name, *detail ? "  -- " : "",
         detail);
  fflush(stdout);
  if (ok)
    n_pass++;
  else
    n_fail++;
  return ok;
}

static double now_ms(void) { return (double)sluice_now_ns() / 1e6; }

static struct timespec abs_in_ms(unsigned ms) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  ts.tv_sec += (time_t)(ms / 1000);
  ts.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  return ts;
}

static pthread_cond_t *new_cond(pthread_cond_t *cv) {
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(cv, &ca);
  pthread_condattr_destroy(&ca);
  return cv;
}

/* A key unique to this run and scenario. */
static const char *key(char *buf, size_t cap, const char *name) {
  snprintf(buf, cap, "%s-%s", key_prefix, name);
  return buf;
}

/* ---- channels */

static const char *const METHODS_NAME =
    "\"name\":[{\"service\":\"retrytest.RetryTest\",\"method\":\"Unary\"},"
    "{\"service\":\"retrytest.RetryTest\",\"method\":\"Stream\"}]";

/* A retry service config: maxAttempts, initialBackoff, maxBackoff,
 * multiplier, codes (a JSON list body) and an optional retryThrottling
 * object body. */
static void retry_config(char *out, size_t cap, unsigned max_attempts,
                         const char *initial, const char *max_backoff,
                         double mult, const char *codes,
                         const char *throttling) {
  int n =
      snprintf(out, cap,
               "{\"methodConfig\":[{%s,\"retryPolicy\":{"
               "\"maxAttempts\":%u,\"initialBackoff\":\"%s\","
               "\"maxBackoff\":\"%s\",\"backoffMultiplier\":%g,"
               "\"retryableStatusCodes\":[%s]}}]",
               METHODS_NAME, max_attempts, initial, max_backoff, mult, codes);
  if (throttling && n > 0 && (size_t)n < cap)
    n += snprintf(out + n, cap - (size_t)n, ",\"retryThrottling\":{%s}",
                  throttling);
  if (n > 0 && (size_t)n < cap)
    snprintf(out + n, cap - (size_t)n, "}");
}

#define DEFAULT_CODES "\"UNAVAILABLE\""

/* A channel to tgt with strategy lb (NULL: the default) and service
 * config json (NULL: none); budget_pct >= 0 also sets the retry budget.
 * NULL after printing why. */
static sluice_channel *channel_at(const char *tgt, const char *lb,
                                  const char *json, double budget_pct,
                                  uint32_t min_conc) {
  sluice_channel_opts *o;
  sluice_channel *ch = NULL;
  if (sluice_channel_opts_new(&o) != 0)
    return NULL;
  int rc = 0;
  if (lb && (rc = sluice_channel_opts_set_lb(o, lb)) != 0)
    fprintf(stderr, "retry_client: lb %s refused: %s\n", lb,
            sluice_strerror(rc));
  if (rc == 0 && json &&
      (rc = sluice_channel_opts_set_service_config(o, json)) != 0)
    fprintf(stderr, "retry_client: service config refused: %s: %s\n%s\n",
            sluice_strerror(rc), sluice_channel_opts_last_error(o), json);
  if (rc == 0 && budget_pct >= 0 &&
      (rc = sluice_channel_opts_set_retry_budget(o, budget_pct, min_conc)) != 0)
    fprintf(stderr, "retry_client: retry budget refused: %s: %s\n",
            sluice_strerror(rc), sluice_channel_opts_last_error(o));
  if (rc == 0 && (rc = sluice_channel_new(&ch, tgt, o)) != 0)
    fprintf(stderr, "retry_client: channel to %s: %s\n", tgt,
            sluice_strerror(rc));
  sluice_channel_opts_del(o);
  return rc == 0 ? ch : NULL;
}

/* A channel to --target (see channel_at). */
static sluice_channel *channel(const char *json, double budget_pct,
                               uint32_t min_conc) {
  return channel_at(target, NULL, json, budget_pct, min_conc);
}

static sluice_channel *observer; /* plain: no retries, no throttle */

/* ---- what the server saw */

typedef struct seen {
  size_t n;
  char prev[16][24];
  double arrival[16];
  int64_t timeout[16];
  int cancelled[16]; /* the client cancelled it (py_retry_server.py) */
  int done[16];      /* over on the server: cancelled[] is final */
  unsigned n_cancelled;
  int ok; /* Observe worked */
} seen;

/* What the server behind obs saw for key k. */
static void observe_on(sluice_channel *obs, const char *k, seen *s) {
  memset(s, 0, sizeof *s);
  Retrytest__ObserveRequest req = RETRYTEST__OBSERVE_REQUEST__INIT;
  req.key = (char *)k;
  Retrytest__Report *r = NULL;
  sluice_call_opts opts;
  sluice_call_opts_init(&opts);
  opts.timeout_ms = 10000;
  opts.no_retry = 1;
  sluice_status st;
  sluice_status_init(&st);
  if (retrytest__retry_test__observe__blocking(obs, &req, &r, &opts, &st) ==
      SLUICE_STATUS_OK) {
    s->ok = 1;
    for (size_t i = 0; i < r->n_attempts && i < 16; i++) {
      snprintf(s->prev[i], sizeof s->prev[i], "%s",
               r->attempts[i]->previous_attempts);
      s->arrival[i] = r->attempts[i]->arrival_ms;
      s->timeout[i] = r->attempts[i]->timeout_ms;
      s->cancelled[i] = r->attempts[i]->cancelled;
      s->done[i] = r->attempts[i]->done;
    }
    s->n_cancelled = r->cancelled;
    s->n = r->n_attempts < 16 ? r->n_attempts : 16;
    protobuf_c_message_free_unpacked(&r->base, NULL);
  } else {
    fprintf(stderr, "retry_client: Observe(%s): %s: %s\n", k,
            sluice_status_name(st.code), st.message ? st.message : "");
  }
  sluice_status_clear(&st);
}

static void observe(const char *k, seen *s) { observe_on(observer, k, s); }

static double gap(const seen *s, size_t i) {
  return s->arrival[i + 1] - s->arrival[i];
}

/* "['', '1', '2'] gaps [101, 203] timeouts [..]" into out. */
static const char *describe(const seen *s, char *out, size_t cap) {
  size_t n = 0;
  n += (size_t)snprintf(out + n, cap - n, "prev [");
  for (size_t i = 0; i < s->n && n < cap; i++)
    n +=
        (size_t)snprintf(out + n, cap - n, "%s'%s'", i ? ", " : "", s->prev[i]);
  if (n < cap)
    n += (size_t)snprintf(out + n, cap - n, "] gaps [");
  for (size_t i = 0; i + 1 < s->n && n < cap; i++)
    n += (size_t)snprintf(out + n, cap - n, "%s%.0f", i ? ", " : "", gap(s, i));
  if (n < cap)
    n += (size_t)snprintf(out + n, cap - n, "] timeouts [");
  for (size_t i = 0; i < s->n && n < cap; i++)
    n += (size_t)snprintf(out + n, cap - n, "%s%" PRId64, i ? ", " : "",
                          s->timeout[i]);
  if (n < cap)
    snprintf(out + n, cap - n, "]%s", s->ok ? "" : " (Observe failed)");
  return out;
}

static int prevs_are(const seen *s, size_t n, const char *const *want) {
  if (!s->ok || s->n != n)
    return 0;
  for (size_t i = 0; i < n; i++)
    if (strcmp(s->prev[i], want[i]) != 0)
      return 0;
  return 1;
}

/* ---- calls */

typedef struct outcome {
  sluice_status_code code;
  char message[256];
  double elapsed_ms;
  unsigned messages; /* responses received (stream) */
  int dup;           /* a stream message index repeated or out of order */
  char pushback[32]; /* grpc-retry-pushback-ms in the trailers, if any */
} outcome;

static void init_behavior(Retrytest__Behavior *b, const char *k,
                          uint32_t fail_first) {
  Retrytest__Behavior init = RETRYTEST__BEHAVIOR__INIT;
  *b = init;
  b->key = (char *)k;
  b->fail_first = fail_first;
}

static void fill_outcome(outcome *out, const sluice_status *st, double t0) {
  out->elapsed_ms = now_ms() - t0;
  out->code = st->code;
  snprintf(out->message, sizeof out->message, "%s",
           st->message ? st->message : "");
  const char *pb =
      sluice_metadata_find(st->trailing_md, "grpc-retry-pushback-ms", NULL);
  snprintf(out->pushback, sizeof out->pushback, "%s", pb ? pb : "");
}

static void unary(sluice_channel *ch, const Retrytest__Behavior *b,
                  const sluice_call_opts *opts_in, outcome *out) {
  memset(out, 0, sizeof *out);
  sluice_call_opts opts;
  if (opts_in)
    opts = *opts_in;
  else
    sluice_call_opts_init(&opts);
  if (!opts.timeout_ms && !opts.deadline_ns)
    opts.timeout_ms = CALL_TIMEOUT_MS;
  Retrytest__Report *r = NULL;
  sluice_status st;
  sluice_status_init(&st);
  double t0 = now_ms();
  retrytest__retry_test__unary__blocking(ch, b, &r, &opts, &st);
  fill_outcome(out, &st, t0);
  if (r) {
    out->messages = 1;
    protobuf_c_message_free_unpacked(&r->base, NULL);
  }
  sluice_status_clear(&st);
}

typedef struct stream_wait {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done;
  outcome *out;
  double t0;
  uint32_t next_seq;
} stream_wait;

static void st_on_message(sluice_call *call, const Retrytest__Report *msg,
                          void *ud) {
  (void)call;
  stream_wait *w = ud;
  pthread_mutex_lock(&w->mu);
  if (msg->seq != w->next_seq)
    w->out->dup = 1;
  w->next_seq = msg->seq + 1;
  w->out->messages++;
  pthread_mutex_unlock(&w->mu);
}

static void st_on_done(sluice_call *call, const sluice_status *st, void *ud) {
  (void)call;
  stream_wait *w = ud;
  pthread_mutex_lock(&w->mu);
  fill_outcome(w->out, st, w->t0);
  w->done = 1;
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

static void stream(sluice_channel *ch, const Retrytest__Behavior *b,
                   outcome *out) {
  memset(out, 0, sizeof *out);
  stream_wait w;
  memset(&w, 0, sizeof w);
  pthread_mutex_init(&w.mu, NULL);
  new_cond(&w.cv);
  w.out = out;
  w.t0 = now_ms();
  sluice_call_opts opts;
  sluice_call_opts_init(&opts);
  opts.timeout_ms = CALL_TIMEOUT_MS;
  Retrytest__RetryTest__Stream_Handlers h = {.on_message = st_on_message,
                                             .on_done = st_on_done};
  sluice_call *call = NULL;
  int rc = retrytest__retry_test__stream__start(ch, b, &opts, &h, &w, &call);
  if (rc != 0) {
    out->code = SLUICE_STATUS_INTERNAL;
    snprintf(out->message, sizeof out->message, "start: %s",
             sluice_strerror(rc));
  } else {
    struct timespec until = abs_in_ms(CALL_TIMEOUT_MS + WAIT_MS);
    pthread_mutex_lock(&w.mu);
    while (!w.done)
      if (pthread_cond_timedwait(&w.cv, &w.mu, &until) == ETIMEDOUT)
        break;
    int done = w.done;
    pthread_mutex_unlock(&w.mu);
    if (!done) {
      /* on_done never came: cancel, and wait for it once more. */
      sluice_call_cancel(call, "retry_client: on_done overdue");
      until = abs_in_ms(5000);
      pthread_mutex_lock(&w.mu);
      while (!w.done)
        if (pthread_cond_timedwait(&w.cv, &w.mu, &until) == ETIMEDOUT)
          break;
      done = w.done;
      pthread_mutex_unlock(&w.mu);
      if (!done) {
        fprintf(stderr, "retry_client: a stream never completed\n");
        exit(1); /* w is still referenced by the call */
      }
      snprintf(out->message, sizeof out->message, "on_done overdue");
      out->code = SLUICE_STATUS_DEADLINE_EXCEEDED;
    }
    sluice_call_release(call);
  }
  pthread_cond_destroy(&w.cv);
  pthread_mutex_destroy(&w.mu);
}

static int stats(sluice_channel *ch, sluice_resilience_stats *s) {
  sluice_resilience_stats_init(s);
  int rc = sluice_channel_get_resilience_stats(ch, s);
  /* A channel that cannot give its counters fails the run: the checks on
   * them are skipped, not passed silently. */
  if (rc != 0)
    check("resilience stats available", 0, "%s", sluice_strerror(rc));
  return rc;
}

static int want(const char *name) { return !only || strcmp(only, name) == 0; }

/* ---- scenarios */

/* k = 2 with maxAttempts 5 (service config): OK on the 3rd attempt, the
 * server sees grpc-previous-rpc-attempts '', 1, 2, backoff 0.1 s x2 with
 * -20 % jitter: gaps >= 80 and >= 160 ms. */
static void sc_fail2(void) {
  char json[1024], k[128], d[512];
  retry_config(json, sizeof json, 5, "0.1s", "1s", 2, DEFAULT_CODES, NULL);
  sluice_channel *ch = channel(json, -1, 0);
  if (!check("fail2: channel with a retry service config", ch != NULL, NULL))
    return;
  Retrytest__Behavior b;
  init_behavior(&b, key(k, sizeof k, "fail2"), 2);
  outcome o;
  unary(ch, &b, NULL, &o);
  seen s;
  observe(k, &s);
  static const char *const want3[] = {"", "1", "2"};
  check("fail2: OK after 3 attempts, previous-attempts '', 1, 2",
        o.code == SLUICE_STATUS_OK && prevs_are(&s, 3, want3), "%s %s; %s",
        sluice_status_name(o.code), o.message, describe(&s, d, sizeof d));
  check("fail2: backoff gaps >= 80 ms, >= 160 ms",
        s.n == 3 && gap(&s, 0) >= 80 - SLACK_MS && gap(&s, 1) >= 160 - SLACK_MS,
        "%s", describe(&s, d, sizeof d));
  sluice_resilience_stats rs;
  if (stats(ch, &rs) == 0) {
    check("fail2: stats count 1 call, 3 attempts, 2 retries, in "
          "calls_by_attempts[2]",
          rs.total.calls == 1 && rs.total.attempts == 3 &&
              rs.total.retries == 2 && rs.total.calls_by_attempts[2] == 1,
          "calls %" PRIu64 " attempts %" PRIu64 " retries %" PRIu64
          " by_attempts[2] %" PRIu64,
          rs.total.calls, rs.total.attempts, rs.total.retries,
          rs.total.calls_by_attempts[2]);
    check("fail2: retry_delay_ms_sum >= 240 ms (80 + 160)",
          rs.total.retry_delay_ms_sum + SLACK_MS >= 240, "%" PRIu64,
          rs.total.retry_delay_ms_sum);
    int found = 0;
    for (size_t i = 0; i < rs.n_methods; i++)
      if (strcmp(rs.methods[i].path, "/retrytest.RetryTest/Unary") == 0)
        found = rs.methods[i].counters.retries == 2;
    check("fail2: per-method stats of /retrytest.RetryTest/Unary: 2 retries",
          found, "n_methods %zu", rs.n_methods);
    sluice_resilience_stats_clear(&rs);
  }
  sluice_channel_del(ch);
}

/* The call's own policy (sluice_call_opts.retry_policy) on a channel
 * without any, and no_retry over a channel policy. */
static void sc_call_policy(void) {
  char k[128], d[512], json[1024];
  sluice_channel *ch = channel(NULL, -1, 0);
  if (!check("call_policy: plain channel", ch != NULL, NULL))
    return;
  sluice_retry_policy p = {.max_attempts = 5,
                           .initial_backoff_ms = 100,
                           .max_backoff_ms = 1000,
                           .backoff_multiplier = 2.0,
                           .retryable_codes =
                               SLUICE_CODE_BIT(SLUICE_STATUS_UNAVAILABLE)};
  sluice_call_opts opts;
  sluice_call_opts_init(&opts);
  opts.retry_policy = &p;
  Retrytest__Behavior b;
  init_behavior(&b, key(k, sizeof k, "call_policy"), 2);
  outcome o;
  unary(ch, &b, &opts, &o);
  seen s;
  observe(k, &s);
  static const char *const want3[] = {"", "1", "2"};
  check("call_policy: per-call retry_policy: OK after 3 attempts",
        o.code == SLUICE_STATUS_OK && prevs_are(&s, 3, want3), "%s %s; %s",
        sluice_status_name(o.code), o.message, describe(&s, d, sizeof d));

  /* Without the call's policy the plain channel does not retry. */
  init_behavior(&b, key(k, sizeof k, "no_policy"), 2);
  unary(ch, &b, NULL, &o);
  observe(k, &s);
  check("call_policy: no policy anywhere: 1 attempt, UNAVAILABLE",
        o.code == SLUICE_STATUS_UNAVAILABLE && s.n == 1, "%s; %s",
        sluice_status_name(o.code), describe(&s, d, sizeof d));

  /* An invalid policy fails the call with INVALID_ARGUMENT. */
  sluice_retry_policy bad = p;
  bad.max_attempts = 1;
  opts.retry_policy = &bad;
  init_behavior(&b, key(k, sizeof k, "bad_policy"), 0);
  unary(ch, &b, &opts, &o);
  check("call_policy: max_attempts 1 is refused: INVALID_ARGUMENT",
        o.code == SLUICE_STATUS_INVALID_ARGUMENT, "%s %s",
        sluice_status_name(o.code), o.message);
  sluice_channel_del(ch);

  retry_config(json, sizeof json, 5, "0.1s", "1s", 2, DEFAULT_CODES, NULL);
  ch = channel(json, -1, 0);
  if (!ch)
    return;
  sluice_call_opts_init(&opts);
  opts.no_retry = 1;
  init_behavior(&b, key(k, sizeof k, "no_retry"), 2);
  unary(ch, &b, &opts, &o);
  observe(k, &s);
  check("call_policy: no_retry over the channel's policy: 1 attempt",
        o.code == SLUICE_STATUS_UNAVAILABLE && s.n == 1, "%s; %s",
        sluice_status_name(o.code), describe(&s, d, sizeof d));
  sluice_channel_del(ch);
}

/* Always UNAVAILABLE: exactly 5 attempts; INVALID_ARGUMENT: 1. */
static void sc_exhausted(void) {
  char json[1024], k[128], d[512];
  retry_config(json, sizeof json, 5, "0.1s", "1s", 2, DEFAULT_CODES, NULL);
  sluice_channel *ch = channel(json, -1, 0);
  if (!check("exhausted: channel", ch != NULL, NULL))
    return;
  Retrytest__Behavior b;
  init_behavior(&b, key(k, sizeof k, "exhausted"), 1000);
  outcome o;
  unary(ch, &b, NULL, &o);
  seen s;
  observe(k, &s);
  static const char *const want5[] = {"", "1", "2", "3", "4"};
  check("exhausted: UNAVAILABLE after exactly 5 attempts",
        o.code == SLUICE_STATUS_UNAVAILABLE && prevs_are(&s, 5, want5),
        "%s; %s", sluice_status_name(o.code), describe(&s, d, sizeof d));
  check("exhausted: gaps >= 80, 160, 320, 640 ms",
        s.n == 5 && gap(&s, 0) >= 80 - SLACK_MS &&
            gap(&s, 1) >= 160 - SLACK_MS && gap(&s, 2) >= 320 - SLACK_MS &&
            gap(&s, 3) >= 640 - SLACK_MS,
        "%s", describe(&s, d, sizeof d));

  init_behavior(&b, key(k, sizeof k, "nonretryable"), 1);
  b.code = SLUICE_STATUS_INVALID_ARGUMENT;
  unary(ch, &b, NULL, &o);
  observe(k, &s);
  check("nonretryable: INVALID_ARGUMENT after 1 attempt",
        o.code == SLUICE_STATUS_INVALID_ARGUMENT && s.n == 1, "%s; %s",
        sluice_status_name(o.code), describe(&s, d, sizeof d));

  sluice_resilience_stats rs;
  if (stats(ch, &rs) == 0) {
    check("exhausted: stats retries_exhausted 1, retries 4",
          rs.total.retries_exhausted == 1 && rs.total.retries == 4,
          "exhausted %" PRIu64 " retries %" PRIu64, rs.total.retries_exhausted,
          rs.total.retries);
    sluice_resilience_stats_clear(&rs);
  }
  sluice_channel_del(ch);
}

/* Pushback: 300 ms is waited (gap >= 300 ms, with a 0.1 s backoff that
 * would be at most 120 ms); -1 stops the retries (retries_pushback_denied
 * 1); grpcio sends "abc" as INT64_MIN, also negative. */
static void sc_pushback(void) {
  char json[1024], k[128], d[512];
  retry_config(json, sizeof json, 5, "0.1s", "1s", 2, DEFAULT_CODES, NULL);
  sluice_channel *ch = channel(json, -1, 0);
  if (!check("pushback: channel", ch != NULL, NULL))
    return;
  Retrytest__Behavior b;
  init_behavior(&b, key(k, sizeof k, "pushback300"), 1);
  b.pushback = (char *)"300";
  outcome o;
  unary(ch, &b, NULL, &o);
  seen s;
  observe(k, &s);
  check("pushback 300: OK, the 2nd attempt >= 300 ms after the 1st",
        o.code == SLUICE_STATUS_OK && s.n == 2 && gap(&s, 0) >= 300 - SLACK_MS,
        "%s; %s", sluice_status_name(o.code), describe(&s, d, sizeof d));

  /* Pushback on the first two failures, none on the third: each wait is
   * at least its floor (after the pushbacks A6 restarts the exponent, so
   * the third wait is initialBackoff +-20 %, not 0.4 s; only the floor is
   * asserted). */
  init_behavior(&b, key(k, sizeof k, "pushback_reset"), 3);
  b.pushback = (char *)"50";
  b.pushback_attempts = 2;
  unary(ch, &b, NULL, &o);
  observe(k, &s);
  check("pushback 50, 50, then none: gaps >= 50, >= 50, >= 80 ms",
        o.code == SLUICE_STATUS_OK && s.n == 4 && gap(&s, 0) >= 50 - SLACK_MS &&
            gap(&s, 1) >= 50 - SLACK_MS && gap(&s, 2) >= 80 - SLACK_MS,
        "%s; %s", sluice_status_name(o.code), describe(&s, d, sizeof d));
  sluice_channel_del(ch);

  ch = channel(json, -1, 0); /* fresh counters */
  if (!ch)
    return;
  init_behavior(&b, key(k, sizeof k, "pushback_neg"), 1);
  b.pushback = (char *)"-1";
  unary(ch, &b, NULL, &o);
  observe(k, &s);
  check("pushback -1: not retried, UNAVAILABLE, trailer visible",
        o.code == SLUICE_STATUS_UNAVAILABLE && s.n == 1 &&
            strcmp(o.pushback, "-1") == 0,
        "%s pushback '%s'; %s", sluice_status_name(o.code), o.pushback,
        describe(&s, d, sizeof d));
  sluice_resilience_stats rs;
  if (stats(ch, &rs) == 0) {
    check("pushback -1: stats retries_pushback_denied == 1",
          rs.total.retries_pushback_denied == 1, "%" PRIu64,
          rs.total.retries_pushback_denied);
    sluice_resilience_stats_clear(&rs);
  }
  init_behavior(&b, key(k, sizeof k, "pushback_bad"), 1);
  b.pushback = (char *)"abc";
  unary(ch, &b, NULL, &o);
  observe(k, &s);
  check("pushback 'abc' (grpcio sends a negative value): not retried",
        o.code == SLUICE_STATUS_UNAVAILABLE && s.n == 1, "%s pushback '%s'; %s",
        sluice_status_name(o.code), o.pushback, describe(&s, d, sizeof d));
  sluice_channel_del(ch);
}

/* Commit: response headers (and on Stream a message) before the failure:
 * 1 attempt, the message delivered once. Stream k = 2: 3 attempts, the
 * messages of the last one only, in order. */
static void sc_commit(void) {
  char json[1024], k[128], d[512];
  retry_config(json, sizeof json, 5, "0.1s", "1s", 2, DEFAULT_CODES, NULL);
  sluice_channel *ch = channel(json, -1, 0);
  if (!check("commit: channel", ch != NULL, NULL))
    return;
  Retrytest__Behavior b;
  init_behavior(&b, key(k, sizeof k, "unary_commit"), 1);
  b.headers_then_fail = 1;
  outcome o;
  unary(ch, &b, NULL, &o);
  seen s;
  observe(k, &s);
  check("commit: unary, headers then UNAVAILABLE: 1 attempt",
        o.code == SLUICE_STATUS_UNAVAILABLE && s.n == 1, "%s; %s",
        sluice_status_name(o.code), describe(&s, d, sizeof d));

  init_behavior(&b, key(k, sizeof k, "stream_commit"), 1);
  b.headers_then_fail = 1;
  stream(ch, &b, &o);
  observe(k, &s);
  check("commit: stream, a message then UNAVAILABLE: 1 attempt, 1 message",
        o.code == SLUICE_STATUS_UNAVAILABLE && s.n == 1 && o.messages == 1,
        "%s %u messages; %s", sluice_status_name(o.code), o.messages,
        describe(&s, d, sizeof d));

  init_behavior(&b, key(k, sizeof k, "stream_fail2"), 2);
  b.stream_messages = 3;
  stream(ch, &b, &o);
  observe(k, &s);
  check("stream fail2: OK after 3 attempts, 3 messages, no duplicates",
        o.code == SLUICE_STATUS_OK && s.n == 3 && o.messages == 3 && !o.dup,
        "%s %u messages dup %d; %s", sluice_status_name(o.code), o.messages,
        o.dup, describe(&s, d, sizeof d));
  sluice_channel_del(ch);
}

/* One deadline spans the attempts: timeout 500 ms, always failing, backoff
 * 0.2 s: DEADLINE_EXCEEDED (or the last UNAVAILABLE) within about the
 * deadline; each attempt's grpc-timeout is what is left, so it decreases;
 * no attempt starts after the deadline. */
static void sc_deadline(void) {
  char json[1024], k[128], d[512];
  retry_config(json, sizeof json, 5, "0.2s", "1s", 2, DEFAULT_CODES, NULL);
  sluice_channel *ch = channel(json, -1, 0);
  if (!check("deadline: channel", ch != NULL, NULL))
    return;
  Retrytest__Behavior b;
  init_behavior(&b, key(k, sizeof k, "deadline"), 1000);
  sluice_call_opts opts;
  sluice_call_opts_init(&opts);
  opts.timeout_ms = 500;
  outcome o;
  unary(ch, &b, &opts, &o);
  seen s;
  observe(k, &s);
  check("deadline 500 ms, backoff 0.2 s: DEADLINE_EXCEEDED or "
        "UNAVAILABLE, 1..4 attempts",
        (o.code == SLUICE_STATUS_DEADLINE_EXCEEDED ||
         o.code == SLUICE_STATUS_UNAVAILABLE) &&
            s.n >= 1 && s.n <= 4,
        "%s %s; %s", sluice_status_name(o.code), o.message,
        describe(&s, d, sizeof d));
  int dec = s.n >= 1;
  for (size_t i = 0; i < s.n; i++)
    if (s.timeout[i] < 0 || s.timeout[i] > 500 ||
        (i && s.timeout[i] >= s.timeout[i - 1]))
      dec = 0;
  check("deadline: every attempt's grpc-timeout <= 500 ms and decreasing", dec,
        "%s", describe(&s, d, sizeof d));
  int inside = s.n >= 1;
  for (size_t i = 1; i < s.n; i++)
    if (s.arrival[i] - s.arrival[0] >= 500)
      inside = 0;
  check("deadline: no attempt starts after the deadline", inside, "%s",
        describe(&s, d, sizeof d));
  check("deadline: the call ends within the deadline (+2 s slack)",
        o.elapsed_ms <= 500 + DEADLINE_SLACK_MS, "%.0f ms", o.elapsed_ms);
  sluice_channel_del(ch);
}

/* retryThrottling maxTokens 10, tokenRatio 0.1, maxAttempts 5, always
 * failing. C-core's rule (specs/retries.md), in milli-tokens: each
 * retryable failure takes 1000, each OK adds 100, a retry is made only
 * while the new count is > 5000:
 *   call 1: 10000 -> 9000 ... 5000 after its 5th failure: 5 attempts;
 *   call 2: 4000, no retry: 1 attempt; call 3: 3000: 1 attempt.
 *   31 OKs: 6100; call 4: 5100 > 5000, retry, 4100: 2 attempts.
 *   19 OKs: 6000; call 5: 5000, not > 5000: 1 attempt. */
static void sc_throttling(void) {
  char json[1024], k[128], d[512];
  retry_config(json, sizeof json, 5, "0.01s", "0.05s", 2, DEFAULT_CODES,
               "\"maxTokens\":10,\"tokenRatio\":0.1");
  sluice_channel *ch = channel(json, -1, 0);
  if (!check("throttling: channel with retryThrottling", ch != NULL, NULL))
    return;
  size_t got[5] = {0};
  int oks = 1;
  static const unsigned oks_before[5] = {0, 0, 0, 31, 19};
  static const size_t want[5] = {5, 1, 1, 2, 1};
  sluice_resilience_stats rs;
  for (int i = 0; i < 5; i++) {
    for (unsigned j = 0; j < oks_before[i]; j++) {
      char nm[32];
      snprintf(nm, sizeof nm, "thr_ok%d_%u", i, j);
      Retrytest__Behavior b;
      init_behavior(&b, key(k, sizeof k, nm), 0);
      outcome o;
      unary(ch, &b, NULL, &o);
      if (o.code != SLUICE_STATUS_OK)
        oks = 0;
    }
    char nm[32];
    snprintf(nm, sizeof nm, "thr_fail%d", i);
    Retrytest__Behavior b;
    init_behavior(&b, key(k, sizeof k, nm), 1000);
    outcome o;
    unary(ch, &b, NULL, &o);
    seen s;
    observe(k, &s);
    got[i] = s.n;
    if (i == 2 && stats(ch, &rs) == 0) {
      check("throttling: 3000 milli-tokens left after 5, 1, 1 "
            "(throttle_tokens 3.0)",
            fabs(rs.throttle_tokens - 3.0) < 0.01, "%g", rs.throttle_tokens);
      check("throttling: stats retries_throttled >= 2",
            rs.total.retries_throttled >= 2, "%" PRIu64,
            rs.total.retries_throttled);
      sluice_resilience_stats_clear(&rs);
    }
    (void)d;
  }
  printf("  throttling: attempts of the failing calls %zu %zu %zu %zu %zu\n",
         got[0], got[1], got[2], got[3], got[4]);
  check("throttling: failing calls make 5, 1, 1 attempts",
        got[0] == want[0] && got[1] == want[1] && got[2] == want[2],
        "got %zu %zu %zu", got[0], got[1], got[2]);
  check("throttling: 31 OKs later the next failing call makes 2",
        oks && got[3] == want[3], "got %zu (OKs all OK: %d)", got[3], oks);
  check("throttling: 19 OKs more, the next one makes 1",
        oks && got[4] == want[4], "got %zu", got[4]);
  sluice_channel_del(ch);
}

/* The retry budget (20 %, at least 3): 10 concurrent always-failing calls
 * with a long backoff; sampled during the run, retries_in_flight never
 * exceeds max(3, 20 % of 10) = 3, and the budget denies some retries. */
#define BUDGET_CALLS 10

typedef struct budget_call {
  pthread_mutex_t *mu;
  pthread_cond_t *cv;
  int *left;
  sluice_status_code code;
} budget_call;

static void budget_cb(const sluice_status *st, const Retrytest__Report *resp,
                      void *ud) {
  (void)resp;
  budget_call *c = ud;
  pthread_mutex_lock(c->mu);
  c->code = st->code;
  (*c->left)--;
  pthread_cond_broadcast(c->cv);
  pthread_mutex_unlock(c->mu);
}

static void sc_budget(void) {
  char json[1024], k[BUDGET_CALLS][128], d[512];
  retry_config(json, sizeof json, 5, "0.3s", "1s", 2, DEFAULT_CODES, NULL);
  sluice_channel *ch = channel(json, 20.0, 3);
  if (!check("budget: channel with a retry budget 20 %, 3", ch != NULL, NULL))
    return;
  pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t cv;
  new_cond(&cv);
  int left = 0;
  budget_call calls[BUDGET_CALLS];
  Retrytest__Behavior b[BUDGET_CALLS];
  sluice_call_opts opts;
  sluice_call_opts_init(&opts);
  opts.timeout_ms = CALL_TIMEOUT_MS;
  for (int i = 0; i < BUDGET_CALLS; i++) {
    char nm[32];
    snprintf(nm, sizeof nm, "budget%d", i);
    init_behavior(&b[i], key(k[i], sizeof k[i], nm), 1000);
    calls[i] = (budget_call){&mu, &cv, &left, SLUICE_STATUS_OK};
    pthread_mutex_lock(&mu);
    left++;
    pthread_mutex_unlock(&mu);
    if (retrytest__retry_test__unary__async(ch, &b[i], &opts, budget_cb,
                                            &calls[i]) != 0) {
      pthread_mutex_lock(&mu);
      left--;
      pthread_mutex_unlock(&mu);
    }
  }
  uint64_t max_in_flight = 0, samples = 0;
  struct timespec until = abs_in_ms(CALL_TIMEOUT_MS + WAIT_MS);
  pthread_mutex_lock(&mu);
  while (left > 0) {
    pthread_mutex_unlock(&mu);
    sluice_resilience_stats rs;
    if (stats(ch, &rs) == 0) {
      if (rs.retries_in_flight > max_in_flight)
        max_in_flight = rs.retries_in_flight;
      samples++;
      sluice_resilience_stats_clear(&rs);
    }
    pthread_mutex_lock(&mu);
    struct timespec tick = abs_in_ms(10);
    pthread_cond_timedwait(&cv, &mu, &tick);
    struct timespec nowts;
    clock_gettime(CLOCK_MONOTONIC, &nowts);
    if (nowts.tv_sec > until.tv_sec ||
        (nowts.tv_sec == until.tv_sec && nowts.tv_nsec >= until.tv_nsec))
      break;
  }
  int stuck = left;
  pthread_mutex_unlock(&mu);
  if (stuck) {
    fprintf(stderr, "retry_client: %d budget calls never completed\n", stuck);
    exit(1); /* their callbacks still point into this frame */
  }
  size_t one = 0, total_attempts = 0;
  for (int i = 0; i < BUDGET_CALLS; i++) {
    seen s;
    observe(k[i], &s);
    total_attempts += s.n;
    if (s.n == 1)
      one++;
  }
  sluice_resilience_stats rs;
  if (stats(ch, &rs) == 0) {
    printf("  budget: %" PRIu64 " samples, max retries_in_flight %" PRIu64
           ", budget denied %" PRIu64 ", %zu calls with 1 attempt, %zu "
           "attempts\n",
           samples, max_in_flight, rs.total.retries_budget_denied, one,
           total_attempts);
    check("budget: retries_in_flight sampled never above max(3, 20 % of "
          "10) = 3",
          samples > 0 && max_in_flight <= 3, "max %" PRIu64, max_in_flight);
    check("budget: the budget denied retries (stats retries_budget_denied "
          ">= 1)",
          rs.total.retries_budget_denied >= 1, "%" PRIu64,
          rs.total.retries_budget_denied);
    check("budget: retries_in_flight back to 0 at the end",
          rs.retries_in_flight == 0, "%" PRIu64, rs.retries_in_flight);
    sluice_resilience_stats_clear(&rs);
  }
  int all_failed = 1;
  for (int i = 0; i < BUDGET_CALLS; i++)
    if (calls[i].code != SLUICE_STATUS_UNAVAILABLE)
      all_failed = 0;
  check("budget: every call ends UNAVAILABLE (its last status)", all_failed,
        NULL);
  (void)d;
  sluice_channel_del(ch);
  pthread_cond_destroy(&cv);
}

/* Hedging (sluice_call_opts.hedging_policy: max_attempts 2, hedging delay
 * 100 ms) over a round-robin channel to two grpcio servers, FAST and SLOW
 * (every answer 2 s late; --hedge-targets). A call whose first attempt
 * goes to SLOW sends its hedge 100 ms later to FAST (a retry or hedge
 * avoids the destination of the attempt before it), which answers first
 * and wins: SLOW's attempt is cancelled and the call ends at FAST's
 * latency. A call whose first attempt goes to FAST is answered before the
 * hedging delay: no hedge. Plain calls in between steer the rotation so
 * that calls 0, 2, 4 go first to SLOW and 1, 3, 5 to FAST (hedge_steer).
 * Each call has a key of its own, so what each
 * server saw per call tells which way it went (previous-attempts '' is
 * the first attempt, '1' the hedge). Times are bounded generously: each
 * call < 1500 ms (SLOW answers after 2000), the hedge >= the delay. */
#define HEDGE_CALLS 6
#define HEDGE_DELAY_MS 100u
#define HEDGE_CALL_MAX_MS 1500.0

/* Observe k on obs until every attempt is over on the server (so that
 * its cancelled flag is final), for at most until_ms (now_ms() clock). */
static void observe_settled(sluice_channel *obs, const char *k, seen *s,
                            double until_ms) {
  for (;;) {
    observe_on(obs, k, s);
    int settled = s->ok;
    for (size_t i = 0; i < s->n; i++)
      if (!s->done[i])
        settled = 0;
    if (settled || now_ms() >= until_ms)
      return;
    struct timespec ts = {0, 20 * 1000000L};
    nanosleep(&ts, NULL);
  }
}

/* Index of the attempt in s with previous-attempts p, or -1. */
static int find_prev(const seen *s, const char *p) {
  for (size_t i = 0; i < s->n; i++)
    if (strcmp(s->prev[i], p) == 0)
      return (int)i;
  return -1;
}

/* Waits (at most 10 s) until the channel has both destinations READY,
 * making plain Observe calls over it to get it connecting. */
static int hedge_warm_up(sluice_channel *ch) {
  char k[128];
  key(k, sizeof k, "hedge_warmup");
  double until = now_ms() + 10000;
  size_t ready = 0;
  while (now_ms() < until) {
    seen s;
    observe_on(ch, k, &s);
    sluice_channel_stats cs;
    memset(&cs, 0, sizeof cs);
    if (sluice_channel_get_stats(ch, &cs) == 0) {
      ready = 0;
      for (size_t i = 0; i < cs.n_dests; i++)
        if (cs.dests[i].conn_state &&
            strcmp(cs.dests[i].conn_state, "READY") == 0)
          ready++;
    }
    sluice_channel_stats_clear(&cs);
    if (ready == 2)
      return 1;
    struct timespec ts = {0, 20 * 1000000L};
    nanosleep(&ts, NULL);
  }
  fprintf(stderr, "retry_client: hedging: %zu of 2 destinations READY\n",
          ready);
  return 0;
}

/* Calls sent so far to the destination addr ("127.0.0.1:P") of ch, or
 * UINT64_MAX when it is not found. */
static uint64_t dest_sent(sluice_channel *ch, const char *addr) {
  uint64_t sent = UINT64_MAX;
  sluice_channel_stats cs;
  memset(&cs, 0, sizeof cs);
  if (sluice_channel_get_stats(ch, &cs) == 0)
    for (size_t i = 0; i < cs.n_dests; i++)
      if (strcmp(cs.dests[i].address, addr) == 0)
        sent = cs.dests[i].sent;
  sluice_channel_stats_clear(&cs);
  return sent;
}

/* Round robin over two destinations takes turns, and a hedge takes a turn
 * too: after a call first on SLOW hedged to FAST, the next call would go
 * to SLOW first again. Makes plain Observe calls over ch (no policy, not
 * delayed) until one went to other, so that the next pick is the other
 * destination; at most 4. Returns whether it got there. */
static int hedge_steer(sluice_channel *ch, const char *other, const char *k) {
  for (int i = 0; i < 4; i++) {
    uint64_t before = dest_sent(ch, other);
    seen s;
    observe_on(ch, k, &s);
    uint64_t after = dest_sent(ch, other);
    if (before != UINT64_MAX && after > before)
      return 1;
  }
  return 0;
}

static void sc_hedging(void) {
  if (!hedge_targets) {
    printf("skip hedging: no --hedge-targets\n");
    return;
  }
  /* "ipv4:FAST,SLOW" -> the two addresses. */
  char list[256], fast_t[270], slow_t[270];
  snprintf(list, sizeof list, "%s",
           strncmp(hedge_targets, "ipv4:", 5) == 0 ? hedge_targets + 5
                                                   : hedge_targets);
  char *comma = strchr(list, ',');
  if (!check("hedging: --hedge-targets names two addresses",
             comma && !strchr(comma + 1, ','), "'%s'", hedge_targets))
    return;
  *comma = '\0';
  snprintf(fast_t, sizeof fast_t, "ipv4:%s", list);
  snprintf(slow_t, sizeof slow_t, "ipv4:%s", comma + 1);
  char both[520];
  snprintf(both, sizeof both, "ipv4:%s,%s", list, comma + 1);

  sluice_channel *obs_fast = channel_at(fast_t, NULL, NULL, -1, 0);
  sluice_channel *obs_slow = channel_at(slow_t, NULL, NULL, -1, 0);
  sluice_channel *ch = channel_at(both, "rr", NULL, -1, 0);
  if (!check("hedging: round-robin channel to FAST and SLOW, observers",
             ch && obs_fast && obs_slow, NULL))
    goto out;
  if (!check("hedging: both destinations READY before the calls (10 s)",
             hedge_warm_up(ch), NULL))
    goto out;

  sluice_hedging_policy hp = {.max_attempts = 2,
                              .hedging_delay_ms = HEDGE_DELAY_MS,
                              .non_fatal_codes = 0};
  sluice_call_opts opts;
  sluice_call_opts_init(&opts);
  opts.hedging_policy = &hp;
  opts.timeout_ms = CALL_TIMEOUT_MS;
  char keys[HEDGE_CALLS][128], steer_k[128];
  key(steer_k, sizeof steer_k, "hedge_steer");
  outcome o[HEDGE_CALLS];
  int steered = 1;
  for (int i = 0; i < HEDGE_CALLS; i++) {
    /* Even calls first on SLOW (the last plain call went to FAST), odd
     * ones first on FAST. */
    steered &= hedge_steer(ch, i % 2 ? comma + 1 : list, steer_k);
    char nm[32];
    snprintf(nm, sizeof nm, "hedge%d", i);
    Retrytest__Behavior b;
    init_behavior(&b, key(keys[i], sizeof keys[i], nm), 0);
    unary(ch, &b, &opts, &o[i]);
  }

  /* What each server saw per call; the cancellations reach the servers
   * asynchronously: wait (bounded) until every attempt is over. */
  seen sf[HEDGE_CALLS], ss[HEDGE_CALLS];
  double until = now_ms() + 10000;
  for (int i = 0; i < HEDGE_CALLS; i++) {
    observe_settled(obs_fast, keys[i], &sf[i], until);
    observe_settled(obs_slow, keys[i], &ss[i], until);
  }

  int all_ok = 1, all_quick = 1, sane = 1, settled = 1;
  int slow_first = 0, fast_first = 0, slow_first_good = 1, gap_ok = 1;
  int fast_first_no_hedge = 1, slow_first_slow_enough = 1;
  unsigned hedges_seen = 0, slow_cancelled = 0, fast_cancelled = 0;
  unsigned fast_first_long = 0; /* lasted past the hedging delay */
  char bad[256] = "";
  for (int i = 0; i < HEDGE_CALLS; i++) {
    const seen *f = &sf[i], *sl = &ss[i];
    int f0 = find_prev(f, ""), f1 = find_prev(f, "1");
    int s0 = find_prev(sl, ""), s1 = find_prev(sl, "1");
    char fd[200], sd[200];
    printf(
        "  hedging: #%d %s %.0f ms first on %s; FAST %s cancelled %u; SLOW %s "
        "cancelled %u\n",
        i, sluice_status_name(o[i].code), o[i].elapsed_ms,
        f0 >= 0   ? "FAST"
        : s0 >= 0 ? "SLOW"
                  : "?",
        describe(f, fd, sizeof fd), f->n_cancelled, describe(sl, sd, sizeof sd),
        sl->n_cancelled);
    if (o[i].code != SLUICE_STATUS_OK)
      all_ok = 0;
    if (o[i].elapsed_ms >= HEDGE_CALL_MAX_MS)
      all_quick = 0;
    for (size_t j = 0; j < f->n; j++)
      settled &= f->done[j];
    for (size_t j = 0; j < sl->n; j++)
      settled &= sl->done[j];
    /* One first attempt, at most one hedge, nothing else. */
    size_t n = f->n + sl->n;
    if (!f->ok || !sl->ok || n < 1 || n > 2 || (f0 >= 0) + (s0 >= 0) != 1 ||
        (n == 2 && (f1 >= 0) + (s1 >= 0) != 1)) {
      sane = 0;
      continue;
    }
    hedges_seen += n == 2;
    slow_cancelled += sl->n_cancelled;
    fast_cancelled += f->n_cancelled;
    if (s0 >= 0) {
      slow_first++;
      /* The hedge went to FAST and won; SLOW's first attempt was
       * cancelled. */
      if (f1 < 0 || !sl->cancelled[s0] || f->cancelled[f1]) {
        slow_first_good = 0;
        snprintf(bad + strlen(bad), sizeof bad - strlen(bad), "[#%d] ", i);
      }
      if (f1 >= 0 &&
          f->arrival[f1] - sl->arrival[s0] < HEDGE_DELAY_MS - SLACK_MS)
        gap_ok = 0;
      if (o[i].elapsed_ms < HEDGE_DELAY_MS - SLACK_MS)
        slow_first_slow_enough = 0;
    } else {
      fast_first++;
      if (o[i].elapsed_ms >= HEDGE_DELAY_MS - SLACK_MS)
        fast_first_long++;
      else if (n != 1)
        fast_first_no_hedge = 0; /* answered before the delay, hedged */
    }
  }
  printf("  hedging: %d calls first on SLOW, %d first on FAST (%u of them "
         "past the hedging delay); hedges seen by the servers %u; "
         "cancelled: SLOW %u, FAST %u\n",
         slow_first, fast_first, fast_first_long, hedges_seen, slow_cancelled,
         fast_cancelled);

  check("hedging: every call OK", all_ok, NULL);
  check("hedging: every call ends well before SLOW's 2 s (< 1500 ms)",
        all_quick, NULL);
  check("hedging: every attempt over on the servers within 10 s", settled,
        NULL);
  check("hedging: per call, the servers saw one first attempt (prev '') and "
        "at most one hedge (prev '1')",
        sane, NULL);
  check("hedging: steered by plain calls, round robin sent the first "
        "attempts of calls 0, 2, 4 to SLOW and of 1, 3, 5 to FAST",
        steered && slow_first == HEDGE_CALLS / 2 &&
            fast_first == HEDGE_CALLS - HEDGE_CALLS / 2,
        "steered %d, first on SLOW %d, on FAST %d", steered, slow_first,
        fast_first);
  check("hedging: a call first on SLOW: its hedge went to FAST and won, "
        "SLOW's attempt was cancelled",
        slow_first_good, "calls %s", bad);
  check("hedging: a call first on SLOW: the hedge reached FAST >= 100 ms "
        "after the first attempt reached SLOW",
        gap_ok, NULL);
  check("hedging: a call first on SLOW lasts at least the hedging delay",
        slow_first_slow_enough, NULL);
  check("hedging: a call first on FAST answered before the hedging delay "
        "sent no hedge",
        fast_first_no_hedge, NULL);
  check("hedging: SLOW saw >= 1 attempt cancelled; FAST's attempts are never "
        "cancelled",
        slow_cancelled >= 1 && fast_cancelled == 0, "SLOW %u, FAST %u",
        slow_cancelled, fast_cancelled);

  sluice_resilience_stats rs;
  if (stats(ch, &rs) == 0) {
    const sluice_retry_counters *u = NULL;
    for (size_t i = 0; i < rs.n_methods; i++)
      if (strcmp(rs.methods[i].path, "/retrytest.RetryTest/Unary") == 0)
        u = &rs.methods[i].counters;
    uint64_t hedges = rs.total.hedges;
    printf("  hedging: stats total calls %" PRIu64 " attempts %" PRIu64
           " hedges %" PRIu64 " retries %" PRIu64 "; Unary calls %" PRIu64
           " attempts %" PRIu64 " hedges %" PRIu64 "; hedges_in_flight %" PRIu64
           "\n",
           rs.total.calls, rs.total.attempts, hedges, rs.total.retries,
           u ? u->calls : 0, u ? u->attempts : 0, u ? u->hedges : 0,
           rs.hedges_in_flight);
    check("hedging: stats: Unary calls == 6, 1 <= hedges <= 6, attempts == "
          "calls + hedges, no retries",
          u && u->calls == HEDGE_CALLS && u->hedges >= 1 &&
              u->hedges <= HEDGE_CALLS && u->hedges == hedges &&
              u->attempts == u->calls + u->hedges && rs.total.retries == 0,
          "Unary calls %" PRIu64 " attempts %" PRIu64 " hedges %" PRIu64
          ", total hedges %" PRIu64 " retries %" PRIu64,
          u ? u->calls : 0, u ? u->attempts : 0, u ? u->hedges : 0, hedges,
          rs.total.retries);
    check("hedging: SLOW's cancelled attempts <= hedges",
          slow_cancelled <= hedges, "cancelled %u, hedges %" PRIu64,
          slow_cancelled, hedges);
    /* Every call first on SLOW hedged; one first on FAST only if it lasted
     * past the delay. A hedge cancelled before its server saw it is
     * counted but not seen. */
    check("hedging: hedges seen by the servers <= stats hedges <= calls "
          "first on SLOW + calls first on FAST past the hedging delay",
          hedges_seen <= hedges &&
              hedges <= (uint64_t)slow_first + fast_first_long,
          "seen %u, hedges %" PRIu64 ", first on SLOW %d, FAST past the "
          "delay %u",
          hedges_seen, hedges, slow_first, fast_first_long);
    check("hedging: hedges_in_flight back to 0", rs.hedges_in_flight == 0,
          "%" PRIu64, rs.hedges_in_flight);
    sluice_resilience_stats_clear(&rs);
  }
out:
  if (ch)
    sluice_channel_del(ch);
  if (obs_fast)
    sluice_channel_del(obs_fast);
  if (obs_slow)
    sluice_channel_del(obs_slow);
}

/* A service config that A6 says to reject is rejected whole. */
static void sc_validation(void) {
  sluice_channel_opts *o;
  if (sluice_channel_opts_new(&o) != 0)
    return;
  int rc = sluice_channel_opts_set_service_config(
      o, "{\"methodConfig\":[{\"name\":[{\"service\":\"retrytest.RetryTest\"}"
         "],\"retryPolicy\":{\"maxAttempts\":1,\"initialBackoff\":\"0.1s\","
         "\"maxBackoff\":\"1s\",\"backoffMultiplier\":2,"
         "\"retryableStatusCodes\":[\"UNAVAILABLE\"]}}]}");
  check("validation: maxAttempts 1 is refused (SLUICE_ERR_INVALID_ARG, "
        "last_error names the field)",
        rc == SLUICE_ERR_INVALID_ARG &&
            strstr(sluice_channel_opts_last_error(o), "maxAttempts") != NULL,
        "rc %d, last_error '%s'", rc, sluice_channel_opts_last_error(o));
  sluice_channel_opts_del(o);
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--target") == 0 && i + 1 < argc)
      target = argv[++i];
    else if (strcmp(argv[i], "--hedge-targets") == 0 && i + 1 < argc)
      hedge_targets = argv[++i];
    else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
      only = argv[++i];
    else {
      fprintf(stderr, "usage: retry_client --target HOST:PORT "
                      "[--hedge-targets ipv4:FAST,SLOW] [--only NAME]\n");
      return 2;
    }
  }
  if (!target) {
    fprintf(stderr, "usage: retry_client --target HOST:PORT "
                    "[--hedge-targets ipv4:FAST,SLOW] [--only NAME]\n");
    return 2;
  }
  snprintf(key_prefix, sizeof key_prefix, "c%" PRIu64,
           (uint64_t)sluice_now_ns());
  observer = channel(NULL, -1, 0);
  if (!observer)
    return 1;

  static const struct {
    const char *name;
    void (*fn)(void);
  } scenarios[] = {
      {"validation", sc_validation},   {"fail2", sc_fail2},
      {"call_policy", sc_call_policy}, {"exhausted", sc_exhausted},
      {"pushback", sc_pushback},       {"commit", sc_commit},
      {"deadline", sc_deadline},       {"throttling", sc_throttling},
      {"budget", sc_budget},           {"hedging", sc_hedging},
  };
  for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++)
    if (want(scenarios[i].name))
      scenarios[i].fn();

  sluice_channel_del(observer);
  printf("%u passed, %u failed\n", n_pass, n_fail);
  return n_fail ? 1 : 0;
}
