/* The server side of one HTTP/2 connection: nghttp2 server session
 * callbacks that turn streams into calls (see server_conn.h). */
#include "server/server_conn.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "sluice/clock.h"
#include "transport/h2session.h"
#include "transport/tls.h"
#include "wire/metadata_internal.h"

/* Where a connection is in its life (gRFC A9's graceful GOAWAY). */
typedef enum {
  SERVING,  /* no GOAWAY sent */
  NOTICE,   /* shutdown notice + PING sent, new streams still taken */
  DRAINING, /* final GOAWAY sent: the last calls finish */
  CLOSING   /* too many pings, rapid reset: GOAWAY sent, closing at once */
} sconn_stage;

/* The opaque data of the PING that follows the shutdown notice. */
static const uint8_t drain_ping[8] = {'s', 'l', 'c', 'd', 'r', 'a', 'i', 'n'};

#define NOTICE_MAX_NS (20ull * 1000000000) /* C-core's cap, grpc#29050 */
#define NO_CALL_PING_NS (2ull * 3600 * 1000000000) /* A8: pings w/o calls */
/* Rapid reset (CVE-2023-44487): RST_STREAMs from the client, a token
 * bucket of RESET_BURST refilled at RESET_RATE a second (nghttp2's own
 * limit, which would end the session with INTERNAL_ERROR one reset later:
 * ours answers first, ENHANCE_YOUR_CALM). */
#define RESET_BURST 1000
#define RESET_RATE 33
/* Other cheap-to-send, costly-to-serve frames (CVE-2019-9518 empty frames,
 * CVE-2019-9516/9514 streams the server must reset for their bad headers
 * or frames): the same kind of bucket each. */
#define JUNK_BURST 1000
#define JUNK_RATE 100

/* A token bucket: burst tokens, refilled at rate a second. */
typedef struct bucket {
  uint64_t tokens, at;
} bucket;

static void bucket_init(bucket *b, uint64_t burst, uint64_t now) {
  b->tokens = burst;
  b->at = now;
}

/* Takes a token; 0 when (almost) none was left: the limit. */
static int bucket_take(bucket *b, uint64_t burst, uint64_t rate, uint64_t now) {
  uint64_t secs = (now - b->at) / 1000000000ull;
  if (secs) {
    b->tokens += secs * rate;
    if (b->tokens > burst)
      b->tokens = burst;
    b->at += secs * 1000000000ull;
  }
  if (b->tokens <= 1) /* nghttp2 gives up when its bucket is empty */
    return 0;
  b->tokens--;
  return 1;
}

/* One HTTP/2 server connection. */
typedef struct sluice__sconn {
  sluice__conn conn;
  sluice__sconn_loop *cl;
  sluice__list link;   /* in cl->conns */
  char *peer_identity; /* verified client certificate subject, or NULL */
  sluice__list calls;  /* its calls' streams (sluice__sstream.link) */
  /* What its calls share (server_call.h), made with the first request. */
  sluice__scall_origin *origin;
  /* The request whose headers are arriving: header blocks never
   * interleave (RFC 9113 6.10), so one parse serves every stream in turn
   * (req_id's), and a call takes from it only what it reads later
   * (sluice__scall_take_request). One metadata list too, which a call
   * takes only when the client sent metadata of its own; NULL until
   * needed. */
  sluice__grpc_req req;
  int32_t req_id;   /* the stream the parse is for; 0: none */
  size_t hdr_bytes; /* its header list so far (RFC 9113 sizes) */
  sluice_metadata *req_md;
  sluice__load_pacer load_pacer; /* next load report due */
  /* Lifetime and keepalive: one timer for every deadline (0: none), all
   * sluice_now_ns(); armed for the earliest (rearm()). */
  uv_timer_t timer;
  sconn_stage stage;
  const char *drain_text; /* the final GOAWAY's debug text */
  int drain_shutdown;     /* the drain is the server's shutdown */
  uint64_t grace_ns;      /* drain time after the final GOAWAY; 0: none */
  uint64_t idle_since;    /* calls dropped to 0 (or the start) */
  uint64_t age_end;       /* max_age with jitter */
  uint64_t notice_end;    /* NOTICE: send the final GOAWAY by then */
  uint64_t drain_end;     /* DRAINING: close by then */
  uint64_t last_read;     /* last frame (its first bytes) read */
  uint64_t ka_deadline;   /* a keepalive PING is out: bytes due by then */
  uint64_t close_now;     /* CLOSING: close at the next timer */
  const char *close_text; /* CLOSING: why */
  uint64_t preface_end;   /* no client SETTINGS yet: close by then */
  int preface_done;       /* the client's preface (and TLS) completed */
  bucket resets;          /* rapid reset */
  bucket empty;           /* empty DATA frames */
  bucket errs;            /* streams reset for the client's errors */
  /* Ping enforcement (A8). */
  uint64_t last_good_ping;
  int have_good_ping;
  uint32_t strikes;
} sluice__sconn;

static void count(sluice__sconn *sc, sluice_server_conn_event ev) {
  __atomic_add_fetch(&sc->cl->shared->events[ev], 1, __ATOMIC_RELAXED);
}

static const sluice_server_opts *opts_of(const sluice__sconn *sc) {
  return sc->cl->shared->opts;
}

static void on_timer(uv_timer_t *t);

static uint64_t earliest(uint64_t a, uint64_t b) {
  return !a ? b : !b ? a : a < b ? a : b;
}

/* The next time something is due (0: nothing). */
static uint64_t next_due(const sluice__sconn *sc) {
  const sluice_server_opts *o = opts_of(sc);
  uint64_t due = 0;
  switch (sc->stage) {
  case SERVING:
    if (o->max_idle_ms && sluice__list_empty(&sc->calls))
      due = sc->idle_since + o->max_idle_ms * 1000000ull;
    due = earliest(due, sc->age_end);
    break;
  case NOTICE:
    due = sc->notice_end;
    break;
  case DRAINING:
    due = sc->drain_end;
    break;
  case CLOSING:
    return sc->close_now;
  }
  if (!sc->preface_done)
    due = earliest(due, sc->preface_end);
  if (o->keepalive_time_ms)
    due = earliest(due, sc->ka_deadline ? sc->ka_deadline
                                        : sc->last_read + o->keepalive_time_ms *
                                                              1000000ull);
  return due;
}

static void rearm(sluice__sconn *sc) {
  if (sc->conn.closing)
    return;
  uint64_t due = next_due(sc);
  if (!due) {
    uv_timer_stop(&sc->timer);
    return;
  }
  uint64_t now = sluice_now_ns();
  sluice__timer_start_deadline(&sc->timer, due > now ? due : now + 1, now,
                               on_timer);
}

/* Step two: GOAWAY with the last stream id processed. */
static void final_goaway(sluice__sconn *sc, uint64_t now) {
  nghttp2_session *s = sc->conn.session;
  sc->stage = DRAINING;
  if (!sc->drain_shutdown && sc->grace_ns)
    sc->drain_end = now + sc->grace_ns;
  nghttp2_submit_goaway(s, NGHTTP2_FLAG_NONE,
                        nghttp2_session_get_last_proc_stream_id(s),
                        NGHTTP2_NO_ERROR, (const uint8_t *)sc->drain_text,
                        strlen(sc->drain_text));
  if (sluice__list_empty(&sc->calls))
    sluice__conn_close_when_flushed(&sc->conn);
  sluice__conn_want_write(&sc->conn);
}

/* Step one: a shutdown notice (GOAWAY 2^31-1) and a PING; the final GOAWAY
 * follows on its ACK or after min(20 s, grace). grace_ns 0: no limit. */
static void begin_drain(sluice__sconn *sc, const char *text, int shutdown,
                        uint64_t grace_ns) {
  if (sc->stage != SERVING || !sc->conn.session || sc->conn.closing)
    return;
  uint64_t now = sluice_now_ns();
  sc->drain_text = text;
  sc->drain_shutdown = shutdown;
  sc->grace_ns = grace_ns;
  nghttp2_session *s = sc->conn.session;
  /* The PING follows once the notice is out (on_frame_send): nghttp2
   * would otherwise send it first. */
  if (nghttp2_submit_shutdown_notice(s) != 0 || (shutdown && grace_ns == 0)) {
    final_goaway(sc, now); /* nothing to wait for */
  } else {
    sc->stage = NOTICE;
    /* A shutdown's grace covers both steps: half of it at most waits for
     * the ACK, so that a peer that never answers (not a gRPC client) still
     * gets the final GOAWAY and a clean close before the grace ends. */
    uint64_t wait = NOTICE_MAX_NS;
    if (shutdown && grace_ns / 2 < wait)
      wait = grace_ns / 2;
    sc->notice_end = now + wait;
  }
  sluice__conn_want_write(&sc->conn);
  rearm(sc);
}

static void on_timer(uv_timer_t *t) {
  sluice__sconn *sc = t->data;
  if (sc->conn.closing || !sc->conn.session)
    return;
  const sluice_server_opts *o = opts_of(sc);
  uint64_t now = sluice_now_ns();
  if (sc->stage == CLOSING) {
    sluice__conn_linger_close(&sc->conn, sc->close_text);
    return;
  }
  if (!sc->preface_done && now >= sc->preface_end) {
    /* A GOAWAY where it can go (plaintext, or TLS up but no preface):
     * the peer learns why. */
    count(sc, SLUICE_SERVER_HANDSHAKE_TIMEOUTS);
    nghttp2_submit_goaway(sc->conn.session, NGHTTP2_FLAG_NONE, 0,
                          NGHTTP2_PROTOCOL_ERROR,
                          (const uint8_t *)"handshake_timeout", 17);
    sluice__conn_linger_close(&sc->conn, "handshake timeout");
    return;
  }
  if (sc->ka_deadline && now >= sc->ka_deadline) {
    count(sc, SLUICE_SERVER_KEEPALIVE_TIMEOUTS);
    sluice__conn_close(&sc->conn, "keepalive timeout");
    return;
  }
  if (sc->stage == DRAINING && sc->drain_end && now >= sc->drain_end) {
    count(sc, SLUICE_SERVER_GRACE_EXPIRED);
    sluice__conn_flush(&sc->conn);
    sluice__conn_close(&sc->conn, "drain grace ended");
    return;
  }
  if (sc->stage == NOTICE && now >= sc->notice_end)
    final_goaway(sc, now);
  if (sc->stage == SERVING) {
    if (sc->age_end && now >= sc->age_end) {
      count(sc, SLUICE_SERVER_GOAWAY_MAX_AGE);
      begin_drain(sc, "max_age", 0, o->max_age_grace_ms * 1000000ull);
    } else if (o->max_idle_ms && sluice__list_empty(&sc->calls) &&
               now >= sc->idle_since + o->max_idle_ms * 1000000ull) {
      count(sc, SLUICE_SERVER_GOAWAY_MAX_IDLE);
      begin_drain(sc, "max_idle", 0, o->max_age_grace_ms * 1000000ull);
    }
  }
  if (o->keepalive_time_ms && !sc->ka_deadline &&
      now >= sc->last_read + o->keepalive_time_ms * 1000000ull &&
      nghttp2_submit_ping(sc->conn.session, NGHTTP2_FLAG_NONE, NULL) == 0) {
    sc->ka_deadline = now + o->keepalive_timeout_ms * 1000000ull;
    sluice__conn_want_write(&sc->conn);
  }
  rearm(sc);
}

/* GOAWAY ENHANCE_YOUR_CALM with debug text text, then a lingering close
 * (reason) from the timer: not from inside nghttp2's callback. */
static void calm_goaway(sluice__sconn *sc, const char *text,
                        const char *reason) {
  nghttp2_session *s = sc->conn.session;
  sc->stage = CLOSING;
  sc->close_text = reason;
  nghttp2_submit_goaway(
      s, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(s),
      NGHTTP2_ENHANCE_YOUR_CALM, (const uint8_t *)text, strlen(text));
  sc->close_now = sluice_now_ns();
  sluice__conn_want_write(&sc->conn);
  rearm(sc);
}

/* A PING from the client (A8's enforcement): too frequent ones are
 * strikes; past max_ping_strikes, GOAWAY ENHANCE_YOUR_CALM. */
static void ping_received(sluice__sconn *sc) {
  const sluice_server_opts *o = opts_of(sc);
  if (sc->stage == CLOSING)
    return;
  uint64_t now = sluice_now_ns();
  uint64_t min_ns = o->ping_min_time_ms * 1000000ull;
  if (sluice__list_empty(&sc->calls) && !o->ping_without_calls)
    min_ns = NO_CALL_PING_NS;
  if (!sc->have_good_ping || now >= sc->last_good_ping + min_ns) {
    sc->have_good_ping = 1;
    sc->last_good_ping = now;
    return;
  }
  sc->strikes++;
  if (!o->max_ping_strikes || sc->strikes <= o->max_ping_strikes)
    return;
  count(sc, SLUICE_SERVER_GOAWAY_TOO_MANY_PINGS);
  calm_goaway(sc, "too_many_pings", "too many pings");
}

/* A RST_STREAM from the client: past the rapid-reset budget, GOAWAY
 * ENHANCE_YOUR_CALM. */
static void reset_received(sluice__sconn *sc) {
  if (sc->stage == CLOSING ||
      bucket_take(&sc->resets, RESET_BURST, RESET_RATE, sluice_now_ns()))
    return;
  count(sc, SLUICE_SERVER_GOAWAY_CALM);
  calm_goaway(sc, "rapid_reset", "rapid reset");
}

/* An empty DATA frame that does not end the stream, or a stream reset for
 * the client's fault: past their budget, GOAWAY ENHANCE_YOUR_CALM. */
static void junk_received(sluice__sconn *sc, bucket *b, const char *text) {
  if (sc->stage == CLOSING ||
      bucket_take(b, JUNK_BURST, JUNK_RATE, sluice_now_ns()))
    return;
  count(sc, SLUICE_SERVER_GOAWAY_CALM);
  calm_goaway(sc, text, text);
}

/* The call of stream id (its sluice__sstream), or NULL. */
static sluice__sstream *stream_of(nghttp2_session *s, int32_t id) {
  return nghttp2_session_get_stream_user_data(s, id);
}

/* Any frame read: the peer is alive (keepalive). */
static int on_begin_frame(nghttp2_session *s, const nghttp2_frame_hd *hd,
                          void *ud) {
  (void)s;
  (void)hd;
  sluice__sconn *sc = ud;
  /* The loop's cached time (uv_hrtime's clock, as sluice_now_ns, at most
   * one loop turn old): no clock read per frame for a figure checked in
   * seconds. */
  sc->last_read = uv_now(sluice__loop_uv(sc->conn.loop)) * 1000000ull;
  sc->ka_deadline = 0; /* the timer finds the next PING's time itself */
  return 0;
}

static int on_begin_headers(nghttp2_session *s, const nghttp2_frame *frame,
                            void *ud) {
  sluice__sconn *sc = ud;
  if (frame->hd.type != NGHTTP2_HEADERS ||
      frame->headers.cat != NGHTTP2_HCAT_REQUEST)
    return 0;
  if (!sc->origin && !(sc->origin = sluice__scall_origin_new(
                           sc->conn.peer, sc->peer_identity)))
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  if (sc->req_md)
    sluice__metadata_clear(sc->req_md); /* left by a block cut short */
  else if (sluice_metadata_new(&sc->req_md) != 0)
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  sluice__sstream *st =
      sluice__scall_new(&sc->cl->calls, &sc->conn, frame->hd.stream_id,
                        sc->origin, &sc->load_pacer);
  if (!st)
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* resets the stream */
  sluice__grpc_req_reset(&sc->req); /* a long :path of the last block */
  sluice__grpc_req_init(&sc->req, sc->req_md);
  sc->req_id = frame->hd.stream_id;
  sc->hdr_bytes = 0;
  sluice__list_push(&sc->calls, &st->link);
  nghttp2_session_set_stream_user_data(s, frame->hd.stream_id, st);
  return 0;
}

static int on_header(nghttp2_session *s, const nghttp2_frame *frame,
                     const uint8_t *name, size_t nlen, const uint8_t *value,
                     size_t vlen, uint8_t flags, void *ud) {
  (void)flags;
  sluice__sconn *sc = ud;
  if (frame->headers.cat != NGHTTP2_HCAT_REQUEST ||
      frame->hd.stream_id != sc->req_id || !stream_of(s, frame->hd.stream_id))
    return 0; /* trailers from a client carry nothing for unary calls */
  /* Past the limit the rest is dropped; the call fails once the block
   * ends (on_frame_recv). */
  sc->hdr_bytes += sluice__h2_field_size(nlen, vlen);
  if (sc->hdr_bytes > opts_of(sc)->max_header_list_size)
    return 0;
  /* An entry without memory is lost; the request goes on. */
  sluice__grpc_req_header(&sc->req, (const char *)name, nlen, value, vlen);
  return 0;
}

static int on_frame_recv(nghttp2_session *s, const nghttp2_frame *frame,
                         void *ud) {
  sluice__sconn *sc = ud;
  if (frame->hd.type == NGHTTP2_SETTINGS && !sc->preface_done) {
    sc->preface_done = 1; /* the magic came first, or nghttp2 had failed */
    rearm(sc);
  }
  if (frame->hd.type == NGHTTP2_RST_STREAM) {
    reset_received(sc);
    return 0;
  }
  if (frame->hd.type == NGHTTP2_DATA && frame->hd.length == 0 &&
      !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
    junk_received(sc, &sc->empty, "empty_frames");
  if (frame->hd.type == NGHTTP2_PING) {
    if (!(frame->hd.flags & NGHTTP2_FLAG_ACK))
      ping_received(sc);
    else if (sc->stage == NOTICE &&
             memcmp(frame->ping.opaque_data, drain_ping, 8) == 0) {
      final_goaway(sc, sluice_now_ns());
      rearm(sc);
    }
    return 0;
  }
  if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA)
    return 0;
  sluice__sstream *st = stream_of(s, frame->hd.stream_id);
  if (!st)
    return 0;
  const sluice__grpc_req *rq = &sc->req;
  if (frame->hd.type == NGHTTP2_HEADERS &&
      frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
    if (frame->hd.stream_id != sc->req_id)
      return 0; /* cannot be: its block began with on_begin_headers */
    sc->req_id = 0;
    sc->req.md = NULL; /* the list is the call's now, or emptied */
    sluice__scall_take_request(st, rq, &sc->req_md, &sc->origin);
    if (rq->have_timeout)
      st->deadline_ns = sluice__grpc_req_deadline(rq, sluice_now_ns());
    uint32_t max_hl = opts_of(sc)->max_header_list_size;
    if (sc->hdr_bytes > max_hl) {
      char msg[160];
      snprintf(msg, sizeof msg,
               "request header list too large: %zu bytes, the server takes "
               "%" PRIu32 " (SETTINGS_MAX_HEADER_LIST_SIZE)",
               sc->hdr_bytes, max_hl);
      sluice__scall_fail(st, SLUICE_STATUS_RESOURCE_EXHAUSTED, msg);
      return 0;
    }
    /* Headers complete: refuse early what can never succeed, so a client
     * does not stream a large body for nothing (wire/grpc_headers.h: a bad
     * content-type is answered with HTTP 415). */
    sluice__grpc_req_verdict v = sluice__grpc_req_done(rq);
    if (v.fault != SLUICE__GRPC_REQ_OK) {
      sluice__scall_fail(st, v.code, v.text);
      return 0;
    }
    sluice__route *route =
        sluice__routes_find(sc->cl->shared->routes, rq->path, strlen(rq->path));
    if (!route || (!route->dispatch && !route->raw)) {
      char msg[300];
      snprintf(msg, sizeof msg, "unknown method %.250s", rq->path);
      sluice__scall_fail(st, SLUICE_STATUS_UNIMPLEMENTED, msg);
      return 0;
    }
    sluice__scall_headers_done(st, route);
  }
  if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)
    sluice__scall_request_done(st);
  return 0;
}

static int on_data(nghttp2_session *s, uint8_t flags, int32_t id,
                   const uint8_t *data, size_t len, void *ud) {
  (void)flags;
  (void)ud;
  sluice__sstream *st = stream_of(s, id);
  if (!st) {
    nghttp2_session_consume(s, id, len);
    return 0;
  }
  sluice__scall_data(st, data, len);
  return 0;
}

/* After our trailers, a client that has not finished sending gets
 * RST_STREAM(NO_ERROR), as gRPC servers do: the call is over. */
static int on_frame_send(nghttp2_session *s, const nghttp2_frame *frame,
                         void *ud) {
  sluice__sconn *sc = ud;
  if (frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) {
    sc->have_good_ping = 0; /* A8: sending HEADERS or DATA resets */
    sc->strikes = 0;
  }
  if (frame->hd.type == NGHTTP2_RST_STREAM) {
    switch (frame->rst_stream.error_code) {
    case NGHTTP2_PROTOCOL_ERROR:
    case NGHTTP2_FLOW_CONTROL_ERROR:
    case NGHTTP2_STREAM_CLOSED:
    case NGHTTP2_FRAME_SIZE_ERROR:
    case NGHTTP2_REFUSED_STREAM:
    case NGHTTP2_COMPRESSION_ERROR:
      junk_received(sc, &sc->errs, "stream_errors");
      break;
    default:
      break;
    }
    return 0;
  }
  if (frame->hd.type == NGHTTP2_GOAWAY && sc->stage == NOTICE &&
      frame->goaway.last_stream_id == INT32_MAX) {
    if (nghttp2_submit_ping(s, NGHTTP2_FLAG_NONE, drain_ping) != 0)
      final_goaway(sc, sluice_now_ns());
    sluice__conn_want_write(&sc->conn);
    return 0;
  }
  if (frame->hd.type != NGHTTP2_HEADERS ||
      !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM) ||
      nghttp2_session_get_stream_remote_close(s, frame->hd.stream_id) != 0)
    return 0;
  nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, frame->hd.stream_id,
                            NGHTTP2_NO_ERROR);
  sluice__conn_want_write(&sc->conn);
  return 0;
}

static int on_stream_close(nghttp2_session *s, int32_t id, uint32_t err,
                           void *ud) {
  sluice__sconn *sc = ud;
  sluice__sstream *st = stream_of(s, id);
  if (!st)
    return 0;
  nghttp2_session_set_stream_user_data(s, id, NULL);
  sluice__list_remove(&st->link);
  sluice__scall_stream_closed(st, err);
  if (!sluice__list_empty(&sc->calls))
    return 0;
  if (sc->stage == DRAINING)
    sluice__conn_close_when_flushed(&sc->conn);
  else if (sc->stage == SERVING && opts_of(sc)->max_idle_ms) {
    sc->idle_since = sluice_now_ns();
    rearm(sc);
  }
  return 0;
}

static nghttp2_session_callbacks *g_callbacks;
static uv_once_t g_once = UV_ONCE_INIT;

static void init_callbacks(void) {
  nghttp2_session_callbacks *cbs;
  if (nghttp2_session_callbacks_new(&cbs) != 0)
    return;
  nghttp2_session_callbacks_set_on_begin_frame_callback(cbs, on_begin_frame);
  nghttp2_session_callbacks_set_on_begin_headers_callback(cbs,
                                                          on_begin_headers);
  nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data);
  nghttp2_session_callbacks_set_send_data_callback(cbs,
                                                   sluice__stream_send_data);
  nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
  nghttp2_session_callbacks_set_on_frame_send_callback(cbs, on_frame_send);
  g_callbacks = cbs;
}

/* After a wave of connections closed (a peak of at least TRIM_PEAK, then
 * every halving from there and the last one), what they used goes back to
 * the system: malloc keeps freed memory for reuse, and the blocks the loop
 * thread caches (nghttp2's, call objects) are scattered through it and
 * would pin its pages. Measured: a server that held 1,000 connections kept
 * all of their memory after they closed (4.3x its starting RSS) without
 * this. A wave of n connections costs about log2(n) trims. */
static void note_closed(sluice__sconn_loop *cl) {
  if (sluice__wave_down(&cl->conns_wave, SLUICE__SCONN_TRIM_PEAK))
    sluice__scall_loop_trim(&cl->calls);
}

/* The connection's last handle is closed: nothing of it is left. */
static void on_timer_closed(uv_handle_t *h) {
  sluice__sconn *sc = h->data;
  sluice__sconn_loop *cl = sc->cl;
  free(sc);
  note_closed(cl);
}

static void on_closed(sluice__conn *conn, const char *reason) {
  (void)reason;
  sluice__sconn *sc = SLUICE__CONTAINER_OF(conn, sluice__sconn, conn);
  /* nghttp2_session_del does not report stream closes: end each call. */
  for (sluice__list *n; (n = sluice__list_head(&sc->calls));) {
    sluice__list_remove(n);
    sluice__scall_stream_closed(SLUICE__CONTAINER_OF(n, sluice__sstream, link),
                                NGHTTP2_CANCEL);
  }
  if (conn->session)
    sluice__h2session_del(conn->session, &conn->h2guard);
  sluice__list_remove(&sc->link);
  sluice__sconn_shared *sh = sc->cl->shared;
  free(sc->peer_identity);
  sc->peer_identity = NULL;
  sluice__scall_origin_unref(sc->origin); /* its calls keep theirs */
  sc->origin = NULL;
  sluice_metadata_del(sc->req_md);
  sc->req_md = NULL;
  sluice__grpc_req_reset(&sc->req);
  uv_close((uv_handle_t *)&sc->timer, on_timer_closed); /* frees sc */
  __atomic_sub_fetch(&sh->open, 1, __ATOMIC_RELAXED);
  uv_mutex_lock(&sh->mu);
  sh->live--;
  uv_cond_broadcast(&sh->cv);
  uv_mutex_unlock(&sh->mu);
}

/* TLS established: remember who the client proved to be (mutual TLS). */
static void on_established(sluice__conn *conn) {
  sluice__sconn *sc = SLUICE__CONTAINER_OF(conn, sluice__sconn, conn);
  sc->peer_identity = sluice__tls_peer_subject(conn->tls);
}

/* A flood (transport/conn.c sent GOAWAY ENHANCE_YOUR_CALM). */
static void on_calm(sluice__conn *conn) {
  count(SLUICE__CONTAINER_OF(conn, sluice__sconn, conn),
        SLUICE_SERVER_GOAWAY_CALM);
}

static const sluice__conn_hooks hooks = {on_closed, NULL, on_established,
                                         on_calm};

int sluice__sconn_accept(sluice__sconn_loop *cl, uv_os_sock_t fd, int is_pipe) {
  sluice__sconn_shared *sh = cl->shared;
  uv_once(&g_once, init_callbacks);
  if (!g_callbacks)
    return SLUICE_ERR_NOMEM;
  sluice__sconn *sc = sluice__calloc(1, sizeof *sc);
  if (!sc)
    return SLUICE_ERR_NOMEM;
  sc->cl = cl;
  if (sluice__conn_init(&sc->conn, sluice__sconn_loop_loop(cl), is_pipe,
                        &hooks) != 0) {
    free(sc);
    return SLUICE_ERR_NOMEM;
  }
  uv_timer_init(sluice__loop_uv(sluice__sconn_loop_loop(cl)), &sc->timer);
  sc->timer.data = sc;
  sluice__list_init(&sc->calls);
  sluice__list_push(&cl->conns, &sc->link);
  sluice__wave_up(&cl->conns_wave);
  uv_mutex_lock(&sh->mu);
  sh->live++;
  uv_mutex_unlock(&sh->mu);
  count(sc, SLUICE_SERVER_CONNECTIONS_ACCEPTED);
  uint64_t now = sluice_now_ns();
  sc->idle_since = sc->last_read = now;
  bucket_init(&sc->resets, RESET_BURST, now);
  bucket_init(&sc->empty, JUNK_BURST, now);
  bucket_init(&sc->errs, JUNK_BURST, now);
  if (sh->opts->handshake_timeout_ms)
    sc->preface_end = now + sh->opts->handshake_timeout_ms * 1000000ull;
  else
    sc->preface_done = 1;
  if (sh->opts->max_age_ms) {
    /* +-10 % jitter (A9), from a hash of the connection and the time */
    uint64_t x = (uint64_t)(uintptr_t)sc ^ now;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    double f = 0.9 + 0.2 * ((double)(x % 1000001) / 1000000.0);
    sc->age_end = now + (uint64_t)((double)sh->opts->max_age_ms * f * 1e6);
  }
  nghttp2_session *s;
  if (sluice__conn_open_fd(&sc->conn, fd) != 0 ||
      sluice__h2session_new(&s, SLUICE__H2_SERVER, g_callbacks, sc,
                            &sc->conn.h2guard) != 0) {
    /* on_closed frees sc; the descriptor is closed with the handle if it
     * was adopted, by the caller otherwise */
    sluice__conn_close(&sc->conn, "cannot set up connection");
    return 0;
  }
  sc->conn.session = s;
  if (sh->opts->tls) {
    sluice__tls *t = sluice__tls_new(sh->opts->tls, 0, NULL);
    if (!t) {
      sluice__conn_close(&sc->conn, "out of memory");
      return 0;
    }
    sluice__conn_set_tls(&sc->conn, t);
  }
  sluice__h2session_settings(s, SLUICE__H2_SERVER,
                             sh->opts->max_concurrent_streams,
                             sh->opts->max_header_list_size);
  sluice__conn_start(&sc->conn);
  rearm(sc);
  return 0;
}

void sluice__sconn_loop_goaway(sluice__sconn_loop *cl, uint64_t grace_ms) {
  /* Streams up to the last one we saw go on; the client retries the rest
   * elsewhere. nghttp2 ends the session once they are done. */
  SLUICE__LIST_FOREACH_SAFE(n, &cl->conns) {
    begin_drain(SLUICE__CONTAINER_OF(n, sluice__sconn, link), "shutdown", 1,
                grace_ms * 1000000ull);
  }
}

uint64_t sluice__sconn_events(const sluice__sconn_shared *sh, unsigned ev) {
  return ev < SLUICE__SCONN_EVENTS
             ? __atomic_load_n(&sh->events[ev], __ATOMIC_RELAXED)
             : 0;
}

void sluice__sconn_loop_close(sluice__sconn_loop *cl, const char *reason) {
  SLUICE__LIST_FOREACH_SAFE(n, &cl->conns) {
    sluice__sconn *sc = SLUICE__CONTAINER_OF(n, sluice__sconn, link);
    if (sc->conn.session && !sc->conn.closing && sc->stage == NOTICE)
      final_goaway(sc, sluice_now_ns()); /* the last stream id, at least */
    if (sc->conn.session)
      sluice__conn_flush(&sc->conn);
    sluice__conn_close(&sc->conn, reason);
  }
}

/* ---- the server's and the loops' */

void sluice__sconn_shared_init(sluice__sconn_shared *sh,
                               const sluice_server_opts *opts,
                               sluice__routes *routes) {
  sh->opts = opts;
  sh->routes = routes;
  sh->live = 0;
  memset(sh->events, 0, sizeof sh->events);
  uv_mutex_init(&sh->mu);
  uv_cond_init(&sh->cv);
}

void sluice__sconn_shared_destroy(sluice__sconn_shared *sh) {
  uv_mutex_destroy(&sh->mu);
  uv_cond_destroy(&sh->cv);
}

void sluice__sconn_wait_gone(sluice__sconn_shared *sh, uint64_t end_ns) {
  uv_mutex_lock(&sh->mu);
  while (sh->live > 0) {
    uint64_t now = uv_hrtime();
    if (now >= end_ns)
      break;
    uv_cond_timedwait(&sh->cv, &sh->mu, end_ns - now);
  }
  uv_mutex_unlock(&sh->mu);
}

void sluice__sconn_loop_init(sluice__sconn_loop *cl, sluice__sconn_shared *sh) {
  cl->shared = sh;
  sluice__list_init(&cl->conns);
  cl->conns_wave = (sluice__wave){0, 0, 0};
}
