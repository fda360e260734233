/* echo_server --raw: bench.Echo served raw (sluice_server_add_raw_service).
 *
 * Unary answers with the request's own buffer: the bytes the library
 * reassembled the request in go back out as the response, no protobuf
 * decoding or encoding and no copy in sluice for a message that spanned
 * DATA frames. Bidi sends every message buffer back as it arrives; when the
 * send queue is full (SLUICE_ERR_FULL) it keeps that one buffer (no copy:
 * it is still ours), pauses the call's receiving side and sends it on
 * on_send_ready. Upload and Download (the bulk rows) are not served raw:
 * they answer UNIMPLEMENTED. */
#include "echo_raw.h"

#include <stdlib.h>

#include "echo.sluice.h"

static const sluice_method_desc *const UNARY = &bench__echo__sluice_methods[0];
static const sluice_method_desc *const BIDI = &bench__echo__sluice_methods[1];

/* ---- Bidi: every callback on the call's loop thread, no locks */

typedef struct raw_bidi {
  sluice_buf *pending; /* the message the full send queue refused */
  int half_closed;
  int finished;
} raw_bidi;

static void bidi_finish(raw_bidi *s, sluice_server_call *call,
                        sluice_status_code code, const char *message) {
  if (s->finished)
    return;
  s->finished = 1;
  sluice_server_call_finish(call, code, message, NULL);
}

static void on_message(sluice_server_call *call, sluice_buf *msg, void *ud) {
  raw_bidi *s = ud;
  if (s->finished) {
    sluice_buf_free(msg);
    return;
  }
  int rc = sluice_server_call_send_buf(call, msg);
  if (rc == 0)
    return;
  if (rc != SLUICE_ERR_FULL) {
    sluice_buf_free(msg);
    bidi_finish(s, call, SLUICE_STATUS_INTERNAL, sluice_strerror(rc));
    return;
  }
  s->pending = msg; /* refused, still ours */
  sluice_server_call_set_recv_paused(call, 1);
}

static void on_send_ready(sluice_server_call *call, void *ud) {
  raw_bidi *s = ud;
  if (!s->pending || s->finished)
    return;
  int rc = sluice_server_call_send_buf(call, s->pending);
  if (rc == SLUICE_ERR_FULL)
    return; /* another on_send_ready follows */
  if (rc != 0)
    sluice_buf_free(s->pending);
  s->pending = NULL;
  if (rc != 0)
    bidi_finish(s, call, SLUICE_STATUS_INTERNAL, sluice_strerror(rc));
  else if (s->half_closed)
    bidi_finish(s, call, SLUICE_STATUS_OK, NULL);
  else
    sluice_server_call_set_recv_paused(call, 0);
}

static void on_half_close(sluice_server_call *call, void *ud) {
  raw_bidi *s = ud;
  s->half_closed = 1;
  if (!s->pending) /* else once the last echo is queued */
    bidi_finish(s, call, SLUICE_STATUS_OK, NULL);
}

static void on_done(sluice_server_call *call, int cancelled, void *ud) {
  (void)cancelled;
  raw_bidi *s = ud;
  bidi_finish(s, call, SLUICE_STATUS_CANCELLED, NULL);
  sluice_buf_free(s->pending);
  free(s);
}

static const sluice_server_call_raw_handlers bidi_handlers = {
    on_message, on_half_close, on_send_ready, on_done};

static void dispatch(sluice_server_call *call, sluice_buf *req, void *ud) {
  (void)ud;
  const sluice_method_desc *m = sluice_server_call_method(call);
  if (m == UNARY) {
    if (sluice_server_call_finish_buf(call, SLUICE_STATUS_OK, NULL, req) != 0)
      sluice_buf_free(req);
    return;
  }
  sluice_buf_free(req);
  if (m != BIDI) {
    sluice_server_call_finish(call, SLUICE_STATUS_UNIMPLEMENTED,
                              "not served by echo_server --raw", NULL);
    return;
  }
  raw_bidi *s = calloc(1, sizeof *s);
  if (s == NULL ||
      sluice_server_call_set_raw_handlers(call, &bidi_handlers, s) != 0) {
    free(s);
    sluice_server_call_finish(call, SLUICE_STATUS_RESOURCE_EXHAUSTED,
                              "cannot set up the call", NULL);
  }
}

int echo_raw_register(sluice_server *srv) {
  return sluice_server_add_raw_service(srv, &bench__echo__sluice_service,
                                       dispatch, NULL);
}
