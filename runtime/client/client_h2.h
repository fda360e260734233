/* The client side of one HTTP/2 connection: the nghttp2 client session,
 * request submission, and response frames turned into per-stream facts.
 *
 * The layer below the subchannel: it knows sockets, nghttp2 and streams, not
 * calls, destinations or the channel. Upward it reports through two narrow
 * interfaces: per connection, the hooks its owner (a subchannel) gave it;
 * per stream, the ops of the sluice__cstream its owner (a call's attempt)
 * embeds. Loop thread only.
 */
#ifndef SLUICE_CLIENT_CLIENT_H2_H
#define SLUICE_CLIENT_CLIENT_H2_H

#include <stdint.h>

#include "core/list.h"
#include "sluice/clock.h"
#include "sluice/metadata.h"
#include "sluice/method.h"
#include "sluice/types.h"
#include "transport/addr.h"
#include "transport/conn.h"
#include "transport/stream.h"
#include "wire/grpc_headers.h"

typedef struct sluice__cconn sluice__cconn;
typedef struct sluice__cstream sluice__cstream;

/* What every connection of a channel shares (owned by the channel, which
 * outlives its connections). */
typedef struct sluice__cconn_cfg {
  struct ssl_ctx_st *tls; /* NULL: plaintext */
  const char *authority;  /* :authority */
  const char *user_agent;
  uint32_t connect_timeout_ms;
  /* Keepalive (gRFC A8): a PING after keepalive_time_ms without a byte
   * read (0: off), the connection closed when no byte follows within
   * keepalive_timeout_ms; without calls only when permit_without_calls.
   * The channel may change keepalive_time_ms (too_many_pings): a
   * connection reads it once, when it is created. */
  uint32_t keepalive_time_ms, keepalive_timeout_ms;
  int keepalive_permit_without_calls;
  /* SETTINGS_MAX_HEADER_LIST_SIZE announced and enforced on responses */
  uint32_t max_header_list_size;
} sluice__cconn_cfg;

/* How a connection tells its owner what happened. */
typedef struct sluice__cconn_hooks {
  /* Connected and the session is ready for streams (after TLS). */
  void (*on_ready)(sluice__cconn *cc, void *ud);
  /* The socket is closed; every stream was told first. was_ready: it got
   * ready before. cc is freed right after this returns. */
  void (*on_closed)(sluice__cconn *cc, void *ud, const char *reason,
                    int was_ready);
  /* GOAWAY: no new streams on this connection. */
  void (*on_goaway)(sluice__cconn *cc, void *ud);
  /* A stream ended or the peer's SETTINGS arrived: the connection may take
   * more streams now. */
  void (*on_capacity)(sluice__cconn *cc, void *ud);
  /* A response's trailers arrived (md: borrowed; may hold a load report). */
  void (*on_trailers)(sluice__cconn *cc, void *ud, const sluice_metadata *md);
  /* The peer sent GOAWAY ENHANCE_YOUR_CALM "too_many_pings" (on_goaway
   * follows). */
  void (*on_too_many_pings)(sluice__cconn *cc, void *ud);
} sluice__cconn_hooks;

typedef struct sluice__cstream_ops {
  /* A response header block ended: trailers (end of stream, also
   * Trailers-Only) or the initial headers. md: its custom metadata, handed
   * over (NULL when it had none). */
  void (*on_headers)(sluice__cstream *s, int trailers, sluice_metadata *md);
  /* DATA failed the receiver (size, framing; the text is in reason or, for
   * an oversized message, in s->fail_buf). The owner fails its call. */
  void (*on_data_failed)(sluice__cstream *s, sluice_status_code code,
                         const char *reason);
  /* The stream is over; s is off the connection. h2_error: its RST_STREAM
   * code (NO_ERROR for a clean end). lost_code != OK: the connection went
   * (or is being torn down) with lost_text. */
  void (*on_closed)(sluice__cstream *s, uint32_t h2_error,
                    sluice_status_code lost_code, const char *lost_text);
} sluice__cstream_ops;

/* One request stream, embedded by its owner. */
struct sluice__cstream {
  sluice__stream st;
  const sluice__cstream_ops *ops;
  sluice__cconn *cc;    /* NULL when not on a connection */
  sluice__list link;    /* in cc->streams */
  int discard;          /* set by the owner: its call is over, drop DATA */
  uint64_t rx_bytes;    /* DATA bytes received */
  sluice__grpc_resp rx; /* what the response headers said */
  size_t hdr_bytes;     /* this header block so far (RFC 9113 sizes) */
  char fail_buf[160];
};

/* The request's HTTP/2 headers, from the call. */
typedef struct sluice__creq {
  const char *path;
  uint64_t deadline_ns; /* 0: none (no grpc-timeout) */
  sluice_compression compression;
  const sluice_metadata *md; /* the user's; may be NULL */
  unsigned prev_attempts;    /* grpc-previous-rpc-attempts; 0: not sent */
} sluice__creq;

struct sluice__cconn {
  sluice__conn conn; /* the transport */
  const sluice__cconn_cfg *cfg;
  const sluice__cconn_hooks *hooks;
  void *ud;
  sluice__list streams; /* open request streams */
  uint32_t active_streams;
  int ready;    /* TCP connected and session created */
  int draining; /* GOAWAY received or sent: no new streams */
  int got_settings;
  /* keepalive (cfg): this connection's time, its timer, the last read */
  uint32_t ka_time_ms;
  uv_timer_t ka_timer;
  int ka_timer_open;
  int ka_pinging;        /* a PING is out, no byte read since */
  int ka_timed_out;      /* closed by the keepalive timeout */
  uint64_t last_read_ms; /* uv_now of the last frame read */
  uint64_t ka_pings;     /* keepalive PINGs sent */
  char addr_name[112];
};

/* Sets up s (not on a connection) over the owner's send queue, with the
 * response size bound and message delivery of the receiver. */
void sluice__cstream_init(sluice__cstream *s, sluice__sendq *sendq,
                          uint32_t max_msg, sluice__deliver_fn deliver,
                          void *owner, const sluice__cstream_ops *ops,
                          const sluice__stream_ops *stream_ops);
/* Frees what the stream holds (metadata block, message text, receiver);
 * it must be off its connection. rx reads as "nothing received". */
void sluice__cstream_clear(sluice__cstream *s);

/* Starts connecting to addr; hooks report the outcome (on_closed for a
 * failure, even one that happens at once). tls_name: the name the server's
 * certificate must carry (and SNI); ignored for plaintext. */
int sluice__cconn_new(sluice__cconn **out, sluice__loop *loop,
                      const sluice__addr *addr, const char *tls_name,
                      const sluice__cconn_cfg *cfg,
                      const sluice__cconn_hooks *hooks, void *ud);
/* Non-zero when one more stream may be opened now. */
int sluice__cconn_can_take(const sluice__cconn *cc);
/* Opens s as a new request stream. Returns 0, SLUICE_ERR_NOMEM or
 * SLUICE_ERR_SYSTEM (nghttp2 refused). */
/* sluice__cconn_submit: the request's header list is larger than the
 * server's SETTINGS_MAX_HEADER_LIST_SIZE (nothing was sent). */
#define SLUICE__CCONN_HEADERS_TOO_LARGE 1

int sluice__cconn_submit(sluice__cconn *cc, sluice__cstream *s,
                         const sluice__creq *req);
/* Graceful: GOAWAY(NO_ERROR), no new streams, open ones finish. */
void sluice__cconn_drain(sluice__cconn *cc);
/* Ends every open stream now (on_closed with code/text), then closes the
 * socket. */
void sluice__cconn_abort(sluice__cconn *cc, sluice_status_code code,
                         const char *text);

#endif
