/* Request and response header sets -> parsed facts (wire/grpc_headers.h).
 *
 * Input: [mode] [8 bytes: now] then header lines ("name: value", fuzz.h);
 * an empty line ends a block. mode bit 0: a request (server side), else a
 * response (client side) whose block i has END_STREAM when bit (1 + i % 7)
 * of mode is set.
 * Invariants: every fact equals what a reference reading of the same
 * headers gives (last value wins, bad timeout sticky, the verdict's order,
 * the deadline's cap); a block's metadata holds only valid, unreserved keys
 * and ASCII values; its kind follows END_STREAM and position; nothing
 * leaks after reset. */
#include "fuzz.h"

#include "wire/compress.h"
#include "wire/grpc_headers.h"
#include "wire/metadata_internal.h"
#include "wire/metadata_rules.h"
#include "wire/percent.h"
#include "wire/timeout.h"

#define IS(h, lit)                                                             \
  ((h)->nlen == sizeof(lit) - 1 && memcmp((h)->name, lit, (h)->nlen) == 0)

static int same(const uint8_t *v, size_t n, const char *lit) {
  return strlen(lit) == n && memcmp(v, lit, n) == 0;
}

static int ref_ct_ok(const uint8_t *v, size_t n) {
  return n >= 16 && memcmp(v, "application/grpc", 16) == 0 &&
         (n == 16 || v[16] == '+' || v[16] == ';');
}

/* grpc-accept-encoding names gzip as a whole item. */
static int ref_lists_gzip(const uint8_t *v, size_t n) {
  size_t i = 0;
  while (i <= n) {
    size_t s = i;
    while (i < n && v[i] != ',')
      i++;
    size_t e = i;
    while (s < e && (v[s] == ' ' || v[s] == '\t'))
      s++;
    while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
      e--;
    if (same(v + s, e - s, "gzip"))
      return 1;
    i++;
  }
  return 0;
}

/* Every entry of a received list: a key gRPC allows (':' only in front, for
 * :authority), an ASCII value unless -bin. */
static void check_md(const sluice_metadata *md, int request) {
  for (size_t i = 0; i < sluice_metadata_count(md); i++) {
    const char *k;
    const void *v;
    size_t vn;
    FUZZ_CHECK(sluice_metadata_get(md, i, &k, &v, &vn) == 0);
    size_t kn = strlen(k);
    if (request && strcmp(k, ":authority") == 0)
      continue;
    FUZZ_CHECK(sluice__md_key_valid(k, kn));
    FUZZ_CHECK(!sluice__md_is_reserved(k, kn));
    FUZZ_CHECK(sluice__md_is_bin(k, kn) || sluice__md_ascii_value_valid(v, vn));
  }
}

static void request(fuzz_in *in, uint64_t now) {
  sluice_metadata *md;
  FUZZ_CHECK(sluice_metadata_new(&md) == 0);
  sluice__grpc_req q;
  sluice__grpc_req_init(&q, md);
  /* The reference. */
  int bad_method = 0, bad_ct = 0, bad_timeout = 0, have_timeout = 0;
  int have_te = 0, enc_ok = 1, accept_gzip = 1;
  uint64_t timeout = 0;
  sluice_compression enc = SLUICE_COMPRESS_NONE;
  const uint8_t *path = NULL;
  size_t path_len = 0;
  fuzz_header h;
  while (fuzz_next_header(in, &h)) {
    if (h.block_end)
      break; /* the server reads one block */
    FUZZ_CHECK(sluice__grpc_req_header(&q, h.name, h.nlen, h.value, h.vlen) ==
               0);
    if (IS(&h, ":path")) {
      path = h.value;
      path_len = h.vlen;
    } else if (IS(&h, ":method")) {
      bad_method = !same(h.value, h.vlen, "POST");
    } else if (IS(&h, "content-type")) {
      bad_ct = !ref_ct_ok(h.value, h.vlen);
    } else if (IS(&h, "grpc-timeout")) {
      uint64_t ns;
      if (sluice__timeout_decode((const char *)h.value, h.vlen, &ns) == 0) {
        have_timeout = 1;
        timeout = ns;
      } else {
        bad_timeout = 1;
      }
    } else if (IS(&h, "grpc-encoding")) {
      if (same(h.value, h.vlen, "identity")) {
        enc_ok = 1;
        enc = SLUICE_COMPRESS_NONE;
      } else if (same(h.value, h.vlen, "gzip")) {
        enc_ok = 1;
        enc = SLUICE_COMPRESS_GZIP;
      } else {
        enc_ok = 0;
      }
    } else if (IS(&h, "grpc-accept-encoding")) {
      accept_gzip = ref_lists_gzip(h.value, h.vlen);
    } else if (IS(&h, "te")) {
      have_te = 1;
    }
  }
  FUZZ_CHECK(q.bad_method == bad_method);
  FUZZ_CHECK(q.bad_content_type == bad_ct);
  FUZZ_CHECK(q.bad_timeout == bad_timeout);
  FUZZ_CHECK(q.have_timeout == have_timeout);
  if (have_timeout)
    FUZZ_CHECK(q.timeout_ns == timeout);
  FUZZ_CHECK(q.have_te == have_te);
  FUZZ_CHECK(q.enc_ok == enc_ok && q.enc_unknown == !enc_ok);
  if (enc_ok)
    FUZZ_CHECK(q.enc == enc);
  FUZZ_CHECK(q.accept_gzip == accept_gzip);
  if (path) {
    FUZZ_CHECK(q.path != NULL);
    FUZZ_CHECK(memcmp(q.path, path, path_len) == 0 && q.path[path_len] == 0);
  } else {
    FUZZ_CHECK(q.path == NULL);
  }

  sluice__grpc_req_verdict v = sluice__grpc_req_done(&q);
  sluice__grpc_req_fault want = bad_method ? SLUICE__GRPC_REQ_BAD_METHOD
                                : bad_ct   ? SLUICE__GRPC_REQ_BAD_CONTENT_TYPE
                                : bad_timeout ? SLUICE__GRPC_REQ_BAD_TIMEOUT
                                : !path       ? SLUICE__GRPC_REQ_NO_PATH
                                              : SLUICE__GRPC_REQ_OK;
  FUZZ_CHECK(v.fault == want);
  FUZZ_CHECK((v.code == SLUICE_STATUS_OK) == (want == SLUICE__GRPC_REQ_OK));
  FUZZ_CHECK(v.text != NULL && (v.text[0] == 0) == (want == 0));
  FUZZ_CHECK(sluice__grpc_req_http_status(&q) == (bad_ct ? 415 : 200));

  uint64_t dl = sluice__grpc_req_deadline(&q, now);
  if (!have_timeout) {
    FUZZ_CHECK(dl == 0);
  } else {
    uint64_t cap = timeout > UINT64_MAX / 2 ? UINT64_MAX / 2 : timeout;
    FUZZ_CHECK(dl >= now && dl - now == cap);
  }
  check_md(md, 1);
  sluice__grpc_req_reset(&q);
  FUZZ_CHECK(q.path == NULL);
  sluice_metadata_del(md);
}

static void response(fuzz_in *in, uint8_t mode) {
  sluice__grpc_resp r;
  sluice__grpc_resp_init(&r);
  int http = 0, have_status = 0, bad_ct = 0, enc_ok = 0, load = 0;
  int status = -1;
  const uint8_t *msg = NULL;
  size_t msg_len = 0;
  sluice_compression enc = SLUICE_COMPRESS_NONE;
  size_t block = 0;
  fuzz_header h;
  int more = 1;
  while (more) {
    more = fuzz_next_header(in, &h);
    if (!more || h.block_end) {
      int end_stream = (mode >> (1 + block % 7)) & 1;
      sluice__grpc_block b =
          sluice__grpc_resp_block_done(&r, end_stream, block == 0);
      FUZZ_CHECK(r.md == NULL && r.load_report == 0 && r.got_headers);
      if (end_stream) {
        FUZZ_CHECK(b.kind == SLUICE__GRPC_BLOCK_TRAILERS);
      } else if (block == 0) {
        FUZZ_CHECK(b.kind == SLUICE__GRPC_BLOCK_INITIAL);
      } else {
        FUZZ_CHECK(b.kind == SLUICE__GRPC_BLOCK_OTHER);
        FUZZ_CHECK(b.md == NULL && b.load_report == 0);
      }
      if (b.kind != SLUICE__GRPC_BLOCK_OTHER)
        FUZZ_CHECK(b.load_report == load);
      check_md(b.md, 0);
      sluice_metadata_del(b.md);
      load = 0;
      block++;
      continue;
    }
    FUZZ_CHECK(sluice__grpc_resp_header(&r, h.name, h.nlen, h.value, h.vlen) ==
               0);
    if (IS(&h, ":status")) {
      http = 0;
      for (size_t i = 0; i < h.vlen && h.value[i] >= '0' && h.value[i] <= '9';
           i++)
        if (http < 100000)
          http = http * 10 + (h.value[i] - '0');
    } else if (IS(&h, "content-type")) {
      bad_ct = !ref_ct_ok(h.value, h.vlen);
    } else if (IS(&h, "grpc-status")) {
      have_status = 1;
      status = SLUICE_STATUS_UNKNOWN;
      if (h.vlen >= 1 && h.vlen <= 2 && h.value[0] >= '0' &&
          h.value[0] <= '9' &&
          (h.vlen == 1 || (h.value[1] >= '0' && h.value[1] <= '9'))) {
        int c = h.vlen == 1 ? h.value[0] - '0'
                            : (h.value[0] - '0') * 10 + h.value[1] - '0';
        status = c <= 16 ? c : SLUICE_STATUS_UNKNOWN;
      }
    } else if (IS(&h, "grpc-encoding")) {
      enc_ok =
          same(h.value, h.vlen, "identity") || same(h.value, h.vlen, "gzip");
      if (enc_ok)
        enc = h.value[0] == 'g' ? SLUICE_COMPRESS_GZIP : SLUICE_COMPRESS_NONE;
    } else if (IS(&h, "grpc-message")) {
      msg = h.value;
      msg_len = h.vlen;
    } else if (IS(&h, "endpoint-load-metrics-bin")) {
      load = 1;
    }
    FUZZ_CHECK(r.http_status == http);
    FUZZ_CHECK(r.http_status >= 0 && r.http_status < 1000000);
    FUZZ_CHECK(r.have_grpc_status == have_status);
    if (have_status)
      FUZZ_CHECK((int)r.grpc_status == status);
    FUZZ_CHECK(r.bad_content_type == bad_ct);
    FUZZ_CHECK(r.enc_ok == enc_ok);
    if (enc_ok)
      FUZZ_CHECK(r.enc == enc);
    if (msg) {
      FUZZ_CHECK(r.grpc_message != NULL);
      char *dec = (char *)fuzz_dup(NULL, msg_len + 1);
      size_t dn = sluice__percent_decode((const char *)msg, msg_len, dec);
      FUZZ_CHECK(memcmp(r.grpc_message, dec, dn) == 0 &&
                 r.grpc_message[dn] == '\0');
      free(dec);
    } else {
      FUZZ_CHECK(r.grpc_message == NULL);
    }
    if (r.md)
      check_md(r.md, 0);
  }
  sluice__grpc_resp_reset(&r);
  FUZZ_CHECK(r.grpc_message == NULL && r.md == NULL && !r.got_headers);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_in in = {data, size};
  uint8_t mode = fuzz_u8(&in);
  /* A monotonic clock: never 0 (that is "no deadline") and far from
   * wrapping, which is what the deadline's cap assumes. */
  uint64_t now = (fuzz_u64(&in) >> 2) + 1;
  /* Exact-size copy of the header text, so that over-reads show. */
  uint8_t *copy = fuzz_dup(in.p, in.n);
  fuzz_in hin = {copy, in.n};
  if (mode & 1)
    request(&hin, now);
  else
    response(&hin, mode);
  free(copy);
  return 0;
}
