/** @file
 * sluice: client calls of every kind (unary, client-, server- and
 * bidirectional streaming) through one handle.
 *
 * A call is started with sluice_call_start(); messages are sent with
 * sluice_call_send() and the sending side is closed with
 * sluice_call_close_send(); each response message reaches
 * handlers->on_message; handlers->on_done fires exactly once with the final
 * status. Callbacks run on the channel's loop thread; send, close_send,
 * cancel, set_recv_paused and release may be called from any thread.
 *
 * Handle lifetime: the caller owns one reference to the handle from
 * sluice_call_start() until sluice_call_release(). The handle stays valid
 * (all functions may be called; after on_done sluice_call_send() and
 * sluice_call_close_send() return SLUICE_ERR_STATE, sluice_call_cancel()
 * and sluice_call_set_recv_paused() return 0 and do nothing) until
 * released, even after on_done. Releasing a call does not stop it;
 * cancel first if that is wanted. Callbacks keep firing after release until
 * on_done.
 *
 * Flow control, both ways, with bounded memory:
 *  - Sending: messages are serialized (and compressed) on the caller's thread
 *    and queued for the loop. When the queue holds send_buffer bytes (call
 *    option, default SLUICE_DEFAULT_SEND_BUFFER) sluice_call_send() refuses
 *    with SLUICE_ERR_FULL and queues nothing; on_send_ready fires once the
 *    queue has drained below half of it. HTTP/2 flow control decides when
 *    queued bytes leave: a slow peer stalls the queue, never grows it past
 *    send_buffer + one message.
 *  - Receiving: a paused call (sluice_call_set_recv_paused) keeps received
 *    messages undelivered and stops returning HTTP/2 window to the peer, so
 *    at most one stream window (SLUICE_STREAM_WINDOW) plus one message of
 *    max_response_size is held for it; the peer stalls.
 */
#ifndef SLUICE_CALL_H
#define SLUICE_CALL_H

#include "sluice/export.h"

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "sluice/buf.h"
#include "sluice/channel.h"
#include "sluice/metadata.h"
#include "sluice/method.h"
#include "sluice/status.h"
#include "sluice/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A client call (opaque): the handle of one RPC of any kind, from
 * sluice_call_start() or sluice_call_start_msg() until
 * sluice_call_release(). */
typedef struct sluice_call sluice_call;

/** What a call reports. Every member may be NULL except on_done. All of
 * them run on the channel's loop thread, one at a time, never from inside
 * the function that started the call; each gets the call's handle and the
 * user_data given to sluice_call_start(). */
typedef struct sluice_call_handlers {
  /** The response headers arrived; md (borrowed for the callback; NULL when
   * the server sent no custom metadata) also stays readable afterwards in
   * the final status. Not called for a Trailers-Only answer.
   * @param call the call
   * @param md the custom metadata of the response headers, or NULL
   * @param user_data as given to sluice_call_start() */
  void (*on_initial_metadata)(sluice_call *call, const sluice_metadata *md,
                              void *user_data);
  /** One response message, decoded. msg is owned by the library and freed
   * when the callback returns (copy what you keep).
   * @param call the call
   * @param msg the message, of the method's response type (cast it)
   * @param user_data as given to sluice_call_start() */
  void (*on_message)(sluice_call *call, const ProtobufCMessage *msg,
                     void *user_data);
  /** sluice_call_send() returned SLUICE_ERR_FULL earlier and the queue has
   * drained below half of send_buffer: send again.
   * @param call the call
   * @param user_data as given to sluice_call_start() */
  void (*on_send_ready)(sluice_call *call, void *user_data);
  /** Exactly once, last. st is borrowed until the callback returns. For a
   * client-streaming or unary method, the single response message has been
   * delivered to on_message before an OK on_done. The handle stays valid
   * until released (sluice_call_release() may be called from here).
   * @param call the call
   * @param st the final status (code, message, metadata); borrowed
   * @param user_data as given to sluice_call_start() */
  void (*on_done)(sluice_call *call, const sluice_status *st, void *user_data);
} sluice_call_handlers;

/** Starts a call of method on ch and stores the handle in *out (owned by
 * the caller: sluice_call_release() it exactly once). handlers is copied.
 * opts may be NULL. The request headers go out as soon as the call has a
 * stream; messages follow as they are sent (sluice_call_send(), then
 * sluice_call_close_send()). on_done fires exactly once — with an error
 * status when the call cannot start (expired deadline, channel closing
 * ...), never synchronously from inside this function. Thread-safe.
 * @param ch the channel
 * @param method the method (a generated table entry); kept by the call, so
 *   it must outlive it (generated tables are static)
 * @param opts per-call options, or NULL; read before this returns
 *   (metadata copied)
 * @param handlers the callbacks; copied; on_done must be set
 * @param user_data passed to every callback
 * @param[out] out receives the call handle; untouched on failure
 * @retval 0 started: on_done will fire
 * @retval SLUICE_ERR_INVALID_ARG ch, method, handlers, handlers->on_done or
 *   out is NULL, or method lacks its path or message descriptors; nothing
 *   fires
 * @retval SLUICE_ERR_NOMEM out of memory; nothing fires */
SLUICE_API int sluice_call_start(sluice_channel *ch,
                                 const sluice_method_desc *method,
                                 const sluice_call_opts *opts,
                                 const sluice_call_handlers *handlers,
                                 void *user_data, sluice_call **out);

/** What a raw call reports: as sluice_call_handlers, except that each
 * response message arrives serialized, as a buffer. */
typedef struct sluice_call_raw_handlers {
  /** As sluice_call_handlers.on_initial_metadata. */
  void (*on_initial_metadata)(sluice_call *call, const sluice_metadata *md,
                              void *user_data);
  /** One response message, not decoded (uncompressed if it came
   * compressed). msg is the callee's: free it with sluice_buf_free(), keep
   * it, or hand it on (sluice_server_call_finish_buf() of a proxy's call,
   * say) without a copy. NULL here: messages are dropped.
   * @param call the call
   * @param msg the serialized message; owned by the callee
   * @param user_data as given to sluice_call_start_raw() */
  void (*on_message)(sluice_call *call, sluice_buf *msg, void *user_data);
  /** As sluice_call_handlers.on_send_ready. */
  void (*on_send_ready)(sluice_call *call, void *user_data);
  /** As sluice_call_handlers.on_done; must be set. */
  void (*on_done)(sluice_call *call, const sluice_status *st, void *user_data);
} sluice_call_raw_handlers;

/** Starts a raw call: as sluice_call_start(), but response messages are
 * not decoded; each reaches handlers->on_message as a buffer the
 * application owns, without the copies of protobuf decoding (a message
 * that arrived in several DATA frames is handed over in the buffer it was
 * reassembled in). Send requests with sluice_call_send_buf() (or
 * sluice_call_send() when method has its request descriptor). method needs
 * only its path and kind: request and response may be NULL, so a proxy can
 * forward methods it has no descriptors for. Everything else (deadlines,
 * retries, flow control, limits, compression) is as for any call.
 * Thread-safe.
 * @param ch the channel
 * @param method the method; kept by the call (see sluice_call_start())
 * @param opts per-call options, or NULL; read before this returns
 * @param handlers the callbacks; copied; on_done must be set
 * @param user_data passed to every callback
 * @param[out] out receives the call handle; untouched on failure
 * @retval 0 started: on_done will fire
 * @retval SLUICE_ERR_INVALID_ARG ch, method, handlers, handlers->on_done,
 *   out or method->path is NULL; nothing fires
 * @retval SLUICE_ERR_NOMEM out of memory; nothing fires */
SLUICE_API int sluice_call_start_raw(sluice_channel *ch,
                                     const sluice_method_desc *method,
                                     const sluice_call_opts *opts,
                                     const sluice_call_raw_handlers *handlers,
                                     void *user_data, sluice_call **out);

/** As sluice_call_start(), for methods that take one request (unary and
 * server-streaming): req is serialized, queued and the sending side closed
 * before the call reaches the loop, so no callback can race with sending
 * it, and *out is set before any callback runs. A request over
 * max_request_size fails the call through on_done with RESOURCE_EXHAUSTED
 * (this still returns 0). sluice_call_send() and sluice_call_close_send()
 * then return SLUICE_ERR_STATE. Thread-safe.
 * @param ch the channel
 * @param method the method; kept by the call (see sluice_call_start())
 * @param req the request, of the method's request type; serialized before
 *   this returns (the caller keeps it)
 * @param opts per-call options, or NULL; read before this returns
 * @param handlers the callbacks; copied; on_done must be set
 * @param user_data passed to every callback
 * @param[out] out receives the call handle; untouched on failure
 * @retval 0 started: on_done will fire
 * @retval SLUICE_ERR_INVALID_ARG as sluice_call_start(), or req is NULL or
 *   not of the method's request type; nothing fires
 * @retval SLUICE_ERR_NOMEM out of memory; nothing fires */
SLUICE_API int sluice_call_start_msg(sluice_channel *ch,
                                     const sluice_method_desc *method,
                                     const ProtobufCMessage *req,
                                     const sluice_call_opts *opts,
                                     const sluice_call_handlers *handlers,
                                     void *user_data, sluice_call **out);

/** For generated typed stubs: the user's typed callbacks, each cast to
 * sluice_generic_fn (NULL where not set), and the user's user_data. The
 * members follow sluice_call_handlers. sluice_call_start_typed() copies it
 * into the call object; each trampoline then receives a pointer to that
 * copy as its user_data, casts its member back to the typed callback's type
 * and calls it with the typed message and this user_data. */
typedef struct sluice_call_typed_handlers {
  sluice_generic_fn on_initial_metadata; /**< the typed on_initial_metadata */
  sluice_generic_fn on_message;          /**< the typed on_message */
  sluice_generic_fn on_send_ready;       /**< the typed on_send_ready */
  sluice_generic_fn on_done;             /**< the typed on_done; required */
  void *user_data; /**< what the typed callbacks get as user_data */
} sluice_call_typed_handlers;

/** Starts a call as sluice_call_start() (req NULL) or
 * sluice_call_start_msg() (req set) does, for generated typed stubs:
 * tramps are the stub's trampolines, called by the runtime as any
 * sluice_call_handlers are; *typed is copied into the call object (no
 * allocation of its own), and every trampoline gets a pointer to that copy
 * as its user_data, valid until on_done returns. Threads, ownership and
 * the handle are as for sluice_call_start(). Thread-safe.
 * @param ch the channel
 * @param method the method; kept by the call (see sluice_call_start())
 * @param req the request, of the method's request type, for methods that
 *   take one (serialized, queued and half-closed before this returns, as
 *   by sluice_call_start_msg()), or NULL to send the requests with
 *   sluice_call_send()
 * @param opts per-call options, or NULL; read before this returns
 * @param tramps the trampolines; copied; on_done must be set
 * @param typed the typed callbacks and their user_data; copied;
 *   typed->on_done must be set
 * @param[out] out receives the call handle; untouched on failure
 * @retval 0 started: on_done will fire
 * @retval SLUICE_ERR_INVALID_ARG ch, method, tramps, tramps->on_done,
 *   typed, typed->on_done or out is NULL, method lacks its path or message
 *   descriptors, or req is not of the method's request type; nothing fires
 * @retval SLUICE_ERR_NOMEM out of memory; nothing fires */
SLUICE_API int sluice_call_start_typed(sluice_channel *ch,
                                       const sluice_method_desc *method,
                                       const ProtobufCMessage *req,
                                       const sluice_call_opts *opts,
                                       const sluice_call_handlers *tramps,
                                       const sluice_call_typed_handlers *typed,
                                       sluice_call **out);

/** Queues msg (serialized, and compressed if the call compresses, before
 * this returns; the caller keeps ownership of msg). Thread-safe.
 * @param call the call
 * @param msg the request, of the method's request type
 * @retval 0 queued
 * @retval SLUICE_ERR_INVALID_ARG call or msg is NULL, or msg is not of the
 *   method's request type
 * @retval SLUICE_ERR_FULL the send queue is at send_buffer: wait for
 *   on_send_ready; nothing was queued
 * @retval SLUICE_ERR_STATE close_send was called (also by
 *   sluice_call_start_msg()), the call is done, or a second message on a
 *   unary or server-streaming method
 * @retval SLUICE_ERR_TOO_LARGE over max_request_size: nothing was sent and
 *   the call is failed with RESOURCE_EXHAUSTED
 * @retval SLUICE_ERR_NOMEM out of memory (SLUICE_ERR_SYSTEM when zlib
 *   cannot start compressing); nothing was queued */
SLUICE_API int sluice_call_send(sluice_call *call, const ProtobufCMessage *msg);
/** As sluice_call_send() with flags. Thread-safe.
 * @param call the call
 * @param msg the request, of the method's request type
 * @param flags 0 or SLUICE_SEND_NO_COMPRESS; other bits are ignored
 * @return as sluice_call_send() */
SLUICE_API int sluice_call_send_ex(sluice_call *call,
                                   const ProtobufCMessage *msg, unsigned flags);

/** As sluice_call_send(), for a message already serialized: msg's bytes
 * are queued as they are, without a copy (the library writes gRPC's
 * 5-byte prefix in room the buffer keeps in front of them), unless the
 * call compresses its messages (sluice_call_opts compression), which makes
 * a compressed copy. Works on every call, raw (sluice_call_start_raw()) or
 * not; the bytes are not checked against the method's request type.
 * Thread-safe.
 * @param call the call
 * @param msg the serialized request; on 0 the library owns it (do not
 *   touch or free it again); on any error the caller still owns it
 * @retval 0 queued
 * @retval SLUICE_ERR_INVALID_ARG call or msg is NULL
 * @retval SLUICE_ERR_FULL as sluice_call_send(): send it again after
 *   on_send_ready
 * @retval SLUICE_ERR_STATE as sluice_call_send()
 * @retval SLUICE_ERR_TOO_LARGE over max_request_size: the call is failed
 *   with RESOURCE_EXHAUSTED
 * @retval SLUICE_ERR_NOMEM out of memory (compressing) */
SLUICE_API int sluice_call_send_buf(sluice_call *call, sluice_buf *msg);
/** As sluice_call_send_buf() with flags. Thread-safe.
 * @param call the call
 * @param msg the serialized request; owned by the library on 0 only
 * @param flags 0 or SLUICE_SEND_NO_COMPRESS; other bits are ignored
 * @return as sluice_call_send_buf() */
SLUICE_API int sluice_call_send_buf_ex(sluice_call *call, sluice_buf *msg,
                                       unsigned flags);

/** Half-closes: no more messages will be sent (END_STREAM follows the
 * queued ones). Thread-safe.
 * @param call the call
 * @retval 0 closed
 * @retval SLUICE_ERR_INVALID_ARG call is NULL
 * @retval SLUICE_ERR_STATE already closed (also by sluice_call_start_msg())
 *   or the call is done */
SLUICE_API int sluice_call_close_send(sluice_call *call);

/** Cancels the call: on_done fires with CANCELLED (unless it already
 * fired) and the stream is reset. Thread-safe, idempotent; after on_done it
 * does nothing.
 * @param call the call
 * @param message the status message on_done reports (not sent to the
 *   server); NULL or "" gives "cancelled by the client"
 * @retval 0 cancelled, or already done
 * @retval SLUICE_ERR_INVALID_ARG call is NULL */
SLUICE_API int sluice_call_cancel(sluice_call *call, const char *message);

/** Pauses (paused != 0) or resumes delivery of response messages. While
 * paused, nothing reaches on_message and the peer is held back by HTTP/2
 * flow control (see the top of this file). on_done still fires when the
 * call fails; an OK on_done waits until every message was delivered.
 * Thread-safe; called from on_message it takes effect at once (no further
 * message in that turn).
 * @param call the call
 * @param paused non-zero to pause, 0 to resume
 * @retval 0 done
 * @retval SLUICE_ERR_INVALID_ARG call is NULL */
SLUICE_API int sluice_call_set_recv_paused(sluice_call *call, int paused);

/** Bytes currently queued for sending (serialized, not yet handed to
 * HTTP/2). Thread-safe.
 * @param call the call
 * @return the queued bytes; 0 for NULL */
SLUICE_API size_t sluice_call_send_queued(const sluice_call *call);

/** The most bytes of this call's received data held at once (undelivered
 * messages + partial message + data not yet returned to the peer's window):
 * what the receive bound above promises. Thread-safe.
 * @param call the call
 * @return the high-water mark in bytes; 0 for NULL */
SLUICE_API size_t sluice_call_recv_buffered_max(const sluice_call *call);

/** Whether the most recently delivered response message arrived
 * compressed (valid inside on_message, on the loop thread).
 * @param call the call
 * @return non-zero when it was compressed; 0 when not, or for NULL */
SLUICE_API int sluice_call_last_message_compressed(const sluice_call *call);

/** Gives up the caller's reference. The call goes on; callbacks keep
 * firing until on_done; then the library frees it. May be called from
 * inside a callback (the handle stays valid until that callback returns)
 * and from any thread; the handle must not be used after it. Releasing
 * does not cancel: sluice_call_cancel() first if that is wanted.
 * Release every call before its channel is gone: before
 * sluice_channel_del(), or from the call's on_done (which a channel being
 * destroyed still fires). A release after sluice_channel_del() returned
 * is undefined: the channel's loop may be freed by then.
 * @param call the call; NULL is ignored */
SLUICE_API void sluice_call_release(sluice_call *call);

#ifdef __cplusplus
}
#endif
#endif
