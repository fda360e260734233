/* The attempts of a client call: each one picked, streamed and ended; what
 * follows an attempt that failed (a transparent replay, a retry after its
 * backoff, the next hedge, or the call's completion); the commit to the
 * attempt whose response headers came first; the channel's retry, hedging
 * and circuit-breaker accounting. The decisions themselves are
 * client/retry.c's (pure); this file carries them out. Loop thread. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nghttp2/nghttp2.h>

#include "client/call_int.h"
#include "core/alloc.h"
#include "core/bigbuf.h"
#include "transport/message.h"
#include "wire/final_status.h"

static int single_response(const sluice_call *c) {
  return !sluice_call_kind_streams_responses(c->method->kind);
}

/* ---- counters (sluice_channel_get_resilience_stats) */

#define COUNT(c, field, n)                                                     \
  do {                                                                         \
    (c)->ch->res.total.field += (n);                                           \
    (c)->ch->res.per_path[(c)->path_id].field += (n);                          \
  } while (0)

/* A uniform draw in [0, 1) for the backoff's jitter (xorshift64*: the
 * jitter spreads retries apart, it need not be unpredictable). */
static double jitter(sluice_channel *ch) {
  uint64_t x = ch->res.rng;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  ch->res.rng = x;
  return (double)((x * 0x2545F4914F6CDD1Dull) >> 11) / 9007199254740992.0;
}

/* Calls in retry and open hedges, not counting c's own retry. */
static uint64_t retries_besides(const sluice_call *c) {
  const sluice__resil *r = &c->ch->res;
  return r->in_retry + r->hedges_open - (c->in_retry ? 1u : 0u);
}

static int budget_ok(const sluice_call *c) {
  const struct sluice_channel_opts *o = &c->ch->opts;
  return sluice__budget_allows(o->budget_percent, o->budget_min_conc,
                               retries_besides(c), c->ch->res.active);
}

static int breaker_ok(const sluice_call *c) {
  uint32_t max = c->ch->opts.cb_max_retries;
  return !max || retries_besides(c) + 1 <= max;
}

/* ---- attempts: set-up, live accounting */

static int deliver(void *ud, int compressed, const uint8_t *data, size_t len);
static const sluice__cstream_ops cstream_ops;
static const sluice__stream_ops stream_ops, stream_ops_turns;
static const sluice__pick_ops pick_ops;
static void parked_cancel(sluice__parked *p);

/* The call is in no picker queue and on no connection (a retry's backoff,
 * or held messages after an OK end): on the channel's parked list, so that
 * the channel's destruction still completes it (parked_cancel). At most
 * once: sluice__call_stop_attempts and a retry take it off. */
static void park(sluice_call *c) {
  sluice__list_remove(&c->parked.link);
  sluice__list_push(&c->ch->res.parked, &c->parked.link);
}

static sluice__attempt *attempt_of(sluice__cstream *s) {
  return SLUICE__CONTAINER_OF(s, sluice__attempt, cs);
}

void sluice__attempt_init(sluice_call *c, sluice__attempt *a,
                          sluice__sendq *q) {
  a->call = c;
  a->state = SLUICE__ATTEMPT_PICKING;
  a->live = 0;
  a->got_headers = 0;
  a->n_msgs = 0;
  a->final_pending = 0;
  a->fail_code = SLUICE_STATUS_OK;
  a->fail_reason = NULL;
  /* A stream of requests takes turns with the connection's other requests
   * (each of which goes out whole; transport/h2session.c). */
  sluice__cstream_init(
      &a->cs, q, c->max_response_size, deliver, a, &cstream_ops,
      sluice_call_kind_streams_requests(c->method->kind) ? &stream_ops_turns
                                                         : &stream_ops);
  /* A pause asked for before this attempt existed holds for it too. */
  a->cs.st.recv.paused = __atomic_load_n(&c->want_paused, __ATOMIC_ACQUIRE);
  a->pick.ops = &pick_ops;
  c->parked.cancel = parked_cancel;
  a->pick.cs = &a->cs;
  a->pick.req.path = c->method->path;
  a->pick.req.deadline_ns = c->deadline_ns;
  a->pick.req.compression = c->compression;
  a->pick.req.md = c->send_md;
  a->pick.req.prev_attempts = 0;
  a->pick.start_ns = c->start_ns;
  a->pick.pick_ns = 0;
  a->pick.wait_since = 0;
  a->pick.sc = NULL;
  a->pick.strat_done = 0;
  a->pick.avoid = NULL;
  a->pick.avoid_index = 0;
  a->pick.hedge = 0;
  a->pick.wait_for_ready = c->wait_for_ready;
  sluice__list_init(&a->pick.link);
}

/* Queues a (set up) for a pick: it is live until its stream closes or its
 * pick fails (attempt_gone). */
static void attempt_queue(sluice_call *c, sluice__attempt *a) {
  a->live = 1;
  c->n_live++;
  if (a->hedge)
    c->ch->res.hedges_open++;
  sluice__channel_enqueue(c->ch, &a->pick);
}

/* Queues a (set up) as the call's next attempt of its policy. */
static void attempt_launch(sluice_call *c, sluice__attempt *a) {
  if (c->n_tries > 0) {
    a->pick.req.prev_attempts = c->n_tries;
    a->pick.avoid = c->last_sc;
    a->pick.avoid_index = c->last_sc_index;
    a->pick.lbc.again = 1;
  }
  c->n_tries++;
  COUNT(c, attempts, 1);
  attempt_queue(c, a);
}

/* a stopped being live (its stream closed, or its pick failed or was
 * withdrawn). Idempotent. */
static void attempt_gone(sluice_call *c, sluice__attempt *a) {
  if (!a->live)
    return;
  a->live = 0;
  c->n_live--;
  if (a->hedge)
    c->ch->res.hedges_open--;
}

void sluice__call_start_attempts(sluice_call *c) {
  sluice__attempt *a = &c->first;
  sluice__list_push(&c->attempts, &a->link);
  attempt_launch(c, a);
  if (c->hp && c->max_attempts > 1) {
    if (c->hp->hedging_delay_ms == 0) {
      while (c->n_tries < c->max_attempts && sluice__call_hedge(c) == 0)
        ;
    } else {
      c->hedge_at_ns =
          sluice_now_ns() + (uint64_t)c->hp->hedging_delay_ms * 1000000u;
    }
  }
}

/* Stops every live attempt of a call that is completing: the attempt the
 * call ends with (a, may be NULL) tells the balancer code, the others
 * CANCELLED; streams are reset, queued picks withdrawn. */
void sluice__call_stop_attempts(sluice_call *c, sluice__attempt *a,
                                sluice_status_code code) {
  c->retry_at_ns = c->hedge_at_ns = 0;
  sluice__list_remove(&c->parked.link);
  SLUICE__LIST_FOREACH(n, &c->attempts) {
    sluice__attempt *x = SLUICE__CONTAINER_OF(n, sluice__attempt, link);
    sluice__picker_done(&c->ch->picker, &x->pick,
                        x == a ? code : SLUICE_STATUS_CANCELLED,
                        x->cs.rx_bytes);
    sluice__picker_remove(&c->ch->picker, &x->pick);
    x->cs.discard = 1;
    if (x->state == SLUICE__ATTEMPT_ACTIVE)
      sluice__stream_reset(&x->cs.st, NGHTTP2_CANCEL);
    else
      attempt_gone(c, x); /* picking: it will hear nothing more */
    /* Held messages are dropped; their bytes go back to the connection
     * when the stream closes (recv_reset keeps the unconsumed count). */
    sluice__recv_reset(&x->cs.st.recv);
  }
}

void sluice__call_free_attempts(sluice_call *c) {
  sluice__list *n;
  while ((n = sluice__list_head(&c->attempts)) != NULL) {
    sluice__attempt *x = SLUICE__CONTAINER_OF(n, sluice__attempt, link);
    sluice__list_remove(n);
    if (x->hedge) {
      sluice__hedge *h = SLUICE__CONTAINER_OF(x, sluice__hedge, a);
      sluice__cstream_clear(&h->a.cs);
      sluice__sendq_destroy(&h->q);
      free(h);
    }
  }
  sluice__cstream_clear(&c->first.cs);
}

sluice__attempt *sluice__call_recv_attempt(sluice_call *c) {
  return c->winner ? c->winner : &c->first;
}

/* ---- commit */

/* The call commits to a: its headers and messages reach the application,
 * the other attempts are cancelled, no hedge or retry follows. */
static void commit(sluice_call *c, sluice__attempt *a) {
  if (c->winner)
    return;
  c->winner = a;
  c->hedge_at_ns = 0;
  SLUICE__LIST_FOREACH(n, &c->attempts) {
    sluice__attempt *x = SLUICE__CONTAINER_OF(n, sluice__attempt, link);
    if (x == a || !x->live)
      continue;
    x->cs.discard = 1;
    sluice__picker_done(&c->ch->picker, &x->pick, SLUICE_STATUS_CANCELLED,
                        x->cs.rx_bytes);
    sluice__picker_remove(&c->ch->picker, &x->pick);
    if (x->state == SLUICE__ATTEMPT_ACTIVE)
      sluice__stream_reset(&x->cs.st, NGHTTP2_CANCEL);
    else
      attempt_gone(c, x);
  }
}

/* Non-zero once a can no longer be replaced by another attempt. */
static int committed(sluice_call *c, const sluice__attempt *a) {
  return c->winner == a || a->got_headers ||
         sluice__sendq_retain_dropped(a->cs.st.sendq);
}

/* ---- what follows a failed attempt */

static void remember(sluice_call *c, sluice_status_code code,
                     const char *text) {
  c->last_code = code;
  if (text == c->last_text)
    return;
  free(c->last_text);
  c->last_text = sluice__strdup(text ? text : ""); /* NULL: completes with "" */
}

/* A hedged call's attempt a failed with code (its status, or a refused
 * pick): fatal codes end the call, non-fatal ones let the others go on or
 * send the next hedge now. */
static void hedge_failed(sluice_call *c, sluice__attempt *a,
                         sluice_status_code code, const char *text) {
  if (code >= 32 || !(c->hp->non_fatal_codes & SLUICE_CODE_BIT(code))) {
    sluice__call_complete(c, a, code, text);
    return;
  }
  sluice__throttle_failure(&c->ch->res.throttle);
  remember(c, code, text);
  if (c->n_live > 0)
    return; /* the others, or the hedges still to come, may answer */
  /* Nothing outstanding: the next hedge goes now (A6), if one may. */
  if (c->n_tries < c->max_attempts && !c->winner) {
    c->hedge_at_ns = 0;
    if (sluice__call_hedge(c) == 0)
      return;
  }
  sluice__call_complete(c, a, c->last_code, c->last_text ? c->last_text : "");
}

/* Counts a retry that was not made. */
static void count_denied(sluice_call *c, sluice__retry_verdict v) {
  switch (v) {
  case SLUICE__RETRY_THROTTLED:
    COUNT(c, retries_throttled, 1);
    break;
  case SLUICE__RETRY_BUDGET:
    COUNT(c, retries_budget_denied, 1);
    break;
  case SLUICE__RETRY_PUSHBACK:
    COUNT(c, retries_pushback_denied, 1);
    break;
  case SLUICE__RETRY_DEADLINE:
    COUNT(c, retries_deadline_denied, 1);
    break;
  case SLUICE__RETRY_BREAKER:
    COUNT(c, retries_breaker_denied, 1);
    break;
  case SLUICE__RETRY_EXHAUSTED:
    COUNT(c, retries_exhausted, 1);
    break;
  default:
    break;
  }
}

/* Attempt a (no longer live) ended with code and text, not replayed
 * transparently: retry it, wait for the other hedges, or complete. */
static void attempt_ended(sluice_call *c, sluice__attempt *a,
                          sluice_status_code code, const char *text) {
  if (code == SLUICE_STATUS_OK) {
    if (c->rp || c->hp)
      sluice__throttle_success(&c->ch->res.throttle);
    sluice__call_complete(c, a, code, text);
    return;
  }
  if (c->hp && !c->winner) {
    hedge_failed(c, a, code, text);
    return;
  }
  if (!c->rp) {
    sluice__call_complete(c, a, code, text);
    return;
  }
  uint64_t pb_ms = 0;
  size_t pb_len = 0;
  const char *pb = c->trailing_md
                       ? sluice_metadata_find(c->trailing_md,
                                              "grpc-retry-pushback-ms", &pb_len)
                       : NULL;
  uint64_t now = sluice_now_ns();
  sluice__retry_facts f = {code,
                           committed(c, a),
                           c->n_tries,
                           c->max_attempts,
                           sluice__pushback_parse(pb, pb_len, &pb_ms),
                           pb_ms,
                           c->backoff_n + 1,
                           budget_ok(c),
                           breaker_ok(c),
                           now,
                           c->deadline_ns,
                           jitter(c->ch)};
  uint64_t delay_ms;
  int reset;
  sluice__retry_verdict v =
      sluice__retry_decide(c->rp, &f, &c->ch->res.throttle, &delay_ms, &reset);
  if (v == SLUICE__RETRY_YES &&
      sluice__sendq_rewind(a->cs.st.sendq) != 0) /* bytes not kept */
    v = SLUICE__RETRY_COMMITTED;
  if (v != SLUICE__RETRY_YES) {
    count_denied(c, v);
    if (v == SLUICE__RETRY_DEADLINE) {
      char msg[320];
      snprintf(msg, sizeof msg,
               "retry backoff would pass the deadline; last attempt: %s: %s",
               sluice_status_name(code), text ? text : "");
      sluice__call_complete(c, a, SLUICE_STATUS_DEADLINE_EXCEEDED, msg);
    } else {
      sluice__call_complete(c, a, code, text);
    }
    return;
  }
  /* The balancer hears of this attempt's end now; the retry is a new
   * attempt, picked afresh when its backoff is over. */
  sluice__picker_done(&c->ch->picker, &a->pick, code, a->cs.rx_bytes);
  c->backoff_n = reset ? 0 : c->backoff_n + 1;
  if (!c->in_retry) {
    c->in_retry = 1;
    c->ch->res.in_retry++;
  }
  COUNT(c, retries, 1);
  COUNT(c, retry_delay_ms_sum, delay_ms);
  c->retry_at_ns = now + delay_ms * 1000000u;
  park(c);
  sluice__call_timer_arm(c);
}

/* The channel was destroyed while the call waited for its retry, or for
 * its paused receiver to take the messages held after an OK end. */
static void parked_cancel(sluice__parked *p) {
  sluice_call *c = SLUICE__CONTAINER_OF(p, sluice_call, parked);
  sluice__call_complete(c, NULL, SLUICE_STATUS_CANCELLED, "channel destroyed");
}

void sluice__call_retry_now(sluice_call *c) {
  sluice__attempt *a = &c->first; /* retries run one at a time */
  c->retry_at_ns = 0;
  sluice__list_remove(&c->parked.link);
  sluice__cstream_clear(&a->cs);
  sluice_metadata_del(c->initial_md);
  sluice_metadata_del(c->trailing_md);
  c->initial_md = c->trailing_md = NULL;
  sluice__attempt_init(c, a, &c->sendq);
  attempt_launch(c, a);
}

int sluice__call_hedge(sluice_call *c) {
  c->hedge_at_ns = 0;
  if (c->state == SLUICE__CALL_DONE || c->winner ||
      c->n_tries >= c->max_attempts)
    return -1;
  sluice__retry_verdict v = SLUICE__RETRY_YES;
  if (!sluice__throttle_allows(&c->ch->res.throttle))
    v = SLUICE__RETRY_THROTTLED;
  else if (!budget_ok(c))
    v = SLUICE__RETRY_BUDGET;
  else if (!breaker_ok(c))
    v = SLUICE__RETRY_BREAKER;
  if (v != SLUICE__RETRY_YES) {
    count_denied(c, v);
    return -1;
  }
  sluice__hedge *h = sluice__calloc(1, sizeof *h);
  if (!h)
    return -1;
  if (sluice__sendq_init(&h->q, 0) != 0) {
    free(h);
    return -1;
  }
  if (sluice__sendq_copy(&h->q, &c->sendq) != 0) {
    sluice__sendq_destroy(&h->q);
    free(h);
    return -1;
  }
  sluice__attempt *a = &h->a;
  sluice__attempt_init(c, a, &h->q);
  a->hedge = 1;
  a->pick.hedge = 1;
  a->pick.lbc = c->first.pick.lbc;
  sluice__list_push(&c->attempts, &a->link);
  COUNT(c, hedges, 1);
  attempt_launch(c, a);
  if (c->n_tries < c->max_attempts && c->hp->hedging_delay_ms)
    c->hedge_at_ns =
        sluice_now_ns() + (uint64_t)c->hp->hedging_delay_ms * 1000000u;
  sluice__call_timer_arm(c);
  return 0;
}

/* ---- what an attempt's stream reports (client_h2.h) */

static void attempt_headers(sluice__cstream *s, int trailers,
                            sluice_metadata *md) {
  sluice__attempt *a = attempt_of(s);
  sluice_call *c = a->call;
  if (c->state == SLUICE__CALL_DONE || (c->winner && c->winner != a)) {
    sluice_metadata_del(md);
    return;
  }
  if (trailers) {
    sluice_metadata_del(c->trailing_md);
    c->trailing_md = md;
    if (sluice__deframer_partial(&s->st.recv.deframer) &&
        a->fail_code == SLUICE_STATUS_OK) {
      a->fail_code = SLUICE_STATUS_INTERNAL;
      a->fail_reason = "stream ended in the middle of a message";
    }
    return;
  }
  /* Response headers (not Trailers-Only): the call commits (A6). */
  a->got_headers = 1;
  commit(c, a);
  sluice_metadata_del(c->initial_md);
  c->initial_md = md;
  if (!c->tramp && !c->take && c->h.on_initial_metadata)
    c->h.on_initial_metadata(c, c->initial_md, c->user_data);
}

static void attempt_data_failed(sluice__cstream *s, sluice_status_code code,
                                const char *reason) {
  sluice__attempt *a = attempt_of(s);
  if (a->fail_code == SLUICE_STATUS_OK) { /* the receiver's own failure */
    a->fail_code = code;
    a->fail_reason = reason;
  }
  /* Fail now and reset the stream: no point receiving the rest. */
  sluice__call_complete(a->call, a, a->fail_code, a->fail_reason);
}

/* What the call knows when the attempt's stream ends (wire/final_status.h
 * decides from it). */
static sluice__final_facts final_facts(const sluice__attempt *a) {
  sluice__final_facts f = {
      &a->cs.rx,           a->fail_code,
      a->fail_reason,      a->call->method->kind,
      a->n_msgs,           sluice__recv_holding(&a->cs.st.recv),
      a->call->deadline_ns};
  return f;
}

/* The attempt was refused before the server processed it: the same
 * storage becomes the next attempt, with the replayed request (a
 * transparent retry: not an attempt of the retry policy). */
static void replay(sluice_call *c, sluice__attempt *a) {
  sluice__picker_unsent(&c->ch->picker, &a->pick);
  sluice__cstream_clear(&a->cs);
  sluice_metadata_del(c->initial_md);
  sluice_metadata_del(c->trailing_md);
  c->initial_md = c->trailing_md = NULL;
  sluice__pick saved = a->pick; /* strategy time counts from the first */
  int hedge = a->hedge;
  sluice__attempt_init(c, a, a->cs.st.sendq);
  a->hedge = hedge;
  a->pick.hedge = saved.hedge;
  a->pick.pick_ns = saved.pick_ns;
  a->pick.avoid = saved.avoid;
  a->pick.avoid_index = saved.avoid_index;
  a->pick.req.prev_attempts = saved.req.prev_attempts;
  a->pick.lbc = saved.lbc;
  COUNT(c, transparent_retries, 1);
  attempt_queue(c, a);
}

static void attempt_closed(sluice__cstream *s, uint32_t h2_error,
                           sluice_status_code lost_code,
                           const char *lost_text) {
  sluice__attempt *a = attempt_of(s);
  sluice_call *c = a->call;
  a->state = SLUICE__ATTEMPT_ENDED;
  attempt_gone(c, a);
  if (c->state == SLUICE__CALL_DONE || (c->winner && c->winner != a)) {
    sluice__call_unref(c); /* the stream's reference */
    return;
  }
  if (lost_code != SLUICE_STATUS_OK) { /* the connection went */
    attempt_ended(c, a, lost_code, lost_text);
    sluice__call_unref(c);
    return;
  }
  char buf[200];
  sluice__final_facts f = final_facts(a);
  sluice__final d = sluice__final_status(
      &f, h2_error,
      h2_error == NGHTTP2_CANCEL && c->deadline_ns ? sluice_now_ns() : 0, buf,
      sizeof buf);
  if (d.action == SLUICE__FINAL_RETRY &&
      sluice__sendq_rewind(a->cs.st.sendq) == 0) {
    replay(c, a);
  } else if (d.action == SLUICE__FINAL_HOLD) {
    /* Paused: on_done waits until every message was delivered. The call
     * is in no queue and on no connection now: parked, so that a channel
     * destroyed meanwhile still completes it (CANCELLED). */
    commit(c, a);
    if (c->rp || c->hp)
      sluice__throttle_success(&c->ch->res.throttle);
    sluice__picker_done(&c->ch->picker, &a->pick, d.code, a->cs.rx_bytes);
    a->final_pending = 1;
    park(c);
  } else {
    attempt_ended(c, a, d.code, d.text);
  }
  sluice__call_unref(c); /* the stream's reference */
}

static const sluice__cstream_ops cstream_ops = {
    attempt_headers, attempt_data_failed, attempt_closed};

/* The data provider took n bytes of the request. */
static void attempt_read(sluice__stream *s, size_t n, int ready) {
  sluice__attempt *a = SLUICE__CONTAINER_OF(s, sluice__attempt, cs.st);
  if (n)
    sluice__picker_flushed(&a->pick);
  if (ready && a == &a->call->first)
    sluice__loop_post(a->call->ch->loop, &a->call->ready_task);
}

static const sluice__stream_ops stream_ops = {attempt_read, NULL, 0};
static const sluice__stream_ops stream_ops_turns = {attempt_read, NULL,
                                                    SLUICE__STREAM_QUANTUM};

/* ---- what the picker reports (picker.h) */

/* The picker opened the attempt's stream. */
static void attempt_sent(sluice__pick *p) {
  sluice__attempt *a = SLUICE__CONTAINER_OF(p, sluice__attempt, pick);
  a->state = SLUICE__ATTEMPT_ACTIVE;
  a->call->last_sc = p->sc;
  a->call->last_sc_index = p->sc_index;
  a->call->refs++; /* the stream's */
}

/* Dropped by the picker (never sent), or refused by the connection. */
static void attempt_dropped(sluice__pick *p, sluice_status_code code,
                            const char *msg) {
  sluice__attempt *a = SLUICE__CONTAINER_OF(p, sluice__attempt, pick);
  sluice_call *c = a->call;
  a->state = SLUICE__ATTEMPT_ENDED;
  attempt_gone(c, a);
  if (c->state == SLUICE__CALL_DONE)
    return;
  if (a->hedge) { /* a hedge no destination admits: as if never tried */
    if (c->n_live == 0 && !c->hedge_at_ns)
      sluice__call_complete(c, a, c->last_code,
                            c->last_text ? c->last_text : "");
    return;
  }
  /* Nothing connected is the policy's to retry (A6: a pick in
   * TRANSIENT_FAILURE); the balancer's own early drops never are, or a
   * storm would follow every overload. */
  if (code == SLUICE_STATUS_UNAVAILABLE && (c->rp || c->hp))
    attempt_ended(c, a, code, msg);
  else
    sluice__call_complete(c, a, code, msg);
}

static const sluice__pick_ops pick_ops = {attempt_sent, attempt_dropped};

/* ---- delivery */

/* One response message as the application takes it: decoded into *msg, or
 * on a raw call handed over as *buf (in the block it was reassembled in
 * when there is one). */
static sluice_status_code take_message(sluice__attempt *a, int compressed,
                                       const uint8_t *data, size_t len,
                                       ProtobufCMessage **msg,
                                       sluice_buf **buf) {
  sluice_call *c = a->call;
  if (c->raw)
    return sluice__msg_to_buf(compressed, a->cs.rx.enc_ok, a->cs.rx.enc, data,
                              len, c->max_response_size,
                              sluice__recv_take(&a->cs.st.recv, data), buf,
                              a->fail_buf, sizeof a->fail_buf);
  return sluice__msg_unpack(c->method->response, compressed, a->cs.rx.enc_ok,
                            a->cs.rx.enc, data, len, c->max_response_size, msg,
                            a->fail_buf, sizeof a->fail_buf);
}

/* Delivers one received message (the receiver's deliver function). */
static int deliver(void *ud, int compressed, const uint8_t *data, size_t len) {
  sluice__attempt *a = ud;
  sluice_call *c = a->call;
  if (c->state == SLUICE__CALL_DONE || (c->winner && c->winner != a))
    return 1;
  commit(c, a);
  /* Cancelled (the task completing it is on its way): drop the message. */
  if (__atomic_load_n(&c->fail_posted, __ATOMIC_ACQUIRE))
    return 0;
  if (single_response(c) && a->n_msgs >= 1) {
    a->fail_code = SLUICE_STATUS_UNIMPLEMENTED;
    a->fail_reason = "server sent more than one response message";
    return 1;
  }
  ProtobufCMessage *m = NULL;
  sluice_buf *buf = NULL;
  sluice_status_code code = take_message(a, compressed, data, len, &m, &buf);
  if (code != SLUICE_STATUS_OK) {
    a->fail_code = code;
    a->fail_reason = a->fail_buf;
    return 1;
  }
  a->n_msgs++;
  c->last_compressed = compressed;
  if (buf) { /* raw: the buffer is the application's now */
    if (c->h.on_message)
      ((sluice__raw_on_message_fn)c->h.on_message)(c, buf, c->user_data);
    else
      sluice_buf_free(buf);
    return c->state == SLUICE__CALL_DONE ? 1 : 0;
  }
  if (c->tramp || c->take) {
    c->resp = m; /* handed over at completion */
    return 0;
  }
  if (c->h.on_message)
    c->h.on_message(c, m, c->user_data);
  protobuf_c_message_free_unpacked(m, sluice__bigbuf_pb_allocator());
  return c->state == SLUICE__CALL_DONE ? 1 : 0;
}

/* Delivers held messages if allowed; completes a call whose stream ended
 * while they were held. */
void sluice__call_drain_held(sluice_call *c) {
  sluice__attempt *a = sluice__call_recv_attempt(c);
  if (sluice__stream_drain(&a->cs.st) != 0) {
    if (c->state != SLUICE__CALL_DONE)
      sluice__call_complete(
          c, a, a->fail_code ? a->fail_code : SLUICE_STATUS_INTERNAL,
          a->fail_reason ? a->fail_reason : "");
    return;
  }
  if (a->final_pending && !sluice__recv_holding(&a->cs.st.recv) &&
      c->state != SLUICE__CALL_DONE) {
    a->final_pending = 0;
    sluice__final_facts f = final_facts(a);
    sluice__final d = sluice__final_status_drained(&f);
    sluice__call_complete(c, a, d.code, d.text);
  }
}
