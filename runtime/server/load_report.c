/* The load report and its window (see load_report.h). */
#include "server/load_report.h"

#include <string.h>

#include "sluice/clock.h"
#include "sluice/status.h"
#include "wire/base64.h"
#include "wire/orca.h"

#define MS 1000000ull

static uint64_t load64(const uint64_t *p) {
  return __atomic_load_n(p, __ATOMIC_RELAXED);
}

static double load_double(const uint64_t *bits) {
  uint64_t u = __atomic_load_n(bits, __ATOMIC_RELAXED);
  double d;
  memcpy(&d, &u, sizeof d);
  return d;
}

static void store_double(uint64_t *bits, double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  __atomic_store_n(bits, u, __ATOMIC_RELAXED);
}

void sluice__load_init(sluice__load *l, const sluice_server_opts *o) {
  memset(l, 0, sizeof *l);
  l->on = o->load_report;
  l->interval_ms = o->load_report_interval_ms;
  l->capacity = o->max_calls;
  uv_mutex_init(&l->win_mu);
  store_double(&l->app_util_bits, -1.0); /* not given until the user says */
}

void sluice__load_destroy(sluice__load *l) { uv_mutex_destroy(&l->win_mu); }

void sluice__load_start(sluice__load *l) { l->win_start = sluice_now_ns(); }

void sluice__load_completed(sluice__load *l) {
  __atomic_fetch_add(&l->completions, 1, __ATOMIC_RELAXED);
}

void sluice__load_queued(sluice__load *l, uint64_t ns) {
  __atomic_fetch_add(&l->q_sum_us, ns / 1000, __ATOMIC_RELAXED);
  __atomic_fetch_add(&l->q_n, 1, __ATOMIC_RELAXED);
}

double sluice__load_queue_ms(const sluice__load *l) {
  return load_double(&l->queue_ms_bits);
}

int sluice__load_set_utilization(sluice__load *l, double utilization) {
  if (utilization != utilization) /* NaN */
    return SLUICE_ERR_INVALID_ARG;
  store_double(&l->app_util_bits, utilization < 0 ? -1.0 : utilization);
  return 0;
}

#define DOWN_BUCKET_NS (100 * MS)

void sluice__load_note_downstream(sluice__load *l, double pressure) {
  if (pressure != pressure) /* NaN */
    return;
  pressure = pressure < 0 ? 0.0 : pressure > 1 ? 1.0 : pressure;
  uint64_t b = sluice_now_ns() / DOWN_BUCKET_NS + 1, bits;
  memcpy(&bits, &pressure, sizeof bits);
  unsigned i = (unsigned)(b & 1);
  uint64_t cur = __atomic_load_n(&l->down_bucket[i], __ATOMIC_ACQUIRE);
  if (cur != b) {
    /* A new bucket: the first note of it starts its maximum (two threads
     * starting the same bucket at once may lose one of their figures for
     * that bucket: the next note corrects it). */
    __atomic_store_n(&l->down_max_bits[i], bits, __ATOMIC_RELAXED);
    __atomic_store_n(&l->down_bucket[i], b, __ATOMIC_RELEASE);
    return;
  }
  uint64_t old = __atomic_load_n(&l->down_max_bits[i], __ATOMIC_RELAXED);
  for (;;) {
    double d;
    memcpy(&d, &old, sizeof d);
    if (d >= pressure ||
        __atomic_compare_exchange_n(&l->down_max_bits[i], &old, bits, 0,
                                    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
      return;
  }
}

/* The largest downstream pressure of this bucket and the one before, or
 * -1 when neither has a note. */
static double downstream(const sluice__load *l, uint64_t now) {
  uint64_t b = now / DOWN_BUCKET_NS + 1;
  double best = -1;
  for (unsigned i = 0; i < 2; i++) {
    uint64_t bi = __atomic_load_n(&l->down_bucket[i], __ATOMIC_ACQUIRE);
    if (bi != b && bi + 1 != b)
      continue;
    double d = load_double(&l->down_max_bits[i]);
    if (d > best)
      best = d;
  }
  return best;
}

int sluice__load_due(const sluice__load *l, sluice__load_pacer *p) {
  if (!l->on)
    return 0;
  if (!l->interval_ms || !p)
    return 1;
  uint64_t now = sluice_now_ns();
  if (now < p->next_ns)
    return 0;
  p->next_ns = now + l->interval_ms * MS;
  return 1;
}

/* Rolls the ~1 s window if it is over (one thread at a time; the others
 * read the last values). */
static void roll_window(sluice__load *l, uint64_t now) {
  uint64_t start = __atomic_load_n(&l->win_start, __ATOMIC_ACQUIRE);
  if (now - start < 1000 * MS || uv_mutex_trylock(&l->win_mu) != 0)
    return;
  start = __atomic_load_n(&l->win_start, __ATOMIC_ACQUIRE);
  if (now - start >= 1000 * MS) {
    uint64_t done = load64(&l->completions);
    uint64_t qs = load64(&l->q_sum_us), qn = load64(&l->q_n);
    store_double(&l->rps_bits, (double)(done - l->win_completions) * 1e9 /
                                   (double)(now - start));
    store_double(&l->queue_ms_bits, qn > l->win_q_n
                                        ? (double)(qs - l->win_q_sum_us) /
                                              1000.0 / (double)(qn - l->win_q_n)
                                        : 0.0);
    l->win_completions = done;
    l->win_q_sum_us = qs;
    l->win_q_n = qn;
    __atomic_store_n(&l->win_start, now, __ATOMIC_RELEASE);
  }
  uv_mutex_unlock(&l->win_mu);
}

size_t sluice__load_report(sluice__load *l, int in_flight, char *out) {
  if (!l->on)
    return 0;
  uint64_t now = sluice_now_ns();
  roll_window(l, now);
  if (in_flight < 0)
    in_flight = 0;
  sluice__orca r;
  sluice__orca_init(&r);
  /* A concurrency utilization only against a known capacity: without a
   * limit, in-flight calls say nothing about how busy the handlers are (2
   * calls saturate a 2-worker service), and a guessed low figure made
   * clients read a saturated server as idle. */
  if (l->capacity)
    r.cpu_utilization = (double)in_flight / (double)l->capacity;
  r.application_utilization = load_double(&l->app_util_bits);
  r.rps_fractional = load_double(&l->rps_bits);
  r.queue_ms = load_double(&l->queue_ms_bits);
  r.in_flight = in_flight;
  /* Noted by the calls the handlers make (sluice_call_opts_set_parent). */
  r.downstream = downstream(l, now);
  uint8_t buf[SLUICE__ORCA_MAX];
  size_t n = sluice__orca_encode(&r, buf, sizeof buf);
  if (!n || sluice__base64_encoded_len(n) >= SLUICE__LOAD_REPORT_B64)
    return 0;
  return sluice__base64_encode(buf, n, out);
}
