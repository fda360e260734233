/* wire/grpc_headers.c: response blocks as the client sees them (normal,
 * Trailers-Only, a stray middle block), request blocks as the server sees
 * them, each header's parsing and the verdicts with their exact texts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include <sluice/metadata.h>
#include <sluice/status.h>

#include "wire/grpc_headers.h"

/* ---- helpers */

static int resp_h(sluice__grpc_resp *r, const char *name, const char *value) {
  return sluice__grpc_resp_header(r, name, strlen(name), (const uint8_t *)value,
                                  strlen(value));
}

static int req_h(sluice__grpc_req *q, const char *name, const char *value) {
  return sluice__grpc_req_header(q, name, strlen(name), (const uint8_t *)value,
                                 strlen(value));
}

static void expect_entry(const sluice_metadata *md, size_t i, const char *key,
                         const void *value, size_t len) {
  const char *k;
  const void *v;
  size_t n;
  assert_int_equal(sluice_metadata_get(md, i, &k, &v, &n), 0);
  assert_string_equal(k, key);
  assert_int_equal(n, len);
  assert_memory_equal(v, value, len);
}

static void expect_str_entry(const sluice_metadata *md, size_t i,
                             const char *key, const char *value) {
  expect_entry(md, i, key, value, strlen(value));
}

/* ---- response */

static void response_normal(void **state) {
  (void)state;
  sluice__grpc_resp r;
  sluice__grpc_resp_init(&r);
  assert_int_equal(r.http_status, 0);
  assert_false(r.got_headers);

  /* The response headers. */
  assert_int_equal(resp_h(&r, ":status", "200"), 0);
  assert_int_equal(resp_h(&r, "content-type", "application/grpc"), 0);
  assert_int_equal(resp_h(&r, "grpc-encoding", "gzip"), 0);
  assert_int_equal(resp_h(&r, "grpc-accept-encoding", "identity,gzip"), 0);
  assert_int_equal(resp_h(&r, "x-initial", "one"), 0);
  assert_int_equal(resp_h(&r, "x-bin-bin", "q6ur"), 0);
  assert_int_equal(r.http_status, 200);
  assert_false(r.bad_content_type);
  assert_true(r.enc_ok);
  assert_int_equal(r.enc, SLUICE_COMPRESS_GZIP);
  assert_false(r.have_grpc_status);
  assert_non_null(r.md);

  sluice__grpc_block b = sluice__grpc_resp_block_done(&r, 0, 1);
  assert_int_equal(b.kind, SLUICE__GRPC_BLOCK_INITIAL);
  assert_true(r.got_headers);
  assert_null(r.md); /* handed over */
  assert_false(b.load_report);
  assert_int_equal(sluice_metadata_count(b.md), 2);
  expect_str_entry(b.md, 0, "x-initial", "one");
  expect_entry(b.md, 1, "x-bin-bin", "\xab\xab\xab", 3);
  sluice_metadata *initial = b.md;

  /* The trailers. */
  assert_int_equal(resp_h(&r, "grpc-status", "0"), 0);
  assert_int_equal(resp_h(&r, "grpc-message", "all %E2%98%BA good%21"), 0);
  assert_int_equal(resp_h(&r, "x-trailing", "two"), 0);
  assert_int_equal(resp_h(&r, "endpoint-load-metrics-bin", "CQAAAAAAAOA/"), 0);
  assert_true(r.load_report);
  b = sluice__grpc_resp_block_done(&r, 1, 0);
  assert_int_equal(b.kind, SLUICE__GRPC_BLOCK_TRAILERS);
  assert_true(b.load_report);
  assert_false(r.load_report); /* cleared for the next block */
  assert_int_equal(sluice_metadata_count(b.md), 2);
  expect_str_entry(b.md, 0, "x-trailing", "two");
  size_t len = 0;
  assert_non_null(
      sluice_metadata_find(b.md, "endpoint-load-metrics-bin", &len));
  assert_int_equal(len, 9);

  /* Accumulated over both blocks. */
  assert_true(r.have_grpc_status);
  assert_int_equal(r.grpc_status, SLUICE_STATUS_OK);
  assert_string_equal(r.grpc_message, "all \xE2\x98\xBA good!");
  assert_int_equal(r.http_status, 200);
  assert_true(r.enc_ok);

  sluice_metadata_del(initial);
  sluice_metadata_del(b.md);
  sluice__grpc_resp_reset(&r);
  assert_null(r.grpc_message);
  assert_false(r.have_grpc_status);
  assert_false(r.got_headers);
}

static void response_trailers_only(void **state) {
  (void)state;
  sluice__grpc_resp r;
  sluice__grpc_resp_init(&r);
  resp_h(&r, ":status", "200");
  resp_h(&r, "content-type", "application/grpc+proto");
  resp_h(&r, "grpc-status", "5");
  resp_h(&r, "grpc-message", "no such thing");
  /* One block, first and last: trailers win over initial. */
  sluice__grpc_block b = sluice__grpc_resp_block_done(&r, 1, 1);
  assert_int_equal(b.kind, SLUICE__GRPC_BLOCK_TRAILERS);
  assert_null(b.md); /* no custom metadata: no list was made */
  assert_false(b.load_report);
  assert_true(r.got_headers);
  assert_true(r.have_grpc_status);
  assert_int_equal(r.grpc_status, SLUICE_STATUS_NOT_FOUND);
  assert_string_equal(r.grpc_message, "no such thing");
  assert_false(r.bad_content_type);
  assert_false(r.enc_ok); /* no grpc-encoding */
  sluice__grpc_resp_reset(&r);
}

static void response_other_block(void **state) {
  (void)state;
  sluice__grpc_resp r;
  sluice__grpc_resp_init(&r);
  resp_h(&r, ":status", "200");
  sluice_metadata_del(sluice__grpc_resp_block_done(&r, 0, 1).md);
  /* A second block that does not end the stream: dropped (and freed; ASan
   * would see the leak). */
  resp_h(&r, "x-middle", "lost");
  resp_h(&r, "endpoint-load-metrics-bin", "CQAAAAAAAOA/");
  sluice__grpc_block b = sluice__grpc_resp_block_done(&r, 0, 0);
  assert_int_equal(b.kind, SLUICE__GRPC_BLOCK_OTHER);
  assert_null(b.md);
  assert_false(b.load_report);
  assert_null(r.md);
  assert_false(r.load_report);
  /* Then the trailers start a fresh list. */
  resp_h(&r, "x-last", "kept");
  b = sluice__grpc_resp_block_done(&r, 1, 0);
  assert_int_equal(sluice_metadata_count(b.md), 1);
  expect_str_entry(b.md, 0, "x-last", "kept");
  sluice_metadata_del(b.md);
  sluice__grpc_resp_reset(&r);
}

static void response_http_status(void **state) {
  (void)state;
  static const struct {
    const char *v;
    int want;
  } cases[] = {
      {"200", 200},
      {"404", 404},
      {"503", 503},
      {"2x0", 2},
      {"", 0},
      {"x", 0},
      {"0200", 200},
      /* Saturates instead of overflowing. */
      {"99999999999999999999999", 999999},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    sluice__grpc_resp r;
    sluice__grpc_resp_init(&r);
    resp_h(&r, ":status", cases[i].v);
    assert_int_equal(r.http_status, cases[i].want);
    sluice__grpc_resp_reset(&r);
  }
  /* The last :status wins (nghttp2 passes one per block: 1xx, then the
   * final one). */
  sluice__grpc_resp r;
  sluice__grpc_resp_init(&r);
  resp_h(&r, ":status", "100");
  resp_h(&r, ":status", "200");
  assert_int_equal(r.http_status, 200);
  sluice__grpc_resp_reset(&r);
}

static void content_type_rule(void **state) {
  (void)state;
  static const char *const good[] = {
      "application/grpc",      "application/grpc+proto",
      "application/grpc+json", "application/grpc;charset=utf-8",
      "application/grpc+",
  };
  static const char *const bad[] = {
      "application/grpcx", "application/grp",   "application/json",
      "Application/grpc",  "application/GRPC",  "",
      " application/grpc", "application/grpc ",
  };
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
    assert_true(sluice__grpc_content_type_ok((const uint8_t *)good[i],
                                             strlen(good[i])));
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    if (sluice__grpc_content_type_ok((const uint8_t *)bad[i], strlen(bad[i])))
      fail_msg("\"%s\" accepted", bad[i]);

  /* Both sides use it; the last content-type wins; none at all is fine. */
  sluice__grpc_resp r;
  sluice__grpc_resp_init(&r);
  assert_false(r.bad_content_type);
  resp_h(&r, "content-type", "text/html");
  assert_true(r.bad_content_type);
  resp_h(&r, "content-type", "application/grpc");
  assert_false(r.bad_content_type);
  sluice__grpc_resp_reset(&r);
}

static void response_grpc_status(void **state) {
  (void)state;
  static const struct {
    const char *v;
    sluice_status_code want;
  } cases[] = {
      {"0", SLUICE_STATUS_OK},           {"1", SLUICE_STATUS_CANCELLED},
      {"14", SLUICE_STATUS_UNAVAILABLE}, {"16", SLUICE_STATUS_UNAUTHENTICATED},
      {"17", SLUICE_STATUS_UNKNOWN},  /* beyond the known codes */
      {"99", SLUICE_STATUS_UNKNOWN},  /* likewise */
      {"007", SLUICE_STATUS_UNKNOWN}, /* three digits */
      {"-1", SLUICE_STATUS_UNKNOWN},     {" 0", SLUICE_STATUS_UNKNOWN},
      {"", SLUICE_STATUS_UNKNOWN},       {"OK", SLUICE_STATUS_UNKNOWN},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    sluice__grpc_resp r;
    sluice__grpc_resp_init(&r);
    resp_h(&r, "grpc-status", cases[i].v);
    assert_true(r.have_grpc_status);
    if (r.grpc_status != cases[i].want)
      fail_msg("grpc-status \"%s\": %d, want %d", cases[i].v, r.grpc_status,
               cases[i].want);
    sluice__grpc_resp_reset(&r);
  }
}

static void response_encoding(void **state) {
  (void)state;
  sluice__grpc_resp r;
  sluice__grpc_resp_init(&r);
  resp_h(&r, "grpc-encoding", "identity");
  assert_true(r.enc_ok);
  assert_int_equal(r.enc, SLUICE_COMPRESS_NONE);
  resp_h(&r, "grpc-encoding", "gzip");
  assert_true(r.enc_ok);
  assert_int_equal(r.enc, SLUICE_COMPRESS_GZIP);
  resp_h(&r, "grpc-encoding", "deflate"); /* not implemented */
  assert_false(r.enc_ok);
  resp_h(&r, "grpc-encoding", "GZIP"); /* case matters */
  assert_false(r.enc_ok);
  sluice__grpc_resp_reset(&r);
}

static void response_message(void **state) {
  (void)state;
  sluice__grpc_resp r;
  sluice__grpc_resp_init(&r);
  /* The interop special_status_message text. */
  resp_h(&r, "grpc-message",
         "%09%0Atest with whitespace%0D%0Aand Unicode BMP %E2%98%BA and "
         "non-BMP %F0%9F%98%88%09%0A");
  assert_string_equal(r.grpc_message,
                      "\t\ntest with whitespace\r\nand Unicode BMP "
                      "\xE2\x98\xBA and non-BMP \xF0\x9F\x98\x88\t\n");
  /* Lenient: bad escapes stay as they are; the last message wins (the
   * first is freed). */
  resp_h(&r, "grpc-message", "100% %zz %4");
  assert_string_equal(r.grpc_message, "100% %zz %4");
  resp_h(&r, "grpc-message", "");
  assert_non_null(r.grpc_message);
  assert_string_equal(r.grpc_message, "");
  /* Not metadata. */
  assert_null(r.md);
  sluice__grpc_resp_reset(&r);
}

static void response_reserved_and_custom(void **state) {
  (void)state;
  sluice__grpc_resp r;
  sluice__grpc_resp_init(&r);
  /* Reserved: consumed by the protocol, never metadata. */
  resp_h(&r, ":path", "/x");
  resp_h(&r, "te", "trailers");
  resp_h(&r, "grpc-timeout", "1S");
  resp_h(&r, "grpc-accept-encoding", "gzip");
  resp_h(&r, "grpc-whatever", "x");
  assert_null(r.md);
  /* grpc-* names meant for the application, user-agent, custom ones. */
  resp_h(&r, "grpc-retry-pushback-ms", "25");
  resp_h(&r, "grpc-previous-rpc-attempts", "1");
  resp_h(&r, "grpc-status-details-bin", "CAU");
  resp_h(&r, "user-agent", "peer/1.0");
  resp_h(&r, "x-dup", "a");
  resp_h(&r, "x-dup", "b");
  /* Dropped by the metadata rules, without failing the block. */
  assert_int_equal(resp_h(&r, "X-Upper", "v"), 0);
  assert_int_equal(resp_h(&r, "x-ctl", "a\x01z"), 0);
  assert_int_equal(resp_h(&r, "x-broken-bin", "!!!"), 0);
  sluice__grpc_block b = sluice__grpc_resp_block_done(&r, 1, 0);
  assert_int_equal(sluice_metadata_count(b.md), 6);
  expect_str_entry(b.md, 0, "grpc-retry-pushback-ms", "25");
  expect_str_entry(b.md, 1, "grpc-previous-rpc-attempts", "1");
  expect_entry(b.md, 2, "grpc-status-details-bin", "\x08\x05", 2);
  expect_str_entry(b.md, 3, "user-agent", "peer/1.0");
  expect_str_entry(b.md, 4, "x-dup", "a");
  expect_str_entry(b.md, 5, "x-dup", "b");
  sluice_metadata_del(b.md);
  sluice__grpc_resp_reset(&r);
}

static void response_reset_frees(void **state) {
  (void)state;
  sluice__grpc_resp r;
  sluice__grpc_resp_init(&r);
  resp_h(&r, ":status", "503");
  resp_h(&r, "grpc-message", "busy");
  resp_h(&r, "x-pending", "in the open block");
  resp_h(&r, "grpc-encoding", "gzip");
  resp_h(&r, "content-type", "text/plain");
  sluice__grpc_resp_block_done(&r, 0, 0); /* OTHER: frees its list */
  resp_h(&r, "x-pending", "again");
  /* A transparent retry: everything the first attempt heard is forgotten
   * (and freed: ASan checks). */
  sluice__grpc_resp_reset(&r);
  assert_int_equal(r.http_status, 0);
  assert_false(r.got_headers);
  assert_false(r.have_grpc_status);
  assert_null(r.grpc_message);
  assert_false(r.bad_content_type);
  assert_false(r.enc_ok);
  assert_false(r.load_report);
  assert_null(r.md);
  sluice__grpc_resp_reset(&r); /* idempotent */
}

/* ---- request */

static sluice_metadata *new_md(void) {
  sluice_metadata *md = NULL;
  assert_int_equal(sluice_metadata_new(&md), 0);
  return md;
}

static void request_normal(void **state) {
  (void)state;
  sluice_metadata *md = new_md();
  sluice__grpc_req q;
  sluice__grpc_req_init(&q, md);
  assert_null(q.path);
  assert_true(q.enc_ok); /* absent: identity */
  assert_int_equal(q.enc, SLUICE_COMPRESS_NONE);

  assert_int_equal(req_h(&q, ":method", "POST"), 0);
  assert_int_equal(req_h(&q, ":scheme", "http"), 0);
  assert_int_equal(req_h(&q, ":path", "/pkg.Svc/Method"), 0);
  assert_int_equal(req_h(&q, ":authority", "example.com:50051"), 0);
  assert_int_equal(req_h(&q, "grpc-timeout", "1500m"), 0);
  assert_int_equal(req_h(&q, "te", "trailers"), 0);
  assert_int_equal(req_h(&q, "content-type", "application/grpc"), 0);
  assert_int_equal(req_h(&q, "user-agent", "grpc-go/1.60"), 0);
  assert_int_equal(req_h(&q, "grpc-encoding", "gzip"), 0);
  assert_int_equal(req_h(&q, "grpc-accept-encoding", "identity, gzip"), 0);
  assert_int_equal(req_h(&q, "grpc-previous-rpc-attempts", "1"), 0);
  assert_int_equal(req_h(&q, "x-echo-bin", "q6ur"), 0);

  assert_string_equal(q.path, "/pkg.Svc/Method");
  assert_ptr_equal(q.path, q.path_buf); /* inline: no allocation */
  assert_false(q.bad_method);
  assert_false(q.bad_content_type);
  assert_true(q.have_te);
  assert_true(q.have_timeout);
  assert_false(q.bad_timeout);
  assert_int_equal(q.timeout_ns, 1500000000ull);
  assert_true(q.enc_ok);
  assert_false(q.enc_unknown);
  assert_int_equal(q.enc, SLUICE_COMPRESS_GZIP);
  assert_true(q.accept_gzip);

  sluice__grpc_req_verdict v = sluice__grpc_req_done(&q);
  assert_int_equal(v.fault, SLUICE__GRPC_REQ_OK);
  assert_int_equal(v.code, SLUICE_STATUS_OK);
  assert_string_equal(v.text, "");
  assert_int_equal(sluice__grpc_req_http_status(&q), 200);
  assert_int_equal(sluice__grpc_req_deadline(&q, 1000), 1500001000ull);

  /* :authority and user-agent are shown to the application, as in gRPC. */
  assert_int_equal(sluice_metadata_count(md), 4);
  expect_str_entry(md, 0, ":authority", "example.com:50051");
  expect_str_entry(md, 1, "user-agent", "grpc-go/1.60");
  expect_str_entry(md, 2, "grpc-previous-rpc-attempts", "1");
  expect_entry(md, 3, "x-echo-bin", "\xab\xab\xab", 3);

  sluice__grpc_req_reset(&q);
  assert_null(q.path);
  sluice_metadata_del(md);
}

static void request_path_storage(void **state) {
  (void)state;
  sluice_metadata *md = new_md();
  sluice__grpc_req q;
  sluice__grpc_req_init(&q, md);
  char p[300];
  /* The longest inline path: the buffer size minus its NUL. */
  memset(p, 'a', sizeof p);
  p[0] = '/';
  p[SLUICE__GRPC_PATH_INLINE - 1] = '\0';
  req_h(&q, ":path", p);
  assert_ptr_equal(q.path, q.path_buf);
  assert_string_equal(q.path, p);
  /* One more byte: allocated. */
  p[SLUICE__GRPC_PATH_INLINE - 1] = 'a';
  p[SLUICE__GRPC_PATH_INLINE] = '\0';
  req_h(&q, ":path", p);
  assert_ptr_not_equal(q.path, q.path_buf);
  assert_string_equal(q.path, p);
  assert_int_equal(strlen(q.path), SLUICE__GRPC_PATH_INLINE);
  /* Replaced by a longer one (the first allocation is freed), then by a
   * short one (inline again). */
  memset(p + 1, 'b', sizeof p - 2);
  p[299] = '\0';
  req_h(&q, ":path", p);
  assert_int_equal(strlen(q.path), 299);
  req_h(&q, ":path", "/s/M");
  assert_ptr_equal(q.path, q.path_buf);
  assert_string_equal(q.path, "/s/M");
  /* An empty :path is a path (routing will not find it). */
  req_h(&q, ":path", "");
  assert_non_null(q.path);
  assert_string_equal(q.path, "");
  /* reset frees a long one; twice is harmless. */
  req_h(&q, ":path", p);
  sluice__grpc_req_reset(&q);
  assert_null(q.path);
  sluice__grpc_req_reset(&q);
  sluice_metadata_del(md);
}

static void request_init_keeps_buffer(void **state) {
  (void)state;
  /* init touches the fields, not the 96-byte buffer (a recycled call is
   * already zeroed; clearing it again showed in profiles). */
  sluice__grpc_req q;
  memset(&q, 0x5a, sizeof q);
  sluice_metadata *md = new_md();
  sluice__grpc_req_init(&q, md);
  assert_ptr_equal(q.md, md);
  assert_null(q.path);
  assert_false(q.have_timeout);
  assert_false(q.bad_timeout);
  assert_false(q.bad_method);
  assert_false(q.bad_content_type);
  assert_false(q.have_te);
  assert_true(q.enc_ok);
  assert_false(q.enc_unknown);
  assert_int_equal(q.enc, SLUICE_COMPRESS_NONE);
  assert_true(q.accept_gzip); /* absent grpc-accept-encoding: gzip */
  assert_int_equal(q.timeout_ns, 0);
  assert_int_equal((unsigned char)q.path_buf[0], 0x5a);
  assert_int_equal((unsigned char)q.path_buf[SLUICE__GRPC_PATH_INLINE - 1],
                   0x5a);
  sluice_metadata_del(md);
}

static sluice__grpc_req_verdict verdict_of(const char *const *hdrs) {
  sluice_metadata *md = new_md();
  sluice__grpc_req q;
  sluice__grpc_req_init(&q, md);
  for (size_t i = 0; hdrs[i]; i += 2)
    req_h(&q, hdrs[i], hdrs[i + 1]);
  sluice__grpc_req_verdict v = sluice__grpc_req_done(&q);
  sluice__grpc_req_reset(&q);
  sluice_metadata_del(md);
  return v;
}

static void expect_verdict(const char *const *hdrs, sluice__grpc_req_fault f,
                           sluice_status_code code, const char *text) {
  sluice__grpc_req_verdict v = verdict_of(hdrs);
  assert_int_equal(v.fault, f);
  assert_int_equal(v.code, code);
  assert_string_equal(v.text, text);
}

static void request_verdicts(void **state) {
  (void)state;
  const char *const get[] = {":method", "GET", ":path", "/a/b", NULL};
  expect_verdict(get, SLUICE__GRPC_REQ_BAD_METHOD, SLUICE_STATUS_UNIMPLEMENTED,
                 "gRPC requires the POST method");
  const char *const lower[] = {":method", "post", ":path", "/a/b", NULL};
  expect_verdict(lower, SLUICE__GRPC_REQ_BAD_METHOD,
                 SLUICE_STATUS_UNIMPLEMENTED, "gRPC requires the POST method");
  const char *const ct[] = {":method", "POST",         ":path",
                            "/a/b",    "content-type", "application/json",
                            NULL};
  expect_verdict(ct, SLUICE__GRPC_REQ_BAD_CONTENT_TYPE, SLUICE_STATUS_INTERNAL,
                 "invalid gRPC request content-type");
  const char *const tmo[] = {":path", "/a/b", "grpc-timeout", "1", NULL};
  expect_verdict(tmo, SLUICE__GRPC_REQ_BAD_TIMEOUT, SLUICE_STATUS_INTERNAL,
                 "invalid grpc-timeout header");
  const char *const nopath[] = {":method", "POST", "content-type",
                                "application/grpc", NULL};
  expect_verdict(nopath, SLUICE__GRPC_REQ_NO_PATH, SLUICE_STATUS_UNIMPLEMENTED,
                 "no :path");
  /* Order: method, content-type, timeout, path. */
  const char *const all[] = {
      ":method", "PUT", "content-type", "x/y", "grpc-timeout", "zz", NULL};
  expect_verdict(all, SLUICE__GRPC_REQ_BAD_METHOD, SLUICE_STATUS_UNIMPLEMENTED,
                 "gRPC requires the POST method");
  const char *const ct_tmo[] = {"content-type", "x/y", "grpc-timeout", "zz",
                                NULL};
  expect_verdict(ct_tmo, SLUICE__GRPC_REQ_BAD_CONTENT_TYPE,
                 SLUICE_STATUS_INTERNAL, "invalid gRPC request content-type");
  const char *const tmo_nopath[] = {"grpc-timeout", "zz", NULL};
  expect_verdict(tmo_nopath, SLUICE__GRPC_REQ_BAD_TIMEOUT,
                 SLUICE_STATUS_INTERNAL, "invalid grpc-timeout header");
  /* Lenient, as today: no :method, no content-type, no te is fine. */
  const char *const bare[] = {":path", "/a/b", NULL};
  expect_verdict(bare, SLUICE__GRPC_REQ_OK, SLUICE_STATUS_OK, "");
  /* The last :method counts. */
  const char *const twice[] = {":method", "GET",  ":method", "POST",
                               ":path",   "/a/b", NULL};
  expect_verdict(twice, SLUICE__GRPC_REQ_OK, SLUICE_STATUS_OK, "");
}

static void request_http_status(void **state) {
  (void)state;
  sluice_metadata *md = new_md();
  sluice__grpc_req q;
  sluice__grpc_req_init(&q, md);
  assert_int_equal(sluice__grpc_req_http_status(&q), 200);
  /* 415 follows the content-type even when the method is refused first. */
  req_h(&q, ":method", "GET");
  req_h(&q, "content-type", "text/plain");
  assert_int_equal(sluice__grpc_req_done(&q).fault,
                   SLUICE__GRPC_REQ_BAD_METHOD);
  assert_int_equal(sluice__grpc_req_http_status(&q), 415);
  req_h(&q, "content-type", "application/grpc;x=1");
  assert_int_equal(sluice__grpc_req_http_status(&q), 200);
  sluice_metadata_del(md);
}

static void request_timeout(void **state) {
  (void)state;
  sluice_metadata *md = new_md();
  sluice__grpc_req q;
  sluice__grpc_req_init(&q, md);
  assert_int_equal(sluice__grpc_req_deadline(&q, 123), 0); /* none */

  req_h(&q, "grpc-timeout", "0n"); /* already due, not "none" */
  assert_true(q.have_timeout);
  assert_int_equal(sluice__grpc_req_deadline(&q, 777), 777);

  req_h(&q, "grpc-timeout", "2S"); /* the last valid one counts */
  assert_int_equal(sluice__grpc_req_deadline(&q, 1), 2000000001ull);

  /* Hours that overflow saturate; the deadline is capped, not wrapped. */
  req_h(&q, "grpc-timeout", "99999999H");
  assert_int_equal(q.timeout_ns, UINT64_MAX);
  assert_int_equal(sluice__grpc_req_deadline(&q, 5), 5 + UINT64_MAX / 2);

  /* A bad one sticks, whatever follows. */
  assert_false(q.bad_timeout);
  req_h(&q, "grpc-timeout", "100000000S"); /* 9 digits */
  assert_true(q.bad_timeout);
  req_h(&q, "grpc-timeout", "1S");
  assert_true(q.bad_timeout);
  assert_true(q.have_timeout);

  static const char *const bad[] = {"", "S", "1", "1s", "1X", "-1S", "1 S"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    sluice__grpc_req r;
    sluice__grpc_req_init(&r, md);
    req_h(&r, "grpc-timeout", bad[i]);
    if (!r.bad_timeout || r.have_timeout)
      fail_msg("grpc-timeout \"%s\" accepted", bad[i]);
  }
  assert_int_equal(sluice_metadata_count(md), 0); /* never metadata */
  sluice_metadata_del(md);
}

static void request_encodings(void **state) {
  (void)state;
  sluice_metadata *md = new_md();
  sluice__grpc_req q;
  sluice__grpc_req_init(&q, md);
  req_h(&q, "grpc-encoding", "snappy");
  assert_false(q.enc_ok);
  assert_true(q.enc_unknown);
  req_h(&q, "grpc-encoding", "gzip"); /* the last one wins */
  assert_true(q.enc_ok);
  assert_false(q.enc_unknown);
  assert_int_equal(q.enc, SLUICE_COMPRESS_GZIP);
  req_h(&q, "grpc-encoding", "identity");
  assert_true(q.enc_ok);
  assert_int_equal(q.enc, SLUICE_COMPRESS_NONE);

  static const struct {
    const char *v;
    int gzip;
  } acc[] = {
      {"gzip", 1},
      {"identity,gzip", 1},
      {"identity, deflate, gzip", 1},
      {"\tgzip\t", 1},
      {"identity,deflate", 0},
      {"gzip;q=1", 0},
      {"gzipx", 0},
      {"", 0},
  };
  for (size_t i = 0; i < sizeof acc / sizeof acc[0]; i++) {
    req_h(&q, "grpc-accept-encoding", acc[i].v);
    if (q.accept_gzip != acc[i].gzip)
      fail_msg("grpc-accept-encoding \"%s\": %d", acc[i].v, q.accept_gzip);
  }
  assert_int_equal(sluice_metadata_count(md), 0);
  sluice_metadata_del(md);
}

static void request_metadata_filter(void **state) {
  (void)state;
  sluice_metadata *md = new_md();
  sluice__grpc_req q;
  sluice__grpc_req_init(&q, md);
  /* Ignored: other pseudo-headers, reserved names. */
  req_h(&q, ":scheme", "https");
  req_h(&q, ":protocol", "x");
  req_h(&q, "grpc-status", "0");
  req_h(&q, "grpc-message", "x");
  req_h(&q, "grpc-foo", "x");
  req_h(&q, "te", "trailers");
  assert_int_equal(sluice_metadata_count(md), 0);
  /* Dropped by the metadata rules, returning 0. */
  assert_int_equal(req_h(&q, "Bad-Key", "v"), 0);
  assert_int_equal(req_h(&q, "x-bad-bin", "***"), 0);
  assert_int_equal(req_h(&q, "x-ctl", "\x7f"), 0);
  assert_int_equal(sluice_metadata_count(md), 0);
  /* Kept, in arrival order, duplicates included; "-bin" values joined by
   * ',' arrive split. */
  req_h(&q, "x-a", "1");
  req_h(&q, "grpc-retry-pushback-ms", "5");
  req_h(&q, "x-a", "2");
  req_h(&q, "x-two-bin", "AQ,Ag==");
  assert_int_equal(sluice_metadata_count(md), 5);
  expect_str_entry(md, 0, "x-a", "1");
  expect_str_entry(md, 1, "grpc-retry-pushback-ms", "5");
  expect_str_entry(md, 2, "x-a", "2");
  expect_entry(md, 3, "x-two-bin", "\x01", 1);
  expect_entry(md, 4, "x-two-bin", "\x02", 1);
  sluice_metadata_del(md);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(response_normal),
      cmocka_unit_test(response_trailers_only),
      cmocka_unit_test(response_other_block),
      cmocka_unit_test(response_http_status),
      cmocka_unit_test(content_type_rule),
      cmocka_unit_test(response_grpc_status),
      cmocka_unit_test(response_encoding),
      cmocka_unit_test(response_message),
      cmocka_unit_test(response_reserved_and_custom),
      cmocka_unit_test(response_reset_frees),
      cmocka_unit_test(request_normal),
      cmocka_unit_test(request_path_storage),
      cmocka_unit_test(request_init_keeps_buffer),
      cmocka_unit_test(request_verdicts),
      cmocka_unit_test(request_http_status),
      cmocka_unit_test(request_timeout),
      cmocka_unit_test(request_encodings),
      cmocka_unit_test(request_metadata_filter),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
