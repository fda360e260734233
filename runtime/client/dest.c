/* Destinations: one address, its connection and its connectivity state
 * (IDLE -> CONNECTING -> READY, or TRANSIENT_FAILURE with back-off). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"

static void on_backoff(uv_timer_t *t) {
  sluice__dest *d = t->data;
  if (d->state == SLUICE__DEST_TRANSIENT_FAILURE)
    d->state = SLUICE__DEST_IDLE;
  sluice__channel_dispatch(d->ch);
}

int sluice__dest_new(sluice__dest **out, sluice_channel *ch,
                     const sluice__addr *addr) {
  sluice__dest *d = calloc(1, sizeof *d);
  if (!d)
    return SLUICE_ERR_NOMEM;
  d->ch = ch;
  d->addr = *addr;
  d->state = SLUICE__DEST_IDLE;
  d->backoff_ms = ch->opts.backoff_initial_ms;
  uv_timer_init(sluice__loop_uv(ch->loop), &d->backoff_timer);
  d->backoff_timer.data = d;
  d->timer_open = 1;
  sluice__lb_dest_init(&ch->lb, &d->lb, sluice_now_ns());
  ch->live_dests++;
  *out = d;
  return 0;
}

static void dest_free(sluice__dest *d) {
  sluice_channel *ch = d->ch;
  free(d);
  ch->live_dests--;
  sluice__channel_maybe_free(ch);
}

static void on_timer_closed(uv_handle_t *h) {
  sluice__dest *d = h->data;
  d->timer_open = 0;
  if (d->n_conns == 0)
    dest_free(d);
}

/* Frees the destination once its last connection is gone. */
void sluice__dest_remove(sluice__dest *d) {
  if (!d || d->removed)
    return;
  d->removed = 1;
  if (d->conn) {
    sluice__cconn *c = d->conn;
    d->conn = NULL;
    /* In-flight calls on a vanished address finish (or fail) there; on a
     * closing channel everything is cancelled and the socket closed. */
    if (d->ch->closing || !c->ready) {
      /* complete() leaves active calls linked until their stream closes,
       * which the socket close below does. */
      for (sluice__link *n = c->calls.next; n != &c->calls;) {
        sluice__link *next = n->next;
        sluice__ccall_complete(
            (sluice__ccall *)((char *)n - offsetof(sluice__ccall, link)),
            SLUICE_STATUS_CANCELLED,
            d->ch->closing ? "channel destroyed" : "destination removed");
        n = next;
      }
      sluice__conn_close(&c->conn, "channel destroyed");
    } else {
      c->draining = 1;
      nghttp2_session_terminate_session(c->conn.session, NGHTTP2_NO_ERROR);
      sluice__conn_want_write(&c->conn);
    }
  }
  uv_close((uv_handle_t *)&d->backoff_timer, on_timer_closed);
}

void sluice__dest_connect(sluice__dest *d) {
  if (d->state != SLUICE__DEST_IDLE || d->removed || d->ch->closing)
    return;
  sluice__cconn *c;
  if (sluice__cconn_new(&c, d) != 0) {
    snprintf(d->last_error, sizeof d->last_error,
             "cannot create a connection to %s", d->addr.name);
    d->state = SLUICE__DEST_TRANSIENT_FAILURE;
    uv_timer_start(&d->backoff_timer, on_backoff, d->backoff_ms, 0);
    return;
  }
  d->conn = c;
  d->state = SLUICE__DEST_CONNECTING;
}

int sluice__dest_has_capacity(const sluice__dest *d) {
  return d->state == SLUICE__DEST_READY && d->conn &&
         sluice__cconn_can_take(d->conn);
}

void sluice__dest_conn_ready(sluice__dest *d, sluice__cconn *c) {
  if (d->conn != c)
    return;
  d->state = SLUICE__DEST_READY;
  d->backoff_ms = d->ch->opts.backoff_initial_ms;
  d->last_error[0] = 0;
  if (d->ever_ready && d->lb.est.in_flight == 0) {
    /* A destination that came back is a new server as far as the balancer
     * knows: what was measured before it went away (latency, rate, limits,
     * state) would keep it from being used again. Counters stay. */
    sluice__lb_stats keep = d->lb.stats;
    sluice__lb_dest_init(&d->ch->lb, &d->lb, sluice_now_ns());
    d->lb.stats = keep;
  }
  d->ever_ready = 1;
  sluice__channel_dispatch(d->ch);
}

/* Next delay: x1.6 up to the max, with +-20 % jitter (gRPC's
 * connection-backoff), so that many clients do not reconnect in step. */
static uint64_t next_backoff(sluice__dest *d) {
  uint64_t base = d->backoff_ms;
  uint64_t next = base * 16 / 10;
  if (next > d->ch->opts.backoff_max_ms)
    next = d->ch->opts.backoff_max_ms;
  d->backoff_ms = next;
  double jitter = 0.8 + 0.4 * ((double)rand() / RAND_MAX);
  uint64_t delay = (uint64_t)((double)base * jitter);
  return delay ? delay : 1;
}

void sluice__dest_conn_failed(sluice__dest *d, sluice__cconn *c,
                              const char *reason, int was_ready) {
  d->n_conns--;
  int current = d->conn == c;
  if (current)
    d->conn = NULL;
  if (d->removed) {
    if (d->n_conns == 0 && !d->timer_open)
      dest_free(d);
    return;
  }
  if (current) {
    if (!was_ready) {
      snprintf(d->last_error, sizeof d->last_error,
               "failed to connect to %s: %s", d->addr.name, reason);
      d->state = SLUICE__DEST_TRANSIENT_FAILURE;
      uv_timer_start(&d->backoff_timer, on_backoff, next_backoff(d), 0);
      /* Addresses may have changed behind a name: look again. */
      sluice__channel_request_resolve(d->ch);
    } else {
      d->state = SLUICE__DEST_IDLE; /* reconnect when calls come */
    }
  }
  sluice__channel_dispatch(d->ch);
}
