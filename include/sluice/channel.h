/** @file
 * sluice: client channels and unary calls.
 *
 * Threads: a channel runs on one libuv loop, either its own (the library
 * starts a thread for it) or one the user hands in with
 * sluice_channel_opts_set_loop(). Calls may be started from any thread;
 * completion callbacks always run on the channel's loop thread. Blocking
 * calls wait on the caller's thread and refuse to run on the loop thread,
 * where they would deadlock: they complete at once with a local
 * FAILED_PRECONDITION status.
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
#include "sluice/resilience.h"
#include "sluice/status.h"
#include "sluice/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A client channel (opaque): a target's destinations, their connections
 * and the load balancer; calls of any method are started on it. Created by
 * sluice_channel_new(), destroyed by sluice_channel_del(). */
typedef struct sluice_channel sluice_channel;
/** Channel options (opaque, so that new settings never break the ABI):
 * sluice_channel_opts_new(), the setters, then sluice_channel_new(). One
 * thread at a time. */
typedef struct sluice_channel_opts sluice_channel_opts;
struct uv_loop_s;

/* ---- channel options (opaque, so that new settings never break the ABI) */

/** Creates options with defaults in *out; the caller frees them with
 * sluice_channel_opts_del().
 * @param[out] out receives the options; untouched on failure
 * @retval 0 created
 * @retval SLUICE_ERR_INVALID_ARG out is NULL
 * @retval SLUICE_ERR_NOMEM out of memory */
SLUICE_API int sluice_channel_opts_new(sluice_channel_opts **out);
/** Frees options. Channels made with them are not affected.
 * @param o the options; NULL is ignored */
SLUICE_API void sluice_channel_opts_del(sluice_channel_opts *o);
/** Runs the channel on the caller's loop (borrowed; it must outlive the
 * channel and be run by the caller). No thread is started then, and calls
 * should be started on that loop's thread for zero hand-off.
 * @param o the options
 * @param loop the libuv loop (uv_loop_t); NULL: the channel's own loop
 *   thread (the default)
 * @retval 0 set
 * @retval SLUICE_ERR_INVALID_ARG o is NULL */
SLUICE_API int sluice_channel_opts_set_loop(sluice_channel_opts *o,
                                            struct uv_loop_s *loop);
/** Largest response message accepted (bytes, after decoding). Default
 * 4 MiB, as gRPC. Larger responses fail the call with RESOURCE_EXHAUSTED.
 * @param o the options
 * @param bytes the limit, at least 1
 * @retval 0 set
 * @retval SLUICE_ERR_INVALID_ARG o is NULL or bytes is 0 */
SLUICE_API int sluice_channel_opts_set_max_response_size(sluice_channel_opts *o,
                                                         uint32_t bytes);
/** Largest request message sent. Default unlimited (UINT32_MAX). A larger
 * request is not sent: its call fails with RESOURCE_EXHAUSTED.
 * @param o the options
 * @param bytes the limit, at least 1
 * @retval 0 set
 * @retval SLUICE_ERR_INVALID_ARG o is NULL or bytes is 0 */
SLUICE_API int sluice_channel_opts_set_max_request_size(sluice_channel_opts *o,
                                                        uint32_t bytes);
/** :authority sent with every call; default: the target's host:port.
 * @param o the options
 * @param authority the authority; copied
 * @retval 0 set
 * @retval SLUICE_ERR_INVALID_ARG o or authority is NULL, or authority is ""
 * @retval SLUICE_ERR_NOMEM out of memory; the previous value stays */
SLUICE_API int sluice_channel_opts_set_authority(sluice_channel_opts *o,
                                                 const char *authority);
/** How often a dns: target is resolved again (default 30000 ms).
 * @param o the options
 * @param ms the interval in ms, at least 1
 * @retval 0 set
 * @retval SLUICE_ERR_INVALID_ARG o is NULL or ms is 0 */
SLUICE_API int
sluice_channel_opts_set_resolve_interval_ms(sluice_channel_opts *o,
                                            uint32_t ms);
/** Reconnect back-off, as gRPC's connection-backoff: initial delay
 * (default 1000 ms), growing 1.6x with +-20 % jitter up to max (default
 * 120000 ms).
 * @param o the options
 * @param initial_ms the first delay in ms, at least 1
 * @param max_ms the largest delay in ms, at least initial_ms
 * @retval 0 set
 * @retval SLUICE_ERR_INVALID_ARG o is NULL, initial_ms is 0 or max_ms is
 *   below initial_ms */
SLUICE_API int sluice_channel_opts_set_backoff_ms(sluice_channel_opts *o,
                                                  uint32_t initial_ms,
                                                  uint32_t max_ms);
/** Time allowed for one TCP connect (default 20000 ms).
 * @param o the options
 * @param ms the timeout in ms, at least 1
 * @retval 0 set
 * @retval SLUICE_ERR_INVALID_ARG o is NULL or ms is 0 */
SLUICE_API int
sluice_channel_opts_set_connect_timeout_ms(sluice_channel_opts *o, uint32_t ms);

/** Load balancing and back-pressure strategy for calls on channels made
 * with o (see docs/flow-control.md): "rr" (round robin, no limits), "lcc"
 * (least in-flight calls, adaptive limit), "bcc" (bounded concurrency with
 * usage thresholds), "btc" (bounded throughput and concurrency; the
 * default).
 * @param o the options
 * @param name the strategy's name
 * @retval 0 set
 * @retval SLUICE_ERR_INVALID_ARG o or name is NULL, or name is unknown */
SLUICE_API int sluice_channel_opts_set_lb(sluice_channel_opts *o,
                                          const char *name);
/** Client-side health checking (gRFC A17; docs/health.md): on every
 * connection the channel opens one `grpc.health.v1.Health/Watch` stream
 * for service_name ("" is the server as a whole) and picks the
 * destination only while it reports SERVING, under every strategy. A
 * destination waits (not picked) until its first answer; one that reports
 * NOT_SERVING or SERVICE_UNKNOWN is not picked until it reports SERVING
 * again (the connection stays up); a server without the health service
 * (UNIMPLEMENTED) is used as if it were healthy; a Watch stream that ends
 * otherwise is opened again with back-off, the destination not picked
 * meanwhile. When every destination reports not serving, calls fail at
 * once with UNAVAILABLE "every destination reports NOT_SERVING (health
 * check)", counted in the Prometheus text
 * (sluice_client_dropped_total{reason="not_serving"}); each destination's
 * health is there too (sluice_client_health). Health streams bypass the
 * balancer, its statistics and the call limits. Off by default; this
 * option overrides the service config's healthCheckConfig.serviceName.
 * @param o the options
 * @param service_name the service to watch (copied); NULL: off, unless
 *   the service config asks for it
 * @retval 0 set
 * @retval SLUICE_ERR_INVALID_ARG o is NULL
 * @retval SLUICE_ERR_NOMEM out of memory */
SLUICE_API int sluice_channel_opts_set_health_check(sluice_channel_opts *o,
                                                    const char *service_name);

/** A bounded wait queue for calls that no destination may take now (all
 * at their limits): at most max_len calls wait, each at most max_wait_ms,
 * for a destination to admit them; beyond that they are dropped locally
 * with RESOURCE_EXHAUSTED. Default max_len 0: drop at once, without any
 * I/O.
 * @param o the options
 * @param max_len the most calls waiting; 0: no queue
 * @param max_wait_ms the longest wait in ms; at least 1 when max_len is
 *   not 0 (ignored when it is)
 * @retval 0 set
 * @retval SLUICE_ERR_INVALID_ARG o is NULL, or max_wait_ms is 0 with a
 *   max_len */
SLUICE_API int sluice_channel_opts_set_wait_queue(sluice_channel_opts *o,
                                                  uint32_t max_len,
                                                  uint32_t max_wait_ms);

/** The largest response header list (initial metadata or trailers, each
 * field counted as name + value + 32 bytes, RFC 9113) the channel takes,
 * announced to servers as SETTINGS_MAX_HEADER_LIST_SIZE: a response over
 * it fails the call RESOURCE_EXHAUSTED "response header list too large"
 * (the stream is reset). The other way, a call whose request header list
 * is over the server's announced limit fails RESOURCE_EXHAUSTED "request
 * header list too large" without being sent.
 * @param o the options
 * @param max_bytes the limit in bytes (default 16384); at least 1024
 * @retval 0 set
 * @retval SLUICE_ERR_INVALID_ARG o is NULL or max_bytes below 1024 */
SLUICE_API int
sluice_channel_opts_set_max_header_list_size(sluice_channel_opts *o,
                                             uint32_t max_bytes);

/** The smallest keepalive time sluice_channel_opts_set_keepalive()
 * accepts, in ms. gRFC A8's floor is 10 s (grpc-go applies it); sluice
 * allows 1 s for tests and for servers that permit it. */
#define SLUICE_KEEPALIVE_MIN_TIME_MS 1000u

/** Client keepalive (gRFC A8; default off). On each connection, when
 * time_ms have passed since the last byte was read and the connection has
 * calls open (or permit_without_calls), a PING is sent; when no byte at
 * all arrives within timeout_ms after it, the connection is closed: its
 * calls fail with UNAVAILABLE "keepalive timeout: no bytes for N ms after
 * PING", the destination goes to TRANSIENT_FAILURE and reconnects after
 * its back-off. Time is measured from the last byte read, never from the
 * last PING. A server that answers with GOAWAY ENHANCE_YOUR_CALM
 * "too_many_pings" makes the channel double its keepalive time for the
 * connections it makes from then on (sluice_channel_get_keepalive(); a
 * line on stderr says so). Servers refuse PINGs more often than they allow
 * (grpcio and sluice servers: every 5 minutes by default, and without
 * calls not at all): agree the values with the server's operators.
 * @param o the options
 * @param time_ms the keepalive time in ms; 0 turns keepalive off, else at
 *   least SLUICE_KEEPALIVE_MIN_TIME_MS
 * @param timeout_ms how long to wait for a byte after a PING, in ms (20000
 *   is gRPC's default); at least 1 when time_ms is set (ignored when not)
 * @param permit_without_calls non-zero: ping also while no call is open
 *   (default 0)
 * @retval 0 set
 * @retval SLUICE_ERR_INVALID_ARG o is NULL, time_ms is below the minimum
 *   (and not 0), or timeout_ms is 0 with a time_ms */
SLUICE_API int sluice_channel_opts_set_keepalive(sluice_channel_opts *o,
                                                 uint32_t time_ms,
                                                 uint32_t timeout_ms,
                                                 int permit_without_calls);

/* ---- channel */

/** Creates a channel to target in *out. Nothing connects until the first
 * call. Targets:
 *
 *     host:port              resolved like dns:host:port
 *     dns:host:port          every resolved address is a destination;
 *                            resolved again periodically and after a
 *                            connection failure
 *     ipv4:a.b.c.d:port[,a.b.c.d:port...]   fixed destinations
 *     ipv6:[addr]:port[,...]
 *     unix:/path             a Unix domain socket
 *
 * opts may be NULL (defaults); it is read during the call and not kept (it
 * may be freed right after). A channel without its own loop option starts
 * its loop thread here.
 * @param[out] out receives the channel, owned by the caller
 *   (sluice_channel_del()); untouched on failure
 * @param target the target, as above; read during the call
 * @param opts the options, or NULL
 * @retval 0 created
 * @retval SLUICE_ERR_INVALID_ARG out or target is NULL
 * @retval SLUICE_ERR_BAD_TARGET target cannot be parsed
 * @retval SLUICE_ERR_NOMEM out of memory
 * @retval SLUICE_ERR_SYSTEM the loop or its thread cannot be created */
SLUICE_API int sluice_channel_new(sluice_channel **out, const char *target,
                                  const sluice_channel_opts *opts);

/** Destroys the channel. Calls still in flight complete with CANCELLED
 * ("channel destroyed") before this returns (on a channel with its own
 * loop) or on the next turns of the user's loop (a channel on a user loop:
 * keep running that loop until uv_run returns). Must not be called from
 * inside one of the channel's own callbacks. Every call handle of the
 * channel must have been released by the time this returns (before it,
 * or from on_done): see sluice_call_release().
 * @param ch the channel; NULL is ignored */
SLUICE_API void sluice_channel_del(sluice_channel *ch);

/** A channel's connectivity state, as gRPC's: the aggregate over its
 * destinations (READY if any is READY, else CONNECTING if any is
 * connecting, else TRANSIENT_FAILURE if any is failing, else IDLE). */
typedef enum sluice_connectivity_state {
  SLUICE_CHANNEL_IDLE = 0,              /**< not connected, not trying */
  SLUICE_CHANNEL_CONNECTING = 1,        /**< a connection is being made */
  SLUICE_CHANNEL_READY = 2,             /**< a destination takes calls */
  SLUICE_CHANNEL_TRANSIENT_FAILURE = 3, /**< failing; back-off, retry */
  SLUICE_CHANNEL_SHUTDOWN = 4           /**< the channel is being destroyed */
} sluice_connectivity_state;

/** The name of a state ("IDLE", "CONNECTING", "READY",
 * "TRANSIENT_FAILURE", "SHUTDOWN"; "UNKNOWN" for other values).
 * @param s the state
 * @return a static string */
SLUICE_API const char *
sluice_connectivity_state_name(sluice_connectivity_state s);

/** The channel's connectivity state now. Thread-safe (it reads the state
 * the loop last published, so it may lag by one loop turn).
 * @param ch the channel
 * @param try_to_connect non-zero: an IDLE channel starts connecting to
 *   its destinations (on its loop, soon), as if a call were waiting
 * @return the state; SLUICE_CHANNEL_SHUTDOWN for a NULL ch */
SLUICE_API sluice_connectivity_state
sluice_channel_get_state(sluice_channel *ch, int try_to_connect);

/** Called once per sluice_channel_watch_state(), on the channel's loop
 * thread.
 * @param state the channel's state at that moment
 * @param changed non-zero when state differs from the last_observed that
 *   was given; 0 when the deadline passed first
 * @param user_data as given to sluice_channel_watch_state() */
typedef void (*sluice_channel_state_cb)(sluice_connectivity_state state,
                                        int changed, void *user_data);

/** Asks to be told when the channel's state is no longer last_observed.
 * cb fires exactly once, on the channel's loop thread and never from
 * inside this function: as soon as the state differs from last_observed
 * (at once, on the loop, if it already does), or at deadline_ns (changed
 * 0), or when the channel is destroyed (SLUICE_CHANNEL_SHUTDOWN; before
 * sluice_channel_del() returns on a channel with its own loop).
 * Thread-safe; must not be called once sluice_channel_del() has been.
 * @param ch the channel
 * @param last_observed the state the caller knows
 *   (sluice_channel_get_state())
 * @param deadline_ns absolute time on sluice_now_ns()'s clock; 0: none
 * @param cb the callback
 * @param user_data passed to cb
 * @retval 0 cb will fire
 * @retval SLUICE_ERR_INVALID_ARG ch or cb is NULL; cb will not fire
 * @retval SLUICE_ERR_NOMEM out of memory; cb will not fire */
SLUICE_API int sluice_channel_watch_state(
    sluice_channel *ch, sluice_connectivity_state last_observed,
    uint64_t deadline_ns, sluice_channel_state_cb cb, void *user_data);

/** The keepalive time the channel's next connection will use (it doubles
 * at each GOAWAY "too_many_pings", see sluice_channel_opts_set_keepalive())
 * and how many such GOAWAYs it has received. Thread-safe.
 * @param ch the channel
 * @param[out] time_ms receives the keepalive time in ms (0: keepalive
 *   off); may be NULL
 * @param[out] too_many_pings receives the count; may be NULL
 * @retval 0 filled
 * @retval SLUICE_ERR_INVALID_ARG ch is NULL */
SLUICE_API int sluice_channel_get_keepalive(sluice_channel *ch,
                                            uint32_t *time_ms,
                                            uint64_t *too_many_pings);

/* ---- per-call options: a plain struct, filled by sluice_call_opts_init() */

/** Per-call options: a plain struct, filled by sluice_call_opts_init(),
 * then set field by field; read before the function starting the call
 * returns, not kept. */
typedef struct sluice_call_opts {
  /** The size of this struct as the caller's program was compiled, set by
   * sluice_call_opts_init(); leave it alone. It lets a newer library append
   * fields without breaking programs built against older headers (the
   * library reads only the first struct_size bytes, docs/abi.md). 0 (a
   * struct zeroed by hand) is read as ABI 0's layout. */
  size_t struct_size;
  /** Relative timeout in ms; 0 = none (then the method's default applies).
   */
  uint64_t timeout_ms;
  /** Absolute deadline on sluice_now_ns()'s clock; 0 = none. When both are
   * set the earlier one wins. */
  uint64_t deadline_ns;
  /** Custom metadata to send (borrowed; copied before the function starting
   * the call returns); NULL: none. */
  const sluice_metadata *metadata;
  /** Largest response message accepted, in bytes; 0 = channel/method
   * default. The smallest of channel, method and this wins, as gRPC does.
   */
  uint32_t max_response_size;
  /** Largest request message sent, in bytes; 0 = channel/method default.
   * The smallest of channel, method and this wins. */
  uint32_t max_request_size;
  /** Compress the messages this call sends (default none); a message can
   * opt out with SLUICE_SEND_NO_COMPRESS (sluice/call.h). */
  sluice_compression compression;
  /** Bound of the send queue of a streaming call in bytes; 0 = default
   * (SLUICE_DEFAULT_SEND_BUFFER, sluice/call.h). */
  uint32_t send_buffer;
  /** This call's retry policy, over the service config's (borrowed; read
   * before the function starting the call returns); NULL: the channel's.
   * Validated as sluice_channel_opts_set_method_config() does; an invalid
   * one fails the call with INVALID_ARGUMENT. sluice/resilience.h. */
  const struct sluice_retry_policy *retry_policy;
  /** This call's hedging policy (borrowed, as retry_policy); NULL: the
   * channel's. At most one of retry_policy and hedging_policy. */
  const struct sluice_hedging_policy *hedging_policy;
  /** Non-zero: this call is never retried or hedged (transparent retries
   * of streams the server never saw still happen). */
  int no_retry;
  /** The server call whose handler makes this call, set by
   * sluice_call_opts_set_parent() (borrowed; read while the function
   * starting the call runs); NULL: none. */
  const struct sluice_server_call *parent;
  /** Wait-for-ready (gRPC's): a call that waits for a READY destination
   * (until its deadline) instead of failing fast with UNAVAILABLE while
   * every destination is in TRANSIENT_FAILURE. Positive: wait; negative:
   * fail fast; 0 (the default): as the service config's waitForReady for
   * the method says, else fail fast. The call's value wins over the
   * service config's. Appended after `parent`: a struct zeroed by hand
   * (struct_size 0) is read without this field (use
   * sluice_call_opts_init()). */
  int wait_for_ready;
} sluice_call_opts;

/** Fills the first struct_size bytes of o with "no options" and records
 * struct_size in it. Programs call sluice_call_opts_init(), which passes
 * the size the program was compiled with; this form is for bindings that
 * cannot use an inline function.
 * @param o the options; NULL is ignored
 * @param struct_size sizeof(sluice_call_opts) as the caller knows it; below
 *   sizeof(size_t) nothing is done */
SLUICE_API void sluice_call_opts_init_sized(sluice_call_opts *o,
                                            size_t struct_size);

/** Fills o with "no options" (every field 0) and records the struct's size
 * as this program was compiled (see sluice_call_opts::struct_size).
 * @param o the options; NULL is ignored */
static inline void sluice_call_opts_init(sluice_call_opts *o) {
  sluice_call_opts_init_sized(o, sizeof(sluice_call_opts));
}

struct sluice_server_call;
/** Links the outgoing call to parent, the server call whose handler is
 * making it (o->parent):
 * - deadline propagation: the call gets (at most) the parent's remaining
 *   deadline; o->deadline_ns is set to it unless o already has an earlier
 *   one (nothing changes when parent has no deadline);
 * - back-pressure through a chain: when the call starts, the channel's
 *   present back-pressure goes to the parent's server
 *   (sluice_server_call_report_downstream()), which tells its own clients;
 *   the channel counts as inside a chain from then on: it passes the
 *   pressure its destinations report up instead of acting on it, and a
 *   call every destination refuses (at its limit) waits briefly for one
 *   instead of being dropped, so the edge of the chain drops, before any
 *   work is done (docs/flow-control.md, "Back-pressure through a chain").
 * @param o the options of the outgoing call; NULL is ignored
 * @param parent the server call, not yet finished when the call is
 *   started; NULL is ignored */
SLUICE_API void
sluice_call_opts_set_parent(sluice_call_opts *o,
                            const struct sluice_server_call *parent);

/** Completion of a unary call. Runs exactly once, on the channel's loop
 * thread. st is borrowed until the callback returns. resp is the decoded
 * response when st->code is OK, else NULL; it is owned by the library and
 * freed after the callback returns (copy what you keep).
 * @param st the final status; borrowed
 * @param resp the response (of the method's response type), or NULL
 * @param user_data as given to sluice_unary_call() */
typedef void (*sluice_unary_cb)(const sluice_status *st,
                                const ProtobufCMessage *resp, void *user_data);

/** Starts a unary call of method with request req. req is serialized
 * before this returns (the caller keeps ownership). opts may be NULL. cb
 * fires exactly once — with an error status when the call cannot even
 * start (an expired deadline, an oversized request ...), never
 * synchronously from inside this function. Thread-safe.
 * @param ch the channel
 * @param method the method; kept by the call, so it must outlive it
 *   (generated tables are static)
 * @param req the request, of the method's request type
 * @param opts per-call options, or NULL; read before this returns
 * @param cb the completion callback
 * @param user_data passed to cb
 * @retval 0 cb will fire
 * @retval SLUICE_ERR_INVALID_ARG ch, method, req or cb is NULL, req is not
 *   of the method's request type, or method lacks its path or message
 *   descriptors; cb will not fire
 * @retval SLUICE_ERR_NOMEM out of memory; cb will not fire */
SLUICE_API int sluice_unary_call(sluice_channel *ch,
                                 const sluice_method_desc *method,
                                 const ProtobufCMessage *req,
                                 const sluice_call_opts *opts,
                                 sluice_unary_cb cb, void *user_data);

/** A generated stub's trampoline: casts cb back to the stub's typed
 * callback and calls it with st, resp (cast to the response type) and
 * user_data. Runs where and when a sluice_unary_cb would.
 * @param st the final status; borrowed
 * @param resp the response, or NULL (as for sluice_unary_cb)
 * @param cb the typed callback, as given to sluice_unary_call_tramp()
 * @param user_data as given to sluice_unary_call_tramp() */
typedef void (*sluice_unary_tramp)(const sluice_status *st,
                                   const ProtobufCMessage *resp,
                                   sluice_generic_fn cb, void *user_data);

/** As sluice_unary_call(), but completion calls tramp(st, resp, cb,
 * user_data). Used by generated code; same ownership, threading and return
 * values.
 * @param ch the channel
 * @param method the method; kept by the call
 * @param req the request, of the method's request type
 * @param opts per-call options, or NULL
 * @param tramp the trampoline
 * @param cb the typed callback, passed to tramp
 * @param user_data passed to tramp
 * @retval 0 tramp will be called
 * @retval SLUICE_ERR_INVALID_ARG as sluice_unary_call(), or tramp is NULL
 * @retval SLUICE_ERR_NOMEM out of memory; tramp will not be called */
SLUICE_API int sluice_unary_call_tramp(sluice_channel *ch,
                                       const sluice_method_desc *method,
                                       const ProtobufCMessage *req,
                                       const sluice_call_opts *opts,
                                       sluice_unary_tramp tramp,
                                       sluice_generic_fn cb, void *user_data);

/** Blocking unary call: waits on the caller's thread. On return *status
 * holds the outcome (owned by the caller: sluice_status_clear() it; status
 * may be NULL if not wanted) and, when the code is OK, *resp the response,
 * owned by the caller, freed with protobuf_c_message_free_unpacked(*resp,
 * NULL). API misuse (NULL pointers, call on the loop thread) yields
 * INVALID_ARGUMENT/FAILED_PRECONDITION statuses generated locally.
 * Thread-safe, except on the channel's loop thread.
 * @param ch the channel
 * @param method the method
 * @param req the request, of the method's request type; serialized before
 *   the call goes out (the caller keeps it)
 * @param[out] resp receives the response when the code is OK, else NULL
 * @param opts per-call options, or NULL
 * @param[out] status receives the whole status, or NULL; overwritten, not
 *   freed first: pass one that is initialised (sluice_status_init()) or
 *   cleared
 * @return the status code; the local ones: INVALID_ARGUMENT (ch, method,
 *   req or resp NULL, or req not of the method's request type),
 *   FAILED_PRECONDITION (called on the channel's loop thread), INTERNAL
 *   (the call could not be started, out of memory) */
SLUICE_API sluice_status_code
sluice_unary_call_blocking(sluice_channel *ch, const sluice_method_desc *method,
                           const ProtobufCMessage *req, ProtobufCMessage **resp,
                           const sluice_call_opts *opts, sluice_status *status);

/* ---- statistics (see docs/flow-control.md) */

/** Statistics of one destination, part of a sluice_channel_stats
 * snapshot. */
typedef struct sluice_dest_stats {
  char address[112];      /**< "127.0.0.1:50051" */
  const char *conn_state; /**< "IDLE", "CONNECTING", "READY",
                             "TRANSIENT_FAILURE" (static) */
  const char *lb_state;   /**< the strategy's state ("normal", "T-low/C-mid"
                             ...; static) */
  uint32_t in_flight;     /**< calls in flight now */
  double limit;           /**< admission limit (0 = none) */
  double adaptive_limit;  /**< the measured (gradient) concurrency limit */
  double rate;            /**< completions per second */
  double rate_bytes;      /**< bytes per second (requests + responses) */
  double latency_min_us, latency_ewma_us;
  /** @var latency_min_us
   * The no-load latency estimate, in us. */
  /** @var latency_ewma_us
   * The latency's moving average, in us. */
  double peer_utilization; /**< the server's last load report; < 0 none */
  uint64_t sent, ok, failed;
  /** @var sent
   * Calls sent to this destination. */
  /** @var ok
   * Calls completed OK. */
  /** @var failed
   * Calls failed after being sent. */
  uint64_t p50_us, p99_us, p999_us; /* completed calls' latency */
  /** @var p50_us
   * Median latency of completed calls, in us. */
  /** @var p99_us
   * 99th percentile latency of completed calls, in us. */
  /** @var p999_us
   * 99.9th percentile latency of completed calls, in us. */
  double algo_ns;     /**< mean time of the pick decision, in ns */
  double strategy_us; /**< mean time from the decision until the request
                         was handed to HTTP/2, in us */
  /** Times ejected so far (outlier ejection, docs/flow-control.md: a
   * destination whose calls keep failing with UNAVAILABLE, INTERNAL,
   * UNKNOWN, UNIMPLEMENTED or DATA_LOSS is left out of the balancing for a
   * while). */
  uint64_t ejections;
  int ejected;           /**< non-zero while ejected now */
  double ejected_for_ms; /**< time left of the current ejection (0: none) */
} sluice_dest_stats;

/** A snapshot of a channel's statistics (sluice_channel_get_stats()). */
typedef struct sluice_channel_stats {
  const char *lb;               /**< strategy name (static) */
  uint64_t dropped_unavailable; /**< dropped: nothing connected */
  uint64_t dropped_limit;       /**< dropped: every destination at its limit */
  uint64_t dropped_path_limit;  /**< ... at its limit for the call's path */
  uint64_t dropped_deadline;    /**< dropped: could not be answered in time */
  uint64_t dropped_wait;        /**< wait queue full, or waited too long */
  uint64_t waiting;             /**< in the wait queue now */
  size_t n_dests;               /**< number of entries in dests */
  sluice_dest_stats *dests;     /**< n_dests entries, owned by the struct */
  /** dropped: a circuit breaker was open (max_requests or max_pending;
   * sluice_channel_opts_set_circuit_breakers) */
  uint64_t dropped_breaker;
  /** The channel's retries, hedges and denials (the totals of
   * sluice_channel_get_resilience_stats(), which has them per method) */
  sluice_retry_counters retry;
} sluice_channel_stats;

/** Fills *out with a snapshot (taken on the channel's loop; blocks the
 * caller briefly when called from another thread — for a channel on a
 * user's loop, call it on that loop's thread or while the loop runs, or it
 * waits for the loop). Free with sluice_channel_stats_clear(), also after
 * SLUICE_ERR_NOMEM.
 * @param ch the channel
 * @param[out] out the snapshot; owned by the caller
 * @retval 0 filled
 * @retval SLUICE_ERR_INVALID_ARG ch or out is NULL
 * @retval SLUICE_ERR_NOMEM out of memory: the channel's counters are
 *   filled, dests is NULL */
SLUICE_API int sluice_channel_get_stats(sluice_channel *ch,
                                        sluice_channel_stats *out);
/** Frees what a snapshot owns and zeroes it.
 * @param s the snapshot; NULL is ignored */
SLUICE_API void sluice_channel_stats_clear(sluice_channel_stats *s);
/** The same snapshot as Prometheus text exposition (metrics prefixed
 * sluice_client_, labelled by destination); *text is malloc'd, the caller
 * frees it with free(). Blocks as sluice_channel_get_stats() does.
 * @param ch the channel
 * @param[out] text receives the NUL-terminated text; untouched on failure
 * @retval 0 written
 * @retval SLUICE_ERR_INVALID_ARG ch or text is NULL
 * @retval SLUICE_ERR_NOMEM out of memory */
SLUICE_API int sluice_channel_stats_prometheus(sluice_channel *ch, char **text);

/** Fills *out (initialised with sluice_resilience_stats_init(), see
 * sluice/resilience.h) with the channel's retry, hedging and circuit-breaker
 * counters, in total and per method (taken on the channel's loop as
 * sluice_channel_get_stats() is: from another thread it waits for the
 * loop; on the loop thread it is taken at once). Only the first
 * out->struct_size bytes are written, so a program built against older
 * headers gets the fields it knows. Free with
 * sluice_resilience_stats_clear(), also after SLUICE_ERR_NOMEM.
 * @param ch the channel
 * @param[in,out] out the snapshot: struct_size set by
 *   sluice_resilience_stats_init(), the rest filled; out->methods is
 *   owned by the caller from then on
 * @retval 0 filled
 * @retval SLUICE_ERR_INVALID_ARG ch or out is NULL, or out was not
 *   initialised (struct_size too small)
 * @retval SLUICE_ERR_NOMEM out of memory: the totals are filled, methods
 *   is NULL and n_methods 0 */
SLUICE_API int
sluice_channel_get_resilience_stats(sluice_channel *ch,
                                    sluice_resilience_stats *out);
/** Frees what a resilience snapshot owns (methods) and zeroes it,
 * struct_size kept, so it can be filled again. Touches only the first
 * struct_size bytes (all of it when struct_size is 0). Thread-safe
 * (touches only s).
 * @param s the snapshot; NULL is ignored */
SLUICE_API void sluice_resilience_stats_clear(sluice_resilience_stats *s);

/** The reason the last sluice_channel_opts_set_tls() (sluice/tls.h) on these
 * options failed (SLUICE_ERR_TLS, or SLUICE_ERR_INVALID_ARG for an incomplete
 * configuration), or the last resilience setter (sluice/resilience.h: the
 * field refused, such as "methodConfig[0].timeout: ..."); "" if none, or
 * after one of these succeeded.
 * @param o the options
 * @return the text, borrowed: valid until the options change or are freed;
 *   "" for NULL */
SLUICE_API const char *
sluice_channel_opts_last_error(const sluice_channel_opts *o);

#ifdef __cplusplus
}
#endif
#endif
