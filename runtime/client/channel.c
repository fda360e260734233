/* Channels: options, targets and resolution, and dispatching calls to
 * destinations through the load-balancing strategy (runtime/lb), with early
 * drop and the optional wait queue. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sluice/version.h>

#include "client/client.h"
#include "transport/h2mem.h"
#include "transport/tls.h"
#include "wire/orca.h"

int sluice_channel_opts_new(sluice_channel_opts **out) {
  if (!out)
    return SLUICE_ERR_INVALID_ARG;
  sluice_channel_opts *o = calloc(1, sizeof *o);
  if (!o)
    return SLUICE_ERR_NOMEM;
  o->max_response_size = 4u * 1024 * 1024;
  o->max_request_size = UINT32_MAX;
  o->resolve_interval_ms = 30000;
  o->backoff_initial_ms = 1000;
  o->backoff_max_ms = 120000;
  o->connect_timeout_ms = 20000;
  o->lb = &sluice__lb_btc;
  *out = o;
  return 0;
}

void sluice_channel_opts_del(sluice_channel_opts *o) {
  if (o) {
    free(o->authority);
    sluice__tls_ctx_unref(o->tls);
    free(o->tls_name);
    free(o);
  }
}

int sluice_channel_opts_set_lb(sluice_channel_opts *o, const char *name) {
  const sluice__lb_ops *ops = name ? sluice__lb_find(name) : NULL;
  if (!o || !ops)
    return SLUICE_ERR_INVALID_ARG;
  o->lb = ops;
  return 0;
}

int sluice_channel_opts_set_wait_queue(sluice_channel_opts *o, uint32_t max_len,
                                       uint32_t max_wait_ms) {
  if (!o || (max_len && !max_wait_ms))
    return SLUICE_ERR_INVALID_ARG;
  o->wait_max_len = max_len;
  o->wait_max_ms = max_wait_ms;
  return 0;
}

void sluice_tls_client_config_init(sluice_tls_client_config *c) {
  if (c)
    memset(c, 0, sizeof *c);
}

int sluice_channel_opts_set_tls(sluice_channel_opts *o,
                                const sluice_tls_client_config *cfg) {
  if (!o)
    return SLUICE_ERR_INVALID_ARG;
  o->last_error[0] = 0;
  sluice__tls_ctx *ctx = NULL;
  int rv =
      sluice__tls_ctx_client(&ctx, cfg, o->last_error, sizeof o->last_error);
  if (rv != 0)
    return rv;
  char *name = NULL;
  if (cfg->server_name_override && *cfg->server_name_override &&
      !(name = strdup(cfg->server_name_override))) {
    sluice__tls_ctx_unref(ctx);
    return SLUICE_ERR_NOMEM;
  }
  sluice__tls_ctx_unref(o->tls);
  free(o->tls_name);
  o->tls = ctx;
  o->tls_name = name;
  return 0;
}

const char *sluice_channel_opts_last_error(const sluice_channel_opts *o) {
  return o ? o->last_error : "";
}

int sluice_channel_opts_set_loop(sluice_channel_opts *o, uv_loop_t *loop) {
  if (!o)
    return SLUICE_ERR_INVALID_ARG;
  o->loop = loop;
  return 0;
}

int sluice_channel_opts_set_max_response_size(sluice_channel_opts *o,
                                              uint32_t bytes) {
  if (!o || !bytes)
    return SLUICE_ERR_INVALID_ARG;
  o->max_response_size = bytes;
  return 0;
}

int sluice_channel_opts_set_max_request_size(sluice_channel_opts *o,
                                             uint32_t bytes) {
  if (!o || !bytes)
    return SLUICE_ERR_INVALID_ARG;
  o->max_request_size = bytes;
  return 0;
}

int sluice_channel_opts_set_authority(sluice_channel_opts *o,
                                      const char *authority) {
  if (!o || !authority || !*authority)
    return SLUICE_ERR_INVALID_ARG;
  char *a = strdup(authority);
  if (!a)
    return SLUICE_ERR_NOMEM;
  free(o->authority);
  o->authority = a;
  return 0;
}

int sluice_channel_opts_set_resolve_interval_ms(sluice_channel_opts *o,
                                                uint32_t ms) {
  if (!o || !ms)
    return SLUICE_ERR_INVALID_ARG;
  o->resolve_interval_ms = ms;
  return 0;
}

int sluice_channel_opts_set_backoff_ms(sluice_channel_opts *o,
                                       uint32_t initial_ms, uint32_t max_ms) {
  if (!o || !initial_ms || max_ms < initial_ms)
    return SLUICE_ERR_INVALID_ARG;
  o->backoff_initial_ms = initial_ms;
  o->backoff_max_ms = max_ms;
  return 0;
}

int sluice_channel_opts_set_connect_timeout_ms(sluice_channel_opts *o,
                                               uint32_t ms) {
  if (!o || !ms)
    return SLUICE_ERR_INVALID_ARG;
  o->connect_timeout_ms = ms;
  return 0;
}

/* ---- destinations from the target */

static int add_dest(sluice_channel *ch, const sluice__addr *a) {
  sluice__dest **v = realloc(ch->dests, (ch->n_dests + 1) * sizeof *v);
  if (!v)
    return SLUICE_ERR_NOMEM;
  ch->dests = v;
  sluice__dest *d;
  int rv = sluice__dest_new(&d, ch, a);
  if (rv != 0)
    return rv;
  ch->dests[ch->n_dests++] = d;
  return 0;
}

/* Replaces the destination set with addrs: new ones are added, vanished
 * ones are removed (their connections drain). */
static void set_addresses(sluice_channel *ch, const sluice__addr *addrs,
                          size_t n) {
  size_t keep = 0;
  for (size_t i = 0; i < ch->n_dests; i++) {
    int found = 0;
    for (size_t j = 0; j < n && !found; j++)
      found = strcmp(ch->dests[i]->addr.name, addrs[j].name) == 0;
    if (found)
      ch->dests[keep++] = ch->dests[i];
    else
      sluice__dest_remove(ch->dests[i]);
  }
  ch->n_dests = keep;
  for (size_t j = 0; j < n; j++) {
    int found = 0;
    for (size_t i = 0; i < ch->n_dests && !found; i++)
      found = strcmp(ch->dests[i]->addr.name, addrs[j].name) == 0;
    if (!found)
      add_dest(ch, &addrs[j]);
  }
  if (ch->rr_next >= ch->n_dests)
    ch->rr_next = 0;
}

static void on_resolve_timer(uv_timer_t *t) {
  sluice__channel_request_resolve(t->data);
}

static void on_resolved(uv_getaddrinfo_t *req, int status,
                        struct addrinfo *res) {
  sluice_channel *ch = req->data;
  ch->resolving = 0;
  if (ch->closing) {
    uv_freeaddrinfo(res);
    sluice__channel_maybe_free(ch);
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
  sluice__channel_dispatch(ch);
}

void sluice__channel_request_resolve(sluice_channel *ch) {
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

/* The path slot of a method (the first SLUICE__LB_MAX_PATHS - 1 methods
 * seen get their own; the rest share the last). */
uint32_t sluice__channel_path_id(sluice_channel *ch,
                                 const sluice_method_desc *m) {
  for (size_t i = 0; i < ch->n_paths; i++)
    if (ch->paths[i] == m)
      return (uint32_t)i;
  if (ch->n_paths < SLUICE__LB_MAX_PATHS - 1) {
    ch->paths[ch->n_paths] = m;
    return (uint32_t)ch->n_paths++;
  }
  return SLUICE__LB_MAX_PATHS - 1;
}

/* Fails c locally, at once and without I/O. */
static void drop(sluice_channel *ch, sluice__ccall *c, sluice__lb_verdict v,
                 const char *extra) {
  char msg[320];
  uint64_t now = sluice_now_ns();
  ch->dropped[extra ? SLUICE__DROP_WAIT : v]++;
  if (v == SLUICE__LB_DEADLINE) {
    uint64_t left = c->lbc.deadline_ns > now ? c->lbc.deadline_ns - now : 0;
    snprintf(msg, sizeof msg,
             "dropped locally by the %s strategy: %s (%" PRIu64
             " us left; decided in %" PRIu64 " us)",
             ch->lb.ops->name, verdict_text(v), left / 1000,
             (now - c->start_ns) / 1000);
    sluice__ccall_complete(c, SLUICE_STATUS_DEADLINE_EXCEEDED, msg);
    return;
  }
  snprintf(msg, sizeof msg,
           "dropped locally by the %s strategy: %s (decided in %" PRIu64 " us)",
           ch->lb.ops->name, extra ? extra : verdict_text(v),
           (now - c->start_ns) / 1000);
  sluice__ccall_complete(c, SLUICE_STATUS_RESOURCE_EXHAUSTED, msg);
}

static void on_wait_timer(uv_timer_t *t) { sluice__channel_dispatch(t->data); }

static void wait_timer_update(sluice_channel *ch) {
  int want = ch->n_waiting > 0;
  if (want == ch->wait_timer_on)
    return;
  if (want && !ch->wait_timer_open) {
    uv_timer_init(sluice__loop_uv(ch->loop), &ch->wait_timer);
    ch->wait_timer.data = ch;
    ch->wait_timer_open = 1;
  }
  if (want) {
    uint64_t every = ch->opts.wait_max_ms / 4 ? ch->opts.wait_max_ms / 4 : 1;
    uv_timer_start(&ch->wait_timer, on_wait_timer, every, every);
  } else {
    uv_timer_stop(&ch->wait_timer);
  }
  ch->wait_timer_on = want;
}

static int ensure_views(sluice_channel *ch) {
  if (ch->lb_views_cap >= ch->n_dests)
    return 0;
  sluice__lb_dest **v = realloc(ch->lb_views, ch->n_dests * sizeof *v);
  if (!v)
    return -1;
  ch->lb_views = v;
  ch->lb_views_cap = ch->n_dests;
  return 0;
}

/* Once per dispatch pass (destination states do not change within one):
 * connects idle destinations, as gRPC's round_robin keeps every one
 * connected (a strategy may pick any, and one that came back must be
 * found), and refreshes the strategy's view. Per call, decide() then costs
 * only the strategy's own pick. Returns 0, or -1 without memory. */
static int refresh_dests(sluice_channel *ch) {
  for (size_t i = 0; i < ch->n_dests; i++)
    if (ch->dests[i]->state == SLUICE__DEST_IDLE)
      sluice__dest_connect(ch->dests[i]);
  if (ensure_views(ch) != 0)
    return -1;
  for (size_t i = 0; i < ch->n_dests; i++) {
    sluice__dest *d = ch->dests[i];
    d->lb.usable = d->state == SLUICE__DEST_READY && d->conn != NULL;
    ch->lb_views[i] = &d->lb;
  }
  return 0;
}

/* Asks the strategy where c may go (views refreshed by refresh_dests).
 * Returns PICKED with *out set, or why not; *now is the decision's end. */
static sluice__lb_verdict decide(sluice_channel *ch, sluice__ccall *c,
                                 sluice__dest **out, uint64_t *now) {
  uint64_t t0 = sluice_now_ns();
  if (!c->pick_ns)
    c->pick_ns = t0;
  size_t idx = 0;
  sluice__lb_verdict v =
      sluice__lb_pick(&ch->lb, ch->lb_views, ch->n_dests, &c->lbc, t0, &idx);
  uint64_t t1 = sluice_now_ns();
  *now = t1;
  if (v == SLUICE__LB_PICKED) {
    *out = ch->dests[idx];
    (*out)->lb.stats.algo_ns_sum += t1 - t0;
    (*out)->lb.stats.algo_n++;
  }
  return v;
}

/* Tries to send c. Returns 1 when it left the queue it was in (sent or
 * failed), 0 when it must wait for a stream or a connection. On an
 * admission refusal it is dropped, or moved to the wait queue. */
static int try_dispatch(sluice_channel *ch, sluice__ccall *c) {
  sluice__dest *d = NULL;
  uint64_t now = 0;
  sluice__lb_verdict v = decide(ch, c, &d, &now);
  if (v == SLUICE__LB_NONE)
    return 0;
  if (v == SLUICE__LB_PICKED) {
    if (!sluice__dest_has_capacity(d))
      return 0; /* HTTP/2 stream limit: wait for a stream, keep order */
    sluice__link_remove(&c->link);
    if (c->wait_since) {
      c->wait_since = 0;
      ch->n_waiting--;
    }
    int rv = sluice__cconn_submit(d->conn, c);
    if (rv != 0) {
      c->state = SLUICE__CALL_PENDING;
      sluice__link_push(&ch->pending, &c->link); /* so complete unlinks */
      sluice__ccall_complete(c, SLUICE_STATUS_INTERNAL,
                             "HTTP/2 layer refused the request");
      return 1;
    }
    c->lb_dest = d;
    c->sent_ns = now;
    sluice__lb_sent(&ch->lb, &d->lb, &c->lbc, now);
    return 1;
  }
  /* Refused by every destination. Wait (bounded), or drop now. */
  if (c->wait_since) {
    if (now - c->wait_since < (uint64_t)ch->opts.wait_max_ms * 1000000u)
      return 0;
    char extra[160];
    snprintf(extra, sizeof extra,
             "%s, after waiting %" PRIu64 " ms in the wait queue",
             verdict_text(v), (now - c->wait_since) / 1000000);
    drop(ch, c, v, extra);
    return 1;
  }
  if (v != SLUICE__LB_DEADLINE && ch->opts.wait_max_len &&
      ch->n_waiting < ch->opts.wait_max_len) {
    sluice__link_remove(&c->link);
    sluice__link_push(&ch->waiting, &c->link);
    c->wait_since = now;
    ch->n_waiting++;
    return 1;
  }
  if (v != SLUICE__LB_DEADLINE && ch->opts.wait_max_len) {
    char extra[160];
    snprintf(extra, sizeof extra,
             "%s and the wait queue is full (%" PRIu32 " calls)",
             verdict_text(v), ch->opts.wait_max_len);
    drop(ch, c, v, extra);
    return 1;
  }
  drop(ch, c, v, NULL);
  return 1;
}

static void run_queue(sluice_channel *ch, sluice__link *q) {
  while (!sluice__link_empty(q)) {
    sluice__ccall *c =
        (sluice__ccall *)((char *)q->next - offsetof(sluice__ccall, link));
    if (!try_dispatch(ch, c))
      break;
  }
}

void sluice__channel_peer_load(sluice__dest *d, const sluice_metadata *md) {
  size_t len = 0;
  const char *v = sluice_metadata_find(md, "endpoint-load-metrics-bin", &len);
  sluice__orca r;
  if (!v || sluice__orca_decode((const uint8_t *)v, len, &r) != 0)
    return;
  /* The application's own utilization when given, else the server's
   * concurrency utilization (or none). */
  double util = r.application_utilization >= 0 ? r.application_utilization
                                               : r.cpu_utilization;
  sluice__lb_peer_load l = {util, r.rps_fractional, r.queue_ms, r.in_flight};
  sluice__lb_peer_report(&d->ch->lb, &d->lb, &l, sluice_now_ns());
}

void sluice__channel_lb_unsent(sluice__ccall *c) {
  if (c->lb_dest)
    sluice__lb_unsent(&c->ch->lb, &c->lb_dest->lb, &c->lbc);
  c->lb_dest = NULL;
  c->strat_done = 0;
}

void sluice__channel_lb_done(sluice__ccall *c, sluice_status_code code) {
  sluice__dest *d = c->lb_dest;
  if (!d)
    return;
  c->lb_dest = NULL;
  uint64_t now = sluice_now_ns();
  sluice__lb_complete(
      &c->ch->lb, &d->lb, &c->lbc, now - c->sent_ns, code,
      (uint32_t)(c->resp_bytes > UINT32_MAX ? UINT32_MAX : c->resp_bytes), now);
}

/* Why nothing can take a call: the first destination's last error, or the
 * resolver's. */
static const char *unavailable_reason(sluice_channel *ch, char *buf,
                                      size_t len) {
  if (ch->n_dests == 0)
    return ch->resolve_error[0] ? ch->resolve_error
                                : "no addresses for the target";
  for (size_t i = 0; i < ch->n_dests; i++)
    if (ch->dests[i]->last_error[0]) {
      if (ch->n_dests == 1)
        return ch->dests[i]->last_error;
      snprintf(buf, len, "all %zu destinations failing; %s", ch->n_dests,
               ch->dests[i]->last_error);
      return buf;
    }
  return "no destination is available";
}

void sluice__channel_dispatch(sluice_channel *ch) {
  if (ch->closing)
    return;
  if (sluice__link_empty(&ch->pending) && sluice__link_empty(&ch->waiting)) {
    wait_timer_update(ch);
    return;
  }
  if (ch->target.kind == SLUICE__TARGET_DNS && !ch->resolved_once) {
    sluice__channel_request_resolve(ch);
    return;
  }
  if (!ch->resolved_once) {
    /* Fixed addresses: destinations are created here, on the loop thread,
     * because their handles belong to the loop. */
    ch->resolved_once = 1;
    if (ch->target.kind == SLUICE__TARGET_UNIX) {
      sluice__addr a;
      memset(&a, 0, sizeof a);
      a.ss.ss_family = AF_UNIX;
      snprintf(a.name, sizeof a.name, "%s", ch->target.path);
      add_dest(ch, &a);
    } else {
      set_addresses(ch, ch->target.addrs, ch->target.n_addrs);
    }
  }
  /* The oldest waiters first, then new calls. */
  if (refresh_dests(ch) == 0) {
    run_queue(ch, &ch->waiting);
    run_queue(ch, &ch->pending);
  }
  wait_timer_update(ch);
  if (sluice__link_empty(&ch->pending))
    return;
  /* Calls wait: make sure something will move them. Connect idle
   * destinations; if none is connecting or usable, fail fast (gRPC's default
   * for a channel in TRANSIENT_FAILURE). */
  int hope = ch->resolving;
  for (size_t i = 0; i < ch->n_dests; i++) {
    sluice__dest *d = ch->dests[i];
    if (d->state == SLUICE__DEST_IDLE)
      sluice__dest_connect(d);
    if (d->state == SLUICE__DEST_CONNECTING || d->state == SLUICE__DEST_READY)
      hope = 1;
  }
  if (hope)
    return;
  char buf[320];
  const char *why = unavailable_reason(ch, buf, sizeof buf);
  char msg[320];
  snprintf(msg, sizeof msg, "%s", why);
  while (!sluice__link_empty(&ch->pending)) {
    sluice__ccall *c = (sluice__ccall *)((char *)ch->pending.next -
                                         offsetof(sluice__ccall, link));
    ch->dropped[SLUICE__LB_NONE]++;
    sluice__ccall_complete(c, SLUICE_STATUS_UNAVAILABLE, msg);
  }
}

/* ---- create / destroy */

int sluice_channel_new(sluice_channel **out, const char *target,
                       const sluice_channel_opts *opts) {
  if (!out || !target)
    return SLUICE_ERR_INVALID_ARG;
  sluice_channel *ch = calloc(1, sizeof *ch);
  if (!ch)
    return SLUICE_ERR_NOMEM;
  sluice_channel_opts *defaults = NULL;
  if (!opts) {
    if (sluice_channel_opts_new(&defaults) != 0) {
      free(ch);
      return SLUICE_ERR_NOMEM;
    }
    opts = defaults;
  }
  ch->opts = *opts;
  ch->opts.authority = NULL;
  ch->opts.tls_name = NULL;
  if (opts->tls_name && !(ch->opts.tls_name = strdup(opts->tls_name))) {
    sluice_channel_opts_del(defaults);
    free(ch);
    return SLUICE_ERR_NOMEM;
  }
  sluice__tls_ctx_ref(ch->opts.tls); /* dropped when the channel is freed */
  const char *reason;
  if (sluice__target_parse(target, &ch->target, &reason) != 0) {
    sluice_channel_opts_del(defaults);
    sluice__tls_ctx_unref(ch->opts.tls);
    free(ch->opts.tls_name);
    free(ch);
    return SLUICE_ERR_BAD_TARGET;
  }
  ch->authority =
      strdup(opts->authority ? opts->authority : ch->target.authority);
  sluice_channel_opts_del(defaults);
  if (!ch->authority)
    goto nomem;
  snprintf(ch->user_agent, sizeof ch->user_agent, "grpc-c-sluice/%s",
           sluice_version());
  sluice__link_init(&ch->pending);
  sluice__link_init(&ch->waiting);
  sluice__objcache_init(&ch->call_cache, sizeof(sluice__ccall), 128);
  sluice__lb_init(&ch->lb, ch->opts.lb ? ch->opts.lb : &sluice__lb_btc, NULL);
  int rv = sluice__loop_new(&ch->loop, ch->opts.loop);
  if (rv != 0) {
    free(ch->authority);
    sluice__target_free(&ch->target);
    sluice__tls_ctx_unref(ch->opts.tls);
    free(ch->opts.tls_name);
    free(ch);
    return rv;
  }
  ch->owned_loop = ch->opts.loop == NULL;
  /* Handles must be created on the loop's thread for owned loops; a
   * channel creates its destinations lazily there (first dispatch). */
  *out = ch;
  return 0;
nomem:
  sluice__target_free(&ch->target);
  sluice__tls_ctx_unref(ch->opts.tls);
  free(ch->opts.tls_name);
  free(ch);
  return SLUICE_ERR_NOMEM;
}

/* Frees the channel once it is closing and the last call, destination,
 * timer and resolution are gone; each of those calls this as it goes. */
void sluice__channel_maybe_free(sluice_channel *ch) {
  if (!ch->closing || ch->resolving || ch->resolve_timer_open ||
      ch->wait_timer_open || ch->live_dests != 0 ||
      __atomic_load_n(&ch->live_calls, __ATOMIC_RELAXED) != 0)
    return;
  sluice__objcache_drain(&ch->call_cache);
  /* A user's loop thread lives on: leave no nghttp2 blocks cached there. */
  if (!ch->owned_loop)
    sluice__h2mem_thread_release();
  free(ch->dests);
  free(ch->lb_views);
  free(ch->authority);
  sluice__target_free(&ch->target);
  sluice__tls_ctx_unref(ch->opts.tls);
  free(ch->opts.tls_name);
  free(ch);
}

static void on_wait_timer_closed(uv_handle_t *h) {
  sluice_channel *ch = h->data;
  ch->wait_timer_open = 0;
  sluice__channel_maybe_free(ch);
}

static void on_resolve_timer_closed(uv_handle_t *h) {
  sluice_channel *ch = h->data;
  ch->resolve_timer_open = 0;
  sluice__channel_maybe_free(ch);
}

/* Runs on the loop thread: fail everything, close every handle. The channel
 * frees itself once the last handle and call are gone. */
static void shutdown_on_loop(void *ud) {
  sluice_channel *ch = ud;
  ch->closing = 1;
  sluice__link *lists[] = {&ch->pending, &ch->waiting};
  for (size_t l = 0; l < 2; l++)
    while (!sluice__link_empty(lists[l])) {
      sluice__ccall *c = (sluice__ccall *)((char *)lists[l]->next -
                                           offsetof(sluice__ccall, link));
      sluice__ccall_complete(c, SLUICE_STATUS_CANCELLED, "channel destroyed");
    }
  if (ch->wait_timer_open)
    uv_close((uv_handle_t *)&ch->wait_timer, on_wait_timer_closed);
  if (ch->resolving)
    uv_cancel((uv_req_t *)&ch->gai);
  if (ch->resolve_timer_open)
    uv_close((uv_handle_t *)&ch->resolve_timer, on_resolve_timer_closed);
  /* dest_remove may free a dest at once: detach the array first. */
  size_t n = ch->n_dests;
  sluice__dest **v = ch->dests;
  for (size_t i = 0; i < n; i++) {
    sluice__dest *d = v[i];
    v[i] = NULL;
    sluice__dest_remove(d);
  }
  sluice__channel_maybe_free(ch);
}

void sluice_channel_del(sluice_channel *ch) {
  if (!ch)
    return;
  sluice__loop_del(ch->loop, shutdown_on_loop, ch);
}
