/* e2e: calls that fail — deadlines, unknown methods, size limits, refused
 * connections, bad targets and API misuse. */
#include "e2e_common.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int setup(void **state) {
  *state = e2e_server_start(NULL, NULL);
  return 0;
}

static int teardown(void **state) {
  e2e_server_free(*state);
  return 0;
}

/* One blocking Echo call; returns the code, message copied to msg. */
static sluice_status_code call_echo(sluice_channel *ch,
                                    const sluice_method_desc *m,
                                    const E2e__EchoMsg *req,
                                    const sluice_call_opts *opts, char *msg,
                                    size_t msg_size) {
  ProtobufCMessage *resp = NULL;
  sluice_status st;
  sluice_status_init(&st);
  sluice_status_code code = sluice_unary_call_blocking(
      ch, m ? m : &e2e__echo__sluice_methods[0], &req->base, &resp, opts, &st);
  assert_int_equal(st.code, code);
  assert_non_null(st.message);
  if (msg != NULL)
    snprintf(msg, msg_size, "%s", st.message);
  if (code == SLUICE_STATUS_OK)
    assert_non_null(resp);
  else
    assert_null(resp);
  if (resp != NULL)
    protobuf_c_message_free_unpacked(resp, NULL);
  sluice_status_clear(&st);
  return code;
}

static void test_deadline_exceeded(void **state) {
  e2e_server *s = *state;
  sluice_channel *ch = e2e_channel(s, NULL);
  E2e__EchoMsg req = E2E__ECHO_MSG__INIT;
  req.text = "slow";
  req.delay_ms = 1500;
  sluice_call_opts opts;
  sluice_call_opts_init(&opts);
  opts.timeout_ms = 200;

  uint64_t t0 = e2e_now_ms();
  char msg[256];
  assert_int_equal(call_echo(ch, NULL, &req, &opts, msg, sizeof msg),
                   SLUICE_STATUS_DEADLINE_EXCEEDED);
  uint64_t took = e2e_now_ms() - t0;
  /* Not before the deadline; and not as late as the reply (generous). */
  assert_true(took >= 190);
  assert_true(took < E2E_HANG_MS);
  assert_int_equal(atomic_load(&s->calls), 1);

  /* The late reply comes from another thread and must be harmless: finish
   * returns 0, and the call was seen as cancelled by then. */
  assert_int_equal(e2e_server_wait_late(s, 1, E2E_HANG_MS), 0);
  pthread_mutex_lock(&s->mu);
  int bad_rc = s->late_bad_rc, cancelled = s->late_cancelled;
  pthread_mutex_unlock(&s->mu);
  assert_int_equal(bad_rc, 0);
  assert_int_equal(cancelled, 1);

  /* The channel still works afterwards. */
  req.delay_ms = 0;
  assert_int_equal(call_echo(ch, NULL, &req, &opts, NULL, 0), SLUICE_STATUS_OK);

  /* The async path too, with a deadline in ns. */
  e2e_wait w;
  e2e_wait_init(&w);
  req.delay_ms = 1000;
  sluice_call_opts_init(&opts);
  opts.deadline_ns = sluice_now_ns() + 150ull * 1000000ull;
  assert_int_equal(e2e__echo__echo__async(ch, &req, &opts, e2e_wait_cb, &w), 0);
  assert_int_equal(e2e_wait_for(&w, 1, E2E_HANG_MS), 1);
  assert_int_equal(w.code, SLUICE_STATUS_DEADLINE_EXCEEDED);
  assert_true(w.resp_null);
  assert_int_equal(e2e_server_wait_late(s, 2, E2E_HANG_MS), 0);
  e2e_sleep_ms(50);
  assert_int_equal(e2e_wait_for(&w, 2, 0), 1); /* exactly once */
  pthread_mutex_lock(&s->mu);
  bad_rc = s->late_bad_rc;
  pthread_mutex_unlock(&s->mu);
  assert_int_equal(bad_rc, 0);
  e2e_wait_destroy(&w);
  sluice_channel_del(ch);
}

static void test_deadline_already_expired(void **state) {
  e2e_server *s = *state;
  sluice_channel *ch = e2e_channel(s, NULL);
  E2e__EchoMsg req = E2E__ECHO_MSG__INIT;
  req.text = "late";

  /* Connect first, so that a wrongly sent call would reach the server. */
  assert_int_equal(call_echo(ch, NULL, &req, NULL, NULL, 0), SLUICE_STATUS_OK);
  int before = atomic_load(&s->calls);

  sluice_call_opts opts;
  sluice_call_opts_init(&opts);
  opts.deadline_ns = sluice_now_ns() - 1;
  assert_int_equal(call_echo(ch, NULL, &req, &opts, NULL, 0),
                   SLUICE_STATUS_DEADLINE_EXCEEDED);
  opts.deadline_ns = 1; /* long past */
  assert_int_equal(call_echo(ch, NULL, &req, &opts, NULL, 0),
                   SLUICE_STATUS_DEADLINE_EXCEEDED);

  e2e_wait w;
  e2e_wait_init(&w);
  opts.deadline_ns = sluice_now_ns() - 1000000;
  assert_int_equal(e2e__echo__echo__async(ch, &req, &opts, e2e_wait_cb, &w), 0);
  assert_int_equal(e2e_wait_for(&w, 1, E2E_HANG_MS), 1);
  assert_int_equal(w.code, SLUICE_STATUS_DEADLINE_EXCEEDED);
  e2e_wait_destroy(&w);

  e2e_sleep_ms(100);
  assert_int_equal(atomic_load(&s->calls), before);

  /* A fresh channel (never connected) behaves the same. */
  sluice_channel *ch2 = e2e_channel(s, NULL);
  opts.deadline_ns = sluice_now_ns() - 1;
  assert_int_equal(call_echo(ch2, NULL, &req, &opts, NULL, 0),
                   SLUICE_STATUS_DEADLINE_EXCEEDED);
  sluice_channel_del(ch2);
  e2e_sleep_ms(50);
  assert_int_equal(atomic_load(&s->calls), before);
  sluice_channel_del(ch);
}

static void test_unknown_method(void **state) {
  static const sluice_method_desc nope_method = {
      .path = "/e2e.Echo/Nope",
      .name = "Nope",
      .request = &e2e__echo_msg__descriptor,
      .response = &e2e__echo_msg__descriptor,
      .kind = SLUICE_CALL_UNARY,
  };
  static const sluice_method_desc nope_service = {
      .path = "/e2e.Nope/Echo",
      .name = "Echo",
      .request = &e2e__echo_msg__descriptor,
      .response = &e2e__echo_msg__descriptor,
      .kind = SLUICE_CALL_UNARY,
  };
  e2e_server *s = *state;
  sluice_channel *ch = e2e_channel(s, NULL);
  E2e__EchoMsg req = E2E__ECHO_MSG__INIT;
  req.text = "x";
  assert_int_equal(call_echo(ch, &nope_method, &req, NULL, NULL, 0),
                   SLUICE_STATUS_UNIMPLEMENTED);
  assert_int_equal(call_echo(ch, &nope_service, &req, NULL, NULL, 0),
                   SLUICE_STATUS_UNIMPLEMENTED);
  assert_int_equal(atomic_load(&s->calls), 0);
  /* The connection survives. */
  assert_int_equal(call_echo(ch, NULL, &req, NULL, NULL, 0), SLUICE_STATUS_OK);
  sluice_channel_del(ch);
}

static void test_server_max_request_size(void **state) {
  (void)state;
  sluice_server_opts *so = NULL;
  assert_int_equal(sluice_server_opts_new(&so), 0);
  assert_int_equal(sluice_server_opts_set_max_request_size(so, 1024), 0);
  e2e_server *s = e2e_server_start(NULL, so);
  sluice_server_opts_del(so);
  sluice_channel *ch = e2e_channel(s, NULL);

  uint8_t data[4096];
  e2e_fill(data, sizeof data);
  E2e__EchoMsg req = E2E__ECHO_MSG__INIT;
  req.payload.data = data;
  req.payload.len = sizeof data;
  char msg[256];
  assert_int_equal(call_echo(ch, NULL, &req, NULL, msg, sizeof msg),
                   SLUICE_STATUS_RESOURCE_EXHAUSTED);
  assert_int_equal(atomic_load(&s->calls), 0);
  /* The server's text, formatted when the prefix arrived and kept until
   * the status went out, names both sizes. */
  assert_non_null(strstr(msg, "received message larger than max ("));
  assert_non_null(strstr(msg, "vs. 1024)"));
  /* A small one still passes on the same channel. */
  req.payload.len = 100;
  assert_int_equal(call_echo(ch, NULL, &req, NULL, NULL, 0), SLUICE_STATUS_OK);
  assert_int_equal(atomic_load(&s->calls), 1);
  sluice_channel_del(ch);
  e2e_server_free(s);
}

static void test_client_max_request_size(void **state) {
  e2e_server *s = *state;
  uint8_t data[4096];
  e2e_fill(data, sizeof data);
  E2e__EchoMsg req = E2E__ECHO_MSG__INIT;
  req.payload.data = data;
  req.payload.len = sizeof data;

  /* Per call. */
  sluice_channel *ch = e2e_channel(s, NULL);
  sluice_call_opts opts;
  sluice_call_opts_init(&opts);
  opts.max_request_size = 1024;
  assert_int_equal(call_echo(ch, NULL, &req, &opts, NULL, 0),
                   SLUICE_STATUS_RESOURCE_EXHAUSTED);
  e2e_wait w;
  e2e_wait_init(&w);
  assert_int_equal(e2e__echo__echo__async(ch, &req, &opts, e2e_wait_cb, &w), 0);
  assert_int_equal(e2e_wait_for(&w, 1, E2E_HANG_MS), 1);
  assert_int_equal(w.code, SLUICE_STATUS_RESOURCE_EXHAUSTED);
  /* The client's own text, kept from the caller's thread to the callback. */
  assert_string_equal(w.message,
                      "request message larger than max (4099 vs. 1024); "
                      "not sent");
  e2e_wait_destroy(&w);

  /* Options refused when the call starts: their text reaches it too. */
  sluice_retry_policy rp;
  sluice_hedging_policy hp;
  memset(&rp, 0, sizeof rp);
  memset(&hp, 0, sizeof hp);
  sluice_call_opts_init(&opts);
  opts.retry_policy = &rp;
  opts.hedging_policy = &hp;
  e2e_wait_init(&w);
  req.payload.len = 10;
  assert_int_equal(e2e__echo__echo__async(ch, &req, &opts, e2e_wait_cb, &w), 0);
  assert_int_equal(e2e_wait_for(&w, 1, E2E_HANG_MS), 1);
  assert_int_equal(w.code, SLUICE_STATUS_INVALID_ARGUMENT);
  assert_string_equal(w.message,
                      "call options: both retry_policy and hedging_policy set");
  e2e_wait_destroy(&w);
  req.payload.len = sizeof data;
  sluice_channel_del(ch);

  /* Per channel. */
  sluice_channel_opts *co = NULL;
  assert_int_equal(sluice_channel_opts_new(&co), 0);
  assert_int_equal(sluice_channel_opts_set_max_request_size(co, 1024), 0);
  ch = e2e_channel(s, co);
  sluice_channel_opts_del(co);
  assert_int_equal(call_echo(ch, NULL, &req, NULL, NULL, 0),
                   SLUICE_STATUS_RESOURCE_EXHAUSTED);
  e2e_sleep_ms(50);
  assert_int_equal(atomic_load(&s->calls), 0);
  req.payload.len = 100;
  assert_int_equal(call_echo(ch, NULL, &req, NULL, NULL, 0), SLUICE_STATUS_OK);
  assert_int_equal(atomic_load(&s->calls), 1);
  sluice_channel_del(ch);
}

static void test_client_max_response_size(void **state) {
  e2e_server *s = *state;
  sluice_channel_opts *co = NULL;
  assert_int_equal(sluice_channel_opts_new(&co), 0);
  assert_int_equal(sluice_channel_opts_set_max_response_size(co, 1024), 0);
  sluice_channel *ch = e2e_channel(s, co);
  sluice_channel_opts_del(co);
  E2e__EchoMsg req = E2E__ECHO_MSG__INIT;
  req.reply_size = 4096;
  assert_int_equal(call_echo(ch, NULL, &req, NULL, NULL, 0),
                   SLUICE_STATUS_RESOURCE_EXHAUSTED);
  req.reply_size = 500;
  assert_int_equal(call_echo(ch, NULL, &req, NULL, NULL, 0), SLUICE_STATUS_OK);
  /* Per call, smaller than the channel's: the smaller wins. */
  sluice_call_opts opts;
  sluice_call_opts_init(&opts);
  opts.max_response_size = 100;
  assert_int_equal(call_echo(ch, NULL, &req, &opts, NULL, 0),
                   SLUICE_STATUS_RESOURCE_EXHAUSTED);
  sluice_channel_del(ch);

  /* The 4 MiB default: a 5 MiB reply is refused. */
  ch = e2e_channel(s, NULL);
  req.reply_size = 5u << 20;
  assert_int_equal(call_echo(ch, NULL, &req, NULL, NULL, 0),
                   SLUICE_STATUS_RESOURCE_EXHAUSTED);
  sluice_channel_del(ch);
}

static void test_server_max_response_size(void **state) {
  (void)state;
  sluice_server_opts *so = NULL;
  assert_int_equal(sluice_server_opts_new(&so), 0);
  assert_int_equal(sluice_server_opts_set_max_response_size(so, 1024), 0);
  e2e_server *s = e2e_server_start(NULL, so);
  sluice_server_opts_del(so);
  sluice_channel *ch = e2e_channel(s, NULL);
  E2e__EchoMsg req = E2E__ECHO_MSG__INIT;
  req.reply_size = 4096;
  assert_int_equal(call_echo(ch, NULL, &req, NULL, NULL, 0),
                   SLUICE_STATUS_RESOURCE_EXHAUSTED);
  req.reply_size = 100;
  assert_int_equal(call_echo(ch, NULL, &req, NULL, NULL, 0), SLUICE_STATUS_OK);
  sluice_channel_del(ch);
  e2e_server_free(s);
}

/* A loopback port nobody listens on (bound, then closed). */
static int free_port(void) {
  int port;
  close(e2e_bind_loopback(&port, 0));
  return port;
}

static void test_connection_refused(void **state) {
  (void)state;
  int port = free_port();
  char target[96], addr[64];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
  snprintf(target, sizeof target, "ipv4:%s", addr);
  sluice_channel *ch = NULL;
  assert_int_equal(sluice_channel_new(&ch, target, NULL), 0);
  E2e__EchoMsg req = E2E__ECHO_MSG__INIT;
  char msg[512];
  uint64_t t0 = e2e_now_ms();
  assert_int_equal(call_echo(ch, NULL, &req, NULL, msg, sizeof msg),
                   SLUICE_STATUS_UNAVAILABLE);
  assert_true(e2e_now_ms() - t0 < E2E_HANG_MS);
  if (strstr(msg, addr) == NULL)
    fail_msg("message '%s' does not name %s", msg, addr);

  /* Async too; the callback fires once. */
  e2e_wait w;
  e2e_wait_init(&w);
  assert_int_equal(e2e__echo__echo__async(ch, &req, NULL, e2e_wait_cb, &w), 0);
  assert_int_equal(e2e_wait_for(&w, 1, E2E_HANG_MS), 1);
  assert_int_equal(w.code, SLUICE_STATUS_UNAVAILABLE);
  sluice_channel_del(ch);
  assert_int_equal(w.fired, 1);
  e2e_wait_destroy(&w);
}

static void test_bad_targets(void **state) {
  (void)state;
  static const char *bad[] = {"", "ipv4:notanip:1", "unix:"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    sluice_channel *ch = (sluice_channel *)&ch; /* must stay untouched */
    sluice_channel *const sentinel = ch;
    int rc = sluice_channel_new(&ch, bad[i], NULL);
    if (rc != SLUICE_ERR_BAD_TARGET)
      fail_msg("target '%s': got %d (%s)", bad[i], rc, sluice_strerror(rc));
    assert_ptr_equal(ch, sentinel);
  }
}

static void generic_cb(const sluice_status *st, const ProtobufCMessage *resp,
                       void *user_data) {
  e2e_wait_cb(st, (const E2e__EchoMsg *)resp, user_data);
}

static void test_invalid_args(void **state) {
  e2e_server *s = *state;
  sluice_channel *ch = NULL;
  assert_int_equal(sluice_channel_new(NULL, "127.0.0.1:1", NULL),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice_channel_new(&ch, NULL, NULL), SLUICE_ERR_INVALID_ARG);
  assert_null(ch);

  ch = e2e_channel(s, NULL);
  const sluice_method_desc *m = &e2e__echo__sluice_methods[0];
  E2e__EchoMsg req = E2E__ECHO_MSG__INIT;
  E2e__Other other = E2E__OTHER__INIT;
  e2e_wait w;
  e2e_wait_init(&w);
  assert_int_equal(sluice_unary_call(NULL, m, &req.base, NULL, generic_cb, &w),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice_unary_call(ch, NULL, &req.base, NULL, generic_cb, &w),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice_unary_call(ch, m, NULL, NULL, generic_cb, &w),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice_unary_call(ch, m, &req.base, NULL, NULL, &w),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice_unary_call(ch, m, &other.base, NULL, generic_cb, &w),
                   SLUICE_ERR_INVALID_ARG);
  /* Generated stubs pass NULL through. */
  assert_int_equal(e2e__echo__echo__async(NULL, &req, NULL, e2e_wait_cb, &w),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(e2e__echo__echo__async(ch, NULL, NULL, e2e_wait_cb, &w),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(e2e__echo__echo__async(ch, &req, NULL, NULL, &w),
                   SLUICE_ERR_INVALID_ARG);

  /* Blocking misuse: local INVALID_ARGUMENT statuses. */
  ProtobufCMessage *resp = NULL;
  sluice_status st;
  sluice_status_init(&st);
  assert_int_equal(
      sluice_unary_call_blocking(NULL, m, &req.base, &resp, NULL, &st),
      SLUICE_STATUS_INVALID_ARGUMENT);
  assert_int_equal(st.code, SLUICE_STATUS_INVALID_ARGUMENT);
  assert_null(resp);
  sluice_status_clear(&st);
  assert_int_equal(
      sluice_unary_call_blocking(ch, m, &other.base, &resp, NULL, &st),
      SLUICE_STATUS_INVALID_ARGUMENT);
  assert_null(resp);
  sluice_status_clear(&st);
  assert_int_equal(
      sluice_unary_call_blocking(ch, NULL, &req.base, &resp, NULL, NULL),
      SLUICE_STATUS_INVALID_ARGUMENT);

  /* Nothing ran, no callback fired. */
  e2e_sleep_ms(50);
  assert_int_equal(e2e_wait_for(&w, 1, 0), 0);
  assert_int_equal(atomic_load(&s->calls), 0);
  e2e_wait_destroy(&w);
  sluice_channel_del(ch);

  /* Server side. */
  assert_int_equal(sluice_server_new(NULL, NULL), SLUICE_ERR_INVALID_ARG);
  sluice_server *srv = NULL;
  assert_int_equal(sluice_server_new(&srv, NULL), 0);
  assert_int_equal(sluice_server_listen(srv, NULL, NULL),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice_server_listen(NULL, "127.0.0.1:0", NULL),
                   SLUICE_ERR_INVALID_ARG);
  int port = -1;
  /* Documented as "cannot be parsed or bound". */
  assert_int_equal(sluice_server_listen(srv, "nohost", &port),
                   SLUICE_ERR_BAD_ADDRESS);
  assert_int_equal(sluice_server_add_service(NULL, &e2e__echo__sluice_service,
                                             NULL, NULL, 0, NULL),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(e2e__echo__sluice_register(srv, NULL, NULL),
                   SLUICE_ERR_INVALID_ARG);
  /* Nothing to listen on: start refuses. */
  assert_int_equal(sluice_server_start(srv), SLUICE_ERR_STATE);
  assert_int_equal(sluice_server_shutdown(NULL, 0), SLUICE_ERR_INVALID_ARG);
  sluice_server_del(srv);
  sluice_server_del(NULL);
  sluice_channel_del(NULL);
  assert_int_equal(
      sluice_server_call_finish(NULL, SLUICE_STATUS_OK, NULL, NULL),
      SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice_server_call_reply(NULL, &req.base),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice_channel_opts_new(NULL), SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice_server_opts_new(NULL), SLUICE_ERR_INVALID_ARG);
}

int main(void) {
  e2e_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_deadline_exceeded, setup, teardown),
      cmocka_unit_test_setup_teardown(test_deadline_already_expired, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_unknown_method, setup, teardown),
      cmocka_unit_test(test_server_max_request_size),
      cmocka_unit_test_setup_teardown(test_client_max_request_size, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_client_max_response_size, setup,
                                      teardown),
      cmocka_unit_test(test_server_max_response_size),
      cmocka_unit_test(test_connection_refused),
      cmocka_unit_test(test_bad_targets),
      cmocka_unit_test_setup_teardown(test_invalid_args, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
