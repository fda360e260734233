/* e2e: target forms — unix: sockets, dns names and ipv4: address lists
 * spreading calls over several servers. */
#include "e2e_common.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static sluice_status_code echo_blocking(sluice_channel *ch, const char *text,
                                        char *msg, size_t msg_size) {
  E2e__EchoMsg req = E2E__ECHO_MSG__INIT;
  req.text = (char *)text;
  E2e__EchoMsg *resp = NULL;
  sluice_status st;
  sluice_status_init(&st);
  sluice_call_opts opts;
  sluice_call_opts_init(&opts);
  opts.timeout_ms = E2E_HANG_MS;
  sluice_status_code code =
      e2e__echo__echo__blocking(ch, &req, &resp, &opts, &st);
  if (msg != NULL)
    snprintf(msg, msg_size, "%s", st.message ? st.message : "(null)");
  if (code == SLUICE_STATUS_OK) {
    assert_non_null(resp);
    assert_string_equal(resp->text, text);
    protobuf_c_message_free_unpacked(&resp->base, NULL);
  }
  sluice_status_clear(&st);
  return code;
}

static void test_unix_socket(void **state) {
  (void)state;
  char path[128], address[160];
  snprintf(path, sizeof path, "/tmp/sluice-e2e-%ld.sock", (long)getpid());
  unlink(path);
  snprintf(address, sizeof address, "unix:%s", path);
  e2e_server *s = e2e_server_start(address, NULL);
  assert_int_equal(s->port, 0);

  sluice_channel *ch = NULL;
  assert_int_equal(sluice_channel_new(&ch, address, NULL), 0);
  char msg[256];
  for (int i = 0; i < 3; i++) {
    sluice_status_code code = echo_blocking(ch, "over unix", msg, sizeof msg);
    if (code != SLUICE_STATUS_OK)
      fail_msg("%s: %s", sluice_status_name(code), msg);
  }
  pthread_mutex_lock(&s->mu);
  char peer[128];
  snprintf(peer, sizeof peer, "%s", s->last_peer);
  pthread_mutex_unlock(&s->mu);
  if (strncmp(peer, "unix:", 5) != 0)
    fail_msg("peer '%s'", peer);
  assert_int_equal(atomic_load(&s->calls), 3);
  sluice_channel_del(ch);
  e2e_server_free(s);
  unlink(path);
}

static void test_dns_localhost(void **state) {
  (void)state;
  e2e_server *s = e2e_server_start(NULL, NULL);
  char target[64], msg[256];
  const char *forms[] = {"localhost:%d", "dns:localhost:%d", "127.0.0.1:%d"};
  for (size_t f = 0; f < sizeof forms / sizeof *forms; f++) {
    snprintf(target, sizeof target, forms[f], s->port);
    sluice_channel *ch = NULL;
    assert_int_equal(sluice_channel_new(&ch, target, NULL), 0);
    for (int i = 0; i < 3; i++) {
      sluice_status_code code = echo_blocking(ch, "by name", msg, sizeof msg);
      if (code != SLUICE_STATUS_OK)
        fail_msg("%s: %s: %s", target, sluice_status_name(code), msg);
    }
    sluice_channel_del(ch);
  }
  e2e_server_free(s);
}

static void test_ipv4_list_spreads(void **state) {
  (void)state;
  e2e_server *a = e2e_server_start(NULL, NULL);
  e2e_server *b = e2e_server_start(NULL, NULL);
  char target[96], msg[256];
  snprintf(target, sizeof target, "ipv4:127.0.0.1:%d,127.0.0.1:%d", a->port,
           b->port);
  sluice_channel *ch = NULL;
  assert_int_equal(sluice_channel_new(&ch, target, NULL), 0);
  for (int i = 0; i < 20; i++) {
    sluice_status_code code = echo_blocking(ch, "spread", msg, sizeof msg);
    if (code != SLUICE_STATUS_OK)
      fail_msg("call %d: %s: %s", i, sluice_status_name(code), msg);
  }
  int na = atomic_load(&a->calls), nb = atomic_load(&b->calls);
  assert_int_equal(na + nb, 20);
  if (na == 0 || nb == 0)
    fail_msg("calls not spread: %d on the first server, %d on the second", na,
             nb);

  /* One server gone: calls keep working on the other. */
  e2e_server_free(b);
  int ok = 0;
  for (int i = 0; i < 10; i++)
    ok += echo_blocking(ch, "spread", msg, sizeof msg) == SLUICE_STATUS_OK;
  /* A call may catch the dying connection; most must succeed. */
  assert_true(ok >= 8);
  sluice_channel_del(ch);
  e2e_server_free(a);
}

int main(void) {
  e2e_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_unix_socket),
      cmocka_unit_test(test_dns_localhost),
      cmocka_unit_test(test_ipv4_list_spreads),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
