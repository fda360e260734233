/* Channel statistics: a snapshot of every destination's balancer state,
 * taken on the loop thread, as a struct or as Prometheus text. */
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/channel_int.h"
#include "core/alloc.h"

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
  out->dropped_breaker = ch->res.breaker_requests + ch->res.breaker_pending;
  out->retry = ch->res.total;
  if (ch->n_scs == 0)
    return 0;
  out->dests = sluice__calloc(ch->n_scs, sizeof *out->dests);
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

/* What the Prometheus text adds to the snapshot: health checking, kept out
 * of sluice_dest_stats (whose layout is ABI). health[i] is dests[i]'s
 * state name (static; "" when checking is off). */
typedef struct health_snap {
  uint64_t dropped_not_serving;
  const char **health;
  size_t n;
} health_snap;

/* Loop thread, right after snapshot(): fills hs for the same destinations.
 * Returns 0 or SLUICE_ERR_NOMEM. */
static int health_snapshot(sluice_channel *ch, health_snap *hs) {
  hs->dropped_not_serving = ch->picker.dropped[SLUICE__DROP_NOT_SERVING];
  hs->n = 0;
  hs->health = NULL;
  if (ch->n_scs == 0 || !ch->env.health_service)
    return 0;
  hs->health = sluice__calloc(ch->n_scs, sizeof *hs->health);
  if (!hs->health)
    return SLUICE_ERR_NOMEM;
  hs->n = ch->n_scs;
  for (size_t i = 0; i < ch->n_scs; i++)
    hs->health[i] = sluice__subchannel_health_name(ch->scs[i]->health);
  return 0;
}

/* Loop thread: fills out (sluice_channel_get_resilience_stats). */
static int res_snapshot(sluice_channel *ch, sluice_resilience_stats *out) {
  const sluice__resil *r = &ch->res;
  size_t size = out->struct_size;
  memset(out, 0, sizeof *out);
  out->struct_size = size;
  out->total = r->total;
  out->breaker_requests = r->breaker_requests;
  out->breaker_pending = r->breaker_pending;
  out->retries_in_flight = r->in_retry;
  out->hedges_in_flight = r->hedges_open;
  out->throttle_tokens =
      r->throttle.max_milli ? r->throttle.tokens_milli / 1000.0 : -1.0;
  size_t n = ch->picker.n_paths;
  /* the last slot gathers the methods past the table's size */
  int other = r->per_path[SLUICE__LB_MAX_PATHS - 1].calls > 0;
  if (n + (size_t)other == 0)
    return 0;
  out->methods = sluice__calloc(n + (size_t)other, sizeof *out->methods);
  if (!out->methods)
    return SLUICE_ERR_NOMEM;
  for (size_t i = 0; i < n; i++) {
    snprintf(out->methods[i].path, sizeof out->methods[i].path, "%s",
             ch->picker.paths[i]->path);
    out->methods[i].counters = r->per_path[i];
  }
  if (other) {
    snprintf(out->methods[n].path, sizeof out->methods[n].path, "(other)");
    out->methods[n].counters = r->per_path[SLUICE__LB_MAX_PATHS - 1];
  }
  out->n_methods = n + (size_t)other;
  return 0;
}

/* A snapshot taken on the loop thread for a caller on another thread. */
typedef struct stats_req {
  sluice__task task;
  sluice_channel *ch;
  sluice_channel_stats *out;
  sluice_resilience_stats *res_out;
  health_snap *hs;
  int rv;
  int done;
  uv_mutex_t mu;
  uv_cond_t cv;
} stats_req;

static void on_stats_task(sluice__task *t) {
  stats_req *r = SLUICE__CONTAINER_OF(t, stats_req, task);
  r->rv = r->out ? snapshot(r->ch, r->out) : res_snapshot(r->ch, r->res_out);
  if (r->rv == 0 && r->hs)
    r->rv = health_snapshot(r->ch, r->hs);
  uv_mutex_lock(&r->mu);
  r->done = 1;
  uv_cond_signal(&r->cv);
  uv_mutex_unlock(&r->mu);
}

/* Takes one of the snapshots (out or res_out) on the loop, waiting for it
 * when called from another thread. */
static int on_loop(sluice_channel *ch, sluice_channel_stats *out,
                   sluice_resilience_stats *res_out, health_snap *hs) {
  if (sluice__loop_on_thread(ch->loop)) {
    int rv = out ? snapshot(ch, out) : res_snapshot(ch, res_out);
    return rv == 0 && hs ? health_snapshot(ch, hs) : rv;
  }
  stats_req r;
  memset(&r, 0, sizeof r);
  r.task.fn = on_stats_task;
  r.ch = ch;
  r.out = out;
  r.res_out = res_out;
  r.hs = hs;
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

int sluice_channel_get_stats(sluice_channel *ch, sluice_channel_stats *out) {
  if (!ch || !out)
    return SLUICE_ERR_INVALID_ARG;
  return on_loop(ch, out, NULL, NULL);
}

int sluice_channel_get_resilience_stats(sluice_channel *ch,
                                        sluice_resilience_stats *out) {
  if (!ch || !out)
    return SLUICE_ERR_INVALID_ARG;
  /* A struct from a newer or older program: fill ours, copy what fits. */
  if (out->struct_size && out->struct_size != sizeof *out) {
    sluice_resilience_stats mine;
    mine.struct_size = sizeof mine;
    int rv = on_loop(ch, NULL, &mine, NULL);
    if (rv != 0)
      return rv;
    size_t n = out->struct_size < sizeof mine ? out->struct_size : sizeof mine;
    size_t keep = out->struct_size;
    memcpy(out, &mine, n);
    out->struct_size = keep;
    if (n < offsetof(sluice_resilience_stats, methods) + sizeof mine.methods)
      free(mine.methods); /* the caller's struct has no room for it */
    return 0;
  }
  out->struct_size = sizeof *out;
  return on_loop(ch, NULL, out, NULL);
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
    char *p = sluice__realloc(t->p, cap);
    if (!p) {
      t->failed = 1;
      return;
    }
    t->p = p;
    t->cap = cap;
  }
}

/* Retries, hedges and breakers per method (names after gRFC A96's
 * grpc.client.call.retries / transparent_retries / hedges / retry_delay). */
static void add_resilience(text *t, sluice_channel *ch) {
  sluice_resilience_stats r;
  sluice_resilience_stats_init(&r);
  if (sluice_channel_get_resilience_stats(ch, &r) != 0) {
    t->failed = 1;
    return;
  }
  static const struct {
    const char *name, *help;
    size_t off;
    double scale;
  } ctrs[] = {
      {"call_attempts_total", "Attempts sent, first ones included.",
       offsetof(sluice_retry_counters, attempts), 1},
      {"call_retries_total", "Retry attempts started.",
       offsetof(sluice_retry_counters, retries), 1},
      {"call_transparent_retries_total",
       "Replays of streams the server never saw.",
       offsetof(sluice_retry_counters, transparent_retries), 1},
      {"call_hedges_total", "Hedged attempts started.",
       offsetof(sluice_retry_counters, hedges), 1},
      {"call_retry_delay_seconds_total", "Retry backoff waited, summed.",
       offsetof(sluice_retry_counters, retry_delay_ms_sum), 1e-3},
  };
  static const struct {
    const char *reason;
    size_t off;
  } denied[] = {
      {"throttled", offsetof(sluice_retry_counters, retries_throttled)},
      {"budget", offsetof(sluice_retry_counters, retries_budget_denied)},
      {"pushback", offsetof(sluice_retry_counters, retries_pushback_denied)},
      {"deadline", offsetof(sluice_retry_counters, retries_deadline_denied)},
      {"breaker", offsetof(sluice_retry_counters, retries_breaker_denied)},
      {"exhausted", offsetof(sluice_retry_counters, retries_exhausted)},
  };
#define FIELD(m, off)                                                          \
  (*(const uint64_t *)((const char *)&(m)->counters + (off)))
  for (size_t k = 0; k < sizeof ctrs / sizeof ctrs[0]; k++) {
    add(t, "# HELP sluice_client_%s %s\n# TYPE sluice_client_%s counter\n",
        ctrs[k].name, ctrs[k].help, ctrs[k].name);
    for (size_t i = 0; i < r.n_methods; i++)
      add(t, "sluice_client_%s{method=\"%s\"} %.15g\n", ctrs[k].name,
          r.methods[i].path,
          (double)FIELD(&r.methods[i], ctrs[k].off) * ctrs[k].scale);
  }
  add(t, "# HELP sluice_client_call_retries_denied_total Retries and hedges "
         "not made, by reason.\n"
         "# TYPE sluice_client_call_retries_denied_total counter\n");
  for (size_t i = 0; i < r.n_methods; i++)
    for (size_t k = 0; k < sizeof denied / sizeof denied[0]; k++)
      add(t,
          "sluice_client_call_retries_denied_total{method=\"%s\","
          "reason=\"%s\"} %" PRIu64 "\n",
          r.methods[i].path, denied[k].reason,
          FIELD(&r.methods[i], denied[k].off));
#undef FIELD
  add(t,
      "# HELP sluice_client_breaker_open_total Calls refused by a circuit "
      "breaker.\n# TYPE sluice_client_breaker_open_total counter\n"
      "sluice_client_breaker_open_total{breaker=\"max_requests\"} %" PRIu64 "\n"
      "sluice_client_breaker_open_total{breaker=\"max_pending\"} %" PRIu64 "\n"
      "# TYPE sluice_client_retries_in_flight gauge\n"
      "sluice_client_retries_in_flight %" PRIu64 "\n"
      "# TYPE sluice_client_hedges_in_flight gauge\n"
      "sluice_client_hedges_in_flight %" PRIu64 "\n"
      "# TYPE sluice_client_retry_throttle_tokens gauge\n"
      "sluice_client_retry_throttle_tokens %.3f\n",
      r.breaker_requests, r.breaker_pending, r.retries_in_flight,
      r.hedges_in_flight, r.throttle_tokens);
  sluice_resilience_stats_clear(&r);
}

int sluice_channel_stats_prometheus(sluice_channel *ch, char **out) {
  if (!ch || !out)
    return SLUICE_ERR_INVALID_ARG;
  sluice_channel_stats s;
  health_snap hs = {0, NULL, 0};
  int rv = on_loop(ch, &s, NULL, &hs);
  if (rv != 0) {
    sluice_channel_stats_clear(&s);
    free(hs.health);
    return rv;
  }
  text t = {sluice__malloc(4096), 0, 4096, 0};
  if (!t.p) {
    sluice_channel_stats_clear(&s);
    free(hs.health);
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
      {"breaker", offsetof(sluice_channel_stats, dropped_breaker)},
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
      "sluice_client_dropped_total{lb=\"%s\",reason=\"not_serving\"} %" PRIu64
      "\n",
      s.lb, hs.dropped_not_serving);
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
  if (hs.n) {
    add(&t, "# HELP sluice_client_health Health check state of a destination "
            "(gRFC A17).\n"
            "# TYPE sluice_client_health gauge\n");
    for (size_t i = 0; i < s.n_dests && i < hs.n; i++)
      add(&t, "sluice_client_health{dest=\"%s\",health=\"%s\"} 1\n",
          s.dests[i].address, hs.health[i]);
  }
#undef GAUGE
#undef COUNTER
  free(hs.health);
  sluice_channel_stats_clear(&s);
  uint32_t ka_ms = 0;
  uint64_t calm = 0;
  sluice_channel_get_keepalive(ch, &ka_ms, &calm);
  add(&t,
      "# HELP sluice_client_keepalive_time_ms Keepalive time of new "
      "connections (0: off; doubled at each too_many_pings).\n"
      "# TYPE sluice_client_keepalive_time_ms gauge\n"
      "sluice_client_keepalive_time_ms %" PRIu32 "\n"
      "# HELP sluice_client_too_many_pings_total GOAWAYs too_many_pings "
      "received.\n"
      "# TYPE sluice_client_too_many_pings_total counter\n"
      "sluice_client_too_many_pings_total %" PRIu64 "\n"
      "# HELP sluice_client_connectivity_state The channel's state "
      "(sluice_channel_get_state).\n"
      "# TYPE sluice_client_connectivity_state gauge\n"
      "sluice_client_connectivity_state{state=\"%s\"} 1\n",
      ka_ms, calm,
      sluice_connectivity_state_name(sluice_channel_get_state(ch, 0)));
  add_resilience(&t, ch);
  if (t.failed) {
    free(t.p);
    return SLUICE_ERR_NOMEM;
  }
  *out = t.p;
  return 0;
}
