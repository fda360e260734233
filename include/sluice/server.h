/* sluice: servers.
 *
 * Threads: a server runs N loops (default: one per core), each on its own
 * thread; accepted connections are handed to loops round robin. A handler
 * runs on the loop of its connection. It may reply at once or later from any
 * thread: replies cross to the loop through a queue.
 */
#ifndef SLUICE_SERVER_H
#define SLUICE_SERVER_H

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

typedef struct sluice_server sluice_server;
typedef struct sluice_server_opts sluice_server_opts;
typedef struct sluice_server_call sluice_server_call;

/* Generic dispatch of one unary method, emitted by protoc-gen-sluice: casts
 * req to the method's request type and calls the user's typed handler found
 * in handlers (the service's handler struct, as registered). */
typedef void (*sluice_unary_dispatch)(sluice_server_call *call,
                                      const ProtobufCMessage *req,
                                      const void *handlers, void *user_data);

/* ---- options */

/* Creates server options with defaults in *out (free with
 * sluice_server_opts_del). Returns 0, SLUICE_ERR_INVALID_ARG or
 * SLUICE_ERR_NOMEM. */
int sluice_server_opts_new(sluice_server_opts **out);
/* Frees options. NULL is ignored. */
void sluice_server_opts_del(sluice_server_opts *o);
/* Number of loop threads; 0 = one per core (default). */
int sluice_server_opts_set_threads(sluice_server_opts *o, unsigned n);
/* Largest request message accepted (default 4 MiB); larger ones fail with
 * RESOURCE_EXHAUSTED. */
int sluice_server_opts_set_max_request_size(sluice_server_opts *o,
                                            uint32_t bytes);
/* Largest response message sent (default unlimited). */
int sluice_server_opts_set_max_response_size(sluice_server_opts *o,
                                             uint32_t bytes);
/* SETTINGS_MAX_CONCURRENT_STREAMS announced per connection (default 1000).
 */
int sluice_server_opts_set_max_concurrent_streams(sluice_server_opts *o,
                                                  uint32_t n);

/* ---- server */

/* Creates a server (not yet listening) in *out. opts may be NULL; it is read
 * during the call and not kept. Returns 0, SLUICE_ERR_INVALID_ARG or
 * SLUICE_ERR_NOMEM. */
int sluice_server_new(sluice_server **out, const sluice_server_opts *opts);

/* Registers a service before sluice_server_start(). desc is borrowed (static
 * tables from generated code); dispatch has desc->n_methods entries (NULL for
 * a method without a handler: it answers UNIMPLEMENTED); handlers_size bytes
 * of handlers are copied; user_data is passed to every handler.
 * Returns 0, SLUICE_ERR_INVALID_ARG, SLUICE_ERR_DUPLICATE (a method path is
 * already registered), SLUICE_ERR_STATE (server started) or SLUICE_ERR_NOMEM.
 * Generated code wraps this as <package>__<service>__sluice_register(). */
int sluice_server_add_service(sluice_server *srv,
                              const sluice_service_desc *desc,
                              const sluice_unary_dispatch *dispatch,
                              const void *handlers, size_t handlers_size,
                              void *user_data);

/* Listens on address: "host:port" (host may be an IPv4 literal, "[v6]" or a
 * name; port 0 picks a free port) or "unix:/path". The bound port is stored
 * in *port_out when non-NULL (0 for unix:). May be called several times,
 * before sluice_server_start(). Returns 0, SLUICE_ERR_INVALID_ARG,
 * SLUICE_ERR_BAD_ADDRESS, SLUICE_ERR_STATE or SLUICE_ERR_SYSTEM. */
int sluice_server_listen(sluice_server *srv, const char *address,
                         int *port_out);

/* Starts the loop threads and begins accepting. Returns 0, SLUICE_ERR_STATE
 * (already started or nothing to listen on) or SLUICE_ERR_SYSTEM. */
int sluice_server_start(sluice_server *srv);

/* Graceful shutdown: stops accepting, sends GOAWAY to every connection, lets
 * in-flight calls finish for up to grace_ms, then cancels the rest (their
 * clients see CANCELLED/UNAVAILABLE) and stops the loops. Blocks until done.
 * Thread-safe; must not be called from a handler. Calling it twice is
 * harmless. Returns 0 or SLUICE_ERR_INVALID_ARG. */
int sluice_server_shutdown(sluice_server *srv, uint64_t grace_ms);

/* Shuts down (grace 0) if still running, then frees the server. NULL is
 * ignored. */
void sluice_server_del(sluice_server *srv);

/* ---- server calls: valid from the handler until the call is finished */

/* Finishes the call with status OK and response resp (serialized before
 * return; the caller keeps ownership of resp), or with code/message when code
 * is not OK (resp is then ignored and may be NULL). message may be NULL.
 * Callable from any thread, exactly once per call; after it returns the call
 * handle must not be used. Returns 0, SLUICE_ERR_INVALID_ARG (call NULL, OK
 * with resp NULL or of the wrong type). A call that the client cancelled or
 * whose deadline passed is answered by the library; replying to it is still
 * required and is then a harmless no-op. */
int sluice_server_call_finish(sluice_server_call *call, sluice_status_code code,
                              const char *message,
                              const ProtobufCMessage *resp);

/* Shorthand for sluice_server_call_finish(call, SLUICE_STATUS_OK, NULL,
 * resp). */
int sluice_server_call_reply(sluice_server_call *call,
                             const ProtobufCMessage *resp);

/* Adds metadata to send with the response headers (before finish only;
 * copied). Same key rules as sluice_metadata_add. */
int sluice_server_call_add_initial_metadata(sluice_server_call *call,
                                            const char *key, const void *value,
                                            size_t len);
/* Adds metadata to send with the trailers (before finish only; copied). */
int sluice_server_call_add_trailing_metadata(sluice_server_call *call,
                                             const char *key, const void *value,
                                             size_t len);

/* The client's custom metadata (borrowed; valid until finish). Never NULL. */
const sluice_metadata *
sluice_server_call_metadata(const sluice_server_call *call);
/* Absolute deadline on sluice_now_ns()'s clock; 0 when the client sent
 * none. */
uint64_t sluice_server_call_deadline(const sluice_server_call *call);
/* Peer address, "ipv4:1.2.3.4:5678", "ipv6:[::1]:5678" or "unix:" (borrowed;
 * valid until finish). */
const char *sluice_server_call_peer(const sluice_server_call *call);
/* The method being called (static table). */
const sluice_method_desc *
sluice_server_call_method(const sluice_server_call *call);
/* Non-zero once the client cancelled, the deadline passed or the connection
 * died: the reply will be discarded. Thread-safe. */
int sluice_server_call_is_cancelled(const sluice_server_call *call);

#ifdef __cplusplus
}
#endif
#endif
