/* sluice: client channels and unary calls.
 *
 * Threads: a channel runs on one libuv loop, either its own (the library
 * starts a thread for it) or one the user hands in with
 * sluice_channel_opts_set_loop(). Calls may be started from any thread;
 * completion callbacks always run on the channel's loop thread. Blocking calls
 * wait on the caller's thread and refuse (SLUICE_ERR_ON_LOOP_THREAD) to run on
 * the loop thread, where they would deadlock.
 */
#ifndef SLUICE_CHANNEL_H
#define SLUICE_CHANNEL_H

#include "sluice/export.h"

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "sluice/clock.h"
#include "sluice/metadata.h"
#include "sluice/method.h"
#include "sluice/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sluice_channel sluice_channel;
typedef struct sluice_channel_opts sluice_channel_opts;
struct uv_loop_s;

/* ---- channel options (opaque, so that new settings never break the ABI) */

/* Creates options with defaults in *out; the caller frees them with
 * sluice_channel_opts_del(). Returns 0, SLUICE_ERR_INVALID_ARG or
 * SLUICE_ERR_NOMEM. */
SLUICE_API int sluice_channel_opts_new(sluice_channel_opts **out);
/* Frees options. NULL is ignored. */
SLUICE_API void sluice_channel_opts_del(sluice_channel_opts *o);
/* Runs the channel on the caller's loop (borrowed; it must outlive the
 * channel and be run by the caller). No thread is started then, and calls
 * should be started on that loop's thread for zero hand-off. */
SLUICE_API int sluice_channel_opts_set_loop(sluice_channel_opts *o,
                                            struct uv_loop_s *loop);
/* Largest response message accepted (bytes, after decoding). Default 4 MiB,
 * as gRPC. Larger responses fail the call with RESOURCE_EXHAUSTED. */
SLUICE_API int sluice_channel_opts_set_max_response_size(sluice_channel_opts *o,
                                                         uint32_t bytes);
/* Largest request message sent. Default unlimited (UINT32_MAX). */
SLUICE_API int sluice_channel_opts_set_max_request_size(sluice_channel_opts *o,
                                                        uint32_t bytes);
/* :authority sent with every call; default: the target's host:port. The
 * string is copied. */
SLUICE_API int sluice_channel_opts_set_authority(sluice_channel_opts *o,
                                                 const char *authority);
/* How often a dns: target is resolved again (default 30000 ms). */
SLUICE_API int
sluice_channel_opts_set_resolve_interval_ms(sluice_channel_opts *o,
                                            uint32_t ms);
/* Reconnect back-off, as gRPC's connection-backoff: initial delay (default
 * 1000 ms), growing 1.6x with +-20 % jitter up to max (default 120000 ms). */
SLUICE_API int sluice_channel_opts_set_backoff_ms(sluice_channel_opts *o,
                                                  uint32_t initial_ms,
                                                  uint32_t max_ms);
/* Time allowed for one TCP connect (default 20000 ms). */
SLUICE_API int
sluice_channel_opts_set_connect_timeout_ms(sluice_channel_opts *o, uint32_t ms);

/* Load balancing and back-pressure strategy for calls on channels made with
 * o (see docs/flow-control.md): "rr" (round robin, no limits), "lcc" (least
 * in-flight calls, adaptive limit), "bcc" (bounded concurrency with usage
 * thresholds), "btc" (bounded throughput and concurrency; the default).
 * Returns 0 or SLUICE_ERR_INVALID_ARG (unknown name). */
SLUICE_API int sluice_channel_opts_set_lb(sluice_channel_opts *o,
                                          const char *name);
/* A bounded wait queue for calls that no destination may take now (all at
 * their limits): at most max_len calls wait, each at most max_wait_ms, for
 * a destination to admit them; beyond that they are dropped locally with
 * RESOURCE_EXHAUSTED. Default max_len 0: drop at once, without any I/O. */
SLUICE_API int sluice_channel_opts_set_wait_queue(sluice_channel_opts *o,
                                                  uint32_t max_len,
                                                  uint32_t max_wait_ms);

/* ---- channel */

/* Creates a channel to target in *out. Nothing connects until the first
 * call. Targets:
 *   host:port              resolved like dns:host:port
 *   dns:host:port          every resolved address is a destination; resolved
 *                          again periodically and after a connection failure
 *   ipv4:a.b.c.d:port[,a.b.c.d:port...]   fixed destinations
 *   ipv6:[addr]:port[,...]
 *   unix:/path             a Unix domain socket
 * opts may be NULL (defaults); it is read during the call and not kept.
 * Returns 0, SLUICE_ERR_INVALID_ARG, SLUICE_ERR_BAD_TARGET, SLUICE_ERR_NOMEM
 * or SLUICE_ERR_SYSTEM; *out is untouched on failure. */
SLUICE_API int sluice_channel_new(sluice_channel **out, const char *target,
                                  const sluice_channel_opts *opts);

/* Destroys the channel. Calls still in flight complete with CANCELLED
 * ("channel destroyed") before this returns (on a channel with its own loop)
 * or on the next turns of the user's loop (a channel on a user loop: keep
 * running that loop until uv_run returns). Must not be called from inside one
 * of the channel's own callbacks. NULL is ignored. */
SLUICE_API void sluice_channel_del(sluice_channel *ch);

/* ---- per-call options: a plain struct, filled by sluice_call_opts_init() */

/* Message compression (grpc-encoding). Both sides always accept identity
 * and gzip; these choose what a sender uses. */
typedef enum sluice_compression {
  SLUICE_COMPRESS_NONE = 0,
  SLUICE_COMPRESS_GZIP = 1
} sluice_compression;

typedef struct sluice_call_opts {
  /* The size of this struct as the caller's program was compiled, set by
   * sluice_call_opts_init(); leave it alone. It lets a newer library append
   * fields without breaking programs built against older headers (the
   * library reads only the first struct_size bytes, docs/abi.md). 0 (a
   * struct zeroed by hand) is read as ABI 0's layout. */
  size_t struct_size;
  /* Relative timeout in ms; 0 = none (then the method's default applies). */
  uint64_t timeout_ms;
  /* Absolute deadline on sluice_now_ns()'s clock; 0 = none. When both are
   * set the earlier one wins. */
  uint64_t deadline_ns;
  /* Custom metadata to send (borrowed; copied before the call returns). */
  const sluice_metadata *metadata;
  /* 0 = channel/method default. The smaller of method default and this wins
   * for max_response_size, as gRPC does. */
  uint32_t max_response_size;
  uint32_t max_request_size;
  /* Compress the messages this call sends (default none); a message can opt
   * out with SLUICE_SEND_NO_COMPRESS (sluice/call.h). */
  sluice_compression compression;
  /* Bound of the send queue of a streaming call in bytes; 0 = default
   * (SLUICE_DEFAULT_SEND_BUFFER, sluice/call.h). */
  uint32_t send_buffer;
} sluice_call_opts;

/* Fills the first struct_size bytes of o with "no options" and records
 * struct_size in it. Programs call sluice_call_opts_init(), which passes the
 * size the program was compiled with; this form is for bindings that cannot
 * use an inline function. NULL is ignored. */
SLUICE_API void sluice_call_opts_init_sized(sluice_call_opts *o,
                                            size_t struct_size);

/* Fills o with "no options" (every field 0) and records the struct's size
 * as this program was compiled (see struct_size). NULL is ignored. */
static inline void sluice_call_opts_init(sluice_call_opts *o) {
  sluice_call_opts_init_sized(o, sizeof(sluice_call_opts));
}

struct sluice_server_call;
/* Deadline propagation: the outgoing call gets (at most) the remaining
 * deadline of parent, the server call whose handler is making it; nothing
 * changes when parent has no deadline. NULL arguments are ignored. */
SLUICE_API void
sluice_call_opts_set_parent(sluice_call_opts *o,
                            const struct sluice_server_call *parent);

/* Completion of a unary call. Runs exactly once, on the channel's loop
 * thread. st is borrowed until the callback returns. resp is the decoded
 * response when st->code is OK, else NULL; it is owned by the library and
 * freed after the callback returns (copy what you keep). */
typedef void (*sluice_unary_cb)(const sluice_status *st,
                                const ProtobufCMessage *resp, void *user_data);

/* Starts a unary call of method with request req. req is serialized before
 * this returns (the caller keeps ownership). opts may be NULL. cb fires
 * exactly once — with an error status when the call cannot even start (an
 * expired deadline, an oversized request ...), never synchronously from
 * inside this function.
 * Returns 0 when cb will fire; SLUICE_ERR_INVALID_ARG (ch, method, req or cb
 * NULL, or req not of the method's request type) or SLUICE_ERR_NOMEM when it
 * will not. Thread-safe. */
SLUICE_API int sluice_unary_call(sluice_channel *ch,
                                 const sluice_method_desc *method,
                                 const ProtobufCMessage *req,
                                 const sluice_call_opts *opts,
                                 sluice_unary_cb cb, void *user_data);

/* For generated typed stubs: a generic function pointer and a trampoline
 * that casts it back to the stub's typed callback and calls it, so no
 * function is ever called through a pointer of the wrong type. */
typedef void (*sluice_generic_fn)(void);
typedef void (*sluice_unary_tramp)(const sluice_status *st,
                                   const ProtobufCMessage *resp,
                                   sluice_generic_fn cb, void *user_data);

/* As sluice_unary_call, but completion calls tramp(st, resp, cb, user_data).
 * Used by generated code; same ownership, threading and return values. */
SLUICE_API int sluice_unary_call_tramp(sluice_channel *ch,
                                       const sluice_method_desc *method,
                                       const ProtobufCMessage *req,
                                       const sluice_call_opts *opts,
                                       sluice_unary_tramp tramp,
                                       sluice_generic_fn cb, void *user_data);

/* Blocking unary call. On return *status holds the outcome (owned by the
 * caller: sluice_status_clear() it; status may be NULL if not wanted) and,
 * when the code is OK, *resp the response, owned by the caller, freed with
 * protobuf_c_message_free_unpacked(*resp, NULL). Returns the status code;
 * API misuse (NULL pointers, call on the loop thread) yields
 * INVALID_ARGUMENT/FAILED_PRECONDITION statuses generated locally. */
SLUICE_API sluice_status_code
sluice_unary_call_blocking(sluice_channel *ch, const sluice_method_desc *method,
                           const ProtobufCMessage *req, ProtobufCMessage **resp,
                           const sluice_call_opts *opts, sluice_status *status);

/* ---- statistics (see docs/flow-control.md) */

/* One destination. */
typedef struct sluice_dest_stats {
  char address[112];      /* "127.0.0.1:50051" */
  const char *conn_state; /* "IDLE", "CONNECTING", "READY",
                             "TRANSIENT_FAILURE" (static) */
  const char *lb_state;   /* the strategy's state ("normal", "T-low/C-mid"
                             ...; static) */
  uint32_t in_flight;
  double limit;          /* admission limit (0 = none) */
  double adaptive_limit; /* the measured (gradient) concurrency limit */
  double rate;           /* completions per second */
  double rate_bytes;     /* bytes per second (requests + responses) */
  double latency_min_us, latency_ewma_us;
  double peer_utilization; /* the server's last load report; < 0 none */
  uint64_t sent, ok, failed;
  uint64_t p50_us, p99_us, p999_us; /* completed calls' latency */
  double algo_ns;                   /* mean time of the pick decision */
  double strategy_us; /* mean time from the decision until the request
                         was handed to HTTP/2 */
  /* Outlier ejection (docs/flow-control.md): a destination whose calls keep
   * failing with UNAVAILABLE, INTERNAL, UNKNOWN, UNIMPLEMENTED or DATA_LOSS
   * is left out of the balancing for a while. */
  uint64_t ejections;    /* times ejected so far */
  int ejected;           /* ejected now */
  double ejected_for_ms; /* time left of the current ejection (0: none) */
} sluice_dest_stats;

/* A channel. */
typedef struct sluice_channel_stats {
  const char *lb;               /* strategy name (static) */
  uint64_t dropped_unavailable; /* nothing connected */
  uint64_t dropped_limit;       /* every destination at its limit */
  uint64_t dropped_path_limit;  /* ... at its limit for the call's path */
  uint64_t dropped_deadline;    /* could not be answered in time */
  uint64_t dropped_wait;        /* wait queue full, or waited too long */
  uint64_t waiting;             /* in the wait queue now */
  size_t n_dests;
  sluice_dest_stats *dests; /* n_dests entries, owned by the struct */
} sluice_channel_stats;

/* Fills *out with a snapshot (taken on the channel's loop; blocks the
 * caller briefly when called from another thread — for a channel on a
 * user's loop, call it on that loop's thread or while the loop runs, or it
 * waits for the loop). Free with
 * sluice_channel_stats_clear(). Returns 0, SLUICE_ERR_INVALID_ARG or
 * SLUICE_ERR_NOMEM. */
SLUICE_API int sluice_channel_get_stats(sluice_channel *ch,
                                        sluice_channel_stats *out);
/* Frees what a snapshot owns. NULL is ignored. */
SLUICE_API void sluice_channel_stats_clear(sluice_channel_stats *s);
/* The same snapshot as Prometheus text exposition (metrics prefixed
 * sluice_client_, labelled by destination); *text is malloc'd, the caller
 * frees it. Returns 0, SLUICE_ERR_INVALID_ARG or SLUICE_ERR_NOMEM. */
SLUICE_API int sluice_channel_stats_prometheus(sluice_channel *ch, char **text);

#ifdef __cplusplus
}
#endif
#endif
