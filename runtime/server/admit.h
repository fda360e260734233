/* Admission of server calls: concurrency limits (server-wide and per
 * method), a bounded FIFO queue per loop for calls over a limit, and CoDel
 * shedding on queue time (the big picture is at the top of admit.c).
 *
 * Admission never sees a call: a call embeds a sluice__admit_item, is
 * answered at once with a verdict (run now, refused, or queued), and a
 * queued item hears later through its ops (run or shed), on its loop's
 * thread. */
#ifndef SLUICE_SERVER_ADMIT_H
#define SLUICE_SERVER_ADMIT_H

#include <stdint.h>
#include <uv.h>

#include "core/list.h"
#include "core/loop.h"
#include "server/load_report.h"
#include "server/server_opts.h"
#include "sluice/status.h"

/* One method's concurrency limit (embedded in its route). */
typedef struct sluice__admit_limit {
  uint32_t limit; /* max concurrent calls of the method; 0: none */
  int in_flight;  /* atomic: the method's calls holding a slot (limit only) */
} sluice__admit_limit;

typedef struct sluice__admit_item sluice__admit_item;

/* What becomes of a queued item, told on its loop's thread. */
typedef struct sluice__admit_ops {
  /* It left the queue with a slot: its handler may run. Called from inside
   * the queue (maybe while another item is being released): schedule the
   * handler, do not run it here. */
  void (*run)(sluice__admit_item *it);
  /* It left the queue without one: answer with code and message (borrowed
   * for the call) and grpc-retry-pushback-ms pushback_ms (0: none). */
  void (*shed)(sluice__admit_item *it, sluice_status_code code,
               const char *message, uint32_t pushback_ms);
} sluice__admit_ops;

/* What admission knows of a call. The owner sets limit and deadline_ns
 * before sluice__admit(); the rest is admission's. */
struct sluice__admit_item {
  const sluice__admit_ops *ops;
  sluice__admit_limit *limit; /* the call's method's */
  uint64_t deadline_ns;       /* sluice_now_ns() clock; 0: none */
  uint64_t ready_ns; /* ready for its handler: queue entry (limits only) */
  sluice__list link; /* in its loop's queue while queued */
  int slot;          /* holds a slot, given back by sluice__admit_release */
  uint64_t slot_ns;  /* when it got the slot (service time, for pushback) */
};

/* CoDel state of one loop's queue (RFC 8289 names). */
typedef struct sluice__codel {
  uint64_t first_above; /* ns; 0: sojourn below target */
  uint64_t drop_next;   /* ns */
  uint32_t count, lastcount;
  int dropping;
} sluice__codel;

typedef struct sluice__admission sluice__admission;

/* One loop's queue: items over a limit, oldest first (loop thread only,
 * except the two atomics). */
typedef struct sluice__admit_queue {
  sluice__admission *adm;
  sluice__loop *loop;
  sluice__list items;     /* sluice__admit_item.link */
  int n_waiting;          /* atomic: queue length, read by other loops */
  int wake_posted;        /* atomic: wake_task queued */
  sluice__task wake_task; /* a slot was freed on another loop */
  sluice__codel codel;
  uv_timer_t codel_timer;
  int codel_timer_open;
  int closing; /* the loop is being torn down: admit nothing more */
} sluice__admit_queue;

/* Server-wide admission. */
struct sluice__admission {
  /* constant after sluice__admit_init */
  uint32_t max_calls; /* 0: no server-wide limit */
  uint32_t max_queue;
  uint32_t codel_target_ms; /* 0: CoDel off */
  uint32_t codel_interval_ms;
  int limits;      /* a concurrency limit is set: calls go through the queue */
  int count_calls; /* limits or load report: in_flight is kept */
  sluice__load *load;
  sluice__admit_queue *queues; /* one per loop (sluice__admit_start) */
  unsigned n_queues;           /* opened so far */
  /* atomics */
  int in_flight;       /* handlers running or owed a finish */
  int waiting;         /* items queued on every loop */
  uint64_t service_ns; /* moving mean of a slot's hold time (pushback) */
  uv_mutex_t mu;       /* held while waking other loops; guards stopped */
  int stopped;         /* the loops are being deleted: wake none */
};

/* Sets a up from the options; statistics go to load. */
void sluice__admit_init(sluice__admission *a, const sluice_server_opts *o,
                        sluice__load *load);
/* Room for n loops' queues. Returns 0 or SLUICE_ERR_NOMEM. */
int sluice__admit_start(sluice__admission *a, unsigned n);
/* The next loop's queue, on loop (at most n of them). */
sluice__admit_queue *sluice__admit_queue_open(sluice__admission *a,
                                              sluice__loop *loop);
/* Shutdown is deleting the loops: no loop is woken from now on. */
void sluice__admit_stop(sluice__admission *a);
/* Loop teardown: admit nothing more, close the CoDel timer. */
void sluice__admit_loop_close(sluice__admit_queue *q);
/* Frees the queues (the loops are gone). */
void sluice__admit_destroy(sluice__admission *a);

/* An item before its first use. */
void sluice__admit_item_init(sluice__admit_item *it,
                             const sluice__admit_ops *ops);

typedef enum sluice__admit_verdict {
  SLUICE__ADMIT_RUN,     /* a slot (if slots are counted) is held: run */
  SLUICE__ADMIT_REFUSED, /* answer with *why */
  SLUICE__ADMIT_QUEUED   /* it->ops tells later (perhaps already has) */
} sluice__admit_verdict;

typedef struct sluice__admit_refusal {
  sluice_status_code code;
  char message[96];
  uint32_t pushback_ms;
} sluice__admit_refusal;

/* The request of it is ready for its handler (on q's loop): runs it now,
 * refuses it (RESOURCE_EXHAUSTED: no queue, or the queue is full), or
 * queues it. A queued item is run or shed through its ops by the queue,
 * possibly before this returns. */
sluice__admit_verdict sluice__admit(sluice__admit_queue *q,
                                    sluice__admit_item *it,
                                    sluice__admit_refusal *why);

/* Its handler finished: gives the slot back and admits waiting items (on
 * this loop at once, on other loops through a posted wake-up). on_loop 0:
 * the loops are gone (finish after shutdown): only the counters. */
void sluice__admit_release(sluice__admit_queue *q, sluice__admit_item *it,
                           int on_loop);

/* Takes a queued item out of its queue (answered, or its stream ended);
 * nothing when it is not queued. */
void sluice__admit_dequeue(sluice__admit_queue *q, sluice__admit_item *it);

static inline int sluice__admit_queued(const sluice__admit_item *it) {
  return sluice__list_linked(&it->link);
}

/* Handlers running or owed a finish, now (counted only with limits or the
 * load report). */
int sluice__admit_in_flight(sluice__admission *a);

#endif
