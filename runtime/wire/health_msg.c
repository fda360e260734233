/* grpc.health.v1 request and response bytes (see health_msg.h). */
#include "wire/health_msg.h"

#include <stdlib.h>
#include <string.h>

int sluice__health_request(const char *service, uint8_t **out, size_t *len) {
  size_t n = service ? strlen(service) : 0;
  if (n > 65535)
    return -1;
  /* field 1, wire type 2: tag 0x0a, varint length (at most 3 bytes) */
  uint8_t hdr[4];
  size_t h = 0;
  if (n) {
    hdr[h++] = 0x0a;
    size_t v = n;
    while (v >= 0x80) {
      hdr[h++] = (uint8_t)(v | 0x80);
      v >>= 7;
    }
    hdr[h++] = (uint8_t)v;
  }
  size_t msg = h + n;
  uint8_t *b = malloc(5 + msg);
  if (!b)
    return -1;
  b[0] = 0;
  b[1] = (uint8_t)(msg >> 24);
  b[2] = (uint8_t)(msg >> 16);
  b[3] = (uint8_t)(msg >> 8);
  b[4] = (uint8_t)msg;
  memcpy(b + 5, hdr, h);
  if (n)
    memcpy(b + 5 + h, service, n);
  *out = b;
  *len = 5 + msg;
  return 0;
}

/* Reads a varint at p[*i..len). Returns 0, or -1 when truncated or longer
 * than 10 bytes. */
static int varint(const uint8_t *p, size_t len, size_t *i, uint64_t *v) {
  uint64_t r = 0;
  for (unsigned shift = 0; shift < 70; shift += 7) {
    if (*i >= len)
      return -1;
    uint8_t b = p[(*i)++];
    r |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *v = r;
      return 0;
    }
  }
  return -1;
}

int sluice__health_response(const uint8_t *p, size_t len, uint32_t *status) {
  uint32_t st = 0;
  size_t i = 0;
  while (i < len) {
    uint64_t key, v;
    if (varint(p, len, &i, &key) != 0 || (key >> 3) == 0)
      return -1;
    switch (key & 7) {
    case 0: /* varint */
      if (varint(p, len, &i, &v) != 0)
        return -1;
      if ((key >> 3) == 1)
        st = (uint32_t)v;
      break;
    case 1: /* 64-bit */
      if (len - i < 8)
        return -1;
      i += 8;
      break;
    case 2: /* length-delimited */
      if (varint(p, len, &i, &v) != 0 || v > len - i)
        return -1;
      i += (size_t)v;
      break;
    case 5: /* 32-bit */
      if (len - i < 4)
        return -1;
      i += 4;
      break;
    default:
      return -1;
    }
  }
  *status = st;
  return 0;
}
