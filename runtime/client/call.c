/* The life of one client call: creation on any thread (with its retry or
 * hedging policy resolved), start on the loop (circuit breakers), its one
 * timer (deadline, backoff, next hedge), completion exactly once
 * (response, error, deadline, cancel, channel destroyed), and freeing once
 * its timer and streams have let go. Its attempts are attempt.c's. */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nghttp2/nghttp2.h>

#include "client/call_int.h"
#include "core/alloc.h"
#include "core/bigbuf.h"
#include "sluice/server.h"
#include "transport/message.h"
#include "wire/final_status.h"

void sluice_call_opts_init_sized(sluice_call_opts *o, size_t struct_size) {
  if (!o || struct_size < sizeof o->struct_size)
    return;
  memset(o, 0, struct_size < sizeof *o ? struct_size : sizeof *o);
  o->struct_size = struct_size;
}

/* The caller's options as this library's layout: fields its program did not
 * know of (an older, shorter struct) read as 0, fields this library does not
 * know of (a newer program) are ignored. */
static const sluice_call_opts *call_opts_read(const sluice_call_opts *opts,
                                              sluice_call_opts *local) {
  if (!opts || opts->struct_size >= sizeof *opts)
    return opts;
  /* A struct zeroed by hand: every field up to parent (what this ABI had
   * before wait_for_ready was appended). */
  size_t n = opts->struct_size ? opts->struct_size
                               : offsetof(sluice_call_opts, wait_for_ready);
  memset(local, 0, sizeof *local);
  memcpy(local, opts, n);
  return local;
}

/* A call is zeroed at every start (objcache.h): past 2 KiB glibc's memset
 * switches to rep stosb, which costs a call ~2000 more instructions under
 * callgrind (bench/percall.sh) for ~150 bytes. Keep it under. */
_Static_assert(sizeof(struct sluice_call) <= 2048,
               "sluice_call grew past 2 KiB (see the comment above)");

/* The channel's cache of call objects (loop thread only), set up on first
 * use: the channel does not know the call's size. */
static sluice__objcache *call_cache(sluice_channel *ch) {
  if (!ch->call_cache.size)
    sluice__objcache_init(&ch->call_cache, sizeof(sluice_call), 128);
  return &ch->call_cache;
}

static void call_free(sluice_call *c) {
  sluice_channel *ch = c->ch;
  /* Tasks queued on the loop thread would run on freed memory. */
  sluice__loop_cancel(ch->loop, &c->ready_task);
  sluice__loop_cancel(ch->loop, &c->resume_task);
  sluice__loop_cancel(ch->loop, &c->kick_task);
  sluice__loop_cancel(ch->loop, &c->fail_task);
  sluice__sendq_destroy(&c->sendq);
  sluice__call_free_attempts(c);
  sluice_metadata_del(c->send_md);
  free(c->last_text);
  free(c->fail_req_msg);
  free(c->fail_text);
  sluice_metadata_del(c->initial_md);
  sluice_metadata_del(c->trailing_md);
  if (c->resp)
    protobuf_c_message_free_unpacked(c->resp, sluice__bigbuf_pb_allocator());
  /* Cached before live_calls drops: the channel may be freed right after. */
  if (sluice__loop_on_thread(ch->loop))
    sluice__objcache_put(call_cache(ch), c);
  else
    free(c);
  __atomic_sub_fetch(&ch->live_calls, 1, __ATOMIC_RELAXED);
  sluice__channel_call_gone(ch);
}

void sluice__call_unref(sluice_call *c) {
  if (--c->refs == 0)
    call_free(c);
}

static void call_unref(sluice_call *c) { sluice__call_unref(c); }

static void on_timer_closed(uv_handle_t *h) { call_unref(h->data); }

/* Calls by attempts made, for the stats: [0] one ... [4] five or more. */
static void count_done(sluice_call *c) {
  sluice__resil *r = &c->ch->res;
  if (c->counted)
    r->active--;
  if (c->in_retry)
    r->in_retry--;
  c->counted = c->in_retry = 0;
  unsigned i = c->n_tries ? c->n_tries - 1 : 0;
  if (i > 4)
    i = 4;
  r->total.calls_by_attempts[i]++;
  r->per_path[c->path_id].calls_by_attempts[i]++;
}

void sluice__call_complete(sluice_call *c, sluice__attempt *a,
                           sluice_status_code code, const char *message) {
  if (c->state == SLUICE__CALL_DONE)
    return;
  /* A cancel (or another local failure) was requested and its task is on
   * its way: deliver() has dropped every message since, so the status the
   * stream ended with (OK, say, when the whole response had arrived in the
   * same read as the message whose on_message cancelled) would report a
   * call whose messages the application never saw. The request wins, as
   * sluice_call_cancel() promises. */
  if (__atomic_load_n(&c->fail_posted, __ATOMIC_ACQUIRE)) {
    code = c->fail_req;
    message = c->fail_req_msg ? c->fail_req_msg
                              : "call failed (out of memory for its reason)";
  }
  c->state = SLUICE__CALL_DONE;
  sluice__call_stop_attempts(c, a, code);
  count_done(c);
  sluice__sendq_abort(&c->sendq); /* later sends: SLUICE_ERR_STATE */
  if (c->timer_open) {
    c->timer_open = 0;
    uv_close((uv_handle_t *)&c->timer, on_timer_closed);
  }
  sluice__call_result r = {
      {code, (char *)(message ? message : ""), c->initial_md, c->trailing_md},
      code == SLUICE_STATUS_OK ? c->resp : NULL};
  if (c->take) {
    c->take(&r, c->user_data);
  } else if (c->tramp) {
    c->tramp(&r.st, r.resp, c->cb, c->user_data);
  } else {
    c->h.on_done(c, &r.st, c->user_data);
  }
  /* What the completion took is no longer ours to free. */
  c->initial_md = r.st.initial_md;
  c->trailing_md = r.st.trailing_md;
  if (code == SLUICE_STATUS_OK)
    c->resp = r.resp;
  call_unref(c);
}

/* Completion with no particular attempt (deadline, cancel, local). */
static void complete(sluice_call *c, sluice_status_code code,
                     const char *message) {
  sluice__call_complete(c, NULL, code, message);
}

static void on_timer(uv_timer_t *t);

/* The earliest of what the timer waits for; 0: nothing. */
static uint64_t timer_due(const sluice_call *c) {
  uint64_t due = c->deadline_ns;
  if (c->retry_at_ns && (!due || c->retry_at_ns < due))
    due = c->retry_at_ns;
  if (c->hedge_at_ns && (!due || c->hedge_at_ns < due))
    due = c->hedge_at_ns;
  return due;
}

void sluice__call_timer_arm(sluice_call *c) {
  if (c->state == SLUICE__CALL_DONE)
    return;
  uint64_t due = timer_due(c);
  if (!due) {
    if (c->timer_open)
      uv_timer_stop(&c->timer);
    return;
  }
  if (!c->timer_open) {
    uv_timer_init(sluice__loop_uv(c->ch->loop), &c->timer);
    c->timer.data = c;
    c->timer_open = 1;
    c->refs++;
  }
  uint64_t now = sluice_now_ns();
  sluice__timer_start_deadline(&c->timer, due > now ? due : now, now, on_timer);
}

/* One timer for the deadline, the retry's backoff and the next hedge: a
 * call that retries or hedges costs no second timer handle. libuv may fire
 * a little early (its clock is cached): what is not yet due re-arms. */
static void on_timer(uv_timer_t *t) {
  sluice_call *c = t->data;
  uint64_t now = sluice_now_ns();
  if (c->deadline_ns && now >= c->deadline_ns) {
    char msg[96];
    snprintf(msg, sizeof msg, "deadline exceeded after %" PRIu64 " ms",
             (now - c->start_ns) / 1000000);
    complete(c, SLUICE_STATUS_DEADLINE_EXCEEDED, msg);
    return;
  }
  if (c->retry_at_ns && now >= c->retry_at_ns)
    sluice__call_retry_now(c);
  if (c->hedge_at_ns && now >= c->hedge_at_ns && sluice__call_hedge(c) != 0 &&
      c->n_live == 0)
    /* the last hedge could not go and nothing else is outstanding */
    sluice__call_complete(c, NULL, c->last_code,
                          c->last_text ? c->last_text : "");
  sluice__call_timer_arm(c);
}

/* Fails c at once when a circuit breaker (Envoy's cluster thresholds) is
 * open: locally, without I/O, counted as its own reason. */
static int breaker_open(sluice_call *c) {
  sluice_channel *ch = c->ch;
  const char *name = NULL;
  uint32_t max = 0;
  if (ch->opts.cb_max_requests && ch->res.active >= ch->opts.cb_max_requests) {
    name = "max_requests";
    max = ch->opts.cb_max_requests;
    ch->res.breaker_requests++;
  } else if (ch->opts.cb_max_pending &&
             ch->picker.n_queued >= ch->opts.cb_max_pending) {
    name = "max_pending";
    max = ch->opts.cb_max_pending;
    ch->res.breaker_pending++;
  }
  if (!name)
    return 0;
  sluice__picker_note_refusal(&ch->picker);
  char msg[160];
  snprintf(msg, sizeof msg,
           "circuit breaker %s (%" PRIu32 ") is open: nothing was sent", name,
           max);
  complete(c, SLUICE_STATUS_RESOURCE_EXHAUSTED, msg);
  return 1;
}

static void start_on_loop(sluice__task *t) {
  sluice_call *c = SLUICE__CONTAINER_OF(t, sluice_call, start_task);
  sluice_channel *ch = c->ch;
  c->state = SLUICE__CALL_STARTED;
  sluice__attempt *a = &c->first;
  /* What the balancer knows of the call: its path, size and deadline. */
  c->path_id = sluice__picker_path_id(&ch->picker, c->method);
  a->pick.lbc.path_id = c->path_id;
  size_t q = sluice__sendq_queued(&c->sendq);
  a->pick.lbc.size = q > UINT32_MAX ? UINT32_MAX : (uint32_t)q;
  a->pick.lbc.deadline_ns = c->deadline_ns;
  a->pick.lbc.child = c->child;
  /* A hedge copies the whole request when it goes: only a request that is
   * complete when the call starts can be hedged. */
  if (c->hp && !sluice__sendq_is_closed(&c->sendq)) {
    c->hp = NULL;
    c->max_attempts = 1;
  }
  if (ch->closing) {
    complete(c, SLUICE_STATUS_CANCELLED, "channel destroyed");
    return;
  }
  if (c->fail_code != SLUICE_STATUS_OK) {
    complete(c, c->fail_code, c->fail_reason);
    return;
  }
  if (c->deadline_ns && sluice_now_ns() >= c->deadline_ns) {
    complete(c, SLUICE_STATUS_DEADLINE_EXCEEDED,
             "deadline already expired before the call "
             "started (nothing was sent)");
    return;
  }
  if (breaker_open(c))
    return;
  ch->res.active++;
  c->counted = 1;
  ch->res.total.calls++;
  ch->res.per_path[c->path_id].calls++;
  sluice__call_start_attempts(c);
  sluice__call_timer_arm(c);
}

static uint32_t min_nonzero(uint32_t a, uint32_t b) {
  if (!a)
    return b;
  if (!b)
    return a;
  return a < b ? a : b;
}

/* ---- work handed to the loop from any thread */

static void kick_on_loop(sluice__task *t) {
  sluice_call *c = SLUICE__CONTAINER_OF(t, sluice_call, kick_task);
  sluice__loop_posted_clear(&c->kick_posted);
  /* Only the first attempt streams the call's own send queue (hedges have
   * their copies, complete from the start). */
  sluice__attempt *a = &c->first;
  if (c->state == SLUICE__CALL_STARTED && a->state == SLUICE__ATTEMPT_ACTIVE)
    sluice__stream_resume_send(&a->cs.st);
}

static void kick(sluice_call *c) {
  sluice__loop_post_once(c->ch->loop, &c->kick_task, &c->kick_posted);
}

static void ready_on_loop(sluice__task *t) {
  sluice_call *c = SLUICE__CONTAINER_OF(t, sluice_call, ready_task);
  if (c->state != SLUICE__CALL_DONE && c->h.on_send_ready)
    c->h.on_send_ready(c, c->user_data);
}

static void resume_on_loop(sluice__task *t) {
  sluice_call *c = SLUICE__CONTAINER_OF(t, sluice_call, resume_task);
  sluice__loop_posted_clear(&c->resume_posted);
  sluice__attempt *a = sluice__call_recv_attempt(c);
  a->cs.st.recv.paused = __atomic_load_n(&c->want_paused, __ATOMIC_ACQUIRE);
  if (c->state != SLUICE__CALL_DONE && !a->cs.st.recv.paused)
    sluice__call_drain_held(c);
}

/* A text that stays as long as the call (its copy in *slot), or a fixed
 * one when there is no memory for the copy. */
static const char *keep_text(char **slot, const char *text) {
  free(*slot);
  *slot = sluice__strdup(text);
  return *slot ? *slot : "call failed (out of memory for its reason)";
}

static void fail_on_loop(sluice__task *t) {
  sluice_call *c = SLUICE__CONTAINER_OF(t, sluice_call, fail_task);
  const char *msg = c->fail_req_msg
                        ? c->fail_req_msg
                        : "call failed (out of memory for its reason)";
  if (c->state == SLUICE__CALL_NEW) {
    /* Not started yet: start_on_loop reports it. */
    c->fail_code = c->fail_req;
    c->fail_reason = msg;
    return;
  }
  complete(c, c->fail_req, msg);
}

static void release_on_loop(sluice__task *t) {
  call_unref(SLUICE__CONTAINER_OF(t, sluice_call, release_task));
}

/* Fails the call from any thread (first request wins). From the moment
 * fail_posted is set the loop drops response messages (deliver()) and any
 * completion reports this status (sluice__call_complete()). */
static void request_fail(sluice_call *c, sluice_status_code code,
                         const char *msg) {
  if (__atomic_exchange_n(&c->fail_claimed, 1, __ATOMIC_ACQ_REL))
    return;
  c->fail_req = code;
  c->fail_req_msg =
      sluice__strdup(msg ? msg : ""); /* NULL: fail_on_loop's text */
  __atomic_store_n(&c->fail_posted, 1, __ATOMIC_RELEASE);
  sluice__loop_post(c->ch->loop, &c->fail_task);
}

/* ---- creation */

/* Frees a call that never reached the loop. */
static void call_discard(sluice_call *c) {
  sluice_metadata_del(c->send_md);
  free(c->fail_req_msg);
  free(c->fail_text);
  sluice__sendq_destroy(&c->sendq);
  sluice__cstream_clear(&c->first.cs);
  free(c);
}

/* The call's retry or hedging policy: its own options' (checked here, an
 * invalid one fails the call), else the service config's entry for its
 * path, else the .proto's; none when retries are off or the method's
 * policy allows a single attempt. Also applies the service config's (or
 * .proto's) timeout and message sizes, which the call's options override.
 * An invalid policy sets c->fail_code: start_on_loop reports it. */
static void resolve_policy(sluice_call *c, const sluice_call_opts *opts,
                           uint64_t *timeout_ms) {
  sluice_channel *ch = c->ch;
  const sluice_method_desc *m = c->method;
  const sluice_method_config *mc =
      sluice__svc_config_find(&ch->opts.svc, m->path);
  if (!mc)
    mc = m->config;
  /* Wait-for-ready: the call's own choice, else the service config's. */
  if (opts && opts->wait_for_ready)
    c->wait_for_ready = opts->wait_for_ready > 0;
  else
    c->wait_for_ready = mc && mc->wait_for_ready == 1;
  if (mc) {
    if (mc->timeout_ms && !*timeout_ms)
      *timeout_ms = mc->timeout_ms;
    c->max_request_size =
        min_nonzero(c->max_request_size, mc->max_request_bytes);
    c->max_response_size =
        min_nonzero(c->max_response_size, mc->max_response_bytes);
  }
  if (opts && (opts->retry_policy || opts->hedging_policy)) {
    char err[120];
    int rv = 0;
    if (opts->retry_policy && opts->hedging_policy) {
      snprintf(err, sizeof err, "both retry_policy and hedging_policy set");
      rv = -1;
    } else if (opts->retry_policy) {
      rv = sluice__retry_policy_check(opts->retry_policy, 0, err, sizeof err);
      c->own.rp = *opts->retry_policy;
      c->rp = &c->own.rp;
    } else {
      rv = sluice__hedging_policy_check(opts->hedging_policy, 0, err,
                                        sizeof err);
      c->own.hp = *opts->hedging_policy;
      c->hp = &c->own.hp;
    }
    if (rv != 0) {
      c->rp = NULL;
      c->hp = NULL;
      c->fail_code = SLUICE_STATUS_INVALID_ARGUMENT;
      char text[160];
      snprintf(text, sizeof text, "call options: %s", err);
      c->fail_reason = keep_text(&c->fail_text, text);
      return;
    }
  } else if (mc) {
    c->rp = mc->has_retry ? &mc->retry : NULL;
    c->hp = !c->rp && mc->has_hedging ? &mc->hedging : NULL;
  }
  /* Hedging copies the request to each attempt: a request stream cannot
   * be hedged (A6 hedges every kind; we keep it to a single request). */
  if (c->hp && sluice_call_kind_streams_requests(m->kind))
    c->hp = NULL;
  if ((opts && opts->no_retry) || !ch->opts.retries_enabled)
    c->rp = NULL, c->hp = NULL;
  unsigned max = c->rp ? c->rp->max_attempts : c->hp ? c->hp->max_attempts : 1;
  if (ch->opts.max_attempts_cap && max > ch->opts.max_attempts_cap)
    max = ch->opts.max_attempts_cap;
  if (max <= 1) {
    c->rp = NULL;
    c->hp = NULL;
    max = 1;
  }
  c->max_attempts = max;
}

/* Builds a call on the caller's thread; it reaches the loop with post_start.
 */
static sluice_call *call_new(sluice_channel *ch, const sluice_method_desc *m,
                             const sluice_call_opts *opts) {
  sluice_call_opts local;
  opts = call_opts_read(opts, &local);
  /* Calls started on the loop thread reuse freed ones (objcache.h). */
  sluice_call *c = sluice__loop_on_thread(ch->loop)
                       ? sluice__objcache_get(call_cache(ch))
                       : sluice__calloc(1, sizeof *c);
  if (!c)
    return NULL;
  size_t bound = opts && opts->send_buffer ? opts->send_buffer
                                           : SLUICE_DEFAULT_SEND_BUFFER;
  if (sluice__sendq_init(&c->sendq, bound) != 0) {
    free(c);
    return NULL;
  }
  c->ch = ch;
  c->method = m;
  c->refs = 1;
  c->start_ns = sluice_now_ns();
  c->start_task.fn = start_on_loop;
  c->kick_task.fn = kick_on_loop;
  c->ready_task.fn = ready_on_loop;
  c->resume_task.fn = resume_on_loop;
  c->fail_task.fn = fail_on_loop;
  c->release_task.fn = release_on_loop;
  sluice__list_init(&c->attempts);
  sluice__list_init(&c->parked.link);
  c->max_request_size =
      min_nonzero(min_nonzero(ch->opts.max_request_size, m->max_request_size),
                  opts ? opts->max_request_size : 0);
  c->max_response_size =
      min_nonzero(min_nonzero(ch->opts.max_response_size, m->max_response_size),
                  opts ? opts->max_response_size : 0);
  c->compression = opts ? opts->compression : SLUICE_COMPRESS_NONE;
  if (c->compression != SLUICE_COMPRESS_GZIP)
    c->compression = SLUICE_COMPRESS_NONE;

  uint64_t timeout_ms = opts ? opts->timeout_ms : 0;
  resolve_policy(c, opts, &timeout_ms);
  if (!timeout_ms)
    timeout_ms = m->default_timeout_ms;
  if (c->rp || c->hp)
    /* Kept for a retry or hedge up to the retry buffer; past it the call
     * commits to its attempt (A6). */
    sluice__sendq_retain_upto(&c->sendq, ch->opts.retry_buffer);
  else if (!sluice_call_kind_streams_requests(m->kind))
    sluice__sendq_retain(&c->sendq); /* replayable on REFUSED_STREAM */
  /* Saturated as a received grpc-timeout is (sluice__grpc_req_deadline):
   * a service config allows 10000 years, 2^64 ns is 584. */
  if (timeout_ms)
    c->deadline_ns = c->start_ns + (timeout_ms > UINT64_MAX / 2 / 1000000ull
                                        ? UINT64_MAX / 2
                                        : timeout_ms * 1000000ull);
  if (opts && opts->deadline_ns &&
      (!c->deadline_ns || opts->deadline_ns < c->deadline_ns))
    c->deadline_ns = opts->deadline_ns;

  /* Inside a chain: the parent's server tells its clients how hard this
   * channel is pushed back now (read on this thread: the parent is only
   * known to be alive here). */
  if (opts && opts->parent) {
    c->child = 1;
    double pressure = sluice__picker_pressure(&ch->picker);
    if (pressure >= 0)
      sluice_server_call_report_downstream(opts->parent, pressure);
  }

  if (opts && opts->metadata && sluice_metadata_count(opts->metadata)) {
    if (sluice_metadata_new(&c->send_md) != 0)
      goto nomem;
    for (size_t i = 0; i < sluice_metadata_count(opts->metadata); i++) {
      const char *k;
      const void *v;
      size_t vl;
      sluice_metadata_get(opts->metadata, i, &k, &v, &vl);
      if (sluice_metadata_add(c->send_md, k, v, vl) != 0)
        goto nomem;
    }
  }
  sluice__attempt_init(c, &c->first, &c->sendq);
  sluice__list_init(&c->first.link);
  return c;
nomem:
  call_discard(c);
  return NULL;
}

static void post_start(sluice_call *c) {
  /* Counted from any thread; the channel waits for it to reach 0. */
  __atomic_add_fetch(&c->ch->live_calls, 1, __ATOMIC_RELAXED);
  sluice__loop_post(c->ch->loop, &c->start_task);
}

/* A request over max_request_size: the call fails with RESOURCE_EXHAUSTED
 * (before it starts: the failure is recorded for the start task). */
static void request_too_large(sluice_call *c, size_t size, int started) {
  char text[160];
  snprintf(text, sizeof text,
           "request message larger than max (%zu vs. %" PRIu32 "); not sent",
           size, c->max_request_size);
  if (started) {
    request_fail(c, SLUICE_STATUS_RESOURCE_EXHAUSTED, text);
  } else {
    c->fail_code = SLUICE_STATUS_RESOURCE_EXHAUSTED;
    c->fail_reason = keep_text(&c->fail_text, text);
  }
}

/* Queues one framed request [prefix | body] (malloc'd); the queue owns it
 * on 0. */
static int push_request(sluice_call *c, uint8_t *buf, size_t len) {
  int deferred;
  int rv = sluice__sendq_push(&c->sendq, buf, len, 0, &deferred);
  if (rv == 0 && deferred)
    kick(c);
  return rv;
}

static sluice_compression request_compression(const sluice_call *c,
                                              unsigned flags) {
  return (flags & SLUICE_SEND_NO_COMPRESS) ? SLUICE_COMPRESS_NONE
                                           : c->compression;
}

/* Serializes msg and queues it. On TOO_LARGE the call is failed with
 * RESOURCE_EXHAUSTED (before it starts: *pre_fail set, no task). */
static int queue_message(sluice_call *c, const ProtobufCMessage *msg,
                         unsigned flags, int started) {
  uint8_t *buf;
  size_t len, size;
  int rv = sluice__msg_pack(msg, request_compression(c, flags),
                            c->max_request_size, &buf, &len, &size);
  if (rv == SLUICE_ERR_TOO_LARGE)
    request_too_large(c, size, started);
  if (rv != 0)
    return rv;
  rv = push_request(c, buf, len);
  if (rv != 0)
    free(buf);
  return rv;
}

/* As queue_message for a buffer the caller hands over (on 0 only): its own
 * block goes into the queue, no copy unless compressed. */
static int queue_buf(sluice_call *c, sluice_buf *b, unsigned flags,
                     int started) {
  uint8_t *buf;
  size_t len, size;
  int rv = sluice__msg_frame_buf(b, request_compression(c, flags),
                                 c->max_request_size, &buf, &len, &size);
  if (rv == SLUICE_ERR_TOO_LARGE)
    request_too_large(c, size, started);
  if (rv != 0)
    return rv;
  rv = push_request(c, buf, len);
  if (rv != 0)
    sluice__msg_frame_drop(b, buf);
  else
    sluice__msg_framed(b, buf);
  return rv;
}

/* Builds a unary call on the caller's thread (packing the request there
 * keeps that work off the loop) and hands it to the loop. Its completion is
 * the trampoline (tramp + cb) or, for the blocking call, take. */
static int start_unary(sluice_channel *ch, const sluice_method_desc *m,
                       const ProtobufCMessage *req,
                       const sluice_call_opts *opts, sluice_unary_tramp tramp,
                       sluice_generic_fn cb, sluice__take_fn take,
                       void *user_data) {
  if (!ch || !m || !req || !(tramp ? cb != NULL : take != NULL) || !m->path ||
      !m->request || !m->response || req->descriptor != m->request)
    return SLUICE_ERR_INVALID_ARG;
  sluice_call *c = call_new(ch, m, opts);
  if (!c)
    return SLUICE_ERR_NOMEM;
  c->tramp = tramp;
  c->cb = cb;
  c->take = take;
  c->user_data = user_data;
  int rv = queue_message(c, req, 0, 0);
  if (rv == SLUICE_ERR_NOMEM) {
    call_discard(c);
    return rv;
  }
  int deferred;
  sluice__sendq_close(&c->sendq, &deferred);
  post_start(c);
  return 0;
}

int sluice_unary_call_tramp(sluice_channel *ch, const sluice_method_desc *m,
                            const ProtobufCMessage *req,
                            const sluice_call_opts *opts,
                            sluice_unary_tramp tramp, sluice_generic_fn cb,
                            void *user_data) {
  if (!tramp)
    return SLUICE_ERR_INVALID_ARG;
  return start_unary(ch, m, req, opts, tramp, cb, NULL, user_data);
}

/* The streaming API's start: a call with handlers h (user_data, or, with
 * typed set, a copy of typed inside the call that the trampolines h get as
 * their user_data: no allocation of its own, alive exactly as long as they
 * run); req, when given, is the only request message (the sending side is
 * closed after it). */
static int start_handlers(sluice_channel *ch, const sluice_method_desc *m,
                          const ProtobufCMessage *req,
                          const sluice_call_opts *opts,
                          const sluice_call_handlers *h, void *user_data,
                          const sluice_call_typed_handlers *typed, int raw,
                          sluice_call **out) {
  sluice_call *c = call_new(ch, m, opts);
  if (!c)
    return SLUICE_ERR_NOMEM;
  c->h = *h;
  c->raw = raw;
  c->user_data = user_data;
  if (typed) {
    c->typed = *typed;
    c->user_data = &c->typed;
  }
  c->refs = 2; /* logical + the user's handle */
  if (req) {
    if (queue_message(c, req, 0, 0) == SLUICE_ERR_NOMEM) {
      call_discard(c);
      return SLUICE_ERR_NOMEM;
    }
    int deferred;
    sluice__sendq_close(&c->sendq, &deferred);
  }
  *out = c;
  post_start(c);
  return 0;
}

int sluice_call_start(sluice_channel *ch, const sluice_method_desc *m,
                      const sluice_call_opts *opts,
                      const sluice_call_handlers *h, void *user_data,
                      sluice_call **out) {
  if (!ch || !m || !h || !h->on_done || !out || !m->path || !m->request ||
      !m->response)
    return SLUICE_ERR_INVALID_ARG;
  return start_handlers(ch, m, NULL, opts, h, user_data, NULL, 0, out);
}

int sluice_call_start_msg(sluice_channel *ch, const sluice_method_desc *m,
                          const ProtobufCMessage *req,
                          const sluice_call_opts *opts,
                          const sluice_call_handlers *h, void *user_data,
                          sluice_call **out) {
  if (!ch || !m || !h || !h->on_done || !out || !req || !m->path ||
      !m->request || !m->response || req->descriptor != m->request)
    return SLUICE_ERR_INVALID_ARG;
  return start_handlers(ch, m, req, opts, h, user_data, NULL, 0, out);
}

int sluice_call_start_typed(sluice_channel *ch, const sluice_method_desc *m,
                            const ProtobufCMessage *req,
                            const sluice_call_opts *opts,
                            const sluice_call_handlers *tramps,
                            const sluice_call_typed_handlers *typed,
                            sluice_call **out) {
  if (!ch || !m || !tramps || !tramps->on_done || !typed || !typed->on_done ||
      !out || !m->path || !m->request || !m->response ||
      (req && req->descriptor != m->request))
    return SLUICE_ERR_INVALID_ARG;
  return start_handlers(ch, m, req, opts, tramps, NULL, typed, 0, out);
}

int sluice_call_start_raw(sluice_channel *ch, const sluice_method_desc *m,
                          const sluice_call_opts *opts,
                          const sluice_call_raw_handlers *rh, void *user_data,
                          sluice_call **out) {
  if (!ch || !m || !rh || !rh->on_done || !out || !m->path)
    return SLUICE_ERR_INVALID_ARG;
  /* The same handlers, on_message cast back in attempt.c's deliver. */
  sluice_call_handlers h = {
      rh->on_initial_metadata,
      (void (*)(sluice_call *, const ProtobufCMessage *, void *))rh->on_message,
      rh->on_send_ready, rh->on_done};
  return start_handlers(ch, m, NULL, opts, &h, user_data, NULL, 1, out);
}

/* The checks send_ex and send_buf share: a call that may take a message. */
static int can_send(sluice_call *c) {
  if (sluice__sendq_is_closed(&c->sendq))
    return SLUICE_ERR_STATE;
  if (!sluice_call_kind_streams_requests(c->method->kind) &&
      sluice__sendq_pushed(&c->sendq) > 0)
    return SLUICE_ERR_STATE;
  return 0;
}

int sluice_call_send_ex(sluice_call *c, const ProtobufCMessage *msg,
                        unsigned flags) {
  if (!c || !msg || !c->method->request ||
      msg->descriptor != c->method->request)
    return SLUICE_ERR_INVALID_ARG;
  int rv = can_send(c);
  return rv ? rv : queue_message(c, msg, flags, 1);
}

int sluice_call_send(sluice_call *c, const ProtobufCMessage *msg) {
  return sluice_call_send_ex(c, msg, 0);
}

int sluice_call_send_buf_ex(sluice_call *c, sluice_buf *msg, unsigned flags) {
  if (!c || !msg)
    return SLUICE_ERR_INVALID_ARG;
  int rv = can_send(c);
  return rv ? rv : queue_buf(c, msg, flags, 1);
}

int sluice_call_send_buf(sluice_call *c, sluice_buf *msg) {
  return sluice_call_send_buf_ex(c, msg, 0);
}

int sluice_call_close_send(sluice_call *c) {
  if (!c)
    return SLUICE_ERR_INVALID_ARG;
  int deferred;
  int rv = sluice__sendq_close(&c->sendq, &deferred);
  if (deferred)
    kick(c);
  return rv;
}

int sluice_call_cancel(sluice_call *c, const char *message) {
  if (!c)
    return SLUICE_ERR_INVALID_ARG;
  request_fail(c, SLUICE_STATUS_CANCELLED,
               message && *message ? message : "cancelled by the client");
  return 0;
}

int sluice_call_set_recv_paused(sluice_call *c, int paused) {
  if (!c)
    return SLUICE_ERR_INVALID_ARG;
  __atomic_store_n(&c->want_paused, paused ? 1 : 0, __ATOMIC_RELEASE);
  /* At once: no further message in this callback. */
  if (paused && sluice__loop_on_thread(c->ch->loop))
    sluice__call_recv_attempt(c)->cs.st.recv.paused = 1;
  sluice__loop_post_once(c->ch->loop, &c->resume_task, &c->resume_posted);
  return 0;
}

size_t sluice_call_send_queued(const sluice_call *c) {
  return c ? sluice__sendq_queued((sluice__sendq *)&c->sendq) : 0;
}

size_t sluice_call_recv_buffered_max(const sluice_call *c) {
  return c ? __atomic_load_n(&c->first.cs.st.recv.buffered_max,
                             __ATOMIC_RELAXED)
           : 0;
}

int sluice_call_last_message_compressed(const sluice_call *c) {
  return c ? c->last_compressed : 0;
}

void sluice_call_release(sluice_call *c) {
  if (c)
    sluice__loop_post(c->ch->loop, &c->release_task);
}

static void generic_tramp(const sluice_status *st, const ProtobufCMessage *resp,
                          sluice_generic_fn cb, void *user_data) {
  ((sluice_unary_cb)cb)(st, resp, user_data);
}

int sluice_unary_call(sluice_channel *ch, const sluice_method_desc *method,
                      const ProtobufCMessage *req, const sluice_call_opts *opts,
                      sluice_unary_cb cb, void *user_data) {
  if (!cb)
    return SLUICE_ERR_INVALID_ARG;
  return sluice_unary_call_tramp(ch, method, req, opts, generic_tramp,
                                 (sluice_generic_fn)cb, user_data);
}

/* ---- blocking calls: a condition variable the loop thread signals */

typedef struct blocking {
  uv_mutex_t mu;
  uv_cond_t cv;
  int done;
  sluice_status st;
  ProtobufCMessage *resp;
} blocking;

/* The blocking call's completion: takes the response and the metadata. */
static void blocking_take(sluice__call_result *r, void *user_data) {
  blocking *b = user_data;
  b->st.code = r->st.code;
  b->st.message = sluice__strdup(r->st.message ? r->st.message : "");
  b->st.initial_md = r->st.initial_md;
  b->st.trailing_md = r->st.trailing_md;
  r->st.initial_md = r->st.trailing_md = NULL;
  b->resp = r->resp;
  r->resp = NULL;
  uv_mutex_lock(&b->mu);
  b->done = 1;
  uv_cond_signal(&b->cv);
  uv_mutex_unlock(&b->mu);
}

static sluice_status_code local_fail(sluice_status *out,
                                     sluice_status_code code, const char *msg) {
  if (out) {
    sluice_status_init(out);
    out->code = code;
    out->message = sluice__strdup(msg);
  }
  return code;
}

sluice_status_code sluice_unary_call_blocking(sluice_channel *ch,
                                              const sluice_method_desc *method,
                                              const ProtobufCMessage *req,
                                              ProtobufCMessage **resp,
                                              const sluice_call_opts *opts,
                                              sluice_status *status) {
  if (resp)
    *resp = NULL;
  if (!ch || !method || !req || !resp)
    return local_fail(status, SLUICE_STATUS_INVALID_ARGUMENT,
                      "blocking call: channel, method, request and response "
                      "pointer are required");
  if (req->descriptor != method->request)
    return local_fail(status, SLUICE_STATUS_INVALID_ARGUMENT,
                      "blocking call: request is not of the method's type");
  if (sluice__loop_on_thread(ch->loop))
    return local_fail(status, SLUICE_STATUS_FAILED_PRECONDITION,
                      "blocking call made on the channel's loop thread (it "
                      "would deadlock); use the async call there");
  blocking b;
  memset(&b, 0, sizeof b);
  uv_mutex_init(&b.mu);
  uv_cond_init(&b.cv);
  int rv = start_unary(ch, method, req, opts, NULL, NULL, blocking_take, &b);
  if (rv != 0) {
    uv_mutex_destroy(&b.mu);
    uv_cond_destroy(&b.cv);
    return local_fail(status, SLUICE_STATUS_INTERNAL, sluice_strerror(rv));
  }
  uv_mutex_lock(&b.mu);
  while (!b.done)
    uv_cond_wait(&b.cv, &b.mu);
  uv_mutex_unlock(&b.mu);
  uv_mutex_destroy(&b.mu);
  uv_cond_destroy(&b.cv);
  *resp = b.resp;
  sluice_status_code code = b.st.code;
  if (status)
    *status = b.st;
  else
    sluice_status_clear(&b.st);
  return code;
}
