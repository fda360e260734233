/* e2e: the generated typed stubs of all four kinds of method, both sides,
 * over loopback. Every callback takes its message typed (no message is cast
 * in this file), gets the user_data it was given, and each member of
 * the typed handler structs fires: send queues are made tiny on both sides
 * so that on_send_ready is needed, on_initial_metadata reports the headers,
 * every on_done fires exactly once, uncancelled. */
#include "e2e_common.h"

#include <stdlib.h>
#include <string.h>

#include "typed.sluice.h"

enum { N_PARTS = 200, N_TICKS = 200, N_LINES = 100 };

/* ---- server side: typed handlers only */

typedef struct server_news {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done, cancelled; /* server on_done count, of which cancelled */
  int ready;           /* server on_send_ready count */
  int errors;          /* checks failed on a loop thread */
  const char *first_error;
} server_news;

static server_news g_srv;

/* Loop threads must not fail a cmocka assertion: they count, and the test
 * checks the count on the main thread. */
static void srv_check(int ok, const char *what) {
  if (ok)
    return;
  pthread_mutex_lock(&g_srv.mu);
  if (g_srv.errors++ == 0)
    g_srv.first_error = what;
  pthread_mutex_unlock(&g_srv.mu);
}
#define SRV_CHECK(cond) srv_check((cond) != 0, #cond)

static void srv_note(int *counter, int cancelled) {
  pthread_mutex_lock(&g_srv.mu);
  (*counter)++;
  g_srv.cancelled += cancelled != 0;
  pthread_cond_broadcast(&g_srv.cv);
  pthread_mutex_unlock(&g_srv.mu);
}

/* Waits (bounded) until n server calls are done; returns how many are. */
static int srv_wait_done(int n) {
  struct timespec ts;
  e2e_abs_ms(&ts, E2E_HANG_MS);
  pthread_mutex_lock(&g_srv.mu);
  while (g_srv.done < n)
    if (pthread_cond_timedwait(&g_srv.cv, &g_srv.mu, &ts) != 0)
      break;
  int d = g_srv.done;
  pthread_mutex_unlock(&g_srv.mu);
  return d;
}

static void on_ask(sluice_server_call *call, const Typedt__Question *q,
                   void *ud) {
  SRV_CHECK(ud == &g_srv);
  char text[128];
  snprintf(text, sizeof text, "re: %s", q->text);
  Typedt__Answer a = TYPEDT__ANSWER__INIT;
  a.text = text;
  a.len = (uint32_t)strlen(q->text);
  SRV_CHECK(typedt__kinds__ask__reply(call, &a) == 0);
}

/* Add (client streaming): sums on the loop thread. */
typedef struct add_state {
  uint32_t parts;
  uint64_t sum;
  int finished;
} add_state;

static void add_part(sluice_server_call *call, const Typedt__Part *part,
                     void *ud) {
  (void)call;
  add_state *a = ud;
  a->parts++;
  a->sum += part->n;
}

static void add_half_close(sluice_server_call *call, void *ud) {
  add_state *a = ud;
  Typedt__Total total = TYPEDT__TOTAL__INIT;
  total.parts = a->parts;
  total.sum = a->sum;
  a->finished = 1;
  SRV_CHECK(typedt__kinds__add__reply(call, &total) == 0);
}

static void add_done(sluice_server_call *call, int cancelled, void *ud) {
  add_state *a = ud;
  if (!a->finished) /* finish is owed even when cancelled */
    sluice_server_call_finish(call, SLUICE_STATUS_CANCELLED, NULL, NULL);
  free(a);
  srv_note(&g_srv.done, cancelled);
}

static void on_add(sluice_server_call *call, void *ud) {
  SRV_CHECK(ud == &g_srv);
  add_state *a = calloc(1, sizeof *a);
  const Typedt__Kinds__Add_ServerHandlers h = {.on_message = add_part,
                                               .on_half_close = add_half_close,
                                               .on_done = add_done};
  int rc = a ? typedt__kinds__add__set_handlers(call, &h, a) : SLUICE_ERR_NOMEM;
  SRV_CHECK(rc == 0);
  if (rc != 0) {
    free(a);
    sluice_server_call_finish(call, SLUICE_STATUS_INTERNAL, "no handlers",
                              NULL);
  }
}

/* Count (server streaming): sends while the tiny send queue takes them,
 * the rest from on_send_ready. */
typedef struct count_state {
  sluice_server_call *call;
  uint32_t next, count;
  int finished;
} count_state;

static void count_pump(count_state *c) {
  while (c->next < c->count) {
    Typedt__Tick tick = TYPEDT__TICK__INIT;
    tick.n = c->next;
    int rc = typedt__kinds__count__send_response(c->call, &tick);
    if (rc == SLUICE_ERR_FULL)
      return; /* on_send_ready goes on */
    if (rc != 0)
      return; /* the call is over: on_done follows */
    c->next++;
  }
  if (!c->finished) {
    c->finished = 1;
    sluice_server_call_finish(c->call, SLUICE_STATUS_OK, NULL, NULL);
  }
}

static void count_ready(sluice_server_call *call, void *ud) {
  count_state *c = ud;
  SRV_CHECK(call == c->call);
  srv_note(&g_srv.ready, 0);
  count_pump(c);
}

static void count_done(sluice_server_call *call, int cancelled, void *ud) {
  count_state *c = ud;
  if (!c->finished)
    sluice_server_call_finish(call, SLUICE_STATUS_CANCELLED, NULL, NULL);
  free(c);
  srv_note(&g_srv.done, cancelled);
}

static void on_count(sluice_server_call *call, const Typedt__Range *req,
                     void *ud) {
  SRV_CHECK(ud == &g_srv);
  count_state *c = calloc(1, sizeof *c);
  if (c == NULL) {
    SRV_CHECK(!"out of memory");
    sluice_server_call_finish(call, SLUICE_STATUS_INTERNAL, NULL, NULL);
    return;
  }
  c->call = call;
  c->count = req->count;
  const Typedt__Kinds__Count_ServerHandlers h = {.on_send_ready = count_ready,
                                                 .on_done = count_done};
  SRV_CHECK(typedt__kinds__count__set_handlers(call, NULL, c) ==
            SLUICE_ERR_INVALID_ARG);
  SRV_CHECK(typedt__kinds__count__set_handlers(call, &h, c) == 0);
  /* Once per call, typed or not. */
  SRV_CHECK(typedt__kinds__count__set_handlers(call, &h, c) ==
            SLUICE_ERR_STATE);
  const sluice_server_call_handlers generic = {NULL, NULL, NULL, NULL};
  SRV_CHECK(sluice_server_call_set_handlers(call, &generic, c) ==
            SLUICE_ERR_STATE);
  count_pump(c);
}

/* Talk (bidi): echoes each line; a refused echo is held and receiving
 * paused until on_send_ready. */
typedef struct talk_state {
  uint32_t seq;
  char *held;
  uint32_t held_seq;
  int half_closed;
  int finished;
} talk_state;

static int talk_send(sluice_server_call *call, char *text, uint32_t seq) {
  Typedt__Echo echo = TYPEDT__ECHO__INIT;
  echo.text = text;
  echo.seq = seq;
  return typedt__kinds__talk__send_response(call, &echo);
}

static void talk_finish(talk_state *t, sluice_server_call *call) {
  if (!t->finished) {
    t->finished = 1;
    sluice_server_call_finish(call, SLUICE_STATUS_OK, NULL, NULL);
  }
}

static void talk_line(sluice_server_call *call, const Typedt__Line *line,
                      void *ud) {
  talk_state *t = ud;
  if (t->finished)
    return;
  uint32_t seq = t->seq++;
  if (talk_send(call, line->text, seq) == SLUICE_ERR_FULL) {
    t->held = strdup(line->text);
    t->held_seq = seq;
    sluice_server_call_set_recv_paused(call, 1);
  }
}

static void talk_ready(sluice_server_call *call, void *ud) {
  talk_state *t = ud;
  srv_note(&g_srv.ready, 0);
  if (t->held == NULL ||
      talk_send(call, t->held, t->held_seq) == SLUICE_ERR_FULL)
    return;
  free(t->held);
  t->held = NULL;
  sluice_server_call_set_recv_paused(call, 0);
  if (t->half_closed)
    talk_finish(t, call);
}

static void talk_half_close(sluice_server_call *call, void *ud) {
  talk_state *t = ud;
  t->half_closed = 1;
  if (t->held == NULL)
    talk_finish(t, call);
}

static void talk_done(sluice_server_call *call, int cancelled, void *ud) {
  talk_state *t = ud;
  if (!t->finished)
    sluice_server_call_finish(call, SLUICE_STATUS_CANCELLED, NULL, NULL);
  free(t->held);
  free(t);
  srv_note(&g_srv.done, cancelled);
}

static void on_talk(sluice_server_call *call, void *ud) {
  SRV_CHECK(ud == &g_srv);
  talk_state *t = calloc(1, sizeof *t);
  const Typedt__Kinds__Talk_ServerHandlers h = {
      .on_message = talk_line,
      .on_half_close = talk_half_close,
      .on_send_ready = talk_ready,
      .on_done = talk_done,
  };
  int rc =
      t ? typedt__kinds__talk__set_handlers(call, &h, t) : SLUICE_ERR_NOMEM;
  SRV_CHECK(rc == 0);
  if (rc != 0) {
    free(t);
    sluice_server_call_finish(call, SLUICE_STATUS_INTERNAL, "no handlers",
                              NULL);
  }
}

/* ---- client side: a synchronous view of one call */

typedef struct client_news {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int md;    /* on_initial_metadata count */
  int ready; /* on_send_ready count */
  int done;  /* on_done count: must end at 1 */
  int bad;   /* a callback saw something it should not have */
  sluice_status_code code;
  char message[256];
  uint32_t received; /* messages */
  uint32_t next;     /* the n or seq the next message must carry */
  Typedt__Total total;
} client_news;

static void cn_init(client_news *s) {
  memset(s, 0, sizeof *s);
  pthread_mutex_init(&s->mu, NULL);
  e2e_cond_init(&s->cv);
}

static void cn_destroy(client_news *s) {
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->cv);
}

/* The callbacks that do not depend on the method have one signature for
 * all of them. */
static void c_md(sluice_call *call, const sluice_metadata *md, void *ud) {
  (void)call;
  (void)md;
  client_news *s = ud;
  pthread_mutex_lock(&s->mu);
  s->md++;
  pthread_mutex_unlock(&s->mu);
}

static void c_ready(sluice_call *call, void *ud) {
  (void)call;
  client_news *s = ud;
  pthread_mutex_lock(&s->mu);
  s->ready++;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

static void c_done(sluice_call *call, const sluice_status *st, void *ud) {
  (void)call;
  client_news *s = ud;
  pthread_mutex_lock(&s->mu);
  s->done++;
  s->code = st->code;
  snprintf(s->message, sizeof s->message, "%s", st->message);
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

static void c_total(sluice_call *call, const Typedt__Total *total, void *ud) {
  (void)call;
  client_news *s = ud;
  pthread_mutex_lock(&s->mu);
  s->total.parts = total->parts;
  s->total.sum = total->sum;
  s->received++;
  pthread_mutex_unlock(&s->mu);
}

static void c_tick(sluice_call *call, const Typedt__Tick *tick, void *ud) {
  (void)call;
  client_news *s = ud;
  pthread_mutex_lock(&s->mu);
  s->bad += tick->n != s->next;
  s->next = tick->n + 1;
  s->received++;
  pthread_mutex_unlock(&s->mu);
}

static void c_echo(sluice_call *call, const Typedt__Echo *echo, void *ud) {
  (void)call;
  client_news *s = ud;
  char want[32];
  snprintf(want, sizeof want, "line %u", echo->seq);
  pthread_mutex_lock(&s->mu);
  s->bad += echo->seq != s->next || strcmp(echo->text, want) != 0;
  s->next = echo->seq + 1;
  s->received++;
  pthread_mutex_unlock(&s->mu);
}

static int is_done(client_news *s) { return s->done > 0; }

/* Waits until on_done fired; returns its count. */
static int wait_done(client_news *s) {
  struct timespec ts;
  e2e_abs_ms(&ts, E2E_HANG_MS);
  pthread_mutex_lock(&s->mu);
  while (!is_done(s))
    if (pthread_cond_timedwait(&s->cv, &s->mu, &ts) != 0)
      break;
  int d = s->done;
  pthread_mutex_unlock(&s->mu);
  return d;
}

/* After a send refused with SLUICE_ERR_FULL when ready_before
 * on_send_ready had fired: waits for the next one. Returns 0, or -1 when
 * the call ended or nothing came in time. */
static int wait_ready(client_news *s, int ready_before) {
  struct timespec ts;
  e2e_abs_ms(&ts, E2E_HANG_MS);
  pthread_mutex_lock(&s->mu);
  while (s->ready == ready_before && !s->done)
    if (pthread_cond_timedwait(&s->cv, &s->mu, &ts) != 0)
      break;
  int ok = s->ready != ready_before && !s->done;
  pthread_mutex_unlock(&s->mu);
  return ok ? 0 : -1;
}

static int ready_count(client_news *s) {
  pthread_mutex_lock(&s->mu);
  int r = s->ready;
  pthread_mutex_unlock(&s->mu);
  return r;
}

/* ---- fixture */

typedef struct fixture {
  sluice_server *srv;
  sluice_channel *ch;
} fixture;

static int setup(void **state) {
  memset(&g_srv.done, 0, sizeof g_srv - offsetof(server_news, done));
  fixture *f = calloc(1, sizeof *f);
  sluice_server_opts *o = NULL;
  assert_int_equal(sluice_server_opts_new(&o), 0);
  assert_int_equal(sluice_server_opts_set_threads(o, 2), 0);
  /* Tiny: the server's sends meet a full queue, on_send_ready is needed. */
  assert_int_equal(sluice_server_opts_set_send_buffer(o, 64), 0);
  assert_int_equal(sluice_server_new(&f->srv, o), 0);
  sluice_server_opts_del(o);
  const Typedt__Kinds_SluiceHandlers h = {
      .ask = on_ask, .add = on_add, .count = on_count, .talk = on_talk};
  assert_int_equal(typedt__kinds__sluice_register(f->srv, &h, &g_srv), 0);
  int port = 0;
  assert_int_equal(sluice_server_listen(f->srv, "127.0.0.1:0", &port), 0);
  assert_int_equal(sluice_server_start(f->srv), 0);
  f->ch = e2e_channel_port(port, NULL);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  sluice_channel_del(f->ch);
  sluice_server_del(f->srv);
  free(f);
  if (g_srv.errors)
    fail_msg("server checks failed: %d, first: %s", g_srv.errors,
             g_srv.first_error);
  return 0;
}

/* Every server call of a test ended once, uncancelled. */
static void expect_server_done(int n) {
  assert_int_equal(srv_wait_done(n), n);
  pthread_mutex_lock(&g_srv.mu);
  int cancelled = g_srv.cancelled;
  pthread_mutex_unlock(&g_srv.mu);
  assert_int_equal(cancelled, 0);
}

/* ---- tests */

typedef struct answer_wait {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int fired;
  sluice_status_code code;
  char text[128];
  uint32_t len;
} answer_wait;

static void on_answer(const sluice_status *st, const Typedt__Answer *resp,
                      void *ud) {
  answer_wait *w = ud;
  pthread_mutex_lock(&w->mu);
  w->code = st->code;
  if (resp) {
    snprintf(w->text, sizeof w->text, "%s", resp->text);
    w->len = resp->len;
  }
  w->fired++;
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

static void test_unary(void **state) {
  fixture *f = *state;
  answer_wait w;
  memset(&w, 0, sizeof w);
  pthread_mutex_init(&w.mu, NULL);
  e2e_cond_init(&w.cv);
  Typedt__Question q = TYPEDT__QUESTION__INIT;
  q.text = "why";
  assert_int_equal(typedt__kinds__ask__async(f->ch, &q, NULL, on_answer, &w),
                   0);
  struct timespec ts;
  e2e_abs_ms(&ts, E2E_HANG_MS);
  pthread_mutex_lock(&w.mu);
  while (w.fired == 0)
    if (pthread_cond_timedwait(&w.cv, &w.mu, &ts) != 0)
      break;
  pthread_mutex_unlock(&w.mu);
  assert_int_equal(w.fired, 1);
  assert_int_equal(w.code, SLUICE_STATUS_OK);
  assert_string_equal(w.text, "re: why");
  assert_int_equal(w.len, 3);

  Typedt__Answer *a = NULL;
  q.text = "how";
  assert_int_equal(typedt__kinds__ask__blocking(f->ch, &q, &a, NULL, NULL),
                   SLUICE_STATUS_OK);
  assert_non_null(a);
  assert_string_equal(a->text, "re: how");
  protobuf_c_message_free_unpacked(&a->base, NULL);
  pthread_mutex_destroy(&w.mu);
  pthread_cond_destroy(&w.cv);
}

static void test_client_streaming(void **state) {
  fixture *f = *state;
  client_news s;
  cn_init(&s);
  sluice_call_opts opts;
  sluice_call_opts_init(&opts);
  opts.send_buffer = 16; /* a few parts: the queue fills */
  const Typedt__Kinds__Add_Handlers h = {.on_initial_metadata = c_md,
                                         .on_message = c_total,
                                         .on_send_ready = c_ready,
                                         .on_done = c_done};
  sluice_call *call = NULL;
  assert_int_equal(typedt__kinds__add__start(f->ch, &opts, &h, &s, &call), 0);
  assert_non_null(call);
  uint64_t sum = 0;
  int fulls = 0;
  for (uint32_t i = 1; i <= N_PARTS; i++) {
    Typedt__Part part = TYPEDT__PART__INIT;
    part.n = i;
    int rc;
    for (;;) {
      int before = ready_count(&s);
      rc = typedt__kinds__add__send(call, &part);
      if (rc != SLUICE_ERR_FULL)
        break;
      fulls++;
      if (wait_ready(&s, before) != 0)
        break;
    }
    assert_int_equal(rc, 0);
    sum += i;
  }
  assert_int_equal(sluice_call_close_send(call), 0);
  assert_int_equal(wait_done(&s), 1);
  sluice_call_release(call);
  assert_int_equal(s.code, SLUICE_STATUS_OK);
  assert_int_equal(s.received, 1);
  assert_int_equal(s.total.parts, N_PARTS);
  assert_true(s.total.sum == sum);
  assert_int_equal(s.md, 1);
  assert_true(fulls > 0);
  assert_true(s.ready > 0);
  expect_server_done(1);
  cn_destroy(&s);
}

static void test_server_streaming(void **state) {
  fixture *f = *state;
  client_news s;
  cn_init(&s);
  const Typedt__Kinds__Count_Handlers h = {.on_initial_metadata = c_md,
                                           .on_message = c_tick,
                                           .on_send_ready = c_ready,
                                           .on_done = c_done};
  Typedt__Range req = TYPEDT__RANGE__INIT;
  req.count = N_TICKS;
  sluice_call *call = NULL;
  assert_int_equal(
      typedt__kinds__count__start(f->ch, &req, NULL, &h, &s, &call), 0);
  assert_int_equal(wait_done(&s), 1);
  sluice_call_release(call);
  assert_int_equal(s.code, SLUICE_STATUS_OK);
  assert_int_equal(s.received, N_TICKS);
  assert_int_equal(s.next, N_TICKS);
  assert_int_equal(s.bad, 0);
  assert_int_equal(s.md, 1);
  assert_int_equal(s.ready, 0); /* the one request: never called */
  expect_server_done(1);
  pthread_mutex_lock(&g_srv.mu);
  int server_ready = g_srv.ready;
  pthread_mutex_unlock(&g_srv.mu);
  assert_true(server_ready > 0); /* the 64-byte queue filled */
  cn_destroy(&s);
}

static void test_bidi(void **state) {
  fixture *f = *state;
  client_news s;
  cn_init(&s);
  sluice_call_opts opts;
  sluice_call_opts_init(&opts);
  opts.send_buffer = 32;
  const Typedt__Kinds__Talk_Handlers h = {.on_initial_metadata = c_md,
                                          .on_message = c_echo,
                                          .on_send_ready = c_ready,
                                          .on_done = c_done};
  sluice_call *call = NULL;
  assert_int_equal(typedt__kinds__talk__start(f->ch, &opts, &h, &s, &call), 0);
  for (uint32_t i = 0; i < N_LINES; i++) {
    char text[32];
    snprintf(text, sizeof text, "line %u", i);
    Typedt__Line line = TYPEDT__LINE__INIT;
    line.text = text;
    int rc;
    for (;;) {
      int before = ready_count(&s);
      rc = typedt__kinds__talk__send(call, &line);
      if (rc != SLUICE_ERR_FULL || wait_ready(&s, before) != 0)
        break;
    }
    assert_int_equal(rc, 0);
  }
  assert_int_equal(sluice_call_close_send(call), 0);
  assert_int_equal(wait_done(&s), 1);
  sluice_call_release(call);
  assert_int_equal(s.code, SLUICE_STATUS_OK);
  assert_int_equal(s.received, N_LINES);
  assert_int_equal(s.bad, 0);
  assert_int_equal(s.md, 1);
  expect_server_done(1);
  cn_destroy(&s);
}

static void test_misuse(void **state) {
  fixture *f = *state;
  client_news s;
  cn_init(&s);
  sluice_call *call = NULL;
  const Typedt__Kinds__Count_Handlers h = {.on_done = c_done};
  const Typedt__Kinds__Count_Handlers no_done = {.on_message = c_tick};
  Typedt__Range req = TYPEDT__RANGE__INIT;
  /* No request would start a server-streaming call without one. */
  assert_int_equal(
      typedt__kinds__count__start(f->ch, NULL, NULL, &h, &s, &call),
      SLUICE_ERR_INVALID_ARG);
  assert_int_equal(
      typedt__kinds__count__start(f->ch, &req, NULL, NULL, &s, &call),
      SLUICE_ERR_INVALID_ARG);
  assert_int_equal(
      typedt__kinds__count__start(f->ch, &req, NULL, &no_done, &s, &call),
      SLUICE_ERR_INVALID_ARG);
  assert_int_equal(typedt__kinds__count__start(NULL, &req, NULL, &h, &s, &call),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(typedt__kinds__talk__start(f->ch, NULL, NULL, &s, &call),
                   SLUICE_ERR_INVALID_ARG);
  assert_null(call);
  assert_int_equal(typedt__kinds__talk__send(NULL, NULL),
                   SLUICE_ERR_INVALID_ARG);
  /* The runtime entries refuse what the generated code never passes. */
  const sluice_call_handlers tramps = {NULL, NULL, NULL, NULL};
  const sluice_call_typed_handlers typed = {NULL, NULL, NULL, NULL, &s};
  assert_int_equal(sluice_call_start_typed(f->ch,
                                           &typedt__kinds__sluice_methods[3],
                                           NULL, NULL, &tramps, NULL, &call),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice_call_start_typed(f->ch,
                                           &typedt__kinds__sluice_methods[3],
                                           NULL, NULL, &tramps, &typed, &call),
                   SLUICE_ERR_INVALID_ARG);
  Typedt__Line wrong = TYPEDT__LINE__INIT;
  assert_int_equal(
      sluice_call_start_typed(f->ch, &typedt__kinds__sluice_methods[2],
                              &wrong.base, NULL, &tramps, &typed, &call),
      SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice_server_call_set_handlers_typed(NULL, NULL, NULL),
                   SLUICE_ERR_INVALID_ARG);
  assert_null(call);
  assert_int_equal(s.done, 0);
  cn_destroy(&s);
}

int main(void) {
  e2e_init();
  pthread_mutex_init(&g_srv.mu, NULL);
  e2e_cond_init(&g_srv.cv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_unary, setup, teardown),
      cmocka_unit_test_setup_teardown(test_client_streaming, setup, teardown),
      cmocka_unit_test_setup_teardown(test_server_streaming, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bidi, setup, teardown),
      cmocka_unit_test_setup_teardown(test_misuse, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
