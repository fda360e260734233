/* Server HTTP/2 connections: an nghttp2 server session on a transport
 * connection, whose streams become calls (server_call.h). The connection
 * owns the list of its calls (their sluice__sstream parts) and validates
 * and routes each request; its struct is private to server_conn.c.
 * Loop thread only, except where said. */
#ifndef SLUICE_SERVER_CONN_H
#define SLUICE_SERVER_CONN_H

#include <uv.h>

#include "core/list.h"
#include "core/loop.h"
#include "core/wave.h"
#include "server/route.h"
#include "server/server_call.h"
#include "server/server_opts.h"

#define SLUICE__SCONN_EVENTS 10 /* sluice_server_conn_event values */

/* What the connections of one server share. */
typedef struct sluice__sconn_shared {
  const sluice_server_opts *opts;
  sluice__routes *routes;
  uv_mutex_t mu;
  uv_cond_t cv;  /* broadcast when a connection is gone */
  unsigned live; /* under mu: connections open on every loop */
  /* atomic: accepted and not yet closed, those on their way to a loop
   * included (the listener's max_connections check) */
  unsigned open;
  /* sluice_server_conn_events(), by sluice_server_conn_event; atomic */
  uint64_t events[SLUICE__SCONN_EVENTS];
} sluice__sconn_shared;

/* What the connections of one loop share. */
typedef struct sluice__sconn_loop {
  sluice__sconn_shared *shared;
  sluice__scall_loop calls; /* their calls' */
  sluice__list conns;       /* the loop's connections */
  sluice__wave conns_wave;  /* how many, for trimming (core/wave.h) */
} sluice__sconn_loop;

/* A loop whose connections fell to half of a peak of at least this many
 * (and then to each further half, and to none) gives its cached memory and
 * malloc's free pages back to the system (sluice__scall_loop_trim). */
#define SLUICE__SCONN_TRIM_PEAK 128

void sluice__sconn_shared_init(sluice__sconn_shared *sh,
                               const sluice_server_opts *opts,
                               sluice__routes *routes);
void sluice__sconn_shared_destroy(sluice__sconn_shared *sh);
/* Any thread: waits until every connection is gone or uv_hrtime() reaches
 * end_ns. */
void sluice__sconn_wait_gone(sluice__sconn_shared *sh, uint64_t end_ns);

/* A loop's connections; cl->calls is set up by the caller
 * (sluice__scall_loop_init). */
void sluice__sconn_loop_init(sluice__sconn_loop *cl, sluice__sconn_shared *sh);

static inline sluice__loop *sluice__sconn_loop_loop(sluice__sconn_loop *cl) {
  return cl->calls.loop;
}

/* Takes an accepted socket (closed by the caller when this fails; from
 * then on the connection's) and starts HTTP/2 on it. Returns 0 or
 * SLUICE_ERR_NOMEM. */
int sluice__sconn_accept(sluice__sconn_loop *cl, uv_os_sock_t fd, int is_pipe);
/* Every connection of the loop: the two-step graceful GOAWAY (a shutdown
 * notice and a PING, the final GOAWAY on its ACK or after min(20 s,
 * grace_ms)), and close once its calls are done. The caller closes what is
 * left when the grace ends (sluice__sconn_loop_close). */
void sluice__sconn_loop_goaway(sluice__sconn_loop *cl, uint64_t grace_ms);
/* Any thread: the count of one sluice_server_conn_event (0 if unknown). */
uint64_t sluice__sconn_events(const sluice__sconn_shared *sh, unsigned ev);
/* Every connection of the loop: close now (after a last flush). */
void sluice__sconn_loop_close(sluice__sconn_loop *cl, const char *reason);

#endif
