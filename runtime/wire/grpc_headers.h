/* The gRPC-over-HTTP/2 header mapping (PROTOCOL-HTTP2.md) as plain data:
 * a response's header blocks (client side) and a request's header block
 * (server side), fed one header at a time in the order nghttp2's on_header
 * callback delivers them, then a "done" step that gives a verdict.
 *
 * No nghttp2, no I/O, no clock: the caller picks the frames to feed (the
 * client feeds every HEADERS block of its stream, the server only the
 * request block) and keeps every side effect (failing the call, routing,
 * handing metadata to the application). Names and values are borrowed for
 * the duration of a call and never need a NUL.
 *
 * Threads: a struct belongs to its stream and is used by one thread at a
 * time (the loop's); there is no shared state. Memory: the response side
 * allocates only a grpc-message copy and, at the first custom header of a
 * block, its metadata list; the request side only a :path longer than the
 * inline buffer and the metadata entries the caller's list needs. */
#ifndef SLUICE_WIRE_GRPC_HEADERS_H
#define SLUICE_WIRE_GRPC_HEADERS_H

#include <stddef.h>
#include <stdint.h>

#include <sluice/metadata.h>
#include <sluice/status.h>
#include <sluice/types.h>

/* Non-zero for a content-type gRPC accepts: "application/grpc", alone or
 * followed by '+' (a subtype: "+proto") or ';' (parameters). Exact and
 * case-sensitive, as gRPC's. */
int sluice__grpc_content_type_ok(const uint8_t *v, size_t len);

/* ---- response (client side) */

/* What a response said, accumulated over every header block of the stream
 * (the response headers and the trailers, or one Trailers-Only block).
 * Fields are read by the caller; only the functions below write them. */
typedef struct sluice__grpc_resp {
  int http_status;      /* :status (its leading decimal digits); 0 until seen */
  int got_headers;      /* a header block completed (block_done was called) */
  int have_grpc_status; /* grpc-status seen, in any block */
  sluice_status_code grpc_status; /* its value; UNKNOWN when it is not 1 or 2
                                     digits (codes above 16 too) */
  char *grpc_message;     /* grpc-message, percent-decoded and NUL-terminated
                             (owned, malloc'd); NULL when absent, or when out
                             of memory (the text is then lost) */
  int bad_content_type;   /* a content-type that gRPC does not accept (a
                             missing one is not bad) */
  int enc_ok;             /* grpc-encoding seen and one sluice implements */
  sluice_compression enc; /* that encoding; meaningful only when enc_ok */
  int load_report;        /* the current block carries
                             endpoint-load-metrics-bin */
  sluice_metadata *md;    /* the current block's custom metadata (owned
                             until block_done hands it over); NULL until its
                             first custom header */
} sluice__grpc_resp;

/* Starts an empty response (nothing allocated). */
void sluice__grpc_resp_init(sluice__grpc_resp *r);

/* Frees grpc_message and md and starts over, as after init: for a
 * transparent retry, and when the call is freed. */
void sluice__grpc_resp_reset(sluice__grpc_resp *r);

/* One header of a response block:
 *  - ":status": the value's leading digits (saturating; nghttp2 already
 *    checks that they are exactly three);
 *  - "content-type": bad_content_type, see sluice__grpc_content_type_ok;
 *  - "grpc-status": sluice__status_parse, UNKNOWN when it fails;
 *  - "grpc-encoding": enc_ok and enc (sluice__encoding_parse);
 *  - "grpc-message": percent-decoded into a fresh grpc_message (the last one
 *    wins);
 *  - any other name that sluice__md_is_reserved() does not reserve: custom
 *    metadata, appended to md as received (sluice__metadata_add_received:
 *    "-bin" values decoded; invalid keys and values dropped); for
 *    "endpoint-load-metrics-bin" load_report is set as well.
 *  Other names (pseudo-headers, te, grpc-* the protocol keeps) are ignored.
 * Returns 0, or SLUICE_ERR_NOMEM when md could not be created (the header
 * is lost; the caller resets the stream). A custom header that md has no
 * memory for is dropped and 0 returned. */
int sluice__grpc_resp_header(sluice__grpc_resp *r, const char *name,
                             size_t nlen, const uint8_t *value, size_t vlen);

/* What a completed response block was. */
typedef enum sluice__grpc_block_kind {
  SLUICE__GRPC_BLOCK_INITIAL,  /* the response headers: md is the initial
                                  metadata */
  SLUICE__GRPC_BLOCK_TRAILERS, /* it ended the stream (trailers or
                                  Trailers-Only): md is the trailing
                                  metadata */
  SLUICE__GRPC_BLOCK_OTHER     /* neither (a HEADERS block in the middle of
                                  the stream): its metadata is dropped */
} sluice__grpc_block_kind;

typedef struct sluice__grpc_block {
  sluice__grpc_block_kind kind;
  sluice_metadata *md; /* INITIAL, TRAILERS: the block's custom metadata,
                          now the caller's (NULL: there was none); OTHER:
                          NULL (freed) */
  int load_report;     /* the block carried endpoint-load-metrics-bin (the
                          caller decodes it from md) */
} sluice__grpc_block;

/* The block whose headers were fed is complete. end_stream: the frame had
 * END_STREAM; is_response: it is the response's first block (nghttp2's
 * NGHTTP2_HCAT_RESPONSE). A block that ends the stream is TRAILERS, else
 * the first block is INITIAL, else OTHER. Sets got_headers, hands md over
 * (r->md is NULL afterwards) and clears load_report for the next block. */
sluice__grpc_block sluice__grpc_resp_block_done(sluice__grpc_resp *r,
                                                int end_stream,
                                                int is_response);

/* ---- request (server side) */

/* A :path up to this size minus one is kept inline: no allocation. */
#define SLUICE__GRPC_PATH_INLINE 96

/* What a request's header block said. Fields are read by the caller; only
 * the functions below write them. */
typedef struct sluice__grpc_req {
  sluice_metadata *md;    /* the caller's list (never freed here): custom
                             metadata, user-agent and :authority are appended */
  char *path;             /* :path, NUL-terminated: path_buf, or malloc'd when
                             longer (see reset); NULL until seen, or when out
                             of memory */
  uint64_t timeout_ns;    /* the last valid grpc-timeout, when have_timeout */
  int have_timeout;       /* a valid grpc-timeout was seen */
  int bad_timeout;        /* a grpc-timeout that does not parse was seen */
  int bad_method;         /* a :method other than POST (a missing one is not) */
  int bad_content_type;   /* a content-type gRPC does not accept (a missing
                             one is not bad) */
  int have_te;            /* te seen (its value is not checked, nor is it
                             required) */
  int enc_ok;             /* grpc-encoding absent or one sluice implements */
  int enc_unknown;        /* a grpc-encoding sluice does not implement */
  sluice_compression enc; /* the request's encoding when enc_ok (NONE when
                             absent) */
  int accept_gzip;        /* grpc-accept-encoding lists gzip, or is absent
                             (then gzip is assumed) */
  char path_buf[SLUICE__GRPC_PATH_INLINE];
} sluice__grpc_req;

/* Starts an empty request whose metadata goes to md (borrowed, not NULL).
 * path_buf is left as it is (no memset of the buffer). */
void sluice__grpc_req_init(sluice__grpc_req *q, sluice_metadata *md);

/* Frees a malloc'd path (path is NULL afterwards); md is the caller's and
 * is left alone. */
void sluice__grpc_req_reset(sluice__grpc_req *q);

/* One header of the request block:
 *  - ":path": copied (the last one wins);
 *  - ":method": bad_method unless exactly "POST";
 *  - "content-type": bad_content_type, see sluice__grpc_content_type_ok;
 *  - "grpc-timeout": sluice__timeout_decode into timeout_ns/have_timeout,
 *    else bad_timeout (which stays set);
 *  - "grpc-encoding": enc_ok, enc_unknown and enc (the last one wins);
 *  - "grpc-accept-encoding": accept_gzip (the list names gzip; absent:
 *    gzip assumed);
 *  - "te": have_te;
 *  - ":authority", "user-agent", and any non-pseudo name that
 *    sluice__md_is_reserved() does not reserve: appended to md as received
 *    (sluice__metadata_add_received).
 *  Other names (:scheme, unknown pseudo-headers, reserved grpc-*) are
 *  ignored. Returns 0, or SLUICE_ERR_NOMEM when md had no room for an entry
 *  (it is lost; the request goes on). An out-of-memory :path leaves path
 *  NULL, which the verdict reports. */
int sluice__grpc_req_header(sluice__grpc_req *q, const char *name, size_t nlen,
                            const uint8_t *value, size_t vlen);

/* Why a complete request block cannot be served, in the order checked. */
typedef enum sluice__grpc_req_fault {
  SLUICE__GRPC_REQ_OK = 0,
  SLUICE__GRPC_REQ_BAD_METHOD,       /* UNIMPLEMENTED */
  SLUICE__GRPC_REQ_BAD_CONTENT_TYPE, /* INTERNAL, answered with HTTP 415 */
  SLUICE__GRPC_REQ_BAD_TIMEOUT,      /* INTERNAL */
  SLUICE__GRPC_REQ_NO_PATH           /* UNIMPLEMENTED */
} sluice__grpc_req_fault;

typedef struct sluice__grpc_req_verdict {
  sluice__grpc_req_fault fault;
  sluice_status_code code; /* OK: route q->path */
  const char *text;        /* static: "" when OK, else "gRPC requires the
                              POST method", "invalid gRPC request
                              content-type", "invalid grpc-timeout header" or
                              "no :path" */
} sluice__grpc_req_verdict;

/* The request block is complete: can it be routed? The first fault in
 * enum order wins (a request that is both bad is refused for its method).
 * Pure: q is not changed. */
sluice__grpc_req_verdict sluice__grpc_req_done(const sluice__grpc_req *q);

/* The HTTP status of the response: 415 when the content-type was bad
 * (whatever the verdict said first), else 200. */
int sluice__grpc_req_http_status(const sluice__grpc_req *q);

/* The absolute deadline the grpc-timeout gives when the request arrived
 * at now_ns: now_ns + timeout_ns, the timeout capped at UINT64_MAX / 2 so
 * that the sum cannot wrap; 0 when there was no valid grpc-timeout. (A
 * "0n" timeout gives now_ns: already due.) */
uint64_t sluice__grpc_req_deadline(const sluice__grpc_req *q, uint64_t now_ns);

#endif
