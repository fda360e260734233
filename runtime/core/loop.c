#include "core/loop.h"

#include "core/list.h"

#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "sluice/clock.h"
#include "sluice/status.h"

typedef struct task_list {
  sluice__task *head, *tail;
} task_list;

struct sluice__loop {
  uv_loop_t own;
  uv_loop_t *uv;
  int owned;
  uv_thread_t thread;   /* owned loops: the thread running it */
  uv_thread_t loop_tid; /* who runs the loop (see sluice__loop_on_thread) */
  uv_async_t async;
  uv_prepare_t prepare;
  uv_mutex_t mu;
  task_list remote; /* posted from other threads; guarded by mu */
  task_list local;  /* posted on the loop thread */
  task_list deferred;
  sluice__task stop_task;
  void (*stop_fn)(void *ud);
  void *stop_ud;
  int open_handles;
};

static void list_push(task_list *l, sluice__task *t) {
  t->next = NULL;
  if (l->tail)
    l->tail->next = t;
  else
    l->head = t;
  l->tail = t;
}

/* Most tasks one run_list call runs (those queued while it runs included)
 * before it yields to I/O, so one busy producer cannot starve the loop. */
#define RUN_LIST_MAX 4096

/* Runs every task in the list, including those queued while running, one at
 * a time from the head: a task stays in the list until it runs, so a task
 * that frees an object may still cancel that object's other queued tasks
 * (sluice__loop_cancel). Gives up after RUN_LIST_MAX; what is left runs on
 * the next turn (the async wake-up makes sure there is one). */
static void run_list(sluice__loop *l, task_list *list) {
  for (int n = 0; n < RUN_LIST_MAX && list->head; n++) {
    sluice__task *t = list->head;
    list->head = t->next;
    if (!list->head)
      list->tail = NULL;
    t->next = NULL;
    t->queued = 0;
    t->fn(t);
  }
  if (list->head)
    uv_async_send(&l->async);
}

static void on_prepare(uv_prepare_t *h) {
  sluice__loop *l = h->data;
  /* A flush (deferred) may post tasks (a stream's send-ready report): run
   * them before polling, or the loop could sleep with work queued. */
  for (int round = 0; round < 8; round++) {
    run_list(l, &l->local);
    run_list(l, &l->deferred);
    if (!l->local.head && !l->deferred.head)
      return;
  }
  uv_async_send(&l->async);
}

static void on_async(uv_async_t *h) {
  sluice__loop *l = h->data;
  uv_mutex_lock(&l->mu);
  task_list got = l->remote;
  l->remote.head = l->remote.tail = NULL;
  uv_mutex_unlock(&l->mu);
  /* Append to the local list so ordering between threads' posts holds. */
  if (got.head) {
    if (l->local.tail)
      l->local.tail->next = got.head;
    else
      l->local.head = got.head;
    l->local.tail = got.tail;
  }
  on_prepare(&l->prepare);
}

static void loop_free(sluice__loop *l) {
  uv_mutex_destroy(&l->mu);
  free(l);
}

static void on_handle_closed(uv_handle_t *h) {
  sluice__loop *l = h->data;
  if (--l->open_handles == 0 && !l->owned)
    loop_free(l);
}

static void on_stop(sluice__task *t) {
  sluice__loop *l = SLUICE__CONTAINER_OF(t, sluice__loop, stop_task);
  if (l->stop_fn)
    l->stop_fn(l->stop_ud);
  /* Tasks queued by the stop function or by other threads (final replies)
   * still run. */
  on_async(&l->async);
  uv_close((uv_handle_t *)&l->async, on_handle_closed);
  uv_close((uv_handle_t *)&l->prepare, on_handle_closed);
}

static void thread_main(void *arg) {
  sluice__loop *l = arg;
  uv_run(l->uv, UV_RUN_DEFAULT);
}

int sluice__loop_new(sluice__loop **out, uv_loop_t *user_loop) {
  if (!out)
    return SLUICE_ERR_INVALID_ARG;
  sluice__loop *l = sluice__calloc(1, sizeof *l);
  if (!l)
    return SLUICE_ERR_NOMEM;
  if (uv_mutex_init(&l->mu) != 0) {
    free(l);
    return SLUICE_ERR_SYSTEM;
  }
  if (user_loop) {
    l->uv = user_loop;
  } else {
    if (uv_loop_init(&l->own) != 0) {
      loop_free(l);
      return SLUICE_ERR_SYSTEM;
    }
    l->uv = &l->own;
    l->owned = 1;
  }
  uv_async_init(l->uv, &l->async, on_async);
  uv_prepare_init(l->uv, &l->prepare);
  l->async.data = l->prepare.data = l;
  uv_prepare_start(&l->prepare, on_prepare);
  l->open_handles = 2;
  l->loop_tid = uv_thread_self();
  if (l->owned) {
    if (uv_thread_create(&l->thread, thread_main, l) != 0) {
      uv_close((uv_handle_t *)&l->async, NULL);
      uv_close((uv_handle_t *)&l->prepare, NULL);
      uv_run(l->uv, UV_RUN_DEFAULT);
      uv_loop_close(l->uv);
      loop_free(l);
      return SLUICE_ERR_SYSTEM;
    }
    l->loop_tid = l->thread;
  }
  *out = l;
  return 0;
}

uv_loop_t *sluice__loop_uv(sluice__loop *l) { return l->uv; }

int sluice__loop_on_thread(const sluice__loop *l) {
  uv_thread_t self = uv_thread_self();
  return uv_thread_equal(&self, &l->loop_tid);
}

void sluice__loop_post(sluice__loop *l, sluice__task *t) {
  if (sluice__loop_on_thread(l)) {
    if (t->queued)
      return;
    t->queued = 1;
    list_push(&l->local, t);
    return;
  }
  uv_mutex_lock(&l->mu);
  list_push(&l->remote, t);
  uv_mutex_unlock(&l->mu);
  uv_async_send(&l->async);
}

void sluice__loop_post_local(sluice__loop *l, sluice__task *t) {
  if (t->queued)
    return;
  t->queued = 1;
  list_push(&l->local, t);
}

void sluice__loop_defer(sluice__loop *l, sluice__task *t) {
  if (t->queued)
    return;
  t->queued = 1;
  list_push(&l->deferred, t);
}

static int list_remove(task_list *l, sluice__task *t) {
  sluice__task *prev = NULL;
  for (sluice__task *p = l->head; p; prev = p, p = p->next) {
    if (p != t)
      continue;
    if (prev)
      prev->next = p->next;
    else
      l->head = p->next;
    if (l->tail == p)
      l->tail = prev;
    p->next = NULL;
    p->queued = 0;
    return 1;
  }
  return 0;
}

void sluice__loop_cancel(sluice__loop *l, sluice__task *t) {
  if (!t->queued)
    return;
  if (!list_remove(&l->deferred, t))
    list_remove(&l->local, t);
}

void sluice__loop_del(sluice__loop *l, void (*fn)(void *ud), void *ud) {
  if (!l)
    return;
  l->stop_fn = fn;
  l->stop_ud = ud;
  l->stop_task.fn = on_stop;
  if (!l->owned) {
    sluice__loop_post(l, &l->stop_task);
    return;
  }
  sluice__loop_post(l, &l->stop_task);
  uv_thread_join(&l->thread);
  /* Close what the stop function may have left (e.g. a handle closed late). */
  uv_run(l->uv, UV_RUN_DEFAULT);
  uv_loop_close(l->uv);
  loop_free(l);
}

void sluice__timer_start_deadline(uv_timer_t *t, uint64_t deadline_ns,
                                  uint64_t now, uv_timer_cb cb) {
  uv_timer_start(t, cb, (deadline_ns - now + 999999) / 1000000, 0);
}

int sluice__timer_early(uv_timer_t *t, uint64_t deadline_ns, uv_timer_cb cb) {
  uint64_t now = sluice_now_ns();
  if (now >= deadline_ns)
    return 0;
  uv_update_time(t->loop);
  sluice__timer_start_deadline(t, deadline_ns, now, cb);
  return 1;
}
