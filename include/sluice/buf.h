/** @file
 * sluice: message buffers for the raw (zero-copy) path.
 *
 * A sluice_buf holds one serialized message (the bytes of a protobuf
 * message, uncompressed, without gRPC's 5-byte prefix). Raw calls hand
 * received messages to the application as buffers the library does not
 * copy again, and take buffers to send without copying them:
 *
 *  - a received message is the buffer the library reassembled it in
 *    (a message split over DATA frames) or one copy of it (a message that
 *    fit in one frame, or a compressed one, after decompression);
 *  - a buffer handed to sluice_call_send_buf(),
 *    sluice_server_call_send_buf() or sluice_server_call_finish_buf() goes
 *    to the network from where it is: the library writes the 5-byte prefix
 *    into room kept in front of the data, so forwarding a received message
 *    (a proxy, a gateway, a middle tier) costs no copy in sluice. A message
 *    the call compresses is compressed into a new buffer.
 *
 * See sluice_call_start_raw() (call.h) and sluice_server_add_raw_service()
 * (server.h). Decode a buffer with protobuf-c when you need the message:
 * `protobuf_c_message_unpack(desc, NULL, sluice_buf_len(b),
 * sluice_buf_data(b))`.
 *
 * Ownership: a buffer has one owner at a time. sluice_buf_new() and
 * sluice_buf_pack() give one to the caller; the functions that take one
 * take it only when they return 0 (on any error the caller still owns it);
 * a raw on_message callback receives one. The owner frees it with
 * sluice_buf_free(). A buffer is not thread-safe, but it may move between
 * threads with its ownership.
 */
#ifndef SLUICE_BUF_H
#define SLUICE_BUF_H

#include "sluice/export.h"

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#ifdef __cplusplus
extern "C" {
#endif

/** One serialized message (opaque): sluice_buf_len() bytes at
 * sluice_buf_data(). */
typedef struct sluice_buf sluice_buf;

/** Allocates a buffer of len bytes (contents undefined) in *out, owned by
 * the caller. Fill it through sluice_buf_data(). Large buffers come from
 * the library's cache of recently freed message buffers. Thread-safe.
 * @param len the message's length in bytes (at most 4 GiB - 1, gRPC's
 *   largest message)
 * @param[out] out receives the buffer; untouched on failure
 * @retval 0 allocated
 * @retval SLUICE_ERR_INVALID_ARG out is NULL or len is over UINT32_MAX
 * @retval SLUICE_ERR_NOMEM out of memory */
SLUICE_API int sluice_buf_new(size_t len, sluice_buf **out);

/** Serializes msg into a new buffer of exactly its packed size, in *out
 * (owned by the caller). Thread-safe.
 * @param msg the message; read, not kept
 * @param[out] out receives the buffer; untouched on failure
 * @retval 0 serialized
 * @retval SLUICE_ERR_INVALID_ARG msg or out is NULL
 * @retval SLUICE_ERR_TOO_LARGE its packed size is over UINT32_MAX
 * @retval SLUICE_ERR_NOMEM out of memory */
SLUICE_API int sluice_buf_pack(const ProtobufCMessage *msg, sluice_buf **out);

/** The buffer's bytes, writable by its owner.
 * @param b the buffer, or NULL
 * @return its first byte (valid until it is freed or handed over), or NULL
 *   when b is NULL */
SLUICE_API uint8_t *sluice_buf_data(sluice_buf *b);

/** The buffer's length.
 * @param b the buffer, or NULL
 * @return its length in bytes; 0 when b is NULL */
SLUICE_API size_t sluice_buf_len(const sluice_buf *b);

/** Shortens the buffer to len bytes (the rest is dropped, no copy): for a
 * buffer allocated at an upper bound and filled with less.
 * @param b the buffer
 * @param len the new length, at most the present one
 * @retval 0 done
 * @retval SLUICE_ERR_INVALID_ARG b is NULL or len is over its length */
SLUICE_API int sluice_buf_truncate(sluice_buf *b, size_t len);

/** Frees a buffer the caller owns.
 * @param b the buffer, or NULL (nothing happens) */
SLUICE_API void sluice_buf_free(sluice_buf *b);

#ifdef __cplusplus
}
#endif
#endif
