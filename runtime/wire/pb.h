/* Reading the protobuf wire format by hand, one field at a time: the few
 * messages the runtime decodes without protobuf-c's generated code (ORCA
 * load reports, grpc.health.v1 responses, reflection requests and the
 * FileDescriptorProtos it indexes). Pure, no allocation. */
#ifndef SLUICE_WIRE_PB_H
#define SLUICE_WIRE_PB_H

#include <stddef.h>
#include <stdint.h>

/* Wire types (groups, 3 and 4, are refused). */
enum {
  SLUICE__PB_VARINT = 0,
  SLUICE__PB_I64 = 1,
  SLUICE__PB_LEN = 2,
  SLUICE__PB_I32 = 5
};

/* The bytes still to read: [p, end). */
typedef struct sluice__pb {
  const uint8_t *p, *end;
} sluice__pb;

/* A varint. Returns 0, or -1 when truncated or longer than 10 bytes. */
int sluice__pb_varint(sluice__pb *r, uint64_t *v);

/* The next field: its number (1 .. 2^29-1) and wire type; a LEN field's
 * payload, or an I64 / I32 field's 8 / 4 bytes (little-endian), in *data
 * and *len; a varint's value in *val (0 otherwise). Returns 1, 0 at the
 * end of the input, -1 when malformed (field number 0 or too large, a
 * group or reserved wire type, a truncated value, a length beyond the
 * input). */
int sluice__pb_field(sluice__pb *r, uint32_t *num, int *wt,
                     const uint8_t **data, size_t *len, uint64_t *val);

/* The little-endian 64-bit value at p (an I64 field's data). */
uint64_t sluice__pb_fixed64(const uint8_t *p);

#endif
