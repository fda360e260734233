/* Back-pressure through a chain (docs/flow-control.md): a chain of sluice
 * servers over loopback,
 *
 *   edge channel --> front (forwards each call with
 *                    sluice_call_opts_set_parent) --> deep
 *
 * where deep's handler reports how hard its own downstream pushes back
 * (sluice_server_call_report_downstream) while both servers say they are
 * idle themselves (utilization 0.02). The figure must travel in deep's
 * load report to front's channel, be passed up by front (its channel is
 * inside the chain: it does not act on it), and reach the edge, which
 * reads it as front's utilization: T-high in btc's terms, so the edge is
 * where the chain sheds. Below the threshold nothing moves anywhere. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "e2e_common.h"

typedef struct deep_state {
  double report; /* what deep's handler reports as its downstream */
  atomic_int bad_rc;
} deep_state;

static void on_deep(sluice_server_call *call, const E2e__EchoMsg *req,
                    void *ud) {
  deep_state *d = ud;
  if (sluice_server_call_report_downstream(call, d->report) != 0 ||
      sluice_server_call_report_downstream(call, NAN) != SLUICE_ERR_INVALID_ARG)
    atomic_fetch_add(&d->bad_rc, 1);
  E2e__EchoMsg resp = E2E__ECHO_MSG__INIT;
  resp.text = req->text;
  sluice_server_call_reply(call, &resp.base);
}

static void on_front(sluice_server_call *call, const E2e__EchoMsg *req,
                     void *ud) {
  sluice_call_opts o;
  sluice_call_opts_init(&o);
  sluice_call_opts_set_parent(&o, call);
  assert_ptr_equal(o.parent, call);
  e2e_forward(ud, call, req);
}

static sluice_server *serve(const E2e__Echo_SluiceHandlers *h, void *ud,
                            int *port) {
  sluice_server *s = NULL;
  assert_int_equal(sluice_server_new(&s, NULL), 0);
  assert_int_equal(sluice_server_set_utilization(s, 0.02), 0);
  assert_int_equal(e2e__echo__sluice_register(s, h, ud), 0);
  assert_int_equal(sluice_server_listen(s, "127.0.0.1:0", port), 0);
  assert_int_equal(sluice_server_start(s), 0);
  return s;
}

/* The balancer state of ch's one destination, into out. */
static void dest_state(sluice_channel *ch, char *out, size_t len) {
  sluice_channel_stats s;
  assert_int_equal(sluice_channel_get_stats(ch, &s), 0);
  assert_int_equal(s.n_dests, 1);
  snprintf(out, len, "%s", s.dests[0].lb_state);
  sluice_channel_stats_clear(&s);
}

/* Runs calls edge -> front -> deep for 2.5 s (btc classifies a
 * destination once per 100 ms window) with deep reporting `report`; the
 * states of the edge's and of front's destination go to edge_st and
 * inner_st. */
static void run_chain(double report, char *edge_st, char *inner_st,
                      size_t len) {
  deep_state d = {.report = report};
  atomic_init(&d.bad_rc, 0);
  int deep_port = 0, front_port = 0;
  E2e__Echo_SluiceHandlers hd = {.echo = on_deep};
  sluice_server *deep = serve(&hd, &d, &deep_port);
  sluice_channel *down = e2e_channel_port(deep_port, NULL);
  E2e__Echo_SluiceHandlers hf = {.echo = on_front};
  sluice_server *front = serve(&hf, down, &front_port);
  sluice_channel *edge = e2e_channel_port(front_port, NULL);

  E2e__EchoMsg req = E2E__ECHO_MSG__INIT;
  req.text = "chain";
  uint64_t until = e2e_now_ms() + 2500;
  int n = 0;
  while (e2e_now_ms() < until || n < 40) {
    E2e__EchoMsg *resp = NULL;
    sluice_call_opts o;
    sluice_call_opts_init(&o);
    o.timeout_ms = E2E_HANG_MS;
    assert_int_equal(e2e__echo__echo__blocking(edge, &req, &resp, &o, NULL),
                     SLUICE_STATUS_OK);
    protobuf_c_message_free_unpacked(&resp->base, NULL);
    n++;
    e2e_sleep_ms(10);
  }
  dest_state(edge, edge_st, len);
  dest_state(down, inner_st, len);
  print_message("deep reports %.2f: %d calls; edge's destination %s, "
                "front's %s\n",
                report, n, edge_st, inner_st);
  assert_int_equal(atomic_load(&d.bad_rc), 0);
  sluice_channel_del(edge);
  sluice_server_shutdown(front, 0);
  sluice_server_del(front);
  sluice_channel_del(down);
  sluice_server_shutdown(deep, 0);
  sluice_server_del(deep);
}

/* Deep's downstream is at its limit: the edge reads it through front,
 * front's own channel does not act on it. */
static void test_pressure_reaches_the_edge(void **state) {
  (void)state;
  char edge_st[64], inner_st[64];
  run_chain(1.0, edge_st, inner_st, sizeof edge_st);
  assert_true(strncmp(edge_st, "T-high", 6) == 0);
  assert_true(strncmp(inner_st, "T-low", 5) == 0);
}

/* A moderate figure (0.3) leaves both in T-low: the edge acts only on a
 * bottleneck that is really pushing back. */
static void test_mild_pressure_changes_nothing(void **state) {
  (void)state;
  char edge_st[64], inner_st[64];
  run_chain(0.3, edge_st, inner_st, sizeof edge_st);
  assert_true(strncmp(edge_st, "T-low", 5) == 0);
  assert_true(strncmp(inner_st, "T-low", 5) == 0);
}

static void test_bad_args(void **state) {
  (void)state;
  assert_int_equal(sluice_server_call_report_downstream(NULL, 0.5),
                   SLUICE_ERR_INVALID_ARG);
  sluice_call_opts_set_parent(NULL, NULL);
  sluice_call_opts o;
  sluice_call_opts_init(&o);
  sluice_call_opts_set_parent(&o, NULL);
  assert_null(o.parent);
  assert_int_equal(o.deadline_ns, 0);
}

int main(void) {
  e2e_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pressure_reaches_the_edge),
      cmocka_unit_test(test_mild_pressure_changes_nothing),
      cmocka_unit_test(test_bad_args),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
