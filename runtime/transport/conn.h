/* One HTTP/2 connection: a stream socket (TCP or Unix) driven by an nghttp2
 * session through its memory API, so we own the I/O.
 *
 * Reads are fed to nghttp2 as they arrive; writes are batched: whoever
 * produces output calls sluice__conn_want_write(), and the connection pulls
 * everything nghttp2 has queued in one go before the loop polls again, with
 * at most one write in flight. While a write is in flight nothing more is
 * pulled, so a slow peer leaves data in nghttp2's flow-controlled queues,
 * not in ours: our buffering is bounded by SLUICE__CONN_WBUF_MAX (plus,
 * over TLS, the ciphertext of one batch). Batches are built in a per-thread
 * scratch buffer and reads land in another (transport/scratch.h), so an
 * idle connection holds no I/O buffer at all.
 *
 * The connection is embedded in its owner (client or server connection); the
 * owner creates the nghttp2 session with its own callbacks and frees both
 * after hooks->on_closed.
 */
#ifndef SLUICE_TRANSPORT_CONN_H
#define SLUICE_TRANSPORT_CONN_H

#include <nghttp2/nghttp2.h>
#include <string.h>
#include <uv.h>

#include "core/loop.h"
#include "transport/h2mem.h"
#include "transport/sendq.h"

#define SLUICE__CONN_WBUF_MAX (256 * 1024)
/* A lingering close (sluice__conn_linger_close) reads and drops input for
 * at most this long and this much before the socket is closed. */
#define SLUICE__CONN_LINGER_MS 2000
#define SLUICE__CONN_LINGER_MAX (4u << 20)

typedef struct sluice__conn sluice__conn;

typedef struct sluice__conn_hooks {
  /* The socket is closed (handle closed, no callback of uv pending); called
   * exactly once. reason lives in the connection. The owner may free now. */
  void (*on_closed)(sluice__conn *c, const char *reason);
  /* Optional: the socket connected (client side). status 0 or a uv error. */
  void (*on_connected)(sluice__conn *c, int status);
  /* Optional: the TLS handshake completed (after ALPN and certificate
   * checks). Not called for plaintext connections. */
  void (*on_established)(sluice__conn *c);
  /* Optional: the peer flooded the session (nghttp2's outbound-queue
   * limits) and was sent GOAWAY ENHANCE_YOUR_CALM; the close follows. */
  void (*on_calm)(sluice__conn *c);
} sluice__conn_hooks;

struct sluice__conn {
  /* The socket's readiness comes from libuv; the reads and writes are ours
   * (recv, and send with MSG_NOSIGNAL: see conn.c). */
  uv_poll_t poll;
  uv_os_sock_t fd; /* -1 until connect / open_fd; closed with the conn */
  int poll_open;
  int poll_events;  /* UV_READABLE | UV_WRITABLE being polled for */
  int open_handles; /* closing: handles whose close callback is due */
  int is_pipe;
  sluice__loop *loop;
  nghttp2_session *session; /* set by the owner before sluice__conn_start */
  /* The session's allocation failures (transport/h2mem.h): the owner
   * creates and deletes the session with it (h2session.h); a failure
   * closes the connection. */
  sluice__h2mem_guard h2guard;
  const sluice__conn_hooks *hooks;
  sluice__task flush_task;
  sluice__task closed_task; /* on_closed when no handle was open */
  int connecting;
  int connect_status; /* a connect that failed at once, reported later */
  uv_timer_t connect_timer;
  int connect_timer_open;
  int writing; /* pend is waiting for the socket to become writable */
  /* What the socket did not take of the last batch, malloc'd, held only
   * until written (batches are built in the thread's scratch buffer:
   * transport/scratch.h). */
  uint8_t *pend;
  size_t pend_len;
  size_t pend_sent;                 /* of pend_len, already written */
  struct sluice__conn_batch *batch; /* the batch a flush is gathering */
  int32_t *yielded; /* ids of streams that gave up their turn (on demand) */
  uint32_t n_yielded, cap_yielded;
  struct sluice__tls *tls; /* NULL: plaintext */
  int started;
  int close_when_flushed;
  int closing;
  int lingering; /* linger_close: output done, input dropped, then close */
  size_t linger_read;
  char linger_reason[128];
  const char *close_reason; /* points at close_msg */
  char close_msg[256];
  char peer[64]; /* "ipv4:1.2.3.4:5" etc. */
};

/* The body of an nghttp2 data provider reading from one packed message:
 * copies the next part of src (len bytes, *sent already gone) into dst (cap
 * bytes), advances *sent and returns the count. Shared by client requests
 * and server responses. */
static inline size_t sluice__copy_next(const uint8_t *src, size_t len,
                                       size_t *sent, uint8_t *dst, size_t cap) {
  size_t n = len - *sent < cap ? len - *sent : cap;
  if (n)
    memcpy(dst, src + *sent, n);
  *sent += n;
  return n;
}

/* While a flush gathers nghttp2's output (nghttp2's send_data callback,
 * transport/stream.c): one DATA frame into the batch, its 9-byte header
 * hd, the padding nghttp2 asked for (pad, as in its frame) and length
 * payload bytes from q. In plaintext large payload pieces are lent, not
 * copied (sluice__sendq_lend, transport/lend.h): sendmsg writes them from
 * the queue's buffers. Returns 0 (*ready as sluice__sendq_read says),
 * NGHTTP2_ERR_WOULDBLOCK (no batch is being gathered, or it is full:
 * nghttp2 retries at the next flush), NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE
 * (q held fewer bytes: dropped since the frame was sized; nothing of the
 * frame is in the batch) or NGHTTP2_ERR_CALLBACK_FAILURE (no memory). */
int sluice__conn_frame_data(sluice__conn *c, const uint8_t *hd, size_t pad,
                            sluice__sendq *q, size_t length, int *ready);

/* Loop thread, from the data provider of stream id, which is about to say
 * NGHTTP2_ERR_DEFERRED with data still queued: it gives up its turn, and
 * the flush resumes it (nghttp2_session_resume_data) once nghttp2 has
 * nothing else to send, which puts it behind the streams that were
 * waiting. Returns 0, or -1 when out of memory (then it keeps its turn).
 * A stream that closes meanwhile needs nothing: ids are never reused. */
int sluice__conn_yield(sluice__conn *c, int32_t id);

/* Initialises c for a TCP socket (is_pipe 0) or Unix socket (1) on loop. */
int sluice__conn_init(sluice__conn *c, sluice__loop *loop, int is_pipe,
                      const sluice__conn_hooks *hooks);

/* Client side: connects to addr (struct sockaddr for TCP, or a path for a
 * pipe) with a timeout; hooks->on_connected reports the outcome. */
int sluice__conn_connect(sluice__conn *c, const struct sockaddr *addr,
                         const char *path, uint64_t timeout_ms);

/* Server side: adopts an accepted socket descriptor. */
int sluice__conn_open_fd(sluice__conn *c, uv_os_sock_t fd);

/* Makes the connection speak TLS through t (owned by the connection from
 * now on, freed with it). Call before sluice__conn_start. */
void sluice__conn_set_tls(sluice__conn *c, struct sluice__tls *t);

/* Starts reading and flushes what nghttp2 has queued (the preface); with
 * TLS, starts the handshake first: nghttp2 output waits for it. */
int sluice__conn_start(sluice__conn *c);

/* Asks for a flush before the loop next polls. */
void sluice__conn_want_write(sluice__conn *c);

/* Flushes now (used when the caller needs frames out before closing). */
void sluice__conn_flush(sluice__conn *c);

/* Closes the socket once everything queued has been written (a draining
 * connection whose last stream ended). */
void sluice__conn_close_when_flushed(sluice__conn *c);

/* Ends a connection whose peer misbehaved so that it still reads our last
 * frames: flushes what nghttp2 has queued (the GOAWAY), shuts the write
 * side once written, then drops input until the peer closes, for at most
 * SLUICE__CONN_LINGER_MS and SLUICE__CONN_LINGER_MAX bytes, and closes
 * with reason (closing with unread input would send a TCP RST, which
 * can make the peer lose the GOAWAY). Server sessions only: a client
 * session flushes and closes at once. */
void sluice__conn_linger_close(sluice__conn *c, const char *reason);

/* Closes the socket (idempotent); hooks->on_closed follows with reason
 * (copied). */
void sluice__conn_close(sluice__conn *c, const char *reason);

#endif
