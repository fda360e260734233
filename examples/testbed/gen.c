/* testbed_gen: an open-loop load generator for testbed.Layer/Call.
 *
 *   testbed_gen --target HOST:PORT --rate R --duration S [--warmup S]
 *               [--deadline MS] [--size B] [--seed N] [--json]
 *   testbed_gen --write-request FILE [--size B]
 *
 * Open loop: calls start at Poisson arrival times (mean rate R per second)
 * whatever the server does, and each call's latency is measured from its
 * intended start time, not from when it was actually started, so a stalled
 * chain cannot hide behind coordinated omission; starts more than 1 ms late
 * are counted ("late"). Calls intended during the first --warmup seconds are
 * sent but not counted; the next --duration seconds are measured. Then it
 * waits (bounded: the deadline + 2 s) for the calls still in flight.
 *
 * Counted per status code; RESOURCE_EXHAUSTED whose message says "dropped
 * locally" is an early drop (a channel's strategy refused the call without
 * sending it), DEADLINE_EXCEEDED a timeout (or a deadline refusal, counted
 * apart when its message says "dropped locally"). Percentiles come from
 * the sorted latencies of the successful calls (exact, no histogram); the
 * latency of early drops is reported too. --json adds "kinds": n, p50, p99
 * and max (us) of the failed calls by kind (early_drop, deadline_refusal,
 * timeout, other), the same key sluice-bench's --json gives.
 *
 * The generator's own channel uses rr (no limits): it generates, it does
 * not balance. --write-request writes one serialized testbed.Msg with a
 * --size byte payload (for sluice-bench --request) and exits.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sluice/sluice.h>

#include "testbed.sluice.h"

#define N_CODES 17

typedef struct vec {
  uint64_t *v;
  size_t n, cap;
} vec;

static int vec_push(vec *a, uint64_t x) {
  if (a->n == a->cap) {
    size_t cap = a->cap ? a->cap * 2 : 4096;
    uint64_t *v = realloc(a->v, cap * sizeof *v);
    if (v == NULL)
      return -1;
    a->v = v;
    a->cap = cap;
  }
  a->v[a->n++] = x;
  return 0;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of sorted v. */
static double pct_ms(const vec *a, double p) {
  if (a->n == 0)
    return 0;
  size_t k = (size_t)ceil(p / 100.0 * (double)a->n);
  if (k < 1)
    k = 1;
  if (k > a->n)
    k = a->n;
  return (double)a->v[k - 1] / 1e6;
}

static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  uint64_t outstanding;
  uint64_t m_start, m_end; /* measured window of intended start times */
  uint64_t codes[N_CODES];
  uint64_t early_drops, deadline_drops, completed;
  vec ok_lat, drop_lat;
  vec kind_lat[4]; /* early_drop, deadline_refusal, timeout, other */
} G;

enum { GK_EARLY_DROP, GK_DEADLINE_REFUSAL, GK_TIMEOUT, GK_OTHER };
static const char *const gk_names[4] = {"early_drop", "deadline_refusal",
                                        "timeout", "other"};

typedef struct rec {
  uint64_t intended_ns;
} rec;

static void on_done(const sluice_status *st, const Testbed__Msg *resp,
                    void *user_data) {
  (void)resp;
  rec *r = user_data;
  uint64_t lat = sluice_now_ns() - r->intended_ns;
  pthread_mutex_lock(&G.mu);
  if (r->intended_ns >= G.m_start && r->intended_ns < G.m_end) {
    G.completed++;
    int c = (int)st->code;
    G.codes[c >= 0 && c < N_CODES ? c : SLUICE_STATUS_UNKNOWN]++;
    int local =
        st->message != NULL && strstr(st->message, "dropped locally") != NULL;
    if (st->code == SLUICE_STATUS_OK) {
      vec_push(&G.ok_lat, lat);
    } else if (local && st->code == SLUICE_STATUS_RESOURCE_EXHAUSTED) {
      G.early_drops++;
      vec_push(&G.drop_lat, lat);
      vec_push(&G.kind_lat[GK_EARLY_DROP], lat);
    } else if (local && st->code == SLUICE_STATUS_DEADLINE_EXCEEDED) {
      G.deadline_drops++;
      vec_push(&G.drop_lat, lat);
      vec_push(&G.kind_lat[GK_DEADLINE_REFUSAL], lat);
    } else if (st->code == SLUICE_STATUS_DEADLINE_EXCEEDED) {
      vec_push(&G.kind_lat[GK_TIMEOUT], lat);
    } else {
      vec_push(&G.kind_lat[GK_OTHER], lat);
    }
  }
  G.outstanding--;
  pthread_cond_broadcast(&G.cv);
  pthread_mutex_unlock(&G.mu);
  free(r);
}

static void sleep_until(uint64_t t_ns) {
  /* sluice_now_ns() is CLOCK_MONOTONIC. */
  struct timespec ts = {.tv_sec = (time_t)(t_ns / 1000000000ULL),
                        .tv_nsec = (long)(t_ns % 1000000000ULL)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
    ;
}

/* xorshift64*, uniform in (0, 1). */
static uint64_t rng_state = 88172645463325252ULL;
static double uniform01(void) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  uint64_t x = rng_state * 2685821657736338717ULL;
  return ((double)(x >> 11) + 0.5) / 9007199254740992.0;
}

static int write_request(const char *path, size_t size) {
  uint8_t *payload = calloc(1, size ? size : 1);
  if (payload == NULL)
    return 1;
  for (size_t i = 0; i < size; i++)
    payload[i] = (uint8_t)(uniform01() * 256);
  Testbed__Msg m = TESTBED__MSG__INIT;
  m.payload.data = payload;
  m.payload.len = size;
  size_t n = testbed__msg__get_packed_size(&m);
  uint8_t *buf = malloc(n);
  FILE *f = fopen(path, "wb");
  int rc = 1;
  if (buf != NULL && f != NULL) {
    testbed__msg__pack(&m, buf);
    rc = fwrite(buf, 1, n, f) == n ? 0 : 1;
  }
  if (f != NULL && fclose(f) != 0)
    rc = 1;
  free(buf);
  free(payload);
  if (rc != 0)
    fprintf(stderr, "cannot write %s: %s\n", path, strerror(errno));
  return rc;
}

static void usage(FILE *f, const char *prog) {
  fprintf(f,
          "usage: %s --target HOST:PORT --rate R --duration S [--warmup S]\n"
          "          [--deadline MS] [--size B] [--seed N] [--json]\n"
          "       %s --write-request FILE [--size B]\n",
          prog, prog);
}

int main(int argc, char **argv) {
  const char *prog = argv[0];
  const char *target = NULL, *write_path = NULL;
  double rate = 100, duration = 10, warmup = 2;
  unsigned long deadline_ms = 1000, size = 4096;
  unsigned long long seed = 1;
  int json = 0;

  for (int i = 1; i < argc; i++) {
    const char *flag = argv[i];
    if (strcmp(flag, "--help") == 0 || strcmp(flag, "-h") == 0) {
      usage(stdout, prog);
      return 0;
    }
    if (strcmp(flag, "--json") == 0) {
      json = 1;
      continue;
    }
    const char *val = i + 1 < argc ? argv[++i] : NULL;
    char *end = NULL;
    int bad = val == NULL || *val == '\0';
    if (bad) {
    } else if (strcmp(flag, "--target") == 0) {
      target = val;
    } else if (strcmp(flag, "--write-request") == 0) {
      write_path = val;
    } else if (strcmp(flag, "--rate") == 0) {
      rate = strtod(val, &end);
      bad = *end != '\0' || !(rate > 0);
    } else if (strcmp(flag, "--duration") == 0) {
      duration = strtod(val, &end);
      bad = *end != '\0' || !(duration > 0);
    } else if (strcmp(flag, "--warmup") == 0) {
      warmup = strtod(val, &end);
      bad = *end != '\0' || !(warmup >= 0);
    } else if (strcmp(flag, "--deadline") == 0) {
      deadline_ms = strtoul(val, &end, 10);
      bad = *end != '\0';
    } else if (strcmp(flag, "--size") == 0) {
      size = strtoul(val, &end, 10);
      bad = *end != '\0' || size > (64UL << 20);
    } else if (strcmp(flag, "--seed") == 0) {
      seed = strtoull(val, &end, 10);
      bad = *end != '\0';
    } else {
      fprintf(stderr, "%s: unknown argument '%s'\n", prog, flag);
      usage(stderr, prog);
      return 2;
    }
    if (bad) {
      fprintf(stderr, "%s: %s needs a valid value\n", prog, flag);
      usage(stderr, prog);
      return 2;
    }
  }
  rng_state ^= seed * 0x9E3779B97F4A7C15ULL;
  if (rng_state == 0)
    rng_state = 1;
  if (write_path != NULL)
    return write_request(write_path, size);
  if (target == NULL) {
    usage(stderr, prog);
    return 2;
  }

  pthread_mutex_init(&G.mu, NULL);
  pthread_cond_init(&G.cv, NULL);
  uint8_t *payload = malloc(size ? size : 1);
  if (payload == NULL)
    return 1;
  for (size_t i = 0; i < size; i++)
    payload[i] = (uint8_t)(uniform01() * 256);
  Testbed__Msg req = TESTBED__MSG__INIT;
  req.payload.data = payload;
  req.payload.len = size;

  sluice_channel *ch = NULL;
  sluice_channel_opts *co = NULL;
  int rc;
  if ((rc = sluice_channel_opts_new(&co)) != 0 ||
      (rc = sluice_channel_opts_set_lb(co, "rr")) != 0 ||
      (rc = sluice_channel_new(&ch, target, co)) != 0) {
    fprintf(stderr, "%s: cannot create a channel to %s: %s\n", prog, target,
            sluice_strerror(rc));
    return 1;
  }
  sluice_channel_opts_del(co);

  /* Connect first (one call, not counted), so that the first measured
   * calls do not pay for the TCP and HTTP/2 handshakes. */
  {
    sluice_call_opts o;
    sluice_call_opts_init(&o);
    o.timeout_ms = 5000;
    Testbed__Msg *resp = NULL;
    sluice_status st;
    sluice_status_init(&st);
    Testbed__Msg small = TESTBED__MSG__INIT;
    if (testbed__layer__call__blocking(ch, &small, &resp, &o, &st) ==
        SLUICE_STATUS_OK)
      protobuf_c_message_free_unpacked(&resp->base, NULL);
    else
      fprintf(stderr, "%s: first call: %s: %s\n", prog,
              sluice_status_name(st.code), st.message ? st.message : "");
    sluice_status_clear(&st);
  }

  uint64_t t0 = sluice_now_ns() + 1000000ULL;
  G.m_start = t0 + (uint64_t)(warmup * 1e9);
  G.m_end = G.m_start + (uint64_t)(duration * 1e9);
  uint64_t sent = 0, late = 0, start_failed = 0,
           next_progress = t0 + 1000000000ULL;
  double t = (double)t0;
  for (;;) {
    t += -log(uniform01()) / rate * 1e9;
    uint64_t intended = (uint64_t)t;
    if (intended >= G.m_end)
      break;
    uint64_t now = sluice_now_ns();
    if (intended > now)
      sleep_until(intended);
    else if (now - intended > 1000000ULL && intended >= G.m_start)
      late++;
    rec *r = malloc(sizeof *r);
    if (r == NULL)
      break;
    r->intended_ns = intended;
    sluice_call_opts o;
    sluice_call_opts_init(&o);
    if (deadline_ms > 0)
      o.deadline_ns = intended + deadline_ms * 1000000ULL;
    pthread_mutex_lock(&G.mu);
    G.outstanding++;
    pthread_mutex_unlock(&G.mu);
    if (testbed__layer__call__async(ch, &req, &o, on_done, r) != 0) {
      pthread_mutex_lock(&G.mu);
      G.outstanding--;
      pthread_mutex_unlock(&G.mu);
      free(r);
      start_failed++;
      continue;
    }
    sent++;
    if (intended >= next_progress) {
      pthread_mutex_lock(&G.mu);
      uint64_t out = G.outstanding, okn = G.ok_lat.n,
               drops = G.early_drops + G.deadline_drops;
      pthread_mutex_unlock(&G.mu);
      fprintf(stderr,
              "gen: %.0f s: sent %" PRIu64 ", in flight %" PRIu64
              ", measured ok %" PRIu64 ", early drops %" PRIu64 "\n",
              (double)(intended - t0) / 1e9, sent, out, okn, drops);
      next_progress += 1000000000ULL;
    }
  }

  /* Bounded wait for the calls still in flight. */
  uint64_t wait_until = sluice_now_ns() +
                        (deadline_ms > 0 ? deadline_ms : 10000) * 1000000ULL +
                        2000000000ULL;
  pthread_mutex_lock(&G.mu);
  while (G.outstanding > 0 && sluice_now_ns() < wait_until) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 50000000L;
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&G.cv, &G.mu, &ts);
  }
  uint64_t unfinished = G.outstanding;
  pthread_mutex_unlock(&G.mu);
  if (unfinished > 0)
    fprintf(stderr, "gen: %" PRIu64 " calls still in flight after the wait\n",
            unfinished);
  sluice_channel_del(ch); /* completes the rest with CANCELLED */

  qsort(G.ok_lat.v, G.ok_lat.n, sizeof(uint64_t), cmp_u64);
  qsort(G.drop_lat.v, G.drop_lat.n, sizeof(uint64_t), cmp_u64);
  for (int k = 0; k < 4; k++)
    qsort(G.kind_lat[k].v, G.kind_lat[k].n, sizeof(uint64_t), cmp_u64);
  uint64_t ok = G.codes[SLUICE_STATUS_OK];
  uint64_t measured_offered = G.completed;
  if (json) {
    printf("{\"target\":\"%s\",\"rate\":%.1f,\"duration_s\":%.1f,"
           "\"warmup_s\":%.1f,\"deadline_ms\":%lu,\"size\":%lu,"
           "\"generator\":\"testbed_gen open-loop poisson\","
           "\"measured_calls\":%" PRIu64 ",\"offered_rps\":%.1f,"
           "\"ok\":%" PRIu64 ",\"goodput_rps\":%.1f,"
           "\"early_drops\":%" PRIu64 ",\"deadline_drops\":%" PRIu64
           ",\"timeouts\":%" PRIu64 ",\"late_starts\":%" PRIu64
           ",\"start_failed\":%" PRIu64 ",\"unfinished\":%" PRIu64
           ",\"p50_ms\":%.3f,\"p90_ms\":%.3f,\"p99_ms\":%.3f,"
           "\"p999_ms\":%.3f,\"max_ms\":%.3f,\"drop_p50_ms\":%.3f,"
           "\"drop_p99_ms\":%.3f,\"codes\":{",
           target, rate, duration, warmup, deadline_ms, size, measured_offered,
           (double)measured_offered / duration, ok, (double)ok / duration,
           G.early_drops, G.deadline_drops,
           G.codes[SLUICE_STATUS_DEADLINE_EXCEEDED] - G.deadline_drops, late,
           start_failed, unfinished, pct_ms(&G.ok_lat, 50),
           pct_ms(&G.ok_lat, 90), pct_ms(&G.ok_lat, 99),
           pct_ms(&G.ok_lat, 99.9), pct_ms(&G.ok_lat, 100),
           pct_ms(&G.drop_lat, 50), pct_ms(&G.drop_lat, 99));
    int first = 1;
    for (int c = 0; c < N_CODES; c++)
      if (G.codes[c] > 0) {
        printf("%s\"%s\":%" PRIu64, first ? "" : ",",
               sluice_status_name((sluice_status_code)c), G.codes[c]);
        first = 0;
      }
    printf("},\"kinds\":{");
    for (int k = 0; k < 4; k++)
      printf("%s\"%s\":{\"n\":%zu,\"p50_us\":%.1f,\"p99_us\":%.1f,"
             "\"max_us\":%.1f}",
             k ? "," : "", gk_names[k], G.kind_lat[k].n,
             pct_ms(&G.kind_lat[k], 50) * 1e3, pct_ms(&G.kind_lat[k], 99) * 1e3,
             pct_ms(&G.kind_lat[k], 100) * 1e3);
    printf("}}\n");
  } else {
    printf("offered %.1f/s over %.1f s (open loop, Poisson), goodput %.1f/s\n",
           (double)measured_offered / duration, duration,
           (double)ok / duration);
    printf("ok %" PRIu64 ", early drops %" PRIu64 ", deadline drops %" PRIu64
           ", timeouts %" PRIu64 ", late starts %" PRIu64 "\n",
           ok, G.early_drops, G.deadline_drops,
           G.codes[SLUICE_STATUS_DEADLINE_EXCEEDED] - G.deadline_drops, late);
    printf("latency of successful calls: p50 %.3f ms, p90 %.3f, p99 %.3f, "
           "p99.9 %.3f, max %.3f\n",
           pct_ms(&G.ok_lat, 50), pct_ms(&G.ok_lat, 90), pct_ms(&G.ok_lat, 99),
           pct_ms(&G.ok_lat, 99.9), pct_ms(&G.ok_lat, 100));
    for (int c = 0; c < N_CODES; c++)
      if (G.codes[c] > 0)
        printf("  %s: %" PRIu64 "\n", sluice_status_name((sluice_status_code)c),
               G.codes[c]);
  }
  free(G.ok_lat.v);
  free(G.drop_lat.v);
  for (int k = 0; k < 4; k++)
    free(G.kind_lat[k].v);
  free(payload);
  return 0;
}
