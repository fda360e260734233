/* sluice: client calls of every kind (unary, client-, server- and
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
 * (all functions may be called; after on_done they return SLUICE_ERR_STATE)
 * until released, even after on_done. Releasing a call does not stop it;
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

#include "sluice/channel.h"
#include "sluice/metadata.h"
#include "sluice/method.h"
#include "sluice/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Default bound of a call's send queue, in bytes (call option send_buffer).
 */
#define SLUICE_DEFAULT_SEND_BUFFER (256u * 1024u)
/* HTTP/2 receive window per stream announced by sluice (both sides): the
 * most a paused receiver holds beyond one partial message. */
#define SLUICE_STREAM_WINDOW (1u << 20)

typedef struct sluice_call sluice_call;

/* What a call reports. Every member may be NULL except on_done. */
typedef struct sluice_call_handlers {
  /* The response headers arrived; md (borrowed for the callback; NULL when
   * the server sent no custom metadata) also stays readable afterwards in
   * the final status. Not called for a Trailers-Only answer. */
  void (*on_initial_metadata)(sluice_call *call, const sluice_metadata *md,
                              void *user_data);
  /* One response message, decoded. msg is owned by the library and freed
   * when the callback returns. */
  void (*on_message)(sluice_call *call, const ProtobufCMessage *msg,
                     void *user_data);
  /* sluice_call_send() returned SLUICE_ERR_FULL earlier and the queue has
   * drained below half of send_buffer: send again. */
  void (*on_send_ready)(sluice_call *call, void *user_data);
  /* Exactly once, last. st is borrowed until the callback returns. For a
   * client-streaming or unary method, the single response message has been
   * delivered to on_message before an OK on_done. */
  void (*on_done)(sluice_call *call, const sluice_status *st, void *user_data);
} sluice_call_handlers;

/* Starts a call of method on ch and stores the handle in *out (owned by the
 * caller: sluice_call_release() it exactly once). handlers is copied.
 * opts may be NULL. The request headers go out as soon as the call has a
 * stream; messages follow as they are sent. on_done fires exactly once — with
 * an error status when the call cannot start (expired deadline, channel closing
 * ...), never synchronously from inside this function. Returns 0 (on_done will
 * fire), SLUICE_ERR_INVALID_ARG (NULL ch, method, handlers, on_done or out) or
 * SLUICE_ERR_NOMEM (then nothing fires). */
SLUICE_API int sluice_call_start(sluice_channel *ch,
                                 const sluice_method_desc *method,
                                 const sluice_call_opts *opts,
                                 const sluice_call_handlers *handlers,
                                 void *user_data, sluice_call **out);

/* As sluice_call_start, for methods that take one request (unary and
 * server-streaming): req is serialized, queued and the sending side closed
 * before the call reaches the loop, so no callback can run before this
 * returns. A request over max_request_size fails the call through on_done
 * with RESOURCE_EXHAUSTED (this still returns 0). Returns 0,
 * SLUICE_ERR_INVALID_ARG (also: req NULL or not of the request type) or
 * SLUICE_ERR_NOMEM. */
SLUICE_API int sluice_call_start_msg(sluice_channel *ch,
                                     const sluice_method_desc *method,
                                     const ProtobufCMessage *req,
                                     const sluice_call_opts *opts,
                                     const sluice_call_handlers *handlers,
                                     void *user_data, sluice_call **out);

/* Flags of sluice_call_send_ex / sluice_server_call_send_ex. */
#define SLUICE_SEND_NO_COMPRESS 1u /* send this message uncompressed */

/* Queues msg (serialized, and compressed if the call compresses, before this
 * returns; the caller keeps ownership of msg). Thread-safe.
 * Returns 0, SLUICE_ERR_INVALID_ARG (NULL, or msg not of the method's
 * request type), SLUICE_ERR_FULL (the send queue is at send_buffer: wait for
 * on_send_ready; nothing was queued), SLUICE_ERR_STATE (close_send was
 * called, the call is done, or a second message on a unary or
 * server-streaming method), SLUICE_ERR_TOO_LARGE (over max_request_size:
 * the call is failed with RESOURCE_EXHAUSTED) or SLUICE_ERR_NOMEM. */
SLUICE_API int sluice_call_send(sluice_call *call, const ProtobufCMessage *msg);
/* As sluice_call_send with flags (SLUICE_SEND_NO_COMPRESS). */
SLUICE_API int sluice_call_send_ex(sluice_call *call,
                                   const ProtobufCMessage *msg, unsigned flags);

/* Half-closes: no more messages will be sent (END_STREAM follows the
 * queued ones). Thread-safe. Returns 0, SLUICE_ERR_INVALID_ARG or
 * SLUICE_ERR_STATE (already closed or done). */
SLUICE_API int sluice_call_close_send(sluice_call *call);

/* Cancels the call: on_done fires with CANCELLED (unless it already fired)
 * and the stream is reset. Thread-safe, idempotent. message may be NULL.
 * Returns 0 or SLUICE_ERR_INVALID_ARG. */
SLUICE_API int sluice_call_cancel(sluice_call *call, const char *message);

/* Pauses (paused != 0) or resumes delivery of response messages. While
 * paused, nothing reaches on_message and the peer is held back by HTTP/2
 * flow control (see the top of this file). on_done still fires when the
 * call fails; an OK on_done waits until every message was delivered.
 * Thread-safe. Returns 0 or SLUICE_ERR_INVALID_ARG. */
SLUICE_API int sluice_call_set_recv_paused(sluice_call *call, int paused);

/* Bytes currently queued for sending (serialized, not yet handed to HTTP/2).
 * Thread-safe. 0 for NULL. */
SLUICE_API size_t sluice_call_send_queued(const sluice_call *call);

/* The most bytes of this call's received data held at once (undelivered
 * messages + partial message + data not yet returned to the peer's window):
 * what the receive bound above promises. 0 for NULL. */
SLUICE_API size_t sluice_call_recv_buffered_max(const sluice_call *call);

/* Non-zero when the most recently delivered response message arrived
 * compressed (valid inside on_message). */
SLUICE_API int sluice_call_last_message_compressed(const sluice_call *call);

/* Gives up the caller's reference. The call goes on; callbacks keep firing
 * until on_done; then the library frees it. May be called from inside a
 * callback (the handle stays valid until that callback returns). NULL is
 * ignored. */
SLUICE_API void sluice_call_release(sluice_call *call);

#ifdef __cplusplus
}
#endif
#endif
