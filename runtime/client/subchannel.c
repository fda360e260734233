/* Subchannels: one address, its connections and its connectivity state. */
#include "client/subchannel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/orca.h"

static void on_backoff(uv_timer_t *t) {
  sluice__subchannel *sc = t->data;
  if (sc->state == SLUICE__SC_TRANSIENT_FAILURE)
    sc->state = SLUICE__SC_IDLE;
  sc->env->kick(sc->env->ud);
}

int sluice__subchannel_new(sluice__subchannel **out,
                           const sluice__subchannel_env *env,
                           const sluice__addr *addr) {
  sluice__subchannel *sc = calloc(1, sizeof *sc);
  if (!sc)
    return SLUICE_ERR_NOMEM;
  sc->env = env;
  sc->addr = *addr;
  sc->state = SLUICE__SC_IDLE;
  sc->backoff_ms = env->backoff_initial_ms;
  uv_timer_init(sluice__loop_uv(env->loop), &sc->backoff_timer);
  sc->backoff_timer.data = sc;
  sc->timer_open = 1;
  sluice__lb_dest_init(env->lb, &sc->lb, sluice_now_ns());
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
  sc->removed = 1;
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
    sluice__lb_stats keep = sc->lb.stats;
    sluice__lb_dest_init(sc->env->lb, &sc->lb, sluice_now_ns());
    sc->lb.stats = keep;
  }
  sc->ever_ready = 1;
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
  sc->env->kick(sc->env->ud);
}

static void conn_goaway(sluice__cconn *c, void *ud) {
  sluice__subchannel *sc = ud;
  if (sc->conn == c) {
    sc->conn = NULL;
    if (sc->state == SLUICE__SC_READY)
      sc->state = SLUICE__SC_IDLE;
  }
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
    return;
  }
  sc->n_conns++;
  sc->conn = c;
  sc->state = SLUICE__SC_CONNECTING;
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
