/* Where a call's status comes from when the peer sent no grpc-status, and
 * the parsing of grpc-status itself. */
#ifndef SLUICE_WIRE_STATUS_MAP_H
#define SLUICE_WIRE_STATUS_MAP_H

#include <stddef.h>
#include <stdint.h>

#include <sluice/status.h>

/* Status for a response whose :status is not 200 and that carries no
 * grpc-status (grpc-go's HTTPStatusConvTab). */
sluice_status_code sluice__status_from_http(int http_status);

/* Status for a stream reset by the peer with RST_STREAM(h2_error_code)
 * (PROTOCOL-HTTP2.md's table). */
sluice_status_code sluice__status_from_h2_error(uint32_t h2_error_code);

/* The name RFC 9113 gives an HTTP/2 error code ("REFUSED_STREAM"), the same
 * text as nghttp2_http2_strerror(): "unknown" for a code it does not define.
 * Static. */
const char *sluice__h2_error_name(uint32_t h2_error_code);

/* Parses a grpc-status value: 1 or 2 decimal digits, no sign. Codes above
 * 16 become UNKNOWN. Returns 0, or -1 (*out untouched) on anything else. */
int sluice__status_parse(const char *s, size_t n, sluice_status_code *out);

#endif
