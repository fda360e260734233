/* The picker: attempts -> the strategy -> a subchannel, early drop and the
 * wait queue. */
#include "client/picker.h"

#include "core/alloc.h"
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sluice__picker_init(sluice__picker *p, const sluice__lb_ops *ops,
                         uint32_t wait_max_len, uint32_t wait_max_ms,
                         sluice__loop *loop, void (*kick)(void *),
                         void (*closed)(void *), void *ud) {
  sluice__lb_init(&p->lb, ops ? ops : &sluice__lb_btc, NULL);
  memcpy(&p->pressure_bits, &p->lb.pressure, sizeof p->pressure_bits);
  sluice__list_init(&p->pending);
  sluice__list_init(&p->waiting);
  p->wait_max_len = wait_max_len;
  p->wait_max_ms = wait_max_ms;
  p->loop = loop;
  p->kick = kick;
  p->closed = closed;
  p->ud = ud;
}

static void on_wait_timer_closed(uv_handle_t *h) {
  sluice__picker *p = h->data;
  p->wait_timer_open = 0;
  p->closed(p->ud);
}

int sluice__picker_close(sluice__picker *p) {
  sluice__lb_free(&p->lb);
  free(p->views);
  p->views = NULL;
  p->views_cap = p->views_n = 0;
  p->views_stale = 1;
  if (!p->wait_timer_open)
    return 0;
  uv_close((uv_handle_t *)&p->wait_timer, on_wait_timer_closed);
  return 1;
}

uint32_t sluice__picker_path_id(sluice__picker *p,
                                const sluice_method_desc *m) {
  for (size_t i = 0; i < p->n_paths; i++)
    if (p->paths[i] == m)
      return (uint32_t)i;
  if (p->n_paths < SLUICE__LB_MAX_PATHS - 1) {
    p->paths[p->n_paths] = m;
    return (uint32_t)p->n_paths++;
  }
  return SLUICE__LB_MAX_PATHS - 1;
}

static void store_pressure(sluice__picker *p) {
  uint64_t bits;
  memcpy(&bits, &p->lb.pressure, sizeof bits);
  __atomic_store_n(&p->pressure_bits, bits, __ATOMIC_RELAXED);
}

/* Inside a chain, each decision is a sample of the channel's pressure:
 * what the destinations hold and what waits against their limits (or
 * what they report of their own downstream), at least 1 for a refusal.
 * Nothing
 * is kept at the edge (no parent would read it): no cost there. */
static void note_pressure(sluice__picker *p, sluice__lb_verdict v,
                          uint64_t now) {
  if (!p->lb.inner || v == SLUICE__LB_NONE)
    return;
  double sample = sluice__lb_pressure_sample(&p->lb, p->n_waiting, now);
  if (v != SLUICE__LB_PICKED && sample < 1)
    sample = 1; /* refused: at the limits at least */
  sluice__lb_pressure_note(&p->lb, sample, now);
  store_pressure(p);
}

double sluice__picker_pressure(const sluice__picker *p) {
  uint64_t bits = __atomic_load_n(&p->pressure_bits, __ATOMIC_RELAXED);
  double d;
  memcpy(&d, &bits, sizeof d);
  return d;
}

void sluice__picker_note_refusal(sluice__picker *p) {
  if (!p->lb.inner)
    return;
  sluice__lb_pressure_note(&p->lb, 1.0, sluice_now_ns());
  store_pressure(p);
}

/* The wait queue's bounds for pk: the channel's, or for a child call on a
 * channel without one, the implicit one. */
static uint32_t wait_len(const sluice__picker *p, const sluice__pick *pk) {
  return p->wait_max_len ? p->wait_max_len
         : pk->lbc.child ? SLUICE__CHILD_WAIT_LEN
                         : 0;
}
static uint32_t wait_ms(const sluice__picker *p) {
  return p->wait_max_len ? p->wait_max_ms : SLUICE__CHILD_WAIT_MS;
}

void sluice__picker_add(sluice__picker *p, sluice__pick *pk) {
  if (pk->lbc.child && !p->lb.inner) {
    p->lb.inner = 1; /* inside a chain from now on */
    store_pressure(p);
  }
  pk->wait_since = 0;
  sluice__list_push(&p->pending, &pk->link);
  p->n_queued++;
}

void sluice__picker_remove(sluice__picker *p, sluice__pick *pk) {
  if (sluice__list_linked(&pk->link))
    p->n_queued--;
  sluice__list_remove(&pk->link);
  if (pk->wait_since) {
    pk->wait_since = 0;
    p->n_waiting--;
  }
}

int sluice__picker_busy(const sluice__picker *p) {
  return !sluice__list_empty(&p->pending) || !sluice__list_empty(&p->waiting);
}

int sluice__picker_has_pending(const sluice__picker *p) {
  return !sluice__list_empty(&p->pending);
}

static const char *verdict_text(sluice__lb_verdict v) {
  switch (v) {
  case SLUICE__LB_OVER_LIMIT:
    return "every destination is at its concurrency limit";
  case SLUICE__LB_PATH_LIMIT:
    return "every destination is at its limit for this method";
  case SLUICE__LB_DEADLINE:
    return "the remaining deadline is shorter than the expected latency at "
           "every destination";
  default:
    return "no destination is connected";
  }
}

/* Fails pk locally, at once and without I/O. */
static void drop(sluice__picker *p, sluice__pick *pk, sluice__lb_verdict v,
                 const char *extra) {
  char msg[320];
  uint64_t now = sluice_now_ns();
  sluice__picker_remove(p, pk);
  p->dropped[extra ? SLUICE__DROP_WAIT : v]++;
  if (v == SLUICE__LB_DEADLINE) {
    uint64_t left = pk->lbc.deadline_ns > now ? pk->lbc.deadline_ns - now : 0;
    snprintf(msg, sizeof msg,
             "dropped locally by the %s strategy: %s (%" PRIu64
             " us left; decided in %" PRIu64 " us)",
             p->lb.ops->name, verdict_text(v), left / 1000,
             (now - pk->start_ns) / 1000);
    pk->ops->fail(pk, SLUICE_STATUS_DEADLINE_EXCEEDED, msg);
    return;
  }
  snprintf(msg, sizeof msg,
           "dropped locally by the %s strategy: %s (decided in %" PRIu64 " us)",
           p->lb.ops->name, extra ? extra : verdict_text(v),
           (now - pk->start_ns) / 1000);
  pk->ops->fail(pk, SLUICE_STATUS_RESOURCE_EXHAUSTED, msg);
}

static void on_wait_timer(uv_timer_t *t) {
  sluice__picker *p = t->data;
  p->kick(p->ud);
}

static void wait_timer_update(sluice__picker *p) {
  int want = p->n_waiting > 0;
  if (want == p->wait_timer_on)
    return;
  if (want && !p->wait_timer_open) {
    uv_timer_init(sluice__loop_uv(p->loop), &p->wait_timer);
    p->wait_timer.data = p;
    p->wait_timer_open = 1;
  }
  if (want) {
    uint64_t every = wait_ms(p) / 4 ? wait_ms(p) / 4 : 1;
    uv_timer_start(&p->wait_timer, on_wait_timer, every, every);
  } else {
    uv_timer_stop(&p->wait_timer);
  }
  p->wait_timer_on = want;
}

/* Health checking (A17) vetoes under every strategy. */
static int usable_now(const sluice__subchannel *sc) {
  return sc->state == SLUICE__SC_READY && sc->conn != NULL &&
         sluice__subchannel_healthy(sc);
}

void sluice__picker_dests_changed(sluice__picker *p) { p->views_stale = 1; }

void sluice__picker_refresh(sluice__picker *p, sluice__subchannel *sc) {
  int usable = usable_now(sc);
  if (usable != sc->lb.usable)
    sluice__lb_set_usable(&p->lb, &sc->lb, usable);
}

/* After a change of the set of subchannels: the balancer's table (and
 * its compact records) and every usable flag, from scratch (O(n), once per
 * change of the set; a pass does not look at the subchannels that did not
 * change). Returns 0, or -1 without memory. */
static int rebuild_views(sluice__picker *p, sluice__subchannel **scs,
                         size_t n) {
  if (p->views_cap < n) {
    sluice__lb_dest **v = sluice__realloc(p->views, n * sizeof *v);
    if (!v)
      return -1;
    p->views = v;
    p->views_cap = n;
  }
  for (size_t i = 0; i < n; i++) {
    sluice__subchannel *sc = scs[i];
    sc->lb.usable = usable_now(sc);
    p->views[i] = &sc->lb;
  }
  if (sluice__lb_set_dests(&p->lb, p->views, n) != 0)
    return -1;
  p->views_n = n;
  p->views_stale = 0;
  return 0;
}

/* Asks the strategy where pk may go. Returns PICKED with *out set, or why
 * not; *now is the decision's end. */
static sluice__lb_verdict decide(sluice__picker *p, sluice__subchannel **scs,
                                 size_t n, sluice__pick *pk,
                                 sluice__subchannel **out, uint64_t *now) {
  uint64_t t0 = sluice_now_ns();
  if (!pk->pick_ns)
    pk->pick_ns = t0;
  size_t idx = 0;
  /* A retry or hedge goes elsewhere than the attempt before it when some
   * other destination is usable (Envoy's previous_hosts idea). */
  /* pk->avoid may have been freed since: it is only compared until found
   * among the current destinations -- at its index when it was sent, in
   * O(1), or by a scan when the destinations changed since. */
  sluice__subchannel *avoid = NULL;
  if (pk->avoid) {
    size_t i = pk->avoid_index;
    if (i >= n || scs[i] != pk->avoid)
      for (i = 0; i < n && scs[i] != pk->avoid; i++)
        ;
    /* Another usable destination: n_usable counts this one too if it is
     * usable. */
    if (i < n && scs[i]->lb.usable && p->lb.n_usable > 1)
      avoid = scs[i];
  }
  if (avoid)
    sluice__lb_set_usable(&p->lb, &avoid->lb, 0);
  /* n == 0: an idle pass; the table may still list a removed set. */
  sluice__lb_verdict v =
      n ? sluice__lb_pick(&p->lb, &pk->lbc, t0, &idx) : SLUICE__LB_NONE;
  /* Restored, it also forgets what this pick found without it. */
  if (avoid)
    sluice__lb_set_usable(&p->lb, &avoid->lb, 1);
  uint64_t t1 = sluice_now_ns();
  *now = t1;
  if (v == SLUICE__LB_PICKED) {
    *out = scs[idx];
    pk->sc_index = (uint32_t)idx;
    (*out)->lb.stats.algo_ns_sum += t1 - t0;
    (*out)->lb.stats.algo_n++;
  }
  return v;
}

/* Tries to send pk. Returns 1 when it left the queue it was in (sent or
 * failed), 0 when it must wait for a stream or a connection. On an
 * admission refusal it is dropped, or moved to the wait queue. */
static int try_send(sluice__picker *p, sluice__subchannel **scs, size_t n,
                    sluice__pick *pk) {
  sluice__subchannel *sc = NULL;
  uint64_t now = 0;
  sluice__lb_verdict v = decide(p, scs, n, pk, &sc, &now);
  note_pressure(p, v, now);
  if (v == SLUICE__LB_NONE)
    return 0;
  if (v == SLUICE__LB_PICKED) {
    if (!sluice__subchannel_can_take(sc))
      return 0; /* HTTP/2 stream limit: wait for a stream, keep order */
    sluice__picker_remove(p, pk);
    int rv = sluice__subchannel_submit(sc, pk->cs, &pk->req);
    if (rv == SLUICE__CCONN_HEADERS_TOO_LARGE) {
      pk->ops->fail(pk, SLUICE_STATUS_RESOURCE_EXHAUSTED,
                    "request header list too large: over the server's "
                    "SETTINGS_MAX_HEADER_LIST_SIZE (not sent)");
      return 1;
    }
    if (rv != 0) {
      pk->ops->fail(pk, SLUICE_STATUS_INTERNAL,
                    "HTTP/2 layer refused the request");
      return 1;
    }
    pk->sc = sc;
    pk->sent_ns = now;
    sluice__lb_sent(&p->lb, &sc->lb, &pk->lbc, now);
    pk->ops->sent(pk);
    return 1;
  }
  if (pk->hedge) { /* never past a limit, never queued: not sent at all */
    sluice__picker_remove(p, pk);
    pk->ops->fail(pk, SLUICE_STATUS_RESOURCE_EXHAUSTED,
                  "hedge not sent: no destination admits it now");
    return 1;
  }
  /* Refused by every destination. Wait (bounded), or drop now. */
  uint32_t max_len = wait_len(p, pk);
  if (pk->wait_since) {
    if (now - pk->wait_since < (uint64_t)wait_ms(p) * 1000000u)
      return 0;
    char extra[160];
    snprintf(extra, sizeof extra,
             "%s, after waiting %" PRIu64 " ms in the wait queue",
             verdict_text(v), (now - pk->wait_since) / 1000000);
    drop(p, pk, v, extra);
    return 1;
  }
  if (v != SLUICE__LB_DEADLINE && max_len && p->n_waiting < max_len) {
    sluice__list_remove(&pk->link);
    sluice__list_push(&p->waiting, &pk->link);
    pk->wait_since = now;
    p->n_waiting++;
    return 1;
  }
  if (v != SLUICE__LB_DEADLINE && max_len) {
    char extra[160];
    snprintf(extra, sizeof extra,
             "%s and the wait queue is full (%" PRIu32 " calls)",
             verdict_text(v), max_len);
    drop(p, pk, v, extra);
    return 1;
  }
  drop(p, pk, v, NULL);
  return 1;
}

static void run_queue(sluice__picker *p, sluice__list *q,
                      sluice__subchannel **scs, size_t n) {
  sluice__list *head;
  while ((head = sluice__list_head(q)) != NULL)
    if (!try_send(p, scs, n, SLUICE__CONTAINER_OF(head, sluice__pick, link)))
      break;
}

int sluice__picker_run(sluice__picker *p, sluice__subchannel **scs, size_t n) {
  int rv = 0;
  /* n == 0: nothing to pick from (or an idle pass of the channel's): the
   * array is left for the next pass that has destinations. */
  if (!n || (!p->views_stale && p->views_n == n) ||
      rebuild_views(p, scs, n) == 0) {
    run_queue(p, &p->waiting, scs, n);
    run_queue(p, &p->pending, scs, n);
  } else {
    rv = SLUICE_ERR_NOMEM;
  }
  wait_timer_update(p);
  return rv;
}

static void fail_queue(sluice__picker *p, sluice__list *q,
                       sluice_status_code code, const char *msg, int drop,
                       int keep_wfr) {
  /* Wait-for-ready attempts stay, in their order, at the queue's head. */
  sluice__list kept;
  sluice__list_init(&kept);
  sluice__list *head;
  while ((head = sluice__list_head(q)) != NULL) {
    sluice__pick *pk = SLUICE__CONTAINER_OF(head, sluice__pick, link);
    if (keep_wfr && pk->wait_for_ready) {
      sluice__list_remove(head);
      sluice__list_push(&kept, head);
      continue;
    }
    sluice__picker_remove(p, pk);
    if (drop >= 0 && drop < SLUICE__N_DROPS)
      p->dropped[drop]++;
    pk->ops->fail(pk, code, msg);
  }
  while ((head = sluice__list_head(&kept)) != NULL) {
    sluice__list_remove(head);
    sluice__list_push(q, head);
  }
}

void sluice__picker_fail_pending(sluice__picker *p, sluice_status_code code,
                                 const char *msg, int drop) {
  fail_queue(p, &p->pending, code, msg, drop, 1);
}

void sluice__picker_fail_all(sluice__picker *p, sluice_status_code code,
                             const char *msg) {
  fail_queue(p, &p->pending, code, msg, -1, 0);
  fail_queue(p, &p->waiting, code, msg, -1, 0);
  wait_timer_update(p);
}

void sluice__picker_flushed(sluice__pick *pk) {
  if (pk->strat_done || !pk->sc)
    return;
  /* Strategy time: from the first decision until the request leaves. */
  pk->strat_done = 1;
  pk->sc->lb.stats.strat_ns_sum += sluice_now_ns() - pk->pick_ns;
  pk->sc->lb.stats.strat_n++;
}

void sluice__picker_done(sluice__picker *p, sluice__pick *pk,
                         sluice_status_code code, uint64_t resp_bytes) {
  sluice__subchannel *sc = pk->sc;
  if (!sc)
    return;
  pk->sc = NULL;
  uint64_t now = sluice_now_ns();
  sluice__lb_complete(
      &p->lb, &sc->lb, &pk->lbc, now - pk->sent_ns, code,
      (uint32_t)(resp_bytes > UINT32_MAX ? UINT32_MAX : resp_bytes), now);
}

void sluice__picker_unsent(sluice__picker *p, sluice__pick *pk) {
  if (pk->sc)
    sluice__lb_unsent(&p->lb, &pk->sc->lb, &pk->lbc);
  pk->sc = NULL;
  pk->strat_done = 0;
}
