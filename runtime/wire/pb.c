/* The protobuf wire reader (see pb.h). */
#include "wire/pb.h"

int sluice__pb_varint(sluice__pb *r, uint64_t *v) {
  uint64_t x = 0;
  for (unsigned shift = 0; shift < 64; shift += 7) {
    if (r->p >= r->end)
      return -1;
    uint8_t b = *r->p++;
    x |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *v = x;
      return 0;
    }
  }
  return -1; /* more than 10 bytes */
}

int sluice__pb_field(sluice__pb *r, uint32_t *num, int *wt,
                     const uint8_t **data, size_t *len, uint64_t *val) {
  if (r->p >= r->end)
    return 0;
  uint64_t key;
  if (sluice__pb_varint(r, &key) != 0 || (key >> 3) == 0 ||
      (key >> 3) > 536870911)
    return -1;
  *num = (uint32_t)(key >> 3);
  *wt = (int)(key & 7);
  *data = NULL;
  *len = 0;
  *val = 0;
  uint64_t n;
  switch (*wt) {
  case SLUICE__PB_VARINT:
    return sluice__pb_varint(r, val) == 0 ? 1 : -1;
  case SLUICE__PB_I64:
  case SLUICE__PB_I32:
    n = *wt == SLUICE__PB_I64 ? 8 : 4;
    break;
  case SLUICE__PB_LEN:
    if (sluice__pb_varint(r, &n) != 0)
      return -1;
    break;
  default: /* groups (3, 4) and reserved types */
    return -1;
  }
  if (n > (uint64_t)(r->end - r->p))
    return -1;
  *data = r->p;
  *len = (size_t)n;
  r->p += n;
  return 1;
}

uint64_t sluice__pb_fixed64(const uint8_t *p) {
  uint64_t u = 0;
  for (int i = 7; i >= 0; i--)
    u = u << 8 | p[i];
  return u;
}
