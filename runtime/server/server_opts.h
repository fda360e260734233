/* Server options: the opaque sluice_server_opts behind the public setters
 * (server_opts.c), and the server's own deep copy of them. A leaf of the
 * server layer: every other server file may read the options, none of them
 * is seen from here. */
#ifndef SLUICE_SERVER_OPTS_H
#define SLUICE_SERVER_OPTS_H

#include <stddef.h>
#include <stdint.h>

#include "sluice/server.h"

/* sluice_server_opts_set_method_max_concurrent_calls */
typedef struct sluice__method_limit {
  char *path;
  uint32_t limit;
} sluice__method_limit;

struct sluice_server_opts {
  unsigned threads;
  uint32_t max_request_size;
  uint32_t max_response_size;
  uint32_t max_concurrent_streams;
  uint32_t send_buffer;
  /* admission (admit.c) */
  uint32_t max_calls; /* server-wide concurrent calls; 0: no limit */
  sluice__method_limit *method_limits; /* owned */
  size_t n_method_limits;
  uint32_t max_queue;       /* waiting calls, server-wide */
  uint32_t codel_target_ms; /* 0: CoDel off */
  uint32_t codel_interval_ms;
  int load_report; /* endpoint-load-metrics-bin in the trailers */
  uint32_t load_report_interval_ms; /* per connection; 0: every response */
  struct ssl_ctx_st *tls;           /* NULL: plaintext; a reference */
  /* connection lifetime and keepalive (server_conn.c); ms, 0: off */
  uint64_t max_idle_ms;
  uint64_t max_age_ms; /* before the +-10 % jitter */
  uint64_t max_age_grace_ms;
  uint64_t keepalive_time_ms;
  uint64_t keepalive_timeout_ms;
  uint64_t ping_min_time_ms; /* enforcement: least time between PINGs */
  int ping_without_calls;    /* enforcement: PINGs allowed with no call */
  uint32_t max_ping_strikes; /* enforcement: 0: unlimited */
  /* abuse limits (listener.c, server_conn.c) */
  uint32_t max_connections;      /* 0: no limit */
  uint64_t handshake_timeout_ms; /* TLS + HTTP/2 preface; 0: none */
  uint32_t max_header_list_size; /* received request headers, bytes */
  int health;        /* grpc.health.v1.Health served (health.c); default 0 */
  int health_bypass; /* health calls skip admission; default 1 */
  int reflection;    /* server reflection served (reflection.c); default 0 */
  char last_error[256];
};

/* Makes dst a deep copy of src: the method limits are duplicated and a
 * reference to the TLS context is taken. Returns 0, or SLUICE_ERR_NOMEM
 * with nothing to free in dst. */
int sluice__server_opts_copy(sluice_server_opts *dst,
                             const sluice_server_opts *src);

/* Frees what a copy owns (the method limits, the TLS reference); dst
 * itself is the caller's. */
void sluice__server_opts_clear(sluice_server_opts *o);

#endif
