/* grpc.health.v1 request and response bytes (see health_msg.h). */
#include "wire/health_msg.h"

#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "wire/pb.h"

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
  uint8_t *b = sluice__malloc(5 + msg);
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

int sluice__health_response(const uint8_t *p, size_t len, uint32_t *status) {
  sluice__pb r = {p, p + len};
  uint32_t st = 0, num;
  int wt, rv;
  const uint8_t *d;
  size_t n;
  uint64_t v;
  while ((rv = sluice__pb_field(&r, &num, &wt, &d, &n, &v)) == 1)
    if (num == 1 && wt == SLUICE__PB_VARINT)
      st = (uint32_t)v;
  if (rv < 0)
    return -1;
  *status = st;
  return 0;
}
