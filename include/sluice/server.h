/** @file
 * sluice: servers.
 *
 * Threads: a server runs N loops (default: one per core), each on its own
 * thread; accepted connections are handed to loops round robin. A handler
 * runs on the loop of its connection. It may reply at once or later from any
 * thread: replies cross to the loop through a queue.
 */
#ifndef SLUICE_SERVER_H
#define SLUICE_SERVER_H

#include "sluice/export.h"

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "sluice/buf.h"
#include "sluice/clock.h"
#include "sluice/metadata.h"
#include "sluice/method.h"
#include "sluice/status.h"
#include "sluice/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A server (opaque): services, listeners and loop threads. Created by
 * sluice_server_new(), freed by sluice_server_del(). */
typedef struct sluice_server sluice_server;
/** Server options (opaque, so that new settings never break the ABI):
 * sluice_server_opts_new(), the setters, then sluice_server_new(). One
 * thread at a time. */
typedef struct sluice_server_opts sluice_server_opts;
/** One call on a server (opaque), handed to its handler; valid from the
 * handler until the call is finished. */
typedef struct sluice_server_call sluice_server_call;

/** Generic dispatch of one method of any kind, emitted by
 * protoc-gen-sluice: casts req to the method's request type and calls the
 * user's typed handler found in handlers (the service's handler struct, as
 * registered).
 * Unary and server-streaming methods are dispatched once their single
 * request message has arrived (req is it); client-streaming and bidi
 * methods as soon as the request headers have (req is NULL: messages come
 * through sluice_server_call_set_handlers()). Runs on the call's loop
 * thread.
 * @param call the new call
 * @param req the request (borrowed until the call is finished), or NULL
 * @param handlers the library's copy of the registered handler struct
 * @param user_data as given to sluice_server_add_service() */
typedef void (*sluice_method_dispatch)(sluice_server_call *call,
                                       const ProtobufCMessage *req,
                                       const void *handlers, void *user_data);

/** The handler of a raw service's methods (sluice_server_add_raw_service()):
 * requests arrive serialized, not decoded. Unary and server-streaming
 * methods are dispatched once their single request has arrived (req is
 * it, owned by the handler from here: free it with sluice_buf_free(), or
 * hand it on without a copy, to sluice_call_send_buf() of a call to the
 * next tier, say); client-streaming and bidi methods as soon as the
 * request headers have (req is NULL: messages come through
 * sluice_server_call_set_raw_handlers()). sluice_server_call_method() tells
 * which method it is. Runs on the call's loop thread; the call is then
 * answered as any other (sluice_server_call_finish_buf(),
 * sluice_server_call_finish(), ...).
 * @param call the new call
 * @param req the serialized request (owned by the handler), or NULL
 * @param user_data as given to sluice_server_add_raw_service() */
typedef void (*sluice_raw_dispatch)(sluice_server_call *call, sluice_buf *req,
                                    void *user_data);

/** The former name of sluice_method_dispatch, from when only unary methods
 * were dispatched this way; the same type, kept so that code using it
 * still compiles.
 * @deprecated Use sluice_method_dispatch. */
typedef sluice_method_dispatch sluice_unary_dispatch;

/* ---- options */

/** Creates server options with defaults in *out (free with
 * sluice_server_opts_del()).
 * @param[out] out receives the options; untouched on failure
 * @retval 0 created
 * @retval SLUICE_ERR_INVALID_ARG out is NULL
 * @retval SLUICE_ERR_NOMEM out of memory */
SLUICE_API int sluice_server_opts_new(sluice_server_opts **out);
/** Frees options. Servers made with them are not affected.
 * @param o the options; NULL is ignored */
SLUICE_API void sluice_server_opts_del(sluice_server_opts *o);
/** Number of loop threads; 0 = one per core (default).
 * @param o the options
 * @param n the number of loops, at most 1024; 0: one per core
 * @retval 0 set
 * @retval SLUICE_ERR_INVALID_ARG o is NULL or n is above 1024 */
SLUICE_API int sluice_server_opts_set_threads(sluice_server_opts *o,
                                              unsigned n);
/** Largest request message accepted (default 4 MiB); larger ones fail
 * with RESOURCE_EXHAUSTED.
 * @param o the options
 * @param bytes the limit, at least 1
 * @retval 0 set
 * @retval SLUICE_ERR_INVALID_ARG o is NULL or bytes is 0 */
SLUICE_API int sluice_server_opts_set_max_request_size(sluice_server_opts *o,
                                                       uint32_t bytes);
/** Largest response message sent (default unlimited): a larger one is
 * refused by sluice_server_call_send() (SLUICE_ERR_TOO_LARGE) or fails the
 * call with RESOURCE_EXHAUSTED when handed to sluice_server_call_finish().
 * @param o the options
 * @param bytes the limit, at least 1
 * @retval 0 set
 * @retval SLUICE_ERR_INVALID_ARG o is NULL or bytes is 0 */
SLUICE_API int sluice_server_opts_set_max_response_size(sluice_server_opts *o,
                                                        uint32_t bytes);
/** SETTINGS_MAX_CONCURRENT_STREAMS announced per connection (default
 * 1000).
 * @param o the options
 * @param n the number of streams, at least 1
 * @retval 0 set
 * @retval SLUICE_ERR_INVALID_ARG o is NULL or n is 0 */
SLUICE_API int
sluice_server_opts_set_max_concurrent_streams(sluice_server_opts *o,
                                              uint32_t n);
/** Bound of each call's response send queue in bytes (default
 * SLUICE_DEFAULT_SEND_BUFFER); see sluice_server_call_send().
 * @param o the options
 * @param bytes the bound, at least 1
 * @retval 0 set
 * @retval SLUICE_ERR_INVALID_ARG o is NULL or bytes is 0 */
SLUICE_API int sluice_server_opts_set_send_buffer(sluice_server_opts *o,
                                                  uint32_t bytes);

/* ---- admission */

/** @name Admission: concurrency limits, queueing, shedding, load report
 *
 * A call takes a slot when its handler is about to run and holds it until
 * the handler calls sluice_server_call_finish (even if the client went away
 * meanwhile): "in flight" means a handler is running or owes a finish. A
 * unary or server-streaming call asks for a slot once its request is
 * complete, a client-streaming or bidi call once its headers have arrived.
 * A call that finds no slot waits in a FIFO queue (one per loop thread; a
 * freed slot goes to the oldest waiting call of the loop where it was
 * freed, and wakes the other loops with waiting calls), then its handler
 * runs. A waiting call whose deadline passes fails with DEADLINE_EXCEEDED
 * and its handler never runs; one whose client cancels is dropped.
 * Refused and shed calls get RESOURCE_EXHAUSTED with a message saying why
 * and the trailer grpc-retry-pushback-ms (a client that retries should
 * wait that long; sluice clients with a retry policy do, see
 * docs/resilience.md).
 * @{ */

/** At most n calls in flight in the whole server, across all loops; 0 (the
 * default) = no limit.
 * @param o the options
 * @param n the limit; 0: none
 * @retval 0 set
 * @retval SLUICE_ERR_INVALID_ARG o is NULL or n > INT32_MAX */
SLUICE_API int
sluice_server_opts_set_max_concurrent_calls(sluice_server_opts *o, uint32_t n);

/** At most n calls of the method path ("/package.Service/Method", copied)
 * in flight; 0 removes the limit. Several methods may have limits; setting
 * a path again replaces its limit. A call waits until both its method and
 * the server have a free slot; a waiting call held back only by its
 * method's limit does not hold up calls of other methods. A path that is
 * never registered is ignored.
 * @param o the options
 * @param path the method's path; copied
 * @param n the limit; 0: none
 * @retval 0 set
 * @retval SLUICE_ERR_INVALID_ARG o or path is NULL, path does not start
 *   with '/', or n > INT32_MAX
 * @retval SLUICE_ERR_NOMEM out of memory */
SLUICE_API int sluice_server_opts_set_method_max_concurrent_calls(
    sluice_server_opts *o, const char *path, uint32_t n);

/** At most n calls waiting for a slot, server-wide (default 1000). A call
 * over a limit that finds the queue full is refused at once:
 * RESOURCE_EXHAUSTED "server queue full (n)", with grpc-retry-pushback-ms
 * = the current backlog (the oldest wait, or the recent mean queue time;
 * at least 10 ms). 0 = no queue: a call over a limit is refused at once,
 * with grpc-retry-pushback-ms = the mean time a slot is held divided by the
 * slots held (when one may free; at least 10 ms).
 * Only matters when a concurrency limit is set.
 * @param o the options
 * @param n the queue's length; 0: no queue
 * @retval 0 set
 * @retval SLUICE_ERR_INVALID_ARG o is NULL or n > INT32_MAX */
SLUICE_API int sluice_server_opts_set_max_queue(sluice_server_opts *o,
                                                uint32_t n);

/** Sheds waiting calls on queue time, the CoDel way (RFC 8289): once the
 * queue time of the oldest waiting call has stayed above target_ms for
 * interval_ms, that call is answered RESOURCE_EXHAUSTED ("shed by server:
 * queued 12 ms > target 5 ms", grpc-retry-pushback-ms = interval_ms), and
 * further ones every interval_ms / sqrt(count) while the queue time stays
 * above target. A typical setting is 5 / 100. target_ms 0 (the default)
 * turns it off. Acts on the admission queue, so it needs a concurrency
 * limit.
 * @param o the options
 * @param target_ms the queue time target in ms; 0: off
 * @param interval_ms the interval in ms (ignored when target_ms is 0)
 * @retval 0 set
 * @retval SLUICE_ERR_INVALID_ARG o is NULL, interval_ms is 0 with a target,
 *   or either is above one hour (3600000 ms) */
SLUICE_API int sluice_server_opts_set_codel(sluice_server_opts *o,
                                            uint32_t target_ms,
                                            uint32_t interval_ms);

/** Load report in every response's trailers (on by default; on 0 turns it
 * off; see also sluice_server_opts_set_load_report_interval()):
 * `endpoint-load-metrics-bin`, a serialized ORCA
 * xds.data.orca.v3.OrcaLoadReport with
 *
 *     cpu_utilization  in-flight calls / max concurrent calls (a
 *                      concurrency utilization, not a CPU measurement);
 *                      only with sluice_server_opts_set_max_concurrent_calls:
 *                      without a limit the library cannot know how busy the
 *                      handlers are,
 *     application_utilization
 *                      the application's own figure, when it gives one
 *                      (sluice_server_set_utilization),
 *     rps_fractional   handlers finished per second over the last ~1 s
 *                      window (0 until the first window has passed),
 *     named_metrics    "queue_ms": mean queue time of the calls that left
 *                      the queue in the last window (0 without limits),
 *                      "in_flight": calls in flight now,
 *                      "downstream": how hard the services the handlers
 *                      call push back, 0..1 (the largest figure given to
 *                      sluice_server_call_report_downstream() in the last
 *                      100-200 ms). A sluice client at the edge of a chain
 *                      reads it as the server's utilization, so it sheds
 *                      what the chain's bottleneck cannot take
 *                      (docs/flow-control.md, "Back-pressure through a
 *                      chain").
 *
 * Clients that do not know the trailer ignore it.
 * @param o the options
 * @param on non-zero: send it; 0: do not
 * @retval 0 set
 * @retval SLUICE_ERR_INVALID_ARG o is NULL */
SLUICE_API int sluice_server_opts_set_load_report(sluice_server_opts *o,
                                                  int on);

/** Sends the load report at most once per ms milliseconds on each
 * connection (the first response of a connection and every shed or
 * refused call still carry it); 0 = on every response. Default 10 ms: the
 * report costs about 90 bytes per response (kept out of the HPACK table:
 * its value changes) and some CPU, and every response was ~10-15 % of
 * small-message throughput; one per 10 ms keeps the signal fresh for a
 * client's load balancer at no measurable cost.
 * @param o the options
 * @param ms the interval in ms; 0: every response
 * @retval 0 set
 * @retval SLUICE_ERR_INVALID_ARG o is NULL or ms is above one hour
 *   (3600000 ms) */
SLUICE_API int
sluice_server_opts_set_load_report_interval(sluice_server_opts *o, uint32_t ms);

/** Connection lifetime (gRFC A9). A connection that has had no call for
 * max_idle_ms (counted from its start, or from the moment its last call
 * ended) is closed with a graceful GOAWAY whose debug text is "max_idle".
 * A connection older than max_age_ms (with +-10 % jitter per connection,
 * so that connections made together do not all go together) gets a
 * graceful GOAWAY with debug text "max_age"; its calls then have
 * max_age_grace_ms (counted from the second GOAWAY, no jitter) to finish,
 * after which the connection is closed: their handlers see the calls
 * cancelled and the clients see them fail. The graceful GOAWAY is in two
 * steps, as gRPC's: a shutdown notice (last-stream-id 2^31-1) and a PING;
 * on the PING's ACK, or at most 20 s later, the final GOAWAY with the last
 * stream id processed; clients replay refused calls on a new connection,
 * so an aged-out connection fails no call. See docs/connections.md.
 * @param o the options
 * @param max_idle_ms idle limit in ms; 0 (the default): none
 * @param max_age_ms age limit in ms; 0 (the default): none
 * @param max_age_grace_ms the drain time after max_age or max_idle in ms;
 *   0 (the default): no limit
 * @retval 0 set
 * @retval SLUICE_ERR_INVALID_ARG o is NULL or a value is above a year
 *   (31536000000 ms) */
SLUICE_API int sluice_server_opts_set_connection_limits(
    sluice_server_opts *o, uint64_t max_idle_ms, uint64_t max_age_ms,
    uint64_t max_age_grace_ms);

/** Server keepalive (gRFC A9): when nothing has been read from a
 * connection for time_ms, the server sends a PING, whether or not calls are
 * open; when nothing at all is read in the timeout_ms that follow, the
 * connection is closed (its calls are cancelled) and counted as
 * SLUICE_SERVER_KEEPALIVE_TIMEOUTS.
 * @param o the options
 * @param time_ms the idle time before a PING in ms (default 7200000, two
 *   hours); 0: no keepalive PINGs
 * @param timeout_ms how long to wait for any byte after the PING in ms
 *   (default 20000)
 * @retval 0 set
 * @retval SLUICE_ERR_INVALID_ARG o is NULL, a value is above a year, or
 *   time_ms is set and timeout_ms is 0 */
SLUICE_API int sluice_server_opts_set_keepalive(sluice_server_opts *o,
                                                uint64_t time_ms,
                                                uint64_t timeout_ms);

/** Ping enforcement (gRFC A8): how often clients may PING. A PING is bad
 * when it comes less than min_time_ms after the last good one, or, while
 * the connection has no call and permit_without_calls is 0, less than two
 * hours after it; each bad PING is a strike, and the strikes (and the
 * clock) start again whenever the server sends HEADERS or DATA. When the
 * strikes exceed max_ping_strikes the server sends GOAWAY
 * ENHANCE_YOUR_CALM with debug text "too_many_pings" and closes the
 * connection (counted as SLUICE_SERVER_GOAWAY_TOO_MANY_PINGS); stock gRPC
 * clients then fail their calls UNAVAILABLE and double their keepalive
 * time.
 * @param o the options
 * @param min_time_ms the least time between PINGs in ms (default 300000,
 *   five minutes)
 * @param permit_without_calls non-zero: PINGs on a connection without
 *   calls are held to min_time_ms too (default 0)
 * @param max_ping_strikes bad PINGs tolerated (default 2); 0: no limit
 * @retval 0 set
 * @retval SLUICE_ERR_INVALID_ARG o is NULL, min_time_ms is above a year or
 *   max_ping_strikes above INT32_MAX */
SLUICE_API int sluice_server_opts_set_keepalive_enforcement(
    sluice_server_opts *o, uint64_t min_time_ms, int permit_without_calls,
    uint32_t max_ping_strikes);
/** Caps the connections open at once (docs/abuse.md): past it, an accepted
 * connection is closed at once, without a byte sent (counted as
 * SLUICE_SERVER_CONNECTIONS_REFUSED). Connections still draining count
 * until they are closed.
 * @param o the options
 * @param max_connections the cap; 0: no limit (default; the descriptor
 *   limit, RLIMIT_NOFILE, is the only one, and accept pauses at it)
 * @retval 0 set
 * @retval SLUICE_ERR_INVALID_ARG o is NULL */
SLUICE_API int sluice_server_opts_set_max_connections(sluice_server_opts *o,
                                                      uint32_t max_connections);

/** The largest request header list (metadata and the HTTP/2 headers, each
 * field counted as name + value + 32 bytes, RFC 9113) the server takes,
 * announced as SETTINGS_MAX_HEADER_LIST_SIZE. A request over it fails
 * RESOURCE_EXHAUSTED "request header list too large" before its handler
 * runs; clients that honour the setting (sluice's) fail such calls
 * themselves before sending. The other way, response metadata over the
 * client's announced limit is dropped and the call ends
 * RESOURCE_EXHAUSTED "response metadata too large".
 * @param o the options
 * @param max_bytes the limit in bytes (default 16384, as gRPC C-core's
 *   soft limit); at least 1024
 * @retval 0 set
 * @retval SLUICE_ERR_INVALID_ARG o is NULL or max_bytes below 1024 */
SLUICE_API int
sluice_server_opts_set_max_header_list_size(sluice_server_opts *o,
                                            uint32_t max_bytes);

/** How long a new connection has to complete the TLS handshake (when the
 * server speaks TLS) and send the client's HTTP/2 preface (its magic and
 * first SETTINGS): a slowloris that has not is closed (counted as
 * SLUICE_SERVER_HANDSHAKE_TIMEOUTS).
 * @param o the options
 * @param timeout_ms the time in ms (default 10000); 0: no limit
 * @retval 0 set
 * @retval SLUICE_ERR_INVALID_ARG o is NULL or timeout_ms is above a year */
SLUICE_API int sluice_server_opts_set_handshake_timeout(sluice_server_opts *o,
                                                        uint64_t timeout_ms);

/** Serves the standard health service `grpc.health.v1.Health` (Check and
 * Watch, as grpc's doc/health-checking.md; docs/health.md) from the
 * library. Off by default (as gRPC C++'s EnableDefaultHealthCheckService).
 * When on, the overall server ("") and every service registered with
 * sluice_server_add_service() start SERVING; the application changes them
 * with sluice_server_set_serving_status(). sluice_server_shutdown() first
 * sets every name NOT_SERVING (for good), tells each Watch stream and ends
 * it (waiting at most min(grace, 1 s) for those streams to be over), then
 * sends GOAWAY. A service the application registered under the
 * same name takes precedence (the library's is then not added).
 * @param o the options
 * @param on non-zero: serve it; 0: do not
 * @retval 0 set
 * @retval SLUICE_ERR_INVALID_ARG o is NULL */
SLUICE_API int sluice_server_opts_set_health(sluice_server_opts *o, int on);

/** Whether the library's health calls bypass admission (on by default):
 * they are never queued or refused by the concurrency limits
 * (sluice_server_opts_set_max_concurrent_calls(), per-method limits, the
 * queue) nor shed by CoDel, and are not counted as in flight in the load
 * report, so a server that is overloaded but alive still answers its
 * liveness probe, and idle Watch streams do not look like load. 0 makes
 * them ordinary calls, admitted like any other.
 * @param o the options
 * @param on non-zero: bypass (default); 0: admit them like other calls
 * @retval 0 set
 * @retval SLUICE_ERR_INVALID_ARG o is NULL */
SLUICE_API int sluice_server_opts_set_health_bypass(sluice_server_opts *o,
                                                    int on);

/** Serves server reflection (docs/reflection.md): the bidi method
 * ServerReflectionInfo of `grpc.reflection.v1.ServerReflection` and of
 * `grpc.reflection.v1alpha.ServerReflection`, with which tools such as
 * grpcurl list the services and fetch their descriptors. It answers
 * list_services (every registered service, the library's own included),
 * file_by_filename, file_containing_symbol (services, methods, messages,
 * enums and their values, extensions; fully qualified),
 * file_containing_extension and all_extension_numbers_of_type from the
 * descriptors given with sluice_server_add_descriptors() (generated
 * `*_sluice_register()` functions give theirs), with every file's
 * transitive imports in the answer. An unknown name is answered with an
 * error_response NOT_FOUND on the stream, which goes on. Off by default.
 * A service the application registered under one of those names takes
 * precedence.
 * @param o the options
 * @param on non-zero: serve it; 0: do not
 * @retval 0 set
 * @retval SLUICE_ERR_INVALID_ARG o is NULL */
SLUICE_API int sluice_server_opts_set_reflection(sluice_server_opts *o, int on);

/** @} */

/* ---- server */

/** A serving status of the health service (grpc.health.v1
 * HealthCheckResponse.ServingStatus, same numbers). */
typedef enum sluice_serving_status {
  SLUICE_SERVING_STATUS_UNKNOWN = 0, /**< not known (never set by sluice) */
  SLUICE_SERVING = 1,                /**< serving */
  SLUICE_NOT_SERVING = 2,            /**< not serving */
  /** Watch only: the name is not known (yet); the stream stays open */
  SLUICE_SERVICE_UNKNOWN = 3
} sluice_serving_status;

/** Sets what the health service (sluice_server_opts_set_health()) answers
 * for service: "" is the whole server, any other name is matched exactly
 * (a fully qualified service name such as "helloworld.Greeter" by
 * convention; names need not be registered services). Every Watch stream
 * on that name is sent the new status (when it changed; a stream that
 * cannot take more just now gets the latest status once it can).
 * Thread-safe, also from handlers and before sluice_server_start(). After
 * sluice_server_shutdown() began, every status is NOT_SERVING and stays so.
 * @param srv the server
 * @param service the name (copied); "" for the whole server
 * @param status SLUICE_SERVING or SLUICE_NOT_SERVING
 * @retval 0 set
 * @retval SLUICE_ERR_INVALID_ARG srv or service is NULL, or another status
 * @retval SLUICE_ERR_STATE the server has no health service, or is
 *   shutting down
 * @retval SLUICE_ERR_NOMEM out of memory */
SLUICE_API int sluice_server_set_serving_status(sluice_server *srv,
                                                const char *service,
                                                sluice_serving_status status);

/** The application's own measure of how busy this server is: 0 idle, 1 at
 * capacity, above 1 overloaded (e.g. (busy workers + queued jobs) /
 * workers). Sent to clients as ORCA application_utilization in the load
 * report, where sluice's balancers prefer it to cpu_utilization: a server
 * that queues work outside the library (its own worker pool) should give
 * it, or clients cannot tell a saturated server from an idle one. A
 * negative value withdraws it. Thread-safe and cheap (one atomic store):
 * call it whenever the figure changes.
 * @param srv the server
 * @param utilization the figure; negative: withdrawn
 * @retval 0 set
 * @retval SLUICE_ERR_INVALID_ARG srv is NULL or utilization is NaN */
SLUICE_API int sluice_server_set_utilization(sluice_server *srv,
                                             double utilization);

/** What sluice_server_conn_events() counts. */
typedef enum sluice_server_conn_event {
  /** Connections accepted. */
  SLUICE_SERVER_CONNECTIONS_ACCEPTED = 0,
  /** GOAWAY ENHANCE_YOUR_CALM "too_many_pings" sent (ping enforcement). */
  SLUICE_SERVER_GOAWAY_TOO_MANY_PINGS = 1,
  /** Graceful GOAWAYs "max_age" started (connection lifetime). */
  SLUICE_SERVER_GOAWAY_MAX_AGE = 2,
  /** Graceful GOAWAYs "max_idle" started (connection lifetime). */
  SLUICE_SERVER_GOAWAY_MAX_IDLE = 3,
  /** Connections closed because a keepalive PING got no answer. */
  SLUICE_SERVER_KEEPALIVE_TIMEOUTS = 4,
  /** Connections whose drain grace ran out with calls still open (closed,
   * the calls cancelled). */
  SLUICE_SERVER_GRACE_EXPIRED = 5,
  /** Times accepting paused (100 ms) because accept() failed for want of
   * descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM). */
  SLUICE_SERVER_ACCEPT_PAUSED = 6,
  /** Connections closed at once because
   * sluice_server_opts_set_max_connections() were already open. */
  SLUICE_SERVER_CONNECTIONS_REFUSED = 7,
  /** Connections closed because the TLS handshake and the HTTP/2 preface
   * did not complete in time (sluice_server_opts_set_handshake_timeout()). */
  SLUICE_SERVER_HANDSHAKE_TIMEOUTS = 8,
  /** GOAWAY ENHANCE_YOUR_CALM sent for a flood: rapid reset
   * (CVE-2023-44487, "rapid_reset"), or too many SETTINGS/PING/RST_STREAM
   * answers queued for a peer that does not read ("flood"). Not the ping
   * enforcement's, counted as SLUICE_SERVER_GOAWAY_TOO_MANY_PINGS. */
  SLUICE_SERVER_GOAWAY_CALM = 9
} sluice_server_conn_event;

/** How many times ev has happened on the server's connections since
 * sluice_server_new(). Thread-safe (atomic loads); cheap.
 * @param srv the server
 * @param ev what to count
 * @return the count; 0 when srv is NULL or ev unknown */
SLUICE_API uint64_t sluice_server_conn_events(const sluice_server *srv,
                                              sluice_server_conn_event ev);

/** Creates a server (not yet listening) in *out. opts may be NULL; it is
 * read during the call and not kept (it may be freed right after).
 * @param[out] out receives the server, owned by the caller
 *   (sluice_server_del()); untouched on failure
 * @param opts the options, or NULL (defaults)
 * @retval 0 created
 * @retval SLUICE_ERR_INVALID_ARG out is NULL
 * @retval SLUICE_ERR_NOMEM out of memory */
SLUICE_API int sluice_server_new(sluice_server **out,
                                 const sluice_server_opts *opts);

/** Registers a service before sluice_server_start(). desc is borrowed
 * (static tables from generated code); dispatch has desc->n_methods entries
 * (NULL for a method without a handler: it answers UNIMPLEMENTED);
 * handlers_size bytes of handlers are copied; user_data is passed to every
 * handler. Generated code wraps this as
 * `<package>__<service>__sluice_register()`. Not thread-safe: one thread,
 * before the server starts.
 * @param srv the server
 * @param desc the service table; borrowed for the server's life
 * @param dispatch desc->n_methods dispatch functions, copied; may be NULL
 *   for a service without methods
 * @param handlers the handler struct given to each dispatch function
 * @param handlers_size bytes of handlers to copy
 * @param user_data passed to every handler
 * @retval 0 registered
 * @retval SLUICE_ERR_INVALID_ARG srv or desc is NULL, dispatch or
 *   desc->methods is NULL for a service with methods, or handlers is NULL
 *   with a handlers_size
 * @retval SLUICE_ERR_DUPLICATE a method path is already registered
 * @retval SLUICE_ERR_STATE the server was started
 * @retval SLUICE_ERR_NOMEM out of memory */
SLUICE_API int sluice_server_add_service(sluice_server *srv,
                                         const sluice_service_desc *desc,
                                         const sluice_method_dispatch *dispatch,
                                         const void *handlers,
                                         size_t handlers_size, void *user_data);

/** Registers every method of desc as raw: requests reach dispatch
 * serialized (no protobuf decoding, no copy of a large message), responses
 * go out as the buffers the handler gives (sluice_server_call_finish_buf(),
 * sluice_server_call_send_buf()). For servers that pass messages on (proxies,
 * gateways, a middle tier of a chain) or handle payloads as bytes. The
 * methods need only path and kind: their message descriptors may be NULL.
 * Limits, admission, deadlines, compression and health are as for
 * sluice_server_add_service(). Not thread-safe: one thread, before the
 * server starts.
 * @param srv the server
 * @param desc the service table; borrowed for the server's life
 * @param dispatch called for every call of every method of desc
 * @param user_data passed to dispatch
 * @retval 0 registered
 * @retval SLUICE_ERR_INVALID_ARG srv, desc or dispatch is NULL, or a
 *   method has no path
 * @retval SLUICE_ERR_DUPLICATE a method path is already registered
 * @retval SLUICE_ERR_STATE the server was started
 * @retval SLUICE_ERR_NOMEM out of memory */
SLUICE_API int sluice_server_add_raw_service(sluice_server *srv,
                                             const sluice_service_desc *desc,
                                             sluice_raw_dispatch dispatch,
                                             void *user_data);

/** One serialized google.protobuf.FileDescriptorProto (as protoc gives
 * it to plugins), for server reflection. protoc-gen-sluice emits a static
 * table of them per service: its file and everything it imports. */
typedef struct sluice_file_descriptor {
  const unsigned char *data; /**< the serialized FileDescriptorProto */
  size_t size;               /**< its length in bytes */
} sluice_file_descriptor;

/** Gives server reflection (sluice_server_opts_set_reflection()) the
 * descriptors it describes the services with, before
 * sluice_server_start(). Generated `*_sluice_register()` functions call it
 * with their file and its imports; a file already given (by name) is
 * skipped. Without reflection this does nothing. Not thread-safe: one
 * thread, before the server starts.
 * @param srv the server
 * @param files n descriptors; the table and the bytes are borrowed for the
 *   server's life (static tables from generated code)
 * @param n how many
 * @retval 0 added (or reflection is off)
 * @retval SLUICE_ERR_INVALID_ARG srv is NULL, files is NULL with an n, or
 *   one of them does not parse as a FileDescriptorProto (none is added)
 * @retval SLUICE_ERR_STATE the server was started
 * @retval SLUICE_ERR_NOMEM out of memory */
SLUICE_API int
sluice_server_add_descriptors(sluice_server *srv,
                              const sluice_file_descriptor *files, size_t n);

/** Listens on address: "host:port" (host may be an IPv4 literal, "[v6]"
 * or a name; port 0 picks a free port) or "unix:/path" (a stale socket
 * file there is removed first; the file is removed at shutdown). The bound
 * port is stored in *port_out when non-NULL (0 for unix:). May be called
 * several times, before sluice_server_start(). The socket is bound and
 * listening when this returns.
 * @param srv the server
 * @param address where to listen
 * @param[out] port_out receives the bound port, or NULL; 0 on failure
 * @retval 0 listening
 * @retval SLUICE_ERR_INVALID_ARG srv or address is NULL
 * @retval SLUICE_ERR_BAD_ADDRESS address cannot be parsed or resolved, or
 *   bind/listen failed (the port is taken, the path is too long ...)
 * @retval SLUICE_ERR_STATE the server was started
 * @retval SLUICE_ERR_SYSTEM a socket cannot be created
 * @retval SLUICE_ERR_NOMEM out of memory */
SLUICE_API int sluice_server_listen(sluice_server *srv, const char *address,
                                    int *port_out);

/** Starts the loop threads and begins accepting.
 * @param srv the server
 * @retval 0 started
 * @retval SLUICE_ERR_INVALID_ARG srv is NULL
 * @retval SLUICE_ERR_STATE already started or nothing to listen on
 * @retval SLUICE_ERR_SYSTEM a loop or its thread cannot be created
 * @retval SLUICE_ERR_NOMEM out of memory */
SLUICE_API int sluice_server_start(sluice_server *srv);

/** Graceful shutdown: stops accepting, sends GOAWAY to every connection,
 * lets in-flight calls finish for up to grace_ms, then cancels the rest
 * (their clients see CANCELLED/UNAVAILABLE) and stops the loops. Blocks
 * until done. Thread-safe; must not be called from a handler (or any of
 * the server's loop threads). Calling it twice is harmless; before
 * sluice_server_start() it only marks the server shut down.
 * @param srv the server
 * @param grace_ms how long in-flight calls may take to finish, in ms
 * @retval 0 shut down
 * @retval SLUICE_ERR_INVALID_ARG srv is NULL */
SLUICE_API int sluice_server_shutdown(sluice_server *srv, uint64_t grace_ms);

/** Shuts down (grace 0) if still running, then frees the server. Not from
 * a handler (as sluice_server_shutdown()).
 * @param srv the server; NULL is ignored */
SLUICE_API void sluice_server_del(sluice_server *srv);

/* ---- server calls: valid from the handler until the call is finished */

/** Finishes the call with status OK and response resp (serialized before
 * return; the caller keeps ownership of resp), or with code/message when
 * code is not OK (resp is then not sent and may be NULL). message may be
 * NULL. For server-streaming and bidi methods resp may be NULL with OK (the
 * messages were sent with sluice_server_call_send()); a non-NULL resp is
 * sent as a last message. Messages already queued are sent before the
 * status. Callable from any thread, exactly once per call; after it returns
 * 0 the call handle must not be used. A call that the client cancelled or
 * whose deadline passed is answered by the library; replying to it is
 * still required and is then a harmless no-op. A resp over the max
 * response size, or one there is no memory for, finishes the call with
 * RESOURCE_EXHAUSTED instead (this still returns 0).
 * @param call the call
 * @param code the status; a number outside gRPC's 0..16 is sent as UNKNOWN
 * @param message the status message (grpc-message) of a code other than
 *   OK; copied; NULL: none
 * @param resp the response, of the method's response type, or NULL
 * @retval 0 finished
 * @retval SLUICE_ERR_INVALID_ARG call is NULL, resp is not of the method's
 *   response type (whatever the code), or OK with resp NULL on a unary or
 *   client-streaming method; the call is not finished then
 * @retval SLUICE_ERR_STATE the call was already finished */
SLUICE_API int sluice_server_call_finish(sluice_server_call *call,
                                         sluice_status_code code,
                                         const char *message,
                                         const ProtobufCMessage *resp);

/** As sluice_server_call_finish() with a serialized response: resp's bytes
 * go out as they are, without a copy, unless the call compresses its
 * responses (a compressed copy then). Works on raw and protobuf calls
 * alike; the bytes are not checked against the response type. Callable
 * from any thread, exactly once per call (counting every finish function).
 * @param call the call
 * @param code the status
 * @param message the status message of a code other than OK; copied;
 *   NULL: none
 * @param resp the serialized response, or NULL; on 0 the library owns it
 *   (also when the call was cancelled, or resp is over the max response
 *   size and the call finishes RESOURCE_EXHAUSTED instead); on an error
 *   the caller still does
 * @retval 0 finished
 * @retval SLUICE_ERR_INVALID_ARG call is NULL, or OK with resp NULL on a
 *   unary or client-streaming method; the call is not finished then
 * @retval SLUICE_ERR_STATE the call was already finished */
SLUICE_API int sluice_server_call_finish_buf(sluice_server_call *call,
                                             sluice_status_code code,
                                             const char *message,
                                             sluice_buf *resp);

/** Shorthand for sluice_server_call_finish(call, SLUICE_STATUS_OK, NULL,
 * resp).
 * @param call the call
 * @param resp the response (NULL only for server-streaming and bidi
 *   methods)
 * @return as sluice_server_call_finish() */
SLUICE_API int sluice_server_call_reply(sluice_server_call *call,
                                        const ProtobufCMessage *resp);

/* ---- streaming */

/** What a streaming server call reports to its handler. Every member may
 * be NULL. Callbacks run on the call's loop thread, one at a time; each
 * gets the call and the user_data given to
 * sluice_server_call_set_handlers(). */
typedef struct sluice_server_call_handlers {
  /** One request message (client-streaming and bidi methods), decoded; msg
   * is owned by the library and freed when the callback returns.
   * @param call the call
   * @param msg the message, of the method's request type (cast it)
   * @param user_data as given to sluice_server_call_set_handlers() */
  void (*on_message)(sluice_server_call *call, const ProtobufCMessage *msg,
                     void *user_data);
  /** The client half-closed: no more messages will come.
   * @param call the call
   * @param user_data as given to sluice_server_call_set_handlers() */
  void (*on_half_close)(sluice_server_call *call, void *user_data);
  /** sluice_server_call_send() returned SLUICE_ERR_FULL earlier and the
   * send queue has drained below half of its bound: send again.
   * @param call the call
   * @param user_data as given to sluice_server_call_set_handlers() */
  void (*on_send_ready)(sluice_server_call *call, void *user_data);
  /** Exactly once, last: the stream is over. cancelled is 0 only when the
   * handler's finish decided the status and it was sent; 1 when the call
   * ended any other way: its deadline passed (the library answered
   * DEADLINE_EXCEEDED), the client cancelled or reset it, the connection
   * died or the server shut down, or the library failed the request (too
   * large, undecodable). One rule for every kind of method. The handle
   * stays valid until this returns; finish must still be called once if
   * it was not.
   * @param call the call
   * @param cancelled 0 or 1, as above
   * @param user_data as given to sluice_server_call_set_handlers() */
  void (*on_done)(sluice_server_call *call, int cancelled, void *user_data);
} sluice_server_call_handlers;

/** Registers the handler's callbacks for this call (handlers is copied).
 * Request messages received before this are held (within the receive
 * bound) and delivered after it. Callable once, from any thread, before
 * finish.
 * @param call the call
 * @param h the callbacks; copied
 * @param user_data passed to every callback
 * @retval 0 registered
 * @retval SLUICE_ERR_INVALID_ARG call or h is NULL
 * @retval SLUICE_ERR_STATE already set, or the call was finished */
SLUICE_API int
sluice_server_call_set_handlers(sluice_server_call *call,
                                const sluice_server_call_handlers *h,
                                void *user_data);

/** What a raw streaming call reports (sluice_server_add_raw_service()):
 * as sluice_server_call_handlers, except that request messages arrive
 * serialized. */
typedef struct sluice_server_call_raw_handlers {
  /** One request message, not decoded (uncompressed if it came
   * compressed); msg is the callee's (free it, keep it or pass it on).
   * NULL here: messages are dropped.
   * @param call the call
   * @param msg the serialized message; owned by the callee
   * @param user_data as given to sluice_server_call_set_raw_handlers() */
  void (*on_message)(sluice_server_call *call, sluice_buf *msg,
                     void *user_data);
  /** As sluice_server_call_handlers.on_half_close. */
  void (*on_half_close)(sluice_server_call *call, void *user_data);
  /** As sluice_server_call_handlers.on_send_ready. */
  void (*on_send_ready)(sluice_server_call *call, void *user_data);
  /** As sluice_server_call_handlers.on_done. */
  void (*on_done)(sluice_server_call *call, int cancelled, void *user_data);
} sluice_server_call_raw_handlers;

/** sluice_server_call_set_handlers() for a call of a raw service: the same
 * rules (copied, once, any thread, held messages delivered after it).
 * @param call the call, of a method registered with
 *   sluice_server_add_raw_service()
 * @param h the callbacks; copied
 * @param user_data passed to every callback
 * @retval 0 registered
 * @retval SLUICE_ERR_INVALID_ARG call or h is NULL, or the call is not raw
 * @retval SLUICE_ERR_STATE already set, or the call was finished */
SLUICE_API int
sluice_server_call_set_raw_handlers(sluice_server_call *call,
                                    const sluice_server_call_raw_handlers *h,
                                    void *user_data);

/** For generated typed stubs: the user's typed callbacks, each cast to
 * sluice_generic_fn (NULL where not set), and the user's user_data. The
 * members follow sluice_server_call_handlers.
 * sluice_server_call_set_handlers_typed() copies it into the call object;
 * each trampoline then receives a pointer to that copy as its user_data,
 * casts its member back to the typed callback's type and calls it with the
 * typed message and this user_data. */
typedef struct sluice_server_call_typed_handlers {
  sluice_generic_fn on_message;    /**< the typed on_message */
  sluice_generic_fn on_half_close; /**< the typed on_half_close */
  sluice_generic_fn on_send_ready; /**< the typed on_send_ready */
  sluice_generic_fn on_done;       /**< the typed on_done */
  void *user_data; /**< what the typed callbacks get as user_data */
} sluice_server_call_typed_handlers;

/** As sluice_server_call_set_handlers(), for generated typed stubs: tramps
 * are the stub's trampolines, called by the runtime as any
 * sluice_server_call_handlers are; *typed is copied into the call object
 * (no allocation of its own), and every trampoline gets a pointer to that
 * copy as its user_data, valid until on_done returns. Callable once (this
 * or sluice_server_call_set_handlers()), from any thread, before finish.
 * @param call the call
 * @param tramps the trampolines; copied
 * @param typed the typed callbacks and their user_data; copied
 * @retval 0 registered
 * @retval SLUICE_ERR_INVALID_ARG call, tramps or typed is NULL
 * @retval SLUICE_ERR_STATE already set, or the call was finished */
SLUICE_API int sluice_server_call_set_handlers_typed(
    sluice_server_call *call, const sluice_server_call_handlers *tramps,
    const sluice_server_call_typed_handlers *typed);

/** Queues a response message (server-streaming and bidi methods;
 * serialized and maybe compressed on the caller's thread; the caller keeps
 * msg). Thread-safe.
 * @param call the call
 * @param msg the response, of the method's response type
 * @retval 0 queued
 * @retval SLUICE_ERR_INVALID_ARG call or msg is NULL, or msg is not of the
 *   method's response type
 * @retval SLUICE_ERR_FULL the queue holds the send buffer bound: wait for
 *   on_send_ready; nothing queued
 * @retval SLUICE_ERR_STATE finished, cancelled, or not a streaming-response
 *   method
 * @retval SLUICE_ERR_TOO_LARGE over the max response size; nothing sent,
 *   the call goes on
 * @retval SLUICE_ERR_NOMEM out of memory (SLUICE_ERR_SYSTEM when zlib
 *   cannot start compressing); nothing queued */
SLUICE_API int sluice_server_call_send(sluice_server_call *call,
                                       const ProtobufCMessage *msg);
/** As sluice_server_call_send() with flags. Thread-safe.
 * @param call the call
 * @param msg the response, of the method's response type
 * @param flags 0 or SLUICE_SEND_NO_COMPRESS; other bits are ignored
 * @return as sluice_server_call_send() */
SLUICE_API int sluice_server_call_send_ex(sluice_server_call *call,
                                          const ProtobufCMessage *msg,
                                          unsigned flags);

/** As sluice_server_call_send() with a serialized message: msg's bytes go
 * out as they are, without a copy, unless the call compresses (a
 * compressed copy then). Raw and protobuf calls alike. Thread-safe.
 * @param call the call
 * @param msg the serialized response; on 0 the library owns it; on an
 *   error the caller still does
 * @retval 0 queued
 * @retval SLUICE_ERR_INVALID_ARG call or msg is NULL
 * @return otherwise as sluice_server_call_send() */
SLUICE_API int sluice_server_call_send_buf(sluice_server_call *call,
                                           sluice_buf *msg);
/** As sluice_server_call_send_buf() with flags. Thread-safe.
 * @param call the call
 * @param msg the serialized response; owned by the library on 0 only
 * @param flags 0 or SLUICE_SEND_NO_COMPRESS; other bits are ignored
 * @return as sluice_server_call_send_buf() */
SLUICE_API int sluice_server_call_send_buf_ex(sluice_server_call *call,
                                              sluice_buf *msg, unsigned flags);

/** Pauses (paused != 0) or resumes delivery of request messages; while
 * paused the client is held back by HTTP/2 flow control, so at most one
 * stream window (SLUICE_STREAM_WINDOW) plus one message is buffered.
 * Thread-safe; called from on_message it takes effect at once.
 * @param call the call
 * @param paused non-zero to pause, 0 to resume
 * @retval 0 done
 * @retval SLUICE_ERR_INVALID_ARG call is NULL */
SLUICE_API int sluice_server_call_set_recv_paused(sluice_server_call *call,
                                                  int paused);

/** Compresses the response messages of this call (before the first one
 * is sent; default none). The client's grpc-accept-encoding is honoured:
 * if it does not list gzip, messages go uncompressed. Thread-safe.
 * @param call the call
 * @param c SLUICE_COMPRESS_GZIP or SLUICE_COMPRESS_NONE
 * @retval 0 set
 * @retval SLUICE_ERR_INVALID_ARG call is NULL or c is not a
 *   sluice_compression value
 * @retval SLUICE_ERR_STATE the response headers were already sent */
SLUICE_API int sluice_server_call_set_compression(sluice_server_call *call,
                                                  sluice_compression c);

/** Whether the most recent request message (the unary/server-streaming
 * request, or the one inside on_message) arrived compressed.
 * @param call the call
 * @return non-zero when it was compressed; 0 when not, or for NULL */
SLUICE_API int
sluice_server_call_message_compressed(const sluice_server_call *call);

/** The most bytes of request data held at once for this call (see
 * sluice_server_call_set_recv_paused()). Thread-safe.
 * @param call the call
 * @return the high-water mark in bytes; 0 for NULL */
SLUICE_API size_t
sluice_server_call_recv_buffered_max(const sluice_server_call *call);

/** Adds metadata to send with the response headers (before finish only;
 * copied). Same key rules as sluice_metadata_add(). Add it before the
 * first response message is sent: the headers go out with it (or with
 * the status). Thread-safe: any thread, like send and finish, also while
 * the library ends the call.
 * @param call the call
 * @param key the key; copied
 * @param value the value's bytes; copied
 * @param len the value's length
 * @retval 0 added
 * @retval SLUICE_ERR_INVALID_ARG call is NULL
 * @retval SLUICE_ERR_STATE too late, nothing added: the headers were sent,
 *   or the call is over (finished, its deadline passed, the client
 *   cancelled, the connection died or the server shut down)
 * @return otherwise what sluice_metadata_add() returns for key and value
 *   (0, or its error: nothing added) */
SLUICE_API int sluice_server_call_add_initial_metadata(sluice_server_call *call,
                                                       const char *key,
                                                       const void *value,
                                                       size_t len);
/** Adds metadata to send with the trailers (before finish only; copied).
 * Same key rules as sluice_metadata_add(), with one exception: the key
 * "grpc-retry-pushback-ms" is accepted, the server's retry pushback of
 * gRFC A6 ("-1": the client must not retry; "250": retry after 250 ms;
 * gRPC clients honour it on a retryable status). Thread-safe: any thread, like
 * send and finish, also while the library ends the call; the trailers the
 * library sends itself (DEADLINE_EXCEEDED, ...) carry what was added.
 * @param call the call
 * @param key the key; copied
 * @param value the value's bytes; copied
 * @param len the value's length
 * @retval 0 added
 * @retval SLUICE_ERR_INVALID_ARG call is NULL
 * @retval SLUICE_ERR_STATE too late, nothing added: the final status is
 *   decided (finish was called, the deadline passed, the client cancelled,
 *   the connection died or the server shut down)
 * @return otherwise what sluice_metadata_add() returns for key and value
 *   (0, or its error: nothing added) */
SLUICE_API int sluice_server_call_add_trailing_metadata(
    sluice_server_call *call, const char *key, const void *value, size_t len);

/** The client's custom metadata (borrowed; valid until finish).
 * The entries are in the order received, :authority and user-agent
 * included when the client sent them. Any thread. When the client sent
 * nothing beyond those two, the first call makes the list (out of memory:
 * an empty one); a call whose handler never asks costs none.
 * @param call the call
 * @return the metadata list, never NULL for a call (empty when the client
 *   sent none); NULL for a NULL call */
SLUICE_API const sluice_metadata *
sluice_server_call_metadata(const sluice_server_call *call);
/** Tells the server how hard the services this call's handler depends on
 * push back now: 0 free, 1 at their limits (they refuse or queue calls).
 * The server's load report carries it (named metric "downstream", see
 * sluice_server_opts_set_load_report()), so the back-pressure of a chain's
 * bottleneck reaches the chain's edge, which drops early what cannot be
 * served instead of every tier doing part of the work. sluice channels
 * call it themselves for every call started with
 * sluice_call_opts_set_parent(call); an application that depends on other
 * back-ends (a database pool, a non-sluice client) may report their
 * pressure the same way. The server reports the largest figure its calls
 * noted in the last 100-200 ms (it is as pressed as its most pressed
 * downstream service), none once nothing was noted for that long. Any
 * thread, until the call is freed (its finish).
 * @param call the call whose handler depends on the downstream service
 * @param pressure 0..1; values outside are clamped
 * @retval 0 noted
 * @retval SLUICE_ERR_INVALID_ARG call is NULL or pressure is NaN */
SLUICE_API int
sluice_server_call_report_downstream(const sluice_server_call *call,
                                     double pressure);

/** Absolute deadline on sluice_now_ns()'s clock. Any thread.
 * @param call the call
 * @return the deadline in ns; 0 when the client sent none, or for NULL */
SLUICE_API uint64_t sluice_server_call_deadline(const sluice_server_call *call);
/** Peer address, `ipv4:1.2.3.4:5678`, `ipv6:[::1]:5678` or `unix:`
 * (borrowed; valid until finish). Any thread.
 * @param call the call
 * @return the address; NULL for a NULL call */
SLUICE_API const char *sluice_server_call_peer(const sluice_server_call *call);
/** The method being called (static table). Any thread.
 * @param call the call
 * @return the method's table entry; NULL for a NULL call */
SLUICE_API const sluice_method_desc *
sluice_server_call_method(const sluice_server_call *call);
/** Whether the client cancelled, the deadline passed or the connection
 * died: the reply will be discarded (finish is still owed). Thread-safe.
 * @param call the call
 * @return non-zero once that happened; 0 while the call is live; 1 for
 *   NULL */
SLUICE_API int sluice_server_call_is_cancelled(const sluice_server_call *call);

/** The reason the last sluice_server_opts_set_tls() (sluice/tls.h) on these
 * options failed (SLUICE_ERR_TLS, or SLUICE_ERR_INVALID_ARG for an incomplete
 * configuration); "" if none, or after one succeeded.
 * @param o the options
 * @return the text, borrowed: valid until the options change or are freed;
 *   "" for NULL */
SLUICE_API const char *
sluice_server_opts_last_error(const sluice_server_opts *o);

/** The verified client certificate's subject of a mutual-TLS call
 * ("CN=client,O=..." in RFC 2253 form). Any thread.
 * @param call the server call
 * @return the subject, borrowed: valid until the call is finished; NULL
 *   for a plaintext call, a client without a certificate, or a NULL call */
SLUICE_API const char *
sluice_server_call_peer_identity(const sluice_server_call *call);

#ifdef __cplusplus
}
#endif
#endif
