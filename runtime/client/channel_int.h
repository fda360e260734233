/* Internal structure of a channel: its options, target and resolution, its
 * subchannels and its picker. The channel is the top of the client's
 * internal stack below the call (call -> channel -> picker -> subchannel ->
 * connection -> stream); everything here lives on the channel's loop
 * thread unless a comment says otherwise.
 */
#ifndef SLUICE_CLIENT_CHANNEL_INT_H
#define SLUICE_CLIENT_CHANNEL_INT_H

#include <stdint.h>

#include "client/picker.h"
#include "client/retry.h"
#include "client/service_config.h"
#include "client/subchannel.h"
#include "core/loop.h"
#include "core/objcache.h"
#include "sluice/channel.h"
#include "transport/addr.h"

struct sluice_channel_opts {
  uv_loop_t *loop;
  uint32_t max_response_size;
  uint32_t max_request_size;
  char *authority;
  uint32_t resolve_interval_ms;
  uint32_t backoff_initial_ms, backoff_max_ms;
  uint32_t connect_timeout_ms;
  struct ssl_ctx_st *tls;   /* NULL: plaintext; a reference */
  char *tls_name;           /* server_name_override, or NULL */
  const sluice__lb_ops *lb; /* strategy (default btc) */
  uint32_t wait_max_len;    /* bounded wait queue; 0 = drop at once */
  uint32_t wait_max_ms;
  /* resilience (sluice/resilience.h) */
  sluice__svc_config svc;    /* method configs, throttling, health */
  uint32_t max_attempts_cap; /* default 5 */
  uint32_t retry_buffer;     /* per call, default 256 KiB */
  int retries_enabled;       /* default 1 */
  double budget_percent;     /* default 20 */
  uint32_t budget_min_conc;  /* default 3 */
  uint32_t cb_max_requests, cb_max_pending, cb_max_retries; /* 0: off */
  /* sluice_channel_opts_set_health_check (owned); NULL: the service
   * config's healthCheckConfig decides */
  char *health_check;
  /* keepalive (gRFC A8): time 0 = off */
  uint32_t keepalive_time_ms, keepalive_timeout_ms;
  int keepalive_permit_without_calls;
  uint32_t max_header_list_size; /* default 16 KiB */
  char last_error[256];
};

/* Deep copy of src into dst (strings duplicated, the TLS context
 * referenced). Returns 0 or SLUICE_ERR_NOMEM (dst then holds nothing). */
int sluice__channel_opts_copy(struct sluice_channel_opts *dst,
                              const struct sluice_channel_opts *src);
/* Frees what a copy holds (not the struct). Idempotent. */
void sluice__channel_opts_clear(struct sluice_channel_opts *o);

/* A call in no picker queue and on no connection (waiting out a retry's
 * backoff, or ended OK while paused, its held messages not yet taken):
 * cancel ends it when the channel is destroyed. */
typedef struct sluice__parked {
  sluice__list link;
  void (*cancel)(struct sluice__parked *p);
} sluice__parked;

/* The channel's share of retries, hedging and circuit breakers (loop
 * thread): the throttle, what the budget and the breakers count, and the
 * counters of sluice_channel_get_resilience_stats. */
typedef struct sluice__resil {
  sluice__throttle throttle;
  uint64_t active;      /* calls started on the loop and not completed */
  uint64_t in_retry;    /* of them, calls that retried or wait to */
  uint64_t hedges_open; /* hedged attempts picking or on a stream */
  uint64_t breaker_requests, breaker_pending;
  sluice_retry_counters total;
  sluice_retry_counters per_path[SLUICE__LB_MAX_PATHS]; /* picker path ids */
  uint64_t rng;        /* xorshift64 state for the backoff jitter */
  sluice__list parked; /* sluice__parked: calls in backoff or held */
} sluice__resil;

struct sluice_channel {
  sluice__loop *loop;
  struct sluice_channel_opts opts; /* a deep copy */
  sluice__target target;
  char *authority;
  char user_agent[64];
  sluice__subchannel_env env; /* what the subchannels share */
  sluice__subchannel **scs;
  size_t n_scs, cap_scs; /* cap_scs: scs's room (grows by doubling) */
  /* The subchannels counted by state, and the ones that changed since the
   * last dispatch pass with calls (kept by the subchannels through
   * env.census): a pass never visits all of them. */
  sluice__sc_census census;
  sluice__picker picker;
  sluice__resil res;
  /* freed call objects, reused by calls started on the loop thread (a
   * closed loop, a handler forwarding); loop thread only */
  sluice__objcache call_cache;
  sluice__task dispatch_task; /* the posted dispatch (sluice__channel_kick) */
  uv_getaddrinfo_t gai;
  int resolving;
  int resolved_once;
  char resolve_error[160];
  uv_timer_t resolve_timer;
  int resolve_timer_open;
  int picker_closing; /* the picker's wait timer is closing */
  int closing;
  uint64_t live_calls; /* started and not yet freed; atomic */
  size_t live_scs;     /* created and not yet freed */
  int owned_loop;
  /* connectivity state (sluice_channel_get_state): the aggregate over the
   * subchannels, published after every dispatch; atomic for readers */
  int state;
  sluice__list watchers;     /* sluice__state_watch, loop thread */
  sluice__task connect_task; /* get_state(try_to_connect) */
  int connect_posted;        /* atomic */
  int want_connect;          /* loop thread: connect though nothing waits */
  uint64_t too_many_pings;   /* GOAWAYs too_many_pings received; atomic */
};

/* Dispatch again, once, before the loop next polls (a task posted on the
 * loop thread: never a synchronous re-entry, whoever asks). Loop thread. */
void sluice__channel_kick(sluice_channel *ch);
/* Queues the attempt's pick for dispatch (and kicks). */
void sluice__channel_enqueue(sluice_channel *ch, sluice__pick *pk);
/* A call object was freed: the channel may go once it is closing. */
void sluice__channel_call_gone(sluice_channel *ch);

#endif
