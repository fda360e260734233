/* ORCA load reports: protobuf wire format by hand (see orca.h). */
#include "wire/orca.h"

#include <string.h>

enum { WT_VARINT = 0, WT_FIXED64 = 1, WT_LEN = 2, WT_FIXED32 = 5 };

void sluice__orca_init(sluice__orca *r) {
  r->cpu_utilization = -1;
  r->mem_utilization = -1;
  r->application_utilization = -1;
  r->rps_fractional = -1;
  r->queue_ms = -1;
  r->in_flight = -1;
  r->downstream = -1;
}

/* ---- encoding */

static void put_double(uint8_t *p, double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t)(u >> (8 * i));
}

/* A fixed64 field (tag fits one byte: field numbers below 16). */
static size_t put_fixed(uint8_t *p, unsigned field, double d) {
  p[0] = (uint8_t)(field << 3 | WT_FIXED64);
  put_double(p + 1, d);
  return 9;
}

/* named_metrics entry {1: key, 2: value} (key shorter than 100 bytes, so
 * every length is one byte). */
static size_t put_metric(uint8_t *p, const char *key, double d) {
  size_t kl = strlen(key);
  size_t entry = 2 + kl + 9;
  p[0] = (uint8_t)(8u << 3 | WT_LEN);
  p[1] = (uint8_t)entry;
  p[2] = (uint8_t)(1u << 3 | WT_LEN);
  p[3] = (uint8_t)kl;
  memcpy(p + 4, key, kl);
  put_fixed(p + 4 + kl, 2, d);
  return 2 + entry;
}

size_t sluice__orca_encode(const sluice__orca *r, uint8_t *buf, size_t cap) {
  uint8_t tmp[SLUICE__ORCA_MAX];
  size_t n = 0;
  if (r->cpu_utilization >= 0)
    n += put_fixed(tmp + n, 1, r->cpu_utilization);
  if (r->mem_utilization >= 0)
    n += put_fixed(tmp + n, 2, r->mem_utilization);
  if (r->rps_fractional >= 0)
    n += put_fixed(tmp + n, 6, r->rps_fractional);
  if (r->application_utilization >= 0)
    n += put_fixed(tmp + n, 9, r->application_utilization);
  if (r->queue_ms >= 0)
    n += put_metric(tmp + n, "queue_ms", r->queue_ms);
  if (r->in_flight >= 0)
    n += put_metric(tmp + n, "in_flight", r->in_flight);
  if (r->downstream >= 0)
    n += put_metric(tmp + n, "downstream", r->downstream);
  if (n > cap)
    return 0;
  memcpy(buf, tmp, n);
  return n;
}

/* ---- decoding */

typedef struct reader {
  const uint8_t *p, *end;
} reader;

static int get_varint(reader *r, uint64_t *out) {
  uint64_t v = 0;
  for (unsigned shift = 0; shift < 64; shift += 7) {
    if (r->p == r->end)
      return -1;
    uint8_t b = *r->p++;
    v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *out = v;
      return 0;
    }
  }
  return -1; /* more than 10 bytes */
}

static int get_double(reader *r, double *out) {
  if (r->end - r->p < 8)
    return -1;
  uint64_t u = 0;
  for (int i = 7; i >= 0; i--)
    u = u << 8 | r->p[i];
  r->p += 8;
  memcpy(out, &u, sizeof *out);
  return 0;
}

/* Reads a tag; *field 0 is invalid. */
static int get_tag(reader *r, uint64_t *field, unsigned *wt) {
  uint64_t t;
  if (get_varint(r, &t) != 0)
    return -1;
  *field = t >> 3;
  *wt = (unsigned)(t & 7);
  return *field == 0 ? -1 : 0;
}

/* A length-delimited payload: [*sub, *sub + *n). */
static int get_len(reader *r, const uint8_t **sub, size_t *n) {
  uint64_t l;
  if (get_varint(r, &l) != 0 || l > (uint64_t)(r->end - r->p))
    return -1;
  *sub = r->p;
  *n = (size_t)l;
  r->p += l;
  return 0;
}

static int skip(reader *r, unsigned wt) {
  uint64_t v;
  const uint8_t *s;
  size_t n;
  switch (wt) {
  case WT_VARINT:
    return get_varint(r, &v);
  case WT_FIXED64:
    if (r->end - r->p < 8)
      return -1;
    r->p += 8;
    return 0;
  case WT_LEN:
    return get_len(r, &s, &n);
  case WT_FIXED32:
    if (r->end - r->p < 4)
      return -1;
    r->p += 4;
    return 0;
  default: /* groups (3, 4) and reserved types */
    return -1;
  }
}

/* One named_metrics entry; a missing value is 0 (the proto default). */
static int get_metric(const uint8_t *p, size_t len, sluice__orca *out) {
  reader r = {p, p + len};
  const uint8_t *key = NULL;
  size_t kl = 0;
  double value = 0;
  while (r.p < r.end) {
    uint64_t field;
    unsigned wt;
    if (get_tag(&r, &field, &wt) != 0)
      return -1;
    if (field == 1 && wt == WT_LEN) {
      if (get_len(&r, &key, &kl) != 0)
        return -1;
    } else if (field == 2 && wt == WT_FIXED64) {
      if (get_double(&r, &value) != 0)
        return -1;
    } else if (skip(&r, wt) != 0) {
      return -1;
    }
  }
  if (!key)
    return 0;
  if (kl == 8 && memcmp(key, "queue_ms", 8) == 0)
    out->queue_ms = value;
  else if (kl == 9 && memcmp(key, "in_flight", 9) == 0)
    out->in_flight = value;
  else if (kl == 10 && memcmp(key, "downstream", 10) == 0)
    out->downstream = value;
  return 0;
}

int sluice__orca_decode(const uint8_t *p, size_t len, sluice__orca *out) {
  sluice__orca_init(out);
  if (!p && len)
    return -1;
  reader r = {p, p + len};
  double rps_int = -1;
  while (r.p < r.end) {
    uint64_t field;
    unsigned wt;
    if (get_tag(&r, &field, &wt) != 0)
      return -1;
    double *dst = NULL;
    if (wt == WT_FIXED64) {
      if (field == 1)
        dst = &out->cpu_utilization;
      else if (field == 2)
        dst = &out->mem_utilization;
      else if (field == 6)
        dst = &out->rps_fractional;
      else if (field == 9)
        dst = &out->application_utilization;
    }
    if (dst) {
      if (get_double(&r, dst) != 0)
        return -1;
    } else if (field == 3 && wt == WT_VARINT) {
      uint64_t v;
      if (get_varint(&r, &v) != 0)
        return -1;
      rps_int = (double)v;
    } else if (field == 8 && wt == WT_LEN) {
      const uint8_t *sub;
      size_t n;
      if (get_len(&r, &sub, &n) != 0 || get_metric(sub, n, out) != 0)
        return -1;
    } else if (skip(&r, wt) != 0) {
      return -1;
    }
  }
  if (!(out->rps_fractional >= 0) && rps_int >= 0)
    out->rps_fractional = rps_int;
  /* Negative or NaN values cannot be told from "absent". */
  double *all[] = {&out->cpu_utilization,
                   &out->mem_utilization,
                   &out->application_utilization,
                   &out->rps_fractional,
                   &out->queue_ms,
                   &out->in_flight,
                   &out->downstream};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    if (!(*all[i] >= 0))
      *all[i] = -1;
  return 0;
}
