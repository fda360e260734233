/* The client's final status of a call whose stream closed: from what the
 * response said (wire/grpc_headers.h), what the call saw locally and the
 * stream's HTTP/2 error code, to a code, a text and what to do next
 * (complete now, wait for held messages, or replay the call transparently).
 *
 * Pure: no clock (the caller passes now), no I/O, no call structs. The
 * caller keeps every side effect: completing the call, telling the
 * balancer, rewinding the send queue and re-queueing a retried call. Any
 * thread; nothing is kept between calls. */
#ifndef SLUICE_WIRE_FINAL_STATUS_H
#define SLUICE_WIRE_FINAL_STATUS_H

#include <stddef.h>
#include <stdint.h>

#include <sluice/method.h>
#include <sluice/status.h>

#include "wire/grpc_headers.h"

/* A server that cancels the stream (RST_STREAM(CANCEL)) this close to the
 * call's deadline, or later, is taken to have run out of time: its timer
 * beat ours, and the call ends DEADLINE_EXCEEDED rather than CANCELLED. */
#define SLUICE__DEADLINE_SLACK_NS 5000000ull

/* What the client knows of a call when its stream closes. */
typedef struct sluice__final_facts {
  const sluice__grpc_resp *rx;  /* what the response said (not NULL) */
  sluice_status_code fail_code; /* a local failure while receiving (bad
                                   message, limit, truncation); OK: none */
  const char *fail_reason;      /* its text (borrowed; NULL reads as "") */
  sluice_call_kind kind;        /* the method's: unary and client-streaming
                                   calls expect exactly one response */
  int n_msgs;                   /* response messages delivered so far */
  int holding;                  /* messages received but still held (the
                                   receiver is paused) */
  uint64_t deadline_ns;         /* the call's deadline; 0: none */
} sluice__final_facts;

typedef enum sluice__final_action {
  SLUICE__FINAL_COMPLETE, /* complete the call with code and text now */
  SLUICE__FINAL_HOLD,     /* the status is OK but messages are held: tell the
                             balancer now, complete once they are delivered
                             (then ask sluice__final_status_drained) */
  SLUICE__FINAL_RETRY     /* the server never processed the stream
                             (REFUSED_STREAM, also what nghttp2 reports for
                             streams above a GOAWAY's last-stream-id, and no
                             response headers): replay it on another stream
                             if the request can be rewound; if it cannot,
                             complete with code and text */
} sluice__final_action;

typedef struct sluice__final {
  sluice__final_action action;
  sluice_status_code code;
  const char *text; /* never NULL: a static string, facts->fail_reason,
                       facts->rx->grpc_message, or buf */
} sluice__final;

/* Decides the final status of a call whose stream closed with h2_error
 * (the RST_STREAM code, NO_ERROR for a normal close), first match wins:
 *  1. a local failure: fail_code, fail_reason;
 *  2. grpc-status: its code and grpc-message ("" without one); if OK with
 *     messages held: HOLD; if OK for a unary or client-streaming method that
 *     did not get exactly one message: UNIMPLEMENTED "server answered a
 *     unary call with N response messages" ("client-streaming call");
 *  3. response headers whose :status is not 200: sluice__status_from_http,
 *     "peer answered HTTP status N without grpc-status (not a gRPC
 *     server?)";
 *  4. a bad content-type: UNKNOWN "peer answered with a content-type that
 *     is not application/grpc";
 *  5. REFUSED_STREAM without response headers: RETRY, with (if the caller
 *     cannot replay) UNAVAILABLE "stream reset by peer (HTTP/2 error
 *     REFUSED_STREAM)";
 *  6. CANCEL with a deadline that now_ns is within SLUICE__DEADLINE_SLACK_NS
 *     of (or past): DEADLINE_EXCEEDED "deadline exceeded (cancelled by the
 *     server)";
 *  7. any other error: sluice__status_from_h2_error, "stream reset by peer
 *     (HTTP/2 error NAME)";
 *  8. NO_ERROR: INTERNAL "server closed the stream without sending
 *     grpc-status".
 * buf (len bytes; 200 is enough for every text) receives the texts built
 * here, truncated to fit. now_ns is read only in case 6: a caller may pass
 * 0 unless h2_error is CANCEL (0x8) and deadline_ns is set. */
sluice__final sluice__final_status(const sluice__final_facts *f,
                                   uint32_t h2_error, uint64_t now_ns,
                                   char *buf, size_t len);

/* After a HOLD: every held message has been delivered (without failing).
 * COMPLETE with UNIMPLEMENTED "server sent no response message" when a unary
 * or client-streaming call got none (more than one fails as it arrives),
 * else OK with grpc-message ("" without one). */
sluice__final sluice__final_status_drained(const sluice__final_facts *f);

#endif
