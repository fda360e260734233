/* ORCA load reports: protobuf wire format by hand (see orca.h). */
#include "wire/orca.h"

#include <string.h>

#include "wire/pb.h"

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
  p[0] = (uint8_t)(field << 3 | SLUICE__PB_I64);
  put_double(p + 1, d);
  return 9;
}

/* named_metrics entry {1: key, 2: value} (key shorter than 100 bytes, so
 * every length is one byte). */
static size_t put_metric(uint8_t *p, const char *key, double d) {
  size_t kl = strlen(key);
  size_t entry = 2 + kl + 9;
  p[0] = (uint8_t)(8u << 3 | SLUICE__PB_LEN);
  p[1] = (uint8_t)entry;
  p[2] = (uint8_t)(1u << 3 | SLUICE__PB_LEN);
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

/* ---- decoding (wire/pb.h) */

static double as_double(const uint8_t *p) {
  uint64_t u = sluice__pb_fixed64(p);
  double d;
  memcpy(&d, &u, sizeof d);
  return d;
}

/* One named_metrics entry; a missing value is 0 (the proto default). */
static int get_metric(const uint8_t *p, size_t len, sluice__orca *out) {
  sluice__pb r = {p, p + len};
  const uint8_t *key = NULL, *d;
  size_t kl = 0, n;
  double value = 0;
  uint32_t field;
  int wt, rv;
  uint64_t v;
  while ((rv = sluice__pb_field(&r, &field, &wt, &d, &n, &v)) == 1) {
    if (field == 1 && wt == SLUICE__PB_LEN) {
      key = d;
      kl = n;
    } else if (field == 2 && wt == SLUICE__PB_I64) {
      value = as_double(d);
    }
  }
  if (rv < 0)
    return -1;
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
  sluice__pb r = {p, p + len};
  double rps_int = -1;
  const uint8_t *d;
  size_t n;
  uint32_t field;
  int wt, rv;
  uint64_t v;
  while ((rv = sluice__pb_field(&r, &field, &wt, &d, &n, &v)) == 1) {
    double *dst = NULL;
    if (wt == SLUICE__PB_I64) {
      if (field == 1)
        dst = &out->cpu_utilization;
      else if (field == 2)
        dst = &out->mem_utilization;
      else if (field == 6)
        dst = &out->rps_fractional;
      else if (field == 9)
        dst = &out->application_utilization;
    }
    if (dst)
      *dst = as_double(d);
    else if (field == 3 && wt == SLUICE__PB_VARINT)
      rps_int = (double)v;
    else if (field == 8 && wt == SLUICE__PB_LEN && get_metric(d, n, out) != 0)
      return -1;
  }
  if (rv < 0)
    return -1;
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
