/* A subchannel: one resolved address of a channel, its current HTTP/2
 * connection (plus older ones still draining), its connectivity state
 * (IDLE -> CONNECTING -> READY, or TRANSIENT_FAILURE with back-off) and the
 * balancer's view of it.
 *
 * Below the picker and above the connection (client_h2.h): it opens
 * streams on its connection and hears from the connection through hooks.
 * Upward it says only "something changed, dispatch again" through the
 * env's kick callback, which the channel defers to the next loop turn's
 * prepare phase (never a synchronous re-entry), and keeps the channel's
 * census of it (env's census: data, no call). Loop thread only.
 */
#ifndef SLUICE_CLIENT_SUBCHANNEL_H
#define SLUICE_CLIENT_SUBCHANNEL_H

#include <stdint.h>

#include "client/client_h2.h"
#include "core/list.h"
#include "lb/lb.h"

typedef enum {
  SLUICE__SC_IDLE,
  SLUICE__SC_CONNECTING,
  SLUICE__SC_READY,
  SLUICE__SC_TRANSIENT_FAILURE
} sluice__sc_state;

/* What client-side health checking (gRFC A17) knows of a destination. */
typedef enum {
  SLUICE__HEALTH_OFF,             /* no health checking */
  SLUICE__HEALTH_UNKNOWN,         /* Watch sent, no answer yet */
  SLUICE__HEALTH_SERVING,         /* reports SERVING */
  SLUICE__HEALTH_NOT_SERVING,     /* reports NOT_SERVING (or UNKNOWN) */
  SLUICE__HEALTH_SERVICE_UNKNOWN, /* reports SERVICE_UNKNOWN */
  SLUICE__HEALTH_UNIMPLEMENTED,   /* no health service: used as healthy */
  SLUICE__HEALTH_FAILED           /* the Watch failed; retried with back-off */
} sluice__health_state;

/* What the channel knows of its subchannels without looking at each
 * (owned by the channel, kept up to date by the subchannels): a dispatch
 * pass costs the same with 3 destinations or 10,000.
 *
 * n and refusing change at the event that changes a subchannel (as a scan
 * would see them at any moment); the channel's connectivity state and its
 * fail-fast test read them. changed lists the subchannels whose state,
 * connection or health changed since the channel's last dispatch pass with
 * calls to send: that pass connects the IDLE ones and refreshes their
 * usable flag (sluice__picker_refresh), where it used to visit every
 * subchannel. Removed subchannels are in neither. */
typedef struct sluice__sc_census {
  size_t n[4];          /* by sluice__sc_state */
  size_t refusing;      /* READY, connected, but the health check says no
                           (sluice__subchannel_health_refuses) */
  sluice__list changed; /* sluice__subchannel.changed_link */
} sluice__sc_census;

/* What every subchannel of a channel shares (owned by the channel, which
 * outlives them). */
typedef struct sluice__subchannel_env {
  sluice__loop *loop;
  sluice__cconn_cfg conn; /* for the connections */
  const char *tls_name;   /* override of the certificate's name, or NULL */
  const char *dns_host;   /* the target's host name (DNS targets), or NULL */
  uint32_t backoff_initial_ms, backoff_max_ms;
  /* The service each connection watches (grpc.health.v1.Health/Watch), or
   * NULL: no health checking. */
  const char *health_service;
  sluice__lb *lb;
  sluice__sc_census *census;
  /* Something changed (a connection is ready, failed, drained; a stream
   * ended): dispatch again. Must not dispatch synchronously. */
  void (*kick)(void *ud);
  /* Addresses may have changed behind a name: resolve again. */
  void (*resolve)(void *ud);
  /* A removed subchannel has been freed. */
  void (*gone)(void *ud);
  /* A server said too_many_pings: slow keepalive down (may be NULL). */
  void (*too_many_pings)(void *ud);
  void *ud;
} sluice__subchannel_env;

typedef struct sluice__subchannel {
  const sluice__subchannel_env *env;
  sluice__addr addr;
  sluice__sc_state state;
  sluice__cconn *conn; /* the connection new streams go to, or NULL */
  uv_timer_t backoff_timer;
  int timer_open;
  uint64_t backoff_ms; /* next back-off delay */
  char last_error[256];
  int removed;        /* dropped by re-resolution; freed when it has no conns */
  int n_conns;        /* live connections (current + draining) */
  sluice__lb_dest lb; /* the balancer's view and stats */
  int ever_ready;     /* connected before (a reconnect resets lb) */
  /* The census (env->census): the list of changed subchannels, and what
   * it counts for this one now. */
  sluice__list changed_link;
  sluice__sc_state counted_state;
  int counted_refusing;
  /* Health checking: one Watch stream on the current connection. The
   * back-off timer above re-opens it (it is idle while READY). */
  sluice__health_state health;
  int hw_open;      /* the Watch stream is on a connection */
  int hw_cancelled; /* reset by us: do not retry */
  sluice__cconn *hw_conn;
  sluice__cstream hw_cs;
  sluice__sendq hw_q;
  uint64_t hw_backoff_ms;
  uint64_t hw_unimplemented; /* Watches answered UNIMPLEMENTED */
} sluice__subchannel;

int sluice__subchannel_new(sluice__subchannel **out,
                           const sluice__subchannel_env *env,
                           const sluice__addr *addr);
/* Starts connecting when IDLE. */
void sluice__subchannel_connect(sluice__subchannel *sc);
/* Drops the subchannel: its connection drains (open streams finish there)
 * or, with cancel_text, its streams end at once with CANCELLED and the
 * text; freed (env->gone) when its last connection is gone. */
void sluice__subchannel_remove(sluice__subchannel *sc, const char *cancel_text);
/* Non-zero when it can open one more stream now. */
int sluice__subchannel_can_take(const sluice__subchannel *sc);
/* Opens s on the current connection (can_take said yes). */
int sluice__subchannel_submit(sluice__subchannel *sc, sluice__cstream *s,
                              const sluice__creq *req);
/* Non-zero when health checking lets the destination be picked (checking
 * off, SERVING, or no health service). */
int sluice__subchannel_healthy(const sluice__subchannel *sc);
/* Non-zero when it is connected but its health check says no (not
 * serving, unknown service, failed Watch): no hope of a pick soon. */
int sluice__subchannel_health_refuses(const sluice__subchannel *sc);
/* The name of the health state, for stats ("" when checking is off). */
const char *sluice__subchannel_health_name(sluice__health_state h);
/* The name of the state, for stats. */
const char *sluice__subchannel_state_name(sluice__sc_state s);

#endif
