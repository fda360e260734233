/* Client keepalive, wait-for-ready and the channel's connectivity state,
 * over real sockets:
 *  - a sluice server process (sigpipe_peer) stopped with SIGSTOP: a call
 *    without a deadline fails UNAVAILABLE "keepalive timeout" (keepalive
 *    1 s / 1 s), a channel without keepalive still gets its deadline, and
 *    after SIGCONT a new (wait-for-ready) call succeeds;
 *  - a raw peer that answers GOAWAY ENHANCE_YOUR_CALM "too_many_pings":
 *    the channel doubles its keepalive time;
 *  - wait-for-ready (call option and service config) against a port where
 *    nothing listens until a server is started there; fail-fast calls fail
 *    with UNAVAILABLE at once;
 *  - get_state / watch_state walking IDLE, CONNECTING, TRANSIENT_FAILURE,
 *    READY and SHUTDOWN, every watch firing once.
 * Nothing asserts speed: waits are bounded generously (only to catch
 * hangs), and the checks are on codes, texts, counts and states. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "e2e_common.h"

#define LONG_WAIT_MS 30000u /* hang guard for waits that span timers */

/* ---- a sluice server in its own process (sigpipe_peer server) */

typedef struct child {
  pid_t pid;
  int to;     /* its stdin: closing it stops the server */
  FILE *from; /* its stdout */
  int port;
} child;

static void spawn_server(child *c) {
  int in[2], out[2];
  assert_int_equal(pipe(in), 0);
  assert_int_equal(pipe(out), 0);
  c->pid = fork();
  assert_true(c->pid >= 0);
  if (c->pid == 0) {
    signal(SIGPIPE, SIG_DFL); /* the program checks it is at its default */
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGPIPE);
    sigprocmask(SIG_UNBLOCK, &s, NULL);
    dup2(in[0], 0);
    dup2(out[1], 1);
    close(in[0]);
    close(in[1]);
    close(out[0]);
    close(out[1]);
    char *const argv[] = {(char *)"sigpipe_peer", (char *)"server", NULL};
    execv(SLUICE_SIGPIPE_PEER, argv);
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  c->to = in[1];
  c->from = fdopen(out[0], "r");
  assert_non_null(c->from);
  char line[64];
  assert_non_null(fgets(line, sizeof line, c->from));
  assert_int_equal(sscanf(line, "port %d", &c->port), 1);
}

/* SIGSTOP, and wait until the process has stopped (a signal's delivery is
 * not synchronous: a thread of it could still answer a call sent right
 * after kill()). */
static void freeze(child *c) {
  assert_int_equal(kill(c->pid, SIGSTOP), 0);
  int st = 0;
  assert_int_equal(waitpid(c->pid, &st, WUNTRACED), c->pid);
  assert_true(WIFSTOPPED(st));
}

static void thaw(child *c) {
  assert_int_equal(kill(c->pid, SIGCONT), 0);
  int st = 0;
  assert_int_equal(waitpid(c->pid, &st, WCONTINUED), c->pid);
  assert_true(WIFCONTINUED(st));
}

static void stop_server(child *c) {
  kill(c->pid, SIGCONT);
  close(c->to);
  int st = 0;
  for (int i = 0; i < 1000; i++) {
    if (waitpid(c->pid, &st, WNOHANG) == c->pid) {
      fclose(c->from);
      return;
    }
    e2e_sleep_ms(10);
  }
  kill(c->pid, SIGKILL);
  waitpid(c->pid, &st, 0);
  fclose(c->from);
}

static sluice_channel *channel_ka(int port, uint32_t time_ms,
                                  uint32_t timeout_ms, int without_calls,
                                  uint32_t backoff_ms) {
  sluice_channel_opts *o;
  assert_int_equal(sluice_channel_opts_new(&o), 0);
  if (time_ms)
    assert_int_equal(sluice_channel_opts_set_keepalive(o, time_ms, timeout_ms,
                                                       without_calls),
                     0);
  if (backoff_ms)
    assert_int_equal(
        sluice_channel_opts_set_backoff_ms(o, backoff_ms, 2 * backoff_ms), 0);
  sluice_channel *ch = e2e_channel_port(port, o);
  sluice_channel_opts_del(o);
  return ch;
}

static sluice_status_code echo(sluice_channel *ch, const sluice_call_opts *o,
                               char *msg, size_t len) {
  E2e__EchoMsg req = E2E__ECHO_MSG__INIT, *resp = NULL;
  req.text = "ka";
  sluice_status st;
  sluice_status_init(&st);
  sluice_status_code code = e2e__echo__echo__blocking(ch, &req, &resp, o, &st);
  if (msg)
    snprintf(msg, len, "%s", st.message ? st.message : "");
  if (resp)
    protobuf_c_message_free_unpacked(&resp->base, NULL);
  sluice_status_clear(&st);
  return code;
}

static void test_option_values(void **state) {
  (void)state;
  sluice_channel_opts *o;
  assert_int_equal(sluice_channel_opts_new(&o), 0);
  assert_int_equal(sluice_channel_opts_set_keepalive(NULL, 1000, 1000, 0),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice_channel_opts_set_keepalive(o, 999, 1000, 0),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice_channel_opts_set_keepalive(o, 1000, 0, 0),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice_channel_opts_set_keepalive(o, 1000, 1, 1), 0);
  assert_int_equal(sluice_channel_opts_set_keepalive(o, 0, 0, 0), 0); /* off */
  assert_int_equal(sluice_channel_opts_set_keepalive(o, 10000, 20000, 0), 0);
  sluice_channel *ch = NULL;
  assert_int_equal(sluice_channel_new(&ch, "ipv4:127.0.0.1:1", o), 0);
  uint32_t t = 0;
  uint64_t n = 1;
  assert_int_equal(sluice_channel_get_keepalive(ch, &t, &n), 0);
  assert_int_equal(t, 10000);
  assert_int_equal(n, 0);
  assert_int_equal(sluice_channel_get_keepalive(NULL, &t, &n),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(
      sluice_channel_watch_state(ch, SLUICE_CHANNEL_IDLE, 0, NULL, NULL),
      SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice_channel_get_state(NULL, 0), SLUICE_CHANNEL_SHUTDOWN);
  assert_string_equal(
      sluice_connectivity_state_name(SLUICE_CHANNEL_TRANSIENT_FAILURE),
      "TRANSIENT_FAILURE");
  assert_string_equal(
      sluice_connectivity_state_name((sluice_connectivity_state)42), "UNKNOWN");
  sluice_channel_del(ch);
  sluice_channel_opts_del(o);
}

/* A server process that stops answering mid-connection. */
static void test_stopped_server(void **state) {
  (void)state;
  child c;
  spawn_server(&c);
  sluice_channel *ka = channel_ka(c.port, 1000, 1000, 0, 200);
  sluice_channel *plain = channel_ka(c.port, 0, 0, 0, 200);
  char msg[512];
  /* Both connected and working first. */
  assert_int_equal(echo(ka, NULL, msg, sizeof msg), SLUICE_STATUS_OK);
  assert_int_equal(echo(plain, NULL, msg, sizeof msg), SLUICE_STATUS_OK);

  freeze(&c);
  E2e__EchoMsg req = E2E__ECHO_MSG__INIT;
  req.text = "into the void";
  e2e_wait wk, wp;
  e2e_wait_init(&wk);
  e2e_wait_init(&wp);
  uint64_t t0 = e2e_now_ms();
  /* No deadline: only keepalive can end it. */
  assert_int_equal(e2e__echo__echo__async(ka, &req, NULL, e2e_wait_cb, &wk), 0);
  /* No keepalive: the deadline still ends it. */
  sluice_call_opts o;
  sluice_call_opts_init(&o);
  o.timeout_ms = 1500;
  assert_int_equal(e2e__echo__echo__async(plain, &req, &o, e2e_wait_cb, &wp),
                   0);
  assert_int_equal(e2e_wait_for(&wk, 1, LONG_WAIT_MS), 1);
  uint64_t took = e2e_now_ms() - t0;
  assert_int_equal(wk.code, SLUICE_STATUS_UNAVAILABLE);
  if (!strstr(wk.message, "keepalive timeout: no bytes for 1000 ms after PING"))
    fail_msg("unexpected message: %s", wk.message);
  /* Not before the keepalive time itself (a lower bound only). */
  assert_true(took >= 900);
  assert_int_equal(e2e_wait_for(&wp, 1, LONG_WAIT_MS), 1);
  assert_int_equal(wp.code, SLUICE_STATUS_DEADLINE_EXCEEDED);

  /* The peer comes back: a new call works (wait-for-ready rides out the
   * back-off the keepalive failure started). */
  thaw(&c);
  sluice_call_opts w;
  sluice_call_opts_init(&w);
  w.wait_for_ready = 1;
  w.timeout_ms = 20000;
  sluice_status_code code = echo(ka, &w, msg, sizeof msg);
  if (code != SLUICE_STATUS_OK)
    fail_msg("after SIGCONT, keepalive channel: %s: %s",
             sluice_status_name(code), msg);
  code = echo(plain, &w, msg, sizeof msg);
  if (code != SLUICE_STATUS_OK)
    fail_msg("after SIGCONT, plain channel: %s: %s", sluice_status_name(code),
             msg);

  e2e_wait_destroy(&wk);
  e2e_wait_destroy(&wp);
  sluice_channel_del(ka);
  sluice_channel_del(plain);
  stop_server(&c);
}

/* A healthy server that stays silent during a long call: the PINGs' ACKs
 * keep the connection (any byte disarms the timeout). Were they ignored,
 * the call would fail at about 3 s (PING at 1 s + 2 s), before its 4 s
 * reply. */
static void test_quiet_call_survives(void **state) {
  (void)state;
  e2e_server *srv = e2e_server_start(NULL, NULL);
  sluice_channel *ch = channel_ka(srv->port, 1000, 2000, 0, 0);
  E2e__EchoMsg req = E2E__ECHO_MSG__INIT, *resp = NULL;
  req.text = "slow";
  req.delay_ms = 4000;
  sluice_status st;
  sluice_status_init(&st);
  sluice_status_code code =
      e2e__echo__echo__blocking(ch, &req, &resp, NULL, &st);
  if (code != SLUICE_STATUS_OK)
    fail_msg("quiet call: %s: %s", sluice_status_name(code),
             st.message ? st.message : "");
  assert_non_null(resp);
  assert_string_equal(resp->text, "slow");
  protobuf_c_message_free_unpacked(&resp->base, NULL);
  sluice_status_clear(&st);
  sluice_channel_del(ch);
  e2e_server_free(srv);
}

/* ---- a raw peer: SETTINGS, then GOAWAY ENHANCE_YOUR_CALM too_many_pings */

typedef struct calm_peer {
  int lfd;
  int conns; /* connections answered */
  pthread_t th;
} calm_peer;

static void *calm_main(void *arg) {
  calm_peer *p = arg;
  static const uint8_t frames[] = {
      0,   0,   0,   4,   0,   0,   0,   0,   0, /* SETTINGS */
      0,   0,   22,  7,   0,   0,   0,   0,   0, /* GOAWAY, 8 + 14 bytes */
      0,   0,   0,   0,                          /* last stream 0 */
      0,   0,   0,   0xb,                        /* ENHANCE_YOUR_CALM */
      't', 'o', 'o', '_', 'm', 'a', 'n', 'y', '_', 'p', 'i', 'n', 'g', 's'};
  struct timeval tv = {10, 0};
  setsockopt(p->lfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  for (int i = 0; i < 2; i++) {
    int fd = accept(p->lfd, NULL, NULL);
    if (fd < 0)
      break;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    (void)!send(fd, frames, sizeof frames, MSG_NOSIGNAL);
    p->conns++;
    char buf[4096];
    while (recv(fd, buf, sizeof buf, 0) > 0) /* until the client closes */
      ;
    close(fd);
  }
  return NULL;
}

static void test_too_many_pings_doubles(void **state) {
  (void)state;
  calm_peer p = {0};
  int port;
  p.lfd = e2e_bind_loopback(&port, 8);
  assert_int_equal(pthread_create(&p.th, NULL, calm_main, &p), 0);
  sluice_channel *ch = channel_ka(port, 1000, 1000, 1, 200);
  /* Connect without a call (the state API). */
  (void)sluice_channel_get_state(ch, 1);
  uint32_t t = 0;
  uint64_t n = 0;
  for (int i = 0; i < 1000 && n == 0; i++) {
    e2e_sleep_ms(10);
    assert_int_equal(sluice_channel_get_keepalive(ch, &t, &n), 0);
  }
  assert_int_equal(n, 1);
  assert_int_equal(t, 2000);
  char *prom = NULL;
  assert_int_equal(sluice_channel_stats_prometheus(ch, &prom), 0);
  assert_non_null(strstr(prom, "\nsluice_client_keepalive_time_ms 2000\n"));
  assert_non_null(strstr(prom, "\nsluice_client_too_many_pings_total 1\n"));
  free(prom);
  sluice_channel_del(ch);
  shutdown(p.lfd, SHUT_RDWR); /* ends a second accept, if it waits */
  pthread_join(p.th, NULL);
  close(p.lfd);
}

/* ---- wait-for-ready */

/* A port on 127.0.0.1 where nothing listens (yet): bound, not listening,
 * so connects are refused and the kernel gives the port to no other socket
 * (a client's own ephemeral port could otherwise be it: a self-connect).
 * *fd is closed just before a server takes the port. */
static int down_port(int *fd) {
  int port;
  *fd = e2e_bind_loopback(&port, 0);
  return port;
}

static void test_wait_for_ready(void **state) {
  (void)state;
  int hold;
  int port = down_port(&hold);
  sluice_channel *ch = channel_ka(port, 0, 0, 0, 100);
  sluice_channel_opts *so;
  assert_int_equal(sluice_channel_opts_new(&so), 0);
  assert_int_equal(sluice_channel_opts_set_backoff_ms(so, 100, 200), 0);
  assert_int_equal(
      sluice_channel_opts_set_service_config(
          so, "{\"methodConfig\":[{\"name\":[{\"service\":\"e2e.Echo\"}],"
              "\"waitForReady\":true}]}"),
      0);
  sluice_channel *sch = e2e_channel_port(port, so);
  sluice_channel_opts_del(so);

  /* Fail fast by default: UNAVAILABLE, long before the deadline. */
  sluice_call_opts o;
  sluice_call_opts_init(&o);
  o.timeout_ms = 20000;
  char msg[512];
  assert_int_equal(echo(ch, &o, msg, sizeof msg), SLUICE_STATUS_UNAVAILABLE);
  /* The call's -1 overrides the service config's waitForReady. */
  o.wait_for_ready = -1;
  assert_int_equal(echo(sch, &o, msg, sizeof msg), SLUICE_STATUS_UNAVAILABLE);
  /* A struct zeroed by hand (struct_size 0) is read without the newer
   * wait_for_ready field (docs/abi.md): it fails fast. */
  sluice_call_opts zeroed;
  memset(&zeroed, 0, sizeof zeroed);
  zeroed.timeout_ms = 20000;
  zeroed.wait_for_ready = 1;
  assert_int_equal(echo(ch, &zeroed, msg, sizeof msg),
                   SLUICE_STATUS_UNAVAILABLE);
  /* Waiting calls end at their deadline while nothing listens. */
  o.wait_for_ready = 1;
  o.timeout_ms = 300;
  assert_int_equal(echo(ch, &o, msg, sizeof msg),
                   SLUICE_STATUS_DEADLINE_EXCEEDED);

  /* Waiting calls started while the server is down... */
  E2e__EchoMsg req = E2E__ECHO_MSG__INIT;
  req.text = "waited";
  e2e_wait w1, w2;
  e2e_wait_init(&w1);
  e2e_wait_init(&w2);
  o.wait_for_ready = 1;
  o.timeout_ms = 25000;
  assert_int_equal(e2e__echo__echo__async(ch, &req, &o, e2e_wait_cb, &w1), 0);
  sluice_call_opts none; /* the service config's waitForReady */
  sluice_call_opts_init(&none);
  none.timeout_ms = 25000;
  assert_int_equal(e2e__echo__echo__async(sch, &req, &none, e2e_wait_cb, &w2),
                   0);
  /* ... still wait after several failed connects. */
  for (int i = 0; i < 1000 && sluice_channel_get_state(ch, 0) !=
                                  SLUICE_CHANNEL_TRANSIENT_FAILURE;
       i++)
    e2e_sleep_ms(10);
  e2e_sleep_ms(300);
  assert_int_equal(e2e_wait_for(&w1, 1, 0), 0);
  assert_int_equal(e2e_wait_for(&w2, 1, 0), 0);

  /* ... and succeed once the server is up. */
  char addr[64];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
  close(hold);
  e2e_server *srv = e2e_server_start(addr, NULL);
  assert_int_equal(e2e_wait_for(&w1, 1, LONG_WAIT_MS), 1);
  assert_int_equal(w1.code, SLUICE_STATUS_OK);
  assert_string_equal(w1.text, "waited");
  assert_int_equal(e2e_wait_for(&w2, 1, LONG_WAIT_MS), 1);
  assert_int_equal(w2.code, SLUICE_STATUS_OK);

  e2e_wait_destroy(&w1);
  e2e_wait_destroy(&w2);
  sluice_channel_del(ch);
  sluice_channel_del(sch);
  e2e_server_free(srv);
}

/* ---- the connectivity state */

#define MAX_SEEN 256

typedef struct watcher {
  pthread_mutex_t mu;
  sluice_channel *ch;
  int seen[MAX_SEEN]; /* states reported with changed = 1, in order */
  int n_seen;
  int fired;    /* callbacks of the chained watches */
  int chaining; /* re-register after each change */
  int shutdown; /* SHUTDOWN seen */
} watcher;

static void on_state(sluice_connectivity_state s, int changed, void *ud) {
  watcher *w = ud;
  pthread_mutex_lock(&w->mu);
  w->fired++;
  if (changed && w->n_seen < MAX_SEEN)
    w->seen[w->n_seen++] = (int)s;
  if (s == SLUICE_CHANNEL_SHUTDOWN)
    w->shutdown++;
  int again = w->chaining && s != SLUICE_CHANNEL_SHUTDOWN;
  pthread_mutex_unlock(&w->mu);
  if (again)
    assert_int_equal(sluice_channel_watch_state(w->ch, s, 0, on_state, w), 0);
}

static int seen(watcher *w, int s) {
  pthread_mutex_lock(&w->mu);
  int found = 0;
  for (int i = 0; i < w->n_seen && !found; i++)
    found = w->seen[i] == s;
  pthread_mutex_unlock(&w->mu);
  return found;
}

/* Polls (trying to connect) until the channel is in state s. */
static int reach(sluice_channel *ch, sluice_connectivity_state s) {
  for (int i = 0; i < 2000; i++) {
    if (sluice_channel_get_state(ch, 1) == s)
      return 1;
    e2e_sleep_ms(10);
  }
  return 0;
}

static void test_state_api(void **state) {
  (void)state;
  int hold;
  int port = down_port(&hold);
  sluice_channel *ch = channel_ka(port, 0, 0, 0, 100);
  watcher w;
  memset(&w, 0, sizeof w);
  pthread_mutex_init(&w.mu, NULL);
  w.ch = ch;
  w.chaining = 1;

  assert_int_equal(sluice_channel_get_state(ch, 0), SLUICE_CHANNEL_IDLE);
  assert_int_equal(
      sluice_channel_watch_state(ch, SLUICE_CHANNEL_IDLE, 0, on_state, &w), 0);
  /* Nothing happens without a reason to connect. */
  e2e_sleep_ms(100);
  assert_int_equal(sluice_channel_get_state(ch, 0), SLUICE_CHANNEL_IDLE);
  pthread_mutex_lock(&w.mu);
  assert_int_equal(w.fired, 0);
  pthread_mutex_unlock(&w.mu);

  /* try_to_connect: CONNECTING, then (nothing listens) TRANSIENT_FAILURE. */
  (void)sluice_channel_get_state(ch, 1);
  assert_true(reach(ch, SLUICE_CHANNEL_TRANSIENT_FAILURE));
  for (int i = 0; i < 1000 && !seen(&w, SLUICE_CHANNEL_TRANSIENT_FAILURE); i++)
    e2e_sleep_ms(10);
  assert_true(seen(&w, SLUICE_CHANNEL_TRANSIENT_FAILURE));
  pthread_mutex_lock(&w.mu);
  assert_true(w.n_seen >= 2);
  assert_int_equal(w.seen[0], SLUICE_CHANNEL_CONNECTING);
  pthread_mutex_unlock(&w.mu);

  /* The server comes up: READY. */
  char addr[64];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
  close(hold);
  e2e_server *srv = e2e_server_start(addr, NULL);
  assert_true(reach(ch, SLUICE_CHANNEL_READY));
  for (int i = 0; i < 1000 && !seen(&w, SLUICE_CHANNEL_READY); i++)
    e2e_sleep_ms(10);
  assert_true(seen(&w, SLUICE_CHANNEL_READY));
  /* Every change is reported as one: no two equal states in a row. */
  pthread_mutex_lock(&w.mu);
  for (int i = 1; i < w.n_seen; i++)
    assert_int_not_equal(w.seen[i], w.seen[i - 1]);
  w.chaining = 0;
  pthread_mutex_unlock(&w.mu);

  /* A watch of the present state with a deadline: fires once, unchanged.
   */
  watcher d;
  memset(&d, 0, sizeof d);
  pthread_mutex_init(&d.mu, NULL);
  d.ch = ch;
  assert_int_equal(sluice_channel_watch_state(ch, SLUICE_CHANNEL_READY,
                                              sluice_now_ns() + 200000000ull,
                                              on_state, &d),
                   0);
  /* A watch of a state it is not in: fires at once (on the loop). */
  watcher x;
  memset(&x, 0, sizeof x);
  pthread_mutex_init(&x.mu, NULL);
  x.ch = ch;
  assert_int_equal(
      sluice_channel_watch_state(ch, SLUICE_CHANNEL_IDLE, 0, on_state, &x), 0);
  for (int i = 0; i < 1000; i++) {
    pthread_mutex_lock(&d.mu);
    int done = d.fired;
    pthread_mutex_unlock(&d.mu);
    if (done)
      break;
    e2e_sleep_ms(10);
  }
  pthread_mutex_lock(&d.mu);
  assert_int_equal(d.fired, 1);
  pthread_mutex_unlock(&d.mu);
  pthread_mutex_lock(&x.mu);
  assert_int_equal(x.fired, 1);
  assert_int_equal(x.n_seen, 1);
  pthread_mutex_unlock(&x.mu);

  /* A watch without a deadline hears SHUTDOWN when the channel goes, once,
   * before sluice_channel_del returns. */
  watcher z;
  memset(&z, 0, sizeof z);
  pthread_mutex_init(&z.mu, NULL);
  z.ch = ch;
  int fired_before = w.fired;
  assert_int_equal(
      sluice_channel_watch_state(ch, SLUICE_CHANNEL_READY, 0, on_state, &z), 0);
  sluice_channel_del(ch);
  assert_int_equal(z.fired, 1);
  assert_int_equal(z.shutdown, 1);
  /* The chained watch (still registered on READY) heard it too, once. */
  assert_true(w.fired >= fired_before);
  assert_int_equal(w.shutdown, 1);
  assert_int_equal(d.fired, 1);
  assert_int_equal(x.fired, 1);
  e2e_server_free(srv);
  pthread_mutex_destroy(&w.mu);
  pthread_mutex_destroy(&d.mu);
  pthread_mutex_destroy(&x.mu);
  pthread_mutex_destroy(&z.mu);
}

int main(void) {
  e2e_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_option_values),
      cmocka_unit_test(test_stopped_server),
      cmocka_unit_test(test_quiet_call_survives),
      cmocka_unit_test(test_too_many_pings_doubles),
      cmocka_unit_test(test_wait_for_ready),
      cmocka_unit_test(test_state_api),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
