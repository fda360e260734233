/* wire/final_status.c: every branch of the client's final status decision,
 * its precedence, its exact texts, the transparent-retry and hold verdicts,
 * the deadline slack; and the HTTP/2 error names against nghttp2's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include <nghttp2/nghttp2.h>

#include "wire/final_status.h"
#include "wire/grpc_headers.h"
#include "wire/status_map.h"

typedef struct {
  sluice__grpc_resp rx;
  sluice__final_facts f;
  char buf[200];
} fixture;

static void fx_init(fixture *x, sluice_call_kind kind) {
  memset(x, 0, sizeof *x);
  sluice__grpc_resp_init(&x->rx);
  x->f.rx = &x->rx;
  x->f.fail_code = SLUICE_STATUS_OK;
  x->f.kind = kind;
}

/* The response headers of a gRPC server: :status 200, got_headers. */
static void fx_headers(fixture *x, int http_status) {
  x->rx.http_status = http_status;
  x->rx.got_headers = 1;
}

static void fx_status(fixture *x, sluice_status_code code, char *message) {
  x->rx.have_grpc_status = 1;
  x->rx.grpc_status = code;
  x->rx.grpc_message = message; /* borrowed: not reset */
}

static sluice__final decide(fixture *x, uint32_t h2_error, uint64_t now) {
  memset(x->buf, 0, sizeof x->buf);
  return sluice__final_status(&x->f, h2_error, now, x->buf, sizeof x->buf);
}

static void expect(sluice__final d, sluice__final_action action,
                   sluice_status_code code, const char *text) {
  assert_non_null(d.text);
  if (d.action != action || d.code != code || strcmp(d.text, text) != 0)
    fail_msg("got {%d, %d, \"%s\"}, want {%d, %d, \"%s\"}", d.action, d.code,
             d.text, action, code, text);
}

static void local_failure_first(void **state) {
  (void)state;
  fixture x;
  fx_init(&x, SLUICE_CALL_UNARY);
  fx_headers(&x, 200);
  char m[] = "fine";
  fx_status(&x, SLUICE_STATUS_OK, m);
  x.rx.bad_content_type = 1;
  x.f.fail_code = SLUICE_STATUS_RESOURCE_EXHAUSTED;
  x.f.fail_reason = "received message larger than max (9 vs. 4)";
  x.f.holding = 1;
  /* Whatever the server said and however the stream ended. */
  uint32_t errs[] = {NGHTTP2_NO_ERROR, NGHTTP2_REFUSED_STREAM, NGHTTP2_CANCEL};
  for (size_t i = 0; i < 3; i++) {
    sluice__final d = decide(&x, errs[i], 0);
    expect(d, SLUICE__FINAL_COMPLETE, SLUICE_STATUS_RESOURCE_EXHAUSTED,
           "received message larger than max (9 vs. 4)");
    assert_ptr_equal(d.text, x.f.fail_reason); /* not copied */
  }
  /* A NULL reason reads as "". */
  x.f.fail_reason = NULL;
  expect(decide(&x, 0, 0), SLUICE__FINAL_COMPLETE,
         SLUICE_STATUS_RESOURCE_EXHAUSTED, "");
}

static void grpc_status_from_server(void **state) {
  (void)state;
  fixture x;
  fx_init(&x, SLUICE_CALL_UNARY);
  fx_headers(&x, 200);
  char m[] = "no such user";
  fx_status(&x, SLUICE_STATUS_NOT_FOUND, m);
  sluice__final d = decide(&x, NGHTTP2_NO_ERROR, 0);
  expect(d, SLUICE__FINAL_COMPLETE, SLUICE_STATUS_NOT_FOUND, "no such user");
  assert_ptr_equal(d.text, m);

  /* Without grpc-message: "". */
  fx_status(&x, SLUICE_STATUS_PERMISSION_DENIED, NULL);
  expect(decide(&x, NGHTTP2_NO_ERROR, 0), SLUICE__FINAL_COMPLETE,
         SLUICE_STATUS_PERMISSION_DENIED, "");

  /* grpc-status beats the HTTP status, the content-type and the reset that
   * followed the trailers. */
  fx_headers(&x, 503);
  x.rx.bad_content_type = 1;
  fx_status(&x, SLUICE_STATUS_ABORTED, m);
  expect(decide(&x, NGHTTP2_CANCEL, 0), SLUICE__FINAL_COMPLETE,
         SLUICE_STATUS_ABORTED, "no such user");
  expect(decide(&x, NGHTTP2_REFUSED_STREAM, 0), SLUICE__FINAL_COMPLETE,
         SLUICE_STATUS_ABORTED, "no such user");
  /* Even when the block that carried it never completed. */
  x.rx.got_headers = 0;
  expect(decide(&x, NGHTTP2_REFUSED_STREAM, 0), SLUICE__FINAL_COMPLETE,
         SLUICE_STATUS_ABORTED, "no such user");
}

static void ok_and_message_count(void **state) {
  (void)state;
  fixture x;
  char m[] = "done";
  static const struct {
    sluice_call_kind kind;
    int n;
    sluice_status_code code;
    const char *text;
  } cases[] = {
      {SLUICE_CALL_UNARY, 1, SLUICE_STATUS_OK, "done"},
      {SLUICE_CALL_UNARY, 0, SLUICE_STATUS_UNIMPLEMENTED,
       "server answered a unary call with 0 response messages"},
      {SLUICE_CALL_UNARY, 2, SLUICE_STATUS_UNIMPLEMENTED,
       "server answered a unary call with 2 response messages"},
      {SLUICE_CALL_CLIENT_STREAMING, 1, SLUICE_STATUS_OK, "done"},
      {SLUICE_CALL_CLIENT_STREAMING, 0, SLUICE_STATUS_UNIMPLEMENTED,
       "server answered a client-streaming call with 0 response messages"},
      {SLUICE_CALL_CLIENT_STREAMING, 3, SLUICE_STATUS_UNIMPLEMENTED,
       "server answered a client-streaming call with 3 response messages"},
      {SLUICE_CALL_SERVER_STREAMING, 0, SLUICE_STATUS_OK, "done"},
      {SLUICE_CALL_SERVER_STREAMING, 7, SLUICE_STATUS_OK, "done"},
      {SLUICE_CALL_BIDI_STREAMING, 0, SLUICE_STATUS_OK, "done"},
      {SLUICE_CALL_BIDI_STREAMING, 1000, SLUICE_STATUS_OK, "done"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    fx_init(&x, cases[i].kind);
    fx_headers(&x, 200);
    fx_status(&x, SLUICE_STATUS_OK, m);
    x.f.n_msgs = cases[i].n;
    sluice__final d = decide(&x, NGHTTP2_NO_ERROR, 0);
    expect(d, SLUICE__FINAL_COMPLETE, cases[i].code, cases[i].text);
    if (cases[i].code == SLUICE_STATUS_UNIMPLEMENTED)
      assert_ptr_equal(d.text, x.buf);
  }
  /* A count check applies to OK only: an error keeps the server's text. */
  fx_init(&x, SLUICE_CALL_UNARY);
  fx_status(&x, SLUICE_STATUS_INTERNAL, m);
  expect(decide(&x, 0, 0), SLUICE__FINAL_COMPLETE, SLUICE_STATUS_INTERNAL,
         "done");
}

static void ok_with_held_messages(void **state) {
  (void)state;
  fixture x;
  fx_init(&x, SLUICE_CALL_UNARY);
  fx_headers(&x, 200);
  char m[] = "later";
  fx_status(&x, SLUICE_STATUS_OK, m);
  x.f.holding = 1;
  x.f.n_msgs = 0; /* the one message is still held */
  expect(decide(&x, NGHTTP2_NO_ERROR, 0), SLUICE__FINAL_HOLD, SLUICE_STATUS_OK,
         "later");
  /* An error does not wait for held messages. */
  fx_status(&x, SLUICE_STATUS_UNAVAILABLE, m);
  expect(decide(&x, NGHTTP2_NO_ERROR, 0), SLUICE__FINAL_COMPLETE,
         SLUICE_STATUS_UNAVAILABLE, "later");
}

static void drained_after_hold(void **state) {
  (void)state;
  fixture x;
  char m[] = "all delivered";
  fx_init(&x, SLUICE_CALL_UNARY);
  fx_status(&x, SLUICE_STATUS_OK, m);
  x.f.n_msgs = 1;
  sluice__final d = sluice__final_status_drained(&x.f);
  expect(d, SLUICE__FINAL_COMPLETE, SLUICE_STATUS_OK, "all delivered");
  assert_ptr_equal(d.text, m);
  x.f.n_msgs = 0;
  expect(sluice__final_status_drained(&x.f), SLUICE__FINAL_COMPLETE,
         SLUICE_STATUS_UNIMPLEMENTED, "server sent no response message");
  x.f.kind = SLUICE_CALL_CLIENT_STREAMING;
  expect(sluice__final_status_drained(&x.f), SLUICE__FINAL_COMPLETE,
         SLUICE_STATUS_UNIMPLEMENTED, "server sent no response message");
  x.f.kind = SLUICE_CALL_SERVER_STREAMING;
  expect(sluice__final_status_drained(&x.f), SLUICE__FINAL_COMPLETE,
         SLUICE_STATUS_OK, "all delivered");
  x.rx.grpc_message = NULL;
  expect(sluice__final_status_drained(&x.f), SLUICE__FINAL_COMPLETE,
         SLUICE_STATUS_OK, "");
}

static void http_status_without_grpc_status(void **state) {
  (void)state;
  static const struct {
    int http;
    sluice_status_code code;
  } cases[] = {
      {400, SLUICE_STATUS_INTERNAL},
      {401, SLUICE_STATUS_UNAUTHENTICATED},
      {403, SLUICE_STATUS_PERMISSION_DENIED},
      {404, SLUICE_STATUS_UNIMPLEMENTED},
      {429, SLUICE_STATUS_UNAVAILABLE},
      {502, SLUICE_STATUS_UNAVAILABLE},
      {503, SLUICE_STATUS_UNAVAILABLE},
      {504, SLUICE_STATUS_UNAVAILABLE},
      {500, SLUICE_STATUS_UNKNOWN},
      {302, SLUICE_STATUS_UNKNOWN},
      {0, SLUICE_STATUS_UNKNOWN},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    fixture x;
    fx_init(&x, SLUICE_CALL_UNARY);
    fx_headers(&x, cases[i].http);
    x.rx.bad_content_type = 1; /* the HTTP status is reported first */
    char want[200];
    snprintf(want, sizeof want,
             "peer answered HTTP status %d without grpc-status (not a gRPC "
             "server?)",
             cases[i].http);
    /* Whatever the HTTP/2 close. */
    expect(decide(&x, NGHTTP2_NO_ERROR, 0), SLUICE__FINAL_COMPLETE,
           cases[i].code, want);
    expect(decide(&x, NGHTTP2_REFUSED_STREAM, 0), SLUICE__FINAL_COMPLETE,
           cases[i].code, want);
  }
  /* A :status heard in a block that never completed does not count. */
  fixture x;
  fx_init(&x, SLUICE_CALL_UNARY);
  x.rx.http_status = 404;
  expect(decide(&x, NGHTTP2_NO_ERROR, 0), SLUICE__FINAL_COMPLETE,
         SLUICE_STATUS_INTERNAL,
         "server closed the stream without sending grpc-status");
}

static void bad_content_type(void **state) {
  (void)state;
  fixture x;
  fx_init(&x, SLUICE_CALL_BIDI_STREAMING);
  fx_headers(&x, 200);
  x.rx.bad_content_type = 1;
  const char *want =
      "peer answered with a content-type that is not application/grpc";
  expect(decide(&x, NGHTTP2_NO_ERROR, 0), SLUICE__FINAL_COMPLETE,
         SLUICE_STATUS_UNKNOWN, want);
  /* Before the reset's own code, and before a near deadline. */
  x.f.deadline_ns = 100;
  expect(decide(&x, NGHTTP2_CANCEL, 100), SLUICE__FINAL_COMPLETE,
         SLUICE_STATUS_UNKNOWN, want);
  /* A content-type in a block that never completed still counts (as
   * today). */
  x.rx.got_headers = 0;
  expect(decide(&x, NGHTTP2_REFUSED_STREAM, 0), SLUICE__FINAL_COMPLETE,
         SLUICE_STATUS_UNKNOWN, want);
}

static void refused_stream_retry(void **state) {
  (void)state;
  fixture x;
  fx_init(&x, SLUICE_CALL_UNARY);
  /* Nothing heard: RETRY, and what to report when the request cannot be
   * replayed. */
  sluice__final d = decide(&x, NGHTTP2_REFUSED_STREAM, 0);
  expect(d, SLUICE__FINAL_RETRY, SLUICE_STATUS_UNAVAILABLE,
         "stream reset by peer (HTTP/2 error REFUSED_STREAM)");
  assert_ptr_equal(d.text, x.buf);
  /* The same for every kind and with a deadline. */
  x.f.kind = SLUICE_CALL_BIDI_STREAMING;
  x.f.deadline_ns = 1;
  assert_int_equal(decide(&x, NGHTTP2_REFUSED_STREAM, 999).action,
                   SLUICE__FINAL_RETRY);
  /* The server answered (headers seen): processed, not retried. */
  fx_headers(&x, 200);
  expect(decide(&x, NGHTTP2_REFUSED_STREAM, 0), SLUICE__FINAL_COMPLETE,
         SLUICE_STATUS_UNAVAILABLE,
         "stream reset by peer (HTTP/2 error REFUSED_STREAM)");
  /* Other codes are never retried, even before any headers. */
  x.rx.got_headers = 0;
  uint32_t others[] = {NGHTTP2_NO_ERROR, NGHTTP2_PROTOCOL_ERROR,
                       NGHTTP2_INTERNAL_ERROR, NGHTTP2_CANCEL,
                       NGHTTP2_ENHANCE_YOUR_CALM};
  for (size_t i = 0; i < sizeof others / sizeof others[0]; i++)
    assert_int_equal(decide(&x, others[i], 0).action, SLUICE__FINAL_COMPLETE);
}

static void cancel_near_deadline(void **state) {
  (void)state;
  fixture x;
  fx_init(&x, SLUICE_CALL_UNARY);
  fx_headers(&x, 200); /* headers came, no grpc-status: still applies */
  const uint64_t dl = 10000000000ull;
  x.f.deadline_ns = dl;
  const char *de = "deadline exceeded (cancelled by the server)";
  const char *cancelled = "stream reset by peer (HTTP/2 error CANCEL)";
  expect(decide(&x, NGHTTP2_CANCEL, dl + 1), SLUICE__FINAL_COMPLETE,
         SLUICE_STATUS_DEADLINE_EXCEEDED, de);
  expect(decide(&x, NGHTTP2_CANCEL, dl), SLUICE__FINAL_COMPLETE,
         SLUICE_STATUS_DEADLINE_EXCEEDED, de);
  /* The slack: exactly 5 ms before still counts, one ns more does not. */
  expect(decide(&x, NGHTTP2_CANCEL, dl - SLUICE__DEADLINE_SLACK_NS),
         SLUICE__FINAL_COMPLETE, SLUICE_STATUS_DEADLINE_EXCEEDED, de);
  expect(decide(&x, NGHTTP2_CANCEL, dl - SLUICE__DEADLINE_SLACK_NS - 1),
         SLUICE__FINAL_COMPLETE, SLUICE_STATUS_CANCELLED, cancelled);
  /* No deadline: a plain cancel; now is not even looked at. */
  x.f.deadline_ns = 0;
  expect(decide(&x, NGHTTP2_CANCEL, UINT64_MAX / 2), SLUICE__FINAL_COMPLETE,
         SLUICE_STATUS_CANCELLED, cancelled);
  /* Only CANCEL is read as the server's deadline. */
  x.f.deadline_ns = dl;
  expect(decide(&x, NGHTTP2_INTERNAL_ERROR, dl), SLUICE__FINAL_COMPLETE,
         SLUICE_STATUS_INTERNAL,
         "stream reset by peer (HTTP/2 error INTERNAL_ERROR)");
}

static void reset_codes(void **state) {
  (void)state;
  static const struct {
    uint32_t err;
    sluice_status_code code;
    const char *text;
  } cases[] = {
      {NGHTTP2_PROTOCOL_ERROR, SLUICE_STATUS_INTERNAL,
       "stream reset by peer (HTTP/2 error PROTOCOL_ERROR)"},
      {NGHTTP2_FLOW_CONTROL_ERROR, SLUICE_STATUS_INTERNAL,
       "stream reset by peer (HTTP/2 error FLOW_CONTROL_ERROR)"},
      {NGHTTP2_CANCEL, SLUICE_STATUS_CANCELLED,
       "stream reset by peer (HTTP/2 error CANCEL)"},
      {NGHTTP2_ENHANCE_YOUR_CALM, SLUICE_STATUS_RESOURCE_EXHAUSTED,
       "stream reset by peer (HTTP/2 error ENHANCE_YOUR_CALM)"},
      {NGHTTP2_INADEQUATE_SECURITY, SLUICE_STATUS_PERMISSION_DENIED,
       "stream reset by peer (HTTP/2 error INADEQUATE_SECURITY)"},
      {NGHTTP2_HTTP_1_1_REQUIRED, SLUICE_STATUS_INTERNAL,
       "stream reset by peer (HTTP/2 error HTTP_1_1_REQUIRED)"},
      {0x42, SLUICE_STATUS_INTERNAL,
       "stream reset by peer (HTTP/2 error unknown)"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    fixture x;
    fx_init(&x, SLUICE_CALL_SERVER_STREAMING);
    fx_headers(&x, 200);
    expect(decide(&x, cases[i].err, 0), SLUICE__FINAL_COMPLETE, cases[i].code,
           cases[i].text);
  }
}

static void clean_close_without_status(void **state) {
  (void)state;
  fixture x;
  fx_init(&x, SLUICE_CALL_UNARY);
  fx_headers(&x, 200);
  x.f.n_msgs = 1;
  x.f.holding = 1; /* held messages do not make up for grpc-status */
  expect(decide(&x, NGHTTP2_NO_ERROR, 0), SLUICE__FINAL_COMPLETE,
         SLUICE_STATUS_INTERNAL,
         "server closed the stream without sending grpc-status");
}

static void small_buffer(void **state) {
  (void)state;
  fixture x;
  fx_init(&x, SLUICE_CALL_UNARY);
  char small[16];
  sluice__final d = sluice__final_status(&x.f, NGHTTP2_PROTOCOL_ERROR, 0, small,
                                         sizeof small);
  assert_ptr_equal(d.text, small);
  assert_string_equal(d.text, "stream reset by");
  assert_int_equal(d.code, SLUICE_STATUS_INTERNAL);
}

/* The parser and the decision together, as the client will use them. */
static int feed(sluice__grpc_resp *r, const char *n, const char *v) {
  return sluice__grpc_resp_header(r, n, strlen(n), (const uint8_t *)v,
                                  strlen(v));
}

static void from_parsed_headers(void **state) {
  (void)state;
  sluice__grpc_resp rx;
  sluice__grpc_resp_init(&rx);
  /* Trailers-Only with an error. */
  feed(&rx, ":status", "200");
  feed(&rx, "content-type", "application/grpc");
  feed(&rx, "grpc-status", "8");
  feed(&rx, "grpc-message", "slow%20down");
  sluice_metadata_del(sluice__grpc_resp_block_done(&rx, 1, 1).md);
  sluice__final_facts f = {&rx, SLUICE_STATUS_OK, NULL, SLUICE_CALL_UNARY, 0, 0,
                           0};
  char buf[200];
  sluice__final d =
      sluice__final_status(&f, NGHTTP2_NO_ERROR, 0, buf, sizeof buf);
  expect(d, SLUICE__FINAL_COMPLETE, SLUICE_STATUS_RESOURCE_EXHAUSTED,
         "slow down");
  sluice__grpc_resp_reset(&rx);

  /* An HTML error page from a proxy. */
  feed(&rx, ":status", "502");
  feed(&rx, "content-type", "text/html");
  sluice_metadata_del(sluice__grpc_resp_block_done(&rx, 0, 1).md);
  d = sluice__final_status(&f, NGHTTP2_NO_ERROR, 0, buf, sizeof buf);
  expect(d, SLUICE__FINAL_COMPLETE, SLUICE_STATUS_UNAVAILABLE,
         "peer answered HTTP status 502 without grpc-status (not a gRPC "
         "server?)");
  /* The retry starts from nothing. */
  sluice__grpc_resp_reset(&rx);
  d = sluice__final_status(&f, NGHTTP2_REFUSED_STREAM, 0, buf, sizeof buf);
  assert_int_equal(d.action, SLUICE__FINAL_RETRY);
  sluice__grpc_resp_reset(&rx);
}

static void h2_error_names(void **state) {
  (void)state;
  for (uint32_t e = 0; e <= 0x20; e++)
    assert_string_equal(sluice__h2_error_name(e), nghttp2_http2_strerror(e));
  assert_string_equal(sluice__h2_error_name(UINT32_MAX),
                      nghttp2_http2_strerror(UINT32_MAX));
  assert_string_equal(sluice__h2_error_name(7), "REFUSED_STREAM");
  assert_string_equal(sluice__h2_error_name(0xe), "unknown");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(local_failure_first),
      cmocka_unit_test(grpc_status_from_server),
      cmocka_unit_test(ok_and_message_count),
      cmocka_unit_test(ok_with_held_messages),
      cmocka_unit_test(drained_after_hold),
      cmocka_unit_test(http_status_without_grpc_status),
      cmocka_unit_test(bad_content_type),
      cmocka_unit_test(refused_stream_retry),
      cmocka_unit_test(cancel_near_deadline),
      cmocka_unit_test(reset_codes),
      cmocka_unit_test(clean_close_without_status),
      cmocka_unit_test(small_buffer),
      cmocka_unit_test(from_parsed_headers),
      cmocka_unit_test(h2_error_names),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
