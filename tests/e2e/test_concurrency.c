/* e2e: load and threads — many concurrent async calls on one channel,
 * blocking calls from several threads, and a channel on a user-supplied
 * libuv loop. All loops are bounded in count and time. */
#include "e2e_common.h"

#include <stdlib.h>
#include <string.h>
#include <uv.h>

static int setup(void **state) {
  sluice_server_opts *so = NULL;
  assert_int_equal(sluice_server_opts_new(&so), 0);
  assert_int_equal(sluice_server_opts_set_threads(so, 2), 0);
  *state = e2e_server_start(NULL, so);
  sluice_server_opts_del(so);
  return 0;
}

static int teardown(void **state) {
  e2e_server_free(*state);
  return 0;
}

/* ---- 1,000 concurrent async calls */

enum { N_ASYNC = 1000 };

typedef struct many {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  atomic_int fired;
  atomic_int ok;
  atomic_int per_call[N_ASYNC]; /* each must end at exactly 1 */
  atomic_int bad_text;
} many;

typedef struct many_tag {
  many *m;
  int i;
} many_tag;

static void many_cb(const sluice_status *st, const E2e__EchoMsg *resp,
                    void *user_data) {
  many_tag *t = user_data;
  many *m = t->m;
  atomic_fetch_add(&m->per_call[t->i], 1);
  if (st->code != SLUICE_STATUS_OK)
    print_message("call %d: %s: %s\n", t->i, sluice_status_name(st->code),
                  st->message);
  if (st->code == SLUICE_STATUS_OK && resp != NULL) {
    char want[32];
    snprintf(want, sizeof want, "call %d", t->i);
    if (resp->text == NULL || strcmp(resp->text, want) != 0 ||
        resp->payload.len != (size_t)(t->i % 64))
      atomic_fetch_add(&m->bad_text, 1);
    atomic_fetch_add(&m->ok, 1);
  }
  pthread_mutex_lock(&m->mu);
  atomic_fetch_add(&m->fired, 1);
  pthread_cond_broadcast(&m->cv);
  pthread_mutex_unlock(&m->mu);
}

static void test_many_async(void **state) {
  e2e_server *s = *state;
  sluice_channel *ch = e2e_channel(s, NULL);
  many *m = calloc(1, sizeof *m);
  many_tag *tags = calloc(N_ASYNC, sizeof *tags);
  assert_non_null(m);
  assert_non_null(tags);
  pthread_mutex_init(&m->mu, NULL);
  e2e_cond_init(&m->cv);

  for (int i = 0; i < N_ASYNC; i++) {
    char text[32];
    snprintf(text, sizeof text, "call %d", i);
    E2e__EchoMsg req = E2E__ECHO_MSG__INIT;
    req.text = text;
    req.reply_size = (uint32_t)(i % 64);
    tags[i].m = m;
    tags[i].i = i;
    assert_int_equal(e2e__echo__echo__async(ch, &req, NULL, many_cb, &tags[i]),
                     0);
  }

  struct timespec ts;
  e2e_abs_ms(&ts, 30000);
  pthread_mutex_lock(&m->mu);
  while (atomic_load(&m->fired) < N_ASYNC &&
         pthread_cond_timedwait(&m->cv, &m->mu, &ts) == 0)
    ;
  pthread_mutex_unlock(&m->mu);
  assert_int_equal(atomic_load(&m->fired), N_ASYNC);
  assert_int_equal(atomic_load(&m->ok), N_ASYNC);
  assert_int_equal(atomic_load(&m->bad_text), 0);

  sluice_channel_del(ch);
  for (int i = 0; i < N_ASYNC; i++)
    if (atomic_load(&m->per_call[i]) != 1)
      fail_msg("call %d completed %d times", i, atomic_load(&m->per_call[i]));
  assert_int_equal(atomic_load(&s->calls), N_ASYNC);
  pthread_cond_destroy(&m->cv);
  pthread_mutex_destroy(&m->mu);
  free(tags);
  free(m);
}

/* ---- a server allowing one stream at a time: the client queues the rest
 * (MAX_CONCURRENT_STREAMS respected), and every call still succeeds */

static void test_max_streams_one(void **state) {
  (void)state;
  sluice_server_opts *so;
  assert_int_equal(sluice_server_opts_new(&so), 0);
  assert_int_equal(sluice_server_opts_set_max_concurrent_streams(so, 1), 0);
  e2e_server *s = e2e_server_start(NULL, so);
  sluice_server_opts_del(so);
  sluice_channel *ch = e2e_channel(s, NULL);
  many *m = calloc(1, sizeof *m);
  many_tag tags[10];
  assert_non_null(m);
  pthread_mutex_init(&m->mu, NULL);
  e2e_cond_init(&m->cv);
  for (int i = 0; i < 10; i++) {
    char text[32];
    snprintf(text, sizeof text, "call %d", i);
    E2e__EchoMsg req = E2E__ECHO_MSG__INIT;
    req.text = text;
    req.reply_size = (uint32_t)(i % 64);
    req.delay_ms = 20; /* calls overlap, so the limit is reached */
    tags[i].m = m;
    tags[i].i = i;
    assert_int_equal(e2e__echo__echo__async(ch, &req, NULL, many_cb, &tags[i]),
                     0);
  }
  struct timespec until;
  e2e_abs_ms(&until, 30000);
  pthread_mutex_lock(&m->mu);
  while (atomic_load(&m->fired) < 10)
    if (pthread_cond_timedwait(&m->cv, &m->mu, &until) != 0)
      break;
  pthread_mutex_unlock(&m->mu);
  assert_int_equal(atomic_load(&m->fired), 10);
  assert_int_equal(atomic_load(&m->ok), 10);
  assert_int_equal(atomic_load(&m->bad_text), 0);
  for (int i = 0; i < 10; i++)
    assert_int_equal(atomic_load(&m->per_call[i]), 1);
  sluice_channel_del(ch);
  e2e_server_free(s);
  pthread_mutex_destroy(&m->mu);
  pthread_cond_destroy(&m->cv);
  free(m);
}

/* ---- blocking calls from 4 threads on one channel */

enum { N_THREADS = 4, N_PER_THREAD = 200 };

typedef struct worker {
  sluice_channel *ch;
  int id;
  int ok;
  sluice_status_code first_bad;
  char first_msg[128];
} worker;

static void *worker_main(void *p) {
  worker *w = p;
  for (int i = 0; i < N_PER_THREAD; i++) {
    char text[48];
    snprintf(text, sizeof text, "thread %d call %d", w->id, i);
    E2e__EchoMsg req = E2E__ECHO_MSG__INIT;
    req.text = text;
    E2e__EchoMsg *resp = NULL;
    sluice_status st;
    sluice_status_init(&st);
    sluice_call_opts opts;
    sluice_call_opts_init(&opts);
    opts.timeout_ms = 30000;
    sluice_status_code code =
        e2e__echo__echo__blocking(w->ch, &req, &resp, &opts, &st);
    if (code == SLUICE_STATUS_OK && resp != NULL && resp->text != NULL &&
        strcmp(resp->text, text) == 0) {
      w->ok++;
    } else if (w->first_bad == SLUICE_STATUS_OK) {
      w->first_bad = code == SLUICE_STATUS_OK ? SLUICE_STATUS_DATA_LOSS : code;
      snprintf(w->first_msg, sizeof w->first_msg, "%s",
               st.message ? st.message : "");
    }
    if (resp != NULL)
      protobuf_c_message_free_unpacked(&resp->base, NULL);
    sluice_status_clear(&st);
  }
  return NULL;
}

static void test_threads_blocking(void **state) {
  e2e_server *s = *state;
  sluice_channel *ch = e2e_channel(s, NULL);
  worker w[N_THREADS];
  pthread_t th[N_THREADS];
  memset(w, 0, sizeof w);
  for (int i = 0; i < N_THREADS; i++) {
    w[i].ch = ch;
    w[i].id = i;
    assert_int_equal(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
  }
  for (int i = 0; i < N_THREADS; i++)
    pthread_join(th[i], NULL);
  for (int i = 0; i < N_THREADS; i++)
    if (w[i].ok != N_PER_THREAD)
      fail_msg("thread %d: %d ok, first failure %s: %s", i, w[i].ok,
               sluice_status_name(w[i].first_bad), w[i].first_msg);
  assert_int_equal(atomic_load(&s->calls), N_THREADS * N_PER_THREAD);
  sluice_channel_del(ch);
}

/* ---- a channel on the caller's loop */

enum { N_LOOP_CALLS = 20, N_LOOP_FIRST = 5 };

typedef struct loop_ctx {
  sluice_channel *ch;
  pthread_t loop_thread;
  int started;
  int fired;
  int ok;
  int wrong_thread;
  int blocking_tried;
  sluice_status_code blocking_code;
  int blocking_rc_resp_null;
  int cancelled;
} loop_ctx;

static void loop_cb(const sluice_status *st, const E2e__EchoMsg *resp,
                    void *user_data);

static void loop_start_one(loop_ctx *c) {
  E2e__EchoMsg req = E2E__ECHO_MSG__INIT;
  req.text = "on my loop";
  if (e2e__echo__echo__async(c->ch, &req, NULL, loop_cb, c) == 0)
    c->started++;
}

static void loop_cb(const sluice_status *st, const E2e__EchoMsg *resp,
                    void *user_data) {
  loop_ctx *c = user_data;
  c->fired++;
  if (!pthread_equal(pthread_self(), c->loop_thread))
    c->wrong_thread++;
  if (st->code == SLUICE_STATUS_OK && resp != NULL && resp->text != NULL &&
      strcmp(resp->text, "on my loop") == 0)
    c->ok++;
  if (st->code == SLUICE_STATUS_CANCELLED)
    c->cancelled++;
  if (!c->blocking_tried) {
    /* A blocking call on the loop thread must refuse, not deadlock. */
    c->blocking_tried = 1;
    E2e__EchoMsg req = E2E__ECHO_MSG__INIT;
    E2e__EchoMsg *r = NULL;
    sluice_status bst;
    sluice_status_init(&bst);
    c->blocking_code = e2e__echo__echo__blocking(c->ch, &req, &r, NULL, &bst);
    c->blocking_rc_resp_null = r == NULL;
    if (r != NULL)
      protobuf_c_message_free_unpacked(&r->base, NULL);
    sluice_status_clear(&bst);
  }
  /* Start further calls from the loop thread, inside the callback. */
  if (c->started < N_LOOP_CALLS && st->code == SLUICE_STATUS_OK)
    loop_start_one(c);
}

static void tick_cb(uv_timer_t *t) { (void)t; }

/* Runs the loop (a 20 ms ticker keeps UV_RUN_ONCE from blocking forever)
 * until *counter reaches n or 10 s pass. */
static void run_until(uv_loop_t *loop, const int *counter, int n) {
  uint64_t t0 = e2e_now_ms();
  while (*counter < n && e2e_now_ms() - t0 < E2E_HANG_MS)
    uv_run(loop, UV_RUN_ONCE);
}

/* Runs the loop until uv_run() reports no live handles (bounded); returns
 * the last uv_run() result (0 = every handle closed). */
static int run_to_end(uv_loop_t *loop) {
  uint64_t t0 = e2e_now_ms();
  int alive;
  while ((alive = uv_run(loop, UV_RUN_NOWAIT)) != 0 &&
         e2e_now_ms() - t0 < E2E_HANG_MS)
    e2e_sleep_ms(1);
  return alive;
}

static void test_user_loop(void **state) {
  e2e_server *s = *state;
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  uv_timer_t tick;
  assert_int_equal(uv_timer_init(&loop, &tick), 0);
  assert_int_equal(uv_timer_start(&tick, tick_cb, 20, 20), 0);

  sluice_channel_opts *co = NULL;
  assert_int_equal(sluice_channel_opts_new(&co), 0);
  assert_int_equal(sluice_channel_opts_set_loop(co, &loop), 0);

  /* Calls started on the loop thread (this one), and from callbacks. */
  loop_ctx c;
  memset(&c, 0, sizeof c);
  c.loop_thread = pthread_self();
  c.ch = e2e_channel(s, co);
  for (int i = 0; i < N_LOOP_FIRST; i++)
    loop_start_one(&c);
  assert_int_equal(c.fired, 0); /* never synchronously */
  run_until(&loop, &c.fired, N_LOOP_CALLS);
  assert_int_equal(c.started, N_LOOP_CALLS);
  assert_int_equal(c.fired, N_LOOP_CALLS);
  assert_int_equal(c.ok, N_LOOP_CALLS);
  assert_int_equal(c.wrong_thread, 0);
  assert_true(c.blocking_tried);
  assert_int_equal(c.blocking_code, SLUICE_STATUS_FAILED_PRECONDITION);
  assert_true(c.blocking_rc_resp_null);
  sluice_channel_del(c.ch);

  /* A channel deleted with a call in flight: the callback fires (CANCELLED)
   * on the next turns of the loop. */
  loop_ctx d;
  memset(&d, 0, sizeof d);
  d.loop_thread = pthread_self();
  d.blocking_tried = 1;
  d.started = N_LOOP_CALLS; /* no chaining */
  d.ch = e2e_channel(s, co);
  E2e__EchoMsg req = E2E__ECHO_MSG__INIT;
  req.hold = 1;
  assert_int_equal(e2e__echo__echo__async(d.ch, &req, NULL, loop_cb, &d), 0);
  uint64_t t0 = e2e_now_ms();
  while (e2e_server_wait_held(s, 1, 0) != 0 && e2e_now_ms() - t0 < E2E_HANG_MS)
    uv_run(&loop, UV_RUN_ONCE);
  assert_int_equal(e2e_server_wait_held(s, 1, 0), 0);
  assert_int_equal(d.fired, 0);
  sluice_channel_del(d.ch);
  uv_close((uv_handle_t *)&tick, NULL);

  /* uv_run must return: the channels closed all their handles. */
  assert_int_equal(run_to_end(&loop), 0);
  assert_int_equal(d.fired, 1);
  assert_int_equal(d.cancelled, 1);
  assert_int_equal(d.wrong_thread, 0);
  assert_int_equal(uv_loop_close(&loop), 0);
  sluice_channel_opts_del(co);
  assert_int_equal(e2e_server_release(s, SLUICE_STATUS_OK), 1);
}

/* ---- metadata added from other threads while the library ends the call
 *
 * Each call's handler hands it to a worker thread that adds initial and
 * trailing metadata every millisecond until both are refused with
 * SLUICE_ERR_STATE, then finishes. The library ends the calls meanwhile:
 * their deadline passes (the server's timer or the client's reset), or the
 * server shuts down. Every worker must be refused (the call is over), no
 * add may fail otherwise, and nothing races (run under TSan and ASan). */

enum { N_MD = 32 };

typedef struct md_race {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int started, ended;
  int refused; /* workers refused with SLUICE_ERR_STATE for both kinds */
  int bad;     /* adds that returned neither 0 nor STATE; finish != 0 */
  pthread_t threads[N_MD];
} md_race;

static md_race g_md;

static void *md_worker(void *arg) {
  sluice_server_call *call = arg;
  int initial = 0, trailing = 0, bad = 0;
  uint64_t t0 = e2e_now_ms();
  char v[32];
  for (int i = 0; !(initial && trailing) && e2e_now_ms() - t0 < E2E_HANG_MS;
       i++) {
    snprintf(v, sizeof v, "v%d", i);
    if (!initial) {
      int rc = sluice_server_call_add_initial_metadata(call, "x-initial", v,
                                                       strlen(v));
      initial = rc == SLUICE_ERR_STATE;
      bad += rc != 0 && rc != SLUICE_ERR_STATE;
    }
    if (!trailing) {
      int rc = sluice_server_call_add_trailing_metadata(call, "x-trailing", v,
                                                        strlen(v));
      trailing = rc == SLUICE_ERR_STATE;
      bad += rc != 0 && rc != SLUICE_ERR_STATE;
    }
    e2e_sleep_ms(1);
  }
  bad +=
      sluice_server_call_finish(call, SLUICE_STATUS_ABORTED, "late", NULL) != 0;
  pthread_mutex_lock(&g_md.mu);
  g_md.ended++;
  g_md.refused += initial && trailing;
  g_md.bad += bad;
  pthread_cond_broadcast(&g_md.cv);
  pthread_mutex_unlock(&g_md.mu);
  return NULL;
}

static void md_handler(sluice_server_call *call, const E2e__EchoMsg *req,
                       void *ud) {
  (void)req;
  (void)ud;
  pthread_mutex_lock(&g_md.mu);
  int i = g_md.started++;
  assert_true(i < N_MD);
  assert_int_equal(pthread_create(&g_md.threads[i], NULL, md_worker, call), 0);
  pthread_cond_broadcast(&g_md.cv);
  pthread_mutex_unlock(&g_md.mu);
}

static sluice_server *md_server(int *port) {
  memset(&g_md, 0, sizeof g_md);
  pthread_mutex_init(&g_md.mu, NULL);
  e2e_cond_init(&g_md.cv);
  sluice_server_opts *so = NULL;
  assert_int_equal(sluice_server_opts_new(&so), 0);
  assert_int_equal(sluice_server_opts_set_threads(so, 2), 0);
  sluice_server *srv = NULL;
  assert_int_equal(sluice_server_new(&srv, so), 0);
  sluice_server_opts_del(so);
  const E2e__Echo_SluiceHandlers h = {.echo = md_handler, .big = md_handler};
  assert_int_equal(e2e__echo__sluice_register(srv, &h, NULL), 0);
  assert_int_equal(sluice_server_listen(srv, "127.0.0.1:0", port), 0);
  assert_int_equal(sluice_server_start(srv), 0);
  return srv;
}

/* Waits until field reaches n (under g_md.mu); returns it. */
static int md_wait(const int *field, int n) {
  struct timespec ts;
  e2e_abs_ms(&ts, 2 * E2E_HANG_MS);
  pthread_mutex_lock(&g_md.mu);
  while (*field < n)
    if (pthread_cond_timedwait(&g_md.cv, &g_md.mu, &ts) != 0)
      break;
  int got = *field;
  pthread_mutex_unlock(&g_md.mu);
  return got;
}

static void md_join(void) {
  for (int i = 0; i < g_md.started; i++)
    pthread_join(g_md.threads[i], NULL);
  assert_int_equal(g_md.ended, g_md.started);
  assert_int_equal(g_md.refused, g_md.started);
  assert_int_equal(g_md.bad, 0);
  pthread_cond_destroy(&g_md.cv);
  pthread_mutex_destroy(&g_md.mu);
}

/* Starts N_MD calls, with timeouts from timeout_base ms (0: none: waits
 * for every handler to run). */
static sluice_channel *md_calls(int port, e2e_wait *w, uint64_t timeout_base) {
  sluice_channel *ch = e2e_channel_port(port, NULL);
  E2e__EchoMsg req = E2E__ECHO_MSG__INIT;
  req.text = "md";
  for (int i = 0; i < N_MD; i++) {
    sluice_call_opts o;
    sluice_call_opts_init(&o);
    o.timeout_ms = timeout_base ? timeout_base + (uint64_t)(i % 8) * 5 : 0;
    assert_int_equal(e2e__echo__echo__async(ch, &req, &o, e2e_wait_cb, w), 0);
  }
  if (!timeout_base)
    assert_int_equal(md_wait(&g_md.started, N_MD), N_MD);
  return ch;
}

static void test_metadata_races_deadline(void **state) {
  (void)state;
  int port;
  sluice_server *srv = md_server(&port);
  e2e_wait w;
  e2e_wait_init(&w);
  sluice_channel *ch = md_calls(port, &w, 50);
  assert_int_equal(e2e_wait_for(&w, N_MD, 2 * E2E_HANG_MS), N_MD);
  assert_int_equal(w.code, SLUICE_STATUS_DEADLINE_EXCEEDED);
  /* On a slow machine (TSan) a call may expire before its handler runs;
   * after shutdown no more can start. */
  assert_int_equal(sluice_server_shutdown(srv, 0), 0);
  pthread_mutex_lock(&g_md.mu);
  int started = g_md.started;
  pthread_mutex_unlock(&g_md.mu);
  print_message("%d of %d handlers ran\n", started, N_MD);
  assert_true(started > 0);
  assert_int_equal(md_wait(&g_md.ended, started), started);
  md_join();
  sluice_channel_del(ch);
  sluice_server_del(srv);
  e2e_wait_destroy(&w);
}

static void test_metadata_races_shutdown(void **state) {
  (void)state;
  int port;
  sluice_server *srv = md_server(&port);
  e2e_wait w;
  e2e_wait_init(&w);
  sluice_channel *ch = md_calls(port, &w, 0);
  e2e_sleep_ms(5); /* the workers are adding */
  assert_int_equal(sluice_server_shutdown(srv, 0), 0);
  assert_int_equal(md_wait(&g_md.ended, N_MD), N_MD);
  md_join(); /* finish ran after shutdown: before the server is freed */
  assert_int_equal(e2e_wait_for(&w, N_MD, 2 * E2E_HANG_MS), N_MD);
  sluice_channel_del(ch);
  sluice_server_del(srv);
  e2e_wait_destroy(&w);
}

int main(void) {
  e2e_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_many_async, setup, teardown),
      cmocka_unit_test(test_max_streams_one),
      cmocka_unit_test_setup_teardown(test_threads_blocking, setup, teardown),
      cmocka_unit_test_setup_teardown(test_user_loop, setup, teardown),
      cmocka_unit_test(test_metadata_races_deadline),
      cmocka_unit_test(test_metadata_races_shutdown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
