/* Channels: the target and its resolution, the subchannels, the deferred
 * dispatch through the picker, and the channel's life cycle. */
#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sluice/version.h>

#include "client/addr_set.h"
#include "client/channel_int.h"
#include "core/alloc.h"
#include "transport/h2mem.h"
#include "transport/scratch.h"

static void maybe_free(sluice_channel *ch);
static void request_resolve(sluice_channel *ch);

/* ---- subchannels from the target */

static int add_subchannel(sluice_channel *ch, const sluice__addr *a) {
  if (ch->n_scs == ch->cap_scs) {
    /* Doubling: a resolution of 10,000 addresses is not 10,000 copies. */
    size_t cap = ch->cap_scs ? 2 * ch->cap_scs : 4;
    sluice__subchannel **v = sluice__realloc(ch->scs, cap * sizeof *v);
    if (!v)
      return SLUICE_ERR_NOMEM;
    ch->scs = v;
    ch->cap_scs = cap;
  }
  sluice__subchannel *sc;
  int rv = sluice__subchannel_new(&sc, &ch->env, a);
  if (rv != 0)
    return rv;
  ch->live_scs++;
  ch->scs[ch->n_scs++] = sc;
  sluice__picker_dests_changed(&ch->picker);
  return 0;
}

/* The subchannel set follows addrs pairwise: O(n x old). What
 * set_addresses does without memory for its sort. */
static void set_addresses_pairwise(sluice_channel *ch,
                                   const sluice__addr *addrs, size_t n) {
  size_t keep = 0;
  for (size_t i = 0; i < ch->n_scs; i++) {
    int found = 0;
    for (size_t j = 0; j < n && !found; j++)
      found = strcmp(ch->scs[i]->addr.name, addrs[j].name) == 0;
    if (found)
      ch->scs[keep++] = ch->scs[i];
    else
      sluice__subchannel_remove(ch->scs[i], NULL);
  }
  if (keep != ch->n_scs)
    sluice__picker_dests_changed(&ch->picker);
  ch->n_scs = keep;
  for (size_t j = 0; j < n; j++) {
    int found = 0;
    for (size_t i = 0; i < ch->n_scs && !found; i++)
      found = strcmp(ch->scs[i]->addr.name, addrs[j].name) == 0;
    if (!found)
      add_subchannel(ch, &addrs[j]);
  }
}

/* Replaces the subchannel set with addrs: new ones are added (after the
 * others, in addrs's order), vanished ones are removed (their connections
 * drain), the ones that stay keep their order. By name, in O(n log n)
 * (client/addr_set.c): the first pass and every re-resolution of a dns:
 * name. */
static void set_addresses(sluice_channel *ch, const sluice__addr *addrs,
                          size_t n) {
  size_t n_old = ch->n_scs;
  const char **old = sluice__calloc(n_old ? n_old : 1, sizeof *old);
  unsigned char *keep = sluice__malloc(n_old ? n_old : 1);
  unsigned char *add = sluice__malloc(n ? n : 1);
  int rv = -1;
  if (old && keep && add) {
    for (size_t i = 0; i < n_old; i++)
      old[i] = ch->scs[i]->addr.name;
    rv = sluice__addr_set_diff(old, n_old, addrs, n, keep, add);
  }
  if (rv != 0) {
    free(old);
    free(keep);
    free(add);
    set_addresses_pairwise(ch, addrs, n);
    return;
  }
  size_t kept = 0;
  for (size_t i = 0; i < n_old; i++) {
    if (keep[i])
      ch->scs[kept++] = ch->scs[i];
    else
      sluice__subchannel_remove(ch->scs[i], NULL);
  }
  if (kept != n_old)
    sluice__picker_dests_changed(&ch->picker);
  ch->n_scs = kept;
  for (size_t j = 0; j < n; j++)
    if (add[j])
      add_subchannel(ch, &addrs[j]);
  free(old);
  free(keep);
  free(add);
}

static void on_resolve_timer(uv_timer_t *t) { request_resolve(t->data); }

static void on_resolved(uv_getaddrinfo_t *req, int status,
                        struct addrinfo *res) {
  sluice_channel *ch = req->data;
  ch->resolving = 0;
  if (ch->closing) {
    uv_freeaddrinfo(res);
    maybe_free(ch);
    return;
  }
  size_t n = 0;
  sluice__addr *addrs = status == 0 ? sluice__addrs_from_ai(res, &n) : NULL;
  uv_freeaddrinfo(res);
  if (addrs) {
    ch->resolve_error[0] = 0;
    set_addresses(ch, addrs, n);
    free(addrs);
  } else {
    snprintf(ch->resolve_error, sizeof ch->resolve_error,
             "DNS resolution of %s failed: %s", ch->target.host,
             status ? uv_strerror(status) : "no IPv4/IPv6 address");
  }
  ch->resolved_once = 1;
  if (!ch->resolve_timer_open) {
    /* Re-resolve periodically so that new pods are picked up. */
    uv_timer_init(sluice__loop_uv(ch->loop), &ch->resolve_timer);
    ch->resolve_timer.data = ch;
    ch->resolve_timer_open = 1;
    uv_timer_start(&ch->resolve_timer, on_resolve_timer,
                   ch->opts.resolve_interval_ms, ch->opts.resolve_interval_ms);
  }
  sluice__channel_kick(ch);
}

static void request_resolve(sluice_channel *ch) {
  if (ch->target.kind != SLUICE__TARGET_DNS || ch->resolving || ch->closing)
    return;
  struct addrinfo hints;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  ch->gai.data = ch;
  if (uv_getaddrinfo(sluice__loop_uv(ch->loop), &ch->gai, on_resolved,
                     ch->target.host, ch->target.port, &hints) == 0)
    ch->resolving = 1;
  else {
    snprintf(ch->resolve_error, sizeof ch->resolve_error,
             "cannot start DNS resolution of %s", ch->target.host);
    ch->resolved_once = 1;
  }
}

/* ---- dispatch */

/* Why nothing can take a call: the first subchannel's last error, or the
 * resolver's. */
static const char *unavailable_reason(sluice_channel *ch, char *buf,
                                      size_t len) {
  if (ch->n_scs == 0)
    return ch->resolve_error[0] ? ch->resolve_error
                                : "no addresses for the target";
  for (size_t i = 0; i < ch->n_scs; i++)
    if (ch->scs[i]->last_error[0]) {
      if (ch->n_scs == 1)
        return ch->scs[i]->last_error;
      snprintf(buf, len, "all %zu destinations failing; %s", ch->n_scs,
               ch->scs[i]->last_error);
      return buf;
    }
  return "no destination is available";
}

/* Debug builds check the census against a scan of every subchannel at each
 * pass with calls (O(n): the tests' channels are small). */
static void check_census(const sluice_channel *ch) {
#ifndef NDEBUG
  size_t n[4] = {0}, refusing = 0;
  for (size_t i = 0; i < ch->n_scs; i++) {
    const sluice__subchannel *sc = ch->scs[i];
    n[sc->state]++;
    refusing += (size_t)sluice__subchannel_health_refuses(sc);
    /* Nothing changed unseen: the flag is what a full refresh would set
     * (unless the set changed: the pass rebuilds them all). */
    assert(ch->picker.views_stale ||
           sc->lb.usable == (sc->state == SLUICE__SC_READY && sc->conn &&
                             sluice__subchannel_healthy(sc)));
    assert(sc->state != SLUICE__SC_IDLE || sc->removed);
  }
  for (int s = 0; s < 4; s++)
    assert(n[s] == ch->census.n[s]);
  assert(refusing == ch->census.refusing);
  /* The balancer's compact records are what its destinations say (its
   * table is the set of the last pass unless that set changed). */
  assert(ch->picker.views_stale || sluice__lb_records_ok(&ch->picker.lb));
#else
  (void)ch;
#endif
}

static void dispatch(sluice_channel *ch) {
  if (ch->closing)
    return;
  if (!sluice__picker_busy(&ch->picker) && !ch->want_connect) {
    sluice__picker_run(&ch->picker, ch->scs, 0); /* stops the wait timer */
    return;
  }
  if (ch->target.kind == SLUICE__TARGET_DNS && !ch->resolved_once) {
    request_resolve(ch);
    return;
  }
  if (!ch->resolved_once) {
    /* Fixed addresses: subchannels are created here, on the loop thread,
     * because their handles belong to the loop. */
    ch->resolved_once = 1;
    if (ch->target.kind == SLUICE__TARGET_UNIX) {
      sluice__addr a;
      memset(&a, 0, sizeof a);
      a.ss.ss_family = AF_UNIX;
      snprintf(a.name, sizeof a.name, "%s", ch->target.path);
      add_subchannel(ch, &a);
    } else {
      set_addresses(ch, ch->target.addrs, ch->target.n_addrs);
    }
  }
  /* Keep every subchannel connected, as gRPC's round_robin does (a
   * strategy may pick any, and one that came back must be found): the IDLE
   * ones are among those that changed since the last such pass, and only
   * those need their usable flag refreshed. Each is taken off the list
   * first: connecting changes its state and puts it back, once. */
  sluice__list *node;
  while ((node = sluice__list_head(&ch->census.changed)) != NULL) {
    sluice__list_remove(node);
    sluice__subchannel *sc =
        SLUICE__CONTAINER_OF(node, sluice__subchannel, changed_link);
    sluice__subchannel_connect(sc);
    sluice__picker_refresh(&ch->picker, sc);
  }
  check_census(ch);
  if (ch->n_scs)
    ch->want_connect = 0; /* get_state(try_to_connect): done */
  sluice__picker_run(&ch->picker, ch->scs, ch->n_scs);
  if (!sluice__picker_has_pending(&ch->picker))
    return;
  /* Calls wait: make sure something will move them. If no subchannel is
   * connecting or usable, fail fast (gRPC's default for a channel in
   * TRANSIENT_FAILURE). The health-refusing ones are READY ones. */
  const sluice__sc_census *c = &ch->census;
  if (ch->resolving || c->n[SLUICE__SC_CONNECTING] ||
      c->n[SLUICE__SC_READY] > c->refusing)
    return;
  if (c->refusing && c->refusing == ch->n_scs) {
    sluice__picker_fail_pending(
        &ch->picker, SLUICE_STATUS_UNAVAILABLE,
        "every destination reports NOT_SERVING (health check)",
        SLUICE__DROP_NOT_SERVING);
    return;
  }
  char buf[320];
  const char *why = unavailable_reason(ch, buf, sizeof buf);
  char msg[320];
  snprintf(msg, sizeof msg, "%s", why);
  sluice__picker_fail_pending(&ch->picker, SLUICE_STATUS_UNAVAILABLE, msg,
                              SLUICE__LB_NONE);
}

/* ---- connectivity state (sluice_channel_get_state / watch_state) */

/* A watch registered on the loop (allocated; freed when its timer closed). */
typedef struct sluice__state_watch {
  sluice__task task; /* registration, posted from any thread */
  sluice__list link; /* in ch->watchers */
  sluice_channel *ch;
  int last;
  uint64_t deadline_ns;
  sluice_channel_state_cb cb;
  void *ud;
  uv_timer_t timer;
  int timer_open;
} sluice__state_watch;

/* From the census: O(1) after every dispatch. */
static int aggregate_state(const sluice_channel *ch) {
  const size_t *n = ch->census.n;
  if (n[SLUICE__SC_READY])
    return SLUICE_CHANNEL_READY;
  /* A name being resolved for calls counts as connecting. */
  if (n[SLUICE__SC_CONNECTING] || (ch->resolving && !ch->resolved_once))
    return SLUICE_CHANNEL_CONNECTING;
  return n[SLUICE__SC_TRANSIENT_FAILURE] ? SLUICE_CHANNEL_TRANSIENT_FAILURE
                                         : SLUICE_CHANNEL_IDLE;
}

static void watch_freed(uv_handle_t *h) { free(h->data); }

/* Fires w once (loop thread) and lets it go; may free a closing channel
 * unless called while it shuts down (shutdown_on_loop frees it last). */
static void watch_fire(sluice__state_watch *w, int state, int changed,
                       int may_free) {
  sluice_channel *ch = w->ch;
  sluice__list_remove(&w->link);
  w->cb((sluice_connectivity_state)state, changed, w->ud);
  if (w->timer_open)
    uv_close((uv_handle_t *)&w->timer, watch_freed);
  else
    free(w);
  __atomic_sub_fetch(&ch->live_calls, 1, __ATOMIC_RELAXED);
  if (may_free)
    maybe_free(ch);
}

/* Publishes the state; tells the watchers whose state it no longer is. */
static void publish_state(sluice_channel *ch, int state) {
  __atomic_store_n(&ch->state, state, __ATOMIC_RELEASE);
  sluice__list *n = sluice__list_head(&ch->watchers);
  while (n) {
    sluice__list *next = n->next == &ch->watchers ? NULL : n->next;
    sluice__state_watch *w = SLUICE__CONTAINER_OF(n, sluice__state_watch, link);
    if (w->last != state || state == SLUICE_CHANNEL_SHUTDOWN)
      watch_fire(w, state, w->last != state, state != SLUICE_CHANNEL_SHUTDOWN);
    n = next;
  }
}

static void on_watch_deadline(uv_timer_t *t) {
  sluice__state_watch *w = t->data;
  if (sluice__timer_early(t, w->deadline_ns, on_watch_deadline))
    return;
  watch_fire(w, __atomic_load_n(&w->ch->state, __ATOMIC_ACQUIRE), 0, 1);
}

static void watch_on_loop(sluice__task *t) {
  sluice__state_watch *w = SLUICE__CONTAINER_OF(t, sluice__state_watch, task);
  sluice_channel *ch = w->ch;
  sluice__list_push(&ch->watchers, &w->link);
  int state = __atomic_load_n(&ch->state, __ATOMIC_ACQUIRE);
  if (state != w->last || ch->closing) {
    watch_fire(w, state, state != w->last, 1);
    return;
  }
  if (!w->deadline_ns)
    return;
  uv_timer_init(sluice__loop_uv(ch->loop), &w->timer);
  w->timer.data = w;
  w->timer_open = 1;
  uint64_t now = sluice_now_ns();
  if (w->deadline_ns <= now)
    uv_timer_start(&w->timer, on_watch_deadline, 0, 0);
  else
    sluice__timer_start_deadline(&w->timer, w->deadline_ns, now,
                                 on_watch_deadline);
}

int sluice_channel_watch_state(sluice_channel *ch,
                               sluice_connectivity_state last_observed,
                               uint64_t deadline_ns, sluice_channel_state_cb cb,
                               void *user_data) {
  if (!ch || !cb)
    return SLUICE_ERR_INVALID_ARG;
  sluice__state_watch *w = sluice__calloc(1, sizeof *w);
  if (!w)
    return SLUICE_ERR_NOMEM;
  w->task.fn = watch_on_loop;
  w->ch = ch;
  w->last = (int)last_observed;
  w->deadline_ns = deadline_ns;
  w->cb = cb;
  w->ud = user_data;
  sluice__list_init(&w->link);
  /* Counted as a call: the channel is not freed before it has fired. */
  __atomic_add_fetch(&ch->live_calls, 1, __ATOMIC_RELAXED);
  sluice__loop_post(ch->loop, &w->task);
  return 0;
}

static void connect_on_loop(sluice__task *t) {
  sluice_channel *ch = SLUICE__CONTAINER_OF(t, sluice_channel, connect_task);
  sluice__loop_posted_clear(&ch->connect_posted);
  if (ch->closing)
    return;
  ch->want_connect = 1;
  sluice__channel_kick(ch);
}

sluice_connectivity_state sluice_channel_get_state(sluice_channel *ch,
                                                   int try_to_connect) {
  if (!ch)
    return SLUICE_CHANNEL_SHUTDOWN;
  int state = __atomic_load_n(&ch->state, __ATOMIC_ACQUIRE);
  if (try_to_connect && state == SLUICE_CHANNEL_IDLE)
    sluice__loop_post_once(ch->loop, &ch->connect_task, &ch->connect_posted);
  return (sluice_connectivity_state)state;
}

const char *sluice_connectivity_state_name(sluice_connectivity_state s) {
  switch (s) {
  case SLUICE_CHANNEL_IDLE:
    return "IDLE";
  case SLUICE_CHANNEL_CONNECTING:
    return "CONNECTING";
  case SLUICE_CHANNEL_READY:
    return "READY";
  case SLUICE_CHANNEL_TRANSIENT_FAILURE:
    return "TRANSIENT_FAILURE";
  case SLUICE_CHANNEL_SHUTDOWN:
    return "SHUTDOWN";
  }
  return "UNKNOWN";
}

int sluice_channel_get_keepalive(sluice_channel *ch, uint32_t *time_ms,
                                 uint64_t *too_many_pings) {
  if (!ch)
    return SLUICE_ERR_INVALID_ARG;
  if (time_ms)
    *time_ms =
        __atomic_load_n(&ch->env.conn.keepalive_time_ms, __ATOMIC_RELAXED);
  if (too_many_pings)
    *too_many_pings = __atomic_load_n(&ch->too_many_pings, __ATOMIC_RELAXED);
  return 0;
}

/* A server refused our PINGs (GOAWAY too_many_pings): as A8 says, double
 * the keepalive time for the connections made from now on, and say so. */
static void env_too_many_pings(void *ud) {
  sluice_channel *ch = ud;
  uint32_t t = ch->env.conn.keepalive_time_ms;
  uint32_t next = t > UINT32_MAX / 2 ? UINT32_MAX : t * 2;
  __atomic_store_n(&ch->env.conn.keepalive_time_ms, next, __ATOMIC_RELAXED);
  __atomic_add_fetch(&ch->too_many_pings, 1, __ATOMIC_RELAXED);
  fprintf(stderr,
          "sluice: channel to %s: GOAWAY ENHANCE_YOUR_CALM too_many_pings; "
          "keepalive time for new connections %" PRIu32 " -> %" PRIu32 " ms\n",
          ch->authority, t, next);
}

static void on_dispatch_task(sluice__task *t) {
  sluice_channel *ch = SLUICE__CONTAINER_OF(t, sluice_channel, dispatch_task);
  dispatch(ch);
  if (!ch->closing)
    publish_state(ch, aggregate_state(ch));
}

void sluice__channel_kick(sluice_channel *ch) {
  /* Posted, not deferred: tasks posted on the loop thread run in the
   * prepare phase before the deferred connection flushes, so what the
   * dispatch submits leaves in the same write as everything else of this
   * loop turn (a deferred dispatch queued behind a flush would cost a
   * second write). Posting a queued task again is a no-op. */
  if (!ch->closing)
    sluice__loop_post_local(ch->loop, &ch->dispatch_task);
}

void sluice__channel_enqueue(sluice_channel *ch, sluice__pick *pk) {
  if (ch->closing) { /* a retry or hedge after sluice_channel_del */
    pk->ops->fail(pk, SLUICE_STATUS_CANCELLED, "channel destroyed");
    return;
  }
  sluice__picker_add(&ch->picker, pk);
  sluice__channel_kick(ch);
}

/* ---- what subchannels and the picker report */

static void env_kick(void *ud) { sluice__channel_kick(ud); }
static void env_resolve(void *ud) { request_resolve(ud); }
static void env_gone(void *ud) {
  sluice_channel *ch = ud;
  ch->live_scs--;
  maybe_free(ch);
}
static void picker_closed(void *ud) {
  sluice_channel *ch = ud;
  ch->picker_closing = 0;
  maybe_free(ch);
}

/* ---- create / destroy */

/* Frees what a channel holds besides its loop (any stage of set-up). */
static void channel_free(sluice_channel *ch) {
  sluice__objcache_drain(&ch->call_cache);
  free(ch->scs);
  free(ch->authority);
  sluice__target_free(&ch->target);
  sluice__channel_opts_clear(&ch->opts);
  free(ch);
}

int sluice_channel_new(sluice_channel **out, const char *target,
                       const sluice_channel_opts *opts) {
  if (!out || !target)
    return SLUICE_ERR_INVALID_ARG;
  sluice_channel *ch = sluice__calloc(1, sizeof *ch);
  if (!ch)
    return SLUICE_ERR_NOMEM;
  sluice_channel_opts *defaults = NULL;
  if (!opts && sluice_channel_opts_new(&defaults) != 0) {
    free(ch);
    return SLUICE_ERR_NOMEM;
  }
  int rv = sluice__channel_opts_copy(&ch->opts, opts ? opts : defaults);
  sluice_channel_opts_del(defaults);
  if (rv != 0) {
    free(ch);
    return rv;
  }
  const char *reason;
  if (sluice__target_parse(target, &ch->target, &reason) != 0) {
    rv = SLUICE_ERR_BAD_TARGET;
    goto fail;
  }
  ch->authority = sluice__strdup(ch->opts.authority ? ch->opts.authority
                                                    : ch->target.authority);
  if (!ch->authority) {
    rv = SLUICE_ERR_NOMEM;
    goto fail;
  }
  snprintf(ch->user_agent, sizeof ch->user_agent, "grpc-c-sluice/%s",
           sluice_version());
  rv = sluice__loop_new(&ch->loop, ch->opts.loop);
  if (rv != 0)
    goto fail;
  ch->owned_loop = ch->opts.loop == NULL;
  ch->dispatch_task.fn = on_dispatch_task;
  sluice__throttle_init(&ch->res.throttle, ch->opts.svc.throttle_max_tokens,
                        ch->opts.svc.throttle_ratio_milli);
  sluice__list_init(&ch->res.parked);
  ch->res.rng = sluice_now_ns() ^ (uint64_t)(uintptr_t)ch;
  if (!ch->res.rng)
    ch->res.rng = 1;
  sluice__picker_init(&ch->picker, ch->opts.lb, ch->opts.wait_max_len,
                      ch->opts.wait_max_ms, ch->loop, env_kick, picker_closed,
                      ch);
  sluice__subchannel_env *e = &ch->env;
  e->loop = ch->loop;
  e->conn.tls = ch->opts.tls;
  e->conn.authority = ch->authority;
  e->conn.user_agent = ch->user_agent;
  e->conn.connect_timeout_ms = ch->opts.connect_timeout_ms;
  e->tls_name = ch->opts.tls_name;
  e->dns_host = ch->target.kind == SLUICE__TARGET_DNS ? ch->target.host : NULL;
  e->backoff_initial_ms = ch->opts.backoff_initial_ms;
  e->backoff_max_ms = ch->opts.backoff_max_ms;
  /* The typed option, else the service config's healthCheckConfig. */
  e->health_service = ch->opts.health_check      ? ch->opts.health_check
                      : ch->opts.svc.have_health ? ch->opts.svc.health_service
                                                 : NULL;
  e->lb = &ch->picker.lb;
  sluice__list_init(&ch->census.changed);
  e->census = &ch->census;
  e->kick = env_kick;
  e->resolve = env_resolve;
  e->gone = env_gone;
  e->too_many_pings = env_too_many_pings;
  e->ud = ch;
  e->conn.keepalive_time_ms = ch->opts.keepalive_time_ms;
  e->conn.keepalive_timeout_ms = ch->opts.keepalive_timeout_ms;
  e->conn.keepalive_permit_without_calls =
      ch->opts.keepalive_permit_without_calls;
  e->conn.max_header_list_size = ch->opts.max_header_list_size;
  ch->state = SLUICE_CHANNEL_IDLE;
  sluice__list_init(&ch->watchers);
  ch->connect_task.fn = connect_on_loop;
  /* Handles must be created on the loop's thread for owned loops; a
   * channel creates its subchannels lazily there (first dispatch). */
  *out = ch;
  return 0;
fail:
  channel_free(ch);
  return rv;
}

void sluice__channel_call_gone(sluice_channel *ch) { maybe_free(ch); }

/* Frees the channel once it is closing and the last call, subchannel,
 * timer and resolution are gone; each of those calls this as it goes. */
static void maybe_free(sluice_channel *ch) {
  if (!ch->closing || ch->resolving || ch->resolve_timer_open ||
      ch->picker_closing || ch->live_scs != 0 ||
      __atomic_load_n(&ch->live_calls, __ATOMIC_RELAXED) != 0)
    return;
  /* A user's loop thread lives on: leave no nghttp2 blocks cached there. */
  if (!ch->owned_loop) {
    sluice__h2mem_thread_release();
    sluice__scratch_thread_release();
  }
  channel_free(ch);
}

static void on_resolve_timer_closed(uv_handle_t *h) {
  sluice_channel *ch = h->data;
  ch->resolve_timer_open = 0;
  maybe_free(ch);
}

/* Runs on the loop thread: fail everything, close every handle. The channel
 * frees itself once the last handle and call are gone. */
static void shutdown_on_loop(void *ud) {
  sluice_channel *ch = ud;
  ch->closing = 1;
  sluice__loop_cancel(ch->loop, &ch->dispatch_task);
  sluice__loop_cancel(ch->loop, &ch->connect_task);
  /* Watchers hear SHUTDOWN; one registered later (still queued) hears it
   * when its task runs. live_calls keeps the channel until then. */
  publish_state(ch, SLUICE_CHANNEL_SHUTDOWN);
  sluice__picker_fail_all(&ch->picker, SLUICE_STATUS_CANCELLED,
                          "channel destroyed");
  /* Calls waiting out a retry's backoff, or ended OK with messages held
   * for a paused receiver, are in no queue: end them too. */
  sluice__list *pn;
  while ((pn = sluice__list_head(&ch->res.parked)) != NULL) {
    sluice__parked *pk = SLUICE__CONTAINER_OF(pn, sluice__parked, link);
    sluice__list_remove(pn);
    pk->cancel(pk);
  }
  ch->picker_closing = sluice__picker_close(&ch->picker);
  if (ch->resolving)
    uv_cancel((uv_req_t *)&ch->gai);
  if (ch->resolve_timer_open)
    uv_close((uv_handle_t *)&ch->resolve_timer, on_resolve_timer_closed);
  /* subchannel_remove may free one at once: detach the array first. */
  size_t n = ch->n_scs;
  sluice__subchannel **v = ch->scs;
  for (size_t i = 0; i < n; i++) {
    sluice__subchannel *sc = v[i];
    v[i] = NULL;
    sluice__subchannel_remove(sc, "channel destroyed");
  }
  ch->n_scs = 0;
  maybe_free(ch);
}

void sluice_channel_del(sluice_channel *ch) {
  if (!ch)
    return;
  sluice__loop_del(ch->loop, shutdown_on_loop, ch);
}
