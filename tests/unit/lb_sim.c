/* Discrete-event simulator for the load-balancing strategies (lb_sim.h).
 *
 * Events live in a binary heap ordered by (time, sequence number): equal
 * times run in the order they were scheduled, so a run depends only on the
 * seed. Calls live in a growable pool; a call is freed when both sides are
 * done with it (the client when it completed or gave up, the server when
 * it served or lost it), and a generation number lets stale events (the
 * deadline timer of a call that already completed) be recognised. */
#include "lb_sim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NIL ((size_t)-1)

enum ev_type {
  EV_ARRIVE,
  EV_AT_SERVER,
  EV_SERVED,
  EV_RESPONSE,
  EV_DEADLINE,
  EV_REPORT
};

typedef struct ev {
  uint64_t t, seq;
  enum ev_type type;
  size_t idx;   /* flow, call or destination */
  uint32_t gen; /* call events: the call's generation when scheduled */
} ev;

typedef struct sim_call {
  sluice__lb_call c;
  size_t flow, dest;
  uint64_t t_sent;
  uint32_t gen;
  int client_done, server_done;
  size_t next; /* server FIFO link, or free-list link */
} sim_call;

struct lb_sim_impl {
  ev *heap;
  size_t hn, hcap;
  uint64_t seq;
  sim_call *calls;
  size_t ncalls, capcalls, free_head;
  uint64_t rng;
  sluice__lb_dest *lbd_storage;
  int *report_armed;
};

static void *xrealloc(void *p, size_t n) {
  void *q = realloc(p, n);
  if (!q) {
    fprintf(stderr, "lb_sim: out of memory\n");
    abort();
  }
  return q;
}

/* --- event heap --------------------------------------------------------- */

static int ev_before(const ev *a, const ev *b) {
  return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

static void push(lb_sim *s, uint64_t t, enum ev_type type, size_t idx,
                 uint32_t gen) {
  struct lb_sim_impl *m = s->impl;
  if (m->hn == m->hcap) {
    m->hcap = m->hcap ? m->hcap * 2 : 1024;
    m->heap = xrealloc(m->heap, m->hcap * sizeof *m->heap);
  }
  ev e = {t, m->seq++, type, idx, gen};
  size_t i = m->hn++;
  while (i > 0) {
    size_t p = (i - 1) / 2;
    if (!ev_before(&e, &m->heap[p]))
      break;
    m->heap[i] = m->heap[p];
    i = p;
  }
  m->heap[i] = e;
}

static ev pop(lb_sim *s) {
  struct lb_sim_impl *m = s->impl;
  ev top = m->heap[0];
  ev last = m->heap[--m->hn];
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= m->hn)
      break;
    if (c + 1 < m->hn && ev_before(&m->heap[c + 1], &m->heap[c]))
      c++;
    if (!ev_before(&m->heap[c], &last))
      break;
    m->heap[i] = m->heap[c];
    i = c;
  }
  if (m->hn)
    m->heap[i] = last;
  return top;
}

/* --- randomness (xorshift64*, independent of the balancer's) ------------ */

static double rnd01(lb_sim *s) {
  uint64_t x = s->impl->rng;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  s->impl->rng = x;
  /* 53 random bits in (0, 1]: never 0, so log() below is finite. */
  return (double)(((x * UINT64_C(2685821657736338717)) >> 11) + 1) /
         9007199254740992.0;
}

static uint64_t gap_ns(lb_sim *s, const lb_sim_flow *f) {
  double mean = 1e9 / f->rate;
  double g = f->constant ? mean : -log(rnd01(s)) * mean;
  return g < 1 ? 1 : (uint64_t)g;
}

/* --- calls ---------------------------------------------------------------- */

static size_t call_new(lb_sim *s) {
  struct lb_sim_impl *m = s->impl;
  size_t i;
  if (m->free_head != NIL) {
    i = m->free_head;
    m->free_head = m->calls[i].next;
  } else {
    if (m->ncalls == m->capcalls) {
      m->capcalls = m->capcalls ? m->capcalls * 2 : 1024;
      m->calls = xrealloc(m->calls, m->capcalls * sizeof *m->calls);
    }
    i = m->ncalls++;
    m->calls[i].gen = 0;
  }
  sim_call *c = &m->calls[i];
  uint32_t gen = c->gen;
  memset(c, 0, sizeof *c);
  c->gen = gen;
  c->next = NIL;
  return i;
}

static void call_maybe_free(lb_sim *s, size_t i) {
  sim_call *c = &s->impl->calls[i];
  if (!c->client_done || !c->server_done)
    return;
  c->gen++;
  c->next = s->impl->free_head;
  s->impl->free_head = i;
}

static void note_states(lb_sim *s) {
  for (size_t i = 0; i < s->n; i++) {
    lb_sim_dest *d = &s->dest[i];
    int st = s->lbd[i]->state;
    if (d->n_states && d->state[d->n_states - 1] == st)
      continue;
    if (d->n_states == LB_SIM_MAX_STATES)
      continue; /* full: the tests look at far fewer changes */
    d->state_t[d->n_states] = s->now;
    d->state[d->n_states++] = st;
  }
}

/* The client's side of the end of a call: exactly what the channel does. */
static void client_finish(lb_sim *s, size_t ci, sluice_status_code code) {
  sim_call *c = &s->impl->calls[ci];
  lb_sim_dest *d = &s->dest[c->dest];
  lb_sim_flow *f = &s->flow[c->flow];
  uint64_t lat = s->now - c->t_sent;
  c->client_done = 1;
  sluice__lb_complete(&s->lb, s->lbd[c->dest], &c->c, lat, code,
                      code == SLUICE_STATUS_OK ? f->resp_size : 0, s->now);
  if (code == SLUICE_STATUS_OK) {
    d->ok++;
    f->ok++;
    s->ok++;
    sluice__histogram_record(&d->lat_us, lat / 1000);
    sluice__histogram_record(&f->lat_us, lat / 1000);
    sluice__histogram_record(&s->lat_us, lat / 1000);
  } else if (code == SLUICE_STATUS_DEADLINE_EXCEEDED) {
    d->deadline++;
    f->deadline++;
    s->deadline++;
  } else {
    d->unavailable++;
    f->unavailable++;
    s->unavailable++;
  }
  call_maybe_free(s, ci);
}

/* --- the server ----------------------------------------------------------- */

static uint64_t service_ns(const lb_sim_dest *d, uint32_t path) {
  double cost =
      d->path_cost[path < SLUICE__LB_MAX_PATHS ? path
                                               : SLUICE__LB_MAX_PATHS - 1];
  if (cost <= 0)
    cost = 1;
  double ns = (double)d->workers / d->capacity * 1e9 * cost;
  return ns < 1 ? 1 : (uint64_t)ns;
}

static void server_start(lb_sim *s, size_t di, size_t ci) {
  lb_sim_dest *d = &s->dest[di];
  sim_call *c = &s->impl->calls[ci];
  d->busy++;
  push(s, s->now + service_ns(d, c->c.path_id), EV_SERVED, ci, c->gen);
}

static void server_arrive(lb_sim *s, size_t ci) {
  sim_call *c = &s->impl->calls[ci];
  lb_sim_dest *d = &s->dest[c->dest];
  if (d->down) { /* lost with the connection */
    c->server_done = 1;
    call_maybe_free(s, ci);
    return;
  }
  if (d->busy < d->workers && d->q_len == 0) {
    server_start(s, c->dest, ci);
    return;
  }
  c->next = NIL;
  if (d->q_len)
    s->impl->calls[d->q_tail].next = ci;
  else
    d->q_head = ci;
  d->q_tail = ci;
  d->q_len++;
}

static void server_served(lb_sim *s, size_t ci) {
  sim_call *c = &s->impl->calls[ci];
  size_t di = c->dest;
  lb_sim_dest *d = &s->dest[di];
  d->busy--;
  d->served_win++;
  c->server_done = 1;
  if (!c->client_done) {
    if (d->rtt_ns)
      push(s, s->now + d->rtt_ns / 2, EV_RESPONSE, ci, c->gen);
    else
      client_finish(s, ci, SLUICE_STATUS_OK);
  } else {
    call_maybe_free(s, ci);
  }
  while (d->q_len && d->busy < d->workers) {
    size_t next = d->q_head;
    d->q_head = s->impl->calls[next].next;
    d->q_len--;
    server_start(s, di, next);
  }
}

static void server_report(lb_sim *s, size_t di) {
  lb_sim_dest *d = &s->dest[di];
  if (!d->down) {
    double util = d->workers ? (double)d->busy / d->workers : 1.0;
    sluice__lb_peer_load l = {
        .utilization = util > 1 ? 1 : util,
        .rps = (double)d->served_win * 1e9 / (double)s->report_ns,
        .queue_ms = (double)d->q_len * (double)service_ns(d, 0) /
                    (d->workers ? d->workers : 1) / 1e6,
        .in_flight = (double)(d->busy + d->q_len)};
    sluice__lb_peer_report(&s->lb, s->lbd[di], &l, s->now);
  }
  d->served_win = 0;
}

/* --- the client ----------------------------------------------------------- */

static void arrive(lb_sim *s, size_t fi) {
  lb_sim_flow *f = &s->flow[fi];
  f->armed = 0;
  if (f->rate <= 0)
    return;
  f->offered++;
  s->offered++;
  sluice__lb_call call = {.path_id = f->path_id,
                          .size = f->size,
                          .deadline_ns =
                              f->deadline_ns ? s->now + f->deadline_ns : 0};
  for (size_t i = 0; i < s->n; i++) {
    int usable = !s->dest[i].down || s->dest[i].down_usable;
    if (usable != s->lbd[i]->usable)
      sluice__lb_set_usable(&s->lb, s->lbd[i], usable);
  }
  size_t chosen = 0;
  sluice__lb_verdict v = sluice__lb_pick(&s->lb, &call, s->now, &chosen);
  if (v != SLUICE__LB_PICKED) {
    f->dropped[v]++;
    s->dropped[v]++;
  } else {
    size_t ci = call_new(s);
    sim_call *c = &s->impl->calls[ci];
    lb_sim_dest *d = &s->dest[chosen];
    c->c = call;
    c->flow = fi;
    c->dest = chosen;
    c->t_sent = s->now;
    sluice__lb_sent(&s->lb, s->lbd[chosen], &c->c, s->now);
    d->sent++;
    d->path_sent[call.path_id < SLUICE__LB_MAX_PATHS
                     ? call.path_id
                     : SLUICE__LB_MAX_PATHS - 1]++;
    int fail = d->down; /* usable but down: fails at once */
    if (!fail && d->fail_ratio > 0) {
      d->fail_acc += d->fail_ratio;
      if (d->fail_acc >= 1 - 1e-9) {
        d->fail_acc -= 1;
        fail = 1;
      }
    }
    if (fail) {
      c->server_done = 1;
      client_finish(s, ci,
                    d->fail_code ? d->fail_code : SLUICE_STATUS_UNAVAILABLE);
    } else {
      if (call.deadline_ns)
        push(s, call.deadline_ns, EV_DEADLINE, ci, c->gen);
      if (d->rtt_ns)
        push(s, s->now + d->rtt_ns / 2, EV_AT_SERVER, ci, c->gen);
      else
        server_arrive(s, ci);
    }
  }
  f->armed = 1;
  push(s, s->now + gap_ns(s, f), EV_ARRIVE, fi, 0);
}

static void arm(lb_sim *s) {
  for (size_t i = 0; i < LB_SIM_MAX_FLOWS; i++) {
    lb_sim_flow *f = &s->flow[i];
    if (f->rate > 0 && !f->armed) {
      f->armed = 1;
      push(s, s->now + gap_ns(s, f), EV_ARRIVE, i, 0);
    }
  }
  for (size_t i = 0; i < s->n; i++) {
    if (s->dest[i].report_load && !s->impl->report_armed[i]) {
      s->impl->report_armed[i] = 1;
      push(s, s->now + s->report_ns, EV_REPORT, i, 0);
    }
  }
}

/* --- API ------------------------------------------------------------------ */

lb_sim *lb_sim_new(const sluice__lb_ops *ops, const sluice__lb_config *cfg,
                   size_t n, uint64_t seed) {
  lb_sim *s = calloc(1, sizeof *s);
  struct lb_sim_impl *m = calloc(1, sizeof *m);
  if (!s || !m)
    abort();
  s->impl = m;
  s->n = n;
  s->dest = calloc(n ? n : 1, sizeof *s->dest);
  s->lbd = calloc(n ? n : 1, sizeof *s->lbd);
  m->lbd_storage = calloc(n ? n : 1, sizeof *m->lbd_storage);
  m->report_armed = calloc(n ? n : 1, sizeof *m->report_armed);
  if (!s->dest || !s->lbd || !m->lbd_storage || !m->report_armed)
    abort();
  m->free_head = NIL;
  m->rng = seed * UINT64_C(0x9E3779B97F4A7C15) + UINT64_C(0x2545F4914F6CDD1D);
  if (!m->rng)
    m->rng = 1;
  s->now = LB_SIM_SEC;
  s->report_ns = 100 * LB_SIM_MS;
  sluice__lb_init(&s->lb, ops, cfg);
  for (size_t i = 0; i < n; i++) {
    lb_sim_dest *d = &s->dest[i];
    d->capacity = 1000;
    d->workers = 8;
    sluice__histogram_init(&d->lat_us);
    s->lbd[i] = &m->lbd_storage[i];
    sluice__lb_dest_init(&s->lb, s->lbd[i], s->now);
  }
  if (sluice__lb_set_dests(&s->lb, s->lbd, n) != 0)
    abort();
  for (size_t i = 0; i < LB_SIM_MAX_FLOWS; i++) {
    s->flow[i].size = 4096;
    s->flow[i].resp_size = 4096;
    sluice__histogram_init(&s->flow[i].lat_us);
  }
  sluice__histogram_init(&s->lat_us);
  note_states(s);
  return s;
}

void lb_sim_free(lb_sim *s) {
  if (!s)
    return;
  sluice__lb_free(&s->lb);
  free(s->impl->heap);
  free(s->impl->calls);
  free(s->impl->lbd_storage);
  free(s->impl->report_armed);
  free(s->impl);
  free(s->dest);
  free(s->lbd);
  free(s);
}

void lb_sim_dest_set(lb_sim *s, size_t i, double capacity, unsigned workers) {
  s->dest[i].capacity = capacity;
  s->dest[i].workers = workers;
}

void lb_sim_set_down(lb_sim *s, size_t i, int down) {
  lb_sim_dest *d = &s->dest[i];
  if (d->down == !!down)
    return;
  d->down = !!down;
  if (!down)
    return;
  /* The connection is lost: the queue with it, and the client fails every
   * call still in flight there. Calls being served finish unseen. */
  while (d->q_len) {
    size_t ci = d->q_head;
    d->q_head = s->impl->calls[ci].next;
    d->q_len--;
    s->impl->calls[ci].server_done = 1;
    call_maybe_free(s, ci);
  }
  for (size_t ci = 0; ci < s->impl->ncalls; ci++) {
    sim_call *c = &s->impl->calls[ci];
    if (c->dest == i && !c->client_done)
      client_finish(s, ci, SLUICE_STATUS_UNAVAILABLE);
  }
  note_states(s);
}

void lb_sim_run(lb_sim *s, uint64_t duration_ns) {
  uint64_t end = s->now + duration_ns;
  arm(s);
  struct lb_sim_impl *m = s->impl;
  while (m->hn && m->heap[0].t <= end) {
    ev e = pop(s);
    s->now = e.t;
    sim_call *c =
        e.type == EV_ARRIVE || e.type == EV_REPORT ? NULL : &m->calls[e.idx];
    if (c && c->gen != e.gen)
      continue; /* the call ended and its slot was reused */
    switch (e.type) {
    case EV_ARRIVE:
      arrive(s, e.idx);
      break;
    case EV_AT_SERVER:
      server_arrive(s, e.idx);
      break;
    case EV_SERVED:
      server_served(s, e.idx);
      break;
    case EV_RESPONSE:
      if (!c->client_done)
        client_finish(s, e.idx, SLUICE_STATUS_OK);
      break;
    case EV_DEADLINE:
      if (!c->client_done)
        client_finish(s, e.idx, SLUICE_STATUS_DEADLINE_EXCEEDED);
      break;
    case EV_REPORT:
      server_report(s, e.idx);
      if (s->dest[e.idx].report_load)
        push(s, s->now + s->report_ns, EV_REPORT, e.idx, 0);
      else
        m->report_armed[e.idx] = 0;
      break;
    }
    note_states(s);
  }
  s->now = end;
}

void lb_sim_reset_stats(lb_sim *s) {
  for (size_t i = 0; i < s->n; i++) {
    lb_sim_dest *d = &s->dest[i];
    d->sent = d->ok = d->deadline = d->unavailable = 0;
    memset(d->path_sent, 0, sizeof d->path_sent);
    sluice__histogram_init(&d->lat_us);
  }
  for (size_t i = 0; i < LB_SIM_MAX_FLOWS; i++) {
    lb_sim_flow *f = &s->flow[i];
    f->offered = f->ok = f->deadline = f->unavailable = 0;
    memset(f->dropped, 0, sizeof f->dropped);
    sluice__histogram_init(&f->lat_us);
  }
  s->offered = s->ok = s->deadline = s->unavailable = 0;
  memset(s->dropped, 0, sizeof s->dropped);
  sluice__histogram_init(&s->lat_us);
}

void lb_sim_print(const lb_sim *s, const char *label) {
  for (size_t i = 0; i < s->n; i++) {
    const lb_sim_dest *d = &s->dest[i];
    const sluice__lb_dest *l = s->lbd[i];
    const char *st = s->lb.ops->state_name ? s->lb.ops->state_name(l) : "";
    printf("  %s dest %zu (%.0f/s, %u w): sent %llu ok %llu dl %llu unav "
           "%llu p50 %.2f ms p99 %.2f ms; limit %.1f est.limit %.1f in "
           "flight %u state %s\n",
           label, i, d->capacity, d->workers, (unsigned long long)d->sent,
           (unsigned long long)d->ok, (unsigned long long)d->deadline,
           (unsigned long long)d->unavailable,
           sluice__histogram_percentile(&d->lat_us, 50) / 1000.0,
           sluice__histogram_percentile(&d->lat_us, 99) / 1000.0, l->limit,
           l->est.limit, l->est.in_flight, st ? st : "");
  }
  printf("  %s total: offered %llu ok %llu dl %llu unav %llu dropped "
         "none %llu limit %llu path %llu deadline %llu; p50 %.2f ms p99 "
         "%.2f ms\n",
         label, (unsigned long long)s->offered, (unsigned long long)s->ok,
         (unsigned long long)s->deadline, (unsigned long long)s->unavailable,
         (unsigned long long)s->dropped[SLUICE__LB_NONE],
         (unsigned long long)s->dropped[SLUICE__LB_OVER_LIMIT],
         (unsigned long long)s->dropped[SLUICE__LB_PATH_LIMIT],
         (unsigned long long)s->dropped[SLUICE__LB_DEADLINE],
         sluice__histogram_percentile(&s->lat_us, 50) / 1000.0,
         sluice__histogram_percentile(&s->lat_us, 99) / 1000.0);
}
