/* A stream's endpoint, shared by client attempts and server calls. */
#include "transport/stream.h"

#include <stdio.h>
#include <string.h>

void sluice__stream_init(sluice__stream *s, sluice__sendq *sendq,
                         uint32_t max_msg, sluice__deliver_fn deliver,
                         void *owner, const sluice__stream_ops *ops) {
  s->conn = NULL;
  s->id = 0;
  s->sendq = sendq;
  s->ops = ops;
  s->run = 0;
  sluice__recv_init(&s->recv, max_msg, deliver, owner, 0);
}

void sluice__stream_detach(sluice__stream *s) {
  size_t left = sluice__recv_take_unconsumed(&s->recv);
  if (left && s->conn && s->conn->session)
    nghttp2_session_consume_connection(s->conn->session, left);
  s->run = 0;
  s->conn = NULL;
}

ssize_t sluice__stream_read(sluice__stream *s, size_t len, uint32_t *flags) {
  if (s->ops && s->ops->quantum && s->run >= s->ops->quantum && s->conn &&
      sluice__conn_yield(s->conn, s->id) == 0) {
    /* Its turn is over: behind the others, resumed by the flush. */
    s->run = 0;
    return NGHTTP2_ERR_DEFERRED;
  }
  size_t n = 0;
  sluice__sendq_state st = sluice__sendq_peek(s->sendq, len, &n);
  if (st == SLUICE__SENDQ_EOF)
    *flags |= NGHTTP2_DATA_FLAG_EOF;
  if (st == SLUICE__SENDQ_DEFERRED)
    return NGHTTP2_ERR_DEFERRED;
  *flags |= NGHTTP2_DATA_FLAG_NO_COPY;
  return (ssize_t)n;
}

/* nghttp2's buf is not used: the bytes go out through
 * sluice__stream_send_data, one copy fewer per byte sent. */
static ssize_t provider_read(nghttp2_session *session, int32_t stream_id,
                             uint8_t *buf, size_t len, uint32_t *flags,
                             nghttp2_data_source *src, void *ud) {
  (void)session;
  (void)stream_id;
  (void)buf;
  (void)ud;
  sluice__stream *s = src->ptr;
  if (s->ops && s->ops->read)
    return s->ops->read(s, len, flags);
  return sluice__stream_read(s, len, flags);
}

int sluice__stream_send_data(nghttp2_session *session, nghttp2_frame *frame,
                             const uint8_t *framehd, size_t length,
                             nghttp2_data_source *source, void *ud) {
  (void)session;
  (void)ud;
  sluice__stream *s = source->ptr;
  if (!s->conn) /* detached: the stream is ending; reset it, not the link */
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  int ready = 0;
  int err = sluice__conn_frame_data(s->conn, framehd, frame->data.padlen,
                                    s->sendq, length, &ready);
  if (err)
    return err;
  s->run += (uint32_t)length;
  if (s->ops && s->ops->on_read)
    s->ops->on_read(s, length, ready);
  return 0;
}

void sluice__stream_set_incremental(sluice__stream *s) {
  nghttp2_extpri pri = {NGHTTP2_EXTPRI_DEFAULT_URGENCY, 1};
  /* Fails only for a client session or an unknown stream: then there is
   * nothing to schedule. */
  if (s->conn)
    (void)nghttp2_session_change_extpri_stream_priority(s->conn->session, s->id,
                                                        &pri, 1);
}

nghttp2_data_provider sluice__stream_provider(sluice__stream *s) {
  nghttp2_data_provider dp;
  dp.source.ptr = s;
  dp.read_callback = provider_read;
  return dp;
}

void sluice__stream_consume(sluice__stream *s, size_t n) {
  if (n && s->conn && s->conn->session) {
    nghttp2_session_consume(s->conn->session, s->id, n);
    sluice__conn_want_write(s->conn);
  }
}

void sluice__stream_resume_send(sluice__stream *s) {
  if (s->conn && s->conn->session) {
    nghttp2_session_resume_data(s->conn->session, s->id);
    sluice__conn_want_write(s->conn);
  }
}

void sluice__stream_reset(sluice__stream *s, uint32_t h2_error) {
  if (s->conn && s->conn->session) {
    nghttp2_submit_rst_stream(s->conn->session, NGHTTP2_FLAG_NONE, s->id,
                              h2_error);
    sluice__conn_want_write(s->conn);
  }
}

sluice_status_code sluice__stream_data_in(sluice__stream *s,
                                          const uint8_t *data, size_t len,
                                          char *buf, size_t cap,
                                          const char **reason) {
  size_t consume = 0;
  *reason = "";
  sluice_status_code code =
      sluice__recv_feed(&s->recv, data, len, &consume, reason);
  sluice__stream_consume(s, consume);
  if (code == SLUICE_STATUS_RESOURCE_EXHAUSTED &&
      sluice__deframer_last_len(&s->recv.deframer)) {
    snprintf(buf, cap, "received message larger than max (%u vs. %u)",
             sluice__deframer_last_len(&s->recv.deframer),
             s->recv.deframer.max_size);
    *reason = buf;
  }
  return code;
}

int sluice__stream_drain(sluice__stream *s) {
  size_t n = 0;
  int rv = sluice__recv_drain(&s->recv, &n);
  /* Also after a failure: what was delivered is the connection's window. */
  sluice__stream_consume(s, n);
  return rv;
}
