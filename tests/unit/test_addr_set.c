/* client/addr_set.c: a channel's subchannel set against a new resolution,
 * by sort and binary search. Checked against the pairwise comparison the
 * channel made before (which subchannels stay, which addresses are added,
 * in which order), on random sets with repeated names, and on 20,000
 * addresses (400 million comparisons pairwise). */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/addr_set.h"

static uint64_t rnd_state = 0x2545F4914F6CDD1Dull;
static size_t rnd(size_t n) {
  rnd_state ^= rnd_state << 13;
  rnd_state ^= rnd_state >> 7;
  rnd_state ^= rnd_state << 17;
  return (size_t)(rnd_state % n);
}

/* The channel's old set_addresses, on names: the same outputs. */
static void pairwise(const char *const *old, size_t n_old,
                     const sluice__addr *addrs, size_t n, unsigned char *keep,
                     unsigned char *add) {
  const char **have = malloc((n_old + n + 1) * sizeof *have);
  size_t m = 0;
  for (size_t i = 0; i < n_old; i++) {
    int found = 0;
    for (size_t j = 0; j < n && !found; j++)
      found = strcmp(old[i], addrs[j].name) == 0;
    keep[i] = (unsigned char)found;
    if (found)
      have[m++] = old[i];
  }
  for (size_t j = 0; j < n; j++) {
    int found = 0;
    for (size_t i = 0; i < m && !found; i++)
      found = strcmp(have[i], addrs[j].name) == 0;
    add[j] = (unsigned char)!found;
    if (!found)
      have[m++] = addrs[j].name;
  }
  free(have);
}

static void name(sluice__addr *a, size_t k) {
  memset(a, 0, sizeof *a);
  snprintf(a->name, sizeof a->name, "10.%zu.%zu.%zu:50051", k / 65536,
           (k / 256) % 256, k % 256);
}

static void same_as_pairwise(void **state) {
  (void)state;
  enum { MAX = 64 };
  sluice__addr pool[MAX], addrs[MAX];
  for (size_t k = 0; k < MAX; k++)
    name(&pool[k], k);
  for (int round = 0; round < 2000; round++) {
    /* Old: distinct names (a channel's set); new: any, repeats too. */
    size_t n_old = rnd(20), n = rnd(40), universe = 1 + rnd(MAX - 1);
    const char *old[MAX];
    size_t start = rnd(MAX);
    for (size_t i = 0; i < n_old; i++)
      old[i] = pool[(start + i * 7) % MAX].name;
    for (size_t i = 0; i < n_old; i++) /* distinct: i x 7 mod 64, i < 20 */
      for (size_t k = 0; k < i; k++)
        assert_string_not_equal(old[i], old[k]);
    for (size_t j = 0; j < n; j++)
      addrs[j] = pool[rnd(universe)];
    unsigned char keep[MAX], add[MAX], want_keep[MAX], want_add[MAX];
    assert_int_equal(sluice__addr_set_diff(old, n_old, addrs, n, keep, add), 0);
    pairwise(old, n_old, addrs, n, want_keep, want_add);
    assert_memory_equal(keep, want_keep, n_old);
    assert_memory_equal(add, want_add, n);
  }
}

/* A re-resolution of 20,000 names, half of them new. */
static void many(void **state) {
  (void)state;
  enum { N = 20000 };
  sluice__addr *pool = malloc(2 * N * sizeof *pool);
  sluice__addr *addrs = malloc(N * sizeof *addrs);
  const char **old = malloc(N * sizeof *old);
  unsigned char *keep = malloc(N), *add = malloc(N);
  assert_true(pool && addrs && old && keep && add);
  for (size_t k = 0; k < 2 * N; k++)
    name(&pool[k], k);
  for (size_t i = 0; i < N; i++)
    old[i] = pool[i].name; /* 0 .. N-1 */
  for (size_t j = 0; j < N; j++)
    addrs[j] = pool[N / 2 + j]; /* N/2 .. 3N/2-1 */
  assert_int_equal(sluice__addr_set_diff(old, N, addrs, N, keep, add), 0);
  for (size_t i = 0; i < N; i++)
    assert_int_equal(keep[i], i >= N / 2);
  for (size_t j = 0; j < N; j++)
    assert_int_equal(add[j], j >= N / 2);
  free(pool);
  free(addrs);
  free(old);
  free(keep);
  free(add);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(same_as_pairwise),
      cmocka_unit_test(many),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
