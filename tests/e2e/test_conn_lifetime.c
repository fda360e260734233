/* e2e: server-side connection lifetime (gRFC A9) and the two-step graceful
 * GOAWAY — max_age under load, shutdown under load, max_idle, the end of
 * the age grace, the frame sequence a client sees on shutdown, and the
 * option checks.
 *
 * Every wait is bounded and ends on a count or a state, never on a clock:
 * loads run until the server has counted what the test needs (or a hang
 * bound of many seconds passes), and the assertions are on counts. */
#include "e2e_common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- a bounded load of blocking calls from a few threads */

#define LOAD_THREADS 4

typedef struct load {
  sluice_channel *ch;
  atomic_int stop;
  atomic_int ok;
  atomic_int failed;
  char first_failure[256]; /* under mu */
  pthread_mutex_t mu;
  pthread_t th[LOAD_THREADS];
} load;

static void *load_main(void *p) {
  load *l = p;
  E2e__EchoMsg req = E2E__ECHO_MSG__INIT;
  req.text = "load";
  sluice_call_opts opts;
  sluice_call_opts_init(&opts);
  opts.timeout_ms = E2E_HANG_MS;
  /* Bounded in count as well as by the stop flag. */
  for (int i = 0; i < 100000 && !atomic_load(&l->stop); i++) {
    E2e__EchoMsg *resp = NULL;
    sluice_status st;
    sluice_status_init(&st);
    sluice_status_code code =
        e2e__echo__echo__blocking(l->ch, &req, &resp, &opts, &st);
    if (code == SLUICE_STATUS_OK) {
      atomic_fetch_add(&l->ok, 1);
    } else {
      pthread_mutex_lock(&l->mu);
      if (atomic_fetch_add(&l->failed, 1) == 0)
        snprintf(l->first_failure, sizeof l->first_failure, "%s: %s",
                 sluice_status_name(code), st.message ? st.message : "");
      pthread_mutex_unlock(&l->mu);
    }
    if (resp)
      e2e__echo_msg__free_unpacked(resp, NULL);
    sluice_status_clear(&st);
  }
  return NULL;
}

static void load_start(load *l, sluice_channel *ch) {
  memset(l, 0, sizeof *l);
  l->ch = ch;
  pthread_mutex_init(&l->mu, NULL);
  for (int i = 0; i < LOAD_THREADS; i++)
    assert_int_equal(pthread_create(&l->th[i], NULL, load_main, l), 0);
}

static void load_stop(load *l) {
  atomic_store(&l->stop, 1);
  for (int i = 0; i < LOAD_THREADS; i++)
    pthread_join(l->th[i], NULL);
  pthread_mutex_destroy(&l->mu);
}

/* Waits (bounded) until the server's count of ev reaches n; returns it. */
static uint64_t wait_event(sluice_server *srv, sluice_server_conn_event ev,
                           uint64_t n, unsigned timeout_ms) {
  uint64_t end = e2e_now_ms() + timeout_ms;
  uint64_t v;
  while ((v = sluice_server_conn_events(srv, ev)) < n && e2e_now_ms() < end)
    e2e_sleep_ms(10);
  return v;
}

static int wait_ok(load *l, int n, unsigned timeout_ms) {
  uint64_t end = e2e_now_ms() + timeout_ms;
  while (atomic_load(&l->ok) < n && e2e_now_ms() < end)
    e2e_sleep_ms(10);
  return atomic_load(&l->ok);
}

static sluice_server_opts *limits(uint64_t idle, uint64_t age, uint64_t grace) {
  sluice_server_opts *o = NULL;
  assert_int_equal(sluice_server_opts_new(&o), 0);
  assert_int_equal(
      sluice_server_opts_set_connection_limits(o, idle, age, grace), 0);
  return o;
}

/* max_age 300 ms under a load of back-to-back calls: connections age out
 * one after another and no call fails (the two-step GOAWAY lets the client
 * move on before any stream is refused, and refused ones are replayed). */
static void test_max_age_under_load(void **state) {
  (void)state;
  sluice_server_opts *o = limits(0, 300, 10000);
  e2e_server *s = e2e_server_start(NULL, o);
  sluice_server_opts_del(o);
  sluice_channel *ch = e2e_channel(s, NULL);
  load l;
  load_start(&l, ch);
  /* Until three connections have aged out (about 1 s), at most 30 s. */
  uint64_t aged =
      wait_event(s->srv, SLUICE_SERVER_GOAWAY_MAX_AGE, 3, 3 * E2E_HANG_MS);
  int ok_before = atomic_load(&l.ok);
  /* Calls still go through after the last age-out. */
  wait_ok(&l, ok_before + 20, E2E_HANG_MS);
  load_stop(&l);
  uint64_t accepted =
      sluice_server_conn_events(s->srv, SLUICE_SERVER_CONNECTIONS_ACCEPTED);
  print_message("max_age: %d ok, %d failed, %llu connections, %llu aged\n",
                atomic_load(&l.ok), atomic_load(&l.failed),
                (unsigned long long)accepted, (unsigned long long)aged);
  if (atomic_load(&l.failed) != 0)
    fail_msg("%d calls failed, first: %s", atomic_load(&l.failed),
             l.first_failure);
  assert_true(aged >= 3);
  assert_true(accepted >= 2);
  assert_true(atomic_load(&l.ok) > ok_before);
  /* No grace ran out: every aged connection drained. */
  assert_int_equal(
      sluice_server_conn_events(s->srv, SLUICE_SERVER_GRACE_EXPIRED), 0);
  sluice_channel_del(ch);
  e2e_server_free(s);
}

/* Two servers behind one round-robin channel; one shuts down gracefully
 * while calls run: none fails. */
static void test_shutdown_under_load(void **state) {
  (void)state;
  e2e_server *a = e2e_server_start(NULL, NULL);
  e2e_server *b = e2e_server_start(NULL, NULL);
  char target[96];
  snprintf(target, sizeof target, "ipv4:127.0.0.1:%d,127.0.0.1:%d", a->port,
           b->port);
  sluice_channel_opts *co = NULL;
  assert_int_equal(sluice_channel_opts_new(&co), 0);
  assert_int_equal(sluice_channel_opts_set_lb(co, "rr"), 0);
  sluice_channel *ch = NULL;
  assert_int_equal(sluice_channel_new(&ch, target, co), 0);
  sluice_channel_opts_del(co);
  load l;
  load_start(&l, ch);
  /* Both servers are being used. */
  uint64_t end = e2e_now_ms() + 3 * E2E_HANG_MS;
  while ((atomic_load(&a->calls) < 50 || atomic_load(&b->calls) < 50) &&
         e2e_now_ms() < end)
    e2e_sleep_ms(10);
  assert_true(atomic_load(&a->calls) >= 50);
  assert_int_equal(sluice_server_shutdown(a->srv, 5000), 0);
  int ok_after = atomic_load(&l.ok);
  wait_ok(&l, ok_after + 200, E2E_HANG_MS);
  load_stop(&l);
  print_message("shutdown: %d ok, %d failed, a %d b %d calls\n",
                atomic_load(&l.ok), atomic_load(&l.failed),
                atomic_load(&a->calls), atomic_load(&b->calls));
  if (atomic_load(&l.failed) != 0)
    fail_msg("%d calls failed, first: %s", atomic_load(&l.failed),
             l.first_failure);
  assert_true(atomic_load(&l.ok) >= ok_after + 200);
  /* The drain ended with the calls, not with the grace. */
  assert_int_equal(
      sluice_server_conn_events(a->srv, SLUICE_SERVER_GRACE_EXPIRED), 0);
  sluice_channel_del(ch);
  e2e_server_free(a);
  e2e_server_free(b);
}

static sluice_status_code one_call(sluice_channel *ch) {
  E2e__EchoMsg req = E2E__ECHO_MSG__INIT;
  req.text = "one";
  sluice_call_opts opts;
  sluice_call_opts_init(&opts);
  opts.timeout_ms = E2E_HANG_MS;
  E2e__EchoMsg *resp = NULL;
  sluice_status_code code =
      e2e__echo__echo__blocking(ch, &req, &resp, &opts, NULL);
  if (resp)
    e2e__echo_msg__free_unpacked(resp, NULL);
  return code;
}

/* max_idle: a connection without calls is closed (graceful GOAWAY
 * "max_idle"); the next call opens a new one and succeeds. */
static void test_max_idle(void **state) {
  (void)state;
  sluice_server_opts *o = limits(200, 0, 0);
  e2e_server *s = e2e_server_start(NULL, o);
  sluice_server_opts_del(o);
  sluice_channel *ch = e2e_channel(s, NULL);
  assert_int_equal(one_call(ch), SLUICE_STATUS_OK);
  assert_true(wait_event(s->srv, SLUICE_SERVER_GOAWAY_MAX_IDLE, 1,
                         3 * E2E_HANG_MS) >= 1);
  /* The next call opens a new connection once the client has read the
   * GOAWAY; a call racing it may still go over the old connection, which
   * the server takes until its final GOAWAY: call until the new one. */
  uint64_t end = e2e_now_ms() + 3 * E2E_HANG_MS;
  do {
    assert_int_equal(one_call(ch), SLUICE_STATUS_OK);
    if (sluice_server_conn_events(s->srv, SLUICE_SERVER_CONNECTIONS_ACCEPTED) >=
        2)
      break;
    e2e_sleep_ms(20);
  } while (e2e_now_ms() < end);
  assert_true(sluice_server_conn_events(
                  s->srv, SLUICE_SERVER_CONNECTIONS_ACCEPTED) >= 2);
  /* The second connection goes idle too. */
  assert_true(wait_event(s->srv, SLUICE_SERVER_GOAWAY_MAX_IDLE, 2,
                         3 * E2E_HANG_MS) >= 2);
  sluice_channel_del(ch);
  e2e_server_free(s);
}

/* A call held past max_age + grace: the connection is closed when the
 * grace ends; the client's call fails once, the handler's call is
 * cancelled. Waits on the counters, asserts no timing. */
static void test_age_grace_ends(void **state) {
  (void)state;
  sluice_server_opts *o = limits(0, 300, 300);
  e2e_server *s = e2e_server_start(NULL, o);
  sluice_server_opts_del(o);
  sluice_channel *ch = e2e_channel(s, NULL);
  e2e_wait w;
  e2e_wait_init(&w);
  E2e__EchoMsg req = E2E__ECHO_MSG__INIT;
  req.text = "held";
  req.hold = 1;
  assert_int_equal(e2e__echo__echo__async(ch, &req, NULL, e2e_wait_cb, &w), 0);
  assert_int_equal(e2e_server_wait_held(s, 1, E2E_HANG_MS), 0);
  assert_true(
      wait_event(s->srv, SLUICE_SERVER_GRACE_EXPIRED, 1, 3 * E2E_HANG_MS) >= 1);
  assert_int_equal(e2e_wait_for(&w, 1, 3 * E2E_HANG_MS), 1);
  if (w.code != SLUICE_STATUS_UNAVAILABLE && w.code != SLUICE_STATUS_CANCELLED)
    fail_msg("got %s: %s", sluice_status_name(w.code), w.message);
  /* The handler finds its call cancelled (marked on the server's loop,
   * which may run after the client saw the connection close: wait). */
  assert_int_equal(e2e_server_wait_held_cancelled(s, 1, 3 * E2E_HANG_MS), 0);
  assert_int_equal(e2e_server_release(s, SLUICE_STATUS_OK), 1);
  pthread_mutex_lock(&s->mu);
  int cancelled = s->late_cancelled;
  pthread_mutex_unlock(&s->mu);
  assert_int_equal(cancelled, 1);
  /* Exactly once, and the channel goes on. */
  assert_int_equal(one_call(ch), SLUICE_STATUS_OK);
  assert_int_equal(e2e_wait_for(&w, 2, 0), 1);
  sluice_channel_del(ch);
  e2e_wait_destroy(&w);
  e2e_server_free(s);
}

/* ---- the frames a client sees on sluice_server_shutdown (raw socket) */

typedef struct frame {
  uint8_t type, flags;
  uint32_t stream, len;
  uint8_t payload[512];
} frame;

/* Reads one frame (payload cut at 512 bytes); 0, or -1 at EOF / error. */
static int read_frame(int fd, frame *f) {
  uint8_t hd[9];
  for (size_t got = 0; got < 9;) {
    ssize_t n = recv(fd, hd + got, 9 - got, 0);
    if (n <= 0)
      return -1;
    got += (size_t)n;
  }
  f->len = (uint32_t)hd[0] << 16 | (uint32_t)hd[1] << 8 | hd[2];
  f->type = hd[3];
  f->flags = hd[4];
  f->stream = ((uint32_t)hd[5] << 24 | (uint32_t)hd[6] << 16 |
               (uint32_t)hd[7] << 8 | hd[8]) &
              0x7fffffffu;
  for (uint32_t got = 0; got < f->len;) {
    uint8_t buf[512];
    size_t want = f->len - got < sizeof buf ? f->len - got : sizeof buf;
    ssize_t n = recv(fd, buf, want, 0);
    if (n <= 0)
      return -1;
    if (got < sizeof f->payload) {
      size_t keep = (size_t)n;
      if (got + keep > sizeof f->payload)
        keep = sizeof f->payload - got;
      memcpy(f->payload + got, buf, keep);
    }
    got += (uint32_t)n;
  }
  return 0;
}

static uint32_t be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
         p[3];
}

typedef struct shutdown_arg {
  sluice_server *srv;
  uint64_t grace_ms;
} shutdown_arg;

static void *shutdown_main(void *p) {
  shutdown_arg *a = p;
  sluice_server_shutdown(a->srv, a->grace_ms);
  return NULL;
}

/* grpcio 1.51's server.stop(grace) sends GOAWAY(2^31-1) -> PING -> (ACK)
 * -> GOAWAY(last id) -> EOF after the in-flight call; so must we. */
static void test_shutdown_frame_sequence(void **state) {
  (void)state;
  e2e_server *s = e2e_server_start(NULL, NULL);
  int fd = e2e_connect_loopback(s->port);
  assert_true(fd >= 0);
  uint8_t msg[64];
  E2e__EchoMsg req = E2E__ECHO_MSG__INIT;
  req.text = "held";
  req.hold = 1;
  size_t mlen = e2e__echo_msg__pack(&req, msg);
  uint8_t *bytes = NULL;
  size_t n =
      e2e_raw_call_bytes("/e2e.Echo/Echo", NULL, msg, mlen, 1, 0, &bytes);
  assert_int_equal(send(fd, bytes, n, MSG_NOSIGNAL), (ssize_t)n);
  free(bytes);
  assert_int_equal(e2e_server_wait_held(s, 1, E2E_HANG_MS), 0);

  shutdown_arg arg = {s->srv, 3 * E2E_HANG_MS};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, shutdown_main, &arg), 0);
  /* What we see, in order: 'G' notice, 'P' ping, 'g' final GOAWAY, 'E'
   * the held call's end (trailers), then EOF. */
  char seq[16] = {0};
  size_t ns = 0;
  uint32_t final_last = 0, final_err = 99, notice_err = 99;
  int released = 0;
  frame f;
  while (ns < sizeof seq - 1 && read_frame(fd, &f) == 0) {
    if (f.type == 4 && !(f.flags & 1)) { /* SETTINGS: ACK it */
      static const uint8_t ack[9] = {0, 0, 0, 4, 1, 0, 0, 0, 0};
      assert_int_equal(send(fd, ack, 9, MSG_NOSIGNAL), 9);
    } else if (f.type == 7 && f.len >= 8) { /* GOAWAY */
      uint32_t last = be32(f.payload) & 0x7fffffffu;
      if (last == 0x7fffffffu) {
        seq[ns++] = 'G';
        notice_err = be32(f.payload + 4);
      } else {
        seq[ns++] = 'g';
        final_last = last;
        final_err = be32(f.payload + 4);
        /* Now the held call may finish: the drain must wait for it. */
        if (!released)
          released = e2e_server_release(s, SLUICE_STATUS_OK);
      }
    } else if (f.type == 6 && !(f.flags & 1) && f.len == 8) { /* PING */
      seq[ns++] = 'P';
      uint8_t ack[17] = {0, 0, 8, 6, 1, 0, 0, 0, 0};
      memcpy(ack + 9, f.payload, 8);
      assert_int_equal(send(fd, ack, 17, MSG_NOSIGNAL), 17);
    } else if (f.type == 1 && (f.flags & 1) && f.stream == 1) {
      seq[ns++] = 'E'; /* trailers of stream 1 */
    }
  }
  seq[ns++] = '.'; /* EOF */
  pthread_join(th, NULL);
  close(fd);
  print_message("sequence %s\n", seq);
  assert_string_equal(seq, "GPgE.");
  assert_int_equal(notice_err, 0);
  assert_int_equal(final_err, 0);
  assert_int_equal(final_last, 1);
  assert_int_equal(released, 1);
  pthread_mutex_lock(&s->mu);
  int cancelled = s->late_cancelled;
  pthread_mutex_unlock(&s->mu);
  assert_int_equal(cancelled, 0); /* finished OK within the grace */
  e2e_server_free(s);
}

/* Server keepalive: a peer that sends its preface and then nothing, and
 * never answers the server's PING, is closed after the timeout. */
static void test_keepalive_timeout(void **state) {
  (void)state;
  sluice_server_opts *o = NULL;
  assert_int_equal(sluice_server_opts_new(&o), 0);
  assert_int_equal(sluice_server_opts_set_keepalive(o, 200, 300), 0);
  e2e_server *s = e2e_server_start(NULL, o);
  sluice_server_opts_del(o);
  int fd = e2e_connect_loopback(s->port);
  assert_true(fd >= 0);
  static const uint8_t preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
                                   "\0\0\0\4\0\0\0\0\0"; /* + SETTINGS */
  assert_int_equal(send(fd, preface, sizeof preface - 1, MSG_NOSIGNAL),
                   (ssize_t)(sizeof preface - 1));
  assert_true(wait_event(s->srv, SLUICE_SERVER_KEEPALIVE_TIMEOUTS, 1,
                         3 * E2E_HANG_MS) == 1);
  /* The server sent its PING and then closed: read up to EOF. */
  int pings = 0;
  frame f;
  while (read_frame(fd, &f) == 0)
    if (f.type == 6 && !(f.flags & 1))
      pings++;
  close(fd);
  assert_true(pings >= 1);
  e2e_server_free(s);
}

static void test_bad_options(void **state) {
  (void)state;
  sluice_server_opts *o = NULL;
  assert_int_equal(sluice_server_opts_new(&o), 0);
  const uint64_t year = 365ull * 24 * 3600 * 1000;
  assert_int_equal(sluice_server_opts_set_connection_limits(NULL, 0, 0, 0),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice_server_opts_set_connection_limits(o, year + 1, 0, 0),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice_server_opts_set_connection_limits(o, 0, year + 1, 0),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice_server_opts_set_connection_limits(o, 0, 0, year + 1),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice_server_opts_set_connection_limits(o, year, year, 1),
                   0);
  assert_int_equal(sluice_server_opts_set_keepalive(NULL, 1000, 1000),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice_server_opts_set_keepalive(o, 1000, 0),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice_server_opts_set_keepalive(o, year + 1, 1000),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice_server_opts_set_keepalive(o, 1000, year + 1),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice_server_opts_set_keepalive(o, 0, 0), 0); /* off */
  assert_int_equal(sluice_server_opts_set_keepalive(o, 1000, 500), 0);
  assert_int_equal(sluice_server_opts_set_keepalive_enforcement(NULL, 0, 0, 2),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(
      sluice_server_opts_set_keepalive_enforcement(o, year + 1, 0, 2),
      SLUICE_ERR_INVALID_ARG);
  assert_int_equal(
      sluice_server_opts_set_keepalive_enforcement(o, 0, 0, 0x80000000u),
      SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice_server_opts_set_keepalive_enforcement(o, 0, 1, 0), 0);
  sluice_server_opts_del(o);
  assert_int_equal(
      sluice_server_conn_events(NULL, SLUICE_SERVER_CONNECTIONS_ACCEPTED), 0);
}

int main(void) {
  e2e_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_options),
      cmocka_unit_test(test_max_age_under_load),
      cmocka_unit_test(test_shutdown_under_load),
      cmocka_unit_test(test_max_idle),
      cmocka_unit_test(test_age_grace_ends),
      cmocka_unit_test(test_shutdown_frame_sequence),
      cmocka_unit_test(test_keepalive_timeout),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
