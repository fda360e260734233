/* Admission of server calls: concurrency limits (server-wide and per
 * method), a bounded FIFO queue per loop for calls over a limit, and CoDel
 * shedding on queue time. A call is an item here (admit.h): what it
 * becomes is returned, or told through the item's ops.
 *
 * Slots. A call takes a slot when its handler is about to run and gives it
 * back when the handler calls finish (sluice__admit_release, on the call's
 * loop). The counters are atomics shared by all loops: a->in_flight
 * (bounded by max_calls when set) and the method's limit->in_flight.
 *
 * Waiting. A call that finds no slot, or finds calls already waiting
 * anywhere (a->waiting > 0: no overtaking), joins its loop's queue. A
 * loop admits from its own queue (oldest first; a call blocked only by its
 * method's limit is passed over, so one saturated method does not hold up
 * the others) when one of its own calls finishes, and when another loop
 * posts it a wake-up. Freeing a slot is: decrement the counter, then look
 * at a->waiting and each loop's n_waiting, and post wake_task to every
 * other loop with waiters. Queueing is: increment n_waiting and
 * a->waiting, then try to take a slot. Both sides use sequentially
 * consistent atomics, so either the releaser sees the waiter or the waiter
 * sees the free slot: no call waits while a slot is free. Order is FIFO
 * within a loop and approximate across loops (a loop may take a slot that
 * a woken loop was about to take).
 *
 * Shedding (CoDel, RFC 8289, on the queue of each loop, target and
 * interval from the options): the sojourn of a call is the time from its
 * request being ready (complete; headers for streaming requests) to its
 * leaving the queue for its handler (which runs in the same loop turn). The
 * queue's oldest call is looked at whenever the queue changes and by a timer at
 * the next decision time: once the sojourn has stayed above target for an
 * interval the queue enters the dropping state and sheds its oldest call, then
 * one more every interval/sqrt(count), until a sojourn is below target or the
 * queue is empty. Shed calls and calls refused by a full queue get
 * RESOURCE_EXHAUSTED with grpc-retry-pushback-ms. */
#include "server/admit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "sluice/clock.h"

#define MS 1000000ull

enum { ADMITTED, SERVER_FULL, METHOD_FULL };

static void wake_others(sluice__admit_queue *q);

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

/* Takes a slot for it: the method's first (a plain check), then the
 * server's, then the method's for real. */
static int acquire(sluice__admit_queue *q, sluice__admit_item *it) {
  sluice__admission *a = q->adm;
  sluice__admit_limit *m = it->limit;
  if (m->limit &&
      __atomic_load_n(&m->in_flight, __ATOMIC_SEQ_CST) >= (int)m->limit)
    return METHOD_FULL;
  if (!take(&a->in_flight, a->max_calls))
    return SERVER_FULL;
  if (m->limit && !take(&m->in_flight, m->limit)) {
    /* Lost a race for the method's last slot: give the server's back. */
    __atomic_fetch_sub(&a->in_flight, 1, __ATOMIC_SEQ_CST);
    wake_others(q);
    return METHOD_FULL;
  }
  it->slot = 1;
  it->slot_ns = sluice_now_ns();
  return ADMITTED;
}

/* ---- the queue */

static sluice__admit_item *oldest(const sluice__admit_queue *q) {
  sluice__list *n = sluice__list_head(&q->items);
  return n ? SLUICE__CONTAINER_OF(n, sluice__admit_item, link) : NULL;
}

void sluice__admit_dequeue(sluice__admit_queue *q, sluice__admit_item *it) {
  if (!sluice__admit_queued(it))
    return;
  sluice__list_remove(&it->link);
  __atomic_fetch_sub(&q->adm->waiting, 1, __ATOMIC_SEQ_CST);
  __atomic_fetch_sub(&q->n_waiting, 1, __ATOMIC_SEQ_CST);
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
static uint64_t control_law(const sluice__admission *a, uint64_t t,
                            uint32_t count) {
  uint64_t interval = (uint64_t)a->codel_interval_ms * MS;
  /* interval * 2^16 / sqrt(count * 2^32): 16 bits of fraction */
  uint64_t s = isqrt((uint64_t)(count ? count : 1) << 32);
  return t + (interval << 16) / s;
}

static void shed(sluice__admit_queue *q, sluice__admit_item *it,
                 uint64_t sojourn) {
  sluice__admission *a = q->adm;
  char msg[96];
  snprintf(msg, sizeof msg, "shed by server: queued %llu ms > target %u ms",
           (unsigned long long)(sojourn / MS), a->codel_target_ms);
  sluice__admit_dequeue(q, it);
  sluice__load_queued(a->load, sojourn);
  it->ops->shed(it, SLUICE_STATUS_RESOURCE_EXHAUSTED, msg,
                a->codel_interval_ms);
}

static void codel_check(sluice__admit_queue *q);

static void on_codel_timer(uv_timer_t *t) { codel_check(t->data); }

/* Sheds what the control law says, then arms the timer for the next
 * decision. */
static void codel_check(sluice__admit_queue *q) {
  sluice__admission *a = q->adm;
  if (!a->codel_target_ms || q->closing)
    return;
  sluice__codel *c = &q->codel;
  uint64_t target = (uint64_t)a->codel_target_ms * MS;
  uint64_t interval = (uint64_t)a->codel_interval_ms * MS;
  uint64_t now = sluice_now_ns();
  for (;;) {
    sluice__admit_item *head = oldest(q);
    if (!head) {
      c->first_above = 0;
      c->dropping = 0;
      if (q->codel_timer_open)
        uv_timer_stop(&q->codel_timer);
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
        shed(q, head, sojourn);
        c->count++;
        c->drop_next = control_law(a, c->drop_next, c->count);
        continue;
      }
    } else if (ok_to_drop) {
      shed(q, head, sojourn);
      c->dropping = 1;
      uint32_t delta = c->count - c->lastcount;
      c->count = delta > 1 && now - c->drop_next < 16 * interval ? delta : 1;
      c->drop_next = control_law(a, now, c->count);
      c->lastcount = c->count;
      continue;
    }
    break;
  }
  uint64_t next = c->dropping      ? c->drop_next
                  : c->first_above ? c->first_above
                                   : oldest(q)->ready_ns + target;
  uint64_t delay = next > now ? (next - now + MS - 1) / MS : 1;
  if (!q->codel_timer_open) {
    uv_timer_init(sluice__loop_uv(q->loop), &q->codel_timer);
    q->codel_timer.data = q;
    q->codel_timer_open = 1;
  }
  uv_timer_start(&q->codel_timer, on_codel_timer, delay ? delay : 1, 0);
}

/* An item left the queue for its handler after sojourn: a sojourn below
 * target ends the dropping state (RFC 8289: ok_to_drop is false). */
static void codel_sample(sluice__admit_queue *q, uint64_t sojourn) {
  if (!q->adm->codel_target_ms)
    return;
  if (sojourn < (uint64_t)q->adm->codel_target_ms * MS) {
    q->codel.first_above = 0;
    q->codel.dropping = 0;
  }
}

/* ---- admitting */

/* Runs every queued item that can take a slot, oldest first. */
static void drain(sluice__admit_queue *q) {
  if (q->closing)
    return;
  uint64_t now = 0;
  SLUICE__LIST_FOREACH_SAFE(n, &q->items) {
    sluice__admit_item *it = SLUICE__CONTAINER_OF(n, sluice__admit_item, link);
    if (!now)
      now = sluice_now_ns();
    uint64_t sojourn = now > it->ready_ns ? now - it->ready_ns : 0;
    if (it->deadline_ns && now >= it->deadline_ns) {
      /* Its timer has not fired yet: it would not run anyway. */
      char msg[96];
      snprintf(msg, sizeof msg,
               "deadline exceeded while queued on the server (%llu ms)",
               (unsigned long long)(sojourn / MS));
      sluice__admit_dequeue(q, it);
      it->ops->shed(it, SLUICE_STATUS_DEADLINE_EXCEEDED, msg, 0);
    } else {
      int r = acquire(q, it);
      if (r == SERVER_FULL)
        break;
      if (r == ADMITTED) {
        sluice__admit_dequeue(q, it);
        sluice__load_queued(q->adm->load, sojourn);
        codel_sample(q, sojourn);
        it->ops->run(it);
      }
    }
  }
}

static void on_wake(sluice__task *t) {
  sluice__admit_queue *q =
      SLUICE__CONTAINER_OF(t, sluice__admit_queue, wake_task);
  __atomic_store_n(&q->wake_posted, 0, __ATOMIC_SEQ_CST);
  drain(q);
  codel_check(q);
}

/* A slot was freed on q's loop: wake every other loop with waiters. Under
 * mu so that no loop is posted to once shutdown has started deleting
 * them. */
static void wake_others(sluice__admit_queue *q) {
  sluice__admission *a = q->adm;
  if (a->n_queues < 2 || __atomic_load_n(&a->waiting, __ATOMIC_SEQ_CST) == 0)
    return;
  uv_mutex_lock(&a->mu);
  if (!a->stopped)
    for (unsigned i = 0; i < a->n_queues; i++) {
      sluice__admit_queue *o = &a->queues[i];
      if (o != q && __atomic_load_n(&o->n_waiting, __ATOMIC_SEQ_CST) > 0 &&
          !__atomic_exchange_n(&o->wake_posted, 1, __ATOMIC_SEQ_CST))
        sluice__loop_post(o->loop, &o->wake_task);
    }
  uv_mutex_unlock(&a->mu);
}

/* pushback for a call refused by a full queue: the backlog as seen now (the
 * oldest wait on this loop, the recent mean queue time) or, without a
 * queue, the mean time until one of the held slots frees (the mean hold
 * time over the slots held), at least 10 ms: a stock gRPC client retries
 * after exactly that long, so a pushback shorter than a handler's run only
 * burns its attempts. */
static uint32_t backlog_ms(sluice__admit_queue *q) {
  uint64_t ms = 10;
  if (!q->adm->max_queue) {
    uint64_t svc = __atomic_load_n(&q->adm->service_ns, __ATOMIC_RELAXED);
    int held = __atomic_load_n(&q->adm->in_flight, __ATOMIC_RELAXED);
    uint64_t wait = svc / MS / (uint64_t)(held > 1 ? held : 1);
    if (wait > ms)
      ms = wait;
  }
  sluice__admit_item *head = oldest(q);
  if (head) {
    uint64_t now = sluice_now_ns();
    if (now > head->ready_ns && (now - head->ready_ns) / MS > ms)
      ms = (now - head->ready_ns) / MS;
  }
  double mean = sluice__load_queue_ms(q->adm->load);
  if (mean > (double)ms)
    ms = (uint64_t)mean;
  return ms > UINT32_MAX ? UINT32_MAX : (uint32_t)ms;
}

static sluice__admit_verdict refuse(sluice__admit_queue *q,
                                    sluice__admit_refusal *why,
                                    const char *message) {
  why->code = SLUICE_STATUS_RESOURCE_EXHAUSTED;
  snprintf(why->message, sizeof why->message, "%s", message);
  why->pushback_ms = backlog_ms(q);
  return SLUICE__ADMIT_REFUSED;
}

sluice__admit_verdict sluice__admit(sluice__admit_queue *q,
                                    sluice__admit_item *it,
                                    sluice__admit_refusal *why) {
  sluice__admission *a = q->adm;
  if (!a->limits) {
    if (a->count_calls) {
      __atomic_fetch_add(&a->in_flight, 1, __ATOMIC_RELAXED);
      it->slot = 1;
    }
    return SLUICE__ADMIT_RUN;
  }
  it->ready_ns = sluice_now_ns();
  /* Nobody waits: run now if a slot is free. */
  if (__atomic_load_n(&a->waiting, __ATOMIC_SEQ_CST) == 0 &&
      acquire(q, it) == ADMITTED) {
    sluice__load_queued(a->load, 0);
    return SLUICE__ADMIT_RUN;
  }
  if (!a->max_queue) {
    /* No queue at all: a slot now or a refusal. */
    if (acquire(q, it) == ADMITTED) {
      sluice__load_queued(a->load, 0);
      return SLUICE__ADMIT_RUN;
    }
    return refuse(q, why, "server at its concurrency limit (no queue)");
  }
  /* Wait, if the queue has room (n_waiting first: see wake_others). */
  __atomic_fetch_add(&q->n_waiting, 1, __ATOMIC_SEQ_CST);
  if (!take(&a->waiting, a->max_queue)) {
    __atomic_fetch_sub(&q->n_waiting, 1, __ATOMIC_SEQ_CST);
    if (acquire(q, it) == ADMITTED) {
      /* The queue is full of calls of a saturated method, or a slot has
       * just been freed: this one can run. */
      sluice__load_queued(a->load, 0);
      return SLUICE__ADMIT_RUN;
    }
    char msg[64];
    snprintf(msg, sizeof msg, "server queue full (%u)", a->max_queue);
    return refuse(q, why, msg);
  }
  sluice__list_push(&q->items, &it->link);
  drain(q);
  codel_check(q);
  return SLUICE__ADMIT_QUEUED;
}

void sluice__admit_release(sluice__admit_queue *q, sluice__admit_item *it,
                           int on_loop) {
  if (!it->slot)
    return;
  it->slot = 0;
  sluice__admission *a = q->adm;
  sluice__load_completed(a->load);
  if (a->limits && it->slot_ns) {
    /* A moving mean (1/8) of how long a slot is held; updates from several
     * loops may lose one another's, which only slows the mean. */
    uint64_t d = sluice_now_ns() - it->slot_ns;
    uint64_t m = __atomic_load_n(&a->service_ns, __ATOMIC_RELAXED);
    __atomic_store_n(&a->service_ns, m ? m - m / 8 + d / 8 : d,
                     __ATOMIC_RELAXED);
  }
  if (it->limit->limit)
    __atomic_fetch_sub(&it->limit->in_flight, 1, __ATOMIC_SEQ_CST);
  __atomic_fetch_sub(&a->in_flight, 1, __ATOMIC_SEQ_CST);
  if (!a->limits || !on_loop)
    return;
  drain(q);
  codel_check(q);
  wake_others(q);
}

int sluice__admit_in_flight(sluice__admission *a) {
  return __atomic_load_n(&a->in_flight, __ATOMIC_RELAXED);
}

void sluice__admit_item_init(sluice__admit_item *it,
                             const sluice__admit_ops *ops) {
  it->ops = ops;
  sluice__list_init(&it->link);
}

/* ---- set-up and teardown */

void sluice__admit_init(sluice__admission *a, const sluice_server_opts *o,
                        sluice__load *load) {
  memset(a, 0, sizeof *a);
  a->max_calls = o->max_calls;
  a->max_queue = o->max_queue;
  a->codel_target_ms = o->codel_target_ms;
  a->codel_interval_ms = o->codel_interval_ms;
  a->limits = o->max_calls > 0;
  for (size_t i = 0; i < o->n_method_limits; i++)
    a->limits |= o->method_limits[i].limit > 0;
  a->count_calls = a->limits || o->load_report;
  a->load = load;
  uv_mutex_init(&a->mu);
}

int sluice__admit_start(sluice__admission *a, unsigned n) {
  a->queues = sluice__calloc(n ? n : 1, sizeof *a->queues);
  return a->queues ? 0 : SLUICE_ERR_NOMEM;
}

sluice__admit_queue *sluice__admit_queue_open(sluice__admission *a,
                                              sluice__loop *loop) {
  sluice__admit_queue *q = &a->queues[a->n_queues++];
  q->adm = a;
  q->loop = loop;
  sluice__list_init(&q->items);
  q->wake_task.fn = on_wake;
  return q;
}

void sluice__admit_stop(sluice__admission *a) {
  uv_mutex_lock(&a->mu);
  a->stopped = 1;
  uv_mutex_unlock(&a->mu);
}

static void on_codel_timer_closed(uv_handle_t *h) { (void)h; }

void sluice__admit_loop_close(sluice__admit_queue *q) {
  q->closing = 1;
  if (q->codel_timer_open) {
    q->codel_timer_open = 0;
    uv_close((uv_handle_t *)&q->codel_timer, on_codel_timer_closed);
  }
}

void sluice__admit_destroy(sluice__admission *a) {
  free(a->queues);
  a->queues = NULL;
  a->n_queues = 0;
  uv_mutex_destroy(&a->mu);
}
