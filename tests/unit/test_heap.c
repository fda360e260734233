/* core/heap.h: the minimum is always the smallest key, through inserts
 * and removals of any node (random, against a plain array), every link
 * stays consistent, and keys in increasing order (the server's deadlines)
 * keep their order. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>

#include "core/heap.h"

#define N 500

/* Checks the heap property and every link below n (n's children, each
 * child's prev: the parent for the first one, the previous sibling for the
 * others); returns the subtree's node count. */
static size_t check(const sluice__heap_node *n) {
  if (!n)
    return 0;
  size_t count = 1;
  const sluice__heap_node *prev = n;
  for (const sluice__heap_node *c = n->child; c; c = c->next) {
    assert_ptr_equal(c->prev, prev);
    assert_true(n->key <= c->key);
    count += check(c);
    prev = c;
  }
  return count;
}

static uint64_t rnd(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static void random_inserts_and_removals(void **state) {
  (void)state;
  static sluice__heap_node nodes[N];
  int in[N] = {0};
  sluice__heap h;
  sluice__heap_init(&h);
  assert_null(sluice__heap_min(&h));
  uint64_t seed = 88172645463325252ull;
  size_t count = 0;
  for (int step = 0; step < 20000; step++) {
    size_t i = rnd(&seed) % N;
    if (!in[i]) {
      nodes[i].key = rnd(&seed) % 64; /* many equal keys */
      sluice__heap_insert(&h, &nodes[i]);
      in[i] = 1;
      count++;
    } else if (rnd(&seed) % 2) {
      sluice__heap_remove(&h, &nodes[i]);
      in[i] = 0;
      count--;
    } else { /* take the minimum, as the deadline timer does */
      sluice__heap_node *m = sluice__heap_min(&h);
      uint64_t least = UINT64_MAX;
      for (size_t j = 0; j < N; j++)
        if (in[j] && nodes[j].key < least)
          least = nodes[j].key;
      assert_int_equal(m->key, least);
      sluice__heap_remove(&h, m);
      in[m - nodes] = 0;
      count--;
    }
    assert_int_equal(h.n, count);
    if (step % 97 == 0)
      assert_true(!h.min || !h.min->prev);
    assert_int_equal(check(h.min), count);
  }
  while (h.min) {
    uint64_t k = h.min->key;
    sluice__heap_remove(&h, h.min);
    assert_true(!h.min || h.min->key >= k);
  }
  assert_int_equal(h.n, 0);
}

static void increasing_keys_come_out_in_order(void **state) {
  (void)state;
  static sluice__heap_node nodes[N];
  sluice__heap h;
  sluice__heap_init(&h);
  for (size_t i = 0; i < N; i++) {
    nodes[i].key = 1000 + i;
    sluice__heap_insert(&h, &nodes[i]);
  }
  /* A node in the middle leaves (a call that finished before its
   * deadline). */
  sluice__heap_remove(&h, &nodes[N / 2]);
  assert_int_equal(check(h.min), N - 1);
  for (size_t i = 0; i < N; i++) {
    if (i == N / 2)
      continue;
    assert_ptr_equal(sluice__heap_min(&h), &nodes[i]);
    sluice__heap_remove(&h, &nodes[i]);
  }
  assert_null(sluice__heap_min(&h));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(random_inserts_and_removals),
      cmocka_unit_test(increasing_keys_come_out_in_order),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
