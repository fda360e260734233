/* e2e: retries (gRFC A6), throttling, the retry budget, hedging and the
 * circuit breakers, over loopback against sluice servers whose handler
 * fails on purpose.
 *
 * The handler of this file reads its behaviour from the request: text is a
 * key (attempts are counted per key), status_code the code to fail with,
 * reply_size how many attempts fail first (0: every one), status_message
 * the grpc-retry-pushback-ms value to send with the failure ("" : none).
 * A server may delay every reply (hedging's slow destination). A reply
 * carries the grpc-previous-rpc-attempts values the key's attempts came
 * with, as "-,1,2" ("-": none).
 *
 * Timing is only checked from below (backoff and pushback are lower
 * bounds); upper bounds are hang guards. */
#include "e2e_common.h"

#include <stdlib.h>
#include <string.h>

#define MAX_KEYS 32
#define MAX_DELAYED 64

typedef struct rt_key {
  char name[64];
  int attempts;
  char prev[128];       /* "-,1,2" */
  uint64_t at_ms[8];    /* arrival of the first attempts */
  uint64_t deadline[8]; /* the deadline each attempt saw (ns; 0: none) */
} rt_key;

typedef struct rt_server {
  sluice_server *srv;
  int port;
  unsigned delay_ms; /* every reply waits this long (another thread) */
  pthread_mutex_t mu;
  rt_key keys[MAX_KEYS];
  int n_keys;
  atomic_int calls;
  atomic_int cancelled; /* delayed calls the client had cancelled */
  pthread_t delayed[MAX_DELAYED];
  int n_delayed;
} rt_server;

static rt_key *key_of(rt_server *s, const char *name) {
  for (int i = 0; i < s->n_keys; i++)
    if (strcmp(s->keys[i].name, name) == 0)
      return &s->keys[i];
  assert_true(s->n_keys < MAX_KEYS);
  rt_key *k = &s->keys[s->n_keys++];
  memset(k, 0, sizeof *k);
  snprintf(k->name, sizeof k->name, "%s", name);
  return k;
}

typedef struct delayed_reply {
  rt_server *s;
  sluice_server_call *call;
  char text[128];
} delayed_reply;

static void *delayed_main(void *arg) {
  delayed_reply *d = arg;
  e2e_sleep_ms(d->s->delay_ms);
  if (sluice_server_call_is_cancelled(d->call))
    atomic_fetch_add(&d->s->cancelled, 1);
  E2e__EchoMsg resp = E2E__ECHO_MSG__INIT;
  resp.text = d->text;
  sluice_server_call_reply(d->call, &resp.base);
  free(d);
  return NULL;
}

static void handle(sluice_server_call *call, const E2e__EchoMsg *req,
                   void *user_data) {
  rt_server *s = user_data;
  atomic_fetch_add(&s->calls, 1);
  size_t len = 0;
  const char *prev = sluice_metadata_find(sluice_server_call_metadata(call),
                                          "grpc-previous-rpc-attempts", &len);
  pthread_mutex_lock(&s->mu);
  rt_key *k = key_of(s, req->text ? req->text : "");
  int n = ++k->attempts;
  if (n <= 8) {
    k->at_ms[n - 1] = e2e_now_ms();
    k->deadline[n - 1] = sluice_server_call_deadline(call);
  }
  size_t used = strlen(k->prev);
  snprintf(k->prev + used, sizeof k->prev - used, "%s%.*s", used ? "," : "",
           prev ? (int)len : 1, prev ? prev : "-");
  char text[128];
  snprintf(text, sizeof text, "%s", k->prev);
  pthread_mutex_unlock(&s->mu);

  if (req->status_code && (req->reply_size == 0 || n <= (int)req->reply_size)) {
    if (req->status_message && *req->status_message)
      assert_int_equal(sluice_server_call_add_trailing_metadata(
                           call, "grpc-retry-pushback-ms", req->status_message,
                           strlen(req->status_message)),
                       0);
    sluice_server_call_finish(call, (sluice_status_code)req->status_code,
                              "failed on purpose", NULL);
    return;
  }
  if (s->delay_ms) {
    delayed_reply *d = calloc(1, sizeof *d);
    assert_non_null(d);
    d->s = s;
    d->call = call;
    snprintf(d->text, sizeof d->text, "%s", text);
    pthread_mutex_lock(&s->mu);
    assert_true(s->n_delayed < MAX_DELAYED);
    assert_int_equal(
        pthread_create(&s->delayed[s->n_delayed++], NULL, delayed_main, d), 0);
    pthread_mutex_unlock(&s->mu);
    return;
  }
  E2e__EchoMsg resp = E2E__ECHO_MSG__INIT;
  resp.text = text;
  sluice_server_call_reply(call, &resp.base);
}

static rt_server *rt_start(unsigned delay_ms) {
  rt_server *s = calloc(1, sizeof *s);
  assert_non_null(s);
  pthread_mutex_init(&s->mu, NULL);
  s->delay_ms = delay_ms;
  const E2e__Echo_SluiceHandlers h = {.echo = handle, .big = handle};
  assert_int_equal(sluice_server_new(&s->srv, NULL), 0);
  assert_int_equal(e2e__echo__sluice_register(s->srv, &h, s), 0);
  assert_int_equal(sluice_server_listen(s->srv, "127.0.0.1:0", &s->port), 0);
  assert_int_equal(sluice_server_start(s->srv), 0);
  return s;
}

/* Waits for the delayed replies. */
static void rt_join(rt_server *s) {
  for (int i = 0;; i++) {
    pthread_mutex_lock(&s->mu);
    int more = i < s->n_delayed;
    pthread_t t = more ? s->delayed[i] : (pthread_t)0;
    pthread_mutex_unlock(&s->mu);
    if (!more)
      break;
    pthread_join(t, NULL);
  }
  pthread_mutex_lock(&s->mu);
  s->n_delayed = 0;
  pthread_mutex_unlock(&s->mu);
}

static void rt_free(rt_server *s) {
  rt_join(s);
  sluice_server_shutdown(s->srv, 0);
  sluice_server_del(s->srv);
  pthread_mutex_destroy(&s->mu);
  free(s);
}

static rt_key rt_key_copy(rt_server *s, const char *name) {
  pthread_mutex_lock(&s->mu);
  rt_key k = *key_of(s, name);
  pthread_mutex_unlock(&s->mu);
  return k;
}

/* A retry policy: max attempts, initial backoff, UNAVAILABLE retryable. */
static sluice_retry_policy policy(unsigned max_attempts, unsigned backoff_ms) {
  sluice_retry_policy p;
  memset(&p, 0, sizeof p);
  p.max_attempts = max_attempts;
  p.initial_backoff_ms = backoff_ms;
  p.max_backoff_ms = backoff_ms * 10;
  p.backoff_multiplier = 2;
  p.retryable_codes = SLUICE_CODE_BIT(SLUICE_STATUS_UNAVAILABLE);
  return p;
}

/* One async Echo call with opts (may be NULL); waits for it and returns
 * its code (w keeps the message and the reply's text). */
static sluice_status_code call_once(sluice_channel *ch, E2e__EchoMsg *req,
                                    const sluice_call_opts *opts, e2e_wait *w) {
  int before = w->fired;
  assert_int_equal(e2e__echo__echo__async(ch, req, opts, e2e_wait_cb, w), 0);
  assert_int_equal(e2e_wait_for(w, before + 1, E2E_HANG_MS), before + 1);
  return w->code;
}

/* w's completions so far (another thread counts them). */
static int fired_now(e2e_wait *w) {
  pthread_mutex_lock(&w->mu);
  int n = w->fired;
  pthread_mutex_unlock(&w->mu);
  return n;
}

static sluice_resilience_stats stats_of(sluice_channel *ch) {
  sluice_resilience_stats r;
  sluice_resilience_stats_init(&r);
  assert_int_equal(sluice_channel_get_resilience_stats(ch, &r), 0);
  return r;
}

/* Fails twice with UNAVAILABLE, then answers: three attempts, the server
 * saw grpc-previous-rpc-attempts 1 and 2, backoff at least 0.8 x 50 ms and
 * 0.8 x 100 ms, and the stats say so. */
static void test_retry_then_ok(void **state) {
  (void)state;
  rt_server *s = rt_start(0);
  sluice_channel *ch = e2e_channel_port(s->port, NULL);
  sluice_retry_policy p = policy(5, 50);
  sluice_call_opts o;
  sluice_call_opts_init(&o);
  o.retry_policy = &p;
  e2e_wait w;
  e2e_wait_init(&w);
  E2e__EchoMsg req = E2E__ECHO_MSG__INIT;
  req.text = "ok-after-2";
  req.status_code = SLUICE_STATUS_UNAVAILABLE;
  req.reply_size = 2;
  assert_int_equal(call_once(ch, &req, &o, &w), SLUICE_STATUS_OK);
  assert_string_equal(w.text, "-,1,2");
  rt_key k = rt_key_copy(s, "ok-after-2");
  assert_int_equal(k.attempts, 3);
  assert_true(k.at_ms[1] - k.at_ms[0] >= 40);
  assert_true(k.at_ms[2] - k.at_ms[1] >= 80);

  sluice_resilience_stats r = stats_of(ch);
  assert_int_equal(r.total.calls, 1);
  assert_int_equal(r.total.attempts, 3);
  assert_int_equal(r.total.retries, 2);
  assert_int_equal(r.total.calls_by_attempts[2], 1);
  assert_true(r.total.retry_delay_ms_sum >= 120);
  assert_int_equal(r.n_methods, 1);
  assert_string_equal(r.methods[0].path, "/e2e.Echo/Echo");
  assert_int_equal(r.methods[0].counters.retries, 2);
  assert_int_equal(r.retries_in_flight, 0);
  sluice_resilience_stats_clear(&r);
  sluice_channel_stats cs;
  assert_int_equal(sluice_channel_get_stats(ch, &cs), 0);
  assert_int_equal(cs.retry.retries, 2);
  assert_int_equal(cs.retry.attempts, 3);
  sluice_channel_stats_clear(&cs);

  /* The Prometheus text carries them. */
  char *text = NULL;
  assert_int_equal(sluice_channel_stats_prometheus(ch, &text), 0);
  assert_non_null(strstr(
      text, "sluice_client_call_retries_total{method=\"/e2e.Echo/Echo\"} 2"));
  free(text);
  sluice_channel_del(ch);
  e2e_wait_destroy(&w);
  rt_free(s);
}

/* A code the policy does not name, no_retry, and an exhausted policy. */
static void test_not_retried(void **state) {
  (void)state;
  rt_server *s = rt_start(0);
  sluice_channel *ch = e2e_channel_port(s->port, NULL);
  sluice_retry_policy p = policy(3, 10);
  sluice_call_opts o;
  sluice_call_opts_init(&o);
  o.retry_policy = &p;
  e2e_wait w;
  e2e_wait_init(&w);
  E2e__EchoMsg req = E2E__ECHO_MSG__INIT;
  req.text = "invalid";
  req.status_code = SLUICE_STATUS_INVALID_ARGUMENT;
  assert_int_equal(call_once(ch, &req, &o, &w), SLUICE_STATUS_INVALID_ARGUMENT);
  assert_int_equal(rt_key_copy(s, "invalid").attempts, 1);

  req.text = "no-retry";
  req.status_code = SLUICE_STATUS_UNAVAILABLE;
  o.no_retry = 1;
  assert_int_equal(call_once(ch, &req, &o, &w), SLUICE_STATUS_UNAVAILABLE);
  assert_int_equal(rt_key_copy(s, "no-retry").attempts, 1);

  o.no_retry = 0;
  req.text = "always";
  assert_int_equal(call_once(ch, &req, &o, &w), SLUICE_STATUS_UNAVAILABLE);
  assert_string_equal(w.message, "failed on purpose");
  assert_int_equal(rt_key_copy(s, "always").attempts, 3);
  sluice_resilience_stats r = stats_of(ch);
  assert_int_equal(r.total.retries_exhausted, 1);
  assert_int_equal(r.total.retries, 2);
  sluice_resilience_stats_clear(&r);
  sluice_channel_del(ch);
  e2e_wait_destroy(&w);
  rt_free(s);
}

/* Server pushback: "-1" stops the retries; "300" makes the next attempt
 * wait at least that long, whatever the policy's backoff. */
static void test_pushback(void **state) {
  (void)state;
  rt_server *s = rt_start(0);
  sluice_channel *ch = e2e_channel_port(s->port, NULL);
  sluice_retry_policy p = policy(4, 10);
  sluice_call_opts o;
  sluice_call_opts_init(&o);
  o.retry_policy = &p;
  e2e_wait w;
  e2e_wait_init(&w);
  E2e__EchoMsg req = E2E__ECHO_MSG__INIT;
  req.text = "pushback-stop";
  req.status_code = SLUICE_STATUS_UNAVAILABLE;
  req.status_message = "-1";
  assert_int_equal(call_once(ch, &req, &o, &w), SLUICE_STATUS_UNAVAILABLE);
  assert_int_equal(rt_key_copy(s, "pushback-stop").attempts, 1);

  req.text = "pushback-wait";
  req.reply_size = 1;
  req.status_message = "300";
  assert_int_equal(call_once(ch, &req, &o, &w), SLUICE_STATUS_OK);
  rt_key k = rt_key_copy(s, "pushback-wait");
  assert_int_equal(k.attempts, 2);
  assert_true(k.at_ms[1] - k.at_ms[0] >= 290);

  req.text = "pushback-junk";
  req.reply_size = 0;
  req.status_message = "soon";
  assert_int_equal(call_once(ch, &req, &o, &w), SLUICE_STATUS_UNAVAILABLE);
  assert_int_equal(rt_key_copy(s, "pushback-junk").attempts, 1);

  sluice_resilience_stats r = stats_of(ch);
  assert_int_equal(r.total.retries_pushback_denied, 2);
  sluice_resilience_stats_clear(&r);
  sluice_channel_del(ch);
  e2e_wait_destroy(&w);
  rt_free(s);
}

/* One deadline across attempts: every attempt is sent the time left, and
 * a retry whose backoff would pass the deadline ends the call at once
 * with DEADLINE_EXCEEDED naming the last attempt's status. */
static void test_deadline_across_attempts(void **state) {
  (void)state;
  rt_server *s = rt_start(0);
  sluice_channel *ch = e2e_channel_port(s->port, NULL);
  sluice_retry_policy p = policy(5, 200);
  sluice_call_opts o;
  sluice_call_opts_init(&o);
  o.retry_policy = &p;
  o.timeout_ms = 500;
  e2e_wait w;
  e2e_wait_init(&w);
  E2e__EchoMsg req = E2E__ECHO_MSG__INIT;
  req.text = "deadline";
  req.status_code = SLUICE_STATUS_UNAVAILABLE;
  assert_int_equal(call_once(ch, &req, &o, &w),
                   SLUICE_STATUS_DEADLINE_EXCEEDED);
  rt_key k = rt_key_copy(s, "deadline");
  assert_true(k.attempts >= 2);
  /* the same absolute deadline (the server's clock reading of the time
   * left: equal within a generous margin) */
  uint64_t d0 = k.deadline[0], d1 = k.deadline[1];
  assert_true(d0 && d1);
  assert_true((d1 > d0 ? d1 - d0 : d0 - d1) < 100000000ull);
  /* The second backoff (320-480 ms) starts after ~200 ms: it always
   * passes the 500 ms deadline, so the retry is refused at once. */
  assert_non_null(strstr(w.message, "retry backoff would pass the deadline"));
  assert_non_null(strstr(w.message, "last attempt: UNAVAILABLE"));
  sluice_resilience_stats r = stats_of(ch);
  assert_int_equal(r.total.retries_deadline_denied, 1);
  sluice_resilience_stats_clear(&r);
  sluice_channel_del(ch);
  e2e_wait_destroy(&w);
  rt_free(s);
}

/* gRFC A6 throttling, maxTokens 10 and tokenRatio 0.1 against an always
 * failing server, 5 attempts allowed: 5, then 1, then 1 attempt. */
static void test_throttling(void **state) {
  (void)state;
  rt_server *s = rt_start(0);
  sluice_channel_opts *co;
  assert_int_equal(sluice_channel_opts_new(&co), 0);
  assert_int_equal(sluice_channel_opts_set_retry_throttling(co, 10, 0.1), 0);
  sluice_channel *ch = e2e_channel_port(s->port, co);
  sluice_channel_opts_del(co);
  sluice_retry_policy p = policy(5, 5);
  sluice_call_opts o;
  sluice_call_opts_init(&o);
  o.retry_policy = &p;
  e2e_wait w;
  e2e_wait_init(&w);
  E2e__EchoMsg req = E2E__ECHO_MSG__INIT;
  req.status_code = SLUICE_STATUS_UNAVAILABLE;
  const char *names[] = {"thr-1", "thr-2", "thr-3"};
  int want[] = {5, 1, 1};
  for (int i = 0; i < 3; i++) {
    req.text = (char *)names[i];
    assert_int_equal(call_once(ch, &req, &o, &w), SLUICE_STATUS_UNAVAILABLE);
    assert_int_equal(rt_key_copy(s, names[i]).attempts, want[i]);
  }
  sluice_resilience_stats r = stats_of(ch);
  /* C-core's order: the bucket is asked before the attempt count, so the
   * first call's fifth failure (5 tokens left) counts as throttled too */
  assert_int_equal(r.total.retries_throttled, 3);
  assert_int_equal(r.total.retries, 4);
  assert_true(r.throttle_tokens >= 2.9 && r.throttle_tokens <= 3.1);
  sluice_resilience_stats_clear(&r);
  sluice_channel_del(ch);
  e2e_wait_destroy(&w);
  rt_free(s);
}

/* The retry budget: 12 calls at once against an always failing server,
 * each wanting 5 attempts 100 ms apart, with a budget of 20 % and at
 * least 2: never more than 2 calls in retry, and some retries denied. */
static void test_budget(void **state) {
  (void)state;
  rt_server *s = rt_start(0);
  sluice_channel_opts *co;
  assert_int_equal(sluice_channel_opts_new(&co), 0);
  assert_int_equal(sluice_channel_opts_set_retry_budget(co, 10, 2), 0);
  sluice_channel *ch = e2e_channel_port(s->port, co);
  sluice_channel_opts_del(co);
  sluice_retry_policy p = policy(5, 100);
  sluice_call_opts o;
  sluice_call_opts_init(&o);
  o.retry_policy = &p;
  e2e_wait w;
  e2e_wait_init(&w);
  E2e__EchoMsg req = E2E__ECHO_MSG__INIT;
  req.status_code = SLUICE_STATUS_UNAVAILABLE;
  req.text = "budget";
  enum { N = 12 };
  for (int i = 0; i < N; i++)
    assert_int_equal(e2e__echo__echo__async(ch, &req, &o, e2e_wait_cb, &w), 0);
  uint64_t max_seen = 0;
  for (int i = 0; i < 200 && fired_now(&w) < N; i++) {
    sluice_resilience_stats r = stats_of(ch);
    if (r.retries_in_flight > max_seen)
      max_seen = r.retries_in_flight;
    sluice_resilience_stats_clear(&r);
    e2e_sleep_ms(5);
  }
  assert_int_equal(e2e_wait_for(&w, N, E2E_HANG_MS), N);
  assert_true(max_seen <= 2);
  sluice_resilience_stats r = stats_of(ch);
  assert_true(r.total.retries_budget_denied >= 1);
  assert_true(r.total.retries >= 1);
  assert_int_equal(r.retries_in_flight, 0);
  sluice_resilience_stats_clear(&r);
  sluice_channel_del(ch);
  e2e_wait_destroy(&w);
  rt_free(s);
}

/* Circuit breakers: max_requests 2 with two calls held; the third fails at
 * once, locally, naming the breaker. */
static void test_breaker_max_requests(void **state) {
  (void)state;
  rt_server *s = rt_start(1500);
  sluice_channel_opts *co;
  assert_int_equal(sluice_channel_opts_new(&co), 0);
  assert_int_equal(sluice_channel_opts_set_circuit_breakers(co, 2, 0, 0), 0);
  sluice_channel *ch = e2e_channel_port(s->port, co);
  sluice_channel_opts_del(co);
  e2e_wait slow, fast;
  e2e_wait_init(&slow);
  e2e_wait_init(&fast);
  E2e__EchoMsg req = E2E__ECHO_MSG__INIT;
  req.text = "breaker";
  for (int i = 0; i < 2; i++)
    assert_int_equal(e2e__echo__echo__async(ch, &req, NULL, e2e_wait_cb, &slow),
                     0);
  for (int i = 0; i < 400 && atomic_load(&s->calls) < 2; i++)
    e2e_sleep_ms(5);
  assert_int_equal(atomic_load(&s->calls), 2);
  uint64_t t0 = e2e_now_ms();
  assert_int_equal(call_once(ch, &req, NULL, &fast),
                   SLUICE_STATUS_RESOURCE_EXHAUSTED);
  assert_true(e2e_now_ms() - t0 < 1000); /* it did not wait for a slot */
  assert_non_null(strstr(fast.message, "circuit breaker max_requests (2)"));
  assert_int_equal(e2e_wait_for(&slow, 2, E2E_HANG_MS), 2);
  assert_int_equal(slow.code, SLUICE_STATUS_OK);
  assert_int_equal(atomic_load(&s->calls), 2);
  sluice_resilience_stats r = stats_of(ch);
  assert_int_equal(r.breaker_requests, 1);
  sluice_resilience_stats_clear(&r);
  /* a drop reason of its own in the channel's stats too */
  sluice_channel_stats cs;
  assert_int_equal(sluice_channel_get_stats(ch, &cs), 0);
  assert_int_equal(cs.dropped_breaker, 1);
  assert_int_equal(cs.dropped_limit, 0);
  sluice_channel_stats_clear(&cs);
  /* After the slow ones, calls go again. */
  assert_int_equal(call_once(ch, &req, NULL, &fast), SLUICE_STATUS_OK);
  sluice_channel_del(ch);
  e2e_wait_destroy(&slow);
  e2e_wait_destroy(&fast);
  rt_free(s);
}

/* Hedging over a slow and a fast destination (round robin): each call
 * ends at the fast one's latency whichever goes first, and the slow
 * destination's attempt is cancelled. */
static void test_hedging(void **state) {
  (void)state;
  rt_server *slow = rt_start(2000);
  rt_server *fast = rt_start(0);
  char target[96];
  snprintf(target, sizeof target, "ipv4:127.0.0.1:%d,127.0.0.1:%d", slow->port,
           fast->port);
  sluice_channel *ch = NULL;
  assert_int_equal(sluice_channel_new(&ch, target, NULL), 0);
  sluice_hedging_policy hp;
  memset(&hp, 0, sizeof hp);
  hp.max_attempts = 2;
  hp.hedging_delay_ms = 100;
  sluice_call_opts o;
  sluice_call_opts_init(&o);
  o.hedging_policy = &hp;
  e2e_wait w;
  e2e_wait_init(&w);
  E2e__EchoMsg req = E2E__ECHO_MSG__INIT;
  req.text = "hedge";
  enum { N = 6 };
  for (int i = 0; i < N; i++) {
    uint64_t t0 = e2e_now_ms();
    assert_int_equal(call_once(ch, &req, &o, &w), SLUICE_STATUS_OK);
    /* well before the slow destination's 2 s */
    assert_true(e2e_now_ms() - t0 < 1500);
  }
  sluice_resilience_stats r = stats_of(ch);
  uint64_t hedges = r.total.hedges;
  assert_true(hedges >= 1);
  assert_int_equal(r.total.calls, N);
  sluice_resilience_stats_clear(&r);
  sluice_channel_del(ch);
  /* the slow server's replies came after the client had cancelled */
  rt_join(slow);
  assert_true(atomic_load(&slow->cancelled) >= 1);
  assert_true(atomic_load(&slow->cancelled) <= (int)hedges);
  rt_free(slow);
  rt_free(fast);
  e2e_wait_destroy(&w);
}

/* A channel destroyed while a call waits out a long backoff: the call
 * ends at once with CANCELLED, not when its backoff is over. */
static void test_destroy_in_backoff(void **state) {
  (void)state;
  rt_server *s = rt_start(0);
  sluice_channel *ch = e2e_channel_port(s->port, NULL);
  sluice_retry_policy p = policy(3, 5000);
  sluice_call_opts o;
  sluice_call_opts_init(&o);
  o.retry_policy = &p;
  e2e_wait w;
  e2e_wait_init(&w);
  E2e__EchoMsg req = E2E__ECHO_MSG__INIT;
  req.text = "backoff";
  req.status_code = SLUICE_STATUS_UNAVAILABLE;
  assert_int_equal(e2e__echo__echo__async(ch, &req, &o, e2e_wait_cb, &w), 0);
  for (int i = 0; i < 400; i++) {
    sluice_resilience_stats r = stats_of(ch);
    uint64_t in = r.retries_in_flight;
    sluice_resilience_stats_clear(&r);
    if (in)
      break;
    e2e_sleep_ms(5);
  }
  uint64_t t0 = e2e_now_ms();
  sluice_channel_del(ch);
  assert_int_equal(e2e_wait_for(&w, 1, E2E_HANG_MS), 1);
  assert_int_equal(w.code, SLUICE_STATUS_CANCELLED);
  assert_true(e2e_now_ms() - t0 < 3000); /* not the 4-6 s backoff */
  assert_int_equal(rt_key_copy(s, "backoff").attempts, 1);
  e2e_wait_destroy(&w);
  rt_free(s);
}

int main(void) {
  e2e_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_retry_then_ok),
      cmocka_unit_test(test_not_retried),
      cmocka_unit_test(test_pushback),
      cmocka_unit_test(test_deadline_across_attempts),
      cmocka_unit_test(test_throttling),
      cmocka_unit_test(test_budget),
      cmocka_unit_test(test_breaker_max_requests),
      cmocka_unit_test(test_hedging),
      cmocka_unit_test(test_destroy_in_backoff),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
