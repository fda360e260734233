/* Channel statistics: a snapshot of every destination's balancer state,
 * taken on the loop thread, as a struct or as Prometheus text. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/channel_int.h"

/* Loop thread: fills out. */
static int snapshot(sluice_channel *ch, sluice_channel_stats *out) {
  memset(out, 0, sizeof *out);
  out->lb = ch->picker.lb.ops->name;
  out->dropped_unavailable = ch->picker.dropped[SLUICE__LB_NONE];
  out->dropped_limit = ch->picker.dropped[SLUICE__LB_OVER_LIMIT];
  out->dropped_path_limit = ch->picker.dropped[SLUICE__LB_PATH_LIMIT];
  out->dropped_deadline = ch->picker.dropped[SLUICE__LB_DEADLINE];
  out->dropped_wait = ch->picker.dropped[SLUICE__DROP_WAIT];
  out->waiting = ch->picker.n_waiting;
  if (ch->n_scs == 0)
    return 0;
  out->dests = calloc(ch->n_scs, sizeof *out->dests);
  if (!out->dests)
    return SLUICE_ERR_NOMEM;
  out->n_dests = ch->n_scs;
  uint64_t now = sluice_now_ns();
  for (size_t i = 0; i < ch->n_scs; i++) {
    const sluice__subchannel *d = ch->scs[i];
    const sluice__lb_dest *l = &d->lb;
    sluice_dest_stats *o = &out->dests[i];
    snprintf(o->address, sizeof o->address, "%s", d->addr.name);
    o->conn_state = sluice__subchannel_state_name(d->state);
    o->lb_state =
        ch->picker.lb.ops->state_name ? ch->picker.lb.ops->state_name(l) : "";
    o->in_flight = l->est.in_flight;
    o->limit = l->limit;
    o->adaptive_limit = l->est.limit;
    o->rate = l->est.rate_calls;
    o->rate_bytes = l->est.rate_bytes;
    o->latency_min_us = l->est.lat_min_ns / 1000.0;
    o->latency_ewma_us = l->est.lat_ewma_ns / 1000.0;
    o->peer_utilization = l->est.peer_util;
    o->sent = l->stats.sent;
    o->ok = l->stats.ok;
    o->failed = l->stats.failed;
    o->p50_us = sluice__histogram_percentile(&l->stats.latency, 50);
    o->p99_us = sluice__histogram_percentile(&l->stats.latency, 99);
    o->p999_us = sluice__histogram_percentile(&l->stats.latency, 99.9);
    o->algo_ns = l->stats.algo_n
                     ? (double)l->stats.algo_ns_sum / (double)l->stats.algo_n
                     : 0;
    o->strategy_us = l->stats.strat_n ? (double)l->stats.strat_ns_sum /
                                            (double)l->stats.strat_n / 1000.0
                                      : 0;
    o->ejections = l->stats.outlier.ejections;
    o->ejected = sluice__lb_ejected(l, now);
    o->ejected_for_ms =
        o->ejected ? (double)(l->stats.outlier.ejected_until_ns - now) / 1e6
                   : 0;
  }
  return 0;
}

typedef struct stats_req {
  sluice__task task;
  sluice_channel *ch;
  sluice_channel_stats *out;
  int rv;
  int done;
  uv_mutex_t mu;
  uv_cond_t cv;
} stats_req;

static void on_stats_task(sluice__task *t) {
  stats_req *r = SLUICE__CONTAINER_OF(t, stats_req, task);
  r->rv = snapshot(r->ch, r->out);
  uv_mutex_lock(&r->mu);
  r->done = 1;
  uv_cond_signal(&r->cv);
  uv_mutex_unlock(&r->mu);
}

int sluice_channel_get_stats(sluice_channel *ch, sluice_channel_stats *out) {
  if (!ch || !out)
    return SLUICE_ERR_INVALID_ARG;
  if (sluice__loop_on_thread(ch->loop))
    return snapshot(ch, out);
  stats_req r;
  memset(&r, 0, sizeof r);
  r.task.fn = on_stats_task;
  r.ch = ch;
  r.out = out;
  uv_mutex_init(&r.mu);
  uv_cond_init(&r.cv);
  sluice__loop_post(ch->loop, &r.task);
  uv_mutex_lock(&r.mu);
  while (!r.done)
    uv_cond_wait(&r.cv, &r.mu);
  uv_mutex_unlock(&r.mu);
  uv_mutex_destroy(&r.mu);
  uv_cond_destroy(&r.cv);
  return r.rv;
}

void sluice_channel_stats_clear(sluice_channel_stats *s) {
  if (!s)
    return;
  free(s->dests);
  memset(s, 0, sizeof *s);
}

/* A growing text buffer. */
typedef struct text {
  char *p;
  size_t len, cap;
  int failed;
} text;

static void add(text *t, const char *fmt, ...) {
  if (t->failed)
    return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->p + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
    if (n < 0) {
      t->failed = 1;
      return;
    }
    if ((size_t)n < t->cap - t->len) {
      t->len += (size_t)n;
      return;
    }
    size_t cap = t->cap * 2 + (size_t)n + 1;
    char *p = realloc(t->p, cap);
    if (!p) {
      t->failed = 1;
      return;
    }
    t->p = p;
    t->cap = cap;
  }
}

int sluice_channel_stats_prometheus(sluice_channel *ch, char **out) {
  if (!ch || !out)
    return SLUICE_ERR_INVALID_ARG;
  sluice_channel_stats s;
  int rv = sluice_channel_get_stats(ch, &s);
  if (rv != 0)
    return rv;
  text t = {malloc(4096), 0, 4096, 0};
  if (!t.p) {
    sluice_channel_stats_clear(&s);
    return SLUICE_ERR_NOMEM;
  }
  t.p[0] = 0;
  static const struct {
    const char *reason;
    size_t off;
  } drops[] = {
      {"unavailable", offsetof(sluice_channel_stats, dropped_unavailable)},
      {"limit", offsetof(sluice_channel_stats, dropped_limit)},
      {"path_limit", offsetof(sluice_channel_stats, dropped_path_limit)},
      {"deadline", offsetof(sluice_channel_stats, dropped_deadline)},
      {"wait", offsetof(sluice_channel_stats, dropped_wait)},
  };
  add(&t, "# HELP sluice_client_dropped_total Calls dropped locally, "
          "without any I/O, by reason.\n"
          "# TYPE sluice_client_dropped_total counter\n");
  for (size_t i = 0; i < sizeof drops / sizeof drops[0]; i++)
    add(&t,
        "sluice_client_dropped_total{lb=\"%s\",reason=\"%s\"} %" PRIu64 "\n",
        s.lb, drops[i].reason,
        *(const uint64_t *)((const char *)&s + drops[i].off));
  add(&t,
      "# TYPE sluice_client_waiting gauge\n"
      "sluice_client_waiting{lb=\"%s\"} %" PRIu64 "\n",
      s.lb, s.waiting);
#define GAUGE(name, help, fmt, field)                                          \
  add(&t, "# HELP sluice_client_" name " " help "\n# TYPE sluice_client_" name \
          " gauge\n");                                                         \
  for (size_t i = 0; i < s.n_dests; i++)                                       \
    add(&t, "sluice_client_" name "{dest=\"%s\"} " fmt "\n",                   \
        s.dests[i].address, s.dests[i].field);
#define COUNTER(name, help, field)                                             \
  add(&t, "# HELP sluice_client_" name " " help "\n# TYPE sluice_client_" name \
          " counter\n");                                                       \
  for (size_t i = 0; i < s.n_dests; i++)                                       \
    add(&t, "sluice_client_" name "{dest=\"%s\"} %" PRIu64 "\n",               \
        s.dests[i].address, s.dests[i].field);
  GAUGE("in_flight", "Calls in flight.", "%" PRIu32, in_flight)
  GAUGE("limit", "Admission limit (0 = none).", "%.1f", limit)
  GAUGE("adaptive_limit", "Measured concurrency limit.", "%.1f", adaptive_limit)
  GAUGE("rate", "Completions per second.", "%.1f", rate)
  GAUGE("rate_bytes", "Bytes per second.", "%.1f", rate_bytes)
  GAUGE("latency_min_us", "No-load latency estimate.", "%.1f", latency_min_us)
  GAUGE("latency_ewma_us", "Latency moving average.", "%.1f", latency_ewma_us)
  GAUGE("latency_p50_us", "Median latency of completed calls.", "%" PRIu64,
        p50_us)
  GAUGE("latency_p99_us", "99th percentile latency.", "%" PRIu64, p99_us)
  GAUGE("peer_utilization", "Server's reported utilization (< 0: none).",
        "%.3f", peer_utilization)
  GAUGE("algo_ns", "Mean pick decision time.", "%.0f", algo_ns)
  GAUGE("strategy_us", "Mean time from decision to request sent.", "%.1f",
        strategy_us)
  COUNTER("sent_total", "Calls sent.", sent)
  COUNTER("ok_total", "Calls completed OK.", ok)
  COUNTER("failed_total", "Calls failed after being sent.", failed)
  COUNTER("ejections_total", "Times ejected as an outlier.", ejections)
  GAUGE("ejected", "1 while ejected as an outlier.", "%d", ejected)
  add(&t, "# HELP sluice_client_state Balancer state of a destination.\n"
          "# TYPE sluice_client_state gauge\n");
  for (size_t i = 0; i < s.n_dests; i++)
    add(&t, "sluice_client_state{dest=\"%s\",conn=\"%s\",lb_state=\"%s\"} 1\n",
        s.dests[i].address, s.dests[i].conn_state, s.dests[i].lb_state);
#undef GAUGE
#undef COUNTER
  sluice_channel_stats_clear(&s);
  if (t.failed) {
    free(t.p);
    return SLUICE_ERR_NOMEM;
  }
  *out = t.p;
  return 0;
}
