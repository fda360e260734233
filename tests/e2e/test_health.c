/* e2e: health checking over real loopback servers.
 *
 * The server side: the library's grpc.health.v1.Health answers Check for
 * "", the registered services and names the application set, NOT_FOUND
 * for others, and bypasses the concurrency limits (unless told not to).
 * The client side (gRFC A17): two servers behind one channel with health
 * checking; one set NOT_SERVING gets no calls (rr and btc), both
 * NOT_SERVING makes calls fail fast with their own reason, SERVING again
 * brings a server back, and a server without the health service is used
 * normally.
 *
 * Nothing here asserts timing: every wait is for a state the client
 * reports (its Prometheus text), bounded by E2E_HANG_MS only to catch
 * hangs; calls are counted on the servers. */
#include "e2e_common.h"

#include <stdlib.h>
#include <string.h>

#include "grpc/health/v1/health.sluice.h"

typedef Grpc__Health__V1__HealthCheckRequest hc_req;
typedef Grpc__Health__V1__HealthCheckResponse hc_resp;

static sluice_server_opts *health_opts(int on) {
  sluice_server_opts *o = NULL;
  assert_int_equal(sluice_server_opts_new(&o), 0);
  assert_int_equal(sluice_server_opts_set_threads(o, 1), 0);
  assert_int_equal(sluice_server_opts_set_health(o, on), 0);
  return o;
}

/* Check(service) on ch: returns the call's code; *status the answer. */
static sluice_status_code check(sluice_channel *ch, const char *service,
                                int *status) {
  hc_req req = GRPC__HEALTH__V1__HEALTH_CHECK_REQUEST__INIT;
  req.service = (char *)service;
  hc_resp *resp = NULL;
  sluice_call_opts o;
  sluice_call_opts_init(&o);
  o.timeout_ms = E2E_HANG_MS;
  sluice_status st;
  sluice_status_init(&st);
  sluice_status_code code =
      grpc__health__v1__health__check__blocking(ch, &req, &resp, &o, &st);
  *status = -1;
  if (code == SLUICE_STATUS_OK) {
    *status = (int)resp->status;
    protobuf_c_message_free_unpacked(&resp->base, NULL);
  }
  sluice_status_clear(&st);
  return code;
}

static sluice_status_code echo(sluice_channel *ch, char *msg, size_t len) {
  E2e__EchoMsg req = E2E__ECHO_MSG__INIT;
  req.text = "health";
  E2e__EchoMsg *resp = NULL;
  sluice_call_opts o;
  sluice_call_opts_init(&o);
  o.timeout_ms = E2E_HANG_MS;
  sluice_status st;
  sluice_status_init(&st);
  sluice_status_code code = e2e__echo__echo__blocking(ch, &req, &resp, &o, &st);
  if (msg)
    snprintf(msg, len, "%s", st.message ? st.message : "");
  if (resp)
    protobuf_c_message_free_unpacked(&resp->base, NULL);
  sluice_status_clear(&st);
  return code;
}

/* Non-zero when the channel's Prometheus text contains needle. */
static int prom_has(sluice_channel *ch, const char *needle) {
  char *text = NULL;
  assert_int_equal(sluice_channel_stats_prometheus(ch, &text), 0);
  int has = strstr(text, needle) != NULL;
  free(text);
  return has;
}

/* The value of the not_serving drop counter. */
static unsigned long long not_serving_drops(sluice_channel *ch) {
  char *text = NULL;
  assert_int_equal(sluice_channel_stats_prometheus(ch, &text), 0);
  const char *p = strstr(text, "reason=\"not_serving\"} ");
  assert_non_null(p);
  unsigned long long n =
      strtoull(p + strlen("reason=\"not_serving\"} "), NULL, 10);
  free(text);
  return n;
}

/* Waits until the channel reports dest 127.0.0.1:port in health state h. */
static void wait_health(sluice_channel *ch, int port, const char *h) {
  char needle[160];
  snprintf(needle, sizeof needle,
           "sluice_client_health{dest=\"127.0.0.1:%d\",health=\"%s\"}", port,
           h);
  uint64_t end = e2e_now_ms() + E2E_HANG_MS;
  while (!prom_has(ch, needle)) {
    if (e2e_now_ms() > end)
      fail_msg("the channel never reported %s", needle);
    e2e_sleep_ms(5);
  }
}

/* ---- the server */

static void test_check(void **state) {
  (void)state;
  sluice_server_opts *o = health_opts(1);
  e2e_server *s = e2e_server_start(NULL, o);
  sluice_server_opts_del(o);
  sluice_channel *ch = e2e_channel(s, NULL);
  int st;
  assert_int_equal(check(ch, "", &st), SLUICE_STATUS_OK);
  assert_int_equal(st, SLUICE_SERVING);
  assert_int_equal(check(ch, "e2e.Echo", &st), SLUICE_STATUS_OK);
  assert_int_equal(st, SLUICE_SERVING);
  assert_int_equal(check(ch, "nope", &st), SLUICE_STATUS_NOT_FOUND);

  assert_int_equal(
      sluice_server_set_serving_status(s->srv, "e2e.Echo", SLUICE_NOT_SERVING),
      0);
  assert_int_equal(check(ch, "e2e.Echo", &st), SLUICE_STATUS_OK);
  assert_int_equal(st, SLUICE_NOT_SERVING);
  assert_int_equal(check(ch, "", &st), SLUICE_STATUS_OK);
  assert_int_equal(st, SLUICE_SERVING);
  assert_int_equal(
      sluice_server_set_serving_status(s->srv, "nope", SLUICE_SERVING), 0);
  assert_int_equal(check(ch, "nope", &st), SLUICE_STATUS_OK);
  assert_int_equal(st, SLUICE_SERVING);

  assert_int_equal(sluice_server_set_serving_status(s->srv, NULL, 1),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(
      sluice_server_set_serving_status(s->srv, "", SLUICE_SERVICE_UNKNOWN),
      SLUICE_ERR_INVALID_ARG);
  assert_int_equal(check(ch, "e2e.Echo", &st), SLUICE_STATUS_OK);
  assert_int_equal(st, SLUICE_NOT_SERVING); /* unchanged by the refusal */
  sluice_channel_del(ch);
  e2e_server_free(s);

  /* Off: no health service; the setter says so. */
  e2e_server *off = e2e_server_start(NULL, NULL);
  assert_int_equal(
      sluice_server_set_serving_status(off->srv, "", SLUICE_NOT_SERVING),
      SLUICE_ERR_STATE);
  ch = e2e_channel(off, NULL);
  assert_int_equal(check(ch, "", &st), SLUICE_STATUS_UNIMPLEMENTED);
  sluice_channel_del(ch);
  e2e_server_free(off);
}

/* A server at its concurrency limit (1, no queue, the slot held) still
 * answers Check; with the bypass off Check is refused like any call. */
static void bypass_case(int bypass) {
  sluice_server_opts *o = health_opts(1);
  assert_int_equal(sluice_server_opts_set_max_concurrent_calls(o, 1), 0);
  assert_int_equal(sluice_server_opts_set_max_queue(o, 0), 0);
  assert_int_equal(sluice_server_opts_set_health_bypass(o, bypass), 0);
  e2e_server *s = e2e_server_start(NULL, o);
  sluice_server_opts_del(o);
  sluice_channel *ch = e2e_channel(s, NULL);

  e2e_wait w;
  e2e_wait_init(&w);
  E2e__EchoMsg req = E2E__ECHO_MSG__INIT;
  req.text = "held";
  req.hold = 1;
  sluice_call_opts co;
  sluice_call_opts_init(&co);
  co.timeout_ms = E2E_HANG_MS;
  assert_int_equal(e2e__echo__echo__async(ch, &req, &co, e2e_wait_cb, &w), 0);
  assert_int_equal(e2e_server_wait_held(s, 1, E2E_HANG_MS), 0);

  char msg[256];
  assert_int_equal(echo(ch, msg, sizeof msg), SLUICE_STATUS_RESOURCE_EXHAUSTED);
  int st;
  sluice_status_code code = check(ch, "", &st);
  if (bypass) {
    assert_int_equal(code, SLUICE_STATUS_OK);
    assert_int_equal(st, SLUICE_SERVING);
  } else {
    assert_int_equal(code, SLUICE_STATUS_RESOURCE_EXHAUSTED);
  }
  assert_int_equal(e2e_server_release(s, SLUICE_STATUS_OK), 1);
  assert_int_equal(e2e_wait_for(&w, 1, E2E_HANG_MS), 1);
  assert_int_equal(w.code, SLUICE_STATUS_OK);
  e2e_wait_destroy(&w);
  sluice_channel_del(ch);
  e2e_server_free(s);
}

static void test_bypass(void **state) {
  (void)state;
  bypass_case(1);
  bypass_case(0);
}

/* ---- the client (A17) */

static sluice_channel *two_server_channel(int pa, int pb, const char *lb) {
  char target[96];
  snprintf(target, sizeof target, "ipv4:127.0.0.1:%d,127.0.0.1:%d", pa, pb);
  sluice_channel_opts *o = NULL;
  assert_int_equal(sluice_channel_opts_new(&o), 0);
  assert_int_equal(sluice_channel_opts_set_lb(o, lb), 0);
  assert_int_equal(sluice_channel_opts_set_health_check(o, ""), 0);
  sluice_channel *ch = NULL;
  assert_int_equal(sluice_channel_new(&ch, target, o), 0);
  sluice_channel_opts_del(o);
  return ch;
}

/* n calls, each must succeed. */
static void calls_ok(sluice_channel *ch, int n, const char *what) {
  char msg[256];
  for (int i = 0; i < n; i++) {
    sluice_status_code code = echo(ch, msg, sizeof msg);
    if (code != SLUICE_STATUS_OK)
      fail_msg("%s: call %d: %s: %s", what, i, sluice_status_name(code), msg);
  }
}

static void routing(const char *lb) {
  sluice_server_opts *o = health_opts(1);
  e2e_server *a = e2e_server_start(NULL, o);
  e2e_server *b = e2e_server_start(NULL, o);
  sluice_server_opts_del(o);
  sluice_channel *ch = two_server_channel(a->port, b->port, lb);

  /* Both healthy: both are used (the first calls wait for the answers). */
  calls_ok(ch, 1, "warm-up");
  wait_health(ch, a->port, "SERVING");
  wait_health(ch, b->port, "SERVING");
  if (strcmp(lb, "rr") == 0) {
    int a0 = atomic_load(&a->calls), b0 = atomic_load(&b->calls);
    calls_ok(ch, 10, "both serving");
    assert_true(atomic_load(&a->calls) > a0);
    assert_true(atomic_load(&b->calls) > b0);
  }

  /* a NOT_SERVING: every call goes to b. */
  assert_int_equal(
      sluice_server_set_serving_status(a->srv, "", SLUICE_NOT_SERVING), 0);
  wait_health(ch, a->port, "NOT_SERVING");
  int a1 = atomic_load(&a->calls), b1 = atomic_load(&b->calls);
  calls_ok(ch, 20, "a not serving");
  assert_int_equal(atomic_load(&a->calls), a1);
  assert_int_equal(atomic_load(&b->calls), b1 + 20);

  /* Both NOT_SERVING: calls fail fast, with their own reason, counted. */
  assert_int_equal(
      sluice_server_set_serving_status(b->srv, "", SLUICE_NOT_SERVING), 0);
  wait_health(ch, b->port, "NOT_SERVING");
  unsigned long long d0 = not_serving_drops(ch);
  char msg[256];
  for (int i = 0; i < 3; i++) {
    assert_int_equal(echo(ch, msg, sizeof msg), SLUICE_STATUS_UNAVAILABLE);
    if (!strstr(msg, "every destination reports NOT_SERVING"))
      fail_msg("message: %s", msg);
  }
  assert_int_equal(not_serving_drops(ch), d0 + 3);
  assert_int_equal(atomic_load(&a->calls), a1);
  assert_int_equal(atomic_load(&b->calls), b1 + 20);

  /* a SERVING again: picked again (the only one). */
  assert_int_equal(sluice_server_set_serving_status(a->srv, "", SLUICE_SERVING),
                   0);
  wait_health(ch, a->port, "SERVING");
  calls_ok(ch, 10, "a serving again");
  assert_int_equal(atomic_load(&a->calls), a1 + 10);
  assert_int_equal(atomic_load(&b->calls), b1 + 20);

  sluice_channel_del(ch);
  e2e_server_free(a);
  e2e_server_free(b);
}

static void test_routing_rr(void **state) {
  (void)state;
  routing("rr");
}

static void test_routing_btc(void **state) {
  (void)state;
  routing("btc");
}

/* A server without the health service answers Watch UNIMPLEMENTED: it is
 * used as healthy, beside one that reports SERVING. */
static void test_unimplemented(void **state) {
  (void)state;
  sluice_server_opts *o = health_opts(1);
  e2e_server *a = e2e_server_start(NULL, o);
  sluice_server_opts_del(o);
  e2e_server *b = e2e_server_start(NULL, NULL); /* no health service */
  sluice_channel *ch = two_server_channel(a->port, b->port, "rr");
  calls_ok(ch, 1, "warm-up");
  wait_health(ch, a->port, "SERVING");
  wait_health(ch, b->port, "UNIMPLEMENTED");
  int b0 = atomic_load(&b->calls);
  calls_ok(ch, 10, "with b unimplemented");
  assert_true(atomic_load(&b->calls) > b0);
  /* a NOT_SERVING: everything on b. */
  assert_int_equal(
      sluice_server_set_serving_status(a->srv, "", SLUICE_NOT_SERVING), 0);
  wait_health(ch, a->port, "NOT_SERVING");
  int a1 = atomic_load(&a->calls), b1 = atomic_load(&b->calls);
  calls_ok(ch, 10, "a not serving");
  assert_int_equal(atomic_load(&a->calls), a1);
  assert_int_equal(atomic_load(&b->calls), b1 + 10);
  sluice_channel_del(ch);
  e2e_server_free(a);
  e2e_server_free(b);
}

/* The service config's healthCheckConfig turns it on too; a named service
 * the server does not know is SERVICE_UNKNOWN: not picked. */
static void test_service_config(void **state) {
  (void)state;
  sluice_server_opts *o = health_opts(1);
  e2e_server *a = e2e_server_start(NULL, o);
  sluice_server_opts_del(o);
  char target[64];
  snprintf(target, sizeof target, "ipv4:127.0.0.1:%d", a->port);
  sluice_channel_opts *co = NULL;
  assert_int_equal(sluice_channel_opts_new(&co), 0);
  assert_int_equal(
      sluice_channel_opts_set_service_config(
          co, "{\"healthCheckConfig\":{\"serviceName\":\"e2e.Later\"}}"),
      0);
  sluice_channel *ch = NULL;
  assert_int_equal(sluice_channel_new(&ch, target, co), 0);
  sluice_channel_opts_del(co);
  char msg[256];
  /* The first call waits for the answer, then fails fast. */
  assert_int_equal(echo(ch, msg, sizeof msg), SLUICE_STATUS_UNAVAILABLE);
  wait_health(ch, a->port, "SERVICE_UNKNOWN");
  assert_int_equal(atomic_load(&a->calls), 0);
  assert_int_equal(
      sluice_server_set_serving_status(a->srv, "e2e.Later", SLUICE_SERVING), 0);
  wait_health(ch, a->port, "SERVING");
  calls_ok(ch, 3, "e2e.Later serving");
  assert_int_equal(atomic_load(&a->calls), 3);
  sluice_channel_del(ch);
  e2e_server_free(a);
}

int main(void) {
  e2e_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_check),
      cmocka_unit_test(test_bypass),
      cmocka_unit_test(test_routing_rr),
      cmocka_unit_test(test_routing_btc),
      cmocka_unit_test(test_unimplemented),
      cmocka_unit_test(test_service_config),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
