/* Building nghttp2 header lists: pseudo-headers and gRPC headers borrowed
 * from their owners, custom metadata appended (binary values base64-encoded
 * into buffers the list owns). Small lists need no allocation. */
#ifndef SLUICE_TRANSPORT_HEADERS_H
#define SLUICE_TRANSPORT_HEADERS_H

#include <nghttp2/nghttp2.h>
#include <stddef.h>

#include "sluice/metadata.h"

typedef struct sluice__nvs {
  nghttp2_nv inline_nv[16];
  nghttp2_nv *nv;
  size_t n, cap;
  char *b64[2]; /* encoded -bin values, one buffer per metadata list */
  int n_b64;
  int failed;
} sluice__nvs;

void sluice__nvs_init(sluice__nvs *h);
/* Adds a header; name and value are borrowed until submit. */
void sluice__nvs_add(sluice__nvs *h, const char *name, size_t nlen,
                     const char *value, size_t vlen);
/* Adds a NUL-terminated name and value (borrowed). */
void sluice__nvs_add_str(sluice__nvs *h, const char *name, const char *value);
/* Marks the last header added as never indexed (HPACK): for values that
 * change on every request, such as grpc-timeout, which would otherwise
 * churn the peer's and our dynamic table, evicting the stable headers. */
void sluice__nvs_no_index_last(sluice__nvs *h);
/* Adds every entry of md (borrowed; -bin values are encoded and owned).
 * At most two lists per header block (initial + trailing). */
void sluice__nvs_add_md(sluice__nvs *h, const sluice_metadata *md);
/* Non-zero if an allocation failed on the way. */
int sluice__nvs_failed(const sluice__nvs *h);
void sluice__nvs_free(sluice__nvs *h);

#endif
