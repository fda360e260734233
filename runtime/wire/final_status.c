/* The client's final status decision, without its side effects. */
#include "wire/final_status.h"

#include <stdio.h>

#include "wire/status_map.h"

#define H2_NO_ERROR 0x0
#define H2_REFUSED_STREAM 0x7
#define H2_CANCEL 0x8

static int single_response(sluice_call_kind k) {
  return k == SLUICE_CALL_UNARY || k == SLUICE_CALL_CLIENT_STREAMING;
}

static sluice__final complete(sluice_status_code code, const char *text) {
  sluice__final d = {SLUICE__FINAL_COMPLETE, code, text ? text : ""};
  return d;
}

sluice__final sluice__final_status(const sluice__final_facts *f,
                                   uint32_t h2_error, uint64_t now_ns,
                                   char *buf, size_t len) {
  const sluice__grpc_resp *rx = f->rx;
  if (f->fail_code != SLUICE_STATUS_OK)
    return complete(f->fail_code, f->fail_reason);
  if (rx->have_grpc_status) {
    sluice__final d = complete(rx->grpc_status, rx->grpc_message);
    if (d.code == SLUICE_STATUS_OK && f->holding) {
      d.action = SLUICE__FINAL_HOLD;
    } else if (d.code == SLUICE_STATUS_OK && single_response(f->kind) &&
               f->n_msgs != 1) {
      snprintf(buf, len, "server answered a %s call with %d response messages",
               f->kind == SLUICE_CALL_UNARY ? "unary" : "client-streaming",
               f->n_msgs);
      d = complete(SLUICE_STATUS_UNIMPLEMENTED, buf);
    }
    return d;
  }
  if (rx->got_headers && rx->http_status != 200) {
    snprintf(buf, len,
             "peer answered HTTP status %d without grpc-status (not a gRPC "
             "server?)",
             rx->http_status);
    return complete(sluice__status_from_http(rx->http_status), buf);
  }
  if (rx->bad_content_type)
    return complete(
        SLUICE_STATUS_UNKNOWN,
        "peer answered with a content-type that is not application/grpc");
  if (h2_error == H2_CANCEL && f->deadline_ns &&
      now_ns + SLUICE__DEADLINE_SLACK_NS >= f->deadline_ns)
    return complete(SLUICE_STATUS_DEADLINE_EXCEEDED,
                    "deadline exceeded (cancelled by the server)");
  if (h2_error != H2_NO_ERROR) {
    snprintf(buf, len, "stream reset by peer (HTTP/2 error %s)",
             sluice__h2_error_name(h2_error));
    sluice__final d = complete(sluice__status_from_h2_error(h2_error), buf);
    /* Never processed by the server (REFUSED_STREAM, or above a GOAWAY's
     * last-stream-id): gRPC retries such a call transparently. */
    if (h2_error == H2_REFUSED_STREAM && !rx->got_headers)
      d.action = SLUICE__FINAL_RETRY;
    return d;
  }
  return complete(SLUICE_STATUS_INTERNAL,
                  "server closed the stream without sending grpc-status");
}

sluice__final sluice__final_status_drained(const sluice__final_facts *f) {
  if (single_response(f->kind) && f->n_msgs != 1)
    return complete(SLUICE_STATUS_UNIMPLEMENTED,
                    "server sent no response message");
  return complete(SLUICE_STATUS_OK, f->rx->grpc_message);
}
