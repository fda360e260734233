/* grpc-timeout: 1..8 ASCII digits and a unit (H M S m u n). */
#ifndef SLUICE_WIRE_TIMEOUT_H
#define SLUICE_WIRE_TIMEOUT_H

#include <stddef.h>
#include <stdint.h>

/* Longest encoding plus NUL: 8 digits, unit, NUL. */
#define SLUICE__TIMEOUT_MAX 16

/* Encodes a relative timeout of ns nanoseconds in the finest unit whose value,
 * rounded up, fits in 8 digits (as grpc-go does); 0 is "0n". NUL-terminates
 * out and returns the length without the NUL. */
size_t sluice__timeout_encode(uint64_t ns, char out[SLUICE__TIMEOUT_MAX]);

/* Parses s[0..n) into *ns. Returns 0, or -1 when s is not 1..8 digits followed
 * by one unit character. Hours too large for uint64_t saturate to
 * UINT64_MAX. */
int sluice__timeout_decode(const char *s, size_t n, uint64_t *ns);

#endif
