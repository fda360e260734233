/* transport/stream.c's turn-taking: a stream whose ops set a quantum gives
 * up its turn (its data provider says DEFERRED and the connection lists it
 * for the flush to resume) once it has sent a quantum, with data still
 * queued; below the quantum, or with none, it goes on. The scheduling it
 * buys is in e2e.streaming (test_request_streams_take_turns). */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "transport/conn.h"
#include "transport/sendq.h"
#include "transport/stream.h"

static int no_deliver(void *owner, int compressed, const uint8_t *msg,
                      size_t len) {
  (void)owner;
  (void)compressed;
  (void)msg;
  (void)len;
  return 0;
}

static const sluice__stream_ops turns = {NULL, NULL, SLUICE__STREAM_QUANTUM};
static const sluice__stream_ops no_turns = {NULL, NULL, 0};

typedef struct {
  sluice__conn conn;
  sluice__sendq q;
  sluice__stream s;
} rig;

static void rig_init(rig *r, const sluice__stream_ops *ops, int32_t id) {
  assert_int_equal(sluice__conn_init(&r->conn, NULL, 0, NULL), 0);
  assert_int_equal(sluice__sendq_init(&r->q, 0), 0);
  size_t len = 4 * SLUICE__STREAM_QUANTUM;
  uint8_t *data = malloc(len);
  assert_non_null(data);
  memset(data, 7, len);
  int deferred = 0;
  assert_int_equal(sluice__sendq_push(&r->q, data, len, 0, &deferred), 0);
  sluice__stream_init(&r->s, &r->q, 1u << 20, no_deliver, NULL, ops);
  sluice__stream_attach(&r->s, &r->conn, id);
}

static void rig_free(rig *r) {
  sluice__stream_detach(&r->s);
  sluice__sendq_destroy(&r->q);
  free(r->conn.yielded);
}

static void gives_up_its_turn_after_a_quantum(void **state) {
  (void)state;
  rig r;
  rig_init(&r, &turns, 5);
  uint32_t flags = 0;
  /* Below the quantum: a frame's worth, sent without a copy. */
  r.s.run = SLUICE__STREAM_QUANTUM - 1;
  assert_int_equal(sluice__stream_read(&r.s, 16384, &flags), 16384);
  assert_true(flags & NGHTTP2_DATA_FLAG_NO_COPY);
  assert_int_equal(r.conn.n_yielded, 0);
  /* A quantum sent: deferred with data queued, listed once for resuming,
   * and the next turn starts from zero. */
  r.s.run = SLUICE__STREAM_QUANTUM;
  flags = 0;
  assert_int_equal(sluice__stream_read(&r.s, 16384, &flags),
                   NGHTTP2_ERR_DEFERRED);
  assert_int_equal(r.conn.n_yielded, 1);
  assert_int_equal(r.conn.yielded[0], 5);
  assert_int_equal(r.s.run, 0);
  assert_int_equal(sluice__sendq_queued(&r.q), 4 * SLUICE__STREAM_QUANTUM);
  /* Resumed, it reads again. */
  flags = 0;
  assert_int_equal(sluice__stream_read(&r.s, 16384, &flags), 16384);
  rig_free(&r);
}

static void without_a_quantum_it_keeps_its_turn(void **state) {
  (void)state;
  rig r;
  rig_init(&r, &no_turns, 7);
  uint32_t flags = 0;
  r.s.run = 100u * SLUICE__STREAM_QUANTUM;
  assert_int_equal(sluice__stream_read(&r.s, 16384, &flags), 16384);
  assert_int_equal(r.conn.n_yielded, 0);
  rig_free(&r);
}

static void many_streams_are_listed_in_order(void **state) {
  (void)state;
  sluice__conn c;
  assert_int_equal(sluice__conn_init(&c, NULL, 0, NULL), 0);
  for (int32_t id = 1; id < 200; id += 2)
    assert_int_equal(sluice__conn_yield(&c, id), 0);
  assert_int_equal(c.n_yielded, 100);
  for (uint32_t i = 0; i < c.n_yielded; i++)
    assert_int_equal(c.yielded[i], (int32_t)(2 * i + 1));
  free(c.yielded);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(gives_up_its_turn_after_a_quantum),
      cmocka_unit_test(without_a_quantum_it_keeps_its_turn),
      cmocka_unit_test(many_streams_are_listed_in_order),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
