/* The two messages of grpc.health.v1 as bytes, for the client's health
 * checking (gRFC A17): HealthCheckRequest {string service = 1} out,
 * HealthCheckResponse {ServingStatus status = 1} in. Pure: no I/O. */
#ifndef SLUICE_WIRE_HEALTH_MSG_H
#define SLUICE_WIRE_HEALTH_MSG_H

#include <stddef.h>
#include <stdint.h>

/* The request for service as one gRPC message, [5-byte prefix | message],
 * malloc'd into *out (*len bytes). Returns 0, or -1 (out of memory, or a
 * name over 64 KiB). */
int sluice__health_request(const char *service, uint8_t **out, size_t *len);

/* Reads a response message (no prefix): *status gets the status field (0
 * when absent, as proto3 says); unknown fields are skipped. Returns 0, or
 * -1 for bytes that are not a valid message. */
int sluice__health_response(const uint8_t *p, size_t len, uint32_t *status);

#endif
