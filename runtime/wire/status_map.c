/* HTTP status, HTTP/2 error code and grpc-status text to sluice_status_code. */
#include "wire/status_map.h"

sluice_status_code sluice__status_from_http(int http_status) {
  switch (http_status) {
  case 400:
    return SLUICE_STATUS_INTERNAL;
  case 401:
    return SLUICE_STATUS_UNAUTHENTICATED;
  case 403:
    return SLUICE_STATUS_PERMISSION_DENIED;
  case 404:
    return SLUICE_STATUS_UNIMPLEMENTED;
  case 429:
  case 502:
  case 503:
  case 504:
    return SLUICE_STATUS_UNAVAILABLE;
  default:
    return SLUICE_STATUS_UNKNOWN;
  }
}

sluice_status_code sluice__status_from_h2_error(uint32_t h2_error_code) {
  switch (h2_error_code) {
  case 0x7: /* REFUSED_STREAM: not processed, safe to retry */
    return SLUICE_STATUS_UNAVAILABLE;
  case 0x8: /* CANCEL */
    return SLUICE_STATUS_CANCELLED;
  case 0xb: /* ENHANCE_YOUR_CALM */
    return SLUICE_STATUS_RESOURCE_EXHAUSTED;
  case 0xc: /* INADEQUATE_SECURITY */
    return SLUICE_STATUS_PERMISSION_DENIED;
  default:
    /* NO_ERROR, PROTOCOL_ERROR, INTERNAL_ERROR, FLOW_CONTROL_ERROR,
     * SETTINGS_TIMEOUT, STREAM_CLOSED, FRAME_SIZE_ERROR, COMPRESSION_ERROR,
     * CONNECT_ERROR, HTTP_1_1_REQUIRED and codes not yet defined. */
    return SLUICE_STATUS_INTERNAL;
  }
}

const char *sluice__h2_error_name(uint32_t h2_error_code) {
  static const char *const names[] = {
      "NO_ERROR",
      "PROTOCOL_ERROR",
      "INTERNAL_ERROR",
      "FLOW_CONTROL_ERROR",
      "SETTINGS_TIMEOUT",
      "STREAM_CLOSED",
      "FRAME_SIZE_ERROR",
      "REFUSED_STREAM",
      "CANCEL",
      "COMPRESSION_ERROR",
      "CONNECT_ERROR",
      "ENHANCE_YOUR_CALM",
      "INADEQUATE_SECURITY",
      "HTTP_1_1_REQUIRED",
  };
  return h2_error_code < sizeof names / sizeof names[0] ? names[h2_error_code]
                                                        : "unknown";
}

int sluice__status_parse(const char *s, size_t n, sluice_status_code *out) {
  if (n < 1 || n > 2)
    return -1;
  int v = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9')
      return -1;
    v = v * 10 + (s[i] - '0');
  }
  *out = v > SLUICE_STATUS_UNAUTHENTICATED ? SLUICE_STATUS_UNKNOWN
                                           : (sluice_status_code)v;
  return 0;
}
