/* What gRPC allows in metadata keys and values, and which received headers
 * belong to the protocol rather than to the application. */
#ifndef SLUICE_WIRE_METADATA_RULES_H
#define SLUICE_WIRE_METADATA_RULES_H

#include <stddef.h>

/* Non-zero when key[0..len) is 1 or more of [0-9a-z_.-]. */
int sluice__md_key_valid(const char *key, size_t len);

/* Non-zero when key[0..len) ends in "-bin" (its value is binary, base64 on
 * the wire). */
int sluice__md_is_bin(const char *key, size_t len);

/* Non-zero when every byte of v[0..len) is printable ASCII (0x20..0x7E). */
int sluice__md_ascii_value_valid(const void *v, size_t len);

/* Non-zero for a received header name that the protocol consumes and the
 * application does not see as metadata: pseudo-headers, content-type, te and
 * grpc-* except grpc-previous-rpc-attempts, grpc-retry-pushback-ms and
 * grpc-status-details-bin. user-agent is visible, as in gRPC. */
int sluice__md_is_reserved(const char *name, size_t len);

#endif
