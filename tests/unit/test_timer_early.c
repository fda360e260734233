/* sluice__timer_early (core/loop.c): a deadline timer armed from the loop's
 * stale cached clock fires before its deadline; the check re-arms it so the
 * callback's work runs only once the deadline has passed. */
#define _GNU_SOURCE /* uv.h needs pthread_rwlock_t under -std=c11 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <uv.h>

#include "core/loop.h"
#include "sluice/clock.h"

#define MS 1000000ull

static uint64_t deadline_ns;
static uint64_t fired_ns;
static unsigned rearmed;

static void plain_cb(uv_timer_t *t) {
  (void)t;
  fired_ns = sluice_now_ns();
}

static void checked_cb(uv_timer_t *t) {
  if (sluice__timer_early(t, deadline_ns, checked_cb)) {
    rearmed++;
    return;
  }
  fired_ns = sluice_now_ns();
}

/* Arms a 20 ms timer after the loop's clock has gone 50 ms stale (as after
 * a long turn of callbacks), and runs the loop until it fires. */
static void run_stale(uv_timer_cb cb) {
  uv_loop_t loop;
  uv_timer_t t;
  assert_int_equal(uv_loop_init(&loop), 0);
  uv_timer_init(&loop, &t);
  uv_update_time(&loop);
  uint64_t until = sluice_now_ns() + 50 * MS;
  while (sluice_now_ns() < until)
    ; /* a busy turn: the cached clock does not move */
  deadline_ns = sluice_now_ns() + 20 * MS;
  fired_ns = 0;
  rearmed = 0;
  uv_timer_start(&t, cb, 20, 0);
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_close((uv_handle_t *)&t, NULL);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&loop), 0);
  assert_true(fired_ns != 0);
}

/* The hazard itself: without the check the timer fires early, so the next
 * test can tell the check from no check. */
static void test_stale_clock_fires_early(void **state) {
  (void)state;
  run_stale(plain_cb);
  assert_true(fired_ns < deadline_ns);
}

static void test_checked_timer_never_early(void **state) {
  (void)state;
  run_stale(checked_cb);
  assert_true(fired_ns >= deadline_ns);
  assert_true(rearmed >= 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stale_clock_fires_early),
      cmocka_unit_test(test_checked_timer_never_early),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
