/* interop_client: the client cases of gRPC's interop suite.
 *
 *   interop_client --server_host H --server_port P --test_case NAME
 *                  [--skip_compression_probe]
 *                  [--use_tls [--tls_ca FILE] [--server_host_override NAME]
 *                   [--tls_cert FILE --tls_key FILE]]
 *
 * Runs the cases of gRPC's doc/interop-test-descriptions.md against a
 * grpc.testing.TestService server. NAME is one case, a comma-separated list
 * or "all" (every case below, in that order). Flags take "--flag value" or
 * "--flag=value". Prints one line per case on stdout, "PASS <case>" or
 * "FAIL <case>: <reason>", and the time it took on stderr; exits 0 only
 * when every case passed (1 otherwise, 2 on bad flags).
 *
 * --skip_compression_probe skips the two probes that send a request with
 * expect_compressed true uncompressed and want INVALID_ARGUMENT: for servers
 * that cannot see whether a request arrived compressed (grpcio).
 * --use_tls (gRPC's flag; --use_tls=false is plaintext, the default) calls
 * over TLS, trusting the CA certificates of --tls_ca (the system's roots
 * without it) and checking the server's certificate against
 * --server_host_override instead of --server_host when given (SNI too).
 * --tls_cert and --tls_key present a client certificate (mutual TLS).
 * Credentials that cannot be loaded are reported and exit 2. gRPC's
 * --use_test_ca is accepted and ignored: the CA is always --tls_ca's.
 *
 * Unary cases use the generated blocking stubs; streaming ones (and those
 * that look at the compressed flag of responses) the asynchronous call API
 * through interop_sync.h. Every call has a deadline of CALL_TIMEOUT_MS
 * unless the case sets its own, and every wait is bounded.
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sluice/sluice.h>

#include "grpc/testing/test.sluice.h"
#include "interop_sync.h"

#define CALL_TIMEOUT_MS 10000
#define ZEROS_MAX 320000 /* the largest request payload, 271828, fits */

static const char ECHO_INITIAL[] = "x-grpc-test-echo-initial";
static const char ECHO_INITIAL_VALUE[] = "test_initial_metadata_value";
static const char ECHO_TRAILING[] = "x-grpc-test-echo-trailing-bin";
static const uint8_t ECHO_TRAILING_VALUE[] = {0xab, 0xab, 0xab};
static const char SPECIAL_MESSAGE[] =
    "\t\ntest with whitespace\r\nand Unicode BMP \xe2\x98\xba and non-BMP "
    "\xf0\x9f\x98\x88\t\n";

static sluice_channel *channel;
static int skip_probe;
static uint8_t zeros[ZEROS_MAX];
static char why[2048]; /* the reason of the current case's failure */

/* ---- helpers */

/* Records why the case failed; returns -1 for `return fail(...)`. */
static int fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  return -1;
}

static const sluice_method_desc *method(const sluice_service_desc *svc,
                                        const char *name) {
  for (size_t i = 0; i < svc->n_methods; i++)
    if (strcmp(svc->methods[i].name, name) == 0)
      return &svc->methods[i];
  fprintf(stderr, "interop_client: no method %s in %s\n", name, svc->full_name);
  abort();
}

#define TS(name) method(&grpc__testing__test_service__sluice_service, name)

static void opts_init(sluice_call_opts *o) {
  sluice_call_opts_init(o);
  o->timeout_ms = CALL_TIMEOUT_MS;
}

/* A payload of n zero bytes (pointing into the static buffer). */
static Grpc__Testing__Payload payload_of(size_t n) {
  Grpc__Testing__Payload p = GRPC__TESTING__PAYLOAD__INIT;
  p.type = GRPC__TESTING__PAYLOAD_TYPE__COMPRESSABLE;
  if (n > ZEROS_MAX)
    n = ZEROS_MAX;
  p.body.len = n;
  p.body.data = n > 0 ? zeros : NULL;
  return p;
}

static int check_payload(const Grpc__Testing__Payload *p, size_t want,
                         const char *what) {
  size_t len = p != NULL ? p->body.len : 0;
  if (len != want)
    return fail("%s: payload of %zu bytes, want %zu", what, len, want);
  for (size_t i = 0; i < len; i++)
    if (p->body.data[i] != 0)
      return fail("%s: payload byte %zu is 0x%02x, want zeros", what, i,
                  p->body.data[i]);
  if (p != NULL && p->type != GRPC__TESTING__PAYLOAD_TYPE__COMPRESSABLE)
    return fail("%s: payload type %d, want COMPRESSABLE", what, (int)p->type);
  return 0;
}

static int check_status(const sluice_status *st, sluice_status_code want,
                        const char *what) {
  if (st->code == want)
    return 0;
  return fail("%s: status %s (\"%s\"), want %s", what,
              sluice_status_name(st->code),
              st->message != NULL ? st->message : "", sluice_status_name(want));
}

/* Waits for the end of s and checks its status. */
static int check_done(isync *s, sluice_status_code want, const char *what) {
  if (isync_wait_done(s) != 0)
    return fail("%s: no status within %d ms", what, ISYNC_WAIT_MS);
  return check_status(&s->status, want, what);
}

/* A send that failed: the call's status says more when it is over. */
static int send_failed(isync *s, int rc, const char *what) {
  if (rc == SLUICE_ERR_STATE && isync_wait_done(s) == 0)
    return fail("%s: call ended early with %s (\"%s\")", what,
                sluice_status_name(s->status.code), s->status.message);
  return fail("%s: send failed: %s", what, sluice_strerror(rc));
}

static int send_msg(isync *s, const ProtobufCMessage *msg, unsigned flags,
                    const char *what) {
  int rc = isync_send(s, msg, flags);
  return rc == 0 ? 0 : send_failed(s, rc, what);
}

/* Takes the next response of a StreamingOutputCall-shaped call and checks
 * its payload (size zero bytes). *compressed (may be NULL) gets its flag. */
static int next_output(isync *s, size_t size, int *compressed,
                       const char *what) {
  ProtobufCMessage *m;
  int rc = isync_next(s, &m, compressed);
  if (rc < 0)
    return fail("%s: no response within %d ms", what, ISYNC_WAIT_MS);
  if (rc == 0) {
    if (isync_copy_failed(s))
      return fail("%s: a response could not be copied", what);
    return fail("%s: stream ended after %lu responses with %s (\"%s\")", what,
                s->received, sluice_status_name(s->status.code),
                s->status.message);
  }
  rc = check_payload(
      ((const Grpc__Testing__StreamingOutputCallResponse *)m)->payload, size,
      what);
  isync_free_msg(m);
  return rc;
}

/* Checks that no response is left before the end of the call. */
static int no_more(isync *s, const char *what) {
  ProtobufCMessage *m;
  int rc = isync_next(s, &m, NULL);
  isync_free_msg(m);
  if (rc > 0)
    return fail("%s: an unexpected extra response", what);
  if (rc < 0)
    return fail("%s: the call did not end within %d ms", what, ISYNC_WAIT_MS);
  return 0;
}

/* One ResponseParameters per size; params/ptrs are the caller's arrays of
 * n entries. */
static void set_params(Grpc__Testing__StreamingOutputCallRequest *req,
                       Grpc__Testing__ResponseParameters *params,
                       Grpc__Testing__ResponseParameters **ptrs,
                       const int32_t *sizes, size_t n) {
  for (size_t i = 0; i < n; i++) {
    Grpc__Testing__ResponseParameters p =
        GRPC__TESTING__RESPONSE_PARAMETERS__INIT;
    p.size = sizes[i];
    params[i] = p;
    ptrs[i] = &params[i];
  }
  req->n_response_parameters = n;
  req->response_parameters = n > 0 ? ptrs : NULL;
}

static const char *md_value(const sluice_metadata *md, const char *key,
                            size_t *len) {
  return md != NULL ? sluice_metadata_find(md, key, len) : NULL;
}

/* Custom Metadata: the echoed initial and trailing entries of st. */
static int check_echo(const sluice_status *st, const char *what) {
  size_t len = 0;
  const char *v = md_value(st->initial_md, ECHO_INITIAL, &len);
  if (v == NULL)
    return fail("%s: no initial %s", what, ECHO_INITIAL);
  if (len != strlen(ECHO_INITIAL_VALUE) ||
      memcmp(v, ECHO_INITIAL_VALUE, len) != 0)
    return fail("%s: initial %s = \"%s\", want \"%s\"", what, ECHO_INITIAL, v,
                ECHO_INITIAL_VALUE);
  v = md_value(st->trailing_md, ECHO_TRAILING, &len);
  if (v == NULL)
    return fail("%s: no trailing %s", what, ECHO_TRAILING);
  if (len != sizeof ECHO_TRAILING_VALUE ||
      memcmp(v, ECHO_TRAILING_VALUE, len) != 0)
    return fail("%s: trailing %s is %zu bytes, not ab ab ab", what,
                ECHO_TRAILING, len);
  return 0;
}

/* A SimpleRequest for 314159 bytes with a 271828-byte payload. */
static Grpc__Testing__SimpleRequest large_request(Grpc__Testing__Payload *p) {
  Grpc__Testing__SimpleRequest req = GRPC__TESTING__SIMPLE_REQUEST__INIT;
  *p = payload_of(271828);
  req.response_type = GRPC__TESTING__PAYLOAD_TYPE__COMPRESSABLE;
  req.response_size = 314159;
  req.payload = p;
  return req;
}

/* A blocking UnaryCall that must succeed with the large response. */
static int large_unary_call(const Grpc__Testing__SimpleRequest *req,
                            const sluice_call_opts *o, const char *what,
                            int (*check_st)(const sluice_status *,
                                            const char *)) {
  Grpc__Testing__SimpleResponse *resp = NULL;
  sluice_status st;
  sluice_status_init(&st);
  grpc__testing__test_service__unary_call__blocking(channel, req, &resp, o,
                                                    &st);
  int rc = check_status(&st, SLUICE_STATUS_OK, what);
  if (rc == 0)
    rc = check_payload(resp->payload, 314159, what);
  if (rc == 0 && check_st != NULL)
    rc = check_st(&st, what);
  if (resp != NULL)
    protobuf_c_message_free_unpacked(&resp->base, NULL);
  sluice_status_clear(&st);
  return rc;
}

/* A blocking UnaryCall that must fail with code and, when message is not
 * NULL, that message. */
static int failing_unary_call(const Grpc__Testing__SimpleRequest *req,
                              const sluice_call_opts *o,
                              sluice_status_code code, const char *message,
                              const char *what) {
  Grpc__Testing__SimpleResponse *resp = NULL;
  sluice_status st;
  sluice_status_init(&st);
  grpc__testing__test_service__unary_call__blocking(channel, req, &resp, o,
                                                    &st);
  int rc = check_status(&st, code, what);
  if (rc == 0 && message != NULL && strcmp(st.message, message) != 0)
    rc = fail("%s: message \"%s\", want \"%s\"", what, st.message, message);
  if (resp != NULL)
    protobuf_c_message_free_unpacked(&resp->base, NULL);
  sluice_status_clear(&st);
  return rc;
}

/* A StreamingInputCall of n requests (payload sizes[i], expect_compressed
 * expect[i] when expect is not NULL, send flags flags[i] when not NULL)
 * with call options o. Checks the outcome: want_code, and for OK the
 * aggregated size want_total. */
static int input_call(const int32_t *sizes, const int *expect,
                      const unsigned *flags, size_t n,
                      const sluice_call_opts *o, sluice_status_code want_code,
                      int32_t want_total, const char *what) {
  isync *s = NULL;
  int rc = isync_start(&s, channel, TS("StreamingInputCall"), NULL, o);
  if (rc != 0)
    return fail("%s: cannot start: %s", what, sluice_strerror(rc));
  for (size_t i = 0; i < n && rc == 0; i++) {
    Grpc__Testing__StreamingInputCallRequest req =
        GRPC__TESTING__STREAMING_INPUT_CALL_REQUEST__INIT;
    Grpc__Testing__Payload p = payload_of((size_t)sizes[i]);
    Grpc__Testing__BoolValue b = GRPC__TESTING__BOOL_VALUE__INIT;
    req.payload = &p;
    if (expect != NULL) {
      b.value = expect[i];
      req.expect_compressed = &b;
    }
    int err = isync_send(s, &req.base, flags != NULL ? flags[i] : 0);
    /* A server that refuses a request may end the call before the rest is
     * sent: then only the status counts. */
    if (err == SLUICE_ERR_STATE && want_code != SLUICE_STATUS_OK)
      break;
    if (err != 0)
      rc = send_failed(s, err, what);
  }
  if (rc == 0) {
    int err = isync_close_send(s);
    if (err != 0 && !(err == SLUICE_ERR_STATE && want_code != 0))
      rc = send_failed(s, err, what);
  }
  if (rc == 0 && want_code == SLUICE_STATUS_OK) {
    ProtobufCMessage *m;
    int got = isync_next(s, &m, NULL);
    if (got < 0)
      rc = fail("%s: no response within %d ms", what, ISYNC_WAIT_MS);
    else if (got == 0)
      rc = check_status(&s->status, SLUICE_STATUS_OK, what);
    if (rc == 0 && got == 0)
      rc = fail("%s: OK without a response", what);
    if (got == 1) {
      int32_t total = ((Grpc__Testing__StreamingInputCallResponse *)m)
                          ->aggregated_payload_size;
      if (total != want_total)
        rc = fail("%s: aggregated_payload_size %d, want %d", what, (int)total,
                  (int)want_total);
      isync_free_msg(m);
    }
  }
  if (rc == 0)
    rc = check_done(s, want_code, what);
  isync_destroy(s);
  return rc;
}

/* ---- the cases, as doc/interop-test-descriptions.md describes them */

static int empty_unary(void) {
  Grpc__Testing__Empty req = GRPC__TESTING__EMPTY__INIT, *resp = NULL;
  sluice_call_opts o;
  sluice_status st;
  opts_init(&o);
  sluice_status_init(&st);
  grpc__testing__test_service__empty_call__blocking(channel, &req, &resp, &o,
                                                    &st);
  int rc = check_status(&st, SLUICE_STATUS_OK, "EmptyCall");
  if (rc == 0 && resp == NULL)
    rc = fail("EmptyCall: OK without a response");
  if (resp != NULL)
    protobuf_c_message_free_unpacked(&resp->base, NULL);
  sluice_status_clear(&st);
  return rc;
}

static int large_unary(void) {
  Grpc__Testing__Payload p;
  Grpc__Testing__SimpleRequest req = large_request(&p);
  sluice_call_opts o;
  opts_init(&o);
  return large_unary_call(&req, &o, "UnaryCall", NULL);
}

static int client_streaming(void) {
  static const int32_t sizes[] = {27182, 8, 1828, 45904};
  sluice_call_opts o;
  opts_init(&o);
  return input_call(sizes, NULL, NULL, 4, &o, SLUICE_STATUS_OK, 74922,
                    "StreamingInputCall");
}

static int server_streaming(void) {
  static const int32_t sizes[] = {31415, 9, 2653, 58979};
  Grpc__Testing__StreamingOutputCallRequest req =
      GRPC__TESTING__STREAMING_OUTPUT_CALL_REQUEST__INIT;
  Grpc__Testing__ResponseParameters params[4], *ptrs[4];
  set_params(&req, params, ptrs, sizes, 4);
  sluice_call_opts o;
  opts_init(&o);
  isync *s = NULL;
  int rc = isync_start(&s, channel, TS("StreamingOutputCall"), &req.base, &o);
  if (rc != 0)
    return fail("cannot start: %s", sluice_strerror(rc));
  char what[64];
  for (size_t i = 0; i < 4 && rc == 0; i++) {
    snprintf(what, sizeof what, "response %zu", i);
    rc = next_output(s, (size_t)sizes[i], NULL, what);
  }
  if (rc == 0)
    rc = no_more(s, "StreamingOutputCall");
  if (rc == 0)
    rc = check_done(s, SLUICE_STATUS_OK, "StreamingOutputCall");
  isync_destroy(s);
  return rc;
}

/* A FullDuplexCall request for one response of resp_size bytes with a
 * payload of req_size bytes (none when 0). */
typedef struct pong_request {
  Grpc__Testing__StreamingOutputCallRequest req;
  Grpc__Testing__ResponseParameters param, *ptr;
  Grpc__Testing__Payload payload;
} pong_request;

static void pong_init(pong_request *r, int32_t resp_size, int32_t req_size) {
  Grpc__Testing__StreamingOutputCallRequest req =
      GRPC__TESTING__STREAMING_OUTPUT_CALL_REQUEST__INIT;
  r->req = req;
  set_params(&r->req, &r->param, &r->ptr, &resp_size, 1);
  if (req_size > 0) {
    r->payload = payload_of((size_t)req_size);
    r->req.payload = &r->payload;
  }
}

static int ping_pong(void) {
  static const int32_t resp_sizes[] = {31415, 9, 2653, 58979};
  static const int32_t req_sizes[] = {27182, 8, 1828, 45904};
  sluice_call_opts o;
  opts_init(&o);
  isync *s = NULL;
  int rc = isync_start(&s, channel, TS("FullDuplexCall"), NULL, &o);
  if (rc != 0)
    return fail("cannot start: %s", sluice_strerror(rc));
  char what[64];
  for (size_t i = 0; i < 4 && rc == 0; i++) {
    pong_request r;
    pong_init(&r, resp_sizes[i], req_sizes[i]);
    snprintf(what, sizeof what, "ping %zu", i);
    rc = send_msg(s, &r.req.base, 0, what);
    snprintf(what, sizeof what, "pong %zu", i);
    if (rc == 0)
      rc = next_output(s, (size_t)resp_sizes[i], NULL, what);
  }
  if (rc == 0 && (rc = isync_close_send(s)) != 0)
    rc = send_failed(s, rc, "half close");
  if (rc == 0)
    rc = no_more(s, "after the last pong");
  if (rc == 0)
    rc = check_done(s, SLUICE_STATUS_OK, "FullDuplexCall");
  isync_destroy(s);
  return rc;
}

static int empty_stream(void) {
  sluice_call_opts o;
  opts_init(&o);
  isync *s = NULL;
  int rc = isync_start(&s, channel, TS("FullDuplexCall"), NULL, &o);
  if (rc != 0)
    return fail("cannot start: %s", sluice_strerror(rc));
  if ((rc = isync_close_send(s)) != 0)
    rc = send_failed(s, rc, "half close");
  if (rc == 0)
    rc = no_more(s, "FullDuplexCall");
  if (rc == 0)
    rc = check_done(s, SLUICE_STATUS_OK, "FullDuplexCall");
  isync_destroy(s);
  return rc;
}

static int timeout_on_sleeping_server(void) {
  sluice_call_opts o;
  sluice_call_opts_init(&o);
  o.timeout_ms = 1;
  isync *s = NULL;
  int rc = isync_start(&s, channel, TS("FullDuplexCall"), NULL, &o);
  if (rc != 0)
    return fail("cannot start: %s", sluice_strerror(rc));
  pong_request r;
  pong_init(&r, 0, 27182);
  r.req.n_response_parameters = 0; /* no response asked for */
  r.req.response_parameters = NULL;
  /* The deadline may pass before the send: then the call is already over
   * (SLUICE_ERR_STATE) and only its status counts. */
  int err = isync_send(s, &r.req.base, 0);
  if (err != 0 && err != SLUICE_ERR_STATE)
    rc = fail("send failed: %s", sluice_strerror(err));
  if (rc == 0)
    rc = check_done(s, SLUICE_STATUS_DEADLINE_EXCEEDED, "FullDuplexCall");
  isync_destroy(s);
  return rc;
}

static int cancel_after_begin(void) {
  sluice_call_opts o;
  opts_init(&o);
  isync *s = NULL;
  int rc = isync_start(&s, channel, TS("StreamingInputCall"), NULL, &o);
  if (rc != 0)
    return fail("cannot start: %s", sluice_strerror(rc));
  isync_cancel(s);
  rc = check_done(s, SLUICE_STATUS_CANCELLED, "StreamingInputCall");
  isync_destroy(s);
  return rc;
}

static int cancel_after_first_response(void) {
  sluice_call_opts o;
  opts_init(&o);
  isync *s = NULL;
  int rc = isync_start(&s, channel, TS("FullDuplexCall"), NULL, &o);
  if (rc != 0)
    return fail("cannot start: %s", sluice_strerror(rc));
  pong_request r;
  pong_init(&r, 31415, 27182);
  rc = send_msg(s, &r.req.base, 0, "request");
  if (rc == 0)
    rc = next_output(s, 31415, NULL, "response");
  if (rc == 0) {
    isync_cancel(s);
    rc = check_done(s, SLUICE_STATUS_CANCELLED, "FullDuplexCall");
  }
  isync_destroy(s);
  return rc;
}

static int custom_metadata(void) {
  sluice_metadata *md = NULL;
  int rc = sluice_metadata_new(&md);
  if (rc == 0)
    rc = sluice_metadata_add_str(md, ECHO_INITIAL, ECHO_INITIAL_VALUE);
  if (rc == 0)
    rc = sluice_metadata_add(md, ECHO_TRAILING, ECHO_TRAILING_VALUE,
                             sizeof ECHO_TRAILING_VALUE);
  if (rc != 0) {
    sluice_metadata_del(md);
    return fail("cannot build the metadata: %s", sluice_strerror(rc));
  }
  sluice_call_opts o;
  opts_init(&o);
  o.metadata = md;

  /* UnaryCall */
  Grpc__Testing__Payload p;
  Grpc__Testing__SimpleRequest req = large_request(&p);
  rc = large_unary_call(&req, &o, "UnaryCall", check_echo);

  /* FullDuplexCall: one request, half close, one response. */
  isync *s = NULL;
  if (rc == 0 &&
      (rc = isync_start(&s, channel, TS("FullDuplexCall"), NULL, &o)) != 0)
    rc = fail("FullDuplexCall: cannot start: %s", sluice_strerror(rc));
  if (rc == 0) {
    pong_request r;
    pong_init(&r, 314159, 271828);
    rc = send_msg(s, &r.req.base, 0, "FullDuplexCall");
  }
  if (rc == 0 && (rc = isync_close_send(s)) != 0)
    rc = send_failed(s, rc, "FullDuplexCall: half close");
  if (rc == 0)
    rc = next_output(s, 314159, NULL, "FullDuplexCall");
  if (rc == 0)
    rc = no_more(s, "FullDuplexCall");
  if (rc == 0)
    rc = check_done(s, SLUICE_STATUS_OK, "FullDuplexCall");
  if (rc == 0)
    rc = check_echo(&s->status, "FullDuplexCall");
  isync_destroy(s);
  sluice_metadata_del(md);
  return rc;
}

static int echo_status_unary(const char *message) {
  Grpc__Testing__SimpleRequest req = GRPC__TESTING__SIMPLE_REQUEST__INIT;
  Grpc__Testing__EchoStatus status = GRPC__TESTING__ECHO_STATUS__INIT;
  status.code = 2;
  status.message = (char *)message;
  req.response_status = &status;
  sluice_call_opts o;
  opts_init(&o);
  return failing_unary_call(&req, &o, SLUICE_STATUS_UNKNOWN, message,
                            "UnaryCall");
}

static int status_code_and_message(void) {
  static const char message[] = "test status message";
  int rc = echo_status_unary(message);
  if (rc != 0)
    return rc;

  Grpc__Testing__StreamingOutputCallRequest req =
      GRPC__TESTING__STREAMING_OUTPUT_CALL_REQUEST__INIT;
  Grpc__Testing__EchoStatus status = GRPC__TESTING__ECHO_STATUS__INIT;
  status.code = 2;
  status.message = (char *)message;
  req.response_status = &status;
  sluice_call_opts o;
  opts_init(&o);
  isync *s = NULL;
  if ((rc = isync_start(&s, channel, TS("FullDuplexCall"), NULL, &o)) != 0)
    return fail("FullDuplexCall: cannot start: %s", sluice_strerror(rc));
  rc = send_msg(s, &req.base, 0, "FullDuplexCall");
  if (rc == 0) {
    int err = isync_close_send(s); /* may race with the server's end */
    if (err != 0 && err != SLUICE_ERR_STATE)
      rc = send_failed(s, err, "FullDuplexCall: half close");
  }
  if (rc == 0)
    rc = no_more(s, "FullDuplexCall");
  if (rc == 0)
    rc = check_status(&s->status, SLUICE_STATUS_UNKNOWN, "FullDuplexCall");
  if (rc == 0 && strcmp(s->status.message, message) != 0)
    rc = fail("FullDuplexCall: message \"%s\", want \"%s\"", s->status.message,
              message);
  isync_destroy(s);
  return rc;
}

static int special_status_message(void) {
  return echo_status_unary(SPECIAL_MESSAGE);
}

static int unimplemented_method(void) {
  Grpc__Testing__Empty req = GRPC__TESTING__EMPTY__INIT, *resp = NULL;
  sluice_call_opts o;
  sluice_status st;
  opts_init(&o);
  sluice_status_init(&st);
  grpc__testing__test_service__unimplemented_call__blocking(channel, &req,
                                                            &resp, &o, &st);
  int rc = check_status(&st, SLUICE_STATUS_UNIMPLEMENTED,
                        "TestService/UnimplementedCall");
  if (resp != NULL)
    protobuf_c_message_free_unpacked(&resp->base, NULL);
  sluice_status_clear(&st);
  return rc;
}

static int unimplemented_service(void) {
  Grpc__Testing__Empty req = GRPC__TESTING__EMPTY__INIT, *resp = NULL;
  sluice_call_opts o;
  sluice_status st;
  opts_init(&o);
  sluice_status_init(&st);
  grpc__testing__unimplemented_service__unimplemented_call__blocking(
      channel, &req, &resp, &o, &st);
  int rc = check_status(&st, SLUICE_STATUS_UNIMPLEMENTED,
                        "UnimplementedService/UnimplementedCall");
  if (resp != NULL)
    protobuf_c_message_free_unpacked(&resp->base, NULL);
  sluice_status_clear(&st);
  return rc;
}

static int client_compressed_unary(void) {
  Grpc__Testing__Payload p;
  Grpc__Testing__SimpleRequest req = large_request(&p);
  Grpc__Testing__BoolValue expect = GRPC__TESTING__BOOL_VALUE__INIT;
  req.expect_compressed = &expect;
  sluice_call_opts o;
  int rc;

  /* The probe: expect_compressed, sent uncompressed. */
  if (!skip_probe) {
    expect.value = 1;
    opts_init(&o);
    rc = failing_unary_call(&req, &o, SLUICE_STATUS_INVALID_ARGUMENT, NULL,
                            "probe (expect_compressed, sent uncompressed)");
    if (rc != 0)
      return rc;
  }
  expect.value = 1;
  opts_init(&o);
  o.compression = SLUICE_COMPRESS_GZIP;
  rc = large_unary_call(&req, &o, "compressed request", NULL);
  if (rc != 0)
    return rc;
  expect.value = 0;
  opts_init(&o);
  return large_unary_call(&req, &o, "uncompressed request", NULL);
}

static int server_compressed_unary(void) {
  for (int compressed = 1; compressed >= 0; compressed--) {
    Grpc__Testing__Payload p;
    Grpc__Testing__SimpleRequest req = large_request(&p);
    Grpc__Testing__BoolValue want = GRPC__TESTING__BOOL_VALUE__INIT;
    want.value = compressed;
    req.response_compressed = &want;
    const char *what =
        compressed ? "response_compressed true" : "response_compressed false";
    sluice_call_opts o;
    opts_init(&o);
    isync *s = NULL;
    int rc = isync_start(&s, channel, TS("UnaryCall"), &req.base, &o);
    if (rc != 0)
      return fail("%s: cannot start: %s", what, sluice_strerror(rc));
    ProtobufCMessage *m = NULL;
    int got_compressed = 0;
    int got = isync_next(s, &m, &got_compressed);
    if (got < 0)
      rc = fail("%s: no response within %d ms", what, ISYNC_WAIT_MS);
    else if (got == 0)
      rc = check_status(&s->status, SLUICE_STATUS_OK, what) != 0
               ? -1
               : fail("%s: OK without a response", what);
    if (rc == 0)
      rc = check_payload(((Grpc__Testing__SimpleResponse *)m)->payload, 314159,
                         what);
    if (rc == 0 && got_compressed != compressed)
      rc = fail("%s: the response arrived %s", what,
                got_compressed ? "compressed" : "uncompressed");
    if (rc == 0)
      rc = check_done(s, SLUICE_STATUS_OK, what);
    isync_free_msg(m);
    isync_destroy(s);
    if (rc != 0)
      return rc;
  }
  return 0;
}

static int client_compressed_streaming(void) {
  sluice_call_opts o;
  int rc;
  if (!skip_probe) {
    static const int32_t size[] = {27182};
    static const int expect[] = {1};
    opts_init(&o);
    rc = input_call(size, expect, NULL, 1, &o, SLUICE_STATUS_INVALID_ARGUMENT,
                    0, "probe (expect_compressed, sent uncompressed)");
    if (rc != 0)
      return rc;
  }
  static const int32_t sizes[] = {27182, 45904};
  static const int expect[] = {1, 0};
  static const unsigned flags[] = {0, SLUICE_SEND_NO_COMPRESS};
  opts_init(&o);
  o.compression = SLUICE_COMPRESS_GZIP;
  return input_call(sizes, expect, flags, 2, &o, SLUICE_STATUS_OK, 73086,
                    "StreamingInputCall");
}

static int server_compressed_streaming(void) {
  static const int32_t sizes[] = {31415, 92653};
  static const int compressed[] = {1, 0};
  Grpc__Testing__StreamingOutputCallRequest req =
      GRPC__TESTING__STREAMING_OUTPUT_CALL_REQUEST__INIT;
  Grpc__Testing__ResponseParameters params[2], *ptrs[2];
  Grpc__Testing__BoolValue flags[2] = {GRPC__TESTING__BOOL_VALUE__INIT,
                                       GRPC__TESTING__BOOL_VALUE__INIT};
  set_params(&req, params, ptrs, sizes, 2);
  for (size_t i = 0; i < 2; i++) {
    flags[i].value = compressed[i];
    params[i].compressed = &flags[i];
  }
  sluice_call_opts o;
  opts_init(&o);
  isync *s = NULL;
  int rc = isync_start(&s, channel, TS("StreamingOutputCall"), &req.base, &o);
  if (rc != 0)
    return fail("cannot start: %s", sluice_strerror(rc));
  char what[64];
  for (size_t i = 0; i < 2 && rc == 0; i++) {
    int got = 0;
    snprintf(what, sizeof what, "response %zu", i);
    rc = next_output(s, (size_t)sizes[i], &got, what);
    if (rc == 0 && got != compressed[i])
      rc = fail("%s: arrived %s, want %s", what,
                got ? "compressed" : "uncompressed",
                compressed[i] ? "compressed" : "uncompressed");
  }
  if (rc == 0)
    rc = no_more(s, "StreamingOutputCall");
  if (rc == 0)
    rc = check_done(s, SLUICE_STATUS_OK, "StreamingOutputCall");
  isync_destroy(s);
  return rc;
}

static const struct test_case {
  const char *name;
  int (*run)(void);
} cases[] = {
    {"empty_unary", empty_unary},
    {"large_unary", large_unary},
    {"client_streaming", client_streaming},
    {"server_streaming", server_streaming},
    {"ping_pong", ping_pong},
    {"empty_stream", empty_stream},
    {"timeout_on_sleeping_server", timeout_on_sleeping_server},
    {"cancel_after_begin", cancel_after_begin},
    {"cancel_after_first_response", cancel_after_first_response},
    {"custom_metadata", custom_metadata},
    {"status_code_and_message", status_code_and_message},
    {"special_status_message", special_status_message},
    {"unimplemented_method", unimplemented_method},
    {"unimplemented_service", unimplemented_service},
    {"client_compressed_unary", client_compressed_unary},
    {"server_compressed_unary", server_compressed_unary},
    {"client_compressed_streaming", client_compressed_streaming},
    {"server_compressed_streaming", server_compressed_streaming},
};
#define N_CASES (sizeof cases / sizeof cases[0])

static const struct test_case *find_case(const char *name, size_t len) {
  for (size_t i = 0; i < N_CASES; i++)
    if (strlen(cases[i].name) == len && strncmp(cases[i].name, name, len) == 0)
      return &cases[i];
  return NULL;
}

/* Prints why on one line: control characters escaped. */
static void print_reason(const char *s) {
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '\\')
      fputs("\\\\", stdout);
    else if (*p == '\n')
      fputs("\\n", stdout);
    else if (*p == '\r')
      fputs("\\r", stdout);
    else if (*p == '\t')
      fputs("\\t", stdout);
    else if (*p < 0x20 || *p == 0x7f)
      printf("\\x%02x", *p);
    else
      fputc(*p, stdout);
  }
}

static int run_case(const struct test_case *c) {
  struct timespec t0, t1;
  why[0] = '\0';
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int rc = c->run();
  clock_gettime(CLOCK_MONOTONIC, &t1);
  if (rc == 0) {
    printf("PASS %s\n", c->name);
  } else {
    printf("FAIL %s: ", c->name);
    print_reason(why[0] != '\0' ? why : "(no reason recorded)");
    fputc('\n', stdout);
  }
  fflush(stdout);
  fprintf(stderr, "  %s: %.3f s\n", c->name,
          (double)(t1.tv_sec - t0.tv_sec) +
              (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
  return rc;
}

/* ---- command line */

static void usage(FILE *f, const char *prog) {
  fprintf(f,
          "usage: %s --server_host H --server_port P --test_case NAME\n"
          "          [--skip_compression_probe]\n"
          "          [--use_tls [--tls_ca FILE] [--server_host_override "
          "NAME]\n"
          "           [--tls_cert FILE --tls_key FILE]]\n"
          "  --use_tls[=B]      call over TLS (B: true or false)\n"
          "  --tls_ca FILE      CA certificates to trust (PEM; default: the "
          "system's)\n"
          "  --server_host_override NAME\n"
          "                     the name the server's certificate must have "
          "(and SNI)\n"
          "  --tls_cert FILE    client certificate chain, for mutual TLS "
          "(PEM)\n"
          "  --tls_key FILE     its private key (PEM)\n"
          "  --test_case NAME   a case, a comma-separated list of cases, or "
          "all:\n",
          prog);
  for (size_t i = 0; i < N_CASES; i++)
    fprintf(f, "                      %s\n", cases[i].name);
  fprintf(f, "Flags also take the --flag=value form.\n");
}

/* "true"/"1"/"yes" -> 1, "false"/"0"/"no" -> 0, anything else -> -1. */
static int parse_bool(const char *v) {
  if (v == NULL)
    return -1;
  if (strcmp(v, "true") == 0 || strcmp(v, "1") == 0 || strcmp(v, "yes") == 0)
    return 1;
  if (strcmp(v, "false") == 0 || strcmp(v, "0") == 0 || strcmp(v, "no") == 0)
    return 0;
  return -1;
}

int main(int argc, char **argv) {
  const char *prog = argv[0];
  const char *host = "127.0.0.1", *test_case = NULL;
  const char *tls_ca = NULL, *tls_cert = NULL, *tls_key = NULL;
  const char *host_override = NULL;
  int use_tls = 0;
  long port = 0;

  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
      usage(stdout, prog);
      return 0;
    }
    char flag[64];
    const char *val = NULL;
    const char *eq = strchr(arg, '=');
    if (eq != NULL && (size_t)(eq - arg) < sizeof flag) {
      memcpy(flag, arg, (size_t)(eq - arg));
      flag[eq - arg] = '\0';
      val = eq + 1;
    } else {
      snprintf(flag, sizeof flag, "%s", arg);
    }
    /* Booleans: --flag alone is true; --flag=B, or --flag B when the next
     * argument is true or false. */
    if (strcmp(flag, "--skip_compression_probe") == 0 ||
        strcmp(flag, "--use_tls") == 0) {
      int b = 1;
      if (val != NULL)
        b = parse_bool(val);
      else if (i + 1 < argc && parse_bool(argv[i + 1]) >= 0)
        b = parse_bool(argv[++i]);
      if (b < 0) {
        fprintf(stderr, "%s: %s wants true or false\n", prog, flag);
        usage(stderr, prog);
        return 2;
      }
      if (strcmp(flag, "--use_tls") == 0)
        use_tls = b;
      else
        skip_probe = b;
      continue;
    }
    if (val == NULL)
      val = i + 1 < argc ? argv[++i] : NULL;
    if (val == NULL) {
      fprintf(stderr, "%s: %s needs a value\n", prog, flag);
      usage(stderr, prog);
      return 2;
    }
    if (strcmp(flag, "--server_host") == 0) {
      host = val;
    } else if (strcmp(flag, "--server_port") == 0) {
      char *end;
      errno = 0;
      port = strtol(val, &end, 10);
      if (*val == '\0' || *end != '\0' || errno != 0 || port <= 0 ||
          port > 65535) {
        fprintf(stderr, "%s: bad --server_port '%s'\n", prog, val);
        return 2;
      }
    } else if (strcmp(flag, "--test_case") == 0) {
      test_case = val;
    } else if (strcmp(flag, "--tls_ca") == 0) {
      tls_ca = val;
    } else if (strcmp(flag, "--tls_cert") == 0) {
      tls_cert = val;
    } else if (strcmp(flag, "--tls_key") == 0) {
      tls_key = val;
    } else if (strcmp(flag, "--server_host_override") == 0) {
      host_override = *val != '\0' ? val : NULL;
    } else if (strcmp(flag, "--use_test_ca") == 0) {
      /* accepted for gRPC's command lines, unused: the CA is --tls_ca's */
    } else {
      fprintf(stderr, "%s: unknown argument '%s'\n", prog, arg);
      usage(stderr, prog);
      return 2;
    }
  }
  if (port == 0 || test_case == NULL || *host == '\0') {
    fprintf(stderr, "%s: --server_port and --test_case are required\n", prog);
    usage(stderr, prog);
    return 2;
  }
  const char *conflict = NULL;
  if (!use_tls && (tls_ca != NULL || tls_cert != NULL || tls_key != NULL))
    conflict = "--tls_ca, --tls_cert and --tls_key need --use_tls";
  else if ((tls_cert == NULL) != (tls_key == NULL))
    conflict = "--tls_cert and --tls_key go together";
  if (conflict != NULL) {
    fprintf(stderr, "%s: %s\n", prog, conflict);
    usage(stderr, prog);
    return 2;
  }

  /* The cases to run, checked before anything connects. */
  const struct test_case *run[N_CASES * 4];
  size_t n_run = 0;
  if (strcmp(test_case, "all") == 0) {
    for (size_t i = 0; i < N_CASES; i++)
      run[n_run++] = &cases[i];
  } else {
    for (const char *p = test_case; *p != '\0';) {
      size_t len = strcspn(p, ",");
      if (len > 0) {
        const struct test_case *c = find_case(p, len);
        if (c == NULL) {
          fprintf(stderr, "%s: unknown --test_case '%.*s'\n", prog, (int)len,
                  p);
          usage(stderr, prog);
          return 2;
        }
        if (n_run == sizeof run / sizeof run[0]) {
          fprintf(stderr, "%s: too many cases\n", prog);
          return 2;
        }
        run[n_run++] = c;
      }
      p += len;
      if (*p == ',')
        p++;
    }
    if (n_run == 0) {
      fprintf(stderr, "%s: no --test_case given\n", prog);
      return 2;
    }
  }

  char target[300];
  int bracket = strchr(host, ':') != NULL && host[0] != '[';
  if ((size_t)snprintf(target, sizeof target, "%s%s%s:%ld", bracket ? "[" : "",
                       host, bracket ? "]" : "", port) >= sizeof target) {
    fprintf(stderr, "%s: host name too long\n", prog);
    return 2;
  }
  sluice_channel_opts *chopts = NULL;
  int rc = sluice_channel_opts_new(&chopts);
  if (rc != 0) {
    fprintf(stderr, "%s: %s\n", prog, sluice_strerror(rc));
    return 1;
  }
  if (use_tls) {
    /* The files are read here: a missing or bad one fails now. */
    sluice_tls_client_config cfg;
    sluice_tls_client_config_init(&cfg);
    cfg.ca.file = tls_ca;
    cfg.cert.file = tls_cert;
    cfg.key.file = tls_key;
    cfg.server_name_override = host_override;
    rc = sluice_channel_opts_set_tls(chopts, &cfg);
    if (rc != 0) {
      fprintf(stderr, "%s: cannot use the TLS credentials: %s\n", prog,
              rc == SLUICE_ERR_TLS ? sluice_channel_opts_last_error(chopts)
                                   : sluice_strerror(rc));
      sluice_channel_opts_del(chopts);
      return 2;
    }
  }
  rc = sluice_channel_new(&channel, target, chopts);
  sluice_channel_opts_del(chopts);
  if (rc != 0) {
    fprintf(stderr, "%s: cannot create a channel to %s: %s\n", prog, target,
            sluice_strerror(rc));
    return 1;
  }

  size_t failed = 0;
  for (size_t i = 0; i < n_run; i++)
    if (run_case(run[i]) != 0)
      failed++;

  sluice_channel_del(channel);
  if (failed > 0)
    fprintf(stderr, "%s: %zu of %zu case(s) failed\n", prog, failed, n_run);
  return failed > 0 ? 1 : 0;
}
