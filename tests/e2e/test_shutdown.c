/* e2e: connections and servers going away — server shutdown mid-call,
 * graceful drain, channel destruction with calls in flight, a peer that
 * vanishes and a peer that speaks something other than HTTP/2. */
#include "e2e_common.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Counts completions per code. */
typedef struct counts {
  atomic_int fired;
  atomic_int by_code[17];
  atomic_int resp_non_null;
} counts;

static void count_cb(const sluice_status *st, const E2e__EchoMsg *resp,
                     void *user_data) {
  counts *c = user_data;
  if ((unsigned)st->code < 17)
    atomic_fetch_add(&c->by_code[st->code], 1);
  if (resp != NULL)
    atomic_fetch_add(&c->resp_non_null, 1);
  atomic_fetch_add(&c->fired, 1);
}

static int is_unavailable_or_cancelled(sluice_status_code c) {
  return c == SLUICE_STATUS_UNAVAILABLE || c == SLUICE_STATUS_CANCELLED;
}

static void test_server_shutdown_mid_call(void **state) {
  (void)state;
  e2e_server *s = e2e_server_start(NULL, NULL);
  sluice_channel *ch = e2e_channel(s, NULL);
  e2e_wait w;
  e2e_wait_init(&w);
  E2e__EchoMsg req = E2E__ECHO_MSG__INIT;
  req.text = "held";
  req.hold = 1;
  assert_int_equal(e2e__echo__echo__async(ch, &req, NULL, e2e_wait_cb, &w), 0);
  assert_int_equal(e2e_server_wait_held(s, 1, E2E_HANG_MS), 0);

  uint64_t t0 = e2e_now_ms();
  assert_int_equal(sluice_server_shutdown(s->srv, 200), 0);
  uint64_t took = e2e_now_ms() - t0;
  assert_true(took < E2E_HANG_MS);

  assert_int_equal(e2e_wait_for(&w, 1, E2E_HANG_MS), 1);
  if (!is_unavailable_or_cancelled(w.code))
    fail_msg("got %s: %s", sluice_status_name(w.code), w.message);
  assert_true(w.resp_null);

  /* The handler's late finish after shutdown is harmless. */
  assert_int_equal(e2e_server_release(s, SLUICE_STATUS_OK), 1);
  pthread_mutex_lock(&s->mu);
  int bad_rc = s->late_bad_rc;
  pthread_mutex_unlock(&s->mu);
  assert_int_equal(bad_rc, 0);

  /* Twice is harmless. */
  assert_int_equal(sluice_server_shutdown(s->srv, 0), 0);
  e2e_sleep_ms(50);
  assert_int_equal(e2e_wait_for(&w, 2, 0), 1); /* exactly once */

  /* The channel reports the server gone for new calls. */
  sluice_call_opts opts;
  sluice_call_opts_init(&opts);
  opts.timeout_ms = 5000;
  req.hold = 0;
  sluice_status_code code =
      e2e__echo__echo__blocking(ch, &req, NULL, &opts, NULL);
  assert_int_not_equal(code, SLUICE_STATUS_OK);
  sluice_channel_del(ch);
  e2e_wait_destroy(&w);
  e2e_server_free(s);
}

typedef struct release_arg {
  e2e_server *s;
  unsigned delay_us;
  int released;
} release_arg;

static void *release_main(void *p) {
  release_arg *a = p;
  struct timespec ts = {0, (long)a->delay_us * 1000};
  nanosleep(&ts, NULL);
  a->released = e2e_server_release(a->s, SLUICE_STATUS_OK);
  return NULL;
}

/* Handlers finishing on their own threads while shutdown tears the loops
 * down (each loop closes its streams, touching the calls, while finish
 * runs): a finish in that window must neither free a call a loop still uses
 * nor leak it. ASan/TSan builds catch the former, LeakSanitizer the
 * latter; the timing varies per round to cross the window. */
static void test_finish_races_shutdown(void **state) {
  (void)state;
  enum { ROUNDS = 12, CALLS = 48 };
  for (int round = 0; round < ROUNDS; round++) {
    sluice_server_opts *o = NULL;
    assert_int_equal(sluice_server_opts_new(&o), 0);
    sluice_server_opts_set_threads(o, 2);
    e2e_server *s = e2e_server_start(NULL, o);
    sluice_server_opts_del(o);
    /* Two channels: two connections, spread over both server loops. */
    sluice_channel *ch[2] = {e2e_channel(s, NULL), e2e_channel(s, NULL)};
    counts c;
    memset(&c, 0, sizeof c);
    E2e__EchoMsg req = E2E__ECHO_MSG__INIT;
    req.text = "held";
    req.hold = 1;
    for (int i = 0; i < CALLS; i++)
      assert_int_equal(
          e2e__echo__echo__async(ch[i % 2], &req, NULL, count_cb, &c), 0);
    assert_int_equal(e2e_server_wait_held(s, CALLS, E2E_HANG_MS), 0);
    release_arg a = {s, (unsigned)(round % 4) * 300, 0};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, release_main, &a), 0);
    assert_int_equal(sluice_server_shutdown(s->srv, 0), 0);
    pthread_join(th, NULL);
    assert_int_equal(a.released, CALLS);
    pthread_mutex_lock(&s->mu);
    int bad_rc = s->late_bad_rc;
    pthread_mutex_unlock(&s->mu);
    assert_int_equal(bad_rc, 0);
    /* Every client callback fires exactly once, OK or not. */
    uint64_t end = e2e_now_ms() + E2E_HANG_MS;
    while (atomic_load(&c.fired) < CALLS && e2e_now_ms() < end)
      e2e_sleep_ms(5);
    e2e_sleep_ms(20);
    assert_int_equal(atomic_load(&c.fired), CALLS);
    sluice_channel_del(ch[0]);
    sluice_channel_del(ch[1]);
    e2e_server_free(s);
  }
}

typedef struct shutdown_arg {
  sluice_server *srv;
  uint64_t grace_ms;
  atomic_int done;
} shutdown_arg;

static void *shutdown_main(void *p) {
  shutdown_arg *a = p;
  sluice_server_shutdown(a->srv, a->grace_ms);
  atomic_store(&a->done, 1);
  return NULL;
}

static void test_graceful_drain(void **state) {
  (void)state;
  e2e_server *s = e2e_server_start(NULL, NULL);
  sluice_channel *ch = e2e_channel(s, NULL);
  e2e_wait w;
  e2e_wait_init(&w);
  E2e__EchoMsg req = E2E__ECHO_MSG__INIT;
  req.text = "drained";
  req.hold = 1;
  req.reply_size = 1000;
  assert_int_equal(e2e__echo__echo__async(ch, &req, NULL, e2e_wait_cb, &w), 0);
  assert_int_equal(e2e_server_wait_held(s, 1, E2E_HANG_MS), 0);

  shutdown_arg a = {.srv = s->srv, .grace_ms = 20000};
  atomic_init(&a.done, 0);
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, shutdown_main, &a), 0);
  e2e_sleep_ms(200); /* let the shutdown start (GOAWAY sent) */
  assert_int_equal(atomic_load(&a.done), 0); /* still draining */
  assert_int_equal(e2e_wait_for(&w, 1, 0), 0);

  assert_int_equal(e2e_server_release(s, SLUICE_STATUS_OK), 1);
  assert_int_equal(e2e_wait_for(&w, 1, E2E_HANG_MS), 1);
  if (w.code != SLUICE_STATUS_OK)
    fail_msg("got %s: %s", sluice_status_name(w.code), w.message);
  assert_string_equal(w.text, "drained");
  assert_int_equal(w.payload_len, 1000);
  assert_true(w.payload_ok);

  /* The shutdown ends once the last call is done, well before the grace. */
  uint64_t t0 = e2e_now_ms();
  while (!atomic_load(&a.done) && e2e_now_ms() - t0 < E2E_HANG_MS)
    e2e_sleep_ms(5);
  assert_int_equal(atomic_load(&a.done), 1);
  pthread_join(th, NULL);

  pthread_mutex_lock(&s->mu);
  int bad_rc = s->late_bad_rc;
  pthread_mutex_unlock(&s->mu);
  assert_int_equal(bad_rc, 0);
  sluice_channel_del(ch);
  assert_int_equal(w.fired, 1);
  e2e_wait_destroy(&w);
  e2e_server_free(s);
}

static void test_channel_del_in_flight(void **state) {
  (void)state;
  enum { N = 8 };
  e2e_server *s = e2e_server_start(NULL, NULL);
  sluice_channel *ch = e2e_channel(s, NULL);
  counts c;
  memset(&c, 0, sizeof c);
  E2e__EchoMsg req = E2E__ECHO_MSG__INIT;
  req.hold = 1;
  for (int i = 0; i < N; i++)
    assert_int_equal(e2e__echo__echo__async(ch, &req, NULL, count_cb, &c), 0);
  assert_int_equal(e2e_server_wait_held(s, N, E2E_HANG_MS), 0);
  /* Plus some that may not even have reached the server. */
  req.hold = 0;
  req.delay_ms = 5000;
  for (int i = 0; i < N; i++)
    assert_int_equal(e2e__echo__echo__async(ch, &req, NULL, count_cb, &c), 0);
  assert_int_equal(atomic_load(&c.fired), 0);

  sluice_channel_del(ch);
  /* Every callback fired, exactly once, with CANCELLED, before del returned. */
  assert_int_equal(atomic_load(&c.fired), 2 * N);
  assert_int_equal(atomic_load(&c.by_code[SLUICE_STATUS_CANCELLED]), 2 * N);
  assert_int_equal(atomic_load(&c.resp_non_null), 0);

  /* The server sees the streams reset; late finishes are harmless. */
  assert_int_equal(e2e_server_release(s, SLUICE_STATUS_OK), N);
  e2e_sleep_ms(50);
  assert_int_equal(atomic_load(&c.fired), 2 * N);
  e2e_server_free(s);
}

/* ---- a raw TCP peer that is not a gRPC server */

enum raw_mode { RAW_VANISH, RAW_GARBAGE };

typedef struct raw_server {
  int lfd;
  int port;
  enum raw_mode mode;
  pthread_t th;
  atomic_int accepted;
  atomic_int bytes_read;
} raw_server;

static void *raw_main(void *p) {
  raw_server *r = p;
  struct pollfd pfd = {.fd = r->lfd, .events = POLLIN};
  if (poll(&pfd, 1, (int)E2E_HANG_MS) <= 0)
    return NULL;
  int fd = accept(r->lfd, NULL, NULL);
  if (fd < 0)
    return NULL;
  atomic_store(&r->accepted, 1);
  /* Read a bit: at least the client preface, or whatever came in 2 s. */
  char buf[4096];
  int got = 0;
  uint64_t t0 = e2e_now_ms();
  while (got < 24 && e2e_now_ms() - t0 < 2000) {
    pfd.fd = fd;
    if (poll(&pfd, 1, 100) > 0) {
      ssize_t n = read(fd, buf, sizeof buf);
      if (n <= 0)
        break;
      got += (int)n;
    }
  }
  atomic_store(&r->bytes_read, got);
  if (r->mode == RAW_GARBAGE) {
    static const char garbage[] = "HTTP/1.1 400 Bad Request\r\n\r\n";
    (void)!write(fd, garbage, sizeof garbage - 1);
    /* Keep the connection open until the client gives up (or 10 s). */
    t0 = e2e_now_ms();
    while (e2e_now_ms() - t0 < E2E_HANG_MS) {
      pfd.fd = fd;
      if (poll(&pfd, 1, 100) > 0 && read(fd, buf, sizeof buf) <= 0)
        break;
    }
  }
  close(fd);
  return NULL;
}

static void raw_start(raw_server *r, enum raw_mode mode) {
  memset(r, 0, sizeof *r);
  r->mode = mode;
  r->lfd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(r->lfd >= 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(bind(r->lfd, (struct sockaddr *)&a, sizeof a), 0);
  assert_int_equal(listen(r->lfd, 1), 0);
  socklen_t len = sizeof a;
  assert_int_equal(getsockname(r->lfd, (struct sockaddr *)&a, &len), 0);
  r->port = ntohs(a.sin_port);
  assert_int_equal(pthread_create(&r->th, NULL, raw_main, r), 0);
}

static void raw_stop(raw_server *r) {
  pthread_join(r->th, NULL);
  close(r->lfd);
}

static sluice_channel *raw_channel(const raw_server *r) {
  char target[64];
  snprintf(target, sizeof target, "ipv4:127.0.0.1:%d", r->port);
  sluice_channel *ch = NULL;
  assert_int_equal(sluice_channel_new(&ch, target, NULL), 0);
  return ch;
}

static void test_peer_vanishes(void **state) {
  (void)state;
  raw_server r;
  raw_start(&r, RAW_VANISH);
  sluice_channel *ch = raw_channel(&r);
  e2e_wait w;
  e2e_wait_init(&w);
  E2e__EchoMsg req = E2E__ECHO_MSG__INIT;
  req.text = "anyone there?";
  assert_int_equal(e2e__echo__echo__async(ch, &req, NULL, e2e_wait_cb, &w), 0);
  assert_int_equal(e2e_wait_for(&w, 1, E2E_HANG_MS), 1);
  if (w.code != SLUICE_STATUS_UNAVAILABLE)
    fail_msg("got %s: %s", sluice_status_name(w.code), w.message);
  assert_true(w.resp_null);
  raw_stop(&r);
  assert_int_equal(atomic_load(&r.accepted), 1);
  assert_true(atomic_load(&r.bytes_read) > 0);
  e2e_sleep_ms(100);
  sluice_channel_del(ch);
  assert_int_equal(w.fired, 1);
  e2e_wait_destroy(&w);
}

static void test_peer_garbage(void **state) {
  (void)state;
  raw_server r;
  raw_start(&r, RAW_GARBAGE);
  sluice_channel *ch = raw_channel(&r);
  e2e_wait w;
  e2e_wait_init(&w);
  E2e__EchoMsg req = E2E__ECHO_MSG__INIT;
  req.text = "hello?";
  assert_int_equal(e2e__echo__echo__async(ch, &req, NULL, e2e_wait_cb, &w), 0);
  assert_int_equal(e2e_wait_for(&w, 1, E2E_HANG_MS), 1);
  if (w.code != SLUICE_STATUS_UNAVAILABLE && w.code != SLUICE_STATUS_INTERNAL)
    fail_msg("got %s: %s", sluice_status_name(w.code), w.message);
  assert_true(w.resp_null);
  sluice_channel_del(ch);
  raw_stop(&r);
  assert_int_equal(atomic_load(&r.accepted), 1);
  assert_int_equal(w.fired, 1);
  e2e_wait_destroy(&w);
}

int main(void) {
  e2e_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_server_shutdown_mid_call),
      cmocka_unit_test(test_finish_races_shutdown),
      cmocka_unit_test(test_graceful_drain),
      cmocka_unit_test(test_channel_del_in_flight),
      cmocka_unit_test(test_peer_vanishes),
      cmocka_unit_test(test_peer_garbage),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
