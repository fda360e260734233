/* gRPC message compression (grpc-encoding / grpc-accept-encoding): gzip
 * (RFC 1952, what gRPC calls "gzip") through zlib, and the header values that
 * name it. Bytes in, bytes out; the caller decides when a message is
 * compressed (the flag byte of the 5-byte prefix) and which limits apply. */
#ifndef SLUICE_WIRE_COMPRESS_H
#define SLUICE_WIRE_COMPRESS_H

#include <stddef.h>
#include <stdint.h>

#include <sluice/status.h>
#include <sluice/types.h>

/* The grpc-accept-encoding value sluice sends: both sides always accept
 * identity and gzip. */
#define SLUICE__ACCEPT_ENCODING "identity,gzip"

/* Compresses in[0..len) with algorithm c (only SLUICE_COMPRESS_GZIP: one gzip
 * member, as gRPC's "gzip").
 *
 * The first `reserve` bytes of the result are left for the caller (the 5-byte
 * message prefix, so the message needs no second copy): the compressed bytes
 * start at *out + reserve and *out_len counts only them. On success *out is
 * malloc'd and owned by the caller; on failure *out and *out_len are
 * untouched. in may be NULL when len is 0.
 *
 * Returns 0; SLUICE_ERR_INVALID_ARG for an algorithm other than gzip or a NULL
 * pointer; SLUICE_ERR_NOMEM; SLUICE_ERR_SYSTEM if zlib itself refuses (a
 * broken zlib; not expected). */
int sluice__compress(sluice_compression c, const uint8_t *in, size_t len,
                     size_t reserve, uint8_t **out, size_t *out_len);

/* Decompresses in[0..len) (algorithm c) into a new buffer of at most max
 * bytes. The output grows geometrically but never beyond max + 1 bytes, and
 * the size the gzip trailer claims is not trusted, so a compression bomb
 * costs about max bytes of memory at most. SLUICE_COMPRESS_NONE copies.
 *
 * On OK *out is malloc'd and owned by the caller (never NULL, even for 0
 * bytes) and *out_len is its length. On error *out and *out_len are untouched
 * and *reason (static string) says why:
 *  - RESOURCE_EXHAUSTED "decompressed message larger than max";
 *  - INTERNAL "corrupt gzip data", "truncated gzip data", "trailing data
 *    after gzip stream" (gRPC messages are one gzip member), or an unknown
 *    algorithm;
 *  - RESOURCE_EXHAUSTED "out of memory".
 * reason may be NULL. */
sluice_status_code sluice__decompress(sluice_compression c, const uint8_t *in,
                                      size_t len, uint32_t max, uint8_t **out,
                                      size_t *out_len, const char **reason);

/* Parses a grpc-encoding value v[0..len): "identity" -> NONE, "gzip" ->
 * GZIP, exact and case-sensitive like gRPC. Returns 0 and sets *c, or -1
 * (*c untouched) for anything else: an encoding sluice does not implement
 * ("deflate", "snappy"), which the receiver answers with UNIMPLEMENTED. */
int sluice__encoding_parse(const char *v, size_t len, sluice_compression *c);

/* The wire name of c: "identity" or "gzip" (static; "identity" for an unknown
 * value, so a caller can never send a name it did not mean). */
const char *sluice__encoding_name(sluice_compression c);

/* Non-zero if the grpc-accept-encoding value v[0..len) (a comma-separated
 * list, spaces or tabs allowed around items: "identity, deflate, gzip")
 * contains c's name as a whole item. Items with parameters ("gzip;q=1") do
 * not match. NONE is always accepted (1), whatever v says: identity needs no
 * negotiation. v may be NULL when len is 0. */
int sluice__accept_encoding_has(const char *v, size_t len,
                                sluice_compression c);

#endif
