/* One protobuf message <-> one gRPC length-prefixed message, with optional
 * compression: the single place both client and server serialize and
 * decode, so size limits and compression rules are the same on both sides.
 */
#ifndef SLUICE_TRANSPORT_MESSAGE_H
#define SLUICE_TRANSPORT_MESSAGE_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "sluice/status.h"
#include "sluice/types.h"
#include "transport/buf.h"

/* Serializes msg into a malloc'd [5-byte prefix | body] (*out, owned by the
 * caller; *out_len counts the prefix). The serialized size is checked
 * against max (0 = no limit) before compression, as gRPC does. With
 * compression c != NONE the body is compressed and flagged.
 * Returns 0, SLUICE_ERR_TOO_LARGE (size in *size_out when non-NULL) or
 * SLUICE_ERR_NOMEM. */
int sluice__msg_pack(const ProtobufCMessage *msg, sluice_compression c,
                     uint32_t max, uint8_t **out, size_t *out_len,
                     size_t *size_out);

/* Decodes one received message: when compressed, decompresses with the
 * stream's encoding (enc; enc_ok 0 means the peer's grpc-encoding was
 * absent or unknown), never beyond max bytes; then unpacks with desc.
 * On OK *out is the message (free with protobuf_c_message_free_unpacked).
 * Otherwise the failure is described in err (size errlen):
 * RESOURCE_EXHAUSTED (decompressed over max), INTERNAL (no/unknown
 * encoding with the flag set, corrupt data, parse failure). */
sluice_status_code sluice__msg_unpack(const ProtobufCMessageDescriptor *desc,
                                      int compressed, int enc_ok,
                                      sluice_compression enc,
                                      const uint8_t *data, size_t len,
                                      uint32_t max, ProtobufCMessage **out,
                                      char *err, size_t errlen);

/* Raw path: one received message as the application's buffer (*out, the
 * caller's). block is the reassembly block msg was taken from
 * (sluice__recv_take; the message at block + SLUICE__FRAME_HEADER_LEN), or
 * NULL; it is consumed either way: wrapped without a copy when the message
 * is not compressed, freed otherwise. A compressed message is decompressed
 * (never beyond max) into a new buffer; one without a block is copied.
 * Failures as sluice__msg_unpack, and RESOURCE_EXHAUSTED when out of
 * memory. */
sluice_status_code
sluice__msg_to_buf(int compressed, int enc_ok, sluice_compression enc,
                   const uint8_t *data, size_t len, uint32_t max,
                   uint8_t *block, sluice_buf **out, char *err, size_t errlen);

/* Raw path: the [5-byte prefix | body] block (*out) that sends b, as
 * sluice__msg_pack's. Uncompressed (c NONE) that is b's own block with the
 * prefix written in its room: no copy. Compressed, a new block. b is not
 * consumed: after the block was queued call sluice__msg_framed(b, *out);
 * if queueing failed, free *out only when it is not b's block (the caller
 * still owns b). Returns 0, SLUICE_ERR_TOO_LARGE (over max, 0 = none; the
 * size in *size_out when non-NULL) or SLUICE_ERR_NOMEM. */
int sluice__msg_frame_buf(sluice_buf *b, sluice_compression c, uint32_t max,
                          uint8_t **out, size_t *out_len, size_t *size_out);

/* Lets go of b once its frame_buf block (out) was queued: frees the buffer
 * but not a block the queue now owns. */
void sluice__msg_framed(sluice_buf *b, const uint8_t *out);

/* Frees a frame_buf block (out) that could not be queued, unless it is
 * b's own. */
void sluice__msg_frame_drop(sluice_buf *b, uint8_t *out);

#endif
