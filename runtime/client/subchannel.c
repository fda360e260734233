/* Subchannels: one address, its connections and its connectivity state. */
#include "client/subchannel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "wire/compress.h"
#include "wire/health_msg.h"
#include "wire/orca.h"

static void hw_start(sluice__subchannel *sc);
static void hw_cancel(sluice__subchannel *sc);

/* sc's state, connection or health may have changed: the census counts it
 * anew, and the channel's next dispatch pass looks at it (connects it if
 * IDLE, refreshes its usable flag). Called after every such change, so
 * that the channel never needs to look at the others. */
static void changed(sluice__subchannel *sc) {
  sluice__sc_census *c = sc->env->census;
  if (!c || sc->removed)
    return;
  int refusing = sluice__subchannel_health_refuses(sc);
  c->n[sc->counted_state]--;
  c->n[sc->state]++;
  c->refusing = c->refusing - (size_t)sc->counted_refusing + (size_t)refusing;
  sc->counted_state = sc->state;
  sc->counted_refusing = refusing;
  if (!sluice__list_linked(&sc->changed_link))
    sluice__list_push(&c->changed, &sc->changed_link);
}

static void on_backoff(uv_timer_t *t) {
  sluice__subchannel *sc = t->data;
  if (sc->state == SLUICE__SC_TRANSIENT_FAILURE)
    sc->state = SLUICE__SC_IDLE;
  changed(sc);
  sc->env->kick(sc->env->ud);
}

int sluice__subchannel_new(sluice__subchannel **out,
                           const sluice__subchannel_env *env,
                           const sluice__addr *addr) {
  sluice__subchannel *sc = sluice__calloc(1, sizeof *sc);
  if (!sc)
    return SLUICE_ERR_NOMEM;
  sc->env = env;
  sc->addr = *addr;
  sc->state = SLUICE__SC_IDLE;
  sc->backoff_ms = env->backoff_initial_ms;
  sc->hw_backoff_ms = env->backoff_initial_ms;
  sc->health =
      env->health_service ? SLUICE__HEALTH_UNKNOWN : SLUICE__HEALTH_OFF;
  uv_timer_init(sluice__loop_uv(env->loop), &sc->backoff_timer);
  sc->backoff_timer.data = sc;
  sc->timer_open = 1;
  sluice__lb_dest_init(env->lb, &sc->lb, sluice_now_ns());
  sluice__list_init(&sc->changed_link);
  sc->counted_state = SLUICE__SC_IDLE;
  if (env->census) {
    env->census->n[SLUICE__SC_IDLE]++;
    sluice__list_push(&env->census->changed, &sc->changed_link);
  }
  *out = sc;
  return 0;
}

static void sc_free(sluice__subchannel *sc) {
  const sluice__subchannel_env *env = sc->env;
  free(sc);
  env->gone(env->ud);
}

static void on_timer_closed(uv_handle_t *h) {
  sluice__subchannel *sc = h->data;
  sc->timer_open = 0;
  if (sc->n_conns == 0)
    sc_free(sc);
}

void sluice__subchannel_remove(sluice__subchannel *sc,
                               const char *cancel_text) {
  if (!sc || sc->removed)
    return;
  sluice__sc_census *census = sc->env->census;
  if (census) { /* counted no more (changed() ignores it from now on) */
    census->n[sc->counted_state]--;
    census->refusing -= (size_t)sc->counted_refusing;
    sluice__list_remove(&sc->changed_link);
  }
  sc->removed = 1;
  hw_cancel(sc); /* a draining connection must not wait for it */
  if (sc->conn) {
    sluice__cconn *c = sc->conn;
    sc->conn = NULL;
    /* Streams on a vanished address finish (or fail) there; on a closing
     * channel, or a connection not ready yet, they end now. */
    if (cancel_text || !c->ready)
      sluice__cconn_abort(c, SLUICE_STATUS_CANCELLED,
                          cancel_text ? cancel_text : "destination removed");
    else
      sluice__cconn_drain(c);
  }
  uv_close((uv_handle_t *)&sc->backoff_timer, on_timer_closed);
}

/* ---- what the connection reports */

static void conn_ready(sluice__cconn *c, void *ud) {
  sluice__subchannel *sc = ud;
  if (sc->conn != c)
    return;
  sc->state = SLUICE__SC_READY;
  sc->backoff_ms = sc->env->backoff_initial_ms;
  sc->last_error[0] = 0;
  if (sc->ever_ready && sc->lb.est.in_flight == 0) {
    /* A destination that came back is a new server as far as the balancer
     * knows: what was measured before it went away (latency, rate, limits,
     * state) would keep it from being used again. Counters stay. */
    sluice__lb_dest_reset(sc->env->lb, &sc->lb, sluice_now_ns());
  }
  sc->ever_ready = 1;
  if (sc->env->health_service) {
    /* Not picked until the first answer (A17: CONNECTING until then). */
    sc->health = SLUICE__HEALTH_UNKNOWN;
    hw_cancel(sc);
    hw_start(sc);
  }
  changed(sc);
  sc->env->kick(sc->env->ud);
}

/* Next delay: x1.6 up to the max, with +-20 % jitter (gRPC's
 * connection-backoff), so that many clients do not reconnect in step. */
static uint64_t next_backoff(sluice__subchannel *sc) {
  uint64_t base = sc->backoff_ms;
  uint64_t next = base * 16 / 10;
  if (next > sc->env->backoff_max_ms)
    next = sc->env->backoff_max_ms;
  sc->backoff_ms = next;
  double jitter = 0.8 + 0.4 * ((double)rand() / RAND_MAX);
  uint64_t delay = (uint64_t)((double)base * jitter);
  return delay ? delay : 1;
}

static void conn_closed(sluice__cconn *c, void *ud, const char *reason,
                        int was_ready) {
  sluice__subchannel *sc = ud;
  sc->n_conns--;
  int current = sc->conn == c;
  if (current)
    sc->conn = NULL;
  if (sc->removed) {
    if (sc->n_conns == 0 && !sc->timer_open)
      sc_free(sc);
    return;
  }
  if (current) {
    if (!was_ready || c->ka_timed_out) {
      /* A connection that went silent (keepalive) is a failure too: back
       * off before connecting again. */
      if (c->ka_timed_out)
        snprintf(sc->last_error, sizeof sc->last_error,
                 "connection to %s lost: keepalive timeout", sc->addr.name);
      else
        snprintf(sc->last_error, sizeof sc->last_error,
                 "failed to connect to %s: %s", sc->addr.name, reason);
      sc->state = SLUICE__SC_TRANSIENT_FAILURE;
      uv_timer_start(&sc->backoff_timer, on_backoff, next_backoff(sc), 0);
      /* Addresses may have changed behind a name: look again. */
      sc->env->resolve(sc->env->ud);
    } else {
      sc->state = SLUICE__SC_IDLE; /* reconnect when calls come */
    }
  }
  changed(sc);
  sc->env->kick(sc->env->ud);
}

static void conn_goaway(sluice__cconn *c, void *ud) {
  sluice__subchannel *sc = ud;
  if (sc->hw_conn == c)
    hw_cancel(sc); /* the connection drains: let it */
  if (sc->conn == c) {
    sc->conn = NULL;
    if (sc->state == SLUICE__SC_READY)
      sc->state = SLUICE__SC_IDLE;
  }
  changed(sc);
  sc->env->kick(sc->env->ud);
}

static void conn_capacity(sluice__cconn *c, void *ud) {
  (void)c;
  sluice__subchannel *sc = ud;
  sc->env->kick(sc->env->ud);
}

static void conn_trailers(sluice__cconn *c, void *ud,
                          const sluice_metadata *md) {
  (void)c;
  sluice__subchannel *sc = ud;
  size_t len = 0;
  const char *v = sluice_metadata_find(md, "endpoint-load-metrics-bin", &len);
  sluice__orca r;
  if (!v || sluice__orca_decode((const uint8_t *)v, len, &r) != 0)
    return;
  /* The application's own utilization when given, else the server's
   * concurrency utilization (or none). */
  double util = r.application_utilization >= 0 ? r.application_utilization
                                               : r.cpu_utilization;
  sluice__lb_peer_load l = {util, r.rps_fractional, r.queue_ms, r.in_flight,
                            r.downstream};
  sluice__lb_peer_report(sc->env->lb, &sc->lb, &l, sluice_now_ns());
}

static void conn_too_many_pings(sluice__cconn *c, void *ud) {
  (void)c;
  sluice__subchannel *sc = ud;
  if (sc->env->too_many_pings)
    sc->env->too_many_pings(sc->env->ud);
}

static const sluice__cconn_hooks conn_hooks = {
    conn_ready,    conn_closed,   conn_goaway,
    conn_capacity, conn_trailers, conn_too_many_pings};

/* The name the server's certificate must carry (and the SNI): the override,
 * else the target's host name, else the destination's IP address. */
static const char *tls_name(const sluice__subchannel *sc, char *buf,
                            size_t len) {
  if (sc->env->tls_name)
    return sc->env->tls_name;
  if (sc->env->dns_host)
    return sc->env->dns_host;
  sluice__addr_print((const struct sockaddr *)&sc->addr.ss, SLUICE__ADDR_HOST,
                     buf, len);
  return buf;
}

void sluice__subchannel_connect(sluice__subchannel *sc) {
  if (sc->state != SLUICE__SC_IDLE || sc->removed)
    return;
  char name[INET6_ADDRSTRLEN + 1];
  sluice__cconn *c;
  if (sluice__cconn_new(&c, sc->env->loop, &sc->addr,
                        tls_name(sc, name, sizeof name), &sc->env->conn,
                        &conn_hooks, sc) != 0) {
    snprintf(sc->last_error, sizeof sc->last_error,
             "cannot create a connection to %s", sc->addr.name);
    sc->state = SLUICE__SC_TRANSIENT_FAILURE;
    uv_timer_start(&sc->backoff_timer, on_backoff, sc->backoff_ms, 0);
    changed(sc);
    return;
  }
  sc->n_conns++;
  sc->conn = c;
  sc->state = SLUICE__SC_CONNECTING;
  changed(sc);
}

int sluice__subchannel_can_take(const sluice__subchannel *sc) {
  return sc->state == SLUICE__SC_READY && sc->conn &&
         sluice__cconn_can_take(sc->conn);
}

int sluice__subchannel_submit(sluice__subchannel *sc, sluice__cstream *s,
                              const sluice__creq *req) {
  if (!sc->conn)
    return SLUICE_ERR_STATE;
  return sluice__cconn_submit(sc->conn, s, req);
}

/* ---- client-side health checking (gRFC A17) */

#define HEALTH_WATCH_PATH "/grpc.health.v1.Health/Watch"

int sluice__subchannel_healthy(const sluice__subchannel *sc) {
  return sc->health == SLUICE__HEALTH_OFF ||
         sc->health == SLUICE__HEALTH_SERVING ||
         sc->health == SLUICE__HEALTH_UNIMPLEMENTED;
}

int sluice__subchannel_health_refuses(const sluice__subchannel *sc) {
  return sc->state == SLUICE__SC_READY && sc->conn &&
         (sc->health == SLUICE__HEALTH_NOT_SERVING ||
          sc->health == SLUICE__HEALTH_SERVICE_UNKNOWN ||
          sc->health == SLUICE__HEALTH_FAILED);
}

const char *sluice__subchannel_health_name(sluice__health_state h) {
  switch (h) {
  case SLUICE__HEALTH_OFF:
    return "";
  case SLUICE__HEALTH_UNKNOWN:
    return "UNKNOWN";
  case SLUICE__HEALTH_SERVING:
    return "SERVING";
  case SLUICE__HEALTH_NOT_SERVING:
    return "NOT_SERVING";
  case SLUICE__HEALTH_SERVICE_UNKNOWN:
    return "SERVICE_UNKNOWN";
  case SLUICE__HEALTH_UNIMPLEMENTED:
    return "UNIMPLEMENTED";
  default:
    return "FAILED";
  }
}

static sluice__subchannel *hw_of(sluice__cstream *s) {
  return SLUICE__CONTAINER_OF(s, sluice__subchannel, hw_cs);
}

/* One HealthCheckResponse (the receiver's deliver function). */
static int hw_deliver(void *ud, int compressed, const uint8_t *data,
                      size_t len) {
  sluice__subchannel *sc = ud;
  uint8_t *plain = NULL;
  if (compressed) {
    size_t n;
    if (!sc->hw_cs.rx.enc_ok ||
        sluice__decompress(sc->hw_cs.rx.enc, data, len, 4096, &plain, &n,
                           NULL) != SLUICE_STATUS_OK)
      return 1;
    data = plain;
    len = n;
  }
  uint32_t st;
  int bad = sluice__health_response(data, len, &st) != 0;
  free(plain);
  if (bad)
    return 1;
  sc->health = st == 1   ? SLUICE__HEALTH_SERVING
               : st == 3 ? SLUICE__HEALTH_SERVICE_UNKNOWN
                         : SLUICE__HEALTH_NOT_SERVING;
  sc->hw_backoff_ms = sc->env->backoff_initial_ms; /* it answers */
  changed(sc);
  sc->env->kick(sc->env->ud);
  return 0;
}

static void hw_headers(sluice__cstream *s, int trailers, sluice_metadata *md) {
  (void)s;
  (void)trailers;
  sluice_metadata_del(md);
}

static void hw_data_failed(sluice__cstream *s, sluice_status_code code,
                           const char *reason) {
  (void)code;
  (void)reason;
  sluice__stream_reset(&s->st, NGHTTP2_CANCEL); /* hw_closed: FAILED */
}

static void on_hw_retry(uv_timer_t *t) {
  sluice__subchannel *sc = t->data;
  if (!sc->removed && sc->state == SLUICE__SC_READY && sc->conn && !sc->hw_open)
    hw_start(sc);
}

static void hw_closed(sluice__cstream *s, uint32_t h2_error,
                      sluice_status_code lost_code, const char *lost_text) {
  (void)lost_text;
  sluice__subchannel *sc = hw_of(s);
  int cancelled = sc->hw_cancelled;
  sluice__cconn *on = sc->hw_conn;
  sluice_status_code code = s->rx.have_grpc_status ? s->rx.grpc_status
                            : h2_error             ? SLUICE_STATUS_UNAVAILABLE
                                                   : SLUICE_STATUS_UNKNOWN;
  sc->hw_open = 0;
  sc->hw_cancelled = 0;
  sc->hw_conn = NULL;
  sluice__cstream_clear(s);
  sluice__sendq_destroy(&sc->hw_q);
  /* Ours (GOAWAY, removal, a new connection) or the connection's end: the
   * next connection starts its own. */
  if (cancelled || lost_code != SLUICE_STATUS_OK || sc->removed ||
      on != sc->conn) {
    /* A newer connection got ready while this one was closing: its Watch
     * could not start before this stream's storage was free. */
    if (!sc->removed && sc->conn && sc->conn != on &&
        sc->state == SLUICE__SC_READY)
      hw_start(sc);
    return;
  }
  if (code == SLUICE_STATUS_UNIMPLEMENTED) {
    /* No health service there: healthy, and not asked again (A17). The
     * library does not log; the state is in the stats. */
    sc->health = SLUICE__HEALTH_UNIMPLEMENTED;
    sc->hw_unimplemented++;
  } else {
    sc->health = SLUICE__HEALTH_FAILED;
    uint64_t d = sc->hw_backoff_ms;
    uint64_t next = d * 16 / 10;
    sc->hw_backoff_ms =
        next > sc->env->backoff_max_ms ? sc->env->backoff_max_ms : next;
    double jitter = 0.8 + 0.4 * ((double)rand() / RAND_MAX);
    d = (uint64_t)((double)d * jitter);
    uv_timer_start(&sc->backoff_timer, on_hw_retry, d ? d : 1, 0);
  }
  changed(sc);
  sc->env->kick(sc->env->ud);
}

static const sluice__cstream_ops hw_ops = {hw_headers, hw_data_failed,
                                           hw_closed};

/* Opens the Watch on the current connection; a failure to open is a failed
 * Watch (retried with back-off). */
static void hw_start(sluice__subchannel *sc) {
  if (!sc->env->health_service || sc->hw_open || !sc->conn || sc->removed)
    return;
  uint8_t *buf;
  size_t len;
  int deferred;
  if (sluice__sendq_init(&sc->hw_q, 0) != 0)
    goto failed;
  if (sluice__health_request(sc->env->health_service, &buf, &len) != 0) {
    sluice__sendq_destroy(&sc->hw_q);
    goto failed;
  }
  if (sluice__sendq_push(&sc->hw_q, buf, len, 1, &deferred) != 0) {
    free(buf);
    sluice__sendq_destroy(&sc->hw_q);
    goto failed;
  }
  sluice__sendq_close(&sc->hw_q, &deferred);
  sluice__cstream_init(&sc->hw_cs, &sc->hw_q, 4096, hw_deliver, sc, &hw_ops,
                       NULL);
  sluice__creq req = {HEALTH_WATCH_PATH, 0, SLUICE_COMPRESS_NONE, NULL, 0};
  if (sluice__cconn_submit(sc->conn, &sc->hw_cs, &req) != 0) {
    sluice__cstream_clear(&sc->hw_cs);
    sluice__sendq_destroy(&sc->hw_q);
    goto failed;
  }
  sc->hw_open = 1;
  sc->hw_cancelled = 0;
  sc->hw_conn = sc->conn;
  return;
failed:
  sc->health = SLUICE__HEALTH_FAILED;
  uv_timer_start(&sc->backoff_timer, on_hw_retry, sc->hw_backoff_ms, 0);
  changed(sc);
}

/* Resets the Watch stream, if open; its close (later) does not retry. */
static void hw_cancel(sluice__subchannel *sc) {
  if (!sc->hw_open || sc->hw_cancelled)
    return;
  sc->hw_cancelled = 1;
  sluice__stream_reset(&sc->hw_cs.st, NGHTTP2_CANCEL);
}

const char *sluice__subchannel_state_name(sluice__sc_state s) {
  switch (s) {
  case SLUICE__SC_IDLE:
    return "IDLE";
  case SLUICE__SC_CONNECTING:
    return "CONNECTING";
  case SLUICE__SC_READY:
    return "READY";
  default:
    return "TRANSIENT_FAILURE";
  }
}
