/* A libuv loop plus the two things every sluice object needs from it:
 *  - tasks posted from any thread, run on the loop thread (a mutex-guarded
 *    list and one uv_async wake-up; on the loop thread no lock is taken);
 *  - "before poll" work: connections ask to be flushed once per iteration so
 *    that everything produced in one turn goes out in one write.
 * The loop is either owned (a thread is started for it) or borrowed from the
 * user (uv_loop_t handed in; the user runs it).
 */
#ifndef SLUICE_CORE_LOOP_H
#define SLUICE_CORE_LOOP_H

#include <stdint.h>
#include <uv.h>

typedef struct sluice__task sluice__task;
typedef void (*sluice__task_fn)(sluice__task *t);

/* Intrusive: embed in the object the task is about; the loop never frees
 * it. A task may be queued once at a time. */
struct sluice__task {
  sluice__task_fn fn;
  sluice__task *next;
  int queued; /* guarded by the loop: set while in a list */
};

typedef struct sluice__loop sluice__loop;

/* Creates a loop in *out. user_loop NULL: a new uv loop and a thread running
 * it. Otherwise the user's loop is borrowed. Returns 0 or SLUICE_ERR_*. */
int sluice__loop_new(sluice__loop **out, uv_loop_t *user_loop);

/* The uv loop (owned or borrowed). */
uv_loop_t *sluice__loop_uv(sluice__loop *l);

/* Non-zero on the loop's thread (for a borrowed loop: the thread that is
 * running it, learnt the first time a task ran; before that, the creating
 * thread). */
int sluice__loop_on_thread(const sluice__loop *l);

/* Runs t->fn(t) on the loop thread, soon, never synchronously. Thread-safe.
 */
void sluice__loop_post(sluice__loop *l, sluice__task *t);

/* sluice__loop_post for a caller known to be on the loop thread (no
 * thread check): t runs in this turn's prepare phase, before the deferred
 * work (connection flushes). A task already queued is not queued twice. */
void sluice__loop_post_local(sluice__loop *l, sluice__task *t);

/* Posts t from any thread unless it is already posted: *posted (an int
 * beside the task) guards it across threads, where t->queued cannot. The
 * task's fn calls sluice__loop_posted_clear(posted) first, so a post made
 * while it runs queues it again. */
static inline void sluice__loop_post_once(sluice__loop *l, sluice__task *t,
                                          int *posted) {
  if (!__atomic_exchange_n(posted, 1, __ATOMIC_ACQ_REL))
    sluice__loop_post(l, t);
}
static inline void sluice__loop_posted_clear(int *posted) {
  __atomic_store_n(posted, 0, __ATOMIC_RELEASE);
}

/* Runs t->fn(t) before the loop next polls for I/O; loop thread only. A task
 * already queued is not queued twice. */
void sluice__loop_defer(sluice__loop *l, sluice__task *t);

/* Unlinks t if it waits in a loop-thread list (sluice__loop_defer, or
 * sluice__loop_post from the loop thread), so that its object may be freed;
 * loop thread only (also from inside another task of the same list). */
void sluice__loop_cancel(sluice__loop *l, sluice__task *t);

/* Stops the loop. fn(ud) runs first on the loop thread to close the caller's
 * handles; then the loop's own handles close. For an owned loop this blocks
 * until the thread has exited and frees everything. For a borrowed loop it
 * returns at once (call from the loop thread or any thread); the loop
 * object is freed when its handles have closed, as the user keeps running
 * the loop. */
void sluice__loop_del(sluice__loop *l, void (*fn)(void *ud), void *ud);

/* Arms t to call cb at deadline_ns (sluice_now_ns()'s clock; now is that
 * clock's reading, deadline_ns > now), rounded up to libuv's milliseconds.
 * The callback starts with sluice__timer_early(). */
void sluice__timer_start_deadline(uv_timer_t *t, uint64_t deadline_ns,
                                  uint64_t now, uv_timer_cb cb);

/* For a timer armed to fire at deadline_ns (sluice_now_ns()'s clock), called
 * first thing in its callback. libuv times timers from the loop's cached
 * clock, which lags the real one by as much as the loop's current turn has
 * taken, so a timer can fire a little before its deadline. Re-arms t with
 * cb for the rest and returns 1 while the deadline is still ahead; 0 once it
 * has passed. */
int sluice__timer_early(uv_timer_t *t, uint64_t deadline_ns, uv_timer_cb cb);

#endif
