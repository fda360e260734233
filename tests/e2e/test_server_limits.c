/* Server admission end to end: concurrency limits (server-wide, per method,
 * across loops), the bounded queue, CoDel shedding, deadlines of queued
 * calls, and the ORCA load report in the trailers.
 *
 * Most tests use their own e2e.Echo server (below) whose handler records
 * the order in which handlers start and holds calls until the test releases
 * them one by one; the queue-full, CoDel and deadline tests use the shared
 * fixture (e2e_common.h). Nothing asserts speed: ordering and counts only,
 * waits bounded by E2E_HANG_MS. */
#include "e2e_common.h"
#include "stream.sluice.h"

#include <stdlib.h>
#include <string.h>

/* The decoder of the load report (internal; plain C with no dependencies,
 * linked from libsluice). */
#include "../../runtime/wire/orca.h"

#define MAX_CALLS 64

/* ---- a server whose handlers start in a recorded order and are held */

typedef struct held {
  sluice_server_call *call;
  char text[32];
} held;

typedef struct lim_server {
  sluice_server *srv;
  int port;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int started;                 /* handlers run */
  char order[MAX_CALLS][32];   /* texts in start order */
  pthread_t thread[MAX_CALLS]; /* loop thread of each handler */
  held running[MAX_CALLS];     /* held calls, not yet released */
  int n_running, max_running;  /* held now, most held at once */
} lim_server;

static void lim_handle(sluice_server_call *call, const E2e__EchoMsg *req,
                       void *user_data) {
  lim_server *ls = user_data;
  pthread_mutex_lock(&ls->mu);
  int i = ls->started++;
  snprintf(ls->order[i % MAX_CALLS], sizeof ls->order[0], "%s",
           req->text ? req->text : "");
  ls->thread[i % MAX_CALLS] = pthread_self();
  if (req->hold) {
    held *h = &ls->running[ls->n_running++];
    h->call = call;
    snprintf(h->text, sizeof h->text, "%s", req->text ? req->text : "");
    if (ls->n_running > ls->max_running)
      ls->max_running = ls->n_running;
  }
  pthread_cond_broadcast(&ls->cv);
  pthread_mutex_unlock(&ls->mu);
  if (!req->hold) {
    E2e__EchoMsg out = E2E__ECHO_MSG__INIT;
    out.text = req->text;
    sluice_server_call_reply(call, &out.base);
  }
}

static lim_server *lim_start(const sluice_server_opts *opts) {
  lim_server *ls = calloc(1, sizeof *ls);
  assert_non_null(ls);
  pthread_mutex_init(&ls->mu, NULL);
  e2e_cond_init(&ls->cv);
  const E2e__Echo_SluiceHandlers handlers = {.echo = lim_handle,
                                             .big = lim_handle};
  assert_int_equal(sluice_server_new(&ls->srv, opts), 0);
  assert_int_equal(e2e__echo__sluice_register(ls->srv, &handlers, ls), 0);
  assert_int_equal(sluice_server_listen(ls->srv, "127.0.0.1:0", &ls->port), 0);
  assert_int_equal(sluice_server_start(ls->srv), 0);
  return ls;
}

/* Waits until n handlers have started; 0, or -1 on timeout. */
static int lim_wait_started(lim_server *ls, int n) {
  struct timespec ts;
  e2e_abs_ms(&ts, E2E_HANG_MS);
  int rc = 0;
  pthread_mutex_lock(&ls->mu);
  while (ls->started < n && rc == 0)
    rc = pthread_cond_timedwait(&ls->cv, &ls->mu, &ts);
  int ok = ls->started >= n;
  pthread_mutex_unlock(&ls->mu);
  return ok ? 0 : -1;
}

static int lim_started(lim_server *ls) {
  pthread_mutex_lock(&ls->mu);
  int n = ls->started;
  pthread_mutex_unlock(&ls->mu);
  return n;
}

/* Replies OK to the held call with this text; 0, or -1 if none. */
static int lim_release(lim_server *ls, const char *text) {
  sluice_server_call *call = NULL;
  pthread_mutex_lock(&ls->mu);
  for (int i = 0; i < ls->n_running; i++)
    if (strcmp(ls->running[i].text, text) == 0) {
      call = ls->running[i].call;
      ls->running[i] = ls->running[--ls->n_running];
      break;
    }
  pthread_mutex_unlock(&ls->mu);
  if (!call)
    return -1;
  E2e__EchoMsg out = E2E__ECHO_MSG__INIT;
  out.text = (char *)text;
  return sluice_server_call_reply(call, &out.base);
}

/* Order check: the i-th handler to start had this text. */
static void lim_assert_order(lim_server *ls, int i, const char *text) {
  pthread_mutex_lock(&ls->mu);
  char got[32];
  snprintf(got, sizeof got, "%s", ls->order[i]);
  pthread_mutex_unlock(&ls->mu);
  if (strcmp(got, text) != 0)
    fail_msg("handler %d was %s, expected %s", i, got, text);
}

static void lim_free(lim_server *ls) {
  assert_int_equal(ls->n_running, 0);
  sluice_server_del(ls->srv);
  pthread_cond_destroy(&ls->cv);
  pthread_mutex_destroy(&ls->mu);
  free(ls);
}

static sluice_channel *channel_to(int port) {
  sluice_channel *ch = e2e_channel_port(port, NULL);
  return ch;
}

/* ---- client side: outcomes of many calls */

typedef struct outcome {
  int done;
  sluice_status_code code;
  char message[256];
  long pushback; /* grpc-retry-pushback-ms, -1 when absent */
  int have_load;
  sluice__orca load;
  uint64_t done_ms;
} outcome;

typedef struct batch {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done;
  outcome o[MAX_CALLS];
} batch;

typedef struct slot {
  batch *b;
  int i;
} slot;

static slot g_slots[MAX_CALLS];

static void read_trailers(const sluice_metadata *md, outcome *o) {
  o->pushback = -1;
  size_t len = 0;
  const char *v = sluice_metadata_find(md, "grpc-retry-pushback-ms", &len);
  if (v) {
    char buf[32];
    snprintf(buf, sizeof buf, "%.*s", (int)len, v);
    o->pushback = strtol(buf, NULL, 10);
  }
  v = sluice_metadata_find(md, "endpoint-load-metrics-bin", &len);
  o->have_load =
      v && sluice__orca_decode((const uint8_t *)v, len, &o->load) == 0;
}

static void batch_cb(const sluice_status *st, const E2e__EchoMsg *resp,
                     void *user_data) {
  (void)resp;
  slot *s = user_data;
  batch *b = s->b;
  pthread_mutex_lock(&b->mu);
  outcome *o = &b->o[s->i];
  o->done = 1;
  o->code = st->code;
  snprintf(o->message, sizeof o->message, "%s", st->message ? st->message : "");
  read_trailers(st->trailing_md, o);
  o->done_ms = e2e_now_ms();
  b->done++;
  pthread_cond_broadcast(&b->cv);
  pthread_mutex_unlock(&b->mu);
}

static void batch_init(batch *b) {
  memset(b, 0, sizeof *b);
  pthread_mutex_init(&b->mu, NULL);
  e2e_cond_init(&b->cv);
}

static void batch_destroy(batch *b) {
  pthread_cond_destroy(&b->cv);
  pthread_mutex_destroy(&b->mu);
}

static int batch_wait(batch *b, int n) {
  struct timespec ts;
  e2e_abs_ms(&ts, E2E_HANG_MS);
  int rc = 0;
  pthread_mutex_lock(&b->mu);
  while (b->done < n && rc == 0)
    rc = pthread_cond_timedwait(&b->cv, &b->mu, &ts);
  int done = b->done;
  pthread_mutex_unlock(&b->mu);
  return done;
}

static int batch_done(batch *b) {
  pthread_mutex_lock(&b->mu);
  int n = b->done;
  pthread_mutex_unlock(&b->mu);
  return n;
}

/* Starts call i of the batch: Echo (big 0) or Big, held or not. */
static void start_call(sluice_channel *ch, batch *b, int i, int big,
                       const char *text, int hold, uint32_t delay_ms,
                       uint64_t timeout_ms) {
  E2e__EchoMsg req = E2E__ECHO_MSG__INIT;
  req.text = (char *)text;
  req.hold = hold;
  req.delay_ms = delay_ms;
  sluice_call_opts opts;
  sluice_call_opts_init(&opts);
  opts.timeout_ms = timeout_ms;
  g_slots[i].b = b;
  g_slots[i].i = i;
  int rv = big ? e2e__echo__big__async(ch, &req, &opts, batch_cb, &g_slots[i])
               : e2e__echo__echo__async(ch, &req, &opts, batch_cb, &g_slots[i]);
  assert_int_equal(rv, 0);
}

/* A quick blocking call; its status (trailers) into *o. */
static sluice_status_code quick_call(sluice_channel *ch, outcome *o) {
  E2e__EchoMsg req = E2E__ECHO_MSG__INIT;
  req.text = "quick";
  E2e__EchoMsg *resp = NULL;
  sluice_status st;
  sluice_status_init(&st);
  sluice_call_opts opts;
  sluice_call_opts_init(&opts);
  opts.timeout_ms = E2E_HANG_MS;
  sluice_status_code code =
      e2e__echo__echo__blocking(ch, &req, &resp, &opts, &st);
  memset(o, 0, sizeof *o);
  o->code = code;
  snprintf(o->message, sizeof o->message, "%s", st.message ? st.message : "");
  read_trailers(st.trailing_md, o);
  if (resp)
    protobuf_c_message_free_unpacked(&resp->base, NULL);
  sluice_status_clear(&st);
  return code;
}

static sluice_server_opts *new_opts(unsigned threads) {
  sluice_server_opts *o = NULL;
  assert_int_equal(sluice_server_opts_new(&o), 0);
  assert_int_equal(sluice_server_opts_set_threads(o, threads), 0);
  /* These tests read the report on every response (default: one per
   * 10 ms per connection). */
  assert_int_equal(sluice_server_opts_set_load_report_interval(o, 0), 0);
  return o;
}

/* ---- tests */

static void test_options(void **state) {
  (void)state;
  sluice_server_opts *o = new_opts(1);
  assert_int_equal(sluice_server_opts_set_max_concurrent_calls(NULL, 1),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(
      sluice_server_opts_set_method_max_concurrent_calls(o, "e2e.Echo/Echo", 1),
      SLUICE_ERR_INVALID_ARG);
  assert_int_equal(
      sluice_server_opts_set_method_max_concurrent_calls(o, NULL, 1),
      SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice_server_opts_set_codel(o, 5, 0),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice_server_opts_set_codel(o, 0, 0), 0);
  /* The path is copied; setting it again replaces the limit. */
  char path[32];
  snprintf(path, sizeof path, "/e2e.Echo/Big");
  assert_int_equal(
      sluice_server_opts_set_method_max_concurrent_calls(o, path, 5), 0);
  assert_int_equal(
      sluice_server_opts_set_method_max_concurrent_calls(o, path, 1), 0);
  assert_int_equal(sluice_server_opts_set_method_max_concurrent_calls(
                       o, "/not.Registered/X", 1),
                   0);
  memset(path, 'x', sizeof path - 1);
  /* A server made from the options keeps its own copy. */
  lim_server *ls = lim_start(o);
  sluice_server_opts_del(o);
  sluice_channel *ch = channel_to(ls->port);
  batch b;
  batch_init(&b);
  start_call(ch, &b, 0, 1, "b0", 1, 0, E2E_HANG_MS);
  assert_int_equal(lim_wait_started(ls, 1), 0);
  start_call(ch, &b, 1, 1, "b1", 1, 0, E2E_HANG_MS);
  e2e_sleep_ms(100);
  assert_int_equal(lim_started(ls), 1); /* limit 1, not 5 */
  assert_int_equal(lim_release(ls, "b0"), 0);
  assert_int_equal(lim_wait_started(ls, 2), 0);
  assert_int_equal(lim_release(ls, "b1"), 0);
  assert_int_equal(batch_wait(&b, 2), 2);
  assert_int_equal(b.o[0].code, SLUICE_STATUS_OK);
  assert_int_equal(b.o[1].code, SLUICE_STATUS_OK);
  sluice_channel_del(ch);
  batch_destroy(&b);
  lim_free(ls);
}

/* max_concurrent_calls 2, five held calls: two run, three wait, and they
 * start in arrival order as slots free. */
static void test_server_limit_fifo(void **state) {
  (void)state;
  sluice_server_opts *o = new_opts(1);
  assert_int_equal(sluice_server_opts_set_max_concurrent_calls(o, 2), 0);
  lim_server *ls = lim_start(o);
  sluice_server_opts_del(o);
  sluice_channel *ch = channel_to(ls->port);
  batch b;
  batch_init(&b);
  static const char *texts[] = {"c0", "c1", "c2", "c3", "c4"};
  start_call(ch, &b, 0, 0, texts[0], 1, 0, E2E_HANG_MS);
  start_call(ch, &b, 1, 0, texts[1], 1, 0, E2E_HANG_MS);
  assert_int_equal(lim_wait_started(ls, 2), 0);
  for (int i = 2; i < 5; i++) { /* spaced so that they arrive in order */
    start_call(ch, &b, i, 0, texts[i], 1, 0, E2E_HANG_MS);
    e2e_sleep_ms(30);
  }
  e2e_sleep_ms(100);
  assert_int_equal(lim_started(ls), 2);
  assert_int_equal(batch_done(&b), 0);
  /* Each release lets exactly the next one in. */
  for (int i = 0; i < 3; i++) {
    assert_int_equal(lim_release(ls, texts[i]), 0);
    assert_int_equal(lim_wait_started(ls, 3 + i), 0);
    lim_assert_order(ls, 2 + i, texts[2 + i]);
    e2e_sleep_ms(30);
    assert_int_equal(lim_started(ls), 3 + i);
  }
  assert_int_equal(lim_release(ls, "c3"), 0);
  assert_int_equal(lim_release(ls, "c4"), 0);
  assert_int_equal(batch_wait(&b, 5), 5);
  for (int i = 0; i < 5; i++)
    assert_int_equal(b.o[i].code, SLUICE_STATUS_OK);
  assert_int_equal(ls->max_running, 2);
  sluice_channel_del(ch);
  batch_destroy(&b);
  lim_free(ls);
}

/* A limit on /e2e.Echo/Big holds Big calls only; a queue full of waiting
 * Big calls does not refuse Echo calls that can run. */
static void test_method_limit(void **state) {
  (void)state;
  sluice_server_opts *o = new_opts(1);
  assert_int_equal(
      sluice_server_opts_set_method_max_concurrent_calls(o, "/e2e.Echo/Big", 1),
      0);
  assert_int_equal(sluice_server_opts_set_max_queue(o, 2), 0);
  lim_server *ls = lim_start(o);
  sluice_server_opts_del(o);
  sluice_channel *ch = channel_to(ls->port);
  batch b;
  batch_init(&b);
  start_call(ch, &b, 0, 1, "b0", 1, 0, E2E_HANG_MS);
  assert_int_equal(lim_wait_started(ls, 1), 0);
  start_call(ch, &b, 1, 1, "b1", 1, 0, E2E_HANG_MS);
  e2e_sleep_ms(30);
  start_call(ch, &b, 2, 1, "b2", 1, 0, E2E_HANG_MS);
  e2e_sleep_ms(50);
  /* The queue (2) is full: the next Big call is refused at once. */
  start_call(ch, &b, 3, 1, "b3", 1, 0, E2E_HANG_MS);
  assert_int_equal(batch_wait(&b, 1), 1);
  assert_true(b.o[3].done);
  assert_int_equal(b.o[3].code, SLUICE_STATUS_RESOURCE_EXHAUSTED);
  assert_string_equal(b.o[3].message, "server queue full (2)");
  assert_true(b.o[3].pushback >= 10);
  /* Echo calls run at once, held, while Big calls wait. */
  start_call(ch, &b, 4, 0, "e0", 1, 0, E2E_HANG_MS);
  start_call(ch, &b, 5, 0, "e1", 1, 0, E2E_HANG_MS);
  start_call(ch, &b, 6, 0, "e2", 1, 0, E2E_HANG_MS);
  assert_int_equal(lim_wait_started(ls, 4), 0);
  e2e_sleep_ms(50);
  assert_int_equal(lim_started(ls), 4);
  assert_int_equal(lim_release(ls, "e0"), 0);
  assert_int_equal(lim_release(ls, "e1"), 0);
  assert_int_equal(lim_release(ls, "e2"), 0);
  assert_int_equal(batch_wait(&b, 4), 4);
  e2e_sleep_ms(30);
  assert_int_equal(lim_started(ls), 4); /* Echo slots do not free Big ones */
  assert_int_equal(lim_release(ls, "b0"), 0);
  assert_int_equal(lim_wait_started(ls, 5), 0);
  lim_assert_order(ls, 4, "b1");
  assert_int_equal(lim_release(ls, "b1"), 0);
  assert_int_equal(lim_wait_started(ls, 6), 0);
  lim_assert_order(ls, 5, "b2");
  assert_int_equal(lim_release(ls, "b2"), 0);
  assert_int_equal(batch_wait(&b, 7), 7);
  for (int i = 0; i < 7; i++)
    if (i != 3)
      assert_int_equal(b.o[i].code, SLUICE_STATUS_OK);
  sluice_channel_del(ch);
  batch_destroy(&b);
  lim_free(ls);
}

/* Two loops, a server-wide limit of 2 taken on one loop: calls waiting on
 * the other loop start when the first loop's calls finish. */
static void test_cross_loop_handoff(void **state) {
  (void)state;
  sluice_server_opts *o = new_opts(2);
  assert_int_equal(sluice_server_opts_set_max_concurrent_calls(o, 2), 0);
  lim_server *ls = lim_start(o);
  sluice_server_opts_del(o);
  /* Connections go to loops round robin: one channel each. */
  sluice_channel *a = channel_to(ls->port);
  batch b;
  batch_init(&b);
  start_call(a, &b, 0, 0, "a0", 1, 0, E2E_HANG_MS);
  start_call(a, &b, 1, 0, "a1", 1, 0, E2E_HANG_MS);
  assert_int_equal(lim_wait_started(ls, 2), 0);
  sluice_channel *c = channel_to(ls->port);
  start_call(c, &b, 2, 0, "b0", 1, 0, E2E_HANG_MS);
  e2e_sleep_ms(30);
  start_call(c, &b, 3, 0, "b1", 1, 0, E2E_HANG_MS);
  e2e_sleep_ms(100);
  assert_int_equal(lim_started(ls), 2);
  assert_int_equal(lim_release(ls, "a0"), 0);
  assert_int_equal(lim_wait_started(ls, 3), 0);
  lim_assert_order(ls, 2, "b0");
  assert_int_equal(lim_release(ls, "a1"), 0);
  assert_int_equal(lim_wait_started(ls, 4), 0);
  lim_assert_order(ls, 3, "b1");
  /* They did run on the other loop. */
  assert_false(pthread_equal(ls->thread[0], ls->thread[2]));
  assert_true(pthread_equal(ls->thread[2], ls->thread[3]));
  /* And back: a call waiting on the first loop, freed from the second. */
  start_call(a, &b, 4, 0, "a2", 1, 0, E2E_HANG_MS);
  e2e_sleep_ms(100);
  assert_int_equal(lim_started(ls), 4);
  assert_int_equal(lim_release(ls, "b0"), 0);
  assert_int_equal(lim_wait_started(ls, 5), 0);
  lim_assert_order(ls, 4, "a2");
  assert_true(pthread_equal(ls->thread[0], ls->thread[4]));
  assert_int_equal(lim_release(ls, "b1"), 0);
  assert_int_equal(lim_release(ls, "a2"), 0);
  assert_int_equal(batch_wait(&b, 5), 5);
  for (int i = 0; i < 5; i++)
    assert_int_equal(b.o[i].code, SLUICE_STATUS_OK);
  assert_int_equal(ls->max_running, 2);
  sluice_channel_del(a);
  sluice_channel_del(c);
  batch_destroy(&b);
  lim_free(ls);
}

/* Many loops and clients hammering a small limit: never more than the
 * limit at once, every call answered OK. */
static void test_limit_under_load(void **state) {
  (void)state;
  enum { LIMIT = 3, CLIENTS = 4, PER = 12 };
  sluice_server_opts *o = new_opts(4);
  assert_int_equal(sluice_server_opts_set_max_concurrent_calls(o, LIMIT), 0);
  e2e_server *s = e2e_server_start(NULL, o);
  sluice_server_opts_del(o);
  sluice_channel *ch[CLIENTS];
  batch b;
  batch_init(&b);
  for (int c = 0; c < CLIENTS; c++)
    ch[c] = e2e_channel(s, NULL);
  for (int i = 0; i < CLIENTS * PER; i++)
    start_call(ch[i % CLIENTS], &b, i, 0, "load", 0, 5, E2E_HANG_MS);
  assert_int_equal(batch_wait(&b, CLIENTS * PER), CLIENTS * PER);
  for (int i = 0; i < CLIENTS * PER; i++) {
    assert_int_equal(b.o[i].code, SLUICE_STATUS_OK);
    assert_true(b.o[i].have_load);
    assert_true(b.o[i].load.in_flight <= LIMIT);
    assert_true(b.o[i].load.cpu_utilization <= 1.0);
  }
  for (int c = 0; c < CLIENTS; c++)
    sluice_channel_del(ch[c]);
  batch_destroy(&b);
  e2e_server_free(s);
}

/* Queue full: RESOURCE_EXHAUSTED at once with grpc-retry-pushback-ms (and
 * the load report) visible in the client's trailing metadata. */
static void test_queue_full(void **state) {
  (void)state;
  sluice_server_opts *o = new_opts(1);
  assert_int_equal(sluice_server_opts_set_max_concurrent_calls(o, 1), 0);
  assert_int_equal(sluice_server_opts_set_max_queue(o, 2), 0);
  e2e_server *s = e2e_server_start(NULL, o);
  sluice_server_opts_del(o);
  sluice_channel *ch = e2e_channel(s, NULL);
  batch b;
  batch_init(&b);
  start_call(ch, &b, 0, 0, "run", 1, 0, E2E_HANG_MS);
  assert_int_equal(e2e_server_wait_held(s, 1, E2E_HANG_MS), 0);
  start_call(ch, &b, 1, 0, "wait1", 1, 0, E2E_HANG_MS);
  start_call(ch, &b, 2, 0, "wait2", 1, 0, E2E_HANG_MS);
  e2e_sleep_ms(50);
  outcome q;
  assert_int_equal(quick_call(ch, &q), SLUICE_STATUS_RESOURCE_EXHAUSTED);
  assert_string_equal(q.message, "server queue full (2)");
  assert_true(q.pushback >= 10);
  assert_true(q.have_load);
  assert_true(q.load.in_flight == 1);
  assert_true(q.load.cpu_utilization == 1.0);
  assert_int_equal(atomic_load(&s->calls), 1);
  /* The waiting calls run, one at a time. */
  int released = 0;
  while (released < 3) {
    assert_int_equal(e2e_server_wait_held(s, 1, E2E_HANG_MS), 0);
    released += e2e_server_release(s, SLUICE_STATUS_OK);
  }
  assert_int_equal(batch_wait(&b, 3), 3);
  for (int i = 0; i < 3; i++)
    assert_int_equal(b.o[i].code, SLUICE_STATUS_OK);
  assert_int_equal(atomic_load(&s->calls), 3);
  /* max_queue 0: no queue, refused at once. */
  sluice_channel_del(ch);
  batch_destroy(&b);
  e2e_server_free(s);

  o = new_opts(1);
  assert_int_equal(sluice_server_opts_set_max_concurrent_calls(o, 1), 0);
  assert_int_equal(sluice_server_opts_set_max_queue(o, 0), 0);
  s = e2e_server_start(NULL, o);
  sluice_server_opts_del(o);
  ch = e2e_channel(s, NULL);
  batch_init(&b);
  start_call(ch, &b, 0, 0, "run", 1, 0, E2E_HANG_MS);
  assert_int_equal(e2e_server_wait_held(s, 1, E2E_HANG_MS), 0);
  assert_int_equal(quick_call(ch, &q), SLUICE_STATUS_RESOURCE_EXHAUSTED);
  assert_string_equal(q.message, "server at its concurrency limit (no queue)");
  assert_true(q.pushback > 0);
  assert_int_equal(e2e_server_release(s, SLUICE_STATUS_OK), 1);
  assert_int_equal(batch_wait(&b, 1), 1);
  assert_int_equal(quick_call(ch, &q), SLUICE_STATUS_OK);
  assert_int_equal(q.pushback, -1); /* only on shed calls */
  sluice_channel_del(ch);
  batch_destroy(&b);
  e2e_server_free(s);
}

/* CoDel: limit 1, 50 ms handlers, 20 calls at once, target 5 ms / interval
 * 20 ms: some are shed early (RESOURCE_EXHAUSTED, pushback = interval), the
 * rest succeed, none waits for its deadline. */
static void test_codel(void **state) {
  (void)state;
  enum { N = 20 };
  sluice_server_opts *o = new_opts(1);
  assert_int_equal(sluice_server_opts_set_max_concurrent_calls(o, 1), 0);
  assert_int_equal(sluice_server_opts_set_codel(o, 5, 20), 0);
  e2e_server *s = e2e_server_start(NULL, o);
  sluice_server_opts_del(o);
  sluice_channel *ch = e2e_channel(s, NULL);
  batch b;
  batch_init(&b);
  uint64_t t0 = e2e_now_ms();
  for (int i = 0; i < N; i++)
    start_call(ch, &b, i, 0, "codel", 0, 50, E2E_HANG_MS);
  assert_int_equal(batch_wait(&b, N), N);
  int ok = 0, shed = 0;
  uint64_t first_shed = UINT64_MAX, last_ok = 0;
  for (int i = 0; i < N; i++) {
    outcome *x = &b.o[i];
    if (x->code == SLUICE_STATUS_OK) {
      ok++;
      if (x->done_ms > last_ok)
        last_ok = x->done_ms;
    } else {
      if (x->code != SLUICE_STATUS_RESOURCE_EXHAUSTED)
        fail_msg("call %d: %s (%s)", i, sluice_status_name(x->code),
                 x->message);
      shed++;
      if (x->done_ms < first_shed)
        first_shed = x->done_ms;
      assert_int_equal(strncmp(x->message, "shed by server: queued ", 23), 0);
      assert_non_null(strstr(x->message, "> target 5 ms"));
      assert_int_equal(x->pushback, 20);
    }
  }
  print_message("codel: %d ok, %d shed; first shed after %llu ms, last ok "
                "after %llu ms\n",
                ok, shed, (unsigned long long)(first_shed - t0),
                (unsigned long long)(last_ok - t0));
  assert_true(ok >= 1);
  assert_true(shed >= 1);
  assert_int_equal(ok + shed, N);
  /* Shedding happened while calls were still being served, not after. */
  assert_true(first_shed < last_ok);
  assert_int_equal(atomic_load(&s->calls), ok);
  sluice_channel_del(ch);
  batch_destroy(&b);
  e2e_server_free(s);
}

/* A queued call whose deadline passes: DEADLINE_EXCEEDED, its handler never
 * runs. A client that cancels while queued is dropped likewise. */
static void test_queued_deadline(void **state) {
  (void)state;
  sluice_server_opts *o = new_opts(1);
  assert_int_equal(sluice_server_opts_set_max_concurrent_calls(o, 1), 0);
  e2e_server *s = e2e_server_start(NULL, o);
  sluice_server_opts_del(o);
  sluice_channel *ch = e2e_channel(s, NULL);
  batch b;
  batch_init(&b);
  start_call(ch, &b, 0, 0, "run", 1, 0, E2E_HANG_MS);
  assert_int_equal(e2e_server_wait_held(s, 1, E2E_HANG_MS), 0);
  start_call(ch, &b, 1, 0, "late", 0, 0, 200);
  start_call(ch, &b, 2, 0, "late", 0, 0, 300);
  assert_int_equal(batch_wait(&b, 2), 2);
  assert_int_equal(b.o[1].code, SLUICE_STATUS_DEADLINE_EXCEEDED);
  assert_int_equal(b.o[2].code, SLUICE_STATUS_DEADLINE_EXCEEDED);
  print_message("queued past its deadline: %s\n", b.o[1].message);
  assert_int_equal(atomic_load(&s->calls), 1);
  /* The client gave up on its own timer; give the server time to see the
   * resets (or its own deadlines) before the slot frees, so that a loaded
   * machine cannot admit a call its client already abandoned. */
  e2e_sleep_ms(300);
  assert_int_equal(atomic_load(&s->calls), 1);
  /* The slot is still there for the next call once released. */
  assert_int_equal(e2e_server_release(s, SLUICE_STATUS_OK), 1);
  assert_int_equal(batch_wait(&b, 3), 3);
  assert_int_equal(b.o[0].code, SLUICE_STATUS_OK);
  outcome q;
  assert_int_equal(quick_call(ch, &q), SLUICE_STATUS_OK);
  assert_int_equal(atomic_load(&s->calls), 2);
  sluice_channel_del(ch);
  batch_destroy(&b);
  e2e_server_free(s);
}

/* Shutdown with calls waiting: they end (the client sees an error), the
 * running handler may still finish after shutdown, nothing leaks. */
static void test_shutdown_with_waiting(void **state) {
  (void)state;
  sluice_server_opts *o = new_opts(2);
  assert_int_equal(sluice_server_opts_set_max_concurrent_calls(o, 1), 0);
  assert_int_equal(sluice_server_opts_set_codel(o, 5, 100), 0);
  lim_server *ls = lim_start(o);
  sluice_server_opts_del(o);
  sluice_channel *ch = channel_to(ls->port);
  batch b;
  batch_init(&b);
  start_call(ch, &b, 0, 0, "run", 1, 0, E2E_HANG_MS);
  assert_int_equal(lim_wait_started(ls, 1), 0);
  for (int i = 1; i < 4; i++)
    start_call(ch, &b, i, 0, "wait", 1, 0, E2E_HANG_MS);
  e2e_sleep_ms(20);
  assert_int_equal(sluice_server_shutdown(ls->srv, 0), 0);
  assert_int_equal(batch_wait(&b, 4), 4);
  for (int i = 0; i < 4; i++)
    assert_int_not_equal(b.o[i].code, SLUICE_STATUS_OK);
  assert_int_equal(lim_started(ls), 1);
  assert_int_equal(lim_release(ls, "run"), 0); /* after shutdown: freed */
  sluice_channel_del(ch);
  batch_destroy(&b);
  lim_free(ls);
}

/* The load report: present by default on every response (OK, and errors
 * the library answers with Trailers-Only), decodes, follows in-flight calls;
 * rps after a window; absent when turned off. */
static void test_load_report(void **state) {
  (void)state;
  sluice_server_opts *o = new_opts(1);
  assert_int_equal(sluice_server_opts_set_max_concurrent_calls(o, 4), 0);
  lim_server *ls = lim_start(o);
  sluice_server_opts_del(o);
  sluice_channel *ch = channel_to(ls->port);
  outcome q;
  assert_int_equal(quick_call(ch, &q), SLUICE_STATUS_OK);
  assert_true(q.have_load);
  assert_true(q.load.in_flight == 0);
  assert_true(q.load.cpu_utilization == 0);
  assert_true(q.load.queue_ms >= 0);
  assert_true(q.load.rps_fractional >= 0);
  assert_true(q.load.mem_utilization < 0); /* not reported */
  batch b;
  batch_init(&b);
  for (int i = 0; i < 3; i++)
    start_call(ch, &b, i, 0,
               i == 0   ? "h0"
               : i == 1 ? "h1"
                        : "h2",
               1, 0, E2E_HANG_MS);
  assert_int_equal(lim_wait_started(ls, 4), 0);
  assert_int_equal(quick_call(ch, &q), SLUICE_STATUS_OK);
  assert_true(q.have_load);
  assert_true(q.load.in_flight == 3);
  assert_true(q.load.cpu_utilization == 0.75);
  assert_int_equal(lim_release(ls, "h0"), 0);
  assert_int_equal(lim_release(ls, "h1"), 0);
  assert_int_equal(lim_release(ls, "h2"), 0);
  assert_int_equal(batch_wait(&b, 3), 3);
  for (int i = 0; i < 3; i++) {
    assert_true(b.o[i].have_load);
    assert_true(b.o[i].load.in_flight < 3);
  }
  /* After a window (~1 s) completions per second show. */
  e2e_sleep_ms(1100);
  assert_int_equal(quick_call(ch, &q), SLUICE_STATUS_OK);
  assert_true(q.have_load);
  assert_true(q.load.rps_fractional > 0);
  sluice_channel_del(ch);
  batch_destroy(&b);
  lim_free(ls);

  /* Library errors (unknown method) carry it as well. */
  e2e_server *s = e2e_server_start(NULL, NULL);
  ch = e2e_channel(s, NULL);
  static const sluice_method_desc missing = {
      .path = "/e2e.Echo/Missing",
      .kind = SLUICE_CALL_UNARY,
      .request = &e2e__echo_msg__descriptor,
      .response = &e2e__echo_msg__descriptor,
  };
  E2e__EchoMsg req = E2E__ECHO_MSG__INIT;
  ProtobufCMessage *resp = NULL;
  sluice_status st;
  sluice_status_init(&st);
  assert_int_equal(
      sluice_unary_call_blocking(ch, &missing, &req.base, &resp, NULL, &st),
      SLUICE_STATUS_UNIMPLEMENTED);
  assert_null(resp);
  read_trailers(st.trailing_md, &q);
  assert_true(q.have_load);
  sluice_status_clear(&st);
  sluice_channel_del(ch);
  e2e_server_free(s);

  /* At most once per interval on a connection; always on a shed call. */
  o = new_opts(1);
  assert_int_equal(sluice_server_opts_set_load_report_interval(o, 60000), 0);
  assert_int_equal(sluice_server_opts_set_max_concurrent_calls(o, 1), 0);
  assert_int_equal(sluice_server_opts_set_max_queue(o, 0), 0);
  s = e2e_server_start(NULL, o);
  sluice_server_opts_del(o);
  ch = e2e_channel(s, NULL);
  assert_int_equal(quick_call(ch, &q), SLUICE_STATUS_OK);
  assert_true(q.have_load); /* the connection's first */
  assert_int_equal(quick_call(ch, &q), SLUICE_STATUS_OK);
  assert_false(q.have_load);
  batch_init(&b);
  start_call(ch, &b, 0, 0, "run", 1, 0, E2E_HANG_MS);
  assert_int_equal(e2e_server_wait_held(s, 1, E2E_HANG_MS), 0);
  assert_int_equal(quick_call(ch, &q), SLUICE_STATUS_RESOURCE_EXHAUSTED);
  assert_true(q.have_load);
  assert_true(q.load.in_flight == 1);
  assert_int_equal(e2e_server_release(s, SLUICE_STATUS_OK), 1);
  assert_int_equal(batch_wait(&b, 1), 1);
  assert_false(b.o[0].have_load);
  batch_destroy(&b);
  sluice_channel_del(ch);
  e2e_server_free(s);

  /* Off. */
  o = new_opts(1);
  assert_int_equal(sluice_server_opts_set_load_report(o, 0), 0);
  s = e2e_server_start(NULL, o);
  sluice_server_opts_del(o);
  ch = e2e_channel(s, NULL);
  assert_int_equal(quick_call(ch, &q), SLUICE_STATUS_OK);
  assert_false(q.have_load);
  assert_int_equal(q.pushback, -1);
  sluice_channel_del(ch);
  e2e_server_free(s);
}

/* ---- a client-streaming method behind a limit: admitted at its headers,
 * its messages held (flow control) while it waits */

typedef struct up_server {
  atomic_int started;
} up_server;

typedef struct up_state {
  uint64_t messages;
} up_state;

static void up_msg(sluice_server_call *call, const Streamt__Chunk *m,
                   void *ud) {
  (void)call;
  (void)m;
  ((up_state *)ud)->messages++;
}

static void up_half_close(sluice_server_call *call, void *ud) {
  Streamt__Sum sum = STREAMT__SUM__INIT;
  sum.messages = ((up_state *)ud)->messages;
  streamt__streams__upload__reply(call, &sum);
}

static void up_done(sluice_server_call *call, int cancelled, void *ud) {
  (void)call;
  (void)cancelled;
  free(ud);
}

static void on_upload(sluice_server_call *call, void *user_data) {
  up_server *us = user_data;
  atomic_fetch_add(&us->started, 1);
  up_state *u = calloc(1, sizeof *u);
  assert_non_null(u);
  Streamt__Streams__Upload_ServerHandlers h = {up_msg, up_half_close, NULL,
                                               up_done};
  assert_int_equal(streamt__streams__upload__set_handlers(call, &h, u), 0);
}

typedef struct up_client {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done;
  sluice_status_code code;
  uint64_t messages;
} up_client;

static void upc_message(sluice_call *call, const Streamt__Sum *sum, void *ud) {
  (void)call;
  up_client *c = ud;
  pthread_mutex_lock(&c->mu);
  c->messages = sum->messages;
  pthread_mutex_unlock(&c->mu);
}

static void upc_done(sluice_call *call, const sluice_status *st, void *ud) {
  (void)call;
  up_client *c = ud;
  pthread_mutex_lock(&c->mu);
  c->done = 1;
  c->code = st->code;
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
}

static sluice_call *up_start(sluice_channel *ch, up_client *c, int n) {
  pthread_mutex_init(&c->mu, NULL);
  e2e_cond_init(&c->cv);
  c->done = 0;
  c->messages = 0;
  Streamt__Streams__Upload_Handlers h = {NULL, upc_message, NULL, upc_done};
  sluice_call *call = NULL;
  assert_int_equal(streamt__streams__upload__start(ch, NULL, &h, c, &call), 0);
  Streamt__Chunk chunk = STREAMT__CHUNK__INIT;
  for (int i = 0; i < n; i++) {
    chunk.seq = (uint64_t)i;
    assert_int_equal(streamt__streams__upload__send(call, &chunk), 0);
  }
  return call;
}

static void up_wait(up_client *c) {
  struct timespec ts;
  e2e_abs_ms(&ts, E2E_HANG_MS);
  int rc = 0;
  pthread_mutex_lock(&c->mu);
  while (!c->done && rc == 0)
    rc = pthread_cond_timedwait(&c->cv, &c->mu, &ts);
  pthread_mutex_unlock(&c->mu);
  assert_true(c->done);
  pthread_cond_destroy(&c->cv);
  pthread_mutex_destroy(&c->mu);
}

static void test_streaming_waits(void **state) {
  (void)state;
  sluice_server_opts *o = new_opts(1);
  assert_int_equal(sluice_server_opts_set_max_concurrent_calls(o, 1), 0);
  up_server us;
  atomic_init(&us.started, 0);
  sluice_server *srv = NULL;
  assert_int_equal(sluice_server_new(&srv, o), 0);
  sluice_server_opts_del(o);
  const Streamt__Streams_SluiceHandlers handlers = {.upload = on_upload};
  assert_int_equal(streamt__streams__sluice_register(srv, &handlers, &us), 0);
  int port = 0;
  assert_int_equal(sluice_server_listen(srv, "127.0.0.1:0", &port), 0);
  assert_int_equal(sluice_server_start(srv), 0);
  sluice_channel *ch = channel_to(port);

  up_client c1, c2;
  sluice_call *u1 = up_start(ch, &c1, 3); /* open: holds the slot */
  for (int i = 0; i < 500 && atomic_load(&us.started) < 1; i++)
    e2e_sleep_ms(10);
  assert_int_equal(atomic_load(&us.started), 1);
  sluice_call *u2 = up_start(ch, &c2, 5);
  assert_int_equal(sluice_call_close_send(u2), 0);
  e2e_sleep_ms(100);
  assert_int_equal(atomic_load(&us.started), 1); /* u2 waits */
  assert_false(c2.done);
  assert_int_equal(sluice_call_close_send(u1), 0); /* u1 finishes */
  up_wait(&c1);
  up_wait(&c2);
  assert_int_equal(c1.code, SLUICE_STATUS_OK);
  assert_int_equal(c1.messages, 3);
  assert_int_equal(c2.code, SLUICE_STATUS_OK);
  assert_int_equal(c2.messages, 5); /* held while waiting, none lost */
  assert_int_equal(atomic_load(&us.started), 2);
  sluice_call_release(u1);
  sluice_call_release(u2);
  sluice_channel_del(ch);
  sluice_server_del(srv);
}

/* Defaults: no limit, every held call runs at once. */
static void test_no_limit_by_default(void **state) {
  (void)state;
  enum { N = 40 };
  e2e_server *s = e2e_server_start(NULL, NULL);
  sluice_channel *ch = e2e_channel(s, NULL);
  batch b;
  batch_init(&b);
  for (int i = 0; i < N; i++)
    start_call(ch, &b, i, i % 2, "free", 1, 0, E2E_HANG_MS);
  assert_int_equal(e2e_server_wait_held(s, N, E2E_HANG_MS), 0);
  assert_int_equal(e2e_server_release(s, SLUICE_STATUS_OK), N);
  assert_int_equal(batch_wait(&b, N), N);
  for (int i = 0; i < N; i++) {
    assert_int_equal(b.o[i].code, SLUICE_STATUS_OK);
    assert_int_equal(b.o[i].pushback, -1);
  }
  sluice_channel_del(ch);
  batch_destroy(&b);
  e2e_server_free(s);
}

int main(void) {
  e2e_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_options),
      cmocka_unit_test(test_server_limit_fifo),
      cmocka_unit_test(test_method_limit),
      cmocka_unit_test(test_cross_loop_handoff),
      cmocka_unit_test(test_limit_under_load),
      cmocka_unit_test(test_queue_full),
      cmocka_unit_test(test_codel),
      cmocka_unit_test(test_queued_deadline),
      cmocka_unit_test(test_shutdown_with_waiting),
      cmocka_unit_test(test_streaming_waits),
      cmocka_unit_test(test_load_report),
      cmocka_unit_test(test_no_limit_by_default),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
