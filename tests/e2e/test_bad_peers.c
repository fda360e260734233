/* A server facing clients that misbehave: bytes that are not HTTP/2, broken
 * frames, wrong content-type, undecodable or falsely compressed messages, a
 * client that vanishes mid-request. Each must get a clear answer (or a
 * closed connection) and the server must go on serving. The misbehaving
 * client is a minimal blocking nghttp2 client written here, so it can send
 * what no well-behaved gRPC stack would. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <nghttp2/nghttp2.h>

#include "e2e_common.h"

static int connect_raw(int port) {
  int fd = e2e_connect_loopback(port);
  assert_true(fd >= 0);
  return fd;
}

/* Reads until the server closes the connection; returns 1 if it did within
 * the receive timeout, 0 on a timeout. */
static int wait_closed(int fd) {
  char buf[4096];
  for (int i = 0; i < 100; i++) {
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n == 0)
      return 1;
    if (n < 0)
      return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : 1;
  }
  return 0;
}

/* The server still answers a well-formed call. */
static void assert_server_healthy(e2e_server *s) {
  sluice_channel *ch = e2e_channel(s, NULL);
  E2e__EchoMsg req = E2E__ECHO_MSG__INIT, *resp = NULL;
  req.text = "still there";
  sluice_status st;
  sluice_status_init(&st);
  assert_int_equal(e2e__echo__echo__blocking(ch, &req, &resp, NULL, &st),
                   SLUICE_STATUS_OK);
  assert_string_equal(resp->text, "still there");
  protobuf_c_message_free_unpacked(&resp->base, NULL);
  sluice_status_clear(&st);
  sluice_channel_del(ch);
}

/* ---- a minimal blocking HTTP/2 client */

typedef struct raw_h2 {
  int fd;
  nghttp2_session *s;
  int http_status;
  int grpc_status; /* -1 if none */
  int closed;
  const uint8_t *body;
  size_t body_len, body_sent;
} raw_h2;

static ssize_t send_cb(nghttp2_session *s, const uint8_t *data, size_t len,
                       int flags, void *ud) {
  (void)s;
  (void)flags;
  raw_h2 *r = ud;
  ssize_t n = send(r->fd, data, len, MSG_NOSIGNAL);
  return n < 0 ? NGHTTP2_ERR_CALLBACK_FAILURE : n;
}

static int header_cb(nghttp2_session *s, const nghttp2_frame *f,
                     const uint8_t *name, size_t nlen, const uint8_t *value,
                     size_t vlen, uint8_t flags, void *ud) {
  (void)s;
  (void)f;
  (void)flags;
  raw_h2 *r = ud;
  char v[32];
  size_t l = vlen < sizeof v - 1 ? vlen : sizeof v - 1;
  memcpy(v, value, l);
  v[l] = 0;
  if (nlen == 7 && memcmp(name, ":status", 7) == 0)
    r->http_status = atoi(v);
  if (nlen == 11 && memcmp(name, "grpc-status", 11) == 0)
    r->grpc_status = atoi(v);
  return 0;
}

static int close_cb(nghttp2_session *s, int32_t id, uint32_t err, void *ud) {
  (void)s;
  (void)id;
  (void)err;
  ((raw_h2 *)ud)->closed = 1;
  return 0;
}

static ssize_t body_cb(nghttp2_session *s, int32_t id, uint8_t *buf, size_t len,
                       uint32_t *flags, nghttp2_data_source *src, void *ud) {
  (void)s;
  (void)id;
  (void)src;
  raw_h2 *r = ud;
  size_t n = r->body_len - r->body_sent;
  if (n > len)
    n = len;
  if (n)
    memcpy(buf, r->body + r->body_sent, n);
  r->body_sent += n;
  if (r->body_sent == r->body_len)
    *flags |= NGHTTP2_DATA_FLAG_EOF;
  return (ssize_t)n;
}

/* Sends one POST with the given content-type and body (already framed) and
 * runs the session until the stream closes or the server goes away. */
static void raw_request_enc(raw_h2 *r, int port, const char *path,
                            const char *content_type, const char *encoding,
                            const uint8_t *body, size_t len) {
  memset(r, 0, sizeof *r);
  r->grpc_status = -1;
  r->fd = connect_raw(port);
  r->body = body;
  r->body_len = len;
  nghttp2_session_callbacks *cbs;
  nghttp2_session_callbacks_new(&cbs);
  nghttp2_session_callbacks_set_send_callback(cbs, send_cb);
  nghttp2_session_callbacks_set_on_header_callback(cbs, header_cb);
  nghttp2_session_callbacks_set_on_stream_close_callback(cbs, close_cb);
  assert_int_equal(nghttp2_session_client_new(&r->s, cbs, r), 0);
  nghttp2_session_callbacks_del(cbs);
  nghttp2_submit_settings(r->s, NGHTTP2_FLAG_NONE, NULL, 0);
#define NV(n, v)                                                               \
  {(uint8_t *)n, (uint8_t *)v, strlen(n), strlen(v), NGHTTP2_NV_FLAG_NONE}
  nghttp2_nv nva[] = {NV(":method", "POST"),
                      NV(":scheme", "http"),
                      NV(":path", path),
                      NV(":authority", "x"),
                      NV("content-type", content_type),
                      NV("te", "trailers"),
                      NV("grpc-encoding", (encoding ? encoding : ""))};
  nghttp2_data_provider dp = {.source.ptr = r, .read_callback = body_cb};
  assert_true(
      nghttp2_submit_request(r->s, NULL, nva, encoding ? 7 : 6, &dp, NULL) > 0);
  uint64_t end = e2e_now_ms() + E2E_HANG_MS;
  while (!r->closed && e2e_now_ms() < end) {
    if (nghttp2_session_send(r->s) != 0)
      break;
    uint8_t buf[16384];
    ssize_t n = recv(r->fd, buf, sizeof buf, 0);
    if (n <= 0)
      break;
    if (nghttp2_session_mem_recv(r->s, buf, (size_t)n) < 0)
      break;
  }
  nghttp2_session_del(r->s);
  close(r->fd);
}

static void raw_request(raw_h2 *r, int port, const char *path,
                        const char *content_type, const uint8_t *body,
                        size_t len) {
  raw_request_enc(r, port, path, content_type, NULL, body, len);
}

/* ---- tests */

static void test_not_http2(void **state) {
  e2e_server *s = *state;
  int fd = connect_raw(s->port);
  const char junk[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  assert_int_equal(send(fd, junk, sizeof junk - 1, MSG_NOSIGNAL),
                   (ssize_t)sizeof junk - 1);
  assert_true(wait_closed(fd));
  close(fd);
  assert_server_healthy(s);
}

static void test_broken_frame(void **state) {
  e2e_server *s = *state;
  int fd = connect_raw(s->port);
  const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  /* An empty SETTINGS, then a DATA frame on stream 0: PROTOCOL_ERROR. */
  const uint8_t frames[] = {0, 0, 0, 4, 0, 0, 0, 0,   0,   0,  0,
                            3, 0, 0, 0, 0, 0, 0, 'a', 'b', 'c'};
  send(fd, preface, sizeof preface - 1, MSG_NOSIGNAL);
  send(fd, frames, sizeof frames, MSG_NOSIGNAL);
  assert_true(wait_closed(fd));
  close(fd);
  assert_server_healthy(s);
}

static void test_wrong_content_type(void **state) {
  e2e_server *s = *state;
  raw_h2 r;
  const uint8_t body[] = {0, 0, 0, 0, 0};
  raw_request(&r, s->port, "/e2e.Echo/Echo", "text/plain", body, sizeof body);
  assert_int_equal(r.http_status, 415);
  assert_int_equal(s->calls, 0);
  assert_server_healthy(s);
}

static void test_undecodable_message(void **state) {
  e2e_server *s = *state;
  raw_h2 r;
  /* Field 1 (string) claims 100 bytes but 2 follow. */
  const uint8_t body[] = {0, 0, 0, 0, 4, 0x0a, 100, 'h', 'i'};
  raw_request(&r, s->port, "/e2e.Echo/Echo", "application/grpc", body,
              sizeof body);
  assert_int_equal(r.http_status, 200);
  assert_int_equal(r.grpc_status, SLUICE_STATUS_INTERNAL);
  assert_int_equal(s->calls, 0);
}

static void test_false_compressed_flag(void **state) {
  e2e_server *s = *state;
  raw_h2 r;
  const uint8_t body[] = {1, 0, 0, 0, 0};
  raw_request(&r, s->port, "/e2e.Echo/Echo", "application/grpc", body,
              sizeof body);
  assert_int_equal(r.http_status, 200);
  assert_true(r.grpc_status > 0);
  assert_int_equal(s->calls, 0);
}

/* A compressed message in an encoding we do not speak: UNIMPLEMENTED, as
 * gRPC answers; gzip that is not gzip: INTERNAL. */
static void test_unknown_or_corrupt_encoding(void **state) {
  e2e_server *s = *state;
  raw_h2 r;
  const uint8_t body[] = {1, 0, 0, 0, 3, 'a', 'b', 'c'};
  raw_request_enc(&r, s->port, "/e2e.Echo/Echo", "application/grpc", "snappy",
                  body, sizeof body);
  assert_int_equal(r.http_status, 200);
  assert_int_equal(r.grpc_status, SLUICE_STATUS_UNIMPLEMENTED);
  raw_request_enc(&r, s->port, "/e2e.Echo/Echo", "application/grpc", "gzip",
                  body, sizeof body);
  assert_int_equal(r.grpc_status, SLUICE_STATUS_INTERNAL);
  assert_int_equal(s->calls, 0);
  assert_server_healthy(s);
}

static void test_truncated_message(void **state) {
  e2e_server *s = *state;
  raw_h2 r;
  /* The prefix announces 10 bytes; the stream ends after 2. */
  const uint8_t body[] = {0, 0, 0, 0, 10, 0x0a, 0};
  raw_request(&r, s->port, "/e2e.Echo/Echo", "application/grpc", body,
              sizeof body);
  assert_int_equal(r.grpc_status, SLUICE_STATUS_INTERNAL);
  assert_int_equal(s->calls, 0);
}

static void test_no_message(void **state) {
  e2e_server *s = *state;
  raw_h2 r;
  raw_request(&r, s->port, "/e2e.Echo/Echo", "application/grpc", NULL, 0);
  assert_int_equal(r.grpc_status, SLUICE_STATUS_UNIMPLEMENTED);
  assert_int_equal(s->calls, 0);
}

static void test_client_vanishes_mid_request(void **state) {
  e2e_server *s = *state;
  for (int i = 0; i < 20; i++) {
    int fd = connect_raw(s->port);
    const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    const uint8_t settings[] = {0, 0, 0, 4, 0, 0, 0, 0, 0};
    send(fd, preface, sizeof preface - 1, MSG_NOSIGNAL);
    send(fd, settings, sizeof settings, MSG_NOSIGNAL);
    close(fd); /* gone before any request completed */
  }
  assert_server_healthy(s);
}

static int setup(void **state) {
  *state = e2e_server_start(NULL, NULL);
  return 0;
}

static int teardown(void **state) {
  e2e_server_free(*state);
  return 0;
}

int main(void) {
  e2e_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_not_http2, setup, teardown),
      cmocka_unit_test_setup_teardown(test_broken_frame, setup, teardown),
      cmocka_unit_test_setup_teardown(test_wrong_content_type, setup, teardown),
      cmocka_unit_test_setup_teardown(test_undecodable_message, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_unknown_or_corrupt_encoding, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_false_compressed_flag, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_truncated_message, setup, teardown),
      cmocka_unit_test_setup_teardown(test_no_message, setup, teardown),
      cmocka_unit_test_setup_teardown(test_client_vanishes_mid_request, setup,
                                      teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
