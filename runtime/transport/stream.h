/* One HTTP/2 stream's endpoint: the part a client attempt and a server call
 * share. It ties a stream id on a connection to the owner's send queue (read
 * by nghttp2's data provider) and to a receiver (deframing, held messages,
 * window returned as messages are delivered), and wraps the nghttp2 calls a
 * stream makes: give window back, resume sending, reset, detach at close.
 *
 * The owner embeds a sluice__stream and learns of what happens through
 * the ops table (a narrow callback interface, so this layer never sees the
 * owner's struct). Loop thread only.
 */
#ifndef SLUICE_TRANSPORT_STREAM_H
#define SLUICE_TRANSPORT_STREAM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <nghttp2/nghttp2.h>

#include "sluice/status.h"
#include "transport/conn.h"
#include "transport/recv.h"
#include "transport/sendq.h"

typedef struct sluice__stream sluice__stream;

typedef struct sluice__stream_ops {
  /* Optional. A DATA frame took n bytes of the send queue (n may be 0);
   * ready: the queue fell below half its bound (report on_send_ready). */
  void (*on_read)(sluice__stream *s, size_t n, int ready);
  /* Optional: the data provider's whole body instead (an owner that ends
   * its data with trailers); it sizes the frame with sluice__stream_read. */
  ssize_t (*read)(sluice__stream *s, size_t len, uint32_t *flags);
  /* Client streams of requests: after this many bytes of DATA the stream
   * gives up its turn to the connection's other streams although it has
   * more to send (0: never). A client sends each request whole before the
   * next (RFC 9218, transport/h2session.c); a stream of requests may never
   * end, so without this it could hold back every other request of its
   * connection. SLUICE__STREAM_QUANTUM is the usual value. */
  size_t quantum;
} sluice__stream_ops;

#define SLUICE__STREAM_QUANTUM (64u * 1024)

struct sluice__stream {
  sluice__conn *conn;   /* NULL: not (or no longer) on a connection */
  int32_t id;           /* valid while conn is set */
  uint32_t run;         /* DATA bytes since the stream last gave up its turn */
  sluice__sendq *sendq; /* what the data provider reads; the owner's */
  sluice__recv recv;
  const sluice__stream_ops *ops;
};

/* Sets s up, not yet on a connection: sendq (owned by the caller, may be
 * NULL for an owner that sends nothing), the receiver with its message
 * size bound and delivery function, ops (may be NULL). */
void sluice__stream_init(sluice__stream *s, sluice__sendq *sendq,
                         uint32_t max_msg, sluice__deliver_fn deliver,
                         void *owner, const sluice__stream_ops *ops);

/* The stream is id on conn from now on. */
static inline void sluice__stream_attach(sluice__stream *s, sluice__conn *conn,
                                         int32_t id) {
  s->conn = conn;
  s->id = id;
}

/* The stream closed (or its connection went): the bytes it received and did
 * not return go back to the connection's window; s is off the connection. */
void sluice__stream_detach(sluice__stream *s);

/* A data provider reading s->sendq, for nghttp2_submit_request/response. */
/* The data provider's sizing of the next DATA frame (at most len bytes of
 * the send queue): returns the byte count, or NGHTTP2_ERR_DEFERRED when the
 * queue is empty but open; sets NGHTTP2_DATA_FLAG_EOF in *flags at its end.
 * The frame is sent without a copy into nghttp2 (NGHTTP2_DATA_FLAG_NO_COPY):
 * sluice__stream_send_data copies the bytes straight from the send queue
 * into the connection's write batch. */
ssize_t sluice__stream_read(sluice__stream *s, size_t len, uint32_t *flags);

/* nghttp2's send_data callback, for every session whose streams are
 * sluice__streams (nghttp2_session_callbacks_set_send_data_callback):
 * writes the frame header and the queue's next length bytes into the write
 * batch being gathered, and tells the owner (ops->on_read). */
int sluice__stream_send_data(nghttp2_session *session, nghttp2_frame *frame,
                             const uint8_t *framehd, size_t length,
                             nghttp2_data_source *source, void *ud);

nghttp2_data_provider sluice__stream_provider(sluice__stream *s);

/* Server: s's DATA shares the connection round robin with the other
 * incremental streams (RFC 9218 incremental; transport/h2session.c) instead
 * of going out whole before the next response: for a stream of responses,
 * which may never end. Client priority signals for it are ignored. */
void sluice__stream_set_incremental(sluice__stream *s);

/* Returns n received bytes to the peer's stream window. */
void sluice__stream_consume(sluice__stream *s, size_t n);

/* The send queue has more for nghttp2 (a deferred provider resumes). */
void sluice__stream_resume_send(sluice__stream *s);

/* Resets the stream with h2_error (RST_STREAM); nothing when detached. */
void sluice__stream_reset(sluice__stream *s, uint32_t h2_error);

/* Feeds one DATA chunk to the receiver and returns the window it frees.
 * Returns OK, or the receiver's failure with its text: "received message
 * larger than max (N vs. M)" in buf for an oversized message, else a static
 * reason (CANCELLED when delivery failed: the owner recorded why). */
sluice_status_code sluice__stream_data_in(sluice__stream *s,
                                          const uint8_t *data, size_t len,
                                          char *buf, size_t cap,
                                          const char **reason);

/* Delivers held messages until paused or empty, returning their window.
 * Returns 0, or non-zero when delivery failed. */
int sluice__stream_drain(sluice__stream *s);

#endif
