/* retry_client: the sluice client with a retry policy (gRFC A6) against a
 * stock grpcio 1.51 server of retrytest.RetryTest (py_retry_server.py),
 * using the resilience API of sluice/resilience.h and sluice/channel.h:
 * sluice_channel_opts_set_service_config() with a retryPolicy and
 * retryThrottling, sluice_call_opts.retry_policy / no_retry,
 * sluice_channel_opts_set_retry_budget() and
 * sluice_channel_get_resilience_stats().
 *
 *   retry_client --target HOST:PORT [--only NAME]
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

/* A channel to target with service config json (NULL: none); budget_pct
 * >= 0 also sets the retry budget. NULL after printing why. */
static sluice_channel *channel(const char *json, double budget_pct,
                               uint32_t min_conc) {
  sluice_channel_opts *o;
  sluice_channel *ch = NULL;
  if (sluice_channel_opts_new(&o) != 0)
    return NULL;
  int rc = 0;
  if (json && (rc = sluice_channel_opts_set_service_config(o, json)) != 0)
    fprintf(stderr, "retry_client: service config refused: %s: %s\n%s\n",
            sluice_strerror(rc), sluice_channel_opts_last_error(o), json);
  if (rc == 0 && budget_pct >= 0 &&
      (rc = sluice_channel_opts_set_retry_budget(o, budget_pct, min_conc)) != 0)
    fprintf(stderr, "retry_client: retry budget refused: %s: %s\n",
            sluice_strerror(rc), sluice_channel_opts_last_error(o));
  if (rc == 0 && (rc = sluice_channel_new(&ch, target, o)) != 0)
    fprintf(stderr, "retry_client: channel: %s\n", sluice_strerror(rc));
  sluice_channel_opts_del(o);
  return rc == 0 ? ch : NULL;
}

static sluice_channel *observer; /* plain: no retries, no throttle */

/* ---- what the server saw */

typedef struct seen {
  size_t n;
  char prev[16][24];
  double arrival[16];
  int64_t timeout[16];
  int ok; /* Observe worked */
} seen;

static void observe(const char *k, seen *s) {
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
  if (retrytest__retry_test__observe__blocking(observer, &req, &r, &opts,
                                               &st) == SLUICE_STATUS_OK) {
    s->ok = 1;
    for (size_t i = 0; i < r->n_attempts && i < 16; i++) {
      snprintf(s->prev[i], sizeof s->prev[i], "%s",
               r->attempts[i]->previous_attempts);
      s->arrival[i] = r->attempts[i]->arrival_ms;
      s->timeout[i] = r->attempts[i]->timeout_ms;
    }
    s->n = r->n_attempts < 16 ? r->n_attempts : 16;
    protobuf_c_message_free_unpacked(&r->base, NULL);
  } else {
    fprintf(stderr, "retry_client: Observe(%s): %s: %s\n", k,
            sluice_status_name(st.code), st.message ? st.message : "");
  }
  sluice_status_clear(&st);
}

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
  if (rc != 0)
    fprintf(stderr, "retry_client: resilience stats: %s\n",
            sluice_strerror(rc));
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
    else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
      only = argv[++i];
    else {
      fprintf(stderr, "usage: retry_client --target HOST:PORT [--only "
                      "NAME]\n");
      return 2;
    }
  }
  if (!target) {
    fprintf(stderr, "usage: retry_client --target HOST:PORT [--only NAME]\n");
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
      {"budget", sc_budget},
  };
  for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++)
    if (want(scenarios[i].name))
      scenarios[i].fn();

  sluice_channel_del(observer);
  printf("%u passed, %u failed\n", n_pass, n_fail);
  return n_fail ? 1 : 0;
}
