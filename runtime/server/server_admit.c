/* Admission of server calls: concurrency limits (server-wide and per
 * method), a bounded FIFO queue per loop for calls over a limit, CoDel
 * shedding on queue time, and the load report sent in every response's
 * trailers (ORCA, endpoint-load-metrics-bin).
 *
 * Slots. A call takes a slot when its handler is about to run and gives it
 * back when the handler calls finish (sluice__admit_release, on the call's
 * loop). The counters are atomics shared by all loops: srv->in_flight
 * (bounded by max_calls when set) and route->in_flight (bounded by the
 * method's limit).
 *
 * Waiting. A call that finds no slot, or finds calls already waiting
 * anywhere (srv->waiting > 0: no overtaking), joins its loop's queue. A
 * loop admits from its own queue (oldest first; a call blocked only by its
 * method's limit is passed over, so one saturated method does not hold up
 * the others) when one of its own calls finishes, and when another loop
 * posts it a wake-up. Freeing a slot is: decrement the counter, then look
 * at srv->waiting and each loop's n_waiting, and post wake_task to every
 * other loop with waiters. Queueing is: increment n_waiting and
 * srv->waiting, then try to take a slot. Both sides use sequentially
 * consistent atomics, so either the releaser sees the waiter or the waiter
 * sees the free slot: no call waits while a slot is free. Order is FIFO
 * within a loop and approximate across loops (a loop may take a slot that
 * a woken loop was about to take).
 *
 * Shedding (CoDel, RFC 8289, on the queue of each loop, target and
 * interval from the options): the sojourn of a call is the time from its
 * request being ready (complete; headers for streaming requests) to its
 * handler starting. The queue's oldest call is looked at whenever the
 * queue changes and by a timer at the next decision time: once the sojourn
 * has stayed above target for an interval the queue enters the dropping
 * state and sheds its oldest call, then one more every interval/sqrt(count),
 * until a sojourn is below target or the queue is empty. Shed calls and
 * calls refused by a full queue get RESOURCE_EXHAUSTED with
 * grpc-retry-pushback-ms. */
#include <stdio.h>
#include <string.h>

#include "server/server_internal.h"
#include "wire/base64.h"
#include "wire/orca.h"

#define MS 1000000ull

enum { ADMITTED, SERVER_FULL, METHOD_FULL };

static void wake_others(sluice__sloop *sl);

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

/* Increments *counter if it is below max (0: unbounded). */
static int take(int *counter, uint32_t max) {
  if (!max) {
    __atomic_fetch_add(counter, 1, __ATOMIC_SEQ_CST);
    return 1;
  }
  int v = __atomic_load_n(counter, __ATOMIC_SEQ_CST);
  while (v < (int)max)
    if (__atomic_compare_exchange_n(counter, &v, v + 1, 1, __ATOMIC_SEQ_CST,
                                    __ATOMIC_SEQ_CST))
      return 1;
  return 0;
}

/* Takes a slot for call: the method's first (a plain check), then the
 * server's, then the method's for real. */
static int acquire(sluice_server_call *call) {
  sluice_server *srv = call->srv;
  sluice__route *r = (sluice__route *)call->route;
  if (r->limit &&
      __atomic_load_n(&r->in_flight, __ATOMIC_SEQ_CST) >= (int)r->limit)
    return METHOD_FULL;
  if (!take(&srv->in_flight, srv->opts.max_calls))
    return SERVER_FULL;
  if (r->limit && !take(&r->in_flight, r->limit)) {
    /* Lost a race for the method's last slot: give the server's back. */
    __atomic_fetch_sub(&srv->in_flight, 1, __ATOMIC_SEQ_CST);
    wake_others(call->sl);
    return METHOD_FULL;
  }
  call->slot = 1;
  return ADMITTED;
}

static void account_queue_time(sluice_server *srv, uint64_t ns) {
  __atomic_fetch_add(&srv->q_sum_us, ns / 1000, __ATOMIC_RELAXED);
  __atomic_fetch_add(&srv->q_n, 1, __ATOMIC_RELAXED);
}

/* ---- the queue */

static sluice_server_call *oldest(const sluice__sloop *sl) {
  sluice__list *n = sluice__list_head(&sl->queue);
  return n ? SLUICE__CONTAINER_OF(n, sluice_server_call, q_link) : NULL;
}

void sluice__admit_dequeue(sluice_server_call *call) {
  if (!sluice__list_linked(&call->q_link))
    return;
  sluice__sloop *sl = call->sl;
  sluice__list_remove(&call->q_link);
  __atomic_fetch_sub(&call->srv->waiting, 1, __ATOMIC_SEQ_CST);
  __atomic_fetch_sub(&sl->n_waiting, 1, __ATOMIC_SEQ_CST);
}

/* ---- CoDel */

/* floor(sqrt(x)) */
static uint64_t isqrt(uint64_t x) {
  if (x < 2)
    return x;
  uint64_t r = x, y = (r + 1) / 2;
  while (y < r) {
    r = y;
    y = (r + x / r) / 2;
  }
  return r;
}

/* t + interval / sqrt(count) */
static uint64_t control_law(const sluice_server *srv, uint64_t t,
                            uint32_t count) {
  uint64_t interval = (uint64_t)srv->opts.codel_interval_ms * MS;
  /* interval * 2^16 / sqrt(count * 2^32): 16 bits of fraction */
  uint64_t s = isqrt((uint64_t)(count ? count : 1) << 32);
  return t + (interval << 16) / s;
}

static void shed(sluice_server_call *call, uint64_t sojourn) {
  sluice_server *srv = call->srv;
  char msg[96];
  snprintf(msg, sizeof msg, "shed by server: queued %llu ms > target %u ms",
           (unsigned long long)(sojourn / MS), srv->opts.codel_target_ms);
  sluice__admit_dequeue(call);
  account_queue_time(srv, sojourn);
  sluice__scall_shed(call, SLUICE_STATUS_RESOURCE_EXHAUSTED, msg,
                     srv->opts.codel_interval_ms);
}

static void codel_check(sluice__sloop *sl);

static void on_codel_timer(uv_timer_t *t) { codel_check(t->data); }

/* Sheds what the control law says, then arms the timer for the next
 * decision. */
static void codel_check(sluice__sloop *sl) {
  sluice_server *srv = sl->srv;
  if (!srv->opts.codel_target_ms || sl->closing)
    return;
  sluice__codel *c = &sl->codel;
  uint64_t target = (uint64_t)srv->opts.codel_target_ms * MS;
  uint64_t interval = (uint64_t)srv->opts.codel_interval_ms * MS;
  uint64_t now = sluice_now_ns();
  for (;;) {
    sluice_server_call *head = oldest(sl);
    if (!head) {
      c->first_above = 0;
      c->dropping = 0;
      if (sl->codel_timer_open)
        uv_timer_stop(&sl->codel_timer);
      return;
    }
    uint64_t sojourn = now > head->ready_ns ? now - head->ready_ns : 0;
    int ok_to_drop = 0;
    if (sojourn < target)
      c->first_above = 0;
    else if (!c->first_above)
      c->first_above = now + interval;
    else if (now >= c->first_above)
      ok_to_drop = 1;
    if (c->dropping) {
      if (!ok_to_drop) {
        c->dropping = 0;
      } else if (now >= c->drop_next) {
        shed(head, sojourn);
        c->count++;
        c->drop_next = control_law(srv, c->drop_next, c->count);
        continue;
      }
    } else if (ok_to_drop) {
      shed(head, sojourn);
      c->dropping = 1;
      uint32_t delta = c->count - c->lastcount;
      c->count = delta > 1 && now - c->drop_next < 16 * interval ? delta : 1;
      c->drop_next = control_law(srv, now, c->count);
      c->lastcount = c->count;
      continue;
    }
    break;
  }
  uint64_t next = c->dropping      ? c->drop_next
                  : c->first_above ? c->first_above
                                   : oldest(sl)->ready_ns + target;
  uint64_t delay = next > now ? (next - now + MS - 1) / MS : 1;
  if (!sl->codel_timer_open) {
    uv_timer_init(sluice__loop_uv(sl->loop), &sl->codel_timer);
    sl->codel_timer.data = sl;
    sl->codel_timer_open = 1;
  }
  uv_timer_start(&sl->codel_timer, on_codel_timer, delay ? delay : 1, 0);
}

/* A call left the queue for its handler after sojourn: a sojourn below
 * target ends the dropping state (RFC 8289: ok_to_drop is false). */
static void codel_sample(sluice__sloop *sl, uint64_t sojourn) {
  if (!sl->srv->opts.codel_target_ms)
    return;
  if (sojourn < (uint64_t)sl->srv->opts.codel_target_ms * MS) {
    sl->codel.first_above = 0;
    sl->codel.dropping = 0;
  }
}

/* ---- admitting */

/* Runs every queued call that can take a slot, oldest first. */
static void drain(sluice__sloop *sl) {
  if (sl->closing)
    return;
  uint64_t now = 0;
  SLUICE__LIST_FOREACH_SAFE(n, &sl->queue) {
    sluice_server_call *call =
        SLUICE__CONTAINER_OF(n, sluice_server_call, q_link);
    if (!now)
      now = sluice_now_ns();
    uint64_t sojourn = now > call->ready_ns ? now - call->ready_ns : 0;
    if (call->deadline_ns && now >= call->deadline_ns) {
      /* Its timer has not fired yet: it would not run anyway. */
      char msg[96];
      snprintf(msg, sizeof msg,
               "deadline exceeded while queued on the server (%llu ms)",
               (unsigned long long)(sojourn / MS));
      sluice__admit_dequeue(call);
      sluice__scall_fail(call, SLUICE_STATUS_DEADLINE_EXCEEDED, msg);
    } else {
      int r = acquire(call);
      if (r == SERVER_FULL)
        break;
      if (r == ADMITTED) {
        sluice__admit_dequeue(call);
        account_queue_time(call->srv, sojourn);
        codel_sample(sl, sojourn);
        sluice__scall_run(call);
        now = 0; /* the handler took time */
      }
    }
  }
}

static void on_wake(sluice__task *t) {
  sluice__sloop *sl = SLUICE__CONTAINER_OF(t, sluice__sloop, wake_task);
  __atomic_store_n(&sl->wake_posted, 0, __ATOMIC_SEQ_CST);
  drain(sl);
  codel_check(sl);
}

/* A slot was freed on sl: wake every other loop with waiters. Under mu so
 * that no loop is posted to once shutdown has started deleting them. */
static void wake_others(sluice__sloop *sl) {
  sluice_server *srv = sl->srv;
  if (srv->n_loops < 2 || __atomic_load_n(&srv->waiting, __ATOMIC_SEQ_CST) == 0)
    return;
  uv_mutex_lock(&srv->mu);
  if (!srv->stopped)
    for (unsigned i = 0; i < srv->n_loops; i++) {
      sluice__sloop *o = &srv->loops[i];
      if (o != sl && __atomic_load_n(&o->n_waiting, __ATOMIC_SEQ_CST) > 0 &&
          !__atomic_exchange_n(&o->wake_posted, 1, __ATOMIC_SEQ_CST))
        sluice__loop_post(o->loop, &o->wake_task);
    }
  uv_mutex_unlock(&srv->mu);
}

/* pushback for a call refused by a full queue: the backlog as seen now (the
 * oldest wait on this loop, the recent mean queue time), at least 10 ms. */
static uint32_t backlog_ms(sluice__sloop *sl) {
  uint64_t ms = 10;
  sluice_server_call *head = oldest(sl);
  if (head) {
    uint64_t now = sluice_now_ns();
    if (now > head->ready_ns && (now - head->ready_ns) / MS > ms)
      ms = (now - head->ready_ns) / MS;
  }
  double mean = load_double(&sl->srv->queue_ms_bits);
  if (mean > (double)ms)
    ms = (uint64_t)mean;
  return ms > UINT32_MAX ? UINT32_MAX : (uint32_t)ms;
}

void sluice__admit(sluice_server_call *call) {
  sluice_server *srv = call->srv;
  sluice__sloop *sl = call->sl;
  if (!srv->limits) {
    if (srv->count_calls) {
      __atomic_fetch_add(&srv->in_flight, 1, __ATOMIC_RELAXED);
      call->slot = 1;
    }
    sluice__scall_run(call);
    return;
  }
  call->ready_ns = sluice_now_ns();
  /* Nobody waits: run now if a slot is free. */
  if (__atomic_load_n(&srv->waiting, __ATOMIC_SEQ_CST) == 0 &&
      acquire(call) == ADMITTED) {
    account_queue_time(srv, 0);
    sluice__scall_run(call);
    return;
  }
  if (!srv->opts.max_queue) {
    /* No queue at all: a slot now or a refusal. */
    if (acquire(call) == ADMITTED) {
      account_queue_time(srv, 0);
      sluice__scall_run(call);
      return;
    }
    sluice__scall_shed(call, SLUICE_STATUS_RESOURCE_EXHAUSTED,
                       "server at its concurrency limit (no queue)",
                       backlog_ms(sl));
    return;
  }
  /* Wait, if the queue has room (n_waiting first: see wake_others). */
  __atomic_fetch_add(&sl->n_waiting, 1, __ATOMIC_SEQ_CST);
  if (!take(&srv->waiting, srv->opts.max_queue)) {
    __atomic_fetch_sub(&sl->n_waiting, 1, __ATOMIC_SEQ_CST);
    if (acquire(call) == ADMITTED) {
      /* The queue is full of calls of a saturated method, or a slot has
       * just been freed: this one can run. */
      account_queue_time(srv, 0);
      sluice__scall_run(call);
      return;
    }
    char msg[64];
    snprintf(msg, sizeof msg, "server queue full (%u)", srv->opts.max_queue);
    sluice__scall_shed(call, SLUICE_STATUS_RESOURCE_EXHAUSTED, msg,
                       backlog_ms(sl));
    return;
  }
  sluice__list_push(&sl->queue, &call->q_link);
  drain(sl);
  codel_check(sl);
}

void sluice__admit_release(sluice_server_call *call, int on_loop) {
  if (!call->slot)
    return;
  call->slot = 0;
  sluice_server *srv = call->srv;
  sluice__route *r = (sluice__route *)call->route;
  __atomic_fetch_add(&srv->completions, 1, __ATOMIC_RELAXED);
  if (r->limit)
    __atomic_fetch_sub(&r->in_flight, 1, __ATOMIC_SEQ_CST);
  __atomic_fetch_sub(&srv->in_flight, 1, __ATOMIC_SEQ_CST);
  if (!srv->limits || !on_loop)
    return;
  drain(call->sl);
  codel_check(call->sl);
  wake_others(call->sl);
}

void sluice__admit_init(sluice_server *srv) {
  srv->win_start = sluice_now_ns();
  for (unsigned i = 0; i < srv->n_loops; i++)
    srv->loops[i].wake_task.fn = on_wake;
}

static void on_codel_timer_closed(uv_handle_t *h) { (void)h; }

void sluice__admit_loop_close(sluice__sloop *sl) {
  sl->closing = 1;
  if (sl->codel_timer_open) {
    sl->codel_timer_open = 0;
    uv_close((uv_handle_t *)&sl->codel_timer, on_codel_timer_closed);
  }
}

/* ---- the load report */

/* Rolls the ~1 s window if it is over (one thread at a time; the others
 * read the last values). */
static void roll_window(sluice_server *srv, uint64_t now) {
  uint64_t start = __atomic_load_n(&srv->win_start, __ATOMIC_ACQUIRE);
  if (now - start < 1000 * MS || uv_mutex_trylock(&srv->win_mu) != 0)
    return;
  start = __atomic_load_n(&srv->win_start, __ATOMIC_ACQUIRE);
  if (now - start >= 1000 * MS) {
    uint64_t done = load64(&srv->completions);
    uint64_t qs = load64(&srv->q_sum_us), qn = load64(&srv->q_n);
    store_double(&srv->rps_bits, (double)(done - srv->win_completions) * 1e9 /
                                     (double)(now - start));
    store_double(&srv->queue_ms_bits,
                 qn > srv->win_q_n ? (double)(qs - srv->win_q_sum_us) / 1000.0 /
                                         (double)(qn - srv->win_q_n)
                                   : 0.0);
    srv->win_completions = done;
    srv->win_q_sum_us = qs;
    srv->win_q_n = qn;
    __atomic_store_n(&srv->win_start, now, __ATOMIC_RELEASE);
  }
  uv_mutex_unlock(&srv->win_mu);
}

int sluice_server_set_utilization(sluice_server *srv, double utilization) {
  if (!srv || utilization != utilization) /* NaN */
    return SLUICE_ERR_INVALID_ARG;
  store_double(&srv->app_util_bits, utilization < 0 ? -1.0 : utilization);
  return 0;
}

size_t sluice__load_report(sluice_server *srv, char *out) {
  if (!srv->opts.load_report)
    return 0;
  roll_window(srv, sluice_now_ns());
  int in_flight = __atomic_load_n(&srv->in_flight, __ATOMIC_RELAXED);
  if (in_flight < 0)
    in_flight = 0;
  sluice__orca r;
  sluice__orca_init(&r);
  /* A concurrency utilization only against a known capacity: without a
   * limit, in-flight calls say nothing about how busy the handlers are (2
   * calls saturate a 2-worker service), and a guessed low figure made
   * clients read a saturated server as idle. */
  if (srv->opts.max_calls)
    r.cpu_utilization = (double)in_flight / (double)srv->opts.max_calls;
  r.application_utilization = load_double(&srv->app_util_bits);
  r.rps_fractional = load_double(&srv->rps_bits);
  r.queue_ms = load_double(&srv->queue_ms_bits);
  r.in_flight = in_flight;
  uint8_t buf[SLUICE__ORCA_MAX];
  size_t n = sluice__orca_encode(&r, buf, sizeof buf);
  if (!n || sluice__base64_encoded_len(n) >= SLUICE__LOAD_REPORT_B64)
    return 0;
  return sluice__base64_encode(buf, n, out);
}
