/* ORCA load reports (xds.data.orca.v3.OrcaLoadReport), the value of the
 * `endpoint-load-metrics-bin` trailer: hand-encoded protobuf, no I/O.
 *
 * Fields used (the rest are skipped when decoding):
 *   1  double cpu_utilization          (fixed64)
 *   2  double mem_utilization          (fixed64)
 *   3  uint64 rps (deprecated)         (varint; decode only, when 6 is absent)
 *   6  double rps_fractional           (fixed64)
 *   8  map<string, double> named_metrics: repeated length-delimited entries
 *      {1: string key, 2: double value}; sluice uses the keys "queue_ms",
 *      "in_flight" and "downstream".
 */
#ifndef SLUICE_WIRE_ORCA_H
#define SLUICE_WIRE_ORCA_H

#include <stddef.h>
#include <stdint.h>

/* A negative member is absent (not encoded; not found when decoding). */
typedef struct sluice__orca {
  double cpu_utilization;
  double mem_utilization;
  double rps_fractional;
  double queue_ms;                /* named_metrics["queue_ms"] */
  double in_flight;               /* named_metrics["in_flight"] */
  double application_utilization; /* field 9: the application's own
                                     measure (set by the server's user) */
  double downstream; /* named_metrics["downstream"]: how hard the services
                        the server's handlers call push back, 0..1 */
} sluice__orca;

/* Largest encoding of a sluice__orca (every member present). */
#define SLUICE__ORCA_MAX 112

/* Sets every member absent (-1). */
void sluice__orca_init(sluice__orca *r);

/* Encodes r into buf[0..cap). Returns the length, or 0 when cap is too
 * small (an empty report also encodes to 0 bytes). */
size_t sluice__orca_encode(const sluice__orca *r, uint8_t *buf, size_t cap);

/* Decodes an OrcaLoadReport: fields in any order, unknown fields and map
 * keys skipped, the last occurrence of a field wins. Members not present,
 * negative or NaN are set absent (-1). Returns 0, or -1 for malformed input
 * (truncated varint or value, length beyond the input, field number 0,
 * group or reserved wire type). */
int sluice__orca_decode(const uint8_t *p, size_t len, sluice__orca *out);

#endif
