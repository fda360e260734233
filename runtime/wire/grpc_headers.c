/* Request and response header sets of gRPC over HTTP/2 -> plain structs. */
#include "wire/grpc_headers.h"

#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "wire/compress.h"
#include "wire/metadata_internal.h"
#include "wire/metadata_rules.h"
#include "wire/percent.h"
#include "wire/status_map.h"
#include "wire/timeout.h"

#define IS(lit) (nlen == sizeof(lit) - 1 && memcmp(name, lit, nlen) == 0)

int sluice__grpc_content_type_ok(const uint8_t *v, size_t len) {
  return len >= 16 && memcmp(v, "application/grpc", 16) == 0 &&
         (len == 16 || v[16] == '+' || v[16] == ';');
}

/* ---- response */

void sluice__grpc_resp_init(sluice__grpc_resp *r) { memset(r, 0, sizeof *r); }

void sluice__grpc_resp_reset(sluice__grpc_resp *r) {
  free(r->grpc_message);
  sluice_metadata_del(r->md);
  sluice__grpc_resp_init(r);
}

/* Leading decimal digits; stops growing far above any HTTP status, so no
 * input overflows. */
static int parse_http_status(const uint8_t *v, size_t len) {
  int s = 0;
  for (size_t i = 0; i < len && v[i] >= '0' && v[i] <= '9'; i++)
    if (s < 100000)
      s = s * 10 + (v[i] - '0');
  return s;
}

int sluice__grpc_resp_header(sluice__grpc_resp *r, const char *name,
                             size_t nlen, const uint8_t *value, size_t vlen) {
  if (IS(":status")) {
    r->http_status = parse_http_status(value, vlen);
  } else if (IS("content-type")) {
    r->bad_content_type = !sluice__grpc_content_type_ok(value, vlen);
  } else if (IS("grpc-status")) {
    sluice_status_code code;
    if (sluice__status_parse((const char *)value, vlen, &code) == 0)
      r->grpc_status = code;
    else
      r->grpc_status = SLUICE_STATUS_UNKNOWN;
    r->have_grpc_status = 1;
  } else if (IS("grpc-encoding")) {
    r->enc_ok = sluice__encoding_parse((const char *)value, vlen, &r->enc) == 0;
  } else if (IS("grpc-message")) {
    free(r->grpc_message);
    r->grpc_message = sluice__malloc(vlen + 1);
    if (r->grpc_message) {
      size_t l =
          sluice__percent_decode((const char *)value, vlen, r->grpc_message);
      r->grpc_message[l] = '\0';
    }
  } else if (!sluice__md_is_reserved(name, nlen)) {
    if (!r->md && sluice_metadata_new(&r->md) != 0)
      return SLUICE_ERR_NOMEM;
    if (IS("endpoint-load-metrics-bin"))
      r->load_report = 1;
    sluice__metadata_add_received(r->md, name, nlen, value, vlen);
  }
  return 0;
}

sluice__grpc_block sluice__grpc_resp_block_done(sluice__grpc_resp *r,
                                                int end_stream,
                                                int is_response) {
  sluice__grpc_block b;
  b.kind = end_stream    ? SLUICE__GRPC_BLOCK_TRAILERS
           : is_response ? SLUICE__GRPC_BLOCK_INITIAL
                         : SLUICE__GRPC_BLOCK_OTHER;
  b.md = r->md;
  b.load_report = r->load_report;
  if (b.kind == SLUICE__GRPC_BLOCK_OTHER) {
    sluice_metadata_del(b.md);
    b.md = NULL;
    b.load_report = 0;
  }
  r->md = NULL;
  r->load_report = 0;
  r->got_headers = 1;
  return b;
}

/* ---- request */

void sluice__grpc_req_init(sluice__grpc_req *q, sluice_metadata *md) {
  q->md = md;
  q->path = NULL;
  q->timeout_ns = 0;
  q->have_timeout = 0;
  q->bad_timeout = 0;
  q->bad_method = 0;
  q->bad_content_type = 0;
  q->have_te = 0;
  q->enc_ok = 1; /* no grpc-encoding: identity */
  q->enc_unknown = 0;
  q->enc = SLUICE_COMPRESS_NONE;
  /* no grpc-accept-encoding: gzip assumed, as stock grpcio does (it
   * compresses whatever the header says); grpc-go clients send the header
   * only on calls they compress themselves. docs/compression.md */
  q->accept_gzip = 1;
}

void sluice__grpc_req_reset(sluice__grpc_req *q) {
  if (q->path != q->path_buf)
    free(q->path);
  q->path = NULL;
}

static void set_path(sluice__grpc_req *q, const uint8_t *v, size_t vlen) {
  sluice__grpc_req_reset(q);
  if (vlen < sizeof q->path_buf) {
    memcpy(q->path_buf, v, vlen);
    q->path_buf[vlen] = '\0';
    q->path = q->path_buf;
  } else if ((q->path = sluice__malloc(vlen + 1)) != NULL) {
    memcpy(q->path, v, vlen);
    q->path[vlen] = '\0';
  }
}

int sluice__grpc_req_header(sluice__grpc_req *q, const char *name, size_t nlen,
                            const uint8_t *value, size_t vlen) {
  const char *v = (const char *)value;
  if (IS(":path")) {
    set_path(q, value, vlen);
  } else if (IS(":method")) {
    q->bad_method = !(vlen == 4 && memcmp(v, "POST", 4) == 0);
  } else if (IS("content-type")) {
    q->bad_content_type = !sluice__grpc_content_type_ok(value, vlen);
  } else if (IS("grpc-timeout")) {
    uint64_t ns;
    if (sluice__timeout_decode(v, vlen, &ns) == 0) {
      q->timeout_ns = ns;
      q->have_timeout = 1;
    } else {
      q->bad_timeout = 1;
    }
  } else if (IS("grpc-encoding")) {
    q->enc_ok = sluice__encoding_parse(v, vlen, &q->enc) == 0;
    q->enc_unknown = !q->enc_ok;
  } else if (IS("grpc-accept-encoding")) {
    q->accept_gzip = sluice__accept_encoding_has(v, vlen, SLUICE_COMPRESS_GZIP);
  } else if (IS("te")) {
    q->have_te = 1;
  } else if (IS(":authority") || IS("user-agent") ||
             (nlen > 0 && name[0] != ':' &&
              !sluice__md_is_reserved(name, nlen))) {
    int rv = sluice__metadata_add_received(q->md, name, nlen, value, vlen);
    return rv == SLUICE_ERR_NOMEM ? rv : 0;
  }
  return 0;
}

sluice__grpc_req_verdict sluice__grpc_req_done(const sluice__grpc_req *q) {
  sluice__grpc_req_verdict v = {SLUICE__GRPC_REQ_OK, SLUICE_STATUS_OK, ""};
  if (q->bad_method) {
    v.fault = SLUICE__GRPC_REQ_BAD_METHOD;
    v.code = SLUICE_STATUS_UNIMPLEMENTED;
    v.text = "gRPC requires the POST method";
  } else if (q->bad_content_type) {
    v.fault = SLUICE__GRPC_REQ_BAD_CONTENT_TYPE;
    v.code = SLUICE_STATUS_INTERNAL;
    v.text = "invalid gRPC request content-type";
  } else if (q->bad_timeout) {
    v.fault = SLUICE__GRPC_REQ_BAD_TIMEOUT;
    v.code = SLUICE_STATUS_INTERNAL;
    v.text = "invalid grpc-timeout header";
  } else if (!q->path) {
    v.fault = SLUICE__GRPC_REQ_NO_PATH;
    v.code = SLUICE_STATUS_UNIMPLEMENTED;
    v.text = "no :path";
  }
  return v;
}

int sluice__grpc_req_http_status(const sluice__grpc_req *q) {
  return q->bad_content_type ? 415 : 200;
}

uint64_t sluice__grpc_req_deadline(const sluice__grpc_req *q, uint64_t now_ns) {
  if (!q->have_timeout)
    return 0;
  uint64_t ns = q->timeout_ns > UINT64_MAX / 2 ? UINT64_MAX / 2 : q->timeout_ns;
  return now_ns + ns;
}
