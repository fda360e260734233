/* sluice: servers.
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

#include "sluice/call.h"
#include "sluice/clock.h"
#include "sluice/metadata.h"
#include "sluice/method.h"
#include "sluice/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sluice_server sluice_server;
typedef struct sluice_server_opts sluice_server_opts;
typedef struct sluice_server_call sluice_server_call;

/* Generic dispatch of one method, emitted by protoc-gen-sluice: casts req to
 * the method's request type and calls the user's typed handler found in
 * handlers (the service's handler struct, as registered).
 * Unary and server-streaming methods are dispatched once their single
 * request message has arrived (req is it); client-streaming and bidi methods
 * as soon as the request headers have (req is NULL: messages come through
 * sluice_server_call_set_handlers). */
typedef void (*sluice_unary_dispatch)(sluice_server_call *call,
                                      const ProtobufCMessage *req,
                                      const void *handlers, void *user_data);

/* ---- options */

/* Creates server options with defaults in *out (free with
 * sluice_server_opts_del). Returns 0, SLUICE_ERR_INVALID_ARG or
 * SLUICE_ERR_NOMEM. */
SLUICE_API int sluice_server_opts_new(sluice_server_opts **out);
/* Frees options. NULL is ignored. */
SLUICE_API void sluice_server_opts_del(sluice_server_opts *o);
/* Number of loop threads; 0 = one per core (default). */
SLUICE_API int sluice_server_opts_set_threads(sluice_server_opts *o,
                                              unsigned n);
/* Largest request message accepted (default 4 MiB); larger ones fail with
 * RESOURCE_EXHAUSTED. */
SLUICE_API int sluice_server_opts_set_max_request_size(sluice_server_opts *o,
                                                       uint32_t bytes);
/* Largest response message sent (default unlimited). */
SLUICE_API int sluice_server_opts_set_max_response_size(sluice_server_opts *o,
                                                        uint32_t bytes);
/* SETTINGS_MAX_CONCURRENT_STREAMS announced per connection (default 1000).
 */
SLUICE_API int
sluice_server_opts_set_max_concurrent_streams(sluice_server_opts *o,
                                              uint32_t n);
/* Bound of each call's response send queue in bytes (default
 * SLUICE_DEFAULT_SEND_BUFFER); see sluice_server_call_send. */
SLUICE_API int sluice_server_opts_set_send_buffer(sluice_server_opts *o,
                                                  uint32_t bytes);

/* ---- admission: concurrency limits, queueing, shedding, load report
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
 * wait that long; sluice clients see it in sluice_status.trailing_md). */

/* At most n calls in flight in the whole server, across all loops; 0 (the
 * default) = no limit. Returns 0 or SLUICE_ERR_INVALID_ARG (n > INT32_MAX).
 */
SLUICE_API int
sluice_server_opts_set_max_concurrent_calls(sluice_server_opts *o, uint32_t n);

/* At most n calls of the method path ("/package.Service/Method", copied) in
 * flight; 0 removes the limit. Several methods may have limits; setting a
 * path again replaces its limit. A call waits until both its method and the
 * server have a free slot; a waiting call held back only by its method's
 * limit does not hold up calls of other methods. A path that is never
 * registered is ignored. Returns 0, SLUICE_ERR_INVALID_ARG (path NULL or
 * not starting with '/') or SLUICE_ERR_NOMEM. */
SLUICE_API int sluice_server_opts_set_method_max_concurrent_calls(
    sluice_server_opts *o, const char *path, uint32_t n);

/* At most n calls waiting for a slot, server-wide (default 1000). A call
 * over a limit that finds the queue full is refused at once:
 * RESOURCE_EXHAUSTED "server queue full (n)", with grpc-retry-pushback-ms
 * = the current backlog (the oldest wait, or the recent mean queue time;
 * at least 10 ms). 0 = no queue: a call over a limit is refused at once.
 * Only matters when a concurrency limit is set. Returns 0 or
 * SLUICE_ERR_INVALID_ARG. */
SLUICE_API int sluice_server_opts_set_max_queue(sluice_server_opts *o,
                                                uint32_t n);

/* Sheds waiting calls on queue time, the CoDel way (RFC 8289): once the
 * queue time of the oldest waiting call has stayed above target_ms for
 * interval_ms, that call is answered RESOURCE_EXHAUSTED ("shed by server:
 * queued 12 ms > target 5 ms", grpc-retry-pushback-ms = interval_ms), and
 * further ones every interval_ms / sqrt(count) while the queue time stays
 * above target. A typical setting is 5 / 100. target_ms 0 (the default)
 * turns it off. Acts on the admission queue, so it needs a concurrency
 * limit. Returns 0 or SLUICE_ERR_INVALID_ARG (interval 0 with a target, or
 * either above one hour). */
SLUICE_API int sluice_server_opts_set_codel(sluice_server_opts *o,
                                            uint32_t target_ms,
                                            uint32_t interval_ms);

/* Load report in every response's trailers (on by default; on 0 turns it
 * off; see also sluice_server_opts_set_load_report_interval):
 * `endpoint-load-metrics-bin`, a serialized ORCA
 * xds.data.orca.v3.OrcaLoadReport with
 *   cpu_utilization  in-flight calls / max concurrent calls (a
 *                    concurrency utilization, not a CPU measurement);
 *                    only with sluice_server_opts_set_max_concurrent_calls:
 *                    without a limit the library cannot know how busy the
 *                    handlers are,
 *   application_utilization
 *                    the application's own figure, when it gives one
 *                    (sluice_server_set_utilization),
 *   rps_fractional   handlers finished per second over the last ~1 s
 *                    window (0 until the first window has passed),
 *   named_metrics    "queue_ms": mean queue time of the calls that left the
 *                    queue in the last window (0 without limits),
 *                    "in_flight": calls in flight now.
 * Clients that do not know the trailer ignore it. Returns 0 or
 * SLUICE_ERR_INVALID_ARG. */
SLUICE_API int sluice_server_opts_set_load_report(sluice_server_opts *o,
                                                  int on);

/* Sends the load report at most once per ms milliseconds on each
 * connection (the first response of a connection and every shed or
 * refused call still carry it); 0 = on every response. Default 10 ms: the
 * report costs about 90 bytes per response (kept out of the HPACK table:
 * its value changes) and some CPU, and every response was ~10-15 % of
 * small-message throughput; one per 10 ms keeps the signal fresh for a
 * client's load balancer at no measurable cost. Returns 0 or
 * SLUICE_ERR_INVALID_ARG (above one hour). */
SLUICE_API int
sluice_server_opts_set_load_report_interval(sluice_server_opts *o, uint32_t ms);

/* ---- server */

/* The application's own measure of how busy this server is: 0 idle, 1 at
 * capacity, above 1 overloaded (e.g. (busy workers + queued jobs) /
 * workers). Sent to clients as ORCA application_utilization in the load
 * report, where sluice's balancers prefer it to cpu_utilization: a server
 * that queues work outside the library (its own worker pool) should give
 * it, or clients cannot tell a saturated server from an idle one. A
 * negative value withdraws it. Thread-safe and cheap (one atomic store):
 * call it whenever the figure changes. Returns 0 or SLUICE_ERR_INVALID_ARG
 * (srv NULL, utilization NaN). */
SLUICE_API int sluice_server_set_utilization(sluice_server *srv,
                                             double utilization);

/* Creates a server (not yet listening) in *out. opts may be NULL; it is read
 * during the call and not kept. Returns 0, SLUICE_ERR_INVALID_ARG or
 * SLUICE_ERR_NOMEM. */
SLUICE_API int sluice_server_new(sluice_server **out,
                                 const sluice_server_opts *opts);

/* Registers a service before sluice_server_start(). desc is borrowed (static
 * tables from generated code); dispatch has desc->n_methods entries (NULL for
 * a method without a handler: it answers UNIMPLEMENTED); handlers_size bytes
 * of handlers are copied; user_data is passed to every handler.
 * Returns 0, SLUICE_ERR_INVALID_ARG, SLUICE_ERR_DUPLICATE (a method path is
 * already registered), SLUICE_ERR_STATE (server started) or SLUICE_ERR_NOMEM.
 * Generated code wraps this as <package>__<service>__sluice_register(). */
SLUICE_API int sluice_server_add_service(sluice_server *srv,
                                         const sluice_service_desc *desc,
                                         const sluice_unary_dispatch *dispatch,
                                         const void *handlers,
                                         size_t handlers_size, void *user_data);

/* Listens on address: "host:port" (host may be an IPv4 literal, "[v6]" or a
 * name; port 0 picks a free port) or "unix:/path". The bound port is stored
 * in *port_out when non-NULL (0 for unix:). May be called several times,
 * before sluice_server_start(). Returns 0, SLUICE_ERR_INVALID_ARG,
 * SLUICE_ERR_BAD_ADDRESS, SLUICE_ERR_STATE or SLUICE_ERR_SYSTEM. */
SLUICE_API int sluice_server_listen(sluice_server *srv, const char *address,
                                    int *port_out);

/* Starts the loop threads and begins accepting. Returns 0, SLUICE_ERR_STATE
 * (already started or nothing to listen on) or SLUICE_ERR_SYSTEM. */
SLUICE_API int sluice_server_start(sluice_server *srv);

/* Graceful shutdown: stops accepting, sends GOAWAY to every connection, lets
 * in-flight calls finish for up to grace_ms, then cancels the rest (their
 * clients see CANCELLED/UNAVAILABLE) and stops the loops. Blocks until done.
 * Thread-safe; must not be called from a handler. Calling it twice is
 * harmless. Returns 0 or SLUICE_ERR_INVALID_ARG. */
SLUICE_API int sluice_server_shutdown(sluice_server *srv, uint64_t grace_ms);

/* Shuts down (grace 0) if still running, then frees the server. NULL is
 * ignored. */
SLUICE_API void sluice_server_del(sluice_server *srv);

/* ---- server calls: valid from the handler until the call is finished */

/* Finishes the call with status OK and response resp (serialized before
 * return; the caller keeps ownership of resp), or with code/message when code
 * is not OK (resp is then ignored and may be NULL). message may be NULL.
 * For server-streaming and bidi methods resp may be NULL with OK (the
 * messages were sent with sluice_server_call_send); a non-NULL resp is sent
 * as a last message. Messages already queued are sent before the status.
 * Callable from any thread, exactly once per call; after it returns the call
 * handle must not be used. Returns 0, SLUICE_ERR_INVALID_ARG (call NULL, OK
 * with resp NULL or of the wrong type). A call that the client cancelled or
 * whose deadline passed is answered by the library; replying to it is still
 * required and is then a harmless no-op. */
SLUICE_API int sluice_server_call_finish(sluice_server_call *call,
                                         sluice_status_code code,
                                         const char *message,
                                         const ProtobufCMessage *resp);

/* Shorthand for sluice_server_call_finish(call, SLUICE_STATUS_OK, NULL,
 * resp). */
SLUICE_API int sluice_server_call_reply(sluice_server_call *call,
                                        const ProtobufCMessage *resp);

/* ---- streaming */

/* What a streaming server call reports to its handler. Every member may be
 * NULL. Callbacks run on the call's loop thread, one at a time. */
typedef struct sluice_server_call_handlers {
  /* One request message (client-streaming and bidi methods), decoded; msg
   * is owned by the library and freed when the callback returns. */
  void (*on_message)(sluice_server_call *call, const ProtobufCMessage *msg,
                     void *user_data);
  /* The client half-closed: no more messages will come. */
  void (*on_half_close)(sluice_server_call *call, void *user_data);
  /* sluice_server_call_send returned SLUICE_ERR_FULL earlier and the send
   * queue has drained below half of its bound: send again. */
  void (*on_send_ready)(sluice_server_call *call, void *user_data);
  /* Exactly once, last: the stream is over — the status was sent
   * (cancelled 0) or the client cancelled, the deadline passed or the
   * connection died (cancelled 1). The handle stays valid until this
   * returns; finish must still be called once if it was not. */
  void (*on_done)(sluice_server_call *call, int cancelled, void *user_data);
} sluice_server_call_handlers;

/* Registers the handler's callbacks for this call (handlers is copied).
 * Request messages received before this are held (within the receive bound)
 * and delivered after it. Callable once, from any thread, before finish.
 * Returns 0, SLUICE_ERR_INVALID_ARG or SLUICE_ERR_STATE (already set, or
 * the call was finished). */
SLUICE_API int
sluice_server_call_set_handlers(sluice_server_call *call,
                                const sluice_server_call_handlers *h,
                                void *user_data);

/* Queues a response message (server-streaming and bidi methods; serialized
 * and maybe compressed on the caller's thread; the caller keeps msg).
 * Thread-safe. Returns 0, SLUICE_ERR_INVALID_ARG, SLUICE_ERR_FULL (the queue
 * holds the send buffer bound: wait for on_send_ready; nothing queued),
 * SLUICE_ERR_STATE (finished, cancelled, or not a streaming-response
 * method), SLUICE_ERR_TOO_LARGE (over the max response size; nothing sent)
 * or SLUICE_ERR_NOMEM. */
SLUICE_API int sluice_server_call_send(sluice_server_call *call,
                                       const ProtobufCMessage *msg);
/* As sluice_server_call_send with flags (SLUICE_SEND_NO_COMPRESS). */
SLUICE_API int sluice_server_call_send_ex(sluice_server_call *call,
                                          const ProtobufCMessage *msg,
                                          unsigned flags);

/* Pauses (paused != 0) or resumes delivery of request messages; while
 * paused the client is held back by HTTP/2 flow control, so at most one
 * stream window (SLUICE_STREAM_WINDOW) plus one message is buffered.
 * Thread-safe. Returns 0 or SLUICE_ERR_INVALID_ARG. */
SLUICE_API int sluice_server_call_set_recv_paused(sluice_server_call *call,
                                                  int paused);

/* Compresses the response messages of this call (before the first one is
 * sent; default none). The client's grpc-accept-encoding is honoured: if
 * it does not list gzip, messages go uncompressed. Thread-safe. Returns 0,
 * SLUICE_ERR_INVALID_ARG or SLUICE_ERR_STATE (headers already sent). */
SLUICE_API int sluice_server_call_set_compression(sluice_server_call *call,
                                                  sluice_compression c);

/* Non-zero when the most recent request message (the unary/server-streaming
 * request, or the one inside on_message) arrived compressed. */
SLUICE_API int
sluice_server_call_message_compressed(const sluice_server_call *call);

/* The most bytes of request data held at once for this call (see
 * sluice_server_call_set_recv_paused). */
SLUICE_API size_t
sluice_server_call_recv_buffered_max(const sluice_server_call *call);

/* Adds metadata to send with the response headers (before finish only;
 * copied). Same key rules as sluice_metadata_add. */
SLUICE_API int sluice_server_call_add_initial_metadata(sluice_server_call *call,
                                                       const char *key,
                                                       const void *value,
                                                       size_t len);
/* Adds metadata to send with the trailers (before finish only; copied). */
SLUICE_API int sluice_server_call_add_trailing_metadata(
    sluice_server_call *call, const char *key, const void *value, size_t len);

/* The client's custom metadata (borrowed; valid until finish). Never NULL. */
SLUICE_API const sluice_metadata *
sluice_server_call_metadata(const sluice_server_call *call);
/* Absolute deadline on sluice_now_ns()'s clock; 0 when the client sent
 * none. */
SLUICE_API uint64_t sluice_server_call_deadline(const sluice_server_call *call);
/* Peer address, "ipv4:1.2.3.4:5678", "ipv6:[::1]:5678" or "unix:" (borrowed;
 * valid until finish). */
SLUICE_API const char *sluice_server_call_peer(const sluice_server_call *call);
/* The method being called (static table). */
SLUICE_API const sluice_method_desc *
sluice_server_call_method(const sluice_server_call *call);
/* Non-zero once the client cancelled, the deadline passed or the connection
 * died: the reply will be discarded. Thread-safe. */
SLUICE_API int sluice_server_call_is_cancelled(const sluice_server_call *call);

#ifdef __cplusplus
}
#endif
#endif
